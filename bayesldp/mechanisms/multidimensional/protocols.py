"""Frequency estimation of several attributes: SPL, SMP and RS+FD.

A record holds ``d`` attributes, attribute ``j`` with values ``0..k_j - 1``; records are an
``(n, d)`` integer array.  Three ways to spend one budget ``epsilon`` on a record (Arcolezi,
Couchot, Al Bouna, Xiao, CIKM 2021, section 2):

* :class:`SPL` splits it: every attribute is reported with ``epsilon / d``;
* :class:`SMP` samples: each user reports one uniformly chosen attribute at ``epsilon``, with its
  index;
* :class:`RSFD` samples and hides the choice: the sampled attribute is reported at
  ``epsilon`` and every other attribute with fake data
  (:mod:`~bayesldp.mechanisms.multidimensional.fake_data`), so that the whole record realises
  ``epsilon``; ``budget="paper"`` is the paper's calibration instead (the sampled attribute at
  the amplified ``ln(d (e^eps - 1) + 1)``, which the whole record then realises).

Each attribute's reports form an ordinary tally with an exact channel (:meth:`tallies`): SPL's
is the base mechanism at ``epsilon / d``, SMP's the base mechanism at ``epsilon`` over the users
who sampled the attribute (the index is independent of the values), RS+FD's the mixture channel.
Every estimator and posterior reads them (:func:`fit_marginals` fits them all).

Asked for ``epsilon``, every protocol spends at most ``epsilon`` on the whole record.  Privacy
is computed for the whole record, exactly (:meth:`Multidimensional.realised_epsilon`),
and for two records that differ in one attribute only
(:meth:`Multidimensional.realised_attribute_epsilon`), and stated in words by
:meth:`Multidimensional.guarantee`; the brute force over the record-level channel
(:mod:`~bayesldp.mechanisms.multidimensional.record`) checks both on small domains.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from bayesldp._validation import (
    RNGLike,
    as_generator,
    check_domain_size,
    check_epsilon,
    check_instance,
    check_k,
    check_values,
)
from bayesldp.errors import InvalidInputError, InvalidTypeError
from bayesldp.mechanisms.base import Mechanism
from bayesldp.mechanisms.grr import GRR
from bayesldp.mechanisms.multidimensional.fake_data import (
    UNARY,
    amplified_epsilon,
    fake_data_mechanism,
    record_budget_epsilon,
)
from bayesldp.tally import Tally

#: the base mechanisms of an attribute, by name
BASES: dict[str, type[Mechanism]] = {"GRR": GRR, **UNARY}


@dataclass(frozen=True)
class RecordReports:
    """The reports of ``n`` records: one array per attribute, plus the sampled attributes.

    ``parts[j]`` holds attribute ``j``'s reports (GRR: ints ``(m,)``; unary encodings: bool
    ``(m, k_j)``).  For SPL and RS+FD every user reports every attribute (``m = n``) and
    ``attribute`` is None; for SMP ``attribute[i]`` is the index user ``i`` reported and
    ``parts[j]`` the reports of the users with ``attribute == j``, in user order.

    Examples
    --------
    What a protocol's ``perturb`` returns:

    >>> import numpy as np
    >>> from bayesldp.mechanisms import SMP
    >>> proto = SMP([3, 4], 2.0)
    >>> reports = proto.perturb(np.array([[0, 1], [1, 2], [2, 3], [0, 0]]), rng=0)
    >>> type(reports).__name__, reports.attribute.tolist(), [p.shape for p in reports.parts]
    ('RecordReports', [1, 1, 1, 0], [(1,), (3,)])
    """

    parts: tuple[np.ndarray, ...]
    attribute: np.ndarray | None = None

    @property
    def n(self) -> int:
        """Number of records reported."""
        if self.attribute is not None:
            return int(self.attribute.shape[0])
        return int(self.parts[0].shape[0])


class Multidimensional(ABC):
    """What SPL, SMP and RS+FD share: domain sizes, budget, base mechanism, records in, one
    tally per attribute out, and the record's exact privacy.

    Parameters
    ----------
    ks : sequence of int
        Domain size of each attribute (``d = len(ks) >= 2`` attributes, each ``>= 2``).
    epsilon : float
        The record's budget.
    base : {"GRR", "SUE", "OUE"}
        The frequency oracle of each attribute.

    Examples
    --------
    SPL, SMP and RS+FD are all one:

    >>> from bayesldp.mechanisms import SPL
    >>> from bayesldp.mechanisms.multidimensional import Multidimensional
    >>> proto = SPL([3, 4], 2.0)
    >>> isinstance(proto, Multidimensional), proto.d, proto.ks
    (True, 2, (3, 4))
    """

    name: ClassVar[str]

    def __init__(self, ks: Any, epsilon: float, base: str = "GRR") -> None:
        if isinstance(ks, int | np.integer) or not hasattr(ks, "__len__"):
            raise InvalidTypeError(f"ks: expected one domain size per attribute, got {ks!r}")
        self.ks = tuple(check_domain_size(check_k(k, f"ks[{j}]"), f"ks[{j}]")
                        for j, k in enumerate(ks))  # fmt: skip
        if len(self.ks) < 2:
            raise InvalidInputError(f"ks: need at least 2 attributes, got {len(self.ks)}")
        self.epsilon = check_epsilon(epsilon)
        names = {name.upper(): name for name in BASES}
        if not isinstance(base, str) or base.upper() not in names:
            raise InvalidInputError(f"base: expected one of {', '.join(BASES)}, got {base!r}")
        self.base = names[base.upper()]
        #: one mechanism per attribute: the channel of that attribute's tally
        self.marginals: tuple[Mechanism, ...] = tuple(self._marginal(k) for k in self.ks)

    @property
    def d(self) -> int:
        """Number of attributes."""
        return len(self.ks)

    @abstractmethod
    def _marginal(self, k: int) -> Mechanism:
        """The mechanism whose channel an attribute with ``k`` values is tallied with."""

    def params(self) -> dict[str, Any]:
        """The parameters that define this protocol (JSON-friendly)."""
        return {"ks": list(self.ks), "epsilon": self.epsilon, "base": self.base}

    def __repr__(self) -> str:
        inner = ", ".join(f"{k}={v!r}" for k, v in self.params().items())
        return f"{type(self).__name__}({inner})"

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other.params() == self.params()  # type: ignore

    def __hash__(self) -> int:
        return hash((type(self).__name__, repr(self.params())))

    # ------------------------------------------------------------------ client
    def check_records(self, records: Any) -> np.ndarray:
        """Validate records: an ``(n, d)`` integer array, column ``j`` in ``0..k_j - 1``."""
        arr = np.asarray(records)
        if arr.ndim != 2 or arr.shape[1] != self.d or arr.shape[0] == 0:
            raise InvalidInputError(
                f"records: expected shape (n, {self.d}) with n >= 1 (one row per user, one "
                f"column per attribute), got {arr.shape}"
            )
        return np.column_stack([
            check_values(arr[:, j], k, f"records (attribute {j})")
            for j, k in enumerate(self.ks)
        ])  # fmt: skip

    @abstractmethod
    def perturb(self, records: Any, rng: RNGLike = None) -> RecordReports:
        """Randomise ``(n, d)`` records; vectorised over users (a loop over the ``d``
        attributes only)."""

    # ------------------------------------------------------------------ aggregator
    def tallies(self, reports: RecordReports) -> list[Tally]:
        """One tally per attribute, each with that attribute's exact channel
        (``marginals[j]``)."""
        check_instance(
            reports, RecordReports, "reports", f"the RecordReports of {type(self).__name__}.perturb"
        )
        if len(reports.parts) != self.d:
            raise InvalidInputError(
                f"reports: expected {self.d} attributes' reports, got {len(reports.parts)}"
            )
        return [mech.tally(part) for mech, part in zip(self.marginals, reports.parts, strict=True)]

    # ------------------------------------------------------------------ privacy
    @abstractmethod
    def realised_epsilon(self) -> float:
        """Exact epsilon of the whole record's report, any two records (LDP)."""

    @abstractmethod
    def realised_attribute_epsilon(self) -> float:
        """Exact epsilon between two records that differ in one attribute only."""

    def guarantee(self) -> str:
        """One sentence: the epsilon asked for and what the whole record and one attribute
        realise (exactly, :meth:`realised_epsilon` and :meth:`realised_attribute_epsilon`)."""
        return (f"{self.name}[{self.base}] at epsilon = {self.epsilon:g}: the whole record "
                f"realises {self.realised_epsilon():.4g}, records that differ in one attribute "
                f"{self.realised_attribute_epsilon():.4g}")  # fmt: skip


