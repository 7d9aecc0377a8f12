"""The AdOBEst-LDP experiment grid (bayesldp.workflows.grid): spec checks and a tiny run."""

from pathlib import Path

import numpy as np
import pytest

from bayesldp.errors import InvalidInputError
from bayesldp.workflows.grid import run_grid
from bayesldp.workflows.spec import SpecError, load_spec
from bayesldp.workflows.spec.grid import users_per_survey

MODELS = Path(__file__).resolve().parents[2] / "models"


def test_grid_spec_validation_names_the_key(tmp_path):
    spec = load_spec(MODELS / "adobest_grid.toml", kind="grid")
    assert spec["grid"]["k"] == [10, 20] and spec["grid"]["n"] == 10_000
    # [paper] is the reference code's size, T = 500 K (experiments_for_SGDL.m)
    assert spec["paper"] == {"n": None, "n_per_category": 500, "repeats": 50}
    assert [users_per_survey(spec["paper"], k) for k in (10, 20)] == [5_000, 10_000]
    assert [users_per_survey(spec["grid"], k) for k in (10, 20)] == [10_000, 10_000]
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
        '[grid]\nname = "x"\nn = 10\nn_per_category = 5\nk = [3]\nepsilon = [1]\nrho = [1]\n': (
            r"\[grid\]: give either n .* or n_per_category .*, not both \(got n = 10, "
            r"n_per_category = 5\)"
        ),
        '[grid]\nname = "x"\nn_per_category = 0\nk = [3]\nepsilon = [1]\nrho = [1]\n': (
            r"\[grid\]\.n_per_category: must be >= 1, got 0"
        ),
        '[grid]\nname = "x"\nn_per_category = 2.5\nk = [3]\nepsilon = [1]\nrho = [1]\n': (
            r"\[grid\]\.n_per_category: expected an integer, got 2\.5"
        ),
        '[grid]\nname = "x"\nn = 10\nk = [3]\nepsilon = [1]\nrho = [1]\n'
        "[paper]\nn = 10\nn_per_category = 5\n": r"\[paper\]: give either n",
        '[grid]\nname = "x"\nn = 10\nk = [3]\nepsilon = [1]\nrho = [1]\n'
        "[paper]\nn = -1\n": r"\[paper\]\.n: must be >= 1, got -1",
    }
    for i, (text, pattern) in enumerate(cases.items()):
        path = tmp_path / f"bad{i}.toml"
        path.write_text(text)
        with pytest.raises(SpecError, match=pattern) as info:
            load_spec(path, kind="grid")
        assert "\n" not in str(info.value) and str(path) in str(info.value)


def test_old_paper_n_still_reads(tmp_path):
    """A spec written before n_per_category (``[paper] n = 500000``) keeps its meaning."""
    path = tmp_path / "old.toml"
    path.write_text(
        '[grid]\nname = "x"\nn = 10\nk = [3, 4]\nepsilon = [1]\nrho = [1]\n'
        "[paper]\nn = 500000\nrepeats = 7\n"
    )
    spec = load_spec(path, kind="grid")
    assert spec["paper"] == {"n": 500_000, "n_per_category": None, "repeats": 7}
    assert [users_per_survey(spec["paper"], k) for k in (3, 4)] == [500_000, 500_000]
    path.write_text('[grid]\nname = "x"\nn_per_category = 7\nk = [3]\nepsilon = [1]\nrho = [1]\n')
    spec = load_spec(path, kind="grid")
    assert spec["grid"]["n"] is None and users_per_survey(spec["grid"], 3) == 21


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


@pytest.mark.slow
def test_grid_on_a_local_cluster_is_bit_identical_and_quiet(tmp_path, capfd):
    """``scheduler=None`` starts a LocalCluster: the same cells as in this process, and its
    workers print nothing (they log CRITICAL only)."""
    pytest.importorskip("distributed")
    spec = tmp_path / "tiny.toml"
    spec.write_text(TINY)
    serial = run_grid(spec, tmp_path / "serial")
    capfd.readouterr()
    local = run_grid(spec, tmp_path / "local", scheduler=None)
    for name in ("tv", "tv_mle", "mean_subset_size"):
        np.testing.assert_array_equal(local[name].values, serial[name].values)
    assert "Traceback" not in capfd.readouterr().err


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


