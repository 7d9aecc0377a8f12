"""What a fit tells its user: progress bars, the compile notice, cores, warnings, Ctrl-C."""

import importlib
import io
import itertools
import json
import os
import re
import subprocess
import sys
import textwrap
import threading
import time
import warnings

import numpy as np
import pytest

import bayesldp
from bayesldp.bayes import AdaptiveDirichlet, _feedback, compile_watch, diagnostics, hmc
from bayesldp.bayes._types import SamplerOutput
from bayesldp.errors import ConvergenceWarning, InvalidInputError, InvalidTypeError

fit_module = importlib.import_module("bayesldp.bayes.fit")

#: a short run; its convergence is not the point here
SMALL = {"draws": 150, "tune": 150, "random_seed": 3, "compute_convergence_checks": False}


def _tally(k=5, n=2000, seed=0):
    gen = np.random.default_rng(seed)
    counts = gen.multinomial(n, np.linspace(1, 2, k) / np.linspace(1, 2, k).sum())
    return bayesldp.GRR(k, 2.0).simulate_tally(counts, rng=seed + 1)


def _err(capsys):
    """Standard error so far, without the compile notice and its progress lines (printed
    whenever the kernels are not yet compiled: a fresh install, or a change to hmc/)."""
    text = capsys.readouterr().err.replace(_feedback.COMPILE_MESSAGE + "\n", "")
    return re.sub(r"bayesldp: compiling\.\.\. \d+ of \d+ kernels \(\d+ s\)\n", "", text)


@pytest.fixture
def default_sigint():
    """Ctrl-C handled as Python's default does (KeyboardInterrupt) for the test: a library run
    earlier in this worker process may have left another SIGINT handler in place."""
    import signal

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


class _Stream(io.StringIO):
    def __init__(self, tty):
        super().__init__()
        self._tty = tty

    def isatty(self):
        return self._tty


# ------------------------------------------------------------------------- progress bars
def test_progressbar_none_is_on_only_when_interactive(monkeypatch):
    monkeypatch.setattr(sys, "stderr", _Stream(tty=True))
    assert _feedback.resolve_progressbar(None) is True
    monkeypatch.setattr(sys, "stderr", _Stream(tty=False))
    assert _feedback.resolve_progressbar(None) is False
    assert _feedback.resolve_progressbar(True) is True
    assert _feedback.resolve_progressbar(np.bool_(False)) is False
    with pytest.raises(InvalidTypeError, match="progressbar"):
        _feedback.resolve_progressbar(1)


def test_hmc_shows_one_bar_per_chain_when_asked_and_nothing_otherwise(capsys):
    tally = _tally()
    bayesldp.fit(tally, chains=3, progressbar=None, cores=1, **SMALL)  # pytest: not a TTY
    assert _err(capsys) == ""
    bayesldp.fit(tally, chains=3, progressbar=False, cores=2, **SMALL)
    assert _err(capsys) == ""
    bayesldp.fit(tally, chains=3, progressbar=True, cores=2, **SMALL)
    err = _err(capsys)
    for c in range(3):
        assert f"chain {c}" in err
    assert err.count("300/300") == 3  # each bar reached tune + draws


def test_tty_stderr_turns_the_default_bar_on(monkeypatch):
    fake = _Stream(tty=True)
    monkeypatch.setattr(sys, "stderr", fake)
    bayesldp.fit(_tally(), chains=2, cores=1, **SMALL)
    assert fake.getvalue().count("300/300") == 2


@pytest.mark.filterwarnings("ignore::bayesldp.errors.ConvergenceWarning")  # short run
def test_sgld_bar(capsys):
    bayesldp.fit(_tally(), method="sgld", chains=2, draws=20, tune=100, random_seed=1,
                 progressbar=True)  # fmt: skip
    err = _err(capsys)
    assert "sgld" in err and "300/300" in err  # tune + draws * thin(10)


def test_exact_mixture_bar(capsys):
    tally = bayesldp.GRR(3, 1.0).tally_from_report_counts([6, 3, 2])
    quiet = bayesldp.fit(tally, method="exact", draws=50, chains=2, random_seed=0)
    assert _err(capsys) == ""
    shown = bayesldp.fit(tally, method="exact", draws=50, chains=2, random_seed=0,
                         progressbar=True)  # fmt: skip
    err = _err(capsys)
    assert "exact mixture" in err and "100%" in err
    assert np.array_equal(quiet.posterior["theta"].values, shown.posterior["theta"].values)


