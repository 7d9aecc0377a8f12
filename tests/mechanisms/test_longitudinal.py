"""Longitudinal mechanisms (L-GRR, L-SUE, L-OUE, L-OSUE, L-SOUE) and their memo stores."""

import numpy as np
import pytest
from scipy import stats

import bayesldp
from bayesldp.audit import audit
from bayesldp.errors import InvalidInputError
from bayesldp.mechanisms import make_mechanism
from bayesldp.mechanisms._splitmix import stream_seed
from bayesldp.mechanisms.longitudinal import LGRR, LOSUE, LSUE, MemoError
from bayesldp.mechanisms.longitudinal._instant import instant_reports
from tests.stats_helpers import assert_chi_square_fit_with_power

NAMES = ["L-GRR", "L-SUE", "L-OUE", "L-OSUE", "L-SOUE"]
#: (one-round epsilon, eps_perm): every one reachable by every mechanism
BUDGETS = [(0.1, 0.3), (0.5, 4.0), (1.0, None), (1.5, 3.0), (3.0, 8.0)]


def _patterns(k):
    return ((np.arange(2**k)[:, None] >> np.arange(k)) & 1).astype(bool)


def _composed(mech):
    """``PRR o IRR`` as an explicit product of the two channels (the unary ones over bit
    patterns: column ``y`` has bit ``j`` = ``(y >> j) & 1``, as ``UnaryEncoding.channel``)."""
    if isinstance(mech, LGRR):
        return mech.permanent.channel @ mech.instant.channel
    p2, q2 = mech.instant_bits
    bits = _patterns(mech.k)
    # IRR[b, s] = prod_j Pr[s_j | b_j]
    per_bit = np.where(bits[:, None, :], np.where(bits[None, :, :], p2, 1 - p2),
                       np.where(bits[None, :, :], q2, 1 - q2))  # fmt: skip
    return mech.permanent.channel @ per_bit.prod(axis=2)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize(("epsilon", "eps_perm"), BUDGETS)
def test_exact_epsilons_from_the_channels(name, epsilon, eps_perm):
    mech = make_mechanism(name, 4, epsilon, eps_perm=eps_perm)
    channel = mech.channel
    np.testing.assert_allclose(channel.sum(axis=1), 1.0, rtol=1e-12)
    np.testing.assert_allclose(channel, _composed(mech), rtol=1e-10)  # the composition
    assert mech.realised_epsilon() == pytest.approx(epsilon, rel=1e-9)
    assert bayesldp.mechanisms.realised_epsilon_of_channel(_composed(mech)) == pytest.approx(
        epsilon, rel=1e-9
    )
    longitudinal = eps_perm if eps_perm is not None else 2 * epsilon
    assert mech.realised_longitudinal_epsilon() == pytest.approx(longitudinal, rel=1e-9)
    np.testing.assert_allclose(mech.permanent.channel.sum(axis=1), 1.0, rtol=1e-12)


def test_closed_forms_of_one_round():
    """L-GRR's round is GRR(k, eps_1), L-SUE's SUE(k, eps_1), L-OSUE's OUE(k, eps_1)."""
    assert LGRR(6, 1.0, eps_perm=3.0).p == pytest.approx(bayesldp.GRR(6, 1.0).p, rel=1e-12)
    assert LSUE(6, 1.0, eps_perm=3.0).p == pytest.approx(bayesldp.SUE(6, 1.0).p, rel=1e-12)
    assert LOSUE(6, 1.0, eps_perm=3.0).q == pytest.approx(bayesldp.OUE(6, 1.0).q, rel=1e-12)


def test_budgets_out_of_reach_are_refused():
    with pytest.raises(InvalidInputError, match="must be below eps_perm = 1"):
        LGRR(4, 1.0, eps_perm=1.0)
    with pytest.raises(InvalidInputError, match=r"LSOUE with eps_perm = 3 reaches at most 1\.9"):
        make_mechanism("L-SOUE", 4, 2.0, eps_perm=3.0)


