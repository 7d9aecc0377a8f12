"""Hostile outputs: where results land, whether they land together, and what a rerun finds.

Each case states its expected outcome: a one-line error of the package's own type (exit code 2
from the CLI), or results that land together (all of a run's files, or none of them).

* names: a spec's ``name`` is the default output directory ``out/<name>``; an absolute name, one
  holding a path separator, ``.`` / ``..`` or nothing is refused at spec load, for every kind;
* stopped surveys: a resumed survey whose stop target was met collects no more users and says
  so; a report never says "not met" of a survey that did not reach its users;
* sizes and permissions: huge sizes are refused before any allocation, naming the limit;
  unreadable inputs and read-only outputs are one line, not a traceback;
* crash safety: a survey's spec is checked before anything is written; a kill during a new
  store's creation or during ``run``'s publishing step leaves a state the next command
  recovers; a target that cannot be replaced fails before any file is moved.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from bayesldp.errors import InvalidInputError
from bayesldp.workflows.cli import main
from bayesldp.workflows.spec import SpecError, load_spec
from tests.workflows.test_cli import SMALL_SPEC
from tests.workflows.test_hostile_inputs import one_line_error, survey_spec

ROOT = Path(__file__).resolve().parents[2]
MODELS = sorted((ROOT / "models").glob("*.toml"))


def _renamed(text: str, name: str) -> str:
    """``text`` with its first top-level ``name = "..."`` (the main table's) set to ``name``."""
    quoted = '"' + name.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return re.sub(r'(?m)^name = "[^"]*"', lambda _: f"name = {quoted}", text, count=1)


# ------------------------------------------------------------------ names are one component
@pytest.mark.parametrize("model", MODELS, ids=lambda p: p.stem)
@pytest.mark.parametrize("name", ["/abs/dir", "../../..", "..", "a/b", "a\\b", "", "  ", "x\ty"])
def test_a_name_that_is_not_one_plain_component_is_refused_at_load(tmp_path, model, name):
    spec = tmp_path / model.name
    spec.write_text(_renamed(model.read_text(encoding="utf-8"), name), encoding="utf-8")
    with pytest.raises(SpecError) as info:
        load_spec(spec)
    message = str(info.value)
    assert re.search(r"\[(study|survey|grid)\]\.name: ", message), message
    assert "out/<name>" in message and "refused, not renamed" in message, message
    assert "\n" not in message


@pytest.mark.parametrize("model", MODELS, ids=lambda p: p.stem)
def test_a_plain_name_still_loads(tmp_path, model):
    spec = tmp_path / model.name
    spec.write_text(_renamed(model.read_text(encoding="utf-8"), "my run.v2"), encoding="utf-8")
    load_spec(spec)


def test_run_with_an_absolute_name_writes_nothing_there(tmp_path, capsys, monkeypatch):
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "report.md").write_text("mine")
    spec = tmp_path / "s.toml"
    spec.write_text(SMALL_SPEC.replace('name = "small"', f'name = "{victim}"'))
    monkeypatch.chdir(tmp_path)
    code = main(["run", str(spec), "--quiet", "--no-figures"])
    one_line_error(capsys, code, "[study].name", str(victim), "out/<name>")
    assert (victim / "report.md").read_text() == "mine"
    assert sorted(p.name for p in victim.iterdir()) == ["report.md"]
    assert not (tmp_path / "out").exists()


def test_survey_name_escaping_out_is_refused(tmp_path, capsys, monkeypatch):
    spec = survey_spec(tmp_path, replace=[('name = "s"', 'name = "../../.."')])
    monkeypatch.chdir(tmp_path)
    code = main(["run", str(spec), "--quiet"])
    one_line_error(capsys, code, "[survey].name", "'../../..'")
    assert not (tmp_path / "out").exists()


