"""EM (iterative Bayesian update) speed: bayesldp against multi-freq-ldpy 0.2.5's IBU.

GRR with K = 100, n = 100,000, epsilon = 1.  For each seed the true values are drawn from a
Dirichlet(1) population, randomised once with ``bayesldp.GRR.perturb``, and the *same* reports
are given to both aggregators with the same stopping rule: stop when one EM iteration changes no
frequency by more than ``tol = 1e-12`` (multi-freq-ldpy's ``err_func="max_abs"``, its default
``tol``), at most 10,000 iterations (its default ``nb_iter``).

* multi-freq-ldpy: ``GRR_Aggregator_IBU(reports, k, eps, nb_iter, tol, "max_abs")`` (counts the
  reports in a Python loop, then runs its numba-compiled ``IBU``).  "cold" is the first call in
  the process (includes numba's compilation of ``IBU``); "warm" is the best of ``--repeats``
  later calls; "core" times ``IBU`` alone on the prepared report frequencies.
* bayesldp: ``estimate(mech.tally(reports), "em", tol=1e-12, max_iter=10_000)``: tally
  (``np.bincount``) plus SQUAREM-accelerated EM on the K distinct likelihood rows.  "core" times
  ``estimate`` alone on the prepared tally.

Accuracy columns: ``max |diff|`` between the two estimates, each one's distance to the exact MLE
(the GRR closed form of seed 000, Appendix B) and its EM residual ``max_x |F(theta)_x - theta_x|``
(one more EM iteration from the returned estimate; below ``tol`` means the stopping rule was met).

Usage::

    python benchmarks/em_speed.py              # writes benchmarks/results/em_speed.md
    python benchmarks/em_speed.py --quick      # one seed, fewer repeats, writes nothing
"""

from __future__ import annotations

import argparse
import datetime as _dt
import importlib.metadata
import os
import platform
import subprocess
import time
from pathlib import Path

import numpy as np

import bayesldp
from bayesldp.estimators import estimate
from bayesldp.estimators.mle import grr_mle

K, N, EPSILON = 100, 100_000, 1.0
TOL, MAX_ITER = 1e-12, 10_000
SEEDS = (20240611, 1, 2)
GOAL = 100.0


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
    load = ", ".join(f"{v:.2f}" for v in os.getloadavg())
    return {
        "arch": platform.machine(),
        "model": model,
        "cores": str(os.cpu_count()),
        "load": load,
    }


def em_residual(theta: np.ndarray, channel: np.ndarray, report_freq: np.ndarray) -> float:
    """``max |F(theta) - theta|`` for the EM map of a finite channel (numpy, independent)."""
    new = theta * (channel @ (report_freq / (theta @ channel)))
    return float(np.abs(new - theta).max())


def best_of(func, repeats: int) -> tuple[float, float, object]:
    """Best wall-clock and CPU time over ``repeats`` calls, and the last result."""
    wall, cpu, result = float("inf"), float("inf"), None
    for _ in range(repeats):
        w0, c0 = time.perf_counter(), time.process_time()
        result = func()
        wall = min(wall, time.perf_counter() - w0)
        cpu = min(cpu, time.process_time() - c0)
    return wall, cpu, result


