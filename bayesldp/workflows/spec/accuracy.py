"""The accuracy spec (``kind = "accuracy"``): the accuracy experiments of three papers.

Tables: ``[study]`` (name, seed) and at least one section, ``[mle]`` (Lopuhaä-Zwakenberg, Li, Škorić
and Li, "Improving Frequency Estimation under Local Differential Privacy", WPES 2020), ``[em_mr]``
(Ye, Wang, Zhang and Feng, "Revisiting EM-based Estimation for Locally Differentially Private
Protocols") or ``[sampling]`` (Biswas, Cormode and Maple, "Impact of Sampling on Locally
Differentially Private Data Collection", arXiv 2022; with its ``[[sampling.populations]]``).  Each
section may carry a ``.full`` overlay (``[mle.full]``, ...), the larger settings of ``--full``; both
the default and the ``--full`` settings are checked.  ``bayesldp run`` (or
``benchmarks/accuracy.py``) runs it with :func:`bayesldp.workflows.accuracy.run_study`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
from scipy import stats

from bayesldp._validation import check_int, check_positive, check_probability
from bayesldp.estimators import METHODS
from bayesldp.mechanisms.registry import canonical_name
from bayesldp.workflows.spec.schema import (
    NAME_FIELD,
    Field,
    Schema,
    SpecError,
    check_each,
    check_nonempty,
    check_table,
    check_tables,
    check_value,
)

SECTIONS = ("mle", "em_mr", "sampling")
SAMPLING_ESTIMATORS = ("c", "g", "c_hat", "oracle_sampled")
EM_MR_POPULATIONS = ("zipf", "dirichlet")
TRUNCATION_TOLERANCE = 1e-6  # largest population mass allowed outside 0..k-1 (then dropped)

STUDY = {
    "name": NAME_FIELD,
    "seed": Field(int, default=0, doc="master seed"),
    "description": Field(str, default=""),
}
MLE = {
    "repeats": Field(int, default=30, doc="Jeffreys draws of theta (one data set each)"),
    "epsilon": Field(list, required=True, items=(int, float), unique=True),
    "prior_alpha": Field((int, float), default=0.5, doc="theta ~ Dirichlet(prior_alpha)"),
    "estimators": Field(
        list, default=["oracle", "norm_sub", "mle"], items=str, choices=tuple(METHODS), unique=True
    ),
    "grr_k": Field(list, default=[], items=int, unique=True),
    "grr_n": Field(list, default=[], items=int, unique=True),
    "ue_mechanisms": Field(
        list,
        default=["OUE"],
        items=str,
        choices=("SUE", "OUE"),
        convert=canonical_name,
        unique=True,
    ),
    "ue_k": Field(list, default=[10], items=int, unique=True),
    "ue_n": Field(list, default=[], items=int, unique=True),
    "full": Field(dict, default={}),
}
EM_MR = {
    "repeats": Field(int, default=20),
    "mechanisms": Field(
        list,
        default=["GRR", "OLH"],
        items=str,
        choices=("GRR", "OLH"),
        convert=canonical_name,
        unique=True,
    ),
    "k": Field(int, required=True),
    "n": Field(list, required=True, items=int, unique=True),
    "epsilon": Field(list, required=True, items=(int, float), unique=True),
    "populations": Field(list, default=["zipf"], items=str, choices=EM_MR_POPULATIONS, unique=True),
    "zipf_s": Field((int, float), default=1.1),
    "dirichlet_alpha": Field((int, float), default=0.5),
    "estimators": Field(
        list, default=["norm_sub", "em", "ibu", "em_mr"], items=str, choices=METHODS, unique=True
    ),
    "cr_hashes": Field(int, default=2000),
    "full": Field(dict, default={}),
}
SAMPLING = {
    "repeats": Field(int, default=100),
    "n": Field(int, required=True),
    "k": Field(int, required=True),
    "epsilon": Field(list, required=True, items=(int, float), unique=True),
    "pi": Field(list, required=True, items=(int, float), unique=True),
    "estimators": Field(
        list, default=list(SAMPLING_ESTIMATORS), items=str, choices=SAMPLING_ESTIMATORS, unique=True
    ),
    "populations": Field(list, required=True, items=dict, unique=True),
    "full": Field(dict, default={}),
}
POPULATION = {
    "name": Field(str, required=True),
    "trials": Field(list, required=True, items=int),
    "p": Field(list, required=True, items=(int, float)),
    "weights": Field(list, items=(int, float), doc="mixture weights (default equal)"),
    "combine": Field(str, default="mixture", choices=("mixture", "sum")),
}
SCHEMAS = {"mle": MLE, "em_mr": EM_MR, "sampling": SAMPLING}
NOT_IN_FULL = ("full", "populations")


def _full_schema(schema: Schema) -> dict[str, Field]:
    """The ``.full`` overlay: the section's keys (all optional, no defaults)."""
    return {
        key: Field(f.types, items=f.items, choices=f.choices, convert=f.convert, unique=f.unique)
        for key, f in schema.items()
        if key not in NOT_IN_FULL
    }


