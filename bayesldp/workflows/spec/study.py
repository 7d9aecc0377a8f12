"""The study spec (``kind = "study"``): mechanisms x estimators on simulated populations.

Tables: ``[study]`` (name, seed, repeats, n), ``[population]`` (the true frequencies: a
Dirichlet draw, Zipf, binomial, uniform, explicit frequencies or a shipped data set; optional
``labels``, one name per category, which a data set gives by default; or ``kind = "key_value"``:
users holding keys with values in [-1, 1], for PCKV and PCKVPM),
``[[mechanisms]]`` (a registered mechanism, its budget(s) and parameters; the schema comes from
the mechanism registry), ``[estimators]`` and ``[bayes]``.  ``bayesldp run`` runs it with
:func:`bayesldp.workflows.study.run_study`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bayesldp._validation import check_int, check_labels, check_open_unit
from bayesldp.bayes.fit_options import FIT_METHODS
from bayesldp.errors import InvalidInputError, InvalidTypeError
from bayesldp.workflows.spec.schema import (
    NAME_FIELD,
    Field,
    SpecError,
    check_distinct_entries,
    check_table,
    check_tables,
    check_value,
)

POPULATION_KINDS = ("dirichlet", "zipf", "binomial", "uniform", "frequencies", "dataset")


STUDY = {
    "name": NAME_FIELD,
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
    from bayesldp.mechanisms import all_parameters, canonical_name

    schema = {
        "name": Field(str, required=True, convert=canonical_name),
        "epsilon": Field((int, float, list), required=True, items=(int, float), unique=True),
    }
    for param in all_parameters().values():
        types = (int, float) if param.kind is float else param.kind
        schema[param.name] = (
            Field(list, items=types, doc=param.help) if param.many else Field(types, doc=param.help)
        )
    schema["bins"] = Field(int, doc="PCKVPM on a key-value population: value bins (default 16)")
    return schema


ESTIMATORS = {
    "methods": Field(list, default=["oracle"], items=str, unique=True),
}
BAYES = {
    "method": Field(str, default="auto", choices=FIT_METHODS),
    "prior": Field(
        (int, float, list, str),
        items=(int, float),
        doc="a symmetric Dirichlet's concentration, K concentrations, 'adaptive' "
        "(AdaptiveDirichlet: the concentration learnt from the data) or 'smooth' "
        "(SmoothDensity: ordered bins, a smoothness prior on the log-weights); left out: "
        "bayesldp.fit's default ('adaptive' on categories, 'smooth' on numerical mechanisms)",
    ),
    "draws": Field(int, default=1000),
    "chains": Field(int, default=4),
    "hdi_prob": Field((int, float), default=0.9, doc="credible interval mass, in (0, 1)"),
}
#: ``[population]`` keys of ``kind = "key_value"`` (:mod:`bayesldp.workflows.key_value_study`)
KEY_VALUE_POPULATION = {
    "kind": Field(str, required=True, choices=(*POPULATION_KINDS, "key_value")),
    "key_frequencies": Field(
        list, items=(int, float), doc="key_value: K fractions in [0, 1] of users holding each key"
    ),
    "keys": Field(
        str,
        default="zipf",
        choices=("zipf", "dirichlet", "uniform"),
        doc="key_value without key_frequencies: the keys' shares p (zipf: s; dirichlet: alpha)",
    ),
    "pairs": Field((int, float), default=1.0, doc="key_value: key frequencies min(1, pairs * p)"),
    "means": Field(
        list, items=(int, float), doc="key_value: K mean values in [-1, 1] (default: uniform draws)"
    ),
    "value_concentration": Field(
        (int, float), default=2.0, doc="key_value: c of the values 2 Beta(c(1+m)/2, c(1-m)/2) - 1"
    ),
}
#: the study's ``[population]``: the shared table (a survey's too) and the categories' names
STUDY_POPULATION = {
    **POPULATION,
    **KEY_VALUE_POPULATION,
    "labels": Field(
        list,
        items=str,
        doc="K distinct names of the categories 0..K-1, used in every output (estimates.csv, "
        "figures, posteriors); default: a data set's own labels, else the numbers 0..K-1",
    ),
}
TABLES = {
    "study": STUDY,
    "population": STUDY_POPULATION,
    "estimators": ESTIMATORS,
    "bayes": BAYES,
}


def validate_study(raw: Mapping[str, Any], source: str = "spec") -> dict[str, Any]:
    """Check a parsed study spec against its schema; return it with defaults filled in.

    Also records whether a ``[bayes]`` table was given (``"bayes_requested"``).

    Examples
    --------
    >>> from bayesldp.workflows.spec import validate_study
    >>> spec = validate_study({
    ...     "study": {"name": "s", "n": 100}, "population": {"kind": "zipf", "k": 5},
    ...     "mechanisms": [{"name": "GRR", "epsilon": 1.0}]})
    >>> spec["study"]["repeats"], spec["estimators"]
    (1, {'methods': ['oracle']})
    """
    spec: dict[str, Any] = check_tables(
        raw, TABLES, source, required=("study", "population", "mechanisms"), arrays=["mechanisms"]
    )
    entries = raw["mechanisms"]
    if not isinstance(entries, list) or not entries:
        raise SpecError(f"{source}: [[mechanisms]]: expected at least one [[mechanisms]] table")
    schema = _mechanism_schema()
    spec["mechanisms"] = [
        check_table(entry, schema, f"{source}: [[mechanisms]][{i}]")
        for i, entry in enumerate(entries)
    ]
    check_distinct_entries(spec["mechanisms"], f"{source}: [[mechanisms]]")
    _check_values(spec, source)
    spec["bayes_requested"] = "bayes" in raw
    return spec


def _check_prior(prior: Any, where: str, k: int) -> None:
    """What ``fit`` accepts as ``prior`` on ``k`` categories (its own error, named ``where``)."""
    from bayesldp.bayes.prior import as_prior

    try:
        as_prior(prior, k)
    except (InvalidInputError, InvalidTypeError) as exc:
        raise InvalidInputError(f"{where}: {str(exc).removeprefix('prior: ')}") from None


def _check_values(spec: dict[str, Any], source: str) -> None:
    study, population, bayes = spec["study"], spec["population"], spec["bayes"]
    for key, low in (("n", 1), ("repeats", 1), ("seed", 0)):
        check_value(check_int, study[key], f"{source}: [study].{key}", low)
    if not spec["estimators"]["methods"]:
        raise SpecError(f"{source}: [estimators].methods: needs at least one method")
    check_value(check_open_unit, bayes["hdi_prob"], f"{source}: [bayes].hdi_prob")
    for key in ("draws", "chains"):
        check_value(check_int, bayes[key], f"{source}: [bayes].{key}", 1)
    if population["kind"] == "dataset":
        resolve_dataset(population, source)
    if population["k"] is None:
        raise SpecError(f"{source}: [population].k: missing (required)")
    check_value(check_int, population["k"], f"{source}: [population].k", 2)
    check_population_values(population, f"{source}: [population]")
    key_value = population["kind"] == "key_value"
    if bayes["prior"] is not None and not key_value:
        check_value(_check_prior, bayes["prior"], f"{source}: [bayes].prior", population["k"])
    _resolve_labels(population, source)
    if key_value:
        _check_key_values(population, source)
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
        where = f"{source}: [[mechanisms]][{i}]"
        _check_fits(mech["name"], population["kind"], where)
        built = _check_mechanism(mech, population["k"], eps[0], where, key_value)
        if key_value and bayes["prior"] is not None:
            check_value(_check_prior, bayes["prior"], f"{source}: [bayes].prior", built.k)


def _check_fits(name: str, kind: str, where: str) -> None:
    """A key-value mechanism needs a key-value population, and only it takes one."""
    from bayesldp.workflows.key_value_study import KEY_VALUE_MECHANISMS, takes_key_values

    if takes_key_values(name) and kind != "key_value":
        raise SpecError(
            f"{where}: {name} reads key-value data, not [population].kind = {kind!r}: give "
            f"kind = 'key_value'"
        )
    if kind == "key_value" and not takes_key_values(name):
        raise SpecError(
            f"{where}: {name} reads categories, not [population].kind = 'key_value': a "
            f"key-value population takes {' or '.join(KEY_VALUE_MECHANISMS)}"
        )


def _check_key_values(population: dict[str, Any], source: str) -> None:
    """``key_frequencies`` in [0, 1] and ``means`` in [-1, 1], K of each; ``pairs`` and
    ``value_concentration`` positive."""
    k = population["k"]
    for key, low, high in (("key_frequencies", 0.0, 1.0), ("means", -1.0, 1.0)):
        values = population[key]
        if values is None:
            continue
        if len(values) != k:
            raise SpecError(f"{source}: [population].{key}: need {k} values, got {len(values)}")
        if any(not low <= v <= high for v in values):
            raise SpecError(f"{source}: [population].{key}: values must lie in [{low:g}, {high:g}]")
    for key in ("pairs", "value_concentration"):
        if not population[key] > 0:
            raise SpecError(f"{source}: [population].{key}: must be > 0, got {population[key]}")


def _resolve_labels(population: dict[str, Any], source: str) -> None:
    """Check ``[population].labels`` (K distinct strings) or take a data set's own labels.

    Labels given in the spec win over a data set's (to shorten long ones, say).  Without either,
    ``labels`` stays None and outputs name the categories by their numbers.
    """
    if population["labels"] is not None:
        k = population["k"]
        labels = check_value(
            lambda value, where: check_labels(value, k, where),
            population["labels"],
            f"{source}: [population].labels",
        )
        population["labels"] = list(labels)
    elif population["kind"] == "dataset":
        from bayesldp.datasets import load_dataset

        population["labels"] = list(load_dataset(population["dataset"]).labels)


def _check_mechanism(
    mech: dict[str, Any], k: int, epsilon: float, where: str, key_value: bool = False
) -> Any:
    """Build the mechanism once, so a parameter it does not take fails before anything runs."""
    from bayesldp.mechanisms import make_mechanism
    from bayesldp.workflows.key_value_study import build_mechanism

    params = {key: value for key, value in mech.items() if key not in ("name", "epsilon")}
    try:
        if key_value:
            return build_mechanism(mech, k, float(epsilon))
        return make_mechanism(mech["name"], k, float(epsilon), **params)
    except InvalidInputError as exc:
        raise SpecError(f"{where}: {exc}") from None


def check_population_values(population: dict[str, Any], where: str) -> None:
    """The parameter of the population's kind, finite and in its range (``alpha > 0``,
    ``s >= 0``, ``p`` in [0, 1], frequencies >= 0 with a positive sum), so a bad one fails at
    load, not as numpy's error in the middle of a run."""
    import math

    kind = population["kind"]
    value = {"dirichlet": "alpha", "zipf": "s", "binomial": "p"}.get(kind)
    if value is not None:
        x = population[value]
        low_ok = x > 0 if value == "alpha" else x >= 0
        if not (math.isfinite(x) and low_ok and (value != "p" or x <= 1)):
            valid = {"alpha": "finite and > 0", "s": "finite and >= 0", "p": "in [0, 1]"}[value]
            raise SpecError(f"{where}.{value}: must be {valid} for kind = {kind!r}, got {x}")
    freqs = population.get("frequencies")
    if kind == "frequencies" and freqs is not None:
        if not all(math.isfinite(f) and f >= 0 for f in freqs) or not sum(freqs) > 0:
            raise SpecError(f"{where}.frequencies: need finite values >= 0 with a positive sum, "
                            f"got {freqs}")  # fmt: skip


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
