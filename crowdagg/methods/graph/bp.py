r"""Belief propagation: sum-product messages on the worker--task graph with each worker's confusion integrated out.

Model (Liu, Peng & Ihler, "Variational inference for crowdsourcing", NIPS
2012; Ok, Oh, Shin & Yi, "Optimality of belief propagation for
crowdsourced classification", ICML 2016; Kim, Cho, Kim & Ok, "Robust deep
learning from crowds with belief propagation", AISTATS 2022, §3.2 and
App. E): each task's class :math:`z_i` is uniform a priori, each worker
:math:`u` has a confusion :math:`\theta_u` drawn from a prior and answers
:math:`y_{iu} \sim \theta_u[z_i, :]`.  Integrating :math:`\theta_u` out
leaves a factor graph over the tasks' classes, one factor per worker
(ALGORITHMS.md §6.1), on which BP passes messages along the answers
(:mod:`crowdagg.kernels.bp`); on a graph without cycles its beliefs are the
exact posteriors, and on the sparse random (l, r)-regular graphs of the
deepBP experiments it is asymptotically optimal (Ok et al.).

The worker prior, ``worker_model``:

* ``one-coin`` (default): :math:`\theta_u` has the accuracy :math:`q_u` on
  its diagonal and :math:`(1 - q_u)/(K - 1)` off it, :math:`q_u \sim
  \mathrm{Beta}(a, b)`, ``prior = (a, b)``.  The exact message with a Beta
  prior is a sum over the worker's other answers' agreement counts,
  O(n_u²) per worker per sweep (4×10¹⁰ steps a sweep for one spammer with
  200k answers); :math:`q_u` is put on a grid of ``grid`` cells instead,
  each cell's midpoint weighted by the Beta prior's exact mass on it (Liu
  et al.'s ``'discrete'`` prior), O(n_u × grid).  K = 2 is Liu's binary
  one-coin BP, K > 2 the one-coin multiclass message of ALGORITHMS.md §6.3.
* ``confusion``: full confusion, each row Dirichlet with ``alpha`` on the
  diagonal and ``beta`` off it (``prior = (alpha, beta)``; deepBP's
  ``[[α, β], [β, α]]`` for K = 2, rows independent), integrated by
  deepBP's Monte-Carlo messages: ``samples`` confusions drawn once from the
  prior (seeded by ``seed``), equal weights, shared by all workers -- and,
  under ``proposal=posterior`` (the default), importance-sampled draws of
  their own for the workers with many answers (below).

**Where the prior draws fail, and the importance sampling.**  A worker's
factor is an average over the ``samples`` prior draws of the product of
its answers' factors; once the worker has many answers, that product
picks out the one draw nearest its posterior, and with K² - K free
entries per confusion the nearest of a few hundred draws from the prior
is a poor confusion.  Measured at the true labels with 400 draws: on
music (K = 10, 44 workers, 20 of them with over 30 answers) every worker
with over 30 answers rests on a single draw (Kish's effective sample
size 1.0-2.3), and BP with the prior draws alone (``proposal=prior``)
labels .40 of the tasks right without converging (ds .767, mf .773;
4000 draws .54, damping .5 .37: the fault is the integration, not the
schedule); on dog (K = 4) workers holding 84% of the answers rest on
fewer than two draws, and the accuracy moves with the seed
(.798-.843).  ``proposal=posterior`` (ALGORITHMS.md §6.5) keeps the
shared prior draws for the workers they serve (at least a quarter of
``samples`` effective draws at the start's messages, :data:`OWN_ESS`:
the workers with a few answers; all of them, when the others hold
under 1% of the answers, :data:`OWN_SHARE`) and gives each other worker
``samples`` draws of its own from a proposal :math:`q_u` near its posterior, each
weighted :math:`p(\theta_s) / q_u(\theta_s)`
(:func:`~crowdagg.kernels.bp.proposal_points`): the messages estimate
the same expectation, with the weights spread over many draws instead
of one.  :math:`q_u` is the worker's mean-field posterior
(ALGORITHMS.md §6.4): Dirichlet rows, the prior plus its soft counts
under the task posteriors of a mean-field warm-up (:mod:`.mf` under the
same prior), and the messages start from those posteriors; the draws are
then fixed.  Measured alternatives: redrawing them every 3 sweeps from
the current beliefs, music .73 ± .02 over seeds (the draws' noise
steering BP to other fixed points); a proposal sharpened by a
per-worker mean-field refit (the worker's answers counted twice), music
.782 but its heavy workers on 1-6 effective draws (on the dense-heavy
crowd of the speed benchmark too, and .9022 there against mf's .9044):
an estimate resting on the proposal's mode, not the integral.
Measured, 400 draws, seed 0 (seeds 0-9): music .769 (.740-.780, mean
.770; ds .767, mf .773), converged in 7-11 sweeps, its workers with
over 30 answers on 3-360 effective draws (median 83), none under two;
dog .843 at every seed; rte .929, temp .942, bluebird .898 as before;
the dense-heavy crowd (1M answers, K = 2, workers of 1,000-20,000
answers) .9044 against .9041 with the prior draws.  The fit measures each worker's
effective number of draws (:func:`~crowdagg.kernels.bp.worker_posteriors`,
importance-weighted) and warns when workers holding over half of the
answers rest on fewer than two: use ``proposal=posterior``, more
``samples``, or ds or mf there (the same Dirichlet-confusion model,
fitted instead of integrated).

The default prior ``(2, 1)`` is Liu et al.'s (``prepare.m``: Beta(2, 1)) and
deepBP's code (Dirichlet (2, 1)): workers are better than chance on
average (prior mean accuracy 2/3 for K = 2), which is what lets BP tell
the true labelling from its mirror image.

**Grid error.**  Against the exact Beta-prior posterior (its worker factor
:math:`B(a + c, b + n - c)/B(a, b)/(K-1)^{n-c}` enumerated over all
labellings) on small tree-shaped crowds (8 tasks, 7 workers, K = 2; 40
random trees and answers), the largest error of a posterior probability
(tests/methods/graph/test_bp.py measures it):

======  =============  =============  ===============
grid    Beta(2, 1)     Beta(1, 0.5)   Beta(0.5, 0.25)
======  =============  =============  ===============
8       3.5e-3         3.9e-3         4.2e-3
16      8.9e-4         9.8e-4         1.1e-3
32      2.2e-4         2.4e-4         2.7e-4
64      5.6e-5         6.1e-5         6.7e-5
128     1.4e-5         1.5e-5         1.7e-5
======  =============  =============  ===============

Each point sits at the prior's mean within its cell (not the cell's
midpoint, whose error for the sparse Beta(0.5, 0.25) was 4.7e-3 at 64
cells and fell only as ~1/grid), and the error falls as 1/grid² for every
prior.  The default ``grid = 32`` keeps a posterior within 3e-4 of the
Beta prior's -- far below any difference that decides a label -- at 32
multiply-adds and a division per answer and class each sweep.

**Messages and schedule.**  A sweep is a worker pass (every worker→task
message from the task→worker messages, damped: ``(1 - damping) new +
damping old``) then a task pass (every task→worker message and the
beliefs).  The start (``start``): ``vote`` takes the task→worker messages
from the soft majority vote (each task's vote shares, its gold one-hot)
and runs an undamped worker pass first; ``uniform`` starts the
worker→task messages at 1/K (deepBP's "standard initialisation").  On
the deepBP scenario (10 seeds, 0--3 extreme spammers) both reach the
same accuracy to 1e-4 (.755, .755, .759, .746); ``vote`` converged in a
sweep fewer at 1M answers (13 against 14 at tol 1e-4), and is the default.  The
loop stops when no worker→task message changed by more than ``tol`` in a
sweep, or after ``max_iter`` sweeps (Liu's 100).  The default 5e-4 is
Liu's criterion (1e-3 on tanh(m/2) = 2p - 1, i.e. 5e-4 on a probability;
deepBP's code stops at 0.03): on the deepBP graph at 1M answers it took 11
sweeps, 1e-4 took 13 and 1e-2 7, with the same accuracy (.7638) to the
fourth digit.  Gold tasks send
the one-hot at their class.

Result: ``posteriors`` the beliefs (n_tasks, K), labels their argmax (ties
broken by the seeded :class:`~crowdagg.methods.blocks.TieBreaker`);
``worker_params["accuracy"]`` (n_workers,) each worker's posterior mean
accuracy given the final messages (the belief at its factor: the product
over all of its answers), and ``confusion`` its posterior mean confusion
(n_workers, K, K) ``[w, true, observed]``; a worker without answers has
no posterior of its own and is reported at chance (1/K, uniform rows).  No
objective (the stop rule reads the messages).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from ...data.annotations import AnnotationSet
from ...errors import UsageError, param
from ..base import PRODUCT, FitContext, IterativeAggregator, make_result
from ..blocks import TieBreaker, argmax_random_ties, clamp_posteriors, soft_majority_vote
from ..loop import NO_OBJECTIVE, Residual, Run, Step

if TYPE_CHECKING:  # pragma: no cover
    from ...kernels.bp import Points
    from ..result import AggregationResult


@dataclass
class BPState:
    """The messages: task→worker ``tmsg`` (n_answers, K) in task order, worker→task ``wmsg`` (n_answers, K)
    in worker order, the beliefs (n_tasks, K), and the fit's fixed inputs."""

    engine: Any
    points: Points
    spans: Any
    #: The fit's own engine (the standard grid) and its crossing segments: the final per-worker means are dense
    #: per-worker sums, which the fine grid of the passes (``engine``) is not for.
    means_engine: Any
    means_spans: Any
    position: np.ndarray
    clamp: np.ndarray
    tmsg: np.ndarray
    wmsg: np.ndarray
    belief: np.ndarray
    #: The passes write into these, kept from sweep to sweep (nothing allocated or joined per sweep): the task
    #: pass's (tmsg, belief), and the worker pass's next messages (the array that is not ``wmsg``).
    task_out: tuple[np.ndarray, np.ndarray] | None = None
    spare: np.ndarray | None = None
    #: The task factors h_i as (n_tasks, K) log-probabilities (None: uniform), read by every task pass: deepBP's
    #: classifier (:mod:`crowdagg.learning.methods.graph.deepbp`) sets it between its epochs' BP runs.
    log_prior: np.ndarray | None = None


