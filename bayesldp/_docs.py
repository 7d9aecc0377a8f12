"""Docstring text that several public classes share, and :func:`fill_doc`, which puts it in.

A docstring names a fragment on a line of its own, ``{name}``; :func:`fill_doc` replaces that
line by the fragment, indented as the line is.  Only such whole lines are replaced, so a
docstring's other braces (``{x : y in C_x}``) stay as they are.  Each shared description is
written here once: the rendered docstrings (``help()``, the API reference) are complete.

>>> @fill_doc(parameters=categorical_parameters())
... class Example:
...     '''One line.
...
...     {parameters}
...     '''
>>> print(Example.__doc__.strip())
One line.
<BLANKLINE>
    Parameters
    ----------
    k : int
        Number of categories (>= 2).
    epsilon : float
        Privacy budget (> 0, finite).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

__all__ = ["categorical_parameters", "fill_doc", "numerical_parameters", "perturb_parameters"]

T = TypeVar("T")


def categorical_parameters(k_range: str = ">= 2") -> str:
    """The Parameters section of a categorical mechanism: ``k`` (``k_range`` says its bounds)
    and ``epsilon``."""
    return (
        "Parameters\n"
        "----------\n"
        "k : int\n"
        f"    Number of categories ({k_range}).\n"
        "epsilon : float\n"
        "    Privacy budget (> 0, finite)."
    )


def numerical_parameters() -> str:
    """The start of a numerical mechanism's Parameters section: ``k``, ``epsilon``, ``lo, hi``
    (each class goes on with its ``output_bins`` and its own parameters)."""
    return (
        "Parameters\n"
        "----------\n"
        "k : int\n"
        "    Number of input bins of ``[lo, hi]``.\n"
        "epsilon : float\n"
        "    Privacy budget.\n"
        "lo, hi : float, default 0, 1\n"
        "    The value domain."
    )


def perturb_parameters(what: str) -> str:
    """The Parameters section of a categorical mechanism's ``perturb``: ``x`` and ``rng`` (the
    same seed gives the same ``what``)."""
    return (
        "Parameters\n"
        "----------\n"
        "x : array of int, shape (n,)\n"
        "    True values in ``0..k-1``.\n"
        "rng : Generator, SeedSequence, int or None\n"
        f"    Source of randomness; the same seed gives the same {what}."
    )


def fill_doc(**fragments: str) -> Callable[[T], T]:
    """Class or function decorator: replace each line ``{name}`` of the docstring by
    ``fragments[name]``, indented as that line.

    Every fragment must be used; a docstring stripped by ``python -OO`` is left as it is.
    """

    def apply(obj: T) -> T:
        doc = obj.__doc__
        if doc is None:
            return obj
        lines: list[str] = []
        used: set[str] = set()
        for line in doc.split("\n"):
            key = line.strip()
            name = key[1:-1]
            if key.startswith("{") and key.endswith("}") and name in fragments:
                indent = line[: len(line) - len(line.lstrip())]
                lines.extend(indent + part if part else part
                             for part in fragments[name].split("\n"))  # fmt: skip
                used.add(name)
            else:
                lines.append(line)
        missing = sorted(set(fragments) - used)
        if missing:
            where = getattr(obj, "__qualname__", obj)
            raise ValueError(f"fill_doc: the docstring of {where} has no line {{{missing[0]}}}")
        obj.__doc__ = "\n".join(lines)
        return obj

    return apply
