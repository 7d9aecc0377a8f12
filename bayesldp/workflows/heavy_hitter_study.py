"""Running the heavy-hitters spec: draw users, run each discovery, score it, fit its posterior.

A heavy-hitters spec (:mod:`bayesldp.workflows.spec.heavy_hitters`) draws ``n`` users, each
holding one of the population's ``k`` items (``w0, w1, ...``) from its frequencies, and runs
every ``[[methods]]`` entry (PEM, SFP or TreeHist at each epsilon) on the same users.  The
truth is the users' own shares; the true top list the ``top`` most held items (ties broken by
index).  A found code is named by the item whose code it is (:class:`ItemEncoder`), or counts as
held by no user.  Each run is scored by

* ``precision`` (found items in the true top list / found items) and ``recall`` (/ ``top``);
* with ``[bayes]``, the found items' posterior (:meth:`PEM.posterior`): ``coverage``, the share
  of found items held by some user whose 90% interval covers their true share (a found code
  no user holds has share 0, below every equal-tailed interval, and is counted in ``unheld``),
  and ``decisions``, the share of found items for which ``Pr(share > threshold) > 0.5`` agrees
  with ``share > threshold``.

Seeds: ``SeedSequence(seed)`` spawns one stream per repeat, which spawns the population's, the
users' and one per (method, epsilon), so adding an entry leaves the others' numbers alone.
"""

from __future__ import annotations

import csv
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from bayesldp.simulate import population_from_spec

Progress = Callable[[str], None]
#: the metrics of a run, averaged over repeats in the summary
SCORES = ("found", "precision", "recall", "coverage", "unheld", "decisions", "seconds")


@dataclass
class HeavyHitterResult:
    """One row per (repeat, method, epsilon) and one line per posterior fit's convergence."""

    spec: dict[str, Any]
    n: int = 0
    repeats: int = 0
    rows: list[dict[str, Any]] = field(default_factory=list)
    convergence: list[str] = field(default_factory=list)


