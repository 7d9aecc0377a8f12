"""The protocol shared by the numerical mechanisms: real values in, real reports out, binned.

A numerical mechanism randomises a value ``v`` in ``[lo, hi]`` into a real report ``y`` with an
exact transfer density ``f(y | v)`` (:meth:`NumericalMechanism.density`).  For estimation the
domain is cut into ``k`` equal *input bins* (the categories every estimator sees) and the report
line into ``output_bins`` *output bins*; the discretised channel ``P[i, j]`` is the exact
probability of a report in output bin ``j`` for a value uniform within input bin ``i``
(:mod:`~bayesldp.mechanisms.numerical.discretise`).  :meth:`~NumericalMechanism.tally` bins real
reports into output bins and returns the same :class:`~bayesldp.Tally` as any finite-channel
mechanism, so ``estimate(tally, "em" | "em_mr" | "ibu" | "mle")`` and ``fit(tally)`` give the
distribution over the input bins.
"""

from __future__ import annotations

import math
from abc import abstractmethod
from typing import Any, ClassVar

import numpy as np

from bayesldp._validation import (
    RNGLike,
    as_generator,
    check_int,
    check_memory,
    check_values,
    one_d_array,
)
from bayesldp.errors import InvalidInputError, InvalidTypeError, NotSupportedError
from bayesldp.mechanisms.base import (
    FiniteChannelMechanism,
    Parameter,
    built_once,
    count_column,
    realised_epsilon_of_channel,
)
from bayesldp.mechanisms.numerical.discretise import (
    bin_index,
    check_domain,
    check_real_values,
    equal_bins,
    location_channel,
    window_channel,
)
from bayesldp.tally import Tally

LO = Parameter("lo", float, "lower end of the numerical domain [lo, hi] (default 0)")
HI = Parameter("hi", float, "upper end of the numerical domain [lo, hi] (default 1)")
OUTPUT_BINS = Parameter(
    "output_bins", int, "number of output bins the real reports are binned into (default: own)"
)


class ChannelInverseOracle:
    """The channel-inverse oracle of a channel with ``output_bins`` outputs and ``k`` inputs:
    ``f = P^{-T} phi`` when square, least squares ``R^{-1} Q^T phi`` (thin QR of ``P^T``) when
    there are more outputs than inputs; with fewer outputs the frequencies are not identified
    and the oracle refuses."""

    k: int
    output_bins: int
    channel: np.ndarray

    def _oracle_factors(self) -> tuple[np.ndarray, np.ndarray | None]:
        """``(Q, R)`` of the thin QR of ``P^T`` when the channel is not square (cached)."""
        cached = getattr(self, "_qr", None)
        if cached is None:
            q, r = np.linalg.qr(self.channel.T)
            cached = (q, r)
            self._qr = cached
        return cached

    def _check_identified(self) -> None:
        if self.output_bins < self.k:
            raise NotSupportedError(
                f"{self!r}: the channel-inverse oracle needs at least k = {self.k} output "
                f"bins, got {self.output_bins}; use more output bins or an EM estimator"
            )

    def _oracle_stat(self, report_counts: np.ndarray) -> np.ndarray:
        """Report counts (square channel) or ``Q^T`` times them (least squares, additive); with
        fewer outputs than inputs no oracle applies and the statistic is zero, as for merged
        tallies (:func:`bayesldp.tally.joint_tally`)."""
        if self.output_bins < self.k:
            return np.zeros(self.k)
        if self.output_bins == self.k:
            return report_counts.astype(float)
        q, _ = self._oracle_factors()
        return q.T @ report_counts.astype(float)

    def _oracle_matrix(self) -> np.ndarray:
        """``M`` (k x output_bins) with the oracle ``f = M phi``: ``P^{-T}`` or ``R^{-1} Q^T``."""
        self._check_identified()
        if self.output_bins == self.k:
            return np.linalg.inv(self.channel.T)
        q, r = self._oracle_factors()
        return np.linalg.solve(r, q.T)

    def unbiased_frequencies(self, tally: Tally) -> np.ndarray:
        """The channel-inverse estimate ``f = P^{-T} phi`` (least squares when not square).

        ``phi`` are the report frequencies over output bins; ``E[phi] = P^T theta`` for values
        uniform within their bins, so ``f`` is unbiased for the bins' frequencies.
        """
        self.check_tally(tally)
        self._check_identified()
        if self.output_bins == self.k:
            return np.linalg.solve(self.channel.T, tally.stat / tally.n)
        _, r = self._oracle_factors()
        return np.linalg.solve(r, tally.stat / tally.n)

    def oracle_variance(self, theta: Any, n: int) -> np.ndarray:
        """``diag(M C M^T)``, ``C = (diag(theta P) - P^T diag(theta) P) / n``, without the
        ``output_bins x output_bins`` matrix ``C``: ``(M^2 (theta P) - (M P^T)^2 theta) / n``."""
        theta = np.asarray(theta, dtype=float)
        p = self.channel
        m = self._oracle_matrix()
        return ((m * m) @ (theta @ p) - ((m @ p.T) ** 2) @ theta) / n

    def point_mass_variances(self) -> np.ndarray:
        """``table[j, x] = Var_x(e_j)`` for one report (everyone in bin ``j``), all at once.

        With ``C_j = diag(P_j) - P_j^T P_j``, ``Var_x(e_j) = sum_y M[x, y]^2 P[j, y] -
        (M P_j^T)_x^2``: two ``k x output_bins x k`` products, where the ``k`` calls of
        :meth:`oracle_variance` that :func:`bayesldp.bounds.var_star_by_category` would
        otherwise make invert the channel ``k`` times (minutes at ``k = 1024``).
        """
        m, p = self._oracle_matrix(), self.channel
        return ((m * m) @ p.T - (m @ p.T) ** 2).T


