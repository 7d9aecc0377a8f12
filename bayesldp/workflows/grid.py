"""The experiment grid of AdOBEst-LDP.

Aydın and Yıldırım, "Bayesian Frequency Estimation Under Local Differential Privacy With an
Adaptive Randomized Response Mechanism", ACM TKDD 2025, section "Numerical
experiments".

For every domain size ``K``, Dirichlet concentration ``rho`` and repeat, a population
``theta ~ Dirichlet(rho 1_K)`` and ``n`` users ``X_t ~ theta`` are drawn once and shared by every
privacy level and method (common random numbers, so differences between methods are paired).
Each method then runs a full :class:`~bayesldp.adaptive.survey.AdaptiveSurvey` (the paper's
schedule: subset selection before every user, 20 SGLD updates per user with minibatch 50,
constant step ``0.5 / n``, final run of 2000 updates with 1000 burn-in) and is scored by

.. math:: \\mathrm{TV} = \\tfrac12 \\|\\hat\\theta - \\theta\\|_1,

``theta_hat`` the mean of the final SGLD draws (the paper's metric).  With the paper's constant
step ``0.5 / n`` the SGLD relaxes over a fixed number of its own time constants however large
``n`` is, and the final run barely moves, so ``theta_hat`` is close to one lagged posterior
draw; to separate the information in the reports from the sampler, the grid also scores the
maximum-likelihood estimate from the same reports (``tv_mle``, :func:`bayesldp.estimate` with
``"mle"`` on the survey's merged RRRR tally).  Methods: the six utilities with
``eps1 in {0.8, 0.9} eps``, the semi-adaptive rule for each ``alpha`` and the non-adaptive
baseline (plain GRR).  Outputs: a results Dataset (``results.nc``), markdown tables of TV
(mean +- sd over repeats) and of the average ``|S|``, and PNG plots of TV against epsilon and
against rho.

The spec is a TOML file (``models/adobest_grid.toml``; its schema:
:mod:`bayesldp.workflows.spec.grid`).
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from bayesldp._optional import require
from bayesldp.adaptive.survey import AdaptiveSurvey
from bayesldp.errors import InvalidInputError, InvalidTypeError
from bayesldp.workflows.spec import load_spec
from bayesldp.workflows.spec.grid import users_per_survey

if TYPE_CHECKING:
    import xarray

__all__ = ["method_labels", "run_grid", "users_text", "write_summary", "write_tables"]


def method_labels(grid: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The methods of a grid: ``(label, AdaptiveSurvey keyword arguments)``."""
    methods: list[tuple[str, dict[str, Any]]] = []
    for utility in grid["utilities"]:
        for frac in grid["eps1_fraction"]:
            methods.append(
                (f"{utility} {frac:g}", {"utility": utility, "eps1_fraction": float(frac)})
            )
    for alpha in grid["semi_adaptive_alpha"]:
        methods.append((f"semi {alpha:g}", {"utility": "semi_adaptive", "alpha": float(alpha)}))
    if grid["non_adaptive"]:
        methods.append(("non-adaptive", {"utility": "non_adaptive"}))
    return methods


def _progress(progress: Any) -> Callable[[int, int, str], None] | None:
    if progress is None or progress is False:
        return None
    if progress is True:
        started = time.perf_counter()

        def report(done: int, total: int, what: str) -> None:
            elapsed = time.perf_counter() - started
            print(f"[{done}/{total}] {what} ({elapsed:.0f} s)", file=sys.stderr, flush=True)

        return report
    if callable(progress):
        return progress
    raise InvalidTypeError(f"progress: expected True, False, None or a callable, got {progress!r}")


