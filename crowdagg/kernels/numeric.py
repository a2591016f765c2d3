"""Kernels of the numeric methods (:mod:`crowdagg.methods.numeric`): per-task statistics and per-worker losses.

Every kernel streams the answers sorted by task (``task_ptr``: CSR offsets,
``worker`` and ``value`` in task order), in one pass, without a dense
tasks × workers matrix.  A task without answers gets NaN from the per-task
kernels (its value is unknown; the methods say so).

* :func:`task_means`, :func:`task_medians` (exactly ``np.median`` of each
  task's values: the mean of the two middle ones for an even count),
  :func:`task_stds` (sample standard deviation, ``ddof=1``; 0 below two
  answers);
* :func:`weighted_means` -- ``Σ w_m x / Σ w_m`` over each task's answers, the
  plain mean where the weights sum to 0 (every answerer at weight 0);
* :func:`worker_losses` -- each worker's summed squared deviation from the
  task estimates, each divided by a per-task norm (1, or the task's standard
  deviation: CRH's normalised loss), tasks whose norm is 0 left out.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ..core import memory
from ..errors import DataError
from .validate import as_float_array, check_count, check_offsets


@njit(cache=True, nogil=True)
def _mean(value, lo, hi):  # pragma: no cover - compiled
    """The mean of ``value[lo:hi]``, summed in order (NaN when empty): every kernel's plain mean of a task."""
    if hi == lo:
        return np.nan
    s = 0.0
    for i in range(lo, hi):
        s += value[i]
    return s / (hi - lo)


@njit(cache=True, nogil=True)
def _task_means(ptr, value, out):  # pragma: no cover - compiled
    for t in range(ptr.shape[0] - 1):
        out[t] = _mean(value, ptr[t], ptr[t + 1])


#: Up to this many answers a task's median sorts them by insertion in a shared buffer; beyond, with np.sort.
_INSERTION = 32


@njit(cache=True, nogil=True)
def _task_medians(ptr, value, out):  # pragma: no cover - compiled
    buf = np.empty(_INSERTION, dtype=np.float64)
    for t in range(ptr.shape[0] - 1):
        lo, hi = ptr[t], ptr[t + 1]
        n = hi - lo
        if n == 0:
            out[t] = np.nan
            continue
        if n > _INSERTION:  # many answers: numpy's sort (one allocation for this task)
            part = np.sort(value[lo:hi])
            half = n // 2
            out[t] = part[half] if n % 2 else 0.5 * (part[half - 1] + part[half])
            continue
        for i in range(n):  # insertion sort into the buffer: a task's few answers, no allocation per task
            x = value[lo + i]
            j = i
            while j > 0 and buf[j - 1] > x:
                buf[j] = buf[j - 1]
                j -= 1
            buf[j] = x
        half = n // 2
        out[t] = buf[half] if n % 2 else 0.5 * (buf[half - 1] + buf[half])


@njit(cache=True, nogil=True)
def _task_stds(ptr, value, out):  # pragma: no cover - compiled
    for t in range(ptr.shape[0] - 1):
        lo, hi = ptr[t], ptr[t + 1]
        n = hi - lo
        if n < 2:
            out[t] = 0.0
            continue
        mean = _mean(value, lo, hi)
        ss = 0.0
        for i in range(lo, hi):
            ss += (value[i] - mean) ** 2
        out[t] = np.sqrt(ss / (n - 1))


@njit(cache=True, nogil=True)
def _weighted_means(ptr, worker, value, weight, out):  # pragma: no cover - compiled
    for t in range(ptr.shape[0] - 1):
        lo, hi = ptr[t], ptr[t + 1]
        num = 0.0
        den = 0.0
        for i in range(lo, hi):
            w = weight[worker[i]]
            num += w * value[i]
            den += w
        out[t] = num / den if den > 0.0 else _mean(value, lo, hi)  # no weight (or no answer: NaN)


@njit(cache=True, nogil=True)
def _worker_losses(ptr, worker, value, truth, norm, out):  # pragma: no cover - compiled
    out[:] = 0.0
    for t in range(ptr.shape[0] - 1):
        if norm[t] <= 0.0:
            continue
        for i in range(ptr[t], ptr[t + 1]):
            out[worker[i]] += (value[i] - truth[t]) ** 2 / norm[t]


