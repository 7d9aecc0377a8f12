"""The coded tallies equal the row-wise constructions they replace.

dBitFlipPM counts its distinct reports by an integer code (colex rank of the bucket set, then
the bits), RS+FD's "random" fake data builds its rows in one pass, and the Tally merges dense
rows by a ``lexsort``: each is compared here, exactly, with a small reference of the old
construction (``np.unique`` on rows) on random reports.
"""

import math

import numpy as np
import pytest

from bayesldp import Tally
from bayesldp.errors import InvalidInputError
from bayesldp.mechanisms.longitudinal import DBitFlipPM
from bayesldp.mechanisms.multidimensional import RSFD, FakeDataUnary


def _unique_rows(rows, counts):
    """The old dense merge: ``np.unique`` on rows, counts summed per distinct row."""
    uniq, inverse = np.unique(rows, axis=0, return_inverse=True)
    return uniq, np.bincount(inverse.reshape(-1), weights=counts).astype(np.int64)


def _dbit_reference(mech, buckets, bits):
    """The old dBitFlipPM tally: ``np.unique`` on the rows of (buckets, bits), one likelihood
    row per distinct report, then the Tally's merge of identical rows."""
    order = np.argsort(buckets, axis=1, kind="stable")
    buckets = np.take_along_axis(buckets, order, axis=1)
    bits = np.take_along_axis(bits, order, axis=1)
    key = np.concatenate([buckets, bits.astype(np.int64)], axis=1)
    _, first, inverse = np.unique(key, axis=0, return_index=True, return_inverse=True)
    counts = np.bincount(inverse.reshape(-1), minlength=first.size)
    half = mech.epsilon / 2
    log_rows = np.zeros((first.size, mech.k))
    np.put_along_axis(log_rows, buckets[first], np.where(bits[first], half, -half), axis=1)
    rows = np.exp(log_rows - log_rows.max(axis=1, keepdims=True))
    return _unique_rows(rows, counts)


def _random_dbit_reports(mech, n, rng, shuffled):
    buckets = np.sort(np.argsort(rng.random((n, mech.k)), axis=1)[:, : mech.d], axis=1)
    if shuffled:  # not ascending: check_reports sorts them
        buckets = rng.permuted(buckets, axis=1)
    return buckets, rng.random((n, mech.d)) < 0.5


@pytest.mark.parametrize(
    ("k", "d", "n"),
    [(2, 2, 50), (4, 2, 2000), (6, 6, 300), (20, 4, 5000), (100, 2, 3000),
     (60, 9, 400),  # C(60, 9) 2^9 > 4 n and 2^22: the codes are sorted, not bincounted
     (200, 12, 300)],  # the codes overflow int64: np.unique on rows
)  # fmt: skip
@pytest.mark.parametrize("shuffled", [False, True])
def test_dbitflip_tally_equals_the_row_wise_one(k, d, n, shuffled):
    mech = DBitFlipPM(k, 1.3, d=d)
    rng = np.random.default_rng([k, d, n, shuffled])
    buckets, bits = _random_dbit_reports(mech, n, rng, shuffled)
    tally = mech.tally((buckets, bits))
    rows, counts = _dbit_reference(mech, buckets, bits)
    merged = tally.deduplicated()
    # rows are merged only where distinct reports can share one (d = k, k = 2 d); elsewhere the
    # tally's rows are already distinct
    assert merged.n_rows == tally.n_rows
    assert np.array_equal(merged.rows, rows)
    assert np.array_equal(merged.counts, counts)
    assert tally.counts.dtype == np.int64
    if math.comb(k, d) * 2**d <= 4 * n:  # the code space is covered: every report seen
        assert tally.n_rows <= math.comb(k, d) * 2**d
    order = np.argsort(buckets, axis=1, kind="stable")
    z = np.where(np.take_along_axis(bits, order, axis=1), -1.0 / math.expm1(-0.65),
                 -1.0 / math.expm1(0.65))  # fmt: skip
    sums = np.bincount(np.take_along_axis(buckets, order, axis=1).reshape(-1),
                       weights=z.reshape(-1), minlength=k)  # fmt: skip
    # summed over the distinct reports times their counts: equal up to rounding
    np.testing.assert_allclose(tally.stat, sums * (k / d), rtol=1e-12, atol=1e-12 * n)


