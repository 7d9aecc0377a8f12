"""dBitFlipPM (Ding, Kulkarni, Yekhanin 2017): channel, epsilon, perturb, estimator, memo."""

import itertools
import math

import numpy as np
import pytest
from scipy import stats

import bayesldp
from bayesldp.audit import audit
from bayesldp.errors import InvalidInputError
from bayesldp.mechanisms import make_mechanism, realised_epsilon_of_channel
from bayesldp.mechanisms.longitudinal import DBitFlipPM, MemoError
from tests.stats_helpers import assert_chi_square_fit_with_power


def _brute_channel(mech):
    """The channel from the paper's definition, one report at a time."""
    e = math.exp(mech.epsilon / 2)
    cols = []
    for subset in itertools.combinations(range(mech.k), mech.d):
        for y in range(2**mech.d):
            col = []
            for u in range(mech.k):
                prob = 1.0 / math.comb(mech.k, mech.d)
                for p, j in enumerate(subset):
                    one = e / (e + 1) if u == j else 1 / (e + 1)
                    prob *= one if (y >> p) & 1 else 1 - one
                col.append(prob)
            cols.append(col)
    return np.array(cols).T


@pytest.mark.parametrize(("k", "d"), [(2, 2), (4, 2), (5, 3), (6, 6)])
@pytest.mark.parametrize("epsilon", [0.1, 1.0, 4.0])
def test_exact_epsilon_from_the_channel(k, d, epsilon):
    mech = DBitFlipPM(k, epsilon, d=d)
    channel = mech.channel
    np.testing.assert_allclose(channel, _brute_channel(mech), rtol=1e-12)
    np.testing.assert_allclose(channel.sum(axis=1), 1.0, rtol=1e-12)
    assert realised_epsilon_of_channel(channel) == pytest.approx(epsilon, rel=1e-9)
    assert mech.realised_epsilon() == pytest.approx(epsilon, rel=1e-9)
    assert mech.realised_longitudinal_epsilon() == mech.realised_epsilon()


def test_tally_rows_are_the_channel_columns():
    mech = DBitFlipPM(5, 1.5, d=2)
    reports = mech.perturb(np.arange(500) % 5, rng=3)
    tally = mech.tally(reports)
    channel = mech.channel
    col = (
        np.array([list(itertools.combinations(range(5), 2)).index(tuple(b))
                  for b in reports.buckets]) * 4
        + reports.bits.astype(int) @ (1 << np.arange(2))
    )  # fmt: skip
    expected = channel[:, col].T
    expected = expected / expected.max(axis=1, keepdims=True)
    got = mech.tally(reports).rows
    assert tally.n == 500
    # every report's row is one of the tally's rows, as the scaled channel column
    for row in np.unique(expected, axis=0):
        assert np.any(np.all(np.isclose(got, row, rtol=1e-12), axis=1))


def test_bad_parameters_are_refused():
    with pytest.raises(InvalidInputError, match=r"d: 1 sampled bucket makes a report only eps/2"):
        DBitFlipPM(4, 1.0, d=1)
    with pytest.raises(InvalidInputError, match="d: a user samples d of the k = 4 buckets"):
        DBitFlipPM(4, 1.0, d=5)
    with pytest.raises(InvalidInputError, match="values: must be >= 4, got 3"):
        DBitFlipPM(4, 1.0, values=3)
    assert make_mechanism("dBitFlip", 4, 1.0, d=3, values=10) == DBitFlipPM(4, 1.0, 3, 10)


def test_values_are_split_into_contiguous_buckets():
    mech = DBitFlipPM(3, 1.0, values=10)
    np.testing.assert_array_equal(mech.bucket_of(np.arange(10)), [0, 0, 0, 0, 1, 1, 1, 2, 2, 2])
    np.testing.assert_array_equal(mech.category_values([0, 1, 2]), [0, 4, 7])
    drawn = mech.category_values(np.repeat([0, 1, 2], 200), rng=1)
    np.testing.assert_array_equal(mech.bucket_of(drawn), np.repeat([0, 1, 2], 200))


