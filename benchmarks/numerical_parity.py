"""Numerical EM and EM-MR against Ye et al.'s code (LDP-EM-MR): SW and PM, 1024 bins.

The reference is the public repository yyt20080808/LDP-EM-MR, given as a local git mirror; its
Python files are exported to a temporary directory and imported from there (nothing of it is
copied into bayesldp).  Settings are those of its ``simulation/distirbution_est.py`` and
``mean_est.py``: values on ``[-1, 1]``, 1024 input bins and 1024 output bins, SW's and PM's
transforms, their EMS (EM with a smoothing step) and their EM-MR (``EMS_reduct``).

Populations (drawn once per seed, our own code following theirs):

* ``SMN``: ``distirbution_est.generate_SMN1000(ifsmall=False)``, 2,500 draws of
  N(0.7, 0.35^2) and 2,500 of N(0.212, 0.35^2) (their code passes ``sigma**2 = 0.1225`` as the
  scale), those outside [-1, 1] dropped;
* ``Income``: their ``generate_Incomedata`` on ``incomeData/2013.csv`` only (A02650 > 0, values
  above 200,000 replaced by ``100,000 U``, min-max scaled to [-1, 1], rounded to 4 digits):
  the mirror does not hold the blob of ``2014.csv`` nor ``SFCDATA/sfc.csv``, so SFC is absent
  and Income is the 2013 half.

For each population, mechanism, epsilon and repeat, reports are drawn once with bayesldp's
``SquareWave`` / ``Piecewise`` (seeded) and the *same* reports go to both sides:

* ``ref_ems``: SW: their ``SW.EMS`` (EM + [1, 4, 1] smoothing while the log-likelihood gain
  exceeds 0.003; stop when the gain falls below ``1e-3 e^eps`` after step 2, or when the L1
  change of theta is at most ``1/N``, at most 10,000 steps) on the histogram of the reports
  and their transform (captured from ``sw``); PM: their ``PM_E(ifReduct=False)``, i.e.
  ``PM_EM.EMS`` ([1, 2, 1] smoothing at every step, same rule, 5,000 steps);
* ``ref_em_mr``: their ``EMS_reduct`` (SW: with ``sw_reduct``'s threshold; PM:
  ``PM_E(ifReduct=True, remained=1/4)``);
* ``ems_mr``: ``bayesldp.estimate(tally, "ems_mr")``, bayesldp's EM-MR over contiguous windows
  of ordered bins on the authors' schedule, with its defaults (their threshold, tolerance and
  cap for SW and PM);
* bayesldp on the tally: ``ems`` (``bayesldp.estimators.ems``: their EMS rule, same kernel,
  smoothing condition, tolerance and cap; so the EMS seconds compare the same computation),
  ``ibu`` at their log-likelihood rule (``tol = 1e-3 e^eps``, 10,000
  steps; no smoothing) and ``em_mr`` (its default threshold and tolerance, computed by
  :func:`em_mr_defaults` because ``em_mr`` itself takes O(k^4) to get them at k = 1024);
* ``posterior``: the posterior mean of ``bayesldp.fit(tally)`` with its default prior (on
  numerical reports the smoothness prior, ``SmoothDensity``), and ``dir1`` the same under
  Dirichlet(1) (``prior=1.0``); 2 chains of ``POSTERIOR_DRAWS`` draws after as many warm-up
  steps (their largest r_hat per cell is printed, not raised).

Metrics: ``W1``: Wasserstein-1 distance on [-1, 1] between the estimated distribution over the
1024 bins and the population's histogram (``sum |F_est - F_true| * 2/1024``); ``wd_authors``:
the authors' own number, ``scipy.stats.wasserstein_distance(N theta, true counts)`` (the
distance between the two *sets of bin counts*, as printed in their ``outputs/Distribution_est``);
``mean AE``: ``|sum theta_i c_i - mean(x)|`` with bin centres ``c_i``; seconds of the estimate
alone (the reference: its EM function only, transform already built) and EM steps.

Usage::

    python benchmarks/numerical_parity.py --reference /work/.mirror/yyt20080808+LDP-EM-MR/repo
    python benchmarks/numerical_parity.py --reference PATH --quick   # 1 cell, writes nothing
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as _dt
import io
import os
import platform
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.stats import wasserstein_distance

import bayesldp
from bayesldp.errors import ConvergenceWarning
from bayesldp.estimators.ems import ems

BINS = 1024
POSTERIOR_DRAWS = 500
OUT = Path(__file__).parent / "results" / "numerical_parity.md"
#: (population, mechanism, eps) cells of the full run; the authors' scripts run eps = 1 and 2
#: (``distirbution_est``: PM at 2, SW hard-coded at 1; ``mean_est``: both at 1).
CELLS = (
    ("SMN", "SW", 1.0),
    ("SMN", "SW", 2.0),
    ("Income", "SW", 1.0),
    ("SMN", "PM", 2.0),
)


def export_reference(git_dir: Path, dest: Path) -> None:
    """Write the mirror's Python files and ``incomeData/2013.csv`` (its HEAD) under ``dest``."""
    names = subprocess.run(
        ["git", f"--git-dir={git_dir}", "ls-tree", "-r", "--name-only", "HEAD"],
        check=True, capture_output=True, text=True,
    ).stdout.split()  # fmt: skip
    for name in names:
        if (name.endswith(".py") and "__pycache__" not in name) or name.endswith("2013.csv"):
            text = subprocess.run(
                ["git", f"--git-dir={git_dir}", "show", f"HEAD:{name}"],
                check=True, capture_output=True,
            ).stdout  # fmt: skip
            path = dest / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(text)


