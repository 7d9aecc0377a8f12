"""Longitudinal mechanisms: a memoised permanent response, a fresh instantaneous one per round.

Arcolezi, Couchot, Al Bouna, Xiao, "Improving the utility of locally differentially private
protocols for longitudinal and multidimensional frequency estimates", Digital Communications
and Networks, 2022 (arXiv:2111.04636), section 3.  A user holding ``v`` draws a *permanent*
response ``B = PRR(v)`` once (an eps_perm-LDP frequency oracle: GRR, SUE or OUE with
``eps_perm``, the paper's ``eps_infinity``) and memoises it per (user, value); in every round
they report ``Y = IRR(B)``, a fresh randomisation of ``B`` (GRR, or per bit SUE / OUE).  The
instantaneous parameters are chosen so that the composed channel ``PRR o IRR`` of one report is
exactly ``epsilon``-LDP, ``epsilon`` the paper's ``eps_1`` (the first report's budget), while
any number of reports of one value leak at most ``eps_perm`` (they are post-processing of ``B``).

Composition.  For L-GRR both steps are GRR with ``(p1, q1)`` and ``(p2, q2)``, and so is the
composition: ``p_s = p1 p2 + (1 - p1) q2``, ``q_s = q1 p2 + (1 - q1) q2``, with
``p_s - q_s = (p1 - q1)(p2 - q2)``; ``p_s / q_s = e^eps_1`` gives

.. math:: p_2 = \\frac{1 + (k - 1) d}{k}, \\qquad
          d = p_2 - q_2 = \\frac{(e^{\\varepsilon_1} - 1)(e^{\\varepsilon_\\infty} + k - 1)}
                               {(e^{\\varepsilon_1} + k - 1)(e^{\\varepsilon_\\infty} - 1)},

so one round of L-GRR is exactly GRR(k, eps_1) (its ``p_s = e^eps_1 / (e^eps_1 + k - 1)``).
For the unary ones each bit goes through ``(p1, q1)`` then ``(p2, q2)``: the composed bit
probabilities are ``p_s = p1 p2 + (1 - p1) q2`` (true bit) and ``q_s = q1 p2 + (1 - q1) q2``
(other bits), bits independent given the value, so a round is the unary encoding with
``(p_s, q_s)`` and epsilon ``log(p_s (1 - q_s) / (q_s (1 - p_s)))``; the instantaneous epsilon
that makes this ``eps_1`` is found by bracketing root search (it is monotone), to float64
precision.  L-SUE's rounds are then exactly SUE(k, eps_1), L-OSUE's exactly OUE(k, eps_1).
With an OUE instantaneous step (``p2 = 1/2``) a round cannot reach ``eps_perm``: at most
``log(p1 (1 - q1/2) / (q1 (1 - p1/2)))``.

Since a round's reports follow the composed channel and are independent across users, a round is
an ordinary tally (:meth:`tally`) that every estimator and posterior reads, and the pure-protocol
oracle with ``p* = p_s``, ``q* = q_s`` is unbiased with its exact variance.
"""

from __future__ import annotations

import math
import os
from abc import abstractmethod
from typing import Any, ClassVar

import numpy as np
from scipy.optimize import brentq

from bayesldp._validation import (
    RNGLike,
    as_generator,
    check_epsilon,
    check_values,
)
from bayesldp.errors import InvalidInputError
from bayesldp.mechanisms.base import Mechanism, Parameter
from bayesldp.mechanisms.grr import GRR
from bayesldp.mechanisms.longitudinal._instant import first_round, instant_reports
from bayesldp.mechanisms.longitudinal.memo import Memo, MemoStore, checked_memo, memo_keys
from bayesldp.mechanisms.unary import (
    _MIN_EXACT_PROBABILITY,
    OUE,
    SUE,
    UnaryEncoding,
    check_bit_reports_memory,
)

