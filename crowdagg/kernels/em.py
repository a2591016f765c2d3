"""Dawid--Skene EM as partitioned sufficient statistics.

The EM engine is two functions over the fixed block grid of
:mod:`crowdagg.kernels.schedule` (an EM block's accumulator is
workers × K² floats):

* :func:`block_statistics` -- given parameters, the statistics of the
  blocks of one partition of the tasks: per block, the expected counts
  ``[worker, observed, true]``, the class totals and the log-likelihood
  (and the E-step posteriors of its tasks);
* :func:`add_block_statistics` -- the blocks of all partitions added in
  block order.

:class:`EMWorkspace` is the local engine: all blocks on a thread pool.  A
distributed engine maps :func:`block_statistics` over partitions aligned
with the same grid and adds with :func:`add_block_statistics`: the results
are bit-identical for any thread count and any aligned partitioning.

Confusion layout inside kernels is ``log_conf[w, observed, true]`` so that
one answer reads one contiguous row of K values; the public layout
(``AggregationResult.confusion``) is ``[w, true, observed]``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numba import njit

from .schedule import block_bounds, block_count, block_sum, run_blocks


def em_accumulator_bytes(n_workers: int, n_classes: int) -> int:
    """Bytes of one EM block's accumulator (its expected counts)."""
    return max(n_workers * n_classes * n_classes * 8, 1)


def em_chunk_count(n_answers: int, n_tasks: int, n_workers: int, n_classes: int) -> int:
    """Number of EM blocks for data of this shape (never depends on the thread count)."""
    return block_count(n_answers, n_tasks, em_accumulator_bytes(n_workers, n_classes))


def chunk_bounds(task_ptr: np.ndarray, n_workers: int, n_classes: int) -> np.ndarray:
    """Task boundaries of the EM blocks, shape (n_blocks + 1,), int64."""
    return block_bounds(task_ptr, em_accumulator_bytes(n_workers, n_classes))


@njit(cache=True, nogil=True)
def _em_chunks(
    chunks, e_step, task_ptr, cell, log_prior, log_conf, clamp, bounds, post, counts, class_tot, loglik
):  # pragma: no cover - compiled
    """EM pass over the tasks of the given chunks: E-step fused with the M-step statistics.

    For each task t of chunk c, when ``e_step``:
    ``post[t] = softmax(log_prior + sum_e log_conf[w_e, y_e, :])`` (or one-hot
    at ``clamp[t]`` when ``clamp[t] >= 0``) and its log-evidence is summed
    into ``loglik[c]``; otherwise ``post[t]`` is taken as given.  Either way
    the posterior is added to ``counts[c, w_e, y_e, :]`` and
    ``class_tot[c, :]``.  ``cell[e]`` is ``w_e * K + y_e``.

    The per-answer table offsets are unsigned: numba then skips the
    negative-index wrap-around test on those accesses (~20% of the time).
    Two classes (the most common case) run the same arithmetic in scalars
    (bit-identical results, fewer memory round trips).
    """
    n_classes = class_tot.shape[1]
    nk = np.uint64(n_classes)
    # Flat views: one answer touches the K contiguous cells from cell[e] * K.
    lc = log_conf.reshape(-1)
    q = np.empty(n_classes, dtype=np.float64)
    for i in range(chunks.shape[0]):
        c = chunks[i]
        cnt = counts[c].reshape(-1)
        cnt[:] = 0.0
        ll = 0.0
        # Chunk-local totals: rows of class_tot share cache lines across threads.
        tot = np.zeros(n_classes, dtype=np.float64)
        for t in range(bounds[c], bounds[c + 1]):
            start = task_ptr[t]
            stop = task_ptr[t + 1]
            if not e_step:
                for k in range(n_classes):
                    q[k] = post[t, k]
            elif clamp[t] >= 0:
                g = clamp[t]
                s = log_prior[g]
                for e in range(start, stop):
                    s += lc[np.uint64(cell[e]) * nk + np.uint64(g)]
                ll += s
                for k in range(n_classes):
                    q[k] = 0.0
                q[g] = 1.0
            elif n_classes == 2:
                # The same arithmetic as below, in scalars the compiler keeps in registers.
                a = log_prior[0]
                b = log_prior[1]
                for e in range(start, stop):
                    base = np.uint64(cell[e]) * nk
                    a += lc[base]
                    b += lc[base + np.uint64(1)]
                m = b if b > a else a
                ea = np.exp(a - m)
                eb = np.exp(b - m)
                z = 0.0 + ea + eb
                inv = 1.0 / z
                q[0] = ea * inv
                q[1] = eb * inv
                ll += m + np.log(z)
            else:
                for k in range(n_classes):
                    q[k] = log_prior[k]
                for e in range(start, stop):
                    base = np.uint64(cell[e]) * nk
                    for k in range(n_classes):
                        q[k] += lc[base + np.uint64(k)]
                m = q[0]
                for k in range(1, n_classes):
                    if q[k] > m:
                        m = q[k]
                z = 0.0
                for k in range(n_classes):
                    q[k] = np.exp(q[k] - m)
                    z += q[k]
                inv = 1.0 / z
                for k in range(n_classes):
                    q[k] *= inv
                ll += m + np.log(z)
            for k in range(n_classes):
                post[t, k] = q[k]
                tot[k] += q[k]
            if n_classes == 2:
                q0 = q[0]
                q1 = q[1]
                for e in range(start, stop):
                    base = np.uint64(cell[e]) * nk
                    cnt[base] += q0
                    cnt[base + np.uint64(1)] += q1
            else:
                for e in range(start, stop):
                    base = np.uint64(cell[e]) * nk
                    for k in range(n_classes):
                        cnt[base + np.uint64(k)] += q[k]
        class_tot[c, :] = tot
        loglik[c] = ll


