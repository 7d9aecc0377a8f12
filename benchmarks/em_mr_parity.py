"""EM and EM-MR parity with Ye et al.'s code (LDP-EM-MR) on its published distributions.

The reference is the public repository yyt20080808/LDP-EM-MR, given as a local git mirror (the
search tool's ``fetch``); its Python files are exported to a temporary directory and imported
from there, nothing of it is copied into bayesldp.  The populations are the count arrays of its
``simulation/fre_est_grr.py`` (SFC, K = 60, and Income), read from that file with ``ast``.

For each population, epsilon and repeat, the users' values are the population's counts, GRR
reports are drawn once with ``bayesldp.GRR.perturb`` (seeded), and the *same* reports go to:

* the reference's ``EM_GR`` (plain EM from uniform, log-likelihood rule 1e-6, 1400 steps) and
  ``EM_GRR_reduct_merge`` (its EM-MR, ``ldp_reduction/protocols/MR/GRR_EM_reduction.py``);
* bayesldp's ``estimate(tally, "ibu")``, ``"em_mr"`` (default: the 10 largest estimates are
  never merged), ``"em_mr"`` with ``protect=range(10)`` (column ``em_mr_idx``: the authors'
  rule, categories 0-9 never merged, which on these sorted populations are the true top 10),
  ``"em"`` (to the MLE) and ``"norm_sub"``.

MSE is the mean over categories of ``(estimate - truth)^2``, averaged over repeats; the table
gives it per cell and the ratio of bayesldp's ``em_mr`` to the reference EM-MR, and of ``ibu``
to the reference EM.  Target: ``em_mr`` at most 1.05x the reference, averaged over
eps in {0.75, 1, 1.5, 2, 3}, on SFC and Income.

Usage::

    python benchmarks/em_mr_parity.py --reference /work/.mirror/yyt20080808+LDP-EM-MR/repo
    python benchmarks/em_mr_parity.py --reference PATH --quick   # 2 repeats, writes nothing
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import datetime as _dt
import io
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import bayesldp

EPSILONS = (0.75, 1.0, 1.5, 2.0, 3.0)
POPULATIONS = ("SFC", "Income")
OURS = {  # column -> (method, options)
    "ibu": ("ibu", {}),
    "em_mr": ("em_mr", {}),
    "em_mr_idx": ("em_mr", {"protect": range(10)}),
    "em": ("em", {}),
    "norm_sub": ("norm_sub", {}),
}
OUT = Path(__file__).parent / "results" / "em_mr_parity.md"


def export_reference(git_dir: Path, dest: Path) -> None:
    """Write the mirror's Python files (its HEAD) under ``dest``."""
    names = subprocess.run(
        ["git", f"--git-dir={git_dir}", "ls-tree", "-r", "--name-only", "HEAD"],
        check=True, capture_output=True, text=True,
    ).stdout.split()  # fmt: skip
    for name in names:
        if name.endswith(".py") and "__pycache__" not in name:
            text = subprocess.run(
                ["git", f"--git-dir={git_dir}", "show", f"HEAD:{name}"],
                check=True, capture_output=True,
            ).stdout  # fmt: skip
            path = dest / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(text)


def published_counts(script: Path) -> dict[str, np.ndarray]:
    """The ``ori`` count array of each dataset branch of ``generate_noised_data``."""
    tree = ast.parse(script.read_text())
    func = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)
                and n.name == "generate_noised_data")  # fmt: skip
    out: dict[str, np.ndarray] = {}
    node = next(n for n in func.body if isinstance(n, ast.If))
    while isinstance(node, ast.If):
        name = node.test.comparators[0].value  # dataset == "SFC"
        assign = node.body[0]
        out[name] = np.array(ast.literal_eval(assign.value.args[0]), dtype=np.int64)
        node = node.orelse[0] if node.orelse else None
    return out