def population(name: str, ref_dir: Path, rng: np.random.Generator) -> np.ndarray:
    if name == "SMN":
        x = np.concatenate([rng.normal(0.7, 0.35**2, 2500), rng.normal(0.212, 0.35**2, 2500)])
        return x[(x >= -1) & (x <= 1)]
    csv = ref_dir / "ldp_reduction/protocols/opendata/incomeData/2013.csv"
    v = pd.read_csv(csv, usecols=["A02650"])["A02650"].to_numpy(dtype=float)
    v = v[v > 0]
    big = v > 200_000
    v[big] = 100_000 * rng.random(int(big.sum()))
    return np.round(2 * (v - v.min()) / (v.max() - v.min()) - 1, 4)


class _CountingNumpy:
    """Stands in for ``np`` in the reference's modules; counts ``np.inner`` (one per EM step)."""

    def __init__(self) -> None:
        self.inner_calls = 0

    def inner(self, *a, **k):
        self.inner_calls += 1
        return np.inner(*a, **k)

    def __getattr__(self, name):
        return getattr(np, name)


class Reference:
    """The authors' estimators, imported from the exported tree, timed on the EM call alone."""

    def __init__(self, ref_dir: Path) -> None:
        sys.path.insert(0, str(ref_dir))
        from ldp_reduction.protocols.MR import PM_EM_reduction as pm_mr
        from ldp_reduction.protocols.MR import SW_EM_reduction as sw_mr  # noqa: F401
        from ldp_reduction.protocols.numericalProtocols import PM_EM as pm_em
        from ldp_reduction.protocols.numericalProtocols import SW as sw

        self.sw, self.pm_mr, self.pm_em = sw, pm_mr, pm_em
        self.counter = _CountingNumpy()
        for mod in (sw, pm_mr, pm_em):
            mod.np = self.counter
        self.last: dict = {}
        orig_ems, orig_red = pm_mr.EMS, pm_mr.EMS_reduct

        def timed(func, key):
            def wrapper(*args):
                ns_hist, transform = (args[1], args[2]) if key == "ems" else (args[2], args[3])
                self.last.update(transform=np.array(transform), hist=np.array(ns_hist))
                c0, t0 = self.counter.inner_calls, time.perf_counter()
                out = func(*args)
                self.last.update(seconds=time.perf_counter() - t0,
                                 steps=self.counter.inner_calls - c0)  # fmt: skip
                return out

            return wrapper

        pm_mr.EMS, pm_mr.EMS_reduct = timed(orig_ems, "ems"), timed(orig_red, "red")
        self._sw_transforms: dict[float, np.ndarray] = {}

    def sw_transform(self, eps: float) -> np.ndarray:
        """SW's transform as ``sw`` builds it (captured at its EMS call, which is skipped)."""
        if eps not in self._sw_transforms:

            class _Stop(Exception):
                pass

            box = {}

            def grab(n, ns_hist, transform, *rest):
                box["T"] = transform
                raise _Stop

            orig, self.sw.EMS = self.sw.EMS, grab
            try:
                self.sw.sw(np.zeros(4), 0, 1, eps)
            except _Stop:
                pass
            finally:
                self.sw.EMS = orig
            self._sw_transforms[eps] = box["T"]
        return self._sw_transforms[eps]

    def _run(self, func, *args):
        c0, t0 = self.counter.inner_calls, time.perf_counter()
        with contextlib.redirect_stdout(io.StringIO()):
            theta = func(*args)
        return np.asarray(theta, float), time.perf_counter() - t0, self.counter.inner_calls - c0

    def sw_ems(self, hist: np.ndarray, eps: float, transform: np.ndarray | None = None):
        """Their ``SW.EMS`` on SW's transform, or on ``transform`` (output x input bins: it
        takes any channel, e.g. the Laplace mechanism's)."""
        e = float(np.exp(eps))
        t = self.sw_transform(eps) if transform is None else transform
        return self._run(self.sw.EMS, t.shape[1], hist, t, 10000, 1e-3 * e)

    def sw_em_mr(self, hist: np.ndarray, eps: float, transform: np.ndarray | None = None):
        """Their ``EMS_reduct`` as ``sw_reduct`` calls it, on SW's transform or ``transform``."""
        e, n = float(np.exp(eps)), int(hist.sum())
        throd = 0.4 / np.sqrt(e) / (np.log(n) - 1)  # sw_reduct's threshold
        t = (self.sw_transform(eps) if transform is None else transform).copy()  # written into
        return self._run(
            self.pm_mr.EMS_reduct, throd, n, hist, t, 10000, 1e-3 * e, 1 / 4, t.shape[1]
        )

    def pm(self, reports: np.ndarray, eps: float, reduct: bool):
        with contextlib.redirect_stdout(io.StringIO()):
            theta = self.pm_mr.PM_E(reports, eps, randomized_bins=BINS, domain_bins=BINS,
                                    ifReduct=reduct, remained=1 / 4 if reduct else 1)  # fmt: skip
        return np.asarray(theta, float), self.last["seconds"], self.last["steps"]


