"""Count-mean sketch (CMS) and Hadamard count-mean sketch (HCMS): exact epsilon, the report law,
both oracles (channel inverse and Apple's sketch estimate), tallies, report tables, bad input."""

import math

import numpy as np
import pytest
from scipy.stats import chisquare

import bayesldp
from bayesldp.errors import InvalidInputError, InvalidTypeError
from bayesldp.mechanisms import make_mechanism
from bayesldp.mechanisms._splitmix import mix64, splitmix64
from bayesldp.mechanisms.sketch import CMS, HCMS, CMSReports, HCMSReports, sketch_hashes

CLASSES = [CMS, HCMS]


@pytest.mark.parametrize("cls", CLASSES)
@pytest.mark.parametrize("k", [2, 3, 10, 100])
@pytest.mark.parametrize("eps", [0.1, 1.0, 10.0])
def test_realised_epsilon_is_the_budget(cls, k, eps):
    assert cls(k, eps).realised_epsilon() == pytest.approx(eps, abs=1e-9)


@pytest.mark.parametrize("cls", CLASSES)
@pytest.mark.parametrize("k, m, k_hash", [(3, 4, 2), (5, 8, 3), (6, 4, 5)])
def test_factorised_epsilon_equals_the_full_channel(cls, k, m, k_hash, monkeypatch):
    mech = cls(k, 0.7, m=m, k_hash=k_hash)
    channel = mech.channel
    np.testing.assert_allclose(channel.sum(axis=1), 1.0, rtol=1e-12)
    full = mech.realised_epsilon()
    monkeypatch.setattr("bayesldp.mechanisms.sketch_common.MAX_CHANNEL_ENTRIES", 0)
    assert mech.realised_epsilon() == pytest.approx(full, abs=1e-12)
    assert full == pytest.approx(0.7, abs=1e-12)


def test_hash_family_is_the_documented_one():
    # the standard SplitMix64 test vector: the first five outputs for seed 1234567
    assert [splitmix64(1234567, t) for t in range(1, 6)] == [
        6457827717110365317, 3203168211198807973, 9817491932198370423, 4593380528125082431,
        16408922859458223821,
    ]  # fmt: skip
    # the numba finaliser and the Python SplitMix64 agree
    seed, t = 12345, 7
    golden = 0x9E3779B97F4A7C15
    assert int(mix64(np.uint64((seed + t * golden) % 2**64))) == splitmix64(seed, t)
    table = sketch_hashes(50, 16, 4, 9)
    for j in range(4):
        a = 1 + splitmix64(9, 2 * j + 1) % (2**31 - 2)
        b = splitmix64(9, 2 * j + 2) % (2**31 - 1)
        assert table[j].tolist() == [((a * x + b) % (2**31 - 1)) % 16 for x in range(50)]
    np.testing.assert_array_equal(CMS(50, 1.0, m=16, k_hash=4, hash_seed=9).hashes, table)


def _column(mech, reports):
    """The channel column of each report (see the ``channel`` docstrings)."""
    if isinstance(mech, CMS):
        weights = 1 << np.arange(mech.m)
        return reports.row * 2**mech.m + (reports.bits > 0).astype(int) @ weights
    return 2 * (reports.row * mech.m + reports.index) + (reports.bit > 0)


@pytest.mark.parametrize("cls", CLASSES)
@pytest.mark.parametrize("x", [0, 3])
def test_reports_follow_the_channel_row(cls, x):
    mech = cls(5, 1.2, m=4, k_hash=3, hash_seed=2)
    reports = mech.perturb(np.full(80_000, x), rng=11)
    observed = np.bincount(_column(mech, reports), minlength=mech.channel.shape[1])
    expected = mech.channel[x] * len(reports)
    assert chisquare(observed, expected).pvalue > 1e-3


def _support_of_columns(mech):
    """``D[y, x]``: column ``y`` of the channel supports ``x`` (from the report it encodes)."""
    if isinstance(mech, CMS):
        patterns = (np.arange(2**mech.m)[:, None] >> np.arange(mech.m)) & 1
        n = mech.k_hash * 2**mech.m
        rows = np.repeat(np.arange(mech.k_hash), 2**mech.m)
        bits = (2 * np.tile(patterns, (mech.k_hash, 1)) - 1).astype(np.int8)
        return mech.membership(CMSReports(rows, bits)), n
    n = 2 * mech.k_hash * mech.m
    cols = np.arange(n)
    reports = HCMSReports(cols // (2 * mech.m), (cols // 2) % mech.m,
                          (2 * (cols % 2) - 1).astype(np.int8))  # fmt: skip
    return mech.membership(reports), n


