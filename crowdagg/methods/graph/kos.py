r"""Karger--Oh--Shah (KOS): iterative message passing for binary crowds, decisions without probabilities.

Model and algorithm (Karger, Oh & Shah, NeurIPS 2011 and Operations
Research 2014; ALGORITHMS.md §6.6): answers :math:`L_{ij} = \pm 1` (the
second class, code 1, is +1); workers are spammers, hammers or anything
between, and a worker's reliability is read from how its answers agree
with the other workers' on shared tasks.  On each edge, with the
leave-one-out sums

.. math:: x_{i \to j} = \sum_{j' \in \partial i \setminus j} L_{ij'}\, y_{j' \to i}, \qquad
          y_{j \to i} = \sum_{i' \in \partial j \setminus i} L_{i'j}\, x_{i' \to j}

from :math:`y \sim N(1, 1)` per edge ("trust the workers", with noise:
Liu's ``ones+noise`` and crowd-kit's start; seeded), and the decision
:math:`\hat z_i = \mathrm{sign}(\sum_j L_{ij}\, y_{j \to i})`.  The updates are
a power iteration on the graph's non-backtracking structure: KOS is the
sign of its leading singular vector, optimal for the spammer--hammer model
on random regular (l, r) graphs as l, r grow.

Here (the kernels, :mod:`crowdagg.kernels.kos`): the leave-one-out sums
are totals minus the edge's own term (O(L) per round; the workers' totals
are dense per-worker sums over the task blocks, a heavy worker spread over
many blocks included), and the y messages are divided by their largest
magnitude every round, so nothing overflows however many rounds run
(crowd-kit's grow geometrically and stop once a sum passes 1e300); on a
crowd whose grid is one block (many workers, few answers each) a round is
one fused pass over kept buffers, or two passes on every thread, whichever
runs faster on the machine (the same bits either way).  The
loop stops when no normalised message moves by more than ``tol`` (1e-6: a
millionth of the largest message) or after ``max_iter`` (100) rounds.
Liu's code runs 10 rounds and crowd-kit 100; the residual shrinks
geometrically, by the ratio of the two leading singular values of the
message operator, so a graph with a clear leading direction settles well
within 100 rounds, while on a sparse (3, 4)-regular graph the messages
are still moving after 100 (a ConvergenceWarning; the decisions are as
crowd-kit's there, see the tests).

Gold (``--gold``): a clamped task sends ``±(d_max - 1)`` on every edge --
its gold sign times the largest message a free task can send when every
|y| <= 1 (d_max the most answers on one task) -- and its label is the gold.

What it returns -- honestly: KOS gives decisions, not probabilities.  The
posterior column is one-hot at the decision.  A task whose belief is
exactly 0 -- no message reached it, e.g. its workers answered no other
task, so their y are 0 -- gets the decision of the untrained messages
(every y = 1, all workers trusted alike), i.e. its vote shares, with a
warning; a tie of those votes is 0.5/0.5 and its label drawn by the seed.
A task without answers gets the share of each decision among the others
(the ``prior``).  ``worker_params["reliability"]``
is each worker's total message :math:`\sum_i L_{ij} x_{i \to j}` per answer,
in units of the largest :math:`|x|`: in [-1, 1] whatever its number of
answers, 1 when every task's other workers agree with it as strongly as
anywhere, negative an adversary (its answers oppose the others'), near 0
a spammer or a worker whose tasks no one else informs (0 without
answers).

Binary only: more classes are refused (use bp, mf or ds; one class labels
every task with it, as every method does), and so is a crowd where no
worker shares a task with another (every message would be 0: use mv).
"""

from __future__ import annotations

import math
import time
from typing import Any, ClassVar

import numpy as np

from ...data.annotations import AnnotationSet
from ...engine.local import run_each as _run
from ...errors import CrowdaggWarning, DataError, UsageError, warn
from ...kernels.kos import Normalise, Round, kos_normalise_block, kos_round_block
from ..base import FitContext, IterativeAggregator, make_result
from ..blocks import TieBreaker, argmax_random_ties, fill_empty_rows, soft_majority_vote
from ..loop import NO_OBJECTIVE, Residual, Run, Step
from ..result import AggregationResult

__all__ = ["KOS", "KOSState", "kos_memory"]

_NO_TOTALS = np.zeros(0)


