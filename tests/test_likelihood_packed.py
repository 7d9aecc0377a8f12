"""Packed rows of support-form likelihoods (``Likelihood.kind == "packed"``): every product equals
the compressed rows' and the dense matrix's, on random tallies (all-zero and all-one rows, bytes
full, partial and single) and on OUE, OLH and subset-selection tallies; OUE at K = 50 and
n = 1e5 takes them; the HMC draws are those of the compressed rows."""

import numpy as np
import pytest

import bayesldp
import bayesldp.likelihood as likelihood
import bayesldp.likelihood_kernels as lk
from bayesldp.likelihood import Likelihood
from bayesldp.likelihood_packed import pack_rows
from bayesldp.tally import Tally

# Sums of non-negative terms (theta, w >= 0): each entry is within (terms) x 2^-53 relative of
# the exact sum whatever the order, below 1e-13 for the sizes here.
RTOL = 1e-12


def _forced(tally, packed: bool, monkeypatch) -> Likelihood:
    with monkeypatch.context() as m:
        m.setattr(likelihood, "_packed_is_cheaper", lambda *args: packed)
        lik = Likelihood(tally)
    assert lik.kind == ("packed" if packed else "sparse")
    return lik


def _random_tally(k: int, invert: bool, seed: int) -> Tally:
    """Random support rows at three densities, plus an all-zero and an all-one row."""
    gen = np.random.default_rng([seed, k])
    n_rows = 240
    density = np.repeat([0.1, 0.5, 0.9], n_rows // 3)[:, None]
    support = gen.random((n_rows, k)) < density
    support[0], support[1] = False, True
    levels = (0.9, 0.2) if invert else (0.2, 0.9)
    counts = gen.integers(1, 6, n_rows)
    return Tally(counts, support=support, levels=levels, stat=np.zeros(k), family="t",
                 dedupe=False)  # fmt: skip


def _centred_dense(tally: Tally) -> np.ndarray:
    """``C = |hi - lo| / max(lo, hi) M``, ``M`` the support (its complement when ``hi < lo``):
    every support row centred on the lower level (an all-one row too), as ``Likelihood``
    centres them."""
    lo, hi = tally.levels
    mask = tally.support if hi > lo else ~tally.support
    return abs(hi - lo) / max(lo, hi) * mask


def _products(lik: Likelihood, theta: np.ndarray, w: np.ndarray) -> dict[str, np.ndarray]:
    """Every product the package reads, through the compiled kernels and the methods."""
    u, k = lik.n_rows, lik.k
    r, lth, out_k = np.empty(u), np.empty(u), np.empty(k)
    lk.evaluate(*lik.arrays, theta, r, lth)
    lk.rmatvec(*lik.arrays[:5], w, out_k)
    work, g = np.empty((3, u)), np.empty(k)
    ll = lk.gradient(*lik.arrays, lik.counts, theta, 0.0, *work, g)
    thetas = np.vstack([theta, np.full(k, 1.0 / k), 3.0 * theta])
    batch = np.empty(3)
    lk._loglik_batch(*lik.arrays, lik.counts, thetas, batch)
    return {"matvec": lik.matvec(theta), "rmatvec": lik.rmatvec(w), "r": r, "lth": lth,
            "rmatvec_kernel": out_k, "gradient": g, "gram": lik.gram(w),
            "full_gram": lik.full_gram(w), "fisher_diag": lik.fisher_diag(theta),
            "sq_rmatvec": lik.sq_rmatvec(w), "ll": np.array([ll]), "batch": batch}  # fmt: skip


def _dense_products(tally: Tally, lik: Likelihood, theta, w) -> dict[str, np.ndarray]:
    c = _centred_dense(tally)
    rows = lik.offset[:, None] + c
    lth = rows @ theta
    wg = lik.counts / lth
    thetas = np.vstack([theta, np.full(tally.k, 1.0 / tally.k), 3.0 * theta])
    return {"matvec": c @ theta, "rmatvec": w @ c, "r": c @ theta, "lth": lth,
            "rmatvec_kernel": w @ c, "gradient": wg @ rows, "gram": c.T @ (w[:, None] * c),
            "full_gram": rows.T @ (w[:, None] * rows),
            "fisher_diag": (lik.counts / lth**2) @ rows**2, "sq_rmatvec": w @ (c * c),
            "ll": np.array([lik.counts @ np.log(lth)]),
            "batch": np.log(thetas @ rows.T) @ lik.counts}  # fmt: skip


def _assert_same(got: dict, want: dict, what: str) -> None:
    for name, value in want.items():
        if name in ("ll", "batch"):  # sums of c log(L theta), L theta in (0, 1]: one sign
            np.testing.assert_allclose(got[name], value, rtol=RTOL, err_msg=f"{what}: {name}")
        else:
            np.testing.assert_allclose(got[name], value, rtol=RTOL, atol=0,
                                       err_msg=f"{what}: {name}")  # fmt: skip


@pytest.mark.parametrize("k", [7, 8, 9, 50, 64, 65, 300])
@pytest.mark.parametrize("invert", [False, True])
def test_packed_products_equal_the_compressed_and_dense_products(k, invert, monkeypatch):
    """K = 7, 8, 9 (one partial, one full, one full and one single-bit byte), 50, 64, 65, 300;
    ``hi < lo`` stores the complement of the support; rows at densities 0.1 (compressed rows of
    M), 0.5, 0.9 (of 1 - M for the densest), one all-zero and one all-one row."""
    tally = _random_tally(k, invert, seed=11)
    packed, compressed = _forced(tally, True, monkeypatch), _forced(tally, False, monkeypatch)
    assert packed.indptr is None and packed.indices is None
    assert packed.arrays[0][0].shape == (tally.n_rows, -(-k // 8))
    gen = np.random.default_rng(k)
    theta, w = gen.dirichlet(np.ones(k)), gen.random(tally.n_rows)
    got = _products(packed, theta, w)
    _assert_same(got, _products(compressed, theta, w), f"K={k} packed vs compressed")
    _assert_same(got, _dense_products(tally, packed, theta, w), f"K={k} packed vs dense")


def test_one_column_packed_kernels_equal_the_dense_products():
    """K = 1 (a Tally needs K >= 2): the packed kernels on a single-bit byte per row."""
    mask = np.array([[0], [1], [1], [0], [1]], dtype=bool)
    arrays = ((pack_rows(mask), 0.7), None, None, 0.7, False, np.full(5, 0.3))
    theta, w = np.array([0.6]), np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    r, lth, g = np.empty(5), np.empty(5), np.empty(1)
    lk.evaluate(*arrays, theta, r, lth)
    lk.rmatvec(*arrays[:5], w, g)
    np.testing.assert_allclose(r, 0.7 * mask[:, 0] * 0.6, rtol=RTOL, atol=0)
    np.testing.assert_allclose(lth, 0.3 * 0.6 + r, rtol=RTOL, atol=0)
    np.testing.assert_allclose(g, [0.7 * 10.0], rtol=RTOL, atol=0)


@pytest.mark.parametrize(
    ("name", "k", "eps"), [("OUE", 50, 1.0), ("OLH", 50, 2.0), ("SubsetSelection", 40, 1.0)]
)
def test_packed_products_on_mechanism_tallies(name, k, eps, monkeypatch):
    gen = np.random.default_rng(7)
    counts = gen.multinomial(3_000, gen.dirichlet(np.ones(k)))
    tally = getattr(bayesldp, name)(k, eps).simulate_tally(counts, rng=gen)
    assert tally.is_support_form
    packed, compressed = _forced(tally, True, monkeypatch), _forced(tally, False, monkeypatch)
    theta, w = gen.dirichlet(np.ones(k)), gen.random(tally.n_rows)
    got = _products(packed, theta, w)
    _assert_same(got, _products(compressed, theta, w), f"{name} packed vs compressed")
    _assert_same(got, _dense_products(tally, packed, theta, w), f"{name} packed vs dense")


def test_oue_50_at_n_1e5_takes_packed_rows_and_grr_stays_one_hot():
    gen = np.random.default_rng(3)
    counts = gen.multinomial(100_000, gen.dirichlet(np.ones(50)))
    assert Likelihood(bayesldp.OUE(50, 1.0).simulate_tally(counts, rng=gen)).kind == "packed"
    assert Likelihood(bayesldp.GRR(50, 1.0).simulate_tally(counts, rng=gen)).kind == "onehot"


def test_hmc_draws_match_the_compressed_rows(monkeypatch):
    """``fit(method="hmc")`` on a small OUE tally, same seed, packed and compressed rows: the
    products differ by rounding only (summation order), so the draws are the same up to the
    rounding's growth along the trajectories, or, if it ever flips a NUTS decision, two runs of
    the same posterior.  The posterior means must then agree within 4 standard errors of their
    difference as if the runs were independent, ``4 sqrt(sd_1^2 / ESS_1 + sd_2^2 / ESS_2)`` per
    category (a false alarm ~6e-5 each; runs sharing the seed are positively correlated, which
    only shrinks the difference)."""
    gen = np.random.default_rng(5)
    k = 6
    tally = bayesldp.OUE(k, 1.0).simulate_tally(gen.multinomial(2_000, np.full(k, 1 / k)), rng=gen)
    draws, ess, sd = {}, {}, {}
    az = pytest.importorskip("arviz")
    for packed in (True, False):
        with monkeypatch.context() as m:
            m.setattr(likelihood, "_packed_is_cheaper", lambda *args, p=packed: p)
            idata = bayesldp.fit(tally, prior=1.0, method="hmc", draws=300, tune=300, chains=2,
                                 random_seed=9, compute_convergence_checks=False)  # fmt: skip
        theta = idata.posterior["theta"].values
        draws[packed] = theta.reshape(-1, k)
        ess[packed] = az.ess(idata.posterior, var_names=["theta"])["theta"].values
        sd[packed] = draws[packed].std(axis=0)
    if np.array_equal(draws[True], draws[False]):
        return
    diff = np.abs(draws[True].mean(axis=0) - draws[False].mean(axis=0))
    se = np.sqrt(sd[True] ** 2 / ess[True] + sd[False] ** 2 / ess[False])
    assert np.all(diff <= 4.0 * se), (diff, se)
