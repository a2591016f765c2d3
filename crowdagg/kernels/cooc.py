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
2. the index pass (:func:`index_block`): each block's co-labelled pairs,
   a :class:`PairSet` whose ``+`` is their union, reduced along the
   engine's tree -- built once, reused by every statistics pass.  A set is
   sorted keys while sparse and a bitmap over the n_workers² keys once the
   keys would take as much memory (64 keys a word); a block whose answer
   pairs would fill the bitmap sets its bits straight away, unsorted;
3. the statistics pass (:func:`stats_block`): the index travels as a
   **look-up** (:func:`pair_lookup`): a bitmap of its keys with each
   word's rank beside it (n_workers² / 4 bytes: a pair's id -- its
   position in the index -- is one read and a popcount), or, where that
   bitmap would outweigh the index (many workers, few co-labelled pairs),
   an open-addressing hash table of keys and ids.  A block walks its
   tasks, looks each (task, pair) up once and emits its answer pairs keyed
   by pair id (``p · K² + a · K + b``): no sort for counts (integer sums
   do not depend on the order: the block's keys are its sum as they
   come); a stable radix sort adding equal keys in task order for
   weighted sums.  The tree's sums (:class:`SparseSum`) are sorted, counts
   or dense: sparse ones merge (or concatenate) until they would take as
   much memory as the dense vector, then turn dense, and from then on the
   other side is added into the dense one in place.  In every form an
   entry of ``a + b`` is ``a[k] + b[k]`` (absent keys are zeros, ``x + 0
   == x``, no value is -0.0), so the total is bit-identical to a dense
   reduction's whatever form each node takes (:data:`DENSE_SWITCH` moves
   memory and time, never a bit), and for every aligned partitioning.  A
   block holds only its own answer pairs, never a dense P × K²; the dense
   (P, K, K) array is the root's (or built once from it).

Keys and look-ups are written over a key space (n_workers² here), not for
pairs alone: worker triples (third-order statistics) index the same way,
with keys ``(w1 · n_workers + w2) · n_workers + w3``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numba import njit

from ..core import memory, threads
from ..errors import DataError, UsageError, param

_I64 = np.dtype(np.int64)


# ----------------------------------------------------------------------------------------------- kernels


@njit(cache=True, nogil=True)
def _merge(ka, va, kb, vb):  # pragma: no cover - compiled
    """Sorted merge of two sparse vectors (sorted unique int64 keys; values, or none): equal keys once, values
    added as a + b.  Empty ``va`` and ``vb``: keys only (a sorted union).  Counted first: allocated at its size."""
    i = j = n = 0
    while i < ka.shape[0] and j < kb.shape[0]:
        if ka[i] <= kb[j]:
            j += ka[i] == kb[j]
            i += 1
        else:
            j += 1
        n += 1
    n += ka.shape[0] - i + kb.shape[0] - j
    with_values = va.shape[0] > 0 or vb.shape[0] > 0
    keys = np.empty(n, dtype=np.int64)
    vals = np.empty(n if with_values else 0, dtype=va.dtype)
    i = j = 0
    for k in range(n):
        take_a = j == kb.shape[0] or (i < ka.shape[0] and ka[i] <= kb[j])
        take_b = i == ka.shape[0] or (j < kb.shape[0] and kb[j] <= ka[i])
        if take_a and take_b:
            keys[k] = ka[i]
            if with_values:
                vals[k] = va[i] + vb[j]
            i += 1
            j += 1
        elif take_a:
            keys[k] = ka[i]
            if with_values:
                vals[k] = va[i]
            i += 1
        else:
            keys[k] = kb[j]
            if with_values:
                vals[k] = vb[j]
            j += 1
    return keys, vals


@njit(cache=True, nogil=True)
def _scatter_add(dense, keys, values):  # pragma: no cover - compiled
    """``dense[keys[i]] += values[i]`` in order (``values`` empty: ``+= 1``, each key counting once)."""
    if values.shape[0] == 0:
        for i in range(keys.shape[0]):
            dense[keys[i]] += 1
    else:
        for i in range(keys.shape[0]):
            dense[keys[i]] += values[i]


@njit(cache=True, nogil=True)
def _set_bits(bits, keys):  # pragma: no cover - compiled
    """Set the bits ``keys`` (each < 64 · len(bits)) of the bitmap ``bits`` (int64 words, bit k of word k >> 6)."""
    for i in range(keys.shape[0]):
        bits[keys[i] >> 6] |= np.int64(1) << (keys[i] & 63)


@njit(cache=True, nogil=True)
def _popcount(x):  # pragma: no cover - compiled
    """Set bits of an int64 word (all 64: the sign bit counted apart, so the shifts below see x ≥ 0)."""
    n = np.int64(1) if x < 0 else np.int64(0)
    x &= np.int64(0x7FFFFFFFFFFFFFFF)
    x -= (x >> 1) & np.int64(0x5555555555555555)
    x = (x & np.int64(0x3333333333333333)) + ((x >> 2) & np.int64(0x3333333333333333))
    x = (x + (x >> 4)) & np.int64(0x0F0F0F0F0F0F0F0F)
    return n + ((x * np.int64(0x0101010101010101)) >> 56 & 0xFF)


@njit(cache=True, nogil=True)
def _keys_of_bits(bits):  # pragma: no cover - compiled
    """The set bits of a bitmap as sorted int64 keys."""
    n = 0
    for w in range(bits.shape[0]):
        n += _popcount(bits[w])
    keys = np.empty(n, dtype=np.int64)
    n = 0
    for w in range(bits.shape[0]):
        word = bits[w]
        r = 0
        while word != 0:
            if word & 1:
                keys[n] = (np.int64(w) << 6) + r
                n += 1
            word = (word >> 1) & np.int64(0x7FFFFFFFFFFFFFFF)  # a logical shift: the sign bit moves down too
            r += 1
    return keys


