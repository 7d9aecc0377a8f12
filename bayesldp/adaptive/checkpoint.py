"""Durable survey state files: atomic writes, format tag, version and checksum.

A state file is a numpy ``.npz`` holding the survey's config (JSON text), the arrays of its
state, a format tag, a version and a SHA-256 checksum over all of them.  It is written to
``path.tmp``, fsync'ed and ``os.replace``'d, so the file on disk is always either the previous or
the new complete state.  A missing, corrupt, truncated or foreign file raises
:class:`CheckpointError`, never a silent restart.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from bayesldp import _durable
from bayesldp._durable import StateFormat
from bayesldp.errors import InvalidInputError

FORMAT_TAG = "bayesldp.AdaptiveSurvey"
FORMAT_VERSION = 1
#: the state arrays, in checksum order
ARRAY_KEYS = ("phi", "theta_hist", "batch_sizes", "row_of", "row_sub", "row_y", "sub_mask")
#: arrays only some engines write (the posterior engine's pool and trajectory), checksummed too
OPTIONAL_KEYS = ("pool", "pool_users", "trajectory_users", "trajectory", "pool_size")


class CheckpointError(InvalidInputError):
    """A survey state file is missing, corrupt, truncated, of another format or version.

    Examples
    --------
    A file that is not a survey's state is refused:

    >>> import tempfile, pathlib
    >>> from bayesldp.adaptive import AdaptiveSurvey
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "survey.npz"
    >>> _ = path.write_text("not a survey")
    >>> AdaptiveSurvey.resume(path)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
        ...
    bayesldp.adaptive.checkpoint.CheckpointError: checkpoint: '...survey.npz' is not a readable ...
    """


FORMAT = StateFormat(
    FORMAT_TAG,
    FORMAT_VERSION,
    ARRAY_KEYS,
    OPTIONAL_KEYS,
    what="checkpoint",
    kind="AdaptiveSurvey state",
    error=CheckpointError,
)


def write_state(target: Path, config: dict[str, Any], arrays: dict[str, np.ndarray]) -> Path:
    """Write a state file atomically (temp file, fsync, ``os.replace``); return its path.

    A write that fails (a full disk, a file-size limit, permissions) or is interrupted removes
    its temporary file; the failure is a one-line :class:`~bayesldp.errors.StoreWriteError`
    saying that the previous state file (if any) is intact.
    """
    return _durable.write_state(FORMAT, target, config, arrays)


def read_state(path: Path) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """The config and arrays of a state file, checked (tag, version, keys, checksum)."""
    return _durable.read_state(FORMAT, path)


def _digest(config: str, arrays: dict[str, np.ndarray]) -> str:
    return FORMAT.digest(config, arrays)
