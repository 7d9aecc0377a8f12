"""Simulation-based calibration (Talts et al. 2018) of bayesldp's posterior samplers.

Grid: mechanism GRR or OUE, K in {3, 10}, eps in {1, 4}; n = 500 users; prior (used both to
simulate and to fit) Dirichlet(1, ..., 1), or the adaptive prior ``AdaptiveDirichlet(K)`` for
``hmc-adaptive``.  Each replication draws theta from that prior, true
counts ~ Multinomial(n, theta), the tally with ``mechanism.simulate_tally``, and samples the
posterior; the draws are thinned by ESS to M = 99 near-independent draws (ranks 0..99, 10 bins of
10), the rank of each true theta_x among them is recorded, and so is whether the central 90 %
interval of all the draws holds theta_x (``bayesldp.bayes.calibration``).  Replications of
one grid cell use the same data sets for every sampler (seeds fixed: ``SeedSequence([SEED,
cell])`` spawned per replication).  L = 200 replications per cell and sampler.

Samplers (backend modules called directly, without building InferenceData).  The default run is
``hmc`` and ``sgld`` on the whole grid (about 10-15 minutes on 2 shared cores):

* ``hmc`` -- bayesldp's numba NUTS, default settings (tune 1000), 2 chains x 1000 draws.
* ``sgld`` -- bayesldp's SGLD at its default settings (adaptive metric, constant step; the "auto"
  minibatch is the exact full-batch gradient at these sizes), 16 chains x 100 draws.  The
  settings in force (step, thin, tune, ...) are read from the backend's ``info`` and written
  into the results.
* ``sgld-mb`` -- the same with minibatches of 50 reports (control variate on, the default).
* ``sgld-paper`` -- AdOBEst-LDP's plain update (identity metric, step 0.5 / n, minibatch 50),
  32 chains x 200 draws thinned by 20, on two cells (GRR K=3 and OUE K=10, eps = 1).
* ``hmc-adaptive`` -- ``hmc`` under the adaptive prior (default scheme "joint"): theta drawn
  from ``AdaptiveDirichlet(K)`` (``a`` from its grid law, then ``Dirichlet(a 1_K)``) and fitted
  with it.  Not in the default run; ``--samplers hmc-adaptive --write
  benchmarks/results/calibration_adaptive.md`` (about 10 minutes on 2 cores).
* ``nuts`` -- PyMC's NUTS (``bayesldp.bayes.nuts``, model compiled per data set), 2 chains x
  500 draws after 500 tuning steps, about 5 s per fit, on the GRR K = 3, eps = 1 cell.

Verdict per row: every coordinate's chi-square p > 0.001 and the 90 % interval coverage pooled
over coordinates in [0.85, 0.95].  Per-coordinate coverages (binomial s.e. 2.1 points at
L = 200) are listed too.

Usage::

    python benchmarks/calibration.py                   # hmc + sgld, full grid
    python benchmarks/calibration.py --all --write benchmarks/results/calibration.md
    python benchmarks/calibration.py --samplers hmc --reps 50 --jobs 1   # quick look
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import datetime
import hashlib
import importlib
import importlib.util
import itertools
import logging
import os
import platform
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bayesldp.bayes import AdaptiveDirichlet
from bayesldp.bayes.calibration import BackendSampler, sbc_replication, summarise_sbc
from bayesldp.mechanisms.grr import GRR
from bayesldp.mechanisms.unary import OUE

SEED = 20261122
N_USERS = 500
REPS = 200
SIZE = 99  # thinned draws per replication: ranks 0..99
BINS = 10
LEVEL = 0.9
MECHANISMS = {"GRR": GRR, "OUE": OUE}
KS = (3, 10)
EPSILONS = (1.0, 4.0)
PYMC_CELLS = (("GRR", 3, 1.0),)
PAPER_CELLS = (("GRR", 3, 1.0), ("OUE", 10, 1.0))
#: name -> (sampler, label, cells it runs on: None = whole grid, else (mechanism, K, eps))
SAMPLERS: dict[str, tuple[BackendSampler, str, tuple | None]] = {
    "hmc": (BackendSampler("hmc", draws=1000, chains=2), "hmc (bayesldp NUTS)", None),
    "sgld": (BackendSampler("sgld", draws=100, chains=16), "sgld (defaults)", None),
    "sgld-mb": (
        BackendSampler("sgld", draws=100, chains=16, options={"minibatch": 50}),
        "sgld, minibatch 50",
        None,
    ),
    "sgld-paper": (
        BackendSampler(
            "sgld",
            draws=200,
            chains=32,
            options={"metric": "identity", "minibatch": 50, "thin": 20},
        ),
        "sgld, paper's update",
        PAPER_CELLS,
    ),
    "nuts": (
        BackendSampler("nuts", draws=500, chains=2, options={"tune": 500, "cores": 1}),
        "nuts (PyMC NUTS)",
        PYMC_CELLS,
    ),
    "hmc-adaptive": (
        BackendSampler("hmc", draws=1000, chains=2),
        "hmc (bayesldp NUTS), adaptive prior",
        None,
    ),
}
#: samplers simulated and fitted under the adaptive prior (the others: Dirichlet(1))
ADAPTIVE = ("hmc-adaptive",)
DEFAULT_SAMPLERS = "hmc,sgld"
CHUNK = 10  # replications per task


@dataclass(frozen=True)
class Cell:
    index: int
    mechanism: str
    k: int
    epsilon: float


def grid() -> list[Cell]:
    cells = itertools.product(MECHANISMS, KS, EPSILONS)
    return [Cell(i, m, k, e) for i, (m, k, e) in enumerate(cells)]


def _quiet() -> None:
    logging.getLogger("pymc").setLevel(logging.ERROR)
    logging.getLogger("pytensor").setLevel(logging.ERROR)


def run_chunk(sampler: str, cell: Cell, seeds: list[np.random.SeedSequence]) -> dict:
    """Replications of one cell for one sampler (runs in a worker process)."""
    if SAMPLERS[sampler][0].method == "nuts":
        import pymc  # noqa: F401  (PyMC sets its loggers' levels on import)

        _quiet()
    mech = MECHANISMS[cell.mechanism](cell.k, cell.epsilon)
    alpha = AdaptiveDirichlet(cell.k) if sampler in ADAPTIVE else np.ones(cell.k)
    ranks, inside, ess, ok, seconds = [], [], [], [], []
    for seed in seeds:
        started = time.perf_counter()
        rep = sbc_replication(
            mech, alpha, N_USERS, SAMPLERS[sampler][0], seed, size=SIZE, level=LEVEL
        )
        seconds.append(time.perf_counter() - started)
        ranks.append(rep.rank)
        inside.append(rep.inside)
        ess.append(rep.ess)
        ok.append(rep.sufficient)
    return {
        "ranks": np.stack(ranks),
        "inside": np.stack(inside),
        "ess": np.array(ess),
        "sufficient": np.array(ok),
        "seconds": np.array(seconds),
    }


def warm_up() -> None:
    """Load the numba kernels and ArviZ once in each worker before the timed replications."""
    _quiet()
    rng = np.random.SeedSequence(0)
    for name in ("hmc", "sgld"):
        sbc_replication(GRR(3, 1.0), np.ones(3), 50, SAMPLERS[name][0], rng, size=SIZE)
    sbc_replication(GRR(3, 1.0), AdaptiveDirichlet(3), 50, SAMPLERS["hmc"][0], rng, size=SIZE)


_INFO_KEYS = (
    "tune",
    "thin",
    "step_size",
    "metric",
    "minibatch",
    "control_variate",
    "refresh_scale",
    "target_accept",
    "max_treedepth",
)


def effective_settings(name: str) -> str:
    """The backend's own report (``SamplerOutput.info``) of the settings a fit runs with."""
    sampler = SAMPLERS[name][0]
    if sampler.method == "nuts":  # a PyMC fit only to read its settings is not worth it
        return ", ".join(f"{k}={v}" for k, v in sampler.options.items())
    module = importlib.import_module(f"bayesldp.bayes.{sampler.method}")
    tally = GRR(3, 1.0).simulate_tally([100, 200, 200], 0)
    info = module.sample(
        tally, np.ones(3), draws=5, chains=1, random_seed=0, **sampler.options
    ).info
    if sampler.method == "hmc":
        info = {k: v for k, v in info.items() if k != "step_size"}  # adapted, per chain
    return ", ".join(f"{k}={info[k]}" for k in _INFO_KEYS if k in info)


