"""Reference posteriors with power: the samplers against exact posteriors.

The reference is the posterior of a small GRR tally under a Dirichlet prior, enumerated here
(independently of :mod:`bayesldp.bayes.exact`): with report counts ``c`` and latent counts
``0 <= j_y <= c_y`` of reports that tell the truth, the posterior is ``sum_j w_j
Dirichlet(alpha + j)``, ``w_j`` proportional to ``prod_y C(c_y, j_y) (p - q)^{j_y} q^{c_y - j_y}
B(alpha + j) / B(alpha)``.  Each marginal is a mixture of Beta laws, so means, variances and
tail quantiles are exact (quantiles by root-finding on the mixture's CDF).

Sampler checks compare the Monte Carlo average of a functional ``g`` (``theta_x``,
``(theta_x - E theta_x)^2``, ``1[theta_x <= q_0.05]``, ``1[theta_x >= q_0.95]``) with its exact
expectation in units of its Monte Carlo standard error ``sd(g) / sqrt(ESS_mean(g))`` (arviz);
with 12 checks at ``|z| < 4`` the family-wise false alarm of a correct sampler is below 1e-3
(normal approximation).  A bias of ``(4 + 1.3) MCSE`` is caught with probability 0.9: each test's
docstring gives that size in the functional's own units (measured on the committed seed).
"""

import functools
import importlib
import itertools
import math

import numpy as np
import pytest
from scipy.optimize import brentq
from scipy.special import gammaln, roots_jacobi
from scipy.stats import beta as beta_dist
from scipy.stats import dirichlet, norm

import bayesldp
from bayesldp.adaptive import AdaptiveSurvey
from bayesldp.bayes import exact, hmc, laplace, prior_mh, sgld
from bayesldp.bayes.fit import import_arviz
from tests.stats_helpers import assert_divergence_rate

fit_module = importlib.import_module("bayesldp.bayes.fit")  # the name `fit` is the function

Z_MAX = 4.0
MECH = bayesldp.GRR(3, 1.0)
REPORTS = np.array([12, 5, 9])
ALPHA = np.array([1.0, 1.5, 0.7])


class Mixture:
    """``sum_m w_m Dirichlet(beta_m)``: exact means, variances, covariances and marginal CDFs
    (each marginal a mixture of Beta laws; quantiles by root-finding on the CDF)."""

    def __init__(self, w, comps):
        w = w / w.sum()  # the heaviest components holding all but 1e-13 of the mass
        order = np.argsort(w)[::-1]
        keep = order[: int(np.searchsorted(np.cumsum(w[order]), 1 - 1e-13)) + 1]
        self.w, self.comps = w[keep] / w[keep].sum(), comps[keep]
        self._marginals = {}
        tot = self.comps.sum(axis=1, keepdims=True)
        mu = self.comps / tot
        self.mean = self.w @ mu
        second = self.w @ (self.comps * (self.comps + 1) / (tot * (tot + 1)))
        self.var = second - self.mean**2
        cross = np.einsum("m,mx,my->xy", self.w / (tot[:, 0] * (tot[:, 0] + 1)), self.comps,
                          self.comps)  # fmt: skip
        self.cov = cross + np.diag(self.w @ (self.comps / (tot * (tot + 1)))) - np.outer(
            self.mean, self.mean
        )

    @classmethod
    def grr(cls, mech, reports, alpha):
        """The posterior of GRR report counts, enumerated over the latent truthful counts."""
        p, q = mech.p, mech.q
        comps, logw = [], []
        for j in itertools.product(*[range(c + 1) for c in reports]):
            j = np.array(j)
            b = alpha + j
            lw = (gammaln(reports + 1) - gammaln(j + 1) - gammaln(reports - j + 1)).sum()
            lw += j.sum() * math.log(p - q) + (reports - j).sum() * math.log(q)
            lw += gammaln(b).sum() - gammaln(b.sum()) - gammaln(alpha).sum() + gammaln(alpha.sum())
            comps.append(b)
            logw.append(lw)
        logw = np.array(logw)
        out = cls(np.exp(logw - logw.max()), np.array(comps))
        out.log_evidence = float(np.logaddexp.reduce(logw))
        return out

    def marginal(self, x):
        """theta_x's law: weights and Beta parameters, components with equal ones merged."""
        if x not in self._marginals:
            pairs = np.stack([self.comps[:, x], self.comps.sum(axis=1) - self.comps[:, x]], 1)
            uniq, inverse = np.unique(pairs, axis=0, return_inverse=True)
            self._marginals[x] = (np.bincount(inverse.ravel(), self.w), uniq[:, 0], uniq[:, 1])
        return self._marginals[x]

    def cdf(self, x, t):
        w, b0, b1 = self.marginal(x)
        return float(w @ beta_dist.cdf(t, b0, b1))

    def quantile(self, x, prob):
        return brentq(lambda t: self.cdf(x, t) - prob, 0.0, 1.0, xtol=1e-12)

    def functionals(self, x):
        """(name, g, E g, standard error of E g) of the checks on coordinate ``x``."""
        lo, hi, m = self.quantile(x, 0.05), self.quantile(x, 0.95), self.mean[x]
        return [("mean", lambda t: t, m, 0.0),
                ("var", lambda t: (t - m) ** 2, self.var[x], 0.0),
                ("q05", lambda t: (t <= lo).astype(float), 0.05, 0.0),
                ("q95", lambda t: (t >= hi).astype(float), 0.05, 0.0)]  # fmt: skip


@pytest.fixture(scope="module")
def reference():
    return Mixture.grr(MECH, REPORTS, ALPHA)


