"""Compiled (numba) kernels of the AdOBEst-LDP survey loop (internal).

AdOBEst-LDP: Aydın and Yıldırım, "Bayesian Frequency Estimation Under Local Differential Privacy
With an Adaptive Randomized Response Mechanism", ACM TKDD 2025.

Everything the per-user loop of :class:`bayesldp.adaptive.survey.AdaptiveSurvey` does is here:
subset selection (sorting a posterior draw, scoring the K top-k candidates with one of the six
utilities, or the semi-/non-adaptive rules), the RRRR perturbation of one user, the likelihood
row of a report and one batch of the loop; the paper's SGLD updates are in
:mod:`bayesldp.adaptive.sgld`.  The numpy reference implementations are
:mod:`bayesldp.adaptive.selection`, :mod:`bayesldp.adaptive.utilities` and
:meth:`bayesldp.RRRR.perturb`; tests check that these kernels agree with them (same selections,
same law of the reports, bit-identical likelihood rows).

Utilities in O(K) per candidate.  With ``theta`` sorted decreasingly (``ts``), the candidate
``S = top s`` (``m = K - s``) and the RRRR constants ``k1 = a/(a+s)``, ``o1 = 1/(a+s)``,
``k2 = b/(b+m-1)``, ``o2 = 1/(b+m-1)`` (``a = e^eps1``, ``b = e^eps2``; see
:func:`bayesldp.mechanisms.rrrr.rrrr_channel`), a column ``y`` of the channel takes at most three
values, so with ``T_S = sum_{x in S} theta_x``, ``T_C = sum_{x notin S} theta_x``:

* ``p_Y(y) = o1 (T - theta_y) + k1 theta_y`` for ``y in S`` (``T = sum theta``) and
  ``T_S o1/m + k1 o2 (T_C - theta_y) + k1 k2 theta_y`` otherwise;
* U2, U3, U4, U5 are then sums over ``y`` of closed forms (O(K) per candidate), U6 is
  ``k1 (T_S + k2 T_C)``.
* U1 (Fisher) is O(1) per candidate.  The channel is ``P = Delta + E G E^T``,
  ``E = [1_S, 1_C]``,
  ``Delta = diag(d_S on S, d_C on C)`` (``d_S = k1 - o1``, ``d_C = k1 (k2 - o2)``) and
  ``G = [[o1, o1/m], [o1, k1 o2]]``, so ``Q = P^{-1} = Delta^{-1} + E H E^T`` with
  ``H = -(D + G N)^{-1} G D^{-1}`` (``D = diag(d_S, d_C)``, ``N = diag(s, m)``).  For an
  invertible channel the inverse Fisher information of the first K-1 coordinates is the
  corresponding block of ``Sigma = P^{-T} (diag p - p p^T) P^{-1} = Q^T diag(p) Q - theta theta^T``
  (the MLE ``P^{-T} p_hat`` of an affine reparametrisation), and ``sum_y p_y Q[y, i]^2`` takes one
  closed form per block, so ``trace`` needs only ``T_S``, ``P_S = sum_{y in S} p_Y(y)`` and the
  dropped coordinate (category K-1).  A singular channel (``eps2 = 0`` with ``m >= 2``) scores
  ``-inf``, as in :func:`bayesldp.adaptive.utilities.fisher`.

Random numbers.  The kernels use their own xoshiro256** generator (Blackman and Vigna, 2018) with
an explicit 4-word state, not numba's global per-thread ``np.random`` state (which cannot be
saved and which any other compiled code in the process may advance).  Every batch ``b`` of a
survey gets fresh streams, seeded by SplitMix64 from ``(key0, key1, b, stream)`` where the two key
words come from the survey's ``numpy.random.SeedSequence``: stream 0 perturbs the batch's users,
stream 1 drives the SGLD updates after the batch, streams ``2 + c`` the final chains.  A resumed
survey therefore reproduces the same random numbers from the batch index alone, without saving any
generator internals, and results do not depend on how batches are grouped into kernel calls.
The map ``(b, stream) -> seed`` is a bijection followed by SplitMix64, so distinct streams never
share a seed.  Uniform doubles are ``(u64 >> 11) 2^-53``; integers in ``[0, n)`` are
``floor(u n)`` (bias below ``n 2^-53``); normals come from Marsaglia's polar method.

Bit-reproducibility: no ``fastmath``; the only reductions over categories are explicit loops with
a fixed association order, so results are the same for any SIMD width (the libm ``log``/``sqrt``
of the platform are used).
"""