_PARAMETERS = """
    Parameters
    ----------
    k : int
        Number of categories (>= 2).
    epsilon : float
        Budget of one round (the paper's ``eps_1``).
    eps_perm : float, optional
        Budget of the permanent response, the bound over all rounds (``eps_infinity``);
        default ``2 epsilon``; must exceed ``epsilon``.
"""
#: the instantaneous epsilon is searched in (0, this]
_MAX_INSTANT_EPSILON = 60.0


class Longitudinal(Mechanism):
    """What the longitudinal mechanisms share: ``eps_perm``, the memoised permanent response,
    the instantaneous one, and the two exact budgets.  Subclasses say how each step is drawn."""

    PARAMETERS = (
        Parameter(
            "eps_perm",
            float,
            "longitudinal mechanisms: budget of the permanent response, the bound over all "
            "rounds (default 2 epsilon)",
        ),
    )
    #: special-purpose (repeated collection): not ranked by ``recommend``
    RECOMMEND = False
    #: the permanent response's mechanism
    permanent: Mechanism

    def __init__(self, k: int, epsilon: float, eps_perm: float | None = None) -> None:
        epsilon = check_epsilon(epsilon)
        eps_perm = 2.0 * epsilon if eps_perm is None else check_epsilon(eps_perm, "eps_perm")
        if not epsilon < eps_perm:
            raise InvalidInputError(
                f"epsilon: the one-round budget {epsilon:g} must be below eps_perm = "
                f"{eps_perm:g} (a round reports a randomisation of the permanent response)"
            )
        self.eps_perm = eps_perm
        self._setup(k, epsilon)
        super().__init__(k, epsilon)

    @abstractmethod
    def _setup(self, k: int, epsilon: float) -> None:
        """Build the permanent and instantaneous steps for the budgets."""

    def params(self) -> dict[str, Any]:
        return {"k": self.k, "epsilon": self.epsilon, "eps_perm": self.eps_perm}

    # ------------------------------------------------------------------ the two steps
    @abstractmethod
    def instantaneous(self, permanent: Any, rng: RNGLike = None) -> Any:
        """One round's reports from the permanent responses (a fresh draw each call)."""

    def fresh_round(self, x: np.ndarray, rng: RNGLike = None) -> tuple[np.ndarray, Any]:
        """``(stored, reports)``: permanent responses of ``x`` drawn afresh, as a memo stores
        them, and one round's reports of them (:meth:`instantaneous_stored`)."""
        gen = as_generator(rng)
        stored = self.encode_permanent(self.permanent.perturb(x, gen))
        return stored, self.instantaneous_stored(stored, gen)

    def instantaneous_stored(self, stored: np.ndarray, rng: RNGLike = None) -> Any:
        """One round's reports from stored memo rows: ``instantaneous(decode_permanent(stored))``
        (the unary mechanisms read the packed rows directly, with the same draws)."""
        return self.instantaneous(self.decode_permanent(stored), rng)

    @abstractmethod
    def memo_layout(self) -> tuple[np.dtype, tuple[int, ...]]:
        """dtype and shape of one stored permanent response."""

    def encode_permanent(self, permanent: Any) -> np.ndarray:
        """Permanent responses as stored in a memo."""
        return permanent

    def decode_permanent(self, stored: np.ndarray) -> Any:
        """Stored memo rows back to permanent responses."""
        return stored

    @abstractmethod
    def valid_permanent(self, stored: np.ndarray) -> bool:
        """Whether stored rows are permanent responses of this mechanism."""

    def perturb(
        self, x: Any, rng: RNGLike = None, *, users: Any = None, memo: Memo | None = None
    ) -> Any:
        """One round's reports for users holding ``x``.

        Without ``memo`` every user's permanent response is drawn afresh (one report per user:
        the composed channel, as the audit and simulations use it).  With ``memo`` (a
        :class:`Memo` or :class:`MemoStore` of this mechanism) and ``users`` (one distinct
        non-negative integer id per value), the permanent response of each (user, value) is
        read from the memo, or drawn and added to it (a store is written before this returns),
        and only the instantaneous step is fresh.  Vectorised: a sorted-key lookup, no loop.
        """
        x = check_values(x, self.k)
        gen = as_generator(rng)
        if memo is None:
            if users is not None:
                raise InvalidInputError("users: given without memo=; pass the memo to reuse")
            return self.fresh_round(x, gen)[1]
        checked_memo(memo, users, self)
        keys = memo_keys(users, x, memo.width)
        stored, missing = memo.lookup(keys, self.memo_layout())
        if missing.size == keys.size:  # all new (a first round)
            stored, reports = self.fresh_round(x, gen)
            memo.insert(keys, stored)
            return reports
        if missing.size:
            fresh = self.encode_permanent(self.permanent.perturb(x[missing], gen))
            stored[missing] = fresh
            memo.insert(keys[missing], fresh)
        return self.instantaneous_stored(stored, gen)

    def memo(self) -> Memo:
        """An empty in-memory memo of permanent responses for this mechanism."""
        return Memo(self)

    def memo_store(self, path: str | os.PathLike[str], *, wait: float = 0.0) -> MemoStore:
        """The memo in the file ``path`` (created if missing), locked for this writer."""
        return MemoStore(path, self, wait=wait)

    # ------------------------------------------------------------------ budgets
    def realised_longitudinal_epsilon(self) -> float:
        """Exact epsilon of the permanent channel: the bound over every round (all reports of
        one value are a randomisation of its permanent response); equals ``eps_perm``."""
        return self.permanent.realised_epsilon()


