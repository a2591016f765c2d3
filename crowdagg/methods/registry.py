"""The registry: every method's declaration, found in its family, and its class imported only on use.

A method is declared where it lives.  Each family package under
``crowdagg/methods/`` (``votes/``, ``em/``, ...) declares its methods in its
``__init__.py`` as a tuple ``DECLARATIONS`` of :class:`Method` -- name,
kind, engines, optional extra, the class as ``"module:Class"``, summary,
model, reference, parameters (:class:`Param`) and a listing rank -- using
the standard library only.  The registry finds the
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

Each parameter is declared once, as a :class:`Param` (name, kind, default,
help, range or choices, the paper's name for it): the library's checks
(:meth:`Param.check`), the CLI's ``-p name=value`` (:meth:`Param.parse`)
and the help come from it.  Its kind is one of

==============  =====================================================  ======================
kind            library value (:meth:`Param.check`)                    CLI text (``-p n=v``)
==============  =====================================================  ======================
``int``         an integer in [``low``, ``high``]                      ``5``
``float``       a finite number in [``low``, ``high``]                 ``0.5``, ``1e-6``
``bool``        ``True`` or ``False``                                  true/false, yes/no, 1/0
``"choice"``    one of ``choices`` (strings)                           ``hard-vote``
``"text"``      a string                                               anything, verbatim
``"numbers"``   a sequence of finite numbers, each in [low, high]      ``0.9,0.1``
``"method"``    a registered method's name, or one of ``choices``      ``ds``, ``soft-vote``
``"methods"``   registered method names (a sequence, or one string     ``mv,ds``
                of comma-separated names), each at most once
``"path"``      a non-empty string or path-like (read where used)      ``model.json``
``"device"``    ``cpu``, ``cuda``, ``cuda:N`` or ``auto`` (syntax      ``cuda:1``
                only: availability is the trainer's business)
==============  =====================================================  ======================

A parameter whose declared default is ``None`` is optional: ``None`` passes
:meth:`Param.check` and means "not given".  Messages name the parameter
through :func:`crowdagg.errors.param`, so the library says ``init`` and the
CLI ``-p init``; :meth:`Param.parse` (CLI text) words the expected form for
text (``comma-separated numbers``), :meth:`Param.check` (Python values) for
Python (``a sequence of numbers``).
"""

from __future__ import annotations

import importlib
import math
import os
import re
import sys
import threading
from collections.abc import Iterator, Mapping, MutableMapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from ..errors import UsageError, param

# --------------------------------------------------------------------------- parameters
#: The kinds declared by a string (``int``, ``float`` and ``bool`` are declared by the type).
PARAM_KINDS = ("choice", "text", "numbers", "method", "methods", "path", "device")

_DEVICE = re.compile(r"(cpu|cuda|auto|cuda:[0-9]+)\Z")
_TRUE, _FALSE = ("true", "1", "yes"), ("false", "0", "no")