from __future__ import annotations

import numpy as np
from numba import njit

# utility / rule codes shared with survey.py
FISHER, ENTROPY, EXPECTED_TV, TV, MSE, HONEST, SEMI_ADAPTIVE, NON_ADAPTIVE, LOOKAHEAD = range(9)
RULE_CODES = {
    "fisher": FISHER,
    "entropy": ENTROPY,
    "expected_tv": EXPECTED_TV,
    "tv": TV,
    "mse": MSE,
    "honest": HONEST,
    "semi_adaptive": SEMI_ADAPTIVE,
    "non_adaptive": NON_ADAPTIVE,
    "lookahead": LOOKAHEAD,
}

#: scores within this relative distance of the best count as ties (the smallest ``|S|`` wins)
TIE_RTOL = 1e-12

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_INV53 = 1.0 / 9007199254740992.0  # 2^-53


# ------------------------------------------------------------------------------------- RNG
@njit(cache=True)
def _mix64(z):  # pragma: no cover - compiled
    z = (z ^ (z >> np.uint64(30))) * _M1
    z = (z ^ (z >> np.uint64(27))) * _M2
    return z ^ (z >> np.uint64(31))


@njit(cache=True)
def seed_stream(state, spare, key0, key1, batch, stream):  # pragma: no cover - compiled
    """Seed a xoshiro256** state for ``(batch, stream)`` (stream < 65536)."""
    word = (np.uint64(batch) << np.uint64(16)) | np.uint64(stream)
    x = _mix64(key0 + _mix64(key1 ^ word))
    for i in range(4):
        x = x + _GOLDEN
        state[i] = _mix64(x)
    spare[0] = 0.0
    spare[1] = 0.0


@njit(cache=True)
def derive_seed(key0, key1, batch, stream):  # pragma: no cover - compiled
    """A 63-bit integer seed for ``(batch, stream)`` (for code that takes an int seed)."""
    word = (np.uint64(batch) << np.uint64(16)) | np.uint64(stream)
    return np.int64(_mix64(key0 + _mix64(key1 ^ word)) >> np.uint64(1))


@njit(cache=True)
def _rotl(x, k):  # pragma: no cover - compiled
    return (x << np.uint64(k)) | (x >> np.uint64(64 - k))


@njit(cache=True)
def _next(s):  # pragma: no cover - compiled
    result = _rotl(s[1] * np.uint64(5), 7) * np.uint64(9)
    t = s[1] << np.uint64(17)
    s[2] ^= s[0]
    s[3] ^= s[1]
    s[1] ^= s[2]
    s[0] ^= s[3]
    s[2] ^= t
    s[3] = _rotl(s[3], 45)
    return result


@njit(cache=True)
def _uniform(s):  # pragma: no cover - compiled
    return np.float64(_next(s) >> np.uint64(11)) * _INV53


@njit(cache=True)
def _randint(s, n):  # pragma: no cover - compiled
    r = np.int64(_uniform(s) * n)
    if r >= n:
        r = n - 1
    return r


@njit(cache=True)
def _normal(s, spare):  # pragma: no cover - compiled
    if spare[0] != 0.0:
        spare[0] = 0.0
        return spare[1]
    while True:
        u = 2.0 * _uniform(s) - 1.0
        v = 2.0 * _uniform(s) - 1.0
        r2 = u * u + v * v
        if 0.0 < r2 < 1.0:
            f = np.sqrt(-2.0 * np.log(r2) / r2)
            spare[0] = 1.0
            spare[1] = v * f
            return u * f


