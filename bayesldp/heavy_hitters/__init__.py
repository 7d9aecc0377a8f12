"""Heavy hitters of open-ended items (str or bytes) under local differential privacy.

Every mechanism in :mod:`bayesldp.mechanisms` needs its domain listed up front; here the
frequent items are found from the reports themselves.  :class:`PEM` (Wang, Li, Jha, IEEE TDSC
2019) encodes each item to a keyed-hash code (:class:`ItemEncoder`; or, for fixed-length items
over a known alphabet, the item read as a number, :class:`PositionalEncoder`), splits the users
into rounds that report ever longer prefixes of their codes through OLH, keeps the top ``k``
prefixes of each round and extends them; :meth:`PEM.posterior` then puts a posterior on the
found items' shares and on the rest ("other") through :func:`bayesldp.fit`.
"""

from bayesldp.heavy_hitters.candidates import CandidateCMS, CandidateOLH
from bayesldp.heavy_hitters.encoding import ItemEncoder, PositionalEncoder
from bayesldp.heavy_hitters.pem import PEM, HeavyHitters, PEMReports, PEMRound, SharePosterior
from bayesldp.heavy_hitters.sfp import SFP, FragmentRound, SFPHeavyHitters, SFPReports
from bayesldp.heavy_hitters.treehist import TreeHist, TreeHistLevel

__all__ = [
    "PEM",
    "SFP",
    "CandidateCMS",
    "CandidateOLH",
    "FragmentRound",
    "HeavyHitters",
    "ItemEncoder",
    "PEMReports",
    "PEMRound",
    "PositionalEncoder",
    "SFPHeavyHitters",
    "SFPReports",
    "SharePosterior",
    "TreeHist",
    "TreeHistLevel",
]
