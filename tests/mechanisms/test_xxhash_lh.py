"""BLHXX / OLHXX: local hashing with pure-ldp's and multi-freq-ldpy's xxhash family."""

import math

import numpy as np
import pytest

import bayesldp
from bayesldp.audit import audit
from bayesldp.mechanisms import _xxh32, hashing
from bayesldp.mechanisms.base import realised_epsilon_of_channel
from bayesldp.mechanisms.xxhash_lh import BLHXX, OLHXX, SeedReports, XXHashLocalHashing
from bayesldp.workflows.cli import main
from bayesldp.workflows.report_files import read_reports
from tests.stats_helpers import assert_matches_distribution, assert_unbiased_with_variance

KS = [2, 3, 10, 100]
EPSILONS = [0.1, 0.5, 1, 2, 5, 10]

# python-xxhash 3.8.2: xxhash.xxh32(str(x), seed=s).intdigest() (the peers' call)
PEER_DIGESTS = [
    (0, 0, 1212501170),
    (7, 5, 1867622269),
    (7, 2**63 - 1, 2467682842),  # the seed acts mod 2^32: 2^63 - 1 = 2^32 - 1 (mod 2^32)
    (9, 2**32 - 1, 45648588),
    (123456, 987654321, 3033918570),
    (2147483646, 1, 3884373174),
]


# ---------------------------------------------------------------------- the hash
@pytest.mark.parametrize(
    "data, digest",
    [(b"", 0x02CC5D05), (b"a", 0x550D7456), (b"abc", 0x32D153FF), (b"0123456789abcde", 0x1DBDFA0F)],
)
def test_xxh32_specification_vectors(data, digest):
    arr = np.frombuffer(data.ljust(16, b"\0"), dtype=np.uint8)
    assert _xxh32.xxh32_short(arr, len(data), np.uint64(0)) == digest


@pytest.mark.parametrize("x, seed, digest", PEER_DIGESTS)
def test_hash_of_value_and_seed_equals_the_peers(x, seed, digest):
    mech = OLHXX(2**31 - 1, 1.0, g=2**32)  # g = 2^32: the digest itself
    reports = SeedReports(np.array([0]), np.array([seed]))
    assert mech.hash_values(reports, x)[0] == digest
    assert OLHXX(2**31 - 1, 1.0).hash_values(reports, x)[0] == digest % 4


def test_hash_equals_python_xxhash_on_many_pairs():
    xxhash = pytest.importorskip("xxhash")
    rng = np.random.default_rng(0)
    seeds = rng.integers(0, 2**63 - 1, size=20_000, dtype=np.int64)
    x = np.concatenate([np.arange(10_000), rng.integers(0, 2**31 - 1, size=10_000)])
    ours = _xxh32.hash_values((seeds % 2**32).astype(np.uint64), x)
    # bytes, not str: xxhash >= 4 refuses str; < 4 hashes a str's UTF-8 bytes, the same
    pairs = zip(x.tolist(), (seeds % 2**32).tolist(), strict=True)
    theirs = [xxhash.xxh32_intdigest(str(v).encode(), s) for v, s in pairs]
    np.testing.assert_array_equal(ours, np.array(theirs, dtype=np.uint64))


@pytest.mark.parametrize("g", [4, 5])
def test_tally_kernel_on_long_decimal_strings(g):
    # the tally's kernel splits str(x) into 4-byte words and a tail: 1 to 10 digits
    xs = np.array([0, 9, 10, 999, 1000, 12345, 1234567, 99999999, 123456789, 2**31 - 2])
    rng = np.random.default_rng(4)
    seeds = rng.integers(0, 2**32, size=3000, dtype=np.int64).astype(np.uint64)
    y = rng.integers(0, g, size=3000).astype(np.uint64)
    hits, stat = np.empty((xs.size, 3000), dtype=bool), np.zeros(xs.size, dtype=np.int64)
    terms = _xxh32.category_terms(xs)
    _xxh32.hits_by_category(seeds, y, np.uint64(g), *terms, hits, stat)
    for j, x in enumerate(xs):
        expected = _xxh32.hash_values(seeds, np.full(3000, x)) % np.uint64(g) == y
        np.testing.assert_array_equal(hits[j], expected)
        assert stat[j] == expected.sum()


def test_empirical_collision_rate():
    # c = Pr_s[h_s(17) = h_s(90)] = 1/g within 4 standard errors over 400,000 seeds
    mech = OLHXX(100, 1.0)
    reports = mech.perturb(np.zeros(400_000, dtype=int), rng=8)
    rate = np.mean(mech.hash_values(reports, 17) == mech.hash_values(reports, 90))
    c = mech.collision_probability
    assert c == 1 / mech.g
    assert abs(rate - c) < 4 * math.sqrt(c * (1 - c) / 400_000)


