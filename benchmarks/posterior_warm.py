"""Warm posterior sampling: ``fit``'s default against nutpie, numpyro and PyMC on a model set.

A notebook user fits in a process that has already imported everything and compiled
what it needs; this measures that case.  Each sampler runs in its own subprocess (so their
imports and thread pools do not meet), which fits every model of the set twice: once to warm up
(compile, caches), then the timed fit.  Models (:data:`MODELS`): GRR K = 20 and K = 200 at
n = 1e5, OUE K = 50 at n = 1e5 (one likelihood row per distinct report), RRRR K = 10 at n = 1e4,
each under Dirichlet(1); the adaptive prior on a sparse GRR K = 30 tally (theta ~
Dirichlet(0.05), n = 1e4); the smoothness prior on square-wave reports at 64 bins (n = 5,000).
4 chains x 1,000 draws after 1,000 warm-up iterations, every sampler at its own default
target_accept, on the machine's cores.

Samplers:

* ``fit``: ``bayesldp.fit(tally, prior=...)`` with its default method (``auto``; the method it
  chose is in the table); sampling seconds = the backend's ``wall_time`` (warm-up included);
  total = the whole call (checks, InferenceData, diagnostics).  Where ``auto`` takes
  ``laplace`` (NUTS on a quadratic surrogate of the likelihood, then PSIS weights), the ESS is
  that of the surrogate's draws before the weights, which lower it (their Pareto k is shown).
* ``nutpie``: ``nutpie.compile_pymc_model(build_model(tally, prior))`` (compile seconds apart),
  then ``nutpie.sample`` (sampling seconds).
* ``numpyro``: numpyro's NUTS on the PyMC model's JAX log-density, one ``MCMC`` object run
  twice (:func:`run_numpyro`: compile seconds = first run minus second, sampling = the
  second), chains in parallel on as many XLA host devices as cores.
* ``pymc``: ``bayesldp.bayes.nuts.sample(..., nuts_sampler="pymc")`` on as many processes as
  cores; sampling seconds = PyMC's ``sampling_time``, compile = the rest of the call.

Columns: minimum bulk and tail ESS over the K categories (ArviZ), min-ESS/s = the smaller of the
two over the sampling seconds, divergences after warm-up, and the ratio of ``fit``'s min-ESS/s to
the better of nutpie's and numpyro's (goal: 10x).  A second table profiles one warm default fit
(GRR K = 20) by phase: cProfile's cumulative seconds of the backend's sampler, of the
InferenceData and of the diagnostics, the rest of ``fit`` (checks, method choice), the warm-up's
share of the sampler (from a fit with 1 draw per chain), and a fresh process's
``import bayesldp``.

``fit_hmc``: ``fit(method="hmc")``, the package's NUTS, for a model where ``fit``'s default picks
another method (OUE K = 50: the Laplace method, whose draws are a surrogate's); the ratio table
gives a row for each of ``fit`` and ``fit_hmc``.  ``--draws`` and ``--tune`` shorten a run (the
OUE model's); the warm-up call before a timed fit of ``fit``, ``fit_hmc`` and ``pymc`` runs
50 draws after 50 warm-up iterations (compilation and caches only).

The registered run leaves out the OUE model (one likelihood row per distinct report, about
1e5 rows: the external samplers' gradients cost n K each, and a first run had not finished
nutpie's fit of it after 15 minutes) and PyMC's own NUTS (108 s of sampling on GRR K = 20 in a
scratch run, against nutpie's 6 s).  The OUE model alone: ``--models oue50 --samplers fit fit_hmc
nutpie numpyro --draws 300 --tune 300`` (a run on a machine shared with other jobs had not
finished nutpie's fit after 54 minutes, and one on an idle machine not after 100: numpyro runs
twice, to time its compilation apart); ``--timeout SECONDS`` stops a sampler's process there and
gives each model it had not finished a row saying so; ``--samplers pymc`` runs PyMC's.

Usage::

    python benchmarks/posterior_warm.py --out benchmarks/results/posterior_warm.md
    python benchmarks/posterior_warm.py --models grr20 smooth64 --samplers fit nutpie
"""

