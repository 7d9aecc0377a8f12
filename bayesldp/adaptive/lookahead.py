"""The ``lookahead`` rule: the subset size whose estimate would err least, by simulation.

Seed 004's utilities score one report at one draw of theta.  U1 (Fisher) asks the question that
matters for the final estimate -- which channel, used by every user, gives the smallest
asymptotic error -- but its trace of the inverse Fisher information weighs the categories near
0 as if their estimates could go negative, and it prefers plain GRR everywhere on the paper's
grid.  Yet with theta known, one top-s subset beats GRR by far on sparse populations
(benchmarks/results/survey_oracle.md).  This rule asks the oracle's question under the posterior:

.. math:: s^* = \\arg\\min_{s} \\frac{1}{J}\\sum_{j=1}^{J}
          \\mathrm{TV}\\big(\\hat\\theta_{\\mathrm{MLE}}(Y^{(j, s)}),\\ \\theta^{(j)}\\big),

``theta^(j)`` ``J`` draws of the survey's posterior pool, ``Y^(j, s)`` the reports of ``N``
users drawn from ``theta^(j)`` through the RRRR of ``S = the top s of theta^(j)`` (``s = 0``:
GRR at the full budget, an honest candidate), the same users for every ``s`` (common random
numbers), ties to the smaller ``s``.  ``N`` is twice the reports so far (the users this choice
governs: the next choice comes when the reports have doubled) or ``n_expected`` if larger; it
depends on the survey's state alone, so a survey resumed or simulated in pieces chooses alike.
Each batch then uses the top ``s*`` categories of its own pool draw, so which categories enter
``S`` still follows the posterior.  The choice is made at the pool's refreshes where the
reports have doubled since the last choice (15 choices for 500,000 users at K = 20), each
``J K`` simulated MLEs.
"""

from __future__ import annotations

import numpy as np

#: posterior draws per choice
N_DRAWS = 4


def lookahead_size(
    draws: np.ndarray, epsilon: float, eps1: float, horizon: int, rng: np.random.Generator
) -> int:
    """``s*`` for the pool ``draws`` (shape (D, K)) at ``horizon`` users (module docstring)."""
    from bayesldp.adaptive.selection import candidate_channels
    from bayesldp.estimators.mle import mle
    from bayesldp.tally import Tally

    k = draws.shape[1]
    picks = np.linspace(0, draws.shape[0] - 1, N_DRAWS).round().astype(int)
    errors = np.zeros(k)
    for theta in draws[picks]:
        theta = np.maximum(theta, 0.0) / np.maximum(theta, 0.0).sum()
        channels = candidate_channels(np.argsort(-theta, kind="stable"), epsilon, eps1)
        users = rng.multinomial(horizon, theta)
        for s in range(k):
            reports = rng.multinomial(users, channels[s]).sum(axis=0)
            seen = reports > 0
            tally = Tally(reports[seen], rows=channels[s].T[seen], stat=reports.astype(float),
                          family="rrrr")  # fmt: skip
            est = mle(tally, std_errors=False).frequencies
            errors[s] += 0.5 * np.abs(est - theta).sum()
    best = errors.min()
    return int(np.flatnonzero(errors <= best * (1 + 1e-12))[0])
