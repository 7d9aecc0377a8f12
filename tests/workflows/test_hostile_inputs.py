"""Hostile inputs beyond the tally store: surveys, overflowing counts, interrupts,
concurrent writers, numerical mechanisms at extreme settings, memory, BOMs and odd paths.  Each
case states its expected outcome: a one-line error of the package's own type (exit code 2 from
the CLI; 130 for an interrupt), or the right answer.

* 4: a survey resumed under a spec whose population (or any other setting) changed is refused,
  naming the setting and both values, before any work; another name is not a setting;
* 7: a directory holding only ``non_adaptive.ckpt`` is refused at once, naming what is there; a
  fresh run into a directory holding checkpoints is refused at once;
* 6: a full disk or a file-size limit during a checkpoint: one line, the last checkpoint
  intact and resumable, no stray ``adaptive.ckpt.tmp``; Ctrl-C in a checkpoint likewise;
* 8: a count or a total of counts beyond 2**63 - 1 (CSV, Python report tables, numerical
  mechanisms, a tally store's total) is refused as too large for a 64-bit count, never wrapped;
* 11: Ctrl-C in ``run`` / ``estimate``: one line, exit 130, no traceback (workers of a
  LocalCluster included), no ``.bayesldp.lock`` (nor after a normal run), the report complete
  or absent (``run`` interrupted at 20 random moments, slow);
* 12: concurrent ``--save-posterior`` onto one file: all succeed, the file is one complete
  posterior; a failed write leaves the old file;
* 9, 13, 14: numerical domains whose width or constants overflow, or too narrow for k bins,
  are refused naming lo, hi; SquareWave / Piecewise at eps 40-700 estimate stably; Gaussian at
  eps 1e-8 has a realised epsilon with no IntegrationWarning;
* 15, 16, 20: large allocations are refused before they are made, saying how much, what for and
  what to change; ``recommend --k 100000`` ranks GRR (closed form) and lists what it skipped;
  ``recommend --k 10**9`` fails in seconds;
* 10, 17, 18, 19: study rows name the parameters that tell entries apart (OLH g); BOMs in a
  labels file or a TOML spec are dropped; a sub-directory named x.csv is not a report file;
  HMC under a prior of 1e-20 returns a posterior, not a LinAlgError.
"""

from __future__ import annotations

import errno
import os
import re
import resource
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from bayesldp.errors import StoreWriteError
from bayesldp.workflows.cli import main
from tests.workflows.test_cli import SMALL_SPEC

SURVEY = """
[survey]
name = "s"
seed = 3
n = 200
k = 4
epsilon = 1.0
utility = "fisher"
batch_size = 50
compare_non_adaptive = {compare}
[population]
kind = "frequencies"
frequencies = [0.7, 0.2, 0.07, 0.03]
"""


def survey_spec(tmp_path: Path, name: str = "s.toml", compare: bool = False, replace=()) -> Path:
    text = SURVEY.format(compare=str(compare).lower())
    for old, new in replace:
        text = text.replace(old, new)
    path = tmp_path / name
    path.write_text(text)
    return path


def one_line_error(capture, code, *needles, exit_code=2) -> str:
    err = capture.readouterr().err
    assert code == exit_code, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("bayesldp: error: "), err
    assert "Traceback" not in err
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


# ------------------------------------------------------------ 4. a resume under another survey
@pytest.mark.parametrize(
    ("old", "new", "named"),
    [
        ("[0.7, 0.2, 0.07, 0.03]", "[0.25, 0.25, 0.25, 0.25]", "[population].frequencies"),
        ('kind = "frequencies"', 'kind = "uniform"', "[population].kind"),
        ("n = 200", "n = 300", "[survey].n"),
        ("batch_size = 50", "batch_size = 25", "[survey].batch_size"),
    ],
)
def test_a_resume_under_a_changed_population_is_refused(tmp_path, capsys, old, new, named):
    out = tmp_path / "out"
    assert main(["survey", str(survey_spec(tmp_path)), "--out", str(out), "--quiet"]) == 0
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    capsys.readouterr()
    changed = tmp_path / "changed.toml"
    changed.write_text(survey_spec(tmp_path).read_text().replace(old, new))
    code = main(["survey", str(changed), "--resume", str(out), "--quiet"])
    line = one_line_error(capsys, code, named, "when the survey started", "in the spec")
    assert "started under other settings" in line
    after = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    assert after == before  # nothing rewritten
    # the unchanged spec (another name is not a setting) still resumes
    same = survey_spec(tmp_path, "same.toml", replace=[('name = "s"', 'name = "other"')])
    assert main(["survey", str(same), "--resume", str(out), "--quiet"]) == 0


