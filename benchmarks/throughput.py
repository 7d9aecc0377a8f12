"""Throughput of perturb + tally + unbiased oracle: bayesldp against pure-ldp and multi-freq-ldpy.

For GRR, OUE and OLH at K in {10, 100, 1000} and epsilon = 1, every implementation takes the
same true values (drawn once per K from a fixed seed; the peers use a prefix), randomises them,
aggregates the reports and computes the frequency estimate.  The clock (``time.perf_counter``)
covers exactly those three steps; the table reports users per second.

* bayesldp: ``mech.perturb(x, rng)``, ``mech.tally(reports)``, ``mech.unbiased_frequencies(tally)``
  on n = 100,000 users (GRR also on 1,000,000), best of 3 repeats.
* pure-ldp 1.2.0: ``DEClient/DEServer``, ``UEClient/UEServer(use_oue=True)``,
  ``LHClient/LHServer(use_olh=True)``; one ``privatise`` + ``aggregate`` call per user (its API),
  then ``estimate_all`` over the domain.  pure-ldp's default index mapper is ``x - 1``: it wants
  values 1..K, so it is given ``x + 1``.
* multi-freq-ldpy 0.2.5: ``GRR_Client`` / ``UE_Client(optimal=True)`` /
  ``LH_Client(optimal=True)`` per user (0-based values), then ``GRR_Aggregator_MI`` /
  ``UE_Aggregator_MI`` / ``LH_Aggregator_MI``.
  Its clients are numba-compiled: they are called once before timing so compilation is excluded.

The peers perturb one user at a time in Python, so each is timed once on a number of users
calibrated from a short pilot run to take about ``--peer-seconds`` (capped by memory).

Every estimate is checked against the truth before its time is reported, so that like is compared
with like: unbiased estimates (bayesldp, pure-ldp, and multi-freq-ldpy's reports decoded
independently here) must satisfy ``max_x |f_hat(x) - f(x)| / sd(x) <= 6`` with the exact
variance of Wang et al. (USENIX Security 2017, Theorem 2); multi-freq-ldpy's own output (clipped
and renormalised "MI") must equal that clip-and-renormalise of the independent decode.

Usage::

    python benchmarks/throughput.py            # full run, writes benchmarks/results/throughput.md
    python benchmarks/throughput.py --quick    # smoke run (small n), writes nothing unless --out
"""

from __future__ import annotations

import argparse
import datetime as _dt
import gc
import importlib.metadata
import math
import os
import platform
import random
import shlex
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

EPSILON = 1.0
SEED = 20240611
KS = (10, 100, 1000)
MECHANISMS = ("GRR", "OUE", "OLH")
GOALS = {"GRR": 20.0, "OUE": 20.0, "OLH": 5.0}
ZIPF_EXPONENT = 1.1
Z_LIMIT = 6.0
PEER_REPORT_BYTES = 1.2e8  # cap on the memory the peers' report lists may take
DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "throughput.md"


# ---------------------------------------------------------------------- data and exact variance
def true_values(k: int, n: int) -> np.ndarray:
    """``n`` values in 0..k-1 from a Zipf(1.1) law over the categories, fixed seed per ``k``."""
    weights = np.arange(1, k + 1, dtype=float) ** -ZIPF_EXPONENT
    rng = np.random.default_rng([SEED, 1, k])
    return rng.choice(k, size=n, p=weights / weights.sum())


def olh_g(epsilon: float) -> int:
    """OLH hash range ``g = round(e^eps) + 1`` (Wang et al. 2017, section 4.4)."""
    return round(math.exp(epsilon)) + 1


def pure_protocol(mech: str, k: int, epsilon: float) -> tuple[float, float]:
    """``(p*, q*)`` of the pure protocol (Wang et al. 2017, Table 1)."""
    e = math.exp(epsilon)
    if mech == "GRR":
        return e / (e + k - 1), 1.0 / (e + k - 1)
    if mech == "OUE":
        return 0.5, 1.0 / (e + 1)
    if mech == "OLH":
        g = olh_g(epsilon)
        return e / (e + g - 1), 1.0 / g
    raise ValueError(f"mechanism: unknown {mech!r}")