@njit(cache=True, nogil=True)
def _ranked(bits):  # pragma: no cover - compiled
    """``ranked[w] = (bits[w], the set bits in words 0 .. w-1)``: a word and its rank side by side, so that a key's
    position among the set keys is read from one cache line."""
    ranked = np.empty((bits.shape[0], 2), dtype=np.int64)
    n = 0
    for w in range(bits.shape[0]):
        ranked[w, 0] = bits[w]
        ranked[w, 1] = n
        n += _popcount(bits[w])
    return ranked


_GOLDEN = -7046029254386353131  # 0x9E3779B97F4A7C15 as int64: Fibonacci hashing


@njit(cache=True, nogil=True)
def _slot(q, mask):  # pragma: no cover - compiled
    """The home slot of key ``q`` in a hash table of ``mask + 1`` (a power of two) slots."""
    return ((q * _GOLDEN) >> 29) & mask


@njit(cache=True, nogil=True)
def _hash_table(keys, capacity):  # pragma: no cover - compiled
    """``table[s] = (key, id)``: the sorted ``keys`` and their positions in an open-addressing hash table of
    ``capacity`` slots (a power of two, more than the keys: linear probing ends at an empty slot, key -1)."""
    table = np.full((capacity, 2), -1, dtype=np.int64)
    mask = capacity - 1
    for i in range(keys.shape[0]):
        s = _slot(keys[i], mask)
        while table[s, 0] >= 0:
            s = (s + 1) & mask
        table[s, 0] = keys[i]
        table[s, 1] = i
    return table


@njit(cache=True, nogil=True)
def _pair_id(q, keys, ranked, table):  # pragma: no cover - compiled
    """The position of key ``q`` in the sorted ``keys`` (-1 if absent).

    From the ranked bitmap ``ranked`` when given (:func:`_ranked`: one
    read and a popcount); else from the hash table ``table``
    (:func:`_hash_table`, about one read); else, neither given, by
    bisection of ``keys``.
    """
    if ranked.shape[0]:
        word = q >> 6
        if q < 0 or word >= ranked.shape[0]:
            return np.int64(-1)
        r = q & 63
        x = ranked[word, 0]
        if (x >> r) & 1 == 0:
            return np.int64(-1)
        return ranked[word, 1] + _popcount(x & ((np.int64(1) << r) - 1))
    if table.shape[0]:
        mask = table.shape[0] - 1
        s = _slot(q, mask)
        for _ in range(table.shape[0]):  # bounded: a table with no empty slot ends too
            if table[s, 0] == q:
                return table[s, 1]
            if table[s, 0] < 0:
                return np.int64(-1)
            s = (s + 1) & mask
        return np.int64(-1)
    lo, hi = 0, keys.shape[0]
    while lo < hi:
        mid = (lo + hi) >> 1
        if keys[mid] < q:
            lo = mid + 1
        else:
            hi = mid
    return np.int64(lo) if lo < keys.shape[0] and keys[lo] == q else np.int64(-1)


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
def _block_pair_keys(task_ptr, worker, t0, t1, n_workers, capacity, bits):  # pragma: no cover - compiled
    """The keys ``w1 · n_workers + w2`` (w1 < w2) of the worker pairs sharing a task in tasks [t0, t1).

    With a bitmap ``bits`` (n_workers² bits): set there (returns no keys).  Without (empty ``bits``): returned
    sorted and unique -- ``capacity`` bounds the answer pairs of the range (Σ c(c−1)/2 over its tasks' answer
    counts c).
    """
    dense = bits.shape[0] > 0
    keys = np.empty(0 if dense else capacity, dtype=np.int64)
    longest = _longest(task_ptr, t0, t1)
    order = np.empty(longest, dtype=np.int64)
    starts = np.empty(longest + 1, dtype=np.int64)
    n = 0
    for t in range(t0, t1):
        runs = _runs(worker, task_ptr[t], task_ptr[t + 1], order, starts)
        for u in range(runs):
            wi = np.int64(worker[order[starts[u]]])
            for v in range(u + 1, runs):
                q = wi * n_workers + worker[order[starts[v]]]
                if dense:
                    bits[q >> 6] |= np.int64(1) << (q & 63)
                else:
                    keys[n] = q
                    n += 1
    if dense:
        return keys
    keys, _ = _radix_sort(keys[:n], n_workers * n_workers - 1)
    m = 0
    for i in range(n):
        if m == 0 or keys[i] != keys[m - 1]:
            keys[m] = keys[i]
            m += 1
    return keys[:m].copy()


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
def _block_pair_entries(task_ptr, worker, label, t0, t1, n_workers, n_classes, weights, weighted, capacity,
                        index, ranked, table):  # pragma: no cover - compiled
    """The answer pairs of tasks [t0, t1) as entries keyed by pair id, in task order.

    Returns ``(cell_key, cell_w, pair_id, pair_w, missing)``: one
    ``cell_key = p · K² + a · K + b`` per answer pair of two different
    workers (``p`` the pair's id: the position of its key ``w1 ·
    n_workers + w2`` in ``index``, found by :func:`_pair_id`; ``a`` w1's
    answer, ``b`` w2's), one ``pair_id = p`` per pair of different workers
    per task; ``*_w`` the task's weight for each (empty unless
    ``weighted``).  One look-up per pair and task, not per answer pair.
    ``missing``: the first pair key absent from the index (-1 if none; the
    entries are then incomplete).  ``p · K² < P · K²`` (checked < 2⁶³).
    """
    k2 = np.int64(n_classes) * n_classes
    cell_key = np.empty(capacity, dtype=np.int64)
    pair_id = np.empty(capacity, dtype=np.int64)
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
                p = _pair_id(q, index, ranked, table)
                if p < 0:
                    return cell_key[:0], cell_w[:0], pair_id[:0], pair_w[:0], q
                pair_id[npair] = p
                if weighted:
                    pair_w[npair] = wt
                npair += 1
                for x in range(starts[u], starts[u + 1]):
                    base = p * k2 + np.int64(label[order[x]]) * n_classes
                    for y in range(starts[v], starts[v + 1]):
                        cell_key[nc] = base + label[order[y]]
                        if weighted:
                            cell_w[nc] = wt
                        nc += 1
    nc_w = nc if weighted else 0
    np_w = npair if weighted else 0
    return cell_key[:nc], cell_w[:nc_w], pair_id[:npair], pair_w[:np_w], np.int64(-1)


