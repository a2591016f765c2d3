r"""What to relabel next: each task's expected information gain from one more answer, under the fitted workers.

A fit leaves each task a class posterior :math:`q_i` (K,) and each worker
a model of how it answers.  One more answer :math:`l` to task :math:`i`,
from a worker :math:`w` of the crowd, would move :math:`q_i` to
:math:`q_i(t \mid l) \propto q_{it} C_w[t, l]`; how much it is expected to
tell about the task's class is the mutual information

.. math:: I_w(q_i) = H(q_i) - E_{l \sim p_w}\bigl[H(q_i \mid l)\bigr]
          = \sum_t q_{it}\,\mathrm{KL}\bigl(C_w[t, \cdot] \,\big\|\, p_w\bigr),
          \qquad p_w(l) = \sum_t q_{it} C_w[t, l]

in bits (:mod:`crowdagg.kernels.relabel`).  It is 0 for a settled task,
at most :math:`H(q_i)`, and, unlike the uncertainty :math:`1 - \max_t
q_{it}`, it weighs what the workers can tell apart: a task torn between
two classes the crowd confuses gains less from one more answer than one
torn between two classes it separates well.

**Which worker answers next.**  The next answer comes from a worker of
the pool, each with the probability of its share of the answers so far
(the workers who answered most are the likeliest to answer again), and
its identity is known once it answers (the refit uses that worker's own
model).  So the score is the expected gain over that draw,

.. math:: \mathrm{EIG}_i = \sum_w \frac{n_w}{\sum_v n_v}\, I_w(q_i)
          = I\bigl(y_i; (w, l)\bigr),

not the gain of one answer from the answer-weighted *mixture* of the
workers' confusions: that channel forgets who answered, and by the data
processing inequality understates every task's gain (more so where good
and bad workers mix).  Averaging over every worker costs O(N W K²); with
more than ``n_sample`` workers the pool is a seeded draw of ``n_sample``
workers, with replacement, each with probability its answer share, and
each drawn worker weighs its count of draws (an unbiased estimate of the
sum; O(N S K²)).  The draw runs over the workers in name order, so the
input's row order changes nothing.  A worker's answers to the task itself
are not excluded (one answer per worker and task is the usual rule;
leaving them in keeps the cost free of the answers).

**The worker model.**  The method's confusion matrices ``[worker, true,
observed]`` where it has them (ds, mf, spectral, ...; a one-coin
accuracy, wmv's and wawa's agreement, and mv's empirical confusion against
the vote are confusions through :attr:`AggregationResult.confusion`).  A
method whose worker model is not a confusion (glad's abilities, kos's
reliabilities) gets a one-coin model instead: each worker's accuracy as
its expected agreement with the posteriors, :math:`a_w = (\sum_{(i, l)
\in w} q_{il} + 1) / (n_w + 2)`, and the other classes :math:`(1 -
a_w) / (K - 1)` each.

**Order and ties.**  Tasks by score, highest first; scores are rounded to
12 decimals (the last bits of a KL sum are rounding, not information) and
equal scores are ordered by the task's name (a stable, documented order
that the input's row order does not change).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ..core import memory
from ..core.checks import check_int, check_seed
from ..errors import CrowdaggWarning, DataError, UsageError, param, warn

if TYPE_CHECKING:  # pragma: no cover
    from ..methods.result import AggregationResult

__all__ = ["N_SAMPLE", "RelabelPlan", "relabel_plan", "worker_pool"]

#: Workers averaged over exactly, or drawn (seeded, by answer share) when the crowd has more.
N_SAMPLE = 100
#: Decimals the scores are rounded to, for the order and the output.
DECIMALS = 12
#: The columns of :meth:`RelabelPlan.table`.
RELABEL_FIELDS = ("task", "score", "rank", "label", "confidence", "n_answers")


@dataclass(frozen=True, eq=False)
class RelabelPlan:
    """Every task's expected information gain and the order to relabel in.

    Attributes
    ----------
    score : ndarray, shape (n_tasks,)
        Expected information gain of one more answer, bits, in task order
        (rounded to :data:`DECIMALS`).
    order : ndarray of int64, shape (n_tasks,)
        Task indices, highest score first, equal scores by task name.
    worker_model : str
        ``"confusion"`` (the method's) or ``"one-coin"`` (accuracy from the
        agreement with the posteriors, for a method without confusions).
    n_pool : int
        Distinct workers the score averages over.
    n_workers : int
        Workers with answers in the crowd.
    """

    score: np.ndarray
    order: np.ndarray
    worker_model: str
    n_pool: int
    n_workers: int

    def top(self, budget: int | None = None) -> np.ndarray:
        """The first ``budget`` tasks of :attr:`order` (all of them for None or a budget over the count)."""
        # (a slice took -1 as "all but the last" and 0 as none)
        return self.order if budget is None else self.order[:check_int("budget", budget, 1)]

    def table(self, result: AggregationResult, budget: int | None = None) -> dict[str, Any]:
        """The top ``budget`` tasks as columns :data:`RELABEL_FIELDS`: the task, its score, its rank (1 ..),
        the result's current label and confidence, and its answers so far."""
        from ..methods.result import AggregationResult

        if not isinstance(result, AggregationResult) or result.data.n_tasks != len(self.score):
            what = (f"a result of {result.data.n_tasks:,} tasks" if isinstance(result, AggregationResult) else
                    type(result).__name__)
            raise UsageError(f"RelabelPlan.table takes the result the plan was made from ({len(self.score):,} "
                             f"tasks), got {what}")
        rows = self.top(budget)
        data = result.data
        return {
            "task": data.task_names[rows],
            "score": self.score[rows],
            "rank": np.arange(1, len(rows) + 1, dtype=np.int64),
            "label": np.asarray(data.classes, dtype=object)[result.labels[rows]],
            "confidence": result.confidence[rows],
            "n_answers": data.answers_per_task[rows],
        }


