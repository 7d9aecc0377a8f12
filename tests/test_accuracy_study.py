"""Smoke and contract tests of the accuracy study (bayesldp.workflows.accuracy, its spec).

The study runs on a tiny configuration (a few seconds): the outputs have the documented columns,
errors are positive and finite, the same seed gives bit-identical numbers, a cell's numbers do not
depend on which other cells run, and spec errors name the key.  The Cramér-Rao helpers are
checked against :mod:`bayesldp.bounds` and the oracles' exact variances.
"""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

import bayesldp
from bayesldp import bounds
from bayesldp.workflows import accuracy as acc
from bayesldp.workflows.spec import SpecError, load_spec, validate_accuracy
from bayesldp.workflows.spec.accuracy import binomial_law, resolve_section

ROOT = Path(__file__).resolve().parents[1]

TINY = {
    "study": {"name": "tiny", "seed": 11},
    "mle": {
        "repeats": 3,
        "epsilon": [1.0, 3.0],
        "grr_k": [6],
        "grr_n": [300],
        "ue_mechanisms": ["OUE"],
        "ue_k": [4],
        "ue_n": [200],
        "full": {"repeats": 4},
    },
    "em_mr": {
        "repeats": 2,
        "mechanisms": ["GRR", "OLH"],
        "k": 6,
        "n": [400],
        "epsilon": [1.0],
        "populations": ["zipf", "dirichlet"],
        "estimators": ["norm_sub", "em", "ibu", "em_mr"],
        "cr_hashes": 40,
    },
    "sampling": {
        "repeats": 3,
        "n": 400,
        "k": 12,
        "epsilon": [2.0],
        "pi": [0.5, 1.0],
        "populations": [
            {"name": "bin", "trials": [11], "p": [0.5]},
            {"name": "sum", "trials": [5, 6], "p": [0.6, 0.4], "combine": "sum"},
        ],
    },
}


@pytest.fixture(scope="module")
def tiny_result():
    return acc.run_study(validate_accuracy(TINY, "tiny"))


def _without_time(df):
    return df.drop(columns=[c for c in ("seconds",) if c in df])


# ------------------------------------------------------------------------------ outputs
def test_records_have_the_documented_columns_and_sizes(tiny_result):
    records = tiny_result.records
    assert list(records) == ["mle", "em_mr", "sampling"]
    for name, df in records.items():
        expected = [*acc.CELL_COLUMNS[name], "repeat", "estimator", *acc.METRIC_COLUMNS[name]]
        assert list(df.columns) == expected
    # mle: (GRR K=6 n=300) + (OUE K=4 n=200), 2 epsilons, 3 repeats, 3 estimators
    assert len(records["mle"]) == 2 * 2 * 3 * 3
    assert len(records["em_mr"]) == 2 * 2 * 1 * 1 * 2 * 4  # pops, mechs, n, eps, reps, est
    assert len(records["sampling"]) == 2 * 1 * 2 * 3 * 4  # pops, eps, pi, reps, estimators
    assert list(tiny_result.checks.columns) == acc.CHECK_COLUMNS
    assert len(tiny_result.checks) == 2 * 1 * 2 * 3  # pops, eps, pi, (c, g, c_hat)


def test_errors_are_positive_and_finite(tiny_result):
    for df in tiny_result.records.values():
        for column in ("mse", "tv", "cr_ratio"):
            values = df[column].to_numpy(dtype=float)
            assert np.all(np.isfinite(values)) and np.all(values > 0), column
    em = tiny_result.records["em_mr"]
    assert em.loc[em["estimator"] == "em", "iterations"].min() >= 1


def test_pi_one_makes_every_sampling_estimator_the_same(tiny_result):
    df = tiny_result.records["sampling"]
    at_one = df[df["pi"] == 1.0].pivot_table(
        index=["population", "repeat"], columns="estimator", values="mse"
    )
    for column in ("g", "c_hat", "oracle_sampled"):
        np.testing.assert_allclose(at_one[column], at_one["c"], rtol=1e-9)


