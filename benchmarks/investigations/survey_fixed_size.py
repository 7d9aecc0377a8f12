"""What a fixed subset size does for the survey's posterior mean, against the lookahead rule.

The question: on the sparse cells at eps <= 1 (rho = 0.01) the default survey's posterior mean
is 0.887x GRR's (``benchmarks/results/survey_adaptive_gain.md``), and an oracle that knows theta
reaches 0.640x (``survey_oracle_posterior.md``).  Is what stands between them the rule's choice of
the size ``|S|``, or the survey's ignorance of which categories are on top?  Here the survey
runs as it does by default (the posterior pool, each batch's ``S`` the top ``s`` of its own pool
draw, the exact budget) except that the lookahead rule's choice is replaced by a constant ``s``
from the pool's first refresh on (``bayesldp.adaptive.survey.lookahead_size`` patched in the
worker): the categories in ``S`` are still learnt, only the size is fixed.  Each population is
scored exactly as ``benchmarks/survey_adaptive_gain.py`` scores it (its ``one_population``: the
same populations, the coupled GRR baseline, both posterior means from one estimator with one
seed), so the ratios compare with that table's.

The fixed sizes run on the sparse cells at eps <= 1 (``--sizes``) and, to show what a fixed size
costs where adapting does not pay, on the rho = 0.1 and 1 cells at eps <= 1 (``--spread-sizes``).
A fixed size that does well on the sparse cells is a choice made knowing the population is
sparse, which a survey does not know in advance: it bounds what a size rule could reach there,
it is not a rule.

Usage::

    # results/survey_fixed_size.md
    python benchmarks/investigations/survey_fixed_size.py --workers 2
    python benchmarks/investigations/survey_fixed_size.py --repeats 2 --sizes 2 \
        --spread-sizes --out /tmp/f.md
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
from paired_ratios import paired_ratio, pooled_ratio, pooled_section  # noqa: E402

SPARSE = [(k, 0.01, eps) for k in (10, 20) for eps in (0.5, 1.0)]
SPREAD = [(k, rho, eps) for k in (10, 20) for rho in (0.1, 1.0) for eps in (0.5, 1.0)]


def one_population(k: int, rho: float, eps: float, rep: int, size: int) -> dict:
    """``survey_adaptive_gain.one_population`` with the lookahead rule's size fixed at ``size``."""
    import survey_adaptive_gain

    import bayesldp.adaptive.survey as survey_module

    survey_module.lookahead_size = lambda *args, **kwargs: size
    return survey_adaptive_gain.one_population(k, rho, eps, rep, "default")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--spread-sizes", type=int, nargs="*", default=[2])
    parser.add_argument("--workers", type=int, default=1)
    default_out = ROOT / "benchmarks/investigations/results/survey_fixed_size.md"
    parser.add_argument("--out", type=Path, default=default_out)
    args = parser.parse_args()
    load = os.getloadavg()[0]
    started = time.perf_counter()
    designs = [(c, s) for s in args.sizes for c in SPARSE]
    designs += [(c, s) for s in args.spread_sizes for c in SPREAD]
    cache = args.out.with_suffix(".jsonl")  # one line per population: a rerun resumes
    done = _cached(cache)
    jobs = [(*c, rep, s) for c, s in designs for rep in range(args.repeats)
            if (*c, rep, s) not in done]  # fmt: skip
    with ProcessPoolExecutor(args.workers) as pool, cache.open("a") as log:
        for i, result in enumerate(pool.map(one_population, *zip(*jobs, strict=True)), 1):
            job = jobs[i - 1]
            done[job] = result
            log.write(json.dumps({"job": list(job), **result}) + "\n")
            log.flush()
            if i % 10 == 0 or i == len(jobs):
                print(f"{i} of {len(jobs)} populations", flush=True)
                _write(args, designs, done, load, time.perf_counter() - started)
    _write(args, designs, done, load, time.perf_counter() - started)


