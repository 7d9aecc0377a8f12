"""What a command prints: one table, for people (markdown) or for programs (CSV, JSON).

``bayesldp estimate`` and ``bayesldp recommend`` build a :class:`Table` and print it with
:func:`print_table` in the format of their ``--output`` option, so the human table and the
machine-readable forms hold the same rows: ``csv`` is the rows alone (full precision, one header
line), ``json`` one object with the command's settings (``meta``), the rows and the notes.
"""

from __future__ import annotations

import csv
import json
import sys
from dataclasses import dataclass, field
from typing import Any

#: the values of a command's ``--output`` option
OUTPUTS = ("table", "csv", "json")
OUTPUT_HELP = (
    "what is printed on stdout: 'table' (for people, the default), 'csv' (the rows, one header "
    "line) or 'json' (settings, rows and notes in one object)"
)


@dataclass
class Table:
    """Rows of one result with what people need to read them.

    ``columns`` are the machine names (CSV header, JSON keys), ``headers`` the human ones (the
    same by default) and ``formats`` the format spec of a column's numbers in the human table.
    ``title`` lines go above the human table, ``notes`` below it (and into JSON); ``meta`` is
    the command's settings, printed in JSON only (the title says them to people).
    """

    columns: list[str]
    rows: list[list[Any]]
    title: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)
    headers: list[str] | None = None
    formats: dict[str, str] = field(default_factory=dict)


def print_table(table: Table, output: str = "table") -> None:
    """Print ``table`` on stdout as ``output`` (one of :data:`OUTPUTS`)."""
    if output == "csv":
        writer = csv.writer(sys.stdout, lineterminator="\n")
        writer.writerow(table.columns)
        writer.writerows(table.rows)
    elif output == "json":
        rows = [dict(zip(table.columns, row, strict=True)) for row in table.rows]
        print(json.dumps({**table.meta, "rows": rows, "notes": table.notes}, indent=2))
    else:
        print("\n".join(markdown_lines(table)))


def markdown_lines(table: Table) -> list[str]:
    """The human form: title, a markdown table (numbers right-aligned), notes."""
    headers = table.headers or table.columns
    numeric = [all(_is_number(row[i]) for row in table.rows) for i in range(len(headers))]
    lines = [*table.title, ""] if table.title else []
    lines.append("| " + " | ".join(headers) + " |")
    lines.append("|" + "|".join("---:" if num else "---" for num in numeric) + "|")
    for row in table.rows:
        cells = [
            _cell(value, table.formats.get(col, ""))
            for col, value in zip(table.columns, row, strict=True)
        ]
        lines.append("| " + " | ".join(cells) + " |")
    if table.notes:
        lines += ["", *table.notes]
    return lines


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _cell(value: Any, spec: str) -> str:
    return format(value, spec) if spec and _is_number(value) else str(value)
