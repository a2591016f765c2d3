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
from ..base import SHARES, Aggregator, FitContext, make_result
from ..blocks import Posterior, Vote, agreement_block, finish_votes, one_coin_matrices
from ..result import AggregationResult


def agreement_skills(agree: np.ndarray, answers: np.ndarray, n_classes: int) -> np.ndarray:
    """Share of each worker's answers that agree (``agree`` of ``answers``, (n_workers,) each); 1/K without answers."""
    return np.where(answers > 0, agree / np.maximum(answers, 1), 1.0 / n_classes)


class Wawa(Aggregator):
    __doc__ = __doc__
    name = "wawa"
    #: Its posteriors are the vote shares, each answer weighted by its worker's skill.
    posterior_form = SHARES
    vote_weight = "accuracy"

    def _fit(self, data: AnnotationSet, checked: FitContext, callback: Any) -> AggregationResult:
        seed, k = checked["seed"], data.n_classes
        # Pass 1: the majority vote's labels per block, each worker's agreement with them (reduced).
        (agree, answers), _ = checked.engine.map_reduce(agreement_block, Vote(seed=seed))
        skills = agreement_skills(agree, answers, k)
        # Pass 2: the skill-weighted vote; a task without vote weight (no answers, or only voters of skill 0)
        # gets the prior, the mean share over the others.
        vote = Vote(skills, seed, atol=1e-12)
        post, labels, prior = finish_votes(checked.engine, Posterior(vote, empty_by_weight=True, empty_atol=1e-12), k)
        return make_result(
            self.name, data, post, labels, prior, lambda: one_coin_matrices(skills, k),
            worker_params={"accuracy": skills},
        )