def run_grid(
    spec_path: str | os.PathLike[str] | Mapping[str, Any],
    out_dir: str | os.PathLike[str],
    paper: bool = False,
    progress: bool | Callable[[int, int, str], None] | None = None,
    command: str | None = None,
    scheduler: str | None = "serial",
    only: Mapping[str, Any] | None = None,
) -> xarray.Dataset:
    """Run the AdOBEst-LDP experiment grid of a spec and write its tables and plots.

    Every survey (one cell: K, rho, repeat, epsilon, method) is independent: it draws its
    population and users from its own ``SeedSequence`` children, so cells can run in any order
    or place and give bit-identical results.  Each finished cell is written to
    ``OUT/cells/<cell>.json`` at once; a grid that is stopped and run again with the same
    spec, size and output directory reads the finished cells back and runs only the others.

    Parameters
    ----------
    spec_path : str, PathLike or dict
        The TOML spec (see the module docstring; ``models/adobest_grid.toml``), or a spec
        already loaded by :func:`bayesldp.workflows.spec.load_spec`.
    out_dir : str or PathLike
        Directory for ``results.nc``, ``tables.md``, ``tv_vs_epsilon.png``, ``tv_vs_rho.png``
        and ``cells/`` (created if needed).
    paper : bool
        Use the ``[paper]`` size (by default the reference code's: ``n = 500 K`` users, i.e.
        5,000 for K = 10 and 10,000 for K = 20, and 50 repeats) instead of ``[grid]``'s
        ``n`` or ``n_per_category`` and ``repeats``.
    progress : bool or callable, optional
        True prints one line per survey to stderr; a callable gets ``(done, total, label)``.
    command : str, optional
        The command line recorded at the top of ``tables.md``.
    scheduler : str or None
        ``"serial"`` (default: in this process); ``None``: a ``dask.distributed`` LocalCluster
        (one worker process per core); a scheduler address (``"tcp://host:8786"``); or
        ``"threads"`` (dask's threaded scheduler).  The cells are the tasks.
    only : dict, optional
        Run only the cells whose coordinates are in these lists, e.g. ``{"k": [10], "scheme":
        ["fisher 0.8", "non-adaptive"]}`` (keys ``k``, ``rho``, ``epsilon``, ``scheme``,
        ``repeat``).  Cells finished earlier in ``out_dir`` are read back whether selected or
        not; the others are NaN.  A grid can so be run in parts (one K now, another later or
        elsewhere) into one output directory: the cells, and hence the results, are the same.

    Returns
    -------
    xarray.Dataset
        ``tv`` (SGLD posterior mean), ``tv_mle`` (MLE from the same reports) and
        ``mean_subset_size`` with dims ``(k, rho, epsilon, scheme, repeat)``, plus
        ``theta`` (the populations, dims ``(k, rho, repeat, category)``, NaN-padded for the
        smaller K), ``seconds`` per survey and ``n_users`` (users per survey, dim ``k``); the
        spec in the attrs (and ``n`` when every K has the same number of users).
    """
    import xarray as xr

    spec = spec_path if isinstance(spec_path, Mapping) else load_spec(spec_path, kind="grid")
    grid = spec["grid"]
    size_table = spec["paper"] if paper else grid
    repeats = size_table["repeats"]
    ks, rhos, epss = grid["k"], [float(r) for r in grid["rho"]], [float(e) for e in grid["epsilon"]]
    sizes = [users_per_survey(size_table, k) for k in ks]
    methods = method_labels(grid)
    report = _progress(progress)
    out = Path(out_dir)
    cells_dir = out / "cells"
    cells_dir.mkdir(parents=True, exist_ok=True)
    fingerprint = _fingerprint(spec, sizes, repeats)

    shape = (len(ks), len(rhos), len(epss), len(methods), repeats)
    fields = ("tv", "tv_mle", "mean_subset_size", "seconds")
    values = {name: np.full(shape, np.nan) for name in fields}
    thetas = np.full((len(ks), len(rhos), repeats, max(ks)), np.nan)
    for ik, k in enumerate(ks):
        for ir, rho in enumerate(rhos):
            for rep in range(repeats):
                theta = _population(grid["seed"], ik, ir, rep, k, rho, sizes[ik])[0]
                thetas[ik, ir, rep, :k] = theta
    wanted = _selected(only, ks, rhos, epss, [label for label, _ in methods], repeats)
    cells = list(np.ndindex(*shape))
    todo = []
    for cell in cells:
        saved = _read_cell(cells_dir, cell, fingerprint)
        if saved is None:
            if all(cell[axis] in wanted[axis] for axis in range(5)):
                todo.append(cell)
        else:
            for name in fields:
                values[name][cell] = saved[name]

    def label(cell: tuple[int, ...]) -> str:
        ik, ir, ie, im, rep = cell
        return f"K={ks[ik]} rho={rhos[ir]:g} rep={rep} eps={epss[ie]:g} {methods[im][0]}"

    done = int(np.isfinite(values["tv"]).sum())
    total = done + len(todo)
    for cell, result in _run_cells(spec, sizes, todo, scheduler):
        _write_cell(cells_dir, cell, fingerprint, result)
        for name in fields:
            values[name][cell] = result[name]
        done += 1
        if report is not None:
            report(done, total, label(cell))

    coords = {
        "k": np.asarray(ks),
        "rho": np.asarray(rhos),
        "epsilon": np.asarray(epss),
        "scheme": [label for label, _ in methods],
        "repeat": np.arange(repeats),
    }
    dims = ("k", "rho", "epsilon", "scheme", "repeat")
    results = xr.Dataset(
        {
            **{name: (dims, values[name]) for name in fields},
            "theta": (("k", "rho", "repeat", "category"), thetas),
            "n_users": (("k",), np.asarray(sizes, dtype=np.int64)),
        },
        coords={**coords, "category": np.arange(max(ks))},
        attrs={
            "spec": json.dumps(spec, sort_keys=True),
            **({"n": sizes[0]} if len(set(sizes)) == 1 else {}),
            "repeats": repeats,
            "paper_size": int(paper),
            "metric": "TV = 1/2 |theta_hat - theta|_1, theta_hat the mean of the final SGLD run",
        },
    )
    results.to_netcdf(out / "results.nc", engine="h5netcdf")
    text = write_header(results, command) + "\n## Summary\n\n" + write_summary(results)
    (out / "tables.md").write_text(text + "\n## Tables\n\n" + write_tables(results), "utf-8")
    _plot(results, out)
    return results


