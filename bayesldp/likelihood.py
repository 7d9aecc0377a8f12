"""The likelihood of a tally: the one operator every estimator, sampler and bound reads.

A :class:`~bayesldp.Tally` holds distinct likelihood rows ``L[u, x]`` (proportional to
``Pr(report u | X = x)``) and their counts ``c[u]``; the log-likelihood of ``theta`` is

.. math:: \\ell(\\theta) = \\sum_u c_u \\log(L_u \\cdot \\theta)

(Lopuhaä-Zwakenberg, Li, Škorić and Li, "Improving Frequency Estimation under Local Differential
Privacy", WPES 2020, eq. 22).  Everything the package computes from a tally is a
product with these rows: ``L theta`` (the report probabilities), ``L^T w`` (gradients, the EM map
``theta_x <- theta_x g_x / n`` with ``g = L^T (c / L theta)``), ``L^T diag(w) L`` (Hessians and
Fisher information).  :class:`Likelihood` computes them once, for every row form, with the
numba kernels of :mod:`bayesldp.likelihood_kernels` (band rows: :mod:`bayesldp.likelihood_band`);
the MLE, EM, EM-MR, the HMC and SGLD samplers and :mod:`bayesldp.bounds` all read it.

Rows are *scaled* to a maximum of 1 (the likelihood is invariant to a row's scale, up to the
constant ``sum_u c_u log s_u`` kept in ``const``), so tiny or huge rows neither underflow nor
overflow, and *centred*: ``L[u] = a_u + C[u]`` with ``C[u] >= 0`` (``a_u = min_x L[u, x]`` for
dense rows, ``min(lo, hi)`` in support form).  On the simplex ``L_u . theta = a_u + C_u . theta``,
so log-likelihood differences are computed as ``log1p(C_u . theta / a_u)`` without the cancellation
that ruins them when ``epsilon`` is tiny (every row then nearly constant).  ``C`` is stored in one
of five forms, chosen from the tally:

* ``"dense"``: the matrix ``C`` and its transpose (dense tallies, finite channels): O(U K) per
  product, each read from the copy whose inner loop is contiguous and independent;
* ``"band"``: dense rows that are one level on a contiguous range of bins plus a few partial-bin
  corrections at its ends (the discretised square wave and piecewise mechanisms,
  :func:`band_form`): O(U + K) per product from prefix sums; ``dense`` keeps ``C`` for the
  products computed in numpy;
* ``"sparse"``: ``C = |hi - lo| M`` with the 0/1 matrix ``M`` (the support, or its complement when
  ``hi < lo``) stored as compressed rows of ``M`` or of ``1 - M``, whichever is sparser
  (``complement``): O(nnz + K) per product (unary encoding, local hashing, Hadamard response);
* ``"packed"``: the same ``C = |hi - lo| M`` with ``M`` itself (never its complement) as bits,
  ``B = ceil(K / 8)`` bytes a row, multiplied through per-product byte tables
  (:mod:`bayesldp.likelihood_packed`): O(U B + 256 B) per product whatever the density.  Taken
  instead of "sparse" when it costs less, ``READ U B + TABLE 256 B < nnz + ROW U`` with ``nnz``
  the compressed rows' stored entries and the costs in units of one such entry per product
  (``_packed_is_cheaper``): a byte read ``READ = 0.40``, a byte table entry ``TABLE = 0.79``,
  the compressed rows' fixed cost per row beyond the packed rows' ``ROW = 7.6``: the least
  squares fit to the gradient timings of ``benchmarks/investigations/likelihood_forms.py`` at commit
  2705a10 (30 random-mask cells, U = 1e3 and 1e5, K = 16 to 256, density 0.03 to 0.5; its results
  file at that commit), where it picks the faster form in 29 of the 30 cells (the miss: 4% slower),
  and in 29 of 30 on the committed run, made after (e855e19).  Packed rows were 2.4x to 4.6x faster
  on every mechanism tally there (OUE K = 50: ``nnz / U`` 13.7 against ``B = 7``) and slower only on
  few, sparse rows (U = 1,000 at density 0.03: 1.45x at K = 256, which stays compressed; 2% at K =
  64, the rule's miss);
* ``"onehot"``: support rows with exactly one True (GRR): one column index per row, O(U + K).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from bayesldp._validation import check_memory
from bayesldp.errors import InvalidInputError
from bayesldp.likelihood_band import _REASSOC as _REASSOC
from bayesldp.likelihood_band import band_form
from bayesldp.likelihood_kernels import (
    _loglik_batch,
    _pattern_gram,
    _row_pattern,
    _scaled_centred,
    evaluate,
    gradient,
    loglik_rel,
    matvec,
    rmatvec,
)
from bayesldp.likelihood_kernels import evaluate_rows as evaluate_rows
from bayesldp.likelihood_kernels import rmatvec_rows as rmatvec_rows
from bayesldp.likelihood_packed import pack_rows

__all__ = ["Likelihood"]

_CHUNK_ELEMENTS = 1 << 21  # float64 temporaries of at most 16 MB when densifying row blocks
# Discretised channels carry quadrature rounding of ~1e-14 (rows scaled to a maximum of 1);
# entries within this of a band's level (or of 0 off it) are read as that level.
_LEVEL_TOL = 1e-12


# Packed rows against compressed rows (module docstring, "packed"), in units of one stored
# entry of the compressed rows' product: a packed byte read per row and byte, a byte table
# entry, and the compressed rows' fixed cost per row (fitted: module docstring).
_PACKED_READ = 0.40
_PACKED_TABLE = 0.79
_PACKED_ROW = 7.6


def packed_saving(n_rows: int, k: int, stored_nnz: float) -> float:
    """What packed rows save per product against the compressed rows holding ``stored_nnz``
    entries, in units of one stored entry: ``nnz + ROW U - (READ U B + TABLE 256 B)`` (module
    docstring, "packed"); positive when packed rows are cheaper."""
    n_bytes = -(-k // 8)
    packed = _PACKED_READ * n_bytes * n_rows + _PACKED_TABLE * 256 * n_bytes
    return stored_nnz + _PACKED_ROW * n_rows - packed


def _packed_is_cheaper(n_rows: int, k: int, stored_nnz: float) -> bool:
    """Whether packed rows beat the compressed rows that hold ``stored_nnz`` entries."""
    return packed_saving(n_rows, k, stored_nnz) > 0.0


def _compressed_rows(mask: np.ndarray) -> tuple[np.ndarray, np.ndarray, bool]:
    """``(indptr, indices, complement)``: the compressed rows of the 0/1 matrix ``mask`` or, when
    more than half its entries are 1 (``complement``), of ``1 - mask``."""
    mask_nnz = mask.sum(axis=1)
    complement = bool(mask_nnz.sum() > 0.5 * mask.size)
    indptr = np.zeros(mask.shape[0] + 1, dtype=np.int64)
    np.cumsum(mask.shape[1] - mask_nnz if complement else mask_nnz, out=indptr[1:])
    return indptr, np.nonzero(~mask if complement else mask)[1].astype(np.int32), complement


# ============================================================================ the operator
class Likelihood:
    """The centred likelihood rows of a tally and every product the package needs.

    ``L[u, x] = offset[u] + C[u, x]`` with ``C >= 0``, stored as ``kind`` "dense", "band",
    "sparse", "packed" or "onehot" (module docstring).  ``arrays`` is the tuple ``(dense,
    indptr, indices, delta, complement, offset)`` the compiled kernels
    (:mod:`bayesldp.likelihood_kernels`) take (``dense``: ``(C, C^T)`` for dense rows, the band
    tuple for band rows, ``(packed, delta)`` for packed rows, whose ``indptr`` and ``indices``
    are None: their compressed rows, built on first use, serve ``gram`` only).

    Parameters
    ----------
    tally : Tally
        Any tally (dense or support form, deduplicated or not, one mechanism or mixed).

    Attributes
    ----------
    k, n_rows : int
        Categories and distinct rows.
    counts : ndarray (U,)
        Row counts as floats; ``n`` is their sum.
    const : float
        ``sum_u c_u log a_u`` over rows with ``a_u > 0``: ``ell(theta) = const + loglik_rel``.
    rowmax : ndarray (U,)
        ``max_x C[u, x]``.
    """

    def __init__(self, tally: Any) -> None:
        self.k = tally.k
        self.counts = tally.counts.astype(float)
        self.n = float(self.counts.sum())
        self.n_rows = int(self.counts.shape[0])
        self.dense: np.ndarray | None = None
        self.band: tuple | None = None
        self.indptr: np.ndarray | None = None
        self.indices: np.ndarray | None = None
        self.delta = 0.0
        self.complement = False
        self._support: np.ndarray | None = None
        self.packed: np.ndarray | None = None  # packed rows: M as bits, ceil(K / 8) bytes a row
        self._csr: tuple[np.ndarray, np.ndarray, bool] | None = None
        rows_form = None  # the kernels' first slot: band rows, (C, C^T), packed rows or None
        if tally.is_support_form:
            self._init_support(tally)
            if self.packed is not None:
                rows_form = (self.packed, self.delta)
        else:
            what = f"the likelihood's rows ({self.n_rows:,} x {self.k:,})"
            check_memory(8.0 * self.n_rows * self.k, what, "use fewer bins or categories")
            rows, self.row_scale, self.offset = _scaled_centred(tally.rows)
            self.dense = rows
            self.rowmax = 1.0 - self.offset  # each scaled row's maximum is 1
            ordered = getattr(tally.mechanism, "ordered_bins", tally.k)
            is_band, band = band_form(rows, ordered, _LEVEL_TOL)
            self.band = band if is_band else None
            if not is_band:
                check_memory(16.0 * self.n_rows * self.k, what + " and their transpose",
                             "use fewer bins or categories")  # fmt: skip
            rows_form = band if is_band else (rows, np.ascontiguousarray(rows.T))
            self.kind = "band" if is_band else "dense"
        self.positive = self.offset > 0
        safe = np.where(self.positive, self.offset, 1.0)
        self.inv_offset = np.where(self.positive, 1.0 / safe, 0.0)
        self.scale_const = float(self.counts @ np.log(self.row_scale))
        self.const = float(self.counts[self.positive] @ np.log(safe[self.positive]))
        self.const += self.scale_const
        self.arrays = (
            rows_form,
            self.indptr,
            self.indices,
            self.delta,
            self.complement,
            self.offset,
        )

    def _init_support(self, tally: Any) -> None:
        top = max(tally.levels)
        lo, hi = tally.levels[0] / top, tally.levels[1] / top
        self.row_scale = np.full(self.n_rows, top)
        support = np.ascontiguousarray(tally.support)
        self._support = support
        self._invert = bool(hi < lo)  # then C = |hi - lo| (1 - support)
        self.delta = abs(hi - lo)
        self.offset = np.full(self.n_rows, min(lo, hi))
        row_nnz, first = _row_pattern(support)
        mask_nnz = self.k - row_nnz if self._invert else row_nnz
        self.rowmax = self.delta * (mask_nnz > 0)
        if row_nnz.min() == 1 and row_nnz.max() == 1:  # GRR: one True per row
            self.kind = "onehot"
            self.indices = first
            self.complement = self._invert
            return
        mask = ~support if self._invert else support
        mask_total = float(mask_nnz.sum())
        if _packed_is_cheaper(self.n_rows, self.k, min(mask_total, support.size - mask_total)):
            self.kind = "packed"
            self.packed = pack_rows(mask)
            return
        self.kind = "sparse"
        self.indptr, self.indices, self.complement = _compressed_rows(mask)

    def _compressed(self) -> tuple[np.ndarray, np.ndarray, bool]:
        """``(indptr, indices, complement)``: the compressed rows (module docstring, "sparse"),
        built on first use for packed rows (:meth:`_sparse_gram` reads them)."""
        if self.indices is not None:
            return self.indptr, self.indices, self.complement
        if self._csr is None:
            self._csr = _compressed_rows(~self._support if self._invert else self._support)
        return self._csr

    # ---------------------------------------------------------------- products
    def evaluate(self, theta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(C theta, L theta)`` for one theta (K,)."""
        theta = np.ascontiguousarray(theta, dtype=float)
        r = np.empty(self.n_rows)
        lth = np.empty(self.n_rows)
        if self.dense is not None:  # BLAS
            np.matmul(self.dense, theta, out=r)
            lth = self.offset * theta.sum() + r
        else:
            evaluate(*self.arrays, theta, r, lth)
        return r, lth

    def matvec(self, v: np.ndarray) -> np.ndarray:
        """``C @ v`` for v of shape (K,)."""
        if self.dense is not None:
            return self.dense @ v
        out = np.empty(self.n_rows)
        matvec(*self.arrays[:5], np.ascontiguousarray(v, dtype=float), out)
        return out

    def rmatvec(self, w: np.ndarray) -> np.ndarray:
        """``C.T @ w`` for w of shape (U,)."""
        if self.dense is not None:
            return w @ self.dense
        out = np.empty(self.k)
        rmatvec(*self.arrays[:5], np.ascontiguousarray(w, dtype=float), out)
        return out

    def sq_rmatvec(self, w: np.ndarray) -> np.ndarray:
        """``(C * C).T @ w``."""
        if self.dense is None:  # C is delta times a 0/1 matrix
            return self.delta * self.rmatvec(w)
        out = np.zeros(self.k)
        for sl in self._row_blocks(self.k):
            block = self.dense[sl]
            out += (block * block).T @ w[sl]
        return out

    def gram(self, w: np.ndarray, idx: np.ndarray | None = None) -> np.ndarray:
        """``C[:, idx].T @ diag(w) @ C[:, idx]`` (all columns when idx is None), O(U |idx|^2)."""
        if idx is None and self.kind in ("sparse", "packed"):  # O(nnz^2 / U) a row, not O(K^2)
            return self._sparse_gram(np.ascontiguousarray(w, dtype=float))
        idx = np.arange(self.k) if idx is None else idx
        m = idx.shape[0]
        out = np.zeros((m, m))
        for sl in self._row_blocks(m):
            block = self._centred_block(sl)[:, idx]
            out += (block * w[sl, None]).T @ block
        return out

    def _sparse_gram(self, w: np.ndarray) -> np.ndarray:
        """``C^T W C`` from the stored pattern: ``C = delta M`` or ``delta (1 - M)``
        (``complement``), ``(1 - M)^T W (1 - M) = W_tot 1 1^T - 1 m^T - m 1^T + M^T W M``
        with ``m = M^T w``."""
        indptr, indices, complement = self._compressed()
        pattern = _pattern_gram(indptr, indices, w, self.k)
        if complement:
            m = np.diag(pattern).copy()
            pattern = float(w.sum()) - m[:, None] - m[None, :] + pattern
        return self.delta**2 * pattern

    def full_gram(self, w: np.ndarray) -> np.ndarray:
        """``L.T @ diag(w) @ L`` (K, K), from the centred rows.

        ``sum_u w_u (a_u + C_u)(a_u + C_u)^T = C^T W C + v 1^T + 1 v^T + (sum_u w_u a_u^2) 1 1^T``
        with ``v = C^T (w a)``.
        """
        v = self.rmatvec(w * self.offset)
        return self.gram(w) + v[:, None] + v[None, :] + float(w @ self.offset**2)

    def _centred_block(self, sl: slice) -> np.ndarray:
        if self.dense is not None:
            return self.dense[sl]
        sub = self._support[sl]
        return self.delta * (~sub if self._invert else sub).astype(float)

    def _row_blocks(self, width: int):
        step = max(1, _CHUNK_ELEMENTS // max(width, 1))
        for start in range(0, self.n_rows, step):
            yield slice(start, min(start + step, self.n_rows))

    def rows_at(self, idx: np.ndarray) -> np.ndarray:
        """The rows ``L[idx]`` as floats, shape ``idx.shape + (K,)`` (only these are built)."""
        scale = self.row_scale[idx][..., None]
        if self.dense is not None:
            return scale * (self.offset[idx][..., None] + self.dense[idx])
        sub = self._support[idx]
        return scale * (self.offset[0] + self.delta * (~sub if self._invert else sub))

    # ---------------------------------------------------------------- likelihood
    def loglik(self, theta: Any) -> np.ndarray | float:
        """``sum_u c_u log(L_u . theta)`` for theta of shape (K,) or (..., K), any scale."""
        theta = np.asarray(theta, dtype=float)
        # a writeable copy: a read-only array (draws of an InferenceData) would make numba
        # compile the kernel a second time, for read-only arguments
        flat = np.array(theta.reshape(-1, self.k), order="C")
        out = np.empty(flat.shape[0])
        _loglik_batch(*self.arrays, self.counts, flat, out)
        out += self.scale_const
        return float(out[0]) if theta.ndim == 1 else out.reshape(theta.shape[:-1])

    def row_dot(self, theta: Any) -> np.ndarray:
        """``L @ theta`` for theta of shape (..., K): returns shape (..., U)."""
        theta = np.asarray(theta, dtype=float)
        flat = theta.reshape(-1, self.k)
        out = np.empty((flat.shape[0], self.n_rows))
        for d in range(flat.shape[0]):
            out[d] = self.evaluate(flat[d])[1]
        out *= self.row_scale
        return out.reshape((*theta.shape[:-1], self.n_rows))

    def loglik_rel(self, r: np.ndarray, lth: np.ndarray) -> float:
        """``ell(theta) - const`` from ``evaluate``'s output, theta on the simplex."""
        return float(loglik_rel(r, lth, self.counts, self.inv_offset, self.positive)[0])

    def loglik_scale(self, r: np.ndarray, lth: np.ndarray) -> float:
        """``sum_u c_u |t_u|``: the magnitude that sets the rounding error of ``loglik_rel``."""
        return float(loglik_rel(r, lth, self.counts, self.inv_offset, self.positive)[1])

    def grad(self, theta: np.ndarray, floor: float = 0.0) -> tuple[float, np.ndarray]:
        """``(ell(theta), g)`` with ``g = L^T (c / max(L theta, floor))`` for one theta (K,)."""
        theta = np.ascontiguousarray(theta, dtype=float)
        work = np.empty((3, self.n_rows))
        g = np.empty(self.k)
        ll = gradient(*self.arrays, self.counts, theta, float(floor), *work, g)
        return float(ll) + self.scale_const, g

    def score(self, thetas: np.ndarray, floor: float = 0.0) -> np.ndarray:
        """``h(theta) = L^T (c / max(L theta, floor)) - n`` for thetas (C, K) -> (C, K)."""
        return np.stack([self.grad(theta, floor)[1] for theta in thetas]) - self.n

    def fisher_diag(self, theta: np.ndarray, floor: float = 0.0) -> np.ndarray:
        """``sum_u c_u L_ux^2 / max(L_u . theta, floor)^2`` for every x, at one theta (K,)."""
        _, lth = self.evaluate(theta)
        w2 = self.counts / np.maximum(lth, floor) ** 2
        a = self.offset
        return float(w2 @ a**2) + 2.0 * self.rmatvec(w2 * a) + self.sq_rmatvec(w2)

    def kkt(self, theta: np.ndarray, lth: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
        """Scaled KKT violation of the MLE, the centred gradient ``C.T (c / L theta)`` and
        ``g - lambda``.

        The violation is ``max(max_{theta_x>0} |g_x - n|, max_{theta_x=0} (g_x - n)^+)``
        divided by ``n * s`` with ``s = mean_i max_x C[u_i, x] / (L_{u_i} . theta)`` the typical
        slope of one report's log-likelihood, so the tolerance does not depend on epsilon.
        """
        w = self.counts / lth
        gt = self.rmatvec(w)
        dev = gt - theta @ gt
        slope = float(w @ self.rowmax)
        scale = slope if slope > 0 else 1.0
        free = theta > 0
        v_free = float(np.abs(dev[free]).max()) if free.any() else 0.0
        v_off = float(max(dev[~free].max(), 0.0)) if (~free).any() else 0.0
        return max(v_free, v_off) / scale, gt, dev

    def check_start(self, theta0: Any) -> np.ndarray:
        """Validate a starting point of an iterative estimator (default uniform)."""
        if theta0 is None:
            return np.full(self.k, 1.0 / self.k)
        arr = np.asarray(theta0, dtype=float)
        if arr.shape != (self.k,) or not np.all(np.isfinite(arr)) or arr.min() < 0:
            raise InvalidInputError(f"theta0: expected {self.k} finite non-negative frequencies")
        if abs(arr.sum() - 1.0) > 1e-8:
            raise InvalidInputError(f"theta0: must sum to 1, sums to {arr.sum()!r}")
        if np.any(self.evaluate(arr)[1] <= 0):
            raise InvalidInputError(
                "theta0: gives probability 0 to some observed report; start from a point with "
                "theta0 > 0 on every category"
            )
        return arr / arr.sum()
