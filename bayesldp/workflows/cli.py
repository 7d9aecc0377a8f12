"""The ``bayesldp`` command line."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from bayesldp.errors import BayesLDPError, InvalidInputError
from bayesldp.workflows.cli_session import (
    answering_interrupts,
    interrupts_in_callbacks,
    one_line_warnings,
    talk_while_compiling,
)
from bayesldp.workflows.outputs import (
    directory_lock,
    recover_staging,
    writable_directory,
    writable_file,
)
from bayesldp.workflows.run_command import cmd_run
from bayesldp.workflows.tables import OUTPUT_HELP, OUTPUTS


def _mechanism_params(args: argparse.Namespace) -> dict:
    """The mechanism parameters given on the command line (the registry's option names)."""
    from bayesldp.mechanisms import all_parameters

    return {name: getattr(args, name, None) for name in all_parameters()}


def _add_mechanism_options(
    parser: argparse.ArgumentParser, required: bool = True, multi_k: bool = False
) -> None:
    """``--k``, ``--epsilon`` and one option per parameter a registered mechanism declares
    (``multi_k``: ``--k`` may list one domain size per attribute)."""
    from bayesldp.mechanisms import all_parameters

    if multi_k:  # estimate: SPL, SMP and RSFD take one domain size per attribute
        from bayesldp.workflows.grouped_estimates import k_option

        parser.add_argument(
            "--k",
            type=k_option,
            required=required,
            help="number of categories (PCKV: keys; PCKV-PM: value bins; SPL, "
            "SMP, RSFD: each attribute's, comma-separated: 3,4,2)",
        )
    else:
        from bayesldp.workflows.grouped_estimates import whole_number

        parser.add_argument(
            "--k",
            type=whole_number,
            required=required,
            help="number of categories (PCKV: keys; PCKV-PM: value bins)",
        )
    parser.add_argument("--epsilon", type=float, required=required, help="privacy budget")
    for param in all_parameters().values():
        flag = f"--{param.name.replace('_', '-')}"  # --num-bits, as --fit-method
        if param.kind is bool:  # a flag: given means True, absent leaves the default
            kwargs: dict = {"action": "store_true", "default": None}
        else:  # "--subset" alone is the empty list
            kind = param.kind
            if kind is int:  # 1e9 reads as 10**9, as --k does
                from bayesldp.workflows.grouped_estimates import whole_number as kind
            kwargs = {"type": kind, "nargs": "*" if param.many else None}
        parser.add_argument(flag, dest=param.name, help=_option_help(param.name), **kwargs)
        if "_" in param.name:  # the old spelling keeps working, unlisted
            parser.add_argument(f"--{param.name}", dest=param.name, help=argparse.SUPPRESS,
                                **kwargs)  # fmt: skip


def _option_help(name: str) -> str:
    """The help of a mechanism option: its declared help and which mechanisms take it."""
    from bayesldp.mechanisms import names, parameters

    takers = {mech: p for mech in names() for p in parameters(mech) if p.name == name}
    by_help: dict[str, list[str]] = {}  # mechanisms that mean different things by one name
    for mech, p in takers.items():
        text = p.help  # "RAPPOR: RAPPOR Bloom filter bits" -> "RAPPOR: Bloom filter bits"
        if text.lower().startswith((mech.lower() + " ", mech.lower() + ":")):
            text = text[len(mech) :].lstrip(": ")
        by_help.setdefault(text, []).append(f"{mech} (required)" if p.required else mech)
    empty = "; the option alone gives the empty list" if next(iter(takers.values())).many else ""
    return "; ".join(f"{', '.join(where)}: {text}" for text, where in by_help.items()) + empty


def cmd_audit(args: argparse.Namespace) -> int:
    from bayesldp.audit import audit
    from bayesldp.mechanisms import make_mechanism

    mech = make_mechanism(args.mechanism, args.k, args.epsilon, **_mechanism_params(args))
    print(f"{mech!r}")
    print(
        f"  realised epsilon (exact, from the channel or density): {mech.realised_epsilon():.12g}"
    )
    result = audit(mech, trials=args.trials, alpha=args.alpha, rng=args.seed)
    verdict = "no violation found" if result.passed else "VIOLATION: lower bound exceeds epsilon"
    bound = result.epsilon_lower_bound
    found = (
        f"epsilon >= {bound:.4f}"
        if bound > 0
        else "no positive lower bound (too few trials to tell the inputs apart; raise --trials)"
    )
    print(
        f"  empirical audit ({result.trials:,} trials per input, confidence {1 - args.alpha:g}): "
        f"{found}  -> {verdict}"
    )
    return 0 if result.passed else 1


def recommend_candidates() -> tuple[str, ...]:
    """The registered mechanisms that ``recommend`` ranks (their class says so)."""
    from bayesldp.workflows.recommend import candidates

    return candidates()


def cmd_recommend(args: argparse.Namespace) -> int:
    """``bayesldp recommend``: mechanisms ranked by the expected error of ``--method``."""
    from bayesldp._validation import check_int
    from bayesldp.workflows.recommend_record import ranking
    from bayesldp.workflows.tables import print_table

    check_int(args.n, "--n", 1)
    print_table(ranking(args.k, args.epsilon, args.n, args.method), args.output)
    return 0


def cmd_estimate(args: argparse.Namespace) -> int:
    """``bayesldp estimate REPORTS``: frequencies (and intervals where the method gives them)."""
    from bayesldp.bayes.io import check_replaceable
    from bayesldp.estimators import METHODS
    from bayesldp.workflows.estimate_tables import (
        estimate_table,
        frequentist_estimate,
        posterior_estimate,
    )
    from bayesldp.workflows.grouped_estimates import (
        POSTERIORS,
        estimate_grouped,
        grouped_layout,
        node_sampling,
    )
    from bayesldp.workflows.heavy_hitter_files import estimate_heavy_hitters, is_heavy_hitter
    from bayesldp.workflows.tables import print_table

    if args.save_posterior:  # before any work: a posterior replaces only an older one
        check_replaceable(writable_file(args.save_posterior, "--save-posterior"),
                          "--save-posterior")  # fmt: skip
    if is_heavy_hitter(args.mechanism):  # PEM, TreeHist, SFP: found items, not K categories
        return estimate_heavy_hitters(args)
    args.method = "pretest" if args.method is None else args.method
    if args.method not in (*METHODS, *POSTERIORS):  # before any file is read
        valid = ", ".join([*METHODS, *POSTERIORS])
        raise InvalidInputError(f"--method: unknown method {args.method!r}; valid: {valid}")
    if args.save_posterior and args.method not in POSTERIORS:
        raise InvalidInputError("--save-posterior: only with --method posterior or rounds")
    layout = grouped_layout(args)  # per round or per attribute: several tallies
    labels = None if layout == "attributes" else _labels(args)  # before any file is read
    if layout is not None:
        return estimate_grouped(args, layout, labels)
    mech, tally = _read_tally(args)
    tally = node_sampling(args, mech)(tally)  # --nodes, --sampling: the paper's oracle
    mech = tally.mechanism if args.nodes is not None else mech
    if args.key_values:  # PCKV's keys, not its joint categories
        from bayesldp.workflows.key_value_estimates import key_value_table

        print_table(key_value_table(args, mech, tally, labels), args.output)
        return 0
    if labels is not None and len(labels) != tally.k:  # PCKV: --k is its keys, not K
        keys = "; --key-values names its keys" if hasattr(mech, "key_values") else ""
        raise InvalidInputError(
            f"--labels: {len(labels)} names, but {mech!r} has {tally.k} categories{keys}"
        )
    if args.method == "posterior":
        point, interval, kind = posterior_estimate(args, tally, labels)
    else:
        point, interval, kind = frequentist_estimate(args.method, tally)
    table = estimate_table(mech, tally.n, args.method, point, interval, kind, labels)
    print_table(table, args.output)
    return 0


def _read_tally(args: argparse.Namespace):
    """``(mechanism, tally)`` of ``estimate``'s REPORTS: a tally store (its own mechanism), one
    file (read here), or a directory, glob or several files (tallied on Dask, a batch of files
    per worker; ``--scheduler`` picks where)."""
    from bayesldp.mechanisms import make_mechanism
    from bayesldp.workflows.dask_tally import report_files, tally_reports
    from bayesldp.workflows.report_files import tally_file
    from bayesldp.workflows.tally_store import TallyStore, is_tally_store

    if is_tally_store(args.reports):
        store = TallyStore(args.reports)
        _check_store_options(args, store)
        return store.mechanism, store.tally()
    missing = [f"--{name}" for name in ("mechanism", "k", "epsilon") if getattr(args, name) is None]
    if missing:
        raise InvalidInputError(
            f"{', '.join(missing)}: required unless REPORTS is a tally store (bayesldp append)"
        )
    mech = make_mechanism(args.mechanism, args.k, args.epsilon, **_mechanism_params(args))
    files = report_files(args.reports)
    if len(files) == 1 and args.scheduler is None:
        return mech, tally_file(mech, files[0])
    scheduler = None if args.scheduler in (None, "local") else args.scheduler
    progress = not args.quiet and sys.stderr.isatty()  # a bar on a terminal, never on stdout
    return mech, tally_reports(files, mech, scheduler=scheduler, progress=progress)


def _check_store_options(args: argparse.Namespace, store) -> None:
    """A tally store knows its mechanism: every mechanism option given beside it (``--k``,
    ``--epsilon``, ``--g``, ``--subset``, ...) must agree with it."""
    from bayesldp.mechanisms import canonical_name, rebuild_mechanism

    mech = store.mechanism
    given = {"mechanism": args.mechanism, "k": args.k, "epsilon": args.epsilon}
    stored = {"mechanism": type(mech).__name__, "k": mech.k, "epsilon": mech.epsilon}
    if given["mechanism"] is not None:
        given["mechanism"] = canonical_name(given["mechanism"])
    for name, value in given.items():
        if value is not None and value != stored[name]:
            raise InvalidInputError(
                f"--{name}: {value!r} disagrees with the tally store {store.path}, whose reports "
                f"were collected with {name} = {stored[name]!r} (leave the option out)"
            )
    params = mech.params()
    for name, value in _mechanism_params(args).items():
        if value is None:
            continue
        flag = f"--{name.replace('_', '-')}"
        if name not in params:
            raise InvalidInputError(
                f"{flag}: the tally store {store.path} holds reports of {mech!r}, which takes no "
                f"{flag} (leave the option out)"
            )
        try:
            agrees = rebuild_mechanism(stored["mechanism"], {**params, name: value}) == mech
        except BayesLDPError:
            agrees = False
        if not agrees:
            raise InvalidInputError(
                f"{flag}: {value!r} disagrees with the tally store {store.path}, whose reports "
                f"were collected with {name} = {params[name]!r} (leave the option out)"
            )
    if args.scheduler is not None:
        raise InvalidInputError("--scheduler: a tally store is already tallied; leave it out")


def cmd_append(args: argparse.Namespace) -> int:
    """``bayesldp append STORE FILES...``: count report files into a durable tally store."""
    from bayesldp.mechanisms import make_mechanism
    from bayesldp.workflows.tables import Table, print_table
    from bayesldp.workflows.tally_store import TallyStore, is_tally_store

    batch = {"batch_id": args.batch_id, "distinct": args.distinct}
    if is_tally_store(args.store):
        store = TallyStore(args.store)
        _check_store_options(args, store)
        records = store.append(args.files, **batch)
    else:  # created with its first files in one step, under the store's lock
        missing = [f"--{n}" for n in ("mechanism", "k", "epsilon") if getattr(args, n) is None]
        if missing:
            raise InvalidInputError(
                f"{', '.join(missing)}: required to create the new tally store {args.store}"
            )
        mech = make_mechanism(args.mechanism, args.k, args.epsilon, **_mechanism_params(args))
        store, records = TallyStore.append_to(args.store, args.files, mech, **batch)
    columns = ["name", "reports", "status", "note"]
    table = Table(
        columns,
        [[r[c] if r[c] is not None else "" for c in columns] for r in records],
        title=[f"tally store {store.path}: {store.tally().n} reports in all"],
        meta={"store": str(store.path), "mechanism": repr(store.mechanism)},
    )
    print_table(table, args.output)
    return 0


def _labels(args: argparse.Namespace) -> tuple[str, ...] | None:
    """The category names of ``--labels a,b,c`` or ``--labels-file`` (one per line), checked:
    ``--k`` distinct non-empty strings (spaces around each are dropped)."""
    from bayesldp._validation import check_labels

    if args.labels is not None:
        return check_labels([label.strip() for label in args.labels.split(",")], args.k, "--labels")
    if args.labels_file is None:
        return None
    path = Path(args.labels_file)
    if not path.is_file():
        raise InvalidInputError(f"--labels-file: no such file {path}")
    try:
        lines = path.read_text(encoding="utf-8-sig").splitlines()  # a BOM (Notepad) is dropped
    except UnicodeDecodeError as exc:
        raise InvalidInputError(f"--labels-file: {path} is not UTF-8 text: {exc}") from None
    except OSError as exc:
        raise InvalidInputError(f"--labels-file: cannot read {path}: {exc.strerror}") from None
    return check_labels([line.strip() for line in lines], args.k, f"--labels-file {path}: labels")


def _prior_option(text: str) -> float | str:
    """``--prior``: "adaptive", "smooth" or a number (``fit`` checks that it is > 0)."""
    if text.strip().lower() in ("adaptive", "smooth"):
        return text.strip().lower()
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a number, 'adaptive' or 'smooth', got {text!r}"
        ) from None