class SPL(Multidimensional):
    """Split the budget: every attribute reported with the base mechanism at ``epsilon / d``.

    Reports: ``parts[j]`` the base mechanism's reports of attribute ``j``.  Privacy by
    composition: the record's epsilon is the sum of the attributes' realised epsilons
    (``epsilon`` for GRR, SUE and OUE); two records differing in one attribute, its
    ``epsilon / d``.

    Examples
    --------
    Records of two attributes (3 and 4 categories), each reported by GRR at ``epsilon / 2``:

    >>> import numpy as np
    >>> from bayesldp.mechanisms import SPL
    >>> proto = SPL([3, 4], 2.0)
    >>> records = np.array([[0, 1], [1, 2], [2, 3], [0, 0]])
    >>> tallies = proto.tallies(proto.perturb(records, rng=0))
    >>> [t.k for t in tallies], [t.n for t in tallies], round(proto.realised_epsilon(), 12)
    ([3, 4], [4, 4], 2.0)
    """

    name = "SPL"

    def _marginal(self, k: int) -> Mechanism:
        return BASES[self.base](k, self.epsilon / len(self.ks))

    def perturb(self, records: Any, rng: RNGLike = None) -> RecordReports:
        records = self.check_records(records)
        gen = as_generator(rng)
        return RecordReports(tuple(mech.perturb(records[:, j], gen)
                                   for j, mech in enumerate(self.marginals)))  # fmt: skip

    def realised_epsilon(self) -> float:
        return float(sum(m.realised_epsilon() for m in self.marginals))

    def realised_attribute_epsilon(self) -> float:
        return float(max(m.realised_epsilon() for m in self.marginals))


