"""RAPPOR: exact epsilon (one report and the PRR), the report law, the oracle, decoding, the
"other" component, tallies and bad input."""

import hashlib
import math

import numpy as np
import pandas as pd
import pytest

import bayesldp
from bayesldp.errors import InvalidInputError, InvalidTypeError, NotSupportedError
from bayesldp.mechanisms.base import realised_epsilon_of_channel
from bayesldp.mechanisms.rappor import (
    RAPPOR,
    RapporReports,
    RapporTally,
    bloom_bits,
    rappor_decode,
)
from bayesldp.tally import Tally


@pytest.mark.parametrize("k", [2, 3, 10, 100])
@pytest.mark.parametrize("eps", [0.1, 1.0, 10.0])
def test_realised_epsilon_is_the_budget(k, eps):
    mech = RAPPOR(k, eps)
    assert mech.realised_epsilon() == pytest.approx(eps, abs=1e-9)
    # the PRR's longitudinal budget, separately: formula and its exact value on the candidates
    assert mech.longitudinal_budget == pytest.approx(
        2 * 2 * math.log((1 - mech.f / 2) / (mech.f / 2)), rel=1e-12
    )
    assert mech.realised_longitudinal_epsilon() == pytest.approx(mech.longitudinal_budget, 1e-9)


@pytest.mark.parametrize("eps", [0.1, 1.0, 3.0])
def test_with_an_irr_the_one_report_budget_stays_below_the_prr_one(eps):
    mech = RAPPOR(10, eps, f=0.25)
    assert mech.realised_epsilon() == pytest.approx(eps, abs=1e-9)
    budget = 4 * math.log((1 - 0.125) / 0.125)
    assert mech.longitudinal_budget == pytest.approx(budget, rel=1e-12)
    assert mech.realised_longitudinal_epsilon() == pytest.approx(budget, rel=1e-9)
    assert 0 < mech.p_irr < 0.5 and mech.q_irr == pytest.approx(1 - mech.p_irr)
    # the composed per-bit probabilities are those of PRR then IRR
    r1 = mech.q_irr * (1 - mech.f / 2) + mech.p_irr * mech.f / 2
    r0 = mech.p_irr * (1 - mech.f / 2) + mech.q_irr * mech.f / 2
    assert (r1, r0) == pytest.approx((mech.r1, mech.r0), rel=1e-12)
    assert math.log(r1 * (1 - r0) / (r0 * (1 - r1))) * 2 == pytest.approx(eps, rel=1e-12)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"k": 3, "epsilon": 1.5, "num_bits": 4, "cohorts": 3},
        {"k": 4, "epsilon": 0.7, "num_bits": 5, "cohorts": 2, "num_hashes": 3},
        {"k": 4, "epsilon": 2.0, "num_bits": 4, "cohorts": 2, "other": True},
        {"k": 3, "epsilon": 1.0, "num_bits": 6, "cohorts": 1, "f": 0.1},
    ],
)
def test_realised_epsilon_and_rows_match_the_full_channel(kwargs):
    mech = RAPPOR(**kwargs)
    channel = mech.channel  # brute force over every (cohort, bit pattern)
    assert channel.shape == (mech.k, mech.cohorts * 2**mech.num_bits)
    np.testing.assert_allclose(channel.sum(axis=1), 1.0, rtol=1e-12)
    assert mech.realised_epsilon() == pytest.approx(realised_epsilon_of_channel(channel), 1e-12)
    assert mech.realised_epsilon() <= mech.epsilon * (1 + 1e-12)
    # every tally row is proportional to its report's channel column
    kb = mech.num_bits
    reports = mech.perturb(np.arange(400) % mech.k, rng=3)
    tally = mech.tally(reports)
    keys = reports.cohort * 2**kb + (reports.bits * (1 << np.arange(kb))).sum(axis=1)
    columns = channel[:, np.unique(keys)].T
    assert tally.n_rows == columns.shape[0] and tally.n == 400

    def canonical(rows):
        rows = np.round(rows, 9)
        return rows[np.lexsort(rows.T[::-1])]

    np.testing.assert_allclose(
        canonical(tally.rows), canonical(columns / columns.max(axis=1, keepdims=True)), 1e-8
    )


