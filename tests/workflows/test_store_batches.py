"""Report files and the tally store at their edges: which batch a file is, which options a
store was made with, how a file's columns are read, and what a directory holds.

Each test is one case of a reliability sweep (numbered as in the closing table of the work):

1. an older snapshot of a log under another name is never counted after the newer one;
2. distinct batches whose rows happen to match are counted (one-report files, small count
   files, a file that starts with a small one), while a copy is refused with the option that
   counts it anyway;
3. ``--save-posterior`` never replaces the reports, a tally store's file or any non-netCDF file;
6. a directory's link beside its target, links to missing files and compressed files are
   errors, never counted twice or skipped;
7. every mechanism option given beside a store must agree with it;
8. K-column report files (unary encodings) are read by their header, not by position;
9. files of rounds, attributes or repeated users are never pooled into one tally;
10. a repeated column name is an error.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import bayesldp
from bayesldp.errors import InvalidInputError
from bayesldp.workflows.batch_identity import batch_content
from bayesldp.workflows.dask_tally import report_files, tally_reports
from bayesldp.workflows.report_files import read_table
from bayesldp.workflows.store_batches import default_batch_id
from bayesldp.workflows.tally_store import TallyStore
from tests.workflows.test_tally_store_hostile import one_line_error, run_cli, write_reports

GRR3 = ["--mechanism", "GRR", "--k", "3", "--epsilon", "1"]


def n_of(store: Path) -> int:
    return TallyStore(store).tally().n


@pytest.fixture
def log_rows():
    return np.random.default_rng(3).integers(0, 3, 200)


# ------------------------------------------------------------------ 1. snapshots of one log
def test_an_older_snapshot_under_another_name_is_refused(tmp_path, capsys, log_rows):
    """wed.csv (200 rows) then tue.csv (its first 150 rows): 200 reports, not 350; tue is
    refused naming wed's batch and both options."""
    wed = write_reports(tmp_path / "wed.csv", log_rows)
    tue = write_reports(tmp_path / "tue.csv", log_rows[:150])
    store = tmp_path / "store"
    assert run_cli(capsys, ["append", store, wed, *GRR3])[0] == 0
    code, _, err = run_cli(capsys, ["append", store, tue])
    one_line_error(code, err, "tue.csv", "first 128 rows repeat", "wed", "--batch-id",
                   "--distinct", "nothing of this call was stored")  # fmt: skip
    assert n_of(store) == 200


def test_snapshots_of_one_log_under_one_batch_id(tmp_path, capsys, log_rows):
    """mon (100), wed (200), tue (150) of one log: with --batch-id, 100 then 100 new rows, and
    the older tue refused: 200.  Without it, wed is refused as a copy of mon's rows, and the
    command it prints (--batch-id mon's batch) counts only its 100 new rows."""
    mon = write_reports(tmp_path / "mon.csv", log_rows[:100])
    wed = write_reports(tmp_path / "wed.csv", log_rows)
    tue = write_reports(tmp_path / "tue.csv", log_rows[:150])
    store = tmp_path / "store"
    assert run_cli(capsys, ["append", store, mon, *GRR3, "--batch-id", "log"])[0] == 0
    code, out, _ = run_cli(capsys, ["append", store, wed, "--batch-id", "log", "--output",
                                    "json"])  # fmt: skip
    row = json.loads(out)["rows"][0]
    assert code == 0 and row["status"] == "new rows counted" and row["reports"] == 100
    code, _, err = run_cli(capsys, ["append", store, tue, "--batch-id", "log"])
    one_line_error(code, err, "batch 'log' was counted with 200 rows", "an older copy")
    assert n_of(store) == 200

    other = tmp_path / "other"
    assert run_cli(capsys, ["append", other, mon, *GRR3])[0] == 0
    code, _, err = run_cli(capsys, ["append", other, wed])
    mon_batch = default_batch_id(mon)
    one_line_error(code, err, "first 100 rows repeat", repr(mon_batch))
    assert n_of(other) == 100
    code, out, _ = run_cli(capsys, ["append", other, wed, "--batch-id", mon_batch])
    assert code == 0 and n_of(other) == 200


