"""``bayesldp survey SPEC.toml``: one AdOBEst-LDP survey simulation, live progress, resume."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from bayesldp.errors import StoreWriteError
from bayesldp.simulate import population_from_spec, total_variation
from bayesldp.workflows.spec import SpecError
from bayesldp.workflows.spec.survey import survey_settings


def _make_survey(cfg: dict[str, Any], utility: str, checkpoint: Path):
    from bayesldp.adaptive import AdaptiveSurvey

    settings = survey_settings(cfg, utility)
    return AdaptiveSurvey(cfg["k"], float(cfg["epsilon"]), **settings, checkpoint=checkpoint)


def _survey_config(cfg: dict[str, Any], utility: str):
    """The SurveyConfig a spec asks for (what a resumed checkpoint must hold)."""
    from bayesldp.adaptive import AdaptiveSurvey

    return AdaptiveSurvey(cfg["k"], float(cfg["epsilon"]), **survey_settings(cfg, utility)).config


def _check_same_settings(survey: Any, wanted: Any, path: Path) -> None:
    """Refuse to resume a checkpoint made under other settings (seed, budget, utility, ...)."""
    differing = wanted.differences(survey.config)
    if differing:
        mine, theirs = survey.config.to_dict(), wanted.to_dict()
        shown = "; ".join(f"{key}: {mine[key]!r} in the checkpoint, {theirs[key]!r} in the spec"
                          for key in differing)  # fmt: skip
        raise SpecError(f"--resume: {path} was made with other settings ({shown}); resume it "
                        "with the spec it was started with, or start a new survey")  # fmt: skip


def run_survey(spec: dict[str, Any], out: Path, *, resume: bool, quiet: bool) -> int:
    """Run (or resume) the survey of a validated spec; write a report, return the exit status.

    The checkpoints (``adaptive.ckpt``, ``non_adaptive.ckpt``) and ``survey.json`` are written
    in ``out`` as the survey goes; its results (report, histories, figures) are staged and land
    together when it completes (:func:`~bayesldp.workflows.outputs.staged_outputs`).  A resumed
    survey whose every run had stopped at its target (or surveyed its ``n`` users) collects
    no one and leaves its report as it was.  Call it holding ``out``'s lock.
    """
    cfg = spec["survey"]
    seq = np.random.SeedSequence(cfg["seed"])
    theta = population_from_spec(spec["population"], np.random.default_rng(seq.spawn(1)[0]))
    x = np.random.default_rng(seq.spawn(2)[1]).choice(cfg["k"], size=cfg["n"], p=theta)
    out.mkdir(parents=True, exist_ok=True)
    runs = [("adaptive", cfg["utility"])]
    if cfg["compare_non_adaptive"] and cfg["utility"] != "non_adaptive":
        runs.append(("non_adaptive", "non_adaptive"))
    names = {label: run_name(utility, cfg) for label, utility in runs}
    _check_directory(out, [label for label, _ in runs], resume)  # before any work
    if resume:
        check_definition(spec, out)
    else:
        write_definition(spec, out)
    surveys, collected = {}, 0
    for label, utility in runs:
        survey = _open_survey(cfg, utility, out / f"{label}.ckpt", resume)
        start, done = time.perf_counter(), survey.n_users
        progress = None if quiet else _progress(names[label], utility, survey, theta, start)
        if done < cfg["n"]:
            survey.simulate(x[done:], progress=progress, stop=stop_target(cfg))
        collected += survey.n_users - done
        surveys[label] = survey
    if resume and not collected and (out / "report.md").is_file():
        for label, survey in surveys.items():
            print(f"{names[label]}: {_finished(survey, cfg)}; nothing more to collect")
        print(f"\nreport: {out / 'report.md'} (as it was)")
        return 0
    lines = _write_results(cfg, runs, names, surveys, theta, out)
    print("\n".join(lines[4:]))
    print(f"\nreport: {out / 'report.md'}")
    return 0


def _open_survey(cfg: dict[str, Any], utility: str, path: Path, resume: bool):
    """The survey checkpointed at ``path`` (resumed, checked against the spec) or a new one."""
    from bayesldp.adaptive import AdaptiveSurvey

    if resume and path.exists():
        survey = AdaptiveSurvey.resume(path)
        _check_same_settings(survey, _survey_config(cfg, utility), path)
        return survey
    if path.exists():
        raise SpecError(f"{path}: exists; pass --resume {path.parent} to continue it")
    return _make_survey(cfg, utility, path)


def _finished(survey: Any, cfg: dict[str, Any]) -> str:
    """Why a resumed survey collects no one: it had stopped at its target, or surveyed all."""
    stopped = survey.stopped
    if stopped is not None:
        return (f"had already stopped at {stopped['users']:,} users (its target "
                f"{stopped['measure']} <= {stopped['target']:g} was met)")  # fmt: skip
    return f"had already surveyed all {survey.n_users:,} users"


def _write_results(cfg, runs, names, surveys, theta, out: Path) -> list[str]:
    """Stage the report, the histories and the figures, then move them into ``out`` together
    (none of them if anything fails or is interrupted); return the report's lines."""
    from bayesldp.workflows.outputs import staged_outputs

    lines = [
        f"# Survey: {cfg['name']}",
        "",
        f"K = {cfg['k']}, eps = {cfg['epsilon']}, n = {cfg['n']:,}, seed = {cfg['seed']}.",
        "",
        "| run | utility | users | mean size of S | TV of posterior mean |",
        "|---|---|---:|---:|---:|",
    ]
    histories, stops = {}, []
    with staged_outputs(out) as stage:
        for label, utility in runs:
            survey = surveys[label]
            stops.append(_stop_line(names[label], survey, cfg))
            post = survey.posterior().posterior["theta"].values.reshape(-1, cfg["k"]).mean(axis=0)
            size = _mean_subset_size(utility, survey.history["subset_size"].values)
            tv = total_variation(post, theta)
            lines.append(f"| {names[label]} | {utility} | {survey.n_users:,} | {size} | "
                         f"{tv:.4f} |")  # fmt: skip
            histories[label] = survey.history
            histories[label].to_netcdf(stage / f"{label}_history.nc")
        lines += ["", *[line for line in stops if line], "", "![trajectories](trajectories.png)"]
        _plot_trajectories(histories, dict(runs), names, theta, stage / "trajectories.png")
        if all("posterior_users" in h for h in histories.values()):
            lines += [
                "",
                "The posterior along each survey (mean and 90% band of the four largest "
                "categories at every refresh; dashed: the truth):",
                "",
                "![posterior](posterior.png)",
            ]
            _plot_posterior(histories, names, theta, stage / "posterior.png")
        (stage / "report.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return lines


#: the file beside the checkpoints holding what defines the survey (population and settings)
DEFINITION = "survey.json"
#: [survey] settings that do not define the survey (a resume may change them)
_NOT_DEFINING = ("name",)


def survey_definition(spec: dict[str, Any]) -> dict[str, Any]:
    """What defines a survey: its ``[population]`` and every ``[survey]`` setting but its name,
    as JSON values (a resume under any other value would mix two surveys in one report)."""
    survey = {key: value for key, value in spec["survey"].items() if key not in _NOT_DEFINING}
    return json.loads(json.dumps({"population": spec["population"], "survey": survey},
                                 sort_keys=True, default=_json_value))  # fmt: skip


def _json_value(value: Any) -> Any:
    return value.tolist() if isinstance(value, np.ndarray | np.generic) else str(value)


def write_definition(spec: dict[str, Any], out: Path) -> None:
    """Record the survey's definition in ``out`` (atomically) before its first checkpoint."""
    from bayesldp.workflows.store_files import write_atomic

    text = json.dumps(survey_definition(spec), sort_keys=True, indent=1).encode()
    try:
        write_atomic(out / DEFINITION, lambda fh: fh.write(text))
    except OSError as exc:
        raise StoreWriteError(f"{out / DEFINITION}: cannot write ({exc.strerror or exc})") from None


def check_definition(spec: dict[str, Any], out: Path) -> None:
    """Refuse to resume the survey in ``out`` under a spec that defines another survey: every
    differing setting of ``[population]`` or ``[survey]`` is named, with both values."""
    path = out / DEFINITION
    if not path.is_file():  # a survey started before the definition was recorded
        return
    try:
        stored = json.loads(path.read_text(encoding="utf-8"))
        if not all(isinstance(stored.get(table), dict) for table in ("population", "survey")):
            raise ValueError("lacks a table")
    except (OSError, ValueError, AttributeError) as exc:
        raise SpecError(f"--resume: {path} is damaged ({type(exc).__name__}); it records the "
                        "settings the survey was started with") from None  # fmt: skip
    wanted = survey_definition(spec)
    differing = [
        f"[{table}].{key}: {stored[table].get(key)!r} when the survey started, "
        f"{wanted[table].get(key)!r} in the spec"
        for table in ("population", "survey")
        for key in sorted(set(stored[table]) | set(wanted[table]))
        if stored[table].get(key) != wanted[table].get(key)
    ]
    if differing:
        raise SpecError(f"--resume: {out} holds a survey started under other settings "
                        f"({'; '.join(differing)}); resume it with the spec it was started "
                        "with, or start a new survey in another directory")  # fmt: skip


def _check_directory(out: Path, labels: list[str], resume: bool) -> None:
    """Refuse at once a directory whose checkpoints do not fit the run: a fresh run into one
    that holds any; a resume of one that holds none, or only some other run's."""
    found = [f"{label}.ckpt" for label in ("adaptive", "non_adaptive")
             if (out / f"{label}.ckpt").exists()]  # fmt: skip
    if not resume:
        if found:
            raise SpecError(f"{out}: holds a survey checkpoint ({', '.join(found)}); pass "
                            f"--resume {out} to continue it, or choose another --out")  # fmt: skip
        return
    first = f"{labels[0]}.ckpt"
    if not found:
        raise SpecError(f"--resume: {out} holds no survey checkpoint ({first}); "
                        "nothing to resume")  # fmt: skip
    if first not in found:
        runs = " and ".join(f"{label}.ckpt" for label in labels)
        raise SpecError(
            f"--resume: {out} holds only {', '.join(found)}, not {first}; this spec runs "
            f"{runs} in that order, so {', '.join(found)} was not written by it (or "
            f"{first} was removed): start a new survey in another directory"
        )


def run_name(utility: str, cfg: dict[str, Any]) -> str:
    """What a survey run is, for people: the non-adaptive baseline is plain GRR, no subset.

    With ``S`` empty and ``eps2 = eps`` RRRR reduces to GRR(K, eps)
    (:func:`bayesldp.adaptive.selection.non_adaptive_subset`), so its "subset size 0" is not a
    choice made by a rule and is not shown as one.
    """
    if utility == "non_adaptive":
        return f"non-adaptive baseline: GRR(K = {cfg['k']}, eps = {cfg['epsilon']})"
    if utility == "semi_adaptive":
        return f"semi-adaptive RRRR (alpha = {cfg['alpha']}, eps1 = eps)"
    return "adaptive RRRR"


def _mean_subset_size(utility: str, sizes: np.ndarray) -> str:
    """The mean of |S_t| over users, or why there is none (GRR has no subset)."""
    return "none (GRR, no subset)" if utility == "non_adaptive" else f"{sizes.mean():.2f}"


def stop_target(cfg: dict[str, Any]) -> dict[str, float] | None:
    """The spec's stopping target as ``simulate(stop=...)`` takes it."""
    for measure in ("width", "expected_tv", "cs_width"):
        if cfg.get(f"stop_{measure}") is not None:
            return {measure: float(cfg[f"stop_{measure}"])}
    return None


def _stop_line(name: str, survey: Any, cfg: dict[str, Any]) -> str:
    """Where a survey with a stopping target stopped, or that it ran out of users."""
    target = stop_target(cfg)
    if target is None:
        return ""
    ((measure, value),) = target.items()
    if survey.stopped is None and survey.n_users < cfg["n"]:  # never met, never finished
        return (f"- {name}: interrupted at {survey.n_users:,} of {cfg['n']:,} users, before the "
                f"target {measure} <= {value:g} was met; resume it to continue.")  # fmt: skip
    if survey.stopped is None:
        return f"- {name}: the target {measure} <= {value:g} was not met in {cfg['n']:,} users."
    return (f"- {name}: stopped at {survey.stopped['users']:,} users "
            f"({measure} {survey.stopped['value']:.4g} <= {value:g}).")  # fmt: skip


def _plot_posterior(histories, names, theta, path: Path) -> None:
    """One panel per run: the posterior's trajectory (:func:`plot_survey_posterior`)."""
    from bayesldp.plotting import _pyplot, plot_survey_posterior

    plt = _pyplot()
    fig, axes = plt.subplots(1, len(histories), figsize=(5.5 * len(histories) + 1.5, 3.8),
                             sharey=True, squeeze=False)  # fmt: skip
    for ax, (label, history) in zip(axes[0], histories.items(), strict=True):
        plot_survey_posterior(history, theta, ax)
        ax.set_title(names[label], fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _plot_trajectories(histories, utilities, names, theta, path: Path) -> None:
    """TV of the draws for every run; |S_t| for the runs that choose a subset."""
    from bayesldp.plotting import _pyplot, plot_survey_trajectory

    plt = _pyplot()
    fig, axes = plt.subplots(2, 1, figsize=(8, 5), sharex=True)
    for label, history in histories.items():
        plot_survey_trajectory(
            history, theta, axes, label=names[label], subset=utilities[label] != "non_adaptive"
        )
    axes[0].set_title("Posterior draw θ_t against the truth, and the subset size |S_t|")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _progress(name, utility, survey, theta, start):
    def report(done: int, total: int) -> None:
        tv = total_variation(survey.theta, theta)
        size = int(survey.history["subset_size"].values[-1]) if survey.n_users else 0
        subset = "no subset" if utility == "non_adaptive" else f"|S_t| = {size}"
        print(
            f"\r[{time.perf_counter() - start:6.1f}s] {name}: {survey.n_users:,} users "
            f"TV(theta_t) = {tv:.3f} {subset}   ",
            end="",
            file=sys.stderr,
            flush=True,
        )
        if done == total:
            print(file=sys.stderr)

    return report
