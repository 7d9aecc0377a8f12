"""RAPPOR's own decoding (non-negative LASSO, then least squares) and the tally it reads.

:func:`rappor_decode` is google/rappor's decoding (``analysis/R/decode.R``) of the per-cohort bit
counts :meth:`RAPPOR.bit_counts`; :class:`RapporTally`, the tally of :meth:`RAPPOR.tally`, carries
those counts beside the likelihood rows, so ``bayesldp.estimate(tally, "rappor_decode")``
(:func:`decode_tally`) runs the same decoding on a tally.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats

from bayesldp.errors import InvalidInputError, InvalidTypeError, NotSupportedError
from bayesldp.estimators.result import Estimate, is_on_simplex
from bayesldp.mechanisms.rappor.mechanism import RAPPOR
from bayesldp.mechanisms.rappor.tally import RapporTally
from bayesldp.tally import Tally


@dataclass(frozen=True)
class RapporDecoding:
    """RAPPOR's decoding of a collection (see :func:`rappor_decode`).

    Attributes
    ----------
    frequencies : ndarray (K,)
        Least-squares frequencies of the selected categories, 0 for the others.
    std_errors : ndarray (K,)
        Their standard errors from the least-squares fit (0 for unselected categories: the
        selection fixed them at 0).
    selected : ndarray of bool (K,)
        Categories kept by the non-negative LASSO.
    significant : ndarray of bool (K,)
        Selected categories whose estimate is significant at ``alpha / K`` (one-sided,
        Bonferroni, as google/rappor's ``decode.R``).
    labels : tuple of str
        The categories' names.
    """

    frequencies: np.ndarray
    std_errors: np.ndarray
    selected: np.ndarray
    significant: np.ndarray
    labels: tuple[str, ...]


def _nonneg_lasso(design: np.ndarray, y: np.ndarray, lam: float, sweeps: int = 500) -> np.ndarray:
    """``argmin_{beta >= 0} ||y - D beta||^2 / 2 + lam sum(beta)`` by cyclic coordinate descent
    (the objective is separable in its non-smooth part, so each coordinate update is exact:
    ``beta_j = max(0, beta_j + (D_j^T r - lam) / ||D_j||^2)``)."""
    k = design.shape[1]
    norms = (design**2).sum(axis=0)
    beta = np.zeros(k)
    resid = y.astype(float).copy()
    for _ in range(sweeps):
        change = 0.0
        for j in range(k):  # over categories (K), not users
            if norms[j] == 0:
                continue
            new = max(0.0, beta[j] + (design[:, j] @ resid - lam) / norms[j])
            step = new - beta[j]
            if step != 0.0:
                resid -= step * design[:, j]
                beta[j] = new
                change = max(change, abs(step) * math.sqrt(norms[j]))
        if change <= 1e-9 * (1.0 + math.sqrt(float(y @ y))):
            break
    return beta


def rappor_decode(
    mechanism: RAPPOR, counts: Any, *, lambda_ratio: float = 1e-4, alpha: float = 0.05
) -> RapporDecoding:
    """RAPPOR's own decoding: non-negative LASSO selection, then least squares.

    google/rappor ``analysis/R/decode.R``: the per-cohort bit counts are debiased,
    ``t[(c, j)] = (Y_cj - n_c r_0)/(r_1 - r_0)`` (``EstimateBloomCounts``), the candidates are
    selected by a LASSO with non-negative coefficients on the Bloom design (``FitLasso``:
    glmnet with ``lower.limits = 0``, its path run to the smallest penalty), and the selected
    ones refitted by ordinary least squares (``lm``) whose standard errors are reported.  Here the
    LASSO is a small coordinate descent (scikit-learn is not a library dependency) at the
    penalty ``lambda_ratio * max_j D_j^T t`` (glmnet's default ``lambda.min.ratio``, 1e-4, the end
    of its path); the least squares uses the design ``X[(c, j), v] = B_c(v)_j`` (a candidate's
    count in a cohort, ``N_v / m`` on average) with ``sigma^2 = RSS / (m k - p)``.  The design
    need not have full column rank (more candidates than ``m k`` bits, the usual case of a large
    candidate set): the LASSO selects among them; only the unbiased oracle needs full rank.
    ``bayesldp.estimate(tally, "rappor_decode")`` runs this on a :class:`RapporTally`
    (:func:`decode_tally`).

    Parameters
    ----------
    mechanism : RAPPOR
        The mechanism that produced the reports.
    counts : array (m, 1 + num_bits)
        :meth:`RAPPOR.bit_counts` (google/rappor's counts layout).
    lambda_ratio : float, default 1e-4
        The LASSO penalty relative to the smallest one selecting nothing.
    alpha : float, default 0.05
        Family-wise level of the significance flags (Bonferroni over ``K``).

    Examples
    --------
    >>> import bayesldp
    >>> mech = bayesldp.RAPPOR(3, 2.0, candidates=["a", "b", "c"], cohorts=4)
    >>> reports = mech.perturb([0, 1, 2, 0] * 250, rng=0)
    >>> decoding = bayesldp.rappor_decode(mech, mech.bit_counts(reports))
    >>> decoding.labels, decoding.frequencies.round(2).tolist()
    (('a', 'b', 'c'), [0.55, 0.19, 0.18])
    """
    if not isinstance(mechanism, RAPPOR):
        raise InvalidTypeError(
            f"mechanism: expected a bayesldp.RAPPOR, got {type(mechanism).__name__}"
        )
    m, kb = mechanism.cohorts, mechanism.num_bits
    counts = np.asarray(counts)
    if counts.shape != (m, 1 + kb) or counts.dtype.kind not in "iu":
        raise InvalidInputError(
            f"counts: expected integer counts of shape ({m}, {1 + kb}) (per cohort: reports, "
            f"then the {kb} bit sums), got {counts.dtype} {counts.shape}"
        )
    n_c = counts[:, 0].astype(float)
    n = float(n_c.sum())
    if n <= 0 or counts.min() < 0 or np.any(counts[:, 1:] > counts[:, :1]):
        raise InvalidInputError(
            "counts: need counts >= 0, at least one report, and bit sums at most the cohort's "
            "reports"
        )
    if not 0.0 < lambda_ratio < 1.0:
        raise InvalidInputError(f"lambda_ratio: must lie in (0, 1), got {lambda_ratio}")
    if not 0.0 < alpha < 1.0:
        raise InvalidInputError(f"alpha: must lie in (0, 1), got {alpha}")
    return _decode(mechanism, counts, lambda_ratio, alpha)


def _decode(
    mechanism: RAPPOR, counts: np.ndarray, lambda_ratio: float, alpha: float
) -> RapporDecoding:
    """:func:`rappor_decode` on checked counts."""
    m = mechanism.cohorts
    n_c = counts[:, 0].astype(float)
    n = float(n_c.sum())
    t = ((counts[:, 1:] - n_c[:, None] * mechanism.r0) / (mechanism.r1 - mechanism.r0)).reshape(-1)
    # per-cohort Bloom bits (other: its bit rate); the LASSO needs no full rank
    design = mechanism._design_matrix() * m
    lam_max = float(np.max(design.T @ t))
    beta = (
        _nonneg_lasso(design, t, lambda_ratio * lam_max) if lam_max > 0 else np.zeros(mechanism.k)
    )
    selected = beta > 0
    freq = np.zeros(mechanism.k)
    se = np.zeros(mechanism.k)
    significant = np.zeros(mechanism.k, dtype=bool)
    p = int(selected.sum())
    if p:
        x_sel = design[:, selected]
        coef, *_ = np.linalg.lstsq(x_sel, t, rcond=None)
        resid = t - x_sel @ coef
        dof = max(1, design.shape[0] - p)
        sigma2 = float(resid @ resid) / dof
        cov = sigma2 * np.linalg.pinv(x_sel.T @ x_sel)
        se_sel = np.sqrt(np.clip(np.diag(cov), 0.0, None))
        freq[selected] = coef * m / n
        se[selected] = se_sel * m / n
        with np.errstate(divide="ignore", invalid="ignore"):
            tstat = np.where(se_sel > 0, coef / np.where(se_sel > 0, se_sel, 1.0), 0.0)
        pval = stats.t.sf(tstat, dof)
        significant[selected] = pval < alpha / mechanism.k
    return RapporDecoding(freq, se, selected, significant, mechanism.labels)


def decode_tally(tally: Tally, *, lambda_ratio: float = 1e-4, alpha: float = 0.05) -> Estimate:
    """RAPPOR's own decoding of a RAPPOR tally: ``bayesldp.estimate(tally, "rappor_decode")``.

    :func:`rappor_decode` (non-negative LASSO selection, then least squares; google/rappor
    ``analysis/R/decode.R``) on the per-cohort bit counts the :class:`RapporTally` carries.

    Parameters
    ----------
    tally : RapporTally
        From :meth:`RAPPOR.tally`, or a sum of such tallies of one mechanism.
    lambda_ratio, alpha : float
        As in :func:`rappor_decode`.

    Returns
    -------
    Estimate
        ``frequencies`` the least-squares frequencies (0 for unselected candidates; not
        constrained to the simplex), ``std_errors`` their least-squares standard errors (0 for
        unselected candidates), ``details``: ``selected`` and ``significant`` (bool arrays,
        see :class:`RapporDecoding`), ``labels``, ``lambda_ratio``, ``alpha``.

    Raises
    ------
    NotSupportedError
        When the tally is not a RAPPOR tally carrying bit counts (another mechanism's, a merge
        of mechanisms, or a RAPPOR tally read back from a tally store, which keeps only the
        likelihood rows).
    """
    if not isinstance(tally, Tally):
        raise InvalidTypeError(f"tally: expected a bayesldp.Tally, got {type(tally).__name__}")
    if not isinstance(tally, RapporTally):
        mech = tally.mechanism
        what = (
            "a RAPPOR tally without its per-cohort bit counts (a plain Tally: merged with "
            "another mechanism's tally or read back from a tally store)"
            if isinstance(mech, RAPPOR)
            else f"a tally of {tally.family!r}"
        )
        raise NotSupportedError(
            f"method 'rappor_decode': tally is {what}; it needs the RapporTally of "
            "RAPPOR.tally(reports) (or a sum of them), which carries the bit counts; or call "
            "rappor_decode(mechanism, mechanism.bit_counts(reports))"
        )
    decoded = rappor_decode(
        tally.mechanism, tally.bit_counts, lambda_ratio=lambda_ratio, alpha=alpha
    )
    return Estimate(
        decoded.frequencies,
        decoded.std_errors,
        "rappor_decode",
        on_simplex=is_on_simplex(decoded.frequencies),
        details={
            "selected": decoded.selected,
            "significant": decoded.significant,
            "labels": decoded.labels,
            "lambda_ratio": lambda_ratio,
            "alpha": alpha,
        },
    )
