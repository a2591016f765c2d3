"""Validation of code arrays handed in from outside: one pass, before any kernel indexes with them.

The other kernels index tables with the codes they are given (``counts[task[i]]``)
without bounds checks -- that is what makes them fast, and why a code out of
range would write outside an array and crash the interpreter.  Every public
entry that takes codes (:class:`crowdagg.data.annotations.AnnotationSet`, its
:meth:`~crowdagg.data.annotations.AnnotationSet.from_codes`, the public kernel wrappers)
runs them through :func:`check_codes` once; the package's own builders, which
make codes valid by construction, skip it.

One numba pass over the answers checks the range of each array, finds
whether the task array is sorted and the largest code of each (to infer a
size not given).  Errors name the array, the first bad position and value.
"""

from __future__ import annotations

import operator
import threading
import weakref
from typing import Any, NamedTuple

import numpy as np
from numba import njit

from ..errors import DataError, UsageError, param


@njit(cache=True, nogil=True)
def _scan_codes(task, worker, label, n_tasks, n_workers, n_classes):  # pragma: no cover - compiled
    """(bad array 0/1/2 or -1, its position, task sorted?, max task, max worker, max label).

    A size of -1 means "not known": only ``code >= 0`` is checked.  Codes
    are read as int64, so an unsigned code beyond int64 reads negative and
    is caught as out of range.
    """
    n = task.shape[0]
    is_sorted = True
    prev = np.int64(0)
    mt = np.int64(-1)
    mw = np.int64(-1)
    my = np.int64(-1)
    for i in range(n):
        t = np.int64(task[i])
        w = np.int64(worker[i])
        y = np.int64(label[i])
        if t < 0 or (n_tasks >= 0 and t >= n_tasks):
            return 0, i, is_sorted, mt, mw, my
        if w < 0 or (n_workers >= 0 and w >= n_workers):
            return 1, i, is_sorted, mt, mw, my
        if y < 0 or (n_classes >= 0 and y >= n_classes):
            return 2, i, is_sorted, mt, mw, my
        if t < prev:
            is_sorted = False
        prev = t
        if t > mt:
            mt = t
        if w > mw:
            mw = w
        if y > my:
            my = y
    return -1, -1, is_sorted, mt, mw, my


class CodeScan(NamedTuple):
    """What :func:`check_codes` found: whether the tasks are sorted, and each array's largest code (-1 if empty)."""

    task_sorted: bool
    max_task: int
    max_worker: int
    max_label: int


_ROLES = ("task", "worker", "label")
_UNITS = ("task", "worker", "class")


def as_code_array(values: object, name: str) -> np.ndarray:
    """``values`` as a 1-D numpy integer array (not copied when it already is one), or a DataError naming ``name``.

    Booleans and floats are refused, even whole-valued ones: a float code
    array usually means a missing value turned the column into floats; the
    message points at the first NaN.
    """
    arr = values if isinstance(values, np.ndarray) else np.asarray(values)
    if arr.ndim != 1:
        raise DataError(f"{name} codes must be a 1-D array, got shape {arr.shape}")
    if arr.size and not (np.issubdtype(arr.dtype, np.integer) and arr.dtype != np.bool_):
        where = ""
        if arr.dtype.kind == "f":
            nan = np.flatnonzero(np.isnan(arr))
            where = f" (first NaN at position {int(nan[0])})" if nan.size else " (convert with .astype(int))"
        raise DataError(f"{name} codes must be integers, got dtype {arr.dtype}{where}")
    if arr.size == 0 and not np.issubdtype(arr.dtype, np.integer):
        arr = arr.astype(np.int64)
    if not arr.dtype.isnative:  # big-endian data (from a file, ``>i4``): numba compiles native byte order only
        arr = arr.astype(arr.dtype.newbyteorder("="))
    return arr


def as_float_array(values: object, name: str, ndim: int) -> np.ndarray:
    """``values`` as a contiguous, native float64 array of ``ndim`` dimensions, or a DataError naming ``name``.

    For the numbers a kernel reads (parameters, given posteriors): anything
    numeric is converted (a copy where needed); text, objects or the wrong
    number of dimensions are refused before numba sees them.
    """
    arr = np.asarray(values)
    if arr.ndim != ndim:
        raise DataError(f"{name} must be a {ndim}-D array, got shape {arr.shape}")
    if arr.dtype.kind not in "biuf":
        raise DataError(f"{name} must hold numbers, got dtype {arr.dtype}")
    return np.ascontiguousarray(arr, dtype=np.float64)


