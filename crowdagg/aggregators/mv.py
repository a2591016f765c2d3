"""Majority vote."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..data import AnnotationSet
from ..result import AggregationResult
from .base import Aggregator, argmax_random_ties, make_result, normalize_rows, posterior_confusion

#: Pseudo-count used for the worker confusion that MV reports (not for voting).
REPORT_SMOOTHING = 0.01


def soft_majority_vote(data: AnnotationSet) -> np.ndarray:
    """Vote shares per task, shape (n_tasks, n_classes); rows sum to 1."""
    from ..kernels import vote_counts

    return normalize_rows(vote_counts(data.task, data.worker, data.label, data.n_tasks, data.n_classes))


class MajorityVote(Aggregator):
    r"""Majority vote: :math:`\hat y_n = \arg\max_k \sum_{m \in M_n} 1[\tilde y_n^{(m)} = k]`.

    Ties are broken by a uniform draw among the tied classes from ``seed``,
    which is reproducible and does not favour any class (crowd-kit's
    ``idxmax`` always takes the first column).  ``posteriors`` are vote
    shares, so ``confidence`` is the winning class's share.  The reported
    worker confusion is the (lightly smoothed) empirical confusion of each
    worker against the vote shares; it does not affect the vote.
    """

    name = "mv"
    summary = "majority vote; ties broken by a seeded random draw; confidence = vote share"
    params = ()

    def _fit(self, data: AnnotationSet, rng: np.random.Generator, callback: Any) -> AggregationResult:
        post = soft_majority_vote(data)
        labels = argmax_random_ties(post, rng)
        prior, confusion = posterior_confusion(data, post, REPORT_SMOOTHING)
        return make_result(self.name, data, post, labels, post.mean(axis=0), confusion)
