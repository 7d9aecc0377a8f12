"""The experiments of the accuracy study, one per paper, and the layout of their records.

``[mle]`` (Lopuhaä-Zwakenberg et al. 2020) is :func:`run_mle`, ``[em_mr]`` (Ye et al.)
:func:`run_em_mr` and ``[sampling]`` (Biswas et al. 2022) :func:`run_sampling` (with its exact
checks of the paper's formulas); :func:`run_study` runs the sections of a spec.  Here too: the
seeding of every cell and repeat, the Cramer-Rao traces, and the columns of the records
(:data:`CELL_COLUMNS`, :data:`METRIC_COLUMNS`, :data:`CHECK_COLUMNS`).  The papers are cited in full
in :mod:`bayesldp.workflows.accuracy`.

Truth is the population theta throughout.  Per repeat: ``MSE = mean_x (est_x - theta_x)^2``,
``TV = 1/2 sum_x |est_x - theta_x|``, ``error/CR = sum_x (est_x - theta_x)^2 / trace CR``, where
CR is the Cramer-Rao bound of n reports at theta (:func:`bayesldp.bounds.cramer_rao`; closed
form for GRR, a Monte Carlo average of the per-hash Fisher information for OLH, ``1/pi`` times
the GRR bound under node sampling).  An estimator that is not unbiased (Norm-Sub, MLE, EM, ...)
can have error/CR < 1.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

import bayesldp
from bayesldp import bounds
from bayesldp.errors import InvalidInputError
from bayesldp.mechanisms.sampling import NodeSampling
from bayesldp.simulate import mean_squared_error, total_variation, zipf_population
from bayesldp.workflows.spec import SpecError
from bayesldp.workflows.spec.accuracy import (
    EM_MR_POPULATIONS,
    SECTIONS,
    binomial_law,
    resolve_section,
)

#: the paper whose experiments each section reruns (short citations; the full references are in
#: :mod:`bayesldp.workflows.accuracy` and on the documentation's references page)
PAPERS = {
    "mle": "Lopuhaä-Zwakenberg et al. 2020",
    "em_mr": "Ye et al.",
    "sampling": "Biswas et al. 2022",
}
SECTION_IDS = {"mle": 0, "em_mr": 1, "sampling": 3}  # fixed ids: they key the random streams
MECHANISM_IDS = {"GRR": 1, "SUE": 2, "OUE": 3, "OLH": 4}
LABELS = {
    "oracle": "oracle",
    "norm_sub": "Norm-Sub",
    "mle": "MLE",
    "em": "EM",
    "em_mr": "EM-MR",
    "ibu": "IBU",
    "c": "c (naive)",
    "g": "g (unbiased)",
    "c_hat": "c_hat (plug-in)",
    "oracle_sampled": "oracle on S",
}

#: Columns identifying a cell of each section (plus ``repeat`` and ``estimator`` in the records).
CELL_COLUMNS = {
    "mle": ["mechanism", "k", "n", "epsilon"],
    "em_mr": ["mechanism", "population", "k", "n", "epsilon"],
    "sampling": ["population", "k", "n", "epsilon", "pi"],
}
#: Metric columns of the per-repeat records.
METRIC_COLUMNS = {
    "mle": ["mse", "tv", "cr_ratio", "seconds"],
    "em_mr": ["mse", "tv", "cr_ratio", "seconds", "iterations"],
    "sampling": ["mse", "tv", "cr_ratio"],
}
#: Columns of the node-sampling formula checks (one row per cell and estimator c, g, c_hat).
CHECK_COLUMNS = [
    "population",
    "k",
    "n",
    "epsilon",
    "pi",
    "estimator",
    "p_mean_as_paper",
    "p_unbiased",
    "var_ratio",
    "var_star_ratio",
    "var_star_se",
    "exact_var_sum",
    "empirical_var_sum",
]


def sampling_theta(pop: Mapping[str, Any], k: int) -> np.ndarray:
    """The population theta on ``0..k-1``: the law cut to the domain (mass beyond it is at most
    ``TRUNCATION_TOLERANCE``, checked with the spec) and renormalised."""
    law = np.zeros(k)
    full = binomial_law(pop)
    m = min(k, full.size)
    law[:m] = full[:m]
    return law / law.sum()


# ============================================================================ seeding, bounds
def _seed(*keys: float | int) -> np.random.SeedSequence:
    """A child stream keyed by the cell's values (floats keyed at 1e-6 resolution)."""
    ints = [round(v * 1_000_000) if isinstance(v, float) else int(v) for v in keys]
    return np.random.SeedSequence(ints)


