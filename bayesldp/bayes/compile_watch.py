"""A line every few seconds while numba compiles, with counters that never restart.

A first run after an install compiles numba kernels for a minute or more: a fit's sampler, the
tallies', the likelihoods'.  :data:`COMPILE_WATCH` listens to numba's ``numba:compile`` event
(numba fires it only for a real compilation, not for a kernel loaded from its disk cache) and
writes ``bayesldp: compiling... N functions compiled so far (T s)`` every :data:`HEARTBEAT`
seconds while a compilation is under way, where N counts the functions compiled since the watch
started and T the seconds spent compiling: both only grow over the process.

Who writes the lines:

* inside :meth:`CompileWatch.compiling` (a batch of kernels compiled by
  :func:`bayesldp.bayes._feedback.compile_notice`), a thread of this process, through
  ``sys.stderr`` (so a notebook shows them in the cell);
* once :meth:`CompileWatch.start` was given ``everywhere=True`` (the ``bayesldp`` command, which
  owns its standard error), for every compilation, a small reporter process that shares the
  command's standard error.  LLVM's optimisation passes hold the interpreter lock for up to
  ten seconds or more, so no thread of the compiling process could keep the beat; the reporter
  is told when compiling starts and stops and keeps time itself.  It ignores Ctrl-C (the
  command answers it) and ends with the command (its pipe closes).
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

__all__ = ["COMPILE_WATCH", "HEARTBEAT", "CompileWatch"]

#: seconds between the progress lines while something compiles (under 5, so that a line comes
#: at least every 5 s whatever the reporter's scheduling delay)
HEARTBEAT = 4.0

#: the reporter process: reads "A n seconds period" (compiling from now), "C n" (n compiled so
#: far) and "I n" (idle) lines; while compiling, writes a progress line whenever its last line is
#: ``period`` seconds old (at once when a compilation starts after a quiet stretch)
_REPORTER = r"""
import os, select, signal, sys, time
signal.signal(signal.SIGINT, signal.SIG_IGN)
active, compiled, base, since, period, last, buf = False, 0, 0.0, 0.0, 5.0, 0.0, b""
fd = sys.stdin.fileno()
while True:
    timeout = max(0.0, last + period - time.monotonic()) if active else None
    ready, _, _ = select.select([fd], [], [], timeout)
    now = time.monotonic()
    if ready:
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        *messages, buf = (buf + chunk).split(b"\n")
        for message in messages:
            kind, *values = message.decode().split()
            compiled = int(values[0])
            if kind == "A":  # the beat runs from the last line written, not from here: a
                # run of short compilations with gaps between them still gets its lines
                active, base, period = True, float(values[1]), float(values[2])
                since = now
            elif kind == "I":
                active = False
    if active and now - last >= period:
        last = now
        seconds = base + now - since
        line = f"bayesldp: compiling... {compiled} functions compiled so far ({seconds:.0f} s)\n"
        try:
            os.write(2, line.encode())
        except OSError:
            break
"""


class CompileWatch:
    """Counts numba's compilations and reports them while they run (the module docstring)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._active = 0  # compilations under way (nested ones included)
        self.compiled = 0  # functions compiled since the watch started
        self.seconds = 0.0  # wall seconds with a compilation under way
        self._since: float | None = None  # when the current compiling stretch began
        self._last_line = 0.0
        self._listening = False
        self._stretches = 0  # compiling() sections under way
        self._reporter: subprocess.Popen | None = None
        #: no lines at all (the command's ``--quiet``); the counting goes on
        self.quiet = False

    def start(self, everywhere: bool = False) -> None:
        """Listen to numba's compilations (the listener once per process); ``everywhere``:
        report every compilation through the reporter process, not only inside
        :meth:`compiling`."""
        with self._lock:
            listening, self._listening = self._listening, True
        if not listening:
            self._listen()
        if everywhere and self._reporter is None:
            self._reporter = subprocess.Popen([sys.executable, "-c", _REPORTER],
                                              stdin=subprocess.PIPE)  # fmt: skip

    def stop(self) -> None:
        """End the reporter process, if any (the listener stays, counting)."""
        reporter, self._reporter = self._reporter, None
        if reporter is not None:
            with contextlib.suppress(OSError):
                reporter.stdin.close()
            try:
                reporter.wait(timeout=2)
            except subprocess.TimeoutExpired:  # pragma: no cover - a stuck reporter
                reporter.kill()

    def _listen(self) -> None:
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
        """Count the time inside as compiling, and report it, even without numba's events."""
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

    def _tell(self, message: str) -> None:
        reporter = self._reporter
        if reporter is not None:
            with contextlib.suppress(OSError, ValueError):  # the reporter ended
                reporter.stdin.write(message.encode())
                reporter.stdin.flush()

    def _enter(self) -> None:
        with self._lock:
            if self._active == 0:
                self._since = time.perf_counter()
                self._last_line = self._since
                self._tell(f"A {self.compiled} {self.seconds} {HEARTBEAT}\n")
            self._active += 1

    def _leave(self, compiled: int) -> None:
        with self._lock:
            self._active -= 1
            self.compiled += compiled
            if self._active == 0 and self._since is not None:
                self.seconds += time.perf_counter() - self._since
                self._since = None
                self._tell(f"I {self.compiled}\n")
            elif compiled:
                self._tell(f"C {self.compiled}\n")

    def _report(self) -> None:
        """Progress lines through ``sys.stderr`` inside :meth:`compiling` (without a reporter)."""
        while True:
            time.sleep(0.05)
            with self._lock:
                if (self._since is None or not self._stretches or self._reporter is not None
                        or self.quiet):  # fmt: skip
                    continue
                now = time.perf_counter()
                if now - self._last_line < HEARTBEAT:
                    continue
                self._last_line = now
                line = (f"bayesldp: compiling... {self.compiled} functions compiled so far "
                        f"({self.seconds + now - self._since:.0f} s)")  # fmt: skip
            print(line, file=sys.stderr, flush=True)


#: the process's compile watch (started by ``compile_notice`` and by the command line)
COMPILE_WATCH = CompileWatch()
