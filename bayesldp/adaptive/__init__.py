"""AdOBEst-LDP: adaptive online Bayesian estimation with RRRR.

Aydın and Yıldırım, "Bayesian Frequency Estimation Under Local Differential Privacy With an
Adaptive Randomized Response Mechanism", ACM TKDD 2025.  The subpackage in modules:

* :mod:`~bayesldp.adaptive.utilities` -- the six utilities U1..U6 of a candidate channel;
* :mod:`~bayesldp.adaptive.selection` -- top-k subset selection and the semi-/non-adaptive rules;
* :mod:`~bayesldp.adaptive.survey` -- :class:`AdaptiveSurvey`, the sequential loop (posterior
  draw -> subset -> RRRR reports -> SGLD), with checkpoint/resume;
* :mod:`~bayesldp.adaptive.config` -- :class:`SurveyConfig`, its validated, frozen settings;
* :mod:`~bayesldp.adaptive.store` -- the deduplicated report storage the kernels read;
* :mod:`~bayesldp.adaptive.checkpoint` -- atomic, checksummed state files;
* :mod:`~bayesldp.adaptive.stopping` and :mod:`~bayesldp.adaptive.confseq` -- stopping on
  the posterior or on anytime-valid confidence sequences;
* :mod:`~bayesldp.adaptive._kernels` -- the compiled loops.

The paper's experiment grid is an application of this package: :mod:`bayesldp.workflows.grid`.
"""

from __future__ import annotations

from bayesldp.adaptive.checkpoint import CheckpointError
from bayesldp.adaptive.config import SurveyConfig
from bayesldp.adaptive.confseq import BettingConfidenceSequences, sequences_from_reports
from bayesldp.adaptive.selection import (
    candidate_channels,
    non_adaptive_subset,
    select_subset,
    semi_adaptive_subset,
)
from bayesldp.adaptive.survey import AdaptiveSurvey
from bayesldp.adaptive.utilities import UTILITIES, get_utility

__all__ = [
    "UTILITIES",
    "AdaptiveSurvey",
    "BettingConfidenceSequences",
    "CheckpointError",
    "SurveyConfig",
    "candidate_channels",
    "get_utility",
    "non_adaptive_subset",
    "select_subset",
    "semi_adaptive_subset",
    "sequences_from_reports",
]
