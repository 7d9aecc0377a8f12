"""``bayesldp.fit``: the one entry point of posterior inference, returning ArviZ InferenceData.

The model (every method): ``theta ~ Dirichlet(alpha)`` and, given ``theta``, the tally's
log-likelihood ``sum_u c_u log(L_u . theta)`` (the multinomial likelihood of the reports:
Lopuhaä-Zwakenberg, Li, Škorić and Li, "Improving Frequency Estimation under Local Differential
Privacy", WPES 2020, eq. 22; for RRRR, Aydın and Yıldırım, "Bayesian Frequency Estimation Under
Local Differential Privacy With an Adaptive Randomized Response Mechanism", ACM TKDD 2025).  The
methods differ only in how they reach the posterior:

==========  ===============================  ===============================================
method      module                           what it returns
==========  ===============================  ===============================================
"exact"     :mod:`bayesldp.bayes.exact`      independent draws from the exact Dirichlet
                                             mixture (small problems; Lopuhaä-Zwakenberg
                                             et al. 2020, App. A)
"hmc"       :mod:`bayesldp.bayes.hmc`        bayesldp's own HMC (the default, "auto")
"nuts"      :mod:`bayesldp.bayes.nuts`       PyMC / nutpie / numpyro / blackjax NUTS
"sgld"      :mod:`bayesldp.bayes.sgld`       stochastic-gradient Langevin (Aydın and Yıldırım 2025)
"laplace"   :mod:`bayesldp.bayes.laplace`    the likelihood's Laplace approximation in theta
                                             with the exact prior, PSIS-checked (large n)
"prior_mh"  :mod:`bayesldp.bayes.prior_mh`   independence Metropolis-Hastings with the prior
                                             as proposal (exact; where the data are weak)
==========  ===============================  ===============================================

``"auto"`` (the default) chooses among "exact", "hmc" and "laplace" by the cost model of
:mod:`bayesldp.bayes.cost`, takes "prior_mh" instead of "hmc" where the prior dominates the
likelihood (:func:`bayesldp.bayes.prior_mh.check`: Pareto k and importance efficiency of prior
draws weighted by the likelihood), and records the choice (``method``) and why
(``auto_reason``) in the posterior attrs.

Backends are imported lazily (``importlib``), each exposing
``sample(tally, alpha, *, draws, chains, random_seed, progressbar, **options) -> SamplerOutput``;
:mod:`bayesldp.bayes.inference_data` labels their draws as the InferenceData ``fit`` returns.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import numbers
import warnings
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from bayesldp._validation import as_generator, as_list, check_bool, check_int, check_memory
from bayesldp.bayes import _feedback
from bayesldp.bayes._arviz import import_arviz
from bayesldp.bayes._types import SamplerOutput
from bayesldp.bayes.diagnostics import diagnose
from bayesldp.bayes.fit_options import BACKENDS, check_draws, check_options, method_options
from bayesldp.bayes.inference_data import IDATA_DTYPES as IDATA_DTYPES
from bayesldp.bayes.inference_data import IDATA_KWARGS as IDATA_KWARGS
from bayesldp.bayes.inference_data import MAX_CHANNEL_SIZE as MAX_CHANNEL_SIZE
from bayesldp.bayes.inference_data import VERSION_ATTR as VERSION_ATTR
from bayesldp.bayes.inference_data import (
    _resolve_idata_kwargs,
    build_inference_data,
    check_log_likelihood_size,
    to_json,
)
from bayesldp.bayes.prior import (
    SMOOTH_METHODS,
    AdaptiveDirichlet,
    Dirichlet,
    LogWeightPrior,
    as_prior,
    default_prior,
)
from bayesldp.errors import (
    BayesLDPError,
    InvalidInputError,
    InvalidTypeError,
    NotSupportedError,
)
from bayesldp.tally import Tally, joint_tally

if TYPE_CHECKING:
    import arviz

#: methods that sample under the adaptive prior (AdaptiveDirichlet)
ADAPTIVE_METHODS = ("exact", "hmc", "nuts", "sgld", "laplace", "prior_mh")
#: aliases resolved before dispatch ("auto" by name alone; fit() then chooses by cost)
ALIASES: dict[str, str] = {"auto": "hmc"}
#: methods "auto" chooses among (bayesldp.bayes.cost.choose_method)
AUTO_METHODS = ("exact", "hmc", "laplace")
#: optional packages a backend may need -> the pip extra that installs them
OPTIONAL_EXTRAS: dict[str, str] = {
    "nutpie": "nutpie",
    "numpyro": "numpyro",
    "jax": "numpyro",
    "jaxlib": "numpyro",
    "blackjax": "blackjax",
    "pymc": "pymc",
    "pytensor": "pymc",
    "numba": "numba",
}
_SIMPLEX_TOL = 1e-6


def fit(
    tally: Tally,
    draws: int = 1000,
    *,
    tune: int | None = None,
    chains: int = 4,
    prior: Any = None,
    method: str = "auto",
    random_seed: Any = None,
    progressbar: bool | None = None,
    cores: int | None = None,
    labels: Sequence[Any] | None = None,
    compute_convergence_checks: bool = True,
    idata_kwargs: Mapping[str, Any] | None = None,
    **options: Any,
) -> arviz.InferenceData:
    """Posterior of the population distribution ``theta`` given a tally.

    Model: ``theta ~ Dirichlet(alpha)`` (by default ``theta | a ~ Dirichlet(a 1_K)`` with ``a``
    learnt, :class:`~bayesldp.bayes.AdaptiveDirichlet`); reports ``Y_i | theta`` i.i.d. with
    ``Pr(Y = y | theta) = sum_x theta_x P[x, y]``; the tally's rows are the columns ``P[:, y]``
    of the observed reports, so the log-likelihood is ``sum_u c_u log(L_u . theta)``.  The
    posterior mean is the MMSE estimator of ``theta`` (Lopuhaä-Zwakenberg et al. 2020, Theorem 3.1).

    Parameters
    ----------
    tally : Tally or list of Tally
        The reports (from ``mechanism.tally(reports)`` or a merge of tallies); a list of tallies
        of the same K categories under different mechanisms or budgets is fitted jointly, one
        theta for all, each tally keeping its own channel (:func:`bayesldp.tally.joint_tally`).
    prior : prior object, str, float, array_like or None
        ``None``: the mechanism's default: ``"smooth"`` for numerical mechanisms (ordered bins)
        with a method that samples it ("auto", "hmc", "nuts", "prior_mh"); ``Dirichlet(1)``
        with a warning saying why for numerical reports under the other methods and for
        PCKV-PM; else
        ``"adaptive"``: a fixed symmetric Dirichlet puts the same pseudo-counts on every
        population, too many for sparse and long-tailed ones (``Dirichlet(1)``'s 90% intervals
        covered 0.222 of a sparse family's frequencies in
        ``benchmarks/results/prior_accuracy.md``, the adaptive prior's 0.890), too few for
        flat ones; a number ``a``:
        ``Dirichlet.symmetric(K, a)``; a vector of ``K`` positive numbers; a
        :class:`~bayesldp.bayes.Dirichlet`; or ``"adaptive"`` / an
        :class:`~bayesldp.bayes.AdaptiveDirichlet`: ``Dirichlet(a 1_K)`` with ``a`` unknown (a
        normal prior on ``log a``), whose draws are the posterior variable ``a`` (every
        method); or ``"smooth"`` / a :class:`~bayesldp.bayes.SmoothDensity`
        (ordered bins of numerical data: a Gaussian roughness prior on the log-weights, whose
        smoothness ``lambda`` is learnt; posterior variable ``smoothness``; methods "hmc",
        which ``"auto"`` then takes (or "prior_mh" where the data are weak), "nuts" and
        "prior_mh"); or ``"logistic_normal"`` / a :class:`~bayesldp.bayes.LogisticNormal`
        (exchangeable categories: independent normal log-weights whose spread ``lambda`` is
        learnt, posterior variable ``spread``; the same methods).
    method : {"auto", "exact", "hmc", "nuts", "sgld", "laplace", "prior_mh"}
        The posterior method.  ``"auto"`` chooses by predicted cost
        (:func:`bayesldp.bayes.cost.choose_method`): ``"exact"`` when the exact Dirichlet
        mixture is small, else ``"hmc"`` unless it is predicted to take over 30 s and
        ``"laplace"`` (for large n, whose cost per draw does not grow with n) 3 times less; the
        choice and the reason are the posterior attrs ``method`` and ``auto_reason``.  Where
        it would take ``"hmc"`` and the prior dominates the likelihood (4,000 prior draws
        weighted by the likelihood: Pareto k <= 0.7, importance efficiency >= 0.1 and the
        best draw near the maximum likelihood,
        :func:`bayesldp.bayes.prior_mh.check`) it takes ``"prior_mh"``: independence
        Metropolis-Hastings with the prior as proposal, exact, with no divergences (not when an
        option of NUTS is given).  ``"prior_mh"`` forces it.  A method
        the cost model predicts to take over a minute warns (``UserWarning``) before it starts.
    draws : int
        Posterior draws per chain (after any tuning), >= 1: ``fit(tally, 2000)`` as
        ``pm.sample(2000)``.  Everything after ``draws`` is keyword-only; a prior in
        ``draws``' place (the old ``fit(tally, 1.0)``) is refused with a message naming
        ``prior=``.
    tune : int or None
        Warm-up iterations per chain of the methods that tune ("hmc", "nuts", "laplace"'s
        chain, "sgld"); None: the method's default.  "exact" draws independent samples and
        refuses it.
    chains : int
        Number of chains, >= 1.
    random_seed : int, sequence of int, numpy Generator, SeedSequence or None
        Same seed, same draws.  None draws a fresh 63-bit seed (recorded in the attrs, so every
        fit can be reproduced); a Generator or SeedSequence is turned into such a seed.  A
        sequence of non-negative ints (PyMC accepts one seed per chain) is combined, in order,
        into one ``numpy.random.SeedSequence(seeds)`` whose first 63 bits are the fit's seed:
        the same list gives the same draws, whatever its length (it need not have ``chains``
        entries), and the seed recorded in ``posterior.attrs["random_seed"]`` replays the fit.
    progressbar : bool or None
        Show the backend's progress bar (tqdm, on standard error): one per chain for "hmc",
        one for "sgld", one over the mixture's expansion for "exact".  None: on in an
        interactive session (standard error is a terminal, or IPython / Jupyter), off
        otherwise (scripts piped to files, tests, CI).  Before numba compiles the sampler's
        kernels (the first fit after an install; then they load from numba's disk cache) one
        line says so on standard error, whatever ``progressbar`` is.
    cores : int or None
        Chains sampled at once, as PyMC's ``cores=`` ("hmc": threads, the compiled kernels
        release the GIL; "nuts" with PyMC's sampler: processes).  None: ``min(chains,
        os.cpu_count())``; more than the machine's CPUs is capped with a ``UserWarning``.  The
        draws do not depend on ``cores`` (same seed, same bits).  Ctrl-C (KeyboardInterrupt)
        stops every chain at its next iteration and propagates: ``fit`` returns nothing, so
        nothing half-written is left (PyMC instead may return the draws so far).
    labels : sequence, optional
        ``K`` distinct category labels for the ``category`` coordinate (default ``0..K-1``).
    compute_convergence_checks : bool
        Warn (:class:`~bayesldp.errors.ConvergenceWarning`) when the largest r_hat is above
        1.01, the bulk ESS below 100 per chain or a transition diverged
        (:mod:`bayesldp.bayes.diagnostics`); the numbers are in ``posterior.attrs`` either way.
    idata_kwargs : dict, optional
        What the InferenceData holds, as PyMC's ``pm.sample(idata_kwargs=...)``:
        ``"log_likelihood"`` (bool, default False): add the ``log_likelihood`` group (one value
        per draw and report, ``chains * draws * N`` floats, as PyMC's one per observation, so
        ``arviz.loo``, ``waic`` and ``compare`` count the reports; :func:`bayesldp.loo` does not
        need it; a group above 500 MB warns before sampling,
        :class:`~bayesldp.errors.LargeOutputWarning`, and one beyond half the machine's memory is
        refused); ``"dtype"`` (``"float64"``, the default, or ``"float32"``): the storage dtype of
        the floating posterior variables (``theta``, ``a``) and of the log_likelihood group
        (float32 halves the file :func:`bayesldp.save_fit` writes; draws are computed in float64
        either way).  Any other key is an :class:`~bayesldp.InvalidInputError`.
    **options
        Passed to the backend (e.g. ``max_components`` for "exact", ``nuts_sampler`` for
        "nuts"); an option the chosen method does not take is an
        :class:`~bayesldp.InvalidInputError` that names the methods taking it, or, where none
        does, the nearest name fit knows (:mod:`bayesldp.bayes.fit_options`).

    Returns
    -------
    arviz.InferenceData
        Groups: ``posterior`` (``theta``, dims ``chain, draw, category``), ``sample_stats``,
        ``log_likelihood`` (``counts``: ``log(L_u . theta)`` for each report, dim ``report`` with
        its row ``u`` as coordinate ``row``, so ``arviz.loo`` / ``waic`` / ``compare`` count
        reports; only with ``idata_kwargs={"log_likelihood": True}``), ``observed_data`` (the tally:
        ``counts``, ``rows`` or ``support`` + ``levels``, ``stat``), ``constant_data``
        (``prior_alpha``, ``epsilon``, mechanism parameters, ``channel`` when finite and ``K * |Y|
        <= 1e6``).  The posterior attrs hold ``method``, ``mechanism``, ``family``, ``prior``,
        ``random_seed``, ``bayesldp_version`` and ``backend_info`` (JSON strings where structured),
        so the fit round-trips through :func:`bayesldp.save_fit` / :func:`bayesldp.load_fit`.  Every
        group also carries ArviZ's standard attrs (``created_at``, ``arviz_version``,
        ``inference_library`` = "bayesldp", ``inference_library_version``), as PyMC's do.

    Examples
    --------
    >>> import numpy as np, bayesldp
    >>> mech = bayesldp.GRR(3, 2.0)
    >>> tally = mech.tally(mech.perturb(np.array([0, 0, 1, 2, 0, 0]), rng=1))
    >>> idata = bayesldp.fit(tally, method="exact", draws=200, chains=2, random_seed=0)
    >>> idata.posterior["theta"].shape
    (2, 200, 3)
    """
    if isinstance(tally, list | tuple):  # reports under several mechanisms or budgets
        tally = joint_tally(tally)
    if not isinstance(tally, Tally):
        raise InvalidTypeError(f"tally: expected a bayesldp.Tally, got {type(tally).__name__}")
    if tally.n < 1:  # pragma: no cover - a Tally cannot be empty
        raise InvalidInputError("tally: holds no reports")
    check_draws(draws)
    resolved = _resolve_method(method)
    prior_obj = as_prior(default_prior(prior, tally, resolved), tally.k)
    draws = check_int(draws, "draws")
    if tune is not None:
        options["tune"] = check_int(tune, "tune", 0)
    chains = check_int(chains, "chains")
    check_memory(8.0 * draws * chains * (tally.k + 1), f"fit: draws x chains = {draws:,} x "
                 f"{chains} posterior draws of K = {tally.k} frequencies",
                 "ask for fewer draws or chains (a few thousand draws in all are plenty for "
                 "means and 90% intervals)")  # fmt: skip
    seed = _resolve_seed(random_seed)
    storage = _resolve_idata_kwargs(idata_kwargs)
    if storage["log_likelihood"]:
        check_log_likelihood_size(chains, draws, tally, storage["dtype"], stacklevel=2)
    coords = _category_coords(labels, tally.k)
    progressbar = _feedback.resolve_progressbar(progressbar)
    cores_given = cores is not None
    cores = _feedback.resolve_cores(cores, chains)

    if isinstance(prior_obj, LogWeightPrior):
        resolved, auto_reason = _log_weight_method(method, resolved, prior_obj)
    else:
        resolved, auto_reason = _choose_method(
            method, resolved, tally, draws, chains, options,
            isinstance(prior_obj, AdaptiveDirichlet),
        )  # fmt: skip
    if method == "auto" and resolved == "hmc":
        resolved, auto_reason = _weak_data_method(tally, prior_obj, seed, options, auto_reason)
    if isinstance(prior_obj, AdaptiveDirichlet) and resolved not in ADAPTIVE_METHODS:
        raise NotSupportedError(
            f"prior: the adaptive prior is not available with method={method!r} yet; use "
            f"one of {list(ADAPTIVE_METHODS)}"
        )
    backend = _load_backend(method, resolved)
    if "tune" in options and "tune" not in method_options(resolved):
        raise InvalidInputError(
            f"tune: method {resolved!r} draws independent samples and has no warm-up"
        )
    check_options(method, resolved, auto_reason, options)
    if "cores" in inspect.signature(backend.sample).parameters:
        options["cores"] = cores
    elif cores_given and resolved == "nuts":  # PyMC's own option (processes)
        options["cores"] = cores
    try:
        out = backend.sample(
            tally,
            prior_obj.alpha.copy() if isinstance(prior_obj, Dirichlet) else prior_obj,
            draws=draws,
            chains=chains,
            random_seed=seed,
            progressbar=bool(progressbar),
            **options,
        )
    except ModuleNotFoundError as exc:
        raise _missing_dependency(method, resolved, exc) from exc
    _check_output(out, resolved, chains, draws, tally.k)
    if isinstance(prior_obj, AdaptiveDirichlet) and "a" not in out.extra:
        # p(a | theta, data) = p(a | theta): one exact draw of a per draw of theta
        a = prior_obj.draw_concentration(out.theta, rng=np.random.default_rng([seed, 1]))
        out = dataclasses.replace(out, extra={**out.extra, "a": a})
    if isinstance(prior_obj, AdaptiveDirichlet):
        _warn_grid_edge(prior_obj, out.extra["a"])
    idata = build_inference_data(
        out,
        tally,
        prior_obj,
        method=resolved,
        requested_method=method,
        random_seed=seed,
        coords=coords,
        **storage,
    )
    if auto_reason is not None:
        idata.posterior.attrs["auto_reason"] = auto_reason
    if "pareto_k" in out.info:  # the Laplace method's importance check
        idata.posterior.attrs["pareto_k"] = float(out.info["pareto_k"])
    diagnose(
        idata, resolved, warn=check_bool(compute_convergence_checks, "compute_convergence_checks")
    )
    return idata


# ---------------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------------
#: share of the draws of ``a`` at one end of the adaptive prior's grid that triggers a warning
EDGE_SHARE = 0.01


def _warn_grid_edge(prior: AdaptiveDirichlet, a: np.ndarray) -> None:
    """Warn when the posterior of ``a`` piles up at an end of its grid (the prior's support
    cuts the posterior off there)."""
    for name, value in (("lower", prior.a[0]), ("upper", prior.a[-1])):
        share = float(np.mean(a == value))
        if share > EDGE_SHARE:
            warnings.warn(
                f"prior: {share:.1%} of the posterior draws of the concentration a sit at the "
                f"{name} edge of its grid (a = {value:.3g}, log a = {np.log(value):.3g}); the "
                "grid cuts the posterior off there: widen it (AdaptiveDirichlet(k, width=...)) "
                "or move log_a_mean",
                UserWarning,
                stacklevel=3,
            )


def _resolve_method(method: object) -> str:
    valid = sorted([*BACKENDS, *ALIASES])
    if not isinstance(method, str):
        raise InvalidTypeError(f"method: expected one of {valid}, got {method!r}")
    resolved = ALIASES.get(method, method)
    if resolved not in BACKENDS:
        raise InvalidInputError(f"method: unknown method {method!r}; valid methods are {valid}")
    return resolved


def _choose_method(
    method: str,
    resolved: str,
    tally: Tally,
    draws: int,
    chains: int,
    options: Mapping[str, Any],
    adaptive: bool,
) -> tuple[str, str | None]:
    """``"auto"``: the method chosen by cost and the reason; any other method: itself, with a
    ``UserWarning`` first when the cost model predicts more than a minute."""
    from bayesldp.bayes import cost

    if method == "auto":
        chosen, reason, _ = cost.choose_method(tally, draws, chains, options, adaptive=adaptive)
        return chosen, reason
    if resolved in AUTO_METHODS and resolved != "exact":
        seconds = cost.predict_seconds(tally, resolved, draws, chains, options, adaptive=adaptive)
        if seconds > cost.SLOW_SECONDS:
            better, _, predicted = cost.choose_method(tally, draws, chains, options,
                                                      adaptive=adaptive)  # fmt: skip
            hint = (
                f"; method='{better}' is predicted to take {predicted[better]:.3g} s"
                if better != resolved and predicted[better] < seconds
                else "; fewer draws or chains take proportionally less"
            )
            warnings.warn(
                f"method={method!r}: predicted to take about {seconds:.3g} s on this tally "
                f"(K = {tally.k}, n = {tally.n:,}, {tally.n_rows:,} distinct rows){hint}",
                UserWarning,
                stacklevel=3,
            )
    return resolved, None


def _log_weight_method(method: str, resolved: str,
                       prior: LogWeightPrior) -> tuple[str, str | None]:  # fmt: skip
    """The method under a prior on the log-weights (:class:`~bayesldp.bayes.SmoothDensity`,
    :class:`~bayesldp.bayes.LogisticNormal`): "hmc" (which "auto" takes), "nuts" (PyMC) or
    "prior_mh"."""
    name = type(prior).__name__
    if method == "auto":
        return "hmc", f"the {name} prior is sampled by NUTS on its coefficients"
    if resolved not in SMOOTH_METHODS:
        raise NotSupportedError(
            f"prior: the {name} prior is not available with method={method!r}; use one of "
            f"{list(SMOOTH_METHODS)} (or 'auto')"
        )
    return resolved, None


def _weak_data_method(tally: Tally, prior: Any, seed: int, options: Mapping[str, Any],
                      reason: str | None) -> tuple[str, str | None]:  # fmt: skip
    """``"auto"`` where it would run NUTS: ``"prior_mh"`` (independence MH with the prior as
    proposal, :mod:`bayesldp.bayes.prior_mh`) where the data are weak (its rule,
    :func:`bayesldp.bayes.prior_mh.check`, on draws of their own Generator, so the NUTS draws
    do not change where it fails) and no NUTS option is given; else ``"hmc"``."""
    from bayesldp.bayes import prior_mh

    if not set(options) <= set(prior_mh.OPTIONS):
        return "hmc", reason
    rule = prior_mh.check(tally, prior, np.random.default_rng([seed, 2]))
    if rule.ok:
        return "prior_mh", f"{rule.reason} (the data are weak; else: {reason})"
    return "hmc", f"{reason}; {rule.reason}"


def _load_backend(method: str, resolved: str) -> Any:
    module_name = BACKENDS[resolved]
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name == module_name:
            raise NotSupportedError(
                f"method={method!r}: the backend module {module_name} is not available in this "
                "installation of bayesldp; choose another method, e.g. method='exact' for small "
                "problems"
            ) from exc
        raise _missing_dependency(method, resolved, exc) from exc
    if not callable(getattr(module, "sample", None)):
        raise NotSupportedError(
            f"method={method!r}: the backend module {module_name} defines no sample() function"
        )
    return module


def _missing_dependency(method: str, resolved: str, exc: ModuleNotFoundError) -> NotSupportedError:
    missing = (exc.name or "").split(".")[0] or "an optional package"
    extra = OPTIONAL_EXTRAS.get(missing)
    hint = f"pip install 'bayesldp[{extra}]'" if extra else f"pip install {missing}"
    return NotSupportedError(
        f"method={method!r} ({BACKENDS[resolved]}) needs the optional package {missing!r}, "
        f"which is not installed: {hint}"
    )


def _seed_of(sequence: np.random.SeedSequence) -> int:
    """The first 63 bits of a SeedSequence's state, as a non-negative int."""
    return int(sequence.generate_state(1, np.uint64)[0] >> np.uint64(1))