def max_abs_z(mech: str, k: int, estimate: np.ndarray, truth: np.ndarray, n: int) -> float:
    """Largest standardised error of an unbiased estimate.

    Exact variance for a fixed population with frequencies ``f``:
    ``q*(1-q*) / (n (p*-q*)^2) + f (1-p*-q*) / (n (p*-q*))``.
    """
    p, q = pure_protocol(mech, k, EPSILON)
    var = q * (1 - q) / (n * (p - q) ** 2) + truth * (1 - p - q) / (n * (p - q))
    return float(np.max(np.abs(np.asarray(estimate, dtype=float) - truth) / np.sqrt(var)))


def unbiased_from_support_counts(mech: str, k: int, counts: np.ndarray, n: int) -> np.ndarray:
    p, q = pure_protocol(mech, k, EPSILON)
    return (np.asarray(counts, dtype=float) / n - q) / (p - q)


def clip_renormalise(estimate: np.ndarray) -> np.ndarray:
    """multi-freq-ldpy's MI post-processing: clip at 0, divide by the sum."""
    clipped = np.clip(estimate, 0.0, None)
    total = clipped.sum()
    return clipped / total if total > 0 else clipped


# ---------------------------------------------------------------------- bayesldp
@dataclass
class BayesResult:
    n: int
    seconds: float
    phases: tuple[float, float, float]  # perturb, tally, oracle of the best repeat
    max_z: float
    cpu_seconds: float  # best process CPU time over the repeats

    @property
    def rate(self) -> float:
        return self.n / self.seconds


def make_bayes_mechanism(mech: str, k: int) -> Any:
    import bayesldp

    try:
        cls = getattr(bayesldp, mech)
    except (AttributeError, ImportError) as exc:
        raise SystemExit(f"bayesldp.{mech} is not available ({exc}); use --mechanisms") from exc
    return cls(k, EPSILON)


def run_bayesldp(mech: str, k: int, x: np.ndarray, repeats: int) -> BayesResult:
    mechanism = make_bayes_mechanism(mech, k)
    n = x.shape[0]
    truth = np.bincount(x, minlength=k) / n
    best, phases, worst_z, best_cpu = math.inf, (0.0, 0.0, 0.0), 0.0, math.inf
    for r in range(repeats):
        # no trailing zero: SeedSequence([a, b, 0]) is the same stream as SeedSequence([a, b])
        rng = np.random.default_rng([SEED, 2, k, r + 1])
        gc.collect()
        c0 = time.process_time()
        t0 = time.perf_counter()
        reports = mechanism.perturb(x, rng)
        t1 = time.perf_counter()
        tally = mechanism.tally(reports)
        t2 = time.perf_counter()
        estimate = mechanism.unbiased_frequencies(tally)
        t3 = time.perf_counter()
        best_cpu = min(best_cpu, time.process_time() - c0)
        if t3 - t0 < best:
            best, phases = t3 - t0, (t1 - t0, t2 - t1, t3 - t2)
        worst_z = max(worst_z, max_abs_z(mech, k, estimate, truth, n))
        del reports, tally
    if worst_z > Z_LIMIT:
        raise SystemExit(f"bayesldp {mech} K={k}: estimate off by {worst_z:.1f} sd")
    return BayesResult(n, best, phases, worst_z, best_cpu)


# ---------------------------------------------------------------------- peers
@dataclass
class PeerResult:
    n: int
    seconds: float
    cpu_seconds: float
    max_z: float = 0.0
    checks: list[str] = field(default_factory=list)

    @property
    def rate(self) -> float:
        return self.n / self.seconds


def _seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)  # noqa: NPY002 - the peers draw from the legacy global state
    _numba_seed(seed % 2**32)


_NUMBA_SEED: Callable[[int], None] | None = None


def _numba_seed(seed: int) -> None:
    """Seed numba's own generator (used inside multi-freq-ldpy's jitted clients)."""
    global _NUMBA_SEED
    if _NUMBA_SEED is None:
        import numba

        @numba.njit
        def _seed(s):  # pragma: no cover - compiled
            np.random.seed(s)  # noqa: NPY002 - numba's own global state

        _NUMBA_SEED = _seed
    _NUMBA_SEED(seed)


