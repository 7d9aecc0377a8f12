"""``bayesldp estimate`` on files of rounds (user, round, report) and of attributes (user,
attribute, report): simulated reports written to CSV, read back through the command's main
function, and one-line errors for bad files."""

import csv
import io
import json

import numpy as np
import pandas as pd
import pytest

import bayesldp
from bayesldp.estimators import estimate
from bayesldp.mechanisms import make_mechanism
from bayesldp.mechanisms.multidimensional import RSFD, SMP, SPL
from bayesldp.workflows.cli import main
from bayesldp.workflows.report_files import layouts


def _rounds_file(tmp_path, mech, rounds=3, n=400, seed=0, name="rounds.csv"):
    """A longitudinal population (the same users each round, memoised), one CSV."""
    rng = np.random.default_rng(seed)
    memo = mech.memo()
    users = np.arange(100, 100 + n)
    x = rng.choice(mech.k, size=n, p=np.linspace(1, 2, mech.k) / np.linspace(1, 2, mech.k).sum())
    frames, tallies = [], []
    for t in range(1, rounds + 1):
        y = mech.perturb(x, rng, users=users, memo=memo)
        tallies.append(mech.tally(y))
        frame = mech.reports_to_frame(y)
        frame.insert(0, "round", t)
        frame.insert(0, "user", users)
        frames.append(frame)
    path = tmp_path / name
    pd.concat(frames).sample(frac=1.0, random_state=1).to_csv(path, index=False)  # any order
    return path, tallies


def _csv_rows(text):
    return list(csv.DictReader(io.StringIO(text)))


@pytest.mark.parametrize("name, options", [("LGRR", ["--eps-perm", "2"]), ("LOSUE", [])])
def test_rounds_round_trip(tmp_path, capsys, name, options):
    mech = make_mechanism(name, 4, 1.0, eps_perm=2.0 if options else None)
    path, tallies = _rounds_file(tmp_path, mech)
    args = ["estimate", str(path), "--mechanism", name, "--k", "4", "--epsilon", "1", *options]
    assert main([*args, "--method", "mle", "--output", "csv"]) == 0
    rows = _csv_rows(capsys.readouterr().out)
    assert len(rows) == 3 * 4 and list(rows[0])[:3] == ["round", "reports", "category"]
    for t, tally in enumerate(tallies, start=1):
        got = [float(r["estimate"]) for r in rows if r["round"] == str(t)]
        np.testing.assert_allclose(got, estimate(tally, "mle").frequencies, rtol=1e-9)
        assert {r["reports"] for r in rows if r["round"] == str(t)} == {"400"}
    # for people: one table per round under its heading
    assert main([*args, "--labels", "a,b,c,d"]) == 0
    out = capsys.readouterr().out
    assert "3 rounds (1..3), 1,200 reports" in out
    assert out.count("| category | label | estimate |") == 3 and "round 2: 400 reports" in out
    assert "note: pretest gives no interval" in out


def test_rounds_json_and_per_round_posteriors(tmp_path, capsys):
    mech = bayesldp.LGRR(3, 1.0)
    path, tallies = _rounds_file(tmp_path, mech, rounds=2, n=60)
    nc = tmp_path / "post.nc"
    args = ["estimate", str(path), "--mechanism", "L-GRR", "--k", "3", "--epsilon", "1"]
    assert main([*args, "--method", "posterior", "--fit-method", "exact", "--quiet",
                 "--output", "json", "--save-posterior", str(nc)]) == 0  # fmt: skip
    found = json.loads(capsys.readouterr().out)
    assert found["rounds"] == [{"round": 1, "reports": 60}, {"round": 2, "reports": 60}]
    assert found["mechanism"] == "LGRR" and len(found["rows"]) == 6
    assert all(r["lower_5"] < r["estimate"] < r["upper_95"] for r in found["rows"])
    from bayesldp.bayes import load_fit

    for t, tally in enumerate(tallies, start=1):
        posterior = load_fit(tmp_path / f"post_round{t}.nc").posterior
        assert posterior["theta"].shape[-1] == 3
        mean = posterior["theta"].values.reshape(-1, 3).mean(axis=0)
        got = [r["estimate"] for r in found["rows"] if r["round"] == t]
        np.testing.assert_allclose(got, mean, rtol=1e-12)
        assert tally.n == 60


