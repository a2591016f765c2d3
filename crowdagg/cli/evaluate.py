"""``crowdagg evaluate``: predicted labels against the truth."""

from __future__ import annotations

import sys
from typing import Any, Optional

import typer

from . import options as opt
from .options import require_values
from .pipeline import read_labels, read_predictions, read_values
from .plumbing import err, handle_errors


@handle_errors()
def evaluate(
    predictions: str = typer.Argument(..., metavar="PREDICTIONS", help="Predicted labels (task,label), e.g. the output of aggregate; - for stdin."),
    truth: str = typer.Option(..., "--truth", "-t", help="True labels (task,label)."),
    task_col: Optional[str] = opt.column_option("--task-col", "Task column of the predictions (default: task or an alias)."),
    label_col: Optional[str] = opt.column_option("--label-col", "Label column of the predictions (default: label or an alias)."),
    truth_task_col: Optional[str] = opt.column_option("--truth-task-col", "Task column of --truth."),
    truth_label_col: Optional[str] = opt.TRUTH_LABEL_COL,
    fmt: Optional[str] = opt.format_option("csv, tsv, json, jsonl or parquet (default: a table on a terminal, else csv)."),
    reliability: Optional[str] = typer.Option(None, "--reliability", metavar="FILE", help="Write the reliability table here: one row per bin (bin, count, confidence_low, confidence_high, confidence, accuracy); format from the extension (csv, tsv, json, jsonl, parquet)."),
    numeric: bool = typer.Option(False, "--numeric", help="The predictions and the truth are numbers (aggregate --numeric's task,value): mean absolute error, root-mean-square error, Pearson's r and the bias (mean of predicted - true) on the tasks both name; a blank predicted value (a task without answers) is left out."),
    plot: Optional[str] = typer.Option(None, "--plot", metavar="FILE.png", help="Draw the reliability diagram into FILE.png: each bin's accuracy against its mean confidence, beside the diagonal of perfect calibration.  Needs pip install 'crowdagg[plot]'."),
    verbose: bool = opt.VERBOSE,
) -> None:
    """Score predicted labels against the truth: accuracy, macro-F1, per-class recall; and how far their
    confidences can be trusted.

    With the posterior columns of aggregate --proba (p_<class>), also the expected calibration error (ECE), the
    Brier score and the reliability table of the label column's probabilities: the compared tasks sorted by the
    probability of their label and cut into 15 bins of equal count (equal mass); ECE = sum over bins of
    (bin's tasks / tasks) x |bin's accuracy - bin's mean confidence|; Brier = mean over tasks of sum over classes
    of (p_class - 1[class is true])^2.  Without them, the confidence column gives the ECE and the table (no
    Brier score: it needs every class's probability).

    \b
    With --numeric: numeric predictions (aggregate --numeric's task,value) against numeric truth -- mean absolute
    error, root-mean-square error, Pearson's r, bias.

    \b
    Example: crowdagg aggregate labels.csv --proba | crowdagg evaluate - --truth gold.csv --plot reliability.png
    """
    from ..errors import UsageError
    from ..io.output import check_binary, commit, resolve
    from ..io.read import check_stdin_once, output_format
    from ..reports.evaluate import evaluation_bytes, print_table, reliability_bytes

    require_values(predictions=predictions, truth=truth, format=fmt, reliability=reliability, plot=plot)
    check_stdin_once([(f"PREDICTIONS {predictions}", predictions), (f"--truth {truth}", truth)])
    _check_not_itself(predictions, truth, label_col, truth_label_col)
    out_fmt = output_format(fmt, None) if fmt is not None else None
    stdout = resolve("-")
    if out_fmt is not None:
        check_binary(stdout, out_fmt)
    if numeric:
        given = [o for o, v in (("--reliability", reliability), ("--plot", plot)) if v is not None]
        if given:
            raise UsageError(f"{' and '.join(given)} (calibration of class probabilities) "
                             f"{'does' if len(given) == 1 else 'do'} not apply to --numeric")
    files = _plan_files(reliability, plot, stdout,
                        [(f"PREDICTIONS {predictions}", predictions), (f"--truth {truth}", truth)])
    ev: Any
    if numeric:
        from ..reports.numeric import evaluate_values

        ev = evaluate_values(read_values(predictions, task_col, label_col, what="predicted"),
                             read_values(truth, truth_task_col, truth_label_col, option="--truth"))
    else:
        pred = read_predictions(predictions, task_col, label_col)
        true = read_labels(truth, truth_task_col, truth_label_col, option="--truth")
        ev = _evaluate(pred, true, truth, asked=bool(files))
    outputs = []
    if "--reliability" in files:
        target, rel_fmt = files["--reliability"]
        outputs.append((target, reliability_bytes(ev, rel_fmt)))
    if "--plot" in files:
        from ..reports.plot import reliability_diagram

        outputs.append((files["--plot"][0], reliability_diagram(ev.reliability or (), ev.ece or 0.0, ev.brier,
                                                                ev.calibrated_from)))
    on_terminal = out_fmt is None and sys.stdout is not None and sys.stdout.isatty()
    if not on_terminal:
        outputs.insert(0, (stdout, evaluation_bytes(ev, out_fmt or "csv")))
    commit(outputs)  # the files and stdout together, or none of them
    if on_terminal:
        print_table(ev, sys.stdout)


