"""Every public name of the API reference has a numpydoc docstring with an ``Examples`` section
(run as doctests in CI: ``pytest --doctest-modules bayesldp``).

The public names are the ``__all__`` of the namespaces of docs/conf.py's ``API_MODULES``; a
module exported there (``bayesldp.bounds``) stands for its public functions and classes.  Data
(``__version__``, tables such as ``bayesldp.estimators.METHODS``) carry no docstring of their own.
"""

import ast
import importlib
import inspect
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = re.compile(r"^\s*Examples\n\s*-{8,}\n(?:.*\n)*?\s*>>> ", re.MULTILINE)


def _api_modules() -> list[str]:
    conf = ast.parse((ROOT / "docs" / "conf.py").read_text())
    for node in conf.body:
        if isinstance(node, ast.Assign) and any(
                getattr(t, "id", None) == "API_MODULES" for t in node.targets):  # fmt: skip
            return ast.literal_eval(node.value)
    raise AssertionError("docs/conf.py defines no API_MODULES")


def _module_members(module) -> dict[str, object]:
    """A module's public functions and classes: its ``__all__``, else those defined in it."""
    names = getattr(module, "__all__", None)
    if names is not None:
        return {name: getattr(module, name) for name in names}
    return {
        name: obj for name, obj in vars(module).items()
        if not name.startswith("_") and (inspect.isfunction(obj) or inspect.isclass(obj))
        and obj.__module__ == module.__name__
    }


def _public_objects() -> dict[str, object]:
    objects: dict[str, object] = {}
    for module_name in _api_modules():
        module = importlib.import_module(module_name)
        for name in module.__all__:
            obj = getattr(module, name)
            if inspect.ismodule(obj):
                for member, value in _module_members(obj).items():
                    objects.setdefault(f"{obj.__name__}.{member}", value)
            elif inspect.isclass(obj) or callable(obj):
                objects.setdefault(f"{module_name}.{name}", obj)
    return objects


PUBLIC = _public_objects()


def test_the_public_names_are_found():
    assert "bayesldp.GRR" in PUBLIC and "bayesldp.bounds.cramer_rao" in PUBLIC
    assert len(PUBLIC) > 150


@pytest.mark.parametrize("name", sorted(PUBLIC))
def test_docstring_has_examples(name):
    doc = inspect.cleandoc(PUBLIC[name].__doc__ or "")  # its own, not one inherited
    assert EXAMPLES.search(doc), f"{name}: no 'Examples' section with a doctest in its docstring"