# ------------------------------------------------------------------------------ third order: worker triples


@njit(cache=True, nogil=True)
def _unit_runs(worker, unit, lo, hi, order, starts):  # pragma: no cover - compiled
    """:func:`_runs` by unit: the answers lo..hi-1 of one task sorted by their worker's unit ``unit[worker]``
    (stable), ``starts[:n+1]`` the boundaries of the ``n`` runs of one unit each (returned)."""
    c = hi - lo
    for i in range(c):
        a = lo + i
        u = unit[worker[a]]
        j = i - 1
        while j >= 0 and unit[worker[order[j]]] > u:
            order[j + 1] = order[j]
            j -= 1
        order[j + 1] = a
    n = 0
    for i in range(c):
        if i == 0 or unit[worker[order[i]]] != unit[worker[order[i - 1]]]:
            starts[n] = i
            n += 1
    starts[n] = c
    return n


@njit(cache=True, nogil=True)
def _count_runs(keys, max_key):  # pragma: no cover - compiled
    """Sorted unique ``keys`` (≤ ``max_key``) and how many times each occurs."""
    sk, _ = _radix_sort(keys, max_key)
    n = sk.shape[0]
    out_k = np.empty(n, dtype=np.int64)
    out_c = np.zeros(n, dtype=np.int64)
    m = -1
    for i in range(n):
        if m < 0 or sk[i] != out_k[m]:
            m += 1
            out_k[m] = sk[i]
        out_c[m] += 1
    return out_k[:m + 1].copy(), out_c[:m + 1].copy()


@njit(cache=True, nogil=True)
def _block_triples(task_ptr, worker, label, unit, t0, t1, n_units, n_classes, capacity, keys_only, index, ranked,
                   table):  # pragma: no cover - compiled
    """The triples of units answering tasks [t0, t1), in task order: their keys, or their answer triples' cells.

    ``keys_only``: one key ``(u1 · U + u2) · U + u3`` (u1 < u2 < u3, ``U =
    n_units``) per task and triple of units with answers there (unsorted; a
    triple repeats once per task it shares: the index pass).  Otherwise
    the answer triples as cell keys ``p · K³ + a · K² + b · K + c``: one
    answer from each of the three units (``a`` the lowest unit's answer),
    every combination; ``p`` the triple's id, its position in ``index``
    (:func:`_pair_id`); a triple absent from ``index`` (left out for sharing
    too few tasks) emits nothing.  One look-up per task and triple of units,
    not per answer triple.  ``capacity`` bounds either (Σ c(c−1)(c−2)/6 over
    the tasks' answer counts c).
    """
    k = np.int64(n_classes)
    k3 = k * k * k
    cell_key = np.empty(capacity, dtype=np.int64)
    longest = _longest(task_ptr, t0, t1)
    order = np.empty(longest, dtype=np.int64)
    starts = np.empty(longest + 1, dtype=np.int64)
    n = 0
    for t in range(t0, t1):
        runs = _unit_runs(worker, unit, task_ptr[t], task_ptr[t + 1], order, starts)
        for x in range(runs):
            kx = np.int64(unit[worker[order[starts[x]]]]) * n_units
            for y in range(x + 1, runs):
                ky = (kx + unit[worker[order[starts[y]]]]) * n_units
                for z in range(y + 1, runs):
                    q = ky + unit[worker[order[starts[z]]]]
                    if keys_only:
                        cell_key[n] = q
                        n += 1
                        continue
                    p = _pair_id(q, index, ranked, table)
                    if p < 0:
                        continue
                    for i in range(starts[x], starts[x + 1]):
                        base_i = p * k3 + np.int64(label[order[i]]) * k * k
                        for j in range(starts[y], starts[y + 1]):
                            base_j = base_i + np.int64(label[order[j]]) * k
                            for h in range(starts[z], starts[z + 1]):
                                cell_key[n] = base_j + label[order[h]]
                                n += 1
    return cell_key[:n].copy()


# ------------------------------------------------------------------------------------ sums of the tree

#: A sum of the tree turns dense once its sparse operands would take this share of the dense form's bytes (1: as
#: many bytes; 0: dense from the first add; inf: never).  Only memory and speed depend on it, never a bit.
DENSE_SWITCH = 1.0


def _words(space: int) -> int:
    return (int(space) + 63) // 64


