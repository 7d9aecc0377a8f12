"""The compiled log-densities and gradients of every target, and :func:`_logp_grad`, which
dispatches among them (numba, ``cache=True``).

Each density reads the data tuple its target's ``data()`` builds
(:class:`bayesldp.bayes.hmc.targets._CompiledTarget`): the likelihood's arrays, counts, alpha,
``n + A``, the log normalising constant, the adaptive prior's grid (``data[10:12]``), then one
slot per kind of coordinates: the joint scheme's (``data[12:15]``,
:mod:`bayesldp.bayes.hmc.joint`), log-gamma (``data[15]``, :mod:`bayesldp.bayes.hmc.gamma`),
the smoothness prior's (``data[16]``, :mod:`bayesldp.bayes.hmc.smooth`), nested log-ratios'
(``data[17]``, :mod:`bayesldp.bayes.hmc.nested`) and the random walk across rounds'
(``data[18]``, :mod:`bayesldp.bayes.hmc.walk`, whose ``data[:18]`` are None).  A slot is None
where unused, and each density is reached through a ``numba.extending.overload`` hook
(:func:`_where_set`) that compiles it only where its slot holds arrays (the ALR density where
``data[6]``, the counts, does), so a fit compiles only the density it uses (the
kernels' style: :mod:`bayesldp.bayes.hmc.tree`).  Kept in one module: the densities call one
another's helpers (the joint density the nested hooks, the nested density the marginal prior)
and the dispatcher calls them all.
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np
from numba.extending import overload

from bayesldp import likelihood as lk
from bayesldp.bayes.hmc.walk_density import _logp_grad_walk

_S_LIMIT = 50.0  # |log a| beyond this has prior mass 0 (the grid spans log_a_mean +- 8 sd)


@nb.njit(cache=True)
def _prior_terms(s_total, pa, pc):  # pragma: no cover - compiled
    """``log sum_j exp(pc_j + pa_j S)`` and ``abar = E[a | S]`` (adaptive prior)."""
    top = -math.inf
    for j in range(pa.shape[0]):
        v = pc[j] + pa[j] * s_total
        if v > top:
            top = v
    tot = 0.0
    mean = 0.0
    for j in range(pa.shape[0]):
        e = math.exp(pc[j] + pa[j] * s_total - top)
        tot += e
        mean += pa[j] * e
    return top + math.log(tot), mean / tot


def _marginal_prior(s_total, pa, pc):  # pragma: no cover - replaced by the overload
    """:func:`_prior_terms` for the adaptive prior; never compiled for a fixed prior (``pa``
    None)."""
    raise NotImplementedError


@overload(_marginal_prior)
def _marginal_prior_overload(s_total, pa, pc):
    if isinstance(pa, nb.types.NoneType):
        return lambda s_total, pa, pc: (0.0, 0.0)  # unreachable: pa is None
    return lambda s_total, pa, pc: _prior_terms(s_total, pa, pc)


@nb.njit(cache=True)
def _digamma(x):  # pragma: no cover - compiled
    """psi(x) for x > 0: recurrence up to x >= 6, then the asymptotic series."""
    acc = 0.0
    while x < 6.0:
        acc -= 1.0 / x
        x += 1.0
    f = 1.0 / (x * x)
    series = f * (1.0 / 12 - f * (1.0 / 120 - f * (1.0 / 252 - f * (1.0 / 240 - f / 132))))
    return acc + math.log(x) - 0.5 / x - series


@nb.njit(cache=True)
def _hermite(s, start, step, n_knots):  # pragma: no cover - compiled
    """The cubic Hermite interpolant at ``s`` on the knots ``start + step * j``: the knot pair
    (j0, j1) and the weights (8,) of (value j0, slope j0, value j1, slope j1) in the value, then
    in its derivative in ``s`` (a tuple: no allocation per gradient).  Beyond the end knots:
    linear, with the end knot's slope."""
    pos = (s - start) / step
    j = min(max(math.floor(pos), 0), n_knots - 2)
    t = pos - j
    if t < 0.0 or t > 1.0:
        j = j if t < 0.0 else j + 1
        t = t if t < 0.0 else t - 1.0
        return j, j, (1.0, t * step, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0)
    t2 = t * t
    return (
        j,
        j + 1,
        (
            2 * t2 * t - 3 * t2 + 1,
            (t2 * t - 2 * t2 + t) * step,
            -2 * t2 * t + 3 * t2,
            (t2 * t - t2) * step,
            (6 * t2 - 6 * t) / step,
            3 * t2 - 4 * t + 1,
            (6 * t - 6 * t2) / step,
            3 * t2 - 2 * t,
        ),
    )