@pytest.mark.parametrize("name", NAMES)
def test_audit_finds_no_violation(name):
    mech = make_mechanism(name, 4, 1.0, eps_perm=2.5)
    result = audit(mech, trials=100_000, rng=7)
    assert result.passed, result
    assert result.epsilon_lower_bound > 0.5  # the event is informative, the bound not vacuous


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("memoised", [False, True])
def test_perturb_follows_the_composed_channel(name, memoised):
    """Chi-square goodness of fit of n = 20,000 reports of one value against ``channel[x]``.

    Power: against the nearest wrong law, the permanent channel alone (the instantaneous step
    forgotten), the test at level 1e-3 has power above 0.999 (checked below from the
    non-central chi-square), so a client that skips or mis-sets a step fails.
    """
    k, n, x0 = 3, 20_000, 1
    mech = make_mechanism(name, k, 1.0, eps_perm=2.5)
    x = np.full(n, x0)
    if memoised:
        reports = mech.perturb(x, rng=11, users=np.arange(n) * 7 + 3, memo=mech.memo())
    else:
        reports = mech.perturb(x, rng=11)
    if isinstance(mech, LGRR):
        observed = np.bincount(reports, minlength=k)
        wrong = mech.permanent.channel[x0]
    else:
        observed = np.bincount(reports.astype(int) @ (1 << np.arange(k)), minlength=2**k)
        wrong = mech.permanent.channel[x0]
    expected = mech.channel[x0]
    assert observed.sum() == n
    assert_chi_square_fit_with_power(observed, expected, wrong)


@pytest.mark.parametrize("name", ["L-GRR", "L-OUE"])
def test_memo_is_reused_across_rounds(name):
    mech = make_mechanism(name, 5, 1.0, eps_perm=3.0)
    memo = mech.memo()
    users = np.arange(1000) * 3
    x = np.random.default_rng(0).integers(0, 5, 1000)
    mech.perturb(x, rng=1, users=users, memo=memo)
    codes, responses = memo.codes.copy(), memo.responses.copy()
    first = {key: memo[key] for key in [(int(users[0]), int(x[0])), (int(users[9]), int(x[9]))]}
    for seed in (2, 3):  # the same (user, value): the same permanent response, nothing added
        mech.perturb(x[::-1], rng=seed, users=users[::-1], memo=memo)
        np.testing.assert_array_equal(memo.codes, codes)
        np.testing.assert_array_equal(memo.responses, responses)
    for key, value in first.items():
        np.testing.assert_array_equal(memo[key], value)
    moved = (x + 1) % 5  # every user's value changes: one new permanent response each
    mech.perturb(moved, rng=4, users=users, memo=memo)
    assert len(memo) == 2000 and (int(users[0]), int(moved[0])) in memo
    np.testing.assert_array_equal(memo.responses[np.searchsorted(memo.codes, codes)], responses)


def test_a_round_follows_the_instantaneous_step_given_the_memo():
    """Given the memoised permanent responses, a round's report keeps the permanent value
    w.p. ``p2`` (L-GRR): reports of 20,000 users are within 5 sd of it."""
    mech = LGRR(4, 1.0, eps_perm=3.0)
    memo = mech.memo()
    users, x = np.arange(20_000), np.zeros(20_000, dtype=np.int64)
    mech.perturb(x, rng=0, users=users, memo=memo)
    permanent = np.array([memo[(u, 0)] for u in range(20_000)])
    report = mech.perturb(x, rng=1, users=users, memo=memo)
    kept, p2 = np.mean(report == permanent), mech.instant.p
    assert abs(kept - p2) < 5 * np.sqrt(p2 * (1 - p2) / 20_000)


def test_bad_memo_use_is_refused():
    mech = LGRR(4, 1.0, eps_perm=3.0)
    with pytest.raises(InvalidInputError, match="user 3 appears twice"):
        mech.perturb([0, 1, 2], users=[3, 4, 3], memo=mech.memo())
    with pytest.raises(InvalidInputError, match="users: the memo is keyed by user"):
        mech.perturb([0, 1], memo=mech.memo())
    with pytest.raises(MemoError, match=r"holds the permanent responses of LGRR\(k=4"):
        mech.perturb([0, 1], users=[0, 1], memo=LGRR(4, 1.0, eps_perm=2.5).memo())


