"""Whole-process time of an AdOBEst-LDP survey at the paper's scale (Aydın and
Yıldırım 2025), both engines.

n = 500,000 users, K = 20, epsilon = 1, subset selection before every user (``batch_size = 1``).
Runs (``--runs``, utility:engine): the paper's engine ``sgld`` (20 SGLD updates per user with
minibatch 50, constant step 0.5/n, then the final SGLD run, 2000 updates, 1000 burn-in) with
``fisher`` (U1; its O(1)-per-candidate closed form) and ``tv`` (U4, O(K) per candidate), and the
default engine ``posterior`` (subsets from draws of the calibrated posterior, refreshed as the
reports grow by 25%, or by ``refresh``, then ``bayesldp.fit``) with ``tv`` and the default rule
``lookahead``; each in a fresh Python process timed from outside (interpreter start, imports,
data generation, numba compilation or cache loading, the survey, the posterior):

* "uncached": ``NUMBA_CACHE_DIR`` points at an empty directory, so every kernel is compiled;
* "cached": the same directory again, now holding the compiled kernels.

The child also reports its own phases (import, simulate, posterior).  A second table compares the
numpy reference of subset selection (one stacked (K, K, K) channel construction + one vectorised
utility call) with the compiled per-user kernel, and the stacked construction with K calls of
``RRRR(...).channel``.

Usage::

    python benchmarks/survey_speed.py                 # writes benchmarks/results/survey_speed.md
    python benchmarks/survey_speed.py --n 50000 --out /tmp/x.md    # a quick run
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = textwrap.dedent(
    """
    import json, sys, time
    t0 = time.perf_counter()
    import numpy as np
    from bayesldp.adaptive import AdaptiveSurvey
    t1 = time.perf_counter()
    n, k, utility, engine = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
    refresh = {"refresh": float(sys.argv[5])} if len(sys.argv) > 5 else {}
    gen = np.random.default_rng(2025)
    theta = gen.dirichlet(np.full(k, 0.1))
    x = gen.choice(k, size=n, p=theta)
    paper = {"engine": "sgld", "prior": 1.0} if engine == "sgld" else {}
    survey = AdaptiveSurvey(k, 1.0, utility=utility, random_seed=1, n_expected=n, **paper,
                            **refresh)
    t2 = time.perf_counter()
    survey.simulate(x)
    t3 = time.perf_counter()
    idata = survey.posterior(chains=1, engine="sgld") if paper else survey.posterior()
    draws = idata.posterior["theta"].values.reshape(-1, k)
    est = draws.mean(axis=0)
    lo, hi = np.quantile(draws, [0.05, 0.95], axis=0)
    t4 = time.perf_counter()
    print(json.dumps({
        "import": t1 - t0, "setup": t2 - t1, "simulate": t3 - t2, "posterior": t4 - t3,
        "tv": float(0.5 * np.abs(est - theta).sum()),
        "covered": int(((lo <= theta) & (theta <= hi)).sum()),
        "mean_size": float(survey.history["subset_size"].mean()),
        "subsets": int(survey._store.n_sub), "rows": int(survey._store.n_rows),
    }))
    """
)


def machine() -> dict[str, str]:
    model = "unknown"
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            if line.lower().startswith("model name"):
                model = line.split(":", 1)[1].strip()
    except (OSError, subprocess.CalledProcessError):
        pass
    return {
        "arch": platform.machine(),
        "model": model,
        "cores": str(os.cpu_count()),
        "python": platform.python_version(),
    }


def run_child(n: int, k: int, run: list[str], cache_dir: str) -> dict[str, float]:
    env = {**os.environ, "NUMBA_CACHE_DIR": cache_dir, "PYTHONPATH": str(ROOT)}
    started = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(n), str(k), *run],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr)
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    result["wall"] = wall
    return result


def selection_micro(k: int = 20, draws: int = 2000) -> list[tuple[str, float, float]]:
    """Per-draw seconds: numpy reference vs compiled kernel, per utility."""
    import numpy as np

    from bayesldp.adaptive import _kernels as kn
    from bayesldp.adaptive.selection import candidate_params, select_subset
    from bayesldp.adaptive.utilities import UTILITIES

    thetas = np.random.default_rng(0).dirichlet(np.full(k, 0.3), size=draws)
    params = candidate_params(k, 1.0, 0.8)
    rows = []
    for name in UTILITIES:
        code = kn.RULE_CODES[name]
        kn.choose_many(thetas[:2], code, 1.0, params)  # compile / load
        t = time.perf_counter()
        for theta in thetas[:200]:
            select_subset(theta, 1.0, name, 0.8)
        ref = (time.perf_counter() - t) / 200
        t = time.perf_counter()
        kn.choose_many(thetas, code, 1.0, params)
        fast = (time.perf_counter() - t) / draws
        rows.append((name, ref, fast))
    return rows


def stack_micro(k: int = 20, reps: int = 200) -> tuple[float, float]:
    import numpy as np

    import bayesldp
    from bayesldp.adaptive.selection import candidate_channels

    order = np.random.default_rng(1).permutation(k)
    t = time.perf_counter()
    for _ in range(reps):
        candidate_channels(order, 1.0, 0.8)
    stacked = (time.perf_counter() - t) / reps
    t = time.perf_counter()
    for _ in range(reps // 10):
        np.stack([bayesldp.RRRR(k, 1.0, order[:s].tolist(), eps1=0.8).channel for s in range(k)])
    looped = (time.perf_counter() - t) / (reps // 10)
    return stacked, looped


def _commit() -> str:
    return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                          capture_output=True, text=True).stdout.strip()  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=500_000)
    parser.add_argument("--k", type=int, default=20)
    parser.add_argument("--runs", default="fisher:sgld,tv:sgld,tv:posterior,lookahead:posterior,"
                        "lookahead:posterior:1.0", help="utility:engine[:refresh]")  # fmt: skip
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "survey_speed.md"))
    args = parser.parse_args()

    info = machine()
    load_before = os.getloadavg()
    rows = []
    for run in args.runs.split(","):
        utility, engine = run.split(":")[:2]
        if run.count(":") == 2:
            engine += f" (refresh {run.split(':')[2]})"
        with tempfile.TemporaryDirectory(prefix="numba-cache-") as cache:
            for label in ("uncached", "cached"):
                res = run_child(args.n, args.k, run.split(":"), cache)
                rows.append((utility, engine, label, res))
                print(utility, engine, label, json.dumps({k: round(v, 3) for k, v in res.items()}))
    sel = selection_micro(args.k)
    stacked, looped = stack_micro(args.k)
    load_after = os.getloadavg()

    now = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        "# AdOBEst-LDP survey speed",
        "",
        f"Generated by `python benchmarks/survey_speed.py --n {args.n} --k {args.k} --runs "
        f"{args.runs}` on {now}, commit {_commit()}.",
        f"Machine: {info['arch']}, {info['model']}, {info['cores']} cores, Python "
        f"{info['python']}.  Load average before / after: "
        f"{load_before[0]:.2f} / {load_after[0]:.2f} -- the machine was shared with other "
        "jobs, so these wall times are upper bounds.",
        "",
        f"Survey: n = {args.n:,} users, K = {args.k}, epsilon = 1, theta ~ Dirichlet(0.1), "
        "selection before every user (`batch_size = 1`).  Engine `sgld`: the paper's schedule "
        "(20 SGLD updates per user, minibatch 50, step 0.5/n, prior Dirichlet(1)), then "
        "`posterior(chains=1, engine='sgld')` (2000 updates, 1000 burn-in).  Engine "
        "`posterior` (the default): subsets from draws of the calibrated posterior, refreshed "
        "as the reports grow by 25% (`bayesldp.adaptive.pool`), then the default `posterior()` "
        "(`bayesldp.fit` under the adaptive prior, 4 chains x 1000 draws).  Whole process = a "
        "fresh `python` timed from outside.  Covered: categories (of K) whose true frequency "
        "is inside the final posterior's 90% interval.",
        "",
        "| utility | engine | numba cache | whole process (s) | import (s) | simulate (s) "
        "| posterior (s) | users/s in simulate | mean size of S | distinct subsets | TV "
        "| covered |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for utility, engine, label, r in rows:
        lines.append(
            f"| {utility} | {engine} | {label} | {r['wall']:.1f} | {r['import']:.1f} "
            f"| {r['simulate']:.1f} | {r['posterior']:.1f} | {args.n / r['simulate']:,.0f} "
            f"| {r['mean_size']:.2f} | {r['subsets']} | {r['tv']:.4f} | {r['covered']}/{args.k} |"
        )
    cached = {f"{u}:{e}": r["wall"] for u, e, label, r in rows if label == "cached"}
    ratios = [f"{new} / {old}: {cached[new] / cached[old]:.2f}x"
              for new in cached if ":posterior" in new
              for old in cached if old.endswith(":sgld")]  # fmt: skip
    if ratios:
        lines += ["", "Whole process, cached, each posterior-engine run over each SGLD run "
                  "(utility:engine): " + "; ".join(ratios) + "."]  # fmt: skip
    lines += [
        "",
        "The uncached simulate time includes compiling the survey kernels on first call.",
        "",
        f"Subset selection per posterior draw (K = {args.k}, epsilon = 1, eps1 = 0.8 epsilon):",
        "",
        "| utility | numpy reference (us) | compiled kernel (us) | speed-up |",
        "|---|---|---|---|",
    ]
    for name, ref, fast in sel:
        lines.append(f"| {name} | {ref * 1e6:.0f} | {fast * 1e6:.2f} | {ref / fast:.0f}x |")
    lines += [
        "",
        f"Candidate channel stack (K = {args.k}): broadcast construction "
        f"{stacked * 1e6:.0f} us vs K calls of `RRRR(...).channel` {looped * 1e6:.0f} us "
        f"({looped / stacked:.0f}x).",
        "",
    ]
    text = "\n".join(lines)
    print(text)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
