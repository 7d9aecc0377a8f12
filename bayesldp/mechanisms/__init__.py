"""LDP mechanisms: the client-side randomisers and their aggregators."""

from bayesldp.mechanisms.base import (
    FiniteChannelMechanism,
    Mechanism,
    PureProtocol,
    realised_epsilon_of_channel,
)
from bayesldp.mechanisms.grr import GRR

__all__ = [
    "GRR",
    "FiniteChannelMechanism",
    "Mechanism",
    "PureProtocol",
    "realised_epsilon_of_channel",
]