def test_memo_store_survives_a_restart(tmp_path):
    path = tmp_path / "memo.npz"
    mech = make_mechanism("L-OSUE", 10, 1.0, eps_perm=2.0)
    users, x = np.arange(500) + 10**9, np.arange(500) % 10
    with mech.memo_store(path) as store:
        mech.perturb(x, rng=0, users=users, memo=store)
        codes, responses = store.codes.copy(), store.responses.copy()
    assert not (tmp_path / "memo.npz.lock").exists() and path.is_file()
    again = make_mechanism("L-OSUE", 10, 1.0, eps_perm=2.0)  # a new process, in effect
    with again.memo_store(path) as store:
        np.testing.assert_array_equal(store.codes, codes)
        np.testing.assert_array_equal(store.responses, responses)
        again.perturb(x, rng=1, users=users, memo=store)
        assert len(store) == 500
        again.perturb(x[:5] + 0, rng=2, users=users[:5] + 1000, memo=store)
    with again.memo_store(path) as store:
        assert len(store) == 505
    assert not list(tmp_path.glob("*.tmp"))


def test_a_second_writer_is_refused(tmp_path):
    path = tmp_path / "memo.npz"
    mech = LGRR(4, 1.0)
    with mech.memo_store(path):
        with pytest.raises(InvalidInputError, match=r"memo: .*memo.npz is in use by process \d+"):
            mech.memo_store(path)
    with mech.memo_store(path):  # released: the next writer gets it
        pass


