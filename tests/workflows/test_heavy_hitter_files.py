"""``bayesldp estimate --mechanism PEM`` (and TreeHist) on a report file of heavy hitters."""

import csv
import io
import json

import numpy as np
import pytest

from bayesldp.heavy_hitters import PEM, SFP, PositionalEncoder, TreeHist
from bayesldp.workflows.cli import main

WORDS = np.array(["cat", "dog", "emu"] + [f"w{i}" for i in range(500)], dtype=object)
SHARES = np.r_[[40.0, 25.0, 15.0], np.ones(500) / 25]


@pytest.fixture(scope="module")
def people():
    rng = np.random.default_rng(0)
    return rng.choice(WORDS, 20_000, p=SHARES / SHARES.sum())


def write(reports, path):
    """The report file as users are told to write it: stamped with the public parameters."""
    return str(reports.to_file(path))


def write_plain(reports, path):
    """A report file without the stamp (pandas' own CSV of ``to_frame``): read on trust."""
    reports.to_frame().to_csv(path, index=False)
    return str(path)


def refused_in_one_line(capsys, argv, message):
    assert main(argv) == 2, (argv, message)
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], (message, err)
    return err[0]


def test_pem_file_gives_the_found_items_as_identify_does(people, tmp_path, capsys):
    pem = PEM(4.0, 3, bits=16, eta=4, key="survey")
    reports = pem.perturb(people, rng=1)
    path = write(reports, tmp_path / "pem.csv")
    argv = ["estimate", path, "--mechanism", "PEM", "--epsilon", "4", "--k", "3", "--bits", "16",
            "--key", "survey", "--candidates", "cat", "dog", "emu", "--output", "csv"]  # fmt: skip
    assert main(argv) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    found = pem.identify(reports)
    assert [r["item"] for r in rows] == pem.encoder.decode(found.codes, ["cat", "dog", "emu"])
    assert sorted(r["item"] for r in rows) == ["cat", "dog", "emu"]
    np.testing.assert_allclose([float(r["estimate"]) for r in rows], found.frequencies)
    assert [int(r["code"], 16) for r in rows] == [int(c) for c in found.codes]


def test_treehist_file_and_posterior(people, tmp_path, capsys):
    tree = TreeHist(4.0, bits=16, eta=2)
    path = write(tree.perturb(people, rng=2), tmp_path / "tree.csv")
    argv = ["estimate", path, "--mechanism", "treehist", "--epsilon", "4", "--bits", "16",
            "--eta", "2", "--candidates", *WORDS[:10], "--method", "posterior",
            "--quiet", "--output", "json"]  # fmt: skip
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    rows = out["rows"]
    assert out["mechanism"] == "TreeHist" and rows[-1]["item"] == "other"
    assert {r["item"] for r in rows[:3]} == {"cat", "dog", "emu"}
    for r in rows:
        assert r["lower_5"] <= r["estimate"] <= r["upper_95"]
    assert all(r["prob_above_0.01"] == 1.0 for r in rows[:3])