def worker_points(checked: FitContext, k: int) -> Points:
    """The worker prior as points (:mod:`crowdagg.kernels.bp`): the one-coin grid or the confusion samples."""
    from ...kernels.bp import grid_points, sample_points

    a, b = _prior(checked["prior"])
    if checked["worker_model"] == "one-coin":
        return grid_points(a, b, k, checked["grid"])
    return sample_points(a, b, k, checked["samples"], checked["seed"])


def _prior(prior: tuple[float, ...]) -> tuple[float, float]:
    """The declared prior's two numbers (its declaration's ``size`` refused any other count)."""
    return float(prior[0]), float(prior[1])


class BeliefPropagation(IterativeAggregator):
    __doc__ = __doc__
    name = "bp"
    loop_name = "BP"
    #: Its beliefs are the product of the answers' messages, each the answer's likelihood under the worker's
    #: confusion integrated out (approximately its posterior mean, the result's confusion).
    posterior_form = PRODUCT
    stop_rule = Residual("messages")
    objective_direction = NO_OBJECTIVE
    worker_form = "confusion"
    starts_from: ClassVar[tuple[str, ...]] = ()
    engines: ClassVar[tuple[str, ...]] = ("local",)
    #: The messages are K floats per answer in both directions, and the points (grid cells or samples) a few
    #: K² tables each: the base's "posteriors are tasks × classes" would send the user the wrong way.
    memory_advice = (f"its messages are classes × answers, both ways, and each point ({param('grid')} cells or "
                     f"{param('samples')}) a classes² table: use fewer {param('samples')}, or mf or ds")
    #: (set by the base's __init__ from the declaration, read before the fit's checks)
    worker_model: str
    grid: int
    samples: int

    @property  # type: ignore[misc]
    def collapse_advice(self) -> str:  # type: ignore[override]
        """What to try when the labels collapse: the confusion model from one-coin; from the confusion model
        (which already keeps each class's error rates) ds, or a different prior."""
        if self.worker_model == "confusion":
            return f"try ds, or bp with a different {param('prior')} or more {param('samples')}"
        return "try -p worker_model=confusion (each class its own error rates) or ds"

    def check_params(self) -> dict[str, Any]:
        checked = super().check_params()
        _prior(checked["prior"])
        return checked

    def memory_needed(self, data: AnnotationSet) -> tuple[float, str]:
        # two message arrays and their next sweep's (answers × K each), the worker-order positions and gathered
        # rows (answers), beliefs (tasks × K) twice, the final means and effective numbers (workers × (K + 1) × K)
        # and the points: their confusions twice (two layouts) and a compacted copy and prefix products per thread
        a, n, k, w = data.n_answers, data.n_tasks, data.n_classes, data.n_workers
        g = self.grid if self.worker_model == "one-coin" else self.samples
        need = 8.0 * (5 * a * k + 3 * a + 3 * n * k + 2 * w * (k + 1) * k + 4 * g * k * k + 70 * g)
        return need, f"{a:,} answers × {k:,} classes (messages), {n:,} tasks, {w:,} workers"

    def _start(self, data: AnnotationSet, checked: FitContext, start: int, rng: np.random.Generator) -> tuple[BPState, None]:
        from ...kernels import bp as kernels

        engine = checked.engine
        if not hasattr(engine, "worker_part"):
            raise UsageError("bp runs on the local engine (its messages cross from task blocks to worker blocks)")
        k = data.n_classes
        clamp = checked.clamp if checked.clamp is not None else np.full(data.n_tasks, -1, dtype=np.int64)
        clamp = np.ascontiguousarray(clamp, dtype=np.int64)
        fine = engine.fine()  # the passes' sums are scalars: the smallest blocks, so that every thread works
        state = BPState(fine, worker_points(checked, k), kernels.spans(fine.worker_part), engine,
                        kernels.spans(engine.worker_part), data.worker_position, clamp, np.empty((0, k)), np.empty((0, k)), np.empty((0, k)))
        state.task_out = (np.empty((data.n_answers, k)), np.empty((data.n_tasks, k)))
        state.spare = np.empty((data.n_answers, k))
        if checked["start"] == "uniform":
            state.wmsg = np.full((data.n_answers, k), 1.0 / k)
        else:
            votes = clamp_posteriors(soft_majority_vote(data, engine), clamp)
            state.tmsg = np.ascontiguousarray(votes[data.task])
            state.wmsg, _ = kernels.worker_pass(state.engine, self._worker_params(state, checked, damp=False))
            state.spare = np.empty((data.n_answers, k))  # (the start's messages are in the first one)
        self._task_pass(state)
        if checked["worker_model"] == "confusion" and checked["proposal"] == "posterior":
            self._propose(data, state, checked)
        return state, None

    def _propose(self, data: AnnotationSet, state: BPState, checked: FitContext) -> None:
        """Importance sampling (``proposal=posterior``): the workers that the shared prior draws leave under
        :data:`OWN_ESS` × ``samples`` effective draws at the start's messages (when they hold over
        :data:`OWN_SHARE` of the answers) draw their own points from their mean-field posteriors (the prior
        plus their soft counts under the task posteriors of a mean-field warm-up, :func:`_warm_up`;
        :func:`~crowdagg.kernels.bp.proposal_points`), and the messages start again from those task
        posteriors: one undamped worker pass and a task pass."""
        from ...core import memory
        from ...kernels.bp import proposal_points, worker_pass

        k, g = data.n_classes, checked["samples"]
        _, ess = self._posteriors(state, checked, state.points)
        n = np.asarray(data.answers_per_worker)
        own = (n > 0) & (ess < OWN_ESS * g)
        n_own = int(own.sum())
        if n_own == 0 or n[own].sum() <= OWN_SHARE * n.sum():
            return
        # their draws three times (drawn, and the kernels' two stacked layouts) and their weights
        memory.check(8.0 * n_own * (3 * g * k * k + 4 * g),
                     f"{n_own:,} workers × {g:,} {param('samples')} × {k:,}² classes (each worker's own draws)",
                     checked.max_memory, advice=f"use {param('proposal')}=prior or fewer {param('samples')}")
        owner = np.full(data.n_workers, -1, dtype=np.int64)
        owner[own] = np.arange(n_own)
        post = self._warm_up(data, checked, state.clamp)
        state.tmsg = np.ascontiguousarray(post[data.task])
        a, b = _prior(checked["prior"])
        counts = _soft_counts(data, state.tmsg, owner, n_own)
        state.points = proposal_points(state.points, a, b, counts, owner, checked["seed"])
        old = state.wmsg
        state.wmsg, _ = worker_pass(state.engine, self._worker_params(state, checked, damp=False))
        state.spare = old
        self._task_pass(state)

    def _warm_up(self, data: AnnotationSet, checked: FitContext, clamp: np.ndarray) -> np.ndarray:
        """The task posteriors (n_tasks, K) of mean-field VB (:mod:`.mf`) under the same Dirichlet prior, gold
        clamped.  Its warnings are not this fit's (a start; the fit's own checks run on its result)."""
        import warnings

        from ...errors import CrowdaggWarning
        from .mf import MeanField

        gold = getattr(self, "gold", None)
        mf = MeanField(seed=checked["seed"], prior=checked["prior"], **({} if gold is None else {"gold": gold}))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = mf.fit(data, max_memory=checked.max_memory, engine=checked.engine)
        for w in caught:
            if not issubclass(w.category, CrowdaggWarning):
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        return clamp_posteriors(np.asarray(result.posteriors, dtype=np.float64), clamp)

    def _posteriors(self, state: BPState, checked: FitContext, points: Points) -> tuple[np.ndarray, np.ndarray]:
        """Each worker's posterior mean confusion and effective number of draws under ``points``, at the current
        task→worker messages (:func:`~crowdagg.kernels.bp.worker_posteriors`)."""
        from ...kernels.bp import worker_posteriors

        params = replace(self._worker_params(state, checked), points=points, into=None)
        if not (state.spans.any or state.means_spans.any):  # every worker within one block of either grid: each
            # worker's mean is computed alone, the same bits on the passes' fine grid, on every thread
            return worker_posteriors(state.engine, params)
        return worker_posteriors(state.means_engine, replace(params, spans=state.means_spans))

    def _worker_params(self, state: BPState, checked: FitContext, damp: bool = True) -> Any:
        from ...kernels.bp import WorkerPass

        old = state.wmsg if damp else np.zeros((state.position.size, state.points.n_classes))
        return WorkerPass(state.tmsg, old, state.points, checked["damping"], damp, state.spans, into=state.spare)

    def _task_pass(self, state: BPState) -> None:
        from ...kernels.bp import TaskPass, task_pass

        state.tmsg, state.belief = task_pass(state.engine, TaskPass(state.wmsg, state.position, state.clamp,
                                                                    state.log_prior, into=state.task_out))

    def _step(self, data: AnnotationSet, state: BPState, checked: FitContext) -> Step:
        from ...kernels.bp import worker_pass

        old = state.wmsg
        state.wmsg, residual = worker_pass(state.engine, self._worker_params(state, checked))
        state.spare = old  # (read no more: the next sweep writes its messages over it)
        self._task_pass(state)
        return Step(residual=residual)

    def _finish(self, data: AnnotationSet, run: Run, checked: FitContext) -> AggregationResult:
        state: BPState = run.state
        k = data.n_classes
        post = state.belief.copy()
        labels = argmax_random_ties(post, TieBreaker(data.tasks, checked["seed"]), atol=1e-12)
        means, spread = self._posteriors(state, checked, state.points)
        if checked["worker_model"] == "confusion":
            _check_samples(data, spread, checked["samples"], checked["proposal"])
        idle = data.answers_per_worker == 0
        means[idle] = 1.0 / k  # no answers, no posterior of its own: chance, as every method reports such a worker
        accuracy = np.diagonal(means, axis1=1, axis2=2).mean(axis=1)
        return make_result(self.name, data, post, labels, np.full(k, 1.0 / k),
                           worker_params={"accuracy": accuracy, "confusion": means})