# ------------------------------------------------------- 7. checkpoints that do not fit the run
def test_a_directory_with_only_the_baseline_checkpoint_is_refused_at_once(tmp_path, capsys):
    out = tmp_path / "out"
    spec = survey_spec(tmp_path, compare=True)
    assert main(["survey", str(spec), "--out", str(out), "--quiet"]) == 0
    (out / "adaptive.ckpt").unlink()
    capsys.readouterr()
    code = main(["survey", str(spec), "--resume", str(out), "--quiet"])
    one_line_error(capsys, code, "holds only non_adaptive.ckpt, not adaptive.ckpt")
    assert not (out / "adaptive.ckpt").exists()  # no work redone
    # a fresh run into it is refused at once too, naming what is there
    code = main(["run", str(spec), "--out", str(out), "--quiet"])
    one_line_error(capsys, code, "holds a survey checkpoint (non_adaptive.ckpt)", "--resume")
    assert not (out / "adaptive.ckpt").exists()


# ----------------------------------------------------- 6. a full disk during a survey checkpoint
def test_a_full_disk_during_a_checkpoint_is_one_line_and_leaves_no_temp(
    tmp_path, capsys, monkeypatch
):
    from bayesldp.adaptive import checkpoint

    out = tmp_path / "out"
    real, calls = checkpoint.np.savez, []

    def savez(fh, **arrays):  # the second checkpoint hits a full disk, half written
        calls.append(1)
        if len(calls) == 2:
            fh.write(b"PK\x03\x04 half")
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real(fh, **arrays)

    monkeypatch.setattr(checkpoint.np, "savez", savez)
    code = main(["survey", str(survey_spec(tmp_path)), "--out", str(out), "--quiet"])
    one_line_error(capsys, code, "No space left on device", "previous checkpoint", "intact")
    assert not (out / "adaptive.ckpt.tmp").exists()
    assert not any(p.name.endswith(".tmp") for p in out.iterdir())
    monkeypatch.setattr(checkpoint.np, "savez", real)
    assert main(["survey", str(survey_spec(tmp_path)), "--resume", str(out), "--quiet"]) == 0


def test_a_checkpoint_write_error_is_the_package_type(tmp_path, monkeypatch):
    from bayesldp.adaptive import checkpoint

    def savez(fh, **arrays):
        raise OSError(errno.EFBIG, os.strerror(errno.EFBIG))

    monkeypatch.setattr(checkpoint.np, "savez", savez)
    with pytest.raises(StoreWriteError, match=r"File too large.*no checkpoint was written"):
        arrays = {key: np.zeros(2) for key in checkpoint.ARRAY_KEYS}
        checkpoint.write_state(tmp_path / "a.ckpt", {}, arrays)
    assert list(tmp_path.iterdir()) == []


def test_a_file_size_limit_during_a_survey_is_one_line(tmp_path):
    out = tmp_path / "out"
    spec = survey_spec(tmp_path)

    def limit():  # definitions fit, a checkpoint does not
        resource.setrlimit(resource.RLIMIT_FSIZE, (3000, resource.RLIM_INFINITY))

    run = subprocess.run(
        [sys.executable, "-c", "import sys; from bayesldp.workflows.cli import main; "
         "sys.exit(main(sys.argv[1:]))", "survey", str(spec), "--out", str(out), "--quiet"],
        capture_output=True, text=True, preexec_fn=limit, timeout=300,
    )  # fmt: skip
    assert run.returncode == 2, run.stderr
    assert run.stderr.count("\n") == 1 and "File too large" in run.stderr, run.stderr
    assert not any(p.name.endswith(".tmp") for p in out.iterdir())


# ------------------------------------------------------------------- 8. counts beyond 64 bits
TOO_LARGE = "too large for a 64-bit count"


@pytest.mark.parametrize(
    ("counts", "message"),
    [
        ([2**63 - 1, 2**63 - 1, 3], "the total 18,446,744,073,709,551,617 is " + TOO_LARGE),
        ([2**63, 1, 1], "a count of 9,223,372,036,854,775,808 is " + TOO_LARGE),
        ([2**62, 2**62, 1], "the total 9,223,372,036,854,775,809 is " + TOO_LARGE),
        ([10**23, 1, 1], "a count of 100,000,000,000,000,000,000,000 is " + TOO_LARGE),
    ],
)
def test_count_sums_beyond_int64_are_refused(tmp_path, capsys, counts, message):
    import pandas as pd

    from bayesldp.errors import InvalidInputError
    from bayesldp.mechanisms import make_mechanism

    csv = tmp_path / "agg.csv"
    csv.write_text("report,count\n" + "".join(f"{i % 3},{c}\n" for i, c in enumerate(counts)))
    code = main(["estimate", str(csv), "--mechanism", "GRR", "--k", "3", "--epsilon", "1"])
    one_line_error(capsys, code, message)
    if max(counts) < 2**64:  # a Python report table: the same refusal, never a wrapped n
        frame = pd.DataFrame({"report": [0, 1, 2], "count": np.array(counts, dtype=np.uint64)})
        for name in ("GRR", "HadamardResponse"):
            with pytest.raises(InvalidInputError, match=message.replace("(", r"\(")):
                make_mechanism(name, 3, 1.0).tally_frame(frame)


