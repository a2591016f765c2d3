"""Majority vote."""

from __future__ import annotations

from typing import Any

from ...data.annotations import AnnotationSet
from ..base import SHARES, Aggregator, FitContext, make_result
from ..blocks import Posterior, Vote, finish_votes, posterior_confusion
from ..result import AggregationResult

#: Pseudo-count used for the worker confusion that MV reports (not for voting).
REPORT_SMOOTHING = 0.01


class MajorityVote(Aggregator):
    r"""Majority vote: :math:`\hat y_n = \arg\max_k \sum_{m \in M_n} 1[\tilde y_n^{(m)} = k]`.

    Ties are broken by a uniform draw among the tied classes, keyed on the
    seed and the task's name (the same task gets the same label whatever
    the row order), which does not favour any class (crowd-kit's ``idxmax``
    always takes the first column).  ``posteriors`` are vote shares, so
    ``confidence`` is the winning class's share; ``prior`` is the mean vote
    share over the tasks with answers, and is the posterior of a task
    without answers.  The worker confusion (lightly smoothed empirical
    confusion of each worker against the vote shares) is computed only when
    asked for (``result.confusion``, ``--workers``); it does not affect the
    vote.
    """

    name = "mv"
    #: Its posteriors are the vote shares, one vote an answer.
    posterior_form = SHARES

    def _fit(self, data: AnnotationSet, checked: FitContext, callback: Any) -> AggregationResult:
        # One pass over the engine's blocks: shares, labels (ties drawn in the block), the prior's sums.
        post, labels, prior = finish_votes(checked.engine, Posterior(Vote(seed=checked["seed"])), data.n_classes)
        return make_result(
            self.name, data, post, labels, prior,
            lambda: posterior_confusion(data, post, REPORT_SMOOTHING, checked.engine)[1],
        )