def z_scores(theta, ref):
    """(functional, coordinate) -> z of the draws' average against the reference value, and
    the MCSE of each (``theta`` of shape (chains, draws, K)): ``z = (mean g - E g) /
    sqrt(MCSE^2 + se_ref^2)``, ``MCSE = sd(g) / sqrt(ESS_mean(g))`` (arviz), ``se_ref`` the
    reference's own standard error (0 for an exact one)."""
    az = import_arviz()
    out = {}
    for x in range(theta.shape[2]):
        t = theta[:, :, x]
        for name, fn, exact_value, ref_se in ref.functionals(x):
            g = fn(t)
            ess = float(az.ess(g, method="mean"))
            mcse = g.std() / math.sqrt(ess)
            out[name, x] = ((g.mean() - exact_value) / math.hypot(mcse, ref_se), mcse)
    return out


def z_limit(n_checks, fwer=1e-3):
    """The |z| bound of ``n_checks`` two-sided checks whose family-wise false alarm is ``fwer``
    (Bonferroni, normal approximation): 3.94 for 12 checks, 4.0 for 16."""
    return float(norm.isf(fwer / (2 * n_checks)))


def assert_no_z_beyond(z, z_max):
    bad = {k: round(v[0], 2) for k, v in z.items() if abs(v[0]) >= z_max}
    assert not bad, (bad, {k: round(v[0], 2) for k, v in z.items()})


def test_exact_mixture_is_the_enumerated_one(reference):
    """:func:`bayesldp.bayes.exact.exact_posterior` on the same tally: the evidence, mean and
    covariance equal the enumeration's to 1e-10 relative, and the mixture's log density at a
    few points too (deterministic: any change to the weights or the moment formulas fails)."""
    tally = MECH.tally_from_report_counts(REPORTS)
    post = exact.exact_posterior(tally, ALPHA)
    np.testing.assert_allclose(post.mean, reference.mean, rtol=1e-10)
    np.testing.assert_allclose(post.cov, reference.cov, rtol=1e-9, atol=1e-14)
    theta = np.array([[0.5, 0.2, 0.3], [0.2, 0.2, 0.6], [0.05, 0.9, 0.05]])
    dens = np.array([reference.w @ np.exp(
        gammaln(reference.comps.sum(axis=1)) - gammaln(reference.comps).sum(axis=1)
        + ((reference.comps - 1) * np.log(t)).sum(axis=1)) for t in theta])  # fmt: skip
    np.testing.assert_allclose(np.exp(post.logpdf(theta)), dens, rtol=1e-9)


@pytest.mark.parametrize("coordinates", ["alr", "log_gamma"])
def test_hmc_moments_and_tails_match_the_exact_posterior(reference, coordinates):
    """bayesldp's NUTS against the exact posterior, 4 chains x 100,000 draws on ALR
    coordinates (the default; about 7 s) and 4 x 50,000 on log-gamma ones (about 2 s): 12
    z-scores (mean, variance, 5 % and 95 % tail masses of each theta_x) within 4 MCSE (largest
    |z| at 50,000 draws on the committed seed: 2.6 on ALR, 1.5 on log-gamma coordinates).  At
    50,000 draws the MCSEs were 0.0004-0.0006 for the means (0.3 % of a posterior sd), 0.45 %
    of each variance and 0.0006-0.0009 for a 5 % tail mass; at 100,000 they are sqrt(2)
    smaller, so on ALR coordinates the check sees, with power 0.9, a mean off by 1.1 % of a
    posterior sd, a variance off by 1.7 % and a tail mass off by 0.0035 (0.05 -> 0.0535).
    The NUTS leaf log weight times 0.9 (benchmarks/mutation_tests.py) moved the variances by
    4.3-4.7 MCSE at 50,000 draws and 4.5-5.3 at 100,000 (one seed each): caught on both, but
    a bias that small sits near the check's edge (power about 0.8).  The mean acceptance
    statistic must lie within 0.15 of the target (it was 0.91 for a target of 0.8): dual
    averaging that does not adapt misses it."""
    tally = MECH.tally_from_report_counts(REPORTS)
    draws = 100_000 if coordinates == "alr" else 50_000
    out = hmc.sample(tally, ALPHA, draws=draws, chains=4, random_seed=36,
                     coordinates=coordinates)  # fmt: skip
    accept = float(out.sample_stats["acceptance_rate"].mean())
    assert abs(accept - out.info["target_accept"]) < 0.15, accept
    z = z_scores(out.theta, reference)
    bad = {k: round(v[0], 2) for k, v in z.items() if abs(v[0]) >= Z_MAX}
    assert not bad, (bad, {k: round(v[0], 2) for k, v in z.items()})


def test_laplace_importance_weights_move_the_mean_to_the_exact_one():
    """method="laplace" on 12 reports of GRR (K = 3, eps = 3), where the Laplace approximation
    of the likelihood is off: the unweighted mean of theta_0 and theta_2 is 15 and 18 standard
    errors from the exact mean (committed seed), the PSIS-weighted mean within 4 (it was within
    1.3; Pareto k 0.22).  The standard error is the self-normalised importance sampling one,
    ``sqrt(sum_i w_i^2 (theta_i - m)^2)``, times ``sqrt(N / ESS)`` for the chains'
    autocorrelation, about 0.01 posterior sd here, so a weighted mean off by 0.05 sd fails;
    reversed weights (surrogate over exact) put it 43 standard errors off."""
    mech, reports = bayesldp.GRR(3, 3.0), np.array([8, 1, 3])
    reference = Mixture.grr(mech, reports, ALPHA)
    with pytest.warns(UserWarning, match="differs from the draws' mean"):  # it is off: it says so
        out = laplace.sample(mech.tally_from_report_counts(reports), ALPHA, draws=5000, chains=4,
                             random_seed=36)  # fmt: skip
    assert out.info["pareto_k"] < 0.7
    w = np.exp(out.sample_stats["log_weight"]).ravel()
    flat = out.theta.reshape(-1, 3)
    is_mean = w @ flat
    ess = np.array([float(import_arviz().ess(out.theta[:, :, x], method="mean"))
                    for x in range(3)])  # fmt: skip
    se = np.sqrt((w[:, None] ** 2 * (flat - is_mean) ** 2).sum(axis=0) * flat.shape[0] / ess)
    plain_se = flat.std(axis=0) / np.sqrt(ess)
    z_plain = (flat.mean(axis=0) - reference.mean) / plain_se
    z_is = (is_mean - reference.mean) / se
    assert np.max(np.abs(z_plain)) > 2 * Z_MAX, z_plain  # the weights have work to do
    assert np.all(np.abs(z_is) < Z_MAX), (z_is, z_plain)


