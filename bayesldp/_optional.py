"""Optional dependencies: import one, or say which extra installs it.

The scale-out paths (a directory or glob of report files, ``--scheduler``, the grid's dask
schedulers) need dask and distributed, and Parquet report files need pyarrow; a plain
``pip install bayesldp`` leaves them out (they weigh about half the install), so each is imported
here with an error naming ``pip install 'bayesldp[dask]'``; the live survey's web stack
(Starlette, uvicorn) comes with ``bayesldp[serve]``.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from bayesldp.errors import NotSupportedError

#: module -> the extra that installs it
EXTRAS = {
    "dask": "dask",
    "distributed": "dask",
    "pyarrow": "dask",
    "starlette": "serve",
    "uvicorn": "serve",
}


def require(module: str, what: str) -> ModuleType:
    """``import module``, or a :class:`NotSupportedError` saying that ``what`` needs it."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name is None or exc.name.split(".")[0] != module.split(".")[0]:
            raise
        top = module.split(".")[0]
        raise NotSupportedError(
            f"{what} needs {top}, which is not installed: pip install 'bayesldp[{EXTRAS[top]}]'"
        ) from None
