"""Study specs of key-value data (``[population].kind = "key_value"``): PCKV and PCKVPM."""

import csv
from pathlib import Path

import numpy as np
import pytest

from bayesldp.workflows.cli import main
from bayesldp.workflows.key_value_study import key_population, sample_users
from bayesldp.workflows.spec import SpecError, load_spec, validate_study
from bayesldp.workflows.study import run_study

MODELS = Path(__file__).resolve().parents[2] / "models"
KV = {
    "study": {"name": "kv", "n": 20_000, "seed": 3},
    "population": {
        "kind": "key_value",
        "k": 3,
        "key_frequencies": [0.6, 0.3, 0.1],
        "means": [0.5, -0.5, 0.0],
    },
    "estimators": {"methods": ["oracle", "mle"]},
    "mechanisms": [
        {"name": "PCKV", "epsilon": 3.0, "ell": 3},
        {"name": "PCKVPM", "epsilon": 3.0, "bins": 4},
    ],
}


@pytest.mark.parametrize(
    "population, mechanism, message",
    [
        ({"kind": "dirichlet", "k": 6}, {"name": "PCKV", "epsilon": 2.0, "ell": 2},
         r"\[\[mechanisms\]\]\[0\]: PCKV reads key-value data, not \[population\]\.kind = "
         r"'dirichlet'"),
        ({"kind": "key_value", "k": 3}, {"name": "GRR", "epsilon": 1.0},
         r"\[\[mechanisms\]\]\[0\]: GRR reads categories, not \[population\]\.kind = "
         r"'key_value': a key-value population takes PCKV or PCKVPM"),
        ({"kind": "uniform", "k": 3}, {"name": "PCKVPM", "epsilon": 1.0},
         r"PCKVPM reads key-value data"),
    ],
)  # fmt: skip
def test_a_mechanism_and_a_population_that_do_not_fit_are_refused(population, mechanism, message):
    raw = {"study": {"name": "x", "n": 100}, "population": population, "mechanisms": [mechanism]}
    with pytest.raises(SpecError, match=message):
        validate_study(raw)


@pytest.mark.parametrize(
    "patch, message",
    [
        ({"key_frequencies": [0.5, 0.5]}, r"\[population\]\.key_frequencies: need 3 values"),
        ({"key_frequencies": [0.5, 1.5, 0.1]}, r"key_frequencies: values must lie in \[0, 1\]"),
        ({"means": [0.0, 2.0, 0.0]}, r"\[population\]\.means: values must lie in \[-1, 1\]"),
        ({"pairs": 0}, r"\[population\]\.pairs: must be > 0"),
        ({"keys": "pareto"}, r"\[population\]\.keys: 'pareto' is not one"),
    ],
)
def test_bad_key_value_populations_name_the_key(patch, message):
    raw = KV | {"population": KV["population"] | patch}
    with pytest.raises(SpecError, match=message):
        validate_study(raw)


def test_pckvpm_bins_is_pckvpm_s_alone():
    raw = KV | {"mechanisms": [{"name": "PCKV", "epsilon": 1.0, "bins": 4}]}
    with pytest.raises(SpecError, match=r"PCKV: does not take bins"):
        validate_study(raw)


def test_the_population_has_its_frequencies_and_means():
    population = validate_study(KV)["population"]
    rng = np.random.default_rng(0)
    freqs, means = key_population(population, rng)
    held, values = sample_users(freqs, means, 50_000, 2.0, rng)
    np.testing.assert_allclose(held.mean(axis=0), freqs, atol=0.01)
    assert np.all(np.abs(values) <= 1) and np.all(values[~held] == 0)
    np.testing.assert_allclose(values.sum(axis=0) / held.sum(axis=0), means, atol=0.02)
    zipf = validate_study(KV | {"population": {"kind": "key_value", "k": 4, "pairs": 2.0}})
    freqs, means = key_population(zipf["population"], rng)
    assert np.all(freqs <= 1) and freqs[0] == 1.0 and np.all(np.abs(means) <= 1)


def test_a_key_value_study_estimates_each_key_s_frequency_and_mean():
    result = run_study(validate_study(KV))
    assert {r["mechanism"] for r in result.metrics} == {"PCKV", "PCKVPM"}
    assert all("mean_mae" in r for r in result.metrics)
    rows = [e for e in result.estimates if e["mechanism"] == "PCKV"]
    assert len(rows) == 2 * 3  # two methods, three keys
    truth = np.array([e["truth"] for e in rows[:3]])
    np.testing.assert_allclose(truth, [0.6, 0.3, 0.1], atol=0.02)
    for e in rows:  # ell = k: no user holds more than ell keys, so nothing is under-counted
        assert abs(e["estimate"] - e["truth"]) < 0.05
        assert abs(e["mean_estimate"] - e["mean_truth"]) < 0.3
    pm = [e for e in result.estimates if e["mechanism"] == "PCKVPM" and e["method"] == "mle"]
    assert len(pm) == 3
    assert all(abs(e["estimate"] - e["truth"]) < 0.2 for e in pm)


def test_bayesldp_run_writes_the_key_table(tmp_path, capsys):
    path = tmp_path / "kv.toml"
    path.write_text(
        'kind = "study"\n[study]\nname = "kv"\nn = 4000\n[population]\nkind = "key_value"\n'
        'k = 3\nlabels = ["a", "b", "c"]\n[[mechanisms]]\nname = "PCKV-GRR"\nepsilon = 2.0\n'
        "ell = 2\n"
    )
    out = tmp_path / "out"
    assert main(["run", str(path), "--out", str(out), "--quiet", "--no-figures"]) == 0
    printed = capsys.readouterr().out
    assert "| mechanism | epsilon | method | key | frequency | truth | mean | truth |" in printed
    assert "| PCKV | 2 | oracle | a |" in printed
    report = (out / "report.md").read_text()
    assert "## Key frequencies and mean values" in report and "MAE of the means" in report
    with (out / "estimates.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 3 and {"mean_truth", "mean_estimate", "mean_lower_90"} <= set(rows[0])


def test_the_shipped_key_value_spec_runs(tmp_path):
    spec = load_spec(MODELS / "key_value.toml")
    assert spec["population"]["kind"] == "key_value"
    out = tmp_path / "out"
    args = ["run", str(MODELS / "key_value.toml"), "--out", str(out), "--quick", "--quiet"]
    assert main(args) == 0
    assert (out / "report.md").is_file()
