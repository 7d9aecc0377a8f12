"""Hostile inputs to the tally store and the commands that read report sources (the
durable state).  Each case states its expected outcome: a one-line error of the package's own
type (exit code 2 from the CLI), or the right count.

* racing creators: two ``append`` runs creating one store with different epsilons never count a
  file under the other's settings; the loser exits 2 with one line, no traceback;
* a failed first append (a bad file) leaves no store, so the corrected retry (other settings
  included) succeeds;
* a path that exists is that file, never a glob; progress never reaches stdout;
* a batch appended again under its name (any line ends, BOM, column order, CSV or Parquet, 1
  or 1.0) counts nothing; a file that grew counts only its new reports; other content under a
  counted batch's name is refused; a copy under another name is refused beyond chance;
* a damaged store (CURRENT empty, garbage, missing or naming a missing generation; a manifest
  truncated or altered; a state file truncated, altered or deleted) is a one-line
  DamagedStoreError naming the part and the intact generation to roll back to; the roll-back
  it prints works;
* ``append`` of a missing file, of a directory, or into a STORE that is a file (or a directory
  of other files): one line, exit code 2.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import bayesldp
from bayesldp.errors import DamagedStoreError, InvalidInputError
from bayesldp.workflows import store_files
from bayesldp.workflows.batch_identity import IMPLAUSIBLE, batch_content
from bayesldp.workflows.cli import main
from bayesldp.workflows.dask_tally import report_files, tally_reports
from bayesldp.workflows.report_files import read_table
from bayesldp.workflows.store_batches import default_batch_id
from bayesldp.workflows.tally_store import TallyStore

GRR3 = ["--mechanism", "GRR", "--k", "3"]


def write_reports(path: Path, reports, newline: str = "\n") -> Path:
    text = "report" + newline + "".join(f"{r}{newline}" for r in reports)
    path.write_bytes(text.encode())
    return path


def run_cli(capture, argv):
    """``(exit code, stdout, stderr)`` of ``bayesldp ARGV`` (``capture``: capsys or capfd)."""
    code = main([str(a) for a in argv])
    out, err = capture.readouterr()
    return code, out, err


def one_line_error(code, err, *needles):
    assert code == 2, err
    assert err.count("\n") == 1 and err.startswith("bayesldp: error: "), err
    assert "Traceback" not in err
    for needle in needles:
        assert needle in err, (needle, err)


# ------------------------------------------------------------------ 1. creating a store at once
RACER = """
import sys, time
from pathlib import Path
from bayesldp.workflows.cli import main
go = Path(sys.argv[1])
while not go.exists():  # everything imported: start together, to race for the store
    time.sleep(0.001)
sys.exit(main(sys.argv[2:]))
"""


def race_pairs(tmp_path: Path, pairs: int, seed: int) -> tuple[int, int]:
    """``pairs`` races of two ``append`` runs creating one new store, file a.csv at epsilon 1
    and b.csv at epsilon e_b (2, or 1 in every fifth race: then both must be counted).  Returns
    (races where both created-or-appended at once, races the second run lost)."""
    rng = np.random.default_rng(seed)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    losses = 0
    for i in range(pairs):
        root = tmp_path / f"race{i:02d}"
        root.mkdir()
        a = write_reports(root / "a.csv", rng.integers(0, 3, 50))
        b = write_reports(root / "b.csv", rng.integers(0, 3, 70))
        same = i % 5 == 4
        runs = {a: 1.0, b: 1.0 if same else 2.0}
        go, store = root / "go", root / "store"
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", RACER, str(go), "append", str(store), str(path),
                 *GRR3, "--epsilon", str(eps), "--output", "json"],
                env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            )
            for path, eps in runs.items()
        ]
        time.sleep(1.5 + float(rng.uniform(0, 0.5)))  # both have imported and wait for "go"
        go.touch()
        results = [(p.wait(timeout=120), *p.communicate()) for p in procs]
        for code, _, err in results:
            assert "Traceback" not in err and code in (0, 2), err
            if code == 2:  # lost the race, or (a slow start) found the winner's store made
                lost = "nothing appended" in err or "disagrees with the tally store" in err
                assert err.count("\n") == 1 and lost, err
        stored = TallyStore(store)
        counted = {Path(e["name"]).name for e in stored.inputs()}
        for (path, eps), (code, _, _) in zip(runs.items(), results, strict=True):
            # every counted file was counted under its own run's settings, and only those
            assert (path.name in counted) == (code == 0) == (stored.mechanism.epsilon == eps)
        assert stored.tally().n == sum(50 if n == "a.csv" else 70 for n in counted)
        if same:
            assert counted == {"a.csv", "b.csv"}
        losses += sum(code == 2 for code, _, _ in results)
    return pairs, losses


@pytest.mark.slow
def test_racing_creators_never_mix_settings(tmp_path):
    """40 races of two processes creating one store: the store's epsilon is that of every
    counted file's run; the loser of a different-epsilon race exits 2 with one line."""
    _, losses = race_pairs(tmp_path, 40, seed=4242)
    assert losses == 32


