"""crowd-kit's ``crowdkit.aggregation.utils`` helpers: a predicted label per task scored against the truth.

``evaluate(df_true, df_pred, evaluate_func)`` joins two frames that hold a
``label`` column by ``task`` (an index level or a column, as pandas'
``merge(on="task")`` finds it) and returns the mean of ``evaluate_func``
over the joined rows, each holding ``label_true`` and ``label_pred``:
``evaluate_equal`` scores an exact match, ``evaluate_in`` a predicted label
found in a collection of accepted ones (the default, as crowd-kit's).
``get_accuracy(data, true_labels, by)`` is the share of answers equal to
their task's true label (``GoldMajorityVote``'s skills, the metrics'
``accuracy_on_aggregates``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd


def evaluate_in(row: pd.Series) -> int:
    """1 when the predicted label is among the true ones (``label_true`` a collection), else 0."""
    return int(row["label_pred"] in row["label_true"])


def evaluate_equal(row: pd.Series) -> int:
    """1 when the predicted label equals the true one, else 0."""
    return int(row["label_pred"] == row["label_true"])


def evaluate(df_true: pd.DataFrame, df_pred: pd.DataFrame,
             evaluate_func: Callable[[pd.Series], Any] = evaluate_in) -> float:
    """The mean of ``evaluate_func`` over the tasks of ``df_true``, each joined with its prediction.

    A task of ``df_true`` without a prediction (or predicted twice) is a
    ValueError naming the counts (crowd-kit asserts the lengths match).
    """
    joined = df_true.merge(df_pred, on="task", suffixes=("_true", "_pred"))
    if len(joined) != len(df_true):
        raise ValueError(f"the predictions cover {len(joined):,} rows of the {len(df_true):,} tasks with a true "
                         "label: give one prediction for each")
    return float(joined.apply(evaluate_func, axis=1).mean())


def get_accuracy(data: pd.DataFrame, true_labels: pd.Series, by: str | None = None) -> Any:
    """The share of answers equal to their task's true label: a float, or a Series by ``by`` (crowd-kit's).

    Parameters
    ----------
    data : DataFrame
        Answers: ``task``, ``worker``, ``label`` columns.
    true_labels : Series
        A label per task (indexed by task); a task may have several (a repeated index): an answer equal to any
        of them is right.  Answers on other tasks are not counted.
    by : {"worker", "task", "label"} or None
        Group the share by this column (a Series indexed by it, sorted); None: over all graded answers.

    A repeated identical answer (same task, worker and label) counts once, as
    crowd-kit's.  A ``weight`` column (crowd-kit weighs the answers by it) is
    refused rather than ignored.
    """
    import numpy as np
    import pandas as pd

    from .._answers import Answers, as_masked, graded, sort_order

    if isinstance(data, pd.DataFrame) and "weight" in data.columns:  # anything else: Answers' TypeError
        raise ValueError("answers with a 'weight' column: weighted accuracy is not offered here; drop the column")
    truth = pd.Series(true_labels)
    ans = Answers(data, extra=pd.unique(truth[truth.notna().to_numpy()]))  # the distinct labels: few
    task, worker, label, right = graded(ans, truth)
    if by is None:
        return float(right.mean()) if len(right) else float("nan")
    if by not in ("task", "worker", "label"):
        raise KeyError(by)
    codes = {"task": task, "worker": worker, "label": label}[by]
    names = {"task": ans.tasks, "worker": ans.workers, "label": ans.classes}[by]
    groups = np.unique(codes)
    share = np.bincount(codes, right, minlength=len(names))[groups] / np.bincount(codes, minlength=len(names))[groups]
    order = sort_order(names[groups])  # crowd-kit's groupby sorts
    return as_masked(pd.Series(share[order], index=names[groups[order]].rename(by)), ans.label_dtype)
