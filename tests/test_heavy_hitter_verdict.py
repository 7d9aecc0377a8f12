"""The paired verdict of ``benchmarks/heavy_hitters_tables.py``: which cells count as behind.

Deterministic inputs: each case states the per-seed scores and the verdict they must give.
"""

from __future__ import annotations

import math

from benchmarks.heavy_hitters_tables import MIN_PAIRED, verdict


def _runs(precision: list[float], mse: list[float]) -> list[dict[str, float]]:
    return [{"precision": p, "recall": p, "ncr": p, "mse": m}
            for p, m in zip(precision, mse, strict=True)]  # fmt: skip


def test_a_clear_shortfall_is_behind_and_a_clear_lead_ahead():
    ours = _runs([0.9, 0.8, 0.9, 0.85, 0.9], [1e-6] * 5)
    theirs = _runs([0.5, 0.4, 0.5, 0.45, 0.5], [2e-6, 3e-6, 2e-6, 2.5e-6, 2e-6])
    behind, ahead, unjudged = verdict(ours, theirs)
    assert behind == [] and unjudged == []
    assert [name for name, *_ in ahead] == ["precision", "recall", "NCR", "MSE"]
    behind, ahead, unjudged = verdict(theirs, ours)
    assert [name for name, *_ in behind] == ["precision", "recall", "NCR", "MSE"]


def test_mse_on_too_few_paired_seeds_is_not_judged():
    """Theirs returned nothing on 4 of 5 seeds: one MSE difference is no evidence either way
    (it used to count as behind with a zero standard error)."""
    nan = math.nan
    ours = _runs([1.0] * 5, [2e-5, 1e-5, 1e-5, 1e-5, 1e-5])
    theirs = _runs([1.0, 0, 0, 0, 0], [1e-5, nan, nan, nan, nan])
    behind, ahead, unjudged = verdict(ours, theirs)
    assert behind == []
    assert unjudged == [("MSE", 1)]
    assert [name for name, *_ in ahead] == ["precision", "recall", "NCR"]


def test_enough_paired_seeds_are_judged_even_with_some_missing():
    nan = math.nan
    n = MIN_PAIRED + 1
    ours = _runs([1.0] * n, [5e-5] * n)
    theirs = _runs([1.0] * n, [1e-5] * (n - 1) + [nan])
    behind, _, unjudged = verdict(ours, theirs)
    assert unjudged == [] and [name for name, *_ in behind] == ["MSE"]


def test_nothing_returned_by_one_method_leaves_its_mse_unjudged():
    nan = math.nan
    ours = _runs([0.0] * 5, [nan] * 5)
    theirs = _runs([0.5] * 5, [1e-5] * 5)
    behind, ahead, unjudged = verdict(ours, theirs)
    assert [name for name, *_ in behind] == ["precision", "recall", "NCR"]
    assert ahead == [] and unjudged == [("MSE", 0)]
    _, ahead, unjudged = verdict(theirs, ours)  # no MSE to compare: not "ahead" on it
    assert [name for name, *_ in ahead] == ["precision", "recall", "NCR"]
    assert unjudged == [("MSE", 0)]
