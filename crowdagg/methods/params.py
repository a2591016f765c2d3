"""Declared parameters: one :class:`Param` per parameter, from which checks, parsing and wording come.

Standard library only (the registry and ``crowdagg --help`` import it).  A
parameter's kind is one of

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

import math
import os
import re
from dataclasses import dataclass
from typing import Any

from ..errors import UsageError, param

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
    method's paper uses for it.
    """

    name: str
    kind: type | str
    default: Any
    help: str
    low: float = -math.inf
    high: float = math.inf
    paper: str = ""
    choices: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        # A declaration error is the method author's: it fails the family's import, which fails alone.
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
        if kind is int:
            from ..core.checks import check_int

            return check_int(self.name, value, int(self.low), None if math.isinf(self.high) else int(self.high))
        if kind is float:
            from ..core.checks import check_float

            return check_float(self.name, value, self.low, self.high)
        if kind is bool:
            if not isinstance(value, bool):
                raise UsageError(f"{param(self.name)} must be true or false, got {value!r}")
            return value
        if kind == "numbers":
            return self._check_numbers(value)
        if kind == "methods":
            return self._check_methods(value.split(",") if isinstance(value, str) else value, value)
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
        if kind == "method" and _is_array(value):
            return value  # a posterior given in the library: the method checks it against the data
        if not isinstance(value, str) or not self._accepts(value):
            raise self._error(value)
        return value

    def _accepts(self, value: str) -> bool:
        """Whether one name is allowed (``"choice"``, ``"method"``, ``"device"``)."""
        if self.kind == "device":
            return _DEVICE.match(value) is not None
        if value in self.choices:
            return True
        return self.kind in ("method", "methods") and value in _method_names()

    def _check_numbers(self, value: Any, shown: Any = None, cli: bool = False) -> tuple[float, ...]:
        shown = value if shown is None else shown
        if not isinstance(value, (list, tuple)) and not (_is_array(value) and value.ndim == 1):
            raise self._error(shown, cli)
        out = []
        for v in value:
            if isinstance(v, bool):
                raise self._error(shown, cli)
            try:
                f = float(v)
            except (TypeError, ValueError):
                raise self._error(shown, cli) from None
            if not math.isfinite(f) or not self.low <= f <= self.high:
                raise self._error(shown, cli)
            out.append(f)
        if not out:
            raise self._error(shown, cli)
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
        return UsageError(f"{param(self.name)} must be {self.describe_type(cli)}, got {value!r}")

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
            return value
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
            return (", ".join(self.choices) + " or " if self.choices else "") + f"a method's name ({methods})"
        what = "comma-separated method names" if cli else "a list of method names"
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


def _is_array(value: Any) -> bool:
    """Whether ``value`` is a numpy array (without importing numpy: an array means numpy is loaded)."""
    import sys

    np = sys.modules.get("numpy")
    return np is not None and isinstance(value, np.ndarray)


def _method_names() -> tuple[str, ...]:
    """The registered methods' names (declarations only: no method code is imported)."""
    from .registry import METHODS

    return tuple(METHODS)


__all__ = ["Param", "PARAM_KINDS"]
