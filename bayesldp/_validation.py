"""Argument checks shared by the whole package (internal)."""

from __future__ import annotations

import math
import numbers
import os
from typing import TypeVar

import numpy as np

from bayesldp.errors import InvalidInputError, InvalidTypeError

RNGLike = np.random.Generator | np.random.SeedSequence | int | None

T = TypeVar("T")


def as_generator(rng: RNGLike) -> np.random.Generator:
    """Return a ``numpy.random.Generator`` from a Generator, SeedSequence, int seed or None."""
    if isinstance(rng, np.random.Generator):
        return rng
    if rng is None or isinstance(rng, np.random.SeedSequence):
        return np.random.default_rng(rng)
    if isinstance(rng, numbers.Integral) and not isinstance(rng, bool):
        if rng < 0:
            raise InvalidInputError(f"rng: a seed must be a non-negative integer, got {rng}")
        return np.random.default_rng(int(rng))
    raise InvalidTypeError(
        f"rng: expected a numpy Generator, SeedSequence, non-negative int or None, "
        f"got {type(rng).__name__}"
    )


def check_k(k: object, name: str = "k") -> int:
    """Validate a domain size K (an integer >= 2)."""
    if isinstance(k, bool) or not isinstance(k, numbers.Integral):
        raise InvalidTypeError(f"{name}: expected an integer number of categories, got {k!r}")
    if k < 2:
        raise InvalidInputError(f"{name}: the domain needs at least 2 categories, got {k}")
    return int(k)


#: budgets the mechanisms' probabilities are computed for in float64: e^eps and 1/eps finite
EPSILON_RANGE = (1e-8, 700.0)


def check_epsilon(epsilon: object, name: str = "epsilon") -> float:
    """Validate a privacy budget: a finite real number in ``[1e-8, 700]``.

    Outside that range float64 cannot hold what the mechanisms compute from it (``e^eps``
    overflows above about 709; a noise scale ``2/eps`` overflows for subnormal ``eps``).
    """
    if isinstance(epsilon, bool) or not isinstance(epsilon, numbers.Real):
        raise InvalidTypeError(f"{name}: expected a positive finite number, got {epsilon!r}")
    value = float(epsilon)
    if not math.isfinite(value) or value <= 0:
        raise InvalidInputError(f"{name}: must be finite and > 0, got {value}")
    low, high = EPSILON_RANGE
    if not low <= value <= high:
        raise InvalidInputError(
            f"{name}: must lie in [{low:g}, {high:g}] (float64 cannot compute e^eps or 1/eps "
            f"beyond that), got {value:g}"
        )
    return value


