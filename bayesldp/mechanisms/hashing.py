"""Local hashing: binary (BLH) and optimised (OLH) local hashing.

Wang, Blocki, Li, Jha, "Locally Differentially Private Protocols for Frequency Estimation",
USENIX Security 2017, section 4.4.  Each user draws a hash function ``h`` from a universal family
mapping ``0..k-1`` to ``0..g-1``, hashes the true value ``v = h(x)`` and sends ``(h, y)`` where
``y`` is ``v`` randomised by generalised randomised response over ``g`` values:

.. math::

    \\Pr[y = v] = p = \\frac{e^\\varepsilon}{e^\\varepsilon + g - 1}, \\qquad
    \\Pr[y = v'] = q = \\frac{1}{e^\\varepsilon + g - 1} \\quad (v' \\ne v).

A report supports every input that hashes to ``y``.  BLH takes ``g = 2``; OLH takes
``g = round(e^eps) + 1``, which minimises the oracle variance.

The hash family here is the Carter-Wegman family ``h_{a,b}(x) = ((a x + b) mod P) mod g`` with
the prime ``P = 2^31 - 1``, ``a`` uniform in ``1..P-1`` and ``b`` uniform in ``0..P-1``.  The
oracle's ``q*`` is computed exactly for this family (not the idealised ``1/g``), so the unbiased
estimate is exactly unbiased.

:class:`HashedGRR` holds what every hash family shares (GRR over ``g`` values, ``p*``, ``q*``
from the family's collision probability); :mod:`bayesldp.mechanisms.xxhash_lh` builds the xxhash
family of pure-ldp and multi-freq-ldpy on it.
"""

from __future__ import annotations

import math
import numbers
from abc import abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from bayesldp._docs import categorical_parameters, fill_doc
from bayesldp._validation import (
    RNGLike,
    as_generator,
    check_domain_size,
    check_epsilon,
    check_memory,
    check_values,
)
from bayesldp.errors import InvalidInputError, InvalidTypeError, NotSupportedError
from bayesldp.mechanisms.base import (
    Parameter,
    PureProtocol,
    bits,
    check_report_field,
    int_columns,
    realised_epsilon_of_channel,
)
from bayesldp.tally import Tally

MERSENNE_31 = 2**31 - 1
"""The default hash prime ``P = 2^31 - 1``."""

_TALLY_BLOCK = 1 << 24  # support entries computed per block of users in tally() (16 MB of bools)
_MAX_CHANNEL_ENTRIES = 50_000_000  # largest K x g matrix channel_given_hash() will build


@dataclass(frozen=True, eq=False)
class HashReports:
    """Local-hashing reports of ``n`` users: the hash seeds ``(a, b)`` and the reported value.

    User ``i`` hashes with ``h_i(x) = ((a[i] x + b[i]) mod P) mod g`` and reports ``y[i]`` in
    ``0..g-1``.  Produced by :meth:`LocalHashing.perturb`; validated by :meth:`LocalHashing.tally`.

    Attributes
    ----------
    a : ndarray of int64, shape (n,)
        Hash multipliers in ``1..P-1``.
    b : ndarray of int64, shape (n,)
        Hash offsets in ``0..P-1``.
    y : ndarray of int64, shape (n,)
        Reported (perturbed) hash values in ``0..g-1``.

    Examples
    --------
    What :meth:`OLH.perturb <bayesldp.OLH.perturb>` returns:

    >>> import bayesldp
    >>> mech = bayesldp.OLH(10, 1.0)
    >>> reports = mech.perturb([0, 1, 2, 3], rng=0)
    >>> type(reports).__name__, reports.y.shape, bool((reports.y < mech.g).all())
    ('HashReports', (4,), True)
    """

    a: np.ndarray
    b: np.ndarray
    y: np.ndarray

    def __len__(self) -> int:
        return int(np.shape(self.y)[0]) if np.ndim(self.y) else 1


