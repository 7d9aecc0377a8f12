"""One attribute's reports under RS+FD: the sampled report or fake data, as one finite channel.

Arcolezi, Couchot, Al Bouna, Xiao, "Random Sampling Plus Fake Data: Multidimensional Frequency
Estimates With Local Differential Privacy", CIKM 2021.  Each user samples one of ``d`` attributes
uniformly, reports it with a frequency oracle at the amplified budget
``eps' = ln(d (e^eps - 1) + 1)`` of the paper's nominal ``eps`` and reports fake data for every
other attribute (the classes here take the nominal ``eps``; :class:`~bayesldp.mechanisms.
multidimensional.protocols.RSFD` picks it so that the whole record realises its budget).  Seen one
attribute at a time, a report is the real one with probability ``1/d`` and fake with
probability ``1 - 1/d``, independently of the value, so its law given the value ``x`` is the
mixture channel

.. math:: P_j[x, y] = \\tfrac{1}{d} P_{\\mathrm{real}}[x, y]
          + (1 - \\tfrac{1}{d}) F[y],

which is again a finite channel over the attribute's categories: the tally of one attribute's
reports is exact, and every estimator and posterior reads it.  Writing
``rho(x, y) = P_real[x, y] / F[y]``, each likelihood row is ``(1/d) rho(x, y) + 1 - 1/d`` (the
factor ``F[y]`` is common to all ``x``).  The fake data ``F``:

* GRR: a uniform value, ``F = 1/k``: the mixture is GRR-shaped with
  ``p' = p/d + (1 - 1/d)/k``, ``q' = q/d + (1 - 1/d)/k`` (:class:`FakeDataGRR`);
* unary encoding, "zero" (the paper's OUE-z / SUE-z): the encoding of the all-zero vector, every
  bit Bernoulli(``q``), so ``rho = r(b_x)`` with ``r(1) = p/q``, ``r(0) = (1-p)/(1-q)``;
* unary encoding, "random" (OUE-r / SUE-r): the encoding of a uniform value,
  ``rho = r(b_x) / m(|b|)``, ``m(s) = r(0) + (r(1) - r(0)) s / k``.

Each is a pure protocol (support = the reported value, or the 1 bits): ``p* - q* = (p - q)/d``,
and the channel-inverse oracle ``(h(x)/n - q*)/(p* - q*)`` is exactly the paper's estimator
(GRR: ``(d h/n - q - (d-1)/k)/(p - q)``; OUE-z: ``d (h/n - q)/(p - q)``; OUE-r:
``(d h/n - d q - (d-1)(p - q)/k)/(p - q)``).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy.special import logsumexp

from bayesldp._validation import RNGLike, as_generator, check_int, check_memory, check_values
from bayesldp.errors import InvalidInputError, NotSupportedError
from bayesldp.mechanisms.base import PureProtocol, k_columns
from bayesldp.mechanisms.grr import GRR
from bayesldp.mechanisms.unary import (
    _BINCOUNT_MAX_K,
    MAX_CHANNEL_K,
    OUE,
    SUE,
    UnaryEncoding,
    _bernoulli_into,
    _column_sums,
    _count_patterns,
    _row_sums,
    support_tally,
)
from bayesldp.tally import Tally

#: the unary encodings a sampled attribute may use
UNARY = {"SUE": SUE, "OUE": OUE}
#: the kinds of fake data of the unary encodings (the paper's "-z" and "-r")
FAKES = ("zero", "random")


def amplified_epsilon(epsilon: float, d: int) -> float:
    """``eps' = ln(d (e^eps - 1) + 1)``: the budget of the sampled attribute's report (RS+FD).

    Examples
    --------
    >>> from bayesldp.mechanisms.multidimensional import amplified_epsilon
    >>> round(amplified_epsilon(1.0, 3), 4)
    1.8172
    """
    return math.log1p(d * math.expm1(epsilon))


def record_budget_epsilon(epsilon: float, d: int) -> float:
    """The nominal RS+FD epsilon whose amplified budget is ``epsilon``: ``ln(1 + (e^eps-1)/d)``.

    RS+FD at this nominal value reports the sampled attribute at ``epsilon``, so the whole
    record's report is ``epsilon``-LDP, exactly (see :meth:`RSFD.realised_epsilon`): what
    ``RSFD(ks, epsilon)`` (``budget="record"``, the default) builds its channels with, the
    same protocol as ``RSFD(ks, record_budget_epsilon(epsilon, d), budget="paper")``.

    Examples
    --------
    It inverts :func:`amplified_epsilon`:

    >>> from bayesldp.mechanisms.multidimensional import amplified_epsilon, record_budget_epsilon
    >>> nominal = record_budget_epsilon(1.0, 3)
    >>> round(nominal, 4), round(amplified_epsilon(nominal, 3), 12)
    (0.4528, 1.0)
    """
    return math.log1p(math.expm1(epsilon) / d)


def mixture_ratio_bounds(hi: np.ndarray, lo: np.ndarray, d: int) -> np.ndarray:
    """Per report class, the log of the mixture rows' ratio
    ``(hi/d + 1 - 1/d) / (lo/d + 1 - 1/d)``."""
    w = 1.0 - 1.0 / d
    return np.log(hi / d + w) - np.log(lo / d + w)


class FakeDataGRR(GRR):
    """One attribute under RS+FD[GRR]: GRR at the amplified budget w.p. ``1/d``, else uniform.

    The mixture is GRR-shaped with ``p' = p/d + (1 - 1/d)/k`` and ``q' = q/d + (1 - 1/d)/k``
    (``p, q`` the amplified GRR's), so channel, tally and oracle are GRR's with ``(p', q')``
    (module docstring).  ``epsilon`` is the RS+FD protocol's nominal budget.

    Parameters
    ----------
    k : int
        The attribute's number of categories (>= 2).
    epsilon : float
        The protocol's nominal budget (the sampled report uses ``ln(d (e^eps - 1) + 1)``).
    d : int
        Number of attributes of the record (>= 2).

    Examples
    --------
    One attribute of three records under RS+FD[GRR], ``d = 2``:

    >>> from bayesldp.mechanisms.multidimensional import FakeDataGRR
    >>> mech = FakeDataGRR(3, 1.0, d=2)
    >>> tally = mech.tally(mech.perturb([0, 1, 2], rng=0))
    >>> tally.n, round(mech.realised_epsilon(), 4)
    (3, 0.7384)
    """

    name = "FakeDataGRR"
    RECOMMEND = False

    def __init__(self, k: int, epsilon: float, d: int) -> None:
        super().__init__(k, epsilon)
        self.d = check_int(d, "d", low=2)
        #: the sampled attribute's mechanism, at the amplified budget
        self.sampled = GRR(self.k, amplified_epsilon(self.epsilon, self.d))

    def params(self) -> dict[str, Any]:
        return {"k": self.k, "epsilon": self.epsilon, "d": self.d}

    @property
    def p(self) -> float:
        """Probability that the attribute's report equals its value, ``p/d + (1 - 1/d)/k``."""
        return self.sampled.p / self.d + (1.0 - 1.0 / self.d) / self.k

    @property
    def q(self) -> float:
        """Probability of one given other value, ``q/d + (1 - 1/d)/k``."""
        return self.sampled.q / self.d + (1.0 - 1.0 / self.d) / self.k

    def fake_law(self) -> np.ndarray:
        """``F[y]``: the law of a fake report (uniform)."""
        return np.full(self.k, 1.0 / self.k)

    def rho_classes(self) -> tuple[np.ndarray, np.ndarray]:
        """``max_x`` and ``min_x`` of ``rho = P_real/F`` over the report classes (one: ``k p``,
        ``k q``, every report matching one value and not the others)."""
        return np.array([self.k * self.sampled.p]), np.array([self.k * self.sampled.q])

    def perturb_sampled(self, x: np.ndarray, sampled: np.ndarray, gen: np.random.Generator):
        """Reports of users holding ``x``: the amplified GRR where ``sampled``, else uniform."""
        out = gen.integers(0, self.k, size=x.shape[0])
        out[sampled] = self.sampled.perturb(x[sampled], gen)
        return out

    def perturb(self, x: Any, rng: RNGLike = None) -> np.ndarray:
        """The attribute's reports alone (each user sampled it w.p. ``1/d``)."""
        x = check_values(x, self.k)
        gen = as_generator(rng)
        return self.perturb_sampled(x, gen.random(x.shape[0]) < 1.0 / self.d, gen)


class FakeDataUnary(PureProtocol):
    """One attribute under RS+FD[SUE/OUE-z/r]: the amplified unary encoding w.p. ``1/d``, else
    fake bits (the encoding of the zero vector, or of a uniform value).

    Reports are bool arrays ``(n, k)``.  Likelihood row of bits ``b``:
    ``(1/d) r(b_x) + (1 - 1/d) m(b)`` with ``m = 1`` ("zero", a support-form tally with levels
    ``(r(0)/d + 1 - 1/d, r(1)/d + 1 - 1/d)``) or ``m = r(0) + (r(1) - r(0)) |b| / k``
    ("random", dense rows: the level depends on the number of 1 bits); module docstring.

    Parameters
    ----------
    k : int
        The attribute's number of categories (>= 2).
    epsilon : float
        The protocol's nominal budget.
    d : int
        Number of attributes of the record (>= 2).
    base : {"OUE", "SUE"}
        The unary encoding of the sampled attribute.
    fake : {"zero", "random"}
        The fake data.

    Examples
    --------
    >>> from bayesldp.mechanisms.multidimensional import FakeDataUnary
    >>> mech = FakeDataUnary(3, 1.0, d=2)
    >>> tally = mech.tally(mech.perturb([0, 1, 2], rng=0))
    >>> tally.n, round(mech.realised_epsilon(), 4)
    (3, 0.8354)
    """

    name = "FakeDataUnary"
    RECOMMEND = False

    def __init__(
        self, k: int, epsilon: float, d: int, base: str = "OUE", fake: str = "zero"
    ) -> None:
        super().__init__(k, epsilon)
        self.d = check_int(d, "d", low=2)
        if base not in UNARY:
            raise InvalidInputError(f"base: expected one of {', '.join(UNARY)}, got {base!r}")
        if fake not in FAKES:
            raise InvalidInputError(f"fake: expected one of {', '.join(FAKES)}, got {fake!r}")
        self.base, self.fake = base, fake
        #: the sampled attribute's mechanism, at the amplified budget
        self.sampled: UnaryEncoding = UNARY[base](self.k, amplified_epsilon(self.epsilon, self.d))

    def params(self) -> dict[str, Any]:
        return {"k": self.k, "epsilon": self.epsilon, "d": self.d, "base": self.base,
                "fake": self.fake}  # fmt: skip

    # ------------------------------------------------------------------ the mixture
    @property
    def _r(self) -> tuple[float, float]:
        """``(r(0), r(1)) = ((1-p)/(1-q), p/q)``: a report's bit of the value, real over fake."""
        p, q = self.sampled.p, self.sampled.q
        return (1.0 - p) / (1.0 - q), p / q

    def _m(self, ones: np.ndarray) -> np.ndarray:
        """``m(|b|)``: the fake law over the all-``q`` law, per number of 1 bits."""
        if self.fake == "zero":
            return np.ones(np.shape(ones))
        r0, r1 = self._r
        return r0 + (r1 - r0) * np.asarray(ones, dtype=float) / self.k

    @property
    def p_star(self) -> float:
        p, q, d = self.sampled.p, self.sampled.q, self.d
        fake = q if self.fake == "zero" else q + (p - q) / self.k
        return p / d + (1.0 - 1.0 / d) * fake

    @property
    def q_star(self) -> float:
        p, q, d = self.sampled.p, self.sampled.q, self.d
        fake = q if self.fake == "zero" else q + (p - q) / self.k
        return q / d + (1.0 - 1.0 / d) * fake

    @property
    def levels(self) -> tuple[float, float]:
        """Support-form levels of the "zero" fake data, ``(r(0)/d + 1 - 1/d, r(1)/d + 1 - 1/d)``."""
        r0, r1 = self._r
        w = 1.0 - 1.0 / self.d
        return (r0 / self.d + w, r1 / self.d + w)

    def rho_classes(self) -> tuple[np.ndarray, np.ndarray]:
        """``max_x`` and ``min_x`` of ``rho = P_real/F`` per number of 1 bits ``s = 0..k``."""
        r0, r1 = self._r
        s = np.arange(self.k + 1)
        m = self._m(s)
        return np.where(s > 0, r1, r0) / m, np.where(s < self.k, r0, r1) / m

    # ------------------------------------------------------------------ client
    def perturb_sampled(self, x: np.ndarray, sampled: np.ndarray, gen: np.random.Generator):
        """Bits of users holding ``x``: the amplified encoding of ``x`` where ``sampled``, else
        the fake bits."""
        if self.fake == "random":
            values = np.where(sampled, x, gen.integers(0, self.k, size=x.shape[0]))
            return self.sampled.perturb(values, gen)
        out = self.sampled.perturb(x, gen)
        fake = np.empty((int(np.count_nonzero(~sampled)), self.k), dtype=bool)
        _bernoulli_into(gen, self.sampled.q, fake.reshape(-1))  # the zero vector's encoding
        out[~sampled] = fake
        return out

    def perturb(self, x: Any, rng: RNGLike = None) -> np.ndarray:
        """The attribute's reports alone (each user sampled it w.p. ``1/d``), ``(n, k)`` bool."""
        x = check_values(x, self.k)
        gen = as_generator(rng)
        return self.perturb_sampled(x, gen.random(x.shape[0]) < 1.0 / self.d, gen)

    # ------------------------------------------------------------------ aggregator
    def check_reports(self, reports: Any) -> np.ndarray:
        """As :meth:`UnaryEncoding.check_reports`: shape ``(n, k)``, 0/1 bits, as bool."""
        return UnaryEncoding.check_reports(self, reports)  # reads only self.k

    def reports_from_frame(self, frame: Any, source: Any = "reports") -> np.ndarray:
        """K columns of bits (0/1 integers or booleans) named 0 to K-1, one per category."""
        return self.check_reports(k_columns(frame, self.k, source))

    def report_size(self) -> str:
        return f"{self.k} bits"

    def supports(self, reports: Any, x: int) -> np.ndarray:
        return self.check_reports(reports)[:, x]

    def tally(self, reports: Any) -> Tally:
        """The exact tally: support form ("zero"), or one dense row per distinct pattern
        ("random"; per report for ``k > 16``)."""
        bits = self.check_reports(reports)
        if self.fake == "zero":
            return support_tally(bits, self)
        if self.k <= _BINCOUNT_MAX_K:
            support, counts = _count_patterns(bits)
            stat = (counts @ support).astype(float)
        else:
            check_memory(8.0 * bits.size, f"{self.name} tally of {bits.shape[0]:,} reports "
                         f"(k = {self.k}: one dense row per report)",
                         "tally batches of users and add the tallies")  # fmt: skip
            support, counts = bits, np.ones(bits.shape[0], dtype=np.int64)
            stat = _column_sums(bits).astype(float)
        r0, r1 = self._r
        ones = _row_sums(support)
        lo = r0 / self.d + (1.0 - 1.0 / self.d) * self._m(ones)
        # lo + c b, bit for bit (lo + c * 0 = lo), in one pass over the (U, k) rows
        rows = np.where(support, (lo + (r1 - r0) / self.d)[:, None], lo[:, None])
        return Tally(counts, rows=rows, stat=stat, mechanism=self,
                     dedupe=False)  # fmt: skip

    # ------------------------------------------------------------------ privacy
    def log_fake_law(self) -> np.ndarray:
        """``log F[y]`` over the ``2^k`` bit patterns (``k <= 12``, columns as
        :attr:`UnaryEncoding.channel`)."""
        log_real = self.sampled.log_channel()
        if self.fake == "random":
            return logsumexp(log_real, axis=0) - math.log(self.k)
        _, lq, _, l1q = self.sampled.log_bit_probabilities(self.sampled.epsilon)
        bits = (np.arange(2**self.k)[:, None] >> np.arange(self.k)) & 1
        return np.where(bits == 1, lq, l1q).sum(axis=1)

    def log_channel(self) -> np.ndarray:
        """``log P_j`` over the ``2^k`` bit patterns (``k <= 12``), in log space."""
        if self.k > MAX_CHANNEL_K:
            raise NotSupportedError(f"{self.name}: the channel is only built for k <= "
                                    f"{MAX_CHANNEL_K}")  # fmt: skip
        return np.logaddexp(self.sampled.log_channel() - math.log(self.d),
                            math.log1p(-1.0 / self.d) + self.log_fake_law()[None, :])  # fmt: skip

    @property
    def channel(self) -> np.ndarray:
        """The ``k x 2^k`` mixture channel (``k <= 12``)."""
        return np.exp(self.log_channel())

    def realised_epsilon(self) -> float:
        """Exact: ``max_y log(max_x P_j[x, y] / min_x P_j[x, y])``; the rows depend on ``x``
        only through ``b_x``, so the maximum is over the numbers of 1 bits (module docstring)."""
        hi, lo = self.rho_classes()
        return float(mixture_ratio_bounds(hi, lo, self.d).max())


def fake_data_mechanism(k: int, epsilon: float, d: int, base: str, fake: str | None):
    """The RS+FD mechanism of one attribute with ``base`` ("GRR", "SUE", "OUE")."""
    if base == "GRR":
        if fake not in (None, "uniform"):
            raise InvalidInputError(f"fake: RS+FD[GRR] reports uniform fake values, got {fake!r}")
        return FakeDataGRR(k, epsilon, d)
    return FakeDataUnary(k, epsilon, d, base, "zero" if fake is None else fake)
