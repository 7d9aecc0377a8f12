"""The Tally: the one sufficient statistic every estimator and sampler reads.

A tally of ``n`` LDP reports is a list of distinct *likelihood rows* ``L[u, x]``, each proportional
(per row) to ``Pr(report u | X = x)``, with the number of reports ``c[u]`` that produced it.  The
log-likelihood of a population distribution ``theta`` is, up to an additive constant,

.. math:: \\ell(\\theta) = \\sum_u c_u \\log (L_u \\cdot \\theta).

Rows are stored in one of two forms:

* dense: a float matrix ``rows`` of shape ``(U, K)`` (finite channels: the rows are the exact
  channel columns ``P[:, y]``, so the log-likelihood is exact);
* support form: a boolean matrix ``support`` of shape ``(U, K)`` with two levels ``(lo, hi)``,
  ``L[u, x] = lo + (hi - lo) * support[u, x]`` (unary encoding, local hashing, Hadamard response).

A tally also carries ``stat``, the additive statistic the mechanism's unbiased oracle reads
(support counts for pure protocols, the sum of noisy vectors for SHE, report counts for finite
channels).  Tallies of the same mechanism family merge with ``+`` (shards, days, partitions).
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from bayesldp._validation import check_counts, check_memory
from bayesldp.errors import IncompatibleTallyError, InvalidInputError, InvalidTypeError


class _Source(Protocol):
    """What a tally reads of the mechanism its reports came from (a
    :class:`~bayesldp.Mechanism`; declared here, not imported: the mechanisms import this
    module)."""

    @property
    def family(self) -> str: ...


def _drop_empty(matrix: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    keep = counts > 0
    return (matrix, counts) if keep.all() else (matrix[keep], counts[keep])


def _group_sums(inverse: np.ndarray, counts: np.ndarray, n_groups: int) -> np.ndarray:
    """``out[g] = sum(counts[inverse == g])``, exact in int64.

    A float64 ``bincount`` is exact while every partial sum is below 2**53; above that the
    integer path is taken (no count is ever rounded).
    """
    inverse = inverse.reshape(-1)
    if float(counts.sum(dtype=np.float64)) < 2.0**53:
        return np.bincount(inverse, weights=counts, minlength=n_groups).astype(np.int64)
    out = np.zeros(n_groups, dtype=np.int64)
    np.add.at(out, inverse, counts)
    return out


def _unique_rows_dense(rows: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct rows in lexicographic order (as ``np.unique(rows, axis=0)``) and their summed
    counts: a ``lexsort`` of the columns, 4-8x faster than ``np.unique`` on rows."""
    if rows.shape[0] <= 1:
        return rows.copy(), counts.astype(np.int64)
    order = np.lexsort(rows.T[::-1])
    ranked = rows[order]
    starts = np.empty(ranked.shape[0], dtype=bool)
    starts[0] = True
    np.any(ranked[1:] != ranked[:-1], axis=1, out=starts[1:])
    first = np.flatnonzero(starts)
    return ranked[first], np.add.reduceat(counts[order].astype(np.int64), first)