from __future__ import annotations

import argparse
import cProfile
import datetime
import json
import os
import platform
import pstats
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

DRAWS, TUNE, CHAINS, SEED = 1000, 1000, 4, 20261127
DEFAULT_RUN = (DRAWS, TUNE)  # the registered runs' draws and warm-up per chain
MODELS = {
    "grr20": "GRR K = 20, n = 1e5, Dirichlet(1)",
    "grr200": "GRR K = 200, n = 1e5, Dirichlet(1)",
    "oue50": "OUE K = 50, n = 1e5 (per-report rows), Dirichlet(1)",
    "rrrr10": "RRRR K = 10, n = 1e4, Dirichlet(1)",
    "adaptive30": "GRR K = 30 sparse (theta ~ Dirichlet(0.05)), n = 1e4, adaptive prior",
    "smooth64": "SW 64 bins, n = 5,000, smoothness prior",
}
SAMPLERS = ("fit", "fit_hmc", "nutpie", "numpyro", "pymc")
GOAL = 10.0


def make(name: str):
    """The model's tally and prior (seeded: the same for every sampler)."""
    import bayesldp

    gen = np.random.default_rng([SEED, list(MODELS).index(name)])
    if name in ("grr20", "grr200", "oue50", "rrrr10"):
        k, n = {"grr20": (20, 100_000), "grr200": (200, 100_000), "oue50": (50, 100_000),
                "rrrr10": (10, 10_000)}[name]  # fmt: skip
        mech = {"grr20": bayesldp.GRR, "grr200": bayesldp.GRR, "oue50": bayesldp.OUE}.get(name)
        mech = mech(k, 1.0) if mech else bayesldp.RRRR(k, 1.0, subset=(0, 1, 2))
        x = gen.choice(k, size=n, p=gen.dirichlet(np.ones(k)))
        return mech.tally(mech.perturb(x, rng=gen)), 1.0
    if name == "adaptive30":
        mech = bayesldp.GRR(30, 1.0)
        x = gen.choice(30, size=10_000, p=gen.dirichlet(np.full(30, 0.05)))
        return mech.tally(mech.perturb(x, rng=gen)), "adaptive"
    mech = bayesldp.SquareWave(64, 1.0, lo=-1.0, hi=1.0, output_bins=64)
    x = np.clip(gen.normal(-0.3, 0.25, 5_000), -1.0, 1.0)
    return mech.tally(mech.perturb(x, rng=gen)), "smooth"


def ess_min(theta: np.ndarray) -> tuple[float, float]:
    """Minimum bulk and tail ESS over the categories of draws (chains, draws, K)."""
    from bayesldp.bayes.fit import import_arviz

    az = import_arviz()
    ds = az.convert_to_dataset({"theta": theta})
    return (float(az.ess(ds, method="bulk")["theta"].min()),
            float(az.ess(ds, method="tail")["theta"].min()))  # fmt: skip


def run_fit(tally, prior, seed: int, method: str = "auto") -> dict:
    import bayesldp

    started = time.perf_counter()
    idata = bayesldp.fit(tally, prior=prior, draws=DRAWS, tune=TUNE, chains=CHAINS,
                         random_seed=seed, compute_convergence_checks=False,
                         method=method)  # fmt: skip
    total = time.perf_counter() - started
    info = json.loads(idata.posterior.attrs["backend_info"])
    stats = getattr(idata, "sample_stats", None)
    method = idata.posterior.attrs["method"]
    if "pareto_k" in idata.posterior.attrs:  # laplace: ESS of its surrogate's draws, unweighted
        method += f" (unweighted; PSIS k {idata.posterior.attrs['pareto_k']:.2f})"
    return {"method": method, "total": total,
            "sampling": float(info.get("wall_time", total)), "compile": 0.0,
            "theta": idata.posterior["theta"].values,
            "divergences": int(stats["diverging"].sum()) if stats is not None and "diverging"
            in stats else 0, "steps": _mean_steps(stats, "n_steps")}  # fmt: skip


