"""Every notebook in ``notebooks/`` is stored executed and clean, and runs from top to bottom.

The notebooks are committed with their outputs (the documentation shows them as stored):
``python notebooks/execute.py`` runs each at its full settings and writes it back.  The fast
tests here read the stored JSON: every code cell ran, in order, in one kernel; there is a
figure; no error, no progress-bar fragment, and no standard-error output or text naming a
``...Warning`` outside the cells tagged ``show-stderr`` (cells that are about a warning); no
bulky HTML; a modest file size.

The execution test runs each notebook again at small settings (``BAYESLDP_NB_SMALL=1``, well
under a minute per notebook, ``MPLBACKEND=Agg``) through the same runner, on this interpreter,
and fails on the first cell that raises: it catches code that no longer runs.
"""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest

from notebooks.execute import coalesce_streams, drop_compile_notices, execute, write_kernel_spec

NOTEBOOK_DIR = Path(__file__).resolve().parents[1] / "notebooks"
NOTEBOOKS = sorted(NOTEBOOK_DIR.glob("*.ipynb"))
CELL_TIMEOUT = 600  # seconds per cell; a whole notebook takes well under a minute when small
#: the tag of a code cell whose standard error and warnings are its point
SHOW_STDERR = "show-stderr"
#: what a progress bar leaves in a stored output: carriage returns, cursor moves, tqdm's
#: "NN%|" and "it/s", an ipywidgets bar's model
PROGRESS = re.compile(r"\r|\x1b\[|\d%\||\bit/s\b|application/vnd\.jupyter\.widget")
WARNING = re.compile(r"\w*Warning\b")
#: bytes: a notebook's file, and any one text/html output (an xarray / InferenceData repr is
#: hundreds of kB; a pandas table of a few dozen rows is a few kB)
MAX_FILE_BYTES = 1_000_000
MAX_HTML_BYTES = 30_000


@pytest.fixture(scope="module")
def kernel_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A kernels directory holding one spec that launches ``sys.executable -m ipykernel``."""
    return write_kernel_spec(tmp_path_factory.mktemp("kernels"))


def test_notebooks_exist() -> None:
    names = [path.name for path in NOTEBOOKS]
    assert "01_posterior_analysis.ipynb" in names, names
    assert len(names) >= 3, names


def _code_cells(nb) -> list:
    return [cell for cell in nb.cells if cell.cell_type == "code"]


def _texts(output) -> list[str]:
    """The text of a stored output: a stream's, or each text/... entry of its data."""
    if output.output_type == "stream":
        return [output.text]
    if output.output_type == "error":
        return ["\n".join(output.traceback)]
    data = output.get("data", {})
    texts = [value for key, value in data.items() if key.startswith("text/")]
    return [*texts, *(key for key in data if "widget" in key)]


