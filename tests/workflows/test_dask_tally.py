"""Tallies of report files on Dask equal the direct tallies."""

import time

import numpy as np
import pytest

import bayesldp
from bayesldp.errors import InvalidInputError
from bayesldp.workflows.dask_tally import report_files, tally_reports
from bayesldp.workflows.report_files import read_table

pytest.importorskip("dask")


def write_files(mech, folder, n_files, size, suffix=".csv", seed=0):
    rng = np.random.default_rng(seed)
    for i in range(n_files):
        frame = mech.reports_to_frame(mech.perturb(rng.integers(0, mech.k, size), rng=rng))
        path = folder / f"part{i:02d}{suffix}"
        frame.to_csv(path, index=False) if suffix == ".csv" else frame.to_parquet(path)
    return sorted(folder.iterdir())


def direct(mech, files):
    tallies = [mech.tally_frame(read_table(p), p) for p in files]
    return sum(tallies[1:], tallies[0])


MECHANISMS = [bayesldp.GRR(6, 1.0), bayesldp.OUE(20, 1.0), bayesldp.OLH(8, 1.0)]


@pytest.mark.parametrize("mech", MECHANISMS)
@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_threads_scheduler_equals_the_direct_tally(tmp_path, mech, suffix):
    files = write_files(mech, tmp_path, 5, 400, suffix)
    got = tally_reports(tmp_path, mech, scheduler="threads")
    assert got == direct(mech, files)
    assert tally_reports(str(tmp_path / f"*{suffix}"), mech, scheduler="synchronous") == got


def test_local_cluster_and_bad_input(tmp_path):
    mech = bayesldp.GRR(5, 1.0)
    files = write_files(mech, tmp_path, 3, 300)
    assert tally_reports(files, mech) == direct(mech, files)  # a LocalCluster for the call
    (tmp_path / "zz_wrong.csv").write_text("a,b\n1,2\n")
    with pytest.raises(InvalidInputError, match="zz_wrong"):
        tally_reports(tmp_path, mech, scheduler="threads")
    with pytest.raises(InvalidInputError, match="as a glob pattern it matches no file"):
        report_files(tmp_path / "empty*")


def test_unreachable_scheduler_fails_in_seconds_naming_it(tmp_path):
    mech = bayesldp.GRR(3, 1.0)
    files = write_files(mech, tmp_path, 1, 10)
    start = time.monotonic()
    with pytest.raises(InvalidInputError, match=r"tcp://127\.0\.0\.1:9"):
        tally_reports(files, mech, scheduler="tcp://127.0.0.1:9", timeout=2)
    assert time.monotonic() - start < 30


@pytest.mark.parametrize("missing", ["dask", "distributed", "pyarrow"])
def test_a_missing_extra_is_named(tmp_path, monkeypatch, missing):
    """dask, distributed and pyarrow are the ``bayesldp[dask]`` extra: without them the paths
    that need them say so, naming the extra."""
    import sys

    mech = bayesldp.GRR(3, 1.0)
    suffix = ".parquet" if missing == "pyarrow" else ".csv"
    write_files(mech, tmp_path, 2, 50, suffix)
    monkeypatch.setitem(sys.modules, missing, None)
    scheduler = None if missing == "distributed" else "threads"
    with pytest.raises(bayesldp.NotSupportedError, match=rf"needs {missing}.*bayesldp\[dask\]"):
        tally_reports(tmp_path, mech, scheduler=scheduler)
