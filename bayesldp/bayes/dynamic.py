"""Posteriors across rounds: a Gaussian random walk on the log-frequencies, one tally per round.

Repeated collection (the longitudinal mechanisms, :class:`~bayesldp.LGRR` and the unary ones,
or any mechanism run again each day) gives one :class:`~bayesldp.Tally` per round ``t = 1..T``.
Fitting each round alone ignores that the population changes slowly; pooling them ignores that
it changes at all.  :func:`fit_rounds` fits the dynamic model in between and learns from the data
how much the rounds borrow from each other:

.. math::

    \\eta_1 &\\sim \\mathcal{N}\\big(0, s_0^2 (I_K - \\tfrac{1}{K} 1 1^\\top)\\big), \\\\
    \\eta_t &= \\eta_{t-1} + \\sigma z_t, \\quad
    z_t \\sim \\mathcal{N}\\big(0, I_K - \\tfrac{1}{K} 1 1^\\top\\big), \\quad t = 2..T, \\\\
    \\sigma &\\sim \\text{Half-Normal}(\\tau), \\\\
    \\theta_t &= \\operatorname{softmax}(\\eta_t), \\qquad
    \\log p(\\text{tally}_t \\mid \\theta_t) = \\sum_u c_{tu} \\log(L_{tu} \\cdot \\theta_t).

``eta_t`` are the log-frequencies centred to sum 0 (the part of the log-frequencies ``softmax``
sees: a common shift changes nothing), so the walk is an i.i.d. Gaussian random walk on the
log-frequencies projected onto that subspace (PyMC's ``ZeroSumNormal``): every category is
treated alike, no reference category.  This is the multinomial dynamic model of Cargnoni,
Müller and West, "Bayesian forecasting of multinomial time series through conditionally
Gaussian dynamic models", JASA 92 (1997) 640-647 (a random walk on the multinomial logits; West
and Harrison, *Bayesian Forecasting and Dynamic Models*, 2nd ed., 1997, ch. 14), with each
round's multinomial replaced by the tally's likelihood through the LDP channel.  ``sigma -> 0``
is the pooled model (one ``theta`` for every round); ``sigma -> inf`` fits the rounds apart.

Parameterisation: non-centred (``z_t`` are the free variables, Papaspiliopoulos, Roberts and
Sköld, Statistical Science 22 (2007) 59-73): a round's reports inform ``theta_t`` far less
than the walk ties neighbouring rounds together when the population moves slowly, where the
centred form is a funnel in ``(sigma, eta)``.  Prior on ``sigma``: half-normal (Gelman,
"Prior distributions for variance parameters in hierarchical models", Bayesian Analysis 1
(2006) 515-534; a penalised-complexity prior of a random walk's scale is of the same kind,
Simpson et al., Statistical Science 32 (2017) 1-28): its density is positive at ``sigma = 0``,
so the data can take the posterior to the pooled model when nothing changes; a log-normal
vanishes at 0 and would rule the static population out a priori.  Its scale ``tau`` (default
0.5) is in log-frequency per round: a change of a category by half its size (about ``e^0.5``)
per round is one prior sd, far more than most populations move.

Sampling: NUTS on ``1 + K T - T`` free dimensions (181 for K = 10, T = 20), PyMC's
coordinates for this model; each round's likelihood is its tally's, ``sum_u c_tu log(L_tu .
theta_t)`` over its distinct rows.  By default (``method="hmc"``) the package's own sampler,
the density compiled and the rounds' rows read by the package's likelihood operator
(:mod:`bayesldp.bayes.hmc.walk`); with ``method="nuts"`` PyMC's (any ``nuts_sampler`` PyMC
takes) on :func:`build_rounds_model` (the rounds' rows as :func:`stacked_rows`), the same
log-density to a constant (a test checks both and their gradients at random points).
"""

from __future__ import annotations

import json
import time
import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from bayesldp._validation import (
    as_list,
    check_bool,
    check_choice,
    check_instance,
    check_int,
    check_positive,
)
from bayesldp._version import __version__
from bayesldp.bayes._arviz import import_arviz
from bayesldp.bayes._serialised import _SerialisedPrior
from bayesldp.errors import ConvergenceWarning, InvalidInputError, InvalidTypeError, PanelWarning
from bayesldp.tally import Tally

