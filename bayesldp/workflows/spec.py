"""Reading and validating specifications (``models/*.toml``): the one loader.

A spec is a TOML file of one *kind*, each with one schema:

========== ================================================= ==================================
kind       what ``bayesldp run`` does with it                schema and validator
========== ================================================= ==================================
study      mechanisms x estimators on simulated populations  this module (:func:`validate_spec`)
survey     one AdOBEst-LDP survey, adaptive vs non-adaptive  :mod:`bayesldp.workflows.survey`
grid       the AdOBEst-LDP experiment grid (seed 004)        :mod:`bayesldp.workflows.grid`
accuracy   the seeds' accuracy experiments (000, 001, 003)   :mod:`bayesldp.workflows.accuracy`
========== ================================================= ==================================

The kind is the top-level key ``kind = "..."``; a file without it is recognised by its tables
(``[grid]``, ``[[mechanisms]]``, ``[survey]``, or ``[mle]`` / ``[em_mr]`` / ``[sampling]``).
Every problem is reported before anything runs, as one line naming the key's path in the file,
e.g. ``models/x.toml: [population].k: expected an integer, got "ten"``.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bayesldp.errors import InvalidInputError

POPULATION_KINDS = ("dirichlet", "zipf", "binomial", "uniform", "frequencies", "dataset")


class SpecError(InvalidInputError):
    """A study specification is malformed; the message names the file and the key path."""


@dataclass(frozen=True)
class Field:
    """One key of a table: its type(s), whether it is required, its default and allowed values."""

    types: type | tuple[type, ...]
    required: bool = False
    default: Any = None
    choices: tuple[Any, ...] | None = None
    items: type | tuple[type, ...] | None = None  # element type for lists
    doc: str = ""


STUDY = {
    "name": Field(str, required=True, doc="name used in the report"),
    "seed": Field(int, default=0, doc="master seed; every repeat gets a child stream"),
    "repeats": Field(int, default=1, doc="independent repetitions"),
    "n": Field(int, required=True, doc="number of users"),
    "description": Field(str, default=""),
}
POPULATION = {
    "kind": Field(str, required=True, choices=POPULATION_KINDS),
    "k": Field(int, doc="number of categories (required unless kind = 'dataset')"),
    "alpha": Field((int, float), default=1.0, doc="dirichlet concentration"),
    "s": Field((int, float), default=1.1, doc="zipf exponent"),
    "p": Field((int, float), default=0.5, doc="binomial success probability"),
    "frequencies": Field(list, items=(int, float), doc="explicit frequencies (kind=frequencies)"),
    "dataset": Field(
        str, doc="a shipped data set (kind=dataset): bayesldp.datasets.list_datasets()"
    ),
    "redraw": Field(bool, default=True, doc="draw a new theta for each repeat (dirichlet)"),
}


def _mechanism_schema() -> dict[str, Field]:
    """``[[mechanisms]]``: a registered name, the budget(s), and every declared parameter."""
    from bayesldp.mechanisms import all_parameters, names

    schema = {
        "name": Field(str, required=True, choices=names()),
        "epsilon": Field((int, float, list), required=True, items=(int, float)),
    }
    for param in all_parameters().values():
        types = (int, float) if param.kind is float else param.kind
        schema[param.name] = (
            Field(list, items=types, doc=param.help) if param.many else Field(types, doc=param.help)
        )
    return schema


ESTIMATORS = {
    "methods": Field(list, default=["oracle"], items=str),
}
BAYES = {
    "method": Field(str, default="auto"),
    "prior": Field((int, float, list), default=1.0, items=(int, float)),
    "draws": Field(int, default=1000),
    "chains": Field(int, default=4),
    "hdi_prob": Field((int, float), default=0.9, doc="credible interval mass, in (0, 1)"),
}
TOP = {
    "study": STUDY,
    "population": POPULATION,
    "mechanisms": ["[[mechanisms]]"],  # schema from the mechanism registry
    "estimators": ESTIMATORS,
    "bayes": BAYES,
}
REQUIRED_TABLES = ("study", "population", "mechanisms")


def _type_name(types: type | tuple[type, ...]) -> str:
    types = types if isinstance(types, tuple) else (types,)
    names = {
        int: "an integer",
        float: "a number",
        str: "a string",
        bool: "true/false",
        list: "a list",
    }
    return " or ".join(names.get(t, t.__name__) for t in types)


def _is(value: Any, types: type | tuple[type, ...]) -> bool:
    types = types if isinstance(types, tuple) else (types,)
    if isinstance(value, bool):
        return bool in types
    return isinstance(value, types)


def check_table(table: Any, schema: Mapping[str, Field], path: str) -> dict[str, Any]:
    """Check one TOML table against its schema; return it with defaults filled in."""
    if not isinstance(table, Mapping):
        raise SpecError(f"{path}: expected a table, got {type(table).__name__}")
    unknown = sorted(set(table) - set(schema))
    if unknown:
        raise SpecError(f"{path}.{unknown[0]}: unknown key (valid keys: {', '.join(schema)})")
    out: dict[str, Any] = {}
    for key, spec in schema.items():
        where = f"{path}.{key}"
        if key not in table:
            if spec.required:
                raise SpecError(f"{where}: missing (required)")
            out[key] = spec.default
            continue
        value = table[key]
        if not _is(value, spec.types):
            raise SpecError(f"{where}: expected {_type_name(spec.types)}, got {value!r}")
        if isinstance(value, list) and spec.items is not None:
            for i, item in enumerate(value):
                if not _is(item, spec.items):
                    raise SpecError(
                        f"{where}[{i}]: expected {_type_name(spec.items)}, got {item!r}"
                    )
        if spec.choices is not None and value not in spec.choices:
            raise SpecError(f"{where}: {value!r} is not one of {', '.join(map(str, spec.choices))}")
        out[key] = value
    return out


def validate_spec(raw: Mapping[str, Any], source: str = "spec") -> dict[str, Any]:
    """Check a parsed study spec against its schema; return it with defaults filled in."""
    unknown = sorted(set(raw) - set(TOP))
    if unknown:
        raise SpecError(f"{source}: [{unknown[0]}]: unknown table (valid: {', '.join(TOP)})")
    for name in REQUIRED_TABLES:
        if name not in raw:
            raise SpecError(f"{source}: [{name}]: missing (required)")
    spec: dict[str, Any] = {}
    for name, schema in TOP.items():
        if isinstance(schema, list):
            entries = raw.get(name, [])
            if not isinstance(entries, list) or not entries:
                raise SpecError(f"{source}: [[{name}]]: expected at least one [[{name}]] table")
            mechanism = _mechanism_schema()
            spec[name] = [
                check_table(entry, mechanism, f"{source}: [[{name}]][{i}]")
                for i, entry in enumerate(entries)
            ]
        else:
            spec[name] = check_table(raw.get(name, {}), schema, f"{source}: [{name}]")
    _check_values(spec, source)
    spec["bayes_requested"] = "bayes" in raw
    return spec


def _check_values(spec: dict[str, Any], source: str) -> None:
    study, population = spec["study"], spec["population"]
    if study["n"] < 1:
        raise SpecError(f"{source}: [study].n: must be >= 1, got {study['n']}")
    if study["repeats"] < 1:
        raise SpecError(f"{source}: [study].repeats: must be >= 1, got {study['repeats']}")
    if study["seed"] < 0:
        raise SpecError(f"{source}: [study].seed: must be >= 0, got {study['seed']}")
    if not spec["estimators"]["methods"]:
        raise SpecError(f"{source}: [estimators].methods: needs at least one method")
    hdi = spec["bayes"]["hdi_prob"]
    if not 0 < hdi < 1:
        raise SpecError(f"{source}: [bayes].hdi_prob: must lie in (0, 1), got {hdi}")
    for key in ("draws", "chains"):
        if spec["bayes"][key] < 1:
            raise SpecError(f"{source}: [bayes].{key}: must be >= 1, got {spec['bayes'][key]}")
    if population["kind"] == "dataset":
        resolve_dataset(population, source)
    if population["k"] is None:
        raise SpecError(f"{source}: [population].k: missing (required)")
    if population["k"] < 2:
        raise SpecError(f"{source}: [population].k: must be >= 2, got {population['k']}")
    if population["kind"] == "frequencies":
        freqs = population["frequencies"]
        if freqs is None or len(freqs) != population["k"]:
            raise SpecError(
                f"{source}: [population].frequencies: need {population['k']} values for kind="
                f"'frequencies'"
            )
    for i, mech in enumerate(spec["mechanisms"]):
        eps = mech["epsilon"] if isinstance(mech["epsilon"], list) else [mech["epsilon"]]
        if not eps or any(e <= 0 for e in eps):
            raise SpecError(f"{source}: [[mechanisms]][{i}].epsilon: values must be > 0")
        _check_mechanism(mech, population["k"], eps[0], f"{source}: [[mechanisms]][{i}]")


def _check_mechanism(mech: dict[str, Any], k: int, epsilon: float, where: str) -> None:
    """Build the mechanism once, so a parameter it does not take fails before anything runs."""
    from bayesldp.mechanisms import make_mechanism

    params = {key: value for key, value in mech.items() if key not in ("name", "epsilon")}
    try:
        make_mechanism(mech["name"], k, float(epsilon), **params)
    except InvalidInputError as exc:
        raise SpecError(f"{where}: {exc}") from None


def resolve_dataset(population: dict[str, Any], source: str) -> None:
    """Check ``[population].dataset`` and fill in its K."""
    from bayesldp.datasets import list_datasets, load_dataset

    name = population["dataset"]
    if name not in list_datasets():
        raise SpecError(
            f"{source}: [population].dataset: {name!r} is not one of {', '.join(list_datasets())}"
        )
    k = load_dataset(name).k
    if population["k"] not in (None, k):
        raise SpecError(
            f"{source}: [population].k: data set {name!r} has k = {k}, not {population['k']}"
        )
    population["k"] = k


#: spec kind -> (module, validator ``(raw, source) -> dict``)
KINDS: dict[str, tuple[str, str]] = {
    "study": ("bayesldp.workflows.spec", "validate_spec"),
    "survey": ("bayesldp.workflows.survey", "validate_survey_spec"),
    "grid": ("bayesldp.workflows.grid", "validate_grid_spec"),
    "accuracy": ("bayesldp.workflows.accuracy", "validate_accuracy_spec"),
}


def spec_kind(raw: Mapping[str, Any], source: str = "spec") -> str:
    """The kind of a parsed spec: its ``kind`` key, else recognised by its tables."""
    if "kind" in raw:
        kind = raw["kind"]
        if kind not in KINDS:
            raise SpecError(f"{source}: kind: {kind!r} is not one of {', '.join(KINDS)}")
        return kind
    if "grid" in raw:
        return "grid"
    if "mechanisms" in raw:
        return "study"
    if "survey" in raw:
        return "survey"
    if any(name in raw for name in ("mle", "em_mr", "sampling")):
        return "accuracy"
    raise SpecError(
        f"{source}: cannot tell the kind of spec: give kind = one of {', '.join(KINDS)}"
    )


def load_spec(path: str | Path, kind: str | None = None) -> dict[str, Any]:
    """Read and validate a spec of any kind (or of ``kind`` only) from a TOML file.

    Returns the validated spec, its tables with defaults filled in, and ``"kind"``.
    """
    import importlib

    path = Path(path)
    if not path.is_file():
        raise SpecError(f"{path}: no such spec file")
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise SpecError(f"{path}: not valid TOML: {exc}") from None
    except UnicodeDecodeError as exc:
        raise SpecError(f"{path}: not a text file: {exc}") from None
    found = spec_kind(raw, str(path))
    if kind is not None and found != kind:
        raise SpecError(f"{path}: is a {found!r} spec, expected a {kind!r} spec")
    module, validator = KINDS[found]
    tables = {key: value for key, value in raw.items() if key != "kind"}
    spec = getattr(importlib.import_module(module), validator)(tables, str(path))
    spec["kind"] = found
    return spec