def validate_accuracy(raw: Mapping[str, Any], source: str = "spec") -> dict[str, Any]:
    """Check a parsed accuracy spec; return it with defaults filled in.

    Every problem raises one :class:`~bayesldp.workflows.spec.SpecError` line naming the key
    path, e.g. ``spec: [em_mr.full].n[1]: must be >= 1, got 0``.  Both the default and the
    ``--full`` settings are checked, so a bad ``.full`` value fails before anything runs.

    Examples
    --------
    >>> from bayesldp.workflows.spec import validate_accuracy
    >>> spec = validate_accuracy({"study": {"name": "a"},
    ...                           "mle": {"epsilon": [1.0], "grr_k": [8], "grr_n": [100]}})
    >>> sorted(spec), spec["mle"]["repeats"]
    (['mle', 'study'], 30)
    """
    tables = {name: table for name, table in raw.items() if name not in SCHEMAS}
    spec: dict[str, Any] = {
        "study": check_tables(tables, {"study": STUDY}, source, ("study",), SCHEMAS)["study"]
    }
    if not any(name in raw for name in SCHEMAS):
        raise SpecError(f"{source}: no section to run (give [mle], [em_mr] or [sampling])")
    check_value(check_int, spec["study"]["seed"], f"{source}: [study].seed", 0)
    for name, schema in SCHEMAS.items():
        if name in raw:
            spec[name] = _check_section(raw[name], name, schema, source)
    return spec


def _check_section(raw: Any, name: str, schema: Schema, source: str) -> dict[str, Any]:
    """One section and its ``.full`` overlay, checked as run by default and with ``--full``."""
    table = check_table(raw, schema, f"{source}: [{name}]")
    full = check_table(table["full"], _full_schema(schema), f"{source}: [{name}.full]")
    table["full"] = {key: value for key, value in full.items() if value is not None}
    if name == "sampling":
        table["populations"] = [
            _check_population(entry, f"{source}: [[sampling.populations]][{i}]")
            for i, entry in enumerate(table["populations"])
        ]
    for mode in ("default", "full"):
        merged = resolve_section(table, full=mode == "full")
        where = {key: f"{source}: [{name}]" for key in merged}
        if mode == "full":
            where.update({key: f"{source}: [{name}.full]" for key in table["full"]})
        _CHECKS[name](merged, where)
    return table


def resolve_section(table: Mapping[str, Any], full: bool) -> dict[str, Any]:
    """A section's settings for one run: the defaults, overlaid by ``.full`` when ``full``."""
    out = {key: value for key, value in table.items() if key != "full"}
    if full:
        out.update(table["full"])
    return out


Where = Mapping[str, str]


def _check(
    check: Callable[..., Any], t: Mapping[str, Any], where: Where, key: str, *args: Any
) -> None:
    """A :mod:`bayesldp._validation` check of ``t[key]`` (of each value of a list, which needs
    one) at the key's path."""
    if isinstance(t[key], list):
        check_each(check, t[key], f"{where[key]}.{key}", *args)
    else:
        check_value(check, t[key], f"{where[key]}.{key}", *args)


def _nonempty(t: Mapping[str, Any], where: Where, *keys: str) -> None:
    for key in keys:
        check_nonempty(t[key], f"{where[key]}.{key}")