@njit(cache=True)
def stream_draws(key0, key1, batch, stream, n, normal):  # pragma: no cover - compiled
    """``n`` uniforms, or with ``normal`` standard normals, of one stream (for tests of the
    generator)."""
    st = np.empty(4, np.uint64)
    sp = np.zeros(2)
    seed_stream(st, sp, key0, key1, batch, stream)
    out = np.empty(n)
    for i in range(n):
        out[i] = _normal(st, sp) if normal else _uniform(st)
    return out


# ------------------------------------------------------------------------------ selection
@njit(cache=True)
def normalise(phi, theta):  # pragma: no cover - compiled
    """``theta = phi / sum(phi)`` (sequential sum)."""
    total = 0.0
    for i in range(phi.shape[0]):
        total += phi[i]
    for i in range(phi.shape[0]):
        theta[i] = phi[i] / total


@njit(cache=True)
def sort_desc(theta, order, rank):  # pragma: no cover - compiled
    """Stable decreasing order of ``theta`` (ties: smaller index first), warm-started.

    ``order`` must hold a permutation (e.g. the previous order); insertion sort is O(K) on the
    nearly sorted orders of consecutive posterior draws.  The result is unique (a strict total
    order on (-theta_i, i)), so it equals ``np.argsort(-theta, kind="stable")``.
    """
    k = theta.shape[0]
    for i in range(1, k):
        j = order[i]
        v = theta[j]
        p = i - 1
        while p >= 0:
            q = order[p]
            w = theta[q]
            if w < v or (w == v and q > j):
                order[p + 1] = q
                p -= 1
            else:
                break
        order[p + 1] = j
    for i in range(k):
        rank[order[i]] = i


@njit(cache=True)
def _fisher_score(
    s, k, k1, o1, k2, o2, tot, t_s, t_c, q_all, th_last, last_in_s
):  # pragma: no cover
    m = k - s
    d_s = k1 - o1
    d_c = k1 * (k2 - o2)
    if m >= 2 and not d_c > 0.0:
        return -np.inf
    # p_Y summed over S and over C
    p_s = s * o1 * tot + d_s * t_s
    p_c = t_s * o1 + k1 * t_c * ((m - 1) * o2 + k2)
    # M = D + G N, H = -M^{-1} G D^{-1}
    m00 = d_s + s * o1
    m01 = o1
    m10 = s * o1
    m11 = d_c + m * k1 * o2
    det = m00 * m11 - m01 * m10
    if not det != 0.0:
        return -np.inf
    i00 = m11 / det
    i01 = -m01 / det
    i10 = -m10 / det
    i11 = m00 / det
    g00 = o1 / d_s
    g01 = (o1 / m) / d_c
    g10 = o1 / d_s
    g11 = (k1 * o2) / d_c
    h_ss = -(i00 * g00 + i01 * g10)
    h_sc = -(i00 * g01 + i01 * g11)
    h_cs = -(i10 * g00 + i11 * g10)
    h_cc = -(i10 * g01 + i11 * g11)
    a_s = 1.0 / d_s + h_ss
    a_c = 1.0 / d_c + h_cc
    total = (
        p_s * a_s * a_s
        + (s - 1) * p_s * h_ss * h_ss
        + s * p_c * h_cs * h_cs
        + p_c * a_c * a_c
        + (m - 1) * p_c * h_cc * h_cc
        + m * p_s * h_sc * h_sc
        - q_all
    )
    if last_in_s:
        p_l = o1 * (tot - th_last) + k1 * th_last
        sig = p_l * a_s * a_s + (p_s - p_l) * h_ss * h_ss + p_c * h_cs * h_cs
    else:
        p_l = t_s * (o1 / m) + k1 * o2 * (t_c - th_last) + k1 * k2 * th_last
        sig = p_l * a_c * a_c + (p_c - p_l) * h_cc * h_cc + p_s * h_sc * h_sc
    trace = total - (sig - th_last * th_last)
    if not np.isfinite(trace):
        return -np.inf
    return -trace


