"""PEM: heavy hitters found from the reports (recall on Zipf populations), privacy, bad input,
and the posterior over what was found."""

import dataclasses
import functools
import warnings

import numpy as np
import pytest

from bayesldp.errors import InvalidInputError, InvalidTypeError
from bayesldp.heavy_hitters import PEM, SFP, CandidateOLH, HeavyHitters, PEMReports
from bayesldp.heavy_hitters.pem import DEFAULT_HOLDOUT


@functools.cache
def zipf_population(m: int, s: float):
    """Items ``item0..item{m-1}`` with Zipf(s) weights (item0 the most frequent)."""
    w = 1.0 / np.arange(1, m + 1) ** s
    items = np.array([f"item{i}" for i in range(m)], dtype=object)
    return items, w / w.sum()


def true_shares(pem: PEM, items, w, codes) -> np.ndarray:
    """Population share of each code (every item hashing to it: collisions included)."""
    all_codes = pem.encoder.encode(items)
    order = np.argsort(all_codes)
    cum = np.r_[0.0, np.cumsum(w[order])]
    sorted_codes = all_codes[order]
    lo = np.searchsorted(sorted_codes, codes)
    hi = np.searchsorted(sorted_codes, codes, side="right")
    return cum[hi] - cum[lo]


def recall(m: int, s: float, seed: int, n: int = 100_000, eps: float = 4.0, k: int = 10):
    items, w = zipf_population(m, s)
    rng = np.random.default_rng(seed)
    pem = PEM(eps, k, bits=24, eta=4, holdout=0.0)  # the search of the paper: every user in it
    found = pem.identify(pem.perturb(items[rng.choice(m, size=n, p=w)], rng))
    return np.isin(pem.encoder.encode(items[:k]), found.codes).mean()


@pytest.mark.parametrize(("m", "s"), [(2**16, 1.0), (2**20, 1.1)])
def test_recall_of_the_true_top_10(m, s):
    """n = 1e5, eps = 4, k = 10, 24-bit codes, eta = 4 (5 rounds of 20,000 users).

    Measured over 20 seeds (0..19): Zipf(1.0) over 2^16 items, recall 0.87 on average, never
    below 0.8; Zipf(1.1) over 2^20 items, 0.915 on average, never below 0.8.  The mean of 3
    seeds is checked against 0.8: a search that kept the wrong prefixes (a bit order, a shift,
    the bottom k) finds nearly none of the ten (recall ~0).
    """
    recalls = [recall(m, s, seed) for seed in range(3)]
    assert np.mean(recalls) >= 0.8, recalls


def test_rounds_follow_the_paper_layout():
    pem = PEM(4.0, 10, bits=24, eta=4, holdout=0.0)  # the paper's protocol: every user searches
    assert pem.prefix_lengths == (8, 12, 16, 20, 24)  # gamma = ceil(log2 10) = 4, + eta each
    assert PEM(4.0, 10, bits=18, eta=4).prefix_lengths == (8, 12, 16, 18)
    items, w = zipf_population(2**12, 1.0)
    rng = np.random.default_rng(0)
    found = pem.identify(pem.perturb(items[rng.choice(items.size, 5000, p=w)], rng))
    first, *rest = found.rounds
    np.testing.assert_array_equal(first.candidates, np.arange(2**8))  # all prefixes of s_0 bits
    for before, now in zip(found.rounds, rest, strict=False):
        kept = before.candidates[np.argsort(-before.frequencies, kind="stable")[:10]]
        expected = (kept[:, None] << 4 | np.arange(16)[None, :]).ravel()
        np.testing.assert_array_equal(now.candidates, expected)  # top 10, extended by eta bits
    assert found.codes.size == 10 and sum(r.n for r in found.rounds) == 5000
    assert np.all(np.diff(found.frequencies) <= 0)


