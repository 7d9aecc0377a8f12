"""One multinomial NUTS transition, compiled: the leapfrog step and the tree building.

Trajectories: doubling with multinomial sampling inside sub-trees, biased progressive sampling
between them, and the generalised no-U-turn criterion with the extra checks across merged
sub-trees (Stan >= 2.26, PyMC).  The recursion is run iteratively: completed sub-trees merge on
a stack like a binary counter, so a sub-tree stops at its first U-turn exactly as the recursive
version would.  An energy error above 1000 is a divergence.

One chain at a time, with no Python in the loop.  ``data`` is the tuple (rows (U, K),
counts (U,), alpha (K,), n + A, log normalising constant).  Uniform draws come from a
splitmix64 stream whose state (one uint64) is seeded from the chain's numpy Generator; normal
draws for the momenta are drawn by numpy and passed in.  Kernels avoid array expressions and
numba's Generator and LAPACK support to keep compilation short (they are cached on disk).
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

from bayesldp.bayes.hmc.densities import _logp_grad

_MAX_ENERGY_ERROR = 1000.0


_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)
_S30, _S27, _S31, _S11 = np.uint64(30), np.uint64(27), np.uint64(31), np.uint64(11)


@nb.njit(cache=True)
def _uniform(state):  # pragma: no cover - compiled
    """Next double in [0, 1) of the splitmix64 stream held in ``state[0]``."""
    s = state[0] + _GOLDEN
    state[0] = s
    s = (s ^ (s >> _S30)) * _MIX1
    s = (s ^ (s >> _S27)) * _MIX2
    s = s ^ (s >> _S31)
    return float(s >> _S11) * 1.1102230246251565e-16


@nb.njit(cache=True)
def _copy(dst, src):  # pragma: no cover - compiled
    for i in range(src.shape[0]):
        dst[i] = src[i]


@nb.njit(cache=True)
def _matvec(m, x, out):  # pragma: no cover - compiled
    """``out = m @ x``; a (1, d) ``m`` with ``d > 1`` is a diagonal matrix's diagonal."""
    d = x.shape[0]
    if m.shape[0] == 1 and d > 1:
        for i in range(d):
            out[i] = m[0, i] * x[i]
        return
    for i in range(d):
        acc = 0.0
        for j in range(d):
            acc += m[i, j] * x[j]
        out[i] = acc


@nb.njit(cache=True)
def _dot(a, b):  # pragma: no cover - compiled
    acc = 0.0
    for i in range(a.shape[0]):
        acc += a[i] * b[i]
    return acc


@nb.njit(cache=True)
def _dot_sum(a, b, c):  # pragma: no cover - compiled
    """``(a + b) . c``."""
    acc = 0.0
    for i in range(a.shape[0]):
        acc += (a[i] + b[i]) * c[i]
    return acc


@nb.njit(cache=True)
def _logaddexp(a, b):  # pragma: no cover - compiled
    if a > b:
        return a + math.log1p(math.exp(b - a))
    return b + math.log1p(math.exp(a - b))


@nb.njit(cache=True, nogil=True)
def _leapfrog(z, p, v, grad, eps, inv_metric, data, work):  # pragma: no cover - compiled
    half = 0.5 * eps
    d = z.shape[0]
    for i in range(d):
        p[i] += half * grad[i]
    _matvec(inv_metric, p, v)
    for i in range(d):
        z[i] += eps * v[i]
    lp = _logp_grad(z, data, work, grad)
    for i in range(d):
        p[i] += half * grad[i]
    _matvec(inv_metric, p, v)
    return lp


# slots of the per-transition work array ``ws`` (n_slots + 2 * (max_depth + 1) * 7, d)
_LZ, _LP, _LV, _LG, _RZ, _RP, _RV, _RG, _PSUM, _SZ, _SG, _CZ, _CP, _CV, _CG, _NEW = range(16)
_N_SLOTS = 16
# per stack level: psum, begin p, begin v, end p, end v, proposal z, proposal grad
_ST_PSUM, _ST_BP, _ST_BV, _ST_EP, _ST_EV, _ST_Z, _ST_G = range(7)