def _unique_rows_support(support: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    k = support.shape[1]
    packed = np.packbits(support, axis=1)
    if packed.shape[1] <= 8:  # K <= 64: one big-endian uint64 key per row sorts fastest
        padded = np.zeros((packed.shape[0], 8), dtype=np.uint8)
        padded[:, : packed.shape[1]] = packed
        keys = padded.view(">u8").reshape(-1)
    else:
        keys = np.ascontiguousarray(packed).view(np.dtype((np.void, packed.shape[1]))).reshape(-1)
    _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    uniq = np.unpackbits(packed[first], axis=1, count=k).view(bool)
    return uniq, _group_sums(inverse, counts, first.shape[0])


class Tally:
    """Distinct likelihood rows of a set of LDP reports and how many reports gave each.

    Parameters
    ----------
    counts : array of int, shape (U,)
        Number of reports per row; rows with count 0 are dropped.
    rows : array of float, shape (U, K), optional
        Dense likelihood rows (non-negative, each with a positive entry).
    support : array of bool, shape (U, K), optional
        Support form; give together with ``levels``.
    levels : (float, float), optional
        ``(lo, hi)`` with ``0 <= lo``, ``0 < hi``: the row values off and on the support.
    stat : array of float, shape (K,)
        The mechanism's additive oracle statistic.
    mechanism : Mechanism or None
        The mechanism that produced every report, or None when the tally mixes members of one
        family (for example RRRR with different subsets in an adaptive survey).
    family : str, optional
        What may be merged with what; defaults to ``mechanism.family``.
    dedupe : bool, default True
        Merge identical rows on construction.  Mechanisms whose rows are per report and almost
        never repeat (unary encoding or local hashing with many categories) pass False: the
        tally is then a multiset with possibly repeated rows, which every likelihood computation
        reads the same way, and equality compares the deduplicated forms.

    Examples
    --------
    Mechanisms build tallies (:meth:`~bayesldp.Mechanism.tally`); tallies of the same mechanism
    add up:

    >>> import bayesldp
    >>> mech = bayesldp.GRR(3, 1.0)
    >>> tally = mech.tally(mech.perturb([0, 1, 2, 0, 0], rng=0))
    >>> tally.n, tally.k, tally.counts
    (5, 3, array([1, 1, 3]))
    >>> (tally + tally).n
    10
    """

    __slots__ = (
        "_counts",
        "_deduped",
        "_levels",
        "_rows",
        "_support",
        "family",
        "mechanism",
        "stat",
    )

    def __init__(
        self,
        counts: Any,
        *,
        rows: Any = None,
        support: Any = None,
        levels: tuple[float, float] | None = None,
        stat: Any,
        mechanism: _Source | None = None,
        family: str | None = None,
        dedupe: bool = True,
    ) -> None:
        counts = check_counts(counts, "counts")
        if counts.size == 0 or not counts.any():
            raise InvalidInputError("counts: the tally holds no reports (no row has a count > 0)")
        if (rows is None) == (support is None):
            raise InvalidInputError("Tally: give exactly one of rows= or support=")
        if mechanism is None and family is None:
            raise InvalidInputError("Tally: give a mechanism or a family")
        self.mechanism = mechanism
        self.family = family if family is not None else mechanism.family
        if rows is not None:
            rows = np.asarray(rows, dtype=float)
            self._check_matrix(rows, counts)
            # a NaN or +inf anywhere shows in its row's maximum, a NaN or -inf in the minimum:
            # two passes over the rows, no temporary of their size
            top = rows.max(axis=1)
            if not (np.all(np.isfinite(top)) and rows.min() >= 0):
                raise InvalidInputError("rows: likelihood rows must be finite and >= 0")
            if np.any(top <= 0):
                raise InvalidInputError("rows: every likelihood row needs a positive entry")
            rows, counts = _drop_empty(rows, counts)
            self._rows, self._counts = (
                _unique_rows_dense(rows, counts) if dedupe else (rows, counts)
            )
            self._support, self._levels = None, None
        else:
            support = np.asarray(support)
            if support.dtype != bool:
                raise InvalidTypeError(f"support: expected a boolean matrix, got {support.dtype}")
            self._check_matrix(support, counts)
            if levels is None or len(levels) != 2:
                raise InvalidInputError("levels: support form needs levels=(lo, hi)")
            lo, hi = float(levels[0]), float(levels[1])
            if not (np.isfinite(lo) and np.isfinite(hi) and lo >= 0 and hi > 0):
                raise InvalidInputError(f"levels: need finite 0 <= lo and 0 < hi, got {levels}")
            support, counts = _drop_empty(support, counts)
            if dedupe:
                support, counts = _unique_rows_support(support, counts)
            self._support, self._counts = support, counts
            self._levels = (lo, hi)
            self._rows = None
        if self._counts.size == 0:
            raise InvalidInputError("counts: the tally holds no reports (every count is 0)")
        self._deduped = bool(dedupe)
        stat = np.asarray(stat, dtype=float)
        if stat.shape != (self.k,):
            raise InvalidInputError(f"stat: expected shape ({self.k},), got {stat.shape}")
        self.stat = stat

    @staticmethod
    def _check_matrix(matrix: np.ndarray, counts: np.ndarray) -> None:
        if matrix.ndim != 2 or matrix.shape[0] != counts.shape[0] or matrix.shape[1] < 2:
            raise InvalidInputError(
                f"rows: expected shape ({counts.shape[0]}, K) with K >= 2, got {matrix.shape}"
            )

    # ------------------------------------------------------------------ structure
    @property
    def k(self) -> int:
        """Number of categories K."""
        matrix = self._rows if self._rows is not None else self._support
        return int(matrix.shape[1])

    @property
    def counts(self) -> np.ndarray:
        """Reports per distinct row, shape (U,)."""
        return self._counts

    @property
    def n(self) -> int:
        """Total number of reports."""
        return int(self._counts.sum())

    @property
    def n_rows(self) -> int:
        """Number of distinct likelihood rows U."""
        return int(self._counts.shape[0])

    @property
    def is_support_form(self) -> bool:
        """True when rows are stored as a boolean support matrix with two levels."""
        return self._support is not None

    @property
    def support(self) -> np.ndarray | None:
        """Boolean support matrix (U, K) in support form, else None."""
        return self._support

    @property
    def levels(self) -> tuple[float, float] | None:
        """``(lo, hi)`` in support form, else None."""
        return self._levels

    @property
    def rows(self) -> np.ndarray:
        """Dense likelihood rows, shape (U, K) (materialised from support form if needed)."""
        if self._rows is not None:
            return self._rows
        lo, hi = self._levels
        return lo + (hi - lo) * self._support

    # ------------------------------------------------------------------ likelihood
    def row_dot(self, theta: Any) -> np.ndarray:
        """``L @ theta`` for theta of shape (..., K): returns shape (..., U).

        Computed by :class:`bayesldp.likelihood.Likelihood`, the one likelihood operator.
        """
        from bayesldp.likelihood import Likelihood

        return Likelihood(self).row_dot(theta)

    def loglik(self, theta: Any) -> np.ndarray | float:
        """Log-likelihood ``sum_u c_u log(L_u . theta)`` (up to a constant) for theta (..., K).

        ``-inf`` where an observed report has probability 0 (see
        :meth:`bayesldp.likelihood.Likelihood.loglik`).
        """
        from bayesldp.likelihood import Likelihood

        return Likelihood(self).loglik(theta)

    # ------------------------------------------------------------------ merging
    def __add__(self, other: object) -> Tally:
        if isinstance(other, int) and other == 0:  # lets sum() start from 0
            return self
        if not isinstance(other, Tally):
            return NotImplemented
        if other.family != self.family or other.k != self.k:
            raise IncompatibleTallyError(
                f"cannot merge tallies of different mechanisms: {self.family} and {other.family}"
            )
        mechanism = self.mechanism if self.mechanism == other.mechanism else None
        counts = np.concatenate([self._counts, other._counts])
        stat = self.stat + other.stat
        if self.is_support_form and other.is_support_form and self._levels == other._levels:
            support = np.concatenate([self._support, other._support])
            return Tally(
                counts,
                support=support,
                levels=self._levels,
                stat=stat,
                mechanism=mechanism,
                family=self.family,
            )
        rows = np.concatenate([self.rows, other.rows])
        return Tally(counts, rows=rows, stat=stat, mechanism=mechanism, family=self.family)

    __radd__ = __add__

    def deduplicated(self) -> Tally:
        """This tally with identical rows merged (itself when already deduplicated)."""
        if self._deduped:
            return self
        common = {"stat": self.stat, "mechanism": self.mechanism, "family": self.family}
        if self.is_support_form:
            return Tally(self._counts, support=self._support, levels=self._levels, **common)
        return Tally(self._counts, rows=self._rows, **common)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Tally):
            return NotImplemented
        a, b = self.deduplicated(), other.deduplicated()
        return (
            a.family == b.family
            and a.mechanism == b.mechanism
            and np.array_equal(a._counts, b._counts)
            and a._levels == b._levels
            and np.array_equal(a.rows, b.rows)
            and np.array_equal(a.stat, b.stat)
        )

    __hash__ = None  # mutable arrays inside: not hashable

    # ------------------------------------------------------------------ pickling
    def __getstate__(self) -> dict[str, Any]:
        """Pickled compactly: a support matrix travels as packed bits (an eighth of its bytes),
        which is what Dask workers and process pools send each other and the client."""
        state = {name: getattr(self, name) for name in self.__slots__}
        if self._support is not None:
            state["_support"] = (np.packbits(self._support, axis=1), self._support.shape[1])
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        state = dict(state)
        if state["_support"] is not None:
            packed, k = state["_support"]
            state["_support"] = np.unpackbits(packed, axis=1, count=k).view(bool)
        for name, value in state.items():
            setattr(self, name, value)

    def __repr__(self) -> str:
        form = "support" if self.is_support_form else "dense"
        return f"Tally(family={self.family!r}, k={self.k}, n={self.n}, rows={self.n_rows}, {form})"