# ---------------------------------------------------------------------- privacy, parameters
@pytest.mark.parametrize("k", KS)
@pytest.mark.parametrize("eps", EPSILONS)
@pytest.mark.parametrize("cls", [BLHXX, OLHXX])
def test_realised_epsilon_is_exact(cls, k, eps):
    assert cls(k, eps).realised_epsilon() == pytest.approx(eps, rel=1e-9)


def test_channel_given_seed():
    mech = OLHXX(20, 1.5)
    seed = 12345
    chan = mech.channel_given_seed(seed)
    assert chan.shape == (20, mech.g)
    np.testing.assert_allclose(chan.sum(axis=1), 1.0, rtol=1e-12)
    reports = SeedReports(np.zeros(1, dtype=int), np.array([seed]))
    h = [mech.hash_values(reports, x)[0] for x in range(20)]
    assert np.array_equal(np.argmax(chan, axis=1), h)
    assert realised_epsilon_of_channel(chan) == pytest.approx(1.5)
    assert np.array_equal(chan, mech.channel_given_seed(seed + 2**32))  # seeds act mod 2^32

    for mech in [OLHXX(20, 1.5), OLHXX(5, 1.0, g=50)]:  # every column used; most unused
        chan = mech.channel_given_seed(seed)
        extremes = mech.channel_extremes(seed)  # the columns' max and min, unused ones pooled
        live = np.unique(np.argmax(chan, axis=1))
        expected = np.vstack([chan.max(0)[live], chan.min(0)[live]])
        if live.size < mech.g:
            expected = np.hstack([expected, [[mech.q], [mech.q]]])
        np.testing.assert_array_equal(extremes, expected)


def test_realised_epsilon_of_a_large_domain_needs_no_large_channel():
    mech = OLHXX(200_000, 12.0)  # g = 162,756: the channel would hold 3e10 entries
    assert mech.realised_epsilon() == pytest.approx(12.0, rel=1e-9)
    with pytest.raises(bayesldp.NotSupportedError, match="too large"):
        mech.channel_given_seed(0)


def test_realised_epsilon_catches_a_wrong_p():
    class Leaky(OLHXX):
        @property
        def p(self):
            return 1.05 * super().p

    assert Leaky(10, 1.0).realised_epsilon() > 1.04


@pytest.mark.parametrize("mech", [BLHXX(10, 1.0), OLHXX(10, 1.0)], ids=["blhxx", "olhxx"])
def test_audit_finds_no_violation(mech):
    result = audit(mech, trials=100_000, rng=1)
    assert result.passed
    assert result.epsilon_lower_bound > 0.8  # the audit has power: local hashing is tight


def test_default_g_and_params():
    assert OLHXX(10, 1.0).g == round(math.e) + 1 == 4  # the peers' int(round(e^eps)) + 1
    assert OLHXX(10, 0.1).g == 2 and BLHXX(10, 1.0).g == 2
    assert OLHXX(10, 30.0).g == 2**32  # capped at XXH32's range
    assert OLHXX(10, 1.0) == OLHXX(10, 1.0, g=4) != bayesldp.OLH(10, 1.0)
    assert OLHXX(10, 1.0).params() == {"k": 10, "epsilon": 1.0, "g": 4}
    assert BLHXX(10, 1.0).params() == {"k": 10, "epsilon": 1.0}
    assert OLHXX(10, 2.0).q_star == pytest.approx(1 / 8, rel=1e-12)
    assert not OLHXX.RECOMMEND and bayesldp.mechanisms.make_mechanism("olhxx", 5, 1.0, g=3).g == 3


@pytest.mark.parametrize("g, exc", [(1, ValueError), (2**32 + 1, ValueError), (2.5, TypeError)])
def test_bad_g_k(g, exc):
    with pytest.raises(exc, match="g"):
        OLHXX(10, 1.0, g=g)
    with pytest.raises(ValueError, match="k: xxhash local hashing needs k <= 2"):
        BLHXX(2**31, 1.0)


# ---------------------------------------------------------------------- perturb and tally
@pytest.mark.parametrize("eps", [0.5, 1.0, 3.0])
def test_perturbed_hash_value_distribution(eps):
    mech = OLHXX(100, eps)
    reports = mech.perturb(np.full(60_000, 42), rng=11)
    assert reports.seed.min() >= 0 and reports.seed.max() < 2**32
    offset = (reports.y - mech.hash_values(reports, 42)) % mech.g
    expected = np.full(mech.g, mech.q)
    expected[0] = mech.p
    assert_matches_distribution(np.bincount(offset, minlength=mech.g), expected)


@pytest.mark.parametrize("mech", [OLHXX(50, 1.0), BLHXX(7, 1.0), OLHXX(12, 0.5)])
def test_tally_matches_direct_support(mech, monkeypatch):
    monkeypatch.setattr(hashing, "_TALLY_BLOCK", 1)  # HashedGRR._block_tally: blocks of 4,096 users
    n = 10_000
    reports = mech.perturb(np.arange(n) % mech.k, rng=5)
    tally = mech.tally(reports)
    support = np.column_stack([mech.supports(reports, x) for x in range(mech.k)])
    assert tally.n == n and tally.is_support_form and tally.levels == (mech.q, mech.p)
    np.testing.assert_array_equal(tally.stat, support.sum(axis=0))
    theta = np.random.default_rng(1).dirichlet(np.ones(mech.k), size=3)
    direct = np.log((mech.q + (mech.p - mech.q) * support) @ theta.T).sum(axis=0)
    np.testing.assert_allclose(tally.loglik(theta), direct, rtol=1e-12)