def _check_mle(t: Mapping[str, Any], where: Where) -> None:
    _check(check_int, t, where, "repeats", 2)
    _check(check_positive, t, where, "epsilon")
    _check(check_positive, t, where, "prior_alpha")
    _nonempty(t, where, "estimators")
    if not (t["grr_k"] and t["grr_n"]) and not (t["ue_mechanisms"] and t["ue_k"] and t["ue_n"]):
        raise SpecError(f"{where['grr_k']}.grr_k: no cell to run (need grr_k and grr_n, or ue_*)")
    for key, low in (("grr_k", 2), ("ue_k", 2), ("grr_n", 1), ("ue_n", 1)):
        check_each(check_int, t[key], f"{where[key]}.{key}", low, empty_ok=True)
    for i, k in enumerate(t["ue_k"]):
        if k > 12:
            raise SpecError(
                f"{where['ue_k']}.ue_k[{i}]: must be <= 12 (the Cramer-Rao bound needs the "
                f"K x 2^K channel), got {k}"
            )
    if t["ue_n"]:
        _nonempty(t, where, "ue_mechanisms")


def _check_em_mr(t: Mapping[str, Any], where: Where) -> None:
    _check(check_int, t, where, "repeats", 2)
    _nonempty(t, where, "mechanisms", "populations", "estimators")
    _check(check_int, t, where, "k", 2)
    _check(check_int, t, where, "n", 1)
    for key in ("epsilon", "zipf_s", "dirichlet_alpha"):
        _check(check_positive, t, where, key)
    _check(check_int, t, where, "cr_hashes", 1)


def _check_sampling(t: Mapping[str, Any], where: Where) -> None:
    _check(check_int, t, where, "repeats", 2)
    _check(check_int, t, where, "n", 1)
    _check(check_int, t, where, "k", 2)
    _check(check_positive, t, where, "epsilon")
    _check(check_probability, t, where, "pi")
    _nonempty(t, where, "estimators", "populations")
    for i, pop in enumerate(t["populations"]):
        outside = 1.0 - binomial_law(pop)[: t["k"]].sum()
        if outside > TRUNCATION_TOLERANCE:
            raise SpecError(
                f"{where['k']}.k: population {pop['name']!r} ([[sampling.populations]][{i}]) "
                f"puts mass {outside:.3g} outside 0..{t['k'] - 1}"
            )


_CHECKS: dict[str, Callable[[Mapping[str, Any], Where], None]] = {
    "mle": _check_mle,
    "em_mr": _check_em_mr,
    "sampling": _check_sampling,
}


def _check_population(entry: Any, path: str) -> dict[str, Any]:
    """One ``[[sampling.populations]]`` entry: a mixture or sum of binomials."""
    pop = check_table(entry, POPULATION, path)
    m = len(pop["trials"])
    check_nonempty(pop["trials"], f"{path}.trials")
    if len(pop["p"]) != m:
        raise SpecError(
            f"{path}.p: needs {m} values (one per entry of trials), got {len(pop['p'])}"
        )
    check_each(check_int, pop["trials"], f"{path}.trials", 0)
    for i, p in enumerate(pop["p"]):
        check_value(check_probability, p, f"{path}.p[{i}]", low_open=False)
    if pop["combine"] == "sum":
        if pop["weights"] is not None:
            raise SpecError(f"{path}.weights: only for combine = 'mixture'")
        return pop
    weights = pop["weights"] if pop["weights"] is not None else [1.0] * m
    if len(weights) != m:
        raise SpecError(f"{path}.weights: needs {m} values, got {len(weights)}")
    if any(not (math.isfinite(w) and w >= 0) for w in weights) or sum(weights) <= 0:
        raise SpecError(f"{path}.weights: need finite values >= 0 with a positive sum")
    pop["weights"] = [float(w) for w in weights]
    return pop


def binomial_law(pop: Mapping[str, Any]) -> np.ndarray:
    """The law of a ``[[sampling.populations]]`` entry on ``0..max``.

    ``combine = "mixture"``: ``sum_i w_i Binomial(trials_i, p_i)`` (weights normalised);
    ``combine = "sum"``: the law of ``sum_i X_i`` with independent ``X_i ~ Binomial(trials_i,
    p_i)`` (a convolution).
    """
    if pop["combine"] == "sum":
        law = np.array([1.0])
        for t, p in zip(pop["trials"], pop["p"], strict=True):
            law = np.convolve(law, stats.binom.pmf(np.arange(t + 1), t, p))
        return law
    w = np.asarray(pop["weights"], dtype=float)
    w = w / w.sum()
    law = np.zeros(max(pop["trials"]) + 1)
    for wi, t, p in zip(w, pop["trials"], pop["p"], strict=True):
        law[: t + 1] += wi * stats.binom.pmf(np.arange(t + 1), t, p)
    return law
