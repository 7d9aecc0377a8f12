"""Durable files shared by the library and the application (internal).

* :func:`file_lock` -- one writer at a time: an ``fcntl`` lock on a lock file, released when the
  holder ends or its process dies (:func:`bayesldp.workflows.outputs.directory_lock` locks an
  output directory or a tally store with it; a memo store of the longitudinal mechanisms locks
  its file);
* :func:`write_state` / :func:`read_state` -- a single ``.npz`` state file written atomically
  (temporary file, fsync, ``os.replace``) with a format tag, a version and a SHA-256 checksum
  over its config and arrays; a missing, corrupt, truncated or foreign file is refused with a
  one-line error (the AdaptiveSurvey checkpoint and the permanent-response memo).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bayesldp.errors import InvalidInputError, StoreWriteError


@contextlib.contextmanager
def file_lock(lock: Path, shown: Any, wait: float = 0.0, what: str = "") -> Iterator[None]:
    """Hold an exclusive lock on the file ``lock`` (created if needed) while a writer works.

    A second writer waits up to ``wait`` seconds (default: not at all), then fails with
    ``[what]SHOWN is in use by process N``.  The lock is an ``fcntl`` lock, released when the
    holder ends or its process dies, so a killed writer never blocks.  The file is removed when
    the holder ends (normally, by an error or by Ctrl-C), while still locked; a writer that
    locked a file since removed (or replaced) locks the new one instead, so two writers never
    hold two different files at once.  A killed writer leaves the file, unlocked, for the next.
    """
    deadline = time.monotonic() + wait
    while True:
        try:
            fh = open(lock, "a+")
        except IsADirectoryError:
            raise InvalidInputError(
                f"{what}the lock file {str(lock)!r} of {shown} is a directory; remove it (a "
                "writer's lock is a file it creates and removes)"
            ) from None
        except OSError as exc:  # a read-only directory: one line, not a PermissionError
            from bayesldp.errors import StoreWriteError

            raise StoreWriteError(
                f"{what}{shown}: cannot write its lock file {lock.name} "
                f"({exc.strerror or exc}); nothing was written"
            ) from None
        try:
            _acquire(fh, shown, wait, deadline, what)
            if _same_file(fh, lock):
                break
        except BaseException:
            fh.close()
            raise
        fh.close()  # the holder before us removed (or replaced) the file: lock the new one
    try:
        fh.seek(0)
        fh.truncate()
        fh.write(str(os.getpid()))
        fh.flush()
        yield
    finally:
        with contextlib.suppress(OSError):
            if _same_file(fh, lock):
                lock.unlink()
        fh.close()


def _acquire(fh, shown: Any, wait: float, deadline: float, what: str) -> None:
    while True:
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() >= deadline:
                fh.seek(0)
                owner = fh.read().strip() or "unknown"
                waited = f" (waited {wait:g} s for it)" if wait else ""
                message = f"{what}{shown} is in use by process {owner}{waited}"
                raise InvalidInputError(message) from None
            time.sleep(0.05)


def _same_file(fh, path: Path) -> bool:
    """Whether ``path`` still names the open file ``fh``."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return False
    own = os.fstat(fh.fileno())
    return (st.st_dev, st.st_ino) == (own.st_dev, own.st_ino)


@dataclass(frozen=True)
class StateFormat:
    """What a kind of state file is: its tag, version, arrays, and how its errors read.

    ``what`` prefixes every message (``"checkpoint"``), ``kind`` names the file in them
    (``"AdaptiveSurvey state"``), ``error`` is the exception class raised.
    """

    tag: str
    version: int
    keys: tuple[str, ...]
    optional: tuple[str, ...] = ()
    what: str = "state"
    kind: str = "state"
    error: type[Exception] = InvalidInputError

    def digest(self, config: str, arrays: dict[str, np.ndarray]) -> str:
        """SHA-256 over the tag, the version, the config text and every array present."""
        h = hashlib.sha256()
        h.update(self.tag.encode())
        h.update(str(self.version).encode())
        h.update(config.encode())
        for name in (*self.keys, *(key for key in self.optional if key in arrays)):
            arr = np.ascontiguousarray(arrays[name])
            h.update(f"{name}:{arr.dtype.str}:{arr.shape}".encode())
            h.update(arr.tobytes())
        return h.hexdigest()