def cmd_survey(args: argparse.Namespace) -> int:
    from bayesldp.workflows.spec import load_spec
    from bayesldp.workflows.survey import run_survey

    spec = load_spec(args.spec, kind="survey")
    if args.resume is not None and not Path(args.resume).is_dir():
        raise InvalidInputError(f"--resume: {args.resume} is not a directory; nothing to resume")
    out = writable_directory(args.resume or args.out or "out/survey")
    with directory_lock(out):
        recover_staging(out)  # a killed run's results: finished moving, or removed
        return run_survey(spec, out, resume=args.resume is not None, quiet=args.quiet)


def package_version() -> str:
    """The installed distribution's version (importlib.metadata), the one pip reports."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("bayesldp")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown (not installed)"


def _add_recommend(sub) -> None:
    """The ``recommend`` subcommand; its help says exactly which quantity is ranked."""
    from bayesldp.workflows.grouped_estimates import k_option
    from bayesldp.workflows.recommend import METHODS, RANKED, RECORD_HELP, unranked

    ranked = "; ".join(f"--method {m}: {RANKED[m]}" for m in METHODS)
    rec = sub.add_parser(
        "recommend",
        help="which mechanism gives the lowest expected error for an estimator",
        description=f"Ranks the mechanisms by the expected error of the estimator you will run. "
        f"{ranked}. Each scales as 1/n, so --n sets the errors shown, not the order. "
        f"Not ranked: {', '.join(unranked())} (numerical, key-value and longitudinal data, "
        "sketches, RAPPOR's strings, the adaptive survey's channel, and variants of a ranked "
        f"mechanism; each class's RECOMMEND says why). {RECORD_HELP}",
    )
    rec.add_argument("--k", type=k_option, required=True, help="number of categories, or each "
                     "attribute's, comma-separated (3,4,2)")  # fmt: skip
    rec.add_argument("--epsilon", type=float, required=True, help="privacy budget")
    from bayesldp.workflows.grouped_estimates import whole_number

    rec.add_argument("--n", type=whole_number, required=True, help="number of users (>= 1)")
    rec.add_argument(
        "--method",
        choices=METHODS,
        default=METHODS[0],
        help="the estimator you will run (default %(default)s; posterior ranks as mle)",
    )
    rec.add_argument("--output", choices=OUTPUTS, default="table", help=OUTPUT_HELP)
    rec.set_defaults(func=cmd_recommend)


#: the closing paragraph of ``estimate --help``: what labels do, and why they are an option
LABELS_HELP = """\
category labels:
  Reports hold category numbers 0..K-1 (or the mechanism's encoding of them), whatever the
  mechanism; --labels a,b,c (or --labels-file, one name per line) names them in the order of
  those numbers. The table, --output csv and --output json then get a label column beside
  category (json also lists them under "labels"), and --save-posterior names the posterior's
  category coordinate. In Python, bayesldp.encode(values, categories) turns named values into
  the numbers before perturbing."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="bayesldp",
        description="Bayesian frequency estimation under local differential privacy",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {package_version()}")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser(
        "run",
        help="run a models/*.toml spec of any kind: study, survey, grid, accuracy, rounds, "
        "attributes, heavy_hitters",
    )
    run.add_argument("spec", help="path to the spec (TOML)")
    run.add_argument("--out", help="output directory (default out/<name>)")
    run.add_argument("--seed", type=int, help="override the spec's seed")
    run.add_argument(
        "--quick",
        action="store_true",
        help="a small run: n/10 users and one repeat (2 repeats for accuracy)",
    )
    run.add_argument(
        "--full", action="store_true", help="grid: the paper's size; accuracy: the .full settings"
    )
    run.add_argument("--no-figures", action="store_true", help="skip the PNG figures")
    run.add_argument("--quiet", action="store_true", help="no progress output")
    run.set_defaults(func=cmd_run)
    from bayesldp.mechanisms.registry import ALIASES, names

    aliases = ", ".join(f"{alias} = {name}" for alias, name in ALIASES.items())
    mechanisms = f"one of {', '.join(names())} (case-insensitive; {aliases})"
    aud = sub.add_parser("audit", help="exact and empirical privacy check of a mechanism")
    aud.add_argument("mechanism", help=mechanisms)
    _add_mechanism_options(aud)
    from bayesldp.workflows.grouped_estimates import whole_number

    aud.add_argument("--trials", type=whole_number, default=200_000,
                     help="perturbations per input")  # fmt: skip
    aud.add_argument("--alpha", type=float, default=1e-3, help="1 - confidence of the bound")
    aud.add_argument("--seed", type=int, default=0, help="seed of the audit's trials (default 0)")
    aud.set_defaults(func=cmd_audit)
    _add_recommend(sub)
    from bayesldp.workflows import report_files

    est = sub.add_parser(
        "estimate",
        help="estimate frequencies from collected reports",
        epilog="report file layouts (columns, by mechanism):\n"
        + report_files.layouts()
        + "\n\n"
        + LABELS_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    est.add_argument(
        "reports",
        help="a CSV or Parquet file of reports (layouts below); a directory or a quoted glob of "
        "such files (tallied on Dask, a batch of files per worker); or a tally store "
        "(bayesldp append), which knows its mechanism",
    )
    from bayesldp.workflows.grouped_estimates import PROTOCOL_HELP, add_grouped_options

    est.add_argument("--mechanism", help=mechanisms + f"; {PROTOCOL_HELP}; or PEM, TreeHist, SFP "
                     "(heavy hitters: --k items to find) (required unless REPORTS is a "
                     "store)")  # fmt: skip
    _add_mechanism_options(est, required=False, multi_k=True)
    add_grouped_options(est)
    from bayesldp.workflows.heavy_hitter_files import add_heavy_hitter_options

    add_heavy_hitter_options(est)
    est.add_argument(
        "--scheduler",
        help="where to tally several files: local (a dask.distributed LocalCluster, one worker "
        "per core; the default for a directory or glob), threads, synchronous, or a scheduler "
        "address such as tcp://10.0.0.5:8786",
    )
    est.add_argument(
        "--method",
        default=None,
        help="an estimator name (pretest, norm_sub, oracle, mle, em, ...) or 'posterior': the "
        "posterior mean with its 90%% credible interval (bayesldp.fit; seconds, after a "
        "one-time compile of the sampler's kernels; on large tallies of one row per report, "
        "unary or hashing mechanisms, fit takes a Laplace approximation that may warn); or, "
        "for a file of rounds, 'rounds': every round's posterior under a random walk "
        "(bayesldp.fit_rounds). Default pretest (bayesldp.estimate's: the uniform answer "
        "unless the reports reject uniformity, Norm-Sub otherwise): no sampler and no wait, "
        "but no "
        "interval; mle gives a normal one. PEM, TreeHist, SFP: oracle (the default) or posterior",
    )
    est.add_argument("--fit-method", default="auto", help="posterior method: auto, exact, ...")
    est.add_argument(
        "--prior",
        type=_prior_option,
        default=None,
        help="the posterior's prior: a symmetric Dirichlet's concentration, or 'adaptive' (the "
        "concentration learnt from the data: bayesldp.AdaptiveDirichlet), or 'smooth' (ordered "
        "bins of numerical data: bayesldp.SmoothDensity); default: fit's ('adaptive' for "
        "categories, 'smooth' for numerical mechanisms)",
    )
    est.add_argument("--seed", type=int, default=0, help="seed of the posterior sampler")
    est.add_argument("--save-posterior", help="write the posterior to this netCDF file")
    est.add_argument("--quiet", action="store_true", help="no progress output")
    est.add_argument("--output", choices=OUTPUTS, default="table", help=OUTPUT_HELP)
    from bayesldp.workflows.key_value_estimates import KEY_VALUES_HELP

    est.add_argument("--key-values", action="store_true", help=KEY_VALUES_HELP)
    named = est.add_mutually_exclusive_group()
    named.add_argument(
        "--labels",
        metavar="A,B,C",
        help="names of categories 0..K-1, comma-separated (K distinct names; see below)",
    )
    named.add_argument(
        "--labels-file",
        metavar="FILE",
        help="a text file of the category names, one per line (for names with commas)",
    )
    est.set_defaults(func=cmd_estimate)
    app = sub.add_parser(
        "append",
        help="count report files into a durable tally store (created on first use)",
        description="Tally report files into STORE, one atomic step (a new STORE appears with "
        "its first files counted, or not at all; a crash leaves the previous tally intact). "
        "Each file is a batch, named by --batch-id or by its path without the suffix: under a "
        "name counted before, the same rows (however saved: CRLF, BOM, column order, Parquet) "
        "count nothing, those rows followed by new ones count only the new ones, and other "
        "content is refused. A new name is a new batch, unless its first rows repeat a "
        "counted batch's with a chance below one in a billion: then it is refused as a copy, "
        "naming the other batch (--distinct counts it anyway). Two appends take turns. "
        "`bayesldp estimate STORE` reads it.",
    )
    app.add_argument("store", help="the tally store directory")
    app.add_argument("files", nargs="+", help="CSV or Parquet report files")
    app.add_argument(
        "--batch-id",
        metavar="NAME",
        help="the batch these files are (snapshots of one log, in order; default: each file's "
        "path without its suffix)",
    )
    app.add_argument(
        "--distinct",
        action="store_true",
        help="count the files as new batches even where their first rows repeat a counted "
        "batch's (new reports that happen to match)",
    )
    app.add_argument("--mechanism", help=mechanisms + " (only to create the store)")
    _add_mechanism_options(app, required=False)
    app.add_argument("--output", choices=OUTPUTS, default="table", help=OUTPUT_HELP)
    app.set_defaults(func=cmd_append, scheduler=None)
    sur = sub.add_parser("survey", help="simulate an AdOBEst-LDP adaptive survey")
    sur.add_argument("spec", help="survey spec (TOML), e.g. models/survey.toml")
    sur.add_argument("--out", help="output directory (default out/survey)")
    sur.add_argument("--resume", metavar="DIR", help="continue the survey checkpointed in DIR")
    sur.add_argument("--quiet", action="store_true", help="no progress output")
    sur.set_defaults(func=cmd_survey)
    from bayesldp.workflows.serve import add_parser as add_serve

    add_serve(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``bayesldp`` command.

    Figures are written to files, so the command uses matplotlib's Agg backend unless the user
    chose one (``MPLBACKEND``); the library itself never selects a backend.
    """
    os.environ.setdefault("MPLBACKEND", "Agg")
    try:
        args = answering_interrupts(lambda: build_parser().parse_args(argv))
        args.argv = argv
        with (one_line_warnings(args.command), interrupts_in_callbacks(),
              talk_while_compiling(args)):  # fmt: skip
            return answering_interrupts(lambda: args.func(args))
    except KeyboardInterrupt:  # Ctrl-C: one line and the shell's code for SIGINT, 128 + 2
        ended = "\n" if sys.stderr.isatty() else ""  # end a progress line first
        print(f"{ended}bayesldp: interrupted", file=sys.stderr, flush=True)
        if sys.stderr is sys.__stderr__:  # the command itself, not a caller capturing stderr:
            # what an interrupted compiler or sampler leaves prints from finalizers at exit
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stderr.fileno())
        return 130
    except BrokenPipeError:  # stdout closed early (| head): stop quietly, as cat does
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except BayesLDPError as exc:
        message = " ".join(str(exc).splitlines())  # one line, whatever the message holds
        print(f"bayesldp: error: {message}", file=sys.stderr)
        return 2
    except MemoryError:  # a size no check foresaw: one line, not numpy's traceback
        print("bayesldp: error: out of memory: the arrays this needs do not fit in this "
              "machine's memory; give smaller sizes (k, n, bins, draws)",
              file=sys.stderr)  # fmt: skip
        return 2
    except OSError as exc:  # a file or directory that cannot be read or written
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"bayesldp: error: {where}{exc.strerror or exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
