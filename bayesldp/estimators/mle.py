"""Maximum likelihood estimation of the frequencies from any tally.

Seed 000 (Lopuhaä-Zwakenberg, Li, Škorić, Li, "Improving frequency estimation under local
differential privacy"), eq. (22): the MLE maximises the concave log-likelihood

.. math:: \\ell(\\theta) = \\sum_u c_u \\log(L_u \\cdot \\theta)

over the probability simplex; its cost does not depend on ``n`` once the reports are tallied.
At the optimum the gradient ``g_x = sum_u c_u L[u, x] / (L_u . theta)`` satisfies the KKT
conditions ``g_x = n`` where ``theta_x > 0`` and ``g_x <= n`` where ``theta_x = 0``
(``theta . g = n`` everywhere, by Euler's identity: each ``L_u . theta`` is linear in theta).
For GRR the optimum has a closed form (seed 000, Appendix B): :func:`grr_mle`.

Solver: accelerated EM (SQUAREM, Varadhan and Roland 2008) from the uniform distribution to get
close, then an active-set Newton method on the face of the simplex
where ``theta > 0``: a Newton step in the ``sum = 0`` tangent space of the free coordinates,
a backtracking line search in which a coordinate that the step would take below 0 is set to 0,
and release of the zero coordinate that violates the KKT conditions most.  Every product with the
likelihood rows costs O(U K) (dense rows) or O(nnz) (support form, via a sparse matrix of the
support or of its complement, never the dense rows); the Newton system uses either the explicit
reduced Hessian (O(U |F|^2), when cheap) or conjugate gradients with Hessian-vector products
(O(U K) each).  EM alone converges slowly, sometimes sublinearly, where the optimum has zero
coordinates whose KKT multiplier is nearly 0 (measured on GRR, K = 100, n = 1e5, eps = 1: EM
needs 300 to 1,700 accelerated maps to reach a change of 1e-12 and ends 1e-7 from the optimum;
the Newton finish reaches the KKT point to 1e-16 in 3 to 6 steps).

Rows are handled *centred*: ``L[u] = a_u + C[u]`` with ``C[u] >= 0`` (``a_u = min_x L[u, x]``
for dense rows, ``min(lo, hi)`` in support form).  On the simplex
``L_u . theta = a_u + C_u . theta``, so gradients, Hessians and log-likelihood differences are
computed from ``C`` and ``log1p(C_u . theta / a_u)`` without the cancellation that ruins them
when ``epsilon`` is tiny (all rows then nearly constant).
"""

from __future__ import annotations

import contextlib
import functools
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np
from scipy import linalg, sparse

from bayesldp.errors import InvalidInputError, NotSupportedError
from bayesldp.estimators.oracle import check_tally
from bayesldp.estimators.result import Estimate
from bayesldp.tally import Tally

_CHUNK_ELEMENTS = 1 << 21  # float64 temporaries of at most 16 MB when densifying row blocks
_TINY = np.finfo(float).tiny
_DENSE_BUDGET = 500_000_000  # U * |F|^2 above which Newton systems use conjugate gradients
_SMALL_DENSE = 1 << 16  # support-form tallies with U * K up to this are multiplied densely
_SE_BUDGET = 1_000_000_000  # U * K^2 up to which "auto" computes observed-information SEs
_MAX_CHANNEL_OUTPUTS = 1 << 14  # finite channels up to this many reports give expected-info SEs


_F = TypeVar("_F", bound=Callable[..., Any])
_BLAS_CONTROLLER: list[Any] = []