@pytest.mark.parametrize("cls", CLASSES)
def test_oracle_matrices_and_covariance_equal_the_brute_force(cls):
    mech = cls(6, 0.9, m=4, k_hash=3, hash_seed=5)
    theta = np.array([0.3, 0.25, 0.2, 0.15, 0.1, 0.0])
    channel = mech.channel
    support, _ = _support_of_columns(mech)
    big_m = channel @ support  # Pr[x in S | X = x']
    np.testing.assert_allclose(mech.support_matrix(), big_m, rtol=1e-12, atol=1e-15)
    # likelihood rows: levels (1, e^eps) on the support, up to each column's factor
    levels = np.where(support.T, math.exp(0.9), 1.0)
    np.testing.assert_allclose(channel / channel.min(axis=0), levels / levels.min(axis=0),
                               rtol=1e-12)  # fmt: skip
    pair = np.einsum("xy,yi,yj->ij", theta[:, None] * channel, support, support)
    brute = pair - big_m.T @ (theta[:, None] * big_m)
    np.testing.assert_allclose(mech._support_cov(theta), brute, rtol=1e-11, atol=1e-14)


@pytest.mark.parametrize("cls", CLASSES)
def test_both_oracles_are_unbiased_for_what_they_estimate_with_their_variance(cls):
    mech = cls(6, 1.0, m=8, k_hash=4, hash_seed=1)
    theta = np.array([0.35, 0.25, 0.15, 0.15, 0.1, 0.0])
    n, reps = 2000, 400
    counts = (theta * n).astype(int)
    gen = np.random.default_rng(3)
    tallies = [mech.simulate_tally(counts, rng=gen) for _ in range(reps)]
    # the channel inverse: unbiased for theta, with oracle_variance
    est = np.array([bayesldp.estimate(t, "oracle").frequencies for t in tallies])
    var = mech.oracle_variance(theta, n)
    assert np.all(np.abs(est.mean(axis=0) - theta) < 4 * np.sqrt(var / reps))
    np.testing.assert_allclose(est.var(axis=0, ddof=1), var, rtol=0.25)
    # Apple's sketch estimate: unbiased for sketch_expectation, with sketch_variance
    sketch = np.array([mech.sketch_frequencies(t) for t in tallies])
    expect, svar = mech.sketch_expectation(theta), mech.sketch_variance(theta, n)
    assert np.all(np.abs(sketch.mean(axis=0) - expect) < 4 * np.sqrt(svar / reps))
    np.testing.assert_allclose(sketch.var(axis=0, ddof=1), svar, rtol=0.25)
    # with this fixed family the sketch is biased by collisions (which the inverse removes)
    coll = mech.collision_matrix()
    assert np.any(coll[~np.eye(6, dtype=bool)] > 0)
    assert np.abs(expect - theta).max() > 10 * np.sqrt(svar / reps).max()


def test_sketch_is_unbiased_over_random_hash_families():
    """Apple's claim: averaged over hash functions, ``E[sketch] = theta``.  Per family the
    expectation is ``m/(m-1) (C theta - 1/m)`` (checked against simulation above); over 2000
    hash seeds its mean is theta (the hash table straight from ``sketch_hashes``: a family that
    cannot separate two categories is refused by the mechanisms, and leaving those out would
    condition the average)."""
    theta = np.array([0.5, 0.3, 0.2, 0.0])
    m, seeds = 8, 2000
    expectations = []
    for seed in range(seeds):
        (row,) = sketch_hashes(4, m, 1, seed)
        coll = row[:, None] == row[None, :]
        expectations.append(m / (m - 1) * (coll @ theta - 1 / m))
    # each entry's per-seed spread is at most (m/(m-1)) * 0.5: 4 standard errors
    bound = 4 * (m / (m - 1)) * 0.5 / math.sqrt(seeds)
    assert np.abs(np.mean(expectations, axis=0) - theta).max() < bound


@pytest.mark.parametrize("cls", CLASSES)
def test_same_seed_same_reports(cls):
    mech = cls(10, 1.0)
    x = np.arange(1000) % 10
    a, b, c = mech.perturb(x, rng=4), mech.perturb(x, rng=4), mech.perturb(x, rng=5)
    fields = ["row", "bits"] if cls is CMS else ["row", "index", "bit"]
    for name in fields:
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    assert any(not np.array_equal(getattr(a, f), getattr(c, f)) for f in fields)


@pytest.mark.parametrize("cls", CLASSES)
@pytest.mark.parametrize("k", [8, 40])  # bincount path and one row per report
def test_tally_and_estimates(cls, k):
    mech = cls(k, 2.0)
    gen = np.random.default_rng(4)
    theta = gen.dirichlet(np.ones(k))
    x = gen.choice(k, size=40_000, p=theta)
    reports = mech.perturb(x, rng=5)
    tally = mech.tally(reports)
    assert tally.n == x.size and tally.is_support_form
    np.testing.assert_array_equal(tally.stat, mech.membership(reports).sum(axis=0))
    tol = 0.06 if cls is HCMS else 0.03
    for method in ("oracle", "mle", "em"):
        f = bayesldp.estimate(tally, method).frequencies
        assert np.abs(f - theta).max() < tol, method