def check_probability(value: object, name: str, *, low_open: bool = True) -> float:
    """Validate a probability in (0, 1] (or [0, 1] when ``low_open`` is False)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise InvalidTypeError(f"{name}: expected a number in (0, 1], got {value!r}")
    v = float(value)
    bad_low = v <= 0 if low_open else v < 0
    if not math.isfinite(v) or bad_low or v > 1:
        interval = "(0, 1]" if low_open else "[0, 1]"
        raise InvalidInputError(f"{name}: must lie in {interval}, got {v}")
    return v


def one_d_array(
    x: object, name: str, *, of: str = "", unit: str = "report", scalar: bool = False
) -> np.ndarray:
    """``x`` as a non-empty 1-d array, or an error naming ``name`` ("expected a 1-d array{of}",
    "at least one {unit} is needed"); a scalar is one entry when ``scalar``."""
    arr = np.asarray(x)
    if scalar and arr.ndim == 0:
        arr = arr.reshape(1)
    if arr.ndim != 1:
        raise InvalidInputError(f"{name}: expected a 1-d array{of}, got shape {arr.shape}")
    if arr.size == 0:
        raise InvalidInputError(f"{name}: is empty; at least one {unit} is needed")
    return arr


def check_values(x: object, k: int, name: str = "x") -> np.ndarray:
    """Validate true values: a non-empty 1-d array of integers in 0..k-1 (returned as int64)."""
    arr = one_d_array(x, name, of=" of categories", unit="user", scalar=True)
    if arr.dtype.kind in "USO":  # strings, or a pandas Categorical's values
        raise InvalidTypeError(
            f"{name}: expected integer categories 0..{k - 1}, got dtype {arr.dtype}; encode "
            f"named categories first: bayesldp.encode({name}, categories=[...]) gives the codes"
        )
    if arr.dtype.kind == "b" or arr.dtype.kind not in "iuf":
        raise InvalidTypeError(
            f"{name}: expected integer categories 0..{k - 1}, got dtype {arr.dtype}"
        )
    if arr.dtype.kind == "f":
        if not np.all(np.isfinite(arr)):
            raise InvalidInputError(f"{name}: contains NaN or infinite values")
        if not np.all(arr == np.round(arr)):
            bad = arr[arr != np.round(arr)][0]
            raise InvalidInputError(f"{name}: categories must be integers, got {bad}")
    lo, hi = arr.min(), arr.max()
    if lo < 0 or hi >= k:
        bad = lo if lo < 0 else hi
        raise InvalidInputError(f"{name}: categories must lie in 0..{k - 1}, got {bad}")
    return arr.astype(np.int64, copy=False)


def as_list(value: object, name: str, expected: str) -> list:
    """``list(value)`` of a sequence that is not a string; ``expected`` describes it in the
    errors (``"a sequence of 3 labels"``)."""
    if isinstance(value, str | bytes):
        raise InvalidTypeError(f"{name}: expected {expected}, got the string {value!r}")
    try:
        return list(value)
    except TypeError:
        raise InvalidTypeError(f"{name}: expected {expected}, got {type(value).__name__}") from None


def check_labels(labels: object, k: int, name: str = "labels") -> tuple[str, ...]:
    """Validate category labels: ``k`` distinct, non-empty strings (returned as a tuple).

    Label ``x`` names category ``x`` in tables, figures and posteriors.
    """
    if isinstance(labels, str | bytes) or not isinstance(labels, list | tuple | np.ndarray):
        raise InvalidTypeError(
            f"{name}: expected a list of {k} strings (one per category), got {labels!r}"
        )
    out = list(labels.tolist() if isinstance(labels, np.ndarray) else labels)
    if len(out) != k:
        raise InvalidInputError(f"{name}: expected {k} labels (one per category), got {len(out)}")
    for i, label in enumerate(out):
        if not isinstance(label, str):
            raise InvalidTypeError(f"{name}[{i}]: expected a string, got {label!r}")
        if not label.strip():
            raise InvalidInputError(f"{name}[{i}]: is empty; every category needs a label")
    seen: dict[str, int] = {}
    for i, label in enumerate(out):
        if label in seen:
            raise InvalidInputError(
                f"{name}: must be distinct; {label!r} labels categories {seen[label]} and {i}"
            )
        seen[label] = i
    return tuple(out)


def check_counts(counts: object, name: str = "counts", *, length: int | None = None) -> np.ndarray:
    """Validate a vector of non-negative integer counts (returned as int64)."""
    arr = np.asarray(counts)
    if arr.ndim != 1:
        raise InvalidInputError(f"{name}: expected a 1-d array of counts, got shape {arr.shape}")
    if length is not None and arr.shape[0] != length:
        raise InvalidInputError(f"{name}: expected {length} counts, got {arr.shape[0]}")
    if arr.dtype.kind == "O":  # Python ints beyond what numpy's integer types hold
        arr = _object_counts(arr, name)
    if arr.dtype.kind == "b" or arr.dtype.kind not in "iuf":
        raise InvalidTypeError(f"{name}: expected integer counts, got dtype {arr.dtype}")
    if arr.dtype.kind == "f":
        if not np.all(np.isfinite(arr)):
            raise InvalidInputError(f"{name}: contains NaN or infinite values")
        if not np.all(arr == np.round(arr)):
            raise InvalidInputError(f"{name}: counts must be whole numbers")
        if arr.size and arr.max() >= 2.0**53:
            raise InvalidInputError(
                f"{name}: a count of {arr.max():.6g} given as a float cannot be exact (floats "
                "hold whole numbers exactly only below 2**53); pass integers"
            )
    if arr.size and arr.min() < 0:
        raise InvalidInputError(f"{name}: counts must be >= 0, got {arr.min()}")
    if arr.dtype.kind == "u" and arr.size and arr.max() > INT64_MAX:
        raise InvalidInputError(
            f"{name}: a count of {int(arr.max()):,} is too large for a 64-bit count "
            "(at most 2**63 - 1)"
        )
    arr = arr.astype(np.int64)
    check_total(arr, name)
    return arr


INT64_MAX = np.iinfo(np.int64).max


def _object_counts(arr: np.ndarray, name: str) -> np.ndarray:
    """An object array of Python ints as int64, refusing any count beyond int64."""
    values = arr.ravel().tolist()
    if not all(isinstance(v, numbers.Integral) and not isinstance(v, bool) for v in values):
        raise InvalidTypeError(f"{name}: expected integer counts, got dtype object")
    if values and max(values) > INT64_MAX:
        raise InvalidInputError(
            f"{name}: a count of {max(values):,} is too large for a 64-bit count "
            "(at most 2**63 - 1)"
        )
    return arr.astype(np.int64)


def check_total(counts: np.ndarray, name: str = "counts") -> int:
    """The exact sum of non-negative int64 ``counts``; an error if it exceeds ``2**63 - 1``.

    Counts stay integers end to end: a total that int64 cannot hold would wrap around.
    """
    if counts.size == 0:
        return 0
    approx = float(counts.sum(dtype=np.float64))
    if approx < 2.0**62:
        return int(counts.sum())
    total = sum(int(v) for v in counts.tolist())
    if total > INT64_MAX:
        raise InvalidInputError(
            f"{name}: the total {total:,} is too large for a 64-bit count (at most 2**63 - 1 "
            f"= {INT64_MAX:,}); split the reports into tallies whose totals fit"
        )
    return total


def check_theta(theta: object, k: int, name: str = "theta") -> np.ndarray:
    """Validate a point of the probability simplex of dimension k."""
    arr = np.asarray(theta, dtype=float)
    if arr.shape != (k,):
        raise InvalidInputError(f"{name}: expected shape ({k},), got {arr.shape}")
    if not np.all(np.isfinite(arr)) or arr.min() < 0:
        raise InvalidInputError(f"{name}: entries must be finite and >= 0")
    if abs(arr.sum() - 1.0) > 1e-8:
        raise InvalidInputError(f"{name}: must sum to 1, sums to {arr.sum()!r}")
    return arr


def check_int(value: object, name: str, low: int = 1) -> int:
    """Validate an integer ``>= low`` (bools are refused)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise InvalidTypeError(f"{name}: expected an integer >= {low}, got {value!r}")
    if value < low:
        raise InvalidInputError(f"{name}: must be >= {low}, got {value}")
    return int(value)