def _selected(only: Mapping[str, Any] | None, ks: list, rhos: list, epss: list,
              schemes: list, repeats: int) -> list[set[int]]:  # fmt: skip
    """Indices along (k, rho, epsilon, scheme, repeat) that ``only`` selects."""
    axes = {"k": list(ks), "rho": rhos, "epsilon": epss, "scheme": schemes,
            "repeat": list(range(repeats))}  # fmt: skip
    chosen = [set(range(len(values))) for values in axes.values()]
    if only is None:
        return chosen
    if not isinstance(only, Mapping):
        raise InvalidTypeError(f"only: expected a dict of coordinate lists, got {only!r}")
    for key, wanted in only.items():
        if key not in axes:
            raise InvalidInputError(f"only: unknown key {key!r} (valid: {', '.join(axes)})")
        if isinstance(wanted, str | bytes) or not hasattr(wanted, "__iter__"):
            wanted = [wanted]
        index = []
        for value in wanted:
            hits = [i for i, v in enumerate(axes[key]) if v == value]
            if not hits:
                raise InvalidInputError(
                    f"only[{key!r}]: {value!r} is not in the grid (valid: {axes[key]})"
                )
            index += hits
        chosen[list(axes).index(key)] = set(index)
    return chosen


def _population(seed: int, ik: int, ir: int, rep: int, k: int, rho: float, n: int) -> tuple:
    """The population ``theta`` and users ``x`` of (K, rho, repeat), shared by its cells."""
    data_ss = np.random.SeedSequence(seed, spawn_key=(ik, ir, rep, 0))
    gen = np.random.default_rng(data_ss)
    theta = gen.dirichlet(np.full(k, rho))
    return theta, gen.choice(k, size=n, p=theta)


