"""The mechanism protocol shared by every LDP mechanism in bayesldp.

Orientation everywhere: a channel is ``P[x, y] = Pr(Y = y | X = x)``; rows are true inputs,
columns are reports.  A mechanism is epsilon-LDP iff ``max_x P[x, y] <= e^eps min_x P[x, y]`` for
every report ``y``, so for a finite channel the realised epsilon is exact:

    eps_realised = max_y log(max_x P[x, y] / min_x P[x, y]).
"""

from __future__ import annotations

import functools
import math
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from bayesldp._validation import (
    RNGLike,
    as_generator,
    check_counts,
    check_domain_size,
    check_epsilon,
    check_k,
    check_memory,
    check_total,
    one_d_array,
)
from bayesldp.errors import (
    IncompatibleTallyError,
    InvalidInputError,
    InvalidTypeError,
    NotSupportedError,
)
from bayesldp.tally import Tally


def realised_epsilon_of_channel(channel: np.ndarray) -> float:
    """Exact epsilon of a finite channel: ``max_y log(max_x P[x,y] / min_x P[x,y])``.

    Columns that no input can produce are ignored; a column that some inputs produce and others
    cannot gives ``inf`` (no finite epsilon).

    Examples
    --------
    >>> import bayesldp
    >>> from bayesldp.mechanisms import realised_epsilon_of_channel
    >>> round(realised_epsilon_of_channel(bayesldp.GRR(3, 1.0).channel), 6)
    1.0
    """
    channel = np.asarray(channel, dtype=float)
    col_max = channel.max(axis=0)
    col_min = channel.min(axis=0)
    live = col_max > 0
    if np.any(col_min[live] <= 0):
        return float("inf")
    return float(np.max(np.log(col_max[live]) - np.log(col_min[live])))


def built_once(build: Callable[[Any], np.ndarray]) -> property:
    """Decorator: a property whose array ``build(self)`` makes on first use; the instance keeps
    it, read-only, as ``_<name>`` (a mechanism's channel)."""
    attr = f"_{build.__name__}"

    @functools.wraps(build)
    def get(self: Any) -> np.ndarray:
        cached = getattr(self, attr, None)
        if cached is None:
            cached = build(self)
            cached.setflags(write=False)
            setattr(self, attr, cached)
        return cached

    return property(get)


@dataclass(frozen=True)
class Parameter:
    """A constructor parameter of a mechanism beyond ``k`` and ``epsilon``.

    Declared by each class in ``PARAMETERS``; :func:`bayesldp.mechanisms.make_mechanism`, the
    command line and the spec schema read these declarations, never a list of their own.

    Examples
    --------
    >>> from bayesldp.mechanisms import parameters
    >>> (g,) = parameters("OLH")
    >>> g.name, g.kind.__name__, g.required
    ('g', 'int', False)
    """

    name: str
    kind: type
    help: str
    required: bool = False
    many: bool = False  # a list of ``kind`` values (RRRR's subset)


