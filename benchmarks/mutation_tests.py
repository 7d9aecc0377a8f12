"""Mutation testing of the sampler core, the variance formulas and the SBC harness: does the
fast tier catch small faults?

Each mutant is one small, plausible change to the package's source: ``(file, snippet,
replacement, description)``, the snippet asserted to occur exactly once in the file (a source
that drifted away from the list fails loudly instead of testing nothing).  For each mutant the
script copies the package (``bayesldp/``, ``tests/``, ``pyproject.toml``) into a scratch
directory (:mod:`tempfile`), applies the change, runs a named test selection against the copy
(``PYTHONPATH`` = the copy; the script checks that ``bayesldp`` is imported from there) and
records whether the mutant was *killed* (some test failed or errored), *survived* (every test
passed) or timed out, with the first failing test and the time taken.

**The fast tier** (``--tier fast``, the default): :data:`FAST_TIER`, a list of test files that
all run in the default suite (no ``--runslow``).  pytest stops at the first failure (``-x``)
unless ``--all-failures``, so a killed mutant costs only the time to its first failing test;
the files are ordered cheap first.  **The slow tier** (``--tier slow``): the same files with
``--runslow`` (the slow statistical tests, SBC at L = 200 included).

**numba's cache.**  The compiled kernels (``cache=True``) are cached in ``__pycache__`` next to
their source, keyed by the source file's modification time and size and by the function's own
bytecode, *not* by the functions it calls.  The scratch copy keeps the source tree's
``__pycache__`` (copied with modification times, so an unmutated module's kernels load
without compiling); the mutated module's cached kernels are deleted, and so are those of every
module that imports it, directly or through others (a kernel inlines the compiled kernels it
calls, so a caller's cache would keep the unmutated code).  ``--cold`` instead points
``NUMBA_CACHE_DIR`` at an empty directory for each mutant (everything compiles, minutes more).

**Results** are kept per mutant and tier in ``benchmarks/results/mutation_tests.json`` (each run
updates the entries it ran, so the list can be run in pieces) and rendered to
``benchmarks/results/mutation_tests.md`` with the date, commit and machine load of each entry.
A mutant with a ``harmless`` note is one whose output is provably the same as, or distributed
as, the original's; the note gives the proof and the run is still recorded.

Usage::

    python benchmarks/mutation_tests.py --list
    nice -n 15 python benchmarks/mutation_tests.py                      # every mutant, fast tier
    nice -n 15 python benchmarks/mutation_tests.py --only hmc-leaf-weight,none
    nice -n 15 python benchmarks/mutation_tests.py --tier slow --only sbc-first-99
    python benchmarks/mutation_tests.py --render                        # the table from the JSON

``none`` is the unmutated copy: the tier must pass on it (run it after changing the tier).
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import datetime
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
JSON_OUT = RESULTS / "mutation_tests.json"
MD_OUT = RESULTS / "mutation_tests.md"

#: the fast tier: test files of the default suite, cheapest first (``-x`` stops at the first
#: failure); every test in them runs without ``--runslow``
FAST_TIER = [
    "tests/estimators/test_oracle_variance.py",
    "tests/mechanisms/test_grr.py",
    "tests/mechanisms/test_histogram.py",
    "tests/bayes/test_prior.py",
    "tests/bayes/test_calibration.py",
    "tests/bayes/test_exact.py",
    "tests/bayes/test_sampler_reference.py",
    "tests/bayes/test_laplace.py",
    "tests/bayes/test_sgld.py",
    "tests/bayes/test_adaptive_prior.py",
    "tests/bayes/test_hmc.py",
    "tests/bayes/test_calibration_power.py",
]
SLOW_TIER = FAST_TIER  # the same files with --runslow


@dataclasses.dataclass(frozen=True)
class Mutant:
    id: str
    file: str
    snippet: str
    replacement: str
    description: str
    harmless: str = ""


#: the HMC sampler's modules (bayesldp/bayes/hmc/) that the mutants change
HMC_TREE = "bayesldp/bayes/hmc/tree.py"
HMC_ADAPTATION = "bayesldp/bayes/hmc/adaptation.py"
HMC_DENSITIES = "bayesldp/bayes/hmc/densities.py"
HMC_SMOOTH = "bayesldp/bayes/hmc/smooth.py"
HMC_RUN = "bayesldp/bayes/hmc/run.py"
MUTANTS = [
    # ---- the first four: faults the fast tier must catch
    Mutant("hmc-leaf-weight", HMC_TREE, "st_sc[sp, 2] = -delta", "st_sc[sp, 2] = -0.9 * delta",
           "NUTS: each new leaf's log weight -delta scaled by 0.9"),
    Mutant("hmc-momentum", HMC_TREE, "_matvec(mom_factor, noise, lpm)",
           "_matvec(mom_factor, 1.1 * noise, lpm)",
           "NUTS: the initial momentum times 1.1"),
    Mutant("sbc-first-99", "bayesldp/bayes/calibration.py",
           "rank = rank_statistics(truth, thinned.draws, gen)",
           "rank = rank_statistics(truth, theta.reshape(-1, k)[:size], gen)",
           "SBC: ranks against the first `size` un-thinned draws"),
    Mutant("oracle-theta-term", "bayesldp/mechanisms/base.py",
           "+ theta * (1 - p - q) / (n * (p - q))", "+ 1.1 * theta * (1 - p - q) / (n * (p - q))",
           "pure protocols' oracle variance: the theta term times 1.1"),
    # ---- leapfrog
    Mutant("leapfrog-second-kick", HMC_TREE,
           "        p[i] += half * grad[i]\n    _matvec(inv_metric, p, v)\n    return lp",
           "        p[i] += eps * grad[i]\n    _matvec(inv_metric, p, v)\n    return lp",
           "leapfrog: the closing momentum half-kick is a full kick (not time-reversible)"),
    Mutant("leapfrog-stale-velocity", HMC_TREE,
           "        p[i] += half * grad[i]\n    _matvec(inv_metric, p, v)\n    return lp",
           "        p[i] += half * grad[i]\n    return lp",
           "leapfrog: the velocity M^-1 p not recomputed after the closing kick (stale kinetic "
           "energy in the leaf's weight and in the U-turn check)"),
    # ---- tree building and its weights
    Mutant("tree-merge-weight", HMC_TREE, "                st_sc[ia, 2] = merged\n",
           "                st_sc[ia, 2] = st_sc[ib, 2]\n",
           "NUTS: a merged sub-tree keeps its right half's log weight instead of the log-sum"),
    Mutant("tree-merge-choice", HMC_TREE,
           "if math.log(_uniform(rstate)) < st_sc[ib, 2] - merged:",
           "if math.log(_uniform(rstate)) < st_sc[ia, 2] - merged:",
           "NUTS: inside a sub-tree the right half's proposal is taken with the left half's "
           "weight share"),
    Mutant("tree-invalid-subtree", HMC_TREE,
           "        if not valid:\n            break\n        depth += 1",
           "        depth += 1",
           "NUTS: a sub-tree that turned or diverged still offers its proposal and extends "
           "the trajectory"),
    Mutant("tree-log-size", HMC_TREE, "        log_size = _logaddexp(log_size, st_sc[0, 2])\n",
           "        log_size = st_sc[0, 2]\n",
           "NUTS: the trajectory's log weight is replaced by the new sub-tree's instead of "
           "accumulated (biased progressive sampling against the wrong total)"),
    # ---- step size (dual averaging) and metric adaptation
    Mutant("dual-averaging-sign", HMC_ADAPTATION, "eta * (self.target_accept - accept)",
           "eta * (accept - self.target_accept)",
           "dual averaging: the acceptance error's sign flipped"),
    Mutant("dual-averaging-gamma", HMC_ADAPTATION, "math.sqrt(self.count) / 0.05 * self.s_bar",
           "math.sqrt(self.count) * 0.05 * self.s_bar",
           "dual averaging: gamma = 0.05 multiplies instead of dividing (eps barely adapts)"),
    Mutant("metric-dense-factor", HMC_ADAPTATION,
           "return np.ascontiguousarray(np.linalg.inv(chol).T)",
           "return np.ascontiguousarray(np.linalg.inv(chol))",
           "dense metric: the momentum factor chol(M^-1)^-1 without its transpose (momentum "
           "covariance (L^T L)^-1 instead of (L L^T)^-1)"),
    Mutant("metric-diag-factor", HMC_ADAPTATION,
           "return np.ascontiguousarray(1.0 / np.sqrt(inv_metric))",
           "return np.ascontiguousarray(np.sqrt(inv_metric))",
           "diagonal metric: momentum drawn with variance M^-1 instead of M"),
    Mutant("metric-stale-factor", HMC_RUN,
           "inv_metric, factor = np.ascontiguousarray(new_metric), new_factor",
           "inv_metric = np.ascontiguousarray(new_metric)",
           "metric adaptation: a window's new metric used in the leapfrog steps but the momentum "
           "still drawn from the previous metric's factor"),
    # ---- the adaptive prior: its grid and the joint scheme
    Mutant("prior-grid-norm", "bayesldp/bayes/prior.py",
           "self.c = self.log_w + gammaln(self._k * self.a) - self._k * gammaln(self.a)",
           "self.c = self.log_w + gammaln(self._k * self.a) - gammaln(self.a)",
           "adaptive prior: the Dirichlet normaliser's K lgamma(a) written lgamma(a)"),
    Mutant("prior-grid-weights", "bayesldp/bayes/prior.py",
           "z = (self.log_a - self.log_a_mean) / self.log_a_sd",
           "z = (self.log_a - self.log_a_mean) / (2 * self.log_a_sd)",
           "adaptive prior: the grid's normal weights with twice the stated sd of log a"),
    Mutant("joint-jacobian", HMC_DENSITIES,
           "+ a * s_total - 0.5 * ((s - mu) / sd) ** 2",
           "+ (a - 1.0) * s_total - 0.5 * ((s - mu) / sd) ** 2",
           "joint scheme: Dirichlet(a) density on the simplex, the ALR Jacobian (sum log theta) "
           "left out"),
    Mutant("joint-log-a-prior", HMC_DENSITIES,
           "+ a * s_total - 0.5 * ((s - mu) / sd) ** 2",
           "+ a * s_total - 0.5 * ((s - mu) / (1.2 * sd)) ** 2",
           "joint scheme: the normal prior on log a 20 % wider in the log-density"),
    Mutant("exact-adaptive-grid-weights", "bayesldp/bayes/exact.py",
           "log_post_a = prior.log_w + evidence", "log_post_a = evidence",
           "exact mixture under the adaptive prior: p(a_j | tally) without the grid's prior "
           "weights"),
    # ---- the smoothness prior
    Mutant("smooth-rw2-jacobian", HMC_DENSITIES,
           "lp += -0.5 * z * z - (1.0 - wj) * log_sd",
           "lp += -0.5 * z * z - 0.5 * (1.0 - wj) * log_sd",
           "smoothness prior: half the log-Jacobian of the partially non-centred RW2 "
           "coefficients in the log-density"),
    Mutant("smooth-slope-prior", HMC_DENSITIES,
           "- 0.5 * ((s - mu) / sd) ** 2 - 0.5 * (b / sb) ** 2",
           "- 0.5 * ((s - mu) / sd) ** 2 - 0.5 * (b / (2.0 * sb)) ** 2",
           "smoothness prior: the slope's normal prior twice as wide in the log-density"),
    Mutant("smooth-ems-weights", HMC_SMOOTH,
           "    return _SmoothTarget(tally, prior, information)",
           "    return _SmoothTarget(tally, prior)",
           "smoothness prior: non-centring weights from the EMS estimate, the pilot chain's "
           "draws ignored"),
    Mutant("smooth-mean-information", HMC_SMOOTH,
           "np.quantile(information, quantile, axis=0)", "np.mean(information, axis=0)",
           "smoothness prior: non-centring weights from the pilot's mean information instead "
           "of its 10 % quantile"),
    # ---- laplace's importance weights
    Mutant("laplace-weight-sign", "bayesldp/bayes/laplace.py",
           "_psis(log_ratio - np.max(log_ratio))", "_psis(np.max(log_ratio) - log_ratio)",
           "laplace: importance log weights surrogate / exact instead of exact / surrogate"),
    Mutant("laplace-remainder", "bayesldp/bayes/laplace.py",
           "r = np.log1p(x) - x + 0.5 * x * x", "r = np.log1p(x) - x + 0.5 * x * x * x",
           "laplace: the log-likelihood remainder's quadratic term written as a cube"),
    # ---- SGLD
    Mutant("sgld-cir-noise", "bayesldp/bayes/sgld_step.py", "quarter_gw = 0.25 * gamma * metric",
           "quarter_gw = 0.5 * gamma * metric",
           "SGLD (expanded-mean metric, the default): the CIR transition's scale doubled"),
    Mutant("sgld-euler-drift", "bayesldp/bayes/sgld_step.py", "np.abs(phi + 0.5 * gamma * grad",
           "np.abs(phi + gamma * grad",
           "SGLD (identity metric, the paper's step): drift gamma grad instead of gamma/2 grad"),
    Mutant("sgld-frozen-rate", "bayesldp/bayes/sgld_step.py",
           "bt = np.clip(half_gw * (h + 1.0 - total), -700.0, 50.0)",
           "bt = np.clip(half_gw * (h - total), -700.0, 50.0)",
           "SGLD (expanded-mean metric): the frozen CIR rate b = h + 1 - S without its 1",
           harmless="the 1 is the Ito term's phi_i part; without it each phi_i's drift loses "
           "(w_i / 2) phi_i = (1/2) M_ii d_i V with V = -log S (M = diag(w S phi)), the "
           "gradient of a function of S alone, so in continuous time the target changes only "
           "S's marginal (Gamma(A) to Gamma(A - 1)), never theta's, and the scale refresh "
           "(default with this metric) redraws S from Gamma(A) after every update; what is "
           "left is a change in the step's O(gamma) discretisation error (the w_i differ), "
           "below what any test resolves"),
    Mutant("sgld-tempered", "bayesldp/bayes/sgld_step.py",
           "bt = np.clip(half_gw * (h + 1.0 - total), -700.0, 50.0)",
           "bt = np.clip(half_gw * (0.8 * h + 1.0 - total), -700.0, 50.0)",
           "SGLD (expanded-mean metric): the data term of the frozen CIR rate times 0.8 (a "
           "tempered likelihood: posterior variances about 25 % too wide)"),
    # ---- the exact mixture
    Mutant("exact-weight-beta", "bayesldp/bayes/exact.py",
           "- gammaln(prior.alpha.sum() + exponents.sum(axis=1))\n",
           "- gammaln(prior.alpha.sum() + exponents.sum(axis=1) + 1.0)\n",
           "exact mixture: the component weights' Beta normaliser off by one in its total"),
    Mutant("exact-moments", "bayesldp/bayes/exact.py", "within_w = weights / (conc + 1.0)",
           "within_w = weights / conc",
           "exact mixture: the within-component covariance divides by B instead of B + 1"),
    # ---- oracle variances
    Mutant("oracle-channel-cov", "bayesldp/mechanisms/base.py",
           "cov = np.diag(theta @ p) - (p.T * theta) @ p",
           "cov = np.diag(theta @ p) - np.outer(theta @ p, theta @ p)",
           "channel mechanisms' oracle variance: the reports' multinomial covariance (a random "
           "population) instead of the fixed population's"),
    Mutant("oracle-histogram", "bayesldp/mechanisms/histogram.py",
           "np.full(theta.shape, 2.0 * self.scale**2 / n)",
           "np.full(theta.shape, self.scale**2 / n)",
           "histogram encoding's oracle variance: Laplace variance b^2 instead of 2 b^2"),
    # ---- SBC ranks
    Mutant("sbc-ties", "bayesldp/bayes/calibration_statistics.py",
           "np.floor(gen.random(ties.shape) * (ties + 1))",
           "np.floor(gen.random(ties.shape) * ties)",
           "SBC ranks: ties split over 0..ties-1 instead of 0..ties (never all below)"),
    Mutant("sbc-loglik-unthinned", "bayesldp/bayes/calibration.py",
           "loglik_rank=int(loglik_ranks(tally, truth, thinned.draws, gen))",
           "loglik_rank=int(loglik_ranks(tally, truth, theta.reshape(-1, k)[:size], gen))",
           "SBC: the log-likelihood rank against the first `size` un-thinned draws"),
]
#: rendered under the tables
NOTES = """## Notes

