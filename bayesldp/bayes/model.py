"""The PyMC model of a tally: ``theta ~ Dirichlet(alpha)`` and the tally's likelihood.

.. math::

    \\theta \\sim \\mathrm{Dirichlet}(\\alpha), \\qquad
    \\log p(\\text{tally} \\mid \\theta) = \\sum_u c_u \\log(L_u \\cdot \\theta)

(up to a constant that does not depend on ``theta``).  The likelihood is an observed
:class:`pymc.CustomDist` named ``"counts"`` whose value is the vector of counts and whose
element-wise log-probability is one value per *report*, ``log(L_u . theta)`` repeated ``c_u``
times for row ``u`` (:mod:`bayesldp.bayes.pointwise`), so ``pm.sample(...,
idata_kwargs={"log_likelihood": True})`` (or :func:`pymc.compute_log_likelihood`) gives the
per-report log-likelihood (dim ``counts_dim_0``, ``N`` entries) and ``arviz.loo`` on it leaves
out one report at a time, as :func:`bayesldp.loo` does; beyond
:data:`~bayesldp.bayes.pointwise.POINTWISE_MAX_REPORTS` reports (500 MB at PyMC's default
4 x 1000 draws) that group is refused with one line naming :func:`bayesldp.loo`, which is
exact at any size.  Its sum, all that sampling evaluates, is compiled to the per-row
``sum_u c_u log(L_u . theta)``: the model's joint log-density on the value scale is exactly
``tally.loglik(theta) + log Dirichlet(theta | alpha)``, at a cost per gradient of ``O(U K)``.

Two forms, chosen from the tally:

* **finite channel** (the tally, dense or support form, came from one
  :class:`~bayesldp.mechanisms.base.FiniteChannelMechanism` with a channel of at most
  ``MAX_CHANNEL_SIZE`` entries, and every row is one of its channel columns): one entry per
  distinct channel column (the model's "report" coordinate, all possible reports, unobserved
  ones with count 0); ``L_u . theta`` is ``theta @ P`` for that column.  The counts
  of the reports are ``Multinomial(n, theta P)`` (reports whose channel columns coincide are
  pooled), which is what :func:`pymc.sample_prior_predictive` and
  :func:`pymc.sample_posterior_predictive` draw.
* **generic** (any tally, dense or support form): one entry per distinct likelihood row
  (the model's "row" coordinate).  Rows are only *proportional* to report probabilities (unary
  encoding, local hashing, merged adaptive tallies), so no predictive distribution of counts is
  defined: prior / posterior predictive sampling of ``"counts"`` raises
  ``NotImplementedError`` (sample ``var_names=["theta"]`` for the prior).

Cost per gradient: ``O(U K)``.  Dense rows are a float matrix ``(U, K)``; support-form rows use
``lo * sum(theta) + (hi - lo) * (S @ theta)`` with the 0/1 support ``S`` stored once as a float
matrix (the same ``8 U K`` bytes as dense rows: 80 MB at ``U = 1e5``, ``K = 100``).  Both are
PyTensor shared variables rather than graph constants, which keeps compilation short for large
tallies (measured at ``U = 1e5``, ``K = 100``: about 11 s to compile logp and gradient, 20 ms per
log-density and 55 ms per gradient, 540 MB peak memory for the process).
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np

from bayesldp._validation import check_alpha
from bayesldp.bayes.prior import (
    AdaptiveDirichlet,
    Dirichlet,
    LogWeightPrior,
    as_prior,
    default_prior,
)
from bayesldp.bayes.smooth_coordinates import smooth_information, smooth_pilot, smooth_weights
from bayesldp.errors import InvalidInputError, InvalidTypeError
from bayesldp.mechanisms.base import FiniteChannelMechanism
from bayesldp.tally import Tally

__all__ = [
    "MAX_CHANNEL_SIZE",
    "build_model",
    "finite_channel_form",
    "pointwise_loglik",
    "smooth_information",
    "smooth_pilot",
    "smooth_theta",
    "smooth_weights",
    "tally_likelihood",
]

#: the finite-channel form is used only when the channel has at most this many entries
MAX_CHANNEL_SIZE = 10_000_000


def finite_channel_form(
    tally: Tally,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """The tally as counts of distinct channel columns, or None when that is not possible.

    Returns ``(columns, counts, multiplicity, report)``: ``columns`` (R, K) the distinct channel
    columns ``P[:, y]`` that some input can produce, ``counts`` (R,) the reports with that column
    (0 when unobserved), ``multiplicity`` (R,) how many report values share the column, so that
    ``Pr(column r | theta) = multiplicity_r * columns_r . theta`` sums to 1 over ``r``, and
    ``report`` (R,) the smallest report value with that column (the "report" coordinate).
    """
    mech = tally.mechanism
    if not isinstance(mech, FiniteChannelMechanism):
        return None
    try:
        channel = np.asarray(mech.channel, dtype=float)
    except NotImplementedError:
        return None
    if channel.size > MAX_CHANNEL_SIZE or channel.shape[0] != tally.k:
        return None
    if not np.allclose(channel.sum(axis=1), 1.0, rtol=0, atol=1e-9):
        return None
    live = np.flatnonzero(channel.max(axis=0) > 0)
    columns, first, multiplicity = np.unique(
        channel[:, live].T, axis=0, return_index=True, return_counts=True
    )
    by_report = np.argsort(first)  # list the columns in the order of their first report value
    columns, first, multiplicity = columns[by_report], first[by_report], multiplicity[by_report]

    # match each tally row to a distinct column; rows are channel columns up to rounding (support
    # form stores them as lo + (hi - lo) * support), so compare keys rounded to 12 decimals
    def keys(matrix: np.ndarray) -> np.ndarray:
        rounded = np.ascontiguousarray(np.round(matrix, 12) + 0.0)  # + 0.0 turns -0.0 into 0.0
        return rounded.view(np.dtype((np.void, 8 * tally.k))).ravel()

    cols_view, rows_view = keys(columns), keys(tally.rows)
    order = np.argsort(cols_view)
    pos = np.minimum(np.searchsorted(cols_view[order], rows_view), len(order) - 1)
    if not np.all(cols_view[order][pos] == rows_view):
        return None
    if not np.allclose(columns[order[pos]], tally.rows, rtol=1e-9, atol=0):
        return None
    counts = np.zeros(columns.shape[0], dtype=np.int64)
    np.add.at(counts, order[pos], tally.counts)
    return columns, counts, multiplicity.astype(np.int64), live[first]


def pointwise_loglik(tally: Tally, theta: Any) -> np.ndarray:
    """Per-row log-likelihood ``c_u log(L_u . theta)`` for draws ``theta`` (..., K) -> (..., U).

    The terms sum to ``tally.loglik(theta)``; :func:`bayesldp.fit`'s ``log_likelihood`` group
    holds them divided by ``c_u`` and repeated ``c_u`` times (one value per report).
    """
    theta = np.asarray(theta, dtype=float)
    with np.errstate(divide="ignore"):
        return tally.counts * np.log(tally.row_dot(theta))


def _report_logp(name: str) -> Any:
    """The element-wise log-probability of the observed counts: ``log(L_u . theta)`` once per
    report (``c_u`` times for row ``u``), whose sum PyTensor rewrites to ``sum_u c_u log(L_u .
    theta)`` (:mod:`bayesldp.bayes.pointwise`)."""

    def logp(value: Any, mu: Any) -> Any:
        import pytensor.tensor as pt

        from bayesldp.bayes.pointwise import per_report

        return per_report(pt.log(mu), value, name=name)

    return logp


def _category_labels(labels: Sequence[Any] | None, k: int) -> list[Any]:
    if labels is None:
        return list(range(k))
    category = list(labels)
    if len(category) != k or len(set(category)) != k:
        raise InvalidInputError(
            f"labels: expected {k} distinct category labels, got {len(category)} "
            f"({len(set(category))} distinct)"
        )
    return category


def _is_pymc_variable(value: Any) -> bool:
    """A PyTensor expression (a PyMC random variable or any function of them)."""
    from pytensor.graph.basic import Variable

    return isinstance(value, Variable)


def _prior_object(prior: Any, tally: Tally) -> Any:
    """``prior`` as :func:`bayesldp.fit` reads it (its default for ``None``)."""
    return as_prior(default_prior(prior, tally, "nuts"), tally.k)


#: the tallies each model of :func:`build_model` was built from, by ``theta``'s name, so that
#: :func:`bayesldp.sample_posterior_predictive` finds them under ``with model:``
_MODEL_TALLIES: weakref.WeakKeyDictionary[Any, dict[str, Tally]] = weakref.WeakKeyDictionary()


def model_tally(model: Any, name: str = "theta") -> Tally | None:
    """The tally :func:`build_model` gave ``model`` for the variable ``name`` (None if none)."""
    return _MODEL_TALLIES.get(model, {}).get(name)


def build_model(
    tally: Tally,
    prior: Any = None,
    *,
    labels: Sequence[Any] | None = None,
    model: Any = None,
    name: str = "theta",
    adaptive_form: str = "marginal",
) -> Any:
    """Build the PyMC model of :func:`bayesldp.fit`: ``theta ~ prior``, counts ``~ sum_u c_u
    log(L_u.theta)``.

    Parameters
    ----------
    tally : Tally
        Any tally (dense or support form).
    prior : None, "adaptive", "smooth", "logistic_normal", float, array_like, Dirichlet,
        AdaptiveDirichlet, SmoothDensity, LogisticNormal, or PyMC variable
        Every prior :func:`bayesldp.fit` takes, with its meaning there (``None``: the
        mechanism's default, as ``fit``'s); or a PyTensor expression of shape (K,) built from
        PyMC random variables of ``model``, used as Dirichlet concentrations (a learnt
        concentration, a hierarchical base measure: ``alpha = conc * base``).
        The adaptive prior (``Dirichlet(a 1_K)``, ``log a`` on its grid): with
        ``adaptive_form="marginal"`` (default) ``theta`` is a ``Dirichlet(1)`` variable and the
        potential ``"adaptive_prior"``, ``log sum_j exp(c_j + (a_j - 1) sum_x log theta_x)``,
        turns it into the marginal adaptive prior: no discrete variable, so every sampler
        (PyMC's NUTS, nutpie, numpyro) takes it, and draws of ``a`` follow exactly from
        ``p(a | theta)``: ``AdaptiveDirichlet(K).draw_concentration(theta_draws)``, as
        :func:`bayesldp.fit` does.  With ``"joint"``: ``a_index ~ Categorical(w)`` over the
        grid, ``a = grid[a_index]`` (deterministic) and ``theta ~ Dirichlet(a 1_K)``, so
        ``pm.sample`` returns ``a`` itself (PyMC's own sampler only; give ``a_index`` the exact
        Gibbs step ``pm.CategoricalGibbsMetropolis([model["a_index"]],
        proposal="proportional")``: the default uniform proposal mixes slowly over the grid's
        nodes).  A :class:`~bayesldp.bayes.SmoothDensity`
        (ordered bins): ``theta`` is the deterministic ``softmax(f)`` of its log-weights, with
        free variables ``log_smoothness``, ``slope`` and ``coef`` and the deterministic
        ``smoothness`` (:func:`smooth_theta`, non-centred by the information a short pilot
        chain of bayesldp's NUTS measures: :func:`bayesldp.bayes.hmc.smooth.pilot_information`);
        a :class:`~bayesldp.bayes.LogisticNormal` likewise, with ``log_spread``, ``coef`` and
        ``spread``.
    labels : sequence, optional
        ``K`` category labels for the "category" coordinate (default ``0..K-1``).
    model : pymc.Model, optional
        Add ``theta`` and the likelihood to this model (needed when ``alpha`` uses its
        variables; several tallies may share one model under different ``name``); default: a new
        model.
    name : str
        Name of the ``theta`` variable; its likelihood is ``"counts"`` for ``"theta"``, else
        ``f"counts_{name}"`` (see :func:`tally_likelihood`).

    Returns
    -------
    pymc.Model
        Free variable ``theta`` (dims "category"); observed ``counts``, one entry per
        coordinate "report" in the finite-channel form, "row" otherwise (see the module
        docstring), with one element-wise log-likelihood value per report (no dims: its
        log-likelihood has ``N`` entries, its value fewer).  The joint log-density
        at a value ``theta`` is ``tally.loglik(theta)`` plus the Dirichlet log-density (plus, on
        the transformed scale, PyMC's simplex Jacobian).

    Examples
    --------
    >>> import numpy as np, bayesldp
    >>> from bayesldp.bayes.model import build_model
    >>> mech = bayesldp.GRR(3, 1.0)
    >>> model = build_model(mech.tally_from_report_counts([5, 3, 2]), np.ones(3))
    >>> sorted(model.named_vars)
    ['counts', 'theta']
    """
    import pymc as pm
    import pytensor.tensor as pt

    if not isinstance(tally, Tally):
        raise InvalidTypeError(f"tally: expected a bayesldp.Tally, got {type(tally).__name__}")
    k = tally.k
    if adaptive_form not in ("joint", "marginal"):
        raise InvalidInputError(
            f"adaptive_form: must be 'joint' or 'marginal', got {adaptive_form!r}"
        )
    alpha = prior if _is_pymc_variable(prior) else _prior_object(prior, tally)
    adaptive = alpha if isinstance(alpha, AdaptiveDirichlet) else None
    smooth = alpha if isinstance(alpha, LogWeightPrior) else None
    if (adaptive or smooth) is not None and alpha.k != k:
        raise InvalidInputError(f"prior: a {type(alpha).__name__} on {alpha.k} categories, K = {k}")
    if isinstance(alpha, Dirichlet):
        alpha = check_alpha(alpha.alpha, k)
    category = _category_labels(labels, k)
    model = pm.Model() if model is None else model
    if "category" not in model.coords:
        model.add_coord("category", category)
    elif list(model.coords["category"]) != category and labels is not None:
        raise InvalidInputError("labels: differ from the model's existing 'category' coordinate")
    with model:
        if smooth is not None:
            theta = smooth_theta(smooth, name, _pilot_information(tally, smooth))
        elif adaptive is not None and adaptive_form == "joint":
            index = pm.Categorical("a_index", p=np.exp(adaptive.log_w))
            a = pm.Deterministic("a", pt.as_tensor(adaptive.a)[index])
            theta = pm.Dirichlet(name, a=a * np.ones(k), dims="category")
        elif adaptive is not None:  # Dirichlet(1) times this is the marginal adaptive prior
            theta = pm.Dirichlet(name, a=np.ones(k), dims="category")
            s_total = pt.sum(pt.log(theta))
            pm.Potential("adaptive_prior", pt.logsumexp(adaptive.c + (adaptive.a - 1.0) * s_total))
        else:
            theta = pm.Dirichlet(name, a=alpha, dims="category")
        tally_likelihood(tally, theta, name="counts" if name == "theta" else f"counts_{name}")
    _MODEL_TALLIES.setdefault(model, {})[name] = tally
    return model


def smooth_theta(prior: LogWeightPrior, name: str = "theta", info: Any = None) -> Any:
    """``theta = softmax(f)`` under a prior on the log-weights
    (:class:`~bayesldp.bayes.SmoothDensity`, :class:`~bayesldp.bayes.LogisticNormal`), in the
    current PyMC model (dims "category"; ``f = b line + modes @ y``,
    :meth:`~bayesldp.bayes.log_weight_priors.LogWeightPrior.basis`).

    Free variables: ``log_smoothness`` (``log lambda``; ``log_spread`` under the
    logistic-normal prior), ``slope`` (``b``; none where the line is zero) and ``coef`` (``u``,
    one per mode: :attr:`~bayesldp.bayes.log_weight_priors.LogWeightPrior.n_modes`);
    deterministic ``smoothness`` (``lambda``; ``spread``).  Coefficient ``j`` is
    ``y_j = s_j^{w_j} u_j`` with ``u_j ~ N(0, s_j^{2 (1 - w_j)})``, ``s_j = lambda scale_j`` its
    prior sd: ``y_j ~ N(0, s_j^2)`` for any weight ``w_j`` in [0, 1] (partial non-centring,
    Papaspiliopoulos, Roberts and Skold 2007), ``w`` from :func:`smooth_weights` (``info``
    default 0: every ``w_j = 1``, non-centred).
    """
    import pymc as pm
    import pytensor.tensor as pt

    line, modes, scale = prior.basis()
    weight = smooth_weights(prior, np.zeros(scale.shape[0]) if info is None else info)
    log_lam = pm.Normal(f"log_{prior.HYPER}", prior.log_scale_mean, prior.log_scale_sd)
    pm.Deterministic(prior.HYPER, pt.exp(log_lam))
    log_sd = log_lam + np.log(scale)
    u = pm.Normal("coef", 0.0, pt.exp((1.0 - weight) * log_sd), shape=scale.shape[0])
    f = pt.dot(modes, pt.exp(weight * log_sd) * u)
    if np.any(line):
        f = f + pm.Normal("slope", 0.0, prior.slope_sd) * line
    return pm.Deterministic(name, pt.special.softmax(f), dims="category")


def _pilot_information(tally: Tally, prior: LogWeightPrior) -> np.ndarray:
    """The non-centring information of PyMC's model: bayesldp's NUTS pilot chain
    (:func:`bayesldp.bayes.hmc.smooth.pilot_information`, seed 0, so a model is built the same
    way every time), not the EMS estimate alone, where the posterior can be far from it."""
    from bayesldp.bayes.hmc.smooth import pilot_information

    return pilot_information(tally, prior, np.random.default_rng(0))


def tally_likelihood(tally: Tally, theta: Any, *, name: str = "counts") -> Any:
    """Add a tally's likelihood ``sum_u c_u log(L_u.theta)`` for a PyMC ``theta`` to the
    current model (call it inside ``with model:``).

    The building block of custom models: one call per tally, each with its own ``theta``
    (regions, days, cohorts with partial pooling) or the same one (reports of one population
    under several mechanisms).  The observed variable is ``name``, one entry per coordinate
    ``"report"`` (finite channel; ``f"{name}_report"`` when ``name != "counts"``) or ``"row"``
    (likewise), with one element-wise log-likelihood value per report; see the module
    docstring for the two forms.

    Parameters
    ----------
    tally : Tally
    theta : PyMC variable, shape (K,)
        A distribution on the K-simplex (e.g. ``pm.Dirichlet``).
    name : str
        Name of the observed variable.

    Returns
    -------
    The observed ``pymc.CustomDist`` variable.

    Examples
    --------
    Two tallies of one population, under two mechanisms, in one PyMC model:

    >>> import pymc as pm
    >>> import bayesldp
    >>> grr, oue = bayesldp.GRR(3, 1.0), bayesldp.OUE(3, 1.0)
    >>> a = grr.tally(grr.perturb([0, 1, 2, 0], rng=0))
    >>> b = oue.tally(oue.perturb([0, 1, 2, 0], rng=0))
    >>> with pm.Model() as model:
    ...     theta = pm.Dirichlet("theta", a=[1.0, 1.0, 1.0])
    ...     _ = bayesldp.tally_likelihood(a, theta, name="grr")
    ...     _ = bayesldp.tally_likelihood(b, theta, name="oue")
    >>> sorted(model.named_vars)
    ['grr', 'oue', 'theta']
    """
    import pymc as pm
    import pytensor
    import pytensor.tensor as pt

    if not isinstance(tally, Tally):
        raise InvalidTypeError(f"tally: expected a bayesldp.Tally, got {type(tally).__name__}")
    model = pm.modelcontext(None)
    suffix = "" if name == "counts" else f"{name}_"
    finite = finite_channel_form(tally)
    if finite is not None:
        columns, counts, multiplicity, report = finite
        dim = f"{suffix}report"
        model.add_coord(dim, report)
        n = int(tally.n)
        prob_scale = multiplicity.astype(float)
        mu = pt.dot(pytensor.shared(columns, name=f"{suffix}channel_columns"), theta)

        def _random(mu: np.ndarray, rng: np.random.Generator | None = None,
                    size: Any = None) -> np.ndarray:  # fmt: skip
            p = np.clip(mu * prob_scale, 0.0, None)
            return rng.multinomial(n, p / p.sum())

        return pm.CustomDist(name, mu, logp=_report_logp(name), random=_random,
                             observed=counts)  # fmt: skip
    dim = f"{suffix}row"
    model.add_coord(dim, np.arange(tally.n_rows))
    if tally.is_support_form:
        lo, hi = tally.levels
        support = pytensor.shared(tally.support.astype(float), name=f"{suffix}support")
        mu = lo * pt.sum(theta) + (hi - lo) * pt.dot(support, theta)
    else:
        mu = pt.dot(pytensor.shared(np.array(tally.rows, dtype=float), name=f"{suffix}rows"), theta)
    return pm.CustomDist(name, mu, logp=_report_logp(name), observed=tally.counts)
