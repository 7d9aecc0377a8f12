"""CandidateOLH: OLH's reports read against a list of candidate values (and "other")."""

import math

import numpy as np
import pytest

from bayesldp import OLH
from bayesldp.errors import IncompatibleTallyError, InvalidInputError
from bayesldp.heavy_hitters import CandidateOLH
from bayesldp.mechanisms.hashing import MERSENNE_31


def test_consecutive_candidates_give_olh_own_tally():
    """values = 0..K-1: the same support rows, stat and oracle as OLH(K) on the same reports."""
    olh = OLH(12, 3.0)
    reports = olh.perturb(np.random.default_rng(0).integers(0, 12, 3000), rng=1)
    mine = CandidateOLH(np.arange(12), 3.0)
    assert mine.g == olh.g and mine.p == olh.p and mine.q_star == olh.q_star
    t_olh, t_mine = olh.tally(reports), mine.tally(reports)
    np.testing.assert_array_equal(t_olh.stat, t_mine.stat)
    assert t_olh.levels == t_mine.levels
    np.testing.assert_array_equal(t_olh.support, t_mine.support)


def test_sparse_candidates_read_reports_of_a_large_domain():
    """Users of OLH(2^20) holding candidate prefixes: their support and estimates."""
    values = np.array([7, 1000, 99_999, 2**20 - 1])
    rng = np.random.default_rng(3)
    x = rng.choice(values, size=20_000, p=[0.4, 0.3, 0.2, 0.1])
    reports = OLH(2**20, 4.0).perturb(x, rng=4)
    mech = CandidateOLH(values, 4.0)
    f = mech.unbiased_frequencies(mech.tally(reports))
    sd = math.sqrt(mech.var_star() / x.size)
    np.testing.assert_allclose(f, [0.4, 0.3, 0.2, 0.1], atol=5 * sd)
    for j, v in enumerate(values):  # supports() agrees with OLH's hash of the value
        expected = OLH(2**20, 4.0).supports(reports, int(v))
        np.testing.assert_array_equal(mech.supports(reports, j), expected)


@pytest.mark.parametrize("other", [False, True])
def test_realised_epsilon_is_olh_epsilon(other):
    for eps in (0.5, 4.0):
        mech = CandidateOLH([3, 2**24 + 5, 12345], eps, other=other)
        assert mech.realised_epsilon() == pytest.approx(eps, abs=1e-12)


def test_other_row_is_the_uniform_hash_channel():
    mech = CandidateOLH([1, 2, 3], 2.0, other=True)
    u = mech.other_levels()
    assert u.sum() == pytest.approx(1.0, abs=1e-15)
    np.testing.assert_allclose(u, 1 / mech.g, atol=mech.g / MERSENNE_31)
    channel = mech.channel_given_hash(5, 7)
    np.testing.assert_allclose(channel.sum(axis=1), 1.0)  # every row, "other"'s too, a law of y
    np.testing.assert_allclose(channel[-1], mech.q + (mech.p - mech.q) * u)


def test_other_users_are_estimated_as_other():
    """Users outside the candidates (simulated with uniform hash values) land in "other"."""
    mech = CandidateOLH([10, 20, 30], 4.0, other=True)
    rng = np.random.default_rng(5)
    x = rng.choice(4, size=40_000, p=[0.2, 0.1, 0.05, 0.65])
    tally = mech.tally(mech.perturb(x, rng=6))
    assert tally.k == 4 and not tally.is_support_form and tally.n_rows < 100  # deduplicated
    f = mech.unbiased_frequencies(tally)
    sd = math.sqrt(mech.var_star() / x.size)
    np.testing.assert_allclose(f, [0.2, 0.1, 0.05, 0.65], atol=5 * 2 * sd)
    # the "other" users perturbed through a real non-candidate value look the same
    olh_reports = OLH(100, 4.0).perturb(np.full(20_000, 77), rng=7)
    f_real = mech.unbiased_frequencies(mech.tally(olh_reports))
    np.testing.assert_allclose(f_real, [0, 0, 0, 1], atol=5 * 2 * math.sqrt(mech.var_star() / 2e4))


def test_bad_values_and_foreign_tallies():
    with pytest.raises(InvalidInputError, match="distinct"):
        CandidateOLH([1, 1, 2], 1.0)
    with pytest.raises(InvalidInputError, match="values: must lie in"):
        CandidateOLH([-1, 2], 1.0)
    reports = OLH(50, 1.0).perturb(np.arange(50), rng=0)
    tally = CandidateOLH([1, 2], 1.0).tally(reports)
    with pytest.raises(IncompatibleTallyError):
        CandidateOLH([1, 3], 1.0).unbiased_frequencies(tally)


def test_a_single_candidate_is_estimated_by_the_same_oracle():
    """candidate_estimates reads one candidate through the "other" category (OLH needs two
    categories); its estimate is the oracle's, as with a second candidate beside it."""
    from bayesldp.heavy_hitters.candidates import candidate_estimates

    rng = np.random.default_rng(5)
    x = rng.choice([7, 1000, 5], size=5000, p=[0.6, 0.3, 0.1])
    reports = OLH(2**10, 2.0).perturb(x, rng=6)
    one = candidate_estimates([7], 2.0, OLH(2**10, 2.0).g, reports)
    two = candidate_estimates([7, 1000], 2.0, OLH(2**10, 2.0).g, reports)
    assert one.shape == (1,)
    np.testing.assert_allclose(one[0], two[0], rtol=1e-12)