def test_each_user_spends_exactly_the_olh_epsilon():
    """One report per user, through OLH; the realised epsilon of every round's channel, over
    all its prefixes and over its candidate domain, is epsilon."""
    eps = 2.5
    pem = PEM(eps, 4, bits=14, eta=3)
    items, w = zipf_population(500, 1.0)
    rng = np.random.default_rng(1)
    reports = pem.perturb(items[rng.choice(500, 3000, p=w)], rng)
    assert len(reports) == 3000 and reports.group.shape == (3000,)  # one report per user
    found = pem.identify(reports)
    for i, rnd in enumerate(found.rounds):
        assert pem.mechanism(i).realised_epsilon() == pytest.approx(eps, abs=1e-12)
        candidate_mech = CandidateOLH(rnd.candidates, eps, pem.g)
        assert candidate_mech.realised_epsilon() == pytest.approx(eps, abs=1e-12)
    final = CandidateOLH(found.codes, eps, pem.g, other=True)
    assert final.realised_epsilon() == pytest.approx(eps, abs=1e-12)
    assert pem.realised_epsilon() == pytest.approx(eps, abs=1e-12)  # the user's, all groups


def test_item_too_long_names_the_item():
    pem = PEM(1.0, 2, bits=8, eta=2, max_length=5)
    with pytest.raises(InvalidInputError, match=r"^items\[1\]: is 7 bytes long"):
        pem.perturb(["short", "toolong", "x"] * 10, rng=0)


def test_bad_reports_are_refused_in_one_line():
    pem = PEM(2.0, 4, bits=12, eta=3, key="a")
    reports = pem.perturb([f"w{i % 7}" for i in range(400)], rng=0)
    cases = [
        (PEM(2.0, 4, bits=12, eta=3, key="b"), "code fingerprint"),
        (PEM(2.0, 4, bits=13, eta=3, key="a"), "fingerprint"),
        (PEM(2.0, 4, bits=12, eta=2, key="a"), r"lengths \(5, 8, 11, 12\), .* \(4, 6, 8, 10, 12\)"),
        (PEM(2.0, 8, bits=12, eta=3, key="a"), "prefix lengths"),
        (PEM(1.0, 4, bits=12, eta=3, key="a"), "OLH epsilon=2, g=8"),
        (PEM(2.0, 4, bits=12, eta=3, key="a", holdout=0.1), "holdout=0"),
    ]
    for other, message in cases:
        with pytest.raises(InvalidInputError, match=message) as info:
            other.identify(reports)
        assert "\n" not in str(info.value)
    empty = dataclasses.replace(reports, group=np.where(reports.group == 2, 1, reports.group))
    with pytest.raises(InvalidInputError, match=r"group 2 \(round 2, prefix length 11\) has no"):
        pem.identify(empty)
    with pytest.raises(InvalidInputError, match=r"reports\.group: must lie in 0\.\.4, got 5"):
        pem.identify(dataclasses.replace(reports, group=reports.group + 1))
    with pytest.raises(InvalidInputError, match=r"reports\.y: has 399 entries"):
        pem.identify(dataclasses.replace(reports, y=reports.y[1:]))
    with pytest.raises(InvalidTypeError, match="expected PEMReports"):
        pem.identify(reports.round(0))
    with pytest.raises(InvalidInputError, match=r"codes: must lie in 0\.\.4095 \(bits = 12\)"):
        pem.perturb_codes(np.array([1, 4096, 3, 4]), rng=0)
    with pytest.raises(InvalidInputError, match="3 users cannot fill the 5 groups"):
        pem.perturb(["a", "b", "c"], rng=0)
    with pytest.raises(InvalidInputError, match="at most 2\\^16"):
        PEM(1.0, 2**10, bits=30, eta=8)


def test_holdout_group_reports_full_codes_and_feeds_the_posterior_tally():
    pem = PEM(3.0, 4, bits=12, eta=4, holdout=0.25)
    assert pem.n_rounds == 3 and pem.n_groups == 4 and pem.estimation_group == 3
    reports = pem.perturb([f"w{i % 5}" for i in range(2000)], rng=2)
    assert np.bincount(reports.group).tolist() == [500, 500, 500, 500]
    found = pem.identify(reports)
    tally = pem.final_tally(reports, found.codes)
    assert tally.n == 500 and tally.k == 5
    assert pem.mechanism(3).k == 2**12


