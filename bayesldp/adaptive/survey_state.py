"""Saving and resuming an :class:`~bayesldp.adaptive.AdaptiveSurvey` (a mixin of the survey class).

The state after a batch (reports, subsets, ``phi``, draws, counters, the posterior pool and the
seed) determines everything that follows; :mod:`bayesldp.adaptive.checkpoint` writes it
atomically with a checksum, and :meth:`SurveyState.resume` continues it bit-identically.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Self

import numpy as np

from bayesldp.adaptive.checkpoint import CheckpointError, read_state, write_state
from bayesldp.adaptive.config import SurveyConfig
from bayesldp.adaptive.store import ReportStore, grown
from bayesldp.errors import InvalidInputError, InvalidTypeError

__all__ = ["SurveyState"]


class SurveyState:
    """``save`` / ``resume`` of a survey (mixed into ``AdaptiveSurvey``)."""

    def _state_arrays(self) -> dict[str, np.ndarray]:
        nb = self._n_batches
        return {
            "phi": self._phi.copy(),
            "theta_hist": self._theta_hist[: nb + 1].copy(),
            "batch_sizes": self._batch_sizes[:nb].copy(),
            **self._store.state_arrays(self._n),
            **(self._pool.state_arrays() if self.engine == "posterior" else {}),
        }

    def save(self, path: str | os.PathLike[str] | None = None) -> Path:
        """Write the survey's state atomically (:mod:`bayesldp.adaptive.checkpoint`).

        Defaults to the ``checkpoint`` path.  Returns the path written.
        """
        if path is None:
            if self._checkpoint is None:
                raise InvalidInputError("path: the survey has no checkpoint path; give one")
            target = self._checkpoint
        else:
            target = Path(os.fspath(path))
        return write_state(target, self.config.to_dict(), self._state_arrays())

    @classmethod
    def resume(cls, path: str | os.PathLike[str], *, checkpoint: bool = True) -> Self:
        """Load a survey from its state file and continue it (bit-identically).

        Parameters
        ----------
        path : str or PathLike
            A file written by :meth:`save` (the ``checkpoint`` of a survey).
        checkpoint : bool
            Keep writing the state to ``path`` after every batch (default True).

        Raises
        ------
        CheckpointError
            The file is missing, unreadable, truncated, fails its checksum, is not an
            AdaptiveSurvey state, has another format version, or is inconsistent.
        """
        path = Path(os.fspath(path))
        config, arrays = read_state(path)
        survey = cls.__new__(cls)
        try:
            survey._setup(SurveyConfig.from_dict(config))
        except (InvalidInputError, InvalidTypeError, KeyError) as exc:
            raise CheckpointError(
                f"checkpoint: {str(path)!r} holds an invalid config: {exc}"
            ) from None
        survey._restore(arrays, path)
        survey.stopped = None
        survey._final = None
        survey._checkpoint = path if checkpoint else None
        return survey

    def _restore(self, arrays: dict[str, np.ndarray], path: Path) -> None:
        k = self.k

        def bad(what: str) -> CheckpointError:
            return CheckpointError(f"checkpoint: {str(path)!r} is inconsistent: {what}")

        phi = np.asarray(arrays["phi"], dtype=float)
        theta_hist = np.asarray(arrays["theta_hist"], dtype=float)
        sizes = np.asarray(arrays["batch_sizes"])
        nb = sizes.shape[0]
        if phi.shape != (k,) or not (np.all(np.isfinite(phi)) and phi.min() >= 0):
            raise bad("phi")
        if theta_hist.shape != (nb + 1, k) or sizes.ndim != 1 or (nb and sizes.min() < 1):
            raise bad("batch records")
        n = int(sizes.sum())
        self._store = ReportStore.from_state(k, self._params, arrays, n, bad)
        self._phi = phi.copy()
        self._theta_hist = grown(theta_hist.copy(), nb + 1)
        self._batch_sizes = grown(sizes.astype(np.int64), nb)
        self._n_batches = nb
        self._n = n
        if self.engine == "posterior":
            self._pool.restore(arrays, n, bad)
        self._order = np.arange(k)
        self._rank = np.arange(k)