def import_pure_ldp_oracles() -> Any:
    """pure-ldp's DE, UE and LH clients and servers.

    pure-ldp 1.2.0's ``pure_ldp/frequency_oracles/__init__.py`` imports its RAPPOR server, which
    imports scikit-learn, a package pure-ldp does not declare.  Without scikit-learn the three
    subpackages used here are loaded directly (their own code does not need it).
    """
    try:
        import pure_ldp.frequency_oracles as oracles

        return oracles
    except ModuleNotFoundError as exc:
        if exc.name is None or exc.name.split(".")[0] != "sklearn":
            raise
    import types

    import pure_ldp

    stub = types.ModuleType("pure_ldp.frequency_oracles")
    stub.__path__ = [str(Path(pure_ldp.__file__).parent / "frequency_oracles")]
    sys.modules["pure_ldp.frequency_oracles"] = stub
    from pure_ldp.frequency_oracles.direct_encoding import DEClient, DEServer
    from pure_ldp.frequency_oracles.local_hashing import LHClient, LHServer
    from pure_ldp.frequency_oracles.unary_encoding import UEClient, UEServer

    for name, obj in [
        ("DEClient", DEClient),
        ("DEServer", DEServer),
        ("UEClient", UEClient),
        ("UEServer", UEServer),
        ("LHClient", LHClient),
        ("LHServer", LHServer),
    ]:
        setattr(stub, name, obj)
    return stub


def pure_ldp_job(mech: str, k: int) -> Callable[[list[int]], tuple[np.ndarray, Any]]:
    """A function of the (1-based) values that runs pure-ldp end to end: (estimate, None)."""
    oracles = import_pure_ldp_oracles()
    DEClient, DEServer = oracles.DEClient, oracles.DEServer
    UEClient, UEServer = oracles.UEClient, oracles.UEServer
    LHClient, LHServer = oracles.LHClient, oracles.LHServer

    def job(values: list[int]) -> tuple[np.ndarray, Any]:
        if mech == "GRR":
            client, server = DEClient(EPSILON, k), DEServer(EPSILON, k)
        elif mech == "OUE":
            client, server = UEClient(EPSILON, k, use_oue=True), UEServer(EPSILON, k, use_oue=True)
        else:
            client, server = LHClient(EPSILON, k, use_olh=True), LHServer(EPSILON, k, use_olh=True)
        privatise, aggregate = client.privatise, server.aggregate
        for v in values:
            aggregate(privatise(v))
        counts = server.estimate_all(range(1, k + 1), suppress_warnings=True)
        return np.asarray(counts, dtype=float) / len(values), None

    return job


def multi_freq_job(mech: str, k: int) -> Callable[[list[int]], tuple[np.ndarray, Any]]:
    """A function of the (0-based) values: multi-freq-ldpy end to end, (estimate, reports)."""
    from multi_freq_ldpy.pure_frequency_oracles.GRR import GRR_Aggregator_MI, GRR_Client
    from multi_freq_ldpy.pure_frequency_oracles.LH import LH_Aggregator_MI, LH_Client
    from multi_freq_ldpy.pure_frequency_oracles.UE import UE_Aggregator_MI, UE_Client

    eps = EPSILON

    def job(values: list[int]) -> tuple[np.ndarray, Any]:
        if mech == "GRR":
            reports = [GRR_Client(v, k, eps) for v in values]
            return np.asarray(GRR_Aggregator_MI(reports, k, eps)), reports
        if mech == "OUE":
            reports = [UE_Client(v, k, eps, True) for v in values]
            return np.asarray(UE_Aggregator_MI(reports, eps, True)), reports
        reports = [LH_Client(v, k, eps, True) for v in values]
        return np.asarray(LH_Aggregator_MI(reports, k, eps, True)), reports

    return job


def decode_multi_freq(mech: str, k: int, reports: Any) -> np.ndarray:
    """Support counts of multi-freq-ldpy reports, computed independently of its aggregator."""
    if mech == "GRR":
        return np.bincount(np.asarray(reports, dtype=np.int64), minlength=k)
    if mech == "OUE":
        return np.asarray(reports).sum(axis=0)
    import xxhash

    g = olh_g(EPSILON)
    keys = [str(v).encode() for v in range(k)]  # the peers hash str(v); xxhash 3 encodes UTF-8
    counts = np.zeros(k, dtype=np.int64)
    for y, seed in reports:
        y, seed = int(y), int(seed)
        for v, key in enumerate(keys):
            if xxhash.xxh32(key, seed=seed).intdigest() % g == y:
                counts[v] += 1
    return counts


def report_bytes(mech: str, k: int) -> float:
    """Rough memory per user of a peer's list of reports."""
    return 8.0 * k + 100 if mech == "OUE" else 100.0


