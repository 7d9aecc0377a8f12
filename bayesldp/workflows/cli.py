"""The ``bayesldp`` command line."""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from bayesldp.errors import BayesLDPError


def _progress(quiet: bool):
    start = time.perf_counter()

    def say(message: str) -> None:
        if not quiet:
            print(f"[{time.perf_counter() - start:7.1f}s] {message}", file=sys.stderr, flush=True)

    return say


def cmd_run(args: argparse.Namespace) -> int:
    from bayesldp.workflows.spec import load_spec
    from bayesldp.workflows.study import run_study
    from bayesldp.workflows.study_report import markdown_table, summarise, write_report

    spec = load_spec(args.spec)
    out = Path(args.out) if args.out else Path("out") / spec["study"]["name"]
    say = _progress(args.quiet)
    say(f"study {spec['study']['name']!r} from {args.spec}")
    result = run_study(spec, seed=args.seed, quick=args.quick, progress=say)
    report = write_report(result, out, figures=not args.no_figures)
    print(markdown_table(summarise(result.metrics)))
    print(f"\nreport: {report}")
    return 0


def cmd_audit(args: argparse.Namespace) -> int:
    from bayesldp.audit import audit
    from bayesldp.mechanisms import make_mechanism

    mech = make_mechanism(args.mechanism, args.k, args.epsilon)
    print(f"{mech!r}")
    print(f"  realised epsilon (exact, from the channel): {mech.realised_epsilon():.12g}")
    result = audit(mech, trials=args.trials, alpha=args.alpha, rng=args.seed)
    verdict = "no violation found" if result.passed else "VIOLATION: lower bound exceeds epsilon"
    print(
        f"  empirical audit ({result.trials:,} trials per input, confidence {1 - args.alpha:g}): "
        f"epsilon >= {result.epsilon_lower_bound:.4f}  -> {verdict}"
    )
    return 0 if result.passed else 1


RECOMMEND_CANDIDATES = ("GRR", "OUE", "SUE", "OLH", "BLH", "HadamardResponse", "THE", "SHE")


def _report_bits(mech) -> str:
    """Communication cost of one report, as a short human-readable string."""
    import math

    name = type(mech).__name__
    if name in ("GRR", "RRRR"):
        return f"{math.ceil(math.log2(mech.k))} bits"
    if name in ("SUE", "OUE"):
        return f"{mech.k} bits"
    if name in ("OLH", "BLH"):
        return f"{math.ceil(math.log2(max(2, mech.g)))} bits + 62-bit hash seed"
    if name == "HadamardResponse":
        return f"{math.ceil(math.log2(mech.n_outputs))} bits"
    return f"{mech.k} floats"


def cmd_recommend(args: argparse.Namespace) -> int:
    from bayesldp.bounds import var_star
    from bayesldp.mechanisms import make_mechanism

    rows = []
    for name in RECOMMEND_CANDIDATES:
        mech = make_mechanism(name, args.k, args.epsilon)
        nvar = var_star(mech)
        rows.append((nvar, name, mech))
    rows.sort(key=lambda r: r[0])
    print(f"K = {args.k}, epsilon = {args.epsilon:g}, n = {args.n:,}")
    print("Var* is the variance of the unbiased estimate of a frequency near 0 (Wang et al. 2017).")
    print()
    print("| mechanism | n Var* | sd of one frequency | report size |")
    print("|---|---:|---:|---|")
    for nvar, name, mech in rows:
        print(f"| {name} | {nvar:.4g} | {(nvar / args.n) ** 0.5:.3g} | {_report_bits(mech)} |")
    best = rows[0]
    close = [name for nvar, name, _ in rows[1:] if nvar <= 1.01 * best[0]]
    note = f"; within 1%: {', '.join(close)} (compare report sizes)" if close else ""
    print(f"\nrecommended: {best[1]} (lowest variance{note})")
    return 0


def cmd_estimate(args: argparse.Namespace) -> int:
    import numpy as np

    from bayesldp.workflows.report_files import read_reports

    mech, tally = read_reports(
        args.reports,
        args.mechanism,
        k=args.k,
        epsilon=args.epsilon,
        g=args.g,
        subset=args.subset,
        eps1=args.eps1,
    )
    labels = list(range(tally.k))
    if args.method == "posterior":
        from bayesldp.bayes import fit, save_fit

        idata = fit(
            tally,
            prior=args.prior,
            method=args.fit_method,
            random_seed=args.seed,
            progressbar=not args.quiet,
        )
        draws = idata.posterior["theta"].values.reshape(-1, tally.k)
        point = draws.mean(axis=0)
        lower, upper = np.quantile(draws, [0.05, 0.95], axis=0)
        kind = f"posterior mean ({args.fit_method}), 90% credible interval"
        if args.save_posterior:
            save_fit(idata, args.save_posterior)
    else:
        from bayesldp.estimators import estimate

        result = estimate(tally, method=args.method)
        point = result.frequencies
        half = None if result.std_errors is None else 1.6448536269514722 * result.std_errors
        lower = point - half if half is not None else None
        upper = point + half if half is not None else None
        kind = f"{args.method}" + (", 90% normal interval" if half is not None else "")
    print(f"{mech!r}: {tally.n:,} reports; {kind}")
    print("| category | estimate | 5% | 95% |")
    print("|---:|---:|---:|---:|")
    for x in labels:
        lo = "" if lower is None else f"{lower[x]:.4f}"
        hi = "" if upper is None else f"{upper[x]:.4f}"
        print(f"| {x} | {point[x]:.4f} | {lo} | {hi} |")
    return 0


