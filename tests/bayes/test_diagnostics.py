"""Every method warns on bad diagnostics (PyMC's thresholds) and records the numbers."""

import warnings

import numpy as np
import pytest

import bayesldp
from bayesldp.errors import ConvergenceWarning
from tests.stats_helpers import rrrr_and_grr_tallies


def _tally():
    rng = np.random.default_rng(0)
    return bayesldp.GRR(5, 1.0).simulate_tally(rng.multinomial(1000, [0.6, 0.3, 0.1, 0, 0]), rng=1)


def test_a_bad_posterior_warns_with_the_numbers():
    with pytest.warns(ConvergenceWarning) as record:
        idata = bayesldp.fit(_tally(), prior=1.0, draws=10, chains=2, tune=10, random_seed=0)
    text = " ".join(str(w.message) for w in record)
    assert "smallest bulk ESS is" in text and "per chain, below 100" in text
    assert "concentration a" not in text  # a fixed prior: no hint about a
    attrs = idata.posterior.attrs
    assert attrs["ess_bulk_min"] < 200 and "r_hat_max" in attrs and attrs["divergences"] >= 0


def test_a_failed_check_under_a_broad_posterior_of_a_says_so():
    """28 reports at eps = 0.5: a's posterior spans about three decades."""
    tally = bayesldp.GRR(5, 0.5).simulate_tally(np.array([25, 3, 0, 0, 0]), rng=4)
    with pytest.warns(ConvergenceWarning) as record:
        idata = bayesldp.fit(tally, prior="adaptive", draws=50, chains=2, tune=50, random_seed=0)
    hints = [str(w.message) for w in record if "concentration a" in str(w.message)]
    lo, hi = np.quantile(idata.posterior["a"].values, [0.05, 0.95])
    assert np.log10(hi / lo) >= 2 and len(hints) == 1
    assert f"[{lo:.3g}, {hi:.3g}]" in hints[0] and "prior=0.5" in hints[0]


def test_divergences_at_a_vertex_under_the_smoothness_prior_say_what_to_do():
    """A known fault: 90 GRR reports (60, 20, 10), K = 3, default SmoothDensity(3);
    2.9-3.6 % of the transitions diverge (benchmarks/investigations/results/smooth_vertex_steps.md),
    so 2 x 1,000 draws of method="hmc" have none with probability below 1e-20 (method="auto"
    samples it from the prior, tests/bayes/test_prior_mh.py); the hint names the share of draws at
    a vertex and the remedies."""
    tally = bayesldp.GRR(3, 1.0).tally_from_report_counts(np.array([60, 20, 10]))
    with pytest.warns(ConvergenceWarning) as record:
        idata = bayesldp.fit(tally, prior=bayesldp.SmoothDensity(3), chains=2, method="hmc",
                             random_seed=0)  # fmt: skip
    hints = [str(w.message) for w in record if "vertex of the simplex" in str(w.message)]
    share = np.mean(idata.posterior["theta"].values.min(axis=-1) < 1e-6)
    assert len(hints) == 1 and f"{share:.0%} of the draws" in hints[0]
    assert "target_accept=0.99" in hints[0] and "slope_sd" in hints[0]
    assert "method='prior_mh'" in hints[0]


@pytest.mark.parametrize("method", ["hmc", "sgld"])
def test_a_good_posterior_is_silent(method):
    """An interior posterior (no category near 0), 4 chains x 1000 draws: every check passes."""
    rng = np.random.default_rng(2)
    counts = rng.multinomial(5000, [0.3, 0.25, 0.2, 0.15, 0.1])
    tally = bayesldp.GRR(5, 2.0).simulate_tally(counts, rng=3)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        idata = bayesldp.fit(tally, random_seed=1, method=method)
    attrs = idata.posterior.attrs
    assert attrs["r_hat_max"] <= 1.01 and attrs["ess_bulk_min"] >= 400


@pytest.mark.filterwarnings("ignore:PyTensor could not link to a BLAS:UserWarning")
def test_pymc_nuts_is_checked_too():
    """PyMC's own checks are off in the nuts backend; fit's checks apply to it as to the rest."""
    pytest.importorskip("pymc")
    with pytest.warns(ConvergenceWarning, match="method='nuts'"):
        bayesldp.fit(_tally(), method="nuts", draws=10, chains=2, tune=10, cores=1, random_seed=0)


def test_checks_can_be_switched_off_and_exact_draws_are_not_checked():
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        idata = bayesldp.fit(_tally(), draws=10, chains=2, tune=10, random_seed=0,
                             compute_convergence_checks=False)  # fmt: skip
        assert "ess_bulk_min" in idata.posterior.attrs  # recorded, not warned
        tiny = bayesldp.GRR(3, 1.0).tally_from_report_counts([3, 1, 1])
        exact = bayesldp.fit(tiny, method="exact", draws=5, chains=1, random_seed=0)
    assert "r_hat_max" not in exact.posterior.attrs


def test_tiny_concentrations_warn_or_are_refused():
    """HMC samples log-ratios: a tiny prior gives a poor but defined posterior, with warnings;
    SGLD's latent Gamma weights would underflow to 0, so it refuses with the reason."""
    with pytest.warns(ConvergenceWarning):
        bayesldp.fit(_tally(), prior=1e-3, method="hmc", draws=200, chains=2, random_seed=0)
    with pytest.raises(bayesldp.InvalidInputError, match=r"sum\(alpha\) >= 0.05, got 0.005"):
        bayesldp.fit(_tally(), prior=1e-3, method="sgld", random_seed=0)


def test_divergences_warn_with_the_target_accept_the_fit_used():
    """A fit at target_accept=0.8 with one divergent draw: the warning names 0.8 and suggests
    0.95; at 0.95 it suggests 0.99.  The divergence is set by hand (a seed that happens to
    diverge is a change detector: divergent draws are random)."""
    from bayesldp.bayes.diagnostics import _messages, diagnose

    tally, _ = rrrr_and_grr_tallies(5)
    idata = bayesldp.fit(tally, prior=1.0, method="hmc", target_accept=0.8, coordinates="alr",
                         random_seed=5, compute_convergence_checks=False)  # fmt: skip
    idata.sample_stats["diverging"][0, 7] = True
    with pytest.warns(ConvergenceWarning, match=r"from its 0.8 \(e.g. to 0.95\)"):
        diagnose(idata, "hmc")
    (text,) = _messages({"divergences": 1}, 4, "hmc", 0.95)
    assert "from its 0.95 (e.g. to 0.99)" in text
    (text,) = _messages({"divergences": 1}, 4, "nuts")
    assert "raise target_accept (e.g. to 0.95)" in text