def test_same_seed_same_numbers_and_other_seed_other_numbers(tiny_result):
    again = acc.run_study(validate_accuracy(TINY, "tiny"))
    for name, df in tiny_result.records.items():
        assert _without_time(df).equals(_without_time(again.records[name])), name
    assert tiny_result.checks.equals(again.checks)
    other = copy.deepcopy(TINY)
    other["study"]["seed"] = 12
    moved = acc.run_study(validate_accuracy(other, "tiny"), sections=["mle"])
    assert not np.allclose(moved.records["mle"]["mse"], tiny_result.records["mle"]["mse"])


def test_a_cell_does_not_depend_on_the_other_cells(tiny_result):
    raw = copy.deepcopy(TINY)
    raw["mle"]["epsilon"] = [3.0]
    alone = acc.run_study(validate_accuracy(raw, "tiny"), sections=["mle"]).records["mle"]
    both = tiny_result.records["mle"]
    both = both[both["epsilon"] == 3.0].reset_index(drop=True)
    assert _without_time(alone).equals(_without_time(both))


def test_full_overlay_and_repeats_override():
    spec = validate_accuracy(TINY, "tiny")
    assert resolve_section(spec["mle"], full=True)["repeats"] == 4
    assert resolve_section(spec["mle"], full=False)["repeats"] == 3
    result = acc.run_study(spec, full=True, sections=["mle"], repeats=2)
    assert result.records["mle"]["repeat"].max() == 1
    with pytest.raises(SpecError, match="repeats: must be >= 2"):
        acc.run_study(spec, sections=["mle"], repeats=1)
    with pytest.raises(SpecError, match="'nope' is not one of"):
        acc.run_study(spec, sections=["nope"])


def test_markdown_report_and_verdicts(tiny_result):
    text = acc.render_markdown(tiny_result, acc.machine_info(), "python x", 1.0)
    for heading in ("## Verdicts", "## Lopuhaä-Zwakenberg et al. 2020", "## Ye et al.",
                    "## Biswas et al. 2022", "Machine:"):  # fmt: skip
        assert heading in text
    verdicts = acc.all_verdicts(tiny_result)
    assert {v.paper for v in verdicts} == set(acc.PAPERS.values())
    assert {v.verdict for v in verdicts} <= {"holds", "partly", "does not hold", "not tested"}


def test_cli_writes_the_report_and_reports_spec_errors(tmp_path, capsys):
    spec = tmp_path / "tiny.toml"
    spec.write_text(
        '[study]\nname = "t"\nseed = 3\n\n[mle]\nrepeats = 2\nepsilon = [2.0]\n'
        "grr_k = [4]\ngrr_n = [100]\nue_n = []\n",
        encoding="utf-8",
    )
    out = tmp_path / "report.md"
    assert acc.main([str(spec), "--out", str(out), "--records", str(tmp_path / "r.csv")]) == 0
    assert "## Lopuhaä-Zwakenberg et al. 2020" in out.read_text(encoding="utf-8")
    assert (tmp_path / "r.csv").read_text(encoding="utf-8").startswith("mechanism,k,n,epsilon")
    spec.write_text('[study]\nname = "t"\n\n[mle]\nepsilon = [0]\n', encoding="utf-8")
    assert acc.main([str(spec)]) == 2
    assert "[mle].epsilon[0]: must be finite and > 0" in capsys.readouterr().err


# ------------------------------------------------------------------------------ the spec
def test_shipped_spec_is_valid_in_both_sizes():
    spec = load_spec(ROOT / "models" / "accuracy.toml", kind="accuracy")
    assert set(spec) == {"kind", "study", "mle", "em_mr", "sampling"}
    assert spec["kind"] == "accuracy"
    full = resolve_section(spec["mle"], full=True)
    assert 1024 in full["grr_k"] and full["repeats"] >= 100
    assert max(resolve_section(spec["em_mr"], full=True)["n"]) >= 300_000
    assert spec["sampling"]["populations"][0]["name"] == "Bin(100,.5)"


