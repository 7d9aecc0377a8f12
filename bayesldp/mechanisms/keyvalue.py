"""PCKV-GRR: key-value data (Gu, Li, Cheng, Xiong, Cao, USENIX Security 2020), seed 001's row.

Each user holds a set of key-value pairs, keys in ``0..d-1`` and values in ``[-1, 1]``; the
aggregator wants, per key, its frequency (the fraction of users holding it) and the mean of its
values.  PCKV's client (Gu et al., sections 4.1-4.2):

1. **padding and sampling**: a user holding ``m < ell`` pairs adds ``ell - m`` dummy pairs with
   distinct keys from ``d..d+ell-1`` and value 0, then samples one pair uniformly from the
   ``max(m, ell)`` pairs;
2. **value discretisation**: value ``v`` becomes ``+1`` with probability ``(1 + v) / 2``, else
   ``-1`` (unbiased: ``E[v*] = v``);
3. **correlated perturbation** (PCKV-GRR) of the pair ``(k, v*)`` over the ``d' = d + ell``
   keys: with probability ``a = e^eps1 / (e^eps1 + d' - 1)`` the key is kept and the value kept
   with probability ``b = e^eps2 / (e^eps2 + 1)`` (else flipped); otherwise the key becomes a
   uniform other key and the value a uniform sign.

Here the sampled, discretised pair is one of ``K = 2 d'`` joint categories ``z = 2 k + s``
(``s = 0`` for ``+1``, ``1`` for ``-1``) and step 3 is a finite channel over them:

.. math::

    P[z, z] = a b, \\quad P[(k, s), (k, 1 - s)] = a (1 - b), \\quad
    P[z, (k', \\cdot)] = \\frac{1 - a}{2 (d' - 1)} \\ (k' \\ne k),

so every estimator and posterior of the package reads PCKV tallies.  Its exact epsilon (the
largest log-ratio in a column) is ``max(eps2, eps1 + ln(2 b))``; :class:`PCKV` takes the total
budget and the value's share ``eps2`` (default: all of it, Gu et al.'s allocation for
PCKV-GRR) and sets ``eps1 = eps - ln(2 e^eps2 / (e^eps2 + 1))`` so that the bound is ``eps``.
:meth:`PCKV.key_values` turns joint frequencies ``pi`` (estimates or posterior draws) into the
key frequencies ``f_k = ell (pi_{k,+} + pi_{k,-})`` and means
``m_k = (pi_{k,+} - pi_{k,-}) / (pi_{k,+} + pi_{k,-})``; ``f_k`` is the fraction of users
holding ``k`` when no user holds more than ``ell`` pairs (else sampling under-counts it).
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np

from bayesldp._validation import (
    RNGLike,
    as_generator,
    check_int,
    check_memory,
    check_positive,
    check_values,
    one_d_array,
)
from bayesldp.errors import InvalidInputError
from bayesldp.mechanisms.base import FiniteChannelMechanism, Parameter
from bayesldp.tally import Tally


class PCKV(FiniteChannelMechanism):
    """PCKV-GRR over ``d`` keys with padding length ``ell`` (module docstring).

    Parameters
    ----------
    d : int
        Number of keys (>= 1).
    epsilon : float
        Total privacy budget (the channel's exact epsilon).
    ell : int
        Padding length (>= 1): users holding up to ``ell`` pairs are counted without bias.
    epsilon_value : float, optional
        The value's budget ``eps2`` in ``(0, epsilon]`` (default ``epsilon``); the key's
        ``eps1`` follows.

    Examples
    --------
    >>> import numpy as np, bayesldp
    >>> mech = bayesldp.PCKV(3, 2.0)
    >>> round(mech.realised_epsilon(), 12)
    2.0
    >>> z = mech.sample_pairs(keys=[0, 1, 1], values=[0.5, -1.0, 1.0], rng=0)
    >>> tally = mech.tally(mech.perturb(z, rng=1))
    """

    name = "PCKV"
    RECOMMEND = False
    PARAMETERS = (
        Parameter("ell", int, "padding length: pairs per user counted without bias"),
        Parameter("epsilon_value", float, "the value's share of epsilon (default: all)"),
    )

    def __init__(
        self, d: int, epsilon: float, ell: int = 1, epsilon_value: float | None = None
    ) -> None:
        self.d = check_int(d, "d")
        self.ell = check_int(ell, "ell")
        super().__init__(2 * (self.d + self.ell), epsilon)
        eps2 = self.epsilon
        if epsilon_value is not None:
            eps2 = check_positive(epsilon_value, "epsilon_value")
        if eps2 > self.epsilon:
            raise InvalidInputError(
                f"epsilon_value: must be at most epsilon = {self.epsilon}, got {eps2}"
            )
        self.epsilon_value = eps2
        #: the key's budget eps1: eps1 + ln(2 b) = epsilon
        self.epsilon_key = self.epsilon - math.log(2.0 / (1.0 + math.exp(-eps2)))

    def params(self) -> dict[str, Any]:
        return {"d": self.d, "epsilon": self.epsilon, "ell": self.ell,
                "epsilon_value": self.epsilon_value}  # fmt: skip

    @property
    def n_keys(self) -> int:
        """``d' = d + ell``: the keys and the dummy keys."""
        return self.d + self.ell

    @property
    def a(self) -> float:
        """Probability of keeping the key."""
        return math.exp(self.epsilon_key) / (math.exp(self.epsilon_key) + self.n_keys - 1)

    @property
    def b(self) -> float:
        """Probability of keeping the value's sign when the key is kept."""
        return 1.0 / (1.0 + math.exp(-self.epsilon_value))

    @property
    def channel(self) -> np.ndarray:
        """The ``2 d' x 2 d'`` channel over joint categories ``z = 2 k + s`` (built once)."""
        cached = getattr(self, "_channel", None)
        if cached is None:
            check_memory(8.0 * self.k**2, f"PCKV(d={self.d}).channel", "use fewer keys")
            a, b = self.a, self.b
            other = (1.0 - a) / (2.0 * (self.n_keys - 1))
            cached = np.full((self.k, self.k), other)
            z = np.arange(self.k)
            cached[z, z] = a * b
            cached[z, z ^ 1] = a * (1.0 - b)  # same key, other sign
            cached.setflags(write=False)
            self._channel = cached
        return cached

    def perturb(self, x: Any, rng: RNGLike = None) -> np.ndarray:
        """Randomise joint categories ``x`` (``2 k + s``, from :meth:`sample_pairs`)."""
        x = check_values(x, self.k)
        gen = as_generator(rng)
        n = x.shape[0]
        key, sign = x // 2, x % 2
        keep_key = gen.random(n) < self.a
        flip = gen.random(n) >= self.b
        other = gen.integers(0, self.n_keys - 1, size=n)
        other += other >= key  # uniform over the d' - 1 other keys
        random_sign = gen.integers(0, 2, size=n)
        out_key = np.where(keep_key, key, other)
        out_sign = np.where(keep_key, sign ^ flip, random_sign)
        return 2 * out_key + out_sign

    def sample_pairs(
        self,
        keys: Any,
        values: Any,
        users: Any = None,
        n_users: int | None = None,
        rng: RNGLike = None,
    ) -> np.ndarray:
        """Padding and sampling, then value discretisation: one joint category per user.

        Parameters
        ----------
        keys, values : array-like
            One entry per key-value pair: keys in ``0..d-1``, values in ``[-1, 1]``.
        users : array-like of int, optional
            The user holding each pair, ids in ``0..n_users-1`` (default: one pair per user).
            A user may not hold a key twice.
        n_users : int, optional
            Number of users (default: ``max(users) + 1``); users holding no pair report a
            dummy pair.
        rng : seed or Generator

        Returns
        -------
        ndarray of int64, shape (n_users,)
            ``2 k + s`` of each user's sampled pair (:meth:`perturb` randomises it).
        """
        keys = check_values(keys, self.d, "keys")
        values = np.asarray(one_d_array(values, "values", unit="pair"), dtype=float)
        if values.shape != keys.shape:
            raise InvalidInputError(
                f"values: expected one per key ({keys.size}), got {values.size}"
            )
        bad = ~np.isfinite(values)
        if bad.any():
            raise InvalidInputError(f"values: {int(bad.sum())} NaN or infinite value(s)")
        outside = (values < -1.0) | (values > 1.0)
        if outside.any():
            raise InvalidInputError(
                f"values: {int(outside.sum())} value(s) outside [-1, 1] (e.g. "
                f"{values[outside][0]}); rescale them to [-1, 1] first"
            )
        if users is None:
            users = np.arange(keys.size)
        users = np.asarray(users)
        if users.shape != keys.shape:
            raise InvalidInputError(f"users: expected one per key ({keys.size}), got {users.size}")
        if n_users is None:
            n_users = int(np.max(users)) + 1 if users.dtype.kind in "iu" else 1
        users = check_values(users, check_int(n_users, "n_users"), "users")
        order = np.lexsort((keys, users))
        users, keys, values = users[order], keys[order], values[order]
        if np.any((users[1:] == users[:-1]) & (keys[1:] == keys[:-1])):
            raise InvalidInputError("keys: a user holds the same key twice")
        gen = as_generator(rng)
        held = np.bincount(users, minlength=n_users)
        first = np.concatenate([[0], np.cumsum(held)[:-1]])
        pick = np.floor(gen.random(n_users) * np.maximum(held, self.ell)).astype(np.int64)
        real = pick < held
        idx = first[real] + pick[real]
        key = gen.integers(self.d, self.n_keys, size=n_users)  # a dummy: uniform over ell
        value = np.zeros(n_users)
        key[real], value[real] = keys[idx], values[idx]
        negative = gen.random(n_users) >= (1.0 + value) / 2.0
        return 2 * key + negative

    def key_values(self, frequencies: Any) -> tuple[np.ndarray, np.ndarray]:
        """Key frequencies and value means from joint frequencies ``(..., 2 d')``.

        ``f_k = ell (pi_{k,+} + pi_{k,-})`` and ``m_k = (pi_{k,+} - pi_{k,-}) /
        (pi_{k,+} + pi_{k,-})`` for the ``d`` real keys; works on a point estimate and on an
        array of posterior draws alike.  A key with zero estimated mass has no mean: NaN there,
        with a warning naming the keys.
        """
        pi = np.asarray(frequencies, dtype=float)
        if pi.shape[-1] != self.k:
            raise InvalidInputError(
                f"frequencies: expected a last axis of {self.k} joint categories, got "
                f"shape {pi.shape}"
            )
        pos, neg = pi[..., 0 : 2 * self.d : 2], pi[..., 1 : 2 * self.d : 2]
        mass = pos + neg
        empty = mass == 0
        if empty.any():
            keys = np.flatnonzero(empty.reshape(-1, self.d).any(axis=0))
            warnings.warn(f"key_values: keys {keys.tolist()} have zero mass: mean NaN",
                          RuntimeWarning, stacklevel=2)  # fmt: skip
        mean = np.divide(pos - neg, mass, out=np.full_like(mass, np.nan), where=~empty)
        return self.ell * mass, mean

    def unbiased_key_values(self, tally: Tally) -> tuple[np.ndarray, np.ndarray]:
        """Gu et al.'s estimators from the report counts ``n1`` (``(k, +1)``), ``n2``.

        ``f_k = ell (n1 + n2 - n q) / (n (a - q))``, ``q = (1 - a) / (d' - 1)`` (unbiased), and
        ``m_k = (n1 - n2)(a - q) / (a (2b - 1)(n1 + n2 - n q))`` (a ratio of unbiased
        estimates; ``E[n1 - n2] = n a (2b - 1) f_k m_k / ell``).  Neither is clipped: ``f``
        may leave ``[0, 1]`` and ``m`` ``[-1, 1]`` (Gu et al. clip both).
        """
        self.check_tally(tally)
        counts = tally.stat  # report counts by joint category
        n = tally.n
        n1, n2 = counts[0 : 2 * self.d : 2], counts[1 : 2 * self.d : 2]
        a, b = self.a, self.b
        q = (1.0 - a) / (self.n_keys - 1)
        freq = self.ell * (n1 + n2 - n * q) / (n * (a - q))
        held = n1 + n2 - n * q
        if np.any(held == 0):
            warnings.warn(f"unbiased_key_values: keys {np.flatnonzero(held == 0).tolist()} "
                          "have an estimated frequency of 0: mean NaN", RuntimeWarning,
                          stacklevel=2)  # fmt: skip
        mean = np.divide((n1 - n2) * (a - q), a * (2 * b - 1) * held,
                         out=np.full_like(held, np.nan), where=held != 0)  # fmt: skip
        return freq, mean
