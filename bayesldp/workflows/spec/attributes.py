"""The attributes spec (``kind = "attributes"``): records of several attributes under SPL, SMP
and RS+FD.

Tables: ``[study]`` (name, seed, ``n`` users, ``repeats``), ``[[attributes]]`` (one population
table per attribute, as a study's ``[population]``: the attributes are drawn independently),
``[[protocols]]`` (``name`` SPL, SMP or RSFD, ``epsilon`` (one or a list), ``base`` GRR, SUE
or OUE, RSFD's ``fake`` and ``budget``: ``record``, the default, ``epsilon`` bounds the whole
record; ``paper``, the paper's nominal epsilon, amplified for the whole record),
``[estimators]`` (methods run on each attribute's tally) and
``[bayes]`` (each attribute's posterior, :func:`~bayesldp.mechanisms.multidimensional.
fit_marginals`: ``method``, ``draws``, ``chains``).  ``bayesldp run`` runs it with
:func:`bayesldp.workflows.grouped_study.run_attributes`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bayesldp._validation import check_int
from bayesldp.bayes.fit_options import FIT_METHODS
from bayesldp.errors import InvalidInputError, InvalidTypeError
from bayesldp.workflows.spec.rounds import check_population
from bayesldp.workflows.spec.schema import (
    NAME_FIELD,
    Field,
    SpecError,
    check_distinct_entries,
    check_table,
    check_tables,
    check_value,
)
from bayesldp.workflows.spec.study import ESTIMATORS, POPULATION

STUDY = {
    "name": NAME_FIELD,
    "seed": Field(int, default=0, doc="master seed"),
    "n": Field(int, required=True, doc="number of users (records)"),
    "repeats": Field(int, default=1, doc="independent repetitions"),
    "description": Field(str, default=""),
}
PROTOCOL = {
    "name": Field(str, required=True, choices=("SPL", "SMP", "RSFD")),
    "epsilon": Field((int, float, list), required=True, items=(int, float), unique=True),
    "base": Field(str, default="GRR", choices=("GRR", "SUE", "OUE")),
    "fake": Field(str, choices=("zero", "random"), doc="RSFD with SUE or OUE (default zero)"),
    "budget": Field(
        str,
        choices=("record", "paper"),
        doc="RSFD: epsilon bounds the whole record (record, the default) or is the paper's "
        "nominal budget (paper: the whole record realises more)",
    ),
}
BAYES = {
    "method": Field(str, default="auto", choices=FIT_METHODS),
    "draws": Field(int, default=1000),
    "chains": Field(int, default=4),
}
TABLES = {"study": STUDY, "estimators": ESTIMATORS, "bayes": BAYES}


def validate_attributes(raw: Mapping[str, Any], source: str = "spec") -> dict[str, Any]:
    """Check a parsed attributes spec; return it with defaults filled in.

    Examples
    --------
    >>> from bayesldp.workflows.spec import validate_attributes
    >>> spec = validate_attributes({
    ...     "study": {"name": "a", "n": 100},
    ...     "attributes": [{"kind": "zipf", "k": 4}, {"kind": "zipf", "k": 3}],
    ...     "protocols": [{"name": "SPL", "epsilon": 1.0}]})
    >>> spec["protocols"][0]["epsilon"], spec["protocols"][0]["base"]
    ([1.0], 'GRR')
    """
    spec: dict[str, Any] = check_tables(raw, TABLES, source, required=("study",),
                                        arrays=["attributes", "protocols"])  # fmt: skip
    study, bayes = spec["study"], spec["bayes"]
    for key, low in (("n", 1), ("repeats", 1), ("seed", 0)):
        check_value(check_int, study[key], f"{source}: [study].{key}", low)
    for key in ("draws", "chains"):
        check_value(check_int, bayes[key], f"{source}: [bayes].{key}", 1)
    for name, least in (("attributes", 2), ("protocols", 1)):
        entries = raw.get(name)
        if not isinstance(entries, list) or len(entries) < least:
            raise SpecError(f"{source}: [[{name}]]: expected at least {least} [[{name}]] tables")
    spec["attributes"] = []
    for j, entry in enumerate(raw["attributes"]):
        where = f"{source}: [[attributes]][{j}]"
        population = check_table(entry, POPULATION, where)
        check_population(population, where, source)
        spec["attributes"].append(population)
    ks = [population["k"] for population in spec["attributes"]]
    spec["protocols"] = []
    for i, entry in enumerate(raw["protocols"]):
        where = f"{source}: [[protocols]][{i}]"
        protocol = check_table(entry, PROTOCOL, where)
        eps = protocol["epsilon"]
        eps = eps if isinstance(eps, list) else [eps]
        if not eps or any(e <= 0 for e in eps):
            raise SpecError(f"{where}.epsilon: values must be > 0")
        protocol["epsilon"] = [float(e) for e in eps]
        try:  # built once: a fake data with SPL, say, fails before anything runs
            make_protocol(protocol, ks, protocol["epsilon"][0])
        except (InvalidInputError, InvalidTypeError) as exc:
            raise SpecError(f"{where}: {exc}") from None
        spec["protocols"].append(protocol)
    check_distinct_entries(spec["protocols"], f"{source}: [[protocols]]")
    spec["bayes_requested"] = "bayes" in raw
    return spec


def make_protocol(protocol: dict[str, Any], ks: list[int], epsilon: float):
    """The protocol of a validated ``[[protocols]]`` entry at ``epsilon``."""
    from bayesldp.mechanisms.multidimensional.protocols import PROTOCOLS

    options = {"base": protocol["base"]}
    if protocol["fake"] is not None:
        if protocol["name"] != "RSFD":
            raise InvalidInputError(f"fake: only RSFD reports fake data, not {protocol['name']}")
        options["fake"] = protocol["fake"]
    if protocol.get("budget") is not None:
        if protocol["name"] != "RSFD":
            raise InvalidInputError(f"budget: only RSFD has a choice of budget, not "
                                    f"{protocol['name']} (it spends at most epsilon on the "
                                    "whole record)")  # fmt: skip
        options["budget"] = protocol["budget"]
    return PROTOCOLS[protocol["name"]](ks, epsilon, **options)
