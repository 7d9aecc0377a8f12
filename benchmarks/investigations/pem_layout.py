"""PEM's round layout against pure-ldp's PEM where heavy_hitters.md saw ours
lose.

``benchmarks/results/heavy_hitters.md`` (3 seeds a cell) has bayesldp's ``PEM(eps, k, bits=24,
eta=4)`` behind pure-ldp 1.2.0's PEM in 6 of 27 cells: Zipf(1) over 2^20 items at eps 1 and 2
(recall, NCR), and the MSE of Zipf over 2^32 at eps 1, k = 10.  This study re-runs those
(population, eps) pairs, every k in {10, 20, 50}, with more seeds and paired differences (both
packages on the same drawn users), and the layouts of ours below, to tell noise from a real
loss and, for a real one, its cause:

* ``ours``: the default, ``PEM(eps, k, bits=24, eta=4)``: rounds of ``s_0 = ceil(log2 k) + 4``
  bits (all ``2^{s_0}`` prefixes: 256 for k = 10), then 4 more bits a round up to 24 (5 rounds,
  n/5 users each);
* ``first4``: the default's rounds after an extra first round of the 16 prefixes of 4 bits
  (pure-ldp's first round; 6 rounds, n/6 users each);
* ``eta5``: ``PEM(eps, k, bits=24, eta=5)``: 5 bits a round, 4 rounds (n/4 users each), twice
  the candidates per round (``k 2^5``);
* ``bits20``: ``PEM(eps, k, bits=20, eta=4)``: codes as wide as zipf20's items (4 rounds); on
  zipf32 the codes are narrower than the items (collisions add light items' mass to a code);
* ``positional`` (zipf20 only): ``PEM(eps, k, eta=4, encoder=PositionalEncoder(hex, 5))``, the
  5 hex digits read as a 20-bit number: ``bits20``'s 4 rounds with no shared code.

``ours`` is the 24-bit hash whatever the items; the rule of ``PEM``'s docstring (as
``heavy_hitters.py`` applies it, :func:`heavy_hitters.pem_code`) takes ``positional`` on zipf20
and ``ours`` on zipf32 (32-bit items): the header states where that choice is behind pure-ldp.

pure-ldp: ``PEMClient/PEMServer`` over its count-mean sketch (m = 1024, 32 rows), 5 rounds of one
hex character, first round the 16 one-character prefixes, n/5 users a round (as in
``heavy_hitters.py``, whose populations, runs and metrics this imports).  Both return k items,
so precision equals recall; the table gives recall, NCR and MSE (means over seeds ± standard
error) and the paired difference ``method - pure-ldp`` and ``method - ours`` (mean ± standard
error of the per-seed differences).

Usage::

    python benchmarks/investigations/pem_layout.py  # 20 seeds, writes results/pem_layout.md
    # 2 seeds, n = 20,000, zipf20 eps 1; writes nothing
    python benchmarks/investigations/pem_layout.py --quick
    # a subset
    python benchmarks/investigations/pem_layout.py --seeds 5 --cells zipf20:1 --out /tmp/x.md
"""

from __future__ import annotations

import argparse
import datetime as _dt
import math
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the suite
from heavy_hitters import SEED, Run, named, pem_code, population, pure_runs
from throughput import check_xxhash, machine_info

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_OUT = ROOT / "benchmarks" / "investigations" / "results" / "pem_layout.md"
KS = (10, 20, 50)
CELLS = ("zipf20:1", "zipf20:2", "zipf32:1")
VARIANTS = ("ours", "first4", "eta5", "bits20", "positional")
METRICS = (("recall", ".3f"), ("ncr", ".3f"), ("mse", ".2e"))


def variants(pop) -> tuple[str, ...]:
    """The variants run on ``pop``: ``positional`` only where the rule takes it (zipf20)."""
    positional = "encoder" in pem_code(pop)
    return tuple(v for v in VARIANTS if v != "positional" or positional)


def rule_method(pop) -> str:
    """The variant the rule of ``PEM``'s docstring picks for ``pop``."""
    return "positional" if "encoder" in pem_code(pop) else "ours"


