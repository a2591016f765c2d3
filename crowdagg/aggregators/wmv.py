"""Weighted majority vote with one-coin log-odds weights (iterative)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..checks import check_int
from ..data import AnnotationSet
from ..errors import ConvergenceWarning, param, warn
from ..result import AggregationResult
from .base import (
    Aggregator,
    TieBreaker,
    argmax_random_ties,
    fill_empty_rows,
    make_result,
    one_coin_matrices,
    softmax_rows,
)
from .mv import soft_majority_vote


def log_odds_weights(accuracy: np.ndarray, n_classes: int) -> np.ndarray:
    r"""One-coin MAP weights :math:`w_m = \log((K-1) p_m / (1 - p_m))` (ALGORITHMS.md §1.3).

    A worker below chance (p < 1/K) gets a negative weight: the answer is
    evidence against the class it names.
    """
    p = np.clip(accuracy, 1e-6, 1 - 1e-6)
    return np.log(max(n_classes - 1, 1) * p / (1.0 - p))


class WeightedMajorityVote(Aggregator):
    r"""Iterative weighted majority vote (Li & Yu 2014, arXiv:1411.4086).

    Each worker's accuracy is estimated as the share of their answers that
    agree with the current labels, with add-one (Laplace) smoothing,
    :math:`p_m = (a_m + 1) / (n_m + 2)`.  Votes are then weighted by the
    one-coin log-odds :math:`w_m = \log((K-1)p_m/(1-p_m))`, which is the
    MAP rule when each worker is right with probability :math:`p_m` and
    otherwise picks a wrong class uniformly.  Starting from majority vote,
    estimate-and-revote repeats until no label changes (or ``max_iter``).
    Ties are broken by draws keyed on the seed and the task name, fixed for
    the whole run, so "no label changed" is a property of the data, not of
    the draws.  ``posteriors`` are the one-coin posteriors under a uniform
    class prior, :math:`\mathrm{softmax}_k \sum_m w_m 1[\tilde y^{(m)} = k]`;
    ``prior`` is their mean over the tasks with answers, and is the posterior
    of a task without answers.  A worker without answers gets accuracy 1/K.
    """

    name = "wmv"
    summary = "weighted majority vote, log-odds weights from each worker's agreement with the vote (iterated)"
    params = ("max_iter",)

    def __init__(self, *, seed: int = 0, max_iter: int = 50) -> None:
        super().__init__(seed=seed)
        self.max_iter = max_iter

    def memory_needed(self, data: AnnotationSet) -> tuple[float, str]:
        return 6.0 * 8 * data.n_tasks * data.n_classes, f"{data.n_tasks:,} tasks × {data.n_classes:,} classes"

    def check_params(self) -> dict[str, Any]:
        return {**super().check_params(), "max_iter": check_int("max_iter", self.max_iter, 1, 10**7)}

    def _fit(self, data: AnnotationSet, seed: int, callback: Any) -> AggregationResult:
        from ..kernels import vote_counts

        max_iter = self.check_params()["max_iter"]
        k = data.n_classes
        ties = TieBreaker(data.tasks, seed)
        labels = argmax_random_ties(soft_majority_vote(data), ties)
        n_answers = data.answers_per_worker
        converged = False
        it = 0
        for it in range(1, max_iter + 1):
            agree = np.bincount(
                data.worker, weights=(data.label == labels[data.task]), minlength=data.n_workers
            )
            # A worker without answers is neutral (chance accuracy); its weight is never used.
            accuracy = np.where(n_answers > 0, (agree + 1.0) / (n_answers + 2.0), 1.0 / k)
            weight = log_odds_weights(accuracy, k)
            scores = vote_counts(data.task, data.worker, data.label, data.n_tasks, k, weight)
            new = argmax_random_ties(scores, ties, atol=1e-12)
            if callback is not None:
                callback(it, float("nan"))
            if np.array_equal(new, labels):
                converged = True
                labels = new
                break
            labels = new
        if not converged:
            warn(
                ConvergenceWarning(
                    f"wmv: labels still changing after {param('max_iter')}={max_iter} rounds; "
                    f"raise {param('max_iter')}"
                )
            )
        post = softmax_rows(scores)
        empty = data.answers_per_task == 0
        prior = post[~empty].mean(axis=0) if (~empty).any() else np.full(k, 1.0 / k)
        if empty.any():
            # Tasks without answers get the class prior (the mean posterior of the others), like every method.
            fill_empty_rows(post, empty, prior)
            rows = np.flatnonzero(empty)
            labels[rows] = argmax_random_ties(post[rows], TieBreaker(data.tasks[rows], seed))
        return make_result(
            self.name, data, post, labels, prior, lambda: one_coin_matrices(accuracy, k),
            n_iter=it, converged=converged, accuracy=accuracy,
        )
