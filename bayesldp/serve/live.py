"""The adaptive survey for real respondents: assignments out, reports in, batches recorded.

:class:`LiveSurvey` joins a :class:`~bayesldp.serve.store.ReportStore` (``reports.sqlite``) and
the :class:`~bayesldp.serve.recorder.Recorder` of the data directory's
:class:`~bayesldp.AdaptiveSurvey` (``survey.npz``).  A respondent is assigned the subset the
survey's current posterior draw selects (:meth:`AdaptiveSurvey.next_subset`); its report is
stored durably at once; the recorder records the stored reports in the survey's batches
(``batch_size`` reports in their order of arrival, each with its own assignment's subset) and
then moves the subset for the next assignments.  In a server the recorder is a separate
process of lower priority whose published state the server reads, so that no request waits on
a refit.  A restart resumes the survey from its checkpoint and records the batches that were
stored but not yet recorded: the same reports, in the same order, the same state.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
from pathlib import Path
from typing import Any

from bayesldp.adaptive import AdaptiveSurvey
from bayesldp.serve import recorder
from bayesldp.serve.recorder import Recorder, exclusive, read_state
from bayesldp.serve.store import Assignment, ReportRefused, ReportStore


class LiveSurvey:
    """A live AdOBEst-LDP survey kept in ``directory`` (``survey.npz``, ``reports.sqlite``).

    Parameters
    ----------
    directory : str or PathLike
        The data directory (created if missing).  If it holds a survey, that survey resumes and
        ``survey_options`` must be None.
    survey_options : dict, optional
        Arguments of :class:`~bayesldp.AdaptiveSurvey` (``k``, ``epsilon``, ``utility``, ...)
        for a new survey.
    batch_size : int
        Reports per recorded batch (one subset update per batch).
    ttl : float
        Seconds an assignment's token stays valid.
    background : bool
        Record batches in a separate process of lower priority (a server; what it publishes is
        read every 0.1 s); False records them within :meth:`submit` (tests, scripts).
    stop : dict, optional
        A stopping target as :meth:`AdaptiveSurvey.simulate` takes it (``{"width": w}``,
        ``{"expected_tv": t}`` or ``{"cs_width": w}``; the posterior engine only), checked
        after every batch as ``simulate`` checks it; once met, new assignments are refused
        (410) and the dashboard says where it stopped.  The stop is kept in the store across
        restarts.

    Examples
    --------
    >>> import tempfile
    >>> live = LiveSurvey(tempfile.mkdtemp(), {"k": 3, "epsilon": 1.0, "random_seed": 0},
    ...                   batch_size=2, background=False)
    >>> for report in [0, 2, 1]:
    ...     seq = live.submit(live.assign().token, report)
    >>> live.survey.n_users, live.store.count()
    (2, 3)
    >>> live.close()
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        survey_options: dict | None = None,
        *,
        batch_size: int = 100,
        ttl: float = 3600.0,
        background: bool = True,
        stop: dict | None = None,
    ) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.batch_size, self.ttl = int(batch_size), float(ttl)
        with exclusive(self.directory):  # a restart: record what was stored but not recorded
            self._recorder: Recorder | None = Recorder(self.directory, survey_options,
                                                       self.batch_size, stop)  # fmt: skip
            self._recorder.record_ready()
        survey = self._recorder.survey
        self.k, self.epsilon, self.eps1 = survey.k, survey.epsilon, survey.eps1
        self.store = ReportStore(self.directory / "reports.sqlite", self.k)
        self._published = read_state(self.directory)
        self._quit = threading.Event()
        self._process = self._watcher = None
        if background:
            self._recorder.close()
            self._recorder = None
            self._start_recorder(survey_options, stop)

    def _start_recorder(self, survey_options: dict | None, stop: dict | None) -> None:
        """The recorder process (spawned: a fresh interpreter, nothing shared but the files)
        and the thread that reads what it publishes."""
        context = multiprocessing.get_context("spawn")
        self._process_quit = context.Event()
        self._process = context.Process(
            target=recorder.run, name="bayesldp-recorder", daemon=True,
            args=(str(self.directory), survey_options, self.batch_size, stop, os.getpid(),
                  self._process_quit),
        )  # fmt: skip
        self._process.start()
        self._watcher = threading.Thread(target=self._watch, name="bayesldp-watch", daemon=True)
        self._watcher.start()

    def _watch(self) -> None:
        """Read the recorder's ``state.json`` when it changes (looking every
        :data:`~bayesldp.serve.recorder.POLL` seconds)."""
        seen = None
        while not self._quit.wait(recorder.POLL):
            stamp = (self.directory / "state.json").stat().st_mtime_ns
            if stamp != seen:
                seen, self._published = stamp, read_state(self.directory)

    @property
    def survey(self) -> AdaptiveSurvey:
        """The survey as of its last recorded batch: the recorder's own in the foreground; with
        a recorder process, a read-only copy loaded from its checkpoint (a 409
        :class:`~bayesldp.serve.store.ReportRefused` before the first batch)."""
        if self._recorder is not None:
            return self._recorder.survey
        state = self.directory / "survey.npz"
        if not state.exists():
            raise ReportRefused(409, "survey: no batch recorded yet")
        return AdaptiveSurvey.resume(state, checkpoint=False)

    @property
    def subset(self) -> tuple[int, ...]:
        """The subset new assignments get."""
        return tuple(self._published["subset"])

    @property
    def stopped(self) -> dict[str, Any] | None:
        """Where the stopping target was met (None while it has not been)."""
        return self._published["stopped"]

    @property
    def error(self) -> str | None:
        """Why the recorder process stopped recording, if it did."""
        if self._published["error"] is not None:
            return self._published["error"]
        if self._process is not None and not self._process.is_alive() and not self._quit.is_set():
            return f"recorder: the process exited (code {self._process.exitcode})"
        return None

    def assign(self) -> Assignment:
        """A new respondent's assignment (token, subset, expiry); a 410
        :class:`~bayesldp.serve.store.ReportRefused` once the stopping target is met."""
        if self.stopped is not None:
            raise ReportRefused(410, "survey: it has stopped (its target was met); thank you")
        return self.store.issue(self.subset, self.ttl)

    def submit(self, token: str, report: Any) -> int:
        """Store one report (see :meth:`ReportStore.accept`); returns its sequence number."""
        outcome = self.submit_many([(token, report)])[0]
        if isinstance(outcome, ReportRefused):
            raise outcome
        return outcome

    def submit_many(self, items: list[tuple[str, Any]]) -> list[int | ReportRefused]:
        """Store many reports in one transaction (:meth:`ReportStore.accept_many`); in the
        foreground, record the batches they fill."""
        outcomes = self.store.accept_many(items)
        if self._recorder is not None and self._recorder.record_ready():
            self._published = read_state(self.directory)
        return outcomes

    def snapshot(self) -> dict[str, Any]:
        """The survey as of its last recorded batch (what the dashboard shows), plus the
        reports stored so far: plain JSON types."""
        out = dict(self._published["snapshot"])
        out["stored"] = self.store.count()
        out["error"] = self.error
        return out

    def close(self) -> None:
        """Stop the recorder (after its current batch) and close the store."""
        self._quit.set()
        if self._process is not None:
            self._process_quit.set()
            self._process.join(timeout=120)
            if self._process.is_alive():
                self._process.terminate()
            self._watcher.join()
        if self._recorder is not None:
            self._recorder.close()
        self.store.close()