@dataclass(frozen=True)
class Param:
    """One declared parameter of a method.

    ``kind`` is ``int``, ``float``, ``bool`` or one of :data:`PARAM_KINDS`
    (see the module docstring).  ``low``/``high`` bound an ``int``, a
    ``float`` or each element of ``"numbers"``; ``choices`` are the allowed
    values of a ``"choice"`` and the values a ``"method"`` or ``"methods"``
    accepts besides method names.  ``paper`` is the symbol or name the
    method's paper uses for it.  ``size``: how many values a ``"numbers"``
    takes (0: any number of them, at least one).
    """

    name: str
    kind: type | str
    default: Any
    help: str
    low: float = -math.inf
    high: float = math.inf
    paper: str = ""
    choices: tuple[str, ...] = ()
    size: int = 0

    def __post_init__(self) -> None:
        # A declaration error is the method author's: it fails the family's import, which fails alone.
        if not isinstance(self.name, str) or not self.name.isidentifier():
            cli = f" (the CLI's -p {self.name}=... sets {self.name.replace('-', '_')})" if "-" in str(self.name) else ""
            raise TypeError(f"parameter {self.name!r}: a name must be a Python identifier{cli}")
        if self.kind not in (int, float, bool) and self.kind not in PARAM_KINDS:
            raise TypeError(f"parameter {self.name!r}: unknown kind {self.kind!r}; kinds: int, float, bool, "
                            + ", ".join(PARAM_KINDS))
        if self.kind == "choice" and not self.choices:
            raise TypeError(f"parameter {self.name!r}: a choice needs its choices")
        if not isinstance(self.choices, tuple) or not all(isinstance(c, str) for c in self.choices):
            raise TypeError(f"parameter {self.name!r}: choices must be a tuple of strings")

    # ------------------------------------------------------------------ checking Python values
    def check(self, value: Any) -> Any:
        """``value`` validated and normalised (a :class:`~crowdagg.errors.UsageError` naming the parameter otherwise).

        ``"numbers"`` and ``"methods"`` come back as tuples, ``"path"`` as
        a string; the other kinds as they were given.
        """
        if value is None and self.default is None:
            return None  # optional and not given
        kind = self.kind
        if kind is int or kind is float:
            return self._check_number(value)
        if kind is bool:
            np = sys.modules.get("numpy")  # numpy's bool (a DataFrame cell, a config array), as int takes numpy's ints
            if not isinstance(value, bool) and not (np is not None and isinstance(value, np.bool_)):
                raise UsageError(f"{param(self.name)} must be true or false, got {_shown(value)}")
            return bool(value)
        if kind == "numbers":
            return self._check_numbers(value)
        if kind == "methods":
            names = [n.strip() for n in value.split(",")] if isinstance(value, str) else value
            return self._check_methods(names, value)
        if kind == "path":
            if isinstance(value, os.PathLike):
                value = os.fspath(value)
            if not isinstance(value, str) or not value.strip():
                raise self._error(value)
            return value
        if kind == "text":
            if not isinstance(value, str):
                raise self._error(value)
            return value
        if kind == "method" and (_is_array(value) or _is_result(value)):
            return value  # a posterior or a fitted result given in the library: the method checks it against the data
        if not isinstance(value, str) or not self._accepts(value):
            raise self._error(value)
        return _canonical_device(value) if kind == "device" else value

    def _check_number(self, value: Any) -> int | float:
        """An ``int`` or ``float`` parameter's value, in its declared bounds (either may be infinite).

        An int's bounds are the integers within the declared ones (``low=0.5`` allows 1); a number too
        large for a float (``10**400``) is out of range, not an OverflowError.
        """
        import operator

        integer = self.kind is int
        lo = -math.inf if math.isinf(self.low) else (math.ceil(self.low) if integer else self.low)
        hi = math.inf if math.isinf(self.high) else (math.floor(self.high) if integer else self.high)
        show = str if integer else (lambda v: f"{v:g}")
        if math.isfinite(lo) and math.isfinite(hi):
            bounds = f" in [{show(lo)}, {show(hi)}]"
        else:
            bounds = f" >= {show(lo)}" if math.isfinite(lo) else f" <= {show(hi)}" if math.isfinite(hi) else ""
        what = "an integer" if integer else "a finite number"
        wrong = UsageError(f"{param(self.name)} must be {what}{bounds}, got {_shown(value)}")
        if isinstance(value, (bool, str, bytes)):  # text is the CLI's to read (parse), not float()'s
            raise wrong
        try:
            number = int(operator.index(value)) if integer else float(value) + 0.0  # + 0.0: -0.0 is 0.0
        except (TypeError, ValueError, OverflowError):
            raise wrong from None
        if (not integer and not math.isfinite(number)) or not lo <= number <= hi:
            raise wrong
        return number

    def _accepts(self, value: str) -> bool:
        """Whether one name is allowed (``"choice"``, ``"method"``, ``"device"``)."""
        if self.kind == "device":
            return _DEVICE.match(value) is not None
        if value in self.choices:
            return True
        # any method's name passes here, so that a method of another kind gets its own error from its user
        # (starts.resolve_init: "... is not a categorical aggregator"), not the list of valid names
        return self.kind in ("method", "methods") and value in METHODS

    def _check_numbers(self, value: Any, shown: Any = None, cli: bool = False) -> tuple[float, ...]:
        shown = value if shown is None else shown
        if not isinstance(value, (list, tuple)) and not (_is_array(value) and value.ndim == 1):
            raise self._error(shown, cli)
        out = []
        for v in value:
            if isinstance(v, (bool, str, bytes)):
                raise self._error(shown, cli)
            try:
                f = float(v)
            except (TypeError, ValueError, OverflowError):  # OverflowError: an int beyond a float's range
                raise self._error(shown, cli) from None
            if not math.isfinite(f) or not self.low <= f <= self.high:
                raise self._error(shown, cli)
            out.append(f + 0.0)  # -0.0 is 0.0
        if not out:
            raise self._error(shown, cli)
        if self.size and len(out) != self.size:
            count = {2: "two", 3: "three"}.get(self.size, str(self.size))
            raise UsageError(f"{param(self.name)} takes {count} numbers, got {len(out)}: {self.help}")
        return tuple(out)

    def _check_methods(self, names: Any, shown: Any, cli: bool = False) -> tuple[str, ...]:
        if not isinstance(names, (list, tuple)) or not names:
            raise self._error(shown, cli)
        seen: list[str] = []
        for name in names:
            if not isinstance(name, str) or not self._accepts(name):
                raise self._error(shown, cli)
            if name in seen:
                raise UsageError(f"{param(self.name)} lists {name!r} twice")
            seen.append(name)
        return tuple(seen)

    def _error(self, value: Any, cli: bool = False) -> UsageError:
        return UsageError(f"{param(self.name)} must be {self.describe_type(cli)}, got {_shown(value)}")

    # ------------------------------------------------------------------ parsing CLI text
    def parse(self, text: str) -> Any:
        """A value given as text (``-p name=value``), converted to the declared kind and checked."""
        kind = self.kind
        if kind in ("text", "path"):  # verbatim: a name may hold spaces
            if kind == "path" and not text.strip():
                raise self._error(text, cli=True)
            return text
        value = text.strip()
        if kind == "numbers":
            try:
                numbers = [_number(p.strip(), float) for p in value.split(",")]
            except ValueError:
                raise self._error(text, cli=True) from None
            return self._check_numbers(numbers, text, cli=True)
        if kind == "methods":
            return self._check_methods([p.strip() for p in value.split(",")], text, cli=True)
        if isinstance(kind, str):  # choice, method, device: the stripped text is the value
            if not self._accepts(value):
                raise self._error(text, cli=True)
            return _canonical_device(value) if kind == "device" else value
        wrong = UsageError(f"{param(self.name)} must be {self.describe_type()}, got {text!r}")
        if kind is bool:
            if value.lower() not in _TRUE + _FALSE:
                raise wrong
            return value.lower() in _TRUE
        try:
            number = _number(value, kind)
        except ValueError:
            raise wrong from None
        return self.check(number)

    # ------------------------------------------------------------------ wording
    @property
    def kind_name(self) -> str:
        """``int``, ``float``, ``bool``, ``choice``, ...: the kind as help and tables show it."""
        return self.kind if isinstance(self.kind, str) else self.kind.__name__

    def describe_type(self, cli: bool = False) -> str:
        """What a value must be, as in "n_init must be *an integer*" (``cli``: as command-line text)."""
        kind = self.kind
        if kind is int:
            return "an integer"
        if kind is float:
            return "a number"
        if kind is bool:
            return "true or false"
        if kind == "choice":
            return "one of " + ", ".join(self.choices)
        if kind == "text":
            return "text" if cli else "a string"
        if kind == "path":
            return "a file path"
        if kind == "device":
            return "cpu, cuda, cuda:N (N = 0, 1, ...) or auto"
        if kind == "numbers":
            what = "comma-separated numbers" if cli else "a sequence of numbers"
            bounds = self.describe_range()
            return what + (f", {bounds}" if bounds else "")
        methods = ", ".join(_method_names())
        if kind == "method":
            return (", ".join(self.choices) + " or " if self.choices else "") + f"a method ({methods})"
        what = "comma-separated methods" if cli else "a list of methods"
        return what + (" or " + ", ".join(self.choices) if self.choices else "") + f" ({methods}), each once"

    def describe_range(self) -> str:
        """The allowed values in short, for help and tables (``1 .. 1000``, ``>= 0``; ``""`` where none)."""
        kind = self.kind
        if kind == "choice":
            return "one of " + ", ".join(self.choices)
        if kind == "method":
            return ", ".join(self.choices) + " or a method" if self.choices else "a method"
        if kind == "methods":
            return "registered methods" + (" or " + ", ".join(self.choices) if self.choices else "")
        if kind == "device":
            return "cpu, cuda, cuda:N or auto"
        if kind not in (int, float, "numbers"):
            return ""
        lo, hi = self.low, self.high
        if math.isinf(lo) and math.isinf(hi):
            return ""
        if kind is int:  # the integers within the declared bounds, as check() allows them
            lo, hi = (lo if math.isinf(lo) else math.ceil(lo)), (hi if math.isinf(hi) else math.floor(hi))
        fmt = (lambda v: str(int(v))) if kind is int else (lambda v: f"{v:g}")
        each = "each " if kind == "numbers" else ""
        if math.isinf(hi):
            return f"{each}>= {fmt(lo)}"
        if math.isinf(lo):
            return f"{each}<= {fmt(hi)}"
        return f"{each}{fmt(lo)} .. {fmt(hi)}"

    def describe_default(self) -> str:
        """The default as help shows it: ``200``, ``1e-06``, ``'soft-vote'``, ``0.9,0.1``, ``none``."""
        if self.default is None:
            return "none"
        if self.kind == "numbers" or self.kind == "methods":
            return ",".join(f"{v:g}" if isinstance(v, float) else str(v) for v in self.default)
        return repr(self.default)


