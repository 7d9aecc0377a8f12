"""Frequentist frequency estimators; every one reads a :class:`~bayesldp.Tally`.

``estimate(tally, method)`` with ``method`` one of

* ``"oracle"``: the mechanism's unbiased estimate, with exact (plug-in) standard errors;
* post-processing of the unbiased estimate (Wang et al., NDSS 2020): ``"base_pos"``, ``"norm"``,
  ``"norm_mul"`` (clip and renormalise), ``"norm_cut"``, ``"norm_sub"``, ``"base_cut"``,
  ``"projection"``; and ``"pretest"`` (the default): the uniform answer unless a test on the
  unbiased estimate rejects uniformity, Norm-Sub otherwise
  (:func:`~bayesldp.estimators.postprocess.pretest`);
* likelihood-based, for any tally including mixed-mechanism ones: ``"mle"`` (Lopuhaä-Zwakenberg, Li,
  Škorić and Li, "Improving Frequency Estimation under Local Differential Privacy", WPES 2020),
  ``"em"`` (EM run to the MLE, SQUAREM-accelerated), ``"ibu"`` (the iterative Bayesian update as
  multi-freq-ldpy and Ye, Wang, Zhang and Feng ("Revisiting EM-based Estimation for Locally
  Differentially Private Protocols") run it: plain EM from the uniform start, stopped early by their
  rule, which regularises), ``"em_mr"`` (EM with mixture reduction, Ye et al., the authors'
  schedule), ``"ems"`` (EM with smoothing over ordered bins and Ye et al.'s stopping rule, their
  estimator for numerical data: :mod:`~bayesldp.estimators.ems`), ``"ems_mr"`` (EMS with Ye et al.'s
  mixture reduction over contiguous windows of ordered bins, their EM-MR for numerical data).

Mechanism-specific: ``"rappor_decode"``, RAPPOR's own decoding (LASSO selection, then least
squares with standard errors) of a RAPPOR tally
(:func:`bayesldp.mechanisms.rappor.decode.decode_tally`).

Node sampling (Biswas, Cormode and Maple, "Impact of Sampling on Locally Differentially Private
Data Collection", arXiv 2022): the tally of :meth:`bayesldp.mechanisms.NodeSampling.round_tally`
carries the round's sampling design, so ``"oracle"`` is the paper's unbiased ``g``, ``c_hat`` or
``T`` (chosen there) with its exact standard errors, and the post-processings start from it.

The methods themselves live in the submodules :mod:`~bayesldp.estimators.oracle`,
:mod:`~bayesldp.estimators.postprocess`, :mod:`~bayesldp.estimators.mle` (``mle``, ``grr_mle``)
and :mod:`~bayesldp.estimators.em` (``em``, ``em_mr``).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import numpy as np

from bayesldp.errors import InvalidInputError, InvalidTypeError

# import the submodules (not their functions) so that ``bayesldp.estimators.mle`` etc. stay the
# modules and are not shadowed by the functions of the same name
from bayesldp.estimators import em as _em
from bayesldp.estimators import ems as _ems
from bayesldp.estimators import mle as _mle
from bayesldp.estimators import oracle as _oracle
from bayesldp.estimators.postprocess import POSTPROCESSORS
from bayesldp.estimators.result import Estimate, is_on_simplex
from bayesldp.tally import Tally, joint_tally

_LIKELIHOOD: dict[str, Callable[..., Estimate]] = {
    "mle": _mle.mle,
    "em": _em.em,
    "ibu": _em.ibu,
    "em_mr": _em.em_mr,
    "ems": _ems.ems,
    "ems_mr": _ems.ems_mr,
}

#: Every method name that :func:`estimate` applies to any tally of a single mechanism.
METHODS = ("oracle", *POSTPROCESSORS, *_LIKELIHOOD)

#: Methods of one mechanism's own tallies, also accepted by :func:`estimate`:
#: ``"rappor_decode"`` (a :class:`~bayesldp.mechanisms.rappor.tally.RapporTally`).
MECHANISM_METHODS = ("rappor_decode",)


def _keyword_options(func: Callable[..., Any]) -> list[str]:
    params = inspect.signature(func).parameters.values()
    return [p.name for p in params if p.kind is inspect.Parameter.KEYWORD_ONLY]


def _check_options(method: str, options: dict[str, Any], allowed: list[str]) -> None:
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        valid = ", ".join(allowed) if allowed else "none"
        raise InvalidInputError(
            f"options: method {method!r} does not take {', '.join(unknown)}; valid options: {valid}"
        )


def estimate(tally: Tally, method: str = "pretest", **options: Any) -> Estimate:
    """Estimate the category frequencies from a tally.

    Parameters
    ----------
    tally : Tally or list of Tally
        The tallied reports; a list of tallies of the same K categories under different
        mechanisms or budgets is estimated jointly (:func:`bayesldp.tally.joint_tally`; the
        likelihood methods then apply).
    method : str
        One of ``"pretest"`` (default), ``"oracle"``, ``"base_pos"``, ``"norm"``,
        ``"norm_mul"``, ``"norm_cut"``, ``"norm_sub"``, ``"base_cut"``, ``"projection"``,
        ``"mle"``, ``"em"``, ``"ibu"``, ``"em_mr"``, ``"ems"``; for a RAPPOR tally also
        ``"rappor_decode"``.  ``"pretest"`` answers the uniform distribution unless the
        tally rejects uniformity (``||f - 1/K||^2`` against the trace of the oracle's
        covariance, chi-square calibrated), Norm-Sub (the best all-round post-processing in
        Wang et al. 2020) otherwise: Norm-Sub alone can be worse than the uniform answer, by
        large factors, where the signal is weak
        (:func:`~bayesldp.estimators.postprocess.pretest`).  Up to version 0.1.0 the default
        was ``"norm_sub"``.
    **options
        Method options: ``alpha`` for ``base_cut`` (default 0.05) and for ``pretest`` (the
        test's level, default 1e-4); see :func:`mle`,
        :func:`em`, :func:`ibu`, :func:`em_mr` for theirs, and
        :func:`bayesldp.mechanisms.rappor.decode.decode_tally` for ``rappor_decode``'s
        (``lambda_ratio``, ``alpha``).

    Returns
    -------
    Estimate

    Notes
    -----
    Post-processing methods read the oracle estimate ``f`` and, for ``base_cut``, the standard
    deviation of a zero frequency ``sqrt(Var*_x / n)``
    (:func:`bayesldp.bounds.var_star_by_category`); ``pretest`` reads the oracle's plug-in
    standard deviations (those of ``"oracle"``).
    They need the tally's mechanism; for a tally mixing mechanisms use ``mle``, ``em`` or
    ``em_mr``.  Post-processed estimates carry no standard errors (``std_errors=None``).

    Examples
    --------
    >>> import bayesldp
    >>> mech = bayesldp.GRR(4, 2.0)
    >>> tally = mech.simulate_tally([400, 300, 200, 100], rng=1)
    >>> est = bayesldp.estimate(tally)
    >>> est.method, round(float(est.frequencies.sum()), 12), est.on_simplex
    ('pretest', 1.0, True)
    """
    tally = _oracle.check_tally(joint_tally(tally) if isinstance(tally, list | tuple) else tally)
    if not isinstance(method, str):
        raise InvalidTypeError(f"method: expected a method name (str), got {type(method).__name__}")
    if method not in METHODS and method not in MECHANISM_METHODS:
        raise InvalidInputError(
            f"method: unknown method {method!r}; valid methods: {', '.join(METHODS)}; for a "
            f"RAPPOR tally also {', '.join(MECHANISM_METHODS)}"
        )
    if method in _LIKELIHOOD:
        func = _LIKELIHOOD[method]
        _check_options(method, options, _keyword_options(func))
        return func(tally, **options)
    if method == "rappor_decode":
        from bayesldp.mechanisms.rappor.decode import decode_tally

        _check_options(method, options, _keyword_options(decode_tally))
        return decode_tally(tally, **options)
    if method == "oracle":
        _check_options(method, options, [])
        return _oracle.oracle(tally)
    _check_options(method, options, ["alpha"] if method in ("base_cut", "pretest") else [])
    _oracle.require_mechanism(tally, method)
    f, sd = _oracle.unbiased(tally)
    if method == "pretest":
        freq = POSTPROCESSORS[method](f, sd, **options)
        return Estimate(freq, None, method, on_simplex=is_on_simplex(freq),
                        details=pretest_details(f, sd, **options))  # fmt: skip
    elif method == "base_cut":
        from bayesldp.bounds import var_star_by_category

        sd = np.sqrt(var_star_by_category(tally.mechanism) / tally.n)
        freq = POSTPROCESSORS[method](f, sd, **options)
    else:
        freq = POSTPROCESSORS[method](f, None)
    return Estimate(freq, None, method, on_simplex=is_on_simplex(freq))


def pretest_details(f: np.ndarray, sd: np.ndarray, alpha: float = 1e-4) -> dict[str, Any]:
    """What the default (``"pretest"``) decided: its statistic ``(K - 1) T``, the chi-square
    threshold it was compared with, and ``answer`` ("uniform" or "norm_sub")."""
    from bayesldp.estimators.postprocess import pretest_decision

    if f.shape[-1] < 2:
        return {"statistic": 0.0, "threshold": 0.0, "answer": "norm_sub"}
    statistic, threshold = pretest_decision(f, sd, alpha)
    return {"statistic": float(statistic), "threshold": threshold,
            "answer": "uniform" if statistic < threshold else "norm_sub"}  # fmt: skip


__all__ = ["MECHANISM_METHODS", "METHODS", "Estimate", "estimate"]
