"""What a fit tells its user while it runs: progress bars, the compile notice, the cores.

* :func:`resolve_progressbar`: ``progressbar=None`` means on in an interactive session (standard
  error is a terminal, or an IPython / Jupyter kernel) and off otherwise (tests, CI, pipes).
* :func:`progress_bar`: a tqdm bar (the notebook widget inside Jupyter when ipywidgets is
  installed) or a no-op stand-in with the same ``update`` / ``set_postfix_str`` / ``close``.
* :func:`needs_compilation` and :func:`compile_notice`: one line on standard error (once per
  process) before numba compiles a kernel that is neither compiled in this process nor in
  numba's on-disk cache; then :data:`COMPILE_WATCH` writes a progress line every 5 s while
  anything compiles, with counters that never restart, so a first run never sits silent.
* :func:`resolve_cores`: PyMC's ``cores=``: None is ``min(chains, os.cpu_count())``; more cores
  than the machine has are capped with a ``UserWarning``.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
import warnings
from collections.abc import Iterator
from typing import Any

import numpy as np

from bayesldp._validation import check_int
from bayesldp.errors import InvalidTypeError

__all__ = [
    "COMPILE_MESSAGE",
    "COMPILE_WATCH",
    "CompileWatch",
    "compile_notice",
    "needs_compilation",
    "progress_bar",
    "resolve_cores",
    "resolve_progressbar",
]

#: the line written to standard error before the first compilation of a process
COMPILE_MESSAGE = "bayesldp: compiling sampler kernels (first run only)..."
#: seconds between the progress lines while kernels compile
HEARTBEAT = 5.0

_notice_lock = threading.Lock()
_noticed = False  # COMPILE_MESSAGE written in this process


def _in_ipython() -> bool:
    """True inside an IPython shell or a Jupyter kernel."""
    ipython = sys.modules.get("IPython")
    if ipython is None:
        return False
    try:
        return ipython.get_ipython() is not None
    except Exception:  # pragma: no cover - a broken IPython install
        return False


def _in_notebook() -> bool:
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    return shell is not None and type(shell).__name__ == "ZMQInteractiveShell"


def is_interactive() -> bool:
    """Whether a person is likely watching: stderr is a terminal, or IPython / Jupyter runs."""
    stream = sys.stderr
    try:
        tty = stream is not None and bool(stream.isatty())
    except (AttributeError, ValueError):  # a closed or unusual stream
        tty = False
    return tty or _in_ipython()


def resolve_progressbar(progressbar: object) -> bool:
    """``True`` / ``False`` as given; ``None``: :func:`is_interactive`."""
    if progressbar is None:
        return is_interactive()
    if isinstance(progressbar, bool | np.bool_):
        return bool(progressbar)
    raise InvalidTypeError(f"progressbar: expected True, False or None, got {progressbar!r}")


class _NoBar:
    """The silent stand-in of a tqdm bar."""

    n = 0

    def update(self, n: int = 1) -> None:
        pass

    def set_postfix_str(self, s: str = "", refresh: bool = True) -> None:
        pass

    def close(self) -> None:
        pass


def progress_bar(total: int, desc: str, enabled: bool, position: int | None = None) -> Any:
    """A tqdm bar of ``total`` iterations on standard error, or a no-op when not ``enabled``.

    Inside Jupyter the notebook widget is used when ipywidgets is installed.  Bars refresh at
    most ten times a second (``mininterval=0.1``), so an ``update`` per iteration costs well
    under a microsecond.
    """
    if not enabled:
        return _NoBar()
    if _in_notebook():
        import importlib.util

        if importlib.util.find_spec("ipywidgets") is not None:
            from tqdm.notebook import tqdm as notebook_tqdm

            return notebook_tqdm(total=total, desc=desc, leave=True)
    from tqdm import tqdm

    return tqdm(
        total=total,
        desc=desc,
        position=position,
        leave=True,
        file=sys.stderr,
        mininterval=0.1,
        dynamic_ncols=True,
        unit="it",
    )


def needs_compilation(dispatcher: Any, args: tuple) -> bool:
    """Whether calling the numba ``dispatcher`` with ``args`` will compile.

    False when the argument types are already compiled in this process or stored in numba's
    on-disk cache (``cache=True``) for this numba version, source file and machine; the check
    reads the cache's index (numba's own key) without loading anything.  When numba's internals
    cannot be read, True (the notice then says "compiling" while loading from cache: harmless).
    """
    try:
        sig = tuple(dispatcher.typeof_pyval(a) for a in args)
        if sig in dispatcher.overloads:
            return False
        cache = dispatcher._cache
        if not hasattr(cache, "_index_key"):  # NullCache: no on-disk cache
            return True
        key = cache._index_key(sig, dispatcher.targetctx.codegen())
        return key not in cache._cache_file._load_index()
    except Exception:  # pragma: no cover - numba internals changed
        return True


def compile_notice(pending: list[tuple[Any, tuple]]) -> bool:
    """Compile the ``(dispatcher, args)`` kernels that need it, saying so on standard error.

    The first compilation of the process writes :data:`COMPILE_MESSAGE` (once per process, not
    once per kernel family); while kernels compile, a line every :data:`HEARTBEAT` seconds says
    how many are done and for how long, so a first run on a slow machine never sits silent.
    The kernels are compiled here for the argument types of ``args`` (numba's
    ``dispatcher.compile``; its on-disk cache keeps them), so the calls that follow find them
    ready.  Returns whether anything needed compiling.
    """
    global _noticed
    with _notice_lock:
        todo = [(disp, args) for disp, args in pending if needs_compilation(disp, args)]
        if not todo:
            return False
        if not _noticed:
            print(COMPILE_MESSAGE, file=sys.stderr, flush=True)
            _noticed = True
        _compile_with_heartbeat(todo)
    return True


def _compile_with_heartbeat(todo: list[tuple[Any, tuple]]) -> None:
    """Compile each kernel of ``todo`` in a worker thread while this thread waits in short
    steps, so Ctrl-C reaches it (an interrupt delivered during numba's compilation itself is
    swallowed by llvmlite's callbacks); :data:`COMPILE_WATCH` reports the progress."""
    finished = threading.Event()

    def work() -> None:
        try:
            for disp, args in todo:
                try:
                    disp.compile(tuple(disp.typeof_pyval(a) for a in args))
                except Exception:  # the call that follows compiles (or raises) itself
                    pass
        finally:
            finished.set()

    with COMPILE_WATCH.compiling():
        threading.Thread(target=work, name="bayesldp-compile", daemon=True).start()
        while not finished.wait(0.1):  # short waits: an interrupt is raised between them
            pass


class CompileWatch:
    """One progress line every :data:`HEARTBEAT` seconds while numba compiles, whatever asked
    for the compilation (a fit's kernels, a tally's, a likelihood's first call), with counters
    that only grow over the process: the functions numba has compiled since the watch started
    and the seconds spent compiling.

    :meth:`start` registers a listener of numba's ``numba:compile`` event, which numba fires
    only for a real compilation (not for a kernel loaded from its disk cache); the lines go to
    standard error from a daemon thread.  They are written inside a :meth:`compiling` stretch
    (a batch compiled by :func:`compile_notice`, whose work numba does not always announce)
    and, once :meth:`start` was given ``everywhere=True`` (the ``bayesldp`` command, which owns
    its standard error), during any compilation.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._active = 0  # compilations under way (nested ones included)
        self.compiled = 0  # functions compiled since the watch started
        self.seconds = 0.0  # wall seconds with a compilation under way
        self._since: float | None = None  # when the current compiling stretch began
        self._last_line = 0.0
        self._started = False
        self._stretches = 0  # compiling() sections under way
        self.everywhere = False

    def start(self, everywhere: bool = False) -> None:
        """Listen to numba's compilations (the listener once per process); ``everywhere``:
        report every compilation, not only those inside :meth:`compiling`."""
        with self._lock:
            self.everywhere = self.everywhere or everywhere
            if self._started:
                return
            self._started = True
        from numba.core import event

        watch = self

        class _Listener(event.Listener):
            def on_start(self, ev) -> None:
                watch._enter()

            def on_end(self, ev) -> None:
                watch._leave(compiled=1)

        event.register("numba:compile", _Listener())
        threading.Thread(target=self._report, name="bayesldp-compile-watch", daemon=True).start()

    @contextlib.contextmanager
    def compiling(self) -> Iterator[None]:
        """Count the time inside as compiling (and report it) even without numba's events."""
        self.start()
        with self._lock:
            self._stretches += 1
        self._enter()
        try:
            yield
        finally:
            self._leave(compiled=0)
            with self._lock:
                self._stretches -= 1

    def _enter(self) -> None:
        with self._lock:
            if self._active == 0:
                self._since = time.perf_counter()
                self._last_line = self._since
            self._active += 1

    def _leave(self, compiled: int) -> None:
        with self._lock:
            self._active -= 1
            self.compiled += compiled
            if self._active == 0 and self._since is not None:
                self.seconds += time.perf_counter() - self._since
                self._since = None

    def _report(self) -> None:
        while True:
            time.sleep(0.05)
            with self._lock:
                if self._since is None or not (self._stretches or self.everywhere):
                    continue
                now = time.perf_counter()
                if now - self._last_line < HEARTBEAT:
                    continue
                self._last_line = now
                line = (f"bayesldp: compiling... {self.compiled} functions compiled so far "
                        f"({self.seconds + now - self._since:.0f} s)")  # fmt: skip
            print(line, file=sys.stderr, flush=True)


#: the process's compile watch (started by :func:`compile_notice` and by the command line)
COMPILE_WATCH = CompileWatch()


def resolve_cores(cores: object, chains: int) -> int:
    """Worker count as PyMC's ``cores=``: None is ``min(chains, os.cpu_count())``.

    An int above ``os.cpu_count()`` is capped with a ``UserWarning``; never more than
    ``chains`` workers are used.
    """
    available = os.cpu_count() or 1
    if cores is None:
        return max(1, min(chains, available))
    cores = check_int(cores, "cores")
    if cores > available:
        warnings.warn(
            f"cores={cores} is more than this machine's {available} CPU cores; using "
            f"{available} (pass cores=None for min(chains, os.cpu_count()))",
            UserWarning,
            stacklevel=3,
        )
        cores = available
    return max(1, min(cores, chains))
