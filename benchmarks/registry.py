"""The benchmarks as one suite: what each measures, against which anchor, and its commands.

One :class:`Benchmark` per results file's command (a script run with other arguments for another
results file is another entry).  ``python -m benchmarks list`` prints the two tables; ``run
NAME`` runs the full command, the one that wrote the committed results file; ``run NAME
--quick`` a small one that writes nothing into the results directories; ``run --all --quick``
every suite entry's quick command.

Kinds: ``suite``, a standing measurement, re-run when the code it measures changes: the
anchored comparisons the documentation quotes (scripts in ``benchmarks/``, results in
``benchmarks/results/``); ``investigation``, a one-off study whose conclusion is recorded in
``docs/design_notes.md`` and in the code it decided (scripts in ``benchmarks/investigations/``,
results in ``benchmarks/investigations/results/``); kept, so that its table regenerates from its
command, but not re-run.

Placeholders in the commands: ``{mirror}`` the git dir of a mirror of the code of Ye, Wang,
Zhang and Feng (EM-MR; yyt20080808/LDP-EM-MR; environment variable ``BAYESLDP_LDP_EM_MR``, or pass
``--reference PATH`` after the name), ``{adobest_code}`` a local copy of the AdOBEst-LDP authors'
MATLAB files (``BAYESLDP_ADOBEST_CODE``, or ``--reference-code DIR``), ``{tmp}`` a scratch directory
made for a quick run.
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parent
ROOT = BENCHMARKS.parent
RESULTS = BENCHMARKS / "results"
INVESTIGATIONS = BENCHMARKS / "investigations"
INVESTIGATION_RESULTS = INVESTIGATIONS / "results"
#: the results directory of each kind
RESULTS_DIRS = {"suite": RESULTS, "investigation": INVESTIGATION_RESULTS}

#: files of benchmarks/ (and of benchmarks/investigations/) that are not benchmarks
HELPERS = ("__init__.py", "__main__.py", "registry.py", "heavy_hitters_tables.py",
           "investigations/__init__.py", "paired_ratios.py", "survey_coupling.py")  # fmt: skip

#: placeholder -> (environment variable, the option that gives it on the command line, what)
PLACEHOLDERS = {
    "{mirror}": ("BAYESLDP_LDP_EM_MR", "--reference",
                 "the git dir of a mirror of yyt20080808/LDP-EM-MR"),
    "{adobest_code}": ("BAYESLDP_ADOBEST_CODE", "--reference-code",
                       "a local copy of the AdOBEst-LDP authors' MATLAB files"),
}  # fmt: skip
#: how a placeholder is shown (and how the results files' headers write it)
SHOWN = {"{mirror}": "PATH", "{adobest_code}": "DIR", "{tmp}": "TMP"}

#: requirement -> (extra that installs it, how to tell it is there)
REQUIREMENTS = {
    "pure-ldp": ("bench", "pure_ldp"),
    "multi-freq-ldpy": ("bench", "multi_freq_ldpy"),
    "xxhash": ("bench", "xxhash"),
    "wordfreq": ("bench", "wordfreq"),
    "nutpie": ("samplers", "nutpie"),
    "numpyro": ("samplers", "numpyro"),
}


@dataclass(frozen=True)
class Benchmark:
    name: str
    #: the script under benchmarks/ (under benchmarks/investigations/ for an investigation), or
    #: ``-m module`` for a package command
    script: str
    measures: str
    anchor: str
    #: arguments of the command that wrote the committed results file
    full: tuple[str, ...]
    #: results files under its kind's results directory (``RESULTS_DIRS``; empty: printed only)
    results: tuple[str, ...] = ()
    #: arguments of a quick run (seconds to a minute; writes at most into ``{tmp}``); None: see
    #: ``quick_note``
    quick: tuple[str, ...] | None = ()
    quick_note: str = ""
    kind: str = "suite"
    #: keys of REQUIREMENTS and PLACEHOLDERS the full command needs
    needs: tuple[str, ...] = ()
    #: after the full command: copy this file (relative to ROOT or absolute) to the results file
    copy_from: str = ""
    #: where the results file's header does not name ``full`` exactly: what it says instead
    header_note: str = ""
    #: where the parser lives, if not the script's ``main`` ("module:function", returning a parser
    #: or being a ``main(argv)``)
    parser: str = ""
    #: results files the full command writes that were never committed
    uncommitted: tuple[str, ...] = ()

    @property
    def is_module(self) -> bool:
        return self.script.startswith("-m ")

    @property
    def directory(self) -> Path:
        """Where its script is."""
        return INVESTIGATIONS if self.kind == "investigation" else BENCHMARKS

    @property
    def results_dir(self) -> Path:
        return RESULTS_DIRS[self.kind]

    def argv(self, args: tuple[str, ...]) -> list[str]:
        """The command as an argv after the interpreter."""
        script = (self.directory / self.script).relative_to(ROOT).as_posix()
        head = self.script.split() if self.is_module else [script]
        return [*head, *args]

    def shown(self, args: tuple[str, ...] | None = None) -> str:
        """The command as the results files' headers write it."""
        args = self.full if args is None else args
        words = ["python", *self.argv(args)]
        if self.is_module and self.script == "-m bayesldp.workflows.cli":
            words = ["bayesldp", *args]
        for key, shown in SHOWN.items():
            words = [w.replace(key, shown) for w in words]
        return " ".join(words)

    def shown_before_the_move(self) -> str | None:
        """An investigation's command as results files written before the investigations moved
        to benchmarks/investigations/ name it (its script and results at benchmarks/ and
        benchmarks/results/); None for the suite."""
        if self.kind != "investigation":
            return None
        return self.shown().replace("benchmarks/investigations/", "benchmarks/")


def _prior_accuracy(suffix: str, mech: str, ns: str) -> Benchmark:
    name = f"prior_accuracy_{suffix}"
    out = () if "_" not in suffix else ("--out", f"benchmarks/results/{name}.md")
    return Benchmark(
        name, "prior_accuracy.py",
        f"prior_accuracy on {mech} at n = {ns} (Dirichlet(1), adaptive; 1 repeat)",
        "MLE / Norm-Sub / IBU / EM-MR (the package's own; none external)",
        ("--mechanism", mech, "--priors", "dir1,adaptive", "--ns", ns, *out, "--repeats", "1"),
        (f"{name}.md",), quick=None, quick_note="the code of prior_accuracy --quick",
    )  # fmt: skip


