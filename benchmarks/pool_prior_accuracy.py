"""The default prior's targets over the whole n grid, from the committed per-n tables of
prior_accuracy.py.

``prior_accuracy.py`` runs OUE and OLH one n at a time (their fits at n = 1e4 take minutes);
the issue's targets are stated over every cell of a mechanism and, for coverage, pooled over a
population family's cells.  This script reads the committed markdown tables (no fitting) and
writes, per mechanism and prior: cells at most 1.0x and 1.1x the best frequentist estimator and
the largest ratio (summed and maxed over the tables' summary rows), and the 90% coverage per
family pooled over the tables (each table's family coverage weighted by its number of cells:
every table has the same populations and epsilons, one repeat per cell for OUE and OLH); then
the same counts for each frequentist estimator against the best of the other three (where
every table of a mechanism has that section), and for the best of the posteriors per cell (an
oracle's choice among the priors the tables ran; on GRR also between the logistic-normal and
the adaptive prior of ``prior_family_grid.md``, one repeat per cell).

Usage::

    python benchmarks/pool_prior_accuracy.py   # writes results/prior_accuracy_pooled.md
"""

from __future__ import annotations

import argparse
from pathlib import Path

RESULTS = Path(__file__).parent / "results"
TABLES = {
    "GRR": ["prior_accuracy.md"],
    "OUE": ["prior_accuracy_oue.md", "prior_accuracy_oue_1e4.md", "prior_accuracy_oue_1e5.md"],
    "OLH": ["prior_accuracy_olh.md", "prior_accuracy_olh_1e4.md", "prior_accuracy_olh_1e5.md"],
}
OUT = RESULTS / "prior_accuracy_pooled.md"
#: investigations/prior_family_fit.py --grid: the logistic-normal prior and the adaptive one on
#: every GRR cell (its table is beside that investigation, relative to RESULTS here)
FAMILY_GRID = (
    "../investigations/results/prior_family_grid.md",
    "## MSE over the best frequentist estimator, per cell",
)


CELLS = "## MSE of each posterior mean over the best frequentist estimator, per cell"
PRIORS = "## Summary per prior"
SCALE = "## Each frequentist estimator against the best of the other three"


def table_after(path: Path, heading: str) -> list[list[str]] | None:
    """The rows (header first, the separator dropped) of the markdown table after ``heading``
    in one results file; None if the file has no such heading."""
    lines = path.read_text().splitlines()
    if heading not in lines:
        return None
    start = lines.index(heading)
    first = next(i for i in range(start, len(lines)) if lines[i].startswith("|"))
    end = next((i for i in range(first, len(lines)) if not lines[i].startswith("|")), len(lines))
    table = [[c.strip() for c in x.strip().strip("|").split("|")] for x in lines[first:end]]
    return [table[0], *table[2:]]


def best_posterior(mechanism: str, files: list[str], heading: str = CELLS,
                   columns: slice = slice(4, None)) -> str:  # fmt: skip
    """Per cell, the smallest ratio among the posteriors its table ran (``columns`` of the
    table after ``heading``; an oracle's choice of prior, cell by cell, with the truth known: a
    bound on what choosing among these priors could reach, not an estimator): cells at most
    1.0x and 1.1x and the largest."""
    ratios, priors = [], set()
    for name in files:
        names, *rows = table_after(RESULTS / name, heading)
        priors.update(names[columns])
        ratios += [min(float(v) for v in row[columns]) for row in rows]
    cells = len(ratios)
    at1, at11 = sum(r <= 1.0 for r in ratios), sum(r <= 1.1 for r in ratios)
    shares = f"{at1 / cells:.1%} ({at1}/{cells}) | {at11 / cells:.1%} ({at11}/{cells})"
    return f"| {mechanism} | {', '.join(sorted(priors))} | {cells} | {shares} | {max(ratios):.2f} |"