@nb.njit(cache=True)
def _logp_grad_joint(q, data, work, grad):  # pragma: no cover - compiled
    """Log-density and gradient of the adaptive prior's joint posterior of ``theta`` and
    ``s = log a`` on ``q = (u, s)``, ``u`` in R^{K-1}.

    ``z_x = c_x(a) + R_x u_x - B_x softplus(-u_x)`` for the categories ``idx[:K-1]`` and
    ``z = 0`` for the reference ``idx[K-1]``, ``theta = softmax(z)``, with
    ``R_x = (1 + a + m_x)^{-1/2}``, ``B_x = w_x (L - R_x)``, ``L = (1 + a)^{1/2} / a``.  Given
    ``a``, ``log theta_x`` is about log-Gamma(a + m_x) distributed (``m_x`` the data's effective
    count of the category): above its mode a width about ``(1 + a + m_x)^{-1/2}``, the slope
    ``R_x`` of ``dz/du = R_x + B_x sigmoid(-u)`` for ``u >> 0``.  Below it, where the data stop
    constraining the category (a likelihood bounded away from 0 as ``theta_x -> 0``), the
    prior's tail of scale ``1/a``: the slope for ``u << 0`` is ``(1 - w_x) R_x + w_x L``, with
    ``w_x`` near 1 where the data say little.  Both sides get scale about 1 in ``u`` whatever
    ``a``: no funnel in ``(z, a)``, no ``1/a`` tails at small ``a``.  Density: ``loglik +
    lgamma(K a) - K lgamma(a) + a S`` (Dirichlet(a) on the ALR coordinates, Jacobian included;
    ``S = sum_x log theta_x``) ``+ sum_x log dz_x/du_x`` (Jacobian of ``u -> z``)
    ``- (s - mu)^2 / (2 sd^2)`` (the normal prior on ``log a``).  ``data[12:15]`` = (``w``
    then ``m`` (2 (K-1),), category order ``idx`` (K,), parameters (:class:`_JointTarget`)).
    On nested log-ratios (``data[17]``, :func:`_nested_softmax`) ``data[12]`` holds a third
    block, each coordinate's prior concentration in units of ``a`` (``|G|`` for the group's
    total, by aggregation, 1 otherwise), which takes ``a``'s place in ``R_x`` and ``L``.
    ``grad[:K-1]`` holds ``exp(-|u_x|)`` between the two passes and ``g[K:3K-2]`` (the joint
    target's ``g`` has 3K entries, the likelihood's gradient in the first K) ``R_x`` and
    ``softplus(-u_x)``: each computed once per category.
    """
    dense, indptr, indices, delta, complement, offset, counts = data[:7]
    shift, const, tails, nidx, npar = data[8], data[9], data[12], data[13], data[14]
    theta, g, r, lth, w = work
    d = q.shape[0] - 1
    k = d + 1
    s = q[d]
    if not abs(s) <= _S_LIMIT:  # a outside [e^-50, e^50] (also NaN): no density
        for i in range(d + 1):
            grad[i] = 0.0
        return -math.inf
    a = math.exp(s)
    big_l = math.sqrt(1.0 + a) / a
    d_l = big_l * (0.5 * a / (1.0 + a) - 1.0)
    mu, sd = npar[0], npar[1]
    # the centres: cubic Hermite in s between the knots, linear beyond them (_centres)
    n_knots = int(npar[4])
    j0, j1, h = _hermite(s, npar[2], npar[3], n_knots)
    c0, c1 = 5 + j0 * d, 5 + j1 * d  # values at the two knots, then the slopes at them
    m0, m1 = c0 + n_knots * d, c1 + n_knots * d
    ref = nidx[d]
    theta[ref] = 0.0  # holds z until the softmax
    top = 0.0
    nested = _is_nested(data[17])
    for i in range(d):
        u = q[i]
        e = math.exp(-abs(u))
        ca, bl = a, big_l
        if nested:  # the coordinate's concentration: |G| a for the group's total
            ca = a * tails[2 * d + i]
            bl = math.sqrt(1.0 + ca) / ca
        big_r = 1.0 / math.sqrt(1.0 + ca + tails[d + i])
        sp = max(-u, 0.0) + math.log1p(e)  # softplus(-u)
        grad[i], g[k + i], g[2 * k + i] = e, big_r, sp  # kept for the second pass
        ci = h[0] * npar[c0 + i] + h[1] * npar[m0 + i] + h[2] * npar[c1 + i] + h[3] * npar[m1 + i]
        zi = ci + big_r * u - tails[i] * (bl - big_r) * sp
        theta[nidx[i]] = zi
        if zi > top:
            top = zi
    log_g = 0.0
    if nested:
        s_total, _, log_g = _nest_softmax(data[17], theta, data[7])
    else:
        tot = 0.0
        for x in range(k):
            tot += math.exp(theta[x] - top)
        log_norm = top + math.log(tot)
        s_total = 0.0
        for x in range(k):
            log_theta = theta[x] - log_norm
            s_total += log_theta
            theta[x] = math.exp(log_theta)
    lp = const + lk.gradient(dense, indptr, indices, delta, complement, offset, counts, theta,
                             0.0, r, lth, w, g[:k])  # fmt: skip
    lp += math.lgamma(k * a) - k * math.lgamma(a) + a * s_total - 0.5 * ((s - mu) / sd) ** 2
    ds = k * a * (_digamma(k * a) - _digamma(a)) + a * s_total - (s - mu) / (sd * sd)
    shift_a = shift + k * a
    if nested:  # g[x] becomes the gradient in the coordinate x carries
        for x in range(k):
            g[x] = theta[x] * g[x] + a
        _nest_gradient(data[17], g[:k], theta, shift_a, log_g)
    for i in range(d):
        x = nidx[i]
        u = q[i]
        e, big_r, sp = grad[i], g[k + i], g[2 * k + i]
        sig = e / (1.0 + e) if u >= 0.0 else 1.0 / (1.0 + e)  # sigmoid(-u)
        wi = tails[i]
        ca, bl, dl = a, big_l, d_l
        if nested:
            ca = a * tails[2 * d + i]
            bl = math.sqrt(1.0 + ca) / ca
            dl = bl * (0.5 * ca / (1.0 + ca) - 1.0)
        big_b = wi * (bl - big_r)
        d_r = -0.5 * ca * big_r**3
        d_b = wi * (dl - d_r)
        slope = big_r + big_b * sig
        gz = g[x] if nested else theta[x] * (g[x] - shift_a) + a
        lp += math.log(slope)
        grad[i] = gz * slope - big_b * sig * (1.0 - sig) / slope
        dc = h[4] * npar[c0 + i] + h[5] * npar[m0 + i] + h[6] * npar[c1 + i] + h[7] * npar[m1 + i]
        ds += gz * (d_r * u - d_b * sp + dc) + (d_r + d_b * sig) / slope
    grad[d] = ds
    return lp