def run_nutpie(tally, prior, seed: int) -> dict:
    import nutpie

    from bayesldp.bayes.model import build_model

    started = time.perf_counter()
    compiled = nutpie.compile_pymc_model(build_model(tally, prior))
    compile_s = time.perf_counter() - started
    started = time.perf_counter()
    trace = nutpie.sample(compiled, draws=DRAWS, tune=TUNE, chains=CHAINS, seed=seed,
                          cores=os.cpu_count(), progress_bar=False)  # fmt: skip
    sampling = time.perf_counter() - started
    return {"method": "nutpie", "compile": compile_s, "sampling": sampling,
            "total": compile_s + sampling, "theta": trace.posterior["theta"].values,
            "divergences": int(trace.sample_stats["diverging"].sum()),
            "steps": _mean_steps(trace.sample_stats, "n_steps")}  # fmt: skip


def run_pymc(tally, prior, seed: int) -> dict:
    """PyMC's own NUTS (``bayesldp.bayes.nuts.sample``); sampling seconds = PyMC's
    ``sampling_time``, compile seconds = the rest of the call (model, compilation)."""
    from bayesldp.bayes import nuts
    from bayesldp.bayes.prior import Dirichlet, as_prior

    alpha = as_prior(prior, tally.k)  # as fit hands it to its backends
    alpha = alpha.alpha.copy() if isinstance(alpha, Dirichlet) else alpha
    started = time.perf_counter()
    out = nuts.sample(tally, alpha, draws=DRAWS, tune=TUNE, chains=CHAINS, random_seed=seed,
                      nuts_sampler="pymc", cores=os.cpu_count())  # fmt: skip
    total = time.perf_counter() - started
    sampling = float(out.info["sampling_time"])
    return {"method": "pymc", "compile": total - sampling, "sampling": sampling,
            "total": total, "theta": out.theta,
            "divergences": int(np.sum(out.sample_stats["diverging"])),
            "steps": _mean_steps(out.sample_stats, "n_steps")}  # fmt: skip


def run_numpyro(tally, prior, seed: int) -> dict:
    """numpyro's NUTS on the PyMC model's log-density (PyMC's JAX translation,
    ``get_jaxified_logp``): one ``MCMC`` object run twice, so the second run reuses the first's
    compilation; compile seconds = the first run's minus the second's, sampling seconds = the
    second's; theta from the unconstrained draws through PyMC's JAX graph of the model."""
    import jax
    from numpyro.infer import MCMC, NUTS
    from pymc.sampling.jax import get_jaxified_graph, get_jaxified_logp

    from bayesldp.bayes.model import build_model

    started = time.perf_counter()
    model = build_model(tally, prior)
    potential = get_jaxified_logp(model, negative_logp=False)  # PyMC: this is -logp
    point = model.initial_point()
    init = [np.repeat(np.asarray(point[v.name])[None], CHAINS, axis=0) for v in model.value_vars]
    mcmc = MCMC(NUTS(potential_fn=potential, target_accept_prob=0.8),
                num_warmup=TUNE, num_samples=DRAWS, num_chains=CHAINS,
                chain_method="parallel", progress_bar=False)  # fmt: skip
    times = []
    for key in (seed, seed + 1):
        started = time.perf_counter() if times else started
        mcmc.run(jax.random.PRNGKey(key), init_params=init,
                 extra_fields=("diverging", "num_steps"))  # fmt: skip
        draws = jax.block_until_ready(mcmc.get_samples(group_by_chain=True))
        times.append(time.perf_counter() - started)
    graph = get_jaxified_graph(inputs=model.value_vars,
                               outputs=model.replace_rvs_by_values([model["theta"]]))  # fmt: skip
    theta = jax.vmap(jax.vmap(lambda *a: graph(*a)[0]))(*draws)
    extra = mcmc.get_extra_fields(group_by_chain=True)
    return {"method": "numpyro", "compile": max(times[0] - times[1], 0.0),
            "sampling": times[1], "total": times[0], "theta": np.asarray(theta),
            "divergences": int(np.sum(extra["diverging"])),
            "steps": _mean_steps(extra, "num_steps")}  # fmt: skip


