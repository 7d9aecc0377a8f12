"""OLH and the count-mean sketch over a list of candidate values (the discovery's server side).

:class:`CandidateCMS` is Apple's count-mean sketch (:class:`bayesldp.CMS`) read the same way:
category ``j`` is the candidate ``values[j]``, hashed by the sketch's own family (SFP's
fragments, :mod:`bayesldp.heavy_hitters.sfp`).

A PEM round asks: how often do the users of this round hold each candidate prefix?  Its users
report through OLH (:class:`bayesldp.OLH`) over all ``2^s`` prefixes; the collector reads those
same reports against the few candidates only.  :class:`CandidateOLH` is that reading: category
``j`` is the candidate value ``values[j]``, hashed by the very Carter-Wegman hash of
:class:`~bayesldp.mechanisms.hashing.LocalHashing`, ``h_{a,b}(v) = ((a v + b) mod P) mod g``.  A
report ``(a, b, y)`` of a user holding ``values[j]`` has exactly the distribution
``OLH(2^s).perturb`` gives it, so the tally, the oracle and the privacy check of local hashing
apply unchanged.

With ``other=True`` a last category stands for every value outside the candidates.  Its
likelihood row is

.. math::

    \\Pr(y \\mid a, b, X = \\text{other}) = q + (p - q)\\,u_y, \\qquad
    u_y = \\Pr_{a,b}[h_{a,b}(w) = y] = \\frac{\\#\\{r \\in 0..P-1 : r \\equiv y \\pmod g\\}}{P},

OLH's channel for an item whose hash value is uniform over the hash's range (``u_y = 1/g`` up
to ``g/P``).  Why it is right: a user outside the candidates holds some ``w`` drawn from the
unknown law ``pi`` of the non-candidate values, so the exact row is
``q + (p - q) sum_w pi(w) 1[h(w) = y]``.  For each ``w``, ``(a w + b) mod P`` is uniform on
``0..P-1`` (``b`` is uniform), so that sum has mean ``u_y`` over the hash draw, and, the family
being pairwise independent, variance at most ``max_w pi(w) / g``: it is ``u_y`` when the mass
outside the candidates is spread over many values, and only a heavy value the rounds missed
(the failure PEM's recall measures) makes it wrong.  The hash ``(a, b)`` is drawn independently
of the item, so its own probability cancels from every likelihood.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from bayesldp._validation import RNGLike, as_generator, check_epsilon, check_values
from bayesldp.errors import InvalidInputError, InvalidTypeError
from bayesldp.heavy_hitters._counting import (
    bucket_counts,
    packed_bucket_counts,
    support_counts,
    support_matrix,
)
from bayesldp.mechanisms.base import realised_epsilon_of_channel
from bayesldp.mechanisms.hashing import (
    MERSENNE_31,
    HashReports,
    LocalHashing,
    optimal_g,
)
from bayesldp.mechanisms.sketch import CMS, CMSReports
from bayesldp.mechanisms.sketch_common import sketch_hashes
from bayesldp.tally import Tally

_BLOCK = 1 << 22  # hash evaluations per block of users in tally()


def _check_values(values: Any) -> np.ndarray:
    arr = np.asarray(values)
    if arr.ndim != 1 or arr.dtype.kind not in "iu":
        raise InvalidTypeError(
            f"values: expected a 1-d array of integer candidate values, got {arr.dtype} "
            f"of shape {arr.shape}"
        )
    arr = arr.astype(np.int64)
    if arr.size and (arr.min() < 0 or arr.max() >= MERSENNE_31):
        bad = arr.min() if arr.min() < 0 else arr.max()
        raise InvalidInputError(f"values: must lie in 0..{MERSENNE_31 - 1}, got {bad}")
    if np.unique(arr).size != arr.size:
        raise InvalidInputError("values: the candidate values must be distinct")
    return arr


class CandidateOLH(LocalHashing):
    """OLH read against the candidate values ``values`` (and, with ``other``, the rest).

    Categories ``0..m-1`` are the candidates ``values[j]``; with ``other=True`` category ``m``
    stands for every other value (row ``q + (p - q) u_y``, see the module docstring).  Reports
    are :class:`~bayesldp.HashReports` ``(a, b, y)``, those of ``OLH(2^s, epsilon, g)`` for any
    ``2^s > max(values)``.

    Parameters
    ----------
    values : array of int
        The distinct candidate values, in ``0..2^31 - 2``.
    epsilon : float
        The OLH budget.
    g : int, optional
        Hash range; default ``round(e^eps) + 1`` (OLH's).
    other : bool
        Add the "other" category.

    Examples
    --------
    >>> from bayesldp.heavy_hitters import CandidateOLH
    >>> mech = CandidateOLH([5, 17, 40], 2.0)
    >>> round(mech.realised_epsilon(), 12)
    2.0
    """

    name = "CandidateOLH"
    RECOMMEND = False

    def __init__(
        self, values: Any, epsilon: float, g: int | None = None, *, other: bool = False
    ) -> None:
        self.values = _check_values(values)
        self.other = bool(other)
        if g is None:
            g = optimal_g(check_epsilon(epsilon))
        super().__init__(self.values.size + int(self.other), epsilon, g)

    def params(self) -> dict[str, Any]:
        return {
            "k": self.k,
            "epsilon": self.epsilon,
            "g": self.g,
            "values": self.values.tolist(),
            "other": self.other,
        }

    @property
    def m(self) -> int:
        """Number of candidates (``k`` without the "other" category)."""
        return int(self.values.size)

    # ------------------------------------------------------------------ hashing
    def _hash(self, a: np.ndarray, b: np.ndarray, x: Any) -> np.ndarray:
        x = np.asarray(x, dtype=np.int64)
        if self.other and np.any(x == self.m):
            raise InvalidInputError("x: the 'other' category has no hash value")
        return (a * self.values[x] + b) % self._prime % self.g

    def other_levels(self) -> np.ndarray:
        """``u_y = Pr_{a,b}[h(w) = y]`` for ``y`` in ``0..g-1``: the law of a non-candidate's
        hash value (``r mod g`` for ``r`` uniform on ``0..P-1``)."""
        per, extra = divmod(self._prime, self.g)
        u = np.full(self.g, per, dtype=float)
        u[:extra] += 1.0
        return u / self._prime

    # ------------------------------------------------------------------ client
    def perturb(self, x: Any, rng: RNGLike = None) -> HashReports:
        """OLH reports of users holding ``values[x]``; category ``m`` ("other") hashes to a value
        drawn from ``u`` (the hash value of a non-candidate)."""
        x = check_values(x, self.k)
        gen = as_generator(rng)
        n = x.shape[0]
        a = gen.integers(1, self._prime, size=n, dtype=np.int64)
        b = gen.integers(0, self._prime, size=n, dtype=np.int64)
        is_other = x == self.m if self.other else np.zeros(n, dtype=bool)
        free = gen.integers(0, self._prime, size=n, dtype=np.int64) % self.g
        safe = np.where(is_other, 0, x)
        v = np.where(is_other, free, (a * self.values[safe] + b) % self._prime % self.g)
        keep = gen.random(n) < self.p
        shift = gen.integers(1, self.g, size=n, dtype=np.int64)
        return HashReports(a, b, np.where(keep, v, (v + shift) % self.g))

    # ------------------------------------------------------------------ aggregator
    def support_counts(self, reports: HashReports) -> np.ndarray:
        """The tally's statistic without the tally: ``stat_j = #{i : h_i(values[j]) = y_i}``
        for the candidates (and, with "other", ``n`` minus their sum), int64.

        One compiled pass per candidate over cache-sized blocks of users, no ``n x m`` array
        (:mod:`bayesldp.heavy_hitters._counting`); the same hash values as :meth:`supports`.
        """
        a, b, y = self.check_reports(reports)
        stat = np.zeros(self.k, dtype=np.int64)
        stat[: self.m] = support_counts(a, b, y, self.values, self.g)
        if self.other:
            stat[self.m] = y.size - stat[: self.m].sum()
        return stat

    def estimate(self, reports: HashReports) -> np.ndarray:
        """:meth:`unbiased_frequencies` of the reports' tally, from :meth:`support_counts`
        alone (no support matrix): what a discovery round needs."""
        stat = self.support_counts(reports)
        return self._oracle(stat.astype(float), len(reports))

    def tally(self, reports: HashReports) -> Tally:
        """Support form ``support[i, j] = (h_i(values[j]) == y_i)``, levels ``(q, p)``; with
        "other", dense rows whose last entry is ``q + (p - q) u_{y_i}`` (deduplicated)."""
        a, b, y = self.check_reports(reports)
        n = y.size
        if not self.other:

            def fill(support: np.ndarray, stat: np.ndarray) -> None:
                stat += support_matrix(a, b, y, self.values, self.g, support)

            return self._support_tally(
                n, fill, "read the reports in batches and merge the tallies with +"
            )
        stat = np.zeros(self.k, dtype=np.int64)
        rows = np.empty((n, self.k), dtype=float)
        block = max(1024, _BLOCK // max(1, self.m))
        levels = self.q + (self.p - self.q) * self.other_levels()
        for start in range(0, n, block):
            stop = min(n, start + block)
            hits = np.empty((stop - start, self.m), dtype=bool)
            stat[: self.m] += support_matrix(a[start:stop], b[start:stop], y[start:stop],
                                             self.values, self.g, hits)  # fmt: skip
            rows[start:stop, : self.m] = np.where(hits, self.p, self.q)
            rows[start:stop, self.m] = levels[y[start:stop]]
        stat[self.m] = n - stat[: self.m].sum()  # not an oracle statistic: see the oracle
        return Tally(np.ones(n, dtype=np.int64), rows=rows, stat=stat.astype(float), mechanism=self)

    def supports(self, reports: HashReports, x: int) -> np.ndarray:
        a, b, y = self.check_reports(reports)
        return self._hash(a, b, self._check_category(x)) == y

    def unbiased_frequencies(self, tally: Tally) -> np.ndarray:
        """Local hashing's oracle for the candidates; "other" gets ``1 -`` their sum.

        A non-candidate's hash value is independent of a candidate's up to ``O(g/P)`` (the family
        is pairwise independent), so ``q*`` serves for it too.
        """
        self.check_tally(tally)
        return self._oracle(tally.stat, tally.n)

    def _oracle(self, stat: np.ndarray, n: int) -> np.ndarray:
        f = (stat[: self.m] / n - self.q_star) / (self.p_star - self.q_star)
        return np.append(f, 1.0 - f.sum()) if self.other else f

    def oracle_variance(self, theta: Any, n: int) -> np.ndarray:
        var = super().oracle_variance(theta, n)
        if self.other:  # the complement's variance: the sum of candidates' (for f -> 0 terms)
            var[self.m] = float(np.sum(var[: self.m]))
        return var

    # ------------------------------------------------------------------ privacy
    def _channel_given_hash(self, a: int, b: int, *, compact: bool) -> np.ndarray:
        h = (int(a) * self.values + int(b)) % self._prime % self.g
        columns = np.arange(self.g)
        rows = np.where(h[:, None] == columns[None, :], self.p, self.q)
        if self.other:
            rows = np.vstack([rows, self.q + (self.p - self.q) * self.other_levels()])
        return rows

    def realised_epsilon(self) -> float:
        """Epsilon of the ``k x g`` channel of ``y`` given a hash that separates two candidates.

        Given the hash every row holds ``p`` and ``q`` only (the "other" row values between the
        two), so each column's ratio is at most ``p/q``; a hash under which two candidates
        differ attains it (``a`` in ``1, 2, ...`` with ``b = 0`` soon gives one).  With a single
        candidate it is the channel's epsilon (candidate against "other").
        """
        for a in range(1, 10_000):
            hashed = (a * self.values) % self._prime % self.g
            if self.m < 2 or np.unique(hashed).size > 1:
                return realised_epsilon_of_channel(self._channel_given_hash(a, 0, compact=False))
        raise AssertionError("no separating hash found")  # pragma: no cover


class CandidateCMS(CMS):
    """Apple's count-mean sketch (:class:`bayesldp.CMS`) over the candidate values ``values``.

    Category ``j`` hashes as the value ``values[j]``: ``h_r(values[j]) = ((a_r values[j] + b_r)
    mod P) mod m`` with CMS's seeded family, so reports of users holding any value ``v < P``
    (:meth:`perturb_values`) are CMS reports, and this class reads them against the candidates.
    Channel, epsilon and oracles are CMS's (the channel of ``(row, v)`` given the input's bucket
    is the same for every input).  The check that every pair of categories is separated by
    some hash row is skipped: :meth:`sketch_estimate` (Apple's estimate) does not need it, and
    :meth:`~bayesldp.CMS.unbiased_frequencies` refuses a singular support matrix itself.

    Parameters
    ----------
    values : array of int
        The distinct candidate values, in ``0..2^31 - 2``.
    epsilon, m, k_hash, hash_seed
        As :class:`bayesldp.CMS`.

    Examples
    --------
    >>> from bayesldp.heavy_hitters import CandidateCMS
    >>> mech = CandidateCMS([5, 17, 2**24 + 3], 2.0, m=64)
    >>> reports = mech.perturb_values([17] * 4000, rng=0)
    >>> int(mech.sketch_estimate(reports).argmax()), mech.realised_epsilon()
    (1, 2.0)
    """

    name = "CandidateCMS"
    RECOMMEND = False

    def __init__(
        self,
        values: Any,
        epsilon: float,
        m: int | None = None,
        k_hash: int | None = None,
        hash_seed: int | None = None,
    ) -> None:
        self.values = _check_values(values)
        super().__init__(self.values.size, epsilon, m, k_hash, hash_seed)

    def params(self) -> dict[str, Any]:
        return {**super().params(), "values": self.values.tolist()}

    def _hash_inputs(self) -> np.ndarray:
        return self.values

    def _check_separates(self) -> None:
        return None

    def perturb_values(
        self, values: Any, rng: RNGLike = None, *, packed: bool = True
    ) -> CMSReports:
        """CMS reports of users holding the values ``values`` (candidates or not, in
        ``0..2^31 - 2``): CMS's client on the hash table of the distinct values.

        Packed one bit per entry by default (:class:`~bayesldp.CMSReports`, ``ceil(m/8)``
        bytes a user: SFP's fragment users at ``m = 1024`` write 128 bytes each, not 1 KB);
        ``packed=False`` gives the int8 entries of the same stream (the same reports)."""
        arr = np.asarray(values)
        if arr.ndim != 1 or arr.dtype.kind not in "iu" or arr.size == 0:
            raise InvalidInputError(
                f"values: expected a non-empty 1-d array of integers, got {arr.dtype} of shape "
                f"{arr.shape}"
            )
        unique, index = np.unique(arr.astype(np.int64), return_inverse=True)
        unique = _check_values(unique)
        table = sketch_hashes(0, self.m, self.k_hash, self.hash_seed, unique)
        return self._perturb_with(index.astype(np.int64), table, as_generator(rng),
                                  packed=bool(packed))  # fmt: skip

    def support_counts(self, reports: CMSReports) -> np.ndarray:
        """``s_j = #{i : v_i[h_{row_i}(values[j])] = +1}``, the tally's statistic, through the
        ``k_hash x m`` count of +1 entries (O(n m + K k_hash), no ``n x K`` support); int8 or
        packed reports alike."""
        rows, entries, packed = self._checked_entries(reports)
        zero = np.zeros(rows.size, dtype=np.int64)
        return self.grouped_counts(zero, rows, entries, 1, packed=packed)[0]

    def grouped_counts(
        self,
        group: np.ndarray,
        rows: np.ndarray,
        bits: np.ndarray,
        n_groups: int,
        *,
        packed: bool = False,
    ) -> np.ndarray:
        """:meth:`support_counts` of each group of users at once (``(n_groups, K)``), from
        checked report arrays (``rows`` and the int8 ``bits`` of :meth:`check_reports`, or with
        ``packed=True`` the checked packed entries, ``CMSReports.packed``; ``group`` in
        ``0..n_groups-1``): one compiled pass over the ``n x m`` entries (packed: over their
        ``n ceil(m/8)`` bytes, bit by bit)."""
        if packed:
            counts = packed_bucket_counts(group, rows, bits, self.m, n_groups, self.k_hash)
        else:
            counts = bucket_counts(group, rows, bits, n_groups, self.k_hash)
        return counts[:, np.arange(self.k_hash)[:, None], self.hashes].sum(axis=1)

    def sketch_estimate(self, reports: CMSReports) -> np.ndarray:
        """Apple's sketch estimate (:meth:`~bayesldp.CMS.sketch_frequencies`) of every
        candidate's frequency, from :meth:`support_counts`."""
        stat = self.support_counts(reports)
        return self._sketch_from_stat(stat, len(reports))


def candidate_estimates(values: Any, epsilon: float, g: int, reports: Any) -> np.ndarray:
    """OLH's unbiased estimates of the candidates ``values`` (one or more) from ``reports``.

    A single candidate is read with the "other" category (:class:`CandidateOLH` is an OLH over
    its categories, which needs two); its estimate is the same oracle's.
    """
    values = np.asarray(values, dtype=np.int64)
    mech = CandidateOLH(values, epsilon, g, other=values.size == 1)
    return mech.estimate(reports)[: values.size]