class NumericalMechanism(ChannelInverseOracle, FiniteChannelMechanism):
    """An LDP mechanism for real values in ``[lo, hi]``, discretised into ``k`` input bins.

    Parameters
    ----------
    k : int
        Number of equal input bins of ``[lo, hi]`` (the categories of every estimate).
    epsilon : float
        Privacy budget.
    lo, hi : float, default 0, 1
        The value domain.
    output_bins : int, optional
        Number of output bins of the report line (default: the subclass's).

    Notes
    -----
    Reports are real numbers in the units of the values.  :attr:`bin_edges` and
    :attr:`bin_centres` describe the input bins, :attr:`output_edges` the output bins;
    :meth:`density` is the exact transfer density and :attr:`channel` the exact discretised
    channel.  :meth:`realised_epsilon` is computed from the density (not from the budget's
    formula); :meth:`channel_epsilon` is the epsilon of the discretised channel (never more).
    """

    RECOMMEND: ClassVar[bool] = False
    MIN_OUTPUT_BINS: ClassVar[int] = 2
    PARAMETERS: ClassVar[tuple[Parameter, ...]] = (LO, HI, OUTPUT_BINS)
    #: :func:`bayesldp.fit`'s default prior on these reports, where the method samples it
    DEFAULT_PRIOR: ClassVar[str] = "smooth"
    #: what :func:`bayesldp.fit` warns of where it falls back to Dirichlet(1)
    DEFAULT_PRIOR_CAVEAT: ClassVar[str] = (
        "puts one pseudo-count on every bin and pulls the distribution, and its mean, towards "
        "uniform on [lo, hi] (benchmarks/results/smooth_prior.md); the default on ordered bins "
        "is prior='smooth' (bayesldp.SmoothDensity), which needs method 'auto', 'hmc' or "
        "'nuts' and at least 3 bins"
    )

    def __init__(
        self,
        k: int,
        epsilon: float,
        lo: float = 0.0,
        hi: float = 1.0,
        output_bins: int | None = None,
    ) -> None:
        super().__init__(k, epsilon)
        self.lo, self.hi = check_domain(lo, hi, self.k)
        try:
            self._setup()
            self._check_constants()
            if output_bins is None:
                output_bins = self._default_output_bins()
        except (OverflowError, ZeroDivisionError, FloatingPointError) as exc:
            raise InvalidInputError(
                f"lo, hi: the domain [{self.lo:g}, {self.hi:g}] at epsilon = {self.epsilon:g} "
                f"overflows float64 in {type(self).__name__}'s constants ({exc}); rescale the "
                "values to a smaller range, e.g. [0, 1]"
            ) from None
        self.output_bins = check_int(output_bins, "output_bins", self.MIN_OUTPUT_BINS)

    def _check_constants(self) -> None:
        """Refuse a domain whose derived constants (the output range, the noise scale) overflow
        float64: the reports would be NaN or infinite."""
        bad = [name for name, value in vars(self).items()
               if isinstance(value, float) and not math.isfinite(value)]  # fmt: skip
        if bad:
            raise InvalidInputError(
                f"lo, hi: the domain [{self.lo:g}, {self.hi:g}] at epsilon = {self.epsilon:g} "
                f"makes {type(self).__name__}'s {bad[0].strip('_')} overflow float64 (reports "
                "would not be finite); rescale the values to a smaller range, e.g. [0, 1]"
            )

    # ------------------------------------------------------------------ subclass hooks
    def _setup(self) -> None:
        """Compute the mechanism's constants (called once the domain is known)."""

    @abstractmethod
    def _default_output_bins(self) -> int:
        """The number of output bins when none is given."""

    @property
    @abstractmethod
    def output_edges(self) -> np.ndarray:
        """The ``output_bins + 1`` edges of the output bins (the ends may be infinite)."""

    @abstractmethod
    def density(self, y: Any, v: Any) -> np.ndarray:
        """The transfer density ``f(y | v)`` of a report ``y`` given the value ``v`` (broadcast)."""

    @abstractmethod
    def _perturb_values(self, v: np.ndarray, gen: np.random.Generator) -> np.ndarray:
        """Randomise checked values ``v`` (floats in ``[lo, hi]``)."""

    @abstractmethod
    def _channel_matrix(self) -> np.ndarray:
        """The exact k x output_bins discretised channel."""

    def log_density(self, y: Any, v: Any) -> np.ndarray:
        """``log f(y | v)`` (subclasses override where the density under- or overflows)."""
        with np.errstate(divide="ignore"):
            return np.log(self.density(y, v))

    # ------------------------------------------------------------------ identity
    def params(self) -> dict[str, Any]:
        return {
            "k": self.k,
            "epsilon": self.epsilon,
            "lo": self.lo,
            "hi": self.hi,
            "output_bins": self.output_bins,
        }

    @property
    def bins(self) -> int:
        """Number of input bins (``k``)."""
        return self.k

    @property
    def width(self) -> float:
        """Width of the domain, ``hi - lo`` (the sensitivity of the additive mechanisms)."""
        return self.hi - self.lo

    @property
    def bin_edges(self) -> np.ndarray:
        """The ``k + 1`` edges of the equal input bins, ``lo`` to ``hi``."""
        return equal_bins(self.lo, self.hi, self.k)

    @property
    def bin_centres(self) -> np.ndarray:
        """The centres of the ``k`` input bins."""
        edges = self.bin_edges
        return 0.5 * (edges[:-1] + edges[1:])

    @property
    def output_range(self) -> tuple[float, float]:
        """The smallest and largest possible report (``-inf``, ``inf`` when unbounded)."""
        edges = self.output_edges
        return float(edges[0]), float(edges[-1])

    @property
    def n_outputs(self) -> int:
        return self.output_bins

    @built_once
    def channel(self) -> np.ndarray:
        """The exact ``k x output_bins`` channel: ``P[i, j] = Pr(report in C_j | v ~ U(A_i))``."""
        check_memory(24.0 * self.k * self.output_bins, f"{self!r}.channel",
                     "use fewer bins or output bins")  # fmt: skip
        return self._channel_matrix()

    # ------------------------------------------------------------------ client side
    def perturb(self, x: Any, rng: RNGLike = None, *, clip: bool = False) -> np.ndarray:
        """Randomise real values ``x`` in ``[lo, hi]``: one real report per value.

        Values outside ``[lo, hi]`` are an error unless ``clip=True`` (they are then moved to
        the nearest end and a :class:`~bayesldp.errors.ClippingWarning` says how many); NaN and
        infinite values are an error naming how many.
        """
        if not isinstance(clip, bool | np.bool_):
            raise InvalidTypeError(f"clip: expected True or False, got {clip!r}")
        values = check_real_values(x, self.lo, self.hi, clip=bool(clip), name="x")
        return self._perturb_values(values, as_generator(rng))

    def category_values(self, x: Any, rng: RNGLike = None) -> np.ndarray:
        """Values in the input bins ``x`` (ints ``0..k-1``) that :meth:`perturb` takes.

        The bins' centres when ``rng`` is None; else one uniform draw within each value's bin,
        the discretised channel's model of a bin (reports of such values follow
        :attr:`channel` exactly).
        """
        x = check_values(x, self.k)
        if rng is None:
            return self.bin_centres[x]
        edges = self.bin_edges
        u = as_generator(rng).random(x.shape[0])
        return np.minimum(edges[x] + u * (edges[x + 1] - edges[x]), edges[x + 1])

    # ------------------------------------------------------------------ aggregator side
    def check_reports(self, reports: Any) -> np.ndarray:
        """Validate real reports: finite numbers within :attr:`output_range`."""
        arr = one_d_array(reports, "reports")
        if arr.dtype.kind not in "iuf":
            raise InvalidTypeError(f"reports: expected real numbers, got dtype {arr.dtype}")
        arr = arr.astype(float)
        bad = ~np.isfinite(arr)
        if bad.any():
            raise InvalidInputError(
                f"reports: {int(bad.sum())} of {arr.size} reports are NaN or infinite"
            )
        low, high = self.output_range
        outside = (arr < low) | (arr > high)
        if outside.any():
            raise InvalidInputError(
                f"reports: {int(outside.sum())} of {arr.size} reports lie outside the range "
                f"[{low:.12g}, {high:.12g}] this mechanism can report (min {arr.min():.12g}, max "
                f"{arr.max():.12g}); were they made with other lo, hi or epsilon?"
            )
        return arr

    def output_bin(self, reports: Any) -> np.ndarray:
        """The output bin (``0..output_bins-1``) of each real report."""
        return bin_index(self.check_reports(reports), self.output_edges)

    def tally(self, reports: Any) -> Tally:
        """Bin real reports into the output bins and tally the counts."""
        return self.tally_from_report_counts(self.output_bin_counts_of(reports))

    def output_bin_counts_of(self, reports: Any) -> np.ndarray:
        """Reports per output bin."""
        self._check_bin_counts_memory()
        return np.bincount(self.output_bin(reports), minlength=self.output_bins)

    def _check_bin_counts_memory(self) -> None:
        """A tally's arrays, checked before the first: the counts and edges of the output bins
        (8 bytes each), the ``k x output_bins`` channel it is read through (24 bytes) and the
        estimators' ``k x output_bins`` matrices (about five of 8 bytes)."""
        per_bin = 16.0 + 64.0 * self.k
        check_memory(per_bin * self.output_bins, f"{self!r}: counts of {self.output_bins:,} "
                     f"output bins, their edges, the {self.k} x {self.output_bins:,} channel and "
                     "the estimators' matrices of that size",
                     "use fewer output bins (output_bins=)",
                     limit=(per_bin, "output bins"))  # fmt: skip

    def reports_from_frame(self, frame: Any, source: Any = "reports") -> np.ndarray:
        """A report column of real numbers (in the units of the values)."""
        if "report" not in frame.columns:
            raise InvalidInputError(
                f"reports: {source} lacks column report; it has "
                f"{', '.join(map(str, frame.columns))}"
            )
        col = frame["report"].to_numpy()
        if col.dtype.kind not in "iuf":
            raise InvalidInputError(
                f"reports: {source} column 'report' must hold numbers, got {col.dtype}"
            )
        return col.astype(float)

    def reports_to_frame(self, reports: Any) -> Any:
        import pandas as pd

        return pd.DataFrame({"report": self.check_reports(reports)})

    def tally_frame(self, frame: Any, source: Any = "reports") -> Tally:
        """Tally a ``report`` column, or aggregated data: ``report`` and ``count`` columns."""
        return self.tally_from_report_counts(self.output_bin_counts(frame, source))

    def output_bin_counts(self, frame: Any, source: Any = "reports") -> np.ndarray:
        """Reports per output bin from a ``report`` column (and a ``count`` column, if any)."""
        self._check_bin_counts_memory()
        bins = self.output_bin(self.reports_from_frame(frame, source))
        if "count" not in frame.columns:
            return np.bincount(bins, minlength=self.output_bins)
        counts = count_column(frame, source)
        totals = np.zeros(self.output_bins, dtype=np.int64)
        np.add.at(totals, bins, counts)
        return totals

    def report_size(self) -> str:
        return "1 float"

    # ------------------------------------------------------------------ privacy
    def _grids(self) -> tuple[np.ndarray, np.ndarray]:
        """Inputs (both domain ends, the bin edges or 257 points) and outputs (every finite
        output edge and bin midpoint) where :meth:`realised_epsilon` evaluates the density."""
        v = self.bin_edges if self.k <= 256 else equal_bins(self.lo, self.hi, 256)
        edges = self.output_edges[np.isfinite(self.output_edges)]
        y = np.concatenate([edges, 0.5 * (edges[:-1] + edges[1:]), [self.lo, self.hi]])
        return v, np.unique(y)

    def realised_epsilon(self) -> float:
        """``sup_y max_{v, v'} log f(y | v) / f(y | v')``, from the density.

        Evaluated over a grid of inputs holding both ends of the domain and of outputs holding
        every finite output edge and midpoint; for the densities here the supremum is reached at
        ``v, v' = lo, hi`` (see each class), so the value is exact.
        """
        v, y = self._grids()
        logf = self.log_density(y[None, :], v[:, None])
        return float(np.max(logf.max(axis=0) - logf.min(axis=0)))

    def channel_epsilon(self) -> float:
        """The epsilon of the discretised channel (at most :meth:`realised_epsilon`)."""
        return realised_epsilon_of_channel(self.channel)

    # ------------------------------------------------------------------ mean
    def report_mean_line(self) -> tuple[float, float]:
        """``(a, b)`` with ``E[y | v] = a + b v``: every mechanism here is affine in ``v``."""
        return 0.0, 1.0

    def unbiased_mean(self, reports: Any) -> tuple[float, float]:
        """Unbiased mean of the values from real reports, and its estimated variance.

        ``z_i = (y_i - a) / b`` (:meth:`report_mean_line`) has ``E[z_i] = v_i``; the estimate
        is the mean of ``z`` and the variance ``s_z^2 / n`` (the sample variance of ``z``,
        conservative for a fixed population: it includes the spread of the values).
        """
        y = self.check_reports(reports)
        a, b = self.report_mean_line()
        z = (y - a) / b
        var = float(z.var(ddof=1)) / z.size if z.size > 1 else float("inf")
        return float(z.mean()), var

    # ------------------------------------------------------------------ audit
    def audit_event(self, reports: Any, x0: int, x1: int) -> np.ndarray:
        """Reports where ``f(y | c0) / f(y | c1)`` is largest, ``c0, c1`` the bins' centres."""
        c0, c1 = self.bin_centres[[x0, x1]]
        _, grid = self._grids()
        best = np.max(self.log_density(grid, c0) - self.log_density(grid, c1))
        y = np.asarray(reports, dtype=float)
        return self.log_density(y, c0) - self.log_density(y, c1) >= best - 1e-9


