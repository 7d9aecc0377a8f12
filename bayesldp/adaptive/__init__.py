"""AdOBEst-LDP: adaptive online Bayesian estimation with RRRR (Aydin and Yildirim; seed 004).

* :mod:`~bayesldp.adaptive.utilities` -- the six utilities U1..U6 of a candidate channel;
* :mod:`~bayesldp.adaptive.selection` -- top-k subset selection and the semi-/non-adaptive rules;
* :mod:`~bayesldp.adaptive.survey` -- :class:`AdaptiveSurvey`, the sequential loop (posterior
  draw -> subset -> RRRR reports -> SGLD), with checkpoint/resume;
* :mod:`~bayesldp.adaptive.experiment` -- the paper's experiment grid (:func:`run_grid`).
"""

from __future__ import annotations

from bayesldp.adaptive.selection import (
    candidate_channels,
    non_adaptive_subset,
    select_subset,
    semi_adaptive_subset,
)
from bayesldp.adaptive.survey import AdaptiveSurvey, CheckpointError
from bayesldp.adaptive.utilities import UTILITIES, get_utility

__all__ = [
    "UTILITIES",
    "AdaptiveSurvey",
    "CheckpointError",
    "candidate_channels",
    "get_utility",
    "non_adaptive_subset",
    "run_grid",
    "select_subset",
    "semi_adaptive_subset",
]


def __getattr__(name: str):
    if name == "run_grid":  # matplotlib is only imported by the experiment runner
        from bayesldp.adaptive.experiment import run_grid

        return run_grid
    raise AttributeError(f"module 'bayesldp.adaptive' has no attribute {name!r}")
