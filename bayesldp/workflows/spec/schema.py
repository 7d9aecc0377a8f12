"""The schema language of spec files: typed fields, tables, and one-line errors naming the key.

A schema is a mapping ``key -> Field`` for one TOML table.  :func:`check_table` checks a table
against it (unknown and missing keys, types, allowed values) and fills in the defaults;
:func:`check_tables` does the same for the tables of a whole file.  Value checks (``n >= 1``,
``epsilon > 0``, ...) use the package's argument checks (:mod:`bayesldp._validation`) through
:func:`check_value` and :func:`check_each`, which turn their errors into a :class:`SpecError`
at the key's path, e.g. ``models/x.toml: [grid].k[0]: must be >= 2, got 1``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from bayesldp.errors import InvalidInputError, InvalidTypeError


class SpecError(InvalidInputError):
    """A study specification is malformed; the message names the file and the key path.

    Examples
    --------
    Every problem of a spec is one line naming the key:

    >>> from bayesldp.workflows.spec import validate_study
    >>> validate_study({"study": {"name": "s", "n": 0}, "population": {"kind": "zipf", "k": 5},
    ...                 "mechanisms": [{"name": "GRR", "epsilon": 1.0}]})
    Traceback (most recent call last):
        ...
    bayesldp.workflows.spec.schema.SpecError: spec: [study].n: must be >= 1, got 0
    """


@dataclass(frozen=True)
class Field:
    """One key of a table: its type(s), whether it is required, its default and allowed values.

    For a list, ``items`` is the type of its elements and ``choices`` the values each element
    may take; ``unique`` refuses a value listed twice (a list whose values are each one run of a
    grid: a repeated one would be reported as two runs).

    Examples
    --------
    A table's schema is a dict of fields; :func:`check_table` reads it:

    >>> from bayesldp.workflows.spec import Field, check_table
    >>> schema = {"n": Field(int, required=True), "seed": Field(int, default=0)}
    >>> check_table({"n": 3}, schema, "study")
    {'n': 3, 'seed': 0}
    """

    types: type | tuple[type, ...]
    required: bool = False
    default: Any = None
    choices: tuple[Any, ...] | None = None
    items: type | tuple[type, ...] | None = None
    doc: str = ""
    #: applied to the value (to each element of a list) before ``choices``, e.g.
    #: :func:`bayesldp.mechanisms.canonical_name`, so "grr" and "HR" read as "GRR" and
    #: "HadamardResponse"; its package errors become a SpecError at the key
    convert: Callable[[Any], Any] | None = None
    unique: bool = False


Schema = Mapping[str, Field]

_TYPE_NAMES = {
    int: "an integer",
    float: "a number",
    str: "a string",
    bool: "true/false",
    list: "a list",
}


def output_name(value: str) -> str:
    """A spec's ``name``, checked: it is the default output directory ``out/<name>``, so it
    must be one plain path component (not empty, not ``.`` or ``..``, no ``/`` or ``\\``, no
    control character).  Such a name is refused, not rewritten, so outputs never leave the
    directory the user named (or ``out/``)."""
    if not value.strip():
        raise InvalidInputError(
            "must not be empty: it names the output directory out/<name> (refused, not "
            "renamed); give a plain name such as 'my_study'"
        )
    bad = (
        value.strip() in (".", "..")
        or any(sep in value for sep in ("/", "\\"))
        or any(ord(ch) < 32 or ord(ch) == 127 for ch in value)
    )
    if bad:
        raise InvalidInputError(
            f"{value!r} is not a plain name: it names the output directory out/<name>, so it "
            "may not be '.' or '..' or hold '/', '\\' or control characters (refused, not "
            "renamed); give a plain name such as 'my_study', and --out to write elsewhere"
        )
    return value


#: the ``name`` field of a spec's main table: the default output directory ``out/<name>``
NAME_FIELD = Field(str, required=True, doc="name used in the report and as out/<name>",
                   convert=output_name)  # fmt: skip


def _type_name(types: type | tuple[type, ...]) -> str:
    types = types if isinstance(types, tuple) else (types,)
    return " or ".join(_TYPE_NAMES.get(t, t.__name__) for t in types)


def _is(value: Any, types: type | tuple[type, ...]) -> bool:
    types = types if isinstance(types, tuple) else (types,)
    if isinstance(value, bool):
        return bool in types
    return isinstance(value, types)


def _check_choice(value: Any, choices: tuple[Any, ...], where: str) -> None:
    if value not in choices:
        raise SpecError(f"{where}: {value!r} is not one of {', '.join(map(str, choices))}")


def _converted(value: Any, field: Field, where: str) -> Any:
    if field.convert is None:
        return value
    try:
        return field.convert(value)
    except (InvalidInputError, InvalidTypeError) as exc:
        raise SpecError(f"{where}: {exc}") from None


def _check_field(value: Any, field: Field, where: str) -> Any:
    """The value, checked against ``field`` and converted by ``field.convert``."""
    if not _is(value, field.types):
        hint = ""
        if isinstance(value, float) and value.is_integer() and _is(1, field.types):
            hint = f" (TOML reads {value:g} as a number with a fraction: write {int(value):_})"
        raise SpecError(f"{where}: expected {_type_name(field.types)}, got {value!r}{hint}")
    if not isinstance(value, list):
        value = _converted(value, field, where)
        if field.choices is not None:
            _check_choice(value, field.choices, where)
        return value
    out = []
    for i, item in enumerate(value):
        if field.items is not None and not _is(item, field.items):
            raise SpecError(f"{where}[{i}]: expected {_type_name(field.items)}, got {item!r}")
        out.append(_converted(item, field, f"{where}[{i}]"))
        if field.choices is not None:
            _check_choice(out[-1], field.choices, f"{where}[{i}]")
        if field.unique and out[-1] in out[:-1]:
            raise SpecError(
                f"{where}: {item!r} is listed twice (items {out.index(out[-1])} and {i}); each "
                "value is one run: list it once"
            )
    return out


def check_table(table: Any, schema: Schema, path: str) -> dict[str, Any]:
    """Check one TOML table against its schema; return it with defaults filled in.

    Examples
    --------
    >>> from bayesldp.workflows.spec import Field, check_table
    >>> schema = {"n": Field(int, required=True), "seed": Field(int, default=0)}
    >>> check_table({"n": 3}, schema, "study")
    {'n': 3, 'seed': 0}
    >>> check_table({}, schema, "study")
    Traceback (most recent call last):
        ...
    bayesldp.workflows.spec.schema.SpecError: study.n: missing (required)
    """
    if not isinstance(table, Mapping):
        raise SpecError(f"{path}: expected a table, got {type(table).__name__}")
    unknown = sorted(set(table) - set(schema))
    if unknown:
        raise SpecError(f"{path}.{unknown[0]}: unknown key (valid keys: {', '.join(schema)})")
    out: dict[str, Any] = {}
    for key, field in schema.items():
        if key not in table:
            if field.required:
                raise SpecError(f"{path}.{key}: missing (required)")
            out[key] = field.default
            continue
        out[key] = _check_field(table[key], field, f"{path}.{key}")
    return out


def check_tables(
    raw: Mapping[str, Any],
    schemas: Mapping[str, Schema],
    source: str,
    required: Iterable[str],
    arrays: Iterable[str] = (),
) -> dict[str, dict[str, Any]]:
    """Check a file's tables: no unknown table, the ``required`` ones present, each valid.

    ``arrays`` names arrays of tables (``[[mechanisms]]``) the file may hold, checked by the
    caller.  Returns every table of ``schemas`` with defaults filled in (an absent one from
    ``{}``).
    """
    valid = [*schemas, *arrays]
    unknown = sorted(set(raw) - set(valid))
    if unknown:
        raise SpecError(f"{source}: [{unknown[0]}]: unknown table (valid: {', '.join(valid)})")
    for name in required:
        if name not in raw:
            raise SpecError(f"{source}: [{name}]: missing (required)")
    return {
        name: check_table(raw.get(name, {}), schema, f"{source}: [{name}]")
        for name, schema in schemas.items()
    }


def check_distinct_entries(entries: list[dict[str, Any]], where: str) -> None:
    """Refuse two entries of an array of tables (``[[mechanisms]]``, ...) that run the same
    thing at the same epsilon: the same keys but ``epsilon``, and an epsilon in common.

    ``where`` names the array (``"models/x.toml: [[mechanisms]]"``).
    """
    import json

    seen: dict[tuple[str, float], int] = {}
    for j, entry in enumerate(entries):
        rest = json.dumps({k: v for k, v in entry.items() if k != "epsilon"}, sort_keys=True,
                          default=str)  # fmt: skip
        eps = entry["epsilon"] if isinstance(entry["epsilon"], list) else [entry["epsilon"]]
        for e in eps:
            i = seen.setdefault((rest, float(e)), j)
            if i != j:
                name = entry.get("name", "")
                raise SpecError(
                    f"{where}[{j}]: repeats {where.rsplit(': ', 1)[-1]}[{i}] ({name} at "
                    f"epsilon {e:g}); each entry and epsilon is one run: list it once"
                )


def check_value(
    check: Callable[..., Any], value: Any, where: str, *args: Any, **kwargs: Any
) -> Any:
    """Run an argument check of :mod:`bayesldp._validation` on a spec value named ``where``.

    Its error (``"<where>: must be >= 1, got 0"``) is raised as a :class:`SpecError`.
    """
    try:
        return check(value, where, *args, **kwargs)
    except (InvalidInputError, InvalidTypeError) as exc:
        raise SpecError(str(exc)) from None


def check_sizes(parts: Mapping[str, tuple[int, float, str, str]]) -> None:
    """Refuse a spec whose run would need more than half of this machine's memory, before it
    runs.  ``parts`` maps a key's path (``"spec: [population].k"``) to ``(value, bytes each,
    unit, what each holds)``; the error names the key of the largest part, its value, what it
    needs and the most this machine holds of it, the other parts as they are."""
    from bayesldp._validation import machine_memory

    total = machine_memory()
    needs = {where: part[0] * part[1] for where, part in parts.items()}
    if sum(needs.values()) <= 0.5 * total:
        return
    where = max(needs, key=needs.__getitem__)
    value, per, unit, what = parts[where]
    room = 0.5 * total - (sum(needs.values()) - needs[where])
    if room < per:  # the other parts fill the memory already: the most on its own
        room = 0.5 * total
    raise SpecError(
        f"{where}: {value:,} {unit} need about {needs[where] / 2**30:,.3g} GiB of memory "
        f"({per:,.0f} bytes each: {what}), more than half of this machine's "
        f"{total / 2**30:,.3g} GiB; at most {max(0, int(room / per)):,} {unit}"
    )


def check_nonempty(values: list[Any], where: str) -> None:
    """A list that needs at least one value."""
    if not values:
        raise SpecError(f"{where}: needs at least one value")


def check_each(
    check: Callable[..., Any], values: list[Any], where: str, *args: Any, empty_ok: bool = False
) -> None:
    """:func:`check_value` on every element ``where[i]`` of a list (which needs one unless
    ``empty_ok``)."""
    if not empty_ok:
        check_nonempty(values, where)
    for i, value in enumerate(values):
        check_value(check, value, f"{where}[{i}]", *args)