PEERS = "pure-ldp 1.2.0 and multi-freq-ldpy 0.2.5"
AUTHORS = "the code of Ye, Wang, Zhang and Feng (LDP-EM-MR) via --reference MIRROR"

# fmt: off
BENCHMARKS_LIST: tuple[Benchmark, ...] = (
    # --- throughput against the peer libraries ---
    Benchmark(
        "throughput", "throughput.py",
        "users/s of perturb + tally + unbiased oracle, GRR / OUE / OLH at K = 10, 100, 1000",
        PEERS, (), ("throughput.md",), ("--quick", "--ks", "10"),
        needs=("pure-ldp", "multi-freq-ldpy", "xxhash"),
    ),
    Benchmark(
        "subset_throughput", "subset_throughput.py",
        "subset selection perturb users/s, K = 10, 100, 1000",
        "multi-freq-ldpy's SS_Client", (), ("subset_throughput.md",), ("--quick",),
        needs=("multi-freq-ldpy",),
    ),
    Benchmark(
        "sketch_throughput", "sketch_throughput.py",
        "CMS and HCMS perturb users/s (m = 1024, 256 hash rows), K = 10, 100, 1000",
        "pure-ldp's CMSClient", (), ("sketch_throughput.md",), ("--quick",),
        needs=("pure-ldp", "xxhash"),
    ),
    Benchmark(
        "xxhash_throughput", "xxhash_throughput.py",
        "users/s of OLHXX (xxhash local hashing) against OLH; python-xxhash per pair",
        "python-xxhash in a Python loop (the peers' way of hashing), if installed",
        (), (), ("--k", "10", "--n", "10000", "--repeats", "1"),
    ),
    Benchmark(
        "heavy_hitters", "heavy_hitters.py",
        "top-k precision / recall / NCR / MSE and users/s of PEM and SFP, Zipf over 2^20 and "
        "2^32 items and wordfreq's English words, n = 1e5, eps 1, 2, 4",
        "pure-ldp 1.2.0's PEM and SFP (its count-mean sketch)", (), ("heavy_hitters.md",),
        ("--quick",), needs=("pure-ldp", "xxhash", "wordfreq"),
    ),
    Benchmark(
        "heavy_hitters_1e6", "heavy_hitters.py",
        "heavy_hitters at n = 1e6 users, eps 1 and 4, 5 seeds (accuracy on paired differences, "
        "and users/s)",
        "pure-ldp 1.2.0's PEM and SFP (its count-mean sketch)",
        ("--n", "1000000", "--seeds", "5", "--eps", "1", "4", "--out",
         "benchmarks/results/heavy_hitters_1e6.md"), ("heavy_hitters_1e6.md",), quick=None,
        quick_note="heavy_hitters --quick", needs=("pure-ldp", "xxhash", "wordfreq"),
    ),
    Benchmark(
        "heavy_hitter_coverage", "heavy_hitter_coverage.py",
        "coverage of PEM's 90% posterior intervals (found words, \"other\"), false positives' "
        "posterior means and recall, holdout 0 / 0.1 / 0.2; wordfreq's 10,000 top English words "
        "of 4-8 letters, Zipf(1.1), n = 1e5, eps 1, 2, 4, 20 repeats",
        "the nominal 90% (and the paper's protocol, holdout 0)", (),
        ("heavy_hitter_coverage.md",), ("--quick",), needs=("wordfreq",),
    ),
    Benchmark(
        "pem_layout", "pem_layout.py",
        "PEM where heavy_hitters.md saw it lose (zipf20 eps 1, 2; zipf32 eps 1; k 10, 20, 50): "
        "20 seeds, paired differences, four round layouts of ours and the positional code (zipf20)",
        "pure-ldp 1.2.0's PEM (its count-mean sketch), on the same drawn users",
        (), ("pem_layout.md",), ("--quick",), kind="investigation", needs=("pure-ldp", "xxhash"),
    ),
    Benchmark(
        "em_speed", "em_speed.py",
        "EM on a GRR tally (K = 100, n = 1e5, eps = 1) at the same stopping rule",
        "multi-freq-ldpy's IBU", (), ("em_speed.md",), ("--quick",),
        needs=("multi-freq-ldpy",),
    ),
    Benchmark(
        "scale", "scale.py",
        "tallying 1e8 GRR reports in Parquet files on Dask; workers; client memory for OUE",
        "multi-freq-ldpy's aggregation loop (and pure-ldp's, if installed), extrapolated",
        ("--data", "/tmp/bayesldp-scale"), ("scale.md",),
        ("--quick", "--data", "{tmp}/scale", "--out", "-"), needs=("multi-freq-ldpy",),
    ),
    # --- parity with the authors' code ---
    Benchmark(
        "em_mr_parity", "em_mr_parity.py",
        "IBU and EM-MR MSE on the authors' SFC / Income populations, GRR, eps 0.75..3",
        AUTHORS, ("--reference", "{mirror}", "--repeats", "20"), ("em_mr_parity.md",),
        ("--reference", "{mirror}", "--quick"), needs=("{mirror}",),
    ),
    Benchmark(
        "numerical_parity", "numerical_parity.py",
        "SW and PM at 1024 bins: W1, error of the mean, seconds of EMS / EM-MR / posteriors",
        AUTHORS, ("--reference", "{mirror}", "--repeats", "5"), ("numerical_parity.md",),
        ("--reference", "{mirror}", "--quick"), needs=("{mirror}",),
    ),
    Benchmark(
        "numerical_speed", "numerical_speed.py",
        "seconds of ems / ibu / ems_mr against the authors' EMS (SW, PM, Laplace; Table II)",
        AUTHORS, ("--reference", "{mirror}", "--repeats", "5"), ("numerical_speed.md",),
        ("--reference", "{mirror}", "--quick", "--repeats", "1"), needs=("{mirror}",),
        header_note="the committed header (before 7e54ba0) names no arguments: "
        "'Written by `benchmarks/numerical_speed.py`'; its text says 'fastest of 5'",
    ),
    Benchmark(
        "pckv_parity", "pckv_parity.py",
        "PCKV-PM key frequency and mean MSE, coverage of the posterior, seconds",
        AUTHORS + " (their SVEPM EM)", ("--reference", "{mirror}", "--repeats", "5"),
        ("pckv_parity.md",), ("--reference", "{mirror}", "--quick"), needs=("{mirror}",),
    ),
    Benchmark(
        "adobest_paper_grid", "adobest_paper_grid.py",
        "the AdOBEst-LDP grid at the authors' sizes, exact budget and their (not eps-LDP) eps2",
        "the AdOBEst-LDP authors' MATLAB code under GNU Octave via --reference-code DIR "
        "(one survey's timing)",
        ("--k", "10,20", "--repeats", "20", "--reference-code", "{adobest_code}"),
        ("adobest_paper_grid.md",), ("--quick", "--work", "{tmp}/work", "--out", "{tmp}/g.md"),
        needs=("{adobest_code}",),
        header_note="the header's command adds --report-only (the cells were read back from "
        "--work, computed by earlier invocations); without it the same command computes them "
        "(about an hour)",
    ),
    # --- accuracy, calibration, priors ---
    Benchmark(
        "accuracy", "accuracy.py",
        "the source papers' accuracy claims (Lopuhaä-Zwakenberg et al. 2020's MLE / Norm-Sub, "
        "Ye et al.'s EM-MR, Biswas et al. 2022's node sampling)",
        "exact values: Cramer-Rao bounds and the oracle's variances; a verdict per claim",
        ("models/accuracy.toml", "--out", "benchmarks/results/accuracy.md"), ("accuracy.md",),
        ("models/accuracy.toml", "--sections", "mle", "--repeats", "2"),
        parser="bayesldp.workflows.accuracy:main",
    ),
    Benchmark(
        "calibration", "calibration.py",
        "SBC rank uniformity and 90% coverage of NUTS, SGLD (three variants), L = 200",
        "exact values (uniform ranks, 90% coverage); PyMC's NUTS on the same data sets",
        ("--all", "--jobs", "2", "--write", "benchmarks/results/calibration.md"),
        ("calibration.md",),
        ("--samplers", "hmc", "--reps", "50", "--jobs", "1", "--write", "{tmp}/calibration.md"),
    ),
    Benchmark(
        "calibration_adaptive", "calibration.py",
        "SBC of the default sampler under the adaptive prior (theta drawn from it)",
        "exact values (uniform ranks, 90% coverage)",
        ("--samplers", "hmc-adaptive", "--jobs", "2", "--write",
         "benchmarks/results/calibration_adaptive.md"),
        ("calibration_adaptive.md",), quick=None, quick_note="the code of calibration --quick",
    ),
    Benchmark(
        "prior_accuracy", "prior_accuracy.py",
        "posterior means under Dirichlet(1), (1/2), adaptive: MSE over the best frequentist, "
        "coverage (GRR)",
        "MLE / Norm-Sub / IBU / EM-MR (the package's own; none external)",
        ("--repeats", "2"), ("prior_accuracy.md",),
        ("--quick", "--priors", "dir1", "--workers", "1"),
    ),
    Benchmark(
        "prior_accuracy_logistic_normal", "prior_accuracy.py",
        "the logistic-normal prior (learnt spread), the adaptive prior and the better by LOO on "
        "prior_accuracy's GRR grid: MSE and TV against MLE / Norm-Sub, coverage",
        "MLE / Norm-Sub / IBU / EM-MR (the package's own; none external)",
        ("--priors", "adaptive,logistic_normal,loo_choice,loo_choice_2se", "--out",
         "benchmarks/results/prior_accuracy_logistic_normal.md", "--repeats", "2"),
        ("prior_accuracy_logistic_normal.md",),
        ("--quick", "--priors", "logistic_normal", "--workers", "1"),
    ),
    Benchmark(
        "prior_accuracy_sparse_true_prior", "prior_accuracy.py",
        "the sparse family's own prior, Dirichlet(0.05), against the adaptive prior at n = 1,000 "
        "(20 repeats): how far a Bayes posterior mean's TV can be above MLE's and Norm-Sub's",
        "MLE / Norm-Sub / IBU / EM-MR (the package's own; none external)",
        ("--priors", "adaptive,dir005", "--ns", "1000", "--populations", "dirichlet0.05",
         "--out", "benchmarks/results/prior_accuracy_sparse_true_prior.md", "--repeats", "20"),
        ("prior_accuracy_sparse_true_prior.md",),
        ("--quick", "--priors", "dir005", "--populations", "dirichlet0.05", "--workers", "1"),
    ),
    _prior_accuracy("oue", "OUE", "1000"),
    _prior_accuracy("oue_1e4", "OUE", "10000"),
    _prior_accuracy("oue_1e5", "OUE", "100000"),
    _prior_accuracy("olh", "OLH", "1000"),
    _prior_accuracy("olh_1e4", "OLH", "10000"),
    _prior_accuracy("olh_1e5", "OLH", "100000"),
    Benchmark(
        "pool_prior_accuracy", "pool_prior_accuracy.py",
        "the default prior's targets pooled over the committed prior_accuracy*.md tables "
        "(no fitting)",
        "MLE / Norm-Sub / IBU / EM-MR (from the tables)", (), ("prior_accuracy_pooled.md",),
        ("--out", "{tmp}/pooled.md"),
        header_note="the header adds '(reads the committed tables, fits nothing)' after it",
    ),
    Benchmark(
        "default_prior", "default_prior.py",
        "fit's default (adaptive) prior against Dirichlet(1) on five mechanisms: MSE, coverage, "
        "seconds",
        "none: an internal comparison (Dirichlet(1) with fit's other defaults)",
        ("--repeats", "8"), ("default_prior.md",), ("--repeats", "1", "--out", "{tmp}/dp.md"),
    ),
    Benchmark(
        "estimator_default", "estimator_default.py",
        "estimate's default and every frequentist estimator (Norm-Sub family, MLE, EM, IBU) on "
        "six mechanisms, eps 0.25-4, K 8-256, three populations, n 1e3-1e5, 20 repeats: MSE / "
        "min(MSE of clip-and-renormalise, MSE of the uniform answer)",
        "none: an internal comparison (clip-and-renormalise, multi-freq-ldpy's output rule, and "
        "the uniform answer)",
        (), ("estimator_default.md",), ("--quick",),
    ),
    Benchmark(
        "adaptive_bins", "adaptive_bins.py",
        "the adaptive prior on SW reports at 16, 64, 256 bins: W1, seconds, steps, r_hat",
        "ems_mr and Dirichlet(1) (the package's own; none external)", (), ("adaptive_bins.md",),
        ("--bins", "16"),
    ),
    Benchmark(
        "smooth_prior", "smooth_prior.py",
        "the smoothness prior on SW reports: W1, error of the mean, coverage, seconds",
        "PyMC's NUTS on the same model; ems_mr and Dirichlet(1)", (), ("smooth_prior.md",),
        ("--bins", "16", "--no-pymc", "--out", "{tmp}/smooth.md"),
    ),
    Benchmark(
        "smooth_weights_rule", "smooth_weights_rule.py",
        "the smoothness prior's non-centring weights on K = 3 tallies, pilot's 10 % quantile "
        "against its mean: divergent share, ESS, z-scores",
        "importance sampling from the prior (2,000,000 draws; the reference test's)",
        ("--seeds", "1,2", "--out", "benchmarks/investigations/results/smooth_weights_rule.md"),
        ("smooth_weights_rule.md",), quick=None,
        quick_note="none: 20 fits of 40,000 draws each are the measurement (about 3 minutes)",
        kind="investigation",
    ),
    Benchmark(
        "prior_mh_rule", "prior_mh_rule.py",
        "independence MH from the prior where the data are weak: the rule's Pareto k, "
        "efficiency and cost, the sampler's acceptance, ESS per proposal and time",
        "fit's NUTS where the rule rejects; exactness is the reference tests'",
        ("--out", "benchmarks/investigations/results/prior_mh_rule.md"),
        ("prior_mh_rule.md",), quick=None,
        quick_note="none: the whole measurement takes under a minute",
        kind="investigation",
    ),
    Benchmark(
        "posterior_warm", "posterior_warm.py",
        "warm posterior sampling on a model set: min-ESS/s of fit's default against "
        "nutpie, numpyro and PyMC, and where a warm default fit's time goes",
        "nutpie, numpyro (on PyMC's JAX log-density) and PyMC's NUTS on build_model's model",
        ("--out", "benchmarks/results/posterior_warm.md", "--models", "grr20", "grr200",
         "rrrr10", "adaptive30", "smooth64", "--samplers", "fit", "nutpie", "numpyro"),
        ("posterior_warm.md",), quick=("--models", "rrrr10", "--samplers", "fit", "nutpie"),
    ),
    Benchmark(
        "posterior_warm_oue50", "posterior_warm.py",
        "posterior_warm's OUE model (K = 50, n = 1e5, one likelihood row per distinct report): "
        "fit's default and fit(method='hmc') against nutpie and numpyro, each stopped at 900 s",
        "nutpie, numpyro (on PyMC's JAX log-density) on build_model's model",
        ("--out", "benchmarks/results/posterior_warm_oue50.md", "--models", "oue50",
         "--samplers", "fit", "fit_hmc", "nutpie", "numpyro", "--draws", "300", "--tune", "300",
         "--timeout", "900"),
        ("posterior_warm_oue50.md",), quick=None, quick_note="posterior_warm --quick",
    ),
    Benchmark(
        "smooth_vertex_steps", "smooth_vertex_steps.py",
        "the smoothness prior at a K = 3 vertex posterior (the sampler's known fault): "
        "divergent share, steps and z-scores under smaller steps and a nonlinear slope map",
        "importance sampling from the prior (2,000,000 draws; the reference test's); PyMC's NUTS",
        ("--seeds", "1,2", "--out", "benchmarks/investigations/results/smooth_vertex_steps.md"),
        ("smooth_vertex_steps.md",), quick=None,
        quick_note="none: 18 fits of 40,000 draws, some at 1,000+ steps per draw, are the "
        "measurement (about 10 minutes)",
        kind="investigation",
    ),
    Benchmark(
        "smooth_prior_1024", "smooth_prior.py",
        "the smoothness prior at Ye et al.'s 1024 bins (no PyMC)",
        "ems_mr and Dirichlet(1) (the package's own; none external)",
        ("--bins", "1024", "--no-pymc", "--out", "benchmarks/results/smooth_prior_1024.md"),
        ("smooth_prior_1024.md",), quick=None, quick_note="the code of smooth_prior --quick",
    ),
    Benchmark(
        "rappor", "rappor.py",
        "RAPPOR at 8-64 cohorts against BLH / OLH / SUE: MSE of the top-30 frequencies",
        "exact values: Wang et al. 2017's closed-form variances; RAPPOR's own decoding",
        ("--n", "10000", "--reps", "12"), ("rappor.md",),
        ("--n", "2000", "--reps", "1", "--no-posterior", "--out", "{tmp}/rappor.md"),
    ),
    Benchmark(
        "fit_rounds_speed", "fit_rounds_speed.py",
        "fit_rounds (K = 12, 4 rounds of 20,000 reports, GRR and OUE at eps = 1) on the "
        "package's NUTS: seconds, min-ESS/s, against the rounds' separate fits and PyMC's NUTS",
        "fit_rounds(method='nuts'), PyMC's NUTS on the same model and draws",
        ("--out", "benchmarks/results/fit_rounds_speed.md"), ("fit_rounds_speed.md",),
        ("--mechanisms", "GRR", "--n", "2000", "--draws", "200", "--out", "{tmp}/rounds.md"),
    ),
    Benchmark(
        "longitudinal_drift", "longitudinal_drift.py",
        "fit_rounds (random walk across rounds) on a drifting L-GRR population, K = 10, "
        "T = 20, n = 2,000 per round: TV per round, 90% coverage, seconds",
        "multi-freq-ldpy 0.2.5's longitudinal estimators (MI_long, IBU) on the same reports; "
        "per-round MLE and fit",
        ("--repeats", "20", "--scenarios", "fresh,panel"), ("longitudinal_drift.md",),
        ("--quick", "--out", "{tmp}/drift.md"), needs=("multi-freq-ldpy",),
    ),
    Benchmark(
        "multi_freq_parity", "multi_freq_parity.py",
        "longitudinal (L-GRR, L-SUE, L-OUE, L-OSUE, L-SOUE; K = 100) and multidimensional (SPL, "
        "SMP, RS+FD with GRR and OUE; domains (100, 10, 5)) protocols: client + tally + oracle "
        "users/s at n = 1e6, unbiasedness (max |z|) and MSE over 40 runs",
        "multi-freq-ldpy 0.2.5's L_*, SPL_*, SMP_*, RSpFD_* clients and MI aggregators on the "
        "same population (its reports decoded by bayesldp's oracle)",
        (), ("multi_freq_parity.md",), ("--quick", "--out", "{tmp}/parity.md"),
        needs=("multi-freq-ldpy",),
    ),
    Benchmark(
        "multi_freq_parity_dbit_rsfd", "multi_freq_parity.py",
        "dBitFlipPM (K = 100 values in 20 buckets, 4 sampled) and RS+FD[OUE-r] (domains "
        "(100, 10, 5)): client + tally + oracle users/s at n = 1e6, unbiasedness (max |z|) and "
        "MSE over 40 runs",
        "multi-freq-ldpy 0.2.5's dBitFlipPM_* and RSpFD_UE_rnd_* clients and MI aggregators on "
        "the same population (its reports decoded by bayesldp's oracle)",
        ("--protocols", "dBitFlipPM", "RSFD-OUE-r", "--out",
         "benchmarks/results/multi_freq_parity_dbit_rsfd.md"),
        ("multi_freq_parity_dbit_rsfd.md",),
        ("--quick", "--protocols", "dBitFlipPM", "RSFD-OUE-r", "--out", "{tmp}/parity.md"),
        needs=("multi-freq-ldpy",),
    ),
    Benchmark(
        "posterior_vs_peer", "posterior_vs_peer.py",
        "the posterior mean and estimate()'s default against clip-and-renormalise (multi-freq-"
        "ldpy's output) on the same reports: K = 64 Zipf(1.1) panels of 10,000 users, records "
        "over (12, 7, 30); MSE ratios with paired standard errors over 20 repeats",
        "multi-freq-ldpy 0.2.5's MI output (clip-and-renormalise of the unbiased decode; equal "
        "to it by multi_freq_parity.md's MI gap)",
        ("--protocols", "dBitFlipPM", "LGRR", "SPL-GRR", "SMP-GRR", "RSFD-GRR", "--epsilons",
         "0.5", "1"),
        ("posterior_vs_peer.md",), ("--quick", "--out", "{tmp}/peer.md"),
    ),
    Benchmark(
        "serve_load", "serve_load.py",
        "bayesldp serve on the loopback address: reports acknowledged per second and their "
        "p50 / p99 latency at a concurrency of 50, refits running in the background",
        "absolute goals (500 reports/s, p99 under 100 ms on 2 cores): no LDP library serves a "
        "survey to compare with",
        ("--out", "benchmarks/results/serve_load.md"), ("serve_load.md",),
        ("--quick", "--out", "{tmp}/serve.md"),
    ),
    Benchmark(
        "serve_load_no_refits", "serve_load.py",
        "serve_load with batches larger than the run (no batch recorded, no refit): what the "
        "refits cost the respondents' latency",
        "serve_load's own run (refits on)",
        ("--batch", "100000", "--out", "benchmarks/results/serve_load_no_refits.md"),
        ("serve_load_no_refits.md",), None, quick_note="serve_load --quick",
    ),
    Benchmark(
        "serve_load_k100", "serve_load.py",
        "serve_load with K = 100 categories (the assignment's channel and the refits grow with "
        "K)",
        "the same absolute goals as serve_load",
        ("--k", "100", "--out", "benchmarks/results/serve_load_k100.md"),
        ("serve_load_k100.md",), None, quick_note="serve_load --quick",
    ),
    # --- posterior speed ---
    Benchmark(
        "posterior", "posterior.py",
        "whole-process seconds, min ESS_bulk, divergences (GRR, K = 20, n = 1e5), fresh processes",
        "PyMC's default NUTS (nutpie / numpyro with --samplers, samplers extra)",
        ("--samplers", "pymc", "hmc", "hmc-backend", "--repeats", "5", "--cold", "--write",
         "benchmarks/results/posterior.md"),
        ("posterior.md",), ("--samplers", "hmc"),
    ),
    Benchmark(
        "posterior_large_n", "posterior_large_n.py",
        "fit at n = 1e6 (OUE, OLH, SHE, GRR K = 1000), Laplace against HMC, Laplace's SBC",
        "the MLE of the same tally (fit within 20x), the HMC (Laplace's agreement)",
        ("--timeout", "180", "--write", "benchmarks/results/posterior_large_n.md"),
        ("posterior_large_n.md",), ("--parts", "auto"),
    ),
    Benchmark(
        "limits", "limits.py",
        "each mechanism's oracle, MLE and posterior-mean error as a multiple of the L2 floor of "
        "eps-LDP (K = 2, 10, 100; eps 0.5-4; n = 10,000 uniform users)",
        "bayesldp.bounds.l2_lower_bound (Pan 2026), attained by SubsetSelection.l2_optimal",
        ("--repeats", "20", "--posterior-repeats", "10", "--out", "benchmarks/results/limits.md"),
        ("limits.md", "limits.png"), ("--repeats", "1", "--posterior-repeats", "0"),
    ),
    Benchmark(
        "first_run", "first_run.py",
        "the main job's first run (empty numba cache) and second run: whole-process seconds, "
        "seconds compiling, the longest silence, whether the compile counters restart",
        "none: an internal comparison (first against second run)",
        ("--out", "benchmarks/results/first_run.md"), ("first_run.md",),
        None, quick_note="every run is the whole main job (minutes on a first run)",
    ),
    Benchmark(
        "first_fit", "first_fit.py",
        "first fit's whole-process seconds, empty numba cache and warm, also in a fresh venv",
        "none: an internal comparison (cold against warm)",
        ("--repeats", "3", "--fresh-venv", "--write", "benchmarks/results/first_fit.md"),
        ("first_fit.md",), ("--repeats", "1"),
        header_note="the header ('Written by `benchmarks/first_fit.py --repeats 3 --fresh-venv`')"
        " omits 'python' and '--write benchmarks/results/first_fit.md'",
    ),
    Benchmark(
        "notebooks", "notebooks.py",
        "each notebook at its full settings in a fresh kernel: seconds, stderr and stdout "
        "bytes, warnings, lines on divergences",
        "none: the promise in notebooks/README.md (under a minute to a few minutes each)",
        ("--out", "benchmarks/results/notebooks.md"), ("notebooks.md",),
        ("--only", "04", "--small"),
    ),
    Benchmark(
        "feedback", "feedback.py",
        "progress bars' overhead and the cores=2 speed-up of a warm fit",
        "none: an internal comparison (cores=1, no bars)",
        ("--repeats", "5", "--write", "benchmarks/results/feedback.md"), ("feedback.md",),
        ("--repeats", "1"),
        header_note="the header ('Written by `benchmarks/feedback.py --repeats 5`') omits "
        "'python' and '--write benchmarks/results/feedback.md'",
    ),
    # --- adaptive surveys ---
    Benchmark(
        "adobest_grid", "-m bayesldp.workflows.cli",
        "the AdOBEst-LDP experiment grid (Aydın and Yıldırım 2025) at its default size: TV per "
        "rule",
        "none: an internal comparison (the non-adaptive and semi-adaptive rules)",
        ("run", "models/adobest_grid.toml", "--out", "/tmp/bench/grid"), ("adobest_grid.md",),
        ("run", "models/adobest_grid.toml", "--quick", "--no-figures", "--quiet", "--out",
         "{tmp}/grid"),
        copy_from="/tmp/bench/grid/tables.md", parser="bayesldp.workflows.cli:build_parser",
    ),
    Benchmark(
        "survey_speed", "survey_speed.py",
        "whole-process seconds of a 500,000-user survey, both engines, cold and warm",
        "none: an internal comparison (the paper's SGLD engine, as the package runs it)",
        ("--n", "500000", "--k", "20", "--runs",
         "tv:sgld,lookahead:posterior,lookahead:posterior:1.0"),
        ("survey_speed.md",),
        ("--n", "5000", "--k", "10", "--runs", "tv:sgld", "--out", "{tmp}/speed.md"),
    ),
    Benchmark(
        "survey_posterior", "survey_posterior.py",
        "90% coverage and TV of the adaptive survey's posterior, its pool's and SGLD's",
        "exact value: 90% coverage; the paper's SGLD posterior on the same users",
        ("--repeats", "20", "--utility", "tv", "--workers", "1"), ("survey_posterior.md",),
        ("--repeats", "1", "--out", "{tmp}/sp.md"),
    ),
    Benchmark(
        "survey_adaptive_gain", "survey_adaptive_gain.py",
        "TV of the default survey's MLE and posterior mean over plain GRR's, the paper's grid",
        "none: an internal comparison (GRR at the full budget on the same users)",
        ("--repeats", "20", "--utility", "default", "--workers", "2", "--cells", "all"),
        ("survey_adaptive_gain.md", "survey_adaptive_gain.jsonl"),
        ("--repeats", "1", "--cells", "0", "--out", "{tmp}/g.md"),
    ),
    Benchmark(
        "survey_adaptive_gain_split", "survey_adaptive_gain.py",
        "survey_adaptive_gain with the lookahead rule's split-half admission test "
        "(lookahead_test='split'), the paper's grid",
        "none: an internal comparison (GRR at the full budget on the same users; the default "
        "rule's rows in survey_adaptive_gain.md are the same populations)",
        ("--repeats", "20", "--utility", "default+split+draws", "--workers", "2", "--cells", "all",
         "--out", "benchmarks/results/survey_adaptive_gain_split.md"),
        ("survey_adaptive_gain_split.md", "survey_adaptive_gain_split.jsonl"),
        ("--repeats", "1", "--cells", "0", "--utility", "default+split+draws", "--out",
         "{tmp}/gs.md"),
        header_note="run before the default rule simulated the pool's mean (2026-11-30), so "
        "its header's --utility is default+split, the same rule as default+split+draws now",
    ),
    Benchmark(
        "survey_adaptive_gain_split_mean", "survey_adaptive_gain.py",
        "survey_adaptive_gain with the lookahead rule's split-half admission test under the "
        "default's simulated truth (the pool's mean), the paper's grid",
        "none: an internal comparison (GRR at the full budget on the same users; the default "
        "rule's rows in survey_adaptive_gain.md are the same populations)",
        ("--repeats", "20", "--utility", "default+split", "--workers", "2", "--cells", "all",
         "--out", "benchmarks/results/survey_adaptive_gain_split_mean.md"),
        ("survey_adaptive_gain_split_mean.md", "survey_adaptive_gain_split_mean.jsonl"),
        ("--repeats", "1", "--cells", "0", "--utility", "default+split", "--out",
         "{tmp}/gsm.md"),
    ),
    Benchmark(
        "survey_adaptive_gain_posterior", "survey_adaptive_gain.py",
        "survey_adaptive_gain with the lookahead rule scoring the posterior mean "
        "(lookahead_score='posterior'), on the sparse cell at K = 10, eps 1 (eps 0.5: --cells 1,0)",
        "none: an internal comparison (GRR at the full budget on the same users; the default "
        "rule's rows in survey_adaptive_gain.md are the same populations)",
        ("--repeats", "20", "--utility", "default+posterior+draws", "--workers", "1", "--cells",
         "1", "--out", "benchmarks/results/survey_adaptive_gain_posterior.md"),
        ("survey_adaptive_gain_posterior.md", "survey_adaptive_gain_posterior.jsonl"),
        ("--repeats", "1", "--cells", "1", "--utility", "default+posterior+draws", "--out",
         "{tmp}/gp.md"),
        header_note="run before the default rule simulated the pool's mean (2026-11-30), so "
        "its header's --utility is default+posterior, the same rule as default+posterior+draws now",
    ),
    Benchmark(
        "survey_stopping", "survey_stopping.py",
        "coverage at a width-based stop (posterior intervals or confidence sequences), and "
        "users against a worst-case fixed-size GRR survey",
        "exact value: GRR's oracle variance sizes the fixed survey; 90% coverage",
        ("--surveys", "50", "--k", "10", "20", "--epsilon", "0.5", "1", "--width", "0.1",
         "--n-max", "200000", "--rule", "width", "cs_width", "--workers", "1"),
        ("survey_stopping.md", "survey_stopping.jsonl"),
        ("--surveys", "1", "--k", "10", "--epsilon", "1", "--n-max", "5000", "--out",
         "{tmp}/stop.md"),
    ),
    # --- the test suite's power ---
    Benchmark(
        "mutation_tests", "mutation_tests.py",
        "28 mutants of the sampler core, variances and SBC harness: killed by the fast tier?",
        "none: an internal comparison (the unmutated tree must pass)", (),
        ("mutation_tests.md", "mutation_tests.json"), ("--list",),
        header_note="the header names the script without arguments; each row is its own run "
        "(--only ID), with its date and commit in the row",
    ),
    # --- investigations: one-off studies, conclusions recorded ---
    Benchmark(
        "prior_family_fit", "prior_family_fit.py",
        "true populations scored by Dirichlet(a) and logistic-normal(sd); a learnt-sd probe",
        "none: an internal comparison (the adaptive prior)", (), ("prior_family_fit.md",),
        kind="investigation",
    ),
    Benchmark(
        "prior_family_grid", "prior_family_fit.py",
        "the logistic-normal prior (PyMC) against the adaptive prior on all 96 GRR cells",
        "MLE / Norm-Sub / IBU / EM-MR (the package's own)", ("--grid",),
        ("prior_family_grid.md",), kind="investigation",
    ),
    Benchmark(
        "shared_information", "shared_information.py",
        "the HMC's shared_information by mechanism; RRRR fits' divergences by target_accept",
        "none: an internal comparison (target_accept 0.8 / 0.9 / 0.95, plain and nested)",
        ("--repeats", "30"), ("shared_information.md",), ("--repeats", "1", "--out", "{tmp}/s.md"),
        kind="investigation",
    ),
    Benchmark(
        "adaptive_convergence", "adaptive_convergence.py",
        "r_hat, divergences, steps of the adaptive prior's 192 GRR fits by the width of a",
        "none: an internal comparison (Dirichlet(1) and Dirichlet(a median) on the same tally)",
        (), ("adaptive_convergence.md",), None, "no small mode (192 fits)",
        kind="investigation",
    ),
    Benchmark(
        "fit_rounds_cost", "fit_rounds_cost.py",
        "fit_rounds' time on GRR and OUE rounds as steps per draw x a gradient's cost (the block "
        "tally's against the rounds' own, one by one)",
        "none: an internal comparison (the same rounds as fit_rounds_speed)",
        ("--out", "benchmarks/investigations/results/fit_rounds_cost.md"),
        ("fit_rounds_cost.md",), None, "no small mode (two fits of 4 x 600 iterations)",
        kind="investigation",
    ),
    Benchmark(
        "adaptive_cost", "adaptive_cost.py",
        "the adaptive prior's seconds over Dirichlet(1)'s as steps per draw x cost per step",
        "none: an internal comparison (Dirichlet(1) on the same tally, seed and draws)",
        (), ("adaptive_cost.md",), ("--quick",), kind="investigation",
    ),
    Benchmark(
        "adaptive_oracle", "adaptive_oracle.py",
        "an oracle bound: theta sampled under Dirichlet(a) with a known, and a Gibbs sampler",
        "none: an internal comparison (Dirichlet(1) on the same tally, seed and draws)",
        (), ("adaptive_oracle.md",), ("--quick",), kind="investigation",
    ),
    Benchmark(
        "survey_lookahead_choices", "survey_lookahead_choices.py",
        "every choice of the lookahead rule: horizon, size, simulated gain and its se",
        "none: an internal comparison (GRR on the same users)",
        ("--k", "20", "--rho", "0.1", "--epsilon", "0.5", "--repeats", "3"),
        ("survey_lookahead_choices.md",),
        ("--k", "10", "--repeats", "1", "--out", "{tmp}/choices.md"), kind="investigation",
    ),
    Benchmark(
        "survey_oracle", "survey_oracle.py",
        "an oracle bound: the best top-s RRRR subset's MLE TV with theta known, against GRR's",
        "exact value: the A-optimal mixture's asymptotic bound; GRR", (), (),
        ("--repeats", "1", "--inner", "1", "--out", "{tmp}/o.md"), kind="investigation",
        uncommitted=("survey_oracle.md",),
        header_note="its results file was never committed (bayesldp/adaptive/lookahead.py "
        "cites it)",
    ),
    Benchmark(
        "survey_oracle_posterior", "survey_oracle_posterior.py",
        "the oracle bound for the posterior mean on the sparse cells (top-s, s <= 5)",
        "none: an internal comparison (GRR's posterior mean)",
        ("--repeats", "10", "--inner", "2", "--max-s", "5", "--workers", "2", "--cells", "all"),
        ("survey_oracle_posterior.md",),
        ("--repeats", "1", "--inner", "1", "--max-s", "1", "--cells", "0", "--out", "{tmp}/o.md"),
        kind="investigation",
    ),
    Benchmark(
        "survey_fixed_size", "survey_fixed_size.py",
        "the survey with its subset size fixed (s = 1, 2, 3 on the sparse cells at eps <= 1, "
        "s = 2 on the others at eps <= 1): what the lookahead rule's size choice leaves",
        "none: an internal comparison (GRR's posterior mean, coupled)",
        ("--repeats", "20", "--sizes", "1", "2", "3", "--spread-sizes", "2", "--workers", "2"),
        ("survey_fixed_size.md", "survey_fixed_size.jsonl"),
        ("--repeats", "2", "--sizes", "2", "--spread-sizes", "--out", "{tmp}/f.md"),
        kind="investigation",
    ),
    Benchmark(
        "survey_lookahead_trace", "survey_lookahead_trace.py",
        "the lookahead rule's choices on one sparse population (K = 10, rho = 0.01, eps 0.5), "
        "simulating each posterior draw or the pool's mean as the population",
        "none: the rule's own simulated errors, recorded", (),
        ("survey_lookahead_trace.md",), ("--out", "{tmp}/t.md"), kind="investigation",
    ),
    Benchmark(
        "xxhash_collisions", "xxhash_collisions.py",
        "collision probability of the peers' xxhash family (BLHXX, OLHXX) over seeds",
        "exact value: 1/g", (), (), ("--k", "10", "--seeds", "4096"), kind="investigation",
    ),
    Benchmark(
        "sfp_client_memory", "sfp_client_memory.py",
        "ours' SFP at n = 1e6 (zipf32, eps 4, k 10) repeated in one process, beside the first "
        "touch of an array of its sketch reports' shape: what sets heavy_hitters_1e6's spread",
        "none: the same call repeated",
        ("--out", "benchmarks/investigations/results/sfp_client_memory.md"),
        ("sfp_client_memory.md",), ("--n", "20000", "--repeats", "1"), kind="investigation",
        needs=("xxhash",),
    ),
    Benchmark(
        "fit_default_warnings", "fit_default_warnings.py",
        "how often fit at its default draws warns on an easy problem (GRR, K = 10, n = 5,000, "
        "20 seeds)", "none: fit's own convergence thresholds (PyMC's)",
        ("--out", "benchmarks/investigations/results/fit_default_warnings.md"),
        ("fit_default_warnings.md",), ("--seeds", "2", "--out", "{tmp}/fit_default_warnings.md"),
        kind="investigation",
    ),
    Benchmark(
        "compile_cost", "compile_cost.py",
        "seconds numba compiles on the main job's first run, by function, for the whole "
        "quickstart study and for each of its mechanisms alone (the floor under one row form)",
        "none: the first run's own compilations (an empty numba cache per case)",
        ("--out", "benchmarks/investigations/results/compile_cost.md"), ("compile_cost.md",),
        None, quick_note="a first run is minutes of compiling; there is no quick run",
        kind="investigation",
    ),
    Benchmark(
        "significance", "significance.py",
        "frequent items: family-wise error, false discovery rate and true-positive rate of Wang "
        "et al.'s Bonferroni threshold, Benjamini-Hochberg and the posterior's rules (GRR, OUE, "
        "OLH; K = 50 and 20)", "none: the rules' own nominal rates (0.05)",
        ("--repeats", "200", "--posterior-repeats", "40", "--out",
         "benchmarks/investigations/results/significance.md"), ("significance.md",),
        ("--repeats", "3", "--posterior-repeats", "1", "--out", "{tmp}/significance.md"),
        kind="investigation",
    ),
    Benchmark(
        "mechanism_check", "mechanism_check.py",
        "calibration and power of check_mechanism (OUE, SUE, OLH, THE) and of GRR's in-sample "
        "and held-out posterior predictive p-values, eps 1 / 2 made and analysed (K = 10, "
        "n = 10,000, 200 tallies per cell)",
        "exact: Uniform(0, 1) p-values under the right model (KS)",
        ("--out", "benchmarks/investigations/results/mechanism_check.md",
         "--json", "benchmarks/investigations/results/mechanism_check.json"),
        ("mechanism_check.md", "mechanism_check.json"),
        ("--reps", "5", "--n", "2000", "--out", "{tmp}/mechanism_check.md"),
        kind="investigation",
    ),
    Benchmark(
        "likelihood_forms", "likelihood_forms.py",
        "us per gradient of support-form rows, compressed against packed (OUE, OLH, SUE; random "
        "masks: the crossover); fit(method='hmc') of posterior_warm's oue50 in each form",
        "none: an internal comparison (the compressed rows on the same tallies)", (),
        ("likelihood_forms.md",), ("--quick",), kind="investigation",
    ),
)
# fmt: on

