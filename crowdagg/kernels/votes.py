"""Vote counting and grouping kernels (majority-vote family).

The block kernels (:func:`_block_votes`, :func:`_block_agreement`) run over
one task-aligned block of the engine's grid (:mod:`crowdagg.engine`): the
tasks ``[t0, t1)`` of a partition, its local ``task_ptr``, and write fresh
arrays -- the block's votes per task (kept with the block) and its dense
per-worker agreement sums (reduced along the engine's tree).  Each task's
answers are added in their order, as ``np.bincount`` adds them, so one
block gives the bits a vote over the whole arrays gave.
"""

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
    from .validate import check_count, check_index

    n_groups = check_count(n_groups, "n_groups")
    return _group_order(check_index(keys, n_groups, "key"), n_groups)


@njit(cache=True, nogil=True)
def _block_votes(task_ptr, worker, label, t0, t1, weight, weighted, k):  # pragma: no cover - compiled
    """Votes per task and class of the tasks ``[t0, t1)``, shape (t1 - t0, k), fresh.

    ``weighted``: each answer adds its worker's ``weight`` (n_workers,);
    otherwise 1.  A task's answers are added in their order (``np.bincount``'s).
    """
    out = np.zeros((t1 - t0, k))
    for t in range(t0, t1):
        row = t - t0
        for e in range(task_ptr[t], task_ptr[t + 1]):
            if weighted:
                out[row, label[e]] += weight[worker[e]]
            else:
                out[row, label[e]] += 1.0
    return out


@njit(cache=True, nogil=True, inline="always")
def _repeated(worker, label, lo, e, t, last):  # pragma: no cover - compiled
    """Whether answer ``e`` of task ``t`` (its answers from ``lo``) repeats an earlier identical answer of its worker
    in the task: found through ``last`` (each worker's last-seen task, set here) without hashing, a scan of the task
    confirming it (rare)."""
    w = worker[e]
    if last[w] == t:
        for m in range(lo, e):
            if worker[m] == w and label[m] == label[e]:
                return True
    last[w] = t
    return False


@njit(cache=True, nogil=True, inline="always")
def _agree_task(task_ptr, worker, label, t, truth, last, right, total, once):  # pragma: no cover - compiled
    """Task ``t``'s answers into ``right`` and ``total`` (per worker): each answer counted, and right when it equals
    ``truth``; ``once``: a repeated identical answer (same worker and label) counts once (:func:`_repeated`)."""
    lo = task_ptr[t]
    hi = task_ptr[t + 1]
    for e in range(lo, hi):
        w = worker[e]
        if once and _repeated(worker, label, lo, e, t, last):
            continue
        total[w] += 1.0
        if label[e] == truth:
            right[w] += 1.0


@njit(cache=True, nogil=True)
def _block_agreement(task_ptr, worker, label, t0, t1, label_of_task, n_workers, once):  # pragma: no cover - compiled
    """Per worker (n_workers,), fresh: answers in tasks ``[t0, t1)`` equal to ``label_of_task[t - t0]``, and answers.

    A task whose ``label_of_task`` is negative (no label to agree with: twothird's tasks below its rule, zbs'
    tied tasks already counted) is left out of both.  ``once``: a repeated identical answer (same task, worker and
    label) counts once (crowd-kit's ``get_accuracy``; :func:`_agree_task`).
    """
    right = np.zeros(n_workers)
    total = np.zeros(n_workers)
    last = np.full(n_workers if once else 0, -1, dtype=np.int64)
    for t in range(t0, t1):
        truth = label_of_task[t - t0]
        if truth >= 0:
            _agree_task(task_ptr, worker, label, t, truth, last, right, total, once)
    return right, total


@njit(cache=True, nogil=True, inline="always")
def _row_argmax(s, k, atol, row, labels, tied, near, n_tied):  # pragma: no cover - compiled
    """``labels[row]`` = the first maximum of ``s[:k]``; a row with another score within ``atol`` of it is tied:
    its index and its near mask are appended (``tied``, ``near``).  Returns the new count of tied rows."""
    j = 0
    m = s[0]
    for c in range(1, k):
        if s[c] > m:
            m = s[c]
            j = c
    labels[row] = j
    floor = m - atol
    count = 0
    for c in range(k):
        if s[c] >= floor:
            count += 1
    if count > 1:
        tied[n_tied] = row
        for c in range(k):
            near[n_tied, c] = s[c] >= floor
        n_tied += 1
    return n_tied