def check_positive(value: object, name: str) -> float:
    """Validate a finite real number > 0 (bools are refused)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise InvalidTypeError(f"{name}: expected a positive finite number, got {value!r}")
    v = float(value)
    if not math.isfinite(v) or v <= 0:
        raise InvalidInputError(f"{name}: must be finite and > 0, got {v}")
    return v


def check_open_unit(value: object, name: str) -> float:
    """Validate a number in the open interval (0, 1) (a level, an acceptance target)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise InvalidTypeError(f"{name}: expected a number in (0, 1), got {value!r}")
    v = float(value)
    if not 0.0 < v < 1.0:
        raise InvalidInputError(f"{name}: must lie in (0, 1), got {v}")
    return v


def check_instance(value: object, cls: type[T], name: str, expected: str) -> T:
    """``value`` if it is a ``cls``; else an InvalidTypeError ``"<name>: expected <expected>, got
    <its type>"``."""
    if not isinstance(value, cls):
        raise InvalidTypeError(f"{name}: expected {expected}, got {type(value).__name__}")
    return value


def check_bool(value: object, name: str) -> bool:
    """Validate a boolean flag (Python or numpy bool)."""
    if not isinstance(value, bool | np.bool_):
        raise InvalidTypeError(f"{name}: expected True or False, got {value!r}")
    return bool(value)


