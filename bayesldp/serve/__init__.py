"""A live adaptive survey: durable assignments and reports (:mod:`.store`) and the loop that
records them into an :class:`~bayesldp.AdaptiveSurvey` (:mod:`.live`)."""

from bayesldp.serve.live import LiveSurvey
from bayesldp.serve.store import Assignment, ReportRefused, ReportStore

__all__ = ["Assignment", "LiveSurvey", "ReportRefused", "ReportStore"]
