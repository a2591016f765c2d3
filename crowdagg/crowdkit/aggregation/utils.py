"""crowd-kit's ``crowdkit.aggregation.utils`` evaluation helpers: a predicted label per task scored against the truth.

``evaluate(df_true, df_pred, evaluate_func)`` joins two frames that hold a
``label`` column by ``task`` (an index level or a column, as pandas'
``merge(on="task")`` finds it) and returns the mean of ``evaluate_func``
over the joined rows, each holding ``label_true`` and ``label_pred``:
``evaluate_equal`` scores an exact match, ``evaluate_in`` a predicted label
found in a collection of accepted ones (the default, as crowd-kit's).
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
