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
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Literal

import numpy as np

from .errors import CrowdaggWarning, DataError, UsageError, param, warn

DuplicatePolicy = Literal["keep", "first", "last", "error"]
DUPLICATE_POLICIES: tuple[str, ...] = ("keep", "first", "last", "error")

#: More distinct numeric labels than this, not forming a 0..K-1 / 1..K code,
#: means the column holds measurements rather than classes.
MAX_NUMERIC_CLASSES = 20

#: Class codes are int16: more classes than this are refused, never wrapped.
MAX_CLASSES = 32767

#: Bytes of one short name held as a Python str in an object array.
_NAME_BYTES = 64


def _label_dtype(n_classes: int) -> type[np.signedinteger]:
    if n_classes > MAX_CLASSES:
        raise DataError(
            f"{n_classes:,} classes: crowdagg supports at most {MAX_CLASSES:,} classes "
            "(is the label column really a class label?)"
        )
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
        ``str(t)``); tasks and workers without answers are allowed (give
        ``n_tasks``/``n_workers``).  The arrays are copied, never modified or
        frozen.
        """
        t = np.array(task, copy=True)
        w = np.array(worker, copy=True)
        y = np.array(label, copy=True)
        if not (t.ndim == w.ndim == y.ndim == 1) or not (len(t) == len(w) == len(y)):
            raise DataError("task, worker and label arrays must be 1-D and of equal length")
        for name, arr in (("task", t), ("worker", w), ("label", y)):
            if arr.size and not np.issubdtype(arr.dtype, np.integer):
                raise DataError(f"{name} codes must be integers, got dtype {arr.dtype}")
            if arr.size and arr.min() < 0:
                raise DataError(f"{name} codes must be non-negative, found {int(arr.min())}")
        tn = _as_str_array(list(task_names), "task").tolist() if task_names is not None else None
        wn = _as_str_array(list(worker_names), "worker").tolist() if worker_names is not None else None
        cn = _as_str_array(list(classes), "class").tolist() if classes is not None else None
        for what, names in (("task", tn), ("worker", wn)):
            if names is not None and len(set(names)) != len(names):
                dup = next(n for n in names if names.count(n) > 1)
                raise DataError(f"{what} name {dup!r} is given twice; names must identify one {what} each")
        n_tasks = _size("task", t, n_tasks, tn)
        n_workers = _size("worker", w, n_workers, wn)
        n_classes = _size("class", y, n_classes, cn)
        for what, n in (("task", n_tasks), ("worker", n_workers)):
            if n > np.iinfo(np.int32).max:
                raise DataError(f"{n:,} {what}s: more than int32 codes can hold")
        if n_classes < 1:
            raise DataError("at least one class is needed (give n_classes or classes)")
        label_dtype = _label_dtype(n_classes)
        if cn is not None and len(set(cn)) != len(cn):
            raise UsageError(f"{param('classes')} lists a class twice")
        from . import memory

        memory.check(
            _NAME_BYTES * (n_tasks * (tn is None) + n_workers * (wn is None)),
            f"default names for {n_tasks:,} tasks and {n_workers:,} workers",
        )
        if tn is None:
            tn = [str(i) for i in range(n_tasks)]
        if wn is None:
            wn = [str(i) for i in range(n_workers)]
        if cn is None:
            cn = [str(i) for i in range(n_classes)]
        return cls._build(
            t.astype(np.int32, copy=False),
            w.astype(np.int32, copy=False),
            y.astype(label_dtype, copy=False),
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

        ``task``/``worker``/``label`` are in input order and owned by this
        call; ``locate`` maps an input row number to a human description
        ("file.csv line 12").  Duplicates and a single class are reported
        as :class:`~crowdagg.errors.CrowdaggWarning`.
        """
        if duplicates not in DUPLICATE_POLICIES:
            raise UsageError(
                f"{param('duplicates')} must be one of {', '.join(DUPLICATE_POLICIES)}, got {duplicates!r}"
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
                        f"({n_dup} duplicate answer(s) in all; see {param('duplicates')})"
                    )
                if duplicates in ("first", "last"):
                    keep = ~(dup_first if duplicates == "first" else ks.duplicated(keep="last").to_numpy())
                    task, worker, label = task[keep], worker[keep], label[keep]
                _warn_duplicates(n_dup, duplicates)
        # Stable sort by task keeps each task's answers in input order.
        if task.size and not bool(np.all(task[1:] >= task[:-1])):
            from .kernels import group_order

            order, _ = group_order(task, len(task_names))
            task, worker, label = task[order], worker[order], label[order]
        task = np.ascontiguousarray(task)
        worker = np.ascontiguousarray(worker)
        label = np.ascontiguousarray(label)
        for arr in (task, worker, label):
            arr.setflags(write=False)
        if len(classes) == 1 and task.size:
            warn(
                CrowdaggWarning(
                    f"only one class ({classes[0]!r}) is present: every task gets it; "
                    f"pass {param('classes')} to name the others"
                )
            )
        return cls(
            task=task,
            worker=worker,
            label=label,
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
        task_order: Sequence[object] | np.ndarray | None = None,
        header: tuple[str, str, str] | None = None,
    ) -> AnnotationSet:
        """Build a set from identifier columns (converted to strings).

        Surrounding whitespace is stripped from every name (``" w1"`` is
        ``"w1"``); how many cells changed and how many ids merged is said in
        a warning.  Classes are inferred from the labels unless ``classes``
        is given: numeric-looking names sort numerically, others lexically.
        Labels that differ only by letter case or number format (``Cat`` /
        ``cat``, ``1`` / ``1.0``) stay distinct classes, with a warning.

        ``task_order`` lists task names in output order, including tasks
        that have no answers (a JSON ``{task: {}}`` entry); tasks of the
        answers missing from it follow in order of appearance.

        ``header`` (the task, worker and label column names) makes rows that
        repeat it -- files joined with ``cat``, a BOM, spaces or another
        letter case aside -- skipped, with a warning.  The check runs on the
        distinct names, not the rows.
        """
        t = _as_str_array(task, "task")
        w = _as_str_array(worker, "worker")
        y = _as_str_array(label, "label")
        if not len(t) == len(w) == len(y):
            raise DataError(f"task, worker and label columns differ in length ({len(t)}, {len(w)}, {len(y)})")
        n_extra = 0
        if task_order is not None:
            extra = _as_str_array(task_order, "task")
            n_extra = len(extra)
            t = np.concatenate([extra, t])
        if len(y) == 0 and (n_extra == 0 or classes is None):
            raise DataError(
                "no answers in the input"
                + (f" ({n_extra} task(s), none answered); give {param('classes')} to get their prior rows"
                   if n_extra else "")
            )
        t_codes, t_names, c_t, m_t = _encode_names(t, offset=n_extra)
        if (t_names == "")[t_codes[:n_extra]].any():
            raise DataError("a blank task name in the list of tasks")
        t_codes = t_codes[n_extra:]
        w_codes, w_names, c_w, m_w = _encode_names(w)
        y_codes, y_uniques, c_y, m_y = _encode_names(y)
        changed = {"task": c_t, "worker": c_w, "label": c_y}
        if sum(changed.values()):
            detail = ", ".join(f"{k}: {v}" for k, v in changed.items() if v)
            warn(
                CrowdaggWarning(
                    f"stripped surrounding whitespace from {sum(changed.values())} cell(s) ({detail}); "
                    f"{m_t + m_w + m_y} name(s) became equal to another and were merged"
                )
            )
        # Rows that are not answers: repeated header lines, rows blank in all three columns.
        # Both are decided on the distinct names, then looked up per row.
        vocab = [(t_codes, t_names), (w_codes, w_names), (y_codes, y_uniques)]
        blank_name = [names == "" for _, names in vocab]
        header_name = [
            _spells(names, header[i]) if header is not None else np.zeros(len(names), dtype=bool)
            for i, (_, names) in enumerate(vocab)
        ]
        blank = [b[codes] for b, (codes, _) in zip(blank_name, vocab)]
        all_blank = blank[0] & blank[1] & blank[2]
        repeated = header_name[0][t_codes] & header_name[1][w_codes] & header_name[2][y_codes]
        for mask, what in (
            (repeated, "line(s) repeating the header ({}); were files joined with their headers?"),
            (all_blank & ~repeated, "row(s) with no task, worker or label ({})"),
        ):
            if mask.any():
                first = int(np.flatnonzero(mask)[0])
                where = "first at " + (locate(first) if locate else f"answer {first}")
                warn(CrowdaggWarning(f"skipped {int(mask.sum())} " + what.format(where)))
        skip = repeated | all_blank
        if skip.any():
            keep = np.flatnonzero(~skip)
            t_codes, w_codes, y_codes = t_codes[keep], w_codes[keep], y_codes[keep]
            blank = [m[keep] for m in blank]
            locate = locate.subset(keep) if locate else None
        # A partly blank row is an error naming its line.
        for role, mask in zip(("task", "worker", "label"), blank):
            if mask.any():
                row = int(np.flatnonzero(mask)[0])
                where = locate(row) if locate else f"answer {row}"
                raise DataError(f"blank {role} at {where} ({int(mask.sum())} blank {role} cell(s) in all)")
        # The blank name and the header's own cells leave the vocabularies once no row uses them.
        t_codes, t_names = _forget(t_codes, t_names, blank_name[0] | header_name[0])
        w_codes, w_names = _forget(w_codes, w_names, blank_name[1] | header_name[1])
        y_codes, y_uniques = _forget(y_codes, y_uniques, blank_name[2] | header_name[2])
        if len(y_codes) == 0 and classes is None:
            raise DataError("no answers in the input (every row is blank)")
        uniques = [str(u) for u in y_uniques]
        if classes is not None:
            class_list = [str(c).strip() for c in classes]
            if len(set(class_list)) != len(class_list):
                raise UsageError(f"{param('classes')} lists a class twice")
            if any(not c for c in class_list):
                raise UsageError(f"{param('classes')} has an empty class name")
            index = {c: i for i, c in enumerate(class_list)}
            unknown = [u for u in uniques if u not in index]
            if unknown:
                bad = unknown[0]
                row = int(np.argmax(y_codes == uniques.index(bad)))
                where = locate(row) if locate else f"answer {row}"
                raise DataError(
                    f"label {bad!r} at {where} is not in {param('classes')} "
                    f"({', '.join(class_list)})"
                    + (f"; {len(unknown)} unknown labels in all" if len(unknown) > 1 else "")
                )
        else:
            class_list = infer_classes(uniques, label_col=label_col)
            index = {c: i for i, c in enumerate(class_list)}
        dtype = _label_dtype(len(class_list))
        _warn_near_collisions(uniques)
        remap = np.array([index[u] for u in uniques], dtype=np.int64)
        labels = remap[y_codes].astype(dtype)
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


