"""The survey's in-loop posterior: draws of the exact posterior, refreshed as reports grow.

The default engine of :class:`~bayesldp.adaptive.AdaptiveSurvey` (``engine="posterior"``) picks
each batch's subset from one draw of a *pool*: ``pool_draws`` draws of the posterior of theta
given every report recorded at the pool's last refresh, under the survey's exact likelihood (each
report through the RRRR channel of the subset it was made with) and its prior, sampled by
:func:`bayesldp.fit` (``method="hmc"``, one chain, ``pool_tune`` warm-up iterations).  The pool is
refreshed at the first batch boundary where the survey holds at least

.. math:: n_{next} = \\max\\big(K,\\ \\lceil (1 + r)\\, n_{last} \\rceil\\big)

reports (``r = refresh``), a geometric schedule: ``log(n / K) / log(1 + r)`` fits for ``n``
users (46 for n = 500,000, K = 20, r = 0.25), each on the merged tally (distinct likelihood rows),
so the cost does not grow with the number of users.  Batch ``b`` uses draw
``j_b ~ U{0, .., pool_draws - 1}`` from its own stream (stream 1 of the batch: the SGLD engine's,
unused here), so a resumed survey picks the same draws.  Before the first refresh the pool holds
prior draws.

Each refresh also records the trajectory (:attr:`AdaptiveSurvey.history`): the number of
reports and each category's posterior mean and 5% / 95% quantiles of the pool.

Why not the SGLD of AdOBEst-LDP (Aydın and Yıldırım, "Bayesian Frequency Estimation Under Local
Differential Privacy With an Adaptive Randomized Response Mechanism", ACM TKDD 2025): with its
step ``0.5 / n`` the SGLD draw lags the posterior by a fixed number of users and its final run is
close to one lagged draw, so its intervals are far too narrow (on sparse populations its 90%
intervals held 0-50% of the true frequencies, ``benchmarks/results/survey_posterior.md``); the
pool's draws are those of the package's calibrated sampler, lagging the reports
by at most the fraction ``r``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numba import njit

from bayesldp.adaptive import _kernels as kn

#: the stream of the refresh fits' seeds (batch b's refresh: seed (b, REFRESH_STREAM))
REFRESH_STREAM = 65534
#: the stream that picks batch b's draw from the pool
PICK_STREAM = 1


class PosteriorPool:
    """Posterior draws refreshed on a geometric schedule, and the trajectory they trace.

    Parameters
    ----------
    k : int
        Number of categories.
    refresh : float
        Refresh once the reports have grown by this fraction since the last refresh (> 0).
    draws, tune : int
        Draws kept and warm-up iterations of each refresh fit (one HMC chain).
    """

    def __init__(self, k: int, refresh: float, draws: int, tune: int) -> None:
        self.k = k
        self.refresh_rate = refresh
        self.n_draws = draws
        self.tune = tune
        self.draws = np.empty((draws, k))
        self.users = 0  # reports at the last refresh (0: prior draws)
        self.trajectory_users = np.empty(0, dtype=np.int64)
        self.trajectory = np.empty((0, 3, k))  # (refresh, [mean, 5%, 95%], category)
        self.size = 0  # the lookahead rule's |S| (bayesldp.adaptive.lookahead); 0 = GRR
        self.size_users = 0  # reports when it was chosen (0: not yet)

    # ------------------------------------------------------------------ schedule
    def next_refresh(self) -> int:
        """The number of reports at which the next refresh is due."""
        return max(self.k, math.ceil((1.0 + self.refresh_rate) * self.users))

    def due(self, n: int) -> bool:
        """Whether a survey holding ``n`` reports refreshes now."""
        return n >= self.next_refresh()

    # ------------------------------------------------------------------ draws
    def start(self, prior: Any, rng: np.random.Generator) -> None:
        """Fill the pool with prior draws (before any report)."""
        self.draws[:] = prior.sample(self.n_draws, rng=rng)

    def refresh(self, tally: Any, prior: Any, seed: int) -> None:
        """Refit the pool on all reports so far (:func:`posterior_draws`: fit's HMC draws
        without its InferenceData, which a survey refitting dozens of times does not need) and
        append to the trajectory."""
        self.draws[:] = posterior_draws(tally, prior, self.n_draws, self.tune, seed)
        self.users = int(tally.n)
        stats = np.stack([self.draws.mean(axis=0), *np.quantile(self.draws, [0.05, 0.95], axis=0)])
        self.trajectory_users = np.append(self.trajectory_users, self.users)
        self.trajectory = np.concatenate([self.trajectory, stats[None]])

    def pick(self, key0: np.uint64, key1: np.uint64, batch: int) -> np.ndarray:
        """The draw batch ``batch`` selects its subset from."""
        return self.draws[pick_index(key0, key1, batch, self.n_draws)].copy()

    # ------------------------------------------------------------------ persistence
    def state_arrays(self) -> dict[str, np.ndarray]:
        """What a checkpoint stores of the pool."""
        return {
            "pool": self.draws.copy(),
            "pool_users": np.array(self.users, dtype=np.int64),
            "trajectory_users": self.trajectory_users.copy(),
            "trajectory": self.trajectory.copy(),
            "pool_size": np.array([self.size, self.size_users], dtype=np.int64),
        }

    def restore(self, arrays: dict[str, np.ndarray], n: int, bad: Any) -> None:
        """Adopt :meth:`state_arrays` output, checked against ``n`` reports (``bad`` raises)."""
        try:
            draws = np.asarray(arrays["pool"], dtype=float)
            users = int(np.asarray(arrays["pool_users"]))
            t_users = np.asarray(arrays["trajectory_users"], dtype=np.int64)
            traj = np.asarray(arrays["trajectory"], dtype=float)
            size, size_users = (int(v) for v in np.asarray(arrays["pool_size"]))
        except (KeyError, ValueError):
            raise bad("the posterior pool is missing") from None
        if draws.shape != (self.n_draws, self.k) or not np.all(np.isfinite(draws)):
            raise bad("posterior pool")
        if not 0 <= users <= n or traj.shape != (t_users.shape[0], 3, self.k):
            raise bad("posterior trajectory")
        if not (0 <= size < self.k and 0 <= size_users <= n):
            raise bad("lookahead subset size")
        self.size, self.size_users = size, size_users
        self.draws[:] = draws
        self.users = users
        self.trajectory_users = t_users
        self.trajectory = traj


# ------------------------------------------------------------------------------ kernels
@njit(cache=True)
def pick_index(key0, key1, batch, n_draws):  # pragma: no cover - compiled
    """``j_b``: the pool draw of batch ``batch`` (stream :data:`PICK_STREAM`)."""
    st = np.empty(4, np.uint64)
    sp = np.zeros(2)
    kn.seed_stream(st, sp, key0, key1, batch, PICK_STREAM)
    return kn._randint(st, n_draws)


@njit(cache=True)
def run_simulate_pool(x, u0, b0, batch_sizes, selection, pool, store, theta_hist, keys):
    """Simulate consecutive batches (select from ``theta_hist[b]``, perturb, store, pick).

    ``selection = (code, alpha, params, order, rank)``; ``keys = (key0, key1)``.  Batch ``b``
    selects its subset from ``theta_hist[b]`` and sets ``theta_hist[b + 1]`` to the pool draw
    of batch ``b + 1``.  Returns the number of batches done: it stops early, at a batch
    boundary, when the subset or row tables might overflow (the caller grows them and calls
    again).
    """  # pragma: no cover - compiled
    key0, key1 = keys
    k = pool.shape[1]
    st = np.empty(4, np.uint64)
    sp = np.zeros(2)
    buf = np.empty(k)
    mask = np.zeros(k, np.bool_)
    u = u0
    i = 0
    for bi in range(batch_sizes.shape[0]):
        size = batch_sizes[bi]
        if not kn.has_room(store, size, k):
            return bi
        b = b0 + bi
        theta = theta_hist[b].copy()
        kn.survey_batch(x[i : i + size], u, b, theta, selection, store, key0, key1, st, sp, buf,
                        mask)  # fmt: skip
        i += size
        u += size
        theta_hist[b + 1] = pool[pick_index(key0, key1, b + 1, pool.shape[0])]
    return batch_sizes.shape[0]


def posterior_draws(tally: Any, prior: Any, draws: int, tune: int, seed: int) -> np.ndarray:
    """``fit(tally, draws, tune=tune, chains=1, prior=prior, method="hmc", random_seed=seed)``'s
    draws of theta, shape (draws, K), from the package's NUTS without building an
    InferenceData (``prior``: a Dirichlet or the adaptive prior)."""
    from bayesldp.bayes import hmc
    from bayesldp.bayes.prior import Dirichlet

    target = prior.alpha.copy() if isinstance(prior, Dirichlet) else prior
    out = hmc.sample(tally, target, draws=draws, chains=1, random_seed=seed, tune=tune)
    return out.theta[0]
