"""The RAPPOR mechanism: Bloom filters and cohorts, over a candidate set of strings.

Client.  A user holding the string ``v`` is assigned a cohort ``c`` uniformly in ``0..m-1``
(independently of ``v``) and encodes ``v`` into a Bloom filter ``B`` of ``k`` bits with ``h``
hash functions; the hash family is google/rappor's (``client/python/rappor.py``,
``get_bloom_bits``): the MD5 digest of the cohort as 4 big-endian bytes followed by the UTF-8
bytes of ``v``, hash ``i`` being ``digest[i] mod k`` (so ``k <= 256`` and ``h <= 16``).  Integer
candidates are hashed as their decimal text (``3`` and ``"3"`` are the same candidate).  The
*permanent* randomised response (PRR) replaces each bit by a fair coin with probability ``f``:
``Pr[B'_j = 1] = 1 - f/2`` if ``B_j = 1`` and ``f/2`` if ``B_j = 0``; the *instantaneous* one
(IRR) reports ``S_j = 1`` with probability ``q_irr`` if ``B'_j = 1`` and ``p_irr`` if
``B'_j = 0``.  The report is ``(c, S)``.

The one-report channel.  Composed per bit, ``Pr[S_j = 1 | B_j = 1] = r_1`` and
``Pr[S_j = 1 | B_j = 0] = r_0`` with ``r_1 = q_irr (1 - f/2) + p_irr f/2`` and
``r_0 = p_irr (1 - f/2) + q_irr f/2``, and the bits are independent given ``B``, so

.. math:: \\Pr[c, S \\mid v] = \\frac{1}{m} \\prod_j r_0^{S_j} (1 - r_0)^{1 - S_j}
          \\cdot \\exp\\big(a\\, |B_c(v) \\cap S| + b\\, |B_c(v) \\setminus S|\\big),

``a = log(r_1 / r_0)``, ``b = log((1 - r_1)/(1 - r_0))``: the likelihood row of a report over
the candidates is ``exp(a m_1(v) + b m_0(v))`` with ``m_1`` (``m_0``) the Bloom bits of ``v`` in
cohort ``c`` that are set (unset) in ``S``, a per-report dense row.  The IRR is symmetric here
(``q_irr = 1 - p_irr``, so ``r_0 = 1 - r_1`` and ``b = -a``) and ``a = epsilon / (2h)``: two
strings with disjoint Bloom sets of ``h`` bits then differ by ``e^epsilon`` on the report that
sets exactly the first set's bits, and no report can differ more.  With ``f`` not given the IRR
is off (``p_irr = 0``, ``q_irr = 1``, the setting of Wang et al. 2017 section 4.3 for one-time
collection) and ``f = 2 / (1 + e^a)``; with ``f`` given, ``p_irr = ((1 - f/2) - r_1)/(1 - f)``.

Budgets.  :meth:`RAPPOR.realised_epsilon` is the exact epsilon of the one-report channel over the
candidates (and the "other" component), computed from their Bloom sets:
``max_c max_{v, v'} (a |B_c(v) \\ B_c(v')| - b |B_c(v') \\ B_c(v)|)``; it equals the requested
epsilon as soon as some cohort holds two candidates with disjoint Bloom sets of ``h`` bits, and is
smaller otherwise (strings outside the candidate set can always reach the requested epsilon).
The PRR's longitudinal budget, the bound for any number of reports of one value (Erlingsson et
al. 2014, Theorem 1), is :attr:`RAPPOR.longitudinal_budget`
``= 2h log((1 - f/2)/(f/2))`` and its exact value on the candidates
:meth:`RAPPOR.realised_longitudinal_epsilon` (the same maximum for the PRR channel alone).

Strings outside the candidate set ("other").  With ``other=True`` the last of the ``K``
categories is every string outside the candidates: its Bloom set is modelled as ``h`` hash
positions drawn independently and uniformly (the random-oracle view of the hash family, exact in
distribution when ``k`` divides 256 and the outside strings are many), so its row entry depends on
the report only through its number of 1 bits ``n_1``:
``E[exp(a m_1 + b m_0)] = sum_{d_1, d_0} Pr[d_1, d_0 | n_1] exp(a d_1 + b d_0)``, ``d_1`` (``d_0``)
the distinct positions that land on 1 (0) bits, computed by a recursion over the ``h`` throws.
Ignoring that mass biases every estimate (the outside strings' Bloom bits are read as evidence
for the candidates sharing them): ``tests/mechanisms/test_rappor.py`` and
``benchmarks/results/rappor.md`` show how much.
"""

