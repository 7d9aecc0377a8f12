"""bayesldp: Bayesian frequency estimation under local differential privacy.

Public names are imported lazily, so ``import bayesldp`` stays fast and PyMC is only loaded by
the functions that need it.
"""

from __future__ import annotations

import importlib
from typing import Any

from bayesldp.errors import (
    BayesLDPError,
    IncompatibleTallyError,
    InvalidInputError,
    InvalidTypeError,
    NotSupportedError,
)
from bayesldp.mechanisms.registry import MODULES
from bayesldp.tally import Tally

__version__ = "0.1.0"

_LAZY = {
    "Mechanism": "bayesldp.mechanisms.base",
    **MODULES,  # every registered mechanism, from the one registry
    "NodeSampling": "bayesldp.mechanisms.sampling",
    "HashReports": "bayesldp.mechanisms.hashing",
    "SampledReports": "bayesldp.mechanisms.sampling",
    "SeedReports": "bayesldp.mechanisms.xxhash_lh",
    "CMSReports": "bayesldp.mechanisms.sketch",
    "HCMSReports": "bayesldp.mechanisms.sketch",
    "RapporReports": "bayesldp.mechanisms.rappor",
    "PCKV": "bayesldp.mechanisms.keyvalue",  # key-value pairs: not a k-category mechanism
    "PCKVPM": "bayesldp.mechanisms.keyvalue",
    "rappor_decode": "bayesldp.mechanisms.rappor",
    "AdaptiveSurvey": "bayesldp.adaptive",
    "audit": "bayesldp.audit",
    "bounds": "bayesldp.bounds",
    "encode": "bayesldp.categories",
    "numerical": "bayesldp.numerical",
    "estimate": "bayesldp.estimators",
    "Estimate": "bayesldp.estimators",
    "fit": "bayesldp.bayes",
    "load_fit": "bayesldp.bayes",
    "save_fit": "bayesldp.bayes",
    "loo": "bayesldp.bayes",
    "loo_compare": "bayesldp.bayes",
    "sample_posterior_predictive": "bayesldp.bayes",
    "Dirichlet": "bayesldp.bayes",
    "AdaptiveDirichlet": "bayesldp.bayes",
    "SmoothDensity": "bayesldp.bayes",
    "build_model": "bayesldp.bayes",
    "tally_likelihood": "bayesldp.bayes",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'bayesldp' has no attribute {name!r}")
    imported = importlib.import_module(module)
    value = imported if module.endswith("." + name) else getattr(imported, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])


__all__ = [
    "BayesLDPError",
    "IncompatibleTallyError",
    "InvalidInputError",
    "InvalidTypeError",
    "NotSupportedError",
    "Tally",
    "__version__",
    *_LAZY,
]
