"""The survey benchmarks' paired ratios: the delta method's standard error and Holm's test."""

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from paired_ratios import holm, paired_ratio, pooled_ratio, worse_p_value


def test_the_delta_method_standard_error_matches_the_ratios_spread():
    """4,000 cells of 40 correlated pairs (gamma errors, the numerator 0.9x the denominator plus
    noise): the mean reported standard error is the spread of the ratio over the cells within
    10% (the standard deviation's own Monte Carlo error at 4,000 cells is about 1.1%; the
    delta method's bias at 40 pairs a few percent)."""
    gen = np.random.default_rng(3)
    g = gen.gamma(4.0, 0.01, size=(4000, 40))
    a = 0.9 * g + gen.gamma(2.0, 0.002, size=g.shape)
    ratios, ses = np.array([paired_ratio(x, y) for x, y in zip(a, g, strict=True)]).T
    assert abs(ses.mean() / ratios.std(ddof=1) - 1) < 0.10


def test_one_pair_has_no_standard_error_and_reads_worse_only_above_the_margin():
    assert paired_ratio([0.2], [0.4]) == (0.5, 0.0)
    assert worse_p_value(0.5, 0.0, 1.05) == 1.0 and worse_p_value(1.2, 0.0, 1.05) == 0.0
    assert worse_p_value(1.05, 0.1, 1.05) == 0.5


def test_holm_steps_down_and_stops_at_the_first_kept_hypothesis():
    # levels 0.05/4, 0.05/3, 0.05/2, 0.05/1 against the sorted p-values
    assert holm([0.01, 0.04, 0.012, 0.3]) == [True, False, True, False]
    assert holm([0.02, 0.001]) == [True, True] and holm([0.06, 0.001]) == [False, True]


def test_the_pooled_ratio_of_equal_cells_is_their_ratio():
    text = pooled_ratio([(0.8, 0.08), (0.8, 0.08)])
    assert text.startswith("0.800 (95%: ") and pooled_ratio([(0.8, 0.0)]) == "n/a"
    # a cell without variation is left out, and said to be
    assert pooled_ratio([(0.8, 0.08), (1.0, 0.0)]).endswith("1 cell without variation left out)")
