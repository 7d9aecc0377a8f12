"""Packed rows against compressed rows for support-form likelihoods (an
investigation).

A support-form tally's centred rows ``C = delta M`` (``M`` 0/1, U distinct reports x K) are
multiplied either from compressed rows (``"sparse"``: the column indices of ``M`` or of
``1 - M``, O(nnz) gathers and scatters per product) or from packed rows (``"packed"``:
``ceil(K / 8)`` bytes a row and per-product byte tables, :mod:`bayesldp.likelihood_packed`).
This measures both on the same tallies, in the same process, one form after the other:

1. Microseconds per gradient (``bayesldp.likelihood_kernels.gradient``: ``L theta``, the
   log-likelihood and ``L^T (c / L theta)``, what every sampler step calls) on OUE K = 50 and
   K = 200 and OLH K = 50 at n = 1e5, SUE and OUE K = 1000 at n = 1e4 (eps = 1; theta ~
   Dirichlet(1) and the reports drawn from it, seeded), the ratio compressed / packed, and the
   form ``Likelihood`` takes.  Each cell: the fastest of 7 batches (each about 0.1 s of calls),
   the two forms' batches alternating.
2. The crossover behind ``Likelihood``'s rule (``bayesldp.likelihood._packed_is_cheaper``):
   random masks with U = 1e3 and 1e5 rows, K = 16, 64, 256 and densities 0.03 to 0.5 (stored
   entries per row ``min(d, 1 - d) K``), the same gradient timings; least squares fit
   ``t_sparse = c_1 nnz + c_0 U`` and ``t_packed = p_1 U B + p_2 256 B + p_0 U`` (B bytes a
   row), and how often the rule picks the faster form.
3. One ``bayesldp.fit(method="hmc")`` of ``benchmarks/posterior_warm.py``'s ``oue50`` tally
   (OUE K = 50, n = 1e5, Dirichlet(1)), 2 chains x 300 draws after 300 warm-up iterations, per
   form (the compressed rows forced by replacing the rule; ``Likelihood`` has no option for it),
   after one untimed fit per form (the same call: whatever it compiles is compiled before the
   timed fits): the sampler's seconds (``backend_info["wall_time"]``),
   the whole call, min bulk ESS, leapfrog steps per draw, and the posterior means' largest
   difference.  Fits alternate between the forms, ``--fit-repeats`` times each.

Usage::

    # writes benchmarks/investigations/results/likelihood_forms.md
    python benchmarks/investigations/likelihood_forms.py
    python benchmarks/investigations/likelihood_forms.py --quick    # small sizes, prints only
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import bayesldp  # noqa: E402
import bayesldp.likelihood as likelihood  # noqa: E402
import bayesldp.likelihood_kernels as lk  # noqa: E402
from bayesldp.likelihood import Likelihood  # noqa: E402
from bayesldp.tally import Tally  # noqa: E402

OUT = ROOT / "benchmarks" / "investigations" / "results" / "likelihood_forms.md"
SEED = 20261127
BATCHES = 7
BATCH_SECONDS = 0.1
#: (label, mechanism, K, n)
TALLIES = (("OUE K = 50", "OUE", 50, 100_000), ("OUE K = 200", "OUE", 200, 100_000),
           ("OLH K = 50", "OLH", 50, 100_000), ("SUE K = 1000", "SUE", 1000, 10_000),
           ("OUE K = 1000", "OUE", 1000, 10_000))  # fmt: skip
GRID_ROWS, GRID_KS = (1_000, 100_000), (16, 64, 256)
GRID_DENSITIES = (0.03, 0.08, 0.15, 0.25, 0.5)


def forced(tally: Tally, packed: bool) -> Likelihood:
    """``Likelihood(tally)`` with the form chosen here, not by the rule."""
    rule = likelihood._packed_is_cheaper
    likelihood._packed_is_cheaper = lambda *args: packed
    try:
        lik = Likelihood(tally)
    finally:
        likelihood._packed_is_cheaper = rule
    assert lik.kind == ("packed" if packed else "sparse"), lik.kind
    return lik


def stored_nnz(lik: Likelihood) -> int:
    indptr, _, _ = lik._compressed()
    return int(indptr[-1])


def gradient_us(liks: list[Likelihood], theta: np.ndarray) -> list[float]:
    """Fastest of ``BATCHES`` batches of gradients per likelihood, batches alternating."""
    work = [(np.empty((3, lik.n_rows)), np.empty(lik.k)) for lik in liks]

    def call(i: int) -> None:
        lik = liks[i]
        lk.gradient(*lik.arrays, lik.counts, theta, 0.0, *work[i][0], work[i][1])

    calls = []
    for i in range(len(liks)):  # compile, then size the batches
        call(i)
        start, m = time.perf_counter(), 0
        while time.perf_counter() - start < 0.02:
            call(i)
            m += 1
        calls.append(max(1, int(m * BATCH_SECONDS / 0.02)))
    best = [np.inf] * len(liks)
    for _ in range(BATCHES):
        for i in range(len(liks)):
            start = time.perf_counter()
            for _ in range(calls[i]):
                call(i)
            best[i] = min(best[i], (time.perf_counter() - start) / calls[i] * 1e6)
    return best


def mechanism_table(quick: bool) -> list[str]:
    rows = ["| tally | n | distinct rows U | bytes a row B | stored entries a row | us compressed "
            "| us packed | compressed / packed | form taken |", "|" + "---|" * 9]  # fmt: skip
    for label, name, k, n in TALLIES:
        n = n // 10 if quick else n
        gen = np.random.default_rng([SEED, k, len(name)])
        counts = gen.multinomial(n, gen.dirichlet(np.ones(k)))
        tally = getattr(bayesldp, name)(k, 1.0).simulate_tally(counts, rng=gen)
        sparse, packed = forced(tally, False), forced(tally, True)
        t_sparse, t_packed = gradient_us([sparse, packed], gen.dirichlet(np.ones(k)))
        rows.append(f"| {label} | {n:,} | {tally.n_rows:,} | {packed.packed.shape[1]} | "
                    f"{stored_nnz(sparse) / tally.n_rows:.1f} | {t_sparse:,.0f} | "
                    f"{t_packed:,.0f} | {t_sparse / t_packed:.2f} | "
                    f"{Likelihood(tally).kind} |")  # fmt: skip
        print(rows[-1], flush=True)
    return rows


def grid(quick: bool) -> list[dict]:
    """Gradient timings of both forms on random masks (module docstring, part 2)."""
    out = []
    gen = np.random.default_rng(SEED)
    for n_rows in GRID_ROWS[:1] if quick else GRID_ROWS:
        for k in GRID_KS:
            for d in GRID_DENSITIES[::2] if quick else GRID_DENSITIES:
                support = gen.random((n_rows, k)) < d
                support[np.arange(n_rows), gen.integers(0, k, n_rows)] = True
                tally = Tally(np.ones(n_rows, dtype=np.int64), support=support,
                              levels=(0.3, 1.0), stat=np.zeros(k), family="grid",
                              dedupe=False)  # fmt: skip
                sparse, packed = forced(tally, False), forced(tally, True)
                t_sparse, t_packed = gradient_us([sparse, packed], gen.dirichlet(np.ones(k)))
                nnz = stored_nnz(sparse)
                rule = likelihood._packed_is_cheaper(n_rows, k, float(nnz))
                out.append({"U": n_rows, "K": k, "d": d, "B": packed.packed.shape[1], "nnz": nnz,
                            "sparse": t_sparse, "packed": t_packed, "rule": rule})  # fmt: skip
                print(out[-1], flush=True)
    return out


def grid_tables(cells: list[dict]) -> list[str]:
    u = np.array([c["U"] for c in cells], float)
    b = np.array([c["B"] for c in cells], float)
    nnz = np.array([c["nnz"] for c in cells], float)
    ts = np.array([c["sparse"] for c in cells]) * 1e3  # ns
    tp = np.array([c["packed"] for c in cells]) * 1e3
    (c1, c0), *_ = np.linalg.lstsq(np.column_stack([nnz, u]), ts, rcond=None)
    (p1, p2, p0), *_ = np.linalg.lstsq(np.column_stack([u * b, 256 * b, u]), tp, rcond=None)
    right = sum((c["packed"] < c["sparse"]) == c["rule"] for c in cells)
    lost = [max(c["packed"], c["sparse"]) / min(c["packed"], c["sparse"])
            for c in cells if (c["packed"] < c["sparse"]) != c["rule"]]  # fmt: skip
    lines = [
        "| U | K | density | B | stored entries a row | us compressed | us packed | "
        "compressed / packed | rule takes |", "|" + "---|" * 9,
    ]  # fmt: skip
    for c in cells:
        lines.append(f"| {c['U']:,} | {c['K']} | {c['d']} | {c['B']} | {c['nnz'] / c['U']:.1f} "
                     f"| {c['sparse']:,.1f} | {c['packed']:,.1f} | "
                     f"{c['sparse'] / c['packed']:.2f} | "
                     f"{'packed' if c['rule'] else 'compressed'} |")  # fmt: skip
    lines += [
        "",
        f"Least squares (ns): compressed = {c1:.3f} nnz + {c0:.3f} U; packed = {p1:.3f} U B + "
        f"{p2:.3f} (256 B) + {p0:.3f} U.  In the rule's units (one compressed entry): READ = "
        f"{p1 / c1:.2f}, TABLE = {p2 / c1:.2f}, ROW = {(c0 - p0) / c1:.2f}.",
        f"The rule (`_packed_is_cheaper`: packed when {likelihood._PACKED_READ:g} U B + "
        f"{likelihood._PACKED_TABLE:g} (256 B) < nnz + {likelihood._PACKED_ROW:g} U) picks the "
        f"faster form in {right} of "
        f"{len(cells)} cells" + (f"; where it does not, the slower is at most "
                                 f"{max(lost):.2f}x the faster" if lost else "") + ".",
    ]  # fmt: skip
    return lines


def fits(quick: bool, repeats: int) -> tuple[list[str], list[str]]:
    import posterior_warm as pw

    from bayesldp.bayes.fit import import_arviz

    az = import_arviz()
    tally, prior = pw.make("oue50")
    draws = 50 if quick else 300
    opts = dict(prior=prior, method="hmc", draws=draws, tune=draws, chains=2,
                random_seed=SEED, compute_convergence_checks=False)  # fmt: skip
    rule = likelihood._packed_is_cheaper
    results: dict[bool, list[dict]] = {True: [], False: []}
    means = {}
    try:
        for packed in (False, True):  # warm-up fits, the timed call itself: compilation
            likelihood._packed_is_cheaper = lambda *args, p=packed: p
            bayesldp.fit(tally, **opts)
        for _ in range(repeats):
            for packed in (False, True):
                likelihood._packed_is_cheaper = lambda *args, p=packed: p
                start = time.perf_counter()
                idata = bayesldp.fit(tally, **opts)
                total = time.perf_counter() - start
                info = json.loads(idata.posterior.attrs["backend_info"])
                theta = idata.posterior["theta"]
                results[packed].append({
                    "wall": info["wall_time"], "total": total,
                    "ess": float(az.ess(idata.posterior, var_names=["theta"])["theta"].min()),
                    "steps": float(idata.sample_stats["n_steps"].mean()),
                })  # fmt: skip
                means[packed] = theta.values.reshape(-1, tally.k).mean(axis=0)
                print(packed, results[packed][-1], flush=True)
    finally:
        likelihood._packed_is_cheaper = rule
    lines = ["| rows | fit | sampler s | whole call s | min bulk ESS | steps a draw |",
             "|" + "---|" * 6]  # fmt: skip
    for packed in (False, True):
        for i, r in enumerate(results[packed]):
            lines.append(f"| {'packed' if packed else 'compressed'} | {i + 1} | {r['wall']:.1f} "
                         f"| {r['total']:.1f} | {r['ess']:.0f} | {r['steps']:.1f} |")  # fmt: skip
    wall = {p: min(r["wall"] for r in results[p]) for p in results}
    step = {p: min(r["wall"] / r["steps"] for r in results[p]) for p in results}
    summary = [
        f"Sampler seconds, fastest fit: compressed {wall[False]:.1f}, packed {wall[True]:.1f} "
        f"(compressed / packed {wall[False] / wall[True]:.2f}); per leapfrog step per draw "
        f"(sampler seconds / steps a draw) {step[False] / step[True]:.2f}.  Posterior means' "
        f"largest difference between the forms' last fits: "
        f"{np.abs(means[True] - means[False]).max():.2e} (same seed; the forms' sums differ "
        "in rounding only, which NUTS's trajectories amplify)."
    ]
    return lines, summary


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes; prints only")
    parser.add_argument("--out", help="results file ('-': print only); default "
                        "benchmarks/investigations/results/likelihood_forms.md, "
                        "or '-' with --quick")  # fmt: skip
    parser.add_argument("--fit-repeats", type=int, default=2, help="timed fits per form")
    args = parser.parse_args(argv)
    out = args.out or ("-" if args.quick else str(OUT))
    started, load = time.perf_counter(), os.getloadavg()
    mech_rows = mechanism_table(args.quick)
    cells = grid(args.quick)
    fit_rows, fit_summary = fits(args.quick, 1 if args.quick else args.fit_repeats)
    end_load = os.getloadavg()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, text=True,
                            capture_output=True).stdout.strip()  # fmt: skip
    versions = [f"{m} {__import__(m).__version__}" for m in ("bayesldp", "numpy", "numba")]
    command = "python benchmarks/investigations/likelihood_forms.py"
    command += " --quick" if args.quick else ""
    command += f" --out {args.out}" if args.out else ""
    command += f" --fit-repeats {args.fit_repeats}" if args.fit_repeats != 2 else ""
    text = "\n".join([
        "# Packed rows against compressed rows (support-form likelihoods)", "",
        f"- Command: `{command}`",
        f"- Date: {datetime.datetime.now(datetime.UTC).strftime('%Y-%m-%d %H:%M UTC')}; commit "
        f"{commit}; {time.perf_counter() - started:.0f} s",
        f"- Machine: {platform.machine()}, {os.cpu_count()} cores; load average at the start "
        f"{', '.join(f'{x:.2f}' for x in load)}, at the end "
        f"{', '.join(f'{x:.2f}' for x in end_load)} (other jobs share the cores: compare the "
        "forms within a row, measured one after the other)",
        f"- Python {platform.python_version()}; {', '.join(versions)}",
        "- What each table measures: the module docstring of "
        "`benchmarks/investigations/likelihood_forms.py`",
        "", "## Microseconds per gradient, mechanism tallies", "", *mech_rows,
        "", "## The crossover: random masks", "", *grid_tables(cells),
        "", "## fit(method=\"hmc\") of posterior_warm's oue50 tally, 2 chains x "
        f"{50 if args.quick else 300} draws after as many warm-up iterations", "", *fit_rows,
        "", *fit_summary, "",
    ])  # fmt: skip
    print(text)
    if out != "-":
        Path(out).write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
