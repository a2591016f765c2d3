"""The engine: one block protocol for every kernel family, run locally or on a cluster.

The answers (sorted by task) are cut into a fixed grid of task-aligned
blocks (:mod:`.grid`: about max(65,536, 16 × workers × K²) answers each, from
the data's shape alone).  A kernel family is a **block function**::

    fn(part, b, params, keep) -> (sums, out)

over local block ``b`` of a :class:`~.part.Part` (a partition of the
blocks: its arrays, its place in the grid) given the iteration's
``params`` (broadcast: worker parameters, a class prior), returning

* ``sums`` -- the block's accumulators: per worker (dense over the global
  workers; the grid keeps them smaller than the block's work), sparse
  keyed (worker pairs from a pair index built once), scalars; anything
  :func:`.tree.add` adds -- reduced over all blocks along a fixed pairwise
  tree (:mod:`.tree`), so any aligned partitioning (threads, processes,
  Dask workers) gives bit-identical totals;
* ``out`` -- when ``keep``, the block's per-task (or per-answer) outputs:
  posteriors, votes, messages.  They stay with their block (never written
  into a global buffer); the engine gathers them when asked.

Passes whose unit is the worker run the same way over the worker-ordered
grid (``map_reduce(fn, params, by="worker")``, :class:`~.part.WorkerPart`:
one heavy worker may span several blocks), on either engine: a block
function reads its block through ``WorkerPart.answers(b)``.

An engine (:class:`~.local.LocalEngine`, and the Dask engine) offers
``map_reduce(fn, params, keep=...)`` and ``gather(outs)``; a method asks
its engine to map and reduce and does its M-step on the totals.
"""

from __future__ import annotations

from .grid import MIN_BLOCK_ANSWERS, answers_per_block, task_grid, worker_grid
from .local import LocalEngine, join
from .part import Part, WorkerPart
from .tree import add, combine, cover, reduce_range

__all__ = [
    "MIN_BLOCK_ANSWERS",
    "LocalEngine",
    "Part",
    "WorkerPart",
    "add",
    "answers_per_block",
    "combine",
    "cover",
    "join",
    "reduce_range",
    "task_grid",
    "worker_grid",
]
