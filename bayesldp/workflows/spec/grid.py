"""The grid spec (``kind = "grid"``): the AdOBEst-LDP experiment grid (seed 004).

Tables::

    [grid]      name, seed, n, repeats, k, epsilon, rho, eps1_fraction, utilities,
                semi_adaptive_alpha, non_adaptive
    [survey]    prior, batch_size, sgld_steps_per_user, minibatch, final_steps, burn_in
    [paper]     n, repeats    (used by run_grid(..., paper=True): the paper's 500,000 x 50)

``bayesldp run`` runs it with :func:`bayesldp.workflows.grid.run_grid`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bayesldp._validation import check_int, check_positive, check_probability
from bayesldp.adaptive.utilities import UTILITIES
from bayesldp.workflows.spec.schema import (
    Field,
    SpecError,
    check_each,
    check_tables,
    check_value,
)

GRID = {
    "name": Field(str, required=True, doc="name used in the report"),
    "description": Field(str, default=""),
    "seed": Field(int, default=0, doc="master seed"),
    "n": Field(int, required=True, doc="users per survey"),
    "repeats": Field(int, default=3, doc="independent populations per setting"),
    "k": Field(list, required=True, items=int, doc="domain sizes"),
    "epsilon": Field(list, required=True, items=(int, float), doc="privacy levels"),
    "rho": Field(list, required=True, items=(int, float), doc="Dirichlet concentrations"),
    "eps1_fraction": Field(list, default=[0.8, 0.9], items=(int, float)),
    "utilities": Field(list, default=list(UTILITIES), items=str, choices=tuple(UTILITIES)),
    "semi_adaptive_alpha": Field(list, default=[0.95, 0.9, 0.8, 0.6, 0.2], items=(int, float)),
    "non_adaptive": Field(bool, default=True),
}
SURVEY = {
    "prior": Field((int, float), default=1.0, doc="symmetric Dirichlet prior of the SGLD"),
    "batch_size": Field(int, default=1),
    "sgld_steps_per_user": Field(int, default=20),
    "minibatch": Field(int, default=50),
    "final_steps": Field(int, default=2000),
    "burn_in": Field(int, default=1000),
}
PAPER = {
    "n": Field(int, default=500_000),
    "repeats": Field(int, default=50),
}
TABLES = {"grid": GRID, "survey": SURVEY, "paper": PAPER}


def validate_grid(raw: Mapping[str, Any], source: str = "spec") -> dict[str, Any]:
    """Check a parsed grid spec; return it with defaults filled in (one-line SpecErrors)."""
    spec = check_tables(raw, TABLES, source, required=("grid",))
    grid, survey = spec["grid"], spec["survey"]
    for table, key in (("grid", "n"), ("grid", "repeats"), ("paper", "n"), ("paper", "repeats")):
        check_value(check_int, spec[table][key], f"{source}: [{table}].{key}", 1)
    check_value(check_int, grid["seed"], f"{source}: [grid].seed", 0)
    check_each(check_int, grid["k"], f"{source}: [grid].k", 2)
    for key in ("epsilon", "rho"):
        check_each(check_positive, grid[key], f"{source}: [grid].{key}")
    for key in ("eps1_fraction", "semi_adaptive_alpha"):
        check_each(check_probability, grid[key], f"{source}: [grid].{key}", empty_ok=True)
    if not ((grid["utilities"] and grid["eps1_fraction"]) or grid["semi_adaptive_alpha"]):
        if not grid["non_adaptive"]:
            raise SpecError(
                f"{source}: [grid]: no method to run "
                "(utilities, semi_adaptive_alpha and non_adaptive are all empty)"
            )
    check_value(check_positive, survey["prior"], f"{source}: [survey].prior")
    for key in ("batch_size", "sgld_steps_per_user", "minibatch", "final_steps"):
        check_value(check_int, survey[key], f"{source}: [survey].{key}", 1)
    if not 0 <= survey["burn_in"] < survey["final_steps"]:
        raise SpecError(
            f"{source}: [survey].burn_in: must lie in 0..final_steps-1 = "
            f"{survey['final_steps'] - 1}, got {survey['burn_in']}"
        )
    return spec