def _number(text: str, kind: type) -> Any:
    """``text`` read as ``kind`` (int or float); ValueError for what is not how a number is written here.

    Python's ``int``/``float`` also read "1_0" and non-ASCII digits ("\u0663"): refused.
    """
    if not text.isascii() or "_" in text:
        raise ValueError(text)
    return kind(text)


def _canonical_device(value: str) -> str:
    """``cuda:01`` as ``cuda:1``: the device torch reads, spelled one way (for messages, saved settings)."""
    name, _, index = value.partition(":")
    return f"{name}:{int(index)}" if index else value


def _shown(value: Any) -> str:
    """``value`` as an error message shows it: its repr (a string's always: one line, as typed), or its type
    when that is long or spans lines (a list of rows, a DataFrame: an error is one line)."""
    text = repr(value)
    if not isinstance(value, str) and (len(text) > 60 or "\n" in text):
        name = type(value).__name__
        return f"{'an' if name[:1].lower() in 'aeiou' else 'a'} {name}"
    return text


def _is_array(value: Any) -> bool:
    """Whether ``value`` is a numpy array (without importing numpy: an array means numpy is loaded)."""
    import sys

    np = sys.modules.get("numpy")
    return np is not None and isinstance(value, np.ndarray)


def _is_result(value: Any) -> bool:
    """Whether ``value`` is a fitted :class:`~crowdagg.methods.result.AggregationResult` (a start from another
    method's output, given in the library; without importing the result module: a result means it is loaded)."""
    import sys

    result = sys.modules.get("crowdagg.methods.result")
    return result is not None and isinstance(value, result.AggregationResult)


