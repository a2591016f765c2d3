r"""deepBP (Kim, Cho, Kim & Ok, AISTATS 2022, §3.2, Alg. 2, App. E): belief propagation with the classifier as
each task's factor.

The model is deepMF's (:mod:`.deepmf`: ``z_i ~ Cat(f̂_i)``, ``f̂ = Clip(f_φ(x), c)``, Dirichlet rows of each
worker's confusion, ``prior = (A, B)``); the inference differs: instead of mean field's factorised posterior,
each worker's confusion is **integrated out**, leaving a factor graph over the labels with the task factors
``h_i = f̂_i`` and one factor per worker (ALGORITHMS.md §6.1), on which sum-product BP passes messages along the
answers.  **One epoch** (full batch, as the paper):

1. ``f̂ = Clip(f_φ(x), c)`` on every task (eval mode, as deepMF);
2. ``q = BP(f̂, y, α)``: the aggregator's BP (:class:`crowdagg.methods.graph.bp.BeliefPropagation`, its
   driver's start, sweeps and stop rule, on :mod:`crowdagg.kernels.bp`) with ``log f̂`` as the task factors
   (``BPState.log_prior``, :class:`~crowdagg.kernels.bp.TaskPass`): worker→task messages
   :math:`m_{u\to i}(z) \propto \sum_g w_g \theta_g[z, y_{iu}] \prod_{j \in N_u \setminus i} \langle
   \theta_g[:, y_{ju}], m_{j\to u} \rangle` over points :math:`\theta_g` of the worker prior --
   ``worker_model=one-coin`` (the default, the paper's eq. 3): the accuracy's Beta(A, B) on a grid of ``grid``
   cells, each weighted by its prior mass (:func:`~crowdagg.kernels.bp.grid_points`: exact up to the
   quadrature, "exact where the prior allows"); ``worker_model=confusion`` (the paper's code, §6.5): ``samples``
   draws of Dirichlet rows, the Monte-Carlo messages (:func:`~crowdagg.kernels.bp.sample_points`, shared by
   all workers, drawn once per fit from ``seed``);
   sweeps until no message moves more than ``bp_tol`` (0.03) or ``bp_iters`` (100) sweeps -- a run that
   stops short is said once at the end of the fit;
3. the classifier, one Adam step on :math:`\mathrm{KL}(q \| \hat f)` (the loss on the clipped ``f̂``).

**Warm start.**  The messages are carried from one epoch to the next: the classifier moves the task factors a
little each epoch, and BP from the previous epoch's messages needs fewer sweeps than from uniform worker
messages (the paper's start each iteration): measured on labelme, 40 epochs, 1.75 sweeps a BP run on average
against 3.2 from uniform, the same labels (.853, .854).  On a tree the fixed point does not depend on where the
messages start.

**The draws** (``worker_model=confusion``; ``proposal``, ALGORITHMS.md §6.5): the paper's draws from the prior
alone fail for a worker with
many answers -- the product of its answers' factors picks the one draw nearest its posterior, and with K² - K
free entries a few hundred draws leave none near (on labelme, K = 8, workers holding 82% of the answers rest on
fewer than two effective draws).  ``proposal=posterior`` (the default, as bp's) gives each such worker
``samples`` draws of its own from its mean-field posterior (of a mean-field fit of the answers alone, made once
at the first epoch), weighted prior/proposal (:func:`~crowdagg.kernels.bp.proposal_points`): the same
expectation, importance-sampled; ``proposal=prior`` is the paper's.  Once the classifier moves the labels a
worker's posterior moves away from that first proposal, and the weights fall on a few draws again: at the start
of each epoch the workers whose own draws gave them fewer than a tenth of ``samples`` effective draws at the last
run's messages (:data:`REDRAW_ESS`) draw them again near their posteriors at its beliefs (the same seed: common
random numbers from epoch to epoch; the labels' run over every answer, once a fit, also runs BP again after
drawing, up to :data:`ROUNDS` runs) -- measured on labelme (seed 0, prior (2, 1)), the first proposal kept:
labels .79; drawn again: .85.  On the paper's sparse (3, 4)-regular graphs no worker but an extreme spammer has
many answers, and both agree there.

**The prior** (``prior``; :func:`~.deepmf.worker_prior`).  One-coin (the default), the paper's Beta(2, 1) on the
accuracy at any K: its prior mean accuracy 2/3.  With ``worker_model=confusion``, ``(2(K - 1), 1)``, for this
reason.  The paper's prior is written for two classes: Dir(2, 1) rows, a worker's prior mean accuracy 2/3.  Carried
to K classes as the same pseudo-counts, (2, 1) says 2/(K + 1) -- .22 on labelme (K = 8), beside 1/9 for each wrong
class: barely a belief that workers answer right, and it leaves a class free to be **emptied into a neighbour**
that the workers confuse it with.  That is why deepBP failed on labelme at seed 1 (labels .771 against .852/.848 at
seeds 0 and 2): labelme's workers confuse classes 1, 2 and 3 (of class 1's 297 answers 74 say 2 and 60 say 3;
answers alone, mf labels no task 1 and bp a third of them), and BP's answers-only beliefs leave class 3 near a tie
with class 1 (44% of its tasks at the first epoch); after one step the classifier (at seed 1's initial weights)
predicts class 3 for none of them, BP's beliefs with it as the task factors put 2% of class 3 there, and the
classifier trained on them closes the loop: class 3 stays empty (108 of its 110 tasks labelled 1), each worker's
answer "3" explained by its confusion row 1.  Not the Monte-Carlo noise (seed 1 with 2,000 draws: .767; the draws
of seeds 0 and 2 with seed 1's network: .772, .772), not the start (the messages from bp's own fit: .770), not the
schedule (one sweep an epoch .763, lr 1e-3 .751, the task factors uniform for the first 1/3/6 epochs .786/.850/.819
with other seeds failing instead), not the held-out selection (no epoch of seed 1 passed .771, and with nothing
held out it ended at .771).  deepMF, whose worker posteriors lag an epoch behind its labels, did not fall in (.846
at seed 1).  The prior mean accuracy kept at the paper's 2/3 -- A = 2(K - 1) on the diagonal, B = 1 off it, the
paper's (2, 1) for K = 2 -- holds a class's own answers to it: labelme's labels at seeds 0-5
.840/.840/.838/.833/.833/.831 (mean .836 ± .004; the test set 86.3/85.6/84.5/83.4/83.4/84.5) where (2, 1) gave
.852/.771/.848/.843/.838/.782 (.822 ± .036; test 86.4/75.3/84.3/83.5/83.3/76.8); music (K = 10, (18, 1)) at seeds
0-2 .803/.810/.803 where (2, 1) gave .761/.809/.800.  Measured alternatives on labelme (seeds 0-2, three BP runs an
epoch): (4, 1) .861/.832/.848, (8, 1) .848/.836/.835, (2, 1/(K - 1)) (the same mean accuracy at the paper's total
of 3 pseudo-counts a row) .836/.841/.841 at twice the time (its sparse draws shorten the kernels' chunks).  Give
``-p prior=2,1`` for the paper's pseudo-counts at any K.

**Where paper, code and this module differ** (ALGORITHMS.md §15 item 2): as deepMF's (the Dirichlet per row,
the clipping, the defaults of 200 epochs at lr 1e-2 where one full-batch step an epoch at 1e-4 under-fits, the
base's held-out model selection, the labels from every answer), and: the messages run on the answers (edges),
O(S × answers × K) a sweep, not on the code's dense N × M × S tensors; the importance-sampled draws above; the
warm start; the prior's default for K > 2 (above: the paper's mean accuracy, not its pseudo-counts).  The
answer model of the held-out objective is ``f̂`` through each worker's posterior mean
confusion at the epoch's messages (:func:`~crowdagg.kernels.bp.worker_posteriors`).

Shapes: messages (answers, K) both ways, beliefs (n_tasks, K), draws (S, K, K).  Cost per epoch: the network on
every task plus O(sweeps × S × answers × K) for BP, which dominates (ALGORITHMS.md §12.8).  Measured on labelme
(CPU, one thread, ``bench_train.py speed``, the median of 10 epochs): 27 ms an epoch, deepMF's 11 ms; it was 50 ms
with up to three BP runs an epoch, a redraw below a quarter of ``samples`` and every worker's own draws laid out
again at each redraw (:meth:`~crowdagg.kernels.bp.Points.with_own` replaces the redrawn ones only) -- the new
schedule at the prior (2, 1) takes 34 ms, the old one at the new prior 41 ms.  What is left: the worker pass
(about 5 ms a sweep, one or two sweeps an epoch), the redraws of the first epochs (0.8 ms of gamma draws per
worker), each worker's posterior for the held-out objective and the redraw test (3 ms), the network (9 ms).
Failure modes: full batch only (mini-batches cut the graph); uninformative features hurt unless ``c`` is lowered (paper
Fig. 1); BP is exact on trees and asymptotically so on sparse random graphs (the paper's (3, 4)-regular crowds),
but on a small dense crowd, every worker answering every task, it can settle on a mirror-image fixed point far
more confident than the exact posterior (2 workers × 10 tasks all answering ``a``, K = 2: every task ``b`` at
.93-.99, where the exact marginal of ``a`` is about .45 and deepMF says ``a``).
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np
import torch

from ....data.annotations import AnnotationSet
from ....errors import param
from ....methods.base import FitContext
from ....methods.graph.bp import BeliefPropagation, BPState, _check_samples
from ....methods.loop import NO_OBJECTIVE, iterate
from ...trainer import TrainContext
from .deepmf import DeepMF, worker_prior

#: The most BP runs of the labels' inference (over every answer, once a fit): while a worker's own draws serve it
#: poorly at the run's beliefs (fewer than :data:`REDRAW_ESS` × ``samples`` effective draws), they are drawn again
#: near its posterior at those beliefs and BP runs again from its messages.  An epoch runs BP once, and the workers
#: its run left stale draw again at the next epoch's start: measured on labelme (seeds 0-5, the default prior), the
#: labels .839/.840/.839/.834/.833/.829 against .838/.839/.838/.832/.836/.828 with three runs an epoch (the speed
#: in the module docstring).
ROUNDS = 3
#: A worker's own draws are drawn again once they give it fewer than this share of ``samples`` effective draws (40
#: of 400: an importance-sampled estimate still resting on many draws).  Measured on labelme (seeds 0-5): the
#: labels .840/.840/.838/.833/.833/.831 against .839/.840/.839/.834/.833/.829 at bp's own quarter
#: (:data:`~crowdagg.methods.graph.bp.OWN_ESS`), with two workers drawn again an epoch instead of up to seven in
#: the first epochs (each 1.5 ms).
REDRAW_ESS = 0.1


class _Messages:
    """One BP over a set of answers: the aggregator's driver and its state, kept from epoch to epoch.

    Its draws, engine and message arrays are the fit's working memory, not a parameter of the kept epoch: a
    snapshot of ``ctx.state`` shares it rather than copying it (:meth:`__deepcopy__`).
    """

    def __init__(self, ctx: TrainContext, data: AnnotationSet, engine: Any) -> None:
        p = ctx.params
        self.data = data
        self.bp = BeliefPropagation(seed=p["seed"], worker_model=p["worker_model"], grid=p["grid"],
                                    prior=worker_prior(p["prior"], data.n_classes, p["worker_model"]),
                                    samples=p["samples"], max_iter=p["bp_iters"], tol=p["bp_tol"],
                                    proposal=p["proposal"], start="uniform")
        self.checked = FitContext(self.bp.check_params(), engine=engine, max_memory=p.max_memory, method=ctx.method)
        self.state: BPState | None = None
        #: Each worker's posterior mean confusion (n_workers, K, K) and effective number of draws (n_workers,) at
        #: the last run's messages (:meth:`_measure`).
        self.means: np.ndarray | None = None
        self.spread: np.ndarray | None = None
        self.optimizer = p.optimizer("the BP of an epoch", advice=f"raise {param('bp_iters')} or {param('bp_tol')}")

    def __deepcopy__(self, memo: dict[int, Any]) -> _Messages:
        return self

    def run(self, log_prior: np.ndarray, epoch: int, rounds: int = 1) -> np.ndarray:
        """The beliefs (n_tasks, K) with ``log_prior`` as the task factors, from the last run's messages: one BP
        run, and up to ``rounds`` - 1 more while a worker's own draws serve it poorly (each after drawing them
        again, :meth:`_propose`).  The workers left stale are drawn again at the next run's start."""
        bp, checked, data = self.bp, self.checked, self.data

        def start(index: int, rng: np.random.Generator) -> tuple[BPState, None]:
            if self.state is None:
                self.state, _ = bp._start(data, checked, 0, rng)
            else:
                self._propose()
            self.state.log_prior = log_prior
            bp._task_pass(self.state)  # the task messages under the new factors
            return self.state, None

        for _ in range(rounds):
            run = iterate(start, lambda state: bp._step(data, state, checked), rule=bp.stop_rule,
                          max_iter=checked["max_iter"], seed=checked["seed"], tol=checked["tol"],
                          direction=NO_OBJECTIVE)
            self._measure()
            if not self._stale().any():
                break
        self.optimizer.record(SimpleNamespace(success=run.converged, nit=run.n_iter,
                                              message=f"a message still moved by more than {checked['tol']:g}"), epoch)
        assert self.state is not None
        return self.state.belief.copy()

    def _stale(self) -> np.ndarray:
        """The workers (n_workers,) bool whose own draws gave them fewer than :data:`REDRAW_ESS` × ``samples``
        effective ones at the last messages (:meth:`_measure`); none without own draws."""
        pts = self.state.points if self.state is not None else None
        if pts is None or pts.owner is None or self.spread is None:
            return np.zeros(self.data.n_workers, dtype=bool)
        return (pts.owner >= 0) & (self.spread < REDRAW_ESS * pts.n_points)

    def _propose(self) -> None:
        """The stale workers (:meth:`_stale`) draw their own points again near their posteriors at the last
        beliefs (:func:`~crowdagg.kernels.bp.proposal_points`: worker u's from the seed ``(seed, u)``, so the
        same draws as if every worker were drawn again); the others keep theirs.  Drawing costs more than a
        BP sweep (labelme, 34 workers × 400 draws × 8²: 66 ms), hence only the stale ones."""
        from ....kernels.bp import proposal_draws
        from ....methods.graph.bp import _soft_counts

        assert self.state is not None
        pts = self.state.points
        stale = self._stale()
        if pts.owner is None or pts.own_theta is None or pts.own_logw is None or not stale.any():
            return
        sub = np.full(self.data.n_workers, -1, dtype=np.int64)
        sub[stale] = np.arange(int(stale.sum()))
        counts = _soft_counts(self.data, self.state.belief[self.data.task], sub, int(stale.sum()))
        a, b = self.checked["prior"]
        fresh_theta, fresh_logw = proposal_draws(pts, a, b, counts, sub, self.checked["seed"])
        self.state.points = pts.with_own(pts.owner[stale], fresh_theta, fresh_logw)

    def _measure(self) -> None:
        """Each worker's posterior mean confusion and effective number of draws at the messages (a worker without
        answers at chance, as every method reports one)."""
        assert self.state is not None
        means, self.spread = self.bp._posteriors(self.state, self.checked, self.state.points)
        means[self.data.answers_per_worker == 0] = 1.0 / self.data.n_classes
        self.means = means


