"""``python -m benchmarks list | run NAME [--quick] [args...] | run --all --quick | headers``.

Run from the repository's root (the commands are relative to it).  ``run NAME`` runs the command
that wrote NAME's committed results file (minutes to an hour: on a quiet machine), passing any
further arguments through; ``--quick`` runs its small command instead, which writes nothing
into benchmarks/results nor benchmarks/investigations/results (checked); ``run --all --quick``
runs every suite entry's quick command, skipping those whose peers or reference code are
missing, and exits non-zero if one fails.  ``list`` shows the suite (the anchored comparisons)
and the investigations (one-off studies, benchmarks/investigations/) as two tables; ``run NAME``
takes either.  ``headers`` compares each results file's header with its entry's command.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .registry import PLACEHOLDERS, REGISTRY, RESULTS_DIRS, ROOT, Benchmark, missing, resolve


def _table(rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


#: the kinds as ``list`` shows them: (kind, title)
SECTIONS = (
    ("suite", "The suite: anchored comparisons, scripts in benchmarks/, results in "
              "benchmarks/results/ (python -m benchmarks run --all --quick)"),
    ("investigation", "Investigations: one-off studies whose answers are recorded in "
                      "docs/design_notes.md; scripts in benchmarks/investigations/, results in "
                      "benchmarks/investigations/results/"),
)  # fmt: skip


def cmd_list(verbose: bool) -> int:
    if verbose:
        for b in REGISTRY.values():
            print(_describe(b) + "\n")
        return 0
    for i, (kind, title) in enumerate(SECTIONS):
        rows = [["name", "anchor", "results", "measures"]]
        for b in REGISTRY.values():
            if b.kind != kind:
                continue
            results = ", ".join([*b.results, *(f"{u} (never committed)" for u in b.uncommitted)])
            rows.append([b.name, b.anchor, results or "(printed)", b.measures])
        print(("\n" if i else "") + f"{title}:\n\n{_table(rows)}")
    print("\ncommands: python -m benchmarks list -v, show NAME, run NAME [--quick]")
    return 0


def _describe(b: Benchmark) -> str:
    lines = [
        f"{b.name} ({b.kind})",
        f"  measures: {b.measures}",
        f"  anchor:   {b.anchor}",
        f"  results:  {', '.join(_shown_path(b, r) for r in b.results) or 'printed only'}",
        f"  full:     {b.shown()}" + (f"; then cp {b.copy_from} <results>" if b.copy_from else ""),
        "  quick:    "
        + (b.shown(b.quick) if b.quick is not None else f"none ({b.quick_note})"),
    ]
    if b.needs:
        needs = [PLACEHOLDERS[n][2] if n in PLACEHOLDERS else n for n in b.needs]
        lines.append(f"  needs:    {', '.join(needs)}")
    if b.header_note:
        lines.append(f"  header:   {b.header_note}")
    return "\n".join(lines)


def _shown_path(b: Benchmark, name: str) -> str:
    return (b.results_dir / name).relative_to(ROOT).as_posix()


def _snapshot() -> dict[str, tuple[int, int]]:
    return {
        p.relative_to(ROOT).as_posix(): (p.stat().st_mtime_ns, p.stat().st_size)
        for directory in RESULTS_DIRS.values()
        for p in directory.iterdir()
    }


def _run_one(b: Benchmark, quick: bool, extra: list[str]) -> tuple[str, float, str]:
    """(status, seconds, reason): status 'passed', 'failed' or 'skipped'."""
    args = b.quick if quick else b.full
    if args is None:
        return "skipped", 0.0, f"no quick command: {b.quick_note}"
    reason = missing(b, args, extra)
    if reason is not None:
        return "skipped", 0.0, reason
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    with tempfile.TemporaryDirectory(prefix=f"bench-{b.name}-") as tmp:
        argv = [sys.executable, *b.argv(tuple(resolve(args, extra, tmp if quick else None)))]
        argv += extra
        print(f"\n=== {b.name}: {' '.join(argv[1:])}", flush=True)
        before = _snapshot() if quick else None
        start = time.perf_counter()
        code = subprocess.run(argv, cwd=ROOT, env=env).returncode
        seconds = time.perf_counter() - start
    if code != 0:
        return "failed", seconds, f"exit status {code}"
    if before is not None and (after := _snapshot()) != before:
        changed = sorted(set(after.items()) ^ set(before.items()))
        names = sorted({name for name, _ in changed})
        return "failed", seconds, f"a quick run wrote into the results directories: {names}"
    if b.copy_from and not quick:
        target = b.results_dir / b.results[0]
        shutil.copyfile(b.copy_from, target)
        print(f"copied {b.copy_from} to {target}")
    return "passed", seconds, ""


def cmd_run(names: list[str], quick: bool, run_all: bool, extra: list[str]) -> int:
    if run_all:
        if not quick:
            print("run --all runs the quick commands only: add --quick", file=sys.stderr)
            return 2
        if names or extra:
            print("run --all --quick takes no names nor arguments", file=sys.stderr)
            return 2
        names = [b.name for b in REGISTRY.values() if b.kind == "suite"]
    elif len(names) != 1:
        print("run: give one NAME (or --all --quick)", file=sys.stderr)
        return 2
    unknown = [n for n in names if n not in REGISTRY]
    if unknown:
        print(f"unknown benchmark {unknown[0]!r}; see python -m benchmarks list", file=sys.stderr)
        return 2
    summary = []
    for name in names:
        status, seconds, reason = _run_one(REGISTRY[name], quick, extra)
        if status == "skipped":
            print(f"\n=== {name}: skipped: {reason}", flush=True)
        summary.append((name, status, seconds, reason))
    if not run_all:
        name, status, _, reason = summary[0]
        if status == "skipped":
            return 2
        if status == "failed":
            print(f"{name}: failed: {reason}", file=sys.stderr)
        return 0 if status == "passed" else 1
    print("\n" + _table([["benchmark", "result", "seconds", "note"]] + [
        [n, s, f"{t:.0f}" if s != "skipped" else "", r] for n, s, t, r in summary
    ]))  # fmt: skip
    statuses = [status for _, status, _, _ in summary]
    counts = {s: statuses.count(s) for s in ("passed", "failed", "skipped")}
    print(f"\n{counts['passed']} passed, {counts['failed']} failed, {counts['skipped']} skipped; "
          f"{sum(t for _, _, t, _ in summary):.0f} s")  # fmt: skip
    return 1 if counts["failed"] else 0


#: a command in a results file's header: `python benchmarks/...`, `benchmarks/...` (also
#: `benchmarks/investigations/...`), `bayesldp run`
HEADER_COMMAND = re.compile(
    r"`((?:python )?benchmarks/(?:investigations/)?[a-z_]+\.py[^`]*|bayesldp run [^`]*)`"
)


def header_command(path: Path) -> str | None:
    """The command named in the first 40 lines of a results file, as written there."""
    if path.suffix != ".md":
        return None
    head = "\n".join(path.read_text(encoding="utf-8").splitlines()[:40])
    match = HEADER_COMMAND.search(head)
    return match.group(1) if match else None


def header_commit(path: Path) -> str | None:
    head = "\n".join(path.read_text(encoding="utf-8").splitlines()[:40])
    match = re.search(r"commit:? ([0-9a-f]{7,40})\b", head)
    return match.group(1) if match else None


def cmd_headers() -> int:
    rows = [["results file", "entry", "header names the full command", "commit"]]
    for b in REGISTRY.values():
        for name in b.results:
            path = b.results_dir / name
            if not path.exists():
                rows.append([_shown_path(b, name), b.name, "MISSING FILE", ""])
                continue
            if path.suffix != ".md":
                rows.append([_shown_path(b, name), b.name, "(data, beside the .md)", ""])
                continue
            found = header_command(path)
            if found is None:
                verdict = "no command in the header"
            elif found == b.shown():
                verdict = "yes"
            elif found == b.shown_before_the_move():
                verdict = "yes (at the script's path before benchmarks/investigations/)"
            else:
                verdict = f"differs: `{found}`"
            rows.append([_shown_path(b, name), b.name, verdict, header_commit(path) or "none"])
    print(_table(rows))
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0
    command, rest = argv[0], argv[1:]
    if command == "list":
        return cmd_list(verbose=bool(rest) and rest[0] in ("-v", "--verbose"))
    if command == "show":
        if len(rest) != 1 or rest[0] not in REGISTRY:
            print("show: give one NAME of python -m benchmarks list", file=sys.stderr)
            return 2
        print(_describe(REGISTRY[rest[0]]))
        return 0
    if command == "headers":
        return cmd_headers()
    if command == "run":
        # run NAME [--quick] [args passed through...] | run --all --quick
        quick = "--quick" in rest[:2]
        run_all = "--all" in rest[:2]
        rest = [a for i, a in enumerate(rest) if not (i < 2 and a in ("--quick", "--all"))]
        names, extra = (rest[:1], rest[1:]) if rest and not run_all else ([], rest)
        return cmd_run(names, quick, run_all, extra)
    print(f"unknown command {command!r}\n\n{__doc__}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