def joint_tally(tallies: Any) -> Tally:
    """One tally from reports of the same ``K`` categories collected under different mechanisms
    or budgets: the likelihood is the product of theirs, ``sum_t sum_u c_tu log(L_tu . theta)``.

    Tallies of one family are merged with ``+`` (the result keeps their mechanism when they
    share it).  Otherwise the rows are stacked, each tally's rows materialised densely (support
    form is kept when every tally is in support form with the same levels); a likelihood row is
    defined up to a factor, so rows from different mechanisms combine as they are.  The result
    has ``mechanism=None`` and a zero ``stat`` (no single unbiased oracle applies): estimate it
    with ``"mle"``, ``"em"``, ``"ibu"``, ``"em_mr"`` or any posterior method; ``fit`` and
    ``estimate`` accept the list directly.
    """
    if isinstance(tallies, Tally):
        return tallies
    if not isinstance(tallies, list | tuple) or not tallies:
        raise InvalidInputError(
            f"tallies: expected a non-empty list of bayesldp.Tally, got {type(tallies).__name__}"
        )
    for i, tally in enumerate(tallies):
        check_tally(tally, f"tallies[{i}]")
        if tally.k != tallies[0].k:
            raise InvalidInputError(
                f"tallies[{i}]: has K = {tally.k} categories, tallies[0] has K = {tallies[0].k}; "
                "a joint tally needs the same categories"
            )
    if all(t.family == tallies[0].family for t in tallies):
        return sum(tallies[1:], tallies[0])
    counts = np.concatenate([t.counts for t in tallies])
    stat = np.zeros(tallies[0].k)
    family = "joint(" + " | ".join(dict.fromkeys(t.family for t in tallies)) + ")"
    levels = {t.levels for t in tallies}
    if all(t.is_support_form for t in tallies) and len(levels) == 1:
        support = np.concatenate([t.support for t in tallies])
        return Tally(counts, support=support, levels=levels.pop(), stat=stat, family=family)
    check_memory(8.0 * counts.size * tallies[0].k, "joint_tally (dense rows)",
                 "fit fewer or smaller tallies at once")  # fmt: skip
    rows = np.concatenate([t.rows / t.rows.max(axis=1, keepdims=True) for t in tallies])
    return Tally(counts, rows=rows, stat=stat, family=family)


def check_tally(tally: object, name: str = "tally") -> Tally:
    """Raise :class:`~bayesldp.InvalidTypeError` unless ``tally`` is a :class:`Tally`."""
    if not isinstance(tally, Tally):
        raise InvalidTypeError(f"{name}: expected a bayesldp.Tally, got {type(tally).__name__}")
    return tally
