"""The deterministic block scheduler shared by every chunked kernel.

The tasks are cut into a fixed grid of contiguous blocks that depends only
on the data (answers, tasks) and on the size of the accumulator one block
needs, which the caller states: EM needs workers × K² floats, co-occurrence
statistics pairs of workers × K², graph messages per-edge buffers.  Each
block writes only its own slots, so a kernel runs its blocks on any number
of threads (or a distributed engine on any partition aligned with the
grid) and the per-block results, added in block order, are bit-identical.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache
from typing import Any

import numpy as np

from ..core import threads

#: Upper bound on the memory of all blocks' accumulators together.
_BLOCK_BUFFER_BYTES = 64 * 2**20
_ANSWERS_PER_BLOCK = 50_000
_MAX_BLOCKS = 16


def block_count(n_answers: int, n_tasks: int, accumulator_bytes: int) -> int:
    """Number of task blocks for data of this size, each with an accumulator of ``accumulator_bytes``.

    Never depends on the thread count.
    """
    return min(
        _MAX_BLOCKS,
        max(1, n_answers // _ANSWERS_PER_BLOCK),
        max(1, _BLOCK_BUFFER_BYTES // max(int(accumulator_bytes), 1)),
        max(1, n_tasks),
    )


def block_bounds(task_ptr: np.ndarray, accumulator_bytes: int) -> np.ndarray:
    """Task boundaries of the blocks, shape (n_blocks + 1,), int64: about equal numbers of answers each."""
    if len(task_ptr) < 1:
        from ..errors import DataError

        raise DataError("task_ptr must hold at least one offset (n_tasks + 1 of them)")
    n_answers = int(task_ptr[-1])
    n_tasks = len(task_ptr) - 1
    n_blocks = block_count(n_answers, n_tasks, accumulator_bytes)
    targets = np.linspace(0, n_answers, n_blocks + 1)
    bounds = np.searchsorted(task_ptr, targets, side="left").astype(np.int64)
    bounds[0], bounds[-1] = 0, n_tasks
    return np.maximum.accumulate(bounds)


def n_threads() -> int:
    """Threads used by the chunked kernels: the thread policy's count (:func:`crowdagg.core.threads.count`)."""
    return threads.count()


@lru_cache(maxsize=1)
def _pool(threads: int) -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=threads, thread_name_prefix="crowdagg")


def run_blocks(kernel: Callable[..., None], n_blocks: int, *args: Any) -> None:
    """Run ``kernel(block_ids, *args)`` over all blocks, spread over threads.

    The kernels release the GIL (``nogil=True``) and each chunk writes only
    its own slots, so plain Python threads run them in parallel, and the
    result does not depend on which thread ran which chunk.  (A numba
    ``parallel=True`` kernel would do the same but costs seconds more to
    compile on first use, and its thread-pool start-up dominates small inputs.)
    """
    ids = np.arange(n_blocks, dtype=np.int64)
    available = n_threads()
    used = min(available, n_blocks)
    if used <= 1:
        kernel(ids, *args)
        return
    pool = _pool(available)
    futures = [pool.submit(kernel, ids[i::used], *args) for i in range(1, used)]
    kernel(ids[0::used], *args)  # this thread takes the first share
    for f in futures:
        f.result()


def block_sum(values: np.ndarray) -> np.ndarray:
    """The sum over the leading block axis, in block order: the one reduction every kernel family and engine uses,
    so results are bit-identical for any thread count.  With one block, a view of it (copy before the next pass
    overwrites the buffer)."""
    return values[0] if values.shape[0] == 1 else values.sum(axis=0)


#: Below this many answers the ingest kernels run on one thread (threads cost more than they save).
PARALLEL_ANSWERS = 4_000_000


def two_threads(jobs: list[Callable[[], Any]]) -> list[Any]:
    """Run the jobs (nogil kernels) on two threads, or one where the thread policy says so; results in order."""
    if len(jobs) == 1 or n_threads() < 2:
        return [job() for job in jobs]
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = [pool.submit(job) for job in jobs[1:]]
        first = jobs[0]()
        return [first, *(f.result() for f in futures)]
