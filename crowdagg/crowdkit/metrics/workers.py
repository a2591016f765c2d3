"""crowd-kit's ``crowdkit.metrics.workers``: ``accuracy_on_aggregates``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..aggregation.utils import get_accuracy

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

class _FreshMajorityVote:
    """crowd-kit's default aggregator, ``MajorityVote()``: made afresh per call here (crowd-kit's default argument
    is one instance that every call fits)."""

    def __repr__(self) -> str:
        return "MajorityVote()"


MAJORITY_VOTE: Any = _FreshMajorityVote()


def aggregator_or_default(aggregator: Any) -> Any:
    """``aggregator``, or a fresh :class:`~crowdagg.crowdkit.MajorityVote` for :data:`MAJORITY_VOTE`."""
    if aggregator is MAJORITY_VOTE:
        from ..majority_vote import MajorityVote

        return MajorityVote()
    return aggregator


def accuracy_on_aggregates(answers: pd.DataFrame, aggregator: Any = MAJORITY_VOTE,
                           aggregates: pd.Series | None = None, by: str | None = None) -> float | pd.Series:
    """The share of answers equal to their task's aggregated label (crowd-kit's ``accuracy_on_aggregates``).

    Parameters
    ----------
    answers : DataFrame
        ``task``, ``worker``, ``label`` columns.
    aggregator : crowd-kit classifier, optional
        Fitted on ``answers`` (``fit_predict``) when ``aggregates`` is not given; default a majority vote.
    aggregates : Series, optional
        A label per task (indexed by task); answers on other tasks are not counted.
    by : {"worker", "task", "label"} or None
        A Series of shares by this column (sorted), or None: the share over all answers, a float.

    Returns
    -------
    float or Series
        A repeated identical answer (same task, worker and label) counts once
        (:func:`~crowdagg.crowdkit.aggregation.utils.get_accuracy`).
    """
    if aggregates is None:
        aggregator = aggregator_or_default(aggregator)
        if aggregator is None:
            raise ValueError("give an aggregator or the aggregates")
        aggregates = aggregator.fit_predict(answers)
    return get_accuracy(answers, aggregates, by=by)


__all__ = ["accuracy_on_aggregates"]