class LGRR(Longitudinal, GRR):
    """L-GRR: GRR with ``eps_perm`` memoised, then GRR per round (Arcolezi et al. 2022).

    Permanent ``p1 = e^eps_perm / (e^eps_perm + k - 1)``, ``q1 = (1 - p1)/(k - 1)``; the
    instantaneous GRR has ``p2 = (1 + (k - 1) d)/k``,
    ``d = (e^eps_1 - 1)(e^eps_perm + k - 1) / ((e^eps_1 + k - 1)(e^eps_perm - 1))``, so that the
    composed channel ``p_s = p1 p2 + (1 - p1) q2``, ``q_s = q1 p2 + (1 - q1) q2`` has
    ``p_s / q_s = e^eps_1`` (module docstring).  The channel, tally and oracle are GRR's with
    ``(p_s, q_s)``: ``n Var* = q_s (1 - q_s)/(p_s - q_s)^2``.  Parameters as
    :class:`LongitudinalUnary`'s (``k``, ``epsilon`` the round's budget ``eps_1``, ``eps_perm``
    the permanent response's, default ``2 epsilon``); reports are GRR's integers.

    Examples
    --------
    >>> import bayesldp
    >>> mech = bayesldp.LGRR(4, 1.0, eps_perm=3.0)
    >>> memo = mech.memo()
    >>> day1 = mech.perturb([0, 1, 2, 3], rng=0, users=[10, 11, 12, 13], memo=memo)
    >>> len(memo), mech.tally(day1).n
    (4, 4)
    """

    name = "LGRR"

    def _setup(self, k: int, epsilon: float) -> None:
        self.permanent = GRR(k, self.eps_perm)
        # e^eps_inst = p2 / q2 = 1 + t (u + k) / (u - t), t = e^eps - 1, u = e^eps_perm - 1
        # (module docstring: q2 = (1 - d) / k), in logs: no overflow or rounding of p2 to 1
        log_t = epsilon + math.log(-math.expm1(-epsilon))
        log_u_k = self.eps_perm + math.log1p((k - 1) * math.exp(-self.eps_perm))
        log_u_t = self.eps_perm + math.log(-math.expm1(epsilon - self.eps_perm))
        #: the instantaneous GRR (over the permanent response)
        self.instant = GRR(k, float(np.logaddexp(0.0, log_t + log_u_k - log_u_t)))

    @property
    def p(self) -> float:
        """Composed probability of reporting the true value, ``p1 p2 + (1 - p1) q2``."""
        p1, p2, q2 = self.permanent.p, self.instant.p, self.instant.q
        return p1 * p2 + (1.0 - p1) * q2

    @property
    def q(self) -> float:
        """Composed probability of reporting one given other value, ``q1 p2 + (1 - q1) q2``."""
        q1, p2, q2 = self.permanent.q, self.instant.p, self.instant.q
        return q1 * p2 + (1.0 - q1) * q2

    def instantaneous(self, permanent: Any, rng: RNGLike = None) -> np.ndarray:
        return self.instant.perturb(permanent, rng)

    def memo_layout(self) -> tuple[np.dtype, tuple[int, ...]]:
        return np.dtype(np.int64), ()

    def valid_permanent(self, stored: np.ndarray) -> bool:
        return bool(stored.size == 0 or (stored.min() >= 0 and stored.max() < self.k))