def _mean_steps(stats, name: str) -> float:
    """Mean leapfrog steps per kept draw (NaN where the sampler has none: laplace, exact)."""
    if stats is None or name not in stats:
        return float("nan")
    return float(np.mean(np.asarray(stats[name])))


WARM_UP_CALL = {"fit", "fit_hmc", "pymc"}  # nutpie and numpyro compile inside their run
WARM_UP_DRAWS = 50  # the warm-up call's draws and tune: compilation and caches only


def run_fit_hmc(tally, prior, seed: int) -> dict:
    """``fit(method="hmc")``: the package's NUTS where ``fit``'s default picks another method."""
    return run_fit(tally, prior, seed, method="hmc")


def worker(sampler: str, models: list[str], out: str) -> None:
    """Inside the sampler's subprocess: warm up on each model, then the timed fit."""
    run = {"fit": run_fit, "fit_hmc": run_fit_hmc, "nutpie": run_nutpie,
           "numpyro": run_numpyro, "pymc": run_pymc}[sampler]  # fmt: skip
    rows, full = [], (DRAWS, TUNE)
    for name in models:
        tally, prior = make(name)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                if sampler in WARM_UP_CALL:  # compilation and caches, on a short run
                    _set_run(WARM_UP_DRAWS, WARM_UP_DRAWS)
                    run(tally, prior, 0)
                    _set_run(*full)
                r = run(tally, prior, 1)
            except Exception as exc:  # a sampler that cannot fit a model: its row says why
                rows.append({"model": name, "sampler": sampler, "error": repr(exc)[:200]})
                continue
        bulk, tail = ess_min(r.pop("theta"))
        r.update(model=name, sampler=sampler, ess_bulk=bulk, ess_tail=tail,
                 ess_per_s=min(bulk, tail) / r["sampling"])  # fmt: skip
        print(json.dumps(r), flush=True)
        rows.append(r)
    Path(out).write_text(json.dumps(rows))


def run_sampler(sampler: str, models: list[str], timeout: float | None = None) -> list[dict]:
    """The sampler's rows, from its own process; with ``timeout`` (seconds) the process is
    stopped there and each model it had not finished gets a row saying so."""
    env = dict(os.environ)
    if sampler == "numpyro":
        env["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={os.cpu_count()}"
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "rows.json")
        try:
            proc = subprocess.run([sys.executable, __file__, "--worker", sampler, "--models",
                                   *models, "--json", out, "--draws", str(DRAWS), "--tune",
                                   str(TUNE)], env=env, text=True, capture_output=True,
                                  timeout=timeout)  # fmt: skip
        except subprocess.TimeoutExpired as exc:
            return _unfinished(exc.stdout, sampler, models, timeout)
        sys.stdout.write(proc.stdout)
        if proc.returncode != 0:
            tail = proc.stderr.strip().splitlines()[-1:] or ["no message"]
            return [{"model": m, "sampler": sampler, "error": tail[0][:200]} for m in models]
        return json.loads(Path(out).read_text())


def _unfinished(stdout: str | bytes | None, sampler: str, models: list[str],
                timeout: float) -> list[dict]:  # fmt: skip
    """The rows a stopped worker had printed, and one per model it had not finished."""
    text = stdout.decode() if isinstance(stdout, bytes) else (stdout or "")
    sys.stdout.write(text)
    done = [json.loads(line) for line in text.splitlines() if line.startswith("{")]
    left = [m for m in models if m not in {r["model"] for r in done}]
    why = f"not finished in {timeout:,.0f} s (stopped)"
    return done + [{"model": m, "sampler": sampler, "error": why} for m in left]


