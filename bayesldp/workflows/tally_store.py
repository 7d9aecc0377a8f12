"""A durable, incremental tally: report files appended one batch at a time.

A tally is additive, so the reports of a collection that grows by the day never need to be read
twice: each batch of report files (CSV or Parquet, the mechanism's own layout) is tallied and
added to the stored tally.  The store is a directory:

* ``manifest-G.json``: the mechanism (name and parameters), every input counted so far (its
  name, path, batch name, SHA-256 of its bytes, the identity of its rows and of their prefixes,
  its row and report counts, its time of appending), the SHA-256 of ``state-G.npz`` and a
  checksum of the manifest itself;
* ``state-G.npz``: the tally of those inputs (counts, rows or support and levels, statistic);
* ``CURRENT``: the generation ``G`` in force.

**Identity of a batch.**  A batch is named by the user: ``batch_id`` (``--batch-id``), else the
file's path without its ``.csv`` or ``.parquet`` suffix; under a name counted before, the same
rows count nothing, those rows followed by new ones count only the new ones, and other content
is refused.  A new name is a new batch, except that where its first rows repeat a counted
batch's with a chance below one in a billion (``IMPLAUSIBLE``, under those rows' own
frequencies, so never for one-report files) the append is refused naming the other batch, and
``distinct=True`` (``--distinct``) counts it anyway.

The rows are compared normalised (:mod:`bayesldp.workflows.batch_identity`): the same whatever
a file's line ends, byte-order mark, quoting, column order or format (CSV or Parquet).  For
each input the manifest keeps the digests of its first 1, 2, 4, ... rows, so a repeat is found
whether the new file is a copy, an older (shorter) snapshot or a grown copy of the other.

**Atomicity.**  An append (and the creation of a store with its first files) tallies every file
first, then writes generation ``G + 1`` next to ``G`` (each file to a temporary name, flushed,
fsynced and renamed into place), then replaces ``CURRENT`` atomically (``os.replace``), then
removes generation ``G - 1``: the previous generation stays on disk for a roll-back.  A crash
at any point (a SIGKILL included) leaves ``CURRENT`` naming a complete generation, and a file
that cannot be read leaves nothing (a store that did not exist still does not).  Writers take
turns on an ``fcntl`` lock of the directory (``STORE/.bayesldp.lock``), creation included, so
two processes creating one store cannot mix their settings: the second waits, then appends if
its mechanism is the store's and refuses otherwise.  Readers take no lock; a read that finds
its generation removed by a concurrent append reads the new one.

**Damage.**  Every read checks what it reads (``CURRENT`` a generation number, the manifest's
checksum, the state file's SHA-256); a damaged part raises
:class:`~bayesldp.errors.DamagedStoreError` naming it and the newest intact generation before it,
with the command that rolls back to it.

An example is on :class:`TallyStore`.
"""

from __future__ import annotations

import hashlib
import io
import os
import re
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from bayesldp.errors import BayesLDPError, InvalidInputError, StoreWriteError
from bayesldp.mechanisms import rebuild_mechanism
from bayesldp.mechanisms.base import Mechanism
from bayesldp.tally import Tally
from bayesldp.workflows import store_files as sf
from bayesldp.workflows.outputs import _test_crash_point
from bayesldp.workflows.store_batches import check_batch_id, count_files

__all__ = ["TallyStore", "is_tally_store"]

#: reads of the current generation before a reader gives up on concurrent appends
_READ_ATTEMPTS = 20
#: seconds a writer waits for another writer's lock before it gives up
WAIT = 600.0
#: files in a directory that may become a new store (left by a failed or racing creation)
_OWN_FILES = (sf.LOCK,)