def worker_pool(answers_per_worker: np.ndarray, names: np.ndarray, n_sample: int = N_SAMPLE,
                seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """The workers the next answer is averaged over, and their weights (summing to 1).

    Every worker with answers, weighted by its share of them, when there
    are at most ``n_sample``; else ``n_sample`` seeded draws with
    replacement by answer share over the workers in name order, each drawn
    worker weighing its count of draws.  Returns ``(workers, weights)``,
    workers as indices in increasing order.
    """
    counts = np.asarray(answers_per_worker, dtype=np.float64)
    if counts.ndim != 1 or np.shape(names) != counts.shape or not np.isfinite(counts).all():
        raise DataError(f"worker_pool takes one finite answer count and one name per worker; got shapes "
                        f"{counts.shape} and {np.shape(names)}{'' if np.isfinite(counts).all() else ' and a NaN'}")
    seed = check_seed(seed)
    active = np.flatnonzero(counts > 0)
    if active.size <= n_sample:
        return active.astype(np.int64), counts[active] / counts[active].sum()
    by_name = active[np.argsort(np.asarray(names, dtype=object)[active], kind="stable")]
    share = counts[by_name] / counts[by_name].sum()
    drawn = np.random.default_rng(seed).choice(by_name, size=n_sample, replace=True, p=share)
    workers, times = np.unique(drawn, return_counts=True)
    return workers.astype(np.int64), times / float(n_sample)


def _one_coin(result: AggregationResult, workers: np.ndarray, engine: Any) -> np.ndarray:
    """(S, K, K) one-coin confusions of ``workers``: accuracy = smoothed expected agreement with the posteriors
    (summed on ``engine``'s blocks: on Dask the answers are on its workers)."""
    data = result.data
    k = data.n_classes
    from ..kernels.em import EMParams, em_block

    # the expected counts of the answers under the posteriors, [worker, observed, true]: their trace is each
    # worker's expected agreement Σ q_t(answer) (mf's one-coin statistics), summed on the engine's blocks
    (counts_ot, _, _), _ = engine.map_reduce(em_block, EMParams(post=np.asarray(result.posteriors, dtype=np.float64)))
    agree = np.trace(counts_ot, axis1=1, axis2=2)
    acc = (agree[workers] + 1.0) / (data.answers_per_worker[workers] + 2.0)
    conf = np.empty((len(workers), k, k))
    conf[:] = ((1.0 - acc) / max(k - 1, 1))[:, None, None]
    idx = np.arange(k)
    conf[:, idx, idx] = acc[:, None]
    return conf


def relabel_plan(result: AggregationResult, *, n_sample: int = N_SAMPLE, seed: int = 0,
                 engine: Any = None) -> RelabelPlan:
    """Score every task by the expected information gain of one more answer and order them (see the module).

    Parameters
    ----------
    result : AggregationResult
        A categorical method's fit: ``posteriors`` (n_tasks, K) and its
        worker model (``confusion`` (n_workers, K, K) ``[worker, true,
        observed]`` where it has one, else a one-coin model from the
        posteriors).
    n_sample : int
        Workers averaged over: all of them up to this many, else this many
        seeded draws by answer share.  The cost is O(n_tasks · n_sample · K²).
    seed : int
        Seed of the workers' draw (unused when every worker is averaged).
    engine : optional
        The engine the result was fitted on (its blocks sum the one-coin
        model's agreements; default a local engine over ``result.data``;
        needed where the answers are held by Dask workers).

    Returns
    -------
    RelabelPlan
    """
    from ..kernels.relabel import information_gain
    from ..methods.result import AggregationResult

    if not isinstance(result, AggregationResult):
        raise UsageError(f"relabel_plan(result, ...): result must be an AggregationResult (what crowdagg.aggregate "
                         f"returns), got {type(result).__name__}")
    if isinstance(n_sample, bool) or not isinstance(n_sample, (int, np.integer)) or n_sample < 1:
        raise UsageError(f"{param('n_sample')} must be a whole number >= 1, got {n_sample!r}")
    seed = check_seed(seed)
    data = result.data
    workers, weights = worker_pool(data.answers_per_worker, data.worker_names, int(n_sample), seed)
    k = data.n_classes
    memory.check(8.0 * len(workers) * k * k, f"{len(workers):,} workers' confusions of {k:,}² classes for --relabel",
                 result.max_memory,
                 advice=f"draw fewer workers ({param('n_sample')} of crowdagg.reports.relabel.relabel_plan)")
    if result.has_confusion:
        confusion, model = np.asarray(result.confusion)[workers], "confusion"
    else:
        from ..engine import LocalEngine

        confusion, model = _one_coin(result, workers, LocalEngine(data) if engine is None else engine), "one-coin"
    score = np.round(information_gain(result.posteriors, confusion, weights), DECIMALS)
    if len(score) > 1 and not score.any():
        # kos's decisions (one-hot rows) or a fit that settled every task: no order is told, only names
        why = (f"{result.method}'s posteriors are all certain (one-hot), so one more answer cannot move any of "
               "them" if (np.asarray(result.posteriors).max(axis=1) == 1.0).all() else
               f"under {result.method}'s worker model an answer does not depend on the class (answers at chance)")
        warn(CrowdaggWarning(f"relabel: every task scores 0 bits: {why}; the order is only the tasks' names; score "
                             "from a method with graded posteriors and informative workers (ds, mf, mv)"))
    by_name = np.argsort(np.asarray(data.task_names, dtype=object), kind="stable")
    order = by_name[np.argsort(-score[by_name], kind="stable")].astype(np.int64)
    return RelabelPlan(score=score, order=order, worker_model=model, n_pool=len(workers),
                       n_workers=int(np.count_nonzero(data.answers_per_worker)))
