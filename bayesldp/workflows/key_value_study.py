"""A study of key-value data (``[population].kind = "key_value"``): PCKV and PCKV-PM.

Each of ``n`` users holds key ``j`` of ``0..k-1`` with probability ``f_j`` (the key's
frequency), independently of the other keys, and a value in ``[-1, 1]`` for every key held:
``2 B - 1`` with ``B ~ Beta(c (1 + m_j) / 2, c (1 - m_j) / 2)``, of mean ``m_j``
(``c = value_concentration``).  The truth of a repeat is each key's share of the users who hold
it and the mean of their values.

* **PCKV** (:class:`bayesldp.PCKV`, ``d = k``): padding to ``ell`` and sampling one pair per
  user (:meth:`~bayesldp.PCKV.sample_pairs`), then its channel; the key frequencies and means
  come from Gu et al.'s estimators (``oracle``), from any other method's joint frequencies
  through :meth:`~bayesldp.PCKV.key_values`, and from every posterior draw alike.
* **PCKVPM** (:class:`bayesldp.PCKVPM`, one key, ``bins`` value bins, default 16): every user
  reports on one key drawn uniformly (sampling, so each report spends the whole budget), holder
  or not; each key's tally gives its frequency and mean through
  :meth:`~bayesldp.PCKVPM.key_value` (``oracle``: the channel inverse).  A posterior without a
  ``[bayes].prior`` uses :meth:`~bayesldp.PCKVPM.prior` (uniform on the key's frequency).

The metrics rows (TV and MSE) are over the key frequencies; ``mean_mae`` is the mean absolute
error of the keys' means.  The estimates rows give per key the frequency (``truth``,
``estimate``, ``lower_90``, ``upper_90``) and the mean (``mean_truth``, ``mean_estimate``,
``mean_lower_90``, ``mean_upper_90``).
"""

from __future__ import annotations

import time
import warnings
from typing import Any

import numpy as np

from bayesldp.mechanisms import make_mechanism
from bayesldp.mechanisms.keyvalue import PCKVPM
from bayesldp.simulate import METRICS, dirichlet_population, zipf_population

#: the mechanisms of key-value data, and PCKVPM's value bins unless ``bins`` is given
KEY_VALUE_MECHANISMS = ("PCKV", "PCKVPM")
DEFAULT_BINS = 16
_Z90 = 1.6448536269514722


def takes_key_values(name: str) -> bool:
    """Whether the registered mechanism ``name`` reads key-value data."""
    return name in KEY_VALUE_MECHANISMS


def build_mechanism(mech_spec: dict[str, Any], d: int, epsilon: float) -> Any:
    """The mechanism of a ``[[mechanisms]]`` entry on ``d`` keys (PCKVPM: ``bins`` value bins)."""
    params = {key: v for key, v in mech_spec.items() if key not in ("name", "epsilon", "bins")}
    if mech_spec["name"] == PCKVPM.name:
        size = mech_spec.get("bins") or DEFAULT_BINS
    else:
        size = d
        if mech_spec.get("bins") is not None:
            params["bins"] = mech_spec["bins"]  # refused by make_mechanism, naming it
    return make_mechanism(mech_spec["name"], size, epsilon, **params)


def key_population(population: dict[str, Any], rng: np.random.Generator):
    """``(frequencies, means)`` of the keys of a validated key-value ``[population]``."""
    k = population["k"]
    if population.get("key_frequencies") is not None:
        freqs = np.asarray(population["key_frequencies"], dtype=float)
    else:
        keys = population.get("keys") or "zipf"
        if keys == "dirichlet":
            p = dirichlet_population(k, population["alpha"], rng)
        elif keys == "zipf":
            p = zipf_population(k, population["s"])
        else:
            p = np.full(k, 1.0 / k)
        freqs = np.minimum(1.0, population.get("pairs", 1.0) * p)
    if population.get("means") is not None:
        means = np.asarray(population["means"], dtype=float)
    else:
        means = rng.uniform(-1.0, 1.0, size=k)
    return freqs, means


def sample_users(freqs, means, n: int, concentration: float, rng: np.random.Generator):
    """``(held, values)``: boolean ``(n, k)`` and each held key's value (0 where not held)."""
    held = rng.random((n, freqs.size)) < freqs
    a = np.maximum(concentration * (1.0 + means) / 2.0, 1e-12)
    b = np.maximum(concentration * (1.0 - means) / 2.0, 1e-12)
    values = 2.0 * rng.beta(a, b, size=held.shape) - 1.0
    values = np.where(np.abs(means) == 1.0, means, values)  # a point mass at an end
    return held, np.where(held, np.clip(values, -1.0, 1.0), 0.0)


def _truth(held, values):
    count = held.sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(count > 0, values.sum(axis=0) / np.maximum(count, 1), np.nan)
    return count / held.shape[0], mean


