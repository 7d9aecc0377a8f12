"""Convergence checks of a fit, with PyMC's thresholds: the numbers, and a warning for each.

* ``r_hat_max`` above 1.01 (rank-normalised split R-hat, Vehtari et al. 2021): the chains
  disagree;
* ``ess_bulk_min`` below 100 per chain: too few effective draws for stable summaries;
* ``divergences`` above 0 (Hamiltonian samplers): the sampler met curvature it could not follow;
* ``pareto_k`` above 0.7 (importance-sampling corrections, Vehtari et al. 2024, "Pareto smoothed
  importance sampling", JMLR 25(72)): the importance weights' tail is too heavy for the estimate
  to be trusted.  A backend reports it as ``SamplerOutput.info["pareto_k"]``; the check is also
  :func:`check_pareto_k` for direct use.

Each failed check is a :class:`~bayesldp.errors.ConvergenceWarning` (a ``UserWarning``) naming
the number and what to do (as PyMC words them); the numbers are in the attrs of ``posterior`` and
of ``sample_stats`` whether or not they warn.
Independent draws (``method="exact"``) are not checked.  The checks cover ``theta`` and, under
the adaptive prior, its concentration ``a``.
"""

from __future__ import annotations

import contextlib
import json
import warnings
from collections.abc import Iterator
from typing import Any

import numpy as np

from bayesldp.errors import ConvergenceWarning

R_HAT_MAX = 1.01
ESS_PER_CHAIN_MIN = 100
PARETO_K_MAX = 0.7
#: the reference PyMC's warnings cite (rank-normalised R-hat and ESS)
_REFERENCE = "Vehtari et al. 2021, https://arxiv.org/abs/1903.08008"


def diagnose(idata: Any, method: str, *, warn: bool = True) -> dict[str, float]:
    """Record r_hat, bulk ESS and divergences of ``idata`` in its posterior attrs; warn."""
    from bayesldp.bayes._arviz import import_arviz

    if method == "exact":
        return {}
    az = import_arviz()
    posterior = idata.posterior
    chains = posterior.sizes["chain"]
    found: dict[str, float] = {}
    with warnings.catch_warnings(), np.errstate(invalid="ignore", divide="ignore"), _numpy_arviz():
        warnings.simplefilter("ignore", RuntimeWarning)  # constant draws: NaN r_hat
        names = [v for v in ("theta", "a") if v in posterior]  # a: the adaptive prior's
        if chains >= 2 and posterior.sizes["draw"] >= 4:
            rhat = az.rhat(posterior, var_names=names)
            found["r_hat_max"] = float(max(np.nanmax(rhat[v].values) for v in names))
        if posterior.sizes["draw"] >= 4:
            ess = az.ess(posterior, var_names=names, method="bulk")
            found["ess_bulk_min"] = float(min(np.nanmin(ess[v].values) for v in names))
    stats = getattr(idata, "sample_stats", None)
    if stats is not None and "diverging" in stats:
        found["divergences"] = int(np.asarray(stats["diverging"]).sum())
    info = posterior.attrs.get("backend_info")
    pareto_k = _backend_value(info, "pareto_k")
    if pareto_k is not None:
        found["pareto_k"] = pareto_k
    posterior.attrs.update(found)
    if stats is not None:
        stats.attrs.update(found)
    if warn:
        messages = _messages(
            found,
            chains,
            method,
            _backend_value(info, "target_accept"),
            concentration=not {"smoothness", "spread"} & set(posterior.data_vars),
        )
        hints = [_broad_concentration_hint(posterior), _vertex_plateau_hint(posterior, found)]
        for message in [*messages, *(h for h in hints if messages and h)]:
            warnings.warn(message, ConvergenceWarning, stacklevel=3)
    return found


#: decades (log10 q95 / q05) of the adaptive prior's a beyond which a failed check gets a hint
BROAD_A_DECADES = 2.0


def _broad_concentration_hint(posterior: Any) -> str | None:
    """Why an adaptive-prior fit failed a check, when the likely reason is a's posterior: where
    the data say little about the concentration ``a`` (its 90% interval spanning two decades or
    more), 17 of 31 such GRR fits had r_hat above 1.01 against 3 of 64 where it spans less than
    half a decade (benchmarks/investigations/results/adaptive_convergence.md)."""
    if "a" not in posterior:
        return None
    lo, hi = np.quantile(np.asarray(posterior["a"]), [0.05, 0.95])
    if not (lo > 0 and np.log10(hi / lo) >= BROAD_A_DECADES):
        return None
    return (
        f"prior: the data say little about the adaptive prior's concentration a (90% of its "
        f"draws in [{lo:.3g}, {hi:.3g}]), where the sampler mixes slowly; draw more (draws=, "
        "chains=), or fit with a fixed prior (e.g. prior=0.5) and compare the two "
        "(bayesldp.loo_compare)"
    )


#: share of draws with some bin below VERTEX_MASS beyond which divergences get the plateau hint
VERTEX_SHARE, VERTEX_MASS = 0.1, 1e-6


