"""``bayesldp estimate`` on a report file of several tallies: one per round or per attribute.

A file with ``user`` and ``round`` columns (:mod:`bayesldp.workflows.longitudinal_files`) gets
one estimate per round; a file of SPL, SMP or RS+FD reports
(:mod:`bayesldp.workflows.multidimensional_files`) one per attribute.  Every ``--method`` works
on each tally alone (``posterior``: :func:`bayesldp.fit` per round, or
:func:`~bayesldp.mechanisms.multidimensional.fit_marginals` per attribute); ``--method rounds``
fits every round at once under a random walk (:func:`bayesldp.fit_rounds`).  The output is one
table with a ``round`` (``attribute``) column for ``--output csv`` and ``json``, and one table
per round (attribute) for people.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from bayesldp.errors import InvalidInputError
from bayesldp.workflows.tables import Table, markdown_lines, print_table

#: the methods that give posteriors (``--save-posterior`` applies to them)
POSTERIORS = ("posterior", "rounds")
#: the multidimensional protocols in ``--mechanism``'s help
PROTOCOL_HELP = "or SPL, SMP, RSFD (several attributes: --k 3,4,2)"


def whole_number(text: str) -> int:
    """An option's whole number: ``1000``, ``1_000`` or ``1e3`` (the same number however it is
    written; what is too large for the machine is refused later, saying the limit)."""
    import decimal

    cleaned = text.strip().replace("_", "")
    try:
        return int(cleaned)
    except ValueError:
        pass
    try:
        value = decimal.Decimal(cleaned)
    except decimal.InvalidOperation:
        value = None
    if value is None or not value.is_finite() or value != value.to_integral_value():
        raise argparse.ArgumentTypeError(f"expected a whole number (1000, 1e3), got {text!r}")
    return int(value)


def k_option(text: str) -> int | tuple[int, ...]:
    """``--k``: one number, or (SPL, SMP, RSFD) one per attribute, comma-separated; each a
    :func:`whole_number` (``1e6`` is 1000000)."""
    parts = [part.strip() for part in text.split(",")]
    try:
        values = [whole_number(part) for part in parts]
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(
            f"expected a whole number of categories (1000, 1e3), or one per attribute (3,4,2), "
            f"got {text!r}"
        ) from None
    return values[0] if len(values) == 1 else tuple(values)


def add_grouped_options(parser: argparse.ArgumentParser) -> None:
    """``estimate``'s options of the multidimensional protocols and of the samplers."""
    parser.add_argument("--base", help="SPL, SMP, RSFD: each attribute's mechanism, GRR (the "
                        "default), SUE or OUE")  # fmt: skip
    parser.add_argument("--fake", help="RSFD with SUE or OUE: fake data 'zero' (default) or "
                        "'random'")  # fmt: skip
    parser.add_argument("--budget", choices=("record", "paper"), help="RSFD: 'record' (the "
                        "default: the whole record realises --epsilon) or 'paper' (Arcolezi et "
                        "al.'s nominal --epsilon: the whole record realises ln(d (e^eps - 1) + "
                        "1)); give the one the reports were perturbed with")  # fmt: skip
    parser.add_argument("--nodes", type=int, help="node sampling: the number of nodes, of "
                        "which the file holds the sampled ones' reports (each round's, in a "
                        "file of rounds); with --sampling")  # fmt: skip
    parser.add_argument("--sampling", type=float, help="node sampling: each node's probability "
                        "of being sampled; --method oracle (and the post-processings) then give "
                        "Biswas et al.'s unbiased estimator of --sampling-estimator")  # fmt: skip
    parser.add_argument("--sampling-estimator", choices=("g", "c_hat", "T"), default="g",
                        help="node sampling: the paper's estimator (default g)")  # fmt: skip
    for name, what in (("draws", "draws per chain"), ("tune", "warm-up steps per chain"),
                       ("chains", "chains")):  # fmt: skip
        parser.add_argument(f"--{name}", type=int, help=f"--method posterior or rounds: "
                            f"{what} (default: bayesldp.fit's, fit_rounds')")  # fmt: skip
    parser.add_argument("--target-accept", type=float, dest="target_accept",
                        help="--method posterior: the NUTS sampler's target acceptance rate, in "
                        "(0, 1) (default: bayesldp.fit's, 0.8; raise it if transitions "
                        "diverge)")  # fmt: skip


