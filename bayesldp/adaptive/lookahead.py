"""The ``lookahead`` rule: the subset size whose estimate would err least, by simulation.

The utilities of AdOBEst-LDP (Aydın and Yıldırım, "Bayesian Frequency Estimation Under Local
Differential Privacy With an Adaptive Randomized Response Mechanism", ACM TKDD 2025) score one
report at one draw of theta.  U1 (Fisher) asks the question that
matters for the final estimate -- which channel, used by every user, gives the smallest
asymptotic error -- but its trace of the inverse Fisher information weighs the categories near
0 as if their estimates could go negative, and it prefers plain GRR everywhere on the paper's
grid.  Yet with theta known, one top-s subset beats GRR by far on sparse populations
(benchmarks/investigations/results/survey_oracle.md).  This rule asks the oracle's question under
the posterior, with the uncertainty the survey really has about which categories are on top:

.. math:: e_{js} = \\mathrm{TV}\\big(\\hat\\theta_{\\mathrm{MLE}}(Y^{(j, s)}),
          \\theta^{(j)}\\big), \\qquad g_{js} = e_{j0} - e_{js},

``theta^(j)`` the truth (one of ``J`` draws of the survey's posterior pool, or by default their
mean: below), ``Y^(j, s)``
the reports of ``N`` users drawn from ``theta^(j)`` through the RRRR of ``S`` = the top ``s`` of
*another* draw ``theta^(j+1)`` (the survey picks ``S`` from a draw of its own, never from the
truth; ``s = 0`` is GRR at the full budget), the same users for every ``s`` (common random
numbers).  The rule takes

.. math:: s^* = \\arg\\min_{s \\in A} \\bar e_{\\cdot s}, \\qquad
          A = \\{0\\} \\cup \\{s : \\bar g_{\\cdot s} > 2\\, \\mathrm{se}(\\bar g_{\\cdot s})\\},

so a subset replaces GRR only where its simulated gain is larger than twice its standard error
over the draws: the minimum of ``K`` noisy scores is biased towards a spurious winner, and GRR
is what a survey that does not know better should do.  ``N`` is twice the reports so far (the
users this choice governs: the next choice comes when the reports have doubled) or
``n_expected`` if larger; it depends on the survey's state alone, so a survey resumed or
simulated in pieces chooses alike.  Each batch then uses the top ``s*`` categories of its own
pool draw, so which categories enter ``S`` still follows the posterior.  The choice is made at
the pool's refreshes where the reports have doubled since the last choice (15 choices for
500,000 users at K = 20), each ``J K`` simulated MLEs.

The per-size admission tests ``K - 1`` sizes on the draws that also pick the best, with no
correction: the winner's gain is biased upward.  ``test="split"`` removes that: ``2 J`` draws,
the size chosen on the first ``J`` (the smallest mean error), then one test of its gain over
GRR on the other ``J`` (admitted above ``MARGIN_SE`` standard errors), and GRR while the
survey holds fewer than ``K^2`` reports (too few for a posterior that tells which categories
are on top).

Taking each ``theta^(j)`` from the pool (``truth="draws"``) makes the simulated gain vary
with how much the draws differ as well as with the simulated reports; at small budgets, where
the draws differ most, its standard error hides gains that are there (on the paper's sparse
cells at eps <= 1 that rule stayed near GRR in 33 of 80 populations where a fixed size of 2
would have gained: ``docs/design_notes.md``).  The survey's default, ``truth="mean"``, takes
the pool's mean as every ``theta^(j)`` and draw ``j`` as the guide: the survey's estimate of
the population as the truth, its uncertainty about which categories are on top kept in the
guides (benchmarks/results/survey_adaptive_gain.md measures it against GRR on the paper's
grid).

The MLE is not what the survey reports: its posterior mean, under the adaptive prior, already
shrinks the empty categories, which is where a subset helps the MLE most.  ``now=(tally,
prior)`` (``AdaptiveSurvey(..., lookahead_score="posterior")``) scores that estimate instead:

.. math:: e_{js} = \\mathrm{TV}\\big(E[\\theta \\mid R, Y^{(j, s)}], \\theta^{(j)}\\big),

the posterior mean given the survey's reports so far ``R`` and the ``N - n`` simulated users
still to come before the horizon (one short run of the package's NUTS, 100 draws after 100
warm-up iterations, the same seed for every ``s`` of a draw): the expected error of the
reported estimate under the calibrated posterior, at ``J K`` fits per choice.
"""

from __future__ import annotations

from typing import Any

import numpy as np

#: posterior draws per choice (each the truth once and the ordering once)
N_DRAWS = 8
#: a subset must beat GRR by this many standard errors of the simulated gain
MARGIN_SE = 2.0
#: draws (and warm-up iterations) of each fit of the posterior score
FIT_DRAWS = 100


