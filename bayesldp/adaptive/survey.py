"""AdOBEst-LDP: the adaptive online survey with RRRR (Aydın and Yıldırım, "Bayesian Frequency
Estimation Under Local Differential Privacy With an Adaptive Randomized Response Mechanism", ACM
TKDD 2025, Algorithm 2).

The loop, for batches ``b = 0, 1, ...`` of users (one user per batch in the paper):

1. subset selection: from the current posterior draw ``theta_b`` pick ``S_b`` (the top-s set of
   a size chosen by a rule: the ``lookahead`` rule, :mod:`bayesldp.adaptive.lookahead`; one of
   the paper's six utilities, :mod:`bayesldp.adaptive.selection`; or a semi-/non-adaptive rule);
2. each user ``t`` of the batch reports ``Y_t = RRRR(X_t; S_b, eps)`` (``eps1 = eps1_fraction *
   eps``, ``eps2`` from the paper's formula, so every report is eps-LDP);
3. the draw is refreshed by the engine: ``"posterior"`` (default) takes a draw of a pool of draws
   of the exact posterior of all reports, refitted by bayesldp's HMC whenever the reports have
   grown by 25% (:mod:`bayesldp.adaptive.pool`); ``"sgld"`` runs the paper's warm-started SGLD
   (:mod:`bayesldp.adaptive.sgld`), whose draw lags the reports; ``"fit"`` draws once from
   :func:`bayesldp.fit` after every batch.

:meth:`AdaptiveSurvey.posterior` is :func:`bayesldp.fit` of the survey's reports (each through
the channel of its subset); ``posterior(engine="sgld")`` the paper's final SGLD run.  The loops
are compiled with numba (:mod:`bayesldp.adaptive._kernels`); reports are stored as ids of
distinct likelihood rows.

Durability and reproducibility.  Every batch ``b`` draws its random numbers from fresh streams
seeded from ``(survey key, b)`` (see :mod:`bayesldp.adaptive._kernels`), so the state after a
batch (reports, subsets, ``phi``, draws, counters and the seed) determines everything that
follows.  With ``checkpoint=path`` that state is written after every batch (numpy ``.npz`` with a
format tag, a version and a SHA-256 checksum; written to ``path.tmp``, fsync'ed, then
``os.replace``'d, so the file is always either the previous or the new complete state).
:meth:`AdaptiveSurvey.resume` continues it: a survey killed at any point and resumed ends
bit-identical to an uninterrupted one with the same seed; a report is *accepted* once
:meth:`AdaptiveSurvey.record` returns (its batch is on disk); ``record(..., batch=i)`` makes a
retry after a crash idempotent (a batch already saved is recognised, not recorded twice).  A
corrupt, truncated or foreign file raises :class:`CheckpointError`, never a silent restart.  One
process may write a given checkpoint at a time.  Each checkpoint rewrites the whole state (4 bytes
per report plus K floats per batch), so long surveys should checkpoint batches of hundreds or
thousands of users rather than single users.
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from bayesldp._validation import check_int, check_values
from bayesldp.adaptive import _kernels as kn
from bayesldp.adaptive import sgld
from bayesldp.adaptive.checkpoint import CheckpointError
from bayesldp.adaptive.config import ENGINES, SurveyConfig
from bayesldp.adaptive.lookahead import lookahead_size
from bayesldp.adaptive.pool import REFRESH_STREAM, PosteriorPool, run_simulate_pool
from bayesldp.adaptive.selection import candidate_params, subset_masks
from bayesldp.adaptive.stopping import StopRule, SurveyStopping
from bayesldp.adaptive.store import ReportStore, grown
from bayesldp.adaptive.survey_outputs import SurveyOutputs
from bayesldp.adaptive.survey_state import SurveyState
from bayesldp.errors import (
    InvalidInputError,
    InvalidTypeError,
    NotSupportedError,
)
from bayesldp.mechanisms.rrrr import RRRR

if TYPE_CHECKING:
    pass

__all__ = ["ENGINES", "AdaptiveSurvey", "CheckpointError"]


class AdaptiveSurvey(SurveyOutputs, SurveyState, SurveyStopping):
    """An AdOBEst-LDP survey: adaptive RRRR subsets chosen from posterior draws (Aydın and
    Yıldırım 2025).

    Parameters
    ----------
    k : int
        Number of categories K (>= 2).
    epsilon : float
        Privacy budget of every report (each RRRR used is epsilon-LDP).
    utility : str or None
        ``"lookahead"`` (the default with ``engine="posterior"``, which it needs: ``|S|`` is the
        size whose MLE would err least by simulation under posterior draws, GRR included,
        :mod:`bayesldp.adaptive.lookahead`), ``"fisher"`` (the default of the other engines),
        ``"entropy"``, ``"expected_tv"``, ``"tv"``, ``"mse"``, ``"honest"`` (U1..U6 of the paper;
        also ``"U1"`` to ``"U6"``), ``"semi_adaptive"`` (``eps1 = eps``, ``S`` the smallest top
        set of mass ``>= alpha``) or ``"non_adaptive"`` (plain GRR).
    alpha : float, optional
        The semi-adaptive mass threshold in (0, 1] (required for, and only for,
        ``"semi_adaptive"``; ``alpha = 1`` is plain SRR).
    eps1_fraction : float
        ``eps1 = eps1_fraction * epsilon``, in (0, 1] (paper: 0.8 or 0.9); unused by the semi-
        (``eps1 = eps``) and non-adaptive rules.
    prior : None, "adaptive", AdaptiveDirichlet, float, array_like or Dirichlet
        The prior of theta.  None: the engine's default, the adaptive prior
        (:class:`~bayesldp.bayes.AdaptiveDirichlet`, :func:`bayesldp.fit`'s default) for the
        posterior engines, ``Dirichlet(1)`` for the SGLD.  The SGLD needs a fixed Dirichlet
        ``rho`` (its latent ``phi_i ~ Gamma(rho_i, 1)``); the paper's update moves theta by
        about ``sqrt(gamma) / sum(phi)`` per step and ``sum(phi) ~ Gamma(sum rho)``, so a prior
        of small total mass makes its steps erratic.
    engine : {"posterior", "sgld", "fit"}
        How the draw each subset is selected from is made.  ``"posterior"`` (default): one draw
        of a pool of draws of the exact posterior of all reports so far (``bayesldp.fit``'s HMC,
        one chain of ``pool_draws`` draws after ``pool_tune`` warm-up iterations), refreshed
        when the reports have grown by the fraction ``refresh``
        (:mod:`bayesldp.adaptive.pool`); each refresh adds the posterior's mean and 90% band to
        :attr:`history`.  ``"sgld"``: the paper's compiled per-user SGLD, whose draw lags the
        reports (see Notes).  ``"fit"``: at every batch boundary the new draw is one draw of
        :func:`bayesldp.fit` (``fit_method``) given all reports so far (for a few large
        batches).
    batch_size : int
        Users per batch (>= 1): one subset per batch, SGLD after the batch, one checkpoint per
        batch.  The paper's loop is ``batch_size = 1``.
    sgld_steps_per_user, minibatch : int
        SGLD updates per arriving user (paper: 20) and minibatch size (50, with replacement).
    step_size : float, optional
        Constant SGLD step ``gamma`` (> 0); default ``0.5 / n_expected`` (reference code).
    n_expected : int, optional
        Planned number of users, for the default step size.
    final_steps, burn_in : int
        Final SGLD run of :meth:`posterior`: ``final_steps`` updates per chain of which the
        first ``burn_in`` are discarded (paper: 2000 and 1000).
    random_seed : int, SeedSequence, Generator or None
        Seed of everything random (the initial draw, the users' randomisation, SGLD); None
        draws fresh entropy, recorded in the state so the survey can be resumed exactly.
    checkpoint : str or PathLike, optional
        Path of the state file written after every batch (must not exist yet; continue an
        existing one with :meth:`resume`).
    fit_method : str
        The :func:`bayesldp.fit` method of :meth:`posterior` and of ``engine="fit"`` (default
        ``"auto"``).
    refresh, pool_draws, pool_tune : float, int, int
        ``engine="posterior"``'s schedule (refresh once the reports have grown by this
        fraction, > 0; default 0.25) and the size of each refresh fit (100 draws after 200
        warm-up iterations).
    lookahead_test : str
        How the ``lookahead`` rule admits a subset over GRR: ``"per_size"`` (each size tested
        against GRR on the same simulations that chose it, the default) or ``"split"`` (the
        size chosen on half of the simulated draws and tested once against GRR on the other
        half, and no subset before ``K^2`` reports; :mod:`bayesldp.adaptive.lookahead`).
    lookahead_score : str
        Which estimate's simulated error the ``lookahead`` rule minimises: ``"mle"`` (the MLE of
        the simulated reports alone, the default) or ``"posterior"`` (the posterior mean that
        :meth:`posterior` would report after the survey's reports and the simulated ones, one
        short fit per draw and size: several times the default's simulation time).
    lookahead_truth : str
        What the ``lookahead`` rule simulates as the population: ``"mean"`` (the posterior
        pool's mean every time, each pool draw ordering the categories for ``S``; the default)
        or ``"draws"`` (each pool draw in turn, the rule before 2026-11-30, which adapted less
        on sparse populations; :mod:`bayesldp.adaptive.lookahead`).  A checkpoint written
        before the option existed resumes with ``"draws"``.

    Notes
    -----
    With the paper's (correct) ``eps2``, U1 (``fisher``, minus the trace of the inverse Fisher
    information of the first K-1 coordinates) preferred ``S`` empty -- plain GRR -- for every
    population drawn on the paper's grid (K in {10, 20}, rho in {0.01, 0.1, 1}, eps in
    {0.5, 1, 5}, eps1 in {0.8, 0.9} eps; 200 draws each), so a ``fisher`` survey is in effect
    non-adaptive; U2-U6 do adapt (benchmarks/results/adobest_grid.md).

    The SGLD contracts towards the posterior at a rate ``~ gamma n F / sum(phi)^2`` per update
    (``F`` the information of one report), which with ``gamma = 0.5 / n`` does not grow with
    ``n``: the draw lags the posterior by a fixed number of users, and the final 2000 updates
    barely move it, so its final run (``posterior(engine="sgld")``) is close to one lagged draw
    (its spread is not the posterior's; its coverage and the default engine's are in
    benchmarks/results/survey_posterior.md).  :meth:`posterior` is therefore
    ``bayesldp.fit(survey.tally())`` by default, whatever the engine.

    Speed: benchmarks/results/survey_speed.md (n = 500,000, K = 20, one user per batch): the
    default engine took 22.7 s whole process with compiled kernels cached, 1.28x the paper's
    SGLD engine in the same run.

    Examples
    --------
    >>> import numpy as np
    >>> from bayesldp.adaptive import AdaptiveSurvey
    >>> x = np.random.default_rng(0).choice(5, size=2000, p=[0.6, 0.2, 0.1, 0.07, 0.03])
    >>> survey = AdaptiveSurvey(5, 1.0, utility="tv", random_seed=1).simulate(x)
    >>> survey.history["report"].shape, survey.tally().n
    ((2000,), 2000)
    """

    def __init__(
        self,
        k: int,
        epsilon: float,
        *,
        utility: str | None = None,
        alpha: float | None = None,
        eps1_fraction: float = 0.8,
        prior: Any = None,
        engine: str = "posterior",
        batch_size: int = 1,
        sgld_steps_per_user: int = 20,
        minibatch: int = 50,
        step_size: float | None = None,
        n_expected: int | None = None,
        final_steps: int = 2000,
        burn_in: int = 1000,
        random_seed: Any = None,
        checkpoint: str | os.PathLike[str] | None = None,
        fit_method: str = "auto",
        refresh: float = 0.25,
        pool_draws: int = 100,
        pool_tune: int = 200,
        lookahead_test: str = "per_size",
        lookahead_score: str = "mle",
        lookahead_truth: str = "mean",
    ) -> None:
        self._setup(
            SurveyConfig.create(
                k=k,
                epsilon=epsilon,
                utility=utility,
                alpha=alpha,
                eps1_fraction=eps1_fraction,
                prior=prior,
                engine=engine,
                batch_size=batch_size,
                sgld_steps_per_user=sgld_steps_per_user,
                minibatch=minibatch,
                step_size=step_size,
                n_expected=n_expected,
                final_steps=final_steps,
                burn_in=burn_in,
                fit_method=fit_method,
                refresh=refresh,
                pool_draws=pool_draws,
                pool_tune=pool_tune,
                lookahead_test=lookahead_test,
                lookahead_score=lookahead_score,
                lookahead_truth=lookahead_truth,
                random_seed=random_seed,
            )
        )
        path = None if checkpoint is None else Path(os.fspath(checkpoint))
        if path is not None and path.exists():
            raise CheckpointError(
                f"checkpoint: {str(path)!r} already exists; continue that survey with "
                "AdaptiveSurvey.resume(path) or choose a new path"
            )
        self._checkpoint = path
        self.stopped: dict[str, Any] | None = None  # where the last simulate(stop=...) stopped
        self._final: tuple[int, Any] | None = None  # posterior()'s default fit, with its users
        # initial draw theta_0: a draw of the prior
        seq = np.random.SeedSequence(self.config.entropy, spawn_key=(*self.config.spawn_key, 1))
        gen = np.random.default_rng(seq)
        self._theta_hist = np.empty((16, self.k))
        if self.engine == "posterior":
            self._pool.start(self.prior, gen)
            self._theta_hist[0] = self._pool.pick(self._key0, self._key1, 0)
            self._phi = self._theta_hist[0] * self._rho.sum()
        else:
            phi = gen.gamma(self._rho)
            if not (np.all(np.isfinite(phi)) and phi.sum() > 0):
                phi = self._rho.copy()  # all draws underflowed (tiny rho): the prior mean instead
            self._phi = phi
            kn.normalise(self._phi, self._theta_hist[0])
        self._batch_sizes = np.empty(16, dtype=np.int64)
        self._n_batches = 0
        self._n = 0
        self._store = ReportStore(self.k)
        self._order = np.arange(self.k)
        self._rank = np.arange(self.k)
        if path is not None:
            self.save()

    # ------------------------------------------------------------------ configuration
    def _setup(self, config: SurveyConfig) -> None:
        """Adopt a validated config and derive the constants (shared with :meth:`resume`)."""
        self.config = config
        self._rho = config.rho
        self._pool = PosteriorPool(config.k, config.refresh, config.pool_draws, config.pool_tune)
        self._code = kn.RULE_CODES[config.utility]
        self._params = candidate_params(config.k, config.epsilon, config.eps1)
        self._key0, self._key1 = config.stream_keys()

    # the settings, read from the config
    k = property(lambda self: self.config.k, doc="Number of categories K.")
    epsilon = property(lambda self: self.config.epsilon, doc="Budget of every report.")
    utility = property(lambda self: self.config.utility, doc="The subset rule (canonical name).")
    alpha = property(lambda self: self.config.alpha, doc="Semi-adaptive mass threshold or None.")
    eps1_fraction = property(lambda self: self.config.eps1_fraction, doc="eps1 / epsilon.")
    eps1 = property(lambda self: self.config.eps1, doc="RRRR's first-stage budget.")
    prior = property(lambda self: self.config.dirichlet, doc="The Dirichlet prior of theta.")
    engine = property(lambda self: self.config.engine, doc='"posterior", "sgld" or "fit".')
    batch_size = property(lambda self: self.config.batch_size, doc="Users per batch.")
    sgld_steps_per_user = property(lambda self: self.config.sgld_steps_per_user)
    minibatch = property(lambda self: self.config.minibatch, doc="SGLD minibatch size.")
    final_steps = property(lambda self: self.config.final_steps, doc="Final SGLD updates.")
    burn_in = property(lambda self: self.config.burn_in, doc="Final updates discarded.")
    fit_method = property(lambda self: self.config.fit_method, doc='engine="fit"\'s method.')

    @property
    def gamma(self) -> float | None:
        """The SGLD step ``gamma`` (None until fixed; see ``step_size``/``n_expected``)."""
        return self.config.gamma

    def _require_gamma(self, planned: int | None) -> float:
        if self.config.gamma is None and planned is not None:
            self.config = self.config.with_n_expected(planned)
        if self.config.gamma is None:
            raise InvalidInputError(
                "step_size: record() needs the SGLD step; give step_size= or n_expected= (the "
                "planned number of users; gamma = 0.5 / n_expected) when creating the survey"
            )
        return self.config.gamma

    def _sgld(self, gamma: float) -> tuple:
        """The SGLD settings the kernels read (``sgld`` in :mod:`bayesldp.adaptive._kernels`)."""
        return (self.minibatch, gamma, self._rho, math.sqrt(gamma) / 2, self._key0, self._key1)

    # ------------------------------------------------------------------ state
    @property
    def n_users(self) -> int:
        """Reports recorded so far."""
        return self._n

    @property
    def n_batches(self) -> int:
        """Batches recorded so far."""
        return self._n_batches

    @property
    def theta(self) -> np.ndarray:
        """The current posterior draw (the one the next subset is selected from)."""
        return self._theta_hist[self._n_batches].copy()

    @property
    def checkpoint(self) -> Path | None:
        """The state file written after every batch, or None."""
        return self._checkpoint

    def _select(self) -> int:
        theta = self._theta_hist[self._n_batches]
        buf = np.empty(self.k)
        return int(
            kn.choose(
                theta,
                self._order,
                self._rank,
                self._code,
                self._rule_param(),
                self._params,
                buf,
            )
        )

    def next_subset(self) -> RRRR:
        """The RRRR mechanism the next batch of users must use (``S`` from the current draw).

        Clients perturb with it (``mech.perturb(x)``) and the server passes the reports to
        :meth:`record` together with ``mech.subset``.
        """
        s = self._select()
        subset = sorted(int(v) for v in self._order[:s])
        return RRRR(self.k, self.epsilon, subset, eps1=self.eps1)

    def record(self, reports: Any, subsets: Any = None, *, batch: int | None = None) -> bool:
        """Record one batch of client reports (``Y = RRRR(X; S, eps)`` computed by the clients).

        Parameters
        ----------
        reports : array_like of int, shape (B,)
            The randomised reports, categories ``0..K-1``.
        subsets : optional
            The subsets the clients used: None (the current :meth:`next_subset`), one subset for
            all (a sequence of categories, an :class:`~bayesldp.RRRR` or a boolean mask of shape
            (K,)), one subset per report (a sequence of B sequences) or a boolean (B, K) array.
        batch : int, optional
            The index this batch must get (``n_batches`` before the call).  Makes retries
            idempotent: if the process died after the batch was saved but before the caller
            learnt it, re-sending it with the same ``batch`` after :meth:`resume` checks that
            the stored batch holds the same reports and subsets and records nothing (returns
            False); a different batch under a recorded index, or an index beyond the next,
            raises.

        Returns
        -------
        bool
            True when the batch was recorded, False when it was already there.

        The batch is stored, the posterior draw updated (``sgld_steps_per_user * B`` SGLD steps)
        and, with a checkpoint, written to disk before this returns.
        """
        y = check_values(reports, self.k, "reports")
        if subsets is None:
            subsets = self.next_subset()
        masks = subset_masks(subsets, y.shape[0], self.k, self.epsilon, self.eps1)
        if batch is not None:
            index = check_int(batch, "batch", 0)
            if index > self._n_batches:
                raise InvalidInputError(
                    f"batch: the next batch is {self._n_batches}, got {index} (batches "
                    f"{self._n_batches}..{index - 1} are missing)"
                )
            if index < self._n_batches:
                start = int(self._batch_sizes[:index].sum())
                size = int(self._batch_sizes[index])
                sid, stored = self._reports_view()
                same = (
                    size == y.shape[0]
                    and np.array_equal(stored[start : start + size], y)
                    and np.array_equal(self._store.sub_mask[sid[start : start + size]], masks)
                )
                if not same:
                    raise InvalidInputError(
                        f"batch: batch {index} is already recorded with other reports or "
                        "subsets; refusing to overwrite or duplicate it"
                    )
                return False
        gamma = self._require_gamma(None) if self.engine == "sgld" else 0.0
        b = self._n_batches
        n_new = y.shape[0]
        self._store.ensure(self._n + n_new, n_new, n_new)
        self._store.add(y, masks, self._n, self._params)
        self._finish_batch(b, n_new, gamma)
        return True

    def _finish_batch(self, b: int, n_new: int, gamma: float) -> None:
        self._theta_hist = grown(self._theta_hist, b + 2)
        self._batch_sizes = grown(self._batch_sizes, b + 1)
        t = self._n + n_new
        if self.engine == "sgld":
            steps = self.sgld_steps_per_user * n_new
            sgld.run_sgld_batch(self._phi, self._store.sgld_rows(), t, steps, b, self._sgld(gamma),
                              self._theta_hist[b + 1])  # fmt: skip
        elif self.engine == "posterior":
            self._n = t
            self._refresh_pool(b + 1)
            self._n = t - n_new
        else:
            draw = self._fit_draws(t, draws=1, chains=1, stream=1, batch=b)
            self._phi = np.asarray(draw.posterior["theta"].values[0, 0], dtype=float).copy()
            kn.normalise(self._phi, self._theta_hist[b + 1])
        self._check_state(b)
        self._batch_sizes[b] = n_new
        self._n = t
        self._n_batches = b + 1
        if self._checkpoint is not None:
            self.save()

    def _check_state(self, b: int) -> None:
        if not (np.all(np.isfinite(self._phi)) and self._phi.sum() > 0):
            raise NotSupportedError(
                f"SGLD diverged at batch {b} (phi = {self._phi.tolist()}); use a smaller step_size"
            )

    def simulate(
        self,
        x: Any,
        progress: bool | Callable[[int, int], None] | None = None,
        *,
        stop: Any = None,
    ) -> AdaptiveSurvey:
        """Run the survey on the true values ``x`` (users in order; appended to the survey).

        Parameters
        ----------
        x : array_like of int, shape (n,)
            True categories of the arriving users, split into batches of ``batch_size``.
        progress : bool or callable, optional
            True prints progress to stderr; a callable gets ``(users_done, users_total)``.
        stop : dict, optional
            Stop at the first refresh of the posterior pool where a target is met:
            ``{"width": w}`` (the largest 90% interval of a category at most ``w``) or
            ``{"expected_tv": t}`` (the posterior expected TV of the posterior mean at most
            ``t``) or ``{"cs_width": w}`` (every category's anytime-valid 90% confidence
            sequence, :meth:`confidence_sequences`, at most ``w`` wide: coverage at the stop
            guaranteed, not only on average over populations);
            :mod:`bayesldp.adaptive.stopping`.  ``engine="posterior"`` only.  The
            target is measured on the draws of :meth:`posterior` (its default ``draws`` and
            ``chains``, all chains stacked), and that same posterior is what ``posterior()``
            then returns: a survey that says it stopped on target hands back a posterior that
            meets it (the measured value is ``stopped["value"]``).  Where it is met,
            :attr:`stopped` says at which report and the remaining users of ``x`` are not
            surveyed; where it is not, the survey ends at the last user and a
            :class:`~bayesldp.errors.StoppingWarning` says by how much ``posterior()`` misses
            the target.  A survey whose last refresh already meets the target (one resumed
            from the checkpoint of a survey that stopped) surveys no one: :attr:`stopped` says
            where it stopped.

        Returns
        -------
        AdaptiveSurvey
            ``self`` (so ``AdaptiveSurvey(...).simulate(x).posterior()`` works).
        """
        x = check_values(x, self.k, "x")
        rule = StopRule.parse(stop)
        if rule is not None and self.engine != "posterior":
            raise InvalidInputError(
                f"stop: needs engine='posterior' (its pool is what is checked), got "
                f"engine={self.engine!r}"
            )
        self.stopped = None
        if rule is not None and self._n and self._pool.users == self._n and self._met(rule):
            return self  # met at the last refresh already: a resumed survey that had stopped
        total = x.shape[0]
        gamma = self._require_gamma(self._n + total) if self.engine == "sgld" else 0.0
        report = _progress_callback(progress)
        sizes = np.full(total // self.batch_size, self.batch_size, dtype=np.int64)
        if total % self.batch_size:
            sizes = np.append(sizes, total % self.batch_size)
        if self._checkpoint is not None or self.engine == "fit":
            chunk = 1  # one batch per call: the state is saved / a fit runs after each batch
        elif report is not None:
            chunk = max(1, sizes.shape[0] // 50)
        else:
            chunk = sizes.shape[0]
        start_user = self._n
        done = 0  # batches of this call
        while done < sizes.shape[0]:
            part = sizes[done : done + chunk]
            if self.engine == "fit":
                self._simulate_fit_batch(x[self._n - start_user :][: int(part[0])])
                done += 1
            else:
                if self.engine == "posterior":
                    part = self._until_refresh(part)
                done += self._simulate_batches(x, start_user, part, gamma)
            if report is not None:
                report(self._n - start_user, total)
            if rule is not None and self._pool.users == self._n and self._met(rule):
                return self  # just refreshed, and the target is met
        if rule is not None:
            self._end_unmet(rule, total)
        return self

    def _simulate_batches(
        self, x: np.ndarray, start_user: int, part: np.ndarray, gamma: float
    ) -> int:
        """Run the compiled loop of the engine ("sgld" or "posterior") over the batches ``part``
        of ``x``; returns how many it did (it stops early when the store's tables are full)."""
        st = self._store
        b0 = self._n_batches
        n_part = int(part.sum())
        st.ensure(self._n + n_part, 1, min(n_part, self.k))
        self._theta_hist = grown(self._theta_hist, b0 + part.shape[0] + 1)
        self._batch_sizes = grown(self._batch_sizes, b0 + part.shape[0])
        xs = x[self._n - start_user :][:n_part]
        selection = (self._code, self._rule_param(), self._params, self._order, self._rank)
        if self.engine == "sgld":
            n_done = sgld.run_simulate(xs, self._n, b0, part, selection, self._phi, st.tables(),
                                     self._theta_hist, self.sgld_steps_per_user,
                                     self._sgld(gamma))  # fmt: skip
            self._check_state(b0 + n_done)
        else:
            n_done = run_simulate_pool(xs, self._n, b0, part, selection, self._pool.draws,
                                       st.tables(), self._theta_hist,
                                       (self._key0, self._key1))  # fmt: skip
        self._batch_sizes[b0 : b0 + n_done] = part[:n_done]
        self._n += int(part[:n_done].sum())
        self._n_batches = b0 + n_done
        if n_done and self.engine == "posterior":
            self._refresh_pool(self._n_batches)
        if n_done and self._checkpoint is not None:
            self.save()
        return n_done

    def _until_refresh(self, part: np.ndarray) -> np.ndarray:
        """The leading batches of ``part`` up to the one that makes the pool's refresh due."""
        reached = self._n + np.cumsum(part) >= self._pool.next_refresh()
        return part[: int(np.argmax(reached)) + 1] if reached.any() else part

    def _rule_param(self) -> float:
        """The rule's number for the kernels: ``alpha``, or the lookahead rule's ``|S|``."""
        return float(self._pool.size) if self.utility == "lookahead" else float(self.alpha or 1.0)

    def _refresh_pool(self, b: int) -> None:
        """Refit the pool if due (``b``: the next batch) and pick batch ``b``'s draw."""
        pool = self._pool
        if pool.due(self._n):
            seed = int(kn.derive_seed(self._key0, self._key1, b, REFRESH_STREAM))
            pool.refresh(self.tally(), self.prior, seed)
            if self.utility == "lookahead" and (
                pool.size_users == 0 or self._n >= 2 * pool.size_users
            ):
                # the users this choice governs: until the reports double (or n_expected)
                horizon = max(self.config.n_expected or 0, 2 * self._n)
                rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(1,)))
                config = self.config
                now = (self.tally(), self.prior) if config.lookahead_score == "posterior" else None
                pool.size = lookahead_size(pool.draws, self.epsilon, self.eps1, horizon, rng,
                                           test=config.lookahead_test, users=self._n,
                                           now=now, truth=config.lookahead_truth)  # fmt: skip
                pool.size_users = self._n
        self._theta_hist[b] = self._pool.pick(self._key0, self._key1, b)
        self._phi = self._theta_hist[b] * self._rho.sum()

    def _simulate_fit_batch(self, xb: np.ndarray) -> None:
        b = self._n_batches
        s = self._select()
        mask = np.zeros(self.k, dtype=np.bool_)
        mask[self._order[:s]] = True
        y = kn.perturb_subset(xb, mask, self._params, self._key0, self._key1, b, 0)
        st = self._store
        st.ensure(self._n + y.shape[0], 1, min(y.shape[0], self.k))
        masks = np.broadcast_to(mask, (y.shape[0], self.k)).copy()
        st.add(y, masks, self._n, self._params)
        self._finish_batch(b, y.shape[0], 0.0)

    def __repr__(self) -> str:
        rule = self.utility if self.alpha is None else f"{self.utility}(alpha={self.alpha})"
        return (
            f"AdaptiveSurvey(k={self.k}, epsilon={self.epsilon}, utility={rule}, "
            f"engine={self.engine}, users={self._n}, batches={self._n_batches})"
        )


# ----------------------------------------------------------------------------------- helpers
def _progress_callback(progress: Any) -> Callable[[int, int], None] | None:
    if progress is None or progress is False:
        return None
    if progress is True:

        def report(done: int, total: int) -> None:
            print(
                f"\rsurvey: {done}/{total} users",
                end="\n" if done >= total else "",
                file=sys.stderr,
                flush=True,
            )

        return report
    if callable(progress):
        return progress
    raise InvalidTypeError(f"progress: expected True, False, None or a callable, got {progress!r}")
