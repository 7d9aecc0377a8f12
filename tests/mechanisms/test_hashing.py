import itertools
import math

import numpy as np
import pytest

import bayesldp
from bayesldp.audit import audit
from bayesldp.mechanisms import hashing
from bayesldp.mechanisms.base import realised_epsilon_of_channel
from bayesldp.mechanisms.hashing import BLH, OLH, HashReports, LocalHashing
from tests.stats_helpers import assert_matches_distribution, assert_unbiased_with_variance

KS = [2, 3, 10, 100]
EPSILONS = [0.1, 0.5, 1, 2, 5, 10]
P31 = 2**31 - 1


def _reports(mech, x, seed):
    return mech.perturb(np.asarray(x), rng=seed)


# ---------------------------------------------------------------------- privacy
@pytest.mark.parametrize("k", KS)
@pytest.mark.parametrize("eps", EPSILONS)
@pytest.mark.parametrize("cls", [BLH, OLH])
def test_realised_epsilon_is_tight(cls, k, eps):
    mech = cls(k, eps)
    assert mech.realised_epsilon() <= eps * (1 + 1e-9)
    assert mech.realised_epsilon() == pytest.approx(eps, rel=1e-9)


def test_default_g_and_params():
    assert OLH(10, 1.0).g == round(math.e) + 1 == 4
    assert OLH(10, 0.1).g == 2
    assert OLH(10, 10.0).g == round(math.exp(10)) + 1
    assert OLH(10, 30.0).g == P31  # capped at the hash prime
    assert BLH(10, 1.0).g == 2
    assert OLH(10, 1.0) == OLH(10, 1.0, g=4)
    assert OLH(10, 1.0).params() == {"k": 10, "epsilon": 1.0, "g": 4}
    assert BLH(10, 1.0).params() == {"k": 10, "epsilon": 1.0}
    assert OLH(10, 1.0) != OLH(10, 1.0, _prime=31)


@pytest.mark.parametrize("a, b", [(1, 0), (12345, 678), (P31 - 1, P31 - 1)])
def test_channel_given_hash(a, b):
    mech = OLH(20, 1.5)
    chan = mech.channel_given_hash(a, b)
    assert chan.shape == (20, mech.g)
    np.testing.assert_allclose(chan.sum(axis=1), 1.0, rtol=1e-12)
    h = [((a * x + b) % P31) % mech.g for x in range(20)]  # Python ints: no overflow possible
    assert np.array_equal(np.argmax(chan, axis=1), h)
    expected = math.log(mech.p / mech.q) if len(set(h)) > 1 else 0.0
    assert realised_epsilon_of_channel(chan) == pytest.approx(expected)
    assert mech.p / mech.q == pytest.approx(math.exp(1.5), rel=1e-12)


def test_realised_epsilon_catches_a_wrong_p():
    class Leaky(OLH):
        @property
        def p(self):
            return 1.05 * super().p

    assert Leaky(10, 1.0).realised_epsilon() > 1.04


def test_channel_property_not_supported():
    with pytest.raises(bayesldp.NotSupportedError):
        _ = OLH(10, 1.0).channel


# ---------------------------------------------------------------------- hash family
@pytest.mark.parametrize("prime, g", [(31, 2), (31, 4), (37, 5), (37, 7), (11, 11), (13, 3)])
def test_collision_probability_brute_force(prime, g):
    mech = LocalHashing(6, 1.0, g, _prime=prime)
    for x0, x1 in itertools.combinations(range(6), 2):
        same = sum(
            ((a * x0 + b) % prime) % g == ((a * x1 + b) % prime) % g
            for a in range(1, prime)
            for b in range(prime)
        )
        assert mech.collision_probability == pytest.approx(same / (prime * (prime - 1)), rel=1e-14)


def test_collision_probability_default_prime():
    for g in [2, 3, 4, 8, 21, 22027]:
        c = LocalHashing(10, 1.0, g).collision_probability
        assert abs(c - 1 / g) < 2 / P31
    # q* is Wang et al.'s 1/g up to O(1/P), and Var* their closed form
    for eps in [0.5, 1.0, 3.0]:
        mech = OLH(50, eps)
        e, g = math.exp(eps), mech.g
        assert mech.q_star == pytest.approx(1 / g, abs=1e-8)
        assert mech.var_star() == pytest.approx(
            (e - 1 + g) ** 2 / ((e - 1) ** 2 * (g - 1)), rel=1e-6
        )


def test_empirical_collision_rate():
    mech = OLH(100, 1.0)
    reports = _reports(mech, np.zeros(400_000, dtype=int), 8)
    rate = np.mean(mech.hash_values(reports, 17) == mech.hash_values(reports, 90))
    c = mech.collision_probability
    se = math.sqrt(c * (1 - c) / 400_000)
    assert abs(rate - c) < 4 * se


