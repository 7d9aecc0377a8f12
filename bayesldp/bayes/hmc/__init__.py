"""bayesldp's default posterior sampler: NUTS on log-ratio coordinates, compiled with numba.

The posterior of a population distribution ``theta`` given a :class:`~bayesldp.Tally` and a
Dirichlet(``alpha``) prior,

.. math:: p(\\theta \\mid \\text{tally}) \\propto \\prod_u (L_u \\cdot \\theta)^{c_u}
          \\prod_x \\theta_x^{\\alpha_x - 1},

is smooth and of dimension ``K - 1``; its log-density and gradient cost one pass over the
distinct rows (``L theta`` and ``L^T w``).  This package samples it with the No-U-Turn sampler
(Hoffman and Gelman, JMLR 2014) in the multinomial form used by Stan and PyMC (Betancourt,
arXiv:1701.02434, appendix A):

* Coordinates: additive log-ratios ``z_x = log(theta_x / theta_{K-1})``, ``x < K - 1``, so
  ``theta = softmax([z, 0])``.  The Jacobian of ``z -> theta`` is ``prod_x theta_x``, hence the
  log-density on ``z`` is

  .. math:: \\log p(z) = \\sum_u c_u \\log(L_u \\cdot \\theta) + \\sum_x \\alpha_x \\log \\theta_x
            + \\log\\Gamma(A) - \\sum_x \\log\\Gamma(\\alpha_x),\\quad A = \\sum_x \\alpha_x,

  with gradient ``theta_x (g_x - n - A) + alpha_x``, ``g = L^T (c / L theta)``, ``n = sum c``.
* Speed: one transition (tree building, leapfrog steps, log-density and gradient) is one call of
  a numba-compiled kernel (``cache=True``: compiled once per installation, a few seconds, with a
  one-line notice, then loaded from disk; only the specialisation a fit needs is compiled: the
  joint scheme's and the adaptive prior's densities only for them); warm-up bookkeeping and the
  step-size heuristic are Python around compiled calls.  Chains run on ``cores`` threads (the
  kernels release the GIL; about three quarters of a chain's time is inside them on GRR,
  K = 20), each with its own child Generator (``Generator.spawn``, drawn before any chain
  starts) and a splitmix64 stream for the uniforms, so the draws do not depend on ``cores``.
  A tqdm bar per chain advances between transitions.

The modules (each docstring has its part's details and measurements):

* :mod:`~bayesldp.bayes.hmc.targets` -- the compiled-target base, the ALR target and the
  posterior mode (Newton's method) whose Laplace covariance is the first metric;
* :mod:`~bayesldp.bayes.hmc.densities` -- the compiled log-densities and gradients of every
  target, and ``_logp_grad``, which dispatches among them;
* :mod:`~bayesldp.bayes.hmc.tree` -- the leapfrog step and one multinomial NUTS transition;
* :mod:`~bayesldp.bayes.hmc.adaptation` -- warm-up: dual averaging, Stan's metric windows, the
  momentum factor, the initial step size and the default ``target_accept``;
* :mod:`~bayesldp.bayes.hmc.nested` -- nested log-ratios, where the likelihood measures a
  group of categories through its total;
* :mod:`~bayesldp.bayes.hmc.gamma` -- log-gamma coordinates (a fixed prior at large K);
* :mod:`~bayesldp.bayes.hmc.joint` -- the adaptive prior's joint scheme, ``(u, log a)``;
* :mod:`~bayesldp.bayes.hmc.smooth` -- the smoothness prior's target and its pilot chain;
* :mod:`~bayesldp.bayes.hmc.walk` -- the random walk across rounds (:func:`bayesldp.fit_rounds`),
  its compiled density in :mod:`~bayesldp.bayes.hmc.walk_density`;
* :mod:`~bayesldp.bayes.hmc.run` -- the chains: starts, warm-up and sampling, threads, output.

Draws, sample statistics and their names follow ArviZ ("diverging", "energy", "tree_depth",
"n_steps", "step_size", "lp", "acceptance_rate").  Same ``random_seed`` gives the same draws, bit
for bit, on the same machine.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from bayesldp._validation import as_generator, check_choice, check_int, check_open_unit
from bayesldp.bayes._types import SamplerOutput

# besides what sample() needs, the private names that bayesldp.bayes.laplace and cost, the tests
# and the benchmarks read as hmc.<name> (F401); a test that replaces one patches the module that
# calls it (e.g. bayesldp.bayes.hmc.run._nesting), not this one
from bayesldp.bayes.hmc.adaptation import SHARED_INFORMATION, _windows  # noqa: F401
from bayesldp.bayes.hmc.densities import _hermite, _logp_grad  # noqa: F401
from bayesldp.bayes.hmc.gamma import _LOG_GAMMA_MIN_K, _GammaTarget  # noqa: F401
from bayesldp.bayes.hmc.joint import _JointTarget, _pilot  # noqa: F401
from bayesldp.bayes.hmc.nested import (  # noqa: F401
    NESTED_GROUP,
    NESTED_TOTAL,
    _group_codes,
    _information,
    _nested_coords,
    _nested_order,
    _NestedTarget,
    _nesting,
    _shared_information,
    _shared_ratio,
)
from bayesldp.bayes.hmc.run import _BAR_STEP, _pending_kernels, _run  # noqa: F401
from bayesldp.bayes.hmc.smooth import _smooth_target, _SmoothTarget  # noqa: F401
from bayesldp.bayes.hmc.targets import _CompiledTarget, _find_mode, _Target  # noqa: F401
from bayesldp.bayes.prior import AdaptiveDirichlet, LogWeightPrior
from bayesldp.errors import InvalidInputError
from bayesldp.tally import Tally

__all__ = ["sample"]

#: the options ``fit(method="hmc", ...)`` passes here (``method="auto"`` reads them too)
OPTIONS = ("tune", "target_accept", "max_treedepth", "metric", "adaptive_scheme", "coordinates")


def sample(
    tally: Tally,
    alpha: np.ndarray,
    *,
    draws: int,
    chains: int,
    random_seed: int | None,
    progressbar: bool = False,
    cores: int = 1,
    **options: Any,
) -> SamplerOutput:
    """Draw from the Dirichlet-prior posterior of ``theta`` given a tally with NUTS.

    Parameters
    ----------
    tally : Tally
        The reports' likelihood rows and counts; the log-likelihood is
        ``sum_u c_u log(L_u . theta)``.
    alpha : array of float, shape (K,), AdaptiveDirichlet, SmoothDensity or LogisticNormal
        Dirichlet prior concentrations (all > 0), the adaptive prior, or a prior on the
        log-weights, smoothness or logistic-normal (sampled on its own coordinates,
        :class:`_SmoothTarget`; ``lambda`` draws in ``extra["smoothness"]`` or
        ``extra["spread"]``).
    draws, chains : int
        Draws kept per chain (after warm-up) and number of chains.
    random_seed : int or None
        Seed of the numpy Generator (``as_generator``) that draws the starting points; each
        chain then runs on its own child Generator (``Generator.spawn``), so the draws are the
        same, bit for bit, whatever ``cores`` is.
    progressbar : bool
        One tqdm bar per chain on standard error (warm-up and draws), advanced between calls
        of the compiled transition.
    cores : int
        Chains run at once, on threads (the compiled transition releases the GIL); 1 runs them
        one after another.  ``fit`` resolves PyMC's ``cores=None`` to ``min(chains, CPUs)``.
        Ctrl-C stops every chain at its next iteration and propagates the KeyboardInterrupt.
    **options
        ``tune`` (int, default 1000): warm-up iterations per chain, discarded.
        ``target_accept`` (float in (0, 1), default 0.8; 0.9 under the smoothness prior and
        the adaptive prior's joint scheme; 0.95 on plain ALR coordinates where the likelihood
        measures some categories mostly jointly, :func:`_shared_information`): dual-averaging
        target of the mean Metropolis acceptance along trajectories.  Under the smoothness
        prior 0.8 let a few trajectories diverge where a low-mass region's log-weights meet
        the likelihood's exponential wall (12 of 1,000 draws on SW at 1024 bins, eps 1,
        scratch); 0.9 took about as many steps.
        Under the joint scheme, on the 192 GRR fits of
        benchmarks/investigations/adaptive_convergence.py (scratch): 1,154 divergent draws in 44
        fits at 0.8, 137 in 23 at 0.9, for a median of 37.7 leapfrog steps per draw against 30.9.
        ``max_treedepth`` (int, default 10): at most ``2**max_treedepth - 1`` leapfrog steps.
        ``metric`` ("dense" or "diag"; default "dense" on ALR coordinates, "diag" on
        log-gamma ones and under the smoothness prior): the adapted inverse metric.  Under the
        smoothness prior a dense metric takes 10x fewer leapfrog steps but makes divergent
        transitions (10-174 of 1,000 draws on SW reports at 64 bins, scratch runs): bins the
        data leave empty let the log-weights fall freely below an exponential wall, and the
        dense metric's larger steps run into it.
        ``coordinates`` ("auto", "alr" or "log_gamma", default "auto"): what NUTS moves in.
        "alr": additive log-ratios (module docstring), always plain; "auto" nests them where
        the likelihood measures a group of categories through its total (nested log-ratios,
        :class:`_NestedTarget`; ``backend_info["coordinates"] == "nested"`` and
        ``"nested_group"``); "log_gamma": ``x`` in R^K with
        ``theta = softmax(x)`` and independent log-Gamma(``alpha_x``) priors
        (:class:`_GammaTarget`), fixed Dirichlet prior only, diagonal metric, O(K) per step
        besides the likelihood.  "auto" takes "log_gamma" for a fixed prior with every
        ``alpha_x >= 1`` from K = 200 on (unless ``metric="dense"``) and "alr" otherwise
        (below 1 the log-Gamma density's steep upper side and long lower tail make the odd
        divergent transition: 1 in 6,000 draws of a prior-only posterior at alpha = 0.5).
        ``adaptive_scheme`` ("joint" or "marginal", default "joint"): how the adaptive prior
        is sampled (:mod:`bayesldp.bayes.hmc.joint`); ignored under a fixed Dirichlet prior.

    Returns
    -------
    SamplerOutput
        ``theta`` of shape (chains, draws, K); sample_stats "diverging", "energy", "tree_depth",
        "n_steps", "step_size", "lp" (log-density on the ALR coordinates, Jacobian included)
        and "acceptance_rate", each (chains, draws); under the adaptive prior with the joint
        scheme, ``extra["a"]`` (chains, draws).

    Examples
    --------
    The backend behind ``bayesldp.fit(method="hmc")``, called directly (a short chain here):

    >>> import numpy as np
    >>> import bayesldp
    >>> from bayesldp.bayes.hmc import sample
    >>> mech = bayesldp.GRR(3, 2.0)
    >>> tally = mech.tally(mech.perturb([0, 0, 0, 1, 1, 2] * 10, rng=0))
    >>> out = sample(tally, np.ones(3), draws=50, chains=1, random_seed=0, tune=50)
    >>> out.theta.shape, bool(np.allclose(out.theta.sum(axis=-1), 1))
    ((1, 50, 3), True)
    """
    started = time.perf_counter()  # tally, alpha, draws and chains were checked by fit()
    unknown = sorted(set(options) - set(OPTIONS))
    if unknown:
        raise InvalidInputError(
            f"options: {unknown[0]!r} is not an option of method 'hmc'; valid: {list(OPTIONS)}"
        )
    tune = check_int(options.get("tune", 1000), "tune", 0)
    max_treedepth = check_int(options.get("max_treedepth", 10), "max_treedepth", 1)
    smooth_prior = isinstance(alpha, LogWeightPrior)
    scheme = check_choice(options.get("adaptive_scheme", "joint"), "adaptive_scheme",
                          ("joint", "marginal"))  # fmt: skip
    target_accept = options.get("target_accept")  # None: chosen in _run (_default_accept)
    if target_accept is not None:
        target_accept = check_open_unit(target_accept, "target_accept")
    metric = options.get("metric")
    if metric is not None:
        metric = check_choice(metric, "metric", ("dense", "diag"))
    if smooth_prior:  # its own coordinates (:class:`_SmoothTarget`)
        if options.get("coordinates", "auto") != "auto":
            raise InvalidInputError(
                f"coordinates: the {type(alpha).__name__} prior is sampled on its own "
                "coordinates (the basis's coefficients, slope, log scale); leave "
                "coordinates='auto'"
            )
        coordinates = "rw2"
    else:
        coordinates = _coordinates(options.get("coordinates", "auto"), alpha, tally.k, metric)
    metric = metric or ("dense" if coordinates == "alr" else "diag")
    rng = as_generator(random_seed)

    with np.errstate(all="ignore"):
        if coordinates == "rw2":
            target = _smooth_target(tally, alpha, rng, max_treedepth, target_accept, started)
        else:
            target = _Target(tally, alpha)
        return _run(target, rng, draws, chains, tune, max_treedepth, target_accept, metric,
                    started, random_seed, scheme, check_int(cores, "cores"),
                    bool(progressbar), coordinates,
                    options.get("coordinates", "auto") == "auto")  # fmt: skip


def _coordinates(value: Any, alpha: Any, k: int, metric: str | None) -> str:
    """The coordinates NUTS moves in (option ``coordinates``, see :func:`sample`)."""
    value = check_choice(value, "coordinates", ("auto", "alr", "log_gamma"))
    fixed = not isinstance(alpha, AdaptiveDirichlet)
    if value == "auto":  # alpha < 1: the log-Gamma(alpha) wall above e^x ~ 1 makes the odd
        # divergence with a long left tail of scale 1/alpha (1 in 6,000 draws at alpha = 0.5)
        big = k >= _LOG_GAMMA_MIN_K and metric != "dense"
        return "log_gamma" if fixed and big and float(np.min(alpha)) >= 1.0 else "alr"
    if value == "log_gamma" and not fixed:
        raise InvalidInputError(
            "coordinates: 'log_gamma' samples a fixed Dirichlet prior only; the adaptive prior "
            "is sampled on ALR coordinates (coordinates='alr' or 'auto')"
        )
    if value == "log_gamma" and metric == "dense":
        raise InvalidInputError(
            "metric: 'dense' is not available with coordinates='log_gamma' (a diagonal metric, "
            "O(K) per step); use metric='diag' or coordinates='alr'"
        )
    return value
