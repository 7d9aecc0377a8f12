"""The survey spec (``kind = "survey"``): one AdOBEst-LDP survey, adaptive against non-adaptive.

Tables: ``[survey]`` (the survey's settings) and ``[population]`` (the study's population
table).  ``bayesldp run`` (or ``bayesldp survey``, which can also resume) runs it with
:func:`bayesldp.workflows.survey.run_survey`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bayesldp._validation import check_int
from bayesldp.workflows.spec.schema import NAME_FIELD, Field, SpecError, check_tables, check_value
from bayesldp.workflows.spec.study import POPULATION, resolve_dataset

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
}
TABLES = {"survey": SURVEY, "population": POPULATION}


def validate_survey(raw: Mapping[str, Any], source: str = "spec") -> dict[str, Any]:
    """Check a parsed survey spec (tables ``[survey]`` and ``[population]``)."""
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
    if survey["stop_width"] is not None and survey["stop_expected_tv"] is not None:
        raise SpecError(f"{source}: [survey]: give stop_width or stop_expected_tv, not both")
    for key in ("stop_width", "stop_expected_tv"):
        if survey[key] is not None and not survey[key] > 0:
            raise SpecError(f"{source}: [survey].{key}: must be > 0, got {survey[key]}")
    return spec
