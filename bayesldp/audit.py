"""Empirical privacy auditing of LDP mechanisms.

In the style of LDP auditing (Arcolezi & Gambs 2023; Jagielski et al. 2020): perturb two inputs
``x0`` and ``x1`` many times, count how often a distinguishing event ``E`` occurs, and turn the
Clopper-Pearson bounds on ``Pr[E | x0]`` and ``Pr[E | x1]`` into a lower bound on epsilon,

.. math:: \\hat\\varepsilon_{\\mathrm{lb}} = \\log \\frac{\\underline{p_0}}{\\overline{p_1}},

which holds with confidence ``1 - alpha``.  A correct eps-LDP mechanism gives a lower bound below
eps (with probability at least ``1 - alpha``); a broken one is caught when the bound exceeds it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats

from bayesldp._validation import RNGLike, as_generator, check_memory, check_probability
from bayesldp.errors import InvalidInputError
from bayesldp.mechanisms.base import Mechanism


@dataclass(frozen=True)
class AuditResult:
    """Outcome of :func:`audit`.

    Examples
    --------
    What :func:`audit` returns:

    >>> import bayesldp
    >>> from bayesldp.audit import audit
    >>> result = audit(bayesldp.GRR(3, 1.0), trials=2000, rng=0)
    >>> result.epsilon, round(result.epsilon_lower_bound, 3), result.hits_x0, result.hits_x1
    (1.0, 0.788, 1145, 419)
    """

    mechanism: str
    epsilon: float
    epsilon_lower_bound: float
    hits_x0: int
    hits_x1: int
    trials: int
    alpha: float

    @property
    def passed(self) -> bool:
        """True when the audit found no evidence of a privacy loss above epsilon."""
        return self.epsilon_lower_bound <= self.epsilon


def clopper_pearson(hits: int, trials: int, alpha: float) -> tuple[float, float]:
    """Two-sided ``1 - alpha`` Clopper-Pearson interval for a binomial proportion.

    Examples
    --------
    Exact 95% interval for 5 hits in 100 trials:

    >>> from bayesldp.audit import clopper_pearson
    >>> tuple(round(v, 4) for v in clopper_pearson(5, 100, 0.05))
    (0.0164, 0.1128)
    """
    lower = 0.0 if hits == 0 else float(stats.beta.ppf(alpha / 2, hits, trials - hits + 1))
    upper = 1.0 if hits == trials else float(stats.beta.ppf(1 - alpha / 2, hits + 1, trials - hits))
    return lower, upper


def audit(
    mechanism: Mechanism,
    x0: int = 0,
    x1: int = 1,
    *,
    trials: int = 200_000,
    alpha: float = 1e-3,
    rng: RNGLike = None,
) -> AuditResult:
    """Empirical lower bound on the epsilon of ``mechanism`` from ``trials`` runs per input.

    The event is ``mechanism.audit_event(reports, x0, x1)``: the reports that favour ``x0``
    most strongly over ``x1``.  Both directions (x0 vs x1 and x1 vs x0) are tested and the larger
    bound is returned, at overall confidence ``1 - alpha`` (Bonferroni over the two).

    Examples
    --------
    An empirical lower bound on GRR's epsilon, below the claimed 1.0:

    >>> import bayesldp
    >>> from bayesldp.audit import audit
    >>> result = audit(bayesldp.GRR(3, 1.0), trials=2000, rng=0)
    >>> round(result.epsilon_lower_bound, 3), result.epsilon_lower_bound <= result.epsilon
    (0.788, True)
    """
    if trials < 1:
        raise InvalidInputError(f"trials: must be >= 1, got {trials}")
    alpha = check_probability(alpha, "alpha")
    check_memory(32.0 * trials, f"trials: {trials:,} perturbations per input (values, reports "
                 "and events of every trial at once)",
                 "use fewer trials (the bound's precision grows as sqrt(trials))")  # fmt: skip
    if x0 == x1 or not (0 <= x0 < mechanism.k and 0 <= x1 < mechanism.k):
        raise InvalidInputError(f"x0, x1: need two different categories in 0..{mechanism.k - 1}")
    gen = as_generator(rng)
    best, best_hits = -math.inf, (0, 0)
    for a, b in ((x0, x1), (x1, x0)):
        rep_a = mechanism.perturb(mechanism.category_values(np.full(trials, a)), gen)
        rep_b = mechanism.perturb(mechanism.category_values(np.full(trials, b)), gen)
        hits_a = int(np.count_nonzero(mechanism.audit_event(rep_a, a, b)))
        hits_b = int(np.count_nonzero(mechanism.audit_event(rep_b, a, b)))
        low_a, _ = clopper_pearson(hits_a, trials, alpha / 2)
        _, up_b = clopper_pearson(hits_b, trials, alpha / 2)
        bound = math.log(low_a / up_b) if low_a > 0 else -math.inf
        if bound > best:
            best, best_hits = bound, (hits_a, hits_b)
    return AuditResult(repr(mechanism), mechanism.epsilon, best, *best_hits, trials, alpha)