def test_realised_epsilon_is_smaller_when_no_two_candidates_have_disjoint_bloom_sets():
    # one cohort, 2 bits, 2 hashes: the Bloom sets of two strings always share a bit or are
    # single bits, so the channel realises less than the requested epsilon
    mech = RAPPOR(2, 1.0, num_bits=2, cohorts=1)
    sets = [set(bloom_bits(w, 0, 2, 2)) for w in mech.candidates]
    sym = len(sets[0] ^ sets[1])
    assert mech.realised_epsilon() == pytest.approx(sym / 4, abs=1e-12)
    assert realised_epsilon_of_channel(mech.channel) == pytest.approx(sym / 4, abs=1e-12)
    assert mech.realised_epsilon() < 1.0


def test_hash_family_is_google_rappors():
    digest = hashlib.md5(b"\x00\x00\x00\x05" + b"v12").digest()
    assert bloom_bits("v12", 5, 2, 16) == [digest[0] % 16, digest[1] % 16]
    mech = RAPPOR(3, 1.0, candidates=["a", 7, "c"], num_bits=32, cohorts=4)
    assert mech.candidates == ("a", "7", "c")
    for c in range(4):
        assert set(np.flatnonzero(mech.bloom[c, 1])) == set(bloom_bits("7", c, 2, 32))


def test_perturb_bit_rates_match_the_channel():
    mech = RAPPOR(4, 1.2, num_bits=8, cohorts=3, f=0.3)
    x = np.repeat(np.arange(4), 30_000)
    reports = mech.perturb(x, rng=7)
    assert np.array_equal(reports.bits, mech.perturb(x, rng=7).bits)  # seeded
    bloom = mech.bloom[reports.cohort, x]
    set_rate = reports.bits[bloom].mean()
    unset_rate = reports.bits[~bloom].mean()
    # 5 standard errors of a Bernoulli mean
    assert abs(set_rate - mech.r1) < 5 * math.sqrt(0.25 / bloom.sum())
    assert abs(unset_rate - mech.r0) < 5 * math.sqrt(0.25 / (~bloom).sum())
    counts = np.bincount(reports.cohort, minlength=3)
    assert np.all(np.abs(counts / x.size - 1 / 3) < 5 * math.sqrt(2 / 9 / x.size))
    # "other" users: h uniform positions, so a bit is set with rate 1 - (1 - 1/k)^h
    mech_o = RAPPOR(3, 1.2, num_bits=8, cohorts=3, other=True)
    rep_o = mech_o.perturb(np.full(60_000, 2), rng=8)
    pi = 1 - (1 - 1 / 8) ** 2
    expected = pi * mech_o.r1 + (1 - pi) * mech_o.r0
    assert abs(rep_o.bits.mean() - expected) < 5 * math.sqrt(0.25 / rep_o.bits.size)


@pytest.mark.parametrize("other", [False, True])
def test_oracle_is_unbiased_with_the_stated_variance(other):
    mech = RAPPOR(5, 1.0, num_bits=8, cohorts=4, other=other)
    theta = np.array([0.35, 0.25, 0.2, 0.1, 0.1])
    n, reps = 1000, 400
    x = np.repeat(np.arange(5), np.round(theta * n).astype(int))
    gen = np.random.default_rng(11)
    estimates = np.array([mech.unbiased_frequencies(mech.tally(mech.perturb(x, gen)))
                          for _ in range(reps)])  # fmt: skip
    var = mech.oracle_variance(theta, n)
    se_mean = np.sqrt(var / reps)
    assert np.all(np.abs(estimates.mean(axis=0) - theta) < 4 * se_mean)
    # sample variance against the formula: relative sd of a variance from 400 draws ~ 7%
    np.testing.assert_allclose(estimates.var(axis=0, ddof=1), var, rtol=0.25)