@pytest.mark.filterwarnings("ignore::bayesldp.errors.ConvergenceWarning")  # tiny draws
@pytest.mark.slow
def test_rounds_random_walk(tmp_path, capsys):
    mech = bayesldp.LGRR(3, 1.0)
    path, _ = _rounds_file(tmp_path, mech, rounds=3, n=200)
    nc = tmp_path / "walk.nc"
    args = [
        "estimate",
        str(path),
        "--mechanism",
        "LGRR",
        "--k",
        "3",
        "--epsilon",
        "1",
        "--method",
        "rounds",
        "--draws",
        "50",
        "--tune",
        "50",
        "--chains",
        "1",
        "--quiet",
    ]
    assert main([*args, "--save-posterior", str(nc)]) == 0
    out, err = capsys.readouterr()
    # the file is a panel (the same 200 users every round): one warning line on stderr
    lines = err.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("bayesldp: warning: --method rounds: 200 of 200 users report in "
                               "more than one round (a panel)")  # fmt: skip
    assert "assumes independent users per round" in lines[0] and "0.765" in lines[0]
    assert "--method posterior" in lines[0]
    assert "random walk across rounds (fit_rounds)" in out and "step size sigma" in out
    assert out.count("| category | estimate | 5% | 95% |") == 3
    from bayesldp.bayes import load_fit

    posterior = load_fit(nc).posterior
    assert posterior["theta"].dims[-2:] == ("round", "category")
    assert list(posterior["round"].values) == [1, 2, 3]
    assert main([*args, "--prior", "1"]) == 2
    assert "--prior: --method rounds has its own prior" in capsys.readouterr().err
    # new users each round: no warning
    fresh = pd.read_csv(path)
    fresh["user"] = fresh["user"] + 10_000 * fresh["round"]
    fresh.to_csv(path, index=False)
    assert main(args) == 0
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize(
    "content, message",
    [
        (
            "user,round,report\n1,1,0\n2,1,1\n1,1,2\n",
            "user 1 reported 2 times in round 1 (CSV lines 2 and 4)",
        ),
        ("user,round,report\n1,1,0\n1,3,1\n", "round 2 has no reports; rounds 1..3 appear"),
        ("user,round,report\n1,1,0\n1,2,7\n", "(round 2): reports: must lie in 0..2, got 7"),
        ("user,round,report\n1,a,0\n", "column 'round' must hold integers"),
        ("round,report\n1,0\n", "lacks column(s) user"),
        ("user,round,report,count\n1,1,0,3\n", "has a count column beside user and round"),
        ("user,round,value\n1,1,0\n", "(round 1) lacks column(s) report"),
    ],
)
def test_rounds_bad_files_one_line(tmp_path, capsys, content, message):
    path = tmp_path / "r.csv"
    path.write_text(content)
    assert main(["estimate", str(path), "--mechanism", "LGRR", "--k", "3", "--epsilon", "1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err


def test_rounds_bad_options(tmp_path, capsys):
    path = tmp_path / "r.csv"
    path.write_text("user,round,report\n1,1,0\n2,1,1\n")
    base = ["estimate", str(path), "--mechanism", "LGRR", "--k", "3", "--epsilon", "1"]
    for extra, message in [
        (["--method", "rounds"], "holds one round (1); a random walk needs two or more"),
        (["--base", "GRR"], "--base: only for SPL, SMP and RSFD"),
        (["--scheduler", "threads"], "a file of rounds is read as one CSV or Parquet file"),
    ]:
        assert main([*base, *extra]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and message in err[0], err
    assert main([*base[:-4], "--k", "3,4", "--epsilon", "1"]) == 2
    assert "--k: 3,4 lists one domain size per attribute" in capsys.readouterr().err


def _attributes_file(tmp_path, protocol, n=600, seed=0, name="attributes.csv"):
    """Records perturbed by ``protocol``, one row per (user, reported attribute)."""
    rng = np.random.default_rng(seed)
    records = np.column_stack([rng.integers(0, k, n) for k in protocol.ks])
    reports = protocol.perturb(records, rng)
    users = np.arange(n)
    frames = []
    for j, part in enumerate(reports.parts):
        who = users if reports.attribute is None else users[reports.attribute == j]
        if protocol.base == "GRR":
            value = part
        else:
            value = ["".join("1" if b else "0" for b in row) for row in part]
        frames.append(pd.DataFrame({"user": who, "attribute": j, "report": value}))
    path = tmp_path / name
    pd.concat(frames).to_csv(path, index=False)
    return path, protocol.tallies(reports)


@pytest.mark.parametrize(
    "protocol, options",
    [
        (SPL([3, 4, 2], 2.0), []),
        (SMP([3, 4, 2], 2.0), []),
        (RSFD([3, 4, 2], 2.0), []),
        (SPL([3, 5], 2.0, base="OUE"), ["--base", "OUE"]),
        (RSFD([3, 5], 2.0, base="SUE", fake="random"), ["--base", "sue", "--fake", "random"]),
        (RSFD([3, 4, 2], 2.0, budget="paper"), ["--budget", "paper"]),
    ],
    ids=["SPL", "SMP", "RSFD", "SPL-OUE", "RSFD-SUE-r", "RSFD-paper"],
)
def test_attributes_round_trip(tmp_path, capsys, protocol, options):
    path, tallies = _attributes_file(tmp_path, protocol)
    ks = ",".join(map(str, protocol.ks))
    args = ["estimate", str(path), "--mechanism", protocol.name, "--k", ks, "--epsilon", "2",
            *options, "--method", "em"]  # fmt: skip
    assert main([*args, "--output", "csv"]) == 0
    rows = _csv_rows(capsys.readouterr().out)
    assert len(rows) == sum(protocol.ks)
    for j, tally in enumerate(tallies):
        got = [float(r["estimate"]) for r in rows if r["attribute"] == str(j)]
        np.testing.assert_allclose(got, estimate(tally, "em").frequencies, rtol=1e-9)
        assert {r["reports"] for r in rows if r["attribute"] == str(j)} == {str(tally.n)}
    assert main(args) == 0
    out = capsys.readouterr().out
    assert out.count("| category | estimate |") == protocol.d
    assert f"attribute {protocol.d - 1} (k = {protocol.ks[-1]}; " in out
    assert f"privacy: {protocol.guarantee()}" in out


def test_rsfd_budget_on_the_command_line(tmp_path, capsys):
    """RSFD's default spends --epsilon on the whole record, and says so; --budget paper is the
    paper's nominal epsilon, whose whole record realises more, and says that; --budget is
    refused for SPL and for a file of one mechanism."""
    protocol = RSFD([12, 7, 30], 2.0)
    path, _ = _attributes_file(tmp_path, protocol, n=200)
    args = ["estimate", str(path), "--mechanism", "RSFD", "--k", "12,7,30", "--epsilon", "2",
            "--method", "oracle"]  # fmt: skip
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "budget='record'" in out
    assert "privacy: RSFD[GRR] at epsilon = 2 for the whole record: it realises 2 " in out
    assert main([*args, "--budget", "paper"]) == 0
    out = capsys.readouterr().out
    assert "budget='paper'" in out and "the whole record realises the amplified 3.004" in out
    for extra, message in [
        (["--mechanism", "SPL", "--k", "3,4", "--budget", "paper"], "--budget: only RSFD"),
        (["--mechanism", "GRR", "--k", "3", "--budget", "record"], "--budget: only for SPL"),
    ]:
        assert main(["estimate", str(path), "--epsilon", "1", *extra]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and message in err[0], (extra, err)


def test_attributes_posterior_through_fit_marginals(tmp_path, capsys):
    protocol = SPL([3, 4], 2.0)
    path, tallies = _attributes_file(tmp_path, protocol, n=40)
    nc = tmp_path / "m.nc"
    assert main(["estimate", str(path), "--mechanism", "spl", "--k", "3,4", "--epsilon", "2",
                 "--method", "posterior", "--fit-method", "exact", "--quiet", "--output",
                 "json", "--save-posterior", str(nc)]) == 0  # fmt: skip
    found = json.loads(capsys.readouterr().out)
    assert [a["k"] for a in found["attributes"]] == [3, 4]
    from bayesldp.bayes import load_fit
    from bayesldp.mechanisms.multidimensional import fit_marginals

    expected = fit_marginals(tallies, method="exact", random_seed=0, progressbar=False)
    for j in range(2):
        saved = load_fit(tmp_path / f"m_attribute{j}.nc").posterior["theta"].values
        np.testing.assert_array_equal(saved, expected[j].posterior["theta"].values)
        got = [r["estimate"] for r in found["rows"] if r["attribute"] == j]
        np.testing.assert_allclose(got, saved.reshape(-1, protocol.ks[j]).mean(axis=0))


@pytest.mark.parametrize(
    "mechanism, content, message",
    [
        (
            "SPL",
            "user,attribute,report\n1,0,0\n1,1,4\n",
            "(attribute 1, k = 4): report 4 on CSV line 3 is outside the attribute's domain 0..3",
        ),
        (
            "SPL",
            "user,attribute,report\n1,0,0\n1,2,1\n",
            "attribute 2 on CSV line 3 is not one of the 2 attributes 0..1",
        ),
        (
            "SPL",
            "user,attribute,report\n1,0,0\n1,0,1\n",
            "user 1 reported attribute 0 more than once (CSV line 2)",
        ),
        (
            "SPL",
            "user,attribute,report\n1,0,0\n1,1,1\n2,0,1\n",
            "user 2 reported attribute(s) 0 (first on CSV line 4); an SPL user reports every one",
        ),
        ("SMP", "user,attribute,report\n1,0,0\n1,1,1\n", "an SMP user reports one attribute"),
        ("SMP", "user,attribute,report\n1,0,0\n2,0,1\n", "attribute 1 has no reports"),
        ("SPL", "user,attribute,value\n1,0,0\n", "lacks column(s) report"),
        ("SPL", "user,attribute,report\n1,0,0.5\n1,1,1\n", "column 'report' must hold integers"),
    ],
)
def test_attributes_bad_files_one_line(tmp_path, capsys, mechanism, content, message):
    path = tmp_path / "a.csv"
    path.write_text(content)
    assert main(["estimate", str(path), "--mechanism", mechanism, "--k", "3,4", "--epsilon",
                 "1"]) == 2  # fmt: skip
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err


def test_attributes_bits_and_bad_options(tmp_path, capsys):
    path = tmp_path / "a.csv"
    path.write_text("user,attribute,report\n1,0,010\n1,1,0120\n")
    base = ["estimate", str(path), "--mechanism", "SPL", "--epsilon", "1"]
    for extra, message in [
        (["--k", "3,4", "--base", "OUE"], "report '0120' on CSV line 3 is not 4 bits"),
        (["--k", "3,4", "--fake", "zero"], "--fake: only RSFD reports fake data, not SPL"),
        (["--k", "3,4", "--g", "2"], "--g: SPL, SMP and RSFD take --base, --fake and --budget"),
        (["--k", "3,4", "--labels", "a,b,c"], "--labels: names one set of categories"),
        (["--k", "3,4", "--method", "rounds"], "rounds fits a file of rounds, not of attr"),
        (["--k", "3"], "--k: SPL needs one domain size per attribute"),
        (["--k", "3,4", "--base", "XX"], "base: expected one of GRR, SUE, OUE"),
    ]:
        assert main([*base, *extra]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and message in err[0], (extra, err)


def test_help_lists_the_grouped_layouts():
    text = layouts()
    assert "Per round: any mechanism above" in text and "SPL, SMP, RSFD: several" in text
    assert "PCKVPM: A report column of real numbers" in text


def test_rounds_from_parquet(tmp_path, capsys):
    pytest.importorskip("pyarrow")
    mech = bayesldp.LGRR(3, 1.0)
    path, tallies = _rounds_file(tmp_path, mech, rounds=2, n=100)
    parquet = tmp_path / "rounds.parquet"
    pd.read_csv(path).to_parquet(parquet)
    args = ["estimate", str(parquet), "--mechanism", "LGRR", "--k", "3", "--epsilon", "1"]
    assert main([*args, "--method", "mle", "--output", "csv"]) == 0
    rows = _csv_rows(capsys.readouterr().out)
    got = [float(r["estimate"]) for r in rows if r["round"] == "2"]
    np.testing.assert_allclose(got, estimate(tallies[1], "mle").frequencies, rtol=1e-9)
