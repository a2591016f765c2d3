"""crowd-kit's ``Wawa``: the majority vote's skills, then the vote weighted by them."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ._answers import Answers, NotFittedError, as_masked
from .majority_vote import MajorityVote

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd


class Wawa:
    """Worker Agreement With Aggregate (crowd-kit's ``Wawa``).

    ``fit``: each worker's skill is their share of answers equal to the
    majority vote (``skills_``); ``predict``: the vote weighted by those
    skills (``probas_``, ``labels_``, rows and columns sorted).  ``skills_``
    is not updated after the weighted vote.  ``fit_predict`` encodes the
    answers once for both steps.
    """

    def __repr__(self) -> str:
        return "Wawa()"

    def fit(self, data: pd.DataFrame) -> Wawa:
        self._fit(Answers(data))
        return self

    def _fit(self, ans: Answers) -> np.ndarray | None:
        """Fit on encoded answers; returns each worker's skill by worker code (None without answers)."""
        mv = MajorityVote()
        accuracy = mv._vote(ans, None)
        self.skills_ = mv.skills_
        return accuracy

    def _vote(self, ans: Answers, weights: np.ndarray | None) -> MajorityVote:
        mv = MajorityVote()
        mv._vote(ans, weights, skills=False)
        if weights is not None:
            mv.probas_ = as_masked(mv.probas_, self.skills_.dtype)
        self.probas_, self.labels_ = mv.probas_, mv.labels_
        return mv

    def _predict(self, data: pd.DataFrame) -> MajorityVote:
        if not hasattr(self, "skills_"):
            raise NotFittedError("This Wawa instance is not fitted yet: call fit first")
        ans = Answers(data)
        if len(self.skills_) == 0:
            return self._vote(ans, None)
        ans, weights = MajorityVote()._weighted(ans, self.skills_)
        return self._vote(ans, weights)

    def predict(self, data: pd.DataFrame) -> pd.Series:
        return self._predict(data).labels_

    def predict_proba(self, data: pd.DataFrame) -> pd.DataFrame:
        return self._predict(data).probas_

    def fit_predict(self, data: pd.DataFrame) -> pd.Series:
        self._fit_predict(data)
        return self.labels_

    def fit_predict_proba(self, data: pd.DataFrame) -> pd.DataFrame:
        self._fit_predict(data)
        return self.probas_

    def _fit_predict(self, data: pd.DataFrame) -> None:
        ans = Answers(data)
        weights = self._fit(ans)
        self._vote(ans, weights)
