"""A test engine: the grid of an annotation set cut into P partitions (Parts over contiguous block ranges), each
reduced to its tree cover nodes and combined -- what a distributed engine does, in one process."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from crowdagg.data.annotations import AnnotationSet
from crowdagg.engine import Part, combine, join, reduce_range, task_grid
from crowdagg.engine.tree import ranges


class SplitEngine:
    """``data``'s blocks in ``n_parts`` contiguous ranges, each a :class:`Part` holding COPIES of its answers
    (re-based task offsets, global worker codes), as partitions on other machines would."""

    name = "split"

    def __init__(self, data: AnnotationSet, n_parts: int) -> None:
        bounds = task_grid(data.task_ptr, data.n_workers, data.n_classes)
        self.n_blocks = len(bounds) - 1
        self.parts: list[tuple[int, int, Part]] = []
        for lo, hi in ranges(self.n_blocks, n_parts):
            t0, t1 = int(bounds[lo]), int(bounds[hi])
            a0, a1 = int(data.task_ptr[t0]), int(data.task_ptr[t1])
            part = Part(lo, self.n_blocks, t0, bounds[lo:hi + 1] - t0, data.task_ptr[t0:t1 + 1] - a0,
                        data.worker[a0:a1].copy(), data.label[a0:a1].copy(), data.n_workers, data.n_classes,
                        data.tasks[np.arange(t0, t1)])
            self.parts.append((lo, hi, part))

    def map_reduce(self, fn: Callable[..., tuple[Any, Any]], params: Any = None, *,
                   keep: bool = False) -> tuple[Any, list[Any] | None]:
        nodes: dict = {}
        outs: list[Any] = [None] * self.n_blocks

        for lo, hi, part in self.parts:
            def block(b: int, lo: int = lo, part: Part = part) -> Any:
                sums, out = fn(part, b - lo, params, keep)
                outs[b] = out
                return sums

            nodes.update(reduce_range(lo, hi, self.n_blocks, block))
        return combine(nodes, self.n_blocks), (outs if keep else None)

    def gather(self, outs: list[Any]) -> Any:
        return join(outs)


def simulated_crowd(n_answers: int, n_classes: int = 3, n_workers: int = 120, per_task: int = 5,
                    seed: int = 0) -> tuple[AnnotationSet, np.ndarray]:
    """Tasks of ``per_task`` answers by distinct workers with random confusion matrices: (data, truth)."""
    rng = np.random.default_rng(seed)
    n_tasks = n_answers // per_task
    truth = rng.integers(0, n_classes, n_tasks)
    conf = rng.dirichlet(np.full(n_classes, 0.5), size=(n_workers, n_classes))  # [w, true, observed]
    conf += 2.0 * np.eye(n_classes)
    conf /= conf.sum(axis=2, keepdims=True)
    # per_task consecutive workers from a random first one: distinct within a task
    worker = ((rng.integers(0, n_workers, n_tasks)[:, None] + np.arange(per_task)) % n_workers).ravel()
    task = np.repeat(np.arange(n_tasks), per_task)
    cum = np.cumsum(conf[worker, truth[task]], axis=1)
    label = (rng.random(task.size)[:, None] > cum).sum(axis=1).clip(0, n_classes - 1)
    return AnnotationSet.from_codes(task, worker, label, n_classes=n_classes), truth
