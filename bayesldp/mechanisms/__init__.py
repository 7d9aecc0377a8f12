"""LDP mechanisms: the client-side randomisers and their aggregators.

One module per family: ``grr`` (GRR / direct encoding / k-RR), ``unary`` (SUE, OUE), ``hashing``
(BLH, OLH), ``histogram`` (SHE, THE), ``hadamard`` (Hadamard response), ``rrrr`` (the subset
mechanism of AdOBEst-LDP) and ``sampling`` (node sampling, a wrapper).
"""

from __future__ import annotations

import importlib
from typing import Any

from bayesldp.errors import InvalidInputError
from bayesldp.mechanisms.base import (
    FiniteChannelMechanism,
    Mechanism,
    PureProtocol,
    realised_epsilon_of_channel,
)
from bayesldp.mechanisms.grr import GRR
from bayesldp.mechanisms.hadamard import HadamardResponse
from bayesldp.mechanisms.hashing import BLH, OLH, HashReports, LocalHashing
from bayesldp.mechanisms.rrrr import RRRR
from bayesldp.mechanisms.sampling import NodeSampling, SampledReports

MECHANISMS = {
    "GRR": "bayesldp.mechanisms.grr",
    "SUE": "bayesldp.mechanisms.unary",
    "OUE": "bayesldp.mechanisms.unary",
    "BLH": "bayesldp.mechanisms.hashing",
    "OLH": "bayesldp.mechanisms.hashing",
    "SHE": "bayesldp.mechanisms.histogram",
    "THE": "bayesldp.mechanisms.histogram",
    "HadamardResponse": "bayesldp.mechanisms.hadamard",
    "RRRR": "bayesldp.mechanisms.rrrr",
}


def mechanism_class(name: str) -> type[Mechanism]:
    """The mechanism class called ``name`` (case-insensitive; "HR" means HadamardResponse)."""
    lookup = {key.lower(): key for key in MECHANISMS} | {"hr": "HadamardResponse"}
    key = lookup.get(str(name).lower())
    if key is None:
        raise InvalidInputError(f"mechanism: unknown name {name!r}; valid: {', '.join(MECHANISMS)}")
    return getattr(importlib.import_module(MECHANISMS[key]), key)


def make_mechanism(name: str, k: int, epsilon: float, **params: Any) -> Mechanism:
    """Build a mechanism by name, e.g. ``make_mechanism("OLH", 100, 1.0, g=4)``."""
    params = {key: value for key, value in params.items() if value is not None}
    return mechanism_class(name)(k, epsilon, **params)


__all__ = [
    "BLH",
    "GRR",
    "MECHANISMS",
    "OLH",
    "RRRR",
    "FiniteChannelMechanism",
    "HadamardResponse",
    "HashReports",
    "LocalHashing",
    "Mechanism",
    "NodeSampling",
    "PureProtocol",
    "SampledReports",
    "make_mechanism",
    "mechanism_class",
    "realised_epsilon_of_channel",
]