def test_numerical_count_sums_beyond_int64_are_refused():
    import pandas as pd

    from bayesldp.errors import InvalidInputError
    from bayesldp.mechanisms import make_mechanism

    frame = pd.DataFrame({"report": [0.1, 0.2], "count": [2**63 - 1, 5]})
    with pytest.raises(InvalidInputError, match=TOO_LARGE):
        make_mechanism("SquareWave", 4, 1.0).tally_frame(frame)
    frame = pd.DataFrame({"report": [0.1, 0.2], "count": [2**62, 5]})
    assert make_mechanism("SquareWave", 4, 1.0).tally_frame(frame).n == 2**62 + 5


# -------------------------------------------------------------- 11. Ctrl-C and the lock file
STUDY = SMALL_SPEC  # a two-cell OUE study (tests/workflows/test_cli.py)
STUDY_FILES = ["estimates.csv", "metrics.csv", "posterior_OUE_k_4__epsilon_0_5.nc",
               "posterior_OUE_k_4__epsilon_2.nc", "report.md"]  # fmt: skip


@pytest.mark.filterwarnings("ignore::bayesldp.errors.ConvergenceWarning")
def test_a_normal_run_leaves_no_lock_and_ctrl_c_is_one_line(tmp_path, capsys, monkeypatch):
    from bayesldp.workflows import study

    spec = tmp_path / "study.toml"
    spec.write_text(STUDY)
    out = tmp_path / "out"
    assert main(["run", str(spec), "--out", str(out), "--quiet", "--no-figures"]) == 0
    assert sorted(p.name for p in out.iterdir()) == STUDY_FILES  # no lock, no staging
    capsys.readouterr()

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(study, "run_study", interrupted)
    fresh = tmp_path / "fresh"
    code = main(["run", str(spec), "--out", str(fresh), "--quiet"])
    err = capsys.readouterr().err
    assert code == 130 and err == "bayesldp: interrupted\n", err
    assert list(fresh.iterdir()) == []


def test_ctrl_c_while_writing_the_report_leaves_none_of_it(tmp_path, capsys, monkeypatch):
    from bayesldp.workflows import study_report

    spec = tmp_path / "study.toml"
    spec.write_text(STUDY.replace("methods = [\"oracle\", \"mle\"]", "methods = [\"oracle\"]")
                    .replace("chains = 2", "chains = 1").replace("draws = 200", "draws = 50"))
    real = study_report._write_csv

    def write_then_interrupt(path, rows):  # metrics.csv written, then Ctrl-C
        real(path, rows)
        raise KeyboardInterrupt

    monkeypatch.setattr(study_report, "_write_csv", write_then_interrupt)
    out = tmp_path / "out"
    with pytest.warns(Warning):  # a 50-draw posterior warns about its convergence
        code = main(["run", str(spec), "--out", str(out), "--quiet", "--no-figures"])
    assert code == 130 and capsys.readouterr().err == "bayesldp: interrupted\n"
    assert list(out.iterdir()) == []  # no metrics.csv, no staging directory, no lock


def test_ctrl_c_during_a_posterior_estimate_is_one_line(tmp_path, capsys, monkeypatch):
    import bayesldp.bayes

    csv = tmp_path / "r.csv"
    csv.write_text("report\n0\n1\n2\n1\n")

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(bayesldp.bayes, "fit", interrupted)
    saved = tmp_path / "post.nc"
    code = main(["estimate", str(csv), "--mechanism", "GRR", "--k", "3", "--epsilon", "1",
                 "--method", "posterior", "--save-posterior", str(saved)])  # fmt: skip
    assert code == 130 and capsys.readouterr().err == "bayesldp: interrupted\n"
    assert not saved.exists()


def test_ctrl_c_swallowed_by_a_callback_from_c_still_ends_the_command(
    tmp_path, capsys, monkeypatch
):
    """Python hands a KeyboardInterrupt raised inside a callback from C (numba's compiler calls
    some) to ``sys.unraisablehook`` and goes on; the command delivers it again, once the hook
    has returned, and ends with one line."""
    import signal
    import time
    import types

    import bayesldp.bayes

    csv = tmp_path / "r.csv"
    csv.write_text("report\n0\n1\n2\n1\n")

    def swallowed_then_busy(*args, **kwargs):
        event = types.SimpleNamespace(exc_type=KeyboardInterrupt, exc_value=KeyboardInterrupt(),
                                      exc_traceback=None, err_msg=None, object=None)  # fmt: skip
        sys.unraisablehook(event)  # what Python does with it inside the callback
        time.sleep(30)  # the work that goes on after the callback
        raise AssertionError("the interrupt was lost")

    monkeypatch.setattr(bayesldp.bayes, "fit", swallowed_then_busy)
    # the command's own handling of Ctrl-C (a pytest-xdist worker ignores SIGINT)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    start = time.monotonic()
    try:
        code = main(["estimate", str(csv), "--mechanism", "GRR", "--k", "3", "--epsilon", "1",
                     "--method", "posterior"])  # fmt: skip
    finally:
        signal.signal(signal.SIGINT, previous)
    assert code == 130 and capsys.readouterr().err == "bayesldp: interrupted\n"
    assert time.monotonic() - start < 10