def _resolve_seed(random_seed: object) -> int:
    if random_seed is None:
        return _seed_of(np.random.SeedSequence())
    if isinstance(random_seed, np.random.Generator | np.random.SeedSequence):
        return int(as_generator(random_seed).integers(0, 2**63 - 1))
    if (isinstance(random_seed, Sequence) and not isinstance(random_seed, str | bytes)) or (
        isinstance(random_seed, np.ndarray) and random_seed.ndim >= 1
    ):
        # PyMC style: one seed per chain; combined, in order, into one SeedSequence
        seeds = list(np.asarray(random_seed, dtype=object).reshape(-1))
        if len(seeds) == 0:
            raise InvalidInputError("random_seed: an empty sequence of seeds")
        for seed in seeds:
            if isinstance(seed, bool | np.bool_) or not isinstance(seed, numbers.Integral):
                raise InvalidTypeError(
                    "random_seed: a sequence of seeds must hold non-negative ints, got "
                    f"{type(seed).__name__} ({seed!r})"
                )
            if seed < 0:
                raise InvalidInputError(
                    f"random_seed: a sequence of seeds must hold non-negative ints, got {seed}"
                )
        return _seed_of(np.random.SeedSequence([int(seed) for seed in seeds]))
    if isinstance(random_seed, bool) or not isinstance(random_seed, numbers.Integral):
        raise InvalidTypeError(
            "random_seed: expected a non-negative int, a sequence of them, a numpy Generator, a "
            f"SeedSequence or None, got {type(random_seed).__name__}"
        )
    if not 0 <= random_seed < 2**63:
        raise InvalidInputError(f"random_seed: must lie in 0..2**63-1, got {random_seed}")
    return int(random_seed)