# ------------------------------------------------------------------ surveys: checked, stopped
@pytest.mark.parametrize(
    ("old", "new", "needles"),
    [
        ("seed = 3", "seed = -1", ["[survey].seed", "must be >= 0, got -1"]),
        ("epsilon = 1.0", "epsilon = inf", ["[survey].epsilon", "finite"]),
        ("batch_size = 50", "batch_size = 50\nstop_width = inf", ["[survey].stop_width", "inf"]),
        ("batch_size = 50", "batch_size = 50\nstop_expected_tv = nan", ["stop_expected_tv"]),
        ("batch_size = 50", "batch_size = 50\nalpha = inf", ["[survey].alpha", "inf"]),
        ('utility = "fisher"', 'utility = "semi_adaptive"\nalpha = inf', ["[survey].alpha"]),
        ('utility = "fisher"', 'utility = "nonsense"', ["[survey].utility", "nonsense"]),
        ("k = 4", "k = 100000000", ["[survey].k: 100,000,000 categories", "GiB", "at most 10,000"]),
        ("n = 200", "n = 1000000000000", ["[survey].n: 1,000,000,000,000 users", "at most 100,0"]),
        ("n = 200", "n = 100000000000000000000", ["[survey].n", "GiB", "at most 100,000,000"]),
    ],
)
def test_a_survey_spec_is_checked_whole_before_anything_is_written(
    tmp_path, capsys, old, new, needles
):
    spec = survey_spec(tmp_path, compare=True, replace=[(old, new)])
    if "k = 100000000" in new:  # the population's k must agree: a uniform one of that size
        text = spec.read_text().replace('kind = "frequencies"\nfrequencies = [0.7, 0.2, 0.07, '
                                        '0.03]', 'kind = "uniform"')  # fmt: skip
        spec.write_text(text)
    out = tmp_path / "out"
    code = main(["survey", str(spec), "--out", str(out), "--quiet"])
    one_line_error(capsys, code, "s.toml: ", *needles)
    assert not out.exists() or not any(out.iterdir()), sorted(out.iterdir())


@pytest.mark.slow
def test_a_semi_adaptive_survey_beside_its_baseline_runs(tmp_path, capsys):
    spec = survey_spec(tmp_path, compare=True,
                       replace=[('utility = "fisher"', 'utility = "semi_adaptive"\nalpha = 0.2')])
    out = tmp_path / "out"
    assert main(["survey", str(spec), "--out", str(out), "--quiet"]) == 0
    assert "| non-adaptive baseline" in (out / "report.md").read_text()


STOPPING = [("batch_size = 50", "batch_size = 50\nstop_width = 0.9")]


@pytest.mark.slow
def test_a_resumed_survey_that_had_stopped_collects_no_one(tmp_path, capsys):
    from bayesldp.adaptive import AdaptiveSurvey

    spec = survey_spec(tmp_path, compare=True, replace=STOPPING)
    out = tmp_path / "out"
    assert main(["survey", str(spec), "--out", str(out), "--quiet"]) == 0
    report = (out / "report.md").read_text()
    stopped = int(re.search(r"adaptive RRRR: stopped at (\d+) users", report).group(1))
    assert stopped < 200, report
    before = {p.name: p.stat().st_mtime_ns for p in out.iterdir()}
    capsys.readouterr()
    for _ in range(2):
        assert main(["survey", str(spec), "--resume", str(out), "--quiet"]) == 0
        printed = capsys.readouterr().out
        assert f"adaptive RRRR: had already stopped at {stopped} users" in printed, printed
        assert "nothing more to collect" in printed and "(as it was)" in printed
        assert AdaptiveSurvey.resume(out / "adaptive.ckpt").n_users == stopped
        assert {p.name: p.stat().st_mtime_ns for p in out.iterdir()} == before


def test_a_stopped_survey_resumed_in_python_surveys_no_one(tmp_path):
    import numpy as np

    from bayesldp.adaptive import AdaptiveSurvey

    x = np.random.default_rng(1).choice(4, size=400, p=[0.7, 0.2, 0.07, 0.03])
    path = tmp_path / "a.ckpt"
    first = AdaptiveSurvey(4, 1.0, utility="fisher", batch_size=50, random_seed=3,
                           checkpoint=path).simulate(x, stop={"width": 0.9})  # fmt: skip
    assert first.stopped is not None and first.n_users < 400
    again = AdaptiveSurvey.resume(path)
    again.simulate(x[again.n_users :], stop={"width": 0.9})
    assert again.n_users == first.n_users and again.stopped["users"] == first.n_users


def test_an_unfinished_survey_is_reported_as_interrupted_not_as_missing_its_target():
    from types import SimpleNamespace

    from bayesldp.workflows.survey import _stop_line

    cfg = {"n": 3000, "stop_width": 0.05, "stop_expected_tv": None}
    line = _stop_line("adaptive RRRR", SimpleNamespace(stopped=None, n_users=1900), cfg)
    assert "interrupted at 1,900 of 3,000 users" in line and "not met" not in line, line
    done = _stop_line("adaptive RRRR", SimpleNamespace(stopped=None, n_users=3000), cfg)
    assert "was not met in 3,000 users" in done