@pytest.mark.parametrize("link", ["cause", "context"])
def test_an_error_a_ctrl_c_caused_ends_the_command_as_an_interrupt(tmp_path, capsys,
                                                                    monkeypatch, link):
    """An interrupt during a class body's ``__set_name__`` (a lazy import, such as xarray's of
    dask.array) reaches the command as a RuntimeError raised from the KeyboardInterrupt; the
    command answers it as the Ctrl-C it was: one line, exit 130, no traceback."""
    import bayesldp.bayes

    csv = tmp_path / "r.csv"
    csv.write_text("report\n0\n1\n2\n1\n")

    def interrupted_inside_an_import(*args, **kwargs):
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt as interrupt:
            if link == "cause":
                raise RuntimeError("Error calling __set_name__ on 'cached_property'") from interrupt
            raise RuntimeError("while handling it")  # noqa: B904 (the implicit context)

    monkeypatch.setattr(bayesldp.bayes, "fit", interrupted_inside_an_import)
    code = main(["estimate", str(csv), "--mechanism", "GRR", "--k", "3", "--epsilon", "1",
                 "--method", "posterior"])  # fmt: skip
    assert code == 130 and capsys.readouterr().err == "bayesldp: interrupted\n"


def test_a_ctrl_c_while_the_parser_imports_ends_the_command_as_an_interrupt(capsys, monkeypatch):
    """A Ctrl-C while the parser imports the mechanisms' modules (scipy.optimize's compiled
    HiGHS, for one) reaches the command as an ImportError "initialization failed" raised from
    the KeyboardInterrupt (seen in the interrupt sweep); the command answers it as the Ctrl-C it
    was: one line, exit 130, no traceback."""
    import bayesldp.mechanisms
    import bayesldp.workflows.cli as cli

    def interrupted_inside_a_module_initialisation():
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt as interrupt:
            raise ImportError("initialization failed") from interrupt

    monkeypatch.setattr(bayesldp.mechanisms, "all_parameters",
                        interrupted_inside_a_module_initialisation)  # fmt: skip
    assert cli.main(["mechanisms"]) == 130
    assert capsys.readouterr().err == "bayesldp: interrupted\n"


def test_an_error_not_caused_by_ctrl_c_is_not_an_interrupt():
    from bayesldp.workflows.cli_session import caused_by_interrupt

    try:
        try:
            raise ValueError("first")
        except ValueError as first:
            raise RuntimeError("second") from first
    except RuntimeError as exc:
        assert not caused_by_interrupt(exc)


def test_the_lock_file_goes_with_its_holder_and_a_waiter_takes_the_new_one(tmp_path):
    import threading

    from bayesldp.errors import InvalidInputError
    from bayesldp.workflows.outputs import directory_lock

    lock = tmp_path / ".bayesldp.lock"
    holding, release, done = threading.Event(), threading.Event(), []

    def waiter():
        with directory_lock(tmp_path, wait=10):
            holding.set()
            release.wait(10)
        done.append(1)

    with directory_lock(tmp_path):
        thread = threading.Thread(target=waiter)
        thread.start()  # it opens the file this run holds, and waits
        import time

        time.sleep(0.3)
    assert holding.wait(10) and lock.is_file()  # the waiter locked the file at the path
    with pytest.raises(InvalidInputError, match="in use by process"):
        with directory_lock(tmp_path):
            pass
    release.set()
    thread.join(10)
    assert done and not lock.exists()
    with pytest.raises(KeyboardInterrupt):
        with directory_lock(tmp_path):
            raise KeyboardInterrupt
    assert not lock.exists()


CLI = "import sys; from bayesldp.workflows.cli import main; sys.exit(main(sys.argv[1:]))"
#: CLI, with faulthandler's tracebacks of a crash written to the file named first
TRACED_CLI = "import faulthandler, sys; faulthandler.enable(open(sys.argv.pop(1), 'w')); " + CLI