def _category_coords(labels: Sequence[Any] | None, k: int) -> np.ndarray:
    if labels is None:
        return np.arange(k)
    arr = np.asarray(as_list(labels, "labels", f"a sequence of {k} labels"))
    if arr.ndim != 1 or arr.shape[0] != k:
        raise InvalidInputError(f"labels: expected {k} labels (one per category), got {arr.shape}")
    if arr.dtype.kind not in "iuU":
        raise InvalidTypeError(f"labels: expected integers or strings, got dtype {arr.dtype}")
    if np.unique(arr).size != k:
        raise InvalidInputError(f"labels: must be distinct, got {arr.tolist()}")
    return arr


def _check_output(out: object, method: str, chains: int, draws: int, k: int) -> None:
    where = f"backend {BACKENDS[method]}"
    if not isinstance(out, SamplerOutput):
        raise BayesLDPError(f"{where} returned {type(out).__name__}, not a SamplerOutput")
    theta = np.asarray(out.theta)
    if theta.shape != (chains, draws, k):
        raise BayesLDPError(
            f"{where}: theta has shape {theta.shape}, expected {(chains, draws, k)}"
        )
    if not np.all(np.isfinite(theta)) or theta.min() < 0:
        raise BayesLDPError(f"{where}: theta has negative or non-finite entries")
    worst = float(np.max(np.abs(theta.sum(axis=-1) - 1.0)))
    if worst > _SIMPLEX_TOL:
        raise BayesLDPError(f"{where}: draws of theta do not sum to 1 (off by {worst:.3g})")
    for name, value in out.sample_stats.items():
        if np.shape(value) != (chains, draws):
            raise BayesLDPError(
                f"{where}: sample_stats[{name!r}] has shape {np.shape(value)}, "
                f"expected {(chains, draws)}"
            )


__all__ = ["ALIASES", "BACKENDS", "build_inference_data", "fit", "import_arviz", "to_json"]