def _is_prime(m: int) -> bool:
    if m < 2:
        return False
    if m % 2 == 0:
        return m == 2
    return all(m % d for d in range(3, math.isqrt(m) + 1, 2))


def _check_prime(prime: object) -> int:
    if prime == MERSENNE_31:
        return MERSENNE_31
    if isinstance(prime, bool) or not isinstance(prime, numbers.Integral):
        raise InvalidTypeError(f"_prime: expected an integer prime, got {prime!r}")
    prime = int(prime)
    if not (3 <= prime <= MERSENNE_31) or not _is_prime(prime):
        raise InvalidInputError(f"_prime: must be a prime in 3..2^31-1, got {prime}")
    return prime


def _check_g(g: object, prime: int) -> int:
    if isinstance(g, bool) or not isinstance(g, numbers.Integral):
        raise InvalidTypeError(f"g: expected an integer hash range >= 2, got {g!r}")
    if not (2 <= g <= prime):
        raise InvalidInputError(f"g: the hash range must be an integer in 2..{prime}, got {g}")
    return int(g)


def optimal_g(epsilon: float, prime: int = MERSENNE_31) -> int:
    """OLH's hash range ``g = round(e^eps) + 1`` (Wang et al. 2017, section 4.4).

    Capped at the hash prime ``P`` (reached only for ``eps >~ ln P ~ 21.5``), since the hash
    takes at most ``P`` values.
    """
    if epsilon >= math.log(prime):
        return prime
    return min(round(math.exp(epsilon)) + 1, prime)


def _collision_probability(prime: int, g: int) -> float:
    # (a x + b mod P, a x' + b mod P) is uniform over ordered pairs of distinct residues, so
    # c = #{(r, s): r != s, r = s (mod g)} / (P (P - 1)).  With P = m g + t, t residue classes
    # mod g hold m + 1 of 0..P-1 and g - t hold m.
    m, t = divmod(prime, g)
    pairs = t * (m + 1) * m + (g - t) * m * (m - 1)
    return pairs / (prime * (prime - 1))


