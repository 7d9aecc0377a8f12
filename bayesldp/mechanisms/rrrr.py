"""Randomly restricted randomised response (RRRR), the mechanism of AdOBEst-LDP.

Aydın and Yıldırım, "Bayesian Frequency Estimation Under Local Differential Privacy With an
Adaptive Randomized Response Mechanism", ACM TKDD 2025 (Algorithm 1 and the LDP proposition).
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np

from bayesldp._docs import categorical_parameters, fill_doc
from bayesldp._validation import RNGLike, as_generator, check_epsilon, check_memory, check_values
from bayesldp.errors import InvalidInputError, InvalidTypeError, NotSupportedError
from bayesldp.mechanisms.base import FiniteChannelMechanism, Parameter
from bayesldp.tally import Tally

#: Channels whose condition number exceeds this are treated as singular by the oracle.
SINGULAR_CONDITION = 1e12


def rrrr_eps2(epsilon: float, eps1: float, subset_size: int, k: int) -> float:
    """The second privacy parameter of RRRR (Aydın and Yıldırım 2025, the LDP proposition).

    With ``m = |S^c| = k - |S|`` and ``d = epsilon - eps1``,

    .. math::

        \\varepsilon_2 = \\min\\Big\\{\\varepsilon,
            \\ln\\frac{m - 1}{e^{\\varepsilon_1 - \\varepsilon} m - 1}\\Big\\}
        \\text{ if } d < \\ln m \\text{ and } |S| > 0, \\quad
        \\varepsilon_2 = \\varepsilon \\text{ otherwise.}

    Computed as ``-log1p(m expm1(-d) / (m - 1))`` so that ``eps1 = epsilon`` gives exactly 0 (the
    responses outside ``S`` become uniform) and nothing overflows.  ``m = 1`` falls in the
    "otherwise" branch (``d < ln 1 = 0`` is impossible), so no division by ``m - 1 = 0`` occurs.
    """
    m = k - subset_size
    d = epsilon - eps1
    if subset_size == 0 or m < 2 or not d < math.log(m):
        return float(epsilon)
    value = -math.log1p(m * math.expm1(-d) / (m - 1))
    return float(min(epsilon, max(value, 0.0)))


def rrrr_channel(k: int, subset: Any, eps1: float, eps2: float) -> np.ndarray:
    """The K x K channel ``P[x, y]`` of RRRR for given ``S``, ``eps1``, ``eps2``.

    With ``a = e^eps1``, ``b = e^eps2``, ``s = |S|`` and ``m = |S^c|`` (Aydın and Yıldırım 2025,
    table of the transition matrix; rows are inputs ``x``):

    ==========================  =========================  ==========================
    report                      ``y = x``                  ``y != x``
    ==========================  =========================  ==========================
    ``y in S``                  ``a / (a + s)``            ``1 / (a + s)``
    ``y not in S, x in S``      --                         ``1 / ((a + s) m)``
    ``y not in S, x not in S``  ``a/(a+s) * b/(b+m-1)``    ``a/(a+s) / (b+m-1)``
    ==========================  =========================  ==========================

    Evaluated in the overflow-free forms ``a/(a+s) = 1/(1 + s e^-eps1)`` etc.  This helper takes
    ``eps2`` as given (no check that the result is eps-LDP); :class:`RRRR` derives it.
    """
    check_memory(16.0 * k * k, f"the RRRR channel with K = {k}",
                 "RRRR's exact channel is K x K: use fewer categories")  # fmt: skip
    in_s = np.zeros(k, dtype=bool)
    in_s[np.asarray(subset, dtype=np.int64)] = True
    s = int(in_s.sum())
    m = k - s
    ea1 = math.exp(-eps1)
    keep_1 = 1.0 / (1.0 + s * ea1)  # a / (a + s)
    other_1 = ea1 / (1.0 + s * ea1)  # 1 / (a + s)
    ea2 = math.exp(-eps2)
    keep_2 = 1.0 / (1.0 + (m - 1) * ea2)  # b / (b + m - 1)
    other_2 = ea2 / (1.0 + (m - 1) * ea2)  # 1 / (b + m - 1)
    channel = np.empty((k, k))
    rows_s, rows_c = np.flatnonzero(in_s), np.flatnonzero(~in_s)
    # x in S: SRR(x; S u {R}, eps1) with R uniform on S^c
    channel[np.ix_(rows_s, rows_s)] = other_1
    channel[rows_s, rows_s] = keep_1
    channel[np.ix_(rows_s, rows_c)] = other_1 / m
    # x not in S: R = SRR(x; S^c, eps2), then SRR(R; S u {R}, eps1)
    channel[np.ix_(rows_c, rows_s)] = other_1
    channel[np.ix_(rows_c, rows_c)] = keep_1 * other_2
    channel[rows_c, rows_c] = keep_1 * keep_2
    return channel


def _check_subset(subset: Any, k: int) -> tuple[int, ...]:
    if isinstance(subset, str | bytes) or subset is None:
        raise InvalidTypeError(
            f"subset: expected a sequence of distinct categories in 0..{k - 1}, got {subset!r}"
        )
    if isinstance(subset, np.ndarray):
        if subset.ndim != 1:
            raise InvalidInputError(f"subset: expected a 1-d sequence, got shape {subset.shape}")
        if subset.size and (subset.dtype.kind == "b" or subset.dtype.kind not in "iu"):
            raise InvalidTypeError(
                f"subset: expected integer categories in 0..{k - 1}, got dtype {subset.dtype}"
            )
        items = subset.tolist()
    else:
        try:
            items = list(subset)
        except TypeError:
            raise InvalidTypeError(
                f"subset: expected a sequence of distinct categories in 0..{k - 1}, "
                f"got {type(subset).__name__}"
            ) from None
    for item in items:
        if isinstance(item, bool | np.bool_) or not isinstance(item, numbers.Integral):
            raise InvalidTypeError(
                f"subset: categories must be integers in 0..{k - 1}, got {item!r}"
            )
    values = [int(v) for v in items]
    bad = [v for v in values if not 0 <= v < k]
    if bad:
        raise InvalidInputError(f"subset: categories must lie in 0..{k - 1}, got {bad[0]}")
    if len(set(values)) != len(values):
        repeated = sorted({v for v in values if values.count(v) > 1})
        raise InvalidInputError(f"subset: categories must be distinct, {repeated} repeated")
    if len(values) >= k:
        raise InvalidInputError(
            f"subset: |S| must be at most k - 1 = {k - 1} (S^c must be non-empty), "
            f"got all {k} categories"
        )
    return tuple(sorted(values))


@fill_doc(parameters=categorical_parameters())
class RRRR(FiniteChannelMechanism):
    """Randomly restricted randomised response ``RRRR(X; S, eps1, eps2)``.

    Aydın and Yıldırım 2025, Algorithm 1.

    ``S`` is a subset of the domain (in AdOBEst-LDP the most probable categories under a posterior
    draw), ``m = |S^c|``.  With ``SRR(X; Omega, e)`` the randomised response on ``Omega`` (keep
    ``X`` w.p. ``e^e / (e^e + |Omega| - 1)``, else a uniform element of ``Omega \\ {X}``):

    * if ``X in S``: draw ``R ~ Uniform(S^c)`` and report ``SRR(X; S u {R}, eps1)``;
    * else: ``R = SRR(X; S^c, eps2)`` and report ``SRR(R; S u {R}, eps1)``.

    ``eps2`` follows the paper's formula (see :func:`rrrr_eps2`), never the public MATLAB code's
    (which omits the log and indexes by ``|S|``; with K = 20 and ``eps1 = 0.8 eps`` its RRRR
    realises 0.87 / 1.71 / 6.83 when asked for 0.5 / 1 / 5).  The channel (``a = e^eps1``,
    ``b = e^eps2``, ``s = |S|``; rows are inputs) is given in :func:`rrrr_channel`.

    Privacy.  :meth:`realised_epsilon` is computed from the channel,
    ``max_y log(max_x P[x, y] / min_x P[x, y])``, not taken from the formula.  The column of
    ``y in S`` has ratio ``a``; the column of ``y not in S`` has ratios ``b`` (against other inputs
    outside ``S``) and ``a b m / (b + m - 1)`` (against inputs in ``S``); ``eps2`` is the largest
    value (capped at ``eps``) that keeps the latter at most ``e^eps``.  Hence the realised epsilon
    equals ``eps`` exactly except when ``|S| = k - 1`` (then ``m = 1``, RRRR is GRR(k, eps1) and
    realises ``eps1``, which is below ``eps`` when ``eps1 < eps``).  ``|S| = 0`` gives GRR(k, eps).

    Tallies.  Reports are ints ``0..k-1`` and a tally's dense rows are the exact channel columns
    ``P[:, y]``, so tallies of RRRR with the same ``(k, epsilon)`` but different subsets or
    ``eps1`` merge (an adaptive survey has one row per distinct ``(S, y)``); the merged tally's
    ``mechanism`` is None and only likelihood-based estimators (MLE, EM, ``bayesldp.fit``) read
    it.  Its ``stat`` (summed report counts) has no oracle meaning across subsets.

    Oracle.  The channel-inverse oracle of :class:`FiniteChannelMechanism`.  When the channel is
    singular (``eps1 = eps`` with ``m >= 2`` makes ``eps2 = 0`` and the rows of ``S^c``
    identical) it raises :class:`~bayesldp.NotSupportedError`.

    {parameters}
    subset : sequence of int
        The set ``S``: distinct categories in ``0..k-1``, ``0 <= |S| <= k - 1``.
    eps1 : float, optional
        Budget of the second stage, ``0 < eps1 <= epsilon``; defaults to ``0.8 * epsilon``
        (the paper's setting).

    Examples
    --------
    >>> import bayesldp
    >>> mech = bayesldp.RRRR(10, 1.0, subset=[0, 3])
    >>> mech.subset, round(mech.eps2, 4)
    ((0, 3), 0.2321)
    >>> abs(mech.realised_epsilon() - 1.0) < 1e-12
    True
    """

    name = "RRRR"
    PARAMETERS = (
        Parameter("subset", int, "the subset S of categories", required=True, many=True),
        Parameter("eps1", float, "first-stage budget (default 0.8 epsilon)"),
    )
    RECOMMEND = False  # an adaptive survey's channel, chosen per user (bayesldp.adaptive)

    def __init__(self, k: int, epsilon: float, subset: Any, eps1: float | None = None) -> None:
        super().__init__(k, epsilon)
        self.subset: tuple[int, ...] = _check_subset(subset, self.k)
        if eps1 is None:
            eps1_value = 0.8 * self.epsilon
        else:
            eps1_value = check_epsilon(eps1, "eps1")
            if eps1_value > self.epsilon:
                raise InvalidInputError(
                    f"eps1: must satisfy 0 < eps1 <= epsilon = {self.epsilon}, got {eps1_value}"
                )
        self.eps1: float = eps1_value
        self.eps2: float = rrrr_eps2(self.epsilon, self.eps1, len(self.subset), self.k)
        in_s = np.zeros(self.k, dtype=bool)
        in_s[list(self.subset)] = True
        self._in_s = in_s
        self._s_arr = np.flatnonzero(in_s)
        self._c_arr = np.flatnonzero(~in_s)
        position = np.zeros(self.k, dtype=np.int64)
        position[self._s_arr] = np.arange(self._s_arr.size)
        position[self._c_arr] = np.arange(self._c_arr.size)
        self._position = position  # index of x within S (x in S) or within S^c (x not in S)
        channel = rrrr_channel(self.k, self.subset, self.eps1, self.eps2)
        channel.setflags(write=False)
        self._channel = channel

    # ------------------------------------------------------------------ identity
    def params(self) -> dict[str, Any]:
        return {
            "k": self.k,
            "epsilon": self.epsilon,
            "subset": list(self.subset),
            "eps1": self.eps1,
        }

    @property
    def family(self) -> str:
        """RRRR tallies merge across subsets and ``eps1`` for one ``(k, epsilon)``."""
        return str(("RRRR", ("epsilon", self.epsilon), ("k", self.k)))

    @property
    def complement(self) -> tuple[int, ...]:
        """``S^c``, sorted."""
        return tuple(self._c_arr.tolist())

    @property
    def channel(self) -> np.ndarray:
        """The K x K channel (read-only); see :func:`rrrr_channel`."""
        return self._channel

    # ------------------------------------------------------------------ client
    def perturb(self, x: Any, rng: RNGLike = None) -> np.ndarray:
        """Run Algorithm 1 for every user (vectorised over users).

        Uniform draws from a set minus one element draw an index among ``|set| - 1`` and skip
        the excluded position.
        """
        x = check_values(x, self.k)
        gen = as_generator(rng)
        s, m = self._s_arr.size, self._c_arr.size
        keep_1 = 1.0 / (1.0 + s * math.exp(-self.eps1))
        keep_2 = 1.0 / (1.0 + (m - 1) * math.exp(-self.eps2))
        y = np.empty_like(x)
        in_s = self._in_s[x]

        # X in S: R ~ Uniform(S^c); report SRR(X; S u {R}, eps1).
        xa = x[in_s]
        if xa.size:
            r = self._c_arr[gen.integers(0, m, xa.size)]
            keep = gen.random(xa.size) < keep_1
            # Omega = [S..., R] minus X: an index among s positions, skipping X's own position.
            j = gen.integers(0, s, xa.size)
            j += j >= self._position[xa]
            other = np.where(j < s, self._s_arr[np.minimum(j, s - 1)], r)
            y[in_s] = np.where(keep, xa, other)

        # X not in S: R = SRR(X; S^c, eps2); report SRR(R; S u {R}, eps1).
        xb = x[~in_s]
        if xb.size:
            if m >= 2:
                keep = gen.random(xb.size) < keep_2
                j = gen.integers(0, m - 1, xb.size)
                j += j >= self._position[xb]
                r = np.where(keep, xb, self._c_arr[j])
            else:
                r = xb
            if s >= 1:
                keep = gen.random(xb.size) < keep_1
                r = np.where(keep, r, self._s_arr[gen.integers(0, s, xb.size)])
            y[~in_s] = r
        return y

    # ------------------------------------------------------------------ oracle
    def _check_invertible(self) -> None:
        sv = np.linalg.svd(self._channel, compute_uv=False)
        if not sv[-1] > sv[0] / SINGULAR_CONDITION:
            cond = "inf" if sv[-1] == 0 else f"{sv[0] / sv[-1]:.3g}"
            raise NotSupportedError(
                f"{self!r}: the channel is singular (condition number {cond}, eps2 = "
                f"{self.eps2:.6g}; with eps2 = 0 the rows of S^c are identical), so the "
                "channel-inverse oracle is undefined; use a likelihood-based estimator "
                "(MLE / EM) or bayesldp.fit instead"
            )

    def unbiased_frequencies(self, tally: Tally) -> np.ndarray:
        """Channel-inverse estimate ``P^{-T} phi`` (raises NotSupportedError if singular)."""
        self.check_tally(tally)
        self._check_invertible()
        return super().unbiased_frequencies(tally)

    def oracle_variance(self, theta: Any, n: int) -> np.ndarray:
        """Exact variance of the channel-inverse estimate (fixed population, frequencies theta)."""
        self._check_invertible()
        return super().oracle_variance(theta, n)
