"""``bayesldp estimate --mechanism PEM`` (and TreeHist) on a report file of heavy hitters."""

import csv
import io
import json

import numpy as np
import pytest

from bayesldp.heavy_hitters import PEM, TreeHist
from bayesldp.workflows.cli import main

WORDS = np.array(["cat", "dog", "emu"] + [f"w{i}" for i in range(500)], dtype=object)
SHARES = np.r_[[40.0, 25.0, 15.0], np.ones(500) / 25]


@pytest.fixture(scope="module")
def people():
    rng = np.random.default_rng(0)
    return rng.choice(WORDS, 20_000, p=SHARES / SHARES.sum())


def write(reports, path):
    reports.to_frame().to_csv(path, index=False)
    return str(path)


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
    path = write(pem.perturb(people[:2000], rng=3), tmp_path / "pem.csv")
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
