"""The table of ``bayesldp estimate``: a point estimate and its 90% interval per category.

Shared by the one-tally form (:mod:`bayesldp.workflows.cli`) and the per-round and
per-attribute forms (:mod:`bayesldp.workflows.grouped_estimates`).
"""

from __future__ import annotations

import argparse

#: the normal quantile of a two-sided 90% interval
Z90 = 1.6448536269514722


def posterior_options(args: argparse.Namespace) -> dict:
    """The sampler settings given on the command line (``--draws``, ``--tune``, ``--chains``,
    ``--target-accept``; those left out keep :func:`bayesldp.fit`'s defaults)."""
    names = ("draws", "tune", "chains", "target_accept")
    return {name: getattr(args, name) for name in names if getattr(args, name, None) is not None}


def posterior_fit(args: argparse.Namespace, tally, labels=None, seed=None):
    """:func:`bayesldp.fit` of one tally with the command's prior, method and sampler settings
    (``seed``: the random seed, default ``--seed``)."""
    from bayesldp.bayes import fit

    return fit(
        tally,
        prior=args.prior,
        method=args.fit_method,
        random_seed=args.seed if seed is None else seed,
        progressbar=None if not args.quiet else False,  # bars only on a terminal
        labels=None if labels is None else list(labels),
        **posterior_options(args),
    )


def posterior_summary(args: argparse.Namespace, idata, k: int):
    """Posterior mean, the 5% / 95% posterior quantiles (a 90% credible interval) and what
    they are, from a fit of :func:`posterior_fit`."""
    import json

    import numpy as np

    draws = idata.posterior["theta"].values.reshape(-1, k)
    interval = np.quantile(draws, [0.05, 0.95], axis=0)
    prior = json.loads(idata.posterior.attrs["prior"])["distribution"]
    return (
        draws.mean(axis=0),
        interval,
        f"posterior mean ({args.fit_method}, {prior} prior), 90% credible interval",
    )


def posterior_estimate(args: argparse.Namespace, tally, labels=None):
    """Posterior mean and 90% credible interval of one tally (saved if ``--save-posterior``)."""
    from bayesldp.bayes import save_fit

    idata = posterior_fit(args, tally, labels)
    if args.save_posterior:
        save_fit(idata, args.save_posterior)
    return posterior_summary(args, idata, tally.k)


def frequentist_estimate(method: str, tally):
    """The estimate of ``method``, its 90% normal interval (None without standard errors) and
    what it is (the default's uniform answer says why)."""
    from bayesldp.estimators import estimate

    result = estimate(tally, method=method)
    point = result.frequencies
    if result.details.get("answer") == "uniform":  # the default ("pretest") kept uniformity
        statistic, threshold = result.details["statistic"], result.details["threshold"]
        return point, None, (f"{method}: the uniform distribution (the reports do not reject it: "
                             f"statistic {statistic:.1f} below {threshold:.1f})")  # fmt: skip
    if result.std_errors is None:
        return point, None, method
    half = Z90 * result.std_errors
    return point, (point - half, point + half), f"{method}, 90% normal interval"


def estimate_meta(mech, n: int, method: str, kind: str, interval: str | None, labels=None) -> dict:
    """The ``meta`` of an estimate table: the mechanism, the reports, how the estimate was
    made, ``interval`` (which columns hold the 90% interval; None without one) and the labels."""
    return {
        "mechanism": type(mech).__name__,
        "parameters": mech.params(),
        "reports": int(n),
        "method": method,
        "estimate": kind,
        "interval": interval,
        "labels": None if labels is None else list(labels),
    }


def estimate_table(mech, n: int, method: str, point, interval, kind: str, labels=None):
    """The table of ``estimate``: one row per category; interval columns only where there is one,
    a ``label`` column beside ``category`` only where the categories are named."""
    from bayesldp.workflows.tables import Table

    names = ["category", "label"] if labels is not None else ["category"]
    columns, headers = [*names, "estimate"], [*names, "estimate"]
    values = [point]
    notes = []
    if interval is None:
        notes.append(
            f"note: {method} gives no interval (it has no standard errors); --method mle "
            "(normal interval) or posterior (credible interval) gives one"
        )
    else:
        columns += ["lower_5", "upper_95"]
        headers += ["5%", "95%"]
        values += list(interval)
    rows = [
        [x, *([] if labels is None else [labels[x]]), *(float(v[x]) for v in values)]
        for x in range(len(point))
    ]
    columns_note = None if interval is None else "90% (columns lower_5, upper_95)"
    meta = estimate_meta(mech, n, method, kind, columns_note, labels)
    title = [f"{mech!r}: {n:,} reports; {kind}"]
    formats = dict.fromkeys(columns[len(names) :], ".4f")
    return Table(columns, rows, title, notes, meta, headers, formats)