def node_sampling(args: argparse.Namespace, mech: Any):
    """``tally -> tally`` of one round of node sampling (``--nodes``, ``--sampling``): the
    base mechanism's tally with Biswas et al.'s oracle
    (:meth:`bayesldp.NodeSampling.tally_of_round`), or the identity without them."""
    if args.nodes is None and args.sampling is None:
        return lambda tally: tally
    if args.nodes is None or args.sampling is None:
        given, other = (
            ("--nodes", "--sampling") if args.sampling is None else ("--sampling", "--nodes")
        )
        raise InvalidInputError(f"{other}: node sampling needs both --nodes and --sampling "
                                f"({given} was given)")  # fmt: skip
    from bayesldp.mechanisms.sampling import NodeSampling

    sampler = NodeSampling(mech, pi=args.sampling)
    return lambda tally: sampler.tally_of_round(tally, args.nodes, args.sampling_estimator)


def _is_protocol(name: str | None) -> bool:
    from bayesldp.workflows.multidimensional_files import protocol_names

    return name is not None and name.lower() in protocol_names()


def _columns(path: str) -> list[str] | None:
    """The column names of one CSV or Parquet file, or None (not one readable file)."""
    import pandas as pd

    file = Path(path)
    if not file.is_file() or file.stat().st_size == 0:
        return None
    try:
        if file.suffix.lower() in (".parquet", ".pq"):
            from bayesldp._optional import require

            parquet = require("pyarrow.parquet", f"reading the Parquet file {file}")
            return list(parquet.read_schema(file).names)
        return [str(c) for c in pd.read_csv(file, nrows=0).columns]
    except Exception:  # unreadable: the one-file reader says why
        return None


def grouped_layout(args: argparse.Namespace) -> str | None:
    """``"attributes"`` (SPL, SMP, RSFD), ``"rounds"`` (a file with a ``round`` column, or
    ``--method rounds``) or None (one tally); checks the options that go with each."""
    if _is_protocol(args.mechanism):
        layout = "attributes"
    elif args.method == "rounds" or "round" in (_columns(args.reports) or ()):
        layout = "rounds"
    else:
        layout = None
    if layout != "attributes":
        if isinstance(args.k, tuple):
            raise InvalidInputError(
                f"--k: {','.join(map(str, args.k))} lists one domain size per attribute, for "
                "SPL, SMP and RSFD; give one number"
            )
        for name in ("base", "fake", "budget"):
            if getattr(args, name, None) is not None:
                raise InvalidInputError(f"--{name}: only for SPL, SMP and RSFD")
    if layout is None:
        return None
    if layout == "attributes" and (args.nodes is not None or args.sampling is not None):
        raise InvalidInputError("--nodes, --sampling: node sampling is for one tally or rounds")
    if args.key_values:
        raise InvalidInputError(f"--key-values: reads one tally, not a file of {layout}")
    if args.scheduler is not None or Path(args.reports).is_dir():
        what = "rounds" if layout == "rounds" else "attributes"
        raise InvalidInputError(
            f"reports: a file of {what} is read as one CSV or Parquet file (not a directory, "
            f"glob or tally store, and without --scheduler), got {args.reports}"
        )
    missing = [f"--{n}" for n in ("mechanism", "k", "epsilon") if getattr(args, n) is None]
    if missing:
        raise InvalidInputError(f"{', '.join(missing)}: required for a file of {layout}")
    if layout == "attributes":
        if args.method == "rounds":
            raise InvalidInputError("--method: rounds fits a file of rounds, not of attributes")
        if args.labels is not None or args.labels_file is not None:
            raise InvalidInputError(
                "--labels: names one set of categories; SPL, SMP and RSFD have one per attribute"
            )
        if not isinstance(args.k, tuple):
            raise InvalidInputError(
                f"--k: {args.mechanism} needs one domain size per attribute, comma-separated "
                f"(e.g. 3,4,2), got {args.k}"
            )
    return layout