def run_cell(spec: Mapping[str, Any], n: int, cell: tuple[int, ...]) -> dict[str, float]:
    """One survey of the grid: ``cell = (ik, ir, ie, im, rep)`` indexes K, rho, epsilon, method
    and repeat.  Its population, users and survey seed come from ``SeedSequence`` children of
    ``[grid].seed`` keyed by the cell, so the result does not depend on where it runs."""
    from bayesldp.estimators import estimate as estimate_frequencies

    grid, survey_cfg = spec["grid"], spec["survey"]
    ik, ir, ie, im, rep = (int(i) for i in cell)
    k, rho, eps = grid["k"][ik], float(grid["rho"][ir]), float(grid["epsilon"][ie])
    theta, x = _population(grid["seed"], ik, ir, rep, k, rho, n)
    seed = np.random.SeedSequence(grid["seed"], spawn_key=(ik, ir, rep, 1 + ie))
    started = time.perf_counter()
    survey = AdaptiveSurvey(
        k,
        eps,
        prior=float(survey_cfg["prior"]),
        engine="sgld",  # the paper's per-user SGLD and its final run
        batch_size=survey_cfg["batch_size"],
        sgld_steps_per_user=survey_cfg["sgld_steps_per_user"],
        minibatch=survey_cfg["minibatch"],
        final_steps=survey_cfg["final_steps"],
        burn_in=survey_cfg["burn_in"],
        n_expected=n,
        random_seed=seed,
        **method_labels(grid)[im][1],
    ).simulate(x)
    estimate = survey.posterior(chains=1, engine="sgld").posterior["theta"].values.mean(axis=(0, 1))
    mle = estimate_frequencies(survey.tally(), "mle", std_errors=False).frequencies
    return {
        "tv": float(0.5 * np.abs(estimate - theta).sum()),
        "tv_mle": float(0.5 * np.abs(mle - theta).sum()),
        "mean_subset_size": float(survey.history["subset_size"].values.mean()),
        "seconds": time.perf_counter() - started,
    }


def _run_cells(
    spec: Mapping[str, Any], sizes: list[int], cells: list, scheduler: str | None
) -> Any:
    """``(cell, result)`` pairs as the cells finish, here or on Dask (``sizes[ik]`` users for
    the ``ik``-th K)."""
    if scheduler == "serial":
        for cell in cells:
            yield cell, run_cell(spec, sizes[cell[0]], cell)
        return
    if not cells:
        return
    dask = require("dask", f"the grid's scheduler {scheduler!r}")

    if scheduler == "threads":
        tasks = [dask.delayed(run_cell, pure=True)(spec, sizes[cell[0]], cell) for cell in cells]
        yield from zip(cells, dask.compute(*tasks, scheduler="threads"), strict=True)
        return
    distributed = require("distributed", f"the grid's scheduler {scheduler!r}")
    Client, LocalCluster, as_completed = (
        distributed.Client, distributed.LocalCluster, distributed.as_completed
    )  # fmt: skip

    cluster = None
    if scheduler is None:
        # workers log CRITICAL only, as the tally's cluster (workflows/dask_tally.py): a
        # heartbeat racing the scheduler's shutdown logs a traceback at ERROR; a cell's failure
        # reaches the client as its exception
        cluster = LocalCluster(n_workers=os.cpu_count() or 1, threads_per_worker=1,
                               dashboard_address=":0", silence_logs=logging.CRITICAL)  # fmt: skip
    try:
        client = Client(cluster if cluster is not None else scheduler, timeout="10s")
    except (OSError, TimeoutError) as exc:
        raise InvalidInputError(
            f"scheduler: no Dask scheduler answered at {scheduler} ({exc})"
        ) from None
    try:
        futures = {
            client.submit(run_cell, spec, sizes[cell[0]], cell, pure=False): cell for cell in cells
        }
        for future in as_completed(futures):
            yield futures[future], future.result()
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


