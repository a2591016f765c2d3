"""Vote counting and grouping kernels (majority-vote family)."""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def _group_order(keys, n_groups):  # pragma: no cover - compiled
    counts = np.zeros(n_groups + 1, dtype=np.int64)
    for i in range(keys.shape[0]):
        counts[keys[i] + 1] += 1
    for g in range(n_groups):
        counts[g + 1] += counts[g]
    ptr = counts.copy()
    order = np.empty(keys.shape[0], dtype=np.int64)
    for i in range(keys.shape[0]):
        g = keys[i]
        order[counts[g]] = i
        counts[g] += 1
    return order, ptr


def group_order(keys: np.ndarray, n_groups: int) -> tuple[np.ndarray, np.ndarray]:
    """Stable counting sort: (order, ptr) with ``keys[order]`` grouped by key.

    ``ptr`` has shape (n_groups + 1,); group ``g`` is ``order[ptr[g]:ptr[g+1]]``.
    O(n + n_groups).  A key outside ``0 <= key < n_groups`` is a
    :class:`~crowdagg.errors.DataError` (checked in the same kind of pass).
    """
    from .validate import check_index

    return _group_order(check_index(keys, n_groups, "key"), int(n_groups))


def vote_counts(
    task: np.ndarray,
    worker: np.ndarray,
    label: np.ndarray,
    n_tasks: int,
    n_classes: int,
    worker_weight: np.ndarray | None = None,
) -> np.ndarray:
    """(Weighted) votes per task and class, shape (n_tasks, n_classes).

    ``worker_weight`` (shape (n_workers,)) weighs each worker's vote; ``None``
    counts every answer once.  One ``bincount`` over the flat (task, class)
    cell of each answer: O(L).  The codes are checked first
    (:func:`~crowdagg.kernels.validate.check_codes`): a task or label out of
    range would otherwise count in another task's cell.
    """
    from .validate import check_codes

    n_weights = -1 if worker_weight is None else len(worker_weight)
    check_codes(task, worker, label, int(n_tasks), n_weights, int(n_classes))
    cell = task.astype(np.int64) * n_classes + label
    weights = None if worker_weight is None else np.asarray(worker_weight, dtype=np.float64)[worker]
    counts = np.bincount(cell, weights=weights, minlength=n_tasks * n_classes)
    return counts.astype(np.float64, copy=False).reshape(n_tasks, n_classes)
