"""PCKV-PM (key-value data) against Ye et al.'s SVEPM code, on the same reports.

The authors' key-value study (``simulation/conditional_est.py`` of yyt20080808/LDP-EM-MR) runs
their ``SVEPM`` (``ldp_reduction/protocols/MR/PCKV_EM.py``): 100,000 users of whom a share
``alpha`` in {0.03, 0.05, 0.1, 0.2} hold the key, their values two equal halves of normals
with means 0.8 and 0.3 and standard deviation 0.35^2 (a value outside [-1, 1] replaced by a
uniform draw on [0, 1)); ``eps = 1.3``; holders report PM with window half-width ``B = (e^{eps/2}
+ 9) / (10 e^{eps/2} - 10)``, the others a uniform draw on ``[-C, C]``; their EM
(``myEM_one``) runs over 1024 value bins plus a uniform component on a 1024-bin histogram of the
reports.  Their metrics: the squared error of the key's frequency ``1 - theta_absent`` and of
the mean of its values, averaged over 5 repeats.

Here the reports are drawn once per repeat by ``bayesldp.PCKVPM(1024, eps, output_bins=1024)``
(the same mechanism: its ``C`` and ``B`` are the authors') and go to both sides:

* ``ref``: their ``myEM_one(1024, hist, generateMatrix(eps, 1024), 10000, 1e-4 e^eps)`` on
  ``np.histogram(reports, 1024, (-C, C))``; the frequency and mean as their script computes
  them (their mean reads bin ``i`` as its left edge ``-1 + 2 i / 1024``);
* ``ems``: ``bayesldp``'s ``ems`` on the tally at their rule (``PCKVPM.svepm_rule``: kernel
  [1, 2, 1] while the gain exceeds 0.0003, tol ``1e-4 e^eps``, at least 2000 steps, L1 rule
  ``1 / (100 N)``, value bins alone smoothed) from their hand-set start (1/8 spread over the
  bins, 1e-7 on the first 250, 7/8 on the absence; normalised), without their nudge of the
  absence after 5,000 steps;
* ``ems_uniform``: the same from the uniform start (the start matters here: spreading mass
  evenly over the value bins looks almost like the key's absence, a direction along which the
  likelihood is nearly flat);
* ``em``: EM to the MLE (no smoothing);
* ``posterior``: ``bayesldp.fit`` with its default prior (2 chains x ``POSTERIOR_DRAWS``), the
  posterior mean; its 90% interval coverage of the frequency and the mean over the repeats.

Seconds: the estimator call alone (theirs: ``myEM_one`` from the histogram and their matrix,
which it copies into a 1024 x 1025 array in a Python loop; ours: from the tally, reading its
rows included).  Their published output (``simulation/outputs/PCKV_conditional_est``, "Ours")
is quoted beside ours.

Usage::

    python benchmarks/pckv_parity.py --reference /work/.mirror/yyt20080808+LDP-EM-MR/repo
    python benchmarks/pckv_parity.py --reference PATH --quick   # 1 cell, 1 repeat, writes nothing
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as _dt
import importlib
import io
import math
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import arviz as az
import numpy as np

import bayesldp
from bayesldp.errors import ConvergenceWarning
from bayesldp.estimators.ems import ems

sys.path.insert(0, str(Path(__file__).parent))
export_reference = importlib.import_module("numerical_parity").export_reference

OUT = Path(__file__).parent / "results" / "pckv_parity.md"
BINS = 1024
USERS = 100_000
EPSILON = 1.3
SHARES = (0.03, 0.05, 0.1, 0.2)
POSTERIOR_DRAWS = 500


def population(share: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """The authors' ``generate_Data(share, "gaussian")``: values of the holders first."""
    held = int(USERS * share)
    v = np.concatenate([rng.normal(0.8, 0.35**2, held // 2), rng.normal(0.3, 0.35**2, held // 2)])
    outside = (v < -1) | (v > 1)
    v[outside] = rng.random(int(outside.sum()))
    values = np.zeros(USERS)
    values[: v.size] = v
    holds = np.zeros(USERS, bool)
    holds[: v.size] = True
    return values, holds


def published(ref_dir: Path) -> dict[float, tuple[float, float]]:
    """Their printed "Ours" MSEs (frequency, conditional mean) per share."""
    text = (ref_dir / "simulation/outputs/PCKV_conditional_est").read_text()
    out: dict[float, list[float]] = {}
    for block in re.split(r"\n(?=MSE of)", text):
        share = re.search(r"portion ([0-9.]+)", block)
        ours = re.search(r"Ours =\s*\[([0-9.eE+-]+)", block)
        if share and ours:
            out.setdefault(float(share.group(1)), []).append(float(ours.group(1)))
    return {s: (v[0], v[1]) for s, v in out.items() if len(v) == 2}


class Reference:
    def __init__(self, ref_dir: Path) -> None:
        sys.path.insert(0, str(ref_dir))
        import matplotlib

        matplotlib.use("Agg")  # their module imports pyplot
        from ldp_reduction.protocols.MR import PCKV_EM

        self.mod = PCKV_EM
        self.matrix = PCKV_EM.generateMatrix(EPSILON, BINS)

    def estimate(self, reports: np.ndarray, c: float) -> tuple[float, float, float]:
        hist, _ = np.histogram(reports, bins=BINS, range=(-c, c))
        t0 = time.perf_counter()
        with contextlib.redirect_stdout(io.StringIO()):
            theta = self.mod.myEM_one(BINS, hist, self.matrix, 10000, 1e-4 * math.exp(EPSILON))
        secs = time.perf_counter() - t0
        value = theta[:-1] / theta[:-1].sum()
        mean = (value @ np.arange(BINS) / BINS - 0.5) * 2  # their left-edge reading
        return 1 - theta[-1], float(mean), secs


def run(ref_dir: Path, shares, repeats: int, seed: int) -> list[dict]:
    ref = Reference(ref_dir)
    mech = bayesldp.PCKVPM(BINS, EPSILON, output_bins=BINS)
    if abs(mech.values.C - ref_c(EPSILON)) > 1e-12:
        raise RuntimeError("the reference's C differs from PCKVPM's")
    warm = bayesldp.PCKVPM(16, EPSILON)
    wt = warm.tally(warm.perturb(np.arange(17).repeat(20), rng=0))
    ems(wt), bayesldp.estimate(wt, "em")  # compile numba's kernels before timing
    rows = []
    for i, share in enumerate(shares):
        values, holds = population(share, np.random.default_rng([seed, i]))
        f_true, m_true = holds.mean(), values[holds].mean()
        for r in range(repeats):
            reports = mech.perturb_pairs(values, holds, rng=np.random.SeedSequence([seed, i, r]))
            row = dict(share=share, repeat=r, f_true=f_true, m_true=m_true)
            f, m, row["ref_s"] = ref.estimate(reports, mech.values.C)
            row |= {"ref_f": f, "ref_m": m}
            tally = mech.tally(reports)
            rule = mech.svepm_rule(USERS)
            for name, start in (("ems", rule["theta0"]), ("ems_uniform", None)):
                t0 = time.perf_counter()
                est = ems(tally, **(rule | {"theta0": start}))
                row[f"{name}_s"], row[f"{name}_steps"] = time.perf_counter() - t0, est.iterations
                row[f"{name}_f"], row[f"{name}_m"] = mech.key_value(est.frequencies)
            t0 = time.perf_counter()
            est = bayesldp.estimate(tally, "em")
            row["em_s"] = time.perf_counter() - t0
            row["em_f"], row["em_m"] = mech.key_value(est.frequencies)
            t0 = time.perf_counter()
            with warnings.catch_warnings():  # r_hat is recorded, not raised
                warnings.simplefilter("ignore", ConvergenceWarning)
                idata = bayesldp.fit(tally, draws=POSTERIOR_DRAWS, chains=2, random_seed=r,
                                     progressbar=False)  # fmt: skip
            row["posterior_s"] = time.perf_counter() - t0
            f_d, m_d = mech.key_value(idata.posterior["theta"].values)
            row["posterior_f"], row["posterior_m"] = float(f_d.mean()), float(m_d.mean())
            for name, draws, truth in (("f", f_d, f_true), ("m", m_d, m_true)):
                lo, hi = np.quantile(draws, [0.05, 0.95])
                row[f"cover_{name}"] = bool(lo <= truth <= hi)
            row["r_hat"] = float(az.rhat(idata, var_names=["theta"])["theta"].max())
            rows.append(row)
            print(f"share {share} repeat {r}: ref {row['ref_s']:.1f} s, ems {row['ems_s']:.3f} s",
                  file=sys.stderr, flush=True)  # fmt: skip
    return rows


def ref_c(eps: float) -> float:
    """Their ``C = k + B`` (``SVEPM``), for the check that both sides bin alike."""
    s = math.exp(eps / 2)
    b = (s + 9) / (10 * s - 10)
    return b * math.exp(eps) / (b * math.exp(eps) - 1 - b) + b


def table(rows: list[dict], pub: dict) -> str:
    names = ("ref", "ems", "ems_uniform", "em", "posterior")
    out = [
        "| share | repeats | " + " | ".join(f"{n} MSE f" for n in names) + " | published ref MSE f"
        " | " + " | ".join(f"{n} MSE mean" for n in names) + " | published ref MSE mean |",
        "|---:|---:|" + "---:|" * (2 * len(names) + 2),
    ]
    for share in sorted({r["share"] for r in rows}):
        rs = [r for r in rows if r["share"] == share]
        mse = {(n, q): np.mean([(r[f"{n}_{q}"] - r[f"{q}_true"]) ** 2 for r in rs])
               for n in names for q in ("f", "m")}  # fmt: skip
        p = pub.get(share, (math.nan, math.nan))
        f_cells = " | ".join(f"{mse[(n, 'f')]:.2e}" for n in names)
        m_cells = " | ".join(f"{mse[(n, 'm')]:.2e}" for n in names)
        out.append(f"| {share:g} | {len(rs)} | {f_cells} | {p[0]:.2e} | {m_cells} | {p[1]:.2e} |")
    out += ["", "Median seconds and steps per estimate; the posterior's 90% equal-tailed interval "
            "coverage over the repeats.", "",
            "| share | ref s | ems s | ref / ems | ems steps | ems_uniform steps | em s | "
            "posterior s | posterior 90% covers f | covers mean | largest r_hat |",
            "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]  # fmt: skip
    for share in sorted({r["share"] for r in rows}):
        rs = [r for r in rows if r["share"] == share]
        med = {
            k: float(np.median([r[k] for r in rs]))
            for k in ("ref_s", "ems_s", "ems_steps", "ems_uniform_steps", "em_s", "posterior_s")
        }
        out.append(
            f"| {share:g} | {med['ref_s']:.2f} | {med['ems_s']:.3f} | "
            f"{med['ref_s'] / med['ems_s']:.0f}x | {med['ems_steps']:.0f} | "
            f"{med['ems_uniform_steps']:.0f} | {med['em_s']:.3f} | "
            f"{med['posterior_s']:.2f} | {sum(r['cover_f'] for r in rs)}/{len(rs)} | "
            f"{sum(r['cover_m'] for r in rs)}/{len(rs)} | {max(r['r_hat'] for r in rs):.3f} |"
        )
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reference", type=Path, required=True, help="git dir of the LDP-EM-MR mirror")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--seed", type=int, default=20261124)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    shares, repeats = (SHARES[2:3], 1) if args.quick else (SHARES, args.repeats)
    commit = subprocess.run(["git", f"--git-dir={args.reference}", "rev-parse", "HEAD"],
                            check=True, capture_output=True, text=True).stdout.strip()  # fmt: skip
    load0 = os.getloadavg()
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        export_reference(args.reference, Path(tmp))
        text = f"git --git-dir={args.reference} show HEAD:simulation/outputs/PCKV_conditional_est"
        out_file = Path(tmp) / "simulation/outputs/PCKV_conditional_est"
        out_file.parent.mkdir(parents=True, exist_ok=True)
        out_file.write_bytes(subprocess.run(text.split(), check=True, capture_output=True).stdout)
        rows = run(Path(tmp), shares, repeats, args.seed)
        pub = published(Path(tmp))
    load1 = os.getloadavg()
    header = "\n".join([
        "# PCKV-PM against Ye et al.'s SVEPM (one key, 100,000 users, eps = 1.3)",
        "",
        f"The same reports (drawn by bayesldp, seeded) go to the reference (yyt20080808/"
        f"LDP-EM-MR at {commit[:12]}) and to bayesldp; see the script's docstring for the "
        "population, the rules and the metrics. MSE: mean over repeats of the squared error of "
        "the key's frequency (f) and of the mean of its values; published: the reference "
        "repository's own printed output for its method (its own draws, 5 repeats).",
        "",
        f"- Command: `python benchmarks/pckv_parity.py --reference PATH --repeats {repeats}`",
        f"- Date: {_dt.datetime.now(_dt.UTC):%Y-%m-%d %H:%M} UTC; "
        f"{time.perf_counter() - start:.0f} s; loadavg at start {load0[0]:.2f} "
        f"{load0[1]:.2f} {load0[2]:.2f}, at end {load1[0]:.2f} {load1[1]:.2f} {load1[2]:.2f}",
        f"- Machine: {platform.machine()}, {os.cpu_count()} cores; Python "
        f"{platform.python_version()}, numpy {np.__version__}, bayesldp {bayesldp.__version__}",
        "",
    ])  # fmt: skip
    text = header + "\n" + table(rows, pub) + "\n"
    print(text)
    if not args.quick:
        OUT.write_text(text)


if __name__ == "__main__":
    main()
