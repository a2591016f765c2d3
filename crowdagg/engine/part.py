"""A partition: the answers of a contiguous range of the grid's blocks, and what is built from them once.

The local engine has one partition, all blocks (views of the
:class:`~crowdagg.data.annotations.AnnotationSet`'s arrays, nothing
copied); a distributed engine holds several, each on the machine that
built it.  A block function (:mod:`crowdagg.engine`) reads a partition's
arrays by its *local* block index; ``first_block`` places them in the
global grid, ``first_task`` in the global task order.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import DataError


@dataclass(eq=False)
class Part:
    """The answers of blocks ``[first_block, first_block + n_blocks)`` of a grid of ``n_blocks_total`` blocks.

    Attributes
    ----------
    first_block, n_blocks_total : int
        Where the partition's blocks sit in the global grid.
    first_task : int
        Global index of its first task.
    bounds : ndarray of int64, shape (n_blocks + 1,)
        Its blocks' task boundaries, in its own task indices (from 0).
    task_ptr : ndarray of int64, shape (n_tasks + 1,)
        Its tasks' answer offsets, from 0.
    worker : ndarray of int32, shape (n_answers,)
        Each answer's global worker code.
    label : ndarray of int8 or int16, shape (n_answers,)
        Each answer's class code.
    n_workers, n_classes : int
        The global vocabulary sizes.
    task_names : sequence of str, length n_tasks, or None
        Its tasks' names (the keyed tie draws read them).
    """

    first_block: int
    n_blocks_total: int
    first_task: int
    bounds: np.ndarray
    task_ptr: np.ndarray
    worker: np.ndarray
    label: np.ndarray
    n_workers: int
    n_classes: int
    task_names: Any = None
    _built: dict[str, np.ndarray] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if self.n_workers * max(self.n_classes, 1) > np.iinfo(np.int32).max:
            raise DataError(f"{self.n_workers:,} workers × {self.n_classes:,} classes exceed the kernels' int32 cells")

    @property
    def n_blocks(self) -> int:
        return len(self.bounds) - 1

    @property
    def n_tasks(self) -> int:
        return len(self.task_ptr) - 1

    @property
    def n_answers(self) -> int:
        return int(self.task_ptr[-1])

    def tasks_of(self, b: int) -> tuple[int, int]:
        """Local task range ``[start, stop)`` of local block ``b``."""
        return int(self.bounds[b]), int(self.bounds[b + 1])

    def answers_of(self, b: int) -> tuple[int, int]:
        """Answer range ``[start, stop)`` of local block ``b``."""
        start, stop = self.tasks_of(b)
        return int(self.task_ptr[start]), int(self.task_ptr[stop])

    @property
    def cell(self) -> np.ndarray:
        """Per answer, ``worker * K + label``, int32, shape (n_answers,): built once, in place (no int64 temporary)."""
        if "cell" not in self._built:
            out = self.worker.astype(np.int32)  # a copy the size of the output, then updated in place
            out *= np.int32(self.n_classes)
            # any integer labels (a partition's own, uint64 from a file): unsafe casting is exact for codes < K,
            # which every kernel checks before it reads the cells (crowdagg.kernels.validate.check_part)
            np.add(out, self.label, out=out, casting="unsafe")
            self._built["cell"] = out
        return self._built["cell"]

    def task_rows(self, values: np.ndarray) -> np.ndarray:
        """This partition's rows of a per-task array over all tasks (a view)."""
        return values[self.first_task:self.first_task + self.n_tasks]


@dataclass(eq=False)
class WorkerPart:
    """The answers of a contiguous range of the worker-ordered grid's blocks (:func:`~crowdagg.engine.grid.worker_grid`).

    For passes whose unit is the worker (a worker's answers together: BP's
    worker side, leave-one-out sums).  The worker order is the answers
    grouped by worker, each worker's in task order
    (:attr:`~crowdagg.data.annotations.AnnotationSet.worker_order`).  One
    heavy worker may span several blocks: its per-worker sums are added
    across them by the reduction tree.

    A block function reads its block through :meth:`answers` -- the same
    values whichever engine holds the partition: the local engine's one
    partition keeps the set's arrays in task order and reads them through
    ``order``; a Dask engine's partitions hold their own answers, already in
    worker order.

    Attributes
    ----------
    first_block, n_blocks_total : int
    bounds : ndarray of int64, shape (n_blocks + 1,)
        Its blocks' answer offsets in its own worker order (from 0).
    order : ndarray of int64, shape (n_answers,)
        The global task-order index of each of its answers, in worker order
        (per-answer outputs map back through it).
    worker_ptr : ndarray of int64, shape (n_workers + 1,)
        The CSR offsets of each worker's answers in the global worker order.
    worker, label, task : ndarrays
        The answers' worker, class and global task codes: in task order over
        every answer when ``task_ordered`` (index them through ``order``),
        else the partition's own, in worker order.
    n_workers, n_classes : int
    first_answer : int
        Global worker-order position of its first answer.
    task_ordered : bool
    """

    first_block: int
    n_blocks_total: int
    bounds: np.ndarray
    order: np.ndarray
    worker_ptr: np.ndarray
    worker: np.ndarray
    label: np.ndarray
    task: np.ndarray
    n_workers: int
    n_classes: int
    first_answer: int = 0
    task_ordered: bool = True

    @property
    def n_blocks(self) -> int:
        return len(self.bounds) - 1

    @property
    def n_answers(self) -> int:
        return len(self.order)

    def answers_of(self, b: int) -> tuple[int, int]:
        """Range ``[lo, hi)`` of local block ``b`` in the partition's worker order (positions in ``order``)."""
        return int(self.bounds[b]), int(self.bounds[b + 1])

    def answers(self, b: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Local block ``b``'s answers in worker order: ``(rows, worker, label, task)``, shape (block answers,) each.

        ``rows``: their global task-order indices; ``task``: their global task
        codes.  Fresh arrays on the local engine (gathered through ``order``),
        read-only views on a Dask partition.
        """
        lo, hi = self.answers_of(b)
        rows = self.order[lo:hi]
        if self.task_ordered:
            return rows, self.worker[rows], self.label[rows], self.task[rows]
        return rows, self.worker[lo:hi], self.label[lo:hi], self.task[lo:hi]

    def workers_of(self, b: int) -> tuple[int, int]:
        """Workers ``[first, last + 1)`` with answers in local block ``b`` (the first and last may continue
        into the neighbouring blocks)."""
        lo, hi = self.answers_of(b)
        if hi <= lo:
            return 0, 0
        lo, hi = lo + self.first_answer, hi + self.first_answer
        first = int(np.searchsorted(self.worker_ptr, lo, side="right")) - 1
        last = int(np.searchsorted(self.worker_ptr, hi - 1, side="right")) - 1
        return first, last + 1