@dataclass(eq=False)
class PairSet:
    """A set of pair keys in ``[0, space)``; ``a + b`` is the union (a sum of the reduction tree).

    Sorted keys while sparse; a bitmap (``space`` bits) once the keys would
    take as much memory (64 keys per 64-bit word of the bitmap: a node of
    ``n`` keys turns dense when ``64 n ≥ space``).  A set is the same set in
    either form, so the form never changes a result.

    Attributes
    ----------
    keys : ndarray of int64, shape (n,)
        Sorted, unique: ``w1 · n_workers + w2`` with ``w1 < w2`` (empty while ``bits`` holds the set).
    bits : ndarray of int64, shape (ceil(space / 64),), or None
        The set as a bitmap: key ``q`` is bit ``q & 63`` of word ``q >> 6``.
    space : int
        How many keys there could be (``n_workers²``); 0: unknown, the set stays sorted.
    """

    keys: np.ndarray
    bits: np.ndarray | None = None
    space: int = 0

    def __add__(self, other: PairSet) -> PairSet:
        if self.bits is None and other.bits is None:
            n = len(self.keys) + len(other.keys)
            if not self.space or 64 * n < DENSE_SWITCH * self.space:
                return PairSet(_merge(self.keys, _NO_VALUES, other.keys, _NO_VALUES)[0], None, self.space)
            bits = np.zeros(_words(self.space), dtype=np.int64)
            _set_bits(bits, _in_space(self.keys, self.space))
            into, other = PairSet(_NO_KEYS, bits, self.space), other
        else:
            into, other = (self, other) if self.bits is not None else (other, self)
        assert into.bits is not None
        if into.bits.shape != (_words(into.space),) or into.bits.dtype != _I64:
            raise DataError(f"a bitmap of {into.bits.shape} {into.bits.dtype} words for {into.space:,} keys")
        if other.bits is None:
            _set_bits(into.bits, _in_space(other.keys, into.space))
        else:
            if other.bits.shape != into.bits.shape:
                raise DataError(f"pair sets over {into.space:,} and {other.space:,} keys cannot be added")
            np.bitwise_or(into.bits, other.bits, out=into.bits)
        return into

    def sorted_keys(self) -> np.ndarray:
        """The set's keys, sorted."""
        return self.keys if self.bits is None else _keys_of_bits(self.bits)


_NO_KEYS = np.empty(0, dtype=np.int64)
_NO_VALUES = np.empty(0, dtype=np.float64)
_NO_LOOKUP = np.empty((0, 2), dtype=np.int64)


def _in_space(keys: np.ndarray, space: int) -> np.ndarray:
    """``keys`` once checked to lie in ``[0, space)``: the scatter kernels index without bounds checks."""
    if len(keys) and (int(keys.min()) < 0 or int(keys.max()) >= space):
        bad = int(keys.min()) if int(keys.min()) < 0 else int(keys.max())
        raise DataError(f"key {bad:,} is outside the {space:,} entries of the sum it is added to")
    return keys


@dataclass(eq=False)
class SparseSum:
    """A vector of ``size`` entries, absent entries zero, in one of three forms; ``a + b`` adds two of one pass.

    * **sorted**: sorted unique int64 ``keys`` and their ``values``;
    * **counts**: ``keys`` in any order, repeats allowed, ``values`` None --
      each occurrence counts 1 (int64): an unweighted block's answer pairs,
      never sorted, since integer sums do not depend on the order;
    * **dense**: ``keys`` None, ``values`` the whole vector.

    ``a + b``: two sorted sums merge (equal keys add as ``a + b``), two
    counts concatenate -- until the operands would take as much memory as
    the dense vector (16 or 8 bytes an entry against 8 a cell: ``size`` 0
    never turns dense); then, and whenever one side is dense, the other is
    added into the dense one in place (the tree owns its operands).  Each
    entry of the result is ``a[k] + b[k]`` in every form, absent keys
    adding as ``x + 0 == x`` (no value is ever -0.0: the weights are
    normalised), so the tree's total is bit-identical to a dense
    reduction's, whatever form each node takes.
    """

    keys: np.ndarray | None
    values: np.ndarray | None
    size: int = 0

    @property
    def form(self) -> str:
        return "dense" if self.keys is None else "counts" if self.values is None else "sorted"

    def __add__(self, other: SparseSum) -> SparseSum:
        if self.size != other.size or (self.form != other.form and "dense" not in (self.form, other.form)):
            raise DataError(f"sums of {self.size:,} {self.form} and {other.size:,} {other.form} entries cannot "
                            "be added")
        if self.keys is not None and other.keys is not None:
            n = len(self.keys) + len(other.keys)
            entry = 8 if self.values is None else 16
            if not self.size or entry * n < DENSE_SWITCH * 8 * self.size:
                if self.values is None:
                    return SparseSum(np.concatenate([self.keys, other.keys]), None, self.size)
                assert other.values is not None
                keys, values = _merge(self.keys, self.values, other.keys, other.values)
                return SparseSum(keys, values, self.size)
            into, other = SparseSum(None, self.dense(self.size), self.size), other
        else:
            into, other = (self, other) if self.keys is None else (other, self)
        assert into.values is not None
        if into.values.shape != (into.size,) or other.dtype != into.values.dtype:
            raise DataError(f"a dense sum of {into.values.shape} {into.values.dtype} entries for {into.size:,}, "
                            f"added {other.dtype} values")
        if other.keys is None:
            assert other.values is not None
            np.add(into.values, other.values, out=into.values)  # x + y == y + x: either side may take the sum
        else:
            _scatter_add(into.values, _in_space(other.keys, into.size),
                         _NO_VALUES if other.values is None else other.values)
        return into

    @property
    def dtype(self) -> np.dtype:
        return _I64 if self.values is None else self.values.dtype

    def dense(self, size: int) -> np.ndarray:
        """The vector as a dense array of ``size`` entries (the dense form's own array)."""
        if self.keys is None:
            assert self.values is not None
            if self.values.shape != (size,):
                raise DataError(f"a dense sum of {self.values.shape[0]:,} entries read as {size:,}")
            return self.values
        out = np.zeros(size, dtype=self.dtype)
        if self.values is None:
            _scatter_add(out, _in_space(self.keys, size), _NO_VALUES)
        else:
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
    """The statistics pass's broadcast parameters: the pair index's keys, the per-task weights (or None).

    ``ranked`` or ``table`` (:func:`pair_lookup`): the index as a bitmap
    over the n_workers² keys with each word's rank, so that a pair's id is
    one read and a popcount; or, where that bitmap would be large, a hash
    table of its keys and ids.  Neither: a bisection of ``index``.
    """

    index: np.ndarray
    weights: np.ndarray | None = None
    n_workers: int | None = None  # the index's data: a block of other data is refused (its keys differ)
    n_classes: int | None = None
    ranked: np.ndarray | None = None
    table: np.ndarray | None = None


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
    """Block function of the index pass: the block's co-labelled worker pairs, a :class:`PairSet`.

    A bitmap over the n_workers² keys straight away when the block's answer
    pairs would fill it (64 keys a word: no sort), else its sorted unique keys.
    """
    b = _block(part, b)
    start, stop = part.tasks_of(b)
    w = int(part.n_workers)
    pairs = _answer_pairs(part, b)
    space = w * w
    bits = np.zeros(_words(space) if space and 64 * pairs >= DENSE_SWITCH * space else 0, dtype=np.int64)
    keys = _block_pair_keys(part.task_ptr, part.worker, start, stop, np.int64(w), pairs, bits)
    return PairSet(keys, bits if len(bits) else None, space), None