@pytest.mark.slow
def test_run_interrupted_at_random_moments_leaves_all_or_nothing(tmp_path):
    """Ctrl-C (SIGINT to the process group, as a terminal sends it) at 20 random moments of
    ``bayesldp run``: the report complete or absent, no lock, no staging directory, no
    traceback; exit 130 (or 0 / killed by SIGINT when the signal came after the run's work).

    The moments start once the command exists: a Ctrl-C while Python is still importing the
    package (numpy, then bayesldp: the first second or so) ends with Python's own traceback,
    before any code of the command runs, so the moments are drawn from 1.5 times the measured
    import of the command's module to 1.1 times a whole run."""
    import random
    import signal
    import time

    spec = tmp_path / "study.toml"
    spec.write_text(STUDY)
    start = time.monotonic()
    subprocess.run([sys.executable, "-c", "import bayesldp.workflows.cli"], check=True)
    imported = time.monotonic() - start
    argv = [sys.executable, "-c", CLI, "run", str(spec), "--quiet", "--no-figures", "--out"]
    start = time.monotonic()
    subprocess.run([*argv, str(tmp_path / "full")], check=True, capture_output=True)
    full = time.monotonic() - start
    # after "interrupted" the command sends its stderr to /dev/null; a crash at exit (SIGABRT,
    # seen once) leaves its Python traceback in a file instead, for the failure message
    trace = tmp_path / "fault.txt"
    argv = [sys.executable, "-c", TRACED_CLI, str(trace), *argv[3:]]
    rng, outcomes = random.Random(42), []
    for i in range(20):
        out = tmp_path / f"out{i}"
        proc = subprocess.Popen([*argv, str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, start_new_session=True)  # fmt: skip
        time.sleep(rng.uniform(1.5 * imported, 1.1 * full))
        try:
            os.killpg(proc.pid, signal.SIGINT)
        except ProcessLookupError:
            pass
        _, err = proc.communicate(timeout=300)
        err += trace.read_text()  # empty unless the process crashed
        files = sorted(p.name for p in out.iterdir()) if out.exists() else []
        assert "Traceback" not in err, err
        assert files in ([], STUDY_FILES), (proc.returncode, files, err)
        if files == []:
            assert proc.returncode == 130 and err.endswith("bayesldp: interrupted\n"), err
        else:
            assert proc.returncode in (0, 130, -signal.SIGINT), (proc.returncode, err)
        outcomes.append(proc.returncode)
    assert 130 in outcomes


# --------------------------------------------------- 12. concurrent writers of one posterior
RACER = """
import sys, time
from pathlib import Path
from bayesldp.workflows.cli import main
go = Path(sys.argv[1])
while not go.exists():  # everything imported: start together
    time.sleep(0.001)
sys.exit(main(sys.argv[2:]))
"""


@pytest.mark.slow
def test_concurrent_save_posterior_onto_one_file_is_always_one_complete_posterior(tmp_path):
    from bayesldp.bayes import load_fit

    csv = tmp_path / "r.csv"
    csv.write_text("report\n" + "0\n1\n2\n1\n" * 50)
    saved = tmp_path / "post.nc"
    for round_ in range(2):
        go = tmp_path / f"go{round_}"
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", RACER, str(go), "estimate", str(csv), "--mechanism",
                 "GRR", "--k", "3", "--epsilon", "1", "--method", "posterior", "--quiet",
                 "--seed", str(seed), "--save-posterior", str(saved)],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            )
            for seed in range(3)
        ]
        go.touch()
        for proc in procs:
            _, err = proc.communicate(timeout=300)
            assert proc.returncode == 0 and "Traceback" not in err, err
        fit = load_fit(saved)  # one complete posterior, whichever writer renamed last
        assert fit.posterior["theta"].shape[-1] == 3
        assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


def test_save_fit_that_cannot_write_leaves_the_old_file(tmp_path, monkeypatch):
    import arviz as az

    from bayesldp.bayes import fit, load_fit, save_fit
    from bayesldp.mechanisms import make_mechanism

    tally = make_mechanism("GRR", 3, 1.0).tally(np.array([0, 1, 2, 1] * 20))
    idata = fit(tally, method="exact", random_seed=1)
    path = save_fit(idata, tmp_path / "post.nc")
    before = path.read_bytes()

    def full_disk(self, *args, **kwargs):
        Path(args[0]).write_bytes(b"\x89HDF half")
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(az.InferenceData, "to_netcdf", full_disk)
    with pytest.raises(StoreWriteError, match=r"No space left on device.*file there is unchanged"):
        save_fit(idata, path)
    assert path.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == [
        "post.nc"
    ]
    monkeypatch.undo()
    assert load_fit(path).posterior["theta"].shape[-1] == 3


# ------------------------------------------- 9, 13, 14. numerical mechanisms at the extremes
NUMERICAL = ["SquareWave", "Piecewise", "LaplaceNumeric", "Gaussian"]


@pytest.mark.parametrize("name", NUMERICAL)
@pytest.mark.parametrize(
    ("lo", "hi", "eps", "message"),
    [
        (-1e308, 1e308, 1.0, "the width hi - lo of [-1e+308, 1e+308] overflows float64"),
        (1.0, 1.0 + 4e-16, 1.0, "narrower than float64 can split into k = 4 bins"),
    ],
)
def test_numerical_domains_that_overflow_are_refused(name, lo, hi, eps, message):
    from bayesldp.errors import InvalidInputError
    from bayesldp.mechanisms import make_mechanism

    with pytest.raises(InvalidInputError, match=re.escape(message)):
        make_mechanism(name, 4, eps, lo=lo, hi=hi)


