"""Small real categorical data sets shipped with bayesldp, as tallies (one count per category).

Each data set is the histogram of one categorical variable of a public data set; the per-record
data are not shipped (and are not needed: frequency estimation under LDP only depends on the true
histogram, since every user perturbs independently). Provenance for every file -- the package, its
version, the path inside it, what a record is, how categories were formed and the licence -- is in
``bayesldp/datasets/README.md``.

Examples
--------
>>> from bayesldp.datasets import list_datasets, load_dataset
>>> ds = load_dataset("anes96_party_id")
>>> ds.k, ds.n
(7, 944)
>>> x = ds.values()  # one true category per respondent, to feed a mechanism's perturb()
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from importlib import resources

import numpy as np

from bayesldp.errors import InvalidInputError, InvalidTypeError

__all__ = ["Dataset", "list_datasets", "load_dataset"]

_STATSMODELS = "statsmodels 0.15.0 (PyPI), file statsmodels/datasets/anes96/anes96.csv"
_VEGA = "vega_datasets 0.9.0 (PyPI), file vega_datasets/_data/"

# name -> (description, source). The CSV files hold the counts; these strings the metadata.
_REGISTRY: dict[str, tuple[str, str]] = {
    "seattle_weather": (
        "Weather type of each day in Seattle, 2012-01-01 to 2015-12-31 (one record per day, "
        "1461 days); 5 levels in alphabetical order: drizzle, fog, rain, snow, sun.",
        _VEGA + "seattle-weather.csv, column 'weather'. Original data: NOAA (public domain).",
    ),
    "anes96_party_id": (
        "Party identification of respondents to the American National Election Studies 1996 "
        "(statsmodels subset, one record per respondent); 7 ordered levels from Strong "
        "Democrat to Strong Republican.",
        _STATSMODELS + ", column 'PID'; labels from statsmodels/datasets/anes96/data.py. "
        "Licence: public domain (statsmodels' COPYRIGHT note).",
    ),
    "anes96_income": (
        "Household income bracket of respondents to the American National Election Studies "
        "1996 (statsmodels subset, one record per respondent); 24 ordered brackets from "
        "'None or less than $2,999' to '$105,000 and over'.",
        _STATSMODELS + ", column 'income'; labels from statsmodels/datasets/anes96/data.py "
        "(copied verbatim). Licence: public domain (statsmodels' COPYRIGHT note).",
    ),
    "us_airports_by_state": (
        "US airports (one record per airport) by two-letter state or territory code; 56 "
        "levels in alphabetical order; the 12 airports whose state is missing are dropped.",
        _VEGA + "airports.csv, column 'state'. Original data: OurAirports (public domain).",
    ),
    "occupational_status": (
        "Occupational status of British males cross-classified with their father's "
        "(table from Goodman 1979, JASA 74:537-552; one record per son); 64 joint levels "
        "'father i -> son j' for statuses 1..8, father's status varying slowest.",
        "R datasets package (occupationalStatus), Debian r-base-core 4.2.2.20221110-2, file "
        "/usr/lib/R/library/datasets/data/Rdata.rdb. Licence: part of R (GPL-2 | GPL-3).",
    ),
    "anes96_age": (
        "Age in years of respondents to the American National Election Studies 1996 "
        "(statsmodels subset, one record per respondent); 73 ordered levels, one per year from "
        "19 to 91 (two years have no respondent): a numerical attribute as its exact histogram "
        "(the ages: np.asarray(labels, float)[values()]).",
        _STATSMODELS + ", column 'age'. Licence: public domain (statsmodels' COPYRIGHT note).",
    ),
}


@dataclass(frozen=True, eq=False)
class Dataset:
    """A real categorical data set given as a tally of K categories.

    Attributes
    ----------
    name : str
        The name passed to :func:`load_dataset`.
    labels : tuple of str
        Human-readable level of each category ``0..K-1`` (in the data set's natural order).
    counts : numpy.ndarray
        Read-only int64 array of shape ``(K,)``: the number of records in each category.
    description : str
        What a record is and what the variable means.
    source : str
        Package, version and file the counts were computed from, and the licence.

    Notes
    -----
    ``k = len(counts)``, ``n = sum(counts)`` and ``frequencies = counts / n`` (so the true
    frequency vector ``theta`` of the data set, which sums to 1).

    Examples
    --------
    >>> from bayesldp.datasets import load_dataset
    >>> ds = load_dataset("seattle_weather")
    >>> ds.labels, ds.n
    (('drizzle', 'fog', 'rain', 'snow', 'sun'), 1461)
    >>> ds.frequencies.round(3).tolist()
    [0.037, 0.281, 0.177, 0.016, 0.489]
    """

    name: str
    labels: tuple[str, ...]
    counts: np.ndarray
    description: str
    source: str

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Dataset):
            return NotImplemented
        return (self.name, self.labels, self.description, self.source) == (
            other.name,
            other.labels,
            other.description,
            other.source,
        ) and np.array_equal(self.counts, other.counts)

    def __hash__(self) -> int:
        return hash((self.name, self.labels, self.counts.tobytes()))

    @property
    def k(self) -> int:
        """Number of categories K."""
        return int(self.counts.shape[0])

    @property
    def n(self) -> int:
        """Number of records (users), the sum of the counts."""
        return int(self.counts.sum())

    @property
    def frequencies(self) -> np.ndarray:
        """True frequencies ``theta_x = counts[x] / n`` (float64, sums to 1)."""
        return self.counts / self.n

    def values(self) -> np.ndarray:
        """One true category per record: ``counts[x]`` copies of each ``x``, in order (int64).

        Order does not matter to an LDP mechanism (users perturb independently); pass the
        result to ``Mechanism.perturb`` or ``Mechanism.tally``.
        """
        return np.repeat(np.arange(self.k, dtype=np.int64), self.counts)


def list_datasets() -> list[str]:
    """Names of the data sets shipped with bayesldp, in increasing order of K.

    Examples
    --------
    >>> from bayesldp.datasets import list_datasets
    >>> "seattle_weather" in list_datasets()
    True
    """
    return list(_REGISTRY)


def _parse(name: str, text: str) -> tuple[tuple[str, ...], np.ndarray]:
    rows = list(csv.reader(io.StringIO(text)))
    if not rows or rows[0] != ["category", "label", "count"]:
        raise InvalidInputError(f"dataset {name!r}: bad CSV header {rows[:1]!r}")
    labels: list[str] = []
    counts: list[int] = []
    for i, row in enumerate(rows[1:]):
        if len(row) != 3 or row[0] != str(i) or not row[2].isdigit():
            raise InvalidInputError(f"dataset {name!r}: bad CSV row {i + 1}: {row!r}")
        labels.append(row[1])
        counts.append(int(row[2]))
    if len(set(labels)) != len(labels) or sum(counts) == 0:
        raise InvalidInputError(f"dataset {name!r}: duplicate labels or no records")
    arr = np.asarray(counts, dtype=np.int64)
    arr.flags.writeable = False
    return tuple(labels), arr


def load_dataset(name: str) -> Dataset:
    """Load a shipped data set by name.

    Parameters
    ----------
    name : str
        One of :func:`list_datasets`.

    Returns
    -------
    Dataset
        The tally with its labels, description and source.

    Raises
    ------
    InvalidTypeError
        If ``name`` is not a string.
    InvalidInputError
        If ``name`` is not a shipped data set (the message lists the valid names).

    Examples
    --------
    >>> import bayesldp
    >>> from bayesldp.datasets import load_dataset
    >>> ds = load_dataset("anes96_party_id")
    >>> mech = bayesldp.GRR(ds.k, 1.0)
    >>> tally = mech.tally(mech.perturb(ds.values(), rng=0))
    >>> ds.k, tally.n
    (7, 944)
    """
    if not isinstance(name, str):
        raise InvalidTypeError(f"name: expected a data set name (str), got {type(name).__name__}")
    if name not in _REGISTRY:
        raise InvalidInputError(
            f"name: unknown data set {name!r}; valid names are {', '.join(list_datasets())}"
        )
    text = resources.files(__name__).joinpath("data", f"{name}.csv").read_text(encoding="utf-8")
    labels, counts = _parse(name, text)
    description, source = _REGISTRY[name]
    return Dataset(name=name, labels=labels, counts=counts, description=description, source=source)