_EDGE_SPACE = re.compile(r"(?:^|\x00)\s|\s(?:\x00|$)")


def _encode_names(values: np.ndarray, offset: int = 0) -> tuple[np.ndarray, np.ndarray, int, int]:
    """Codes in order of first appearance, stripped names, cells changed, names merged.

    Stripping runs on the distinct values, not the rows.  The blank name
    ``""`` (a cell that was empty or only whitespace) keeps a code so that
    the caller can tell skipped rows from errors.
    ``offset`` rows at the start are not answers (a task order list) and are
    not counted as changed cells.
    """
    import pandas as pd

    codes, uniques = pd.factorize(values, sort=False)
    uniques = np.asarray(uniques, dtype=object)
    n_changed = 0
    n_merged = 0
    # One scan of all distinct names finds whether any has surrounding whitespace.
    if uniques.size and _EDGE_SPACE.search("\x00".join(uniques.tolist())):
        stripped = np.array([u.strip() for u in uniques.tolist()], dtype=object)
        differs = stripped != uniques
        if differs.any():
            counts = np.bincount(codes[offset:], minlength=len(uniques))
            n_changed = int(counts[differs & (stripped != "")].sum())
            remap, names = pd.factorize(stripped, sort=False)
            names = np.asarray(names, dtype=object)
            nonblank = int(np.count_nonzero(stripped != ""))
            n_merged = nonblank - (len(names) - int(np.any(names == "")))
            codes = remap[codes]
            uniques = names
    return codes.astype(np.int64, copy=False), uniques, n_changed, n_merged


