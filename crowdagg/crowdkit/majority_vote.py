"""crowd-kit's ``MajorityVote``: the vote family's block functions on the local engine, crowd-kit's layouts.

The votes and each worker's agreement with them are one numba pass per
block each (:mod:`crowdagg.methods.blocks`); results are built from the
encoded distinct values, with no Python object per answer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..methods.blocks import fill_empty_rows
from ._answers import Answers, as_masked, first_appearance, sort_order

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

#: tasks × labels float tables a vote holds at once: the counts (the shares, in place), a reordered copy for a
#: weighted vote, ``probas_`` and its row-sorted copy.
_VOTE_TABLES = 4

def _shares(votes: np.ndarray) -> np.ndarray:
    """Vote shares per task; a task without weight gets the mean share of the others (as ``aggregate``)."""
    total = votes.sum(axis=1)
    empty = total == 0
    votes /= np.where(empty, 1.0, total)[:, None]  # in place: the counts are ours
    if empty.any():
        fill_empty_rows(votes, empty)
    return votes


def _accuracy(ans: Answers, label_of_task: np.ndarray) -> np.ndarray:
    """Each worker's share of answers equal to ``label_of_task`` (class codes) of their task, shape (n_workers,).

    A repeated identical answer (same task, worker and label) counts once, as crowd-kit's ``get_accuracy``.
    """
    from ..methods.blocks import agreement_with_block

    labels = np.ascontiguousarray(label_of_task, dtype=np.int64)
    right, total = ans.engine.map_reduce(agreement_with_block, (labels, True))[0]
    return right / np.maximum(total, 1.0)

# --------------------------------------------------------------------------- majority vote
class MajorityVote:
    """Majority vote, optionally weighted by per-worker ``skills`` (crowd-kit's ``MajorityVote``).

    ``probas_`` (tasks × labels) are the (weighted) vote shares, ``labels_``
    the most voted label -- a tie goes to the first column --, ``skills_``
    each worker's share of answers equal to ``labels_`` (unweighted; a
    repeated identical answer counted once; workers sorted).  Rows and
    columns: without ``skills`` in crowd-kit's majority-vote order
    (:func:`first_appearance`: first appearance under pandas 3, sorted
    under pandas 2); with ``skills`` sorted (crowd-kit's ``groupby``).

    ``on_missing_skill`` says what to do with a worker absent from
    ``skills``: ``"error"``, ``"ignore"`` (drop their answers) or ``"value"``
    (weight ``default_skill``).
    """

    probas_: pd.DataFrame
    labels_: pd.Series

    def __init__(self, default_skill: float | None = None, on_missing_skill: str = "error") -> None:
        self.default_skill = default_skill
        self.on_missing_skill = on_missing_skill

    def __repr__(self) -> str:
        return f"MajorityVote(default_skill={self.default_skill!r}, on_missing_skill={self.on_missing_skill!r})"

    def fit(self, data: pd.DataFrame, skills: pd.Series | None = None) -> MajorityVote:
        ans = Answers(data)
        weights = None
        if skills is not None:
            ans, weights = self._weighted(ans, skills)
        self._vote(ans, weights)
        if skills is not None:
            self.probas_ = as_masked(self.probas_, skills.dtype)
        return self

    def _vote(self, ans: Answers, weights: np.ndarray | None, skills: bool = True) -> np.ndarray | None:
        """Fit on encoded answers with per-worker ``weights`` (None: one vote each).

        Returns each worker's skill by worker code (None without answers or
        without ``skills``: Wawa's weighted vote does not need them).
        """
        import pandas as pd

        if ans.n_answers == 0:
            self.probas_ = pd.DataFrame(index=pd.Index([], name="task"), columns=pd.Index([], name="label"),
                                        dtype=float)
            self.labels_ = pd.Series(dtype=object, name="agg_label")
            self.skills_ = pd.Series(dtype=float, index=pd.Index([], name="worker"), name="skill")
            return None
        from ..core import memory
        from ..methods.blocks import COUNTS, Posterior, Vote, posterior_block

        k = ans.n_classes
        n_tasks = len(ans.tasks)
        # The vote tables are tasks × labels: refused up front with their size, never left to the OOM killer.
        memory.check(8.0 * (_VOTE_TABLES * n_tasks * k + 2 * ans.n_answers), f"{n_tasks:,} tasks × {k:,} labels",
                     advice="the vote shares are tasks × labels: use fewer labels")
        engine = ans.engine
        _, outs = engine.map_reduce(posterior_block, Posterior(Vote(weights), rows=COUNTS, labels=False), keep=True)
        shares = _shares(engine.gather(outs)[0])
        # crowd-kit's order: a weighted vote groups with sort=True; a plain one takes value_counts' order
        # (its classes are already in it: see Answers)
        weighted = weights is not None
        columns = sort_order(ans.classes) if weighted else None
        rows = sort_order(ans.tasks) if weighted or not first_appearance() else None
        best = np.argmax(shares if columns is None else shares[:, columns], axis=1)  # idxmax: ties to the first
        label_of_task = best if columns is None else columns[best]
        self.probas_ = ans.probas(shares, rows=rows, classes=columns)
        codes = label_of_task if rows is None else label_of_task[rows]
        self.labels_ = pd.Series(ans.classes.take(codes), index=self.probas_.index, name="agg_label")
        if not skills:
            return None
        accuracy = _accuracy(ans, label_of_task)
        self.skills_ = as_masked(ans.worker_skills(accuracy, sort=True), ans.label_dtype)
        return accuracy

    def _weighted(self, ans: Answers, skills: pd.Series) -> tuple[Answers, np.ndarray]:
        """The answers to vote with and each worker's weight (by worker code), after ``on_missing_skill``."""
        import pandas as pd

        skills = pd.Series(skills, dtype=np.float64)
        if skills.index.has_duplicates:
            raise ValueError(f"skills lists worker {skills.index[skills.index.duplicated()][0]!r} more than once")
        if (skills < 0).any() or np.isinf(skills).any():
            raise ValueError("skills are vote weights: they must be finite and non-negative")
        policy = self.on_missing_skill
        if policy != "value" and self.default_skill is not None:
            raise ValueError('default_skill is used but on_missing_skill is not "value"')
        weights = np.array(skills.reindex(ans.workers), dtype=np.float64)
        unknown = np.isnan(weights)
        if policy == "error":
            if unknown.any():
                n = int(np.bincount(ans.worker, minlength=len(ans.workers))[unknown].sum())
                raise ValueError(
                    f"Skill value is missing in {n} assignments. Specify skills for every used "
                    "worker or use a different 'on_missing_skill' value."
                )
        elif policy == "ignore":
            if unknown.any():
                keep = ~unknown[ans.worker]
                lost = len(ans.tasks) - len(np.unique(ans.task[keep]))
                if lost:
                    raise ValueError(
                        f"{lost} tasks have no workers with known skills. Provide skills for at least one worker "
                        "of each task or use a different 'on_missing_skill' value."
                    )
                kept_workers = np.flatnonzero(~unknown)
                ans = ans.subset(keep)
                weights = weights[kept_workers]
        elif policy == "value":
            if self.default_skill is None:
                raise ValueError('Default skill value must be specified when using on_missing_skill="value"')
            default = self.default_skill
            # a NaN or negative weight would vote (NaN shares, a label no answer gave); crowd-kit raises on them
            if isinstance(default, (bool, str)) or not (np.isfinite(default) and default >= 0):
                raise ValueError(f"default_skill is a vote weight: it must be finite and non-negative, got {default!r}")
            weights[unknown] = default
        else:
            raise ValueError(f"Unknown option {policy!r} of \"on_missing_skill\" argument.")
        return ans, weights

    def fit_predict(self, data: pd.DataFrame, skills: pd.Series | None = None) -> pd.Series:
        return self.fit(data, skills).labels_

    def fit_predict_proba(self, data: pd.DataFrame, skills: pd.Series | None = None) -> pd.DataFrame:
        return self.fit(data, skills).probas_
