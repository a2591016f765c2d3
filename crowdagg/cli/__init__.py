"""The ``crowdagg`` command line: parse, call the library, write.

stdout carries data only; messages, warnings and progress go to stderr.
Every error is one ``Error: ...`` line -- Click's own usage errors included
-- with exit status 1 for data/runtime errors and 2 for usage errors;
``--verbose`` adds the traceback (and Click's usage line).  A run computes
and renders everything first, then writes all of its outputs or none
(:mod:`crowdagg.io.output`).  The console script enters through
:mod:`crowdagg._entry`, which installs the SIGINT/SIGTERM handlers first.
"""

from __future__ import annotations

import functools
import sys
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Optional, TypeVar

import typer
from typer.core import TyperGroup
from typer.exceptions import TyperException

from ..errors import CrowdaggError, CrowdaggWarning, DataError, Interrupted, UsageError, os_reason, render

if TYPE_CHECKING:  # pragma: no cover
    from ..io.output import Target

F = TypeVar("F", bound=Callable[..., Any])

Spelling = Mapping[str, str]


#: Method parameters that have a flag of their own; the others are set with ``-p name=value``.
_PARAM_FLAGS = ("seed", "max_iter", "tol", "smoothing")


def _flag(name: str, spelling: Spelling | None = None) -> str:
    """The CLI spelling of a library parameter: ``max_iter`` -> ``--max-iter``, ``n_init`` -> ``-p n_init``."""
    if spelling and name in spelling:
        return spelling[name]
    if name not in _PARAM_FLAGS:
        from ..methods.registry import METHODS

        if any(name in m.param_names for m in METHODS.values()):
            return f"-p {name}"
    return "--" + name.replace("_", "-")


def _method_params(spec: Any, flags: dict[str, Any], pairs: list[str]) -> dict[str, Any]:
    """The method's parameters from the common flags and ``-p name=value`` (checked against its declaration)."""
    params: dict[str, Any] = {}
    for key, value in flags.items():
        if value is not None:
            if key not in spec.param_names:
                raise UsageError(
                    f"{_flag(key)} does not apply to method {spec.name!r}; it takes: "
                    + ", ".join(_flag(p) for p in spec.param_names)
                )
            params[key] = value
    for item in pairs:
        name, sep, text = item.partition("=")
        name = name.strip().replace("-", "_")
        if not sep or not name:
            raise UsageError(f"-p/--param wants name=value, got {item!r}")
        if name not in spec.param_names:
            raise UsageError(
                f"method {spec.name!r} does not take -p {name}; it takes: "
                + ", ".join(_flag(p) for p in spec.param_names)
            )
        declared = spec.param(name)
        if name in params:
            how = f"{_flag(name)} and -p {name}=" if flags.get(name) is not None else f"-p {name}= twice"
            raise UsageError(f"{name} is given twice ({how})")
        params[name] = declared.parse(text)
    return params


def _words(exc_or_warning: object, spelling: Spelling | None = None) -> str:
    """A crowdagg message as the CLI says it (parameters as flags)."""
    if hasattr(exc_or_warning, "render"):
        return exc_or_warning.render(lambda n: _flag(n, spelling))  # type: ignore[attr-defined]
    return render(str(exc_or_warning), lambda n: _flag(n, spelling))


# --------------------------------------------------------------------------- plumbing
def _err(msg: str, *, one_line: bool = True) -> None:
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


def _verbose_requested(args: list[str]) -> bool:
    return any(a in ("--verbose", "-v") for a in args)


class _Group(TyperGroup):
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
            _err("Error: standard output is closed; nothing can be written there")
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
                _err(exc.format_message(), one_line=False)  # bare `crowdagg`: the help, on stderr
            else:
                ctx = getattr(exc, "ctx", None)
                if ctx is not None and _verbose_requested(argv):
                    _err(ctx.get_usage())
                _err(f"Error: {exc.format_message()}")
        except typer.Abort:
            _err("Error: aborted")
            code = 1
        except typer.Exit as exc:
            code = exc.exit_code
        except (CrowdaggError, OSError, ValueError, AttributeError, RuntimeError) as exc:
            # Outside any command (e.g. --version with stdout closed).
            _err(f"Error: {_describe_exception(exc)}")
            code = getattr(exc, "exit_code", 1)
        if standalone_mode:
            sys.exit(code)
        return code