def test_estimators_and_the_posterior_run_on_a_rappor_tally():
    mech = RAPPOR(6, 2.0, candidates=list("abcdef"), num_bits=16, cohorts=8)
    theta = np.array([0.4, 0.2, 0.15, 0.15, 0.1, 0.0])
    x = np.repeat(np.arange(6), (theta * 4000).astype(int))
    tally = mech.tally(mech.perturb(x, rng=2))
    for method in ("oracle", "norm_sub", "mle", "em"):
        est = bayesldp.estimate(tally, method)
        assert np.abs(est.frequencies - theta).max() < 0.08, method
    mle = bayesldp.estimate(tally, "mle").frequencies
    em = bayesldp.estimate(tally, "em").frequencies
    np.testing.assert_allclose(mle, em, atol=2e-3)


def test_the_posterior_runs_on_a_rappor_tally():
    mech = RAPPOR(4, 2.0, candidates=list("abcd"), num_bits=16, cohorts=8)
    theta = np.array([0.4, 0.3, 0.2, 0.1])
    x = np.repeat(np.arange(4), (theta * 1500).astype(int))
    tally = mech.tally(mech.perturb(x, rng=2))
    fit = bayesldp.fit(tally, draws=500, tune=500, chains=2, random_seed=0)
    mean = fit.posterior["theta"].mean(dim=("chain", "draw")).to_numpy()
    mle = bayesldp.estimate(tally, "mle").frequencies
    assert np.abs(mean - theta).max() < 0.1
    # the posterior mean is near the MLE (a Dirichlet(1) prior, 1,500 reports)
    assert np.abs(mean - mle).max() < 0.05


def test_rappor_decode_selects_the_present_candidates_with_standard_errors():
    cands = [f"v{i}" for i in range(1, 21)]
    mech = RAPPOR(20, 4.0, candidates=cands, num_bits=32, num_hashes=2, cohorts=16)
    theta = np.zeros(20)
    theta[:5] = [0.4, 0.25, 0.15, 0.12, 0.08]
    x = np.repeat(np.arange(20), (theta * 20_000).astype(int))
    reports = mech.perturb(x, rng=5)
    decoded = rappor_decode(mech, mech.bit_counts(reports))
    assert decoded.labels == tuple(cands)
    assert decoded.significant[:5].all()
    assert decoded.significant.sum() <= 7  # few false detections among the 15 absent
    assert np.abs(decoded.frequencies[:5] - theta[:5]).max() < 4 * decoded.std_errors[:5].max()
    assert np.all(decoded.std_errors[decoded.selected] > 0)
    assert np.all(decoded.std_errors[~decoded.selected] == 0)
    assert np.all(decoded.frequencies[~decoded.selected] == 0)
    # the standard errors are about the oracle's (the same regression on all candidates)
    oracle_se = np.sqrt(mech.oracle_variance(theta, x.size))
    assert decoded.std_errors[0] == pytest.approx(oracle_se[0], rel=0.5)
    # bit counts in google/rappor's layout
    counts = mech.bit_counts(reports)
    assert counts.shape == (16, 33) and counts[:, 0].sum() == x.size
    assert counts[3, 1 + 5] == reports.bits[reports.cohort == 3, 5].sum()


def _decoding_setup():
    cands = [f"v{i}" for i in range(1, 21)]
    mech = RAPPOR(20, 4.0, candidates=cands, num_bits=32, num_hashes=2, cohorts=16)
    counts = np.zeros(20, dtype=int)
    counts[:5] = [8000, 5000, 3000, 2400, 1600]
    x = np.repeat(np.arange(20), counts)
    return mech, mech.perturb(x, rng=5)


