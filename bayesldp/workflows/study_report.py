"""Writing a study's outputs: report.md, CSV tables, posteriors as netCDF and PNG figures."""

from __future__ import annotations

import csv
import math
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from bayesldp.workflows.study import StudyResult


def _write_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    if not rows:
        return
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        for row in rows:
            writer.writerow(
                {k: "" if isinstance(v, float) and math.isnan(v) else v for k, v in row.items()}
            )


def summarise(metrics: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Mean and standard deviation across repeats of each metric per (mechanism, eps, method)."""
    groups: dict[tuple, list[dict[str, Any]]] = defaultdict(list)
    for row in metrics:
        groups[(row["mechanism"], row["epsilon"], row["method"])].append(row)
    table = []
    for (mech, eps, method), rows in groups.items():
        entry = {"mechanism": mech, "epsilon": eps, "method": method, "repeats": len(rows)}
        for key in ("tv", "mse", "seconds"):
            values = np.array([r[key] for r in rows])
            entry[key] = float(values.mean())
            entry[f"{key}_sd"] = float(values.std(ddof=1)) if len(values) > 1 else 0.0
        table.append(entry)
    return table


def markdown_table(summary: list[dict[str, Any]]) -> str:
    """The summary as a markdown table (TV and MSE as mean ± sd over repeats)."""
    lines = [
        "| mechanism | epsilon | method | TV | MSE | seconds | repeats |",
        "|---|---:|---|---:|---:|---:|---:|",
    ]
    for e in summary:
        lines.append(
            f"| {e['mechanism']} | {e['epsilon']:g} | {e['method']} | "
            f"{e['tv']:.4f} ± {e['tv_sd']:.4f} | {e['mse']:.2e} ± {e['mse_sd']:.1e} | "
            f"{e['seconds']:.3f} | {e['repeats']} |"
        )
    return "\n".join(lines)


def write_report(result: StudyResult, out_dir: str | Path, *, figures: bool = True) -> Path:
    """Write ``report.md``, ``metrics.csv``, ``estimates.csv``, posteriors and figures."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    _write_csv(out / "metrics.csv", result.metrics)
    _write_csv(out / "estimates.csv", result.estimates)
    summary = summarise(result.metrics)
    study = result.spec["study"]
    lines = [
        f"# Study: {study['name']}",
        "",
        study.get("description") or "",
        "",
        f"Users per repeat: {study['n']:,}; repeats: {len(result.truths)}; "
        f"categories: {result.spec['population']['k']}; population: "
        f"{result.spec['population']['kind']}; seed: {study['seed']}.",
        "",
        "## Error per method (mean ± sd over repeats)",
        "",
        "TV = 1/2 ||estimate - truth||_1 against the empirical frequencies of the simulated users;",
        "MSE is the mean over categories of the squared error; seconds is the time of the method",
        "alone (the tally is built once per mechanism and shared).",
        "",
        markdown_table(summary),
        "",
    ]
    posterior_files = []
    for label, idata in result.fits.items():
        from bayesldp.bayes import save_fit

        name = "posterior_" + "".join(c if c.isalnum() else "_" for c in label).strip("_") + ".nc"
        save_fit(idata, out / name)
        posterior_files.append(name)
    if posterior_files:
        lines += ["## Posteriors (first repeat)", ""] + [f"- `{f}`" for f in posterior_files] + [""]
    if figures:
        from bayesldp import plotting

        names = plotting.study_figures(result, summary, out)
        lines += ["## Figures", ""] + [f"![{n}]({n})" for n in names] + [""]
    (out / "report.md").write_text("\n".join(lines), encoding="utf-8")
    return out / "report.md"