def metrics(theta: np.ndarray, x: np.ndarray) -> dict:
    theta = np.asarray(theta, float)
    theta = theta / theta.sum()
    true_counts = np.histogram(x, bins=BINS, range=(-1, 1))[0]
    truth = true_counts / x.size
    centres = -1 + (np.arange(BINS) + 0.5) * 2 / BINS
    w1 = float(np.abs(np.cumsum(theta - truth)).sum() * 2 / BINS)
    return dict(w1=w1, wd_authors=float(wasserstein_distance(theta * x.size, true_counts)),
                mean_ae=abs(float(theta @ centres) - float(x.mean())))  # fmt: skip


def em_mr_defaults(mech, n: int) -> dict:
    """``em_mr``'s default threshold and tolerance, computed in O(k^3).

    ``em_mr`` computes ``c sqrt(Var*_x / n)`` through ``bounds.var_star_by_category``, which
    calls the numerical mechanisms' ``oracle_variance`` once per category, each inverting the
    1024 x 1024 channel (O(k^4): many minutes at k = 1024).  With ``M = P^{-T}`` the oracle
    variance of bin ``x`` at a point mass on ``j`` is ``((M*M) P^T)[x, j] - ((M P^T)[x, j])^2
    = ((M*M) P^T)[x, j] - [x = j]``, so ``Var*_x = max_{j != x} ((M*M) P^T)[x, j]``; the
    threshold (``c = 1`` if ``e^eps < 5`` else 2) and ``tol = 1e-3 e^eps`` are then em_mr's own.
    """
    p = mech.channel
    m = np.linalg.inv(p.T)
    table = (m * m) @ p.T
    np.fill_diagonal(table, -np.inf)
    e = float(np.exp(mech.epsilon))
    c = 1.0 if e < 5 else 2.0
    return dict(threshold=c * np.sqrt(np.maximum(table.max(axis=1), 0.0) / n), tol=1e-3 * e)