class WindowMechanism(NumericalMechanism):
    """A numerical mechanism whose density is ``p`` on a sliding window and ``q`` elsewhere.

    ``f(y | v) = p`` for ``l(v) <= y <= l(v) + w`` and ``q`` elsewhere on the bounded output
    range ``[y_lo, y_hi]``, with ``l(v) = alpha + slope * v`` (the square wave and the
    piecewise mechanism).  Its epsilon is ``log(p / q)`` wherever the windows of ``lo`` and
    ``hi`` are disjoint somewhere, which both mechanisms guarantee.  Subclasses set
    ``_alpha, _slope, _w, _log_p, _log_q, _ylo, _yhi`` in :meth:`_setup`.
    """

    _alpha: float
    _slope: float
    _w: float
    _log_p: float
    _log_q: float
    _ylo: float
    _yhi: float

    def _default_output_bins(self) -> int:
        return self.k  # the choice of Ye et al.'s code: as many output bins as input bins

    @property
    def p(self) -> float:
        """Density inside the window (in report units)."""
        return float(np.exp(self._log_p))

    @property
    def q(self) -> float:
        """Density outside the window (in report units)."""
        return float(np.exp(self._log_q))

    @property
    def output_edges(self) -> np.ndarray:
        """``output_bins + 1`` equal edges from ``y_lo`` to ``y_hi``."""
        return equal_bins(self._ylo, self._yhi, self.output_bins)

    def window(self, v: Any) -> tuple[np.ndarray, np.ndarray]:
        """The window ``[l(v), l(v) + w]`` of the values ``v``."""
        left = self._alpha + self._slope * np.asarray(v, dtype=float)
        return left, left + self._w

    def log_density(self, y: Any, v: Any) -> np.ndarray:
        y = np.asarray(y, dtype=float)
        left, right = self.window(v)
        inside = (y >= left) & (y <= right)
        out = np.where(inside, self._log_p, self._log_q)
        return np.where((y >= self._ylo) & (y <= self._yhi), out, -np.inf)

    def density(self, y: Any, v: Any) -> np.ndarray:
        """``p`` inside the window of ``v``, ``q`` elsewhere on the output range, else 0."""
        return np.exp(self.log_density(y, v))

    def report_mean_line(self) -> tuple[float, float]:
        """``E[y | v] = q (y_hi^2 - y_lo^2) / 2 + (p - q) w (l(v) + w / 2)``: affine in ``v``."""
        p, q, w = self.p, self.q, self._w
        a = 0.5 * q * (self._yhi - self._ylo) * (self._yhi + self._ylo)
        a += (p - q) * w * (self._alpha + 0.5 * w)
        return a, (p - q) * w * self._slope

    def _perturb_values(self, v: np.ndarray, gen: np.random.Generator) -> np.ndarray:
        """Inverse CDF of the three pieces ``q | p | q`` at one uniform draw per value."""
        p, q = self.p, self.q
        left, _ = self.window(v)
        u = gen.random(v.shape[0])
        below = q * (left - self._ylo)  # mass left of the window
        inside = p * self._w
        y = np.where(
            u < below,
            self._ylo + u / q,
            np.where(
                u < below + inside,
                left + (u - below) / p,
                left + self._w + (u - below - inside) / q,
            ),
        )
        return np.clip(y, self._ylo, self._yhi)  # float rounding at the ends only

    def _channel_matrix(self) -> np.ndarray:
        return window_channel(
            self.bin_edges,
            self.output_edges,
            alpha=self._alpha,
            slope=self._slope,
            width=self._w,
            p=self.p,
            q=self.q,
        )