@njit(cache=True, nogil=True)
def _block_argmax(scores, atol):  # pragma: no cover - compiled
    """Row-wise first maximum of ``scores`` (n, k), and the rows with another score within ``atol`` of it:
    ``(labels (n,), tied rows (n_tied,), their near masks (n_tied, k))`` -- ``argmax_random_ties`` before its draws."""
    n, k = scores.shape
    labels = np.empty(n, dtype=np.int64)
    tied = np.empty(n, dtype=np.int64)
    near = np.empty((n, k), dtype=np.bool_)
    n_tied = 0
    for row in range(n):
        n_tied = _row_argmax(scores[row], k, atol, row, labels, tied, near, n_tied)
    return labels, tied[:n_tied], near[:n_tied]


@njit(cache=True, nogil=True)
def _block_vote_labels(task_ptr, worker, label, t0, t1, weight, weighted, k, atol):  # pragma: no cover - compiled
    """:func:`_block_votes` and :func:`_block_argmax` fused, without the votes table: per task of ``[t0, t1)`` its
    votes in a K buffer, then its first maximum and whether it ties (within ``atol``)."""
    n = t1 - t0
    labels = np.empty(n, dtype=np.int64)
    tied = np.empty(n, dtype=np.int64)
    near = np.empty((n, k), dtype=np.bool_)
    s = np.empty(k)
    n_tied = 0
    for t in range(t0, t1):
        for c in range(k):
            s[c] = 0.0
        for e in range(task_ptr[t], task_ptr[t + 1]):
            if weighted:
                s[label[e]] += weight[worker[e]]
            else:
                s[label[e]] += 1.0
        n_tied = _row_argmax(s, k, atol, t - t0, labels, tied, near, n_tied)
    return labels, tied[:n_tied], near[:n_tied]


@njit(cache=True, nogil=True, inline="always")
def _agree_change(task_ptr, worker, label, t, old, new, last, right):  # pragma: no cover - compiled
    """Task ``t``'s label moved from ``old`` (-1: none yet) to ``new``: each worker's agreeing answers (``right``)
    lose those equal to ``old`` and gain those equal to ``new``, a repeated identical answer once (as
    :func:`_agree_task` counts them)."""
    lo = task_ptr[t]
    hi = task_ptr[t + 1]
    for e in range(lo, hi):
        w = worker[e]
        if _repeated(worker, label, lo, e, t, last):
            continue
        if label[e] == new:
            right[w] += 1.0
        elif label[e] == old:
            right[w] -= 1.0


@njit(cache=True, nogil=True)
def _block_revote(task_ptr, worker, label, t0, t1, weight, k, atol, select, old, margin,
                  n_workers):  # pragma: no cover - compiled
    """A weighted vote over the ``select``-ed tasks of ``[t0, t1)`` only (zbs' iteration), and how it moves each
    worker's agreement.

    ``select``, ``old`` (labels, -1: none yet) and ``margin`` are the block's rows (t1 - t0,).  A selected task
    gets its ``weight``-ed votes in a K buffer, its first maximum (:func:`_row_argmax`) and its margin over the
    runner-up (0 when another class is within ``atol``: a tie, drawn by the caller; ``inf`` for one class); a
    new label moves ``right`` (:func:`_agree_change`).  Returns, fresh: ``(labels, margins (t1 - t0,) -- the
    unselected rows as given --, tied rows, their near masks (n_tied, K), right (n_workers,) the change of each
    worker's agreeing answers, changed (labels that moved, ties not counted))``."""
    n = t1 - t0
    labels = old.copy()
    margins = margin.copy()
    tied = np.empty(n, dtype=np.int64)
    near = np.empty((n, k), dtype=np.bool_)
    right = np.zeros(n_workers)
    last = np.full(n_workers, -1, dtype=np.int64)
    s = np.empty(k)
    n_tied = 0
    changed = 0
    for t in range(t0, t1):
        row = t - t0
        if not select[row]:
            continue
        for c in range(k):
            s[c] = 0.0
        lo = task_ptr[t]
        hi = task_ptr[t + 1]
        for e in range(lo, hi):
            # int64 indices: numba's wraparound check on a narrow signed index costs more than the widening
            s[np.int64(label[e])] += weight[np.int64(worker[e])]
        before = n_tied
        n_tied = _row_argmax(s, k, atol, row, labels, tied, near, n_tied)
        if n_tied > before:
            margins[row] = 0.0
            labels[row] = old[row]  # drawn by the caller, which moves the agreement if the draw differs
            continue
        top = s[labels[row]]
        second = -np.inf
        for c in range(k):
            if c != labels[row] and s[c] > second:
                second = s[c]
        margins[row] = top - second
        if labels[row] != old[row]:
            changed += 1
            _agree_change(task_ptr, worker, label, t, old[row], labels[row], last, right)
    return labels, margins, tied[:n_tied], near[:n_tied], right, changed