def _plan_files(reliability: Optional[str], plot: Optional[str], stdout: Any,
                inputs: list[tuple[str, Optional[str]]]) -> dict[str, tuple[Any, str]]:
    """``--reliability`` and ``--plot``: resolved and checked before anything is read (format from the name, never
    an input nor standard output, where the scores go, ``--plot`` a .png and matplotlib installed);
    {option: (target, format)}."""
    from ..errors import UsageError
    from ..io.output import check_binary, check_distinct, check_not_inputs, resolve
    from ..io.read import output_format
    from ..reports.evaluate import RELIABILITY_COLUMNS

    files: dict[str, tuple[Any, str]] = {}
    if reliability is not None:
        files["--reliability"] = (resolve(reliability, "--reliability", writes=RELIABILITY_COLUMNS),
                                  output_format(None, reliability, "--reliability"))
    if plot is not None:
        from ..reports.plot import require

        if not plot.lower().endswith(".png"):
            raise UsageError(f"--plot {plot}: the reliability diagram is a PNG image; name it .png")
        require()
        files["--plot"] = (resolve(plot, "--plot"), "png")
    targets = [t for t, _ in files.values()]
    check_distinct([stdout, *targets])
    check_not_inputs(targets, inputs)
    for target, fmt in files.values():
        check_binary(target, fmt)
    return files


def _evaluate(pred: Any, true: dict[str, str], truth_path: str, *, asked: bool) -> Any:
    """The evaluation, with the calibration the predictions allow: the posteriors of their ``p_<class>``
    columns, else the ``confidence`` column (no Brier score), else none -- said on stderr; ``asked``
    (``--reliability`` or ``--plot``) without either is an error."""
    import pandas as pd

    from ..errors import DataError
    from ..reports.evaluate import evaluate_labels

    tasks = pd.Index(list(pred.labels), dtype=object)
    if pred.posteriors is not None:
        known = set(pred.classes)
        lost = next((t for t in pred.labels if t in true and true[t] not in known), None)
        if lost is not None:
            raise DataError(f"--truth {truth_path}: task {lost!r} has the true label {true[lost]!r}, which has no "
                            f"p_{true[lost]} column in {pred.display} (its classes: {', '.join(pred.classes[:10])}"
                            f"{', ...' if len(pred.classes) > 10 else ''})")
        frame = pd.DataFrame(pred.posteriors, index=tasks, columns=pred.classes, copy=False)
        return evaluate_labels(pred.labels, true, pred.classes, posteriors=frame)
    if pred.confidence is not None:
        ev = evaluate_labels(pred.labels, true, confidence=pd.Series(pred.confidence, index=tasks))
        err(f"Note: {pred.display} has no p_<class> columns: ECE and the reliability table are of its confidence "
            "column; the Brier score needs every class's probability (aggregate --proba)")
        return ev
    if asked:
        raise DataError(f"{pred.display} has neither p_<class> columns nor a confidence column: --reliability and "
                        "--plot need the output of aggregate (--proba for the Brier score)")
    ev = evaluate_labels(pred.labels, true)  # (its errors first: one line)
    err(f"Note: {pred.display} has neither p_<class> columns nor a confidence column: calibration (ECE, Brier "
        "score, reliability) needs the output of aggregate --proba")
    return ev


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
