"""Dirichlet priors on the population distribution ``theta``.

Every posterior method of :func:`bayesldp.fit` puts a Dirichlet prior on ``theta``,

.. math:: p(\\theta) = \\frac{1}{B(\\alpha)} \\prod_x \\theta_x^{\\alpha_x - 1}, \\qquad
          B(\\alpha) = \\frac{\\prod_x \\Gamma(\\alpha_x)}{\\Gamma(\\sum_x \\alpha_x)},

the conjugate prior of the multinomial; under an LDP channel the posterior is a finite mixture of
Dirichlets (seed 000, Appendix A; :mod:`bayesldp.bayes.exact`).  ``Dirichlet(1)`` is uniform on
the simplex (the default); ``Dirichlet(1/2)`` is the Jeffreys prior of the multinomial, the prior
used in seed 000's experiments (section 5).
"""

from __future__ import annotations

import json
import math
import numbers
from typing import Any

import numpy as np
from scipy.special import gammaln

from bayesldp._validation import RNGLike, as_generator, check_k
from bayesldp.errors import InvalidInputError, InvalidTypeError


class Dirichlet:
    """Dirichlet prior ``Dirichlet(alpha)`` on the K-simplex.

    Parameters
    ----------
    alpha : array_like of float, shape (K,)
        Concentrations: finite and > 0, ``K >= 2``.

    Examples
    --------
    >>> from bayesldp.bayes import Dirichlet
    >>> Dirichlet([1, 2, 3]).k
    3
    >>> Dirichlet.symmetric(4, 0.5) == Dirichlet.jeffreys(4)
    True
    """

    __slots__ = ("_alpha",)

    def __init__(self, alpha: Any) -> None:
        if isinstance(alpha, Dirichlet):
            alpha = alpha.alpha
        arr = np.asarray(alpha)
        if arr.dtype.kind == "b" or arr.dtype.kind not in "iuf":
            raise InvalidTypeError(
                f"alpha: expected a vector of positive numbers, got dtype {arr.dtype}"
            )
        arr = arr.astype(float)
        if arr.ndim != 1 or arr.shape[0] < 2:
            raise InvalidInputError(
                f"alpha: expected a 1-d vector of length K >= 2, got shape {arr.shape}"
            )
        if not np.all(np.isfinite(arr)):
            raise InvalidInputError(f"alpha: entries must be finite, got {arr.tolist()}")
        if arr.min() <= 0:
            bad = int(np.argmin(arr))
            raise InvalidInputError(
                f"alpha: entries must be > 0, got alpha[{bad}] = {float(arr[bad])!r}"
            )
        arr.setflags(write=False)
        self._alpha = arr

    # ------------------------------------------------------------------ constructors
    @classmethod
    def symmetric(cls, k: int, a: float = 1.0) -> Dirichlet:
        """``Dirichlet(a, ..., a)`` on ``k`` categories (``a = 1``: uniform on the simplex)."""
        k = check_k(k)
        if isinstance(a, bool) or not isinstance(a, numbers.Real):
            raise InvalidTypeError(f"a: expected a positive finite number, got {a!r}")
        a = float(a)
        if not math.isfinite(a) or a <= 0:
            raise InvalidInputError(f"a: the concentration must be finite and > 0, got {a}")
        return cls(np.full(k, a))

    @classmethod
    def jeffreys(cls, k: int) -> Dirichlet:
        """The Jeffreys prior of the multinomial, ``Dirichlet(1/2, ..., 1/2)``."""
        return cls.symmetric(k, 0.5)

    # ------------------------------------------------------------------ properties
    @property
    def alpha(self) -> np.ndarray:
        """The concentration vector (read-only), shape (K,)."""
        return self._alpha

    @property
    def k(self) -> int:
        """Number of categories K."""
        return int(self._alpha.shape[0])

    @property
    def concentration(self) -> float:
        """``sum(alpha)``, the prior sample size."""
        return float(self._alpha.sum())

    @property
    def mean(self) -> np.ndarray:
        """Prior mean ``alpha / sum(alpha)``."""
        return self._alpha / self._alpha.sum()

    @property
    def is_symmetric(self) -> bool:
        """True when every concentration is equal."""
        return bool(np.all(self._alpha == self._alpha[0]))

    # ------------------------------------------------------------------ density and draws
    def log_beta(self) -> float:
        """``log B(alpha) = sum_x lgamma(alpha_x) - lgamma(sum alpha)``."""
        return float(gammaln(self._alpha).sum() - gammaln(self._alpha.sum()))

    def logpdf(self, theta: Any) -> np.ndarray | float:
        """Log density at ``theta`` of shape (..., K) (points on the simplex).

        ``sum_x (alpha_x - 1) log theta_x - log B(alpha)``; ``-inf``/``+inf`` on the boundary
        where the density is 0/unbounded.
        """
        theta = np.asarray(theta, dtype=float)
        if theta.shape[-1] != self.k:
            raise InvalidInputError(
                f"theta: expected last dimension {self.k}, got shape {theta.shape}"
            )
        with np.errstate(divide="ignore", invalid="ignore"):
            terms = np.where(self._alpha == 1.0, 0.0, (self._alpha - 1.0) * np.log(theta))
        value = terms.sum(axis=-1) - self.log_beta()
        return float(value) if np.ndim(value) == 0 else value

    def sample(self, size: int | tuple[int, ...] = 1, rng: RNGLike = None) -> np.ndarray:
        """Independent draws, shape ``(*size, K)`` (log-space Gamma normalisation).

        Uses ``X = Gamma(a + 1) * U^(1/a)`` for the Gamma variates, normalised in log space, so
        tiny concentrations do not underflow to a row of zeros.
        """
        gen = as_generator(rng)
        size = (size,) if isinstance(size, numbers.Integral) else tuple(size)
        alphas = np.broadcast_to(self._alpha, (*size, self.k))
        return dirichlet_draws(gen, alphas)

    # ------------------------------------------------------------------ serialisation
    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly form ``{"distribution": "Dirichlet", "alpha": [...]}``."""
        return {"distribution": "Dirichlet", "alpha": [float(v) for v in self._alpha]}

    def to_json(self) -> str:
        """The :meth:`to_dict` form as a JSON string (stored in InferenceData attrs)."""
        return json.dumps(self.to_dict())

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Dirichlet:
        """Inverse of :meth:`to_dict`."""
        if not isinstance(data, dict) or data.get("distribution") != "Dirichlet":
            raise InvalidInputError(f"prior: not a serialised Dirichlet prior: {data!r}")
        return cls(data["alpha"])

    @classmethod
    def from_json(cls, text: str) -> Dirichlet:
        """Inverse of :meth:`to_json`."""
        try:
            data = json.loads(text)
        except (TypeError, json.JSONDecodeError) as exc:
            raise InvalidInputError(f"prior: not a JSON-serialised Dirichlet: {text!r}") from exc
        return cls.from_dict(data)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Dirichlet):
            return NotImplemented
        return np.array_equal(self._alpha, other._alpha)

    __hash__ = None  # an array inside

    def __repr__(self) -> str:
        if self.is_symmetric:
            return f"Dirichlet.symmetric(k={self.k}, a={float(self._alpha[0]):.12g})"
        values = ", ".join(f"{float(v):.12g}" for v in self._alpha)
        return f"Dirichlet(alpha=[{values}])"


def as_dirichlet(prior: Any, k: int) -> Dirichlet:
    """Turn what :func:`bayesldp.fit` accepts as ``prior`` into a :class:`Dirichlet` on ``k``.

    Parameters
    ----------
    prior : Dirichlet, float, array_like or None
        ``None``: ``Dirichlet(1, ..., 1)`` (uniform on the simplex); a positive number ``a``:
        ``Dirichlet.symmetric(k, a)``; a vector: ``Dirichlet(vector)``; a :class:`Dirichlet`:
        itself.  The length must equal ``k``.
    k : int
        Number of categories of the tally.
    """
    k = check_k(k)
    if prior is None:
        return Dirichlet.symmetric(k, 1.0)
    if isinstance(prior, Dirichlet):
        result = prior
    elif isinstance(prior, bool):
        raise InvalidTypeError(
            f"prior: expected a Dirichlet, a positive number, a vector of {k} positive numbers "
            f"or None, got {prior!r}"
        )
    elif isinstance(prior, numbers.Real):
        value = float(prior)
        if not math.isfinite(value) or value <= 0:
            raise InvalidInputError(
                f"prior: a symmetric concentration must be finite and > 0, got {value}"
            )
        return Dirichlet.symmetric(k, value)
    else:
        try:
            arr = np.asarray(prior)
        except Exception as exc:  # pragma: no cover - numpy refuses the object
            raise InvalidTypeError(f"prior: cannot read {type(prior).__name__}") from exc
        if arr.dtype == object or arr.dtype.kind not in "iuf":
            raise InvalidTypeError(
                f"prior: expected a Dirichlet, a positive number, a vector of {k} positive "
                f"numbers or None, got {type(prior).__name__}"
            )
        if arr.ndim == 0:
            return as_dirichlet(float(arr), k)
        try:
            result = Dirichlet(arr)
        except (InvalidInputError, InvalidTypeError) as exc:
            raise type(exc)(f"prior: {exc}") from None
    if result.k != k:
        raise InvalidInputError(
            f"prior: has {result.k} concentrations but the tally has K = {k} categories"
        )
    return result


def dirichlet_draws(gen: np.random.Generator, alphas: np.ndarray) -> np.ndarray:
    """One Dirichlet draw per row of ``alphas`` (shape (..., K)), computed in log space.

    ``log G = log Gamma(a + 1) + log(U) / a`` (``U`` uniform on (0, 1]) is a log-Gamma(a)
    variate for ``a > 0``; the draw is ``softmax(log G)``.  Exact in distribution and free of the
    all-zero rows that plain Gamma normalisation gives when every concentration is tiny.
    """
    alphas = np.asarray(alphas, dtype=float)
    log_g = np.log(gen.standard_gamma(alphas + 1.0))
    log_u = np.log1p(-gen.random(alphas.shape))  # log of a uniform on (0, 1]
    log_g = log_g + log_u / alphas
    log_g -= log_g.max(axis=-1, keepdims=True)
    draws = np.exp(log_g)
    draws /= draws.sum(axis=-1, keepdims=True)
    return draws
