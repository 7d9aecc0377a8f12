"""The chains: from a target to draws (:func:`_run`): the mode, the coordinates and the
compiled kernels a run needs, the starting points, each chain's warm-up and sampling
(:func:`_chain`) on threads (:func:`_run_chains`), and the output with its statistics.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from typing import Any

import numpy as np

from bayesldp import likelihood as lk
from bayesldp.bayes import _feedback
from bayesldp.bayes._types import SamplerOutput
from bayesldp.bayes.hmc.adaptation import (
    _default_accept,
    _DualAveraging,
    _init_step_size,
    _momentum_factor,
    _try_momentum_factor,
    _windows,
)
from bayesldp.bayes.hmc.gamma import _GammaTarget
from bayesldp.bayes.hmc.joint import _JointTarget
from bayesldp.bayes.hmc.nested import _information, _NestedTarget, _nesting, _shared_ratio
from bayesldp.bayes.hmc.targets import (
    _NO_JOINT,
    _NO_NEST,
    _NO_SMOOTH,
    _NO_WALK,
    _find_mode,
    _Target,
)
from bayesldp.bayes.hmc.tree import _N_SLOTS, _dot, _leapfrog, _matvec, _transition

_BAR_STEP = 20  # iterations between progress-bar updates


def _chain(target: _Target, data: tuple, z: np.ndarray, rng: np.random.Generator, tune: int,
           draws: int, target_accept: float, max_depth: int, laplace: np.ndarray,
           diag: bool, bar: Any = None,
           stop: threading.Event | None = None,
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray, int, float]:  # fmt: skip
    """Warm-up and sampling of one chain.

    ``bar`` (a tqdm bar or None) advances every ``_BAR_STEP`` iterations, between calls of the
    compiled transition; when ``stop`` is set (another chain failed or the user pressed Ctrl-C)
    the chain returns at the next iteration with :class:`_Stopped`.  Returns the kept draws of ``z``
    (draws, d), float statistics (draws, 4) = (lp, energy, acceptance, step size), integer
    statistics (draws, 3) = (tree depth, steps, diverged), the number of warm-up divergences
    and the final step size.
    """
    d = target.d
    z = np.array(z, dtype=float)
    lp, grad = target(z[None, :])
    lp, grad = float(lp[0]), np.ascontiguousarray(grad[0])
    rstate = rng.integers(0, 2**64 - 1, size=1, dtype=np.uint64, endpoint=True)
    noise = rng.standard_normal((tune + draws, d))
    inv_metric = laplace.copy()
    factor = _try_momentum_factor(inv_metric)
    if factor is None:  # no usable curvature at the start (a posterior piled on a face)
        inv_metric = np.ones_like(laplace) if laplace.shape[0] == 1 else np.eye(d)
        factor = _momentum_factor(inv_metric)
    ws = np.empty((_N_SLOTS, d))
    st_vec = np.empty((max_depth + 1, 7, d))
    st_sc = np.empty((max_depth + 1, 3))
    st_depth = np.empty(max_depth + 1, dtype=np.int64)
    work = target.work()
    eps = _init_step_size(z, grad, lp, 1.0, inv_metric, factor, rng.standard_normal((100, d)),
                          data, ws, work)  # fmt: skip
    adapt = _DualAveraging(eps, target_accept)
    windows = _windows(tune)
    window = 0
    m2_shape = (1, d) if diag else (d, d)  # a diagonal metric is kept as its (1, d) diagonal
    w_count, w_mean, w_m2 = 0, np.zeros(d), np.zeros(m2_shape)
    shrink = 5.0 if diag else d + 3.0  # Stan's diagonal regularisation; dense: d + 3 draws
    divergences = 0
    out_z = np.empty((draws, d))
    out_sc = np.empty((draws, 4))
    out_int = np.empty((draws, 3), dtype=np.int64)
    kept_div = 0
    for it in range(tune + draws):
        if stop is not None and stop.is_set():
            raise _Stopped
        lp, energy, depth, n_steps, div, accept = _transition(
            z, grad, lp, eps, inv_metric, factor, max_depth, noise[it], rstate, data, ws, st_vec,
            st_sc, st_depth, work,
        )  # fmt: skip
        if bar is not None:
            if (it + 1) % _BAR_STEP == 0 or it + 1 == tune or it + 1 == tune + draws:
                bar.update(it + 1 - bar.n)
            if it + 1 == tune:
                bar.set_postfix_str("sampling", refresh=False)
            elif div and it >= tune:
                kept_div += 1
                bar.set_postfix_str(f"sampling, {kept_div} divergences", refresh=False)
        if it >= tune:
            i = it - tune
            out_z[i] = z
            out_sc[i] = lp, energy, accept, eps
            out_int[i] = depth, n_steps, div
            continue
        divergences += div
        eps = adapt.update(accept)
        if window < len(windows) and it >= windows[window][0]:
            w_count += 1
            delta = z - w_mean
            w_mean += delta / w_count
            w_m2 += (delta * (z - w_mean))[None, :] if diag else np.outer(delta, z - w_mean)
            if it + 1 == windows[window][1]:
                # end of a metric window: new metric (shrunk towards the Laplace covariance),
                # new initial step size, dual averaging restarted
                cov = w_m2 / max(w_count - 1, 1)
                new_metric = (w_count * cov + shrink * laplace) / (w_count + shrink)
                if not diag:
                    new_metric = 0.5 * (new_metric + new_metric.T)
                new_factor = _try_momentum_factor(np.ascontiguousarray(new_metric))
                if new_factor is not None:  # else the window's draws collapsed: keep the metric
                    inv_metric, factor = np.ascontiguousarray(new_metric), new_factor
                trials = rng.standard_normal((100, d))
                eps = _init_step_size(z, grad, lp, eps, inv_metric, factor, trials, data, ws,
                                      work)  # fmt: skip
                adapt.restart(eps)
                w_count, w_mean, w_m2 = 0, np.zeros(d), np.zeros(m2_shape)
                window += 1
        if it + 1 == tune:
            eps = adapt.final()
    return out_z, out_sc, out_int, divergences, eps


def _pending_kernels(target: _Target, max_depth: int, joint: bool, gamma: bool = False,
                     nested: bool = False) -> list[tuple[Any, tuple]]:  # fmt: skip
    """The compiled kernels a run calls from Python, each with arguments of the types it will
    be called with (for :func:`bayesldp.bayes._feedback.compile_notice`)."""
    d = target.k if joint or gamma else target.d
    data = target.data()
    if nested:  # the nested coordinates' codes and order (see _NestedTarget)
        data = (*data[:17], (np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)), *data[18:])
    if joint:  # the joint scheme's slots hold arrays (see _JointTarget)
        data = (
            *data[:10],
            None,
            None,
            np.empty(0),
            np.empty(0, dtype=np.int64),
            np.empty(0),
            None,
            None,
            *data[17:],
        )
    elif gamma:  # the log-gamma marker (see _GammaTarget)
        data = (*data[:10], None, None, *_NO_JOINT, np.empty(0), *_NO_SMOOTH, *_NO_NEST, *_NO_WALK)
    z, grad, work = np.zeros(d), np.zeros(d), target.work()
    mat, ws = np.eye(d), np.empty((_N_SLOTS, d))
    lik = target.lik
    rows = np.empty(lik.n_rows)
    return [
        (lk.gradient, (*lik.arrays, lik.counts, np.zeros(lik.k), 0.0, rows, rows, rows,
                       np.zeros(lik.k))),
        (_leapfrog, (z, grad, z, grad, 1.0, mat, data, work)),
        (_matvec, (mat, z, z)),
        (_dot, (z, z)),
        (_transition, (z, grad, 0.0, 1.0, mat, mat, max_depth, np.zeros(d),
                       np.zeros(1, dtype=np.uint64), data, ws,
                       np.empty((max_depth + 1, 7, d)), np.empty((max_depth + 1, 3)),
                       np.empty(max_depth + 1, dtype=np.int64), work)),
    ]  # fmt: skip


class _Stopped(Exception):
    """Raised inside a chain when its ``stop`` event is set."""


def _run_chains(one_chain: Any, chains: int, cores: int, stop: threading.Event) -> None:
    """Run ``one_chain(c)`` for every chain, on ``cores`` threads (the compiled transition
    releases the GIL).

    Ctrl-C (KeyboardInterrupt) or an error in one chain sets ``stop``; every chain returns at its
    next iteration, and the exception propagates: nothing is returned, nothing half-written.
    """
    if cores <= 1 or chains <= 1:
        for c in range(chains):
            one_chain(c)
        return
    pool = ThreadPoolExecutor(max_workers=cores, thread_name_prefix="bayesldp-chain")
    futures = [pool.submit(one_chain, c) for c in range(chains)]
    try:
        pending = set(futures)
        while pending:  # wait with a timeout: Ctrl-C reaches the main thread between waits
            done, pending = wait(pending, timeout=0.1, return_when=FIRST_EXCEPTION)
            for future in done:
                if future.exception() is not None:
                    raise future.exception()
    except BaseException:
        stop.set()
        for future in futures:
            future.cancel()
        raise
    finally:
        pool.shutdown(wait=True)


def _run(target: _Target, rng: np.random.Generator, draws: int, chains: int, tune: int,
         max_treedepth: int, target_accept: float | None, metric: str, started: float,
         random_seed: int | None, scheme: str = "marginal", cores: int = 1,
         progressbar: bool = False, coordinates: str = "alr",
         nest: bool = False) -> SamplerOutput:  # fmt: skip
    joint = scheme == "joint" and target.adaptive is not None
    gamma = coordinates == "log_gamma"
    smooth = coordinates == "rw2"
    walk = coordinates == "walk"
    shared, codes = 1.0, None
    if smooth:  # the target found its mode; the Laplace covariance there, then the map
        _feedback.compile_notice(_pending_kernels(target, max_treedepth, joint, gamma))
        mode, laplace = target.decorrelate(target.start, target.laplace(target.start))
    elif walk:  # the target found its mode; the Laplace covariance there
        _feedback.compile_notice(_pending_kernels(target, max_treedepth, False))
        mode, laplace = target.start, target.laplace(target.start)
    else:  # the mode (numpy), then the coordinates, then the compiled kernels they need
        alpha = target.alpha
        mode, laplace = _find_mode(target, np.log(alpha[:-1]) - np.log(alpha[-1]))
        if coordinates == "alr":
            at_mode = target.theta(mode[None, :])[0][0]
            m, m_free = _information(target, at_mode)
            shared = _shared_ratio(m, m_free)
            codes = _nesting(m, m_free, at_mode) if nest else None
        _feedback.compile_notice(_pending_kernels(target, max_treedepth, joint, gamma,
                                                  codes is not None))  # fmt: skip
    if target_accept is None:  # nested log-ratios remove what 0.95 was for (_default_accept)
        target_accept = _default_accept(1.0 if codes is not None else shared,
                                        smooth or joint or walk)  # fmt: skip
    if joint:  # from the marginal mode, a pilot; then (u, log a) jointly
        target = _JointTarget(target, mode, codes)
        mode = target.start
        laplace = target.laplace(mode)
    elif codes is not None:  # nested log-ratios from the ALR mode
        target = _NestedTarget(target, mode, codes)
        mode = target.start
        laplace = target.laplace(mode)
    elif gamma:  # from the ALR mode to log-gamma coordinates, a diagonal start
        target = _GammaTarget(target, mode)
        mode, laplace = target.start, target.laplace
    d = target.d
    if metric == "diag" and laplace.shape[0] == d and d > 1:
        laplace = np.ascontiguousarray(np.diag(laplace)[None, :])
    if metric == "diag" and d > 1:
        z0 = mode + rng.standard_normal((chains, d)) * np.sqrt(laplace[0])
    else:
        z0 = mode + rng.standard_normal((chains, d)) @ np.linalg.cholesky(laplace).T
    logp0, _ = target(z0)
    z0[~np.isfinite(logp0)] = mode  # a start in a zero-likelihood region: use the mode
    data = target.data()
    out_z = np.empty((chains, draws, d))
    sc = np.empty((chains, draws, 4))
    ints = np.empty((chains, draws, 3), dtype=np.int64)
    tune_divergences, step_sizes = [0] * chains, [0.0] * chains
    children = rng.spawn(chains)  # drawn here, in order: the draws do not depend on `cores`
    stop = threading.Event()
    bars = [_feedback.progress_bar(tune + draws, f"chain {c}", progressbar, position=c)
            for c in range(chains)]  # fmt: skip

    def one_chain(c: int) -> None:
        out_z[c], sc[c], ints[c], n_div, eps = _chain(
            target, data, z0[c], children[c], tune, draws, target_accept, max_treedepth,
            laplace, metric == "diag", bars[c] if progressbar else None, stop,
        )  # fmt: skip
        tune_divergences[c] = int(n_div)
        step_sizes[c] = float(eps)

    try:
        _run_chains(one_chain, chains, cores, stop)
    finally:
        for bar in bars:
            bar.close()
    extra = {}
    if joint or smooth:  # theta and the hyperparameter sampled with it
        theta, hyper = target.theta_hyper(out_z.reshape(-1, d))
        theta = theta.reshape(chains, draws, -1)
        extra["a" if joint else target.prior.HYPER] = hyper.reshape(chains, draws)
    elif walk:  # theta (chains, draws, T, K), the step size and the walk's variables
        theta, extra = target.draws(out_z)
    else:
        theta, _ = target.theta(out_z)
    stats = {
        "diverging": ints[:, :, 2].astype(bool),
        "energy": sc[:, :, 1].copy(),
        "tree_depth": ints[:, :, 0].copy(),
        "n_steps": ints[:, :, 1].copy(),
        "step_size": sc[:, :, 3].copy(),
        "lp": sc[:, :, 0].copy(),
        "acceptance_rate": sc[:, :, 2].copy(),
    }
    info = {
        "backend": "bayesldp.hmc",
        "sampler": "NUTS (multinomial, generalised no-U-turn) on "
        + {
            "log_gamma": "log-gamma",
            "rw2": "RW2-coefficient",
            "walk": "random-walk (non-centred, zero-sum)",
        }.get(coordinates, "ALR" if codes is None else "nested ALR")
        + " coordinates, numba"
        + (", adaptive prior: (u, log a) jointly, tails rescaled by a" if joint else ""),
        "coordinates": "nested" if codes is not None else coordinates,
        "tune": tune,
        "draws": draws,
        "chains": chains,
        "target_accept": target_accept,
        "shared_information": shared,
        "nested_group": None if codes is None else np.flatnonzero(codes).tolist(),
        "max_treedepth": max_treedepth,
        "metric": metric,
        "random_seed": random_seed,
        "cores": cores,
        "tune_divergences": tune_divergences,
        "step_size": step_sizes,
        "wall_time": time.perf_counter() - started,
    }
    if joint:
        info["adaptive_scheme"] = "joint"
        info["pilot_a"] = float(np.exp(target.start[-1]))
        info["tail_weights"] = target.weights.tolist()
        info["effective_counts"] = target.effective_counts.tolist()
    elif target.adaptive is not None:
        info["adaptive_scheme"] = "marginal"
    return SamplerOutput(theta=theta, sample_stats=stats, info=info, extra=extra)
