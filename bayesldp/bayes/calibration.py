"""Simulation-based calibration (SBC) of the posterior samplers.

Talts, Betancourt, Simpson, Vehtari and Gelman, "Validating Bayesian inference algorithms with
simulation-based calibration", arXiv:1804.06788 (2018).  If ``theta~ ~ p(theta)``,
``y ~ p(y | theta~)`` and ``theta_1..theta_M`` are independent draws from the exact posterior
``p(theta | y)``, then for every scalar function ``f`` the rank statistic

.. math:: r = \\#\\{\\, l : f(\\theta_l) < f(\\tilde\\theta) \\,\\}

is uniform on ``{0, ..., M}`` (Talts et al., Theorem 1), because ``theta~`` and the ``theta_l``
are exchangeable draws from ``p(theta | y)``.  A sampler whose
draws do not follow the posterior shows up as a non-uniform rank histogram over many
replications (Talts et al. discuss the shapes: a U shape for posteriors that are too narrow,
a hump for too wide ones, a slope for a bias).  Here ``f`` is each coordinate ``theta_x`` in turn,
and the log-likelihood ``f(theta) = log p(y | theta)`` of the replication's tally.

Ranks of functions of ``theta`` alone cannot see a sampler that ignores the data: prior draws
rank ``theta~ ~ p(theta)`` uniformly.  A test quantity that depends on the data can
(Modrak, Moon, Kim, Kennedy, Gabry, Vehtari and Buerkner, "Simulation-based calibration
checking for Bayesian computation: the choice of test quantities shapes sensitivity",
Bayesian Analysis 2023): ``theta~`` generated ``y``, so its likelihood is higher than that of
most prior draws and its log-likelihood rank piles up at ``M``.  The theorem holds for any
``f(theta, y)``, so the log-likelihood rank of exact posterior draws is uniform too.

Correlated draws (MCMC) make the ranks non-uniform even for a correct sampler; Talts et al.
(Algorithm 2) thin each chain to about its effective sample size before ranking,
which :func:`thin_by_ess` does.  Uniformity is tested per coordinate with Pearson's chi-square
over equal-width rank bins (:func:`rank_uniformity_test`); the central credible interval
coverage (:func:`interval_contains`) is the complementary check that a ``level`` interval holds
the truth in a fraction ``level`` of replications (it follows from uniform ranks: the truth
falls outside the central interval iff its posterior quantile is in the outer tails).

:func:`sbc_replication` runs one replication for an LDP mechanism (``theta~`` from the prior:
``Dirichlet(alpha)`` or the adaptive prior :class:`~bayesldp.bayes.AdaptiveDirichlet`; true
counts ``~ Multinomial(n, theta~)``, tally ``= mechanism.simulate_tally``), and
:func:`summarise_sbc` reduces many of them to p-values, coverage and a verdict.

The ranks, the uniformity test, the coverage and the thinning are in
:mod:`bayesldp.bayes.calibration_statistics` (importable from here too); this module holds the
replications, their summary and :func:`run_sbc`.
"""

from __future__ import annotations

import importlib
import math
import numbers
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from bayesldp._validation import RNGLike, as_generator, check_alpha, check_int, check_open_unit
from bayesldp.bayes import calibration_statistics
from bayesldp.bayes.calibration_statistics import (  # noqa: F401 - re-exported
    ThinnedDraws,
    effective_sample_size,
    interval_contains,
    loglik_ranks,
    rank_histogram,
    rank_statistics,
    rank_uniformity_test,
    thin_by_ess,
)
from bayesldp.bayes.prior import AdaptiveDirichlet
from bayesldp.errors import InvalidInputError, InvalidTypeError
from bayesldp.tally import Tally

__all__ = [
    "BackendSampler",
    "SBCReplication",
    "SBCSummary",
    "run_sbc",
    "sbc_replication",
    "summarise_sbc",
    *calibration_statistics.__all__,
]

#: Sampler callable used by :func:`sbc_replication`: ``(tally, alpha, random_seed) -> theta``
#: with ``theta`` of shape (chains, draws, K).
Sampler = Callable[[Tally, np.ndarray, int], np.ndarray]