def layout(variant: str, eps: float, k: int, pop=None):
    """The PEM of a variant (``first4``: the default with a 4-bit first round prepended;
    ``positional``: the rule's positional code of ``pop``)."""
    from bayesldp.heavy_hitters import PEM

    if variant == "positional":
        return PEM(eps, k, eta=4, holdout=0.0, **pem_code(pop))
    if variant == "first4":
        pem = PEM(eps, k, bits=24, eta=4, holdout=0.0)
        pem.prefix_lengths = (4, *pem.prefix_lengths)  # PEM has no layout argument
        return pem
    bits, eta = {"ours": (24, 4), "eta5": (24, 5), "bits20": (20, 4)}[variant]
    return PEM(eps, k, bits=bits, eta=eta, holdout=0.0)  # the search as measured (no holdout)


def ours_run(variant: str, pop, eps: float, k: int, seed: int) -> dict[str, float]:
    pem = layout(variant, eps, k, pop)
    reports = pem.perturb(pop.items, rng=np.random.default_rng([SEED, 1, seed]))
    found = pem.identify(reports)
    return Run(named(pem.encoder, found.codes, pop), list(found.frequencies), 1, 1, 1).scores(
        pop, k
    )


def run(args: argparse.Namespace) -> dict:
    """scores[(population, eps, k)][method] = list over seeds of score dicts."""
    scores: dict = {}
    rules: dict = {}  # population -> the variant the rule picks
    t0 = time.perf_counter()
    for cell in args.cells:
        name, eps = cell.split(":")[0], float(cell.split(":")[1])
        for seed in range(args.seeds):
            pop = population(name, args.n, seed)
            rules[name] = rule_method(pop)
            pure = pure_runs("PEM", pop, eps, list(KS), seed)
            for k in KS:
                per = scores.setdefault((name, eps, k), {})
                per.setdefault("pure-ldp", []).append(pure[k].scores(pop, k))
                for v in variants(pop):
                    per.setdefault(v, []).append(ours_run(v, pop, eps, k, seed))
            print(f"{name} eps {eps:g} seed {seed}: {time.perf_counter() - t0:.0f} s",
                  file=sys.stderr, flush=True)  # fmt: skip
    return {"scores": scores, "rules": rules}


def _mse(x: np.ndarray) -> tuple[float, float]:
    return float(x.mean()), float(x.std(ddof=1) / math.sqrt(x.size)) if x.size > 1 else 0.0


def _fmt(x: np.ndarray, f: str) -> str:
    m, se = _mse(x)
    return f"{m:{f}} ± {se:{f}}"


def _diff(x: np.ndarray, f: str, higher: bool) -> str:
    """Paired mean difference ± se, starred where it is 2 standard errors in one's favour
    (``+``) or against (``-``)."""
    m, se = _mse(x)
    mark = ""
    if se > 0 and abs(m) > 2 * se:
        mark = " (+)" if (m > 0) == higher else " (-)"
    return f"{m:+{f}} ± {se:{f}}{mark}"


def _behind(arr: dict, method: str, label: str) -> list[str]:
    """The metrics where ``method`` is more than 2 standard errors behind pure-ldp."""
    out = []
    for key, f in METRICS:
        m, se = _mse(arr[method][key] - arr["pure-ldp"][key])
        if (m < -2 * se) if key != "mse" else (m > 2 * se):
            shown = {"recall": "recall", "ncr": "NCR", "mse": "MSE"}[key]
            out.append(f"{label} {shown}: {m:+{f}} ± {se:{f}}")
    return out


def table(result: dict) -> tuple[str, list[str], list[str]]:
    """The table, the cells where ``ours`` is behind pure-ldp, and those where the rule's
    choice (``positional`` on zipf20, ``ours`` elsewhere) is."""
    scores, rules = result["scores"], result["rules"]
    head = (
        "| population | eps | k | method | recall | NCR | MSE | recall - pure-ldp "
        "| NCR - pure-ldp | MSE - pure-ldp | recall - ours | NCR - ours | MSE - ours |"
    )
    lines = [head, "|" + "---|" * 13]
    losses, rule_losses = [], []
    for (name, eps, k), per in scores.items():
        arr = {m: {key: np.array([r[key] for r in rs]) for key, _ in METRICS}
               for m, rs in per.items()}  # fmt: skip
        for method in ("pure-ldp", *(v for v in VARIANTS if v in per)):
            cols = [_fmt(arr[method][key], f) for key, f in METRICS]
            for ref in ("pure-ldp", "ours"):
                for key, f in METRICS:
                    same = method == ref or (ref == "ours" and method == "pure-ldp")
                    cols.append("" if same else _diff(arr[method][key] - arr[ref][key], f,
                                                      key != "mse"))  # fmt: skip
            lines.append(f"| {name} | {eps:g} | {k} | {method} | " + " | ".join(cols) + " |")
        label = f"{name} eps {eps:g} k {k}"
        losses += _behind(arr, "ours", label)
        rule_losses += _behind(arr, rules[name], f"{label} ({rules[name]})")
    return "\n".join(lines), losses, rule_losses