def _pckv_tallies(mech, held, values, rng):
    users, keys = np.nonzero(held)
    z = mech.sample_pairs(keys, values[users, keys], users, held.shape[0], rng)
    return [mech.tally(mech.perturb(z, rng))]


def _pckvpm_tallies(mech, held, values, rng):
    n, d = held.shape
    key = rng.integers(0, d, size=n)
    tallies = []
    for j in range(d):
        group = key == j
        v = np.clip(values[group, j], mech.lo, mech.hi)
        tallies.append(mech.tally(mech.perturb_pairs(v, held[group, j], rng)))
    return tallies


def _estimates(mech, tallies, method):
    """``(freq, freq_sd or None, mean)`` of the keys by a point method."""
    with warnings.catch_warnings():  # a key of no estimated mass: mean NaN
        warnings.simplefilter("ignore", RuntimeWarning)
        return _point_estimates(mech, tallies, method)


def _point_estimates(mech, tallies, method):
    freq, sd, mean = [], [], []
    for tally in tallies:
        s = None
        if method == "oracle" and hasattr(mech, "unbiased_key_values"):
            f, m = mech.unbiased_key_values(tally)  # Gu et al.'s: no standard error
        elif method == "oracle":  # PCKVPM: the channel inverse; f = 1 - pi_absent
            pi = mech.unbiased_frequencies(tally)
            f, m = mech.key_value(pi)
            s = np.sqrt(np.asarray(mech.oracle_variance(np.clip(pi, 0, 1), tally.n))[-1:])
        else:
            from bayesldp.estimators import estimate

            f, m = _convert(mech, estimate(tally, method=method).frequencies)
        freq.append(np.atleast_1d(f))
        mean.append(np.atleast_1d(m))
        sd.append(s)
    sds = None if any(s is None for s in sd) else np.concatenate(sd)
    return np.concatenate(freq), sds, np.concatenate(mean)


def _convert(mech, frequencies):
    convert = mech.key_values if hasattr(mech, "key_values") else mech.key_value
    return convert(frequencies)


def _posterior(mech, tallies, bayes, seed):
    """Draws of the keys' frequencies and means, ``(draws, d)`` each, and the seconds taken."""
    from bayesldp.bayes import fit

    start = time.perf_counter()
    freqs, means, checks = [], [], []
    for i, tally in enumerate(tallies):
        prior = bayes["prior"]
        if prior is None and hasattr(mech, "prior"):
            prior = mech.prior()
        idata = fit(tally, prior=prior, method=bayes["method"], draws=bayes["draws"],
                    chains=bayes["chains"], random_seed=seed + i)  # fmt: skip
        draws = idata.posterior["theta"].values.reshape(-1, tally.k)
        f, m = _convert(mech, draws)
        freqs.append(f.reshape(draws.shape[0], -1))
        means.append(m.reshape(draws.shape[0], -1))
        checks.append(idata.posterior.attrs)
    return np.hstack(freqs), np.hstack(means), checks, time.perf_counter() - start


def run_key_values(spec: dict[str, Any], result: Any, pairs: list, names: list[str],
                   n: int, repeats: int, root: np.random.SeedSequence, say) -> None:  # fmt: skip
    """The repeats of a study whose population is key-value (module docstring), into
    ``result`` (a :class:`~bayesldp.workflows.study.StudyResult`); called by
    :func:`~bayesldp.workflows.study.run_study` with the spec's ``pairs`` of (mechanism entry,
    epsilon) and their ``names``."""
    population = spec["population"]
    d = population["k"]
    bayes = spec.get("bayes_requested") and spec["bayes"]
    result.warmup_seconds = _warm_up(spec, pairs)
    for rep, rep_seq in enumerate(root.spawn(repeats)):
        pop_seq, user_seq, *mech_seqs = rep_seq.spawn(2 + len(pairs))
        freqs, means = key_population(population, np.random.default_rng(pop_seq))
        held, values = sample_users(freqs, means, n, population["value_concentration"],
                                    np.random.default_rng(user_seq))  # fmt: skip
        truth = _truth(held, values)
        result.truths.append(truth[0])
        for (mech_spec, eps), seq, name in zip(pairs, mech_seqs, names, strict=True):
            mech = build_mechanism(mech_spec, d, eps)
            tallies = _simulate(mech, held, values, np.random.default_rng(seq))
            say(f"repeat {rep + 1}/{repeats}  {mech!r}  n={n}")
            for method in spec["estimators"]["methods"]:
                start = time.perf_counter()
                freq, sd, mean = _estimates(mech, tallies, method)
                seconds = time.perf_counter() - start
                _record(result, (rep, name, eps, method), (freq, sd, mean, None), truth, seconds)
            if bayes:
                _record_fit(result, (rep, name, eps), mech, tallies, bayes, truth, seq)


def _simulate(mech, held, values, rng):
    if isinstance(mech, PCKVPM):
        return _pckvpm_tallies(mech, held, values, rng)
    return _pckv_tallies(mech, held, values, rng)


