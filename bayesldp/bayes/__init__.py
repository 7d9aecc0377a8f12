"""Bayesian posterior inference for LDP frequency estimation.

``fit(tally, prior, method=...)`` returns ArviZ InferenceData whichever method produced it
("exact" Dirichlet mixture, "hmc", "nuts", "sgld", "laplace", "prior_mh"; "auto" chooses by
cost, and by the data's weight against the prior);
``save_fit`` / ``load_fit`` round-trip it through netCDF; ``loo`` / ``loo_compare``
cross-validate fits one report at a time; ``sample_posterior_predictive`` adds the posterior
predictive check ArviZ plots; ``sample_shares`` the posterior of the sample's own frequencies;
``check_mechanism`` tests, free of ``theta``, that a tally's reports came from its mechanism at
its epsilon.  Priors are Dirichlet (:class:`Dirichlet`, :func:`as_dirichlet`) or a symmetric
Dirichlet with an unknown concentration (:class:`AdaptiveDirichlet`, ``prior="adaptive"``), or,
for ordered bins, a smoothness prior on the log-weights (:class:`SmoothDensity`,
``prior="smooth"``), or, for categories whose frequencies spread over orders of magnitude, an
exchangeable logistic-normal prior with a learnt spread (:class:`LogisticNormal`,
``prior="logistic_normal"``).  ``fit_rounds`` fits one tally per round under a random walk on the
log-frequencies (:class:`RandomWalkPrior`), per-round posteriors that borrow strength over time
(:mod:`bayesldp.bayes.dynamic`).
"""

from __future__ import annotations

from bayesldp.bayes.dynamic import (
    RandomWalkPrior,
    build_rounds_model,
    fit_rounds,
    summarize_rounds,
)
from bayesldp.bayes.elpd import loo, loo_compare
from bayesldp.bayes.fit import BACKENDS, build_inference_data, fit
from bayesldp.bayes.io import fit_prior, load_fit, save_fit
from bayesldp.bayes.mechanism_check import MechanismCheck, check_mechanism
from bayesldp.bayes.model import build_model, tally_likelihood
from bayesldp.bayes.ppc import sample_posterior_predictive
from bayesldp.bayes.prior import (
    AdaptiveDirichlet,
    Dirichlet,
    LogisticNormal,
    SmoothDensity,
    as_dirichlet,
    as_prior,
)
from bayesldp.bayes.sample_shares import sample_shares

__all__ = [
    "BACKENDS",
    "AdaptiveDirichlet",
    "Dirichlet",
    "LogisticNormal",
    "MechanismCheck",
    "RandomWalkPrior",
    "SmoothDensity",
    "as_dirichlet",
    "as_prior",
    "build_inference_data",
    "build_model",
    "build_rounds_model",
    "check_mechanism",
    "fit",
    "fit_prior",
    "fit_rounds",
    "load_fit",
    "loo",
    "loo_compare",
    "sample_posterior_predictive",
    "sample_shares",
    "save_fit",
    "summarize_rounds",
    "tally_likelihood",
]
