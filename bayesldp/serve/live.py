"""The adaptive survey for real respondents: assignments out, reports in, batches recorded.

:class:`LiveSurvey` joins an :class:`~bayesldp.AdaptiveSurvey` (its checkpoint in the data
directory) and a :class:`~bayesldp.serve.store.ReportStore`.  A respondent is assigned the
subset the survey's current posterior draw selects (:meth:`AdaptiveSurvey.next_subset`); its
report is stored durably at once; a background thread records the stored reports in the
survey's batches (``batch_size`` reports in their order of arrival, each with its own
assignment's subset) and then moves the subset for the next assignments, so that no request
waits on a refit.  A restart resumes the survey from its checkpoint and records the batches
that were stored but not yet recorded: the same reports, in the same order, the same state.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import numpy as np

from bayesldp.adaptive import AdaptiveSurvey
from bayesldp.adaptive.stopping import StopRule
from bayesldp.errors import InvalidInputError
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
        Record batches in a background thread (a server); False records them within
        :meth:`submit` (tests, scripts).
    stop : dict, optional
        A stopping target as :meth:`AdaptiveSurvey.simulate` takes it (``{"width": w}`` or
        ``{"expected_tv": t}``; the posterior engine only), checked after every batch as
        ``simulate`` checks it; once met, new assignments are refused (410) and the
        dashboard says where it stopped.  The stop is kept in the store across restarts.

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
        state = self.directory / "survey.npz"
        if state.exists():
            if survey_options is not None:
                raise InvalidInputError(
                    f"directory: {str(self.directory)!r} holds a survey already; resume it "
                    "without survey_options"
                )
            self.survey = AdaptiveSurvey.resume(state)
        else:
            if survey_options is None:
                raise InvalidInputError("survey_options: a new survey needs k, epsilon, ...")
            self.survey = AdaptiveSurvey(**survey_options, checkpoint=state)
        self.store = ReportStore(self.directory / "reports.sqlite", self.survey.k)
        self.rule = StopRule.parse(stop)
        if self.rule is not None and self.survey.engine != "posterior":
            raise InvalidInputError(
                f"stop: checked on the posterior engine's pool of draws; this survey's engine is "
                f"{self.survey.engine!r}"
            )
        self.stopped: dict[str, Any] | None = self.store.get("stopped")
        self.batch_size, self.ttl = int(batch_size), float(ttl)
        self._lock = threading.Lock()
        self._subset = tuple(self.survey.next_subset().subset)
        self._wake = threading.Event()
        self._stop = threading.Event()
        self.error: BaseException | None = None
        self._snapshot = self._summary()
        self.record_ready()  # a restart: record what was stored but not recorded
        self._thread = None
        if background:
            self._thread = threading.Thread(target=self._run, name="bayesldp-refit", daemon=True)
            self._thread.start()

    @property
    def subset(self) -> tuple[int, ...]:
        """The subset new assignments get."""
        with self._lock:
            return self._subset

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
        """Store many reports in one transaction (:meth:`ReportStore.accept_many`)."""
        outcomes = self.store.accept_many(items)
        if self._thread is None:
            self.record_ready()
        else:
            self._wake.set()
        return outcomes

    def record_ready(self) -> int:
        """Record every full batch of stored reports not yet in the survey; returns how many."""
        done = 0
        while self.store.count() >= self.survey.n_users + self.batch_size:
            start = self.survey.n_users
            reports, masks = self.store.batch(start, start + self.batch_size)
            self.survey.record(reports, masks, batch=self.survey.n_batches)
            self._check_stop()
            subset, summary = tuple(self.survey.next_subset().subset), self._summary()
            with self._lock:
                self._subset, self._snapshot = subset, summary
            done += 1
        return done

    def _check_stop(self) -> None:
        """After a batch: whether the survey's posterior meets the stopping target now (the
        check of ``simulate(stop=...)``); the stop is stored."""
        if self.rule is None or self.stopped is not None or not self.survey._met(self.rule):
            return
        self.stopped = {key: (float(v) if isinstance(v, float) else v)
                        for key, v in self.survey.stopped.items()}  # fmt: skip
        self.store.put("stopped", self.stopped)

    def snapshot(self) -> dict[str, Any]:
        """The survey as of its last recorded batch (what the dashboard shows), plus the
        reports stored so far: plain JSON types."""
        with self._lock:
            out = dict(self._snapshot)
        out["stored"] = self.store.count()
        out["error"] = None if self.error is None else str(self.error)
        return out

    def _summary(self) -> dict[str, Any]:
        """Recorded users, the subset sizes per batch and the posterior's trajectory (the mean
        and 90% band at each refresh of the survey's pool of draws)."""
        history = self.survey.history
        out: dict[str, Any] = {
            "k": self.survey.k,
            "epsilon": self.survey.epsilon,
            "recorded": self.survey.n_users,
            "batches": self.survey.n_batches,
            "subset": list(self._subset) if hasattr(self, "_subset") else [],
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

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(timeout=1.0)
            self._wake.clear()
            try:
                self.record_ready()
            except BaseException as exc:  # kept for the server to report; the loop stops
                self.error = exc
                return

    def close(self) -> None:
        """Stop the background thread (after its current batch) and close the store."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join()
        self.store.close()