def run(ref_dir: Path, repeats: int, seed: int) -> list[dict]:
    sys.path.insert(0, str(ref_dir))
    from ldp_reduction.protocols.categoricalProtocols.GRR_EM import EM_GR
    from ldp_reduction.protocols.MR.GRR_EM_reduction import EM_GRR_reduct_merge

    counts = published_counts(ref_dir / "simulation" / "fre_est_grr.py")
    warm = bayesldp.GRR(10, 1.0).simulate_tally(np.full(10, 100), rng=0)
    for method, options in OURS.values():  # load numba's compiled kernels before timing
        bayesldp.estimate(warm, method, **options)
    rows = []
    for pop in POPULATIONS:
        c = counts[pop]
        k, n = c.size, int(c.sum())
        truth = c / n
        x = np.repeat(np.arange(k), c)
        for eps in EPSILONS:
            mech = bayesldp.GRR(k, eps)
            e_eps = float(np.exp(eps))
            for r in range(repeats):
                reports = mech.perturb(x, rng=np.random.SeedSequence([seed, k, int(eps * 100), r]))
                tally = mech.tally(reports)
                est, secs = {}, {}
                with contextlib.redirect_stdout(io.StringIO()):  # the reference prints
                    t0 = time.perf_counter()
                    est["ref_em"] = EM_GR(truth, reports, k, e_eps)
                    secs["ref_em"] = time.perf_counter() - t0
                    t0 = time.perf_counter()
                    est["ref_em_mr"] = EM_GRR_reduct_merge(reports, k, e_eps)
                    secs["ref_em_mr"] = time.perf_counter() - t0
                for name, (method, options) in OURS.items():
                    t0 = time.perf_counter()
                    est[name] = bayesldp.estimate(tally, method, **options).frequencies
                    secs[name] = time.perf_counter() - t0
                for name, f in est.items():
                    mse = float(np.mean((np.asarray(f, dtype=float) - truth) ** 2))
                    rows.append(dict(population=pop, k=k, n=n, epsilon=eps, repeat=r,
                                     estimator=name, mse=mse, seconds=secs[name]))  # fmt: skip
            print(f"{pop} eps={eps}: done", file=sys.stderr)
    return rows


def table(rows: list[dict]) -> str:
    import pandas as pd

    df = pd.DataFrame(rows)
    mse = df.pivot_table(index=["population", "k", "n", "epsilon"], columns="estimator",
                         values="mse", aggfunc="mean")  # fmt: skip
    secs = df.pivot_table(index=["population", "epsilon"], columns="estimator",
                          values="seconds", aggfunc="median")  # fmt: skip
    cols = ["ref_em", "ibu", "ref_em_mr", "em_mr", "em_mr_idx", "em", "norm_sub"]
    ratios = " | em_mr / ref EM-MR | ibu / ref EM |"
    lines = [
        "| population | K | n | eps | " + " | ".join(cols) + ratios,
        "|---|---:|---:|---:|" + "---:|" * (len(cols) + 2),
    ]
    for (pop, k, n, eps), row in mse.iterrows():
        cells = " | ".join(f"{row[c]:.3e}" for c in cols)
        mr, em = row["em_mr"] / row["ref_em_mr"], row["ibu"] / row["ref_em"]
        lines.append(f"| {pop} | {k} | {n:,} | {eps:g} | {cells} | {mr:.3f} | {em:.3f} |")
    lines += ["", "Ratio of mean MSEs averaged over eps (the target's measure):", ""]
    lines += ["| population | em_mr / ref EM-MR | ibu / ref EM |", "|---|---:|---:|"]
    for pop in POPULATIONS:
        sub = mse.xs(pop, level="population")
        lines.append(f"| {pop} | {(sub['em_mr'] / sub['ref_em_mr']).mean():.3f} | "
                     f"{(sub['ibu'] / sub['ref_em']).mean():.3f} |")  # fmt: skip
    lines += ["", "Median seconds per estimate (reference: on the reports; bayesldp: tally):",
              "", "| population | eps | " + " | ".join(cols) + " |",
              "|---|---:|" + "---:|" * len(cols)]  # fmt: skip
    for (pop, eps), row in secs.iterrows():
        lines.append(f"| {pop} | {eps:g} | " + " | ".join(f"{row[c]:.4f}" for c in cols) + " |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reference", type=Path, required=True, help="git dir of the LDP-EM-MR mirror")
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--seed", type=int, default=20261123)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    repeats = 2 if args.quick else args.repeats
    commit = subprocess.run(["git", f"--git-dir={args.reference}", "rev-parse", "HEAD"],
                            check=True, capture_output=True, text=True).stdout.strip()  # fmt: skip
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        export_reference(args.reference, Path(tmp))
        rows = run(Path(tmp), repeats, args.seed)
    body = table(rows)
    header = "\n".join([
        "# EM and EM-MR parity with the code of Ye et al. (LDP-EM-MR)",
        "",
        f"GRR on the reference's published populations; {repeats} repeats per cell; the same "
        "reports go to the reference (yyt20080808/LDP-EM-MR at "
        f"{commit[:12]}) and to bayesldp. Cells: mean MSE over repeats.",
        "",
        f"- Command: `python benchmarks/em_mr_parity.py --reference PATH --repeats {repeats}`",
        f"- Date: {_dt.datetime.now(_dt.UTC):%Y-%m-%d %H:%M} UTC; "
        f"{time.perf_counter() - start:.0f} s",
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
