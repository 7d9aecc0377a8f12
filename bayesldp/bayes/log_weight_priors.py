"""Gaussian priors on the log-weights: ``theta = softmax(f)`` with ``f`` Gaussian given one scale
``lambda``, itself log-normal, ``log lambda ~ N(mu, sigma^2)``.

* :class:`SmoothDensity`: ordered bins (numerical data); ``f`` a second-order random walk, so
  neighbouring bins have similar weights.
* :class:`LogisticNormal`: exchangeable categories; the log-weights independent draws from one
  normal, whose spread ``lambda`` the data learn: how far apart the categories' frequencies lie
  on the log scale, which a symmetric Dirichlet cannot say of a long-tailed population.

Both have the same coordinates (:meth:`LogWeightPrior.basis`: ``f = b line + modes @ y``,
``y_j ~ N(0, (lambda scale_j)^2)``, the slope ``b ~ N(0, s_b^2)``) and are sampled by the same
code: bayesldp's NUTS (:class:`bayesldp.bayes.hmc.smooth._SmoothTarget`), PyMC's
(:func:`bayesldp.bayes.model.smooth_theta`) or, where the data are weak, independence
Metropolis-Hastings from the prior (:mod:`bayesldp.bayes.prior_mh`).
"""

from __future__ import annotations

import functools
import math
import numbers
from typing import Any

import numpy as np

from bayesldp._validation import RNGLike, as_generator, check_k, check_positive
from bayesldp.bayes._serialised import _SerialisedPrior
from bayesldp.errors import InvalidInputError


