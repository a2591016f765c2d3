r"""Two-thirds agreement (peerannot's ``TwoThird``): a task's label is accepted once at least ``fraction`` (2/3)
of at least ``min_answers`` (2) answers agree on it; every other task is flagged, not silently labelled.

For task n with :math:`c_{n,k}` answers of class k out of :math:`n_n`:

.. math:: \mathrm{accepted}_n = [\, n_n \ge \text{min\_answers} \,] \wedge [\, \max_k c_{n,k} / n_n \ge
          \text{fraction} \,] \wedge [\text{that maximum is one class's}]

(the share compared as peerannot compares it: the floating-point quotient
against ``fraction``, so 2 of 3 and 4 of 6 reach the default 2/3 exactly;
with ``fraction`` above 1/2 two classes can never both reach it, and at
1/2 a tie is not an agreement).

What a flagged task looks like: every task has its one row, and the
result's flag ``accepted`` (:attr:`~crowdagg.methods.result.AggregationResult.flags`)
is written as a column right after ``confidence`` in every labels output
(``task, label, confidence, accepted``).  The label of a task that is not
accepted is its plurality (majority vote, ties drawn by the seeded
:class:`~crowdagg.methods.blocks.TieBreaker`), there so that the row is
complete, and ``confidence`` its vote share -- below ``fraction`` (or from
too few answers), which ``accepted=false`` says; peerannot gives such a task
no label (-1).  A warning (stderr under the CLI) says how many tasks are
flagged.  ``posteriors`` (``--proba``) are the vote shares, as majority
vote's; a task without answers gets ``prior`` (the mean share) and is never
accepted.  ``worker_params["accepted_agreement"]`` (``--workers``): the
share of a worker's answers on accepted tasks that equal the accepted label
-- their agreement with the consensus the rule kept --, 1/K (chance) for a
worker with no answer on an accepted task.  (Not ``agreement``: ``crowdagg
workers`` has a column of that name, every answer against the label, and
would hide this one behind it.)

One pass over the engine's blocks for the vote, one for the agreement.
O(L).  Reference: peerannot (Lefort et al.), ``TwoThird``: 2/3 of at least
2 answers.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...data.annotations import AnnotationSet
from ...errors import CrowdaggWarning, warn
from ..base import SHARES, Aggregator, FitContext, make_result
from ..blocks import Posterior, Vote, agreement_with_block, finish_votes
from ..result import AggregationResult


def accepted_tasks(shares: np.ndarray, answers: np.ndarray, min_answers: int, fraction: float) -> np.ndarray:
    """Whether each task's vote reaches the rule, shape (n_tasks,) bool: at least ``min_answers`` answers
    (``answers``, (n_tasks,)) and one class alone holding at least ``fraction`` of them (``shares``, the vote shares
    (n_tasks, K): each a count divided by the task's answers, peerannot's quotient)."""
    if shares.shape[1] == 0:
        return np.zeros(shares.shape[0], dtype=bool)
    top = shares.max(axis=1)
    alone = np.count_nonzero(shares == top[:, None], axis=1) == 1
    return (answers >= min_answers) & (top >= fraction) & alone


class TwoThird(Aggregator):
    __doc__ = __doc__
    name = "twothird"
    #: Its posteriors are the vote shares, one vote an answer.
    posterior_form = SHARES
    worker_param_names = ("accepted_agreement",)
    flag_names = ("accepted",)

    def _fit(self, data: AnnotationSet, checked: FitContext, callback: Any) -> AggregationResult:
        k = data.n_classes
        post, labels, prior = finish_votes(checked.engine, Posterior(Vote(seed=checked["seed"])), k)
        answers = data.answers_per_task
        accepted = accepted_tasks(post, answers, checked["min_answers"], checked["fraction"])
        # Each worker's agreement with the accepted labels only (a task below the rule is left out: label -1).
        (agree, total), _ = checked.engine.map_reduce(agreement_with_block, (np.where(accepted, labels, -1), False))
        agreement = np.where(total > 0, agree / np.maximum(total, 1.0), 1.0 / k)
        flagged = int(data.n_tasks - np.count_nonzero(accepted))
        if flagged:
            few = int(np.count_nonzero(answers < checked["min_answers"]))
            warn(CrowdaggWarning(
                f"twothird: {flagged:,} of {data.n_tasks:,} tasks not accepted ({few:,} with fewer than "
                f"{checked['min_answers']} answers, {flagged - few:,} where no class has {checked['fraction']:.4g} "
                "of the answers): they are flagged accepted=false, their label the plurality"))
        return make_result(self.name, data, post, labels, prior, worker_params={"accepted_agreement": agreement},
                           flags={"accepted": accepted})