def _fingerprint(spec: Mapping[str, Any], sizes: list[int], repeats: int) -> str:
    """What a saved cell must have been computed with to be reused."""
    import hashlib

    text = json.dumps({"spec": spec, "n": sizes, "repeats": repeats}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


def _cell_path(cells_dir: Path, cell: tuple[int, ...]) -> Path:
    return cells_dir / ("cell_" + "_".join(str(int(i)) for i in cell) + ".json")


def _read_cell(cells_dir: Path, cell: tuple[int, ...], fingerprint: str) -> dict | None:
    path = _cell_path(cells_dir, cell)
    if not path.is_file():
        return None
    try:
        saved = json.loads(path.read_text())
    except json.JSONDecodeError:  # a torn write of an older version: recompute
        return None
    return saved["result"] if saved.get("fingerprint") == fingerprint else None


def _write_cell(cells_dir: Path, cell: tuple[int, ...], fingerprint: str, result: dict) -> None:
    path = _cell_path(cells_dir, cell)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"fingerprint": fingerprint, "result": result}))
    os.replace(tmp, path)


def users_text(results: xarray.Dataset) -> str:
    """Users per survey of a grid's results: ``"10,000"`` or ``"5,000 (K=10), 10,000 (K=20)"``."""
    sizes = [int(v) for v in results["n_users"].values]
    if len(set(sizes)) == 1:
        return f"{sizes[0]:,}"
    return ", ".join(f"{n:,} (K={k})" for k, n in zip(results["k"].values, sizes, strict=True))


def write_header(results: xarray.Dataset, command: str | None) -> str:
    """Title, command, date, machine and sizes of a grid run (the top of ``tables.md``)."""
    import datetime

    from bayesldp.workflows.accuracy import machine_info

    info = machine_info()
    spec = json.loads(results.attrs["spec"])
    surveys = int(np.isfinite(results["seconds"].values).sum())
    seconds = float(np.nansum(results["seconds"].values))
    size = "the [paper] size" if results.attrs["paper_size"] else "default size"
    lines = [
        f"# AdOBEst-LDP experiment grid (Aydin and Yildirim 2025), {spec['grid']['name']}: {size}",
        "",
        f"- command: `{command or 'bayesldp.workflows.grid.run_grid'}`",
        f"- date: {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC",
        f"- machine: {info['arch']}, {info['cpu']}, {info['cores']} cores; load at the end "
        f"{info['load']}; Python {info['python']}, numpy {info['numpy']}, commit {info['commit']}",
        f"- n = {users_text(results)} users per survey, {results.attrs['repeats']} repeats, "
        f"K in {list(spec['grid']['k'])}, rho in {list(spec['grid']['rho'])}, eps in "
        f"{list(spec['grid']['epsilon'])}; {surveys} surveys, {seconds:.0f} s of survey time",
        f"- metric: {results.attrs['metric']}; TV of MLE: of the maximum-likelihood estimate "
        "from the same reports",
        "",
    ]
    return "\n".join(lines)


