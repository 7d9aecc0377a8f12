"""What users get from numerical reports: mean with interval, quantiles, density figure."""

import numpy as np
import pytest

import bayesldp
from bayesldp import numerical, plotting
from bayesldp.errors import InvalidInputError, InvalidTypeError


def test_quantiles_of_binned_distributions_are_exact():
    mech = bayesldp.SquareWave(4, 1.0, lo=0.0, hi=8.0)
    uniform = np.full(4, 0.25)
    np.testing.assert_allclose(
        numerical.quantiles(uniform, mech, [0.0, 0.1, 0.5, 0.9, 1.0]), [[0, 0.8, 4, 7.2, 8]]
    )
    # an empty bin is skipped: mass 0.5 on [0, 2), 0.5 on [6, 8]
    split = np.array([[0.5, 0.0, 0.0, 0.5], [0.0, 1.0, 0.0, 0.0]])
    out = numerical.quantiles(split, mech, [0.25, 0.5, 0.75])
    np.testing.assert_allclose(out, [[1.0, 2.0, 7.0], [2.5, 3.0, 3.5]])
    with pytest.raises(InvalidInputError, match="probabilities in"):
        numerical.quantiles(uniform, mech, [1.5])
    with pytest.raises(InvalidInputError, match="has 3 bins, the mechanism 4"):
        numerical.quantiles(np.full(3, 1 / 3), mech, 0.5)
    with pytest.raises(InvalidTypeError, match="numerical mechanism"):
        numerical.quantiles(uniform, bayesldp.GRR(4, 1.0), 0.5)


def test_mean_of_draws_and_of_an_estimate():
    mech = bayesldp.Piecewise(4, 1.0, lo=-1.0, hi=1.0)
    draws = np.random.default_rng(0).dirichlet(np.ones(4), size=(2, 500))
    got = numerical.mean(draws, mech, prob=0.8)
    means = draws.reshape(-1, 4) @ np.array([-0.75, -0.25, 0.25, 0.75])
    assert got.mean == pytest.approx(means.mean())
    assert (got.lower, got.upper) == pytest.approx(tuple(np.quantile(means, [0.1, 0.9])))
    assert got.sd == pytest.approx(means.std(ddof=1)) and got.method == "posterior"
    tally = mech.tally(mech.perturb(np.linspace(-1, 1, 4000), rng=0))
    point = numerical.mean(bayesldp.estimate(tally, "em"), mech)
    assert point.lower is None and point.method == "estimate:em"
    assert abs(point.mean) < 0.1  # the report mean's sd is 0.03 here


def test_unbiased_mean_interval_is_normal():
    mech = bayesldp.Piecewise(4, 2.0, lo=0.0, hi=10.0)
    reports = mech.perturb(np.full(5000, 7.0), rng=0)
    got = numerical.unbiased_mean(mech, reports, prob=0.9)
    m, var = mech.unbiased_mean(reports)
    assert got.mean == m and got.sd == pytest.approx(np.sqrt(var))
    assert got.upper - got.mean == pytest.approx(1.6448536269514722 * np.sqrt(var))
    assert got.lower < 7.0 < got.upper


def test_fit_on_numerical_reports_and_the_density_figure():
    import matplotlib.pyplot as plt

    mech = bayesldp.SquareWave(8, 2.0)
    values = np.random.default_rng(1).beta(2, 5, 3000)
    tally = mech.tally(mech.perturb(values, rng=2))
    idata = bayesldp.fit(tally, prior=1 / 8, draws=200, chains=2, random_seed=0,
                         progressbar=False, compute_convergence_checks=False)  # fmt: skip
    assert idata.posterior["theta"].shape == (2, 200, 8)
    got = numerical.mean(idata, mech)
    assert got.lower < got.mean < got.upper
    assert abs(got.mean - values.mean()) < 0.05
    q = numerical.quantiles(idata, mech, [0.5])
    assert q.shape == (400, 1) and np.all((q >= 0) & (q <= 1))
    ax = plotting.plot_density(
        idata, mech, estimates={"em": bayesldp.estimate(tally, "em")}, values=values
    )
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert set(labels) == {"posterior mean", "em", "truth", "posterior 90% band"}
    assert ax.get_xlim() == (0.0, 1.0)
    plt.close("all")


@pytest.mark.slow
def test_posterior_interval_for_the_mean_covers():
    """60 seeded populations (Beta(2, 5), n = 3000) under SW(16 bins, eps = 1), Dirichlet(1/16)
    prior: the 90% interval for the mean covers the true mean in 85-95% of them.  Measured
    55/60 = 0.917 (and 92/100 over seeds 0-99); about 6 s per fit on a loaded 2-core machine.
    In a 6-seed trial (n = 5000, same mechanism) the uniform Dirichlet(1)'s pull towards the
    domain's centre put the interval above the truth in 2 of 6, Dirichlet(1/K) in 0 of 6:
    hence Dirichlet(1/K) here."""
    assert 0.85 <= _mean_coverage(1 / 16, 60) <= 0.95


def _mean_coverage(prior, reps: int) -> float:
    """Share of seeds ``0 .. reps - 1`` whose 90% interval for the mean (Beta(2, 5) values,
    n = 3000, SW with 16 bins at eps = 1) covers the sample mean."""
    mech = bayesldp.SquareWave(16, 1.0)
    hits = 0
    for s in range(reps):
        values = np.random.default_rng(s).beta(2, 5, 3000)
        tally = mech.tally(mech.perturb(values, rng=10_000 + s))
        idata = bayesldp.fit(tally, prior=prior, draws=400, chains=2, random_seed=s,
                             progressbar=False, compute_convergence_checks=False)  # fmt: skip
        got = numerical.mean(idata, mech)
        hits += got.lower <= values.mean() <= got.upper
    return hits / reps


@pytest.mark.slow
def test_posterior_interval_for_the_mean_covers_under_the_smoothness_prior():
    """The seeded populations and mechanism of the test above, 200 of them, under
    ``prior="smooth"`` (SmoothDensity, the default sampler): the 90% interval for the mean
    covers the true mean in 85-95% of them.  Measured 186/200 = 0.930 (with an earlier
    sampler, 58 of the first 60 seeds: too few seeds for the 95% bound, hence 200)."""
    assert 0.85 <= _mean_coverage("smooth", 200) <= 0.95