def markdown(result: dict, args: argparse.Namespace, info: dict, command: str, seconds: float,
             commit: str) -> str:  # fmt: skip
    import importlib.metadata

    body, losses, rule_losses = table(result)
    date = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    lost = "; ".join(losses) if losses else "none"
    rule_lost = "; ".join(rule_losses) if rule_losses else "none"
    return f"""# PEM's layout against pure-ldp's PEM where heavy_hitters.md saw ours lose

- Command: `{command}`
- Date: {date}; {seconds:.0f} s; commit {commit}
- Machine: {info["machine"]}, {info["cpu"]}, {info["cores"]} cores; load average at start
  {info["load"]}
- Python {info["python"]}, numpy {info["numpy"]}, bayesldp {info["bayesldp"]},
  pure-ldp {info["pure-ldp"]}, xxhash {importlib.metadata.version("xxhash")}
- n = {args.n:,} users, {args.seeds} seeds per cell (seed s: heavy_hitters.py's population and
  runs of seed s); cells {", ".join(args.cells)} (population:eps), k in {{10, 20, 50}}

Methods (see the script's docstring): `ours` `PEM(eps, k, bits=24, eta=4)` (5 rounds, the
default), `first4` the same after an extra round of the 16 4-bit prefixes (6 rounds), `eta5`
`PEM(eps, k, bits=24, eta=5)` (4 rounds), `bits20` `PEM(eps, k, bits=20, eta=4)` (4 rounds),
`positional` (zipf20 only) `PEM(eps, k, eta=4, encoder=PositionalEncoder(hex, 5))` (20 bits, 4
rounds, no shared code); pure-ldp 1.2.0's PEM over its count-mean sketch (m = 1024, 32 rows; 5
rounds of one hex character, the first over 16 prefixes).  Means ± standard error over seeds;
the differences are paired (same users), mean ± standard error of the per-seed differences,
"(+)" / "(-)" where they are more than 2 standard errors in the method's favour / against it.
Both packages return k items, so precision equals recall.

Cells where `ours` is more than 2 standard errors behind pure-ldp: {lost}.

The rule of `PEM`'s docstring (the positional code for fixed-length items over a known alphabet
when it takes at most 24 bits, else the 24-bit hash) picks `positional` on zipf20 and `ours` on
zipf32. Cells where that choice is more than 2 standard errors behind pure-ldp: {rule_lost}.

{body}
"""


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="2 seeds, n = 20,000, zipf20 eps 1; writes nothing unless "
                        "--out")  # fmt: skip
    parser.add_argument("--out", type=Path, default=None, metavar="PATH",
                        help="markdown file (default results/pem_layout.md)")  # fmt: skip
    parser.add_argument("--n", type=int, default=100_000, help="users per population")
    parser.add_argument("--seeds", type=int, default=20, help="populations and runs per cell")
    parser.add_argument("--cells", nargs="+", default=list(CELLS),
                        help="population:eps pairs (default %(default)s)")  # fmt: skip
    args = parser.parse_args(argv)
    if args.quick:
        args.n, args.seeds, args.cells = 20_000, 2, ["zipf20:1"]
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    command = "python " + " ".join(
        shlex.quote(a) for a in [os.path.relpath(sys.argv[0]), *(argv or sys.argv[1:])]
    )
    check_xxhash()
    info = machine_info()
    t0 = time.perf_counter()
    result = run(args)
    seconds = time.perf_counter() - t0
    git = ["git", "rev-parse", "--short", "HEAD"]
    head = subprocess.run(git, cwd=ROOT, text=True, capture_output=True, check=False)
    text = markdown(result, args, info, command, seconds, head.stdout.strip() or "unknown")
    print(text)
    out = args.out if args.out is not None else (None if args.quick else DEFAULT_OUT)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text)
        print(f"wrote {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