class LongitudinalUnary(Longitudinal, UnaryEncoding):
    """A unary encoding memoised with ``PERMANENT(k, eps_perm)`` per bit, then ``INSTANT`` per
    bit with the instantaneous epsilon that makes one round ``eps_1``-LDP (module docstring).

    Bit probabilities are the composed ``(p_s, q_s)``; :meth:`bit_probabilities` and
    :meth:`log_bit_probabilities` are per instance here (they depend on ``eps_perm`` too).
    """

    __doc__ += _PARAMETERS

    PERMANENT: ClassVar[type[UnaryEncoding]]
    INSTANT: ClassVar[type[UnaryEncoding]]

    def _setup(self, k: int, epsilon: float) -> None:
        self.permanent = self.PERMANENT(k, self.eps_perm)
        p1, q1 = self.permanent.p, self.permanent.q

        def composed(eps2: float) -> tuple[float, float]:
            p2, q2 = self.INSTANT.bit_probabilities(eps2)
            return p1 * p2 + (1.0 - p1) * q2, q1 * p2 + (1.0 - q1) * q2

        def excess(eps2: float) -> float:
            ps, qs = composed(eps2)
            return math.log(ps) + math.log1p(-qs) - math.log(qs) - math.log1p(-ps) - epsilon

        top = excess(_MAX_INSTANT_EPSILON)
        if top <= 0:
            p2 = self.INSTANT.bit_probabilities(math.inf)[0]
            reach = math.log(p1 * (1 - q1 * p2) / (q1 * (1 - p1 * p2)))
            raise InvalidInputError(
                f"epsilon: {self.name} with eps_perm = {self.eps_perm:g} reaches at most "
                f"{min(reach, top + epsilon):.6g} in one round (its instantaneous "
                f"{self.INSTANT.name} step); use a smaller epsilon or a larger eps_perm"
            )
        eps2 = brentq(excess, 0.0, _MAX_INSTANT_EPSILON, xtol=1e-15, rtol=4 * np.finfo(float).eps)
        p2, q2 = self.INSTANT.bit_probabilities(eps2)
        if min(q2, 1.0 - p2) < _MIN_EXACT_PROBABILITY:
            raise InvalidInputError(
                f"epsilon: {epsilon:g} with eps_perm = {self.eps_perm:g} needs an instantaneous "
                "bit probability below 2^-52, which 53-bit uniforms cannot draw exactly; use a "
                "smaller epsilon or a larger eps_perm"
            )
        #: ``(p2, q2)``: the instantaneous step keeps a 1 bit as 1 w.p. p2, a 0 bit w.p. q2
        self.instant_bits = (p2, q2)
        self._bits = composed(eps2)

    def bit_probabilities(self, epsilon: float | None = None) -> tuple[float, float]:
        """The composed ``(p_s, q_s)`` of this instance (``epsilon`` is ignored)."""
        return self._bits

    def log_bit_probabilities(self, epsilon: float | None = None) -> tuple[float, ...]:
        ps, qs = self._bits
        return math.log(ps), math.log(qs), math.log1p(-ps), math.log1p(-qs)

    def instantaneous(self, permanent: Any, rng: RNGLike = None) -> np.ndarray:
        """Each bit of the permanent ``(n, k)`` bits reported 1 w.p. ``p2`` if set, else
        ``q2``, independently (exact bits in one compiled pass:
        :mod:`bayesldp.mechanisms.longitudinal._instant`)."""
        p2, q2 = self.instant_bits
        return instant_reports(np.asarray(permanent, dtype=bool), p2, q2, rng)

    def fresh_round(self, x: np.ndarray, rng: RNGLike = None) -> tuple[np.ndarray, np.ndarray]:
        """Permanent bits drawn as ``PERMANENT(k, eps_perm)`` draws them (bit ``x`` 1 w.p.
        ``p1``, the others ``q1``, independent), packed, and reported in the same compiled pass:
        no ``(n, k)`` array of permanent bits (:func:`~bayesldp.mechanisms.longitudinal.
        _instant.first_round`); the reports are :meth:`instantaneous_stored` of the packed rows."""
        n, k = x.shape[0], self.k
        check_bit_reports_memory(self, n)
        p2, q2 = self.instant_bits
        return first_round(x, k, self.permanent.p, self.permanent.q, p2, q2, rng)

    def instantaneous_stored(self, stored: np.ndarray, rng: RNGLike = None) -> np.ndarray:
        """:meth:`instantaneous` of the memo's packed rows, read as they are (no unpacking);
        the same reports as ``instantaneous(decode_permanent(stored), rng)``."""
        p2, q2 = self.instant_bits
        return instant_reports(stored, p2, q2, rng, k=self.k)

    def memo_layout(self) -> tuple[np.dtype, tuple[int, ...]]:
        return np.dtype(np.uint8), ((self.k + 7) // 8,)

    def encode_permanent(self, permanent: Any) -> np.ndarray:
        return np.packbits(permanent, axis=1, bitorder="little")

    def decode_permanent(self, stored: np.ndarray) -> np.ndarray:
        return np.unpackbits(stored, axis=1, count=self.k, bitorder="little").view(bool)

    def valid_permanent(self, stored: np.ndarray) -> bool:
        spare = 8 * stored.shape[1] - self.k  # padding bits of the last byte must be 0
        return bool(stored.size == 0 or not np.any(stored[:, -1] >> (8 - spare) if spare else 0))


_UNARY_REPORTS = """
    Reports are bool arrays ``(n, k)`` as for :class:`~bayesldp.SUE`; the tally is in support
    form with levels ``(q_s (1 - p_s), p_s (1 - q_s))``; parameters as
    :class:`LongitudinalUnary`'s.
"""


class LSUE(LongitudinalUnary):
    """L-SUE, basic one-time RAPPOR: SUE with ``eps_perm`` memoised, then SUE per round.

    Permanent ``p1 = e^(eps_perm/2) / (e^(eps_perm/2) + 1)``, ``q1 = 1 - p1``; instantaneous
    symmetric ``(p2, 1 - p2)``.  The composition is symmetric too (``1 - p_s = q_s``), so one
    round is exactly SUE(k, eps_1): ``p_s = e^(eps_1/2) / (e^(eps_1/2) + 1)`` (Erlingsson et
    al. 2014; Arcolezi et al. 2022, L-SUE).

    Examples
    --------
    The permanent responses are kept in a memo, so a user who reports the same value again reuses
    them:

    >>> import bayesldp
    >>> mech = bayesldp.LSUE(4, 1.0, eps_perm=3.0)
    >>> memo = mech.memo()
    >>> day1 = mech.perturb([0, 1, 2, 3], rng=0, users=[10, 11, 12, 13], memo=memo)
    >>> day2 = mech.perturb([0, 1, 2, 3], rng=1, users=[10, 11, 12, 13], memo=memo)
    >>> len(memo), mech.tally(day1).n, round(mech.realised_epsilon(), 12)
    (4, 4, 1.0)
    """

    __doc__ += _UNARY_REPORTS
    name = "LSUE"
    PERMANENT = SUE
    INSTANT = SUE


class LOUE(LongitudinalUnary):
    """L-OUE: OUE with ``eps_perm`` memoised, then OUE per round (Arcolezi et al. 2022).

    Permanent ``p1 = 1/2``, ``q1 = 1/(e^eps_perm + 1)``; instantaneous ``p2 = 1/2`` and the
    ``q2`` for which ``p_s (1 - q_s) / (q_s (1 - p_s)) = e^eps_1``, with
    ``p_s = p1/2 + (1 - p1) q2``, ``q_s = q1/2 + (1 - q1) q2``.
    A round reaches at most ``log(p1 (1 - q1/2) / (q1 (1 - p1/2)))`` (``q2 -> 0``).

    Examples
    --------
    >>> import bayesldp
    >>> mech = bayesldp.LOUE(4, 1.0, eps_perm=3.0)
    >>> memo = mech.memo()
    >>> day1 = mech.perturb([0, 1, 2, 3], rng=0, users=[10, 11, 12, 13], memo=memo)
    >>> len(memo), mech.tally(day1).n, round(mech.realised_epsilon(), 12)
    (4, 4, 1.0)
    """

    __doc__ += _UNARY_REPORTS
    name = "LOUE"
    PERMANENT = OUE
    INSTANT = OUE


class LOSUE(LongitudinalUnary):
    """L-OSUE: OUE with ``eps_perm`` memoised, then SUE per round (Arcolezi et al. 2022).

    Permanent ``p1 = 1/2``, ``q1 = 1/(e^eps_perm + 1)``; instantaneous symmetric
    ``(p2, 1 - p2)`` with ``p_s (1 - q_s) / (q_s (1 - p_s)) = e^eps_1``,
    ``p_s = p1 p2 + (1 - p1)(1 - p2)``, ``q_s = q1 p2 + (1 - q1)(1 - p2)``.  With ``p1 = 1/2``,
    ``p_s = 1/2``: one round is exactly OUE(k, eps_1), ``q_s = 1/(e^eps_1 + 1)``.  The paper's
    recommended unary protocol for most budgets.

    Examples
    --------
    >>> import bayesldp
    >>> mech = bayesldp.LOSUE(4, 1.0, eps_perm=3.0)
    >>> memo = mech.memo()
    >>> day1 = mech.perturb([0, 1, 2, 3], rng=0, users=[10, 11, 12, 13], memo=memo)
    >>> len(memo), mech.tally(day1).n, round(mech.realised_epsilon(), 12)
    (4, 4, 1.0)
    """

    __doc__ += _UNARY_REPORTS
    name = "LOSUE"
    PERMANENT = OUE
    INSTANT = SUE


class LSOUE(LongitudinalUnary):
    """L-SOUE: SUE with ``eps_perm`` memoised, then OUE per round (Arcolezi et al. 2022).

    Permanent ``p1 = e^(eps_perm/2) / (e^(eps_perm/2) + 1)``, ``q1 = 1 - p1``; instantaneous
    ``p2 = 1/2`` and the ``q2`` with ``p_s (1 - q_s) / (q_s (1 - p_s)) = e^eps_1``,
    ``p_s = p1/2 + (1 - p1) q2``, ``q_s = q1/2 + (1 - q1) q2``; a round reaches at most
    ``log(p1 (1 - q1/2) / (q1 (1 - p1/2)))``.

    Examples
    --------
    >>> import bayesldp
    >>> mech = bayesldp.LSOUE(4, 1.0, eps_perm=3.0)
    >>> memo = mech.memo()
    >>> day1 = mech.perturb([0, 1, 2, 3], rng=0, users=[10, 11, 12, 13], memo=memo)
    >>> len(memo), mech.tally(day1).n, round(mech.realised_epsilon(), 12)
    (4, 4, 1.0)
    """

    __doc__ += _UNARY_REPORTS
    name = "LSOUE"
    PERMANENT = SUE
    INSTANT = OUE