from __future__ import annotations

import math
import numbers
from typing import Any, NamedTuple

import numpy as np

from bayesldp._validation import RNGLike, as_generator, check_bool, check_int, check_memory
from bayesldp._validation import check_values as _check_values
from bayesldp.errors import InvalidInputError, InvalidTypeError, NotSupportedError
from bayesldp.mechanisms.base import Mechanism, Parameter, bits_as_bool
from bayesldp.mechanisms.rappor.bloom import _other_log_factor, bloom_bits, check_candidates
from bayesldp.mechanisms.rappor.memo import RapporMemo
from bayesldp.mechanisms.rappor.tally import RapporTally
from bayesldp.tally import Tally

#: the full channel over (cohort, bit pattern) is built only up to this many columns
MAX_CHANNEL_COLUMNS = 1 << 20
#: users perturbed per block (bounds the memory of the uniforms drawn)
_BLOCK_USERS = 1 << 16


class RapporReports(NamedTuple):
    """RAPPOR reports: each user's ``cohort`` (int64, shape ``(n,)``) and ``bits`` (bool,
    shape ``(n, num_bits)``, column ``j`` the Bloom filter's bit ``j``).

    Examples
    --------
    What :meth:`RAPPOR.perturb <bayesldp.RAPPOR.perturb>` returns:

    >>> import bayesldp
    >>> mech = bayesldp.RAPPOR(3, 2.0, candidates=["a", "b", "c"], cohorts=4)
    >>> reports = mech.perturb([0, 1, 2, 0], rng=0)
    >>> type(reports).__name__, reports.cohort.shape, reports.bits.shape
    ('RapporReports', (4,), (4, 16))
    """

    cohort: np.ndarray
    bits: np.ndarray


