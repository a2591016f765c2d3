"""crowd-kit's ``ZeroBasedSkill``: skills moved toward their agreement with the skill-weighted vote, crowd-kit's
layouts and tie rule.

The schedule is the ``zbs`` method's (:func:`crowdagg.methods.votes.zbs.learning_rate`); each iteration is this
package's weighted :class:`~crowdagg.crowdkit.majority_vote.MajorityVote` (the vote family's block functions),
whose ties go to the first label in sorted order as crowd-kit's ``idxmax`` does -- ``crowdagg aggregate -m zbs``
draws them by the seed instead, so the two differ only where a vote ties.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..methods.votes.zbs import learning_rate
from ._answers import Answers, NotFittedError, check_count, check_number
from .majority_vote import MajorityVote

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd


class ZeroBasedSkill:
    """Zero-based skill (crowd-kit's ``ZeroBasedSkill``).

    ``fit``: every worker starts at ``1/K + eps``; for ``n_iter`` iterations
    the learning rate (``lr_init``, times ``lr_reduce_factor`` at every
    multiple of ``lr_steps_to_reduce``) moves each skill toward the
    worker's share of answers equal to the vote weighted by the skills
    (``skills_``, sorted by worker; with ``n_iter=0`` the start, in order of
    first appearance, as crowd-kit's).  ``predict`` /
    ``predict_proba``: that weighted vote with the fitted skills
    (``labels_``, ``probas_``; a worker without a skill is an error, as
    crowd-kit's).
    """

    def __init__(self, n_iter: int = 100, lr_init: float = 1.0, lr_steps_to_reduce: int = 20,
                 lr_reduce_factor: float = 0.5, eps: float = 1e-5) -> None:
        check_count(n_iter, "n_iter")
        check_count(lr_steps_to_reduce, "lr_steps_to_reduce")
        if lr_steps_to_reduce == 0:
            raise ValueError("lr_steps_to_reduce must be a positive integer, got 0")
        for value, name in ((lr_init, "lr_init"), (lr_reduce_factor, "lr_reduce_factor"), (eps, "eps")):
            check_number(value, name)
        self.n_iter, self.lr_init, self.lr_steps_to_reduce = n_iter, lr_init, lr_steps_to_reduce
        self.lr_reduce_factor, self.eps = lr_reduce_factor, eps

    def __repr__(self) -> str:
        return (f"ZeroBasedSkill(n_iter={self.n_iter!r}, lr_init={self.lr_init!r}, lr_steps_to_reduce="
                f"{self.lr_steps_to_reduce!r}, lr_reduce_factor={self.lr_reduce_factor!r}, eps={self.eps!r})")

    def fit(self, data: pd.DataFrame) -> ZeroBasedSkill:
        ans = Answers(data)
        skills = np.full(len(ans.workers), 1.0 / max(ans.n_classes, 1) + self.eps)
        for iteration in range(1, self.n_iter + 1):
            rate = learning_rate(iteration, self.lr_init, self.lr_steps_to_reduce, self.lr_reduce_factor)
            accuracy = MajorityVote()._vote(ans, skills)
            if accuracy is not None:
                skills = skills + rate * (accuracy - skills)
        # crowd-kit's skills are its start (workers in order of first appearance) until an iteration re-indexes
        # them by its sorted groupby
        self.skills_ = ans.worker_skills(skills, sort=self.n_iter > 0)
        return self

    def _apply(self, data: pd.DataFrame) -> MajorityVote:
        if not hasattr(self, "skills_"):
            raise NotFittedError("This ZeroBasedSkill instance is not fitted yet: call fit first")
        mv = MajorityVote().fit(data, self.skills_)
        self.labels_, self.probas_ = mv.labels_, mv.probas_
        return mv

    def predict(self, data: pd.DataFrame) -> pd.Series:
        return self._apply(data).labels_

    def predict_proba(self, data: pd.DataFrame) -> pd.DataFrame:
        return self._apply(data).probas_

    def fit_predict(self, data: pd.DataFrame) -> pd.Series:
        return self.fit(data).predict(data)

    def fit_predict_proba(self, data: pd.DataFrame) -> pd.DataFrame:
        return self.fit(data).predict_proba(data)
