"""The ``bayesldp`` command line."""

from __future__ import annotations

import argparse
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
    from bayesldp.report import markdown_table, summarise, write_report
    from bayesldp.spec import load_spec
    from bayesldp.study import run_study

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
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``bayesldp`` command."""
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except BayesLDPError as exc:
        print(f"bayesldp: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