class LogWeightPrior(_SerialisedPrior):
    """The shared part of :class:`SmoothDensity` and :class:`LogisticNormal`: ``theta =
    softmax(b line + modes @ y)`` with ``y_j ~ N(0, (lambda scale_j)^2)`` independent given
    ``lambda``, ``log lambda ~ N(log_scale_mean, log_scale_sd^2)`` and ``b ~ N(0,
    slope_sd^2)``; a subclass gives :meth:`basis` and :attr:`HYPER`, the name of ``lambda``'s
    posterior draws."""

    __slots__ = ("_k", "log_scale_mean", "log_scale_sd", "slope_sd")
    #: the name of ``lambda``'s draws in the posterior (and of ``log lambda`` with ``log_``)
    HYPER = "lambda"

    def _set_scale(self, log_scale_mean: float, log_scale_sd: float, slope_sd: float) -> None:
        if (
            isinstance(log_scale_mean, bool)
            or not isinstance(log_scale_mean, numbers.Real)
            or not math.isfinite(log_scale_mean)
        ):
            raise InvalidInputError(
                f"log_scale_mean: expected a finite number, got {log_scale_mean!r}"
            )
        self.log_scale_mean = float(log_scale_mean)
        self.log_scale_sd = check_positive(log_scale_sd, "log_scale_sd")
        self.slope_sd = check_positive(slope_sd, "slope_sd")

    @property
    def k(self) -> int:
        """Number of categories (bins) K."""
        return self._k

    @property
    def n_modes(self) -> int:
        """The number of coefficients ``y_j``."""
        return self.basis()[2].shape[0]

    def basis(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:  # pragma: no cover
        """``(line (K,), modes (K, M), scale (M,))``."""
        raise NotImplementedError

    def draws(self, size: int, rng: RNGLike = None) -> tuple[np.ndarray, np.ndarray]:
        """``size`` independent draws from the prior: ``theta`` (size, K) and ``lambda``
        (size,)."""
        gen = as_generator(rng)
        line, modes, scale = self.basis()
        lam = np.exp(self.log_scale_mean + self.log_scale_sd * gen.standard_normal(size))
        b = self.slope_sd * gen.standard_normal(size)
        y = lam[:, None] * scale * gen.standard_normal((size, scale.shape[0]))
        f = b[:, None] * line + y @ modes.T
        f -= f.max(axis=-1, keepdims=True)
        e = np.exp(f)
        return e / e.sum(axis=-1, keepdims=True), lam

    def sample(self, size: int | tuple[int, ...] = 1, rng: RNGLike = None) -> np.ndarray:
        """Independent draws of ``theta`` from the prior, shape ``(*size, K)``."""
        shape = (size,) if isinstance(size, numbers.Integral) else tuple(size)
        theta, _ = self.draws(math.prod(shape), rng)
        return theta.reshape(*shape, self._k)


class SmoothDensity(LogWeightPrior):
    """A smoothness prior for ordered bins: a Gaussian prior on the log-weights (numerical data).

    A symmetric Dirichlet treats the bins of a numerical domain as exchangeable, so at many bins
    (the 1024 of the experiments of Ye, Wang, Zhang and Feng, "Revisiting EM-based Estimation for
    Locally Differentially Private Protocols") it adds one pseudo-count per bin and says nothing
    about neighbours; EMS regularises with a smoothing step instead.  This prior is the Bayesian
    form of that smoothing, the logistic Gaussian process density model (Leonard 1978; Lenk 1991)
    with the second-order random walk (RW2) on the log-weights ``f`` (Rue and Held, *Gaussian
    Markov Random Fields*, 2005, section 3.4; the discrete cubic smoothing spline):

    .. math:: f_{i-1} - 2 f_i + f_{i+1} \\sim N(0, \\lambda^2 / K^3), \\quad i = 1 .. K-2,
              \\qquad \\theta = \\operatorname{softmax}(f),

    .. math:: \\log\\lambda \\sim N(\\mu, \\sigma^2), \\qquad
              \\text{slope } b \\sim N(0, s_b^2).

    With ``K^3`` in the variance, ``sum_i (f_{i-1} - 2 f_i + f_{i+1})^2 K^3`` is the roughness
    ``int f''(t)^2 dt`` of the log-density on the domain scaled to [0, 1], so ``lambda`` is the
    typical size of the log-density's second derivative whatever ``K`` (a normal density of sd
    ``w`` times the domain's width has ``|f''| = 1/w^2``: 100 at ``w = 0.1``).  The RW2 leaves
    a constant (no effect on ``theta``) and a straight line free; the line gets the slope
    prior (``f`` changes by ``b`` over the domain).  Default ``log lambda ~ N(log 30, 2.5^2)``:
    95% of the mass on ``lambda`` in [0.2, 4000], from nearly uniform to sharply peaked
    densities; ``s_b = 100``.  The data choose ``lambda``; its draws are the posterior variable
    ``smoothness``.

    Coordinates (:meth:`basis`): ``f = b (t - 1/2) + E y`` with ``E`` the eigenvectors of the
    RW2 precision ``D^T D`` (``D`` the (K-2, K) second differences) outside its null space and
    ``y_j ~ N(0, lambda^2 / (K^3 mu_j))``, ``mu_j`` their eigenvalues, independent: the same
    prior, diagonal.  Sampled by bayesldp's NUTS (``fit(method="hmc")``, which ``"auto"``
    takes) or PyMC's (``method="nuts"``, :func:`bayesldp.bayes.model.build_model`) on the same
    coordinates: each ``y_j`` partially non-centred by how much the data say about it
    (Papaspiliopoulos, Roberts and Skold 2007), which removes the funnel between ``lambda``
    and the coefficients without changing the prior.  Both measure that over a short pilot
    chain's draws (:func:`bayesldp.bayes.hmc.smooth.pilot_information`: on few bins and few
    reports the posterior can sit where the data say little, far from any point estimate).

    Parameters
    ----------
    k : int
        Number of ordered bins (at least 3).
    log_scale_mean, log_scale_sd : float
        Mean and standard deviation of the normal prior on ``log lambda``.
    slope_sd : float
        Standard deviation ``s_b`` of the slope.
    max_modes : int or None
        Keep only this many of the RW2's modes, the smoothest (a reduced-rank RW2; None: all
        ``K - 2``).  Default 256: the cut changes nothing below 258 bins, and above it drops
        modes that matter little: at 1024 bins and ``lambda`` = 4,029 (the default prior's
        97.5% point) the 257th mode moves a bin's log-weight by at most 0.0092 (prior sd)
        and all dropped modes together by 0.065 (root mean square over the bins; it scales
        with ``lambda``).  A gradient then costs O(K max_modes).

    Examples
    --------
    On 16 ordered bins: draws from the prior are smooth densities; ``bayesldp.fit(tally,
    prior=prior)`` (or ``prior="smooth"``) samples the posterior:

    >>> import numpy as np
    >>> import bayesldp
    >>> prior = bayesldp.SmoothDensity(16)
    >>> prior.n_modes
    14
    >>> draws = prior.sample(3, rng=0)
    >>> draws.shape, bool(np.allclose(draws.sum(axis=1), 1))
    ((3, 16), True)
    """


    __slots__ = ("max_modes",)
    HYPER = "smoothness"

    def __init__(
        self,
        k: int,
        log_scale_mean: float = math.log(30.0),
        log_scale_sd: float = 2.5,
        slope_sd: float = 100.0,
        max_modes: int | None = 256,
    ) -> None:
        self._k = check_k(k)
        if self._k < 3:
            raise InvalidInputError(f"k: a smoothness prior needs at least 3 bins, got {k}")
        self._set_scale(log_scale_mean, log_scale_sd, slope_sd)
        if max_modes is not None and (
            isinstance(max_modes, bool) or not isinstance(max_modes, numbers.Integral)
            or max_modes < 1
        ):  # fmt: skip
            raise InvalidInputError(
                f"max_modes: expected an integer >= 1 or None, got {max_modes!r}"
            )
        self.max_modes = None if max_modes is None else int(max_modes)

    @property
    def n_modes(self) -> int:
        """The RW2 modes kept: ``min(K - 2, max_modes)``."""
        return self._k - 2 if self.max_modes is None else min(self._k - 2, self.max_modes)

    def basis(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(line (K,), modes (K, M), scale (M,))``, ``M`` = :attr:`n_modes`:
        ``f = b line + modes @ y`` with ``line = t - 1/2`` (``t`` the bins' centres on [0, 1])
        and ``y_j`` of prior sd ``lambda * scale_j``, ``scale_j = (K^3 mu_j)^{-1/2}``, the
        smoothest modes first."""
        line, modes, scale = _rw2_basis(self._k)
        m = self.n_modes
        return line, modes[:, :m], scale[:m]

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly form (stored in InferenceData attrs)."""
        return {"distribution": "SmoothDensity", "k": self._k,
                "log_scale_mean": self.log_scale_mean, "log_scale_sd": self.log_scale_sd,
                "slope_sd": self.slope_sd, "max_modes": self.max_modes}  # fmt: skip

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SmoothDensity:
        """Inverse of :meth:`to_dict`."""
        if not isinstance(data, dict) or data.get("distribution") != "SmoothDensity":
            raise InvalidInputError(f"prior: not a serialised SmoothDensity: {data!r}")
        fields = ("log_scale_mean", "log_scale_sd", "slope_sd", "max_modes")
        return cls(data["k"], **{f: data[f] for f in fields})

    def with_k(self, k: int) -> SmoothDensity:
        """The same prior on ``k`` bins."""
        return SmoothDensity(k, self.log_scale_mean, self.log_scale_sd, self.slope_sd,
                             self.max_modes)  # fmt: skip

    def __repr__(self) -> str:
        return (
            f"SmoothDensity(k={self._k}, log_scale_mean={self.log_scale_mean:.6g}, "
            f"log_scale_sd={self.log_scale_sd:.6g}, slope_sd={self.slope_sd:.6g}, "
            f"max_modes={self.max_modes})"
        )


class LogisticNormal(LogWeightPrior):
    """An exchangeable logistic-normal prior whose spread the data learn: for categories with no
    order, where the population's frequencies spread over orders of magnitude.

    .. math:: \\theta = \\operatorname{softmax}(y), \\quad y_x \\sim N(m, \\lambda^2)
              \\text{ independent}, \\qquad \\log\\lambda \\sim N(\\mu, \\sigma^2)

    (Aitchison and Shen, "Logistic-normal distributions: some properties and uses", Biometrika
    1980; the common shift ``m`` has no effect on ``theta`` and drops out).  ``lambda`` is the
    standard deviation of the log-frequencies: about 0.3 for nearly equal frequencies, 1-2 for
    a Zipf-like population, 3 and more for a sparse one.  A symmetric Dirichlet(a) puts the
    log-frequencies' long tail *below* a sharp upper edge (a few large categories among many
    near zero); a long-tailed population's log-frequencies pile up at the bottom with a thin
    tail *above* (a few head categories), which this prior fits better:
    ``benchmarks/investigations/results/prior_family_fit.md`` measures by how many nats on the
    accuracy benchmark's populations, in both directions.

    Default ``log lambda ~ N(0, 1)``: 95 % of the mass on ``lambda`` in [0.14, 7.1].  Its
    draws are the posterior variable ``spread``.  A wider ``log_scale_sd`` lets ``lambda`` grow
    where the reports put ``theta`` at a vertex of the simplex (a category estimated at zero),
    where NUTS meets the likelihood's exponential walls: on 90 GRR reports (60, 20, 10) at
    eps 1, K = 3, 0.95 % of its transitions diverged under ``N(0, 1.5^2)`` against 0.20 %
    under the default, and 0.45 % against 0.12 % on (160, 120, 80) (a scratch run, 4 chains x
    10,000 draws, one seed; ``tests/bayes/test_sampler_reference.py`` checks the default).

    Coordinates (:meth:`basis`): ``f = modes @ y`` with ``modes`` the Helmert basis of the
    vectors summing to zero (orthonormal, ``K - 1`` columns) and every ``y_j ~ N(0,
    lambda^2)``: the centred log-weights ``y_x - mean(y)`` exactly.  The samplers' coordinates
    of :class:`SmoothDensity` carry a slope along a line; here the line is zero and the slope a
    free ``N(0, 1)`` coordinate without effect on ``theta``.  Sampled like
    :class:`SmoothDensity` (``fit(prior=LogisticNormal(k))``, method ``"auto"``: bayesldp's
    NUTS or, where the data are weak, the prior as a proposal; ``"nuts"``: PyMC's); a gradient
    costs O(K^2) for the basis besides the likelihood.

    Parameters
    ----------
    k : int
        Number of categories (at least 2).
    log_scale_mean, log_scale_sd : float
        Mean and standard deviation of the normal prior on ``log lambda``.

    Examples
    --------
    >>> import numpy as np
    >>> import bayesldp
    >>> prior = bayesldp.LogisticNormal(5)
    >>> prior.n_modes
    4
    >>> draws = prior.sample(3, rng=0)
    >>> draws.shape, bool(np.allclose(draws.sum(axis=1), 1))
    ((3, 5), True)
    """

    __slots__ = ()
    HYPER = "spread"

    def __init__(self, k: int, log_scale_mean: float = 0.0, log_scale_sd: float = 1.0) -> None:
        self._k = check_k(k)
        self._set_scale(log_scale_mean, log_scale_sd, 1.0)

    def basis(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(line (K,) zero, modes (K, K - 1) Helmert, scale (K - 1,) ones)``."""
        return _helmert_basis(self._k)

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly form (stored in InferenceData attrs)."""
        return {"distribution": "LogisticNormal", "k": self._k,
                "log_scale_mean": self.log_scale_mean,
                "log_scale_sd": self.log_scale_sd}  # fmt: skip

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LogisticNormal:
        """Inverse of :meth:`to_dict`."""
        if not isinstance(data, dict) or data.get("distribution") != "LogisticNormal":
            raise InvalidInputError(f"prior: not a serialised LogisticNormal: {data!r}")
        return cls(data["k"], data["log_scale_mean"], data["log_scale_sd"])

    def with_k(self, k: int) -> LogisticNormal:
        """The same prior on ``k`` categories."""
        return LogisticNormal(k, self.log_scale_mean, self.log_scale_sd)

    def __repr__(self) -> str:
        return (
            f"LogisticNormal(k={self._k}, log_scale_mean={self.log_scale_mean:.6g}, "
            f"log_scale_sd={self.log_scale_sd:.6g})"
        )


@functools.lru_cache(maxsize=8)
def _rw2_basis(k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:meth:`SmoothDensity.basis` (one symmetric eigendecomposition, O(K^3), cached)."""
    diff2 = np.diff(np.eye(k), n=2, axis=0)
    mu, vec = np.linalg.eigh(diff2.T @ diff2)  # ascending; the first two span {1, t}
    line = (np.arange(k) + 0.5) / k - 0.5
    modes = vec[:, 2:]
    modes -= np.outer(line, line @ modes) / (line @ line)  # exact orthogonality to the line
    modes -= modes.mean(axis=0)  # and to the constant
    for arr in (line, modes, mu):
        arr.setflags(write=False)
    return line, modes, 1.0 / np.sqrt(float(k) ** 3 * mu[2:])


@functools.lru_cache(maxsize=8)
def _helmert_basis(k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:meth:`LogisticNormal.basis`: column ``j`` (1-based) is ``(1, .., 1, -j, 0, .., 0) /
    sqrt(j (j + 1))`` with ``j`` ones, orthonormal and summing to zero."""
    j = np.arange(1, k)
    modes = (np.arange(k)[:, None] < j[None, :]).astype(float)
    modes[j, j - 1] = -j
    modes /= np.sqrt(j * (j + 1.0))
    line, scale = np.zeros(k), np.ones(k - 1)
    for arr in (line, modes, scale):
        arr.setflags(write=False)
    return line, modes, scale
