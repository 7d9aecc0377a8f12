"""PCKV-GRR (key-value data): exact epsilon, the channel by simulation, padding and sampling,
the key frequencies and means from estimates and posteriors."""

import math

import numpy as np
import pytest

import bayesldp
from bayesldp.errors import InvalidInputError
from bayesldp.mechanisms.keyvalue import PCKV


@pytest.mark.parametrize(
    ("d", "ell", "eps", "eps_value"),
    [(1, 1, 0.1, None), (3, 2, 1.0, None), (50, 4, 4.0, None), (5, 1, 2.0, 0.7), (8, 3, 1.5, 1.5)],
)
def test_realised_epsilon_is_the_budget(d, ell, eps, eps_value):
    mech = PCKV(d, eps, ell=ell, epsilon_value=eps_value)
    b = 1 / (1 + math.exp(-mech.epsilon_value))
    composed = max(mech.epsilon_value, mech.epsilon_key + math.log(2 * b))
    assert composed == pytest.approx(eps, abs=1e-12)
    assert mech.realised_epsilon() == pytest.approx(eps, abs=1e-12)


def test_channel_entries():
    mech = PCKV(4, 1.0, ell=2)
    a, b, dp = mech.a, mech.b, mech.n_keys
    p = mech.channel
    assert p.shape == (12, 12)
    np.testing.assert_allclose(p.sum(axis=1), 1.0, rtol=0, atol=1e-15)
    assert p[6, 6] == pytest.approx(a * b) and p[6, 7] == pytest.approx(a * (1 - b))
    assert p[7, 6] == pytest.approx(a * (1 - b)) and p[7, 7] == pytest.approx(a * b)
    assert p[6, 0] == pytest.approx((1 - a) / (2 * (dp - 1)))


@pytest.mark.parametrize("z", [0, 3, 9])
def test_perturb_follows_the_channel(z):
    """Output frequencies of 400,000 perturbations of one input: within 5 standard errors."""
    mech = PCKV(4, 1.0, ell=2)
    n = 400_000
    out = np.bincount(mech.perturb(np.full(n, z), rng=z), minlength=mech.k) / n
    row = mech.channel[z]
    np.testing.assert_array_less(np.abs(out - row), 5 * np.sqrt(row * (1 - row) / n))


def test_sample_pairs_pads_samples_and_discretises():
    """Users holding 1 pair (< ell = 3) sample it w.p. 1/3, else a uniform dummy key with value
    0; users holding 4 pairs (> ell) sample each w.p. 1/4; signs are +1 w.p. (1 + v) / 2."""
    mech = PCKV(5, 1.0, ell=3)
    reps = 60_000
    # user 2u holds (key 1, v = 0.6); user 2u + 1 holds keys 0, 2, 3, 4 with values -1, 1, 0, 0.2
    users = np.concatenate([2 * np.arange(reps), np.repeat(2 * np.arange(reps) + 1, 4)])
    keys = np.concatenate([np.full(reps, 1), np.tile([0, 2, 3, 4], reps)])
    values = np.concatenate([np.full(reps, 0.6), np.tile([-1.0, 1.0, 0.0, 0.2], reps)])
    z = mech.sample_pairs(keys, values, users=users, rng=3)
    one, four = z[0::2], z[1::2]
    se = 5 * math.sqrt(0.25 / reps)
    key_one = one // 2
    assert abs(np.mean(key_one == 1) - 1 / 3) < se
    for dummy in (5, 6, 7):  # the three dummy keys, each w.p. (2/3) / 3
        assert abs(np.mean(key_one == dummy) - 2 / 9) < se
    assert abs(np.mean(one[key_one == 1] % 2 == 0) - 0.8) < 5 * math.sqrt(0.25 / (reps / 3))
    assert abs(np.mean(one[key_one >= 5] % 2 == 0) - 0.5) < 5 * math.sqrt(0.25 / (reps / 2))
    key_four = four // 2
    for key, plus in ((0, 0.0), (2, 1.0), (3, 0.5), (4, 0.6)):
        assert abs(np.mean(key_four == key) - 0.25) < se
        sel = four[key_four == key]
        assert abs(np.mean(sel % 2 == 0) - plus) < 5 * math.sqrt(0.25 / sel.size) + 1e-12


def test_key_values_of_the_exact_sampled_distribution():
    """With at most ell pairs per user, ell (pi_+ + pi_-) is the frequency and the sign
    difference over the mass the mean: exact on the population's own sampled distribution."""
    mech = PCKV(3, 1.0, ell=2)
    holdings = [{0: 0.5}, {0: -0.2, 2: 1.0}, {}, {1: 0.0, 2: -0.6}, {2: 0.3}]
    pi = np.zeros(mech.k)
    for held in holdings:
        for key, v in held.items():
            pi[2 * key] += (1 + v) / 2 / 2 / len(holdings)
            pi[2 * key + 1] += (1 - v) / 2 / 2 / len(holdings)
        for dummy in (3, 4):
            pi[2 * dummy : 2 * dummy + 2] += (2 - len(held)) / 2 / 2 / 2 / len(holdings)
    assert pi.sum() == pytest.approx(1.0, abs=1e-15)
    freq, mean = mech.key_values(pi)
    np.testing.assert_allclose(freq, [2 / 5, 1 / 5, 3 / 5], rtol=0, atol=1e-15)
    np.testing.assert_allclose(mean, [0.15, 0.0, (1.0 - 0.6 + 0.3) / 3], rtol=0, atol=1e-15)
    draws = np.stack([pi, pi])[None]  # (chain, draw, K): posterior draws work alike
    assert mech.key_values(draws)[0].shape == (1, 2, 3)