def test_mismatched_or_bad_input_is_refused_in_one_line(people, tmp_path, capsys):
    pem = PEM(4.0, 3, bits=16, eta=4)
    path = write_plain(pem.perturb(people[:2000], rng=3), tmp_path / "pem.csv")
    base = ["estimate", path, "--mechanism", "PEM", "--epsilon", "4"]
    cases = [
        (["--k", "3", "--bits", "16", "--method", "norm_sub"], "--method: PEM gives 'oracle'"),
        (["--bits", "16"], "--k: required with --mechanism PEM"),
        (["--k", "3"], "group"),  # bits 24: 5 rounds, but the file's groups are of 4
        (["--k", "3", "--bits", "16", "--save-posterior", "x.nc"], "--save-posterior: only"),
    ]
    for extra, message in cases:
        assert main([*base, *extra]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and message in err[0], (extra, err)
    (tmp_path / "bad.csv").write_text("group,a,b\n0,1,2\n")
    assert main(["estimate", str(tmp_path / "bad.csv"), "--mechanism", "PEM", "--epsilon", "4",
                 "--k", "3"]) == 2  # fmt: skip
    assert "lacks column(s) y" in capsys.readouterr().err


def test_pem_file_with_a_positional_code_names_the_items_itself(tmp_path, capsys):
    """cat, dog, emu (shares 0.4, 0.25, 0.15) and 500 other 3-letter items (0.0004 each);
    20,000 users, eps 4, 15-bit positional codes: 4 rounds of 5,000 users (OLH sd about 0.004),
    so the three lead every other prefix by some 30 sd."""
    letters = "abcdefghijklmnopqrstuvwxyz"
    rng = np.random.default_rng(6)
    tail = rng.choice(26**3, 600, replace=False)
    words = ["".join(letters[d] for d in (x // 676, x // 26 % 26, x % 26)) for x in tail.tolist()]
    others = [w for w in words if w not in ("cat", "dog", "emu")][:500]
    items = np.array(["cat", "dog", "emu", *others], dtype=object)
    people = rng.choice(items, 20_000, p=SHARES / SHARES.sum())
    pem = PEM(4.0, 3, encoder=PositionalEncoder(letters, 3))
    reports = pem.perturb(people, rng=1)
    path = write(reports, tmp_path / "pem.csv")
    base = ["estimate", path, "--mechanism", "PEM", "--epsilon", "4", "--k", "3"]
    assert main([*base, "--alphabet", letters, "--length", "3", "--output", "csv"]) == 0
    out = capsys.readouterr().out
    rows = list(csv.DictReader(io.StringIO(out)))
    found = pem.identify(reports)
    assert [r["item"] for r in rows] == pem.encoder.decode(found.codes)
    assert sorted(r["item"] for r in rows) == ["cat", "dog", "emu"]
    assert "--candidates" not in out
    cases = [
        (["--alphabet", letters], "--length: needed with --alphabet"),
        (["--length", "3"], "--alphabet: needed with --length"),
        (["--alphabet", letters, "--length", "3", "--key", "k"], "--key: the keyed hash's"),
    ]
    for extra, message in cases:
        assert main([*base, *extra]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and message in err[0], (extra, err)


# SFP: 20,000 users, eps 4, m = 256.  Measured power of the search (cat, dog and emu all
# found by SFP.identify on these people, seeds 0..199, holdout 0 and 0.1): 200 of 200 each.
SFP_OPTIONS = {"max_length": 4, "m": 256}
SFP_ARGS = ["--mechanism", "SFP", "--epsilon", "4", "--k", "3", "--max-length", "4", "--m", "256"]


def test_sfp_file_round_trip_finds_the_heavy_hitters(people, tmp_path, capsys):
    sfp = SFP(4.0, 3, holdout=0.1, **SFP_OPTIONS)
    reports = sfp.perturb(people, rng=4)
    frame = reports.to_frame()
    assert set(frame["kind"]) == {"fragment", "word", "holdout"} and len(frame) == len(people)
    path = tmp_path / "sfp.csv"
    frame.to_csv(path, index=False)
    argv = ["estimate", str(path), *SFP_ARGS, "--holdout", "0.1", "--output", "csv"]
    assert main(argv) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    found = sfp.identify(reports)
    assert [r["item"] for r in rows] == [x.decode() for x in found.items]
    assert sorted(r["item"] for r in rows) == ["cat", "dog", "emu"]
    np.testing.assert_allclose([float(r["estimate"]) for r in rows], found.frequencies)
    # read back, the reports are the package's own: same tallies of every kind
    from bayesldp.workflows.heavy_hitter_files import read_sfp_reports

    back = read_sfp_reports(path, sfp)
    np.testing.assert_array_equal(back.position, reports.position)
    np.testing.assert_array_equal(back.fragments.bits, reports.fragments.bits)
    np.testing.assert_array_equal(back.fragments.row, reports.fragments.row)
    for mine, theirs in ((back.word, reports.word), (back.holdout, reports.holdout)):
        for f in "aby":
            np.testing.assert_array_equal(getattr(mine, f), getattr(theirs, f))


def test_sfp_posterior_from_a_parquet_file(people, tmp_path, capsys):
    pytest.importorskip("pyarrow")
    sfp = SFP(4.0, 3, **SFP_OPTIONS)
    path = tmp_path / "sfp.parquet"
    sfp.perturb(people, rng=5).to_frame().to_parquet(path)
    argv = ["estimate", str(path), *SFP_ARGS, "--method", "posterior", "--quiet", "--output",
            "json"]  # fmt: skip
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    rows = out["rows"]
    assert out["mechanism"] == "SFP" and rows[-1]["item"] == "other"
    assert {r["item"] for r in rows[:3]} == {"cat", "dog", "emu"}
    assert all(r["lower_5"] <= r["estimate"] <= r["upper_95"] for r in rows)


def test_sfp_bad_files_are_refused_in_one_line(people, tmp_path, capsys):
    sfp = SFP(4.0, 3, holdout=0.0, **SFP_OPTIONS)  # no holdout rows: a mislabelled one is refused
    frame = sfp.perturb(people[:2000], rng=6).to_frame()
    word = int(np.flatnonzero(frame["kind"] == "word")[0])

    def refused(table, message, extra=()):
        path = tmp_path / "bad.csv"
        if isinstance(table, str):
            path.write_text(table)
        else:
            table.to_csv(path, index=False)
        assert main(["estimate", str(path), *SFP_ARGS, "--holdout", "0", *extra]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and message in err[0], (message, err)

    bad = frame.copy()
    bad.loc[word, "kind"] = "sketch"
    refused(bad, f"line {word + 2} has kind 'sketch'")
    bad = frame.copy()
    bad.loc[word, "kind"] = "fragment"  # an OLH report labelled as a fragment
    refused(bad, f"line {word + 2} is of kind fragment but holds an OLH report")
    bad = frame.copy()
    bad.loc[0, "kind"] = "word"  # a sketch report labelled as a word
    refused(bad, "line 2 is of kind word but holds a sketch report")
    bad = frame.copy()
    bad.loc[0, "bits"] = bad.loc[0, "bits"][:-1]
    refused(bad, "line 2 has bits of 255 character(s); a fragment row holds m = 256")
    bad = frame.copy()
    bad.loc[0, "bits"] = "2" + bad.loc[0, "bits"][1:]
    refused(bad, "line 2 has bits other than 0 and 1")
    refused(frame[frame["kind"] == "fragment"], "the word group has no reports")
    refused(frame.drop(columns="kind"), "lacks column(s) kind of an SFP file")
    refused(frame.drop(columns="y"), "lacks column(s) y")
    refused("kind,position,row,bits,a,b,y\n", "has a header but no reports")
    refused("", "is empty")
    # another --max-length: the file's positions 0..3 do not fit 3 positions, or leave one empty
    refused(frame, "reports.position: must lie in 0..2, got 3", ["--max-length", "3"])
    refused(frame, "position 4 has no fragment reports", ["--max-length", "5"])
    refused(frame, "line 2 has bits of 256 character(s); a fragment row holds m = 128",
            ["--m", "128"])  # fmt: skip
    bad = frame.copy()
    bad.loc[word, "kind"] = "holdout"
    refused(bad, f"holds holdout rows (line {word + 2}), but --holdout is 0")
    path = tmp_path / "ok.csv"
    frame.to_csv(path, index=False)
    assert main(["estimate", str(path), "--mechanism", "SFP", "--epsilon", "4"]) == 2
    assert "--k: required with --mechanism SFP" in capsys.readouterr().err


# Stamped files: the public parameters travel with the reports.
SMALL_SFP = {"max_length": 4, "m": 64}
LETTERS = "abcd"


def protocols():
    """One protocol of each kind, and the command line that states its parameters."""
    pem = PEM(4.0, 3, bits=16, eta=4, key="survey", holdout=0.1)
    pem_args = ["--mechanism", "PEM", "--epsilon", "4", "--k", "3", "--bits", "16", "--eta", "4",
                "--key", "survey", "--holdout", "0.1"]  # fmt: skip
    tree = TreeHist(4.0, bits=16, eta=2, final_share=0.2)
    tree_args = ["--mechanism", "TreeHist", "--epsilon", "4", "--bits", "16", "--eta", "2"]
    sfp = SFP(4.0, 3, holdout=0.1, key="survey", **SMALL_SFP)
    sfp_args = ["--mechanism", "SFP", "--epsilon", "4", "--k", "3", "--max-length", "4", "--m",
                "64", "--holdout", "0.1", "--key", "survey"]  # fmt: skip
    positional = PEM(4.0, 3, encoder=PositionalEncoder(LETTERS, 3))
    positional_args = ["--mechanism", "PEM", "--epsilon", "4", "--k", "3", "--alphabet", LETTERS,
                       "--length", "3"]  # fmt: skip
    return {"PEM": (pem, pem_args), "TreeHist": (tree, tree_args), "SFP": (sfp, sfp_args),
            "positional": (positional, positional_args)}  # fmt: skip


def stamped(name, people, path):
    protocol, args = protocols()[name]
    if name == "positional":
        people = np.random.default_rng(8).choice([a + b + c for a in LETTERS for b in LETTERS
                                                  for c in LETTERS], people.size)  # fmt: skip
    reports = protocol.perturb(people[:2000], rng=9)
    return protocol, reports, str(reports.to_file(path)), args


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
@pytest.mark.parametrize("name", ["PEM", "TreeHist", "SFP"])
def test_stamped_file_round_trip(people, tmp_path, capsys, name, suffix):
    if suffix == ".parquet":
        pytest.importorskip("pyarrow")
    from bayesldp.workflows.heavy_hitter_files import read_reports

    protocol, reports, path, args = stamped(name, people, tmp_path / f"reports{suffix}")
    kind = type(reports).__name__
    if suffix == ".csv":
        with open(path) as handle:
            assert handle.readline().startswith(f"# bayesldp {kind} {{")
    back = read_reports(path, protocol)
    for field in ("fingerprint", "epsilon", "g", "prefix_lengths", "holdout", "layout"):
        if field != "holdout" or kind == "PEMReports":
            assert getattr(back, field, None) == getattr(reports, field, None), field
    mine, theirs = reports.to_frame(), back.to_frame()
    assert theirs.attrs["bayesldp_protocol"] == mine.attrs["bayesldp_protocol"]
    assert mine.attrs["bayesldp_protocol"]["kind"] == kind
    for column in mine.columns:
        np.testing.assert_array_equal(theirs[column].to_numpy(), mine[column].to_numpy())
    assert main(["estimate", path, *args, "--output", "csv"]) == 0
    assert capsys.readouterr().out.startswith("rank,code,item,estimate")


# each: the file's protocol, the option that differs from the file's, and the difference named
MISMATCHES = [
    ("PEM", ["--key", "other"], "made with code fingerprint"),
    ("PEM", ["--bits", "20"], "made with code fingerprint"),
    (
        "PEM",
        ["--eta", "2"],
        "made with rounds of prefix lengths (6, 10, 14, 16), this PEM uses (4, 6, 8",
    ),
    ("PEM", ["--k", "9"], "made with rounds of prefix lengths (6,"),
    ("PEM", ["--epsilon", "2"], "made with OLH epsilon=4, g=56; this PEM uses epsilon=2"),
    ("PEM", ["--holdout", "0.2"], "made with holdout=0.1, this PEM uses holdout=0.2"),
    ("PEM", ["--holdout", "0"], "made with holdout=0.1, this PEM uses holdout=0"),
    ("positional", ["--alphabet", "abce"], "made with code fingerprint"),
    ("positional", ["--length", "4"], "made with code fingerprint"),
    (
        "TreeHist",
        ["--final-share", "0.3"],
        "made with final_share=0.2, this TreeHist uses final_share=0.3",
    ),
    ("SFP", ["--key", "other"], "made with hash key/width fingerprint"),
    ("SFP", ["--m", "128"], "made with m=64, this SFP uses m=128"),
    ("SFP", ["--hash-seed", "1"], "made with hash_seed=0, this SFP uses hash_seed=1"),
    ("SFP", ["--holdout", "0"], "made with holdout=0.1, this SFP uses holdout=0.0"),
    ("SFP", ["--alphabet", "abcdefghijklmnopqrstuvwxyz"], "made with alphabet='00010203"),
]


@pytest.mark.parametrize(("name", "extra", "message"), MISMATCHES)
def test_stamped_file_refuses_other_parameters(people, tmp_path, capsys, name, extra, message):
    _, _, path, args = stamped(name, people, tmp_path / "reports.csv")
    err = refused_in_one_line(capsys, ["estimate", path, *args, *extra], message)
    assert err.startswith(f"bayesldp: error: {path}: reports: made with")


def test_a_file_without_a_stamp_is_read_on_trust(people, tmp_path, capsys):
    """The caveat the stamp removes: pandas' own CSV holds no parameters, so a wrong --key is
    read as the command line says and finds other codes (the stamped file is refused)."""
    _, reports, path, args = stamped("PEM", people, tmp_path / "stamped.csv")
    plain = write_plain(reports, tmp_path / "plain.csv")
    wrong = [*args, "--key", "other", "--output", "csv"]
    assert main(["estimate", plain, *wrong]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 4  # header and 3 (wrong) codes
    refused_in_one_line(capsys, ["estimate", path, *wrong], "made with code fingerprint")
    assert main(["estimate", plain, *args, "--output", "csv"]) == 0
    from_plain = capsys.readouterr().out
    assert main(["estimate", path, *args, "--output", "csv"]) == 0
    assert capsys.readouterr().out == from_plain


def test_a_stamp_of_another_kind_is_refused_naming_both(people, tmp_path, capsys):
    _, _, pem_path, pem_args = stamped("PEM", people, tmp_path / "pem.csv")
    _, _, sfp_path, sfp_args = stamped("SFP", people, tmp_path / "sfp.csv")
    pem_read = "--mechanism PEM or TreeHist"
    message = f"holds SFPReports (its bayesldp stamp), not the PEMReports that {pem_read} reads"
    refused_in_one_line(capsys, ["estimate", sfp_path, *pem_args], message)
    message = "holds PEMReports (its bayesldp stamp), not the SFPReports that --mechanism SFP"
    refused_in_one_line(
        capsys, ["estimate", pem_path, *sfp_args], f"{message} reads; read it with {pem_read}"
    )
    # a categorical mechanism's reader refuses a heavy-hitter file rather than misread it
    refused_in_one_line(capsys, ["estimate", pem_path, "--mechanism", "GRR", "--k", "4",
                                 "--epsilon", "1"],
                        "holds PEMReports (its bayesldp stamp); read it with --mechanism PEM or "
                        "TreeHist")  # fmt: skip


def test_a_bad_stamp_line_is_refused_in_one_line(people, tmp_path, capsys):
    _, reports, _, args = stamped("PEM", people, tmp_path / "pem.csv")
    lines = (tmp_path / "pem.csv").read_text().splitlines(keepends=True)
    stamp = json.loads(lines[0].split(" ", 3)[3])
    bad_path = tmp_path / "bad.csv"

    def refused(first, message, mechanism=args):
        bad_path.write_text(first + "".join(lines[1:]))
        refused_in_one_line(capsys, ["estimate", str(bad_path), *mechanism], message)

    refused("# bayesldp PEMReports {not json\n", "line 1 is a bad bayesldp stamp (not '# bayesldp")
    refused("# bayesldp PEMReports\n", "line 1 is a bad bayesldp stamp")
    refused(
        f"# bayesldp SFPReports {json.dumps(stamp)}\n",
        "line 1 is a bad bayesldp stamp: its JSON is not an object of kind 'SFPReports'",
    )
    odd = {**stamp, "kind": "Odd"}
    refused(f"# bayesldp Odd {json.dumps(odd)}\n", "bayesldp stamp of unknown kind 'Odd'")
    for field, value, want in (("epsilon", "4", "number"), ("g", 5.5, "integer"),
                               ("prefix_lengths", [6, "10"], "integers"),
                               ("fingerprint", None, "text")):  # fmt: skip
        broken = json.dumps({**stamp, field: value})
        refused(f"# bayesldp PEMReports {broken}\n",
                f"bad bayesldp stamp: {field} must be {want}, got")  # fmt: skip
    refused("# bayesldp PEMReports {not json\n", "line 1 is a bad bayesldp stamp",
            ["--mechanism", "GRR", "--k", "4", "--epsilon", "1"])  # fmt: skip
    # the stamp line moves the data down a line: errors count it
    frame = reports.to_frame()
    frame.loc[3, "a"] = None
    from bayesldp._report_stamp import write_frame

    write_frame(frame, bad_path)
    refused_in_one_line(capsys, ["estimate", str(bad_path), *args], "CSV line 6)")


def test_stamped_sfp_file_counts_the_stamp_line(people, tmp_path, capsys):
    from bayesldp._report_stamp import write_frame

    _, reports, _, args = stamped("SFP", people, tmp_path / "sfp.csv")
    frame = reports.to_frame()
    word = int(np.flatnonzero(frame["kind"] == "word")[0])
    frame.loc[word, "kind"] = "sketch"
    path = write_frame(frame, tmp_path / "bad.csv")
    refused_in_one_line(capsys, ["estimate", str(path), *args],
                        f"line {word + 3} has kind 'sketch'")  # fmt: skip
