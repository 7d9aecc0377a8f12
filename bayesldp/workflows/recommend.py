"""``bayesldp recommend``: the mechanism whose estimate, by the user's method, errs least.

The error ranked is the expected squared error summed over the ``K`` frequencies, at ``n`` users
drawn from the uniform population (every frequency ``1/K``; no population is known before the
survey, and the uniform one favours no category):

* ``mle`` and ``posterior``: the trace of the Cramér-Rao bound
  (:func:`bayesldp.bounds.asymptotic_mse`), the large-n error of the MLE and of the posterior
  mean (Bernstein-von Mises);
* ``oracle``: the exact variance of the unbiased oracle (``oracle_variance``), summed.

Both scale as ``1/n``: ``n`` sets the numbers in the table, not the order.
"""

from __future__ import annotations

import numpy as np

from bayesldp.errors import InvalidInputError
from bayesldp.workflows.tables import Table

#: the estimators whose expected error ``recommend`` can rank, the default first
METHODS = ("mle", "posterior", "oracle")
#: what is ranked, per method (printed above the table and in ``recommend --help``)
_CRB = (
    "expected squared error summed over the K frequencies, at n users from the uniform "
    "population, approximated by the trace of the Cramér-Rao bound (n I)^-1, which {who} attains "
    "as n grows"
)
RANKED = {
    "mle": "the MLE's " + _CRB.format(who="the MLE"),
    "posterior": "the posterior mean's "
    + _CRB.format(who="the posterior mean (Bernstein-von Mises)"),
    "oracle": "the unbiased oracle's exact variance summed over the K frequencies, at n users "
    "from the uniform population (a fixed population, as oracle_variance)",
}
#: beyond this K the simulated information (O(max(20,000, 100 K) K^2) per mechanism) is slow
MAX_SIMULATED_K = 256
#: beyond this K, GRR's Cramér-Rao trace comes from its closed form, not its dense channel
CLOSED_FORM_K = 4096
#: the K-length float arrays the ranking needs at least (theta, variances, their products)
_ARRAYS_PER_K = 4
#: mechanisms whose error is within this factor of the best are named with it
CLOSE = 1.01
#: ``recommend --help`` on records of several attributes (:mod:`.recommend_record`)
RECORD_HELP = (
    "Several attributes (--k 3,4,2): ranks SPL (split the budget), SMP (split the users) and "
    "RS+FD, each realising --epsilon for the whole record, by the error summed over every "
    "attribute's frequencies, and answers: split the users or the budget."
)


def candidates() -> tuple[str, ...]:
    """The registered mechanisms that ``recommend`` ranks (their class says so)."""
    from bayesldp.mechanisms import mechanism_class, names

    return tuple(name for name in names() if mechanism_class(name).RECOMMEND)


def unranked() -> tuple[str, ...]:
    """The registered mechanisms that ``recommend`` leaves out (their class says so)."""
    from bayesldp.mechanisms import mechanism_class, names

    return tuple(name for name in names() if not mechanism_class(name).RECOMMEND)


def expected_error(mech, method: str, n: int) -> tuple[float, str]:
    """The ranked quantity of ``method`` for ``mech`` at ``n`` users, and how it was obtained."""
    from bayesldp.bounds import asymptotic_mse
    from bayesldp.errors import NotSupportedError
    from bayesldp.mechanisms.base import FiniteChannelMechanism

    theta = np.full(mech.k, 1.0 / mech.k)
    if method == "oracle":
        return float(np.sum(mech.oracle_variance(theta, n))), "exact"
    if type(mech).__name__ == "GRR" and mech.k > CLOSED_FORM_K:
        # GRR's square invertible channel makes its MLE the oracle: the Cramér-Rao trace is the
        # oracle's variance plus the multinomial spread of the users about the population,
        # (1 - sum theta^2) / n, with no K x K channel
        oracle = float(np.sum(mech.oracle_variance(theta, n)))
        return oracle + (1.0 - float(np.sum(theta**2))) / n, "exact (closed form)"
    if not isinstance(mech, FiniteChannelMechanism) and mech.k > MAX_SIMULATED_K:
        raise NotSupportedError(
            f"--method {method}: the information of {type(mech).__name__} is simulated, which "
            f"is too slow beyond K = {MAX_SIMULATED_K}; use --method oracle"
        )
    mse, m = asymptotic_mse(mech, theta, n)
    return mse, "exact (channel)" if m == 0 else f"simulated ({m:,} reports)"


