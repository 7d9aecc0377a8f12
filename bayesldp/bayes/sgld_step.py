"""SGLD's state and update step: :class:`SGLDState` (a warm-startable, checkpointable state of
several chains) and :func:`sgld_run` (``n`` updates of it), under :mod:`bayesldp.bayes.sgld`'s
backend.

The update (the paper's reflected Euler step with the identity metric, the exact CIR transition
with the expanded-mean metric, the minibatch gradient and its control variate, the scale refresh,
the adaptive prior's Gibbs step) is derived in :mod:`bayesldp.bayes.sgld`'s docstring.  The names
are importable from :mod:`bayesldp.bayes.sgld` too.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.special import gammaln

from bayesldp._validation import (
    as_generator,
    check_alpha,
    check_bool,
    check_int,
    check_positive,
)
from bayesldp.bayes.prior import AdaptiveDirichlet
from bayesldp.errors import InvalidInputError, InvalidTypeError, NotSupportedError
from bayesldp.likelihood import Likelihood
from bayesldp.tally import Tally, check_tally

__all__ = ["SGLDState", "sgld_run"]

_DOT_FLOOR = 1e-200  # floor of L_u . theta inside gradients
_MIN_TOTAL_CONCENTRATION = 0.05  # sum(alpha) below which the Gamma weights underflow
_DEFAULT_STEP = 0.2  # expanded metric, in posterior variances


# ---------------------------------------------------------------------------------------- checks
def _check_minibatch(value: Any) -> int | None:
    if value is None:
        return None
    return check_int(value, "minibatch", 1)


def _check_vector(value: Any, k: int, name: str) -> np.ndarray | None:
    if value is None:
        return None
    arr = np.array(value, dtype=float)
    if arr.shape != (k,) or not np.all(np.isfinite(arr)) or arr.min() <= 0:
        raise InvalidInputError(f"{name}: expected {k} finite positive numbers, got {value!r}")
    return arr


# ---------------------------------------------------------------------------------------- data
def _check_total_concentration(alpha: np.ndarray) -> np.ndarray:
    """Refuse priors whose latent Gamma weights underflow: ``sum(alpha) < 0.05``.

    ``S = sum(phi) ~ Gamma(A, 1)`` with ``A = sum(alpha)``, and ``P(S < 1e-300) ~ 10^(-300 A)``:
    at ``A = 0.005`` (K = 5, alpha = 1e-3) one step in 30 would set every ``phi`` to 0 in
    float64 and leave ``theta = phi / S`` undefined.  At ``A >= 0.05`` the chance is below
    ``1e-15`` per step.
    """
    total = float(alpha.sum())
    if total < _MIN_TOTAL_CONCENTRATION:
        raise InvalidInputError(
            f"prior: method 'sgld' needs a total concentration sum(alpha) >= "
            f"{_MIN_TOTAL_CONCENTRATION}, got {total:.3g}: its latent Gamma weights underflow to "
            "0 in float64 below that; use method='hmc', which samples log-ratios"
        )
    return alpha


def _sample_rows(lik: Likelihood, gen: np.random.Generator, shape: tuple[int, int]) -> np.ndarray:
    """Row indices of ``shape`` reports drawn with replacement (row ``u`` w.p. ``c_u / n``)."""
    pick = np.floor(gen.random(shape) * lik.n)
    return np.searchsorted(np.cumsum(lik.counts), pick, side="right")


# ---------------------------------------------------------------------------------------- state
@dataclass
class SGLDState:
    """A warm-startable state of ``chains`` SGLD chains.

    Attributes
    ----------
    phi : ndarray, shape (chains, K)
        Unnormalised weights (``theta = phi / phi.sum(-1)``), all >= 0.
    step : int
        Updates done so far.  Recording with ``record_every`` follows this global counter, so a
        run split into pieces records exactly the draws of one uninterrupted run.
    rng_state : dict
        ``numpy.random.Generator.bit_generator.state`` after the last update.
    metric : ndarray of shape (K,) or None
        Weights ``w`` of the expanded-mean metric, or None for the paper's identity metric.
    anchor : ndarray of shape (K,) or None
        Centre ``theta_hat`` of the minibatch control variate, or None (plain minibatches).
    concentration : ndarray of shape (chains,) or None
        Under the adaptive prior, each chain's current concentration ``a`` (the Gibbs step of
        :func:`_advance` updates it); None under a fixed Dirichlet prior.

    :meth:`to_dict` / :meth:`from_dict` checkpoint a state as plain data (numpy arrays, Python
    ints and strings; a PCG64 generator's 128-bit counters are Python ints, so use JSON or
    pickle rather than ``np.savez`` for them).
    """

    phi: np.ndarray
    step: int
    rng_state: dict
    metric: np.ndarray | None = None
    anchor: np.ndarray | None = None
    concentration: np.ndarray | None = None

    @classmethod
    def initial(
        cls,
        alpha: Any,
        chains: int,
        rng: Any = None,
        *,
        theta: Any = None,
        metric: Any = None,
        anchor: Any = None,
    ) -> SGLDState:
        """A fresh state; ``S`` is drawn from ``Gamma(sum(alpha), 1)`` per chain.

        Parameters
        ----------
        alpha : array_like, shape (K,)
            Dirichlet concentrations.
        chains : int
            Number of chains (>= 1).
        rng : Generator, int or None
            Source of the initial draws; the state continues this generator's stream.
        theta : array_like, shape (K,) or (chains, K), optional
            Starting points on the simplex (default: draws from ``Dirichlet(max(alpha, 1))``).
        metric, anchor : array_like of shape (K,), optional
            See the class attributes (``anchor`` is normalised to sum to 1).
        """
        chains = check_int(chains, "chains", 1)
        shape = np.shape(alpha)
        if len(shape) != 1 or shape[0] < 2:
            raise InvalidInputError(f"alpha: expected a vector of length K >= 2, got shape {shape}")
        k = shape[0]
        alpha = check_alpha(alpha, k)
        gen = as_generator(rng)
        if theta is None:
            start = gen.dirichlet(np.maximum(alpha, 1.0), size=chains)
        else:
            try:
                start = np.broadcast_to(np.asarray(theta, dtype=float), (chains, k)).copy()
            except ValueError as exc:
                raise InvalidInputError(
                    f"theta: expected shape ({k},) or ({chains}, {k}), got {np.shape(theta)}"
                ) from exc
            if not np.all(np.isfinite(start)) or start.min() < 0:
                raise InvalidInputError("theta: starting points must be finite and >= 0")
            sums = start.sum(axis=1)
            if np.any(np.abs(sums - 1.0) > 1e-8):
                raise InvalidInputError(f"theta: starting points must sum to 1, got {sums}")
        phi = start * gen.gamma(alpha.sum(), size=chains)[:, None]
        metric = _check_vector(metric, k, "metric")
        anchor = _check_vector(anchor, k, "anchor")
        if anchor is not None:
            anchor = anchor / anchor.sum()
        return cls(phi, 0, gen.bit_generator.state, metric, anchor)

    @property
    def chains(self) -> int:
        """Number of chains."""
        return int(self.phi.shape[0])

    @property
    def k(self) -> int:
        """Number of categories."""
        return int(self.phi.shape[1])

    @property
    def theta(self) -> np.ndarray:
        """Current ``theta = phi / sum(phi)`` per chain, shape (chains, K)."""
        return self.phi / self.phi.sum(axis=1, keepdims=True)

    def generator(self) -> np.random.Generator:
        """A new Generator positioned at the saved state."""
        name = self.rng_state.get("bit_generator")
        bit_gen_cls = getattr(np.random, str(name), None)
        if not (isinstance(bit_gen_cls, type) and issubclass(bit_gen_cls, np.random.BitGenerator)):
            raise InvalidInputError(f"rng_state: unknown bit generator {name!r}")
        bit_gen = bit_gen_cls()
        bit_gen.state = self.rng_state
        return np.random.Generator(bit_gen)

    def to_dict(self) -> dict[str, Any]:
        """Plain-data snapshot (keys ``phi``, ``step``, ``rng/...``, optional ``metric``,
        ``anchor``); :meth:`from_dict` restores it for a bit-identical continuation."""
        out: dict[str, Any] = {"phi": self.phi.copy(), "step": int(self.step)}
        _flatten(self.rng_state, "rng", out)
        if self.metric is not None:
            out["metric"] = self.metric.copy()
        if self.anchor is not None:
            out["anchor"] = self.anchor.copy()
        if self.concentration is not None:
            out["concentration"] = self.concentration.copy()
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SGLDState:
        """Rebuild a state saved with :meth:`to_dict`."""
        try:
            phi = np.array(data["phi"], dtype=float)
            step = int(data["step"])
        except KeyError as exc:
            raise InvalidInputError(f"data: missing key {exc} of an SGLDState dict") from exc
        if phi.ndim != 2 or not np.all(np.isfinite(phi)) or phi.size == 0 or phi.min() < 0:
            raise InvalidInputError("phi: expected a finite non-negative (chains, K) array")
        if step < 0:
            raise InvalidInputError(f"step: must be >= 0, got {step}")
        rng_state = _unflatten(data, "rng")
        if "bit_generator" not in rng_state:
            raise InvalidInputError("data: no generator state (keys 'rng/...') in the dict")
        k = phi.shape[1]
        state = cls(
            phi,
            step,
            rng_state,
            _check_vector(data.get("metric"), k, "metric"),
            _check_vector(data.get("anchor"), k, "anchor"),
            _check_vector(data.get("concentration"), phi.shape[0], "concentration"),
        )
        state.generator()  # validates the generator state
        return state


def _flatten(obj: dict, prefix: str, out: dict[str, Any]) -> None:
    for key, value in obj.items():
        name = f"{prefix}/{key}"
        if isinstance(value, dict):
            _flatten(value, name, out)
        elif isinstance(value, np.ndarray):
            out[name] = value.copy()
        else:
            out[name] = value


def _unflatten(data: dict[str, Any], prefix: str) -> dict:
    root: dict = {}
    for key, value in data.items():
        if not key.startswith(prefix + "/"):
            continue
        parts = key.split("/")[1:]
        node = root
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        if isinstance(value, np.ndarray) and value.ndim == 0:
            value = value.item()
        if isinstance(value, np.integer):
            value = int(value)
        node[parts[-1]] = value
    return root


# ---------------------------------------------------------------------------------------- kernel
def _grad_log_target(alpha: np.ndarray, phi: np.ndarray, h: np.ndarray, floor: float) -> np.ndarray:
    """``d log pi / d phi = (rho - 1) / max(phi, floor) - 1 + h(theta) / S`` (phi (C, K))."""
    total = phi.sum(axis=1, keepdims=True)
    return (alpha - 1.0) / np.maximum(phi, floor) - 1.0 + h / total


def _advance(
    rows: Likelihood,
    alpha: np.ndarray,
    state: SGLDState,
    n_steps: int,
    gamma: float,
    minibatch: int | None,
    record_every: int,
    refresh_scale: bool,
    prior: AdaptiveDirichlet | None = None,
) -> tuple[SGLDState, np.ndarray, np.ndarray]:
    gen = state.generator()
    phi = state.phi.astype(float, copy=True)
    chains, k = phi.shape
    conc = None if prior is None else state.concentration.copy()
    alpha = np.broadcast_to(alpha, (chains, k)) if conc is None else conc[:, None] * np.ones(k)
    a_total = alpha.sum(axis=1)
    metric = state.metric
    anchor = state.anchor if minibatch is not None else None
    if anchor is not None:
        anchor_score = rows.score(anchor[None, :], _DOT_FLOOR)[0]
    scale_n = rows.n / minibatch if minibatch is not None else 0.0
    sqrt_gamma = math.sqrt(gamma)
    floor = 0.5 * sqrt_gamma
    if metric is not None:
        half_gw = 0.5 * gamma * metric
        quarter_gw = 0.25 * gamma * metric
        dof = 2.0 * alpha
    first = state.step
    draws = np.empty((chains, (first + n_steps) // record_every - first // record_every, k))
    a_draws = np.empty(draws.shape[:2])
    rec = 0
    for step in range(first, first + n_steps):
        if prior is not None:  # Gibbs step: a | phi, exact on the prior's grid
            conc = _draw_concentration(prior, phi, gen)
            alpha = conc[:, None] * np.ones(k)
            a_total = k * conc
            if metric is not None:
                dof = 2.0 * alpha
        total = phi.sum(axis=1, keepdims=True)
        if not np.all(total > 0):
            raise NotSupportedError(
                "sgld: every latent weight of a chain underflowed to 0 (float64); use "
                "method='hmc', or a larger prior concentration"
            )
        theta = phi / total
        if minibatch is None:
            h = rows.score(theta, _DOT_FLOOR)
        else:
            block = rows.rows_at(_sample_rows(rows, gen, (chains, minibatch)))  # (C, m, K)
            inv = 1.0 / np.maximum(np.einsum("cmk,ck->cm", block, theta), _DOT_FLOOR)
            if anchor is None:
                h = scale_n * np.einsum("cmk,cm->ck", block, inv) - rows.n
            else:
                inv -= 1.0 / np.maximum(block @ anchor, _DOT_FLOOR)
                h = anchor_score + scale_n * np.einsum("cmk,cm->ck", block, inv)
        if metric is None:  # the paper's reflected Euler step
            grad = _grad_log_target(alpha, phi, h, floor)
            phi = np.abs(phi + 0.5 * gamma * grad + sqrt_gamma * gen.standard_normal((chains, k)))
        else:  # exact CIR transition with S and b = h + 1 - S frozen over the step
            bt = np.clip(half_gw * (h + 1.0 - total), -700.0, 50.0)
            nonzero = bt != 0.0
            growth = np.where(nonzero, np.expm1(bt) / np.where(nonzero, bt, 1.0), 1.0)
            scale = quarter_gw * total * growth
            phi = scale * gen.noncentral_chisquare(dof, phi * np.exp(bt) / scale)
        if refresh_scale:
            new_total = gen.gamma(a_total, size=chains)
            sums = phi.sum(axis=1)
            dead = ~(sums > 0)
            if np.any(dead):  # every coordinate underflowed to 0: restart at the prior mean
                phi[dead] = alpha[dead] / a_total[dead, None]
                sums[dead] = 1.0
            phi *= (new_total / sums)[:, None]
        if (step + 1) % record_every == 0:
            draws[:, rec] = phi / phi.sum(axis=1, keepdims=True)
            if conc is not None:
                a_draws[:, rec] = conc
            rec += 1
    metric = None if state.metric is None else state.metric.copy()
    anchor = None if state.anchor is None else state.anchor.copy()
    new_state = SGLDState(phi, first + n_steps, gen.bit_generator.state, metric, anchor, conc)
    return new_state, draws, a_draws


def _draw_concentration(
    prior: AdaptiveDirichlet, phi: np.ndarray, gen: np.random.Generator
) -> np.ndarray:
    """One draw per chain of ``a`` given the latent weights: with ``phi_i ~ Gamma(a, 1)``,
    ``p(a_j | phi) ∝ w_j exp((a_j - 1) sum_i log phi_i - K lgamma(a_j))`` on the grid."""
    k = phi.shape[1]
    log_phi = np.log(np.maximum(phi, np.finfo(float).tiny)).sum(axis=1)
    terms = prior.log_w - k * gammaln(prior.a) + prior.a * log_phi[:, None]
    probs = np.exp(terms - terms.max(axis=1, keepdims=True))
    cum = np.cumsum(probs, axis=1)
    u = gen.random((phi.shape[0], 1)) * cum[:, -1:]
    return prior.a[np.minimum((u > cum).sum(axis=1), prior.a.shape[0] - 1)]


def sgld_run(
    tally: Tally,
    alpha: Any,
    state: SGLDState,
    n_steps: int,
    *,
    step_size: float | None = None,
    minibatch: int | None = None,
    record_every: int = 1,
    refresh_scale: bool | None = None,
) -> tuple[SGLDState, np.ndarray]:
    """Advance ``state`` by ``n_steps`` SGLD updates targeting the posterior given ``tally``.

    The update of AdOBEst-LDP (Aydın and Yıldırım, ACM TKDD 2025), vectorised over chains: the
    paper's reflected Euler step when ``state.metric`` is None, the exact-CIR step of the weighted
    expanded-mean metric otherwise (formulas in :mod:`bayesldp.bayes.sgld`'s docstring).  Per-update
    cost ``O(chains U K)`` with the exact gradient, ``O(chains m K)`` with minibatches of ``m``
    reports (support-form rows are gathered from the boolean support; the tally's dense rows are
    never materialised).

    Parameters
    ----------
    tally : Tally
        The data; it may have grown since the state was made (warm start).
    alpha : array_like, shape (K,)
        Dirichlet prior concentrations (``rho``).
    state : SGLDState
        Where to start (not modified; a new state is returned).
    n_steps : int
        Number of updates (>= 0).
    step_size : float, optional
        ``gamma``.  Identity metric: in phi units, default ``0.5 / n`` (the reference code).
        Expanded metric: in posterior variances (given ``w``), default 0.2.
    minibatch : int or None
        Reports per minibatch ``m`` (with replacement, gradient scaled by ``n / m``; uses the
        control variate if ``state.anchor`` is set); None computes the exact gradient.
    record_every : int
        Record ``theta`` after each update whose global count (``state.step + 1``, ...) is a
        multiple of ``record_every``.
    refresh_scale : bool or None
        Redraw ``S`` from ``Gamma(sum(alpha), 1)`` after each update (an exact Gibbs move).
        None (default): True with the expanded metric, False with the identity metric (the
        reference code's plain update; with ``alpha < 1`` the refresh makes the identity metric's
        boundary bias larger, since small ``S`` means large steps in ``theta``).

    Returns
    -------
    state : SGLDState
        The state after the updates.
    draws : ndarray, shape (chains, n_recorded, K)
        The recorded ``theta``.
    """
    tally = check_tally(tally)
    k = tally.k
    alpha = _check_total_concentration(check_alpha(alpha, k))
    if not isinstance(state, SGLDState):
        raise InvalidTypeError(f"state: expected an SGLDState, got {type(state).__name__}")
    if state.k != k:
        raise InvalidInputError(f"state: has K = {state.k} categories, the tally has K = {k}")
    n_steps = check_int(n_steps, "n_steps", 0)
    record_every = check_int(record_every, "record_every", 1)
    minibatch = _check_minibatch(minibatch)
    if refresh_scale is None:
        refresh_scale = state.metric is not None
    refresh_scale = check_bool(refresh_scale, "refresh_scale")
    if step_size is None:
        step_size = 0.5 / tally.n if state.metric is None else _DEFAULT_STEP
    gamma = check_positive(step_size, "step_size")
    state, draws, _ = _advance(
        Likelihood(tally), alpha, state, n_steps, gamma, minibatch, record_every, refresh_scale
    )
    return state, draws