def _method_names() -> tuple[str, ...]:
    """The categorical methods' names, which a ``method``/``methods`` parameter takes (an EM start, auto's
    candidates: labels for every task); declarations only, no method code is imported."""
    return tuple(name for name, spec in METHODS.items() if spec.kind == "categorical")


# --------------------------------------------------------------------------- methods
#: What each kind of method takes and gives (``crowdagg methods NAME`` shows these words).
KINDS: dict[str, str] = {
    "categorical": "categorical aggregator (answers -> one label per task)",
    "numeric": "numeric aggregator (numeric answers -> one value per task)",
    "trainer": "trainer (features + answers -> a model)",
}

#: Where a method can run: in this process (``local``), or on a Dask cluster (``dask``: its answers in partitions
#: on the workers, :mod:`crowdagg.engine.dask`; ``pip install 'crowdagg[dask]'``).
ENGINES = ("local", "dask")

#: The optional extras of ``pyproject.toml`` a method may require, and the modules each installs.
EXTRAS: dict[str, tuple[str, ...]] = {"train": ("torch", "safetensors")}


#: Names a parameter may not have: :func:`crowdagg.aggregate`'s own arguments (it would take the value for
#: itself) and the inputs the base class takes for methods declared with ``gold``/``init_workers``.
RESERVED = ("data", "method", "numeric", "callback", "max_memory", "task_col", "worker_col", "label_col", "gold",
            "init_workers", "engine", "client", "partitions")

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
class ModuleGroup:
    """A trainer's own modules that share optimiser settings (one Adam parameter group), declared with it.

    ``name`` is the key of the modules in the trainer's ``_build`` (and in
    its saved state); ``lr`` names the declared ``float`` parameter that
    sets the group's learning rate as a multiple of ``lr`` (``""``: ``lr``
    itself); ``weight_decay`` is the group's own (the classifier's is the
    ``weight_decay`` parameter).  ``crowdagg methods NAME`` lists the groups.
    """

    name: str
    lr: str = ""
    weight_decay: float = 0.0
    help: str = ""

    def describe(self) -> str:
        rate = f"lr × {self.lr}" if self.lr else "lr"
        decay = f", weight decay {self.weight_decay:g}" if self.weight_decay else ", no weight decay"
        return f"{self.name} ({rate}{decay})" + (f": {self.help}" if self.help else "")