class SMP(Multidimensional):
    """Sample one attribute uniformly and report it with the base mechanism at ``epsilon``,
    with its index (public).

    Reports: ``attribute`` the sampled indices, ``parts[j]`` the reports of the users who
    sampled ``j``.  A record's report reveals one attribute at ``epsilon``: the record's
    epsilon is the largest attribute's realised epsilon, whichever records are compared.

    Examples
    --------
    Each user reports one sampled attribute, at the whole ``epsilon``:

    >>> import numpy as np
    >>> from bayesldp.mechanisms import SMP
    >>> proto = SMP([3, 4], 2.0)
    >>> records = np.array([[0, 1], [1, 2], [2, 3], [0, 0]] * 5)
    >>> tallies = proto.tallies(proto.perturb(records, rng=0))
    >>> sum(t.n for t in tallies), round(proto.realised_epsilon(), 12)
    (20, 2.0)
    """

    name = "SMP"

    def _marginal(self, k: int) -> Mechanism:
        return BASES[self.base](k, self.epsilon)

    def perturb(self, records: Any, rng: RNGLike = None) -> RecordReports:
        records = self.check_records(records)
        gen = as_generator(rng)
        attribute = gen.integers(0, self.d, size=records.shape[0])
        parts = tuple(mech.perturb(records[attribute == j, j], gen) if np.any(attribute == j)
                      else _empty_reports(mech)
                      for j, mech in enumerate(self.marginals))  # fmt: skip
        return RecordReports(parts, attribute)

    def tallies(self, reports: RecordReports) -> list[Tally]:
        """One tally per attribute over the users who sampled it (an attribute nobody
        sampled has no tally: an error naming it)."""
        for j, part in enumerate(reports.parts if isinstance(reports, RecordReports) else ()):
            if part.shape[0] == 0:
                raise InvalidInputError(f"reports: no user sampled attribute {j}; report more "
                                        "users")  # fmt: skip
        return super().tallies(reports)

    def realised_epsilon(self) -> float:
        return float(max(m.realised_epsilon() for m in self.marginals))

    def realised_attribute_epsilon(self) -> float:
        return self.realised_epsilon()


