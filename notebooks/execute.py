"""Run the notebooks of ``notebooks/`` top to bottom and store their outputs in place.

Each notebook runs in a fresh kernel on this interpreter (``sys.executable``, through a kernel
spec written into a temporary directory, so the notebooks run against the bayesldp this Python
imports whatever other Jupyter kernels are installed), with ``BAYESLDP_NB_SMALL`` unset, i.e.
at the full settings a reader gets, and matplotlib's inline backend (PNG figures).  The
notebook is written back with its outputs, without the per-cell timing metadata and with each
cell's consecutive prints to one stream in one output (:func:`coalesce_streams`); the lines
bayesldp writes to standard error while numba compiles its kernels (they appear only when the
kernels are not in numba's on-disk cache yet: a fact about the machine, not the notebook) are
dropped.  A notebook whose cell raises is not written.

Usage, from the repository's root::

    python notebooks/execute.py              # all of them, in place
    python notebooks/execute.py --only 02,05 # those whose names start with 02 or 05

The same runner executes the notebooks for ``benchmarks/notebooks.py`` (their wall time) and for
``tests/test_notebooks.py`` (at small settings).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

NOTEBOOK_DIR = Path(__file__).resolve().parent
NOTEBOOKS = sorted(NOTEBOOK_DIR.glob("*.ipynb"))
KERNEL = "bayesldp-notebooks"
#: the resolution of the stored figures (matplotlib's default is 100): keeps the notebooks small
FIGURE_DPI = 80
#: the lines bayesldp.bayes._feedback writes while numba compiles (COMPILE_MESSAGE, heartbeat)
COMPILE_LINE = re.compile(r"^bayesldp: compiling\b.*(\n|$)", re.MULTILINE)


def write_kernel_spec(base: Path, name: str = KERNEL) -> Path:
    """A kernels directory under ``base`` holding one spec, ``name``, that launches
    ``sys.executable -m ipykernel_launcher``; pass it to :func:`execute`."""
    spec_dir = base / "kernels" / name
    spec_dir.mkdir(parents=True, exist_ok=True)
    # the kernel's own log at ERROR: not its warning, at every start, that it talks over TCP
    argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}",
            "--IPKernelApp.log_level=ERROR"]  # fmt: skip
    spec = {"argv": argv, "display_name": "bayesldp notebooks", "language": "python"}
    (spec_dir / "kernel.json").write_text(json.dumps(spec), encoding="utf-8")
    return base / "kernels"


def execute(path: Path, kernels: Path, *, small: bool = False, figures: bool = True,
            timeout: int = 3600, name: str = KERNEL,
            raise_errors: bool = False) -> tuple[Any, float, str]:  # fmt: skip
    """Execute the notebook at ``path`` in a fresh kernel of the spec ``name`` in ``kernels``.

    ``small`` sets ``BAYESLDP_NB_SMALL=1`` (unset otherwise); ``figures=False`` sets
    ``MPLBACKEND=Agg`` (no image outputs; faster), ``True`` leaves the kernel its inline
    backend, with matplotlib's defaults but ``figure.dpi`` = :data:`FIGURE_DPI`.

    Returns the executed notebook (an ``nbformat`` node), the wall seconds and the error
    (``""``, or the exception's type and last line when a cell raised: the notebook then holds
    the outputs up to that cell); ``raise_errors=True`` raises it instead (nbclient's
    ``CellExecutionError`` names the cell and holds its traceback).
    """
    import nbformat
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import AsyncKernelManager
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    env = {**os.environ}
    for key in ("BAYESLDP_NB_SMALL", "MPLBACKEND", "MATPLOTLIBRC"):
        env.pop(key, None)
    if small:
        env["BAYESLDP_NB_SMALL"] = "1"
    if figures:
        rc = kernels / "matplotlibrc"
        rc.write_text(f"figure.dpi: {FIGURE_DPI}\n", encoding="utf-8")
        env["MATPLOTLIBRC"] = str(rc)
    else:
        env["MPLBACKEND"] = "Agg"
    specs = KernelSpecManager(kernel_dirs=[str(kernels)])
    client = NotebookClient(
        nb,
        km=AsyncKernelManager(kernel_name=name, kernel_spec_manager=specs),
        timeout=timeout,
        record_timing=False,
        resources={"metadata": {"path": str(path.parent)}},
    )
    started = time.perf_counter()
    error = ""
    try:
        # nbclient leaves a kernel manager it was given running unless told to clean up
        client.execute(env=env, cleanup_kc=True)
    except Exception as exc:
        if raise_errors:
            raise
        first = str(exc).strip().splitlines()
        error = f"{type(exc).__name__}: {first[-1][:200] if first else ''}"
    return nb, time.perf_counter() - started, error


def drop_compile_notices(nb: Any) -> Any:
    """``nb`` without bayesldp's compile notices in its stderr streams (and without the stream
    outputs they leave empty)."""
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        kept = []
        for output in cell.outputs:
            if output.output_type == "stream" and output.name == "stderr":
                output.text = COMPILE_LINE.sub("", output.text)
                if not output.text:
                    continue
            kept.append(output)
        cell.outputs = kept
    return nb


def coalesce_streams(nb: Any) -> Any:
    """``nb`` with each run of consecutive stream outputs of one name (stdout, stderr) in a cell
    joined into one: how the kernel happened to flush a cell's printing then leaves no trace in
    the stored notebook."""
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        merged = []
        for output in cell.outputs:
            previous = merged[-1] if merged else None
            same = previous is not None and previous.output_type == output.output_type
            if same and output.output_type == "stream" and previous.name == output.name:
                previous.text += output.text
                continue
            merged.append(output)
        cell.outputs = merged
    return nb


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", help="comma-separated prefixes of notebook names (e.g. 01,05)")
    parser.add_argument("--timeout", type=int, default=3600, help="seconds per cell")
    args = parser.parse_args(argv)
    import nbformat

    chosen = NOTEBOOKS
    if args.only:
        chosen = [p for p in NOTEBOOKS if p.name.startswith(tuple(args.only.split(",")))]
    failed = 0
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        kernels = write_kernel_spec(Path(tmp))
        for path in chosen:
            nb, seconds, error = execute(path, kernels, timeout=args.timeout)
            if error:
                failed += 1
                print(f"{path.name}: FAILED after {seconds:.0f} s, not written: {error}",
                      flush=True)  # fmt: skip
                continue
            nbformat.write(coalesce_streams(drop_compile_notices(nb)), path)
            print(f"{path.name}: {seconds:.0f} s, {path.stat().st_size / 1e3:.0f} kB",
                  flush=True)  # fmt: skip
    print(f"{len(chosen) - failed} of {len(chosen)} notebooks written in "
          f"{time.perf_counter() - started:.0f} s")  # fmt: skip
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