@pytest.mark.parametrize("name", NUMERICAL)
@pytest.mark.parametrize("eps", [1.0, 1e-3])
@pytest.mark.parametrize("end", [1e300, 1e307])
def test_a_wide_finite_domain_gives_finite_reports_or_a_clear_refusal(name, eps, end):
    from bayesldp.errors import InvalidInputError
    from bayesldp.mechanisms import make_mechanism

    try:
        mech = make_mechanism(name, 4, eps, lo=-end, hi=end)
    except InvalidInputError as exc:  # the noise scale or output range overflows
        assert end == 1e307 and "overflow" in str(exc) and "rescale" in str(exc)
        return
    assert np.isfinite(mech.perturb(np.array([-end, 0.0, end]), rng=0)).all()


@pytest.mark.parametrize("name", ["SquareWave", "Piecewise"])
@pytest.mark.parametrize("eps", [40.0, 60.0, 700.0])
def test_window_mechanisms_at_large_epsilon_are_stable(name, eps, capsys):
    from bayesldp.estimators import estimate
    from bayesldp.mechanisms import make_mechanism

    mech = make_mechanism(name, 4, eps)
    assert np.allclose(mech.channel.sum(axis=1), 1.0, atol=1e-12) and (mech.channel >= 0).all()
    assert np.linalg.cond(mech.channel) < 2.0  # nearly the identity: each value keeps its bin
    x = np.repeat([0.1, 0.3, 0.6, 0.9], [100, 200, 300, 400])
    tally = mech.tally(mech.perturb(x, rng=1))
    for method in ("oracle", "norm_sub", "mle"):
        freq = estimate(tally, method=method).frequencies
        assert np.abs(freq - [0.1, 0.2, 0.3, 0.4]).max() < 0.03, (method, freq)


def test_gaussian_at_tiny_epsilon_has_a_stable_realised_epsilon(capsys):
    from bayesldp.mechanisms import make_mechanism

    for eps in (1e-8, 1e-6):  # pytest turns any IntegrationWarning into an error here
        mech = make_mechanism("Gaussian", 4, eps)
        assert mech.realised_epsilon() == pytest.approx(eps, rel=1e-6)
        assert mech.realised_delta() == pytest.approx(1e-5, rel=1e-6)
    code = main(["audit", "Gaussian", "--k", "4", "--epsilon", "1e-8", "--trials", "1000"])
    out, err = capsys.readouterr()
    assert code == 0 and err == "" and "realised epsilon" in out


# --------------------------------------------------------- 15, 16, 20. memory refused at once
MEMORY = "GiB of memory, more than half of this machine's"


@pytest.mark.parametrize(
    ("case", "what", "change"),
    [
        ("OUE perturb", "OUE(k=10,000,000).perturb of 5,000 users", "perturb fewer users"),
        ("OLH support form", "OLH(k=1,000,000).tally of 200,000 reports", "in batches"),
        ("output bins", "counts of 100,000,000,000 output bins", "fewer output bins"),
        ("fit draws", "draws x chains = 500,000,000 x 4", "fewer draws or chains"),
        ("audit trials", "1,000,000,000,000 perturbations per input", "fewer trials"),
    ],
)
def test_large_allocations_are_refused_saying_how_much_what_for_and_what_to_change(
    case, what, change
):
    from bayesldp.audit import audit
    from bayesldp.bayes import fit
    from bayesldp.errors import InvalidInputError
    from bayesldp.mechanisms import make_mechanism

    with pytest.raises(InvalidInputError) as info:
        if case == "OUE perturb":
            make_mechanism("OUE", 10**7, 1.0).perturb(np.zeros(5000, dtype=int), rng=0)
        elif case == "OLH support form":
            mech = make_mechanism("OLH", 10**6, 1.0)
            mech.tally(mech.perturb(np.zeros(200_000, dtype=int), rng=0))
        elif case == "output bins":
            mech = make_mechanism("SquareWave", 4, 1.0, output_bins=10**11)
            mech.tally(mech.perturb(np.array([0.5]), rng=0))
        elif case == "fit draws":
            tally = make_mechanism("GRR", 3, 1.0).tally(np.array([0, 1, 2]))
            for method in ("hmc", "laplace", "sgld", "auto", "exact"):
                with pytest.raises(InvalidInputError, match=MEMORY):
                    fit(tally, method=method, draws=int(5e8), chains=4)
            fit(tally, method="exact", draws=int(5e8), chains=4)
        else:
            audit(make_mechanism("GRR", 3, 1.0), trials=10**12, rng=0)
    message = str(info.value)
    assert what in message and MEMORY in message and change in message, message


