"""The registry: every method's declaration, found in its family, and its class imported only on use.

A method is declared where it lives.  Each family package under
``crowdagg/methods/`` (``votes/``, ``em/``, ...) declares its methods in its
``__init__.py`` as a tuple ``DECLARATIONS`` of :class:`Method` -- name,
kind, engines, optional extra, the class as ``"module:Class"``, summary,
model, reference, parameters (:class:`~crowdagg.methods.params.Param`) and
a listing rank -- using the standard library only.  The registry finds the
families (:func:`pkgutil.iter_modules` over ``crowdagg/methods/``) and
imports each family's ``__init__`` -- never a method module -- so listing,
help and validation import no method code, numpy-heavy library or numba.
A method's module is imported when its class is asked for
(:meth:`Method.load`, :data:`REGISTRY`, :func:`get_method`).

Adding a method: its module (the mathematics) in a family package and one
:class:`Method` in that family's ``DECLARATIONS``; a new family is a new
package with the same two parts.  Nothing else changes: the CLI's options,
``crowdagg methods`` and the library's checks come from the declaration.

Failure stays local: a family whose ``__init__`` fails to import is left
out (:func:`failures` says why; asking for a method it does not list names
the failure), and a method whose optional extra is missing or whose module
fails to import fails when loaded, with a
:class:`~crowdagg.errors.UsageError` naming the extra to install or the
import error, while the others work.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Iterator, Mapping, MutableMapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..errors import UsageError, param
from .params import Param

if TYPE_CHECKING:  # pragma: no cover
    from .base import Aggregator

#: What each kind of method takes and gives (``crowdagg methods NAME`` shows these words).
KINDS: dict[str, str] = {
    "categorical": "categorical aggregator (answers -> one label per task)",
    "numeric": "numeric aggregator (numeric answers -> one value per task)",
    "trainer": "trainer (features + answers -> a model)",
}

#: Where a method can run: in this process (``local``).  The Dask engine adds ``dask``.
ENGINES = ("local",)

#: The optional extras of ``pyproject.toml`` a method may require, and the modules each installs.
EXTRAS: dict[str, tuple[str, ...]] = {"train": ("torch",)}


#: The parameters the CLI has flags for (``--seed``, ``--max-iter``, ``--tol``).
COMMON_FLAGS = ("seed", "max_iter", "tol")

SEED = Param("seed", int, 0, "seed of every random choice (tie-breaks, restarts)", 0, 2**63 - 1)


def max_iter(default: int, paper: str = "") -> Param:
    return Param("max_iter", int, default, "iteration cap", 1, 10**7, paper)


def tol(default: float) -> Param:
    return Param("tol", float, default, "stop when the relative objective change is below this; 0 runs max_iter", 0.0, 0.5)


N_INIT = Param("n_init", int, 1, "starts of EM (the first from majority vote, the others seeded random); the best "
               "log-likelihood is kept", 1, 1000)

#: The start strategies an iterative method's ``init`` names besides another method (crowdagg.methods.starts).
START_CHOICES = ("soft-vote", "hard-vote")

INIT = Param("init", "method", "soft-vote", "how EM starts: soft-vote (vote shares), hard-vote (one-hot majority "
             "labels), or another method's name (its output, unrefined)", choices=START_CHOICES)


@dataclass(frozen=True)
class Method:
    """A method's declaration: what ``crowdagg methods`` shows and where its class lives.

    ``kind`` is a key of :data:`KINDS`; ``engines`` are names from
    :data:`ENGINES`; ``requires`` names an optional extra (a key of
    :data:`EXTRAS`) the method cannot run without; ``gold`` says it takes
    known labels that clamp tasks, ``init_workers`` that it saves a worker
    model and starts from one.  Methods are listed by ``rank`` (then name):
    mv 10, wmv 20, wawa 30, ds 40, onecoin 50.
    """

    name: str
    target: str  # "module:Class", imported on first use
    summary: str
    model: str
    reference: str
    params: tuple[Param, ...] = ()
    gold: bool = False  # takes --gold (known labels that clamp tasks)
    init_workers: bool = False  # can start from a saved worker model (--init-workers) and save one
    kind: str = "categorical"
    engines: tuple[str, ...] = ("local",)
    requires: str = ""  # an optional extra ("train"), checked without importing it
    rank: int = 1000

    def __post_init__(self) -> None:
        # Declaration errors are the method author's: they fail the family's import, which fails alone.
        module, _, cls = self.target.partition(":")
        if not module or not cls:
            raise TypeError(f"method {self.name!r}: target must be 'module:Class', got {self.target!r}")
        if self.kind not in KINDS:
            raise TypeError(f"method {self.name!r}: kind must be one of {', '.join(KINDS)}, got {self.kind!r}")
        if not self.engines or any(e not in ENGINES for e in self.engines):
            raise TypeError(f"method {self.name!r}: engines must be among {', '.join(ENGINES)}, got {self.engines!r}")
        if self.requires and self.requires not in EXTRAS:
            raise TypeError(f"method {self.name!r}: requires an unknown extra {self.requires!r}; extras: "
                            + ", ".join(EXTRAS))
        names = [p.name for p in self.params]
        if len(set(names)) != len(names):
            raise TypeError(f"method {self.name!r}: a parameter is declared twice in {names}")

    @property
    def param_names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.params)

    def param(self, name: str) -> Param:
        for p in self.params:
            if p.name == name:
                return p
        raise UsageError(
            f"method {self.name!r} does not take {param(name)}; it takes: "
            + ", ".join(param(p) for p in self.param_names)
        )

    def missing(self) -> tuple[str, ...]:
        """The modules of the required extra that are not installed (found, not imported; ``()``: none)."""
        from importlib.util import find_spec

        return tuple(m for m in EXTRAS.get(self.requires, ()) if find_spec(m) is None)

    def load(self) -> type[Aggregator]:
        """The method's class (imports its module).

        Raises :class:`~crowdagg.errors.UsageError` when the required extra
        is not installed (naming the ``pip install`` that adds it) or when
        the module fails to import (naming the error; chained to it).
        """
        missing = self.missing()
        if missing:
            raise UsageError(
                f"method {self.name!r} needs the optional extra {self.requires!r} ({', '.join(missing)} "
                f"not installed): pip install 'crowdagg[{self.requires}]'"
            )
        module, _, cls = self.target.partition(":")
        try:
            return getattr(importlib.import_module(module), cls)  # type: ignore[no-any-return]
        except Exception as exc:  # noqa: BLE001 - whatever breaks the module, this method alone fails
            raise UsageError(
                f"method {self.name!r} is unavailable: importing {self.target} failed ({type(exc).__name__}: {exc})"
            ) from exc


class UnknownMethod(UsageError, KeyError):
    """No method is registered under a name (a :class:`~crowdagg.errors.UsageError` and a ``KeyError``).

    A ``KeyError`` so that :data:`METHODS` and :data:`REGISTRY` behave as mappings (``.get``, ``in``);
    its text is the usage error's (``_Worded.__str__`` comes before ``KeyError.__str__``).
    """


class _Declarations(MutableMapping[str, Method]):
    """Name -> :class:`Method`, in listing order; the families are found on first use.

    Discovery imports each subpackage of ``crowdagg.methods`` (its
    ``__init__`` only) and collects its ``DECLARATIONS``; a package without
    them is not a family.  A family that fails to import, or declares a
    name another family has, is left out and recorded in :func:`failures`.
    A declaration may also be set (and deleted) at run time --
    ``METHODS["mine"] = Method("mine", ...)``, as tests do -- and is listed
    by its rank like the others.
    """

    def __init__(self) -> None:
        self._methods: dict[str, Method] | None = None
        self._failures: dict[str, str] = {}
        self._lock = threading.RLock()  # re-entrant: a family whose import asks the registry cannot deadlock

    def _found(self) -> dict[str, Method]:
        if self._methods is None:
            with self._lock:
                if self._methods is None:
                    self._methods = self._discover()
        return self._methods

    def _discover(self) -> dict[str, Method]:
        import pkgutil
        import sys

        package = __name__.rpartition(".")[0]
        found: dict[str, tuple[Method, str]] = {}
        for info in pkgutil.iter_modules(sys.modules[package].__path__, package + "."):
            if not info.ispkg:
                continue
            try:
                declared = getattr(importlib.import_module(info.name), "DECLARATIONS", None)
                if declared is None:
                    continue  # a package of shared pieces, not a family
                if not isinstance(declared, tuple) or not all(isinstance(m, Method) for m in declared):
                    raise TypeError("DECLARATIONS must be a tuple of Method")
                taken = [f"{m.name!r} (declared by {found[m.name][1]})" for m in declared if m.name in found]
                if taken:
                    raise TypeError("it declares a method name already taken: " + ", ".join(taken))
            except Exception as exc:  # noqa: BLE001 - whatever breaks a family, the others still list
                self._failures[info.name] = f"{type(exc).__name__}: {exc}"
                continue
            found.update((m.name, (m, info.name)) for m in declared)
        ranked = sorted((m for m, _ in found.values()), key=lambda m: (m.rank, m.name))
        return {m.name: m for m in ranked}

    def __getitem__(self, name: str) -> Method:
        try:
            return self._found()[name]
        except (KeyError, TypeError):  # TypeError: an unhashable name
            pass
        failed = failures()
        why = "".join(f"; {family} failed to declare its methods ({reason})" for family, reason in failed.items())
        raise UnknownMethod(f"unknown method {name!r}; valid methods: {', '.join(self)}{why}") from None

    def __setitem__(self, name: str, spec: Method) -> None:
        if not isinstance(spec, Method) or spec.name != name:
            raise TypeError(f"METHODS[{name!r}] takes a Method named {name!r}, got {spec!r}")
        found = self._found()
        found[name] = spec
        ranked = sorted(found.values(), key=lambda m: (m.rank, m.name))
        found.clear()
        found.update((m.name, m) for m in ranked)

    def __delitem__(self, name: str) -> None:
        del self._found()[name]

    def __contains__(self, name: object) -> bool:
        try:
            return name in self._found()
        except TypeError:
            return False

    def __iter__(self) -> Iterator[str]:
        return iter(self._found())

    def __len__(self) -> int:
        return len(self._found())

    def __repr__(self) -> str:
        failed = "".join(f"; {family} failed ({reason})" for family, reason in failures().items())
        return f"<declared methods: {', '.join(self)}{failed}>"


#: Every declared method, name -> :class:`Method`, in listing order (declarations only: no method code).
METHODS: MutableMapping[str, Method] = _Declarations()


def failures() -> dict[str, str]:
    """Family packages left out of :data:`METHODS`, and why (``"ImportError: ..."``); empty when all loaded."""
    METHODS._found()  # type: ignore[attr-defined]
    return dict(METHODS._failures)  # type: ignore[attr-defined]


def get(name: str) -> Method:
    """The method registered as ``name`` (:class:`UnknownMethod`, a :class:`~crowdagg.errors.UsageError`, if none)."""
    return METHODS[name]


class _Classes(Mapping[str, "type[Aggregator]"]):
    """Name -> method class, each imported when asked for; listing and ``in`` import nothing."""

    def __getitem__(self, name: str) -> type[Aggregator]:
        return get(name).load()

    def __contains__(self, name: object) -> bool:
        return name in METHODS

    def __iter__(self) -> Iterator[str]:
        return iter(METHODS)

    def __len__(self) -> int:
        return len(METHODS)

    def __repr__(self) -> str:
        return f"<method classes, imported on use: {', '.join(self)}>"


#: Every registered method's class by name, imported on access: ``REGISTRY["ds"]`` imports
#: :mod:`crowdagg.methods.em.ds` alone; ``list(REGISTRY)`` imports nothing.
REGISTRY: Mapping[str, type[Aggregator]] = _Classes()


def get_method(name: str) -> type[Aggregator]:
    """The class registered under ``name``, its module imported now (see :meth:`Method.load` for errors)."""
    return get(name).load()


__all__ = [
    "Param", "Method", "METHODS", "REGISTRY", "KINDS", "ENGINES", "EXTRAS", "COMMON_FLAGS", "UnknownMethod",
    "get", "get_method", "failures",
]
