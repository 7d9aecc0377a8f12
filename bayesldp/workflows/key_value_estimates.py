"""``bayesldp estimate --key-values``: PCKV's key frequencies and value means, not its joint
categories.

PCKV's categories are the (key, sign) pairs of the sampled pair; what people want are each key's
frequency ``f_k`` and mean value ``m_k`` (:meth:`bayesldp.PCKV.key_values`), and PCKV-PM's one
key's frequency and mean (:meth:`bayesldp.PCKVPM.key_value`).  ``--method posterior`` maps every
posterior draw, so the 90% credible intervals of ``f_k`` and ``m_k`` are exact posterior
quantiles; ``--method oracle`` gives Gu et al.'s estimators
(:meth:`~bayesldp.PCKV.unbiased_key_values`), the other methods map their point estimate.
"""

from __future__ import annotations

import argparse
import warnings
from typing import Any

import numpy as np

from bayesldp.errors import InvalidInputError
from bayesldp.workflows.estimate_tables import estimate_meta
from bayesldp.workflows.tables import Table

#: what ``--key-values`` says in ``--help``
KEY_VALUES_HELP = (
    "PCKV, PCKVPM: a table of each key's frequency and mean value (PCKVPM: its one key) "
    "instead of the joint categories; --labels then names the keys"
)


def key_value_table(args: argparse.Namespace, mech: Any, tally: Any, labels=None) -> Table:
    """The key table of ``bayesldp estimate --key-values`` (module docstring)."""
    if hasattr(mech, "key_values"):
        convert, keys = mech.key_values, mech.d
    elif hasattr(mech, "key_value"):
        convert, keys = mech.key_value, 1
        if labels is not None:
            raise InvalidInputError("--labels: PCKVPM estimates one key; leave --labels out")
    else:
        raise InvalidInputError(
            f"--key-values: only for PCKV and PCKVPM, not {type(mech).__name__}"
        )
    if labels is not None and len(labels) != keys:
        raise InvalidInputError(
            f"--labels: {len(labels)} names for the {keys} keys of {mech!r}; with "
            "--key-values they name the keys"
        )
    with warnings.catch_warnings():  # a key of no mass has no mean: NaN, said in a note
        warnings.simplefilter("ignore", RuntimeWarning)
        freq, mean, bounds, kind = _estimates(args, mech, tally, convert)
    freq, mean = np.atleast_1d(freq), np.atleast_1d(mean)
    names = ["key", "label"] if labels is not None else ["key"]
    columns, headers = [*names, "frequency"], [*names, "frequency"]
    if bounds is not None:
        columns += ["frequency_5", "frequency_95"]
        headers += ["5%", "95%"]
    columns.append("mean")
    headers.append("mean")
    if bounds is not None:
        columns += ["mean_5", "mean_95"]
        headers += ["5%", "95%"]
    rows = []
    for key in range(keys):
        row: list[Any] = [key, *([] if labels is None else [labels[key]]), float(freq[key])]
        if bounds is not None:
            row += [float(np.atleast_1d(b)[key]) for b in bounds[:2]]
        row.append(float(mean[key]))
        if bounds is not None:
            row += [float(np.atleast_1d(b)[key]) for b in bounds[2:]]
        rows.append(row)
    notes = []
    if bounds is None:
        notes.append(
            f"note: {args.method} gives no interval of the key frequencies and means; --method "
            "posterior gives 90% credible intervals"
        )
    if np.isnan(mean).any():
        notes.append("note: a mean of nan: the key has no estimated mass, so no mean")
    columns_note = None if bounds is None else "90% (columns *_5, *_95)"
    meta = estimate_meta(mech, tally.n, args.method, kind, columns_note, labels)
    title = [f"{mech!r}: {tally.n:,} reports; key frequencies and mean values; {kind}"]
    formats = dict.fromkeys(columns[len(names) :], ".4f")
    return Table(columns, rows, title, notes, meta, headers, formats)


def _estimates(args, mech, tally, convert):
    """``(frequency, mean, bounds or None, kind)``; bounds: the 5% and 95% quantiles of the
    frequencies, then of the means."""
    if args.method == "posterior":
        from bayesldp.bayes import save_fit
        from bayesldp.workflows.estimate_tables import posterior_fit, posterior_summary

        idata = posterior_fit(args, tally)
        if args.save_posterior:
            save_fit(idata, args.save_posterior)
        kind = posterior_summary(args, idata, tally.k)[2]
        draws = idata.posterior["theta"].values.reshape(-1, tally.k)
        freq, mean = convert(draws)
        bounds = (*np.quantile(freq, [0.05, 0.95], axis=0),
                  *np.nanquantile(mean, [0.05, 0.95], axis=0))  # fmt: skip
        return freq.mean(axis=0), np.nanmean(mean, axis=0), bounds, kind
    if args.method == "oracle" and hasattr(mech, "unbiased_key_values"):
        freq, mean = mech.unbiased_key_values(tally)
        return freq, mean, None, "oracle (Gu et al.'s unbiased key frequencies and means)"
    from bayesldp.estimators import estimate

    freq, mean = convert(estimate(tally, method=args.method).frequencies)
    return freq, mean, None, args.method
