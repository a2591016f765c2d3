"""Exceptions and warnings raised by crowdagg, worded for whoever called.

The CLI turns :class:`DataError` into exit status 1 and :class:`UsageError`
into exit status 2, printing the message as one ``Error: ...`` line.

Messages that tell the user what to change name a parameter through
:func:`param`: the library renders it as the keyword (``max_iter``), the
CLI as its flag (``--max-iter``), so neither speaks the other's language::

    raise UsageError(f"{param('max_iter')} must be an integer >= 1, got 0")
    # library: "max_iter must be an integer >= 1, got 0"
    # CLI:     "Error: --max-iter must be an integer >= 1, got 0"
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

# Private-use code points delimit a parameter name inside a message template.
_OPEN, _CLOSE = "\ue000", "\ue001"
_TOKEN = re.compile(f"{_OPEN}([A-Za-z_][A-Za-z0-9_]*){_CLOSE}")


def param(name: str) -> str:
    """A reference to parameter ``name`` inside a message (see the module docstring)."""
    return f"{_OPEN}{name}{_CLOSE}"


def render(template: str, spell: Callable[[str], str] | Mapping[str, str] | None = None) -> str:
    """Replace parameter references in ``template``.

    ``spell`` maps a parameter name to its spelling: a callable or a mapping
    (names it lacks keep their keyword form).  ``None`` gives the library's
    keyword form.
    """
    if spell is None:
        return _TOKEN.sub(lambda m: m.group(1), template)
    if callable(spell):
        fn = spell
    else:
        table = spell

        def fn(name: str) -> str:
            return table.get(name, name)

    return _TOKEN.sub(lambda m: fn(m.group(1)), template)


class _Worded:
    """Mixin: ``str()`` gives the library wording; :meth:`render` any other."""

    args: tuple

    @property
    def template(self) -> str:
        return str(self.args[0]) if self.args else ""

    def render(self, spell: Callable[[str], str] | Mapping[str, str] | None = None) -> str:
        return render(self.template, spell)

    def __str__(self) -> str:
        return render(self.template)


class CrowdaggError(_Worded, Exception):
    """Base class of every error crowdagg raises on purpose."""

    exit_code = 1


class DataError(CrowdaggError, ValueError):
    """The input data are malformed or unusable (exit status 1)."""

    exit_code = 1


class UsageError(CrowdaggError, ValueError):
    """An option or argument is invalid (exit status 2)."""

    exit_code = 2


class ResourceError(DataError, MemoryError):
    """A request would need more memory than allowed; raised before allocating (exit status 1)."""

    exit_code = 1


class CrowdaggWarning(_Worded, UserWarning):
    """Warnings about the data or the fit (duplicates, non-convergence, ...)."""


class ConvergenceWarning(CrowdaggWarning):
    """An iterative method stopped at ``max_iter`` before meeting ``tol``."""


class CrowdaggNote(CrowdaggWarning):
    """What a method decided, said for the user to know (``auto``'s choice): no problem.

    A warning so that it travels as every message of a fit does; the CLI
    says it as ``Note: ...`` on stderr, and not at all under ``--quiet``.
    """


def os_reason(exc: BaseException) -> str:
    """What went wrong with a file or stream, in plain words (no exception class, no path)."""
    if isinstance(exc, OSError):
        if exc.strerror:
            return exc.strerror.lower()
        for cls, words in (
            (PermissionError, "permission denied"),
            (IsADirectoryError, "is a directory"),
            (NotADirectoryError, "not a directory"),
            (FileNotFoundError, "no such file or directory"),
        ):
            if isinstance(exc, cls):
                return words
        return "input/output error"
    return "it is closed" if isinstance(exc, ValueError) else "input/output error"


def warn(warning: Warning) -> None:
    """``warnings.warn`` attributed to the caller's first line outside crowdagg.

    So ``python -W error`` or a warning filter points at the user's own call
    (``aggregate(...)`` in their script), not at a line of this package.
    """
    import sys
    import warnings

    level = 2  # 1 would be this function's own line
    frame = sys._getframe(1)
    while frame is not None and frame.f_globals.get("__name__", "").split(".")[0] == "crowdagg":
        frame = frame.f_back  # type: ignore[assignment]
        level += 1
    warnings.warn(warning, stacklevel=level)


class Interrupted(BaseException):
    """SIGINT or SIGTERM arrived (raised by the CLI's signal handlers).

    A ``BaseException`` like ``KeyboardInterrupt``, so ``except Exception``
    does not swallow it; ``finally`` blocks still run and remove temporary
    files.  ``exit_code`` is 128 + the signal number (130, 143).
    """

    def __init__(self, signum: int, name: str) -> None:
        super().__init__(signum, name)
        self.signum = signum
        self.name = name
        self.exit_code = 128 + signum


def interruption(exc: BaseException) -> BaseException | None:
    """The interrupt (:class:`Interrupted` or ``KeyboardInterrupt``) that ``exc`` stands for, if any.

    Python 3.11 wraps whatever a class's ``__set_name__`` raises -- a signal handler's exception included, when
    the signal lands while a module such as pydantic is being imported -- in ``RuntimeError("Error calling
    __set_name__ ...")`` with the interrupt as its cause; that run was interrupted, not a failure.
    """
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        if isinstance(cur, (Interrupted, KeyboardInterrupt)):
            return cur
        seen.add(id(cur))
        cur = cur.__cause__ or cur.__context__
    return None
