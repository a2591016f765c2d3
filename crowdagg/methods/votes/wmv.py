"""Weighted majority vote with one-coin log-odds weights (iterative); :mod:`.iwmv` subclasses it with Li & Yu's weights."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from ...data.annotations import AnnotationSet
from ..base import PRODUCT, FitContext, IterativeAggregator, make_result
from ..blocks import SOFTMAX, Posterior, Vote, agreement_block, finish_votes, one_coin_matrices, revote_block
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
    r"""Iterative weighted majority vote with one-coin log-odds weights.

    Each worker's accuracy is estimated as the share of their answers that
    agree with the current labels, with add-one (Laplace) smoothing,
    :math:`p_m = (a_m + 1) / (n_m + 2)`.  Votes are then weighted by the
    one-coin log-odds :math:`w_m = \log((K-1)p_m/(1-p_m))` (ALGORITHMS.md
    §1.3), which is the MAP rule when each worker is right with probability
    :math:`p_m` and otherwise picks a wrong class uniformly.  Starting from
    majority vote, estimate-and-revote repeats until no label changes (or
    ``max_iter``): the iteration of Li & Yu's IWMV (arXiv:1411.4086) with
    the log-odds weights and a smoothed accuracy in place of their
    :math:`v_m = K \hat w_m - 1` (that rule, as published, is ``iwmv``,
    :mod:`.iwmv`).
    Ties are broken by draws keyed on the seed and the task name, fixed for
    the whole run, so "no label changed" is a property of the data, not of
    the draws.  ``posteriors`` are the one-coin posteriors under a uniform
    class prior, :math:`\mathrm{softmax}_k \sum_m w_m 1[\tilde y^{(m)} = k]`;
    ``prior`` is their mean over the tasks with answers, and is the posterior
    of a task without answers.  A worker without answers gets accuracy 1/K.
    """

    name = "wmv"
    #: softmax_k Σ w_m 1[answer = k] is the uniform prior times the one-coin confusions' Π θ_m[k, l].
    posterior_form = PRODUCT
    stop_rule = NoLabelChanged()
    objective_direction = NO_OBJECTIVE

    @staticmethod
    def worker_accuracy(agree: np.ndarray, answers: np.ndarray, n_classes: int) -> np.ndarray:
        """Each worker's accuracy (n_workers,) from its answers agreeing with the labels: ``(agree + 1)/(answers + 2)``.

        A worker without answers is neutral (chance accuracy 1/K); its weight is never used.
        """
        return np.where(answers > 0, (agree + 1.0) / (answers + 2.0), 1.0 / n_classes)

    @staticmethod
    def vote_weights(accuracy: np.ndarray, n_classes: int) -> np.ndarray:
        """Each worker's vote weight (n_workers,) from its accuracy: the one-coin log-odds."""
        return log_odds_weights(accuracy, n_classes)

    def memory_needed(self, data: AnnotationSet) -> tuple[float, str]:
        return 6.0 * 8 * data.n_tasks * data.n_classes, f"{data.n_tasks:,} tasks × {data.n_classes:,} classes"

    def _start(
        self, data: AnnotationSet, checked: FitContext, start: int, rng: np.random.Generator
    ) -> tuple[SimpleNamespace, None]:
        # The majority vote's labels (in the blocks) and each worker's answers agreeing with them.
        first = Vote(seed=checked["seed"])
        (agree, answers), _ = checked.engine.map_reduce(agreement_block, first)
        return SimpleNamespace(vote=first, agree=agree, answers=answers, accuracy=None), None

    def _step(self, data: AnnotationSet, state: SimpleNamespace, checked: FitContext) -> Step:
        """Re-estimate each worker's accuracy against the labels, revote; returns how many labels changed.

        The labels stay in the blocks: each pass recomputes the previous
        vote's labels from its weights (the same draws, the same labels) to
        count the changes, so only per-worker sums cross the engine.
        """
        k = data.n_classes
        state.accuracy = self.worker_accuracy(state.agree, state.answers, k)
        vote = Vote(self.vote_weights(state.accuracy, k), checked["seed"], atol=1e-12, on_shares=False)
        (state.agree, changed), _ = checked.engine.map_reduce(revote_block, (state.vote, vote))
        state.vote = vote
        return Step(changed=int(changed))

    def _finish(self, data: AnnotationSet, run: Run, checked: FitContext) -> AggregationResult:
        state = run.state
        k = data.n_classes
        # Posteriors: the softmax of the last weighted vote; labels: its argmax (ties within 1e-12 drawn);
        # tasks without answers get the class prior (the mean posterior of the others) and a label drawn on it.
        post, labels, prior = finish_votes(checked.engine, Posterior(state.vote, SOFTMAX), k)
        accuracy = state.accuracy
        return make_result(
            self.name, data, post, labels, prior, lambda: one_coin_matrices(accuracy, k),
            worker_params={"accuracy": accuracy, "weight": self.vote_weights(accuracy, k)},
            n_iter=run.n_iter, converged=run.converged,
        )