@pytest.mark.parametrize("k", [100_000])
def test_recommend_at_a_large_k_ranks_what_it_can_and_says_what_was_skipped(capsys, k):
    code = main(["recommend", "--k", str(k), "--epsilon", "1", "--n", "1000"])
    out, err = capsys.readouterr()
    assert code == 0 and err == "", err
    assert "| GRR |" in out and "exact (closed form)" in out
    assert "recommended: GRR" in out and "could not be ranked at K = 100,000" in out
    assert "not ranked: HadamardResponse:" in out and "GiB of memory" in out
    assert "not ranked: OUE: --method mle: the information of OUE is simulated" in out


def test_grr_closed_form_matches_its_channel():
    from bayesldp.bounds import asymptotic_mse
    from bayesldp.mechanisms import make_mechanism
    from bayesldp.workflows import recommend

    for k, eps in [(3, 1.0), (50, 3.0), (300, 0.5)]:
        mech = make_mechanism("GRR", k, eps)
        theta = np.full(k, 1.0 / k)
        exact, _ = asymptotic_mse(mech, theta, 1000)
        old, recommend.CLOSED_FORM_K = recommend.CLOSED_FORM_K, 2
        try:
            closed, source = recommend.expected_error(mech, "mle", 1000)
        finally:
            recommend.CLOSED_FORM_K = old
        assert source == "exact (closed form)" and closed == pytest.approx(exact, rel=1e-9)


def test_recommend_at_a_billion_categories_fails_fast(capsys):
    import time

    start = time.perf_counter()
    code = main(["recommend", "--k", str(10**9), "--epsilon", "1", "--n", "1000"])
    elapsed = time.perf_counter() - start
    one_line_error(capsys, code, "recommend --k 1,000,000,000", MEMORY, "smaller --k")
    assert elapsed < 5.0, elapsed


# ------------------------------------------------- 10. entries that differ only in parameters
TWO_OLH = """
[study]
name = "olh"
n = 3000
repeats = 2
[population]
kind = "dirichlet"
k = 8
[estimators]
methods = ["oracle"]
[[mechanisms]]
name = "OLH"
epsilon = 1.0
g = 2
[[mechanisms]]
name = "OLH"
epsilon = 1.0
g = 16
[[mechanisms]]
name = "GRR"
epsilon = 1.0
"""


def test_study_rows_carry_the_parameters_that_tell_entries_apart(tmp_path, capsys):
    import csv

    spec = tmp_path / "olh.toml"
    spec.write_text(TWO_OLH)
    out = tmp_path / "out"
    assert main(["run", str(spec), "--out", str(out), "--quiet"]) == 0
    report = (out / "report.md").read_text()
    assert "| OLH (g=2) | 1 | oracle |" in report and "| OLH (g=16) | 1 | oracle |" in report
    assert "| GRR | 1 | oracle |" in report  # nothing to tell apart: the plain name
    with (out / "metrics.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    assert sorted({r["mechanism"] for r in rows}) == ["GRR", "OLH (g=16)", "OLH (g=2)"]
    assert sum(r["mechanism"] == "OLH (g=2)" for r in rows) == 2  # 2 repeats, not 4
    assert (out / "estimates_OLH__g_2_eps1.png").is_file()
    assert (out / "estimates_OLH__g_16_eps1.png").is_file()


# ------------------------------------------------------- 17, 18. BOMs and odd directory entries
def test_a_labels_file_with_a_bom_is_read_without_it(tmp_path, capsys):
    labels = tmp_path / "labels.txt"
    labels.write_bytes("\ufeffa\r\nb\r\nc\r\n".encode())
    csv = tmp_path / "r.csv"
    csv.write_text("report\n0\n1\n2\n1\n")
    code = main(["estimate", str(csv), "--mechanism", "GRR", "--k", "3", "--epsilon", "1",
                 "--labels-file", str(labels), "--output", "json"])  # fmt: skip
    out, err = capsys.readouterr()
    assert code == 0, err
    import json

    assert json.loads(out)["labels"] == ["a", "b", "c"]


def test_a_toml_spec_with_a_bom_loads(tmp_path):
    from bayesldp.workflows.spec import load_spec

    plain = tmp_path / "plain.toml"
    plain.write_text(TWO_OLH)
    bom = tmp_path / "bom.toml"
    bom.write_bytes(b"\xef\xbb\xbf" + TWO_OLH.encode())
    assert load_spec(bom) == load_spec(plain)


def test_a_directory_source_skips_a_sub_directory_named_like_a_report_file(tmp_path, capsys):
    reports = tmp_path / "reports"
    (reports / "x.csv").mkdir(parents=True)
    (reports / "a.csv").write_text("report\n0\n1\n2\n1\n")
    code = main(["estimate", str(reports), "--mechanism", "GRR", "--k", "3", "--epsilon", "1",
                 "--scheduler", "synchronous", "--output", "json"])  # fmt: skip
    out, err = capsys.readouterr()
    assert code == 0, err
    import json

    assert json.loads(out)["reports"] == 4
    # named on its own (or by a glob), a directory is not a report file
    code = main(["estimate", str(tmp_path / "reports" / "*.csv"), "--mechanism", "GRR", "--k",
                 "3", "--epsilon", "1"])  # fmt: skip
    one_line_error(capsys, code, "x.csv is a directory, not a report file")


# ---------------------------------------------------------- 19. a vanishing prior under HMC
@pytest.mark.parametrize("seed", range(6))
def test_hmc_under_a_prior_of_1e_20_gives_a_posterior_not_a_linalg_error(seed):
    import warnings

    from bayesldp.bayes import fit
    from bayesldp.errors import ConvergenceWarning
    from bayesldp.mechanisms import make_mechanism

    mech = make_mechanism("OLH", 5, 1.0)
    x = np.random.default_rng(seed).choice(5, 300, p=[0.5, 0.3, 0.1, 0.07, 0.03])
    tally = mech.tally(mech.perturb(x, rng=seed))
    with warnings.catch_warnings():  # poor convergence is reported, as a warning of ours
        warnings.simplefilter("ignore", ConvergenceWarning)
        idata = fit(tally, prior=1e-20, method="hmc", random_seed=seed, draws=200, chains=2)
    theta = idata.posterior["theta"].values
    assert np.isfinite(theta).all() and np.allclose(theta.sum(axis=-1), 1.0)


@pytest.mark.slow
def test_estimate_on_a_local_cluster_interrupted_prints_no_worker_traceback(tmp_path):
    """Ctrl-C reaches the workers of a LocalCluster too (one process group): they start with
    SIGINT ignored, so only ``bayesldp`` answers, with one line (a Ctrl-C while the cluster
    starts is ignored, and the estimate completes)."""
    import random
    import signal
    import time

    reports = tmp_path / "reports"
    reports.mkdir()
    for i in range(4):
        (reports / f"r{i}.csv").write_text("report\n0\n1\n2\n1\n")
    argv = [sys.executable, "-c", CLI, "estimate", str(reports), "--mechanism", "GRR", "--k",
            "3", "--epsilon", "1", "--method", "posterior", "--quiet"]  # fmt: skip
    rng = random.Random(7)
    for _ in range(6):
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                start_new_session=True)  # fmt: skip
        time.sleep(rng.uniform(0.5, 6.0))
        try:
            os.killpg(proc.pid, signal.SIGINT)
        except ProcessLookupError:
            pass
        _, err = proc.communicate(timeout=300)
        assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
        assert proc.returncode in (0, 130, -signal.SIGINT), (proc.returncode, err)
        if proc.returncode == 130:
            assert err.endswith("bayesldp: interrupted\n"), err


