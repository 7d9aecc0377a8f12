"""The smoothness prior (SmoothDensity) on square-wave reports, against Dirichlet(1) and ems_mr.

Same cells as ``adaptive_bins.py`` (Ye et al.'s SMN population, n = 4,982; SW with ``K`` input and
``K`` output bins on ``[-1, 1]``; ``eps`` in 1 and 2; the same seeded reports): ``ems_mr`` (the
authors' EMS with mixture reduction, bayesldp's), ``bayesldp.fit`` under Dirichlet(1) (the
default sampler) and under ``prior="smooth"`` (by the default sampler, and by PyMC's NUTS:
``method="nuts"``), 2 chains x 500 draws after 500 warm-up steps.  Per estimator:
Wasserstein-1 distance of the estimate (posterior mean) from the true K-bin histogram, the
absolute error of the mean (bin centres; the truth is the binned population's mean), whether
the 90% interval of the mean covers it (posteriors only), wall seconds, leapfrog steps per
draw, r_hat_max, divergences and the posterior median of the smoothness ``lambda``.  The
adaptive prior's rows on the same cells are in ``results/adaptive_bins.md``.

Usage::

    python benchmarks/smooth_prior.py            # writes benchmarks/results/smooth_prior.md
    python benchmarks/smooth_prior.py --bins 16  # one size, writes nothing
    python benchmarks/smooth_prior.py --bins 1024 --no-pymc \\
        --out benchmarks/results/smooth_prior_1024.md   # Ye et al.'s bin count
"""

from __future__ import annotations

import argparse
import datetime as _dt
import importlib
import os
import platform
import sys
import time
import warnings
from pathlib import Path

import numpy as np

import bayesldp

sys.path.insert(0, str(Path(__file__).parent))
_bins = importlib.import_module("adaptive_bins")  # w1, the cells' seeding
_parity = importlib.import_module("numerical_parity")  # the SMN population

OUT = Path(__file__).parent / "results" / "smooth_prior.md"
BINS = (16, 64, 256)


def _truth_mean(x: np.ndarray, mech) -> float:
    return float(np.histogram(x, bins=mech.k, range=(-1, 1))[0] @ mech.bin_centres / x.size)


def fit_row(tally, x: np.ndarray, mech, name: str, prior, method: str = "auto") -> dict:
    """One posterior's row."""
    start = time.perf_counter()
    with warnings.catch_warnings():  # r_hat and divergences are recorded below
        warnings.simplefilter("ignore")
        idata = bayesldp.fit(tally, prior=prior, method=method, draws=_bins.DRAWS,
                             tune=_bins.DRAWS, chains=2, cores=2, random_seed=_bins.SEED,
                             progressbar=False)  # fmt: skip
    seconds = time.perf_counter() - start
    attrs = idata.posterior.attrs
    mean = bayesldp.numerical.mean(idata, mech)
    truth = _truth_mean(x, mech)
    post = idata.posterior
    print(f"K={mech.k} eps={mech.epsilon:g} {name}: {seconds:.1f} s", file=sys.stderr, flush=True)
    return dict(bins=mech.k, eps=mech.epsilon, estimator=name, seconds=seconds,
                w1=_bins.w1(post["theta"].mean(("chain", "draw")).values, x),
                mean_err=abs(mean.mean - truth), covered=mean.lower <= truth <= mean.upper,
                steps=float(idata.sample_stats["n_steps"].mean()),
                r_hat=float(attrs["r_hat_max"]), divergences=int(attrs["divergences"]),
                lam=float(np.median(post["smoothness"].values)) if "smoothness" in post
                else np.nan)  # fmt: skip


