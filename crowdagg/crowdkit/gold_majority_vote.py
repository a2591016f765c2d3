"""crowd-kit's ``GoldMajorityVote``: each worker's accuracy on the gold tasks, then the vote weighted by it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._answers import Answers, NotFittedError, as_masked
from .majority_vote import MajorityVote

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd


class GoldMajorityVote:
    """Majority vote weighted by accuracy on gold tasks (crowd-kit's ``GoldMajorityVote``).

    ``fit(data, true_labels)``: ``skills_`` is each worker's share of
    answers on the gold tasks (``true_labels``: a Series indexed by task)
    equal to a gold label of the task
    (:func:`~crowdagg.crowdkit.aggregation.utils.get_accuracy`: a task may
    have several, a repeated identical answer counts once).  Workers
    sorted; a worker without an answer on a gold task has no skill.  ``predict(data)``: the vote of
    ``data`` weighted by ``skills_`` (:class:`MajorityVote` with ``skills``:
    ``labels_``, ``probas_``, rows and columns sorted); a worker of ``data``
    without a skill is a ValueError naming them, as in crowd-kit (which
    says a skill is missing).

    Kept different from crowd-kit, as the other classes here: a NaN gold
    label is no gold; a gold label equal to a label of the answers but of
    another type (``True`` for ``1``) is a ValueError; a task whose voters
    all have skill 0 gets the mean vote share of the other tasks
    (:class:`MajorityVote`).
    """

    skills_: pd.Series
    probas_: pd.DataFrame
    labels_: pd.Series

    def __repr__(self) -> str:
        return "GoldMajorityVote()"

    def fit(self, data: pd.DataFrame, true_labels: pd.Series) -> GoldMajorityVote:
        from .aggregation.utils import get_accuracy  # here: that package imports this module

        answers = Answers.columns_of(data)  # a weight column is dropped, as crowd-kit's fit does
        self.skills_ = get_accuracy(answers, true_labels, by="worker").rename("skill")
        return self

    def _apply(self, data: pd.DataFrame) -> None:
        if not hasattr(self, "skills_"):
            raise NotFittedError("This GoldMajorityVote instance is not fitted yet: call fit first")
        ans = Answers(data)
        unknown = ~ans.workers.isin(self.skills_.index)
        if unknown.any():
            raise ValueError(
                f"{int(unknown.sum()):,} workers of the data (first {ans.workers[unknown][0]!r}) answered no gold "
                "task in fit, so they have no skill: every worker needs an answer on a gold task")
        ans, weights = MajorityVote()._weighted(ans, self.skills_)
        mv = MajorityVote()
        mv._vote(ans, weights, skills=False)
        self.probas_ = as_masked(mv.probas_, self.skills_.dtype)
        self.labels_ = mv.labels_

    def predict(self, data: pd.DataFrame) -> pd.Series:
        self._apply(data)
        return self.labels_

    def predict_proba(self, data: pd.DataFrame) -> pd.DataFrame:
        self._apply(data)
        return self.probas_

    def fit_predict(self, data: pd.DataFrame, true_labels: pd.Series) -> pd.Series:
        return self.fit(data, true_labels).predict(data)

    def fit_predict_proba(self, data: pd.DataFrame, true_labels: pd.Series) -> pd.DataFrame:
        return self.fit(data, true_labels).predict_proba(data)
