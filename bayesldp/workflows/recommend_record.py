"""``bayesldp recommend --k 3,4,2``: split the users or the budget over a record's attributes?

Wang, Blocki, Li and Jha ("Locally Differentially Private Protocols for Frequency Estimation",
USENIX Security 2017, section "Discussion") advise, for ``Q >= 2`` questions, to split the users
into groups that each answer one question at the full budget rather than to split the budget over
the questions; Arcolezi, Couchot, Al Bouna, Xiao (CIKM 2021) name the two SMP and SPL and add RS+FD
(sample one attribute, fake data for the others).  :func:`recommend_record` answers the question for
given domain sizes, ``epsilon`` and ``n`` by exact computation (:func:`record_error`), at one
whole-record guarantee for every row.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from bayesldp.errors import InvalidInputError
from bayesldp.workflows.recommend import CLOSE, RANKED
from bayesldp.workflows.tables import Table

#: the bases every protocol is built with; RS+FD's unary ones with either fake data
BASES = ("GRR", "SUE", "OUE")
#: unary encodings whose information is computed from their ``k x 2^k`` channel up to this k
EXACT_UNARY_K = 10
#: beyond this n, ``E[1/N]`` of the binomial comes from its expansion (relative error < 1e-15)
EXPANSION_N = 10**8
#: how each kind of protocol spends the record's budget (the table's "split" column)
SPLITS = {"SPL": "budget", "SMP": "users", "RSFD": "users, hidden (fake data)"}


def inverse_mean(n: int, d: int) -> float:
    """``E[1/N | N >= 1]`` for ``N ~ Binomial(n, 1/d)``: the users who sampled one attribute.

    Summed over the binomial's mass within 40 standard deviations of its mean (the rest is
    below 1e-300); beyond ``n = 10^8`` the expansion ``(1 + (1 - 1/d) / mu) / mu``,
    ``mu = n / d``, whose next term is below ``3 / mu^2``.
    """
    from scipy.stats import binom

    p = 1.0 / d
    mu, sd = n * p, math.sqrt(n * p * (1 - p))
    if n > EXPANSION_N:
        return (1.0 + (1.0 - p) / mu) / mu
    lo = max(1, math.floor(mu - 40 * sd - 10))
    hi = min(n, math.ceil(mu + 40 * sd + 10))
    m = np.arange(lo, hi + 1)
    return float(np.sum(binom.pmf(m, n, p) / m) / binom.sf(0, n, p))


def ranking(k: int | tuple[int, ...], epsilon: float, n: int, method: str) -> Table:
    """``bayesldp recommend``'s table: the mechanisms of one attribute (``k`` an int,
    :func:`~bayesldp.workflows.recommend.recommend_table`) or a record's protocols (``k`` a
    tuple of domain sizes, :func:`recommend_record`)."""
    from bayesldp.workflows.recommend import recommend_table

    if isinstance(k, tuple):
        return recommend_record(k, epsilon, n, method, option="--k")
    return recommend_table(k, epsilon, n, method)


def _marginal_error(mech: Any, method: str, n: int) -> tuple[float, str]:
    """One attribute's summed error at ``n`` reports from the uniform population."""
    from bayesldp.bounds import asymptotic_mse
    from bayesldp.errors import NotSupportedError
    from bayesldp.mechanisms.base import FiniteChannelMechanism
    from bayesldp.mechanisms.grr import GRR
    from bayesldp.mechanisms.multidimensional import FakeDataUnary
    from bayesldp.mechanisms.unary import UnaryEncoding
    from bayesldp.workflows.recommend import CLOSED_FORM_K, MAX_SIMULATED_K

    theta = np.full(mech.k, 1.0 / mech.k)
    if method == "oracle":
        return float(np.sum(mech.oracle_variance(theta, n))), "exact"
    if isinstance(mech, GRR) and mech.k > CLOSED_FORM_K:  # GRR-shaped: the MLE is the oracle
        oracle = float(np.sum(mech.oracle_variance(theta, n)))
        return oracle + (1.0 - float(np.sum(theta**2))) / n, "exact (closed form)"
    unary = isinstance(mech, UnaryEncoding | FakeDataUnary)
    exact = isinstance(mech, FiniteChannelMechanism) or (unary and mech.k <= EXACT_UNARY_K)
    if not exact and mech.k > MAX_SIMULATED_K:
        raise NotSupportedError(
            f"--method {method}: the information of {type(mech).__name__} at k = {mech.k} is "
            f"simulated, which is too slow beyond k = {MAX_SIMULATED_K}; use --method oracle"
        )
    mse, m = asymptotic_mse(mech, theta, n, simulate=not exact)
    return mse, "exact (channel)" if m == 0 else f"simulated ({m:,} reports)"


