"""The AdOBEst-LDP grid as its authors ran it, and where its gains come from
(Aydın and Yıldırım 2025).

The reference code (``experiments_for_SGDL.m`` of the authors' public MATLAB repository
AdOBEst_LDP) runs ``T = 500*K`` users per survey (5,000 for K = 10, 10,000 for K = 20) and 50
Monte Carlo runs, and sets RRRR's second budget with

    eps2(k) = min(eps, (k - 1) / (exp(eps1 - eps) k - 1))  for k = |S| >= ceil(exp(eps - eps1)),
    eps2(k) = eps                                             otherwise,

which omits the log of the paper's proposition and indexes by ``|S|`` instead of ``m = |S^c|``.
Its RRRR is NOT eps-LDP: the realised epsilon of its channels (computed here from bayesldp's
``rrrr_channel``) exceeds the budget asked for.  This script

1. prints that realised epsilon for every (K, eps1 / eps, eps) of the grid;
2. runs the grid at the code's sizes (``n_per_category = 500``) with ``--repeats`` repeats
   (at least 20) under the exact budget (the package, unchanged), on a Dask LocalCluster;
3. runs the adaptive cells again under the reference code's eps2, on a second LocalCluster whose
   workers get the formula by a worker plugin defined in this file (it rebinds
   ``bayesldp.adaptive.selection.rrrr_eps2`` in the worker processes only, which reaches the
   candidate channels the compiled survey loop uses for selection, perturbation, the SGLD
   likelihood and the MLE tally); nothing of it is reachable from the package.  The
   semi-adaptive and non-adaptive rules are the same under both formulas (the reference code
   sets eps2 = 0 for the semi-adaptive rule, as does the package with eps1 = eps, and S is
   empty for the non-adaptive one); the non-adaptive cells are re-run there as a check that
   they come out bit-identical;
4. times one survey of the reference code under GNU Octave (``--reference-code DIR``: a local
   copy of the MATLAB files outside this repository, with ``eye(...)`` wrapped in ``full(...)``
   because Octave's diagonal matrices do not broadcast) and one of ours on the same users;
5. writes ``benchmarks/results/adobest_paper_grid.md``.

Finished cells are kept under ``--work`` and reused by a re-run with the same settings.

Usage::

    python benchmarks/adobest_paper_grid.py --reference-code /tmp/adobest_octave
    python benchmarks/adobest_paper_grid.py --quick --out /tmp/x.md     # a smoke run
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path
from typing import Any

import numpy as np

from bayesldp.mechanisms.base import realised_epsilon_of_channel
from bayesldp.mechanisms.rrrr import rrrr_channel, rrrr_eps2
from bayesldp.workflows.accuracy import machine_info
from bayesldp.workflows.grid import method_labels, run_grid, users_text, write_summary
from bayesldp.workflows.spec.grid import validate_grid

ROOT = Path(__file__).resolve().parents[1]
ADAPTIVE = ("entropy", "expected_tv", "tv", "mse", "honest")  # U2-U6


# ---------------------------------------------------------------- the reference code's eps2
def reference_eps2_NOT_LDP(epsilon: float, eps1: float, subset_size: int, k: int) -> float:
    """eps2 as the reference MATLAB code computes it (AdOBEst_LDP.m).  NOT eps-LDP.

    ``Sc_min = ceil(exp(eps - eps1))``; for ``|S| = s >= Sc_min``:
    ``eps2 = min(eps, (s - 1) / (exp(eps1 - eps) s - 1))``, else ``eps2 = eps``.  Rules with
    ``eps1 = eps`` (semi-adaptive; the reference code sets eps2 = 0) and ``S`` empty (not a
    candidate of the reference code) keep the package's value, which is the same.
    """
    if eps1 >= epsilon or subset_size == 0:
        return rrrr_eps2(epsilon, eps1, subset_size, k)
    if subset_size >= math.ceil(math.exp(epsilon - eps1)):
        return min(epsilon, (subset_size - 1) / (math.exp(eps1 - epsilon) * subset_size - 1))
    return float(epsilon)


def _patch_reference_eps2() -> Any:
    """Rebind ``bayesldp.adaptive.selection.rrrr_eps2`` (read by ``candidate_params``, which
    ``AdaptiveSurvey`` calls once per survey) to the reference formula; returns the original."""
    import bayesldp.adaptive.selection as selection

    original = selection.rrrr_eps2
    selection.rrrr_eps2 = reference_eps2_NOT_LDP
    return original


def _check_reference_patch() -> str:
    """Run in a worker: its surveys' candidate constants are those of the reference eps2."""
    from bayesldp.adaptive import AdaptiveSurvey

    survey = AdaptiveSurvey(
        20, 1.0, utility="fisher", eps1_fraction=0.8, n_expected=10, engine="sgld"
    )
    want = [math.exp(-reference_eps2_NOT_LDP(1.0, 0.8, s, 20)) for s in range(20)]
    m1 = np.arange(20, 0, -1) - 1.0
    got = (1.0 / survey._params[2] - 1.0) / np.where(m1 > 0, m1, np.nan)  # e^-eps2
    ok = np.allclose(got[m1 > 0], np.asarray(want)[m1 > 0], rtol=1e-12)
    return "patched" if ok else "NOT patched"