class HashedGRR(PureProtocol):
    """What every local-hashing family shares: GRR over the ``g`` hash values.

    A report keeps the true hash value ``h(x)`` w.p. ``p = e^eps/(e^eps + g - 1)`` and reports
    each other value w.p. ``q = 1/(e^eps + g - 1)``; the oracle has ``p* = p`` and
    ``q* = c p + (1 - c) q`` with the family's collision probability
    ``c = Pr_h[h(x) = h(x')]`` (``x != x'``), which subclasses define, with the hash.
    """

    #: reports and hashes need no K-length array, so K may be any domain's (up to 2^31 - 1
    #: for the peers' hashes); the tally checks K against memory
    DOMAIN_CHECKED_AT_BUILD = False

    g: int

    def params(self) -> dict[str, Any]:
        return {"k": self.k, "epsilon": self.epsilon, "g": self.g}

    @property
    def p(self) -> float:
        """Probability of reporting the true hash value, ``e^eps / (e^eps + g - 1)``."""
        e_neg = math.exp(-self.epsilon)
        return 1.0 / (1.0 + (self.g - 1) * e_neg)

    @property
    def q(self) -> float:
        """Probability of reporting one given other hash value, ``1 / (e^eps + g - 1)``."""
        e_neg = math.exp(-self.epsilon)
        return e_neg / (1.0 + (self.g - 1) * e_neg)

    @property
    @abstractmethod
    def collision_probability(self) -> float:
        """``c = Pr_h[h(x) = h(x')]`` for ``x != x'``."""

    @property
    def p_star(self) -> float:
        return self.p

    @property
    def q_star(self) -> float:
        c = self.collision_probability
        return c * self.p + (1.0 - c) * self.q

    def _block_tally(
        self, n: int, add_hits: Callable[[int, int, np.ndarray], np.ndarray], advice: str
    ) -> Tally:
        """The support-form tally of ``n`` reports, ``support[i, x] = (h_i(x) == y_i)`` with
        levels ``(q, p)``, built over blocks of users so temporaries stay ``O(block * k)`` bytes.

        ``add_hits(start, stop, stat)`` returns the ``(k, stop - start)`` bools of the users
        ``start..stop-1`` and adds each category's hits to ``stat``; ``advice`` is what the memory
        check suggests when the support does not fit.
        """
        block = max(4096, _TALLY_BLOCK // self.k)

        def fill(support: np.ndarray, stat: np.ndarray) -> None:
            for start in range(0, n, block):
                stop = min(n, start + block)
                support[start:stop] = add_hits(start, stop, stat).T

        return self._support_tally(n, fill, advice)

    def _support_tally(
        self, n: int, fill: Callable[[np.ndarray, np.ndarray], None], advice: str
    ) -> Tally:
        """The support-form tally of ``n`` reports (levels ``(q, p)``): ``fill(support, stat)``
        sets the ``(n, k)`` bools ``support[i, x] = (h_i(x) == y_i)`` and adds each category's
        hits to ``stat``, after the memory check (``advice``: what it suggests)."""
        k = self.k
        check_memory(
            float(n) * k,
            f"{type(self).__name__}(k={k:,}).tally of {n:,} reports (its support form: an "
            "n x K array of bits, one byte each)",
            advice,
        )
        support = np.empty((n, k), dtype=bool)
        stat = np.zeros(k, dtype=np.int64)
        fill(support, stat)
        return Tally(
            np.ones(n, dtype=np.int64),
            support=support,
            levels=(self.q, self.p),
            stat=stat.astype(float),
            mechanism=self,
            dedupe=k <= 64,  # beyond that, support rows of different users almost never repeat
        )

    def _check_category(self, x: object) -> int:
        if isinstance(x, bool) or not isinstance(x, numbers.Integral):
            raise InvalidTypeError(f"x: expected an integer category, got {x!r}")
        if not 0 <= x < self.k:
            raise InvalidInputError(f"x: must lie in 0..{self.k - 1}, got {x}")
        return int(x)


#: the ``k`` and ``epsilon`` entries of these classes' docstrings
_PARAMETERS = categorical_parameters("2 <= k < 2^31 - 1")


@fill_doc(parameters=_PARAMETERS)
class LocalHashing(HashedGRR):
    """Local hashing with hash range ``g`` (Wang et al., USENIX Security 2017, section 4.4).

    Client: draw ``a ~ U{1..P-1}``, ``b ~ U{0..P-1}``, hash ``v = ((a x + b) mod P) mod g``
    (``P = 2^31 - 1``), keep ``v`` w.p. ``p = e^eps/(e^eps + g - 1)``, else report a uniform one
    of the other ``g - 1`` values.  Reports are :class:`HashReports` ``(a, b, y)``.

    Aggregator: report ``i`` supports ``{x : h_i(x) = y_i}``.  Its exact likelihood row is
    ``Pr(y_i | X = x, h_i) = p`` on the support and ``q = 1/(e^eps + g - 1)`` off it, so the tally
    is in support form with levels ``(q, p)``; ``stat`` is the support counts.

    Oracle (exactly unbiased for this hash family): ``p* = p`` and

    .. math:: q^* = c\\,p + (1 - c)\\,q, \\qquad
              c = \\Pr_{a,b}[h(x) = h(x')] = \\frac{\\#\\{(r, s): r \\ne s \\in 0..P-1,\\;
              r \\equiv s \\pmod g\\}}{P (P - 1)},

    since ``(a x + b mod P, a x' + b mod P)`` is uniform over ordered pairs of distinct residues
    for ``x != x'`` (both below ``P``).  ``c = 1/g - O(1/P)``, so ``q* = 1/g`` up to ``~1e-9``,
    as in Wang et al.  The mechanism is exactly eps-LDP: given the hash, the channel over ``y``
    has ratio ``p/q = e^eps``.

    {parameters}
    g : int
        Hash range (2 <= g <= 2^31 - 1).

    Examples
    --------
    OLH and BLH are local hashing at their choices of ``g``:

    >>> import bayesldp
    >>> from bayesldp.mechanisms import LocalHashing
    >>> mech = LocalHashing(10, 1.0, g=4)
    >>> tally = mech.tally(mech.perturb([0, 1, 2, 3] * 25, rng=0))
    >>> tally.n, round(mech.realised_epsilon(), 12), isinstance(bayesldp.OLH(10, 1.0), LocalHashing)
    (100, 1.0, True)
    """

    name = "LH"

    def __init__(self, k: int, epsilon: float, g: int, *, _prime: int = MERSENNE_31) -> None:
        super().__init__(k, epsilon)
        self._prime = _check_prime(_prime)
        if self.k >= self._prime:
            raise InvalidInputError(
                f"k: local hashing needs k < P = {self._prime} (the hash prime), got {self.k}"
            )
        self.g = _check_g(g, self._prime)

    # ------------------------------------------------------------------ identity
    def _key(self) -> tuple:
        key = super()._key()
        return key if self._prime == MERSENNE_31 else (*key, ("_prime", self._prime))

    # ------------------------------------------------------------------ probabilities
    @property
    def prime(self) -> int:
        """The hash prime ``P``."""
        return self._prime

    @property
    def collision_probability(self) -> float:
        """``c = Pr_{a,b}[h(x) = h(x')]`` for ``x != x'``, exact for this hash family."""
        return _collision_probability(self._prime, self.g)

    # ------------------------------------------------------------------ hashing
    def _hash(self, a: np.ndarray, b: np.ndarray, x: Any) -> np.ndarray:
        # a < P <= 2^31 - 1 and x < P, so a * x + b < 2^62 + 2^31: exact in int64.
        return (a * np.asarray(x, dtype=np.int64) + b) % self._prime % self.g

    def hash_values(self, reports: HashReports, x: int) -> np.ndarray:
        """``h_i(x)`` for every report ``i`` (int64, shape (n,))."""
        a, b, _ = self.check_reports(reports)
        return self._hash(a, b, self._check_category(x))

    # ------------------------------------------------------------------ client
    def perturb(self, x: Any, rng: RNGLike = None) -> HashReports:
        """Hash each value with a fresh random hash and randomise the hash value by GRR over g."""
        x = check_values(x, self.k)
        gen = as_generator(rng)
        n = x.shape[0]
        a = gen.integers(1, self._prime, size=n, dtype=np.int64)
        b = gen.integers(0, self._prime, size=n, dtype=np.int64)
        v = self._hash(a, b, x)
        keep = gen.random(n) < self.p
        shift = gen.integers(1, self.g, size=n, dtype=np.int64)
        y = np.where(keep, v, (v + shift) % self.g)
        return HashReports(a, b, y)

    # ------------------------------------------------------------------ aggregator
    def check_reports(self, reports: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Validate :class:`HashReports` and return its arrays ``(a, b, y)`` as int64."""
        if not isinstance(reports, HashReports):
            raise InvalidTypeError(
                f"reports: expected HashReports(a, b, y) from {type(self).__name__}.perturb, "
                f"got {type(reports).__name__}"
            )
        bounds = {"a": (1, self._prime - 1), "b": (0, self._prime - 1), "y": (0, self.g - 1)}
        arrays = [check_report_field(reports, f, lo, hi) for f, (lo, hi) in bounds.items()]
        lengths = {arr.shape[0] for arr in arrays}
        if len(lengths) != 1:
            sizes = ", ".join(f"{f}={arr.shape[0]}" for f, arr in zip("aby", arrays, strict=True))
            raise InvalidInputError(f"reports: a, b and y need equal lengths, got {sizes}")
        return arrays[0], arrays[1], arrays[2]

    def reports_from_frame(self, frame: Any, source: Any = "reports") -> HashReports:
        """Columns ``a``, ``b`` (the user's hash seed pair) and ``y`` (the reported value)."""
        return HashReports(*int_columns(frame, ["a", "b", "y"], source))

    def reports_to_frame(self, reports: HashReports) -> Any:
        import pandas as pd

        a, b, y = self.check_reports(reports)
        return pd.DataFrame({"a": a, "b": b, "y": y})

    def report_size(self) -> str:
        return f"{bits(math.ceil(math.log2(max(2, self.g))))} + 62-bit hash seed"

    def tally(self, reports: HashReports) -> Tally:
        """Support-form tally: ``support[i, x] = (h_i(x) == y_i)``, levels ``(q, p)``.

        Vectorised over users; the hash of every category is built incrementally,
        ``r_i(x + 1) = (r_i(x) + a_i) mod P``, in uint32 (exact since ``r + a < 2P < 2^32``),
        over blocks of users so temporaries stay ``O(block * k)`` bytes.
        """
        check_domain_size(self.k)  # the tally's K-length arrays (the hashes needed none)
        a, b, y = self.check_reports(reports)
        k = self.k
        prime, g = np.uint32(self._prime), np.uint32(self.g)
        power_of_two = self.g & (self.g - 1) == 0

        def add_hits(start: int, stop: int, stat: np.ndarray) -> np.ndarray:
            r = b[start:stop].astype(np.uint32)
            step = a[start:stop].astype(np.uint32)
            target = y[start:stop].astype(np.uint32)
            tmp = np.empty_like(r)
            wrapped = np.empty_like(r)
            hits = np.empty((k, stop - start), dtype=bool)
            for x in range(k):
                if power_of_two:
                    np.bitwise_and(r, g - np.uint32(1), out=tmp)
                else:  # r mod g = r - (r // g) g (division by a scalar is SIMD in numpy)
                    np.floor_divide(r, g, out=tmp)
                    np.multiply(tmp, g, out=tmp)
                    np.subtract(r, tmp, out=tmp)
                np.equal(tmp, target, out=hits[x])
                if x + 1 < k:  # r <- (r + a) mod P: when r + a < P, r + a - P wraps above r
                    np.add(r, step, out=r)
                    np.subtract(r, prime, out=wrapped)
                    np.minimum(r, wrapped, out=r)
            stat += np.count_nonzero(hits, axis=1)
            return hits

        return self._block_tally(
            y.shape[0],
            add_hits,
            "tally the reports in batches of fewer users and merge the tallies with +, or use "
            "a mechanism with K-sized tallies (GRR, OUE, HadamardResponse)",
        )

    def supports(self, reports: HashReports, x: int) -> np.ndarray:
        """Report ``i`` supports ``x`` iff ``h_i(x) == y_i``."""
        a, b, y = self.check_reports(reports)
        return self._hash(a, b, self._check_category(x)) == y

    # ------------------------------------------------------------------ privacy
    def channel_given_hash(self, a: int, b: int) -> np.ndarray:
        """The K x g channel of ``y`` given the hash ``h_{a,b}``.

        ``P[x, v] = p`` if ``h_{a,b}(x) = v`` else ``q = (1 - p)/(g - 1) = 1/(e^eps + g - 1)``.
        """
        if self.k * self.g > _MAX_CHANNEL_ENTRIES:
            raise NotSupportedError(
                f"channel_given_hash: a {self.k} x {self.g} matrix is too large to build"
            )
        return self._channel_given_hash(a, b, compact=False)

    def _channel_given_hash(self, a: int, b: int, *, compact: bool) -> np.ndarray:
        for name, value, lo in (("a", a, 1), ("b", b, 0)):
            if isinstance(value, bool) or not isinstance(value, numbers.Integral):
                raise InvalidTypeError(f"{name}: expected an integer, got {value!r}")
            if not lo <= value < self._prime:
                raise InvalidInputError(f"{name}: must lie in {lo}..{self._prime - 1}, got {value}")
        h = self._hash(np.int64(a), np.int64(b), np.arange(self.k))
        if compact:  # the hashed values, plus one value no input hashes to (if any)
            # inputs with one hash value share a row: one row per value keeps every column's
            # max and min (and the matrix g x g, not K x g: 7.5 GB for K = 2^24)
            h = np.flatnonzero(np.bincount(h, minlength=self.g))
            columns = h
            if columns.size < self.g:
                free = np.setdiff1d(np.arange(columns.size + 1), columns)[0]
                columns = np.append(columns, free)
        else:
            columns = np.arange(self.g)
        return np.where(h[:, None] == columns[None, :], self.p, self.q)

    def realised_epsilon(self) -> float:
        """Epsilon from the exact conditional channel given a hash.

        The report is ``(a, b, y)``; ``Pr(a, b)`` does not depend on ``x``, so the privacy loss is
        that of the channel of ``y`` given the hash.  Every such channel holds only the values
        ``p`` and ``q``, so each column's ratio is 1 or ``p/q``, and a hash separating two inputs
        attains ``p/q``; ``(a, b) = (1, 0)`` separates 0 and 1 (``g >= 2``, ``k < P``).  Columns
        no input hashes to are constant (``q``) and all alike, so one stands for them all.
        """
        return realised_epsilon_of_channel(self._channel_given_hash(1, 0, compact=True))

    def audit_event(self, reports: Any, x0: int, x1: int) -> np.ndarray:
        """``h(x0) = y`` and ``h(x1) != y``: probability ratio ``p/q = e^eps`` between x0, x1."""
        return PureProtocol.audit_event(self, reports, x0, x1)


@fill_doc(parameters=_PARAMETERS)
class BLH(LocalHashing):
    """Binary local hashing: :class:`LocalHashing` with ``g = 2``.

    Wang et al. 2017, section 4.4: ``p* = e^eps/(e^eps + 1)``, ``q* ~ 1/2``,
    ``n Var* ~ (e^eps + 1)^2 / (e^eps - 1)^2``.

    {parameters}

    Examples
    --------
    >>> import bayesldp
    >>> mech = bayesldp.BLH(5, 1.0)
    >>> mech.tally(mech.perturb([0, 1, 2, 3, 4] * 100, rng=0)).n
    500
    """

    name = "BLH"

    def __init__(self, k: int, epsilon: float, *, _prime: int = MERSENNE_31) -> None:
        super().__init__(k, epsilon, 2, _prime=_prime)

    def params(self) -> dict[str, Any]:
        return {"k": self.k, "epsilon": self.epsilon}


@fill_doc(parameters=_PARAMETERS)
class OLH(LocalHashing):
    """Optimised local hashing: :class:`LocalHashing` with ``g = round(e^eps) + 1`` by default.

    Wang et al. 2017, section 4.4: ``p* = e^eps/(e^eps + g - 1)``, ``q* ~ 1/g``,
    ``n Var* ~ (e^eps - 1 + g)^2 / ((e^eps - 1)^2 (g - 1))`` (``~ 4 e^eps/(e^eps - 1)^2`` at the
    optimal g).

    {parameters}
    g : int, optional
        Hash range (2 <= g <= 2^31 - 1); default ``round(e^eps) + 1`` (capped at ``2^31 - 1``).

    Examples
    --------
    >>> import bayesldp
    >>> mech = bayesldp.OLH(100, 2.0)
    >>> mech.g
    8
    """

    name = "OLH"
    PARAMETERS = (Parameter("g", int, "hash range g (default round(e^eps) + 1)"),)

    def __init__(
        self, k: int, epsilon: float, g: int | None = None, *, _prime: int = MERSENNE_31
    ) -> None:
        if g is None:
            g = optimal_g(check_epsilon(epsilon), _check_prime(_prime))
        super().__init__(k, epsilon, g, _prime=_prime)
