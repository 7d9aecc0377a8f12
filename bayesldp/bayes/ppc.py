"""Posterior predictive checks of a fit, for every mechanism, in the form ArviZ plots.

The predicted quantity is the mechanism's oracle statistic ``stat`` (``tally.stat``, one value
per category): the report counts of a finite channel with ``K`` outputs (GRR, RRRR), the support
counts ``h(x) = sum_i 1[x in S(y_i)]`` of a pure protocol (unary encoding, local hashing,
Hadamard response, subset selection, THE) and the sum of the noisy vectors ``sum_i v_i`` of SHE.
For a posterior draw ``theta`` a replicated tally of the same ``n`` users is

.. math::

    c^\\text{rep} \\sim \\text{Multinomial}(n, \\theta), \\qquad
    \\text{stat}^\\text{rep} = \\text{stat}(\\text{tally of } c^\\text{rep}_x
    \\text{ users holding } x \\text{, randomised by the mechanism}),

so ``E[stat^rep | theta] = n theta^T S`` with ``S[x] = E[stat of one report | X = x]``: the
channel row ``P[x]`` for report counts, ``q* + (p* - q*) e_x`` for support counts, ``e_x`` for
SHE.  :func:`sample_posterior_predictive` draws it without perturbing every user where the
statistic's law is known in closed form:

* finite channels: one multinomial per draw and category, ``Multinomial(c_x, P[x])``;
* unary encoding and THE (independent coordinates):
  ``stat_x = Binomial(c_x, p*) + Binomial(n - c_x, q*)``;
* SHE: ``stat = c + b (G_1 - G_2)``, ``G_1, G_2 ~ Gamma(n, 1)`` per coordinate (a sum of ``n``
  Laplace(0, b) variables is ``b`` times a difference of two Gamma(n, 1) variables);
* every other mechanism (local hashing, subset selection, wrappers):
  ``mechanism.simulate_tally(c, rng).stat``, which randomises every user (O(n K) per draw).

Measured (``K = 10``, ``n = 100,000``, the default 500 draws, one core): 0.01-0.1 s for GRR,
RRRR, Hadamard response, unary and histogram encoding; 7 s for subset selection and 17-22 s for
local hashing, which randomise every user: pass a smaller ``num_draws`` for large tallies of
those.
"""

from __future__ import annotations

import math
import numbers
from typing import TYPE_CHECKING, Any

import numpy as np

from bayesldp.bayes._arviz import import_arviz
from bayesldp.errors import InvalidInputError, InvalidTypeError, NotSupportedError
from bayesldp.tally import Tally

if TYPE_CHECKING:
    import arviz

#: posterior draws used by default (spread evenly over the chains)
DEFAULT_NUM_DRAWS = 500
#: the name of the predicted variable in ``posterior_predictive`` and ``observed_data``
VARIABLE = "stat"
#: the tally's variables in ``observed_data`` of a fit, moved to ``constant_data`` as ``tally_*``
TALLY_VARIABLES = ("counts", "rows", "support", "levels")
#: floats of one vectorised block of multinomial draws (finite channels)
_BLOCK = 1 << 22


