"""The durable incremental tally store: appends, duplicates, bad files and SIGKILL safety."""

import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import bayesldp
from bayesldp.errors import DamagedStoreError, InvalidInputError
from bayesldp.workflows.tally_store import TallyStore


def write_batches(mech, folder, batches, size=500, seed=0):
    rng = np.random.default_rng(seed)
    paths = []
    for i in range(batches):
        x = rng.integers(0, mech.k, size)
        path = folder / f"day{i:02d}.csv"
        mech.reports_to_frame(mech.perturb(x, rng=rng)).to_csv(path, index=False)
        paths.append(path)
    return paths


def direct_tally(mech, paths):
    from bayesldp.workflows.report_files import read_table

    return sum((mech.tally_frame(read_table(p), p) for p in paths[1:]),
               mech.tally_frame(read_table(paths[0]), paths[0]))  # fmt: skip


@pytest.mark.parametrize("mech", [bayesldp.GRR(5, 1.0), bayesldp.OUE(5, 1.0)])
def test_appends_add_up_and_duplicates_are_skipped(tmp_path, mech):
    paths = write_batches(mech, tmp_path, 3)
    store = TallyStore.create(tmp_path / "store", mech)
    first = store.append(paths[:2])
    assert [r["status"] for r in first] == ["counted", "counted"]
    again = store.append([paths[1], paths[2], paths[2]])
    assert [r["status"] for r in again] == ["already counted", "counted", "already counted"]
    assert store.append(paths) and [e["name"] for e in store.inputs()] == [str(p) for p in paths]
    assert store.tally() == direct_tally(mech, paths)
    reopened = TallyStore(tmp_path / "store")
    assert reopened.mechanism == mech and reopened.tally().n == 1500
    est = bayesldp.estimate(reopened.tally(), "mle")
    assert est.on_simplex


def test_a_bad_file_names_itself_and_stores_nothing(tmp_path):
    mech = bayesldp.GRR(4, 1.0)
    good = write_batches(mech, tmp_path, 1)
    bad = tmp_path / "other.csv"
    bad.write_text("value\n1\n2\n")
    store = TallyStore.create(tmp_path / "store", mech)
    store.append(good)
    before = store.tally()
    with pytest.raises(InvalidInputError, match=r"other\.csv"):
        store.append([bad])
    assert store.tally() == before and len(store.inputs()) == 1


def test_store_errors(tmp_path):
    with pytest.raises(InvalidInputError, match="not a tally store"):
        TallyStore(tmp_path)
    store = TallyStore.create(tmp_path / "s", bayesldp.GRR(3, 1.0))
    with pytest.raises(InvalidInputError, match="already holds"):
        TallyStore.create(tmp_path / "s", bayesldp.GRR(3, 1.0))
    with pytest.raises(InvalidInputError, match="no reports yet"):
        store.tally()


APPENDER = """
import sys
from bayesldp.workflows.tally_store import TallyStore
store = TallyStore(sys.argv[1])
for path in sys.argv[2:]:
    store.append([path])
"""


def test_sigkill_during_appends_leaves_a_consistent_store(tmp_path):
    """Kill appending processes at seeded random moments (a random delay after the store has
    reached a random number of inputs, so the kill lands during a later append): every time,
    the store reads back and its tally is exactly the tally of the inputs its manifest lists."""
    mech = bayesldp.OUE(6, 1.0)
    paths = write_batches(mech, tmp_path, 24, size=3000, seed=1)
    store_dir = tmp_path / "store"
    TallyStore.create(store_dir, mech)
    rng = np.random.default_rng(20261123)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    targets = np.sort(rng.choice(np.arange(1, 23), size=5, replace=False))
    partial = 0
    for target in targets:
        proc = subprocess.Popen(
            [sys.executable, "-c", APPENDER, str(store_dir), *map(str, paths)], env=env
        )
        try:  # reading while it appends: the reader follows its commits
            deadline = time.monotonic() + 120
            while len(TallyStore(store_dir).inputs()) < target and proc.poll() is None:
                assert time.monotonic() < deadline
                time.sleep(0.005)
            time.sleep(float(rng.uniform(0.0, 0.03)))
        finally:  # no appender outlives the test, even when it fails
            proc.send_signal(signal.SIGKILL)
            proc.wait()
        store = TallyStore(store_dir)
        counted = [e["name"] for e in store.inputs()]
        partial += len(counted) < len(paths)  # killed before it could finish
        assert store.tally() == direct_tally(mech, [p for p in paths if str(p) in counted])
    assert partial > 0
    TallyStore(store_dir).append(paths)  # finish: every file exactly once
    assert TallyStore(store_dir).tally() == direct_tally(mech, paths)


def test_a_read_follows_an_append_committed_under_it(tmp_path, monkeypatch):
    """A reader that read CURRENT just before other appends committed (and removed the files of
    the generation it read; an append keeps one previous generation) reads again at the new
    generation; a file missing from the current generation is damage, named as such."""
    mech = bayesldp.GRR(4, 1.0)
    paths = write_batches(mech, tmp_path, 3)
    store = TallyStore.create(tmp_path / "store", mech)
    for path in paths:
        store.append([path])  # generation 3; generation 2 kept, generation 1's files gone
    assert not (tmp_path / "store" / "manifest-1.json").exists()
    stale = iter([1, 3])  # CURRENT as a reader saw it just before, then after, the commits
    monkeypatch.setattr(TallyStore, "_generation", lambda self: next(stale, 3))
    assert [e["name"] for e in store.inputs()] == [str(p) for p in paths]
    stale = iter([1, 3, 3])
    assert store.tally() == direct_tally(mech, paths)
    monkeypatch.setattr(TallyStore, "_generation", lambda self: 1)  # a lost file: no retry
    lost = r"manifest-1\.json is missing.*generation 3 is intact.*printf 3 >"
    with pytest.raises(DamagedStoreError, match=lost):
        store.inputs()


def test_a_store_written_before_checksums_reads_and_appends(tmp_path):
    """A store of the earlier format (no checksums, no state digest, inputs known by SHA-256
    only) reads as before; its inputs are still skipped by their bytes, and new inputs are
    recorded by their rows."""
    import json

    mech = bayesldp.GRR(4, 1.0)
    paths = write_batches(mech, tmp_path, 2)
    store, _ = TallyStore.append_to(tmp_path / "store", paths[:1], mech)
    manifest_path = store.path / "manifest-1.json"
    manifest = json.loads(manifest_path.read_text())
    keys = ("name", "sha256", "reports", "appended_at")
    inputs = [{k: e[k] for k in keys} for e in manifest["inputs"]]
    old = {"mechanism": manifest["mechanism"], "params": manifest["params"], "inputs": inputs}
    manifest_path.write_text(json.dumps(old))
    assert store.tally() == direct_tally(mech, paths[:1])
    records = store.append(paths)
    assert [r["status"] for r in records] == ["already counted", "counted"]
    assert store.tally() == direct_tally(mech, paths)
    assert "content" in store.inputs()[1] and "content" not in store.inputs()[0]