def test_rappor_decode_is_an_estimate_method_equal_to_rappor_decode():
    mech, reports = _decoding_setup()
    tally = mech.tally(reports)
    assert isinstance(tally, RapporTally)
    np.testing.assert_array_equal(tally.bit_counts, mech.bit_counts(reports))
    for options in ({}, {"alpha": 1e-6, "lambda_ratio": 1e-2}):
        direct = rappor_decode(mech, mech.bit_counts(reports), **options)
        est = bayesldp.estimate(tally, "rappor_decode", **options)
        assert est.method == "rappor_decode"
        np.testing.assert_array_equal(est.frequencies, direct.frequencies)
        np.testing.assert_array_equal(est.std_errors, direct.std_errors)
        np.testing.assert_array_equal(est.details["selected"], direct.selected)
        np.testing.assert_array_equal(est.details["significant"], direct.significant)
        assert est.details["labels"] == direct.labels
        assert est.on_simplex == (
            bool(np.all(direct.frequencies >= 0)) and abs(direct.frequencies.sum() - 1.0) <= 1e-9
        )
    # a larger penalty selects fewer candidates (the options reach the decoding)
    loose = bayesldp.estimate(tally, "rappor_decode").details["selected"]
    strict = bayesldp.estimate(tally, "rappor_decode", lambda_ratio=0.9).details["selected"]
    assert 1 <= strict.sum() < loose.sum()


def test_rappor_tallies_add_their_bit_counts_and_keep_them_through_pickling():
    import pickle

    mech, reports = _decoding_setup()
    half = reports.cohort.size // 2
    first = mech.tally(RapporReports(reports.cohort[:half], reports.bits[:half]))
    second = mech.tally(RapporReports(reports.cohort[half:], reports.bits[half:]))
    for merged in (first + second, sum([first, second])):
        assert isinstance(merged, RapporTally)
        np.testing.assert_array_equal(merged.bit_counts, mech.bit_counts(reports))
        np.testing.assert_array_equal(
            bayesldp.estimate(merged, "rappor_decode").frequencies,
            rappor_decode(mech, mech.bit_counts(reports)).frequencies,
        )
        whole = mech.tally(reports)  # the same up to the rounding of the summed oracle stat
        assert merged.n == whole.n
        np.testing.assert_allclose(merged.stat, whole.stat, rtol=1e-12, atol=1e-9)
    again = pickle.loads(pickle.dumps(first))
    assert isinstance(again, RapporTally) and again == first
    np.testing.assert_array_equal(again.bit_counts, first.bit_counts)
    assert isinstance(first.deduplicated(), RapporTally)
    np.testing.assert_array_equal(first.deduplicated().bit_counts, first.bit_counts)
    # equal rows, different bit counts: not equal
    assert first != RapporTally._wrap(first, first.bit_counts + np.eye(1, 33, 1, dtype=np.int64))


def test_rappor_decode_refuses_tallies_without_bit_counts_naming_the_tally():
    mech, reports = _decoding_setup()
    tally = mech.tally(reports)
    plain = Tally(tally.counts, rows=tally.rows, stat=tally.stat, mechanism=mech)
    with pytest.raises(NotSupportedError, match="tally is a RAPPOR tally without its per-cohort"):
        bayesldp.estimate(plain, "rappor_decode")
    grr = bayesldp.GRR(20, 1.0)
    grr_tally = grr.tally(grr.perturb(np.arange(100) % 20, rng=1))
    with pytest.raises(NotSupportedError, match="'rappor_decode': tally is a tally of"):
        bayesldp.estimate(grr_tally, "rappor_decode")
    # a joint tally of RAPPOR and GRR reports keeps only the likelihood
    with pytest.raises(NotSupportedError, match="needs the RapporTally"):
        bayesldp.estimate([tally, grr_tally], "rappor_decode")
    assert not isinstance(tally + plain, RapporTally)
    with pytest.raises(InvalidInputError, match="does not take sweeps; valid options: "):
        bayesldp.estimate(tally, "rappor_decode", sweeps=3)
    with pytest.raises(InvalidInputError, match=r"bit_counts: expected integer counts of shape"):
        RapporTally(tally.counts, rows=tally.rows, stat=tally.stat, mechanism=mech,
                    bit_counts=tally.bit_counts[:, :5])  # fmt: skip
    with pytest.raises(InvalidInputError, match=r"bit_counts: the cohorts hold"):
        RapporTally(tally.counts, rows=tally.rows, stat=tally.stat, mechanism=mech,
                    bit_counts=tally.bit_counts * 2)  # fmt: skip