def _vertex_plateau_hint(posterior: Any, found: dict[str, float]) -> str | None:
    """Why a smoothness-prior fit diverged, when the posterior spreads to a vertex of the
    simplex: there the likelihood is flat in the log-weights, which roam over the slope's wide
    prior between the likelihood's exponential walls, and NUTS's steps overshoot the walls (a
    known fault).  On 90 GRR reports (60, 20, 10) at K = 3,
    ``benchmarks/investigations/results/smooth_vertex_steps.md``: 2.9-3.6 % divergent at the default
    ``target_accept``, one seed's theta 5.9 Monte Carlo errors off; at 0.99, 0.4-0.8 % divergent
    and every check within 2.7 errors, for 3-5x the leapfrog steps."""
    if "smoothness" not in posterior or not found.get("divergences"):
        return None
    share = float(np.mean(np.asarray(posterior["theta"]).min(axis=-1) < VERTEX_MASS))
    if share < VERTEX_SHARE:
        return None
    return (
        f"prior: {share:.0%} of the draws put less than {VERTEX_MASS:g} on some bin: the "
        "posterior reaches a vertex of the simplex, where the data say little and the "
        "smoothness prior's wide slope (slope_sd) lets the log-weights roam; the sampler "
        "diverges at the edges of that region and can be biased there; refit with "
        "method='prior_mh' (exact where the data are weak: method='auto' takes it when "
        "its rule holds) or target_accept=0.99, or use a narrower slope prior "
        "(SmoothDensity(k, slope_sd=...)) if it fits what you know"
    )


@contextlib.contextmanager
def _numpy_arviz() -> Iterator[None]:
    """ArviZ's variance with numpy, not its numba kernel: that kernel is not cached on disk, so
    it cost about 0.6 s of compilation in every new process (r_hat and ESS agree to rounding)."""
    try:
        from arviz.utils import Numba
    except ImportError:  # pragma: no cover - depends on the ArviZ version
        yield
        return
    flag = Numba.numba_flag
    Numba.numba_flag = False
    try:
        yield
    finally:
        Numba.numba_flag = flag


def _backend_value(info: object, key: str) -> float | None:
    """``key`` of a backend's info (a JSON string in the attrs), if it reports one."""
    if not isinstance(info, str):
        return None
    try:
        value = json.loads(info).get(key)
    except (ValueError, AttributeError):
        return None
    return None if value is None else float(value)


def pareto_k_message(k: float, method: str) -> str | None:
    """The warning text for a Pareto k above :data:`PARETO_K_MAX`, or None when it is fine."""
    if k <= PARETO_K_MAX:  # NaN warns
        return None
    return (
        f"method={method!r}: the Pareto k of the importance weights is {k:.2f}, above "
        f"{PARETO_K_MAX}: the importance-sampling correction is unreliable (its variance may be "
        "infinite); use method='hmc' (or 'nuts'), or more importance draws if k is below 1 "
        "(Vehtari et al. 2024, https://arxiv.org/abs/1507.02646)"
    )


def check_pareto_k(k: float, method: str, *, warn: bool = True, stacklevel: int = 2) -> bool:
    """Whether Pareto k is acceptable (at most 0.7); if not and ``warn``, a ConvergenceWarning.

    For methods that correct an approximation by Pareto-smoothed importance sampling:
    ``k <= 0.7`` means the smoothed weights' estimate converges at a practical rate (Vehtari et
    al. 2024, section 3); ``k > 0.7`` (or NaN) warns with the number and what to do.
    ``stacklevel`` counts from the caller of this function.
    """
    message = pareto_k_message(float(k), method)
    if message is not None and warn:
        warnings.warn(message, ConvergenceWarning, stacklevel=stacklevel + 1)
    return message is None


def _messages(
    found: dict[str, float],
    chains: int,
    method: str,
    target_accept: float | None = None,
    concentration: bool = True,
) -> list[str]:
    """The warnings for ``found``'s numbers; ``concentration``: the prior has one to raise (a
    Dirichlet's; not the smoothness prior's)."""
    out = []
    rhat = found.get("r_hat_max")
    if rhat is not None and not rhat <= R_HAT_MAX:
        out.append(
            f"method={method!r}: the largest r_hat is {rhat:.3f}, above {R_HAT_MAX}: the chains "
            "do not agree, the draws are not yet from the posterior; draw more (draws=, tune=) "
            f"or reparametrise the prior ({_REFERENCE})"
        )
    ess = found.get("ess_bulk_min")
    if ess is not None and not ess >= ESS_PER_CHAIN_MIN * chains:
        out.append(
            f"method={method!r}: the smallest bulk ESS is {ess:.0f} ({ess / chains:.0f} per chain, "
            f"below {ESS_PER_CHAIN_MIN}): too few effective draws for reliable r_hat and "
            f"summaries; draw more (draws=, tune=) ({_REFERENCE})"
        )
    divergences = found.get("divergences", 0)
    if divergences:
        was = "" if target_accept is None else f"from its {target_accept:g} "
        higher = 0.99 if target_accept is not None and target_accept >= 0.9 else 0.95
        out.append(
            f"method={method!r}: {divergences} divergent transitions after warm-up: the "
            f"posterior has regions the sampler cannot follow; raise target_accept {was}"
            f"(e.g. to {higher})" + (" or use a larger prior concentration" * concentration)
        )
    pareto_k = found.get("pareto_k")
    if pareto_k is not None:
        message = pareto_k_message(pareto_k, method)
        if message is not None:
            out.append(message)
    return out