def sample_posterior_predictive(
    idata: arviz.InferenceData,
    tally: Tally | None = None,
    *,
    random_seed: Any = None,
    num_draws: int | None = None,
    model: Any = None,
) -> arviz.InferenceData:
    """The fit with a ``posterior_predictive`` group of the oracle statistic ``stat``.

    For each used posterior draw ``theta_s``: ``c ~ Multinomial(n, theta_s)`` true counts of the
    tally's ``n`` users, then the statistic of their randomised reports (see the module
    docstring for how each mechanism draws it), so that ``E[stat^rep | theta_s] = n theta_s^T S``
    with ``S[x]`` the expected statistic of one report of a user holding ``x``.

    Parameters
    ----------
    idata : arviz.InferenceData
        A fit from :func:`bayesldp.fit` (or an InferenceData this function returned).
    tally : Tally, optional
        The tally that was fitted (its mechanism randomises the replicated users).  By default
        the tally is rebuilt from the fit and the mechanism from the posterior attrs
        ``mechanism`` and ``mechanism_params`` (a registered mechanism, or the heavy hitters'
        :class:`~bayesldp.heavy_hitters.CandidateOLH` of ``PEM.posterior``); a tally that
        mixes mechanisms (no ``tally.mechanism``) has no predictive distribution:
        :class:`NotSupportedError`.
        For the output of ``pm.sample`` on a model of
        :func:`~bayesldp.bayes.model.build_model` (which keeps no bayesldp attrs), the tally
        that model was built from: ``model=`` or, as PyMC does, the model of the enclosing
        ``with model:`` block.
    random_seed : int, sequence of int, Generator, SeedSequence or None
        Seed of the replicated draws; the same seed gives the same predictions.
    num_draws : int, optional
        How many posterior draws to replicate: ``ceil(num_draws / chains)`` evenly spaced draws
        of every chain (all draws when that is more than there are).  Default 500, enough for
        the plots and p-values and fast where the statistic has a closed form (local hashing
        and subset selection randomise ``n`` users per draw: tens of seconds at n = 100,000).
    model : pymc.Model, optional
        A model of :func:`~bayesldp.bayes.model.build_model` whose tally to use when ``idata``
        came from ``pm.sample`` (default: the model of an enclosing ``with model:`` block).

    Returns
    -------
    arviz.InferenceData
        A new InferenceData (``idata`` is not changed) with the groups of ``idata`` and

        * ``posterior_predictive``: ``stat``, dims ``(chain, draw, category)``; the ``draw``
          coordinate holds the indices of the posterior draws used, so
          ``idata.posterior.theta.sel(draw=pp.draw)`` are their ``theta``;
        * ``observed_data``: only ``stat`` (the observed ``tally.stat``, dim ``category``), so
          that ``az.plot_ppc(idata)`` and ``az.plot_bpv(idata)`` compare exactly this pair
          (ArviZ plots every variable of ``observed_data``);
        * ``constant_data``: also the tally, as ``tally_counts`` (dim ``row``) and
          ``tally_rows`` or ``tally_support`` + ``tally_levels`` (:func:`bayesldp.loo` and this
          function read it there).

    Notes
    -----
    A Bayesian p-value of these replications (``az.plot_bpv``) is not a calibrated test: the
    posterior was fitted to the same tally, so under the right model it piles up near 1/2
    (Bayarri and Berger, "P Values for Composite Null Models", 2000), and for a saturated
    channel (GRR) a wrong epsilon is another ``theta`` of the right one unless that ``theta``
    leaves the simplex.  :func:`~bayesldp.check_mechanism` tests the mechanism and epsilon with
    a p-value free of ``theta`` (unary encoding, THE, local hashing).

    Examples
    --------
    >>> import numpy as np, bayesldp
    >>> mech = bayesldp.GRR(3, 1.0)
    >>> tally = mech.tally(mech.perturb(np.repeat([0, 1, 2], [50, 30, 20]), rng=1))
    >>> idata = bayesldp.fit(tally, method="exact", draws=100, chains=2, random_seed=0)
    >>> ppc = bayesldp.sample_posterior_predictive(idata, random_seed=1, num_draws=50)
    >>> ppc.posterior_predictive["stat"].shape
    (2, 25, 3)
    """
    az = import_arviz()
    import xarray as xr

    from bayesldp.bayes.elpd import _fitted_tally, _model_tally, check_posterior
    from bayesldp.bayes.fit import _resolve_seed
    from bayesldp.bayes.inference_data import _standard_attrs

    check_posterior(idata)
    seed = _resolve_seed(random_seed)
    if tally is None and "mechanism" not in idata.posterior.attrs:
        tally = _model_tally(model)
    fitted = _fitted_tally(idata, tally)
    mechanism = tally.mechanism if tally is not None else _mechanism_of(idata)
    if mechanism is None:
        raise NotSupportedError(
            "tally: it mixes members of a mechanism family (no tally.mechanism), so the "
            "replicated reports have no one mechanism; check each mechanism's tally separately"
        )
    theta_all = np.asarray(idata.posterior["theta"].values, dtype=float)
    chains, draws, k = theta_all.shape
    if k != fitted.k or mechanism.k != k:
        raise InvalidInputError(f"tally: has K = {fitted.k} categories, the fit has {k}")
    index = _draw_index(draws, chains, num_draws)
    theta = theta_all[:, index, :]

    gen = np.random.Generator(np.random.PCG64(np.random.SeedSequence([seed, 0x5050_4300])))
    stats = simulate_stats(mechanism, theta.reshape(-1, k), fitted.n, gen)
    stats = stats.reshape(chains, index.size, k)

    category = idata.posterior["theta"].coords["category"].values
    standard = _standard_attrs()
    predictive = xr.Dataset(
        {VARIABLE: (("chain", "draw", "category"), stats)},
        coords={
            "chain": idata.posterior.coords["chain"].values,
            "draw": idata.posterior.coords["draw"].values[index],
            "category": category,
        },
        attrs={
            **standard,
            "random_seed": int(seed),
            "num_draws": int(chains * index.size),
            "n_reports": int(fitted.n),
            "mechanism": repr(mechanism),
            "definition": "oracle statistic (tally.stat) of n users drawn from theta, "
            "randomised by the mechanism",
        },
    )
    observed = xr.Dataset(
        {VARIABLE: (("category",), np.asarray(fitted.stat, dtype=float))},
        coords={"category": category},
        attrs=standard,
    )
    groups = {name: idata[name] for name in idata.groups()}
    groups["posterior_predictive"] = predictive
    groups["observed_data"] = observed
    groups["constant_data"] = _with_tally(groups.get("constant_data"), fitted, category)
    return az.InferenceData(**groups)