@njit(cache=True)
def scores(theta, order, rank, code, params, out):  # pragma: no cover - compiled
    """Utility of every top-s candidate, s = 0..K-1, into ``out`` (``order`` must be sorted)."""
    k = theta.shape[0]
    ts = np.empty(k)
    for i in range(k):
        ts[i] = theta[order[i]]
    # prefix masses / squares (S = first s) and suffix masses (C)
    pre = np.zeros(k + 1)
    pre2 = np.zeros(k + 1)
    for i in range(k):
        pre[i + 1] = pre[i] + ts[i]
        pre2[i + 1] = pre2[i] + ts[i] * ts[i]
    suf = np.zeros(k + 1)
    suf2 = np.zeros(k + 1)
    for i in range(k - 1, -1, -1):
        suf[i] = suf[i + 1] + ts[i]
        suf2[i] = suf2[i + 1] + ts[i] * ts[i]
    tot = pre[k]
    q_all = pre2[k]
    last_rank = rank[k - 1]
    th_last = theta[k - 1]
    for s in range(k):
        k1 = params[0, s]
        o1 = params[1, s]
        k2 = params[2, s]
        o2 = params[3, s]
        m = k - s
        t_s = pre[s]
        t_c = suf[s]
        if code == FISHER:
            out[s] = _fisher_score(
                s, k, k1, o1, k2, o2, tot, t_s, t_c, q_all, th_last, last_rank < s
            )
            continue
        if code == HONEST:
            out[s] = k1 * t_s + k1 * k2 * t_c
            continue
        c_s = o1 / m  # x in S, y not in S
        c_cc = k1 * o2  # x, y not in S, x != y
        c_d = k1 * k2  # x = y not in S
        acc = 0.0
        for i in range(k):
            th = ts[i]
            if i < s:
                p = o1 * (tot - th) + k1 * th
            else:
                p = t_s * c_s + c_cc * (t_c - th) + c_d * th
            if code == ENTROPY:
                if p > 0.0:
                    acc += p * np.log(p)
            elif code == TV:
                acc += abs(p - th)
            elif code == EXPECTED_TV:
                if i < s:
                    acc += th * abs(k1 - p) + (tot - th) * abs(o1 - p)
                else:
                    acc += th * abs(c_d - p) + (t_c - th) * abs(c_cc - p) + t_s * abs(c_s - p)
            else:  # MSE
                if p > 0.0:
                    if i < s:
                        num = th * th * k1 * k1 + (q_all - th * th) * o1 * o1
                    else:
                        num = (
                            th * th * c_d * c_d
                            + (suf2[s] - th * th) * c_cc * c_cc
                            + pre2[s] * c_s * c_s
                        )
                    acc += num / p
        if code == ENTROPY:
            out[s] = acc
        elif code == TV:
            out[s] = -0.5 * acc
        elif code == EXPECTED_TV:
            out[s] = 0.5 * acc
        else:
            out[s] = -(1.0 - acc)


@njit(cache=True)
def choose(theta, order, rank, code, alpha, params, buf):  # pragma: no cover - compiled
    """``|S|`` for the draw ``theta`` (``order``/``rank`` are updated to sort ``theta``)."""
    sort_desc(theta, order, rank)
    k = theta.shape[0]
    if code == NON_ADAPTIVE:
        return 0
    if code == LOOKAHEAD:  # |S| fixed by the caller (bayesldp.adaptive.lookahead), in alpha
        return min(np.int64(alpha), k - 1)
    if code == SEMI_ADAPTIVE:
        if alpha >= 1.0:
            return 0
        cum = 0.0
        for i in range(k - 1):
            cum += theta[order[i]]
            if cum >= alpha:
                return i + 1
        return 0
    scores(theta, order, rank, code, params, buf)
    top = buf[0]
    for s in range(1, k):
        if buf[s] > top:
            top = buf[s]
    cut = top - TIE_RTOL * abs(top)
    for s in range(k):
        if buf[s] >= cut:
            return s
    return 0