#: Under ``proposal=posterior``, a worker draws its own points when the shared prior draws give it fewer than this
#: share of ``samples`` effective draws at the start (on music every worker with over 30 answers: under 5%).
OWN_ESS = 0.25
#: ... and only when those workers hold more than this share of the answers: the warm-up costs a mean-field fit of
#: the whole crowd (4 s at 1M answers, the deepBP graph, where 174 of its 250k workers of 4 answers fall under
#: OWN_ESS, 0.07% of the answers: the fit took 13 s instead of 6 s for the same labels).
OWN_SHARE = 0.01
def _soft_counts(data: AnnotationSet, evidence: np.ndarray, owner: np.ndarray, n_sets: int) -> np.ndarray:
    """Soft counts (n_sets, K, K) ``[set, true, observed]`` of the workers ``owner >= 0`` (set ``owner[w]``):
    each of their answers' ``evidence`` row (n_answers, K) added at its label."""
    k = data.n_classes
    set_of = owner[data.worker]
    held = set_of >= 0
    idx = set_of[held] * k + data.label[held]
    rows = evidence[held]
    counts = np.empty((n_sets, k, k))
    for z in range(k):
        counts[:, z, :] = np.bincount(idx, weights=rows[:, z], minlength=n_sets * k).reshape(n_sets, k)
    return counts