def reference_eps2_plugin() -> Any:
    """A Dask worker plugin: the reference code's eps2 in its worker's surveys (NOT eps-LDP)."""
    from distributed import WorkerPlugin

    class ReferenceEps2Plugin(WorkerPlugin):
        name = "adobest-reference-eps2-NOT-LDP"

        def setup(self, worker: Any) -> None:
            _patch_reference_eps2()

    return ReferenceEps2Plugin()


def realised_table(ks: list[int], fracs: list[float], epss: list[float]) -> list[dict]:
    """Realised epsilon (max over |S| of max_y log(max_x P / min_x P)) of both formulas."""
    rows = []
    for k in ks:
        for frac in fracs:
            for eps in epss:
                eps1 = frac * eps
                ref = [
                    realised_epsilon_of_channel(
                        rrrr_channel(k, range(s), eps1, reference_eps2_NOT_LDP(eps, eps1, s, k))
                    )
                    for s in range(k)
                ]
                ours = [
                    realised_epsilon_of_channel(
                        rrrr_channel(k, range(s), eps1, rrrr_eps2(eps, eps1, s, k))
                    )
                    for s in range(k)
                ]
                over = [s for s in range(k) if ref[s] > eps * (1 + 1e-12)]
                rows.append(
                    {"k": k, "frac": frac, "eps": eps, "ref": max(ref),
                     "ref_at": int(np.argmax(ref)), "ours": max(ours), "over": over}
                )  # fmt: skip
    return rows


# ---------------------------------------------------------------- the grids
def paper_spec(repeats: int, quick: bool, name: str, **grid: Any) -> dict[str, Any]:
    """models/adobest_grid.toml at the reference code's size (``[paper]``: 500 K users)."""
    raw = tomllib.loads((ROOT / "models" / "adobest_grid.toml").read_text())
    raw.pop("kind", None)
    raw["grid"]["name"] = name
    raw["grid"].update(grid)
    raw["paper"] = {"n_per_category": 500, "repeats": repeats}
    if quick:
        raw["paper"] = {"n_per_category": 20, "repeats": repeats}
        raw["grid"]["k"] = [3, 4]
        raw["survey"].update(final_steps=200, burn_in=100)
    return validate_grid(raw, "adobest_paper_grid")


def run_on_cluster(
    spec: dict, out: Path, workers: int, reference: bool, only: dict | None = None
) -> tuple[Any, float, int]:
    """Run one grid on a fresh LocalCluster; (results, wall seconds, cells computed here)."""
    from distributed import Client, LocalCluster

    cluster = LocalCluster(n_workers=workers, threads_per_worker=1, dashboard_address=None)
    client = Client(cluster)
    try:
        if reference:
            client.register_plugin(reference_eps2_plugin())
            states = client.run(_check_reference_patch)
            if set(states.values()) != {"patched"}:
                raise RuntimeError(f"reference eps2 not in place on the workers: {states}")
        else:
            states = client.run(_check_reference_patch)
            if set(states.values()) != {"NOT patched"}:
                raise RuntimeError(f"exact-budget workers carry the reference eps2: {states}")
        started = time.perf_counter()
        computed = [0]

        def progress(i: int, total: int, what: str) -> None:
            computed[0] += 1
            if i % 50 == 0 or i == total:
                print(f"  [{i}/{total}] {what} ({time.perf_counter() - started:.0f} s)",
                      file=sys.stderr, flush=True)  # fmt: skip

        results = run_grid(
            spec,
            out,
            paper=True,
            progress=progress,
            scheduler=cluster.scheduler_address,
            only=only,
        )
        return results, time.perf_counter() - started, computed[0]
    finally:
        client.close()
        cluster.close()


# ---------------------------------------------------------------- one survey, Octave and ours
OCTAVE_DRIVER = """
addpath('{code}');
X = load('{x}')'; theta = load('{theta}')'; K = {k}; T = numel(X);
rand('seed', 1); randn('seed', 1);
tic;
[theta_est, thetas, Y, k_selected] = AdOBEst_LDP(X, {eps}, {frac}, ones(1, K), 20, 0, ...
    {loss}, 50, 0.5/T);
elapsed = toc;
printf('{{"seconds": %.6f, "tv": %.8f, "mean_subset_size": %.6f}}\\n', elapsed, ...
       0.5*sum(abs(theta_est' - theta)), mean(k_selected));
e2 = [{eps2}]; G = zeros(K * K, K);
for s = 1:K
  G((s - 1) * K + (1:K), :) = make_G(K, s, {eps} * {frac}, e2(s));
end
dlmwrite('{g}', G, 'precision', '%.17g');
"""

