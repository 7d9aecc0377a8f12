"""Checking :func:`bayesldp.fit`'s arguments the way a PyMC user writes them.

``fit(tally, 200)`` is 200 draws, as ``pm.sample(200)``; the old ``fit(tally, prior)`` spelling
is refused with a message naming ``prior=``, never read as a Dirichlet(200) that swamps the data.
An option the chosen method does not take is named with the methods that do take it (or, if none
does, with the nearest name ``fit`` knows), so ``nuts_sampler="pymc"`` under ``method="auto"``
does not blame a method the user never chose.
"""

from __future__ import annotations

import difflib
import importlib
import numbers
from collections.abc import Mapping
from typing import Any

from bayesldp.errors import InvalidInputError, InvalidTypeError

__all__ = ["BACKENDS", "check_draws", "check_options"]

#: method -> the module whose ``sample`` it calls (and whose ``OPTIONS`` it takes)
BACKENDS: dict[str, str] = {
    "exact": "bayesldp.bayes.exact",
    "hmc": "bayesldp.bayes.hmc",
    "nuts": "bayesldp.bayes.nuts",
    "sgld": "bayesldp.bayes.sgld",
    "laplace": "bayesldp.bayes.laplace",
    "prior_mh": "bayesldp.bayes.prior_mh",
}
#: what ``fit(method=...)`` accepts: a backend or "auto" (study specs check ``[bayes].method``
#: against it when they load)
FIT_METHODS = ("auto", *BACKENDS)

#: fit's own keywords (for suggestions)
FIT_KEYWORDS = (
    "draws", "tune", "chains", "prior", "method", "random_seed", "progressbar", "cores", "labels",
    "compute_convergence_checks", "idata_kwargs",
)  # fmt: skip
#: PyMC's ``pm.sample`` keywords that fit answers differently, with the answer
PYMC_ONLY = {
    "return_inferencedata": "fit always returns an arviz.InferenceData",
    "discard_tuned_samples": "fit never returns the warm-up draws",
    "step": "fit chooses its sampler by method= ('auto', 'exact', 'hmc', 'nuts', 'sgld', "
    "'laplace', 'prior_mh')",
    "initvals": "fit starts its chains itself (method='nuts' takes init=)",
}


def check_draws(draws: Any) -> None:
    """Refuse what is not a number of draws in ``fit``'s second place (the old prior slot)."""
    if isinstance(draws, numbers.Integral) and not isinstance(draws, bool):
        return
    raise InvalidTypeError(
        f"draws: expected an integer >= 1, the draws per chain (fit's second argument, as "
        f"pm.sample's), got {draws!r}; a prior is given by name: fit(tally, prior={draws!r})"
    )


def method_options(resolved: str) -> tuple[str, ...]:
    """The options the backend of method ``resolved`` takes (its module's ``OPTIONS``; none
    when the module cannot be imported, e.g. an optional backend's dependency is missing)."""
    try:
        module = importlib.import_module(BACKENDS[resolved])
    except ImportError:
        return ()
    return tuple(getattr(module, "OPTIONS", ()))


def check_options(
    method: str, resolved: str, auto_reason: str | None, options: Mapping[str, Any]
) -> None:
    """Raise :class:`InvalidInputError` for the first option method ``resolved`` does not take."""
    unknown = sorted(set(options) - set(method_options(resolved)))
    if not unknown:
        return
    name = unknown[0]
    takers = [m for m in BACKENDS if m != resolved and name in method_options(m)]
    chosen = f"method {resolved!r}"
    if method != resolved:
        chosen += f" (chosen by method={method!r}{': ' + auto_reason if auto_reason else ''})"
    if takers:
        raise InvalidInputError(
            f"options: {name!r} is not an option of {chosen}; it is an option of "
            f"{' and '.join(repr(m) for m in takers)}: pass method={takers[0]!r} to use it"
        )
    if name in PYMC_ONLY:
        raise InvalidInputError(f"options: {name!r} is PyMC's, not fit's: {PYMC_ONLY[name]}")
    known = {*FIT_KEYWORDS, *(o for m in BACKENDS for o in method_options(m))}
    close = difflib.get_close_matches(name, sorted(known), n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    raise InvalidInputError(
        f"options: {name!r} is not an option of fit or of any method{hint} ({chosen} takes "
        f"{list(method_options(resolved))})"
    )