def _population(rng, n, d):
    """Each user holds 0-2 distinct keys with values in [-1, 1] (a skewed key popularity)."""
    size = rng.choice(3, size=n, p=[0.2, 0.5, 0.3])
    users = np.repeat(np.arange(n), size)
    weights = np.arange(d, 0, -1.0) / np.arange(d, 0, -1.0).sum()
    keys = np.concatenate([rng.choice(d, size=s, replace=False, p=weights) for s in size])
    values = np.clip(0.4 - 0.15 * keys + rng.normal(0, 0.3, keys.size), -1, 1)
    freq = np.bincount(keys, minlength=d) / n
    mean = np.bincount(keys, weights=values, minlength=d) / np.bincount(keys, minlength=d)
    return users, keys, values, freq, mean


def test_unbiased_frequencies_over_repeated_reports():
    """The mean of Gu et al.'s frequency estimate over 300 report draws (one sampled
    population) is within 4 standard errors of the true frequencies; the mean estimate of a
    popular key is within 0.05."""
    rng = np.random.default_rng(11)
    d, n = 4, 20_000
    users, keys, values, freq, mean = _population(rng, n, d)
    mech = PCKV(d, 2.0, ell=2)
    freqs, means = [], []
    for rep in range(300):
        z = mech.sample_pairs(
            keys, values, users=users, n_users=n, rng=np.random.SeedSequence([rep, 1])
        )
        f, m = mech.unbiased_key_values(
            mech.tally(mech.perturb(z, rng=np.random.SeedSequence([rep, 2])))
        )
        freqs.append(f)
        means.append(m)
    freqs = np.array(freqs)
    se = freqs.std(axis=0) / math.sqrt(len(freqs))
    np.testing.assert_array_less(np.abs(freqs.mean(axis=0) - freq), 4 * se)
    assert abs(np.mean(means, axis=0)[0] - mean[0]) < 0.05


def test_em_and_the_posterior_recover_key_values():
    """EM to the MLE and the posterior mean on one large PCKV tally: frequencies within 0.02,
    means of keys held by at least 20% of users within 0.1; the posterior gives intervals."""
    rng = np.random.default_rng(5)
    d, n = 4, 60_000
    users, keys, values, freq, mean = _population(rng, n, d)
    mech = PCKV(d, 3.0, ell=2)
    tally = mech.tally(mech.perturb(mech.sample_pairs(keys, values, users, n, rng=6), rng=7))
    f_em, m_em = mech.key_values(bayesldp.estimate(tally, "em").frequencies)
    np.testing.assert_allclose(f_em, freq, atol=0.02)
    popular = freq >= 0.2
    np.testing.assert_allclose(m_em[popular], mean[popular], atol=0.1)
    idata = bayesldp.fit(tally, draws=1000, chains=2, random_seed=8, progressbar=False)
    f_post, m_post = mech.key_values(idata.posterior["theta"].values)
    assert f_post.shape == (2, 1000, d)
    np.testing.assert_allclose(f_post.mean(axis=(0, 1)), freq, atol=0.02)
    np.testing.assert_allclose(m_post.mean(axis=(0, 1))[popular], mean[popular], atol=0.1)
    # the fit's attrs rebuild PCKV (sized by its keys): the predictive check needs no tally=
    ppc = bayesldp.sample_posterior_predictive(idata, random_seed=9, num_draws=50)
    assert ppc.posterior_predictive["stat"].shape[-1] == mech.k


def test_bad_input():
    mech = PCKV(3, 1.0, ell=2)
    with pytest.raises(InvalidInputError, match="outside"):
        mech.sample_pairs([0, 1], [0.5, 1.5])
    with pytest.raises(InvalidInputError, match="1 NaN"):
        mech.sample_pairs([0, 1], [0.5, np.nan])
    with pytest.raises(InvalidInputError, match="same key twice"):
        mech.sample_pairs([0, 0], [0.5, 0.1], users=[0, 0])
    with pytest.raises(InvalidInputError, match="keys"):
        mech.sample_pairs([0, 3], [0.5, 0.1])
    with pytest.raises(InvalidInputError, match=r"0\.\.1"):
        mech.sample_pairs([0, 1], [0.5, 0.1], users=[0, 2], n_users=2)
    with pytest.raises(InvalidInputError, match="one per key"):
        mech.sample_pairs([0, 1], [0.5])
    with pytest.raises(InvalidInputError, match="at most epsilon"):
        PCKV(3, 1.0, epsilon_value=2.0)
    with pytest.raises(InvalidInputError, match="last axis of 10"):
        mech.key_values(np.ones(6) / 6)
    with pytest.warns(RuntimeWarning, match=r"keys \[1\] have zero mass"):
        _, m = mech.key_values(np.array([0.2, 0.2, 0, 0, 0.2, 0.2, 0.1, 0.1, 0, 0]))
    assert np.isnan(m[1]) and not np.isnan(m[0])
