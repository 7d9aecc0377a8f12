"""dBitFlipPM: d sampled buckets, one bit each, memoised per (user, bucket vector).

Ding, Kulkarni, Yekhanin, "Collecting Telemetry Data Privately", NeurIPS 2017, section 3
(dBitFlip) and its permanent memoisation.  The domain of ``values`` values is split into ``k``
contiguous buckets (value ``v`` in bucket ``floor(v k / values)``; ``values = k`` by default,
one value per bucket); the buckets are the mechanism's categories.  Each user draws ``d``
distinct bucket indices ``j_1 < ... < j_d`` uniformly (without replacement) once and, for a
value in bucket ``u``, reports for every ``p`` the bit

.. math:: b_p = 1 \\text{ w.p. } \\frac{e^{\\varepsilon/2}}{e^{\\varepsilon/2} + 1}
          \\text{ if } u = j_p, \\qquad \\frac{1}{e^{\\varepsilon/2} + 1} \\text{ otherwise},

the report being ``(j, b)``.  A report's probability given bucket ``u`` is
``C(k, d)^{-1} prod_p Pr[b_p | u]``, so its likelihood row over the buckets is
``exp(+eps/2)`` at a sampled bucket whose bit is 1, ``exp(-eps/2)`` at one whose bit is 0 and 1
at the buckets not sampled (a dense row per distinct report).  Two buckets both sampled, with
opposite bits, differ by ``e^eps``: one round is exactly ``eps``-LDP when ``d >= 2`` (with
``d = 1`` only ``eps/2``, so ``d >= 2`` is required).

The paper's estimator of bucket ``u``'s frequency is

.. math:: \\hat h(u) = \\frac{k}{n d} \\sum_{i: u \\in j^{(i)}}
          \\frac{b_{i,u} (e^{\\varepsilon/2} + 1) - 1}{e^{\\varepsilon/2} - 1},

unbiased because a user samples ``u`` with probability ``d / k`` and the debiased bit has mean
``1[x_i = u]``; over the random bucket draws its exact variance is
``((k/d)(e^{eps/2} / (e^{eps/2} - 1)^2 + theta_u) - theta_u) / n`` (:meth:`oracle_variance`).

Memoisation.  With ``users=`` and ``memo=`` a user's ``d`` buckets are drawn once and its
response depends only on its *bucket vector*, the indicator ``[u = j_1, ..., u = j_d]`` (its
slot: the ``p`` with ``u = j_p``, or ``d`` when ``u`` is not sampled): the ``d + 1`` possible
responses are drawn once each and repeated, so a user who stays in a bucket (or moves between
buckets it did not sample) repeats its answer.  The memo keys entries by ``(user, slot)``; each
entry stores the user's buckets and the response bits.
"""

from __future__ import annotations

import itertools
import math
import os
from typing import Any, NamedTuple

import numpy as np
from numba import njit

from bayesldp._validation import RNGLike, as_generator, check_int, check_memory, check_values
from bayesldp.errors import InvalidInputError, InvalidTypeError, NotSupportedError
from bayesldp.mechanisms.base import (
    Mechanism,
    Parameter,
    bits_as_bool,
    int_columns,
    realised_epsilon_of_channel,
)
from bayesldp.mechanisms.longitudinal.memo import Memo, MemoStore, checked_memo, memo_keys
from bayesldp.tally import Tally

#: the channel over (bucket set, bits) is built only up to this many columns
MAX_CHANNEL_COLUMNS = 1 << 20
#: cells of the uniforms drawn at once to sample buckets (bounds their memory)
_BLOCK_CELLS = 1 << 22
#: up to this many bucket sets they are listed once per draw and gathered by rank
_SETS_LISTED = 1 << 16
#: up to this many sampled buckets they are picked by a compiled pass, else by argpartition
_KERNEL_MAX_D = 16


