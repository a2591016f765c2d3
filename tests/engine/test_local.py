"""The local engine maps a block function over the grid and reduces along the tree, whatever the thread count."""

from __future__ import annotations

import numpy as np
import pytest

from crowdagg.core import threads
from crowdagg.data.annotations import AnnotationSet
from crowdagg.engine import LocalEngine, Part


def _data(n_tasks: int = 40_000, seed: int = 0) -> AnnotationSet:
    rng = np.random.default_rng(seed)
    task = np.repeat(np.arange(n_tasks), 5)
    worker = rng.integers(0, 50, len(task))
    label = rng.integers(0, 3, len(task))
    return AnnotationSet.from_codes(task, worker, label)


def _weighted_votes(part: Part, b: int, params, keep: bool):
    """Per worker, the sum of its answers' weights (dense sums); per task, its answers' count (kept output)."""
    lo, hi = part.answers_of(b)
    w = part.worker[lo:hi]
    sums = np.bincount(w, weights=params[part.label[lo:hi]], minlength=part.n_workers)
    start, stop = part.tasks_of(b)
    return (sums, float(hi - lo)), (np.diff(part.task_ptr[start:stop + 1]) if keep else None)


def test_sums_and_outputs_match_numpy_and_do_not_depend_on_threads() -> None:
    data = _data()
    engine = LocalEngine(data)
    assert engine.n_blocks == data.n_answers // 65_536 > 1
    weights = np.array([0.1, 1e-9, 1e7])
    results = []
    for n in (1, 2, 3):
        with threads.use_threads(n):
            (per_worker, total), outs = engine.map_reduce(_weighted_votes, weights, keep=True)
        results.append(per_worker)
        assert total == data.n_answers
        assert np.array_equal(engine.gather(outs), data.answers_per_task)
    assert all(np.array_equal(results[0], r) for r in results[1:])
    want = np.bincount(data.worker, weights=weights[data.label], minlength=data.n_workers)
    assert np.allclose(results[0], want, rtol=1e-12)


def test_cell_is_int32_worker_times_k_plus_label() -> None:
    data = _data(100)
    part = LocalEngine(data).part
    assert part.cell.dtype == np.int32
    assert np.array_equal(part.cell, data.worker.astype(np.int64) * 3 + data.label)


def _worker_totals(part, b: int, params, keep: bool):
    """Worker-ordered pass: per worker, the sum of its answers' weights; kept: each answer's leave-one-out share."""
    rows, w, label, _ = part.answers(b)
    return np.bincount(w, weights=params[label], minlength=part.n_workers), (rows if keep else None)


def test_worker_ordered_pass_with_a_heavy_worker_spanning_blocks() -> None:
    rng = np.random.default_rng(3)
    n = 400_000
    task = np.repeat(np.arange(n // 4), 4)
    worker = np.where(rng.random(n) < 0.6, 0, rng.integers(1, 200, n))  # worker 0: 60% of the answers
    label = rng.integers(0, 2, n)
    data = AnnotationSet.from_codes(task, worker, label)
    engine = LocalEngine(data)
    wp = engine.worker_part
    assert wp.n_blocks > 2 and wp.workers_of(0) == (0, 1) and wp.workers_of(1) == (0, 1)  # worker 0 spans blocks
    weights = np.array([0.25, 1e-9])
    got = []
    for t in (1, 2):
        with threads.use_threads(t):
            total, outs = engine.map_reduce(_worker_totals, weights, keep=True, by="worker")
        got.append(total)
        assert np.array_equal(engine.gather(outs), data.worker_order)
    assert np.array_equal(got[0], got[1])
    assert np.allclose(got[0], np.bincount(data.worker, weights=weights[data.label], minlength=data.n_workers))


def test_cell_takes_labels_of_any_integer_dtype() -> None:
    """uint64 labels (a partition read from a file) made numpy refuse the in-place add (float64 into int32)."""
    from crowdagg.kernels.em import EMParams, em_block

    ptr = np.array([0, 2, 3])
    for dtype in (np.uint64, np.int64, np.uint8, np.int16):
        part = Part(0, 1, 0, np.array([0, 2]), ptr, np.array([0, 1, 1], np.int32), np.array([1, 0, 1], dtype), 2, 2)
        assert part.cell.dtype == np.int32 and part.cell.tolist() == [1, 2, 3]
        (counts, tot, _), _ = em_block(part, 0, EMParams())
        assert counts.sum() == 3.0 and tot.tolist() == [0.5, 1.5]


def _fails_at(part: Part, b: int, params, keep: bool):
    """Counts the blocks it runs; raises at block ``params[0]``."""
    params[1].append(b)
    if b == params[0]:
        raise ValueError(f"block {b}")
    return float(b), None


def test_a_block_functions_error_is_raised_from_any_thread_and_every_run_ends_first() -> None:
    """Whichever thread runs the failing block (the calling one or a helper), map_reduce raises its error; the
    engine then runs the next pass whole."""
    data = _data(80_000)
    engine = LocalEngine(data)
    n = engine.n_blocks
    assert n >= 6
    for used in (1, 2, 3):
        for bad in (0, n // 2, n - 1):
            ran: list[int] = []
            with threads.use_threads(used), pytest.raises(ValueError, match=f"block {bad}$"):
                engine.map_reduce(_fails_at, (bad, ran))
            assert bad in ran and len(ran) <= n
        with threads.use_threads(used):
            total, _ = engine.map_reduce(_fails_at, (-1, []))
        assert total == sum(range(n))


def _answers_and_tasks(part, b: int, params, keep: bool):
    lo, hi = part.answers_of(b)
    return float(hi - lo), None


def test_the_fine_grid_has_the_smallest_blocks_and_the_same_answers() -> None:
    from crowdagg.engine import MIN_BLOCK_ANSWERS

    # 3,000 workers × K = 2: the standard grid's blocks hold 16 × 3,000 × 4 = 192,000 answers
    rng = np.random.default_rng(3)
    n = 120_000
    task = np.repeat(np.arange(n), 5)
    data = AnnotationSet.from_codes(task, rng.integers(0, 3000, task.size), rng.integers(0, 2, task.size))
    engine = LocalEngine(data)
    fine = engine.fine()
    assert fine is engine.fine() and fine.fine() is fine
    assert engine.n_blocks == 3 and fine.n_blocks == data.n_answers // MIN_BLOCK_ANSWERS
    assert fine.worker_part.n_blocks == data.n_answers // MIN_BLOCK_ANSWERS
    for e in (engine, fine):
        for by in ("task", "worker"):
            total, _ = e.map_reduce(_answers_and_tasks, by=by)
            assert total == data.n_answers
