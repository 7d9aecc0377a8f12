"""The rounds and attributes specs: ``bayesldp run`` on small specs, the
same seed giving the same files, and one-line errors naming the key."""

import csv
import tomllib

import numpy as np
import pytest

from bayesldp.workflows.cli import main
from bayesldp.workflows.spec import load_spec

ROUNDS = """
kind = "rounds"
[study]
name = "r"
seed = 3
n = 400
rounds = 3
[population]
kind = "dirichlet"
k = 3
[drift]
step = 0.5
redraw = 0.5
[estimators]
methods = ["oracle", "mle"]
[[mechanisms]]
name = "L-GRR"
epsilon = [1.0, 2.0]
[[mechanisms]]
name = "GRR"
epsilon = 1.0
"""

ATTRIBUTES = """
kind = "attributes"
[study]
name = "a"
seed = 3
n = 500
repeats = 2
[[attributes]]
kind = "uniform"
k = 3
[[attributes]]
kind = "zipf"
k = 4
[estimators]
methods = ["mle"]
[[protocols]]
name = "SPL"
epsilon = 1.0
[[protocols]]
name = "RSFD"
epsilon = [1.0, 2.0]
base = "SUE"
fake = "random"
"""


def _rows(path):
    with path.open() as fh:
        return list(csv.DictReader(fh))


