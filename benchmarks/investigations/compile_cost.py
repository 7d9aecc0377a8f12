"""What the main job's first run compiles, and what one mechanism alone compiles.

The main job (``bayesldp run models/quickstart.toml``) compiles numba kernels on its first run
(``benchmarks/results/first_run.md``).  This measures where that time goes: each case runs
the quickstart study in a fresh process with ``NUMBA_CACHE_DIR`` pointing at a new, empty
directory, listening to numba's ``numba:compile`` events, and reports the seconds spent in each
top-level compilation (a function called from Python; what it inlines or calls is compiled
inside it) and how many specialisations of it were compiled.  The cases: the whole study (five
mechanisms), then each mechanism alone (the study's spec with one ``[[mechanisms]]`` table):
what a study of one mechanism costs is the floor of the whole under the package's design, in
which each row form of the likelihood (one-hot, sparse, packed, band; ``bayesldp.likelihood``)
gets its own specialisation of the samplers and of EM.  The last case is a prototype, not the
package: every tally of at most ``DENSE_MAX`` entries read in dense rows (``(C, C^T)``, no band
rows), so that the five mechanisms share one specialisation; it measures what compiling one
row form would cost (its sums run in another order, so its draws are not the package's).  The
very last compiles the package at LLVM's optimisation level 1 (``NUMBA_OPT=1``, numba's default
is 3): what a lighter optimisation saves (its run time is the wall time less the compiling).

Usage::

    python benchmarks/investigations/compile_cost.py [--out FILE] [--only whole,GRR]
"""

from __future__ import annotations

import argparse
import ast
import datetime
import os
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
from throughput import machine_info  # noqa: E402

SPEC = ROOT / "models" / "quickstart.toml"

#: the largest tally (rows x categories) the dense prototype puts in dense rows
DENSE_MAX = 1 << 16

#: run in the child: the study under a listener of numba's compilations; prints one
#: ``(name, signature, seconds, depth)`` tuple per compilation, then ``wall <seconds>``
_CHILD = r"""
import sys, time
DENSE_MAX = {dense_max}
from numba.core import event
stack, records = [], []
class Listener(event.Listener):
    def on_start(self, ev):
        stack.append(time.perf_counter())
    def on_end(self, ev):
        started = stack.pop()
        func = getattr(ev.data.get("dispatcher"), "py_func", None)
        name = f"{func.__module__}.{func.__qualname__}" if func else "?"
        records.append((name, str(ev.data.get("args")), time.perf_counter() - started, len(stack)))
event.register("numba:compile", Listener())
if sys.argv[3] == "dense":  # a prototype, not the package: every small tally in dense rows
    import numpy as np
    import bayesldp.likelihood as lk
    from bayesldp.tally import Tally
    original, band = lk.Likelihood.__init__, lk.band_form
    def dense_init(self, tally):
        if tally.n_rows * tally.k <= DENSE_MAX:
            tally = Tally(tally.counts, rows=tally.rows, stat=tally.stat, family=tally.family,
                          mechanism=tally.mechanism)
        original(self, tally)
    lk.Likelihood.__init__ = dense_init
    lk.band_form = lambda rows, ordered, tol: (False, None)
start = time.perf_counter()
from bayesldp.workflows.cli import main
code = main(["run", sys.argv[1], "--out", sys.argv[2], "--quiet", "--no-figures"])
wall = time.perf_counter() - start
for record in records:
    print(repr(record))
print("wall", wall, code)
""".replace("{dense_max}", str(DENSE_MAX))


def spec_with(mechanisms: list[dict] | None) -> str:
    """The quickstart spec as TOML, with only ``mechanisms`` (None: all five)."""
    text = SPEC.read_text()
    if mechanisms is None:
        return text
    head = text.split("[[mechanisms]]")[0]
    tables = []
    for mech in mechanisms:
        body = "\n".join(f"{k} = {_toml(v)}" for k, v in mech.items())
        tables.append(f"[[mechanisms]]\n{body}\n")
    return head + "\n".join(tables)


def _toml(value) -> str:
    return f'"{value}"' if isinstance(value, str) else repr(value)