def _where_set(slot, kernel):
    """A density for compiled code: a Python stub whose ``numba.extending.overload`` compiles to
    ``kernel`` where ``data[slot]`` holds its density's arrays, and to a NaN (never called) where
    that slot is None, so a fit compiles only the density it uses."""

    def density(z, data, work, grad):  # pragma: no cover - replaced by the overload
        raise NotImplementedError

    @overload(density)
    def choose(z, data, work, grad):
        if isinstance(data.types[slot], nb.types.NoneType):
            return lambda z, data, work, grad: math.nan  # unreachable: data[slot] is None
        return lambda z, data, work, grad: kernel(z, data, work, grad)

    name = kernel.__name__
    density.__name__ = density.__qualname__ = name.replace("_logp_grad_", "_") + "_density"
    density.__doc__ = f":func:`{name}` where data[{slot}] holds its arrays."
    return density


_joint_density = _where_set(12, _logp_grad_joint)  # the joint scheme's arrays


@nb.njit(cache=True)
def _nested_softmax(theta, codes, alpha):  # pragma: no cover - compiled
    """``theta`` from nested log-ratios, in place (:func:`_logp_grad_nested`): on entry
    ``theta[x]`` holds the coordinate category ``x`` carries (0 for the reference), on exit
    ``theta_x``.  Codes: 0 a category outside the group G, its log-ratio to the reference; 2
    the group's inner reference, carrying ``log(theta_G / theta_ref)``; 1 the other members,
    ``log(theta_x / theta_gref)``.  Returns ``S = sum_x log theta_x``,
    ``sum_x alpha_x log theta_x`` and ``log theta_G``."""
    k = theta.shape[0]
    top_o = -math.inf
    top_i = 0.0  # the inner reference's own coordinate is 0
    for x in range(k):
        if codes[x] == 1:
            top_i = max(top_i, theta[x])
        else:
            top_o = max(top_o, theta[x])
    tot_o = 0.0
    tot_i = math.exp(-top_i)
    group = 0.0
    for x in range(k):
        if codes[x] == 1:
            tot_i += math.exp(theta[x] - top_i)
        else:
            tot_o += math.exp(theta[x] - top_o)
            if codes[x] == 2:
                group = theta[x]
    norm_o = top_o + math.log(tot_o)
    norm_i = top_i + math.log(tot_i)
    log_g = group - norm_o
    s_total = 0.0
    s_alpha = 0.0
    for x in range(k):
        if codes[x] == 0:
            log_theta = theta[x] - norm_o
        elif codes[x] == 1:
            log_theta = log_g + theta[x] - norm_i
        else:
            log_theta = log_g - norm_i
        s_total += log_theta
        s_alpha += alpha[x] * log_theta
        theta[x] = math.exp(log_theta)
    return s_total, s_alpha, log_g


