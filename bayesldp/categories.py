"""From named categories to the integer codes ``0..K-1`` that every mechanism perturbs.

Mechanisms work on integer categories ``0..K-1`` (``perturb(x)`` refuses strings).  Data come
with names: a party, a browser, an income bracket.  :func:`encode` maps them to codes once, in
the order of an explicit category list, so that code ``x`` means ``categories[x]`` in the
tally, the estimates and the posterior (pass the same list as ``labels=`` to
:func:`bayesldp.fit` to name the ``category`` coordinate).

>>> import bayesldp
>>> bayesldp.encode(["rain", "sun", "rain", "fog"], ["fog", "rain", "sun"]).tolist()
[1, 2, 1, 0]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from bayesldp._validation import as_list, check_k
from bayesldp.errors import InvalidInputError, InvalidTypeError

__all__ = ["encode"]

#: how many unknown values an error names
_SHOWN = 5


def encode(values: Any, categories: Sequence[Any] | None = None) -> np.ndarray:
    """The integer code (``0..K-1``) of each value: its position in ``categories``.

    Parameters
    ----------
    values : array-like, pandas Series or pandas Categorical
        One category per user: strings (or any hashable values: ints, dates) among
        ``categories``.  Missing values (``None``, ``NaN``) are refused.
    categories : sequence, optional
        The ``K >= 2`` distinct categories, in the order that defines their codes.  It may be
        left out only when ``values`` is a pandas Categorical (or a Series of ``category``
        dtype): its own categories are then used, in their order
        (``values.categories``; a Categorical built from data sorts them, so give the list
        when the order matters).  With an explicit list, a Categorical is re-coded to it.

    Returns
    -------
    numpy.ndarray
        int64 codes, shape ``(n,)``: pass them to any mechanism's ``perturb``.

    Raises
    ------
    InvalidInputError
        If a value is not among the categories (the message names the first few unknown values
        and how many there are), a value is missing, the categories repeat or number fewer than
        two, or ``values`` is empty or not 1-d.
    InvalidTypeError
        If ``categories`` is missing for values that are not categorical, or is a string.

    Examples
    --------
    >>> import numpy as np, pandas as pd, bayesldp
    >>> codes = bayesldp.encode(np.array(["b", "a", "b"]), categories=["a", "b", "c"])
    >>> codes.tolist()
    [1, 0, 1]
    >>> bayesldp.encode(pd.Categorical(["lo", "hi"], categories=["lo", "hi"])).tolist()
    [0, 1]
    >>> bayesldp.GRR(3, 1.0).perturb(codes, rng=0).shape
    (3,)
    """
    import pandas as pd

    own = _own_categories(values, pd)
    if categories is None:
        if own is None:
            raise InvalidTypeError(
                "categories: needed unless values is a pandas Categorical (it gives the list and "
                "the order of the codes); e.g. encode(values, categories=['a', 'b', 'c'])"
            )
        categories = list(own)
    cats = _check_categories(categories, pd)
    raw = values.array if isinstance(values, pd.Series) else values
    if not isinstance(raw, pd.Categorical):
        raw = np.asarray(raw)
        if raw.ndim == 0:
            raw = raw.reshape(1)
        if raw.ndim != 1:
            raise InvalidInputError(
                f"values: expected a 1-d array of categories, got shape {raw.shape}"
            )
    if len(raw) == 0:
        raise InvalidInputError("values: is empty; at least one user is needed")
    if isinstance(raw, pd.Categorical):  # map its K' categories, then take its codes
        mapped = cats.get_indexer(raw.categories).astype(np.int64)
        codes = np.where(raw.codes >= 0, mapped[raw.codes], -1)
    else:  # one hash-table pass over the values
        codes = cats.get_indexer(raw).astype(np.int64, copy=False)
    bad = codes < 0
    if bad.any():
        _raise_unknown(np.asarray(raw, dtype=object)[bad], cats, pd)
    return codes


def _own_categories(values: Any, pd: Any) -> Any:
    """The categories of a pandas Categorical (or categorical Series), else None."""
    if isinstance(values, pd.Categorical):
        return values.categories
    if isinstance(values, pd.Series) and isinstance(values.dtype, pd.CategoricalDtype):
        return values.cat.categories
    return None


def _check_categories(categories: Any, pd: Any) -> Any:
    """The category list as a pandas Index: 1-d, K >= 2, distinct, no missing value."""
    cats = pd.Index(as_list(categories, "categories", "a sequence of categories"))
    check_k(len(cats), "categories (their number)")
    if cats.hasnans:
        raise InvalidInputError("categories: contains a missing value (None or NaN)")
    if not cats.is_unique:
        repeated = cats[cats.duplicated()].unique().tolist()
        raise InvalidInputError(f"categories: must be distinct, repeated: {repeated[:_SHOWN]}")
    return cats


def _raise_unknown(bad: np.ndarray, cats: Any, pd: Any) -> None:
    """An error naming the first few values that are not categories, and how many there are."""
    missing = pd.isna(bad)
    if missing.any():
        raise InvalidInputError(
            f"values: {int(missing.sum()):,} missing value(s) (None or NaN); every user needs "
            "a category (drop them, or make 'missing' a category of its own)"
        )
    distinct = pd.unique(bad)
    shown = ", ".join(repr(v) for v in distinct[:_SHOWN].tolist())
    more = f" and {distinct.size - _SHOWN:,} more" if distinct.size > _SHOWN else ""
    listed = ", ".join(repr(c) for c in cats[:_SHOWN].tolist())
    listed += ", ..." if len(cats) > _SHOWN else ""
    raise InvalidInputError(
        f"values: {bad.size:,} value(s) ({distinct.size:,} distinct) are not among the "
        f"{len(cats)} categories: {shown}{more}; the categories are {listed}"
    )