def check_choice(value: object, name: str, choices: tuple) -> object:
    """Validate that ``value`` is one of ``choices``."""
    if value not in choices:
        raise InvalidInputError(f"{name}: expected one of {choices}, got {value!r}")
    return value


def check_alpha(alpha: object, k: int | None = None, name: str = "alpha") -> np.ndarray:
    """Validate Dirichlet concentrations: finite and > 0, shape ``(k,)`` (any K >= 2 if None)."""
    arr = np.asarray(alpha)
    if arr.dtype.kind == "b" or arr.dtype.kind not in "iuf":
        raise InvalidTypeError(f"{name}: expected a vector of positive numbers, got {arr.dtype}")
    arr = arr.astype(float)
    if k is not None and arr.shape != (k,):
        raise InvalidInputError(
            f"{name}: expected shape ({k},) to match the tally, got {arr.shape}"
        )
    if arr.ndim != 1 or arr.shape[0] < 2:
        raise InvalidInputError(
            f"{name}: expected a vector of K >= 2 concentrations, got {arr.shape}"
        )
    if not np.all(np.isfinite(arr)) or arr.min() <= 0:
        raise InvalidInputError(
            f"{name}: concentrations must be finite and > 0, got {arr.tolist()}"
        )
    return arr


#: K-length arrays of 8 bytes any mechanism's use holds at least: the tally's counts, the
#: estimates, their intervals and an estimator's work arrays
ARRAYS_PER_CATEGORY = 8


def check_domain_size(k: int, name: str = "k") -> int:
    """Refuse a domain of ``k`` categories whose K-length arrays (:data:`ARRAYS_PER_CATEGORY`
    of 8 bytes) would need more than half of this machine's memory, before any is made.

    The message gives the estimate and the largest K this machine holds (about 197 million
    categories on a 24 GB machine).
    """
    total = machine_memory()
    per = 8.0 * ARRAYS_PER_CATEGORY
    limit = int(0.5 * total / per)
    if k > limit:
        raise InvalidInputError(
            f"{name}: {k:,} categories need about {k * per / 2**30:,.3g} GiB of memory "
            f"({ARRAYS_PER_CATEGORY} arrays of K numbers at least: the counts, the estimates and "
            f"their intervals), more than half of this machine's {total / 2**30:,.3g} GiB; at "
            f"most {limit:,} categories"
        )
    return k


def machine_memory() -> float:
    """Bytes of physical memory of this machine (16 GiB where it cannot be read)."""
    try:
        return float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):  # pragma: no cover - non-POSIX
        return 16.0 * 2**30


def check_memory(
    nbytes: float, what: str, alternative: str, limit: tuple[float, str] | None = None
) -> None:
    """Refuse work whose arrays would need more than half of this machine's memory.

    The error gives the estimate and what to do instead, before anything is allocated (numpy
    would otherwise fail with a raw MemoryError, or the machine would start swapping);
    ``limit = (bytes_each, unit)`` adds the most ``unit`` this machine holds.
    """
    total = machine_memory()
    if nbytes > 0.5 * total:
        most = "" if limit is None else f" (at most {int(0.5 * total / limit[0]):,} {limit[1]})"
        raise InvalidInputError(
            f"{what}: needs about {nbytes / 2**30:,.3g} GiB of memory, more than half of this "
            f"machine's {total / 2**30:,.3g} GiB; {alternative}{most}"
        )
