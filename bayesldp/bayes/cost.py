"""What a posterior method will cost on a tally, and the choice of ``fit(method="auto")``.

The cost of every method is a count of row-element operations read off the tally, without
building anything of size ``n`` (for support-form tallies one pass over the boolean support to
count each row's ones):

* ``"exact"``: the Dirichlet mixture's component bound and expansion cost
  (:class:`bayesldp.bayes.exact_expansion._Plan`), computed only when the tally is small; under
  the adaptive prior plus ``SEC_PER_NODE_COMPONENT`` per component and grid node (the evidence
  and the moments of every node);
* ``"hmc"``: a gradient of ``sum_u c_u log(L_u . theta)`` reads every stored entry of the rows
  (``U K`` dense, ``nnz + U`` in support form, less what packed rows save where the likelihood
  takes them, :func:`bayesldp.likelihood.packed_saving`; ``U`` for GRR) and takes ``U``
  logarithms; a leapfrog step adds the metric's ``2 d^2``, ``d = K - 1`` (``2 d`` for the
  diagonal metric of log-gamma coordinates, a fixed prior's default from K = 200 on); NUTS
  makes about ``STEPS_PER_DRAW`` leapfrog steps per iteration, ``chains * (tune + draws)``
  iterations, after a Newton search for the mode (``NEWTON_STEPS`` gradients and Gram
  matrices);
* ``"laplace"``: ``EXPANSIONS`` gradients and Gram matrices of the tally (the Gram matrix costs
  ``sum_u nnz_u^2 / 2`` in support form, ``U K^2`` dense by BLAS), then the HMC's cost on the
  ``2 (K - 1)`` dense pseudo-rows, then ``chains * draws * min(U, IMPORTANCE_ROWS) * K`` for the
  importance check (:mod:`bayesldp.bayes.laplace`).

The constants (seconds per operation) were measured on the 2-core development machine
(benchmarks/posterior_large_n.py); they give the order of magnitude, which is what the choice
needs.  ``auto`` takes ``"exact"`` when the mixture is small (under the adaptive prior: when it
is also predicted to be faster than the HMC), else ``"hmc"`` unless the HMC is
predicted to take more than ``HMC_BUDGET`` seconds and the Laplace method at least
``LAPLACE_GAIN`` times less.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from bayesldp import likelihood
from bayesldp.tally import Tally

__all__ = ["choose_method", "predict_seconds"]

#: seconds per row element read in a gradient or log-likelihood (compiled loop)
SEC_PER_ELEMENT = 1.5e-9
#: seconds per row of a gradient (one log and one division)
SEC_PER_ROW = 1.5e-8
#: seconds per multiply-add of a BLAS product (dense Gram matrices)
SEC_PER_FLOP_BLAS = 3e-10
#: seconds per NUTS iteration outside the leapfrog steps (Python warm-up bookkeeping)
SEC_PER_ITERATION = 3e-5
#: seconds per leapfrog step outside the gradient
SEC_PER_LEAPFROG = 1e-6
#: leapfrog steps per NUTS iteration (typical of these posteriors: 7 to 30)
STEPS_PER_DRAW = 16
#: Newton steps of the HMC's mode search; expansions of the Laplace method
NEWTON_STEPS = 12
EXPANSIONS = 4
#: "exact" when its mixture has at most this many components (and its expansion fits)
EXACT_COMPONENTS = 200_000
#: seconds per mixture component and grid node of "exact" under the adaptive prior (GRR,
#: K = 3, 161 nodes: 0.38 s at 13,608 components, 2.9 s at 100,548)
SEC_PER_NODE_COMPONENT = 1.8e-7
#: the HMC is taken whenever it is predicted to take at most this many seconds
HMC_BUDGET = 30.0
#: otherwise the Laplace method is taken when it is predicted to be this many times faster
LAPLACE_GAIN = 3.0
#: a user-forced method predicted to take longer than this warns
SLOW_SECONDS = 60.0


class _Shape:
    """The sizes of a tally that set the costs: K, U, stored entries, Gram work."""

    def __init__(self, tally: Tally) -> None:
        self.k = tally.k
        self.n = tally.n
        self.rows = tally.n_rows
        self.packed_saving = 0.0  # seconds a gradient saves in packed rows (0: not packed)
        if tally.is_support_form:
            per_row = tally.support.sum(axis=1, dtype=np.int64)
            lo, hi = tally.levels
            if hi < lo:
                per_row = self.k - per_row
            if np.all(per_row == 1):  # GRR: one index per row
                self.elements = float(self.rows)
                self.gram = float(self.rows) * SEC_PER_ELEMENT
            else:
                stored = np.minimum(per_row, self.k - per_row).astype(float)
                self.elements = float(stored.sum() + self.rows)
                self.gram = float(0.5 * (stored @ stored)) * SEC_PER_ELEMENT
                if likelihood._packed_is_cheaper(self.rows, self.k, float(stored.sum())):
                    saving = likelihood.packed_saving(self.rows, self.k, float(stored.sum()))
                    self.packed_saving = saving * SEC_PER_ELEMENT
        else:
            self.elements = float(self.rows * self.k)
            self.gram = float(self.rows * self.k * self.k) * SEC_PER_FLOP_BLAS

    def gradient_seconds(self) -> float:
        """The compressed rows' gradient, less what packed rows save where
        :class:`~bayesldp.likelihood.Likelihood` takes them."""
        return self.elements * SEC_PER_ELEMENT + self.rows * SEC_PER_ROW - self.packed_saving


def _iterations(draws: int, chains: int, options: dict[str, Any]) -> int:
    tune = options.get("tune", 1000)
    tune = tune if isinstance(tune, int) and tune >= 0 else 1000
    return chains * (tune + draws)


def _dense_metric(k: int, options: dict[str, Any], adaptive: bool) -> bool:
    """Whether the HMC adapts a dense metric (ALR coordinates, :func:`bayesldp.bayes.hmc.sample`):
    a fixed prior from ``K = 200`` on moves in log-gamma coordinates with a diagonal one (the
    prior's concentrations, which also decide, are not known here: ``alpha >= 1`` assumed)."""
    from bayesldp.bayes.hmc.gamma import _LOG_GAMMA_MIN_K

    metric = options.get("metric")
    if metric is not None:
        return metric == "dense"
    coordinates = options.get("coordinates", "auto")
    if coordinates == "auto":
        return adaptive or k < _LOG_GAMMA_MIN_K
    return coordinates != "log_gamma"


def _nuts_seconds(gradient: float, k: int, iterations: int, options: dict[str, Any],
                  adaptive: bool = False) -> float:  # fmt: skip
    d = k - 1
    metric = 2.0 * d * (d if _dense_metric(k, options, adaptive) else 1) * SEC_PER_ELEMENT
    leapfrog = gradient + metric + SEC_PER_LEAPFROG
    return iterations * (SEC_PER_ITERATION + STEPS_PER_DRAW * leapfrog)


def _exact_plan(tally: Tally) -> tuple[int, float] | None:
    """``(components, expansion cost)`` of the cheapest exact plan, None when out of reach."""
    if tally.n_rows * tally.k > 100_000 or tally.n > 5_000:
        return None
    from bayesldp.bayes.exact_expansion import _Plan

    best = None
    for strategy in ("residual", "latent"):
        plan = _Plan.build(tally, strategy, EXACT_COMPONENTS)
        if plan.bound <= EXACT_COMPONENTS and (best is None or plan.cost < best[1]):
            best = (int(plan.bound), float(plan.cost))
    return best


def predict_seconds(
    tally: Tally,
    method: str,
    draws: int = 1000,
    chains: int = 4,
    options: Any = None,
    *,
    adaptive: bool = False,
) -> float:
    """Predicted seconds of ``fit(tally, method=method, draws=draws, chains=chains)``.

    ``method`` is "exact", "hmc" or "laplace" (``math.inf`` when "exact" is out of reach);
    other methods return ``nan`` (no model).  See the module docstring for the model.
    """
    options = dict(options or {})
    shape = _Shape(tally)
    iterations = _iterations(draws, chains, options)
    if method == "exact":
        plan = _exact_plan(tally)
        if plan is None:
            return math.inf
        nodes = _grid_nodes(tally.k) if adaptive else 0
        return (
            1e-7 * (plan[1] + 10 * plan[0])
            + 1e-6 * draws
            + (SEC_PER_NODE_COMPONENT * nodes * plan[0])
        )
    if method == "hmc":
        mode = NEWTON_STEPS * (2 * shape.gradient_seconds() + shape.gram)
        gradient = shape.gradient_seconds()
        return mode + _nuts_seconds(gradient, shape.k, iterations, options, adaptive)
    if method == "laplace":
        k = shape.k
        expand = EXPANSIONS * (3 * shape.gradient_seconds() + shape.gram + 1e-8 * k**3)
        surrogate = 2.0 * (k - 1) * k * SEC_PER_ELEMENT + 2 * k * SEC_PER_ROW
        from bayesldp.bayes.laplace import IMPORTANCE_ROWS

        rows = options.get("importance_rows", IMPORTANCE_ROWS)
        rows = min(shape.rows, rows if isinstance(rows, int) else IMPORTANCE_ROWS)
        check = chains * draws * rows * k * SEC_PER_FLOP_BLAS * 4
        return expand + _nuts_seconds(surrogate, k, iterations, options, adaptive) + check
    return math.nan


def _grid_nodes(k: int) -> int:
    """Grid nodes of the default adaptive prior on ``k`` categories."""
    from bayesldp.bayes.prior import AdaptiveDirichlet

    return AdaptiveDirichlet(k).a.shape[0]


def _backend_options(name: str) -> tuple[str, ...]:
    """The options method ``name`` takes (its backend module's ``OPTIONS``)."""
    import importlib

    return importlib.import_module(f"bayesldp.bayes.{name}").OPTIONS


def choose_method(
    tally: Tally, draws: int = 1000, chains: int = 4, options: Any = None, *, adaptive: bool = False
) -> tuple[str, str, dict[str, float]]:
    """The method ``fit(method="auto")`` runs, why, and the predicted seconds of each.

    Returns ``(method, reason, predictions)``: "exact" when the exact Dirichlet mixture has at
    most ``EXACT_COMPONENTS`` components (under the adaptive prior, whose grid multiplies its
    cost, only when it is also predicted to be faster than the HMC); else "hmc" when it is
    predicted to take at most ``HMC_BUDGET`` s or the Laplace method would not be
    ``LAPLACE_GAIN`` times faster; else "laplace".
    """
    options = dict(options or {})
    predicted = {name: predict_seconds(tally, name, draws, chains, options, adaptive=adaptive)
                 for name in ("exact", "hmc", "laplace")}  # fmt: skip
    for name in predicted:  # a method that does not take the options given is not a candidate
        if not set(options) <= set(_backend_options(name)):
            predicted[name] = math.inf
    sizes = f"K = {tally.k}, n = {tally.n:,}, {tally.n_rows:,} distinct rows"
    if math.isfinite(predicted["exact"]) and (
        not adaptive or predicted["exact"] <= predicted["hmc"]
    ):
        plan = _exact_plan(tally)
        return ("exact", f"{sizes}: the exact Dirichlet mixture has at most {plan[0]:,} "
                f"components (<= {EXACT_COMPONENTS:,}), predicted {predicted['exact']:.2g} s; "
                "independent exact draws", predicted)  # fmt: skip
    hmc_s, lap_s = predicted["hmc"], predicted["laplace"]
    if hmc_s <= HMC_BUDGET or hmc_s < LAPLACE_GAIN * lap_s:
        return ("hmc", f"{sizes}: NUTS on the exact likelihood predicted {hmc_s:.3g} s "
                f"(Laplace {lap_s:.3g} s); exact mixture out of reach", predicted)  # fmt: skip
    return ("laplace", f"{sizes}: NUTS on the exact likelihood predicted {hmc_s:.3g} s, over "
            f"{HMC_BUDGET:g} s; the Laplace approximation with a PSIS check predicted "
            f"{lap_s:.3g} s (its cost per draw does not grow with n)", predicted)  # fmt: skip