@nb.njit(cache=True)
def _nested_gradient(f, theta, codes, shift, log_g):  # pragma: no cover - compiled
    """In place: ``f_x = d logp / d log theta_x`` (``theta_x g_x + alpha_x``) on entry, the
    gradient in the coordinate category ``x`` carries on exit (codes of
    :func:`_nested_softmax`; ``shift = sum_x f_x = n + A``): ``f_x - theta_x shift`` outside G,
    ``F_G - theta_G shift`` for the group's coordinate and ``f_x - (theta_x / theta_G) F_G``
    inside it, ``F_G = sum_{x in G} f_x``."""
    f_group = 0.0
    for x in range(f.shape[0]):
        if codes[x] != 0:
            f_group += f[x]
    theta_g = math.exp(log_g)
    inv_g = 1.0 / theta_g if theta_g > 0.0 else 0.0  # theta_G = 0: every member's theta is 0
    for x in range(f.shape[0]):
        if codes[x] == 0:
            f[x] -= theta[x] * shift
        elif codes[x] == 1:
            f[x] -= theta[x] * inv_g * f_group
        else:
            f[x] = f_group - theta_g * shift


def _is_nested(slot):  # pragma: no cover - replaced by the overload
    """True where data[17] holds nested coordinates' codes (compile-time constant)."""
    raise NotImplementedError


@overload(_is_nested)
def _is_nested_overload(slot):
    flag = not isinstance(slot, nb.types.NoneType)
    return lambda slot: flag


def _nest_softmax(slot, theta, alpha):  # pragma: no cover - replaced by the overload
    """:func:`_nested_softmax` with ``slot = data[17]``; never compiled where it is None."""
    raise NotImplementedError


