"""PEM: prefix-extending heavy-hitter discovery over OLH, and a posterior over what it found.

Wang, Li, Jha, "Locally Differentially Private Heavy Hitter Identification", IEEE TDSC 2019
(arXiv 1708.06674), section 5 (PEM, the prefix extending method).  Each item is a code of
``bits`` bits: a keyed hash (:class:`~bayesldp.heavy_hitters.ItemEncoder`, the default) or,
for fixed-length items over a known alphabet, the item read as a base-``|A|`` number
(:class:`~bayesldp.heavy_hitters.PositionalEncoder`; the rule: :class:`PEM`'s notes).  With
``gamma = ceil(log2 k)`` and ``eta`` bits per step, the users are split at random into ``G``
groups of (nearly) equal size; group ``i`` reports the first

.. math:: s_i = \\min(\\gamma + (i + 1)\\eta,\\ \\text{bits}), \\qquad i = 0..G-1,
          \\quad G = \\lceil (\\text{bits} - \\gamma) / \\eta \\rceil,

bits of its code through OLH over the ``2^{s_i}`` prefixes (one report per user, so each user
spends exactly OLH's epsilon; the group is drawn independently of the item).  The collector
estimates, from group ``i``'s reports, the frequency of each candidate prefix: in round 0 every
one of the ``2^{s_0}`` prefixes, in round ``i > 0`` the ``k`` survivors of round ``i - 1``
extended by ``s_i - s_{i-1}`` bits in every way; it keeps the ``k`` with the largest estimates
(the paper's rule).  The survivors of the last round (full codes) are the heavy hitters.

Each round's estimate is the unbiased OLH oracle (Wang et al., USENIX Security 2017) of the
candidates' frequencies among that group's users (:class:`CandidateOLH`); the group is a
uniform random sample of the users, so these are estimates of the population's frequencies.

The layout's cost.  Round ``i``'s estimates have standard deviation
``sigma = sqrt(V / (n / G))`` (``V`` OLH's per-user variance, the same in every round), and a
prefix is kept among ``C_i`` candidates only if its mass exceeds the largest noise of the
others, about ``sigma sqrt(2 ln C_i)``: the search pays ``sqrt(G)`` for its rounds and only
``sqrt(ln C_i)`` for its candidates per round.  Measured
(``benchmarks/investigations/results/pem_layout.md``: Zipf(1) over 2^20 and 2^32 items, n = 1e5, eps
1 and 2, k = 10, 20, 50, 20 seeds, paired differences beyond 2 standard errors, 9 cells): an extra
first round over the 16 prefixes of 4 bits (pure-ldp's first round) lowered recall in 3 cells and
raised the MSE in 8; ``eta = 5`` (4 rounds, twice the candidates) raised recall in 1 and the MSE in
5; 20-bit codes (4 rounds, the same candidates) raised recall in 7 and lowered the MSE in all 9.  So
the default keeps the paper's layout, and a narrower ``bits`` is the lever where the items are few:
a code is shared with another of ``N`` distinct items with probability about ``N 2^-bits``; for
fixed-length items over a known alphabet the positional code (:class:`PositionalEncoder`) is that
narrow width with no shared code at all (the rule: :class:`PEM`'s notes).

By default a share ``holdout`` (0.2) of the users forms one more group, the estimation group,
that reports its full code and takes no part in the search; :meth:`PEM.posterior` puts a
posterior on the shares of the found items and of everything else from that group's reports
alone, through :func:`bayesldp.fit` (:class:`CandidateOLH` with ``other=True`` gives the
likelihood).  With ``holdout=0`` (the paper's protocol) it reads the last round's reports, which
also chose the found codes (the winner's curse: ``holdout`` in :class:`PEM`).
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from bayesldp._report_stamp import STAMP_KEY, StampedReports, make_stamp
from bayesldp._validation import RNGLike, as_generator, check_epsilon, check_instance
from bayesldp.errors import InvalidInputError, InvalidTypeError
from bayesldp.heavy_hitters.candidates import CandidateOLH
from bayesldp.heavy_hitters.encoding import ItemEncoder, PositionalEncoder, make_encoder
from bayesldp.mechanisms.base import check_report_field
from bayesldp.mechanisms.hashing import MERSENNE_31, OLH, HashReports, optimal_g

#: the largest first-round domain (every prefix of ``s_0`` bits is a candidate)
MAX_FIRST_ROUND = 1 << 16
#: the default share of users in the estimation group (PEM's and SFP's ``holdout``)
DEFAULT_HOLDOUT = 0.2


@dataclass(frozen=True, eq=False)
class PEMReports(StampedReports):
    """PEM reports of ``n`` users: each user's group and its OLH report ``(a, b, y)``.

    The protocol's public parameters ride along, so a collector configured otherwise (another
    hash key, code width, round layout or budget) refuses the reports instead of misreading them.

    Attributes
    ----------
    group : ndarray of int64, shape (n,)
        The user's group (round) ``0..G-1``.
    a, b, y : ndarray of int64, shape (n,)
        The OLH report of the user's prefix (:class:`~bayesldp.HashReports`).
    fingerprint : str
        :attr:`ItemEncoder.fingerprint` of the code (hash key and width).
    prefix_lengths : tuple of int
        ``s_0, ..., s_{G-1}``.
    epsilon : float
        The OLH budget.
    g : int
        The OLH hash range.
    holdout : float
        The share of users in the estimation group (group ``G``, full codes), 0 if none.

    Examples
    --------
    What :meth:`PEM.perturb` returns: each user's group (the round it reports in) and an OLH
    report:

    >>> import numpy as np
    >>> from bayesldp.heavy_hitters import PEM
    >>> words = np.array(["cat", "dog", "emu", "owl"], dtype=object)
    >>> people = np.random.default_rng(0).choice(words, 3000, p=[0.5, 0.3, 0.15, 0.05])
    >>> pem = PEM(epsilon=4.0, k=2, bits=8, eta=2)
    >>> reports = pem.perturb(people, rng=1)
    >>> reports.group.shape, reports.prefix_lengths
    ((3000,), (3, 5, 7, 8))
    """

    group: np.ndarray
    a: np.ndarray
    b: np.ndarray
    y: np.ndarray
    fingerprint: str
    prefix_lengths: tuple[int, ...]
    epsilon: float
    g: int
    holdout: float = 0.0

    def __len__(self) -> int:
        return int(np.shape(self.y)[0])

    def to_frame(self) -> Any:
        """The reports as a pandas DataFrame of columns ``group, a, b, y``, one row per user:
        the report file ``bayesldp estimate --mechanism PEM`` (or TreeHist) reads, with the
        public parameters in ``attrs["bayesldp_protocol"]`` (:meth:`to_file` writes them)."""
        import pandas as pd

        frame = pd.DataFrame({"group": self.group, "a": self.a, "b": self.b, "y": self.y})
        frame.attrs[STAMP_KEY] = make_stamp(
            "PEMReports", fingerprint=self.fingerprint, prefix_lengths=self.prefix_lengths,
            epsilon=self.epsilon, g=self.g, holdout=self.holdout,
        )  # fmt: skip
        return frame

    def round(self, i: int) -> HashReports:
        """The OLH reports of group ``i``."""
        mask = np.asarray(self.group) == i
        return HashReports(self.a[mask], self.b[mask], self.y[mask])


@dataclass(frozen=True)
class PEMRound:
    """One round of the search: prefix length, candidate prefixes, their estimates, users.

    Examples
    --------
    One per round of :meth:`PEM.identify`:

    >>> import numpy as np
    >>> from bayesldp.heavy_hitters import PEM
    >>> words = np.array(["cat", "dog", "emu", "owl"], dtype=object)
    >>> people = np.random.default_rng(0).choice(words, 3000, p=[0.5, 0.3, 0.15, 0.05])
    >>> pem = PEM(epsilon=4.0, k=2, bits=8, eta=2)
    >>> first = pem.identify(pem.perturb(people, rng=1)).rounds[0]
    >>> first.prefix_length, first.candidates.tolist(), first.n
    (3, [0, 1, 2, 3, 4, 5, 6, 7], 600)
    """

    prefix_length: int
    candidates: np.ndarray
    frequencies: np.ndarray
    n: int


@dataclass(frozen=True)
class HeavyHitters:
    """What :meth:`PEM.identify` found.

    Attributes
    ----------
    codes : ndarray of int64, shape (k,)
        The found codes, largest estimated frequency first.
    frequencies : ndarray of float, shape (k,)
        Their unbiased OLH estimates from the last group (may be negative for weak ones).
    rounds : list of PEMRound
        Every round's candidates and estimates.

    Examples
    --------
    What :meth:`PEM.identify` returns:

    >>> import numpy as np
    >>> from bayesldp.heavy_hitters import PEM
    >>> words = np.array(["cat", "dog", "emu", "owl"], dtype=object)
    >>> people = np.random.default_rng(0).choice(words, 3000, p=[0.5, 0.3, 0.15, 0.05])
    >>> pem = PEM(epsilon=4.0, k=2, bits=8, eta=2)
    >>> found = pem.identify(pem.perturb(people, rng=1))
    >>> pem.encoder.decode(found.codes, words), found.frequencies.round(2).tolist()
    (['cat', 'dog'], [0.51, 0.28])
    """

    codes: np.ndarray
    frequencies: np.ndarray
    rounds: list[PEMRound] = field(repr=False)


@dataclass(frozen=True)
class SharePosterior:
    """Posterior of the shares of the found items and of "other" (:meth:`PEM.posterior`).

    Attributes
    ----------
    idata : arviz.InferenceData
        From :func:`bayesldp.fit`; ``theta`` has dim ``category`` with the labels, the last
        ``"other"``.
    threshold : float
        The share the probabilities below refer to.
    prob_above : xarray.DataArray
        ``Pr(theta_j > threshold | reports)`` for each found item (dim ``category``, no "other").

    Examples
    --------
    What :meth:`PEM.posterior` returns: the shares of the found items and of "other" (here
    under a flat ``Dirichlet(1)`` prior: with three categories the reports say little about the
    default adaptive prior's concentration, where NUTS may report a divergent transition):

    >>> import numpy as np
    >>> from bayesldp.heavy_hitters import PEM
    >>> words = np.array(["cat", "dog", "emu", "owl"], dtype=object)
    >>> people = np.random.default_rng(0).choice(words, 3000, p=[0.5, 0.3, 0.15, 0.05])
    >>> pem = PEM(epsilon=4.0, k=2, bits=8, eta=2)
    >>> reports = pem.perturb(people, rng=1)
    >>> found = pem.identify(reports)
    >>> shares = pem.posterior(reports, found, threshold=0.2, method="laplace", prior=1.0,
    ...                        random_seed=0)
    >>> shares.idata.posterior["theta"].shape[-1], shares.prob_above.values.round(2).tolist()
    (3, [1.0, 1.0])
    """

    idata: Any
    threshold: float
    prob_above: Any

    def interval(self, prob: float = 0.9) -> Any:
        """Equal-tailed ``prob`` posterior intervals of every share (dims ``category, bound``)."""
        import xarray as xr

        theta = self.idata.posterior["theta"]
        lo, hi = (1 - prob) / 2, (1 + prob) / 2
        q = theta.quantile([lo, hi], dim=("chain", "draw"))
        return xr.DataArray(q.values.T, dims=("category", "bound"),
                            coords={"category": theta["category"].values,
                                    "bound": ["lower", "upper"]})  # fmt: skip


def _check_share(value: object, name: str) -> float:
    """A share of the users: a real number (not a bool or a string)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise InvalidTypeError(f"{name}: expected a number in [0, 1), got {value!r}")
    return float(value)


def _check_positive_int(value: object, name: str, low: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise InvalidTypeError(f"{name}: expected an integer >= {low}, got {value!r}")
    if value < low:
        raise InvalidInputError(f"{name}: must be >= {low}, got {value}")
    return int(value)


class PEM:
    """Prefix extending method (Wang, Li, Jha, IEEE TDSC 2019, section 5) over bayesldp's OLH.

    Parameters
    ----------
    epsilon : float
        Each user's budget: one OLH report (see :meth:`mechanism`).
    k : int
        Heavy hitters to find, and survivors kept in each round (the paper's top-k rule).
    bits : int
        Code width, 1..30 (:class:`ItemEncoder`); default 24.
    eta : int
        Bits added per round.
    key : bytes or str
        The public hash key of the codes; default the package's.
    max_length : int
        Longest item, in bytes (UTF-8 for str); default 64.
    encoder : ItemEncoder or PositionalEncoder, optional
        The code itself, in place of ``bits``, ``key`` and ``max_length`` (giving both is
        refused): e.g. ``PositionalEncoder("0123456789abcdef", 5)`` for items of 5 hex digits
        (see "Which code" below).
    g : int, optional
        OLH hash range; default ``round(e^eps) + 1``.
    holdout : float
        Share of the users, in ``[0, 1)``, put in an extra estimation group (group ``G``) that
        reports its full code and takes no part in the search; :meth:`posterior` reads their
        ``n_h = round(holdout n)`` reports alone, and the ``G`` rounds share the other
        ``n - n_h``.  Default 0.2.  Why: the search keeps the ``k`` codes with the largest
        estimates, so the reports that chose them over-estimate them (the winner's curse); a
        posterior reading the held-out reports, drawn independently of the choice, is the
        posterior given those codes.  ``holdout=0`` is the paper's protocol (every user searches;
        the posterior reads the last round's reports, which also chose the final ``k``).
        Measured (``benchmarks/results/heavy_hitter_coverage.md``: the 10,000 most frequent
        English words of 4-8 letters in wordfreq's list, Zipf(1.1) shares, n = 1e5, k = 10, 20
        repeats, 90% intervals): with 0 "other" was covered in 0, 1 and 18 of 20 runs at eps 1,
        2 and 4 and found codes no word has got posterior means of 0.025, 0.012 and 0.004 on
        average (they take the mass "other" loses); with 0.2 "other" 17, 17 and 18 of 20, those
        codes 0.0034, 0.0023 and 0.0013, and the found words' intervals covered 48/54, 94/106
        and 175/190 (0.89, 0.89, 0.92; with 0: 0.89, 0.93, 0.91).  The price is the search's
        users: each round's standard deviation grows by ``1 / sqrt(1 - holdout)`` (1.12 at
        0.2), and recall of the true top 10 went 0.31 -> 0.27, 0.57 -> 0.53, 0.93 -> 0.93.
        0.1 covered as well (recall 0.30, 0.58, 0.88: within noise of 0.2's) with wider
        posteriors and false positives' means 1.2-1.4 times 0.2's.  A found code no one holds
        (share 0, in no equal-tailed interval) gets a posterior mean near 0.

    Notes
    -----
    Which code.  Use the positional code (:class:`PositionalEncoder`: the item read as a
    base-``|A|`` number, ``ceil(L log2 |A|)`` bits) when the items have a fixed length ``L``
    over a known alphabet ``A`` and that width is at most the hash code's (24 bits by default):
    it needs fewer rounds, and the found codes are the items themselves (no candidate list,
    no collision).  Otherwise use the keyed hash (:class:`ItemEncoder`, the default): for items
    of varying length, for items wider than the hash code (past 30 bits no positional code
    fits OLH), and for items sharing common beginnings (a positional prefix piles every item
    starting ``"http://www."`` into one candidate for several rounds; the hash spreads them).
    Measured in ``benchmarks/investigations/results/pem_layout.md`` (Zipf(1) over 2^20 items
    labelled by 5 hex digits, n = 1e5, 20 seeds, paired differences beyond 2 standard errors):
    20-bit codes (4 rounds) against the 24-bit hash (5 rounds) raised recall in 4 of its 6 cells
    there (eps 2, k = 10: 0.340 -> 0.400; eps 1, k = 20: 0.075 -> 0.093) and lowered the MSE in all
    6; there they were a 20-bit hash, which shares codes between the 2^20 items; the positional code
    (the same 4 rounds, no collision) raised recall against the 24-bit hash in 4 of the 6 cells (eps
    1, k = 10: 0.140 -> 0.200) and lowered the MSE in all 6, and under this rule PEM is behind
    pure-ldp's PEM in none of the file's 9 cells.

    Examples
    --------
    >>> import numpy as np
    >>> from bayesldp.heavy_hitters import PEM
    >>> rng = np.random.default_rng(0)
    >>> words = np.array(["cat", "dog", "emu"] + [f"w{i}" for i in range(500)], dtype=object)
    >>> weights = 1 / np.arange(1, words.size + 1)  # Zipf(1)
    >>> people = rng.choice(words, 20_000, p=weights / weights.sum())
    >>> pem = PEM(epsilon=4.0, k=3, bits=16, eta=4)
    >>> found = pem.identify(pem.perturb(people, rng=1))
    >>> sorted(pem.encoder.decode(found.codes, words))
    ['cat', 'dog', 'emu']
    """

    #: what errors call ``holdout`` (TreeHist: its final share)
    _holdout_name = "holdout"

    def __init__(
        self,
        epsilon: float,
        k: int = 10,
        *,
        bits: int | None = None,
        eta: int = 4,
        key: bytes | str | None = None,
        max_length: int | None = None,
        encoder: ItemEncoder | PositionalEncoder | None = None,
        g: int | None = None,
        holdout: float = DEFAULT_HOLDOUT,
    ) -> None:
        self.epsilon = check_epsilon(epsilon)
        self.k = _check_positive_int(k, "k")
        self.eta = _check_positive_int(eta, "eta")
        self.encoder = make_encoder(encoder, bits, key, max_length)
        self.g = optimal_g(self.epsilon) if g is None else _check_positive_int(g, "g", 2)
        if self.g > MERSENNE_31:
            raise InvalidInputError(f"g: must be <= {MERSENNE_31}, got {self.g}")
        holdout = _check_share(holdout, "holdout")
        if not 0.0 <= holdout < 1.0:
            raise InvalidInputError(f"holdout: must lie in [0, 1), got {holdout}")
        self.holdout = holdout
        gamma = math.ceil(math.log2(self.k)) if self.k > 1 else 0
        first = min(gamma + self.eta, self.encoder.bits)
        self.prefix_lengths = (*range(first, self.encoder.bits, self.eta), self.encoder.bits)
        if 2 ** self.prefix_lengths[0] > MAX_FIRST_ROUND:
            raise InvalidInputError(
                f"eta: the first round would read all 2^{self.prefix_lengths[0]} prefixes "
                f"(gamma = ceil(log2 k) = {gamma} plus eta = {self.eta}); at most 2^16: take "
                "a smaller eta or k"
            )

    def __repr__(self) -> str:
        return (f"PEM(epsilon={self.epsilon:.12g}, k={self.k}, {self._code()}, "
                f"eta={self.eta}, g={self.g}, rounds={self.prefix_lengths}, "
                f"holdout={self.holdout:g})")  # fmt: skip

    def _code(self) -> str:
        """The code in a repr: ``bits=24`` for the hash, the encoder when positional."""
        return (
            f"encoder={self.encoder!r}" if self.encoder.names_items else f"bits={self.encoder.bits}"
        )

    @property
    def n_rounds(self) -> int:
        """Number of rounds ``G`` (groups of the search)."""
        return len(self.prefix_lengths)

    @property
    def n_groups(self) -> int:
        """``G``, plus one for the estimation group when ``holdout > 0``."""
        return self.n_rounds + int(self.holdout > 0)

    @property
    def estimation_group(self) -> int:
        """The group :meth:`posterior` reads: ``G`` with a holdout, else the last round's."""
        return self.n_groups - 1

    def _length(self, i: int) -> int:
        return self.prefix_lengths[i] if i < self.n_rounds else self.encoder.bits

    def mechanism(self, i: int) -> OLH:
        """The OLH through which group ``i`` reports its ``s_i``-bit prefix (the estimation
        group: its full code)."""
        return OLH(2 ** self._length(i), self.epsilon, self.g)

    def realised_epsilon(self) -> float:
        """Each user's exact epsilon: every user sends one report, through its group's OLH, and
        the group is drawn independently of the item, so a user's channel is the mixture, with
        item-free weights, of the groups' channels on disjoint outputs; its epsilon is the
        largest of theirs (each from :meth:`bayesldp.OLH.realised_epsilon`)."""
        return max(self.mechanism(i).realised_epsilon() for i in range(self.n_groups))

    # ------------------------------------------------------------------ client
    def perturb(self, items: Any, rng: RNGLike = None) -> PEMReports:
        """Encode, split the users into ``G`` random groups of sizes differing by at most one,
        and report each group's prefix through its OLH (vectorised; a loop over groups only)."""
        codes = self.encoder.encode(items)
        return self.perturb_codes(codes, rng)

    def perturb_codes(self, codes: Any, rng: RNGLike = None) -> PEMReports:
        """:meth:`perturb` for users whose codes (``self.encoder.encode``) are already known."""
        codes = np.asarray(codes)
        if codes.ndim != 1 or codes.dtype.kind not in "iu":
            raise InvalidInputError("codes: expected a 1-d array of integer codes")
        top = 2**self.encoder.bits - 1
        if codes.size and (codes.min() < 0 or codes.max() > top):
            bad = codes.min() if codes.min() < 0 else codes.max()
            raise InvalidInputError(
                f"codes: must lie in 0..{top} (bits = {self.encoder.bits}), got {bad}"
            )
        codes = codes.astype(np.int64)
        n, n_rounds = codes.size, self.n_rounds
        n_hold = round(self.holdout * n)
        if n - n_hold < n_rounds or (self.holdout > 0 and n_hold == 0):
            raise InvalidInputError(
                f"items: {n} users cannot fill the {self.n_groups} groups of rounds "
                f"{self.prefix_lengths} (holdout {self.holdout:g}); PEM needs at least one user "
                "per group"
            )
        gen = as_generator(rng)
        perm = gen.permutation(n)
        group = np.empty(n, dtype=np.int64)
        group[perm[:n_hold]] = n_rounds
        group[perm[n_hold:]] = np.arange(n - n_hold) % n_rounds
        a, b, y = (np.empty(n, dtype=np.int64) for _ in range(3))
        bits = self.encoder.bits
        for i in range(self.n_groups):
            mask = group == i
            rep = self.mechanism(i).perturb(codes[mask] >> (bits - self._length(i)), gen)
            a[mask], b[mask], y[mask] = rep.a, rep.b, rep.y
        return PEMReports(group, a, b, y, self.encoder.fingerprint, self.prefix_lengths,
                          self.epsilon, self.g, self.holdout)  # fmt: skip

    # ------------------------------------------------------------------ aggregator
    def check_parameters(self, fingerprint: str, prefix_lengths: Any, epsilon: float, g: int,
                         holdout: float) -> None:  # fmt: skip
        """Refuse reports made with other public parameters (those :class:`PEMReports` and a
        report file's stamp carry), in one line naming the first difference."""
        name, share = type(self).__name__, self._holdout_name
        if fingerprint != self.encoder.fingerprint:
            raise InvalidInputError(
                f"reports: made with code fingerprint {fingerprint}, this {name}'s is "
                f"{self.encoder.fingerprint} ({self.encoder!r}); another code (hash key or bits, "
                "or positional alphabet or length)"
            )
        if tuple(prefix_lengths) != self.prefix_lengths:
            raise InvalidInputError(
                f"reports: made with rounds of prefix lengths {tuple(prefix_lengths)}, this "
                f"{name} uses {self.prefix_lengths} (another layout: k, eta or bits)"
            )
        if g != self.g or not math.isclose(epsilon, self.epsilon, rel_tol=1e-12):
            raise InvalidInputError(
                f"reports: made with OLH epsilon={epsilon:.12g}, g={g}; this {name} uses "
                f"epsilon={self.epsilon:.12g}, g={self.g}"
            )
        if not math.isclose(holdout, self.holdout, abs_tol=1e-12):
            raise InvalidInputError(
                f"reports: made with {share}={holdout:g}, this {name} uses {share}={self.holdout:g}"
            )

    def check_reports(self, reports: Any) -> PEMReports:
        """Refuse reports of another protocol (key, width, rounds, budget) or with empty groups."""
        check_instance(reports, PEMReports, "reports", "PEMReports from PEM.perturb")
        self.check_parameters(reports.fingerprint, reports.prefix_lengths, reports.epsilon,
                              reports.g, reports.holdout)  # fmt: skip
        group = check_report_field(reports, "group", 0, self.n_groups - 1)
        n = group.size
        for name, hi in (("a", MERSENNE_31 - 1), ("b", MERSENNE_31 - 1), ("y", self.g - 1)):
            check_report_field(reports, name, int(name == "a"), hi, ("group", n))
        sizes = np.bincount(group, minlength=self.n_groups)
        if np.any(sizes == 0):
            i = int(np.flatnonzero(sizes == 0)[0])
            what = (f"round {i}, prefix length {self.prefix_lengths[i]}" if i < self.n_rounds
                    else "the estimation group")  # fmt: skip
            raise InvalidInputError(
                f"reports: group {i} ({what}) has no reports; every group needs at least one"
            )
        return reports

    def identify(self, reports: PEMReports) -> HeavyHitters:
        """Run the rounds: estimate every candidate prefix, keep the top ``k``, extend.

        Returns the last round's top ``k`` codes with their OLH estimates.
        """
        self.check_reports(reports)
        rounds: list[PEMRound] = []
        survivors = np.zeros(1, dtype=np.int64)
        previous = 0
        for i, s in enumerate(self.prefix_lengths):
            step = s - previous
            candidates = (survivors[:, None] << step | np.arange(2**step)[None, :]).ravel()
            mech = CandidateOLH(candidates, self.epsilon, self.g)
            round_reports = reports.round(i)
            f = mech.estimate(round_reports)
            rounds.append(PEMRound(s, candidates, f, len(round_reports)))
            top = np.argsort(-f, kind="stable")[: self.k]
            survivors, previous = candidates[top], s
        last = rounds[-1]
        top = np.argsort(-last.frequencies, kind="stable")[: self.k]
        return HeavyHitters(last.candidates[top], last.frequencies[top], rounds)

    # ------------------------------------------------------------------ posterior
    def labels(self, codes: Any) -> list[str]:
        """A name for each code: the item with a positional code (:class:`PositionalEncoder`,
        no dictionary), else (or for a code no item has) the code in hex."""
        codes = np.asarray(codes, dtype=np.int64).ravel()
        hexes = [f"0x{int(c):0{(self.encoder.bits + 3) // 4}x}" for c in codes]
        if not self.encoder.names_items:
            return hexes
        items = self.encoder.decode(codes)
        return [hx if x is None else x for hx, x in zip(hexes, items, strict=True)]

    def final_tally(self, reports: PEMReports, codes: Any) -> Any:
        """The estimation group's reports (:attr:`estimation_group`) read against ``codes``
        plus "other" (:class:`CandidateOLH` with ``other=True``)."""
        self.check_reports(reports)
        mech = CandidateOLH(np.asarray(codes, dtype=np.int64), self.epsilon, self.g, other=True)
        return mech.tally(reports.round(self.estimation_group))

    def posterior(
        self,
        reports: PEMReports,
        found: HeavyHitters,
        threshold: float = 0.01,
        *,
        labels: Any = None,
        **fit_kwargs: Any,
    ) -> SharePosterior:
        """Posterior of the found items' shares and of "other", by :func:`bayesldp.fit`.

        The likelihood is the estimation group's OLH reports (:attr:`estimation_group`) read
        against the found codes and an "other" category (:class:`CandidateOLH`,
        ``other=True``: OLH's row for an item whose hash value is uniform).  Only that group's
        reports enter: the rounds' reports chose the candidates.  Without a ``holdout`` the
        estimation group is the last round's, which also chose the final ``k`` (see
        ``holdout`` in :class:`PEM`).

        Parameters
        ----------
        reports : PEMReports
        found : HeavyHitters
            From :meth:`identify` on the same reports.
        threshold : float
            ``prob_above`` is ``Pr(share > threshold | reports)``.
        labels : sequence, optional
            One label per found code (default: the items themselves with a positional code,
            else the codes in hex); "other" is appended.
        **fit_kwargs
            Passed to :func:`bayesldp.fit` (``draws``, ``chains``, ``method``, ``random_seed``...).
        """
        if not isinstance(found, HeavyHitters):
            raise InvalidTypeError(
                f"found: expected HeavyHitters from {type(self).__name__}.identify, got "
                f"{type(found).__name__}"
            )
        codes = np.asarray(found.codes, dtype=np.int64)
        if labels is None:
            labels = self.labels(codes)
        return share_posterior(lambda: self.final_tally(reports, codes), codes.size, labels,
                               threshold, **fit_kwargs)  # fmt: skip


def share_posterior(
    tally: Any, m: int, labels: Any, threshold: float, **fit_kwargs: Any
) -> SharePosterior:
    """The posterior step every discovery shares: :func:`bayesldp.fit` on ``tally()`` (a
    :class:`CandidateOLH` tally over ``m`` found codes and "other"), and ``Pr(share_j >
    threshold)`` for each found item.  ``tally`` is a callable, run after the arguments are
    checked."""
    from bayesldp.bayes import fit

    threshold = float(threshold)
    if not 0.0 <= threshold < 1.0:
        raise InvalidInputError(f"threshold: must lie in [0, 1), got {threshold}")
    if m == 0:
        raise InvalidInputError("found: holds no items; there is nothing to put a posterior on")
    labels = [*map(str, labels), "other"]
    if len(labels) != m + 1:
        raise InvalidInputError(f"labels: expected {m} labels, got {len(labels) - 1}")
    idata = fit(tally(), labels=labels, **fit_kwargs)
    theta = idata.posterior["theta"].isel(category=slice(0, m))
    prob = (theta > threshold).mean(dim=("chain", "draw"))
    return SharePosterior(idata, threshold, prob)
