"""Report files of several attributes (SPL, SMP, RS+FD): one tally per attribute.

One row per (user, attribute) reported: columns ``user`` (any id), ``attribute`` (``0..d-1``)
and ``report``: the attribute's GRR report (an integer in ``0..k_j - 1``) or, with a unary base
(SUE, OUE), its ``k_j`` bits as a string of 0s and 1s, bit 0 first (``0110``: categories 1 and
2).  SPL and RS+FD users report every attribute (``d`` rows each), SMP users one.  Domain sizes
come from the command line (``--k 3,4,2``), the protocol from ``--mechanism SPL|SMP|RSFD`` with
``--base``, ``--fake`` and RS+FD's ``--budget`` (``record``, the default: ``--epsilon`` bounds the
whole record; ``paper``: the paper's nominal epsilon, for reports perturbed that way).
:func:`read_attributes` checks the file and tallies each attribute with its exact channel
(:attr:`~bayesldp.mechanisms.multidimensional.Multidimensional.marginals`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from bayesldp.errors import InvalidInputError
from bayesldp.tally import Tally
from bayesldp.workflows.report_files import read_table

#: the columns of a file of attributes
ATTRIBUTE_COLUMNS = ("user", "attribute", "report")


def protocol_names() -> dict[str, str]:
    """Names of the multidimensional protocols, lower case -> canonical (``RS+FD`` too)."""
    from bayesldp.mechanisms.multidimensional.protocols import PROTOCOLS

    names = {name.lower(): name for name in PROTOCOLS}
    return names | {"rs+fd": "RSFD"}


def make_protocol(name: str, ks: Any, epsilon: float, base: str | None, fake: str | None,
                  budget: str | None = None):  # fmt: skip
    """The protocol ``name`` (SPL, SMP, RSFD) over domain sizes ``ks``; ``budget`` RS+FD's
    (:class:`~bayesldp.mechanisms.multidimensional.RSFD`, default "record")."""
    from bayesldp.mechanisms.multidimensional.protocols import PROTOCOLS

    cls = PROTOCOLS[protocol_names()[name.lower()]]
    options: dict[str, Any] = {} if base is None else {"base": base}
    if fake is not None:
        if cls.__name__ != "RSFD":
            raise InvalidInputError(f"--fake: only RSFD reports fake data, not {cls.__name__}")
        options["fake"] = fake
    if budget is not None:
        if cls.__name__ != "RSFD":
            raise InvalidInputError(f"--budget: only RSFD has a choice of budget ({cls.__name__} "
                                    "spends at most --epsilon on the whole record)")  # fmt: skip
        options["budget"] = budget
    return cls(ks, epsilon, **options)


def read_attributes(protocol: Any, path: str | Path) -> list[Tally]:
    """One tally per attribute of a report file of ``protocol`` (module docstring)."""
    text = ("report",) if protocol.base != "GRR" else ()
    return attributes_from_frame(protocol, read_table(path, text=text), path)


def attributes_from_frame(protocol: Any, frame: Any, source: Any) -> list[Tally]:
    """:func:`read_attributes` of a table already read (``source`` names it in errors)."""
    from bayesldp.mechanisms.base import int_columns

    missing = [c for c in ATTRIBUTE_COLUMNS if c not in frame.columns]
    if missing:
        raise InvalidInputError(
            f"reports: {source} lacks column(s) {', '.join(missing)}: a file of attributes has "
            f"columns {', '.join(ATTRIBUTE_COLUMNS)}; it has {', '.join(map(str, frame.columns))}"
        )
    (attribute,) = int_columns(frame, ["attribute"], source)
    d = protocol.d
    domain = f"not one of the {d} attributes 0..{d - 1} (--k gives one domain size per attribute)"
    _check_codes(attribute, d, np.arange(attribute.size), f"{source}: attribute", domain)
    users = frame["user"].to_numpy()
    _check_users(protocol, frame, users, attribute, source)
    tallies = []
    for j, (k, mech) in enumerate(zip(protocol.ks, protocol.marginals, strict=True)):
        rows = np.flatnonzero(attribute == j)
        if rows.size == 0:
            raise InvalidInputError(f"reports: {source}: attribute {j} has no reports")
        where = f"{source} (attribute {j}, k = {k})"
        values = frame["report"].to_numpy()[rows]
        reports = _grr_reports(values, k, rows, where) if protocol.base == "GRR" else (
            _bit_reports(values, k, rows, where))  # fmt: skip
        tallies.append(mech.tally(reports))
    return tallies


def _check_users(protocol: Any, frame: Any, users: np.ndarray, attribute: np.ndarray,
                 source: Any) -> None:  # fmt: skip
    """A user reports an attribute at most once; SMP users one attribute, the others all."""
    twice = frame.duplicated(["user", "attribute"], keep=False).to_numpy()
    if twice.any():
        row = int(np.flatnonzero(twice)[0])
        raise InvalidInputError(
            f"reports: {source}: user {users[row]} reported attribute {attribute[row]} more "
            f"than once (CSV line {row + 2})"
        )
    _, first, per_user = np.unique(users, return_index=True, return_counts=True)
    if protocol.name == "SMP":
        wrong = per_user > 1
        rule = "an SMP user reports one attribute"
    else:
        wrong = per_user != protocol.d
        rule = f"an {protocol.name} user reports every one of the {protocol.d} attributes"
    if wrong.any():
        row = int(first[np.flatnonzero(wrong)[0]])
        held = np.sort(attribute[users == users[row]])
        raise InvalidInputError(
            f"reports: {source}: user {users[row]} reported attribute(s) "
            f"{', '.join(map(str, held))} (first on CSV line {row + 2}); {rule}"
        )


def _grr_reports(values: np.ndarray, k: int, rows: np.ndarray, where: str) -> np.ndarray:
    if values.dtype.kind not in "iu":
        raise InvalidInputError(f"reports: {where}: column 'report' must hold integers (GRR "
                                f"reports 0..{k - 1}), got {values.dtype}")  # fmt: skip
    _check_codes(values, k, rows, f"{where}: report", f"outside the attribute's domain 0..{k - 1}")
    return values.astype(np.int64)


def _check_codes(values: np.ndarray, size: int, rows: np.ndarray, what: str, domain: str) -> None:
    """Refuse the first value outside ``0..size-1``: "reports: <what> <value> on CSV line <line>
    is <domain>" (``rows[i]`` is value ``i``'s row of the table)."""
    outside = (values < 0) | (values >= size)
    if outside.any():
        i = int(np.flatnonzero(outside)[0])
        raise InvalidInputError(
            f"reports: {what} {values[i]} on CSV line {rows[i] + 2} is {domain}"
        )


def _bit_reports(values: np.ndarray, k: int, rows: np.ndarray, where: str) -> np.ndarray:
    """Bit strings (``"0110"``, bit 0 first) as a bool array ``(n, k)``."""
    text = np.asarray([str(v).strip() for v in values])
    lengths = np.char.str_len(text)
    wrong = (lengths != k) | np.array([set(t) - {"0", "1"} != set() for t in text], dtype=bool)
    if wrong.any():
        i = int(np.flatnonzero(wrong)[0])
        raise InvalidInputError(
            f"reports: {where}: report {str(text[i])!r} on CSV line {rows[i] + 2} is not {k} bits "
            f"(a string of {k} 0s and 1s, bit 0 first)"
        )
    codes = text.astype(f"S{k}").view(np.uint8).reshape(-1, k)
    return codes == ord("1")