def cmd_survey(args: argparse.Namespace) -> int:
    from bayesldp.workflows.survey import run_survey

    out = Path(args.resume or args.out or "out/survey")
    return run_survey(args.spec, out, resume=args.resume is not None, quiet=args.quiet)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="bayesldp",
        description="Bayesian frequency estimation under local differential privacy",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run a study from a models/*.toml spec")
    run.add_argument("spec", help="path to the study spec (TOML)")
    run.add_argument("--out", help="output directory (default out/<study name>)")
    run.add_argument("--seed", type=int, help="override the spec's seed")
    run.add_argument("--quick", action="store_true", help="n/10 users and one repeat")
    run.add_argument("--no-figures", action="store_true", help="skip the PNG figures")
    run.add_argument("--quiet", action="store_true", help="no progress output")
    run.set_defaults(func=cmd_run)
    aud = sub.add_parser("audit", help="exact and empirical privacy check of a mechanism")
    aud.add_argument("mechanism", help="GRR, SUE, OUE, BLH, OLH, SHE, THE, HR, RRRR")
    aud.add_argument("--k", type=int, required=True, help="number of categories")
    aud.add_argument("--epsilon", type=float, required=True, help="privacy budget")
    aud.add_argument("--trials", type=int, default=200_000, help="perturbations per input")
    aud.add_argument("--alpha", type=float, default=1e-3, help="1 - confidence of the bound")
    aud.add_argument("--seed", type=int, default=0)
    aud.set_defaults(func=cmd_audit)
    rec = sub.add_parser("recommend", help="which mechanism gives the lowest error")
    rec.add_argument("--k", type=int, required=True, help="number of categories")
    rec.add_argument("--epsilon", type=float, required=True, help="privacy budget")
    rec.add_argument("--n", type=int, required=True, help="number of users")
    rec.set_defaults(func=cmd_recommend)
    est = sub.add_parser("estimate", help="estimate frequencies from collected reports")
    est.add_argument("reports", help="CSV or Parquet file of reports (see docs of io_reports)")
    est.add_argument("--mechanism", required=True, help="mechanism that produced the reports")
    est.add_argument("--k", type=int, required=True, help="number of categories")
    est.add_argument("--epsilon", type=float, required=True, help="privacy budget")
    est.add_argument("--g", type=int, help="OLH hash range")
    est.add_argument("--subset", type=int, nargs="*", help="RRRR subset S")
    est.add_argument("--eps1", type=float, help="RRRR first-stage budget")
    est.add_argument(
        "--method",
        default="norm_sub",
        help="an estimator name (oracle, norm_sub, mle, em, ...) or 'posterior'",
    )
    est.add_argument("--fit-method", default="auto", help="posterior method: auto, exact, ...")
    est.add_argument("--prior", type=float, default=1.0, help="symmetric Dirichlet prior")
    est.add_argument("--seed", type=int, default=0, help="seed of the posterior sampler")
    est.add_argument("--save-posterior", help="write the posterior to this netCDF file")
    est.add_argument("--quiet", action="store_true", help="no progress output")
    est.set_defaults(func=cmd_estimate)
    sur = sub.add_parser("survey", help="simulate an AdOBEst-LDP adaptive survey")
    sur.add_argument("spec", help="survey spec (TOML), e.g. models/survey.toml")
    sur.add_argument("--out", help="output directory (default out/survey)")
    sur.add_argument("--resume", metavar="DIR", help="continue the survey checkpointed in DIR")
    sur.add_argument("--quiet", action="store_true", help="no progress output")
    sur.set_defaults(func=cmd_survey)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``bayesldp`` command.

    Figures are written to files, so the command uses matplotlib's Agg backend unless the user
    chose one (``MPLBACKEND``); the library itself never selects a backend.
    """
    os.environ.setdefault("MPLBACKEND", "Agg")
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except BayesLDPError as exc:
        print(f"bayesldp: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