# ------------------------------------------------------------------------- compile notice
_MODULE = """
import numba

@numba.njit(cache=True)
def twice(x):
    return 2.0 * x
"""


def test_needs_compilation_reads_the_process_and_the_disk_cache(tmp_path):
    """A fresh cached kernel: compiled -> not needed; a new process with the same cache
    directory sees it on disk before any call; another argument type still needs it."""
    (tmp_path / "feedback_kernel.py").write_text(_MODULE)
    script = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(tmp_path)!r})
        import numpy as np
        from bayesldp.bayes._feedback import needs_compilation
        import feedback_kernel as m
        before = needs_compilation(m.twice, (1.0,))
        m.twice(1.0)
        after = needs_compilation(m.twice, (1.0,))
        other = needs_compilation(m.twice, (np.ones(2),))
        print(before, after, other)
    """)
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "cache")}
    env["PYTHONPATH"] = os.pathsep.join([os.getcwd(), env.get("PYTHONPATH", "")])

    def run():
        out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                             text=True, check=True)  # fmt: skip
        return out.stdout.split()

    assert run() == ["True", "False", "True"]  # empty cache: compiles
    assert run() == ["False", "False", "True"]  # on disk now: no compilation


def test_compile_notice_once(capsys, monkeypatch):
    import numba

    monkeypatch.setattr(_feedback, "_noticed", False)
    @numba.njit
    def fresh(x):
        return x + 1.0

    pending = [(fresh, (1.0,))]
    assert _feedback.compile_notice(pending) is True
    assert capsys.readouterr().err.strip() == _feedback.COMPILE_MESSAGE
    fresh(1.0)
    assert _feedback.compile_notice(pending) is False
    assert capsys.readouterr().err == ""

    @numba.njit
    def other(x):
        return x + 2.0

    assert _feedback.compile_notice([(other, (1.0,))]) is True  # compiled, but said once
    assert capsys.readouterr().err == ""
    assert other.signatures  # compiled by the notice itself


class _SlowKernel:
    """A stand-in numba dispatcher whose compilation takes ``seconds``."""

    def __init__(self, seconds: float):
        self.seconds = seconds

    def typeof_pyval(self, value):
        return value

    def compile(self, sig):
        time.sleep(self.seconds)


def _progress(err: str) -> list[tuple[int, int]]:
    """(functions compiled, seconds) of each progress line of the compile watch."""
    found = re.findall(r"^bayesldp: compiling\.\.\. (\d+) functions compiled so far \((\d+) s\)$",
                       err, flags=re.MULTILINE)  # fmt: skip
    return [(int(a), int(b)) for a, b in found]


def test_compile_progress_every_heartbeat(capsys, monkeypatch):
    """A compilation that takes a while reports how far it is, every HEARTBEAT seconds."""
    monkeypatch.setattr(_feedback, "_noticed", False)
    monkeypatch.setattr(compile_watch, "HEARTBEAT", 0.1)
    kernels = [(_SlowKernel(0.5), (1.0,)), (_SlowKernel(0.5), (2.0,))]
    assert _feedback.compile_notice(kernels) is True
    err = capsys.readouterr().err
    assert err.splitlines()[0] == _feedback.COMPILE_MESSAGE
    assert len(_progress(err)) >= 3  # ~1 s of compiling, a line per 0.1 s


def test_compile_progress_counts_every_compilation_and_never_restarts(capsys, monkeypatch):
    """Functions numba compiles on a first call, outside any notice, are reported too; over
    two separate compilations the counters only grow."""
    import numba

    monkeypatch.setattr(compile_watch, "HEARTBEAT", 0.1)
    watch = compile_watch.COMPILE_WATCH
    watch.start()
    before = watch.compiled

    def slow_typed(x):  # compiled by numba on its first call, at each new argument type
        return x + 1

    kernel = numba.njit(slow_typed)
    with watch.compiling():  # a compiling stretch long enough to be reported
        kernel(1)
        time.sleep(0.35)
    with watch.compiling():
        kernel(1.0)
        time.sleep(0.35)
    assert watch.compiled >= before + 2
    lines = _progress(capsys.readouterr().err)
    assert len(lines) >= 4
    pairs = itertools.pairwise(lines)
    assert all(n <= m and s <= t for (n, s), (m, t) in pairs), lines  # never restarts


@pytest.mark.parametrize("prior", [1.0, None])
def test_no_notice_once_the_sampler_is_compiled(prior, capsys):
    """Dirichlet(1) and the default (adaptive, joint scheme): once a fit has run, none of the
    kernels its notice lists needs compiling, and the next fit prints no notice."""
    tally = _tally()
    bayesldp.fit(tally, prior=prior, chains=1, **SMALL)
    capsys.readouterr()
    target = hmc._Target(tally, np.ones(tally.k) if prior else AdaptiveDirichlet(tally.k))
    pending = hmc._pending_kernels(target, 10, prior is None)
    assert not any(_feedback.needs_compilation(d, a) for d, a in pending)
    bayesldp.fit(tally, prior=prior, chains=1, **SMALL)
    assert _feedback.COMPILE_MESSAGE not in capsys.readouterr().err


@pytest.mark.parametrize("form", ["grr", "support"])
def test_sgld_lists_the_kernels_it_compiles(form, capsys):
    """SGLD's first compilation says so too: once its fit has run, none of the kernels it
    lists for the notice needs compiling (the list matches what it calls)."""
    from bayesldp.bayes import sgld
    from bayesldp.likelihood import Likelihood

    mech = bayesldp.GRR(4, 1.0) if form == "grr" else bayesldp.OUE(4, 1.0)
    tally = mech.simulate_tally(np.array([30, 20, 10, 5]), rng=0)
    bayesldp.fit(tally, method="sgld", draws=20, chains=1, tune=20, random_seed=0,
                 compute_convergence_checks=False, progressbar=False)  # fmt: skip
    capsys.readouterr()
    pending = sgld._pending_kernels(Likelihood(tally))
    assert not any(_feedback.needs_compilation(d, a) for d, a in pending)


@pytest.mark.slow
def test_cold_process_prints_the_notice_once(tmp_path):
    """A fresh process with an empty numba cache: the notice, once; the next process: none."""
    script = textwrap.dedent("""
        import numpy as np, bayesldp
        tally = bayesldp.GRR(5, 2.0).simulate_tally(np.array([50, 40, 30, 20, 10]), rng=1)
        bayesldp.fit(tally, draws=50, tune=50, chains=2, random_seed=0,
                     compute_convergence_checks=False)
        bayesldp.fit(tally, draws=50, tune=50, chains=2, random_seed=1,
                     compute_convergence_checks=False)
    """)
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path)}
    env["PYTHONPATH"] = os.pathsep.join([os.getcwd(), env.get("PYTHONPATH", "")])
    for expected in (1, 0):
        out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                             text=True, check=True)  # fmt: skip
        assert out.stderr.count(_feedback.COMPILE_MESSAGE) == expected, out.stderr


# ------------------------------------------------------------------------- cores
def test_draws_do_not_depend_on_cores(monkeypatch):
    monkeypatch.setattr(os, "cpu_count", lambda: 4)  # threads even on a small machine
    tally = _tally()
    fits = [bayesldp.fit(tally, chains=3, cores=c, **SMALL) for c in (1, 2, None)]
    for other in fits[1:]:
        assert np.array_equal(other.posterior["theta"].values, fits[0].posterior["theta"].values)
        for name in ("lp", "step_size", "tree_depth", "diverging"):
            assert np.array_equal(other.sample_stats[name].values,
                                  fits[0].sample_stats[name].values)  # fmt: skip
    info = [json.loads(f.posterior.attrs["backend_info"])["cores"] for f in fits]
    assert info == [1, 2, 3]  # None: min(chains, CPUs)


def test_cores_default_and_cap(monkeypatch):
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    assert _feedback.resolve_cores(None, 4) == 2
    assert _feedback.resolve_cores(None, 1) == 1
    assert _feedback.resolve_cores(2, 4) == 2
    with pytest.warns(UserWarning, match=r"cores=64 is more than this machine's 2 CPU cores"):
        assert _feedback.resolve_cores(64, 4) == 2
    tally = _tally()
    with pytest.warns(UserWarning, match="cores=64"):
        capped = bayesldp.fit(tally, chains=2, cores=64, **SMALL)
    plain = bayesldp.fit(tally, chains=2, cores=1, **SMALL)
    assert np.array_equal(capped.posterior["theta"].values, plain.posterior["theta"].values)
    assert json.loads(capped.posterior.attrs["backend_info"])["cores"] == 2


@pytest.mark.parametrize(("cores", "error"), [(0, InvalidInputError), ("2", InvalidTypeError),
                                              (True, InvalidTypeError)])  # fmt: skip
def test_bad_cores(cores, error):
    with pytest.raises(error, match="cores"):
        bayesldp.fit(_tally(), cores=cores, **SMALL)


# ------------------------------------------------------------------------- warnings
def test_short_run_warns_with_numbers_recorded_in_both_groups():
    with pytest.warns(ConvergenceWarning) as record:
        idata = bayesldp.fit(_tally(k=8, n=300), tune=10, draws=10, random_seed=0)
    messages = [str(w.message) for w in record]
    attrs = idata.posterior.attrs
    assert attrs["r_hat_max"] > 1.01  # measured 1.3-ish on such runs
    rhat_msg = next(m for m in messages if "r_hat" in m)
    assert f"{attrs['r_hat_max']:.3f}" in rhat_msg and "draws=" in rhat_msg
    ess_msg = next(m for m in messages if "bulk ESS" in m)
    assert f"{attrs['ess_bulk_min']:.0f}" in ess_msg and "per chain, below 100" in ess_msg
    for key in ("r_hat_max", "ess_bulk_min", "divergences"):
        assert idata.sample_stats.attrs[key] == attrs[key]


def test_divergence_message_names_the_count_and_the_remedy():
    [message] = diagnostics._messages({"divergences": 7}, 4, "hmc")
    assert "7 divergent transitions" in message and "target_accept" in message


def test_pareto_k_check():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert diagnostics.check_pareto_k(0.69, "laplace") is True
    with pytest.warns(ConvergenceWarning, match=r"Pareto k .* is 0\.85, above 0\.7"):
        assert diagnostics.check_pareto_k(0.85, "laplace") is False
    with pytest.warns(ConvergenceWarning, match="nan"):
        assert diagnostics.check_pareto_k(float("nan"), "laplace") is False
    assert diagnostics.check_pareto_k(2.0, "laplace", warn=False) is False


def test_a_backend_reporting_pareto_k_warns_through_fit(monkeypatch):
    import types

    def sample(tally, alpha, *, draws, chains, random_seed, progressbar=False, **options):
        gen = np.random.default_rng(random_seed)
        theta = gen.dirichlet(alpha, size=(chains, draws))
        lp = np.zeros((chains, draws))
        return SamplerOutput(theta=theta, sample_stats={"lp": lp}, info={"pareto_k": 0.93})

    fake = types.ModuleType("bayesldp_fake_is_backend")
    fake.sample = sample
    monkeypatch.setitem(sys.modules, "bayesldp_fake_is_backend", fake)
    monkeypatch.setitem(fit_module.BACKENDS, "fake_is", "bayesldp_fake_is_backend")
    with pytest.warns(ConvergenceWarning, match=r"Pareto k .* is 0\.93"):
        idata = bayesldp.fit(_tally(), 200, prior=1.0, method="fake_is", chains=2, random_seed=0)
    assert idata.posterior.attrs["pareto_k"] == 0.93 == idata.sample_stats.attrs["pareto_k"]


# ------------------------------------------------------------------------- Ctrl-C
@pytest.mark.parametrize("cores", [1, 2])
def test_ctrl_c_stops_every_chain_and_propagates(cores, default_sigint):
    import _thread

    tally = _tally()
    bayesldp.fit(tally, chains=1, **SMALL)  # compiled before the timer starts
    timer = threading.Timer(0.5, _thread.interrupt_main)
    started = time.perf_counter()
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            bayesldp.fit(tally, chains=2, cores=cores, draws=300_000, tune=100, random_seed=0)
    finally:
        timer.cancel()
    assert time.perf_counter() - started < 10.0  # the full run takes tens of seconds
    time.sleep(0.2)
    assert not [t for t in threading.enumerate() if t.name.startswith("bayesldp-chain")]


def test_ctrl_c_while_kernels_compile_propagates(monkeypatch, default_sigint):
    """The kernels compile in a worker thread and the caller waits: Ctrl-C (KeyboardInterrupt
    in the main thread) stops the wait at once (numba's compilation itself swallows it)."""
    import _thread

    monkeypatch.setattr(_feedback, "_noticed", True)
    timer = threading.Timer(0.2, _thread.interrupt_main)
    started = time.perf_counter()
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            _feedback.compile_notice([(_SlowKernel(3.0), (1.0,))])
    finally:
        timer.cancel()
    assert time.perf_counter() - started < 2.0


def test_the_command_s_compile_lines_keep_the_beat_while_the_interpreter_is_held():
    """LLVM's passes hold the interpreter lock for seconds, so the command's lines come from a
    reporter process: with the lock held throughout 1.5 s of "compiling" (a switch interval of
    100 s), lines still arrive every 0.2 s, and the reporter ends with the watch."""
    script = textwrap.dedent("""
        import sys, time
        from bayesldp.bayes import compile_watch
        compile_watch.HEARTBEAT = 0.2
        watch = compile_watch.CompileWatch()
        watch.start(everywhere=True)
        time.sleep(0.5)  # the reporter process starts
        sys.setswitchinterval(100)
        watch._enter()
        start = time.perf_counter()
        while time.perf_counter() - start < 1.5:  # holds the interpreter lock throughout
            pass
        watch._leave(compiled=1)
        watch.stop()
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = _progress(done.stderr)
    assert len(lines) >= 4, done.stderr  # about 7 at one line per 0.2 s
    assert all(n == 0 for n, _ in lines), lines  # nothing finished compiling meanwhile


def test_the_command_s_compile_lines_keep_the_beat_over_short_compilations():
    """A first run compiles many functions of a second or two each, with short gaps between
    them: the beat runs from the last line written, so 12 compilations of 0.25 s with 0.05 s
    gaps (3.6 s in all, none as long as the 0.4 s beat) still give a line about every 0.4 s,
    and the longest stretch between lines stays under two beats."""
    script = textwrap.dedent("""
        import time
        from bayesldp.bayes import compile_watch
        compile_watch.HEARTBEAT = 0.4
        watch = compile_watch.CompileWatch()
        watch.start(everywhere=True)
        time.sleep(0.5)  # the reporter process starts
        for _ in range(12):
            watch._enter()
            time.sleep(0.25)
            watch._leave(compiled=1)
            time.sleep(0.05)
        watch.stop()
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = _progress(done.stderr)
    assert len(lines) >= 5, done.stderr  # about 8 at one line per 0.4 s
    counts = [n for n, _ in lines]
    assert counts == sorted(counts) and counts[-1] >= 8, lines


def test_a_quiet_watch_writes_no_notice_and_no_lines(capsys, monkeypatch):
    """The command's ``--quiet`` sets the watch quiet: a compilation says nothing at all (it is
    still counted)."""
    monkeypatch.setattr(_feedback, "_noticed", False)
    monkeypatch.setattr(compile_watch, "HEARTBEAT", 0.1)
    monkeypatch.setattr(compile_watch.COMPILE_WATCH, "quiet", True)
    assert _feedback.compile_notice([(_SlowKernel(0.5), (1.0,))]) is True
    assert capsys.readouterr().err == ""


def test_the_command_s_quiet_option_silences_the_watch_while_it_runs(monkeypatch, tmp_path):
    import bayesldp.bayes
    from bayesldp.workflows.cli import main

    seen = []
    monkeypatch.setattr(bayesldp.bayes, "fit",
                        lambda *a, **k: seen.append(compile_watch.COMPILE_WATCH.quiet) or 1 / 0)
    csv = tmp_path / "r.csv"
    csv.write_text("report\n0\n1\n")
    with pytest.raises(ZeroDivisionError):
        main(["estimate", str(csv), "--mechanism", "GRR", "--k", "2", "--epsilon", "1",
              "--method", "posterior", "--quiet"])  # fmt: skip
    assert seen == [True] and compile_watch.COMPILE_WATCH.quiet is False
