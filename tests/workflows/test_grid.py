"""The AdOBEst-LDP experiment grid (bayesldp.workflows.grid): spec checks and a tiny run."""

from pathlib import Path

import numpy as np
import pytest

from bayesldp.workflows.grid import run_grid
from bayesldp.workflows.spec import SpecError, load_spec

MODELS = Path(__file__).resolve().parents[2] / "models"


def test_grid_spec_validation_names_the_key(tmp_path):
    spec = load_spec(MODELS / "adobest_grid.toml", kind="grid")
    assert spec["grid"]["k"] == [10, 20] and spec["paper"]["n"] == 500_000
    cases = {
        '[grid]\nname = "x"\nn = 10\nk = [1]\nepsilon = [1]\nrho = [1]\n': r"\[grid\]\.k\[0\]",
        '[grid]\nname = "x"\nn = 10\nk = [3]\nepsilon = [0]\nrho = [1]\n': r"\[grid\]\.epsilon",
        '[grid]\nname = "x"\nn = 10\nk = [3]\nepsilon = [1]\nrho = ["a"]\n': r"\[grid\]\.rho\[0\]",
        '[grid]\nname = "x"\nk = [3]\nepsilon = [1]\nrho = [1]\n': r"\[grid\]\.n: missing",
        '[grid]\nname = "x"\nn = 10\nk = [3]\nepsilon = [1]\nrho = [1]\nutilities = ["U9"]\n': (
            r"\[grid\]\.utilities\[0\]"
        ),
        '[grid]\nname = "x"\nn = 10\nk = [3]\nepsilon = [1]\nrho = [1]\n'
        "semi_adaptive_alpha = [1.5]\n": r"\[grid\]\.semi_adaptive_alpha\[0\]",
        '[grid]\nname = "x"\nn = 10\nk = [3]\nepsilon = [1]\nrho = [1]\n'
        "[survey]\nburn_in = 5000\n": r"\[survey\]\.burn_in",
        '[grid]\nname = "x"\nn = 10\nk = [3]\nepsilon = [1]\nrho = [1]\n[surve]\n': r"\[surve\]",
        '[grid]\nname = "x"\nn = 10\nk = [3]\nepsilon = [1]\nrho = [1]\nbogus = 1\n': (
            r"\[grid\]\.bogus: unknown key"
        ),
    }
    for i, (text, pattern) in enumerate(cases.items()):
        path = tmp_path / f"bad{i}.toml"
        path.write_text(text)
        with pytest.raises(SpecError, match=pattern) as info:
            load_spec(path, kind="grid")
        assert "\n" not in str(info.value) and str(path) in str(info.value)


def test_run_grid_smoke(tmp_path):
    spec = tmp_path / "tiny.toml"
    spec.write_text(
        '[grid]\nname = "tiny"\nseed = 1\nn = 300\nrepeats = 2\nk = [3]\nepsilon = [0.5, 2]\n'
        'rho = [1]\nutilities = ["tv"]\neps1_fraction = [0.8]\nsemi_adaptive_alpha = [0.9]\n'
        "[survey]\nfinal_steps = 200\nburn_in = 100\n"
    )
    calls = []
    res = run_grid(spec, tmp_path / "out", progress=lambda *a: calls.append(a))
    assert res["tv"].shape == (1, 1, 2, 3, 2) and len(calls) == 12
    assert list(res["scheme"].values) == ["tv 0.8", "semi 0.9", "non-adaptive"]
    assert np.all((res["tv"].values > 0) & (res["tv"].values < 1))
    assert np.all((res["tv_mle"].values >= 0) & (res["tv_mle"].values < 1))
    assert not res["mean_subset_size"].sel({"scheme": "non-adaptive"}).values.any()
    for name in ("results.nc", "tables.md", "tv_vs_epsilon.png", "tv_vs_rho.png"):
        assert (tmp_path / "out" / name).stat().st_size > 0
    assert "non-adaptive" in (tmp_path / "out" / "tables.md").read_text()
    again = run_grid(spec, tmp_path / "out2")
    np.testing.assert_array_equal(again["tv"].values, res["tv"].values)


TINY = (
    '[grid]\nname = "tiny"\nseed = 3\nn = 200\nrepeats = 2\nk = [3]\nepsilon = [1]\n'
    'rho = [1]\nutilities = ["tv"]\neps1_fraction = [0.8]\nsemi_adaptive_alpha = []\n'
    "[survey]\nfinal_steps = 100\nburn_in = 50\n"
)


def test_grid_on_dask_is_bit_identical_and_resumes(tmp_path):
    pytest.importorskip("dask")
    spec = tmp_path / "tiny.toml"
    spec.write_text(TINY)
    serial = run_grid(spec, tmp_path / "serial")
    threads = run_grid(spec, tmp_path / "threads", scheduler="threads")
    for name in ("tv", "tv_mle", "mean_subset_size"):
        np.testing.assert_array_equal(threads[name].values, serial[name].values)
    # a stopped grid: two of its four cells are gone, one is torn; only those three run again
    cells = sorted((tmp_path / "serial" / "cells").glob("cell_*.json"))
    assert len(cells) == 4
    cells[0].unlink()
    cells[1].unlink()
    cells[2].write_text('{"fingerprint": "')
    calls = []
    again = run_grid(spec, tmp_path / "serial", progress=lambda *a: calls.append(a))
    assert [c[0] for c in calls] == [2, 3, 4]
    for name in ("tv", "tv_mle", "mean_subset_size"):
        np.testing.assert_array_equal(again[name].values, serial[name].values)
    # another size is another grid: nothing is reused
    spec.write_text(TINY.replace("n = 200", "n = 250"))
    calls.clear()
    run_grid(spec, tmp_path / "serial", progress=lambda *a: calls.append(a))
    assert len(calls) == 4
