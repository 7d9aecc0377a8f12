"""Bayesian posterior inference for LDP frequency estimation.

``fit(tally, prior, method=...)`` returns ArviZ InferenceData whichever method produced it
("exact" Dirichlet mixture, "hmc", "nuts", "sgld"); ``save_fit`` / ``load_fit`` round-trip it
through netCDF.  Priors are Dirichlet (:class:`Dirichlet`, :func:`as_dirichlet`).
"""

from __future__ import annotations

from bayesldp.bayes.fit import BACKENDS, build_inference_data, fit
from bayesldp.bayes.io import fit_prior, load_fit, save_fit
from bayesldp.bayes.prior import Dirichlet, as_dirichlet

__all__ = [
    "BACKENDS",
    "Dirichlet",
    "as_dirichlet",
    "build_inference_data",
    "fit",
    "fit_prior",
    "load_fit",
    "save_fit",
]
