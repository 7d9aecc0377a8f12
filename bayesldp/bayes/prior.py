"""Dirichlet priors on the population distribution ``theta``.

Every posterior method of :func:`bayesldp.fit` puts a Dirichlet prior on ``theta``,

.. math:: p(\\theta) = \\frac{1}{B(\\alpha)} \\prod_x \\theta_x^{\\alpha_x - 1}, \\qquad
          B(\\alpha) = \\frac{\\prod_x \\Gamma(\\alpha_x)}{\\Gamma(\\sum_x \\alpha_x)},

the conjugate prior of the multinomial; under an LDP channel the posterior is a finite mixture of
Dirichlets (Lopuhaä-Zwakenberg, Li, Škorić and Li, "Improving Frequency Estimation under Local
Differential Privacy", WPES 2020, Appendix A; :mod:`bayesldp.bayes.exact`).  ``Dirichlet(1)`` is
uniform on the simplex (the default); ``Dirichlet(1/2)`` is the Jeffreys prior of the multinomial,
the prior used in the experiments of Lopuhaä-Zwakenberg et al. 2020 (section 5).
"""

from __future__ import annotations

import json
import math
import numbers
import warnings
from typing import Any

import numpy as np
from scipy.special import gammaln, logsumexp

from bayesldp._validation import RNGLike, as_generator, check_k, check_positive
from bayesldp.bayes._serialised import _SerialisedPrior
from bayesldp.bayes.log_weight_priors import LogisticNormal, LogWeightPrior, SmoothDensity
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