def source_digests(samplers: list[str]) -> str:
    """Short sha256 of each backend module the run used (the samplers are being developed); a
    backend that is a package (``hmc/``) is hashed over its modules' names and sources."""
    out = []
    for method in sorted({SAMPLERS[s][0].method for s in samplers}):
        path = Path(importlib.util.find_spec(f"bayesldp.bayes.{method}").origin)
        if path.name != "__init__.py":
            out.append(f"{method}.py {hashlib.sha256(path.read_bytes()).hexdigest()[:12]}")
            continue
        digest = hashlib.sha256()
        for module in sorted(path.parent.glob("*.py")):
            digest.update(module.name.encode() + b"\0" + module.read_bytes())
        out.append(f"{method}/ {digest.hexdigest()[:12]}")
    return ", ".join(out)


def _commit() -> str:
    """The checkout's commit (short hash; "+ changes" when the work tree differs from it)."""
    here = Path(__file__).resolve().parents[1]
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=here, text=True,
                          capture_output=True).stdout.strip()  # fmt: skip
    dirty = subprocess.run(["git", "status", "--porcelain", "bayesldp"], cwd=here, text=True,
                           capture_output=True).stdout.strip()  # fmt: skip
    return (head or "unknown") + (" + changes" if dirty else "")


def machine() -> str:
    model = "unknown"
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        for line in out.splitlines():
            if line.startswith("Model name"):
                model = line.split(":", 1)[1].strip()
    except OSError:
        pass
    return (
        f"{platform.machine()}, {model}, {os.cpu_count()} cores, Python {platform.python_version()}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--samplers",
        default=DEFAULT_SAMPLERS,
        help=f"comma list of {', '.join(SAMPLERS)} (default {DEFAULT_SAMPLERS})",
    )
    parser.add_argument(
        "--all", action="store_true", help="every Dirichlet(1) sampler (all but hmc-adaptive)"
    )
    parser.add_argument("--reps", type=int, default=REPS, help="replications per cell (L)")
    parser.add_argument("--pymc-reps", type=int, default=REPS, help="L for PyMC NUTS")
    parser.add_argument("--jobs", type=int, default=2, help="worker processes")
    parser.add_argument("--write", type=Path, default=None, help="write the markdown here")
    args = parser.parse_args(argv)
    samplers = (
        [s for s in SAMPLERS if s not in ADAPTIVE]
        if args.all
        else [s.strip() for s in args.samplers.split(",")]
    )
    for s in samplers:
        if s not in SAMPLERS:
            parser.error(f"--samplers: unknown sampler {s!r}; valid: {list(SAMPLERS)}")
    if min(args.reps, args.pymc_reps) < 5 * BINS:
        parser.error(f"--reps/--pymc-reps: at least {5 * BINS} (5 expected per rank bin)")

    jobs: list[tuple[str, Cell, int]] = []
    for s in samplers:
        allowed = SAMPLERS[s][2]
        for cell in grid():
            if allowed is None or (cell.mechanism, cell.k, cell.epsilon) in allowed:
                jobs.append((s, cell, args.pymc_reps if s == "nuts" else args.reps))

    digests = source_digests(samplers)
    started = time.perf_counter()
    results: dict[tuple[str, int], list[dict | None]] = {}
    with cf.ProcessPoolExecutor(max_workers=args.jobs, initializer=warm_up) as pool:
        futures = {}
        # the slow PyMC fits first, so that they do not trail at the end
        for s, cell, reps in sorted(jobs, key=lambda job: job[0] != "nuts"):
            seeds = np.random.SeedSequence([SEED, cell.index]).spawn(reps)
            chunks = [seeds[i : i + CHUNK] for i in range(0, reps, CHUNK)]
            results[(s, cell.index)] = [None] * len(chunks)
            for j, chunk in enumerate(chunks):
                futures[pool.submit(run_chunk, s, cell, chunk)] = (s, cell.index, j)
        done = 0
        for fut in cf.as_completed(futures):
            s, ci, j = futures[fut]
            results[(s, ci)][j] = fut.result()
            done += 1
            if done % 20 == 0 or done == len(futures):
                print(
                    f"[{time.perf_counter() - started:7.1f} s] {done}/{len(futures)} chunks",
                    file=sys.stderr,
                    flush=True,
                )
    wall = time.perf_counter() - started
    if source_digests(samplers) != digests:
        digests += " (digests at the start; a backend source changed during the run)"

    rows, details = [], []
    worker_seconds = dict.fromkeys(samplers, 0.0)
    for s, cell, _ in jobs:
        label = SAMPLERS[s][1]
        parts = results[(s, cell.index)]
        ranks = np.concatenate([p["ranks"] for p in parts])
        inside = np.concatenate([p["inside"] for p in parts])
        ess = np.concatenate([p["ess"] for p in parts])
        low = int((~np.concatenate([p["sufficient"] for p in parts])).sum())
        secs = np.concatenate([p["seconds"] for p in parts])
        worker_seconds[s] += float(secs.sum())
        summ = summarise_sbc(ranks, inside, max_rank=SIZE, bins=BINS, level=LEVEL, low_ess=low)
        cov = summ.coverage
        rows.append(
            f"| {label} | {cell.mechanism} | {cell.k} | {cell.epsilon:g} | {summ.reps} "
            f"| {summ.min_p:.3g} | {summ.bonferroni_p:.3g} | {summ.mean_coverage:.3f} "
            f"| {cov.min():.3f} / {cov.max():.3f} | {np.median(ess):.0f} | {low} "
            f"| {secs.mean():.2f} | {summ.verdict} |"
        )
        flags = ["*" if not 0.85 <= c <= 0.95 else "" for c in cov]
        details.append(
            f"| {label} | {cell.mechanism} | {cell.k} | {cell.epsilon:g} "
            f"| {' '.join(f'{p:.2g}' for p in summ.pvalues)} "
            f"| {' '.join(f'{c:.2f}{f}' for c, f in zip(cov, flags, strict=True))} |"
        )

    header = (
        "| sampler | mechanism | K | eps | L | min chi-square p | Bonferroni p | mean coverage "
        "| min / max coverage | median ESS | low-ESS reps | s/fit | verdict |\n"
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"
    )
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    command = "python benchmarks/calibration.py " + " ".join(argv or sys.argv[1:])
    settings = []
    for s in samplers:
        sampler, label, allowed = SAMPLERS[s]
        where = "all cells"
        if allowed is not None:
            where = ", ".join(f"{m} K={k} eps={e:g}" for m, k, e in allowed)
        options = f"options `{sampler.options}`" if sampler.options else "backend defaults"
        settings.append(
            f"- {label} (`{s}`): `bayesldp.bayes.{sampler.method}.sample`, {sampler.chains} "
            f"chains x {sampler.draws} draws, {options} (in force: {effective_settings(s)}); "
            f"{where}; worker time {worker_seconds[s]:.0f} s"
        )
    se = 100 * np.sqrt(LEVEL * (1 - LEVEL) / args.reps)
    text = f"""# Simulation-based calibration of the posterior samplers

SBC (Talts et al. 2018, arXiv:1804.06788) with `bayesldp.bayes.calibration`: per replication
theta from the prior that is also fitted (Dirichlet(1), or for the samplers marked "adaptive
prior" `AdaptiveDirichlet(K)`: log a ~ N(log 1/2, 2^2) on its grid, theta | a ~ Dirichlet(a 1_K)),
true counts ~ Multinomial(n = {N_USERS},
theta), tally = `mechanism.simulate_tally`, posterior draws thinned by ESS (min over coordinates
of ArviZ ESS_bulk and ESS_tail) to M = {SIZE} draws; rank of theta_x among them (0..{SIZE}),
chi-square test of uniformity over {BINS} bins per coordinate; coverage of the central
{LEVEL:.0%} interval of all draws.  Every sampler sees the same data sets in a cell (seeds
`SeedSequence([{SEED}, cell]).spawn(L)`).  Samplers (worker time: summed over replications;
divide by the number of workers for wall time):

{chr(10).join(settings)}

Verdict: pass iff every coordinate's chi-square p > 0.001 and the coverage pooled over the K
coordinates is in [0.85, 0.95].  "Bonferroni p" = min(1, K x min p), the family-wise p over the
K coordinates.  One coordinate's coverage has binomial s.e. {se:.1f} points at L = {args.reps}.
"median ESS": of the sampler's draws per replication; "low-ESS reps": replications with
ESS < {SIZE}, ranked against draws closer than one autocorrelation time.  "s/fit": mean wall
time per replication (simulation, sampling, ESS) in a worker.

- machine: {machine()}
- date: {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC
- commit: {_commit()}
- command: `{command.strip()}`
- backend sources (sha256): {digests}
- runtime: {wall:.0f} s wall with {args.jobs} worker processes; load average at the end: {load}
  (the machine was shared with other jobs)

{header}
{chr(10).join(rows)}

Per-coordinate chi-square p-values and coverages (`*`: outside 85-95 %):

| sampler | mechanism | K | eps | p per coordinate | coverage per coordinate |
|---|---|---:|---:|---|---|
{chr(10).join(details)}
"""
    print(text)
    if args.write is not None:
        args.write.parent.mkdir(parents=True, exist_ok=True)
        args.write.write_text(text)
        print(f"wrote {args.write}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
