"""Convergence checks of a fit, with PyMC's thresholds: the numbers, and a warning for each.

* ``r_hat_max`` above 1.01 (rank-normalised split R-hat, Vehtari et al. 2021): the chains
  disagree;
* ``ess_bulk_min`` below 100 per chain: too few effective draws for stable summaries;
* ``divergences`` above 0 (Hamiltonian samplers): the sampler met curvature it could not follow.

Each failed check is a :class:`~bayesldp.errors.ConvergenceWarning` (a ``UserWarning``) naming
the number and what to do; the numbers are in the posterior's attrs whether or not they warn.
Independent draws (``method="exact"``) are not checked.  The checks cover ``theta`` and, under
the adaptive prior, its concentration ``a``.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from bayesldp.errors import ConvergenceWarning

R_HAT_MAX = 1.01
ESS_PER_CHAIN_MIN = 100


def diagnose(idata: Any, method: str, *, warn: bool = True) -> dict[str, float]:
    """Record r_hat, bulk ESS and divergences of ``idata`` in its posterior attrs; warn."""
    from bayesldp.bayes._arviz import import_arviz

    if method == "exact":
        return {}
    az = import_arviz()
    posterior = idata.posterior
    chains = posterior.sizes["chain"]
    found: dict[str, float] = {}
    with warnings.catch_warnings(), np.errstate(invalid="ignore", divide="ignore"):
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
    posterior.attrs.update(found)
    if warn:
        for message in _messages(found, chains, method):
            warnings.warn(message, ConvergenceWarning, stacklevel=3)
    return found


def _messages(found: dict[str, float], chains: int, method: str) -> list[str]:
    out = []
    rhat = found.get("r_hat_max")
    if rhat is not None and not rhat <= R_HAT_MAX:
        out.append(
            f"method={method!r}: the largest r_hat is {rhat:.3f}, above {R_HAT_MAX}: the chains "
            "do not agree; draw more (draws=, tune=) or reparametrise the prior"
        )
    ess = found.get("ess_bulk_min")
    if ess is not None and not ess >= ESS_PER_CHAIN_MIN * chains:
        out.append(
            f"method={method!r}: the smallest bulk ESS is {ess:.0f} ({ess / chains:.0f} per chain, "
            f"below {ESS_PER_CHAIN_MIN}): too few effective draws; draw more (draws=, tune=)"
        )
    divergences = found.get("divergences", 0)
    if divergences:
        out.append(
            f"method={method!r}: {divergences} divergent transitions after warm-up: the "
            "posterior has regions the sampler cannot follow; raise target_accept (e.g. 0.95) "
            "or use a larger prior concentration"
        )
    return out
