"""SFP: Apple's Sequence Fragment Puzzle, fragments through the count-mean sketch.

Apple Differential Privacy Team, "Learning with Privacy at Scale", Apple Machine Learning
Journal 1(8), 2017, section "Sequence Fragment Puzzle".  An item (str as UTF-8, or bytes) of at
most ``max_length`` bytes is padded with NUL bytes to ``P f`` bytes, ``P = ceil(max_length /
f)`` fragments of ``f = fragment_length`` bytes; its **tag** ``r`` is the top ``hash_bits``
bits of its keyed-hash code (:class:`~bayesldp.heavy_hitters.ItemEncoder`), a short hash of the
whole item.

Client.  The users are split at random (independently of their items) into three groups:

* fragment users (the rest): each is given a position ``l`` in ``0..P-1`` (balanced, public) and
  reports the value ``r 2^{8f} + fragment_l`` (the tag joined to the ``l``-th fragment) through
  Apple's count-mean sketch (:class:`~bayesldp.heavy_hitters.CandidateCMS`, i.e.
  :class:`bayesldp.CMS` with width ``m``, ``k_hash`` hash rows, seed ``hash_seed``);
* word users (share ``word_share``): report their full code through OLH
  (:class:`bayesldp.OLH`), where Apple uses a second sketch (see below);
* an estimation group (share ``holdout``, 0.2 by default; none with 0) reporting its full code
  through OLH too, read by :meth:`SFP.posterior` only: the word users' reports chose the final
  ``k``, so a posterior reading them would be pulled upward (see :class:`PEM`'s ``holdout``).

Each user sends **one** report (Apple's devices send both a fragment and the word, each at its
own budget), so each user's epsilon is exactly the mechanisms' ``epsilon``
(:meth:`SFP.realised_epsilon` computes it from their channels).

Collector.  For each position ``l``, Apple's sketch estimate of every value ``(r, fragment)``
(``2^hash_bits`` tags times the fragments over ``alphabet``), the ``fragments`` largest kept.
For each tag kept at every position, every choice of one kept fragment per position is a
candidate (the puzzle); a candidate survives if its trailing NULs removed it is an item whose
own tag is ``r`` (a wrong assembly passes with probability ``2^-hash_bits``).  The survivors'
codes are estimated from the word users (:class:`~bayesldp.heavy_hitters.CandidateOLH`), the
``k`` largest returned.  Apple confirms the assembled words with a count-mean sketch of the
whole word; OLH over the codes here does the same, and lets the posterior step
(:func:`~bayesldp.heavy_hitters.pem.share_posterior`, an "other" category) read those reports.

Limits.  Items may not end in a NUL byte (it is the padding), nor, with an ``alphabet``, hold
a byte outside it; each position's domain, ``2^hash_bits`` times the number of fragments, is at
most ``2^20`` (``fragment_length = 1`` over all 256 bytes with 8-bit tags: 65,536).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from bayesldp._report_stamp import STAMP_KEY, StampedReports, make_stamp
from bayesldp._validation import RNGLike, as_generator, check_epsilon, check_instance
from bayesldp.errors import InvalidInputError, InvalidTypeError
from bayesldp.heavy_hitters.candidates import CandidateCMS, CandidateOLH, candidate_estimates
from bayesldp.heavy_hitters.encoding import DEFAULT_KEY, ItemEncoder
from bayesldp.heavy_hitters.pem import (
    DEFAULT_HOLDOUT,
    HeavyHitters,
    SharePosterior,
    _check_positive_int,
    _check_share,
    share_posterior,
)
from bayesldp.mechanisms.base import check_report_field
from bayesldp.mechanisms.hashing import MERSENNE_31, OLH, HashReports, optimal_g
from bayesldp.mechanisms.sketch import CMSReports

#: the largest domain of one position (tags times fragments)
MAX_POSITION_DOMAIN = 1 << 20
#: the largest number of assembled candidates
MAX_ASSEMBLED = 1 << 16


@dataclass(frozen=True, eq=False)
class SFPReports(StampedReports):
    """SFP reports: the fragment users' positions and CMS reports, the word users' (and the
    estimation group's) OLH reports, and the protocol's public parameters.

    Attributes
    ----------
    position : ndarray of int64
        Each fragment user's position ``0..P-1``.
    fragments : CMSReports
        Their count-mean-sketch reports ``(row, bits)``, packed one bit per entry by
        :meth:`SFP.perturb` (``fragments.packed``, ``ceil(m/8)`` bytes a user;
        ``fragments.bits`` unpacks them); int8 ones are read the same.
    word : HashReports
        The word users' OLH reports of their codes.
    holdout : HashReports or None
        The estimation group's OLH reports (``holdout > 0``).
    fingerprint : str
        :attr:`ItemEncoder.fingerprint` (hash key and code width).
    layout : tuple of (name, value)
        ``max_length``, ``fragment_length``, ``hash_bits``, ``alphabet``, ``m``, ``k_hash``,
        ``hash_seed``, ``word_share``, ``holdout``.
    epsilon, g : float, int
        The budget and OLH's hash range.

    Examples
    --------
    What :meth:`SFP.perturb` returns:

    >>> import numpy as np
    >>> from bayesldp.heavy_hitters import SFP
    >>> words = np.array(["cat", "dog", "emu", "owl"], dtype=object)
    >>> people = np.random.default_rng(0).choice(words, 3000, p=[0.5, 0.3, 0.15, 0.05])
    >>> sfp = SFP(epsilon=4.0, k=2, max_length=3, m=64)
    >>> reports = sfp.perturb(people, rng=1)
    >>> reports.position.shape, type(reports.fragments).__name__, type(reports.word).__name__
    ((1800,), 'CMSReports', 'HashReports')
    """

    position: np.ndarray
    fragments: CMSReports
    word: HashReports
    holdout: HashReports | None
    fingerprint: str
    layout: tuple[tuple[str, Any], ...]
    epsilon: float
    g: int

    def __len__(self) -> int:
        extra = 0 if self.holdout is None else len(self.holdout.y)
        return len(self.position) + len(self.word.y) + extra

    def to_frame(self) -> Any:
        """The reports as a pandas DataFrame, one row per user: the report file ``bayesldp
        estimate --mechanism SFP`` reads.

        Columns ``kind`` (``fragment``, ``word`` or ``holdout``), ``position``, ``row``,
        ``bits`` (a fragment user's position, hash row and ``m`` sketch entries as a string of
        ``0`` and ``1``, character ``u`` for entry ``u``, ``1`` for +1) and ``a``, ``b``, ``y``
        (a word or holdout user's OLH report).  The cells a row's kind does not use hold ``0``
        (``bits``: ``-``), which no report of that column can be (OLH's ``a`` is at least 1,
        a sketch entry is -1 or +1).  The public parameters are in
        ``attrs["bayesldp_protocol"]`` (:meth:`to_file` writes them)."""
        import pandas as pd

        olh = [("word", self.word)] + ([("holdout", self.holdout)] if self.holdout else [])
        n_frag = len(self.position)
        n = n_frag + sum(len(rep.y) for _, rep in olh)
        kind = np.empty(n, dtype=object)
        kind[:n_frag] = "fragment"
        position, row, a, b, y = (np.zeros(n, dtype=np.int64) for _ in range(5))
        position[:n_frag], row[:n_frag] = self.position, self.fragments.row
        text = np.full(n, "-", dtype=object)
        if n_frag:
            frag = self.fragments
            if frag.is_packed:  # '0' + bit, no int8 entries in between
                chars = np.unpackbits(np.asarray(frag.packed), axis=1, count=frag.m,
                                      bitorder="little")  # fmt: skip
                chars += ord("0")
            else:
                chars = np.where(np.asarray(frag.bits) > 0, ord("1"), ord("0")).astype(np.uint8)
            rows = np.ascontiguousarray(chars).view(f"S{chars.shape[1]}").ravel()
            text[:n_frag] = rows.astype(str)
        start = n_frag
        for name, rep in olh:
            stop = start + len(rep.y)
            kind[start:stop] = name
            a[start:stop], b[start:stop], y[start:stop] = rep.a, rep.b, rep.y
            start = stop
        frame = pd.DataFrame({"kind": kind, "position": position, "row": row, "bits": text,
                              "a": a, "b": b, "y": y})  # fmt: skip
        frame.attrs[STAMP_KEY] = make_stamp(
            "SFPReports", fingerprint=self.fingerprint, layout=dict(self.layout),
            epsilon=self.epsilon, g=self.g,
        )  # fmt: skip
        return frame

    def at(self, position: int) -> CMSReports:
        """The CMS reports of the fragment users at ``position`` (in the fragments' form)."""
        return self.fragments.subset(np.asarray(self.position) == position)


@dataclass(frozen=True)
class FragmentRound:
    """One position: the kept values ``r 2^{8f} + fragment``, their sketch estimates, users.

    Examples
    --------
    One per fragment position of :meth:`SFP.identify`:

    >>> import numpy as np
    >>> from bayesldp.heavy_hitters import SFP
    >>> words = np.array(["cat", "dog", "emu", "owl"], dtype=object)
    >>> people = np.random.default_rng(0).choice(words, 3000, p=[0.5, 0.3, 0.15, 0.05])
    >>> sfp = SFP(epsilon=4.0, k=2, max_length=3, m=64)
    >>> first = sfp.identify(sfp.perturb(people, rng=1)).rounds[0]
    >>> type(first).__name__, first.position
    ('FragmentRound', 0)
    """

    position: int
    values: np.ndarray
    frequencies: np.ndarray
    n: int


@dataclass(frozen=True)
class SFPHeavyHitters(HeavyHitters):
    """What :meth:`SFP.identify` found: ``codes`` and ``frequencies`` as
    :class:`HeavyHitters` (OLH estimates from the word users), the items themselves
    (``items``, bytes), ``rounds`` one :class:`FragmentRound` per position, and
    ``n_candidates`` the number of assembled candidates that passed the tag check.

    Examples
    --------
    What :meth:`SFP.identify` returns, the items themselves among them:

    >>> import numpy as np
    >>> from bayesldp.heavy_hitters import SFP
    >>> words = np.array(["cat", "dog", "emu", "owl"], dtype=object)
    >>> people = np.random.default_rng(0).choice(words, 3000, p=[0.5, 0.3, 0.15, 0.05])
    >>> sfp = SFP(epsilon=4.0, k=2, max_length=3, m=64)
    >>> found = sfp.identify(sfp.perturb(people, rng=1))
    >>> sorted(found.items), len(found.codes)
    ([b'cat', b'dog'], 2)
    """

    items: list[bytes] = field(default_factory=list)
    n_candidates: int = 0


class SFP:
    """Apple's Sequence Fragment Puzzle (2017) over bayesldp's count-mean sketch and OLH.

    Parameters
    ----------
    epsilon : float
        Each user's budget (one report: a fragment through CMS, or the code through OLH).
    k : int
        Heavy hitters returned.
    max_length : int
        Longest item in bytes (UTF-8 for str).
    fragment_length : int
        Bytes per fragment ``f`` (Apple: 2 characters).
    hash_bits : int
        Bits of the tag ``r`` (Apple: 8); at most ``bits``.
    alphabet : bytes or str, optional
        The bytes items are made of (default: all 256); NUL, the padding, is added.
    fragments : int, optional
        Values kept per position (default ``2 k``).
    word_share : float
        Share of the users reporting their whole code, in ``(0, 1)``.
    holdout : float
        Share of the users in an estimation group, in ``[0, 1 - word_share)``; default 0.2, as
        :class:`PEM`'s ``holdout`` (which states why and what it costs); 0 is Apple's protocol,
        the posterior then reading the word users, whose reports chose the final ``k``.
    bits, key : int, bytes or str
        The code (:class:`ItemEncoder`); the tag is its top ``hash_bits`` bits.
    m, k_hash, hash_seed : int
        The count-mean sketch (:class:`bayesldp.CMS`; Apple: ``m = 1024``).
    g : int, optional
        OLH hash range (default ``round(e^eps) + 1``).

    Examples
    --------
    >>> import numpy as np
    >>> from bayesldp.heavy_hitters import SFP
    >>> rng = np.random.default_rng(0)
    >>> words = np.array(["cat", "dog", "emu"] + [f"w{i}" for i in range(500)], dtype=object)
    >>> weights = np.r_[[40.0, 25.0, 15.0], np.ones(500) / 25]
    >>> people = rng.choice(words, 20_000, p=weights / weights.sum())
    >>> sfp = SFP(epsilon=4.0, k=3, max_length=4, m=256)
    >>> sorted(sfp.identify(sfp.perturb(people, rng=1)).items)
    [b'cat', b'dog', b'emu']
    """

    def __init__(
        self,
        epsilon: float,
        k: int = 10,
        *,
        max_length: int = 10,
        fragment_length: int = 1,
        hash_bits: int = 8,
        alphabet: bytes | str | None = None,
        fragments: int | None = None,
        word_share: float = 0.2,
        holdout: float = DEFAULT_HOLDOUT,
        bits: int = 24,
        key: bytes | str = DEFAULT_KEY,
        m: int = 1024,
        k_hash: int = 16,
        hash_seed: int = 0,
        g: int | None = None,
    ) -> None:
        self.epsilon = check_epsilon(epsilon)
        self.k = _check_positive_int(k, "k")
        self.encoder = ItemEncoder(bits, key, max_length)
        self.fragment_length = _check_positive_int(fragment_length, "fragment_length")
        self.hash_bits = _check_positive_int(hash_bits, "hash_bits")
        if self.hash_bits > self.encoder.bits:
            raise InvalidInputError(
                f"hash_bits: the tag is the top bits of the code, so at most bits = "
                f"{self.encoder.bits}, got {self.hash_bits}"
            )
        if self.hash_bits + 8 * self.fragment_length > 30:
            raise InvalidInputError(
                f"hash_bits, fragment_length: a value has hash_bits + 8 fragment_length = "
                f"{self.hash_bits + 8 * self.fragment_length} bits; the sketch takes at most 30"
            )
        self.symbols = self._check_alphabet(alphabet)
        domain = 2**self.hash_bits * self.symbols.size**self.fragment_length
        if domain > MAX_POSITION_DOMAIN:
            raise InvalidInputError(
                f"fragment_length, alphabet: each position has 2^{self.hash_bits} tags x "
                f"{self.symbols.size}^{self.fragment_length} fragments = {domain:,} values, more "
                "than 2^20; give a smaller alphabet, shorter fragments or fewer hash_bits"
            )
        self.fragments = _check_positive_int(2 * self.k if fragments is None else fragments,
                                             "fragments")  # fmt: skip
        word_share = _check_share(word_share, "word_share")
        holdout = _check_share(holdout, "holdout")
        if not 0.0 < word_share < 1.0:
            raise InvalidInputError(f"word_share: must lie in (0, 1), got {word_share}")
        if not 0.0 <= holdout < 1.0 - word_share:
            raise InvalidInputError(
                f"holdout: must lie in [0, 1 - word_share) = [0, {1 - word_share:g}), got {holdout}"
            )
        self.word_share, self.holdout = word_share, holdout
        self.n_positions = math.ceil(self.encoder.max_length / self.fragment_length)
        self.g = optimal_g(self.epsilon) if g is None else _check_positive_int(g, "g", 2)
        if self.g > MERSENNE_31:
            raise InvalidInputError(f"g: must be <= {MERSENNE_31}, got {self.g}")
        self.sketch_params = {
            "m": _check_positive_int(m, "m", 2),
            "k_hash": _check_positive_int(k_hash, "k_hash"),
            "hash_seed": _check_positive_int(hash_seed, "hash_seed", 0),
        }

    @staticmethod
    def _check_alphabet(alphabet: Any) -> np.ndarray:
        if alphabet is None:
            return np.arange(256, dtype=np.int64)
        if isinstance(alphabet, str):
            alphabet = alphabet.encode("utf-8")
        if not isinstance(alphabet, bytes | bytearray) or not alphabet:
            raise InvalidTypeError(f"alphabet: expected non-empty bytes or str, got {alphabet!r}")
        return np.union1d(np.frombuffer(bytes(alphabet), dtype=np.uint8), [0]).astype(np.int64)

    @property
    def layout(self) -> tuple[tuple[str, Any], ...]:
        """The public parameters stamped on the reports (besides key, width and budget)."""
        return (("max_length", self.encoder.max_length),
                ("fragment_length", self.fragment_length), ("hash_bits", self.hash_bits),
                ("alphabet", bytes(self.symbols.astype(np.uint8)).hex()),
                *self.sketch_params.items(), ("word_share", self.word_share),
                ("holdout", self.holdout))  # fmt: skip

    def __repr__(self) -> str:
        return (f"SFP(epsilon={self.epsilon:.12g}, k={self.k}, max_length="
                f"{self.encoder.max_length}, fragment_length={self.fragment_length}, hash_bits="
                f"{self.hash_bits}, fragments={self.fragments}, word_share={self.word_share:g}, "
                f"holdout={self.holdout:g}, bits={self.encoder.bits}, m={self.sketch_params['m']}"
                f", k_hash={self.sketch_params['k_hash']}, g={self.g})")  # fmt: skip

    # ------------------------------------------------------------------ mechanisms
    @cached_property
    def position_values(self) -> np.ndarray:
        """Every value ``r 2^{8f} + fragment`` a position can hold (the sketch's candidates)."""
        f = self.fragment_length
        frag = np.zeros(1, dtype=np.int64)
        for _ in range(f):
            frag = (frag[:, None] << 8 | self.symbols[None, :]).ravel()
        tags = np.arange(2**self.hash_bits, dtype=np.int64)
        return (tags[:, None] << (8 * f) | frag[None, :]).ravel()

    @cached_property
    def fragment_mechanism(self) -> CandidateCMS:
        """The count-mean sketch of the fragment users, read against :attr:`position_values`."""
        return CandidateCMS(self.position_values, self.epsilon, **self.sketch_params)

    def word_mechanism(self) -> OLH:
        """The OLH of the word users (and of the estimation group) over the codes."""
        return OLH(2**self.encoder.bits, self.epsilon, self.g)

    def realised_epsilon(self) -> float:
        """Each user's exact epsilon, from the channels.

        A user's group and position are drawn independently of the item, so the user's channel
        is a mixture, with item-free weights, of channels on disjoint outputs: the sketch's at
        each position and OLH's.  Its epsilon is the largest of theirs; each position's inputs
        are values of :attr:`position_values`, whose sketch channel has
        ``fragment_mechanism.realised_epsilon()``.
        """
        return max(self.fragment_mechanism.realised_epsilon(),
                   self.word_mechanism().realised_epsilon())  # fmt: skip

    # ------------------------------------------------------------------ client
    def fragment_values(self, items: Any) -> tuple[np.ndarray, np.ndarray]:
        """The codes ``(n,)`` of ``items`` and the sketch input ``(n, P)`` of each user at each
        position, ``tag 2^{8f} + fragment``; refuses items too long, ending in NUL or (with an
        alphabet) holding another byte, naming the first such user."""
        codes, labels, table = self._fragment_table(items)
        return codes, table[labels]

    def _fragment_table(self, items: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(codes, labels, table)``: each user's code and distinct item, and the sketch input
        ``(n_distinct, P)`` of each distinct item at each position (:meth:`fragment_values` is
        ``table[labels]``; :meth:`perturb` reads only each fragment user's own entry)."""
        labels, flat, length, distinct = self.encoder._encode_distinct(items)  # lengths checked
        f, width = self.fragment_length, self.n_positions * self.fragment_length
        n_distinct = length.size
        owner = np.repeat(np.arange(n_distinct), length)  # byte t of the join: its item, column
        column = np.arange(flat.size) - np.repeat(np.cumsum(length) - length, length)
        padded = np.zeros((n_distinct, width), dtype=np.int64)
        padded[owner, column] = flat
        ends_nul = (length > 0) & (padded[np.arange(n_distinct), np.maximum(length - 1, 0)] == 0)
        allowed = np.zeros(256, dtype=bool)
        allowed[self.symbols] = True
        foreign = ~allowed[padded].all(axis=1)
        for bad, why in ((ends_nul, "ends in a NUL byte, SFP's padding"),
                         (foreign, "holds a byte outside the alphabet")):  # fmt: skip
            if bad.any():
                user = int(np.flatnonzero(bad[labels])[0])
                raise InvalidInputError(f"items[{user}]: {why}")
        frag = (padded.reshape(n_distinct, self.n_positions, f)
                << (8 * np.arange(f - 1, -1, -1))).sum(axis=2)  # fmt: skip
        tag = distinct >> (self.encoder.bits - self.hash_bits)
        return distinct[labels], labels, tag[:, None] << (8 * f) | frag

    def perturb(self, items: Any, rng: RNGLike = None) -> SFPReports:
        """Split the users (module docstring) and report: fragment users through the sketch at
        their position, word users (and the estimation group) through OLH; vectorised.  The
        sketch entries are packed one bit each (``ceil(m/8)`` bytes a fragment user, 128 at
        ``m = 1024``, where int8 took ``m``), written so by the compiled client."""
        codes, labels, table = self._fragment_table(items)
        n = codes.size
        n_word, n_hold = round(self.word_share * n), round(self.holdout * n)
        n_frag = n - n_word - n_hold
        if n_frag < self.n_positions or n_word == 0 or (self.holdout > 0 and n_hold == 0):
            raise InvalidInputError(
                f"items: {n} users cannot fill the {self.n_positions} positions, the word group "
                f"(share {self.word_share:g}) and the holdout ({self.holdout:g}); SFP needs at "
                "least one user in each"
            )
        gen = as_generator(rng)
        perm = gen.permutation(n)
        frag_users, word_users = perm[:n_frag], perm[n_frag : n_frag + n_word]
        position = np.arange(n_frag, dtype=np.int64) % self.n_positions
        sketch = self.fragment_mechanism.perturb_values(table[labels[frag_users], position], gen)
        olh = self.word_mechanism()
        word = olh.perturb(codes[word_users], gen)
        hold = olh.perturb(codes[perm[n_frag + n_word :]], gen) if n_hold else None
        return SFPReports(position, sketch, word, hold, self.encoder.fingerprint, self.layout,
                          self.epsilon, self.g)  # fmt: skip

    # ------------------------------------------------------------------ aggregator
    def check_parameters(self, fingerprint: str, layout: Any, epsilon: float, g: int) -> None:
        """Refuse reports made with other public parameters (those :class:`SFPReports` and a
        report file's stamp carry), in one line naming the first difference."""
        if fingerprint != self.encoder.fingerprint:
            raise InvalidInputError(
                f"reports: made with hash key/width fingerprint {fingerprint}, this SFP's is "
                f"{self.encoder.fingerprint} (another key or bits)"
            )
        theirs = dict(layout)
        for name, mine in self.layout:
            if theirs.get(name) != mine:
                raise InvalidInputError(
                    f"reports: made with {name}={theirs.get(name)!r}, this SFP uses {name}={mine!r}"
                )
        if g != self.g or not math.isclose(epsilon, self.epsilon, rel_tol=1e-12):
            raise InvalidInputError(
                f"reports: made with epsilon={epsilon:.12g}, g={g}; this SFP uses "
                f"epsilon={self.epsilon:.12g}, g={self.g}"
            )

    def check_reports(self, reports: Any) -> SFPReports:
        """Refuse reports of another protocol (key, width, layout, sketch, budget) or with an
        empty position or group, in one line naming the difference."""
        check_instance(reports, SFPReports, "reports", "SFPReports from SFP.perturb")
        self.check_parameters(reports.fingerprint, reports.layout, reports.epsilon, reports.g)
        position = check_report_field(reports, "position", 0, self.n_positions - 1)
        self.fragment_mechanism._checked_entries(reports.fragments)  # int8 or packed
        if len(reports.fragments) != position.size:
            raise InvalidInputError(
                f"reports.fragments: has {len(reports.fragments)} reports for {position.size} "
                "positions"
            )
        sizes = np.bincount(position, minlength=self.n_positions)
        if np.any(sizes == 0):
            raise InvalidInputError(
                f"reports: position {int(np.flatnonzero(sizes == 0)[0])} has no fragment "
                "reports; every position needs at least one"
            )
        groups = [("word", reports.word)] + ([("holdout", reports.holdout)] if self.holdout else [])
        for name, group in groups:
            if group is None or len(group.y) == 0:
                raise InvalidInputError(f"reports: the {name} group has no reports")
            CandidateOLH([0, 1], self.epsilon, self.g).check_reports(group)
        return reports

    def _assemble(self, rounds: list[FragmentRound]) -> tuple[list[bytes], np.ndarray]:
        """Candidates of every tag kept at all positions, with their tags."""
        shift = 8 * self.fragment_length
        by_tag = [{} for _ in rounds]
        for per_tag, rnd in zip(by_tag, rounds, strict=True):
            for v in rnd.values:
                per_tag.setdefault(int(v) >> shift, []).append(int(v) & ((1 << shift) - 1))
        common = set(by_tag[0]).intersection(*by_tag[1:])
        total = sum(math.prod(len(p[r]) for p in by_tag) for r in common)
        if total > MAX_ASSEMBLED:
            raise InvalidInputError(
                f"fragments: the kept fragments assemble into {total:,} candidates, more than "
                f"{MAX_ASSEMBLED:,}; keep fewer per position"
            )
        items, tags = [], []
        for r in sorted(common):
            for combo in itertools.product(*(p[r] for p in by_tag)):
                raw = b"".join(x.to_bytes(self.fragment_length, "big") for x in combo)
                items.append(raw.rstrip(b"\0"))
                tags.append(r)
        return items, np.asarray(tags, dtype=np.int64)

    def identify(self, reports: SFPReports) -> SFPHeavyHitters:
        """Per position the ``fragments`` largest sketch estimates; the puzzle's candidates
        that pass the tag check; the ``k`` largest OLH estimates among the word users."""
        self.check_reports(reports)
        mech = self.fragment_mechanism
        position = np.asarray(reports.position, dtype=np.int64)
        frag = reports.fragments  # checked just above; packed entries are read packed
        entries = frag.packed if frag.is_packed else frag.bits
        stat = mech.grouped_counts(position, frag.row, entries, self.n_positions,
                                   packed=frag.is_packed)  # fmt: skip
        sizes = np.bincount(position, minlength=self.n_positions)
        rounds = []
        for pos in range(self.n_positions):  # Apple's sketch estimate per position
            est = mech._sketch_from_stat(stat[pos], int(sizes[pos]))
            top = np.argsort(-est, kind="stable")[: self.fragments]
            rounds.append(FragmentRound(pos, mech.values[top], est[top], int(sizes[pos])))
        items, tags = self._assemble(rounds)
        fits = np.array([len(x) <= self.encoder.max_length for x in items], dtype=bool)
        items, tags = [x for x, ok in zip(items, fits, strict=True) if ok], tags[fits]
        empty = SFPHeavyHitters(np.zeros(0, dtype=np.int64), np.zeros(0), rounds, [], 0)
        if not items:
            return empty
        codes = self.encoder.encode(items)
        passed = (codes >> (self.encoder.bits - self.hash_bits)) == tags
        codes, first = np.unique(codes[passed], return_index=True)
        items = [x for x, ok in zip(items, passed, strict=True) if ok]
        if codes.size == 0:
            return empty
        f = candidate_estimates(codes, self.epsilon, self.g, reports.word)
        top = np.argsort(-f, kind="stable")[: self.k]
        return SFPHeavyHitters(codes[top], f[top], rounds, [items[first[j]] for j in top],
                               int(codes.size))  # fmt: skip

    # ------------------------------------------------------------------ posterior
    def final_tally(self, reports: SFPReports, codes: Any) -> Any:
        """The estimation group's reports (the holdout's, else the word users') read against
        ``codes`` plus "other" (:class:`CandidateOLH` with ``other=True``)."""
        self.check_reports(reports)
        mech = CandidateOLH(np.asarray(codes, dtype=np.int64), self.epsilon, self.g, other=True)
        return mech.tally(reports.holdout if self.holdout else reports.word)

    def posterior(
        self,
        reports: SFPReports,
        found: SFPHeavyHitters,
        threshold: float = 0.01,
        *,
        labels: Any = None,
        **fit_kwargs: Any,
    ) -> SharePosterior:
        """Posterior of the found items' shares and of "other" (as :meth:`PEM.posterior`): the
        estimation group's OLH reports, read by :class:`CandidateOLH` with ``other=True``,
        through :func:`bayesldp.fit`.  Without a ``holdout`` the word users' reports also
        chose the final ``k`` (the winner's curse, see :class:`PEM`).  Labels default to the
        items (UTF-8, undecodable bytes escaped)."""
        if not isinstance(found, SFPHeavyHitters):
            raise InvalidTypeError(
                f"found: expected SFPHeavyHitters from SFP.identify, got {type(found).__name__}"
            )
        codes = np.asarray(found.codes, dtype=np.int64)
        if labels is None:
            labels = [x.decode("utf-8", "backslashreplace") for x in found.items]
        return share_posterior(lambda: self.final_tally(reports, codes), codes.size, labels,
                               threshold, **fit_kwargs)  # fmt: skip