def test_grid_n_per_category_runs_each_k_at_its_own_size(tmp_path):
    """``n_per_category = 60`` with K in {3, 4} runs 180 and 240 users: each K's cells equal
    those of a grid with that fixed ``n`` (same seeds: the K index keys the populations)."""
    per_k = TINY.replace("n = 200", "n_per_category = 60").replace("k = [3]", "k = [3, 4]")
    spec = tmp_path / "per_k.toml"
    spec.write_text(per_k)
    res = run_grid(spec, tmp_path / "per_k")
    assert res["n_users"].values.tolist() == [180, 240] and "n" not in res.attrs
    header = (tmp_path / "per_k" / "tables.md").read_text()
    assert "n = 180 (K=3), 240 (K=4) users per survey" in header
    assert "### K = 4, rho = 1 (n = 240, 2 repeats)" in header
    for k, n in ((3, 180), (4, 240)):
        fixed = tmp_path / f"fixed{n}.toml"
        fixed.write_text(per_k.replace("n_per_category = 60", f"n = {n}"))
        other = run_grid(fixed, tmp_path / f"fixed{n}")
        assert other.attrs["n"] == n
        for name in ("tv", "tv_mle", "mean_subset_size"):
            np.testing.assert_array_equal(res[name].sel(k=k).values, other[name].sel(k=k).values)
    # another n_per_category is another grid: nothing is reused
    spec.write_text(per_k.replace("n_per_category = 60", "n_per_category = 61"))
    calls = []
    again = run_grid(spec, tmp_path / "per_k", progress=lambda *a: calls.append(a))
    assert len(calls) == 8 and again["n_users"].values.tolist() == [183, 244]


def test_grid_in_parts_with_only(tmp_path):
    """``only=`` runs a subset of the cells; parts run into one directory add up to the whole
    grid, bit-identical to running it at once; a bad selection names the key and value."""
    spec = tmp_path / "parts.toml"
    spec.write_text(TINY.replace("k = [3]", "k = [3, 4]").replace("n = 200", "n_per_category = 50"))
    whole = run_grid(spec, tmp_path / "whole")
    calls = []
    part = run_grid(spec, tmp_path / "parts", only={"k": [4], "scheme": ["non-adaptive"]},
                    progress=lambda *a: calls.append(a))  # fmt: skip
    assert [c[:2] for c in calls] == [(1, 2), (2, 2)]
    finite = np.isfinite(part["tv"].values)
    assert finite.sum() == 2 and finite[1, 0, 0, 1].all()
    np.testing.assert_array_equal(
        part["tv"].sel(k=4, scheme="non-adaptive").values,
        whole["tv"].sel(k=4, scheme="non-adaptive").values,
    )
    assert "### K = 4" in (tmp_path / "parts" / "tables.md").read_text()
    calls.clear()
    rest = run_grid(spec, tmp_path / "parts", progress=lambda *a: calls.append(a))
    assert len(calls) == 6 and calls[0][:2] == (3, 8)
    for name in ("tv", "tv_mle", "mean_subset_size"):
        np.testing.assert_array_equal(rest[name].values, whole[name].values)
    for bad, pattern in (
        ({"kk": [3]}, r"only: unknown key 'kk'"),
        ({"k": [5]}, r"only\['k'\]: 5 is not in the grid"),
        ({"scheme": ["fisher 0.8"]}, r"only\['scheme'\]: 'fisher 0.8' is not in the grid"),
    ):
        with pytest.raises(InvalidInputError, match=pattern):
            run_grid(spec, tmp_path / "bad", only=bad)