* Which test kills a mutant depends on the order of the tier's files (pytest stops at the first
  failure); the statistical kills are on fixed seeds, so a row is reproducible on its commit.
* Some hmc mutants are killed through efficiency rather than a bias check: the step-size
  mutants and two momentum-factor mutants (metric-dense-factor, metric-stale-factor) make `fit`
  warn (the suite turns warnings into errors) or drop the ESS of
  `test_sbc_replication_with_the_default_sampler` below 50, before the tier reaches
  `test_sampler_reference`.  For the step-size mutants that is all there is to see: NUTS is
  exact for *any* step size and metric, so a wrong adaptation shows only as inefficiency
  (`test_sampler_reference` also asserts the mean acceptance statistic within 0.15 of its
  target).  The two momentum-factor mutants do bias the draws (the momentum's law no longer
  matches the kinetic energy); whether the moment checks alone catch them was not run.  For the
  same reason as the step size the list has no mutant of the gradient alone: a leapfrog step
  with any position-dependent force is a composition of shears, volume-preserving and
  reversible, so NUTS with a wrong gradient still targets the right density (only slower).
* The momentum factor, the leaf weights, the kinetic energy and the trajectory's bookkeeping are
  where a mutant biases the draws; `tests/bayes/test_sampler_reference.py` checks 12 moments and
  tail masses of 400,000 NUTS draws (ALR; 200,000 on log-gamma
  coordinates) against the enumerated GRR posterior on a 4-MCSE scale, and the nested and
  joint schemes, the smoothness prior, SGLD and the survey's posterior against exact or
  quadrature references (each docstring gives the smallest bias it sees).