class Mechanism(ABC):
    """An epsilon-LDP frequency-estimation mechanism over the domain ``0..k-1``.

    Subclasses implement the client side (:meth:`perturb`), the aggregator side (:meth:`tally`),
    the exact privacy check (:meth:`realised_epsilon`) and the unbiased frequency oracle
    (:meth:`unbiased_frequencies`, :meth:`oracle_variance`), declare their extra constructor
    parameters (``PARAMETERS``) and own their report layout in a table
    (:meth:`reports_from_frame`, :meth:`reports_to_frame`).

    Examples
    --------
    Every mechanism is one; the client perturbs, the aggregator tallies:

    >>> import bayesldp
    >>> mech = bayesldp.GRR(3, 1.0)
    >>> isinstance(mech, bayesldp.Mechanism)
    True
    >>> tally = mech.tally(mech.perturb([0, 1, 2, 0, 0], rng=0))
    >>> tally.n
    5
    >>> round(mech.realised_epsilon(), 6)
    1.0
    """

    name: ClassVar[str]
    #: constructor parameters beyond k and epsilon
    PARAMETERS: ClassVar[tuple[Parameter, ...]] = ()
    #: the key of :meth:`params` that holds the constructor's first argument (what
    #: :func:`~bayesldp.mechanisms.make_mechanism` passes as ``k``): "k" unless the class
    #: sizes itself otherwise (PCKV by its keys ``d``, PCKV-PM by its value ``bins``)
    SIZE: ClassVar[str] = "k"
    #: whether ``bayesldp recommend`` ranks this mechanism (False for special-purpose ones)
    RECOMMEND: ClassVar[bool] = True
    #: whether K is checked against memory when the mechanism is built (False where the
    #: client's reports and hashes need no K-length array: local hashing checks at its tally)
    DOMAIN_CHECKED_AT_BUILD: ClassVar[bool] = True

    def __init__(self, k: int, epsilon: float) -> None:
        self.k = check_k(k)
        if self.DOMAIN_CHECKED_AT_BUILD:
            check_domain_size(self.k)  # before any K-length array
        self.epsilon = check_epsilon(epsilon)

    # ------------------------------------------------------------------ identity
    def params(self) -> dict[str, Any]:
        """The parameters that define this mechanism (JSON-friendly)."""
        return {"k": self.k, "epsilon": self.epsilon}

    @property
    def family(self) -> str:
        """Tallies merge only within one family (by default: identical parameters)."""
        return str(self._key())

    def _key(self) -> tuple:
        return (type(self).__name__, *sorted((k, _freeze(v)) for k, v in self.params().items()))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Mechanism) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        inner = ", ".join(f"{k}={_short(v)}" for k, v in self.params().items())
        return f"{type(self).__name__}({inner})"

    # ------------------------------------------------------------------ client / aggregator
    @abstractmethod
    def perturb(self, x: Any, rng: RNGLike = None) -> Any:
        """Randomise the true values ``x`` (ints in 0..k-1), one report per user.

        Named values (strings, a pandas Categorical) are refused: :func:`bayesldp.encode`
        turns them into these ints, in the order of an explicit category list.
        """

    @abstractmethod
    def tally(self, reports: Any) -> Tally:
        """Aggregate reports into a :class:`~bayesldp.Tally`."""

    def category_values(self, x: Any, rng: RNGLike = None) -> Any:
        """The inputs :meth:`perturb` takes for users in categories ``x`` (ints ``0..k-1``).

        ``x`` itself here (``rng`` unused); numerical mechanisms return values in the input
        bins ``x``.  The audit and the registry-wide checks perturb ``category_values(x)``.
        """
        return x

    def simulate_tally(self, true_counts: Any, rng: RNGLike = None) -> Tally:
        """The tally of ``sum(true_counts)`` users, ``true_counts[x]`` of whom hold ``x``.

        Statistically identical to ``tally(perturb(x))``.  This generic version perturbs every
        user (cost O(n)); finite-channel mechanisms override it with a multinomial per category.
        """
        counts = check_counts(true_counts, "true_counts", length=self.k)
        check_memory(float(counts.sum()) * (16 + 2 * self.k), f"{type(self).__name__}."
                     f"simulate_tally of {counts.sum():,} users",
                     "this mechanism perturbs every user: simulate fewer users, or tally "
                     "batches of users and add the tallies")  # fmt: skip
        x = np.repeat(np.arange(self.k), counts)
        return self.tally(self.perturb(x, rng))

    # ------------------------------------------------------------------ report tables
    def reports_from_frame(self, frame: Any, source: Any = "reports") -> Any:
        """K numeric columns named 0 to K-1, one per category (in any order).

        The reports held in a table (pandas DataFrame), in the form :meth:`tally` reads.  The
        first line of this docstring states the layout (``bayesldp estimate --help`` prints it
        for every mechanism); mechanisms with another layout override this method and state
        theirs the same way.
        """
        return k_columns(frame, self.k, source)

    def reports_to_frame(self, reports: Any) -> Any:
        """The reports as a table that :meth:`reports_from_frame` reads back."""
        import pandas as pd

        values = np.asarray(reports)
        return pd.DataFrame(values, columns=[str(x) for x in range(self.k)])

    def tally_frame(self, frame: Any, source: Any = "reports") -> Tally:
        """Tally the reports held in a table (see :meth:`reports_from_frame`)."""
        return self.tally(self.reports_from_frame(frame, source))

    def report_size(self) -> str:
        """Communication cost of one report, for people (``bayesldp recommend``)."""
        return f"{self.k} floats"

    # ------------------------------------------------------------------ privacy
    @abstractmethod
    def realised_epsilon(self) -> float:
        """The epsilon this mechanism actually guarantees, computed from its channel."""

    @property
    def channel(self) -> np.ndarray:
        """The K x ``|Y|`` channel ``P[x, y]`` (only where the output space is finite and small)."""
        raise NotSupportedError(f"{type(self).__name__} has no small finite channel")

    # ------------------------------------------------------------------ oracle
    @abstractmethod
    def unbiased_frequencies(self, tally: Tally) -> np.ndarray:
        """The unbiased frequency estimate (may leave the simplex)."""

    @abstractmethod
    def oracle_variance(self, theta: Any, n: int) -> np.ndarray:
        """Exact variance of each coordinate of the unbiased estimate.

        For ``n`` users whose true values are fixed with frequencies ``theta``.
        """

    def audit_event(self, reports: Any, x0: int, x1: int) -> np.ndarray:
        """Boolean per report: the event that best tells input ``x0`` from ``x1``.

        Used by :func:`bayesldp.audit.audit`; the ratio of its probabilities under ``x0`` and
        ``x1`` should reach ``e^eps`` for a tight mechanism.
        """
        raise NotSupportedError(f"{type(self).__name__} defines no audit event")

    def check_tally(self, tally: Tally) -> Tally:
        """Raise unless ``tally`` came from exactly this mechanism."""
        if not isinstance(tally, Tally):
            raise InvalidInputError(f"tally: expected a bayesldp.Tally, got {type(tally).__name__}")
        if tally.mechanism != self:
            source = tally.mechanism if tally.mechanism is not None else tally.family
            raise IncompatibleTallyError(f"tally: it comes from {source}, not from {self!r}")
        return tally


