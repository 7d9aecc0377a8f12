"""Running a study from a spec: population -> mechanisms -> estimators / fits -> metrics.

Every repeat gets its own child stream of ``SeedSequence(seed)``, and inside a repeat each
(mechanism, epsilon) pair another, so adding a mechanism to a spec does not change the numbers
of the others.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from bayesldp.mechanisms import make_mechanism
from bayesldp.simulate import METRICS, population_from_spec, sample_counts
from bayesldp.tally import Tally
from bayesldp.workflows.spec import SpecError

Progress = Callable[[str], None]


@dataclass
class StudyResult:
    """Everything a study produced: one metrics row per (repeat, mechanism, epsilon, method)."""

    spec: dict[str, Any]
    metrics: list[dict[str, Any]] = field(default_factory=list)
    estimates: list[dict[str, Any]] = field(default_factory=list)
    fits: dict[str, Any] = field(default_factory=dict)
    truths: list[np.ndarray] = field(default_factory=list)
    #: one row per posterior fit: r_hat max, bulk ESS min, divergences, seconds
    convergence: list[dict[str, Any]] = field(default_factory=list)
    #: seconds of the untimed first calls (numba compilation or cache loads, imports)
    warmup_seconds: float = 0.0
    #: the name of each category 0..K-1 (``[population].labels`` or a data set's labels; the
    #: numbers "0".."K-1" without either): the ``label`` column of the estimates, the figures'
    #: category axes and, when named, the posteriors' ``category`` coordinate
    labels: list[str] = field(default_factory=list)

    @property
    def named(self) -> bool:
        """Whether the categories have names of their own (not just their numbers)."""
        return self.labels != [str(x) for x in range(len(self.labels))]


def _epsilons(mech_spec: dict[str, Any]) -> list[float]:
    eps = mech_spec["epsilon"]
    return [float(e) for e in (eps if isinstance(eps, list) else [eps])]


def _point_estimate(tally: Tally, method: str) -> tuple[np.ndarray, np.ndarray | None]:
    if method == "oracle":
        mech = tally.mechanism
        freqs = mech.unbiased_frequencies(tally)
        sd = np.sqrt(mech.oracle_variance(np.clip(freqs, 0, 1), tally.n))
        return freqs, sd
    try:
        from bayesldp.estimators import estimate
    except ImportError:  # pragma: no cover - only while the estimators are missing
        raise SpecError(f"[estimators].methods: {method!r} needs bayesldp.estimators") from None
    result = estimate(tally, method=method)
    return result.frequencies, result.std_errors


def run_study(
    spec: dict[str, Any],
    *,
    seed: int | None = None,
    quick: bool = False,
    progress: Progress | None = None,
) -> StudyResult:
    """Run a validated spec (see :func:`bayesldp.workflows.spec.load_spec`); a key-value
    population's repeats are :func:`bayesldp.workflows.key_value_study.run_key_values`."""
    study = spec["study"]
    n = max(1000, study["n"] // 10) if quick else study["n"]
    repeats = 1 if quick else study["repeats"]
    root = np.random.SeedSequence(study["seed"] if seed is None else seed)
    k = spec["population"]["k"]
    result = StudyResult(spec=spec, labels=category_labels(spec["population"]))
    pairs = [(m, e) for m in spec["mechanisms"] for e in _epsilons(m)]
    bayes = spec.get("bayes_requested") and spec["bayes"]
    say = progress or (lambda _msg: None)
    if spec["population"]["kind"] == "key_value":
        from bayesldp.workflows.key_value_study import build_mechanism, run_key_values

        names = entry_names(pairs, k, build=build_mechanism)
        run_key_values(spec, result, pairs, names, n, repeats, root, say)
        return result
    names = entry_names(pairs, k)
    result.warmup_seconds = _warm_up(spec, pairs, bayes)
    for rep, rep_seq in enumerate(root.spawn(repeats)):
        pop_seq, count_seq, *mech_seqs = rep_seq.spawn(2 + len(pairs))
        theta = population_from_spec(spec["population"], np.random.default_rng(pop_seq))
        counts = sample_counts(theta, n, np.random.default_rng(count_seq))
        truth = counts / n
        result.truths.append(truth)
        for (mech_spec, eps), seq, name in zip(pairs, mech_seqs, names, strict=True):
            params = {k: v for k, v in mech_spec.items() if k not in ("name", "epsilon")}
            mech = make_mechanism(mech_spec["name"], k, eps, **params)
            tally = mech.simulate_tally(counts, np.random.default_rng(seq))
            say(f"repeat {rep + 1}/{repeats}  {mech!r}  n={n}")
            for method in spec["estimators"]["methods"]:
                start = time.perf_counter()
                freqs, sd = _point_estimate(tally, method)
                _record(
                    result,
                    rep,
                    name,
                    eps,
                    method,
                    freqs,
                    sd,
                    truth,
                    time.perf_counter() - start,
                )
            if bayes:
                _run_fit(result, rep, mech, name, eps, tally, truth, bayes, seq)
    return result


def category_labels(population: dict[str, Any]) -> list[str]:
    """The names of categories 0..K-1 of a validated ``[population]`` table: its ``labels``
    (a data set's by default), else the numbers as strings."""
    labels = population.get("labels")
    return list(labels) if labels else [str(x) for x in range(population["k"])]


def _warm_up(spec: dict[str, Any], pairs: list, bayes: Any) -> float:
    """Run every method once on a small tally of each mechanism, untimed, so that the timed
    runs measure the methods and not numba's compilation (or cache loads) and first imports;
    returns the seconds this took (reported separately)."""
    start = time.perf_counter()
    k = spec["population"]["k"]
    for mech_spec, eps in pairs:
        params = {key: v for key, v in mech_spec.items() if key not in ("name", "epsilon")}
        mech = make_mechanism(mech_spec["name"], k, eps, **params)
        tally = mech.simulate_tally(np.full(k, 20), np.random.default_rng(0))
        for method in spec["estimators"]["methods"]:
            _point_estimate(tally, method)
        if bayes:
            from bayesldp.bayes import fit

            options = {} if bayes["method"] == "exact" else {"tune": 20}
            fit(tally, prior=bayes["prior"], method=bayes["method"], draws=20, chains=1,
                random_seed=0, compute_convergence_checks=False, **options)  # fmt: skip
    return time.perf_counter() - start


def _run_fit(result, rep, mech, name, eps, tally, truth, bayes, seq) -> None:
    from bayesldp.bayes import fit

    start = time.perf_counter()
    idata = fit(
        tally,
        prior=bayes["prior"],
        method=bayes["method"],
        draws=bayes["draws"],
        chains=bayes["chains"],
        random_seed=int(seq.generate_state(1)[0]),
        labels=result.labels if result.named else None,
    )
    seconds = time.perf_counter() - start
    attrs = idata.posterior.attrs
    result.convergence.append({
        "repeat": rep,
        "mechanism": name,
        "epsilon": eps,
        "method": bayes["method"],
        "r_hat_max": float(attrs.get("r_hat_max", float("nan"))),
        "ess_bulk_min": float(attrs.get("ess_bulk_min", float("nan"))),
        "divergences": int(attrs.get("divergences", 0)),
        "seconds": seconds,
    })  # fmt: skip
    draws = idata.posterior["theta"].values.reshape(-1, tally.k)
    tail = (1 - bayes["hdi_prob"]) / 2
    bounds = np.quantile(draws, [tail, 1 - tail], axis=0)
    _record(
        result,
        rep,
        name,
        eps,
        f"posterior_mean ({bayes['method']})",
        draws.mean(axis=0),
        draws.std(axis=0),
        truth,
        seconds,
        bounds,
    )
    if rep == 0:
        result.fits[f"{mech!r}"] = idata


def entry_names(
    pairs: list[tuple[dict[str, Any], float]], k: int, build: Callable | None = None
) -> list[str]:
    """The name of each (mechanism entry, epsilon) in the outputs: the mechanism's name, with
    the parameters in which it differs from another entry of that mechanism at that epsilon
    (``OLH (g=2)`` beside ``OLH (g=16)``), so that no two entries share a row or a group.
    ``build(mech_spec, k, eps)`` builds an entry's mechanism (default: with ``k`` categories)."""
    found = []
    for mech_spec, eps in pairs:
        if build is not None:
            mech = build(mech_spec, k, eps)
        else:
            params = {key: v for key, v in mech_spec.items() if key not in ("name", "epsilon")}
            mech = make_mechanism(mech_spec["name"], k, eps, **params)
        shown = {key: v for key, v in mech.params().items() if key not in ("k", "epsilon")}
        found.append((type(mech).__name__, eps, shown))
    names = []
    for cls, eps, shown in found:
        peers = [p for c, e, p in found if c == cls and e == eps]
        differ = [key for key in shown if any(p.get(key) != shown[key] for p in peers)]
        parts = ", ".join(f"{key}={shown[key]}" for key in differ)
        names.append(f"{cls} ({parts})" if parts else cls)
    return names


def _record(result, rep, name, eps, method, freqs, sd, truth, seconds, bounds=None) -> None:
    """One metrics row, and per category the estimate with a 90% interval (normal for point
    estimators with a standard error, posterior quantiles for fits)."""
    if bounds is None:
        half = np.full_like(freqs, np.nan) if sd is None else 1.6448536269514722 * sd
        bounds = (freqs - half, freqs + half)
    row = {
        "repeat": rep,
        "mechanism": name,
        "epsilon": eps,
        "method": method,
        "seconds": seconds,
    }
    row |= {name: fn(freqs, truth) for name, fn in METRICS.items()}
    result.metrics.append(row)
    for x in range(truth.shape[0]):
        result.estimates.append(
            {
                "repeat": rep,
                "mechanism": name,
                "epsilon": eps,
                "method": method,
                "category": x,
                "label": result.labels[x] if result.labels else str(x),
                "truth": truth[x],
                "estimate": freqs[x],
                "std_error": np.nan if sd is None else sd[x],
                "lower_90": bounds[0][x],
                "upper_90": bounds[1][x],
            }
        )