class AdditiveNoiseMechanism(NumericalMechanism):
    """``y = v + noise`` with symmetric noise of scale :attr:`scale` and unbounded reports.

    Output bins: two half-lines ``(-inf, lo - pad)`` and ``[hi + pad, inf)`` around equal inner
    bins over ``[lo - pad, hi + pad]``; ``pad`` is :attr:`PAD_SCALES` noise scales.  By default
    the inner bins are as wide as the input bins but no narrower than ``scale / 16`` (binning
    finer than the noise adds cells, not information).
    """

    MIN_OUTPUT_BINS = 3  # two tails and an inner bin
    #: padding of the inner output range, in noise scales
    PAD_SCALES: float = 6.0

    scale: float

    @property
    def pad(self) -> float:
        """How far the inner output bins reach beyond ``[lo, hi]``."""
        return self.PAD_SCALES * self.scale

    def _default_output_bins(self) -> int:
        step = max(self.width / self.k, self.scale / 16.0)
        return 2 + max(1, math.ceil((self.width + 2.0 * self.pad) / step - 1e-9))

    @property
    def output_edges(self) -> np.ndarray:
        """``-inf``, ``output_bins - 1`` equal edges over ``[lo - pad, hi + pad]``, ``inf``."""
        inner = (
            self.lo
            - self.pad
            + (self.width + 2.0 * self.pad)
            * (np.arange(self.output_bins - 1) / (self.output_bins - 2))
        )
        return np.concatenate([[-np.inf], inner, [np.inf]])

    def _tail(self, x: np.ndarray) -> np.ndarray:
        """``G1(-x)`` for ``x >= 0``: the antiderivative of the noise CDF (see discretise)."""
        raise NotImplementedError

    def _channel_matrix(self) -> np.ndarray:
        return location_channel(self.bin_edges, self.output_edges, self._tail)

    def density(self, y: Any, v: Any) -> np.ndarray:
        return np.exp(self.log_density(y, v))
