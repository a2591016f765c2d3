r"""Wawa: worker agreement with aggregate (crowd-kit's ``Wawa``).

Three steps, no iteration:

1. majority vote labels :math:`\hat y_n` (ties broken by the seeded draw of
   :class:`~crowdagg.methods.votes.mv.MajorityVote`);
2. each worker's skill is the share of their answers equal to the vote,
   :math:`s_m = \frac{1}{|N_m|}\sum_{n \in N_m} 1[\tilde y_n^{(m)} = \hat y_n]`;
3. a majority vote weighted by the skills,
   :math:`\hat y_n = \arg\max_k \sum_{m \in M_n} s_m 1[\tilde y_n^{(m)} = k]`.

``posteriors`` are the weighted vote shares (a task whose voters all have
skill 0, or no answers, gets ``prior``, the mean share over the other
tasks).  ``worker_params["accuracy"]`` is the skill; a worker without answers gets 1/K.
Arrays: votes (n_tasks, K), skills (n_workers,).  O(L K).

Reference: the Toloka crowd-kit library's ``Wawa`` (worker agreement with
aggregate); ``crowdagg aggregate -m wawa`` keeps crowdagg's tie rule.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...data.annotations import AnnotationSet
from ..base import Aggregator, FitContext, make_result
from ..blocks import (
    TieBreaker,
    argmax_random_ties,
    fill_empty_rows,
    normalize_rows,
    one_coin_matrices,
    soft_majority_vote,
)
from ..result import AggregationResult


def agreement_skills(data: AnnotationSet, labels: np.ndarray) -> np.ndarray:
    """Share of each worker's answers equal to ``labels`` of their task, shape (n_workers,); 1/K without answers."""
    agree = np.bincount(data.worker, weights=(data.label == labels[data.task]), minlength=data.n_workers)
    n = data.answers_per_worker
    return np.where(n > 0, agree / np.maximum(n, 1), 1.0 / data.n_classes)


class Wawa(Aggregator):
    __doc__ = __doc__
    name = "wawa"

    def _fit(self, data: AnnotationSet, checked: FitContext, callback: Any) -> AggregationResult:
        from ...kernels.votes import _vote_counts

        ties = TieBreaker(data.tasks, checked["seed"])
        mv_labels = argmax_random_ties(soft_majority_vote(data), ties)
        skills = agreement_skills(data, mv_labels)
        votes = _vote_counts(data.task, data.worker, data.label, data.n_tasks, data.n_classes, skills)
        post = normalize_rows(votes)
        prior = fill_empty_rows(post, post.sum(axis=1) == 0)  # no answers, or only voters of skill 0
        k = data.n_classes
        labels = argmax_random_ties(post, ties, atol=1e-12)
        return make_result(
            self.name, data, post, labels, prior, lambda: one_coin_matrices(skills, k),
            worker_params={"accuracy": skills},
        )