class RSFD(Multidimensional):
    """Random sampling plus fake data (Arcolezi, Couchot, Al Bouna, Xiao, "Random Sampling Plus
    Fake Data: Multidimensional Frequency Estimates With Local Differential Privacy", CIKM
    2021): one attribute sampled and reported with the base mechanism, fake data for the others.

    Reports: ``parts[j]`` attribute ``j``'s reports of every user (real or fake: the server
    does not learn which).  ``base`` "GRR" gives RS+FD[GRR] (uniform fake values); "OUE" /
    "SUE" with ``fake`` "zero" or "random" give RS+FD[OUE-z], RS+FD[OUE-r] and the SUE ones.

    Privacy.  With ``F_i`` the fake law of attribute ``i`` and ``rho_i = P_real_i / F_i``,
    a record's report has probability
    ``Pr[y | x] = prod_i F_i(y_i) (1/d) sum_j rho_j(x_j, y_j)``.  Between any two records the
    ratio is ``sum_j rho_j(x_j, y_j) / sum_j rho_j(x'_j, y_j)``, largest with every attribute
    at its extreme: ``e^a`` for every base here (each ``max rho / min rho = e^a``, ``a`` the
    sampled report's budget), so :meth:`realised_epsilon` is ``a``.  Hence the two budgets:

    * ``budget="record"`` (default): the sampled attribute is reported at ``a = epsilon``, so
      the whole record realises ``epsilon`` (exactly, up to rounding); in the paper's terms the
      nominal budget is ``record_budget_epsilon(epsilon, d) = ln(1 + (e^eps - 1)/d)``
      (:attr:`nominal_epsilon`).
    * ``budget="paper"``: the paper's calibration, ``epsilon`` the nominal budget and the
      sampled attribute reported at the amplified ``a = ln(d (e^eps - 1) + 1)``.  The whole
      record then realises ``a``, **more than** ``epsilon`` (3.00 for ``ks = (12, 7, 30)``,
      ``epsilon = 2``).  The paper's ``epsilon`` holds between records that differ in one
      attribute (the amplification by sampling, :meth:`realised_attribute_epsilon`), and
      exactly only for the "zero" fake data (any domain sizes) and for uniform fake values of
      equal domain sizes; unequal domain sizes (GRR, "random") or "random" fake data of 3 or
      more values realise more (2.33 for the example above), because a fake report can then
      be less likely than any real one.

    :meth:`guarantee` says in one sentence what an instance realises; the tallies' channels
    follow the budget, so estimates are right under either (reports perturbed under one budget
    must be tallied by a protocol of the same budget).

    Parameters
    ----------
    ks, base
        As :class:`Multidimensional`.
    epsilon : float
        The whole record's budget (``budget="record"``), or the paper's nominal budget
        (``budget="paper"``).
    fake : {"zero", "random"}, optional
        Unary encodings' fake data (default "zero", the paper's recommended OUE-z).
    budget : {"record", "paper"}, optional
        What ``epsilon`` bounds: the whole record (default), or the paper's nominal budget
        (the whole record realises ``ln(d (e^eps - 1) + 1)``).

    Examples
    --------
    One sampled attribute reported truly, fake data for the others:

    >>> import numpy as np
    >>> from bayesldp.mechanisms import RSFD
    >>> proto = RSFD([3, 4], 2.0)
    >>> records = np.array([[0, 1], [1, 2], [2, 3], [0, 0]])
    >>> tallies = proto.tallies(proto.perturb(records, rng=0))
    >>> [t.n for t in tallies], round(proto.realised_epsilon(), 12)
    ([4, 4], 2.0)
    """

    name = "RSFD"
    #: the meanings of ``epsilon`` (``budget``): the whole record's, or the paper's nominal one
    BUDGETS = ("record", "paper")

    def __init__(self, ks: Any, epsilon: float, base: str = "GRR", fake: str | None = None,
                 *, budget: str = "record") -> None:  # fmt: skip
        budget = budget.lower() if isinstance(budget, str) else budget
        if budget not in self.BUDGETS:
            raise InvalidInputError(
                f"budget: expected 'record' (epsilon bounds the whole record) or 'paper' (the "
                f"paper's nominal epsilon, amplified for the whole record), got {budget!r}"
            )
        self.fake, self.budget = fake, budget
        super().__init__(ks, epsilon, base)
        if self.base != "GRR":
            self.fake = self.marginals[0].fake

    def params(self) -> dict[str, Any]:
        return {**super().params(), "fake": self.fake, "budget": self.budget}

    @property
    def nominal_epsilon(self) -> float:
        """The paper's nominal budget the attributes' channels are built with: ``epsilon``
        under ``budget="paper"``, ``ln(1 + (e^eps - 1)/d)`` under ``budget="record"``."""
        if self.budget == "paper":
            return self.epsilon
        return record_budget_epsilon(self.epsilon, len(self.ks))

    @property
    def amplified_epsilon(self) -> float:
        """``ln(d (e^e - 1) + 1)`` of the nominal ``e``: the sampled attribute's budget (the
        whole record's realised epsilon; ``epsilon`` itself under ``budget="record"``)."""
        return amplified_epsilon(self.nominal_epsilon, self.d)

    def _marginal(self, k: int) -> Mechanism:
        return fake_data_mechanism(k, self.nominal_epsilon, len(self.ks), self.base, self.fake)

    def guarantee(self) -> str:
        """As :meth:`Multidimensional.guarantee`, naming the budget and, under
        ``budget="paper"``, that the whole record realises more than ``epsilon``."""
        label = f"{self.base}" + ("" if self.fake is None else f"-{self.fake}")
        record, attribute = self.realised_epsilon(), self.realised_attribute_epsilon()
        if self.budget == "record":
            return (f"RSFD[{label}] at epsilon = {self.epsilon:g} for the whole record: it "
                    f"realises {record:.4g} (the paper's nominal epsilon "
                    f"{self.nominal_epsilon:.4g}), records that differ in one attribute "
                    f"{attribute:.4g}")  # fmt: skip
        return (f"RSFD[{label}] at the paper's nominal epsilon = {self.epsilon:g} "
                f"(budget='paper'): the whole record realises the amplified {record:.4g}, more "
                f"than {self.epsilon:g}; records that differ in one attribute {attribute:.4g}; "
                f"budget='record' spends at most {self.epsilon:g} on the whole record")  # fmt: skip

    def perturb(self, records: Any, rng: RNGLike = None) -> RecordReports:
        records = self.check_records(records)
        gen = as_generator(rng)
        attribute = gen.integers(0, self.d, size=records.shape[0])
        return RecordReports(tuple(mech.perturb_sampled(records[:, j], attribute == j, gen)
                                   for j, mech in enumerate(self.marginals)))  # fmt: skip

    def _rho(self) -> list[tuple[np.ndarray, np.ndarray]]:
        return [mech.rho_classes() for mech in self.marginals]

    def realised_epsilon(self) -> float:
        """``max over y`` of ``log(sum_j max_x rho_j / sum_j min_x rho_j)`` (class docstring),
        the attributes' report classes chosen independently: a ratio of sums maximised by
        Dinkelbach's iteration (exact in finitely many steps)."""
        rho = self._rho()
        ratio = 1.0
        for _ in range(100):
            picks = [int(np.argmax(hi - ratio * lo)) for hi, lo in rho]
            top = sum(hi[c] for (hi, _), c in zip(rho, picks, strict=True))
            bottom = sum(lo[c] for (_, lo), c in zip(rho, picks, strict=True))
            if top / bottom <= ratio * (1 + 1e-15):
                break
            ratio = top / bottom
        return float(np.log(ratio))

    def realised_attribute_epsilon(self) -> float:
        """Two records differing in attribute ``j``: the others' ``rho`` are shared, and the
        ratio ``(max rho_j + S)/(min rho_j + S)`` is largest at the smallest
        ``S = sum_{i != j} min rho_i``; the maximum over ``j`` and ``j``'s report classes."""
        rho = self._rho()
        floors = np.array([lo.min() for _, lo in rho])
        best = -np.inf
        for j, (hi, lo) in enumerate(rho):
            rest = floors.sum() - floors[j]
            best = max(best, float(np.max(np.log(hi + rest) - np.log(lo + rest))))
        return best