def profile_fit() -> dict:
    """One warm default fit of the GRR K = 20 model, by phase (cProfile cumulative seconds)."""
    import bayesldp

    tally, prior = make("grr20")
    kwargs = dict(prior=prior, draws=DRAWS, tune=TUNE, chains=CHAINS, random_seed=1)
    bayesldp.fit(tally, **kwargs)  # warm
    prof = cProfile.Profile()
    started = time.perf_counter()
    prof.enable()
    idata = bayesldp.fit(tally, **kwargs)
    prof.disable()
    total = time.perf_counter() - started
    stats = pstats.Stats(prof).stats

    def cum(module: str, func: str) -> float:
        return sum(v[3] for (f, _, fn), v in stats.items() if f.endswith(module) and fn == func)

    phases = {"sampler (warm-up and draws)": cum("hmc/__init__.py", "sample"),
              "InferenceData": cum("inference_data.py", "build_inference_data"),
              "diagnostics": cum("diagnostics.py", "diagnose")}  # fmt: skip
    phases["the rest of fit (checks, method choice)"] = total - sum(phases.values())
    one = bayesldp.fit(tally, **{**kwargs, "draws": 1}, compute_convergence_checks=False)
    warm_up = json.loads(one.posterior.attrs["backend_info"])["wall_time"]
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import bayesldp"], check=True)
    return {
        "total": total,
        "phases": phases,
        "warm_up": warm_up,
        "import": time.perf_counter() - started,
        "wall_time": json.loads(idata.posterior.attrs["backend_info"])["wall_time"],
    }