REGISTRY: dict[str, Benchmark] = {b.name: b for b in BENCHMARKS_LIST}


def placeholders(args: tuple[str, ...]) -> list[str]:
    return [key for key in PLACEHOLDERS if any(key in a for a in args)]


def missing(bench: Benchmark, args: tuple[str, ...], extra: list[str]) -> str | None:
    """Why ``args`` cannot run here (a requirement or reference not found), or None."""
    for need in bench.needs:
        if need in REQUIREMENTS:
            extra_name, module = REQUIREMENTS[need]
            if importlib.util.find_spec(module) is None:
                return f"needs {need} (pip install -e '.[{extra_name}]')"
    for key in placeholders(args):
        env, option, what = PLACEHOLDERS[key]
        if option not in extra and not os.environ.get(env):
            return f"needs {what}: set {env} or pass {option}"
    return None


def resolve(args: tuple[str, ...], extra: list[str], tmp: str | None) -> list[str]:
    """``args`` with the placeholders filled in; a placeholder's option given in ``extra`` wins
    (the pair is dropped from ``args``)."""
    out: list[str] = []
    for arg in args:
        key = next((k for k in PLACEHOLDERS if k in arg), None)
        if key is not None:
            env, option, _ = PLACEHOLDERS[key]
            if option in extra:
                if out and out[-1] == option:
                    out.pop()
                continue
            arg = arg.replace(key, os.environ[env])
        if "{tmp}" in arg:
            if tmp is None:
                raise ValueError(f"{arg}: a quick argument outside a quick run")
            arg = arg.replace("{tmp}", tmp)
        out.append(arg)
    return out


def results_paths(bench: Benchmark) -> list[Path]:
    return [bench.results_dir / name for name in bench.results]