@njit(cache=True)
def choose_many(thetas, code, alpha, params):  # pragma: no cover - compiled
    """``|S|`` and the sorted order for each row of ``thetas`` (for tests and experiments)."""
    n, k = thetas.shape
    sizes = np.empty(n, np.int64)
    orders = np.empty((n, k), np.int64)
    order = np.arange(k)
    rank = np.empty(k, np.int64)
    buf = np.empty(k)
    for r in range(n):
        sizes[r] = choose(thetas[r], order, rank, code, alpha, params, buf)
        orders[r] = order
    return sizes, orders


@njit(cache=True)
def scores_many(thetas, code, params):  # pragma: no cover - compiled
    """The candidate scores for each row of ``thetas`` (shape (n, K))."""
    n, k = thetas.shape
    out = np.empty((n, k))
    order = np.arange(k)
    rank = np.empty(k, np.int64)
    for r in range(n):
        sort_desc(thetas[r], order, rank)
        scores(thetas[r], order, rank, code, params, out[r])
    return out


# ------------------------------------------------------------------------------ RRRR client
@njit(cache=True)
def _perturb_one(x, s, order, rank, k1, k2, st):  # pragma: no cover - compiled
    """Algorithm 1 of Aydın and Yıldırım 2025 (RRRR) for one user with ``S = order[:s]``."""
    k = order.shape[0]
    m = k - s
    r = rank[x]
    if r < s:  # X in S: R ~ U(S^c); SRR(X; S u {R}, eps1)
        if _uniform(st) < k1:
            return x
        j = _randint(st, s)  # among (S u {R}) \ {X}: s elements, R last
        if j >= r:
            j += 1
        if j == s:
            return order[s + _randint(st, m)]
        return order[j]
    # X not in S: R = SRR(X; S^c, eps2); then SRR(R; S u {R}, eps1)
    out = x
    if m >= 2:
        if not _uniform(st) < k2:
            j = _randint(st, m - 1)
            if j >= r - s:
                j += 1
            out = order[s + j]
    if s >= 1:
        if not _uniform(st) < k1:
            out = order[_randint(st, s)]
    return out


@njit(cache=True)
def perturb_subset(x, mask, params, key0, key1, batch, stream):  # pragma: no cover - compiled
    """Perturb ``x`` with the RRRR of the boolean ``mask`` (one stream; for tests/clients)."""
    k = mask.shape[0]
    order = np.empty(k, np.int64)
    rank = np.empty(k, np.int64)
    s = 0
    for i in range(k):
        if mask[i]:
            order[s] = i
            s += 1
    c = s
    for i in range(k):
        if not mask[i]:
            order[c] = i
            c += 1
    for i in range(k):
        rank[order[i]] = i
    st = np.empty(4, np.uint64)
    sp = np.zeros(2)
    seed_stream(st, sp, key0, key1, batch, stream)
    y = np.empty(x.shape[0], np.int64)
    k1 = params[0, s]
    k2 = params[2, s]
    for i in range(x.shape[0]):
        y[i] = _perturb_one(x[i], s, order, rank, k1, k2, st)
    return y


@njit(cache=True)
def fill_row(row, mask, y, s, params):  # pragma: no cover - compiled
    """``row = P_S[:, y]`` exactly as :func:`rrrr_channel` computes it."""
    k = row.shape[0]
    m = k - s
    k1 = params[0, s]
    o1 = params[1, s]
    k2 = params[2, s]
    o2 = params[3, s]
    if mask[y]:
        for x in range(k):
            row[x] = o1
        row[y] = k1
    else:
        c_s = o1 / m
        c_cc = k1 * o2
        for x in range(k):
            row[x] = c_s if mask[x] else c_cc
        row[y] = k1 * k2