#: A worker whose posterior over the Monte-Carlo samples rests on fewer than this many of them (Kish's effective
#: sample size) has the messages of one random draw from the prior, not of its confusion integrated out.
DEGENERATE_ESS = 2.0
#: Warn when workers holding more than this share of the answers are degenerate (measured at the default 400
#: samples, proposal=prior: music (K = 10) .96, dog (K = 4) .84, temp .35, rte .17, bluebird 0;
#: proposal=posterior: 0 on each).
DEGENERATE_SHARE = 0.5


def _check_samples(data: AnnotationSet, spread: np.ndarray, samples: int, proposal: str) -> None:
    """Warn when the confusion model's Monte-Carlo messages rest on one (importance-weighted) draw for most
    answers."""
    from ...errors import CrowdaggWarning, warn

    n = np.asarray(data.answers_per_worker)
    few = (n > 0) & (spread < DEGENERATE_ESS)
    share = float(n[few].sum()) / max(float(n.sum()), 1.0)
    if share > DEGENERATE_SHARE:
        k = data.n_classes
        if proposal == "prior":
            what = f"the {samples:,} prior draws"
            tip = f"use {param('proposal')}=posterior (each such worker's own draws near its posterior), "
        else:
            what = f"the {samples:,} draws each reads (the shared prior draws, or its own importance-weighted ones)"
            tip = f"use more {param('samples')}, "
        warn(CrowdaggWarning(
            f"bp: the confusion model's Monte-Carlo messages are degenerate: {int(few.sum()):,} worker(s) holding "
            f"{share:.0%} of the answers each rest on fewer than {DEGENERATE_ESS:g} effective draws of {what} "
            f"(a {k}×{k} confusion per worker is not integrated by so few): their messages are those of one random "
            f"draw, not of their confusions integrated out, and the labels change with {param('seed')}; {tip}ds or "
            f"mf (the same model, fitted), or bp's default one-coin model"))


__all__ = ["BPState", "BeliefPropagation", "worker_points"]