@pytest.mark.parametrize("cls", CLASSES)
def test_report_frames_round_trip(cls):
    mech = cls(9, 1.0, m=16, k_hash=3)
    reports = mech.perturb(np.arange(90) % 9, rng=6)
    frame = mech.reports_to_frame(reports)
    if cls is CMS:
        assert list(frame.columns) == ["row", *(f"b{u}" for u in range(16))]
    else:
        assert list(frame.columns) == ["row", "index", "bit"]
    assert mech.tally(mech.reports_from_frame(frame)) == mech.tally(reports)
    assert mech == make_mechanism(cls.name.lower(), 9, 1.0, m=16, k_hash=3)


def test_bad_input():
    with pytest.raises(InvalidInputError, match="m: HCMS needs a power of two"):
        HCMS(5, 1.0, m=12)
    with pytest.raises(InvalidInputError, match=r"m, k_hash: .* share a bucket in every"):
        CMS(40, 1.0, m=2, k_hash=2)
    mech = CMS(5, 1.0, m=8, k_hash=2)
    good = mech.perturb(np.arange(5), rng=1)
    with pytest.raises(InvalidInputError, match=r"reports.bits: expected shape \(5, 8\)"):
        mech.tally(CMSReports(good.row, good.bits[:, :7]))
    with pytest.raises(InvalidInputError, match=r"reports.row: must lie in 0..1"):
        mech.tally(CMSReports(good.row + 2, good.bits))
    with pytest.raises(InvalidInputError, match=r"reports.bits: entries must be -1 or"):
        mech.tally(CMSReports(good.row, np.zeros_like(good.bits)))
    with pytest.raises(InvalidTypeError, match="reports: expected CMSReports"):
        mech.tally(good.bits)
    hmech = HCMS(5, 1.0, m=8, k_hash=2)
    hgood = hmech.perturb(np.arange(5), rng=1)
    with pytest.raises(InvalidInputError, match=r"reports.index: must lie in 0..7"):
        hmech.tally(HCMSReports(hgood.row, hgood.index + 8, hgood.bit))
    with pytest.raises(InvalidInputError, match=r"reports.index: has 4 entries"):
        hmech.tally(HCMSReports(hgood.row, hgood.index[:4], hgood.bit))
    frame = hmech.reports_to_frame(hgood).drop(columns="index")
    with pytest.raises(InvalidInputError, match=r"lacks column.*index"):
        hmech.reports_from_frame(frame)
    with pytest.raises(InvalidInputError, match=r"x: categories must lie in 0..4"):
        mech.perturb(np.array([5]))


@pytest.mark.parametrize("cls", CLASSES)
@pytest.mark.parametrize("path", ["simulate_tally", "perturb"])
def test_support_patterns_follow_the_channel(cls, path):
    """The tally's support patterns (what every estimator reads) have the law the channel gives
    them, for users holding x = 2, whether simulated directly (CMS draws only the used
    buckets' entries) or perturbed and tallied."""
    mech = cls(5, 0.8, m=4, k_hash=3, hash_seed=4)
    support, _ = _support_of_columns(mech)
    keys = support.astype(int) @ (1 << np.arange(5))
    exact = np.bincount(keys, weights=mech.channel[2], minlength=32)
    n = 60_000
    if path == "simulate_tally":
        tally = mech.simulate_tally(np.array([0, 0, n, 0, 0]), rng=8)
    else:
        tally = mech.tally(mech.perturb(np.full(n, 2), rng=8))
    observed = np.zeros(32)
    np.add.at(observed, tally.support.astype(int) @ (1 << np.arange(5)), tally.counts)
    live = exact > 0
    assert observed[~live].sum() == 0
    assert chisquare(observed[live], exact[live] * n).pvalue > 1e-3


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int64])
def test_bad_sign_entries_are_refused_in_one_line(dtype):
    """The compiled int8 check and numpy's for other dtypes: one bad entry anywhere."""
    mech = CMS(5, 1.0, m=8, k_hash=2)
    good = mech.perturb(np.arange(5).repeat(40), rng=2)
    mech.tally(CMSReports(good.row, good.bits.astype(dtype)))  # +-1 in any dtype: accepted
    for bad in (0, 2, -2, 127 if dtype == np.int8 else 257):
        bits = good.bits.astype(dtype)
        bits[-1, -1] = bad
        with pytest.raises(InvalidInputError, match=rf"entries must be -1 or \+1, got {bad}$"):
            mech.tally(CMSReports(good.row, bits))
