"""The files of a tally store: atomic writes, the writers' lock, checksums, damage reports.

:mod:`bayesldp.workflows.tally_store` keeps its logic (what is counted); this module keeps how a
generation reaches the disk and how a damaged one is recognised and described.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bayesldp.errors import DamagedStoreError

CURRENT = "CURRENT"
LOCK = ".bayesldp.lock"
_MANIFEST = re.compile(r"manifest-(\d+)\.json")


#: written before a new store's first file and removed after its ``CURRENT``: a directory that
#: holds it is a store whose creation was killed, which is no store (the next creation there
#: starts afresh), never a damaged one
CREATING = ".creating"


def creation_interrupted(path: Path) -> bool:
    """Whether ``path`` holds a store whose creation was killed before it completed."""
    return (path / CREATING).exists()


def creation_leftover(name: str) -> bool:
    """A file a killed creation may leave: its marker, ``CURRENT`` or a manifest."""
    return name in (CREATING, CURRENT) or _MANIFEST.fullmatch(name) is not None


@contextlib.contextmanager
def creating(path: Path) -> Iterator[None]:
    """Create a store in ``path`` (the caller holds its lock) as one step: a killed creation
    leaves :data:`CREATING`, so the directory is no store and the next creation starts afresh
    (removing what it left); a failed one removes what it wrote but the lock."""
    for item in path.iterdir():  # a killed creation's files
        if creation_leftover(item.name) or item.name.endswith(".tmp") or item.name.startswith(
            "state-"
        ):
            item.unlink(missing_ok=True)
    marker = path / CREATING
    marker.write_bytes(b"")
    fsync_dir(path)
    try:
        yield
    except BaseException:
        for item in path.iterdir():
            if item.name != LOCK and item.is_file():
                item.unlink(missing_ok=True)
        raise
    marker.unlink()
    fsync_dir(path)


def remove_made(made: list[Path]) -> None:
    """Remove the directories ``made`` by a failed creation, deepest first, while empty."""
    for directory in sorted(made, key=lambda d: len(d.parts), reverse=True):
        try:
            directory.rmdir()
        except OSError:
            return


def missing_directories(path: Path) -> list[Path]:
    """``path`` and its parents that do not exist (what ``mkdir(parents=True)`` would make)."""
    return [p for p in (path, *path.parents) if not p.exists()]


def manifest_name(generation: int) -> str:
    return f"manifest-{generation}.json"


def state_name(generation: int) -> str:
    return f"state-{generation}.npz"


def file_digest(path: Path) -> str:
    """SHA-256 of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def write_atomic(path: Path, write: Any) -> None:
    """``write(fh)`` into a temporary file, fsync it, rename it to ``path``."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        with open(tmp, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:  # a full disk or an interrupt: no stray temporary file
        tmp.unlink(missing_ok=True)
        raise


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextlib.contextmanager
def store_lock(path: Path, wait: float) -> Iterator[None]:
    """Hold the store's writer lock (``STORE/.bayesldp.lock``, the lock ``bayesldp run`` takes on
    an output directory too: :func:`bayesldp.workflows.outputs.directory_lock`), waiting up to
    ``wait`` seconds for a writer that holds it; then an :class:`~bayesldp.InvalidInputError`
    naming its process."""
    from bayesldp.workflows.outputs import directory_lock

    with directory_lock(path, wait, "store: "):
        yield


def manifest_bytes(manifest: dict[str, Any]) -> bytes:
    """The manifest as written: its content and a checksum of that content."""
    body = {key: value for key, value in manifest.items() if key != "checksum"}
    checksum = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()
    return json.dumps({**body, "checksum": checksum}).encode()


def parse_manifest(text: str) -> dict[str, Any]:
    """The manifest in ``text``; ``ValueError`` naming what is wrong when it is not one
    (truncated, not JSON, fields missing, or its checksum disagrees with its content)."""
    try:
        manifest = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not valid JSON (truncated?): {exc.msg} at character {exc.pos}") from None
    if not isinstance(manifest, dict) or not {"mechanism", "params", "inputs"} <= set(manifest):
        raise ValueError("it lacks the fields mechanism, params and inputs")
    if "checksum" in manifest:  # stores written before checksums have none
        body = {key: value for key, value in manifest.items() if key != "checksum"}
        if (
            hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()
            != manifest["checksum"]
        ):
            raise ValueError("its checksum does not match its content (altered on disk)")
    if not isinstance(manifest["inputs"], list) or not isinstance(manifest["params"], dict):
        raise ValueError("its fields have the wrong types")
    return manifest


def generations_on_disk(path: Path) -> list[int]:
    """The generations whose manifest is in the store's directory, newest first."""
    found = [_MANIFEST.fullmatch(p.name) for p in path.iterdir()]
    return sorted((int(m.group(1)) for m in found if m), reverse=True)


def check_generation(path: Path, generation: int) -> str | None:
    """None when generation ``generation`` is complete and unaltered, else what is wrong."""
    manifest_path = path / manifest_name(generation)
    try:
        manifest = parse_manifest(manifest_path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return f"{manifest_name(generation)} is missing"
    except (ValueError, UnicodeDecodeError) as exc:
        return f"{manifest_name(generation)} is damaged: {exc}"
    if not manifest["inputs"]:
        return None  # the empty store's generation has no state file
    state = path / state_name(generation)
    if not state.is_file():
        return f"{state_name(generation)} (the tally) is missing"
    expected = manifest.get("state_sha256")
    if expected is not None and file_digest(state) != expected:
        return (
            f"{state_name(generation)} (the tally) is damaged: its SHA-256 differs from the one "
            f"{manifest_name(generation)} records (truncated or altered)"
        )
    return None


def damaged(path: Path, part: str, generation: int | None) -> DamagedStoreError:
    """The error for a store whose ``part`` is damaged, saying whether an earlier generation is
    intact and how to roll back to it (or, when none is, how to rebuild)."""
    others = [g for g in generations_on_disk(path) if g != generation]
    older = [g for g in others if generation is None or g < generation]
    intact = next((g for g in [*older, *others] if check_generation(path, g) is None), None)
    if intact is None:
        advice = (
            "no other intact generation is on disk, so the store cannot be rolled back: move it "
            "aside and append its report files into a new store"
        )
    else:
        manifest = parse_manifest((path / manifest_name(intact)).read_text(encoding="utf-8"))
        n = sum(int(e.get("reports") or 0) for e in manifest["inputs"])
        lost = ""
        if generation is not None and intact < generation:
            lost = "; then append again the files counted after it"
        previous = generation is not None and intact < generation
        which = f"the previous generation {intact}" if previous else f"generation {intact}"
        advice = (
            f"{which} is "
            f"intact ({len(manifest['inputs'])} inputs, {n:,} reports): roll back to it with "
            f"`printf {intact} > {path / CURRENT}`{lost}"
        )
    which = f"generation {generation}: " if generation is not None else ""
    return DamagedStoreError(f"store: {path} is damaged ({which}{part}); {advice}")
