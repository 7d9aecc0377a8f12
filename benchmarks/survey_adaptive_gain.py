"""Does the default adaptive survey beat plain GRR at the exact budget, on the same users?

The paper's grid (K in {10, 20}, rho in {0.01, 0.1, 1}, eps in {0.5, 1, 5}, n = 500 K users as
the authors' code), ``--repeats`` populations theta ~ Dirichlet(rho) per cell.  On the same users:

* the default survey: ``AdaptiveSurvey(K, eps, random_seed=r).simulate(x)`` (engine
  ``"posterior"``, utility ``--utility``, default the ``lookahead`` rule), then the MLE of its
  reports and its ``posterior()`` mean: ``bayesldp.fit`` of ``survey.tally()`` under the
  survey's prior and fit method (the adaptive prior, ``"auto"``), with the seed ``r``;
* the non-adaptive baseline: every user reports through GRR at the full budget, coupled with
  the survey's own report (``benchmarks/survey_coupling.py``: each baseline report has exactly
  GRR's law and agrees with the survey's as often as possible), then the MLE and the same fit,
  same seed, of that tally in the survey's tally form (``grr_tally_like_survey``).

Both halves of the comparison are coupled: where the survey never adapts, the two tallies are
the same bit for bit and so are the two fits' draws, so such a population reads exactly 1.0 for
both estimators; otherwise the two posterior means differ by what the design changed plus the
Monte Carlo error of two fits of different tallies.  (Until 2026-11-30 the survey's posterior
mean came from its own ``posterior()`` seed, independent of the baseline fit's: populations that
never adapted then differed by two fits' Monte Carlo error, about 0.2% of the TV.  Lines of the
``.jsonl`` from then carry no ``paired_fits`` and are not reused.)

Per cell: mean TV of each estimate, the ratio adaptive / GRR with its standard error (delta
method over the paired populations), the one-sided p-value of "worse than GRR by more than 5%"
(``1 - Phi((ratio - 1.05) / se)``) and Holm's verdict over the cells at 0.05, and the mean |S|.
Pooled: the inverse-variance mean of the log ratios (se of log ratio = se / ratio) with a 95%
interval, over all cells, over the sparse cells (rho = 0.01) and over the sparse cells at
eps <= 1.

Each finished population is a line of ``results/survey_adaptive_gain.jsonl`` (the ``--out``
path with ``.jsonl``); a rerun with the same utility and rule (the survey config's utility and
lookahead settings, recorded on each line) takes those and runs only the rest, and its seconds
are its own.

``--utility default+split`` runs the default survey with the lookahead rule's split-half test
(``AdaptiveSurvey(..., lookahead_test="split")``), ``default+posterior`` with its score on the
posterior mean (``lookahead_score="posterior"``), ``default+split+posterior`` with both,
``default+draws`` with the rule before 2026-11-30, each pool draw in turn as the simulated
population (``lookahead_truth="draws"``; the default's table from then is in git history, commit
7c0c7bb); write each to another ``--out``.

Usage::

    python benchmarks/survey_adaptive_gain.py --workers 2   # results/survey_adaptive_gain.md
    python benchmarks/survey_adaptive_gain.py --repeats 2 --cells 0,1 --out /tmp/g.md
"""

from __future__ import annotations

import argparse
import datetime as _dt
import itertools
import json
import os
import platform
import subprocess
import time
import warnings
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
from paired_ratios import holm, paired_ratio, pooled_ratio, pooled_section, worse_p_value
from survey_coupling import coupled_grr_reports, grr_tally_like_survey

ROOT = Path(__file__).resolve().parents[1]
GRID = list(itertools.product((10, 20), (0.01, 0.1, 1.0), (0.5, 1.0, 5.0)))
DEFAULT_OUT = ROOT / "benchmarks/results/survey_adaptive_gain.md"


#: the lookahead rule's variants a ``--utility`` may add, as ``default+split+posterior``
VARIANTS = {"split": {"lookahead_test": "split"}, "posterior": {"lookahead_score": "posterior"},
            "draws": {"lookahead_truth": "draws"}}


def population(k: int, rho: float, eps: float, rep: int) -> tuple[np.random.Generator, np.ndarray,
                                                                    np.ndarray]:  # fmt: skip
    """Population ``rep`` of a cell: its generator (seeded by the cell and ``rep``), theta ~
    Dirichlet(rho) and the 500 K users' values, in arrival order."""
    gen = np.random.default_rng([k, int(rho * 100), int(eps * 10), rep])
    theta = gen.dirichlet(np.full(k, rho))
    return gen, theta, gen.choice(k, size=500 * k, p=theta)