def write_summary(results: xarray.Dataset) -> str:
    """One markdown row per setting: adaptive and semi-adaptive TV relative to non-adaptive.

    Ratios are of mean TV over repeats (paired: same populations and users); "wins" counts
    (method, repeat) pairs whose TV is below the non-adaptive TV of the same repeat.  U1
    (fisher) is listed apart because it selected ``S`` empty (= non-adaptive) throughout.
    """
    methods = [str(m) for m in results["scheme"].values]
    if "non-adaptive" not in methods:
        return ""
    base_i = methods.index("non-adaptive")
    adaptive = [i for i, m in enumerate(methods) if not m.startswith(("semi", "non", "fisher"))]
    semi = [i for i, m in enumerate(methods) if m.startswith("semi")]
    fisher = [i for i, m in enumerate(methods) if m.startswith("fisher")]
    lines = [
        "| K | rho | eps | metric | non-adaptive TV | U2-U6 median ratio (range) | U2-U6 wins "
        "| semi median ratio (range) | best method (ratio) | U1 mean size of S |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    size = results["mean_subset_size"].values
    for name in ("tv", "tv_mle"):
        values = results[name].values  # k, rho, eps, method, repeat
        for a, k in enumerate(results["k"].values):
            for b, rho in enumerate(results["rho"].values):
                for c, eps in enumerate(results["epsilon"].values):
                    cube = values[a, b, c]
                    if not np.isfinite(cube[base_i]).all():
                        continue  # not run (run_grid(..., only=...))
                    mean = cube.mean(axis=-1)
                    ratio = mean / mean[base_i]
                    row = [
                        f"{k}",
                        f"{rho:g}",
                        f"{eps:g}",
                        "SGLD" if name == "tv" else "MLE",
                        f"{mean[base_i]:.3f}",
                    ]
                    if adaptive:
                        r = ratio[adaptive]
                        row.append(f"{np.median(r):.2f} ({r.min():.2f}-{r.max():.2f})")
                        wins = int((cube[adaptive] < cube[base_i][None, :]).sum())
                        row.append(f"{wins}/{cube[adaptive].size}")
                    else:
                        row += ["-", "-"]
                    if semi:
                        r = ratio[semi]
                        row.append(f"{np.median(r):.2f} ({r.min():.2f}-{r.max():.2f})")
                    else:
                        row.append("-")
                    best = int(np.nanargmin(mean))
                    row.append(f"{methods[best]} ({ratio[best]:.2f})")
                    f_size = size[a, b, c][fisher].mean() if fisher else float("nan")
                    row.append(f"{f_size:.2f}" if fisher else "-")
                    lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines) + "\n"


def write_tables(results: xarray.Dataset) -> str:
    """Markdown tables: TV (mean +- sd over repeats) and mean |S| per setting and method."""
    lines: list[str] = []
    tv, tv_mle, size = results["tv"], results["tv_mle"], results["mean_subset_size"]
    epss = results["epsilon"].values
    n_rep = results.sizes["repeat"]
    non = "non-adaptive" in results["scheme"].values
    for k in results["k"].values:
        for rho in results["rho"].values:
            if not np.isfinite(tv.sel({"k": k, "rho": rho}).values).any():
                continue  # not run (run_grid(..., only=...))
            n_k = int(results["n_users"].sel(k=k))
            lines.append(f"### K = {k}, rho = {rho:g} (n = {n_k}, {n_rep} repeats)")
            lines.append("")
            head = "| method | " + " | ".join(f"TV eps={e:g}" for e in epss)
            head += " | " + " | ".join(f"TV of MLE eps={e:g}" for e in epss)
            head += " | " + " | ".join(f"size of S, eps={e:g}" for e in epss) + " |"
            lines.append(head)
            lines.append("|---" * (1 + 3 * len(epss)) + "|")
            for method in results["scheme"].values:
                cells = []
                for metric in (tv, tv_mle):
                    for e in epss:
                        cells.append(_cell(metric, {"k": k, "rho": rho, "epsilon": e}, method, non))
                for e in epss:
                    sel = {"k": k, "rho": rho, "epsilon": e, "scheme": method}
                    cells.append(f"{size.sel(sel).values.mean():.2f}")
                lines.append(f"| {method} | " + " | ".join(cells) + " |")
            lines.append("")
    if non:
        lines.append(
            "TV: of the SGLD posterior mean (the paper's metric); TV of MLE: of the maximum-"
            "likelihood estimate from the same reports.  Bold: mean below the non-adaptive "
            "baseline's (same populations and users)."
        )
        lines.append("")
    return "\n".join(lines)