def _eps_key(eps: float) -> int:
    return round(float(eps) * 1_000_000)


def make_mechanism(name: str, k: int, epsilon: float) -> Any:
    """``bayesldp.<name>(k, epsilon)``."""
    return getattr(bayesldp, name)(int(k), float(epsilon))


def _scores(estimate: np.ndarray, theta: np.ndarray, cr_trace: float) -> dict[str, float]:
    """One repeat's errors: ``mse`` (mean over x), ``tv`` and ``cr_ratio``, the summed squared
    error over the trace of the Cramer-Rao bound (``K * mse / trace CR``)."""
    mse = mean_squared_error(estimate, theta)
    return {
        "mse": mse,
        "tv": total_variation(estimate, theta),
        "cr_ratio": theta.size * mse / cr_trace,
    }


def grr_cr_trace(mech: Any, theta: np.ndarray, n: float) -> float:
    """Trace of the Cramer-Rao bound of GRR at ``theta`` for ``n`` reports, in closed form.

    The report law ``p_y = q + (p - q) theta_y`` is an affine bijection of theta onto an open
    subset of the simplex, so the bound is the multinomial's mapped back:
    ``(diag(p_y) - p_y p_y^T) / (n (p - q)^2)``, trace ``(1 - sum_y p_y^2) / (n (p - q)^2)``
    (equal to :func:`bayesldp.bounds.cramer_rao`, which costs O(K^3); checked in the tests).
    """
    p, q = mech.p, mech.q
    py = q + (p - q) * theta
    return float((1.0 - np.sum(py * py)) / (n * (p - q) ** 2))


def _trace_from_information(info: np.ndarray, n: float) -> float:
    """``trace(A (n I)^-1 A^T)`` with ``A = [I_{K-1}; -1^T]`` (the bound on all K coordinates)."""
    cov = np.linalg.inv(info) / n
    return float(np.trace(cov) + cov.sum())


def olh_fisher_information(mech: Any, theta: np.ndarray, hashes: int, rng: Any) -> np.ndarray:
    """Fisher information of one OLH report, averaged over ``hashes`` random hash functions.

    The report is ``(a, b, y)``; the hash ``h_{a,b}`` has a law free of theta (ancillary), so the
    information of one report is ``E_h[I_h(theta)]``, ``I_h`` that of the K x g channel given
    the hash (:meth:`bayesldp.OLH.channel_given_hash`, :func:`bayesldp.bounds.
    fisher_information`).  Estimated by the mean over ``hashes`` draws of ``(a, b)`` from the
    mechanism's own law (a in 1..P-1, b in 0..P-1).
    """
    gen = np.random.default_rng(rng)
    a = gen.integers(1, mech.prime, size=hashes)
    b = gen.integers(0, mech.prime, size=hashes)
    total = np.zeros((mech.k - 1, mech.k - 1))
    for ai, bi in zip(a.tolist(), b.tolist(), strict=True):
        total += bounds.fisher_information(mech.channel_given_hash(ai, bi), theta)
    return total / hashes


def cr_trace(mech: Any, theta: np.ndarray, n: int, *, hashes: int = 0, rng: Any = None) -> float:
    """Trace of the Cramer-Rao bound at ``theta`` for ``n`` reports of ``mech``."""
    if mech.name == "GRR":
        return grr_cr_trace(mech, theta, n)
    if mech.name == "OLH":
        return _trace_from_information(olh_fisher_information(mech, theta, hashes, rng), n)
    return float(np.trace(bounds.cramer_rao(mech, theta, n)))


# ============================================================================ the runs
Progress = Callable[[str], None]


def _quiet(_: str) -> None:
    return None


def _estimator_rows(
    tally: Any,
    methods: Any,
    theta: np.ndarray,
    trace: float,
    cell: dict[str, Any],
    *,
    iterations: bool = False,
) -> list[dict[str, Any]]:
    """One row per estimator of ``methods`` on ``tally``: the ``cell``'s keys, the estimator,
    its scores against ``theta`` (and the CR ``trace``), its time and, if asked, iterations."""
    rows = []
    for method in methods:
        est, secs = _timed_estimate(tally, method, _options(method))
        row = {**cell, "estimator": method, **_scores(est.frequencies, theta, trace),
               "seconds": secs}  # fmt: skip
        if iterations:
            row["iterations"] = est.iterations
        rows.append(row)
    return rows


