"""``bayesldp recommend --k 3,4,2``: SPL, SMP and RS+FD ranked at one record-level epsilon."""

import json
import math

import numpy as np
import pytest
from scipy.stats import binom

from bayesldp.errors import InvalidInputError
from bayesldp.workflows.cli import main
from bayesldp.workflows.recommend_record import (
    EXPANSION_N,
    inverse_mean,
    protocols,
    recommend_record,
    record_error,
)


def _simulated_oracle_error(protocol, n, repeats, seed):
    """Mean and standard error, over ``repeats`` runs, of the oracle's summed squared error on a
    fixed population of ``n`` records whose every attribute is exactly uniform."""
    rng = np.random.default_rng(seed)
    records = np.column_stack([rng.permutation(np.arange(n) % k) for k in protocol.ks])
    errors = np.empty(repeats)
    for r in range(repeats):
        tallies = protocol.tallies(protocol.perturb(records, rng))
        errors[r] = sum(
            float(np.sum((mech.unbiased_frequencies(tally) - 1.0 / mech.k) ** 2))
            for mech, tally in zip(protocol.marginals, tallies, strict=True)
        )
    return errors.mean(), errors.std(ddof=1) / math.sqrt(repeats)


@pytest.mark.parametrize("epsilon", [1.0, 4.0])
def test_oracle_error_equals_simulated_protocols(epsilon):
    """Every row's exact oracle error (SMP's with the users' sampling spread) equals the mean
    squared error of the simulated protocol within 4 Monte Carlo standard errors (seeded)."""
    ks, n, repeats = (3, 4, 2), 1200, 300
    for j, (label, protocol) in enumerate(protocols(ks, epsilon)):
        exact, _ = record_error(protocol, "oracle", n)
        mean, se = _simulated_oracle_error(protocol, n, repeats, seed=100 + j)
        assert abs(mean - exact) < 4 * se, (label, exact, mean, se)
        assert se < 0.06 * exact  # the check has teeth: a 25% error would be > 4 SE away


def test_smp_pays_for_the_users_it_does_not_ask():
    """At a large epsilon SMP's error is mostly the spread of the sampled users' frequencies
    about everyone's (the term Wang et al. 2017's comparison leaves out); the simulation sees it."""
    from bayesldp.mechanisms.multidimensional import SMP

    protocol, n = SMP((2, 2), 12.0, "GRR"), 400
    exact, _ = record_error(protocol, "oracle", n)
    privacy_only = sum(float(np.sum(m.oracle_variance(np.full(2, 0.5), 1))) for m in
                       protocol.marginals) * inverse_mean(n, 2)  # fmt: skip
    assert exact > 100 * privacy_only
    mean, se = _simulated_oracle_error(protocol, n, 400, seed=7)
    assert abs(mean - exact) < 4 * se


def test_inverse_mean_is_the_binomial_sum():
    for n, d in [(1, 2), (5, 3), (40, 7), (1000, 2)]:
        m = np.arange(1, n + 1)
        direct = np.sum(binom.pmf(m, n, 1 / d) / m) / (1 - binom.pmf(0, n, 1 / d))
        assert inverse_mean(n, d) == pytest.approx(direct, rel=1e-12)
    # the expansion beyond 10^8 users continues the sum
    below, above = inverse_mean(EXPANSION_N, 3), inverse_mean(EXPANSION_N + 1, 3)
    assert above == pytest.approx(below * EXPANSION_N / (EXPANSION_N + 1), rel=1e-12)


def test_two_binary_attributes_match_the_closed_forms():
    """GRR on two binary attributes by hand: SPL at eps/2 has per-user variance
    e^(eps/2)/(e^(eps/2) - 1)^2 per frequency, SMP e^eps/(e^eps - 1)^2 on N ~ Bin(n, 1/2)
    users plus their sampling spread 1/4 (n E[1/N] - 1)/(n - 1)."""
    eps, n = 5.0, 10_000
    table = recommend_record((2, 2), eps, n, "oracle")
    rows = {row[0]: row for row in table.rows}
    h = math.exp(eps / 2)
    assert rows["SPL[GRR]"][5] == pytest.approx(4 * h / (h - 1) ** 2 / n, rel=1e-12)
    e, inv = math.exp(eps), inverse_mean(n, 2)
    smp = 4 * (e / (e - 1) ** 2 * inv + 0.25 * (n * inv - 1) / (n - 1))
    assert rows["SMP[GRR]"][5] == pytest.approx(smp, rel=1e-12)