def test_a_failed_first_append_leaves_no_store(tmp_path, capsys):
    """A file of reports outside K = 3 fails the first append: no store appears, and the
    corrected retry (K = 4, another epsilon) creates it with its own settings."""
    wide = write_reports(tmp_path / "wide.csv", [0, 3, 1])
    store = tmp_path / "store"
    code, _, err = run_cli(capsys, ["append", store, wide, *GRR3, "--epsilon", "1"])
    one_line_error(code, err, "wide.csv")
    assert not (store / "CURRENT").exists() and not list(store.glob("manifest-*"))
    code, _, err = run_cli(capsys, ["append", store, wide, "--mechanism", "GRR", "--k", "4",
                                      "--epsilon", "2", "--output", "json"])  # fmt: skip
    assert code == 0, err
    assert TallyStore(store).mechanism == bayesldp.GRR(4, 2.0) and TallyStore(store).tally().n == 3


def test_a_creation_killed_before_its_manifest_leaves_no_store(tmp_path):
    """What a kill during creation can leave before the manifest is in place (the lock, a
    temporary file, a state file) is not a store, and the next append creates one there."""
    store = tmp_path / "store"
    store.mkdir()
    for name in (".bayesldp.lock", "state-1.npz.tmp", "state-1.npz"):
        (store / name).write_bytes(b"partial")
    a = write_reports(tmp_path / "a.csv", [0, 1, 2, 1])
    created, records = TallyStore.append_to(store, [a], bayesldp.GRR(3, 1.0))
    assert records[0]["status"] == "counted" and created.tally().n == 4


def test_a_writer_waits_for_the_lock_then_names_its_holder(tmp_path):
    mech = bayesldp.GRR(3, 1.0)
    a = write_reports(tmp_path / "a.csv", [0, 1, 2])
    store, _ = TallyStore.append_to(tmp_path / "store", [a], mech)
    b = write_reports(tmp_path / "b.csv", [2, 2])
    with store_files.store_lock(store.path, 0):  # another writer holds it
        with pytest.raises(InvalidInputError, match=rf"in use by process {os.getpid()}"):
            TallyStore(store.path, wait=0.2).append([b])
        with pytest.raises(InvalidInputError, match="in use by process"):
            TallyStore.append_to(store.path, [b], bayesldp.GRR(3, 2.0), wait=0.2)
    assert TallyStore(store.path).tally().n == 3
    with pytest.raises(InvalidInputError, match=r"holds reports of GRR\(k=3, epsilon=1\)"):
        TallyStore.append_to(store.path, [b], bayesldp.GRR(3, 2.0))


# ------------------------------------------------------------------ 2. paths and stdout
def test_a_path_that_exists_is_that_file_never_a_glob(tmp_path, capsys):
    """'survey[2024].csv' holds 4 reports; survey0.csv and survey2.csv (which its brackets would
    match as a glob) hold 9 and 7: the estimate counts 4.  Only a path that does not exist is a
    glob."""
    target = write_reports(tmp_path / "survey[2024].csv", [0, 1, 2, 2])
    write_reports(tmp_path / "survey0.csv", [0] * 9)
    write_reports(tmp_path / "survey2.csv", [1] * 7)
    assert report_files(target) == [target] and report_files(str(target)) == [target]
    code, out, err = run_cli(capsys, ["estimate", target, *GRR3, "--epsilon", "1",
                                      "--output", "json"])  # fmt: skip
    assert code == 0, err
    assert json.loads(out)["reports"] == 4
    pattern = tmp_path / "survey[02].csv"  # no such file: a glob of the two others
    assert report_files(pattern) == [tmp_path / "survey0.csv", tmp_path / "survey2.csv"]
    with pytest.raises(InvalidInputError, match=r"no such file .*survey\[13\]\.csv, and as a glob"):
        report_files(tmp_path / "survey[13].csv")
    store = tmp_path / "store"
    code, out, err = run_cli(capsys, ["append", store, target, *GRR3, "--epsilon", "1",
                                      "--output", "json"])  # fmt: skip
    assert code == 0 and TallyStore(store).tally().n == 4