if TYPE_CHECKING:
    import arviz

__all__ = [
    "RandomWalkPrior",
    "build_rounds_model",
    "fit_rounds",
    "stacked_rows",
    "summarize_rounds",
]

#: the probability of the intervals :func:`summarize_rounds` gives by default
INTERVAL_PROB = 0.9


class RandomWalkPrior(_SerialisedPrior):
    """Gaussian random walk on the centred log-frequencies, with a learnt step size.

    ``eta_1 ~ N(0, initial_sd^2 (I - 11'/K))``, ``eta_t = eta_{t-1} + sigma z_t`` with
    ``z_t ~ N(0, I - 11'/K)``, ``sigma ~ HalfNormal(step_scale)`` and
    ``theta_t = softmax(eta_t)`` (module :mod:`bayesldp.bayes.dynamic`, which gives the
    sources and why a half-normal).

    Parameters
    ----------
    step_scale : float
        Scale ``tau`` of the half-normal prior on the step size ``sigma`` (log-frequency per
        round), > 0; default 0.5.
    initial_sd : float
        Prior sd ``s_0`` of the first round's centred log-frequencies, > 0; default 2 (vague:
        95% of the prior puts two categories' ratio within ``e^(+-2 * 2 * 2)``; the log-frequency
        sd of the real and long-tailed populations of
        ``benchmarks/investigations/results/prior_family_fit.md`` is 0.3 to 1.7).
    step : float or None
        A fixed step size instead of the learnt one (``sigma = step``, no prior; ``step``
        near 0 pools the rounds).  Default None: learnt.

    Examples
    --------
    >>> from bayesldp.bayes import RandomWalkPrior
    >>> RandomWalkPrior(step_scale=0.2).to_dict()["step_scale"]
    0.2
    """

    __slots__ = ("initial_sd", "step", "step_scale")

    def __init__(
        self, step_scale: float = 0.5, initial_sd: float = 2.0, step: float | None = None
    ) -> None:
        self.step_scale = check_positive(step_scale, "step_scale")
        self.initial_sd = check_positive(initial_sd, "initial_sd")
        self.step = None if step is None else check_positive(step, "step")

    def to_dict(self) -> dict[str, Any]:
        return {"family": "random_walk", "step_scale": self.step_scale,
                "initial_sd": self.initial_sd, "step": self.step}  # fmt: skip

    def __repr__(self) -> str:
        fixed = "" if self.step is None else f", step={self.step:g}"
        scales = f"step_scale={self.step_scale:g}, initial_sd={self.initial_sd:g}"
        return f"RandomWalkPrior({scales}{fixed})"


# ---------------------------------------------------------------------------------------------
# input checks
# ---------------------------------------------------------------------------------------------
#: coverage of fit_rounds' 90% intervals on benchmarks/results/longitudinal_drift.md's panel
#: (the same users every round, memoised) and with new users each round
PANEL_COVERAGE, NEW_USERS_COVERAGE = 0.765, 0.948


def repeated_users(users: Sequence[Any]) -> tuple[int, int]:
    """``(users in two or more rounds, distinct users)`` of each round's user ids."""
    ids = [np.unique(np.asarray(round_users)) for round_users in users]
    if not ids:
        return 0, 0
    every, times = np.unique(np.concatenate(ids), return_counts=True)
    return int(np.count_nonzero(times > 1)), int(every.size)


def panel_message(repeated: int, users: int) -> str:
    """One line: what :func:`fit_rounds` on a panel gives, and what to do instead."""
    return (
        f"{repeated:,} of {users:,} users report in more than one round (a panel): fit_rounds' "
        "random walk assumes independent users per round, and on a panel its 90% intervals "
        f"under-cover ({PANEL_COVERAGE} measured on a panel, {NEW_USERS_COVERAGE} with new "
        "users each round); take intervals from each round's own fit (bayesldp.fit per round; "
        "bayesldp estimate --method posterior)"
    )