# --------------------------------------------------------------------- deduplicated storage
# Reports are stored as ids of distinct likelihood rows: ``row_of[i]`` (one int32 per report)
# indexes ``table`` (distinct rows ``P_S[:, y]``), ``row_sub``/``row_y`` give the row's subset id
# and report, and ``sub_mask``/``sub_size`` the distinct subsets.  Subsets are found through an
# open-addressing hash table (Zobrist hash: XOR of one random word per member; ``hvals = -1``
# marks an empty slot) and rows through ``row_index[sid, y]`` (-1: not created yet).  Ids are
# given in order of first occurrence, so replaying the reports rebuilds the same tables.  The
# SGLD minibatches then touch a 4-byte id per draw and a small, cache-resident table instead of
# a K-float row per report (at n = 500,000, K = 20: 2 MB instead of 80 MB).
@njit(cache=True)
def _find_subset(mask, s, h, sub_mask, sub_size, hkeys, hvals):  # pragma: no cover - compiled
    cap = hvals.shape[0]
    slot = np.int64(h & np.uint64(cap - 1))
    k = mask.shape[0]
    while hvals[slot] != -1:
        sid = hvals[slot]
        if hkeys[slot] == h and sub_size[sid] == s:
            same = True
            for c in range(k):
                if sub_mask[sid, c] != mask[c]:
                    same = False
                    break
            if same:
                return sid, slot
        slot = (slot + 1) & (cap - 1)
    return -1, slot


@njit(cache=True)
def subset_id(mask, zob, sub_mask, sub_size, sub_list, hkeys, hvals, cnt):  # pragma: no cover
    """Id of the subset ``mask`` (created if new; capacity is the caller's duty)."""
    h = np.uint64(0)
    s = 0
    for c in range(mask.shape[0]):
        if mask[c]:
            h ^= zob[c]
            s += 1
    sid, slot = _find_subset(mask, s, h, sub_mask, sub_size, hkeys, hvals)
    if sid >= 0:
        return sid
    sid = cnt[0]
    j = 0
    for c in range(mask.shape[0]):
        sub_mask[sid, c] = mask[c]
        if mask[c]:
            sub_list[sid, j] = c
            j += 1
    sub_size[sid] = s
    hkeys[slot] = h
    hvals[slot] = sid
    cnt[0] = sid + 1
    return sid


@njit(cache=True)
def _fill_meta(meta_row, in_s, s, k, params):  # pragma: no cover - compiled
    # the row as base + d_S 1_S + d_y e_y (see sgld_steps)
    m = k - s
    k1 = params[0, s]
    o1 = params[1, s]
    k2 = params[2, s]
    o2 = params[3, s]
    if in_s:
        meta_row[0] = o1
        meta_row[1] = 0.0
        meta_row[2] = k1 - o1
    else:
        meta_row[0] = k1 * o2
        meta_row[1] = o1 / m - k1 * o2
        meta_row[2] = k1 * k2 - k1 * o2


@njit(cache=True)
def row_id(
    sid, y, params, sub_mask, sub_size, row_index, table, meta, row_sub, row_y, cnt
):  # pragma: no cover - compiled
    """Id of the row ``P_S[:, y]`` of subset ``sid`` (created if new)."""
    rid = row_index[sid, y]
    if rid >= 0:
        return rid
    rid = cnt[1]
    s = sub_size[sid]
    fill_row(table[rid], sub_mask[sid], y, s, params)
    _fill_meta(meta[rid], sub_mask[sid, y], s, table.shape[1], params)
    row_sub[rid] = sid
    row_y[rid] = y
    row_index[sid, y] = rid
    cnt[1] = rid + 1
    return rid


@njit(cache=True)
def rehash(sub_mask, sub_size, n_sub, zob, hkeys, hvals):  # pragma: no cover - compiled
    """Insert subsets ``0..n_sub-1`` into an empty hash table (after growing it)."""
    for sid in range(n_sub):
        h = np.uint64(0)
        for c in range(sub_mask.shape[1]):
            if sub_mask[sid, c]:
                h ^= zob[c]
        slot = np.int64(h & np.uint64(hvals.shape[0] - 1))
        while hvals[slot] != -1:
            slot = (slot + 1) & (hvals.shape[0] - 1)
        hkeys[slot] = h
        hvals[slot] = sid


