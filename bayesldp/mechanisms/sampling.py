"""Node sampling in front of a pure LDP protocol.

Biswas, Cormode and Maple, "Impact of Sampling on Locally Differentially Private Data
Collection", arXiv 2022.  Each of ``n`` nodes reports, through a pure protocol with ``p*``,
``q*`` (GRR in the paper, where ``p* = p`` and ``q* = q``), only with probability ``pi`` (or its
own ``pi_j``).  Let ``H(x) = sum_{sampled j} 1[x in Support(y_j)]`` be the support count of the
``S`` sampled reports and ``Pi = sum_j pi_j`` (``= n pi`` for a common ``pi``).  The paper's
count estimators are

* ``c(x) = (H(x) - n q) / (p - q)``: Wang et al.'s estimator, unaware of sampling (eq. 3);
  biased, ``E c(x) = n f_x pi - n q (1 - pi) / (p - q)`` (eq. 4, Theorem 2.1);
* ``g(x) = c(x) / pi + n q (1 - pi) / ((p - q) pi)`` (eq. 5, Theorem 3.1), unbiased;
* ``c_hat(x) = (H(x) - S q) / (pi (p - q))`` (Theorem 3.4), unbiased;
* ``T(x) = n h(x) / Pi + n q (n - Pi) / (Pi (p - q))`` with ``h = c`` (Theorem 5.1), for
  per-node ``pi_j``; equal to ``g`` when every ``pi_j = pi``.

Exact variances for a fixed population (node ``j`` holds ``x_j``; sampling ``Z_j ~ Bern(pi_j)``
and the reports are independent; ``r_j = p`` if ``x_j = x`` else ``q``)::

    Var H(x)       = sum_j pi_j r_j (1 - pi_j r_j)
    Var c(x)       = Var H / (p - q)^2
    Var g(x)       = Var H / (pi (p - q))^2
    Var T(x)       = n^2 Var H / (Pi (p - q))^2
    Var c_hat(x)   = sum_j [pi_j (r_j (1 - 2q) + q^2) - pi_j^2 (r_j - q)^2] / (pi (p - q))^2

At ``f_x -> 0`` (every ``r_j = q``) these reduce to the paper's ``Var*``:
``Var* c = n pi (q - q^2 pi) / (p - q)^2``, ``Var* g = n (q - q^2 pi) / ((p - q)^2 pi)``
(Theorem 3.2), ``Var* T = n^2 sum_j q pi_j (1 - q pi_j) / (Pi^2 (p - q)^2)`` (Theorem 5.1), and
``Var* c_hat = n q (1 - q) / (pi (p - q)^2)`` (derived here).

Two corrections to the paper.  (1) Its Theorem 3.5 claims ``Var c_hat >= Var g`` from
``Var(H - S q) = Var H + q^2 Var S``, which drops the covariance ``-2 q Cov(H, S)``; in fact
``Var c_hat - Var g = -(1 - pi) q [n_x (2p - q) + (n - n_x) q] / (pi (p - q)^2) < 0`` for
``pi < 1``: the plug-in ``c_hat`` is the *more* precise of the two (``S q`` acts as a control
variate).  (2) Its "actual variance" of ``c`` mixes the fixed-population and the i.i.d. models;
its ``Var*`` limits are right and are what we state.  ``T`` is unbiased when ``pi_j`` is
unrelated to ``x_j`` (the paper's i.i.d. model, or a fixed population with
``sum_{j: x_j = x} pi_j = f_x Pi``); in general ``E T(x) = n sum_{j: x_j = x} pi_j / Pi``
(see :meth:`NodeSampling.expected_counts`).
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Any

import numpy as np

from bayesldp._validation import (
    RNGLike,
    as_generator,
    check_instance,
    check_probability,
    check_values,
)
from bayesldp.errors import InvalidInputError, InvalidTypeError, NotSupportedError
from bayesldp.mechanisms.base import Mechanism, PureProtocol
from bayesldp.tally import Tally

ESTIMATORS = ("c", "g", "c_hat", "T")


@dataclass(frozen=True, eq=False)
class SampledReports:
    """What the server receives in one round of node sampling.

    Attributes
    ----------
    reports : object or None
        The base mechanism's reports of the sampled nodes (in node order); None when no node
        was sampled.
    nodes : ndarray of int
        Indices (``0..n-1``, ascending) of the nodes that reported.
    n : int
        Number of nodes.
    pi : float or None
        The common sampling probability, or None when every node had its own ``pi_j``.
    pi_sum : float
        ``sum_j pi_j = E[S]`` (``n * pi`` for a common ``pi``).

    Examples
    --------
    What :meth:`NodeSampling.perturb <bayesldp.NodeSampling.perturb>` returns:

    >>> import numpy as np
    >>> import bayesldp
    >>> sampler = bayesldp.NodeSampling(bayesldp.GRR(5, 1.0), pi=0.5)
    >>> sampled = sampler.perturb(np.arange(20) % 5, rng=0)
    >>> type(sampled).__name__, sampled.n, sampled.n_sampled, sampled.pi
    ('SampledReports', 20, 8, 0.5)
    """

    reports: Any
    nodes: np.ndarray
    n: int
    pi: float | None
    pi_sum: float

    @property
    def n_sampled(self) -> int:
        """``S``, the number of nodes that reported."""
        return int(self.nodes.shape[0])


def _check_pi(pi: Any, n: int | None = None) -> float | np.ndarray:
    """A probability in (0, 1] or a 1-d array of them (one per node; length ``n`` if given)."""
    if isinstance(pi, numbers.Real) and not isinstance(pi, bool):
        return check_probability(pi, "pi")
    if isinstance(pi, bool) or isinstance(pi, str | bytes) or pi is None:
        raise InvalidTypeError(f"pi: expected a probability in (0, 1] or an array, got {pi!r}")
    arr = np.asarray(pi)
    if arr.ndim == 0:
        return _check_pi(arr.item(), n)
    if arr.ndim != 1:
        raise InvalidInputError(f"pi: expected one probability per node (1-d), got {arr.shape}")
    if arr.dtype.kind == "b" or arr.dtype.kind not in "iuf":
        raise InvalidTypeError(f"pi: expected probabilities in (0, 1], got dtype {arr.dtype}")
    if arr.size == 0:
        raise InvalidInputError("pi: is empty; give one probability per node")
    arr = arr.astype(float)
    bad = ~(np.isfinite(arr) & (arr > 0) & (arr <= 1))
    if bad.any():
        j = int(np.flatnonzero(bad)[0])
        raise InvalidInputError(
            f"pi: sampling probabilities must lie in (0, 1], got {arr[j]} for node {j}"
        )
    if n is not None and arr.shape[0] != n:
        raise InvalidInputError(f"pi: expected one probability per node ({n}), got {arr.shape[0]}")
    arr.setflags(write=False)
    return arr


class NodeSampling:
    """Each node reports through a pure protocol only with probability ``pi`` (Biswas et al. 2022).

    See the module docstring for the estimators and their exact variances.

    Privacy: a node that is not sampled sends nothing, which has the same probability ``1 - pi``
    whatever its value, and a sampled node's report is the base mechanism's, so
    :meth:`realised_epsilon` is the base mechanism's.  No amplification by sampling is claimed
    (each node's report, when sent, is visible as such).

    Likelihood: the sampling indicators have a law free of ``theta`` and independent of the
    values, so sampling is ignorable; the likelihood of ``theta`` is that of the sampled
    reports alone and :meth:`tally` returns the base mechanism's tally of them, to be used
    with any estimator or posterior of the package.

    Parameters
    ----------
    mechanism : PureProtocol
        The base mechanism (GRR in the paper; any pure protocol with ``p*``, ``q*``).
    pi : float or array of float, optional
        The common sampling probability in (0, 1], or one probability per node.  May be left
        out here and given to each :meth:`perturb` call instead (a value given there wins).

    Examples
    --------
    >>> import numpy as np, bayesldp
    >>> sampler = bayesldp.NodeSampling(bayesldp.GRR(5, 1.0), pi=0.3)
    >>> sampled = sampler.perturb(np.arange(100_000) % 5, rng=0)
    >>> sampled.n, sampled.n_sampled
    (100000, 29926)
    >>> sampler.frequencies(sampled, "g").round(2).tolist()
    [0.18, 0.22, 0.19, 0.21, 0.2]
    """

    def __init__(self, mechanism: PureProtocol, pi: Any = None) -> None:
        if not isinstance(mechanism, PureProtocol):
            raise InvalidTypeError(
                "mechanism: node sampling needs a pure protocol with p*, q* (e.g. GRR), "
                f"got {type(mechanism).__name__}"
            )
        self.mechanism = mechanism
        self.pi: float | np.ndarray | None = None if pi is None else _check_pi(pi)

    # ------------------------------------------------------------------ identity
    @property
    def k(self) -> int:
        """Number of categories (the base mechanism's)."""
        return self.mechanism.k

    @property
    def epsilon(self) -> float:
        """Privacy budget (the base mechanism's)."""
        return self.mechanism.epsilon

    def params(self) -> dict[str, Any]:
        """The base mechanism and the sampling probabilities."""
        pi = self.pi.tolist() if isinstance(self.pi, np.ndarray) else self.pi
        return {"mechanism": repr(self.mechanism), "pi": pi}

    def __repr__(self) -> str:
        if isinstance(self.pi, np.ndarray):
            pi = f"<{self.pi.shape[0]} per-node probabilities>"
        else:
            pi = repr(self.pi)
        return f"NodeSampling({self.mechanism!r}, pi={pi})"

    def realised_epsilon(self) -> float:
        """The base mechanism's realised epsilon (sampling does not weaken LDP)."""
        return self.mechanism.realised_epsilon()

    # ------------------------------------------------------------------ client / aggregator
    def _resolve_pi(self, pi: Any, n: int) -> float | np.ndarray:
        if pi is None:
            pi = self.pi
        if pi is None:
            raise InvalidInputError(
                "pi: no sampling probability; give pi to NodeSampling(...) or to perturb(...)"
            )
        return _check_pi(pi, n)

    def perturb(self, x: Any, rng: RNGLike = None, *, pi: Any = None) -> SampledReports:
        """Sample each node w.p. ``pi_j`` and perturb the sampled nodes' values.

        Parameters
        ----------
        x : array of int
            Every node's true value (``n = len(x)``).
        rng : Generator, SeedSequence, int or None
            Randomness (sampling, then the base mechanism's perturbation).
        pi : float or array, optional
            Overrides the instance's ``pi`` for this call (one value, or ``len(x)`` values).
        """
        x = check_values(x, self.k)
        n = int(x.shape[0])
        pi_value = self._resolve_pi(pi, n)
        gen = as_generator(rng)
        nodes = np.flatnonzero(gen.random(n) < pi_value)
        reports = self.mechanism.perturb(x[nodes], gen) if nodes.size else None
        if isinstance(pi_value, np.ndarray):
            common, pi_sum = None, float(pi_value.sum())
        else:
            common, pi_sum = pi_value, n * pi_value
        return SampledReports(reports, nodes, n, common, pi_sum)

    @staticmethod
    def _check_sampled(sampled: Any) -> SampledReports:
        expected = "the SampledReports of NodeSampling.perturb"
        return check_instance(sampled, SampledReports, "sampled", expected)

    def tally(self, sampled: SampledReports) -> Tally:
        """The base mechanism's tally of the sampled reports (sampling is ignorable)."""
        sampled = self._check_sampled(sampled)
        if sampled.reports is None:
            raise InvalidInputError("sampled: no node was sampled (S = 0); nothing to tally")
        return self.mechanism.tally(sampled.reports)

    def round_tally(self, sampled: SampledReports, estimator: str = "g") -> Tally:
        """The tally of one round with its sampling design, for :func:`bayesldp.estimate`.

        Its rows are the base mechanism's (sampling is ignorable for the likelihood, so MLE, EM
        and posteriors read it as they read :meth:`tally`); its mechanism is a
        :class:`SampledRound`, whose unbiased oracle is the paper's ``estimator`` (``"g"``,
        ``"c_hat"`` or ``"T"``): ``estimate(tally, "oracle")`` gives it with its exact
        standard errors, and ``"norm_sub"`` and the other post-processings start from it.
        """
        base = self.tally(sampled)
        mech = SampledRound(self, sampled, estimator)
        if base.is_support_form:
            rows = {"support": base.support, "levels": base.levels}
        else:
            rows = {"rows": base.rows}
        return Tally(base.counts, **rows, stat=base.stat, mechanism=mech)

    def tally_of_round(self, tally: Tally, n: int, estimator: str = "g") -> Tally:
        """:meth:`round_tally` from the base mechanism's tally of a round's ``S`` sampled
        reports (read from a file, say) and the number of nodes ``n`` (each sampled with the
        common ``pi`` of this instance): the paper's oracle ``estimator`` without the reports.
        """
        self.mechanism.check_tally(tally)
        if isinstance(self.pi, np.ndarray) or self.pi is None:
            raise InvalidInputError("pi: tally_of_round needs one common sampling probability")
        if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < tally.n:
            raise InvalidInputError(
                f"n: expected the number of nodes, at least the {tally.n} sampled ones, got {n!r}"
            )
        sampled = SampledReports(None, np.zeros(0, dtype=np.int64), int(n), self.pi,
                                 int(n) * self.pi)  # fmt: skip
        mech = SampledRound(self, sampled, estimator)
        rows = {"support": tally.support, "levels": tally.levels} if tally.is_support_form else {
            "rows": tally.rows}  # fmt: skip
        return Tally(tally.counts, **rows, stat=tally.stat, mechanism=mech)

    def support_counts(self, sampled: SampledReports) -> np.ndarray:
        """``H(x) = sum_{sampled j} 1[x in Support(y_j)]`` (zeros when ``S = 0``)."""
        sampled = self._check_sampled(sampled)
        if sampled.reports is None:
            return np.zeros(self.k)
        return np.asarray(self.mechanism.tally(sampled.reports).stat, dtype=float)

    # ------------------------------------------------------------------ the paper's estimators
    @property
    def _pq(self) -> tuple[float, float]:
        return self.mechanism.p_star, self.mechanism.q_star

    def _common_pi(self, sampled: SampledReports, name: str) -> float:
        if sampled.pi is None:
            raise NotSupportedError(
                f"{name} needs one common sampling probability pi; these nodes had per-node "
                "pi_j: use personalised_counts (the paper's T) instead"
            )
        return sampled.pi

    def naive_counts(self, sampled: SampledReports) -> np.ndarray:
        """``c(x) = (H(x) - n q) / (p - q)``: unaware of sampling, biased when ``pi < 1``."""
        p, q = self._pq
        h = self.support_counts(sampled)
        return (h - sampled.n * q) / (p - q)

    def unbiased_counts(self, sampled: SampledReports) -> np.ndarray:
        """``g(x) = c(x) / pi + n q (1 - pi) / ((p - q) pi)`` (Biswas et al. 2022, eq. 5)."""
        p, q = self._pq
        pi = self._common_pi(self._check_sampled(sampled), "g (unbiased_counts)")
        c = self.naive_counts(sampled)
        return c / pi + sampled.n * q * (1 - pi) / ((p - q) * pi)

    def plugin_counts(self, sampled: SampledReports) -> np.ndarray:
        """``c_hat(x) = (H(x) - S q) / (pi (p - q))`` (Biswas et al. 2022, Theorem 3.4)."""
        p, q = self._pq
        pi = self._common_pi(self._check_sampled(sampled), "c_hat (plugin_counts)")
        h = self.support_counts(sampled)
        return (h - sampled.n_sampled * q) / (pi * (p - q))

    def personalised_counts(self, sampled: SampledReports) -> np.ndarray:
        """``T(x) = n c(x) / Pi + n q (n - Pi) / (Pi (p - q))``, ``Pi = sum pi_j`` (Thm 5.1)."""
        p, q = self._pq
        n, total = sampled.n, sampled.pi_sum
        c = self.naive_counts(sampled)
        return n * c / total + n * q * (n - total) / (total * (p - q))

    def counts(self, sampled: SampledReports, estimator: str = "g") -> np.ndarray:
        """The count estimate named by ``estimator`` in ``("c", "g", "c_hat", "T")``."""
        method = {
            "c": self.naive_counts,
            "g": self.unbiased_counts,
            "c_hat": self.plugin_counts,
            "T": self.personalised_counts,
        }.get(_check_estimator(estimator))
        return method(sampled)

    def unbiased_frequencies(self, sampled: SampledReports, estimator: str = "g") -> np.ndarray:
        """The paper's unbiased estimate as frequencies: ``g`` (default), ``c_hat`` or ``T``.

        The oracle every mechanism has; for a tally to hand to :func:`bayesldp.estimate`, see
        :meth:`round_tally`.
        """
        if _check_estimator(estimator) == "c":
            raise InvalidInputError("estimator: 'c' is biased under sampling; use g, c_hat or T")
        return self.frequencies(sampled, estimator)

    def frequencies(self, sampled: SampledReports, estimator: str = "g") -> np.ndarray:
        """``counts(sampled, estimator) / n`` (may leave the simplex)."""
        return self.counts(sampled, estimator) / self._check_sampled(sampled).n

    # ------------------------------------------------------------------ exact moments
    def _population(self, x: Any, pi: Any) -> tuple[np.ndarray, np.ndarray]:
        x = check_values(x, self.k)
        pi_value = self._resolve_pi(pi, x.shape[0])
        pis = np.broadcast_to(np.asarray(pi_value, dtype=float), x.shape)
        return x, pis

    def _divisor(self, estimator: str, pis: np.ndarray) -> float:
        """The estimator's ``(H - offset) / divisor`` form: the divisor."""
        p, q = self._pq
        n = pis.shape[0]
        if estimator == "c":
            return p - q
        if estimator == "T":
            return pis.sum() * (p - q) / n
        if not np.all(pis == pis[0]):
            raise NotSupportedError(
                f"{estimator} needs one common sampling probability pi; use 'T' for per-node pi_j"
            )
        return float(pis[0]) * (p - q)

    def expected_counts(self, x: Any, estimator: str = "g", pi: Any = None) -> np.ndarray:
        """Exact expectation of a count estimator for the fixed population ``x``.

        ``E H(x) = q Pi + (p - q) sum_{j: x_j = x} pi_j``, ``E S = Pi``; hence
        ``E c = pi n_x - n q (1 - pi) / (p - q)`` for a common ``pi`` (the paper's eq. 4),
        ``E g = E c_hat = n_x`` and ``E T = n sum_{j: x_j = x} pi_j / Pi``.
        """
        estimator = _check_estimator(estimator)
        x, pis = self._population(x, pi)
        p, q = self._pq
        n, total = x.shape[0], float(pis.sum())
        held = np.bincount(x, weights=pis, minlength=self.k)  # sum_{j: x_j = x} pi_j
        e_h = q * total + (p - q) * held
        offset = n * q if estimator == "c" else q * total  # E[n q pi], E[S q], q Pi
        return (e_h - offset) / self._divisor(estimator, pis)

    def count_variance(self, x: Any, estimator: str = "g", pi: Any = None) -> np.ndarray:
        """Exact variance of each coordinate of a count estimator for the fixed population ``x``.

        ``x`` are the nodes' true values; ``pi`` defaults to the instance's (one value or one
        per node).  Formulas in the module docstring.
        """
        estimator = _check_estimator(estimator)
        x, pis = self._population(x, pi)
        p, q = self._pq
        divisor = self._divisor(estimator, pis)
        if estimator == "c_hat":

            def term(r: float) -> np.ndarray:
                return pis * (r * (1 - 2 * q) + q * q) - pis**2 * (r - q) ** 2
        else:

            def term(r: float) -> np.ndarray:
                return pis * r * (1 - pis * r)

        base_q = term(q)
        var = base_q.sum() + np.bincount(x, weights=term(p) - base_q, minlength=self.k)
        return var / divisor**2

    def var_star(self, n: int, estimator: str = "g", pi: Any = None) -> float:
        """The paper's ``Var*`` (variance as ``f_x -> 0``) of a count estimator over ``n`` nodes.

        ``Var* c = n pi (q - q^2 pi) / (p - q)^2`` and ``Var* g = n (q - q^2 pi) / ((p-q)^2 pi)``
        (Theorem 3.2); ``Var* T = n^2 sum_j q pi_j (1 - q pi_j) / (Pi^2 (p - q)^2)``
        (Theorem 5.1); ``Var* c_hat = n q (1 - q) / (pi (p - q)^2)`` (derived here; the paper
        gives none).  ``c``, ``g``, ``c_hat`` need a common ``pi``.
        """
        estimator = _check_estimator(estimator)
        if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 1:
            raise InvalidInputError(f"n: expected a positive number of nodes, got {n!r}")
        pi_value = self._resolve_pi(pi, int(n))
        p, q = self._pq
        if estimator == "T":
            pis = np.broadcast_to(np.asarray(pi_value, dtype=float), (int(n),))
            total = float(pis.sum())
            return float(n**2 * np.sum(q * pis * (1 - q * pis)) / (total**2 * (p - q) ** 2))
        if isinstance(pi_value, np.ndarray):
            if not np.all(pi_value == pi_value[0]):
                raise NotSupportedError(
                    f"{estimator} needs one common sampling probability pi; use 'T'"
                )
            pi_value = float(pi_value[0])
        if estimator == "c":
            return n * pi_value * (q - q * q * pi_value) / (p - q) ** 2
        if estimator == "g":
            return n * (q - q * q * pi_value) / ((p - q) ** 2 * pi_value)
        return n * q * (1 - q) / (pi_value * (p - q) ** 2)

    # ------------------------------------------------------------------ auditing
    def category_values(self, x: Any, rng: Any = None) -> Any:
        """What a node holding category ``x`` perturbs: the base mechanism's values."""
        return self.mechanism.category_values(x, rng)

    def audit_event(self, sampled: SampledReports, x0: int, x1: int) -> np.ndarray:
        """Boolean per node: it reported and its report is the base mechanism's event."""
        sampled = self._check_sampled(sampled)
        event = np.zeros(sampled.n, dtype=bool)
        if sampled.reports is not None:
            event[sampled.nodes] = self.mechanism.audit_event(sampled.reports, x0, x1)
        return event


class SampledRound(Mechanism):
    """One round of node sampling as the mechanism of its tally (:meth:`NodeSampling.round_tally`).

    The likelihood rows are the base protocol's; the oracle is the paper's count estimator
    ``estimator`` divided by the number of nodes ``n`` (module docstring), computed from the
    tally's support counts ``H`` (``tally.stat``) and sampled-report count ``S`` (``tally.n``),
    with the exact variance of the module docstring for a population with frequencies ``theta``
    spread over the nodes independently of their ``pi_j``.
    """

    name = "NodeSampling"
    RECOMMEND = False

    def __init__(self, sampling: NodeSampling, sampled: SampledReports, estimator: str) -> None:
        super().__init__(sampling.k, sampling.epsilon)
        self.base = sampling.mechanism
        self.estimator = _check_estimator(estimator)
        if estimator == "c":
            raise InvalidInputError("estimator: 'c' is biased under sampling; use g, c_hat or T")
        self.nodes = sampled.n
        self.pi, self.pi_sum = sampled.pi, sampled.pi_sum
        if self.pi is None and estimator != "T":
            raise NotSupportedError(
                f"estimator: {estimator!r} needs one common pi; these nodes had per-node pi_j: "
                "use estimator='T'"
            )
        pis = sampling._resolve_pi(sampling.pi if sampled.pi is None else sampled.pi, sampled.n)
        self._pis = np.broadcast_to(np.asarray(pis, dtype=float), (sampled.n,))

    def params(self) -> dict[str, Any]:
        return {
            **self.base.params(),
            "base": type(self.base).__name__,
            "nodes": self.nodes,
            "pi_sum": self.pi_sum,
            "estimator": self.estimator,
        }

    @property
    def family(self) -> str:
        """A round's tally merges with the base mechanism's tallies (same likelihood rows)."""
        return self.base.family

    def perturb(self, x: Any, rng: RNGLike = None) -> Any:
        raise NotSupportedError("SampledRound: perturb through NodeSampling.perturb")

    def tally(self, reports: Any) -> Tally:
        raise NotSupportedError("SampledRound: tally through NodeSampling.round_tally")

    def realised_epsilon(self) -> float:
        return self.base.realised_epsilon()

    def _divisor(self) -> float:
        p, q = self.base.p_star, self.base.q_star
        if self.estimator == "T":
            return self.pi_sum * (p - q) / self.nodes
        return self.pi * (p - q)

    def unbiased_frequencies(self, tally: Tally) -> np.ndarray:
        """``estimator / n``: ``g`` and ``T`` from ``H - q Pi``, ``c_hat`` from ``H - S q``."""
        self.check_tally(tally)
        q = self.base.q_star
        offset = tally.n * q if self.estimator == "c_hat" else self.pi_sum * q
        return (tally.stat - offset) / self._divisor() / self.nodes

    def oracle_variance(self, theta: Any, n: int) -> np.ndarray:
        """Exact variance of the round's frequency estimate (``n``, the sampled count, unused:
        the variance is that of the round's nodes)."""
        del n
        theta = np.asarray(theta, dtype=float)
        p, q, pis = self.base.p_star, self.base.q_star, self._pis
        if self.estimator == "c_hat":

            def term(r: float) -> float:
                return float(np.sum(pis * (r * (1 - 2 * q) + q * q) - pis**2 * (r - q) ** 2))
        else:

            def term(r: float) -> float:
                return float(np.sum(pis * r * (1 - pis * r)))

        var = term(q) + theta * (term(p) - term(q))
        return var / (self._divisor() * self.nodes) ** 2


def _check_estimator(estimator: Any) -> str:
    if estimator not in ESTIMATORS:
        raise InvalidInputError(f"estimator: expected one of {ESTIMATORS}, got {estimator!r}")
    return estimator
