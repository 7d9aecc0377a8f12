"""The heavy-hitters spec: ``bayesldp run`` scores PEM, SFP and TreeHist on a
Zipf population, the same seed giving the same files, and one-line errors naming the key."""

import csv
from pathlib import Path

import pytest

from bayesldp.workflows.cli import main
from bayesldp.workflows.spec import load_spec

ROOT = Path(__file__).resolve().parents[2]

SPEC = """
kind = "heavy_hitters"
[study]
name = "hh"
seed = 1
n = 20000
repeats = 2
top = 3
[population]
kind = "zipf"
k = 1000
s = 1.5
[bayes]
draws = 500
chains = 2
[[methods]]
name = "PEM"
epsilon = [2.0, 4.0]
options = { bits = 16, holdout = 0.2 }
[[methods]]
name = "SFP"
epsilon = 4.0
options = { m = 256 }
[[methods]]
name = "TreeHist"
epsilon = 4.0
options = { bits = 16, eta = 2 }
"""


def _rows(path):
    with path.open() as fh:
        return list(csv.DictReader(fh))


def test_heavy_hitters_spec_runs_and_repeats_itself(tmp_path, capsys):
    spec = tmp_path / "hh.toml"
    spec.write_text(SPEC)
    for name in ("a", "b"):
        assert main(["run", str(spec), "--out", str(tmp_path / name), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "| PEM | 4 |" in out and "| SFP | 4 |" in out and "| TreeHist | 4 |" in out
    rows = _rows(tmp_path / "a" / "metrics.csv")
    assert len(rows) == 2 * 4  # repeats x (method, epsilon)
    drop = {"seconds"}  # the only column that depends on the machine
    same = [{k: v for k, v in r.items() if k not in drop} for r in rows]
    again = [{k: v for k, v in r.items() if k not in drop}
             for r in _rows(tmp_path / "b" / "metrics.csv")]  # fmt: skip
    assert same == again
    # the three heaviest of Zipf(1.5) over 1,000 items hold 0.39, 0.14 and 0.07 of 20,000 users:
    # PEM at eps 4 finds them every time, and its posterior is scored
    pem4 = [r for r in rows if r["method"] == "PEM" and r["epsilon"] == "4.0"]
    assert all(float(r["recall"]) == 1.0 and float(r["precision"]) == 1.0 for r in pem4)
    assert all(r["coverage"] != "" and 0 <= float(r["coverage"]) <= 1 for r in pem4)
    report = (tmp_path / "a" / "report.md").read_text()
    assert "# hh (heavy_hitters spec)" in report and "## Posterior convergence" in report


def test_heavy_hitters_spec_without_posterior(tmp_path):
    spec = tmp_path / "hh.toml"
    spec.write_text(SPEC.replace("draws = 500", "posterior = false\ndraws = 500"))
    assert main(["run", str(spec), "--out", str(tmp_path / "o"), "--quiet", "--quick"]) == 0
    rows = _rows(tmp_path / "o" / "metrics.csv")
    assert len(rows) == 4 and all(r["coverage"] == "nan" for r in rows)


@pytest.mark.parametrize(
    "old, new, message",
    [
        ("top = 3", "top = 2000", "[study].top: 2000 is more than the population's 1000 items"),
        ("top = 3", "top = 3\nthreshold = 1.5", "[study].threshold: must lie in [0, 1)"),
        ('name = "SFP"', 'name = "RAPPOR"', "'RAPPOR' is not one of PEM, SFP, TreeHist"),
        ("epsilon = [2.0, 4.0]", "epsilon = [0, 4.0]", "[[methods]][0].epsilon: values must be"),
        ("{ bits = 16, eta = 2 }", "{ bits = 16, eta = 2, k = 3 }", "[[methods]][2].options:"),
        ("{ bits = 16, holdout = 0.2 }", "{ holdout = 1.5 }", "holdout: must lie in [0, 1)"),
        ("k = 1000", "k = 1", "[population].k: must be >= 2, got 1"),
        ("draws = 500", "draw = 500", "[bayes].draw: unknown key"),
    ],
)
def test_heavy_hitters_spec_errors_one_line(tmp_path, capsys, old, new, message):
    assert old in SPEC
    spec = tmp_path / "s.toml"
    spec.write_text(SPEC.replace(old, new, 1))
    assert main(["run", str(spec), "--out", str(tmp_path / "o"), "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err


def test_shipped_heavy_hitters_spec_loads():
    spec = load_spec(ROOT / "models" / "heavy_hitters.toml")
    assert spec["kind"] == "heavy_hitters"
    assert [m["name"] for m in spec["methods"]] == ["PEM", "SFP", "TreeHist"]
