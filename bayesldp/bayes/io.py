"""Saving and loading fits: ArviZ InferenceData through netCDF (HDF5, via h5netcdf).

Everything :func:`bayesldp.fit` records (posterior, sample_stats, the log_likelihood group when
asked for, the tally in observed_data, constant_data, and the posterior attrs: method,
mechanism, prior, random seed, bayesldp version, backend info as JSON strings, ArviZ's standard
attrs) round-trips exactly.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bayesldp.bayes.fit import VERSION_ATTR, import_arviz
from bayesldp.bayes.prior import Prior, prior_from_json
from bayesldp.errors import InvalidInputError, InvalidTypeError, StoreWriteError

if TYPE_CHECKING:
    import arviz

_ENGINE = "h5netcdf"
#: the first bytes of the files save_fit may replace: HDF5 (netCDF-4) and classic netCDF
_NETCDF_MAGIC = (b"\x89HDF\r\n\x1a\n", b"CDF\x01", b"CDF\x02", b"CDF\x05")


def check_replaceable(path: str | os.PathLike[str], what: str = "path") -> Path:
    """``path`` as a file that a posterior may be written to: new, or a netCDF file (an older
    posterior).  Anything else there (the reports being read, a tally store's ``CURRENT``, a
    CSV) is refused in one line naming it: a posterior never replaces another kind of file."""
    path = Path(path)
    if path.is_dir():
        raise InvalidInputError(f"{what}: {str(path)!r} is a directory, not a file name")
    if not path.exists():
        return path
    try:
        with open(path, "rb") as fh:
            head = fh.read(8)
    except OSError as exc:
        raise InvalidInputError(f"{what}: cannot read {str(path)!r}: {exc.strerror}") from None
    if not head.startswith(_NETCDF_MAGIC):
        raise InvalidInputError(
            f"{what}: {str(path)!r} exists and is not a netCDF file (reports? a tally store's "
            "file?); a posterior replaces only an older posterior: give a new file name"
        )
    return path


def save_fit(idata: arviz.InferenceData, path: str | os.PathLike[str]) -> Path:
    """Write a fit returned by :func:`bayesldp.fit` to a netCDF file (replacing a netCDF file
    there; any other file is refused, :func:`check_replaceable`).

    Parameters
    ----------
    idata : arviz.InferenceData
        A bayesldp fit (its posterior attrs carry ``bayesldp_version``).
    path : str or PathLike
        Destination file; its directory must exist.

    Returns
    -------
    pathlib.Path
        The path written.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> import bayesldp
    >>> mech = bayesldp.GRR(3, 2.0)
    >>> tally = mech.tally(mech.perturb([0, 0, 1, 2], rng=0))
    >>> idata = bayesldp.fit(tally, method="exact", draws=100, chains=1, random_seed=0)
    >>> path = bayesldp.save_fit(idata, pathlib.Path(tempfile.mkdtemp()) / "fit.nc")
    >>> path.name
    'fit.nc'
    """
    az = import_arviz()
    if not isinstance(idata, az.InferenceData):
        raise InvalidTypeError(
            f"idata: expected the arviz.InferenceData returned by bayesldp.fit, "
            f"got {type(idata).__name__}"
        )
    _check_is_fit(idata, "idata")
    path = _as_path(path)
    if not path.parent.is_dir():
        raise InvalidInputError(f"path: the directory {str(path.parent)!r} does not exist")
    check_replaceable(path)
    # a temporary file of this writer's own, renamed over ``path``: the file is always one
    # complete posterior, and writers running at once never share an open HDF5 file
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    try:
        idata.to_netcdf(str(tmp), engine=_ENGINE)
        os.replace(tmp, path)
    except OSError as exc:
        raise StoreWriteError(
            f"path: cannot write {str(path)!r} ({exc.strerror or exc}); "
            f"{'the file there is unchanged' if path.exists() else 'no file was written'}"
        ) from None
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
    return path


def load_fit(path: str | os.PathLike[str]) -> arviz.InferenceData:
    """Read a fit written by :func:`save_fit` (loaded into memory; the file is closed).

    Raises
    ------
    FileNotFoundError
        No file at ``path``.
    InvalidInputError
        The file is not netCDF/HDF5, or holds no bayesldp fit.

    Examples
    --------
    A fit read back is the fit written:

    >>> import tempfile, pathlib
    >>> import numpy as np
    >>> import bayesldp
    >>> mech = bayesldp.GRR(3, 2.0)
    >>> tally = mech.tally(mech.perturb([0, 0, 1, 2], rng=0))
    >>> idata = bayesldp.fit(tally, method="exact", draws=100, chains=1, random_seed=0)
    >>> path = bayesldp.save_fit(idata, pathlib.Path(tempfile.mkdtemp()) / "fit.nc")
    >>> again = bayesldp.load_fit(path)
    >>> bool(np.array_equal(again.posterior["theta"], idata.posterior["theta"]))
    True
    """
    az = import_arviz()
    path = _as_path(path)
    if not path.exists():
        raise FileNotFoundError(f"load_fit: no such file: {str(path)!r}")
    if path.is_dir():
        raise InvalidInputError(f"path: {str(path)!r} is a directory, not a saved fit")
    try:
        with az.rc_context({"data.load": "eager"}):
            idata = az.from_netcdf(str(path), engine=_ENGINE)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise InvalidInputError(
            f"path: {str(path)!r} is not a netCDF file written by bayesldp.save_fit ({exc})"
        ) from exc
    _check_is_fit(idata, f"path: {str(path)!r}")
    return idata


def fit_prior(idata: arviz.InferenceData) -> Prior:
    """The prior a fit used (Dirichlet or AdaptiveDirichlet), rebuilt from its attrs.

    Examples
    --------
    >>> import bayesldp
    >>> from bayesldp.bayes import fit_prior
    >>> mech = bayesldp.GRR(3, 2.0)
    >>> tally = mech.tally(mech.perturb([0, 0, 1, 2], rng=0))
    >>> idata = bayesldp.fit(tally, prior=0.5, method="exact", draws=100, chains=1, random_seed=0)
    >>> fit_prior(idata)
    Dirichlet.symmetric(k=3, a=0.5)
    """
    _check_is_fit(idata, "idata")
    return prior_from_json(idata.posterior.attrs["prior"])


def _check_is_fit(idata: Any, what: str) -> None:
    posterior = getattr(idata, "posterior", None) if "posterior" in idata.groups() else None
    if posterior is None or VERSION_ATTR not in posterior.attrs or "theta" not in posterior:
        raise InvalidInputError(
            f"{what}: not a bayesldp fit (no posterior group with 'theta' and a "
            f"{VERSION_ATTR!r} attribute); bayesldp.fit produces one"
        )


def _as_path(path: object) -> Path:
    if not isinstance(path, str | os.PathLike):
        raise InvalidTypeError(f"path: expected a str or os.PathLike, got {type(path).__name__}")
    return Path(path)
