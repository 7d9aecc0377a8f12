"""The whole record's channel, by brute force on small domains, and a mechanism over records.

A record ``x = (x_1, ..., x_d)`` is one category of the product domain, numbered in C order
(``np.ravel_multi_index(x, ks)``); a record's report is one output of the product of the
attributes' report alphabets (SPL, RS+FD: ``(y_1, ..., y_d)``, numbered in C order; SMP:
``(j, y_j)``, the attributes' blocks one after the other).  Attribute reports are numbered as the
attributes' own channels number them: GRR by value, unary encodings by the bit pattern
``sum_v b_v 2^v``.  The channel is written out from its definition, independently of the closed
forms in :mod:`~bayesldp.mechanisms.multidimensional.protocols`, which the tests compare to it;
:class:`RecordMechanism` exposes it to :func:`bayesldp.audit.audit`.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from bayesldp._validation import RNGLike, check_values
from bayesldp.errors import NotSupportedError
from bayesldp.mechanisms.base import FiniteChannelMechanism
from bayesldp.mechanisms.grr import GRR
from bayesldp.mechanisms.multidimensional.protocols import (
    RSFD,
    SMP,
    SPL,
    Multidimensional,
    RecordReports,
)

#: largest record-level channel written out (entries)
MAX_RECORD_CHANNEL = 1 << 22


def _outputs(mech: Any) -> int:
    return mech.k if isinstance(mech, GRR) else 2**mech.k


def _outer(factors: list[np.ndarray]) -> np.ndarray:
    """``T[(x_1..x_d), (y_1..y_d)] = prod_i factors[i][x_i, y_i]``, both in C order."""
    out = np.ones(())
    for f in factors:
        out = np.multiply.outer(out, f)
    d = len(factors)
    out = out.transpose([*range(0, 2 * d, 2), *range(1, 2 * d, 2)])
    rows = math.prod(f.shape[0] for f in factors)
    return out.reshape(rows, -1)


def record_channel(protocol: Multidimensional) -> np.ndarray:
    """``P[x, y] = Pr(record report y | record x)`` written out from the protocol's definition.

    * SPL: ``prod_j C_j[x_j, y_j]``, ``C_j`` the attribute's channel at ``epsilon / d``;
    * SMP: ``(1/d) C_j[x_j, y]`` for the report ``(j, y)``;
    * RS+FD: ``(1/d) sum_j R_j[x_j, y_j] prod_{i != j} F_i[y_i]``, ``R_j`` the amplified
      channel and ``F_i`` the fake law.

    Examples
    --------
    >>> from bayesldp.mechanisms import SPL
    >>> from bayesldp.mechanisms.multidimensional import record_channel
    >>> channel = record_channel(SPL([2, 2], 2.0))
    >>> channel.shape, channel.sum(axis=1).round(12).tolist()
    ((4, 4), [1.0, 1.0, 1.0, 1.0])
    """
    ks, d = protocol.ks, protocol.d
    outputs = [_outputs(m) for m in protocol.marginals]
    size = math.prod(ks) * (sum(outputs) if isinstance(protocol, SMP) else math.prod(outputs))
    if size > MAX_RECORD_CHANNEL:
        raise NotSupportedError(
            f"{protocol!r}: the record-level channel has {size:,} entries; it is only written "
            f"out up to {MAX_RECORD_CHANNEL:,}"
        )
    if isinstance(protocol, SPL):
        return _outer([np.asarray(m.channel) for m in protocol.marginals])
    if isinstance(protocol, SMP):
        grid = np.indices(ks).reshape(d, -1)
        return np.hstack([np.asarray(m.channel)[grid[j]] / d
                          for j, m in enumerate(protocol.marginals)])  # fmt: skip
    if isinstance(protocol, RSFD):
        real = [np.asarray(m.sampled.channel) for m in protocol.marginals]
        fake = [_fake_law(m) for m in protocol.marginals]
        total = sum(_outer([real[i] if i == j else np.broadcast_to(fake[i], real[i].shape)
                            for i in range(d)]) for j in range(d))  # fmt: skip
        return total / d
    raise NotSupportedError(f"{type(protocol).__name__}: no record-level channel")


def _fake_law(mech: Any) -> np.ndarray:
    return mech.fake_law() if isinstance(mech, GRR) else np.exp(mech.log_fake_law())


def attribute_codes(mech: Any, part: np.ndarray) -> np.ndarray:
    """An attribute's reports as their column in the attribute's channel."""
    if isinstance(mech, GRR):
        return np.asarray(part, dtype=np.int64)
    return np.asarray(part, dtype=bool).astype(np.int64) @ (1 << np.arange(mech.k))


def encode_reports(protocol: Multidimensional, reports: RecordReports) -> np.ndarray:
    """Each record's report as its column of :func:`record_channel`."""
    codes = [attribute_codes(m, part)
             for m, part in zip(protocol.marginals, reports.parts, strict=True)]  # fmt: skip
    outputs = [_outputs(m) for m in protocol.marginals]
    if reports.attribute is None:
        return np.ravel_multi_index(codes, outputs)
    offsets = np.concatenate([[0], np.cumsum(outputs)[:-1]])
    out = np.empty(reports.n, dtype=np.int64)
    for j, code in enumerate(codes):
        out[reports.attribute == j] = offsets[j] + code
    return out


class RecordMechanism(FiniteChannelMechanism):
    """A multidimensional protocol as a mechanism over whole records (small domains).

    Categories are the records in C order, reports the columns of :func:`record_channel`; what
    :func:`bayesldp.audit.audit` needs to audit the record's privacy (two records ``x0``, ``x1``
    and the event that best tells them apart).  ``epsilon`` is the claim audited: the
    protocol's realised record-level epsilon unless given.

    Examples
    --------
    SPL on two binary attributes as a mechanism over the 4 records:

    >>> from bayesldp.mechanisms import SPL
    >>> from bayesldp.mechanisms.multidimensional import RecordMechanism
    >>> mech = RecordMechanism(SPL([2, 2], 2.0))
    >>> mech.k, round(mech.realised_epsilon(), 12)
    (4, 2.0)
    """

    name = "Record"
    RECOMMEND = False

    def __init__(self, protocol: Multidimensional, epsilon: float | None = None) -> None:
        self.protocol = protocol
        claim = protocol.realised_epsilon() if epsilon is None else epsilon
        super().__init__(math.prod(protocol.ks), claim)

    def params(self) -> dict[str, Any]:
        return {"k": self.k, "epsilon": self.epsilon, "protocol": repr(self.protocol)}

    @property
    def channel(self) -> np.ndarray:
        cached = getattr(self, "_channel", None)
        if cached is None:
            cached = self._channel = record_channel(self.protocol)
        return cached

    def records(self, x: Any) -> np.ndarray:
        """Record numbers ``x`` as ``(n, d)`` records."""
        return np.column_stack(np.unravel_index(check_values(x, self.k), self.protocol.ks))

    def perturb(self, x: Any, rng: RNGLike = None) -> np.ndarray:
        """Reports of the records numbered ``x``, as record-level report codes."""
        return encode_reports(self.protocol, self.protocol.perturb(self.records(x), rng))