def _warm_up(spec: dict[str, Any], pairs: list) -> float:
    """Every method once on a small population, untimed (numba compilation, first imports)."""
    start = time.perf_counter()
    rng = np.random.default_rng(0)
    d = spec["population"]["k"]
    held, values = sample_users(np.full(d, 0.5), np.zeros(d), 50 * d, 2.0, rng)
    for mech_spec, eps in pairs:
        mech = build_mechanism(mech_spec, d, eps)
        tallies = _simulate(mech, held, values, rng)[:1]
        for method in spec["estimators"]["methods"]:
            _estimates(mech, tallies, method)
    return time.perf_counter() - start


def _record_fit(result, where, mech, tallies, bayes, truth, seq) -> None:
    rep, name, eps = where
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        f, m, checks, seconds = _posterior(mech, tallies, bayes, int(seq.generate_state(1)[0]))
        tail = (1 - bayes["hdi_prob"]) / 2
        bounds = (*np.quantile(f, [tail, 1 - tail], axis=0),
                  *np.nanquantile(m, [tail, 1 - tail], axis=0))  # fmt: skip
        freq, mean = f.mean(axis=0), np.nanmean(m, axis=0)
    result.convergence.append({
        "repeat": rep, "mechanism": name, "epsilon": eps, "method": bayes["method"],
        "r_hat_max": max(float(c.get("r_hat_max", float("nan"))) for c in checks),
        "ess_bulk_min": min(float(c.get("ess_bulk_min", float("nan"))) for c in checks),
        "divergences": sum(int(c.get("divergences", 0)) for c in checks),
        "seconds": seconds,
    })  # fmt: skip
    method = f"posterior_mean ({bayes['method']})"
    _record(result, (rep, name, eps, method), (freq, f.std(axis=0), mean, bounds), truth, seconds)


def _record(result, where, found, truth, seconds) -> None:
    """One metrics row (TV, MSE of the frequencies; MAE of the means) and a row per key."""
    rep, name, eps, method = where
    freq, sd, mean, bounds = found
    true_freq, true_mean = truth
    if bounds is None:
        half = np.full_like(freq, np.nan) if sd is None else _Z90 * sd
        nan = np.full_like(mean, np.nan)
        bounds = (freq - half, freq + half, nan, nan)
    row = {"repeat": rep, "mechanism": name, "epsilon": eps, "method": method,
           "seconds": seconds}  # fmt: skip
    row |= {key: fn(freq, true_freq) for key, fn in METRICS.items()}
    both = np.isfinite(mean) & np.isfinite(true_mean)
    row["mean_mae"] = float(np.mean(np.abs(mean - true_mean)[both])) if both.any() else np.nan
    result.metrics.append(row)
    for x in range(true_freq.shape[0]):
        result.estimates.append({
            "repeat": rep, "mechanism": name, "epsilon": eps, "method": method,
            "category": x, "label": result.labels[x], "truth": true_freq[x],
            "estimate": freq[x], "std_error": np.nan if sd is None else sd[x],
            "lower_90": bounds[0][x], "upper_90": bounds[1][x],
            "mean_truth": true_mean[x], "mean_estimate": mean[x],
            "mean_lower_90": bounds[2][x], "mean_upper_90": bounds[3][x],
        })  # fmt: skip


def key_value_table(result: Any) -> str:
    """The first repeat's keys: frequency and mean, truth against each method, as markdown."""
    from bayesldp.workflows.tables import Table, markdown_lines

    columns = ["mechanism", "epsilon", "method", "label", "estimate", "truth", "mean_estimate",
               "mean_truth"]  # fmt: skip
    rows = [[e[c] for c in columns] for e in result.estimates if e["repeat"] == 0]
    formats = {"epsilon": "g", "estimate": ".4f", "truth": ".4f", "mean_estimate": ".3f",
               "mean_truth": ".3f"}  # fmt: skip
    headers = ["mechanism", "epsilon", "method", "key", "frequency", "truth", "mean", "truth"]
    return "\n".join(markdown_lines(Table(columns, rows, headers=headers, formats=formats)))


def mean_error_table(metrics: list[dict[str, Any]]) -> str:
    """``mean_mae`` per (mechanism, epsilon, method): mean ± sd over repeats, as markdown."""
    groups: dict[tuple, list[float]] = {}
    for row in metrics:
        groups.setdefault((row["mechanism"], row["epsilon"], row["method"]), []).append(
            row["mean_mae"]
        )
    lines = ["| mechanism | epsilon | method | MAE of the means |", "|---|---:|---|---:|"]
    for (mech, eps, method), values in groups.items():
        sd = float(np.std(values, ddof=1)) if len(values) > 1 else 0.0
        lines.append(f"| {mech} | {eps:g} | {method} | {np.mean(values):.4f} ± {sd:.4f} |")
    return "\n".join(lines)
