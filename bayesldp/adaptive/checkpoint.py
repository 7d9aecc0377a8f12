"""Durable survey state files: atomic writes, format tag, version and checksum.

A state file is a numpy ``.npz`` holding the survey's config (JSON text), the arrays of its
state, a format tag, a version and a SHA-256 checksum over all of them.  It is written to
``path.tmp``, fsync'ed and ``os.replace``'d, so the file on disk is always either the previous or
the new complete state.  A missing, corrupt, truncated or foreign file raises
:class:`CheckpointError`, never a silent restart.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from bayesldp.errors import InvalidInputError, StoreWriteError

FORMAT_TAG = "bayesldp.AdaptiveSurvey"
FORMAT_VERSION = 1
#: the state arrays, in checksum order
ARRAY_KEYS = ("phi", "theta_hist", "batch_sizes", "row_of", "row_sub", "row_y", "sub_mask")
#: arrays only some engines write (the posterior engine's pool and trajectory), checksummed too
OPTIONAL_KEYS = ("pool", "pool_users", "trajectory_users", "trajectory", "pool_size")


class CheckpointError(InvalidInputError):
    """A survey state file is missing, corrupt, truncated, of another format or version."""


def write_state(target: Path, config: dict[str, Any], arrays: dict[str, np.ndarray]) -> Path:
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
                format=np.array(FORMAT_TAG),
                version=np.array(FORMAT_VERSION),
                config=np.array(text),
                checksum=np.array(_digest(text, arrays)),
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
        kept = (f"the previous checkpoint {str(target)!r} is intact and resumes"
                if target.exists() else "no checkpoint was written")  # fmt: skip
        raise StoreWriteError(
            f"checkpoint: cannot write {str(target)!r} ({exc.strerror or exc}); {kept}"
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


def read_state(path: Path) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """The config and arrays of a state file, checked (tag, version, keys, checksum)."""
    if not path.is_file():
        raise CheckpointError(f"checkpoint: {str(path)!r} does not exist")
    try:
        with open(path, "rb") as fh, np.load(fh, allow_pickle=False) as data:
            config_text, checksum, arrays = _contents(path, data)
    except CheckpointError:
        raise
    except Exception as exc:  # zipfile.BadZipFile, OSError, ValueError, EOFError, ...
        raise CheckpointError(
            f"checkpoint: {str(path)!r} is not a readable AdaptiveSurvey state file "
            f"({type(exc).__name__}: {exc})"
        ) from None
    if _digest(config_text, arrays) != checksum:
        raise CheckpointError(f"checkpoint: {str(path)!r} is corrupt (checksum mismatch)")
    try:
        config = json.loads(config_text)
    except json.JSONDecodeError:  # pragma: no cover - the checksum covers the text
        raise CheckpointError(f"checkpoint: {str(path)!r} has an unreadable config") from None
    return config, arrays


def _contents(path: Path, data: Any) -> tuple[str, str, dict[str, np.ndarray]]:
    files = set(data.files)
    if "format" not in files:
        raise CheckpointError(
            f"checkpoint: {str(path)!r} is not an AdaptiveSurvey state file (no format tag)"
        )
    tag = str(data["format"][()])
    if tag != FORMAT_TAG:
        raise CheckpointError(
            f"checkpoint: {str(path)!r} is a {tag!r} file, not an AdaptiveSurvey state"
        )
    version = int(data["version"][()]) if "version" in files else -1
    if version != FORMAT_VERSION:
        raise CheckpointError(
            f"checkpoint: {str(path)!r} has format version {version}; this bayesldp "
            f"reads version {FORMAT_VERSION}"
        )
    missing = [key for key in ("config", "checksum", *ARRAY_KEYS) if key not in files]
    if missing:
        raise CheckpointError(f"checkpoint: {str(path)!r} lacks {missing[0]!r}")
    arrays = {name: data[name] for name in (*ARRAY_KEYS, *OPTIONAL_KEYS) if name in files}
    return str(data["config"][()]), str(data["checksum"][()]), arrays


def _digest(config: str, arrays: dict[str, np.ndarray]) -> str:
    h = hashlib.sha256()
    h.update(FORMAT_TAG.encode())
    h.update(str(FORMAT_VERSION).encode())
    h.update(config.encode())
    for name in (*ARRAY_KEYS, *(key for key in OPTIONAL_KEYS if key in arrays)):
        arr = np.ascontiguousarray(arrays[name])
        h.update(f"{name}:{arr.dtype.str}:{arr.shape}".encode())
        h.update(arr.tobytes())
    return h.hexdigest()