# ------------------------------------------------------------------ the exact mixture itself
def simplex_rule(alpha, n_nodes):
    """Nodes (N, 3) and weights (N,) on the 2-simplex with ``sum_i w_i f(theta_i) =
    E_{Dir(alpha)} f`` exactly for every polynomial ``f`` of degree below ``2 n_nodes`` in each
    of ``u = theta_0`` and ``v = theta_1 / (1 - theta_0)``: Gauss-Jacobi in ``u`` (weight
    ``u^(a_0 - 1) (1 - u)^(a_1 + a_2 - 1)``, the Jacobian ``1 - u`` included) times
    Gauss-Jacobi in ``v`` (weight ``v^(a_1 - 1) (1 - v)^(a_2 - 1)``), so the Dirichlet's
    singular corners cost nothing.  A likelihood of ``n`` reports is a polynomial of degree
    ``n`` in ``theta``, so of degree at most ``n`` in each of ``u`` and ``v``."""
    a0, a1, a2 = alpha
    xu, wu = roots_jacobi(n_nodes, a1 + a2 - 1, a0 - 1)
    xv, wv = roots_jacobi(n_nodes, a2 - 1, a1 - 1)
    u, v = np.meshgrid((1 + xu) / 2, (1 + xv) / 2, indexing="ij")
    theta = np.stack([u, (1 - u) * v, (1 - u) * (1 - v)], axis=-1).reshape(-1, 3)
    w = np.outer(wu, wv).ravel()
    return theta, w / w.sum()


def _rrrr(subset, eps=1.0, eps1=0.8, k=3):
    return bayesldp.RRRR(k=k, epsilon=eps, subset=subset, eps1=eps1)


SMALL_TALLIES = {
    "rrrr": lambda: _rrrr([0]).simulate_tally(np.array([12, 6, 4]), rng=1),
    "rrrr-two-subsets": lambda: (_rrrr([0]).simulate_tally(np.array([7, 4, 3]), rng=2)
                                 + _rrrr([1, 2]).simulate_tally(np.array([6, 3, 3]), rng=3)),
    "oue": lambda: bayesldp.OUE(3, 1.0).simulate_tally(np.array([6, 3, 2]), rng=4),
}  # fmt: skip