def check_out_array(values: object, name: str, ndim: int) -> np.ndarray:
    """``values`` checked as an output buffer a kernel writes: a writable, native float64 ndarray of ``ndim`` dims.

    Not converted: a converted copy would receive the results instead of
    the caller's array.
    """
    if not isinstance(values, np.ndarray) or values.ndim != ndim or values.dtype != np.float64 \
            or not values.dtype.isnative or not values.flags.writeable:
        what = (f"{'read-only ' if not values.flags.writeable else ''}ndarray of dtype {values.dtype} "
                f"and shape {values.shape}") if isinstance(values, np.ndarray) else type(values).__name__
        raise DataError(f"{name} must be a writable float64 ndarray of {ndim} dimensions (it receives results), "
                        f"got {what}")
    return values


def check_count(n: object, name: str) -> int:
    """``n`` as a Python int, or a :class:`~crowdagg.errors.UsageError` unless it is an integer >= 0."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
        raise UsageError(f"{param(name)} must be an integer >= 0, got {n!r}")
    return int(n)


def check_codes(
    task: np.ndarray,
    worker: np.ndarray,
    label: np.ndarray,
    n_tasks: int = -1,
    n_workers: int = -1,
    n_classes: int = -1,
) -> CodeScan:
    """Check three code arrays of equal length against their sizes in one pass.

    Parameters
    ----------
    task, worker, label : integer ndarrays, shape (n_answers,)
        Codes as given (any integer dtype; see :func:`as_code_array`).
    n_tasks, n_workers, n_classes : int
        Codes must satisfy ``0 <= code < n``; ``-1`` checks ``code >= 0`` only.

    Returns
    -------
    CodeScan
        Whether ``task`` is non-decreasing, and the largest code of each.

    Raises
    ------
    DataError
        Naming the array, the first bad position and its value.
    """
    arrays = [as_code_array(a, r) for a, r in zip((task, worker, label), _ROLES)]
    lengths = [len(a) for a in arrays]
    if len(set(lengths)) != 1:
        raise DataError(
            "task, worker and label code arrays must have equal lengths, got "
            + ", ".join(f"{r} {n:,}" for r, n in zip(_ROLES, lengths))
        )
    sizes = (int(n_tasks), int(n_workers), int(n_classes))
    t, w, y = (np.ascontiguousarray(a) for a in arrays)
    bad, pos, is_sorted, mt, mw, my = _scan_codes(t, w, y, sizes[0], sizes[1], sizes[2])
    if bad >= 0:
        raise DataError(_range_message(_ROLES[bad], arrays[bad], int(pos), sizes[bad], _UNITS[bad]))
    return CodeScan(bool(is_sorted), int(mt), int(mw), int(my))


def check_index(values: np.ndarray, n: int, name: str, unit: str = "group") -> np.ndarray:
    """One code array checked against ``0 <= code < n`` (the same pass as :func:`check_codes`); returns it contiguous."""
    arr = np.ascontiguousarray(as_code_array(values, name))
    bad, pos, *_ = _scan_codes(arr, arr, arr, int(n), -1, -1)
    if bad >= 0:
        raise DataError(_range_message(name, arr, int(pos), int(n), unit))
    return arr


def check_offsets(ptr: np.ndarray, n_items: int, name: str = "task_ptr", items: str = "answers") -> np.ndarray:
    """Offsets checked: int64-able, non-decreasing, from 0 to ``n_items``; returns them as contiguous int64.

    CSR offsets (``task_ptr``: ``n_items`` answers) and block boundaries
    (``bounds``: ``n_items`` tasks) alike; ``items`` names what is counted.
    """
    arr = as_code_array(ptr, name)
    if arr.size == 0 or int(arr[0]) != 0 or int(arr[-1]) != n_items:
        first = int(arr[0]) if arr.size else None
        last = int(arr[-1]) if arr.size else None
        raise DataError(f"{name} must run from 0 to {n_items:,} (the number of {items}), got {first} .. {last}")
    arr = np.ascontiguousarray(arr, dtype=np.int64)
    steps = np.diff(arr)
    if steps.size and steps.min() < 0:
        pos = int(np.flatnonzero(steps < 0)[0]) + 1
        raise DataError(f"{name} must be non-decreasing; position {pos} holds {int(arr[pos])} after {int(arr[pos - 1])}")
    return arr


#: The partitions :func:`check_part` has checked, with what it checked (by identity; forgotten with the partition).
_checked_parts: weakref.WeakKeyDictionary[Any, tuple[Any, ...]] = weakref.WeakKeyDictionary()
_check_lock = threading.Lock()


#: What a partition has that the checks read.
_PART_FIELDS = ("worker", "label", "task_ptr", "bounds", "n_workers", "n_classes", "first_task", "first_block",
                "n_blocks_total")


def _part_key(part: Any) -> tuple[Any, ...]:
    """What a check of ``part`` covered: its arrays (by identity) and sizes -- reassigning any asks for a new check."""
    return (id(part.worker), id(part.label), id(part.task_ptr), id(part.bounds), part.n_workers, part.n_classes,
            part.first_task, part.first_block, part.n_blocks_total)


def check_part(part: Any) -> None:
    """A partition (:class:`crowdagg.engine.Part`) checked before a block kernel trusts its arrays, once per partition.

    Codes in range (``0 <= worker < n_workers``, ``0 <= label < n_classes``),
    task offsets and block bounds in order and consistent with the answers,
    its place in the grid and in the task order non-negative.  One pass over
    its answers the first time any block function sees it (again if an array
    or a size is reassigned); a :class:`~crowdagg.errors.DataError` naming
    what is wrong, never a read or write outside an array.  Something that is
    not a partition at all is a :class:`~crowdagg.errors.UsageError`.
    """
    if not all(hasattr(part, name) for name in _PART_FIELDS):
        raise UsageError(f"a block function takes a partition (crowdagg.engine.Part: an engine's parts), got "
                         f"{type(part).__name__}")
    key = _part_key(part)
    if _checked_parts.get(part) == key:
        return
    with _check_lock:
        if _checked_parts.get(part) == key:
            return
        n_workers, k = check_count(part.n_workers, "n_workers"), check_count(part.n_classes, "n_classes")
        for name in ("first_task", "first_block", "n_blocks_total"):
            check_count(getattr(part, name), name)
        if len(part.worker) != len(part.label):
            raise DataError(f"worker and label arrays differ in length ({len(part.worker):,}, {len(part.label):,})")
        check_offsets(part.task_ptr, len(part.worker))
        check_offsets(part.bounds, len(part.task_ptr) - 1, "bounds", "tasks")
        if part.task_ptr.dtype != np.int64 or not part.task_ptr.flags.c_contiguous:
            raise DataError("a partition's task_ptr must be contiguous int64")
        n_blocks = len(part.bounds) - 1
        if part.first_block + n_blocks > part.n_blocks_total:
            raise DataError(f"a partition's blocks {part.first_block:,} .. {part.first_block + n_blocks - 1:,} lie "
                            f"beyond the grid's {part.n_blocks_total:,} blocks")
        check_index(part.worker, n_workers, "worker", "worker")
        check_index(part.label, k, "label", "class")
        for name in ("worker", "label"):
            arr = getattr(part, name)
            if not arr.dtype.isnative:  # the kernels read them as they are: numba compiles native byte order only
                raise DataError(f"a partition's {name} codes must be in native byte order, got {arr.dtype}")
        _checked_parts[part] = key


def check_block(part: Any, b: object) -> int:
    """Local block index ``b`` of ``part`` as an int: a :class:`~crowdagg.errors.DataError` unless it is one of
    the partition's blocks (a :class:`~crowdagg.errors.UsageError` when it is not an integer)."""
    try:
        i = operator.index(b)  # type: ignore[arg-type]
    except TypeError:
        raise UsageError(f"a block index must be an integer, got {b!r}") from None
    if not 0 <= i < len(part.bounds) - 1:
        raise DataError(f"block {i} is not one of the partition's {len(part.bounds) - 1} blocks")
    return int(i)


def _range_message(role: str, arr: np.ndarray, pos: int, n: int, unit: str) -> str:
    value = arr[pos].item()
    if n < 0:
        return f"{role} code {value} at position {pos} is negative (codes are 0-based indices)"
    return (
        f"{role} code {value} at position {pos} is out of range for {n:,} {unit}"
        f"{'es' if unit == 'class' else 's'} (codes must be 0 <= code < {n:,})"
    )


__all__ = ["CodeScan", "as_code_array", "as_float_array", "check_block", "check_codes", "check_count", "check_index",
           "check_offsets", "check_out_array", "check_part"]
