"""The rounds spec (``kind = "rounds"``): a population followed over rounds of collection.

Tables: ``[study]`` (name, seed, ``n`` users, ``rounds``), ``[population]`` (the first round's
frequencies: the study's population table), ``[drift]`` (how the population moves: ``step``,
the sd per round of a random walk on the centred log-frequencies, 0 for none; ``redraw``, the
share of users who draw their value anew from the round's frequencies each round),
``[[mechanisms]]`` (registered mechanisms, as in a study: the longitudinal ones, L-GRR and the
unary ones, keep each user's permanent response in a memo across rounds), ``[estimators]``
(methods run on each round alone) and ``[bayes]`` (``rounds = true``: :func:`bayesldp.fit_rounds`
over every round; ``draws``, ``tune``, ``chains``).  ``bayesldp run`` runs it with
:func:`bayesldp.workflows.grouped_study.run_rounds`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from bayesldp._validation import check_int
from bayesldp.workflows.spec.schema import (
    NAME_FIELD,
    Field,
    SpecError,
    check_distinct_entries,
    check_sizes,
    check_table,
    check_tables,
    check_value,
)
from bayesldp.workflows.spec.study import (
    ESTIMATORS,
    POPULATION,
    check_population_values,
    resolve_dataset,
)

STUDY = {
    "name": NAME_FIELD,
    "seed": Field(int, default=0, doc="master seed"),
    "n": Field(int, required=True, doc="number of users, the same in every round"),
    "rounds": Field(int, required=True, doc="number of rounds (>= 2)"),
    "description": Field(str, default=""),
}
DRIFT = {
    "step": Field(
        (int, float),
        default=0.0,
        doc="sd per round of the random walk on the "
        "centred log-frequencies (0: the frequencies stay)",
    ),
    "redraw": Field(
        (int, float),
        default=0.0,
        doc="share of users who draw their value anew "
        "from the round's frequencies each round (0: values fixed)",
    ),
}
BAYES = {
    "rounds": Field(bool, default=True, doc="fit_rounds: a posterior of every round at once"),
    "draws": Field(int, default=1000),
    "tune": Field(int, default=1000),
    "chains": Field(int, default=4),
}
TABLES = {
    "study": STUDY,
    "population": POPULATION,
    "drift": DRIFT,
    "estimators": ESTIMATORS,
    "bayes": BAYES,
}


def check_population(population: dict[str, Any], where: str, source: str) -> None:
    """A validated population table: a data set's K filled in, K >= 2, frequencies of K."""
    if population["kind"] == "dataset":
        resolve_dataset(population, source)
    if population["k"] is None:
        raise SpecError(f"{where}.k: missing (required)")
    check_value(check_int, population["k"], f"{where}.k", 2)
    check_population_values(population, where)
    freqs = population["frequencies"]
    if population["kind"] == "frequencies" and (freqs is None or len(freqs) != population["k"]):
        raise SpecError(f"{where}.frequencies: need {population['k']} values for "
                        "kind='frequencies'")  # fmt: skip


def validate_rounds(raw: Mapping[str, Any], source: str = "spec") -> dict[str, Any]:
    """Check a parsed rounds spec; return it with defaults filled in.

    Examples
    --------
    >>> from bayesldp.workflows.spec import validate_rounds
    >>> spec = validate_rounds({
    ...     "study": {"name": "r", "n": 100, "rounds": 3}, "population": {"kind": "zipf", "k": 5},
    ...     "mechanisms": [{"name": "L-GRR", "epsilon": 1.0}]})
    >>> spec["drift"]
    {'step': 0.0, 'redraw': 0.0}
    """
    from bayesldp.workflows.spec.study import _check_mechanism, _mechanism_schema

    spec: dict[str, Any] = check_tables(
        raw, TABLES, source, required=("study", "population", "mechanisms"), arrays=["mechanisms"]
    )
    study, drift, bayes = spec["study"], spec["drift"], spec["bayes"]
    check_value(check_int, study["n"], f"{source}: [study].n", 1)
    check_value(check_int, study["rounds"], f"{source}: [study].rounds", 2)
    check_value(check_int, study["seed"], f"{source}: [study].seed", 0)
    if not (math.isfinite(drift["step"]) and drift["step"] >= 0):
        raise SpecError(f"{source}: [drift].step: must be >= 0 and finite, got {drift['step']}")
    if not 0 <= drift["redraw"] <= 1:
        raise SpecError(f"{source}: [drift].redraw: must lie in [0, 1], got {drift['redraw']}")
    for key, low in (("draws", 1), ("tune", 0), ("chains", 1)):
        check_value(check_int, bayes[key], f"{source}: [bayes].{key}", low)
    if not spec["estimators"]["methods"] and not bayes["rounds"]:
        raise SpecError(f"{source}: [estimators].methods: empty, and [bayes].rounds is false")
    check_population(spec["population"], f"{source}: [population]", source)
    n, rounds, k = study["n"], study["rounds"], spec["population"]["k"] or 0
    check_sizes({  # before anything runs: rounds = 10^8 is refused now, not after minutes
        f"{source}: [study].n x [study].rounds": (n * rounds, 32, "user-rounds",
                                                  "a user's value and report in a round"),
        f"{source}: [study].rounds x [population].k": (rounds * k, 64, "round-frequencies",
                                                       "a round's frequency and estimates"),
    })  # fmt: skip
    entries = raw["mechanisms"]
    if not isinstance(entries, list) or not entries:
        raise SpecError(f"{source}: [[mechanisms]]: expected at least one [[mechanisms]] table")
    schema = _mechanism_schema()
    spec["mechanisms"] = []
    for i, entry in enumerate(entries):
        where = f"{source}: [[mechanisms]][{i}]"
        mech = check_table(entry, schema, where)
        eps = mech["epsilon"] if isinstance(mech["epsilon"], list) else [mech["epsilon"]]
        if not eps or any(e <= 0 for e in eps):
            raise SpecError(f"{where}.epsilon: values must be > 0")
        _check_mechanism(mech, spec["population"]["k"], eps[0], where)
        spec["mechanisms"].append(mech)
    check_distinct_entries(spec["mechanisms"], f"{source}: [[mechanisms]]")
    spec["bayes_requested"] = "bayes" in raw
    return spec