@njit(cache=True, nogil=True)
def _block_drawn_change(task_ptr, worker, label, t0, rows, old, new, n_workers):  # pragma: no cover - compiled
    """The change of each worker's agreeing answers (n_workers,), fresh, when the tasks ``t0 + rows`` move from
    ``old`` to ``new`` labels (a tie's draw; each (len(rows),)), a repeated identical answer once."""
    right = np.zeros(n_workers)
    last = np.full(n_workers, -1, dtype=np.int64)
    for i in range(rows.shape[0]):
        if new[i] != old[i]:
            _agree_change(task_ptr, worker, label, t0 + rows[i], old[i], new[i], last, right)
    return right


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
    counts every answer once.  A stable counting sort by task, then the
    block kernel over all tasks (each task's answers added in input order,
    as ``np.bincount`` adds them): O(L + n_tasks).  The codes are checked first
    (:func:`~crowdagg.kernels.validate.check_codes`): a task or label out of
    range would otherwise count in another task's cell.
    """
    from .validate import as_code_array, as_float_array, check_codes, check_count

    n_tasks, n_classes = check_count(n_tasks, "n_tasks"), check_count(n_classes, "n_classes")
    weight = None if worker_weight is None else as_float_array(worker_weight, "worker_weight", 1)
    check_codes(task, worker, label, n_tasks, -1 if weight is None else len(weight), n_classes)
    task, worker, label = (as_code_array(a, r) for a, r in ((task, "task"), (worker, "worker"), (label, "label")))
    return _vote_counts(task, worker, label, n_tasks, n_classes, weight)


def _vote_counts(
    task: np.ndarray,
    worker: np.ndarray,
    label: np.ndarray,
    n_tasks: int,
    n_classes: int,
    worker_weight: np.ndarray | None = None,
) -> np.ndarray:
    """:func:`vote_counts` on valid codes: no check.

    The answers are grouped by task (a stable counting sort: each task's
    answers keep their order) and voted by the block kernel over all tasks,
    the kernel every vote-based method runs per block.
    """
    ptr, worker, label = _by_task(task, worker, label, n_tasks)
    weighted = worker_weight is not None
    weight = np.ascontiguousarray(worker_weight, dtype=np.float64) if weighted else np.zeros(0)
    return _block_votes(ptr, worker, label, 0, int(n_tasks), weight, weighted, int(n_classes))


def _by_task(task: np.ndarray, worker: np.ndarray, label: np.ndarray,
             n_tasks: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(task_ptr, worker, label) of answers in any order, grouped by task stably: what the block kernels read."""
    order, ptr = _group_order(np.ascontiguousarray(task, dtype=np.int64), int(n_tasks))
    return ptr, np.ascontiguousarray(worker, dtype=np.int64)[order], np.ascontiguousarray(label, dtype=np.int64)[order]


def worker_agreement(
    task: np.ndarray, worker: np.ndarray, label: np.ndarray, label_of_task: np.ndarray, n_tasks: int, n_workers: int
) -> tuple[np.ndarray, np.ndarray]:
    """Per worker: (answers equal to ``label_of_task`` of their task, answers), shape (n_workers,) each.

    A repeated identical answer (same task, worker and label) counts once, as
    crowd-kit's ``get_accuracy`` drops duplicates.  Answers in any order:
    one counting sort by task, then the block kernel over all tasks
    (:func:`_block_agreement`).  O(L + n_tasks + n_workers).

    The codes are checked first (:func:`~crowdagg.kernels.validate.check_codes`;
    ``label_of_task`` must hold ``n_tasks`` integers): the kernel counts
    into per-worker tables by code, so a code out of range would write
    outside them.
    """
    from ..errors import DataError
    from .validate import as_code_array, check_codes, check_count

    n_tasks, n_workers = check_count(n_tasks, "n_tasks"), check_count(n_workers, "n_workers")
    check_codes(task, worker, label, n_tasks, n_workers)
    label_of_task = as_code_array(label_of_task, "label_of_task")
    if len(label_of_task) != n_tasks:
        raise DataError(f"label_of_task holds {len(label_of_task):,} labels for {n_tasks:,} tasks")
    return _worker_agreement(task, worker, label, label_of_task, n_tasks, n_workers)