def test_seeds_act_modulo_2_32_and_merge():
    mech = OLHXX(10, 1.0)
    reports = mech.perturb(np.arange(2000) % 10, rng=3)
    shifted = SeedReports(reports.y, reports.seed + 2**32 * np.arange(2000))  # peers' 63-bit seeds
    assert mech.tally(shifted) == mech.tally(reports)
    half = [SeedReports(reports.y[s], reports.seed[s]) for s in (slice(0, 900), slice(900, None))]
    assert mech.tally(half[0]) + mech.tally(half[1]) == mech.tally(reports)


# ---------------------------------------------------------------------- estimates
@pytest.mark.parametrize("mech", [BLHXX(6, 1.0), OLHXX(6, 2.0)], ids=["blhxx", "olhxx"])
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


@pytest.mark.parametrize("method", ["mle", "em", "oracle"])
def test_estimates_recover_a_known_distribution(method):
    mech = OLHXX(8, 2.0)
    theta = np.array([0.3, 0.2, 0.15, 0.1, 0.1, 0.08, 0.05, 0.02])
    counts = (theta * 100_000).astype(int)
    tally = mech.tally(mech.perturb(np.repeat(np.arange(8), counts), rng=7))
    est = bayesldp.estimate(tally, method=method).frequencies
    sd = np.sqrt(mech.oracle_variance(theta, counts.sum()))  # the MLE's is no larger
    assert np.all(np.abs(est - theta) < 5 * sd), (est - theta) / sd


# ---------------------------------------------------------------------- files and the CLI
def test_peer_style_file_through_read_reports_and_the_cli(tmp_path, capsys):
    mech = OLHXX(5, 1.0)
    reports = mech.perturb(np.arange(3000) % 5, rng=2)
    seed63 = reports.seed + 2**32 * np.random.default_rng(3).integers(0, 2**31 - 1, 3000)
    path = tmp_path / "lh.csv"
    mech.reports_to_frame(SeedReports(reports.y, seed63)).to_csv(path, index=False)
    assert path.read_text().splitlines()[0] == "y,seed"
    again, tally = read_reports(path, "OLHXX", k=5, epsilon=1.0)
    assert again == mech and tally == mech.tally(reports)
    args = ["estimate", str(path), "--mechanism", "OLHXX", "--k", "5", "--epsilon", "1"]
    assert main([*args, "--method", "mle"]) == 0
    assert "OLHXX(k=5, epsilon=1, g=4): 3,000 reports; mle" in capsys.readouterr().out


@pytest.mark.parametrize(
    "change, exc, match",
    [
        ({"seed": np.array([-1, 0, 0, 0, 0])}, ValueError, r"reports\.seed: must lie in 0\.\."),
        ({"y": np.array([0, 0, 0, 0, 4])}, ValueError, r"reports\.y: must lie in 0\.\.3, got 4"),
        ({"y": np.zeros(4, dtype=int)}, ValueError, "equal lengths"),
        ({"y": np.zeros(5)}, TypeError, r"reports\.y: expected integers"),
        ({"seed": np.zeros((5, 1), dtype=int)}, ValueError, r"reports\.seed: expected a 1-d"),
        ({"y": np.array([], dtype=int)}, ValueError, "empty"),
    ],
)
def test_bad_reports(change, exc, match):
    mech = OLHXX(10, 1.0)
    good = mech.perturb(np.arange(5), rng=0)
    with pytest.raises(exc, match=match):
        mech.tally(SeedReports(**{"y": good.y, "seed": good.seed, **change}))


def test_bad_container_category_and_foreign_tally():
    mech = OLHXX(10, 1.0)
    good = mech.perturb(np.arange(5), rng=0)
    with pytest.raises(TypeError, match="SeedReports"):
        mech.tally((good.y, good.seed))
    with pytest.raises(TypeError, match="SeedReports"):
        mech.tally(bayesldp.OLH(10, 1.0).perturb(np.arange(5), rng=0))
    with pytest.raises(ValueError, match=r"x: must lie in 0\.\.9"):
        mech.supports(good, 10)
    with pytest.raises(ValueError, match="seed: must lie in"):
        mech.channel_given_seed(-1)
    with pytest.raises(bayesldp.IncompatibleTallyError):
        bayesldp.OLH(10, 1.0).unbiased_frequencies(mech.tally(good))
    assert isinstance(XXHashLocalHashing(10, 1.0, 3), bayesldp.mechanisms.PureProtocol)
