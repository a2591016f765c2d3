"""SIGINT/SIGTERM as an exception, and a way to hold them off during a commit.

The CLI's entry point installs :func:`install` before importing anything
heavy, so Ctrl-C or ``kill`` at any moment -- even during the first imports
-- unwinds the stack (``finally`` blocks remove temporary files) and ends
with one line and exit status 128 + signal number.  Library users keep
Python's default handlers unless they call :func:`install` themselves.
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator

from ..errors import Interrupted

SIGNALS = (signal.SIGINT, signal.SIGTERM)

_pending: list[int] = []
_depth = 0
_installed = False


def _raise(signum: int) -> None:
    # Later signals are ignored so that the clean-up this one triggers can finish.
    ignore()
    raise Interrupted(signum, signal.Signals(signum).name)


def _handler(signum: int, frame: object) -> None:
    if _depth:
        _pending.append(signum)
        return
    _raise(signum)


def ignore() -> None:
    """Ignore SIGINT/SIGTERM from now on (the run is over; let the exit finish)."""
    for s in SIGNALS:
        with contextlib.suppress(ValueError, OSError):
            signal.signal(s, signal.SIG_IGN)


def install() -> None:
    """Route SIGINT and SIGTERM to :class:`~crowdagg.errors.Interrupted` (main thread only)."""
    global _installed
    for s in SIGNALS:
        signal.signal(s, _handler)
    _installed = True


@contextlib.contextmanager
def deferred() -> Iterator[None]:
    """Hold SIGINT/SIGTERM until the block ends (used while renaming outputs into place).

    The signals are blocked at the OS level for this thread and, when the
    crowdagg handlers are installed, also queued by them (a signal can be
    delivered to another thread); one that arrived is raised on exit.
    """
    global _depth
    blocked = None
    with contextlib.suppress(AttributeError, OSError, ValueError):
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, SIGNALS)
    _depth += 1
    try:
        yield
    finally:
        _depth -= 1
        if blocked is not None:
            # A signal blocked so far is delivered here, to the handler.
            signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        if not _depth and _pending:
            signum = _pending[0]
            _pending.clear()
            _raise(signum)
