"""Types shared by the posterior samplers (internal)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class SamplerOutput:
    """What every sampler backend returns to :func:`bayesldp.fit`.

    Attributes
    ----------
    theta : ndarray, shape (chains, draws, K)
        Posterior draws of the population distribution (each on the simplex).
    sample_stats : dict of str to ndarray of shape (chains, draws)
        Per-draw diagnostics, with ArviZ names where they exist ("diverging", "energy",
        "tree_depth", "step_size", "lp", "acceptance_rate").
    info : dict
        JSON-serialisable extras (backend name, tuning steps, wall time, options).
    extra : dict of str to ndarray of shape (chains, draws)
        Posterior variables besides ``theta`` (the adaptive prior's concentration ``a``).
    """

    theta: np.ndarray
    sample_stats: dict[str, np.ndarray] = field(default_factory=dict)
    info: dict[str, object] = field(default_factory=dict)
    extra: dict[str, np.ndarray] = field(default_factory=dict)