def _timed_estimate(tally: Any, method: str, options: Mapping[str, Any]) -> tuple[Any, float]:
    start = time.perf_counter()
    est = bayesldp.estimate(tally, method, **options)
    return est, time.perf_counter() - start


def _options(method: str) -> dict[str, Any]:
    """Keyword options of ``bayesldp.estimate`` for a study estimator name."""
    return {"std_errors": False} if method == "mle" else {}


def _warm_up(mechanisms: Iterable[str], k: int, methods: Iterable[str]) -> None:
    """Run every estimator once on a small tally of each mechanism, untimed, so that loading
    numba's compiled EM / Newton kernels is not charged to the first timed estimate."""
    for name in mechanisms:
        tally = make_mechanism(name, k, 1.0).simulate_tally(np.full(k, 50), rng=0)
        for method in methods:
            bayesldp.estimate(tally, method, **_options(method))


def run_mle(cfg: Mapping[str, Any], seed: int, progress: Progress = _quiet) -> pd.DataFrame:
    """Lopuhaä-Zwakenberg et al. 2020: oracle / Norm-Sub / MLE on Jeffreys draws of theta."""
    sid = SECTION_IDS["mle"]
    rows: list[dict[str, Any]] = []
    plan = [("GRR", k, n) for k in cfg["grr_k"] for n in cfg["grr_n"]]
    plan += [(m, k, n) for m in cfg["ue_mechanisms"] for k in cfg["ue_k"] for n in cfg["ue_n"]]
    for mech_name in dict.fromkeys(m for m, _, _ in plan):
        _warm_up([mech_name], min(k for m, k, _ in plan if m == mech_name), cfg["estimators"])
    for mech_name, k, n in plan:
        start = time.perf_counter()
        for r in range(cfg["repeats"]):
            # theta is shared by every mechanism, n and epsilon of this K; the users by every
            # mechanism and epsilon of this (K, n): comparisons are paired
            theta = np.random.default_rng(_seed(seed, sid, 0, k, r)).dirichlet(
                np.full(k, float(cfg["prior_alpha"]))
            )
            theta /= theta.sum()
            counts = np.random.default_rng(_seed(seed, sid, 1, k, n, r)).multinomial(n, theta)
            for eps in cfg["epsilon"]:
                mech = make_mechanism(mech_name, k, eps)
                key = (seed, sid, 2, MECHANISM_IDS[mech_name], k, n, _eps_key(eps), r)
                tally = mech.simulate_tally(counts, rng=_seed(*key))
                trace = cr_trace(mech, theta, n)
                cell = {"mechanism": mech_name, "k": k, "n": n, "epsilon": float(eps), "repeat": r}
                rows += _estimator_rows(tally, cfg["estimators"], theta, trace, cell)
        progress(f"[mle] {mech_name} K={k} n={n}: {time.perf_counter() - start:.1f} s")
    return pd.DataFrame(
        rows, columns=[*CELL_COLUMNS["mle"], "repeat", "estimator", *METRIC_COLUMNS["mle"]]
    )


def _em_mr_population(name: str, cfg: Mapping[str, Any]) -> str:
    if name == "zipf":
        return f"Zipf({cfg['zipf_s']:g})"
    return f"Dirichlet({cfg['dirichlet_alpha']:g})"


