"""Stopping a survey when its answer is good enough (``AdaptiveSurvey.simulate(stop=...)``).

A target is checked at every refresh of the posterior pool (:mod:`bayesldp.adaptive.pool`), and
the survey stops at the first refresh where the posterior it returns meets it: the target is
measured on the draws of ``posterior()`` (its default fit, all chains stacked), the very object
``posterior()`` then returns.  The pool's 100 draws only screen: a refresh whose pool misses the
target is not refitted.  They are not the measure, because a stop chosen on a noisy
estimate overshoots it: stopping where the pool met a width of 0.08 (K = 5), the returned
posterior's width was up to 0.084.  The targets:

* ``{"width": w}``: the largest 90% equal-tailed interval of a category, ``max_x (q95_x - q5_x)``;
* ``{"expected_tv": t}``: the posterior expected total variation of the posterior mean,
  ``E[TV(theta, E theta)] = E[1/2 sum_x |theta_x - E theta_x|]`` (the Bayes risk of the mean in
  TV, estimated from the pool's draws);
* ``{"cs_width": w}``: the widest of the categories' anytime-valid 90% confidence sequences
  (:mod:`bayesldp.adaptive.confseq`: betting, on each user's unbiased estimate under its own
  channel), a frequentist rule beside the Bayesian ones: each sequence covers its category at
  every refresh at once with probability at least 0.9, so it covers at the stop whatever the
  population and whatever the rule; it is wider than the posterior's interval for the same
  reports, the price of that guarantee.

Why a Bayesian rule keeps its coverage: the posterior depends on the reports only through the
likelihood, and a stopping time that looks only at the reports so far multiplies the likelihood
by a factor free of theta (the likelihood principle), so the posterior given "stopped at n" is
the posterior given those n reports; averaged over populations from the prior, its 90% intervals
cover 90% whatever the rule.  Under a fixed population the coverage is measured, not assumed
(``benchmarks/results/survey_stopping.md``).  The checks are as frequent as the refreshes
(``refresh``, 25% growth by default), so a survey may run past the first user where the target
would have been met by up to that fraction; a smaller ``refresh`` checks more often.  A survey
that runs out of users without meeting the target warns by how much ``posterior()`` misses it.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

from bayesldp._validation import check_positive
from bayesldp.errors import InvalidInputError, InvalidTypeError, StoppingWarning

MEASURES = ("width", "expected_tv", "cs_width")
#: the miscoverage of each category's confidence sequence under the ``cs_width`` rule
CS_ALPHA = 0.1


@dataclass(frozen=True)
class StopRule:
    """A stopping target: ``measure`` (one of :data:`MEASURES`) at most ``target``."""

    measure: str
    target: float

    @classmethod
    def parse(cls, stop: Any) -> StopRule | None:
        """None, a one-entry dict ``{measure: target}`` or a StopRule."""
        if stop is None or isinstance(stop, StopRule):
            return stop
        if not isinstance(stop, dict):
            raise InvalidTypeError(
                f"stop: expected None or a dict such as {{'width': 0.05}}, got {stop!r}"
            )
        if len(stop) != 1 or next(iter(stop)) not in MEASURES:
            raise InvalidInputError(
                f"stop: give one target, {{'width': w}} (the largest 90% interval), "
                f"{{'expected_tv': t}} (the posterior expected TV) or {{'cs_width': w}} (the "
                f"widest 90% confidence sequence), got {stop!r}"
            )
        measure, target = next(iter(stop.items()))
        return cls(measure, check_positive(target, f"stop[{measure!r}]"))

    def value(self, draws: np.ndarray) -> float:
        """The measure on posterior draws of shape (D, K)."""
        if self.measure == "width":
            lo, hi = np.quantile(draws, [0.05, 0.95], axis=0)
            return float((hi - lo).max())
        return float(0.5 * np.abs(draws - draws.mean(axis=0)).sum(axis=1).mean())

    def describe(self) -> str:
        name = {"width": "the largest 90% interval", "expected_tv": "the expected TV",
                "cs_width": "the widest 90% confidence sequence"}[self.measure]  # fmt: skip
        return f"{name} <= {self.target:g}"


def theta_draws(idata: Any) -> np.ndarray:
    """The draws of ``idata.posterior["theta"]``, chains stacked: shape (chains * draws, K)."""
    theta = np.asarray(idata.posterior["theta"].values, dtype=float)
    return theta.reshape(-1, theta.shape[-1])


class SurveyStopping:
    """The stop checks of ``AdaptiveSurvey.simulate`` (mixed into the survey class)."""

    def confidence_sequences(
        self, alpha: float = CS_ALPHA, target_width: float | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Each category's anytime-valid ``1 - alpha`` confidence sequence after the reports so
        far, ``(lower, upper)`` (:class:`~bayesldp.adaptive.confseq.BettingConfidenceSequences`
        over the recorded users, each with its own RRRR channel): valid at any stopping time,
        however the subsets were chosen.  ``target_width``: the width a stop rule waits for
        (its bets are tuned to it; the ``cs_width`` rule passes its target).

        Examples
        --------
        >>> import numpy as np
        >>> from bayesldp.adaptive import AdaptiveSurvey
        >>> x = np.random.default_rng(0).choice(3, size=3000, p=[0.6, 0.3, 0.1])
        >>> survey = AdaptiveSurvey(3, 1.0, random_seed=0).simulate(x)
        >>> lower, upper = survey.confidence_sequences()
        >>> bool(np.all(lower <= upper))
        True
        """
        history = self.history
        masks, reports = history["subset"].values, history["report"].values
        looks = self.__dict__.setdefault("_sequence_looks", {})
        key = (float(alpha), target_width)
        if key not in looks or looks[key].users > len(reports):
            looks[key] = _SequenceLooks(self.k, self.epsilon, self.eps1, alpha, target_width)
        return looks[key].look(masks, reports).intervals()

    def _measure(self, rule: StopRule) -> float:
        """``rule``'s measure now: on ``posterior()``'s draws, or the confidence sequences' width
        for ``cs_width``."""
        if rule.measure == "cs_width":
            lower, upper = self.confidence_sequences(target_width=rule.target)
            return float((upper - lower).max())
        return rule.value(theta_draws(self._returned_posterior(progressbar=False)))

    def _pool_value(self, rule: StopRule) -> float | None:
        """``rule``'s measure on the pool's draws (none for ``cs_width``)."""
        return None if rule.measure == "cs_width" else rule.value(self._pool.draws)

    def _met(self, rule: StopRule) -> bool:
        """Whether ``posterior()`` meets ``rule`` now (screened by the pool's draws; the
        confidence sequences for ``cs_width``).

        If it does, :attr:`stopped` records where, the value on ``posterior()``'s draws
        (``"value"``) and on the pool's (``"pool_value"``).
        """
        pool_value = self._pool_value(rule)
        if pool_value is not None and pool_value > rule.target:
            return False
        value = self._measure(rule)
        if value > rule.target:
            return False
        self.stopped = {"users": self._n, "measure": rule.measure, "target": rule.target,
                        "value": value, "pool_value": pool_value}  # fmt: skip
        return True

    def _end_unmet(self, rule: StopRule, total: int) -> None:
        """At the last user of ``total``: stopped there if ``posterior()`` meets ``rule``, else a
        :class:`~bayesldp.errors.StoppingWarning` says by how much it misses."""
        value = self._measure(rule)
        if value <= rule.target:
            self.stopped = {"users": self._n, "measure": rule.measure, "target": rule.target,
                            "value": value, "pool_value": self._pool_value(rule)}  # fmt: skip
            return
        measured = "the confidence sequences" if rule.measure == "cs_width" else "posterior()"
        warnings.warn(
            f"stop: {rule.describe()} was not met within the {total:,} users given "
            f"({value:.4g} for {measured} at {self._n:,} reports, {value - rule.target:.4g} "
            "over the target); the survey ended at the last user",
            StoppingWarning,
            stacklevel=3,
        )