def check_xxhash() -> None:
    """pure-ldp 1.2.0 and multi-freq-ldpy 0.2.5 hash ``str`` values, which xxhash 4 rejects."""
    import xxhash

    try:
        xxhash.xxh32("0", seed=1)
    except TypeError as exc:
        raise SystemExit(
            f"xxhash {xxhash.VERSION} rejects str input, so the peers' local hashing fails: "
            "pip install 'xxhash<4' (pure-ldp and multi-freq-ldpy were written against it)"
        ) from exc


def run_peer(
    peer: str, mech: str, k: int, x: np.ndarray, seconds: float, n_min: int, repeats: int
) -> PeerResult:
    job = pure_ldp_job(mech, k) if peer == "pure-ldp" else multi_freq_job(mech, k)
    offset = 1 if peer == "pure-ldp" else 0  # pure-ldp's default index mapper is x - 1
    n_cap = int(min(x.shape[0], PEER_REPORT_BYTES / report_bytes(mech, k)))

    # warm-up (numba compilation) and pilot to calibrate n
    _seed_everything(SEED)
    job((x[:20] + offset).tolist())
    pilot = min(200 if mech != "OLH" or k < 1000 else 100, n_cap)
    t0 = time.perf_counter()
    job((x[:pilot] + offset).tolist())
    pilot_rate = pilot / (time.perf_counter() - t0)
    n = int(min(n_cap, max(n_min, pilot_rate * seconds)))

    values = (x[:n] + offset).tolist()  # plain Python ints, prepared outside the clock
    truth = np.bincount(x[:n], minlength=k) / n
    best, best_cpu, estimate, reports = math.inf, math.inf, None, None
    for r in range(repeats):
        _seed_everything(SEED + r)
        gc.collect()
        c0 = time.process_time()
        t0 = time.perf_counter()
        est, rep = job(values)
        elapsed = time.perf_counter() - t0
        best_cpu = min(best_cpu, time.process_time() - c0)
        if elapsed < best:
            best, estimate, reports = elapsed, est, rep
    result = PeerResult(n, best, best_cpu)

    if peer == "pure-ldp":
        result.max_z = max_abs_z(mech, k, estimate, truth, n)
        result.checks.append(f"max abs z {result.max_z:.2f}")
    else:
        unbiased = unbiased_from_support_counts(mech, k, decode_multi_freq(mech, k, reports), n)
        result.max_z = max_abs_z(mech, k, unbiased, truth, n)
        gap = float(np.max(np.abs(clip_renormalise(unbiased) - estimate)))
        result.checks.append(f"decoded max abs z {result.max_z:.2f}, MI gap {gap:.1e}")
        if gap > 1e-9:
            raise SystemExit(f"{peer} {mech} K={k}: MI output differs from decode by {gap}")
    if result.max_z > Z_LIMIT:
        raise SystemExit(f"{peer} {mech} K={k}: estimate off by {result.max_z:.1f} sd")
    return result


# ---------------------------------------------------------------------- reporting
def fmt_rate(rate: float) -> str:
    if rate >= 1e6:
        return f"{rate / 1e6:.3g} M"
    if rate >= 1e3:
        return f"{rate / 1e3:.3g} k"
    return f"{rate:.3g}"


def fmt_n(n: int) -> str:
    return f"{n:,}"


def machine_info() -> dict[str, str]:
    model = "unknown"
    try:
        lscpu = subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout
        for line in lscpu.splitlines():
            if line.startswith("Model name:"):
                model = line.split(":", 1)[1].strip()
    except OSError:
        pass

    def version(dist: str) -> str:
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            return "not installed"

    try:
        load = ", ".join(f"{v:.2f}" for v in os.getloadavg())
    except OSError:
        load = "n/a"
    return {
        "machine": platform.machine(),
        "cpu": model,
        "cores": str(os.cpu_count()),
        "load": load,
        "python": platform.python_version(),
        "numpy": np.__version__,
        "bayesldp": version("bayesldp"),
        "pure-ldp": version("pure-ldp"),
        "multi-freq-ldpy": version("multi-freq-ldpy"),
        "numba": version("numba"),
    }


@dataclass
class Row:
    mech: str
    k: int
    bayes: BayesResult
    pure: PeerResult
    multi: PeerResult

    @property
    def ratio(self) -> float:
        return self.bayes.rate / max(self.pure.rate, self.multi.rate)

    @property
    def ratio_cpu(self) -> float:
        """The same ratio from process CPU time (less sensitive to other jobs on the machine)."""
        bayes = self.bayes.n / self.bayes.cpu_seconds
        return bayes / max(
            self.pure.n / self.pure.cpu_seconds, self.multi.n / self.multi.cpu_seconds
        )

    @property
    def goal(self) -> float:
        return GOALS[self.mech]


