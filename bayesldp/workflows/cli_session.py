"""How a ``bayesldp`` command runs (:func:`bayesldp.workflows.cli.main`): its warnings as one
line each, a Ctrl-C answered with one line wherever it lands (in a callback from C, or wrapped
by Python into another exception), and a line every few seconds while numba compiles."""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Callable, Iterator
from typing import Any

#: a warning's advice in Python's words, and in ``bayesldp estimate``'s options
ESTIMATE_SPELLING = {"draws=": "--draws", "tune=": "--tune", "chains=": "--chains",
                     "target_accept": "--target-accept", "prior=": "--prior "}  # fmt: skip


@contextlib.contextmanager
def one_line_warnings(command: str) -> Iterator[None]:
    """Warnings as the command's own lines: ``bayesldp: warning: ...`` on stderr, one line, no
    source path or line of Python; ``estimate``'s advice names its options (``--draws``, not
    ``draws=``).  Only for the command itself: a caller that captures stderr (or records
    warnings) gets Python's warnings as they are."""
    import warnings

    if sys.stderr is not sys.__stderr__:
        yield
        return

    def show(message, category, filename, lineno, file=None, line=None) -> None:
        text = " ".join(str(message).split())
        if command == "estimate":
            for python, option in ESTIMATE_SPELLING.items():
                text = text.replace(python, option)
        print(f"bayesldp: warning: {text}", file=sys.stderr, flush=True)

    with warnings.catch_warnings():
        warnings.showwarning = show
        yield


@contextlib.contextmanager
def interrupts_in_callbacks() -> Iterator[None]:
    """Ctrl-C that lands inside a callback from C (numba's compiler calls some) is not lost:
    Python can only print it there ("Exception ignored ... KeyboardInterrupt") and go on, so it
    is delivered again, to be raised where the command can answer it with one line.

    The signal is sent again from another thread a moment later, once the hook has returned:
    raised inside the hook, it would be one more exception Python can only print and drop."""
    import signal
    import threading

    previous, running = sys.unraisablehook, [True]

    def deliver_again() -> None:
        if running[0]:  # not once the command has ended; to the main thread, so that a wait
            # there (a sleep, a lock) ends at once
            signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)

    def hook(unraisable) -> None:
        if issubclass(unraisable.exc_type, KeyboardInterrupt):
            timer = threading.Timer(0.05, deliver_again)
            timer.daemon = True
            timer.start()
            return
        previous(unraisable)

    sys.unraisablehook = hook
    try:
        yield
    finally:
        running[0] = False
        sys.unraisablehook = previous


@contextlib.contextmanager
def talk_while_compiling(args: argparse.Namespace) -> Iterator[None]:
    """A line every 5 s while numba compiles anything (a first run compiles for a minute or
    more), unless ``--quiet``; only for the command itself, whose standard error it owns.  The
    reporter ends with the command's work, before the command's last line."""
    from bayesldp.bayes.compile_watch import COMPILE_WATCH

    if getattr(args, "quiet", False):  # not even the compile notice and its lines
        COMPILE_WATCH.quiet = True
        try:
            yield
        finally:
            COMPILE_WATCH.quiet = False
        return
    if sys.stderr is not sys.__stderr__:
        yield
        return
    COMPILE_WATCH.start(everywhere=True)
    try:
        yield
    finally:
        COMPILE_WATCH.stop()


def caused_by_interrupt(exc: BaseException) -> bool:
    """Whether ``exc`` was raised because of a KeyboardInterrupt (its cause or context chain)."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, KeyboardInterrupt):
            return True
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return False


def answering_interrupts(call: Callable[[], Any]) -> Any:
    """``call()``; an error that a Ctrl-C caused is the Ctrl-C.

    Python wraps an interrupt that lands in some places into another exception: during a class
    body's ``__set_name__`` (a lazy import of dask.array, for one) it becomes a RuntimeError
    "from" the KeyboardInterrupt, and during a compiled module's initialisation (scipy.optimize's
    HiGHS, imported while the parser lists the mechanisms' parameters) an ImportError
    "initialization failed" from it."""
    try:
        return call()
    except Exception as exc:
        if caused_by_interrupt(exc):
            raise KeyboardInterrupt from exc
        raise