# ------------------------------------------------------------------ 2. batches that match by chance
def test_one_report_files_that_match_are_all_counted(tmp_path, capsys):
    """Five one-report user files, three of them identical: n = 5 in the store, as in
    ``estimate users/``."""
    users = tmp_path / "users"
    users.mkdir()
    for i, report in enumerate([1, 1, 1, 0, 2]):
        write_reports(users / f"user{i}.csv", [report])
    store = tmp_path / "store"
    code, out, _ = run_cli(capsys, ["append", store, *sorted(users.iterdir()), *GRR3,
                                    "--output", "json"])  # fmt: skip
    assert code == 0 and [r["status"] for r in json.loads(out)["rows"]] == ["counted"] * 5
    assert n_of(store) == 5
    code, out, _ = run_cli(capsys, ["estimate", users, *GRR3, "--scheduler", "synchronous",
                                    "--output", "json"])  # fmt: skip
    assert code == 0 and json.loads(out)["reports"] == 5


def test_identical_small_count_files_are_two_batches(tmp_path, capsys):
    """Monday's and Tuesday's count files hold the same counts (5, 3, 2): both counted (the
    chance of equal counts of 10 reports is 0.085); a new file that starts with an earlier
    file's 2 rows is counted whole."""
    text = "report,count\n0,5\n1,3\n2,2\n"
    mon, tue = tmp_path / "mon.csv", tmp_path / "tue.csv"
    mon.write_text(text)
    tue.write_text(text)
    store = tmp_path / "store"
    assert run_cli(capsys, ["append", store, mon, tue, *GRR3])[0] == 0
    assert n_of(store) == 20
    a = write_reports(tmp_path / "a.csv", [2, 0])
    b = write_reports(tmp_path / "b.csv", [2, 0, 1, 1])
    assert run_cli(capsys, ["append", store, a, b])[0] == 0
    assert n_of(store) == 26


def test_a_large_copy_is_refused_and_distinct_counts_it(tmp_path, capsys):
    """Identical count files of 14,500 reports over 10 categories: the second is refused (equal
    counts of that many reports have a chance of about 5e-18) and --distinct counts it.  Over
    3 categories the same chance needs about 1e9 reports: equal counts of 30,000 are counted."""
    text = "report,count\n" + "".join(f"{j},{1000 + 100 * j}\n" for j in range(10))
    mon, tue = tmp_path / "mon.csv", tmp_path / "tue.csv"
    mon.write_text(text)
    tue.write_text(text)
    store = tmp_path / "store"
    grr10 = ["--mechanism", "GRR", "--k", "10", "--epsilon", "1"]
    assert run_cli(capsys, ["append", store, mon, *grr10])[0] == 0
    code, _, err = run_cli(capsys, ["append", store, tue])
    one_line_error(code, err, "tue.csv", "first 10 rows repeat", "chance of 5.3e-18", "--distinct")
    assert n_of(store) == 14_500
    assert run_cli(capsys, ["append", store, tue, "--distinct"])[0] == 0
    assert n_of(store) == 29_000
    text = "report,count\n0,10000\n1,12000\n2,8000\n"
    mon.write_text(text)
    tue.write_text(text)
    assert run_cli(capsys, ["append", tmp_path / "three", mon, tue, *GRR3])[0] == 0
    assert n_of(tmp_path / "three") == 60_000


@pytest.mark.parametrize(("text", "rows", "expected"), [
    ("report\n1\n", 1, 0.0),  # one report: certain
    ("report\n0\n1\n0\n1\n", 4, 4 * math.log(0.5)),  # two values, twice each
    ("report,count\n0,5\n1,3\n2,2\n", 3,  # the multinomial at its own proportions
     math.log(2520 * 0.5**5 * 0.3**3 * 0.2**2)),
])  # fmt: skip
def test_the_chance_of_a_repeat(tmp_path, text, rows, expected):
    path = tmp_path / "r.csv"
    path.write_text(text)
    assert batch_content(read_table(path)).log_chance(rows) == pytest.approx(expected, rel=1e-12)


