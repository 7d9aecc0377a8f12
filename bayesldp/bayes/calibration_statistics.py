"""The statistics of simulation-based calibration: ranks, their uniformity, interval coverage
and thinning to the effective sample size.

:func:`rank_statistics` and :func:`loglik_ranks` rank the true ``theta`` (or its
log-likelihood) among posterior draws, ties broken at random; :func:`rank_histogram` and
:func:`rank_uniformity_test` test the ranks of many replications for uniformity;
:func:`interval_contains` checks central credible intervals; :func:`effective_sample_size` and
:func:`thin_by_ess` thin correlated chains before ranking (Talts et al., Algorithm 2).  The
theory and the harness that runs replications are in :mod:`bayesldp.bayes.calibration`, which
re-exports these names.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats

from bayesldp._validation import RNGLike, as_generator, check_int, check_open_unit
from bayesldp.errors import InvalidInputError, InvalidTypeError
from bayesldp.tally import Tally

__all__ = [
    "ThinnedDraws",
    "effective_sample_size",
    "interval_contains",
    "loglik_ranks",
    "rank_histogram",
    "rank_statistics",
    "rank_uniformity_test",
    "thin_by_ess",
]


# ---------------------------------------------------------------------------- checks


def _float_array(value: Any, name: str, min_ndim: int) -> np.ndarray:
    arr = np.asarray(value)
    if arr.dtype.kind not in "iuf" or arr.dtype.kind == "b":
        raise InvalidTypeError(f"{name}: expected an array of numbers, got dtype {arr.dtype}")
    arr = arr.astype(float)
    if arr.ndim < min_ndim:
        raise InvalidInputError(f"{name}: expected at least {min_ndim} dimensions, got {arr.shape}")
    if arr.size == 0:
        raise InvalidInputError(f"{name}: is empty")
    if not np.all(np.isfinite(arr)):
        raise InvalidInputError(f"{name}: contains NaN or infinite values")
    return arr


def _truth_and_draws(truth: Any, draws: Any, m: str) -> tuple[np.ndarray, np.ndarray]:
    """``truth`` (..., K) and ``draws`` (..., M, K) as float arrays of matching shapes (``m``
    names the draws' axis in the error)."""
    truth = _float_array(truth, "truth", 1)
    draws = _float_array(draws, "draws", 2)
    if draws.shape[:-2] != truth.shape[:-1] or draws.shape[-1] != truth.shape[-1]:
        raise InvalidInputError(
            f"draws: expected shape {(*truth.shape[:-1], m, truth.shape[-1])} to match truth "
            f"{truth.shape}, got {draws.shape}"
        )
    return truth, draws


# ---------------------------------------------------------------------------- ranks
def rank_statistics(truth: Any, draws: Any, rng: RNGLike = None) -> np.ndarray:
    """SBC rank of the true value among posterior draws, per coordinate (Talts et al. 2018).

    ``r_x = #{l : draws[l, x] < truth[x]}`` (Talts et al., Algorithm 1), uniform on
    ``{0, ..., M}`` for a calibrated sampler with ``M`` independent draws.  Draws equal to the
    truth (possible for discrete or repeated MCMC states) are split at random: the rank gets a
    uniform number of them from ``{0, ..., ties}``, which keeps it uniform.

    Parameters
    ----------
    truth : array_like, shape (..., K)
        True parameter values, one vector per replication.
    draws : array_like, shape (..., M, K)
        Posterior draws for each replication (leading dimensions as in ``truth``).
    rng : Generator, SeedSequence, int or None
        Source of the tie-breaking uniforms (only used where ties occur).

    Returns
    -------
    ndarray of int, shape (..., K)
        Ranks in ``0..M``.
    """
    truth, draws = _truth_and_draws(truth, draws, "M")
    below = (draws < truth[..., None, :]).sum(axis=-2)
    ties = (draws == truth[..., None, :]).sum(axis=-2)
    if ties.any():
        gen = as_generator(rng)
        below = below + np.floor(gen.random(ties.shape) * (ties + 1)).astype(np.int64)
    return below.astype(np.int64)


def rank_histogram(ranks: Any, max_rank: int, bins: int = 10) -> np.ndarray:
    """Counts of ranks in ``bins`` equal-width bins of ``{0, ..., max_rank}``, per coordinate.

    Bin ``b`` holds the ranks ``r`` with ``r * bins // (max_rank + 1) == b``; ``max_rank + 1``
    must be a multiple of ``bins`` so that every bin has the same probability ``1 / bins``
    under uniformity (Talts et al. 2018).

    Parameters
    ----------
    ranks : array_like of int, shape (L, K)
        Ranks of ``L`` replications (``K`` coordinates), each in ``0..max_rank``.
    max_rank : int
        The number ``M`` of posterior draws each rank was computed against.
    bins : int
        Number of bins (>= 2).

    Returns
    -------
    ndarray of int, shape (bins, K)
    """
    max_rank = check_int(max_rank, "max_rank", 1)
    bins = check_int(bins, "bins", 2)
    if (max_rank + 1) % bins:
        raise InvalidInputError(
            f"bins: {bins} does not divide the {max_rank + 1} possible ranks 0..{max_rank}; "
            "choose max_rank + 1 a multiple of bins (e.g. 99 draws and 10 bins)"
        )
    ranks = np.asarray(ranks)
    if ranks.dtype.kind not in "iu":
        raise InvalidTypeError(f"ranks: expected integers, got dtype {ranks.dtype}")
    if ranks.ndim != 2 or ranks.shape[0] == 0:
        raise InvalidInputError(f"ranks: expected shape (L, K) with L >= 1, got {ranks.shape}")
    if ranks.min() < 0 or ranks.max() > max_rank:
        bad = ranks.min() if ranks.min() < 0 else ranks.max()
        raise InvalidInputError(f"ranks: values must lie in 0..{max_rank}, got {bad}")
    which = ranks * bins // (max_rank + 1)
    return (which[None, :, :] == np.arange(bins)[:, None, None]).sum(axis=1)


def rank_uniformity_test(
    ranks: Any, max_rank: int, bins: int = 10
) -> tuple[np.ndarray, np.ndarray]:
    """Pearson chi-square test that the SBC ranks are uniform, per coordinate.

    Statistic ``sum_b (O_b - L/bins)^2 / (L/bins)`` over the bins of :func:`rank_histogram`,
    referred to chi-square with ``bins - 1`` degrees of freedom: a formal version of the
    visual rank-histogram check of Talts et al. (2018).  Needs ``L / bins >= 5`` for the
    chi-square approximation.

    Returns
    -------
    statistic, pvalue : ndarray, shape (K,)
        One test per coordinate.  The coordinates of one replication are dependent (``theta``
        sums to 1), so a family-wise summary should use Bonferroni (``K * min p``).
    """
    counts = rank_histogram(ranks, max_rank, bins)
    reps = int(counts[:, 0].sum())
    if reps < 5 * counts.shape[0]:
        raise InvalidInputError(
            f"ranks: {reps} replications give fewer than 5 expected per bin with {bins} bins; "
            f"use at least {5 * counts.shape[0]} replications or fewer bins"
        )
    result = stats.chisquare(counts, axis=0)
    return np.asarray(result.statistic, dtype=float), np.asarray(result.pvalue, dtype=float)


def interval_contains(truth: Any, draws: Any, level: float = 0.9) -> np.ndarray:
    """Whether the central ``level`` credible interval of the draws contains the truth.

    The interval of coordinate ``x`` runs from the ``(1 - level)/2`` to the ``(1 + level)/2``
    sample quantile of ``draws[..., :, x]`` (``numpy.quantile``, linear interpolation).  Over
    SBC replications the fraction of True estimates the interval's frequentist coverage under
    the prior, which is exactly ``level`` for the exact posterior (averaged over the prior,
    a credible interval is a confidence interval; cf. Talts et al. 2018, Theorem 1).

    Parameters
    ----------
    truth : array_like, shape (..., K)
    draws : array_like, shape (..., N, K)
        All posterior draws of each replication (chains pooled).
    level : float in (0, 1)

    Returns
    -------
    ndarray of bool, shape (..., K)
    """
    level = check_open_unit(level, "level")
    truth, draws = _truth_and_draws(truth, draws, "N")
    lo, hi = np.quantile(draws, [(1 - level) / 2, (1 + level) / 2], axis=-2)
    return (lo <= truth) & (truth <= hi)


def loglik_ranks(tally: Tally, truth: Any, draws: Any, rng: RNGLike = None) -> np.ndarray:
    """SBC rank of the log-likelihood at the truth among its values at the draws.

    ``r = #{l : log p(y | theta_l) < log p(y | theta~)}`` with ``log p(y | theta) =
    tally.loglik(theta)``: the rank of a data-dependent test quantity (Modrak et al. 2023),
    uniform on ``{0, ..., M}`` for exact posterior draws and piled up at ``M`` for draws that
    ignore the data (prior draws).  ``-inf`` (a draw under which an observed report is
    impossible) ranks below every finite value; ties are split as in :func:`rank_statistics`.

    Parameters
    ----------
    tally : Tally
        The replication's reports.
    truth : array_like, shape (K,)
    draws : array_like, shape (M, K)
    rng : Generator, SeedSequence, int or None
        Tie-breaking uniforms.

    Returns
    -------
    int
        Rank in ``0..M`` (a 0-d integer array).
    """
    truth = _float_array(truth, "truth", 1)
    draws = _float_array(draws, "draws", 2)
    values = np.asarray(tally.loglik(np.vstack([truth[None, :], draws])), dtype=float)
    values = np.where(values == -np.inf, -np.finfo(float).max, values)
    return rank_statistics(values[:1], values[1:, None], rng)[0]


# ---------------------------------------------------------------------------- thinning
def effective_sample_size(theta: Any) -> np.ndarray:
    """Per-coordinate effective sample size: the smaller of ArviZ's ESS_bulk and ESS_tail.

    ESS_bulk is the rank-normalised split-chain ESS and ESS_tail the ESS of the 5 % and 95 %
    quantile indicators (Vehtari, Gelman, Simpson, Carpenter and Buerkner, Bayesian Analysis
    2021); SBC ranks depend on the whole distribution, tails included.

    Parameters
    ----------
    theta : array_like, shape (chains, draws, K)

    Returns
    -------
    ndarray, shape (K,)
    """
    from bayesldp.bayes.fit import import_arviz

    theta = _float_array(theta, "theta", 3)
    if theta.ndim != 3 or theta.shape[1] < 4:
        raise InvalidInputError(f"theta: expected shape (chains, draws >= 4, K), got {theta.shape}")
    az = import_arviz()
    ds = az.convert_to_dataset({"theta": theta})
    bulk = np.asarray(az.ess(ds, method="bulk")["theta"].values, dtype=float)
    tail = np.asarray(az.ess(ds, method="tail")["theta"].values, dtype=float)
    ess = np.minimum(bulk, tail)
    # constant chains give NaN in ArviZ; they carry one effective draw at most
    return np.where(np.isfinite(ess), ess, 1.0)


@dataclass(frozen=True)
class ThinnedDraws:
    """Result of :func:`thin_by_ess`.

    Attributes
    ----------
    draws : ndarray, shape (size, K)
        The retained draws.
    ess : float
        Minimum over coordinates of the effective sample size of the full draws.
    thin : int
        Thinning factor applied within each chain before the final even selection.
    sufficient : bool
        False when fewer than ``size`` draws survived the thinning (ESS < size): the ``size``
        draws returned are then closer together than ``N / ESS`` and may stay correlated.
    """

    draws: np.ndarray
    ess: float
    thin: int
    sufficient: bool


def thin_by_ess(theta: Any, size: int, ess: Any = None) -> ThinnedDraws:
    """Thin MCMC draws to ``size`` near-independent draws (Talts et al. 2018, Algorithm 2).

    With ``N = chains * draws`` draws and ``ESS`` the minimum effective sample size over the
    coordinates, every chain is thinned by ``t = ceil(N / ESS)`` (so about ``ESS`` draws
    remain, spaced by about one autocorrelation time), and ``size`` of the remaining draws are
    taken at evenly spaced positions of the chains' concatenation.  If fewer than ``size``
    remain, ``size`` evenly spaced draws of the un-thinned concatenation are returned and
    ``sufficient`` is False (Talts et al. would rerun with more draws).

    Parameters
    ----------
    theta : array_like, shape (chains, draws, K)
    size : int
        Number of draws to keep (``M`` of the rank statistic).
    ess : float, optional
        Pre-computed minimum ESS; default :func:`effective_sample_size` ``.min()``.
    """
    theta = _float_array(theta, "theta", 3)
    if theta.ndim != 3:
        raise InvalidInputError(f"theta: expected shape (chains, draws, K), got {theta.shape}")
    size = check_int(size, "size", 1)
    chains, n_draws, k = theta.shape
    total = chains * n_draws
    if total < size:
        raise InvalidInputError(
            f"size: {size} draws asked for but theta holds only {total} ({chains} x {n_draws})"
        )
    ess_min = float(effective_sample_size(theta).min()) if ess is None else float(ess)
    if not math.isfinite(ess_min) or ess_min <= 0:
        raise InvalidInputError(f"ess: must be a positive number, got {ess_min}")
    thin = max(1, math.ceil(total / ess_min))
    pool = theta[:, ::thin, :].reshape(-1, k)
    sufficient = pool.shape[0] >= size
    if not sufficient:
        pool = theta.reshape(-1, k)
    idx = np.floor(np.arange(size) * (pool.shape[0] / size)).astype(np.int64)
    return ThinnedDraws(draws=pool[idx], ess=ess_min, thin=thin, sufficient=sufficient)
