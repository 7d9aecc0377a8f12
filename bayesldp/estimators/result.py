"""The result object every frequentist estimator returns."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np

from bayesldp.errors import InvalidInputError


def _frozen_array(value: Any, name: str, ndim: int = 1) -> np.ndarray:
    arr = np.array(value, dtype=float, copy=True)
    if arr.ndim != ndim:
        raise InvalidInputError(f"{name}: expected a {ndim}-d array, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise InvalidInputError(f"{name}: contains NaN or infinite values")
    arr.setflags(write=False)
    return arr


@dataclass(frozen=True, eq=False)
class Estimate:
    """A frequency estimate and how it was obtained.

    Attributes
    ----------
    frequencies : ndarray, shape (K,)
        The estimated frequencies (sum to 1 unless the method leaves the simplex, e.g. ``oracle``).
    std_errors : ndarray, shape (K,), or None
        Standard errors where the method provides them: the exact oracle standard deviation
        (plug-in) for ``oracle``, Wald standard errors from the observed information for ``mle``;
        None for post-processing and EM (their sampling distribution has no closed form).
    method : str
        The method name given to :func:`bayesldp.estimate`.
    on_simplex : bool
        True when every entry is ``>= 0`` and the entries sum to 1 (to 1e-9).
    iterations : int or None
        Iterations of an iterative method (EM-map evaluations plus Newton steps), else None.
    loglik_trace : ndarray or None
        Log-likelihood ``sum_u c_u log(L_u . theta)`` of the tally at each accepted iterate.
    converged : bool or None
        Whether an iterative method met its convergence criterion; None for closed forms.
    details : mapping
        Method-specific diagnostics (for example ``kkt_violation`` for ``mle``, the pools and BIC
        trace for ``em_mr``).  Read-only.

    Examples
    --------
    What :func:`bayesldp.estimate` returns:

    >>> import bayesldp
    >>> mech = bayesldp.GRR(3, 2.0)
    >>> tally = mech.tally(mech.perturb([0, 0, 0, 1, 1, 2] * 50, rng=0))
    >>> est = bayesldp.estimate(tally, "mle")
    >>> est.method, est.on_simplex, est.frequencies.round(2).tolist()
    ('mle', True, [0.44, 0.34, 0.22])
    """

    frequencies: np.ndarray
    std_errors: np.ndarray | None
    method: str
    on_simplex: bool
    iterations: int | None = None
    loglik_trace: np.ndarray | None = None
    converged: bool | None = None
    details: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        freq = _frozen_array(self.frequencies, "frequencies")
        object.__setattr__(self, "frequencies", freq)
        if self.std_errors is not None:
            se = _frozen_array(self.std_errors, "std_errors")
            if se.shape != freq.shape or np.any(se < 0):
                raise InvalidInputError("std_errors: need one non-negative value per category")
            object.__setattr__(self, "std_errors", se)
        if self.loglik_trace is not None:
            object.__setattr__(self, "loglik_trace", _frozen_array(self.loglik_trace, "trace"))
        object.__setattr__(self, "details", MappingProxyType(dict(self.details)))

    @property
    def k(self) -> int:
        """Number of categories K."""
        return int(self.frequencies.shape[0])

    def to_xarray(self, labels: Sequence[Any] | None = None) -> Any:
        """The estimate as an ``xarray.Dataset`` with dimension ``category``.

        Variables: ``frequency`` and, when available, ``std_error`` (dim ``category``) and
        ``loglik`` (dim ``iteration``).  Attributes: ``method``, ``on_simplex`` (0/1) and, when
        defined, ``iterations`` and ``converged`` (0/1), so the dataset can be written to netCDF.

        Parameters
        ----------
        labels : sequence, optional
            Category labels used as the ``category`` coordinate (default ``0..K-1``).
        """
        import xarray as xr

        coords = np.arange(self.k) if labels is None else np.asarray(labels)
        if coords.shape != (self.k,):
            raise InvalidInputError(f"labels: expected {self.k} labels, got shape {coords.shape}")
        data = {"frequency": ("category", np.array(self.frequencies))}
        if self.std_errors is not None:
            data["std_error"] = ("category", np.array(self.std_errors))
        if self.loglik_trace is not None:
            data["loglik"] = ("iteration", np.array(self.loglik_trace))
        attrs: dict[str, Any] = {"method": self.method, "on_simplex": int(self.on_simplex)}
        if self.iterations is not None:
            attrs["iterations"] = int(self.iterations)
        if self.converged is not None:
            attrs["converged"] = int(self.converged)
        return xr.Dataset(data, coords={"category": coords}, attrs=attrs)

    def __repr__(self) -> str:
        head = np.array2string(self.frequencies[:6], precision=4, separator=", ")
        more = ", ..." if self.k > 6 else ""
        extra = "" if self.iterations is None else f", iterations={self.iterations}"
        conv = "" if self.converged is None else f", converged={self.converged}"
        return (
            f"Estimate(method={self.method!r}, k={self.k}, frequencies={head}{more}{extra}{conv})"
        )


def is_on_simplex(frequencies: np.ndarray, atol: float = 1e-9) -> bool:
    """True when every entry is ``>= 0`` and the entries sum to 1 within ``atol``."""
    return bool(np.all(frequencies >= 0) and abs(float(frequencies.sum()) - 1.0) <= atol)