class _SequenceLooks:
    """A survey's confidence sequences kept between its looks: the epochs already complete are
    not recomputed, and each subset's RRRR channel is built once (in order of first use)."""

    def __init__(self, k: int, epsilon: float, eps1: float, alpha: float,
                 target_width: float | None) -> None:  # fmt: skip
        from bayesldp.adaptive.confseq import EpochedSequences

        self.k, self.epsilon, self.eps1 = k, epsilon, eps1
        self.sequences = EpochedSequences(k, alpha, target_width=target_width)
        self.index: dict[bytes, int] = {}
        self.channels: list[np.ndarray] = []
        self.codes = np.empty(0, dtype=np.int64)
        self.users = 0

    def look(self, masks: np.ndarray, reports: np.ndarray) -> Any:
        """The sequences after every recorded user (``masks``: their subsets)."""
        from bayesldp.mechanisms.rrrr import RRRR

        new = np.asarray(masks[self.users :], dtype=bool)
        subsets, of_user = np.unique(new, axis=0, return_inverse=True)
        for mask in subsets:
            if mask.tobytes() not in self.index:
                self.index[mask.tobytes()] = len(self.channels)
                chosen = np.flatnonzero(mask).tolist()
                self.channels.append(RRRR(self.k, self.epsilon, chosen, eps1=self.eps1).channel)
        indices = np.array([self.index[mask.tobytes()] for mask in subsets], dtype=np.int64)
        codes = indices[of_user.ravel()] * self.k + np.asarray(reports[self.users :])
        self.codes = np.concatenate([self.codes, codes])
        self.users = len(reports)
        return self.sequences.look(self.channels, self.codes)