def _checked(ptr: np.ndarray, value: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    value = _finite(value, "value")
    ptr = check_offsets(np.asarray(ptr), len(value))
    return ptr, value


def _finite(values: object, name: str, length: int | None = None, unit: str = "answer") -> np.ndarray:
    """``values`` as a 1-D float64 array of finite numbers (``length`` of them, one per ``unit``, where given).

    The kernels index their per-task and per-worker arrays without bounds
    checks, and a NaN would pass through a sum (or a median's comparisons)
    unseen: both are refused here, as :class:`~crowdagg.errors.DataError`.
    """
    arr = as_float_array(values, name, 1)
    if length is not None and len(arr) != length:
        raise DataError(f"{name} must hold one number per {unit} ({length:,}), got {len(arr):,}")
    bad = np.flatnonzero(~np.isfinite(arr))
    if len(bad):
        raise DataError(f"{name} at position {int(bad[0])} is {float(arr[bad[0]])!r}: the kernels take finite numbers")
    return arr


def _workers(worker: object, n_answers: int, n_workers: int) -> np.ndarray:
    """``worker`` codes checked: one per answer, each ``0 <= code < n_workers``."""
    from .validate import as_code_array, check_index

    arr = as_code_array(worker, "worker")
    if arr.ndim != 1 or len(arr) != n_answers:
        raise DataError(f"worker must hold one code per answer ({n_answers:,}), got shape {arr.shape}")
    return check_index(arr, n_workers, "worker", "worker")


def task_means(ptr: np.ndarray, value: np.ndarray) -> np.ndarray:
    """Each task's mean value, shape (n_tasks,) (NaN for a task without answers)."""
    ptr, value = _checked(ptr, value)
    out = np.empty(len(ptr) - 1)
    _task_means(ptr, value, out)
    return out


def task_medians(ptr: np.ndarray, value: np.ndarray) -> np.ndarray:
    """Each task's median value, shape (n_tasks,): ``np.median`` of its values (NaN without answers)."""
    ptr, value = _checked(ptr, value)
    out = np.empty(len(ptr) - 1)
    _task_medians(ptr, value, out)
    return out


def task_stds(ptr: np.ndarray, value: np.ndarray) -> np.ndarray:
    """Each task's sample standard deviation (``ddof=1``), shape (n_tasks,); 0 below two answers."""
    ptr, value = _checked(ptr, value)
    out = np.empty(len(ptr) - 1)
    _task_stds(ptr, value, out)
    return out


def weighted_means(ptr: np.ndarray, worker: np.ndarray, value: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """``Σ w_worker x / Σ w_worker`` per task, shape (n_tasks,); the plain mean where the weights sum to 0.

    ``weight`` (n_workers,) must be finite and >= 0; ``worker`` codes index it.
    """
    ptr, value = _checked(ptr, value)
    weight = _finite(weight, "weight")
    if len(weight) and weight.min() < 0:
        raise DataError(f"weight at position {int(np.argmin(weight))} is {float(weight.min())!r}: weights are >= 0")
    worker = _workers(worker, len(value), len(weight))
    out = np.empty(len(ptr) - 1)
    _weighted_means(ptr, worker, value, weight, out)
    return out


def worker_losses(ptr: np.ndarray, worker: np.ndarray, value: np.ndarray, truth: np.ndarray, norm: np.ndarray,
                  n_workers: int) -> np.ndarray:
    """``Σ_answers (x - truth_t)² / norm_t`` per worker, shape (n_workers,); tasks with ``norm_t <= 0`` skipped."""
    ptr, value = _checked(ptr, value)
    n_workers = check_count(n_workers, "n_workers")
    memory.check(8.0 * n_workers, f"the losses of {n_workers:,} workers")
    worker = _workers(worker, len(value), n_workers)
    n_tasks = len(ptr) - 1
    truth, norm = (_finite(a, name, n_tasks, "task") for a, name in ((truth, "truth"), (norm, "norm")))
    out = np.empty(n_workers)
    _worker_losses(ptr, worker, value, truth, norm, out)
    return out


__all__ = ["task_means", "task_medians", "task_stds", "weighted_means", "worker_losses"]