def one_case(spec_text: str, form: str = "package") -> dict:
    """Run the study once in a fresh process with an empty numba cache; ``form="dense"``: the
    prototype that puts every small tally in dense rows (one row form for every mechanism);
    ``form="opt1"``: the package compiled at LLVM's optimisation level 1 (``NUMBA_OPT=1``)."""
    with tempfile.TemporaryDirectory() as tmp:
        spec = Path(tmp) / "study.toml"
        spec.write_text(spec_text)
        env = {**os.environ, "NUMBA_CACHE_DIR": str(Path(tmp) / "cache")}
        if form == "opt1":  # LLVM's optimisation level 1 instead of numba's default 3
            env["NUMBA_OPT"] = "1"
        load = os.getloadavg()[0]
        done = subprocess.run([sys.executable, "-c", _CHILD, str(spec), str(Path(tmp) / "out"),
                               form],
                              env=env, capture_output=True, text=True, check=True)  # fmt: skip
    records, wall = [], None
    for line in done.stdout.splitlines():
        if line.startswith("("):
            records.append(ast.literal_eval(line))
        elif line.startswith("wall "):
            wall = float(line.split()[1])
    top: dict[str, list] = {}
    for name, _, seconds, depth in records:
        if depth == 0:
            entry = top.setdefault(name, [0, 0.0])
            entry[0] += 1
            entry[1] += seconds
    return {"load": load, "wall": wall, "functions": len(records), "top": top,
            "compile": sum(s for _, s in top.values())}  # fmt: skip


def table(name: str, result: dict, rows: int = 8) -> list[str]:
    lines = [f"### {name}: {result['compile']:.1f} s compiling of {result['wall']:.1f} s wall, "
             f"{result['functions']} functions (load {result['load']:.2f} at start)", "",
             "| compiled from Python | specialisations | seconds |", "|---|---:|---:|"]  # fmt: skip
    ranked = sorted(result["top"].items(), key=lambda item: -item[1][1])
    for func, (count, seconds) in ranked[:rows]:
        lines.append(f"| `{func}` | {count} | {seconds:.1f} |")
    rest = ranked[rows:]
    if rest:
        lines.append(f"| {len(rest)} others | {sum(c for _, (c, _) in rest)} | "
                     f"{sum(s for _, (_, s) in rest):.1f} |")  # fmt: skip
    return [*lines, ""]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="write the markdown table here")
    parser.add_argument("--only", help="comma-separated cases: whole and mechanism names")
    args = parser.parse_args(argv)
    mechanisms = tomllib.loads(SPEC.read_text())["mechanisms"]
    cases = {"whole": (None, "package"), **{m["name"]: ([m], "package") for m in mechanisms},
             "whole, dense prototype": (None, "dense"),
             "whole, NUMBA_OPT=1": (None, "opt1")}  # fmt: skip
    if args.only:
        cases = {k: v for k, v in cases.items() if k in args.only.split(",")}
    results = {}
    for name, (mechs, form) in cases.items():
        results[name] = one_case(spec_with(mechs), form)
        print(f"{name}: {results[name]['compile']:.1f} s compiling", file=sys.stderr)
    command = "python benchmarks/investigations/compile_cost.py" + (
        f" --out {args.out.as_posix()}" if args.out else "")
    info = machine_info()
    lines = ["# What the main job's first run compiles", "",
             f"- Command: `{command}`",
             f"- Machine: {info['machine']}, {info['cpu']}, {info['cores']} cores; Python "
             f"{info['python']}, numba {info['numba']}; load {info['load']} at the end; "
             f"{datetime.date.today().isoformat()}",
             "- Each case: the quickstart study (`models/quickstart.toml`; the case's mechanisms "
             "only) in a fresh process with an empty numba cache; seconds inside each compilation "
             "started from Python (what it compiles within is counted in it)", ""]  # fmt: skip
    lines.append("| case | compiling s | wall s | functions compiled | load at start |")
    lines.append("|---|---:|---:|---:|---:|")
    for name, r in results.items():
        lines.append(f"| {name} | {r['compile']:.1f} | {r['wall']:.1f} | {r['functions']} | "
                     f"{r['load']:.2f} |")  # fmt: skip
    lines.append("")
    for name, r in results.items():
        lines += table(name, r)
    text = "\n".join(lines)
    if args.out:
        args.out.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