def ems_rule(mech_name: str, eps: float, n: int) -> dict:
    """The options of bayesldp's ``ems`` that reproduce the reference's EMS for SW or PM."""
    e = float(np.exp(eps))
    if mech_name == "SW":  # SW.EMS: [1, 4, 1] while the gain > 0.003, 1e-3 e^eps, 10,000 steps
        return dict(kernel=(1, 4, 1), smooth_gain=0.003, tol=1e-3 * e, max_iter=10000)
    # PM_E -> PM_EM.EMS: [1, 2, 1] every step, 1e-4 e^eps (1e-3 e^eps under 100,000), 5,000
    return dict(kernel=(1, 2, 1), tol=(1e-3 if n < 100_000 else 1e-4) * e, max_iter=5000)


def run(ref_dir: Path, cells, repeats: int, seed: int) -> tuple[list[dict], dict, dict, dict]:
    ref = Reference(ref_dir)
    facts: dict = {}
    ems_gap: dict = {}
    r_hat: dict = {}
    warm = bayesldp.SquareWave(16, 1.0).tally(bayesldp.SquareWave(16, 1.0).perturb(
        np.full(200, 0.5), rng=0))  # fmt: skip
    for m in ("ibu", "em_mr"):  # compile numba's kernels before timing
        bayesldp.estimate(warm, m)
    pops = {p: population(p, ref_dir, np.random.default_rng([seed, i]))
            for i, p in enumerate(sorted({c[0] for c in cells}))}  # fmt: skip
    rows = []
    for pop, mech_name, eps in cells:
        x = pops[pop]
        cls = bayesldp.SquareWave if mech_name == "SW" else bayesldp.Piecewise
        mech = cls(BINS, eps, lo=-1.0, hi=1.0, output_bins=BINS)
        e = float(np.exp(eps))
        for r in range(repeats):
            reports = mech.perturb(x, rng=np.random.SeedSequence([seed, int(eps * 100), r,
                                                                   mech_name == "SW"]))  # fmt: skip
            hist = np.bincount(mech.output_bin(reports), minlength=BINS)
            tally = mech.tally(reports)
            est = {}
            if mech_name == "SW":
                est["ref_ems"] = ref.sw_ems(hist, eps)
                est["ref_em_mr"] = ref.sw_em_mr(hist, eps)
                transform = ref.sw_transform(eps)
            else:
                est["ref_ems"] = ref.pm(reports, eps, reduct=False)
                transform = ref.last["transform"]
                if not np.array_equal(ref.last["hist"], hist):
                    raise RuntimeError("PM: the reference's histogram differs from our binning")
                est["ref_em_mr"] = ref.pm(reports, eps, reduct=True)
            facts[(mech_name, eps)] = float(np.abs(transform - mech.channel.T).max())
            for name, method, opts in (
                ("ibu", "ibu", dict(tol=1e-3 * e, max_iter=10000)),
                ("em_mr", "em_mr", em_mr_defaults(mech, x.size)),
            ):
                t0 = time.perf_counter()
                res = bayesldp.estimate(tally, method, **opts)
                est[name] = (res.frequencies, time.perf_counter() - t0, res.iterations)
            t0 = time.perf_counter()
            res = bayesldp.estimate(tally, "ems_mr")  # the authors' defaults for SW and PM
            est["ems_mr"] = (res.frequencies, time.perf_counter() - t0, res.iterations)
            t0 = time.perf_counter()
            res = ems(tally, **ems_rule(mech_name, eps, x.size))
            est["ems"] = (res.frequencies, time.perf_counter() - t0, res.iterations)
            ems_gap[(pop, mech_name, eps, r)] = float(
                np.abs(res.frequencies - est["ref_ems"][0] / est["ref_ems"][0].sum()).max()
            )
            for name, prior in (("posterior", None), ("dir1", 1.0)):
                t0 = time.perf_counter()
                with warnings.catch_warnings():  # r_hat is recorded below, not raised
                    warnings.simplefilter("ignore", ConvergenceWarning)
                    idata = bayesldp.fit(tally, prior=prior, draws=POSTERIOR_DRAWS,
                                         tune=POSTERIOR_DRAWS, chains=2, random_seed=r,
                                         progressbar=False)  # fmt: skip
                secs = time.perf_counter() - t0
                post = idata.posterior["theta"].mean(("chain", "draw")).values
                est[name] = (post, secs, 2 * POSTERIOR_DRAWS)
                attrs = idata.posterior.attrs
                r_hat[(name, pop, mech_name, eps, r)] = (float(attrs["r_hat_max"]),
                                                         int(attrs["divergences"]))  # fmt: skip
            for name, (theta, secs, steps) in est.items():
                rows.append(dict(population=pop, n=x.size, mechanism=mech_name, epsilon=eps,
                                 repeat=r, estimator=name, seconds=secs, steps=steps,
                                 **metrics(theta, x)))  # fmt: skip
            print(f"{pop} {mech_name} eps={eps} repeat {r}: done", file=sys.stderr, flush=True)
    return rows, facts, ems_gap, r_hat