@dataclass
class BlockStats:
    """Statistics of consecutive blocks: counts (n_blocks, W, K_obs, K_true), class_tot (n_blocks, K), loglik (n_blocks,)."""

    counts: np.ndarray
    class_tot: np.ndarray
    loglik: np.ndarray


@njit(cache=True, nogil=True)
def _summary_blocks(blocks, bounds, post, floor, sums, qlogq):  # pragma: no cover - compiled
    """Per block: column sums of its rows of ``post`` and the sum of f log f, f = max(q, floor)."""
    k = post.shape[1]
    for i in range(blocks.shape[0]):
        b = blocks[i]
        h = 0.0
        tot = np.zeros(k)  # block-local: rows of ``sums`` share cache lines across threads
        for t in range(bounds[b], bounds[b + 1]):
            for c in range(k):
                v = post[t, c]
                tot[c] += v
                f = v if v > floor else floor
                h += f * np.log(f)
        sums[b, :] = tot
        qlogq[b] = h


def posterior_summary(post: np.ndarray, bounds: np.ndarray, floor: float) -> tuple[np.ndarray, float]:
    """Column sums of ``post`` (shape (K,)) and the sum of q log q over its entries floored at ``floor``.

    The class totals and the (negative) entropy of an EM loss, over the task
    blocks ``bounds`` (an :class:`EMWorkspace`'s) on the thread pool, added in
    block order (bit-identical for any thread count); no temporary of the
    posteriors' size.
    """
    from ..errors import DataError
    from .validate import as_float_array, check_offsets

    post = as_float_array(post, "post", 2)
    bounds = check_offsets(bounds, post.shape[0], "bounds", "rows of post")
    try:
        floor = float(floor)
    except (TypeError, ValueError):
        raise DataError(f"floor must be a number, got {floor!r}") from None
    return _posterior_summary(post, bounds, floor)


def _posterior_summary(post: np.ndarray, bounds: np.ndarray, floor: float) -> tuple[np.ndarray, float]:
    """:func:`posterior_summary` on an :class:`EMWorkspace`'s own ``post`` and ``bounds``: no check (once per EM
    iteration)."""
    n_blocks = len(bounds) - 1
    sums = np.zeros((n_blocks, post.shape[1]))
    qlogq = np.zeros(n_blocks)
    run_blocks(_summary_blocks, n_blocks, bounds, post, floor, sums, qlogq)
    return block_sum(sums), float(block_sum(qlogq))


def _fill(
    out: BlockStats, e_step: bool, task_ptr: np.ndarray, cell: np.ndarray, bounds: np.ndarray, post: np.ndarray,
    log_prior: np.ndarray, log_conf_ot: np.ndarray, clamp: np.ndarray,
) -> None:
    """Run the fused kernel over every block of ``bounds`` into ``out`` (one slot per block)."""
    run_blocks(
        _em_chunks, len(bounds) - 1, e_step, task_ptr, cell, log_prior, log_conf_ot, clamp, bounds, post,
        out.counts, out.class_tot, out.loglik,
    )