def run(seeds: tuple[int, ...], repeats: int) -> tuple[list[dict], dict]:
    from multi_freq_ldpy.estimators.Histogram_estimator import IBU
    from multi_freq_ldpy.pure_frequency_oracles.GRR import GRR_Aggregator_IBU

    mech = bayesldp.GRR(K, EPSILON)
    channel = mech.channel
    rows = []
    cold = {}
    for i, seed in enumerate(seeds):
        rng = np.random.default_rng(seed)
        theta = rng.dirichlet(np.ones(K))
        x = rng.choice(K, size=N, p=theta)
        reports = mech.perturb(x, rng=rng)
        report_freq = np.bincount(reports, minlength=K) / N

        def peer(reports=reports):
            return GRR_Aggregator_IBU(reports, K, EPSILON, MAX_ITER, TOL, "max_abs")

        def ours(reports=reports):
            return estimate(mech.tally(reports), "em", tol=TOL, max_iter=MAX_ITER)

        if i == 0:  # first calls in the process: numba compiles IBU here
            w0, c0 = time.perf_counter(), time.process_time()
            peer()
            cold["peer"] = (time.perf_counter() - w0, time.process_time() - c0)
            w0, c0 = time.perf_counter(), time.process_time()
            ours()
            cold["ours"] = (time.perf_counter() - w0, time.process_time() - c0)

        peer_wall, peer_cpu, peer_est = best_of(peer, repeats)
        ours_wall, ours_cpu, ours_res = best_of(ours, repeats)
        p, q = mech.p, mech.q
        a_matrix = np.full((K, K), q) + (p - q) * np.eye(K)

        def peer_core(report_freq=report_freq, a_matrix=a_matrix):
            return IBU(K, a_matrix, report_freq, MAX_ITER, TOL, "max_abs")

        tally = mech.tally(reports)

        def ours_core(tally=tally):
            return estimate(tally, "em", tol=TOL, max_iter=MAX_ITER)

        peer_core_wall, _, _ = best_of(peer_core, repeats)
        ours_core_wall, _, _ = best_of(ours_core, repeats)
        mle = grr_mle(tally)
        closed_wall, _, _ = best_of(lambda tally=tally: estimate(tally, "mle"), repeats)
        newton_wall, _, newton = best_of(
            lambda tally=tally: estimate(tally, "mle", solver="newton"), repeats
        )
        plain_wall, _, plain = best_of(
            lambda tally=tally: estimate(tally, "em", tol=TOL, max_iter=MAX_ITER, accelerate=False),
            min(repeats, 2),
        )
        ours_est = ours_res.frequencies
        peer_est = np.asarray(peer_est)
        rows.append(
            {
                "seed": seed,
                "peer_wall": peer_wall,
                "peer_cpu": peer_cpu,
                "ours_wall": ours_wall,
                "ours_cpu": ours_cpu,
                "peer_core": peer_core_wall,
                "ours_core": ours_core_wall,
                "diff": float(np.abs(ours_est - peer_est).max()),
                "ours_mle": float(np.abs(ours_est - mle).max()),
                "peer_mle": float(np.abs(peer_est - mle).max()),
                "ours_res": em_residual(ours_est, channel, report_freq),
                "peer_res": em_residual(peer_est, channel, report_freq),
                "ours_iter": ours_res.iterations,
                "ours_conv": ours_res.converged,
                "closed": closed_wall,
                "newton": newton_wall,
                "newton_mle": float(np.abs(newton.frequencies - mle).max()),
                "zeros": int((mle == 0).sum()),
                "plain": plain_wall,
                "plain_iter": plain.iterations,
                "plain_mle": float(np.abs(plain.frequencies - mle).max()),
            }
        )
    return rows, cold


def fmt_t(seconds: float) -> str:
    return f"{seconds * 1e3:.1f} ms" if seconds < 1 else f"{seconds:.2f} s"