class FiniteChannelMechanism(Mechanism):
    """A mechanism whose reports are integers ``0..n_outputs-1`` with a known channel.

    The tally is exact: one dense row per observed report ``y``, the channel column ``P[:, y]``.
    The default oracle inverts a square channel, ``f = P^{-T} phi`` with ``phi`` the report
    frequencies; its exact variance for a fixed population with frequencies ``theta`` is the
    diagonal of ``P^{-T} C P^{-1}``, ``C = sum_x theta_x (diag P_x - P_x P_x^T) / n``.

    Examples
    --------
    GRR's reports are categories, its channel a ``(k, k)`` matrix:

    >>> import numpy as np
    >>> import bayesldp
    >>> from bayesldp.mechanisms import FiniteChannelMechanism
    >>> mech = bayesldp.GRR(3, 1.0)
    >>> isinstance(mech, FiniteChannelMechanism), mech.n_outputs
    (True, 3)
    >>> np.round(mech.channel, 3)
    array([[0.576, 0.212, 0.212],
           [0.212, 0.576, 0.212],
           [0.212, 0.212, 0.576]])
    """

    @property
    @abstractmethod
    def channel(self) -> np.ndarray:
        """The K x n_outputs channel matrix."""

    @property
    def n_outputs(self) -> int:
        """Size of the report alphabet."""
        return int(self.channel.shape[1])

    def realised_epsilon(self) -> float:
        return realised_epsilon_of_channel(self.channel)

    def check_reports(self, reports: Any, cast: bool = True) -> np.ndarray:
        """Validate integer reports in ``0..n_outputs-1``; int64 unless ``cast=False`` (then in
        their own integer dtype)."""
        arr = one_d_array(reports, "reports")
        if arr.dtype.kind not in "iu":
            raise InvalidInputError(f"reports: expected integer reports, got dtype {arr.dtype}")
        m = self.n_outputs
        if arr.min() < 0 or arr.max() >= m:
            bad = arr.min() if arr.min() < 0 else arr.max()
            raise InvalidInputError(f"reports: must lie in 0..{m - 1}, got {bad}")
        return arr.astype(np.int64, copy=False) if cast else arr

    def tally(self, reports: Any) -> Tally:
        reports = self.check_reports(reports, cast=False)
        return self.tally_from_report_counts(count_reports(reports, self.n_outputs))

    def reports_from_frame(self, frame: Any, source: Any = "reports") -> np.ndarray:
        """A ``report`` column of integers 0..n_outputs-1 (0..K-1 for a K x K channel)."""
        (reports,) = int_columns(frame, ["report"], source, cast=False)
        return reports

    def reports_to_frame(self, reports: Any) -> Any:
        import pandas as pd

        return pd.DataFrame({"report": self.check_reports(reports)})

    def tally_frame(self, frame: Any, source: Any = "reports") -> Tally:
        """Tally a ``report`` column, or aggregated data: ``report`` and ``count`` columns."""
        if "count" not in frame.columns:
            return self.tally(self.reports_from_frame(frame, source))
        (reports,) = int_columns(frame, ["report"], source)
        counts = count_column(frame, source)
        self.check_reports(reports)
        totals = np.zeros(self.n_outputs, dtype=np.int64)
        np.add.at(totals, reports, counts)  # integer sums: no float rounding of large counts
        return self.tally_from_report_counts(totals)

    def report_size(self) -> str:
        return bits(math.ceil(math.log2(self.n_outputs)))

    def tally_from_report_counts(self, report_counts: Any) -> Tally:
        """Build the tally from counts of each report value (already aggregated data)."""
        report_counts = check_counts(report_counts, "report_counts", length=self.n_outputs)
        if report_counts.sum() == 0:
            raise InvalidInputError("report_counts: all zero; at least one report is needed")
        seen = np.flatnonzero(report_counts)
        check_memory(8.0 * self.k * seen.size, f"a {type(self).__name__} tally with "
                     f"{seen.size:,} distinct reports and K = {self.k}",
                     "use fewer categories")  # fmt: skip
        return Tally(
            report_counts[seen],
            rows=self.channel[:, seen].T,
            stat=self._oracle_stat(report_counts),
            mechanism=self,
        )

    def audit_event(self, reports: Any, x0: int, x1: int) -> np.ndarray:
        """Reports ``y`` with the largest likelihood ratio ``P[x0, y] / P[x1, y]``."""
        channel = self.channel
        ratio = np.log(channel[x0]) - np.log(channel[x1])
        return np.isin(np.asarray(reports), np.flatnonzero(ratio >= ratio.max() - 1e-12))

    def _oracle_stat(self, report_counts: np.ndarray) -> np.ndarray:
        if self.n_outputs != self.k:
            raise NotSupportedError(f"{type(self).__name__} must define its oracle statistic")
        return report_counts.astype(float)

    def simulate_tally(self, true_counts: Any, rng: RNGLike = None) -> Tally:
        """Tally of ``sum(true_counts)`` users drawn as one multinomial per true category.

        Cost O(K * n_outputs), independent of n.
        """
        counts = check_counts(true_counts, "true_counts", length=self.k)
        if counts.sum() == 0:
            raise InvalidInputError("true_counts: all zero; at least one user is needed")
        gen = as_generator(rng)
        channel = self.channel
        pvals = channel / channel.sum(axis=1, keepdims=True)
        report_counts = gen.multinomial(counts, pvals).sum(axis=0)
        return self.tally_from_report_counts(report_counts)

    # ------------------------------------------------------------------ channel-inverse oracle
    def unbiased_frequencies(self, tally: Tally) -> np.ndarray:
        self.check_tally(tally)
        return np.linalg.solve(self.channel.T, tally.stat / tally.n)

    def oracle_variance(self, theta: Any, n: int) -> np.ndarray:
        theta = np.asarray(theta, dtype=float)
        p = self.channel
        cov = np.diag(theta @ p) - (p.T * theta) @ p
        inv = np.linalg.inv(p)
        return np.einsum("ij,jk,ki->i", inv.T, cov, inv) / n


