"""NUTS through PyMC (method "nuts"): PyMC's own sampler, nutpie, numpyro or blackjax.

The model is :func:`bayesldp.bayes.model.build_model`: ``theta ~ Dirichlet(alpha)`` with the
tally's log-likelihood ``sum_u c_u log(L_u . theta)``, sampled by :func:`pymc.sample` with
``nuts_sampler`` one of "pymc" (default), "nutpie", "numpyro" or "blackjax" (PyMC's stick-breaking
simplex transform in every case).  The optional samplers are imported only when asked for; a
missing one raises :class:`ModuleNotFoundError` naming the extra that installs it
(``pip install 'bayesldp[nutpie]'``, ``'bayesldp[numpyro]'``, ``'bayesldp[blackjax]'``).

This backend exists for comparison and for users who already work in PyMC; bayesldp's default
method, :mod:`bayesldp.bayes.hmc`, samples the same posterior faster.
"""

from __future__ import annotations

import importlib.util
import time
from typing import Any

import numpy as np

from bayesldp._validation import check_int, check_open_unit
from bayesldp.bayes._types import SamplerOutput
from bayesldp.bayes.model import build_model
from bayesldp.errors import InvalidInputError, InvalidTypeError
from bayesldp.tally import Tally

__all__ = ["NUTS_SAMPLERS", "sample"]

#: nuts_sampler -> (packages it needs, the pip extra that installs them)
NUTS_SAMPLERS: dict[str, tuple[tuple[str, ...], str | None]] = {
    "pymc": ((), None),
    "nutpie": (("nutpie",), "nutpie"),
    "numpyro": (("numpyro", "jax"), "numpyro"),
    "blackjax": (("blackjax", "jax"), "blackjax"),
}
OPTIONS = ("nuts_sampler", "tune", "target_accept", "cores", "init", "nuts_sampler_kwargs")
#: sample-stat names of the external samplers -> ArviZ names
_STAT_ALIASES = {
    "depth": "tree_depth",
    "mean_tree_accept": "acceptance_rate",
    "logp": "lp",
    "maxdepth_reached": "reached_max_treedepth",
}


def require_sampler(nuts_sampler: Any, *, installed: bool = True) -> str:
    """Validate ``nuts_sampler`` and (with ``installed``) check that its packages are importable.

    Raises
    ------
    InvalidInputError
        For a name that is not one of :data:`NUTS_SAMPLERS`.
    ModuleNotFoundError
        When a package the sampler needs is missing; the message names the pip extra.
    """
    if not isinstance(nuts_sampler, str) or nuts_sampler not in NUTS_SAMPLERS:
        raise InvalidInputError(
            f"nuts_sampler: unknown sampler {nuts_sampler!r}; valid: {list(NUTS_SAMPLERS)}"
        )
    packages, extra = NUTS_SAMPLERS[nuts_sampler]
    for package in packages if installed else ():
        if importlib.util.find_spec(package) is None:
            raise ModuleNotFoundError(
                f"nuts_sampler={nuts_sampler!r} needs the package {package!r}, which is not "
                f"installed: pip install 'bayesldp[{extra}]'",
                name=package,
            )
    return nuts_sampler


