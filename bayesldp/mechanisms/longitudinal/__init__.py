"""Longitudinal mechanisms (L-GRR and the longitudinal unary encodings) and their memo of
permanent responses: :mod:`~bayesldp.mechanisms.longitudinal.mechanism` the mechanisms,
:mod:`~bayesldp.mechanisms.longitudinal.memo` the in-memory and durable memos."""

from bayesldp.mechanisms.longitudinal.mechanism import (
    LGRR,
    LOSUE,
    LOUE,
    LSOUE,
    LSUE,
    Longitudinal,
    LongitudinalUnary,
)
from bayesldp.mechanisms.longitudinal.memo import Memo, MemoError, MemoStore

__all__ = [
    "LGRR",
    "LOSUE",
    "LOUE",
    "LSOUE",
    "LSUE",
    "Longitudinal",
    "LongitudinalUnary",
    "Memo",
    "MemoError",
    "MemoStore",
]