def is_tally_store(path: Any) -> bool:
    """True when ``path`` is a directory holding a tally store (its ``CURRENT`` file, or the
    generations of a store whose ``CURRENT`` is lost).

    Examples
    --------
    >>> import tempfile, pathlib
    >>> import bayesldp
    >>> from bayesldp.workflows.tally_store import TallyStore, is_tally_store
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> store = TallyStore.create(d / "store", bayesldp.GRR(3, 1.0))
    >>> is_tally_store(d / "store"), is_tally_store(d)
    (True, False)
    """
    if not isinstance(path, str | os.PathLike) or not Path(path).is_dir():
        return False
    if sf.creation_interrupted(Path(path)):  # a killed creation: no store (made afresh)
        return False
    try:
        return (Path(path) / sf.CURRENT).is_file() or bool(sf.generations_on_disk(Path(path)))
    except OSError:  # an unreadable directory: not a store it can tell (its reader says why)
        return False


def _report_files(files: Any) -> list[Path]:
    """``files`` as paths, each an existing regular file (checked before anything is locked)."""
    if isinstance(files, str | os.PathLike):
        files = [files]
    paths = [Path(f) for f in files]
    if not paths:
        raise InvalidInputError("files: no report files given")
    for path in paths:
        if path.is_dir():
            raise InvalidInputError(
                f"files: {path} is a directory, not a report file (give its files, e.g. "
                f"{path / '*.csv'})"
            )
        if not path.is_file():
            raise InvalidInputError(f"files: no such file {path}")
    return paths


def _leftover(name: str) -> bool:
    """A file that a failed or killed creation may leave (the lock, a temporary file, a state
    file written before its manifest): it does not stop a new store from being made here."""
    if sf.creation_leftover(name):  # (only where no store is: a killed creation's)
        return True
    return name in _OWN_FILES or name.endswith(".tmp") or re.fullmatch(r"state-\d+\.npz", name)


def _check_new_store_path(path: Path) -> None:
    """``path`` can become a new store: not a file, not under one, not a foreign directory."""
    for parent in (path, *path.parents):
        if parent.exists() and not parent.is_dir():
            where = "is" if parent == path else f"lies under {parent}, which is"
            raise InvalidInputError(f"store: {path} {where} a file, not a tally store directory")
    if path.is_dir():
        foreign = sorted(p.name for p in path.iterdir() if not _leftover(p.name))
        if foreign:
            shown = ", ".join(foreign[:3]) + (", ..." if len(foreign) > 3 else "")
            raise InvalidInputError(
                f"store: {path} is a directory holding other files ({shown}), not a tally "
                "store; give a new or empty directory"
            )


