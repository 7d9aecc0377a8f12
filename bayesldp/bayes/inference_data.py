"""The ArviZ InferenceData of a fit: :func:`build_inference_data` labels a backend's draws.

The groups and posterior attrs :func:`bayesldp.fit` returns (see its docstring), the storage
options of ``fit(idata_kwargs=...)`` and the JSON of the attrs, so that a fit round-trips
through :func:`bayesldp.save_fit` / :func:`bayesldp.load_fit`.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from bayesldp._validation import check_bool, check_memory
from bayesldp._version import __version__
from bayesldp.bayes._arviz import import_arviz
from bayesldp.bayes._types import SamplerOutput
from bayesldp.bayes.prior import Dirichlet, LogWeightPrior, Prior
from bayesldp.errors import (
    BayesLDPError,
    InvalidInputError,
    InvalidTypeError,
    LargeOutputWarning,
)
from bayesldp.tally import Tally

if TYPE_CHECKING:
    import arviz

#: marker attribute identifying a bayesldp fit (also read by :func:`bayesldp.load_fit`)
VERSION_ATTR = "bayesldp_version"
#: constant_data holds the channel only when K * |Y| is at most this
MAX_CHANNEL_SIZE = 1_000_000
#: the keys ``fit(idata_kwargs=...)`` accepts, with their defaults
IDATA_KWARGS: dict[str, Any] = {"log_likelihood": False, "dtype": "float64"}
#: storage dtypes of the posterior's floating variables (and the log_likelihood group)
IDATA_DTYPES = ("float64", "float32")
#: a requested log_likelihood group larger than this (bytes) is warned about
LOG_LIKELIHOOD_WARN_BYTES = 500_000_000


def build_inference_data(
    out: SamplerOutput,
    tally: Tally,
    prior: Prior,
    *,
    method: str,
    requested_method: str | None = None,
    random_seed: int | None = None,
    coords: Sequence[Any] | None = None,
    log_likelihood: bool = False,
    dtype: str = "float64",
) -> arviz.InferenceData:
    """Assemble the InferenceData of a fit from a backend's :class:`SamplerOutput`.

    Public so that code producing draws by other means (e.g. the adaptive survey) can label
    them the same way; see :func:`fit` for the groups (``log_likelihood`` and ``dtype`` are
    the keys of its ``idata_kwargs``).

    Examples
    --------
    Draws made elsewhere, labelled as :func:`bayesldp.fit` labels its own:

    >>> import numpy as np
    >>> import bayesldp
    >>> from bayesldp.bayes import as_prior, build_inference_data
    >>> from bayesldp.bayes._types import SamplerOutput
    >>> mech = bayesldp.GRR(3, 2.0)
    >>> tally = mech.tally(mech.perturb([0, 0, 1, 2], rng=0))
    >>> draws = np.random.default_rng(0).dirichlet(np.ones(3), size=(1, 20))
    >>> idata = build_inference_data(SamplerOutput(theta=draws), tally, as_prior(None, 3),
    ...                              method="exact")
    >>> idata.posterior["theta"].shape
    (1, 20, 3)
    """
    az = import_arviz()
    import xarray as xr

    chains, draws, k = out.theta.shape
    category = np.arange(k) if coords is None else np.asarray(coords)
    chain_draw = {"chain": np.arange(chains), "draw": np.arange(draws)}
    rows = np.arange(tally.n_rows)
    storage = _resolve_idata_kwargs({"log_likelihood": log_likelihood, "dtype": dtype})
    float_dtype = np.dtype(storage["dtype"])
    standard = _standard_attrs()
    attrs = {**standard, **_fit_attrs(out, tally, prior, method, requested_method, random_seed)}

    def _stored(value: Any) -> np.ndarray:
        arr = np.asarray(value)
        return arr.astype(float_dtype) if arr.dtype.kind == "f" else arr

    variables = {"theta": (("chain", "draw", "category"), _stored(np.asarray(out.theta, float)))}
    variables.update({name: (("chain", "draw"), _stored(v)) for name, v in out.extra.items()})
    posterior = xr.Dataset(
        variables,
        coords={**chain_draw, "category": category},
        attrs=attrs,
    )
    sample_stats = xr.Dataset(
        {name: (("chain", "draw"), np.asarray(value)) for name, value in out.sample_stats.items()},
        coords=chain_draw,
        attrs={**standard, "method": method},
    )
    groups: dict[str, Any] = {"posterior": posterior, "sample_stats": sample_stats}

    if storage["log_likelihood"]:
        groups["log_likelihood"] = _log_likelihood_group(out.theta, tally, float_dtype, chain_draw)
        groups["log_likelihood"].attrs.update(standard)

    observed: dict[str, Any] = {
        "counts": (("row",), tally.counts),
        "stat": (("category",), tally.stat),
    }
    observed_coords: dict[str, Any] = {"row": rows, "category": category}
    if tally.is_support_form:
        observed["support"] = (("row", "category"), tally.support)
        observed["levels"] = (("level",), np.asarray(tally.levels, dtype=float))
        observed_coords["level"] = ["lo", "hi"]
    else:
        observed["rows"] = (("row", "category"), tally.rows)
    groups["observed_data"] = xr.Dataset(observed, coords=observed_coords, attrs=standard)
    groups["constant_data"] = _constant_data(tally, prior, category)
    groups["constant_data"].attrs.update(standard)
    return az.InferenceData(**groups)


def check_log_likelihood_size(
    chains: int, draws: int, tally: Tally, dtype: Any, *, stacklevel: int = 2
) -> None:
    """Before sampling: refuse a per-report ``log_likelihood`` group beyond memory, and warn
    (:class:`~bayesldp.errors.LargeOutputWarning`, one line) when it exceeds
    ``LOG_LIKELIHOOD_WARN_BYTES``: ``chains * draws * N * itemsize`` bytes, where
    :func:`bayesldp.loo` gives the same PSIS-LOO exactly without it."""
    itemsize = np.dtype(dtype).itemsize
    nbytes = float(chains) * draws * tally.n * itemsize
    check_memory(
        nbytes,
        "idata_kwargs['log_likelihood']",
        f"it holds one value per draw and report ({chains * draws:,} x {tally.n:,}); "
        "bayesldp.loo and loo_compare need no log_likelihood group",
    )
    if nbytes > LOG_LIKELIHOOD_WARN_BYTES:
        warnings.warn(
            f"idata_kwargs['log_likelihood']: the group holds {chains} x {draws:,} draws x "
            f"{tally.n:,} reports x {itemsize} bytes = {nbytes / 1e9:,.3g} GB (more than "
            f"{LOG_LIKELIHOOD_WARN_BYTES / 1e6:,.0f} MB; arviz.loo and compare need several "
            "times that); bayesldp.loo(idata) and loo_compare give the same PSIS-LOO exactly "
            "without it",
            LargeOutputWarning,
            stacklevel=stacklevel + 1,
        )


def _log_likelihood_group(theta: np.ndarray, tally: Tally, dtype: Any, chain_draw: dict) -> Any:
    """One value per *report* (PyMC's layout: one per observation), ``log(L_u . theta)`` for a
    report of row ``u``, so ``arviz.loo``, ``waic`` and ``compare`` count the ``N`` reports, not
    the distinct rows; ``chains * draws * N`` values, refused beyond memory."""
    import xarray as xr

    n_samples = theta.shape[0] * theta.shape[1]
    check_memory(
        n_samples * tally.n * np.dtype(dtype).itemsize,
        "idata_kwargs['log_likelihood']",
        f"it holds one value per draw and report ({n_samples:,} x {tally.n:,}); "
        "bayesldp.loo and loo_compare need no log_likelihood group",
    )
    with np.errstate(divide="ignore"):
        per_row = np.log(tally.row_dot(theta)).astype(dtype)
    values = np.repeat(per_row, tally.counts, axis=-1)
    report_row = np.repeat(np.arange(tally.n_rows), tally.counts)
    return xr.Dataset(
        {"counts": (("chain", "draw", "report"), values)},
        coords={**chain_draw, "report": np.arange(tally.n), "row": ("report", report_row)},
        attrs={"definition": "log(L_u . theta) for each report, u its distinct likelihood row"},
    )


def _resolve_idata_kwargs(idata_kwargs: object) -> dict[str, Any]:
    """Check ``fit(idata_kwargs=...)``: known keys, a bool and a dtype name; defaults filled."""
    if idata_kwargs is None:
        return dict(IDATA_KWARGS)
    if not isinstance(idata_kwargs, Mapping):
        raise InvalidTypeError(
            f"idata_kwargs: expected a dict with keys {sorted(IDATA_KWARGS)}, got "
            f"{type(idata_kwargs).__name__}"
        )
    unknown = sorted(str(key) for key in idata_kwargs if key not in IDATA_KWARGS)
    if unknown:
        raise InvalidInputError(
            f"idata_kwargs: unknown key(s) {unknown}; valid keys are {sorted(IDATA_KWARGS)}"
        )
    out = {**IDATA_KWARGS, **idata_kwargs}
    out["log_likelihood"] = check_bool(out["log_likelihood"], "idata_kwargs['log_likelihood']")
    dtype = out["dtype"]
    if dtype is float or (isinstance(dtype, type) and issubclass(dtype, np.floating)):
        dtype = np.dtype(dtype).name
    elif isinstance(dtype, np.dtype):
        dtype = dtype.name
    if not isinstance(dtype, str) or dtype not in IDATA_DTYPES:
        raise InvalidInputError(
            f"idata_kwargs['dtype']: expected one of {list(IDATA_DTYPES)}, got {dtype!r}"
        )
    out["dtype"] = dtype
    return out


def _standard_attrs() -> dict[str, Any]:
    """ArviZ's standard attrs of a group (``arviz.data.base.make_attrs``, as ``az.from_dict``
    and PyMC set them): ``created_at``, ``arviz_version``, ``inference_library`` and
    ``inference_library_version``."""
    az = import_arviz()
    library = {"inference_library": "bayesldp", "inference_library_version": __version__}
    try:
        from arviz.data.base import make_attrs
    except ImportError:  # pragma: no cover - depends on the ArviZ version
        import datetime

        return {
            "created_at": datetime.datetime.now(datetime.UTC).isoformat(),
            "arviz_version": az.__version__,
            **library,
        }
    return make_attrs(attrs=library)


def _json_default(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, set | frozenset | tuple):
        return list(value)
    return repr(value)


def to_json(value: Any) -> str:
    """JSON text of ``value`` (numpy arrays and scalars become lists and numbers)."""
    return json.dumps(value, default=_json_default, allow_nan=True)


def _fit_attrs(
    out: SamplerOutput,
    tally: Tally,
    prior: Prior,
    method: str,
    requested_method: str | None,
    random_seed: int | None,
) -> dict[str, Any]:
    mechanism = tally.mechanism
    params = mechanism.params() if mechanism is not None else {}
    return {
        VERSION_ATTR: __version__,
        "method": method,
        "requested_method": requested_method if requested_method is not None else method,
        "mechanism": repr(mechanism) if mechanism is not None else "None",
        "mechanism_params": to_json(params),
        "family": tally.family,
        "prior": prior.to_json(),
        "random_seed": -1 if random_seed is None else int(random_seed),
        "n_reports": tally.n,
        "n_rows": tally.n_rows,
        "tally_form": "support" if tally.is_support_form else "dense",
        "backend_info": to_json(out.info),
    }


def _constant_data(tally: Tally, prior: Prior, category: np.ndarray) -> Any:
    import xarray as xr

    coords: dict[str, Any] = {"category": category}
    if isinstance(prior, Dirichlet):
        data: dict[str, Any] = {"prior_alpha": (("category",), prior.alpha.copy())}
    elif isinstance(prior, LogWeightPrior):  # its parameters are the posterior attrs' "prior"
        data = {}
    else:  # the adaptive prior's grid on log a and its weights
        data = {"prior_log_a": (("a_grid",), prior.log_a.copy()),
                "prior_log_a_weight": (("a_grid",), prior.log_w.copy())}  # fmt: skip
        coords["a_grid"] = np.arange(prior.log_a.shape[0])
    mechanism = tally.mechanism
    if mechanism is not None:
        data["epsilon"] = ((), float(mechanism.epsilon))
        for name, value in mechanism.params().items():
            if name in ("k", "epsilon"):
                continue
            try:
                arr = np.asarray(value)
            except ValueError:  # ragged nested lists
                continue
            if arr.dtype.kind not in "biuf" or arr.size == 0:
                continue  # kept in the posterior attrs (mechanism_params)
            dims = tuple(f"{name}_dim_{i}" for i in range(arr.ndim))
            data[f"param_{name}"] = (dims, arr)
        channel = _small_channel(mechanism, tally.k)
        if channel is not None:
            data["channel"] = (("category", "report"), channel)
            coords["report"] = np.arange(channel.shape[1])
    return xr.Dataset(data, coords=coords)


def _small_channel(mechanism: Any, k: int) -> np.ndarray | None:
    try:
        channel = np.asarray(mechanism.channel, dtype=float)
    except (BayesLDPError, NotImplementedError, MemoryError):
        return None  # no small finite channel (NotSupportedError is a BayesLDPError)
    if channel.ndim != 2 or channel.shape[0] != k:
        return None
    if channel.size > MAX_CHANNEL_SIZE or not np.all(np.isfinite(channel)):
        return None
    return channel