def test_rappor_decode_needs_no_full_rank_design():
    # 40 candidates, 2 cohorts x 8 bits: 16 equations, no unbiased linear oracle, but the LASSO
    # selects at most as many candidates as the design has rows
    mech = RAPPOR(40, 4.0, num_bits=8, cohorts=2)
    tally = mech.tally(mech.perturb(np.repeat([0, 1, 2], [3000, 2000, 1000]), rng=2))
    with pytest.raises(NotSupportedError, match="rank deficient"):
        mech.unbiased_frequencies(tally)
    est = bayesldp.estimate(tally, "rappor_decode")
    assert 1 <= est.details["selected"].sum() <= 16
    assert np.all(np.isfinite(est.frequencies))


def test_ignoring_other_strings_biases_the_estimates_and_modelling_them_does_not():
    cands = ["a", "b", "c", "d"]
    outside = [f"o{i}" for i in range(40)]
    truth = RAPPOR(44, 2.0, candidates=cands + outside, num_bits=32, cohorts=16)
    n_cand = np.array([3000, 2000, 1000, 0])
    x = np.concatenate([np.repeat(np.arange(4), n_cand), 4 + np.arange(4000) % 40])
    reports = truth.perturb(x, rng=9)  # 40% of users hold strings outside the candidates
    target = np.append(n_cand, 4000) / x.size
    naive = RAPPOR(4, 2.0, candidates=cands, num_bits=32, cohorts=16)
    modelled = RAPPOR(5, 2.0, candidates=cands, num_bits=32, cohorts=16, other=True)
    naive_mle = bayesldp.estimate(naive.tally(reports), "mle").frequencies
    model_mle = bayesldp.estimate(modelled.tally(reports), "mle").frequencies
    model_oracle = modelled.unbiased_frequencies(modelled.tally(reports))
    # ignoring the outside mass: the candidates absorb it, an absent one included
    assert np.abs(naive_mle - target[:4]).max() > 0.1
    assert naive_mle[3] > 0.08  # the absent candidate 'd' takes mass (here 0.115)
    assert model_mle[3] < 0.03
    assert np.abs(model_mle - target).max() < 0.05
    se = np.sqrt(modelled.oracle_variance(target, x.size))
    assert np.all(np.abs(model_oracle - target) < 5 * se)


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_reports_round_trip_through_a_table(suffix, tmp_path):
    mech = RAPPOR(5, 1.0, num_bits=8, cohorts=3)
    reports = mech.perturb(np.arange(200) % 5, rng=4)
    frame = mech.reports_to_frame(reports)
    assert list(frame.columns) == ["cohort", *[f"b{j}" for j in range(8)]]
    path = tmp_path / f"r{suffix}"
    frame.to_csv(path, index=False) if suffix == ".csv" else frame.to_parquet(path)
    again = pd.read_csv(path) if suffix == ".csv" else pd.read_parquet(path)
    assert mech.tally_frame(again) == mech.tally(reports)