def one_cell(x: np.ndarray, k: int, eps: float, pymc: bool = True) -> list[dict]:
    mech = bayesldp.SquareWave(k, eps, lo=-1.0, hi=1.0, output_bins=k)
    seed = np.random.SeedSequence([_bins.SEED, k, int(eps * 100)])  # as adaptive_bins.one_cell
    tally = mech.tally(mech.perturb(x, rng=seed))
    start = time.perf_counter()
    est = bayesldp.estimate(tally, "ems_mr")
    seconds = time.perf_counter() - start
    rows = [dict(bins=k, eps=eps, estimator="ems_mr", seconds=seconds,
                 w1=_bins.w1(est.frequencies, x),
                 mean_err=abs(float(est.frequencies @ mech.bin_centres) - _truth_mean(x, mech)),
                 covered=None, steps=np.nan, r_hat=np.nan, divergences=np.nan,
                 lam=np.nan)]  # fmt: skip
    for prior in (1.0, "smooth"):  # compile the sampler's kernels for this K before timing
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            bayesldp.fit(tally, prior=prior, draws=5, tune=5, chains=1, random_seed=0,
                         progressbar=False, compute_convergence_checks=False)  # fmt: skip
    rows.append(fit_row(tally, x, mech, "dir1", 1.0))
    rows.append(fit_row(tally, x, mech, "smooth", "smooth"))
    if pymc:
        rows.append(fit_row(tally, x, mech, "smooth (PyMC)", "smooth", "nuts"))
    return rows


def table(rows: list[dict]) -> str:
    lines = [
        "| bins | eps | estimator | W1 | abs error of the mean | 90% interval covers | seconds "
        "| leapfrog steps / draw | r_hat_max | divergences | smoothness (median) |",
        "|---:|---:|---|---:|---:|---|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        covered = "" if r["covered"] is None else ("yes" if r["covered"] else "no")
        cells = [f"{r['bins']}", f"{r['eps']:g}", r["estimator"], f"{r['w1']:.4f}",
                 f"{r['mean_err']:.4f}", covered, f"{r['seconds']:.2f}"]  # fmt: skip
        cells += [_bins._cell(r[key], spec) for key, spec in
                  (("steps", ".0f"), ("r_hat", ".3f"), ("divergences", ".0f"),
                   ("lam", ".3g"))]  # fmt: skip
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bins", type=int, nargs="+", default=list(BINS))
    parser.add_argument("--no-pymc", action="store_true", help="leave out PyMC's fits")
    parser.add_argument("--out", type=Path, help="write the table here (default: only for the "
                        "default bins, to results/smooth_prior.md)")  # fmt: skip
    args = parser.parse_args()
    x = _parity.population("SMN", Path("."), np.random.default_rng([_bins.SEED, 1]))
    load = os.getloadavg()
    start = time.perf_counter()
    rows = [r for k in args.bins for e in _bins.EPSILONS
            for r in one_cell(x, k, e, pymc=not args.no_pymc)]  # fmt: skip
    text = "\n".join([
        "# The smoothness prior on square-wave reports: accuracy and cost against the bins", "",
        f"- Command: `python benchmarks/{' '.join([Path(sys.argv[0]).name, *sys.argv[1:]])}`",
        f"- Date: {_dt.datetime.now(_dt.UTC):%Y-%m-%d %H:%M} UTC; "
        f"{time.perf_counter() - start:.0f} s; load average at the start {load[0]:.2f}",
        f"- Machine: {platform.machine()}, {os.cpu_count()} cores; Python "
        f"{platform.python_version()}, bayesldp {bayesldp.__version__}",
        f"- SMN population, n = {x.size:,}; SW with K input and K output bins on [-1, 1]; "
        f"fits: 2 chains x {_bins.DRAWS} draws after {_bins.DRAWS} warm-up steps, seed "
        f"{_bins.SEED}; dir1 and smooth by the default sampler (bayesldp.hmc)"
        + ("" if args.no_pymc else ", smooth (PyMC) by PyMC's NUTS (method='nuts')"), "",
        table(rows), "",
    ])  # fmt: skip
    print(text)
    if args.out is not None:
        args.out.write_text(text)
    elif tuple(args.bins) == BINS and not args.no_pymc:
        OUT.write_text(text)


if __name__ == "__main__":
    main()
