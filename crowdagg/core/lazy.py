"""Names a package hands on from its modules, imported on first use (``import crowdagg`` stays cheap)."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def exports(package: str, names: Mapping[str, str], fallback: str | None = None) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package``: ``names`` maps a public name to the module defining it.

    ``fallback`` is the module whose every other name the package also
    hands on (a module that became a package: its old names keep working).
    The value is cached in the package after the first access.
    """
    import sys

    def __getattr__(name: str) -> Any:
        module = names.get(name, fallback if not name.startswith("__") else None)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        try:
            value = getattr(importlib.import_module(module), name)
        except AttributeError:
            raise AttributeError(f"module {package!r} has no attribute {name!r}") from None
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__