# ------------------------------------------------------------------- neighbours of the above
def test_a_store_whose_total_would_pass_int64_refuses_the_append_and_stays(tmp_path, capsys):
    half = 2**62
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    a.write_text(f"report,count\n0,{half}\n")
    b.write_text(f"report,count\n1,{half}\n")
    store = tmp_path / "store"
    grr = ["--mechanism", "GRR", "--k", "3", "--epsilon", "1"]
    assert main(["append", str(store), str(a), *grr]) == 0
    capsys.readouterr()
    code = main(["append", str(store), str(b)])
    one_line_error(capsys, code, "the total 9,223,372,036,854,775,808 is " + TOO_LARGE)
    code = main(["append", str(tmp_path / "new"), str(a), str(b), *grr])
    one_line_error(capsys, code, TOO_LARGE)
    assert not (tmp_path / "new" / "CURRENT").exists()
    assert main(["estimate", str(store), "--output", "json"]) == 0
    import json

    assert json.loads(capsys.readouterr().out)["reports"] == half  # unchanged


def test_ctrl_c_during_a_survey_checkpoint_leaves_the_last_one_and_resumes(
    tmp_path, capsys, monkeypatch
):
    from bayesldp.adaptive import checkpoint

    out = tmp_path / "out"
    real, calls = checkpoint.np.savez, []

    def savez(fh, **arrays):  # Ctrl-C in the middle of the third checkpoint
        calls.append(1)
        if len(calls) == 3:
            fh.write(b"PK\x03\x04 half")
            raise KeyboardInterrupt
        real(fh, **arrays)

    monkeypatch.setattr(checkpoint.np, "savez", savez)
    code = main(["survey", str(survey_spec(tmp_path)), "--out", str(out), "--quiet"])
    err = capsys.readouterr().err  # (a first run may say that it compiles the kernels)
    assert code == 130 and err.endswith("bayesldp: interrupted\n") and "Traceback" not in err
    assert sorted(p.name for p in out.iterdir()) == ["adaptive.ckpt", "survey.json"]
    monkeypatch.setattr(checkpoint.np, "savez", real)
    assert main(["survey", str(survey_spec(tmp_path)), "--resume", str(out), "--quiet"]) == 0
    assert "| adaptive RRRR | fisher | 200 |" in (out / "report.md").read_text()
