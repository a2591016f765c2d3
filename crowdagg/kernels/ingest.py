"""Ingest kernels: the counting sort by task, repeated answers, record scanning, the name encoder's tables."""

from __future__ import annotations

from functools import partial

import numpy as np
from numba import njit

from . import schedule
from .schedule import two_threads


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


def sort_by_task(
    task: np.ndarray, worker: np.ndarray, label: np.ndarray, n_tasks: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(task_ptr, task, worker, label) sorted by task, stable (each task's answers keep input order).

    The codes are checked first (:func:`~crowdagg.kernels.validate.check_codes`:
    equal lengths, integers, ``0 <= task < n_tasks``, no negative worker or
    label); a bad one is a :class:`~crowdagg.errors.DataError`.  See
    :func:`_sort_by_task` for the algorithm.
    """
    from .validate import as_code_array, check_codes, check_count

    n_tasks = check_count(n_tasks, "n_tasks")
    check_codes(task, worker, label, n_tasks)
    task, worker, label = (as_code_array(a, r) for a, r in ((task, "task"), (worker, "worker"), (label, "label")))
    return _sort_by_task(task, worker, label, n_tasks)


def _sort_by_task(
    task: np.ndarray | list[np.ndarray], worker: np.ndarray | None = None, label: np.ndarray | None = None,
    n_tasks: int = 0,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """:func:`sort_by_task` on codes already known valid (the annotation set's builders).

    A counting sort, O(L + n_tasks): count, then scatter worker and label in
    one pass.  Large inputs are cut in two halves counted and scattered on
    two threads -- the first half's answers of a task go before the
    second's, so the result is the same stable order.

    Given the codes as a list ``[task, worker, label]`` (and no other
    reference to them), the list is emptied as the sort goes: the input
    worker and label codes are freed once scattered, before the sorted task
    codes are written, so at most 5 bytes an answer are held beyond the
    input (not 9).  Counts and fill pointers are int32 where the answers fit.
    """
    if isinstance(task, list):
        columns = task
        task, worker, label = (np.ascontiguousarray(a) for a in columns)
        columns[:] = [task]  # the caller keeps the task codes (a duplicate's input row), worker and label go
    else:
        task, worker, label = (np.ascontiguousarray(a) for a in (task, worker, label))
    n = task.shape[0]
    n_tasks = int(n_tasks)
    small = np.int32 if n < 2**31 - 1 else np.int64
    halves = [(0, n)] if n < schedule.PARALLEL_ANSWERS else [(0, n // 2), (n // 2, n)]
    counts = [np.zeros(n_tasks, dtype=small) for _ in halves]
    two_threads([partial(_count_tasks, task, h[0], h[1], c) for c, h in zip(counts, halves)])
    ptr = np.zeros(n_tasks + 1, dtype=np.int64)
    np.cumsum(counts[0] if len(counts) == 1 else np.add(counts[0], counts[1]), out=ptr[1:])
    fills = [ptr[:-1].astype(small)]
    if len(halves) == 2:
        fills.append(np.add(fills[0], counts[0]))
    del counts
    w_out = np.empty_like(worker)
    y_out = np.empty_like(label)
    two_threads([partial(_scatter, task, worker, label, h[0], h[1], f, w_out, y_out) for f, h in zip(fills, halves)])
    del fills, worker, label
    t_out = np.empty_like(task)
    mid = int(np.searchsorted(ptr, n // 2)) if len(halves) == 2 else n_tasks
    ranges = [(0, mid), (mid, n_tasks)] if mid < n_tasks else [(0, n_tasks)]
    two_threads([partial(_fill_tasks, ptr, lo, hi, t_out) for lo, hi in ranges])
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

    ``task_ptr`` (CSR offsets, non-decreasing from 0 to ``len(worker)``) and
    ``0 <= worker < n_workers`` are checked first (a
    :class:`~crowdagg.errors.DataError`); see :func:`_repeated_answers`.
    """
    from ..errors import UsageError, param
    from .validate import check_count, check_index, check_offsets

    if keep not in ("first", "last"):
        raise UsageError(f"{param('keep')} must be first or last, got {keep!r}")
    n_workers = check_count(n_workers, "n_workers")
    worker = check_index(worker, n_workers, "worker", "worker")
    task_ptr = check_offsets(task_ptr, len(worker))
    return _repeated_answers(task_ptr, worker, n_workers, keep=keep, mark=mark)


def _repeated_answers(
    task_ptr: np.ndarray, worker: np.ndarray, n_workers: int, *, keep: str = "first", mark: bool = True
) -> tuple[int, np.ndarray]:
    """:func:`repeated_answers` on valid offsets and codes (the annotation set's builders).

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
    mid = int(np.searchsorted(task_ptr, n // 2)) if n >= schedule.PARALLEL_ANSWERS else n_tasks
    ranges = [(0, mid)] + ([(mid, n_tasks)] if mid < n_tasks else [])
    counts = two_threads(
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
    from ..errors import UsageError, param

    buf = _bytes_array(data)
    if not isinstance(sep, str) or len(sep) != 1 or ord(sep) > 127:
        raise UsageError(f"{param('sep')} must be one ASCII character, got {sep!r}")
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
    return _quote_parity(_bytes_array(data))


def _bytes_array(data: object, name: str = "data") -> np.ndarray:
    """``data`` (bytes-like) as a uint8 array without a copy; text or anything else is a UsageError."""
    from ..errors import UsageError, param

    if isinstance(data, np.ndarray):
        if data.dtype == np.uint8 and data.ndim == 1:
            return data
        raise UsageError(f"{param(name)} must be bytes or a 1-D uint8 array, got dtype {data.dtype}, shape {data.shape}")
    try:
        return np.frombuffer(data, dtype=np.uint8)  # type: ignore[call-overload]
    except (TypeError, ValueError, BufferError):
        raise UsageError(f"{param(name)} must be bytes (the encoded text), got {type(data).__name__}") from None


@njit(cache=True, nogil=True)
def _prefixed_max(offsets, data, prefix):  # pragma: no cover - compiled
    """Largest integer of a chunk of ``prefix`` + canonical digits strings; -1 if any string is not one,
    -2 if an offset points outside ``data`` or runs backwards (checked in the same pass, before any read)."""
    p = prefix.shape[0]
    top = 0
    for i in range(offsets.shape[0] - 1):
        lo = offsets[i]
        hi = offsets[i + 1]
        if lo < 0 or hi < lo or hi > data.shape[0]:
            return -2
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


# --------------------------------------------------------------------------- growing vocabularies
#: The hash's constants, unsigned (numba mixes uint64 with int64 into float64: the hash stays uint64 throughout):
#: a multiplier a word (the 64-bit golden ratio, odd) and splitmix64's final mix.
_WORD_MUL = np.uint64(0x9E3779B97F4A7C15)
_MIX = np.uint64(0xBF58476D1CE4E5B9)
#: Rows hashed, then looked up, together: their table loads are independent, so their cache misses overlap.
_BATCH = 32


@njit(cache=True, nogil=True, inline="always")
def _load8(data, p):  # pragma: no cover - compiled
    """``data[p:p + 8]`` as a little-endian word: with an unsigned index (no negative-index fix-up) LLVM
    merges the eight byte loads into one unaligned load."""
    q = np.uint64(p)
    return (np.uint64(data[q]) | (np.uint64(data[q + np.uint64(1)]) << np.uint64(8))
            | (np.uint64(data[q + np.uint64(2)]) << np.uint64(16))
            | (np.uint64(data[q + np.uint64(3)]) << np.uint64(24))
            | (np.uint64(data[q + np.uint64(4)]) << np.uint64(32))
            | (np.uint64(data[q + np.uint64(5)]) << np.uint64(40))
            | (np.uint64(data[q + np.uint64(6)]) << np.uint64(48))
            | (np.uint64(data[q + np.uint64(7)]) << np.uint64(56)))


@njit(cache=True, nogil=True, inline="always")
def _short(data, lo, hi):  # pragma: no cover - compiled
    """A string of 1 to 7 bytes, ``data[lo:hi]``, as a little-endian word, zero above it: the eight
    bytes from ``lo`` masked where ``data`` holds them, else the eight ending at ``hi`` shifted down
    (what the shift keeps is the string's); byte by byte only in a buffer shorter than eight bytes."""
    n = hi - lo
    if lo + 8 <= data.shape[0]:
        return _load8(data, lo) & ((np.uint64(1) << np.uint64(8 * n)) - np.uint64(1))
    if hi >= 8:
        return _load8(data, hi - 8) >> np.uint64(8 * (8 - n))
    w = np.uint64(0)
    for k in range(n):
        w |= np.uint64(data[lo + k]) << np.uint64(8 * k)
    return w


@njit(cache=True, nogil=True, inline="always")
def _hash_bytes(data, lo, hi):  # pragma: no cover - compiled
    """A 64-bit hash of ``data[lo:hi]`` (as int64), then splitmix64's final mix (the table takes the low
    bits, the tag bits 32..62).

    Eight bytes a step, one multiply a word, the length mixed in first: a
    string of 8 bytes or more is read as its whole words and then the last
    eight bytes (overlapping the word before: no partial word, no branch on
    where the string lies in ``data``); a shorter one as one word (:func:`_short`).
    """
    n = hi - lo
    h = np.uint64(n) * _MIX
    if n >= 8:
        p = lo
        while p + 8 < hi:
            h = (h ^ _load8(data, p)) * _WORD_MUL
            p += 8
        h = (h ^ _load8(data, hi - 8)) * _WORD_MUL
    elif n > 0:
        h = (h ^ _short(data, lo, hi)) * _WORD_MUL
    h ^= h >> np.uint64(31)
    h *= _MIX
    h ^= h >> np.uint64(29)
    return np.int64(h)


@njit(cache=True, nogil=True, inline="always")
def _same_bytes(a, alo, b, blo, n):  # pragma: no cover - compiled
    """Whether ``a[alo:alo + n]`` equals ``b[blo:blo + n]``: a word at a time, as :func:`_hash_bytes`
    reads them."""
    if n < 8:
        return n == 0 or _short(a, alo, alo + n) == _short(b, blo, blo + n)
    k = 0
    while k + 8 < n:
        if _load8(a, alo + k) != _load8(b, blo + k):
            return False
        k += 8
    return _load8(a, alo + n - 8) == _load8(b, blo + n - 8)


@njit(cache=True, nogil=True)
def _hash_codes(offsets, data, start, codes, base, slots, limit, hashes, names_off, names_data, n_names):  # pragma: no cover
    """Codes of strings ``start..`` of a chunk against a growing vocabulary, new names appended in order.

    ``slots`` (power-of-two length, -1 empty) is an open-addressing table
    (linear probing) of codes, each with 31 bits of its name's hash above
    them (compared before the bytes, in the same cache line);
    ``hashes[c]``, ``names_off[c]:names_off[c + 1]`` of ``names_data`` are
    name ``c``'s hash and bytes.  Stops before a new name would make more
    than ``limit`` names (at most ``len(slots) - 1``: the caller grows the
    table and goes on from there); ``names_data`` must have room for every
    byte of the chunk, the other arrays for ``limit`` names.  Returns (names,
    strings done, a sum of the cache-warming loads: ignore it).

    Out of cache, a row's lookup is three dependent loads (its slot, the
    slot's name offset, the name's bytes).  Rows are taken :data:`_BATCH`
    at a time: their hashes first, then each of the three loads for the
    whole batch in a loop of its own -- loads independent of each other,
    whose cache misses the processor overlaps -- and only then the rows
    resolved one by one, in order, by the plain probe, which finds those
    lines in cache.  The early loads only warm the cache: a slot read early
    may be stale (a row before it in the batch took it), so the probe reads
    every slot afresh and the codes are exactly the row-by-row ones.
    """
    mask = slots.shape[0] - 1
    used = names_off[n_names]
    m = offsets.shape[0] - 1
    hs = np.empty(_BATCH, dtype=np.int64)
    seen = np.empty(_BATCH, dtype=np.int64)
    warm = np.int64(0)
    top = names_data.shape[0]
    for b0 in range(start, m, _BATCH):
        b1 = min(b0 + _BATCH, m)
        for i in range(b0, b1):
            hs[i - b0] = _hash_bytes(data, offsets[i], offsets[i + 1])
        for k in range(b1 - b0):
            seen[k] = slots[hs[k] & mask]
        for k in range(b1 - b0):
            e = seen[k]
            seen[k] = names_off[e & np.int64(0xFFFFFFFF)] if e >= 0 else top
        for k in range(b1 - b0):
            a = seen[k]
            if a < top:
                warm += names_data[a]
        for i in range(b0, b1):
            lo = offsets[i]
            hi = offsets[i + 1]
            h = hs[i - b0]
            tag = (h >> np.int64(32)) & np.int64(0x7FFFFFFF)
            j = h & mask
            while True:
                e = slots[j]
                if e < 0:
                    if n_names >= limit:
                        return n_names, i, warm
                    slots[j] = (tag << np.int64(32)) | n_names
                    hashes[n_names] = h
                    for p in range(lo, hi):
                        names_data[used] = data[p]
                        used += 1
                    n_names += 1
                    names_off[n_names] = used
                    codes[base + i] = n_names - 1
                    break
                if (e >> np.int64(32)) == tag:
                    s = e & np.int64(0xFFFFFFFF)
                    a = names_off[s]
                    if names_off[s + 1] - a == hi - lo and _same_bytes(names_data, a, data, lo, hi - lo):
                        codes[base + i] = s
                        break
                j = (j + 1) & mask
    return n_names, m, warm


@njit(cache=True, nogil=True)
def _rehash(hashes, n_names, slots):  # pragma: no cover - compiled
    """Fill an empty (all -1) ``slots`` table with codes ``0..n_names-1`` by their hashes (as
    :func:`_hash_codes`, batched like it: a batch's slots are read before any is written).  Returns a sum
    of the cache-warming loads (ignore it)."""
    mask = slots.shape[0] - 1
    warm = np.int64(0)
    for c0 in range(0, n_names, _BATCH):
        c1 = min(c0 + _BATCH, n_names)
        for c in range(c0, c1):
            warm += slots[hashes[c] & mask]
        for c in range(c0, c1):
            h = hashes[c]
            j = h & mask
            while slots[j] >= 0:
                j = (j + 1) & mask
            slots[j] = (((h >> np.int64(32)) & np.int64(0x7FFFFFFF)) << np.int64(32)) | c
    return warm


@njit(cache=True, nogil=True)
def _prefixed_block(offsets, data, p, table, codes, base, values, n_codes):  # pragma: no cover - compiled
    """Codes of a chunk checked by :func:`_prefixed_max`, against a growing direct-address ``table``
    (integer -> code, -1 unseen); ``values[c]`` records code ``c``'s integer.  Returns the new count."""
    for i in range(offsets.shape[0] - 1):
        v = 0
        for k in range(offsets[i] + p, offsets[i + 1]):
            v = v * 10 + (np.int64(data[k]) - 48)
        c = table[v]
        if c < 0:
            c = n_codes
            table[v] = c
            values[c] = v
            n_codes += 1
        codes[base + i] = c
    return n_codes
