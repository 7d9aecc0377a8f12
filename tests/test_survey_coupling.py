"""The coupled GRR baseline of the survey benchmarks has exactly GRR's law."""

import sys
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from survey_coupling import coupled_grr_reports, grr_tally_like_survey

import bayesldp
from bayesldp.adaptive import AdaptiveSurvey
from bayesldp.likelihood import Likelihood


@pytest.mark.parametrize("subset", [(0, 2), (1,), (0, 1, 2, 3, 4)])
def test_each_coupled_report_has_grr_s_law_and_agrees_maximally(subset):
    """400,000 users over K = 6 (eps 1, eps1 = 0.7) report through RRRR(subset); their coupled
    GRR reports, per true value, against GRR's row (chi-square, level 1e-3: a shift of 0.005
    in a cell of 0.1 is found with power above 0.99 at 66,000 users per value); and the share
    that keeps the RRRR report is the overlap sum_y min(P_G, P_R)(y) within 4 binomial sd."""
    k, eps, eps1 = 6, 1.0, 0.7
    gen = np.random.default_rng(8)
    x = gen.integers(0, k, 400_000)
    rrrr = bayesldp.RRRR(k, eps, subset, eps1=eps1)
    y = rrrr.perturb(x, rng=gen)
    masks = np.zeros((x.size, k), dtype=bool)
    masks[:, list(subset)] = True
    z = coupled_grr_reports(k, eps, eps1, x, y, masks, gen)
    grr = bayesldp.GRR(k, eps).channel
    for v in range(k):
        seen = np.bincount(z[x == v], minlength=k)
        assert stats.chisquare(seen, grr[v] * seen.sum()).pvalue > 1e-3
    overlap = np.minimum(grr, rrrr.channel).sum(axis=1)[x]
    expected = overlap.mean()
    sd = np.sqrt(np.sum(overlap * (1 - overlap))) / x.size
    assert abs(np.mean(z == y) - expected) < 4 * sd


def test_users_of_the_empty_subset_keep_their_report():
    k, eps = 5, 1.0
    gen = np.random.default_rng(1)
    x = gen.integers(0, k, 1000)
    y = bayesldp.GRR(k, eps).perturb(x, rng=gen)
    z = coupled_grr_reports(k, eps, 0.7, x, y, np.zeros((x.size, k), dtype=bool), gen)
    assert np.array_equal(z, y)


def test_the_baseline_tally_in_the_survey_s_form():
    """GRR reports in the survey's tally form: GRR's likelihood at any theta (to rounding), and,
    for a survey that never adapted, the survey's own tally exactly (so one seed gives the two
    fits the same draws)."""
    k, eps = 6, 1.0
    gen = np.random.default_rng(3)
    x = gen.choice(k, size=600, p=gen.dirichlet(np.ones(k)))
    y = bayesldp.GRR(k, eps).perturb(x, rng=gen)
    tally = grr_tally_like_survey(k, eps, y)
    grr = bayesldp.GRR(k, eps).tally(y)
    for theta in gen.dirichlet(np.ones(k), size=5):
        assert Likelihood(tally).loglik(theta) == pytest.approx(
            Likelihood(grr).loglik(theta), rel=1e-12
        )
    survey = AdaptiveSurvey(k, eps, random_seed=0)
    survey.record(y, ())
    assert survey.tally() == tally
