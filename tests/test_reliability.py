"""Hostile inputs: integer counts stay exact, sizes that cannot fit are refused with
the figure, unary encoding draws exact bits or refuses the budget, empty tallies are an error."""

import numpy as np
import pytest

import bayesldp
from bayesldp.bounds import var_star
from bayesldp.errors import InvalidInputError
from bayesldp.mechanisms import NodeSampling


@pytest.mark.parametrize(
    "mech",
    [bayesldp.GRR(5, 1.0), bayesldp.HadamardResponse(5, 1.0), bayesldp.RRRR(5, 1.0, subset=[0])],
    ids=lambda m: type(m).__name__,
)
def test_huge_counts_stay_exact_integers(mech):
    tally = mech.simulate_tally([10**18 + 7, 3, 0, 0, 0], rng=1)
    assert tally.n == 10**18 + 10 and tally.counts.dtype == np.int64
    assert mech.simulate_tally([2**63 - 1, 0, 0, 0, 0], rng=1).n == 2**63 - 1
    with pytest.raises(InvalidInputError, match="too large for a 64-bit count"):
        mech.simulate_tally([2**63 - 1, 1, 0, 0, 0], rng=1)


def test_merging_tallies_beyond_int64_is_refused():
    a = bayesldp.GRR(3, 1.0).tally_from_report_counts([2**62, 0, 0])
    with pytest.raises(InvalidInputError, match="too large for a 64-bit count"):
        a + a
    b = bayesldp.GRR(3, 1.0).tally_from_report_counts([2**61, 0, 1])
    assert (b + b).n == 2**62 + 2


@pytest.mark.parametrize(
    "build, figure",
    [
        (lambda: bayesldp.RRRR(10**6, 1.0, subset=[0]), "RRRR channel with K = 1000000"),
        (lambda: bayesldp.GRR(10**6, 1.0).channel, "GRR(1000000).channel"),
        (lambda: bayesldp.HadamardResponse(10**6, 1.0).channel, "HadamardResponse(1000000)"),
        (lambda: bayesldp.OUE(5, 1.0).simulate_tally([10**12, 0, 0, 0, 0]), "users"),
    ],
)
def test_sizes_that_cannot_fit_are_refused_with_the_figure(build, figure):
    with pytest.raises(InvalidInputError, match="GiB of memory") as info:
        build()
    assert figure in str(info.value)


def test_var_star_of_a_large_domain_is_cheap():
    assert var_star(bayesldp.SHE(100_000, 1.0)) == pytest.approx(8.0)


@pytest.mark.parametrize("cls, limit", [(bayesldp.OUE, 36.04), (bayesldp.SUE, 72.08)])
def test_unary_encoding_exact_up_to_its_limit_and_refused_beyond(cls, limit):
    assert cls._max_epsilon() == limit
    mech = cls(5, limit)
    bits = mech.perturb(np.arange(50_000) % 5, rng=0)  # used to raise IndexError from eps ~ 41.5
    assert bits.shape == (50_000, 5)
    for k in (5, 20):  # from the channel (k <= 12) and the closed form: both in log space
        assert cls(k, 50.0 if cls is bayesldp.SUE else 30.0).realised_epsilon() == pytest.approx(
            50.0 if cls is bayesldp.SUE else 30.0, rel=1e-12
        )
    with pytest.raises(InvalidInputError, match="below 2\\^-52"):
        cls(5, limit + 0.1)


def test_empty_tally_is_a_clear_error():
    with pytest.raises(InvalidInputError, match="holds no reports"):
        bayesldp.Tally(np.array([], dtype=int), rows=np.empty((0, 3)), stat=np.zeros(3), family="x")


def test_node_sampling_has_the_unbiased_oracle():
    sampler = NodeSampling(bayesldp.GRR(3, 1.0), pi=0.5)
    sampled = sampler.perturb(np.arange(3000) % 3, rng=0)
    np.testing.assert_allclose(sampler.unbiased_frequencies(sampled), sampler.frequencies(sampled))
    with pytest.raises(InvalidInputError, match="'c' is biased"):
        sampler.unbiased_frequencies(sampled, "c")


def test_dense_likelihood_rows_and_their_transpose_must_fit(monkeypatch):
    """Dense rows (Laplace) need C and C^T: refused, with the figure, where C alone would fit;
    band rows (SW) need C only and are built in the same memory."""
    from bayesldp.likelihood import Likelihood

    lap = bayesldp.LaplaceNumeric(32, 1.0, lo=-1.0, hi=1.0)
    tally = lap.tally(lap.perturb(np.linspace(-1, 1, 2000), rng=0))
    sw = bayesldp.SquareWave(32, 1.0, lo=-1.0, hi=1.0, output_bins=tally.n_rows)
    band = sw.tally_from_report_counts(np.ones(tally.n_rows, dtype=int))
    assert band.n_rows == tally.n_rows
    memory = 24 * tally.n_rows * tally.k  # half of it: 1.5x one copy of the rows
    monkeypatch.setattr("os.sysconf", lambda name: 1 if name == "SC_PAGE_SIZE" else memory)
    with pytest.raises(InvalidInputError, match="GiB of memory") as info:
        Likelihood(tally)
    assert f"rows ({tally.n_rows:,} x 32) and their transpose" in str(info.value)
    assert Likelihood(band).kind == "band"