def run_heavy_hitters(spec: dict[str, Any], *, seed: int | None = None, quick: bool = False,
                      progress: Progress | None = None) -> HeavyHitterResult:  # fmt: skip
    """Run a validated heavy-hitters spec (``--quick``: n / 10 users, one repeat)."""
    from bayesldp.workflows.spec.heavy_hitters import item_labels, make_method

    say = progress or (lambda _msg: None)
    study, population = spec["study"], spec["population"]
    n = max(100, study["n"] // 10) if quick else study["n"]
    repeats = 1 if quick else study["repeats"]
    k, top = population["k"], study["top"]
    labels = np.array(item_labels(k), dtype=object)
    entries = [(method, eps) for method in spec["methods"] for eps in method["epsilon"]]
    result = HeavyHitterResult(spec, n, repeats)
    item_of: dict[str, dict[int, int]] = {}  # encoder fingerprint -> code -> first item
    codes_of: dict[str, np.ndarray] = {}
    root = np.random.SeedSequence(study["seed"] if seed is None else seed)
    for rep in range(repeats):  # each repeat's stream made as it starts: root.spawn's children
        rep_seq = np.random.SeedSequence(root.entropy, spawn_key=(*root.spawn_key, rep),
                                         pool_size=root.pool_size)  # fmt: skip
        pop_seq, user_seq, *seqs = rep_seq.spawn(2 + len(entries))
        theta = population_from_spec(population, np.random.default_rng(pop_seq))
        x = np.random.default_rng(user_seq).choice(k, size=n, p=theta)
        truth = np.bincount(x, minlength=k) / n
        true_top = set(np.argsort(-truth, kind="stable")[:top].tolist())
        for (method, eps), seq in zip(entries, seqs, strict=True):
            protocol = make_method(method, k, top, eps)
            say(f"repeat {rep + 1}/{repeats}  {protocol!r}  n={n}")
            fingerprint = protocol.encoder.fingerprint
            if fingerprint not in codes_of:
                codes_of[fingerprint] = protocol.encoder.encode(labels)
                item_of[fingerprint] = {}
                for i, c in enumerate(codes_of[fingerprint].tolist()):
                    item_of[fingerprint].setdefault(c, i)
            rng = np.random.default_rng(seq)
            start = time.perf_counter()
            if method["name"] == "SFP":
                reports = protocol.perturb(labels[x], rng)
            else:
                reports = protocol.perturb_codes(codes_of[fingerprint][x], rng)
            found = protocol.identify(reports)
            items = [item_of[fingerprint].get(int(c), -1) for c in found.codes]
            hits = sum(i in true_top for i in items)
            row = {"repeat": rep, "method": method["name"], "epsilon": eps, "found": len(items),
                   "precision": hits / len(items) if items else np.nan, "recall": hits / top,
                   "coverage": np.nan, "unheld": sum(i < 0 for i in items),
                   "decisions": np.nan}  # fmt: skip
            if spec["bayes"]["posterior"] and items:
                what = f"repeat {rep}, {method['name']}, epsilon {eps:g}"
                _score_posterior(result, row, protocol, reports, found, items, truth, spec, rng,
                                 what)  # fmt: skip
            row["seconds"] = time.perf_counter() - start
            result.rows.append(row)
    return result


def _score_posterior(result, row, protocol, reports, found, items, truth, spec, rng, what):
    """The found items' posterior: coverage of their 90% intervals and threshold decisions."""
    from bayesldp.workflows.grouped_study import _convergence

    bayes, threshold = spec["bayes"], spec["study"]["threshold"]
    width = (protocol.encoder.bits + 3) // 4
    names = [f"w{i}" if i >= 0 else f"0x{int(c):0{width}x}"
             for i, c in zip(items, found.codes, strict=True)]  # fmt: skip
    pymc_log = logging.getLogger("pymc")
    level = pymc_log.level
    pymc_log.setLevel(logging.WARNING)
    try:
        post = protocol.posterior(reports, found, threshold, labels=names, method=bayes["method"],
                                  draws=bayes["draws"], chains=bayes["chains"],
                                  random_seed=int(rng.integers(2**31)), progressbar=False,
                                  compute_convergence_checks=False)  # fmt: skip
    finally:
        pymc_log.setLevel(level)
    _convergence(result, what, post.idata)
    bounds = post.interval(0.9).values[: len(items)]
    share = np.array([truth[i] if i >= 0 else 0.0 for i in items])
    held = share > 0
    covered = (bounds[:, 0] <= share) & (share <= bounds[:, 1])
    row["coverage"] = covered[held].mean() if held.any() else np.nan
    row["decisions"] = np.mean((post.prob_above.values > 0.5) == (share > threshold))


def summary_table(result: HeavyHitterResult) -> str:
    """Markdown: each (method, epsilon)'s scores averaged over the repeats."""
    groups: dict[tuple[str, float], list[dict[str, Any]]] = {}
    for row in result.rows:
        groups.setdefault((row["method"], row["epsilon"]), []).append(row)
    head = ["method", "epsilon", *SCORES]
    lines = ["| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 1)]
    for (method, eps), rows in groups.items():
        means = [np.nanmean([r[s] for r in rows]) if any(np.isfinite(r[s]) for r in rows)
                 else np.nan for s in SCORES]  # fmt: skip
        cells = [method, f"{eps:g}", *(f"{m:.3f}" if np.isfinite(m) else "-" for m in means)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def write_report(result: HeavyHitterResult, out: Path) -> Path:
    """``report.md`` and ``metrics.csv`` (one row per repeat, method and epsilon) in ``out``."""
    with (out / "metrics.csv").open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(result.rows[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows(result.rows)
    study, population = result.spec["study"], result.spec["population"]
    lines = [f"# {study['name']} (heavy_hitters spec)", ""]
    if study.get("description"):
        lines += [study["description"], ""]
    lines += [
        f"{result.n:,} users over {population['k']:,} items ({population['kind']}), "
        f"{result.repeats} repeat(s); scored against the true top {study['top']}. Means over "
        "the repeats: items found, precision, recall, coverage of the found items' 90% "
        "posterior intervals (items some user holds), found codes no user holds (unheld), "
        f"decisions (Pr(share > {study['threshold']:g}) > 0.5 agreeing with the truth), seconds "
        "per run.",
        "",
        summary_table(result),
        "",
        "Files: metrics.csv (one row per repeat, method and epsilon).",
    ]
    if result.convergence:
        lines += ["", "## Posterior convergence (every fit)", "", *result.convergence]
    report = out / "report.md"
    report.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return report


def run_command(spec: dict[str, Any], args: Any, out: Path, say: Progress) -> int:
    """``bayesldp run`` on a heavy-hitters spec: report.md and metrics.csv in ``out``."""
    from bayesldp.workflows.outputs import staged_outputs

    say(f"heavy_hitters spec {spec['study']['name']!r} from {args.spec}")
    result = run_heavy_hitters(spec, seed=args.seed, quick=args.quick, progress=say)
    with staged_outputs(out) as stage:  # every file of the report, or none
        report = out / write_report(result, stage).name
    print(summary_table(result))
    print(f"\nreport: {report}")
    return 0