@pytest.mark.slow
def test_progress_never_reaches_stdout(tmp_path, capfd):
    """A directory tallied on a LocalCluster: ``--output json`` on stdout parses as JSON, and a
    progress bar asked for in Python goes to stderr."""
    for i, reports in enumerate(([0, 1, 2] * 30, [2, 2, 1] * 20)):
        write_reports(tmp_path / f"part{i}.csv", reports)
    code, out, err = run_cli(capfd, ["estimate", tmp_path, *GRR3, "--epsilon", "1",
                                     "--output", "json"])  # fmt: skip
    assert code == 0, err
    assert json.loads(out)["reports"] == 150
    tally = tally_reports(tmp_path, bayesldp.GRR(3, 1.0), progress=True)
    out, err = capfd.readouterr()
    assert tally.n == 150 and out == ""


# ------------------------------------------------------------------ 3. never counted twice
def encode_csv(path: Path, frame: pd.DataFrame, newline: str, bom: bool, as_float: bool,
               shuffle: bool, final_newline: bool) -> Path:  # fmt: skip
    """``frame`` saved as CSV one of many ways that leave its reports unchanged."""
    frame = frame[frame.columns[::-1]] if shuffle else frame
    if as_float:
        frame = frame.astype(float)
    text = frame.to_csv(index=False, lineterminator=newline)
    if not final_newline:
        text = text[: -len(newline)]
    path.write_bytes((b"\xef\xbb\xbf" if bom else b"") + text.encode())
    return path


ENCODINGS = st.fixed_dictionaries({
    "newline": st.sampled_from(["\n", "\r\n", "\r"]),
    "bom": st.booleans(),
    "as_float": st.booleans(),
    "shuffle": st.booleans(),
    "final_newline": st.booleans(),
})  # fmt: skip


