"""A GRR survey of the same users, coupled with an adaptive survey's reports.

To compare an adaptive survey with plain GRR on the same users, the GRR reports are drawn
coupled with the survey's: a user whose batch used the channel ``P_R = RRRR(S)`` and reported
``y`` keeps ``y`` as its GRR report with probability ``min(P_G, P_R)(y) / P_R(y)`` (``P_G`` the
GRR row of its true value), else draws from the normalised residual ``(P_G - P_R)^+``.  Each
GRR report then has exactly GRR's law,

.. math::

    P(y') = \\min(P_G, P_R)(y') + \\Big(1 - \\sum_y \\min(P_G, P_R)(y)\\Big)
            \\frac{(P_G - P_R)^+(y')}{\\sum_y (P_G - P_R)^+(y)} = P_G(y'),

and agrees with the survey's report as often as any two reports with these laws can (the
maximal coupling).  A user whose batch used ``S = {}`` (RRRR is then GRR) keeps its report,
so a survey that never adapts reads exactly 1.0 against its baseline: the comparison measures
the design, not the independent noise of a second randomisation.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def coupled_grr_reports(k: int, epsilon: float, eps1: float, x: np.ndarray, y: np.ndarray,
                        subsets: np.ndarray, gen: np.random.Generator) -> np.ndarray:  # fmt: skip
    """GRR reports of the users ``x`` coupled with their RRRR reports ``y`` (module docstring).

    ``subsets`` is the boolean mask of each user's subset, shape ``(n, k)`` (the survey's
    ``history["subset"]``).
    """
    from bayesldp import GRR, RRRR

    grr = np.asarray(GRR(k, epsilon).channel, dtype=float)
    out = np.array(y, dtype=np.int64, copy=True)
    masks, which = np.unique(np.asarray(subsets, dtype=bool), axis=0, return_inverse=True)
    for j, mask in enumerate(masks):
        users = np.flatnonzero(which.ravel() == j)
        rrrr = np.asarray(RRRR(k, epsilon, np.flatnonzero(mask), eps1=eps1).channel, float)
        xs, ys = x[users], out[users]
        p_r, p_g = rrrr[xs, ys], grr[xs, ys]
        moved = users[gen.random(users.size) * p_r >= np.minimum(p_g, p_r)]
        if not moved.size:
            continue
        residual = np.clip(grr - rrrr, 0.0, None)
        cdf = np.cumsum(residual[x[moved]], axis=1)
        u = gen.random(moved.size) * cdf[:, -1]
        out[moved] = np.minimum((cdf <= u[:, None]).sum(axis=1), k - 1)
    return out


def grr_tally_like_survey(k: int, epsilon: float, reports: np.ndarray) -> Any:
    """GRR ``reports`` as the tally an adaptive survey builds of its own reports.

    The rows are ``RRRR(k, epsilon, ())``'s channel columns, which equal GRR's, in the survey's
    merged RRRR family (``AdaptiveSurvey.tally``): the same likelihood as ``GRR(k,
    epsilon).tally(reports)``, and, where the survey never adapted, the same tally as the
    survey's own, bit for bit, so a fit of each with one seed gives the same draws.
    """
    from bayesldp import RRRR, Tally

    mech = RRRR(k, epsilon, ())
    counts = np.bincount(np.asarray(reports, dtype=np.int64), minlength=k)
    channel = np.asarray(mech.channel, dtype=float)
    return Tally(counts, rows=channel.T, stat=counts.astype(float), family=mech.family)