def test_rounds_spec_runs_and_repeats_itself(tmp_path, capsys):
    spec = tmp_path / "r.toml"
    spec.write_text(ROUNDS)
    for name in ("a", "b"):
        assert main(["run", str(spec), "--out", str(tmp_path / name), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "| LGRR | 2 | mle |" in out and "TV round 3" in out
    metrics = _rows(tmp_path / "a" / "metrics.csv")
    assert len(metrics) == 3 * 2 * 3  # (mechanism, epsilon) entries x methods x rounds
    estimates = _rows(tmp_path / "a" / "estimates.csv")
    assert len(estimates) == 3 * 2 * 3 * 3
    for name in ("metrics.csv", "estimates.csv", "report.md"):
        assert (tmp_path / "a" / name).read_text() == (tmp_path / "b" / name).read_text()
    # the truth of a round is its users' frequencies: it moves (drift), and sums to 1
    truth = {(r["round"], r["category"]): float(r["truth"]) for r in estimates}
    by_round = [[truth[(str(t), str(x))] for x in range(3)] for t in (1, 2, 3)]
    np.testing.assert_allclose(np.sum(by_round, axis=1), 1.0)
    assert by_round[0] != by_round[2]
    assert "# r (rounds spec)" in (tmp_path / "a" / "report.md").read_text()


@pytest.mark.filterwarnings("ignore::bayesldp.errors.ConvergenceWarning")  # tiny draws
@pytest.mark.slow
def test_rounds_spec_fits_every_round_at_once(tmp_path, capsys):
    spec = tmp_path / "r.toml"
    spec.write_text(ROUNDS + "[bayes]\ndraws = 40\ntune = 40\nchains = 1\n")
    assert main(["run", str(spec), "--out", str(tmp_path / "o"), "--quiet"]) == 0
    metrics = _rows(tmp_path / "o" / "metrics.csv")
    assert sum(r["method"] == "fit_rounds" for r in metrics) == 3 * 3
    report = (tmp_path / "o" / "report.md").read_text()
    assert (
        "## Posterior convergence (every fit)" in report and "LGRR, epsilon 2, fit_rounds" in report
    )


def test_attributes_spec_runs(tmp_path, capsys):
    spec = tmp_path / "a.toml"
    spec.write_text(ATTRIBUTES)
    assert main(["run", str(spec), "--out", str(tmp_path / "o"), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "| SPL[GRR] | 1 | mle |" in out and "| RSFD[SUE] | 2 | mle |" in out
    metrics = _rows(tmp_path / "o" / "metrics.csv")
    assert len(metrics) == 2 * 3 * 2  # repeats x (protocol, epsilon) x attributes
    estimates = _rows(tmp_path / "o" / "estimates.csv")
    assert len(estimates) == 2 * 3 * (3 + 4)
    assert {r["attribute"] for r in metrics} == {"0", "1"}


def test_attributes_spec_rsfd_budget(tmp_path, capsys):
    """A spec's RSFD spends its epsilon on the whole record unless it says budget = "paper",
    which the report names."""
    from bayesldp.workflows.spec.attributes import make_protocol, validate_attributes

    text = ATTRIBUTES.replace('fake = "random"', 'fake = "random"\nbudget = "paper"')
    for source, budget in ((ATTRIBUTES, "record"), (text, "paper")):
        raw = tomllib.loads(source)
        raw.pop("kind")
        spec = validate_attributes(raw)
        rsfd = make_protocol(spec["protocols"][1], [3, 4], 2.0)
        assert rsfd.budget == budget
        realised = rsfd.realised_epsilon()
        assert realised <= 2.0 + 1e-12 if budget == "record" else realised > 2.5
    path = tmp_path / "a.toml"
    path.write_text(text.replace("repeats = 2", "repeats = 1"))
    assert main(["run", str(path), "--out", str(tmp_path / "o"), "--quiet"]) == 0
    assert "| RSFD[SUE] (budget paper) | 2 | mle |" in capsys.readouterr().out


def test_attributes_spec_posteriors(tmp_path):
    spec = tmp_path / "a.toml"
    spec.write_text(ATTRIBUTES.replace("repeats = 2", "repeats = 1")
                    + '[bayes]\nmethod = "exact"\ndraws = 50\nchains = 1\n')  # fmt: skip
    spec.write_text(spec.read_text().replace("n = 500", "n = 30"))
    assert main(["run", str(spec), "--out", str(tmp_path / "o"), "--quiet"]) == 0
    metrics = _rows(tmp_path / "o" / "metrics.csv")
    assert sum(r["method"] == "posterior_mean (exact)" for r in metrics) == 3 * 2


@pytest.mark.parametrize(
    "text, old, new, message",
    [
        ("r", "rounds = 3", "rounds = 1", "[study].rounds: must be >= 2, got 1"),
        ("r", "redraw = 0.5", "redraw = 1.5", "[drift].redraw: must lie in [0, 1], got 1.5"),
        ("r", "step = 0.5", "step = -1", "[drift].step: must be >= 0"),
        ("r", 'name = "GRR"', 'name = "SPL"', "[[mechanisms]][1].name: mechanism: unknown name"),
        ("r", "k = 3", "k = 1", "[population].k: must be >= 2, got 1"),
        ("r", "[drift]", "[drift]\nspeed = 1", "[drift].speed: unknown key"),
        ("a", 'name = "SPL"', 'name = "SPL"\nfake = "zero"', "only RSFD reports fake data"),
        ("a", 'name = "SPL"', 'name = "XYZ"', "'XYZ' is not one of SPL, SMP, RSFD"),
        ("a", 'kind = "zipf"\nk = 4', 'kind = "zipf"', "[[attributes]][1].k: missing"),
        ("a", '[[attributes]]\nkind = "uniform"\nk = 3\n', "", "at least 2 [[attributes]]"),
        ("a", "epsilon = 1.0", "epsilon = 0", "[[protocols]][0].epsilon: values must be > 0"),
        ("a", 'name = "SPL"', 'name = "SPL"\nbudget = "paper"', "budget: only RSFD has a choice"),
        ("a", 'fake = "random"', 'fake = "random"\nbudget = "x"', "'x' is not one of record"),
    ],
)
def test_grouped_spec_errors_one_line(tmp_path, capsys, text, old, new, message):
    source = ROUNDS if text == "r" else ATTRIBUTES
    assert old in source
    spec = tmp_path / "s.toml"
    spec.write_text(source.replace(old, new, 1))
    assert main(["run", str(spec), "--out", str(tmp_path / "o"), "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err


def test_grouped_kinds_are_recognised_without_kind(tmp_path):
    for text, kind in ((ROUNDS, "rounds"), (ATTRIBUTES, "attributes")):
        spec = tmp_path / f"{kind}.toml"
        spec.write_text(text.replace(f'kind = "{kind}"\n', "", 1))
        assert load_spec(spec)["kind"] == kind