def check_rounds(tallies: object) -> list[Tally]:
    """The rounds as a list of tallies of one mechanism and K, each with reports; else a
    one-line :class:`~bayesldp.InvalidInputError` (``ValueError``) naming the round."""
    if isinstance(tallies, Tally):
        raise InvalidTypeError(
            "tallies: expected a sequence of Tally, one per round, got a single Tally "
            "(bayesldp.fit fits one round)"
        )
    if not isinstance(tallies, Sequence) or isinstance(tallies, str | bytes):
        raise InvalidTypeError(
            f"tallies: expected a sequence of Tally, one per round, got {type(tallies).__name__}"
        )
    rounds = list(tallies)
    if not rounds:
        raise InvalidInputError("tallies: an empty sequence; give one Tally per round")
    for t, tally in enumerate(rounds):
        if tally is None:
            raise InvalidInputError(f"tallies[{t}]: None; every round needs a Tally with reports")
        if not isinstance(tally, Tally):
            raise InvalidTypeError(
                f"tallies[{t}]: expected a bayesldp.Tally, got {type(tally).__name__}"
            )
        if tally.n < 1:
            raise InvalidInputError(f"tallies[{t}]: round {t} has no reports")
    first = rounds[0]
    for t, tally in enumerate(rounds[1:], start=1):
        if tally.k != first.k:
            raise InvalidInputError(
                f"tallies[{t}]: K = {tally.k} categories, round 0 has K = {first.k}; every "
                "round must have the same categories"
            )
        if tally.family != first.family:
            raise InvalidInputError(
                f"tallies[{t}]: mechanism {_mechanism_name(tally)}, round 0's is "
                f"{_mechanism_name(first)}; every round must use the same mechanism"
            )
    return rounds


def _mechanism_name(tally: Tally) -> str:
    return repr(tally.mechanism) if tally.mechanism is not None else repr(tally.family)


def _as_prior(prior: object) -> RandomWalkPrior:
    if prior is None:
        return RandomWalkPrior()
    return check_instance(prior, RandomWalkPrior, "prior", "a RandomWalkPrior or None")


def _labels(values: Sequence[Any] | None, size: int, name: str) -> list[Any]:
    if values is None:
        return list(range(size))
    out = as_list(values, name, f"a sequence of {size} labels")
    if len(out) != size or len(set(out)) != size:
        raise InvalidInputError(
            f"{name}: expected {size} distinct labels, got {len(out)} ({len(set(out))} distinct)"
        )
    return out


# ---------------------------------------------------------------------------------------------
# the model
# ---------------------------------------------------------------------------------------------
def build_rounds_model(
    tallies: Sequence[Tally],
    prior: RandomWalkPrior | None = None,
    *,
    labels: Sequence[Any] | None = None,
    round_labels: Sequence[Any] | None = None,
) -> Any:
    """The PyMC model :func:`fit_rounds` samples (module docstring's formula).

    Free variables ``eta_init`` (dims ``category``), ``innovation`` (dims ``step, category``,
    ``T - 1`` steps; absent when ``T = 1``) and ``sigma`` (unless the prior fixes ``step``);
    deterministic ``eta`` and ``theta`` (dims ``round, category``); observed ``counts`` (dims
    ``round, row``: each round's tally likelihood, :func:`stacked_rows`).

    Examples
    --------
    >>> import bayesldp
    >>> from bayesldp.bayes import build_rounds_model
    >>> mech = bayesldp.GRR(3, 1.0)
    >>> rounds = [mech.tally_from_report_counts(c) for c in ([5, 3, 2], [4, 4, 2])]
    >>> sorted(build_rounds_model(rounds).named_vars)
    ['counts', 'eta', 'eta_init', 'innovation', 'sigma', 'theta']
    """
    import pymc as pm
    import pytensor.tensor as pt

    rounds = check_rounds(tallies)
    prior = _as_prior(prior)
    k, n_rounds = rounds[0].k, len(rounds)
    coords = {
        "round": _labels(round_labels, n_rounds, "round_labels"),
        "category": _labels(labels, k, "labels"),
        "step": list(range(1, n_rounds)),
    }
    with pm.Model(coords=coords) as model:
        eta_init = pm.ZeroSumNormal("eta_init", sigma=prior.initial_sd, dims="category")
        if prior.step is None:
            sigma = pm.HalfNormal("sigma", sigma=prior.step_scale)
        else:
            sigma = pt.as_tensor(prior.step)
        if n_rounds > 1:
            z = pm.ZeroSumNormal("innovation", sigma=1.0, dims=("step", "category"))
            walk = eta_init[None, :] + sigma * pt.cumsum(z, axis=0)
            eta = pt.concatenate([eta_init[None, :], walk], axis=0)
        else:
            eta = eta_init[None, :]
        eta = pm.Deterministic("eta", eta, dims=("round", "category"))
        theta = pm.Deterministic("theta", pt.special.softmax(eta, axis=-1),
                                 dims=("round", "category"))  # fmt: skip
        rows, counts = stacked_rows(rounds)
        model.add_coord("row", np.arange(counts.shape[1]))
        mu = pt.sum(pt.as_tensor(rows) * theta[:, None, :], axis=-1)
        pm.CustomDist("counts", mu, logp=_row_logp, observed=counts, dims=("round", "row"))
    return model


