"""The exact posterior's expansion: ``prod_u (a_u + r_u . theta)^{c_u}`` as a sparse polynomial.

:class:`_Plan` splits the tally's rows as ``a_u + r_u . theta``, bounds the number of
components (:func:`_lattice_count`) and orders the rows; :meth:`_Plan.expand` forms the product
(exponent vectors packed into int64 words by :class:`_Packer`, products merged by
:func:`_multiply`), in log space.  The mathematics, strategies and limits are in
:mod:`bayesldp.bayes.exact`'s docstring; :func:`bayesldp.bayes.exact.exact_posterior` chooses the
plan and turns the expansion into the Dirichlet mixture.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.special import gammaln

from bayesldp.tally import Tally

_PAIR_CHUNK = 2_000_000
_ZERO_TOL = 8 * np.finfo(float).eps
_WORD_LIMIT = 2**62


@dataclass
class _Plan:
    """Rows split as ``a_u + r_u . theta`` and the bound on the number of components."""

    strategy: str
    k: int
    const: np.ndarray  # a_u, shape (U',)
    resid: np.ndarray  # r_u, shape (U', K)
    counts: np.ndarray  # c_u
    caps: np.ndarray  # largest exponent of each category
    total: int  # largest (residual) or exact (latent) total degree
    bound: int
    bound_text: str
    log_const: float  # log of what the rescaling and the dropped constant rows took out
    steps: list[tuple[int, str]] = field(default_factory=list)
    cost: int = 0

    @classmethod
    def build(cls, tally: Tally, strategy: str, max_components: int) -> _Plan:
        rows = tally.rows
        counts = tally.counts
        scale = rows.max(axis=1)
        rows = rows / scale[:, None]
        lo = rows.min(axis=1)
        constant = rows.max(axis=1) - lo <= _ZERO_TOL
        log_const = float(counts @ np.log(scale))
        # constant rows (uninformative) contribute lo^c; after rescaling lo == 1 for them
        keep = ~constant
        rows, counts = rows[keep], counts[keep]
        if strategy == "residual":
            const = rows.min(axis=1)
            resid = rows - const[:, None]
            resid[resid <= _ZERO_TOL] = 0.0
        else:
            const = np.zeros(rows.shape[0])
            resid = rows.copy()
        on = resid > 0
        caps = (counts[:, None] * on).sum(axis=0)
        total = int(counts.sum())
        caps = np.minimum(caps, total)
        bound = _lattice_count(caps, total, exact_total=strategy == "latent")
        sat = _saturation(total)
        text = f"more than {sat:.3g}" if bound >= sat else str(bound)
        plan = cls(strategy, tally.k, const, resid, counts, caps, total, bound, text, log_const)
        if bound <= max_components:
            plan.steps, plan.cost = plan.schedule()
        else:
            plan.cost = math.inf
        return plan

    def schedule(self) -> tuple[list[tuple[int, str]], int]:
        """Order of the rows, how each is multiplied in, and the estimated term products.

        A row enters either as its whole expanded power (cost ``M_before * F``, ``F`` the number
        of terms of ``(a + r.theta)^c``) or as ``c`` multiplications by the linear form
        ``a + r.theta`` (cost about ``c * (|supp r| + 1) * M_after``), whichever the component
        bounds of the partial products say is cheaper.  Rows with the same residual support come
        together (their monomials merge), cheapest first.
        """
        on = self.resid > 0
        keys = [tuple(np.flatnonzero(row).tolist()) for row in on]
        order = sorted(range(len(keys)), key=lambda i: (len(keys[i]), keys[i], self.counts[i]))
        caps = np.zeros(self.k, dtype=np.int64)
        total, before, cost = 0, 1, 0
        steps: list[tuple[int, str]] = []
        for u in order:
            c, s = int(self.counts[u]), len(keys[u])
            caps = np.minimum(caps + c * on[u], self.total)
            total += c
            after = _lattice_count(caps, total, exact_total=self.strategy == "latent")
            terms = math.comb(c + s - 1, s - 1) if self.const[u] == 0 else math.comb(c + s, s)
            whole, linear = before * terms, c * (s + 1) * after
            steps.append((u, "whole" if whole <= linear else "linear"))
            cost += min(whole, linear)
            before = after
        return steps, cost

    @property
    def n_products(self) -> int:
        """Products :meth:`expand` forms: one per whole factor, ``c_u`` per linear one."""
        return sum(1 if how == "whole" else int(self.counts[u]) for u, how in self.steps)

    def expand(self, bar: Any = None) -> tuple[np.ndarray, np.ndarray]:
        """Exponent vectors (M, K) and log coefficients (M,) of ``prod_u (a_u + r_u.theta)^c_u``.

        ``bar`` (a tqdm bar or None) advances by one per product formed.
        """
        packer = _Packer(self.caps)
        codes = packer.zero()
        log_coef = np.zeros(1)
        for u, how in self.steps:
            if how == "whole":
                f_codes, f_log = self._factor(u, packer)
                codes, log_coef = _multiply(codes, log_coef, f_codes, f_log)
                if bar is not None:
                    bar.update(1)
            else:
                codes, log_coef = self._linear_steps(u, packer, codes, log_coef, bar)
        return packer.unpack(codes), log_coef

    def _linear_steps(
        self, u: int, packer: _Packer, codes: np.ndarray, log_coef: np.ndarray, bar: Any = None
    ) -> tuple[np.ndarray, np.ndarray]:
        a, r = float(self.const[u]), self.resid[u]
        idx = np.flatnonzero(r > 0)
        units = np.zeros((idx.size, self.k), dtype=np.int64)
        units[np.arange(idx.size), idx] = 1
        f_codes = packer.pack(units)
        f_log = np.log(r[idx])
        if a > 0:
            f_codes = np.vstack([packer.zero(), f_codes])
            f_log = np.append(math.log(a), f_log)
        for _ in range(int(self.counts[u])):
            codes, log_coef = _multiply(codes, log_coef, f_codes, f_log)
            if bar is not None:
                bar.update(1)
        return codes, log_coef

    def _factor(self, u: int, packer: _Packer) -> tuple[np.ndarray, np.ndarray]:
        a, r, c = float(self.const[u]), self.resid[u], int(self.counts[u])
        idx = np.flatnonzero(r > 0)
        comps = _compositions(c, idx.size, exact=a == 0.0)
        j = comps.sum(axis=1)
        log_c = (
            gammaln(c + 1.0)
            - gammaln(c - j + 1.0)
            - gammaln(comps + 1.0).sum(axis=1)
            + comps @ np.log(r[idx])
        )
        if a > 0:
            log_c = log_c + (c - j) * math.log(a)
        full = np.zeros((comps.shape[0], self.k), dtype=np.int64)
        full[:, idx] = comps
        return packer.pack(full), log_c


def _compositions(c: int, s: int, *, exact: bool) -> np.ndarray:
    """All vectors of ``s`` non-negative ints with sum ``<= c`` (``== c`` if exact), (F, s)."""
    comps = np.zeros((1, 0), dtype=np.int64)
    sums = np.zeros(1, dtype=np.int64)
    for part in range(s):
        if exact and part == s - 1:
            comps = np.hstack([comps, (c - sums)[:, None]])
            sums = np.full_like(sums, c)
            break
        reps = c - sums + 1
        parent = np.repeat(np.arange(comps.shape[0]), reps)
        values = np.arange(int(reps.sum())) - np.repeat(np.cumsum(reps) - reps, reps)
        comps = np.hstack([comps[parent], values[:, None]])
        sums = sums[parent] + values
    if exact and s == 0 and c != 0:
        return np.zeros((0, 0), dtype=np.int64)
    return comps


class _Packer:
    """Exponent vectors packed as mixed-radix int64 words (addition of codes = of vectors).

    Categories are grouped into words whose radix product stays below 2^62; caps guarantee no
    digit ever overflows, so sums of codes never carry between digits.
    """

    def __init__(self, caps: np.ndarray) -> None:
        self.k = caps.shape[0]
        self.word = np.zeros(self.k, dtype=np.int64)
        self.stride = np.zeros(self.k, dtype=np.int64)
        self.radix = caps.astype(np.int64) + 1
        word, stride = 0, 1
        for x in range(self.k):
            if self.radix[x] == 1:
                continue
            if stride * int(self.radix[x]) >= _WORD_LIMIT:
                word, stride = word + 1, 1
            self.word[x], self.stride[x] = word, stride
            stride *= int(self.radix[x])
        self.n_words = word + 1

    def zero(self) -> np.ndarray:
        return np.zeros((1, self.n_words), dtype=np.int64)

    def pack(self, exps: np.ndarray) -> np.ndarray:
        out = np.zeros((exps.shape[0], self.n_words), dtype=np.int64)
        for w in range(self.n_words):
            cols = np.flatnonzero((self.word == w) & (self.radix > 1))
            out[:, w] = exps[:, cols] @ self.stride[cols]
        return out

    def unpack(self, codes: np.ndarray) -> np.ndarray:
        exps = np.zeros((codes.shape[0], self.k), dtype=np.int64)
        for x in np.flatnonzero(self.radix > 1):
            exps[:, x] = (codes[:, self.word[x]] // self.stride[x]) % self.radix[x]
        return exps


def _multiply(
    codes1: np.ndarray, log1: np.ndarray, codes2: np.ndarray, log2: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Product of two sparse log-polynomials, merged; chunked to bound memory."""
    if codes1.shape[0] < codes2.shape[0]:
        codes1, log1, codes2, log2 = codes2, log2, codes1, log1
    m1, m2 = codes1.shape[0], codes2.shape[0]
    step = max(1, _PAIR_CHUNK // m2)
    n_words = codes1.shape[1]
    acc_codes: list[np.ndarray] = []
    acc_logs: list[np.ndarray] = []
    pending = 0
    for start in range(0, m1, step):
        c = (codes1[start : start + step, None, :] + codes2[None, :, :]).reshape(-1, n_words)
        lg = (log1[start : start + step, None] + log2[None, :]).reshape(-1)
        c, lg = _merge(c, lg)
        acc_codes.append(c)
        acc_logs.append(lg)
        pending += c.shape[0]
        if pending > 4 * _PAIR_CHUNK and len(acc_codes) > 1:
            merged = _merge(np.concatenate(acc_codes), np.concatenate(acc_logs))
            acc_codes, acc_logs = [merged[0]], [merged[1]]
            pending = merged[0].shape[0]
    if len(acc_codes) == 1:
        return acc_codes[0], acc_logs[0]
    return _merge(np.concatenate(acc_codes), np.concatenate(acc_logs))


def _merge(codes: np.ndarray, logs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Group equal codes and log-sum-exp their log coefficients (deterministic order)."""
    if codes.shape[1] == 1:
        order = np.argsort(codes[:, 0], kind="stable")
    else:
        order = np.lexsort(codes.T[::-1])
    codes, logs = codes[order], logs[order]
    new = np.ones(codes.shape[0], dtype=bool)
    new[1:] = np.any(codes[1:] != codes[:-1], axis=1)
    start = np.flatnonzero(new)
    if start.size == codes.shape[0]:
        return codes, logs
    peak = np.maximum.reduceat(logs, start)
    sizes = np.diff(np.append(start, codes.shape[0]))
    total = np.add.reduceat(np.exp(logs - np.repeat(peak, sizes)), start)
    return codes[start], peak + np.log(total)


def _saturation(total: int) -> int:
    return _WORD_LIMIT // (total + 2)


def _lattice_count(caps: np.ndarray, total: int, *, exact_total: bool) -> int:
    """Number of integer vectors ``0 <= m_x <= caps_x`` with ``sum m <= total`` (``== total``).

    Dynamic programming over categories with int64 counts saturated at ``2^62 / (total + 2)``
    (the result is ``min(count, saturation)``, exact below the saturation).
    """
    sat = _saturation(total)
    ways = np.zeros(total + 1, dtype=np.int64)
    ways[0] = 1
    t = np.arange(total + 1)
    for d in caps[caps > 0]:
        cs = np.zeros(total + 2, dtype=np.int64)
        np.cumsum(ways, out=cs[1:])
        ways = np.minimum(cs[t + 1] - cs[np.maximum(t - int(d), 0)], sat)
    if exact_total:
        return int(ways[total])
    return int(min(int(ways.sum()), sat))