@pytest.mark.parametrize("method", ["oracle", "mle"])
def test_seed_002_holds_at_small_epsilon_and_many_attributes(method):
    table = recommend_record((2,) * 6, 1.0, 10_000, method)
    assert table.meta["answer"] == "users" and table.meta["recommended"] == "SMP[GRR]"
    rows = {row[0]: row for row in table.rows}
    assert rows["SMP[GRR]"][5] < 0.25 * rows["SPL[GRR]"][5]
    assert any(note.startswith("split the users: SMP[GRR]") for note in table.notes)


@pytest.mark.parametrize("method", ["oracle", "mle"])
def test_seed_002_fails_at_a_large_epsilon(method):
    """Two binary attributes at eps = 5: half the users at eps = 5 err more than everyone at
    eps = 2.5, because the asked half's frequencies spread about everyone's (exact, both
    estimators)."""
    table = recommend_record((2, 2), 5.0, 10_000, method)
    assert table.meta["answer"] == "budget" and table.meta["recommended"] == "SPL[GRR]"
    rows = {row[0]: row for row in table.rows}
    assert rows["SMP[GRR]"][5] > 1.4 * rows["SPL[GRR]"][5]
    assert any(note.startswith("split the budget: SPL[GRR]") for note in table.notes)


def test_every_row_realises_the_record_epsilon(capsys):
    argv = ["recommend", "--k", "3,4,2", "--epsilon", "1", "--n", "10000", "--output", "json"]
    assert main(argv) == 0
    result = json.loads(capsys.readouterr().out)
    labels = [row["protocol"] for row in result["rows"]]
    assert len(labels) == 11 and result["recommended"] == labels[0] == "SMP[GRR]"
    for row in result["rows"]:
        assert row["record_epsilon"] == pytest.approx(1.0, abs=1e-9)
        if row["protocol"].startswith("RSFD"):  # the nominal epsilon that realises 1
            assert row["nominal_epsilon"] == pytest.approx(math.log1p(math.expm1(1) / 3))
    errors = [row["mse"] for row in result["rows"]]
    assert errors == sorted(errors) and result["answer"] == "users"
    assert main(argv[:-2]) == 0
    out = capsys.readouterr().out
    assert "split the users: SMP[GRR]" in out and "record epsilon (realised)" in out


def _error(capsys):
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err
    return err


def test_bad_input_gets_one_line(capsys):
    base = ["--epsilon", "1", "--n", "100"]
    assert main(["recommend", "--k", "3,0", *base]) == 2
    assert "--k (attribute 1): the domain needs at least 2 categories, got 0" in _error(capsys)
    assert main(["recommend", "--k", "3,4", "--epsilon", "1", "--n", "0"]) == 2
    assert "--n: must be >= 1, got 0" in _error(capsys)
    with pytest.raises(InvalidInputError, match="at least 2 attributes, got 1"):
        recommend_record([3], 1.0, 100)
    with pytest.raises(InvalidInputError, match="one domain size per attribute"):
        recommend_record(3, 1.0, 100)
    with pytest.raises(InvalidInputError, match="method: expected one of"):
        recommend_record((3, 4), 1.0, 100, "median")
    # one number is one attribute: the mechanisms' ranking, as before
    assert main(["recommend", "--k", "3", *base]) == 0
    assert "recommended: GRR" in capsys.readouterr().out


def test_the_user_guide_quotes_the_commands_output():
    """docs/user_guide/mechanisms.md quotes two recommend commands; their numbers are these."""
    from pathlib import Path

    guide = (Path(__file__).resolve().parents[2] / "docs/user_guide/mechanisms.md").read_text()
    guide = " ".join(guide.split())
    rows = {row[0]: row for row in recommend_record((3, 4, 2), 1.0, 10_000).rows}
    for label in ("SMP[GRR]", "RSFD[GRR]", "SPL[GRR]", "RSFD[OUE-r]"):
        assert f"{rows[label][5]:.4g} ({label}" in guide, label
    assert min(r[5] for r in rows.values()) == rows["SMP[GRR]"][5]
    assert max(r[5] for r in rows.values()) == rows["RSFD[OUE-r]"][5]
    assert f"{rows['SMP[GRR]'][5] / rows['SPL[GRR]'][5]:.3g} x" in guide
    table = recommend_record((2, 2), 5.0, 10_000)
    assert table.meta["answer"] == "budget"
    rows = {row[0]: row for row in table.rows}
    assert f"{rows['SPL[GRR]'][5]:.4g} against SMP[GRR]'s {rows['SMP[GRR]'][5]:.4g}" in guide