def recommend_table(k: int, epsilon: float, n: int, method: str) -> Table:
    """The ranking as a :class:`~bayesldp.workflows.tables.Table`, best first."""
    from bayesldp._validation import check_k, check_memory
    from bayesldp.errors import NotSupportedError
    from bayesldp.mechanisms import make_mechanism

    k = check_k(k, "--k")
    check_memory(  # before any K-length array: a K of 10^9 fails now, not after minutes
        8.0 * _ARRAYS_PER_K * k,
        f"recommend --k {k:,}: {_ARRAYS_PER_K} arrays of K floats at least",
        "rank at a smaller --k (the order of the mechanisms changes slowly with K)",
    )
    from bayesldp.bounds import l2_lower_bound

    # the limit no unbiased linear estimator goes below in the worst case (Pan 2026); the MLE's
    # and the posterior's errors include the users' sampling spread about theta, so theirs too
    floor = l2_lower_bound(k, epsilon, n, distribution=method != "oracle")
    rows, unavailable, skipped = [], [], []
    for name in candidates():
        try:
            mech = make_mechanism(name, k, epsilon)
        except InvalidInputError as exc:  # e.g. OUE's bit probability below 2^-52 at eps ~ 50
            unavailable.append(f"{name}: {exc}")
            continue
        try:
            error, source = expected_error(mech, method, n)
        except (InvalidInputError, NotSupportedError) as exc:  # memory, or too slow at this K
            unavailable.append(f"{name}: {exc}")
            skipped.append(name)
            continue
        rows.append([name, error, error / floor, (error / k) ** 0.5, n * error,
                     mech.report_size(), source])  # fmt: skip
    if not rows and skipped:
        raise InvalidInputError(
            f"--k: no mechanism can be ranked at K = {k:,} with --method {method}: "
            f"{'; '.join(unavailable)}"
        )
    if not rows:
        raise InvalidInputError(f"epsilon: no mechanism runs at {epsilon:g}: {unavailable[0]}")
    rows.sort(key=lambda row: row[1])
    close = [row[0] for row in rows[1:] if row[1] <= CLOSE * rows[0][1]]
    note = f"; within 1%: {', '.join(close)} (compare report sizes)" if close else ""
    among = (
        f" of the {len(rows)} ranked; {len(skipped)} could not be ranked at K = {k:,}, below"
        if skipped
        else ""
    )
    columns = ["mechanism", "mse", "x_floor", "rmse_one", "n_mse", "report_size", "computed"]
    headers = [
        "mechanism",
        "expected total squared error",
        "x the L2 floor",
        "RMSE of one frequency",
        "n x error",
        "report size",
        "computed",
    ]
    meta = {
        "k": k,
        "epsilon": epsilon,
        "n": n,
        "method": method,
        "ranked": RANKED[method],
        "recommended": rows[0][0],
        "within_1_percent": close,
        "not_ranked": unavailable,
        "skipped": skipped,
    }
    title = [f"K = {k}, epsilon = {epsilon:g}, n = {n:,}, method = {method}"]
    title.append(f"Ranked: {RANKED[method]}; x the L2 floor: that error over "
                 f"bayesldp.bounds.l2_lower_bound, {floor:.4g} (Pan 2026).")
    return Table(
        columns,
        rows,
        title=title,
        notes=[
            f"recommended: {rows[0][0]} (lowest expected error{note}{among})",
            *(f"not ranked: {reason}" for reason in unavailable),
        ],
        meta=meta,
        headers=headers,
        formats={"mse": ".4g", "x_floor": ".3f", "rmse_one": ".3g", "n_mse": ".4g"},
    )
