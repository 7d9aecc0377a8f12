"""RAPPOR's permanent randomised response memoised per (user, value)."""

import math

import numpy as np
import pytest

import bayesldp
from bayesldp.errors import InvalidInputError
from bayesldp.mechanisms.longitudinal import MemoError
from bayesldp.mechanisms.rappor import RAPPOR
from tests.stats_helpers import assert_chi_square_fit_with_power


def _mech(**kwargs):
    params = {"candidates": ["a", "b", "c"], "num_bits": 4, "num_hashes": 1, "cohorts": 2}
    return RAPPOR(3, 1.0, **(params | {"f": 0.5} | kwargs))


def _columns(mech, reports):
    return reports.cohort * 2**mech.num_bits + reports.bits.astype(int) @ (
        1 << np.arange(mech.num_bits)
    )


def test_the_memo_is_reused_and_a_user_keeps_its_cohort():
    mech = _mech(cohorts=8)
    memo = mech.memo()
    users = np.arange(1000) * 7 + 2
    x = np.random.default_rng(0).integers(0, 3, 1000)
    first = mech.perturb(x, rng=1, users=users, memo=memo)
    assert len(memo) == 1000
    codes, responses = memo.codes.copy(), memo.responses.copy()
    for seed in (2, 3):  # the same (user, value): the same PRR and cohort, nothing added
        again = mech.perturb(x[::-1], rng=seed, users=users[::-1], memo=memo)
        np.testing.assert_array_equal(again.cohort[::-1], first.cohort)
        np.testing.assert_array_equal(memo.codes, codes)
        np.testing.assert_array_equal(memo.responses, responses)
    cohort, prr = memo[(int(users[0]), int(x[0]))]
    assert cohort == first.cohort[0] and prr.shape == (4,) and prr.dtype == bool
    moved = (x + 1) % 3  # a new value: a new PRR, drawn in the user's cohort
    third = mech.perturb(moved, rng=4, users=users, memo=memo)
    assert len(memo) == 2000
    np.testing.assert_array_equal(third.cohort, first.cohort)
    np.testing.assert_array_equal(memo.responses[np.searchsorted(memo.codes, codes)], responses)


def test_a_round_is_the_irr_of_the_memoised_prr():
    """Given the memoised PRR, a round's bit is 1 w.p. ``q_irr`` where the PRR bit is set and
    ``p_irr`` where not: 20,000 users' rates within 5 sd of each."""
    mech = _mech()
    memo = mech.memo()
    n = 20_000
    users, x = np.arange(n), np.zeros(n, dtype=np.int64)
    mech.perturb(x, rng=0, users=users, memo=memo)
    prr = mech.decode_permanent(memo.responses)  # sorted by user: user i is row i
    bits = mech.perturb(x, rng=1, users=users, memo=memo).bits
    for where, rate in ((prr, mech.q_irr), (~prr, mech.p_irr)):
        seen = bits[where].mean()
        assert abs(seen - rate) < 5 * math.sqrt(rate * (1 - rate) / where.sum())


@pytest.mark.parametrize("memoised", [False, True])
def test_one_round_follows_the_one_report_channel(memoised):
    """Chi-square fit of n = 20,000 reports of candidate "b" against ``channel[1]`` (32 letters:
    2 cohorts x 4 bits), memoised or not: one round's law is unchanged by the memo.

    Power: against the nearest wrong law, the PRR alone (the IRR forgotten: RAPPOR at the PRR's
    budget), the test at level 1e-3 has power above 0.999 (non-central chi-square, below).
    """
    mech = _mech()
    n, x0 = 20_000, 1
    x = np.full(n, x0)
    if memoised:
        reports = mech.perturb(x, rng=11, users=np.arange(n) * 3, memo=mech.memo())
    else:
        reports = mech.perturb(x, rng=11)
    expected = mech.channel[x0]
    prr_alone = RAPPOR(3, mech.longitudinal_budget, candidates=["a", "b", "c"], num_bits=4,
                       num_hashes=1, cohorts=2)  # fmt: skip
    wrong = prr_alone.channel[x0]
    observed = np.bincount(_columns(mech, reports), minlength=expected.size)
    assert observed.sum() == n
    assert_chi_square_fit_with_power(observed, expected, wrong)
    tally = mech.tally(reports)  # the same tally, read by every estimator
    assert tally.n == n and tally.mechanism == mech
    assert isinstance(tally, bayesldp.mechanisms.rappor.RapporTally)