def estimate_grouped(args: argparse.Namespace, layout: str, labels=None) -> int:
    """``bayesldp estimate`` on a file of rounds or attributes: read, estimate, print."""
    from bayesldp.mechanisms import all_parameters, make_mechanism

    params = {name: getattr(args, name, None) for name in all_parameters()}
    if layout == "rounds":
        from bayesldp.workflows.longitudinal_files import read_rounds

        owner = make_mechanism(args.mechanism, args.k, args.epsilon, **params)
        sampled = node_sampling(args, owner)
        keys, tallies, users = read_rounds(owner, args.reports, users=True)
        if args.method == "rounds":
            _warn_panel(users)
        tallies = [sampled(tally) for tally in tallies]
        mechs = [tally.mechanism for tally in tallies]
    else:
        from bayesldp.workflows.multidimensional_files import make_protocol, read_attributes

        given = sorted(name for name, value in params.items() if value is not None)
        if given:
            raise InvalidInputError(f"--{given[0].replace('_', '-')}: SPL, SMP and RSFD take "
                                    "--base, --fake and --budget only")  # fmt: skip
        owner = make_protocol(args.mechanism, args.k, args.epsilon, args.base, args.fake,
                              getattr(args, "budget", None))  # fmt: skip
        tallies = read_attributes(owner, args.reports)
        keys, mechs = list(range(owner.d)), list(owner.marginals)
    notes: list[str] = []
    if args.method == "rounds":
        results = _random_walk(args, keys, tallies, labels, notes)
    elif args.method == "posterior":
        results = _posteriors(args, layout, keys, tallies, labels)
    else:
        from bayesldp.workflows.estimate_tables import frequentist_estimate

        results = [frequentist_estimate(args.method, tally) for tally in tallies]
    table, headings = _combined(args, layout, owner, keys, mechs, tallies, results, labels)
    if layout == "attributes":
        notes.append(f"privacy: {owner.guarantee()}")
    table.notes = notes + table.notes
    print_grouped(table, layout[:-1], headings, args.output)
    return 0


def _posteriors(args: argparse.Namespace, layout: str, keys, tallies, labels) -> list:
    """Each tally's posterior on its own: :func:`bayesldp.fit` per round, seeds ``--seed`` +
    the round's position, as :func:`~bayesldp.mechanisms.multidimensional.fit_marginals`
    gives each attribute's (which it fits)."""
    from bayesldp.bayes import save_fit
    from bayesldp.bayes.io import check_replaceable
    from bayesldp.mechanisms.multidimensional import fit_marginals
    from bayesldp.workflows.estimate_tables import posterior_options, posterior_summary

    if args.save_posterior:  # every file it will write, before the fits
        for key in keys:
            check_replaceable(_numbered(args.save_posterior, layout[:-1], key), "--save-posterior")
    if layout == "rounds":
        from bayesldp.workflows.estimate_tables import posterior_fit

        fits = [posterior_fit(args, tally, labels, seed=args.seed + i)
                for i, tally in enumerate(tallies)]  # fmt: skip
    else:
        found = fit_marginals(tallies, keys, prior=args.prior, method=args.fit_method,
                              random_seed=args.seed, progressbar=None if not args.quiet else False,
                              **posterior_options(args))  # fmt: skip
        fits = [found[key] for key in keys]
    if args.save_posterior:
        for key, idata in zip(keys, fits, strict=True):
            save_fit(idata, _numbered(args.save_posterior, layout[:-1], key))
    return [
        posterior_summary(args, idata, tally.k) for idata, tally in zip(fits, tallies, strict=True)
    ]


def _warn_panel(users: list) -> None:
    """One line on stderr when the rounds share users: fit_rounds' intervals under-cover."""
    import sys

    from bayesldp.bayes.dynamic import panel_message, repeated_users

    repeated, total = repeated_users(users)
    if repeated:
        print(f"bayesldp: warning: --method rounds: {panel_message(repeated, total)}",
              file=sys.stderr)  # fmt: skip