def _row_logp(value: Any, mu: Any) -> Any:
    import pytensor.tensor as pt

    return value * pt.log(mu)


def stacked_rows(rounds: Sequence[Tally]) -> tuple[np.ndarray, np.ndarray]:
    """Every round's distinct likelihood rows and counts in one array: ``rows`` (T, U, K),
    ``counts`` (T, U), ``U`` the most rows of a round; a round with fewer is padded with rows of
    ones and count 0 (a term ``0 log(1 . theta) = 0``).  Rows are scaled to a maximum of 1
    (the likelihood is invariant to a row's scale).  ``sum(counts * log(rows @ theta_t))`` is
    then each round's ``tally.loglik`` up to a constant, in one vectorised product (8x faster to
    sample than one :func:`~bayesldp.bayes.model.tally_likelihood` per round: 3 s against 26 s
    for 1,200 NUTS iterations at K = 10, T = 20 on GRR)."""
    counts = stacked_counts(rounds)
    rows = np.ones((*counts.shape, rounds[0].k))
    for t, tally in enumerate(rounds):  # one pass per round, not per report
        matrix = np.asarray(tally.rows, dtype=float)
        rows[t, : tally.n_rows] = matrix / matrix.max(axis=1, keepdims=True)
    return rows, counts


def stacked_counts(rounds: Sequence[Tally]) -> np.ndarray:
    """Every round's row counts (T, U), padded with 0 as in :func:`stacked_rows`: the
    ``observed_data`` of :func:`fit_rounds`."""
    counts = np.zeros((len(rounds), max(tally.n_rows for tally in rounds)), dtype=np.int64)
    for t, tally in enumerate(rounds):
        counts[t, : tally.n_rows] = tally.counts
    return counts