@overload(_nest_softmax)
def _nest_softmax_overload(slot, theta, alpha):
    if isinstance(slot, nb.types.NoneType):
        return lambda slot, theta, alpha: (0.0, 0.0, 0.0)  # unreachable: not nested
    return lambda slot, theta, alpha: _nested_softmax(theta, slot[0], alpha)


def _nest_gradient(slot, f, theta, shift, log_g):  # pragma: no cover - replaced by the overload
    """:func:`_nested_gradient` with ``slot = data[17]``; never compiled where it is None."""
    raise NotImplementedError


@overload(_nest_gradient)
def _nest_gradient_overload(slot, f, theta, shift, log_g):
    if isinstance(slot, nb.types.NoneType):
        return lambda slot, f, theta, shift, log_g: None  # unreachable: not nested
    return lambda slot, f, theta, shift, log_g: _nested_gradient(f, theta, slot[0], shift, log_g)


@nb.njit(cache=True)
def _logp_grad_nested(z, data, work, grad):  # pragma: no cover - compiled
    """Log-density and gradient of a fixed or adaptive (marginal) Dirichlet prior's posterior on
    nested log-ratios (:func:`_nesting`): ``data[17] = (codes, idx)``, coordinate ``i`` carried
    by category ``idx[i]`` (:func:`_nested_softmax`), the reference ``idx[K-1]``.

    By the Dirichlet's aggregation property, ``(theta_outside, theta_G) ~ Dirichlet(alpha_out,
    sum_G alpha)`` and the split ``theta_G^{-1} theta_{x in G} ~ Dirichlet(alpha_G)`` apart;
    with the Jacobians of both log-ratio maps the density on these coordinates is
    ``loglik + sum_x alpha_x log theta_x + const``, the same function of ``theta`` as on plain
    log-ratios (:func:`_logp_grad`); only the chain rule differs (:func:`_nested_gradient`).
    """
    dense, indptr, indices, delta, complement, offset, counts, alpha = data[:8]
    shift, const, pa, pc = data[8:12]
    idx = data[17][1]
    theta, g, r, lth, w = work
    d = z.shape[0]
    for i in range(d):
        theta[idx[i]] = z[i]
    theta[idx[d]] = 0.0
    s_total, s_alpha, log_g = _nest_softmax(data[17], theta, alpha)
    lp = const + lk.gradient(dense, indptr, indices, delta, complement, offset, counts, theta,
                             0.0, r, lth, w, g)  # fmt: skip
    if pa is not None:
        prior_lp, abar = _marginal_prior(s_total, pa, pc)
        lp += prior_lp
        shift += (d + 1) * abar
        for x in range(d + 1):
            g[x] = theta[x] * g[x] + abar
    else:
        lp += s_alpha
        for x in range(d + 1):
            g[x] = theta[x] * g[x] + alpha[x]
    _nest_gradient(data[17], g, theta, shift, log_g)
    for i in range(d):
        grad[i] = g[idx[i]]
    return lp


_nested_density = _where_set(17, _logp_grad_nested)  # nested coordinates


@nb.njit(cache=True)
def _logp_grad_gamma(x, data, work, grad):  # pragma: no cover - compiled
    """Log-density and gradient on log-gamma coordinates (:class:`_GammaTarget`):
    ``loglik(softmax(x)) + sum_x (alpha_x x_x - e^{x_x}) + const``, gradient
    ``theta_x (g_x - n) + alpha_x - e^{x_x}`` with ``g = L^T (c / L theta)``."""
    dense, indptr, indices, delta, complement, offset, counts, alpha = data[:8]
    n, const = data[8], data[9]
    theta, g, r, lth, w = work
    k = x.shape[0]
    top = x[0]
    for i in range(k):
        if x[i] > top:
            top = x[i]
    tot = 0.0
    for i in range(k):
        tot += math.exp(x[i] - top)
    log_norm = top + math.log(tot)
    lp = const
    for i in range(k):
        theta[i] = math.exp(x[i] - log_norm)
        lp += alpha[i] * x[i] - math.exp(x[i])
    lp += lk.gradient(dense, indptr, indices, delta, complement, offset, counts, theta, 0.0, r,
                      lth, w, g)  # fmt: skip
    for i in range(k):
        grad[i] = theta[i] * (g[i] - n) + alpha[i] - math.exp(x[i])
    return lp