def write_state(
    fmt: StateFormat, target: Path, config: dict[str, Any], arrays: dict[str, np.ndarray]
) -> Path:
    """Write a state file atomically (temp file, fsync, ``os.replace``); return its path.

    A write that fails (a full disk, a file-size limit, permissions) or is interrupted removes
    its temporary file; the failure is a one-line :class:`~bayesldp.errors.StoreWriteError`
    saying that the previous state file (if any) is intact.
    """
    text = json.dumps(config, sort_keys=True)
    tmp = target.with_name(target.name + ".tmp")
    try:
        with open(tmp, "wb") as fh:
            np.savez(
                fh,
                format=np.array(fmt.tag),
                version=np.array(fmt.version),
                config=np.array(text),
                checksum=np.array(fmt.digest(text, arrays)),
                **arrays,
            )
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException as exc:  # OSError 28 / 27, KeyboardInterrupt: no stray temp file
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        if not isinstance(exc, OSError):
            raise
        kept = (f"the previous {fmt.what} {str(target)!r} is intact and resumes"
                if target.exists() else f"no {fmt.what} was written")  # fmt: skip
        raise StoreWriteError(
            f"{fmt.what}: cannot write {str(target)!r} ({exc.strerror or exc}); {kept}"
        ) from None
    try:  # make the rename itself durable
        fd = os.open(target.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError:  # pragma: no cover - directories cannot be fsync'ed everywhere
        pass
    return target


def read_state(fmt: StateFormat, path: Path) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """The config and arrays of a state file, checked (tag, version, keys, checksum)."""
    if not path.is_file():
        raise fmt.error(f"{fmt.what}: {str(path)!r} does not exist")
    try:
        with open(path, "rb") as fh, np.load(fh, allow_pickle=False) as data:
            config_text, checksum, arrays = _contents(fmt, path, data)
    except fmt.error:
        raise
    except Exception as exc:  # zipfile.BadZipFile, OSError, ValueError, EOFError, ...
        raise fmt.error(
            f"{fmt.what}: {str(path)!r} is not a readable {fmt.kind} file "
            f"({type(exc).__name__}: {exc})"
        ) from None
    if fmt.digest(config_text, arrays) != checksum:
        raise fmt.error(f"{fmt.what}: {str(path)!r} is corrupt (checksum mismatch)")
    try:
        config = json.loads(config_text)
    except json.JSONDecodeError:  # pragma: no cover - the checksum covers the text
        raise fmt.error(f"{fmt.what}: {str(path)!r} has an unreadable config") from None
    return config, arrays


def _contents(fmt: StateFormat, path: Path, data: Any) -> tuple[str, str, dict[str, np.ndarray]]:
    files = set(data.files)
    if "format" not in files:
        raise fmt.error(f"{fmt.what}: {str(path)!r} is not {_a(fmt.kind)} file (no format tag)")
    tag = str(data["format"][()])
    if tag != fmt.tag:
        raise fmt.error(f"{fmt.what}: {str(path)!r} is a {tag!r} file, not {_a(fmt.kind)}")
    version = int(data["version"][()]) if "version" in files else -1
    if version != fmt.version:
        raise fmt.error(
            f"{fmt.what}: {str(path)!r} has format version {version}; this bayesldp "
            f"reads version {fmt.version}"
        )
    missing = [key for key in ("config", "checksum", *fmt.keys) if key not in files]
    if missing:
        raise fmt.error(f"{fmt.what}: {str(path)!r} lacks {missing[0]!r}")
    arrays = {name: data[name] for name in (*fmt.keys, *fmt.optional) if name in files}
    return str(data["config"][()]), str(data["checksum"][()]), arrays


def _a(noun: str) -> str:
    return f"{'an' if noun[:1].lower() in 'aeiou' else 'a'} {noun}"