def summary(path: Path, heading: str) -> dict[str, dict[str, float]] | None:
    """Per row (a prior, or a frequentist estimator under ``SCALE``) of the table after
    ``heading`` in one results file: cells at most 1.0x and 1.1x (counts), cells, largest ratio
    and any coverage columns (``"coverage <family>"``); None if the file has no such table."""
    table = table_after(path, heading)
    if table is None:
        return None
    names, out = table[0], {}
    for row in table[1:]:
        values = dict(zip(names, row, strict=True))
        at1, cells = values["cells <= 1.0x"].split("(")[1].rstrip(")").split("/")
        out[row[0]] = {
            "cells": int(cells),
            "at1": int(at1),
            "at11": round(float(values["cells <= 1.1x"].rstrip("%")) * int(cells) / 100),
            "largest": float(values["largest ratio"]),
            **{k: float(v) for k, v in values.items() if k.startswith("coverage ")},
        }
    return out


def pooled(mechanism: str, files: list[str], heading: str, families: list[str]) -> list[str]:
    """One row per prior (or estimator) present in every file's table under ``heading``."""
    tables = [summary(RESULTS / name, heading) for name in files]
    if any(t is None for t in tables):
        return []  # a table written before the script had this section
    lines = []
    for p in tables[0]:
        if not all(p in t for t in tables):
            continue  # a prior not run at every n
        rows = [t[p] for t in tables]
        cells = sum(r["cells"] for r in rows)
        at1, at11 = sum(r["at1"] for r in rows), sum(r["at11"] for r in rows)
        covs = "".join(f" {sum(r[f] * r['cells'] for r in rows) / cells:.3f} |" for f in families)
        lines.append(f"| {mechanism} | {p} | {cells} | {at1 / cells:.1%} ({at1}/{cells}) | "
                     f"{at11 / cells:.1%} ({at11}/{cells}) | "
                     f"{max(r['largest'] for r in rows):.2f} |{covs}")  # fmt: skip
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    first = summary(RESULTS / TABLES["GRR"][0], PRIORS)["adaptive"]
    families = [k for k in first if k.startswith("coverage ")]
    out = ["# The default prior's targets over the whole n grid (pooled from the per-n tables)", "",
           "- Command: `python benchmarks/pool_prior_accuracy.py` (reads the committed tables, "
           "fits nothing)",
           "- Tables: " + "; ".join(f"{m}: " + ", ".join(f"`{f}`" for f in fs)
                                    for m, fs in TABLES.items()),
           "- Targets: at most 1.0x the best frequentist estimator in 90% of cells and never "
           "above 1.1x; 90% coverage between 0.85 and 0.95 in every family (pooled)", "",
           "## The posteriors against the best frequentist estimator", "",
           "| mechanism | prior | cells | cells <= 1.0x | cells <= 1.1x | largest ratio | "
           + " | ".join(families) + " |",
           "|---|---|---:|---:|---:|---:|" + "---:|" * len(families)]  # fmt: skip
    for mechanism, files in TABLES.items():
        out += pooled(mechanism, files, PRIORS, families)
    out += ["", SCALE, "",
            "| mechanism | estimator | cells | cells <= 1.0x | cells <= 1.1x | largest ratio |",
            "|---|---|---:|---:|---:|---:|"]  # fmt: skip
    for mechanism, files in TABLES.items():
        out += pooled(mechanism, files, SCALE, [])
    out += ["", "## The best of the posteriors in each cell (an oracle's choice of prior)", "",
            "The smallest ratio among the priors a cell's table ran, chosen with the truth "
            "known: what picking among these priors cell by cell could reach at most; not an "
            "estimator.", "",
            "| mechanism | priors | cells | cells <= 1.0x | cells <= 1.1x | largest ratio |",
            "|---|---|---:|---:|---:|---:|"]  # fmt: skip
    out += [best_posterior(mechanism, files) for mechanism, files in TABLES.items()]
    out.append(best_posterior("GRR (one repeat; `prior_family_grid.md`)", [FAMILY_GRID[0]],
                              FAMILY_GRID[1], slice(3, 5)))  # fmt: skip
    args.out.write_text("\n".join(out) + "\n")
    print("\n".join(out))


if __name__ == "__main__":
    main()
