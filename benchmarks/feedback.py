"""Cost of a fit's feedback: the progress bars' overhead and the speed-up of ``cores=``.

Problem: GRR, K = 20, n = 100,000, eps = 1, theta drawn from Dirichlet(1) with a fixed seed, the
default sampler (``method="hmc"``, 4 chains x 1000 draws after 1000 tuning steps), kernels warm
(one fit first, untimed).  In one process, for each ``cores`` in (1, 2) and
``progressbar`` in (False, True) (bars written to /dev/null: tqdm formats them as on a
terminal), ``fit`` is timed ``--repeats`` times, configurations interleaved so that a change in
the machine's load hits all of them; medians are reported, and the draws of every configuration
are checked to be bit-identical to those of ``cores=1``.  Last, the share of a ``cores=1``
sampler run spent inside the compiled transition (the part threads can overlap) is measured.

Usage::

    python benchmarks/feedback.py --repeats 5 --write benchmarks/results/feedback.md
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

K, N, EPSILON, SEED = 20, 100_000, 1.0, 20240601
CONFIGS = [(1, False), (1, True), (2, False), (2, True)]


def make_tally():
    import bayesldp

    gen = np.random.default_rng(SEED)
    theta = gen.dirichlet(np.ones(K))
    return bayesldp.GRR(K, EPSILON).simulate_tally(gen.multinomial(N, theta), rng=gen)


def timed_fit(tally, cores: int, progressbar: bool) -> tuple[float, float, np.ndarray]:
    """Seconds inside ``fit``, seconds inside the sampler (its ``wall_time``), the draws."""
    import bayesldp

    with open(os.devnull, "w") as sink, contextlib.redirect_stderr(sink):
        start = time.perf_counter()
        idata = bayesldp.fit(tally, prior=1.0, random_seed=1, cores=cores, progressbar=progressbar)
        seconds = time.perf_counter() - start
    sampler = json.loads(idata.posterior.attrs["backend_info"])["wall_time"]
    return seconds, sampler, idata.posterior["theta"].values


def kernel_share(tally) -> float:
    """Share of a ``cores=1`` sampler run spent inside the compiled transition (which releases
    the GIL): with ``c`` free cores the threads can speed it up at most
    ``1 / (1 - share + share / c)`` (Amdahl)."""
    from bayesldp.bayes.hmc import run  # where _chain calls it

    original = run._transition
    inside = [0.0]

    def timed(*args):
        start = time.perf_counter()
        out = original(*args)
        inside[0] += time.perf_counter() - start
        return out

    run._transition = timed
    try:
        _, sampler, _ = timed_fit(tally, 1, False)
    finally:
        run._transition = original
    return inside[0] / sampler


def bar_bookkeeping(chains: int = 4, tune: int = 1000, draws: int = 1000) -> float:
    """Seconds that the bars of one fit cost by themselves: the sampler's bar calls for every
    iteration of ``chains`` chains (bars on /dev/null), without any sampling: a number the
    machine's load hardly moves, unlike the difference of two noisy fit times."""
    from bayesldp.bayes import _feedback, hmc

    with open(os.devnull, "w") as sink, contextlib.redirect_stderr(sink):
        start = time.perf_counter()
        for c in range(chains):
            bar = _feedback.progress_bar(tune + draws, f"chain {c}", True, position=c)
            for it in range(tune + draws):
                if (it + 1) % hmc._BAR_STEP == 0 or it + 1 == tune or it + 1 == tune + draws:
                    bar.update(it + 1 - bar.n)
                if it + 1 == tune:
                    bar.set_postfix_str("sampling", refresh=False)
            bar.close()
        return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--write", type=Path)
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    tally = make_tally()
    timed_fit(tally, 1, False)  # compile / load the kernels, import ArviZ
    load_before = os.getloadavg()
    times: dict[tuple[int, bool], list[float]] = {c: [] for c in CONFIGS}
    sampler: dict[tuple[int, bool], list[float]] = {c: [] for c in CONFIGS}
    reference = None
    identical = True
    for _ in range(args.repeats):
        for config in CONFIGS:
            seconds, inside, theta = timed_fit(tally, *config)
            times[config].append(seconds)
            sampler[config].append(inside)
            if reference is None:
                reference = theta
            identical &= bool(np.array_equal(theta, reference))
    share = kernel_share(tally)
    bookkeeping = float(np.median([bar_bookkeeping() for _ in range(5)]))
    load_after = os.getloadavg()
    med = {c: float(np.median(v)) for c, v in times.items()}
    smed = {c: float(np.median(v)) for c, v in sampler.items()}
    lines = [
        "# Feedback: progress-bar overhead and cores= speed-up (warm kernels)",
        "",
        f"Written by `benchmarks/feedback.py --repeats {args.repeats}` on "
        f"{datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC; machine: "
        f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}; "
        f"load average (1, 5, 15 min) before {tuple(round(x, 2) for x in load_before)}, after "
        f"{tuple(round(x, 2) for x in load_after)} (a shared machine: above 2, the two cores "
        "are not ours alone and the speed-up of cores=2 is understated).",
        "",
        f"Problem: GRR, K = {K}, n = {N:,}, eps = {EPSILON}, `bayesldp.fit(tally, cores=...,"
        " progressbar=...)`, 4 chains x 1000 draws, 1000 tuning steps: seconds inside `fit` "
        "(sampling, InferenceData, r_hat and ESS) and inside the sampler alone (its "
        "`wall_time`: mode, warm-up, draws).",
        "",
        "| cores | progressbar | fit median s | sampler median s | fit s, each run |",
        "|---:|---|---:|---:|---|",
    ]
    for config in CONFIGS:
        each = ", ".join(f"{t:.2f}" for t in times[config])
        lines.append(
            f"| {config[0]} | {config[1]} | {med[config]:.3f} | {smed[config]:.3f} | {each} |"
        )
    bar_1 = smed[(1, True)] / smed[(1, False)] - 1
    bar_2 = smed[(2, True)] / smed[(2, False)] - 1
    lines += [
        "",
        f"- progress bars: {100 * bar_1:+.1f}% sampler time with cores=1, {100 * bar_2:+.1f}% "
        "with cores=2 (median against median: within the noise of this machine); the bars' "
        f"own calls for one fit (4 bars, 8000 iterations, no sampling) take "
        f"{1000 * bookkeeping:.1f} ms, {100 * bookkeeping / smed[(1, False)]:.2f}% of the "
        "cores=1 sampler median;",
        f"- cores=2 against cores=1 (no bars): sampler {smed[(1, False)] / smed[(2, False)]:.2f}x"
        f" faster, whole fit {med[(1, False)] / med[(2, False)]:.2f}x;",
        f"- draws bit-identical across all configurations: {identical};",
        f"- share of a cores=1 sampler run inside the compiled transition (GIL released): "
        f"{share:.0%}, so two free cores could give at most {1 / (1 - share / 2):.2f}x.",
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.write:
        args.write.write_text(text)


if __name__ == "__main__":
    main()