class KOSState:
    """The messages of one run: per task block, its edges' y and x (they stay with the block), the workers' totals.

    ``gold``: the message a clamped task sends; ``clamp`` (n_tasks,) the
    gold class or -1, None without gold; ``gold_totals`` (n_workers,) the
    clamped tasks' constant share of each worker's total.  A grid of one
    block runs its rounds in :class:`_Whole`'s buffers (``whole=False``:
    through the block functions all the same, the same bits).
    """

    def __init__(self, engine: Any, data: AnnotationSet, y0: np.ndarray, clamp: np.ndarray | None,
                 gold: float, whole: bool = True) -> None:
        self.engine = engine
        self.clamp = None if clamp is None or not (clamp >= 0).any() else clamp
        self.gold = gold
        self.gold_totals: np.ndarray = np.zeros(data.n_workers)
        if self.clamp is not None:  # Σ L_e · (±gold) over the clamped tasks' answers: the same every round
            edge_gold = np.repeat(self.clamp, data.answers_per_task)
            on = edge_gold >= 0
            sign = (2.0 * data.label[on] - 1.0) * (2.0 * edge_gold[on] - 1.0)
            self.gold_totals = np.bincount(data.worker[on], weights=gold * sign, minlength=data.n_workers
                                           ).astype(np.float64)
        part = engine.part
        # One block (a crowd of many workers for its answers, e.g. a sparse graph): its per-worker sums need no
        # tree, so a round is one fused pass over buffers kept from round to round (_Whole), with the same bits.
        self._whole = _Whole(engine, y0, self.clamp, gold, self.gold_totals) \
            if whole and part.n_blocks_total == 1 else None
        if self._whole is not None:
            return
        cuts = np.asarray(part.task_ptr)[np.asarray(part.bounds)]
        y_start = [y0[cuts[b]:cuts[b + 1]] for b in range(part.n_blocks)]
        self._y: list[np.ndarray] | None = None
        self._round(Round(_NO_TOTALS, None, y_start, self.clamp))

    def _round(self, params: Round) -> float:
        """A round from ``params``: its unnormalised messages, then normalised; the largest change of y."""
        (totals, top), outs = self.engine.map_reduce(kos_round_block, params, keep=True)
        scale = 1.0 / top.value if top.value > 0 else 0.0
        self._scale = scale
        y_hat, x_hat = [o[0] for o in outs], [o[1] for o in outs]
        self._belief = [o[2] * scale for o in outs]
        res, outs = self.engine.map_reduce(
            kos_normalise_block, Normalise(y_hat, x_hat, scale, self._y, self.clamp, self.gold), keep=True)
        self._y, self._x = [o[0] for o in outs], [o[1] for o in outs]
        self._totals = totals * scale + self.gold_totals
        return float(res.value)

    def x_top(self) -> float:
        """The largest |x| of the messages (0 without any)."""
        if self._whole is not None:
            from ...kernels.kos import x_top

            w = self._whole
            return x_top(w.part, w.xh, w.scale, w.clamp, w.gold) if w.xh.size else 0.0
        return max((float(np.abs(x).max()) for x in self._x if x.size), default=0.0)

    @property
    def scale(self) -> float:
        """The last round's normalisation, 1 / its largest unnormalised |y| (0 when all were 0): the product of
        the rounds' scales turns the normalised messages back into unnormalised ones (crowd-kit's)."""
        return self._whole.scale if self._whole is not None else self._scale

    # The messages as lists of the task blocks' arrays, and the workers' totals (n_workers,).
    @property
    def y(self) -> list[np.ndarray]:
        return self._whole.y if self._whole is not None else self._y  # type: ignore[return-value]

    @property
    def x(self) -> list[np.ndarray]:
        return self._whole.x if self._whole is not None else self._x

    @property
    def belief(self) -> list[np.ndarray]:
        return self._whole.belief if self._whole is not None else self._belief

    @property
    def totals(self) -> np.ndarray:
        return self._whole.totals if self._whole is not None else self._totals

    def iterate(self) -> float:
        """One round from the last one's totals and x messages: the largest change of the normalised y."""
        if self._whole is not None:
            return self._whole.iterate()
        return self._round(Round(self._totals, self._x, None, self.clamp))