def header_key(text: str) -> str:
    """A header cell as a repeated header line may spell it: BOM, spaces and case aside."""
    return text.lstrip("\ufeff").strip().casefold()


def _spells(names: np.ndarray, cell: str) -> np.ndarray:
    """Which names spell the header cell ``cell`` (BOM, spaces, case aside), shape (len(names),).

    One substring search over all names joined decides whether any can;
    only then is each name compared (a Python step per distinct name).
    """
    key = header_key(cell)
    found = np.zeros(len(names), dtype=bool)
    if not key or not len(names) or key not in "\x00".join(names.tolist()).casefold():
        return found
    found[:] = [header_key(n) == key for n in names.tolist()]
    return found


def _forget(codes: np.ndarray, names: np.ndarray, candidates: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Drop the candidate names no code uses any more, renumbering the codes (order kept)."""
    drop = candidates & (np.bincount(codes, minlength=len(names)) == 0)
    if not drop.any():
        return codes, names
    new_index = np.cumsum(~drop) - 1
    return new_index[codes], names[~drop]


def _warn_near_collisions(labels: list[str]) -> None:
    """Warn about labels equal up to letter case or number format (kept distinct)."""
    groups: dict[object, list[str]] = {}
    for name in labels:
        v = _as_number(name)
        key: object = ("n", v) if v is not None else ("s", name.casefold())
        groups.setdefault(key, []).append(name)
    clashes = [g for g in groups.values() if len(g) > 1]
    if clashes:
        shown = ", ".join(" / ".join(repr(n) for n in g) for g in clashes[:5])
        more = f" and {len(clashes) - 5} more" if len(clashes) > 5 else ""
        warn(
            CrowdaggWarning(
                f"labels that differ only by letter case or number format are kept as different classes: "
                f"{shown}{more}; if they mean the same class, make them identical in the input"
            )
        )


def _warn_duplicates(n_dup: int, policy: str) -> None:
    if policy == "keep":
        text = (
            f"{n_dup} duplicate answer(s) (same task and worker) kept as separate votes; "
            f"set {param('duplicates')} to first, last or error to change that"
        )
    else:
        text = f"{n_dup} duplicate answer(s) (same task and worker) dropped, keeping the {policy} one"
    warn(CrowdaggWarning(text))


def _as_str_array(values: Sequence[object] | np.ndarray, role: str = "name") -> np.ndarray:
    """A 1-D object array of str: missing values (None, NaN, NA) become blank, bytes are decoded."""
    arr = np.asarray(values, dtype=object)
    if arr.ndim != 1:
        raise DataError(f"{role} names must be one-dimensional, got an array of shape {arr.shape}")
    from pandas.api.types import infer_dtype

    if arr.size == 0 or infer_dtype(arr, skipna=False) == "string":
        return arr
    import pandas as pd

    missing = pd.isna(arr)
    out = np.empty(arr.size, dtype=object)
    for i, v in enumerate(arr.tolist()):
        if missing[i]:
            out[i] = ""
        elif isinstance(v, bytes):
            try:
                out[i] = v.decode("utf-8")
            except UnicodeDecodeError:
                raise DataError(f"{role} name {v!r} is not UTF-8 text") from None
        else:
            out[i] = v if isinstance(v, str) else str(v)
    return out


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
                    f"not numeric answers; pass {param('classes')} to treat these values as classes"
                )
        return ordered
    return sorted(names)


def _fmt(v: float) -> str:
    return str(int(v)) if v.is_integer() else repr(v)
