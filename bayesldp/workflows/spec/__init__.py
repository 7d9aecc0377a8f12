"""Reading and validating specifications (``models/*.toml``): the one loader.

A spec is a TOML file of one *kind*, each with one schema, declared in one module:

============= ================================================== ==============================
kind          what ``bayesldp run`` does with it                 schema and validator
============= ================================================== ==============================
study         mechanisms x estimators on simulated populations   :mod:`~.spec.study`
survey        one AdOBEst-LDP survey, adaptive vs non-adaptive   :mod:`~.spec.survey`
grid          the AdOBEst-LDP grid (Aydın and Yıldırım 2025)     :mod:`~.spec.grid`
accuracy      the accuracy experiments of three papers           :mod:`~.spec.accuracy`
rounds        a population followed over rounds (longitudinal)   :mod:`~.spec.rounds`
attributes    records of several attributes (SPL, SMP, RS+FD)    :mod:`~.spec.attributes`
heavy_hitters discovery of frequent items (PEM, SFP, TreeHist)   :mod:`~.spec.heavy_hitters`
============= ================================================== ==============================

The kind is the top-level key ``kind = "..."`` (every shipped spec declares it); a file without
it is recognised by its tables (``[grid]``, ``[drift]``, ``[[attributes]]``, ``[[mechanisms]]``,
``[survey]``, or ``[mle]`` / ``[em_mr]`` / ``[sampling]``), so older files keep working.  The
schema language (fields, tables, value checks) is :mod:`bayesldp.workflows.spec.schema`.  Every
problem is reported before anything runs, as one line naming the key's path in the file, e.g.
``models/x.toml: [population].k: expected an integer, got "ten"``.
"""

from __future__ import annotations

import tomllib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from bayesldp.workflows.spec.accuracy import validate_accuracy
from bayesldp.workflows.spec.attributes import validate_attributes
from bayesldp.workflows.spec.grid import validate_grid
from bayesldp.workflows.spec.heavy_hitters import validate_heavy_hitters
from bayesldp.workflows.spec.rounds import validate_rounds
from bayesldp.workflows.spec.schema import Field, SpecError, check_table
from bayesldp.workflows.spec.study import validate_study
from bayesldp.workflows.spec.survey import validate_survey

__all__ = [
    "KINDS",
    "Field",
    "SpecError",
    "check_table",
    "load_spec",
    "spec_kind",
    "validate_accuracy",
    "validate_attributes",
    "validate_grid",
    "validate_heavy_hitters",
    "validate_rounds",
    "validate_study",
    "validate_survey",
]

#: spec kind -> its validator ``(parsed tables, source) -> validated spec``
KINDS: dict[str, Callable[[Mapping[str, Any], str], dict[str, Any]]] = {
    "study": validate_study,
    "survey": validate_survey,
    "grid": validate_grid,
    "accuracy": validate_accuracy,
    "rounds": validate_rounds,
    "attributes": validate_attributes,
    "heavy_hitters": validate_heavy_hitters,
}


def spec_kind(raw: Mapping[str, Any], source: str = "spec") -> str:
    """The kind of a parsed spec: its ``kind`` key, else recognised by its tables.

    Examples
    --------
    Without a ``kind`` key, the tables tell:

    >>> from bayesldp.workflows.spec import spec_kind
    >>> spec_kind({"survey": {}, "population": {}}), spec_kind({"kind": "rounds"})
    ('survey', 'rounds')
    """
    if "kind" in raw:
        kind = raw["kind"]
        if kind not in KINDS:
            raise SpecError(f"{source}: kind: {kind!r} is not one of {', '.join(KINDS)}")
        return kind
    if "grid" in raw:
        return "grid"
    if "drift" in raw:
        return "rounds"
    if "attributes" in raw or "protocols" in raw:
        return "attributes"
    if "mechanisms" in raw:
        return "study"
    if "survey" in raw:
        return "survey"
    if any(name in raw for name in ("mle", "em_mr", "sampling")):
        return "accuracy"
    raise SpecError(
        f"{source}: cannot tell the kind of spec: give kind = one of {', '.join(KINDS)}"
    )


def _a(kind: str) -> str:
    return "an" if kind[0] in "aeiou" else "a"


def load_spec(path: str | Path, kind: str | None = None) -> dict[str, Any]:
    """Read and validate a spec of any kind (or of ``kind`` only) from a TOML file.

    Returns the validated spec: its tables with defaults filled in, and ``"kind"``.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> from bayesldp.workflows.spec import load_spec
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "study.toml"
    >>> _ = path.write_text('''
    ... [study]
    ... name = "small"
    ... n = 100
    ... [population]
    ... kind = "zipf"
    ... k = 5
    ... [[mechanisms]]
    ... name = "GRR"
    ... epsilon = 1.0
    ... ''')
    >>> spec = load_spec(path)
    >>> spec["kind"], spec["study"]["n"], spec["mechanisms"][0]["name"]
    ('study', 100, 'GRR')
    """
    path = Path(path)
    if not path.is_file():
        raise SpecError(f"{path}: no such spec file")
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8-sig"))  # a leading BOM is dropped
    except tomllib.TOMLDecodeError as exc:
        raise SpecError(f"{path}: not valid TOML: {exc}") from None
    except UnicodeDecodeError as exc:
        raise SpecError(f"{path}: not a text file: {exc}") from None
    except OSError as exc:
        raise SpecError(f"{path}: cannot read the spec: {exc.strerror or exc}") from None
    found = spec_kind(raw, str(path))
    if kind is not None and found != kind:
        raise SpecError(f"{path}: is {_a(found)} {found!r} spec, expected {_a(kind)} {kind!r} spec")
    tables = {key: value for key, value in raw.items() if key != "kind"}
    spec = KINDS[found](tables, str(path))
    spec["kind"] = found
    return spec
