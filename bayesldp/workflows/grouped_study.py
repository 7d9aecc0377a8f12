"""Running the rounds and attributes specs: simulate, perturb, tally, estimate, score, write.

A rounds spec (:mod:`bayesldp.workflows.spec.rounds`) follows ``n`` users over ``rounds``
rounds: the first round's frequencies come from ``[population]``, each later round's from a
random walk of sd ``[drift].step`` on the centred log-frequencies, and a share
``[drift].redraw`` of the users draws its value anew from them each round (the truth of a
round is its users' empirical frequencies).  Longitudinal mechanisms keep every user's
permanent response in a memo across rounds.  Each round's tally is estimated alone by every
``[estimators]`` method and, with ``[bayes]``, all rounds at once by
:func:`bayesldp.fit_rounds`.

An attributes spec (:mod:`bayesldp.workflows.spec.attributes`) draws ``n`` records of
independent attributes, perturbs them with each protocol, and estimates each attribute's tally
(``[bayes]``: :func:`~bayesldp.mechanisms.multidimensional.fit_marginals`).

Seeds: ``SeedSequence(seed)`` spawns the population's, the users' and one stream per
(mechanism or protocol, epsilon), so adding an entry leaves the others' numbers alone.
"""

from __future__ import annotations

import csv
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from bayesldp.simulate import METRICS, population_from_spec

Progress = Callable[[str], None]


@dataclass
class GroupedResult:
    """One row of metrics per (repeat, entry, epsilon, method, group), one of estimates per
    category too; ``group`` is the round or the attribute (``key`` says which)."""

    spec: dict[str, Any]
    key: str
    metrics: list[dict[str, Any]] = field(default_factory=list)
    estimates: list[dict[str, Any]] = field(default_factory=list)
    #: one line per posterior fit: its convergence (r_hat, bulk ESS, divergences)
    convergence: list[str] = field(default_factory=list)


def run_grouped(spec: dict[str, Any], *, seed: int | None = None, quick: bool = False,
                progress: Progress | None = None) -> GroupedResult:  # fmt: skip
    """Run a validated rounds or attributes spec (``--quick``: n / 10 users, one repeat)."""
    run = run_rounds if spec["kind"] == "rounds" else run_attributes
    return run(spec, seed=seed, quick=quick, progress=progress or (lambda _msg: None))


def _entries(spec: dict[str, Any], table: str) -> list[tuple[dict[str, Any], float]]:
    out = []
    for entry in spec[table]:
        eps = entry["epsilon"] if isinstance(entry["epsilon"], list) else [entry["epsilon"]]
        out += [(entry, float(e)) for e in eps]
    return out


def _walk(theta: np.ndarray, rounds: int, step: float, rng: np.random.Generator) -> np.ndarray:
    """``(rounds, K)`` frequencies: a random walk of sd ``step`` on the centred log-frequencies."""
    eta = np.log(np.maximum(theta, 1e-300))
    out = [theta]
    for _ in range(rounds - 1):
        z = rng.standard_normal(theta.size)
        eta = eta + step * (z - z.mean())
        out.append(np.exp(eta - eta.max()) / np.exp(eta - eta.max()).sum())
    return np.array(out)