"""
NONE = Mutant("none", "", "", "", "the unmutated copy (the tier must pass)")
BY_ID = {m.id: m for m in [NONE, *MUTANTS]}
assert len(BY_ID) == len(MUTANTS) + 1, "duplicate mutant ids"


# ---------------------------------------------------------------------------- scratch copies
def _module_name(path: Path, root: Path) -> str:
    rel = path.relative_to(root).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _importers(pkg_root: Path, target: str) -> set[Path]:
    """The package's modules that import ``target`` (a dotted name), directly or through others,
    and ``target``'s own file: the ones whose cached kernels may hold its compiled code."""
    imports: dict[str, set[str]] = {}
    files: dict[str, Path] = {}
    for path in (pkg_root / "bayesldp").rglob("*.py"):
        name = _module_name(path, pkg_root)
        files[name] = path
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found.add(node.module)
                found.update(f"{node.module}.{alias.name}" for alias in node.names)
        imports[name] = found
    hit = {target}
    changed = True
    while changed:
        changed = False
        for name, found in imports.items():
            if name not in hit and found & hit:
                hit.add(name)
                changed = True
    return {files[name] for name in hit if name in files}


def _drop_numba_cache(module_file: Path) -> int:
    cache = module_file.parent / "__pycache__"
    n = 0
    for pattern in (f"{module_file.stem}.*.nbi", f"{module_file.stem}.*.nbc"):
        for f in cache.glob(pattern):
            f.unlink()
            n += 1
    return n


