"""Where a survey's reports live: deduplicated rows, subsets and their lookup tables.

Reports are stored as ids of distinct likelihood rows ``(S, y)`` (:mod:`bayesldp.adaptive._kernels`
documents the tables).  :class:`ReportStore` owns the arrays, grows them before a kernel writes,
and hands the kernels their arrays in the groups they take (:meth:`ReportStore.tables`,
:meth:`ReportStore.sgld_rows`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from bayesldp.adaptive import _kernels as kn

_ZOBRIST_SEED = 0x5EED_0004


def grown(arr: np.ndarray, n: int, fill: Any = None) -> np.ndarray:
    """``arr`` with its first axis grown to at least ``n`` (doubling), contents kept."""
    if arr.shape[0] >= n:
        return arr
    cap = max(n, 2 * arr.shape[0], 16)
    if fill is None:
        out = np.empty((cap, *arr.shape[1:]), dtype=arr.dtype)
    else:
        out = np.full((cap, *arr.shape[1:]), fill, dtype=arr.dtype)
    out[: arr.shape[0]] = arr
    return out


class ReportStore:
    """Deduplicated report storage of a survey over ``k`` categories."""

    def __init__(self, k: int) -> None:
        self.k = k
        self.zob = np.random.default_rng(_ZOBRIST_SEED).integers(
            0, 2**64, size=k, dtype=np.uint64, endpoint=False
        )
        self.row_of = np.empty(0, dtype=np.int32)
        self.sub_mask = np.zeros((16, k), dtype=np.bool_)
        self.sub_size = np.zeros(16, dtype=np.int64)
        self.sub_list = np.zeros((16, k), dtype=np.int64)
        self.hkeys = np.zeros(64, dtype=np.uint64)
        self.hvals = np.full(64, -1, dtype=np.int64)
        self.row_index = np.full((16, k), -1, dtype=np.int64)
        self.table = np.empty((64, k))
        self.meta = np.empty((64, 3))
        self.row_sub = np.empty(64, dtype=np.int64)
        self.row_y = np.empty(64, dtype=np.int64)
        self.cnt = np.zeros(2, dtype=np.int64)

    @property
    def n_sub(self) -> int:
        """Distinct subsets stored."""
        return int(self.cnt[0])

    @property
    def n_rows(self) -> int:
        """Distinct likelihood rows ``(S, y)`` stored."""
        return int(self.cnt[1])

    def tables(self) -> tuple:
        """The arrays of the storage kernels (``store`` in :mod:`bayesldp.adaptive._kernels`)."""
        return (self.row_of, self.zob, self.sub_mask, self.sub_size, self.sub_list, self.hkeys,
                self.hvals, self.row_index, self.table, self.meta, self.row_sub, self.row_y,
                self.cnt)  # fmt: skip

    def sgld_rows(self) -> tuple:
        """The arrays the SGLD kernels read (``rows`` in :mod:`bayesldp.adaptive._kernels`)."""
        return (self.row_of, self.row_sub, self.row_y, self.meta, self.sub_list, self.sub_size)

    def ensure(self, users: int, subsets: int, rows: int) -> None:
        """Room for ``users`` reports in total and ``subsets``/``rows`` more table entries."""
        self.row_of = grown(self.row_of, users)
        need = self.n_sub + subsets
        if need > self.sub_mask.shape[0] or 2 * need > self.hvals.shape[0]:
            cap = max(2 * self.sub_mask.shape[0], need)
            self.sub_mask = grown(self.sub_mask, cap, False)
            self.sub_size = grown(self.sub_size, cap, 0)
            self.sub_list = grown(self.sub_list, cap, 0)
            self.row_index = grown(self.row_index, cap, -1)
            hcap = 1 << max(6, (4 * cap - 1).bit_length())
            self.hkeys = np.zeros(hcap, dtype=np.uint64)
            self.hvals = np.full(hcap, -1, dtype=np.int64)
            kn.rehash(self.sub_mask, self.sub_size, self.n_sub, self.zob, self.hkeys, self.hvals)
        need = self.n_rows + rows
        if need > self.table.shape[0]:
            cap = max(2 * self.table.shape[0], need)
            self.table = grown(self.table, cap)
            self.meta = grown(self.meta, cap)
            self.row_sub = grown(self.row_sub, cap)
            self.row_y = grown(self.row_y, cap)

    def add(self, reports: np.ndarray, masks: np.ndarray, first: int, params: np.ndarray) -> None:
        """Store reports ``first, first + 1, ...`` with the subsets (boolean masks) they used.

        Room must have been made with :meth:`ensure`.
        """
        kn.store_reports(reports, masks, first, params, self.tables())

    def reports(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        """Subset id and report of each of the first ``n`` reports."""
        rid = self.row_of[:n].astype(np.int64)
        return self.row_sub[rid], self.row_y[rid]

    # ------------------------------------------------------------------ persistence
    def state_arrays(self, n: int) -> dict[str, np.ndarray]:
        """What a checkpoint stores of the first ``n`` reports (subsets bit-packed)."""
        return {
            "row_of": self.row_of[:n].copy(),
            "row_sub": self.row_sub[: self.n_rows].copy(),
            "row_y": self.row_y[: self.n_rows].copy(),
            "sub_mask": np.packbits(self.sub_mask[: self.n_sub], axis=1),
        }

    @classmethod
    def from_state(
        cls, k: int, params: np.ndarray, arrays: dict[str, np.ndarray], n: int, bad: Any
    ) -> ReportStore:
        """Rebuild a store from :meth:`state_arrays`, checking it; ``bad(what)`` makes the error."""
        row_of = np.asarray(arrays["row_of"])
        row_sub = np.asarray(arrays["row_sub"])
        row_y = np.asarray(arrays["row_y"])
        packed = np.asarray(arrays["sub_mask"])
        n_rows, n_sub = row_sub.shape[0], packed.shape[0]
        if row_of.shape != (n,) or row_y.shape != (n_rows,) or packed.ndim != 2:
            raise bad("report records")
        sub_mask = (
            np.unpackbits(packed, axis=1, count=k).astype(np.bool_)
            if n_sub
            else (np.zeros((0, k), dtype=np.bool_))
        )
        if n and (row_of.min() < 0 or row_of.max() >= n_rows):
            raise bad("row ids")
        if n_rows and (
            row_sub.min() < 0 or row_sub.max() >= n_sub or row_y.min() < 0 or row_y.max() >= k
        ):
            raise bad("rows")
        sub_size = sub_mask.sum(axis=1).astype(np.int64)
        if n_sub and sub_size.max() >= k:
            raise bad("subsets")
        st = cls(k)
        st.ensure(n, n_sub, n_rows)
        st.row_of[:n] = row_of
        st.sub_mask[:n_sub] = sub_mask
        st.sub_size[:n_sub] = sub_size
        for sid in range(n_sub):
            members = np.flatnonzero(sub_mask[sid])
            st.sub_list[sid, : members.size] = members
        st.cnt[0] = n_sub
        kn.rehash(st.sub_mask, st.sub_size, n_sub, st.zob, st.hkeys, st.hvals)
        st.row_sub[:n_rows] = row_sub
        st.row_y[:n_rows] = row_y
        st.cnt[1] = n_rows
        kn.rebuild_rows(st.row_sub, st.row_y, n_rows, params, st.sub_mask, st.sub_size,
                        st.row_index, st.table, st.meta)  # fmt: skip
        return st
