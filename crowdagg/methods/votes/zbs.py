r"""Zero-based skill (crowd-kit's ``ZeroBasedSkill``): skills moved toward each worker's agreement with a
skill-weighted vote by a decaying learning rate.

Every worker starts with the skill :math:`s_m = 1/K + \epsilon`.  Iteration
:math:`t = 1, \dots, T` (``max_iter``, crowd-kit's ``n_iter``):

1. the learning rate is multiplied by ``lr_reduce_factor`` when ``t`` is a
   multiple of ``lr_steps_to_reduce`` (crowd-kit's schedule: 1.0 for
   iterations 1--19, .5 for 20--39, ...);
2. labels :math:`\hat y_n = \arg\max_k \sum_{m \in M_n} s_m 1[\tilde y_n^{(m)} = k]`;
3. :math:`s_m \leftarrow s_m + \eta_t (a_m - s_m)`, :math:`a_m` the share
   of worker m's answers equal to the label of their task (a repeated
   identical answer counting once, as crowd-kit's ``get_accuracy``).

The result is the vote weighted by the last skills: ``posteriors`` are its
shares (a task whose voters all have skill 0, or none, gets ``prior``, the
mean share over the others), ``worker_params["skill"]`` the skills (a
worker without answers keeps the start).  crowd-kit always runs its
``n_iter`` iterations (its ``eps`` only offsets the start); ``tol`` > 0
stops once no skill moves by more than ``tol`` in an iteration.

Ties of the vote are broken by the seeded draw keyed on the task's name
(:class:`~crowdagg.methods.blocks.TieBreaker`), fixed for the whole run;
crowd-kit's ``idxmax`` takes the first label in sorted order.  Each
iteration is one pass over the engine's blocks (the labels, then each
worker's agreement, per block; only per-worker sums cross the engine).
Arrays: skills (n_workers,), the posteriors (n_tasks, K) at the end.
O(L) per iteration.

Reference: the Toloka crowd-kit library, ``ZeroBasedSkill`` (1.4.2).
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from ...data.annotations import AnnotationSet
from ..base import SHARES, FitContext, IterativeAggregator, make_result
from ..blocks import Posterior, Vote, finish_votes, vote_agreement_block
from ..loop import NO_OBJECTIVE, Residual, Run, Step
from ..result import AggregationResult

#: Weighted votes within this of a task's best tie (skills are sums of shares, of order 1).
TIE_ATOL = 1e-12


def learning_rate(iteration: int, lr_init: float, steps: int, factor: float) -> float:
    """The learning rate of ``iteration`` (1-based): ``lr_init`` times ``factor`` once per multiple of ``steps``
    reached (crowd-kit reduces it at the start of iterations steps, 2·steps, ...)."""
    return lr_init * factor ** (iteration // steps)


class ZeroBasedSkill(IterativeAggregator):
    __doc__ = __doc__
    name = "zbs"
    #: Its posteriors are the vote shares, each answer weighted by its worker's skill.
    posterior_form = SHARES
    vote_weight = "skill"
    worker_param_names = ("skill",)
    stop_rule = Residual("skills")
    objective_direction = NO_OBJECTIVE

    def memory_needed(self, data: AnnotationSet) -> tuple[float, str]:
        # the posteriors and a block's votes table at the end; skills and agreement sums per worker
        return (3.0 * 8 * data.n_tasks * data.n_classes + 4.0 * 8 * data.n_workers,
                f"{data.n_tasks:,} tasks × {data.n_classes:,} classes")

    def _start(
        self, data: AnnotationSet, checked: FitContext, start: int, rng: np.random.Generator
    ) -> tuple[SimpleNamespace, None]:
        skills = np.full(data.n_workers, 1.0 / data.n_classes + checked["eps"])
        return SimpleNamespace(skills=skills, iteration=0), None

    def _step(self, data: AnnotationSet, state: SimpleNamespace, checked: FitContext) -> Step:
        """One vote with the current skills, each worker's agreement with it, the skills moved toward it."""
        state.iteration += 1
        rate = learning_rate(state.iteration, checked["lr_init"], checked["lr_steps_to_reduce"],
                             checked["lr_reduce_factor"])
        vote = Vote(state.skills, checked["seed"], atol=TIE_ATOL, on_shares=False)
        (agree, answers), _ = checked.engine.map_reduce(vote_agreement_block, vote)
        # A worker without answers has no agreement to move toward: its skill stays where it started.
        target = np.where(answers > 0, agree / np.maximum(answers, 1.0), state.skills)
        step = rate * (target - state.skills)
        state.skills = state.skills + step
        return Step(residual=float(np.abs(step).max()) if step.size else 0.0)

    def _finish(self, data: AnnotationSet, run: Run, checked: FitContext) -> AggregationResult:
        skills = run.state.skills
        vote = Vote(skills, checked["seed"], atol=TIE_ATOL, on_shares=False)
        post, labels, prior = finish_votes(
            checked.engine, Posterior(vote, empty_by_weight=True, empty_atol=TIE_ATOL), data.n_classes)
        return make_result(self.name, data, post, labels, prior, worker_params={"skill": skills})