def test_corrupt_or_foreign_stores_are_refused(tmp_path):
    mech = LGRR(4, 1.0, eps_perm=3.0)
    path = tmp_path / "memo.npz"
    with mech.memo_store(path) as store:
        mech.perturb([0, 1, 2], rng=0, users=[1, 2, 3], memo=store)
    raw = path.read_bytes()
    cases = {
        "garbage": (b"not a memo", "is not a readable permanent-response memo file"),
        "truncated": (raw[: len(raw) // 2], "is not a readable permanent-response memo file"),
    }
    for name, (content, message) in cases.items():
        bad = tmp_path / f"{name}.npz"
        bad.write_bytes(content)
        with pytest.raises(MemoError, match=message):
            mech.memo_store(bad)
    with np.load(path) as data:
        arrays = {key: data[key] for key in data.files}
    arrays["responses"] = arrays["responses"].copy()
    arrays["responses"][0] = (arrays["responses"][0] + 1) % 4
    altered = tmp_path / "altered.npz"
    np.savez(altered, **arrays)
    with pytest.raises(MemoError, match="corrupt \\(checksum mismatch\\)"):
        mech.memo_store(altered)
    other = tmp_path / "other.npz"
    np.savez(other, format=np.array("bayesldp.AdaptiveSurvey"), version=np.array(1))
    with pytest.raises(MemoError, match=r"is a 'bayesldp\.AdaptiveSurvey' file, not a permanent"):
        mech.memo_store(other)
    for foreign in (LGRR(5, 1.0, eps_perm=3.0), LGRR(4, 1.0, eps_perm=2.0), LSUE(4, 1.0, 3.0)):
        with pytest.raises(MemoError, match=r"holds the permanent responses of LGRR\(k=4, "):
            foreign.memo_store(path)
    assert path.read_bytes() == raw  # nothing refused was written


@pytest.mark.parametrize("name", ["L-GRR", "L-SOUE"])
def test_oracle_is_unbiased_with_its_exact_variance(name):
    """R = 400 independent surveys of n = 1,000 users, each a first round through a fresh memo:
    the mean estimate is within 4 Monte Carlo standard errors of theta, and the spread agrees
    with ``oracle_variance`` (ratio within the chi-square 0.1%-99.9% band)."""
    k, n, reps = 4, 1000, 400
    theta = np.array([0.5, 0.3, 0.15, 0.05])
    mech = make_mechanism(name, k, 1.0, eps_perm=2.5)
    x = np.repeat(np.arange(k), (theta * n).astype(int))
    rng = np.random.default_rng(5)
    estimates = np.array([
        mech.unbiased_frequencies(
            mech.tally(mech.perturb(x, rng=rng, users=np.arange(n), memo=mech.memo()))
        )
        for _ in range(reps)
    ])  # fmt: skip
    variance = mech.oracle_variance(theta, n)
    se = np.sqrt(variance / reps)
    assert np.all(np.abs(estimates.mean(axis=0) - theta) < 4 * se)
    ratio = estimates.var(axis=0, ddof=1) / variance
    low, high = stats.chi2.ppf([1e-3, 1 - 1e-3], reps - 1) / (reps - 1)
    assert np.all((low < ratio) & (ratio < high)), ratio


@pytest.mark.parametrize("name", ["L-GRR", "L-OSUE"])
def test_estimators_and_fit_read_one_round(name):
    k, n = 4, 4000
    theta = np.array([0.5, 0.3, 0.15, 0.05])
    mech = make_mechanism(name, k, 2.0, eps_perm=4.0)
    x = np.repeat(np.arange(k), (theta * n).astype(int))
    tally = mech.tally(mech.perturb(x, rng=3, users=np.arange(n), memo=mech.memo()))
    assert tally.n == n
    for method in ("oracle", "norm_sub", "mle", "em"):
        est = bayesldp.estimate(tally, method=method)
        assert np.abs(est.frequencies - theta).max() < 0.1
    idata = bayesldp.fit(tally, draws=1000, chains=2, random_seed=4,
                         progressbar=False)  # fmt: skip
    draws = idata.posterior["theta"].values.reshape(-1, k)
    low, high = np.quantile(draws, [0.005, 0.995], axis=0)
    assert np.all((low < theta) & (theta < high))


@pytest.mark.parametrize("name", ["L-SUE", "L-OUE", "L-OSUE", "L-SOUE"])
def test_instantaneous_bits_follow_p2_and_q2(name):
    """Given the permanent bits (half of them set), the reports of the 1 bits are 1 at the rate
    ``p2``, of the 0 bits at ``q2``: a chi-square fit of each class's (1s, 0s) counts over
    3,000,000 bits, at level 1e-3 with power above 0.999 against a rate off by 2^-9."""
    k, n = 60, 100_000
    mech = make_mechanism(name, k, 1.0, eps_perm=2.5)
    p2, q2 = mech.instant_bits
    permanent = np.random.default_rng(1).random((n, k)) < 0.5
    reports = mech.instantaneous(permanent, rng=2)
    for bit, rate in ((True, p2), (False, q2)):
        chosen = reports[permanent == bit]
        ones = int(np.count_nonzero(chosen))
        off = rate + (2.0**-9 if rate < 0.5 else -(2.0**-9))
        assert_chi_square_fit_with_power(
            [ones, chosen.size - ones], [rate, 1 - rate], [off, 1 - off]
        )


def test_instantaneous_ties_are_resolved():
    """With ``q2 = 2^-17`` and ``p2 = 1 - 2^-17`` every rare outcome comes from a tie of the
    16-bit comparison (rate 2^-16) resolved at 1/2: over 20,000,000 bits of each class, a
    chi-square fit at level 1e-3 has power above 0.999 against ties never (rate 0, as the
    expected-count-0 limit 1e-12) or always (rate 2^-16) giving the rare outcome."""
    rare = 2.0**-17
    permanent = np.zeros((400_000, 100), dtype=bool)
    permanent[::2] = True
    reports = instant_reports(permanent, 1.0 - rare, rare, rng=3)
    for count in (
        np.count_nonzero(~reports[::2]),  # set bits reported 0
        np.count_nonzero(reports[1::2]),  # clear bits reported 1
    ):
        total = permanent[::2].size
        for wrong in (1e-12, 2 * rare):
            assert_chi_square_fit_with_power([count, total - count], [rare, 1 - rare],
                                             [wrong, 1 - wrong])  # fmt: skip


@pytest.mark.parametrize("name", ["L-SUE", "L-OSUE"])
def test_first_round_permanent_bits_follow_p1_and_q1(name):
    """The permanent bits a first round stores: the true value's bit is 1 at the rate ``p1``,
    the others at ``q1`` (chi-square at level 1e-3 over 3,000,000 and 9,000,000 bits, power
    above 0.999 against a rate off by 2^-9), and the round's reports are the instantaneous
    step of exactly these stored rows (drawn with the next two seeds)."""
    k, n = 4, 3_000_000
    mech = make_mechanism(name, k, 1.0, eps_perm=2.5)
    x = np.random.default_rng(4).integers(0, k, n)
    stored, reports = mech.fresh_round(x, np.random.default_rng(5))
    bits = mech.decode_permanent(stored)
    true = bits[np.arange(n), x]
    bits[np.arange(n), x] = False
    others = (np.count_nonzero(bits), n * (k - 1))
    for (ones, size), rate in (((np.count_nonzero(true), n), mech.permanent.p),
                               (others, mech.permanent.q)):  # fmt: skip
        off = rate + (2.0**-9 if rate < 0.5 else -(2.0**-9))
        assert_chi_square_fit_with_power([ones, size - ones], [rate, 1 - rate], [off, 1 - off])
    gen = np.random.default_rng(5)
    stream_seed(gen), stream_seed(gen)  # the permanent bits' two seeds
    np.testing.assert_array_equal(reports, mech.instantaneous_stored(stored, gen))


@pytest.mark.parametrize("name", ["L-SUE", "L-OUE"])
def test_instantaneous_draws_are_reproducible_and_layout_free(name):
    """The same seed gives the same reports; the memo's packed rows and their decoded bits give
    the same reports (a bit's draws depend on its index only); a round's reports are those of
    the stored rows."""
    k, n = 21, 5000  # rows not a multiple of 8 bits: draws run across row ends
    mech = make_mechanism(name, k, 1.0, eps_perm=3.0)
    memo = mech.memo()
    x = np.random.default_rng(0).integers(0, k, n)
    mech.perturb(x, rng=1, users=np.arange(n), memo=memo)
    stored = memo.responses
    bits = mech.decode_permanent(stored)
    first = mech.instantaneous(bits, rng=7)
    np.testing.assert_array_equal(first, mech.instantaneous(bits, rng=7))
    np.testing.assert_array_equal(first, mech.instantaneous_stored(stored, rng=7))
    assert not np.array_equal(first, mech.instantaneous(bits, rng=8))
    assert first.dtype == bool and first.shape == (n, k) and first.flags.c_contiguous
    round_two = mech.perturb(x, rng=np.random.default_rng(9), users=np.arange(n), memo=memo)
    np.testing.assert_array_equal(round_two, mech.instantaneous(bits, np.random.default_rng(9)))


def test_a_repeated_user_is_named_whatever_the_id_range():
    """Ids checked by the bitmap (a narrow range) and by sorting (a wide one) give the same
    error, naming the smallest repeated id; distinct ids of either kind pass."""
    mech = make_mechanism("L-OUE", 4, 1.0, eps_perm=3.0)
    for users in ([7, 3, 9, 7, 3], [7 * 10**12, 3, 9, 7 * 10**12, 3]):
        with pytest.raises(InvalidInputError, match="user 3 appears twice in one round"):
            mech.perturb([0, 1, 2, 3, 0], users=users, memo=mech.memo())
    for users in ([7, 3, 9, 8, 4], [7 * 10**12, 3, 9, 10**15, 4]):
        assert mech.perturb([0, 1, 2, 3, 0], users=users, memo=mech.memo()).shape == (5, 4)


def test_memo_merges_new_entries_in_any_order():
    """Rounds of users in random order, some (user, value) pairs new, some seen: every pair
    keeps the permanent response it was first given, and the codes stay sorted."""
    mech = make_mechanism("L-OUE", 6, 1.0, eps_perm=3.0)
    memo, seen = mech.memo(), {}
    rng = np.random.default_rng(3)
    for r in range(4):
        users, x = rng.permutation(300)[:200], rng.integers(0, 6, 200)
        mech.perturb(x, rng=r, users=users, memo=memo)
        for key in zip(users.tolist(), x.tolist(), strict=True):
            first = seen.setdefault(key, memo[key])
            np.testing.assert_array_equal(memo[key], first)
    assert set(memo) == set(seen) and np.all(np.diff(memo.codes) > 0)


def test_memo_through_a_symlink_is_its_target(tmp_path):
    """A memo opened through a symbolic link and through its real path is one memo: one lock
    (the second writer is refused), every entry kept whichever name wrote it, and the link
    still a link afterwards (the writes go to the target)."""
    import os

    real = tmp_path / "real" / "memo.npz"
    real.parent.mkdir()
    link = tmp_path / "link.npz"
    link.symlink_to(real)
    mech = LGRR(4, 1.0, eps_perm=2.0)
    with mech.memo_store(real) as store:
        with pytest.raises(InvalidInputError, match=r"memo: .*real/memo\.npz is in use by process"):
            mech.memo_store(link)
        mech.perturb([0, 1], rng=0, users=[1, 2], memo=store)
    with mech.memo_store(link) as store:  # the target's entries, and new ones written there
        assert len(store) == 2
        mech.perturb([2, 3], rng=1, users=[3, 4], memo=store)
    assert link.is_symlink() and os.readlink(link) == str(real)
    with mech.memo_store(real) as store:
        assert sorted(store) == [(1, 0), (2, 1), (3, 2), (4, 3)]
        mech.perturb([0], rng=2, users=[5], memo=store)
    with mech.memo_store(link) as store:
        assert len(store) == 5
    assert link.is_symlink() and not list(tmp_path.glob("**/*.lock"))
    # a link to the directory holding the memo: the same file, the same lock
    folder = tmp_path / "folder"
    folder.symlink_to(real.parent, target_is_directory=True)
    with mech.memo_store(folder / "memo.npz") as store:
        assert len(store) == 5
        with pytest.raises(InvalidInputError, match="in use by process"):
            mech.memo_store(real)


def test_memo_writers_in_two_processes_through_a_link_lose_nothing(tmp_path):
    """Two processes, one opening the memo by its link and one by its real path, each adding
    its own users (waiting for the other's lock): every user's entry is in the file."""
    import subprocess
    import sys

    real = tmp_path / "memo.npz"
    LGRR(4, 1.0, eps_perm=2.0).memo_store(real).close()  # created empty: the link's target
    link = tmp_path / "link.npz"
    link.symlink_to(real)
    code = (
        "import sys, time; from bayesldp.mechanisms.longitudinal import LGRR\n"
        "mech = LGRR(4, 1.0, eps_perm=2.0)\n"
        "first = int(sys.argv[2])\n"
        "for user in range(first, first + 5):\n"
        "    with mech.memo_store(sys.argv[1], wait=60) as store:\n"
        "        mech.perturb([user % 4], rng=user, users=[user], memo=store)\n"
        "        time.sleep(0.05)\n"
    )
    procs = [subprocess.Popen([sys.executable, "-c", code, str(path), str(first)])
             for path, first in ((real, 0), (link, 100))]  # fmt: skip
    assert [proc.wait(timeout=300) for proc in procs] == [0, 0]
    with LGRR(4, 1.0, eps_perm=2.0).memo_store(real) as store:
        assert sorted(user for user, _ in store) == [*range(5), *range(100, 105)]
    assert link.is_symlink()


def test_memo_behind_a_dangling_link_is_refused(tmp_path):
    """A memo path that is a link to a missing target (an unmounted volume) would start an
    empty memo and let users redraw their permanent responses: refused, naming both, and
    nothing is created at the target."""
    target = tmp_path / "volume" / "memo.npz"
    link = tmp_path / "memo.npz"
    link.symlink_to(target)
    mech = LGRR(4, 1.0, eps_perm=2.0)
    with pytest.raises(MemoError, match=r"^memo: '.*memo\.npz' is a symbolic link to "
                       r"'.*volume/memo\.npz', which does not exist"):  # fmt: skip
        mech.memo_store(link)
    target.parent.mkdir()  # the volume is there, the memo file is not: also a missing target
    with pytest.raises(MemoError, match="which does not exist"):
        mech.memo_store(link)
    assert not target.exists() and link.is_symlink()
    mount = tmp_path / "mnt"
    mount.symlink_to(tmp_path / "unmounted")  # a dangling directory link
    with pytest.raises(MemoError, match=r"'.*mnt' is a symbolic link to '.*unmounted'"):
        mech.memo_store(mount / "memo.npz")


def test_memo_lock_that_is_a_directory_is_one_line(tmp_path):
    path = tmp_path / "memo.npz"
    (tmp_path / "memo.npz.lock").mkdir()
    with pytest.raises(MemoError, match=r"^memo: the lock file '.*memo\.npz\.lock' is a "
                       r"directory; remove it"):  # fmt: skip
        LGRR(4, 1.0).memo_store(path)
    assert not path.exists()