# ---------------------------------------------------------------------------------------------
# fit
# ---------------------------------------------------------------------------------------------
def fit_rounds(
    tallies: Sequence[Tally],
    draws: int = 1000,
    *,
    tune: int = 1000,
    chains: int = 4,
    prior: RandomWalkPrior | None = None,
    random_seed: Any = None,
    labels: Sequence[Any] | None = None,
    round_labels: Sequence[Any] | None = None,
    progressbar: bool | None = None,
    cores: int | None = None,
    target_accept: float = 0.9,
    compute_convergence_checks: bool = True,
    users: Sequence[Any] | None = None,
    method: str = "hmc",
    **sample_kwargs: Any,
) -> arviz.InferenceData:
    """Per-round posteriors of ``theta_t`` under a random walk that borrows strength over time.

    Model (module :mod:`bayesldp.bayes.dynamic`): ``theta_t = softmax(eta_t)``, ``eta_t`` a
    Gaussian random walk on the centred log-frequencies with step size ``sigma`` learnt
    (half-normal prior), each round's tally its own likelihood ``sum_u c_tu log(L_tu .
    theta_t)``.  :func:`bayesldp.fit` with a list of tallies is the other extreme: one
    ``theta`` for all of them.

    The rounds must be independent given the frequencies, as when each round asks new users.
    A panel reporting every round through a memoised longitudinal mechanism (``LGRR``, ...)
    repeats each user's permanent response, which the walk pools as if it were information:
    on benchmarks/results/longitudinal_drift.md's panel the 90 % intervals covered 0.765
    (0.948 with new users each round); fit each round alone there.  Given each round's user
    ids (``users``), a panel is a :class:`~bayesldp.errors.PanelWarning`.

    Parameters
    ----------
    tallies : sequence of Tally
        One tally per round, in time order, all of the same mechanism (family and parameters)
        and K; each round may have its own number of reports.  An empty sequence, a round
        without reports, or rounds of different mechanisms or K raise
        :class:`~bayesldp.InvalidInputError` (a ``ValueError``) naming the round.
    draws, tune, chains : int
        Posterior draws and warm-up iterations per chain, and chains (PyMC's meaning).
    method : {"hmc", "nuts"}
        "hmc" (default): the package's NUTS with the model's density compiled
        (:mod:`bayesldp.bayes.hmc.walk`; its options ``max_treedepth`` and ``metric`` go in
        ``**sample_kwargs``).  "nuts": PyMC's NUTS on :func:`build_rounds_model`, quiet unless
        ``progressbar`` is on.  Same model, same posterior (module docstring).
    prior : RandomWalkPrior or None
        Default ``RandomWalkPrior()`` (``sigma ~ HalfNormal(0.5)``, ``eta_1`` sd 2).
    random_seed : int, sequence of int, Generator, SeedSequence or None
        As :func:`bayesldp.fit`'s (recorded in the posterior attrs).
    labels, round_labels : sequence, optional
        Coordinates of ``category`` (K labels) and ``round`` (T labels); default ``0..K-1`` and
        ``0..T-1``.
    progressbar, cores
        As :func:`bayesldp.fit`'s (a progress bar per chain; chains sampled at once).
    target_accept : float
        NUTS's target acceptance rate (default 0.9: the walk's posterior has a range of scales
        where 0.8 diverged now and then in trials).
    compute_convergence_checks : bool
        Warn (:class:`~bayesldp.errors.ConvergenceWarning`) when r_hat > 1.01, the bulk ESS is
        below 100 per chain or a transition diverged (over ``theta`` and ``sigma``); the numbers
        are in the posterior attrs either way.
    users : sequence of array-like, optional
        Each round's user ids, in the order of ``tallies`` (as
        :func:`~bayesldp.workflows.longitudinal_files.read_rounds` gives them with
        ``users=True``).  When a user reports in two or more rounds (a panel), a
        :class:`~bayesldp.errors.PanelWarning` says that the intervals under-cover and what to
        do instead.
    **sample_kwargs
        ``method="hmc"``: ``max_treedepth`` (default 10) and ``metric`` ("dense" or "diag").
        ``method="nuts"``: passed to :func:`pymc.sample` (e.g. ``nuts_sampler="nutpie"``).

    Returns
    -------
    arviz.InferenceData
        ``posterior``: ``theta`` and ``eta`` (dims ``chain, draw, round, category``), ``sigma``
        (the step size), ``eta_init`` and ``innovation`` (the walk's variables, in PyMC's
        names); ``sample_stats`` (the sampler's, ArviZ's names); ``observed_data`` ``counts``
        (dims ``round, row``, short rounds padded with count 0);
        ``constant_data`` ``n_reports`` (dims ``round``).  Posterior attrs: ``method``
        ("hmc" or "nuts"), ``model`` ("random_walk"), ``prior`` (JSON), ``mechanism``,
        ``random_seed``, ``seconds`` (whole fit), ``r_hat_max``, ``ess_bulk_min``, ``divergences``.
        :func:`summarize_rounds` gives the per-round means and 90% intervals;
        :func:`bayesldp.plotting.plot_rounds` the trajectories.

    Examples
    --------
    >>> import numpy as np, bayesldp
    >>> mech = bayesldp.LGRR(3, 1.0)
    >>> rng = np.random.default_rng(0)
    >>> rounds = [mech.tally(mech.perturb(rng.integers(0, 3, 200), rng)) for _ in range(3)]
    >>> idata = bayesldp.fit_rounds(rounds, draws=100, tune=100, chains=2, random_seed=0,
    ...                             compute_convergence_checks=False)
    >>> idata.posterior["theta"].dims
    ('chain', 'draw', 'round', 'category')
    """
    from bayesldp.bayes import _feedback
    from bayesldp.bayes.fit import _resolve_seed
    from bayesldp.bayes.inference_data import _standard_attrs, to_json

    start = time.perf_counter()
    rounds = check_rounds(tallies)
    if users is not None:
        if not isinstance(users, Sequence) or len(users) != len(rounds):
            raise InvalidInputError(
                f"users: expected one array of user ids per round ({len(rounds)}), got "
                f"{len(users) if isinstance(users, Sequence) else type(users).__name__}"
            )
        repeated, total = repeated_users(users)
        if repeated:
            warnings.warn(f"fit_rounds: {panel_message(repeated, total)}", PanelWarning,
                          stacklevel=2)  # fmt: skip
    prior = _as_prior(prior)
    draws = check_int(draws, "draws")
    tune = check_int(tune, "tune", 0)
    chains = check_int(chains, "chains")
    seed = _resolve_seed(random_seed)
    progressbar = _feedback.resolve_progressbar(progressbar)
    cores = _feedback.resolve_cores(cores, chains)
    warn = check_bool(compute_convergence_checks, "compute_convergence_checks")
    if "random_seed" in sample_kwargs or "model" in sample_kwargs:
        raise InvalidInputError("sample_kwargs: random_seed and model are fit_rounds' own")
    method = check_choice(method, "method", ("hmc", "nuts"))
    category = _labels(labels, rounds[0].k, "labels")
    round_coord = _labels(round_labels, len(rounds), "round_labels")
    sampling = dict(draws=draws, tune=tune, chains=chains, cores=cores, random_seed=seed,
                    progressbar=bool(progressbar), target_accept=target_accept)  # fmt: skip
    if method == "hmc":
        from bayesldp.bayes.hmc.walk import fit_walk

        idata = fit_walk(rounds, prior, category, round_coord, sampling, sample_kwargs)
    else:
        idata = _sample_pymc(rounds, prior, category, round_coord, sampling, sample_kwargs)
    import xarray as xr

    if method == "hmc":  # PyMC's route has its model's observed counts already
        counts = stacked_counts(rounds)
        observed = xr.Dataset({"counts": (("round", "row"), counts)},
                              coords={"round": round_coord, "row": np.arange(counts.shape[1])},
                              attrs=_standard_attrs())  # fmt: skip
        idata.add_groups(observed_data=observed)

    n_reports = np.array([tally.n for tally in rounds], dtype=np.int64)
    constant = xr.Dataset({"n_reports": (("round",), n_reports)},
                          coords={"round": round_coord})  # fmt: skip
    constant.attrs.update(_standard_attrs())
    idata.add_groups(constant_data=constant)
    first = rounds[0]
    attrs = {
        "bayesldp_version": __version__,
        "method": method,
        "model": "random_walk",
        "prior": prior.to_json(),
        "mechanism": repr(first.mechanism) if first.mechanism is not None else "None",
        "mechanism_params": to_json(first.mechanism.params() if first.mechanism else {}),
        "family": json.dumps(first.family, default=str),
        "random_seed": seed,
        "n_rounds": len(rounds),
    }
    idata.posterior.attrs.update(attrs)
    _diagnose(idata, warn)
    idata.posterior.attrs["seconds"] = time.perf_counter() - start
    return idata


