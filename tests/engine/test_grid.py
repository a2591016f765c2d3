"""The block grid depends on the data's shape alone, without a cap on the number of blocks."""

from __future__ import annotations

import numpy as np

from crowdagg.core import threads
from crowdagg.engine import grid


def _ptr(sizes) -> np.ndarray:
    return np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)


def test_block_size_follows_workers_times_classes_squared() -> None:
    assert grid.answers_per_block(10, 2) == grid.MIN_BLOCK_ANSWERS
    assert grid.answers_per_block(100_000, 10) == 160_000_000


def test_small_data_is_one_block_and_large_data_has_no_cap() -> None:
    assert len(grid.task_grid(_ptr(np.full(1000, 5)), 50, 2)) == 2
    # 100M answers, 500 workers, K=2: 1,525 blocks (the old grid stopped at 16)
    ptr = np.linspace(0, 100_000_000, 10_000_001).astype(np.int64)
    bounds = grid.task_grid(ptr, 500, 2)
    assert len(bounds) - 1 == 100_000_000 // 65_536
    sizes = np.diff(ptr[bounds])
    assert sizes.min() >= 65_536 - 10 and sizes.max() <= 65_536 * 1.01


def test_grid_ignores_the_thread_count() -> None:
    ptr = _ptr(np.random.default_rng(0).integers(1, 9, 200_000))
    with threads.use_threads(1):
        one = grid.task_grid(ptr, 30, 3)
    with threads.use_threads(2):
        two = grid.task_grid(ptr, 30, 3)
    assert np.array_equal(one, two) and len(one) > 2


def test_worker_grid_lets_a_heavy_worker_span_blocks() -> None:
    sizes = [10] * 1000 + [500_000] + [10] * 1000  # one worker with most answers
    ptr = _ptr(sizes)
    bounds = grid.worker_grid(ptr, 2)
    assert bounds[0] == 0 and bounds[-1] == ptr[-1] and np.all(np.diff(bounds) > 0)
    inside = [b for b in bounds[1:-1] if b not in set(ptr.tolist())]
    assert inside, "the heavy worker is cut inside"
    # every other cut falls on a worker boundary
    heavy = (ptr[1000], ptr[1001])
    assert all(heavy[0] < b < heavy[1] for b in inside)
