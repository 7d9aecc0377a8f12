"""Unary encoding: symmetric (SUE, basic RAPPOR) and optimised (OUE).

Wang, Blocki, Li, Jha, "Locally Differentially Private Protocols for Frequency Estimation",
USENIX Security 2017, section 4.3.  The input ``x`` is one-hot encoded as ``k`` bits; each bit is
reported independently, the bit of ``x`` as 1 with probability ``p`` and every other bit as 1 with
probability ``q``.  The protocol is pure with ``Support(b) = {i : b_i = 1}``, ``p* = p``,
``q* = q``, and eps-LDP with ``eps = log(p (1 - q) / (q (1 - p)))``.
"""

from __future__ import annotations

import math
from abc import abstractmethod
from typing import Any

import numpy as np

from bayesldp._docs import categorical_parameters, fill_doc, perturb_parameters
from bayesldp._validation import RNGLike, as_generator, check_memory, check_values
from bayesldp.errors import InvalidInputError, InvalidTypeError, NotSupportedError
from bayesldp.mechanisms.base import (
    DirectSupportProtocol,
    bits_as_bool,
    k_columns,
    report_matrix,
)
from bayesldp.tally import Tally

#: Largest ``k`` for which the full ``k x 2^k`` channel is materialised.
MAX_CHANNEL_K = 12

# Bits are drawn in blocks of about this many bytes, so the random bytes stay in cache and the
# memory used besides the output is bounded whatever n is.
_BLOCK_BYTES = 1 << 20
# Column sums are accumulated in uint8 over blocks of at most 255 rows (no overflow), which is
# several times faster than a bool -> int64 reduction for wide reports.
_SUM_ROWS = 255
# Up to this k, reports are counted per bit pattern with a bincount over the 2^k patterns.
_BINCOUNT_MAX_K = 16
# Above this rate the rare extra successes are cheaper to resolve byte by byte (see below).
_MAX_GEOMETRIC_RATE = 1.0 / 32
#: the smallest bit probability drawn exactly: below it 53-bit uniforms cannot resolve it
_MIN_EXACT_PROBABILITY = 2.0**-52