def record_error(protocol: Any, method: str, n: int) -> tuple[float, str]:
    """The expected squared error of ``protocol``'s estimates, summed over every attribute's
    frequencies, at ``n`` users whose attributes are each uniform; and how it was computed.

    Parameters
    ----------
    protocol : SPL, SMP or RSFD
        A :class:`~bayesldp.mechanisms.multidimensional.Multidimensional` protocol; attribute
        ``j`` has ``k_j`` values and the channel ``C_j`` (``protocol.marginals[j]``).
    method : {"mle", "posterior", "oracle"}
        The estimator run on each attribute's tally.
    n : int
        The number of users (records).

    Returns
    -------
    error : float
        ``sum_j sum_x E[(f_hat_jx - f_jx)^2]``.
    computed : str
        "exact", "exact (channel)", or "simulated (m reports)" when some attribute's Fisher
        information is estimated from ``m`` simulated reports (unary encodings above
        ``k = 10``).

    Notes
    -----
    ``f_jx = 1 / k_j``.  With ``v_j(f) = n Var_n(f)`` the per-user oracle variance of ``C_j``
    (``mech.oracle_variance(f, 1)``; a pure protocol's ``[q*(1 - q*) + f (p* - q*)(1 - p* - q*)] /
    (p* - q*)^2``, Wang et al. 2017) and ``T_j`` the trace of one report's Cramér-Rao bound
    (:func:`bayesldp.bounds.asymptotic_mse` at ``n = 1``):

    * ``oracle``, the unbiased estimate of the frequencies of the ``n`` users themselves (a
      fixed population, as ``oracle_variance``):

      - SPL (``C_j`` the base at ``epsilon / d``) and RS+FD (``C_j`` the mixture
        ``(1/d) P_real + (1 - 1/d) F``, Arcolezi et al. 2021): every user reports every
        attribute, ``sum_j sum_x v_j(f_jx) / n``;
      - SMP (``C_j`` the base at ``epsilon``): the ``N_j ~ Binomial(n, 1/d)`` users who sampled
        ``j`` report it; given them, the oracle's variance is ``v_j(f) / N_j`` about their own
        frequencies, which spread about the population's as a draw without replacement,
        ``f (1 - f) (n - N_j) / (N_j (n - 1))``; so
        ``sum_j sum_x [v_j(f_jx) E[1/N_j] + f_jx (1 - f_jx) (n E[1/N_j] - 1) / (n - 1)]``,
        ``E[1/N_j]`` given ``N_j >= 1`` (:func:`inverse_mean`, exact).
    * ``mle`` and ``posterior``, the population's frequencies (users drawn from it): the trace of
      the Cramér-Rao bound of each attribute's MLE, ``sum_j T_j / n`` for SPL and RS+FD and
      ``sum_j T_j E[1/N_j]`` for SMP.

    The tests compare the ``oracle`` values with simulated protocols.
    """
    from bayesldp.mechanisms.multidimensional import SMP

    if not isinstance(protocol, SMP):
        parts = [_marginal_error(mech, method, n) for mech in protocol.marginals]
        return sum(e for e, _ in parts), _computed(parts)
    inv = inverse_mean(n, protocol.d)
    parts, total = [], 0.0
    for mech in protocol.marginals:
        per_user, how = _marginal_error(mech, method, 1)
        parts.append((per_user, how))
        total += per_user * inv
        if method == "oracle" and n > 1:
            f = 1.0 / mech.k
            total += mech.k * f * (1 - f) * (n * inv - 1) / (n - 1)
    return total, _computed(parts)


def _computed(parts: list[tuple[float, str]]) -> str:
    simulated = [how for _, how in parts if how.startswith("simulated")]
    return simulated[0] if simulated else parts[0][1]


