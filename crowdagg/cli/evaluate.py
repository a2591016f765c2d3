"""``crowdagg evaluate``: predicted labels against the truth."""

from __future__ import annotations

import sys
from typing import Optional

import typer

from . import options as opt
from .options import require_values
from .pipeline import read_labels
from .plumbing import handle_errors, write_stdout


@handle_errors()
def evaluate(
    predictions: str = typer.Argument(..., metavar="PREDICTIONS", help="Predicted labels (task,label), e.g. the output of aggregate; - for stdin."),
    truth: str = typer.Option(..., "--truth", "-t", help="True labels (task,label)."),
    task_col: Optional[str] = opt.column_option("--task-col", "Task column of the predictions (default: task or an alias)."),
    label_col: Optional[str] = opt.column_option("--label-col", "Label column of the predictions (default: label or an alias)."),
    truth_task_col: Optional[str] = opt.column_option("--truth-task-col", "Task column of --truth."),
    truth_label_col: Optional[str] = opt.TRUTH_LABEL_COL,
    fmt: Optional[str] = opt.format_option("csv, tsv, json, jsonl or parquet (default: a table on a terminal, else csv)."),
    verbose: bool = opt.VERBOSE,
) -> None:
    """Score predicted labels against the truth: accuracy, macro-F1, per-class recall.

    Example: crowdagg aggregate labels.csv | crowdagg evaluate - --truth gold.csv
    """
    from ..io.output import check_binary, resolve
    from ..io.read import check_stdin_once, output_format
    from ..reports.evaluate import evaluate_labels, evaluation_bytes, print_table

    require_values(predictions=predictions, truth=truth, format=fmt)
    check_stdin_once([(f"PREDICTIONS {predictions}", predictions), (f"--truth {truth}", truth)])
    _check_not_itself(predictions, truth, label_col, truth_label_col)
    out_fmt = output_format(fmt, None) if fmt is not None else None
    if out_fmt is not None:
        check_binary(resolve("-"), out_fmt)
    pred = read_labels(predictions, task_col, label_col, what="predicted")
    true = read_labels(truth, truth_task_col, truth_label_col, option="--truth")
    ev = evaluate_labels(pred, true)
    if out_fmt is None and sys.stdout is not None and sys.stdout.isatty():
        print_table(ev, sys.stdout)
        return
    write_stdout(evaluation_bytes(ev, out_fmt or "csv"))


def _check_not_itself(predictions: str, truth: str, label_col: Optional[str], truth_label_col: Optional[str]) -> None:
    """Refuse the truth as its own prediction: one file by any spelling (a relative or absolute path, a link, a
    hard link, a shell glob's match), its labels read from the same column, would score 1.0 -- the sign of a
    tour's output redirected onto the dataset's truth file, which overwrote the known labels, which a perfect score
    would hide.  One file read by two label columns (a prediction beside the truth) is scored; two spellings of
    one column (``--truth-label-col label`` beside the default, which is ``label``) are the same column."""
    from ..errors import UsageError
    from ..io.output import identity

    same = predictions == truth and predictions != "-"  # (standard input twice: check_stdin_once's message)
    if not same:
        ids = identity(predictions), identity(truth)
        same = ids[0] is not None and ids[0] == ids[1]
    if same and label_col != truth_label_col:
        same = _label_column(predictions, label_col) == _label_column(truth, truth_label_col)
    if same:
        where = predictions if predictions == truth else f"{predictions} and --truth {truth}"
        raise UsageError(f"PREDICTIONS and --truth are the same file ({where}): it would score 1.0 against "
                         "itself; was the truth file overwritten by an output redirected onto it?")


def _label_column(path: str, label_col: Optional[str]) -> Optional[str]:
    """The header text of the label column that ``label_col`` (None: the default) picks in ``path``; None where
    the file or the column cannot be read, which its own read then says (only read when the two spellings differ
    on one file)."""
    from ..errors import CrowdaggError
    from ..io.columns import map_label_columns
    from ..io.read import read_raw

    try:
        table = read_raw(path, role="truth")
        return map_label_columns(table.header, source=table.display, label=label_col)[1]
    except CrowdaggError:
        return None
