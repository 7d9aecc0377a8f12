"""The notebooks at their full settings: seconds and output volume per notebook.

Each notebook of ``notebooks/`` runs top to bottom in a fresh kernel (this interpreter, through
``nbclient``: the runner of ``notebooks/execute.py``, which stores the notebooks' outputs;
``MPLBACKEND=Agg``; ``BAYESLDP_NB_SMALL`` unset, so at the settings a reader gets; nothing is
written back), and the table gives its wall time, the bytes it wrote to standard error and to
standard output (stream outputs: progress bars and warnings land on stderr), the number of warnings
(stderr lines naming a ``...Warning``) and the lines that mention divergences, so that
``notebooks/README.md``'s promise ("from under a minute to a few minutes per notebook on two
cores") and each notebook's own text can be checked against a run.

Usage::

    python benchmarks/notebooks.py [--only 05] [--small] [--out benchmarks/results/notebooks.md]
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from notebooks.execute import NOTEBOOKS, execute, write_kernel_spec  # noqa: E402


def run_one(path: Path, kernels: Path, small: bool) -> dict:
    """Execute one notebook; its time and the volume of its stream outputs."""
    nb, seconds, error = execute(path, kernels, small=small, figures=False)
    out = {"stdout": "", "stderr": ""}
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            if output.get("output_type") == "stream":
                out[output["name"]] += output["text"]
    warnings = sum(bool(re.search(r"\w+Warning\b", line)) for line in out["stderr"].splitlines())
    divergence_lines = [line.strip() for text in out.values() for line in text.splitlines()
                        if "diverg" in line.lower()]  # fmt: skip
    return {"notebook": path.name, "seconds": seconds, "stderr": len(out["stderr"].encode()),
            "stdout": len(out["stdout"].encode()), "warnings": warnings,
            "divergences": divergence_lines, "error": error[:90]}  # fmt: skip


def table(rows: list[dict], small: bool, wall: float, load: str) -> str:
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, text=True,
                            capture_output=True).stdout.strip()  # fmt: skip
    args = " ".join(sys.argv[1:])
    lines = [
        "# The notebooks at their " + ("small" if small else "full") + " settings",
        "",
        f"- Command: `python benchmarks/notebooks.py{(' ' + args) if args else ''}`",
        f"- Date: {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC; commit {commit}; "
        f"{wall:.0f} s; load average at the start {load}",
        f"- Machine: {platform.machine()}, {os.cpu_count()} cores; Python "
        f"{platform.python_version()}",
        "- One fresh kernel per notebook (nbclient), MPLBACKEND=Agg; bytes of the stream "
        "outputs; warnings: stderr lines naming a Warning class",
        "",
        "| notebook | seconds | stderr bytes | stdout bytes | warnings | error |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for row in rows:
        lines.append(f"| {row['notebook']} | {row['seconds']:.0f} | {row['stderr']:,} | "
                     f"{row['stdout']:,} | {row['warnings']} | {row['error']} |")  # fmt: skip
    lines += ["", "Lines of the outputs that mention divergences:", ""]
    for row in rows:
        for line in row["divergences"][:10]:
            lines.append(f"- {row['notebook']}: `{line[:160]}`")
    if not any(row["divergences"] for row in rows):
        lines.append("- none")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", help="comma-separated prefixes of notebook names (e.g. 01,05)")
    parser.add_argument("--small", action="store_true", help="BAYESLDP_NB_SMALL=1 (smoke run)")
    parser.add_argument("--out", type=Path, help="write the table here (default: print only)")
    args = parser.parse_args()
    chosen = NOTEBOOKS
    if args.only:
        prefixes = tuple(args.only.split(","))
        chosen = [path for path in NOTEBOOKS if path.name.startswith(prefixes)]
    load = f"{os.getloadavg()[0]:.2f}"
    started = time.perf_counter()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        kernels = write_kernel_spec(Path(tmp))
        for path in chosen:
            row = run_one(path, kernels, args.small)
            print(f"{row['notebook']}: {row['seconds']:.0f} s, stderr {row['stderr']:,} B, "
                  f"{row['warnings']} warnings {row['error']}", flush=True)  # fmt: skip
            rows.append(row)
    text = table(rows, args.small, time.perf_counter() - started, load)
    print(text)
    if args.out:
        args.out.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