def protocols(ks: Any, epsilon: float) -> list[tuple[str, Any]]:
    """The rows' protocols, each built to realise ``epsilon`` for the whole record (every
    protocol's default): SPL and SMP with every base, RS+FD with every base and fake data
    (``budget="record"``: the paper's nominal ``record_budget_epsilon``).  A protocol that
    cannot be built (e.g. OUE at a huge epsilon) is ``(label, error)``."""
    from bayesldp.mechanisms.multidimensional import RSFD, SMP, SPL

    variants = [("SPL", base, None) for base in BASES] + [("SMP", base, None) for base in BASES]
    variants.append(("RSFD", "GRR", None))
    variants += [("RSFD", base, fake) for base in BASES[1:] for fake in ("zero", "random")]
    out = []
    for kind, base, fake in variants:
        label = f"{kind}[{base}{'' if fake is None else '-' + fake[0]}]"
        try:
            if kind == "RSFD":
                protocol = RSFD(ks, epsilon, base, fake, budget="record")
            else:
                protocol = (SPL if kind == "SPL" else SMP)(ks, epsilon, base)
        except InvalidInputError as exc:
            protocol = exc
        out.append((label, protocol))
    return out


def _check_ks(ks: Any, option: str) -> tuple[int, ...]:
    from bayesldp._validation import check_k

    if isinstance(ks, int | np.integer) or not hasattr(ks, "__len__"):
        raise InvalidInputError(f"{option}: expected one domain size per attribute, got {ks!r}")
    ks = tuple(check_k(k, f"{option} (attribute {j})") for j, k in enumerate(ks))
    if len(ks) < 2:
        raise InvalidInputError(
            f"{option}: a record needs at least 2 attributes, got {len(ks)}; rank the "
            "mechanisms of one attribute with recommend --k K (recommend_table)"
        )
    return ks