@settings(max_examples=40, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])  # fmt: skip
@given(
    mech=st.sampled_from([bayesldp.GRR(4, 1.0), bayesldp.OUE(3, 1.0), bayesldp.OLH(5, 1.0)]),
    size=st.integers(1, 40),
    grown=st.integers(0, 25),
    first=ENCODINGS,
    again=ENCODINGS,
    parquet=st.booleans(),
    same_name=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_appending_a_batch_again_never_counts_a_report_twice(
    mech, size, grown, first, again, parquet, same_name, seed
):
    """A batch appended, then appended again re-encoded (line ends, BOM, 1 as 1.0, column
    order, CSV or Parquet) after ``grown`` reports were added to its end.  Under its own batch
    name (its path, the suffix aside): n grows by exactly ``grown``; a third append of the same
    changes nothing.  Under another name it is a new batch: refused as a copy where its rows
    repeat the first's beyond chance (then its batch name counts exactly ``grown``), else
    counted whole, and only where the chance of the repeat is plausible."""
    first = {**first, "as_float": False}  # the readers refuse 1.0 for an integer report
    again = {**again, "as_float": again["as_float"] and not grown}  # same reports: recognised
    rng = np.random.default_rng(seed)
    frame = mech.reports_to_frame(mech.perturb(rng.integers(0, mech.k, size + grown), rng=rng))
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        store = TallyStore.create(tmp / "store", mech)
        day = encode_csv(tmp / "day.csv", frame.iloc[:size], **first)
        store.append([day])
        assert store.tally().n == size
        name = "day" if same_name else "copy"
        if parquet:
            path = tmp / f"{name}.parquet"
            frame.to_parquet(path)
        else:
            path = encode_csv(tmp / f"{name}.csv", frame, **again)
        batch = {}
        if not same_name:
            try:
                records = store.append([path])
            except InvalidInputError as exc:  # a copy; or, counted as new, 1.0 for a report
                copy = "--batch-id" in str(exc) and "--distinct" in str(exc)
                assert copy or (again["as_float"] and "integers" in str(exc)), str(exc)
                assert store.tally().n == size
                batch = {"batch_id": default_batch_id(day)}
            else:
                assert records[0]["status"] == "counted"
                assert store.tally().n == 2 * size + grown
                content = batch_content(read_table(path))
                assert math.exp(content.log_chance(size)) >= IMPLAUSIBLE / 2  # a ladder length
                return
        records = store.append([path], **batch)
        assert store.tally().n == size + grown
        assert records[0]["reports"] == grown
        assert records[0]["status"] == ("new rows counted" if grown else "already counted")
        assert store.append([path], **batch)[0]["status"] == "already counted"
        assert store.tally().n == size + grown


def test_other_content_under_a_counted_batch_is_refused(tmp_path, capsys):
    """day.csv counted with 5 reports, then rewritten with 3 others (not an extension): the
    append is refused naming the file, nothing stored; under another name it is counted."""
    day = write_reports(tmp_path / "day.csv", [0, 1, 2, 0, 1])
    store = tmp_path / "store"
    assert run_cli(capsys, ["append", store, day, *GRR3, "--epsilon", "1"])[0] == 0
    write_reports(day, [2, 2, 2])
    code, _, err = run_cli(capsys, ["append", store, day])
    one_line_error(code, err, "day.csv", "refused", "under another batch name")
    assert TallyStore(store).tally().n == 5
    other = tmp_path / "day2.csv"
    other.write_bytes(day.read_bytes())
    code, _, err = run_cli(capsys, ["append", store, other, "--output", "json"])
    assert code == 0 and TallyStore(store).tally().n == 8


def test_a_grown_log_reports_what_it_counted(tmp_path, capsys):
    """400 lines appended, then the same file with 2 more lines: n = 402, and the row says only
    the 2 new reports were counted; the same reports re-saved with CRLF line ends under another
    name are refused as a copy, and under the log's batch name count nothing."""
    rng = np.random.default_rng(7)
    reports = rng.integers(0, 3, 402)
    log = write_reports(tmp_path / "log.csv", reports[:400])
    store = tmp_path / "store"
    assert run_cli(capsys, ["append", store, log, *GRR3, "--epsilon", "1"])[0] == 0
    write_reports(log, reports)
    code, out, _ = run_cli(capsys, ["append", store, log, "--output", "json"])
    row = json.loads(out)["rows"][0]
    assert code == 0 and TallyStore(store).tally().n == 402
    assert row["status"] == "new rows counted" and row["reports"] == 2
    assert "first 400 rows were counted before" in row["note"]
    crlf = write_reports(tmp_path / "log_crlf.csv", reports, newline="\r\n")
    code, _, err = run_cli(capsys, ["append", store, crlf])
    one_line_error(code, err, "first 402 rows repeat", "--batch-id")
    code, out, _ = run_cli(capsys, ["append", store, crlf, "--batch-id", default_batch_id(log),
                                    "--output", "json"])  # fmt: skip
    assert json.loads(out)["rows"][0]["status"] == "already counted"
    assert TallyStore(store).tally().n == 402


# ------------------------------------------------------------------ 5. a damaged store
def three_generations(tmp_path: Path) -> tuple[Path, list[Path]]:
    """A store of 3 appends (generation 3 in force, generation 2 kept) of 10, 20, 30 reports."""
    rng = np.random.default_rng(5)
    files = [write_reports(tmp_path / f"d{i}.csv", rng.integers(0, 3, 10 * (i + 1)))
             for i in range(3)]  # fmt: skip
    store = tmp_path / "store"
    for path in files:
        TallyStore.append_to(store, [path], bayesldp.GRR(3, 1.0))
    assert sorted(p.name for p in store.iterdir() if not p.name.startswith(".")) == [
        "CURRENT", "manifest-2.json", "manifest-3.json", "state-2.npz", "state-3.npz"]
    return store, files


def flip_a_bit(path: Path, at: float = 0.5) -> None:
    data = bytearray(path.read_bytes())
    data[int(len(data) * at)] ^= 0x04
    path.write_bytes(bytes(data))


def truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


DAMAGE = {  # what is done to the store: (the part named, the generation to roll back to)
    "CURRENT emptied": (lambda s: (s / "CURRENT").write_text(""), "CURRENT empty", 3),
    "CURRENT garbage": (lambda s: (s / "CURRENT").write_bytes(b"\x00zz"), "CURRENT holds", 3),
    "CURRENT deleted": (lambda s: (s / "CURRENT").unlink(), "CURRENT is missing", 3),
    "CURRENT names a missing generation": (
        lambda s: (s / "CURRENT").write_text("9"), "manifest-9.json is missing", 3),
    "manifest truncated": (lambda s: truncate(s / "manifest-3.json"),
                           "manifest-3.json is damaged: not valid JSON", 2),
    "manifest altered": (  # epsilon 1.0 -> 1.5: valid JSON, wrong content
        lambda s: (s / "manifest-3.json").write_text(
            (s / "manifest-3.json").read_text().replace('"epsilon": 1.0', '"epsilon": 1.5')),
        "its checksum does not match", 2),
    "manifest deleted": (lambda s: (s / "manifest-3.json").unlink(),
                         "manifest-3.json is missing", 2),
    "state truncated": (lambda s: truncate(s / "state-3.npz"), "state-3.npz (the tally) is", 2),
    "state bit-flipped": (lambda s: flip_a_bit(s / "state-3.npz"), "its SHA-256 differs", 2),
    "state deleted": (lambda s: (s / "state-3.npz").unlink(), "state-3.npz is missing", 2),
}  # fmt: skip


@pytest.mark.parametrize("case", list(DAMAGE))
def test_a_damaged_store_says_which_part_and_how_to_roll_back(tmp_path, capsys, case):
    """Each damage: ``estimate`` and ``append`` exit 2 with one line naming the part and the
    intact generation; the printed roll-back gives a store that reads (and a generation 2
    roll-back loses d2.csv, which appends again)."""
    store, files = three_generations(tmp_path)
    damage, part, intact = DAMAGE[case]
    damage(store)
    with pytest.raises(DamagedStoreError, match="is damaged"):
        TallyStore(store).tally()
    code, out, err = run_cli(capsys, ["estimate", store, "--output", "json"])
    one_line_error(code, err, "is damaged", part, f"generation {intact} is intact",
                   f"printf {intact} > {store / 'CURRENT'}")  # fmt: skip
    assert out == ""
    code, _, err = run_cli(capsys, ["append", store, files[2]])
    one_line_error(code, err, "is damaged", part)
    (store / "CURRENT").write_text(str(intact))  # the roll-back the message gives
    assert TallyStore(store).tally().n == (60 if intact == 3 else 30)
    code, out, err = run_cli(capsys, ["append", store, *files, "--output", "json"])
    assert code == 0, err
    assert TallyStore(store).tally().n == 60


def test_a_store_with_no_intact_generation_says_so(tmp_path, capsys):
    mech = bayesldp.GRR(3, 1.0)
    a = write_reports(tmp_path / "a.csv", [0, 1])
    store, _ = TallyStore.append_to(tmp_path / "store", [a], mech)
    truncate(store.path / "state-1.npz")
    code, _, err = run_cli(capsys, ["estimate", store.path])
    one_line_error(code, err, "state-1.npz", "no other intact generation", "cannot be rolled")


@pytest.mark.slow
def test_a_write_that_fails_leaves_the_store_as_it_was(tmp_path):
    """``append`` under a 600-byte file-size limit (the state file and manifest need more): exit
    2, one line saying the store is unchanged at generation 1, no temporary file left; the same
    append without the limit then counts the file."""
    import resource

    a = write_reports(tmp_path / "a.csv", [0, 1, 2])
    store, _ = TallyStore.append_to(tmp_path / "store", [a], bayesldp.GRR(3, 1.0))
    b = write_reports(tmp_path / "b.csv", [2, 1, 1, 0])
    before = sorted(p.name for p in store.path.iterdir())

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (600, 600))

    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    argv = [sys.executable, "-m", "bayesldp.workflows.cli", "append", str(store.path), str(b)]
    run = subprocess.run(argv, env=env, capture_output=True, text=True, preexec_fn=limit,
                         timeout=120)  # fmt: skip
    one_line_error(run.returncode, run.stderr, "cannot write", "File too large",
                   "unchanged at generation 1")  # fmt: skip
    assert sorted(p.name for p in store.path.iterdir()) == before
    assert TallyStore(store.path).tally().n == 3
    assert subprocess.run(argv, env=env, capture_output=True, timeout=120).returncode == 0
    assert TallyStore(store.path).tally().n == 7


# ------------------------------------------------------------------ 6. bad paths to append
@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("missing file", "files: no such file"),
        ("a directory", "is a directory, not a report file"),
        ("STORE is a file", "is a file, not a tally store directory"),
        ("STORE under a file", "which is a file, not a tally store directory"),
        ("STORE holds other files", "is a directory holding other files (a.csv)"),
    ],
)
def test_append_bad_paths_one_line(tmp_path, capsys, case, expected):
    a = write_reports(tmp_path / "a.csv", [0, 1, 2])
    store, files = tmp_path / "store", [a]
    if case == "missing file":
        files = [a, tmp_path / "nope.csv"]
    elif case == "a directory":
        files = [tmp_path]
    elif case == "STORE is a file":
        store = a
    elif case == "STORE under a file":
        store = a / "store"
    else:
        store = tmp_path
    code, _, err = run_cli(capsys, ["append", store, *files, *GRR3, "--epsilon", "1"])
    one_line_error(code, err, expected)
    assert not (tmp_path / "store" / "CURRENT").exists() and a.read_text() == "report\n0\n1\n2\n"
