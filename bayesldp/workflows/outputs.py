"""Checking where a command will write before it does any work."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

from bayesldp._durable import file_lock
from bayesldp.errors import InvalidInputError


def writable_directory(path: str | os.PathLike[str], what: str = "--out") -> Path:
    """Create ``path`` if needed and check that files can be written in it.

    Raises a one-line :class:`~bayesldp.errors.InvalidInputError` when ``path`` is a file, lies
    under a file, or cannot be created or written to, so a long run fails at its start, not
    after its work is done.
    """
    path = Path(path)
    for parent in (path, *path.parents):
        if parent.exists() and not parent.is_dir():
            where = "is" if parent == path else f"lies under {parent}, which is"
            raise InvalidInputError(f"{what}: {path} {where} a file, not a directory")
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / f".bayesldp-write-check-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise InvalidInputError(f"{what}: cannot write in {path}: {exc.strerror or exc}") from None
    return path


def writable_file(path: str | os.PathLike[str], what: str) -> Path:
    """Check that ``path`` can be written as a file (its directory is created if needed)."""
    path = Path(path)
    if path.is_dir():
        raise InvalidInputError(f"{what}: {path} is a directory; give a file name")
    writable_directory(path.parent if str(path.parent) else Path("."), what)
    return path


@contextlib.contextmanager
def directory_lock(path: Path, wait: float = 0.0, what: str = "") -> Iterator[None]:
    """Hold an exclusive lock on an output directory (or a tally store) while a run writes it.

    A second run into the same directory waits up to ``wait`` seconds (default: not at all),
    then fails with ``[what: ]DIR is in use by process N`` instead of interleaving its files
    (and checkpoints) with the first.  The lock is an ``fcntl`` lock on ``DIR/.bayesldp.lock``
    (:func:`bayesldp._durable.file_lock`), released when the run ends or its process dies, so a
    killed run never blocks; the file is removed when the run ends.
    """
    with file_lock(Path(path) / ".bayesldp.lock", path, wait, what):
        yield


@contextlib.contextmanager
def staged_outputs(out: Path) -> Iterator[Path]:
    """A staging directory inside ``out`` for a run's result files, moved into ``out`` only
    when the run completes, with Ctrl-C held off during the move: an interrupted or failed run
    leaves none of its files (and no staging directory), a completed one all of them.  Call it
    under :func:`directory_lock`: a staging directory left by a killed run is removed."""
    for stale in out.glob(".bayesldp-staging-*"):  # a killed run's (the caller holds the lock)
        shutil.rmtree(stale, ignore_errors=True)
    stage = Path(tempfile.mkdtemp(prefix=".bayesldp-staging-", dir=out))
    try:
        yield stage
        with _sigint_deferred():
            for item in sorted(stage.iterdir()):
                target = out / item.name
                if target.is_dir() and not item.is_dir():
                    raise InvalidInputError(f"{target}: is a directory; cannot write the result")
                os.replace(item, target)
    finally:
        shutil.rmtree(stage, ignore_errors=True)


@contextlib.contextmanager
def _sigint_deferred() -> Iterator[None]:
    """Hold SIGINT (Ctrl-C) until the block ends (main thread only; elsewhere: no-op)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