class DeepBP(DeepMF):
    """deepBP (see the module docstring): deepMF's loop with q from BP."""

    name = "deepbp"
    #: Its BP's draws (``samples`` per worker with their own, × K²) or grid dominate its memory, not the network.
    memory_advice = (f"use fewer {param('samples')} (confusion) or a smaller {param('grid')} (one-coin), or fewer "
                     f"tasks")

    def _memory(self, data: AnnotationSet, x: np.ndarray, checked: dict[str, Any], network: Any) -> tuple[float, str]:
        need, what = super()._memory(data, x, checked, network)
        bp = BeliefPropagation(worker_model=checked["worker_model"], grid=checked["grid"], samples=checked["samples"],
                               prior=worker_prior(checked["prior"], data.n_classes, checked["worker_model"]))
        extra, _ = bp.memory_needed(data)
        return need + 2 * extra, f"{what}, BP's messages and draws (twice: the epochs' and the labels')"

    def _infer(self, ctx: TrainContext, log_prior: np.ndarray, data: Any, engine: Any, epoch: bool) -> np.ndarray:
        """q (n_tasks, K): BP with ``log_prior`` as the task factors -- in an epoch on the training answers, from
        the previous epoch's messages; for the labels on every answer, from a fresh start."""
        if not epoch:
            messages = _Messages(ctx, data, engine)
            q = messages.run(log_prior, ctx.epoch, rounds=ROUNDS)
            assert messages.spread is not None
            if ctx.params["worker_model"] == "confusion":  # the grid's quadrature needs no such check
                _check_samples(data, messages.spread, ctx.params["samples"], ctx.params["proposal"])
            return q
        if "bp" not in ctx.state:
            ctx.state["bp"] = _Messages(ctx, data, engine)
        messages = ctx.state["bp"]
        q = messages.run(log_prior, ctx.epoch)
        ctx.state["confusion"] = torch.as_tensor(messages.means, dtype=torch.float32, device=ctx.device)
        return q