class _Whole:
    """The messages of a run whose grid is one block, in buffers kept from round to round (nothing allocated per
    round): per answer in task order, the last round's unnormalised x_hat (its x is ``x_hat * scale``, ``±gold``
    on a clamped task) and the last two rounds' unnormalised y_hat; per worker, the totals; per task, the
    unnormalised beliefs.  ``y``, ``x``, ``belief`` and ``totals`` are :class:`KOSState`'s after the same rounds,
    bit for bit, for any thread count.

    A round runs one of two ways, with the same bits: *fused*, one pass on
    one thread (:func:`~crowdagg.kernels.kos.whole_round`: one random read
    and write of a worker's totals an answer), or, with two threads or more,
    *split* into a pass over task ranges and one over worker ranges on every
    thread (:class:`~crowdagg.kernels.kos.Split`: two random reads an
    answer, but on every thread).  Which is faster depends on the machine and
    on what else runs on it (split waits for its slowest thread twice a
    round), so both are timed: split on rounds 1-2, fused on 3-4, then the
    faster, and every :data:`PROBE`-th round the other one again.  The
    choice changes the time only, never a value.
    """

    #: Every this many rounds the mode not in use runs once, timed (the machine's load may have changed).
    PROBE = 16

    def __init__(self, engine: Any, y0: np.ndarray, clamp: np.ndarray | None, gold: float,
                 gold_totals: np.ndarray) -> None:
        from ...core import threads
        from ...kernels.kos import Split, whole_buffers

        part = engine.part
        # (no gold: every total's gold share is 0.0, added as a constant instead of read per worker)
        self.part, self.gold = part, gold
        self.gold_totals = gold_totals if clamp is not None else np.zeros(0)
        self.clamp, self.tw, self.xh, self.yh, self.yh_free, self.s = whole_buffers(part, clamp)
        n = min(threads.count(), max(int(part.n_tasks), 1))
        self.split = Split(part, engine.worker_part, self.clamp, n) if n >= 2 else None
        # the totals: tw[:, 0] for the fused round (tw[:, 1] its sums, zero between rounds), t for the split one
        self.t = np.zeros(int(part.n_workers)) if self.split is not None else None
        self.in_t = False
        self.seconds = {False: math.inf, True: math.inf}  # per mode (split?): the last timed round's
        self.rounds = 0
        self.scale = 0.0
        self._step(y0)

    def _split_next(self) -> bool:
        """Whether the next round runs split."""
        r = self.rounds
        if self.split is None or r == 0:
            return False
        if r <= 4:
            return r <= 2
        best = self.seconds[True] < self.seconds[False]
        return not best if r % self.PROBE == 0 else best

    def _step(self, y0: np.ndarray | None) -> float:
        """A round (from ``y0``, the start's draw, when given) into the free y_hat buffer; its residual."""
        from ...kernels.kos import whole_round, whole_settle

        split = self._split_next()
        if split != self.in_t:  # move the totals to the other mode's place
            if split:
                self.t[:] = self.tw[:, 0]  # type: ignore[index]
            else:
                self.tw[:, 0] = self.t
            self.in_t = split
        new = self.yh_free
        prev = None if y0 is not None else self.yh
        clock = time.perf_counter()
        if split:
            assert self.split is not None and self.t is not None
            top = self.split.round(_run, self.part, y0, self.xh, self.scale, self.clamp, self.gold, self.t, new,
                                   self.s)
            scale = 1.0 / top if top > 0 else 0.0
            res = self.split.settle(_run, self.xh, scale, self.gold_totals, self.t, new, prev, self.scale)
        else:
            top = whole_round(self.part, y0, self.xh, self.scale, self.clamp, self.gold, self.tw, new, self.s)
            scale = 1.0 / top if top > 0 else 0.0
            res = whole_settle(new, scale, prev, self.scale, self.tw, self.gold_totals)
        if y0 is None:
            self.seconds[split] = time.perf_counter() - clock
        self.rounds += 1
        self.yh_free, self.yh, self.scale = self.yh, new, scale
        return res

    def iterate(self) -> float:
        return self._step(None)

    @property
    def y(self) -> list[np.ndarray]:
        return [self.yh * self.scale]

    @property
    def x(self) -> list[np.ndarray]:
        x = self.xh * self.scale
        if self.clamp.size:
            edge = np.repeat(self.clamp, np.diff(self.part.task_ptr))
            x[edge == 1] = self.gold
            x[edge == 0] = -self.gold
        return [x]

    @property
    def belief(self) -> list[np.ndarray]:
        return [self.s * self.scale]

    @property
    def totals(self) -> np.ndarray:
        return self.t.copy() if self.in_t and self.t is not None else np.ascontiguousarray(self.tw[:, 0])