@nb.njit(cache=True, nogil=True)
def _transition(z, grad, lp, eps, inv_metric, mom_factor, max_depth, noise, rstate, data,
                ws, st_vec, st_sc, st_depth, work):  # pragma: no cover - compiled  # fmt: skip
    """One multinomial NUTS transition; ``z`` and ``grad`` are overwritten with the new state.

    Work arrays: ``ws`` (16, d); the sub-tree stack ``st_vec`` (max_depth + 1, 7, d),
    ``st_sc`` (max_depth + 1, 3) = (proposal logp, proposal energy, log weight), ``st_depth``.
    Returns (logp, energy, tree depth, leapfrog steps, diverged, mean Metropolis acceptance).
    """
    d = z.shape[0]
    lz, lpm, lv, lg = ws[_LZ], ws[_LP], ws[_LV], ws[_LG]
    rz, rpm, rv, rg = ws[_RZ], ws[_RP], ws[_RV], ws[_RG]
    psum, s_z, s_g = ws[_PSUM], ws[_SZ], ws[_SG]
    cz, cp, cv, cg, new_psum = ws[_CZ], ws[_CP], ws[_CV], ws[_CG], ws[_NEW]
    _matvec(mom_factor, noise, lpm)
    _matvec(inv_metric, lpm, lv)
    h0 = 0.5 * _dot(lpm, lv) - lp
    _copy(lz, z)
    _copy(lg, grad)
    _copy(rz, z)
    _copy(rpm, lpm)
    _copy(rv, lv)
    _copy(rg, grad)
    _copy(psum, lpm)
    _copy(s_z, z)
    _copy(s_g, grad)
    s_lp, s_en = lp, h0
    log_size = 0.0
    depth = 0
    n_steps = 0
    metro = 0.0
    diverging = False
    while depth < max_depth:
        forward = _uniform(rstate) < 0.5
        if forward:
            _copy(cz, rz)
            _copy(cp, rpm)
            _copy(cv, rv)
            _copy(cg, rg)
            step = eps
        else:
            _copy(cz, lz)
            _copy(cp, lpm)
            _copy(cv, lv)
            _copy(cg, lg)
            step = -eps
        # ---- a sub-tree of 2**depth steps; completed halves merge on a stack (binary counter)
        sp = 0
        valid = True
        for _ in range(1 << depth):
            clp = _leapfrog(cz, cp, cv, cg, step, inv_metric, data, work)
            energy = 0.5 * _dot(cp, cv) - clp
            delta = energy - h0
            n_steps += 1
            if not delta <= _MAX_ENERGY_ERROR:  # also catches NaN
                diverging = True
                valid = False
                break
            metro += 1.0 if delta <= 0.0 else math.exp(-delta)
            top = st_vec[sp]
            _copy(top[_ST_PSUM], cp)
            _copy(top[_ST_BP], cp)
            _copy(top[_ST_BV], cv)
            _copy(top[_ST_EP], cp)
            _copy(top[_ST_EV], cv)
            _copy(top[_ST_Z], cz)
            _copy(top[_ST_G], cg)
            st_sc[sp, 0] = clp
            st_sc[sp, 1] = energy
            st_sc[sp, 2] = -delta
            st_depth[sp] = 0
            sp += 1
            while sp >= 2 and st_depth[sp - 1] == st_depth[sp - 2]:
                ia, ib = sp - 2, sp - 1
                a, b = st_vec[ia], st_vec[ib]
                for i in range(d):
                    new_psum[i] = a[_ST_PSUM, i] + b[_ST_PSUM, i]
                turning = _dot(new_psum, a[_ST_BV]) <= 0.0 or _dot(new_psum, b[_ST_EV]) <= 0.0
                if st_depth[ia] > 0 and not turning:
                    turning = (
                        _dot_sum(a[_ST_PSUM], b[_ST_BP], a[_ST_BV]) <= 0.0
                        or _dot_sum(a[_ST_PSUM], b[_ST_BP], b[_ST_BV]) <= 0.0
                        or _dot_sum(a[_ST_EP], b[_ST_PSUM], a[_ST_EV]) <= 0.0
                        or _dot_sum(a[_ST_EP], b[_ST_PSUM], b[_ST_EV]) <= 0.0
                    )
                if turning:
                    valid = False
                    break
                merged = _logaddexp(st_sc[ia, 2], st_sc[ib, 2])
                if math.log(_uniform(rstate)) < st_sc[ib, 2] - merged:
                    _copy(a[_ST_Z], b[_ST_Z])
                    _copy(a[_ST_G], b[_ST_G])
                    st_sc[ia, 0] = st_sc[ib, 0]
                    st_sc[ia, 1] = st_sc[ib, 1]
                _copy(a[_ST_PSUM], new_psum)
                _copy(a[_ST_EP], b[_ST_EP])
                _copy(a[_ST_EV], b[_ST_EV])
                st_sc[ia, 2] = merged
                st_depth[ia] += 1
                sp -= 1
            if not valid:
                break
        if not valid:
            break
        depth += 1
        sub = st_vec[0]
        # ---- biased progressive sampling between the old trajectory and the new sub-tree
        if math.log(_uniform(rstate)) < st_sc[0, 2] - log_size:
            _copy(s_z, sub[_ST_Z])
            _copy(s_g, sub[_ST_G])
            s_lp, s_en = st_sc[0, 0], st_sc[0, 1]
        log_size = _logaddexp(log_size, st_sc[0, 2])
        for i in range(d):
            new_psum[i] = psum[i] + sub[_ST_PSUM, i]
        # time order: the left part (lm) then the right part (rm)
        if forward:
            lm_psum, lm_bv, lm_ep, lm_ev = psum, lv, rpm, rv
            rm_psum, rm_bp, rm_bv, rm_ev = sub[_ST_PSUM], sub[_ST_BP], sub[_ST_BV], sub[_ST_EV]
        else:
            lm_psum, lm_bv, lm_ep, lm_ev = sub[_ST_PSUM], sub[_ST_EV], sub[_ST_BP], sub[_ST_BV]
            rm_psum, rm_bp, rm_bv, rm_ev = psum, lpm, lv, rv
        turning = (
            _dot(new_psum, lm_bv) <= 0.0
            or _dot(new_psum, rm_ev) <= 0.0
            or _dot_sum(lm_psum, rm_bp, lm_bv) <= 0.0
            or _dot_sum(lm_psum, rm_bp, rm_bv) <= 0.0
            or _dot_sum(lm_ep, rm_psum, lm_ev) <= 0.0
            or _dot_sum(lm_ep, rm_psum, rm_ev) <= 0.0
        )
        if forward:
            _copy(rz, cz)
            _copy(rpm, cp)
            _copy(rv, cv)
            _copy(rg, cg)
        else:
            _copy(lz, cz)
            _copy(lpm, cp)
            _copy(lv, cv)
            _copy(lg, cg)
        _copy(psum, new_psum)
        if turning:
            break
    _copy(z, s_z)
    _copy(grad, s_g)
    return s_lp, s_en, depth, n_steps, diverging, metro / max(n_steps, 1)