def table(rows: list[dict], facts: dict, ems_gap: dict, r_hat: dict) -> str:
    df = pd.DataFrame(rows)
    cols = ["ref_ems", "ems", "ref_em_mr", "ems_mr", "ibu", "em_mr", "posterior", "dir1"]
    keys = ["population", "n", "mechanism", "epsilon"]
    out = []
    for metric, fmt in (("w1", "{:.4f}"), ("wd_authors", "{:.2f}"), ("mean_ae", "{:.4f}"),
                        ("seconds", "{:.2f}"), ("steps", "{:.0f}")):  # fmt: skip
        agg = "median" if metric in ("seconds", "steps") else "mean"
        piv = df.pivot_table(index=keys, columns="estimator", values=metric, aggfunc=agg)
        extra = ""
        if metric == "w1":
            extra = " ems_mr / ref_em_mr | em_mr / ref_em_mr | ibu / ref_ems |"
        elif metric == "seconds":
            extra = " ref_ems / ems | ref_ems / ibu | ref_em_mr / ems_mr | ref_em_mr / em_mr |"
        title = {"w1": "Wasserstein-1 on [-1, 1] (mean over repeats)",
                 "wd_authors": "The authors' WD (scipy on the two count vectors; mean)",
                 "mean_ae": "Absolute error of the mean (mean over repeats)",
                 "seconds": "Seconds per estimate (median; the reference: its EM call only)",
                 "steps": "EM steps (median; posterior, dir1: draws)"}[metric]  # fmt: skip
        head = "| population | n | mech | eps | " + " | ".join(cols) + " |" + extra
        rule = "|---|---:|---|---:|" + "---:|" * (len(cols) + extra.count("|"))
        out += [f"## {title}", "", head, rule]
        for (pop, n, mech, eps), row in piv.iterrows():
            cells = " | ".join(fmt.format(row[c]) for c in cols)
            line = f"| {pop} | {n:,} | {mech} | {eps:g} | {cells} |"
            if metric == "w1":
                line += (
                    f" {row['ems_mr'] / row['ref_em_mr']:.3f} |"
                    f" {row['em_mr'] / row['ref_em_mr']:.3f} | {row['ibu'] / row['ref_ems']:.3f} |"
                )
            elif metric == "seconds":
                a, b = row["ref_ems"] / row["ems"], row["ref_ems"] / row["ibu"]
                c = row["ref_em_mr"] / row["ems_mr"]
                line += f" {a:.1f} | {b:.1f} | {c:.1f} | {row['ref_em_mr'] / row['em_mr']:.1f} |"
            out.append(line)
        out.append("")
    w1 = df.pivot_table(index=keys, columns="estimator", values="w1", aggfunc="mean")
    out += [
        "Mean over cells of the W1 ratio to the reference EM-MR: ems_mr "
        f"{(w1['ems_mr'] / w1['ref_em_mr']).mean():.3f}, em_mr "
        f"{(w1['em_mr'] / w1['ref_em_mr']).mean():.3f} (target 1.05).",
        "",
    ]
    out += ["Largest |reference transform - bayesldp channel| per (mechanism, eps): "
            + ", ".join(f"{m} {e:g}: {d:.2e}" for (m, e), d in sorted(facts.items()))]  # fmt: skip
    out += [
        "",
        f"posterior: `bayesldp.fit(tally)` with its default prior (the smoothness prior, "
        f"SmoothDensity, on these numerical reports), dir1: `fit(tally, prior=1.0)` "
        f"(Dirichlet(1)); each 2 chains x {POSTERIOR_DRAWS} draws after {POSTERIOR_DRAWS} "
        "warm-up steps, its posterior mean.",
    ]
    for name in ("posterior", "dir1"):
        out += [
            "",
            f"Largest r_hat (divergences) of {name} per cell: "
            + ", ".join(
                f"{p} {m} {e:g} #{r}: {v:.3f} ({d})"
                for (n, p, m, e, r), (v, d) in r_hat.items()
                if n == name
            ),
        ]
    out += ["", "Largest |bayesldp ems - reference EMS| over the bins, per cell (same reports): "
            + ", ".join(f"{p} {m} {e:g} #{r}: {d:.1e}"
                        for (p, m, e, r), d in ems_gap.items())]  # fmt: skip
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reference", type=Path, required=True, help="git dir of the LDP-EM-MR mirror")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--seed", type=int, default=20261123)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--cells", type=int, nargs="*", help="indices into CELLS (default: all)")
    args = ap.parse_args()
    cells = CELLS if args.cells is None else tuple(CELLS[i] for i in args.cells)
    cells, repeats = (CELLS[:1], 1) if args.quick else (cells, args.repeats)
    commit = subprocess.run(["git", f"--git-dir={args.reference}", "rev-parse", "HEAD"],
                            check=True, capture_output=True, text=True).stdout.strip()  # fmt: skip
    load0 = os.getloadavg()
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        export_reference(args.reference, Path(tmp))
        rows, facts, ems_gap, r_hat = run(Path(tmp), cells, repeats, args.seed)
    body = table(rows, facts, ems_gap, r_hat)
    load1 = os.getloadavg()
    header = "\n".join([
        "# Numerical EM and EM-MR against Ye et al.'s code (SW, PM; 1024 x 1024 bins)",
        "",
        f"**{repeats} repeat(s) per cell only** (a busy shared 2-core machine; the reference's "
        "EM takes 10-60 s per estimate): read the accuracy columns as indicative, not as "
        "significant differences. The same reports (drawn by bayesldp, seeded) go to the "
        f"reference (yyt20080808/LDP-EM-MR at {commit[:12]}) and to bayesldp. See the script's "
        "docstring for the populations, rules and metrics.",
        "",
        "- Command: `python benchmarks/numerical_parity.py --reference PATH --repeats "
        f"{repeats}" + ("" if args.cells is None else " --cells " + " ".join(map(str, args.cells)))
        + "`",
        f"- Date: {_dt.datetime.now(_dt.UTC):%Y-%m-%d %H:%M} UTC; "
        f"{time.perf_counter() - start:.0f} s; loadavg at start {load0[0]:.2f} "
        f"{load0[1]:.2f} {load0[2]:.2f}, at end {load1[0]:.2f} {load1[1]:.2f} {load1[2]:.2f}",
        f"- Machine: {platform.machine()}, {os.cpu_count()} cores; Python "
        f"{platform.python_version()}, numpy {np.__version__}, bayesldp {bayesldp.__version__}",
        "",
    ])  # fmt: skip
    text = header + "\n" + body + "\n"
    print(text)
    if not args.quick:
        OUT.write_text(text)


if __name__ == "__main__":
    main()
