"""``bayesldp run SPEC``: load a spec of any kind and hand it to its runner (study, survey, grid,
accuracy, rounds, attributes, heavy_hitters); each writes its report into the output directory,
all of its files or none."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from bayesldp.errors import InvalidInputError
from bayesldp.workflows.outputs import (
    directory_lock,
    recover_staging,
    staged_outputs,
    writable_directory,
)


def _progress(quiet: bool):
    start = time.perf_counter()

    def say(message: str) -> None:
        if not quiet:
            print(f"[{time.perf_counter() - start:7.1f}s] {message}", file=sys.stderr, flush=True)

    return say


def cmd_run(args: argparse.Namespace) -> int:
    """``bayesldp run SPEC``: run a spec of any kind (study, survey, grid, accuracy, rounds,
    attributes, heavy_hitters)."""
    from bayesldp.workflows.spec import load_spec

    spec = load_spec(args.spec)
    if args.full and spec["kind"] not in ("grid", "accuracy"):
        raise InvalidInputError(f"--full: applies to grid and accuracy specs, not {spec['kind']!r}")
    name = spec[NAME_TABLE[spec["kind"]]]["name"]
    out = writable_directory(args.out or Path("out") / name)  # checked before any work
    with directory_lock(out):
        recover_staging(out)  # a killed run's results: finished moving, or removed
        return RUNNERS[spec["kind"]](spec, args, out)


def _run_study(spec: dict, args: argparse.Namespace, out: Path) -> int:
    from bayesldp.workflows.study import run_study
    from bayesldp.workflows.study_report import summary_text, write_report

    say = _progress(args.quiet)
    say(f"study {spec['study']['name']!r} from {args.spec}")
    result = run_study(spec, seed=args.seed, quick=args.quick, progress=say)
    with staged_outputs(out) as stage:  # every file of the report, or none
        report = out / write_report(result, stage, figures=not args.no_figures).name
    print(summary_text(result))
    print(f"\nreport: {report}")
    return 0


def _run_survey(spec: dict, args: argparse.Namespace, out: Path) -> int:
    from bayesldp.workflows.survey import run_survey

    cfg = spec["survey"]
    if args.seed is not None:
        cfg["seed"] = args.seed
    if args.quick:
        cfg["n"] = max(1, cfg["n"] // 10)
    return run_survey(spec, out, resume=False, quiet=args.quiet)


def _run_grid(spec: dict, args: argparse.Namespace, out: Path) -> int:
    from bayesldp.workflows.grid import run_grid, write_tables

    grid = spec["grid"]
    if args.seed is not None:
        grid["seed"] = args.seed
    if args.quick:
        grid["n"], grid["repeats"] = max(1, grid["n"] // 10), 1
    command = "bayesldp run " + " ".join(sys.argv[2:] if args.argv is None else args.argv[1:])
    results = run_grid(spec, out, paper=args.full, progress=not args.quiet, command=command)
    print(write_tables(results))
    print(f"\nreport: {out / 'tables.md'}")
    return 0


def _run_accuracy(spec: dict, args: argparse.Namespace, out: Path) -> int:
    from bayesldp.workflows import accuracy

    if args.seed is not None:
        spec["study"]["seed"] = args.seed
    say = _progress(args.quiet)
    info = accuracy.machine_info()
    start = time.perf_counter()
    result = accuracy.run_study(
        spec, full=args.full, repeats=2 if args.quick else None, progress=say
    )
    command = "bayesldp run " + " ".join(sys.argv[2:] if args.argv is None else args.argv[1:])
    text = accuracy.render_markdown(result, info, command, time.perf_counter() - start)
    with staged_outputs(out) as stage:
        (stage / "report.md").write_text(text, encoding="utf-8")
    print(f"report: {out / 'report.md'}")
    return 0


def _run_grouped(spec: dict, args: argparse.Namespace, out: Path) -> int:
    """A rounds or attributes spec: report.md, metrics.csv, estimates.csv."""
    from bayesldp.workflows.grouped_study import run_grouped, summary_table, write_report

    say = _progress(args.quiet)
    say(f"{spec['kind']} spec {spec['study']['name']!r} from {args.spec}")
    result = run_grouped(spec, seed=args.seed, quick=args.quick, progress=say)
    with staged_outputs(out) as stage:
        report = out / write_report(result, stage).name
    print(summary_table(result))
    print(f"\nreport: {report}")
    return 0


def _run_heavy_hitters(spec: dict, args: argparse.Namespace, out: Path) -> int:
    from bayesldp.workflows.heavy_hitter_study import run_command

    return run_command(spec, args, out, _progress(args.quiet))


#: spec kind -> the table holding its ``name`` (the default output directory out/<name>)
_STUDY_NAMED = ("study", "accuracy", "rounds", "attributes", "heavy_hitters")
NAME_TABLE = dict.fromkeys(_STUDY_NAMED, "study") | {
    "survey": "survey",
    "grid": "grid",
}
#: spec kind -> runner of ``bayesldp run``
RUNNERS = {"study": _run_study, "survey": _run_survey, "grid": _run_grid, "accuracy": _run_accuracy,
           "rounds": _run_grouped, "attributes": _run_grouped,
           "heavy_hitters": _run_heavy_hitters}  # fmt: skip
