"""Deterministic synthetic crowd shared by the crowdagg and crowd-kit speed benchmarks (numpy only).

* n_tasks = answers // 5, true labels uniform over ``n_classes`` classes;
* n_workers = max(100, answers // 5000) unless given; every task gets 5
  answers from 5 DISTINCT workers drawn uniformly at random;
* one-coin Dawid-Skene workers: accuracy ~ U(0.6, 0.9); a wrong answer is
  uniform over the other classes.
"""

from __future__ import annotations

import numpy as np

ANSWERS_PER_TASK = 5


def make_crowd(n_answers: int, n_classes: int, seed: int, n_workers: int | None = None):
    """Return (task, worker, label, truth, n_tasks, n_workers); int64 arrays, answers grouped by task."""
    rng = np.random.Generator(np.random.PCG64(seed))
    n_tasks = n_answers // ANSWERS_PER_TASK
    n_workers = max(100, n_answers // 5000) if n_workers is None else n_workers
    truth = rng.integers(0, n_classes, size=n_tasks)
    acc = rng.uniform(0.6, 0.9, size=n_workers)
    # 5 distinct workers per task: draw, then redraw rows that contain a repeat.
    workers = rng.integers(0, n_workers, size=(n_tasks, ANSWERS_PER_TASK))
    while True:
        s = np.sort(workers, axis=1)
        bad = np.flatnonzero((s[:, 1:] == s[:, :-1]).any(axis=1))
        if bad.size == 0:
            break
        workers[bad] = rng.integers(0, n_workers, size=(bad.size, ANSWERS_PER_TASK))
    task = np.repeat(np.arange(n_tasks, dtype=np.int64), ANSWERS_PER_TASK)
    worker = workers.reshape(-1).astype(np.int64)
    true_rep = truth[task]
    correct = rng.random(task.size) < acc[worker]
    wrong = (true_rep + rng.integers(1, n_classes, size=task.size)) % n_classes
    label = np.where(correct, true_rep, wrong).astype(np.int64)
    return task, worker, label, truth, n_tasks, n_workers
