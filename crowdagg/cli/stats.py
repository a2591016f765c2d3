"""``crowdagg stats``: agreement statistics -- Krippendorff's alpha, Fleiss' kappa, uncertainty, consistency."""

from __future__ import annotations

import sys
from typing import Any, Optional

import typer

from ..core.threads import use_threads
from . import options as opt
from . import pipeline as steps
from .options import require_values
from .plumbing import handle_errors

HELP = """How far the annotators agree: crowd-kit's metrics, from the shell.

One row per statistic (statistic, value, note):
krippendorff_alpha (nominal, over the tasks with two answers or more),
fleiss_kappa (where every task has the same number of answers; otherwise
the note says how many tasks have how many, and the value is empty),
uncertainty (the mean entropy of a task's answers, nats), agreement (the
share of the answers equal to the method's label) and consistency
(crowd-kit's: the mean posterior of the method's label when each worker is
right with its agreement share).  A value is empty, and its note says why,
where the statistic is undefined (one class only, one answer per task).
Every answer counts: --duplicates last keeps one per worker and task, as
the krippendorff package's workers x tasks matrix holds them.

--tasks FILE: one row per task (task, answers, label, agreement,
uncertainty, consistency).  --workers FILE: one row per worker (worker,
answers, agreement -- its consistency with the aggregate --, uncertainty).

A table on a terminal; CSV (or --format) when piped or with -o.

\b
Examples:
  crowdagg stats labels.csv
  crowdagg stats labels.csv -m ds --tasks tasks.csv --workers workers.csv -o stats.csv
  crowdagg stats labels.csv -f json | jq '.[] | select(.statistic == "krippendorff_alpha") | .value'
"""


@handle_errors(opt.SMOOTHING_BY_P)
@opt.fit_run_options
def stats(
    input: list[str] = typer.Argument(..., metavar="INPUT...", help="Answers file(s) (CSV/TSV/JSON/JSONL/Parquet, optionally .gz; MTurk, Toloka, Label Studio exports), - for stdin, a directory, or a quoted glob; several are read as one data set."),
    method: str = typer.Option("mv", "--method", "-m", help="The method whose labels agreement and consistency measure against (see `crowdagg methods`); default mv, as crowd-kit's metrics."),
    output: Optional[str] = opt.output_option("Write the statistics here instead of standard output (format from the extension)."),
    fmt: Optional[str] = opt.format_option("csv, tsv, jsonl, json or parquet (default: a table on a terminal, else csv; -o: from its extension)."),
    tasks: Optional[str] = typer.Option(None, "--tasks", metavar="FILE", help="Write one row per task here: task, answers, label (the method's), agreement (share of its answers equal to the label), uncertainty (entropy of its answers, nats), consistency (the posterior of its label)."),
    workers: Optional[str] = typer.Option(None, "--workers", metavar="FILE", help="Write one row per worker here: worker, answers, agreement (share of its answers equal to the method's label), uncertainty (entropy of its answers, nats)."),
    *,
    run: opt.FitRun,
) -> None:
    """The agreement statistics (the help text: :data:`HELP`)."""
    # 1. Everything that can be checked without reading the data.
    for path in input:
        require_values(input=path)
    require_values(output=output, format=fmt, tasks=tasks, workers=workers, **run.texts())
    steps.check_stdin(input)
    _, params = steps.check_method(method, run.flags(), run.param_, spelling=opt.SMOOTHING_BY_P)
    class_list, n_threads = steps.check_fit_run(run)
    planned, sources = steps.plan_outputs(_outputs(output, fmt, tasks, workers), input)
    on_terminal = output is None and fmt is None and planned["--output"].target.is_terminal()
    if on_terminal:
        del planned["--output"]
    with use_threads(n_threads):
        # 2. The data, the fit, the statistics.
        data = steps.load(sources, **run.reading(class_list))
        from ..core import timing
        from ..reports.agreement import TASK_COLUMNS, WORKER_COLUMNS, check_memory
        from ..reports.agreement import stats as agreement_stats

        check_memory(data, run.max_memory)  # before the fit, not after it
        if tasks is not None:
            steps.check_render_memory(data.n_tasks, len(TASK_COLUMNS) - 2, 2, f"--tasks table of {data.n_tasks:,} tasks",
                                      run.max_memory)
        if workers is not None:
            steps.check_render_memory(data.n_workers, len(WORKER_COLUMNS) - 1, 1,
                                      f"--workers table of {data.n_workers:,} workers", run.max_memory)
        result = steps.fit(data, method, params, quiet=run.quiet, max_memory=run.max_memory)
        with timing.stage("report"):
            figures = agreement_stats(data, result, max_memory=run.max_memory)
        # 3. Every output rendered, then all written or none.
        steps.render_and_commit(planned, _renderers(figures))
    if on_terminal:
        from ..reports.agreement import print_table

        print_table(figures, sys.stdout)


def _outputs(output: Optional[str], fmt: Optional[str], tasks: Optional[str],
             workers: Optional[str]) -> list[steps.Output]:
    """The statistics (stdout unless -o), and the per-task and per-worker tables when asked."""
    from ..reports.agreement import SUMMARY_COLUMNS, TASK_COLUMNS, WORKER_COLUMNS

    planned = [steps.Output("--output", output or "-", SUMMARY_COLUMNS, fmt=fmt)]
    if tasks:
        planned.append(steps.Output("--tasks", tasks, TASK_COLUMNS))
    if workers:
        planned.append(steps.Output("--workers", workers, WORKER_COLUMNS))
    return planned


def _renderers(figures: Any) -> dict[str, Any]:
    """How each output is rendered (only the planned ones are called)."""
    from ..io.render import render_chunks
    from ..reports.workers import table_columns

    return {
        "--output": lambda fmt: render_chunks(table_columns(figures.summary()), fmt, key="statistic"),
        "--tasks": lambda fmt: render_chunks(table_columns(figures.tasks()), fmt, key="task"),
        "--workers": lambda fmt: render_chunks(table_columns(figures.workers()), fmt, key="worker"),
    }