@njit(cache=True, nogil=True)
def _smallest_ascending(keys, out):  # pragma: no cover
    """``out[r]``: the columns of the ``d = out.shape[1]`` smallest ``keys[r]``, ascending
    (the keys distinct: the first ``d`` sorted by insertion, each later key compared with the
    largest kept and inserted when below it, then the kept columns sorted)."""
    n, k = keys.shape
    d = out.shape[1]
    vals = np.empty(d)
    cols = np.empty(d, dtype=np.int64)
    for r in range(n):
        row = keys[r]
        for c in range(k):
            v = row[c]
            if c < d:
                j = c
            elif v < vals[d - 1]:
                j = d - 1
            else:
                continue
            while j > 0 and vals[j - 1] > v:
                vals[j] = vals[j - 1]
                cols[j] = cols[j - 1]
                j -= 1
            vals[j] = v
            cols[j] = c
        dest = out[r]
        for a in range(d):  # columns ascending: insertion sort of d values
            c = cols[a]
            b = a
            while b > 0 and dest[b - 1] > c:
                dest[b] = dest[b - 1]
                b -= 1
            dest[b] = c


@njit(cache=True, nogil=True)
def _unrank_colex(rank, table, out):  # pragma: no cover
    """``out[i]``: the ascending ``d``-subset of colex rank ``rank[i]`` (``d = out.shape[1]``,
    ``table[v, p] = C(v, p + 1)``): bucket ``j_p``, for ``p = d - 1, ..., 0``, the largest ``v``
    below ``j_{p+1}`` with ``C(v, p + 1) <=`` the rank left (a binary search)."""
    n, d = out.shape
    for i in range(n):
        r = rank[i]
        hi = table.shape[0] - 1
        for p in range(d - 1, -1, -1):
            lo = p  # C(p, p + 1) = 0 <= r: the answer lies in lo..hi
            while lo < hi:
                mid = (lo + hi + 1) >> 1
                if table[mid, p] <= r:
                    lo = mid
                else:
                    hi = mid - 1
            out[i, p] = lo
            r -= table[lo, p]
            hi = lo - 1


@njit(cache=True, nogil=True)
def _report_codes(buckets, bits, table, out):  # pragma: no cover
    """``out[i] = 2^d r_i + sum_p b_ip 2^p`` with ``r_i = sum_p C(j_ip, p + 1)`` the colex rank
    of report ``i``'s ascending buckets (``table[v, p] = C(v, p + 1)``)."""
    n, d = buckets.shape
    for i in range(n):
        rank = 0
        low = 0
        for p in range(d):
            rank += table[buckets[i, p], p]
            if bits[i, p]:
                low |= 1 << p
        out[i] = (rank << d) | low


class DBitReports(NamedTuple):
    """dBitFlipPM reports: each user's sampled ``buckets`` (int64 ``(n, d)``, ascending) and
    ``bits`` (bool ``(n, d)``, bit ``p`` for bucket ``buckets[:, p]``).

    Examples
    --------
    What :meth:`DBitFlipPM.perturb <bayesldp.DBitFlipPM.perturb>` returns:

    >>> import bayesldp
    >>> mech = bayesldp.DBitFlipPM(4, 1.0, d=2)
    >>> memo = mech.memo()
    >>> reports = mech.perturb([0, 1, 2, 3], rng=0, users=[10, 11, 12, 13], memo=memo)
    >>> type(reports).__name__, reports.buckets.shape, reports.bits.shape
    ('DBitReports', (4, 2), (4, 2))
    """

    buckets: np.ndarray
    bits: np.ndarray


