"""The grid spec (``kind = "grid"``): the AdOBEst-LDP experiment grid.

AdOBEst-LDP: Aydın and Yıldırım, "Bayesian Frequency Estimation Under Local Differential Privacy
With an Adaptive Randomized Response Mechanism", ACM TKDD 2025.

Tables::

    [grid]      name, seed, n | n_per_category, repeats, k, epsilon, rho, eps1_fraction,
                utilities, semi_adaptive_alpha, non_adaptive
    [survey]    prior, batch_size, sgld_steps_per_user, minibatch, final_steps, burn_in
    [paper]     n | n_per_category, repeats    (used by run_grid(..., paper=True))

The number of users per survey is either the same for every ``K`` (``n``) or proportional to
it (``n_per_category``: ``n = n_per_category * K``, as in the authors' reference code,
``T = 500*K`` in ``experiments_for_SGDL.m``); a table gives exactly one of the two.  ``[paper]``
defaults to the reference code's size: ``n_per_category = 500`` (5,000 users for K = 10,
10,000 for K = 20) and 50 repeats.  :func:`users_per_survey` turns a table into the number of
users for one ``K``.

``bayesldp run`` runs it with :func:`bayesldp.workflows.grid.run_grid`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bayesldp._validation import check_int, check_positive, check_probability
from bayesldp.adaptive.utilities import UTILITIES
from bayesldp.workflows.spec.schema import (
    NAME_FIELD,
    Field,
    SpecError,
    check_each,
    check_tables,
    check_value,
)

GRID = {
    "name": NAME_FIELD,
    "description": Field(str, default=""),
    "seed": Field(int, default=0, doc="master seed"),
    "n": Field(int, doc="users per survey, the same for every K (or n_per_category)"),
    "n_per_category": Field(int, doc="users per survey = n_per_category * K (or n)"),
    "repeats": Field(int, default=3, doc="independent populations per setting"),
    "k": Field(list, required=True, items=int, doc="domain sizes", unique=True),
    "epsilon": Field(list, required=True, items=(int, float), doc="privacy levels", unique=True),
    "rho": Field(
        list, required=True, items=(int, float), doc="Dirichlet concentrations", unique=True
    ),
    "eps1_fraction": Field(list, default=[0.8, 0.9], items=(int, float), unique=True),
    "utilities": Field(
        list, default=list(UTILITIES), items=str, choices=tuple(UTILITIES), unique=True
    ),
    "semi_adaptive_alpha": Field(
        list, default=[0.95, 0.9, 0.8, 0.6, 0.2], items=(int, float), unique=True
    ),
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
    "n": Field(int, doc="users per survey (default: n_per_category = 500, i.e. 500 K)"),
    "n_per_category": Field(int, doc="users per survey = n_per_category * K"),
    "repeats": Field(int, default=50),
}
#: the size of the authors' reference code (experiments_for_SGDL.m: T = 500*K, 50 runs)
PAPER_N_PER_CATEGORY = 500
TABLES = {"grid": GRID, "survey": SURVEY, "paper": PAPER}


def validate_grid(raw: Mapping[str, Any], source: str = "spec") -> dict[str, Any]:
    """Check a parsed grid spec; return it with defaults filled in (one-line SpecErrors).

    Examples
    --------
    >>> from bayesldp.workflows.spec import validate_grid
    >>> spec = validate_grid({"grid": {"name": "g", "n": 100, "k": [5], "epsilon": [1.0],
    ...                                "rho": [1.0]}})
    >>> sorted(spec)
    ['grid', 'paper', 'survey']
    """
    spec = check_tables(raw, TABLES, source, required=("grid",))
    grid, survey = spec["grid"], spec["survey"]
    _check_size(spec["grid"], f"{source}: [grid]", required=True)
    if _check_size(spec["paper"], f"{source}: [paper]", required=False) is None:
        spec["paper"]["n_per_category"] = PAPER_N_PER_CATEGORY
    for table in ("grid", "paper"):
        check_value(check_int, spec[table]["repeats"], f"{source}: [{table}].repeats", 1)
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


def _check_size(table: dict[str, Any], where: str, required: bool) -> str | None:
    """Check that ``table`` gives at most one of ``n``, ``n_per_category`` (exactly one when
    ``required``), each an integer >= 1; return the key given or None."""
    given = [key for key in ("n", "n_per_category") if table[key] is not None]
    if len(given) > 1:
        raise SpecError(
            f"{where}: give either n (users per survey) or n_per_category (n = "
            f"n_per_category * K), not both (got n = {table['n']}, n_per_category = "
            f"{table['n_per_category']})"
        )
    if not given:
        if required:
            raise SpecError(
                f"{where}.n: missing (required: n, users per survey, or n_per_category, "
                "n = n_per_category * K)"
            )
        return None
    check_value(check_int, table[given[0]], f"{where}.{given[0]}", 1)
    return given[0]


def users_per_survey(table: Mapping[str, Any], k: int) -> int:
    """Users per survey for domain size ``k`` from a validated ``[grid]`` or ``[paper]`` table:
    ``n``, or ``n_per_category * k`` (the reference code's ``T = 500*K`` with 500)."""
    if table.get("n_per_category") is not None:
        return int(table["n_per_category"]) * int(k)
    return int(table["n"])