@pytest.mark.parametrize("memoised", [False, True])
def test_perturb_follows_the_channel(memoised):
    """Chi-square goodness of fit of n = 20,000 reports of one value (bucket 1 of k = 4, d = 2,
    24 report letters) against ``channel[1]``.

    Power: against the nearest wrong law tried, bits of probability ``e^eps / (e^eps + 1)``
    (the full epsilon per bit instead of half), the test at level 1e-3 has power above 0.999
    (checked below from the non-central chi-square).
    """
    k, d, n, x0 = 4, 2, 20_000, 1
    mech = DBitFlipPM(k, 1.0, d=d, values=8)
    x = np.full(n, 2 * x0 + 1)  # a value in bucket 1
    if memoised:
        reports = mech.perturb(x, rng=11, users=np.arange(n) * 5 + 2, memo=mech.memo())
    else:
        reports = mech.perturb(x, rng=11)
    subsets = {s: i for i, s in enumerate(itertools.combinations(range(k), d))}
    col = np.array([subsets[tuple(b)] for b in reports.buckets.tolist()]) * 2**d
    col = col + reports.bits.astype(int) @ (1 << np.arange(d))
    observed = np.bincount(col, minlength=mech.channel.shape[1])
    expected = mech.channel[x0]
    wrong = DBitFlipPM(k, 2.0, d=d).channel[x0]
    assert observed.sum() == n
    assert_chi_square_fit_with_power(observed, expected, wrong)


def test_estimator_is_unbiased_with_its_exact_variance():
    """R = 400 surveys of n = 1,000 users: the paper's estimator's mean is within 4 Monte Carlo
    standard errors of theta, its spread agrees with ``oracle_variance`` (chi-square band)."""
    k, n, reps = 5, 1000, 400
    theta = np.array([0.4, 0.3, 0.15, 0.1, 0.05])
    mech = DBitFlipPM(k, 1.0, d=2, values=10)
    x = mech.category_values(np.repeat(np.arange(k), (theta * n).astype(int)), rng=0)
    rng = np.random.default_rng(5)
    estimates = np.array(
        [mech.unbiased_frequencies(mech.tally(mech.perturb(x, rng=rng))) for _ in range(reps)]
    )
    variance = mech.oracle_variance(theta, n)
    assert np.all(np.abs(estimates.mean(axis=0) - theta) < 4 * np.sqrt(variance / reps))
    ratio = estimates.var(axis=0, ddof=1) / variance
    low, high = stats.chi2.ppf([1e-3, 1 - 1e-3], reps - 1) / (reps - 1)
    assert np.all((low < ratio) & (ratio < high)), ratio


def test_estimators_and_the_audit_read_a_round():
    k, n = 4, 4000
    theta = np.array([0.5, 0.3, 0.15, 0.05])
    mech = DBitFlipPM(k, 3.0, d=3)
    x = np.repeat(np.arange(k), (theta * n).astype(int))
    tally = mech.tally(mech.perturb(x, rng=3, users=np.arange(n), memo=mech.memo()))
    for method in ("oracle", "norm_sub", "mle", "em"):
        assert np.abs(bayesldp.estimate(tally, method=method).frequencies - theta).max() < 0.1
    result = audit(DBitFlipPM(4, 1.0), trials=100_000, rng=7)
    assert result.passed, result
    assert result.epsilon_lower_bound > 0.5


def test_memo_keeps_buckets_and_repeats_an_unchanged_bucket_vector():
    mech = DBitFlipPM(6, 1.0, d=2, values=12)
    memo = mech.memo()
    users = np.arange(2000) * 3 + 1
    x = np.random.default_rng(0).integers(0, 12, 2000)
    first = mech.perturb(x, rng=1, users=users, memo=memo)
    assert len(memo) == 2000
    codes, responses = memo.codes.copy(), memo.responses.copy()
    # same bucket (another value in it): the same report, nothing added
    other = np.where(x % 2 == 0, x + 1, x - 1)
    again = mech.perturb(other[::-1], rng=2, users=users[::-1], memo=memo)
    np.testing.assert_array_equal(again.buckets[::-1], first.buckets)
    np.testing.assert_array_equal(again.bits[::-1], first.bits)
    np.testing.assert_array_equal(memo.codes, codes)
    np.testing.assert_array_equal(memo.responses, responses)
    # a new bucket: the user's buckets kept, a new response only for a new bucket vector
    moved = (x + 2) % 12
    third = mech.perturb(moved, rng=4, users=users, memo=memo)
    np.testing.assert_array_equal(third.buckets, first.buckets)

    def slot(reports, values):
        inside = reports.buckets == mech.bucket_of(values)[:, None]
        return np.where(inside.any(axis=1), inside.argmax(axis=1), 2)

    same = slot(third, moved) == slot(first, x)
    np.testing.assert_array_equal(third.bits[same], first.bits[same])
    assert len(memo) == 2000 + np.count_nonzero(~same)
    entry = memo[(int(users[0]), int(slot(first, x)[0]))]
    np.testing.assert_array_equal(entry.buckets, first.buckets[0])
    np.testing.assert_array_equal(entry.bits, first.bits[0])