def test_dbitflip_decoding_inverts_the_code():
    mech = DBitFlipPM(7, 1.0, d=3)
    table = mech._colex_table()
    codes = np.arange(math.comb(7, 3) << 3)
    reports = mech._decode(codes, table)
    assert np.all(np.diff(reports.buckets, axis=1) > 0)
    seen, counts = mech._distinct_reports(reports.buckets, reports.bits)
    assert np.array_equal(counts, np.ones(codes.size, dtype=np.int64))
    assert np.array_equal(seen.buckets, reports.buckets)
    assert np.array_equal(seen.bits, reports.bits)


def test_dbitflip_perturb_then_tally_matches_on_a_seed():
    mech = DBitFlipPM(20, 2.0, d=4, values=100)
    x = np.random.default_rng(3).integers(0, 100, 20_000)
    reports = mech.perturb(x, rng=4)
    assert np.all(np.diff(reports.buckets, axis=1) > 0)
    rows, counts = _dbit_reference(mech, reports.buckets, reports.bits)
    tally = mech.tally(reports).deduplicated()
    assert np.array_equal(tally.rows, rows) and np.array_equal(tally.counts, counts)


@pytest.mark.parametrize("shape", [(1, 3), (2, 2), (500, 3), (4000, 8), (300, 40)])
def test_dense_merge_equals_unique_on_rows(shape):
    rng = np.random.default_rng(list(shape))
    rows = np.exp(-0.5 * rng.integers(0, 3, shape))  # few levels: many repeated rows
    counts = rng.integers(0, 5, shape[0])
    counts[0] = 1
    tally = Tally(counts, rows=rows, stat=np.zeros(shape[1]), family="test")
    keep = counts > 0
    uniq, summed = _unique_rows(rows[keep], counts[keep])
    assert np.array_equal(tally.rows, uniq)
    assert np.array_equal(tally.counts, summed)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf, -1.0])
def test_dense_rows_are_still_checked(bad):
    rows = np.ones((3, 4))
    rows[1, 2] = bad
    with pytest.raises(InvalidInputError, match="finite and >= 0"):
        Tally([1, 1, 1], rows=rows, stat=np.zeros(4), family="test")


@pytest.mark.parametrize("k", [5, 16, 17, 100])
@pytest.mark.parametrize("base", ["OUE", "SUE"])
def test_random_fake_data_rows_equal_the_formula(k, base):
    mech = FakeDataUnary(k, 1.0, d=3, base=base, fake="random")
    bits = mech.perturb(np.random.default_rng(k).integers(0, k, 3000), rng=k + 1)
    tally = mech.tally(bits)
    if k <= 16:
        keys = bits @ (1 << np.arange(k))
        seen, counts = np.unique(keys, return_counts=True)
        support = ((seen[:, None] >> np.arange(k)) & 1).astype(bool)
    else:
        support, counts = bits, np.ones(bits.shape[0], dtype=np.int64)
    r0, r1 = mech._r
    lo = r0 / mech.d + (1.0 - 1.0 / mech.d) * mech._m(support.sum(axis=1))
    rows = lo[:, None] + ((r1 - r0) / mech.d) * support
    assert np.array_equal(tally.rows, rows)
    assert np.array_equal(tally.counts, counts)
    assert np.array_equal(tally.stat, (counts @ support).astype(float))


def test_rsfd_oue_r_estimates_on_a_seed_are_the_formula():
    proto = RSFD((100, 10, 5), 1.0, base="OUE", fake="random", budget="paper")
    rng = np.random.default_rng(5)
    records = np.column_stack([rng.integers(0, k, 4000) for k in (100, 10, 5)])
    reports = proto.perturb(records, rng=6)
    for mech, part, tally in zip(proto.marginals, reports.parts, proto.tallies(reports),
                                 strict=True):  # fmt: skip
        n = part.shape[0]
        h = part.sum(axis=0)
        expected = (h / n - mech.q_star) / (mech.p_star - mech.q_star)
        np.testing.assert_allclose(mech.unbiased_frequencies(tally), expected, atol=1e-12)


@pytest.mark.parametrize(("k", "d"), [(2, 2), (5, 3), (20, 4), (40, 16), (16, 16)])
def test_compiled_bucket_draw_picks_the_smallest_keys(k, d):
    from bayesldp.mechanisms.longitudinal.dbitflip import _smallest_ascending

    keys = np.random.default_rng([k, d]).random((3000, k))
    out = np.empty((keys.shape[0], d), dtype=np.int64)
    _smallest_ascending(keys, out)
    assert np.array_equal(out, np.sort(np.argpartition(keys, d - 1, axis=1)[:, :d], axis=1))
