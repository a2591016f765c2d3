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
crowd-kit's ``idxmax`` takes the first label in sorted order.  An iteration
votes again only the tasks whose label the skills' moves since their last
vote could have changed (a margin test, exact: the labels, agreements and
skills are those of voting every task), one pass over those tasks' answers
on the engine's blocks (only per-worker sums cross the engine, with each
task's label and margin); an iteration that moves no skill is a fixed point
and ends the work.  Arrays: skills (n_workers,), per task a label, margin
and stamp, the posteriors (n_tasks, K) at the end.  O(L) for the first
iteration, O(n_tasks + the answers of the tasks voted again) after.

Reference: the Toloka crowd-kit library, ``ZeroBasedSkill`` (1.4.2).
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from ...data.annotations import AnnotationSet
from ..base import SHARES, FitContext, IterativeAggregator, make_result
from ..blocks import Posterior, Revote, Vote, agreement_with_block, finish_votes, selective_revote_block
from ..loop import NO_OBJECTIVE, Residual, Run, Step
from ..result import AggregationResult

#: Weighted votes within this of a task's best tie (skills are sums of shares, of order 1).
TIE_ATOL = 1e-12
#: Bound on the rounding of a task's vote sums, per answer squared (n sums of n terms of order 1, error ~n² 1e-16,
#: twice): a task within it of its bound is voted again.
ROUNDING = 1e-13


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
        # the posteriors and a block's votes table at the end; per task its label, margin, stamp and selection (and
        # the blocks' copies); skills and agreement sums per worker
        return (3.0 * 8 * data.n_tasks * data.n_classes + 6.0 * 8 * data.n_tasks + 6.0 * 8 * data.n_workers,
                f"{data.n_tasks:,} tasks × {data.n_classes:,} classes")

    def _start(
        self, data: AnnotationSet, checked: FitContext, start: int, rng: np.random.Generator
    ) -> tuple[SimpleNamespace, None]:
        n = data.n_tasks
        # Each worker's answers, a repeated identical answer once (crowd-kit's get_accuracy): the agreement's
        # denominator, which no label changes (one pass, against any labels).
        (_, total), _ = checked.engine.map_reduce(agreement_with_block, (np.zeros(n, dtype=np.int64), True))
        return SimpleNamespace(
            skills=np.full(data.n_workers, 1.0 / data.n_classes + checked["eps"]), iteration=0,
            labels=np.full(n, -1, dtype=np.int64), margins=np.full(n, -np.inf), stamps=np.zeros(n), drift=0.0,
            right=np.zeros(data.n_workers), total=total, answers=data.answers_per_task.astype(np.float64),
            settled=False,
        ), None

    def _step(self, data: AnnotationSet, state: SimpleNamespace, checked: FitContext) -> Step:
        """One vote with the current skills, each worker's agreement with it, the skills moved toward it.

        Only the tasks whose label the skills' moves since their last vote could have changed are voted again:
        a task's margin over its runner-up moves by at most its answers × the largest skill change since
        (``drift - stamp``), so a task whose margin exceeds that (and the tie tolerance, and the sums' rounding)
        keeps its label -- and its answers' agreement -- exactly.  The first iteration votes every task; once the
        labels settle the skills settle (a learning rate of 1 reaches the agreement in one step) and the
        iterations read almost no answer.  The agreeing answers are kept up to date by the label changes.  An
        iteration that moves no skill is a fixed point: the ones after it are not computed again.
        """
        state.iteration += 1
        if state.settled:
            # The last iteration moved no skill: the same votes, labels and agreement again, a fixed point for the
            # rest of the run (a zero step means the skills are their agreement, or every later rate is 0 too).
            return Step(residual=0.0)
        rate = learning_rate(state.iteration, checked["lr_init"], checked["lr_steps_to_reduce"],
                             checked["lr_reduce_factor"])
        n = state.answers
        select = state.margins <= n * (state.drift - state.stamps) + TIE_ATOL + ROUNDING * n * n
        vote = Vote(state.skills, checked["seed"], atol=TIE_ATOL, on_shares=False)
        (moved, _), outs = checked.engine.map_reduce(
            selective_revote_block, Revote(vote, select, state.labels, state.margins), keep=True)
        state.labels, state.margins = checked.engine.gather(outs)
        state.stamps[select] = state.drift
        state.right += moved
        # A worker without answers has no agreement to move toward: its skill stays where it started.
        target = np.where(state.total > 0, state.right / np.maximum(state.total, 1.0), state.skills)
        step = rate * (target - state.skills)
        state.skills = state.skills + step
        largest = float(np.abs(step).max()) if step.size else 0.0
        state.drift += largest
        state.settled = largest == 0.0
        return Step(residual=largest)

    def _finish(self, data: AnnotationSet, run: Run, checked: FitContext) -> AggregationResult:
        skills = run.state.skills
        vote = Vote(skills, checked["seed"], atol=TIE_ATOL, on_shares=False)
        post, labels, prior = finish_votes(
            checked.engine, Posterior(vote, empty_by_weight=True, empty_atol=TIE_ATOL), data.n_classes)
        return make_result(self.name, data, post, labels, prior, worker_params={"skill": skills})
