"""Band rows of the likelihood (SW, PM): the O(U + K) products equal the dense ones, and the
estimators and samplers that read them give the dense rows' results; the dense rows' own
products (Laplace, Gaussian) are the sums in index order."""

import numpy as np
import pytest

import bayesldp
import bayesldp.likelihood as lk
import bayesldp.likelihood_band as likelihood_band
from bayesldp.likelihood import Likelihood
from bayesldp.tally import Tally


def _tally(rows: np.ndarray) -> Tally:
    counts = np.arange(1, rows.shape[0] + 1)
    return Tally(counts, rows=rows, stat=np.zeros(rows.shape[1]), family="test", dedupe=False)


@pytest.mark.parametrize(
    ("cls", "bins", "out_bins", "eps"),
    [("SquareWave", 1024, 1024, 0.75), ("Piecewise", 256, 300, 2.0), ("SquareWave", 5, 7, 1.0),
     ("Piecewise", 4, 4, 0.5), ("SquareWave", 64, 48, 3.0)],
)  # fmt: skip
@pytest.mark.parametrize("shuffled", [False, True])
def test_band_products_equal_the_dense_products(cls, bins, out_bins, eps, shuffled):
    """``C theta`` and ``C^T w`` from the band form agree with the dense rows, rows in band
    order (prefix sums over rows) or shuffled (a difference array): to 1e-12 (rows scaled to a
    maximum of 1), the size of the quadrature rounding the band form reads as 0 or the level."""
    mech = getattr(bayesldp, cls)(bins, eps, lo=-1.0, hi=1.0, output_bins=out_bins)
    rows = np.ascontiguousarray(mech.channel.T)
    if shuffled:
        rows = rows[np.random.default_rng(4).permutation(out_bins)]
    lik = Likelihood(_tally(rows))
    assert lik.kind == "band"
    assert (lik.band[8].size == 0) == shuffled  # n_hi: rows in band order
    rng = np.random.default_rng(5)
    theta, w = rng.dirichlet(np.ones(bins)), rng.random(out_bins)
    r, lth, g = np.empty(out_bins), np.empty(out_bins), np.empty(bins)
    lk.evaluate(*lik.arrays, theta, r, lth)
    lk.rmatvec(*lik.arrays[:5], w, g)
    np.testing.assert_allclose(r, lik.dense @ theta, rtol=0, atol=1e-12)
    np.testing.assert_allclose(lth, lik.offset + lik.dense @ theta, rtol=0, atol=1e-12)
    np.testing.assert_allclose(g, w @ lik.dense, rtol=0, atol=1e-12 * w.sum())


def test_pckv_pm_rows_are_bands_over_the_value_bins_plus_the_absence():
    """PCKV-PM's rows: a band over its ordered value bins, the absence a dense tail column;
    the products equal the dense ones to 1e-12."""
    mech = bayesldp.PCKVPM(128, 1.3, output_bins=200)
    x = np.random.default_rng(2).integers(0, 129, 20_000)
    lik = Likelihood(mech.tally(mech.perturb(x, rng=3)))
    assert lik.kind == "band" and lik.band[9].shape == (lik.n_rows, 1)
    rng = np.random.default_rng(5)
    theta, w = rng.dirichlet(np.ones(129)), rng.random(lik.n_rows)
    r, lth, g = np.empty(lik.n_rows), np.empty(lik.n_rows), np.empty(129)
    lk.evaluate(*lik.arrays, theta, r, lth)
    lk.rmatvec(*lik.arrays[:5], w, g)
    np.testing.assert_allclose(r, lik.dense @ theta, rtol=0, atol=1e-12)
    np.testing.assert_allclose(g, w @ lik.dense, rtol=0, atol=1e-12 * w.sum())


@pytest.mark.parametrize("name", ["laplace", "gaussian", "grr"])
def test_other_rows_are_not_read_as_bands(name):
    """Laplace and Gaussian rows are not bands; GRR's dense channel rows are (width 1)."""
    if name == "grr":
        rows = bayesldp.GRR(6, 1.0).channel.T.copy()
    else:
        cls = bayesldp.LaplaceNumeric if name == "laplace" else bayesldp.Gaussian
        rows = np.ascontiguousarray(cls(32, 1.0, lo=-1.0, hi=1.0).channel.T)
    assert Likelihood(_tally(rows)).kind == ("band" if name == "grr" else "dense")