class AdaptiveDirichlet(_SerialisedPrior):
    """``theta | a ~ Dirichlet(a, ..., a)`` with the concentration ``a`` itself unknown.

    A fixed symmetric Dirichlet is a strong prior when the reports are noisy: ``Dirichlet(1)``
    adds one pseudo-count per category, which at small epsilon (GRR, K = 30, eps = 0.5 leaves an
    effective sample of about n / 70) pulls mass into an empty tail, while on flat populations a
    larger ``a`` would be right.  Here the data choose ``a``: the standard hierarchical
    remedy (e.g. Gelman et al., *Bayesian Data Analysis*, 3rd ed., section 5.3, for the
    beta-binomial; a Dirichlet-multinomial with unknown concentration).

    Prior on ``s = log a``: ``Normal(log_a_mean, log_a_sd^2)`` (default ``log(1/2)``, 2: centred
    on the Jeffreys concentration, 95% of the mass on ``a`` in [0.01, 25], from sparse to flat
    populations), discretised on the grid ``s_j = log_a_mean + log_a_sd * t_j``,
    ``t_j`` from ``-width`` to ``width`` in steps of ``step / log_a_sd``, with weights
    ``w_j`` proportional to the normal density.  Methods "exact", "sgld" and "nuts" use this
    discretised law as the prior (their posteriors are exact for it); the default sampler
    ("hmc", ``adaptive_scheme="joint"``) samples ``log a`` jointly with ``theta`` under the
    continuous normal, of which the grid is the trapezoidal discretisation (spacing 0.1 in
    ``log a``, far finer than any posterior of ``a`` this package meets), so the two agree unless
    the posterior of ``a`` reaches the grid's ends at +-``width`` sd (where the grid methods
    warn).

    Because a symmetric Dirichlet density depends on ``theta`` only through
    ``S = sum_x log theta_x``, the marginal prior is a function of ``S``:

    .. math:: \\log p(\\theta) = \\log \\sum_j \\exp\\big(c_j + (a_j - 1) S\\big), \\qquad
              c_j = \\log w_j + \\log\\Gamma(K a_j) - K \\log\\Gamma(a_j),

    its gradient is the fixed prior's with ``a`` replaced by ``abar(S) = E[a | theta]``, and the
    conditional of ``a`` given ``theta`` (and the data, which enter only through ``theta``) is
    ``p(a_j | theta) ∝ exp(c_j + a_j S)``: samplers draw ``theta`` from its marginal posterior
    and then ``a`` given each draw, exactly.

    Parameters
    ----------
    k : int
        Number of categories.
    log_a_mean, log_a_sd : float
        Mean and standard deviation of the normal prior on ``log a``.
    step : float
        Grid spacing in ``log a``.
    width : float
        Half-width of the grid in prior standard deviations.

    Examples
    --------
    >>> import bayesldp
    >>> mech = bayesldp.GRR(3, 2.0)
    >>> tally = mech.tally(mech.perturb([0, 0, 0, 1, 1, 2] * 10, rng=0))
    >>> prior = bayesldp.AdaptiveDirichlet(3)
    >>> idata = bayesldp.fit(tally, prior=prior, method="exact", draws=100, chains=1, random_seed=0)
    >>> sorted(idata.posterior.data_vars)
    ['a', 'theta']
    """

    __slots__ = ("_k", "a", "c", "log_a", "log_a_mean", "log_a_sd", "log_w", "step", "width")

    def __init__(
        self,
        k: int,
        log_a_mean: float = math.log(0.5),
        log_a_sd: float = 2.0,
        step: float = 0.1,
        width: float = 4.0,
    ) -> None:
        self._k = check_k(k)
        if (
            isinstance(log_a_mean, bool)
            or not isinstance(log_a_mean, numbers.Real)
            or not (math.isfinite(log_a_mean))
        ):
            raise InvalidInputError(f"log_a_mean: expected a finite number, got {log_a_mean!r}")
        self.log_a_mean = float(log_a_mean)
        self.log_a_sd = check_positive(log_a_sd, "log_a_sd")
        self.step = check_positive(step, "step")
        self.width = check_positive(width, "width")
        half = math.floor(self.width * self.log_a_sd / self.step)
        if half < 1:
            raise InvalidInputError(
                f"step: {self.step} leaves no grid inside +-{self.width} sd of the log a prior"
            )
        self.log_a = self.log_a_mean + self.step * np.arange(-half, half + 1)
        self.a = np.exp(self.log_a)
        if self.a[0] <= 0 or not np.isfinite(self.a[-1]) or self.a[-1] > 1e12:
            raise InvalidInputError(
                f"log a grid [{self.log_a[0]:.3g}, {self.log_a[-1]:.3g}] leaves the range where "
                "a Dirichlet can be computed (a in (0, 1e12])"
            )
        z = (self.log_a - self.log_a_mean) / self.log_a_sd
        self.log_w = -0.5 * z * z - logsumexp(-0.5 * z * z)
        self.c = self.log_w + gammaln(self._k * self.a) - self._k * gammaln(self.a)

    @property
    def k(self) -> int:
        """Number of categories K."""
        return self._k

    def log_sum_theta(self, theta: Any) -> np.ndarray:
        """``S = sum_x log theta_x`` for ``theta`` of shape (..., K)."""
        theta = np.asarray(theta, dtype=float)
        with np.errstate(divide="ignore"):
            return np.log(theta).sum(axis=-1)

    def conditional_log_probs(self, s_total: Any) -> np.ndarray:
        """``log p(a_j | theta)`` on the grid for ``S`` of any shape: shape ``S.shape + (J,)``."""
        s_total = np.asarray(s_total, dtype=float)[..., None]
        terms = self.c + self.a * s_total
        return terms - logsumexp(terms, axis=-1, keepdims=True)

    def logpdf(self, theta: Any) -> np.ndarray | float:
        """Marginal log density ``log sum_j w_j Dir(theta; a_j 1)`` at ``theta`` (..., K)."""
        theta = np.asarray(theta, dtype=float)
        if theta.shape[-1] != self._k:
            raise InvalidInputError(
                f"theta: expected last dimension {self._k}, got shape {theta.shape}"
            )
        s_total = self.log_sum_theta(theta)[..., None]
        value = logsumexp(self.c + (self.a - 1.0) * s_total, axis=-1)
        return float(value) if np.ndim(value) == 0 else value

    def draw_concentration(self, theta: Any, rng: RNGLike = None) -> np.ndarray:
        """One draw of ``a`` from ``p(a | theta)`` per ``theta`` of shape (..., K)."""
        gen = as_generator(rng)
        probs = np.exp(self.conditional_log_probs(self.log_sum_theta(theta)))
        cum = np.cumsum(probs, axis=-1)
        u = gen.random((*cum.shape[:-1], 1)) * cum[..., -1:]
        index = np.minimum((u > cum).sum(axis=-1), self.a.shape[0] - 1)
        return self.a[index]

    def sample(self, size: int | tuple[int, ...] = 1, rng: RNGLike = None) -> np.ndarray:
        """Independent draws of ``theta`` from the prior, shape ``(*size, K)``."""
        gen = as_generator(rng)
        size = (size,) if isinstance(size, numbers.Integral) else tuple(size)
        a = gen.choice(self.a, size=size, p=np.exp(self.log_w))
        return dirichlet_draws(gen, np.broadcast_to(a[..., None], (*size, self._k)))

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly form (stored in InferenceData attrs)."""
        return {"distribution": "AdaptiveDirichlet", "k": self._k,
                "log_a_mean": self.log_a_mean, "log_a_sd": self.log_a_sd,
                "step": self.step, "width": self.width}  # fmt: skip

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> AdaptiveDirichlet:
        """Inverse of :meth:`to_dict`."""
        if not isinstance(data, dict) or data.get("distribution") != "AdaptiveDirichlet":
            raise InvalidInputError(f"prior: not a serialised AdaptiveDirichlet: {data!r}")
        fields = ("log_a_mean", "log_a_sd", "step", "width")
        return cls(data["k"], **{f: data[f] for f in fields})

    def with_k(self, k: int) -> AdaptiveDirichlet:
        """The same prior on ``k`` categories."""
        return AdaptiveDirichlet(k, self.log_a_mean, self.log_a_sd, self.step, self.width)

    def __repr__(self) -> str:
        return (
            f"AdaptiveDirichlet(k={self._k}, log_a_mean={self.log_a_mean:.6g}, "
            f"log_a_sd={self.log_a_sd:.6g}, step={self.step:.6g}, width={self.width:.6g})"
        )


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

    Examples
    --------
    >>> from bayesldp.bayes import as_dirichlet
    >>> as_dirichlet(None, 3), as_dirichlet(0.5, 3)
    (Dirichlet.symmetric(k=3, a=1), Dirichlet.symmetric(k=3, a=0.5))
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


Prior = Dirichlet | AdaptiveDirichlet | SmoothDensity | LogisticNormal
#: the priors :func:`as_prior` knows by name
NAMED_PRIORS = {"adaptive": AdaptiveDirichlet, "smooth": SmoothDensity,
                "logistic_normal": LogisticNormal}  # fmt: skip


def as_prior(prior: Any, k: int) -> Prior:
    """What :func:`bayesldp.fit` accepts as ``prior``: ``"adaptive"`` (:class:`AdaptiveDirichlet`),
    ``"smooth"`` (:class:`SmoothDensity`) or ``"logistic_normal"`` (:class:`LogisticNormal`) on
    ``k`` categories, one of those objects, else as :func:`as_dirichlet`.

    Examples
    --------
    >>> from bayesldp.bayes import as_prior
    >>> as_prior("adaptive", 3)
    AdaptiveDirichlet(k=3, log_a_mean=-0.693147, log_a_sd=2, step=0.1, width=4)
    >>> as_prior(None, 3)
    Dirichlet.symmetric(k=3, a=1)
    """
    if isinstance(prior, str):
        if prior not in NAMED_PRIORS:
            raise InvalidInputError(
                f"prior: the named priors are 'adaptive' (AdaptiveDirichlet), 'smooth' "
                f"(SmoothDensity) and 'logistic_normal' (LogisticNormal), got {prior!r}"
            )
        return NAMED_PRIORS[prior](k)
    if isinstance(prior, AdaptiveDirichlet | LogWeightPrior):
        if prior.k != k:
            raise InvalidInputError(
                f"prior: a {type(prior).__name__} on {prior.k} categories, but the tally has "
                f"K = {k}"
            )
        return prior
    return as_dirichlet(prior, k)


def prior_from_json(text: str) -> Prior:
    """Inverse of ``prior.to_json()`` for any prior."""
    try:
        data = json.loads(text)
    except (TypeError, json.JSONDecodeError) as exc:
        raise InvalidInputError(f"prior: not a JSON-serialised prior: {text!r}") from exc
    if isinstance(data, dict):
        for cls in (AdaptiveDirichlet, SmoothDensity, LogisticNormal):
            if data.get("distribution") == cls.__name__:
                return cls.from_dict(data)
    return Dirichlet.from_dict(data)


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


#: methods that sample under the smoothness prior (SmoothDensity); "auto" takes the first
SMOOTH_METHODS = ("hmc", "nuts", "prior_mh")


def default_prior(prior: Any, tally: Any, resolved: str) -> Any:
    """:func:`bayesldp.fit`'s prior for ``prior`` on ``tally`` under method ``resolved``:
    ``prior``, or where it is None the mechanism's default: ``"smooth"`` on ordered bins
    (``DEFAULT_PRIOR``, numerical mechanisms) when ``resolved`` can sample it; Dirichlet(1),
    with the mechanism's warning about it, where the mechanism has one
    (``DEFAULT_PRIOR_CAVEAT``: numerical mechanisms under other methods, PCKV-PM); else
    ``"adaptive"`` (:class:`~bayesldp.bayes.AdaptiveDirichlet`)."""
    if prior is not None:
        return prior
    mech = tally.mechanism
    smooth = getattr(mech, "DEFAULT_PRIOR", None) == "smooth" and tally.k >= 3
    if smooth and resolved in SMOOTH_METHODS:
        return "smooth"
    caveat = getattr(mech, "DEFAULT_PRIOR_CAVEAT", None)
    if caveat:
        warnings.warn(f"prior: the default Dirichlet(1) {caveat}", UserWarning, stacklevel=3)
        return 1.0
    return "adaptive"
