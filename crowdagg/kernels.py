"""numba kernels over the flat answer arrays.

Every kernel is pure: arrays and numbers in, arrays out (or filled in place
when the caller owns the buffer), no Python objects, no randomness.  The
answers are sorted by task and described by ``task_ptr`` (CSR offsets), so a
kernel streams each task's answers contiguously.

Chunked kernels split the tasks into a fixed number of chunks that depends
only on the data size (:func:`chunk_bounds`), each chunk accumulating its own
partial sums, which are then added in chunk order.  Results are therefore
bit-identical whatever the number of threads.  The same layout is what a
distributed engine needs: per-partition count tensors that are summed.

Confusion layout inside kernels is ``log_conf[w, observed, true]`` so that
one answer reads one contiguous row of K values; the public layout
(``AggregationResult.confusion``) is ``[w, true, observed]``.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache, partial
from typing import Any

import numpy as np
from numba import njit

#: Upper bound on the memory of per-chunk partial count tensors.
_CHUNK_BUFFER_BYTES = 64 * 2**20
_ANSWERS_PER_CHUNK = 50_000
_MAX_CHUNKS = 16


def em_chunk_count(n_answers: int, n_tasks: int, n_workers: int, n_classes: int) -> int:
    """Number of chunks for EM on data of this shape (never depends on the thread count)."""
    per_chunk_bytes = max(n_workers * n_classes * n_classes * 8, 1)
    return min(
        _MAX_CHUNKS,
        max(1, n_answers // _ANSWERS_PER_CHUNK),
        max(1, _CHUNK_BUFFER_BYTES // per_chunk_bytes),
        max(1, n_tasks),
    )


def chunk_bounds(task_ptr: np.ndarray, n_workers: int, n_classes: int) -> np.ndarray:
    """Task boundaries of the parallel chunks, shape (n_chunks + 1,), int64.

    The number of chunks depends only on the data shape, never on the
    thread count, so sums are reproducible across machines.
    """
    n_answers = int(task_ptr[-1])
    n_tasks = len(task_ptr) - 1
    n_chunks = em_chunk_count(n_answers, n_tasks, n_workers, n_classes)
    targets = np.linspace(0, n_answers, n_chunks + 1)
    bounds = np.searchsorted(task_ptr, targets, side="left").astype(np.int64)
    bounds[0], bounds[-1] = 0, n_tasks
    return np.maximum.accumulate(bounds)


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
    O(n + n_groups).
    """
    return _group_order(np.ascontiguousarray(keys), int(n_groups))


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
    cell of each answer: O(L), nothing to compile.
    """
    cell = task.astype(np.int64) * n_classes + label
    weights = None if worker_weight is None else np.asarray(worker_weight, dtype=np.float64)[worker]
    counts = np.bincount(cell, weights=weights, minlength=n_tasks * n_classes)
    return counts.astype(np.float64, copy=False).reshape(n_tasks, n_classes)


@njit(cache=True, nogil=True)
def _em_chunks(
    chunks, e_step, task_ptr, cell, log_prior, log_conf, clamp, bounds, post, counts, class_tot, loglik
):  # pragma: no cover - compiled
    """EM pass over the tasks of the given chunks: E-step fused with the M-step statistics.

    For each task t of chunk c, when ``e_step``:
    ``post[t] = softmax(log_prior + sum_e log_conf[w_e, y_e, :])`` (or one-hot
    at ``clamp[t]`` when ``clamp[t] >= 0``) and its log-evidence is summed
    into ``loglik[c]``; otherwise ``post[t]`` is taken as given.  Either way
    the posterior is added to ``counts[c, w_e, y_e, :]`` and
    ``class_tot[c, :]``.  ``cell[e]`` is ``w_e * K + y_e``.

    The per-answer table offsets are unsigned: numba then skips the
    negative-index wrap-around test on those accesses (~20% of the time).
    """
    n_classes = class_tot.shape[1]
    nk = np.uint64(n_classes)
    # Flat views: one answer touches the K contiguous cells from cell[e] * K.
    lc = log_conf.reshape(-1)
    q = np.empty(n_classes, dtype=np.float64)
    for i in range(chunks.shape[0]):
        c = chunks[i]
        cnt = counts[c].reshape(-1)
        cnt[:] = 0.0
        ll = 0.0
        # Chunk-local totals: rows of class_tot share cache lines across threads.
        tot = np.zeros(n_classes, dtype=np.float64)
        for t in range(bounds[c], bounds[c + 1]):
            start = task_ptr[t]
            stop = task_ptr[t + 1]
            if not e_step:
                for k in range(n_classes):
                    q[k] = post[t, k]
            elif clamp[t] >= 0:
                g = clamp[t]
                s = log_prior[g]
                for e in range(start, stop):
                    s += lc[np.uint64(cell[e]) * nk + np.uint64(g)]
                ll += s
                for k in range(n_classes):
                    q[k] = 0.0
                q[g] = 1.0
            else:
                for k in range(n_classes):
                    q[k] = log_prior[k]
                for e in range(start, stop):
                    base = np.uint64(cell[e]) * nk
                    for k in range(n_classes):
                        q[k] += lc[base + np.uint64(k)]
                m = q[0]
                for k in range(1, n_classes):
                    if q[k] > m:
                        m = q[k]
                z = 0.0
                for k in range(n_classes):
                    q[k] = np.exp(q[k] - m)
                    z += q[k]
                inv = 1.0 / z
                for k in range(n_classes):
                    q[k] *= inv
                ll += m + np.log(z)
            for k in range(n_classes):
                post[t, k] = q[k]
                tot[k] += q[k]
            for e in range(start, stop):
                base = np.uint64(cell[e]) * nk
                for k in range(n_classes):
                    cnt[base + np.uint64(k)] += q[k]
        class_tot[c, :] = tot
        loglik[c] = ll


def n_threads() -> int:
    """Threads used by the chunked kernels (``NUMBA_NUM_THREADS``, default: all cores)."""
    from numba import config

    return max(1, int(config.NUMBA_NUM_THREADS))  # type: ignore[attr-defined]


@lru_cache(maxsize=1)
def _pool(threads: int) -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=threads, thread_name_prefix="crowdagg")


def run_chunks(kernel: Callable[..., None], n_chunks: int, *args: Any) -> None:
    """Run ``kernel(chunk_ids, *args)`` over all chunks, spread over threads.

    The kernels release the GIL (``nogil=True``) and each chunk writes only
    its own slots, so plain Python threads run them in parallel, and the
    result does not depend on which thread ran which chunk.  (A numba
    ``parallel=True`` kernel would do the same but costs seconds more to
    compile on first use, and its thread-pool start-up dominates small inputs.)
    """
    ids = np.arange(n_chunks, dtype=np.int64)
    threads = min(n_threads(), n_chunks)
    if threads <= 1:
        kernel(ids, *args)
        return
    pool = _pool(n_threads())
    futures = [pool.submit(kernel, ids[i::threads], *args) for i in range(1, threads)]
    kernel(ids[0::threads], *args)  # this thread takes the first share
    for f in futures:
        f.result()


class EMWorkspace:
    """Buffers reused across EM iterations (allocated once per fit).

    Shapes: ``post`` (n_tasks, K); ``counts`` (n_chunks, n_workers, K, K) in
    ``[chunk, worker, observed, true]`` order; ``class_tot`` (n_chunks, K).
    """

    def __init__(self, task_ptr: np.ndarray, worker: np.ndarray, label: np.ndarray, n_workers: int, n_classes: int):
        self.task_ptr = np.ascontiguousarray(task_ptr, dtype=np.int64)
        # Flat (worker, observed) cell of each answer: one load per answer, and
        # cell * K indexes the K contiguous entries of the log-confusion and count tables.
        self.cell = (np.asarray(worker, dtype=np.int64) * n_classes + label).astype(np.int32)
        self.bounds = chunk_bounds(self.task_ptr, n_workers, n_classes)
        n_chunks = len(self.bounds) - 1
        n_tasks = len(self.task_ptr) - 1
        self.post = np.zeros((n_tasks, n_classes), dtype=np.float64)
        self.counts = np.zeros((n_chunks, n_workers, n_classes, n_classes), dtype=np.float64)
        self.class_tot = np.zeros((n_chunks, n_classes), dtype=np.float64)
        self.loglik = np.zeros(n_chunks, dtype=np.float64)

    def e_step(self, log_prior: np.ndarray, log_conf_ot: np.ndarray, clamp: np.ndarray) -> float:
        """Posteriors into ``self.post``; returns the observed-data log-likelihood.

        ``log_conf_ot`` has shape (n_workers, K, K) indexed ``[w, observed, true]``.
        """
        run_chunks(
            _em_chunks, len(self.bounds) - 1,
            True, self.task_ptr, self.cell,
            np.ascontiguousarray(log_prior, dtype=np.float64),
            np.ascontiguousarray(log_conf_ot, dtype=np.float64),
            np.ascontiguousarray(clamp, dtype=np.int64),
            self.bounds, self.post, self.counts, self.class_tot, self.loglik,
        )
        return float(self.loglik.sum())

    def accumulate(self, post: np.ndarray) -> None:
        """Fill the sufficient statistics from given posteriors (no E-step)."""
        self.post[...] = post
        k = self.post.shape[1]
        run_chunks(
            _em_chunks, len(self.bounds) - 1,
            False, self.task_ptr, self.cell, np.zeros(k), np.zeros((1, k, k)),
            np.full(self.post.shape[0], -1, dtype=np.int64),
            self.bounds, self.post, self.counts, self.class_tot, self.loglik,
        )

    def stats(self) -> tuple[np.ndarray, np.ndarray]:
        """Summed statistics: counts (n_workers, K_observed, K_true), class totals (K,)."""
        if self.counts.shape[0] == 1:
            return self.counts[0], self.class_tot[0]
        return self.counts.sum(axis=0), self.class_tot.sum(axis=0)


# --------------------------------------------------------------------------- ingest
@njit(cache=True, nogil=True)
def _count_tasks(task, lo, hi, counts):  # pragma: no cover - compiled
    for i in range(lo, hi):
        counts[task[i]] += 1


@njit(cache=True, nogil=True)
def _scatter(task, worker, label, lo, hi, fill, w_out, y_out):  # pragma: no cover - compiled
    """Rows lo:hi to their sorted places: ``fill[t]`` is the next free place of task ``t`` (advanced)."""
    for i in range(lo, hi):
        t = task[i]
        p = fill[t]
        w_out[p] = worker[i]
        y_out[p] = label[i]
        fill[t] = p + 1


@njit(cache=True, nogil=True)
def _fill_tasks(ptr, t_lo, t_hi, t_out):  # pragma: no cover - compiled
    for t in range(t_lo, t_hi):
        for p in range(ptr[t], ptr[t + 1]):
            t_out[p] = t


#: Below this many answers the ingest kernels run on one thread (threads cost more than they save).
_PARALLEL_ANSWERS = 4_000_000


def _two_threads(jobs: list[Callable[[], Any]]) -> list[Any]:
    """Run the jobs (nogil kernels) on two threads; results in order."""
    if len(jobs) == 1:
        return [jobs[0]()]
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = [pool.submit(job) for job in jobs[1:]]
        first = jobs[0]()
        return [first, *(f.result() for f in futures)]


def sort_by_task(
    task: np.ndarray, worker: np.ndarray, label: np.ndarray, n_tasks: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(task_ptr, task, worker, label) sorted by task, stable (each task's answers keep input order).

    A counting sort, O(L + n_tasks): count, then scatter worker and label in
    one pass.  Large inputs are cut in two halves counted and scattered on
    two threads -- the first half's answers of a task go before the
    second's, so the result is the same stable order.
    """
    task, worker, label = (np.ascontiguousarray(a) for a in (task, worker, label))
    n = task.shape[0]
    n_tasks = int(n_tasks)
    halves = [(0, n)] if n < _PARALLEL_ANSWERS else [(0, n // 2), (n // 2, n)]
    counts = [np.zeros(n_tasks, dtype=np.int64) for _ in halves]
    _two_threads([partial(_count_tasks, task, h[0], h[1], c) for c, h in zip(counts, halves)])
    ptr = np.zeros(n_tasks + 1, dtype=np.int64)
    np.cumsum(counts[0] if len(counts) == 1 else counts[0] + counts[1], out=ptr[1:])
    fills = [ptr[:-1].copy()]
    if len(halves) == 2:
        fills.append(ptr[:-1] + counts[0])
    del counts
    w_out = np.empty_like(worker)
    y_out = np.empty_like(label)
    t_out = np.empty_like(task)
    _two_threads([partial(_scatter, task, worker, label, h[0], h[1], f, w_out, y_out) for f, h in zip(fills, halves)])
    mid = int(np.searchsorted(ptr, n // 2)) if len(halves) == 2 else n_tasks
    _two_threads([partial(_fill_tasks, ptr, lo, hi, t_out) for lo, hi in ((0, mid), (mid, n_tasks)) if hi > lo or lo == 0])
    return ptr, t_out, w_out, y_out


@njit(cache=True, nogil=True)
def _repeats(task_ptr, t_lo, t_hi, worker, n_workers, from_end, out):  # pragma: no cover - compiled
    last = np.full(n_workers, -1, dtype=np.int64)  # the last task each worker was seen on
    mark = out.shape[0] > 0
    count = 0
    for t in range(t_lo, t_hi):
        lo = task_ptr[t]
        hi = task_ptr[t + 1]
        for j in range(hi - lo):
            p = hi - 1 - j if from_end else lo + j
            w = worker[p]
            if last[w] == t:
                count += 1
                if mark:
                    out[p] = True
            else:
                last[w] = t
    return count


def repeated_answers(
    task_ptr: np.ndarray, worker: np.ndarray, n_workers: int, *, keep: str = "first", mark: bool = True
) -> tuple[int, np.ndarray]:
    """Answers repeating a (task, worker) pair, on answers sorted by task.

    One pass over each task's answers with each worker's last-seen task
    (O(L + n_workers), no hashing; two threads on two ranges of tasks for
    large inputs).  ``keep="first"`` flags every repeat after the first in
    input order, ``"last"`` every one before the last.  Returns (count,
    bool mask of shape (L,)) -- the mask is empty when not ``mark``.
    """
    worker = np.ascontiguousarray(worker)
    n = worker.shape[0]
    n_tasks = task_ptr.shape[0] - 1
    out = np.zeros(n if mark else 0, dtype=np.bool_)
    mid = int(np.searchsorted(task_ptr, n // 2)) if n >= _PARALLEL_ANSWERS else n_tasks
    ranges = [(0, mid)] + ([(mid, n_tasks)] if mid < n_tasks else [])
    counts = _two_threads(
        [partial(_repeats, task_ptr, r[0], r[1], worker, max(int(n_workers), 1), keep == "last", out) for r in ranges]
    )
    return int(sum(counts)), out


@njit(cache=True, nogil=True)
def _scan_records(buf, sep, quoting, n_cols, fill, lines, ws_only):  # pragma: no cover - compiled
    """One pass over delimited text: each record's first line, field count and whether it is blank.

    Records end at LF, CR or CRLF outside quotes; with ``quoting`` a field
    opening with ``"`` runs to the closing quote (``""`` inside is a quote).
    A record is *blank* when it is all ASCII whitespace, with its first field
    holding any of it and its other fields empty (a line of spaces, or of
    bare tabs in TSV; ``,,`` is a row of blank cells).  Records with ``n_cols`` fields (the rows a parser keeps)
    after the first (the header) are counted and, with ``fill``, their
    first line and blankness stored.  Returns (kept rows, blank non-empty
    records with another field count, other records with another field
    count); empty lines count nowhere.
    """
    n = buf.shape[0]
    i = 0
    line = 1
    record = 0
    kept = 0
    blank_other = 0
    bad_other = 0
    while i < n:
        start_line = line
        start = i
        fields = 1
        blank = True
        at_field_start = True
        while i < n:
            c = buf[i]
            if quoting and at_field_start and c == 34:
                blank = False
                i += 1
                while i < n:
                    c = buf[i]
                    if c == 10 or (c == 13 and (i + 1 >= n or buf[i + 1] != 10)):
                        line += 1  # LF, CRLF and a lone CR are each one line break
                    if c == 34:
                        if i + 1 < n and buf[i + 1] == 34:
                            i += 2
                            continue
                        break
                    i += 1
                if i >= n:
                    bad_other += 1  # a quoted field never closed
                i += 1
                at_field_start = False
                continue
            if c == 10 or c == 13:
                break
            if c == sep:
                fields += 1
                at_field_start = True
                if sep != 9:
                    blank = False  # ",," is a row of blank cells, not a blank line
            else:
                at_field_start = False
                if fields > 1 or not (c == 32 or c == 9 or c == 11 or c == 12):
                    blank = False  # a byte in a later field, or a non-space in the first
            i += 1
        end = i
        # the line end: LF, CR or CRLF
        if i < n:
            if buf[i] == 13 and i + 1 < n and buf[i + 1] == 10:
                i += 1
            line += 1
            i += 1
        if record > 0:
            if fields == n_cols:
                if fill:
                    lines[kept] = start_line
                    ws_only[kept] = blank
                kept += 1
            elif blank and fields < n_cols:
                if end > start:  # empty lines are not rows at all
                    blank_other += 1
            else:
                bad_other += 1
        record += 1
    return kept, blank_other, bad_other


def scan_records(data: bytes, sep: str, quoting: bool, n_cols: int) -> tuple[np.ndarray, np.ndarray, int, int]:
    """(first line of each kept data row, which kept rows are blank lines, blank others, bad others).

    Kept rows are the records after the header with exactly ``n_cols``
    fields -- the rows a delimited-text parser returns -- so ``lines[r]`` is
    the physical line where row ``r`` starts.
    """
    buf = np.frombuffer(data, dtype=np.uint8)
    s, q, k = ord(sep), bool(quoting), int(n_cols)
    empty_l, empty_b = np.zeros(0, np.int64), np.zeros(0, np.bool_)
    kept, blank_other, bad_other = _scan_records(buf, s, q, k, False, empty_l, empty_b)
    lines = np.empty(kept, dtype=np.int64)
    ws = np.empty(kept, dtype=np.bool_)
    _scan_records(buf, s, q, k, True, lines, ws)
    return lines, ws, blank_other, bad_other


@njit(cache=True, nogil=True)
def _quote_parity(buf):  # pragma: no cover - compiled
    odd = False
    spans = False
    for i in range(buf.shape[0]):
        c = buf[i]
        if c == 34:
            odd = not odd
        elif (c == 10 or c == 13) and odd:
            spans = True
    return spans, odd


def quote_parity(data: bytes) -> tuple[bool, bool]:
    """(whether a line break falls after an odd number of ``"``, whether the count is odd at the end).

    A quoted cell spanning lines always shows as the first; a stray ``"``
    inside an unquoted cell may too (a conservative answer).  O(bytes).
    """
    return _quote_parity(np.frombuffer(data, dtype=np.uint8))


def compiled(*kernels: Any) -> bool:
    """Whether numba's on-disk cache holds every given kernel (so a run will not compile them)."""
    import os

    for k in kernels:
        try:
            index = k._cache._cache_file._index_path
        except AttributeError:  # pragma: no cover - another numba layout: assume compiled
            continue
        if not os.path.exists(index):
            return False
    return True


def announce_compilation(stream: Any) -> None:
    """Say once, on a terminal, that the first run compiles the kernels (a few seconds, cached after)."""
    if stream is None or not getattr(stream, "isatty", lambda: False)():
        return
    if not compiled(_scatter, _repeats, _em_chunks):
        stream.write("compiling kernels, once (a few seconds; later runs reuse them)\n")
        stream.flush()


@njit(cache=True, nogil=True)
def _prefixed_max(offsets, data, prefix):  # pragma: no cover - compiled
    """Largest integer of a chunk of ``prefix`` + canonical digits strings; -1 if any string is not one."""
    p = prefix.shape[0]
    top = 0
    for i in range(offsets.shape[0] - 1):
        lo = offsets[i]
        hi = offsets[i + 1]
        n = hi - lo - p
        if n < 1 or n > 18 or (n > 1 and data[lo + p] == 48):  # "007" is not "7"
            return -1
        for k in range(p):
            if data[lo + k] != prefix[k]:
                return -1
        v = 0
        bad = False
        for k in range(lo + p, hi):
            d = np.int64(data[k]) - 48
            bad |= (d < 0) | (d > 9)
            v = v * 10 + d
        if bad:
            return -1
        if v > top:
            top = v
    return top


@njit(cache=True, nogil=True)
def _prefixed_codes(offsets, data, p, table, codes, base, first_row, n_codes):  # pragma: no cover - compiled
    """Codes of a chunk already checked by :func:`_prefixed_max` (prefix length ``p``)."""
    for i in range(offsets.shape[0] - 1):
        v = 0
        for k in range(offsets[i] + p, offsets[i + 1]):
            v = v * 10 + (np.int64(data[k]) - 48)
        c = table[v]
        if c < 0:
            c = n_codes
            table[v] = c
            first_row[c] = base + i
            n_codes += 1
        codes[base + i] = c
    return n_codes


def prefixed_int_codes(chunks: list[tuple[np.ndarray, np.ndarray]], prefix: bytes, n: int) -> Any:
    """Codes in order of first appearance for ids that are all ``prefix`` + an integer in canonical form.

    ``chunks`` are (offsets, data) of Arrow string chunks.  Such ids map
    one-to-one to their integers (no leading zeros, at most 18 digits), so a
    direct-address table indexed by the integer replaces hashing the text.
    Returns (codes int32, first row of each code int64) or None when an id
    has another form or the integers are too sparse for a table (at most
    4 entries per row).
    """
    pre = np.frombuffer(prefix, dtype=np.uint8)
    top = 0
    for offsets, data in chunks:
        m = _prefixed_max(offsets, data, pre)
        if m < 0:
            return None
        top = max(top, m)
    if top + 1 > max(4 * n, 1 << 16) or top >= 2**31 - 1:
        return None
    table = np.full(top + 1, -1, dtype=np.int32)
    codes = np.empty(n, dtype=np.int32)
    first_row = np.empty(min(n, top + 1), dtype=np.int64)
    n_codes = 0
    base = 0
    for offsets, data in chunks:
        n_codes = _prefixed_codes(offsets, data, len(prefix), table, codes, base, first_row, n_codes)
        base += offsets.shape[0] - 1
    return codes, first_row[:n_codes]