def sample(
    tally: Tally,
    alpha: np.ndarray,
    *,
    draws: int,
    chains: int,
    random_seed: int | None,
    progressbar: bool = False,
    nuts_sampler: str = "pymc",
    tune: int = 1000,
    target_accept: float = 0.8,
    **options: Any,
) -> SamplerOutput:
    """Sample the posterior of ``theta`` with PyMC's NUTS or an external NUTS through PyMC.

    Parameters
    ----------
    tally : Tally
        The reports' likelihood rows and counts.
    alpha : array of float, shape (K,), AdaptiveDirichlet, SmoothDensity or LogisticNormal
        Dirichlet prior concentrations, or a prior :func:`~bayesldp.bayes.model.build_model`
        takes (the ``lambda`` draws of a smoothness or logistic-normal prior come back as
        ``extra["smoothness"]`` or ``extra["spread"]``).
    draws, chains : int
        Kept draws per chain and number of chains.
    random_seed : int or None
        Passed to :func:`pymc.sample`.
    progressbar : bool
        Show the sampler's progress bar.
    nuts_sampler : {"pymc", "nutpie", "numpyro", "blackjax"}
        Which NUTS implementation runs the model.
    tune : int
        Warm-up iterations per chain (discarded).
    target_accept : float in (0, 1)
        Step-size adaptation target.
    **options
        ``cores`` (int; PyMC's sampler only: parallel processes), ``init`` (PyMC's sampler only:
        initialisation, default "jitter+adapt_diag"), ``nuts_sampler_kwargs`` (dict passed to
        the external sampler, e.g. ``{"chain_method": "vectorized"}`` for numpyro).

    Returns
    -------
    SamplerOutput
        ``theta`` (chains, draws, K); every per-draw statistic of the sampler, renamed to ArviZ
        names where they differ ("tree_depth", "acceptance_rate", "lp", ...).
    """
    import pymc as pm

    started = time.perf_counter()  # tally, alpha, draws and chains were checked by fit()
    unknown = sorted(set(options) - set(OPTIONS))
    if unknown:
        raise InvalidInputError(
            f"options: {unknown[0]!r} is not an option of method 'nuts'; valid: {list(OPTIONS)}"
        )
    nuts_sampler = require_sampler(nuts_sampler, installed=False)
    tune = check_int(tune, "tune", 0)
    target_accept = check_open_unit(target_accept, "target_accept")
    kwargs: dict[str, Any] = {}
    if nuts_sampler == "pymc":
        for name in ("cores", "init"):
            if name in options:
                kwargs[name] = options[name]
    else:
        given = [name for name in ("cores", "init") if name in options]
        if given:
            raise InvalidInputError(
                f"options: {given[0]!r} applies to nuts_sampler='pymc' only, "
                f"not to {nuts_sampler!r}; use nuts_sampler_kwargs"
            )
    sampler_kwargs = options.get("nuts_sampler_kwargs")
    if sampler_kwargs is not None:
        if not isinstance(sampler_kwargs, dict):
            raise InvalidTypeError(
                f"nuts_sampler_kwargs: expected a dict, got {type(sampler_kwargs).__name__}"
            )
        if nuts_sampler == "pymc":
            raise InvalidInputError(
                "nuts_sampler_kwargs: only for external samplers; PyMC's own takes cores/init"
            )
        kwargs["nuts_sampler_kwargs"] = dict(sampler_kwargs)
    require_sampler(nuts_sampler)  # arguments first, then whether the backend is installed

    model = build_model(tally, alpha)  # the adaptive prior marginal: any sampler takes it
    with model:
        idata = pm.sample(
            draws=draws,
            tune=tune,
            chains=chains,
            random_seed=random_seed,
            progressbar=progressbar,
            nuts_sampler=nuts_sampler,
            target_accept=float(target_accept),
            compute_convergence_checks=False,
            return_inferencedata=True,
            **kwargs,
        )
    theta = np.asarray(idata.posterior["theta"].values, dtype=float)
    stats: dict[str, np.ndarray] = {}
    for name, var in idata.sample_stats.data_vars.items():
        values = np.asarray(var.values)
        if var.dims != ("chain", "draw") or values.dtype.kind not in "biuf":
            continue
        stats[_STAT_ALIASES.get(name, name)] = values
    info = {
        "backend": "bayesldp.nuts",
        "nuts_sampler": nuts_sampler,
        "tune": tune,
        "draws": draws,
        "chains": chains,
        "target_accept": float(target_accept),
        "random_seed": random_seed,
        "options": {k: v for k, v in kwargs.items() if k != "nuts_sampler_kwargs"},
        "nuts_sampler_kwargs": {str(k): repr(v) for k, v in (sampler_kwargs or {}).items()},
        "pymc_version": pm.__version__,
        "wall_time": time.perf_counter() - started,
    }
    sampling_time = idata.posterior.attrs.get("sampling_time")
    if sampling_time is not None:
        info["sampling_time"] = float(sampling_time)
    extra = {}
    for hyper in ("smoothness", "spread"):  # SmoothDensity's, LogisticNormal's lambda
        if hyper in idata.posterior:
            extra[hyper] = np.asarray(idata.posterior[hyper].values, dtype=float)
    return SamplerOutput(theta=theta, sample_stats=stats, info=info, extra=extra)