# ------------------------------------------------------------------ 3. --save-posterior
def test_save_posterior_never_replaces_reports_or_a_store(tmp_path, capsys):
    reports = write_reports(tmp_path / "r.csv", [0, 1, 2, 2, 1])
    before = reports.read_bytes()
    code, _, err = run_cli(capsys, ["estimate", reports, *GRR3, "--method", "posterior",
                                    "--save-posterior", reports, "--quiet"])  # fmt: skip
    one_line_error(code, err, "is not a netCDF file", "new file name")
    assert reports.read_bytes() == before
    store = tmp_path / "store"
    assert run_cli(capsys, ["append", store, reports, *GRR3])[0] == 0
    current = (store / "CURRENT").read_bytes()
    code, _, err = run_cli(capsys, ["estimate", store, "--method", "posterior",
                                    "--save-posterior", store / "CURRENT", "--quiet"])  # fmt: skip
    one_line_error(code, err, "CURRENT", "is not a netCDF file")
    assert (store / "CURRENT").read_bytes() == current and n_of(store) == 5


# ------------------------------------------------------------------ 6. what a directory holds
def test_a_directory_with_a_link_beside_its_target_is_refused(tmp_path, capsys):
    folder = tmp_path / "d"
    folder.mkdir()
    write_reports(folder / "a.csv", [0, 1, 2])
    os.symlink(folder / "a.csv", folder / "latest.csv")
    code, _, err = run_cli(capsys, ["estimate", folder, *GRR3, "--scheduler", "synchronous"])
    one_line_error(code, err, "are the same file", "counted twice")


@pytest.mark.parametrize("kind", ["dangling", "gzip"])
def test_a_directory_never_skips_a_report_file_quietly(tmp_path, kind):
    folder = tmp_path / "d"
    folder.mkdir()
    write_reports(folder / "a.csv", [0, 1, 2])
    if kind == "dangling":
        os.symlink(tmp_path / "unmounted" / "b.csv", folder / "b.csv")
        needle = "links to missing files (b.csv)"
    else:
        (folder / "b.csv.gz").write_bytes(b"\x1f\x8b")
        needle = "compressed report files (b.csv.gz)"
    with pytest.raises(InvalidInputError, match=needle.replace("(", r"\(").replace(")", r"\)")):
        report_files(folder)


def test_a_compressed_file_given_alone_is_refused(tmp_path):
    path = tmp_path / "r.csv.gz"
    path.write_bytes(b"\x1f\x8b\x08")
    with pytest.raises(InvalidInputError, match="is compressed"):
        read_table(path)


# ------------------------------------------------------------------ 7. a store's options
@pytest.mark.parametrize(("create", "other"), [
    (["--mechanism", "RRRR", "--k", "6", "--epsilon", "1", "--subset", "0", "1"],
     ["--subset", "3", "4", "5"]),
    (["--mechanism", "OLH", "--k", "6", "--epsilon", "1", "--g", "7"], ["--g", "3"]),
    (["--mechanism", "LGRR", "--k", "6", "--epsilon", "1", "--eps-perm", "2"],
     ["--eps-perm", "4"]),
])  # fmt: skip
def test_every_option_beside_a_store_must_agree(tmp_path, capsys, create, other):
    mech = bayesldp.mechanisms.make_mechanism(
        create[1], 6, 1.0, **{"RRRR": {"subset": [0, 1]}, "OLH": {"g": 7},
                              "LGRR": {"eps_perm": 2.0}}[create[1]])  # fmt: skip
    path = tmp_path / "r.csv"
    reports = mech.perturb(np.arange(30) % 6, rng=0)
    mech.reports_to_frame(reports).to_csv(path, index=False)
    store = tmp_path / "store"
    assert run_cli(capsys, ["append", store, path, *create])[0] == 0
    flag = other[0]
    for command in (["append", store, path, *other], ["estimate", store, *other]):
        code, _, err = run_cli(capsys, command)
        one_line_error(code, err, f"{flag}:", "disagrees with the tally store")
    code, _, err = run_cli(capsys, ["estimate", store, "--num-bits", "8"])
    one_line_error(code, err, "--num-bits", "takes no --num-bits")
    assert run_cli(capsys, ["estimate", store, *create[6:]])[0] == 0