def test_hash_matches_python_integers():
    mech = OLH(1000, 2.0)
    reports = _reports(mech, np.arange(300) % 1000, 3)
    assert reports.a.min() >= 1 and reports.a.max() <= P31 - 1
    for x in [0, 1, 999]:
        expected = [
            ((int(a) * x + int(b)) % P31) % mech.g
            for a, b in zip(reports.a, reports.b, strict=True)
        ]
        assert np.array_equal(mech.hash_values(reports, x), expected)
        assert np.array_equal(mech.supports(reports, x), np.array(expected) == reports.y)


@pytest.mark.parametrize(
    "mech",
    [OLH(50, 1.0), OLH(50, 0.5), BLH(7, 1.0), LocalHashing(20, 1.0, 5, _prime=31)],
    ids=["olh-g4", "olh-g3", "blh", "small-prime"],
)
def test_tally_matches_direct_support(mech, monkeypatch):
    monkeypatch.setattr(hashing, "_TALLY_BLOCK", 1)  # several blocks of 4096 users
    n = 10_000
    reports = _reports(mech, np.arange(n) % mech.k, 5)
    tally = mech.tally(reports)
    xs = np.arange(mech.k)
    support = (reports.a[:, None] * xs + reports.b[:, None]) % mech.prime % mech.g == reports.y[
        :, None
    ]
    assert tally.n == n and tally.is_support_form
    assert tally.levels == (mech.q, mech.p)
    np.testing.assert_array_equal(tally.stat, support.sum(axis=0))
    theta = np.random.default_rng(1).dirichlet(np.ones(mech.k), size=3)
    direct = np.log((mech.q + (mech.p - mech.q) * support) @ theta.T).sum(axis=0)
    np.testing.assert_allclose(tally.loglik(theta), direct, rtol=1e-12)


# ---------------------------------------------------------------------- perturbation
@pytest.mark.parametrize("eps", [0.5, 1.0, 3.0])
def test_perturbed_hash_value_distribution(eps):
    mech = OLH(100, eps)
    reports = _reports(mech, np.full(60_000, 42), 11)
    offset = (reports.y - mech.hash_values(reports, 42)) % mech.g
    expected = np.full(mech.g, mech.q)
    expected[0] = mech.p
    assert_matches_distribution(np.bincount(offset, minlength=mech.g), expected)


def test_blh_perturbed_hash_value_distribution():
    mech = BLH(10, 1.0)
    reports = _reports(mech, np.full(60_000, 3), 12)
    kept = np.count_nonzero(reports.y == mech.hash_values(reports, 3))
    assert_matches_distribution([kept, 60_000 - kept], [mech.p, mech.q])


# ---------------------------------------------------------------------- oracle
@pytest.mark.parametrize(
    "mech",
    [BLH(6, 1.0), OLH(6, 2.0), LocalHashing(6, 1.0, 4, _prime=31)],
    ids=["blh", "olh", "small-prime"],
)
def test_oracle_unbiased_and_variance_formula(mech):
    true_counts = np.array([300, 150, 80, 50, 20, 0])
    n = true_counts.sum()
    theta = true_counts / n
    x = np.repeat(np.arange(6), true_counts)
    gen = np.random.default_rng(5)
    est = np.array(
        [mech.unbiased_frequencies(mech.tally(mech.perturb(x, gen))) for _ in range(3000)]
    )
    assert_unbiased_with_variance(est, theta, mech.oracle_variance(theta, n))


def test_small_prime_needs_the_exact_q_star():
    # with P = 31, g = 4 the collision probability is 7/31, not 1/4: Wang et al.'s idealised
    # q* = 1/g would give a visibly biased estimate; the exact q* does not.
    mech = LocalHashing(4, 1.0, 4, _prime=31)
    assert mech.collision_probability == pytest.approx(7 / 31, rel=1e-14)
    x = np.zeros(400_000, dtype=int)
    tally = mech.tally(mech.perturb(x, rng=2))
    exact = mech.unbiased_frequencies(tally)
    naive = (tally.stat / tally.n - 1 / 4) / (mech.p - 1 / 4)
    sd = np.sqrt(mech.oracle_variance(np.array([1.0, 0, 0, 0]), x.size))
    assert np.all(np.abs(exact - [1, 0, 0, 0]) < 4 * sd)
    assert np.all(np.abs(naive[1:]) > 6 * sd[1:])  # bias ~ -0.032, sd ~ 0.003


def test_merge_equals_tally_of_union():
    mech = OLH(10, 1.0)
    x = np.arange(2000) % 10
    r1, r2 = _reports(mech, x[:1200], 1), _reports(mech, x[1200:], 2)
    union = HashReports(*(np.concatenate([getattr(r1, f), getattr(r2, f)]) for f in "aby"))
    assert mech.tally(r1) + mech.tally(r2) == mech.tally(union)


