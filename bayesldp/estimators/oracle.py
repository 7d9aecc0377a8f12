"""The unbiased frequency oracle of a tally's mechanism, with its exact standard errors."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from bayesldp.errors import InvalidTypeError, NotSupportedError
from bayesldp.estimators.result import Estimate, is_on_simplex
from bayesldp.tally import Tally

if TYPE_CHECKING:
    from bayesldp.mechanisms.base import Mechanism


def check_tally(tally: object) -> Tally:
    """Raise :class:`~bayesldp.InvalidTypeError` unless ``tally`` is a :class:`~bayesldp.Tally`."""
    if not isinstance(tally, Tally):
        raise InvalidTypeError(f"tally: expected a bayesldp.Tally, got {type(tally).__name__}")
    return tally


def require_mechanism(tally: Tally, method: str) -> Mechanism:
    """The tally's single mechanism, or a clear error for mixed-family tallies."""
    if tally.mechanism is None:
        raise NotSupportedError(
            f"method {method!r}: the tally mixes reports of several mechanisms of family "
            f"{tally.family!r} (mechanism=None), so no single unbiased oracle applies; use "
            f"method='mle', 'em' or 'em_mr', which read the likelihood rows of any tally"
        )
    return tally.mechanism


def _finite(values: np.ndarray, what: str, mechanism: Mechanism) -> np.ndarray:
    values = np.asarray(values, dtype=float)
    if not np.all(np.isfinite(values)):
        raise NotSupportedError(
            f"{mechanism!r} returned non-finite {what}; the oracle is unusable at these "
            f"parameters (try method='mle')"
        )
    return values


def unbiased(tally: Tally) -> tuple[np.ndarray, np.ndarray]:
    """The unbiased estimate ``f`` and its plug-in standard deviation.

    The standard deviation is ``sqrt(oracle_variance(clip(f, 0, 1), n))``: the mechanism's exact
    variance formula evaluated at the estimate clipped into ``[0, 1]`` (the clipping is only for
    the variance; ``f`` itself is returned unchanged).
    """
    mechanism = require_mechanism(check_tally(tally), "oracle")
    f = _finite(mechanism.unbiased_frequencies(tally), "frequencies", mechanism)
    var = _finite(mechanism.oracle_variance(np.clip(f, 0.0, 1.0), tally.n), "variances", mechanism)
    return f, np.sqrt(np.maximum(var, 0.0))


def oracle(tally: Tally) -> Estimate:
    """The mechanism's unbiased frequency oracle (Wang et al., USENIX Security 2017).

    For a pure protocol ``f_x = (h(x)/n - q*) / (p* - q*)`` with ``h(x)`` the support count;
    other mechanisms use their own unbiased estimator (``mechanism.unbiased_frequencies``).
    The estimate sums to 1 in expectation but may be negative; standard errors are the exact
    oracle standard deviations at the estimate clipped into ``[0, 1]`` (plug-in).

    Raises
    ------
    NotSupportedError
        For a tally that mixes mechanisms (``tally.mechanism is None``): use ``mle`` or ``em``.
    """
    f, sd = unbiased(tally)
    return Estimate(f, sd, "oracle", on_simplex=is_on_simplex(f))