def make_copy(dest: Path, mutant: Mutant) -> Path:
    """The package, tests and pyproject in ``dest`` with ``mutant`` applied; returns ``dest``."""
    ignore = shutil.ignore_patterns("*.pyc", ".pytest_cache", ".hypothesis")
    keep_nb = shutil.ignore_patterns("*.pyc")  # keep numba's cache, modification times too
    shutil.copytree(ROOT / "bayesldp", dest / "bayesldp", ignore=keep_nb,
                    copy_function=shutil.copy2)  # fmt: skip
    shutil.copytree(ROOT / "tests", dest / "tests", ignore=ignore, copy_function=shutil.copy2)
    shutil.copy2(ROOT / "pyproject.toml", dest / "pyproject.toml")
    if mutant.file:
        path = dest / mutant.file
        text = path.read_text()
        count = text.count(mutant.snippet)
        if count != 1:
            raise SystemExit(
                f"mutant {mutant.id}: the snippet occurs {count} times in {mutant.file} "
                f"(expected exactly once; the source drifted?):\n{mutant.snippet}"
            )
        path.write_text(text.replace(mutant.snippet, mutant.replacement))
        target = _module_name(path, dest)
        for module in _importers(dest, target):
            _drop_numba_cache(module)
    return dest


# ---------------------------------------------------------------------------- one run
def _machine() -> dict:
    load = os.getloadavg()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, text=True,
                            capture_output=True).stdout.strip()  # fmt: skip
    dirty = subprocess.run(["git", "status", "--porcelain", "bayesldp", "tests"], cwd=ROOT,
                           text=True, capture_output=True).stdout.strip()  # fmt: skip
    return {
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "commit": commit + ("+dirty" if dirty else ""),
        "load": f"{load[0]:.1f}/{os.cpu_count()} cpus",
        "host": platform.node(),
    }


