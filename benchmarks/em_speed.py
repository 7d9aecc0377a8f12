"""EM (iterative Bayesian update) speed: bayesldp against multi-freq-ldpy 0.2.5's IBU.

GRR with K = 100, n = 100,000, epsilon = 1.  For each seed the true values are drawn from a
Dirichlet(1) population and randomised once with ``bayesldp.GRR.perturb``; the *same* reports
go to both aggregators in the same process.

Stopping rule.  multi-freq-ldpy's ``IBU(k, A, obs_freq, nb_iter, tol, "max_abs")`` iterates
``theta' = theta * A (obs / A theta)`` from the uniform distribution and returns ``theta'`` at
the first iteration with ``max_x |theta'_x - theta_x| < tol``, or after ``nb_iter``
iterations.  ``bayesldp.estimate(tally, "em", tol=..., max_iter=...)`` uses the same rule on
its EM maps (SQUAREM-accelerated by default; ``max_iter`` counts maps).  Every comparison below
gives both the identical ``tol`` and cap.

* "same tolerance": ``tol`` in 1e-8, 1e-10, 1e-12 with the cap raised to 10^7 for both, so
  that IBU actually meets the tolerance (at its default cap of 10,000 it does not below about
  1e-7 on these data).
* "defaults": multi-freq-ldpy's defaults, ``tol = 1e-12``, 10,000 iterations (IBU stops at the
  cap without meeting the tolerance), end to end from the reports and on prepared counts.
* "to the MLE": the time each needs to get within 1e-8 (max abs) of the exact MLE (GRR closed
  form, Lopuhaä-Zwakenberg et al. 2020, Appendix B): IBU run for exactly the number of iterations at
  which its iterate first gets there (found by an instrumented copy of its loop, capped at 12
  million iterations, about a minute), bayesldp with the largest ``tol`` in 1e-8, 1e-9, ... whose
  answer is that close.
* "per map": plain EM on both sides (``accelerate=False``), 10,000 maps, no stopping.
* "cold": the first call in a fresh process: IBU's (numba compiles it: multi-freq-ldpy uses
  ``@jit`` without a cache), bayesldp's (numba loads its kernels from the on-disk cache) and
  bayesldp's with an empty ``NUMBA_CACHE_DIR`` (its first call ever: compilation).

IBU's iteration counts come from an instrumented copy of its loop (same numpy/numba operations);
the copy's iterates are checked to be bit-identical to what ``IBU`` returns.

Usage::

    python benchmarks/em_speed.py              # writes benchmarks/results/em_speed.md
    python benchmarks/em_speed.py --quick      # one seed, tol 1e-8 only, writes nothing
"""

from __future__ import annotations

import argparse
import datetime as _dt
import importlib.metadata
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from numba import njit

import bayesldp
from bayesldp.estimators import estimate
from bayesldp.estimators.mle import grr_mle

K, N, EPSILON = 100, 100_000, 1.0
SEEDS = (20240611, 1, 2)
TOLS = (1e-8, 1e-10, 1e-12)
RAISED_CAP = 10_000_000
DEFAULT_TOL, DEFAULT_CAP = 1e-12, 10_000
MLE_TARGET = 1e-8
MLE_CAP = 12_000_000  # IBU iterations, about a minute at ~5 us each
OURS_TOLS = tuple(10.0**-e for e in range(8, 17))
GOAL = 100.0
HISTORY = (
    "Before the compiled loop (run of 2026-11-22 04:49 UTC, same machine, numpy SQUAREM loop, "
    "tol 1e-12, 10,000 maps at most): bayesldp 11 to 82 ms warm for 297 to 1,710 maps "
    "(about 50 µs per map, nearly all numpy call overhead), 0.6x to 2.8x IBU's time on the "
    "counts at multi-freq-ldpy's defaults."
)
BUDGET = 12.0  # seconds of repeats per measurement (at least one call)