def _empty_reports(mech: Mechanism) -> np.ndarray:
    if isinstance(mech, GRR):
        return np.zeros(0, dtype=np.int64)
    return np.zeros((0, mech.k), dtype=bool)


PROTOCOLS: dict[str, type[Multidimensional]] = {"SPL": SPL, "SMP": SMP, "RSFD": RSFD}


def fit_marginals(tallies: list[Tally], labels: Any = None, **options: Any) -> dict[Any, Any]:
    """Each attribute's marginal posterior: ``{label: bayesldp.fit(tally, **options)}``.

    ``labels`` names the attributes (default ``0..d-1``); ``options`` go to
    :func:`bayesldp.fit` for every tally (a ``random_seed`` integer is offset by the attribute's
    position, so the attributes' draws are independent).

    Examples
    --------
    >>> import numpy as np
    >>> from bayesldp.mechanisms import SPL
    >>> from bayesldp.mechanisms.multidimensional import fit_marginals
    >>> proto = SPL([2, 3], 4.0)
    >>> records = np.array([[0, 1], [1, 2], [0, 0], [0, 1]] * 5)
    >>> tallies = proto.tallies(proto.perturb(records, rng=0))
    >>> fits = fit_marginals(tallies, labels=["a", "b"], method="exact", draws=200, random_seed=0)
    >>> sorted(fits), fits["a"].posterior["theta"].shape[-1]
    (['a', 'b'], 2)
    """
    from bayesldp.bayes.fit import fit

    labels = list(range(len(tallies))) if labels is None else list(labels)
    if len(labels) != len(tallies):
        raise InvalidInputError(f"labels: {len(labels)} labels for {len(tallies)} tallies")
    seed = options.pop("random_seed", None)
    out = {}
    for j, (label, tally) in enumerate(zip(labels, tallies, strict=True)):
        rs = seed + j if isinstance(seed, int) else seed
        out[label] = fit(tally, random_seed=rs, **options)
    return out
