"""The survey spec (``kind = "survey"``): one AdOBEst-LDP survey, adaptive against non-adaptive.

Tables: ``[survey]`` (the survey's settings) and ``[population]`` (the study's population
table).  ``bayesldp run`` (or ``bayesldp survey``, which can also resume) runs it with
:func:`bayesldp.workflows.survey.run_survey`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bayesldp._validation import check_int, check_positive
from bayesldp.errors import InvalidInputError, InvalidTypeError
from bayesldp.workflows.spec.schema import NAME_FIELD, Field, SpecError, check_tables, check_value
from bayesldp.workflows.spec.study import POPULATION, check_population_values, resolve_dataset

SURVEY = {
    "name": NAME_FIELD,
    "seed": Field(int, default=0),
    "n": Field(int, required=True, doc="number of users"),
    "k": Field(int, doc="number of categories (from the data set when kind = 'dataset')"),
    "epsilon": Field((int, float), required=True),
    "utility": Field(str, default="lookahead"),
    "alpha": Field((int, float), doc="semi-adaptive mass threshold"),
    "eps1_fraction": Field((int, float), default=0.8),
    "batch_size": Field(int, default=500),
    "compare_non_adaptive": Field(bool, default=True),
    "stop_width": Field((int, float), doc="stop once every 90% interval is at most this wide"),
    "stop_expected_tv": Field((int, float), doc="stop once the posterior expected TV is this"),
    "stop_cs_width": Field((int, float), doc="stop once every anytime-valid 90% confidence "
                           "sequence is at most this wide"),
}
#: ``bayesldp serve``: the live survey's address, data directory and wording
SERVE = {
    "host": Field(str, default="127.0.0.1", doc="address to listen on"),
    "port": Field(int, default=8000),
    "data_dir": Field(str, default="out/live-survey", doc="the survey's state and reports"),
    "question": Field(str, default="", doc="the question the respondents answer"),
    "labels": Field(list, items=str, doc="one label per category (default: 0..k-1)"),
    "ttl": Field((int, float), default=3600, doc="seconds an assignment stays valid"),
}
TABLES = {"survey": SURVEY, "population": POPULATION, "serve": SERVE}
#: the largest survey a 24 GiB machine holds comfortably: about 64 bytes a user (the simulated
#: users, their reports and the survey's history) and the K x K tables of 16 bytes of RRRR's
#: channel
MAX_USERS = 10**8
MAX_K = 10_000
BYTES_PER_USER = 64


def survey_settings(cfg: dict[str, Any], utility: str) -> dict[str, Any]:
    """The AdaptiveSurvey keyword arguments of a survey spec (one run of it); ``alpha`` only
    for the semi-adaptive rule (the non-adaptive baseline beside it takes none)."""
    return {
        "utility": utility,
        "alpha": cfg["alpha"] if utility == "semi_adaptive" else None,
        "eps1_fraction": float(cfg["eps1_fraction"]),
        "batch_size": cfg["batch_size"],
        "n_expected": cfg["n"],
        "random_seed": cfg["seed"],
    }


def validate_survey(raw: Mapping[str, Any], source: str = "spec") -> dict[str, Any]:
    """Check a parsed survey spec (tables ``[survey]`` and ``[population]``).

    Examples
    --------
    >>> from bayesldp.workflows.spec import validate_survey
    >>> spec = validate_survey({"survey": {"name": "s", "k": 5, "epsilon": 1.0, "n": 100},
    ...                         "population": {"kind": "zipf", "k": 5}})
    >>> spec["survey"]["utility"]
    'lookahead'
    """
    spec = check_tables(raw, TABLES, source, required=())
    survey, population = spec["survey"], spec["population"]
    if population["kind"] == "dataset":
        resolve_dataset(population, source)
    population["k"] = population["k"] or survey["k"]
    if survey["k"] is None:
        survey["k"] = population["k"]
    if survey["k"] is None or survey["k"] < 2:
        raise SpecError(f"{source}: [survey].k: missing or < 2")
    if population["k"] != survey["k"]:
        raise SpecError(f"{source}: [population].k: {population['k']} != [survey].k {survey['k']}")
    check_value(check_int, survey["n"], f"{source}: [survey].n", 1)
    check_population_values(population, f"{source}: [population]")
    check_value(check_int, survey["seed"], f"{source}: [survey].seed", 0)
    _check_sizes(survey, source)
    stops = [key for key in STOPS if survey[key] is not None]
    if len(stops) > 1:
        raise SpecError(f"{source}: [survey]: give one of {', '.join(STOPS)}, not {stops}")
    for key in STOPS:
        if survey[key] is not None:
            check_value(check_positive, survey[key], f"{source}: [survey].{key}")
    _check_settings(survey, source)
    _check_serve(spec["serve"], survey["k"], source)
    return spec


#: the stopping targets a survey spec may give (one at most)
STOPS = ("stop_width", "stop_expected_tv", "stop_cs_width")


def _check_serve(serve: dict[str, Any], k: int, source: str) -> None:
    """The ``[serve]`` table: a port in 1..65535, one label per category, a positive ttl."""
    if not 0 < serve["port"] < 65536:
        raise SpecError(f"{source}: [serve].port: 1..65535, got {serve['port']}")
    if serve["labels"] is not None and len(serve["labels"]) != k:
        raise SpecError(f"{source}: [serve].labels: {k} labels (one per category), got "
                        f"{len(serve['labels'])}")  # fmt: skip
    check_value(check_positive, serve["ttl"], f"{source}: [serve].ttl")


def _check_sizes(survey: dict[str, Any], source: str) -> None:
    """Refuse, before anything is allocated, a survey larger than :data:`MAX_USERS` users or
    :data:`MAX_K` categories, saying how much memory it would need."""
    n, k = survey["n"], survey["k"]
    if n > MAX_USERS:
        raise SpecError(
            f"{source}: [survey].n: {n:,} users need about {n * BYTES_PER_USER / 2**30:,.3g} GiB "
            f"of memory (about {BYTES_PER_USER} bytes a user: the simulated users, their reports "
            f"and the survey's history); at most {MAX_USERS:,}"
        )
    if k > MAX_K:
        raise SpecError(
            f"{source}: [survey].k: {k:,} categories need about {16 * k * k / 2**30:,.3g} GiB of "
            f"memory (RRRR's K x K channel, and a K-dimensional posterior refitted along the "
            f"survey); at most {MAX_K:,}"
        )


def _check_settings(survey: dict[str, Any], source: str) -> None:
    """Check the settings the survey itself takes (epsilon, utility, alpha, ...), as
    :class:`~bayesldp.adaptive.AdaptiveSurvey` would, so that a run fails at load, before it
    writes anything."""
    import inspect

    from bayesldp.adaptive import AdaptiveSurvey
    from bayesldp.adaptive.config import SurveyConfig

    defaults = {name: p.default for name, p in inspect.signature(AdaptiveSurvey).parameters.items()
                if p.kind is p.KEYWORD_ONLY and name != "checkpoint"}  # fmt: skip
    # alpha as given: it is refused with any rule but the semi-adaptive one
    settings = defaults | survey_settings(survey, survey["utility"]) | {"alpha": survey["alpha"]}
    try:
        SurveyConfig.create(k=survey["k"], epsilon=survey["epsilon"], **settings)
    except (InvalidInputError, InvalidTypeError) as exc:
        message = str(exc)
        key = message.split(":", 1)[0]
        where = f"[survey].{message}" if key in SURVEY else f"[survey]: {message}"
        raise SpecError(f"{source}: {where}") from None