@njit(cache=False)
def ibu_replica(k, a_matrix, obs_freq, tols, nb_iter, mle, target):
    """multi-freq-ldpy's IBU loop ("max_abs"), recording where each stopping rule fires.

    Returns, for each ``tols[j]``, the iteration at which IBU would return and its return
    value, and the first iteration whose iterate is within ``target`` of ``mle`` with that
    iterate (-1 when not reached within ``nb_iter``).
    """
    est = np.ones(k) / k
    hit = np.full(tols.shape[0], -1)
    snaps = np.zeros((tols.shape[0], k))
    hit_mle = -1
    snap_mle = np.zeros(k)
    for i in range(nb_iter):
        new = est * np.dot(a_matrix, obs_freq / np.dot(a_matrix, est))
        res = np.abs(est - new).max()
        done = True
        for j in range(tols.shape[0]):
            if hit[j] < 0 and res < tols[j]:
                hit[j] = i + 1
                snaps[j] = new
            done = done and hit[j] >= 0
        if hit_mle < 0 and np.abs(new - mle).max() < target:
            hit_mle = i + 1
            snap_mle[:] = new
        if done and (hit_mle >= 0 or target <= 0):
            break
        est = new
    return hit, snaps, hit_mle, snap_mle


def machine_info() -> dict[str, str]:
    model = "unknown"
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout
        for line in out.splitlines():
            if line.startswith("Model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "arch": platform.machine(),
        "model": model,
        "cores": str(os.cpu_count()),
        "load": ", ".join(f"{v:.2f}" for v in os.getloadavg()),
    }


def best_of(func, repeats: int, budget: float = BUDGET) -> tuple[float, object, int]:
    """Best wall-clock time over up to ``repeats`` calls (fewer if over ``budget`` s)."""
    wall, result, calls, spent = float("inf"), None, 0, 0.0
    while calls < repeats and (calls == 0 or spent < budget):
        t0 = time.perf_counter()
        result = func()
        elapsed = time.perf_counter() - t0
        wall, spent, calls = min(wall, elapsed), spent + elapsed, calls + 1
    return wall, result, calls


COLD_CODE = """
import time, numpy as np, bayesldp
from bayesldp.estimators import estimate
from multi_freq_ldpy.pure_frequency_oracles.GRR import GRR_Aggregator_IBU
mech = bayesldp.GRR({k}, {eps})
rng = np.random.default_rng({seed})
x = rng.choice({k}, size={n}, p=rng.dirichlet(np.ones({k})))
reports = mech.perturb(x, rng=rng)
t0 = time.perf_counter()
if {ibu}:
    GRR_Aggregator_IBU(reports, {k}, {eps}, {cap}, {tol}, "max_abs")
else:
    estimate(mech.tally(reports), "em", tol={tol}, max_iter={cap})
print(time.perf_counter() - t0)
"""


def cold_first_call(ibu: bool, empty_cache: bool = False) -> float:
    """Wall time of the first call in a fresh process (modules imported beforehand)."""
    code = COLD_CODE.format(
        k=K, eps=EPSILON, seed=SEEDS[0], n=N, ibu=ibu, cap=DEFAULT_CAP, tol=DEFAULT_TOL
    )
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ)
        if empty_cache:
            env["NUMBA_CACHE_DIR"] = cache
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
        )
    return float(out.stdout.strip().splitlines()[-1])