@njit(cache=True)
def rebuild_rows(
    row_sub, row_y, n_rows, params, sub_mask, sub_size, row_index, table, meta
):  # pragma: no cover - compiled
    """Recompute the row tables (bit-identical) and ``row_index`` from ``(row_sub, row_y)``."""
    k = table.shape[1]
    for rid in range(n_rows):
        sid = row_sub[rid]
        y = row_y[rid]
        fill_row(table[rid], sub_mask[sid], y, sub_size[sid], params)
        _fill_meta(meta[rid], sub_mask[sid, y], sub_size[sid], k, params)
        row_index[sid, y] = rid


@njit(cache=True)
def build_rows(masks, reports, params, rows):  # pragma: no cover - compiled
    """Likelihood rows of many reports (``rows`` has shape (n, K)); for tests."""
    for u in range(reports.shape[0]):
        s = 0
        for x in range(masks.shape[1]):
            if masks[u, x]:
                s += 1
        fill_row(rows[u], masks[u], reports[u], s, params)


# ------------------------------------------------------------------------------- the loops
# The compiled loops (here, in bayesldp.adaptive.sgld and bayesldp.adaptive.pool) take the
# survey's arrays in groups (tuples, built by bayesldp.adaptive.store.ReportStore and the survey):
#   store = (row_of, zob, sub_mask, sub_size, sub_list, hkeys, hvals, row_index, table, meta,
#            row_sub, row_y, cnt)                 the deduplicated report storage
#   rows  = (row_of, row_sub, row_y, meta, sub_list, sub_size)      what the SGLD reads
#   sgld  = (minibatch, gamma, rho, floor, key0, key1)               the SGLD settings and keys
@njit(cache=True)
def store_rows(store):  # pragma: no cover - compiled
    """The ``rows`` group (what the SGLD reads) of a ``store`` group."""
    return (store[0], store[10], store[11], store[9], store[4], store[3])


@njit(cache=True)
def has_room(store, size, k):  # pragma: no cover - compiled
    """Whether the subset and row tables can take one more batch of ``size`` users."""
    sub_mask, hvals, table, cnt = store[2], store[6], store[8], store[12]
    return not (
        cnt[0] + 1 > sub_mask.shape[0]
        or 2 * (cnt[0] + 1) > hvals.shape[0]
        or cnt[1] + min(size, k) > table.shape[0]
    )


@njit(cache=True)
def survey_batch(x, u, b, theta, selection, store, key0, key1, st, sp, buf, mask):
    """One batch: ``|S|`` from the draw ``theta``, the users ``x`` perturbed (batch ``b``'s
    stream 0) and their likelihood rows stored from user ``u``."""  # pragma: no cover
    code, alpha, params, order, rank = selection
    (row_of, zob, sub_mask, sub_size, sub_list, hkeys, hvals, row_index, table, meta, row_sub,
     row_y, cnt) = store  # fmt: skip
    s = choose(theta, order, rank, code, alpha, params, buf)
    mask[:] = False
    for c in range(s):
        mask[order[c]] = True
    sid = subset_id(mask, zob, sub_mask, sub_size, sub_list, hkeys, hvals, cnt)
    k1 = params[0, s]
    k2 = params[2, s]
    seed_stream(st, sp, key0, key1, b, 0)
    for j in range(x.shape[0]):
        y = _perturb_one(x[j], s, order, rank, k1, k2, st)
        row_of[u + j] = row_id(
            sid, y, params, sub_mask, sub_size, row_index, table, meta, row_sub, row_y, cnt
        )


@njit(cache=True)
def store_reports(reports, masks, u0, params, store):  # pragma: no cover - compiled
    """Store client reports with the subsets they used (capacity is the caller's duty)."""
    (row_of, zob, sub_mask, sub_size, sub_list, hkeys, hvals, row_index, table, meta, row_sub,
     row_y, cnt) = store  # fmt: skip
    for j in range(reports.shape[0]):
        sid = subset_id(masks[j], zob, sub_mask, sub_size, sub_list, hkeys, hvals, cnt)
        row_of[u0 + j] = row_id(
            sid, reports[j], params, sub_mask, sub_size, row_index, table, meta, row_sub, row_y,
            cnt,
        )  # fmt: skip