def _random_bytes(gen: np.random.Generator, size: int) -> np.ndarray:
    """``size`` independent uniform bytes from the generator's raw 64-bit stream."""
    words = gen.bit_generator.random_raw((size + 7) // 8)
    return words.astype("<u8", copy=False).view(np.uint8)[:size]


def _bernoulli_into(gen: np.random.Generator, prob: float, out: np.ndarray) -> None:
    """Fill the 1-d bool array ``out`` with independent Bernoulli(``prob``) bits, exactly.

    Write ``256 prob = t + r`` with ``t`` an integer and ``0 <= r < 1`` (exact in float64: the
    product by a power of two is exact).  Each bit is ``A or C`` with ``A = [B < t]`` for a
    uniform byte ``B`` (probability ``t/256``) and ``C`` an independent Bernoulli(``s``) with
    ``s = r / (256 - t)``, so that

    .. math:: \\Pr[A \\lor C] = t/256 + (1 - t/256) s = (t + r)/256 = prob.

    ``C`` is rare (``s <= 1/(256 - t)``), so its 1s are placed by geometric gaps between
    successive successes (cost ``O(s m)``, no pass over all ``m`` bits).  When ``s`` is not small
    (``prob`` close to 1) the ties ``B = t`` are resolved instead, the bit being 1 iff ``U < r``
    for a float64 uniform ``U``.  Either way the probability is exact up to float64 rounding.
    """
    scaled = 256.0 * prob
    t = math.floor(scaled)
    r = scaled - t
    m = out.size
    if t >= 256:
        out[:] = True
        return
    raw = _random_bytes(gen, m)
    np.less(raw, t, out=out)
    if r == 0 or m == 0:
        return
    s = r / (256 - t)
    if s > _MAX_GEOMETRIC_RATE:
        ties = np.flatnonzero(raw == t)
        out[ties] = gen.random(ties.size) < r
        return
    last = -1  # index of the last success placed so far
    while last < m:
        gaps = gen.geometric(s, size=int(1.05 * s * (m - last)) + 16)
        np.minimum(gaps, m + 1, out=gaps)  # a gap past the end ends the block: no int64 overflow
        positions = last + np.cumsum(gaps)
        out[positions[positions < m]] = True
        last = int(positions[-1])


def check_bit_reports_memory(mech: Any, n: int) -> None:
    """Refuse a perturb whose ``(n, k)`` bool reports would not fit in memory, naming ``mech``
    and the way out (smaller batches: tallies add up)."""
    check_memory(
        float(n) * mech.k,
        f"{type(mech).__name__}(k={mech.k:,}).perturb of {n:,} users (an n x K array of bits, "
        "one byte each)",
        "perturb fewer users per call and tally each batch (tallies add up)",
    )


class UnaryEncoding(DirectSupportProtocol):
    """Unary encoding with bit probabilities ``p`` (true bit) and ``q`` (other bits).

    Reports are bool arrays of shape ``(n, k)``.  The likelihood of a bit vector ``b`` given
    ``X = x`` is

    .. math::

        \\Pr[b \\mid x] = \\prod_j q^{b_j} (1-q)^{1-b_j} \\cdot
            \\begin{cases} p/q & b_x = 1 \\\\ (1-p)/(1-q) & b_x = 0 \\end{cases}
        \\;\\propto\\; \\begin{cases} p (1-q) & b_x = 1 \\\\ q (1-p) & b_x = 0, \\end{cases}

    so the tally is in support form with ``levels = (q (1-p), p (1-q))`` and the support of a
    report is its set of 1 bits (Wang et al. 2017, section 4.3).  Subclasses define ``p`` and ``q``.
    """

    def __init__(self, k: int, epsilon: float) -> None:
        super().__init__(k, epsilon)
        p, q = self.p, self.q
        if not (0.0 < q < p < 1.0):
            raise InvalidInputError(
                f"epsilon: {self.epsilon} gives bit probabilities p = {p!r}, q = {q!r} "
                "outside 0 < q < p < 1 in float64; use a smaller epsilon"
            )
        if min(q, 1.0 - p) < _MIN_EXACT_PROBABILITY:
            raise InvalidInputError(
                f"epsilon: {self.epsilon} gives a bit probability of {min(q, 1.0 - p):.3g}, below "
                f"2^-52, where 53-bit uniforms can no longer draw the bits exactly (and the "
                f"report would realise more than epsilon); use epsilon <= {self._max_epsilon()}"
            )

    @staticmethod
    @abstractmethod
    def bit_probabilities(epsilon: float) -> tuple[float, float]:
        """``(p, q)``: the probabilities that the true bit and any other bit are reported 1."""

    @staticmethod
    def log_bit_probabilities(epsilon: float) -> tuple[float, float, float, float]:
        """``(log p, log q, log(1 - p), log(1 - q))``, accurate when p is near 1 or q near 0."""
        raise NotImplementedError  # pragma: no cover - every subclass defines it

    @property
    def p(self) -> float:
        """Probability that the bit of the true value is reported as 1."""
        return self.bit_probabilities(self.epsilon)[0]

    @property
    def q(self) -> float:
        """Probability that any other bit is reported as 1."""
        return self.bit_probabilities(self.epsilon)[1]

    @classmethod
    def _max_epsilon(cls) -> float:
        """The largest epsilon whose bit probabilities are all at least 2^-52 (bisection)."""

        def exact(eps: float) -> bool:
            p, q = cls.bit_probabilities(eps)
            return min(q, 1.0 - p) >= _MIN_EXACT_PROBABILITY

        lo, hi = 1.0, 1000.0
        for _ in range(60):
            mid = 0.5 * (lo + hi)
            lo, hi = (mid, hi) if exact(mid) else (lo, mid)
        return math.floor(lo * 100) / 100

    # ------------------------------------------------------------------ report tables
    def reports_from_frame(self, frame: Any, source: Any = "reports") -> np.ndarray:
        """K columns of bits (0/1 integers or booleans) named 0 to K-1, one per category."""
        values = k_columns(frame, self.k, source)
        if values.dtype.kind == "f":
            raise InvalidInputError(
                f"reports: {source}: unary-encoding bits must be 0/1 integers or booleans, "
                f"got {values.dtype}"
            )
        return values

    def report_size(self) -> str:
        return f"{self.k} bits"

    # ------------------------------------------------------------------ client
    @fill_doc(parameters=perturb_parameters("bits"))
    def perturb(self, x: Any, rng: RNGLike = None) -> np.ndarray:
        """Randomise ``x`` into bit vectors, shape ``(n, k)``, dtype bool.

        Every bit is first drawn Bernoulli(``q``); then the bit of the true value is replaced by
        an independent Bernoulli(``p``) draw.  Bits are exact (see :func:`_bernoulli_into`) and
        drawn in blocks of about 1 MB, so the extra memory is bounded whatever ``n`` is.

        {parameters}
        """
        x = check_values(x, self.k)
        gen = as_generator(rng)
        n, k = x.shape[0], self.k
        check_bit_reports_memory(self, n)
        out = np.empty((n, k), dtype=bool)
        rows = max(1, _BLOCK_BYTES // k)
        true_bits = np.empty(min(rows, n), dtype=bool)
        for start in range(0, n, rows):
            stop = min(n, start + rows)
            block = out[start:stop]
            _bernoulli_into(gen, self.q, block.reshape(-1))
            keep = true_bits[: stop - start]
            _bernoulli_into(gen, self.p, keep)
            block[np.arange(stop - start), x[start:stop]] = keep
        return out

    # ------------------------------------------------------------------ aggregator
    def check_reports(self, reports: Any) -> np.ndarray:
        """Validate reports: shape ``(n, k)``, ``n >= 1``, bool or integer 0/1; returned as bool."""
        arr = report_matrix(reports, self.k, "one bit vector per user")
        if arr.dtype != bool and arr.dtype.kind not in "iu":
            raise InvalidTypeError(
                f"reports: expected bool or integer 0/1 bits, got dtype {arr.dtype}"
            )
        return bits_as_bool(arr, "reports: bits")

    def tally(self, reports: Any) -> Tally:
        """Support-form tally: support = the 1 bits, levels ``(q(1-p), p(1-q))``.

        ``stat`` is the support count ``h(x)``, the number of reports whose bit ``x`` is 1.
        For ``k <= 16`` the reports are first counted per bit pattern (a bincount over the
        ``2^k`` patterns, O(n)), so the tally is built from at most ``2^k`` distinct rows.
        """
        return support_tally(self.check_reports(reports), self)

    @property
    def levels(self) -> tuple[float, float]:
        """Likelihood row values off / on the support: ``(q (1-p), p (1-q))``."""
        p, q = self.p, self.q
        return (q * (1.0 - p), p * (1.0 - q))

    def supports(self, reports: Any, x: int) -> np.ndarray:
        """A report supports ``x`` iff its bit ``x`` is 1."""
        return self.check_reports(reports)[:, x]

    # ------------------------------------------------------------------ privacy
    @property
    def channel(self) -> np.ndarray:
        """The ``k x 2^k`` channel over bit patterns (only for ``k <= 12``).

        Column ``y`` is the pattern whose bit ``j`` (``(y >> j) & 1``) is the report's bit for
        category ``j``.
        """
        return np.exp(self.log_channel())

    def log_channel(self) -> np.ndarray:
        """``log P`` of :attr:`channel`, computed in log space (for ``k <= 12``)."""
        k = self.k
        if k > MAX_CHANNEL_K:
            raise NotSupportedError(
                f"{type(self).__name__}: the channel has 2^{k} columns; it is only built for "
                f"k <= {MAX_CHANNEL_K}"
            )
        lp, lq, l1p, l1q = self.log_bit_probabilities(self.epsilon)
        bits = ((np.arange(2**k)[:, None] >> np.arange(k)) & 1).astype(bool)  # (2^k, k)
        base = np.where(bits, lq, l1q).sum(axis=1)  # all bits at q
        own = np.where(bits, lp - lq, l1p - l1q)
        return base[None, :] + own.T

    def realised_epsilon(self) -> float:
        """The exact epsilon of the bit-vector channel, in log space.

        For ``k <= 12``: ``max_y (max_x log P[x, y] - min_x log P[x, y])`` over the full
        :meth:`log_channel` (no exponentials, so no rounding of tiny probabilities).  Otherwise
        ``log(p (1-q) / (q (1-p)))``, which equals the full channel's maximum: for a pattern
        ``b``, ``P[x, b] / P[x', b]`` depends only on ``(b_x, b_x')`` (all other bits have the
        same law under both inputs) and is largest for ``b_x = 1, b_x' = 0``, where it is
        ``(p/q) ((1-q)/(1-p))``; such patterns exist for every ``k >= 2``.
        """
        if self.k <= MAX_CHANNEL_K:
            log_p = self.log_channel()
            return float((log_p.max(axis=0) - log_p.min(axis=0)).max())
        lp, lq, l1p, l1q = self.log_bit_probabilities(self.epsilon)
        return lp + l1q - lq - l1p


@fill_doc(parameters=categorical_parameters())
class SUE(UnaryEncoding):
    """Symmetric unary encoding (basic RAPPOR without memoisation).

    ``p = e^(eps/2) / (e^(eps/2) + 1)``, ``q = 1 - p``, so ``p (1-q) / (q (1-p)) = e^eps``
    and ``n Var* = e^(eps/2) / (e^(eps/2) - 1)^2`` (Wang et al. 2017, section 4.3).

    {parameters}

    Examples
    --------
    >>> import bayesldp
    >>> mech = bayesldp.SUE(4, 1.0)
    >>> reports = mech.perturb([0, 1, 2, 3] * 50, rng=0)
    >>> reports.shape, mech.tally(reports).n
    ((200, 4), 200)
    """

    name = "SUE"

    @staticmethod
    def bit_probabilities(epsilon: float) -> tuple[float, float]:
        e = math.exp(-epsilon / 2)  # 1 / (e^(eps/2) + 1) without overflow
        return 1.0 / (1.0 + e), e / (1.0 + e)

    @staticmethod
    def log_bit_probabilities(epsilon: float) -> tuple[float, float, float, float]:
        # p = 1 - q = 1 / (1 + e^(-eps/2)), so log p = log(1 - q) = -log1p(e^(-eps/2))
        log_one = -math.log1p(math.exp(-epsilon / 2))
        return log_one, log_one - epsilon / 2, log_one - epsilon / 2, log_one


@fill_doc(parameters=categorical_parameters())
class OUE(UnaryEncoding):
    """Optimised unary encoding: the unary encoding with the smallest variance.

    ``p = 1/2``, ``q = 1 / (e^eps + 1)``, so ``p (1-q) / (q (1-p)) = e^eps`` and
    ``n Var* = 4 e^eps / (e^eps - 1)^2`` (Wang et al. 2017, section 4.3).

    {parameters}

    Examples
    --------
    >>> import bayesldp
    >>> mech = bayesldp.OUE(100, 1.0)
    >>> tally = mech.tally(mech.perturb(list(range(100)) * 10, rng=0))
    >>> tally.n, tally.is_support_form
    (1000, True)
    """

    name = "OUE"

    @staticmethod
    def bit_probabilities(epsilon: float) -> tuple[float, float]:
        e = math.exp(-epsilon)  # 1 / (e^eps + 1) without overflow
        return 0.5, e / (1.0 + e)

    @staticmethod
    def log_bit_probabilities(epsilon: float) -> tuple[float, float, float, float]:
        log_one = -math.log1p(math.exp(-epsilon))  # log(1 - q), q = 1 / (e^eps + 1)
        return -math.log(2.0), log_one - epsilon, -math.log(2.0), log_one


def support_tally(bits: np.ndarray, mechanism: Any) -> Tally:
    """The support-form tally of a bool ``(n, k)`` support matrix (one row per report) with
    ``mechanism.levels``; ``stat`` is the support count per category.  For ``k <= 16`` reports
    are first counted per pattern (a bincount over the ``2^k`` patterns, O(n)); with more
    categories reports almost never repeat, so rows are kept as they are."""
    if bits.shape[1] <= _BINCOUNT_MAX_K:
        support, counts = _count_patterns(bits)
        stat = counts @ support
    else:
        support, counts = bits, np.ones(bits.shape[0], dtype=np.int64)
        stat = _column_sums(bits)
    return Tally(
        counts,
        support=support,
        levels=mechanism.levels,
        stat=stat.astype(float),
        mechanism=mechanism,
        dedupe=bits.shape[1] <= _BINCOUNT_MAX_K,
    )


def _count_patterns(bits: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct rows of a bool ``(n, k)`` matrix (``k <= 16``) and how often each occurs.

    Row ``b`` is keyed by the integer ``sum_j b_j 2^j``; returns the observed patterns as a bool
    ``(U, k)`` matrix (ascending key) and their counts, int64.
    """
    k = bits.shape[1]
    packed = np.packbits(bits, axis=1, bitorder="little")  # (n, 1) or (n, 2) bytes
    if packed.shape[1] == 1:
        keys = packed[:, 0].astype(np.intp)
    else:
        keys = packed[:, 0].astype(np.intp) | (packed[:, 1].astype(np.intp) << 8)
    counts = np.bincount(keys, minlength=1 << k)
    seen = np.flatnonzero(counts)
    support = ((seen[:, None] >> np.arange(k)) & 1).astype(bool)
    return support, counts[seen].astype(np.int64)


def _row_sums(bits: np.ndarray) -> np.ndarray:
    """Number of 1s per row of a bool matrix (int64): byte sums, 4x faster than ``sum(axis=1)``
    on bools."""
    if bits.shape[1] < 256:
        return bits.view(np.uint8).sum(axis=1, dtype=np.uint8).astype(np.int64)
    return np.count_nonzero(bits, axis=1).astype(np.int64)


def _column_sums(bits: np.ndarray) -> np.ndarray:
    """Number of 1s per column of a bool matrix (int64)."""
    u8 = bits.view(np.uint8)
    total = np.zeros(bits.shape[1], dtype=np.int64)
    for start in range(0, bits.shape[0], _SUM_ROWS):
        total += u8[start : start + _SUM_ROWS].sum(axis=0, dtype=np.uint8)
    return total