@pytest.mark.parametrize("f", [0.2, 0.5, 0.9])
def test_longitudinal_epsilon_is_the_prr_budget(f):
    """The exact epsilon of the PRR channel (brute force over every cohort's 2^k patterns)
    equals ``realised_longitudinal_epsilon()`` and, with disjoint Bloom sets, the PRR budget
    ``2h log((1 - f/2)/(f/2))``."""
    mech = RAPPOR(3, 0.5, candidates=["a", "b", "c"], num_bits=6, num_hashes=2, cohorts=4, f=f)
    patterns = ((np.arange(64)[:, None] >> np.arange(6)) & 1).astype(bool)
    best = 0.0
    for c in range(mech.cohorts):
        bloom = mech.bloom[c]  # (3, 6)
        one = np.where(bloom, 1 - f / 2, f / 2)[:, None, :]
        prr = np.where(patterns[None], one, 1 - one).prod(axis=2)  # (3, 64)
        best = max(best, bayesldp.mechanisms.realised_epsilon_of_channel(prr))
    assert mech.realised_longitudinal_epsilon() == pytest.approx(best, rel=1e-12)
    budget = 2 * 2 * math.log((1 - f / 2) / (f / 2))
    assert mech.longitudinal_budget == pytest.approx(budget, rel=1e-14)
    sizes = mech.bloom.sum(axis=2)
    disjoint = (sizes[:, :, None] == 2) & (sizes[:, None, :] == 2)
    disjoint &= ~np.einsum("cxj,cyj->cxy", mech.bloom, mech.bloom).astype(bool)
    if disjoint.any():
        assert mech.realised_longitudinal_epsilon() == pytest.approx(budget, rel=1e-12)


def test_the_memo_store_survives_a_restart(tmp_path):
    path = tmp_path / "rappor.npz"
    mech = _mech(cohorts=16, other=True, candidates=["a", "b"])
    users, x = np.arange(400) + 10**9, np.arange(400) % 3
    with mech.memo_store(path) as store:
        first = mech.perturb(x, rng=0, users=users, memo=store)
        codes, responses = store.codes.copy(), store.responses.copy()
    again = _mech(cohorts=16, other=True, candidates=["a", "b"])
    with again.memo_store(path) as store:
        np.testing.assert_array_equal(store.codes, codes)
        np.testing.assert_array_equal(store.responses, responses)
        second = again.perturb(x, rng=1, users=users, memo=store)
        assert len(store) == 400
    np.testing.assert_array_equal(second.cohort, first.cohort)


def test_other_memos_and_bad_use_are_refused(tmp_path):
    mech = _mech()
    with pytest.raises(MemoError, match=r"memo: it holds the permanent responses of RAPPOR\("):
        mech.perturb([0, 1], users=[0, 1], memo=_mech(f=0.4).memo())
    with pytest.raises(MemoError, match=r"holds the permanent responses of LGRR\(k=3"):
        mech.perturb([0, 1], users=[0, 1], memo=bayesldp.LGRR(3, 1.0).memo())
    with pytest.raises(InvalidInputError, match="users: given without memo="):
        mech.perturb([0, 1], users=[0, 1])
    with pytest.raises(InvalidInputError, match="users: the memo is keyed by user"):
        mech.perturb([0, 1], memo=mech.memo())
    path = tmp_path / "memo.npz"
    with mech.memo_store(path) as store:
        mech.perturb([0, 1, 2], rng=0, users=[1, 2, 3], memo=store)
    with pytest.raises(MemoError, match=r"holds the permanent responses of RAPPOR\(k=3, "):
        _mech(cohorts=3).memo_store(path)
