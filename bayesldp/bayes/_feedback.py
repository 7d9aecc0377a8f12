"""What a fit tells its user while it runs: progress bars, the compile notice, the cores.

* :func:`resolve_progressbar`: ``progressbar=None`` means on in an interactive session (standard
  error is a terminal, or an IPython / Jupyter kernel) and off otherwise (tests, CI, pipes).
* :func:`progress_bar`: a tqdm bar (the notebook widget inside Jupyter when ipywidgets is
  installed) or a no-op stand-in with the same ``update`` / ``set_postfix_str`` / ``close``.
* :func:`needs_compilation` and :func:`compile_notice`: one line on standard error (once per
  process) before numba compiles a kernel that is neither compiled in this process nor in
  numba's on-disk cache; then :mod:`bayesldp.bayes.compile_watch` writes a progress line every
  5 s while it compiles, with counters that never restart, so a first run never sits silent.
* :func:`resolve_cores`: PyMC's ``cores=``: None is ``min(chains, os.cpu_count())``; more cores
  than the machine has are capped with a ``UserWarning``.
"""

from __future__ import annotations

import os
import sys
import threading
import warnings
from typing import Any

import numpy as np

from bayesldp._validation import check_int
from bayesldp.bayes.compile_watch import COMPILE_WATCH
from bayesldp.errors import InvalidTypeError

__all__ = [
    "COMPILE_MESSAGE",
    "compile_notice",
    "needs_compilation",
    "progress_bar",
    "resolve_cores",
    "resolve_progressbar",
]

#: the line written to standard error before the first compilation of a process
COMPILE_MESSAGE = "bayesldp: compiling sampler kernels (first run only)..."

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
    once per kernel family); while kernels compile, a line every few seconds says
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
        if not _noticed and not COMPILE_WATCH.quiet:
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
