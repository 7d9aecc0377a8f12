"""bayesldp: Bayesian frequency estimation under local differential privacy."""

from bayesldp.errors import (
    BayesLDPError,
    IncompatibleTallyError,
    InvalidInputError,
    InvalidTypeError,
    NotSupportedError,
)
from bayesldp.mechanisms import GRR, Mechanism
from bayesldp.tally import Tally

__version__ = "0.1.0"

__all__ = [
    "GRR",
    "BayesLDPError",
    "IncompatibleTallyError",
    "InvalidInputError",
    "InvalidTypeError",
    "Mechanism",
    "NotSupportedError",
    "Tally",
    "__version__",
]
