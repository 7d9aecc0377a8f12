"""Key-value data: PCKV-GRR (Gu, Li, Cheng, Xiong, Cao, USENIX Security 2020) and PCKV-PM.

These are the key-value row of Table I of Ye, Wang, Zhang and Feng, "Revisiting EM-based Estimation
for Locally Differentially Private Protocols"; PCKV-PM is :class:`PCKVPM`, at the end of this
module.

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
from bayesldp.mechanisms.base import FiniteChannelMechanism, Parameter, built_once, int_columns
from bayesldp.mechanisms.numerical.base import ChannelInverseOracle
from bayesldp.mechanisms.numerical.piecewise import Piecewise
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
    SIZE = "d"
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

    @built_once
    def channel(self) -> np.ndarray:
        """The ``2 d' x 2 d'`` channel over joint categories ``z = 2 k + s`` (built once)."""
        check_memory(8.0 * self.k**2, f"PCKV(d={self.d}).channel", "use fewer keys")
        a, b = self.a, self.b
        # 1 - a and 1 - b written out: at a large budget 1.0 - a loses every digit
        # (eps 35: realised epsilon 35.03 from the rounded channel)
        other = 1.0 / (2.0 * (math.exp(self.epsilon_key) + self.n_keys - 1))
        channel = np.full((self.k, self.k), other)
        z = np.arange(self.k)
        channel[z, z] = a * b
        channel[z, z ^ 1] = a / (1.0 + math.exp(self.epsilon_value))  # same key, other sign
        return channel

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

    # ------------------------------------------------------------------ report tables
    def reports_from_frame(self, frame: Any, source: Any = "reports") -> np.ndarray:
        """Columns key (0..d+ell-1) and value (+1 or -1), or report (joint category 2 key + s).

        The pair each user sends (Gu et al.; keys from ``d`` are the dummy keys; ``s = 1`` for
        the value -1), one row per user: a ``user`` column, if any, may not repeat a user."""
        if "report" in frame.columns or "key" not in frame.columns:
            return super().reports_from_frame(frame, source)
        return self._joint_from_pairs(frame, source)

    def reports_to_frame(self, reports: Any) -> Any:
        """The reports as key and value columns (:meth:`reports_from_frame` reads them)."""
        import pandas as pd

        z = self.check_reports(reports)
        return pd.DataFrame({"key": z // 2, "value": 1 - 2 * (z % 2)})

    def tally_frame(self, frame: Any, source: Any = "reports") -> Tally:
        """Tally either form of :meth:`reports_from_frame`, or aggregated data: a ``count``
        column beside ``report`` or beside ``key`` and ``value``."""
        if "report" not in frame.columns and "key" in frame.columns:
            import pandas as pd

            joint = {"report": self._joint_from_pairs(frame, source)}
            if "count" in frame.columns:
                joint["count"] = frame["count"].to_numpy()
            frame = pd.DataFrame(joint)
        return super().tally_frame(frame, source)

    def _joint_from_pairs(self, frame: Any, source: Any) -> np.ndarray:
        """``2 key + s`` of key and value columns, checked (errors name the CSV line)."""
        key, value = int_columns(frame, ["key", "value"], source)
        bad_key = (key < 0) | (key >= self.n_keys)
        bad_value = (value != 1) & (value != -1)
        for bad, what, valid in ((bad_key, "key", f"0..{self.n_keys - 1} (d = {self.d} keys "
                                  f"and ell = {self.ell} dummy keys)"),
                                 (bad_value, "value", "+1 or -1")):  # fmt: skip
            if bad.any():
                row = int(np.flatnonzero(bad)[0])
                got = (key if what == "key" else value)[row]
                raise InvalidInputError(
                    f"reports: {source}: {what} {got} on CSV line {row + 2} is not one of {valid}"
                )
        if "user" in frame.columns:
            twice = frame["user"].duplicated(keep=False).to_numpy()
            if twice.any():
                rows = np.flatnonzero(twice)
                user = frame["user"].iloc[rows[0]]
                raise InvalidInputError(
                    f"reports: {source}: user {user} has more than one report (CSV line "
                    f"{rows[0] + 2}); a PCKV user sends one key-value pair"
                )
        return 2 * key + (value == -1)

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


# ============================================================================ PCKV-PM
def svepm_half_width(epsilon: float) -> float:
    """The PM window half-width of Ye et al.'s code, ``B = (e^{eps/2} + 9) / (10 e^{eps/2} - 10)``
    (``PCKV_EM.py``, ``SVEPM``; Wang et al.'s PM has ``1 / (e^{eps/2} - 1)``)."""
    half = 0.5 * float(epsilon)
    return (1.0 + 9.0 * math.exp(-half)) / (-10.0 * math.expm1(-half))


class PCKVPM(ChannelInverseOracle, FiniteChannelMechanism):
    """PCKV-PM: one key's frequency and the distribution and mean of its values, from one real
    report per user (Ye et al., Table I; the authors' ``SVEPM`` in ``PCKV_EM.py``).

    A user holding the key with value ``v`` in ``[lo, hi]`` reports the piecewise mechanism
    (:class:`~bayesldp.Piecewise` with window half-width ``B``, default the authors'
    :func:`svepm_half_width`); a user without it reports a uniform draw on PM's report range
    ``[y_lo, y_hi]`` (``[-C, C]`` on PM's scale).  On that scale the uniform density
    ``1 / (2C)`` lies between PM's ``q = 1 / (2 B e^eps + 2 k_s)`` and ``p = e^eps q`` (as
    ``2C = 2 B + 2 k_s``), so the report is eps-LDP over (holds the key, value) and the
    realised epsilon from the densities is exactly ``log(p / q) = eps``.

    The categories are the ``bins`` equal value bins of ``[lo, hi]`` and, last, the key's
    absence; the channel's rows are PM's discretised channel and the uniform row ``|C_j| /
    (y_hi - y_lo)``.  Every estimator and posterior reads the tallies (the authors' estimator
    is EM over 1024 value bins plus the uniform component, with smoothing: ``ems``), and
    :meth:`key_value` turns joint frequencies into the key's frequency ``f = 1 - pi_absent``
    and the mean of its values.

    The posterior needs care: spreading mass evenly over the value bins looks almost like the
    key's absence (a uniform report), so along that direction the likelihood is nearly flat
    and the prior decides.  ``fit``'s default Dirichlet(1) puts ``bins`` pseudo-counts on the
    values against 1 on the absence (a priori ``f ~ Beta(bins, 1)``) and pulls the frequency
    up (``benchmarks/results/pckv_parity.md``).  A uniform prior on ``f`` is ``Dirichlet(1/bins,
    ..., 1/bins, 1)`` (:meth:`prior`); how well the samplers handle it at many bins is not
    benchmarked yet.  EMS (the authors' estimator) is the point estimate to use.

    Left out: the authors' code can send a share ``gamma`` of users to a membership-only
    report (GRR or OUE); their simulation runs ``gamma = 0``, and their GRR over one key
    (``mul_d = 1``) answers "holds" with probability 1 for holders, which is not eps-LDP.

    Parameters
    ----------
    bins : int
        Number of equal value bins of ``[lo, hi]``.
    epsilon : float
        Privacy budget.
    lo, hi : float, default -1, 1
        The value domain.
    output_bins : int, optional
        Output bins over the report range (default ``bins + 1``, so the channel-inverse oracle
        is identified; the authors use ``bins``).
    half_width : float, optional
        PM's window half-width ``B`` (default :func:`svepm_half_width`).

    Examples
    --------
    >>> import numpy as np, bayesldp
    >>> mech = bayesldp.PCKVPM(16, 1.0)
    >>> round(mech.realised_epsilon(), 12)
    1.0
    >>> rng = np.random.default_rng(0)
    >>> holds = rng.random(5000) < 0.3
    >>> reports = mech.perturb_pairs(rng.uniform(0, 1, 5000), holds, rng=1)
    >>> frequency, mean = mech.key_value(bayesldp.estimate(mech.tally(reports), "em").frequencies)
    """

    name = "PCKVPM"
    SIZE = "bins"
    PARAMETERS = (
        Parameter("lo", float, "lower end of the value domain (default -1)"),
        Parameter("hi", float, "upper end of the value domain (default 1)"),
        Parameter("output_bins", int, "output bins over the report range (default bins + 1)"),
        Parameter("half_width", float, "PM's window half-width B (default svepm_half_width)"),
    )
    RECOMMEND = False
    #: what :func:`bayesldp.fit` warns of when called with its default prior
    DEFAULT_PRIOR_CAVEAT = (
        "puts `bins` pseudo-counts on PCKV-PM's values against 1 on the key's absence, and "
        "along their nearly flat direction of the likelihood the posterior follows it: the "
        "key's frequency comes out too high (benchmarks/results/pckv_parity.md). Use "
        "estimate(tally, 'ems', **mech.svepm_rule(tally.n)) for a point estimate, or give a "
        "prior (mech.prior() is uniform on the frequency)"
    )

    def __init__(
        self,
        bins: int,
        epsilon: float,
        lo: float = -1.0,
        hi: float = 1.0,
        output_bins: int | None = None,
        half_width: float | None = None,
    ) -> None:
        bins = check_int(bins, "bins")
        self._half_width_arg = half_width
        if half_width is None:
            half_width = svepm_half_width(check_positive(epsilon, "epsilon"))
        if output_bins is None:
            output_bins = bins + 1
        #: the holders' mechanism: PM over the value bins
        self.values = Piecewise(bins, epsilon, lo, hi, output_bins, half_width=half_width)
        super().__init__(bins + 1, epsilon)
        self.output_bins = self.values.output_bins
        self.lo, self.hi = self.values.lo, self.values.hi

    def params(self) -> dict[str, Any]:
        out = {"bins": self.bins, "epsilon": self.epsilon, "lo": self.lo, "hi": self.hi,
               "output_bins": self.output_bins}  # fmt: skip
        if self._half_width_arg is not None:
            out["half_width"] = self.values.B
        return out

    @property
    def bins(self) -> int:
        """Number of value bins (the categories but the last)."""
        return self.k - 1

    @property
    def ordered_bins(self) -> int:
        """The categories that are ordered bins (``ems`` smooths only these): the value bins."""
        return self.k - 1

    @property
    def n_outputs(self) -> int:
        return self.output_bins

    @built_once
    def channel(self) -> np.ndarray:
        """The ``(bins + 1) x output_bins`` channel: PM's rows, then the uniform row."""
        edges = self.values.output_edges
        uniform = np.diff(edges) / (edges[-1] - edges[0])
        return np.vstack([self.values.channel, uniform])

    def log_density(self, y: Any, holds: Any, v: Any) -> np.ndarray:
        """``log f(y | holds, v)``: PM's where ``holds``, else the uniform's (``v`` unused)."""
        y = np.asarray(y, dtype=float)
        y_lo, y_hi = self.values.output_range
        uniform = np.where((y >= y_lo) & (y <= y_hi), -math.log(y_hi - y_lo), -np.inf)
        return np.where(holds, self.values.log_density(y, v), uniform)

    def realised_epsilon(self) -> float:
        """``sup_y`` of the largest log-ratio of densities over every input, holders' values on
        PM's grid (both domain ends included) and non-holders; ``eps`` exactly (class doc)."""
        v, y = self.values._grids()
        logf = np.vstack([self.values.log_density(y[None, :], v[:, None]),
                          self.log_density(y, False, 0.0)[None, :]])  # fmt: skip
        return float(np.max(logf.max(axis=0) - logf.min(axis=0)))

    # ------------------------------------------------------------------ client side
    def perturb_pairs(
        self, values: Any, holds: Any, rng: RNGLike = None, *, clip: bool = False
    ) -> np.ndarray:
        """One real report per user: PM of the value where ``holds``, else uniform.

        Parameters
        ----------
        values : array-like of float
            One per user; read only where ``holds`` (others may be anything, NaN included).
            Held values outside ``[lo, hi]`` are an error unless ``clip=True``.
        holds : array-like of bool
            Whether each user holds the key.
        rng : seed or Generator
        """
        holds = np.asarray(holds)
        if holds.dtype != bool:
            raise InvalidInputError(f"holds: expected booleans, got dtype {holds.dtype}")
        values = np.asarray(values)
        if values.shape != holds.shape or holds.ndim != 1:
            raise InvalidInputError(
                f"values, holds: expected two 1-d arrays of one entry per user, got shapes "
                f"{values.shape} and {holds.shape}"
            )
        gen = as_generator(rng)
        y_lo, y_hi = self.values.output_range
        out = y_lo + (y_hi - y_lo) * gen.random(holds.size)
        if holds.any():
            out[holds] = self.values.perturb(values[holds], gen, clip=clip)
        return out

    def perturb(self, x: Any, rng: RNGLike = None) -> np.ndarray:
        """Randomise categories ``x`` (value bins ``0..bins-1``, ``bins`` for no key): a value
        uniform within its bin (the channel's model), then :meth:`perturb_pairs`."""
        x = check_values(x, self.k)
        gen = as_generator(rng)
        holds = x < self.bins
        values = np.zeros(x.size)
        if holds.any():
            values[holds] = self.values.category_values(x[holds], gen)
        return self.perturb_pairs(values, holds, gen)

    # ------------------------------------------------------------------ aggregator side
    def check_reports(self, reports: Any, cast: bool = True) -> np.ndarray:
        """Validate real reports within PM's report range."""
        return self.values.check_reports(reports)

    def tally(self, reports: Any) -> Tally:
        """Bin real reports into the output bins and tally the counts."""
        return self.tally_from_report_counts(self.values.output_bin_counts_of(reports))

    def reports_from_frame(self, frame: Any, source: Any = "reports") -> np.ndarray:
        """A report column of real numbers (PM's reports, in the units of the values)."""
        return self.values.reports_from_frame(frame, source)

    def reports_to_frame(self, reports: Any) -> Any:
        return self.values.reports_to_frame(reports)

    def tally_frame(self, frame: Any, source: Any = "reports") -> Tally:
        """Tally a ``report`` column, or aggregated data: ``report`` and ``count`` columns."""
        return self.tally_from_report_counts(self.values.output_bin_counts(frame, source))

    def report_size(self) -> str:
        return "1 float"

    def audit_event(self, reports: Any, x0: int, x1: int) -> np.ndarray:
        """Reports in the output bins where ``P[x0, j] / P[x1, j]`` is largest."""
        channel = self.channel
        with np.errstate(divide="ignore"):
            ratio = np.log(channel[x0]) - np.log(channel[x1])
        best = np.flatnonzero(ratio >= ratio.max() - 1e-12)
        return np.isin(self.values.output_bin(reports), best)

    def svepm_rule(self, n: int) -> dict[str, Any]:
        """The options of ``ems`` that run the authors' PCKV-PM EM (``myEM_one``) on ``n``
        reports: kernel [1, 2, 1] while the gain exceeds 0.0003, tol ``1e-4 e^eps``, at least
        2000 of at most 10,000 steps, the L1 rule ``1 / (100 n)``, and their start (1/8 spread
        over the value bins but ~1e-7 on the lowest 250/1024 of them, 7/8 on the absence),
        normalised.  Left out: their nudge of the absence after 5,000 steps."""
        n = check_int(n, "n")
        theta0 = np.full(self.k, 1.0 / self.bins / 8.0)
        theta0[: round(self.bins * 250 / 1024)] = 1e-7
        theta0[-1] = 7.0 / 8.0
        return dict(kernel=(1, 2, 1), smooth_gain=0.0003, tol=1e-4 * math.exp(self.epsilon),
                    min_steps=2000, change_tol=1.0 / (100 * n), max_iter=10_000,
                    theta0=theta0 / theta0.sum())  # fmt: skip

    def prior(self, concentration: float = 1.0) -> Any:
        """``Dirichlet(c / bins, ..., c / bins, c)``: ``f ~ Beta(c, c)`` on the key's frequency
        (uniform at ``c = 1``) and a symmetric Dirichlet of total ``c`` within the values."""
        from bayesldp.bayes.prior import Dirichlet

        c = check_positive(concentration, "concentration")
        return Dirichlet(np.r_[np.full(self.bins, c / self.bins), c])

    # ------------------------------------------------------------------ what users want
    def key_value(self, frequencies: Any) -> tuple[np.ndarray, np.ndarray]:
        """The key's frequency ``1 - pi_absent`` and the mean of its values ``sum_i c_i pi_i /
        sum_i pi_i`` (``c_i`` the value bins' centres), from joint frequencies ``(..., bins +
        1)``: a point estimate or posterior draws alike.  Zero mass on every value bin leaves
        the mean undefined: NaN there, with a warning."""
        pi = np.asarray(frequencies, dtype=float)
        if pi.shape[-1] != self.k:
            raise InvalidInputError(
                f"frequencies: expected a last axis of {self.k} (value bins and absence), got "
                f"shape {pi.shape}"
            )
        mass = pi[..., :-1].sum(axis=-1)
        empty = mass == 0
        if np.any(empty):
            warnings.warn("key_value: no mass on any value bin: mean NaN", RuntimeWarning,
                          stacklevel=2)  # fmt: skip
        weighted = pi[..., :-1] @ self.values.bin_centres
        mean = np.divide(weighted, mass, out=np.full_like(mass, np.nan), where=~empty)
        return 1.0 - pi[..., -1], mean