def recommend_record(
    ks: Any, epsilon: float, n: int, method: str = "mle", *, option: str = "ks"
) -> Table:
    """Rank SPL, SMP and RS+FD for records of ``d`` attributes at one record-level ``epsilon``.

    Wang et al. (2017, "Discussion") advise splitting the users, not the budget, across questions;
    Arcolezi et al. (CIKM 2021) compare SPL, SMP and RS+FD.  Each row is one
    protocol and base, its error from :func:`record_error` (formulas there), best first.

    Parameters
    ----------
    ks : sequence of int
        Each attribute's domain size (``d = len(ks) >= 2``, each ``>= 2``).
    epsilon : float
        The budget of the whole record: every row's protocol realises it
        (``realised_epsilon()``, shown in the table).  SPL reports each attribute at
        ``epsilon / d`` (composition), SMP one attribute at ``epsilon``, RS+FD one attribute at
        ``epsilon`` plus fake data for the others (``RSFD``'s default ``budget="record"``): its
        nominal epsilon in the paper's terms is
        ``record_budget_epsilon(epsilon, d) = ln(1 + (e^epsilon - 1) / d)``, because RS+FD at a
        nominal ``e`` (``budget="paper"``) realises the amplified ``ln(d (e^e - 1) + 1)`` for
        the whole record.
    n : int
        Number of users.
    method : {"mle", "posterior", "oracle"}
        The estimator whose error is ranked (``posterior`` ranks as ``mle``).
    option : str
        The name of ``ks`` in error messages (the CLI's ``--k``).

    Returns
    -------
    Table
        Rows best first; its notes give the recommendation and the answer to the question
        Wang et al. (2017) ask (the best SMP against the best SPL), ``meta["answer"]`` "users" or
        "budget".

    Notes
    -----
    With ``N_j ~ Binomial(n, 1/d)`` the users who sampled attribute ``j`` (SMP), the ``oracle``
    error of a fixed population of ``n`` users is
    ``SPL, RS+FD: sum_j sum_x v_j(f_jx) / n`` and
    ``SMP: sum_j sum_x [v_j(f_jx) E[1/N_j] + f_jx (1 - f_jx) (n E[1/N_j] - 1) / (n - 1)]``,
    ``v_j`` the per-user oracle variance of attribute ``j``'s channel; the ``mle`` error is the
    Cramér-Rao trace ``sum_j T_j / n`` (SPL, RS+FD) or ``sum_j T_j E[1/N_j]`` (SMP).
    """
    from bayesldp._validation import check_epsilon, check_int, check_memory
    from bayesldp.errors import NotSupportedError
    from bayesldp.mechanisms.multidimensional import amplified_epsilon, record_budget_epsilon
    from bayesldp.workflows.recommend import METHODS

    ks = _check_ks(ks, option)
    epsilon = check_epsilon(epsilon)
    n = check_int(n, "--n" if option == "--k" else "n", 1)
    if method not in METHODS:
        raise InvalidInputError(f"method: expected one of {', '.join(METHODS)}, got {method!r}")
    check_memory(
        8.0 * 4 * sum(ks),
        f"recommend {option} {','.join(map(str, ks))}: 4 arrays of K floats per attribute",
        "rank at smaller domain sizes (the order changes slowly with them)",
    )
    d, total_k = len(ks), sum(ks)
    rows, unavailable = [], []
    for label, protocol in protocols(ks, epsilon):
        if isinstance(protocol, Exception):
            unavailable.append(f"{label}: {protocol}")
            continue
        try:
            error, source = record_error(protocol, method, n)
        except (InvalidInputError, NotSupportedError) as exc:
            unavailable.append(f"{label}: {exc}")
            continue
        kind = label.split("[")[0]
        report_eps = epsilon / d if kind == "SPL" else epsilon
        nominal = getattr(protocol, "nominal_epsilon", protocol.epsilon)
        rows.append([label, SPLITS[kind], nominal, report_eps,
                     protocol.realised_epsilon(), error, (error / total_k) ** 0.5, n * error,
                     source])  # fmt: skip
    if not rows:
        raise InvalidInputError(f"epsilon: no protocol runs at {epsilon:g}: {unavailable[0]}")
    rows.sort(key=lambda row: row[5])
    best = rows[0]
    close = [row[0] for row in rows[1:] if row[5] <= CLOSE * best[5]]
    within = f"; within 1%: {', '.join(close)}" if close else ""
    notes = [f"recommended: {best[0]} (split the {best[1]}: lowest expected error{within})"]
    by_split = {kind: next((r for r in rows if r[0].startswith(kind)), None)
                for kind in ("SMP", "SPL")}  # fmt: skip
    answer = None
    if by_split["SMP"] and by_split["SPL"]:
        smp, spl = by_split["SMP"], by_split["SPL"]
        answer = "users" if smp[5] <= spl[5] else "budget"
        win, lose = (smp, spl) if answer == "users" else (spl, smp)
        notes.append(f"split the {answer}: {win[0]} (the question of Wang et al. 2017: its "
                     f"error is {win[5] / lose[5]:.3g} x that of {lose[0]}, the best "
                     f"{'budget' if answer == 'users' else 'users'} split)")  # fmt: skip
    nominal = record_budget_epsilon(epsilon, d)
    notes.append(
        f"RSFD rows: nominal epsilon ln(1 + (e^{epsilon:g} - 1)/{d}) = {nominal:.4g}, so that "
        f"the whole record realises {epsilon:g} (RSFD's default budget='record'); at the "
        f"paper's nominal {epsilon:g} (budget='paper') it would realise "
        f"ln({d}(e^{epsilon:g} - 1) + 1) = {amplified_epsilon(epsilon, d):.4g}"
    )
    notes += [f"not ranked: {reason}" for reason in unavailable]
    columns = ["protocol", "split", "nominal_epsilon", "report_epsilon", "record_epsilon",
               "mse", "rmse_one", "n_mse", "computed"]  # fmt: skip
    headers = ["protocol", "split", "nominal epsilon", "epsilon per report",
               "record epsilon (realised)", "expected total squared error",
               "RMSE of one frequency", "n x error", "computed"]  # fmt: skip
    ranked = RANKED[method].replace("over the K frequencies", "over every attribute's frequencies")
    title = [
        f"k = {','.join(map(str, ks))} ({d} attributes), record epsilon = {epsilon:g}, "
        f"n = {n:,}, method = {method}",
        f"Ranked: {ranked}. Every row realises epsilon = {epsilon:g} for the whole record.",
    ]
    meta = {
        "ks": list(ks),
        "epsilon": epsilon,
        "n": n,
        "method": method,
        "ranked": ranked,
        "recommended": best[0],
        "answer": answer,
        "within_1_percent": close,
        "not_ranked": unavailable,
    }
    formats = {"nominal_epsilon": ".4g", "report_epsilon": ".4g", "record_epsilon": ".4g",
               "mse": ".4g", "rmse_one": ".3g", "n_mse": ".4g"}  # fmt: skip
    return Table(columns, rows, title=title, notes=notes, meta=meta, headers=headers,
                 formats=formats)  # fmt: skip
