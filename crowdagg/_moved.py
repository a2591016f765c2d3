"""Import paths of modules that moved when the package was grouped by concern (0.2).

``import crowdagg.vocab`` still works and gives the module that now lives
at ``crowdagg.data.vocab`` -- the same module object, so its names,
monkeypatching and ``isinstance`` checks are shared -- with a
:class:`DeprecationWarning` naming the new path.  :data:`MOVED` is the one
record of the moves (the CHANGELOG's migration notes list the same).
"""

from __future__ import annotations

import importlib
import importlib.machinery
import sys
import warnings
from types import ModuleType
from typing import Any

#: Old module path -> the module that holds its names now.
MOVED: dict[str, str] = {
    "crowdagg.aggregators": "crowdagg.methods",
    "crowdagg.aggregators.base": "crowdagg.methods.base",
    "crowdagg.aggregators.ds": "crowdagg.methods.em.ds",
    "crowdagg.aggregators.mv": "crowdagg.methods.votes.mv",
    "crowdagg.aggregators.wmv": "crowdagg.methods.votes.wmv",
    "crowdagg.aggregators.wawa": "crowdagg.methods.votes.wawa",
    "crowdagg.checks": "crowdagg.core.checks",
    "crowdagg.columns": "crowdagg.io.columns",
    "crowdagg.evaluate": "crowdagg.reports.evaluate",
    "crowdagg.memory": "crowdagg.core.memory",
    "crowdagg.output": "crowdagg.io.output",
    "crowdagg.platforms": "crowdagg.io.platforms",
    "crowdagg.render": "crowdagg.io.render",
    "crowdagg.result": "crowdagg.methods.result",
    "crowdagg.vocab": "crowdagg.data.vocab",
    "crowdagg.workers": "crowdagg.methods.model_file",
    # the trainers grouped by family (crowdagg/learning/methods/<family>/)
    "crowdagg.learning.methods.crowdlayer": "crowdagg.learning.methods.coupled.crowdlayer",
    "crowdagg.learning.methods.tracereg": "crowdagg.learning.methods.coupled.tracereg",
    "crowdagg.learning.methods.geocrowdnet": "crowdagg.learning.methods.coupled.geocrowdnet",
    "crowdagg.learning.methods.raykar": "crowdagg.learning.methods.em.raykar",
    "crowdagg.learning.methods.soft_targets": "crowdagg.learning.soft_targets",
}

#: Names of an old module that went to another module than the rest of it (a split): old path -> name -> module.
SPLIT: dict[str, dict[str, str]] = {
    "crowdagg.aggregators.ds": {
        "OneCoinDawidSkene": "crowdagg.methods.em.onecoin",
        "gold_clamp": "crowdagg.methods.blocks",
    },
    "crowdagg.aggregators.base": {"one_coin_m_step": "crowdagg.methods.em.onecoin"},
}


class _Alias:
    """Finds an old path of :data:`MOVED` and loads it as the module at its new path.

    A meta path finder and its loader by protocol (``find_spec``, ``create_module``, ``exec_module``), not by
    subclassing :mod:`importlib.abc`, whose import costs ``import crowdagg`` about 9 ms.
    """

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if fullname not in MOVED:
            return None
        loader: Any = self  # a loader by protocol (see above)
        return importlib.machinery.ModuleSpec(fullname, loader, is_package=False)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> None:
        return None  # a placeholder module; exec_module puts the real one in its place

    def exec_module(self, module: ModuleType) -> None:
        new = MOVED[module.__name__]
        warnings.warn(f"{module.__name__} moved to {new}; import it from there (the old path goes in 1.0)",
                      DeprecationWarning, stacklevel=2)
        target = importlib.import_module(new)
        if module.__name__ in SPLIT:
            # A split module: a view that finds each name where it went (it is not the moved module itself).
            target = _SplitView(module.__name__, target, SPLIT[module.__name__])
        # The import system returns what sys.modules holds under the name after exec_module: the new module.
        sys.modules[module.__name__] = target


class _SplitView(ModuleType):
    """An old module whose names now live in two modules: each name read from where it went."""

    def __init__(self, name: str, main: ModuleType, elsewhere: dict[str, str]) -> None:
        super().__init__(name, main.__doc__)
        self._main, self._elsewhere = main, elsewhere

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        where = self._elsewhere.get(name)
        return getattr(importlib.import_module(where) if where else self._main, name)

    def __dir__(self) -> list[str]:
        return sorted(set(dir(self._main)) | set(self._elsewhere))


def install() -> None:
    """Put the alias finder first on ``sys.meta_path`` (once)."""
    if not any(isinstance(f, _Alias) for f in sys.meta_path):
        sys.meta_path.insert(0, _Alias())
