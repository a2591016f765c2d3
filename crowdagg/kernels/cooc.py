"""Co-occurrence statistics of worker pairs: the sparse pair index and per-pair K×K joint counts, on the block protocol.

The moment methods and the agreement statistics all start from the same
second-order statistics of the pairs of workers who labelled a task in
common (ALGORITHMS.md §4.1, §5.1, §7.1–7.3):

* the **pair index** -- every co-labelled pair ``(w1, w2)``, ``w1 < w2``,
  once, sorted by ``(w1, w2)`` (key ``w1 · n_workers + w2``).  Only 4–35%
  of the worker pairs share a task on real crowds (trec: 12,861 of
  290,041), so the pairs are indexed sparsely, never as a workers ×
  workers matrix;
* the **joint counts** ``joint[p, a, b]`` -- over the tasks both workers
  of pair ``p`` answered, the number of (answer of w1 = a, answer of
  w2 = b): R̂_{w1 w2} = joint[p] / n_tasks[p] is the empirical joint
  distribution of coupled CPD and MultiSPA, trace(joint[p]) / n_tasks[p]
  the agreement rate of M-MSR, R̂ − μ̂ μ̂ᵀ the cross-covariance of the
  spammer detector;
* the **task counts** ``n_tasks[p]`` -- how many tasks the pair shares
  (N_{mm'}: the normaliser, and the validity mask of a pair);
* optionally **per-task weights** ``w_t`` (float): every answer pair of
  task t counts ``w_t`` instead of 1, and ``weight[p] = Σ w_t`` over the
  pair's shared tasks.  The moment methods need this for their weighted
  and conditional moments: a third-order slice T̂_{m m' m''}[:, :, c] is
  the joint of (m, m') over the tasks where m'' answered c (weights
  1[m'' answered c]), a class-conditional joint Σ_t q_t(k) e e^T weighs
  by a posterior, and agreement coefficients weigh a task's pairs by
  1 / (answers − 1) (Krippendorff's coincidences).  Unweighted counts are
  int64 (exact); weighted sums float64.

**Repeated answers.** A worker who answered a task more than once (the
annotation set's ``duplicates="keep"``) keeps every answer: each answer
pair of two *different* workers counts, so on that task ``joint[p]``
gains ``c1 · c2`` (answers of w1 × answers of w2) while ``n_tasks[p]``
gains 1.  A worker is never paired with itself.  Use ``duplicates="first"``
or ``"last"`` when reading to count one answer per worker and task.

**Passes.** Both run over the task grid through any engine's
``map_reduce`` (the local engine, the Dask engine: the block functions are
module-level, their sums picklable):

1. a bound pass (:func:`bound_block`): answer pairs per block, so that
   what the index and the statistics would hold is refused up front
   (:func:`crowdagg.core.memory.check`) -- a task answered by n workers has
   n(n − 1)/2 pairs;
2. the index pass (:func:`index_block`): each block's sorted unique pair
   keys, a :class:`PairSet` whose ``+`` is a sorted union, reduced along
   the engine's tree -- built once, reused by every statistics pass;
3. the statistics pass (:func:`stats_block`): each block's sparse leaves
   keyed by pair id (:class:`SparseSum`: sorted keys and values, ``+`` a
   sorted merge adding equal keys); absent keys are zeros and ``x + 0 ==
   x`` in floating point, so the tree's total is bit-identical to a dense
   one and for every aligned partitioning.  A block never holds more than
   its own answer pairs: it keys them by pair key, sorts them (a stable
   radix sort: the keys need few bits), adds equal keys in task order, and
   maps its own pairs to ids with one galloping walk of the index -- no
   look-up per answer pair, no dense P × K² per block.  The tree's nodes
   stay sparse (at most min(answer pairs, P·K²) entries); the dense
   (P, K, K) array is built once, from the total.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numba import njit

from ..core import memory
from ..errors import DataError, UsageError, param

_I64 = np.dtype(np.int64)


# ----------------------------------------------------------------------------------------------- kernels


@njit(cache=True, nogil=True)
def _union(a, b):  # pragma: no cover - compiled
    """Sorted union of two sorted unique int64 arrays (counted first: the result is allocated at its size)."""
    i = j = n = 0
    while i < a.shape[0] and j < b.shape[0]:
        if a[i] < b[j]:
            i += 1
        elif b[j] < a[i]:
            j += 1
        else:
            i += 1
            j += 1
        n += 1
    n += a.shape[0] - i + b.shape[0] - j
    out = np.empty(n, dtype=np.int64)
    i = j = k = 0
    while i < a.shape[0] and j < b.shape[0]:
        if a[i] < b[j]:
            out[k] = a[i]
            i += 1
        elif b[j] < a[i]:
            out[k] = b[j]
            j += 1
        else:
            out[k] = a[i]
            i += 1
            j += 1
        k += 1
    while i < a.shape[0]:
        out[k] = a[i]
        i += 1
        k += 1
    while j < b.shape[0]:
        out[k] = b[j]
        j += 1
        k += 1
    return out


@njit(cache=True, nogil=True)
def _merge_add(ka, va, kb, vb):  # pragma: no cover - compiled
    """Sorted merge of two sparse vectors (sorted unique keys, values), adding the values of equal keys as a + b."""
    i = j = n = 0
    while i < ka.shape[0] and j < kb.shape[0]:
        if ka[i] < kb[j]:
            i += 1
        elif kb[j] < ka[i]:
            j += 1
        else:
            i += 1
            j += 1
        n += 1
    n += ka.shape[0] - i + kb.shape[0] - j
    keys = np.empty(n, dtype=np.int64)
    vals = np.empty(n, dtype=va.dtype)
    i = j = k = 0
    while i < ka.shape[0] and j < kb.shape[0]:
        if ka[i] < kb[j]:
            keys[k] = ka[i]
            vals[k] = va[i]
            i += 1
        elif kb[j] < ka[i]:
            keys[k] = kb[j]
            vals[k] = vb[j]
            j += 1
        else:
            keys[k] = ka[i]
            vals[k] = va[i] + vb[j]
            i += 1
            j += 1
        k += 1
    while i < ka.shape[0]:
        keys[k] = ka[i]
        vals[k] = va[i]
        i += 1
        k += 1
    while j < kb.shape[0]:
        keys[k] = kb[j]
        vals[k] = vb[j]
        j += 1
        k += 1
    return keys, vals


@njit(cache=True, nogil=True)
def _runs(worker, lo, hi, order, starts):  # pragma: no cover - compiled
    """Group the answers lo..hi-1 of one task by worker: ``order[:hi-lo]`` the answers sorted by worker (stable:
    a worker's repeated answers keep their order), ``starts[:n+1]`` the boundaries of the ``n`` runs of one
    worker each (returned).  Insertion sort: a task's answers are few, and its pairs cost as much."""
    c = hi - lo
    for i in range(c):
        a = lo + i
        w = worker[a]
        j = i - 1
        while j >= 0 and worker[order[j]] > w:
            order[j + 1] = order[j]
            j -= 1
        order[j + 1] = a
    n = 0
    for i in range(c):
        if i == 0 or worker[order[i]] != worker[order[i - 1]]:
            starts[n] = i
            n += 1
    starts[n] = c
    return n


@njit(cache=True, nogil=True)
def _longest(task_ptr, t0, t1):  # pragma: no cover - compiled
    longest = 0
    for t in range(t0, t1):
        longest = max(longest, task_ptr[t + 1] - task_ptr[t])
    return longest


@njit(cache=True, nogil=True)
def _block_pair_keys(task_ptr, worker, t0, t1, n_workers, capacity):  # pragma: no cover - compiled
    """Sorted unique keys ``w1 · n_workers + w2`` (w1 < w2) of the worker pairs sharing a task in tasks [t0, t1).

    ``capacity`` bounds the answer pairs of the range (Σ c(c−1)/2 over its tasks' answer counts c).
    """
    keys = np.empty(capacity, dtype=np.int64)
    longest = _longest(task_ptr, t0, t1)
    order = np.empty(longest, dtype=np.int64)
    starts = np.empty(longest + 1, dtype=np.int64)
    n = 0
    for t in range(t0, t1):
        runs = _runs(worker, task_ptr[t], task_ptr[t + 1], order, starts)
        for u in range(runs):
            wi = np.int64(worker[order[starts[u]]])
            for v in range(u + 1, runs):
                keys[n] = wi * n_workers + worker[order[starts[v]]]
                n += 1
    keys, _ = _radix_sort(keys[:n], n_workers * n_workers - 1)
    m = 0
    for i in range(n):
        if m == 0 or keys[i] != keys[m - 1]:
            keys[m] = keys[i]
            m += 1
    return keys[:m].copy()


@njit(cache=True, nogil=True)
def _gallop(arr, j, key):  # pragma: no cover - compiled
    """The first position ≥ j of the sorted ``arr`` holding a value ≥ ``key``: doubling steps from j, then bisection
    (cheap when the keys looked up, sorted too, are a sparse subset of ``arr``)."""
    n = arr.shape[0]
    if j >= n or arr[j] >= key:
        return j
    step = 1
    while j + step < n and arr[j + step] < key:
        step *= 2
    lo = j + step // 2 + 1
    hi = min(j + step, n)
    while lo < hi:
        mid = (lo + hi) >> 1
        if arr[mid] < key:
            lo = mid + 1
        else:
            hi = mid
    return lo


@njit(cache=True, nogil=True)
def _to_pair_ids(keys, per_pair, known, ids):  # pragma: no cover - compiled
    """Rewrite sorted keys ``pair_key · per_pair + r`` as ``ids[i] · per_pair + r`` in place, ``i`` the pair key's
    position in the sorted ``known`` keys (``ids`` empty: the position itself, ``known`` being the index).  One
    forward galloping walk, as both are sorted.  Returns the first pair key absent from ``known`` (-1 if none)."""
    j = 0
    for i in range(keys.shape[0]):
        pk = keys[i] // per_pair
        j = _gallop(known, j, pk)
        if j == known.shape[0] or known[j] != pk:
            return pk
        keys[i] = (ids[j] if ids.shape[0] else j) * per_pair + keys[i] % per_pair
    return np.int64(-1)


@njit(cache=True, nogil=True)
def _radix_sort(keys, max_key):  # pragma: no cover - compiled
    """``(sorted keys, order)``: a stable LSD radix sort of non-negative int64 keys ≤ ``max_key``.

    Passes of at most 16 bits (as few as the key range needs), each O(n):
    a block's keys are pair ids × K², far fewer bits than 64, and the order
    is stable, so equal keys keep their emission (task) order.
    """
    n = keys.shape[0]
    bits = 0
    m = max_key
    while m > 0:
        bits += 1
        m >>= 1
    passes = (bits + 15) // 16
    width = (bits + passes - 1) // passes if passes else 0
    mask = (np.int64(1) << width) - 1
    count = np.empty((np.int64(1) << width) + 1, dtype=np.int64)
    k_in = keys.copy()
    o_in = np.arange(n)
    k_out = np.empty(n, dtype=np.int64)
    o_out = np.empty(n, dtype=np.int64)
    shift = 0
    for _ in range(passes):
        count[:] = 0
        for i in range(n):
            count[((k_in[i] >> shift) & mask) + 1] += 1
        for d in range(1, count.shape[0]):
            count[d] += count[d - 1]
        for i in range(n):
            d = (k_in[i] >> shift) & mask
            k_out[count[d]] = k_in[i]
            o_out[count[d]] = o_in[i]
            count[d] += 1
        k_in, k_out = k_out, k_in
        o_in, o_out = o_out, o_in
        shift += width
    return k_in, o_in


@njit(cache=True, nogil=True)
def _run_counts(keys, max_key):  # pragma: no cover - compiled
    """Sorted unique keys (≤ ``max_key``) and how often each occurs (int64)."""
    sk, _ = _radix_sort(keys, max_key)
    n = sk.shape[0]
    out_k = np.empty(n, dtype=np.int64)
    out_v = np.zeros(n, dtype=np.int64)
    m = -1
    for i in range(n):
        if m < 0 or sk[i] != out_k[m]:
            m += 1
            out_k[m] = sk[i]
        out_v[m] += 1
    return out_k[:m + 1].copy(), out_v[:m + 1].copy()


@njit(cache=True, nogil=True)
def _run_sums(keys, vals, max_key):  # pragma: no cover - compiled
    """Sorted unique keys (≤ ``max_key``) and the sums of their values, added in their given (task) order."""
    sk, order = _radix_sort(keys, max_key)
    n = sk.shape[0]
    out_k = np.empty(n, dtype=np.int64)
    out_v = np.zeros(n, dtype=np.float64)
    m = -1
    for i in range(n):
        if m < 0 or sk[i] != out_k[m]:
            m += 1
            out_k[m] = sk[i]
            out_v[m] = vals[order[i]]
        else:
            out_v[m] += vals[order[i]]
    return out_k[:m + 1].copy(), out_v[:m + 1].copy()


@njit(cache=True, nogil=True)
def _block_pair_entries(task_ptr, worker, label, t0, t1, n_workers, n_classes, weights, weighted,
                        capacity):  # pragma: no cover - compiled
    """The answer pairs of tasks [t0, t1) as keyed entries, in task order.

    Returns ``(cell_key, cell_w, pair_key, pair_w)``: one ``cell_key = q ·
    K² + a · K + b`` per answer pair of two different workers (``q = w1 ·
    n_workers + w2`` the pair's key, ``a`` w1's answer, ``b`` w2's), one
    ``pair_key = q`` per pair of different workers per task; ``*_w`` the
    task's weight for each (empty unless ``weighted``).  Keyed by the pair
    key, not its id: no look-up per pair (the block's sorted unique keys
    are mapped to ids afterwards in one walk, :func:`_to_pair_ids`).
    ``q · K² < n_workers² K² ≤ 2⁶²`` (a Part keeps workers × K within int32).
    """
    k2 = np.int64(n_classes) * n_classes
    cell_key = np.empty(capacity, dtype=np.int64)
    pair_key = np.empty(capacity, dtype=np.int64)
    cell_w = np.empty(capacity if weighted else 0, dtype=np.float64)
    pair_w = np.empty(capacity if weighted else 0, dtype=np.float64)
    longest = _longest(task_ptr, t0, t1)
    order = np.empty(longest, dtype=np.int64)
    starts = np.empty(longest + 1, dtype=np.int64)
    nc = 0
    npair = 0
    for t in range(t0, t1):
        runs = _runs(worker, task_ptr[t], task_ptr[t + 1], order, starts)
        wt = weights[t] if weighted else 1.0
        for u in range(runs):  # a worker's repeated answers make a run longer than 1
            key_u = np.int64(worker[order[starts[u]]]) * n_workers
            for v in range(u + 1, runs):
                q = key_u + worker[order[starts[v]]]
                pair_key[npair] = q
                if weighted:
                    pair_w[npair] = wt
                npair += 1
                for x in range(starts[u], starts[u + 1]):
                    base = q * k2 + np.int64(label[order[x]]) * n_classes
                    for y in range(starts[v], starts[v + 1]):
                        cell_key[nc] = base + label[order[y]]
                        if weighted:
                            cell_w[nc] = wt
                        nc += 1
    nc_w = nc if weighted else 0
    np_w = npair if weighted else 0
    return cell_key[:nc], cell_w[:nc_w], pair_key[:npair], pair_w[:np_w]


# ------------------------------------------------------------------------------------ sums of the tree


@dataclass(eq=False)
class PairSet:
    """A sorted set of pair keys; ``a + b`` is the sorted union (a sum of the reduction tree).

    Attributes
    ----------
    keys : ndarray of int64, shape (n,)
        Sorted, unique: ``w1 · n_workers + w2`` with ``w1 < w2``.
    """

    keys: np.ndarray

    def __add__(self, other: PairSet) -> PairSet:
        return PairSet(_union(self.keys, other.keys))


@dataclass(eq=False)
class SparseSum:
    """A sparse vector: sorted unique int64 ``keys`` and their ``values``; absent keys are zeros.

    ``a + b`` is a sorted merge adding the values of equal keys (``a``'s
    value first), so the tree's total equals, bit for bit, the sum of the
    dense vectors (``x + 0 == x``).
    """

    keys: np.ndarray
    values: np.ndarray

    def __add__(self, other: SparseSum) -> SparseSum:
        return SparseSum(*_merge_add(self.keys, self.values, other.keys, other.values))

    def dense(self, size: int) -> np.ndarray:
        """The vector as a dense array of ``size`` entries."""
        out = np.zeros(size, dtype=self.values.dtype)
        out[self.keys] = self.values
        return out


@dataclass(frozen=True)
class PairBound:
    """What the bound pass adds up: the answers' sizes and the answer pairs (an upper bound on pairs).

    ``a + b`` adds the counts and keeps the largest block's answer pairs.
    """

    n_tasks: int
    answer_pairs: int  # Σ over tasks of c(c−1)/2, c = the task's answers: bounds the pairs anything holds
    largest_block: int  # the most answer pairs in one block
    n_workers: int
    n_classes: int

    def __add__(self, other: PairBound) -> PairBound:
        return PairBound(self.n_tasks + other.n_tasks, self.answer_pairs + other.answer_pairs,
                         max(self.largest_block, other.largest_block),
                         max(self.n_workers, other.n_workers), max(self.n_classes, other.n_classes))


@dataclass(frozen=True)
class StatsParams:
    """The statistics pass's broadcast parameters: the pair index's keys, the per-task weights (or None)."""

    index: np.ndarray
    weights: np.ndarray | None = None
    n_workers: int | None = None  # the index's data: a block of other data is refused (its keys differ)
    n_classes: int | None = None


# ---------------------------------------------------------------------------------- block functions


def _block(part: Any, b: int) -> int:
    """``b`` once the partition is checked (:func:`~crowdagg.kernels.validate.check_part`, once per partition):
    the kernels then key and index nothing outside their arrays."""
    from .validate import check_block, check_part

    check_part(part)
    return check_block(part, b)


def _answer_pairs(part: Any, b: int) -> int:
    start, stop = part.tasks_of(b)
    c = np.diff(part.task_ptr[start:stop + 1])
    return int((c * (c - 1) // 2).sum())


def bound_block(part: Any, b: int, params: Any, keep: bool) -> tuple[PairBound, None]:
    """Block function of the bound pass: the block's tasks and answer pairs (no answer is read)."""
    b = _block(part, b)
    start, stop = part.tasks_of(b)
    pairs = _answer_pairs(part, b)
    return PairBound(stop - start, pairs, pairs, int(part.n_workers), int(part.n_classes)), None


def index_block(part: Any, b: int, params: Any, keep: bool) -> tuple[PairSet, None]:
    """Block function of the index pass: the sorted unique keys of the block's co-labelled worker pairs."""
    b = _block(part, b)
    start, stop = part.tasks_of(b)
    keys = _block_pair_keys(part.task_ptr, part.worker, start, stop, np.int64(part.n_workers),
                            _answer_pairs(part, b))
    return PairSet(keys), None


def stats_block(part: Any, b: int, params: StatsParams, keep: bool) -> tuple[tuple[SparseSum, ...], None]:
    """Block function of the statistics pass: sparse joint counts and task counts (and weights) by pair id.

    Sums: ``(joint, n_tasks)`` -- or ``(joint, n_tasks, weight)`` when
    ``params.weights`` is given -- each a :class:`SparseSum`; ``joint``
    keyed ``p · K² + a · K + b``, the others by pair id ``p``.
    """
    b = _block(part, b)
    for name in ("n_workers", "n_classes"):
        given = getattr(params, name)
        if given is not None and given != getattr(part, name):
            raise DataError(f"the pair index was built from data of {given:,} {name[2:]}, this has "
                            f"{getattr(part, name):,}: build it on the same engine")
    start, stop = part.tasks_of(b)
    weighted = params.weights is not None
    weights = np.empty(0, dtype=np.float64)
    if params.weights is not None:
        if part.first_task + part.n_tasks > len(params.weights):
            raise DataError(f"{len(params.weights):,} task weights for a partition reaching task "
                            f"{part.first_task + part.n_tasks:,}")
        weights = part.task_rows(params.weights)
    n_workers, k = int(part.n_workers), int(part.n_classes)
    cell_key, cell_w, pair_key, pair_w = _block_pair_entries(
        part.task_ptr, part.worker, part.label, start, stop, np.int64(n_workers), np.int64(k), weights, weighted,
        _answer_pairs(part, b))
    top_pair = max(n_workers * n_workers - 1, 0)
    joint = _run_sums(cell_key, cell_w, top_pair * k * k + k * k - 1) if weighted \
        else _run_counts(cell_key, top_pair * k * k + k * k - 1)
    shared = _run_counts(pair_key, top_pair)
    sums = [joint, shared] + ([_run_sums(pair_key, pair_w, top_pair)] if weighted else [])
    block_pairs = shared[0].copy()  # the block's pairs, sorted: ids looked up in the index once each
    missing = _to_pair_ids(shared[0], np.int64(1), params.index, np.empty(0, dtype=np.int64))
    if missing >= 0:
        w1, w2 = divmod(int(missing), n_workers)
        raise DataError(f"the pair index does not hold workers ({w1}, {w2}), who share a task: "
                        "it was built from other data")
    for (keys, _), per_pair in zip(sums, [k * k, 1, 1]):
        if keys is not shared[0]:  # the other sums' pairs are the block's pairs: a walk of those, not the index
            _to_pair_ids(keys, np.int64(per_pair), block_pairs, shared[0])
    return tuple(SparseSum(keys, values) for keys, values in sums), None


# ------------------------------------------------------------------------------------------- public API


@dataclass(frozen=True)
class PairIndex:
    """The co-labelled worker pairs of a data set, built once by :func:`pair_index`.

    Attributes
    ----------
    keys : ndarray of int64, shape (P,)
        Sorted: ``w1 · n_workers + w2`` for each pair ``w1 < w2`` sharing at least one task.
    n_workers, n_classes, n_tasks : int
        The data's sizes.
    answer_pairs, largest_block : int
        Σ c(c−1)/2 over the tasks' answer counts c, over all blocks and in the largest block.
    """

    keys: np.ndarray
    n_workers: int
    n_classes: int
    n_tasks: int
    answer_pairs: int
    largest_block: int

    @property
    def n_pairs(self) -> int:
        return int(self.keys.shape[0])

    @property
    def pairs(self) -> np.ndarray:
        """The pairs as worker codes, shape (P, 2), int32: ``pairs[p] = (w1, w2)``, ``w1 < w2``."""
        out = np.empty((self.n_pairs, 2), dtype=np.int32)
        w = max(self.n_workers, 1)
        out[:, 0] = self.keys // w
        out[:, 1] = self.keys % w
        return out


@dataclass(frozen=True)
class CoOccurrence:
    """Second-order statistics of the co-labelled worker pairs (see the module notes for the definitions).

    Attributes
    ----------
    pairs : ndarray of int32, shape (P, 2)
        Worker codes ``(w1, w2)``, ``w1 < w2``, sorted by (w1, w2): every pair sharing a task, once.
    joint : ndarray of int64 (unweighted) or float64 (weighted), shape (P, K, K)
        ``joint[p, a, b]``: over the tasks both answered, the answer pairs with w1's answer ``a`` and
        w2's answer ``b`` (each counting the task's weight when weighted).
    n_tasks : ndarray of int64, shape (P,)
        The tasks each pair shares (≥ 1).
    weight : ndarray of float64, shape (P,), or None
        Σ of the shared tasks' weights (None when unweighted).
    n_workers, n_classes : int
    """

    pairs: np.ndarray
    joint: np.ndarray
    n_tasks: np.ndarray
    weight: np.ndarray | None
    n_workers: int
    n_classes: int

    @property
    def n_pairs(self) -> int:
        return int(self.pairs.shape[0])


def _bound(engine: Any) -> PairBound:
    total, _ = engine.map_reduce(bound_block, None)
    return total


def pair_index(engine: Any, *, max_memory: memory.MaxMemory = None) -> PairIndex:
    """The sparse index of co-labelled worker pairs, built by one ``map_reduce`` pass over ``engine``'s grid.

    Parameters
    ----------
    engine : object with ``map_reduce(fn, params)``
        The local engine (:class:`crowdagg.engine.LocalEngine`) or the Dask engine.
    max_memory : int, float, str or None
        The memory limit (default 80% of the available memory).

    Returns
    -------
    PairIndex

    Raises
    ------
    ResourceError
        When the pairs a block or the index would hold exceed ``max_memory``: a task answered by
        n workers has n(n − 1)/2 pairs.  Checked by a first pass that reads only the task offsets.
    """
    bound = _bound(engine)
    w = bound.n_workers
    most = min(bound.answer_pairs, w * (w - 1) // 2)
    # a block sorts its answer pairs' keys (2 × 8 bytes); a merge of the tree holds two operands and the result
    need = max(16 * bound.largest_block, 24 * most)
    memory.check(need, f"up to {most:,} co-labelled worker pairs, {bound.largest_block:,} in the largest block "
                       "(a task answered by n workers has n(n-1)/2 pairs)", max_memory)
    total, _ = engine.map_reduce(index_block, None)
    return PairIndex(total.keys, w, bound.n_classes, bound.n_tasks, bound.answer_pairs, bound.largest_block)


def _check_weights(weights: Any, n_tasks: int) -> np.ndarray:
    try:
        arr = np.asarray(weights, dtype=np.float64)
    except (TypeError, ValueError):
        raise UsageError(f"{param('weights')} must be numbers, one per task") from None
    if arr.shape != (n_tasks,):
        raise UsageError(f"{param('weights')} must hold one weight per task ({n_tasks:,}), got shape {arr.shape}")
    if not np.isfinite(arr).all():
        bad = int(np.flatnonzero(~np.isfinite(arr))[0])
        raise UsageError(f"{param('weights')} must be finite; task {bad} has {arr[bad]!r}")
    return arr + 0.0  # -0.0 becomes 0.0: a sparse sum then adds to the bits of a dense one


def pair_statistics(engine: Any, index: PairIndex, weights: Any = None, *,
                    max_memory: memory.MaxMemory = None) -> CoOccurrence:
    """Per-pair K×K joint counts and shared-task counts over ``index``'s pairs: one ``map_reduce`` pass.

    Parameters
    ----------
    engine : object with ``map_reduce(fn, params)``
        The engine ``index`` was built on.
    index : PairIndex
        From :func:`pair_index` (build it once; each statistics pass reuses it).
    weights : array-like of float, shape (n_tasks,), optional
        Per-task weights (finite), in the engine's global task order.
    max_memory : int, float, str or None

    Returns
    -------
    CoOccurrence
    """
    k = index.n_classes
    n_pairs = index.n_pairs
    if n_pairs * k * k >= 2**63:
        raise DataError(f"{n_pairs:,} pairs × {k}² classes exceed the int64 keys of the joint counts")
    w = None if weights is None else _check_weights(weights, index.n_tasks)
    cells = min(index.answer_pairs, n_pairs * k * k)
    # a block: its answer pairs' keys, weights, sort order and runs (≤ 48 bytes each); the tree: three
    # operands of ≤ cells entries (16 bytes); the dense result: P × K² values and P counts
    need = max(48 * index.largest_block, 48 * cells) + 8 * n_pairs * (k * k + 2)
    memory.check(need, f"{n_pairs:,} worker pairs × {k}² classes, {index.largest_block:,} answer pairs in the "
                       "largest block", max_memory)
    total, _ = engine.map_reduce(stats_block, StatsParams(index.keys, w, index.n_workers, k))
    joint = total[0].dense(n_pairs * k * k).reshape(n_pairs, k, k)
    n_tasks = total[1].dense(n_pairs)
    weight = total[2].dense(n_pairs) if w is not None else None
    return CoOccurrence(index.pairs, joint, n_tasks, weight, index.n_workers, k)


def co_occurrence(engine: Any, weights: Any = None, *, max_memory: memory.MaxMemory = None) -> CoOccurrence:
    """The co-occurrence statistics of every co-labelled worker pair: :func:`pair_index` then :func:`pair_statistics`.

    Parameters
    ----------
    engine : object with ``map_reduce(fn, params)``
        Any engine of the block protocol: :class:`crowdagg.engine.LocalEngine` (for an
        :class:`~crowdagg.data.annotations.AnnotationSet`, :func:`crowdagg.reports.agreement.co_occurrence`
        builds it), or the Dask engine.  Same bits for any engine, thread count or partitioning.
    weights : array-like of float, shape (n_tasks,), optional
        Per-task weights: each answer pair of task t counts ``weights[t]`` (``joint`` float64, and
        ``weight`` the per-pair sums); unweighted counts are int64.
    max_memory : int, float, str or None
        Memory limit for the up-front checks (default 80% of the available memory).

    Returns
    -------
    CoOccurrence
        ``pairs`` (P, 2) int32, ``joint`` (P, K, K), ``n_tasks`` (P,) int64, ``weight`` (P,) or None.

    Examples
    --------
    >>> from crowdagg.data.annotations import AnnotationSet
    >>> from crowdagg.engine import LocalEngine
    >>> data = AnnotationSet.from_codes([0, 0, 0, 1, 1], [0, 1, 2, 0, 1], [1, 1, 0, 0, 1])
    >>> stats = co_occurrence(LocalEngine(data))
    >>> stats.pairs.tolist(), stats.n_tasks.tolist()
    ([[0, 1], [0, 2], [1, 2]], [2, 1, 1])
    >>> stats.joint[0].tolist()  # workers 0 and 1: (1, 1) on task 0, (0, 1) on task 1
    [[0, 1], [0, 1]]
    """
    return pair_statistics(engine, pair_index(engine, max_memory=max_memory), weights, max_memory=max_memory)


__all__ = ["CoOccurrence", "PairBound", "PairIndex", "PairSet", "SparseSum", "StatsParams", "bound_block",
           "co_occurrence", "index_block", "pair_index", "pair_statistics", "stats_block"]