_gamma_density = _where_set(15, _logp_grad_gamma)  # marks log-gamma coordinates


@nb.njit(cache=True)
def _logp_grad_smooth(v, data, work, grad):  # pragma: no cover - compiled
    """:func:`_smooth_core` at ``q = v`` except on the block ``idx`` (``data[16][6:9]`` =
    ``idx`` (B,), ``centre`` (B,), lower-triangular ``T`` (B, B)): ``q[idx] = centre + T
    v[idx]``, a fixed linear map (:meth:`_SmoothTarget.decorrelate`), whose gradient is
    ``T^T`` that of ``q``; its constant Jacobian is left out.  No block (B = 0): ``q = v``."""
    idx, centre, t = data[16][6], data[16][7], data[16][8]
    nb_ = idx.shape[0]
    if nb_ == 0:
        return _smooth_core(v, data, work, grad)
    q = v.copy()
    for a in range(nb_):
        acc = centre[a]
        for c in range(a + 1):
            acc += t[a, c] * v[idx[c]]
        q[idx[a]] = acc
    lp = _smooth_core(q, data, work, grad)
    gq = np.empty(nb_)
    for a in range(nb_):
        gq[a] = grad[idx[a]]
    for c in range(nb_):
        acc = 0.0
        for a in range(c, nb_):
            acc += t[a, c] * gq[a]
        grad[idx[c]] = acc
    return lp


@nb.njit(cache=True)
def _smooth_core(q, data, work, grad):  # pragma: no cover - compiled
    """Log-density and gradient of the smoothness prior's posterior (:class:`_SmoothTarget`)
    on ``q = (u_1 .. u_M, b, s)``: with ``sd_j = lambda scale_j``, ``lambda = e^s``,
    ``y_j = sd_j^{w_j} u_j``, ``f = b line + modes @ y``, ``theta = softmax(f)``,

    ``loglik(theta) + sum_j [-u_j^2 / (2 sd_j^{2(1-w_j)}) - (1 - w_j) log sd_j]
    - b^2 / (2 s_b^2) - (s - mu)^2 / (2 sigma^2)`` (constants dropped).  ``data[16]`` =
    (modes (K, M), its transpose (M, K) C-contiguous, line (K,), log scale (M,), weights w (M,),
    (mu, sigma, s_b)): ``f`` is summed column by column from the transpose (contiguous inner
    loops, which the compiler vectorises, unlike a dot product per bin; the same sums in the
    same order, so the same bits).
    """
    dense, indptr, indices, delta, complement, offset, counts = data[:7]
    n, const = data[8], data[9]
    modes, modes_t, line, log_scale, weights, par = data[16][:6]
    theta, g, r, lth, w = work
    k = theta.shape[0]
    m = modes.shape[1]
    b, s = q[m], q[m + 1]
    if not abs(s) <= _S_LIMIT:  # lambda outside [e^-50, e^50] (also NaN): no density
        for i in range(m + 2):
            grad[i] = 0.0
        return -math.inf
    mu, sd, sb = par[0], par[1], par[2]
    y = np.empty(m)
    slope = np.empty(m)  # dy_j / du_j
    lp = const - 0.5 * ((s - mu) / sd) ** 2 - 0.5 * (b / sb) ** 2
    ds = -(s - mu) / (sd * sd)
    for j in range(m):
        log_sd = s + log_scale[j]
        wj = weights[j]
        slope[j] = math.exp(wj * log_sd)
        y[j] = slope[j] * q[j]
        inv = math.exp(-(1.0 - wj) * log_sd)
        z = q[j] * inv
        lp += -0.5 * z * z - (1.0 - wj) * log_sd
        grad[j] = -z * inv
        ds += (1.0 - wj) * (z * z - 1.0)
    for i in range(k):
        theta[i] = b * line[i]
    for j in range(m):
        yj = y[j]
        for i in range(k):
            theta[i] += modes_t[j, i] * yj
    top = -math.inf
    for i in range(k):
        if theta[i] > top:
            top = theta[i]
    tot = 0.0
    for i in range(k):
        theta[i] = math.exp(theta[i] - top)
        tot += theta[i]
    for i in range(k):
        theta[i] /= tot
    lp += lk.gradient(dense, indptr, indices, delta, complement, offset, counts, theta, 0.0, r,
                      lth, w, g)  # fmt: skip
    df = np.zeros(m)
    gb = -b / (sb * sb)
    for i in range(k):
        dfi = theta[i] * (g[i] - n)
        gb += line[i] * dfi
        for j in range(m):
            df[j] += modes[i, j] * dfi
    for j in range(m):
        grad[j] += df[j] * slope[j]
        ds += df[j] * weights[j] * y[j]
    grad[m] = gb
    grad[m + 1] = ds
    return lp