def stats_block(part: Any, b: int, params: StatsParams, keep: bool) -> tuple[tuple[SparseSum, ...], None]:
    """Block function of the statistics pass: joint counts and task counts (and weights) by pair id.

    Sums: ``(joint, n_tasks)`` -- or ``(joint, n_tasks, weight)`` when
    ``params.weights`` is given -- each a :class:`SparseSum`; ``joint``
    keyed ``p · K² + a · K + b`` (P · K² entries), the others by pair id
    ``p`` (P entries).  Counts are the block's answer pairs unsorted (the
    counts form); weighted sums are sorted and added in task order.
    """
    b = _block(part, b)
    for name in ("n_workers", "n_classes"):
        given = getattr(params, name)
        if given is not None and given != getattr(part, name):
            raise DataError(f"the pair index was built from data of {given:,} {name[2:]}, this has "
                            f"{getattr(part, name):,}: build it on the same engine")
    ranked, table = _check_lookup(params, int(part.n_workers) ** 2, f"{int(part.n_workers):,}² workers")
    start, stop = part.tasks_of(b)
    weighted = params.weights is not None
    weights = np.empty(0, dtype=np.float64)
    if params.weights is not None:
        if part.first_task + part.n_tasks > len(params.weights):
            raise DataError(f"{len(params.weights):,} task weights for a partition reaching task "
                            f"{part.first_task + part.n_tasks:,}")
        weights = part.task_rows(params.weights)
    n_workers, k = int(part.n_workers), int(part.n_classes)
    index = np.ascontiguousarray(params.index, dtype=np.int64)
    cell_key, cell_w, pair_id, pair_w, missing = _block_pair_entries(
        part.task_ptr, part.worker, part.label, start, stop, np.int64(n_workers), np.int64(k), weights, weighted,
        _answer_pairs(part, b), index, ranked, table)
    if missing >= 0:
        w1, w2 = divmod(int(missing), n_workers)
        raise DataError(f"the pair index does not hold workers ({w1}, {w2}), who share a task: "
                        "it was built from other data")
    n_pairs = len(index)
    cells = n_pairs * k * k
    n_tasks = SparseSum(pair_id, None, n_pairs)
    if not weighted:
        return (SparseSum(cell_key, None, cells), n_tasks), None
    cell_sums = _run_sums(cell_key, cell_w, max(cells - 1, 0))
    pair_sums = _run_sums(pair_id, pair_w, max(n_pairs - 1, 0))
    return (SparseSum(cell_sums[0], cell_sums[1], cells), n_tasks, SparseSum(pair_sums[0], pair_sums[1], n_pairs)), None


def _check_lookup(params: Any, space: int, keys: str, index: str = "pair index",
                  builder: str = "pair_lookup") -> tuple[np.ndarray, np.ndarray]:
    """``params``' ranked bitmap and hash table (empty where None), checked to fit a key space of ``space`` keys:
    the look-up kernel reads them without bounds checks.  (An id past the index gives a key past the sums'
    entries, refused when the sums are added.)"""
    checked = []
    for name, rows in (("ranked bitmap", _words(space)), ("hash table", None)):
        given = params.ranked if rows is not None else params.table
        arr = np.empty((0, 2), dtype=np.int64) if given is None else np.ascontiguousarray(given, dtype=np.int64)
        n = arr.shape[0] if arr.ndim == 2 else -1
        if given is not None and (arr.ndim != 2 or arr.shape[1] != 2 or n != (n if rows is None else rows)
                                  or (rows is None and (n < 1 or n & (n - 1)))):
            want = f"({rows:,}, 2) for {keys}" if rows is not None else "(a power of two, 2)"
            raise DataError(f"the {index}'s {name} has shape {arr.shape}, not {want}: build it with {builder}")
        checked.append(arr)
    return checked[0], checked[1]


# ----------------------------------------------------------------- first- and third-order block functions


def label_block(part: Any, b: int, params: Any, keep: bool) -> tuple[np.ndarray, None]:
    """Block function of the first-order pass: ``counts[w, a]``, the block's answers of worker ``w`` with label
    ``a`` (int64, shape (n_workers, K): a fresh array the tree adds in place)."""
    b = _block(part, b)
    lo, hi = part.answers_of(b)
    k = int(part.n_classes)
    cells = np.asarray(part.worker[lo:hi], dtype=np.int64) * k + part.label[lo:hi]
    counts = np.bincount(cells, minlength=int(part.n_workers) * k).astype(np.int64, copy=False)
    return counts.reshape(int(part.n_workers), k), None


@dataclass(frozen=True)
class TripleParams:
    """The third-order passes' broadcast parameters.

    ``units`` (n_workers,) int64: each worker's unit in ``[0, n_units)``.
    ``index`` (the statistics pass): the kept triples' sorted keys ``(u1 · U
    + u2) · U + u3``, with their look-up (``ranked`` or ``table``,
    :func:`key_lookup`); None for the index pass.
    """

    units: np.ndarray
    n_units: int
    n_workers: int
    n_classes: int
    index: np.ndarray | None = None
    ranked: np.ndarray | None = None
    table: np.ndarray | None = None


