"""Discretisation shared by the numerical mechanisms: bins, value checks and exact bin masses.

A numerical mechanism randomises a real value ``v`` in ``[lo, hi]`` into a real report ``y``
with transfer density ``f(y | v)``.  To estimate a distribution, the domain is cut into ``B``
equal input bins ``A_i = [a_i, a_{i+1})`` and the report line into ``B'`` output bins
``C_j = [c_j, c_{j+1})``; the discretised channel is the exact probability that a report falls
in ``C_j`` for a value uniform within ``A_i``,

.. math:: P[i, j] = \\frac{1}{|A_i|} \\int_{A_i} \\int_{C_j} f(y \\mid v) \\, dy \\, dv,

the convention of the code of Ye, Wang, Zhang and Feng ("Revisiting EM-based Estimation for
Locally Differentially Private Protocols"; ``SW.py`` builds this matrix for the square wave
with a trapezoid per bin; here every integral is in closed form).  Two shapes of density cover
the four mechanisms:

* a *window* (square wave, piecewise): ``f = q + (p - q) 1[l(v) <= y <= l(v) + w]`` on a bounded
  output range, with ``l(v) = alpha + s v`` (:func:`window_channel`);
* a *location family* (Laplace, Gaussian): ``f(y | v) = g(y - v)`` with symmetric noise ``g``,
  whose CDF's antiderivative ``G1`` has a closed form (:func:`location_channel`).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from bayesldp._validation import one_d_array
from bayesldp.errors import ClippingWarning, InvalidInputError, InvalidTypeError


def check_domain(lo: Any, hi: Any, k: int | None = None) -> tuple[float, float]:
    """Validate a value domain ``[lo, hi]``: finite reals with ``lo < hi``, a finite width
    ``hi - lo``, and (given ``k``) ``k`` equal bins whose edges float64 tells apart."""
    out = []
    for name, value in (("lo", lo), ("hi", hi)):
        if isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating):
            raise InvalidTypeError(f"{name}: expected a finite real number, got {value!r}")
        if not math.isfinite(float(value)):
            raise InvalidInputError(f"{name}: must be finite, got {value}")
        out.append(float(value))
    if not out[0] < out[1]:
        raise InvalidInputError(f"lo, hi: need lo < hi, got lo = {out[0]}, hi = {out[1]}")
    if not math.isfinite(out[1] - out[0]):
        raise InvalidInputError(
            f"lo, hi: the width hi - lo of [{out[0]:g}, {out[1]:g}] overflows float64 (it is "
            "infinite); rescale the values to a smaller range, e.g. [0, 1]"
        )
    if k is not None and not np.all(np.diff(equal_bins(out[0], out[1], k)) > 0):
        raise InvalidInputError(
            f"lo, hi: [{out[0]!r}, {out[1]!r}] is narrower than float64 can split into k = {k} "
            "bins (some bin edges coincide); shift or rescale the values (e.g. subtract lo) "
            "so that the domain is wider than its float resolution"
        )
    return out[0], out[1]


def equal_bins(lo: float, hi: float, bins: int) -> np.ndarray:
    """``bins + 1`` equally spaced edges from ``lo`` to ``hi`` (the ends exact)."""
    edges = lo + (hi - lo) * (np.arange(bins + 1) / bins)
    edges[0], edges[-1] = lo, hi
    return edges


def check_real_values(
    values: Any, lo: float, hi: float, *, clip: bool = False, name: str = "values"
) -> np.ndarray:
    """Validate real values in ``[lo, hi]``: a non-empty 1-d array of finite numbers.

    Values outside ``[lo, hi]`` are an error unless ``clip=True``; they are then moved to the
    nearest end and a :class:`~bayesldp.errors.ClippingWarning` states how many.  NaN and
    infinite values are always an error naming how many there are.
    """
    arr = one_d_array(values, name, of=" of real values", unit="value", scalar=True)
    if arr.dtype.kind not in "iuf":
        raise InvalidTypeError(f"{name}: expected real numbers, got dtype {arr.dtype}")
    arr = arr.astype(float)
    bad = ~np.isfinite(arr)
    if bad.any():
        n_nan = int(np.isnan(arr).sum())
        raise InvalidInputError(
            f"{name}: {int(bad.sum())} of {arr.size} values are not finite ({n_nan} NaN, "
            f"{int(bad.sum()) - n_nan} infinite); remove or impute them first"
        )
    outside = (arr < lo) | (arr > hi)
    if outside.any():
        n_out = int(outside.sum())
        if not clip:
            raise InvalidInputError(
                f"{name}: {n_out} of {arr.size} values lie outside the domain [{lo:g}, {hi:g}] "
                f"(min {arr.min():g}, max {arr.max():g}); pass clip=True to move them to the "
                "nearest end, or build the mechanism with a wider lo, hi"
            )
        warnings.warn(
            f"{name}: clipped {n_out} of {arr.size} values to the domain [{lo:g}, {hi:g}]",
            ClippingWarning,
            stacklevel=3,
        )
        arr = np.clip(arr, lo, hi)
    return arr


def bin_index(values: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Index of the bin ``[e_j, e_{j+1})`` holding each value (the last bin is closed)."""
    idx = np.searchsorted(edges, values, side="right") - 1
    return np.clip(idx, 0, edges.size - 2)