# ---------------------------------------------------------------------------- replications
@dataclass(frozen=True)
class BackendSampler:
    """A picklable sampler for :func:`sbc_replication`: one of bayesldp's backend modules.

    Calls ``bayesldp.bayes.<method>.sample(tally, alpha, draws=..., chains=...,
    random_seed=seed, **options)`` and returns its ``theta`` (chains, draws, K).

    Attributes
    ----------
    method : {"hmc", "sgld", "nuts", "exact", "laplace"}
    draws, chains : int
    options : dict
        Backend options (e.g. ``{"tune": 500}``).
    """

    method: str
    draws: int
    chains: int
    options: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.method not in ("hmc", "sgld", "nuts", "exact", "laplace"):
            raise InvalidInputError(
                f"method: expected 'hmc', 'sgld', 'nuts', 'exact' or 'laplace', got {self.method!r}"
            )
        check_int(self.draws, "draws", 1)
        check_int(self.chains, "chains", 1)

    def __call__(self, tally: Tally, alpha: np.ndarray, random_seed: int) -> np.ndarray:
        module = importlib.import_module(f"bayesldp.bayes.{self.method}")
        out = module.sample(
            tally,
            alpha,
            draws=self.draws,
            chains=self.chains,
            random_seed=random_seed,
            **self.options,
        )
        return np.asarray(out.theta, dtype=float)


@dataclass(frozen=True)
class SBCReplication:
    """One SBC replication (see :func:`sbc_replication`).

    Attributes
    ----------
    truth : ndarray, shape (K,)
        The ``theta`` drawn from the prior.
    rank : ndarray of int, shape (K,)
        Rank of ``truth`` among the thinned draws, in ``0..size``.
    inside : ndarray of bool, shape (K,)
        Whether the central credible interval (all draws) contains ``truth``.
    ess : float
        Minimum effective sample size over coordinates.
    thin : int
        Thinning factor used.
    sufficient : bool
        Whether the thinned draws numbered at least ``size`` (see :class:`ThinnedDraws`).
    loglik_rank : int or None
        Rank of the tally's log-likelihood at ``truth`` among its values at the thinned
        draws, in ``0..size`` (see :func:`loglik_ranks`).
    """

    truth: np.ndarray
    rank: np.ndarray
    inside: np.ndarray
    ess: float
    thin: int
    sufficient: bool
    loglik_rank: int | None = None


def sbc_replication(
    mechanism: Any,
    alpha: Any,
    n: int,
    sampler: Sampler,
    rng: RNGLike = None,
    *,
    size: int = 99,
    level: float = 0.9,
) -> SBCReplication:
    """One SBC replication for an LDP mechanism (Talts et al. 2018, Algorithm 1).

    ``theta~ ~ Dirichlet(alpha)`` (or, for the adaptive prior, ``a`` from its grid law and
    ``theta~ ~ Dirichlet(a 1_K)``: :meth:`AdaptiveDirichlet.sample`); true counts
    ``~ Multinomial(n, theta~)``; ``tally = mechanism.simulate_tally(counts)``;
    ``theta = sampler(tally, alpha, seed)``;
    the draws are thinned to ``size`` by :func:`thin_by_ess` and ranked against ``theta~``
    (:func:`rank_statistics`), coordinate by coordinate and through the tally's log-likelihood
    (:func:`loglik_ranks`), and the central ``level`` interval of all draws is checked
    (:func:`interval_contains`).

    The prior draw, the counts, the tally and the sampler's seed all come, in this order, from
    one Generator made from ``rng``: the same ``rng`` gives the same data set for every sampler.

    Parameters
    ----------
    mechanism : Mechanism
        Any bayesldp mechanism (``k`` must equal ``len(alpha)``).
    alpha : array_like, shape (K,), or AdaptiveDirichlet
        Dirichlet concentrations of the prior used both to simulate and to fit, or the
        adaptive prior (passed to the sampler as it is).
    n : int
        Number of users.
    sampler : callable
        ``sampler(tally, alpha, random_seed) -> theta`` of shape (chains, draws, K), e.g.
        :class:`BackendSampler`.
    rng : Generator, SeedSequence, int or None
    size : int
        Number ``M`` of thinned draws the rank is computed against (ranks lie in ``0..M``).
    level : float
        Credible level of the interval.
    """
    adaptive = isinstance(alpha, AdaptiveDirichlet)
    alpha = alpha if adaptive else check_alpha(alpha)
    k = alpha.k if adaptive else alpha.shape[0]
    n = check_int(n, "n", 1)
    if getattr(mechanism, "k", None) != k:
        raise InvalidInputError(
            f"alpha: length {k} does not match the mechanism's k = {getattr(mechanism, 'k', None)}"
        )
    gen = as_generator(rng)
    truth = alpha.sample(1, rng=gen)[0] if adaptive else gen.dirichlet(alpha)
    counts = gen.multinomial(n, truth)
    tally = mechanism.simulate_tally(counts, gen)
    seed = int(gen.integers(2**31 - 1))
    theta = np.asarray(sampler(tally, alpha, seed), dtype=float)
    if theta.ndim != 3 or theta.shape[2] != k:
        raise InvalidInputError(
            f"sampler: expected draws of shape (chains, draws, {k}), got {theta.shape}"
        )
    thinned = thin_by_ess(theta, size)
    rank = rank_statistics(truth, thinned.draws, gen)
    inside = interval_contains(truth, theta.reshape(-1, theta.shape[2]), level)
    return SBCReplication(
        truth=truth,
        rank=rank,
        inside=inside,
        ess=thinned.ess,
        thin=thinned.thin,
        sufficient=thinned.sufficient,
        loglik_rank=int(loglik_ranks(tally, truth, thinned.draws, gen)),
    )