def _sample_pymc(rounds: list[Tally], prior: RandomWalkPrior, category: list[Any],
                 round_coord: list[Any], sampling: dict[str, Any],
                 sample_kwargs: dict[str, Any]) -> arviz.InferenceData:  # fmt: skip
    """PyMC's NUTS on :func:`build_rounds_model`; its "Initializing NUTS" and "Sequential
    sampling" lines only with the progress bar on."""
    import logging

    import pymc as pm

    model = build_rounds_model(rounds, prior, labels=category, round_labels=round_coord)
    pymc_log = logging.getLogger("pymc")
    level = pymc_log.level
    if not sampling["progressbar"]:
        pymc_log.setLevel(logging.WARNING)
    try:
        with model, warnings.catch_warnings():
            # PyMC's own convergence warnings are replaced by ours (_diagnose)
            warnings.filterwarnings("ignore", module="pymc.stats.convergence")
            return pm.sample(**sampling, compute_convergence_checks=False, **sample_kwargs)
    finally:
        pymc_log.setLevel(level)


def _diagnose(idata: Any, warn: bool) -> dict[str, float]:
    """r_hat, bulk ESS (over ``theta`` and ``sigma``) and divergences into the posterior attrs,
    with a :class:`~bayesldp.errors.ConvergenceWarning` for each failed check (PyMC's
    thresholds: :mod:`bayesldp.bayes.diagnostics`)."""
    from bayesldp.bayes.diagnostics import ESS_PER_CHAIN_MIN, R_HAT_MAX

    az = import_arviz()
    posterior = idata.posterior
    names = [v for v in ("theta", "sigma") if v in posterior]
    chains, draws = posterior.sizes["chain"], posterior.sizes["draw"]
    found: dict[str, float] = {}
    with warnings.catch_warnings(), np.errstate(invalid="ignore", divide="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        if chains >= 2 and draws >= 4:
            rhat = az.rhat(posterior, var_names=names)
            found["r_hat_max"] = float(max(np.nanmax(rhat[v].values) for v in names))
        if draws >= 4:
            ess = az.ess(posterior, var_names=names, method="bulk")
            found["ess_bulk_min"] = float(min(np.nanmin(ess[v].values) for v in names))
    found["divergences"] = int(np.asarray(idata.sample_stats["diverging"]).sum())
    posterior.attrs.update(found)
    if not warn:
        return found
    messages = []
    if found.get("r_hat_max", 1.0) > R_HAT_MAX:
        messages.append(f"the largest r_hat is {found['r_hat_max']:.3f} (> {R_HAT_MAX}): the "
                        "chains disagree; run more tuning or draws")  # fmt: skip
    if found.get("ess_bulk_min", np.inf) < ESS_PER_CHAIN_MIN * chains:
        messages.append(f"the smallest bulk ESS is {found['ess_bulk_min']:.0f} (< "
                        f"{ESS_PER_CHAIN_MIN} per chain): run more draws")  # fmt: skip
    if found["divergences"]:
        messages.append(f"{found['divergences']} transitions diverged: raise target_accept "
                        "(e.g. 0.95) or check the model")  # fmt: skip
    for message in messages:
        warnings.warn(f"fit_rounds: {message}", ConvergenceWarning, stacklevel=3)
    return found


# ---------------------------------------------------------------------------------------------
# summaries
# ---------------------------------------------------------------------------------------------
def summarize_rounds(idata: Any, prob: float = INTERVAL_PROB, var_name: str = "theta") -> Any:
    """Per-round posterior means, sds and equal-tailed ``prob`` intervals of ``theta``.

    Returns an :class:`xarray.Dataset` with ``mean``, ``sd``, ``lower``, ``upper`` (dims
    ``round, category``); ``.to_dataframe()`` gives one row per (round, category).  For the
    Monte Carlo errors and r_hat, ``arviz.summary(idata, var_names=["theta"])`` works too.

    Examples
    --------
    On draws of ``theta`` with dims ``(chain, draw, round, category)``, as
    :func:`bayesldp.fit_rounds` returns them (here made up):

    >>> import arviz as az
    >>> import numpy as np
    >>> from bayesldp.bayes import summarize_rounds
    >>> theta = np.random.default_rng(0).dirichlet(np.ones(3), size=(2, 100, 4))
    >>> idata = az.from_dict(posterior={"theta": theta}, dims={"theta": ["round", "category"]})
    >>> summary = summarize_rounds(idata)
    >>> sorted(summary.data_vars), summary["mean"].shape
    (['lower', 'mean', 'sd', 'upper'], (4, 3))
    """
    if not 0.0 < prob < 1.0:
        raise InvalidInputError(f"prob: must lie in (0, 1), got {prob!r}")
    posterior = getattr(idata, "posterior", None)
    if posterior is None or var_name not in posterior:
        raise InvalidInputError(f"idata: has no posterior variable {var_name!r}")
    draws = posterior[var_name].stack(sample=("chain", "draw"))
    tail = (1.0 - prob) / 2.0
    quantiles = draws.quantile([tail, 1.0 - tail], dim="sample")
    import xarray as xr

    out = xr.Dataset(
        {
            "mean": draws.mean("sample"),
            "sd": draws.std("sample", ddof=1),
            "lower": quantiles.isel(quantile=0, drop=True),
            "upper": quantiles.isel(quantile=1, drop=True),
        }
    )
    out.attrs["prob"] = prob
    return out
