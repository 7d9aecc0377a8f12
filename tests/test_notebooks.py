"""Every notebook in ``notebooks/`` is stored clean and runs from top to bottom.

Each notebook reads ``BAYESLDP_NB_SMALL`` in its first code cell; the execution test sets it to
``1`` (small settings, well under a minute per notebook) and ``MPLBACKEND=Agg`` in the kernel's
environment, and fails on the first cell that raises.  The kernel is this interpreter
(``sys.executable``), through a kernel spec written for the test module into a temporary
directory, so the notebooks run against the bayesldp installation under test whatever other
Jupyter kernels are installed.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import nbformat
import pytest
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import AsyncKernelManager
from nbclient import NotebookClient

NOTEBOOK_DIR = Path(__file__).resolve().parents[1] / "notebooks"
NOTEBOOKS = sorted(NOTEBOOK_DIR.glob("*.ipynb"))
KERNEL_NAME = "bayesldp-notebook-test"
CELL_TIMEOUT = 600  # seconds per cell; a whole notebook takes well under a minute when small


@pytest.fixture(scope="module")
def kernel_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A kernels directory holding one spec that launches ``sys.executable -m ipykernel``."""
    kernels = tmp_path_factory.mktemp("kernels")
    spec_dir = kernels / KERNEL_NAME
    spec_dir.mkdir()
    spec = {
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "bayesldp notebook tests",
        "language": "python",
    }
    (spec_dir / "kernel.json").write_text(json.dumps(spec), encoding="utf-8")
    return kernels


def test_notebooks_exist() -> None:
    names = [path.name for path in NOTEBOOKS]
    assert "01_posterior_analysis.ipynb" in names, names
    assert len(names) >= 3, names


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.name)
def test_notebook_is_stored_without_outputs(path: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    assert nb.metadata.get("kernelspec", {}).get("name") == "python3"
    code_cells = [cell for cell in nb.cells if cell.cell_type == "code"]
    assert code_cells, f"{path.name} has no code cell"
    assert "BAYESLDP_NB_SMALL" in code_cells[0].source, (
        f"{path.name}: the first code cell must read BAYESLDP_NB_SMALL"
    )
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        assert cell.outputs == [], f"{path.name}: cell {index} has stored outputs"
        assert cell.execution_count is None, f"{path.name}: cell {index} has an execution count"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.name)
def test_notebook_executes(path: Path, kernel_dir: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    specs = KernelSpecManager(kernel_dirs=[str(kernel_dir)])
    client = NotebookClient(
        nb,
        km=AsyncKernelManager(kernel_name=KERNEL_NAME, kernel_spec_manager=specs),
        timeout=CELL_TIMEOUT,
        allow_errors=False,
        resources={"metadata": {"path": str(NOTEBOOK_DIR)}},
    )
    env = {**os.environ, "BAYESLDP_NB_SMALL": "1", "MPLBACKEND": "Agg"}
    # A CellExecutionError (the failing cell's source and traceback) fails the test.  nbclient
    # leaves a kernel manager it was given running unless told to clean up: shut it down.
    client.execute(env=env, cleanup_kc=True)
    errors = [
        output
        for cell in nb.cells
        if cell.cell_type == "code"
        for output in cell.outputs
        if output.output_type == "error"
    ]
    assert not errors, errors


def _code(path: Path) -> str:
    nb = nbformat.read(path, as_version=4)
    return "\n".join(cell.source for cell in nb.cells if cell.cell_type == "code")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.name)
def test_notebook_checks_its_model_and_names_its_categories(path: Path) -> None:
    """Issue 15: every notebook runs a posterior predictive check and names its categories.

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
    """Issue 15 item 8: notebook 03's symlog axis hid that the 90% intervals of the largest
    category (truth near 1) all missed it; a frequency near 1 and ones near 0 go on separate
    linear axes instead."""
    assert "symlog" not in _code(path), f"{path.name}: a symlog axis"