# ---------------------------------------------------------------------------- summary
@dataclass(frozen=True)
class SBCSummary:
    """SBC results over ``reps`` replications (see :func:`summarise_sbc`).

    Attributes
    ----------
    reps : int
        Number of replications ``L``.
    max_rank, bins : int
        Ranks lie in ``0..max_rank``, tested in ``bins`` bins.
    level : float
        Credible level of the intervals.
    rank_counts : ndarray, shape (bins, K)
        Rank histogram per coordinate.
    statistic, pvalues : ndarray, shape (K,)
        Chi-square uniformity test per coordinate.
    coverage : ndarray, shape (K,)
        Fraction of replications whose interval contains the truth, per coordinate.
    low_ess : int
        Replications whose thinned draws were fewer than ``max_rank`` (0 if unknown).
    p_threshold : float
        Each coordinate's p-value must exceed this.
    coverage_range : tuple of float
        The mean coverage over coordinates must lie in this closed range.
    loglik_counts : ndarray, shape (bins,), or None
        Rank histogram of the log-likelihood (:func:`loglik_ranks`), if given.
    loglik_pvalue : float or None
        Its chi-square p-value; it must exceed ``p_threshold`` too.
    """

    reps: int
    max_rank: int
    bins: int
    level: float
    rank_counts: np.ndarray
    statistic: np.ndarray
    pvalues: np.ndarray
    coverage: np.ndarray
    low_ess: int
    p_threshold: float
    coverage_range: tuple[float, float]
    loglik_counts: np.ndarray | None = None
    loglik_pvalue: float | None = None

    @property
    def min_p(self) -> float:
        """Smallest per-coordinate chi-square p-value."""
        return float(self.pvalues.min())

    @property
    def bonferroni_p(self) -> float:
        """Family-wise p-value over the K coordinates: ``min(1, K * min p)``."""
        return float(min(1.0, self.pvalues.shape[0] * self.pvalues.min()))

    @property
    def mean_coverage(self) -> float:
        """Coverage pooled over coordinates (``L * K`` intervals)."""
        return float(self.coverage.mean())

    @property
    def coverage_se(self) -> float:
        """Binomial standard error of one coordinate's coverage at the nominal level."""
        return math.sqrt(self.level * (1 - self.level) / self.reps)

    @property
    def ranks_ok(self) -> bool:
        """Every coordinate's rank histogram, and the log-likelihood's if given, passes the
        chi-square test."""
        loglik_ok = self.loglik_pvalue is None or self.loglik_pvalue > self.p_threshold
        return bool(self.pvalues.min() > self.p_threshold and loglik_ok)

    @property
    def coverage_ok(self) -> bool:
        """The mean coverage lies in ``coverage_range``."""
        lo, hi = self.coverage_range
        return bool(lo <= self.mean_coverage <= hi)

    @property
    def passed(self) -> bool:
        """Both checks pass."""
        return self.ranks_ok and self.coverage_ok

    @property
    def verdict(self) -> str:
        """ "pass" or "FAIL (...)" naming the failed checks."""
        failed = []
        if not self.pvalues.min() > self.p_threshold:
            failed.append(f"ranks: min p {self.min_p:.1e}")
        if self.loglik_pvalue is not None and not self.loglik_pvalue > self.p_threshold:
            failed.append(f"loglik ranks: p {self.loglik_pvalue:.1e}")
        if not self.coverage_ok:
            failed.append(f"coverage {self.mean_coverage:.3f}")
        return "pass" if not failed else "FAIL (" + "; ".join(failed) + ")"