def _check_em_inputs(
    task_ptr: np.ndarray, bounds: Any, post: np.ndarray, log_prior: Any,
    log_conf_ot: Any, clamp: Any, n_workers: int, e_step: bool,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Shapes and ranges the fused kernel indexes by without bounds checks, checked (O(1) and O(n_tasks)).

    A :class:`~crowdagg.errors.DataError` instead of a write outside an
    array.  ``task_ptr`` and the answers' cells are checked once, where
    they are made.
    Returns (post, log_prior, log_conf_ot, clamp, bounds) in the kernel's
    layout (native float64 / int64, contiguous); ``post`` is the caller's
    own array, checked as a buffer the kernel writes.
    """
    from ..errors import DataError
    from .validate import as_code_array, as_float_array, check_offsets, check_out_array

    post = check_out_array(post, "post", 2)
    log_prior = as_float_array(log_prior, "log_prior", 1)
    log_conf_ot = as_float_array(log_conf_ot, "log_conf_ot", 3) if e_step else np.zeros((1, 1, 1))
    clamp = as_code_array(clamp, "clamp")
    n_tasks = len(task_ptr) - 1
    k = post.shape[1] if post.ndim == 2 else -1
    want = {"post": (post, (n_tasks, k)), "log_prior": (log_prior, (k,)),
            "log_conf_ot": (log_conf_ot, (n_workers, k, k) if e_step else np.shape(log_conf_ot)),
            "clamp": (clamp, (n_tasks,))}
    wrong = [f"{name} {np.shape(a)} (needs {shape})" for name, (a, shape) in want.items() if np.shape(a) != shape]
    if k < 1 or wrong:
        raise DataError(f"EM arrays of the wrong shape for {n_tasks:,} tasks, {n_workers:,} workers: {', '.join(wrong)}")
    # Ranges checked on the given dtype, before the cast to int64 could wrap a large unsigned value to -1.
    if n_tasks and (int(clamp.min()) < -1 or int(clamp.max()) >= k):
        raise DataError(f"clamp holds a class outside -1 .. {k - 1}")
    bounds = check_offsets(bounds, n_tasks, "bounds", "tasks")
    return post, log_prior, log_conf_ot, np.ascontiguousarray(clamp, dtype=np.int64), bounds


def _check_memory(n_blocks: int, n_workers: int, k: int, max_memory: Any) -> None:
    """Refuse block accumulators larger than the memory limit up front, with their size."""
    from ..core import memory

    memory.check(max(n_blocks, 1) * em_accumulator_bytes(n_workers, k),
                 f"EM statistics of {max(n_blocks, 1)} block(s) × {n_workers:,} workers × {k}² classes", max_memory)


def _zeros(n_blocks: int, n_workers: int, k: int) -> BlockStats:
    return BlockStats(np.zeros((n_blocks, n_workers, k, k)), np.zeros((n_blocks, k)), np.zeros(n_blocks))


def block_statistics(
    task_ptr: np.ndarray,
    cell: np.ndarray,
    bounds: np.ndarray,
    post: np.ndarray,
    log_prior: np.ndarray,
    log_conf_ot: np.ndarray,
    clamp: np.ndarray,
    n_workers: int,
    *,
    e_step: bool = True,
    max_memory: Any = None,
) -> BlockStats:
    """The EM statistics of the blocks of one partition of the tasks.

    ``task_ptr`` (n_tasks_part + 1,) and ``cell`` (answers of those tasks,
    ``worker * K + label``) describe the partition's tasks, re-based to 0;
    ``bounds`` are its blocks' boundaries in its own task indices;
    ``post`` (n_tasks_part, K) receives the E-step posteriors (or, with
    ``e_step=False``, holds given posteriors whose statistics are taken);
    ``log_prior`` (K,), ``log_conf_ot`` (n_workers, K_obs, K_true) and
    ``clamp`` (n_tasks_part,; -1 = free) are the current parameters.

    Every shape and code the kernel indexes by is checked first
    (:mod:`crowdagg.kernels.validate`): a bad one is a
    :class:`~crowdagg.errors.DataError`, never a write outside an array.
    The accumulators (blocks × ``n_workers`` × K² floats) are checked
    against ``max_memory`` (:func:`crowdagg.core.memory.check`) before they are
    allocated.
    """
    from .validate import check_count, check_index, check_offsets, check_out_array

    n_workers = check_count(n_workers, "n_workers")
    k = check_out_array(post, "post", 2).shape[1]
    cell = check_index(cell, n_workers * k, "cell", "worker-label cell")
    task_ptr = check_offsets(task_ptr, len(cell))
    post, log_prior, log_conf_ot, clamp, bounds = _check_em_inputs(
        task_ptr, bounds, post, log_prior, log_conf_ot, clamp, n_workers, e_step)
    _check_memory(len(bounds) - 1, n_workers, k, max_memory)
    out = _zeros(len(bounds) - 1, n_workers, post.shape[1])
    _fill(out, e_step, task_ptr, cell, bounds, post, log_prior, log_conf_ot, clamp)
    return out


def add_block_statistics(parts: Sequence[BlockStats]) -> tuple[np.ndarray, np.ndarray, float]:
    """(counts (W, K_obs, K_true), class totals (K,), log-likelihood) of all blocks, added in block order.

    ``parts`` are the partitions' statistics in task order; the sums run
    over the block axis of their concatenation, so they do not depend on
    how the blocks were split between partitions.
    """
    if not parts:
        from ..errors import UsageError

        raise UsageError("add_block_statistics needs the statistics of at least one partition")
    if len(parts) == 1:
        counts, tot, ll = parts[0].counts, parts[0].class_tot, parts[0].loglik
    else:
        counts = np.concatenate([p.counts for p in parts])
        tot = np.concatenate([p.class_tot for p in parts])
        ll = np.concatenate([p.loglik for p in parts])
    return block_sum(counts), block_sum(tot), float(block_sum(ll))


class EMWorkspace:
    """The local EM engine: every block on the thread pool, buffers reused across iterations.

    Shapes: ``post`` (n_tasks, K); ``blocks.counts`` (n_blocks, n_workers, K, K) in
    ``[block, worker, observed, true]`` order; ``blocks.class_tot`` (n_blocks, K).
    """

    def __init__(self, task_ptr: np.ndarray, worker: np.ndarray, label: np.ndarray, n_workers: int, n_classes: int):
        from .validate import check_count, check_index, check_offsets

        n_workers, n_classes = check_count(n_workers, "n_workers"), check_count(n_classes, "n_classes")
        # Checked once here (one pass each, against a fit's dozens of E-steps): the kernel trusts them.
        check_index(worker, n_workers, "worker", "worker")
        check_index(label, n_classes, "label", "class")
        if len(worker) != len(label):
            from ..errors import DataError

            raise DataError(f"worker and label arrays differ in length ({len(worker):,}, {len(label):,})")
        self.n_workers = int(n_workers)
        task_ptr = check_offsets(task_ptr, len(worker))
        self.task_ptr = np.ascontiguousarray(task_ptr, dtype=np.int64)
        # Flat (worker, observed) cell of each answer: one load per answer, and
        # cell * K indexes the K contiguous entries of the log-confusion and count tables.
        self.cell = (np.asarray(worker, dtype=np.int64) * n_classes + label).astype(np.int32)
        self.bounds = chunk_bounds(self.task_ptr, n_workers, n_classes)
        self.post = np.zeros((len(self.task_ptr) - 1, n_classes), dtype=np.float64)
        self.blocks = _zeros(len(self.bounds) - 1, n_workers, n_classes)

    def e_step(self, log_prior: np.ndarray, log_conf_ot: np.ndarray, clamp: np.ndarray) -> float:
        """Posteriors into ``self.post``; returns the observed-data log-likelihood.

        ``log_conf_ot`` has shape (n_workers, K, K) indexed ``[w, observed, true]``;
        ``clamp`` (n_tasks,) fixes a task's class (-1: free).  Shapes are checked.
        """
        _, log_prior, log_conf_ot, clamp, _ = _check_em_inputs(
            self.task_ptr, self.bounds, self.post, log_prior, log_conf_ot, clamp, self.n_workers, True)
        return self._e_step(log_prior, log_conf_ot, clamp)

    def _e_step(self, log_prior: np.ndarray, log_conf_ot: np.ndarray, clamp: np.ndarray) -> float:
        """:meth:`e_step` on parameters in the kernel's layout (contiguous float64, int64 ``clamp`` in range).

        No check: the aggregators' EM loops make them of the right shapes and
        check ``clamp`` (gold) once, not once per iteration.
        """
        _fill(self.blocks, True, self.task_ptr, self.cell, self.bounds, self.post, log_prior, log_conf_ot, clamp)
        return float(block_sum(self.blocks.loglik))

    def accumulate(self, post: np.ndarray) -> None:
        """Fill the sufficient statistics from given posteriors (no E-step)."""
        from .validate import as_float_array

        given = as_float_array(post, "post", 2)
        if given.shape != self.post.shape:
            from ..errors import DataError

            raise DataError(f"post has shape {given.shape}, the workspace's tasks × classes are {self.post.shape}")
        self.post[...] = given
        k = self.post.shape[1]
        _fill(self.blocks, False, self.task_ptr, self.cell, self.bounds, self.post, np.zeros(k), np.zeros((1, k, k)),
              np.full(self.post.shape[0], -1, dtype=np.int64))

    def stats(self) -> tuple[np.ndarray, np.ndarray]:
        """Summed statistics: counts (n_workers, K_observed, K_true), class totals (K,)."""
        counts, tot, _ = add_block_statistics([self.blocks])
        return counts, tot
