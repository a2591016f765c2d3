"""The local engine: one partition holding every block, its blocks spread over the thread policy's threads.

The threads take aligned runs of blocks (one tree node each) as they free
up, and reduce each along the tree (:func:`crowdagg.engine.tree.reduce_range`,
a stack of log₂ n partial sums); :func:`~crowdagg.engine.tree.combine`
adds the runs' sums: bit-identical for any thread count, and to any other
engine's over the same grid.  Block functions are numba kernels
that release the GIL, so plain Python threads run them in parallel.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache
from typing import Any

import numpy as np

from ..core import threads
from ..data.annotations import AnnotationSet
from . import tree
from .grid import MIN_BLOCK_ANSWERS, task_grid, worker_grid
from .part import Part, WorkerPart


@lru_cache(maxsize=4)
def _pool(n: int) -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=n, thread_name_prefix="crowdagg")


def run_each(fn: Callable[[int], Any], n: int) -> list[Any]:
    """``[fn(0), ..., fn(n - 1)]``, on ``n`` threads (this one and the engine's pool); every call has ended when
    this returns or raises.  For work split by a method itself (``fn`` a numba kernel that releases the GIL)."""
    pool = _pool(n)
    helpers = [pool.submit(fn, i) for i in range(1, n)]
    try:
        first = fn(0)
    finally:
        for f in helpers:
            f.exception()
    return [first] + [f.result() for f in helpers]


class LocalEngine:
    """Map block functions over the grid of ``data`` on this machine's threads and reduce their sums.

    Parameters
    ----------
    data : AnnotationSet
    per_block : int, optional
        Answers per block; default the grid's rule (:func:`~.grid.answers_per_block`).  :meth:`fine` gives the
        engine with the smallest blocks.

    Attributes
    ----------
    part : Part
        The one partition: every block, the set's own arrays.
    n_blocks : int
    """

    name = "local"

    def __init__(self, data: AnnotationSet, per_block: int | None = None) -> None:
        self.data = data
        self.per_block = per_block
        bounds = task_grid(data.task_ptr, data.n_workers, data.n_classes, per_block)
        self.part = Part(0, len(bounds) - 1, 0, bounds, data.task_ptr, data.worker, data.label,
                         data.n_workers, data.n_classes, data.tasks)
        self.n_blocks = self.part.n_blocks

    @property
    def parts(self) -> list[Part]:
        return [self.part]

    @property
    def worker_part(self) -> WorkerPart:
        """The one partition of the worker-ordered grid (built on first use: the answers' worker order).

        The standard engine's reads the set's arrays through the order (no
        copy); the fine engine's (:meth:`fine`, whose passes repeat every
        iteration) holds its own copy of the worker, label and task codes in
        worker order (9 to 14 bytes an answer), so that a block reads slices
        instead of gathering three arrays on every pass.
        """
        if not hasattr(self, "_worker_part"):
            data = self.data
            bounds = worker_grid(data.worker_ptr, data.n_classes, self.per_block)
            order = data.worker_order
            if self.per_block is None:
                codes = (data.worker, data.label, data.task)
            else:
                codes = (data.worker[order], data.label[order], data.task[order])
            self._worker_part = WorkerPart(0, len(bounds) - 1, bounds, order, data.worker_ptr, *codes,
                                           data.n_workers, data.n_classes, task_ordered=self.per_block is None)
        return self._worker_part

    def fine(self) -> LocalEngine:
        """The same answers on the fine grid: blocks of :data:`~.grid.MIN_BLOCK_ANSWERS` answers (built once).

        For block functions whose sums are scalars (belief propagation's
        passes: their outputs are per-edge messages).  The standard grid's
        blocks are sized so that a dense per-worker accumulator (workers ×
        K²) costs little beside a block's work; a crowd of 250,000 workers
        then makes one block of 1M answers, and every thread but one idles.
        The fine grid depends on the data alone too, so a pass over it is
        bit-identical for any thread count.  Never run a block function that
        returns per-worker accumulators over it.
        """
        if self.per_block == MIN_BLOCK_ANSWERS:
            return self
        if not hasattr(self, "_fine"):
            self._fine = LocalEngine(self.data, MIN_BLOCK_ANSWERS)
        return self._fine

    def map_reduce(
        self, fn: Callable[..., tuple[Any, Any]], params: Any = None, *, keep: bool = False, by: str = "task"
    ) -> tuple[Any, list[Any] | None]:
        """Run ``fn(part, b, params, keep)`` on every block and add the sums along the tree.

        ``fn`` returns ``(sums, out)``: the block's sums (reduced) and, when
        ``keep``, its per-task (or per-answer) outputs, which stay with the
        block.  Returns ``(total, outs)``: ``outs`` the blocks' outputs in
        block order when ``keep`` (None otherwise).  ``by="worker"`` runs
        over the worker-ordered grid instead (``fn`` then receives a
        :class:`~crowdagg.engine.part.WorkerPart`).
        """
        if by not in ("task", "worker"):
            from ..errors import UsageError

            raise UsageError(f"map_reduce runs by 'task' or 'worker', not {by!r}")
        part: Any = self.part if by == "task" else self.worker_part
        n = part.n_blocks
        outs: list[Any] = [None] * n if keep else []

        def block(b: int) -> Any:
            sums, out = fn(part, b, params, keep)
            if keep:
                outs[b] = out
            return sums

        used = min(threads.count(), n)
        if used <= 1:
            return tree.combine(tree.reduce_range(0, n, n, block), n), (outs if keep else None)
        # Runs of 2^j consecutive blocks (aligned: one tree node each, but the clipped last), at least four a
        # thread, pulled by the threads as they free up: no thread waits on a longer share, the per-block cost of
        # handing work between threads is paid once a run, and memory holds one sum a run, not one a block.
        # This thread works too, beside used - 1 helpers (one hand-over a helper, not one a run).
        run = 1 << max((n // (4 * used)).bit_length() - 1, 0)
        starts = range(0, n, run)
        values: list[Any] = [None] * len(starts)
        taken = itertools.count()  # next() on it is atomic under the GIL: each run is taken once
        failed: list[bool] = []  # set when this thread's own runs raised (an interrupt): the helpers stop taking

        def work() -> None:
            for i in taken:
                if i >= len(starts) or failed:
                    return
                values[i] = tree.reduce_range(starts[i], min(starts[i] + run, n), n, block)

        pool = _pool(used)
        helpers = [pool.submit(work) for _ in range(used - 1)]
        try:
            work()
        except BaseException:
            failed.append(True)
            raise
        finally:  # the helpers have ended before this returns or raises (each ends with the run it holds)
            for f in helpers:
                f.exception()
        for f in helpers:
            f.result()  # a block function's error in a helper thread is raised here
        nodes: dict[tree.Node, Any] = {}
        for value in values:
            nodes.update(value)
        return tree.combine(nodes, n), (outs if keep else None)

    def gather(self, outs: list[Any]) -> Any:
        """The blocks' outputs joined in task order: arrays concatenated, tuples of arrays concatenated elementwise."""
        return join(outs)


def join(outs: list[Any]) -> Any:
    """Blocks' outputs (arrays, or tuples/dicts of arrays) concatenated along their first axis, in block order."""
    if not outs:
        return outs
    first = outs[0]
    if isinstance(first, tuple):
        return tuple(join([o[i] for o in outs]) for i in range(len(first)))
    if isinstance(first, dict):
        return {k: join([o[k] for o in outs]) for k in first}
    return first if len(outs) == 1 else np.concatenate(outs)
