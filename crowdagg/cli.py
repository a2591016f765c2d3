"""The ``crowdagg`` command line: parse, call the library, write.

stdout carries data only; messages, warnings and progress go to stderr.
Errors print one ``Error: ...`` line (exit 1 for data/runtime errors, 2 for
usage errors); ``--verbose`` adds the traceback.
"""

from __future__ import annotations

import functools
import os
import sys
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Optional, TypeVar

import typer

from .errors import CrowdaggError, CrowdaggWarning, DataError, UsageError

if TYPE_CHECKING:  # pragma: no cover
    from .data import AnnotationSet
    from .evaluate import Evaluation

app = typer.Typer(
    name="crowdagg",
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

F = TypeVar("F", bound=Callable[..., Any])


# --------------------------------------------------------------------------- plumbing
def _err(msg: str) -> None:
    sys.stderr.write(msg.rstrip("\n") + "\n")
    sys.stderr.flush()


def _emit_warnings(caught: list[warnings.WarningMessage]) -> None:
    seen: set[str] = set()
    for w in caught:
        text = str(w.message)
        if text not in seen:
            seen.add(text)
            _err(f"Warning: {text}")


def _write_stdout(text: str) -> None:
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        # The reader went away (`| head`): stop quietly, and keep Python's
        # final flush from raising again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError):
            pass
        raise typer.Exit(0) from None


def handle_errors(func: F) -> F:
    """Turn errors into one ``Error:`` line and an exit code; relay crowdagg warnings to stderr."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        verbose = bool(kwargs.get("verbose"))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", CrowdaggWarning)

            def flush() -> None:
                _emit_warnings([w for w in caught if issubclass(w.category, CrowdaggWarning)])
                caught.clear()

            try:
                return func(*args, **kwargs)
            except typer.Exit:
                raise
            except KeyboardInterrupt:
                flush()
                _err("Error: interrupted")
                raise typer.Exit(130) from None
            except Exception as exc:  # noqa: BLE001 - every error ends as one line
                flush()
                if isinstance(exc, CrowdaggError):
                    code, msg = exc.exit_code, str(exc)
                elif verbose:
                    raise
                elif isinstance(exc, MemoryError):
                    code, msg = 1, "out of memory"
                else:
                    code, msg = 1, f"{type(exc).__name__}: {exc} (run with --verbose for the traceback)"
                if verbose:
                    import traceback

                    traceback.print_exc(file=sys.stderr)
                _err(f"Error: {msg}")
                raise typer.Exit(code) from None
            finally:
                flush()

    return wrapper  # type: ignore[return-value]


def _split_list(value: Optional[str]) -> Optional[list[str]]:
    if value is None:
        return None
    items = [v.strip() for v in value.split(",")]
    if not all(items):
        raise UsageError(f"--classes has an empty entry: {value!r}")
    return items


def _write_outputs(outputs: list[tuple[str, str]]) -> None:
    """Write (path, text) pairs atomically; path ``-`` or empty goes to stdout last."""
    from .io import atomic_outputs, write_text

    files = [(p, t) for p, t in outputs if p and p != "-"]
    with atomic_outputs([p for p, _ in files]) as temps:
        for tmp, (p, text) in zip(temps, files):
            write_text(text, tmp, gz=p.endswith(".gz"))
    for p, text in outputs:
        if not p or p == "-":
            _write_stdout(text)


def _progress(quiet: bool) -> tuple[Callable[[int, float], None] | None, Callable[[], None]]:
    """An EM progress callback drawing on stderr, only when stderr is a terminal."""
    if quiet or not sys.stderr.isatty():
        return None, lambda: None
    from rich.console import Console

    console = Console(stderr=True)
    status = console.status("fitting ...")
    status.start()

    def update(it: int, ll: float) -> None:
        status.update(f"iteration {it}" + ("" if ll != ll else f"  log-likelihood {ll:.6g}"))

    return update, status.stop


def _print_evaluation(ev: Evaluation, fmt: Optional[str], *, to_stderr: bool) -> str | None:
    """Render an evaluation: rich table on a terminal, else csv/tsv/json text (returned)."""
    import json

    stream = sys.stderr if to_stderr else sys.stdout
    if fmt is None and stream.isatty():
        from rich.console import Console
        from rich.table import Table

        table = Table(title="evaluation")
        table.add_column("metric")
        table.add_column("value", justify="right")
        for name, value in ev.rows():
            table.add_row(name, f"{value:.4f}" if isinstance(value, float) else str(value))
        Console(file=stream).print(table)
        return None
    fmt = (fmt or "csv").lower()
    if fmt in ("json", "jsonl"):
        return json.dumps(ev.as_dict()) + "\n"
    if fmt not in ("csv", "tsv"):
        raise UsageError(f"--format must be one of csv, tsv, json, jsonl, got {fmt!r}")
    sep = "," if fmt == "csv" else "\t"
    lines = [f"metric{sep}value"]
    for name, value in ev.rows():
        lines.append(f"{name}{sep}{value:.6g}" if isinstance(value, float) else f"{name}{sep}{value}")
    return "\n".join(lines) + "\n"


def _report_load(data: AnnotationSet) -> None:
    found = data.n_duplicates
    if found:
        if data.duplicates == "keep":
            warnings.warn(
                f"{found} duplicate answer(s) (same task and worker) kept as separate votes; "
                "use --duplicates first|last|error to change that",
                CrowdaggWarning,
                stacklevel=2,
            )
        else:
            warnings.warn(
                f"{found} duplicate answer(s) (same task and worker) dropped, keeping the {data.duplicates} one",
                CrowdaggWarning,
                stacklevel=2,
            )
    if data.n_classes == 1:
        warnings.warn(
            f"only one class ({data.classes[0]!r}) is present: every task gets it; "
            "pass --classes to name the others",
            CrowdaggWarning,
            stacklevel=2,
        )


# --------------------------------------------------------------------------- commands
VerboseOpt = typer.Option(False, "--verbose", "-v", help="Show tracebacks on error.")


@app.command()
@handle_errors
def aggregate(
    input: str = typer.Argument(..., help="Answers file (CSV/TSV/JSON/JSONL, optionally .gz), or - for stdin."),
    method: str = typer.Option("ds", "--method", "-m", help="Aggregation method (see `crowdagg methods`)."),
    output: Optional[str] = typer.Option(None, "--output", "-o", help="Write here (atomically) instead of stdout."),
    fmt: Optional[str] = typer.Option(None, "--format", "-f", help="csv, tsv, jsonl or json (default: from -o, else csv)."),
    proba: bool = typer.Option(False, "--proba", help="Add one p_<class> posterior column per class."),
    workers: Optional[str] = typer.Option(None, "--workers", help="Write each worker's confusion matrix (long form) and accuracy here."),
    truth: Optional[str] = typer.Option(None, "--truth", help="Gold labels file: print accuracy etc. to stderr."),
    gold: Optional[str] = typer.Option(None, "--gold", help="Known labels that clamp those tasks (ds, onecoin)."),
    classes: Optional[str] = typer.Option(None, "--classes", help="Comma-separated class set, in order (includes classes nobody chose)."),
    duplicates: str = typer.Option("keep", "--duplicates", help="Repeated (task, worker) answers: keep, first, last or error."),
    input_format: Optional[str] = typer.Option(None, "--input-format", help="csv, tsv, json or jsonl (default: from extension/content)."),
    task_col: Optional[str] = typer.Option(None, "--task-col", help="Task column (default: task or an alias such as item, question)."),
    worker_col: Optional[str] = typer.Option(None, "--worker-col", help="Worker column (default: worker or an alias such as annotator, rater, performer)."),
    label_col: Optional[str] = typer.Option(None, "--label-col", help="Label column (default: label or an alias such as answer, response)."),
    seed: int = typer.Option(0, "--seed", help="Seed for tie-breaking and any random choice."),
    max_iter: Optional[int] = typer.Option(None, "--max-iter", help="Iteration cap (ds, onecoin: 100; wmv: 50)."),
    tol: Optional[float] = typer.Option(None, "--tol", help="Stop when the relative log-likelihood change is below this (ds, onecoin: 1e-6); 0 runs exactly --max-iter."),
    smoothing: Optional[float] = typer.Option(None, "--smoothing", help="Dirichlet pseudo-count added to each confusion cell and class (ds, onecoin: 0 = maximum likelihood, entries floored at 1e-10)."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress display."),
    verbose: bool = VerboseOpt,
) -> None:
    """Aggregate answers into one label per task.

    Writes task,label,confidence (+ p_<class> with --proba), one row per task
    in input order.

    Methods: mv = majority vote (seeded random tie-break); wmv = weighted
    majority vote whose weights are the one-coin log-odds log((K-1)p/(1-p)),
    p = a worker's add-one-smoothed agreement with the current labels,
    re-estimated until no label changes; ds = Dawid-Skene EM (full confusion
    per worker); onecoin = one-coin Dawid-Skene EM.

    Example: cat answers.jsonl | crowdagg aggregate - --method mv --format jsonl | jq .label
    """
    from .aggregators import aggregate as run_method
    from .aggregators import get_method
    from .data import DUPLICATE_POLICIES
    from .io import load_annotations, output_format, read_task_labels, render_table

    cls = get_method(method)
    params: dict[str, Any] = {"seed": seed}
    given = {"max_iter": max_iter, "tol": tol, "smoothing": smoothing}
    for key, value in given.items():
        if value is not None:
            if key not in cls.params:
                raise UsageError(f"--{key.replace('_', '-')} does not apply to method {method!r}")
            params[key] = value
    if gold is not None:
        if "gold" not in cls.params:
            raise UsageError(f"--gold does not apply to method {method!r}")
        params["gold"] = read_task_labels(gold, what="gold")
    if duplicates not in DUPLICATE_POLICIES:
        raise UsageError(f"--duplicates must be one of {', '.join(DUPLICATE_POLICIES)}, got {duplicates!r}")
    out_fmt = output_format(fmt, output)
    truth_labels = read_task_labels(truth) if truth else None
    data = load_annotations(
        input, input_format=input_format, task_col=task_col, worker_col=worker_col,
        label_col=label_col, classes=_split_list(classes), duplicates=duplicates,  # type: ignore[arg-type]
    )
    _report_load(data)
    callback, stop = _progress(quiet)
    try:
        result = run_method(data, method, callback=callback, **params)
    finally:
        stop()
    outputs = [(output or "-", render_table(result.to_frame(proba=proba), out_fmt))]
    if workers:
        wfmt = output_format(None, workers)
        outputs.insert(0, (workers, render_table(result.workers_frame(), wfmt)))
    _write_outputs(outputs)
    if truth_labels is not None:
        from .evaluate import evaluate_labels

        predicted = dict(zip(data.task_names.tolist(), result.label_names().tolist()))
        ev = evaluate_labels(predicted, truth_labels, list(data.classes))
        if sys.stderr.isatty():
            _print_evaluation(ev, None, to_stderr=True)
        else:
            recall = " ".join(f"{c}={r:.4f}" for c, r in ev.recall.items())
            _err(
                f"accuracy {ev.accuracy:.4f}  macro-F1 {ev.macro_f1:.4f}  recall {recall}  "
                f"({ev.n_compared} tasks compared, {ev.n_without_truth} without truth)"
            )


@app.command()
@handle_errors
def evaluate(
    predictions: str = typer.Argument(..., help="Predicted labels (task,label), e.g. the output of aggregate; - for stdin."),
    truth: str = typer.Option(..., "--truth", "-t", help="True labels (task,label)."),
    fmt: Optional[str] = typer.Option(None, "--format", "-f", help="csv, tsv or json (default: a table on a terminal, else csv)."),
    verbose: bool = VerboseOpt,
) -> None:
    """Score predicted labels against the truth: accuracy, macro-F1, per-class recall.

    Example: crowdagg aggregate labels.csv | crowdagg evaluate - --truth gold.csv
    """
    from .evaluate import evaluate_labels
    from .io import read_task_labels

    pred = read_task_labels(predictions, what="predicted")
    true = read_task_labels(truth)
    ev = evaluate_labels(pred, true)
    text = _print_evaluation(ev, fmt, to_stderr=False)
    if text:
        _write_stdout(text)


@app.command()
@handle_errors
def simulate(
    output: Optional[str] = typer.Option(None, "--output", "-o", help="Directory for labels.csv, truth.csv, confusion.csv, workers.csv (required)."),
    tasks: Optional[int] = typer.Option(None, "--tasks", help="Number of tasks (default 1000, or the scenario's)."),
    workers: Optional[int] = typer.Option(None, "--workers", help="Number of workers (default 50, or the scenario's)."),
    classes: Optional[int] = typer.Option(None, "--classes", help="Number of classes (default 2, or the scenario's)."),
    per_task: Optional[int] = typer.Option(None, "--per-task", help="Answers per task (default 5, or the scenario's)."),
    model: str = typer.Option("ds", "--model", help="Worker model: ds (full confusion, diagonal ~ U(skill)), onecoin, or hammer-spammer."),
    skill: str = typer.Option("0.6,0.9", "--skill", help="Range LOW,HIGH of worker accuracy."),
    spammers: float = typer.Option(0.0, "--spammers", help="Fraction of spammers (answers independent of the truth)."),
    adversaries: float = typer.Option(0.0, "--adversaries", help="Fraction of adversarial workers."),
    extreme_spammers: int = typer.Option(0, "--extreme-spammers", help="Extra workers who label every task at random."),
    assignment: str = typer.Option("random", "--assignment", help="random (per-task distinct workers), regular ((l,r)-regular with l=--per-task, r=--tasks-per-worker) or dense."),
    tasks_per_worker: Optional[int] = typer.Option(None, "--tasks-per-worker", help="r of an (l,r)-regular assignment."),
    scenario: Optional[str] = typer.Option(None, "--scenario", help="A seed paper's scenario (see `crowdagg simulate --list-scenarios`)."),
    list_scenarios: bool = typer.Option(False, "--list-scenarios", help="List the named scenarios and exit."),
    seed: int = typer.Option(0, "--seed", help="Random seed."),
    verbose: bool = VerboseOpt,
) -> None:
    """Write a synthetic crowd with known truth and confusion matrices.

    Files: labels.csv (task,worker,label), truth.csv (task,label),
    confusion.csv (worker,true_label,observed_label,probability) and
    workers.csv (worker,kind,accuracy,n_answers).

    Example: crowdagg simulate --tasks 10000 --workers 200 --classes 5 --per-task 5 --spammers 0.1 --seed 1 -o sim/
    """
    from .simulate import SCENARIOS
    from .simulate import simulate as run_simulation

    if list_scenarios:
        _write_stdout("".join(f"{k}\t{v}\n" for k, v in SCENARIOS.items()))
        return
    if not output:
        raise UsageError("simulate needs --output DIR (where labels.csv, truth.csv, ... are written)")
    try:
        lo, hi = (float(x) for x in skill.split(","))
    except ValueError:
        raise UsageError(f"--skill must be LOW,HIGH (e.g. 0.6,0.9), got {skill!r}") from None
    crowd = run_simulation(
        tasks, workers, classes, per_task, model=model, skill=(lo, hi), spammers=spammers,
        adversaries=adversaries, extreme_spammers=extreme_spammers, assignment=assignment,
        tasks_per_worker=tasks_per_worker, scenario=scenario, seed=seed,
    )
    written = crowd.write(output)
    _err(
        f"wrote {len(crowd.task)} answers on {len(crowd.truth)} tasks by {crowd.confusion.shape[0]} workers: "
        + ", ".join(str(p) for p in written)
    )


@app.command()
@handle_errors
def methods(
    fmt: Optional[str] = typer.Option(None, "--format", "-f", help="csv, tsv, jsonl or json (default: aligned text)."),
    verbose: bool = VerboseOpt,
) -> None:
    """List the aggregation methods, one line each."""
    from .aggregators import REGISTRY

    if fmt is None:
        width = max(len(n) for n in REGISTRY)
        _write_stdout("".join(f"{n:<{width}}  {c.summary}\n" for n, c in REGISTRY.items()))
        return
    import pandas as pd

    from .io import output_format, render_table

    frame = pd.DataFrame(
        {"method": list(REGISTRY), "class": [c.__name__ for c in REGISTRY.values()],
         "summary": [c.summary for c in REGISTRY.values()]}
    )
    _write_stdout(render_table(frame, output_format(fmt, None)))


def _version_callback(value: bool) -> None:
    if value:
        from . import __version__

        _write_stdout(f"crowdagg {__version__}\n")
        raise typer.Exit(0)


@app.callback()
def main(
    version: bool = typer.Option(False, "--version", callback=_version_callback, is_eager=True, help="Print the version and exit."),
) -> None:
    """Turn noisy labels from many annotators into trustworthy labels."""


def run() -> None:
    """Console-script entry point."""
    app()


__all__ = ["app", "run", "DataError"]
