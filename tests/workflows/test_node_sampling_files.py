"""Node-sampling rounds from report files: ``bayesldp estimate --nodes N --sampling PI`` gives
Biswas et al. 2022's unbiased estimator of each round."""

import csv
import io

import numpy as np
import pandas as pd
import pytest

import bayesldp
from bayesldp.estimators import estimate
from bayesldp.workflows.cli import main


@pytest.fixture
def sampled_rounds(tmp_path):
    sampler = bayesldp.NodeSampling(bayesldp.GRR(4, 1.0), pi=0.3)
    rng = np.random.default_rng(0)
    x = rng.integers(0, 4, 3000)
    frames, rounds = [], []
    for t in (1, 2):
        sampled = sampler.perturb(x, rng)
        rounds.append(sampled)
        frames.append(pd.DataFrame({"user": sampled.nodes, "round": t, "report": sampled.reports}))
    path = tmp_path / "sampled.csv"
    pd.concat(frames).to_csv(path, index=False)
    return sampler, rounds, path


@pytest.mark.parametrize("estimator", ["g", "c_hat", "T"])
def test_node_sampling_rounds_give_the_papers_estimator(sampled_rounds, capsys, estimator):
    sampler, rounds, path = sampled_rounds
    assert main(["estimate", str(path), "--mechanism", "GRR", "--k", "4", "--epsilon", "1",
                 "--nodes", "3000", "--sampling", "0.3", "--sampling-estimator", estimator,
                 "--method", "oracle", "--output", "csv"]) == 0  # fmt: skip
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    for t, sampled in enumerate(rounds, start=1):
        got = [float(r["estimate"]) for r in rows if r["round"] == str(t)]
        np.testing.assert_allclose(got, sampler.frequencies(sampled, estimator), rtol=1e-12)
        # the interval is the oracle's exact standard error of the round's tally
        tally = sampler.round_tally(sampled, estimator)
        half = 1.6448536269514722 * estimate(tally, "oracle").std_errors
        upper = [float(r["upper_95"]) for r in rows if r["round"] == str(t)]
        np.testing.assert_allclose(upper, np.asarray(got) + half, rtol=1e-12)


def test_node_sampling_one_file_and_errors(sampled_rounds, tmp_path, capsys):
    sampler, rounds, _ = sampled_rounds
    one = tmp_path / "one.csv"
    pd.DataFrame({"report": rounds[0].reports}).to_csv(one, index=False)
    args = ["estimate", str(one), "--mechanism", "GRR", "--k", "4", "--epsilon", "1"]
    assert main([*args, "--nodes", "3000", "--sampling", "0.3", "--method", "oracle",
                 "--output", "csv"]) == 0  # fmt: skip
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    np.testing.assert_allclose([float(r["estimate"]) for r in rows],
                               sampler.frequencies(rounds[0], "g"), rtol=1e-12)  # fmt: skip
    for extra, message in [
        (["--nodes", "3000"], "--sampling: node sampling needs both --nodes and --sampling"),
        (["--nodes", "10", "--sampling", "0.3"], "n: expected the number of nodes, at least"),
        (["--nodes", "3000", "--sampling", "1.5"], "pi: "),
    ]:
        assert main([*args, *extra]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and message in err[0], (extra, err)
    assert main([*args[:3], "SUE", *args[4:], "--nodes", "3000", "--sampling", "0.3"]) == 2
    assert "reports: " in capsys.readouterr().err  # SUE's layout, before node sampling


def test_tally_of_round_matches_round_tally():
    sampler = bayesldp.NodeSampling(bayesldp.OUE(5, 1.0), pi=0.4)
    sampled = sampler.perturb(np.arange(2000) % 5, rng=1)
    for estimator in ("g", "c_hat", "T"):
        direct = sampler.round_tally(sampled, estimator)
        rebuilt = sampler.tally_of_round(sampler.tally(sampled), 2000, estimator)
        np.testing.assert_array_equal(
            direct.mechanism.unbiased_frequencies(direct),
            rebuilt.mechanism.unbiased_frequencies(rebuilt),
        )
        np.testing.assert_array_equal(direct.stat, rebuilt.stat)
    with pytest.raises(bayesldp.errors.InvalidInputError, match="one common sampling"):
        bayesldp.NodeSampling(bayesldp.GRR(3, 1.0)).tally_of_round(
            bayesldp.GRR(3, 1.0).tally([0, 1]), 10
        )
