"""PCKV report files as (user, key, value) rows and ``bayesldp estimate --key-values``: key
frequencies and mean values."""

import csv
import io
import json

import numpy as np
import pytest

import bayesldp
from bayesldp.estimators import estimate
from bayesldp.workflows.cli import main


def _pairs_file(tmp_path, mech, n=2000, seed=0):
    rng = np.random.default_rng(seed)
    keys = rng.integers(0, mech.d, n)
    values = np.clip(rng.normal(0.4 * keys - 0.4, 0.3), -1, 1)
    reports = mech.perturb(mech.sample_pairs(keys, values, rng=rng), rng=rng)
    frame = mech.reports_to_frame(reports)
    assert list(frame.columns) == ["key", "value"]
    frame.insert(0, "user", np.arange(n))
    path = tmp_path / "pairs.csv"
    frame.to_csv(path, index=False)
    return path, mech.tally(reports)


def test_key_value_rows_round_trip(tmp_path, capsys):
    mech = bayesldp.PCKV(3, 2.0, ell=2)
    path, tally = _pairs_file(tmp_path, mech)
    assert mech.tally_frame(mech.reports_to_frame(np.arange(mech.k))).n == mech.k
    args = ["estimate", str(path), "--mechanism", "PCKV-GRR", "--k", "3", "--epsilon", "2"]
    assert main([*args, "--ell", "2", "--method", "mle", "--output", "csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert len(rows) == mech.k  # the joint (key, sign) categories, dummy keys included
    got = [float(r["estimate"]) for r in rows]
    np.testing.assert_allclose(got, estimate(tally, "mle").frequencies, rtol=1e-9)
    # key frequencies and means: Gu et al.'s estimators with --method oracle
    assert main([*args, "--ell", "2", "--key-values", "--method", "oracle", "--output",
                 "json", "--labels", "a,b,c"]) == 0  # fmt: skip
    found = json.loads(capsys.readouterr().out)
    freq, mean = mech.unbiased_key_values(tally)
    assert [r["label"] for r in found["rows"]] == ["a", "b", "c"]
    np.testing.assert_allclose([r["frequency"] for r in found["rows"]], freq, rtol=1e-12)
    np.testing.assert_allclose([r["mean"] for r in found["rows"]], mean, rtol=1e-12)
    assert "gives no interval of the key frequencies" in found["notes"][0]
    # the other methods map their point estimate
    assert main([*args, "--ell", "2", "--key-values", "--method", "em"]) == 0
    out = capsys.readouterr().out
    freq, mean = mech.key_values(estimate(tally, "em").frequencies)
    assert "| key | frequency | mean |" in out and f"| 2 | {freq[2]:.4f} | {mean[2]:.4f} |" in out


@pytest.mark.filterwarnings("ignore::bayesldp.errors.ConvergenceWarning")  # tiny draws
def test_key_values_posterior_intervals(tmp_path, capsys):
    mech = bayesldp.PCKV(2, 2.0)
    path, _ = _pairs_file(tmp_path, mech, n=500)
    nc = tmp_path / "kv.nc"
    assert main(["estimate", str(path), "--mechanism", "PCKV", "--k", "2", "--epsilon", "2",
                 "--key-values", "--method", "posterior", "--draws", "100", "--tune", "100",
                 "--chains", "1", "--quiet", "--output", "json", "--save-posterior",
                 str(nc)]) == 0  # fmt: skip
    found = json.loads(capsys.readouterr().out)
    from bayesldp.bayes import load_fit

    draws = load_fit(nc).posterior["theta"].values.reshape(-1, mech.k)
    freq, mean = mech.key_values(draws)
    for key, row in enumerate(found["rows"]):
        assert row["frequency_5"] < row["frequency"] < row["frequency_95"]
        assert row["mean_5"] < row["mean"] < row["mean_95"]
        np.testing.assert_allclose(row["frequency"], freq[:, key].mean(), rtol=1e-12)
        np.testing.assert_allclose(row["mean_95"], np.quantile(mean[:, key], 0.95), rtol=1e-12)


def test_key_values_of_pckvpm(tmp_path, capsys):
    mech = bayesldp.PCKVPM(8, 1.0)
    rng = np.random.default_rng(0)
    holds = rng.random(3000) < 0.4
    path = tmp_path / "pm.csv"
    mech.reports_to_frame(mech.perturb_pairs(rng.uniform(0, 1, 3000), holds, rng=1)).to_csv(
        path, index=False
    )
    tally = mech.tally_frame(__import__("pandas").read_csv(path))
    assert main(["estimate", str(path), "--mechanism", "PCKV-PM", "--k", "8", "--epsilon", "1",
                 "--key-values", "--method", "em", "--output", "csv"]) == 0  # fmt: skip
    (row,) = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    freq, mean = mech.key_value(estimate(tally, "em").frequencies)
    np.testing.assert_allclose([float(row["frequency"]), float(row["mean"])], [freq, mean])


@pytest.mark.parametrize(
    "content, extra, message",
    [
        ("user,key,value\n1,5,1\n", [], "key 5 on CSV line 2 is not one of 0..3 (d = 3 keys"),
        ("user,key,value\n1,0,1\n2,1,0\n", [], "value 0 on CSV line 3 is not one of +1 or -1"),
        ("user,key,value\n1,0,1\n1,1,-1\n", [], "user 1 has more than one report (CSV line 2)"),
        ("key,value\n0,0.5\n", [], "column 'value' must hold integers"),
        ("key,value\n0,1\n", ["--labels", "a,b,c"], "3 names, but PCKV(d=3"),
        ("key,value\n0,1\n", ["--key-values", "--labels", "a,b"], "expected 3 labels"),
    ],
)
def test_key_value_bad_files_one_line(tmp_path, capsys, content, extra, message):
    path = tmp_path / "kv.csv"
    path.write_text(content)
    args = ["estimate", str(path), "--mechanism", "PCKV", "--k", "3", "--epsilon", "1", *extra]
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err


def test_key_value_aggregated_and_wrong_mechanism(tmp_path, capsys):
    mech = bayesldp.PCKV(2, 1.0)
    path = tmp_path / "agg.csv"
    path.write_text("key,value,count\n0,1,5\n1,-1,3\n2,1,2\n")
    tally = mech.tally_frame(__import__("pandas").read_csv(path))
    assert tally.n == 10 and tally.stat[[0, 3, 4]].tolist() == [5, 3, 2]
    good = tmp_path / "grr.csv"
    good.write_text("report\n0\n1\n")
    assert main(["estimate", str(good), "--mechanism", "GRR", "--k", "2", "--epsilon", "1",
                 "--key-values"]) == 2  # fmt: skip
    assert "--key-values: only for PCKV and PCKVPM, not GRR" in capsys.readouterr().err


def test_help_states_the_key_value_layout():
    from bayesldp.workflows.report_files import layout

    text = layout("PCKV")
    assert text.startswith("Columns key (0..d+ell-1) and value (+1 or -1), or report")
    assert text.endswith("columns report and count (how many reports had that value)")