app = typer.Typer(
    name="crowdagg",
    cls=_Group,
    help=(
        "Turn noisy labels from many annotators into trustworthy labels.\n\n"
        "Example: crowdagg aggregate labels.csv --method ds > truth.csv"
    ),
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _emit_warnings(caught: list[warnings.WarningMessage], spelling: Spelling | None) -> None:
    seen: set[str] = set()
    for w in caught:
        text = _words(w.message, spelling)
        if text not in seen:
            seen.add(text)
            _err(f"Warning: {text}")


def _describe_exception(exc: BaseException, spelling: Spelling | None = None) -> str:
    """Plain words for an exception: never a Python class name or a temporary path."""
    if isinstance(exc, CrowdaggError):
        return _words(exc, spelling)
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
    """Turn errors into one ``Error:`` line and an exit code; relay crowdagg warnings to stderr."""

    def decorate(func: F) -> F:
        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            verbose = bool(kwargs.get("verbose"))
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always", CrowdaggWarning)

                def flush() -> None:
                    _emit_warnings([w for w in caught if issubclass(w.category, CrowdaggWarning)], spelling)
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
                    _err("Error: interrupted")
                    raise typer.Exit(130) from None
                except Exception as exc:  # noqa: BLE001 - every error ends as one line
                    flush()
                    code = exc.exit_code if isinstance(exc, CrowdaggError) else 1
                    if verbose:
                        import traceback

                        traceback.print_exc(file=sys.stderr)
                    _err(f"Error: {_describe_exception(exc, spelling)}")
                    raise typer.Exit(code) from None
                finally:
                    flush()

        return wrapper  # type: ignore[return-value]

    return decorate


def _require_values(**given: Optional[str]) -> None:
    """An option given as an empty string is a usage error, not the default in disguise."""
    for name, value in given.items():
        if value is not None and value.strip() == "":
            flag = name.upper() if name in ("input", "predictions") else _flag(name)
            raise UsageError(f"{flag} is empty; give a path or value (- means standard input/output)")


def _split_list(value: Optional[str]) -> Optional[list[str]]:
    if value is None:
        return None
    items = [v.strip() for v in value.split(",")]
    if not all(items):
        raise UsageError(f"--classes has an empty entry: {value!r}")
    return items


def _write_stdout(text: str | bytes) -> None:
    """Data to stdout, through the same path as every output (closed stdout, EPIPE handled)."""
    from ..io.output import commit, resolve

    commit([(resolve("-"), text.encode("utf-8") if isinstance(text, str) else text)])


def _progress(quiet: bool) -> tuple[Callable[[int, float], None] | None, Callable[[], None]]:
    """An EM progress callback drawing on stderr, only when stderr is a terminal."""
    if quiet or sys.stderr is None or not sys.stderr.isatty():
        return None, lambda: None
    from rich.console import Console

    console = Console(stderr=True)
    status = console.status("fitting ...")
    status.start()

    def update(it: int, ll: float) -> None:
        status.update(f"iteration {it}" + ("" if ll != ll else f"  log-likelihood {ll:.6g}"))

    return update, status.stop


def _check_render_memory(n_rows: int, n_float: int, n_text: int, what: str, max_memory: Any) -> None:
    from ..core.memory import check
    from ..io.render import estimate_text_bytes

    check(estimate_text_bytes(n_rows, n_float, n_text), what, max_memory, advice="leave out --proba or --workers")


# --------------------------------------------------------------------------- help from the registry
# Per-method text in the help comes from the declarations in crowdagg.methods.registry (standard library
# only, so `crowdagg --help` stays light): adding a method or changing a default never edits it here.
def _method_list() -> str:
    """The method list of ``aggregate --help``: each registered method's name and summary, unwrapped."""
    import textwrap

    from ..methods.registry import METHODS

    width = max(map(len, METHODS))
    lines = ["Methods (`crowdagg methods NAME` shows one in full):"]
    for name, m in METHODS.items():
        lines += textwrap.wrap(m.summary, 76, initial_indent=f"  {name:<{width}}  ", subsequent_indent=" " * (width + 4))
    return "\b\n" + "\n".join(lines)  # "\b": Click keeps these lines as they are (one method per line)


def _methods_that(has: Callable[[Any], bool]) -> str:
    """``ds, onecoin``: the registered methods with a property, in registry order."""
    from ..methods.registry import METHODS

    return ", ".join(name for name, m in METHODS.items() if has(m))


def _defaults(name: str, with_help: bool = False) -> str:
    """The declared default of parameter ``name`` per method: ``ds, onecoin: 200; wmv: 50``.

    Methods with the same default share one entry; ``with_help`` adds each
    method's own help for the parameter (where they differ in meaning).
    """
    from ..methods.registry import METHODS

    groups: dict[str, list[str]] = {}
    for method_name, m in METHODS.items():
        if name in m.param_names:
            p = m.param(name)
            value = f"{p.default:g}" if isinstance(p.default, float) else repr(p.default)
            key = f"{p.help}, default {value}" if with_help else value
            groups.setdefault(key, []).append(method_name)
    if len(groups) == 1 and len(next(iter(groups.values()))) == len(METHODS):
        return f"default {next(iter(groups))}"  # every method: no need to list them
    return "; ".join(f"{', '.join(names)}: {text}" for text, names in groups.items())


_AGGREGATE_HELP = f"""Aggregate answers into one label per task.

Writes task,label,confidence (+ n_answers and p_<class> with --proba),
one row per task in input order.

{_method_list()}

Inputs and outputs: a directory or pattern given as INPUT leaves out this
run's own earlier outputs (said on stderr), so a run can be repeated; an
output that is an input in any other way is refused.

\b
Example: cat answers.jsonl | crowdagg aggregate - --method mv --format jsonl | jq .label
"""


# --------------------------------------------------------------------------- commands
VerboseOpt = typer.Option(False, "--verbose", "-v", help="Show tracebacks on error.")


@app.command(help=_AGGREGATE_HELP)
@handle_errors()
def aggregate(
    input: list[str] = typer.Argument(..., metavar="INPUT...", help="Answers file(s) (CSV/TSV/JSON/JSONL/Parquet, optionally .gz; MTurk, Toloka, Label Studio exports), - for stdin, a directory, or a quoted glob ('batches/*.parquet'); several are read as one data set."),
    method: str = typer.Option("ds", "--method", "-m", help="Aggregation method (see `crowdagg methods`)."),
    output: Optional[str] = typer.Option(None, "--output", "-o", help="Write here instead of stdout (a regular file is replaced atomically)."),
    fmt: Optional[str] = typer.Option(None, "--format", "-f", help="csv, tsv, jsonl, json or parquet (default: from -o's extension, else csv)."),
    proba: bool = typer.Option(False, "--proba", help="Add n_answers and one p_<class> posterior column per class."),
    workers: Optional[str] = typer.Option(None, "--workers", help="Write each worker's confusion matrix (long form) and accuracy here."),
    save_workers: Optional[str] = typer.Option(None, "--save-workers", help=f"Save the fitted worker model (versioned JSON, exact floats; .json or .json.gz) for --init-workers ({_methods_that(lambda m: m.init_workers)})."),
    init_workers: Optional[str] = typer.Option(None, "--init-workers", help=f"Start from a worker model saved with --save-workers (warm start; known workers on a new batch; {_methods_that(lambda m: m.init_workers)})."),
    truth: Optional[str] = typer.Option(None, "--truth", help="Gold labels file: print accuracy etc. to stderr."),
    truth_task_col: Optional[str] = typer.Option(None, "--truth-task-col", help="Task column of --truth (default: task or an alias)."),
    truth_label_col: Optional[str] = typer.Option(None, "--truth-label-col", help="Label column of --truth (default: label, truth, gold, ...)."),
    gold: Optional[str] = typer.Option(None, "--gold", help=f"Known labels that clamp those tasks ({_methods_that(lambda m: m.gold)})."),
    gold_task_col: Optional[str] = typer.Option(None, "--gold-task-col", help="Task column of --gold."),
    gold_label_col: Optional[str] = typer.Option(None, "--gold-label-col", help="Label column of --gold."),
    classes: Optional[str] = typer.Option(None, "--classes", help="Comma-separated class set, in order (includes classes nobody chose)."),
    duplicates: str = typer.Option("keep", "--duplicates", help="Repeated (task, worker) answers: keep, first, last or error."),
    blank_labels: str = typer.Option("skip", "--blank-labels", help="Answers with a blank label (skipped questions): skip them, saying how many (their tasks keep a row), or error."),
    rejected: str = typer.Option("exclude", "--rejected", help="Answers an MTurk/Toloka export marks rejected: exclude (default; counted on stderr) or keep."),
    input_format: Optional[str] = typer.Option(None, "--input-format", help="csv, tsv, json, jsonl or parquet (default: from content/extension)."),
    task_col: Optional[str] = typer.Option(None, "--task-col", help="Task column (default: task, an alias such as item, or a platform's column)."),
    worker_col: Optional[str] = typer.Option(None, "--worker-col", help="Worker column (default: worker, an alias such as annotator, or a platform's column)."),
    label_col: Optional[str] = typer.Option(None, "--label-col", help="Label column (default: label, an alias such as answer, or a platform's column; MTurk radio buttons: the group, e.g. Answer.sentiment)."),
    seed: Optional[int] = typer.Option(None, "--seed", help=f"Seed for tie-breaking and any random choice ({_defaults('seed')})."),
    max_iter: Optional[int] = typer.Option(None, "--max-iter", help=f"Iteration cap ({_defaults('max_iter')})."),
    tol: Optional[float] = typer.Option(None, "--tol", help=f"Stop when the relative log-likelihood change is below this ({_defaults('tol')}); 0 runs exactly --max-iter."),
    smoothing: Optional[float] = typer.Option(None, "--smoothing", help=f"Same as -p smoothing=VALUE ({_defaults('smoothing', with_help=True)}); kept for this release."),
    param_: list[str] = typer.Option([], "--param", "-p", metavar="NAME=VALUE", help="A parameter of the method (repeatable); `crowdagg methods NAME` lists them, e.g. -p n_init=5."),
    max_memory: Optional[str] = typer.Option(None, "--max-memory", help="Refuse up front a run that would need more memory than this (e.g. 4G, 500M, none; default 80% of available)."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress display."),
    verbose: bool = VerboseOpt,
) -> None:
    """Aggregate answers into one label per task (the help text: :data:`_AGGREGATE_HELP`)."""
    from ..core import memory
    from ..core import timing as _timing
    from ..data.annotations import DUPLICATE_POLICIES, check_blank_labels
    from ..io.output import check_binary, check_distinct, check_not_inputs, commit, resolve
    from ..io.platforms import check_rejected_policy
    from ..io.read import (
        MODEL_FORMATS,
        check_stdin_once,
        expand_inputs,
        load_annotations,
        output_format,
        read_task_labels,
    )
    from ..io.render import render_table
    from ..methods.api import aggregate as run_method
    from ..methods.registry import get as get_spec

    # 1. Everything that can be checked without reading the data.
    for path in input:
        _require_values(input=path)
    _require_values(
        output=output, format=fmt, workers=workers, truth=truth, gold=gold,
        input_format=input_format, classes=classes, max_memory=max_memory,
        save_workers=save_workers, init_workers=init_workers,
    )
    side_inputs = [(f"{flag} {path}", path) for flag, path in
                   (("--truth", truth), ("--gold", gold), ("--init-workers", init_workers)) if path is not None]
    check_stdin_once([(f"INPUT {p}", p) for p in input] + side_inputs)
    spec = get_spec(method)
    params = _method_params(spec, {"seed": seed, "max_iter": max_iter, "tol": tol, "smoothing": smoothing}, param_)
    if gold is not None and not spec.gold:
        raise UsageError(f"--gold does not apply to method {method!r}")
    for flag, value in (("--save-workers", save_workers), ("--init-workers", init_workers)):
        if value is not None and not spec.init_workers:
            raise UsageError(f"{flag} does not apply to method {method!r} (it learns no reusable worker model)")
    spec.load()(**params).check_params()  # every method parameter: before reading anything
    if duplicates not in DUPLICATE_POLICIES:
        raise UsageError(f"--duplicates must be one of {', '.join(DUPLICATE_POLICIES)}, got {duplicates!r}")
    check_blank_labels(blank_labels)
    check_rejected_policy(rejected)
    memory.parse_size(max_memory)
    class_list = _split_list(classes)
    # Where each output finally lands, and what it holds: `writes`, its leading fields, by which an
    # earlier run's output is recognised in a directory or pattern.  An output that is an input (as
    # named: before any expansion) is the first thing refused; then each name's format, one check for all.
    targets: list[Target] = [resolve(
        output or "-", "--output", writes=("task", "label", "confidence"), then="n_answers|p_.*"
    )]
    if workers:
        targets.append(resolve(
            workers, "--workers",
            writes=("worker", "true_label", "observed_label", "probability", "accuracy", "n_answers"),
        ))
    if save_workers:
        targets.append(resolve(save_workers, "--save-workers", writes=("format", "version"), then=".*"))
    check_distinct(targets)
    check_not_inputs(targets, [(f"INPUT {p}", p) for p in input] + side_inputs)
    formats = [output_format(fmt, output)]
    if workers:
        formats.append(output_format(None, workers, "--workers"))
    if save_workers:
        formats.append(output_format(None, save_workers, "--save-workers", MODEL_FORMATS))
    out_fmt = formats[0]
    for target, target_fmt in zip(targets, formats):
        check_binary(target, target_fmt)
    # The inputs are expanded once, here, leaving this run's earlier outputs out of directories and
    # patterns; the same list is checked against every output by identity, then read.
    sources = expand_inputs(input, outputs=targets)
    read_as = [(f"INPUT {f}" if f == g else f"{f}, from INPUT {g}", f) for f, g in zip(sources, sources.given)]
    check_stdin_once(read_as + side_inputs)
    check_not_inputs(targets, read_as + side_inputs)
    # 2. Side inputs, then the data and the fit.
    if gold is not None:
        params["gold"] = read_task_labels(
            gold, task_col=gold_task_col, label_col=gold_label_col, what="gold",
            options={"task": "--gold-task-col", "label": "--gold-label-col"},
        )
    if init_workers is not None:
        params["init_workers"] = _read_worker_model(init_workers, max_memory)
    truth_labels = None
    if truth:
        truth_labels = read_task_labels(
            truth, task_col=truth_task_col, label_col=truth_label_col,
            options={"task": "--truth-task-col", "label": "--truth-label-col"},
        )
    from ..kernels import announce_compilation

    announce_compilation(sys.stderr)
    data = load_annotations(
        sources, input_format=input_format, task_col=task_col, worker_col=worker_col,
        label_col=label_col, classes=class_list, duplicates=duplicates,  # type: ignore[arg-type]
        max_memory=max_memory, rejected=rejected, blank_labels=blank_labels,  # type: ignore[arg-type]
    )
    _timing.note(answers=data.n_answers, tasks=data.n_tasks, workers=data.n_workers, classes=data.n_classes)
    # The outputs' size is known now: refuse before fitting, not after.
    k = data.n_classes
    _check_render_memory(
        data.n_tasks, 1 + (k + 1 if proba else 0), 2, f"{data.n_tasks:,} output rows × {k:,} classes", max_memory
    )
    if workers:
        _check_render_memory(
            data.n_workers * k * k, 3, 3,
            f"--workers table of {data.n_workers:,} workers × {k:,}² classes", max_memory,
        )
    callback, stop = _progress(quiet)
    try:
        with _timing.stage("fit"):
            result = run_method(data, method, callback=callback, max_memory=max_memory, **params)
    finally:
        stop()
    _timing.note(iterations=result.n_iter, converged=result.converged)
    # 3. Evaluation (it can fail: nothing written yet).
    summary = None
    if truth_labels is not None:
        from ..reports.evaluate import evaluate_run

        summary = evaluate_run(data, result, truth_labels, params.get("gold"))
    # 4. Render everything, then write all or nothing.
    with _timing.stage("render"):
        outputs = [(targets[0], render_table(result.table(proba=proba, arrow=True), out_fmt, key="task"))]
        if workers:
            outputs.append((targets[1], render_table(result.workers_table(arrow=True), formats[1], key="worker")))
        if save_workers:
            from ..methods.model_file import to_json

            outputs.append((targets[-1], to_json(result)))
    with _timing.stage("write"):
        commit(outputs)
    if summary is not None:
        from ..reports.evaluate import print_table, summary_line

        ev, note = summary
        if sys.stderr is not None and sys.stderr.isatty():
            print_table(ev, sys.stderr)
            if note:
                _err(note.strip(", "))
        else:
            _err(summary_line(ev, note))


def _read_worker_model(path: str, max_memory: Any) -> dict[str, Any]:
    from ..io.read import read_bytes
    from ..methods.model_file import from_json

    data, display = read_bytes(path, max_memory)
    return from_json(data, display, max_memory)


@app.command()
@handle_errors()
def evaluate(
    predictions: str = typer.Argument(..., metavar="PREDICTIONS", help="Predicted labels (task,label), e.g. the output of aggregate; - for stdin."),
    truth: str = typer.Option(..., "--truth", "-t", help="True labels (task,label)."),
    task_col: Optional[str] = typer.Option(None, "--task-col", help="Task column of the predictions (default: task or an alias)."),
    label_col: Optional[str] = typer.Option(None, "--label-col", help="Label column of the predictions (default: label or an alias)."),
    truth_task_col: Optional[str] = typer.Option(None, "--truth-task-col", help="Task column of --truth."),
    truth_label_col: Optional[str] = typer.Option(None, "--truth-label-col", help="Label column of --truth (default: label, truth, gold, ...)."),
    fmt: Optional[str] = typer.Option(None, "--format", "-f", help="csv, tsv, json, jsonl or parquet (default: a table on a terminal, else csv)."),
    verbose: bool = VerboseOpt,
) -> None:
    """Score predicted labels against the truth: accuracy, macro-F1, per-class recall.

    Example: crowdagg aggregate labels.csv | crowdagg evaluate - --truth gold.csv
    """
    from ..io.output import check_binary, resolve
    from ..io.read import check_stdin_once, output_format, read_task_labels
    from ..reports.evaluate import evaluate_labels, evaluation_bytes, print_table

    _require_values(predictions=predictions, truth=truth, format=fmt)
    check_stdin_once([(f"PREDICTIONS {predictions}", predictions), (f"--truth {truth}", truth)])
    out_fmt = output_format(fmt, None) if fmt is not None else None
    if out_fmt is not None:
        check_binary(resolve("-"), out_fmt)
    pred = read_task_labels(
        predictions, task_col=task_col, label_col=label_col, what="predicted",
        options={"task": "--task-col", "label": "--label-col"},
    )
    true = read_task_labels(
        truth, task_col=truth_task_col, label_col=truth_label_col,
        options={"task": "--truth-task-col", "label": "--truth-label-col"},
    )
    ev = evaluate_labels(pred, true)
    if out_fmt is None and sys.stdout is not None and sys.stdout.isatty():
        print_table(ev, sys.stdout)
        return
    _write_stdout(evaluation_bytes(ev, out_fmt or "csv"))


_SIMULATE_SPELLING = {
    "n_tasks": "--tasks", "n_workers": "--workers", "n_classes": "--classes", "outdir": "--output",
}


@app.command()
@handle_errors(_SIMULATE_SPELLING)
def simulate(
    output: Optional[str] = typer.Option(None, "--output", "-o", help="Directory for labels.csv, truth.csv, confusion.csv, workers.csv (required)."),
    tasks: Optional[int] = typer.Option(None, "--tasks", help="Number of tasks (default 1000, or the scenario's)."),
    workers: Optional[int] = typer.Option(None, "--workers", help="Number of workers (default 50, or the scenario's)."),
    classes: Optional[int] = typer.Option(None, "--classes", help="Number of classes (default 2, or the scenario's)."),
    per_task: Optional[int] = typer.Option(None, "--per-task", help="Answers per task (default 5, or the scenario's)."),
    model: str = typer.Option("ds", "--model", help="Worker model: ds (full confusion, diagonal ~ U(skill)), onecoin, or hammer-spammer."),
    skill: str = typer.Option("0.6,0.9", "--skill", help="Range LOW,HIGH of worker accuracy."),
    spammers: Optional[float] = typer.Option(None, "--spammers", help="Fraction of spammers (answers independent of the truth); default 0 (hammer-spammer: 0.5, tutorial-spammers: 0.3)."),
    adversaries: float = typer.Option(0.0, "--adversaries", help="Fraction of adversarial workers."),
    extreme_spammers: int = typer.Option(0, "--extreme-spammers", help="Extra workers who label every task at random."),
    assignment: str = typer.Option("random", "--assignment", help="random (per-task distinct workers), regular ((l,r)-regular with l=--per-task, r=--tasks-per-worker) or dense."),
    tasks_per_worker: Optional[int] = typer.Option(None, "--tasks-per-worker", help="r of an (l,r)-regular assignment."),
    scenario: Optional[str] = typer.Option(None, "--scenario", help="A seed paper's scenario (see `crowdagg simulate --list-scenarios`)."),
    list_scenarios: bool = typer.Option(False, "--list-scenarios", help="List the named scenarios and exit."),
    seed: int = typer.Option(0, "--seed", help="Random seed."),
    max_memory: Optional[str] = typer.Option(None, "--max-memory", help="Refuse up front a crowd that would need more memory than this (default 80% of available)."),
    verbose: bool = VerboseOpt,
) -> None:
    """Write a synthetic crowd with known truth and confusion matrices.

    Files: labels.csv (task,worker,label), truth.csv (task,label),
    confusion.csv (worker,true_label,observed_label,probability) and
    workers.csv (worker,kind,accuracy,n_answers).

    Example: crowdagg simulate --tasks 10000 --workers 200 --classes 5 --per-task 5 --spammers 0.1 --seed 1 -o sim/
    """
    from ..io.read import DIRECTORY, output_format
    from ..simulate import SCENARIOS
    from ..simulate import simulate as run_simulation

    _require_values(output=output, scenario=scenario, max_memory=max_memory)
    if list_scenarios:
        _write_stdout("".join(f"{k}\t{v}\n" for k, v in SCENARIOS.items()))
        return
    if not output:
        raise UsageError("simulate needs --output DIR (where labels.csv, truth.csv, ... are written)")
    output_format(None, output, "--output", DIRECTORY)
    try:
        lo, hi = (float(x) for x in skill.split(","))
    except ValueError:
        raise UsageError(f"--skill must be LOW,HIGH (e.g. 0.6,0.9), got {skill!r}") from None
    crowd = run_simulation(
        tasks, workers, classes, per_task, model=model, skill=(lo, hi), spammers=spammers,
        adversaries=adversaries, extreme_spammers=extreme_spammers, assignment=assignment,
        tasks_per_worker=tasks_per_worker, scenario=scenario, seed=seed, max_memory=max_memory,
    )
    written = crowd.write(output)
    _err(
        f"wrote {len(crowd.task)} answers on {len(crowd.truth)} tasks by {crowd.confusion.shape[0]} workers: "
        + ", ".join(str(p) for p in written)
    )


@app.command()
@handle_errors()
def methods(
    name: Optional[str] = typer.Argument(None, metavar="[NAME]", help="A method: show its model, reference and parameters."),
    fmt: Optional[str] = typer.Option(None, "--format", "-f", help="csv, tsv, jsonl, json or parquet (default: aligned text)."),
    verbose: bool = VerboseOpt,
) -> None:
    """List the aggregation methods, one line each; with NAME, one method in full."""
    from ..methods.registry import METHODS, get

    _require_values(format=fmt)
    out_fmt = None
    if fmt is not None:
        from ..io.output import check_binary, resolve
        from ..io.read import output_format

        out_fmt = output_format(fmt, None)
        check_binary(resolve("-"), out_fmt)
    if name is not None:
        spec = get(name)
        if fmt is None:
            _write_stdout(_method_text(spec))
            return
        rows: dict[str, list[Any]] = {k: [] for k in ("parameter", "type", "default", "range", "paper", "help")}
        for p in spec.params:
            for key, value in zip(rows, (p.name, p.kind.__name__, repr(p.default), p.describe_range(), p.paper, p.help)):
                rows[key].append(value)
        table: dict[str, Any] = rows
    else:
        if fmt is None:
            width = max(len(n) for n in METHODS)
            _write_stdout("".join(f"{n:<{width}}  {m.summary}\n" for n, m in METHODS.items()))
            return
        table = {
            "method": list(METHODS),
            "class": [m.target.partition(":")[2] for m in METHODS.values()],
            "summary": [m.summary for m in METHODS.values()],
        }
    import numpy as np

    from ..io.render import render_table

    assert out_fmt is not None
    _write_stdout(render_table({k: np.array(v, dtype=object) for k, v in table.items()}, out_fmt))


def _method_text(spec: Any) -> str:
    """``crowdagg methods NAME``: summary, model, reference, parameters."""
    import textwrap

    lines = [f"{spec.name} -- {spec.summary}", ""]
    lines += textwrap.wrap("Model: " + spec.model, 88, subsequent_indent="  ") + [""]
    lines += textwrap.wrap("Reference: " + spec.reference, 88, subsequent_indent="  ") + ["", "Parameters:"]
    for p in spec.params:
        how = _flag(p.name) if p.name in _PARAM_FLAGS else f"-p {p.name}=VALUE"
        bounds = p.describe_range()
        head = f"  {p.name} ({p.kind.__name__}, default {p.default!r}{', ' + bounds if bounds else ''}; {how})"
        paper = f" [paper: {p.paper}]" if p.paper else ""
        lines.append(head)
        lines += textwrap.wrap(p.help + paper, 84, initial_indent="      ", subsequent_indent="      ")
    if spec.gold:
        lines += ["", "Takes --gold FILE: known labels that clamp those tasks."]
    return "\n".join(lines) + "\n"


def _version_callback(value: bool) -> None:
    if value:
        from .. import __version__

        _write_stdout(f"crowdagg {__version__}\n")
        raise typer.Exit(0)


@app.callback()
def main(
    version: bool = typer.Option(False, "--version", callback=_version_callback, is_eager=True, help="Print the version and exit."),
) -> None:
    """Turn noisy labels from many annotators into trustworthy labels."""


def run(argv: list[str] | None = None) -> int:
    """Run the CLI on ``argv`` (default ``sys.argv[1:]``); return the exit status."""
    return int(app(args=argv, prog_name="crowdagg", standalone_mode=False) or 0)


__all__ = ["app", "run", "DataError"]