def _cached(cache: Path) -> dict[tuple, dict]:
    done = {}
    if cache.exists():
        for line in cache.read_text().splitlines():
            row = json.loads(line)
            done[tuple(row.pop("job"))] = row
    return done


def _cell(cell: tuple, size: int, res: list[dict]) -> dict:
    col = {key: np.array([r[key] for r in res]) for key in res[0]}
    return {"cell": cell, "size": size, "n": len(res), "col": col,
            "post": paired_ratio(col["post_a"], col["post_g"]),
            "mle": paired_ratio(col["mle_a"], col["mle_g"])}  # fmt: skip


def _row(c: dict) -> str:
    (k, rho, eps), col = c["cell"], c["col"]
    (post, post_se), (mle, mle_se) = c["post"], c["mle"]
    return (
        f"| {c['size']} | {k} | {rho} | {eps} | {c['n']} | {col['post_g'].mean():.4f} | "
        f"{col['post_a'].mean():.4f} | {post:.3f} ({post_se:.3f}) | {mle:.3f} ({mle_se:.3f}) |"
    )


def _summary(cells: list[dict]) -> list[str]:
    lines = ["| fixed s | cells | posterior mean / GRR | MLE / GRR |", "|---:|---|---:|---:|"]
    groups = (("sparse, eps <= 1", (0.01,)), ("rho = 0.1 and 1, eps <= 1", (0.1, 1.0)))
    for size in sorted({c["size"] for c in cells}):
        for name, rhos in groups:
            group = [c for c in cells if c["size"] == size and c["cell"][1] in rhos]
            if group:
                post, mle = (pooled_ratio([c[key] for c in group]) for key in ("post", "mle"))
                lines.append(f"| {size} | {name} ({len(group)}) | {post} | {mle} |")
    return lines


def _write(args, designs: list, done: dict, load: float, secs: float) -> None:
    cells = []
    for cell, size in designs:
        jobs = [(*cell, rep, size) for rep in range(args.repeats)]
        res = [done[job] for job in jobs if job in done]
        if len(res) > 1:
            cells.append(_cell(cell, size, res))
    total = args.repeats * len(designs)
    ran = sum(c["n"] for c in cells)
    so_far = "" if ran == total else f" (so far: {ran} of {total} populations)"
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                            capture_output=True, text=True).stdout.strip()  # fmt: skip
    listed = lambda values: " ".join(str(v) for v in values)  # noqa: E731
    text = "\n".join(
        [
            "# The survey with a fixed subset size: what the size rule leaves on the sparse cells",
            "",
            f"`python benchmarks/investigations/survey_fixed_size.py --repeats {args.repeats} "
            f"--sizes {listed(args.sizes)} --spread-sizes {listed(args.spread_sizes)} --workers "
            f"{args.workers}`; {_dt.date.today()}, commit {commit}; {platform.machine()}, "
            f"{os.cpu_count()} cores, load average at the start {load:.2f}; {secs:.0f} s"
            f"{so_far}.",
            "",
            "The default survey `AdaptiveSurvey(K, eps)` (n = 500 K users, the exact budget) with "
            "the lookahead rule's size replaced by a constant s from the pool's first refresh on; "
            "each batch's S is still the top s of its own posterior pool draw.  Scored as "
            "`benchmarks/survey_adaptive_gain.py` scores the default (the same populations, "
            "the coupled GRR baseline, both posterior means from one estimator and seed): TV "
            "means over the populations, ratio fixed-size survey / GRR with its paired standard "
            "error.  The default rule's own ratios on these populations are in "
            "`benchmarks/results/survey_adaptive_gain.md`.",
            "",
            "| fixed s | K | rho | eps | populations | GRR posterior TV | survey posterior TV | "
            "posterior ratio (se) | MLE ratio (se) |",
            "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
            *(_row(c) for c in cells),
            *pooled_section(_summary(cells)),
        ]
    )
    args.out.write_text(text)


if __name__ == "__main__":
    main()