def render(rows: list[dict], cold: dict, repeats: int, command: str) -> str:
    info = machine_info()
    versions = {
        name: importlib.metadata.version(name) for name in ("numpy", "multi-freq-ldpy", "numba")
    }
    date = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    cold_ratio = cold["peer"][0] / cold["ours"][0]
    lines = [
        "# EM speed: bayesldp against multi-freq-ldpy's IBU",
        "",
        f"GRR, K = {K}, n = {N:,}, epsilon = {EPSILON:g}; Dirichlet(1) populations; the same "
        "reports go to both aggregators, with the same stopping rule "
        f"(max |change| < {TOL:g}, at most {MAX_ITER:,} iterations). Goal: >= {GOAL:.0f}x.",
        "",
        f"- Command: `{command}`",
        f"- Date: {date}",
        f"- Machine: {info['arch']}, {info['model']}, {info['cores']} cores; load average at "
        f"the end {info['load']}",
        f"- Python {platform.python_version()}, numpy {versions['numpy']}, bayesldp "
        f"{bayesldp.__version__}, multi-freq-ldpy {versions['multi-freq-ldpy']} "
        f"(numba {versions['numba']})",
        "",
        "**The machine was shared with other jobs (other helpers' test runs) while this ran: "
        "absolute times are noisy; the lead will re-run it on an idle machine.** Both sides "
        "run in the same process on the same reports, so the ratios are what to compare.",
        "",
        "## First call in the process (cold)",
        "",
        "| | multi-freq-ldpy IBU | bayesldp em | ratio |",
        "|---|---:|---:|---:|",
        f"| wall clock | {fmt_t(cold['peer'][0])} | {fmt_t(cold['ours'][0])} | {cold_ratio:.0f}x |",
        f"| CPU time | {fmt_t(cold['peer'][1])} | {fmt_t(cold['ours'][1])} | "
        f"{cold['peer'][1] / cold['ours'][1]:.0f}x |",
        "",
        "multi-freq-ldpy's cold time is dominated by numba compiling `IBU` on first use; "
        "bayesldp needs no compilation (its modules are imported before the clock starts, "
        "like multi-freq-ldpy's).",
        "",
        f"## Warm calls (best of {repeats})",
        "",
        "| seed | IBU end-to-end | bayesldp end-to-end | ratio | IBU core | bayesldp core | "
        "ratio core | bayesldp EM iterations | max abs diff | bayesldp to MLE | "
        "IBU to MLE | bayesldp residual | IBU residual |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['seed']} | {fmt_t(r['peer_wall'])} | {fmt_t(r['ours_wall'])} | "
            f"{r['peer_wall'] / r['ours_wall']:.1f}x | {fmt_t(r['peer_core'])} | "
            f"{fmt_t(r['ours_core'])} | {r['peer_core'] / r['ours_core']:.1f}x | "
            f"{r['ours_iter']}{'' if r['ours_conv'] else ' (max)'} | {r['diff']:.1e} | "
            f"{r['ours_mle']:.1e} | {r['peer_mle']:.1e} | {r['ours_res']:.1e} | "
            f"{r['peer_res']:.1e} |"
        )
    lines += [
        "",
        "For reference, the exact MLE on the same tallies (what EM converges to): "
        '`estimate(tally, "mle")` (GRR closed form, seed 000 Appendix B) and the general '
        'solver `estimate(tally, "mle", solver="newton")` (accelerated EM warm start, then '
        "active-set Newton to the KKT point):",
        "",
        "| seed | categories with MLE 0 | mle closed form | mle newton | newton to closed form "
        "| bayesldp plain EM (accelerate=False) | its iterations | its distance to MLE |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['seed']} | {r['zeros']} | {fmt_t(r['closed'])} | {fmt_t(r['newton'])} | "
            f"{r['newton_mle']:.1e} | {fmt_t(r['plain'])} | {r['plain_iter']} | "
            f"{r['plain_mle']:.1e} |"
        )
    lines += [
        "",
        "End-to-end = from the reports (tallying included); core = the EM on prepared counts "
        '(IBU on the report frequencies, bayesldp `estimate` on the tally). "to MLE" = '
        "max |estimate - exact MLE| (GRR closed form); residual = max |F(theta) - theta| after "
        "one more plain EM iteration from the returned estimate.",
        "",
        "Reading the numbers: IBU iterates plain EM and stops at its 10,000-iteration cap with "
        "a residual far above the tolerance; bayesldp's EM is SQUAREM-accelerated (same map, same "
        "fixed point, same stopping rule), meets the tolerance in a few hundred to a few thousand "
        "map evaluations and lands much closer to the MLE. Per EM iteration numba is cheaper than "
        "numpy's call overhead at K = 100 (compare the plain-EM column: the same 10,000 "
        "iterations as IBU, slower than numba), so the warm ratio comes only from needing fewer "
        "iterations, and the cold ratio mostly from avoiding JIT compilation. The >= 100x goal "
        "holds, if at all, only against the cold call; warm, on equal terms, bayesldp's EM is "
        "about as fast as IBU to a few times faster while actually meeting the tolerance. "
        "For the MLE itself, `mle` (closed form, or Newton) is the fast path.",
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one seed, 2 repeats, no file")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", type=Path, default=None, help="markdown output path")
    args = parser.parse_args()
    seeds = SEEDS[:1] if args.quick else SEEDS
    repeats = 2 if args.quick else args.repeats
    rows, cold = run(seeds, repeats)
    command = "python benchmarks/em_speed.py" + (" --quick" if args.quick else "")
    text = render(rows, cold, repeats, command)
    print(text)
    out = args.out
    if out is None and not args.quick:
        out = Path(__file__).parent / "results" / "em_speed.md"
    if out is not None:
        out.write_text(text)
        print(f"written to {out}")


if __name__ == "__main__":
    main()