class RAPPOR(RapporMemo, Mechanism):
    """RAPPOR: Bloom filters in cohorts, permanent and instantaneous randomised response.

    Parameters
    ----------
    k : int
        Number of categories ``K``: the candidates, plus one for "other" when ``other=True``.
    epsilon : float
        Budget of one report (the one-report channel's epsilon; see the module docstring).
    candidates : list of str or int, optional
        The candidate strings, distinct (integers are hashed as their decimal text); default
        ``"0"``, ..., ``str(K - 1)`` (``K - 2`` with ``other``).
    num_bits : int, default 16
        Bloom filter size ``k`` (2..256).  Defaults are google/rappor's simulation defaults
        (``tests/rappor_sim.py``: 16 bits, 2 hashes, 64 cohorts).
    num_hashes : int, default 2
        Hash functions ``h`` (1..16).
    cohorts : int, default 64
        Number of cohorts ``m``, each with its own hash functions.
    f : float, optional
        PRR probability in ``[0, 1)``; default: the PRR alone makes the report (no IRR), with
        ``f = 2 / (1 + e^(epsilon / 2h))``.  Given, it needs ``epsilon`` at most the PRR budget
        ``2h log((1 - f/2)/(f/2))``, and the symmetric IRR makes up the rest.
    other : bool, default False
        Add a last category for every string outside the candidates (see the module docstring).

    Reports are :class:`RapporReports` ``(cohort, bits)``.

    Examples
    --------
    >>> import bayesldp
    >>> mech = bayesldp.RAPPOR(3, 2.0, candidates=["a", "b", "c"], cohorts=4)
    >>> reports = mech.perturb([0, 1, 2, 0] * 25, rng=0)
    >>> mech.tally(reports).n
    100
    """

    name = "RAPPOR"
    PARAMETERS = (
        Parameter("candidates", str, "RAPPOR candidate strings (default 0..K-1)", many=True),
        Parameter("num_bits", int, "RAPPOR Bloom filter bits (default 16)"),
        Parameter("num_hashes", int, "RAPPOR hash functions (default 2)"),
        Parameter("cohorts", int, "RAPPOR cohorts (default 64)"),
        Parameter("f", float, "RAPPOR PRR probability (default: PRR only, f from epsilon)"),
        Parameter(
            "other", bool, "RAPPOR: the last category stands for strings outside the candidates"
        ),
    )
    #: special-purpose (strings, a Bloom design): not ranked by ``recommend``
    RECOMMEND = False

    def __init__(
        self,
        k: int,
        epsilon: float,
        candidates: Any = None,
        num_bits: int = 16,
        num_hashes: int = 2,
        cohorts: int = 64,
        f: float | None = None,
        other: bool = False,
    ) -> None:
        super().__init__(k, epsilon)
        self.other = check_bool(other, "other")
        self.num_bits = check_int(num_bits, "num_bits", 2)
        if self.num_bits > 256:
            raise InvalidInputError(
                f"num_bits: must be in 2..256 (one MD5 byte per hash), got {num_bits}"
            )
        self.num_hashes = check_int(num_hashes, "num_hashes", 1)
        if self.num_hashes > 16:
            raise InvalidInputError(
                f"num_hashes: must be in 1..16 (an MD5 digest has 16 bytes), got {num_hashes}"
            )
        self.cohorts = check_int(cohorts, "cohorts", 1)
        if self.cohorts > 2**32:
            raise InvalidInputError(f"cohorts: must be at most 2^32, got {cohorts}")
        self.candidates = check_candidates(candidates, self.k, self.other)
        h = self.num_hashes
        self.a = self.epsilon / (2 * h)
        if not math.isfinite(math.exp(-self.a)) or math.exp(-self.a) == 0.0:
            raise InvalidInputError(f"epsilon: {self.epsilon} is too large for float64 bits")
        # r1 = sigmoid(a), r0 = 1 - r1, without cancellation
        self.r0 = 1.0 / (1.0 + math.exp(self.a))
        self.r1 = 1.0 / (1.0 + math.exp(-self.a))
        if f is None:
            self.f = 2.0 * self.r0
            self.p_irr, self.q_irr = 0.0, 1.0
            self._f_given = None
        else:
            if isinstance(f, bool) or not isinstance(f, numbers.Real):
                raise InvalidTypeError(f"f: expected a number in [0, 1), got {f!r}")
            f = float(f)
            if not 0.0 <= f < 1.0:
                raise InvalidInputError(f"f: must lie in [0, 1), got {f}")
            budget = self._prr_budget(f)
            if self.epsilon > budget * (1 + 1e-12):
                raise InvalidInputError(
                    f"epsilon: {self.epsilon} exceeds the PRR budget 2h log((1-f/2)/(f/2)) = "
                    f"{budget:.6g} of f = {f}; one report cannot leak more than the PRR: use a "
                    "smaller f or epsilon"
                )
            self.f = f
            self._f_given = f
            self.p_irr = max(0.0, ((1.0 - f / 2) - self.r1) / (1.0 - f))
            self.q_irr = 1.0 - self.p_irr
        if min(self.r0, self.f / 2 if self.f > 0 else 1.0) < 2.0**-52:
            raise InvalidInputError(
                f"epsilon: {self.epsilon} gives a bit probability below 2^-52, which 53-bit "
                f"uniforms cannot draw exactly; use epsilon <= {2 * h * 36:g}"
            )
        positions = np.array(
            [
                [bloom_bits(word, c, h, self.num_bits) for word in self.candidates]
                for c in range(self.cohorts)
            ],
            dtype=np.int64,
        ).reshape(self.cohorts, len(self.candidates), h)
        self._positions = positions
        bloom = np.zeros((self.cohorts, len(self.candidates), self.num_bits), dtype=bool)
        np.put_along_axis(bloom, positions, True, axis=2)
        self.bloom = bloom
        self._other_log = (
            _other_log_factor(self.num_bits, h, self.a, -self.a) if self.other else None
        )
        self._design_cache: tuple[np.ndarray, np.ndarray] | None = None

    # ------------------------------------------------------------------ set-up
    def params(self) -> dict[str, Any]:
        return {
            "k": self.k,
            "epsilon": self.epsilon,
            "candidates": list(self.candidates),
            "num_bits": self.num_bits,
            "num_hashes": self.num_hashes,
            "cohorts": self.cohorts,
            "f": self._f_given,
            "other": self.other,
        }

    @property
    def labels(self) -> tuple[str, ...]:
        """The categories' names: the candidates, then ``"other"`` when modelled."""
        return (*self.candidates, "other") if self.other else self.candidates

    def _prr_budget(self, f: float) -> float:
        if f == 0.0:
            return math.inf
        return 2 * self.num_hashes * math.log((1 - f / 2) / (f / 2))

    @property
    def longitudinal_budget(self) -> float:
        """The PRR's budget ``2h log((1 - f/2)/(f/2))`` (Erlingsson et al. 2014, Theorem 1):
        the bound for any number of reports of one value (``inf`` for ``f = 0``)."""
        return self._prr_budget(self.f)

    # ------------------------------------------------------------------ client
    def perturb(
        self, x: Any, rng: RNGLike = None, *, users: Any = None, memo: Any = None
    ) -> RapporReports:
        """Reports ``(cohort, bits)`` for true categories ``x`` (ints in ``0..K-1``).

        Per user: a cohort uniform in ``0..m-1``, the Bloom bits of the candidate in that cohort
        (for "other": ``h`` uniform positions, a fresh outside string), then every bit reported
        1 with probability ``r_1`` if set and ``r_0`` if not: one draw of the composed
        PRR + IRR channel, which is the law of a single report.  Vectorised over blocks of
        ``2^16`` users.  With ``memo`` (a :class:`~bayesldp.Memo` or :class:`~bayesldp.MemoStore`
        of this mechanism) and ``users`` (distinct non-negative integer ids), each user's cohort
        and each (user, value)'s PRR are read from the memo (or drawn and added to it) and only
        the IRR is fresh (:mod:`~bayesldp.mechanisms.rappor.memo`).
        """
        x = _check_values(x, self.k)
        gen = as_generator(rng)
        if memo is not None:
            return RapporReports(*self._memoised_perturb(x, gen, users, memo))
        if users is not None:
            raise InvalidInputError("users: given without memo=; pass the memo to reuse")
        n, kb = x.shape[0], self.num_bits
        cohort = gen.integers(0, self.cohorts, size=n, dtype=np.int64)
        bits = np.empty((n, kb), dtype=bool)
        n_cand = len(self.candidates)
        for start in range(0, n, _BLOCK_USERS):
            stop = min(n, start + _BLOCK_USERS)
            xs, cs = x[start:stop], cohort[start:stop]
            is_other = xs >= n_cand
            bloom = self.bloom[cs, np.minimum(xs, n_cand - 1)]
            if is_other.any():
                rows = np.flatnonzero(is_other)
                pos = gen.integers(0, kb, size=(rows.size, self.num_hashes))
                fresh = np.zeros((rows.size, kb), dtype=bool)
                np.put_along_axis(fresh, pos, True, axis=1)
                bloom[rows] = fresh
            uniforms = gen.random((stop - start, kb))
            bits[start:stop] = uniforms < np.where(bloom, self.r1, self.r0)
        return RapporReports(cohort, bits)

    # ------------------------------------------------------------------ aggregator
    def check_reports(self, reports: Any) -> RapporReports:
        """Validate reports ``(cohort, bits)``: cohorts in ``0..m-1``, ``num_bits`` 0/1 bits."""
        if not isinstance(reports, tuple) or len(reports) != 2:
            raise InvalidTypeError(
                f"reports: expected RapporReports (cohort, bits), got {type(reports).__name__}"
            )
        cohort, bits = np.asarray(reports[0]), np.asarray(reports[1])
        if cohort.ndim != 1 or cohort.size == 0:
            raise InvalidInputError(
                f"reports: field 'cohort' must be a non-empty 1-d array, got shape {cohort.shape}"
            )
        if cohort.dtype.kind not in "iu":
            raise InvalidInputError(
                f"reports: field 'cohort' must hold integers, got dtype {cohort.dtype}"
            )
        if cohort.min() < 0 or cohort.max() >= self.cohorts:
            bad = cohort.min() if cohort.min() < 0 else cohort.max()
            raise InvalidInputError(
                f"reports: field 'cohort' must lie in 0..{self.cohorts - 1} (the mechanism has "
                f"{self.cohorts} cohorts), got {bad}"
            )
        if bits.ndim != 2 or bits.shape[0] != cohort.size or bits.shape[1] != self.num_bits:
            raise InvalidInputError(
                f"reports: field 'bits' must have shape ({cohort.size}, {self.num_bits}) (the "
                f"mechanism has num_bits = {self.num_bits}), got {bits.shape}"
            )
        if bits.dtype != bool and bits.dtype.kind not in "iu":
            raise InvalidInputError(
                f"reports: field 'bits' must hold 0/1 bits, got dtype {bits.dtype}"
            )
        bits = bits_as_bool(bits, "reports: field 'bits'")
        return RapporReports(cohort.astype(np.int64, copy=False), bits)

    def log_rows(self, cohort: np.ndarray, bits: np.ndarray) -> np.ndarray:
        """``log Pr[c, S | v]`` up to a per-report constant, shape ``(n, K)``.

        ``a (m_1 - m_0) = a (2 m_1 - |B_c(v)|)`` for the candidates (``b = -a``), the "other"
        factor of the module docstring in the last column when modelled.
        """
        n = cohort.shape[0]
        n_cand = len(self.candidates)
        out = np.empty((n, self.k))
        sizes = self.bloom.sum(axis=2)  # (m, K_c)
        order = np.argsort(cohort, kind="stable")
        bounds = np.searchsorted(cohort[order], np.arange(self.cohorts + 1))
        for c in range(self.cohorts):  # per cohort, not per user: at most m matrix products
            idx = order[bounds[c] : bounds[c + 1]]
            if idx.size == 0:
                continue
            m1 = bits[idx].astype(np.float64) @ self.bloom[c].T.astype(np.float64)
            out[idx, :n_cand] = self.a * (2.0 * m1 - sizes[c])
        if self.other:
            out[:, n_cand] = self._other_log[bits.sum(axis=1)]
        return out

    def tally(self, reports: Any) -> RapporTally:
        """Dense tally: one row per distinct report ``(cohort, bits)``, the exact likelihood
        row ``Pr[c, S | v]`` over the ``K`` categories (scaled to a maximum of 1); ``stat`` is
        the oracle's count estimate ``A t`` (see :meth:`unbiased_frequencies`).  It is a
        :class:`RapporTally`: it also carries :meth:`bit_counts`, for ``"rappor_decode"``."""

        cohort, bits = self.check_reports(reports)
        packed = np.packbits(bits, axis=1)
        key = np.concatenate([cohort.astype(">u8").view(np.uint8).reshape(-1, 8), packed], axis=1)
        key = np.ascontiguousarray(key).view(np.dtype((np.void, key.shape[1]))).reshape(-1)
        _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
        counts = np.bincount(inverse.reshape(-1), minlength=first.size).astype(np.int64)
        check_memory(8.0 * first.size * self.k * 2, f"a RAPPOR tally with {first.size:,} "
                     f"distinct reports and K = {self.k}",
                     "tally the reports in batches and add the tallies")  # fmt: skip
        log_rows = self.log_rows(cohort[first], bits[first])
        rows = np.exp(log_rows - log_rows.max(axis=1, keepdims=True))
        stat = self._oracle_matrix() @ self._bit_statistic(cohort, bits)
        return RapporTally(
            counts,
            rows=rows,
            stat=stat,
            mechanism=self,
            dedupe=False,
            bit_counts=self._bit_counts(cohort, bits),
        )

    def bit_counts(self, reports: Any) -> np.ndarray:
        """Per-cohort aggregates in google/rappor's counts layout, int64 ``(m, 1 + num_bits)``:
        column 0 the reports in the cohort, column ``1 + j`` how many set bit ``j``."""
        return self._bit_counts(*self.check_reports(reports))

    def _bit_counts(self, cohort: np.ndarray, bits: np.ndarray) -> np.ndarray:
        out = np.zeros((self.cohorts, 1 + self.num_bits), dtype=np.int64)
        out[:, 0] = np.bincount(cohort, minlength=self.cohorts)
        np.add.at(out[:, 1:], cohort, bits.astype(np.int64))
        return out

    # ------------------------------------------------------------------ report tables
    def reports_from_frame(self, frame: Any, source: Any = "reports") -> RapporReports:
        """Columns ``cohort`` and ``b0``, ..., ``b{num_bits-1}`` (0/1 integers or booleans)."""
        names = [f"b{j}" for j in range(self.num_bits)]
        if "cohort" not in frame.columns:
            raise InvalidInputError(
                f"reports: {source} lacks column 'cohort'; it has "
                f"{', '.join(map(str, frame.columns))}"
            )
        found = [
            c for c in frame.columns if isinstance(c, str) and c[:1] == "b" and c[1:].isdigit()
        ]
        if set(found) != set(names):
            raise InvalidInputError(
                f"reports: {source} must have bit columns b0..b{self.num_bits - 1} (num_bits = "
                f"{self.num_bits}), got {len(found)} bit column(s)"
            )
        cohort = frame["cohort"].to_numpy()
        bits = frame[names].to_numpy()
        if bits.dtype.kind == "f" or bits.dtype.kind not in "biu":
            raise InvalidInputError(
                f"reports: {source}: bit columns must hold 0/1 integers or booleans, got "
                f"{bits.dtype}"
            )
        return self.check_reports((cohort, np.ascontiguousarray(bits)))

    def reports_to_frame(self, reports: Any) -> Any:
        import pandas as pd

        cohort, bits = self.check_reports(reports)
        frame = pd.DataFrame(bits.astype(np.uint8), columns=[f"b{j}" for j in range(self.num_bits)])
        frame.insert(0, "cohort", cohort)
        return frame

    def report_size(self) -> str:
        return f"{self.num_bits} bits + a cohort"

    # ------------------------------------------------------------------ privacy
    def _pair_epsilon(self, a: float, b: float) -> float:
        """``max_c max_{v != v'} (a |B \\ B'| - b |B' \\ B|)`` over candidate Bloom sets, and
        the candidates against "other" (both directions) when modelled."""
        best = 0.0
        sizes = self.bloom.sum(axis=2).astype(float)  # (m, K_c)
        n_cand = sizes.shape[1]
        if n_cand >= 2:
            bloom = self.bloom.astype(np.float64)
            inter = np.einsum("cxj,cyj->cxy", bloom, bloom)
            only_x = sizes[:, :, None] - inter  # |B_x \ B_y|
            log_ratio = a * only_x - b * np.swapaxes(only_x, 1, 2)
            best = max(best, float(log_ratio.max()))
        if self.other:
            kb = self.num_bits
            n1 = np.arange(kb + 1)[None, :]
            s = np.unique(sizes)[:, None]
            m1_max = np.minimum(s, n1)
            m1_min = np.maximum(0, n1 - (kb - s))
            other = _other_log_factor(kb, self.num_hashes, a, b)[None, :]
            up = a * m1_max + b * (s - m1_max) - other
            down = other - (a * m1_min + b * (s - m1_min))
            best = max(best, float(up.max()), float(down.max()))
        return best

    def realised_epsilon(self) -> float:
        """Exact epsilon of the one-report channel over the ``K`` categories.

        The channel factorises over bits given the Bloom set, so the ratio of two candidates'
        probabilities of a report is ``exp(a (|B ∩ S| - |B' ∩ S|) + b (|B \\ S| - |B' \\ S|))``,
        largest for ``S`` holding ``B \\ B'`` and none of ``B' \\ B``; its maximum over the
        cohorts' Bloom sets is computed (and against "other": over the number of 1 bits).
        ``tests/mechanisms/test_rappor.py`` checks it against the full channel, brute force.
        """
        return self._pair_epsilon(self.a, -self.a)

    def audit_event(self, reports: Any, x0: int, x1: int) -> np.ndarray:
        """Reports whose likelihood ratio ``Pr[report | x0] / Pr[report | x1]`` is the largest
        any report reaches (a cohort where the two Bloom sets differ most, those bits set for
        ``x0`` and unset for ``x1``)."""
        cohort, bits = self.check_reports(reports)
        log_rows = self.log_rows(cohort, bits)
        ratio = log_rows[:, x0] - log_rows[:, x1]
        if self.other and self.k - 1 in (x0, x1):
            best = ratio.max()  # the "other" row: the largest ratio observed
        else:
            sizes = self.bloom.sum(axis=2)
            inter = (self.bloom[:, x0] & self.bloom[:, x1]).sum(axis=1)
            best = float((self.a * (sizes[:, x0] + sizes[:, x1] - 2 * inter)).max())
        return ratio >= best - 1e-9 * max(1.0, abs(best))

    def realised_longitudinal_epsilon(self) -> float:
        """Exact epsilon of the PRR channel ``B -> B'`` over the candidates' Bloom sets: the
        budget of all reports of one user; at most :attr:`longitudinal_budget`."""
        if self.f == 0.0:
            return math.inf
        g = math.log((1 - self.f / 2) / (self.f / 2))
        return self._pair_epsilon(g, -g)

    @property
    def channel(self) -> np.ndarray:
        """The ``K x (m 2^k)`` channel over (cohort, bit pattern); column ``c 2^k + y`` is
        cohort ``c`` with bit ``j`` equal to ``(y >> j) & 1`` (small ``m 2^k`` only)."""
        columns = self.cohorts * 2**self.num_bits if self.num_bits <= 20 else math.inf
        if columns > MAX_CHANNEL_COLUMNS:
            raise NotSupportedError(
                f"RAPPOR: the channel has m 2^k = {self.cohorts} x 2^{self.num_bits} columns; it "
                f"is built only up to {MAX_CHANNEL_COLUMNS}"
            )
        kb = self.num_bits
        patterns = ((np.arange(2**kb)[:, None] >> np.arange(kb)) & 1).astype(bool)
        cohort = np.repeat(np.arange(self.cohorts), 2**kb)
        bits = np.tile(patterns, (self.cohorts, 1))
        log_base = np.where(bits, math.log(self.r0), math.log1p(-self.r0)).sum(axis=1)
        log_p = self.log_rows(cohort, bits) + log_base[:, None] - math.log(self.cohorts)
        return np.exp(log_p).T

    # ------------------------------------------------------------------ oracle
    def _design_matrix(self) -> np.ndarray:
        """The design ``D[(c, j), v] = E[1{cohort c} B_j | v]`` (``m k x K``), any rank."""
        m, kb = self.cohorts, self.num_bits
        check_memory(8.0 * m * kb * self.k, "the RAPPOR design", "use fewer cohorts or bits")
        design = np.empty((m * kb, self.k))
        n_cand = len(self.candidates)
        design[:, :n_cand] = np.transpose(self.bloom, (0, 2, 1)).reshape(m * kb, n_cand) / m
        if self.other:
            design[:, n_cand] = (1.0 - (1.0 - 1.0 / kb) ** self.num_hashes) / m
        return design

    def _design(self) -> tuple[np.ndarray, np.ndarray]:
        """``(D, A)``: the design ``D[(c, j), v] = E[1{cohort c} B_j | v]`` (``m k x K``) and
        ``A = (D^T D)^{-1} D^T``."""
        if self._design_cache is None:
            m, kb = self.cohorts, self.num_bits
            design = self._design_matrix()
            check_memory(8.0 * design.size * 3, "the RAPPOR oracle's design",
                         "use fewer cohorts or bits")  # fmt: skip
            u, sv, vt = np.linalg.svd(design, full_matrices=False)
            if sv.size < self.k or sv.min() <= sv.max() * 1e-10:
                raise NotSupportedError(
                    f"RAPPOR: the Bloom design of the {self.k} categories over {m} cohorts x "
                    f"{kb} bits is rank deficient (some categories share every Bloom bit), so no "
                    "unbiased linear oracle exists; use more bits or cohorts, or a likelihood "
                    "estimator"
                )
            self._design_cache = (design, (vt.T / sv) @ u.T)
        return self._design_cache

    def _oracle_matrix(self) -> np.ndarray:
        try:
            return self._design()[1]
        except NotSupportedError:
            return np.zeros((self.k, self.cohorts * self.num_bits))

    def _bit_statistic(self, cohort: np.ndarray, bits: np.ndarray) -> np.ndarray:
        """``t[(c, j)] = sum_{i in c} (S_ij - r_0) / (r_1 - r_0)``, flattened ``(m k,)``."""
        sums = np.zeros((self.cohorts, self.num_bits))
        np.add.at(sums, cohort, bits.astype(np.float64))
        n_c = np.bincount(cohort, minlength=self.cohorts).astype(float)
        return ((sums - n_c[:, None] * self.r0) / (self.r1 - self.r0)).reshape(-1)

    def unbiased_frequencies(self, tally: Tally) -> np.ndarray:
        """Per-bit debiasing, then least squares on the Bloom design: ``A t / n``.

        ``t[(c, j)] = sum_{i in c} (S_ij - r_0)/(r_1 - r_0)`` has mean ``D N`` (``N`` the true
        counts; a user is in cohort ``c`` with probability ``1/m``), so ``A t`` with
        ``A = (D^T D)^{-1} D^T`` is unbiased for ``N`` whenever ``D`` has full column rank.  The
        statistic is linear in the reports, so it is carried additively in the tally's ``stat``.
        (The channel-inverse oracle of finite mechanisms is not used: the report alphabet has
        ``m 2^k`` letters.)
        """
        self.check_tally(tally)
        self._design()
        return tally.stat / tally.n

    def oracle_variance(self, theta: Any, n: int) -> np.ndarray:
        """Exact variance of :meth:`unbiased_frequencies` for ``n`` users with frequencies
        ``theta`` (cohorts drawn at random).

        A user's contribution ``z`` to ``t`` has mean ``D e_v`` and second moment, within its
        cohort, ``(1/m)(B B^T + diag(r(1 - r))/(r_1 - r_0)^2)`` with ``r = r_0 + (r_1 - r_0) B``
        (for "other", ``E[B B^T]`` over random Bloom sets), so
        ``Var[A t]_ii = sum_v N_v (sum_{c} (A_c E[z z^T | v, c] A_c^T)_ii / m - 1[i = v])``.
        """
        theta = np.asarray(theta, dtype=float)
        if theta.shape != (self.k,):
            raise InvalidInputError(f"theta: expected shape ({self.k},), got {theta.shape}")
        _, a_mat = self._design()
        m, kb, h = self.cohorts, self.num_bits, self.num_hashes
        delta2 = (self.r1 - self.r0) ** 2
        a_c = a_mat.reshape(self.k, m, kb).transpose(1, 0, 2)  # (m, K, k)
        bloom = self.bloom.astype(float)  # (m, K_c, k)
        n_cand = bloom.shape[1]
        var_bit = np.where(self.bloom, self.r1 * (1 - self.r1), self.r0 * (1 - self.r0)) / delta2
        proj = np.einsum("cij,cxj->cix", a_c, bloom)  # (m, K, K_c)
        second = proj**2 + np.einsum("cij,cxj->cix", a_c**2, var_bit)
        per_input = second.sum(axis=0) / m  # (K, K_c): E over cohorts of (A z)_i^2
        total = per_input @ (theta[:n_cand] * n)
        if self.other:
            pi = 1.0 - (1.0 - 1.0 / kb) ** h
            pij = 1.0 - 2.0 * (1.0 - 1.0 / kb) ** h + (1.0 - 2.0 / kb) ** h
            r = np.array([self.r0, self.r1])
            mean_var = (pi * r[1] * (1 - r[1]) + (1 - pi) * r[0] * (1 - r[0])) / delta2
            rows = a_c.sum(axis=2)  # sum_j A_c[i, j]
            sq = (a_c**2).sum(axis=2)
            second_o = pij * (rows**2 - sq) + (pi + mean_var) * sq  # (m, K)
            total = total + second_o.sum(axis=0) / m * theta[n_cand] * n
        return (total - theta * n) / n**2
