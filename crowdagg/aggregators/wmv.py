"""Weighted majority vote with one-coin log-odds weights (iterative)."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from ..checks import check_int
from ..data import AnnotationSet
from ..errors import ConvergenceWarning
from ..result import AggregationResult
from .base import (
    Aggregator,
    argmax_random_ties,
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
    ``posteriors`` are the one-coin posteriors under a uniform class prior,
    :math:`\mathrm{softmax}_k \sum_m w_m 1[\tilde y^{(m)} = k]`.
    """

    name = "wmv"
    summary = "weighted majority vote, log-odds weights from each worker's agreement with the vote (iterated)"
    params = ("max_iter",)

    def __init__(self, *, seed: int = 0, max_iter: int = 50) -> None:
        super().__init__(seed=seed)
        self.max_iter = max_iter

    def _fit(self, data: AnnotationSet, rng: np.random.Generator, callback: Any) -> AggregationResult:
        from ..kernels import vote_counts

        max_iter = check_int("max_iter", self.max_iter, 1)
        k = data.n_classes
        labels = argmax_random_ties(soft_majority_vote(data), rng)
        n_answers = data.answers_per_worker
        converged = False
        it = 0
        for it in range(1, max_iter + 1):
            agree = np.bincount(
                data.worker, weights=(data.label == labels[data.task]), minlength=data.n_workers
            )
            accuracy = (agree + 1.0) / (n_answers + 2.0)
            weight = log_odds_weights(accuracy, k)
            scores = vote_counts(data.task, data.worker, data.label, data.n_tasks, k, weight)
            new = argmax_random_ties(scores, rng, atol=1e-12)
            if callback is not None:
                callback(it, float("nan"))
            if np.array_equal(new, labels):
                converged = True
                labels = new
                break
            labels = new
        if not converged:
            warnings.warn(
                f"wmv: labels still changing after max_iter={max_iter} rounds; "
                "raise --max-iter",
                ConvergenceWarning,
                stacklevel=2,
            )
        post = softmax_rows(scores)
        return make_result(
            self.name, data, post, labels, post.mean(axis=0), one_coin_matrices(accuracy, k),
            n_iter=it, converged=converged,
        )
