"""The README's Python example runs as written, and .ci/run uses the README's test command."""

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_python_example_runs(capsys):
    text = README.read_text()
    block = re.search(r"## In Python\n\n```python\n(.*?)```", text, re.S).group(1)
    exec(compile(block, "README.md", "exec"), {})
    out = capsys.readouterr().out
    assert "r_hat" in out


def test_ci_reads_the_readme_test_command():
    ci = (README.parent / ".ci" / "run").read_text()
    assert "<!-- test-command -->" in ci and "<!-- test-command -->" in README.read_text()


def test_readme_explains_labels():
    """A paragraph on named categories, and the estimate option."""
    text = README.read_text()
    section = text.split("### Named categories")[1].split("## ")[0]
    for needle in ("bayesldp.encode(values, categories=", "labels = [...]", "`label` column",
                   "--labels a,b,c"):  # fmt: skip
        assert needle in section, needle
    assert "`--labels a,b,c` or `--labels-file FILE`" in text