def run(seeds: tuple[int, ...], tols: tuple[float, ...], repeats: int, mle_part: bool) -> dict:
    from multi_freq_ldpy.estimators.Histogram_estimator import IBU
    from multi_freq_ldpy.pure_frequency_oracles.GRR import GRR_Aggregator_IBU

    mech = bayesldp.GRR(K, EPSILON)
    a_matrix = np.full((K, K), mech.q) + (mech.p - mech.q) * np.eye(K)
    out: dict = {"same": [], "defaults": [], "mle": [], "per_map": []}
    # first calls, each in a fresh process (numba's one-time set-up is paid by whoever calls
    # first in a process, so neither side may inherit it from the other)
    estimate(mech.simulate_tally(np.full(K, N // K), rng=0), "em")  # fills the numba cache
    out["cold"] = {
        "ibu": cold_first_call(True),
        "ours": cold_first_call(False),
        "compile": cold_first_call(False, empty_cache=True),
    }
    GRR_Aggregator_IBU(np.arange(K), K, EPSILON, 1, DEFAULT_TOL, "max_abs")  # compile here
    for seed in seeds:
        rng = np.random.default_rng(seed)
        x = rng.choice(K, size=N, p=rng.dirichlet(np.ones(K)))
        reports = mech.perturb(x, rng=rng)
        obs_freq = np.bincount(reports, minlength=K) / N
        tally = mech.tally(reports)
        mle = grr_mle(tally)

        def ibu(tol, cap, obs_freq=obs_freq):
            return IBU(K, a_matrix, obs_freq, cap, tol, "max_abs")

        def ours(tol, cap, accelerate=True, tally=tally):
            return estimate(tally, "em", tol=tol, max_iter=cap, accelerate=accelerate)

        # ------------------------------------------------ instrumented IBU: where it stops
        t0 = time.perf_counter()
        hit, snaps, hit_mle, snap_mle = ibu_replica(
            K,
            a_matrix,
            obs_freq,
            np.asarray(tols),
            MLE_CAP if mle_part else RAISED_CAP,
            mle,
            MLE_TARGET if mle_part else 0.0,
        )
        replica_time = time.perf_counter() - t0
        print(f"seed {seed}: replica {replica_time:.1f} s, hits {hit}, mle {hit_mle}", flush=True)

        # ------------------------------------------------ same tolerance, raised cap
        for j, tol in enumerate(tols):
            if hit[j] < 0:
                continue
            ibu_wall, ibu_est, ibu_calls = best_of(lambda tol=tol: ibu(tol, RAISED_CAP), repeats)
            ours_wall, res, _ = best_of(lambda tol=tol: ours(tol, RAISED_CAP), max(repeats, 7))
            out["same"].append(
                {
                    "seed": seed,
                    "tol": tol,
                    "ibu_iter": int(hit[j]),
                    "ibu_wall": ibu_wall,
                    "ibu_calls": ibu_calls,
                    "identical": bool(np.array_equal(ibu_est, snaps[j])),
                    "ours_iter": res.iterations,
                    "ours_conv": res.converged,
                    "ours_wall": ours_wall,
                    "ibu_mle": float(np.abs(ibu_est - mle).max()),
                    "ours_mle": float(np.abs(res.frequencies - mle).max()),
                    "diff": float(np.abs(ibu_est - res.frequencies).max()),
                }
            )
            print(out["same"][-1], flush=True)

        # ------------------------------------------------ multi-freq-ldpy's defaults
        ibu_e2e, ibu_est, _ = best_of(
            lambda reports=reports: GRR_Aggregator_IBU(
                reports, K, EPSILON, DEFAULT_CAP, DEFAULT_TOL, "max_abs"
            ),
            repeats,
        )
        ours_e2e, _, _ = best_of(
            lambda reports=reports: estimate(
                mech.tally(reports), "em", tol=DEFAULT_TOL, max_iter=DEFAULT_CAP
            ),
            max(repeats, 7),
        )
        ibu_core, _, _ = best_of(lambda: ibu(DEFAULT_TOL, DEFAULT_CAP), repeats)
        ours_core, res, _ = best_of(lambda: ours(DEFAULT_TOL, DEFAULT_CAP), max(repeats, 7))
        out["defaults"].append(
            {
                "seed": seed,
                "ibu_e2e": ibu_e2e,
                "ours_e2e": ours_e2e,
                "ibu_core": ibu_core,
                "ours_core": ours_core,
                "ours_iter": res.iterations,
                "ours_conv": res.converged,
                "ibu_res": float(
                    np.abs(ibu_est * (a_matrix @ (obs_freq / (a_matrix @ ibu_est))) - ibu_est).max()
                ),
                "ibu_mle": float(np.abs(np.asarray(ibu_est) - mle).max()),
                "ours_mle": float(np.abs(res.frequencies - mle).max()),
            }
        )

        # ------------------------------------------------ per map, plain EM
        ibu_plain, _, _ = best_of(lambda: ibu(0.0, DEFAULT_CAP), repeats)
        ours_plain, res, _ = best_of(lambda: ours(1e-300, DEFAULT_CAP, False), repeats)
        out["per_map"].append(
            {"seed": seed, "ibu": ibu_plain, "ours": ours_plain, "maps": res.iterations}
        )

        # ------------------------------------------------ to the MLE within 1e-8
        if mle_part:
            row = {"seed": seed, "ibu_iter": int(hit_mle)}
            if hit_mle > 0:
                wall, est, _ = best_of(lambda cap=int(hit_mle): ibu(0.0, cap), 1)
                row.update(
                    ibu_wall=wall,
                    identical=bool(np.array_equal(est, snap_mle)),
                    ibu_mle=float(np.abs(est - mle).max()),
                )
            for tol in OURS_TOLS:
                res = ours(tol, RAISED_CAP)
                if np.abs(res.frequencies - mle).max() < MLE_TARGET:
                    wall, res, _ = best_of(lambda tol=tol: ours(tol, RAISED_CAP), max(repeats, 7))
                    row.update(
                        ours_tol=tol,
                        ours_wall=wall,
                        ours_iter=res.iterations,
                        ours_mle=float(np.abs(res.frequencies - mle).max()),
                    )
                    break
            closed, _, _ = best_of(lambda tally=tally: estimate(tally, "mle"), 7)
            newton, res, _ = best_of(lambda tally=tally: estimate(tally, "mle", solver="newton"), 7)
            row.update(
                closed=closed,
                newton=newton,
                newton_mle=float(np.abs(res.frequencies - mle).max()),
                zeros=int((mle == 0).sum()),
            )
            out["mle"].append(row)
            print(row, flush=True)
    return out


def fmt_t(seconds: float) -> str:
    if seconds < 1e-3:
        return f"{seconds * 1e6:.0f} µs"
    return f"{seconds * 1e3:.1f} ms" if seconds < 1 else f"{seconds:.2f} s"


def ratio(a: float, b: float) -> str:
    r = a / b
    return f"{r:,.0f}x" if r >= 10 else f"{r:.1f}x"


def render(out: dict, repeats: int, command: str, load_start: str) -> str:
    info = machine_info()
    versions = {
        name: importlib.metadata.version(name) for name in ("numpy", "multi-freq-ldpy", "numba")
    }
    date = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    same = out["same"]
    same_ratios = [r["ibu_wall"] / r["ours_wall"] for r in same]
    lines = [
        "# EM speed: bayesldp against multi-freq-ldpy's IBU",
        "",
        f"GRR, K = {K}, n = {N:,}, epsilon = {EPSILON:g}; Dirichlet(1) populations; the same "
        "reports go to both aggregators in the same process. Goal: EM at least "
        f"{GOAL:.0f}x faster than IBU at the same tolerance.",
        "",
        f"- Command: `{command}`",
        f"- Date: {date}",
        f"- Machine: {info['arch']}, {info['model']}, {info['cores']} cores (shared with other "
        f"jobs); load average (1, 5, 15 min) at the start {load_start}, at the end "
        f"{info['load']}",
        f"- Python {platform.python_version()}, numpy {versions['numpy']}, numba "
        f"{versions['numba']}, bayesldp {bayesldp.__version__}, multi-freq-ldpy "
        f"{versions['multi-freq-ldpy']}",
        "",
        "Both sides stop at the first iteration with `max_x |theta'_x - theta_x| < tol` "
        "(multi-freq-ldpy's `err_func=\"max_abs\"`) and return `theta'`; bayesldp's EM is "
        "SQUAREM-accelerated (the same EM map, extrapolated, with a log-likelihood safeguard) and "
        "runs in one numba-compiled loop; on a GRR tally (one-hot support rows) an EM map costs "
        "O(K). Times are wall clock, warm (best of up to "
        f"{repeats} calls, at least 7 for bayesldp, fewer for IBU calls over {BUDGET:.0f} s in "
        "total), on the prepared counts (IBU on the report frequencies, "
        '`bayesldp.estimate(tally, "em", ...)` on the tally, its validation included). '
        '"to MLE" = max |estimate - exact MLE| (GRR closed form).',
        "",
        HISTORY,
        "",
        "## Same tolerance, reached by both (cap raised to 10^7 for both)",
        "",
        "| seed | tol | IBU iterations | IBU time | bayesldp EM maps | bayesldp time | speed-up | "
        "IBU to MLE | bayesldp to MLE | max abs diff |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in same:
        lines.append(
            f"| {r['seed']} | {r['tol']:g} | {r['ibu_iter']:,} | {fmt_t(r['ibu_wall'])}"
            f"{'' if r['ibu_calls'] > 1 else ' (1 call)'} | {r['ours_iter']:,}"
            f"{'' if r['ours_conv'] else ' (cap)'} | {fmt_t(r['ours_wall'])} | "
            f"**{ratio(r['ibu_wall'], r['ours_wall'])}** | {r['ibu_mle']:.1e} | "
            f"{r['ours_mle']:.1e} | {r['diff']:.1e} |"
        )
    identical = all(r["identical"] for r in same)
    lines += [
        "",
        "IBU's iteration counts are those of an instrumented copy of its loop, whose returned "
        f"iterates are {'bit-identical to' if identical else 'NOT all identical to'} IBU's.",
        "",
        "## multi-freq-ldpy's defaults (tol = 1e-12, at most 10,000 iterations)",
        "",
        "| seed | IBU from reports | bayesldp from reports | speed-up | IBU on counts | "
        "bayesldp on counts | speed-up | bayesldp maps | IBU residual at return | IBU to MLE | "
        "bayesldp to MLE |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in out["defaults"]:
        lines.append(
            f"| {r['seed']} | {fmt_t(r['ibu_e2e'])} | {fmt_t(r['ours_e2e'])} | "
            f"{ratio(r['ibu_e2e'], r['ours_e2e'])} | {fmt_t(r['ibu_core'])} | "
            f"{fmt_t(r['ours_core'])} | {ratio(r['ibu_core'], r['ours_core'])} | "
            f"{r['ours_iter']:,}{'' if r['ours_conv'] else ' (cap)'} | {r['ibu_res']:.1e} | "
            f"{r['ibu_mle']:.1e} | {r['ours_mle']:.1e} |"
        )
    lines += [
        "",
        "Here IBU stops at its cap without meeting the tolerance (its residual at return is "
        'above 1e-12), so this is not a comparison at the same tolerance. "From reports" '
        "includes counting the reports: `GRR_Aggregator_IBU` counts them in a Python loop, "
        "bayesldp with `GRR.tally` (`np.bincount`).",
        "",
        "## Per EM map (plain EM, no stopping, 10,000 maps)",
        "",
        "| seed | IBU 10,000 iterations | per iteration | bayesldp `accelerate=False`, 10,000 maps "
        "| per map | ratio |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for r in out["per_map"]:
        lines.append(
            f"| {r['seed']} | {fmt_t(r['ibu'])} | {r['ibu'] / 1e4 * 1e6:.2f} µs | "
            f"{fmt_t(r['ours'])} | {r['ours'] / r['maps'] * 1e6:.2f} µs | "
            f"{ratio(r['ibu'], r['ours'])} |"
        )
    lines += [
        "",
        "IBU's iteration is two dense K x K matrix-vector products; bayesldp's plain map is O(K) "
        "arithmetic plus the log-likelihood of the new iterate (K `log1p`, kept for the "
        "monotone trace), which is most of its cost.",
        "",
    ]
    if out["mle"]:
        lines += [
            f"## Time to get within {MLE_TARGET:g} of the exact MLE",
            "",
            "| seed | categories with MLE 0 | IBU iterations | IBU time | bayesldp tol used | "
            "bayesldp maps | bayesldp time | speed-up | `mle` closed form | `mle` newton |",
            "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for r in out["mle"]:
            if r["ibu_iter"] > 0:
                ibu_cells = f"{r['ibu_iter']:,} | {fmt_t(r['ibu_wall'])}"
            else:
                ibu_cells = f"not within {MLE_CAP:,} | > {MLE_CAP * 5e-6:.0f} s (est.)"
            if "ours_wall" in r:
                ours_cells = f"{r['ours_tol']:g} | {r['ours_iter']:,} | {fmt_t(r['ours_wall'])}"
                speed = ratio(r["ibu_wall"], r["ours_wall"]) if r["ibu_iter"] > 0 else "-"
            else:
                ours_cells, speed = "not reached | - | -", "-"
            lines.append(
                f"| {r['seed']} | {r['zeros']} | {ibu_cells} | {ours_cells} | {speed} | "
                f"{fmt_t(r['closed'])} | {fmt_t(r['newton'])} |"
            )
        lines += [
            "",
            "IBU is timed running exactly the iterations its instrumented copy needed (its "
            "iterate checked bit-identical); bayesldp with the largest tol in 1e-8, 1e-9, ... "
            "whose answer is within the target. EM converges slowly here (about 40 of the 100 "
            "MLE frequencies are 0, with KKT multipliers near 0): for the MLE itself `mle` "
            "(closed form for GRR, or active-set Newton for any tally) is the fast path.",
            "",
        ]
    cold = out["cold"]
    lines += [
        "## First call in the process (cold)",
        "",
        "Each in a fresh process, modules imported and reports drawn before the clock starts; "
        "multi-freq-ldpy's defaults (tol 1e-12, 10,000 iterations), from the reports.",
        "",
        "| | multi-freq-ldpy IBU | bayesldp em | speed-up |",
        "|---|---:|---:|---:|",
        f"| first call, numba cache on disk | {fmt_t(cold['ibu'])} (compiles `IBU`: it has "
        f"no cache) | {fmt_t(cold['ours'])} (loads its compiled kernels) | "
        f"{ratio(cold['ibu'], cold['ours'])} |",
        f"| first call ever (empty numba cache) | {fmt_t(cold['ibu'])} (same) | "
        f"{fmt_t(cold['compile'])} (compiles its kernels) | "
        f"{ratio(cold['ibu'], cold['compile'])} |",
        "",
        "## Verdict",
        "",
    ]
    lo, hi = min(same_ratios), max(same_ratios)
    fewer = [r["ibu_iter"] / r["ours_iter"] for r in same]
    per_map = [r["ibu"] / r["ours"] for r in out["per_map"]]
    core = [r["ibu_core"] / r["ours_core"] for r in out["defaults"]]
    tols_run = ", ".join(f"{t:g}" for t in sorted({r["tol"] for r in same}, reverse=True))
    verdict = (
        f"met in every case (lowest {lo:,.0f}x)"
        if lo >= GOAL
        else f"NOT met in every case (lowest {lo:,.1f}x)"
    )
    closer = all(r["ours_mle"] <= r["ibu_mle"] for r in same)
    closeness = (
        "in every case at least as close as IBU's to"
        if closer
        else "not always as close as IBU's to"
    )
    lines.append(
        f"**Goal >= {GOAL:.0f}x at the same tolerance: {verdict}.** At the same tolerance, "
        f"reached by both (tol {tols_run}; identical stopping rule, value and cap), "
        f"bayesldp's EM is {lo:,.0f}x to {hi:,.0f}x faster than multi-freq-ldpy's IBU on the "
        f"same reports, and its answers are {closeness} the exact MLE. Most of the "
        f"speed-up is the number of maps (SQUAREM needs {min(fewer):,.0f}x to "
        f"{max(fewer):,.0f}x fewer than plain EM); a plain compiled map is only "
        f"{min(per_map):.1f}x to {max(per_map):.1f}x cheaper than an IBU iteration (the "
        "per-map table). At multi-freq-ldpy's default settings (tol 1e-12, 10,000-iteration "
        "cap) IBU stops at the cap without meeting the tolerance, so that is not a "
        f"same-tolerance comparison; there bayesldp is {min(core):,.0f}x to {max(core):,.0f}x "
        "faster on the counts while actually meeting the tolerance. Cold, IBU's first call "
        "is dominated by numba compiling it; bayesldp's kernels compile once per "
        "installation (cached on disk)."
    )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one seed, tol 1e-8, no file")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=None, help="markdown output path")
    args = parser.parse_args()
    load_start = ", ".join(f"{v:.2f}" for v in os.getloadavg())
    seeds = SEEDS[:1] if args.quick else SEEDS
    tols = TOLS[:1] if args.quick else TOLS
    out = run(seeds, tols, args.repeats, mle_part=not args.quick)
    command = "python benchmarks/em_speed.py" + (" --quick" if args.quick else "")
    text = render(out, args.repeats, command, load_start)
    print(text)
    path = args.out
    if path is None and not args.quick:
        path = Path(__file__).parent / "results" / "em_speed.md"
    if path is not None:
        path.write_text(text)
        print(f"written to {path}")


if __name__ == "__main__":
    main()