def lookahead_size(
    draws: np.ndarray,
    epsilon: float,
    eps1: float,
    horizon: int,
    rng: np.random.Generator,
    *,
    test: str = "per_size",
    users: int | None = None,
    now: tuple[Any, Any] | None = None,
    truth: str = "draws",
) -> int:
    """``s*`` for the pool ``draws`` (shape (D, K)) at ``horizon`` users (module docstring);
    ``test="split"`` needs ``users``, the reports so far; ``now``: the survey's tally and prior,
    to score the posterior mean instead of the MLE; ``truth="mean"``: the pool's mean as the
    simulated truth."""
    if test == "split":
        return _split_size(draws, epsilon, eps1, horizon, rng, users, now, truth)
    errors = simulated_errors(draws, epsilon, eps1, horizon, rng, now=now, truth=truth)
    gain = errors[:, :1] - errors
    se = gain.std(axis=0, ddof=1) / np.sqrt(gain.shape[0])
    admitted = gain.mean(axis=0) > MARGIN_SE * se
    admitted[0] = True
    mean = np.where(admitted, errors.mean(axis=0), np.inf)
    return int(np.flatnonzero(mean <= mean.min() * (1 + 1e-12))[0])


def _split_size(draws: np.ndarray, epsilon: float, eps1: float, horizon: int,
                rng: np.random.Generator, users: int | None,
                now: tuple[Any, Any] | None, truth: str) -> int:  # fmt: skip
    """The split-half choice: the size chosen on half of ``2 J`` draws, tested on the rest."""
    k = draws.shape[1]
    if users is None or users < k * k:
        return 0
    errors = simulated_errors(draws, epsilon, eps1, horizon, rng, n_draws=2 * N_DRAWS, now=now,
                              truth=truth)  # fmt: skip
    choose, check = errors[::2], errors[1::2]  # interleaved: both halves span the pool
    size = int(np.argmin(choose.mean(axis=0)))
    if size == 0:
        return 0
    gain = check[:, 0] - check[:, size]
    return size if gain.mean() > MARGIN_SE * gain.std(ddof=1) / np.sqrt(gain.size) else 0


def simulated_errors(
    draws: np.ndarray,
    epsilon: float,
    eps1: float,
    horizon: int,
    rng: np.random.Generator,
    n_draws: int = N_DRAWS,
    now: tuple[Any, Any] | None = None,
    truth: str = "draws",
) -> np.ndarray:
    """``e_{js}`` of the module docstring, shape (``n_draws``, K): the MLE's error, or with
    ``now = (tally, prior)`` the posterior mean's after the survey's reports; ``truth="mean"``:
    every ``theta^(j)`` is the pool's mean and draw ``j`` is the guide."""
    from bayesldp.adaptive.selection import candidate_channels
    from bayesldp.tally import Tally

    k = draws.shape[1]
    picks = np.linspace(0, draws.shape[0] - 1, n_draws).round().astype(int)
    thetas = np.maximum(draws[picks], 0.0)
    thetas /= thetas.sum(axis=1, keepdims=True)
    errors = np.zeros((n_draws, k))
    coming = horizon if now is None else max(horizon - now[0].n, 1)
    family = "rrrr" if now is None else now[0].family  # a survey's tally names its RRRR
    if truth == "mean":
        mean = np.maximum(draws, 0.0).mean(axis=0)
        guides, thetas = thetas, np.broadcast_to(mean / mean.sum(), thetas.shape)
    else:
        guides = np.roll(thetas, -1, axis=0)
    for j, theta in enumerate(thetas):
        guide = guides[j]
        channels = candidate_channels(np.argsort(-guide, kind="stable"), epsilon, eps1)
        users = rng.multinomial(coming, theta)
        seed = int(rng.integers(2**62)) if now is not None else None
        for s in range(k):
            reports = rng.multinomial(users, channels[s]).sum(axis=0)
            seen = reports > 0
            tally = Tally(reports[seen], rows=channels[s].T[seen], stat=reports.astype(float),
                          family=family)  # fmt: skip
            errors[j, s] = 0.5 * np.abs(_estimate(tally, now, seed) - theta).sum()
    return errors


def _estimate(simulated: Any, now: tuple[Any, Any] | None, seed: int | None) -> np.ndarray:
    """The MLE of the simulated reports, or the posterior mean after ``now``'s and them."""
    if now is None:
        from bayesldp.estimators.mle import mle

        return mle(simulated, std_errors=False).frequencies
    from bayesldp.adaptive.pool import posterior_draws

    tally, prior = now
    return posterior_draws(tally + simulated, prior, FIT_DRAWS, FIT_DRAWS, seed).mean(axis=0)