def run_em_mr(cfg: Mapping[str, Any], seed: int, progress: Progress = _quiet) -> pd.DataFrame:
    """Ye et al.: Norm-Sub / EM / EM-MR for GRR and OLH over populations, epsilon and n."""
    sid = SECTION_IDS["em_mr"]
    k = cfg["k"]
    rows: list[dict[str, Any]] = []
    unit_trace: dict[tuple[str, float], float] = {}  # Zipf (fixed theta): CR trace for n = 1
    _warm_up(cfg["mechanisms"], k, cfg["estimators"])
    for pop_name in cfg["populations"]:
        pid = EM_MR_POPULATIONS.index(pop_name)
        redraw = pop_name == "dirichlet"
        population = _em_mr_population(pop_name, cfg)
        for mech_name in cfg["mechanisms"]:
            mid = MECHANISM_IDS[mech_name]
            for n in cfg["n"]:
                start = time.perf_counter()
                for r in range(cfg["repeats"]):
                    # theta (Dirichlet: redrawn per repeat) is shared by both mechanisms and
                    # every n and epsilon, the users by both mechanisms and every epsilon
                    if redraw:
                        theta = np.random.default_rng(_seed(seed, sid, 0, pid, k, r)).dirichlet(
                            np.full(k, float(cfg["dirichlet_alpha"]))
                        )
                        theta /= theta.sum()
                    else:
                        theta = zipf_population(k, cfg["zipf_s"])
                    users = np.random.default_rng(_seed(seed, sid, 1, pid, k, n, r))
                    counts = users.multinomial(n, theta)
                    for eps in cfg["epsilon"]:
                        mech = make_mechanism(mech_name, k, eps)
                        key = (seed, sid, 2, pid, mid, k, n, _eps_key(eps), r)
                        tally = mech.simulate_tally(counts, rng=_seed(*key))
                        cr_seed = _seed(seed, sid, 3, pid, mid, k, _eps_key(eps), r * redraw)
                        if redraw:
                            trace = cr_trace(mech, theta, n, hashes=cfg["cr_hashes"], rng=cr_seed)
                        else:
                            cache_key = (mech_name, float(eps))
                            if cache_key not in unit_trace:
                                unit_trace[cache_key] = cr_trace(
                                    mech, theta, 1, hashes=cfg["cr_hashes"], rng=cr_seed
                                )
                            trace = unit_trace[cache_key] / n
                        cell = {"mechanism": mech_name, "population": population, "k": k,
                                "n": n, "epsilon": float(eps), "repeat": r}  # fmt: skip
                        rows += _estimator_rows(tally, cfg["estimators"], theta, trace, cell,
                                                iterations=True)  # fmt: skip
                elapsed = time.perf_counter() - start
                progress(f"[em_mr] {population} {mech_name} n={n}: {elapsed:.1f} s")
    df = pd.DataFrame(
        rows, columns=[*CELL_COLUMNS["em_mr"], "repeat", "estimator", *METRIC_COLUMNS["em_mr"]]
    )
    df["iterations"] = df["iterations"].astype("Int64")
    return df


@dataclass
class _CheckAccumulator:
    """Per-repeat arrays of one node-sampling estimator in one cell (frequency scale)."""

    est: list[np.ndarray] = field(default_factory=list)
    mean: list[np.ndarray] = field(default_factory=list)  # exact E[est | population]
    var: list[np.ndarray] = field(default_factory=list)  # exact Var[est | population]
    empty_sq: list[float] = field(default_factory=list)  # (est - mean)^2 where n_x = 0

    def summary(self, truth_mean: list[np.ndarray], var_star: float) -> dict[str, float]:
        est, mean, var = np.array(self.est), np.array(self.mean), np.array(self.var)
        reps = est.shape[0]
        se = np.sqrt(var.mean(axis=0) / reps)
        z_paper = (est - mean).mean(axis=0) / se
        z_unbiased = (est - np.array(truth_mean)).mean(axis=0) / se
        k = est.shape[1]
        empty = np.asarray(self.empty_sq)
        return {
            "p_mean_as_paper": float(stats.chi2.sf(np.sum(z_paper**2), k)),
            "p_unbiased": float(stats.chi2.sf(np.sum(z_unbiased**2), k)),
            "var_ratio": float(np.sum((est - mean) ** 2) / np.sum(var)),
            "var_star_ratio": float(empty.mean() / var_star) if empty.size else math.inf,
            "var_star_se": float(math.sqrt(2.0 / empty.size)) if empty.size else math.inf,
            "exact_var_sum": float(var.mean(axis=0).sum()),
            "empirical_var_sum": float(np.sum((est - mean) ** 2) / reps),
        }


