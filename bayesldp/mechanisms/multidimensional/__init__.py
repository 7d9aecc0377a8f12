"""Frequency estimation of several attributes (SPL, SMP, RS+FD): records of ``d`` attributes
in, one exact tally per attribute out.  :mod:`~bayesldp.mechanisms.multidimensional.protocols`
the protocols, :mod:`~bayesldp.mechanisms.multidimensional.fake_data` RS+FD's per-attribute
mixture channels, :mod:`~bayesldp.mechanisms.multidimensional.record` the whole record's
channel (brute force, small domains) and a mechanism over records for the audit."""

from bayesldp.mechanisms.multidimensional.fake_data import FakeDataGRR as FakeDataGRR
from bayesldp.mechanisms.multidimensional.fake_data import FakeDataUnary as FakeDataUnary
from bayesldp.mechanisms.multidimensional.fake_data import amplified_epsilon as amplified_epsilon
from bayesldp.mechanisms.multidimensional.fake_data import (
    record_budget_epsilon as record_budget_epsilon,
)
from bayesldp.mechanisms.multidimensional.protocols import RSFD as RSFD
from bayesldp.mechanisms.multidimensional.protocols import SMP as SMP
from bayesldp.mechanisms.multidimensional.protocols import SPL as SPL
from bayesldp.mechanisms.multidimensional.protocols import Multidimensional as Multidimensional
from bayesldp.mechanisms.multidimensional.protocols import RecordReports as RecordReports
from bayesldp.mechanisms.multidimensional.protocols import fit_marginals as fit_marginals
from bayesldp.mechanisms.multidimensional.record import RecordMechanism as RecordMechanism
from bayesldp.mechanisms.multidimensional.record import record_channel as record_channel

__all__ = [
    "RSFD",
    "SMP",
    "SPL",
    "FakeDataGRR",
    "FakeDataUnary",
    "Multidimensional",
    "RecordMechanism",
    "RecordReports",
    "amplified_epsilon",
    "fit_marginals",
    "record_budget_epsilon",
    "record_channel",
]