def stored_output_problems(nb) -> list[str]:
    """What is wrong with the outputs stored in ``nb`` (an ``nbformat`` node): ``[]`` if none."""
    problems = []
    cells = _code_cells(nb)
    counts = [cell.execution_count for cell in cells]
    if counts != list(range(1, len(cells) + 1)):
        problems.append(f"the code cells did not all run, in order, in one kernel: {counts}")
    images = 0
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        shows_stderr = SHOW_STDERR in cell.metadata.get("tags", [])
        for output in cell.outputs:
            images += "image/png" in output.get("data", {})
            where = f"cell {index} ({output.output_type})"
            if output.output_type == "error":
                problems.append(f"{where}: {output.ename}: {output.evalue[:100]}")
            if output.output_type == "stream" and output.name == "stderr" and not shows_stderr:
                problems.append(f"{where}: standard error {output.text[:100]!r}")
            html = output.get("data", {}).get("text/html", "")
            if len(html.encode()) > MAX_HTML_BYTES:
                problems.append(f"{where}: an HTML output of {len(html.encode()):,} bytes")
            for text in _texts(output):
                if match := PROGRESS.search(text):
                    problems.append(f"{where}: a progress bar's {match.group(0)!r}")
                if not shows_stderr and (match := WARNING.search(text)):
                    problems.append(f"{where}: {match.group(0)!r} in {text[:100]!r}")
                if "SMALL=True" in text:
                    problems.append(f"{where}: run at the small settings")
    if not images:
        problems.append("no figure (image/png output)")
    return problems


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.name)
def test_notebook_is_stored_executed_and_clean(path: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    assert nb.metadata.get("kernelspec", {}).get("name") == "python3"
    code_cells = _code_cells(nb)
    assert code_cells, f"{path.name} has no code cell"
    assert "BAYESLDP_NB_SMALL" in code_cells[0].source, (
        f"{path.name}: the first code cell must read BAYESLDP_NB_SMALL"
    )
    problems = stored_output_problems(nb)
    assert not problems, (
        f"{path.name}: regenerate it with `python notebooks/execute.py --only "
        f"{path.name[:2]}` ({len(problems)} problems, the first 20):\n" + "\n".join(problems[:20])
    )
    size = path.stat().st_size
    assert size <= MAX_FILE_BYTES, f"{path.name}: {size:,} bytes"


def test_the_output_check_catches_what_it_should() -> None:
    """Each kind of unclean output fails :func:`stored_output_problems`; a clean one passes."""
    v4 = nbformat.v4

    def notebook(*outputs, tags=()):
        first = v4.new_code_cell("import os", execution_count=1)
        second = v4.new_code_cell("x", execution_count=2, outputs=list(outputs))
        second.metadata["tags"] = list(tags)
        return v4.new_notebook(cells=[first, second])

    png = v4.new_output("display_data", data={"image/png": "iVBORw0K", "text/plain": "<Figure>"})
    assert stored_output_problems(notebook(png)) == []
    bar = v4.new_output("stream", name="stdout", text="\rchain 0:  45%|####5     | 900/2000")
    stderr = v4.new_output("stream", name="stderr", text="a note\n")
    warning = v4.new_output("stream", name="stdout", text="ConvergenceWarning: r_hat 1.1\n")
    html = v4.new_output("display_data", data={"text/html": "x" * (MAX_HTML_BYTES + 1)})
    error = v4.new_output("error", ename="ValueError", evalue="bad", traceback=["ValueError"])
    small = v4.new_output("stream", name="stdout", text="bayesldp 1.0, SMALL=True\n")
    for bad in (bar, stderr, warning, html, error, small):
        assert stored_output_problems(notebook(png, bad)), bad
    assert stored_output_problems(notebook()), "no figure"
    unrun = notebook(png)
    unrun.cells[0].execution_count = None
    assert stored_output_problems(unrun), "a cell that did not run"
    # a cell about a warning may show it, on stderr too; a progress bar never
    assert stored_output_problems(notebook(png, stderr, warning, tags=[SHOW_STDERR])) == []
    assert stored_output_problems(notebook(png, bar, tags=[SHOW_STDERR]))


def test_the_runner_drops_only_the_compile_notices() -> None:
    """bayesldp's compile notice and heartbeat depend on numba's on-disk cache, not on the
    notebook: ``python notebooks/execute.py`` drops those lines (and a stream left empty)."""
    from bayesldp.bayes._feedback import COMPILE_MESSAGE

    v4 = nbformat.v4
    notice = v4.new_output("stream", name="stderr", text=f"{COMPILE_MESSAGE}\n")
    mixed = v4.new_output("stream", name="stderr",
                          text="bayesldp: compiling... 3 of 7 kernels (5 s)\nother\n")  # fmt: skip
    printed = v4.new_output("stream", name="stdout", text="bayesldp: compiling is printed\n")
    nb = v4.new_notebook(cells=[v4.new_code_cell("x", outputs=[notice, mixed, printed])])
    outputs = drop_compile_notices(nb).cells[0].outputs
    assert [(o.name, o.text) for o in outputs] == [
        ("stderr", "other\n"),
        ("stdout", "bayesldp: compiling is printed\n"),
    ]


def test_the_runner_joins_consecutive_prints_to_one_stream() -> None:
    v4 = nbformat.v4
    out = [v4.new_output("stream", name="stdout", text=text) for text in ("a", "\n")]
    err = v4.new_output("stream", name="stderr", text="e\n")
    png = v4.new_output("display_data", data={"image/png": "iVBORw0K"})
    last = v4.new_output("stream", name="stdout", text="b\n")
    nb = v4.new_notebook(cells=[v4.new_code_cell("x", outputs=[*out, err, png, last])])
    outputs = coalesce_streams(nb).cells[0].outputs
    assert [o.get("text") for o in outputs] == ["a\n", "e\n", None, "b\n"]
    for path in NOTEBOOKS:  # the stored notebooks are written so
        stored = nbformat.read(path, as_version=4)
        assert [len(c.outputs) for c in coalesce_streams(nbformat.read(path, as_version=4)).cells
                if c.cell_type == "code"] == [len(c.outputs) for c in stored.cells
                                              if c.cell_type == "code"], path.name  # fmt: skip


@pytest.mark.slow  # 20-80 s a notebook: CI runs it in the statistical tier
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.name)
def test_notebook_executes(path: Path, kernel_dir: Path) -> None:
    # a CellExecutionError (the failing cell's source and traceback) fails the test
    nb, _, _ = execute(path, kernel_dir, small=True, figures=False, timeout=CELL_TIMEOUT,
                       raise_errors=True)  # fmt: skip
    errors = [
        output
        for cell in _code_cells(nb)
        for output in cell.outputs
        if output.output_type == "error"
    ]
    assert not errors, errors


def _code(path: Path) -> str:
    nb = nbformat.read(path, as_version=4)
    return "\n".join(cell.source for cell in nb.cells if cell.cell_type == "code")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.name)
def test_notebook_checks_its_model_and_names_its_categories(path: Path) -> None:
    """Every notebook runs a posterior predictive check and names its categories.

    The check is ``bayesldp.sample_posterior_predictive`` drawn with ArviZ (``az.plot_ppc`` or
    ``az.plot_bpv``); the names reach the fit through ``fit(..., labels=...)`` (or a model's
    coordinates) or the data through ``bayesldp.encode``.
    """
    code = _code(path)
    assert "sample_posterior_predictive(" in code, f"{path.name}: no posterior predictive check"
    assert "az.plot_bpv(" in code or "az.plot_ppc(" in code, f"{path.name}: check not drawn"
    assert "labels=" in code or "bayesldp.encode(" in code, f"{path.name}: unnamed categories"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.name)
def test_notebook_figures_use_no_symlog_axis(path: Path) -> None:
    """Notebook 03's symlog axis hid that the 90% intervals of the largest
    category (truth near 1) all missed it; a frequency near 1 and ones near 0 go on separate
    linear axes instead."""
    assert "symlog" not in _code(path), f"{path.name}: a symlog axis"
