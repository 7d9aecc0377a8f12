"""Apple's count-mean sketch (CMS) and Hadamard count-mean sketch (HCMS).

Apple Differential Privacy Team, "Learning with Privacy at Scale", Apple Machine Learning
Journal 1(8), 2017 (algorithms A_client-CMS / A_server-CMS and A_client-HCMS / A_server-HCMS).

Notation.  ``K`` (the package's ``k``) is the number of categories; Apple's ``k`` hash functions
are ``k_hash`` here and the sketch width is ``m``; ``h_j`` is the ``j``-th function of a fixed,
seeded hash family.  The hash family and what both sketches share (the oracles, Apple's sketch
estimate) are in :mod:`bayesldp.mechanisms.sketch_common`.

CMS client: draw ``j`` uniform in ``0..k_hash-1``, encode ``h_j(x)`` as ``v in {-1, +1}^m``
(``+1`` only at ``h_j(x)``), flip each entry independently w.p. ``1 / (1 + e^{eps/2})``, send
``(j, v)``.  HCMS client (``m`` a power of two): draw ``j`` and ``l`` uniform, take the Hadamard
entry ``w = H[l, h_j(x)] = (-1)^{popcount(l & h_j(x))}``, flip it w.p. ``1 / (1 + e^eps)``, send
``(j, l, b)``.

Likelihood.  Given ``j`` (and ``l``) the report's probability depends on ``x`` only through one
entry: for CMS ``Pr(j, v | x) = (1/k_hash) prod_u Pr(v_u | e_u(x))`` whose ratio between inputs is
set by ``v[h_j(x)]`` alone, for HCMS whether ``H[l, h_j(x)] = b``.  So each report's likelihood
row takes two values, in proportion ``1 : e^eps`` off / on its support

.. math:: S(j, v) = \\{x : v_{h_j(x)} = +1\\}, \\qquad S(j, l, b) = \\{x : H[l, h_j(x)] = b\\},

a support-form tally like unary encoding's, which every estimator and posterior reads.

Oracles: :meth:`~CMS.unbiased_frequencies` (the channel inverse, exactly unbiased for the fixed
hash family) and Apple's :meth:`~CMS.sketch_frequencies` (biased by collisions for one family).
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any

import numpy as np
from numba import njit

from bayesldp._validation import (
    RNGLike,
    as_generator,
    check_counts,
    check_memory,
    check_values,
)
from bayesldp.errors import InvalidInputError, InvalidTypeError, NotSupportedError
from bayesldp.mechanisms._sketch_packed import (
    check_packed,
    cms_packed,
    cms_support_packed,
    pack_signs,
    packed_width,
    unpack_signs,
)
from bayesldp.mechanisms._splitmix import GOLDEN, bernoulli_threshold, mix64
from bayesldp.mechanisms._splitmix import stream_seed as _stream_seed
from bayesldp.mechanisms.base import check_report_field, int_columns
from bayesldp.mechanisms.sketch_common import MAX_CHANNEL_ENTRIES, _CountMeanSketch
from bayesldp.mechanisms.sketch_common import MAX_ORACLE_K as MAX_ORACLE_K
from bayesldp.mechanisms.sketch_common import sketch_hashes as sketch_hashes
from bayesldp.mechanisms.unary import support_tally
from bayesldp.tally import Tally


class CMSReports:
    """Count-mean-sketch reports: the hash row ``row[i]`` and the ``m`` noisy entries of each
    user, held as int8 or packed one bit per entry.

    ``CMSReports(row, bits)``: ``bits`` int8 of shape ``(n, m)``, each entry -1 or +1.
    ``CMSReports(row, packed=packed, m=m)``: ``packed`` uint8 of shape ``(n, ceil(m/8))``,
    entry ``u`` the bit ``u & 7`` (least significant first) of byte ``u >> 3``, 1 for +1 and
    0 for -1, the padding bits past entry ``m - 1`` 0: ``np.packbits(bits > 0, axis=1,
    bitorder="little")``.  The same reports take ``m`` bytes a user as int8 and ``ceil(m/8)``
    packed (Apple's ``m = 1024``: 1 KB against 128 bytes), and :class:`CMS`,
    :class:`~bayesldp.heavy_hitters.CandidateCMS` and SFP read either form to the same
    counts; packed ones are read bit by bit, never unpacked.

    Attributes
    ----------
    row : ndarray of int
        Each user's hash row ``0..k_hash-1``.
    bits : ndarray of int8
        The ``(n, m)`` entries, -1 or +1; of packed reports unpacked on every access (a new
        ``n x m`` array), so read :attr:`packed` where bits will do.
    packed : ndarray of uint8
        The ``(n, ceil(m/8))`` packed entries; of int8 reports packed on every access.
    m : int
        Entries per report.
    is_packed : bool
        Whether the entries are held packed.

    Examples
    --------
    What :meth:`CMS.perturb <bayesldp.CMS.perturb>` returns:

    >>> import bayesldp
    >>> mech = bayesldp.CMS(50, 2.0, m=64, k_hash=4, hash_seed=0)
    >>> reports = mech.perturb([0, 1, 2, 3], rng=0)
    >>> type(reports).__name__, reports.row.shape
    ('CMSReports', (4,))
    """

    __slots__ = ("_bits", "_m", "_packed", "_row")

    def __init__(self, row: Any, bits: Any = None, *, packed: Any = None, m: Any = None) -> None:
        if (bits is None) == (packed is None):
            raise InvalidTypeError(
                "CMSReports: give the entries once, as bits (int8, -1 or +1) or as packed= "
                "(uint8, 1 bit an entry) with m="
            )
        bad_m = isinstance(m, bool) or not isinstance(m, numbers.Integral) or m < 1
        if packed is not None and bad_m:
            raise InvalidInputError(f"m: packed reports need their entry count m >= 1, got {m!r}")
        if bits is not None and m is not None:
            raise InvalidInputError("m: only with packed=; int8 bits carry m as their width")
        self._row, self._bits, self._packed = row, bits, packed
        self._m = None if m is None else int(m)

    @property
    def row(self) -> Any:
        return self._row

    @property
    def is_packed(self) -> bool:
        return self._packed is not None

    @property
    def m(self) -> int:
        return self._m if self._m is not None else int(np.shape(self._bits)[-1])

    @property
    def bits(self) -> Any:
        if self._packed is None:
            return self._bits
        return unpack_signs(self._packed, self.m)

    @property
    def packed(self) -> Any:
        if self._packed is not None:
            return self._packed
        return pack_signs(self._bits)

    def pack(self) -> CMSReports:
        """The same reports packed (themselves if they are)."""
        return self if self.is_packed else CMSReports(self._row, packed=self.packed, m=self.m)

    def subset(self, index: Any) -> CMSReports:
        """The reports of the users ``index`` (a boolean mask or integer indices), in the same
        form."""
        row = np.asarray(self._row)[index]
        if self.is_packed:
            return CMSReports(row, packed=np.asarray(self._packed)[index], m=self.m)
        return CMSReports(row, np.asarray(self._bits)[index])

    def __len__(self) -> int:
        return int(np.shape(self._row)[0])

    def __repr__(self) -> str:
        form = f"packed, m={self._m}" if self.is_packed else f"bits of shape {np.shape(self._bits)}"
        return f"CMSReports({len(self)} reports, {form})"


@dataclass(frozen=True, eq=False)
class HCMSReports:
    """Hadamard count-mean-sketch reports: hash row ``row[i]``, Hadamard coefficient
    ``index[i]`` in ``0..m-1`` and the noisy entry ``bit[i]`` (int8, -1 or +1).

    Examples
    --------
    What :meth:`HCMS.perturb <bayesldp.HCMS.perturb>` returns:

    >>> import bayesldp
    >>> mech = bayesldp.HCMS(50, 2.0, m=64, k_hash=4, hash_seed=0)
    >>> reports = mech.perturb([0, 1, 2, 3], rng=0)
    >>> type(reports).__name__, reports.row.shape, reports.index.shape, reports.bit.tolist()
    ('HCMSReports', (4,), (4,), [-1, -1, 1, -1])
    """

    row: np.ndarray
    index: np.ndarray
    bit: np.ndarray

    def __len__(self) -> int:
        return int(np.shape(self.row)[0])


@njit(cache=True, nogil=True)
def _int8_non_signs(flat):  # pragma: no cover - compiled
    """How many int8 entries are neither -1 nor +1 (``v^2 != 1`` in int32: one vectorised
    pass, no temporaries)."""
    bad = 0
    for t in range(flat.size):
        v = np.int32(flat[t])
        bad += v * v != 1
    return bad


def _signs(arr: np.ndarray, name: str) -> np.ndarray:
    if arr.dtype.kind not in "iu":
        raise InvalidTypeError(f"reports.{name}: expected integers -1 or +1, got {arr.dtype}")
    if arr.dtype == np.int8 and (arr.size == 0 or _int8_non_signs(arr.ravel()) == 0):
        return arr  # the reports' own dtype: the compiled check, else numpy's below
    bad = (arr != 1) & (arr != -1)
    if bad.any():
        raise InvalidInputError(
            f"reports.{name}: entries must be -1 or +1, got {arr[bad].ravel()[0]}"
        )
    return arr


@njit(cache=True)
def _cms_bits(x, rows, hashes, seed, threshold, out):  # pragma: no cover - compiled
    """``out[i]``: -1 everywhere but +1 at ``hashes[rows[i], x[i]]``, each entry flipped when
    its SplitMix64 draw ``(u >> 11) < threshold``."""
    n, m = out.shape
    state = seed
    for i in range(n):
        for u in range(m):
            state += GOLDEN
            out[i, u] = 1 if (mix64(state) >> np.uint64(11)) < threshold else -1
        h = hashes[rows[i], x[i]]
        out[i, h] = -out[i, h]


@njit(cache=True)
def _cms_simulated_support(x, rows, hashes, m, seed, threshold, out):  # pragma: no cover
    """The supports ``out[i, c] = [v_i[h_j(c)] = +1]`` of CMS reports without the ``m``-entry
    vectors: only the entries at the buckets row ``j = rows[i]`` uses are drawn (each once per
    user, flipped when its SplitMix64 draw ``(u >> 11) < threshold``), O(K) per user."""
    n, k = out.shape
    stamp = np.zeros(m, dtype=np.int64)
    value = np.zeros(m, dtype=np.bool_)
    state = seed
    for i in range(n):
        r = rows[i]
        own = hashes[r, x[i]]
        for c in range(k):
            b = hashes[r, c]
            if stamp[b] != i + 1:
                stamp[b] = i + 1
                state += GOLDEN
                flipped = (mix64(state) >> np.uint64(11)) < threshold
                value[b] = flipped != (b == own)
            out[i, c] = value[b]


@njit(cache=True)
def _cms_support(rows, bits, hashes, out):  # pragma: no cover - compiled
    n, k = out.shape
    for i in range(n):
        r = rows[i]
        for x in range(k):
            out[i, x] = bits[i, hashes[r, x]] > 0


@njit(cache=True)
def _hcms_support(rows, index, bit, hashes, out):  # pragma: no cover - compiled
    n, k = out.shape
    for i in range(n):
        r, ell, b = rows[i], index[i], bit[i]
        for x in range(k):
            v = ell & hashes[r, x]
            parity = 0
            while v:
                v &= v - 1
                parity ^= 1
            out[i, x] = (1 - 2 * parity) == b


def _parity(v: np.ndarray) -> np.ndarray:
    return (np.bitwise_count(v) & np.uint8(1)).astype(np.int8)


class CMS(_CountMeanSketch):
    """Apple's count-mean sketch: ``(j, v)`` with ``v`` the one-hot ``h_j(x)`` in ``{-1,+1}^m``,
    each entry flipped w.p. ``1/(1 + e^{eps/2})``.

    Parameters
    ----------
    k : int
        Number of categories K >= 2.
    epsilon : float
        Privacy budget; each entry gets ``eps/2`` (a change of ``x`` changes two entries).
    m : int, optional
        Sketch width (default: the smallest power of two ``>= 2K``, at least 4).
    k_hash : int, optional
        Number of hash functions (Apple's ``k``; default 16).
    hash_seed : int, optional
        Seed of the hash family (default 0).

    Reports are :class:`CMSReports` ``(row, bits)``, int8 or (``perturb(..., packed=True)``)
    packed one bit per entry; every reader takes either form to the same result.  The
    likelihood row of ``(j, v)`` is ``e^{eps/2}`` times a common factor where
    ``v[h_j(x)] = +1`` and ``e^{-eps/2}`` times it elsewhere.  Exact epsilon: inputs with
    ``h_j(x) = a != b = h_j(x')`` give the ratio ``(keep/flip)^2 = e^eps`` at
    ``v_a = +1, v_b = -1``.

    Examples
    --------
    >>> import bayesldp
    >>> mech = bayesldp.CMS(50, 2.0, m=64, k_hash=4, hash_seed=0)
    >>> reports = mech.perturb([0, 1, 2, 3] * 25, rng=0)
    >>> mech.tally(reports).n, round(mech.realised_epsilon(), 12)
    (100, 2.0)
    """

    name = "CMS"
    _entries_per_pair = 2

    @property
    def _entry_epsilon(self) -> float:  # type: ignore[override]
        return self.epsilon / 2.0

    @property
    def levels(self) -> tuple[float, float]:
        r = self.keep / self.flip
        return (1.0, r * r)

    @property
    def _q0(self) -> float:
        return self.flip

    def _pair_probabilities(self, same: np.ndarray, t: np.ndarray, total: float) -> np.ndarray:
        q0, d = self.flip, self.keep - self.flip
        marginal = q0 * total + d * t
        apart = q0 * q0 * total + q0 * d * (t[:, None] + t[None, :])
        return np.where(same, marginal[:, None], apart)

    @property
    def _sketch_scale(self) -> float:
        return 0.5

    @property
    def _sketch_offset(self) -> float:
        return 0.5

    # ------------------------------------------------------------------ client
    def perturb(self, x: Any, rng: RNGLike = None, *, packed: bool = False) -> CMSReports:
        """Each user's ``(j, v)``: ``j`` from ``rng``; the ``m`` flips from a SplitMix64 stream
        seeded by one draw of ``rng``, in a compiled loop (same seed, same bits).

        ``packed=True`` writes the entries one bit each (:class:`CMSReports`, ``ceil(m/8)``
        bytes a user instead of ``m``) from the same stream: the same seed gives the same
        reports in either form.  int8 is the default, the form ``reports.bits`` has always
        held; pack where memory counts (SFP's fragment users are packed)."""
        x = check_values(x, self.k)
        gen = as_generator(rng)
        width = packed_width(self.m) if packed else self.m
        check_memory(float(x.size) * (width + 16), f"CMS.perturb of {x.size:,} users",
                     "perturb fewer users at a time")  # fmt: skip
        return self._perturb_with(x, self.hashes, gen, packed=bool(packed))

    def _perturb_with(
        self, x: np.ndarray, hashes: np.ndarray, gen: Any, *, packed: bool = False
    ) -> CMSReports:
        """CMS reports of users ``x`` (column indices of the hash table ``hashes``)."""
        rows = gen.integers(0, self.k_hash, x.size)
        seed, threshold = _stream_seed(gen), bernoulli_threshold(self.flip)
        if packed:
            return CMSReports(rows, packed=cms_packed(x, rows, hashes, self.m, seed, threshold),
                              m=self.m)  # fmt: skip
        bits = np.empty((x.size, self.m), dtype=np.int8)
        _cms_bits(x, rows, hashes, seed, threshold, bits)
        return CMSReports(rows, bits)

    def simulate_tally(self, true_counts: Any, rng: RNGLike = None) -> Tally:
        """The tally of ``sum(true_counts)`` users, ``true_counts[x]`` of whom hold ``x``.

        Statistically identical to ``tally(perturb(x))`` but draws only the entries the tally
        reads (the buckets of the user's hash row that some category uses), O(K) per user
        instead of O(m).
        """
        counts = check_counts(true_counts, "true_counts", length=self.k)
        if counts.sum() == 0:
            raise InvalidInputError("true_counts: all zero; at least one user is needed")
        check_memory(float(counts.sum()) * (24 + self.k), f"CMS.simulate_tally of "
                     f"{counts.sum():,} users", "simulate fewer users, or tally batches of users "
                     "and add the tallies")  # fmt: skip
        gen = as_generator(rng)
        x = np.repeat(np.arange(self.k), counts)
        rows = gen.integers(0, self.k_hash, x.size)
        out = np.empty((x.size, self.k), dtype=np.bool_)
        _cms_simulated_support(x, rows, self.hashes, self.m, _stream_seed(gen),
                               bernoulli_threshold(self.flip), out)  # fmt: skip
        return support_tally(out, self)

    def check_reports(self, reports: Any) -> tuple[np.ndarray, np.ndarray]:
        """Validate :class:`CMSReports`: rows in ``0..k_hash-1``, ``(n, m)`` entries of +-1 (or,
        packed, ``(n, ceil(m/8))`` uint8 with the padding bits 0); returns the rows and the
        int8 entries (packed reports unpacked: the readers of this class use
        :meth:`_checked_entries`, which does not)."""
        rows, entries, packed = self._checked_entries(reports)
        return rows, (unpack_signs(entries, self.m) if packed else entries)

    def _checked_entries(self, reports: Any) -> tuple[np.ndarray, np.ndarray, bool]:
        """``(rows, entries, packed)``: the checked rows and entries in the reports' own form,
        int8 ``(n, m)`` or packed uint8 ``(n, ceil(m/8))`` (``packed`` says which)."""
        if not isinstance(reports, CMSReports):
            raise InvalidTypeError(
                f"reports: expected CMSReports(row, bits), got {type(reports).__name__}"
            )
        rows = check_report_field(reports, "row", 0, self.k_hash - 1)
        if reports.is_packed:
            packed = check_packed(reports.packed, rows.size, self.m, reports.m)
            return rows, np.ascontiguousarray(packed), True
        bits = np.asarray(reports.bits)
        if bits.ndim != 2 or bits.shape != (rows.size, self.m):
            raise InvalidInputError(
                f"reports.bits: expected shape ({rows.size}, {self.m}) (m = {self.m} entries per "
                f"report), got {bits.shape}"
            )
        return rows, _signs(bits, "bits"), False

    def membership(self, reports: Any) -> np.ndarray:
        rows, entries, packed = self._checked_entries(reports)
        check_memory(float(rows.size) * self.k, f"a CMS tally of {rows.size:,} reports",
                     "tally fewer reports at a time and add the tallies")  # fmt: skip
        out = np.empty((rows.size, self.k), dtype=np.bool_)
        if packed:
            cms_support_packed(rows, entries, self.hashes, out)
        else:
            _cms_support(rows, entries.astype(np.int8, copy=False), self.hashes, out)
        return out

    # ------------------------------------------------------------------ report tables
    def reports_from_frame(self, frame: Any, source: Any = "reports") -> CMSReports:
        """Columns ``row`` (hash row 0..k_hash-1) and ``b0``, ..., ``b{m-1}`` (-1 or +1)."""
        names = ["row", *(f"b{u}" for u in range(self.m))]
        row, *bits = int_columns(frame, names, source)
        return CMSReports(row, np.column_stack(bits).astype(np.int8))

    def reports_to_frame(self, reports: Any) -> Any:
        import pandas as pd

        rows, bits = self.check_reports(reports)
        columns = {"row": rows, **{f"b{u}": bits[:, u] for u in range(self.m)}}
        return pd.DataFrame(columns)

    def report_size(self) -> str:
        return f"{self.m} bits and a hash index ({math.ceil(math.log2(self.k_hash)) or 1} bits)"

    # ------------------------------------------------------------------ channel
    def _channel_entries(self) -> int:
        return self.k * self.k_hash * 2**self.m if self.m <= 30 else 2**62

    @property
    def channel(self) -> np.ndarray:
        """``P[x, (j, v)]`` over all ``k_hash 2^m`` reports (column ``j 2^m + sum_u [v_u = +1]
        2^u``), for at most ``MAX_CHANNEL_ENTRIES`` entries."""
        if self._channel_entries() > MAX_CHANNEL_ENTRIES:
            raise NotSupportedError(
                f"CMS: the channel has K k_hash 2^m = {self.k} x {self.k_hash} x 2^{self.m} "
                f"entries; it is only built up to {MAX_CHANNEL_ENTRIES}"
            )
        patterns = (np.arange(2**self.m)[:, None] >> np.arange(self.m)) & 1  # (2^m, m)
        log_keep, log_flip = math.log(self.keep), math.log(self.flip)
        out = np.empty((self.k, self.k_hash, 2**self.m))
        for j, row in enumerate(self.hashes):
            encoded = np.arange(self.m)[None, :] == row[:, None]  # (K, m): +1 entries
            agree = (encoded[:, None, :] == patterns[None, :, :].astype(bool)).sum(axis=2)
            out[:, j, :] = np.exp(agree * log_keep + (self.m - agree) * log_flip)
        return out.reshape(self.k, -1) / self.k_hash


class HCMS(_CountMeanSketch):
    """Apple's Hadamard count-mean sketch: ``(j, l, b)``, ``b`` the Hadamard entry
    ``H[l, h_j(x)]`` flipped w.p. ``1/(1 + e^eps)``.

    Parameters
    ----------
    k : int
        Number of categories K >= 2.
    epsilon : float
        Privacy budget.
    m : int, optional
        Sketch width, a power of two (default: the smallest power of two ``>= 2K``, at least 4).
    k_hash : int, optional
        Number of hash functions (Apple's ``k``; default 16).
    hash_seed : int, optional
        Seed of the hash family (default 0).

    Reports are :class:`HCMSReports` ``(row, index, bit)``; ``H[l, c] = (-1)^{popcount(l & c)}``
    (Sylvester).  Channel: ``P[x, (j, l, b)] = (keep if H[l, h_j(x)] = b else flip) /
    (k_hash m)``, finite with ``2 k_hash m`` columns; exactly eps-LDP.

    Examples
    --------
    >>> import bayesldp
    >>> mech = bayesldp.HCMS(50, 2.0, m=64, k_hash=4, hash_seed=0)
    >>> reports = mech.perturb([0, 1, 2, 3] * 25, rng=0)
    >>> mech.tally(reports).n, round(mech.realised_epsilon(), 12)
    (100, 2.0)
    """

    name = "HCMS"
    _entries_per_pair = 1

    @staticmethod
    def _check_width(m: Any) -> Any:
        if m is not None and not isinstance(m, bool) and isinstance(m, numbers.Integral):
            if m < 2 or m & (m - 1):
                raise InvalidInputError(f"m: HCMS needs a power of two >= 2, got {m}")
        return m

    @property
    def _entry_epsilon(self) -> float:  # type: ignore[override]
        return self.epsilon

    @property
    def levels(self) -> tuple[float, float]:
        return (1.0, self.keep / self.flip)

    @property
    def _q0(self) -> float:
        return 0.5

    def _pair_probabilities(self, same: np.ndarray, t: np.ndarray, total: float) -> np.ndarray:
        keep = self.keep
        marginal = 0.5 * total + (keep - 0.5) * t
        tt = t[:, None] + t[None, :]
        apart = 0.5 * keep * tt + 0.25 * (total - tt)
        return np.where(same, marginal[:, None], apart)

    @property
    def _sketch_scale(self) -> float:
        return 1.0

    @property
    def _sketch_offset(self) -> float:
        return 0.0

    # ------------------------------------------------------------------ client
    def perturb(self, x: Any, rng: RNGLike = None) -> HCMSReports:
        """Each user's ``(j, l, b)``: ``j``, ``l`` and the flip drawn from ``rng``, vectorised."""
        x = check_values(x, self.k)
        gen = as_generator(rng)
        rows = gen.integers(0, self.k_hash, x.size)
        index = gen.integers(0, self.m, x.size)
        flip = gen.random(x.size) < self.flip
        parity = _parity((index & self.hashes[rows, x]).astype(np.uint64))
        bit = (1 - 2 * (parity ^ flip)).astype(np.int8)
        return HCMSReports(rows, index, bit)

    def check_reports(self, reports: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Validate :class:`HCMSReports`."""
        if not isinstance(reports, HCMSReports):
            raise InvalidTypeError(
                f"reports: expected HCMSReports(row, index, bit), got {type(reports).__name__}"
            )
        rows = check_report_field(reports, "row", 0, self.k_hash - 1)
        index = check_report_field(reports, "index", 0, self.m - 1, ("row", rows.size))
        bit = check_report_field(reports, "bit", -1, 1, ("row", rows.size))
        return rows, index, _signs(bit, "bit")

    def membership(self, reports: Any) -> np.ndarray:
        rows, index, bit = self.check_reports(reports)
        check_memory(float(rows.size) * self.k, f"an HCMS tally of {rows.size:,} reports",
                     "tally fewer reports at a time and add the tallies")  # fmt: skip
        out = np.empty((rows.size, self.k), dtype=np.bool_)
        _hcms_support(rows, index, bit.astype(np.int64), self.hashes, out)
        return out

    # ------------------------------------------------------------------ report tables
    def reports_from_frame(self, frame: Any, source: Any = "reports") -> HCMSReports:
        """Columns ``row`` (hash row 0..k_hash-1), ``index`` (0..m-1) and ``bit`` (-1 or +1)."""
        row, index, bit = int_columns(frame, ["row", "index", "bit"], source)
        return HCMSReports(row, index, bit)

    def reports_to_frame(self, reports: Any) -> Any:
        import pandas as pd

        rows, index, bit = self.check_reports(reports)
        return pd.DataFrame({"row": rows, "index": index, "bit": bit})

    def report_size(self) -> str:
        bits = math.ceil(math.log2(self.k_hash)) + int(math.log2(self.m)) + 1
        return f"{bits} bits (hash index, Hadamard index, one bit)"

    # ------------------------------------------------------------------ channel
    def _channel_entries(self) -> int:
        return self.k * self.k_hash * self.m * 2

    @property
    def channel(self) -> np.ndarray:
        """``P[x, (j, l, b)]``, column ``2 (j m + l) + [b = +1]``, for at most
        ``MAX_CHANNEL_ENTRIES`` entries."""
        if self._channel_entries() > MAX_CHANNEL_ENTRIES:
            raise NotSupportedError(
                f"HCMS: the channel has 2 K k_hash m = {self._channel_entries()} entries; it is "
                f"only built up to {MAX_CHANNEL_ENTRIES}"
            )
        l_index = np.arange(self.m, dtype=np.uint64)
        parity = _parity(l_index[None, None, :] & self.hashes.T[:, :, None].astype(np.uint64))
        plus = parity == 0  # (K, k_hash, m): H[l, h_j(x)] = +1
        out = np.empty((self.k, self.k_hash, self.m, 2))
        out[..., 1] = np.where(plus, self.keep, self.flip)
        out[..., 0] = np.where(plus, self.flip, self.keep)
        return out.reshape(self.k, -1) / (self.k_hash * self.m)