def kos_memory(data: AnnotationSet) -> tuple[float, str]:
    """Bytes a KOS fit allocates: about eight per-edge float arrays alive at once (the start's draw, y and x, the
    round's unnormalised and normalised ones), the beliefs and posteriors, and the per-worker totals of the blocks
    in flight."""
    from ...core import threads
    from ...engine.grid import task_grid
    from ...engine.tree import depth

    n_blocks = len(task_grid(data.task_ptr, data.n_workers, data.n_classes)) - 1
    live = min(threads.count(), n_blocks) * (depth(n_blocks) + 2)
    need = 8.0 * (8 * data.n_answers + 6 * data.n_tasks + (live + 3) * data.n_workers)
    return need, f"{data.n_answers:,} answers, {data.n_tasks:,} tasks, {data.n_workers:,} workers"


class KOS(IterativeAggregator):
    __doc__ = __doc__
    name = "kos"
    loop_name = "message passing"
    stop_rule = Residual(quantity="messages")
    objective_direction: ClassVar[str] = NO_OBJECTIVE
    worker_param_names: ClassVar[tuple[str, ...]] = ("reliability",)
    memory_advice = "its messages are a few floats per answer: use mv, or fewer answers"

    def memory_needed(self, data: AnnotationSet) -> tuple[float, str]:
        return kos_memory(data)

    def _fit(self, data: AnnotationSet, checked: FitContext, callback: Any) -> AggregationResult:
        k = data.n_classes
        if k == 1:  # nothing to decide: every task is the one class (as every method labels it)
            return make_result(self.name, data, np.ones((data.n_tasks, 1)), np.zeros(data.n_tasks, dtype=np.int64),
                               np.ones(1), worker_params={"reliability": np.zeros(data.n_workers)}, converged=True)
        if k != 2:
            raise DataError(f"kos is binary (Karger-Oh-Shah messages carry ±1 answers): these answers have {k} "
                            "classes; use bp, mf or ds")
        shared = (data.answers_per_task >= 2).any() and (data.answers_per_worker >= 2).any()
        if data.n_workers < 2 or not shared:
            raise DataError(f"kos needs workers who share tasks: {data.n_workers:,} worker(s), "
                            f"{int((data.answers_per_task >= 2).sum()):,} task(s) with two answers or more, so every "
                            "message would be 0 and every label a coin flip; use mv")
        if not hasattr(checked.engine, "part"):
            raise UsageError("kos runs on the local engine only (its messages cross from task blocks to worker "
                             "blocks)")
        return super()._fit(data, checked, callback)

    def _start(self, data: AnnotationSet, checked: FitContext, start: int, rng: np.random.Generator
               ) -> tuple[KOSState, None]:
        y0 = rng.normal(1.0, 1.0, size=data.n_answers)  # per edge, in task order: the same for any thread count
        gold = float(max(int(data.answers_per_task.max()) - 1, 1))
        return KOSState(checked.engine, data, y0, checked.clamp, gold), None

    def _step(self, data: AnnotationSet, state: KOSState, checked: FitContext) -> Step:
        return Step(residual=state.iterate())

    def _finish(self, data: AnnotationSet, run: Run, checked: FitContext) -> AggregationResult:
        state: KOSState = run.state
        belief = np.asarray(state.engine.gather(state.belief))
        post = np.zeros((data.n_tasks, 2))
        post[belief > 0, 1] = 1.0
        post[belief < 0, 0] = 1.0
        empty = data.answers_per_task == 0
        silent = (belief == 0) & ~empty  # no message reached the task: the untrained (all-trusting) decision
        if state.clamp is not None:
            gold = state.clamp >= 0
            post[gold] = 0.0
            post[gold, state.clamp[gold]] = 1.0
            silent &= ~gold
        if silent.any():
            post[silent] = soft_majority_vote(data, checked.engine)[silent]
            warn(CrowdaggWarning(f"kos: {int(silent.sum()):,} task(s) have a belief of exactly 0 (their workers share "
                                 "no other task, or their messages cancel): they get their majority vote"))
        prior = fill_empty_rows(post, empty)
        labels = argmax_random_ties(post, TieBreaker(data.tasks, checked["seed"]))
        # Each worker's mean L x over its answers, in units of the largest x message: in [-1, 1] whatever its
        # number of answers (the total alone grows with it, and a light honest worker would read as a spammer).
        top = state.x_top()
        answers = data.answers_per_worker
        with np.errstate(invalid="ignore", divide="ignore"):
            reliability = np.where(answers > 0, state.totals / (answers * top), 0.0) if top > 0 else \
                np.zeros(data.n_workers)
        return make_result(self.name, data, post, labels, prior, worker_params={"reliability": reliability},
                           n_iter=run.n_iter, converged=run.converged)