def _worker_agreement(
    task: np.ndarray, worker: np.ndarray, label: np.ndarray, label_of_task: np.ndarray, n_tasks: int, n_workers: int
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`worker_agreement` on codes valid by construction (an annotation set's): no check."""
    ptr, worker, label = _by_task(task, worker, label, n_tasks)
    return _block_agreement(ptr, worker, label, 0, int(n_tasks), np.ascontiguousarray(label_of_task, dtype=np.int64),
                            int(n_workers), True)


# --------------------------------------------------------------------------- Bayesian weighted average (bwa)
@njit(cache=True, nogil=True, inline="always")
def _bwa_scores(task_ptr, worker, label, t, precision, mean, lam, shares, out, den):  # pragma: no cover - compiled
    """Task ``t``'s one-vs-rest scores into ``out`` (K,): its vote shares (``shares``), else per class k
    ``(lam mean_k + Σ_answers v[w, k] 1[label = k]) / (lam + Σ_answers v[w, k])``; ``den`` is a K buffer.
    A task without answers gets ``mean`` either way."""
    k = out.shape[0]
    lo = task_ptr[t]
    hi = task_ptr[t + 1]
    if hi == lo:
        for c in range(k):
            out[c] = mean[c]
        return
    if shares:
        for c in range(k):
            out[c] = 0.0
        for e in range(lo, hi):
            out[label[e]] += 1.0
        for c in range(k):
            out[c] /= hi - lo
        return
    for c in range(k):
        out[c] = lam * mean[c]
        den[c] = lam
    for e in range(lo, hi):
        w = worker[e]
        out[label[e]] += precision[w, label[e]]
        for c in range(k):
            den[c] += precision[w, c]
    for c in range(k):
        out[c] /= den[c]


@njit(cache=True, nogil=True)
def _block_bwa(task_ptr, worker, label, t0, t1, n_workers, precision, mean, shares, before, before_mean,
               before_shares, lam, rtol, atol, compare, keep):  # pragma: no cover - compiled
    """One pass of BWA's one-vs-rest updates over the tasks ``[t0, t1)``: the scores of (``precision``, ``mean``)
    and what the next update needs.

    ``precision`` (n_workers, K) and ``mean`` (K,) give the scores z (each task's row, :func:`_bwa_scores`;
    ``shares``: the vote shares instead, ``precision`` unread).  The caller checks the codes and shapes
    (``worker < n_workers``, ``label < K``, ``precision`` and ``before`` (n_workers, K) unless read as shares).  Returns, fresh:

    * ``sq`` (n_workers, K): Σ over each worker's answers of ``(z[t, k] - 1[label = k])²``;
    * ``z_sum`` (K,) and ``n_answered``: the scores summed over the tasks with answers, and their count;
    * ``spread`` (K,): Σ over the tasks with answers of ``n_t z[t, k] (1 - z[t, k])`` (the prior's scale);
    * ``moved`` (K,): when ``compare``, how many tasks with answers have ``|z - z_before| > atol + rtol |z|``,
      ``z_before`` the scores of (``before``, ``before_mean``, ``before_shares``): numpy's
      ``allclose(z_before, z, rtol, atol)`` of a class's column holds exactly when its count is 0;
    * ``rows`` (t1 - t0, K) the scores when ``keep`` (else (0, K)).
    """
    k = mean.shape[0]
    sq = np.zeros((n_workers, k))
    z_sum = np.zeros(k)
    spread = np.zeros(k)
    moved = np.zeros(k)
    rows = np.zeros((t1 - t0 if keep else 0, k))
    z = np.empty(k)
    zb = np.empty(k)
    den = np.empty(k)
    n_answered = 0.0
    for t in range(t0, t1):
        _bwa_scores(task_ptr, worker, label, t, precision, mean, lam, shares, z, den)
        if keep:
            for c in range(k):
                rows[t - t0, c] = z[c]
        lo = task_ptr[t]
        hi = task_ptr[t + 1]
        if hi == lo:
            continue
        n_answered += 1.0
        for c in range(k):
            z_sum[c] += z[c]
            spread[c] += (hi - lo) * z[c] * (1.0 - z[c])
        if compare:
            _bwa_scores(task_ptr, worker, label, t, before, before_mean, lam, before_shares, zb, den)
            for c in range(k):
                if abs(z[c] - zb[c]) > atol + rtol * abs(z[c]):
                    moved[c] += 1.0
        for e in range(lo, hi):
            w = worker[e]
            for c in range(k):
                d = z[c] - (1.0 if label[e] == c else 0.0)
                sq[w, c] += d * d
    return sq, z_sum, n_answered, spread, moved, rows