def test_bad_input_is_refused_naming_the_field():
    mech = RAPPOR(5, 1.0, num_bits=8, cohorts=3)
    reports = mech.perturb(np.arange(50) % 5, rng=0)
    with pytest.raises(InvalidInputError, match=r"field 'cohort' must lie in 0..2"):
        mech.tally(RapporReports(reports.cohort + 3, reports.bits))
    with pytest.raises(InvalidInputError, match=r"field 'bits' must have shape \(50, 8\)"):
        mech.tally(RapporReports(reports.cohort, reports.bits[:, :7]))
    with pytest.raises(InvalidInputError, match=r"field 'bits' must have shape \(50, 8\)"):
        mech.tally(RapporReports(reports.cohort, reports.bits[:40]))  # fewer bit rows
    with pytest.raises(InvalidInputError, match="field 'cohort' must hold integers, got dtype"):
        mech.tally(RapporReports(reports.cohort.astype(float), reports.bits))
    # reports of a mechanism with more cohorts or bits than this one
    wide = RAPPOR(5, 1.0, num_bits=9, cohorts=6)
    wide_reports = wide.perturb(np.arange(200) % 5, rng=1)
    with pytest.raises(InvalidInputError, match=r"field 'cohort' must lie in 0..2 \(the mechan"):
        mech.tally(wide_reports)
    with pytest.raises(InvalidInputError, match=r"bit columns b0..b7 \(num_bits = 8\), got 9"):
        mech.tally_frame(wide.reports_to_frame(wide_reports).assign(cohort=0))
    with pytest.raises(InvalidInputError, match="field 'bits' must be 0 or 1, got 2"):
        mech.tally(RapporReports(reports.cohort, reports.bits.astype(int) * 2))
    with pytest.raises(InvalidTypeError, match="expected RapporReports"):
        mech.tally(reports.bits)
    frame = mech.reports_to_frame(reports)
    with pytest.raises(InvalidInputError, match=r"bit columns b0..b7 \(num_bits = 8\), got 7"):
        mech.tally_frame(frame.drop(columns="b7"))
    with pytest.raises(InvalidInputError, match="lacks column 'cohort'"):
        mech.tally_frame(frame.drop(columns="cohort"))
    with pytest.raises(InvalidInputError, match="'a' appears twice"):
        RAPPOR(3, 1.0, candidates=["a", "b", "a"])
    with pytest.raises(InvalidInputError, match="'3' appears twice"):
        RAPPOR(2, 1.0, candidates=[3, "3"])
    with pytest.raises(InvalidInputError, match="need 3 candidates, got 2"):
        RAPPOR(3, 1.0, candidates=["a", "b"])
    with pytest.raises(InvalidTypeError, match="candidates: expected strings or integers"):
        RAPPOR(2, 1.0, candidates=["a", 1.5])
    with pytest.raises(InvalidInputError, match=r"num_bits: must be in 2..256"):
        RAPPOR(3, 1.0, num_bits=300)
    with pytest.raises(InvalidInputError, match=r"num_hashes: must be in 1..16"):
        RAPPOR(3, 1.0, num_hashes=17)
    with pytest.raises(InvalidInputError, match="exceeds the PRR budget"):
        RAPPOR(3, 5.0, f=0.5)
    with pytest.raises(InvalidInputError, match="f: must lie in"):
        RAPPOR(3, 1.0, f=1.0)
    with pytest.raises(InvalidInputError, match=r"x: categories must lie in 0..4"):
        mech.perturb([0, 5])
    with pytest.raises(InvalidInputError, match="counts: expected integer counts of shape"):
        rappor_decode(mech, np.zeros((2, 9), dtype=int))
    # a design that cannot tell categories apart has no unbiased linear oracle
    tiny = RAPPOR(6, 1.0, num_bits=2, cohorts=1)
    with pytest.raises(NotSupportedError, match="rank deficient"):
        tiny.unbiased_frequencies(tiny.tally(tiny.perturb(np.arange(30) % 6, rng=0)))
    with pytest.raises(NotSupportedError, match="channel has"):
        _ = RAPPOR(3, 1.0, num_bits=64).channel