def test_simulate_tally():
    mech = OLH(5, 1.0)
    tally = mech.simulate_tally(np.array([10, 0, 5, 0, 1]), rng=4)
    assert tally.n == 16 and tally.mechanism == mech


# ---------------------------------------------------------------------- reproducibility, audit
def test_same_seed_same_bits():
    mech = OLH(100, 1.0)
    x = np.arange(1000) % 100
    r1, r2 = mech.perturb(x, rng=42), mech.perturb(x, rng=42)
    for field in "aby":
        assert np.array_equal(getattr(r1, field), getattr(r2, field))
    assert mech.tally(r1) == mech.tally(r2)
    assert not np.array_equal(r1.a, mech.perturb(x, rng=43).a)


@pytest.mark.parametrize("mech", [BLH(10, 1.0), OLH(10, 1.0)], ids=["blh", "olh"])
def test_audit_finds_no_violation(mech):
    result = audit(mech, trials=100_000, rng=1)
    assert result.passed
    assert result.epsilon_lower_bound > 0.8  # the audit has power: local hashing is tight


# ---------------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    "g, exc", [(1, ValueError), (0, ValueError), (P31 + 1, ValueError), (2.5, TypeError)]
)
def test_bad_g(g, exc):
    with pytest.raises(exc, match="g"):
        OLH(10, 1.0, g=g)
    with pytest.raises(exc, match="g"):
        LocalHashing(10, 1.0, g)
    with pytest.raises(TypeError, match="g"):
        LocalHashing(10, 1.0, True)


def test_bad_k_epsilon_prime():
    with pytest.raises(ValueError, match="k"):
        BLH(1, 1.0)
    with pytest.raises(ValueError, match="k: local hashing needs k < P"):
        LocalHashing(31, 1.0, 2, _prime=31)
    with pytest.raises(ValueError, match="_prime"):
        LocalHashing(5, 1.0, 2, _prime=33)
    with pytest.raises(ValueError, match="epsilon"):
        OLH(10, 0.0)
    with pytest.raises(ValueError, match="epsilon"):
        OLH(10, float("nan"))


@pytest.mark.parametrize(
    "bad, match",
    [([0, 1, 10], "0..9"), ([-1, 2], "0..9"), ([0.5, 1], "integers"), ([], "empty")],
)
def test_bad_values(bad, match):
    with pytest.raises((ValueError, TypeError), match=match):
        OLH(10, 1.0).perturb(np.array(bad) if bad else np.array([], dtype=int))


def _good_reports():
    mech = OLH(10, 1.0)
    return mech, mech.perturb(np.arange(5), rng=0)


@pytest.mark.parametrize(
    "change, exc, match",
    [
        ({"a": np.array([0, 1, 1, 1, 1])}, ValueError, r"reports\.a: must lie in 1\.\."),
        ({"a": np.full(5, P31)}, ValueError, r"reports\.a: must lie in"),
        ({"b": np.array([-1, 0, 0, 0, 0])}, ValueError, r"reports\.b: must lie in 0\.\."),
        ({"y": np.array([0, 0, 0, 0, 4])}, ValueError, r"reports\.y: must lie in 0\.\.3, got 4"),
        ({"y": np.zeros(4, dtype=int)}, ValueError, "equal lengths"),
        ({"y": np.zeros(5)}, TypeError, r"reports\.y: expected integers"),
        ({"b": np.zeros((5, 1), dtype=int)}, ValueError, r"reports\.b: expected a 1-d"),
    ],
)
def test_bad_reports(change, exc, match):
    mech, good = _good_reports()
    fields = {"a": good.a, "b": good.b, "y": good.y, **change}
    with pytest.raises(exc, match=match):
        mech.tally(HashReports(**fields))


def test_bad_report_container_empty_and_foreign_tallies():
    mech, good = _good_reports()
    with pytest.raises(TypeError, match="HashReports"):
        mech.tally((good.a, good.b, good.y))
    with pytest.raises(TypeError, match="HashReports"):
        mech.tally(good.y)
    empty = np.array([], dtype=np.int64)
    with pytest.raises(ValueError, match="empty"):
        mech.tally(HashReports(empty, empty, empty))
    with pytest.raises(ValueError, match=r"x: must lie in 0\.\.9"):
        mech.supports(good, 10)
    with pytest.raises(ValueError, match="b: must lie in"):
        mech.channel_given_hash(1, P31)
    tally = mech.tally(good)
    with pytest.raises(bayesldp.IncompatibleTallyError):
        tally + OLH(10, 2.0).tally(OLH(10, 2.0).perturb([0], rng=0))
    with pytest.raises(bayesldp.IncompatibleTallyError):
        BLH(10, 1.0).unbiased_frequencies(tally)