class PureProtocol(Mechanism):
    """A pure LDP protocol (Wang et al., USENIX Security 2017, Definition 3).

    Each report ``y`` supports a set of inputs with ``Pr[x in S(Y) | X = x] = p*`` and
    ``Pr[x in S(Y) | X = x'] = q*`` for ``x' != x``.  The oracle statistic is the support count
    ``h(x) = sum_i 1[x in S(y_i)]``; the unbiased estimate and its exact variance
    (fixed population with frequencies ``f``) are

    .. math::

        \\hat f(x) = \\frac{h(x)/n - q^*}{p^* - q^*}, \\qquad
        \\mathrm{Var}[\\hat f(x)] = \\frac{q^*(1-q^*)}{n (p^*-q^*)^2}
            + \\frac{f(x)(1-p^*-q^*)}{n (p^*-q^*)}.

    Examples
    --------
    OUE is pure, with ``p* = 1/2`` and ``q* = 1 / (e^eps + 1)``:

    >>> import bayesldp
    >>> from bayesldp.mechanisms import PureProtocol
    >>> mech = bayesldp.OUE(3, 1.0)
    >>> isinstance(mech, PureProtocol)
    True
    >>> mech.p_star, round(mech.q_star, 4)
    (0.5, 0.2689)
    """

    @property
    @abstractmethod
    def p_star(self) -> float:
        """Pr[x in Support(Y) | X = x]."""

    @property
    @abstractmethod
    def q_star(self) -> float:
        """Pr[x in Support(Y) | X = x'] for x' != x."""

    def unbiased_frequencies(self, tally: Tally) -> np.ndarray:
        self.check_tally(tally)
        return (tally.stat / tally.n - self.q_star) / (self.p_star - self.q_star)

    def oracle_variance(self, theta: Any, n: int) -> np.ndarray:
        p, q = self.p_star, self.q_star
        theta = np.asarray(theta, dtype=float)
        return q * (1 - q) / (n * (p - q) ** 2) + theta * (1 - p - q) / (n * (p - q))

    @abstractmethod
    def supports(self, reports: Any, x: int) -> np.ndarray:
        """Boolean per report: is ``x`` in the support set of the report?"""

    def audit_event(self, reports: Any, x0: int, x1: int) -> np.ndarray:
        """The report supports ``x0`` and not ``x1``."""
        return self.supports(reports, x0) & ~self.supports(reports, x1)

    def var_star(self) -> float:
        """``n * Var*``: the variance of one coordinate as its frequency tends to 0, times n."""
        p, q = self.p_star, self.q_star
        return q * (1 - q) / (p - q) ** 2