# ---------------------------------------------------------------------------- window densities
def _ramp_integral(t: np.ndarray, h: np.ndarray) -> np.ndarray:
    """``F(t) = int_0^t clip(s, 0, h) ds``: 0, then ``t^2/2``, then ``h (t - h/2)``."""
    t = np.maximum(t, 0.0)
    return np.where(t < h, 0.5 * t * t, h * (t - 0.5 * h))


def window_channel(
    in_edges: np.ndarray,
    out_edges: np.ndarray,
    *,
    alpha: float,
    slope: float,
    width: float,
    p: float,
    q: float,
) -> np.ndarray:
    """Exact channel of a window density ``q + (p - q) 1[l(v) <= y <= l(v) + width]``.

    ``l(v) = alpha + slope * v``; the output edges must span exactly the output range where
    the density is ``q`` outside the window.  With ``u = l(v)`` (uniform on
    ``[u_0, u_1] = l(A_i)`` when ``v`` is uniform on ``A_i``) and ``h = |C_j|``,

    .. math::

        P[i, j] = q h + \\frac{p - q}{u_1 - u_0} \\left[J(0) - J(w)\\right], \\quad
        J(d) = F(c_{j+1} - d - u_0) - F(c_{j+1} - d - u_1),

    where ``J(d) = int_{u_0}^{u_1} int_{C_j} 1[y >= u + d] dy du`` and ``F`` is
    :func:`_ramp_integral` of height ``h``.
    """
    u0 = (alpha + slope * in_edges[:-1])[:, None]
    u1 = (alpha + slope * in_edges[1:])[:, None]
    c1 = out_edges[1:][None, :]
    h = np.diff(out_edges)[None, :]

    def big_j(d: float) -> np.ndarray:
        return _ramp_integral(c1 - d - u0, h) - _ramp_integral(c1 - d - u1, h)

    span = u1 - u0
    if width < 1e-7 * float(np.min(np.abs(span))):
        # a window far narrower than the bins (large epsilon): J(0) - J(w) cancels to noise in
        # float64 (and below float resolution, to nothing), so take its first-order form,
        # w |[u_0, u_1] cap C_j|, exact up to O(w^2) (the window straddling a bin edge)
        inside = np.clip(c1 - u0, 0.0, h) - np.clip(c1 - u1, 0.0, h)
        overlap = width * np.abs(inside) / np.abs(span)
    else:
        overlap = (big_j(0.0) - big_j(width)) / span
    return q * h + (p - q) * np.clip(overlap, 0.0, h)


# ---------------------------------------------------------------------------- location families
def location_channel(
    in_edges: np.ndarray, out_edges: np.ndarray, tail: Callable[[np.ndarray], np.ndarray]
) -> np.ndarray:
    """Exact channel of ``y = v + noise`` for symmetric noise with CDF ``G``.

    ``tail(x)`` (for ``x >= 0``, vectorised, ``tail(inf) = 0``) is ``G1(-x)``, where
    ``G1(x) = int_{-inf}^x G`` is the CDF's antiderivative; symmetry gives
    ``G1(x) = x + G1(-x)``.  With ``K(c) = int_{A_i} G(c - v) dv = G1(c - a_i) - G1(c - a_{i+1})``,
    ``P[i, j] = (K(c_{j+1}) - K(c_j)) / |A_i|``.  Output bins wholly left or right of the input
    bin use the tail terms only (the linear parts cancel exactly), so tiny far-tail masses keep
    their relative precision; ``c_0 = -inf`` and ``c_{B'} = +inf`` are allowed.
    """
    a0 = in_edges[:-1][:, None]
    a1 = in_edges[1:][:, None]
    width = a1 - a0
    c0 = out_edges[:-1][None, :]
    c1 = out_edges[1:][None, :]

    def safe_tail(x: np.ndarray) -> np.ndarray:
        x = np.abs(x)
        finite = np.isfinite(x)
        return np.where(finite, tail(np.where(finite, x, 0.0)), 0.0)

    def big_k(c: np.ndarray) -> np.ndarray:
        """``K(c)``, with ``K(-inf) = 0`` and ``K(+inf) = |A_i|``."""
        with np.errstate(invalid="ignore"):
            lin = np.maximum(c - a0, 0.0) - np.maximum(c - a1, 0.0)
            val = lin + safe_tail(c - a0) - safe_tail(c - a1)
        val = np.where(c == np.inf, width, val)
        return np.where(c == -np.inf, 0.0, val)

    with np.errstate(invalid="ignore"):
        right = c0 >= a1  # output bin at or right of the input bin
        left = c1 <= a0  # output bin at or left of it
        mass_right = (safe_tail(c0 - a1) - safe_tail(c0 - a0)) - (
            safe_tail(c1 - a1) - safe_tail(c1 - a0)
        )
        mass_left = (safe_tail(a0 - c1) - safe_tail(a1 - c1)) - (
            safe_tail(a0 - c0) - safe_tail(a1 - c0)
        )
    mass = np.where(right, mass_right, np.where(left, mass_left, big_k(c1) - big_k(c0)))
    return np.maximum(mass, 0.0) / width
