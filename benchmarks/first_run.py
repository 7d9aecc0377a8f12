"""The main job's first run and second run: whole-process time, compilation, and how it talks.

The README's main job is ``bayesldp run models/quickstart.toml``.  Its first run after an
install compiles numba kernels (the sampler's, the tallies', the likelihoods'); numba keeps
them in its disk cache, so the second run loads them.  Each run here is a fresh process of the
installed command, timed from outside:

* first: ``NUMBA_CACHE_DIR`` points at a new, empty directory (a fresh install's state);
* second: the same directory again, filled by the first run.

Reported per run: whole-process wall seconds and CPU seconds (user + sys of the child), the
seconds the command's compile watch counted as compiling and the functions it compiled (from
its last progress line, ``bayesldp: compiling... N functions compiled so far (T s)``), the
longest stretch with no line on standard error or standard output (the command should say
something at least every 5 s), and whether the compile watch's counters ever went down (they
must only grow).  The machine's load average at the start of each run is in the table, since
compilation is CPU-bound and the machine may be shared.

Usage::

    python benchmarks/first_run.py [--repeats 1] [--out benchmarks/results/first_run.md]
"""

from __future__ import annotations

import argparse
import datetime
import itertools
import os
import re
import resource
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from throughput import machine_info

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "models" / "quickstart.toml"
WATCH_LINE = re.compile(r"bayesldp: compiling\.\.\. (\d+) functions compiled so far \((\d+) s\)")


def _command() -> list[str]:
    exe = shutil.which("bayesldp", path=str(Path(sys.executable).parent))
    return [exe] if exe else [sys.executable, "-m", "bayesldp"]


def one_run(cache: Path, out: Path) -> dict:
    """Run the main job once with numba's cache in ``cache``; time it and read its lines."""
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache)}
    load = os.getloadavg()[0]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.Popen([*_command(), "run", str(SPEC), "--out", str(out)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    stamps: list[float] = []
    lines: list[str] = []
    lock = threading.Lock()

    def read(stream) -> None:
        for line in stream:
            with lock:
                stamps.append(time.perf_counter() - start)
                lines.append(line.rstrip("\n"))

    readers = [threading.Thread(target=read, args=(s,)) for s in (proc.stdout, proc.stderr)]
    for r in readers:
        r.start()
    code = proc.wait()
    for r in readers:
        r.join()
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if code != 0:
        raise SystemExit(f"the main job failed (exit {code}):\n" + "\n".join(lines[-20:]))
    times = [0.0, *stamps, wall]  # the readers append in time order, under one lock
    said = ["(start)", *lines]
    gaps = [b - a for a, b in itertools.pairwise(times)]
    longest = max(range(len(gaps)), key=gaps.__getitem__)
    watch = [(int(a), int(b)) for a, b in (m.groups() for m in map(WATCH_LINE.search, lines) if m)]
    pairs = itertools.pairwise(watch)
    return {
        "wall": wall,
        "cpu": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
        "load": load,
        "compiled": watch[-1][0] if watch else 0,
        "compile_s": watch[-1][1] if watch else 0,
        "gap": gaps[longest],
        "gap_after": said[longest][:70],
        "silences": [(round(g, 1), said[i][:70], [*said, "(end)"][i + 1][:70])
                     for i, g in enumerate(gaps) if g > 5.0],
        "restarts": any(m < n or t < s for (n, s), (m, t) in pairs),
    }


def render(rows: list[tuple[str, dict]], command: str) -> str:
    info = machine_info()
    lines = [
        "# The main job's first and second run",
        "",
        f"- Command: `{command}`",
        f"- Machine: {info['machine']}, {info['cpu']}, {info['cores']} cores; Python "
        f"{info['python']}; {datetime.date.today().isoformat()}",
        "- The job: `bayesldp run models/quickstart.toml` (five mechanisms, 3 repeats of 100,000 "
        "users); first: an empty numba cache; second: the cache the first run filled",
        "- compiling: the compile watch's last line (seconds with a compilation under way, "
        "functions compiled); longest silence: the longest stretch without an output line",
        "",
        "| run | load at start | wall s | CPU s | compiling s | functions compiled "
        "| longest silence s | counters restart | the silence came after |",
        "|---|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    for name, r in rows:
        lines.append(f"| {name} | {r['load']:.2f} | {r['wall']:.1f} | {r['cpu']:.1f} | "
                     f"{r['compile_s']} | {r['compiled']} | {r['gap']:.1f} | "
                     f"{'yes' if r['restarts'] else 'no'} | `{r['gap_after']}` |")  # fmt: skip
    for name, r in rows:
        if r["silences"]:
            lines += ["", f"Silences over 5 s, {name} run (seconds, the lines around):", ""]
            lines += [f"- {g} s: `{before}` -> `{after}`" for g, before, after in r["silences"]]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--out", type=Path, default=None,
                        help="write the table here (default: print only)")  # fmt: skip
    args = parser.parse_args(argv)
    rows = []
    for i in range(args.repeats):
        with tempfile.TemporaryDirectory() as tmp:
            cache = Path(tmp) / "numba-cache"
            for name in ("first", "second"):
                result = one_run(cache, Path(tmp) / f"out-{name}")
                rows.append((f"{name} ({i + 1})" if args.repeats > 1 else name, result))
                print(name, result, file=sys.stderr, flush=True)
    shown = ["python", "benchmarks/first_run.py", *(sys.argv[1:] if argv is None else argv)]
    text = render(rows, shlex.join(shown))
    if args.out is not None:
        args.out.write_text(text, encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
