"""What every command shares around its work: errors, warnings, stdout, progress.

* :class:`Group` -- Click's own usage errors (bad option values, missing
  arguments) as one ``Error:`` line, exit 2;
* :func:`handle_errors` -- a command's errors as one ``Error:`` line and an
  exit code (1 data/runtime, 2 usage, 130 interrupted), the traceback only
  with ``--verbose``; crowdagg warnings relayed to stderr as ``Warning:``;
* :func:`write_stdout` -- data to stdout through the same path as every
  output (:mod:`crowdagg.io.output`: closed stdout and EPIPE handled);
* :func:`progress` -- an iteration display on stderr, only on a terminal.

Messages from the library name parameters in library terms
(``max_iter``); :func:`words` spells them as the CLI's flags (``--max-iter``).
"""

from __future__ import annotations

import functools
import sys
import warnings
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import typer
from typer.core import TyperGroup
from typer.exceptions import TyperException

from ..errors import CrowdaggError, CrowdaggNote, CrowdaggWarning, Interrupted, interruption, os_reason, render
from .options import Spelling, flag

F = TypeVar("F", bound=Callable[..., Any])


def err(msg: str, *, one_line: bool = True) -> None:
    """A message on stderr (one line unless ``one_line=False``); nothing if stderr is closed or gone."""
    stream = sys.stderr
    if stream is None:
        return
    text = msg.rstrip("\n")
    if one_line:
        text = " ".join(text.split("\n"))
    try:
        stream.write(text + "\n")
        stream.flush()
    except (OSError, ValueError):
        pass


def words(exc_or_warning: object, spelling: Spelling | None = None) -> str:
    """A crowdagg message as the CLI says it (parameters as flags)."""
    if hasattr(exc_or_warning, "render"):
        return exc_or_warning.render(lambda n: flag(n, spelling))  # type: ignore[attr-defined]
    return render(str(exc_or_warning), lambda n: flag(n, spelling))


def _verbose_requested(args: list[str]) -> bool:
    return any(a in ("--verbose", "-v") for a in args)


class Group(TyperGroup):
    """Click's own errors (bad option values, missing arguments) as one ``Error:`` line, exit 2.

    Typer bundles its own copy of Click (``typer._click``, typer 0.29);
    ``TyperException`` is the public base of its exceptions, so this does
    not depend on the copy's module path.
    """

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        windows_expand_args: bool = True,
        **extra: Any,
    ) -> Any:
        argv = list(sys.argv[1:] if args is None else args)
        code = 0
        if sys.stdout is None and any(a in ("--help", "-h") for a in argv):
            err("Error: standard output is closed; nothing can be written there")
            if standalone_mode:
                sys.exit(1)
            return 1
        try:
            rv = super().main(
                argv, prog_name or "crowdagg", complete_var, standalone_mode=False,
                windows_expand_args=windows_expand_args, **extra,
            )
            code = rv if isinstance(rv, int) else 0
        except TyperException as exc:
            code = int(getattr(exc, "exit_code", 2))
            if type(exc).__name__ == "NoArgsIsHelpError":
                err(exc.format_message(), one_line=False)  # bare `crowdagg`: the help, on stderr
            else:
                ctx = getattr(exc, "ctx", None)
                if ctx is not None and _verbose_requested(argv):
                    err(ctx.get_usage())
                err(f"Error: {exc.format_message()}")
        except typer.Abort:
            err("Error: aborted")
            code = 1
        except typer.Exit as exc:
            code = exc.exit_code
        except (CrowdaggError, OSError, ValueError, AttributeError, RuntimeError) as exc:
            # Outside any command (e.g. --version with stdout closed).
            err(f"Error: {describe_exception(exc)}")
            code = getattr(exc, "exit_code", 1)
        if standalone_mode:
            sys.exit(code)
        return code


def emit_warnings(caught: list[warnings.WarningMessage], spelling: Spelling | None, quiet: bool = False) -> None:
    """Each distinct warning once, as a ``Warning:`` line on stderr; a note (:class:`CrowdaggNote`) as a ``Note:``
    line, unless ``quiet``."""
    seen: set[str] = set()
    for w in caught:
        note = issubclass(w.category, CrowdaggNote)
        if note and quiet:
            continue
        text = words(w.message, spelling)
        if text not in seen:
            seen.add(text)
            err(f"{'Note' if note else 'Warning'}: {text}")