def tables(rows: list[dict], models: list[str], samplers: list[str]) -> str:
    lines = ["| model | sampler | method | compile s | sampling s | total s | min bulk ESS "
             "| min tail ESS | min-ESS/s | divergences | steps per draw | us per step |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]  # fmt: skip
    ratios = ["| model | fit min-ESS/s | better of nutpie, numpyro | ratio | goal | met? |",
              "|---|---:|---:|---:|---:|:---:|"]  # fmt: skip
    for m in models:
        by = {r["sampler"]: r for r in rows if r["model"] == m}
        for s in samplers:
            r = by.get(s)
            if r is None:
                continue
            if "error" in r:
                what = r["error"] if r["error"].startswith("not finished") else (
                    f"failed: {r['error']}")  # fmt: skip
                lines.append(f"| {MODELS[m]} | {s} | {what} | | | | | | | | | |")
                continue
            lines.append(f"| {MODELS[m]} | {s} | {r['method']} | {r['compile']:.2f} | "
                         f"{r['sampling']:.2f} | {r['total']:.2f} | {r['ess_bulk']:.0f} | "
                         f"{r['ess_tail']:.0f} | {r['ess_per_s']:,.0f} | "
                         f"{r['divergences']} | {r['steps']:.1f} | "
                         f"{_us_per_step(r):.1f} |")  # fmt: skip
        peers = [
            by[s]["ess_per_s"] for s in ("nutpie", "numpyro") if s in by and "error" not in by[s]
        ]
        for s in ("fit", "fit_hmc"):
            if s not in by or "error" in by[s] or not peers:
                continue
            ratio = by[s]["ess_per_s"] / max(peers)
            met = "yes" if ratio >= GOAL else "no"
            ratios.append(f"| {MODELS[m]} ({s}: {by[s]['method']}) | {by[s]['ess_per_s']:,.0f} | "
                          f"{max(peers):,.0f} | {ratio:.1f}x | {GOAL:g}x | {met} |")  # fmt: skip
    return "\n".join(lines) + "\n\n" + "\n".join(ratios)


def _us_per_step(r: dict) -> float:
    """Wall microseconds per leapfrog step over the whole run, ``sampling seconds / (steps per
    draw x (warm-up + draws) x chains)``: it takes warm-up's steps per iteration to be the kept
    draws' and counts the chains' steps as if in sequence (all samplers ran theirs on the same
    cores)."""
    return 1e6 * r["sampling"] / (r["steps"] * (TUNE + DRAWS) * CHAINS)


def profile_table(p: dict) -> str:
    lines = ["| phase | seconds | share of the fit |", "|---|---:|---:|"]
    for name, seconds in p["phases"].items():
        lines.append(f"| {name} | {seconds:.3f} | {seconds / p['total']:.0%} |")
    lines.append(f"| whole warm fit (profiled) | {p['total']:.3f} | 100% |")
    return "\n".join(lines) + (
        f"\n\nThe sampler's own clock: {p['wall_time']:.3f} s, of which warm-up about "
        f"{p['warm_up']:.3f} s (a fit with 1 draw per chain).  Non-sampling overhead of the "
        f"warm fit: {p['total'] - p['phases']['sampler (warm-up and draws)']:.3f} s (goal 0.2 s; "
        f"cProfile's own cost included).  `import bayesldp` in a fresh process: "
        f"{p['import']:.2f} s."
    )


def _set_run(draws: int, tune: int) -> None:
    global DRAWS, TUNE
    DRAWS, TUNE = draws, tune


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    parser.add_argument("--samplers", nargs="+", default=list(SAMPLERS), choices=SAMPLERS)
    parser.add_argument("--out", default="-", help="results file ('-': print only)")
    parser.add_argument("--draws", type=int, default=DRAWS, help="kept draws per chain")
    parser.add_argument("--tune", type=int, default=TUNE, help="warm-up iterations per chain")
    parser.add_argument("--timeout", type=float, default=None,
                        help="seconds a sampler's process may take (its unfinished models get "
                        "a row saying so)")  # fmt: skip
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--json", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    _set_run(args.draws, args.tune)
    if args.worker:
        worker(args.worker, args.models, args.json)
        return
    started, load = time.perf_counter(), os.getloadavg()
    rows = [r for s in args.samplers for r in run_sampler(s, args.models, args.timeout)]
    profile = profile_fit()
    end_load = os.getloadavg()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, text=True,
                            capture_output=True).stdout.strip()  # fmt: skip
    versions = []
    for mod in ("bayesldp", "pymc", "nutpie", "numpyro", "jax", "numba"):
        try:
            versions.append(f"{mod} {__import__(mod).__version__}")
        except ImportError:
            versions.append(f"{mod} not installed")
    command = "python benchmarks/posterior_warm.py" + (
        "" if args.out == "-" else f" --out {args.out}"
    )
    if args.models != list(MODELS):
        command += " --models " + " ".join(args.models)
    if args.samplers != list(SAMPLERS):
        command += " --samplers " + " ".join(args.samplers)
    if (DRAWS, TUNE) != DEFAULT_RUN:
        command += f" --draws {DRAWS} --tune {TUNE}"
    if args.timeout is not None:
        command += f" --timeout {args.timeout:g}"
    text = "\n".join([
        "# Warm posterior sampling: fit against nutpie, numpyro and PyMC", "",
        f"- Command: `{command}`",
        f"- Date: {datetime.datetime.now(datetime.UTC).strftime('%Y-%m-%d %H:%M UTC')}; commit "
        f"{commit}; {time.perf_counter() - started:.0f} s",
        f"- Machine: {platform.machine()}, {os.cpu_count()} cores; load average at the start "
        f"{', '.join(f'{x:.2f}' for x in load)}, at the end "
        f"{', '.join(f'{x:.2f}' for x in end_load)}",
        f"- Python {platform.python_version()}; {', '.join(versions)}",
        f"- {CHAINS} chains x {DRAWS:,} draws after {TUNE:,} warm-up iterations; each sampler in "
        "its own process, every model fitted once to warm up before the timed fit (module "
        "docstring: what each column times)", "",
        tables(rows, args.models, args.samplers), "",
        "## Where a warm default fit's time goes (GRR K = 20, n = 1e5, Dirichlet(1))", "",
        profile_table(profile), "",
    ])  # fmt: skip
    print(text)
    if args.out != "-":
        Path(args.out).write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
