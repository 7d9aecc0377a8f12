"""The one list of mechanisms: names, classes, parameters, in the order users see them.

The command line (``audit``, ``recommend``, ``estimate``), the spec schema, the report readers
and ``bayesldp.__init__`` read this registry; each class declares its own parameters
(``PARAMETERS``), report layout (``reports_from_frame`` / ``reports_to_frame``) and report size.
Adding a mechanism takes its module (one file) and one line in ``MODULES`` below.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from bayesldp.errors import InvalidInputError, InvalidTypeError

if TYPE_CHECKING:
    from bayesldp.mechanisms.base import Mechanism, Parameter

#: canonical name -> module that defines the class of that name
MODULES: dict[str, str] = {
    "GRR": "bayesldp.mechanisms.grr",
    "SUE": "bayesldp.mechanisms.unary",
    "OUE": "bayesldp.mechanisms.unary",
    "BLH": "bayesldp.mechanisms.hashing",
    "OLH": "bayesldp.mechanisms.hashing",
    "BLHXX": "bayesldp.mechanisms.xxhash_lh",
    "OLHXX": "bayesldp.mechanisms.xxhash_lh",
    "SHE": "bayesldp.mechanisms.histogram",
    "THE": "bayesldp.mechanisms.histogram",
    "HadamardResponse": "bayesldp.mechanisms.hadamard",
    "RRRR": "bayesldp.mechanisms.rrrr",
    "SubsetSelection": "bayesldp.mechanisms.subset",
    "CMS": "bayesldp.mechanisms.sketch",
    "HCMS": "bayesldp.mechanisms.sketch",
    "SquareWave": "bayesldp.mechanisms.numerical.square_wave",
    "Piecewise": "bayesldp.mechanisms.numerical.piecewise",
    "LaplaceNumeric": "bayesldp.mechanisms.numerical.laplace",
    "Gaussian": "bayesldp.mechanisms.numerical.gaussian",
    "RAPPOR": "bayesldp.mechanisms.rappor.mechanism",
    "PCKV": "bayesldp.mechanisms.keyvalue",
    "PCKVPM": "bayesldp.mechanisms.keyvalue",
    "LGRR": "bayesldp.mechanisms.longitudinal.mechanism",
    "LSUE": "bayesldp.mechanisms.longitudinal.mechanism",
    "LOUE": "bayesldp.mechanisms.longitudinal.mechanism",
    "LOSUE": "bayesldp.mechanisms.longitudinal.mechanism",
    "LSOUE": "bayesldp.mechanisms.longitudinal.mechanism",
    "DBitFlipPM": "bayesldp.mechanisms.longitudinal.dbitflip",
}
#: other names users know (case-insensitive, like the canonical ones)
ALIASES: dict[str, str] = {
    "HR": "HadamardResponse",
    "DE": "GRR",
    "KRR": "GRR",
    "SS": "SubsetSelection",
    "SW": "SquareWave",
    "PM": "Piecewise",
    "Laplace": "LaplaceNumeric",
    "PCKV-GRR": "PCKV",
    "PCKV-PM": "PCKVPM",
    "L-GRR": "LGRR",
    "L-SUE": "LSUE",
    "L-OUE": "LOUE",
    "L-OSUE": "LOSUE",
    "L-SOUE": "LSOUE",
    "dBitFlip": "DBitFlipPM",
}


#: names users may try that are not report formats, with what to do instead
NOT_MECHANISMS: dict[str, str] = {
    "nodesampling": "node sampling is ignorable: a sampled node's report is its base "
    "mechanism's, so read the sampled reports with that mechanism (for example GRR; "
    "bayesldp estimate --nodes N --sampling PI adds the paper's unbiased oracle); "
    "bayesldp.NodeSampling gives the paper's count estimators in Python",
}


def names() -> tuple[str, ...]:
    """Canonical mechanism names, in registry order.

    Examples
    --------
    >>> from bayesldp.mechanisms import names
    >>> names()[:5]
    ('GRR', 'SUE', 'OUE', 'BLH', 'OLH')
    """
    return tuple(MODULES)


def canonical_name(name: Any) -> str:
    """The canonical name of ``name`` (case-insensitive; aliases such as "HR" resolved).

    Examples
    --------
    >>> from bayesldp.mechanisms import canonical_name
    >>> canonical_name("hr"), canonical_name("olh")
    ('HadamardResponse', 'OLH')
    """
    if not isinstance(name, str):
        raise InvalidTypeError(f"mechanism: expected a name, got {type(name).__name__}")
    lookup = {key.lower(): key for key in MODULES}
    lookup |= {alias.lower(): key for alias, key in ALIASES.items()}
    key = lookup.get(name.lower())
    if key is None:
        hint = NOT_MECHANISMS.get(name.lower())
        if hint is not None:
            raise InvalidInputError(f"mechanism: {name!r} is not a report format: {hint}")
        raise InvalidInputError(f"mechanism: unknown name {name!r}; valid: {', '.join(MODULES)}")
    return key


def mechanism_class(name: str) -> type[Mechanism]:
    """The mechanism class called ``name`` (case-insensitive; "HR" means HadamardResponse).

    Examples
    --------
    >>> from bayesldp.mechanisms import mechanism_class
    >>> mechanism_class("olh").__name__
    'OLH'
    """
    key = canonical_name(name)
    return getattr(importlib.import_module(MODULES[key]), key)


def parameters(name: str) -> tuple[Parameter, ...]:
    """The parameters the mechanism takes beyond ``k`` and ``epsilon``, as it declares them.

    Examples
    --------
    >>> from bayesldp.mechanisms import parameters
    >>> [p.name for p in parameters("OLH")]
    ['g']
    """
    return mechanism_class(name).PARAMETERS


def all_parameters() -> dict[str, Parameter]:
    """Every declared parameter of every registered mechanism, by name (for option parsers).

    Examples
    --------
    >>> from bayesldp.mechanisms import all_parameters
    >>> "g" in all_parameters()
    True
    """
    out: dict[str, Parameter] = {}
    for name in MODULES:
        for param in parameters(name):
            out.setdefault(param.name, param)
    return out


def rebuild_mechanism(name: str, params: dict[str, Any]) -> Mechanism:
    """The mechanism ``name`` from its :meth:`~bayesldp.mechanisms.base.Mechanism.params`
    (as stored in a fit's attrs or a tally store's manifest): its size (``params[cls.SIZE]``,
    "k" for most), ``epsilon`` and the rest as keywords.

    Examples
    --------
    >>> import bayesldp
    >>> from bayesldp.mechanisms import rebuild_mechanism
    >>> mech = bayesldp.OLH(10, 1.0, g=4)
    >>> mech.params()
    {'k': 10, 'epsilon': 1.0, 'g': 4}
    >>> rebuild_mechanism("OLH", mech.params()) == mech
    True
    """
    cls = mechanism_class(name)
    params = dict(params)
    return make_mechanism(name, params.pop(cls.SIZE), params.pop("epsilon"), **params)


def make_mechanism(name: str, k: int, epsilon: float, **params: Any) -> Mechanism:
    """Build a mechanism by name, e.g. ``make_mechanism("OLH", 100, 1.0, g=4)``.

    Parameters given as None are left at their defaults.  A parameter the mechanism does not
    take, or a missing required one, is an :class:`~bayesldp.errors.InvalidInputError` naming
    the parameters the mechanism takes.

    Examples
    --------
    >>> from bayesldp.mechanisms import make_mechanism
    >>> make_mechanism("OLH", 10, 1.0, g=4)
    OLH(k=10, epsilon=1, g=4)
    """
    cls = mechanism_class(name)
    declared = {param.name: param for param in cls.PARAMETERS}
    given = {key: value for key, value in params.items() if value is not None}
    takes = ", ".join(declared) if declared else "no parameter besides k and epsilon"
    unknown = sorted(set(given) - set(declared))
    if unknown:
        raise InvalidInputError(
            f"{cls.__name__}: does not take {', '.join(unknown)}; it takes {takes}"
        )
    missing = [key for key, param in declared.items() if param.required and key not in given]
    if missing:
        raise InvalidInputError(f"{cls.__name__}: needs {', '.join(missing)}; it takes {takes}")
    return cls(k, epsilon, **given)
