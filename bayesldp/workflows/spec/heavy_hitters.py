"""The heavy-hitters spec (``kind = "heavy_hitters"``): discovery of the frequent items.

Tables: ``[study]`` (name, seed, ``n`` users, ``repeats``, ``top`` the size of the true top
list the discovery is scored against, ``threshold`` the share of ``Pr(share > threshold)``),
``[population]`` (the study's population table over ``k`` items, named ``w0, w1, ...``: e.g.
``kind = "zipf"``, ``k = 65536``, ``s = 1``), ``[[methods]]`` (``name`` PEM, SFP or TreeHist,
``epsilon`` one or a list, and ``options``, an inline table of the protocol's keyword
arguments, e.g. ``{ eta = 2, holdout = 0.2 }``; PEM's and SFP's ``k`` is ``top`` unless given)
and ``[bayes]`` (the found items' posterior, :meth:`~bayesldp.heavy_hitters.PEM.posterior`:
``method``, ``draws``, ``chains``; ``posterior = false`` skips it).  ``bayesldp run`` runs it
with :func:`bayesldp.workflows.heavy_hitter_study.run_heavy_hitters`.
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
    check_sizes,
    check_table,
    check_tables,
    check_value,
)
from bayesldp.workflows.spec.study import POPULATION

#: the discovery protocols a ``[[methods]]`` entry may name
METHODS = ("PEM", "SFP", "TreeHist")

STUDY = {
    "name": NAME_FIELD,
    "seed": Field(int, default=0, doc="master seed"),
    "n": Field(int, required=True, doc="number of users, each holding one item"),
    "repeats": Field(int, default=1, doc="independent repetitions"),
    "top": Field(int, default=10, doc="size of the true top list scored against"),
    "threshold": Field((int, float), default=0.01, doc="Pr(share > threshold) of found items"),
    "description": Field(str, default=""),
}
METHOD = {
    "name": Field(str, required=True, choices=METHODS),
    "epsilon": Field((int, float, list), required=True, items=(int, float), unique=True),
    "options": Field(dict, doc="keyword arguments of the protocol (e.g. eta, holdout, m)"),
}
BAYES = {
    "posterior": Field(bool, default=True, doc="the found items' posterior and its coverage"),
    "method": Field(str, default="auto", choices=FIT_METHODS),
    "draws": Field(int, default=1000),
    "chains": Field(int, default=4),
}
TABLES = {"study": STUDY, "population": POPULATION, "bayes": BAYES}
#: bytes a run holds for each item (its name, code and frequency, the code's lookup entry),
#: each user (item, code, report) and each (repeat, method, epsilon) (a row of results)
ITEM_BYTES, USER_BYTES, RUN_BYTES = 256, 128, 1024


def item_labels(k: int) -> list[str]:
    """The population's items: ``w0 .. w{k-1}``."""
    return [f"w{i}" for i in range(k)]


def validate_heavy_hitters(raw: Mapping[str, Any], source: str = "spec") -> dict[str, Any]:
    """Check a parsed heavy-hitters spec; return it with defaults filled in.

    Examples
    --------
    >>> from bayesldp.workflows.spec import validate_heavy_hitters
    >>> spec = validate_heavy_hitters({
    ...     "study": {"name": "h", "n": 1000}, "population": {"kind": "zipf", "k": 100},
    ...     "methods": [{"name": "PEM", "epsilon": 4.0}]})
    >>> spec["study"]["top"], spec["methods"]
    (10, [{'name': 'PEM', 'epsilon': [4.0], 'options': {}}])
    """
    spec: dict[str, Any] = check_tables(raw, TABLES, source, required=("study", "population"),
                                        arrays=["methods"])  # fmt: skip
    study, bayes = spec["study"], spec["bayes"]
    for key, low in (("n", 1), ("repeats", 1), ("seed", 0), ("top", 1)):
        check_value(check_int, study[key], f"{source}: [study].{key}", low)
    if not 0 <= study["threshold"] < 1:
        raise SpecError(f"{source}: [study].threshold: must lie in [0, 1), got "
                        f"{study['threshold']}")  # fmt: skip
    for key in ("draws", "chains"):
        check_value(check_int, bayes[key], f"{source}: [bayes].{key}", 1)
    entries = raw.get("methods")
    runs = sum(len(e["epsilon"]) if isinstance(e, dict) and isinstance(e.get("epsilon"), list)
               else 1 for e in entries or [None])  # fmt: skip
    check_sizes({  # before any method is built: a k of 10^9 is refused now, not at 22 GB
        f"{source}: [population].k": (spec["population"]["k"] or 0, ITEM_BYTES, "items",
                                      "an item's name, code, lookup entry and frequency"),
        f"{source}: [study].n": (study["n"], USER_BYTES, "users",
                                 "a user's item, code and report"),
        f"{source}: [study].repeats": (study["repeats"], RUN_BYTES * runs, "repeats",
                                       f"a row of results for each of the {runs} runs"),
    })  # fmt: skip
    check_population(spec["population"], f"{source}: [population]", source)
    if study["top"] > spec["population"]["k"]:
        raise SpecError(f"{source}: [study].top: {study['top']} is more than the population's "
                        f"{spec['population']['k']} items")  # fmt: skip
    entries = raw.get("methods")
    if not isinstance(entries, list) or not entries:
        raise SpecError(f"{source}: [[methods]]: expected at least one [[methods]] table")
    spec["methods"] = []
    for i, entry in enumerate(entries):
        where = f"{source}: [[methods]][{i}]"
        method = check_table(entry, METHOD, where)
        eps = method["epsilon"] if isinstance(method["epsilon"], list) else [method["epsilon"]]
        if not eps or any(e <= 0 for e in eps):
            raise SpecError(f"{where}.epsilon: values must be > 0")
        method["epsilon"] = [float(e) for e in eps]
        method["options"] = dict(method["options"] or {})
        try:  # built once: a bad option fails before anything runs
            make_method(method, spec["population"]["k"], study["top"], method["epsilon"][0])
        except (InvalidInputError, InvalidTypeError) as exc:
            raise SpecError(f"{where}: {exc}") from None
        except TypeError as exc:  # an option the protocol does not take
            raise SpecError(f"{where}.options: {exc}") from None
        spec["methods"].append(method)
    check_distinct_entries(spec["methods"], f"{source}: [[methods]]")
    return spec


def make_method(method: dict[str, Any], k: int, top: int, epsilon: float) -> Any:
    """The protocol of a validated ``[[methods]]`` entry at ``epsilon``: its ``options``, with
    ``k`` (PEM, SFP) defaulting to ``top`` and SFP's ``max_length`` to the longest item."""
    from bayesldp.heavy_hitters import PEM, SFP, TreeHist

    options = dict(method["options"])
    name = method["name"]
    if name in ("PEM", "SFP"):
        options.setdefault("k", top)
    if name == "SFP":
        options.setdefault("max_length", len(f"w{k - 1}"))
        options.setdefault("alphabet", "w0123456789")
    return {"PEM": PEM, "SFP": SFP, "TreeHist": TreeHist}[name](epsilon, **options)
