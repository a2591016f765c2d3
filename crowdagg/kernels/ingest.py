"""Ingest kernels: the counting sort by task, repeated answers, record scanning, integer-like ids."""

from __future__ import annotations

from functools import partial
from typing import Any

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
    4 entries per row).  Offsets outside the data, or chunks not holding
    ``n`` strings in all, are a :class:`~crowdagg.errors.DataError`.
    """
    from ..errors import DataError
    from .validate import as_code_array

    pre = _bytes_array(prefix, "prefix")
    # Integer offsets and byte data in numba's native layout, before any kernel reads them.
    chunks = [(np.ascontiguousarray(as_code_array(offsets, "offsets")), _bytes_array(data)) for offsets, data in chunks]
    if sum(max(len(offsets) - 1, 0) for offsets, _ in chunks) != n:
        raise DataError(f"the chunks hold {sum(max(len(o) - 1, 0) for o, _ in chunks):,} strings, not n={n:,}")
    top = 0
    for offsets, data in chunks:
        m = _prefixed_max(offsets, data, pre)
        if m == -2:
            raise DataError("a string offset points outside its chunk's data, or offsets run backwards")
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


# --------------------------------------------------------------------------- growing vocabularies
#: Multiplier of the hash's final mix (splitmix64's), as a signed int64: numba's int64 arithmetic wraps.
_MIX = np.int64(-4658895280553007687)


@njit(cache=True, nogil=True)
def _hash_bytes(data, lo, hi):  # pragma: no cover - compiled
    h = np.int64(hi - lo)
    for p in range(lo, hi):
        h = h * np.int64(31) + np.int64(data[p])
    h ^= h >> np.int64(31)
    h *= _MIX
    h ^= h >> np.int64(29)
    return h


@njit(cache=True, nogil=True)
def _hash_codes(offsets, data, start, codes, base, slots, hashes, names_off, names_data, n_names):  # pragma: no cover
    """Codes of strings ``start..`` of a chunk against a growing vocabulary, new names appended in order.

    ``slots`` (power-of-two length, -1 empty) is an open-addressing table
    of codes, each with 31 bits of its name's hash above them (compared
    before the bytes, in the same cache line); ``hashes[c]``,
    ``names_off[c]:names_off[c + 1]`` of ``names_data`` are name ``c``'s
    hash and bytes.  Stops before a new name would fill
    more than 5/8 of ``slots`` (the caller grows the table and goes on from
    there); ``names_data`` must have room for every byte of the chunk, the
    other arrays for ``5 * len(slots) // 8`` names.  Returns (names, strings done).
    """
    mask = slots.shape[0] - 1
    limit = (slots.shape[0] * 5) >> 3
    used = names_off[n_names]
    for i in range(start, offsets.shape[0] - 1):
        lo = offsets[i]
        hi = offsets[i + 1]
        h = _hash_bytes(data, lo, hi)
        tag = (h >> np.int64(32)) & np.int64(0x7FFFFFFF)
        j = h & mask
        while True:
            e = slots[j]
            if e < 0:
                if n_names >= limit:
                    return n_names, i
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
                if names_off[s + 1] - a == hi - lo:
                    same = True
                    for k in range(hi - lo):
                        if names_data[a + k] != data[lo + k]:
                            same = False
                            break
                    if same:
                        codes[base + i] = s
                        break
            j = (j + 1) & mask
    return n_names, offsets.shape[0] - 1


@njit(cache=True, nogil=True)
def _rehash(hashes, n_names, slots):  # pragma: no cover - compiled
    """Fill an empty (all -1) ``slots`` table with codes ``0..n_names-1`` by their hashes (as :func:`_hash_codes`)."""
    mask = slots.shape[0] - 1
    for c in range(n_names):
        h = hashes[c]
        j = h & mask
        while slots[j] >= 0:
            j = (j + 1) & mask
        slots[j] = (((h >> np.int64(32)) & np.int64(0x7FFFFFFF)) << np.int64(32)) | c


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