class DirectSupportProtocol(PureProtocol):
    """A pure protocol whose oracle probabilities are the mechanism's own ``p`` and ``q``:
    ``p* = p``, ``q* = q`` (GRR, the unary encodings, subset selection)."""

    p: float
    q: float

    @property
    def p_star(self) -> float:
        return self.p

    @property
    def q_star(self) -> float:
        return self.q


#: from this many reports on, :func:`count_reports` uses the compiled count
COMPILED_COUNT_MIN = 100_000


def count_reports(reports: np.ndarray, m: int) -> np.ndarray:
    """How many of the integer ``reports`` (checked to lie in ``0..m-1``) equal each value.

    ``np.bincount`` on small arrays; a compiled single pass on large ones, which skips
    bincount's conversion of the whole array to ``intp`` (:mod:`bayesldp.mechanisms._counting`).
    """
    if reports.size < COMPILED_COUNT_MIN:
        return np.bincount(reports, minlength=m)
    from bayesldp.mechanisms._counting import count_codes

    return count_codes(np.ascontiguousarray(reports), m)


def bits(count: int) -> str:
    """``"1 bit"``, ``"4 bits"``: a report size in words."""
    return f"{count} bit" if count == 1 else f"{count} bits"


def count_column(frame: Any, source: Any) -> np.ndarray:
    """The ``count`` column of aggregated reports as int64: whole numbers >= 0 whose total a
    64-bit count holds (a larger count or total would wrap around, so it is refused)."""
    column = frame["count"].to_numpy() if "count" in frame.columns else None
    if column is not None and column.dtype.kind == "O" and column.size:  # beyond 2**64: text
        text = [str(v).strip() for v in column]
        if all(t.isdigit() for t in text) and max(map(int, text)) > np.iinfo(np.int64).max:
            raise InvalidInputError(
                f"reports: {source} column 'count': a count of {max(map(int, text)):,} is too "
                "large for a 64-bit count (at most 2**63 - 1)"
            )
    (counts,) = int_columns(frame, ["count"], source, cast=False)
    if counts.size and counts.dtype.kind == "i" and counts.min() < 0:
        raise InvalidInputError(
            f"reports: {source} column 'count' must be >= 0, got {counts.min()}"
        )
    if counts.size and counts.dtype.kind == "u" and counts.max() > np.iinfo(np.int64).max:
        raise InvalidInputError(
            f"reports: {source} column 'count': a count of {int(counts.max()):,} is too large "
            "for a 64-bit count (at most 2**63 - 1)"
        )
    counts = counts.astype(np.int64)
    check_total(counts, f"reports: {source} column 'count'")
    return counts


def report_matrix(reports: Any, width: int, row: str) -> np.ndarray:
    """``reports`` as an array of shape ``(n, width)`` with ``n >= 1`` (any dtype; the caller
    checks it); ``row`` says in the error what a row is ("one bit vector per user")."""
    arr = np.asarray(reports)
    if arr.ndim != 2 or arr.shape[1] != width:
        raise InvalidInputError(f"reports: expected shape (n, {width}) ({row}), got {arr.shape}")
    if arr.shape[0] == 0:
        raise InvalidInputError("reports: is empty; at least one report is needed")
    return arr


