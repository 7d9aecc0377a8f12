"""TreeHist: heavy hitters by a pruned prefix tree with a frequency oracle at each level.

Bassily, Nissim, Stemmer, Thakurta, "Practical Locally Private Heavy Hitters", NeurIPS 2017
(arXiv 1707.04982), algorithm TreeHist.  Each item is a code of ``bits`` bits
(:class:`~bayesldp.heavy_hitters.ItemEncoder`, or, for fixed-length items over a known alphabet,
:class:`~bayesldp.heavy_hitters.PositionalEncoder`, by PEM's rule); the codes are the leaves of
a tree whose level ``i`` holds their prefixes of ``s_i = min((i + 1) eta, bits)`` bits
(``eta = 1``: the paper's binary tree).  The users are split at random into ``L`` level groups and a
final group (share ``final_share``); a level group's users report the ``s_i``-bit prefix of
their code through a frequency oracle, once (each user spends the oracle's epsilon exactly, the
group being drawn independently of the item).  The collector walks down the tree: at level ``i``
it estimates the frequency of every child (``2^{s_i - s_{i-1}}`` of them) of each prefix that
survived level ``i - 1`` and keeps those whose estimate exceeds the threshold

.. math:: \\tau_i = z\\,\\sqrt{\\operatorname{Var}_0 / n_i},

``Var_0 / n_i`` the oracle's variance for a prefix nobody holds among the ``n_i`` users of the
level (the paper's ``eta``-threshold is of this order, ``sqrt(log(d) / (eps^2 n))``), at most
``max_survivors`` of them (the largest).  The survivors of the last level (full codes) are
re-estimated from the final group, whose reports took no part in the search: the paper's final
frequency estimate, here also the likelihood of :meth:`TreeHist.posterior`.

The frequency oracle.  The paper uses Hashtogram (hashing and the Hadamard transform); here it
is bayesldp's OLH (:class:`bayesldp.OLH`, read against the children by
:class:`~bayesldp.heavy_hitters.CandidateOLH`), an oracle of the same error order
(``4 e^eps / (e^eps - 1)^2`` per user at frequency 0), whose reports the posterior step
(:func:`~bayesldp.heavy_hitters.pem.share_posterior`, an "other" category) already reads.  On
the client side TreeHist is then PEM's protocol (:class:`~bayesldp.heavy_hitters.PEM`) with
``eta``-bit steps and a holdout group; the two differ in the search: a threshold instead of a
fixed top ``k``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from bayesldp._validation import check_epsilon
from bayesldp.errors import InvalidInputError
from bayesldp.heavy_hitters.candidates import CandidateOLH, candidate_estimates
from bayesldp.heavy_hitters.encoding import ItemEncoder, PositionalEncoder, make_encoder
from bayesldp.heavy_hitters.pem import (
    MAX_FIRST_ROUND,
    PEM,
    HeavyHitters,
    PEMReports,
    PEMRound,
    _check_positive_int,
)
from bayesldp.mechanisms.hashing import MERSENNE_31, optimal_g


@dataclass(frozen=True)
class TreeHistLevel(PEMRound):
    """One level of the tree: prefix length, children estimated, their estimates, users, and
    the threshold ``tau_i`` they were held to.

    Examples
    --------
    One per level of :meth:`TreeHist.identify`:

    >>> import numpy as np
    >>> from bayesldp.heavy_hitters import TreeHist
    >>> words = np.array(["cat", "dog", "emu", "owl"], dtype=object)
    >>> people = np.random.default_rng(0).choice(words, 3000, p=[0.5, 0.3, 0.15, 0.05])
    >>> tree = TreeHist(epsilon=4.0, bits=8, eta=2)
    >>> level = tree.identify(tree.perturb(people, rng=1)).rounds[0]
    >>> level.prefix_length, level.candidates.tolist(), level.n, round(level.threshold, 4)
    (2, [0, 1, 2, 3], 600, 0.045)
    """

    threshold: float


class TreeHist(PEM):
    """TreeHist (Bassily, Nissim, Stemmer, Thakurta, NeurIPS 2017) over bayesldp's OLH.

    Parameters
    ----------
    epsilon : float
        Each user's budget: one OLH report (:meth:`realised_epsilon`).
    bits : int
        Code width, 1..30 (:class:`ItemEncoder`); default 24.
    eta : int
        Bits per level (1: the paper's binary tree, ``bits`` levels).
    z : float
        Threshold in standard errors of a zero frequency (``tau_i`` in the module docstring).
        With ``z = 4`` a prefix nobody holds passes a level with probability about ``3e-5``
        (normal tail) before the ``max_survivors`` cap.
    max_survivors : int
        At most this many prefixes kept per level (the largest estimates).
    final_share : float
        Share of the users, in ``(0, 1)``, in the final group (the survivors' estimates and the
        posterior's likelihood).
    key, max_length, encoder, g
        As :class:`PEM` (``encoder``: e.g. a :class:`PositionalEncoder`, in place of ``bits``,
        ``key`` and ``max_length``).

    Examples
    --------
    >>> import numpy as np
    >>> from bayesldp.heavy_hitters import TreeHist
    >>> rng = np.random.default_rng(0)
    >>> words = np.array(["cat", "dog", "emu"] + [f"w{i}" for i in range(500)], dtype=object)
    >>> weights = np.r_[[40.0, 25.0, 15.0], np.ones(500) / 25]
    >>> people = rng.choice(words, 20_000, p=weights / weights.sum())
    >>> tree = TreeHist(epsilon=4.0, bits=16, eta=2)
    >>> found = tree.identify(tree.perturb(people, rng=1))
    >>> sorted(tree.encoder.decode(found.codes[:3], words))
    ['cat', 'dog', 'emu']
    """

    _holdout_name = "final_share"

    def __init__(
        self,
        epsilon: float,
        *,
        bits: int | None = None,
        eta: int = 1,
        z: float = 4.0,
        max_survivors: int = 64,
        final_share: float = 0.2,
        key: bytes | str | None = None,
        max_length: int | None = None,
        encoder: ItemEncoder | PositionalEncoder | None = None,
        g: int | None = None,
    ) -> None:
        self.epsilon = check_epsilon(epsilon)
        self.eta = _check_positive_int(eta, "eta")
        self.max_survivors = _check_positive_int(max_survivors, "max_survivors")
        self.k = self.max_survivors
        self.encoder = make_encoder(encoder, bits, key, max_length)
        self.g = optimal_g(self.epsilon) if g is None else _check_positive_int(g, "g", 2)
        if self.g > MERSENNE_31:
            raise InvalidInputError(f"g: must be <= {MERSENNE_31}, got {self.g}")
        z = float(z)
        if not (math.isfinite(z) and z > 0):
            raise InvalidInputError(f"z: must be a positive number of standard errors, got {z}")
        self.z = z
        final_share = float(final_share)
        if not 0.0 < final_share < 1.0:
            raise InvalidInputError(f"final_share: must lie in (0, 1), got {final_share}")
        self.holdout = final_share
        width = self.encoder.bits
        self.prefix_lengths = (*range(min(self.eta, width), width, self.eta), width)
        if 2 ** self.prefix_lengths[0] > MAX_FIRST_ROUND:
            raise InvalidInputError(
                f"eta: the first level would read all 2^{self.prefix_lengths[0]} prefixes; at "
                "most 2^16: take a smaller eta"
            )
        if self.max_survivors * 2**self.eta > 1 << 20:
            raise InvalidInputError(
                f"max_survivors, eta: {self.max_survivors} survivors x 2^{self.eta} children "
                "is more than 2^20 candidates per level; take fewer"
            )

    @property
    def final_share(self) -> float:
        """Share of the users in the final group (PEM's ``holdout``)."""
        return self.holdout

    def __repr__(self) -> str:
        return (f"TreeHist(epsilon={self.epsilon:.12g}, {self._code()}, eta={self.eta}, "
                f"z={self.z:g}, max_survivors={self.max_survivors}, g={self.g}, "
                f"final_share={self.holdout:g})")  # fmt: skip

    def identify(self, reports: PEMReports) -> HeavyHitters:
        """Walk down the tree (module docstring); the last level's survivors, re-estimated from
        the final group, largest first.  ``rounds`` holds every level (:class:`TreeHistLevel`);
        no survivor at some level gives empty ``codes``."""
        self.check_reports(reports)
        levels: list[PEMRound] = []
        survivors = np.zeros(1, dtype=np.int64)
        previous = 0
        for i, s in enumerate(self.prefix_lengths):
            step = s - previous
            children = (survivors[:, None] << step | np.arange(2**step)[None, :]).ravel()
            mech = CandidateOLH(children, self.epsilon, self.g)
            level_reports = reports.round(i)
            n_i = len(level_reports)
            f = mech.estimate(level_reports)
            tau = self.z * math.sqrt(mech.oracle_variance(np.zeros(mech.k), n_i)[0])
            levels.append(TreeHistLevel(s, children, f, n_i, tau))
            order = np.argsort(-f, kind="stable")[: self.max_survivors]
            survivors, previous = children[order[f[order] > tau]], s
            if survivors.size == 0:
                empty = np.zeros(0, dtype=np.int64)
                return HeavyHitters(empty, np.zeros(0), levels)
        f = candidate_estimates(survivors, self.epsilon, self.g,
                                reports.round(self.estimation_group))  # fmt: skip
        order = np.argsort(-f, kind="stable")
        return HeavyHitters(survivors[order], f[order], levels)