def run_mutant(mutant: Mutant, tier: str, timeout: float, all_failures: bool, cold: bool,
               tests: list[str] | None = None) -> dict:
    started = time.perf_counter()
    machine = _machine()
    with tempfile.TemporaryDirectory(prefix=f"mut-{mutant.id}-") as tmp:
        dest = make_copy(Path(tmp) / "src", mutant)
        env = dict(os.environ, PYTHONPATH=str(dest), MPLBACKEND="Agg")
        if cold:
            env["NUMBA_CACHE_DIR"] = str(Path(tmp) / "numba")
        probe = [sys.executable, "-c", "import bayesldp; print(bayesldp.__file__)"]
        where = subprocess.run(probe, cwd=dest, env=env, text=True, capture_output=True).stdout
        if not where.strip().startswith(str(dest)):
            raise SystemExit(f"bayesldp imported from {where!r}, not from the copy {dest}")
        junit = Path(tmp) / "junit.xml"
        files = tests or (FAST_TIER if tier == "fast" else SLOW_TIER)
        files = [f for f in files if (dest / f.split("::")[0]).exists()]
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o",
               "addopts=--strict-markers", f"--junitxml={junit}", *files]  # fmt: skip
        if not all_failures:
            cmd.append("-x")
        if tier == "slow":
            cmd.append("--runslow")
        try:
            proc = subprocess.run(cmd, cwd=dest, env=env, text=True, capture_output=True,
                                  timeout=timeout)  # fmt: skip
            code, tail = proc.returncode, proc.stdout[-3000:]
        except subprocess.TimeoutExpired as exc:
            code, tail = None, (exc.stdout or b"")[-3000:]
            tail = tail.decode() if isinstance(tail, bytes) else tail
        failed, n_tests, message = [], 0, ""
        if junit.exists():
            for case in ET.parse(junit).getroot().iter("testcase"):
                n_tests += 1
                bad = case.find("failure")
                bad = case.find("error") if bad is None else bad
                if bad is not None:
                    failed.append(f"{case.get('classname')}::{case.get('name')}")
                    if not message:
                        message = " ".join((bad.get("message") or "").split())[:160]
    seconds = time.perf_counter() - started
    if code is None:
        status = "timeout"
    elif code == 0:
        status = "survived"
    elif code == 1 and failed:
        status = "killed"
    else:
        status = f"error (pytest exit {code})"
    return {
        "id": mutant.id,
        "tier": tier,
        "status": status,
        "failed": failed,
        "message": message,
        "tests_run": n_tests,
        "seconds": round(seconds, 1),
        **machine,
        "tail": tail if status.startswith("error") or status == "timeout" else "",
    }