def run_sampling(
    cfg: Mapping[str, Any], seed: int, progress: Progress = _quiet
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Biswas et al. 2022: node sampling; returns the per-repeat records and the formula checks."""
    sid = SECTION_IDS["sampling"]
    k, n = cfg["k"], cfg["n"]
    rows: list[dict[str, Any]] = []
    checks: list[dict[str, Any]] = []
    formula_estimators = [e for e in ("c", "g", "c_hat") if e in cfg["estimators"]]
    for ip, pop in enumerate(cfg["populations"]):
        theta = sampling_theta(pop, k)
        start = time.perf_counter()
        populations = []
        for r in range(cfg["repeats"]):  # the nodes' values, shared by every epsilon and pi
            counts = np.random.default_rng(_seed(seed, sid, 0, ip, k, n, r)).multinomial(n, theta)
            populations.append((counts, np.repeat(np.arange(k), counts)))
        for eps in cfg["epsilon"]:
            grr = make_mechanism("GRR", k, eps)
            trace_all = grr_cr_trace(grr, theta, n)
            for pi in cfg["pi"]:
                sampler = NodeSampling(grr, float(pi))
                acc = {e: _CheckAccumulator() for e in formula_estimators}
                truth_counts: list[np.ndarray] = []
                for r, (counts, x) in enumerate(populations):
                    key = (seed, sid, 1, ip, k, n, _eps_key(eps), _eps_key(pi), r)
                    sampled = sampler.perturb(x, rng=_seed(*key))
                    truth_counts.append(counts / n)
                    empty = counts == 0
                    for method in cfg["estimators"]:
                        if method == "oracle_sampled":
                            if sampled.n_sampled == 0:
                                raise InvalidInputError(
                                    f"sampling: no node sampled (n = {n}, pi = {pi}); "
                                    "oracle_sampled needs S >= 1"
                                )
                            f = grr.unbiased_frequencies(sampler.tally(sampled))
                        else:
                            f = sampler.frequencies(sampled, method)
                            a = acc[method]
                            mean = sampler.expected_counts(x, method) / n
                            a.est.append(f)
                            a.mean.append(mean)
                            a.var.append(sampler.count_variance(x, method) / n**2)
                            a.empty_sq.extend(((f - mean)[empty] ** 2).tolist())
                        rows.append(
                            {
                                "population": pop["name"],
                                "k": k,
                                "n": n,
                                "epsilon": float(eps),
                                "pi": float(pi),
                                "repeat": r,
                                "estimator": method,
                                # Fisher information of a node is pi times a report's
                                **_scores(f, theta, trace_all / pi),
                            }
                        )
                for method, a in acc.items():
                    var_star = sampler.var_star(n, method) / n**2
                    checks.append(
                        {
                            "population": pop["name"],
                            "k": k,
                            "n": n,
                            "epsilon": float(eps),
                            "pi": float(pi),
                            "estimator": method,
                            **a.summary(truth_counts, var_star),
                        }
                    )
        progress(f"[sampling] {pop['name']}: {time.perf_counter() - start:.1f} s")
    records = pd.DataFrame(
        rows,
        columns=[*CELL_COLUMNS["sampling"], "repeat", "estimator", *METRIC_COLUMNS["sampling"]],
    )
    return records, pd.DataFrame(checks, columns=CHECK_COLUMNS)


@dataclass
class StudyResult:
    """Everything one run produced."""

    spec: dict[str, Any]
    full: bool
    records: dict[str, pd.DataFrame]
    checks: pd.DataFrame | None
    seconds: dict[str, float]
    settings: dict[str, dict[str, Any]]


def run_study(
    spec: Mapping[str, Any],
    *,
    full: bool = False,
    sections: Iterable[str] | None = None,
    repeats: int | None = None,
    progress: Progress = _quiet,
) -> StudyResult:
    """Run the study's sections (all present ones by default).

    Parameters
    ----------
    spec : dict
        A validated spec (:func:`~bayesldp.workflows.spec.load_spec`).
    full : bool
        Overlay each section's ``.full`` settings.
    sections : iterable of str, optional
        Subset of ``("mle", "em_mr", "sampling")``.
    repeats : int, optional
        Override every section's number of repeats (>= 2).
    """
    chosen = [s for s in SECTIONS if s in spec] if sections is None else list(sections)
    for name in chosen:
        if name not in SECTIONS:
            raise SpecError(f"sections: {name!r} is not one of {', '.join(SECTIONS)}")
        if name not in spec:
            raise SpecError(f"sections: the spec has no [{name}] section")
    if repeats is not None and (isinstance(repeats, bool) or repeats < 2):
        raise SpecError(f"repeats: must be >= 2 (a spread needs two repeats), got {repeats}")
    seed = spec["study"]["seed"]
    records: dict[str, pd.DataFrame] = {}
    seconds: dict[str, float] = {}
    settings: dict[str, dict[str, Any]] = {}
    checks = None
    for name in chosen:
        cfg = resolve_section(spec[name], full)
        if repeats is not None:
            cfg["repeats"] = repeats
        settings[name] = cfg
        start = time.perf_counter()
        if name == "mle":
            records[name] = run_mle(cfg, seed, progress)
        elif name == "em_mr":
            records[name] = run_em_mr(cfg, seed, progress)
        else:
            records[name], checks = run_sampling(cfg, seed, progress)
        seconds[name] = time.perf_counter() - start
    return StudyResult(dict(spec), full, records, checks, seconds, settings)
