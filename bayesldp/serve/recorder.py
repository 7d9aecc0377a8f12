"""The live survey's recorder: stored reports into the survey's batches, one process at a time.

:class:`Recorder` owns the :class:`~bayesldp.AdaptiveSurvey` of a data directory (its
checkpoint ``survey.npz``).  It records every full batch of the reports stored in
``reports.sqlite`` (in their order of arrival, each with its own assignment's subset), checks
the stopping target after each batch, and *publishes* what the server needs in ``state.json``
(replaced atomically): the subset new assignments get, the dashboard's snapshot, the stop and
the recorder's error if it failed.  The file is derived state, rewritten on every start.

A server runs the recorder in a separate process of lower priority (:func:`run`): in a thread of
the server, the first batch (which loads the compiled kernels, seconds) and every refit held the
interpreter lock the respondents' requests need.  The recorder reads the report store and writes
only its own files, so the server's writes never wait on it.  An exclusive lock on
``recorder.lock`` keeps one recorder per directory: after a ``kill -9`` of a server its recorder
notices the orphaning, finishes the batch it is on (the checkpoint is written atomically) and
exits, and the restarted server waits for that.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from bayesldp.adaptive import AdaptiveSurvey
from bayesldp.adaptive.stopping import StopRule
from bayesldp.errors import InvalidInputError
from bayesldp.serve.store import ReportStore

#: seconds between two looks at the store for a new full batch (and at the published state)
POLL = 0.1


@contextlib.contextmanager
def exclusive(directory: Path) -> Iterator[None]:
    """Hold the directory's recorder lock (waiting while another process holds it)."""
    with open(directory / "recorder.lock", "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def read_state(directory: Path) -> dict[str, Any]:
    """What the recorder of ``directory`` last published."""
    return json.loads((directory / "state.json").read_text("utf-8"))


def _write_state(directory: Path, state: dict[str, Any]) -> None:
    partial = directory / "state.json.tmp"
    partial.write_text(json.dumps(state), "utf-8")
    os.replace(partial, directory / "state.json")


class Recorder:
    """The survey of ``directory`` and the batches it has recorded (see the module docstring).

    Parameters
    ----------
    directory : Path
        The data directory; a survey in it (``survey.npz``) resumes.
    survey_options : dict or None
        :class:`~bayesldp.AdaptiveSurvey`'s arguments for a new survey; None to resume.
    batch_size : int
        Reports per recorded batch.
    stop : dict or None
        The stopping target (:meth:`AdaptiveSurvey.simulate`'s ``stop``).
    """

    def __init__(self, directory: Path, survey_options: dict | None, batch_size: int,
                 stop: dict | None) -> None:  # fmt: skip
        self.directory = directory
        state = directory / "survey.npz"
        if state.exists():
            if survey_options is not None:
                raise InvalidInputError(
                    f"directory: {str(directory)!r} holds a survey already; resume it "
                    "without survey_options"
                )
            self.survey = AdaptiveSurvey.resume(state)
        else:
            if survey_options is None:
                raise InvalidInputError("survey_options: a new survey needs k, epsilon, ...")
            self.survey = AdaptiveSurvey(**survey_options, checkpoint=state)
        self.rule = StopRule.parse(stop)
        if self.rule is not None and self.survey.engine != "posterior":
            raise InvalidInputError(
                f"stop: checked on the posterior engine's pool of draws; this survey's engine is "
                f"{self.survey.engine!r}"
            )
        self.store = ReportStore(directory / "reports.sqlite", self.survey.k)
        self.stopped: dict[str, Any] | None = self.store.get("stopped")
        self.batch_size = int(batch_size)
        self.subset = tuple(self.survey.next_subset().subset)
        self.publish()

    def record_ready(self) -> int:
        """Record every full batch of stored reports not yet in the survey and publish the new
        state after each; returns how many batches."""
        done = 0
        while self.store.count() >= self.survey.n_users + self.batch_size:
            start = self.survey.n_users
            reports, masks = self.store.batch(start, start + self.batch_size)
            self.survey.record(reports, masks, batch=self.survey.n_batches)
            self._check_stop()
            self.subset = tuple(self.survey.next_subset().subset)
            self.publish()
            done += 1
        return done

    def publish(self, error: str | None = None) -> None:
        """Write the subset for new assignments, the snapshot, the stop and ``error``."""
        _write_state(self.directory, {"subset": list(self.subset), "snapshot": self.summary(),
                                      "stopped": self.stopped, "error": error})  # fmt: skip

    def _check_stop(self) -> None:
        """After a batch: whether the survey's posterior meets the stopping target now (the
        check of ``simulate(stop=...)``); the stop is stored."""
        if self.rule is None or self.stopped is not None or not self.survey._met(self.rule):
            return
        self.stopped = {key: (float(v) if isinstance(v, float) else v)
                        for key, v in self.survey.stopped.items()}  # fmt: skip
        self.store.put("stopped", self.stopped)

    def summary(self) -> dict[str, Any]:
        """Recorded users, the subset sizes per batch and the posterior's trajectory (the mean
        and 90% band at each refresh of the survey's pool of draws): plain JSON types."""
        history = self.survey.history
        out: dict[str, Any] = {
            "k": self.survey.k,
            "epsilon": self.survey.epsilon,
            "recorded": self.survey.n_users,
            "batches": self.survey.n_batches,
            "subset": list(self.subset),
            "stop": None if self.rule is None else self.rule.describe(),
            "stopped": self.stopped,
            "subset_sizes": history["subset_size"]
            .values[np.cumsum(history["batch_size"].values) - 1]
            .tolist()
            if self.survey.n_batches
            else [],
        }
        if "posterior_users" in history:
            for key in ("posterior_users", "posterior_mean", "posterior_lower", "posterior_upper"):
                out[key.removeprefix("posterior_")] = history[key].values.tolist()
        return out

    def close(self) -> None:
        self.store.close()


def run(directory: str, survey_options: dict | None, batch_size: int, stop: dict | None,
        parent: int, quit_event: threading.Event) -> None:  # fmt: skip
    """A recorder process's body: lower its priority, take the directory's lock, resume the
    survey and record the batches as they fill, until ``quit_event`` is set or the parent
    process ``parent`` is gone.  An error is published (``error``) for the server to show."""
    with contextlib.suppress(OSError):
        os.nice(10)
    path = Path(directory)
    with exclusive(path):
        recorder = None
        try:
            new = not (path / "survey.npz").exists()  # no batch recorded yet
            recorder = Recorder(path, survey_options if new else None, batch_size, stop)
            while not quit_event.is_set() and os.getppid() == parent:
                if not recorder.record_ready():
                    quit_event.wait(POLL)
        except BaseException as exc:  # published for the server; the recorder stops
            state = read_state(path)
            _write_state(path, {**state, "error": f"{type(exc).__name__}: {exc}"})
            raise
        finally:
            if recorder is not None:
                recorder.close()