def bits_as_bool(bits: np.ndarray, name: str) -> np.ndarray:
    """Bool bits as they are, integer 0/1 bits as bool (any other integer is an error that
    ``name`` begins: ``"reports: bits"``)."""
    if bits.dtype == bool:
        return bits
    if bits.min() < 0 or bits.max() > 1:
        bad = bits.min() if bits.min() < 0 else bits.max()
        raise InvalidInputError(f"{name} must be 0 or 1, got {bad}")
    return bits.astype(bool)


def check_report_field(
    reports: Any, field: str, lo: int, hi: int, same_length_as: tuple[str, int] | None = None
) -> np.ndarray:
    """A report field (the attribute ``field`` of ``reports``) as a non-empty 1-d int64 array
    with values in ``lo..hi``; ``same_length_as = (name, n)``: it must have the ``n`` entries of
    the field ``name``."""
    arr = np.asarray(getattr(reports, field))
    if arr.ndim != 1:
        raise InvalidInputError(f"reports.{field}: expected a 1-d array, got shape {arr.shape}")
    if arr.dtype.kind not in "iu":
        raise InvalidTypeError(f"reports.{field}: expected integers, got dtype {arr.dtype}")
    if arr.size == 0:
        raise InvalidInputError(f"reports.{field}: is empty; at least one report is needed")
    if same_length_as is not None and arr.size != same_length_as[1]:
        other, n = same_length_as
        raise InvalidInputError(f"reports.{field}: has {arr.size} entries, reports.{other} has {n}")
    if arr.min() < lo or arr.max() > hi:
        bad = arr.min() if arr.min() < lo else arr.max()
        raise InvalidInputError(f"reports.{field}: must lie in {lo}..{hi}, got {bad}")
    return arr.astype(np.int64, copy=False)


def int_columns(frame: Any, names: list[str], source: Any, cast: bool = True) -> list[np.ndarray]:
    """The named integer columns of a table, with errors naming the file and the column (int64,
    or in the file's own integer dtype with ``cast=False``)."""
    missing = [c for c in names if c not in frame.columns]
    if missing:
        raise InvalidInputError(
            f"reports: {source} lacks column(s) {', '.join(missing)}; it has "
            f"{', '.join(map(str, frame.columns))}"
        )
    out = []
    for name in names:
        col = frame[name].to_numpy()
        if col.dtype.kind not in "iu":
            raise InvalidInputError(
                f"reports: {source} column {name!r} must hold integers, got {col.dtype}"
            )
        out.append(col.astype(np.int64) if cast else col)
    return out


def k_columns(frame: Any, k: int, source: Any) -> np.ndarray:
    """A table of exactly ``k`` numeric (or boolean) columns, one per category, as an array.

    The columns are matched by their names, ``0`` to ``k - 1`` (as :meth:`Mechanism.
    reports_to_frame` writes them), in whatever order the file has them: a file headed
    ``4,3,2,1,0`` is read by category, not by position."""
    if frame.shape[1] != k:
        raise InvalidInputError(
            f"reports: {source} must have exactly k = {k} columns (one per category), "
            f"got {frame.shape[1]}"
        )
    names = [str(c).strip("\ufeff ") for c in frame.columns]
    order = [int(n) if n.isdigit() else None for n in names]
    if sorted(order, key=lambda v: -1 if v is None else v) != list(range(k)):
        shown = ",".join(names[:8]) + (",..." if k > 8 else "")
        raise InvalidInputError(
            f"reports: {source} must name its k = {k} columns 0 to {k - 1}, one per category "
            f"(in any order), got {shown}"
        )
    values = frame.to_numpy()
    if values.dtype.kind not in "biuf":
        raise InvalidInputError(f"reports: {source} must hold numbers only, got {values.dtype}")
    if order != list(range(k)):
        values = values[:, np.argsort(order)]
    return np.ascontiguousarray(values)  # row-major, as perturb returns: identical sums


def _freeze(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return (value.shape, tuple(value.ravel().tolist()))
    if isinstance(value, list | tuple):
        return tuple(_freeze(v) for v in value)
    return value


def _short(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.12g}"
    if isinstance(value, np.ndarray | list | tuple) and len(value) > 8:
        items = list(np.asarray(value).ravel()[:8])
        return "[" + ", ".join(str(v) for v in items) + ", ...]"
    return repr(value) if not isinstance(value, np.ndarray) else str(value.tolist())