def run_rounds(spec, *, seed=None, quick=False, progress: Progress) -> GroupedResult:
    """A rounds spec (module docstring)."""
    from bayesldp.mechanisms import make_mechanism
    from bayesldp.mechanisms.longitudinal import Longitudinal

    study, drift, population = spec["study"], spec["drift"], spec["population"]
    n = max(100, study["n"] // 10) if quick else study["n"]
    k, rounds = population["k"], study["rounds"]
    pairs = _entries(spec, "mechanisms")
    root = np.random.SeedSequence(study["seed"] if seed is None else seed)
    pop_seq, user_seq, *seqs = root.spawn(2 + len(pairs))
    pop_rng, user_rng = np.random.default_rng(pop_seq), np.random.default_rng(user_seq)
    thetas = _walk(population_from_spec(population, pop_rng), rounds, drift["step"], pop_rng)
    values = [user_rng.choice(k, size=n, p=thetas[0])]
    for t in range(1, rounds):
        x = values[-1].copy()
        redraw = np.flatnonzero(user_rng.random(n) < drift["redraw"])
        x[redraw] = user_rng.choice(k, size=redraw.size, p=thetas[t])
        values.append(x)
    truths = [np.bincount(x, minlength=k) / n for x in values]
    result = GroupedResult(spec, "round")
    users = np.arange(n)
    bayes = spec["bayes_requested"] and spec["bayes"]["rounds"] and spec["bayes"]
    for (entry, eps), seq in zip(pairs, seqs, strict=True):
        params = {key: v for key, v in entry.items() if key not in ("name", "epsilon")}
        mech = make_mechanism(entry["name"], k, eps, **params)
        progress(f"{mech!r}: {rounds} rounds of {n} users")
        rng = np.random.default_rng(seq)
        memo = mech.memo() if isinstance(mech, Longitudinal) else None
        tallies = []
        for x in values:
            options = {"users": users, "memo": memo} if memo is not None else {}
            tallies.append(mech.tally(mech.perturb(x, rng, **options)))
        name = type(mech).__name__
        for method in spec["estimators"]["methods"]:
            for t, (tally, truth) in enumerate(zip(tallies, truths, strict=True), start=1):
                _score(result, 0, name, eps, method, t, truth, *_point(tally, method))
        if bayes:
            _fit_rounds(result, name, eps, tallies, truths, bayes, seq)
    return result


def _point(tally: Any, method: str):
    """Point estimate and its 90% normal interval (NaN without standard errors)."""
    from bayesldp.workflows.study import _point_estimate

    freqs, sd = _point_estimate(tally, method)
    half = np.full_like(freqs, np.nan) if sd is None else 1.6448536269514722 * sd
    return freqs, freqs - half, freqs + half


def _fit_rounds(result, name, eps, tallies, truths, bayes, seq) -> None:
    from bayesldp.bayes.dynamic import fit_rounds, summarize_rounds

    idata = fit_rounds(tallies, draws=bayes["draws"], tune=bayes["tune"], chains=bayes["chains"],
                       random_seed=int(seq.generate_state(1)[0]), progressbar=False,
                       compute_convergence_checks=False)  # fmt: skip
    _convergence(result, f"{name}, epsilon {eps:g}, fit_rounds", idata)
    summary = summarize_rounds(idata)
    for t, truth in enumerate(truths, start=1):
        mean, lower, upper = (summary[v].values[t - 1] for v in ("mean", "lower", "upper"))
        _score(result, 0, name, eps, "fit_rounds", t, truth, mean, lower, upper)


def run_attributes(spec, *, seed=None, quick=False, progress: Progress) -> GroupedResult:
    """An attributes spec (module docstring)."""
    from bayesldp.workflows.spec.attributes import make_protocol

    study = spec["study"]
    n = max(100, study["n"] // 10) if quick else study["n"]
    repeats = 1 if quick else study["repeats"]
    ks = [population["k"] for population in spec["attributes"]]
    pairs = _entries(spec, "protocols")
    bayes = spec["bayes_requested"] and spec["bayes"]
    result = GroupedResult(spec, "attribute")
    root = np.random.SeedSequence(study["seed"] if seed is None else seed)
    for rep, rep_seq in enumerate(root.spawn(repeats)):
        pop_seq, *seqs = rep_seq.spawn(1 + len(pairs))
        rng = np.random.default_rng(pop_seq)
        thetas = [population_from_spec(population, rng) for population in spec["attributes"]]
        records = np.column_stack(
            [rng.choice(k, size=n, p=p) for k, p in zip(ks, thetas, strict=True)]
        )
        truths = [np.bincount(records[:, j], minlength=k) / n for j, k in enumerate(ks)]
        for (entry, eps), seq in zip(pairs, seqs, strict=True):
            protocol = make_protocol(entry, ks, eps)
            progress(f"repeat {rep + 1}/{repeats}  {protocol!r}  n={n}")
            tallies = protocol.tallies(protocol.perturb(records, np.random.default_rng(seq)))
            name = f"{protocol.name}[{protocol.base}]"
            if getattr(protocol, "budget", "record") != "record":
                name += f" (budget {protocol.budget})"
            for method in spec["estimators"]["methods"]:
                for j, (tally, truth) in enumerate(zip(tallies, truths, strict=True)):
                    _score(result, rep, name, eps, method, j, truth, *_point(tally, method))
            if bayes:
                _fit_marginals(result, rep, name, eps, tallies, truths, bayes, seq)
    return result


def _fit_marginals(result, rep, name, eps, tallies, truths, bayes, seq) -> None:
    from bayesldp.mechanisms.multidimensional import fit_marginals

    fits = fit_marginals(tallies, method=bayes["method"], draws=bayes["draws"],
                         chains=bayes["chains"], random_seed=int(seq.generate_state(1)[0]),
                         progressbar=False, compute_convergence_checks=False)  # fmt: skip
    for j, truth in enumerate(truths):
        _convergence(result, f"repeat {rep}, {name}, epsilon {eps:g}, attribute {j}", fits[j])
        draws = fits[j].posterior["theta"].values.reshape(-1, truth.size)
        lower, upper = np.quantile(draws, [0.05, 0.95], axis=0)
        method = f"posterior_mean ({bayes['method']})"
        _score(result, rep, name, eps, method, j, truth, draws.mean(axis=0), lower, upper)


def _convergence(result: GroupedResult, what: str, idata: Any) -> None:
    attrs = idata.posterior.attrs
    found = [f"r_hat max {attrs['r_hat_max']:.3f}" if "r_hat_max" in attrs else "",
             f"bulk ESS min {attrs['ess_bulk_min']:.0f}" if "ess_bulk_min" in attrs else "",
             f"{int(attrs.get('divergences', 0))} divergences"]  # fmt: skip
    result.convergence.append(f"- {what}: {', '.join(f for f in found if f)}")


def _score(result, rep, name, eps, method, group, truth, freqs, lower, upper) -> None:
    """One metrics row and one estimates row per category."""
    key = result.key
    row = {"repeat": rep, "mechanism": name, "epsilon": eps, "method": method, key: group}
    result.metrics.append(row | {m: fn(freqs, truth) for m, fn in METRICS.items()})
    for x in range(truth.size):
        result.estimates.append(row | {"category": x, "truth": float(truth[x]),
                                       "estimate": float(freqs[x]), "lower_90": float(lower[x]),
                                       "upper_90": float(upper[x])})  # fmt: skip


def summary_table(result: GroupedResult) -> str:
    """Markdown: each (mechanism, epsilon, method)'s TV and MSE, averaged over the rounds
    (attributes) and repeats, and the TV of each round (attribute)."""
    key = result.key
    groups = sorted({row[key] for row in result.metrics})
    entries: dict[tuple, list[dict[str, Any]]] = {}
    for row in result.metrics:
        entries.setdefault((row["mechanism"], row["epsilon"], row["method"]), []).append(row)
    head = ["mechanism", "epsilon", "method", "mean TV", "mean MSE",
            *(f"TV {key} {g}" for g in groups)]  # fmt: skip
    lines = ["| " + " | ".join(head) + " |", "|---|---:|---|" + "---:|" * (len(head) - 3)]
    for (mech, eps, method), rows in entries.items():
        tv = [np.mean([r["tv"] for r in rows if r[key] == g]) for g in groups]
        cells = [mech, f"{eps:g}", method, f"{np.mean([r['tv'] for r in rows]):.4f}",
                 f"{np.mean([r['mse'] for r in rows]):.2e}", *(f"{v:.4f}" for v in tv)]  # fmt: skip
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def write_report(result: GroupedResult, out: Path) -> Path:
    """``report.md``, ``metrics.csv`` and ``estimates.csv`` in ``out``; returns the report."""
    for name, rows in (("metrics.csv", result.metrics), ("estimates.csv", result.estimates)):
        with (out / name).open("w", newline="", encoding="utf-8") as fh:
            writer = csv.DictWriter(fh, fieldnames=list(rows[0]), lineterminator="\n")
            writer.writeheader()
            writer.writerows(rows)
    study = result.spec["study"]
    kind = result.spec["kind"]
    lines = [f"# {study['name']} ({kind} spec)", ""]
    if study.get("description"):
        lines += [study["description"], ""]
    lines += [
        f"Total variation (TV) and mean squared error (MSE) against each {result.key}'s true "
        "frequencies; intervals (estimates.csv) are 90%: normal for point estimators with a "
        "standard error, posterior quantiles for fits.",
        "",
        summary_table(result),
        "",
        "Files: metrics.csv (one row per method and "
        f"{result.key}), estimates.csv (one row per category).",
    ]
    if result.convergence:
        lines += ["", "## Posterior convergence (every fit)", "", *result.convergence]
    report = out / "report.md"
    report.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return report
