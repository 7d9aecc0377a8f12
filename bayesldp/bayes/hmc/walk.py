"""The random walk across rounds on the package's NUTS: :func:`bayesldp.fit_rounds`' default.

The model is :mod:`bayesldp.bayes.dynamic`'s (a Gaussian random walk on the centred
log-frequencies with a learnt step size, one tally per round), the coordinates PyMC's for the
same model (non-centred; :class:`_WalkTarget`), the density compiled
(:func:`bayesldp.bayes.hmc.walk_density._logp_grad_walk`) and sampled by the kernels of every
other fit (:func:`bayesldp.bayes.hmc.run._run`): the posterior mode by L-BFGS, the Laplace
covariance there as the first metric, Stan's warm-up windows, multinomial NUTS.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from bayesldp._validation import (
    as_generator,
    check_choice,
    check_int,
    check_memory,
    check_open_unit,
)
from bayesldp.bayes._types import SamplerOutput
from bayesldp.bayes.hmc.run import _run
from bayesldp.bayes.hmc.targets import _CompiledTarget
from bayesldp.errors import InvalidInputError
from bayesldp.likelihood import Likelihood
from bayesldp.tally import Tally

#: options of ``fit_rounds(method="hmc", ...)`` besides draws, tune and chains
OPTIONS = ("max_treedepth", "metric")
#: the largest dimension sampled with a dense metric by default (O(d^2) per leapfrog step)
DENSE_METRIC_MAX_DIM = 400


def zero_sum(y: np.ndarray) -> np.ndarray:
    """``B y`` (..., K) for ``y`` (..., K - 1): PyMC's zero-sum map (orthonormal columns summing
    to 0), :func:`bayesldp.bayes.hmc.walk_density._to_zero_sum` in numpy."""
    k = y.shape[-1] + 1
    total = y.sum(axis=-1, keepdims=True)
    return np.concatenate([y - total / (np.sqrt(k) + k), -total / np.sqrt(k)], axis=-1)


def block_tally(rounds: Sequence[Tally]) -> Tally:
    """The rounds as one tally over ``T K`` categories: round ``t``'s rows on categories ``t K ..
    t K + K - 1``, whose likelihood at ``Theta = (theta_1, ..., theta_T) / T`` is the rounds'
    likelihoods at ``theta_t`` summed, up to a constant (module
    :mod:`bayesldp.bayes.hmc.walk_density`).

    Support form where every round has it with the same levels ``(lo, hi)``: a row's support on
    its block, levels ``(lo, lo + T (hi - lo))`` (``(hi, hi + T (lo - hi))`` on the complement
    of the support within the block when ``hi < lo``), so that ``L'_u . Theta = lo + (hi - lo)
    M_u . theta_t``; else dense rows, zero off their block (``L'_u . Theta = L_u . theta_t /
    T``, a row's scale).  Each round's identical rows are merged first (unary encoding's tallies
    keep a row per report: 20,000 rows against at most 4,096 distinct ones at K = 12).
    """
    rounds = [tally.deduplicated() for tally in rounds]
    k, n_rounds = rounds[0].k, len(rounds)
    sizes = [tally.n_rows for tally in rounds]
    starts = np.concatenate([[0], np.cumsum(sizes)])
    counts = np.concatenate([tally.counts for tally in rounds])
    levels = {tally.levels for tally in rounds}
    support_form = all(tally.is_support_form for tally in rounds) and len(levels) == 1
    what = f"the rounds' block likelihood ({int(starts[-1]):,} rows x {n_rounds * k:,})"
    check_memory((1.0 if support_form else 8.0) * starts[-1] * n_rounds * k, what,
                 "fit fewer rounds at once, or fit each round alone (bayesldp.fit)")  # fmt: skip
    block = np.zeros((int(starts[-1]), n_rounds * k), dtype=bool if support_form else float)
    if support_form:
        lo, hi = rounds[0].levels
        base, top = (hi, lo) if hi < lo else (lo, hi)
    for t, tally in enumerate(rounds):  # one pass per round
        rows = slice(starts[t], starts[t + 1])
        if support_form:
            block[rows, t * k : (t + 1) * k] = ~tally.support if hi < lo else tally.support
        else:
            block[rows, t * k : (t + 1) * k] = tally.rows
    zero = np.zeros(n_rounds * k)
    if support_form:
        return Tally(counts, support=block, levels=(base, base + n_rounds * (top - base)),
                     stat=zero, family="rounds", dedupe=False)  # fmt: skip
    return Tally(counts, rows=block, stat=zero, family="rounds", dedupe=False)


class _WalkTarget(_CompiledTarget):
    """The posterior of :func:`bayesldp.fit_rounds`' random walk on ``q = (v, z_2 .. z_T, s)``
    (:mod:`bayesldp.bayes.hmc.walk_density`): ``d = (K - 1) T + 1``, without ``s`` when the
    prior fixes the step.  ``start`` is the posterior mode (L-BFGS from uniform rounds)."""

    def __init__(self, rounds: Sequence[Tally], prior: Any) -> None:
        from scipy.optimize import minimize

        self.n_rounds, self.k = len(rounds), rounds[0].k
        self.m = self.k - 1
        self.learnt = prior.step is None
        self.d = self.m * self.n_rounds + int(self.learnt)
        self.adaptive = None
        self.lik = Likelihood(block_tally(rounds))
        par = np.array([prior.initial_sd, prior.step_scale,
                        0.0 if self.learnt else prior.step, self.n_rounds])  # fmt: skip
        self._data = (*(None,) * 18, (*self.lik.arrays, self.lik.counts, par))
        self.step = prior.step
        q0 = np.zeros(self.d)
        if self.learnt:
            q0[-1] = np.log(0.5 * prior.step_scale)

        def neg(q: np.ndarray) -> tuple[float, np.ndarray]:
            lp, grad = self(q[None, :])
            return -float(lp[0]), -grad[0]

        with np.errstate(all="ignore"):
            best = minimize(neg, q0, jac=True, method="L-BFGS-B", options={"maxiter": 1000})
        self.start = best.x if np.isfinite(best.fun) and best.fun <= neg(q0)[0] else q0

    def work(self) -> tuple:
        """Scratch arrays of the likelihood operator: ``Theta`` and ``g`` (T K,), three of the
        block tally's rows."""
        rows = self.lik.n_rows
        return (np.empty(self.lik.k), np.empty(self.lik.k), np.empty(rows), np.empty(rows),
                np.empty(rows))  # fmt: skip

    def draws(self, q: np.ndarray) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """``theta`` (..., T, K) at ``q`` (..., d) and the walk's variables: ``eta`` (..., T,
        K), ``sigma`` (...), ``eta_init`` (..., K) and ``innovation`` (..., T - 1, K), each as
        PyMC's model names them (:func:`bayesldp.bayes.dynamic.build_rounds_model`)."""
        lead = q.shape[:-1]
        t, m = self.n_rounds, self.m
        v = q[..., :m]
        z = q[..., m : m * t].reshape(*lead, t - 1, m)
        sigma = np.exp(q[..., -1]) if self.learnt else np.full(lead, float(self.step))
        walked = np.cumsum(z, axis=-2) * sigma[..., None, None]
        eta = zero_sum(np.concatenate([v[..., None, :], v[..., None, :] + walked], axis=-2))
        theta = np.exp(eta - eta.max(axis=-1, keepdims=True))
        theta /= theta.sum(axis=-1, keepdims=True)
        extra = {"eta": eta, "sigma": sigma, "eta_init": zero_sum(v), "innovation": zero_sum(z)}
        return theta, extra


def sample_walk(
    rounds: Sequence[Tally],
    prior: Any,
    *,
    draws: int,
    tune: int,
    chains: int,
    random_seed: Any,
    target_accept: float,
    progressbar: bool = False,
    cores: int = 1,
    **options: Any,
) -> SamplerOutput:
    """NUTS draws of :func:`bayesldp.fit_rounds`' posterior (checked rounds and prior).

    ``options``: ``max_treedepth`` (default 10) and ``metric`` ("dense" or "diag"; default
    dense up to :data:`DENSE_METRIC_MAX_DIM` free dimensions).  Returns ``theta`` (chains,
    draws, T, K) with the NUTS statistics and, in ``extra``, the walk's variables
    (:meth:`_WalkTarget.draws`).
    """
    started = time.perf_counter()
    unknown = sorted(set(options) - set(OPTIONS))
    if unknown:
        raise InvalidInputError(
            f"options: {unknown[0]!r} is not an option of fit_rounds' method 'hmc'; valid: "
            f"{list(OPTIONS)} (PyMC's sample arguments need method='nuts')"
        )
    max_treedepth = check_int(options.get("max_treedepth", 10), "max_treedepth", 1)
    target_accept = check_open_unit(target_accept, "target_accept")
    rng = as_generator(random_seed)
    with np.errstate(all="ignore"):
        target = _WalkTarget(rounds, prior)
        default = "dense" if target.d <= DENSE_METRIC_MAX_DIM else "diag"
        metric = check_choice(options.get("metric", default), "metric", ("dense", "diag"))
        return _run(target, rng, draws, chains, tune, max_treedepth, target_accept, metric,
                    started, random_seed, cores=check_int(cores, "cores"),
                    progressbar=bool(progressbar), coordinates="walk")  # fmt: skip


def fit_walk(rounds: list[Tally], prior: Any, category: list[Any], round_coord: list[Any],
             sampling: dict[str, Any], options: dict[str, Any]) -> Any:  # fmt: skip
    """:func:`sample_walk`'s draws as an InferenceData (posterior and sample_stats) labelled as
    :func:`bayesldp.fit_rounds`' PyMC route labels them (``sampling``: its arguments)."""
    import xarray as xr

    from bayesldp.bayes._arviz import import_arviz
    from bayesldp.bayes.inference_data import _standard_attrs

    az = import_arviz()
    out = sample_walk(rounds, prior, **sampling, **options)
    chain_draw = {"chain": np.arange(out.theta.shape[0]), "draw": np.arange(out.theta.shape[1])}
    dims = {"theta": ("round", "category"), "eta": ("round", "category"), "sigma": (),
            "eta_init": ("category",), "innovation": ("step", "category")}  # fmt: skip
    variables = {"theta": out.theta, **out.extra}
    if prior.step is not None:  # a fixed step is not a posterior variable (as in PyMC's route)
        del variables["sigma"]
    if len(rounds) == 1:
        del variables["innovation"]
    coords = {**chain_draw, "round": round_coord, "category": category,
              "step": list(range(1, len(rounds)))}  # fmt: skip
    standard = _standard_attrs()
    posterior = xr.Dataset(
        {name: (("chain", "draw", *dims[name]), value) for name, value in variables.items()},
        coords=coords, attrs=dict(standard),
    )  # fmt: skip
    stats = xr.Dataset({name: (("chain", "draw"), value)
                        for name, value in out.sample_stats.items()},
                       coords=chain_draw, attrs=dict(standard))  # fmt: skip
    return az.InferenceData(posterior=posterior, sample_stats=stats)