@dataclass(frozen=True)
class Method:
    """A method's declaration: what ``crowdagg methods`` shows and where its class lives.

    ``kind`` is a key of :data:`KINDS`; ``engines`` are names from
    :data:`ENGINES`; ``requires`` names an optional extra (a key of
    :data:`EXTRAS`) the method cannot run without; ``gold`` says it takes
    known labels that clamp tasks, ``init_workers`` that it saves a worker
    model and starts from one.  Methods are listed by ``rank`` (then name):
    mv 10, wmv 20, wawa 30, ds 40, onecoin 50.

    ``quick_params`` are the method's cheap settings for tests (fewer
    iterations, restarts or samples, a smaller network, fewer epochs): a few
    of its declared parameters, checked as the library checks them, that
    keep every part of the method running at a fraction of its defaults'
    cost.  The registry-wide tests (``tests/``) fit every method with them,
    so a new method is tested quickly without its name in a test.  Not a
    recommendation for real data.
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
    quick_params: Mapping[str, Any] = field(default_factory=dict, hash=False)  # cheap settings for tests
    groups: tuple[ModuleGroup, ...] = ()  # a trainer's own module groups, each with its optimiser settings

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
        reserved = [n for n in names if n in RESERVED]
        if reserved:
            raise TypeError(f"method {self.name!r}: parameter {reserved[0]!r} is a name aggregate() and the CLI keep "
                            "for themselves")
        if len(set(names)) != len(names):
            raise TypeError(f"method {self.name!r}: a parameter is declared twice in {names}")
        self._check_groups(names)
        # read-only and the declaration's own (families share one dict of settings between their methods)
        object.__setattr__(self, "quick_params", MappingProxyType(dict(self.quick_params)))
        for name, value in self.quick_params.items():
            if name not in names:
                raise TypeError(f"method {self.name!r}: quick_params sets {name!r}, which it does not declare")
            declared = self.params[names.index(name)]
            if declared.kind not in ("method", "methods"):  # those are checked against the registry, being built
                try:
                    declared.check(value)
                except UsageError as exc:
                    raise TypeError(f"method {self.name!r}: quick_params: {exc}") from None

    def _check_groups(self, names: list[str]) -> None:
        """A trainer's module groups: unique names (not ``network``, the classifier's), each ``lr`` a declared
        float parameter."""
        if self.groups and self.kind != "trainer":
            raise TypeError(f"method {self.name!r}: module groups are a trainer's (kind 'trainer')")
        seen = [g.name for g in self.groups]
        if len(set(seen)) != len(seen) or "network" in seen:
            raise TypeError(f"method {self.name!r}: module group names must be unique and not 'network', got {seen}")
        for g in self.groups:
            if g.lr and (g.lr not in names or self.params[names.index(g.lr)].kind is not float):
                raise TypeError(f"method {self.name!r}: module group {g.name!r} takes its lr from {g.lr!r}, which is "
                                "not a declared float parameter")

    @property
    def param_names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.params)

    def param(self, name: str) -> Param:
        for p in self.params:
            if p.name == name:
                return p
        raise UsageError(
            f"method {self.name!r} does not take {param(name)}; it takes: "
            + (", ".join(param(p) for p in self.param_names) or "no parameters")
        )

    def missing(self) -> tuple[str, ...]:
        """The modules of the required extra that are not installed (found, not imported; ``()``: none)."""
        from importlib.util import find_spec

        return tuple(m for m in EXTRAS.get(self.requires, ()) if find_spec(m) is None)

    def load(self) -> type:
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
        except (Exception, SystemExit) as exc:  # noqa: BLE001 - whatever breaks the module, this method alone fails
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

    Discovery imports each subpackage of its package (``crowdagg.methods``
    for the aggregators, ``crowdagg.learning`` for the trainers; its
    ``__init__`` only) and collects its ``DECLARATIONS``; a package without
    them is not a family, and a family declaring a kind the package does
    not hold fails.  A name registered in the other mapping is refused
    with a message that says which command takes it.  A family that fails to import, or declares a
    name another family has, is left out and recorded in :func:`failures`.
    A declaration may also be set (and deleted) at run time --
    ``METHODS["mine"] = Method("mine", ...)``, as tests do -- and is listed
    by its rank like the others.
    """

    def __init__(self, package: str = "crowdagg.methods", kinds: tuple[str, ...] = ("categorical", "numeric"),
                 what: str = "aggregation method", command: str = "crowdagg aggregate", other: str = "") -> None:
        self._package = package  # whose subpackages are the families
        self._kinds = kinds  # the kinds its families may declare
        self.what, self.command = what, command  # "aggregation method", "crowdagg aggregate": for messages
        self._other = other  # the other registry's module:attribute, named when a name is registered there
        self._methods: dict[str, Method] | None = None
        self._failures: dict[str, str] = {}
        self._lock = threading.RLock()  # re-entrant: a family whose import asks the registry cannot deadlock

    def _found(self) -> dict[str, Method]:
        if self._methods is None:
            with self._lock:
                if self._methods is None:
                    methods, complete = self._discover()
                    if not complete:  # asked while a family is half imported: found again once it is done
                        return methods
                    self._methods = methods
        return self._methods

    def _discover(self) -> tuple[dict[str, Method], bool]:
        """The declared methods, and whether every family could be read (not one half imported: one that
        asks the registry while it is being imported, directly or from a discovery)."""
        import pkgutil
        import sys

        package = self._package
        importlib.import_module(package)
        found: dict[str, tuple[Method, str]] = {}
        complete = True
        for info in pkgutil.iter_modules(sys.modules[package].__path__, package + "."):
            if not info.ispkg:
                continue
            try:
                module = importlib.import_module(info.name)
                declared = getattr(module, "DECLARATIONS", None)
                if declared is None:
                    # a package of shared pieces, not a family -- or a family still being imported
                    complete &= not getattr(getattr(module, "__spec__", None), "_initializing", False)
                    continue
                if not isinstance(declared, tuple) or not all(isinstance(m, Method) for m in declared):
                    raise TypeError("DECLARATIONS must be a tuple of Method")
                alien = [f"{m.name!r} ({m.kind})" for m in declared if m.kind not in self._kinds]
                if alien:  # a trainer among the aggregators (or the reverse) would be offered to the wrong command
                    raise TypeError(f"{package} holds {' and '.join(self._kinds)} methods, not " + ", ".join(alien))
                names = [m.name for m in declared]
                twice = sorted({n for n in names if names.count(n) > 1})
                if twice:  # a dict would keep the last one silently
                    raise TypeError("it declares a method name twice: " + ", ".join(map(repr, twice)))
                taken = [f"{m.name!r} (declared by {found[m.name][1]})" for m in declared if m.name in found]
                if taken:
                    raise TypeError("it declares a method name already taken: " + ", ".join(taken))
            except (Exception, SystemExit) as exc:  # noqa: BLE001 - whatever breaks a family, the others still list
                self._failures[info.name] = f"{type(exc).__name__}: {exc}"
                continue
            found.update((m.name, (m, info.name)) for m in declared)
        return _ranked(m for m, _ in found.values()), complete

    def failures(self) -> dict[str, str]:
        """See :func:`failures`."""
        self._found()
        return dict(self._failures)

    def __getitem__(self, name: str) -> Method:
        try:
            return self._found()[name]
        except (KeyError, TypeError):  # TypeError: an unhashable name
            pass
        failed = self.failures().items()
        why = "".join(f"; {family} failed to declare its methods ({reason})" for family, reason in failed)
        if self._other:
            module, _, attr = self._other.partition(":")
            other = getattr(importlib.import_module(module), attr)
            if isinstance(name, str) and name in other:
                raise UnknownMethod(f"{name!r} is {_article(other.what)} ({other.command} --method {name}), not "
                                    f"{_article(self.what)}; {self.what}s: {', '.join(self)}")
        raise UnknownMethod(f"unknown method {name!r}; valid methods: {', '.join(self)}{why}") from None

    def __setitem__(self, name: str, spec: Method) -> None:
        if not isinstance(spec, Method) or spec.name != name:
            raise TypeError(f"METHODS[{name!r}] takes a Method named {name!r}, got {spec!r}")
        with self._lock:
            methods = {**self._found(), name: spec}
            self._methods = _ranked(methods.values())

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
        failed = "".join(f"; {family} failed ({reason})" for family, reason in self.failures().items())
        return f"<declared methods: {', '.join(self)}{failed}>"


