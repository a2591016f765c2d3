r"""Agreement-statistic kernels: per-group class counts, and the posterior of a given label per task.

Both run once over the answers in CSR form -- a group ``g`` (a task, or a
worker) owns the answers ``order[ptr[g]:ptr[g+1]]`` (``order`` the
identity for tasks, :attr:`~crowdagg.data.annotations.AnnotationSet.worker_order`
for workers) -- with one scratch row of ``K`` counts or logs, reset by the
classes a group touched, not by ``K``: O(answers + groups + K) time and
memory whatever the number of classes, where a dense (groups, K) table of
counts (:func:`crowdagg.kernels.votes._block_votes`) is groups × K floats.

* :func:`group_counts` -- per group its answers ``m``, the sum of its
  squared class counts ``Σ_c n_c²`` and the entropy of its answers'
  distribution, nats; per class the answers, and those on groups of two or
  more answers.  Krippendorff's alpha and Fleiss' kappa need nothing else
  (:mod:`crowdagg.reports.agreement`).
* :func:`label_posterior` -- per task, the share of its answers equal to
  a given label and the posterior of that label under one-coin workers
  (``skill`` right, the rest spread evenly over the other ``K - 1``
  classes) and a uniform prior: crowd-kit's ``consistency``.
* :func:`one_coin_entropy` -- per group, the entropy of the sum of its
  answers' one-coin distributions: crowd-kit's ``uncertainty`` given
  worker skills.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ..core import memory
from ..errors import DataError
from .validate import as_float_array, check_count, check_index, check_offsets


@njit(cache=True, nogil=True)
def _group_counts(ptr, order, label, k, use_order):  # pragma: no cover - compiled
    n = ptr.shape[0] - 1
    size = np.zeros(n, dtype=np.int64)
    squares = np.zeros(n, dtype=np.int64)
    entropy = np.zeros(n)
    totals = np.zeros(k, dtype=np.int64)
    pairable = np.zeros(k, dtype=np.int64)
    count = np.zeros(k, dtype=np.int64)
    touched = np.empty(k, dtype=np.int64)
    for g in range(n):
        lo = ptr[g]
        hi = ptr[g + 1]
        n_touched = 0
        for p in range(lo, hi):
            c = label[order[p]] if use_order else label[p]
            if count[c] == 0:
                touched[n_touched] = c
                n_touched += 1
            count[c] += 1
        m = hi - lo
        s = 0
        h = 0.0
        for j in range(n_touched):
            c = touched[j]
            x = count[c]
            s += x * x
            q = x / m
            h -= q * np.log(q)
            totals[c] += x
            if m >= 2:
                pairable[c] += x
            count[c] = 0
        size[g] = m
        squares[g] = s
        entropy[g] = h if m > 0 else np.nan
    return size, squares, entropy, totals, pairable


#: Bytes of scratch per class in a kernel: group_counts' four int64 rows (the most of the three kernels).
CLASS_SCRATCH_BYTES = 32


def _check_classes(n_classes: int) -> int:
    """``n_classes`` as an int, its scratch rows refused up front with their size (numba's allocation of them
    would fail with a bare MemoryError)."""
    k = check_count(n_classes, "n_classes")
    memory.check(CLASS_SCRATCH_BYTES * k, f"{k:,} classes × {CLASS_SCRATCH_BYTES} B of scratch",
                 advice="n_classes is the number of distinct labels: give the labels as codes in [0, n_classes)")
    return k


def _check_order(order: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """``order`` checked as a position → answer map over ``labels``: the kernels read it at every position."""
    o = check_index(order, labels.shape[0], "order", "answer")
    if o.shape != labels.shape:  # a shorter one would be read past its end
        raise DataError(f"order has {o.shape[0]:,} positions for {labels.shape[0]:,} answers")
    return o


def group_counts(ptr: np.ndarray, label: np.ndarray, n_classes: int,
                 order: np.ndarray | None = None) -> tuple[np.ndarray, ...]:
    """Class-count statistics of each group of answers.

    Parameters
    ----------
    ptr : ndarray of int, shape (n_groups + 1,)
        CSR offsets: group ``g`` owns positions ``ptr[g]:ptr[g+1]``.
    label : ndarray of int, shape (n_answers,)
        Class index of each answer, in ``[0, n_classes)``.
    n_classes : int
    order : ndarray of int64, shape (n_answers,), optional
        The answer at each position (default: the identity -- answers sorted by group, as tasks are).

    Returns
    -------
    size : ndarray of int64, shape (n_groups,)
        Answers of each group.
    squares : ndarray of int64, shape (n_groups,)
        ``Σ_c n_gc²``, its class counts squared.
    entropy : ndarray of float64, shape (n_groups,)
        ``−Σ_c (n_gc/m) ln(n_gc/m)``, nats (NaN for a group without answers).
    totals : ndarray of int64, shape (n_classes,)
        Answers in each class.
    pairable : ndarray of int64, shape (n_classes,)
        Answers in each class on groups of two answers or more.
    """
    k = _check_classes(n_classes)
    labels = check_index(label, k, "label", "class")
    offsets = check_offsets(ptr, labels.shape[0])
    if order is None:
        return _group_counts(offsets, np.zeros(0, dtype=np.int64), labels, k, False)
    o = _check_order(order, labels)
    return _group_counts(offsets, o.astype(np.int64, copy=False), labels, k, True)


@njit(cache=True, nogil=True)
def _class_marks(k):  # pragma: no cover - compiled
    """The scratch of the one-coin kernels: the classes a group touched (in the order met), and whether each is."""
    return np.empty(k, dtype=np.int64), np.zeros(k, dtype=np.bool_)


@njit(cache=True, nogil=True)
def _label_posterior(task_ptr, worker, label, given, skill, k):  # pragma: no cover - compiled
    n = task_ptr.shape[0] - 1
    share = np.full(n, np.nan)
    posterior = np.full(n, np.nan)
    zeros = np.zeros(k, dtype=np.int64)
    logs = np.zeros(k)
    touched, hit = _class_marks(k)
    for t in range(n):
        if task_ptr[t + 1] > task_ptr[t]:
            share[t], posterior[t] = _task_posterior(task_ptr[t], task_ptr[t + 1], worker, label, given[t], skill, k,
                                                     zeros, logs, touched, hit)
    return share, posterior


@njit(cache=True, nogil=True, inline="always")
def _task_posterior(lo, hi, worker, label, a, skill, k, zeros, logs, touched, hit):  # pragma: no cover - compiled
    """One task's (answers ``lo:hi``) share of answers equal to ``a`` and the posterior of ``a``; the scratch rows
    (``zeros``, ``logs``: per class, the factors of exactly 0 and the log of the others) left as found."""
    base_zeros = 0
    base_log = 0.0
    n_touched = 0
    agree = 0
    for e in range(lo, hi):
        s = skill[worker[e]]
        other = (1.0 - s) / (k - 1) if k > 1 else 0.0
        c = label[e]
        if c == a:
            agree += 1
        if not hit[c]:
            hit[c] = True
            touched[n_touched] = c
            n_touched += 1
        # every class gets the answer's "other" factor; its own class trades it for the skill
        if other > 0.0:
            base_log += np.log(other)
            logs[c] -= np.log(other)
        else:
            base_zeros += 1
            zeros[c] -= 1
        if s > 0.0:
            logs[c] += np.log(s)
        else:
            zeros[c] += 1
    # the largest log-probability among the classes of non-zero probability, then the sum relative to it
    top = -np.inf
    for j in range(n_touched):
        c = touched[j]
        if base_zeros + zeros[c] == 0 and base_log + logs[c] > top:
            top = base_log + logs[c]
    n_rest = k - n_touched  # classes nobody answered: the base factor alone
    if base_zeros == 0 and n_rest > 0 and base_log > top:
        top = base_log
    if top == -np.inf:
        posterior = 0.0  # every class impossible (crowd-kit's zero denominator): 0, as crowd-kit gives
    else:
        total = n_rest * np.exp(base_log - top) if base_zeros == 0 else 0.0
        mine = 0.0
        for j in range(n_touched):
            c = touched[j]
            if base_zeros + zeros[c] == 0:
                v = np.exp(base_log + logs[c] - top)
                total += v
                if c == a:
                    mine = v
        if not hit[a] and base_zeros == 0:
            mine = np.exp(base_log - top)
        posterior = mine / total
    for j in range(n_touched):
        c = touched[j]
        zeros[c] = 0
        logs[c] = 0.0
        hit[c] = False
    return agree / (hi - lo), posterior


def _check_skill(skill: np.ndarray) -> np.ndarray:
    """``skill`` as a 1-D float64 array of probabilities, or a DataError naming the first worker outside [0, 1]."""
    skills = as_float_array(skill, "skill", 1)
    outside = np.flatnonzero(~((skills >= 0.0) & (skills <= 1.0)))  # NaN too: a log of it would be every posterior
    if outside.size:
        raise DataError(f"skill must be a probability in [0, 1]; worker {int(outside[0])} has {float(skills[outside[0]])}")
    return skills


def label_posterior(task_ptr: np.ndarray, worker: np.ndarray, label: np.ndarray, given: np.ndarray,
                    skill: np.ndarray, n_classes: int) -> tuple[np.ndarray, np.ndarray]:
    """Per task: the share of its answers equal to ``given``, and the posterior of ``given`` under one-coin workers.

    A worker of skill ``s`` answers the true class with probability ``s`` and
    each other class with ``(1 − s)/(K − 1)``; with a uniform prior the
    posterior of class ``a`` is ``Π_e P(answer_e | a) / Σ_c Π_e P(answer_e | c)``,
    computed in logs (crowd-kit multiplies the probabilities, which
    underflows to 0/0 past a few hundred answers on a task).  A factor of
    exactly 0 (a skill of 0 or 1) is counted apart, not logged; a task on
    which every class has probability 0 gets 0, as crowd-kit gives it.

    Parameters
    ----------
    task_ptr : ndarray of int, shape (n_tasks + 1,)
    worker, label : ndarray of int, shape (n_answers,)
        Answers sorted by task.
    given : ndarray of int, shape (n_tasks,)
        A class per task.
    skill : ndarray of float, shape (n_workers,)
        Each worker's probability of a right answer, in [0, 1].
    n_classes : int

    Returns
    -------
    share, posterior : ndarray of float64, shape (n_tasks,) each
        NaN for a task without answers.
    """
    k = _check_classes(n_classes)
    skills = _check_skill(skill)
    labels = check_index(label, k, "label", "class")
    offsets = check_offsets(task_ptr, labels.shape[0])
    workers = check_index(worker, skills.shape[0], "worker", "worker")
    chosen = check_index(given, k, "given", "class")
    if workers.shape != labels.shape or chosen.shape[0] != offsets.shape[0] - 1:
        raise DataError(f"{workers.shape[0]:,} workers and {labels.shape[0]:,} labels for the answers, "
                        f"{chosen.shape[0]:,} given labels for {offsets.shape[0] - 1:,} tasks")
    return _label_posterior(offsets, workers, labels, chosen.astype(np.int64, copy=False), skills, k)



@njit(cache=True, nogil=True)
def _one_coin_entropy(ptr, order, worker, label, skill, k, use_order):  # pragma: no cover - compiled
    n = ptr.shape[0] - 1
    entropy = np.full(n, np.nan)
    mass = np.zeros(k)
    touched, hit = _class_marks(k)
    for g in range(n):
        if ptr[g + 1] > ptr[g]:
            entropy[g] = _group_entropy(ptr[g], ptr[g + 1], order, worker, label, skill, k, use_order, mass, touched,
                                        hit)
    return entropy


@njit(cache=True, nogil=True, inline="always")
def _group_entropy(lo, hi, order, worker, label, skill, k, use_order, mass, touched, hit):  # pragma: no cover
    """The entropy of one group's (positions ``lo:hi``) sum of one-coin distributions, NaN where it sums to 0;
    the scratch row ``mass`` (per class, what its answers add beyond the others' share) left as found."""
    base = 0.0  # what every class gets: each answer's "other" share
    n_touched = 0
    for p in range(lo, hi):
        e = order[p] if use_order else p
        s = skill[worker[e]]
        other = (1.0 - s) / (k - 1) if k > 1 else 0.0
        c = label[e]
        base += other
        mass[c] += s - other  # its own class trades the "other" share for the skill
        if not hit[c]:
            hit[c] = True
            touched[n_touched] = c
            n_touched += 1
    total = k * base
    for j in range(n_touched):
        total += mass[touched[j]]
    h = 0.0
    for j in range(n_touched):
        c = touched[j]
        if total > 0.0:
            q = (base + mass[c]) / total
            if q > 0.0:
                h -= q * np.log(q)
        mass[c] = 0.0
        hit[c] = False
    if total <= 0.0:
        return np.nan
    q = base / total
    if n_touched < k and q > 0.0:
        h -= (k - n_touched) * q * np.log(q)
    return h


def one_coin_entropy(ptr: np.ndarray, worker: np.ndarray, label: np.ndarray, skill: np.ndarray, n_classes: int,
                     order: np.ndarray | None = None) -> np.ndarray:
    """Per group, the entropy (nats) of the sum of its answers' one-coin label distributions (crowd-kit's
    ``uncertainty`` with worker skills).

    An answer ``c`` of a worker of skill ``s`` puts ``s`` on ``c`` and
    ``(1 − s)/(K − 1)`` on each other class; a group's distribution is the
    normalised sum over its answers.  With every skill 1 it is the
    distribution of the group's answers (:func:`group_counts`' entropy).

    Parameters
    ----------
    ptr : ndarray of int, shape (n_groups + 1,)
        CSR offsets: group ``g`` owns positions ``ptr[g]:ptr[g+1]``.
    worker, label : ndarray of int, shape (n_answers,)
        Each answer's worker and class.
    skill : ndarray of float, shape (n_workers,)
        Each worker's probability of a right answer, in [0, 1].
    n_classes : int
    order : ndarray of int64, shape (n_answers,), optional
        The answer at each position (default: the identity).

    Returns
    -------
    ndarray of float64, shape (n_groups,)
        NaN for a group without answers (or whose distribution sums to 0: one class, skills 0).
    """
    k = _check_classes(n_classes)
    skills = _check_skill(skill)  # a 2-D one would fail numba's typing, a NaN one would be every entropy
    labels = check_index(label, k, "label", "class")
    workers = check_index(worker, skills.shape[0], "worker", "worker")
    offsets = check_offsets(ptr, labels.shape[0])
    if workers.shape != labels.shape:
        raise DataError(f"{workers.shape[0]:,} workers for {labels.shape[0]:,} labels of the answers")
    if order is None:
        return _one_coin_entropy(offsets, np.zeros(0, dtype=np.int64), workers, labels, skills, k, False)
    o = _check_order(order, labels)
    return _one_coin_entropy(offsets, o.astype(np.int64, copy=False), workers, labels, skills, k, True)


__all__ = ["group_counts", "label_posterior", "one_coin_entropy"]