def survey_options(utility: str) -> dict[str, str]:
    """``AdaptiveSurvey``'s options for ``--utility`` (``default`` or a rule, ``+`` variants)."""
    base, *variants = utility.split("+")
    options = {} if base == "default" else {"utility": base}
    for variant in variants:
        options.update(VARIANTS[variant])
    return options


def survey_rule(utility: str) -> list[str]:
    """The rule ``--utility`` runs, as the survey's config names it (the utility and the
    lookahead rule's test, score and simulated truth): a cached line is reused only for the
    same rule, so a rerun after the package's default changed runs every population again."""
    from bayesldp.adaptive import AdaptiveSurvey

    config = AdaptiveSurvey(2, 1.0, **survey_options(utility)).config
    return [config.utility, config.lookahead_test, config.lookahead_score,
            config.lookahead_truth]  # fmt: skip


def one_population(k: int, rho: float, eps: float, rep: int, utility: str) -> dict[str, float]:
    warnings.simplefilter("ignore")
    from bayesldp import estimate, fit
    from bayesldp.adaptive import AdaptiveSurvey

    gen, theta, x = population(k, rho, eps, rep)
    started = time.perf_counter()
    survey = AdaptiveSurvey(k, eps, random_seed=rep, **survey_options(utility)).simulate(x)
    seconds = time.perf_counter() - started
    history = survey.history
    baseline = coupled_grr_reports(k, eps, survey.eps1, x, history["report"].values,
                                   history["subset"].values, gen)  # fmt: skip

    def tvs(tally):
        """The MLE's and the posterior mean's TV: the survey's ``posterior()`` estimator
        (its prior and fit method) with the seed both tallies share."""
        mle = estimate(tally, "mle", std_errors=False).frequencies
        post = fit(tally, prior=survey.prior, method=survey.fit_method, random_seed=rep,
                   progressbar=False, compute_convergence_checks=False)  # fmt: skip
        mean = post.posterior["theta"].mean(("chain", "draw")).values
        return 0.5 * np.abs(mle - theta).sum(), 0.5 * np.abs(mean - theta).sum()

    mle_a, post_a = tvs(survey.tally())
    mle_g, post_g = tvs(grr_tally_like_survey(k, eps, baseline))
    return {
        "mle_a": mle_a,
        "post_a": post_a,
        "mle_g": mle_g,
        "post_g": post_g,
        "size": float(history["subset_size"].mean()),
        "seconds": seconds,
    }


#: "worse than GRR by more than this factor" is the one-sided test's alternative
MARGIN = 1.05


def _cell(cell: tuple[int, float, float], res: list[dict[str, float]]) -> dict:
    """One cell's numbers from its populations' results."""
    col = {key: np.array([r[key] for r in res]) for key in res[0]}
    out = {"cell": cell, "col": col}
    for est in ("mle", "post"):
        ratio, se = paired_ratio(col[f"{est}_a"], col[f"{est}_g"])
        out[est] = (ratio, se, worse_p_value(ratio, se, MARGIN))
    return out


def _row(c: dict, worse: dict[str, bool]) -> str:
    k, rho, eps = c["cell"]
    col = c["col"]
    parts = [f"| {k} | {rho} | {eps} "]
    for est in ("mle", "post"):
        ratio, se, p = c[est]
        verdict = "worse" if worse[est] else "no"
        parts.append(f"| {col[f'{est}_g'].mean():.4f} | {col[f'{est}_a'].mean():.4f} | "
                     f"{ratio:.3f} ({se:.3f}) | {p:.3f} | {verdict} ")  # fmt: skip
    parts.append(f"| {col['size'].mean():.2f} | {col['seconds'].mean():.1f} |")
    return "".join(parts)