@pytest.mark.parametrize("name", ["laplace", "gaussian"])
def test_dense_products_are_the_row_and_column_sums_in_order(name):
    """Dense rows (Laplace, Gaussian): ``C theta`` from ``C^T`` and ``C^T w`` from ``C`` are,
    bit for bit, the sums over ``x`` (over ``u``) in index order, as one loop per row (column)
    computes them."""
    cls = bayesldp.LaplaceNumeric if name == "laplace" else bayesldp.Gaussian
    lik = Likelihood(_tally(np.ascontiguousarray(cls(12, 1.0, lo=-1.0, hi=1.0).channel.T)))
    assert lik.kind == "dense"
    c, rng = lik.dense, np.random.default_rng(8)
    theta, w = rng.dirichlet(np.ones(lik.k)), rng.random(lik.n_rows)
    r, lth, g = np.empty(lik.n_rows), np.empty(lik.n_rows), np.empty(lik.k)
    lk.evaluate(*lik.arrays, theta, r, lth)
    lk.rmatvec(*lik.arrays[:5], w, g)

    def in_order(terms):
        total = 0.0
        for term in terms:
            total += term
        return total

    assert np.array_equal(r, [in_order(c[u] * theta) for u in range(lik.n_rows)])
    assert np.array_equal(g, [in_order(w * c[:, x]) for x in range(lik.k)])


@pytest.mark.parametrize("method", ["em", "ibu", "mle", "em_mr"])
def test_estimators_on_band_rows_equal_the_dense_rows(method, monkeypatch):
    """The same estimates to 1e-5: rounding moves where a tolerance stops the iterations."""
    mech = bayesldp.Piecewise(64, 1.0, lo=-1.0, hi=1.0)
    x = np.clip(np.random.default_rng(3).normal(0.2, 0.3, 4000), -1, 1)
    tally = mech.tally(mech.perturb(x, rng=4))
    assert Likelihood(tally).kind == "band"
    fast = bayesldp.estimate(tally, method)
    band_form = lk.band_form
    monkeypatch.setattr(lk, "band_form", lambda *args: (False, band_form(*args)[1]))
    slow = bayesldp.estimate(tally, method)
    np.testing.assert_allclose(fast.frequencies, slow.frequencies, rtol=0, atol=1e-5)


def test_posterior_on_band_rows_matches_the_dense_rows(monkeypatch):
    """The HMC reads the band products: the posterior mean of the population mean matches the
    dense rows' run within Monte Carlo error (0.005; the chains differ by rounding, so not draw
    by draw, and single bins are too noisy to compare)."""
    mech = bayesldp.SquareWave(32, 1.0, lo=-1.0, hi=1.0)
    x = np.clip(np.random.default_rng(6).normal(0.0, 0.4, 3000), -1, 1)
    tally = mech.tally(mech.perturb(x, rng=7))
    assert Likelihood(tally).kind == "band"
    opts = dict(prior=1 / 32, method="hmc", draws=500, chains=1, random_seed=3,
                progressbar=False, compute_convergence_checks=False)  # fmt: skip
    fast = bayesldp.numerical.mean(bayesldp.fit(tally, **opts), mech).mean
    band_form = lk.band_form
    monkeypatch.setattr(lk, "band_form", lambda *args: (False, band_form(*args)[1]))
    slow = bayesldp.numerical.mean(bayesldp.fit(tally, **opts), mech).mean
    assert abs(fast - slow) < 0.005


def test_prefix_sums_in_four_chains_equal_the_running_sum():
    for n in (0, 1, 3, 4, 5, 17, 1024, 1027):
        values = np.random.default_rng(n).random(n)
        out = np.empty(n + 1)
        likelihood_band._prefix_sums(values, out)
        want = np.concatenate([[0.0], np.cumsum(values)])
        np.testing.assert_allclose(out, want, rtol=1e-13, atol=0)