@pytest.mark.parametrize("strategy", ["residual", "latent"])
@pytest.mark.parametrize("name", sorted(SMALL_TALLIES))
def test_exact_mixture_matches_gauss_jacobi_quadrature(name, strategy):
    """:func:`bayesldp.bayes.exact.exact_posterior` on small RRRR tallies (one subset, and two
    subsets merged as an adaptive survey's are) and an OUE tally (rows per distinct support
    set), K = 3, prior Dirichlet(0.7, 1.3, 2): the evidence, the mean, the covariance and the
    third moments E[theta_x^3] against :func:`simplex_rule` applied to ``tally.loglik`` (a
    quadrature exact for these polynomial integrands, independent of the expansion: no
    latent counts, no merging of monomials).  Deterministic: a relative error of 1e-9 in a
    moment (of 1e-9 in the evidence) fails, so any change to the component weights, their
    exponents or the moment formulas does."""
    tally = SMALL_TALLIES[name]()
    alpha = np.array([0.7, 1.3, 2.0])
    post = exact.exact_posterior(tally, alpha, strategy=strategy)
    theta, w = simplex_rule(alpha, tally.n // 2 + 6)
    loglik = tally.loglik(theta)
    top = loglik.max()
    lik = w * np.exp(loglik - top)
    evidence = lik.sum()
    assert post.log_marginal_likelihood == pytest.approx(top + math.log(evidence), abs=1e-9)
    p = lik / evidence
    mean = p @ theta
    np.testing.assert_allclose(post.mean, mean, rtol=1e-10)
    cov = (theta * p[:, None]).T @ theta - np.outer(mean, mean)
    np.testing.assert_allclose(post.cov, cov, rtol=1e-9, atol=1e-14)
    comps = alpha + post.exponents
    tot = comps.sum(axis=1, keepdims=True)
    third = np.exp(post.log_weights) @ (comps * (comps + 1) * (comps + 2)
                                        / (tot * (tot + 1) * (tot + 2)))  # fmt: skip
    np.testing.assert_allclose(third, p @ theta**3, rtol=1e-9)
    pts = np.array([[0.5, 0.2, 0.3], [0.1, 0.1, 0.8]])
    want = dirichlet.logpdf(pts.T, alpha) + tally.loglik(pts) - post.log_marginal_likelihood
    np.testing.assert_allclose(post.logpdf(pts), want, rtol=1e-10)


# ------------------------------------------------------------ the nested and joint schemes
def nested_rrrr_tally():
    """RRRR, K = 3, S = {0}, eps = 2, eps1 = 1.9 (so eps2 = 0.21): the reports measure
    categories 1 and 2 mostly through their total, and hmc nests them."""
    return _rrrr([0], eps=2.0, eps1=1.9).simulate_tally(np.array([30, 20, 15]), rng=3)


def exact_reference(tally, alpha):
    post = exact.exact_posterior(tally, alpha)
    return Mixture(np.exp(post.log_weights), alpha + post.exponents)


def test_nested_scheme_matches_the_exact_posterior():
    """hmc on nested log-ratios (chosen by ``coordinates="auto"`` itself, no patching) on
    :func:`nested_rrrr_tally` under Dirichlet(0.8, 1, 1.5), 4 chains x 25,000 draws, against
    the exact mixture (checked against quadrature above): 12 z-scores within the Bonferroni
    bound for a family-wise false alarm of 1e-3 (3.94; largest |z| 1.2 on the committed
    seed).  MCSEs there: 0.33 % of a posterior sd for the means, 0.5-0.65 % of each variance,
    0.0008-0.001 for a 5 % tail mass, so with power 0.9 (bias of (3.94 + 1.28) MCSE) the
    check sees a mean off by 1.8 % of a posterior sd, a variance off by 3.4 % and a tail mass
    off by 0.005."""
    tally = nested_rrrr_tally()
    alpha = np.array([0.8, 1.0, 1.5])
    out = hmc.sample(tally, alpha, draws=25_000, chains=4, random_seed=36)
    assert out.info["coordinates"] == "nested" and out.info["nested_group"] == [1, 2]
    assert_no_z_beyond(z_scores(out.theta, exact_reference(tally, alpha)), z_limit(12))


def adaptive_reference(tally, prior):
    """The posterior of ``theta`` and ``log a`` under ``theta | a ~ Dirichlet(a 1)``,
    ``log a ~ N(prior.log_a_mean, prior.log_a_sd^2)`` (the joint scheme's continuous prior):
    trapezoidal quadrature in ``log a`` (step 0.1 sd over +-6 prior sd: the integrand is smooth,
    the posterior sd of ``log a`` about 1.5-1.9 here, so the rule's error is far below the
    Monte Carlo one; the prior mass beyond 6 sd is 2e-9) of the exact mixture given ``a``.
    The mixture's coefficients ``C_m`` are read once from the exact posterior under
    Dirichlet(1) and re-weighted for every ``a``: ``w_m(a) ∝ C_m B(a + m) / B(a)``."""
    k = tally.k
    post = exact.exact_posterior(tally, 1.0)
    m = post.exponents
    size = m.sum(axis=1)
    log_c = post.log_weights - (gammaln(1 + m).sum(axis=1) - gammaln(k + size) + gammaln(k))
    # the grid and its normal weights written here, not read from AdaptiveDirichlet (whose
    # weights are among the mutants this reference must catch)
    z = np.arange(-60, 61) * 0.1  # +-6 prior sd, step 0.1 sd
    log_a = prior.log_a_mean + prior.log_a_sd * z
    a = np.exp(log_a)[:, None]
    logw = (log_c + gammaln(a[:, :, None] + m).sum(axis=2) - gammaln(k * a + size)
            - k * gammaln(a) + gammaln(k * a))  # fmt: skip  (nodes, components)
    logw += -0.5 * z[:, None] ** 2  # trapezoid weights are equal inside; the ends carry 2e-9
    logw -= logw.max()
    w = np.exp(logw)
    p_a = w.sum(axis=1) / w.sum()
    ref = Mixture(w.ravel(), (a[:, :, None] + m).reshape(-1, k))
    log_a_mean = float(p_a @ log_a)
    ref.log_a = (log_a_mean, float(p_a @ (log_a - log_a_mean) ** 2))
    return ref


@pytest.mark.parametrize("case", ["grr", "rrrr-nested"])
def test_joint_scheme_matches_the_quadrature_over_a(case):
    """``fit(prior="adaptive")``'s default sampler, hmc's joint scheme (NUTS on ``(u, log a)``;
    on the RRRR tally on nested log-ratios), 4 chains x 15,000 draws, against
    :func:`adaptive_reference`: 12 z-scores of theta (means, variances, 5 % tail masses) and
    the mean and variance of ``log a``, 14 checks within 3.97 (family-wise 1e-3; largest |z|
    1.7 on the committed seed).  MCSEs there: theta's means 0.5-0.9 % of a posterior sd,
    variances 0.7-2.4 %, tail masses 0.001-0.003, E[log a] 0.7-0.8 % of its posterior sd,
    Var[log a] 1-1.4 %; so the check sees, with power 0.9 (bias of 5.25 MCSE), a mean off by
    4.7 % of a posterior sd, a variance off by 13 % (4 % for the best measured), a tail mass
    off by 0.017, E[log a] off by 4.4 % of its sd and Var[log a] off by 7.4 %."""
    az = import_arviz()
    if case == "grr":
        tally = MECH.tally_from_report_counts(REPORTS)
    else:
        tally = nested_rrrr_tally()
    prior = bayesldp.bayes.AdaptiveDirichlet(3)
    out = hmc.sample(tally, prior, draws=15_000, chains=4, random_seed=36)
    assert out.info["adaptive_scheme"] == "joint"
    assert out.info["coordinates"] == ("alr" if case == "grr" else "nested")
    ref = adaptive_reference(tally, prior)
    z = z_scores(out.theta, ref)
    log_a = np.log(out.extra["a"])
    for name, g, want in [("log a mean", log_a, ref.log_a[0]),
                          ("log a var", (log_a - ref.log_a[0]) ** 2, ref.log_a[1])]:  # fmt: skip
        mcse = g.std() / math.sqrt(float(az.ess(g, method="mean")))
        z[name, 0] = ((g.mean() - want) / mcse, mcse)
    assert_no_z_beyond(z, z_limit(14))


# ------------------------------------------------------- independence MH from the prior
@pytest.mark.parametrize("prior", ["dirichlet", "adaptive"])
def test_prior_mh_matches_the_exact_posterior(reference, prior):
    """:func:`bayesldp.bayes.prior_mh.sample` (independence Metropolis-Hastings with the prior
    as proposal, what ``fit``'s default runs where the data are weak) on the enumerated GRR
    tally, 4 chains x 25,000 draws (about 0.5 s): under Dirichlet(1, 1.5, 0.7) against the
    exact mixture, 12 z-scores within 3.94; under the adaptive prior against
    :func:`adaptive_reference`, 12 z-scores of theta and the mean and variance of ``log a``
    within 3.97 (family-wise 1e-3 each).  Rule on these draws' own 4,000: Pareto k -0.50 and
    -0.90, efficiency 0.37 and 0.44 (thin 8 and 7, acceptance 0.37 and 0.42).  Largest |z|
    1.35, 1.39, 1.34 on seeds 36, 1, 2 (Dirichlet) and 2.1 (adaptive, seed 36); MCSEs 0.0005-
    0.0007 for the means (0.4 % of a posterior sd) and 0.0007-0.0008 for a tail mass, so the
    check sees, with power 0.9, a mean off by 2 % of a posterior sd or a tail mass off by 0.004.
    An acceptance ratio with the prior's density left in (``L p`` over ``L p``, as a random
    walk's) samples the posterior times the prior: its means were 17, 125 and 142 MCSEs off
    (scratch, Dirichlet, seed 36)."""
    az = import_arviz()
    tally = MECH.tally_from_report_counts(REPORTS)
    if prior == "dirichlet":
        out = prior_mh.sample(tally, ALPHA, draws=25_000, chains=4, random_seed=36)
        assert_no_z_beyond(z_scores(out.theta, reference), z_limit(12))
        return
    adaptive = bayesldp.bayes.AdaptiveDirichlet(3)
    out = prior_mh.sample(tally, adaptive, draws=25_000, chains=4, random_seed=36)
    ref = adaptive_reference(tally, adaptive)
    z = z_scores(out.theta, ref)
    log_a = np.log(out.extra["a"])
    for name, g, want in [("log a mean", log_a, ref.log_a[0]),
                          ("log a var", (log_a - ref.log_a[0]) ** 2, ref.log_a[1])]:  # fmt: skip
        mcse = g.std() / math.sqrt(float(az.ess(g, method="mean")))
        z[name, 0] = ((g.mean() - want) / mcse, mcse)
    assert_no_z_beyond(z, z_limit(14))


# ------------------------------------------------------------------------ the smoothness prior
class ImportanceReference:
    """A posterior by self-normalised importance sampling from the prior: draws ``theta_i``
    with weights ``w_i ∝ exp(loglik(theta_i))``; each functional's expectation is ``sum_i w_i
    g_i`` with standard error ``sqrt(sum_i w_i^2 (g_i - E g)^2)``, included in the z-scores."""

    def __init__(self, theta, loglik, extra=None):
        w = np.exp(loglik - loglik.max())
        self.w, self.theta, self.extra = w / w.sum(), theta, extra
        self.ess = 1.0 / float(self.w @ self.w)
        self.mean = self.w @ theta

    def expect(self, g):
        value = float(self.w @ g)
        return value, float(np.sqrt(self.w**2 @ (g - value) ** 2))

    def quantile(self, values, prob):
        order = np.argsort(values)
        return float(values[order][np.searchsorted(np.cumsum(self.w[order]), prob)])

    def functionals(self, x):
        t = self.theta[:, x]
        m = self.mean[x]
        lo, hi = self.quantile(t, 0.05), self.quantile(t, 0.95)
        out = []
        for name, fn in [("mean", lambda t: t), ("var", lambda t: (t - m) ** 2),
                         ("q05", lambda t: (t <= lo).astype(float)),
                         ("q95", lambda t: (t >= hi).astype(float))]:  # fmt: skip
            out.append((name, fn, *self.expect(fn(t))))
        return out


def smooth_prior_draws(k, prior, size, gen):
    """``theta`` and ``log lambda`` from :class:`~bayesldp.bayes.SmoothDensity`'s definition,
    written out here (not through its code): ``f = b (t - 1/2) + E y``, ``t`` the bins'
    centres on [0, 1], ``E`` the eigenvectors of ``D^T D`` (``D`` the second differences) with
    non-zero eigenvalues ``mu``, ``y_j ~ N(0, lambda^2 / (K^3 mu_j))``, ``b ~ N(0, s_b^2)``,
    ``log lambda ~ N(mu_0, sigma_0^2)``, ``theta = softmax(f)``."""
    d = np.diff(np.eye(k), n=2, axis=0)
    mu, vecs = np.linalg.eigh(d.T @ d)
    modes, mu = vecs[:, mu > 1e-9], mu[mu > 1e-9]
    line = (np.arange(k) + 0.5) / k - 0.5
    log_lam = prior.log_scale_mean + prior.log_scale_sd * gen.standard_normal(size)
    b = prior.slope_sd * gen.standard_normal(size)
    y = np.exp(log_lam)[:, None] / np.sqrt(k**3 * mu) * gen.standard_normal((size, mu.size))
    f = b[:, None] * line + y @ modes.T
    f -= f.max(axis=1, keepdims=True)
    theta = np.exp(f)
    return theta / theta.sum(axis=1, keepdims=True), log_lam


SMOOTH_CASES = {  # name: (reports, prior keywords)
    "narrow prior, 90 reports": ((40, 30, 20), {"log_scale_sd": 1.0, "slope_sd": 3.0}),
    "default prior, 28 reports": ((12, 9, 7), {}),
    "default prior, 90 reports": ((40, 30, 20), {}),
    "default prior, 90 reports, last bin largest": ((25, 25, 40), {}),
    "default prior, 90 reports, skewed": ((60, 20, 10), {}),
}
#: a known fault: under the default prior (slope sd 100) the posterior sits on a
#: plateau at the vertex theta ~ (1, 0, 0), where the likelihood is flat in both log-ratios:
#: slope and curvature sds of 60-140 (log theta_1's median -35) against the likelihood's
#: exponential walls, 1.5-3 units wide.  NUTS diverges on 2.8-3.6 % of its transitions
#: (seeds 1 and 2, benchmarks/investigations/results/smooth_weights_rule.md; fit warns), in every
#: range of lambda and of the slope, at a rate that grows with the adapted step size (1.7 % at 0.053
#: to 7.1 % at 0.166 across chains, a scratch run); the pilot already sets the curvature's weight to
#: 1 (fully non-centred), and the mean and median rules diverge as often (4.0 %, 3.6 %). Below this
#: test's 0.2 % only at a thirtieth of the adapted step (0.04-0.07 % at 906-1,342 leapfrog steps per
#: draw); PyMC's NUTS diverges as often, more with a sinh map of the slope
#: (benchmarks/investigations/results/smooth_vertex_steps.md); fit's warning suggests
#: target_accept=0.99; fit's default samples this case by independence MH from the prior instead
#: (sampler "fit" below). (150, 100, 50) is another fault, a funnel between lambda and the centred
#: curvature at small lambda (3.4 % divergent); its importance reference is too weak for this test
#: (ESS 10,089)
SMOOTH_KNOWN_FAULTS = {"default prior, 90 reports, skewed"}


#: the method fit(method="auto") takes on each case (seed 36): independence MH from the prior
#: where 4,000 prior draws weighted by the likelihood pass :func:`bayesldp.bayes.prior_mh.check`
#: (Pareto k, efficiency: -0.87, 0.15; -0.41, 0.42; 1.19, 0.05; 0.35, 0.17; -inf, 0.43)
SMOOTH_FIT_METHODS = {
    "narrow prior, 90 reports": "prior_mh",
    "default prior, 28 reports": "prior_mh",
    "default prior, 90 reports": "hmc",
    "default prior, 90 reports, last bin largest": "prior_mh",
    "default prior, 90 reports, skewed": "prior_mh",
}


@functools.lru_cache(maxsize=1)
def smooth_reference(case):
    """The tally, the prior, the importance reference and its ``log lambda`` draws of ``case``
    (cached: the hmc and fit variants of a case share it)."""
    reports, keywords = SMOOTH_CASES[case]
    tally = MECH.tally_from_report_counts(np.array(reports))
    prior = bayesldp.bayes.SmoothDensity(3, **keywords)
    theta, log_lam = smooth_prior_draws(3, prior, 2_000_000, np.random.default_rng(36))
    return tally, prior, ImportanceReference(theta, tally.loglik(theta)), log_lam


@pytest.mark.parametrize(("case", "sampler"), [
    pytest.param(c, s, marks=pytest.mark.xfail(strict=True, reason="NUTS diverges at the vertex"))
    if s == "hmc" and c in SMOOTH_KNOWN_FAULTS else (c, s)
    for c in SMOOTH_CASES for s in ("hmc", "fit")
])  # fmt: skip
def test_smoothness_prior_matches_importance_sampling_from_the_prior(case, sampler):
    """hmc under :class:`~bayesldp.bayes.SmoothDensity` (its RW2 coefficients, slope and
    ``log lambda``), K = 3 bins, GRR reports at eps = 1, 4 chains x 10,000 draws, against
    self-normalised importance sampling from the prior (2,000,000 prior draws written out
    from the prior's definition, :func:`smooth_prior_draws`; importance ESS 94,000-840,000):
    theta's means, variances and 5 % tail masses and E[log lambda], 13 checks within 3.97
    (family-wise 1e-3 per case), each z on the combined standard error of the two estimates.

    Three cases: 90 reports under a narrow prior (``slope_sd = 3``, ``log lambda ~ N(log 30,
    1)``), and the default prior (``slope_sd = 100``, ``log lambda ~ N(log 30, 2.5^2)``) on
    28 and on 90 reports, where the slope's wide prior puts much of the posterior near a
    vertex of the simplex and the rest where the data fix the coefficient: the case the
    pilot chain of :func:`bayesldp.bayes.hmc.smooth._smooth_target` is for (weights from the EMS
    estimate alone: 15 % divergent and E[log lambda] 2.80 against 3.05 on 28 reports).  A
    fourth, (25, 25, 40), puts the largest bin last (weights from the pilot's mean information
    instead of its 10 % quantile: 1.4 % and 2.0 % divergent and E[log lambda] 4.8 and 3.5
    errors off on seeds 1 and 2, scratch; on this seed the mean rule passes too).  A fifth,
    (60, 20, 10), is a known fault of NUTS, expected to fail under ``sampler="hmc"``
    (:data:`SMOOTH_KNOWN_FAULTS`).

    ``sampler="fit"`` runs what ``bayesldp.fit`` runs by default (method "auto"): where the
    data are weak (:func:`bayesldp.bayes.prior_mh.check`, :data:`SMOOTH_FIT_METHODS`) the
    independence Metropolis-Hastings sampler with the prior as proposal, 4 chains x 40,000
    draws (about 1 s; thin 7-22 proposals per draw, acceptance 0.15-0.43, no divergences by
    construction; bulk ESS of theta 103,000-152,000, largest |z| 2.3, 2.4, 3.0 and 1.1 on the
    narrow, 28-report, last-bin and skewed cases, committed seed), else NUTS, whose draws are
    the ``"hmc"`` variant's (only fit's choice is checked there).  At 10,000 draws the
    28-report case's Var theta_1 was 4.4 errors off on the committed seed (a heavy-tailed
    functional: theta_1's mean 0.048, sd 0.14); over seeds 0-29 the largest |z| was 3.2 and
    each z's sd 0.94-1.22, so the fit variant takes 40,000 draws, which cost 0.3 s more.

    Standard errors on the committed seed, narrow prior / default prior (both tallies): 0.6-0.8 %
    / 0.9-2.4 % of a posterior sd for the means, 1.2-1.5 % / 0.6-6.9 % of each variance,
    0.0012-0.003 / 0.0016-0.0058 for a tail mass, 0.9 % / 0.8-1.6 % of its sd for
    E[log lambda] (largest |z| 1.2 / 1.9; 0.03 % and 0.09 % of the default-prior transitions
    diverged).  With power 0.9 (5.25 standard errors) the narrow case sees a mean off by 4 % of
    a posterior sd, a variance off by 8 % and E[log lambda] off by 5 % of its sd; the default
    ones a mean off by 5-13 % of a sd, a variance off by 3-36 % (the smallest category's is the
    least resolved) and E[log lambda] off by 4-8 % of its sd."""
    tally, prior, ref, log_lam = smooth_reference(case)
    assert ref.ess > 50_000, ref.ess
    if sampler == "hmc":
        out = hmc.sample(tally, prior, draws=10_000, chains=4, random_seed=36)
        theta, lam, diverging = out.theta, out.extra["smoothness"], out.sample_stats["diverging"]
    else:  # fit's default, method="auto": NUTS, or the prior as proposal where the data are weak
        chosen, _ = fit_module._weak_data_method(tally, prior, 36, {}, None)
        assert chosen == SMOOTH_FIT_METHODS[case]
        if chosen == "hmc":  # fit's draws are the hmc variant's, bit for bit
            return
        post = bayesldp.fit(tally, 40_000, chains=4, prior=prior, random_seed=36,
                            compute_convergence_checks=False)  # fmt: skip
        assert post.posterior.attrs["method"] == SMOOTH_FIT_METHODS[case]
        theta, lam = post.posterior["theta"].values, post.posterior["smoothness"].values
        diverging = post.sample_stats["diverging"].values
    assert_log_weight_draws_match(theta, lam, diverging, ref, log_lam)


def assert_log_weight_draws_match(theta, lam, diverging, ref, log_lam):
    """The checks of a prior on the log-weights' draws (``theta``, ``lambda``, divergences)
    against the importance reference ``ref`` with its ``log lambda`` draws: theta's means,
    variances and tail masses and E[log lambda], 13 z-scores within :func:`z_limit`; E[log
    lambda]'s ESS above 1,000 and divergences below a 0.2 % rate."""
    az = import_arviz()
    z = z_scores(theta, ref)
    g = np.log(lam)
    want, se = ref.expect(log_lam)
    ess = float(az.ess(g, method="mean"))
    # a chain stuck in a funnel has a wide MCSE that hides its bias from the z-scores: on
    # the EMS weights E[log lambda]'s ESS was 8 of 20,000 draws (28 reports, smoothness
    # prior); 4,200-14,400 of these 40,000 on the committed seed
    assert ess > 1000, ess
    # divergent transitions flag a region the sampler cannot enter: 0.03 % and 0.09 % of them
    # on the smoothness prior's default cases (committed seed); weights from the pilot's mean
    # information instead of its low quantile diverged on 1.2-3.6 % (90 reports, scratch runs)
    assert_divergence_rate(diverging, rate=2e-3)
    mcse = g.std() / math.sqrt(ess)
    z["log lambda", 0] = ((g.mean() - want) / math.hypot(mcse, se), mcse)
    assert_no_z_beyond(z, z_limit(13))


def test_smoothness_pilot_weights_keep_divergences_rare_over_pilot_seeds():
    """The pilot chain (:func:`bayesldp.bayes.hmc.smooth.pilot_information`) is short, so its
    weights vary with its seed; the 10 % quantile of the information over its draws serves the
    less informed tenth of the posterior on every seed, where the mean information serves the
    bulk and leaves a funnel in the rest on some.  (25, 25, 40) under the default prior, the
    seeds 1 and 2 (the reference case above runs 36), 4 chains x 10,000 draws each: divergent
    transitions pooled over the 80,000 draws below the count a 0.2 % rate exceeds with
    probability 1e-4 (207).  On these seeds the 10 % quantile diverged on 0.07 % and 0.13 %,
    the mean information on 1.36 % and 2.02 %
    (benchmarks/investigations/results/smooth_weights_rule.md):
    the check sees a rule that diverges on more than about 0.3 % of the draws."""
    tally = MECH.tally_from_report_counts(np.array([25, 25, 40]))
    prior = bayesldp.bayes.SmoothDensity(3)
    runs = [hmc.sample(tally, prior, draws=10_000, chains=4, random_seed=seed)
            for seed in (1, 2)]  # fmt: skip
    assert_divergence_rate(np.concatenate([r.sample_stats["diverging"] for r in runs]), 2e-3)


LOGISTIC_NORMAL_CASES = {  # name: GRR report counts at eps = 1, K = 3
    "90 reports": (40, 30, 20),
    "28 reports": (12, 9, 7),
    "90 reports, skewed": (60, 20, 10),
    "360 reports": (160, 120, 80),
}


@functools.lru_cache(maxsize=1)
def logistic_normal_reference(case):
    """The tally, the importance reference and its ``log lambda`` draws under the default
    ``LogisticNormal(3)``, the prior written out from its definition (not through its code):
    ``log lambda ~ N(0, 1)``, ``y_x ~ N(0, lambda^2)`` i.i.d., ``theta = softmax(y)``."""
    tally = MECH.tally_from_report_counts(np.array(LOGISTIC_NORMAL_CASES[case]))
    gen = np.random.default_rng(56)
    log_lam = gen.standard_normal(2_000_000)
    y = np.exp(log_lam)[:, None] * gen.standard_normal((log_lam.size, 3))
    theta = np.exp(y - y.max(axis=1, keepdims=True))
    theta /= theta.sum(axis=1, keepdims=True)
    return tally, ImportanceReference(theta, tally.loglik(theta)), log_lam


@pytest.mark.parametrize(("case", "sampler"), [
    (c, s) for c in LOGISTIC_NORMAL_CASES for s in ("hmc", "fit")
])  # fmt: skip
def test_logistic_normal_prior_matches_importance_sampling_from_the_prior(case, sampler):
    """:class:`~bayesldp.bayes.LogisticNormal` (default, K = 3), GRR reports at eps = 1:
    bayesldp's NUTS on its coordinates (4 chains x 10,000 draws) and what ``fit`` runs by
    default (method "auto": NUTS, or the prior as proposal where the data are weak; 4 x
    40,000 draws there) against self-normalised importance sampling from the prior (2,000,000
    draws): theta's means, variances and 5 % tail masses and E[log lambda], 13 checks within
    3.97 (family-wise 1e-3 per case), each z on the combined standard error of the two
    estimates, as the smoothness prior's test above; the same limits on ESS and divergences."""
    tally, ref, log_lam = logistic_normal_reference(case)
    assert ref.ess > 50_000, ref.ess
    prior = bayesldp.LogisticNormal(3)
    if sampler == "hmc":
        out = hmc.sample(tally, prior, draws=10_000, chains=4, random_seed=56)
        theta, lam, diverging = out.theta, out.extra["spread"], out.sample_stats["diverging"]
    else:
        chosen, _ = fit_module._weak_data_method(tally, prior, 56, {}, None)
        if chosen == "hmc":  # fit's draws are the hmc variant's, bit for bit
            return
        post = bayesldp.fit(tally, 40_000, chains=4, prior=prior, random_seed=56,
                            compute_convergence_checks=False)  # fmt: skip
        theta, lam = post.posterior["theta"].values, post.posterior["spread"].values
        diverging = post.sample_stats["diverging"].values
    assert_log_weight_draws_match(theta, lam, diverging, ref, log_lam)


# ------------------------------------------------------------------------------------ SGLD
def test_sgld_is_within_its_documented_bias_of_the_exact_posterior(reference):
    """SGLD is approximate: :func:`bayesldp.bayes.sgld.sample` promises (its docstring,
    measured there) posterior means within 0.035 posterior sd and sds 1-5 % too wide at its
    default step.  Against the enumerated GRR posterior (4 chains x 5,000 draws): each mean
    within 0.05 posterior sd plus the z bound of MCSEs, each variance between 0.97 and 1.12
    times the exact one (sd -1.5 % to +6 %) plus the z bound, 6 checks within 3.59
    (family-wise 1e-3).  On the committed seed the means were 0.013-0.036 sd off and the
    variance ratios 1.016-1.031, with MCSEs of 1.3-1.5 % of a posterior sd and 1.5-1.8 % of a
    variance: with power 0.9 the check sees a mean off by 0.05 + 4.87 x 0.015 = 0.12
    posterior sd, or a variance ratio below 0.885 or above 1.21 (a 10 % error in the
    posterior sd); it cannot see the documented bias itself."""
    az = import_arviz()
    tally = MECH.tally_from_report_counts(REPORTS)
    out = sgld.sample(tally, ALPHA, draws=5000, chains=4, random_seed=36)
    sd = np.sqrt(reference.var)
    z, z_max = {}, z_limit(6)
    for x in range(3):
        t = out.theta[:, :, x]
        for name, g, lo, hi in [
            ("mean", t, reference.mean[x] - 0.05 * sd[x], reference.mean[x] + 0.05 * sd[x]),
            ("var", (t - reference.mean[x]) ** 2, 0.97 * reference.var[x],
             1.12 * reference.var[x]),
        ]:  # fmt: skip
            mcse = g.std() / math.sqrt(float(az.ess(g, method="mean")))
            z[name, x] = (max(g.mean() - hi, lo - g.mean(), 0.0) / mcse, mcse / sd[x] ** (
                1 if name == "mean" else 2))
    assert_no_z_beyond(z, z_max)


# ------------------------------------------------------------------- the survey's posterior
def test_survey_posterior_matches_the_exact_mixture_of_its_reports():
    """An adaptive survey (K = 3, eps = 1, 40 users, a subset chosen per user from posterior
    draws by Aydın and Yıldırım 2025's U4, so that the subsets vary: the default lookahead rule
    keeps GRR at
    40 users) leaves a tally of RRRR rows under several subsets (11 distinct rows); its
    posterior (``fit`` of that tally, hmc, fixed Dirichlet(1) prior, 4 chains x 20,000 draws)
    against the exact mixture of the same tally (checked against quadrature above): 12 z-scores
    within 3.94 (family-wise 1e-3; largest |z| 2.1 on the committed seed).  MCSEs there: 0.5 % of a
    posterior sd for the means, 0.7-0.75 % of each variance, 0.0009-0.0013 for a tail mass:
    with power 0.9 the check sees a mean off by 2.6 % of a posterior sd, a variance off by
    3.9 % and a tail mass off by 0.007."""
    x = np.random.default_rng(1).choice(3, size=40, p=[0.6, 0.3, 0.1])
    survey = AdaptiveSurvey(3, 1.0, prior=1.0, utility="tv", random_seed=3, fit_method="hmc")
    survey.simulate(x)
    tally = survey.tally()
    assert tally.n_rows > 3  # reports under more than one subset
    idata = survey.posterior(draws=20_000, chains=4)
    theta = idata.posterior["theta"].values
    assert_no_z_beyond(z_scores(theta, exact_reference(tally, np.ones(3))), z_limit(12))