def _cell(metric: Any, where: dict[str, Any], method: str, bold: bool) -> str:
    v = metric.sel({**where, "scheme": method}).values
    cell = f"{v.mean():.4f} ± {v.std(ddof=1) if v.size > 1 else 0.0:.4f}"
    if bold and method != "non-adaptive":
        base = metric.sel({**where, "scheme": "non-adaptive"}).values
        if v.mean() < base.mean():
            cell = f"**{cell}**"
    return cell


def _plot(results: xarray.Dataset, out: Path) -> None:
    """``tv_vs_epsilon.png`` (panels K x rho) and ``tv_vs_rho.png`` (panels K x epsilon)."""
    _plot_tv(results, "epsilon", "rho", "epsilon", "rho", out / "tv_vs_epsilon.png")
    _plot_tv(results, "rho", "epsilon", "rho (Dirichlet concentration of theta)", "eps",
             out / "tv_vs_rho.png")  # fmt: skip


def _plot_tv(results: xarray.Dataset, x_dim: str, panel_dim: str, x_label: str, panel_name: str,
             path: Path) -> None:  # fmt: skip
    """Mean TV against ``x_dim``, one line per scheme, one panel per (K, ``panel_dim``)."""
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    from bayesldp.plotting import MARKERS

    tv = results["tv"].mean("repeat")
    ks, xs, panels = (results[d].values for d in ("k", x_dim, panel_dim))
    methods = list(results["scheme"].values)
    palette = plt.get_cmap("tab20")
    fig, axes = plt.subplots(
        len(ks), len(panels), figsize=(4.2 * len(panels), 3.4 * len(ks)), squeeze=False,
        sharex=True,
    )  # fmt: skip
    for i, k in enumerate(ks):
        for j, value in enumerate(panels):
            ax = axes[i, j]
            for im, m in enumerate(methods):
                ax.plot(
                    xs,
                    tv.sel({"k": k, panel_dim: value, "scheme": m}).values,
                    "-" if not m.startswith(("semi", "non")) else "--",
                    marker=MARKERS[im % len(MARKERS)],
                    ms=4,
                    lw=2.5 if m == "non-adaptive" else 1,
                    label=m,
                    color="black" if m == "non-adaptive" else palette(im % 20),
                )
            if not np.isfinite(tv.sel({"k": k, panel_dim: value}).values).any():
                ax.set_title(f"K = {k}, {panel_name} = {value:g}: not run")
                continue
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
            ax.set_xticks(xs, [f"{v:g}" for v in xs])
            ax.set_xlabel(x_label)
            if j == 0:
                ax.set_ylabel("TV (mean over repeats)")
            ax.set_title(f"K = {k}, {panel_name} = {value:g}")
    handles, labels = max((ax.get_legend_handles_labels() for ax in axes.flat),
                          key=lambda hl: len(hl[0]))  # fmt: skip
    fig.legend(handles, labels, loc="center right", fontsize=9, title="scheme")
    fig.suptitle(f"AdOBEst-LDP: TV against {x_dim} (n = {users_text(results)})")
    fig.tight_layout(rect=(0, 0, 0.86, 0.96))
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    """``python -m bayesldp.workflows.grid SPEC OUT_DIR [--paper]``."""
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("spec")
    parser.add_argument("out_dir")
    parser.add_argument(
        "--paper",
        action="store_true",
        help="the [paper] size (default: the reference code's n = 500 K, 50 repeats)",
    )
    parser.add_argument(
        "--scheduler",
        default="serial",
        help="serial (default), local (a dask LocalCluster), threads, or a dask scheduler "
        "address tcp://host:port; finished cells are kept in OUT_DIR/cells and reused",
    )
    args = parser.parse_args(argv)
    given = sys.argv[1:] if argv is None else argv
    shown = " ".join(["python -m bayesldp.workflows.grid", *given])
    scheduler = None if args.scheduler == "local" else args.scheduler
    results = run_grid(args.spec, args.out_dir, paper=args.paper, progress=True, command=shown,
                       scheduler=scheduler)  # fmt: skip
    print(write_tables(results))
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