class TallyStore:
    """A directory holding one mechanism's tally and the inputs counted into it.

    Parameters
    ----------
    path : str or Path
        An existing store (made by :meth:`create` or :meth:`append_to`).
    wait : float
        Seconds an append waits for another process's append to finish before it gives up.

    Examples
    --------
    >>> import bayesldp, numpy as np, tempfile, pathlib
    >>> from bayesldp.workflows.tally_store import TallyStore
    >>> mech = bayesldp.GRR(3, 1.0)
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> mech.reports_to_frame(mech.perturb(np.array([0, 1, 2, 0]), rng=0)).to_csv(d / "a.csv",
    ...                                                                          index=False)
    >>> store = TallyStore.create(d / "store", mech)
    >>> [r["status"] for r in store.append([d / "a.csv", d / "a.csv"])]
    ['counted', 'already counted']
    >>> store.tally().n
    4
    >>> _ = (d / "b.csv").write_bytes((d / "a.csv").read_bytes())  # the same 4 reports again
    >>> [r["status"] for r in store.append([d / "b.csv"])]  # 4 rows repeat by chance plausibly
    ['counted']
    >>> store.tally().n
    8
    """

    def __init__(self, path: str | os.PathLike[str], *, wait: float = WAIT) -> None:
        self.path = Path(path)
        self.wait = wait
        if self.path.exists() and not self.path.is_dir():
            raise InvalidInputError(f"store: {self.path} is a file, not a tally store directory")
        if not is_tally_store(self.path):
            raise InvalidInputError(
                f"store: {self.path} is not a tally store (no {sf.CURRENT} file); make one with "
                "TallyStore.create(path, mechanism)"
            )

    @classmethod
    def create(cls, path: str | os.PathLike[str], mechanism: Mechanism) -> TallyStore:
        """A new, empty store for reports of ``mechanism`` (the directory must not hold one)."""
        return cls._open(Path(path), mechanism, [], exist_ok=False)[0]

    @classmethod
    def append_to(
        cls,
        path: str | os.PathLike[str],
        files: Any,
        mechanism: Mechanism,
        *,
        wait: float = WAIT,
        batch_id: str | None = None,
        distinct: bool = False,
    ) -> tuple[TallyStore, list[dict[str, Any]]]:
        """Append ``files`` to the store at ``path``, creating it for ``mechanism`` first if it
        does not exist, as one atomic step: the store appears with its first files counted, or
        not at all (a file that cannot be read leaves no store).  A store that exists (or that
        another process creates meanwhile) must have been made for ``mechanism``, else an
        :class:`~bayesldp.InvalidInputError` and nothing is appended.

        Returns the store and :meth:`append`'s records (``batch_id`` and ``distinct`` as
        there).
        """
        options = {"batch_id": check_batch_id(batch_id), "distinct": bool(distinct)}
        return cls._open(Path(path), mechanism, _report_files(files), exist_ok=True, wait=wait,
                         **options)  # fmt: skip

    @classmethod
    def _open(
        cls,
        path: Path,
        mechanism: Mechanism,
        files: list[Path],
        exist_ok: bool,
        wait: float = WAIT,
        **options: Any,
    ) -> tuple[TallyStore, list[dict[str, Any]]]:
        if not isinstance(mechanism, Mechanism):
            raise InvalidInputError(
                f"mechanism: expected a bayesldp mechanism, got {type(mechanism).__name__}"
            )
        made = []  # the directories this call makes: removed again if the creation fails
        if not is_tally_store(path):
            _check_new_store_path(path)
            made = sf.missing_directories(path)
            try:
                path.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                sf.remove_made(made)
                raise InvalidInputError(f"store: cannot create {path}: {exc.strerror}") from None
        try:
            return cls._open_locked(path, mechanism, files, exist_ok, wait, **options)
        except BaseException:
            if not is_tally_store(path):
                sf.remove_made(made)
            raise

    @classmethod
    def _open_locked(
        cls,
        path: Path,
        mechanism: Mechanism,
        files: list[Path],
        exist_ok: bool,
        wait: float,
        **options: Any,
    ) -> tuple[TallyStore, list[dict[str, Any]]]:
        with sf.store_lock(path, wait):  # creation and appends take turns
            if is_tally_store(path):  # it was there, or another process created it meanwhile
                if not exist_ok:
                    raise InvalidInputError(f"store: {path} already holds a tally store")
                store = cls(path, wait=wait)
                if store.mechanism != mechanism:
                    raise InvalidInputError(
                        f"store: {path} holds reports of {store.mechanism!r} (created by another "
                        f"process meanwhile?), not of {mechanism!r}; nothing appended"
                    )
                return store, store._append_locked(files, **options)
            _check_new_store_path(path)
            manifest = {"mechanism": type(mechanism).__name__, "params": mechanism.params(),
                        "inputs": []}  # fmt: skip
            store = cls.__new__(cls)
            store.path, store.wait = path, wait
            with sf.creating(path):  # a killed creation leaves no store, not a damaged one
                if not files:
                    sf.write_atomic(path / sf.manifest_name(0), lambda fh: fh.write(
                        sf.manifest_bytes(manifest)))  # fmt: skip
                    _test_crash_point("store-created")
                    sf.write_atomic(path / sf.CURRENT, lambda fh: fh.write(b"0"))
                    sf.fsync_dir(path)
                    return store, []
                records, total = count_files(files, manifest, mechanism, None, **options)
                store._commit(1, manifest, total)  # the first generation, whole, then CURRENT
                return store, records

    # ------------------------------------------------------------------ reading
    def _generation(self) -> int:
        try:
            text = (self.path / sf.CURRENT).read_text(encoding="ascii").strip()
        except FileNotFoundError:
            raise sf.damaged(self.path, f"{sf.CURRENT} is missing", None) from None
        except (UnicodeDecodeError, OSError):
            text = None
        if not text or not text.isdigit():
            shown = "empty" if text == "" else f"holds {text!r}" if text else "is not text"
            raise sf.damaged(self.path, f"{sf.CURRENT} {shown}, not a generation number", None)
        return int(text)

    def _manifest(self, generation: int) -> dict[str, Any]:
        path = self.path / sf.manifest_name(generation)
        try:
            return sf.parse_manifest(path.read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError) as exc:
            raise sf.damaged(self.path, f"{path.name} is damaged: {exc}", generation) from None
        except (PermissionError, IsADirectoryError) as exc:
            raise InvalidInputError(f"store: cannot read {path}: {exc.strerror}") from None

    def _at_current(self, read: Callable[[int], Any]) -> Any:
        """``read(generation)`` at the current generation.  An append in another process may
        commit generations ``G + 1`` and ``G + 2`` and remove ``G``'s files between reading
        ``CURRENT`` and reading them (readers take no lock): then read again at the new one.
        A file missing from the generation still in force is damage."""
        for attempt in range(_READ_ATTEMPTS):
            generation = self._generation()
            try:
                return read(generation)
            except FileNotFoundError as exc:
                if self._generation() == generation or attempt == _READ_ATTEMPTS - 1:
                    name = Path(exc.filename).name if exc.filename else "a file"
                    raise sf.damaged(self.path, f"{name} is missing", generation) from None
        raise AssertionError("unreachable")

    def _mechanism_of(self, manifest: dict[str, Any], generation: int) -> Mechanism:
        try:
            return rebuild_mechanism(manifest["mechanism"], manifest["params"])
        except (BayesLDPError, KeyError, TypeError, ValueError) as exc:
            raise sf.damaged(
                self.path, f"{sf.manifest_name(generation)} names no valid mechanism: {exc}",
                generation,
            ) from None

    @property
    def mechanism(self) -> Mechanism:
        """The mechanism every input of the store was collected with."""
        return self._at_current(lambda g: self._mechanism_of(self._manifest(g), g))

    def inputs(self) -> list[dict[str, Any]]:
        """Every input counted so far: ``name``, ``sha256``, ``reports``, ``appended_at`` (and,
        for inputs counted since batches have an identity, ``path``, ``content``, ``rows`` and,
        for a file that grew, ``continues`` and ``rows_before``)."""
        return list(self._at_current(self._manifest)["inputs"])

    def tally(self) -> Tally:
        """The tally of every input counted so far (for ``estimate`` and ``fit``)."""
        return self._at_current(lambda g: self._read_state(g, self._manifest(g)))

    def _read_state(self, generation: int, manifest: dict[str, Any]) -> Tally:
        mechanism = self._mechanism_of(manifest, generation)
        if not manifest["inputs"]:  # only the empty store's generation has no state file
            raise InvalidInputError(f"store: {self.path} holds no reports yet; append some")
        state = self.path / sf.state_name(generation)
        try:
            raw = state.read_bytes()  # FileNotFoundError: _at_current decides
        except (PermissionError, IsADirectoryError) as exc:
            raise InvalidInputError(f"store: cannot read {state}: {exc.strerror}") from None
        expected = manifest.get("state_sha256")
        where = f"{state.name} (the tally)"
        if expected is not None and hashlib.sha256(raw).hexdigest() != expected:
            raise sf.damaged(self.path, f"{where} is damaged: its SHA-256 differs from the one "
                             f"{sf.manifest_name(generation)} records (truncated or altered)",
                             generation)  # fmt: skip
        try:
            with np.load(io.BytesIO(raw), allow_pickle=False) as data:
                common = {"stat": data["stat"], "mechanism": mechanism, "dedupe": False}
                if "support" in data:
                    levels = tuple(float(v) for v in data["levels"])
                    tally = Tally(data["counts"], support=data["support"], levels=levels, **common)
                else:
                    tally = Tally(data["counts"], rows=data["rows"], **common)
        except (OSError, EOFError, KeyError, ValueError, zipfile.BadZipFile) as exc:
            raise sf.damaged(self.path, f"{where} cannot be read: {exc}", generation) from None
        listed = [entry.get("reports") for entry in manifest["inputs"]]
        if all(isinstance(r, int) for r in listed) and sum(listed) != tally.n:
            raise sf.damaged(self.path, f"{where} holds {tally.n:,} reports where its inputs "
                             f"list {sum(listed):,}", generation)  # fmt: skip
        return tally

    # ------------------------------------------------------------------ appending
    def append(
        self, files: Any, *, batch_id: str | None = None, distinct: bool = False
    ) -> list[dict[str, Any]]:
        """Tally the report files and add them to the store, as one atomic step.

        Each file is counted as a batch (the module docstring states the rule): ``batch_id``
        names it (every file of the call, in order: snapshots of one log), else the file's
        path without its suffix does.  ``distinct=True`` counts a new batch even where its
        first rows repeat a counted batch's (reports that are new, however alike).

        Returns one record per file: ``name``, ``sha256``, ``reports`` (how many were counted
        now), ``status`` and ``note``.  ``status`` is ``"counted"``; ``"already counted"`` for
        the same reports as its batch counted before, in this call or an earlier one, in any
        encoding (nothing counted); or ``"new rows counted"`` for a file that starts with the
        rows its batch counted before (only the rows after them are counted).  A file that
        cannot be read as this mechanism's reports, that holds other content under the name of
        a batch counted before, or that repeats another batch's rows beyond chance, raises an
        :class:`~bayesldp.InvalidInputError` naming it, and nothing of the call is stored.
        """
        paths = _report_files(files)
        options = {"batch_id": check_batch_id(batch_id), "distinct": bool(distinct)}
        with sf.store_lock(self.path, self.wait):
            return self._append_locked(paths, **options)

    def _append_locked(self, paths: list[Path], **options: Any) -> list[dict[str, Any]]:
        if not paths:
            return []

        def read(g: int) -> tuple[int, dict[str, Any], Tally | None]:
            manifest = self._manifest(g)
            return g, manifest, self._read_state(g, manifest) if manifest["inputs"] else None

        generation, manifest, total = self._at_current(read)  # locked: nothing moves meanwhile
        mechanism = self._mechanism_of(manifest, generation)
        records, total = count_files(paths, manifest, mechanism, total, **options)
        if any(r["status"] != "already counted" for r in records):
            self._commit(generation + 1, manifest, total)
            self._drop(generation - 1)  # generation stays: the roll-back target
        return records

    def _commit(self, generation: int, manifest: dict[str, Any], tally: Tally) -> None:
        arrays = {"counts": tally.counts, "stat": tally.stat}
        if tally.is_support_form:
            arrays |= {"support": tally.support, "levels": np.asarray(tally.levels, dtype=float)}
        else:
            arrays["rows"] = tally.rows
        buffer = io.BytesIO()
        np.savez(buffer, **arrays)
        state = buffer.getvalue()
        manifest["state_sha256"] = hashlib.sha256(state).hexdigest()
        try:
            sf.write_atomic(self.path / sf.state_name(generation), lambda fh: fh.write(state))
            sf.write_atomic(self.path / sf.manifest_name(generation),
                            lambda fh: fh.write(sf.manifest_bytes(manifest)))  # fmt: skip
            sf.fsync_dir(self.path)
            sf.write_atomic(self.path / sf.CURRENT, lambda fh: fh.write(str(generation).encode()))
        except OSError as exc:  # CURRENT still names the previous generation: undo the new one
            self._drop(generation)
            before = (f"the store is unchanged at generation {generation - 1}"
                      if generation > 1 else "no store was created")  # fmt: skip
            raise StoreWriteError(
                f"store: cannot write {self.path} ({exc.strerror or exc}); {before}, nothing "
                "of this append was counted"
            ) from None
        try:
            sf.fsync_dir(self.path)
        except OSError as exc:
            raise StoreWriteError(
                f"store: generation {generation} of {self.path} was written but the directory "
                f"could not be synced to disk ({exc.strerror or exc})"
            ) from None

    def _drop(self, generation: int) -> None:
        if generation < 0:
            return
        for name in (sf.state_name(generation), sf.manifest_name(generation)):
            (self.path / name).unlink(missing_ok=True)
