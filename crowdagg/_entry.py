"""The ``crowdagg`` console script: signal handlers first, then the CLI.

Kept tiny and separate from ``crowdagg/__init__`` (which library users
import): installing SIGINT/SIGTERM handlers is the program's business, not
a library's.  Everything after :func:`crowdagg.core.signals.install` -- typer,
numpy, the commands -- runs under those handlers, so an interrupt at any
moment prints one line and exits 130 (SIGINT) or 143 (SIGTERM), leaving no
temporary file.
"""

from __future__ import annotations

import os
import sys


def _stderr_line(text: str) -> None:
    try:
        os.write(2, (text + "\n").encode("utf-8", "replace"))
    except OSError:
        pass


def _occupy_closed_std_fds() -> None:
    """Point closed descriptors 0-2 at /dev/null.

    Otherwise the next file opened (an input, a temporary output) would get
    descriptor 1, and anything written to "stdout" would land in it.
    ``sys.stdin``/``sys.stdout`` stay ``None`` (Python's own record that they
    were closed), so reading or writing them is still reported as an error.
    """
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            try:
                null = os.open(os.devnull, os.O_RDWR)
            except OSError:
                return
            if null != fd:
                os.dup2(null, fd)
                os.close(null)


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; return the exit status."""
    from .core import signals as _signals
    from .errors import Interrupted, interruption

    _signals.install()
    try:
        _occupy_closed_std_fds()
        try:
            from .cli import run

            code = run(argv)
        except Exception as exc:
            signal = interruption(exc)  # an interrupt Python wrapped (a signal inside an import's __set_name__)
            if isinstance(signal, Interrupted):
                raise signal from None
            if signal is not None:
                raise Interrupted(2, "SIGINT") from None
            raise
        # The outputs are committed: a signal during interpreter shutdown (Python
        # restores the default handlers there) must not kill the exit silently.
        _signals.ignore()
        return code
    except Interrupted as exc:
        _stderr_line("Error: interrupted" if exc.name == "SIGINT" else f"Error: terminated ({exc.name})")
        return exc.exit_code
    finally:
        # An error leaves reference cycles (exception, traceback, frames) that can hold Arrow arrays; freed
        # during interpreter shutdown, after Arrow's runtime, they abort the process ("terminate called
        # without an active exception", apache/arrow#34314).  Free them now, while Arrow is alive.
        import gc

        gc.collect()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