def _summary(cells: list[dict]) -> list[str]:
    groups = {"all cells": cells,
              "sparse (rho = 0.01)": [c for c in cells if c["cell"][1] == 0.01],
              "sparse, eps <= 1": [c for c in cells if c["cell"][1] == 0.01 and c["cell"][2] <= 1]}
    lines = ["| pooled over | cells | MLE ratio | posterior mean ratio |", "|---|---:|---:|---:|"]
    for name, group in groups.items():
        if group:
            mle, post = (pooled_ratio([c[est][:2] for c in group]) for est in ("mle", "post"))
            lines.append(f"| {name} | {len(group)} | {mle} | {post} |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--utility", default="default")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--cells", default="all", help="grid indices (K, rho, eps order), or all")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args()
    load = os.getloadavg()
    started = time.perf_counter()
    cells = GRID if args.cells == "all" else [GRID[int(i)] for i in args.cells.split(",")]
    cache = args.out.with_suffix(".jsonl")  # one line per finished population: a rerun resumes
    rule = survey_rule(args.utility)
    done = _cached(cache, args.utility, rule)
    results = {cell: [done[(*cell, rep)] for rep in range(args.repeats) if (*cell, rep) in done]
               for cell in cells}  # fmt: skip
    todo = [(*cell, rep, args.utility) for cell in cells for rep in range(args.repeats)
            if (*cell, rep) not in done]  # fmt: skip

    def finished() -> list[dict]:
        return [_cell(c, results[c]) for c in cells if len(results[c]) == args.repeats]

    with ProcessPoolExecutor(args.workers) as pool, cache.open("a") as log:
        outcomes = pool.map(one_population, *zip(*todo, strict=True)) if todo else []
        for job, result in zip(todo, outcomes, strict=True):
            k, rho, eps, rep, utility = job
            results[(k, rho, eps)].append(result)
            line = {"k": k, "rho": rho, "eps": eps, "rep": rep, "utility": utility,
                    "rule": rule, "paired_fits": True, **result}  # fmt: skip
            log.write(json.dumps(line) + "\n")
            log.flush()
            if len(results[(k, rho, eps)]) == args.repeats:  # the file, as each cell ends
                _write(args, finished(), len(cells), load[0], time.perf_counter() - started,
                       len(done))  # fmt: skip
    _write(args, finished(), len(cells), load[0], time.perf_counter() - started, len(done))


def _out(out: Path) -> str:
    """``--out`` as the header shows it: nothing for the default file, else the path (relative
    to the repository where it lies inside)."""
    out = out.resolve()
    if out == DEFAULT_OUT:
        return ""
    return f" --out {out.relative_to(ROOT) if out.is_relative_to(ROOT) else out}"


def _cached(cache: Path, utility: str, rule: list[str]) -> dict[tuple, dict]:
    """Populations already run with this utility and rule (:func:`survey_rule`), by (K, rho,
    eps, rep), from the JSON lines; lines written before both posteriors were fitted with one
    seed (no ``paired_fits``) or before the rule was recorded are skipped."""
    done = {}
    if cache.exists():
        for line in cache.read_text().splitlines():
            row = json.loads(line)
            same = row.pop("utility") == utility and row.pop("rule", None) == rule
            if same and row.pop("paired_fits", False):
                key = tuple(row.pop(name) for name in ("k", "rho", "eps", "rep"))
                done[key] = row
    return done


def _write(args: argparse.Namespace, cells: list[dict], n_cells: int, load: float, secs: float,
           cached: int) -> None:  # fmt: skip
    """The results file with the cells done so far (Holm's verdicts over those cells);
    ``cached``: the populations read from the JSON lines, not run."""
    worse = {est: holm([c[est][2] for c in cells]) for est in ("mle", "post")}
    rows = [_row(c, {est: worse[est][i] for est in worse}) for i, c in enumerate(cells)]
    if rows:
        print(rows[-1], flush=True)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                            capture_output=True, text=True).stdout.strip()  # fmt: skip
    done = "" if len(rows) == n_cells else f" (so far: {len(rows)} of {n_cells} cells)"
    text = "\n".join(
        [
            "# The default adaptive survey against plain GRR at the exact budget, on the same "
            "users (a coupled baseline)",
            "",
            f"`python benchmarks/survey_adaptive_gain.py --repeats {args.repeats} --utility "
            f"{args.utility} --workers {args.workers} --cells {args.cells}{_out(args.out)}`; "
            f"{_dt.date.today()}, "
            f"commit {commit}; {platform.machine()}, {os.cpu_count()} cores, load average at "
            f"the start {load:.2f}; {secs:.0f} s{done}"
            + (f" ({cached} populations read from its .jsonl, run earlier)." if cached else "."),
            "",
            f"n = 500 K users, {args.repeats} populations per cell, every report eps-LDP (the "
            "exact budget).  Adaptive: the default survey (`AdaptiveSurvey(K, eps)`, utility "
            f"`{args.utility}`); GRR: every user through GRR at the full budget, coupled with "
            "the survey's report (exactly GRR's law; `benchmarks/survey_coupling.py`).  TV: mean "
            "over the populations of the MLE's and of the posterior mean's (bayesldp.fit, "
            "adaptive prior); ratio adaptive / GRR with its standard error (delta method, paired "
            f"populations); p: one-sided, worse than GRR by more than {MARGIN}x; worse: Holm's "
            "verdict over the cells at 0.05.  Seconds: the adaptive survey's `simulate`.",
            "",
            "| K | rho | eps | GRR MLE TV | adaptive MLE TV | ratio (se) | p | worse | "
            "GRR posterior TV | adaptive posterior TV | ratio (se) | p | worse | mean S | "
            "simulate s |",
            "|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---|---:|---:|",
            *rows,
            *pooled_section(_summary(cells)),
        ]
    )
    args.out.write_text(text)


if __name__ == "__main__":
    main()
