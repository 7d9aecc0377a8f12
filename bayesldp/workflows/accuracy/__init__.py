"""Accuracy study: reruns the experiments of three papers and says where each claim holds.

Driven by a spec (``models/accuracy.toml``; its comments document every key and size).  Three
sections, one per paper:

* ``[mle]`` (Lopuhaä-Zwakenberg, Li, Škorić and Li, "Improving Frequency Estimation under Local
  Differential Privacy", WPES 2020; section 5): the raw oracle, Norm-Sub and the MLE for GRR (K up
  to 1024, n in {1e4, 1e6}) and unary encoding (K = 10, n in {100, 1e6}), theta ~ Jeffreys
  Dirichlet(1/2) redrawn for every repeat.
* ``[em_mr]`` (Ye, Wang, Zhang and Feng, "Revisiting EM-based Estimation for Locally Differentially
  Private Protocols"): EM with mixture reduction and the IBU, as the authors' code runs them,
  against EM (to the MLE) and Norm-Sub, GRR and OLH, low and high epsilon, small and large n, a Zipf
  and a sparse Dirichlet population.
* ``[sampling]`` (Biswas, Cormode and Maple, "Impact of Sampling on Locally Differentially Private
  Data Collection", arXiv 2022): node sampling with pi = 0.1 .. 1 on the paper's Binomial
  populations (n = 50,000, domain 100): the naive estimator ``c``, the unbiased ``g``, the plug-in
  ``c_hat`` and the oracle on the sampled reports; plus exact checks of the paper's bias and
  variance formulas (eq. 4, Theorems 3.1, 3.2, 3.4, 3.5).

The study in modules: :mod:`~bayesldp.workflows.accuracy.experiments` (the experiments of each
paper, their seeding and Cramer-Rao bounds, :func:`run_study`),
:mod:`~bayesldp.workflows.accuracy.verdicts` (summaries, and a verdict per claim) and
:mod:`~bayesldp.workflows.accuracy.report` (the markdown report, :func:`machine_info`); the
command line, :func:`main`, is here, and every name of those modules can be imported from here.

Usage (``bayesldp run models/accuracy.toml`` runs the default sizes too)::

    python benchmarks/accuracy.py                      # default sizes, markdown to stdout
    python benchmarks/accuracy.py --out benchmarks/results/accuracy.md
    python benchmarks/accuracy.py --full --out results_full.md
    python benchmarks/accuracy.py --sections mle --repeats 5     # a quick look
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from pathlib import Path

import pandas as pd

from bayesldp.workflows.accuracy.experiments import CELL_COLUMNS as CELL_COLUMNS
from bayesldp.workflows.accuracy.experiments import CHECK_COLUMNS as CHECK_COLUMNS
from bayesldp.workflows.accuracy.experiments import LABELS as LABELS
from bayesldp.workflows.accuracy.experiments import MECHANISM_IDS as MECHANISM_IDS
from bayesldp.workflows.accuracy.experiments import METRIC_COLUMNS as METRIC_COLUMNS
from bayesldp.workflows.accuracy.experiments import PAPERS as PAPERS
from bayesldp.workflows.accuracy.experiments import SECTION_IDS as SECTION_IDS
from bayesldp.workflows.accuracy.experiments import Progress as Progress
from bayesldp.workflows.accuracy.experiments import StudyResult as StudyResult
from bayesldp.workflows.accuracy.experiments import cr_trace as cr_trace
from bayesldp.workflows.accuracy.experiments import grr_cr_trace as grr_cr_trace
from bayesldp.workflows.accuracy.experiments import make_mechanism as make_mechanism
from bayesldp.workflows.accuracy.experiments import olh_fisher_information as olh_fisher_information
from bayesldp.workflows.accuracy.experiments import run_em_mr as run_em_mr
from bayesldp.workflows.accuracy.experiments import run_mle as run_mle
from bayesldp.workflows.accuracy.experiments import run_sampling as run_sampling
from bayesldp.workflows.accuracy.experiments import run_study as run_study
from bayesldp.workflows.accuracy.experiments import sampling_theta as sampling_theta
from bayesldp.workflows.accuracy.report import DEVIATIONS as DEVIATIONS
from bayesldp.workflows.accuracy.report import REFERENCES as REFERENCES
from bayesldp.workflows.accuracy.report import SECTION_TITLES as SECTION_TITLES
from bayesldp.workflows.accuracy.report import UNBIASED as UNBIASED
from bayesldp.workflows.accuracy.report import checks_table as checks_table
from bayesldp.workflows.accuracy.report import cr_notes as cr_notes
from bayesldp.workflows.accuracy.report import machine_info as machine_info
from bayesldp.workflows.accuracy.report import render_markdown as render_markdown
from bayesldp.workflows.accuracy.report import wide_table as wide_table
from bayesldp.workflows.accuracy.verdicts import HALF as HALF
from bayesldp.workflows.accuracy.verdicts import SAME as SAME
from bayesldp.workflows.accuracy.verdicts import Verdict as Verdict
from bayesldp.workflows.accuracy.verdicts import all_verdicts as all_verdicts
from bayesldp.workflows.accuracy.verdicts import paired as paired
from bayesldp.workflows.accuracy.verdicts import summarise as summarise
from bayesldp.workflows.accuracy.verdicts import verdicts_em_mr as verdicts_em_mr
from bayesldp.workflows.accuracy.verdicts import verdicts_mle as verdicts_mle
from bayesldp.workflows.accuracy.verdicts import verdicts_sampling as verdicts_sampling
from bayesldp.workflows.spec import SpecError, load_spec


# ============================================================================ CLI
def main(
    argv: list[str] | None = None,
    *,
    default_spec: str | None = None,
    command: str = "python -m bayesldp.workflows.accuracy",
) -> int:
    """The accuracy study's command line (``benchmarks/accuracy.py`` calls it)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("spec", nargs="?", default=default_spec, help="study spec (TOML)")
    parser.add_argument("--full", action="store_true", help="the larger settings ([*.full])")
    parser.add_argument("--sections", help="comma-separated subset of mle,em_mr,sampling")
    parser.add_argument("--repeats", type=int, help="override every section's repeats")
    parser.add_argument("--out", help="write the markdown here (default: stdout)")
    parser.add_argument("--records", help="write the per-repeat records here (CSV, one file)")
    args = parser.parse_args(argv)
    try:
        if args.spec is None:
            raise SpecError("spec: give the path of an accuracy spec (models/accuracy.toml)")
        spec = load_spec(args.spec, kind="accuracy")
        sections = args.sections.split(",") if args.sections else None
        info = machine_info()
        start = time.perf_counter()
        result = run_study(
            spec,
            full=args.full,
            sections=sections,
            repeats=args.repeats,
            progress=lambda msg: print(msg, file=sys.stderr, flush=True),
        )
        runtime = time.perf_counter() - start
    except SpecError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    argv_shown = sys.argv[1:] if argv is None else argv
    shown = command + " " + " ".join(shlex.quote(a) for a in argv_shown)
    text = render_markdown(result, info, shown.strip(), runtime)
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")
        print(f"wrote {args.out} ({runtime:.0f} s)", file=sys.stderr)
    else:
        print(text)
    if args.records:
        frames = [df.assign(section=name) for name, df in result.records.items()]
        pd.concat(frames, ignore_index=True).to_csv(args.records, index=False)
    return 0