def test_default_holds_users_out_and_the_posterior_reads_only_theirs():
    """By default PEM (and SFP) sets ``DEFAULT_HOLDOUT`` of the users aside: they report their
    full code and take no part in the search, and the posterior reads their reports alone, so
    scrambling every other report changes neither the tally nor the posterior."""
    pem = PEM(3.0, 4, bits=12, eta=4)
    assert 0 < pem.holdout == DEFAULT_HOLDOUT and pem.estimation_group == pem.n_rounds == 3
    people = [f"w{i % 5}" for i in range(2000)]
    reports = pem.perturb(people, rng=2)
    held = reports.group == pem.estimation_group
    assert held.sum() == round(DEFAULT_HOLDOUT * 2000) and pem.mechanism(3).k == 2**12
    found = pem.identify(reports)
    rng = np.random.default_rng(3)
    scrambled = dataclasses.replace(
        reports, y=np.where(held, reports.y, rng.integers(0, pem.g, reports.y.size)))
    mine, theirs = pem.final_tally(reports, found.codes), pem.final_tally(scrambled, found.codes)
    assert mine.n == held.sum()
    np.testing.assert_array_equal(mine.rows, theirs.rows)
    np.testing.assert_array_equal(mine.stat, theirs.stat)
    with warnings.catch_warnings():  # 50 draws of a rough approximation: equality is the point
        warnings.simplefilter("ignore")
        fits = [pem.posterior(r, found, method="laplace", draws=50, chains=1, random_seed=0,
                              progressbar=False).idata.posterior["theta"].values
                for r in (reports, scrambled)]  # fmt: skip
    np.testing.assert_array_equal(*fits)
    assert PEM(3.0, 4, bits=12, eta=4, holdout=0.0).estimation_group == 2  # the paper's protocol

    sfp = SFP(4.0, 3, max_length=3, m=64)
    assert sfp.holdout == DEFAULT_HOLDOUT
    reports = sfp.perturb(people, rng=4)
    assert len(reports.holdout.y) == round(DEFAULT_HOLDOUT * 2000)
    codes = sfp.encoder.encode(["w0", "w1", "w2"])
    word = dataclasses.replace(reports.word, y=rng.integers(0, sfp.g, reports.word.y.size))
    mine = sfp.final_tally(reports, codes)
    theirs = sfp.final_tally(dataclasses.replace(reports, word=word), codes)
    assert mine.n == len(reports.holdout.y)
    np.testing.assert_array_equal(mine.stat, theirs.stat)


def _posterior(pem, reports, found, seed, **kwargs):
    with warnings.catch_warnings():  # short chains: convergence is not what is tested here
        warnings.simplefilter("ignore")
        return pem.posterior(reports, found, 0.005, method="hmc", draws=500, chains=2,
                             random_seed=seed, progressbar=False, compute_convergence_checks=False,
                             **kwargs)  # fmt: skip


def test_posterior_labels_other_and_probability_above_threshold():
    items, w = zipf_population(2**16, 1.0)
    rng = np.random.default_rng(7)
    pem = PEM(4.0, 10, bits=24, eta=4)
    reports = pem.perturb(items[rng.choice(items.size, 100_000, p=w)], rng)
    found = pem.identify(reports)
    labels = [str(x) for x in pem.encoder.decode(found.codes, items[:50])]
    post = _posterior(pem, reports, found, 0, labels=labels)
    theta = post.idata.posterior["theta"]
    assert list(theta["category"].values) == [*labels, "other"]
    assert post.prob_above.dims == ("category",) and post.prob_above.size == 10
    share = true_shares(pem, items, w, found.codes)
    # the three largest (shares 0.086, 0.043, 0.029) are surely above 0.5%; a found code no
    # item has (share 0), if any, is not surely above it
    top3 = np.isin(found.codes, pem.encoder.encode(items[:3]))
    assert top3.sum() == 3 and np.all(post.prob_above.values[top3] > 0.99)
    assert np.all(post.prob_above.values[share == 0] < 0.99)
    interval = post.interval(0.9)
    assert interval.sel(category="other", bound="lower") < 1 - share.sum()
    assert interval.sel(category="other", bound="upper") > 1 - share.sum()
    with pytest.raises(InvalidTypeError, match="found: expected HeavyHitters"):
        pem.posterior(reports, found.codes)
    with pytest.raises(InvalidInputError, match="threshold"):
        pem.posterior(reports, found, 1.5)