def _ranked(methods: Any) -> dict[str, Method]:
    """``methods`` by name, in listing order: by rank, then name."""
    return {m.name: m for m in sorted(methods, key=lambda m: (m.rank, m.name))}


def _article(text: str) -> str:
    return ("an " if text[:1] in "aeiou" else "a ") + text


#: Every declared aggregator (the families under ``crowdagg/methods/``), name -> :class:`Method`, in listing order
#: (declarations only: no method code).
METHODS = _Declarations(other="crowdagg.methods.registry:TRAINERS")

#: Every declared trainer (features + answers -> a model: the families under ``crowdagg/learning/methods/``), name ->
#: :class:`Method`; listing them imports no torch.  Their own mapping: ``crowdagg aggregate`` and a parameter of
#: kind ``"method"`` never offer a trainer, ``crowdagg train`` never an aggregator.
TRAINERS = _Declarations("crowdagg.learning.methods", ("trainer",), "trainer", "crowdagg train",
                         other="crowdagg.methods.registry:METHODS")


def failures() -> dict[str, str]:
    """Family packages left out of :data:`METHODS`, and why (``"ImportError: ..."``); empty when all loaded."""
    return METHODS.failures()


def get(name: str) -> Method:
    """The method registered as ``name`` (:class:`UnknownMethod`, a :class:`~crowdagg.errors.UsageError`, if none)."""
    return METHODS[name]


class _Classes(Mapping[str, type]):
    """Name -> method class, each imported when asked for; listing and ``in`` import nothing."""

    def __getitem__(self, name: str) -> type:
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
REGISTRY: Mapping[str, type] = _Classes()


def get_trainer(name: str) -> Method:
    """The trainer registered as ``name`` (:class:`UnknownMethod` if none; it says so when ``name`` is an aggregator)."""
    return TRAINERS[name]


def get_method(name: str) -> type:
    """The class registered under ``name``, its module imported now (see :meth:`Method.load` for errors)."""
    return get(name).load()


__all__ = [
    "Param", "PARAM_KINDS", "Method", "ModuleGroup", "METHODS", "TRAINERS", "REGISTRY", "KINDS", "ENGINES", "EXTRAS", "COMMON_FLAGS", "RESERVED",
    "UnknownMethod",
    "get", "get_trainer", "get_method", "failures",
]
