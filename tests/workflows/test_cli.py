import csv
import warnings
from pathlib import Path

import pytest

from bayesldp.mechanisms import names as mechanism_names
from bayesldp.workflows.cli import main

MODELS = Path(__file__).resolve().parents[2] / "models"


def test_run_quickstart_writes_report(tmp_path, capsys):
    out = tmp_path / "qs"
    assert main(["run", "models/quickstart.toml", "--out", str(out), "--quick", "--quiet"]) == 0
    report = (out / "report.md").read_text()
    assert "| GRR | 1 | oracle |" in report
    assert (out / "error_by_method.png").stat().st_size > 1000
    with (out / "estimates.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 5 * 5 * 10 and all(r["estimate"] for r in rows)  # mechs x methods x K
    assert "posterior_mean (auto)" in report
    # convergence of every posterior, and times after an untimed warm-up
    convergence = report.split("## Posterior convergence (every fit)")[1].split("##")[0]
    assert convergence.count("| auto |") == 5  # 5 mechanisms x 1 repeat (--quick)
    assert "after one untimed warm-up call" in report
    assert (out / "estimates_RRRR_eps1.png").stat().st_size > 1000
    # lean posteriors: no log_likelihood group, a few hundred kB each
    from bayesldp.bayes import load_fit

    saved = sorted(out.glob("posterior_*.nc"))
    assert len(saved) == 5
    for path in saved:
        assert "log_likelihood" not in load_fit(path).groups(), path.name
    assert sum(path.stat().st_size for path in saved) < 5_000_000


SMALL_SPEC = """
[study]
name = "small"
n = 2000
repeats = 2
[population]
kind = "dirichlet"
k = 4
[estimators]
methods = ["oracle", "mle"]
[bayes]
draws = 200
chains = 2
[[mechanisms]]
name = "OUE"
epsilon = [0.5, 2.0]
"""


@pytest.mark.filterwarnings("ignore::bayesldp.errors.ConvergenceWarning")  # structure only
def test_same_seed_same_report(tmp_path):
    spec = tmp_path / "small.toml"
    spec.write_text(SMALL_SPEC)
    for name in ("a", "b"):
        main(["run", str(spec), "--out", str(tmp_path / name), "--quiet", "--no-figures"])
    first = (tmp_path / "a" / "estimates.csv").read_text()
    assert first == (tmp_path / "b" / "estimates.csv").read_text()
    assert first.count("posterior_mean") == 2 * 2 * 4  # repeats x eps x K


def test_bad_spec_is_one_line_error(tmp_path, capsys):
    spec = tmp_path / "bad.toml"
    spec.write_text(
        '[study]\nname = "x"\nn = "many"\n[population]\nkind="uniform"\nk=3\n'
        '[[mechanisms]]\nname="GRR"\nepsilon=1\n'
    )
    assert main(["run", str(spec)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "[study].n: expected an integer" in err[0]


def test_audit_command(capsys):
    assert main(["audit", "GRR", "--k", "5", "--epsilon", "1", "--trials", "20000"]) == 0
    out = capsys.readouterr().out
    assert "realised epsilon" in out and "no violation" in out


def test_recommend_prefers_grr_for_small_domains(capsys):
    assert main(["recommend", "--k", "3", "--epsilon", "2", "--n", "1000"]) == 0
    assert "recommended: GRR" in capsys.readouterr().out
    assert main(["recommend", "--k", "200", "--epsilon", "1", "--n", "1000"]) == 0
    assert "recommended: OUE" in capsys.readouterr().out


def _write_grr_reports(path, n=3000, seed=0):
    import numpy as np

    import bayesldp

    x = np.random.default_rng(seed).choice(4, n, p=[0.6, 0.2, 0.15, 0.05])
    reports = bayesldp.GRR(4, 2.0).perturb(x, rng=1)
    path.write_text("report\n" + "\n".join(map(str, reports)) + "\n")


def test_estimate_from_csv(tmp_path, capsys):
    path = tmp_path / "reports.csv"
    _write_grr_reports(path)
    assert main(["estimate", str(path), "--mechanism", "GRR", "--k", "4", "--epsilon", "2"]) == 0
    out = capsys.readouterr().out
    assert "3,000 reports" in out and "| 0 | 0.6" in out


def test_estimate_posterior_and_save(tmp_path, capsys):
    path = tmp_path / "reports.csv"
    _write_grr_reports(path, n=60)
    nc = tmp_path / "post.nc"
    args = [
        "estimate",
        str(path),
        "--mechanism",
        "GRR",
        "--k",
        "4",
        "--epsilon",
        "2",
        "--method",
        "posterior",
        "--fit-method",
        "exact",
        "--save-posterior",
        str(nc),
        "--quiet",
    ]
    assert main(args) == 0
    assert "credible interval" in capsys.readouterr().out and nc.stat().st_size > 0


def test_estimate_posterior_on_numerical_reports_takes_the_smoothness_prior(tmp_path, capsys):
    import numpy as np

    from bayesldp.mechanisms import make_mechanism

    mech = make_mechanism("SW", 6, 2.0, lo=0.0, hi=10.0)
    values = np.random.default_rng(0).uniform(2.0, 6.0, 300)
    path = tmp_path / "reports.csv"
    path.write_text("report\n" + "\n".join(repr(float(r)) for r in mech.perturb(values, rng=1)))
    base = ["estimate", str(path), "--mechanism", "SW", "--k", "6", "--epsilon", "2", "--lo", "0",
            "--hi", "10", "--method", "posterior", "--quiet"]  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the default run's convergence warnings are not tested
        assert main(base) == 0
    assert "(auto, SmoothDensity prior)" in capsys.readouterr().out
    with pytest.warns(UserWarning, match="the default Dirichlet"):
        assert main([*base, "--fit-method", "laplace"]) == 0
    assert "(laplace, Dirichlet prior)" in capsys.readouterr().out


def test_estimate_posterior_under_the_adaptive_prior(tmp_path, capsys):
    path = tmp_path / "reports.csv"
    _write_grr_reports(path, n=60)
    base = ["estimate", str(path), "--mechanism", "GRR", "--k", "4", "--epsilon", "2",
            "--method", "posterior", "--fit-method", "exact", "--quiet"]  # fmt: skip
    nc = tmp_path / "post.nc"
    assert main([*base, "--prior", "adaptive", "--save-posterior", str(nc)]) == 0
    assert "credible interval" in capsys.readouterr().out
    from bayesldp.bayes import load_fit

    assert "a" in load_fit(nc).posterior
    with pytest.raises(SystemExit):
        main([*base, "--prior", "jeffreys"])
    assert "expected a number, 'adaptive' or 'smooth'" in capsys.readouterr().err
    from bayesldp.workflows.cli import _prior_option

    assert _prior_option(" Smooth") == "smooth"


@pytest.mark.parametrize(
    "content, message",
    [
        ("", "is empty"),
        ("report\n", "no reports"),
        ("value\n1\n2\n", "lacks column(s) report"),
        ("report\n1\n7\n", "must lie in 0..3"),
        ("report\n1.5\n2\n", "must hold integers"),
    ],
)
def test_estimate_bad_files_one_line(tmp_path, capsys, content, message):
    path = tmp_path / "r.csv"
    path.write_text(content)
    assert main(["estimate", str(path), "--mechanism", "GRR", "--k", "4", "--epsilon", "1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0]


SURVEY_SPEC = """
[survey]
name = "s"
seed = 3
n = 600
k = 4
epsilon = 1.0
batch_size = 100
[population]
kind = "frequencies"
frequencies = [0.7, 0.2, 0.07, 0.03]
"""


def test_survey_runs_and_resumes(tmp_path, capsys):
    spec = tmp_path / "s.toml"
    spec.write_text(SURVEY_SPEC)
    out = tmp_path / "out"
    assert main(["survey", str(spec), "--out", str(out), "--quiet"]) == 0
    report = (out / "report.md").read_text()
    assert "| adaptive RRRR | lookahead | 600 |" in report  # the spec's default rule
    assert "| non-adaptive baseline: GRR(K = 4, eps = 1.0) | non_adaptive | 600 |" in report
    assert "![posterior](posterior.png)" in report and (out / "posterior.png").is_file()
    # a finished survey resumes as a no-op with the same report; a fresh run refuses to overwrite
    assert main(["survey", str(spec), "--resume", str(out), "--quiet"]) == 0
    assert (out / "report.md").read_text() == report
    assert main(["survey", str(spec), "--out", str(out), "--quiet"]) == 2
    assert "--resume" in capsys.readouterr().err


def test_survey_stops_at_its_target(tmp_path):
    spec = tmp_path / "s.toml"
    spec.write_text(SURVEY_SPEC.replace("batch_size = 100", "batch_size = 100\nstop_width = 0.5"))
    out = tmp_path / "out"
    assert main(["survey", str(spec), "--out", str(out), "--quiet"]) == 0
    report = (out / "report.md").read_text()
    assert "- adaptive RRRR: stopped at " in report and "(width " in report


def test_survey_bad_spec(tmp_path, capsys):
    spec = tmp_path / "s.toml"
    spec.write_text(SURVEY_SPEC.replace("epsilon = 1.0", 'epsilon = "high"'))
    assert main(["survey", str(spec), "--quiet"]) == 2
    assert "[survey].epsilon: expected" in capsys.readouterr().err
    spec.write_text(
        SURVEY_SPEC.replace("n = 600", "n = 600\nstop_width = 0.1\nstop_expected_tv = 0.1")
    )
    assert main(["survey", str(spec), "--quiet"]) == 2
    assert "give one of stop_width, stop_expected_tv, stop_cs_width" in capsys.readouterr().err


TINY_SPECS = {
    "survey": """kind = "survey"
[survey]
name = "tiny_survey"
seed = 3
n = 300
k = 4
epsilon = 1.0
utility = "tv"
batch_size = 100
[population]
kind = "dirichlet"
alpha = 0.5
""",
    "grid": """kind = "grid"
[grid]
name = "tiny_grid"
seed = 1
n = 200
repeats = 1
k = [3]
epsilon = [1.0]
rho = [1.0]
utilities = ["tv"]
eps1_fraction = [0.8]
semi_adaptive_alpha = []
[survey]
final_steps = 100
burn_in = 50
""",
    "accuracy": """kind = "accuracy"
[study]
name = "tiny_accuracy"
seed = 2
[mle]
repeats = 2
epsilon = [1.0]
grr_k = [4]
grr_n = [200]
ue_k = [3]
ue_n = [100]
""",
}


@pytest.mark.parametrize("kind", list(TINY_SPECS))
def test_run_reads_the_kind_from_the_spec(tmp_path, capsys, kind):
    """`bayesldp run` runs every kind of spec (the study kind: test_run_quickstart_...)."""
    spec = tmp_path / f"{kind}.toml"
    spec.write_text(TINY_SPECS[kind])
    out = tmp_path / "out"
    assert main(["run", str(spec), "--out", str(out), "--quiet"]) == 0
    report = {"survey": "report.md", "grid": "tables.md", "accuracy": "report.md"}[kind]
    assert (out / report).stat().st_size > 0
    assert "report:" in capsys.readouterr().out


def test_run_full_flag_only_where_it_means_something(tmp_path, capsys):
    spec = tmp_path / "survey.toml"
    spec.write_text(TINY_SPECS["survey"])
    assert main(["run", str(spec), "--full"]) == 2
    assert "--full: applies to grid and accuracy specs" in capsys.readouterr().err


# ------------------------------------------------------------- a user's mistakes, one line each
def _error(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("bayesldp: error: "), err
    return err[0]


def test_resume_refuses_nothing_and_other_settings(tmp_path, capsys):
    spec = tmp_path / "s.toml"
    spec.write_text(SURVEY_SPEC)
    assert main(["survey", str(spec), "--resume", str(tmp_path / "none"), "--quiet"]) == 2
    assert "not a directory; nothing to resume" in _error(capsys)
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["survey", str(spec), "--resume", str(empty), "--quiet"]) == 2
    assert "holds no survey checkpoint" in _error(capsys)
    out = tmp_path / "out"
    assert main(["survey", str(spec), "--out", str(out), "--quiet"]) == 0
    capsys.readouterr()
    other = tmp_path / "other.toml"
    other.write_text(
        SURVEY_SPEC.replace("seed = 3", "seed = 4").replace("epsilon = 1.0", "epsilon = 2.0")
    )
    assert main(["survey", str(other), "--resume", str(out), "--quiet"]) == 2
    message = _error(capsys)
    assert "started under other settings" in message
    assert "[survey].epsilon: 1.0 when the survey started, 2.0 in the spec" in message
    assert "[survey].seed: 3 when the survey started, 4 in the spec" in message


def test_a_directory_in_use_is_refused(tmp_path, capsys):
    from bayesldp.workflows.outputs import directory_lock

    spec = tmp_path / "s.toml"
    spec.write_text(SURVEY_SPEC)
    out = tmp_path / "out"
    out.mkdir()
    with directory_lock(out):  # another run holds it (a lock is per open file, so per run)
        assert main(["survey", str(spec), "--out", str(out), "--quiet"]) == 2
    assert f"{out} is in use by process" in _error(capsys)


@pytest.mark.parametrize("where", ["file", "under_file"])
def test_outputs_checked_before_any_work(tmp_path, capsys, where):
    blocker = tmp_path / "f"
    blocker.write_text("x")
    out = blocker if where == "file" else blocker / "sub"
    assert main(["run", str(MODELS / "quickstart.toml"), "--out", str(out), "--quiet"]) == 2
    assert "a file, not a directory" in _error(capsys)
    reports = tmp_path / "r.csv"
    reports.write_text("report\n0\n1\n")
    args = ["estimate", str(reports), "--mechanism", "GRR", "--k", "3", "--epsilon", "1"]
    assert main([*args, "--method", "posterior", "--save-posterior", str(tmp_path)]) == 2
    assert "is a directory; give a file name" in _error(capsys)


def test_bad_inputs_get_one_line(tmp_path, capsys):
    assert main(["recommend", "--k", "5", "--epsilon", "1", "--n", "0"]) == 2
    assert "--n: must be >= 1, got 0" in _error(capsys)
    fake = tmp_path / "x.parquet"
    fake.write_text("not parquet")
    args = ["--mechanism", "GRR", "--k", "3", "--epsilon", "1"]
    assert main(["estimate", str(fake), *args]) == 2
    assert "as Parquet (truncated, or not Parquet?)" in _error(capsys)
    blank = tmp_path / "blank.csv"
    blank.write_text("report\n0\n\n1\n")
    assert main(["estimate", str(blank), *args]) == 2
    assert "1 row(s) with a missing value (blank line or empty cell; CSV line 3)" in _error(capsys)
    assert main(["audit", "RRRR", "--k", "3", "--epsilon", "1"]) == 2
    assert "RRRR: needs subset" in _error(capsys)
    assert main(["estimate", str(blank), *args, "--g", "3"]) == 2
    assert "GRR: does not take g" in _error(capsys)
    good = tmp_path / "good.csv"
    good.write_text("report\n0\n1\n")
    assert main(["estimate", str(good), *args, "--method", "bogus"]) == 2
    assert "--method: unknown method 'bogus'; valid: oracle," in (message := _error(capsys))
    assert message.endswith(", posterior, rounds")


def test_version_is_the_installed_one(capsys):
    from importlib.metadata import version

    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.strip() == f"bayesldp {version('bayesldp')}"


def test_python_dash_m_runs_the_command_line():
    import subprocess
    import sys
    from importlib.metadata import version

    out = subprocess.run([sys.executable, "-m", "bayesldp", "--version"], capture_output=True,
                         text=True, check=True)  # fmt: skip
    assert out.stdout.strip() == f"bayesldp {version('bayesldp')}"


# ------------------------------------------------------------- every registered mechanism
#: a value for every required mechanism parameter (a new required one must be added here)
EXAMPLE_VALUES = {"subset": [0, 2]}


def _mechanism_args(name: str) -> tuple[list[str], dict]:
    """The CLI options and the keyword arguments of ``name`` with its required parameters."""
    from bayesldp.mechanisms import parameters

    kwargs = {p.name: EXAMPLE_VALUES[p.name] for p in parameters(name) if p.required}
    args = [str(v) for key, values in kwargs.items() for v in [f"--{key}", *values]]
    return args, kwargs


@pytest.mark.parametrize("name", mechanism_names())
def test_every_mechanism_audits_and_estimates(tmp_path, capsys, name):
    """`audit` and `estimate` run for every registered mechanism, on its own report layout."""
    import numpy as np

    from bayesldp.mechanisms import make_mechanism

    options, kwargs = _mechanism_args(name)
    common = ["--k", "5", "--epsilon", "1", *options]
    assert main(["audit", name, *common, "--trials", "2000"]) == 0
    mech = make_mechanism(name, 5, 1.0, **kwargs)
    values = mech.category_values(np.random.default_rng(0).integers(0, 5, 300))
    reports = mech.perturb(values, rng=1)
    path = tmp_path / "reports.csv"
    mech.reports_to_frame(reports).to_csv(path, index=False)
    assert main(["estimate", str(path), "--mechanism", name, *common]) == 0
    assert "300 reports" in capsys.readouterr().out


def test_rrrr_with_an_empty_subset(capsys):
    """`--subset` alone is S empty (RRRR is then GRR(k, epsilon)), a valid RRRR."""
    args = ["audit", "RRRR", "--k", "4", "--epsilon", "1", "--subset", "--trials", "2000"]
    assert main(args) == 0
    assert "subset=[]" in capsys.readouterr().out


def test_mechanism_names_are_case_insensitive_and_aliases(tmp_path, capsys):
    assert main(["audit", "hr", "--k", "4", "--epsilon", "1", "--trials", "2000"]) == 0
    assert capsys.readouterr().out.startswith("HadamardResponse(k=4")
    path = tmp_path / "reports.csv"
    _write_grr_reports(path, n=100)
    assert main(["estimate", str(path), "--mechanism", "krr", "--k", "4", "--epsilon", "2"]) == 0
    assert capsys.readouterr().out.startswith("GRR(k=4, epsilon=2)")


def test_estimate_without_interval_says_so(tmp_path, capsys):
    """The default (pretest) has no standard errors: a note instead of empty 5% / 95% columns."""
    path = tmp_path / "reports.csv"
    _write_grr_reports(path, n=500)
    args = ["estimate", str(path), "--mechanism", "GRR", "--k", "4", "--epsilon", "2"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "| category | estimate |" in out and "5%" not in out and "|  |" not in out
    assert "note: pretest gives no interval" in out
    assert main([*args, "--method", "mle"]) == 0
    out = capsys.readouterr().out
    assert "| category | estimate | 5% | 95% |" in out and "no interval" not in out


def test_estimate_machine_readable_output(tmp_path, capsys):
    import json

    path = tmp_path / "reports.csv"
    _write_grr_reports(path, n=500)
    args = ["estimate", str(path), "--mechanism", "GRR", "--k", "4", "--epsilon", "2"]
    assert main([*args, "--method", "oracle", "--output", "csv"]) == 0
    rows = list(csv.DictReader(capsys.readouterr().out.splitlines()))
    assert [r["category"] for r in rows] == ["0", "1", "2", "3"]
    assert all(float(r["lower_5"]) < float(r["estimate"]) < float(r["upper_95"]) for r in rows)
    assert main([*args, "--output", "json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["mechanism"] == "GRR" and result["reports"] == 500
    assert result["interval"] is None and set(result["rows"][0]) == {"category", "estimate"}
    assert abs(sum(r["estimate"] for r in result["rows"]) - 1) < 1e-9
    assert result["notes"][0].startswith("note: pretest gives no interval")


def test_estimate_help_lists_every_layout(capsys):
    """The help prints each registered mechanism's report columns, not a pointer to a docstring."""
    from bayesldp.workflows.report_files import layout

    with pytest.raises(SystemExit):
        main(["estimate", "--help"])
    text = " ".join(capsys.readouterr().out.split())  # the help wraps long lines
    assert "``" not in text and "=====" not in text
    for name in mechanism_names():
        assert f" {name}: {layout(name)}" in text
    assert "OLH: Columns a, b" in text and "report and count" in text
    assert "HadamardResponse: A report column of integers 0..K'-1" in text


def test_survey_names_the_non_adaptive_baseline_grr(tmp_path, capsys):
    """The baseline is plain GRR: its row and progress say so, not "|S_t| = 0"."""
    spec = tmp_path / "s.toml"
    spec.write_text(SURVEY_SPEC)
    out = tmp_path / "out"
    assert main(["survey", str(spec), "--out", str(out)]) == 0
    captured = capsys.readouterr()
    baseline = [row for row in captured.out.splitlines() if "non_adaptive" in row]
    assert len(baseline) == 1 and "GRR(K = 4, eps = 1.0)" in baseline[0]
    assert "| none (GRR, no subset) |" in baseline[0] and "0.00" not in baseline[0]
    progress = [part for part in captured.err.split("\r") if "non-adaptive" in part]
    assert progress and all("no subset" in p and "|S_t|" not in p for p in progress)
    assert any("adaptive RRRR" in p and "|S_t| = " in p for p in captured.err.split("\r"))


def test_recommend_ranks_the_error_of_the_chosen_method(capsys):
    """mle (default) ranks by the Cramér-Rao trace, oracle by the oracle's variance: they differ.

    SHE's MLE uses the whole Laplace-noised vector, so its error is about half its oracle's:
    last under the oracle, ahead of GRR under the MLE (K = 10, eps = 1).
    """
    import json

    args = ["recommend", "--k", "10", "--epsilon", "1", "--n", "1000", "--output", "json"]
    assert main(args) == 0
    mle = json.loads(capsys.readouterr().out)
    assert mle["method"] == "mle" and "Cramér-Rao" in mle["ranked"]
    assert main([*args, "--method", "oracle"]) == 0
    oracle = json.loads(capsys.readouterr().out)
    order = {name: [r["mechanism"] for r in result["rows"]] for name, result in
             (("mle", mle), ("oracle", oracle))}  # fmt: skip
    assert order["oracle"][-1] == "SHE"
    assert order["mle"].index("SHE") < order["mle"].index("GRR")
    for result in (mle, oracle):
        errors = [r["mse"] for r in result["rows"]]
        assert errors == sorted(errors) and result["recommended"] == result["rows"][0]["mechanism"]
        assert all(r["n_mse"] == pytest.approx(1000 * r["mse"]) for r in result["rows"])


def test_recommend_shows_the_error_at_n(capsys):
    """The errors are at --n (they scale as 1/n); the order does not change with n."""
    import json

    def ranking(n):
        args = ["recommend", "--k", "6", "--epsilon", "2", "--n", str(n), "--output", "json"]
        assert main(args) == 0
        return json.loads(capsys.readouterr().out)["rows"]

    small, large = ranking(100), ranking(10_000)
    assert [r["mechanism"] for r in small] == [r["mechanism"] for r in large]
    assert all(a["mse"] == pytest.approx(100 * b["mse"]) for a, b in zip(small, large, strict=True))
    with pytest.raises(SystemExit):
        main(["recommend", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "Cramér-Rao bound" in text and "--n sets the errors shown, not the order" in text


def test_estimate_with_labels(tmp_path, capsys):
    """--labels / --labels-file name the categories in the table, CSV, JSON and the
    saved posterior; they are checked before the reports are read."""
    import json

    from bayesldp.bayes import load_fit

    path = tmp_path / "reports.csv"
    _write_grr_reports(path, n=500)
    args = ["estimate", str(path), "--mechanism", "GRR", "--k", "4", "--epsilon", "2"]
    labels = ["Strong Democrat", "Weak Democrat", "Independent", "Republican"]
    given = ["--labels", "Strong Democrat, Weak Democrat,Independent ,Republican"]
    assert main([*args, *given, "--method", "mle"]) == 0
    out = capsys.readouterr().out
    assert "| category | label | estimate | 5% | 95% |" in out
    assert "| 0 | Strong Democrat | 0.5" in out and "| 3 | Republican |" in out
    assert main([*args, *given, "--output", "csv"]) == 0
    rows = list(csv.DictReader(capsys.readouterr().out.splitlines()))
    assert [(r["category"], r["label"]) for r in rows] == [
        (str(x), s) for x, s in enumerate(labels)
    ]
    file = tmp_path / "labels.txt"
    file.write_text("\n".join([*labels[:2], "Independent, leaning", labels[3]]) + "\n")
    assert main([*args, "--labels-file", str(file), "--output", "json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["labels"][2] == "Independent, leaning"
    assert [r["label"] for r in result["rows"]] == result["labels"]
    assert list(result["rows"][0]) == ["category", "label", "estimate"]
    nc = tmp_path / "post.nc"
    posterior = ["--method", "posterior", "--fit-method", "exact", "--quiet"]
    small = tmp_path / "small.csv"
    _write_grr_reports(small, n=40)
    small_args = ["estimate", str(small), *args[2:]]
    assert main([*small_args, *given, *posterior, "--save-posterior", str(nc)]) == 0
    assert "| 1 | Weak Democrat |" in capsys.readouterr().out
    assert load_fit(nc).posterior["category"].values.tolist() == labels
    # without labels: no label column, as before
    assert main([*args, "--output", "json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["labels"] is None and list(result["rows"][0]) == ["category", "estimate"]


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--labels", "a,b,c"], "--labels: expected 4 labels (one per category), got 3"),
        (["--labels", "a,b,a,c"], "--labels: must be distinct; 'a' labels categories 0 and 2"),
        (["--labels", "a,,b,c"], "--labels[1]: is empty"),
        (["--labels-file", "nope.txt"], "--labels-file: no such file nope.txt"),
    ],
)
def test_estimate_bad_labels_one_line(tmp_path, capsys, extra, message):
    missing = tmp_path / "missing.csv"  # labels are checked before the reports are read
    args = ["estimate", str(missing), "--mechanism", "GRR", "--k", "4", "--epsilon", "1"]
    assert main([*args, *extra]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err


def test_estimate_labels_and_labels_file_exclusive(tmp_path, capsys):
    args = ["estimate", "r.csv", "--mechanism", "GRR", "--k", "2", "--epsilon", "1"]
    with pytest.raises(SystemExit):
        main([*args, "--labels", "a,b", "--labels-file", "f.txt"])
    assert "not allowed with argument" in capsys.readouterr().err


def test_estimate_help_explains_labels(capsys):
    with pytest.raises(SystemExit):
        main(["estimate", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--labels A,B,C" in text and "--labels-file FILE" in text
    assert "category labels: Reports hold category numbers 0..K-1" in text
    assert "bayesldp.encode(values, categories)" in text


# ------------------------------------------------------------- report stores: files, Dask, stores
def _estimate_json(capsys, argv):
    import json

    assert main([*argv, "--method", "mle", "--output", "json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_estimate_reads_a_directory_a_glob_and_a_store_alike(tmp_path, capsys):
    """Three files read one by one, as a directory on Dask, as a glob, and through a tally store
    give the same estimate; re-appending a file counts nothing twice."""
    import json

    import pandas as pd

    parts = [tmp_path / f"day{i}.csv" for i in range(3)]
    for i, path in enumerate(parts):
        _write_grr_reports(path, n=300 + 100 * i, seed=i)
    whole = tmp_path / "whole" / "all.csv"
    whole.parent.mkdir()
    pd.concat([pd.read_csv(p) for p in parts]).to_csv(whole, index=False)
    mech = ["--mechanism", "GRR", "--k", "4", "--epsilon", "2"]
    expected = _estimate_json(capsys, ["estimate", str(whole), *mech])
    assert expected["reports"] == 1200
    directory = _estimate_json(capsys, ["estimate", str(tmp_path), *mech, "--scheduler", "threads"])
    pattern = str(tmp_path / "day*.csv")
    glob = _estimate_json(capsys, ["estimate", pattern, *mech, "--scheduler", "synchronous"])
    store = tmp_path / "store"
    assert main(["append", str(store), *map(str, parts[:2]), *mech, "--output", "json"]) == 0
    first = json.loads(capsys.readouterr().out)
    assert [r["status"] for r in first["rows"]] == ["counted", "counted"]
    assert main(["append", str(store), *map(str, parts[1:]), "--output", "json"]) == 0
    second = json.loads(capsys.readouterr().out)
    assert [r["status"] for r in second["rows"]] == ["already counted", "counted"]
    stored = _estimate_json(capsys, ["estimate", str(store)])
    for got in (directory, glob, stored):
        assert got["reports"] == 1200
        for a, b in zip(got["rows"], expected["rows"], strict=True):
            assert a["estimate"] == pytest.approx(b["estimate"], abs=1e-9)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["estimate", "{store}", "--k", "5"], "--k: 5 disagrees with the tally store"),
        (["estimate", "{store}", "--mechanism", "OUE"], "--mechanism: 'OUE' disagrees"),
        (["estimate", "{store}", "--scheduler", "threads"], "--scheduler: a tally store"),
        (["estimate", "{file}"], "--mechanism, --k, --epsilon: required unless REPORTS"),
        (["append", "{tmp}/new", "{file}", "--k", "4"], "--mechanism, --epsilon: required to"),
        (["append", "{store}", "{file}", "--epsilon", "1"], "--epsilon: 1.0 disagrees"),
    ],
)
def test_store_and_scheduler_options_checked(tmp_path, capsys, argv, message):
    path = tmp_path / "reports.csv"
    _write_grr_reports(path, n=50)
    store = tmp_path / "store"
    mech = ["--mechanism", "grr", "--k", "4", "--epsilon", "2"]
    assert main(["append", str(store), str(path), *mech]) == 0
    capsys.readouterr()
    fill = {"store": store, "file": path, "tmp": tmp_path}
    assert main([a.format(**fill) for a in argv]) == 2
    assert message in capsys.readouterr().err


def test_report_out_of_range_names_its_file(tmp_path, capsys):
    """A file of another mechanism's reports (here GRR with K = 5 into a K = 4 store) is refused,
    naming the file, on every path: one file, Dask, and a store."""
    good, bad = tmp_path / "good.csv", tmp_path / "bad.csv"
    _write_grr_reports(good, n=50)
    bad.write_text("report\n0\n4\n")
    mech = ["--mechanism", "GRR", "--k", "4", "--epsilon", "2"]
    store = tmp_path / "store"
    assert main(["append", str(store), str(good), *mech]) == 0
    for argv in (
        ["estimate", str(bad), *mech],
        ["estimate", str(tmp_path / "*.csv"), *mech, "--scheduler", "synchronous"],
        ["append", str(store), str(bad)],
    ):
        capsys.readouterr()
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert str(bad) in err and "must lie in 0..3, got 4" in err
    assert main(["estimate", str(store), "--output", "json"]) == 0
    assert '"reports": 50' in capsys.readouterr().out


def test_recommend_at_a_huge_epsilon_ranks_what_runs(capsys):
    """At eps = 50 OUE cannot draw its bits exactly: it is listed as not ranked, with the reason,
    and the others are ranked (the command used to fail outright)."""
    import json

    argv = ["recommend", "--k", "10", "--epsilon", "50", "--n", "1000", "--output", "json"]
    assert main(argv) == 0
    result = json.loads(capsys.readouterr().out)
    ranked = [row["mechanism"] for row in result["rows"]]
    assert "OUE" not in ranked and "GRR" in ranked
    assert result["not_ranked"][0].startswith("OUE: epsilon: 50.0 gives a bit probability")


def test_audit_with_few_trials_says_so_and_report_sizes_read_well(capsys):
    import bayesldp

    assert main(["audit", "GRR", "--k", "4", "--epsilon", "1", "--trials", "20"]) == 0
    out = capsys.readouterr().out
    assert "no positive lower bound (too few trials" in out and "-inf" not in out
    assert bayesldp.BLH(4, 1.0).report_size() == "1 bit + 62-bit hash seed"
    assert bayesldp.GRR(16, 1.0).report_size() == "4 bits"


def test_mechanism_options_are_dashed_and_the_old_spelling_still_works():
    """--num-bits as --fit-method; --num_bits stays a hidden alias."""
    from bayesldp.workflows.cli import build_parser

    parser = build_parser()
    common = ["estimate", "r.csv", "--mechanism", "RAPPOR", "--k", "4", "--epsilon", "1"]
    new = parser.parse_args([*common, "--num-bits", "32", "--hash-seed", "3"])
    old = parser.parse_args([*common, "--num_bits", "32", "--hash_seed", "3"])
    assert new.num_bits == old.num_bits == 32 and new.hash_seed == old.hash_seed == 3
    text = parser._subparsers._group_actions[0].choices["estimate"].format_help()
    assert "--num-bits" in text and "--num_bits" not in text and "RAPPOR: RAPPOR" not in text
