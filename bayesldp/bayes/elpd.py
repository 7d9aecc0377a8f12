"""Leave-one-report-out cross-validation of a fit (PSIS-LOO, per report, from a tally).

A tally keeps the distinct likelihood rows ``L_u`` and their counts ``c_u``; the observations are
the ``N = sum_u c_u`` reports, not the rows.  :func:`loo` leaves out one *report* at a time from
the posterior draws and the tally alone, and its pointwise values are per report, so
``arviz.compare`` of two :func:`loo` results gives the same ``elpd_diff`` and ``dse`` as
:func:`loo_compare`.  ``fit(..., idata_kwargs={"log_likelihood": True})`` stores one value per
report too, and so does :func:`pymc.compute_log_likelihood` on a :func:`bayesldp.build_model`
model (:mod:`bayesldp.bayes.pointwise`), so ``arviz.loo`` and ``arviz.waic`` on either agree
with :func:`loo` (at the cost of ``chains * draws * N`` floats).
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any

import numpy as np

from bayesldp.bayes._arviz import import_arviz
from bayesldp.errors import InvalidInputError, InvalidTypeError
from bayesldp.tally import Tally

if TYPE_CHECKING:
    import arviz

#: floats of ``log(L_u . theta_s)`` computed at once (rows are processed in blocks)
_BLOCK = 1 << 22
#: reports up to which ``loo_i`` and ``pareto_k`` hold one value per report (beyond: per row)
POINTWISE_MAX = 10**7


def loo(
    idata: arviz.InferenceData,
    tally: Tally | None = None,
    *,
    model: Any = None,
    reff: float | None = None,
) -> Any:
    """Pareto-smoothed importance-sampling leave-one-report-out CV of a fit (PSIS-LOO).

    Each report is an observation; a distinct row ``u`` of the tally with count ``c_u`` stands
    for ``c_u`` identical reports, which share one leave-one-out value.  With posterior draws
    ``theta_s`` (``s = 1..S``) and ``p_us = L_u . theta_s`` (the probability of a report of row
    ``u``, up to the row's scale, see below):

    * importance ratios of leaving out one report of row ``u``: ``r_us = 1 / p_us``, smoothed by
      Pareto-smoothed importance sampling (``arviz.psislw``, with the relative efficiency
      ``reff`` of the draws) into normalised weights ``w_us``, with Pareto shape ``k_u``;
    * ``elpd_u = log sum_s w_us p_us``, the estimate of ``log p(y_u | all reports but one of
      row u)``;
    * ``elpd_loo = sum_u c_u elpd_u``;
      ``se = sqrt(N * var)``, ``var = sum_u c_u (elpd_u - elpd_loo / N)^2 / N`` (the variance
      over the ``N`` reports, as ``arviz.loo`` takes it over its observations);
    * ``p_loo = sum_u c_u (lppd_u - elpd_u)`` with ``lppd_u = log (1/S) sum_s p_us``.

    Source: Vehtari, Gelman and Gabry (2017), "Practical Bayesian model evaluation using
    leave-one-out cross-validation and WAIC", Statistics and Computing 27, 1413-1432; the
    Pareto shape thresholds from Vehtari et al. (2024), "Pareto smoothed importance sampling",
    JMLR 25(72).  Needs no ``log_likelihood`` group: the values are computed from the posterior
    draws and the tally.

    Comparing models: the rows of a tally are only proportional to report probabilities for some
    mechanisms (unary encoding keeps only the factor of ``Pr(y | x)`` that depends on ``x``,
    local hashing leaves out the draw of the hash; ``L_u`` is then ``s_u Pr(report u | theta)``
    with a constant ``s_u``), which shifts ``elpd_u`` by ``log s_u`` for every model alike.  So
    compare fits of the *same tally* (same rows), e.g. priors: ``elpd_loo`` of
    ``fit(tally, prior=0.5)`` against ``fit(tally, prior="adaptive")``; the difference and its
    paired standard error are :func:`loo_compare`'s.  To compare mechanisms the rows must be
    true report probabilities (finite channels such as GRR and RRRR, whose rows are the channel
    columns ``P[:, y]``).

    Parameters
    ----------
    idata : arviz.InferenceData
        A fit from :func:`bayesldp.fit` (its ``posterior.theta`` and ``observed_data``).
    tally : Tally, optional
        The tally that was fitted; by default rebuilt from ``idata.observed_data``, or, for
        ``pm.sample``'s output on a :func:`bayesldp.build_model` model, taken from ``model``.
        When given it must have the fit's rows and counts.
    model : pymc.Model, optional
        The :func:`bayesldp.build_model` model that ``pm.sample`` drew ``idata`` from (default:
        the model of an enclosing ``with model:`` block); its tally is used when ``tally`` is
        not given and ``idata`` is not a :func:`bayesldp.fit` result.
    reff : float, optional
        Relative MCMC efficiency ``ESS / S`` of the draws; by default as ``arviz.loo``: 1 for one
        chain, else the mean of the "mean" ESS of the posterior variables over ``S``.

    Returns
    -------
    arviz.ELPDData
        ``elpd_loo``, ``se``, ``p_loo``, ``n_samples`` (S), ``n_data_points`` (N, the reports),
        ``warning`` (a Pareto k above ``good_k``), ``loo_i`` and ``pareto_k`` (dim ``report``:
        ``elpd_u`` and ``k_u`` of each report's row, so ``arviz.compare`` and the printed Pareto
        k table count reports; beyond ``POINTWISE_MAX`` reports they are per row, dim ``row``,
        with a warning that ``arviz.compare`` would then count rows), ``scale`` ("log"),
        ``good_k`` (``min(1 - 1/log10 S, 0.7)``), and per distinct row ``counts`` (``c_u``),
        ``loo_row`` (``elpd_u``) and ``p_loo_i`` (``lppd_u - elpd_u``).

    Examples
    --------
    >>> import numpy as np, bayesldp
    >>> mech = bayesldp.GRR(3, 1.0)
    >>> tally = mech.tally(mech.perturb(np.repeat([0, 1, 2], [50, 30, 20]), rng=1))
    >>> idata = bayesldp.fit(tally, method="exact", random_seed=0)
    >>> result = bayesldp.loo(idata)
    >>> int(result.n_data_points), bool(result.p_loo < 3)
    (100, True)
    """
    az = import_arviz()
    import xarray as xr

    check_posterior(idata)
    if tally is None and (model is not None or "mechanism" not in idata.posterior.attrs):
        tally = _model_tally(model)
    tally = _fitted_tally(idata, tally)
    posterior = idata.posterior
    theta = np.asarray(posterior["theta"].values, dtype=float)
    chains, draws, k = theta.shape
    if k != tally.k:
        raise InvalidInputError(f"tally: has K = {tally.k} categories, the fit has {k}")
    n_samples = chains * draws
    if n_samples < 2:
        raise InvalidInputError("idata: PSIS-LOO needs at least 2 posterior draws")
    reff = _reff(az, posterior, n_samples) if reff is None else _check_reff(reff)
    flat = theta.reshape(n_samples, k)

    rows = tally.rows
    counts = tally.counts.astype(float)
    n_rows = rows.shape[0]
    elpd = np.empty(n_rows)
    lppd = np.empty(n_rows)
    pareto_k = np.empty(n_rows)
    block = max(1, _BLOCK // n_samples)
    for start in range(0, n_rows, block):
        stop = min(start + block, n_rows)
        with np.errstate(divide="ignore"):
            loglik = np.log(rows[start:stop] @ flat.T)  # (rows, S): log p_us
        log_w, pareto_k[start:stop] = _psis_weights(az, -loglik, reff)
        elpd[start:stop] = _logsumexp(log_w + loglik)
        lppd[start:stop] = _logsumexp(loglik) - np.log(n_samples)

    n = float(counts.sum())
    elpd_loo = float(np.sum(counts * elpd))
    variance = float(np.sum(counts * (elpd - elpd_loo / n) ** 2) / n)
    se = float(np.sqrt(n * variance))
    p_loo_i = lppd - elpd
    p_loo = float(np.sum(counts * p_loo_i))
    good_k = min(1 - 1 / np.log10(n_samples), 0.7)
    bad = pareto_k > good_k
    if np.any(bad):
        warnings.warn(
            f"loo: the Pareto shape k exceeds {good_k:.2f} for {int(bad.sum())} of "
            f"{n_rows} distinct rows ({int(counts[bad].sum())} of {int(n)} reports): the "
            "importance sampling estimate of those reports' leave-one-out density is unreliable "
            "(Vehtari et al. 2017); draw more or refit without them",
            UserWarning,
            stacklevel=2,
        )

    row_coord = {"row": np.arange(n_rows)}

    def per_row(values: np.ndarray, name: str) -> Any:
        return xr.DataArray(values, dims=["row"], coords=row_coord, name=name)

    loo_i, k_i = per_row(elpd, "loo_i"), per_row(pareto_k, "pareto_k")
    if n <= POINTWISE_MAX:
        report = {"report": np.arange(int(n))}
        loo_i, k_i = (
            xr.DataArray(np.repeat(v, tally.counts), dims=["report"], coords=report, name=name)
            for v, name in ((elpd, "loo_i"), (pareto_k, "pareto_k"))
        )
    else:
        warnings.warn(
            f"loo: {int(n):,} reports, more than {POINTWISE_MAX:,}: the pointwise values are per "
            "distinct row, which arviz.compare would count as observations; compare with "
            "bayesldp.loo_compare",
            UserWarning,
            stacklevel=2,
        )
    ELPDData = _elpd_data_class()
    fields = {
        "elpd_loo": elpd_loo, "se": se, "p_loo": p_loo, "n_samples": n_samples,
        "n_data_points": int(n), "warning": bool(np.any(bad)), "loo_i": loo_i, "pareto_k": k_i,
        "scale": "log", "good_k": good_k, "counts": per_row(tally.counts, "counts"),
        "loo_row": per_row(elpd, "loo_row"), "p_loo_i": per_row(p_loo_i, "p_loo_i"),
    }  # fmt: skip
    return ELPDData(data=list(fields.values()), index=list(fields))


def loo_compare(first: Any, second: Any) -> dict[str, float]:
    """Difference of two :func:`loo` results on the same tally, with its standard error.

    ``elpd_diff = sum_u c_u (elpd_u^first - elpd_u^second)`` and ``se = sqrt(N * var)`` with the
    variance of the per-report differences over the ``N`` reports (Vehtari, Gelman and Gabry
    2017, eq. 24: the paired comparison, smaller than the two ``se`` combined).  A positive
    difference favours ``first``; a difference within about 2 ``se`` is no evidence either way.

    Both results must come from fits of the same tally (same rows in the same order and the same
    counts), e.g. two priors; see :func:`loo`.

    Returns
    -------
    dict
        ``elpd_diff``, ``se``, ``n_data_points``.

    Examples
    --------
    Two priors on the same tally:

    >>> import numpy as np
    >>> import bayesldp
    >>> mech = bayesldp.GRR(3, 1.0)
    >>> tally = mech.tally(mech.perturb(np.repeat([0, 1, 2], [50, 30, 20]), rng=1))
    >>> flat = bayesldp.loo(bayesldp.fit(tally, method="exact", random_seed=0))
    >>> sparse = bayesldp.loo(bayesldp.fit(tally, prior=0.1, method="exact", random_seed=0))
    >>> diff = bayesldp.loo_compare(flat, sparse)
    >>> sorted(diff), diff["n_data_points"]
    (['elpd_diff', 'n_data_points', 'se'], 100)
    """
    for name, value in (("first", first), ("second", second)):
        if not all(key in getattr(value, "index", ()) for key in ("loo_row", "counts")):
            raise InvalidTypeError(f"{name}: expected the result of bayesldp.loo, got {value!r}")
    c1 = np.asarray(first["counts"].values)
    c2 = np.asarray(second["counts"].values)
    if c1.shape != c2.shape or not np.array_equal(c1, c2):
        raise InvalidInputError(
            "loo_compare: the two results are not on the same tally (different rows or counts); "
            "PSIS-LOO compares models of the same reports"
        )
    diff = np.asarray(first["loo_row"].values) - np.asarray(second["loo_row"].values)
    counts = c1.astype(float)
    n = float(counts.sum())
    total = float(np.sum(counts * diff))
    variance = float(np.sum(counts * (diff - total / n) ** 2) / n)
    return {"elpd_diff": total, "se": float(np.sqrt(n * variance)), "n_data_points": int(n)}


# ---------------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------------
def _psis_weights(az: Any, log_ratio: np.ndarray, reff: float) -> tuple[np.ndarray, np.ndarray]:
    """``arviz.psislw`` per row of ``log_ratio``, except where its smoothing is undefined:
    where the largest ratios tie (draws with some ``theta_x`` exactly 0 give a row of a finite
    channel its floor probability in each of them), the generalised Pareto fit to the tail
    returns NaN weights, though the ratios are bounded there; those rows keep the plain
    self-normalised importance weights, which a bounded ratio makes reliable."""
    log_w, k = az.psislw(log_ratio, reff)
    undefined = ~np.all(np.isfinite(log_w), axis=-1)
    if np.any(undefined):
        raw = log_ratio[undefined]
        log_w[undefined] = raw - _logsumexp(raw)[:, None]
    return log_w, k


def _logsumexp(a: np.ndarray) -> np.ndarray:
    """``log sum exp`` along the last axis (``-inf`` rows stay ``-inf``)."""
    top = np.max(a, axis=-1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    with np.errstate(divide="ignore"):
        return np.log(np.sum(np.exp(a - top), axis=-1)) + top[..., 0]


def _elpd_data_class() -> Any:
    az = import_arviz()
    cls = getattr(az, "ELPDData", None)
    if cls is None:  # pragma: no cover - depends on the ArviZ version
        from arviz.stats.stats_utils import ELPDData as cls
    return cls


def _reff(az: Any, posterior: Any, n_samples: int) -> float:
    """``arviz.loo``'s default relative efficiency: mean "mean" ESS over the draws."""
    if posterior.sizes["chain"] == 1:
        return 1.0
    with warnings.catch_warnings(), np.errstate(invalid="ignore", divide="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        ess = az.ess(posterior, method="mean")
    values = np.hstack([np.asarray(ess[v].values, dtype=float).ravel() for v in ess.data_vars])
    values = values[np.isfinite(values)]
    return float(values.mean() / n_samples) if values.size else 1.0


def _check_reff(reff: object) -> float:
    if isinstance(reff, bool) or not isinstance(reff, int | float | np.floating | np.integer):
        raise InvalidTypeError(f"reff: expected a number in (0, inf), got {reff!r}")
    if not (np.isfinite(reff) and reff > 0):
        raise InvalidInputError(f"reff: must be finite and > 0, got {reff}")
    return float(reff)


def check_posterior(idata: Any) -> None:
    """Refuse anything but an InferenceData with a posterior ``theta`` (what ``fit`` returns)."""
    az = import_arviz()
    if not isinstance(idata, az.InferenceData):
        raise InvalidTypeError(
            f"idata: expected the arviz.InferenceData returned by bayesldp.fit, "
            f"got {type(idata).__name__}"
        )
    if "posterior" not in idata.groups() or "theta" not in idata.posterior:
        raise InvalidInputError("idata: no posterior group with 'theta'; bayesldp.fit makes one")


def _same_counts(counts: np.ndarray, tally: Tally) -> bool:
    """``counts`` are the tally's: per row (a fit), or per distinct channel column as the
    finite-channel form of :func:`bayesldp.build_model` observes them (``pm.sample``'s
    ``observed_data``, with the unobserved reports' zeros)."""
    if counts.shape == tally.counts.shape and np.array_equal(counts, tally.counts):
        return True
    if counts.ndim != 1 or counts.sum() != tally.n:
        return False
    from bayesldp.bayes.model import finite_channel_form

    finite = finite_channel_form(tally)
    return finite is not None and np.array_equal(counts, finite[1])


def _fitted_tally(idata: Any, tally: Tally | None) -> Tally:
    """The tally a fit was made from: ``tally`` checked against ``observed_data``, or rebuilt."""
    observed = idata.observed_data if "observed_data" in idata.groups() else None
    if (observed is None or "counts" not in observed) and "constant_data" in idata.groups():
        # a posterior predictive check keeps only ``stat`` in observed_data and the tally in
        # constant_data as tally_* (bayesldp.sample_posterior_predictive)
        constant = idata.constant_data
        if "tally_counts" in constant:
            names = {
                f"tally_{name}": name
                for name in ("counts", "rows", "support", "levels")
                if f"tally_{name}" in constant
            }
            observed = constant[list(names)].rename(names)
            if "observed_data" in idata.groups() and "stat" in idata.observed_data:
                observed["stat"] = idata.observed_data["stat"]
    if tally is not None:
        if not isinstance(tally, Tally):
            raise InvalidTypeError(f"tally: expected a bayesldp.Tally, got {type(tally).__name__}")
        if observed is not None and "counts" in observed:
            counts = np.asarray(observed["counts"].values)
            if not _same_counts(counts, tally):
                raise InvalidInputError(
                    "tally: its counts differ from the fit's observed_data: pass the tally "
                    "that was fitted (or none: it is rebuilt from observed_data)"
                )
        return tally
    if observed is None or "counts" not in observed:
        raise InvalidInputError(
            "idata: no observed_data group with the tally; pass tally= (bayesldp.fit records "
            "it; for pm.sample's output on a build_model model: model=, or call inside `with "
            "model:`)"
        )
    counts = np.asarray(observed["counts"].values)
    stat = np.asarray(observed["stat"].values) if "stat" in observed else None
    family = str(idata.posterior.attrs.get("family", "unknown"))
    if "support" in observed:
        support = np.asarray(observed["support"].values, dtype=bool)
        levels = tuple(float(v) for v in np.asarray(observed["levels"].values))
        k = support.shape[1]
        return Tally(
            counts,
            support=support,
            levels=levels,
            stat=np.zeros(k) if stat is None else stat,
            family=family,
            dedupe=False,
        )
    if "rows" not in observed:
        raise InvalidInputError(
            "idata: observed_data holds neither 'rows' nor 'support'; pass tally= (for "
            "pm.sample's output on a build_model model: model=, or call inside `with model:`)"
        )
    rows = np.asarray(observed["rows"].values, dtype=float)
    k = rows.shape[1]
    return Tally(
        counts, rows=rows, stat=np.zeros(k) if stat is None else stat, family=family, dedupe=False
    )


__all__ = ["loo", "loo_compare"]


def _model_tally(model: Any) -> Tally | None:
    """The tally of a :func:`~bayesldp.bayes.model.build_model` model: ``model``, or the PyMC
    model of the enclosing ``with`` block (PyMC is only looked up if it is imported)."""
    import sys

    from bayesldp.bayes.model import model_tally

    if model is None and "pymc" in sys.modules:
        model = sys.modules["pymc"].Model.get_context(error_if_none=False)
    return None if model is None else model_tally(model)
