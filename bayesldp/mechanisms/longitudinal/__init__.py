"""Longitudinal mechanisms (L-GRR, the longitudinal unary encodings, dBitFlipPM) and their memo
of permanent responses: :mod:`~bayesldp.mechanisms.longitudinal.mechanism` the mechanisms,
:mod:`~bayesldp.mechanisms.longitudinal.dbitflip` dBitFlipPM,
:mod:`~bayesldp.mechanisms.longitudinal.memo` the in-memory and durable memos."""

from bayesldp.mechanisms.longitudinal.dbitflip import DBitFlipPM as DBitFlipPM
from bayesldp.mechanisms.longitudinal.dbitflip import DBitReports as DBitReports
from bayesldp.mechanisms.longitudinal.mechanism import LGRR as LGRR
from bayesldp.mechanisms.longitudinal.mechanism import LOSUE as LOSUE
from bayesldp.mechanisms.longitudinal.mechanism import LOUE as LOUE
from bayesldp.mechanisms.longitudinal.mechanism import LSOUE as LSOUE
from bayesldp.mechanisms.longitudinal.mechanism import LSUE as LSUE
from bayesldp.mechanisms.longitudinal.mechanism import Longitudinal as Longitudinal
from bayesldp.mechanisms.longitudinal.mechanism import LongitudinalUnary as LongitudinalUnary
from bayesldp.mechanisms.longitudinal.memo import Memo as Memo
from bayesldp.mechanisms.longitudinal.memo import MemoError as MemoError
from bayesldp.mechanisms.longitudinal.memo import MemoStore as MemoStore