def describe_exception(exc: BaseException, spelling: Spelling | None = None) -> str:
    """Plain words for an exception: never a Python class name or a temporary path."""
    if isinstance(exc, CrowdaggError):
        return words(exc, spelling)
    if isinstance(exc, MemoryError):
        return "out of memory (try --max-memory to be refused up front, or a smaller input)"
    if isinstance(exc, RecursionError):
        return "input nested too deeply"
    if isinstance(exc, UnicodeError):
        return "text that is not valid UTF-8"
    if isinstance(exc, OSError):
        name = exc.filename
        return f"{name}: {os_reason(exc)}" if name and ".tmp" not in str(name) else os_reason(exc)
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"unexpected failure{': ' + text if text else ''} (run with --verbose for the details)"


def handle_errors(spelling: Spelling | None = None) -> Callable[[F], F]:
    """Turn errors into one ``Error:`` line and an exit code; relay crowdagg warnings to stderr.

    ``spelling`` maps library parameter names to this command's flags where
    they differ from the default (``simulate``: ``n_tasks`` -> ``--tasks``).
    """

    def decorate(func: F) -> F:
        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            verbose = bool(kwargs.get("verbose"))
            quiet = bool(kwargs.get("quiet"))
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always", CrowdaggWarning)

                def flush() -> None:
                    emit_warnings([w for w in caught if issubclass(w.category, CrowdaggWarning)], spelling, quiet)
                    caught.clear()

                try:
                    return func(*args, **kwargs)
                except typer.Exit:
                    raise
                except Interrupted:
                    caught.clear()  # the interrupt's one line is all that is said
                    raise
                except KeyboardInterrupt:
                    flush()
                    err("Error: interrupted")
                    raise typer.Exit(130) from None
                except Exception as exc:  # noqa: BLE001 - every error ends as one line
                    signal = interruption(exc)
                    if isinstance(signal, Interrupted):  # wrapped by Python (see interruption): said as itself
                        caught.clear()
                        raise signal from None
                    flush()
                    if signal is not None:
                        err("Error: interrupted")
                        raise typer.Exit(130) from None
                    code = exc.exit_code if isinstance(exc, CrowdaggError) else 1
                    if verbose:
                        import traceback

                        traceback.print_exc(file=sys.stderr)
                    err(f"Error: {describe_exception(exc, spelling)}")
                    raise typer.Exit(code) from None
                finally:
                    flush()

        return wrapper  # type: ignore[return-value]

    return decorate


def write_stdout(text: str | bytes) -> None:
    """Data to stdout, through the same path as every output (closed stdout, EPIPE handled)."""
    from ..io.output import commit, resolve

    commit([(resolve("-"), text.encode("utf-8") if isinstance(text, str) else text)])


def progress(quiet: bool, total: int | None = None, what: str = "iteration",
             measure: str = "log-likelihood") -> tuple[Callable[[int, float], None] | None, Callable[[], None]]:
    """An iteration callback drawing on stderr, only when stderr is a terminal; and the function that ends it.

    ``total`` (a trainer's epochs): a progress bar of ``total`` steps named ``what`` (``epoch``), the last
    ``measure`` beside it; without it, a status line.
    """
    if quiet or sys.stderr is None or not sys.stderr.isatty():
        return None, lambda: None
    from rich.console import Console

    console = Console(stderr=True)
    if total is not None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        bar = Progress(TextColumn(f"{what}s"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                       TextColumn("{task.description}"), console=console, transient=True)
        job = bar.add_task("", total=total)
        bar.start()

        def advance(it: int, value: float) -> None:
            bar.update(job, completed=it, description="" if value != value else f"{measure} {value:.6g}")

        return advance, bar.stop
    status = console.status("fitting ...")
    status.start()

    def update(it: int, ll: float) -> None:
        status.update(f"iteration {it}" + ("" if ll != ll else f"  log-likelihood {ll:.6g}"))

    return update, status.stop


__all__ = ["Group", "describe_exception", "emit_warnings", "err", "handle_errors", "progress", "words", "write_stdout"]
