"""bayesldp: Bayesian frequency estimation under local differential privacy.

Public names are imported lazily, so ``import bayesldp`` stays fast and PyMC is only loaded by
the functions that need it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from bayesldp._version import __version__ as __version__
from bayesldp.errors import (
    BayesLDPError,
    IncompatibleTallyError,
    InvalidInputError,
    InvalidTypeError,
    NotSupportedError,
)
from bayesldp.mechanisms.registry import MODULES
from bayesldp.tally import Tally

if TYPE_CHECKING:  # the lazy names, for type checkers and IDEs (`X as X`: re-exported)
    from bayesldp import audit as audit
    from bayesldp import bounds as bounds
    from bayesldp import heavy_hitters as heavy_hitters
    from bayesldp import numerical as numerical
    from bayesldp.adaptive import AdaptiveSurvey as AdaptiveSurvey
    from bayesldp.bayes import AdaptiveDirichlet as AdaptiveDirichlet
    from bayesldp.bayes import Dirichlet as Dirichlet
    from bayesldp.bayes import LogisticNormal as LogisticNormal
    from bayesldp.bayes import RandomWalkPrior as RandomWalkPrior
    from bayesldp.bayes import SmoothDensity as SmoothDensity
    from bayesldp.bayes import build_model as build_model
    from bayesldp.bayes import check_mechanism as check_mechanism
    from bayesldp.bayes import fit as fit
    from bayesldp.bayes import fit_rounds as fit_rounds
    from bayesldp.bayes import load_fit as load_fit
    from bayesldp.bayes import loo as loo
    from bayesldp.bayes import loo_compare as loo_compare
    from bayesldp.bayes import sample_posterior_predictive as sample_posterior_predictive
    from bayesldp.bayes import sample_shares as sample_shares
    from bayesldp.bayes import save_fit as save_fit
    from bayesldp.bayes import tally_likelihood as tally_likelihood
    from bayesldp.categories import encode as encode
    from bayesldp.estimators import Estimate as Estimate
    from bayesldp.estimators import estimate as estimate
    from bayesldp.mechanisms.base import Mechanism as Mechanism
    from bayesldp.mechanisms.grr import GRR as GRR
    from bayesldp.mechanisms.hadamard import HadamardResponse as HadamardResponse
    from bayesldp.mechanisms.hashing import BLH as BLH
    from bayesldp.mechanisms.hashing import OLH as OLH
    from bayesldp.mechanisms.hashing import HashReports as HashReports
    from bayesldp.mechanisms.histogram import SHE as SHE
    from bayesldp.mechanisms.histogram import THE as THE
    from bayesldp.mechanisms.keyvalue import PCKV as PCKV
    from bayesldp.mechanisms.keyvalue import PCKVPM as PCKVPM
    from bayesldp.mechanisms.longitudinal.dbitflip import DBitFlipPM as DBitFlipPM
    from bayesldp.mechanisms.longitudinal.dbitflip import DBitReports as DBitReports
    from bayesldp.mechanisms.longitudinal.mechanism import LGRR as LGRR
    from bayesldp.mechanisms.longitudinal.mechanism import LOSUE as LOSUE
    from bayesldp.mechanisms.longitudinal.mechanism import LOUE as LOUE
    from bayesldp.mechanisms.longitudinal.mechanism import LSOUE as LSOUE
    from bayesldp.mechanisms.longitudinal.mechanism import LSUE as LSUE
    from bayesldp.mechanisms.longitudinal.memo import Memo as Memo
    from bayesldp.mechanisms.longitudinal.memo import MemoStore as MemoStore
    from bayesldp.mechanisms.numerical.gaussian import Gaussian as Gaussian
    from bayesldp.mechanisms.numerical.laplace import LaplaceNumeric as LaplaceNumeric
    from bayesldp.mechanisms.numerical.piecewise import Piecewise as Piecewise
    from bayesldp.mechanisms.numerical.square_wave import SquareWave as SquareWave
    from bayesldp.mechanisms.rappor.decode import rappor_decode as rappor_decode
    from bayesldp.mechanisms.rappor.mechanism import RAPPOR as RAPPOR
    from bayesldp.mechanisms.rappor.mechanism import RapporReports as RapporReports
    from bayesldp.mechanisms.rrrr import RRRR as RRRR
    from bayesldp.mechanisms.sampling import NodeSampling as NodeSampling
    from bayesldp.mechanisms.sampling import SampledReports as SampledReports
    from bayesldp.mechanisms.sketch import CMS as CMS
    from bayesldp.mechanisms.sketch import HCMS as HCMS
    from bayesldp.mechanisms.sketch import CMSReports as CMSReports
    from bayesldp.mechanisms.sketch import HCMSReports as HCMSReports
    from bayesldp.mechanisms.subset import SubsetSelection as SubsetSelection
    from bayesldp.mechanisms.unary import OUE as OUE
    from bayesldp.mechanisms.unary import SUE as SUE
    from bayesldp.mechanisms.xxhash_lh import BLHXX as BLHXX
    from bayesldp.mechanisms.xxhash_lh import OLHXX as OLHXX
    from bayesldp.mechanisms.xxhash_lh import SeedReports as SeedReports
    from bayesldp.significance import frequent_items as frequent_items
    from bayesldp.significance import posterior_frequent_items as posterior_frequent_items

_LAZY = {
    "Mechanism": "bayesldp.mechanisms.base",
    **MODULES,  # every registered mechanism, from the one registry
    "NodeSampling": "bayesldp.mechanisms.sampling",
    "HashReports": "bayesldp.mechanisms.hashing",
    "SampledReports": "bayesldp.mechanisms.sampling",
    "SeedReports": "bayesldp.mechanisms.xxhash_lh",
    "CMSReports": "bayesldp.mechanisms.sketch",
    "HCMSReports": "bayesldp.mechanisms.sketch",
    "RapporReports": "bayesldp.mechanisms.rappor.mechanism",
    "DBitReports": "bayesldp.mechanisms.longitudinal.dbitflip",
    "Memo": "bayesldp.mechanisms.longitudinal.memo",
    "MemoStore": "bayesldp.mechanisms.longitudinal.memo",
    "PCKV": "bayesldp.mechanisms.keyvalue",  # key-value pairs: not a k-category mechanism
    "PCKVPM": "bayesldp.mechanisms.keyvalue",
    "rappor_decode": "bayesldp.mechanisms.rappor.decode",
    "AdaptiveSurvey": "bayesldp.adaptive",
    "audit": "bayesldp.audit",
    "bounds": "bayesldp.bounds",
    "heavy_hitters": "bayesldp.heavy_hitters",
    "encode": "bayesldp.categories",
    "numerical": "bayesldp.numerical",
    "estimate": "bayesldp.estimators",
    "Estimate": "bayesldp.estimators",
    "frequent_items": "bayesldp.significance",
    "posterior_frequent_items": "bayesldp.significance",
    "fit": "bayesldp.bayes",
    "fit_rounds": "bayesldp.bayes",
    "RandomWalkPrior": "bayesldp.bayes",
    "load_fit": "bayesldp.bayes",
    "save_fit": "bayesldp.bayes",
    "loo": "bayesldp.bayes",
    "loo_compare": "bayesldp.bayes",
    "sample_posterior_predictive": "bayesldp.bayes",
    "sample_shares": "bayesldp.bayes",
    "check_mechanism": "bayesldp.bayes",
    "Dirichlet": "bayesldp.bayes",
    "AdaptiveDirichlet": "bayesldp.bayes",
    "SmoothDensity": "bayesldp.bayes",
    "LogisticNormal": "bayesldp.bayes",
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
