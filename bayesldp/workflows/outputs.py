"""Checking where a command will write before it does any work."""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Iterator
from pathlib import Path

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
    (and checkpoints) with the first.  The lock is an ``fcntl`` lock on ``DIR/.bayesldp.lock``,
    released when the run ends or its process dies, so a killed run never blocks.
    """
    fh = open(Path(path) / ".bayesldp.lock", "a+")
    try:
        deadline = time.monotonic() + wait
        while True:
            try:
                fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    fh.seek(0)
                    owner = fh.read().strip() or "unknown"
                    waited = f" (waited {wait:g} s for it)" if wait else ""
                    raise InvalidInputError(
                        f"{what}{path} is in use by process {owner}{waited}"
                    ) from None
                time.sleep(0.05)
        fh.seek(0)
        fh.truncate()
        fh.write(str(os.getpid()))
        fh.flush()
        yield
    finally:
        fh.close()