def summarise_sbc(
    ranks: Any,
    inside: Any,
    *,
    max_rank: int,
    bins: int = 10,
    level: float = 0.9,
    low_ess: int = 0,
    p_threshold: float = 1e-3,
    coverage_range: Sequence[float] = (0.85, 0.95),
    loglik_ranks: Any = None,
) -> SBCSummary:
    """Reduce SBC replications to rank-uniformity p-values, coverage and a verdict.

    The criteria are those of a calibration check in the spirit of Talts et al. (2018): the
    chi-square p-value of every coordinate's rank histogram exceeds ``p_threshold`` and the
    ``level`` interval's coverage, pooled over coordinates, lies in ``coverage_range``; with
    ``loglik_ranks`` the log-likelihood's rank histogram must pass the chi-square test too.  The
    per-coordinate coverages are kept too; each has binomial standard error
    ``sqrt(level (1 - level) / L)`` (2.1 points for ``L = 200``, ``level = 0.9``).

    Parameters
    ----------
    ranks : array_like of int, shape (L, K)
    inside : array_like of bool, shape (L, K)
    max_rank : int
        ``M``, the number of draws each rank was computed against.
    bins : int
        Rank-histogram bins (``max_rank + 1`` must be a multiple).
    level : float
        Credible level the ``inside`` flags refer to.
    low_ess : int
        Number of replications with too few effective draws (reported only).
    p_threshold : float
    coverage_range : (float, float)
    loglik_ranks : array_like of int, shape (L,), optional
        Log-likelihood ranks (:attr:`SBCReplication.loglik_rank`), in ``0..max_rank``.
    """
    level = check_open_unit(level, "level")
    inside_arr = np.asarray(inside)
    if inside_arr.dtype != bool:
        raise InvalidTypeError(f"inside: expected booleans, got dtype {inside_arr.dtype}")
    ranks_arr = np.asarray(ranks)
    if inside_arr.shape != ranks_arr.shape:
        raise InvalidInputError(
            f"inside: shape {inside_arr.shape} does not match ranks {ranks_arr.shape}"
        )
    lo, hi = (float(v) for v in coverage_range)
    if not 0.0 <= lo <= hi <= 1.0:
        raise InvalidInputError(f"coverage_range: expected 0 <= lo <= hi <= 1, got {(lo, hi)}")
    statistic, pvalues = rank_uniformity_test(ranks_arr, max_rank, bins)
    loglik_counts = loglik_pvalue = None
    if loglik_ranks is not None:
        ll = np.asarray(loglik_ranks)
        if ll.shape != ranks_arr.shape[:1]:
            raise InvalidInputError(
                f"loglik_ranks: expected shape {ranks_arr.shape[:1]} (one per replication), "
                f"got {ll.shape}"
            )
        loglik_counts = rank_histogram(ll[:, None], max_rank, bins)[:, 0]
        loglik_pvalue = float(rank_uniformity_test(ll[:, None], max_rank, bins)[1][0])
    return SBCSummary(
        reps=int(ranks_arr.shape[0]),
        max_rank=int(max_rank),
        bins=int(bins),
        level=level,
        rank_counts=rank_histogram(ranks_arr, max_rank, bins),
        statistic=statistic,
        pvalues=pvalues,
        coverage=inside_arr.mean(axis=0),
        low_ess=int(low_ess),
        p_threshold=float(p_threshold),
        coverage_range=(lo, hi),
        loglik_counts=loglik_counts,
        loglik_pvalue=loglik_pvalue,
    )


def run_sbc(
    mechanism: Any,
    alpha: Any,
    n: int,
    sampler: Sampler,
    reps: int,
    rng: RNGLike = None,
    *,
    size: int = 99,
    bins: int = 10,
    level: float = 0.9,
    p_threshold: float = 1e-3,
    coverage_range: Sequence[float] = (0.85, 0.95),
) -> tuple[SBCSummary, list[SBCReplication]]:
    """Run ``reps`` replications of :func:`sbc_replication` one after the other and summarise.

    Replication ``i`` uses the ``i``-th child of ``SeedSequence`` spawned from ``rng`` (an int
    or SeedSequence; a Generator is reduced to a seed drawn from it), so splitting the
    replications across processes with the same children reproduces the result exactly.

    Returns
    -------
    summary : SBCSummary
    replications : list of SBCReplication
    """
    reps = check_int(reps, "reps", 1)
    if isinstance(rng, np.random.SeedSequence):
        root = rng
    elif rng is None:
        root = np.random.SeedSequence()
    else:
        gen = as_generator(rng)  # validates ints (non-negative) and types
        root = np.random.SeedSequence(
            int(rng) if isinstance(rng, numbers.Integral) else int(gen.integers(2**63))
        )
    children = root.spawn(reps)
    out = [
        sbc_replication(mechanism, alpha, n, sampler, child, size=size, level=level)
        for child in children
    ]
    summary = summarise_sbc(
        np.stack([r.rank for r in out]),
        np.stack([r.inside for r in out]),
        max_rank=size,
        bins=bins,
        level=level,
        low_ess=sum(not r.sufficient for r in out),
        p_threshold=p_threshold,
        coverage_range=coverage_range,
        loglik_ranks=np.array([r.loglik_rank for r in out]),
    )
    return summary, out
