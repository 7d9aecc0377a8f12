"""Synthetic populations and error metrics for simulation studies."""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy import stats

from bayesldp._validation import RNGLike, as_generator, check_k, check_theta
from bayesldp.errors import InvalidInputError


def dirichlet_population(k: int, alpha: float, rng: RNGLike = None) -> np.ndarray:
    """A population distribution drawn from a symmetric Dirichlet(alpha) of dimension k."""
    k = check_k(k)
    if not alpha > 0:
        raise InvalidInputError(f"alpha: must be > 0, got {alpha}")
    theta = as_generator(rng).dirichlet(np.full(k, float(alpha)))
    return theta / theta.sum()


def zipf_population(k: int, s: float) -> np.ndarray:
    """Truncated Zipf law: ``theta_x ∝ (x + 1)^-s`` for x = 0..k-1."""
    k = check_k(k)
    if not s >= 0:
        raise InvalidInputError(f"s: must be >= 0, got {s}")
    weights = np.arange(1, k + 1, dtype=float) ** -float(s)
    return weights / weights.sum()


def binomial_population(k: int, p: float) -> np.ndarray:
    """Binomial(k - 1, p) over 0..k-1 (the population of Biswas et al. 2022, node sampling).

    Biswas, Cormode and Maple, "Impact of Sampling on Locally Differentially Private Data
    Collection", arXiv 2022."""
    k = check_k(k)
    if not 0 <= p <= 1:
        raise InvalidInputError(f"p: must lie in [0, 1], got {p}")
    return stats.binom.pmf(np.arange(k), k - 1, p)


def population_from_spec(population: dict[str, Any], rng: RNGLike = None) -> np.ndarray:
    """The theta of a validated ``[population]`` table of a study spec."""
    kind, k = population["kind"], population["k"]
    if kind == "dirichlet":
        return dirichlet_population(k, population["alpha"], rng)
    if kind == "zipf":
        return zipf_population(k, population["s"])
    if kind == "binomial":
        return binomial_population(k, population["p"])
    if kind == "uniform":
        return np.full(k, 1.0 / k)
    if kind == "dataset":
        from bayesldp.datasets import load_dataset

        return load_dataset(population["dataset"]).frequencies
    freqs = np.asarray(population["frequencies"], dtype=float)
    total = freqs.sum()
    if total <= 0 or freqs.min() < 0:
        raise InvalidInputError("population.frequencies: need non-negative values with sum > 0")
    return check_theta(freqs / total, k, "population.frequencies")


def sample_counts(theta: np.ndarray, n: int, rng: RNGLike = None) -> np.ndarray:
    """Counts of ``n`` users drawn iid from ``theta`` (a multinomial)."""
    if n < 1:
        raise InvalidInputError(f"n: must be >= 1, got {n}")
    return as_generator(rng).multinomial(n, theta)


def total_variation(estimate: np.ndarray, truth: np.ndarray) -> float:
    """``TV = 1/2 ||estimate - truth||_1``."""
    return 0.5 * float(np.abs(np.asarray(estimate) - np.asarray(truth)).sum())


def mean_squared_error(estimate: np.ndarray, truth: np.ndarray) -> float:
    """Mean over categories of the squared error."""
    return float(np.mean((np.asarray(estimate) - np.asarray(truth)) ** 2))


METRICS = {"tv": total_variation, "mse": mean_squared_error}
