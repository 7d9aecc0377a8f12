"""LDP mechanisms: the client-side randomisers and their aggregators.

One module per family: ``grr`` (GRR / direct encoding / k-RR), ``unary`` (SUE, OUE), ``hashing``
(BLH, OLH), ``xxhash_lh`` (BLHXX, OLHXX: local hashing with pure-ldp's and multi-freq-ldpy's xxhash
family), ``histogram`` (SHE, THE), ``hadamard`` (Hadamard response), ``rrrr`` (the subset
mechanism of AdOBEst-LDP), ``subset`` (subset selection), ``sketch`` (Apple's count-mean sketches
CMS and HCMS), ``rappor`` (RAPPOR with Bloom filters and cohorts), ``longitudinal`` (L-GRR, L-SUE,
L-OUE, L-OSUE, L-SOUE, dBitFlipPM: memoised permanent responses), ``multidimensional`` (SPL, SMP and
RS+FD over records of several attributes: one tally per attribute), ``numerical`` (square wave,
piecewise, Laplace and Gaussian on real values) and ``sampling`` (node sampling, a wrapper);
``base`` holds the protocol they share and :mod:`~bayesldp.mechanisms.registry` the one list of
them that the rest of the package reads.  Names are imported lazily, so importing this package
loads no mechanism.
"""

from __future__ import annotations

import importlib
from typing import Any

from bayesldp.mechanisms.registry import MODULES

_BASE = "bayesldp.mechanisms.base"
_REGISTRY = "bayesldp.mechanisms.registry"
_MDIM = "bayesldp.mechanisms.multidimensional.protocols"
_LAZY: dict[str, str] = {
    **MODULES,
    "FiniteChannelMechanism": _BASE,
    "Mechanism": _BASE,
    "Parameter": _BASE,
    "PureProtocol": _BASE,
    "realised_epsilon_of_channel": _BASE,
    "HashReports": "bayesldp.mechanisms.hashing",
    "LocalHashing": "bayesldp.mechanisms.hashing",
    "NodeSampling": "bayesldp.mechanisms.sampling",
    "SampledReports": "bayesldp.mechanisms.sampling",
    "SeedReports": "bayesldp.mechanisms.xxhash_lh",
    "CMSReports": "bayesldp.mechanisms.sketch",
    "HCMSReports": "bayesldp.mechanisms.sketch",
    "RapporReports": "bayesldp.mechanisms.rappor.mechanism",
    "rappor_decode": "bayesldp.mechanisms.rappor.decode",
    "XXHashLocalHashing": "bayesldp.mechanisms.xxhash_lh",
    "DBitReports": "bayesldp.mechanisms.longitudinal.dbitflip",
    "Memo": "bayesldp.mechanisms.longitudinal.memo",
    "MemoError": "bayesldp.mechanisms.longitudinal.memo",
    "MemoStore": "bayesldp.mechanisms.longitudinal.memo",
    "SPL": _MDIM,
    "SMP": _MDIM,
    "RSFD": _MDIM,
    "all_parameters": _REGISTRY,
    "canonical_name": _REGISTRY,
    "make_mechanism": _REGISTRY,
    "mechanism_class": _REGISTRY,
    "names": _REGISTRY,
    "parameters": _REGISTRY,
    "rebuild_mechanism": _REGISTRY,
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'bayesldp.mechanisms' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])


__all__ = ["MODULES", *_LAZY]