LOSS_TYPE = {"fisher": 1, "entropy": 2, "tv": 3, "expected_tv": 4, "mse": 5, "honest": 6}


def one_survey_inputs(k: int, n: int, rho: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    gen = np.random.default_rng(seed)
    theta = gen.dirichlet(np.full(k, rho))
    return theta, gen.choice(k, size=n, p=theta)


def time_octave(code: Path, k: int, n: int, eps: float, frac: float, utility: str,
                theta: np.ndarray, x: np.ndarray) -> dict:  # fmt: skip
    octave = shutil.which("octave")
    if octave is None:
        return {"error": "octave not found (Debian package octave)"}
    with tempfile.TemporaryDirectory() as tmp:
        tmpd = Path(tmp)
        np.savetxt(tmpd / "x.txt", x + 1, fmt="%d")  # MATLAB categories are 1..K
        np.savetxt(tmpd / "theta.txt", theta, fmt="%.17g")
        driver = tmpd / "driver.m"
        eps1 = frac * eps
        eps2 = [reference_eps2_NOT_LDP(eps, eps1, s, k) for s in range(1, k + 1)]
        driver.write_text(
            OCTAVE_DRIVER.format(code=code, x=tmpd / "x.txt", theta=tmpd / "theta.txt", k=k,
                                 eps=eps, frac=frac, loss=LOSS_TYPE[utility], g=tmpd / "G.txt",
                                 eps2=" ".join(f"{v!r}" for v in eps2))
        )  # fmt: skip
        import resource

        cpu0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        proc = subprocess.run([octave, "--no-gui", "--quiet", "--no-window-system", str(driver)],
                              capture_output=True, text=True, check=False)  # fmt: skip
        wall = time.perf_counter() - started
        cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
        diff = float("nan")
        if (tmpd / "G.txt").is_file():
            g = np.loadtxt(tmpd / "G.txt", delimiter=",").reshape(k, k, k)
            # their G(i, j) = p(y = i | x = j) in sorted coordinates, S = the first s; their
            # |S| = K is the package's |S| = K - 1 (both GRR at eps1)
            ours = [rrrr_channel(k, range(min(s, k - 1)), eps1, eps2[s - 1]).T
                    for s in range(1, k + 1)]  # fmt: skip
            diff = float(np.max(np.abs(g - np.stack(ours))))
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        return {"error": f"octave exited {proc.returncode}: {proc.stderr.strip()[-300:]}"}
    out = json.loads(lines[-1])
    out["process_seconds"] = wall
    out["process_cpu_seconds"] = cpu
    out["channel_max_abs_diff"] = diff
    out["version"] = subprocess.run([octave, "--version"], capture_output=True, text=True,
                                    check=False).stdout.splitlines()[0]  # fmt: skip
    return out


def time_ours(k: int, n: int, eps: float, frac: float, utility: str, theta: np.ndarray,
              x: np.ndarray, reference: bool) -> dict:  # fmt: skip
    from bayesldp.adaptive import AdaptiveSurvey

    def once(xs: np.ndarray) -> tuple[float, float, float, float, float]:
        cpu = time.process_time()
        started = time.perf_counter()
        survey = AdaptiveSurvey(k, eps, utility=utility, eps1_fraction=frac, n_expected=xs.size,
                                engine="sgld", prior=1.0, random_seed=1)  # fmt: skip
        survey.simulate(xs)
        middle = time.perf_counter()
        est = survey.posterior(chains=1, engine="sgld").posterior["theta"].values.mean(axis=(0, 1))
        end = time.perf_counter()
        size = float(survey.history["subset_size"].values.mean())
        tv = float(0.5 * np.abs(est - theta).sum())
        return end - started, middle - started, tv, size, time.process_time() - cpu

    import bayesldp.adaptive.selection as selection

    original = _patch_reference_eps2() if reference else None
    try:
        once(x[:200])  # compile / load the numba kernels
        runs = [once(x) for _ in range(3)]
        seconds, simulate, tv, size, _ = min(runs)
        cpu = min(r[4] for r in runs)
    finally:
        if original is not None:
            selection.rrrr_eps2 = original
    return {"seconds": seconds, "simulate": simulate, "tv": tv, "mean_subset_size": size,
            "cpu_seconds": cpu}  # fmt: skip


def one_survey_timing(args: argparse.Namespace, work: Path) -> dict:
    """Octave's and ours, back to back on the same users; cached in ``work`` (a re-run reads
    it back, so both are measured under the same load)."""
    k, eps, frac, utility, rho = args.timing.split(",")
    k, eps, frac, rho = int(k), float(eps), float(frac), float(rho)
    n = 500 * k if not args.quick else 50 * k
    cache = work / f"timing_cpu_{k}_{n}_{eps:g}_{frac:g}_{utility}_{rho:g}.json"
    if cache.is_file():
        return json.loads(cache.read_text())
    theta, x = one_survey_inputs(k, n, rho, seed=4)
    timing: dict[str, Any] = {"k": k, "n": n, "eps": eps, "frac": frac, "utility": utility,
                              "rho": rho}  # fmt: skip
    timing["load_start"] = ", ".join(f"{v:.2f}" for v in os.getloadavg())
    if args.reference_code is None:
        timing["octave"] = {"error": "no --reference-code given"}
    else:
        timing["octave"] = time_octave(args.reference_code.resolve(), k, n, eps, frac, utility,
                                       theta, x)  # fmt: skip
    print(f"octave: {timing['octave']}", file=sys.stderr)
    timing["ours_ref"] = time_ours(k, n, eps, frac, utility, theta, x, reference=True)
    timing["ours"] = time_ours(k, n, eps, frac, utility, theta, x, reference=False)
    timing["load_end"] = ", ".join(f"{v:.2f}" for v in os.getloadavg())
    timing["date"] = f"{_dt.datetime.now(_dt.UTC):%Y-%m-%d %H:%M}"
    if "error" not in timing["octave"]:
        work.mkdir(parents=True, exist_ok=True)
        cache.write_text(json.dumps(timing))
    return timing


# ---------------------------------------------------------------- the report
def _complete(res: Any) -> Any:
    """(k, rho, epsilon) settings whose every cell (scheme, repeat) has finished."""
    return np.isfinite(res["tv"]).all(("scheme", "repeat"))


def _ratio_rows(exact: Any, ref: Any, methods: list[str], metric: str, both: Any) -> list[str]:
    """One row per (K, rho, eps) run under both formulas: mean-TV ratios to non-adaptive."""
    rows = []
    base = exact[metric].sel(scheme="non-adaptive")
    fisher = [m for m in methods if m.startswith("fisher")]
    adapt = [m for m in methods if m.split()[0] in ADAPTIVE]
    for k in exact["k"].values:
        for rho in exact["rho"].values:
            for eps in exact["epsilon"].values:
                where = {"k": k, "rho": rho, "epsilon": eps}
                if not bool(both.sel(where)):
                    continue
                b = float(base.sel(where).mean())
                r_ref = [float(ref[metric].sel({**where, "scheme": m}).mean()) / b for m in adapt]
                r_ex = [float(exact[metric].sel({**where, "scheme": m}).mean()) / b for m in adapt]
                g_ref, g_ex = 1 - np.median(r_ref), 1 - np.median(r_ex)
                kept = f"{g_ex / g_ref:.2f}" if g_ref >= 0.05 else "- (gain < 5%)"
                f_ref = float(ref[metric].sel({**where, "scheme": fisher}).mean()) / b
                size_ref = float(ref["mean_subset_size"].sel({**where, "scheme": fisher}).mean())
                size_ex = float(exact["mean_subset_size"].sel({**where, "scheme": fisher}).mean())
                rows.append(
                    f"| {k} | {rho:g} | {eps:g} | {b:.4f} | {np.median(r_ref):.2f} "
                    f"({min(r_ref):.2f}-{max(r_ref):.2f}) | {np.median(r_ex):.2f} "
                    f"({min(r_ex):.2f}-{max(r_ex):.2f}) | {kept} | {f_ref:.2f} | "
                    f"{size_ref:.2f} | {size_ex:.2f} |"
                )
    return rows


def _pooled(exact: Any, ref: Any, methods: list[str], metric: str, both: Any) -> dict:
    """Geometric mean over the settings run under both formulas and U2-U6 methods of the
    mean-TV ratio to non-adaptive."""
    adapt = [m for m in methods if m.split()[0] in ADAPTIVE]
    base_cells = exact[metric].sel(scheme="non-adaptive").where(both)
    base = base_cells.mean("repeat")
    out = {}
    for label, res in (("ref", ref), ("exact", exact)):
        cells = res[metric].sel(scheme=adapt).where(both)
        ratio = cells.mean("repeat") / base
        out[label] = float(np.exp(np.nanmean(np.log(ratio.values))))
        out[label + "_wins"] = (
            int((cells < base_cells).sum()),
            int(np.isfinite(cells.values).sum()),
        )
    return out


def _kept_text(g_ref: float, g_ex: float) -> str:
    """How much of the reference code's gain (1 - ratio) remains under the exact budget."""
    if g_ref <= 0:
        word = "lower" if g_ex > 0 else "higher"
        return (
            f"no gain with the reference eps2 ({-100 * g_ref:.0f}% higher TV); under the exact "
            f"budget {100 * abs(g_ex):.0f}% {word} TV"
        )
    if g_ex <= 0:
        return (
            f"none of the reference code's gain ({100 * g_ref:.0f}% lower TV) remains: "
            f"{-100 * g_ex:.0f}% higher TV than non-adaptive"
        )
    return (
        f"{100 * g_ex / g_ref:.0f}% of the reference code's gain ({100 * g_ref:.0f}% lower TV) "
        f"remains ({100 * abs(g_ex):.0f}% {'lower' if g_ex >= 0 else 'higher'} TV than "
        "non-adaptive)"
    )


def write_report(args: argparse.Namespace, info: dict) -> str:
    exact_all, ref = info["exact"], info["ref"]
    n_ref = ref.sizes["repeat"]
    exact = exact_all.isel(repeat=slice(0, n_ref))  # paired: the same populations and users
    both = _complete(exact) & _complete(ref)
    done_exact = _complete(exact_all)
    n_both = int(both.sum())

    def settings(mask: Any) -> str:
        parts = []
        for k in mask["k"].values:
            m = mask.sel(k=k)
            if bool(m.all()):
                parts.append(f"K = {k}: all {m.size} (rho, eps)")
            elif bool(m.any()):
                pairs = [f"({float(r):g}, {float(e):g})" for r in m["rho"].values
                         for e in m["epsilon"].values if bool(m.sel(rho=r, epsilon=e))]  # fmt: skip
                parts.append(f"K = {k}: (rho, eps) in {', '.join(pairs)}")
            else:
                parts.append(f"K = {k}: none")
        return "; ".join(parts)

    methods = [str(m) for m in ref["scheme"].values]
    fracs = sorted({float(m.split()[1]) for m in methods if m.split()[0] in ADAPTIVE})
    mi = machine_info()
    lines = [
        "# The AdOBEst-LDP grid as its authors ran it, and where its gains come from "
        "(Aydın and Yıldırım 2025)",
        "",
        f"- command: `{info['command']}`",
        f"- date: {info['date']} UTC; wall time of this invocation {info['wall']:.0f} s "
        f"(exact-budget grid {info['wall_exact']:.0f} s computing {info['new_exact']} of its "
        f"{exact_all['seconds'].size} cells, reference-eps2 grid {info['wall_ref']:.0f} s "
        "computing "
        f"{info['new_ref']} of its {ref['seconds'].size} cells, the other cells read back from "
        f"`--work`; one-survey timings {info['wall_timing']:.0f} s)",
        f"- machine: {mi['arch']}, {mi['cpu']}, {mi['cores']} cores shared with other jobs; "
        f"loadavg at the start {info['load_start']}, at the end {mi['load']}; Python "
        f"{mi['python']}, numpy {mi['numpy']}, commit {mi['commit']}",
        f"- sizes: the reference code's (`T = 500*K` in experiments_for_SGDL.m): n = "
        f"{users_text(exact_all)} users per survey; {exact_all.sizes['repeat']} repeats (the "
        f"code: 50 runs); K in {[int(v) for v in exact_all['k'].values]}, rho in "
        f"{[float(v) for v in exact_all['rho'].values]}, eps in "
        f"{[float(v) for v in exact_all['epsilon'].values]}; the paper's SGLD schedule (20 "
        "updates per user, "
        "minibatch 50, step 0.5/n, final 2000 updates with 1000 burn-in)",
        f"- run on Dask: a LocalCluster of {args.workers} worker processes (1 thread each) per "
        "grid, through `bayesldp.workflows.grid.run_grid(..., scheduler=address)`",
        f"- exact-budget grid: the package as it is, all {exact_all.sizes['scheme']} methods "
        f"({int(np.isfinite(exact_all['seconds'].values).sum())} surveys, "
        f"{np.nansum(exact_all['seconds'].values):.0f} s of survey time)",
        f"- **reference-eps2 grid (NOT eps-LDP)**: only the cells the questions need: "
        f"{', '.join(methods)} ({int(np.isfinite(ref['seconds'].values).sum())} surveys, "
        f"{np.nansum(ref['seconds'].values):.0f} s of survey time), {n_ref} repeats; sections "
        f"2-3 pair them with the same {n_ref} repeats (populations, users) of the exact-budget "
        "grid; the semi-adaptive rules "
        "are the same under both formulas and are not re-run; the non-adaptive cells came out "
        f"{'bit-identical' if info['non_adaptive_identical'] else 'DIFFERENT (a bug)'} to the "
        "exact-budget grid's",
        "",
        f"- settings complete (every method and repeat): exact-budget grid "
        f"{settings(done_exact)}; both grids (sections 2-3) {settings(both)}",
        "",
        "## 1. The reference code's eps2 is over budget",
        "",
        "Realised epsilon = max over |S| = 0..K-1 of max_y log(max_x P[x,y] / min_x P[x,y]) of "
        "`bayesldp.mechanisms.rrrr.rrrr_channel(K, S, eps1, eps2)` with the reference code's "
        "eps2 (`(k-1)/(exp(eps1-eps) k - 1)` for k = |S| >= ceil(exp(eps-eps1)), else eps) "
        "and with the package's (`rrrr_eps2`).",
        "",
        "| K | eps1 / eps | eps asked | realised, reference eps2 (at \\|S\\|) "
        "| \\|S\\| over budget | realised, package |",
        "|---|---|---|---|---|---|",
    ]
    for row in info["realised"]:
        over = row["over"]
        span = f"{over[0]}..{over[-1]}" if over else "none"
        lines.append(
            f"| {row['k']} | {row['frac']:g} | {row['eps']:g} | **{row['ref']:.2f}** "
            f"({row['ref_at']}) | {span} | {row['ours']:.4f} |"
        )
    for metric, title in (("tv", "SGLD posterior mean (the paper's metric)"),
                          ("tv_mle", "MLE from the same reports")):  # fmt: skip
        pooled = _pooled(exact, ref, methods, metric, both)
        g_ref, g_ex = 1 - pooled["ref"], 1 - pooled["exact"]
        lines += [
            "",
            f"## 2{'a' if metric == 'tv' else 'b'}. Adaptive gain, TV of the {title}",
            "",
            f"U2-U6 with eps1 / eps in {fracs}: ratio = mean TV over repeats / mean TV of the "
            "non-adaptive baseline (plain GRR at the budget asked; the same populations and "
            f"users); below 1 is a gain.  Over the {n_both} settings run under both and "
            f"{len([m for m in methods if m.split()[0] in ADAPTIVE])} methods, geometric mean "
            f"ratio: **{pooled['ref']:.2f} with the reference eps2, {pooled['exact']:.2f} under "
            f"the exact budget**: {_kept_text(g_ref, g_ex)}.  Share of "
            "the gain kept, per setting: (1 - median ratio, exact) / (1 - median ratio, "
            "reference), where the reference gain is at least 5%.  (method, "
            f"repeat) pairs below the baseline's TV: {pooled['ref_wins'][0]}/"
            f"{pooled['ref_wins'][1]} with the reference eps2, {pooled['exact_wins'][0]}/"
            f"{pooled['exact_wins'][1]} exact.",
            "",
            "| K | rho | eps | non-adaptive TV | U2-U6 ratio, reference eps2: median (range) "
            "| U2-U6 ratio, exact budget: median (range) | share of the gain kept "
            "| U1 ratio, reference eps2 | U1 mean \\|S\\|, reference eps2 "
            "| U1 mean \\|S\\|, exact |",
            "|---|---|---|---|---|---|---|---|---|---|",
            *_ratio_rows(exact, ref, methods, metric, both),
        ]
    fisher = [m for m in methods if m.startswith("fisher")]
    u1_cells = ref["tv"].sel(scheme=[*fisher, "non-adaptive"])
    u1_done = np.isfinite(u1_cells).all(("scheme", "repeat")) & _complete(exact)
    size_ref = ref["mean_subset_size"].sel(scheme=fisher).where(u1_done)
    size_ex = exact_all["mean_subset_size"].sel(scheme=fisher).where(done_exact)
    lines += [
        "",
        "## 3. Does U1 (Fisher) adapt?",
        "",
        f"Settings with U1 finished under both formulas: {settings(u1_done)}.",
        "",
        f"Mean |S| of U1 over all its surveys: **{float(size_ref.mean()):.2f} with the reference "
        f"eps2** (per-survey means from {float(size_ref.min()):.2f} to "
        f"{float(size_ref.max()):.2f}; {int((size_ref > 0).sum())}/"
        f"{int(np.isfinite(size_ref.values).sum())} surveys with "
        f"some S non-empty), **{float(size_ex.mean()):.2f} under the exact budget** "
        f"({int((size_ex > 0).sum())}/{int(np.isfinite(size_ex.values).sum())} surveys with "
        "some S non-empty).",
        "By K, with the reference eps2: "
        + ", ".join(
            f"K = {k}: {float(size_ref.sel(k=k).mean()):.2f}"
            for k in size_ref["k"].values
            if np.isfinite(size_ref.sel(k=k).values).any()
        )
        + ".",
        "",
    ]
    t = info["timing"]
    lines += [
        "## 4. One survey: the reference code under GNU Octave and bayesldp",
        "",
        f"K = {t['k']}, n = {t['n']:,} users drawn from theta ~ Dirichlet({t['rho']:g}) (the same "
        f"users for both), eps = {t['eps']:g}, eps1 = {t['frac']:g} eps, utility {t['utility']}, "
        "20 SGLD updates per user, minibatch 50, step 0.5/n, final 2000 updates.  Octave: "
        "`AdOBEst_LDP(X, ...)` timed by tic/toc inside Octave (process time beside it), its own "
        "eps2, from a local copy of the MATLAB files with `eye()` wrapped in `full()`.  bayesldp: "
        '`AdaptiveSurvey(..., engine="sgld").simulate(x)` + `posterior(engine="sgld")`, '
        "numba kernels compiled beforehand, "
        f"best of 3.  Measured {t['date']} UTC, back to back, loadavg {t['load_start']} before, "
        f"{t['load_end']} after: on a loaded machine the wall times include waiting for a core, "
        "so the CPU times (user + system of the Octave process, `time.process_time` of ours) "
        "are the fairer comparison.",
        "",
        "| implementation | eps2 | wall seconds | CPU seconds | TV | mean \\|S\\| |",
        "|---|---|---|---|---|---|",
    ]
    octave = t["octave"]
    if "error" in octave:
        lines.append(f"| reference code, Octave | reference | not run: {octave['error']} | | | |")
    else:
        lines.append(
            f"| reference code, {octave['version']} | reference (NOT eps-LDP) | "
            f"{octave['seconds']:.1f} (process {octave['process_seconds']:.1f}) | "
            f"{octave['process_cpu_seconds']:.1f} | "
            f"{octave['tv']:.4f} | {octave['mean_subset_size']:.2f} |"
        )
    for key, label in (("ours_ref", "reference (NOT eps-LDP), patched in"),
                       ("ours", "exact (package)")):  # fmt: skip
        o = t[key]
        lines.append(
            f"| bayesldp | {label} | {o['seconds']:.2f} (simulate {o['simulate']:.2f}) | "
            f"{o['cpu_seconds']:.2f} | {o['tv']:.4f} | {o['mean_subset_size']:.2f} |"
        )
    if "error" not in octave:
        lines += [
            "",
            f"Octave / bayesldp (same eps2): {octave['seconds'] / t['ours_ref']['seconds']:.0f}x "
            f"in wall time, {octave['process_cpu_seconds'] / t['ours_ref']['cpu_seconds']:.0f}x "
            "in CPU time."
            f"  The reference code's channels (`make_G(K, |S|, eps1, eps2)` for |S| = 1..K, "
            "with the reference eps2 as this script computes it) equal bayesldp's "
            f"`rrrr_channel` (transposed) to {octave.get('channel_max_abs_diff', float('nan')):.1e}"
            " (max abs difference), so the reference-eps2 grid runs the reference code's RRRR.",
        ]
    lines += [
        "",
        "Differences that remain between the two implementations: the reference code's "
        "candidates are |S| = 1..K (|S| = K is GRR at eps1; S is never empty) and the package's "
        "|S| = 0..K-1 (|S| = 0 is GRR at eps, |S| = K-1 the reference's |S| = K); the reference "
        "starts the SGLD at phi = 1/K, the package at a prior draw; random streams differ.",
        "",
        "## 5. The exact-budget grid (all methods), as `run_grid` summarises it",
        "",
        write_summary(exact_all[["tv", "tv_mle", "mean_subset_size", "seconds"]].where(done_exact)),
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--reference-repeats", type=int, default=None,
                        help="repeats of the reference-eps2 grid (default: --repeats; paired "
                        "with the exact grid's first repeats)")  # fmt: skip
    parser.add_argument("--k", default="10,20", help="domain sizes to run (of 10, 20)")
    parser.add_argument("--reference-fractions", default="0.8,0.9",
                        help="eps1 / eps of U2-U6 re-run with the reference eps2")  # fmt: skip
    parser.add_argument("--reference-code", type=Path, default=None,
                        help="local copy (outside this repository) of the reference MATLAB "
                        "files, eye() wrapped in full(), for the Octave timing")  # fmt: skip
    parser.add_argument(
        "--timing",
        default="10,1.0,0.8,fisher,0.1",
        help="one-survey timing: K,eps,eps1/eps,utility,rho (n = 500 K)",
    )
    parser.add_argument("--work", type=Path, default=Path("/tmp/adobest_paper_grid"))
    parser.add_argument(
        "--out", type=Path, default=ROOT / "benchmarks" / "results" / "adobest_paper_grid.md"
    )
    parser.add_argument("--quick", action="store_true", help="tiny sizes (smoke test)")
    parser.add_argument("--report-only", action="store_true",
                        help="run no cell: report the settings whose cells in --work are all "
                        "finished (a grid stopped for lack of time)")  # fmt: skip
    parser.add_argument(
        "--timing-only",
        action="store_true",
        help="only the one-survey timing (Octave and ours), kept in --work",
    )
    args = parser.parse_args(argv)
    if args.repeats < 20 and not args.quick:
        parser.error("--repeats: at least 20 for the exact-budget grid")
    started = time.perf_counter()
    load_start = ", ".join(f"{v:.2f}" for v in os.getloadavg())
    fracs = [float(v) for v in args.reference_fractions.split(",")]
    work = args.work / ("quick" if args.quick else "full")
    if args.timing_only:
        print(json.dumps(one_survey_timing(args, work), indent=1))
        return 0

    raw = tomllib.loads((ROOT / "models" / "adobest_grid.toml").read_text())["grid"]
    realised = realised_table(raw["k"], raw["eps1_fraction"], raw["epsilon"])
    for row in realised:
        print(f"K={row['k']} eps1/eps={row['frac']} eps={row['eps']}: reference eps2 realises "
              f"{row['ref']:.3f} (|S|={row['ref_at']}), package {row['ours']:.4f}")  # fmt: skip

    ks = [int(v) for v in args.k.split(",")] if not args.quick else [3, 4]
    spec = paper_spec(args.repeats, args.quick, "adobest_paper_grid")
    print(f"exact-budget grid: {len(method_labels(spec['grid']))} methods, K {ks}", file=sys.stderr)
    if args.report_only:
        nothing = {"k": []}  # run no cell: read back the finished ones
        exact, wall_exact, new_exact = (
            run_grid(spec, work / "exact", paper=True, only=nothing),
            0,
            0,
        )
    else:
        exact, wall_exact, new_exact = run_on_cluster(spec, work / "exact", args.workers, False,
                                                      {"k": ks})  # fmt: skip
    exact = exact.sel(k=ks)

    ref_repeats = args.reference_repeats or args.repeats
    print(f"reference-eps2 grid: {ref_repeats} repeats", file=sys.stderr)
    # one spec for every reference cell (so that cells run in parts, or later, add up); run
    # U1 at both fractions with the non-adaptive check first, then U2-U6 per fraction
    ref_spec = paper_spec(
        args.repeats, args.quick, "adobest_paper_grid_REFERENCE_EPS2_NOT_LDP",
        utilities=["fisher", *ADAPTIVE], eps1_fraction=[0.8, 0.9], semi_adaptive_alpha=[],
    )  # fmt: skip
    groups = [["fisher 0.8", "fisher 0.9", "non-adaptive"]]
    groups += [[f"{u} {frac:g}" for u in ADAPTIVE] for frac in fracs]
    wall_ref, new_ref = 0.0, 0
    for schemes in groups:
        only = {"k": ks, "scheme": schemes, "repeat": list(range(ref_repeats))}
        if args.report_only:
            ref_all = run_grid(ref_spec, work / "reference", paper=True, only={"k": []})
            continue
        ref_all, wall, new = run_on_cluster(ref_spec, work / "reference", args.workers, True, only)
        wall_ref += wall
        new_ref += new
    chosen = [m for group in groups for m in group]
    ref = ref_all[["tv", "tv_mle", "mean_subset_size", "seconds"]].sel(
        k=ks, scheme=chosen, repeat=list(range(ref_repeats))
    )
    paired = exact.isel(repeat=slice(0, ref_repeats))
    run = _complete(ref) & _complete(paired)  # the settings finished in both
    same = all(
        np.array_equal(
            ref[name].sel(scheme="non-adaptive").where(run).values,
            paired[name].sel(scheme="non-adaptive").where(run).values,
            equal_nan=True,
        )
        for name in ("tv", "tv_mle", "mean_subset_size")
    )
    wall_a, wall_b, new_a, new_b = wall_ref, 0.0, new_ref, 0

    t0 = time.perf_counter()
    timing = one_survey_timing(args, work)
    wall_timing = time.perf_counter() - t0

    shown = " ".join(
        ["python benchmarks/adobest_paper_grid.py", *(sys.argv[1:] if argv is None else argv)]
    )
    info = {
        "exact": exact, "ref": ref, "realised": realised, "timing": timing,
        "non_adaptive_identical": same, "command": shown,
        "date": f"{_dt.datetime.now(_dt.UTC):%Y-%m-%d %H:%M}", "load_start": load_start,
        "wall": time.perf_counter() - started, "wall_exact": wall_exact,
        "wall_ref": wall_a + wall_b, "wall_timing": wall_timing,
        "new_exact": new_exact, "new_ref": new_a + new_b,
    }  # fmt: skip
    text = write_report(args, info)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text, "utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