def _patched(section, key, value, sub=None):
    raw = copy.deepcopy(TINY)
    target = raw[section] if sub is None else raw[section].setdefault(sub, {})
    target[key] = value
    return raw


@pytest.mark.parametrize(
    "raw, message",
    [
        (_patched("mle", "colour", 1), r"tiny: \[mle\]\.colour: unknown key"),
        (_patched("mle", "repeats", "ten"), r"\[mle\]\.repeats: expected an integer, got 'ten'"),
        (_patched("mle", "repeats", 1), r"\[mle\]\.repeats: must be >= 2, got 1"),
        (_patched("mle", "ue_k", [20]), r"\[mle\]\.ue_k\[0\]: must be <= 12"),
        (_patched("mle", "estimators", ["magic"]), r"\[mle\]\.estimators\[0\]: 'magic' is not"),
        (_patched("mle", "epsilon", [1.0, -2.0]), r"\[mle\]\.epsilon\[1\]: must be finite"),
        (_patched("mle", "grr_k", [1]), r"\[mle\]\.grr_k\[0\]: must be >= 2"),
        (_patched("mle", "k", 3, sub="full"), r"\[mle\.full\]\.k: unknown key"),
        (_patched("em_mr", "n", [10, 0], sub="full"), r"\[em_mr\.full\]\.n\[1\]: must be >= 1"),
        (_patched("em_mr", "mechanisms", ["OUE"]), r"\[em_mr\]\.mechanisms\[0\]: 'OUE' is not"),
        (_patched("em_mr", "populations", ["pareto"]), r"\[em_mr\]\.populations\[0\]: 'pareto'"),
        (_patched("em_mr", "k", None), r"\[em_mr\]\.k: expected an integer"),
        (_patched("sampling", "pi", [0.5, 0.0]), r"\[sampling\]\.pi\[1\]: must lie in \(0, 1\]"),
        (_patched("sampling", "estimators", ["T"]), r"\[sampling\]\.estimators\[0\]: 'T' is not"),
        (_patched("sampling", "k", 8), r"\[sampling\]\.k: population 'bin'"),
        (
            _patched("sampling", "populations", [{"name": "x", "trials": [3], "p": [0.5, 0.2]}]),
            r"\[\[sampling\.populations\]\]\[0\]\.p: needs 1 values",
        ),
        (
            _patched("sampling", "populations", [{"name": "x", "trials": [3], "p": [1.5]}]),
            r"\[\[sampling\.populations\]\]\[0\]\.p\[0\]: must lie in \[0, 1\]",
        ),
        ({"mle": TINY["mle"]}, r"tiny: \[study\]: missing"),
        ({"study": TINY["study"]}, r"no section to run"),
        ({**TINY, "extra": {}}, r"tiny: \[extra\]: unknown table"),
    ],
)
def test_spec_errors_name_the_key(raw, message):
    with pytest.raises(SpecError, match=message):
        validate_accuracy(raw, "tiny")


