"""Accuracy, macro-F1 and per-class recall of predicted labels against truth; with their posteriors (or each
label's confidence), how far those can be trusted: ECE, Brier score and the reliability table
(:mod:`crowdagg.reports.calibration`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ..core.checks import PROBA_ROUNDING, check_task_mapping
from ..data.annotations import infer_classes
from ..errors import CrowdaggWarning, DataError, param, warn
from .calibration import N_BINS, Calibration, ReliabilityBin, calibration, check_posterior_rows, confidence_calibration

if TYPE_CHECKING:  # pragma: no cover
    from .numeric import NumericEvaluation

#: The columns of the reliability table (``evaluate --reliability``), one row per bin in rising confidence.
RELIABILITY_COLUMNS = ("bin", "count", "confidence_low", "confidence_high", "confidence", "accuracy")


@dataclass
class Evaluation:
    """Scores of predicted labels against known truth.

    ``n_compared`` tasks have both a prediction and a truth label;
    ``n_without_truth`` predicted tasks have no truth (not scored);
    ``n_truth_unpredicted`` truth tasks have no prediction.

    Where posteriors (or each label's confidence) were given, the compared
    tasks' calibration (:mod:`crowdagg.reports.calibration`): ``ece``
    over ``n_bins`` equal-mass bins of the confidence of each *given* label,
    ``brier`` (None from confidences alone: it needs every class's
    probability) and ``reliability``, the bins in rising confidence;
    ``calibrated_from`` says which (``"posteriors"``, ``"confidence"``, or
    ``""``: not scored, the three fields None).
    """

    accuracy: float
    macro_f1: float
    recall: dict[str, float]
    n_compared: int
    n_without_truth: int
    n_truth_unpredicted: int
    classes: list[str] = field(default_factory=list)
    ece: float | None = None
    brier: float | None = None
    reliability: tuple[ReliabilityBin, ...] | None = None
    n_bins: int = N_BINS
    calibrated_from: str = ""

    def rows(self) -> list[tuple[str, float | int]]:
        """(metric, value) pairs in display order."""
        out: list[tuple[str, float | int]] = [
            ("accuracy", self.accuracy),
            ("macro_f1", self.macro_f1),
        ]
        out += [(f"recall[{c}]", r) for c, r in self.recall.items()]
        out += [
            ("n_compared", self.n_compared),
            ("n_without_truth", self.n_without_truth),
            ("n_truth_unpredicted", self.n_truth_unpredicted),
        ]
        # after the rows a script read before calibration existed, so their positions hold
        if self.ece is not None:
            out.append(("ece", self.ece))
        if self.brier is not None:
            out.append(("brier", self.brier))
        return out

    def reliability_columns(self) -> dict[str, np.ndarray]:
        """The reliability table as columns (:data:`RELIABILITY_COLUMNS`: ``bin`` from 1, ``count``,
        ``confidence_low``, ``confidence_high``, ``confidence``, ``accuracy``); empty when not scored."""
        bins = self.reliability or ()
        return {
            "bin": np.arange(1, len(bins) + 1, dtype=np.int64),
            "count": np.array([b.count for b in bins], dtype=np.int64),
            "confidence_low": np.array([b.low for b in bins], dtype=np.float64),
            "confidence_high": np.array([b.high for b in bins], dtype=np.float64),
            "confidence": np.array([b.confidence for b in bins], dtype=np.float64),
            "accuracy": np.array([b.accuracy for b in bins], dtype=np.float64),
        }

    def as_dict(self) -> dict[str, object]:
        out: dict[str, object] = {
            "accuracy": self.accuracy,
            "macro_f1": self.macro_f1,
            "recall": dict(self.recall),
            "n_compared": self.n_compared,
            "n_without_truth": self.n_without_truth,
            "n_truth_unpredicted": self.n_truth_unpredicted,
        }
        if self.ece is not None:
            cols = self.reliability_columns()
            out.update({
                "ece": self.ece, "brier": self.brier, "n_bins": self.n_bins, "calibrated_from": self.calibrated_from,
                "reliability": [{k: v[i].item() for k, v in cols.items()} for i in range(len(cols["bin"]))],
            })
        return out


def evaluate_labels(
    predicted: Mapping[str, str], truth: Mapping[str, str], classes: Sequence[str] | None = None, *,
    posteriors: Any = None, confidence: Mapping[Any, float] | None = None, n_bins: int = N_BINS,
) -> Evaluation:
    """Compare {task: label} predictions with {task: label} truth.

    Macro-F1 averages the per-class F1 over every class seen in the truth or
    the predictions (a class never predicted nor true is skipped); recall is
    reported for each class present in the truth.

    Predicted labels that never occur in the truth (files from different
    data sets, or classes named differently) are reported with a warning.

    ``predicted`` and ``truth`` are mappings or pandas Series indexed by
    task (``result.labels_series()``); ids and labels compare as they are,
    so an int64 id is not the text ``"1"`` (an error says so when that is
    why nothing matched).  Labels of any type are scored (integers read by
    ``pd.read_csv``, floats, bools, text); ``recall`` and ``classes`` name
    them by their text.  A missing label (None, NaN) is a DataError.

    ``posteriors``: a DataFrame indexed by task with one column per class
    (``result.proba_frame()``; columns matched to labels as they are, else
    by their text), rows summing to 1: the compared tasks' calibration is
    scored too (``ece``, ``brier``, ``reliability`` over ``n_bins``
    equal-mass bins), each task's confidence the posterior of its
    *predicted* label, not of the argmax.  ``confidence`` in its place:
    {task: probability of its predicted label}, for the ECE and the table
    alone.  A compared task without a row, a label without a column, a
    probability NaN, negative or a row not summing to 1 (within
    :data:`PROBA_SUM_TOLERANCE`) is a DataError.
    """
    predicted, truth = check_task_mapping(predicted, "predicted"), check_task_mapping(truth, "truth")
    common = [t for t in predicted if t in truth]
    if not common:
        texts = {str(t) for t in truth}
        why = ""
        if any(str(t) in texts for t in predicted):
            kinds = sorted({type(t).__name__ for t in predicted}), sorted({type(t).__name__ for t in truth})
            why = (f" (the ids match as text but differ in type: predicted {', '.join(kinds[0])}, truth "
                   f"{', '.join(kinds[1])}; convert one side, e.g. truth.index.astype(...))")
        raise DataError(
            f"no task has both a prediction and a truth label; check that the task ids match{why}"
        )
    pred, true = _label_array(predicted, common), _label_array(truth, common)
    for side, given in (("predicted", pred), ("truth", true)):
        gap = next((i for i, v in enumerate(given.tolist()) if _missing(v)), None)
        if gap is not None:
            raise DataError(f"{param(side)} has no label for task {common[gap]!r} ({given[gap]!r}); drop the "
                            "task or give its label")
        bad = next((i for i, v in enumerate(given.tolist()) if not isinstance(v, Hashable)), None)
        if bad is not None:
            raise DataError(f"{param(side)} label of task {common[bad]!r} is a {type(given[bad]).__name__} "
                            f"({given[bad]!r}); a label is one value (text, a number, a bool)")
    _warn_type_twins(pred, true, common)
    true_set = {v for v in truth.values() if isinstance(v, Hashable)}  # (an uncompared task's label is not checked)
    foreign = sorted({p for p in pred.tolist() if p not in true_set}, key=_order_key)
    if foreign:
        n_foreign = int(sum(p not in true_set for p in pred.tolist()))
        shown = ", ".join(repr(f) for f in foreign[:5]) + (", ..." if len(foreign) > 5 else "")
        overlap = set(pred.tolist()) & true_set
        head = (
            "the predicted labels and the truth labels have no class in common"
            if not overlap
            else f"{n_foreign} of {len(common)} compared prediction(s) use labels absent from the truth"
        )
        warn(
            CrowdaggWarning(
                f"{head} ({shown} vs truth labels "
                f"{', '.join(repr(t) for t in sorted(true_set, key=_order_key)[:5])}"
                f"{', ...' if len(true_set) > 5 else ''}); are these files from the same data set?"
            )
        )
    values = _class_values(set(pred.tolist()) | set(true.tolist()), classes)
    names = _class_names(values)
    # the labels compare as they are (an int 1 is its class, not the text "1"); only the names are text.  Each
    # label is coded by its class's index, as `pred == c` would compare a tuple label element by element
    code = {v: i for i, v in enumerate(values)}
    pred_codes = np.fromiter((code[v] for v in pred.tolist()), dtype=np.int64, count=len(pred))
    true_codes = np.fromiter((code[v] for v in true.tolist()), dtype=np.int64, count=len(true))
    correct = pred_codes == true_codes
    recall: dict[str, float] = {}
    f1s: list[float] = []
    for c, name in enumerate(names):
        is_true = true_codes == c
        is_pred = pred_codes == c
        tp = float(np.sum(correct & is_true))
        n_true = float(is_true.sum())
        n_pred = float(is_pred.sum())
        if n_true:
            recall[name] = tp / n_true
        if n_true or n_pred:
            f1s.append(2 * tp / (n_true + n_pred))
    ev = Evaluation(
        accuracy=float(correct.mean()),
        macro_f1=float(np.mean(f1s)) if f1s else float("nan"),
        recall=recall,
        n_compared=len(common),
        n_without_truth=len(predicted) - len(common),
        n_truth_unpredicted=sum(1 for t in truth if t not in predicted),
        classes=names,
    )
    if posteriors is not None and confidence is not None:
        raise DataError(f"give {param('posteriors')} or {param('confidence')}, not both")
    if posteriors is not None or confidence is not None:
        # The bins are runs of the tasks sorted by confidence, equal confidences in the order given: in the
        # tasks' name order, so that a bin edge through a tie (vote shares, posteriors of exactly 1) does not
        # make the ECE depend on the rows' order (it was 0.017 or 0.05 for one file's rows reordered).
        by_name = sorted(range(len(common)), key=lambda i: _order_key(common[i]))
        common = [common[i] for i in by_name]
        pred, true, correct = pred[by_name], true[by_name], correct[by_name]
    if posteriors is not None:
        cal = _posterior_calibration(posteriors, common, pred, true, n_bins)
        return dataclasses.replace(ev, ece=cal.ece, brier=cal.brier, reliability=cal.bins, n_bins=n_bins,
                                   calibrated_from="posteriors")
    if confidence is not None:
        conf = _confidences(confidence, common)
        cal = confidence_calibration(conf, correct, n_bins)
        return dataclasses.replace(ev, ece=cal.ece, reliability=cal.bins, n_bins=n_bins, calibrated_from="confidence")
    return ev


def _posterior_calibration(posteriors: Any, tasks: list[Any], pred: np.ndarray, true: np.ndarray,
                           n_bins: int) -> Calibration:
    """The calibration of the compared ``tasks``' posteriors (a DataFrame: tasks × classes), scoring ``pred``."""
    if not all(hasattr(posteriors, a) for a in ("index", "columns", "to_numpy")):
        raise DataError(f"{param('posteriors')} must be a DataFrame indexed by task with one column per class "
                        f"(result.proba_frame()), got {type(posteriors).__name__}")
    index = posteriors.index
    if not index.is_unique:
        twice = index[index.duplicated()][0]
        raise DataError(f"{param('posteriors')} has two rows for task {twice!r}")
    rows = index.get_indexer(tasks)
    if (rows < 0).any():
        gap = tasks[int(np.argmax(rows < 0))]
        raise DataError(f"{param('posteriors')} has no row for task {gap!r}, which has a prediction and a truth label")
    if any(getattr(d, "kind", "") == "c" for d in getattr(posteriors, "dtypes", ())):
        raise DataError(f"{param('posteriors')} holds complex numbers; probabilities are real")
    try:
        proba = posteriors.to_numpy(dtype=np.float64)[rows]
    except (TypeError, ValueError) as e:  # text that is not a number: pandas' ValueError, not ours
        raise DataError(f"{param('posteriors')} must hold probabilities: {e}") from None
    check_posterior_rows(proba, lambda i: f"{param('posteriors')} row of task {tasks[i]!r}")
    columns = list(posteriors.columns)
    exact = {c: j for j, c in enumerate(columns) if isinstance(c, Hashable)}
    text = {str(c): j for j, c in enumerate(columns)}

    def column_of(values: np.ndarray, side: str) -> np.ndarray:
        out = np.empty(len(values), dtype=np.int64)
        for i, v in enumerate(values.tolist()):
            j = exact.get(v, text.get(str(v)))
            if j is None:
                raise DataError(f"{param('posteriors')} has no column for the {side} label {v!r} (task "
                                f"{tasks[i]!r}); its classes: {', '.join(map(str, columns[:10]))}"
                                f"{', ...' if len(columns) > 10 else ''}")
            out[i] = j
        return out

    return calibration(proba, column_of(true, "true"), n_bins, predicted=column_of(pred, "predicted"))


def _confidences(confidence: Mapping[Any, float], tasks: list[Any]) -> np.ndarray:
    """Each compared task's confidence, checked: a number in [0, 1]."""
    confidence = check_task_mapping(confidence, "confidence")
    out = np.empty(len(tasks), dtype=np.float64)
    for i, t in enumerate(tasks):
        if t not in confidence:
            raise DataError(f"{param('confidence')} has no value for task {t!r}, which has a prediction and a "
                            "truth label")
        v = confidence[t]
        try:
            out[i] = float(v)
        except (TypeError, ValueError, OverflowError):  # OverflowError: an int beyond a float's range
            out[i] = np.nan
        if not -PROBA_ROUNDING <= out[i] <= 1.0 + PROBA_ROUNDING:
            raise DataError(f"{param('confidence')} of task {t!r} is {v!r}, not a probability in [0, 1]")
    return np.clip(out, 0.0, 1.0)


def _label_array(labels: Mapping[Any, Any], tasks: list[Any]) -> np.ndarray:
    """The labels of ``tasks``, one object each: ``np.asarray`` would make a tuple label a row of a 2-D array."""
    out = np.empty(len(tasks), dtype=object)
    for i, t in enumerate(tasks):
        out[i] = labels[t]
    return out


def _warn_type_twins(pred: np.ndarray, true: np.ndarray, tasks: list[Any]) -> None:
    """Warn where a prediction differs from its truth label only in type (``1`` against ``"1"``): it counts as
    wrong, so one side read as text and the other as numbers scores 0 without another sign when both hold both."""
    twins = [i for i, (p, t) in enumerate(zip(pred.tolist(), true.tolist())) if p != t and str(p) == str(t)]
    if twins:
        i = twins[0]
        warn(CrowdaggWarning(
            f"{len(twins)} of {len(tasks)} compared prediction(s) equal their truth label as text but not in type "
            f"(task {tasks[i]!r}: {pred[i]!r}, {type(pred[i]).__name__}, against {true[i]!r}, "
            f"{type(true[i]).__name__}) and count as wrong; convert one side, e.g. truth.astype(str)"
        ))


def _missing(value: Any) -> bool:
    """None, NaN, pandas' NA or NaT: a label that is not there (NaN never equals itself, so it would match
    nothing and drop out of every class without a word)."""
    if value is None or type(value).__name__ in ("NAType", "NaTType"):
        return True
    return isinstance(value, (float, np.floating)) and value != value


def _order_key(value: Any) -> tuple[str, str]:
    """Labels of mixed types sorted by their text (Python refuses ``1 < "a"``)."""
    return str(value), type(value).__name__


def _class_values(seen: set[Any], classes: Sequence[str] | None) -> list[Any]:
    """The labels seen, in the classes' order: ``classes`` (names, matched to labels by their text) first, then
    the rest as :func:`~crowdagg.data.annotations.infer_classes` orders their text (numerically when all are
    numbers: 2 before 10), whatever the labels' type (int, float, bool, str)."""
    try:
        inferred = infer_classes(seen)
    except DataError:
        inferred = sorted({str(v) for v in seen})
    order = list(dict.fromkeys([str(c) for c in (classes or ())] + inferred))
    rank = {name: i for i, name in enumerate(order)}
    return sorted(seen, key=lambda v: (rank[str(v)], type(v).__name__))


def _class_names(values: list[Any]) -> list[str]:
    """Each label's name: its text, or its repr where two labels have the same text (1 and "1")."""
    texts = [str(v) for v in values]
    return [t if texts.count(t) == 1 else repr(v) for t, v in zip(texts, values)]


# --------------------------------------------------------------------------- reports
def evaluation_bytes(ev: Evaluation | NumericEvaluation, fmt: str) -> bytes:
    """An evaluation (of labels, or of numeric values) as csv/tsv (metric,value rows) or json/jsonl (one object)."""
    import json

    from ..io.render import render_table

    if fmt in ("json", "jsonl"):
        return (json.dumps(ev.as_dict(), ensure_ascii=False) + "\n").encode("utf-8")
    import numpy as np

    rows = ev.rows()
    values = np.array([repr(float(v)) if isinstance(v, float) else str(v) for _, v in rows], dtype=object)
    return render_table({"metric": np.array([n for n, _ in rows], dtype=object), "value": values}, fmt)


def reliability_bytes(ev: Evaluation, fmt: str) -> bytes:
    """The reliability table (:meth:`Evaluation.reliability_columns`, one row per bin) in a table format."""
    from ..io.render import render_table

    return render_table(ev.reliability_columns(), fmt)


def print_table(ev: Evaluation | NumericEvaluation, stream: Any) -> None:
    """A rich table, for a terminal; the metric names (``recall_<class>``) as plain text (:func:`~crowdagg.reports.terminal_text`).
    With calibration, the reliability table under it."""
    from rich.console import Console
    from rich.table import Table

    from . import terminal_text

    table = Table(title="evaluation")
    table.add_column("metric")
    table.add_column("value", justify="right")
    for name, value in ev.rows():
        table.add_row(terminal_text(name), f"{value:.4f}" if isinstance(value, float) else str(value))
    console = Console(file=stream)
    console.print(table)
    if ev.reliability:
        bins = Table(title=f"reliability ({len(ev.reliability)} equal-mass bins of the {ev.calibrated_from})")
        for name in ("bin", "tasks", "confidence range", "mean confidence", "accuracy"):
            bins.add_column(name, justify="left" if name == "confidence range" else "right")
        for i, b in enumerate(ev.reliability, 1):
            bins.add_row(str(i), str(b.count), f"{confidence_text(b.low)} to {confidence_text(b.high)}",
                         confidence_text(b.confidence), f"{b.accuracy:.4f}")
        console.print(bins)


def confidence_text(value: float) -> str:
    """A confidence for a table: 4 decimals, but ``1-2.3e-07`` above .9999 (where crowd posteriors pile up, and
    four decimals would show every bin as 1.0000) and ``1`` for exactly one."""
    if value == 1.0:
        return "1"
    return f"1-{1.0 - value:.1e}" if value > 0.9999 else f"{value:.4f}"


def summary_line(ev: Evaluation, note: str = "") -> str:
    recall = " ".join(f"{c}={r:.4f}" for c, r in ev.recall.items())
    calibrated = "" if ev.ece is None else f"ECE {ev.ece:.4f}  " + ("" if ev.brier is None else f"Brier {ev.brier:.4f}  ")
    return (
        f"accuracy {ev.accuracy:.4f}  macro-F1 {ev.macro_f1:.4f}  {calibrated}recall {recall}  "
        f"({ev.n_compared} tasks compared, {ev.n_without_truth} without truth"
        + (f", {ev.n_truth_unpredicted} truth task(s) not in the output" if ev.n_truth_unpredicted else "")
        + f"{note})"
    )


def evaluate_run(data: Any, result: Any, truth: dict[str, str], gold: Any) -> tuple[Evaluation, str]:
    """Score the run against ``truth``, leaving out the tasks clamped by gold and those with no answers.

    A task whose answers were all left out (blank labels skipped, rejected
    assignments excluded) keeps its output row, but its label is only the
    class prior: scoring it would measure the prior, not the method, so it
    is left out of the scores and counted in the note.

    The result's posteriors are scored with the labels (ECE, Brier score,
    reliability table); a true class the run never saw has posterior 0.
    """
    names = data.task_names.tolist()
    labels = result.label_names().tolist()
    answered = np.asarray(data.answers_per_task) > 0
    predicted = {t: lab for t, lab, a in zip(names, labels, answered.tolist()) if a}
    unanswered = [t for t, a in zip(names, answered.tolist()) if not a and t in truth]
    note = f", {len(unanswered)} task(s) with no answers not scored" if unanswered else ""
    if unanswered and not any(t in predicted for t in truth):
        raise DataError(
            f"every task of {param('truth')} found in the answers ({len(unanswered)}) has no answers left "
            "(blank or rejected): nothing to score"
        )
    if gold:
        clamped = [t for t in gold if t in predicted]
        scored_before = sum(1 for t in truth if t in predicted)
        for t in clamped:
            del predicted[t]
        note += f", {len(clamped)} gold task(s) excluded"
        if scored_before and not any(t in predicted for t in truth):
            raise DataError(
                f"all {scored_before} task(s) of {param('truth')} are {param('gold')} tasks, whose labels are given, "
                "not inferred: "
                "nothing left to score"
            )
    import pandas as pd

    # the result's posteriors are scored too (ECE, Brier, reliability): a frame over the rows of its tasks (not
    # copied), with a zero column for each true class no answer gave (a label the run could not predict)
    classes = list(data.classes)
    unseen = sorted({truth[t] for t in predicted if t in truth} - set(classes), key=str)
    proba = pd.DataFrame(result.posteriors, index=pd.Index(names, dtype=object), columns=classes, copy=False)
    if unseen:
        proba = proba.assign(**{str(c): 0.0 for c in unseen})
    ev = evaluate_labels(predicted, truth, list(data.classes), posteriors=proba)
    # Truth tasks left out above are in the output: only those the run never saw are "not in the output".
    in_run = set(names)
    return dataclasses.replace(ev, n_truth_unpredicted=sum(1 for t in truth if t not in in_run)), note
