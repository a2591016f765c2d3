"""crowd-kit's ``MMSR``: crowdagg's ``mmsr`` (:mod:`crowdagg.methods.mmsr.mmsr`), crowd-kit's attributes and vote."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ._answers import Answers, NotFittedError, check_count, check_number
from .majority_vote import MajorityVote

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd


class MMSR:
    """Matrix mean-subsequence-reduced skills, then the vote weighted by them (crowd-kit's ``MMSR``).

    ``fit``: crowdagg's ``mmsr`` (``n_iter`` its ``max_iter``, ``tol`` its
    ``tol``, ``random_state`` its seed) on the answers: the agreement of the
    co-labelled worker pairs only, never crowd-kit's workers × workers
    matrices (which at 1,000 workers ask for terabytes).  ``skills_`` is
    each worker's log-odds weight :math:`\\log((K-1) p / (1 - p))` (workers
    in order of first appearance, named ``skill``), ``loss_history_`` each
    round's change :math:`\\|u v^T - u' v'^T\\|_F`.  ``predict``: crowd-kit's
    ``MajorityVote`` weighted by ``skills_`` -- ``scores_`` the weighted
    votes divided by the task's total weight (rows and columns sorted),
    ``labels_`` the first of the highest.

    The start is crowd-kit's draw (the method's ``start=codes``: numpy's
    ``RandomState(random_state)`` over the workers in order of first
    appearance): on crowds as small as its toy crowd the trimmed means'
    fixed point moves with the start, and the skills are crowd-kit's there
    too (its toy and "simple" crowds: to 1e-6); ``n_iter=0`` gives the
    skills of that start, as crowd-kit's.  Where the values differ from
    crowd-kit's: the signs of the skills come from each worker's pair
    evidence (the method's ``signs=evidence``), where crowd-kit's sign step
    reads pairs that share no task as disagreeing (``tests/methods/mmsr``:
    two groups of workers who never meet come out of opposite signs, and
    two of one size give every skill 0 and an all-NaN vote), and its F
    turns -1 (every trimmed mean a maximum) when a worker shares tasks with
    fewer than two others (trec); on rte the skills agree to 1e-9 in
    magnitude, 60% in sign.  ``random_state=None`` is seed 0.
    """

    skills_: pd.Series
    scores_: pd.DataFrame
    labels_: pd.Series
    loss_history_: list[float]

    def __init__(self, n_iter: int = 10000, tol: float = 1e-10, random_state: int | None = 0) -> None:
        self.n_iter = n_iter
        self.tol = tol
        self.random_state = random_state

    def __repr__(self) -> str:
        return f"MMSR(n_iter={self.n_iter!r}, tol={self.tol!r}, random_state={self.random_state!r})"

    def fit(self, data: pd.DataFrame) -> MMSR:
        import warnings

        import pandas as pd

        from ..errors import CrowdaggWarning
        from ..methods.api import aggregate

        check_count(self.n_iter, "n_iter")
        check_number(self.tol, "tol")
        ans = Answers(data)
        if ans.n_answers == 0:
            self.skills_ = pd.Series(dtype=float, index=pd.Index([], name="worker"), name="skill")
            self.loss_history_ = []
            return self
        # crowd-kit stops once the change is below tol: a negative tol never stops (crowdagg's 0 runs n_iter)
        tol = min(max(float(self.tol), 0.0), 0.5)
        with warnings.catch_warnings():  # crowd-kit fits silently (no convergence or collapse warnings)
            warnings.simplefilter("ignore", CrowdaggWarning)
            result = aggregate(ans.data, "mmsr", max_iter=int(self.n_iter), tol=tol, start="codes",
                               seed=0 if self.random_state is None else int(self.random_state))
        self.skills_ = ans.worker_skills(np.asarray(result.worker_params["weight"]), sort=False)
        self.loss_history_ = [float(x) for x in result.objective]
        return self

    def _apply(self, data: pd.DataFrame) -> MMSR:
        if not hasattr(self, "skills_"):
            raise NotFittedError("This MMSR instance is not fitted yet: call fit first")
        vote = MajorityVote()
        ans = Answers(data)
        weights: Any = None
        if len(self.skills_):  # crowd-kit's MajorityVote(skills=...): a worker without a skill is an error
            weights = np.array(self.skills_.reindex(ans.workers), dtype=np.float64)
            unknown = np.isnan(weights)
            if unknown.any():
                n = int(np.bincount(ans.worker, minlength=len(ans.workers))[unknown].sum())
                raise ValueError(f"Skill value is missing in {n} assignments. Specify skills for every used "
                                 "worker or use a different 'on_missing_skill' value.")
        vote._vote(ans, weights, skills=False)  # skills of either sign: crowd-kit's vote divides by their total
        self.scores_, self.labels_ = vote.probas_, vote.labels_
        return self

    def predict(self, data: pd.DataFrame) -> pd.Series:
        return self._apply(data).labels_

    def predict_score(self, data: pd.DataFrame) -> pd.DataFrame:
        return self._apply(data).scores_

    def fit_predict(self, data: pd.DataFrame) -> pd.Series:
        return self.fit(data).predict(data)

    def fit_predict_score(self, data: pd.DataFrame) -> pd.DataFrame:
        return self.fit(data).predict_score(data)
