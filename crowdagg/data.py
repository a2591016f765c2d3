"""The annotation set: the one in-memory data model every method reads.

An :class:`AnnotationSet` holds the ``L`` observed answers as three flat
arrays -- ``task`` (int32), ``worker`` (int32) and ``label`` (int8, or int16
beyond 127 classes) -- sorted by task, so kernels stream over them, plus the
vocabularies that map indices back to the original names (always strings).

Task and worker indices follow the order in which tasks and workers first
appear in the input, so outputs come back in input order.  CSR offsets per
task (``task_ptr``) and, lazily, per worker (``worker_order``/``worker_ptr``)
serve methods that walk the bipartite task--worker graph.  There is no dense
tasks x workers matrix anywhere.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Literal

import numpy as np

from .errors import DataError, UsageError

DuplicatePolicy = Literal["keep", "first", "last", "error"]
DUPLICATE_POLICIES: tuple[str, ...] = ("keep", "first", "last", "error")

#: More distinct numeric labels than this, not forming a 0..K-1 / 1..K code,
#: means the column holds measurements rather than classes.
MAX_NUMERIC_CLASSES = 20


def _label_dtype(n_classes: int) -> type[np.signedinteger]:
    return np.int8 if n_classes <= 127 else np.int16


@dataclass(frozen=True, eq=False)
class AnnotationSet:
    """Crowd answers in flat-array form, sorted by task.

    Attributes
    ----------
    task : ndarray of int32, shape (n_answers,)
        Task index of each answer, non-decreasing.
    worker : ndarray of int32, shape (n_answers,)
        Worker index of each answer.
    label : ndarray of int8 or int16, shape (n_answers,)
        Class index of each answer.
    task_names, worker_names : ndarray of str (object), shapes (n_tasks,), (n_workers,)
        Original identifiers, in order of first appearance in the input.
    classes : tuple of str, length n_classes
        Class names; ``label`` indexes into it.
    n_duplicates : int
        Answers in the input that repeated an earlier (task, worker) pair.
    duplicates : str
        What was done with them: ``keep`` (still in the set), ``first`` or
        ``last`` (dropped, keeping that one).
    """

    task: np.ndarray
    worker: np.ndarray
    label: np.ndarray
    task_names: np.ndarray
    worker_names: np.ndarray
    classes: tuple[str, ...]
    n_duplicates: int = 0
    duplicates: str = "keep"

    # ------------------------------------------------------------------ sizes
    @property
    def n_tasks(self) -> int:
        return len(self.task_names)

    @property
    def n_workers(self) -> int:
        return len(self.worker_names)

    @property
    def n_classes(self) -> int:
        return len(self.classes)

    @property
    def n_answers(self) -> int:
        return int(self.task.shape[0])

    def __len__(self) -> int:
        return self.n_answers

    def __repr__(self) -> str:
        return (
            f"AnnotationSet(n_answers={self.n_answers}, n_tasks={self.n_tasks}, "
            f"n_workers={self.n_workers}, classes={list(self.classes)!r})"
        )

    # ------------------------------------------------------------ CSR indices
    @cached_property
    def task_ptr(self) -> np.ndarray:
        """CSR offsets, shape (n_tasks + 1,): task ``t`` owns answers ``task_ptr[t]:task_ptr[t+1]``."""
        counts = np.bincount(self.task, minlength=self.n_tasks)
        ptr = np.zeros(self.n_tasks + 1, dtype=np.int64)
        np.cumsum(counts, out=ptr[1:])
        return ptr

    @cached_property
    def worker_order(self) -> np.ndarray:
        """Answer indices grouped by worker (stable), shape (n_answers,), int64."""
        from .kernels import group_order

        order, _ = group_order(self.worker, self.n_workers)
        return order

    @cached_property
    def worker_ptr(self) -> np.ndarray:
        """CSR offsets into :attr:`worker_order`, shape (n_workers + 1,)."""
        counts = np.bincount(self.worker, minlength=self.n_workers)
        ptr = np.zeros(self.n_workers + 1, dtype=np.int64)
        np.cumsum(counts, out=ptr[1:])
        return ptr

    @cached_property
    def answers_per_task(self) -> np.ndarray:
        return np.diff(self.task_ptr)

    @cached_property
    def answers_per_worker(self) -> np.ndarray:
        return np.bincount(self.worker, minlength=self.n_workers)

    # -------------------------------------------------------------- builders
    @classmethod
    def from_codes(
        cls,
        task: Sequence[int] | np.ndarray,
        worker: Sequence[int] | np.ndarray,
        label: Sequence[int] | np.ndarray,
        *,
        n_tasks: int | None = None,
        n_workers: int | None = None,
        n_classes: int | None = None,
        task_names: Iterable[str] | None = None,
        worker_names: Iterable[str] | None = None,
        classes: Iterable[str] | None = None,
        duplicates: DuplicatePolicy = "keep",
    ) -> AnnotationSet:
        """Build a set from integer codes (already indices, not names).

        Indices keep their meaning: task ``t`` is ``task_names[t]`` (by default
        ``str(t)``).  The arrays are copied, never modified.
        """
        t = np.asarray(task)
        w = np.asarray(worker)
        y = np.asarray(label)
        if not (t.ndim == w.ndim == y.ndim == 1) or not (len(t) == len(w) == len(y)):
            raise DataError("task, worker and label arrays must be 1-D and of equal length")
        for name, arr in (("task", t), ("worker", w), ("label", y)):
            if arr.size and not np.issubdtype(arr.dtype, np.integer):
                raise DataError(f"{name} codes must be integers, got dtype {arr.dtype}")
            if arr.size and arr.min() < 0:
                raise DataError(f"{name} codes must be non-negative, found {int(arr.min())}")
        tn = list(task_names) if task_names is not None else None
        wn = list(worker_names) if worker_names is not None else None
        cn = [str(c) for c in classes] if classes is not None else None
        n_tasks = _size("task", t, n_tasks, tn)
        n_workers = _size("worker", w, n_workers, wn)
        n_classes = _size("class", y, n_classes, cn)
        if tn is None:
            tn = [str(i) for i in range(n_tasks)]
        if wn is None:
            wn = [str(i) for i in range(n_workers)]
        if cn is None:
            cn = [str(i) for i in range(n_classes)]
        return cls._build(
            t.astype(np.int32, copy=False),
            w.astype(np.int32, copy=False),
            y.astype(_label_dtype(n_classes), copy=False),
            np.asarray(tn, dtype=object),
            np.asarray(wn, dtype=object),
            tuple(cn),
            duplicates=duplicates,
        )

    @classmethod
    def _build(
        cls,
        task: np.ndarray,
        worker: np.ndarray,
        label: np.ndarray,
        task_names: np.ndarray,
        worker_names: np.ndarray,
        classes: tuple[str, ...],
        *,
        duplicates: DuplicatePolicy = "keep",
        locate: Locator | None = None,
    ) -> AnnotationSet:
        """Apply the duplicate policy, sort by task and freeze.

        ``task``/``worker``/``label`` are in input order; ``locate`` maps an
        input row number to a human description ("file.csv line 12").
        """
        if duplicates not in DUPLICATE_POLICIES:
            raise UsageError(
                f"--duplicates must be one of {', '.join(DUPLICATE_POLICIES)}, got {duplicates!r}"
            )
        n_workers = max(len(worker_names), 1)
        key = task.astype(np.int64) * n_workers + worker
        n_dup = 0
        if key.size:
            import pandas as pd

            ks = pd.Series(key, copy=False)
            dup_first = ks.duplicated(keep="first").to_numpy()
            n_dup = int(dup_first.sum())
            if n_dup:
                if duplicates == "error":
                    row = int(np.flatnonzero(dup_first)[0])
                    where = locate(row) if locate else f"answer {row}"
                    raise DataError(
                        f"duplicate answer at {where}: worker {worker_names[worker[row]]!r} "
                        f"already labelled task {task_names[task[row]]!r} "
                        f"({n_dup} duplicate answer(s) in all; see --duplicates)"
                    )
                if duplicates in ("first", "last"):
                    keep = ~(dup_first if duplicates == "first" else ks.duplicated(keep="last").to_numpy())
                    task, worker, label = task[keep], worker[keep], label[keep]
        # Stable sort by task keeps each task's answers in input order.
        if task.size and not bool(np.all(task[1:] >= task[:-1])):
            from .kernels import group_order

            order, _ = group_order(task, len(task_names))
            task, worker, label = task[order], worker[order], label[order]
        for arr in (task, worker, label):
            arr.setflags(write=False)
        return cls(
            task=np.ascontiguousarray(task),
            worker=np.ascontiguousarray(worker),
            label=np.ascontiguousarray(label),
            task_names=task_names,
            worker_names=worker_names,
            classes=classes,
            n_duplicates=n_dup,
            duplicates=duplicates,
        )

    @classmethod
    def from_names(
        cls,
        task: Sequence[object] | np.ndarray,
        worker: Sequence[object] | np.ndarray,
        label: Sequence[object] | np.ndarray,
        *,
        classes: Sequence[str] | None = None,
        duplicates: DuplicatePolicy = "keep",
        locate: Locator | None = None,
        label_col: str = "label",
    ) -> AnnotationSet:
        """Build a set from identifier columns (converted to strings).

        Classes are inferred from the labels unless ``classes`` is given:
        numeric-looking names sort numerically, others lexically.
        """
        import pandas as pd

        t = _as_str_array(task)
        w = _as_str_array(worker)
        y = _as_str_array(label)
        if len(t) == 0:
            raise DataError("no answers in the input")
        t_codes, t_names = pd.factorize(t, sort=False)
        w_codes, w_names = pd.factorize(w, sort=False)
        y_codes, y_uniques = pd.factorize(y, sort=False)
        uniques = [str(u) for u in y_uniques]
        if classes is not None:
            class_list = [str(c) for c in classes]
            if len(set(class_list)) != len(class_list):
                raise UsageError("--classes lists a class twice")
            index = {c: i for i, c in enumerate(class_list)}
            unknown = [u for u in uniques if u not in index]
            if unknown:
                bad = unknown[0]
                row = int(np.flatnonzero(y == bad)[0]) if isinstance(y, np.ndarray) else 0
                where = locate(row) if locate else f"answer {row}"
                raise DataError(
                    f"label {bad!r} at {where} is not in --classes "
                    f"({', '.join(class_list)})"
                    + (f"; {len(unknown)} unknown labels in all" if len(unknown) > 1 else "")
                )
        else:
            class_list = infer_classes(uniques, label_col=label_col)
            index = {c: i for i, c in enumerate(class_list)}
        remap = np.array([index[u] for u in uniques], dtype=np.int64)
        labels = remap[y_codes].astype(_label_dtype(len(class_list)))
        return cls._build(
            t_codes.astype(np.int32),
            w_codes.astype(np.int32),
            labels,
            np.asarray(t_names, dtype=object),
            np.asarray(w_names, dtype=object),
            tuple(class_list),
            duplicates=duplicates,
            locate=locate,
        )

    # ------------------------------------------------------------- utilities
    def class_index(self, name: str) -> int:
        try:
            return self.classes.index(str(name))
        except ValueError:
            raise DataError(f"unknown class {name!r}; classes are {', '.join(self.classes)}") from None

    def task_lookup(self) -> dict[str, int]:
        """Map task name -> task index."""
        return {str(n): i for i, n in enumerate(self.task_names)}


class Locator:
    """Turns a 0-based input row number into a place a person can find.

    Row ``r`` is at ``lines[r]`` when a line table is given (multi-line
    records, skipped lines), else at ``r + first_line``.
    """

    def __init__(
        self, source: str, first_line: int = 2, unit: str = "line", lines: np.ndarray | None = None
    ) -> None:
        self.source = source
        self.first_line = first_line
        self.unit = unit
        self.lines = lines

    def line(self, row: int) -> int:
        return int(self.lines[row]) if self.lines is not None else row + self.first_line

    def __call__(self, row: int) -> str:
        return f"{self.source} {self.unit} {self.line(row)}"

    def subset(self, rows: np.ndarray) -> Locator:
        """The locator of a table keeping only ``rows`` (in order)."""
        lines = self.lines[rows] if self.lines is not None else rows + self.first_line
        return Locator(self.source, self.first_line, self.unit, lines)


def _size(what: str, codes: np.ndarray, given: int | None, names: list | None) -> int:
    seen = int(codes.max()) + 1 if codes.size else 0
    n = given if given is not None else (len(names) if names is not None else seen)
    if names is not None and len(names) != n:
        raise DataError(f"{len(names)} {what} names given for {n} {what}s")
    if seen > n:
        raise DataError(f"{what} code {seen - 1} is out of range for {n} {what}s")
    return n


def _as_str_array(values: Sequence[object] | np.ndarray) -> np.ndarray:
    arr = np.asarray(values, dtype=object)
    if arr.dtype == object and arr.size and not isinstance(arr.flat[0], str):
        arr = np.array([v if isinstance(v, str) else str(v) for v in arr], dtype=object)
    return arr


def _as_number(s: str) -> float | None:
    try:
        v = float(s)
    except ValueError:
        return None
    return v if math.isfinite(v) else None


def infer_classes(names: Iterable[str], *, label_col: str = "label") -> list[str]:
    """Order class names: numerically when all look numeric, else lexically.

    Refuses a column of many distinct numbers that is not a plain 0..K-1 or
    1..K code: that is a numeric answer, not a class.
    """
    names = list(dict.fromkeys(str(n) for n in names))
    numbers = [_as_number(n) for n in names]
    if names and all(v is not None for v in numbers):
        order = sorted(range(len(names)), key=lambda i: (numbers[i], names[i]))
        ordered = [names[i] for i in order]
        if len(ordered) > MAX_NUMERIC_CLASSES:
            vals = sorted({float(v) for v in numbers if v is not None})
            is_code = all(v.is_integer() for v in vals) and vals in (
                [float(i) for i in range(len(vals))],
                [float(i) for i in range(1, len(vals) + 1)],
            )
            if not is_code:
                raise DataError(
                    f"column {label_col!r} is numeric with {len(vals)} distinct values "
                    f"({_fmt(vals[0])} .. {_fmt(vals[-1])}): crowdagg aggregates classes, "
                    "not numeric answers; pass --classes to treat these values as classes"
                )
        return ordered
    return sorted(names)


def _fmt(v: float) -> str:
    return str(int(v)) if v.is_integer() else repr(v)