def simulate_stats(
    mechanism: Any, theta: np.ndarray, n: int, rng: np.random.Generator
) -> np.ndarray:
    """Replicated oracle statistics: one row per row of ``theta`` (shape (D, K)), ``n`` users.

    ``c ~ Multinomial(n, theta_d)``, then the statistic of the randomised reports of ``c``
    (closed forms where known, see the module docstring; else ``mechanism.simulate_tally``).
    Returns float64 of shape (D, K).
    """
    from bayesldp.mechanisms.base import FiniteChannelMechanism
    from bayesldp.mechanisms.histogram import SHE, THE
    from bayesldp.mechanisms.unary import UnaryEncoding

    theta = np.clip(np.asarray(theta, dtype=float), 0.0, None)
    theta = theta / theta.sum(axis=1, keepdims=True)
    counts = rng.multinomial(int(n), theta)  # (D, K)
    if isinstance(mechanism, FiniteChannelMechanism):
        return _finite_channel_stats(mechanism, counts, rng)
    if isinstance(mechanism, UnaryEncoding | THE):
        p, q = float(mechanism.p_star), float(mechanism.q_star)
        return (rng.binomial(counts, p) + rng.binomial(n - counts, q)).astype(float)
    if isinstance(mechanism, SHE):
        noise = rng.standard_gamma(float(n), size=counts.shape)
        noise -= rng.standard_gamma(float(n), size=counts.shape)
        return counts + mechanism.scale * noise
    out = np.empty(counts.shape, dtype=float)
    for d in range(counts.shape[0]):
        out[d] = mechanism.simulate_tally(counts[d], rng).stat
    return out


