"""A durable, incremental tally: report files appended one batch at a time.

A tally is additive, so the reports of a collection that grows by the day never need to be read
twice: each batch of report files (CSV or Parquet, the mechanism's own layout) is tallied and
added to the stored tally.  The store is a directory:

* ``manifest-G.json``: the mechanism (name and parameters) and every input counted so far, by
  SHA-256 of its bytes, with its name, report count and time of appending;
* ``state-G.npz``: the tally of those inputs (counts, rows or support and levels, statistic);
* ``CURRENT``: the generation ``G`` in force.

An append writes generation ``G + 1`` next to ``G`` (each file to a temporary name, flushed,
fsynced and renamed into place), then replaces ``CURRENT`` atomically (``os.replace``), then
removes generation ``G``.  A crash at any point (a SIGKILL included) leaves ``CURRENT`` naming a
complete generation: the previous one until the final rename, the new one after it.  Files
whose content was counted before are skipped (``"already counted"``), so re-running the same
append never counts a report twice.  One append at a time holds an ``fcntl`` lock on the
directory; readers take no lock, and a read that finds the generation it started from removed
by a concurrent append reads the new one.

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
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from bayesldp.errors import InvalidInputError
from bayesldp.mechanisms import make_mechanism
from bayesldp.mechanisms.base import Mechanism
from bayesldp.tally import Tally
from bayesldp.workflows.outputs import directory_lock
from bayesldp.workflows.report_files import tally_file

__all__ = ["TallyStore", "is_tally_store"]

_CURRENT = "CURRENT"
#: reads of the current generation before a reader gives up on concurrent appends
_READ_ATTEMPTS = 20


def is_tally_store(path: Any) -> bool:
    """True when ``path`` is a directory holding a tally store (its ``CURRENT`` file)."""
    return isinstance(path, str | os.PathLike) and (Path(path) / _CURRENT).is_file()


def _file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _write_atomic(path: Path, write: Any) -> None:
    """``write(fh)`` into a temporary file, fsync it, rename it to ``path``."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as fh:
        write(fh)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class TallyStore:
    """A directory holding one mechanism's tally and the inputs counted into it.

    Parameters
    ----------
    path : str or Path
        An existing store (made by :meth:`create`).
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        if not is_tally_store(self.path):
            raise InvalidInputError(
                f"store: {self.path} is not a tally store (no {_CURRENT} file); make one with "
                "TallyStore.create(path, mechanism)"
            )

    @classmethod
    def create(cls, path: str | os.PathLike[str], mechanism: Mechanism) -> TallyStore:
        """A new, empty store for reports of ``mechanism`` (the directory must not hold one)."""
        if not isinstance(mechanism, Mechanism):
            raise InvalidInputError(
                f"mechanism: expected a bayesldp mechanism, got {type(mechanism).__name__}"
            )
        path = Path(path)
        if (path / _CURRENT).exists():
            raise InvalidInputError(f"store: {path} already holds a tally store")
        path.mkdir(parents=True, exist_ok=True)
        params = mechanism.params()
        manifest = {"mechanism": type(mechanism).__name__, "params": params, "inputs": []}
        _write_atomic(path / "manifest-0.json", lambda fh: fh.write(json.dumps(manifest).encode()))
        _write_atomic(path / _CURRENT, lambda fh: fh.write(b"0"))
        _fsync_dir(path)
        return cls(path)

    # ------------------------------------------------------------------ reading
    def _generation(self) -> int:
        return int((self.path / _CURRENT).read_text().strip())

    def _manifest(self, generation: int) -> dict[str, Any]:
        return json.loads((self.path / f"manifest-{generation}.json").read_text())

    def _at_current(self, read: Callable[[int], Any]) -> Any:
        """``read(generation)`` at the current generation.  An append in another process may
        commit generation ``G + 1`` and remove ``G``'s files between reading ``CURRENT`` and
        reading them (readers take no lock): then read again at the new generation."""
        for _ in range(_READ_ATTEMPTS - 1):
            generation = self._generation()
            try:
                return read(generation)
            except FileNotFoundError:
                if self._generation() == generation:
                    raise  # not a concurrent commit: the store lost a file
        return read(self._generation())

    @property
    def mechanism(self) -> Mechanism:
        """The mechanism every input of the store was collected with."""
        manifest = self._at_current(self._manifest)
        params = dict(manifest["params"])
        return make_mechanism(manifest["mechanism"], params.pop("k"), params.pop("epsilon"),
                              **params)  # fmt: skip

    def inputs(self) -> list[dict[str, Any]]:
        """Every input counted so far: ``name``, ``sha256``, ``reports``, ``appended_at``."""
        return list(self._at_current(self._manifest)["inputs"])

    def tally(self) -> Tally:
        """The tally of every input counted so far (for ``estimate`` and ``fit``)."""
        mechanism = self.mechanism
        return self._at_current(lambda generation: self._read_state(generation, mechanism))

    def _read_state(self, generation: int, mechanism: Mechanism) -> Tally:
        state = self.path / f"state-{generation}.npz"
        if generation == 0:  # only the empty store's generation has no state file
            raise InvalidInputError(f"store: {self.path} holds no reports yet; append some")
        with np.load(state, allow_pickle=False) as data:
            common = {"stat": data["stat"], "mechanism": mechanism, "dedupe": False}
            if "support" in data:
                levels = tuple(float(v) for v in data["levels"])
                return Tally(data["counts"], support=data["support"], levels=levels, **common)
            return Tally(data["counts"], rows=data["rows"], **common)

    # ------------------------------------------------------------------ appending
    def append(self, files: Any) -> list[dict[str, Any]]:
        """Tally the report files and add them to the store, as one atomic step.

        Returns one record per file: ``name``, ``sha256``, ``reports`` and ``status``
        (``"counted"``, or ``"already counted"`` for content counted before, in this call or an
        earlier one).  A file that cannot be read as this mechanism's reports raises an
        :class:`~bayesldp.InvalidInputError` naming it, and nothing of the call is stored.
        """
        paths = [Path(f) for f in ([files] if isinstance(files, str | os.PathLike) else files)]
        with directory_lock(self.path):
            generation = self._generation()
            manifest = self._manifest(generation)
            seen = {entry["sha256"] for entry in manifest["inputs"]}
            mech = self.mechanism
            total = self.tally() if manifest["inputs"] else None
            records = []
            for path in paths:
                digest = _file_digest(path)
                record = {"name": str(path), "sha256": digest}
                if digest in seen:
                    records.append({**record, "reports": None, "status": "already counted"})
                    continue
                tally = tally_file(mech, path)
                total = tally if total is None else total + tally
                seen.add(digest)
                stamp = _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")
                manifest["inputs"].append({**record, "reports": int(tally.n), "appended_at": stamp})
                records.append({**record, "reports": int(tally.n), "status": "counted"})
            if any(r["status"] == "counted" for r in records):
                self._commit(generation + 1, manifest, total)
                self._drop(generation)
        return records

    def _commit(self, generation: int, manifest: dict[str, Any], tally: Tally) -> None:
        arrays = {"counts": tally.counts, "stat": tally.stat}
        if tally.is_support_form:
            arrays |= {"support": tally.support, "levels": np.asarray(tally.levels, dtype=float)}
        else:
            arrays["rows"] = tally.rows
        _write_atomic(self.path / f"state-{generation}.npz", lambda fh: np.savez(fh, **arrays))
        _write_atomic(self.path / f"manifest-{generation}.json",
                      lambda fh: fh.write(json.dumps(manifest).encode()))  # fmt: skip
        _fsync_dir(self.path)
        _write_atomic(self.path / _CURRENT, lambda fh: fh.write(str(generation).encode()))
        _fsync_dir(self.path)

    def _drop(self, generation: int) -> None:
        for name in (f"state-{generation}.npz", f"manifest-{generation}.json"):
            (self.path / name).unlink(missing_ok=True)