def _random_walk(args: argparse.Namespace, keys, tallies, labels, notes: list[str]) -> list:
    """Every round's posterior at once under :func:`bayesldp.fit_rounds`' random walk."""
    import numpy as np

    from bayesldp.bayes import save_fit
    from bayesldp.bayes.dynamic import fit_rounds, summarize_rounds
    from bayesldp.workflows.estimate_tables import posterior_options

    if args.prior is not None:
        raise InvalidInputError("--prior: --method rounds has its own prior (a random walk, "
                                "bayesldp.RandomWalkPrior); leave --prior out")  # fmt: skip
    if args.fit_method != "auto":
        raise InvalidInputError("--fit-method: --method rounds samples with NUTS; leave it out")
    if len(tallies) < 2:
        raise InvalidInputError(f"--method rounds: {args.reports} holds one round "
                                f"({keys[0]}); a random walk needs two or more")  # fmt: skip
    idata = fit_rounds(tallies, random_seed=args.seed, labels=labels, round_labels=keys,
                       progressbar=None if not args.quiet else False,
                       **posterior_options(args))  # fmt: skip
    if args.save_posterior:
        save_fit(idata, args.save_posterior)
    summary = summarize_rounds(idata)
    kind = "posterior mean under a random walk across rounds (fit_rounds), 90% credible interval"
    sigma = idata.posterior["sigma"].values.ravel()
    low, high = np.quantile(sigma, [0.05, 0.95])
    notes.append(f"step size sigma (log-frequency per round): posterior mean {sigma.mean():.3g}, "
                 f"90% interval {low:.3g} to {high:.3g}")  # fmt: skip
    return [
        (summary["mean"].values[i], (summary["lower"].values[i], summary["upper"].values[i]), kind)
        for i in range(len(tallies))
    ]


def _combined(args, layout, owner, keys, mechs, tallies, results, labels):
    """One table of every round (attribute), its key and reports first, and each one's
    heading for people."""
    from bayesldp.workflows.estimate_tables import estimate_table

    key = layout[:-1]
    parts = [estimate_table(mech, tally.n, args.method, *result, labels)
             for mech, tally, result in zip(mechs, tallies, results, strict=True)]  # fmt: skip
    first = parts[0]
    rows = [[k, tally.n, *row] for k, tally, part in zip(keys, tallies, parts, strict=True)
            for row in part.rows]  # fmt: skip
    total = sum(tally.n for tally in tallies)
    kind = results[0][2]
    if layout == "rounds":
        title = f"{owner!r}: {len(keys)} rounds ({keys[0]}..{keys[-1]}), {total:,} reports; {kind}"
        if args.nodes is not None:
            title += (f" (node sampling: {args.nodes:,} nodes a round, pi = {args.sampling:g}, "
                      f"estimator {args.sampling_estimator})")  # fmt: skip
        groups = [{"round": k, "reports": t.n} for k, t in zip(keys, tallies, strict=True)]
        headings = {k: f"round {k}: {t.n:,} reports" for k, t in zip(keys, tallies, strict=True)}
    else:
        title = f"{owner!r}: {total:,} reports of {owner.d} attributes; {kind}"
        groups = [{"attribute": k, "k": m.k, "reports": t.n, "mechanism": repr(m)}
                  for k, m, t in zip(keys, mechs, tallies, strict=True)]  # fmt: skip
        headings = {k: f"attribute {k} (k = {m.k}; {m!r}): {t.n:,} reports"
                    for k, m, t in zip(keys, mechs, tallies, strict=True)}  # fmt: skip
    meta = {**first.meta, "mechanism": type(owner).__name__, "parameters": owner.params(),
            "reports": total, "estimate": kind, f"{key}s": groups}  # fmt: skip
    table = Table([key, "reports", *first.columns], rows, [title], first.notes, meta,
                  [key, "reports", *(first.headers or first.columns)], first.formats)  # fmt: skip
    return table, headings


def _numbered(path: str, word: str, key: Any) -> Path:
    """``post.nc`` -> ``post_round3.nc``: one file per round (attribute)."""
    path = Path(path)
    return path.with_name(f"{path.stem}_{word}{key}{path.suffix}")


def print_grouped(table: Table, key: str, headings: dict[Any, str], output: str) -> None:
    """``table`` (its first columns ``key`` and ``reports``) as one table (csv, json) or, for
    people, one markdown table per value of ``key`` under its heading."""
    if output != "table":
        print_table(table, output)
        return
    lines = [*table.title]
    index = table.columns.index(key)
    kept = [i for i, c in enumerate(table.columns) if c not in (key, "reports")]
    headers = table.headers or table.columns
    for value, heading in headings.items():
        rows = [[row[i] for i in kept] for row in table.rows if row[index] == value]
        part = Table([table.columns[i] for i in kept], rows, [heading],
                     headers=[headers[i] for i in kept], formats=table.formats)  # fmt: skip
        lines += ["", *markdown_lines(part)]
    if table.notes:
        lines += ["", *table.notes]
    print("\n".join(lines))