def _answer_triples(part: Any, b: int) -> int:
    start, stop = part.tasks_of(b)
    c = np.diff(part.task_ptr[start:stop + 1])
    return int((c * (c - 1) * (c - 2) // 6).sum())


def _triple_part(part: Any, b: int, params: TripleParams) -> tuple[int, int, int]:
    """``(b, start, stop)`` once the partition and the units are checked against it."""
    b = _block(part, b)
    if not isinstance(params, TripleParams):
        raise UsageError(f"the third-order block functions take TripleParams, got {type(params).__name__}")
    if (params.n_workers, params.n_classes) != (int(part.n_workers), int(part.n_classes)):
        raise DataError(f"the units were given for {params.n_workers:,} workers and {params.n_classes} classes, "
                        f"this data has {int(part.n_workers):,} and {int(part.n_classes)}")
    if params.units.shape != (params.n_workers,) or params.units.dtype != _I64:
        raise DataError(f"units of shape {params.units.shape} {params.units.dtype} for {params.n_workers:,} workers")
    if not 1 <= params.n_units <= MAX_UNITS or (len(params.units) and (
            int(params.units.min()) < 0 or int(params.units.max()) >= params.n_units)):
        raise DataError(f"unit codes outside 0 .. {params.n_units - 1} (n_units must be 1 .. {MAX_UNITS:,})")
    start, stop = part.tasks_of(b)
    return b, start, stop


def triple_bound_block(part: Any, b: int, params: Any, keep: bool) -> tuple[PairBound, None]:
    """Block function of the third-order bound pass: the block's tasks and answer triples (in ``answer_pairs``;
    an upper bound on what the triple passes hold), no answer read."""
    b = _block(part, b)
    start, stop = part.tasks_of(b)
    triples = _answer_triples(part, b)
    return PairBound(stop - start, triples, triples, int(part.n_workers), int(part.n_classes)), None


def triple_index_block(part: Any, b: int, params: TripleParams, keep: bool) -> tuple[SparseSum, None]:
    """Block function of the triple index pass: one key per task and triple of units with answers there (the
    counts form of a :class:`SparseSum` over the n_units³ keys: the root counts each triple's shared tasks)."""
    b, start, stop = _triple_part(part, b, params)
    u = int(params.n_units)
    keys = _block_triples(part.task_ptr, part.worker, part.label, params.units, start, stop, np.int64(u),
                          np.int64(part.n_classes), _answer_triples(part, b), True, _NO_KEYS, _NO_LOOKUP, _NO_LOOKUP)
    return SparseSum(keys, None, u ** 3), None


def triple_stats_block(part: Any, b: int, params: TripleParams, keep: bool) -> tuple[SparseSum, None]:
    """Block function of the third-order statistics pass: the answer triples of the kept triples, keyed
    ``p · K³ + a · K² + b · K + c`` (the counts form of a :class:`SparseSum` over T · K³ entries)."""
    b, start, stop = _triple_part(part, b, params)
    if params.index is None:
        raise UsageError("the third-order statistics pass needs the kept triples' index")
    u, k = int(params.n_units), int(part.n_classes)
    ranked, table = _check_lookup(params, u ** 3, f"{u:,}³ units", "triple index", "key_lookup")
    index = np.ascontiguousarray(params.index, dtype=np.int64)
    keys = _block_triples(part.task_ptr, part.worker, part.label, params.units, start, stop, np.int64(u),
                          np.int64(k), _answer_triples(part, b), False, index, ranked, table)
    return SparseSum(keys, None, len(index) * k ** 3), None


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


def _check_engine(engine: Any) -> Any:
    """``engine`` once it has the block protocol's ``map_reduce`` (an annotation set handed in its place is the
    likely mistake: say how to make one)."""
    if not callable(getattr(engine, "map_reduce", None)):
        raise UsageError(f"{param('engine')} must be an engine of the block protocol (with map_reduce), got "
                         f"{type(engine).__name__}: wrap an AnnotationSet as crowdagg.engine.LocalEngine(data)")
    return engine


def _bound(engine: Any) -> PairBound:
    total, _ = _check_engine(engine).map_reduce(bound_block, None)
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
    # a block sorts its answer pairs' keys (a copy, the order and their buffers: 5 × 8 bytes) unless a bitmap of
    # the w² keys is smaller; a node of the tree, sorted keys or that bitmap, and a union holds three
    bitmap = _words(w * w) * 8
    block = bitmap if 64 * bound.largest_block >= w * w else 40 * bound.largest_block
    need = max(block, 3 * min(8 * most, bitmap)) + 8 * most
    memory.check(need, f"up to {most:,} co-labelled worker pairs, {bound.largest_block:,} in the largest block "
                       "(a task answered by n workers has n(n-1)/2 pairs)", max_memory)
    total, _ = engine.map_reduce(index_block, None)
    return PairIndex(total.sorted_keys(), w, bound.n_classes, bound.n_tasks, bound.answer_pairs,
                     bound.largest_block)


#: A pair's id is read from a bitmap of the n_workers² keys and its word ranks (n_workers² / 4 bytes) when that
#: takes at most this many bytes per pair of the index (or :data:`LOOKUP_MIN_BYTES`), else from a hash table (32 to
#: 64 bytes a pair).
LOOKUP_BYTES_PER_PAIR = 32
LOOKUP_MIN_BYTES = 1 << 20


def pair_lookup(index: PairIndex) -> tuple[np.ndarray | None, np.ndarray | None]:
    """``(ranked, table)``: how the statistics pass finds a pair's id (its position in ``index.keys``).

    ``ranked``, shape (ceil(n_workers² / 64), 2): ``index`` as a bitmap over
    the n_workers² pair keys (``ranked[:, 0]``, key ``q`` the bit ``q & 63``
    of word ``q >> 6``) beside the set bits before each word
    (``ranked[:, 1]``); a key's id is then the rank of its word plus the set
    bits below it there, no search.  Where the bitmap
    would take more than :data:`LOOKUP_BYTES_PER_PAIR` bytes a pair (and
    more than :data:`LOOKUP_MIN_BYTES`) -- many workers, few of their pairs co-labelled --
    ``(None, table)``: an open-addressing hash table of ``(key, id)`` rows,
    at least twice as many slots as pairs.
    """
    return key_lookup(index.keys, index.n_workers ** 2)


def key_lookup(keys: np.ndarray, space: int) -> tuple[np.ndarray | None, np.ndarray | None]:
    """:func:`pair_lookup` for any sorted unique ``keys`` in ``[0, space)`` (pairs: n_workers² keys; triples:
    n_units³).

    Raises
    ------
    UsageError
        ``space`` not a non-negative integer, or ``keys`` not a 1-D integer array.
    DataError
        ``keys`` not sorted and unique, or outside ``[0, space)``: the ids would not be their positions (both
        forms of the look-up index by them).
    """
    keys, space = _check_keys(keys, space)
    if _lookup_bytes(len(keys), space) == 16 * _words(space):
        bits = np.zeros(_words(space), dtype=np.int64)
        _set_bits(bits, keys)  # (checked in [0, space) above)
        return _ranked(bits), None
    return None, _hash_table(keys, _table_slots(len(keys)))


def _check_keys(keys: Any, space: Any) -> tuple[np.ndarray, int]:
    """``(keys, space)`` for :func:`key_lookup`, checked: its kernels index and probe with them unchecked."""
    if isinstance(space, bool) or not isinstance(space, (int, np.integer)) or space < 0:
        raise UsageError(f"{param('space')} must be an integer >= 0, got {space!r}")
    arr = np.asarray(keys)
    if arr.ndim != 1 or (arr.size and arr.dtype.kind not in "iu"):
        raise UsageError(f"{param('keys')} must be a 1-D array of integer keys, got shape {arr.shape} {arr.dtype}")
    if arr.dtype.kind == "u" and arr.size and int(arr.max()) > np.iinfo(np.int64).max:
        raise DataError(f"key {int(arr.max()):,} is outside the {int(space):,} entries of the look-up")
    arr = np.ascontiguousarray(arr, dtype=np.int64)
    _in_space(arr, int(space))
    if arr.size > 1 and not (arr[1:] > arr[:-1]).all():
        bad = int(np.flatnonzero(arr[1:] <= arr[:-1])[0]) + 1
        raise DataError(f"{param('keys')} must be sorted and unique: key {int(arr[bad]):,} at position {bad:,} "
                        f"follows {int(arr[bad - 1]):,}")
    return arr, int(space)


def _table_slots(n_keys: int) -> int:
    return 1 << max(2 * int(n_keys), 1).bit_length()


def _lookup_bytes(n_keys: int, space: int) -> int:
    """The bytes of :func:`key_lookup`'s ranked bitmap, or of its hash table where the bitmap would be large."""
    bitmap = 16 * _words(space)
    if bitmap <= max(LOOKUP_BYTES_PER_PAIR * n_keys, LOOKUP_MIN_BYTES):
        return bitmap
    return 16 * _table_slots(n_keys)


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
    entries = n_pairs * (k * k + 1 + (w is not None))  # the result's: P × K² joint cells, P counts (, P weights)
    blocks = max(int(getattr(engine, "n_blocks", 1)), 1)
    live = (max(blocks - 1, 0).bit_length() + 2) * threads.count()  # tree nodes held at once: a stack a thread
    # a block in flight: its entries (16 bytes an answer pair; weighted also their weights and the sort's
    # copies: ~104); the tree's nodes: ≤ 16 bytes an answer pair they cover until dense (8 bytes an entry),
    # twice that while two merge into a third; the result; the pair look-up
    per_pair = 16 if w is None else 104
    need = (per_pair * index.largest_block * threads.count() + min(32 * index.answer_pairs, 8 * live * entries)
            + 8 * entries + _lookup_bytes(index.n_pairs, index.n_workers ** 2))
    memory.check(need, f"{n_pairs:,} worker pairs × {k}² classes, {index.largest_block:,} answer pairs in the "
                       "largest block", max_memory)
    total, _ = engine.map_reduce(stats_block, StatsParams(index.keys, w, index.n_workers, k, *pair_lookup(index)))
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


# ----------------------------------------------------------------------- first and third order: public API


def label_counts(engine: Any) -> np.ndarray:
    """First-order statistics: ``counts[w, a]``, the answers of worker ``w`` with label ``a`` (int64,
    shape (n_workers, K)); one ``map_reduce`` pass over ``engine`` (any engine, the same integers)."""
    total, _ = _check_engine(engine).map_reduce(label_block, None)
    return np.asarray(total, dtype=np.int64)


@dataclass(frozen=True)
class TripleStats:
    """Third-order statistics of the co-labelled triples of units (workers, or groups of them).

    Attributes
    ----------
    triples : ndarray of int32, shape (T, 3)
        Unit codes ``(u1, u2, u3)``, ``u1 < u2 < u3``, sorted: every triple that shares at least
        ``min_tasks`` tasks, once.
    joint : ndarray of int64, shape (T, K, K, K)
        ``joint[p, a, b, c]``: over the tasks all three units answered, the answer triples (one answer
        of each unit, every combination) with u1's answer ``a``, u2's ``b`` and u3's ``c``.
        T̂_{u1 u2 u3} = joint[p] / n_tasks[p].
    n_tasks : ndarray of int64, shape (T,)
        The tasks each triple shares.
    n_units, n_classes : int
    dropped : int
        The co-labelled triples left out for sharing fewer than ``min_tasks`` tasks.
    """

    triples: np.ndarray
    joint: np.ndarray
    n_tasks: np.ndarray
    n_units: int
    n_classes: int
    dropped: int = 0

    @property
    def n_triples(self) -> int:
        return int(self.triples.shape[0])


#: Units (workers or groups) beyond this make keys u³ past int64.
MAX_UNITS = 2_097_151


def _check_units(units: Any, n_units: Any, n_workers: int) -> tuple[np.ndarray, int]:
    if units is None:
        return np.arange(n_workers, dtype=np.int64), n_workers
    try:
        arr = np.asarray(units)
    except (TypeError, ValueError):
        raise UsageError(f"{param('units')} must be integer codes, one per worker") from None
    if arr.shape != (n_workers,) or arr.dtype.kind not in "iu":
        raise UsageError(f"{param('units')} must hold one integer code per worker ({n_workers:,}), got shape "
                         f"{arr.shape} {arr.dtype}")
    arr = arr.astype(np.int64)
    if n_units is not None and (isinstance(n_units, bool) or not isinstance(n_units, (int, np.integer))):
        raise UsageError(f"{param('n_units')} must be an integer, got {n_units!r}")
    n = int(arr.max()) + 1 if n_units is None and len(arr) else int(n_units or 0)
    if not 1 <= n <= MAX_UNITS:
        raise UsageError(f"{param('n_units')} must be 1 .. {MAX_UNITS:,}, got {n:,}")
    if len(arr) and (int(arr.min()) < 0 or int(arr.max()) >= n):
        bad = int(arr.min()) if int(arr.min()) < 0 else int(arr.max())
        raise UsageError(f"{param('units')}: code {bad} is outside 0 .. {n - 1}")
    return arr, n


def triple_statistics(engine: Any, units: Any = None, n_units: int | None = None, *, min_tasks: int = 1,
                      max_memory: memory.MaxMemory = None) -> TripleStats:
    """Third-order co-occurrence statistics of the triples of units sharing at least ``min_tasks`` tasks.

    Three ``map_reduce`` passes over ``engine`` (any engine of the block
    protocol; the same integers for any engine, thread count or
    partitioning): a bound (what the passes would hold, refused up front),
    the index (one key per task and co-labelled triple: the counts of
    shared tasks), the statistics (only for the triples kept).  Sparse:
    only co-labelled triples are keyed, never a dense n_units³ × K³
    table -- the kept triples' joint counts are the only T × K³ array.

    Parameters
    ----------
    engine : object with ``map_reduce(fn, params)``
    units : array-like of int, shape (n_workers,), optional
        Each worker's unit (default: each worker its own).  An answer triple
        takes one answer from each of three different units on one task,
        every combination: with the three worker groups of Spectral-DS as
        units, ``joint[0] = Σ_n x_a ⊗ x_b ⊗ x_c``, the group views being
        each task's sums of one-hot answers.  Workers of one unit are never
        combined with each other.
    n_units : int, optional
        How many units (default ``max(units) + 1``).
    min_tasks : int
        Triples sharing fewer tasks are left out (``dropped`` counts them).
    max_memory : int, float, str or None

    Returns
    -------
    TripleStats

    Raises
    ------
    ResourceError
        When the answer triples a pass would hold, or the kept triples' K³ counts, exceed ``max_memory``
        (a task answered by n workers has n(n − 1)(n − 2)/6 answer triples).
    """
    bound, _ = _check_engine(engine).map_reduce(triple_bound_block, None)  # answer_pairs: here the answer triples
    w, k = bound.n_workers, bound.n_classes
    arr, u = _check_units(units, n_units, w)
    if isinstance(min_tasks, bool) or not isinstance(min_tasks, (int, np.integer)) or min_tasks < 1:
        raise UsageError(f"{param('min_tasks')} must be an integer >= 1, got {min_tasks!r}")
    space = u ** 3
    most = bound.answer_pairs  # answer triples, all blocks
    # a block: its keys, their radix sort's copies (5 × 8 bytes each); the tree: the counts form until dense
    need = 40 * bound.largest_block * threads.count() + min(8 * most, 8 * space) + 24 * min(most, space)
    memory.check(need, f"up to {most:,} answer triples of {u:,} units, {bound.largest_block:,} in the largest "
                       "block (a task answered by n workers has n(n-1)(n-2)/6)", max_memory)
    params = TripleParams(arr, u, w, k)
    total, _ = engine.map_reduce(triple_index_block, params)
    if total.keys is None:
        assert total.values is not None
        keys = np.flatnonzero(total.values).astype(np.int64)
        counts = total.values[keys]
    else:
        keys, counts = _count_runs(total.keys, max(space - 1, 0))
    kept = counts >= min_tasks
    dropped = int(len(keys) - kept.sum())
    keys, counts = keys[kept], counts[kept]
    n_kept = len(keys)
    cells = n_kept * k ** 3
    if cells >= 2**63:
        raise DataError(f"{n_kept:,} triples × {k}³ classes exceed the int64 keys of the joint counts")
    need = 16 * bound.largest_block * threads.count() + min(8 * most, 8 * cells) + 8 * cells + _lookup_bytes(
        n_kept, space)
    memory.check(need, f"{n_kept:,} triples of units × {k}³ classes (min_tasks={min_tasks})", max_memory)
    ranked, table = key_lookup(keys, space)
    total, _ = engine.map_reduce(triple_stats_block, TripleParams(arr, u, w, k, keys, ranked, table))
    joint = total.dense(cells).reshape(n_kept, k, k, k)
    triples = np.empty((n_kept, 3), dtype=np.int32)
    triples[:, 0] = keys // (u * u)
    triples[:, 1] = keys // u % u
    triples[:, 2] = keys % u
    return TripleStats(triples, joint, counts.astype(np.int64), u, k, dropped)


__all__ = ["DENSE_SWITCH", "LOOKUP_BYTES_PER_PAIR", "LOOKUP_MIN_BYTES", "MAX_UNITS", "CoOccurrence", "PairBound",
           "PairIndex", "PairSet", "SparseSum", "StatsParams", "TripleParams", "TripleStats", "bound_block",
           "co_occurrence", "index_block", "key_lookup", "label_block", "label_counts", "pair_index", "pair_lookup",
           "pair_statistics", "stats_block", "triple_bound_block", "triple_index_block", "triple_stats_block",
           "triple_statistics"]