class DBitFlipPM(Mechanism):
    """dBitFlipPM (Ding, Kulkarni, Yekhanin 2017): ``d`` of ``k`` buckets, one flipped bit each.

    Parameters
    ----------
    k : int
        Number of buckets (the categories estimated; the paper's ``k``).
    epsilon : float
        Budget of one report.
    d : int, default 2
        Buckets each user samples, ``2 <= d <= k`` (the paper's ``d``).
    values : int, optional
        Size of the value domain split into the ``k`` buckets (default ``k``: one value per
        bucket); :meth:`perturb` takes values ``0..values-1``.

    Reports are :class:`DBitReports` ``(buckets, bits)``; see the module docstring for the
    bits' law, the estimator and the memoisation (``perturb(x, rng, users=..., memo=...)``).

    Examples
    --------
    >>> import bayesldp
    >>> mech = bayesldp.DBitFlipPM(4, 1.0, d=2)
    >>> memo = mech.memo()
    >>> day1 = mech.perturb([0, 1, 2, 3], rng=0, users=[10, 11, 12, 13], memo=memo)
    >>> mech.tally(day1).n, round(mech.realised_epsilon(), 12)
    (4, 1.0)
    """

    name = "DBitFlipPM"
    PARAMETERS = (
        Parameter("d", int, "dBitFlipPM: buckets each user samples (default 2)"),
        Parameter("values", int, "dBitFlipPM: values split into the k buckets (default k)"),
    )
    #: special-purpose (repeated collection): not ranked by ``recommend``
    RECOMMEND = False

    def __init__(self, k: int, epsilon: float, d: int = 2, values: int | None = None) -> None:
        super().__init__(k, epsilon)
        self.d = check_int(d, "d", 1)
        if self.d == 1:
            raise InvalidInputError(
                "d: 1 sampled bucket makes a report only eps/2-LDP (one bit of e^(eps/2)); "
                "use 2 <= d <= k"
            )
        if self.d > self.k:
            raise InvalidInputError(
                f"d: a user samples d of the k = {self.k} buckets, got d = {d}; use 2 <= d <= k"
            )
        self.values = self.k if values is None else check_int(values, "values", self.k)
        half = self.epsilon / 2
        #: Pr[bit = 1] for the bucket holding the value, and for any other sampled bucket.
        #: ``p = 1 - q`` rounded down: a ``p`` rounded up makes ``1 - p`` smaller than ``q``, and
        #: at large epsilon (``1 - p`` near 1e-13) the realised epsilon then exceeds epsilon
        #: (60.001 at epsilon 60, found by tests/test_properties.py).
        self.q = 1.0 / (1.0 + math.exp(half))
        self.p = math.nextafter(1.0 - self.q, 0.0)
        if self.q < 2.0**-52:
            raise InvalidInputError(
                f"epsilon: {self.epsilon} gives a bit probability below 2^-52, which 53-bit "
                "uniforms cannot draw exactly; use epsilon <= 72"
            )

    def params(self) -> dict[str, Any]:
        return {"k": self.k, "epsilon": self.epsilon, "d": self.d, "values": self.values}

    # ------------------------------------------------------------------ values and buckets
    def bucket_of(self, v: Any) -> np.ndarray:
        """The bucket ``floor(v k / values)`` of each value (contiguous, sizes within 1)."""
        v = np.asarray(v, dtype=np.int64)
        return (v * self.k) // self.values

    def category_values(self, x: Any, rng: RNGLike = None) -> np.ndarray:
        """Values in the buckets ``x``: the first value of each bucket when ``rng`` is None,
        else one uniform value within it (reports of either follow :attr:`channel`)."""
        x = check_values(x, self.k)
        first = (x * self.values + self.k - 1) // self.k
        if rng is None:
            return first
        size = ((x + 1) * self.values + self.k - 1) // self.k - first
        return first + (as_generator(rng).random(x.size) * size).astype(np.int64)

    def _draw_buckets(self, n: int, gen: np.random.Generator) -> np.ndarray:
        """``d`` distinct buckets per user, ascending, uniform over the ``C(k, d)`` sets: one
        uniform integer rank per user unranked in colex order (:meth:`_unrank`) while the colex
        table's largest term ``C(k, min(d, k // 2))`` is below ``2^62``, else
        :meth:`_smallest_keys` (``k`` uniforms per user, 5-20x slower at ``k = 20``).  Up to
        ``2^16`` sets, every set is unranked once and the users' sets gathered by rank."""
        if math.comb(self.k, min(self.d, self.k // 2)) >= 1 << 62:
            return self._smallest_keys(n, gen)
        sets = math.comb(self.k, self.d)
        ranks = gen.integers(0, sets, size=n, dtype=np.int64)
        if sets <= _SETS_LISTED:  # every set listed once, then gathered by rank: 8x faster
            return self._unrank(np.arange(sets), self._colex_table())[ranks]
        return self._unrank(ranks, self._colex_table())

    def _smallest_keys(self, n: int, gen: np.random.Generator) -> np.ndarray:
        """The columns of the ``d`` smallest of ``k`` uniforms per user, ascending (one compiled
        pass when ``d <= 16``, 5x faster than ``argpartition``)."""
        out = np.empty((n, self.d), dtype=np.int64)
        rows = max(1, _BLOCK_CELLS // self.k)
        for start in range(0, n, rows):
            keys = gen.random((min(rows, n - start), self.k))
            if self.d <= _KERNEL_MAX_D:
                _smallest_ascending(keys, out[start : start + rows])
            else:
                pick = np.argpartition(keys, self.d - 1, axis=1)[:, : self.d]
                out[start : start + rows] = np.sort(pick, axis=1)
        return out

    def _draw_bits(self, inside: np.ndarray, gen: np.random.Generator) -> np.ndarray:
        return gen.random(inside.shape) < np.where(inside, self.p, self.q)

    # ------------------------------------------------------------------ client
    def perturb(
        self, x: Any, rng: RNGLike = None, *, users: Any = None, memo: Memo | None = None
    ) -> DBitReports:
        """One round's reports for users holding the values ``x`` (ints ``0..values-1``).

        Without ``memo`` every user's buckets and bits are drawn afresh (one report per user,
        the channel).  With ``memo`` (a :class:`~bayesldp.Memo` or
        :class:`~bayesldp.MemoStore` of this mechanism) and ``users`` (distinct non-negative
        integer ids), each user's buckets are read from the memo (drawn once) and its response
        per bucket vector too: a user whose bucket vector is unchanged repeats its answer.
        Vectorised: sorted-key lookups, no per-user loop.
        """
        x = check_values(x, self.values)
        gen = as_generator(rng)
        u = self.bucket_of(x)
        if memo is None:
            if users is not None:
                raise InvalidInputError("users: given without memo=; pass the memo to reuse")
            buckets = self._draw_buckets(x.size, gen)
            return DBitReports(buckets, self._draw_bits(buckets == u[:, None], gen))
        checked_memo(memo, users, self)
        width = memo.width
        ids = memo_keys(users, np.zeros(x.size, dtype=np.int64), width) // width
        has, first = memo.user_entries(ids)
        if not has.any():  # a first round: no masks, no gathers (the same draws)
            buckets = self._draw_buckets(x.size, gen)
        elif has.all():  # a later round: one gather, no masks
            buckets = memo.responses[first, 0]
        else:
            buckets = np.empty((x.size, self.d), dtype=np.int64)
            buckets[has] = memo.responses[first[has], 0]
            buckets[~has] = self._draw_buckets(int(np.count_nonzero(~has)), gen)
        inside = buckets == u[:, None]
        slot = np.where(inside.any(axis=1), inside.argmax(axis=1), self.d)
        keys = ids * width + slot
        found, pos = memo.find(keys)
        if not found.any():
            bits = self._draw_bits(inside, gen)
            entries = np.empty((x.size, 2, self.d), dtype=np.int64)
            entries[:, 0], entries[:, 1] = buckets, bits
            memo.insert(keys, entries, owned=True)
            return DBitReports(buckets, bits)
        if found.all():  # every response stored: one gather
            return DBitReports(buckets, memo.responses[pos, 1].astype(bool))
        bits = np.empty((x.size, self.d), dtype=bool)
        bits[found] = memo.responses[pos[found], 1].astype(bool)
        missing = np.flatnonzero(~found)
        if missing.size:
            fresh = self._draw_bits(inside[missing], gen)
            bits[missing] = fresh
            memo.insert(keys[missing], np.stack([buckets[missing], fresh.astype(np.int64)], 1),
                        owned=True)  # fmt: skip
        return DBitReports(buckets, bits)

    # ------------------------------------------------------------------ memo
    def memo_width(self) -> int:
        """Entries per user in a memo: one per slot ``0..d`` (module docstring)."""
        return self.d + 1

    def memo_layout(self) -> tuple[np.dtype, tuple[int, ...]]:
        """An entry: int64 ``(2, d)``, the user's buckets then the response bits (0/1)."""
        return np.dtype(np.int64), (2, self.d)

    def decode_permanent(self, stored: np.ndarray) -> np.ndarray:
        return stored

    def memo_entry(self, stored: np.ndarray) -> DBitReports:
        """One memo entry as ``(buckets, bits)`` (``memo[(user, slot)]``)."""
        return DBitReports(stored[0].copy(), stored[1].astype(bool))

    def valid_permanent(self, stored: np.ndarray) -> bool:
        if stored.size == 0:
            return True
        buckets, bits = stored[:, 0], stored[:, 1]
        ordered = bool(np.all(buckets[:, 1:] > buckets[:, :-1]))
        return ordered and buckets.min() >= 0 and buckets.max() < self.k and bits.max() <= 1 \
            and bits.min() >= 0  # fmt: skip

    def memo(self) -> Memo:
        """An empty in-memory memo of buckets and responses for this mechanism."""
        return Memo(self)

    def memo_store(self, path: str | os.PathLike[str], *, wait: float = 0.0) -> MemoStore:
        """The memo in the file ``path`` (created if missing), locked for this writer."""
        return MemoStore(path, self, wait=wait)

    # ------------------------------------------------------------------ aggregator
    def check_reports(self, reports: Any) -> DBitReports:
        """Validate reports ``(buckets, bits)``: ``d`` distinct buckets in ``0..k-1`` and ``d``
        0/1 bits per report; returned with each report's buckets in ascending order."""
        if not isinstance(reports, tuple) or len(reports) != 2:
            raise InvalidTypeError(
                f"reports: expected DBitReports (buckets, bits), got {type(reports).__name__}"
            )
        buckets, bits = np.asarray(reports[0]), np.asarray(reports[1])
        shape = (buckets.shape[0] if buckets.ndim == 2 else -1, self.d)
        if buckets.ndim != 2 or buckets.shape[1] != self.d or buckets.shape[0] == 0:
            raise InvalidInputError(
                f"reports: field 'buckets' must have shape (n, {self.d}) (d = {self.d}), n > 0, "
                f"got {buckets.shape}"
            )
        if buckets.dtype.kind not in "iu":
            raise InvalidInputError(f"reports: field 'buckets' must hold integers, got "
                                    f"{buckets.dtype}")  # fmt: skip
        if buckets.min() < 0 or buckets.max() >= self.k:
            bad = buckets.min() if buckets.min() < 0 else buckets.max()
            raise InvalidInputError(
                f"reports: field 'buckets' must lie in 0..{self.k - 1} (k = {self.k}), got {bad}"
            )
        if bits.shape != shape or (bits.dtype != bool and bits.dtype.kind not in "iu"):
            raise InvalidInputError(
                f"reports: field 'bits' must hold 0/1 bits of shape {shape}, got "
                f"{bits.dtype} {bits.shape}"
            )
        bits = bits_as_bool(bits, "reports: field 'bits'")
        buckets = buckets.astype(np.int64, copy=False)
        if np.all(buckets[:, 1:] > buckets[:, :-1]):  # ascending (perturb's order): as they are
            return DBitReports(buckets, bits)
        order = np.argsort(buckets, axis=1, kind="stable")
        buckets = np.take_along_axis(buckets, order, axis=1)
        twice = np.flatnonzero(np.any(buckets[:, 1:] == buckets[:, :-1], axis=1))
        if twice.size:
            raise InvalidInputError(
                f"reports: report {twice[0]} names a bucket twice; a user samples d distinct "
                "buckets"
            )
        return DBitReports(buckets, np.take_along_axis(bits, order, axis=1))

    def _statistic(self, seen: DBitReports, counts: np.ndarray) -> np.ndarray:
        """``(k/d) sum_i sum_p z_{ip} 1[j_{ip} = u]`` with the debiased bits
        ``z = (b (e^{eps/2} + 1) - 1)/(e^{eps/2} - 1)``: the paper's count estimate, summed over
        the distinct reports ``seen`` weighted by their ``counts``."""
        half = self.epsilon / 2
        z = np.where(seen.bits, -1.0 / math.expm1(-half), -1.0 / math.expm1(half))
        z *= counts[:, None]
        sums = np.bincount(seen.buckets.reshape(-1), weights=z.reshape(-1), minlength=self.k)
        return sums * (self.k / self.d)

    def _distinct_reports(
        self, buckets: np.ndarray, bits: np.ndarray
    ) -> tuple[DBitReports, np.ndarray]:
        """The distinct reports (ascending buckets) and how many times each occurs.

        A report is coded by one integer, ``2^d r + sum_p b_p 2^p`` with ``r`` the colex rank
        ``sum_p C(j_p, p + 1)`` of its bucket set (``0 <= r < C(k, d)``); the codes are counted
        with a bincount when their range is small, else sorted (``np.unique`` on int64), and
        the distinct codes decoded back.  Codes that do not fit in int64 fall back to
        ``np.unique`` on the rows of ``(buckets, bits)``.
        """
        d, n = self.d, buckets.shape[0]
        space = math.comb(self.k, d) << d
        if space >= 1 << 62:
            key = np.ascontiguousarray(np.concatenate([buckets, bits.astype(np.int64)], axis=1))
            _, first, inverse = np.unique(key, axis=0, return_index=True, return_inverse=True)
            counts = np.bincount(inverse.reshape(-1), minlength=first.size).astype(np.int64)
            return DBitReports(buckets[first], bits[first]), counts
        table = self._colex_table()
        code = np.empty(n, dtype=np.int64)
        _report_codes(buckets, bits, table, code)
        if space <= max(1 << 22, 4 * n):
            counts = np.bincount(code, minlength=space)
            codes = np.flatnonzero(counts)
            counts = counts[codes].astype(np.int64)
        else:
            codes, counts = np.unique(code, return_counts=True)
            counts = counts.astype(np.int64)
        return self._decode(codes, table), counts

    def _colex_table(self) -> np.ndarray:
        """``T[v, p] = C(v, p + 1)`` for ``v < k``, ``p < d`` (int64; the colex rank's terms)."""
        return np.array([[math.comb(v, p + 1) for p in range(self.d)] for v in range(self.k)],
                        dtype=np.int64).reshape(self.k, self.d)  # fmt: skip

    def _decode(self, codes: np.ndarray, table: np.ndarray) -> DBitReports:
        """Reports of the codes of :meth:`_distinct_reports`: buckets the colex unranking of
        ``code >> d`` (:meth:`_unrank`), bits the low ``d``."""
        bits = ((codes[:, None] >> np.arange(self.d)) & 1).astype(bool)
        return DBitReports(self._unrank(codes >> self.d, table), bits)

    def _unrank(self, rank: np.ndarray, table: np.ndarray) -> np.ndarray:
        """The ascending ``d``-subsets of colex ranks ``rank`` (:func:`_unrank_colex`)."""
        buckets = np.empty((rank.size, self.d), dtype=np.int64)
        _unrank_colex(np.ascontiguousarray(rank, dtype=np.int64), table, buckets)
        return buckets

    def tally(self, reports: Any) -> Tally:
        """Dense tally: one row per distinct report, ``exp(+-eps/2)`` at its sampled buckets (as
        their bits are 1 or 0) and 1 elsewhere, scaled to a maximum of 1; ``stat`` is the
        paper's count estimate (:meth:`unbiased_frequencies`).

        Distinct reports give distinct rows except when ``d = k`` or ``k = 2 d`` (all bits 1 on
        a set reads as all bits 0 on its complement), so only then are the rows merged again."""
        buckets, bits = self.check_reports(reports)
        seen, counts = self._distinct_reports(buckets, bits)
        check_memory(8.0 * counts.size * self.k * 2, f"a DBitFlipPM tally with {counts.size:,} "
                     f"distinct reports and k = {self.k}",
                     "tally the reports in batches and add the tallies")  # fmt: skip
        log_rows = np.zeros((counts.size, self.k))
        half = self.epsilon / 2
        signs = np.where(seen.bits, half, -half)
        np.put_along_axis(log_rows, seen.buckets, signs, axis=1)
        rows = np.exp(log_rows - log_rows.max(axis=1, keepdims=True))
        return Tally(
            counts,
            rows=rows,
            stat=self._statistic(seen, counts),
            mechanism=self,
            dedupe=self.d == self.k or 2 * self.d == self.k,
        )

    # ------------------------------------------------------------------ report tables
    def reports_from_frame(self, frame: Any, source: Any = "reports") -> DBitReports:
        """Columns ``bucket0``, ..., ``bucket{d-1}`` (bucket ids) and ``bit0``, ...,
        ``bit{d-1}`` (0/1 integers or booleans)."""
        cols = [f"bucket{p}" for p in range(self.d)]
        buckets = np.stack(int_columns(frame, cols, source), axis=1)
        names = [f"bit{p}" for p in range(self.d)]
        missing = [c for c in names if c not in frame.columns]
        if missing:
            raise InvalidInputError(f"reports: {source} lacks column(s) {', '.join(missing)}")
        bits = frame[names].to_numpy()
        if bits.dtype.kind not in "biu":
            raise InvalidInputError(
                f"reports: {source}: bit columns must hold 0/1 integers or booleans, got "
                f"{bits.dtype}"
            )
        return self.check_reports((buckets, np.ascontiguousarray(bits)))

    def reports_to_frame(self, reports: Any) -> Any:
        import pandas as pd

        buckets, bits = self.check_reports(reports)
        frame = pd.DataFrame(buckets, columns=[f"bucket{p}" for p in range(self.d)])
        for p in range(self.d):
            frame[f"bit{p}"] = bits[:, p].astype(np.uint8)
        return frame

    def report_size(self) -> str:
        return f"{self.d} bits + {self.d} bucket ids"

    # ------------------------------------------------------------------ privacy
    @property
    def channel(self) -> np.ndarray:
        """The ``k x (C(k, d) 2^d)`` channel over (bucket set, bits); column ``s 2^d + y`` is
        the ``s``-th ascending ``d``-subset (lexicographic) with bit ``p`` ``(y >> p) & 1``
        (small ``C(k, d) 2^d`` only)."""
        columns = math.comb(self.k, self.d) * 2**self.d
        if columns > MAX_CHANNEL_COLUMNS:
            raise NotSupportedError(
                f"DBitFlipPM: the channel has C(k, d) 2^d = {columns:,} columns; it is built only "
                f"up to {MAX_CHANNEL_COLUMNS:,}"
            )
        subsets = np.array(list(itertools.combinations(range(self.k), self.d)), dtype=np.int64)
        patterns = ((np.arange(2**self.d)[:, None] >> np.arange(self.d)) & 1).astype(bool)
        buckets = np.repeat(subsets, 2**self.d, axis=0)  # (columns, d)
        bits = np.tile(patterns, (subsets.shape[0], 1))
        inside = buckets[None, :, :] == np.arange(self.k)[:, None, None]  # (k, columns, d)
        one = np.where(inside, self.p, self.q)
        per_bit = np.where(bits[None], one, 1.0 - one)
        return per_bit.prod(axis=2) / subsets.shape[0]

    def realised_epsilon(self) -> float:
        """Exact epsilon of one report, from :attr:`channel` when it is small, else its closed
        form ``2 log(p/q)`` (two sampled buckets with opposite bits), which equals ``epsilon``."""
        try:
            return realised_epsilon_of_channel(self.channel)
        except NotSupportedError:
            return 2.0 * (math.log(self.p) - math.log(self.q))

    def realised_longitudinal_epsilon(self) -> float:
        """Exact epsilon of any number of memoised reports of one value: they repeat one
        response, so it is :meth:`realised_epsilon`.  (A user whose value moves between buckets
        reveals up to ``d + 1`` responses, and when its bucket vector changes; the paper's
        section 3 discusses that leak.)"""
        return self.realised_epsilon()

    def audit_event(self, reports: Any, x0: int, x1: int) -> np.ndarray:
        """Reports that sample both buckets with bit 1 for ``x0`` and 0 for ``x1`` (ratio
        ``e^eps``)."""
        buckets, bits = self.check_reports(reports)
        at0, at1 = buckets == x0, buckets == x1
        return (at0 & bits).any(axis=1) & (at1 & ~bits).any(axis=1)

    # ------------------------------------------------------------------ oracle
    def unbiased_frequencies(self, tally: Tally) -> np.ndarray:
        """The paper's estimator ``h(u) = (k/(n d)) sum_{i: u sampled} (b (e^{eps/2} + 1) - 1)
        / (e^{eps/2} - 1)``, carried additively in the tally's ``stat``."""
        self.check_tally(tally)
        return tally.stat / tally.n

    def oracle_variance(self, theta: Any, n: int) -> np.ndarray:
        """``((k/d)(e^{eps/2}/(e^{eps/2} - 1)^2 + theta_u) - theta_u) / n`` (module docstring):
        the variance over the users' bucket draws and bits, the users' values fixed."""
        theta = np.asarray(theta, dtype=float)
        if theta.shape != (self.k,):
            raise InvalidInputError(f"theta: expected shape ({self.k},), got {theta.shape}")
        half = self.epsilon / 2
        spread = 1.0 / (4.0 * math.sinh(half / 2) ** 2)  # e^h / (e^h - 1)^2
        return ((self.k / self.d) * (spread + theta) - theta) / n
