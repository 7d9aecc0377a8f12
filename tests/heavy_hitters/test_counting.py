"""The compiled OLH reading (support counts and matrix) against the numpy hash, exactly."""

import numpy as np
import pytest

from bayesldp import HashReports, Tally
from bayesldp.errors import InvalidInputError
from bayesldp.heavy_hitters import CandidateOLH
from bayesldp.heavy_hitters._counting import reciprocal, support_counts, support_matrix
from bayesldp.mechanisms.hashing import MERSENNE_31 as P


def _numpy_support(a, b, y, values, g):
    return np.stack([(a * v + b) % P % g == y for v in values], axis=1)


def _reports(g, n, rng):
    """Random reports with the extreme seeds and, for half the users, y = the hash of value 3
    (so large g still gives hits)."""
    a = rng.integers(1, P, n)
    b = rng.integers(0, P, n)
    y = rng.integers(0, g, n)
    a[:4], b[:4] = [P - 1, 1, P - 1, 1], [P - 1, P - 1, 0, 0]
    half = n // 2
    y[:half] = (a[:half] * 3 + b[:half]) % P % g
    return a, b, y


@pytest.mark.parametrize("g", [2, 3, 4, 56, 1000, 2**20 + 7, 2**30, P - 1, P])
def test_counts_and_matrix_equal_numpy_hash(g):
    rng = np.random.default_rng(g % 1000)
    a, b, y = _reports(g, 3000, rng)
    values = np.concatenate([np.arange(40), rng.integers(0, P, 30), np.arange(P - 20, P), [3]])
    values = np.unique(values)
    expected = _numpy_support(a, b, y, values, g)
    np.testing.assert_array_equal(support_counts(a, b, y, values, g), expected.sum(axis=0))
    out = np.empty(expected.shape, dtype=bool)
    np.testing.assert_array_equal(support_matrix(a, b, y, values, g, out), expected.sum(axis=0))
    np.testing.assert_array_equal(out, expected)


def test_counts_cross_user_blocks():
    """More users than one block (2048) and a ragged last block."""
    rng = np.random.default_rng(7)
    a, b, y = _reports(5, 2048 * 3 + 17, rng)
    values = rng.permutation(2**16)[:50]
    expected = _numpy_support(a, b, y, values, 5).sum(axis=0)
    np.testing.assert_array_equal(support_counts(a, b, y, values, 5), expected)


@pytest.mark.parametrize("g", [2, 3, 7, 56, 1001, 2**16 + 1, 2**31 - 3, P - 1, P])
def test_reciprocal_divides_exactly_below_2_31(g):
    mult, shift = reciprocal(g)
    rng = np.random.default_rng(g % 997)
    q = np.arange(0, (P - 1) // g + 1, max(1, (P // g) // 5000), dtype=np.int64)
    x = np.concatenate([q * g, q * g - 1, q * g + g - 1, rng.integers(0, P, 10_000), [P - 1]])
    x = x[(x >= 0) & (x < P)].astype(object)  # Python ints: the product may need 63 bits
    assert all((xi * mult) >> shift == xi // g for xi in x)


@pytest.mark.parametrize("other", [False, True])
def test_candidate_olh_counts_estimates_and_tally_match_numpy(other):
    """support_counts, estimate and tally (support or dense rows) equal the numpy hash's."""
    rng = np.random.default_rng(11)
    values = np.array([5, 6, 7, 2**24 + 3, P - 1])
    mech = CandidateOLH(values, 1.5, other=other)
    a, b, y = _reports(mech.g, 5000, rng)
    reports = HashReports(a, b, y)
    support = _numpy_support(a, b, y, values, mech.g)
    stat = support.sum(axis=0)
    if other:
        stat = np.append(stat, y.size - stat.sum())
        rows = np.where(support, mech.p, mech.q)
        rows = np.column_stack([rows, mech.q + (mech.p - mech.q) * mech.other_levels()[y]])
        expected = Tally(np.ones(y.size), rows=rows, stat=stat.astype(float), mechanism=mech)
    else:
        expected = Tally(np.ones(y.size), support=support, levels=(mech.q, mech.p),
                         stat=stat.astype(float), mechanism=mech)  # fmt: skip
    tally = mech.tally(reports)
    assert tally == expected
    np.testing.assert_array_equal(mech.support_counts(reports), stat)
    np.testing.assert_array_equal(mech.estimate(reports), mech.unbiased_frequencies(tally))


def test_bad_reports_are_refused_in_one_line():
    mech = CandidateOLH([1, 2, 3], 1.0)
    good = np.ones(4, dtype=np.int64)
    for a, y, what in ((np.zeros(4, np.int64), good, "reports.a"),
                       (good, np.full(4, mech.g), "reports.y")):  # fmt: skip
        with pytest.raises(InvalidInputError, match=what) as err:
            mech.estimate(HashReports(a, good, y))
        assert "\n" not in str(err.value)


def test_bucket_counts_equal_numpy():
    from bayesldp.heavy_hitters._counting import bucket_counts

    rng = np.random.default_rng(5)
    n, m, k_hash, n_groups = 3000, 64, 8, 3
    group, rows = rng.integers(0, n_groups, n), rng.integers(0, k_hash, n)
    bits = np.where(rng.random((n, m)) < 0.3, 1, -1).astype(np.int8)
    expected = np.zeros((n_groups, k_hash, m), dtype=np.int64)
    np.add.at(expected, (group, rows), bits > 0)
    np.testing.assert_array_equal(bucket_counts(group, rows, bits, n_groups, k_hash), expected)


def test_candidate_cms_grouped_counts_equal_support_counts_per_group():
    """SFP's one-pass count per position equals CandidateCMS.support_counts on each position's
    reports, and Apple's estimate from it equals sketch_estimate."""
    from bayesldp.heavy_hitters import CandidateCMS
    from bayesldp.mechanisms.sketch import CMSReports

    mech = CandidateCMS([5, 17, 2**24 + 3, 99], 2.0, m=64, k_hash=8)
    rng = np.random.default_rng(9)
    reports = mech.perturb_values(rng.choice([5, 17, 40, 2**24 + 3], 4000), rng=10)
    group = rng.integers(0, 3, len(reports))
    grouped = mech.grouped_counts(group, reports.row, reports.bits, 3)
    for c in range(3):
        mask = group == c
        part = CMSReports(reports.row[mask], reports.bits[mask])
        np.testing.assert_array_equal(grouped[c], mech.support_counts(part))
        np.testing.assert_array_equal(mech._sketch_from_stat(grouped[c], int(mask.sum())),
                                      mech.sketch_estimate(part))  # fmt: skip
