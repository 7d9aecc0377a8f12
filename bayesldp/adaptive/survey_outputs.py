"""What an :class:`~bayesldp.adaptive.AdaptiveSurvey` gives back: its history, its reports as one
tally, and the posterior of theta given them (``fit``'s layout), as a mixin of the survey class.

:meth:`SurveyOutputs.posterior` is :func:`bayesldp.fit` of the survey's reports (each through the
RRRR channel of its subset) under the survey's prior; ``posterior(engine="sgld")`` the final SGLD
run of AdOBEst-LDP (Aydın and Yıldırım, "Bayesian Frequency Estimation Under Local Differential
Privacy With an Adaptive Randomized Response Mechanism", ACM TKDD 2025), whose spread is not the
posterior's.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import numpy as np

from bayesldp._validation import check_int
from bayesldp.adaptive import _kernels as kn
from bayesldp.adaptive import sgld
from bayesldp.bayes.prior import AdaptiveDirichlet
from bayesldp.errors import InvalidInputError, NotSupportedError
from bayesldp.mechanisms.rrrr import RRRR
from bayesldp.tally import Tally

if TYPE_CHECKING:
    import arviz
    import xarray

__all__ = ["SurveyOutputs"]

#: options of :func:`bayesldp.fit` that do not change its draws (``posterior()`` may reuse a fit)
_SAME_DRAWS = frozenset({"progressbar", "cores", "compute_convergence_checks"})


class SurveyOutputs:
    """History, tally and posterior of a survey (mixed into ``AdaptiveSurvey``)."""

    def _reports_view(self) -> tuple[np.ndarray, np.ndarray]:
        return self._store.reports(self._n)

    @property
    def history(self) -> xarray.Dataset:
        """The survey so far as an xarray Dataset.

        Variables: ``report`` (user), ``subset`` (user, category; boolean mask of ``S_t``),
        ``subset_size`` (user), ``batch`` (user), ``theta`` (step, category: ``theta[b]`` is the
        draw batch ``b``'s subset was selected from; the last step is the current draw) and
        ``batch_size`` (batch).  With ``engine="posterior"`` also the trajectory of the
        posterior, one entry per refresh of the pool (:mod:`bayesldp.adaptive.pool`):
        ``posterior_users`` (refresh: the reports it was fitted on), ``posterior_mean``,
        ``posterior_lower`` and ``posterior_upper`` (refresh, category: the mean and the 5% and
        95% quantiles of the pool's draws).  The configuration is in the attrs (``config``,
        JSON).
        """
        import xarray as xr

        sid, y = self._reports_view()
        st = self._store
        nb = self._n_batches
        batch = np.repeat(np.arange(nb), self._batch_sizes[:nb])
        out = xr.Dataset(
            {
                "report": (("user",), y),
                "subset": (("user", "category"), st.sub_mask[sid]),
                "subset_size": (("user",), st.sub_size[sid]),
                "batch": (("user",), batch),
                "theta": (("step", "category"), self._theta_hist[: nb + 1].copy()),
                "batch_size": (("batch_index",), self._batch_sizes[:nb].copy()),
            },
            coords={
                "user": np.arange(self._n),
                "category": np.arange(self.k),
                "step": np.arange(nb + 1),
                "batch_index": np.arange(nb),
            },
            attrs={
                "config": json.dumps(self.config.to_dict(), sort_keys=True),
                "epsilon": self.epsilon,
                "eps1": self.eps1,
                "utility": self.utility,
                "method": "AdOBEst-LDP (Aydin and Yildirim 2025)",
            },
        )
        if self.engine == "posterior":
            pool = self._pool
            out["posterior_users"] = ("refresh", pool.trajectory_users.copy())
            for i, name in enumerate(("mean", "lower", "upper")):
                out[f"posterior_{name}"] = (("refresh", "category"), pool.trajectory[:, i].copy())
        return out

    def tally(self) -> Tally:
        """All reports as one merged RRRR Tally (``mechanism=None``; rows ``P_{S_t}[:, y_t]``)."""
        if self._n == 0:
            raise InvalidInputError("tally: the survey has no reports yet")
        st = self._store
        counts = np.bincount(st.row_of[: self._n], minlength=st.n_rows)
        _, y = self._reports_view()
        stat = np.bincount(y, minlength=self.k).astype(float)
        family = RRRR(self.k, self.epsilon, ()).family
        return Tally(counts, rows=st.table[: st.n_rows].copy(), stat=stat, family=family)

    def posterior(
        self,
        draws: int | None = None,
        chains: int | None = None,
        *,
        engine: str = "fit",
        **options: Any,
    ) -> arviz.InferenceData:
        """Posterior draws of theta given all reports so far.

        ``engine="fit"`` (the default): :func:`bayesldp.fit` of :meth:`tally` under the survey's
        prior with ``fit_method`` (default ``draws = 1000``, ``chains = 4``, fit's defaults):
        the exact likelihood of every report through the RRRR channel of the subset it was made
        with, sampled by the package's calibrated samplers, with fit's convergence checks;
        ``options`` go to :func:`bayesldp.fit` (``tune=``, ``compute_convergence_checks=``,
        ``progressbar=``, ...).  The default fit (default ``draws`` and ``chains``, no options
        but ``progressbar``, ``cores`` or ``compute_convergence_checks``, which leave the draws
        as they are) is made once per number of reports and kept: it is the posterior
        ``simulate(stop=...)`` measured, and each call returns a copy of it (the convergence
        warnings, if any, come with the first).

        ``engine="sgld"``: the final SGLD run of Aydın and Yıldırım 2025 (AdOBEst-LDP's estimator):
        each chain starts from the current SGLD state (for the other engines: the current draw
        scaled by the prior's total mass) and runs ``burn_in + draws`` updates of step ``gamma``,
        keeping the last ``draws`` (default ``final_steps - burn_in``, ``chains = 1``).  Its spread
        is not the posterior's: on n = 5,000 users of sparse populations its 90% intervals held
        0-50% of the true frequencies (``benchmarks/results/survey_posterior.md``).

        Returns
        -------
        arviz.InferenceData
            The layout of :func:`bayesldp.fit` (``posterior.theta`` with dims
            ``chain, draw, category``; the merged tally in ``observed_data``).
        """
        if self._n == 0:
            raise InvalidInputError("posterior: the survey has no reports yet")
        if engine not in ("fit", "sgld"):
            raise InvalidInputError(f"engine: must be 'fit' or 'sgld', got {engine!r}")
        if engine == "fit":
            draws = 1000 if draws is None else check_int(draws, "draws", 1)
            chains = 4 if chains is None else check_int(chains, "chains", 1)
            if (draws, chains) == (1000, 4) and set(options) <= _SAME_DRAWS:
                return self._returned_posterior(**options)
            return self._fit_draws(self._n, draws=draws, chains=chains, stream=2,
                                   batch=self._n_batches, **options)  # fmt: skip
        if options:
            raise InvalidInputError(f"options: engine='sgld' takes none, got {sorted(options)}")
        if isinstance(self.prior, AdaptiveDirichlet):
            raise NotSupportedError(
                "engine: the SGLD needs a fixed Dirichlet prior; this survey has the adaptive "
                "prior (give prior=1.0 when creating it to compare with the paper's SGLD)"
            )
        draws = self.final_steps - self.burn_in if draws is None else check_int(draws, "draws", 1)
        chains = 1 if chains is None else check_int(chains, "chains", 1)
        # the paper's step 0.5 / n (the posterior engines plan no step: the reports so far)
        gamma = self._require_gamma(None) if self.engine == "sgld" else 0.5 / self._n
        theta = sgld.run_final(self._phi, self._store.sgld_rows(), self._n, chains, self.burn_in,
                             draws, self._sgld(gamma), self._n_batches)  # fmt: skip
        info = {
            "sampler": "AdOBEst-LDP SGLD (Aydin and Yildirim 2025)",
            "burn_in": self.burn_in,
            "step_size": gamma,
            "minibatch": self.minibatch,
            "n_users": self._n,
            "n_batches": self._n_batches,
            "utility": self.utility,
        }
        return _inference_data(theta, info, self.tally(), self.prior, self.config.entropy)

    def _returned_posterior(self, **options: Any) -> arviz.InferenceData:
        """``posterior()``'s default fit (1000 draws, 4 chains) of the reports so far: fitted
        once per number of reports and kept, so the posterior a stop rule was checked on
        (:mod:`bayesldp.adaptive.stopping`) is the one ``posterior()`` returns (a copy)."""
        if self._final is None or self._final[0] != self._n:
            idata = self._fit_draws(self._n, draws=1000, chains=4, stream=2,
                                    batch=self._n_batches, **options)  # fmt: skip
            self._final = (self._n, idata)
        return self._final[1].copy()

    def _fit_draws(
        self, t: int, *, draws: int, chains: int, stream: int, batch: int, **options: Any
    ) -> Any:
        from bayesldp.bayes.fit import fit

        saved = self._n
        self._n = t  # the tally of the first t reports
        try:
            tally = self.tally()
        finally:
            self._n = saved
        seed = int(kn.derive_seed(self._key0, self._key1, batch, stream))
        # the per-batch single draws have no diagnostics to speak of
        options.setdefault("compute_convergence_checks", stream == 2)
        return fit(tally, prior=self.prior, method=self.fit_method, draws=draws, chains=chains,
                   random_seed=seed, **options)  # fmt: skip


def _inference_data(
    theta: np.ndarray, info: dict[str, Any], tally: Tally, prior: Any, entropy: int
) -> arviz.InferenceData:
    """Label the SGLD's draws as :func:`bayesldp.fit` does."""
    from bayesldp.bayes._types import SamplerOutput
    from bayesldp.bayes.fit import build_inference_data

    out = SamplerOutput(theta=theta, sample_stats={}, info=info)
    seed = entropy if entropy < 2**63 else None
    return build_inference_data(
        out, tally, prior, method="sgld", requested_method="AdaptiveSurvey", random_seed=seed
    )