_smooth_density = _where_set(16, _logp_grad_smooth)  # the smoothness prior's arrays


@nb.njit(cache=True)
def _logp_grad(z, data, work, grad):  # pragma: no cover - compiled
    """Log-density at ``z`` (returned) and its gradient (into ``grad``): the density of the
    target whose slot of ``data`` holds arrays (module docstring), else the ALR density
    (:func:`_logp_grad_alr`)."""
    if data[18] is not None:  # the random walk across rounds (fit_rounds)
        return _walk_density(z, data, work, grad)
    if data[12] is not None:  # the adaptive prior sampled jointly with s = log a
        return _joint_density(z, data, work, grad)
    if data[15] is not None:  # the fixed prior on log-gamma coordinates
        return _gamma_density(z, data, work, grad)
    if data[16] is not None:  # the smoothness prior on its RW2 coefficients
        return _smooth_density(z, data, work, grad)
    if data[17] is not None:  # nested log-ratios (a group measured mostly through its total)
        return _nested_density(z, data, work, grad)
    return _alr_density(z, data, work, grad)


@nb.njit(cache=True)
def _logp_grad_alr(z, data, work, grad):  # pragma: no cover - compiled
    """The ALR density: log-density at ``z`` (returned) and its gradient (into ``grad``), one
    likelihood pass.

    Fixed prior: ``sum_x alpha_x log theta_x``; adaptive prior (``pa`` non-empty):
    ``log sum_j exp(pc_j + pa_j S)``, ``S = sum_x log theta_x``, whose gradient is the fixed
    prior's with every ``alpha_x`` equal to ``abar = E[a | S]``.
    """
    dense, indptr, indices, delta, complement, offset, counts, alpha = data[:8]
    shift, const, pa, pc = data[8:12]
    theta, g, r, lth, w = work
    d = z.shape[0]
    top = 0.0
    for i in range(d):
        if z[i] > top:
            top = z[i]
    s = math.exp(-top)
    for i in range(d):
        s += math.exp(z[i] - top)
    log_norm = top + math.log(s)
    theta[d] = math.exp(-log_norm)
    adaptive = pa is not None
    lp = const
    s_total = -log_norm
    if not adaptive:
        lp -= alpha[d] * log_norm
    for i in range(d):
        log_theta = z[i] - log_norm
        theta[i] = math.exp(log_theta)
        s_total += log_theta
        if not adaptive:
            lp += alpha[i] * log_theta
    lp += lk.gradient(dense, indptr, indices, delta, complement, offset, counts, theta, 0.0, r,
                      lth, w, g)  # fmt: skip
    if adaptive:
        prior_lp, abar = _marginal_prior(s_total, pa, pc)
        lp += prior_lp
        shift_a = shift + (d + 1) * abar
        for i in range(d):
            grad[i] = theta[i] * (g[i] - shift_a) + abar
    else:
        for i in range(d):
            grad[i] = theta[i] * (g[i] - shift) + alpha[i]
    return lp


_alr_density = _where_set(6, _logp_grad_alr)  # every target with a tally's counts but the walk's
_walk_density = _where_set(18, _logp_grad_walk)  # the random walk's arrays (fit_rounds)
