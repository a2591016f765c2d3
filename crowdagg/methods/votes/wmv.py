"""Weighted majority vote with one-coin log-odds weights (iterative)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from ...data.annotations import AnnotationSet
from ..base import FitContext, IterativeAggregator, make_result
from ..blocks import (
    TieBreaker,
    argmax_random_ties,
    fill_empty_rows,
    one_coin_matrices,
    soft_majority_vote,
    softmax_rows,
)
from ..loop import NO_OBJECTIVE, NoLabelChanged, Run, Step
from ..result import AggregationResult


def log_odds_weights(accuracy: np.ndarray, n_classes: int) -> np.ndarray:
    r"""One-coin MAP weights :math:`w_m = \log((K-1) p_m / (1 - p_m))` (ALGORITHMS.md §1.3).

    A worker below chance (p < 1/K) gets a negative weight: the answer is
    evidence against the class it names.
    """
    p = np.clip(accuracy, 1e-6, 1 - 1e-6)
    return np.log(max(n_classes - 1, 1) * p / (1.0 - p))


class WeightedMajorityVote(IterativeAggregator):
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
    stop_rule = NoLabelChanged()
    objective_direction = NO_OBJECTIVE

    def memory_needed(self, data: AnnotationSet) -> tuple[float, str]:
        return 6.0 * 8 * data.n_tasks * data.n_classes, f"{data.n_tasks:,} tasks × {data.n_classes:,} classes"

    def _start(
        self, data: AnnotationSet, checked: FitContext, start: int, rng: np.random.Generator
    ) -> tuple[SimpleNamespace, None]:
        ties = TieBreaker(data.tasks, checked["seed"])
        labels = argmax_random_ties(soft_majority_vote(data), ties)
        return SimpleNamespace(ties=ties, labels=labels, accuracy=None, scores=None), None

    def _step(self, data: AnnotationSet, state: SimpleNamespace, checked: FitContext) -> Step:
        """Re-estimate each worker's accuracy against the labels, revote; returns how many labels changed."""
        from ...kernels.votes import _vote_counts

        k = data.n_classes
        n_answers = data.answers_per_worker
        agree = np.bincount(data.worker, weights=(data.label == state.labels[data.task]), minlength=data.n_workers)
        # A worker without answers is neutral (chance accuracy); its weight is never used.
        state.accuracy = np.where(n_answers > 0, (agree + 1.0) / (n_answers + 2.0), 1.0 / k)
        weight = log_odds_weights(state.accuracy, k)
        state.scores = _vote_counts(data.task, data.worker, data.label, data.n_tasks, k, weight)
        new = argmax_random_ties(state.scores, state.ties, atol=1e-12)
        changed = int(np.count_nonzero(new != state.labels))
        state.labels = new
        return Step(changed=changed)

    def _finish(self, data: AnnotationSet, run: Run, checked: FitContext) -> AggregationResult:
        state = run.state
        k = data.n_classes
        labels = state.labels
        post = softmax_rows(state.scores)
        empty = data.answers_per_task == 0
        # Tasks without answers get the class prior (the mean posterior of the others), like every method.
        prior = fill_empty_rows(post, empty)
        if empty.any():
            rows = np.flatnonzero(empty)
            labels[rows] = argmax_random_ties(post[rows], TieBreaker(data.tasks[rows], checked["seed"]))
        accuracy = state.accuracy
        return make_result(
            self.name, data, post, labels, prior, lambda: one_coin_matrices(accuracy, k),
            worker_params={"accuracy": accuracy, "weight": log_odds_weights(accuracy, k)},
            n_iter=run.n_iter, converged=run.converged,
        )