def test_missing_spec_file_and_bad_toml(tmp_path):
    with pytest.raises(SpecError, match="no such spec file"):
        load_spec(tmp_path / "none.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("[study\n", encoding="utf-8")
    with pytest.raises(SpecError, match="not valid TOML"):
        load_spec(bad)


# ------------------------------------------------------------------------------ helpers
def test_binomial_populations():
    same = {"name": "s", "trials": [50, 50], "p": [0.5, 0.5], "combine": "sum", "weights": None}
    np.testing.assert_allclose(
        binomial_law(same), stats.binom.pmf(np.arange(101), 100, 0.5), atol=1e-15
    )
    mix = {"name": "m", "trials": [3, 5], "p": [0.2, 0.7], "combine": "mixture", "weights": [1, 3]}
    expected = np.zeros(6)
    expected[:4] += 0.25 * stats.binom.pmf(np.arange(4), 3, 0.2)
    expected += 0.75 * stats.binom.pmf(np.arange(6), 5, 0.7)
    np.testing.assert_allclose(binomial_law(mix), expected, atol=1e-15)
    theta = acc.sampling_theta({**same, "trials": [50, 50]}, 100)
    assert theta.shape == (100,) and abs(theta.sum() - 1) < 1e-12


@pytest.mark.parametrize("k, eps", [(3, 0.5), (7, 2.0)])
def test_grr_cramer_rao_closed_form(k, eps):
    theta = np.random.default_rng(k).dirichlet(np.full(k, 0.5))
    mech = bayesldp.GRR(k, eps)
    exact = np.trace(bounds.cramer_rao(mech, theta, 1000))
    assert acc.grr_cr_trace(mech, theta, 1000) == pytest.approx(exact, rel=1e-10)
    # the GRR oracle attains it: fixed-population variance + the users' own sampling variance
    oracle = np.sum(mech.oracle_variance(theta, 1000) + theta * (1 - theta) / 1000)
    assert acc.grr_cr_trace(mech, theta, 1000) == pytest.approx(oracle, rel=1e-10)


def test_unbiased_oracles_respect_the_cramer_rao_bound():
    theta = np.random.default_rng(3).dirichlet(np.full(6, 0.5))
    for mech in (bayesldp.OUE(6, 1.0), bayesldp.OLH(6, 1.0)):
        trace = acc.cr_trace(mech, theta, 500, hashes=400, rng=0)
        oracle = np.sum(mech.oracle_variance(theta, 500) + theta * (1 - theta) / 500)
        assert 0 < trace <= oracle * 1.01, mech
    again = acc.cr_trace(bayesldp.OLH(6, 1.0), theta, 500, hashes=400, rng=0)
    assert again == acc.cr_trace(bayesldp.OLH(6, 1.0), theta, 500, hashes=400, rng=0)


# ------------------------------------------------------------------------------ statistics
def _synthetic(mse_by_cell):
    """Per-repeat records of the mle section from {(n, estimator): [mse per repeat]}."""
    rows = []
    for (n, est), values in mse_by_cell.items():
        for r, v in enumerate(values):
            rows.append(
                {"mechanism": "GRR", "k": 1024, "n": n, "epsilon": 1.0, "repeat": r}
                | {"estimator": est, "mse": v, "tv": v, "cr_ratio": v, "seconds": 0.0}
            )
    return acc.pd.DataFrame(rows)


def test_paired_ratio_and_z():
    df = _synthetic({(100, "mle"): [1.0, 2.0, 3.0, 6.0], (100, "norm_sub"): [2.0, 2.0, 4.0, 8.0]})
    pr = acc.paired(df, "mle", "mle", "norm_sub")
    d = np.array([-1.0, 0.0, -1.0, -2.0])
    assert pr["ratio"].iloc[0] == pytest.approx(3.0 / 4.0)
    assert pr["z"].iloc[0] == pytest.approx(d.mean() / (d.std(ddof=1) / 2))
    summary = acc.summarise(df, "mle")
    row = summary[summary["estimator"] == "mle"].iloc[0]
    assert row["mse_mean"] == 3.0 and row["mse_sd"] == pytest.approx(np.std([1, 2, 3, 6], ddof=1))


@pytest.mark.parametrize("mle_small, verdict", [(0.3, "holds"), (0.6, "does not hold")])
def test_mle_verdicts_follow_the_numbers(mle_small, verdict):
    jitter = np.array([0.0, 0.01, -0.01, 0.02, -0.02])
    cells = {
        (10_000, "oracle"): 1.0 + jitter,
        (10_000, "norm_sub"): 0.5 + jitter,
        (10_000, "mle"): mle_small + 0.5 * jitter,
        (1_000_000, "oracle"): 1.0 + jitter,
        (1_000_000, "norm_sub"): 0.5 + jitter,
        (1_000_000, "mle"): 0.5 + jitter,
    }
    verdicts = acc.verdicts_mle(_synthetic(cells), {})
    assert [v.verdict for v in verdicts] == ["holds", "holds", verdict]