def _finite_channel_stats(
    mechanism: Any, counts: np.ndarray, rng: np.random.Generator
) -> np.ndarray:
    """Report counts ``sum_x Multinomial(c_x, P[x])`` per draw, then the oracle statistic."""
    channel = np.asarray(mechanism.channel, dtype=float)
    pvals = channel / channel.sum(axis=1, keepdims=True)
    d, k = counts.shape
    block = max(1, _BLOCK // max(1, channel.size))
    out = np.empty((d, k), dtype=float)
    for start in range(0, d, block):
        stop = min(d, start + block)
        reports = rng.multinomial(counts[start:stop], pvals).sum(axis=1)  # (B, K, m) -> (B, m)
        for i, report_counts in enumerate(reports, start=start):
            out[i] = mechanism.tally_from_report_counts(report_counts).stat
    return out


def _draw_index(draws: int, chains: int, num_draws: object) -> np.ndarray:
    """``ceil(num_draws / chains)`` evenly spaced draw indices (all draws if fewer)."""
    if num_draws is None:
        num_draws = DEFAULT_NUM_DRAWS
    if isinstance(num_draws, bool) or not isinstance(num_draws, numbers.Integral):
        raise InvalidTypeError(f"num_draws: expected a positive int or None, got {num_draws!r}")
    if num_draws < 1:
        raise InvalidInputError(f"num_draws: must be >= 1, got {num_draws}")
    per_chain = min(draws, math.ceil(int(num_draws) / chains))
    return np.unique(np.linspace(0, draws - 1, per_chain).round().astype(np.int64))


def _rebuild(name: str, params: dict[str, Any]) -> Any:
    """A registered mechanism from its params, or the heavy hitters' ``CandidateOLH`` (not in
    the registry: its categories are found codes) from its ``values``, ``epsilon``, ``g`` and
    ``other`` (``k`` follows from them)."""
    from bayesldp.mechanisms.registry import rebuild_mechanism

    if name == "CandidateOLH":
        from bayesldp.heavy_hitters.candidates import CandidateOLH

        return CandidateOLH(params["values"], params["epsilon"], params["g"],
                            other=params["other"])  # fmt: skip
    return rebuild_mechanism(name, params)


def _mechanism_of(idata: Any) -> Any:
    """The fit's mechanism, rebuilt from the posterior attrs ``mechanism`` and its params."""
    import json

    attrs = idata.posterior.attrs
    text = str(attrs.get("mechanism", "None"))
    if text == "None":
        return None
    name = text.split("(", 1)[0]
    try:
        return _rebuild(name, json.loads(attrs["mechanism_params"]))
    except (KeyError, ValueError, TypeError) as exc:
        raise NotSupportedError(
            f"idata: cannot rebuild the mechanism {text} from the fit's attrs ({exc}); pass "
            "tally= (the tally that was fitted)"
        ) from exc


def _with_tally(constant: Any, tally: Tally, category: np.ndarray) -> Any:
    """``constant_data`` with the tally as ``tally_counts``, ``tally_rows`` / ``tally_support``
    and ``tally_levels`` (kept as they are if already there)."""
    import xarray as xr

    data: dict[str, Any] = {"tally_counts": (("row",), tally.counts)}
    coords: dict[str, Any] = {"row": np.arange(tally.n_rows), "category": category}
    if tally.is_support_form:
        data["tally_support"] = (("row", "category"), tally.support)
        data["tally_levels"] = (("level",), np.asarray(tally.levels, dtype=float))
        coords["level"] = ["lo", "hi"]
    else:
        data["tally_rows"] = (("row", "category"), tally.rows)
    extra = xr.Dataset(data, coords=coords)
    if constant is None:
        return extra
    stale = [name for name in (*extra.data_vars, "row", "level") if name in constant.variables]
    kept = constant.drop_vars(stale)
    merged = xr.merge([kept, extra], combine_attrs="override")
    merged.attrs = dict(constant.attrs)
    return merged


__all__ = ["DEFAULT_NUM_DRAWS", "VARIABLE", "sample_posterior_predictive", "simulate_stats"]
