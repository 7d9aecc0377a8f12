"""Subset selection for RRRR in AdOBEst-LDP.

Aydın and Yıldırım, "Bayesian Frequency Estimation Under Local Differential Privacy With an
Adaptive Randomized Response Mechanism", ACM TKDD 2025, section "Subset selection in RRRR".

Given a posterior draw ``theta``, the adaptive rule sorts ``theta`` decreasingly (``sigma``) and
considers the top-k sets ``S_k = {sigma(1), ..., sigma(k)}``, ``k = 0..K-1``; it picks

.. math:: k^* = \\arg\\max_{k \\in \\{0, \\dots, K-1\\}} U(\\theta, S_k, \\varepsilon)

for one of the six utilities of :mod:`bayesldp.adaptive.utilities` (ties -- scores within a
relative ``1e-12`` of the best, so that rounding cannot decide -- go to the smallest ``k``),
with ``eps1 = eps1_fraction * eps`` and ``eps2`` from the paper's formula
(:func:`bayesldp.mechanisms.rrrr.rrrr_eps2`).  The baselines of the paper's experiments:

* semi-adaptive (``alpha`` in (0, 1]): ``eps1 = eps`` (responses outside ``S`` are uniform) and
  ``S`` the smallest top set holding mass ``>= alpha``; ``alpha = 1`` gives ``S`` empty, i.e.
  plain SRR (= GRR);
* non-adaptive: ``S`` empty, ``eps2 = eps``: plain GRR(K, eps).

These numpy functions are the reference; the survey loop runs the compiled equivalents in
:mod:`bayesldp.adaptive._kernels`, tested to make the same choices.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np

from bayesldp._validation import check_epsilon, check_probability
from bayesldp.adaptive._kernels import TIE_RTOL
from bayesldp.adaptive.utilities import UTILITIES, get_utility
from bayesldp.errors import InvalidInputError, InvalidTypeError
from bayesldp.mechanisms.rrrr import RRRR, rrrr_eps2

__all__ = [
    "candidate_channels",
    "candidate_params",
    "non_adaptive_subset",
    "select_subset",
    "semi_adaptive_subset",
    "sorted_order",
]


def _check_theta(theta: Any) -> np.ndarray:
    arr = np.asarray(theta)
    if arr.dtype.kind == "b" or arr.dtype.kind not in "iuf":
        raise InvalidTypeError(f"theta: expected a vector of probabilities, got dtype {arr.dtype}")
    arr = arr.astype(float)
    if arr.ndim != 1 or arr.shape[0] < 2:
        raise InvalidInputError(f"theta: expected a 1-d vector of K >= 2 entries, got {arr.shape}")
    if not np.all(np.isfinite(arr)) or arr.min() < 0:
        raise InvalidInputError("theta: entries must be finite and >= 0")
    total = arr.sum()
    if abs(total - 1.0) > 1e-6:
        raise InvalidInputError(f"theta: must sum to 1 (a point of the simplex), sums to {total}")
    return arr


def sorted_order(theta: Any) -> np.ndarray:
    """Categories by decreasing ``theta``; ties keep the smaller category first (stable)."""
    return np.argsort(-np.asarray(theta, dtype=float), kind="stable")


def candidate_params(k: int, epsilon: float, eps1: float) -> np.ndarray:
    """RRRR constants of the candidates ``|S| = 0..k-1``, shape (4, k).

    Rows are ``keep_1 = a/(a+s)``, ``other_1 = 1/(a+s)``, ``keep_2 = b/(b+m-1)``,
    ``other_2 = 1/(b+m-1)`` (``a = e^eps1``, ``b = e^eps2(s)``, ``m = k - s``), evaluated with the
    same floating-point expressions as :func:`bayesldp.mechanisms.rrrr.rrrr_channel`, so channels
    built from them are bit-identical to it.
    """
    out = np.empty((4, k))
    ea1 = math.exp(-eps1)
    for s in range(k):
        m = k - s
        eps2 = rrrr_eps2(epsilon, eps1, s, k)
        ea2 = math.exp(-eps2)
        out[0, s] = 1.0 / (1.0 + s * ea1)
        out[1, s] = ea1 / (1.0 + s * ea1)
        out[2, s] = 1.0 / (1.0 + (m - 1) * ea2)
        out[3, s] = ea2 / (1.0 + (m - 1) * ea2)
    return out


def candidate_channels(order: Any, epsilon: float, eps1: float) -> np.ndarray:
    """The K candidate RRRR channels ``P_{S_s}`` for ``S_s = order[:s]``, s = 0..K-1.

    Returns an array of shape (K, K, K): ``out[s]`` equals
    ``rrrr_channel(K, order[:s], eps1, rrrr_eps2(epsilon, eps1, s, K))`` bit for bit (the same
    constants placed by broadcasting in sorted coordinates, then permuted back), about 40 times
    faster than K calls at K = 20 (see tests/adaptive/test_selection.py).

    Examples
    --------
    >>> import numpy as np
    >>> from bayesldp.adaptive import candidate_channels
    >>> channels = candidate_channels([2, 0, 1], 1.0, 0.8)
    >>> channels.shape, bool(np.allclose(channels.sum(axis=2), 1))
    ((3, 3, 3), True)
    """
    order = np.asarray(order, dtype=np.int64)
    k = order.shape[0]
    p = candidate_params(k, epsilon, eps1)
    s = np.arange(k)[:, None, None]
    i = np.arange(k)[None, :, None]
    j = np.arange(k)[None, None, :]
    k1, o1, k2, o2 = (p[r][:, None, None] for r in range(4))
    m = (k - s).astype(float)
    diag = i == j
    col_in_s = j < s
    row_in_s = i < s
    in_s_col = np.where(diag, k1, o1)
    out_col = np.where(row_in_s, o1 / m, np.where(diag, k1 * k2, k1 * o2))
    sorted_stack = np.where(col_in_s, in_s_col, out_col)
    rank = np.empty(k, dtype=np.int64)
    rank[order] = np.arange(k)
    return np.ascontiguousarray(sorted_stack[:, rank[:, None], rank[None, :]])


def select_subset(
    theta: Any,
    epsilon: float,
    utility: str = "fisher",
    eps1_fraction: float = 0.8,
) -> tuple[tuple[int, ...], int, np.ndarray]:
    """Adaptive subset of RRRR for a posterior draw (Aydın and Yıldırım 2025, subset selection).

    Parameters
    ----------
    theta : array_like, shape (K,)
        A point of the simplex (a posterior draw).
    epsilon : float
        Privacy budget of RRRR.
    utility : str
        One of ``fisher, entropy, expected_tv, tv, mse, honest`` (or ``U1`` to ``U6``).
    eps1_fraction : float
        ``eps1 = eps1_fraction * epsilon``, in (0, 1] (the paper uses 0.8 and 0.9).

    Returns
    -------
    subset : tuple of int
        ``S = sigma(1..k)``, the top-k categories (in decreasing order of ``theta``).
    k : int
        ``|S|``, the argmax over ``k = 0..K-1`` of the utility (ties, i.e. within a relative
        ``1e-12`` of the best score: the smallest ``k``).
    scores : ndarray, shape (K,)
        The utility of every candidate (``-inf`` for a singular channel under ``fisher``).

    Examples
    --------
    >>> import numpy as np
    >>> from bayesldp.adaptive import select_subset
    >>> theta = np.array([0.6, 0.2, 0.1, 0.07, 0.03])
    >>> subset, k, utilities = select_subset(theta, 4.0)
    >>> subset, k, utilities.shape
    ((), 0, (5,))
    """
    theta = _check_theta(theta)
    epsilon = check_epsilon(epsilon)
    fn = get_utility(utility)
    frac = check_probability(eps1_fraction, "eps1_fraction")
    order = sorted_order(theta)
    stack = candidate_channels(order, epsilon, frac * epsilon)
    scores = np.asarray(fn(theta, stack), dtype=float)
    top = scores.max()
    k = int(np.flatnonzero(scores >= top - TIE_RTOL * abs(top))[0])
    return tuple(int(v) for v in order[:k]), k, scores


def semi_adaptive_subset(theta: Any, alpha: float) -> tuple[int, ...]:
    """Semi-adaptive subset: the smallest top set holding mass ``>= alpha``.

    A baseline of Aydın and Yıldırım 2025.

    Used with ``eps1 = eps`` (then ``eps2 = 0``: responses outside ``S`` are uniform).
    ``alpha = 1`` gives ``S`` empty (plain SRR, the non-adaptive baseline).  When only the whole
    domain holds mass ``alpha`` (RRRR needs ``|S| <= K - 1``), ``S`` is empty as well.

    Examples
    --------
    The top categories holding three quarters of the mass:

    >>> from bayesldp.adaptive import semi_adaptive_subset
    >>> semi_adaptive_subset([0.6, 0.2, 0.1, 0.07, 0.03], 0.75)
    (0, 1)
    """
    theta = _check_theta(theta)
    alpha = check_probability(alpha, "alpha")
    if alpha >= 1.0:
        return ()
    order = sorted_order(theta)
    cum = np.cumsum(theta[order])[:-1]
    hit = np.flatnonzero(cum >= alpha)
    if hit.size == 0:
        return ()
    return tuple(int(v) for v in order[: hit[0] + 1])


def non_adaptive_subset(theta: Any = None) -> tuple[int, ...]:
    """The non-adaptive baseline: ``S`` empty with ``eps2 = eps`` (plain GRR).

    Examples
    --------
    >>> from bayesldp.adaptive import non_adaptive_subset
    >>> non_adaptive_subset([0.6, 0.3, 0.1])
    ()
    """
    return ()


#: names accepted as ``utility`` by :class:`~bayesldp.adaptive.survey.AdaptiveSurvey`
RULES = (*UTILITIES, "semi_adaptive", "non_adaptive", "lookahead")


def subset_masks(subsets: Any, n: int, k: int, epsilon: float, eps1: float) -> np.ndarray:
    """The (n, K) boolean masks of the subsets ``n`` client reports were made with.

    ``subsets``: an :class:`~bayesldp.RRRR` of this ``k``/``epsilon``/``eps1``, one subset for
    all (a sequence of categories or a boolean mask of shape (K,)), one subset per report (a
    sequence of n sequences) or a boolean (n, K) array; each is checked (|S| <= K - 1).
    """
    if isinstance(subsets, RRRR):
        if subsets.k != k or subsets.epsilon != epsilon or subsets.eps1 != eps1:
            raise InvalidInputError(
                f"subsets: the RRRR {subsets!r} does not match this survey (k={k}, "
                f"epsilon={epsilon}, eps1={eps1})"
            )
        subsets = subsets.subset
    if isinstance(subsets, np.ndarray) and subsets.dtype == np.bool_:
        if subsets.shape == (k,):
            masks = np.broadcast_to(subsets, (n, k)).copy()
        elif subsets.shape == (n, k):
            masks = subsets.copy()
        else:
            raise InvalidInputError(
                f"subsets: a boolean mask must have shape ({k},) or ({n}, {k}), got {subsets.shape}"
            )
        if np.any(masks.sum(axis=1) >= k):
            raise InvalidInputError(f"subsets: |S| must be at most k - 1 = {k - 1}")
        return masks
    if isinstance(subsets, str | bytes) or not hasattr(subsets, "__len__"):
        raise InvalidTypeError(
            "subsets: expected None, an RRRR, a subset (sequence of categories), one subset "
            f"per report or a boolean mask, got {type(subsets).__name__}"
        )
    items = list(subsets)
    nested = [not isinstance(v, numbers.Integral) and hasattr(v, "__len__") for v in items]
    if items and all(nested):
        if len(items) != n:
            raise InvalidInputError(
                f"subsets: got {len(items)} subsets for {n} reports (give one per report or "
                "one for all)"
            )
    elif any(nested):
        raise InvalidInputError(
            "subsets: mixes categories and sequences; give one subset (a sequence of "
            "categories) or one subset per report"
        )
    else:
        items = [items]
    masks = np.zeros((len(items), k), dtype=np.bool_)
    for i, item in enumerate(items):
        members = RRRR(k, epsilon, item, eps1=eps1).subset  # validates
        masks[i, list(members)] = True
    if masks.shape[0] != n:
        masks = np.broadcast_to(masks[0], (n, k)).copy()
    return masks
