"""The posterior of the sample's own frequencies ``f``, beside the population's ``theta``.

Lopuhaä-Zwakenberg, Li, Škorić and Li ("Improving Frequency Estimation under Local Differential
Privacy", WPES 2020) pose two problems: the distribution ``theta`` the users were drawn from,
and the actual frequencies ``f`` of the values in the sample of ``n`` users who reported.  A
survey of a closed group (a team, a class, a company) wants ``f``; at small ``n`` the two
differ by the sampling error of ``n`` draws from ``theta``, which ``theta``'s intervals include
and ``f``'s do not.

Given ``theta`` and the reports, the users' true values are independent, and a user whose
report has likelihood row ``L_u`` holds ``x`` with probability ``theta_x L_u[x] / (L_u .
theta)``.  So for each posterior draw ``theta_s`` the counts of the ``c_u`` users of tally row
``u`` are drawn from ``Multinomial(c_u, theta_s * L_u / (L_u . theta_s))`` and summed over the
rows; ``f_s`` is that sum over ``n``.  The pairs ``(theta_s, f_s)`` are then draws of the joint
posterior, exact wherever the ``theta`` draws are (``method="exact"``), and the posterior mean
of ``f`` is the paper's optimal (least squares) estimator of the sample frequencies.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from bayesldp._validation import check_memory
from bayesldp.errors import InvalidInputError

if TYPE_CHECKING:
    import arviz

    from bayesldp.tally import Tally

__all__ = ["VARIABLE", "sample_shares"]

#: the name of the sample's frequencies in the returned posterior
VARIABLE = "f"
#: floats of one block of conditional probabilities (draws x rows x categories)
_BLOCK = 1 << 21


def sample_shares(idata: arviz.InferenceData, tally: Tally | None = None, *,
                  random_seed: Any = None) -> arviz.InferenceData:  # fmt: skip
    """The fit with the posterior of the sample's own frequencies ``f`` beside ``theta``.

    For every posterior draw ``theta_s`` and tally row ``u`` (``c_u`` reports with likelihood
    row ``L_u``), the true values of those users are drawn from their exact conditional,
    ``Multinomial(c_u, theta_s * L_u / (L_u . theta_s))``; ``f_s`` is the sum over the rows
    divided by ``n`` (Lopuhaä-Zwakenberg et al. 2020: the module docstring).  Use ``f`` for
    the shares of the group that reported, ``theta`` for the population it was drawn from.

    Parameters
    ----------
    idata : arviz.InferenceData
        A fit from :func:`bayesldp.fit` of categories (any method and prior).
    tally : Tally, optional
        The tally that was fitted; by default rebuilt from the fit.
    random_seed : int, Generator, SeedSequence or None
        Seed of the conditional draws; the same seed gives the same ``f``.

    Returns
    -------
    arviz.InferenceData
        A new InferenceData (``idata`` is not changed) whose posterior also holds ``f``, dims
        ``(chain, draw, category)``, each draw a multiple of ``1/n`` summing to 1.

    Examples
    --------
    >>> import bayesldp
    >>> tally = bayesldp.GRR(3, 1.0).simulate_tally([6, 3, 1], rng=4)
    >>> idata = bayesldp.fit(tally, method="exact", prior=1.0, draws=500, random_seed=0)
    >>> both = bayesldp.sample_shares(idata, random_seed=1)
    >>> f = both.posterior["f"].values
    >>> f.shape, bool(((f * 10) % 1 == 0).all())  # ten users: shares in tenths
    ((4, 500, 3), True)
    """
    from bayesldp.bayes._arviz import import_arviz
    from bayesldp.bayes.elpd import _fitted_tally, check_posterior
    from bayesldp.bayes.fit import _resolve_seed
    from bayesldp.likelihood import Likelihood

    az = import_arviz()
    check_posterior(idata)
    fitted = _fitted_tally(idata, tally)
    theta = np.asarray(idata.posterior["theta"].values, dtype=float)
    chains, draws, k = theta.shape
    if k != fitted.k:
        raise InvalidInputError(f"tally: has K = {fitted.k} categories, the fit has {k}")
    check_memory(8.0 * chains * draws * k, "the sample's frequencies", "thin the draws")
    seed = _resolve_seed(random_seed)
    gen = np.random.Generator(np.random.PCG64(np.random.SeedSequence([seed, 0x5341_4D50])))
    counts = _true_counts(Likelihood(fitted), fitted.counts, theta.reshape(-1, k), gen)
    f = (counts / fitted.n).reshape(chains, draws, k)
    posterior = idata.posterior.assign({VARIABLE: (("chain", "draw", "category"), f)})
    posterior[VARIABLE].attrs["definition"] = (
        "the frequencies of the values of the n users who reported (the sample), drawn from "
        "their conditional given theta and the reports"
    )
    posterior.attrs = {**idata.posterior.attrs, "sample_shares_seed": int(seed)}
    groups = {name: idata[name] for name in idata.groups()}
    groups["posterior"] = posterior
    return az.InferenceData(**groups)


def _true_counts(lik: Any, row_counts: np.ndarray, theta: np.ndarray,
                 gen: np.random.Generator) -> np.ndarray:  # fmt: skip
    """Per draw (rows of ``theta``), the users' true values drawn given their reports: the
    counts, shape ``(D, K)``; in blocks of rows and draws of at most ``_BLOCK`` floats."""
    n_draws, k = theta.shape
    total = np.zeros((n_draws, k), dtype=np.int64)
    rows_per_block = max(1, min(lik.n_rows, _BLOCK // k))
    for start in range(0, lik.n_rows, rows_per_block):
        idx = np.arange(start, min(start + rows_per_block, lik.n_rows))
        rows = lik.rows_at(idx)  # (B, K)
        users = np.asarray(row_counts[idx], dtype=np.int64)
        step = max(1, _BLOCK // (idx.size * k))
        for d in range(0, n_draws, step):
            weights = theta[d : d + step, None, :] * rows[None, :, :]  # (Dc, B, K)
            norm = weights.sum(axis=-1, keepdims=True)
            if np.any(norm <= 0.0):
                raise InvalidInputError("idata: a posterior draw gives a report probability 0; "
                                        "the fit does not belong to this tally")  # fmt: skip
            weights /= norm
            total[d : d + step] += gen.multinomial(users[None, :], weights).sum(axis=1)
    return total