def coverage(seeds) -> tuple[int, int]:
    """Intervals (90%) covering the share, and intervals counted, over runs with ``seeds``:
    Zipf(1) over 2^16 items, n = 1e5, eps = 4, k = 10, the default holdout; found codes with a
    positive share only (a code no item has lies below any equal-tailed interval of a
    continuous posterior)."""
    items, w = zipf_population(2**16, 1.0)
    pem = PEM(4.0, 10, bits=24, eta=4)
    codes = pem.encoder.encode(items)
    covered = total = 0
    for seed in seeds:
        rng = np.random.default_rng(1000 + seed)
        reports = pem.perturb_codes(codes[rng.choice(items.size, 100_000, p=w)], rng)
        found = pem.identify(reports)
        assert isinstance(found, HeavyHitters) and isinstance(reports, PEMReports)
        interval = _posterior(pem, reports, found, seed).interval(0.9).values[:-1]
        share = true_shares(pem, items, w, found.codes)
        real = share > 0
        inside = (interval[:, 0] <= share) & (share <= interval[:, 1])
        covered += int(inside[real].sum())
        total += int(real.sum())
    return covered, total


def test_posterior_intervals_cover_the_found_items_shares():
    """90% intervals over 12 runs, about 9 counted a run (~105 intervals), the default holdout.

    Measured: these 12 runs, 95 of 105 = 0.90; 30 runs (the slow test below), 237 of 262 =
    0.905 (without the holdout: 103 of 111 and 245 of 272).  The check asks for [0.78, 0.98]:
    under independence and coverage 0.9, 0.78 is 4 standard errors below (intervals of one run
    are correlated, hence the margin); coverage 0.65 (a posterior too narrow by about half)
    fails it with probability above 0.99.
    """
    covered, total = coverage(range(12))
    assert 0.78 <= covered / total <= 0.98, (covered, total)


@pytest.mark.slow
def test_measured_recall_and_coverage():
    """The figures quoted in the docs (about 40 s): recall over 20 seeds, both populations, and
    coverage over 30 runs.  ``pytest --runslow tests/heavy_hitters/test_pem.py -k measured``."""
    small = [recall(2**16, 1.0, seed) for seed in range(20)]
    large = [recall(2**20, 1.1, seed) for seed in range(20)]
    covered, total = coverage(range(30))
    print(f"recall 2^16 Zipf(1): mean {np.mean(small):.3f} min {min(small)}; "
          f"2^20 Zipf(1.1): mean {np.mean(large):.3f} min {min(large)}; "
          f"coverage {covered}/{total} = {covered / total:.3f}")  # fmt: skip
    assert np.mean(small) >= 0.85 and np.mean(large) >= 0.85
    assert 0.85 <= covered / total <= 0.95


def selection_coverage(holdout: float, runs: int = 12) -> dict:
    """Zipf(1.1) over 2,000 items, n = 20,000, eps = 2, k = 10, 16-bit codes (3 rounds): many
    found codes are no one's (a sixth of the users' estimates are noise at this size), the case
    where a posterior that reads the reports that chose them is pulled upward.  Counts of 90%
    intervals covering the truth (found codes some item has; "other", one a run) and the found
    codes no item has with their posterior means."""
    items, w = zipf_population(2000, 1.1)
    pem = PEM(2.0, 10, bits=16, eta=4, holdout=holdout)
    codes = pem.encoder.encode(items)
    out = {"covered": 0, "intervals": 0, "other": 0, "runs": runs, "zero_means": []}
    for seed in range(runs):
        rng = np.random.default_rng([7, seed])
        reports = pem.perturb_codes(codes[rng.choice(items.size, 20_000, p=w)], rng)
        found = pem.identify(reports)
        post = _posterior(pem, reports, found, seed)
        share = true_shares(pem, items, w, found.codes)
        truth = np.append(share, 1 - share.sum())
        lo, hi = post.interval(0.9).values.T
        inside = (lo <= truth) & (truth <= hi)
        real = share > 0
        out["covered"] += int(inside[:-1][real].sum())
        out["intervals"] += int(real.sum())
        out["other"] += int(inside[-1])
        mean = post.idata.posterior["theta"].mean(dim=("chain", "draw")).values[:-1]
        out["zero_means"] += mean[~real].tolist()
    return out