def main_table(rows: list[Row]) -> str:
    lines = [
        "| mechanism | K | bayesldp users/s (n) | pure-ldp users/s (n) | "
        "multi-freq-ldpy users/s (n) | ratio vs faster peer | goal | met? | ratio, CPU time |",
        "|---|---:|---:|---:|---:|---:|---:|:---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r.mech} | {r.k} | {fmt_rate(r.bayes.rate)} ({fmt_n(r.bayes.n)}) "
            f"| {fmt_rate(r.pure.rate)} ({fmt_n(r.pure.n)}) "
            f"| {fmt_rate(r.multi.rate)} ({fmt_n(r.multi.n)}) "
            f"| {r.ratio:.1f}x | {r.goal:g}x | {'yes' if r.ratio >= r.goal else 'NO'} "
            f"| {r.ratio_cpu:.1f}x |"
        )
    return "\n".join(lines)


def phase_table(rows: list[Row]) -> str:
    lines = [
        "| mechanism | K | n | perturb ms | tally ms | oracle ms | total ms | max abs z |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        p, t, o = (1e3 * s for s in r.bayes.phases)
        lines.append(
            f"| {r.mech} | {r.k} | {fmt_n(r.bayes.n)} | {p:.2f} | {t:.2f} | {o:.3f} "
            f"| {1e3 * r.bayes.seconds:.2f} | {r.bayes.max_z:.2f} |"
        )
    return "\n".join(lines)


def peer_table(rows: list[Row]) -> str:
    lines = [
        "| mechanism | K | pure-ldp: n, seconds, check | multi-freq-ldpy: n, seconds, check |",
        "|---|---:|---|---|",
    ]
    seen = set()
    for r in rows:
        if (r.mech, r.k) in seen:  # GRR has two bayesldp sizes against the same peer runs
            continue
        seen.add((r.mech, r.k))
        lines.append(
            f"| {r.mech} | {r.k} "
            f"| {fmt_n(r.pure.n)}, {r.pure.seconds:.2f} s, {'; '.join(r.pure.checks)} "
            f"| {fmt_n(r.multi.n)}, {r.multi.seconds:.2f} s, {'; '.join(r.multi.checks)} |"
        )
    return "\n".join(lines)


def markdown(rows: list[Row], info: dict[str, str], command: str, args: argparse.Namespace) -> str:
    date = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    met = sum(r.ratio >= r.goal for r in rows)
    return f"""# Throughput: perturb + tally + unbiased oracle

Users per second for the whole pipeline (randomise every user's value, aggregate the reports,
compute the unbiased frequency estimate), epsilon = {EPSILON:g}, same true values for everyone
(Zipf({ZIPF_EXPONENT}) over the K categories, drawn once per K from seed {SEED}; the peers use
a prefix). Goal: bayesldp at least 20x the faster peer for GRR and OUE, 5x for OLH.
Goals met: {met} of {len(rows)} rows.

- Command: `{command}`
- Date: {date}
- Machine: {info["machine"]}, {info["cpu"]}, {info["cores"]} cores; load average at start
  {info["load"]}
- Python {info["python"]}, numpy {info["numpy"]}, bayesldp {info["bayesldp"]},
  pure-ldp {info["pure-ldp"]}, multi-freq-ldpy {info["multi-freq-ldpy"]} (numba {info["numba"]})

The machine was shared with other jobs while this ran: absolute numbers are noisy (easily
+-30 %, more under load); the ratios are measured in the same run on the same data, which is what
the goal is about. Users/s and the ratio use wall-clock time (`time.perf_counter`); the last
column is the same ratio from process CPU time (`time.process_time`), which other jobs disturb
less: where the two disagree a lot, the machine was busy, so re-run on an idle machine.

{main_table(rows)}

How it was timed: `time.perf_counter` around perturb + tally + oracle only (drawing the true
values and converting them to Python ints for the peers is outside the clock). bayesldp: best of
{args.repeats} repeats. Peers: their per-user Python APIs (pure-ldp `privatise` + `aggregate`,
then `estimate_all`; multi-freq-ldpy `*_Client` per user, then `*_Aggregator_MI`),
{args.peer_repeats} timed run(s) each on n users calibrated from a pilot to take about
{args.peer_seconds:g} s (capped at the data size and, for OUE, by the memory of the report list);
multi-freq-ldpy's numba clients are compiled before timing. pure-ldp is given 1-based values
(its default index mapper is `x - 1`), multi-freq-ldpy 0-based values (its documented range is
[0, k-1]).

## bayesldp phases (best repeat)

{phase_table(rows)}

## Peers: sample sizes and sanity checks

Every estimate is checked against the true frequencies of the users it saw: max over categories of
|f_hat - f| / sd with the exact variance of Wang et al. 2017 must be <= {Z_LIMIT:g} (it is for
every row). multi-freq-ldpy returns a clipped and renormalised estimate ("MI"), so its reports are
decoded independently here (support counts, the unbiased formula) for the z check, and its output
must equal the clip-and-renormalise of that decode ("MI gap").

{peer_table(rows)}

## Notes

- GRR has two bayesldp rows per K (n = 100,000 and 1,000,000) against the same peer runs.
- Local hashing: both peers hash `str(v)` with xxh32 and a random seed per user (they need
  `xxhash<4`, which still encodes `str`); bayesldp's OLH draws a random hash
  `((a v + b) mod P) mod g` per user (P = 2^31 - 1). Same protocol and parameters
  (g = round(e^eps) + 1 = {olh_g(EPSILON)}, p* = e^eps / (e^eps + g - 1), q* = 1/g up to the hash
  family's collision probability), different hash functions.
- Peers are timed once (`--peer-repeats`) on runs of about {args.peer_seconds:g} s, bayesldp best of
  {args.repeats} short runs; on a busy machine that favours bayesldp, which the CPU-time column
  shows.
"""


# ---------------------------------------------------------------------- main
def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small n, for a smoke run")
    parser.add_argument(
        "--out",
        metavar="PATH",
        type=Path,
        default=None,
        help="markdown file to write (default benchmarks/results/throughput.md; "
        "with --quick nothing is written unless --out is given)",
    )
    parser.add_argument(
        "--mechanisms",
        nargs="+",
        default=list(MECHANISMS),
        choices=MECHANISMS,
        metavar="MECH",
        help="subset of GRR OUE OLH (default all)",
    )
    parser.add_argument(
        "--ks",
        nargs="+",
        type=int,
        default=list(KS),
        metavar="K",
        help="domain sizes (10 100 1000)",
    )
    parser.add_argument("--repeats", type=int, default=3, help="bayesldp repeats (best of)")
    parser.add_argument("--peer-repeats", type=int, default=1, help="timed runs per peer")
    parser.add_argument(
        "--peer-seconds",
        type=float,
        default=None,
        help="target seconds per peer run (1.5, quick 0.2)",
    )
    args = parser.parse_args(argv)
    if args.peer_seconds is None:
        args.peer_seconds = 0.2 if args.quick else 1.5
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    command = "python " + " ".join(
        shlex.quote(a) for a in [os.path.relpath(sys.argv[0]), *(argv or sys.argv[1:])]
    )
    n_bayes = 20_000 if args.quick else 100_000
    n_bayes_grr = 100_000 if args.quick else 1_000_000
    n_min = 500 if args.quick else 2_000
    n_data = max(n_bayes, n_bayes_grr)

    check_xxhash()
    info = machine_info()
    rows: list[Row] = []
    for mech in args.mechanisms:
        for k in args.ks:
            x = true_values(k, n_data)
            sizes = [n_bayes, n_bayes_grr] if mech == "GRR" else [n_bayes]
            pure = run_peer("pure-ldp", mech, k, x, args.peer_seconds, n_min, args.peer_repeats)
            multi = run_peer(
                "multi-freq-ldpy", mech, k, x, args.peer_seconds, n_min, args.peer_repeats
            )
            for n in sizes:
                bayes = run_bayesldp(mech, k, x[:n], args.repeats)
                rows.append(Row(mech, k, bayes, pure, multi))
                r = rows[-1]
                print(
                    f"{mech} K={k} n={n}: bayesldp {fmt_rate(bayes.rate)}/s, "
                    f"pure-ldp {fmt_rate(pure.rate)}/s (n={pure.n}), "
                    f"multi-freq-ldpy {fmt_rate(multi.rate)}/s (n={multi.n}), "
                    f"ratio {r.ratio:.1f}x",
                    file=sys.stderr,
                    flush=True,
                )

    text = markdown(rows, info, command, args)
    print(text)
    out = args.out if args.out is not None else (None if args.quick else DEFAULT_OUT)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text)
        print(f"wrote {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