def single_thread_blas(func: _F) -> _F:
    """Run ``func`` with single-threaded BLAS (threadpoolctl, a dependency of PyMC).

    The solvers make thousands of small matrix-vector products; with multi-threaded OpenBLAS on
    a busy machine each one waits for its worker threads (measured here: 12 ms instead of 0.04 ms
    for a dot product of length 17,815 on 2 shared cores).  One thread is never much slower.
    """

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if not _BLAS_CONTROLLER:
            try:
                from threadpoolctl import ThreadpoolController

                _BLAS_CONTROLLER.append(ThreadpoolController())
            except ImportError:  # pragma: no cover - threadpoolctl ships with pymc
                _BLAS_CONTROLLER.append(None)
        controller = _BLAS_CONTROLLER[0]
        limit = (
            controller.limit(limits=1, user_api="blas")
            if controller is not None
            else contextlib.nullcontext()
        )
        with limit:
            return func(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


# ============================================================================ likelihood rows
class RowLikelihood:
    """Centred likelihood rows of a tally with O(U K) products (internal).

    ``L[u, x] = offset[u] + C[u, x]`` with ``C >= 0``: ``offset = min_x L[u, x]`` for dense rows,
    ``min(lo, hi)`` in support form.  Dense tallies store ``C``; support-form tallies store a CSR
    matrix of the support (or of its complement when that is sparser), and a dense float ``C``
    only when ``U K <= 65,536`` (GRR's K one-hot rows), where sparse products cost more.
    """

    def __init__(self, tally: Tally) -> None:
        self.counts = tally.counts.astype(float)
        self.n = float(self.counts.sum())
        self.k = tally.k
        self.n_rows = tally.n_rows
        if tally.is_support_form:
            lo, hi = tally.levels
            support = tally.support
            self._support = support
            self._invert = hi < lo  # then C = |hi - lo| * (1 - support)
            self._delta = abs(hi - lo)
            self.offset = np.full(self.n_rows, min(lo, hi))
            row_nnz = support.sum(axis=1)
            if self._invert:
                row_nnz = self.k - row_nnz
            self.rowmax = self._delta * (row_nnz > 0)
            if support.size <= _SMALL_DENSE:
                # small tallies (GRR: K one-hot rows): a dense float copy is cheaper to multiply
                # than a sparse matrix, whose per-call overhead dominates at this size
                mask = ~support if self._invert else support
                self._dense = self._delta * mask.astype(float)
            else:
                self._complement = row_nnz.sum() > 0.5 * support.size
                stored = support if self._invert == self._complement else ~support
                self._csr = sparse.csr_matrix(stored, dtype=float)
                self._csc_t = self._csr.T.tocsr()
                self._dense = None
        else:
            rows = tally.rows
            self.offset = rows.min(axis=1)
            self._dense = rows - self.offset[:, None]
            self.rowmax = self._dense.max(axis=1)
            self._support = None
        positive = self.offset > 0
        self._pos = positive
        self._all_pos = bool(positive.all())
        self._inv_offset = np.where(positive, 1.0 / np.where(positive, self.offset, 1.0), 0.0)
        log_offset = np.log(np.where(positive, self.offset, 1.0))
        self.const = float(self.counts[positive] @ log_offset[positive])
        # a scalar offset (GRR, unary encoding, hashing) saves a vector operation per product
        single = self.n_rows > 0 and float(np.ptp(self.offset)) == 0.0
        self._scalar_offset = float(self.offset[0]) if single else None

    # ---------------------------------------------------------------- products
    def matvec(self, v: np.ndarray) -> np.ndarray:
        """``C @ v`` for v of shape (K,)."""
        if self._dense is not None:
            return self._dense @ v
        t = self._csr @ v
        if self._complement:
            t = v.sum() - t
        return self._delta * t

    def rmatvec(self, w: np.ndarray) -> np.ndarray:
        """``C.T @ w`` for w of shape (U,)."""
        if self._dense is not None:
            return w @ self._dense
        t = self._csc_t @ w
        if self._complement:
            t = w.sum() - t
        return self._delta * t

    def sq_rmatvec(self, w: np.ndarray) -> np.ndarray:
        """``(C * C).T @ w``."""
        if self._support is not None:  # C is delta times a 0/1 matrix
            return self._delta * self.rmatvec(w)
        out = np.zeros(self.k)
        for sl in self._row_blocks(self.k):
            block = self._dense[sl]
            out += (block * block).T @ w[sl]
        return out

    def gram(self, w: np.ndarray, idx: np.ndarray) -> np.ndarray:
        """``C[:, idx].T @ diag(w) @ C[:, idx]``, built block by block (O(U |idx|^2))."""
        m = idx.shape[0]
        out = np.zeros((m, m))
        for sl in self._row_blocks(m):
            if self._dense is not None:
                block = self._dense[sl][:, idx]
            else:
                sub = self._support[sl][:, idx]
                block = (~sub if self._invert else sub).astype(float)
            out += (block * w[sl, None]).T @ block
        if self._dense is None:
            out *= self._delta**2
        return out

    def _row_blocks(self, width: int):
        step = max(1, _CHUNK_ELEMENTS // max(width, 1))
        for start in range(0, self.n_rows, step):
            yield slice(start, min(start + step, self.n_rows))

    # ---------------------------------------------------------------- likelihood
    def evaluate(self, theta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(C theta, L theta)``."""
        r = self.matvec(theta)
        if self._scalar_offset is not None:
            return r, r + self._scalar_offset * theta.sum()
        return r, self.offset * theta.sum() + r

    def _terms(self, r: np.ndarray) -> np.ndarray:
        if self._all_pos:
            return np.log1p(r * self._inv_offset)
        terms = np.empty_like(r)
        pos = self._pos
        terms[pos] = np.log1p(r[pos] * self._inv_offset[pos])
        with np.errstate(divide="ignore"):
            terms[~pos] = np.log(r[~pos])
        return terms

    def loglik_rel(self, r: np.ndarray, lth: np.ndarray) -> float:
        """``ell(theta) - const`` (``-inf`` if an observed report gets probability 0)."""
        if lth.min() <= 0:
            return -math.inf
        return float(self.counts @ self._terms(r))

    def loglik_scale(self, r: np.ndarray) -> float:
        """``sum_u c_u |term_u|``: the magnitude that sets the rounding error of loglik_rel."""
        return float(self.counts @ np.abs(self._terms(r)))

    def em_map(self, theta: np.ndarray, lth: np.ndarray) -> np.ndarray:
        """One EM / iterative Bayesian update: ``theta_x <- theta_x g_x / n``."""
        w = self.counts / lth
        g = self.rmatvec(w)
        g += self._scalar_offset * w.sum() if self._scalar_offset is not None else w @ self.offset
        g *= theta
        g *= 1.0 / g.sum()
        return g

    def kkt(self, theta: np.ndarray, lth: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
        """Scaled KKT violation, the centred gradient ``C.T (c / L theta)`` and ``g - lambda``.

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


# ============================================================================ EM engine
@dataclass
class EMRun:
    """Outcome of :func:`run_em` (internal)."""

    theta: np.ndarray
    maps: int
    trace: list[float]
    converged: bool
    residual: float
    cycles: int = 0
    fallbacks: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


def _tie(theta: np.ndarray, pool_of: np.ndarray | None, n_pools: int) -> np.ndarray:
    """Replace each pool's members by their mean (EM for the reduced mixture, see em_mr)."""
    if pool_of is None or n_pools == 0:
        return theta
    members = pool_of >= 0
    sums = np.bincount(pool_of[members], weights=theta[members], minlength=n_pools)
    sizes = np.bincount(pool_of[members], minlength=n_pools)
    out = theta.copy()
    out[members] = (sums / sizes)[pool_of[members]]
    return out


def run_em(
    lik: RowLikelihood,
    theta0: np.ndarray,
    *,
    tol: float,
    max_iter: int,
    accelerate: bool,
    pool_of: np.ndarray | None = None,
    n_pools: int = 0,
) -> EMRun:
    """EM on a tally, plain or SQUAREM-accelerated, with a non-decreasing log-likelihood.

    Stops when one EM map moves no coordinate by more than ``tol``
    (``max_x |F(theta)_x - theta_x| < tol``, the criterion of the iterative Bayesian update in
    multi-freq-ldpy) and returns ``F(theta)``, or after ``max_iter`` evaluations of the map.

    SQUAREM, scheme S3 (Varadhan and Roland, Scand. J. Statist. 2008): with
    ``r = F(theta) - theta`` and ``v = F(F(theta)) - F(theta) - r``, the point
    ``theta' = theta - 2 a r + a^2 v``, ``a = clip(-|r|/|v|, -a_max, -1)``, is moved toward
    ``a = -1`` (which gives ``F(F(theta))``) until it is positive, then stabilised by one EM map.
    It is accepted if its log-likelihood is not below the current one (up to the rounding of the
    log-likelihood, 1e-13 of the magnitude of its terms), else ``F(F(theta))`` is taken.  The step
    bound ``a_max`` starts at 1, is multiplied by 4 after an accepted step that reached it and
    reset to a quarter of a rejected step (the step-length control of the SQUAREM R package,
    without which long extrapolations along slowly converging directions are rejected forever).
    """

    def emap(theta: np.ndarray, lth: np.ndarray) -> np.ndarray:
        return _tie(lik.em_map(theta, lth), pool_of, n_pools)

    theta = theta0
    r, lth = lik.evaluate(theta)
    ll = lik.loglik_rel(r, lth)
    trace = [ll]
    maps = cycles = fallbacks = 0
    residual = math.inf
    step_max = 1.0
    live = theta > 0
    has_zero = not live.all()
    while maps < max_iter:
        th1 = emap(theta, lth)
        maps += 1
        diff = th1 - theta
        residual = max(float(diff.max()), -float(diff.min()))
        r1, lth1 = lik.evaluate(th1)
        if residual < tol or not accelerate or maps >= max_iter:
            theta, lth = th1, lth1
            ll = lik.loglik_rel(r1, lth1)
            trace.append(ll)
            if residual < tol:
                return EMRun(theta, maps, trace, True, residual, cycles, fallbacks)
            continue
        th2 = emap(th1, lth1)
        maps += 1
        cycles += 1
        curv = th2 - th1
        curv -= diff
        norm_v2 = float(curv @ curv)
        alpha = -1.0
        if norm_v2 > 0:
            alpha = max(min(-math.sqrt(float(diff @ diff) / norm_v2), -1.0), -step_max)
        used = alpha
        new = th2
        if alpha < -1.0 and maps < max_iter:
            cand = None
            for _ in range(30):
                trial = theta - (2.0 * alpha) * diff + (alpha * alpha) * curv
                if has_zero:
                    positive = bool(np.all(trial[live] > 0))
                    trial[~live] = 0.0
                else:
                    positive = trial.min() > 0
                if positive:
                    cand = trial
                    break
                alpha = 0.5 * (alpha - 1.0)
                if alpha > -1.0 - 1e-6:
                    break
            if cand is not None:
                cand *= 1.0 / cand.sum()
                _, lthc = lik.evaluate(cand)
                if lthc.min() > 0:
                    new = emap(cand, lthc)
                    maps += 1
        rn, lthn = lik.evaluate(new)
        lln = lik.loglik_rel(rn, lthn)
        if new is not th2 and not (lln >= ll or lln >= ll - 1e-13 * lik.loglik_scale(rn)):
            fallbacks += 1
            step_max = max(1.0, -used / 4.0)
            new = th2
            rn, lthn = lik.evaluate(new)
            lln = lik.loglik_rel(rn, lthn)
        elif used <= -step_max:
            step_max *= 4.0
        theta, lth, ll = new, lthn, lln
        trace.append(ll)
    return EMRun(theta, maps, trace, False, residual, cycles, fallbacks)


# ============================================================================ Newton polish
def _reduced_newton(
    lik: RowLikelihood,
    theta: np.ndarray,
    free: np.ndarray,
    gt: np.ndarray,
    lth: np.ndarray,
    hessian: str,
) -> tuple[np.ndarray, float]:
    """Newton direction on the free face (``sum d = 0``, ``d = 0`` off ``free``).

    Returns the direction ``d`` and the predicted increase ``gr . s``.
    """
    idx = np.flatnonzero(free)
    d = np.zeros(lik.k)
    if idx.shape[0] < 2:
        return d, 0.0
    jpos = int(np.argmax(theta[idx]))
    j = idx[jpos]
    others = np.delete(idx, jpos)
    gr = gt[others] - gt[j]
    w2 = lik.counts / (lth * lth)
    m = idx.shape[0]
    use_dense = hessian == "dense" or (hessian == "auto" and lik.n_rows * m * m <= _DENSE_BUDGET)
    if use_dense:
        a = lik.gram(w2, idx)
        o = np.delete(np.arange(m), jpos)
        h = a[np.ix_(o, o)] - a[o, jpos][:, None] - a[jpos, o][None, :] + a[jpos, jpos]
        s = _solve_psd(h, gr)
    else:
        s = _solve_cg(lik, w2, others, j, gr)
    d[others] = s
    d[j] = -s.sum()
    return d, float(gr @ s)


def _solve_psd(h: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    try:
        factor = linalg.cho_factor(h, check_finite=False)
        s = linalg.cho_solve(factor, rhs, check_finite=False)
        if np.all(np.isfinite(s)):
            return s
    except linalg.LinAlgError:
        pass
    evals, evecs = np.linalg.eigh(h)
    floor = max(float(evals.max()), _TINY) * 1e-12
    return evecs @ ((evecs.T @ rhs) / np.maximum(evals, floor))


def _solve_cg(
    lik: RowLikelihood, w2: np.ndarray, others: np.ndarray, j: int, gr: np.ndarray
) -> np.ndarray:
    """Preconditioned conjugate gradients on the reduced Hessian, O(U K) per product."""
    k = lik.k

    def hv(v: np.ndarray) -> np.ndarray:
        d = np.zeros(k)
        d[others] = v
        d[j] = -v.sum()
        ad = lik.rmatvec(w2 * lik.matvec(d))
        return ad[others] - ad[j]

    ej = np.zeros(k)
    ej[j] = 1.0
    col_j = lik.rmatvec(w2 * lik.matvec(ej))
    diag = lik.sq_rmatvec(w2)[others] - 2.0 * col_j[others] + col_j[j]
    diag = np.maximum(diag, max(float(diag.max(initial=0.0)), _TINY) * 1e-12)
    x = np.zeros_like(gr)
    res = gr.copy()
    z = res / diag
    p = z.copy()
    rz = float(res @ z)
    target = 1e-10 * float(np.linalg.norm(gr))
    for _ in range(min(2 * gr.shape[0] + 10, 1000)):
        hp = hv(p)
        curv = float(p @ hp)
        if curv <= 0:
            break
        step = rz / curv
        x += step * p
        res -= step * hp
        if float(np.linalg.norm(res)) <= target:
            break
        z = res / diag
        rz_new = float(res @ z)
        p = z + (rz_new / rz) * p
        rz = rz_new
    if not np.any(x):
        x = gr / diag
    return x


def _line_search(
    lik: RowLikelihood,
    theta: np.ndarray,
    direction: np.ndarray,
    gt: np.ndarray,
    ll: float,
    ll_scale: float,
    *,
    clip: bool,
) -> tuple[np.ndarray, np.ndarray, float, float] | None:
    """Backtracking (Armijo) along ``theta + a d``; coordinates pushed below 0 are set to 0."""
    floor = 1e-13 * ll_scale
    alpha = 1.0
    for _ in range(60):
        cand = theta + alpha * direction
        if cand.min() < 0:
            if not clip:
                alpha *= 0.5
                continue
            cand = np.maximum(cand, 0.0)
        cand /= cand.sum()
        r, lth = lik.evaluate(cand)
        llc = lik.loglik_rel(r, lth)
        predicted = float(gt @ (cand - theta))
        if llc >= ll + 1e-4 * predicted or (predicted <= floor and llc >= ll - floor):
            return cand, lth, llc, lik.loglik_scale(r)
        alpha *= 0.5
    return None


def newton_polish(
    lik: RowLikelihood,
    theta: np.ndarray,
    *,
    tol: float,
    max_iter: int,
    hessian: str,
) -> tuple[np.ndarray, int, list[float], float, bool]:
    """Active-set Newton iterations to the KKT point (internal, see module docstring)."""
    r, lth = lik.evaluate(theta)
    ll, ll_scale = lik.loglik_rel(r, lth), lik.loglik_scale(r)
    trace: list[float] = []
    kkt = math.inf
    for it in range(max_iter + 1):
        kkt, gt, dev = lik.kkt(theta, lth)
        if kkt <= tol or it == max_iter:
            return theta, it, trace, kkt, kkt <= tol
        free = theta > 0
        off = ~free
        released = -1
        if off.any():
            v_off = float(dev[off].max())
            v_free = float(np.abs(dev[free]).max())
            if v_off > 0 and v_off >= v_free:
                released = int(np.flatnonzero(off)[np.argmax(dev[off])])
                free = free.copy()
                free[released] = True
        direction, predicted = _reduced_newton(lik, theta, free, gt, lth, hessian)
        step = None
        if released >= 0 and direction[released] <= 0:
            # the quadratic model disagrees with the first-order violation: move toward the
            # violating vertex instead (a Frank-Wolfe step, always an ascent direction)
            fw = -theta.copy()
            fw[released] += 1.0
            step = _line_search(lik, theta, fw, gt, ll, ll_scale, clip=False)
        elif predicted > 0:
            step = _line_search(lik, theta, direction, gt, ll, ll_scale, clip=True)
        if step is None:
            return theta, it, trace, kkt, kkt <= tol
        theta, lth, ll, ll_scale = step
        trace.append(ll)
    return theta, max_iter, trace, kkt, kkt <= tol


# ============================================================================ GRR closed form
def _grr_params(tally: Tally) -> tuple[float, float, np.ndarray] | None:
    from bayesldp.mechanisms.grr import GRR

    mech = tally.mechanism
    if not isinstance(mech, GRR):
        return None
    e = math.exp(mech.epsilon)
    q = 1.0 / (e + mech.k - 1)
    p_minus_q = math.expm1(mech.epsilon) / (e + mech.k - 1)
    return q, p_minus_q, np.asarray(tally.stat, dtype=float)


def grr_mle(tally: Tally) -> np.ndarray:
    """Closed-form MLE for a GRR tally (seed 000, Appendix B, Algorithm 1).

    With ``phi`` the observed report frequencies sorted ascending: start from ``s = 1``,
    ``k = 0``; while ``q s > (1 - k q) phi_(k+1)`` drop that category (its estimate is 0),
    ``s -= phi_(k+1)``, ``k += 1``; the remaining categories get
    ``theta_x = ((1 - k q) phi_x - s q) / (s (p - q))``.  O(K log K).

    Raises
    ------
    NotSupportedError
        If the tally does not come from a :class:`~bayesldp.GRR` mechanism.
    """
    params = _grr_params(check_tally(tally))
    if params is None:
        raise NotSupportedError(
            f"grr_mle: the closed form needs a GRR tally, got one from {tally.mechanism!r}; "
            "use mle(tally) for any mechanism"
        )
    q, p_minus_q, counts = params
    k = counts.shape[0]
    phi = counts / counts.sum()
    order = np.argsort(phi, kind="stable")
    s = 1.0
    dropped = 0
    while dropped < k - 1 and q * s > (1.0 - dropped * q) * phi[order[dropped]]:
        s -= phi[order[dropped]]
        dropped += 1
    keep = order[dropped:]
    s = float(phi[keep].sum())
    theta = np.zeros(k)
    theta[keep] = ((1.0 - dropped * q) * phi[keep] - s * q) / (s * p_minus_q)
    theta = np.maximum(theta, 0.0)
    return theta / theta.sum()


# ============================================================================ public MLE
def _check_theta0(theta0: Any, lik: RowLikelihood) -> np.ndarray:
    if theta0 is None:
        return np.full(lik.k, 1.0 / lik.k)
    arr = np.asarray(theta0, dtype=float)
    if arr.shape != (lik.k,) or not np.all(np.isfinite(arr)) or arr.min() < 0:
        raise InvalidInputError(f"theta0: expected {lik.k} finite non-negative frequencies")
    if abs(arr.sum() - 1.0) > 1e-8:
        raise InvalidInputError(f"theta0: must sum to 1, sums to {arr.sum()!r}")
    _, lth = lik.evaluate(arr)
    if np.any(lth <= 0):
        raise InvalidInputError(
            "theta0: gives probability 0 to some observed report; start from a point with "
            "theta0 > 0 on every category"
        )
    return arr / arr.sum()


def _check_positive(value: Any, name: str, *, integer: bool = False) -> Any:
    kinds = (int,) if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, kinds) or not value > 0:
        what = "a positive integer" if integer else "a positive number"
        raise InvalidInputError(f"{name}: expected {what}, got {value!r}")
    return value


def _check_choice(value: Any, name: str, choices: tuple) -> Any:
    if value not in choices:
        raise InvalidInputError(f"{name}: expected one of {choices}, got {value!r}")
    return value


def _finite_channel(tally: Tally) -> np.ndarray | None:
    from bayesldp.mechanisms.base import FiniteChannelMechanism

    mech = tally.mechanism
    if isinstance(mech, FiniteChannelMechanism) and mech.n_outputs <= _MAX_CHANNEL_OUTPUTS:
        return np.asarray(mech.channel, dtype=float)
    return None


def wald_std_errors(
    tally: Tally, theta: np.ndarray, lik: RowLikelihood | None = None
) -> tuple[np.ndarray | None, str]:
    """Standard errors of the MLE from the Fisher information (internal).

    Uses the expected information of the mechanism's finite channel when it has one (defined
    even on the boundary of the simplex), else the observed information of the tally; both in
    the ``K - 1`` free coordinates, mapped back to all ``K`` (``theta_K = 1 - sum``).  Returns
    ``(None, reason)`` when the information is singular (theta not identifiable).
    """
    from bayesldp.bounds import cramer_rao, observed_information

    channel = _finite_channel(tally)
    try:
        if channel is not None:
            cov = cramer_rao(channel, theta, tally.n)
            kind = "expected"
        else:
            info = observed_information(tally, theta, lik=lik)
            cov = _full_covariance(np.linalg.inv(_checked_info(info)))
            kind = "observed"
    except InvalidInputError as err:
        return None, f"not available: {err}"
    var = np.maximum(np.diag(cov), 0.0)
    if not np.all(np.isfinite(var)):
        return None, "not available: non-finite variances"
    return np.sqrt(var), kind


def _checked_info(info: np.ndarray) -> np.ndarray:
    evals = np.linalg.eigvalsh(info)
    if evals.min() <= 1e-12 * max(evals.max(), _TINY):
        raise InvalidInputError("the Fisher information is singular (theta is not identifiable)")
    return info


def _full_covariance(cov_reduced: np.ndarray) -> np.ndarray:
    k1 = cov_reduced.shape[0]
    lift = np.vstack([np.eye(k1), -np.ones((1, k1))])
    return lift @ cov_reduced @ lift.T


@single_thread_blas
def mle(
    tally: Tally,
    *,
    solver: str = "auto",
    tol: float = 1e-12,
    max_iter: int = 200,
    hessian: str = "auto",
    theta0: Any = None,
    std_errors: bool | str = "auto",
) -> Estimate:
    """Maximum likelihood estimate of the frequencies (seed 000, eq. 22), for any tally.

    Parameters
    ----------
    tally : Tally
        Reports of any mechanism (also mixed-family tallies).
    solver : {"auto", "closed_form", "newton"}
        ``"closed_form"``: :func:`grr_mle` (GRR tallies only); ``"newton"``: accelerated EM then
        active-set Newton (any tally); ``"auto"`` picks the closed form for GRR.
    tol : float
        KKT tolerance: converged when ``|g_x - n| <= tol * n * s`` on the support and
        ``g_x - n <= tol * n * s`` off it, ``s`` the mean slope of one report's log-likelihood
        (see :meth:`RowLikelihood.kkt`); about ``tol / s`` in units of theta.
    max_iter : int
        Maximum number of Newton iterations (the EM warm start uses at most 50 EM maps).
    hessian : {"auto", "dense", "cg"}
        Newton systems by the explicit reduced Hessian or by conjugate gradients.
    theta0 : array, optional
        Starting point of the EM warm start (default uniform).
    std_errors : bool or "auto"
        Compute Wald standard errors: from the expected Fisher information of the channel when
        the mechanism is a finite-channel one (GRR, RRRR, Hadamard response), else from the
        observed information of the tally (O(U K^2)); ``"auto"`` skips the latter when
        ``U K^2 > 1e9``.  None when the information is singular.

    Returns
    -------
    Estimate
        ``iterations`` counts EM maps plus Newton steps; ``details`` holds ``kkt_violation``,
        ``em_maps``, ``newton_steps``, ``solver`` and ``std_error_kind``.
    """
    tally = check_tally(tally)
    _check_choice(solver, "solver", ("auto", "closed_form", "newton"))
    _check_choice(hessian, "hessian", ("auto", "dense", "cg"))
    _check_choice(std_errors, "std_errors", (True, False, "auto"))
    _check_positive(tol, "tol")
    _check_positive(max_iter, "max_iter", integer=True)
    lik = RowLikelihood(tally)
    if solver == "auto":
        solver = "closed_form" if _grr_params(tally) is not None else "newton"
    details: dict[str, Any] = {"solver": solver}
    if solver == "closed_form":
        theta = grr_mle(tally)
        r, lth = lik.evaluate(theta)
        trace = [lik.loglik_rel(r, lth)]
        iterations, converged = None, True
        details["kkt_violation"] = lik.kkt(theta, lth)[0]
    else:
        start = _check_theta0(theta0, lik)
        # a short accelerated-EM warm start (measured: 1e-9 / 500 maps cost up to 8x the time
        # of this setting for the same Newton step count)
        warm = run_em(lik, start, tol=1e-5, max_iter=50, accelerate=True)
        theta, steps, newton_trace, kkt, converged = newton_polish(
            lik, warm.theta, tol=tol, max_iter=max_iter, hessian=hessian
        )
        trace = warm.trace + newton_trace
        iterations = warm.maps + steps
        details.update(kkt_violation=kkt, em_maps=warm.maps, newton_steps=steps)
    se = None
    want_se = std_errors is True or (
        std_errors == "auto"
        and (_finite_channel(tally) is not None or lik.n_rows * lik.k * lik.k <= _SE_BUDGET)
    )
    if want_se:
        se, details["std_error_kind"] = wald_std_errors(tally, theta, lik)
    elif std_errors is False:
        details["std_error_kind"] = "not requested"
    else:
        details["std_error_kind"] = "skipped (observed information costs U K^2; std_errors=True)"
    return Estimate(
        theta,
        se,
        "mle",
        on_simplex=True,
        iterations=iterations,
        loglik_trace=np.asarray(trace) + lik.const,
        converged=converged,
        details=details,
    )
