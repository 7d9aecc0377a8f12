"""Checking where a command will write before it does any work."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import sys
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


#: in a staging directory: written (and synced) before its first file is moved into place, so
#: a run killed while moving its results is finished by the next one, not left half-moved
PUBLISHING = ".publishing"
STAGING = ".bayesldp-staging-"


@contextlib.contextmanager
def staged_outputs(out: Path) -> Iterator[Path]:
    """A staging directory inside ``out`` for a run's result files, moved into ``out`` only
    when the run completes, with Ctrl-C held off during the move: an interrupted or failed run
    leaves none of its files (and no staging directory), a completed one all of them.

    Every target is checked before the first file is moved (a directory where a result file
    goes fails the run with none of its files moved).  Call it under :func:`directory_lock`:
    a staging directory left by a killed run is dealt with first, saying so on stderr: one
    killed while moving its files into ``out`` has the rest moved (its results land together),
    one killed before is removed.
    """
    recover_staging(out)
    stage = Path(tempfile.mkdtemp(prefix=STAGING, dir=out))
    try:
        yield stage
        items = sorted(stage.iterdir())
        for item in items:  # every target checked before anything is moved
            _check_target(item, out / item.name)
        with _sigint_deferred():
            marker = stage / PUBLISHING
            marker.write_bytes(b"")
            _fsync(marker)
            _fsync(stage)
            for item in items:
                os.replace(item, out / item.name)
                _test_crash_point("publish")
            _fsync(out)
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def recover_staging(out: Path) -> None:
    """Deal with the staging directories a killed run left in ``out`` (the caller holds its
    lock): finish moving the files of one killed while it moved them into place, remove one
    killed before; each is said on stderr."""
    for stale in sorted(out.glob(STAGING + "*")):
        if not stale.is_dir():
            continue
        if (stale / PUBLISHING).exists():
            moved = []
            for item in sorted(stale.iterdir()):
                target = out / item.name
                if item.name == PUBLISHING or (target.is_dir() and not item.is_dir()):
                    continue
                os.replace(item, target)
                moved.append(item.name)
            _note(f"{out}: a run was killed while moving its results into place; moved the "
                  f"rest of them ({', '.join(moved) or 'none left'}), so they land together")
        else:
            _note(f"{out}: removed the unfinished results of a run that was killed "
                  f"({stale.name})")  # fmt: skip
        shutil.rmtree(stale, ignore_errors=True)


def _check_target(item: Path, target: Path) -> None:
    """``item`` can replace ``target``: not a directory in the way of a file or a file in the
    way of a directory."""
    if target.is_dir() and not target.is_symlink() and not item.is_dir():
        raise InvalidInputError(f"{target}: is a directory; cannot write the result {item.name} "
                                "there (move it away); no result was written")  # fmt: skip
    if item.is_dir() and target.exists() and not target.is_dir():
        raise InvalidInputError(f"{target}: is a file; cannot write the result directory "
                                f"{item.name} there; no result was written")  # fmt: skip


def _fsync(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _note(message: str) -> None:
    print(f"bayesldp: note: {message}", file=sys.stderr, flush=True)


def _test_crash_point(name: str) -> None:
    """Kill this process here when the test environment asks for it (``BAYESLDP_TEST_CRASH``
    equal to ``name``): how the tests check what a ``kill -9`` at that point leaves."""
    if os.environ.get("BAYESLDP_TEST_CRASH") == name:
        os.kill(os.getpid(), signal.SIGKILL)


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