def test_memo_store_survives_a_restart_and_refuses_other_mechanisms(tmp_path):
    path = tmp_path / "memo.npz"
    mech = DBitFlipPM(5, 1.0, d=3)
    users, x = np.arange(300) + 10**9, np.arange(300) % 5
    with mech.memo_store(path) as store:
        first = mech.perturb(x, rng=0, users=users, memo=store)
        codes = store.codes.copy()
    again = DBitFlipPM(5, 1.0, d=3)
    with again.memo_store(path) as store:
        np.testing.assert_array_equal(store.codes, codes)
        second = again.perturb(x, rng=1, users=users, memo=store)
        assert len(store) == 300
    np.testing.assert_array_equal(second.buckets, first.buckets)
    np.testing.assert_array_equal(second.bits, first.bits)
    for foreign in (DBitFlipPM(5, 1.0, d=2), DBitFlipPM(5, 2.0, d=3), bayesldp.LGRR(5, 1.0)):
        with pytest.raises(MemoError, match=r"holds the permanent responses of DBitFlipPM\(k=5"):
            foreign.memo_store(path)
    with pytest.raises(MemoError, match=r"memo: it holds the permanent responses of DBitFlip"):
        DBitFlipPM(5, 1.0, d=2).perturb(x, users=users, memo=mech.memo())
    with pytest.raises(InvalidInputError, match="users: given without memo="):
        mech.perturb(x, users=users)


def test_reports_are_checked_and_round_trip():
    mech = DBitFlipPM(4, 1.0, d=2)
    reports = mech.perturb(np.arange(40) % 4, rng=0)
    swapped = bayesldp.DBitReports(reports.buckets[:, ::-1], reports.bits[:, ::-1])
    assert mech.tally(swapped) == mech.tally(reports)  # the order within a report is free
    frame = mech.reports_to_frame(reports)
    assert list(frame.columns) == ["bucket0", "bucket1", "bit0", "bit1"]
    assert mech.tally_frame(frame) == mech.tally(reports)
    with pytest.raises(InvalidInputError, match="names a bucket twice"):
        mech.tally((np.array([[1, 1]]), np.array([[0, 1]])))
    with pytest.raises(InvalidInputError, match=r"must lie in 0..3 \(k = 4\), got 4"):
        mech.tally((np.array([[1, 4]]), np.array([[0, 1]])))


@pytest.mark.parametrize("draw", ["_draw_buckets", "_smallest_keys"])
def test_both_bucket_draws_are_uniform_over_the_sets(draw):
    """Chi-square of 60,000 bucket sets (k = 6, d = 3: 20 sets) against the uniform law, for the
    colex-rank draw (the default) and the smallest-keys draw (used where ranks overflow int64).

    Power: against a law that gives one set 1.2 times the others' weight, the test at level
    1e-3 has power above 0.999 (checked by the helper from the non-central chi-square).
    """
    k, d, n = 6, 3, 60_000
    mech = DBitFlipPM(k, 1.0, d=d)
    buckets = getattr(mech, draw)(n, np.random.default_rng(12))
    assert np.all(np.diff(buckets, axis=1) > 0)
    subsets = {s: i for i, s in enumerate(itertools.combinations(range(k), d))}
    observed = np.bincount([subsets[tuple(b)] for b in buckets.tolist()], minlength=len(subsets))
    uniform = np.full(len(subsets), 1 / len(subsets))
    wrong = np.ones(len(subsets))
    wrong[0] = 1.2
    assert_chi_square_fit_with_power(observed, uniform, wrong / wrong.sum())


def test_bucket_draws_beyond_int64_ranks():
    """k = 100, d = 60: C(100, 50) overflows the colex table, so the smallest-keys draw is used;
    its sets are distinct, ascending and in range."""
    mech = DBitFlipPM(100, 1.0, d=60)
    buckets = mech._draw_buckets(500, np.random.default_rng(3))
    assert buckets.shape == (500, 60) and np.all(np.diff(buckets, axis=1) > 0)
    assert buckets.min() >= 0 and buckets.max() < 100