# ---------------------------------------------------------------------------- the table
def load_results() -> dict:
    if JSON_OUT.exists():
        return json.loads(JSON_OUT.read_text())
    return {}


def render(results: dict) -> str:
    lines = [
        "# Mutation tests",
        "",
        "Written by `benchmarks/mutation_tests.py` (its docstring: the scratch copy, the numba "
        "cache, the tiers).  Each row is one small change to the package run against a test "
        "tier; *killed* means some test failed (the first failing test is listed: pytest ran "
        "with `-x`), *survived* that every test passed.  Date, commit (of the unmutated tree) "
        "and the 1-minute load average are those of the row's own run.",
        "",
        "Fast tier (default suite, no `--runslow`): " + ", ".join(f"`{f}`" for f in FAST_TIER),
        "",
    ]
    for tier in ("fast", "slow"):
        rows = [(m, results.get(f"{tier}:{m.id}")) for m in [NONE, *MUTANTS]]
        if tier == "slow" and not any(r for _, r in rows):
            continue
        lines += [f"## {tier} tier", "",
                  "| mutant | file | change | result | first failing test | tests run | s "
                  "| date | commit | load |",
                  "|---|---|---|---|---|---:|---:|---|---|---|"]  # fmt: skip
        for m, r in rows:
            change = m.description + (f" **Harmless:** {m.harmless}" if m.harmless else "")
            if r is None:
                lines.append(f"| {m.id} | {m.file} | {change} | not run | | | | | | |")
                continue
            first = r["failed"][0].replace("tests.", "", 1) if r["failed"] else ""
            more = f" (+{len(r['failed']) - 1})" if len(r["failed"]) > 1 else ""
            why = r.get("message", "").replace("|", "/")
            why = f": {why}" if why else ""
            lines.append(
                f"| {m.id} | {m.file} | {change} | **{r['status']}** | {first}{more}{why} | "
                f"{r['tests_run']} | {r['seconds']:.0f} | {r['date']} | {r['commit']} | "
                f"{r['load']} |"
            )
        counts: dict[str, int] = {}
        for m, r in rows:
            if m.id != "none" and r is not None:
                counts[r["status"]] = counts.get(r["status"], 0) + 1
        commits: dict[str, int] = {}
        for _, r in rows:
            if r is not None:
                commits[r["commit"]] = commits.get(r["commit"], 0) + 1
        lines += ["", "Totals: " + ", ".join(f"{v} {k}" for k, v in sorted(counts.items()))
                  + "; rows by commit: " + ", ".join(f"{c} {n}" for c, n in commits.items()), ""]
    return "\n".join(lines) + "\n" + NOTES


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tier", choices=("fast", "slow"), default="fast")
    parser.add_argument("--only", help="comma-separated mutant ids (default: all, and 'none')")
    parser.add_argument("--list", action="store_true", help="list the mutants and exit")
    parser.add_argument("--render", action="store_true", help="rewrite the table and exit")
    parser.add_argument("--timeout", type=float, default=1200.0, help="seconds per mutant")
    parser.add_argument("--all-failures", action="store_true", help="no -x: every failure")
    parser.add_argument("--cold", action="store_true", help="compile every kernel afresh")
    parser.add_argument("--no-write", action="store_true", help="print, do not store results")
    parser.add_argument("--tests", help="comma-separated test paths instead of the tier's "
                        "(exploration: implies --no-write)")
    args = parser.parse_args(argv)
    if args.tests:
        args.no_write = True
    if args.list:
        for m in [NONE, *MUTANTS]:
            print(f"{m.id:24s} {m.file:34s} {m.description}")
        return
    results = load_results()
    if not args.render:
        ids = args.only.split(",") if args.only else [NONE.id, *(m.id for m in MUTANTS)]
        unknown = [i for i in ids if i not in BY_ID]
        if unknown:
            raise SystemExit(f"unknown mutant ids: {unknown}; see --list")
        for i in ids:
            r = run_mutant(BY_ID[i], args.tier, args.timeout, args.all_failures, args.cold,
                           args.tests.split(",") if args.tests else None)
            first = r["failed"][0] if r["failed"] else ""
            print(f"{i:24s} {r['status']:10s} {r['seconds']:7.1f} s  {first}", flush=True)
            if r["tail"]:
                print(r["tail"])
            if not args.no_write:
                results[f"{args.tier}:{i}"] = r
                JSON_OUT.write_text(json.dumps(results, indent=1, sort_keys=True) + "\n")
    if not args.no_write:
        MD_OUT.write_text(render(results))


if __name__ == "__main__":
    main()