def test_ctrl_c_while_writing_a_survey_report_leaves_none_of_its_results(
    tmp_path, capsys, monkeypatch
):
    from bayesldp.workflows import survey

    def interrupt(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(survey, "_plot_trajectories", interrupt)
    out = tmp_path / "out"
    code = main(["survey", str(survey_spec(tmp_path)), "--out", str(out), "--quiet"])
    assert code == 130
    assert sorted(p.name for p in out.iterdir()) == ["adaptive.ckpt", "survey.json"]
    monkeypatch.undo()
    assert main(["survey", str(survey_spec(tmp_path)), "--resume", str(out), "--quiet"]) == 0
    assert {"report.md", "adaptive_history.nc", "trajectories.png"} <= {
        p.name for p in out.iterdir()
    }


# ------------------------------------------------------------------ results land together
QUICK_STUDY = SMALL_SPEC.replace("[bayes]\ndraws = 200\nchains = 2\n", "")  # no sampler
STUDY_RESULTS = ["estimates.csv", "metrics.csv", "report.md"]


def _cli(args: list[str], crash: str | None = None, **kwargs) -> subprocess.CompletedProcess:
    """``bayesldp ARGS`` in a subprocess of this tree, killed (SIGKILL) at ``crash``."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MPLBACKEND": "Agg"}
    env.pop("BAYESLDP_TEST_CRASH", None)
    if crash is not None:
        env["BAYESLDP_TEST_CRASH"] = crash
    return subprocess.run([sys.executable, "-m", "bayesldp", *args], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=120, **kwargs)  # fmt: skip


def test_a_run_killed_while_publishing_is_finished_by_the_next_run(tmp_path, capsys):
    spec = tmp_path / "q.toml"
    spec.write_text(QUICK_STUDY)
    out = tmp_path / "out"
    killed = _cli(["run", str(spec), "--out", str(out), "--quiet", "--no-figures"], "publish")
    assert killed.returncode == -9, killed.stderr
    moved = [p.name for p in out.iterdir() if not p.name.startswith(".")]
    assert moved == ["estimates.csv"], moved  # the kill came after the first move
    assert len(list(out.glob(".bayesldp-staging-*"))) == 1
    assert main(["run", str(spec), "--out", str(out), "--quiet", "--no-figures"]) == 0
    err = capsys.readouterr().err
    assert "a run was killed while moving its results into place; moved the rest" in err, err
    assert sorted(p.name for p in out.iterdir()) == STUDY_RESULTS  # no staging, no lock


def test_a_staging_directory_of_a_run_killed_before_publishing_is_removed(tmp_path, capsys):
    spec = tmp_path / "q.toml"
    spec.write_text(QUICK_STUDY)
    out = tmp_path / "out"
    (out / ".bayesldp-staging-old").mkdir(parents=True)
    (out / ".bayesldp-staging-old" / "report.md").write_text("half")
    assert main(["run", str(spec), "--out", str(out), "--quiet", "--no-figures"]) == 0
    assert "removed the unfinished results of a run that was killed" in capsys.readouterr().err
    assert sorted(p.name for p in out.iterdir()) == STUDY_RESULTS
    assert (out / "report.md").read_text() != "half"


def test_a_directory_in_the_way_of_a_result_fails_before_any_file_is_moved(tmp_path, capsys):
    spec = tmp_path / "q.toml"
    spec.write_text(QUICK_STUDY)
    out = tmp_path / "out"
    (out / "report.md").mkdir(parents=True)
    code = main(["run", str(spec), "--out", str(out), "--quiet", "--no-figures"])
    one_line_error(capsys, code, "report.md: is a directory", "no result was written")
    assert sorted(p.name for p in out.iterdir()) == ["report.md"]  # nothing moved in


def test_a_store_killed_between_its_manifest_and_current_is_made_afresh(tmp_path, capsys):
    store = tmp_path / "store"
    args = ["append", str(store), str(_reports(tmp_path)), "--mechanism", "GRR", "--k", "3",
            "--epsilon", "1"]  # fmt: skip
    from bayesldp.mechanisms import make_mechanism
    from bayesldp.workflows.tally_store import TallyStore, is_tally_store

    killed = subprocess.run(
        [sys.executable, "-c", "import sys; from bayesldp.mechanisms import make_mechanism; "
         "from bayesldp.workflows.tally_store import TallyStore; "
         "TallyStore.create(sys.argv[1], make_mechanism('GRR', 3, 1.0))", str(store)],
        env={**os.environ, "PYTHONPATH": str(ROOT), "BAYESLDP_TEST_CRASH": "store-created"},
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert killed.returncode == -9, killed.stderr
    assert (store / "manifest-0.json").is_file() and not (store / "CURRENT").exists()
    assert not is_tally_store(store)  # no store (made afresh), not a damaged one
    assert main(args) == 0, capsys.readouterr().err
    assert TallyStore(store).tally().n == 3
    assert not (store / ".creating").exists()
    with pytest.raises(InvalidInputError, match="already holds a tally store"):
        TallyStore.create(store, make_mechanism("GRR", 3, 1.0))


def _reports(tmp_path: Path, name: str = "r.csv", text: str = "report\n0\n1\n2\n") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_a_failed_store_creation_leaves_no_directory(tmp_path, capsys):
    store = tmp_path / "a" / "b" / "store"
    bad = _reports(tmp_path, "bad.csv", "report\n0\n7\n")
    code = main(["append", str(store), str(bad), "--mechanism", "GRR", "--k", "3",
                 "--epsilon", "1"])  # fmt: skip
    one_line_error(capsys, code, "bad.csv")
    assert not (tmp_path / "a").exists(), list((tmp_path / "a").rglob("*"))


# ------------------------------------------------------------------ unreadable and read-only
def _denied_for(monkeypatch, cls_or_module, name: str, target: Path) -> None:
    """Make ``cls_or_module.name`` raise PermissionError for ``target`` (root reads anything,
    so a chmod would not do)."""
    real = getattr(cls_or_module, name)

    def denied(*args, **kwargs):
        first = args[0] if args else None
        if isinstance(first, str | os.PathLike) and Path(first) == target:
            raise PermissionError(13, "Permission denied", str(target))
        return real(*args, **kwargs)

    monkeypatch.setattr(cls_or_module, name, denied)


def test_an_unreadable_report_file_is_one_line(tmp_path, capsys, monkeypatch):
    from bayesldp.workflows import report_files

    reports = _reports(tmp_path)
    _denied_for(monkeypatch, report_files, "csv_stamp", reports)
    code = main(["estimate", str(reports), "--mechanism", "GRR", "--k", "3", "--epsilon", "1"])
    one_line_error(capsys, code, f"reports: cannot read {reports}", "Permission denied")


def test_an_unreadable_report_directory_is_one_line(tmp_path, capsys, monkeypatch):
    folder = tmp_path / "reports"
    folder.mkdir()
    _reports(folder)
    _denied_for(monkeypatch, Path, "iterdir", folder)
    code = main(["estimate", str(folder), "--mechanism", "GRR", "--k", "3", "--epsilon", "1"])
    one_line_error(capsys, code, f"cannot list the directory {folder}", "Permission denied")


def test_an_unreadable_labels_file_is_one_line(tmp_path, capsys, monkeypatch):
    labels = tmp_path / "labels.txt"
    labels.write_text("a\nb\nc\n")
    _denied_for(monkeypatch, Path, "read_text", labels)
    code = main(["estimate", str(_reports(tmp_path)), "--mechanism", "GRR", "--k", "3",
                 "--epsilon", "1", "--labels-file", str(labels)])  # fmt: skip
    one_line_error(capsys, code, f"--labels-file: cannot read {labels}", "Permission denied")


def test_an_unreadable_spec_is_one_line(tmp_path, capsys, monkeypatch):
    spec = tmp_path / "q.toml"
    spec.write_text(QUICK_STUDY)
    _denied_for(monkeypatch, Path, "read_text", spec)
    code = main(["run", str(spec), "--out", str(tmp_path / "out"), "--quiet"])
    one_line_error(capsys, code, f"{spec}: cannot read the spec", "Permission denied")


def test_a_read_only_store_is_one_line(tmp_path, capsys, monkeypatch):
    import builtins

    store = tmp_path / "store"
    args = ["append", str(store), str(_reports(tmp_path)), "--mechanism", "GRR", "--k", "3",
            "--epsilon", "1"]  # fmt: skip
    assert main(args) == 0
    capsys.readouterr()
    _denied_for(monkeypatch, builtins, "open", store / ".bayesldp.lock")
    code = main(["append", str(store), str(_reports(tmp_path, "more.csv"))])
    one_line_error(capsys, code, f"store: {store}: cannot write its lock file", "Permission")


def test_os_errors_no_check_foresaw_are_one_line_naming_the_path(tmp_path, capsys, monkeypatch):
    from bayesldp.workflows import cli

    def unwritable(args):
        raise PermissionError(13, "Permission denied", "/somewhere/file")

    monkeypatch.setattr(cli, "cmd_recommend", unwritable)
    code = main(["recommend", "--k", "3", "--epsilon", "1", "--n", "10"])
    one_line_error(capsys, code, "/somewhere/file: Permission denied")


# ------------------------------------------------------------------ sizes, checked first
MEMORY = "more than half of this machine's"


@pytest.mark.parametrize(
    ("options", "needles"),
    [
        (["--mechanism", "GRR", "--k", "1e11"], ["k: 100,000,000,000 categories", "at most"]),
        (["--mechanism", "GRR", "--k", "100000000000"], ["k: 100,000,000,000 categories"]),
        (["--mechanism", "SPL", "--k", "3,4,1e10"], ["ks[2]: 10,000,000,000 categories"]),
        (["--mechanism", "Laplace", "--k", "4", "--output-bins", "1e9"],
         ["counts of 1,000,000,000 output bins", "output bins)"]),
        (["--mechanism", "Laplace", "--k", "4", "--output-bins", "100000000"],
         ["counts of 100,000,000 output bins", "at most"]),
    ],
)
def test_huge_sizes_are_refused_before_any_allocation_saying_the_limit(
    tmp_path, capsys, options, needles
):
    import time

    reports = _reports(tmp_path, text="report\n0.1\n0.5\n" if "Laplace" in options
                       else "user,attribute,report\n0,0,1\n0,1,2\n0,2,0\n" if "SPL" in options
                       else "report\n0\n1\n2\n")  # fmt: skip
    start = time.perf_counter()
    code = main(["estimate", str(reports), *options, "--epsilon", "1"])
    one_line_error(capsys, code, *needles, MEMORY)
    assert time.perf_counter() - start < 10


def test_a_fine_numerical_tally_needs_no_output_bins_squared(tmp_path, capsys):
    reports = _reports(tmp_path, text="report\n0.1\n0.5\n0.9\n")
    args = ["estimate", str(reports), "--mechanism", "Laplace", "--k", "4", "--epsilon", "1",
            "--output-bins", "1e6", "--method", "oracle", "--output", "json"]  # fmt: skip
    assert main(args) == 0, capsys.readouterr().err


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--k", "1.5"], "expected a whole number of categories"),
        (["--k", "1e3", "--output-bins", "2.5"], "expected a whole number (1000, 1e3)"),
    ],
)
def test_sizes_written_as_floats_are_read_alike_or_refused_clearly(tmp_path, capsys, args, needle):
    code = None
    with pytest.raises(SystemExit) as info:
        code = main(["estimate", str(_reports(tmp_path)), "--mechanism", "Laplace",
                     "--epsilon", "1", *args])  # fmt: skip
    assert code is None and info.value.code == 2
    assert needle in capsys.readouterr().err


def test_toml_floats_for_sizes_say_how_to_write_them(tmp_path):
    spec = survey_spec(tmp_path, replace=[("k = 4", "k = 1e8")])
    with pytest.raises(SpecError, match=r"\[survey\]\.k: expected an integer, got 100000000\.0 "
                       r"\(TOML reads 1e\+08 as a number with a fraction: write 100_000_000\)"):
        load_spec(spec)


def _model(tmp_path: Path, name: str, *replace: tuple[str, str]) -> Path:
    text = (ROOT / "models" / name).read_text(encoding="utf-8")
    for old, new in replace:
        assert re.search(old, text, flags=re.M), old
        text = re.sub(old, new, text, count=1, flags=re.M)
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("model", "old", "new", "needles"),
    [
        ("heavy_hitters.toml", r"^k = 65536", "k = 1_000_000_000",
         ["[population].k: 1,000,000,000 items", MEMORY, "items"]),
        ("heavy_hitters.toml", r"^repeats = 3", "repeats = 1_000_000_000",
         ["[study].repeats: 1,000,000,000 repeats", "at most"]),
        ("heavy_hitters.toml", r"^n = 100000", "n = 10_000_000_000",
         ["[study].n: 10,000,000,000 users", "at most"]),
        ("longitudinal.toml", r"^rounds = 6", "rounds = 100_000_000",
         ["[study].n x [study].rounds: 500,000,000,000 user-rounds", "at most"]),
        ("longitudinal.toml", r"^rounds = 6", "rounds = 1_000_000_000_000", ["user-rounds"]),
        ("longitudinal.toml", r"^rounds = 6", "rounds = 0", ["[study].rounds: must be >= 2"]),
        ("longitudinal.toml", r"^step = 0.3", "step = nan",
         ["[drift].step", "must be >= 0 and finite", "nan"]),
        ("longitudinal.toml", r"^alpha = 1.0", "alpha = inf", ["[population].alpha", "inf"]),
        ("quickstart.toml", r"^alpha = 1.0", "alpha = inf", ["[population].alpha", "inf"]),
    ],
)
def test_spec_sizes_and_values_are_refused_at_load(tmp_path, capsys, model, old, new, needles):
    import time

    spec = _model(tmp_path, model, (old, new))
    out = tmp_path / "out"
    start = time.perf_counter()
    code = main(["run", str(spec), "--out", str(out), "--quiet"])
    one_line_error(capsys, code, *needles)
    assert time.perf_counter() - start < 10 and not out.exists()


def test_a_heavy_hitter_study_spawns_each_repeat_as_it_starts():
    """The repeats' streams are root.spawn's children, made one at a time (no list of 10^9)."""
    import inspect

    import numpy as np

    from bayesldp.workflows import heavy_hitter_study

    assert "root.spawn(repeats)" not in inspect.getsource(heavy_hitter_study)
    root = np.random.SeedSequence(2026)
    made = [np.random.SeedSequence(root.entropy, spawn_key=(*root.spawn_key, r),
                                   pool_size=root.pool_size) for r in range(3)]  # fmt: skip
    assert [s.generate_state(2).tolist() for s in made] == [
        s.generate_state(2).tolist() for s in root.spawn(3)
    ]


# ------------------------------------------------------------------ schedulers and workers
def test_a_nonsense_scheduler_is_one_line(tmp_path, capsys):
    code = main(["estimate", str(_reports(tmp_path)), "--mechanism", "GRR", "--k", "3",
                 "--epsilon", "1", "--scheduler", "nonsense"])  # fmt: skip
    one_line_error(capsys, code, "scheduler: 'nonsense' is not local, threads, synchronous",
                   "tcp://")  # fmt: skip


def test_a_bad_file_is_returned_by_its_task_not_raised_in_the_worker(tmp_path, capsys):
    """A worker logs "Compute Failed" and a traceback for a task that raises: a bad file's
    expected refusal is returned by the task and raised again in the client instead."""
    from bayesldp.errors import BayesLDPError
    from bayesldp.mechanisms import make_mechanism
    from bayesldp.workflows import dask_tally

    bad = _reports(tmp_path, "bad.csv", "report\n0\n9\n")
    refused = dask_tally._tally_batch([_reports(tmp_path), bad], make_mechanism("GRR", 3, 1.0))
    assert isinstance(refused, dask_tally._Refused)
    assert isinstance(refused.error, BayesLDPError) and "bad.csv" in str(refused.error)
    code = main(["estimate", str(tmp_path), "--mechanism", "GRR", "--k", "3", "--epsilon", "1",
                 "--scheduler", "synchronous"])  # fmt: skip
    one_line_error(capsys, code, "bad.csv", "must lie in 0..2, got 9")


@pytest.mark.slow
def test_a_bad_file_under_the_local_cluster_prints_no_worker_traceback(tmp_path):
    _reports(tmp_path, "a.csv")
    _reports(tmp_path, "b.csv", "report\n0\n9\n")
    done = _cli(["estimate", str(tmp_path), "--mechanism", "GRR", "--k", "3", "--epsilon", "1"])
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [
        f"bayesldp: error: {tmp_path / 'b.csv'}: reports: must lie in 0..2, got 9"
    ], done.stderr


# ------------------------------------------------------------------ heavy hitters in Python
@pytest.mark.parametrize("item", ["\ud800", "ok\udfffok"])
def test_a_lone_surrogate_in_an_item_names_the_item(item):
    from bayesldp.heavy_hitters import PEM

    with pytest.raises(InvalidInputError, match=r"items\[1\]: .*lone surrogate"):
        PEM(k=3, epsilon=2.0).encoder.encode(["a", item])


def test_reports_to_a_missing_directory_is_a_clear_error(tmp_path):
    import numpy as np

    from bayesldp.heavy_hitters import PEM

    reports = PEM(k=3, epsilon=2.0).perturb(np.array(["a", "b"] * 5), np.random.default_rng(0))
    with pytest.raises(InvalidInputError, match=r"the directory .*nowhere does not exist"):
        reports.to_file(tmp_path / "nowhere" / "r.csv")
    assert reports.to_file(tmp_path / "r.csv").is_file()