# ------------------------------------------------------------------ 8. columns by header
def test_unary_reports_are_read_by_their_header(tmp_path):
    """A SUE file headed 4,3,2,1,0 tallies as the same reports headed 0..4; the store's batch
    identity (columns by name) and the tally agree."""
    mech = bayesldp.SUE(5, 1.0)
    frame = mech.reports_to_frame(mech.perturb(np.repeat(np.arange(5), [40, 5, 5, 5, 5]), rng=1))
    ordered, reversed_ = tmp_path / "ordered.csv", tmp_path / "reversed.csv"
    frame.to_csv(ordered, index=False)
    frame[frame.columns[::-1]].to_csv(reversed_, index=False)
    direct = mech.tally_frame(read_table(ordered))
    assert mech.tally_frame(read_table(reversed_)) == direct
    store = TallyStore.create(tmp_path / "store", mech)
    store.append([ordered])
    records = store.append([reversed_], batch_id=default_batch_id(ordered))
    assert records[0]["status"] == "already counted" and store.tally() == direct


def test_unary_columns_with_other_names_are_refused(tmp_path):
    path = tmp_path / "r.csv"
    pd.DataFrame(np.eye(3, dtype=int), columns=["a", "b", "c"]).to_csv(path, index=False)
    with pytest.raises(InvalidInputError, match="must name its k = 3 columns 0 to 2"):
        bayesldp.OUE(3, 1.0).tally_frame(read_table(path), path)


# ------------------------------------------------------------------ 9. never pooled
def rounds_frame(column: str = "round") -> pd.DataFrame:
    rng = np.random.default_rng(0)
    users = np.tile(np.arange(300), 3)
    return pd.DataFrame({"user": users, column: np.repeat([0, 1, 2], 300),
                         "report": rng.integers(0, 3, 900)})  # fmt: skip


@pytest.mark.parametrize("column", ["round", "Round", "attribute"])
def test_files_of_rounds_or_attributes_are_never_one_tally(tmp_path, capsys, column):
    folder = tmp_path / "d"
    folder.mkdir()
    rounds_frame(column).to_csv(folder / "panel.csv", index=False)
    with pytest.raises(InvalidInputError, match=f"has a '{column}' column"):
        tally_reports(folder, bayesldp.GRR(3, 1.0), scheduler="synchronous")
    code, _, err = run_cli(capsys, ["append", tmp_path / "store", folder / "panel.csv", *GRR3])
    one_line_error(code, err, f"has a '{column}' column", "not one tally")
    assert not (tmp_path / "store" / "CURRENT").exists()


def test_users_who_report_twice_are_never_pooled(tmp_path, capsys):
    frame = rounds_frame().drop(columns="round")
    path = tmp_path / "panel.csv"
    frame.to_csv(path, index=False)
    code, _, err = run_cli(capsys, ["append", tmp_path / "store", path, *GRR3])
    one_line_error(code, err, "user 0 has more than one report (CSV line 2)",
                   "900 reports come from users")  # fmt: skip


# ------------------------------------------------------------------ 10. a repeated column name
@pytest.mark.parametrize("header", ["report,report", "report,count,report"])
def test_a_repeated_column_name_is_refused(tmp_path, capsys, header):
    path = tmp_path / "r.csv"
    width = header.count(",") + 1
    path.write_text(header + "\n" + ",".join(["1"] * width) + "\n")
    code, _, err = run_cli(capsys, ["estimate", path, *GRR3])
    one_line_error(code, err, "names the column(s) 'report' more than once")

