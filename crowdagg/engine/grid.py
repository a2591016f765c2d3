"""The block grid: where the answers are cut into blocks, from the data's shape alone.

Every kernel family runs over the same grid of contiguous, task-aligned
blocks of answers (answers sorted by task, ``task_ptr`` their CSR offsets).
A block holds about :func:`answers_per_block` answers:

    max(:data:`MIN_BLOCK_ANSWERS`, :data:`ACCUMULATOR_FACTOR` × n_workers × K²)

so that a dense per-worker accumulator (EM's expected counts, workers × K²
floats, the largest any family zeroes and adds per block) costs a small
share of the block's own work: 100k workers × K = 10 gives blocks of 160M
answers, not 2,000 blocks of 80 MB each.  (Zeroing and adding an
accumulator costs about three memory accesses a float against a few a
answer: with a factor of 4, ds at 20M answers, 4,000 workers, K = 2 spent
~15% of an iteration on its 305 blocks' accumulators, with 16 about 4%;
a smaller factor keeps more blocks for the threads and the partitions of a
cluster.)  The grid depends on nothing else -- not
on the machine's memory, not on the thread count, not on how many
processes or Dask workers run it -- and has no cap on the number of
blocks, so it scales to billions of answers; with the fixed reduction
tree of :mod:`.tree`, every partitioning aligned with it gives the same
bits.

Passes whose unit is the worker (a worker's answers together: BP's worker
side, leave-one-out sums) use :func:`worker_grid`, the same rule over the
answers in worker order, where one heavy worker may span several blocks.
"""

from __future__ import annotations

import numpy as np

from ..errors import DataError

#: The fewest answers a block holds (unless the data has fewer): below this a block's fixed costs show.
MIN_BLOCK_ANSWERS = 65_536
#: Answers per block per float of a dense per-worker accumulator (workers × K²).
ACCUMULATOR_FACTOR = 16


def answers_per_block(n_workers: int, n_classes: int) -> int:
    """Answers per block for data with this many workers and classes: ``max(65,536, 16 × workers × K²)``."""
    return max(MIN_BLOCK_ANSWERS, ACCUMULATOR_FACTOR * int(n_workers) * int(n_classes) * int(n_classes))


def block_count(n_answers: int, n_units: int, per_block: int) -> int:
    """Blocks for ``n_answers`` answers in ``n_units`` tasks (or workers): ``n_answers // per_block``, at least 1,
    at most one per unit (a block is never empty of tasks)."""
    return max(1, min(int(n_units), int(n_answers) // max(int(per_block), 1)))


def _cut(ptr: np.ndarray, n_blocks: int) -> np.ndarray:
    """Unit boundaries of ``n_blocks`` blocks of about equal answers, over the CSR offsets ``ptr``."""
    n_units = len(ptr) - 1
    n_answers = int(ptr[-1])
    targets = np.linspace(0, n_answers, n_blocks + 1)
    bounds = np.searchsorted(ptr, targets, side="left").astype(np.int64)
    bounds[0], bounds[-1] = 0, n_units
    return np.maximum.accumulate(bounds)


def task_grid(task_ptr: np.ndarray, n_workers: int, n_classes: int, per_block: int | None = None) -> np.ndarray:
    """Task boundaries of the blocks, shape (n_blocks + 1,), int64: about :func:`answers_per_block` answers each
    (``per_block`` when given: the fine grid of :meth:`~crowdagg.engine.local.LocalEngine.fine`).

    ``task_ptr`` (n_tasks + 1,): the answers' CSR offsets by task.  A block
    boundary falls between tasks (a task's answers are never split), at
    the first task starting at or after each equal-answers target.
    """
    task_ptr = np.asarray(task_ptr)
    if task_ptr.ndim != 1 or len(task_ptr) < 1:
        raise DataError("task_ptr must hold at least one offset (n_tasks + 1 of them)")
    n_tasks = len(task_ptr) - 1
    per = answers_per_block(n_workers, n_classes) if per_block is None else int(per_block)
    return _cut(task_ptr, block_count(int(task_ptr[-1]), max(n_tasks, 1), per))


def worker_grid(worker_ptr: np.ndarray, n_classes: int, per_block: int | None = None) -> np.ndarray:
    """Answer boundaries of the worker-ordered blocks, shape (n_blocks + 1,), int64 (``per_block`` answers each
    when given, else :func:`answers_per_block`'s).

    ``worker_ptr`` (n_workers + 1,): the CSR offsets of the answers in worker
    order (:attr:`~crowdagg.data.annotations.AnnotationSet.worker_ptr`, over
    ``worker_order``).  Blocks hold about :func:`answers_per_block` answers
    and end at a worker boundary, unless the nearest boundary lies more than
    half a block away: then the block ends inside a heavy worker, whose
    answers span several blocks (its per-worker sums are added across them
    by the reduction tree).
    """
    worker_ptr = np.asarray(worker_ptr, dtype=np.int64)
    if worker_ptr.ndim != 1 or len(worker_ptr) < 1:
        raise DataError("worker_ptr must hold at least one offset (n_workers + 1 of them)")
    n_workers = len(worker_ptr) - 1
    n_answers = int(worker_ptr[-1])
    per = answers_per_block(n_workers, n_classes) if per_block is None else int(per_block)
    n_blocks = max(1, n_answers // per) if n_answers else 1
    targets = np.linspace(0, n_answers, n_blocks + 1).astype(np.int64)
    nearest = worker_ptr[np.minimum(np.searchsorted(worker_ptr, targets, side="left"), n_workers)]
    bounds = np.where(nearest - targets <= per // 2, nearest, targets)
    bounds[0], bounds[-1] = 0, n_answers
    return np.maximum.accumulate(bounds)