@pytest.mark.slow
def test_default_posterior_keeps_its_word_on_what_the_search_chose():
    """The default (holdout) posterior's 90% intervals cover, after the search chose the codes.

    12 runs of :func:`selection_coverage` (about 55 intervals of found items, 12 of "other",
    about 60 found codes no item has; 23 s of CPU).  Bounds, derived for nominal coverage 0.9
    and not tuned:

    * found items: covered / intervals >= 0.75 (at least 30 intervals): at 55 intervals 3.7
      binomial standard errors below 0.9, ``Pr(Bin(55, 0.9) <= 41) = 8e-4`` under independence;
      a coverage of 0.6 passes with probability 0.008.
    * "other": at least 8 of 12: ``Pr(Bin(12, 0.9) <= 7) = 0.004``; a coverage of 0.3 passes
      with probability 0.009, 0.5 with 0.19.
    * found codes no item has (share 0): the mean of their posterior means is below ``sd0``, the
      standard deviation of the holdout's OLH estimate of a zero share (``sqrt(Var_0 / n_h)``,
      4,000 users: 0.0135).  An unselected zero share's estimate is N(0, sd0^2); under a flat
      prior cut at 0 its posterior mean averages ``sd0 E[phi(Z) / Phi(Z)] = 0.90 sd0``, and the
      adaptive prior's shrinkage puts it lower.  A code chosen by the reports that estimate it
      sits near the top of about 160 noise estimates, about 2 standard deviations of its round.

    Measured on these 12 runs (``pytest --runslow -s -k keeps_its_word`` prints them): with the
    default holdout 0.2, found items 46 of 56 (0.82), "other" 10 of 12, 64 zero-share codes of
    mean posterior mean 0.0044 (0.33 sd0); with ``holdout=0`` (the paper's protocol, not run
    here) found items 58 of 61, "other" 0 of 12, 59 zero-share codes of mean 0.0194 (1.44 sd0):
    the codes chosen for lucky estimates take the mass "other" loses.  The power against the
    old default is in the last two checks; the found items' coverage alone does not tell them
    apart on this population.
    """
    out = selection_coverage(DEFAULT_HOLDOUT)
    mech = PEM(2.0, 10, bits=16, eta=4).mechanism(3)
    sd0 = float(np.sqrt(mech.oracle_variance(np.zeros(mech.k), round(DEFAULT_HOLDOUT * 20_000))[0]))
    zero = float(np.mean(out["zero_means"]))
    print(f"found items {out['covered']}/{out['intervals']}, other {out['other']}/{out['runs']}, "
          f"{len(out['zero_means'])} zero-share codes, mean posterior mean {zero:.4f} "
          f"(sd0 {sd0:.4f})")  # fmt: skip
    assert out["intervals"] >= 30, out["intervals"]
    assert out["covered"] / out["intervals"] >= 0.75, (out["covered"], out["intervals"])
    assert out["other"] >= 8, out["other"]
    assert zero < sd0, (zero, sd0)


def test_posterior_predictive_rebuilds_candidate_olh_from_the_fit():
    """The fit's attrs hold CandidateOLH's values, g and other: sample_posterior_predictive
    needs no tally= and predicts exactly what it does with the fitted tally."""
    from bayesldp import sample_posterior_predictive

    items, w = zipf_population(2**10, 1.0)
    rng = np.random.default_rng(11)
    pem = PEM(4.0, 3, bits=16, eta=4)
    reports = pem.perturb(items[rng.choice(items.size, 20_000, p=w)], rng)
    found = pem.identify(reports)
    idata = _posterior(pem, reports, found, 0).idata
    rebuilt = sample_posterior_predictive(idata, random_seed=1, num_draws=10)
    given = sample_posterior_predictive(idata, pem.final_tally(reports, found.codes),
                                        random_seed=1, num_draws=10)  # fmt: skip
    assert "CandidateOLH" in rebuilt.posterior_predictive.attrs["mechanism"]
    np.testing.assert_array_equal(rebuilt.posterior_predictive["stat"],
                                  given.posterior_predictive["stat"])  # fmt: skip
    np.testing.assert_array_equal(rebuilt.observed_data["stat"], given.observed_data["stat"])
