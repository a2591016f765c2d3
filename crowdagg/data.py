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

The ``tasks`` and ``workers`` vocabularies (:class:`crowdagg.vocab.Vocabulary`)
keep the names as Arrow strings; ``task_names``/``worker_names`` give Python
strings on demand.  Names are stripped and checked on the distinct values,
not per row.  The answers are grouped by task with one stable counting sort,
and repeated (task, worker) answers found in one pass over each task's
answers (:mod:`crowdagg.kernels.ingest`).  Given a worker vocabulary
(``workers=``) and ``classes``, separate batches and partitions of a data set
agree on every code.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from . import _timing
from .errors import CrowdaggWarning, DataError, UsageError, param, warn
from .vocab import Vocabulary

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa

DuplicatePolicy = Literal["keep", "first", "last", "error"]
DUPLICATE_POLICIES: tuple[str, ...] = ("keep", "first", "last", "error")

#: More distinct numeric labels than this, not forming a 0..K-1 / 1..K code,
#: means the column holds measurements rather than classes.
MAX_NUMERIC_CLASSES = 20

#: Class codes are int16: more classes than this are refused, never wrapped.
MAX_CLASSES = 32767


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
    tasks, workers : Vocabulary, lengths n_tasks, n_workers
        Original identifiers (an Arrow string array each, plus the dtype the
        ids had in a DataFrame or Parquet input), in order of first
        appearance in the input.  ``task_names``/``worker_names`` give them
        as object ndarrays of str (built on first use).
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
    tasks: Vocabulary
    workers: Vocabulary
    classes: tuple[str, ...]
    n_duplicates: int = 0
    duplicates: str = "keep"

    # ------------------------------------------------------------------ sizes
    @property
    def n_tasks(self) -> int:
        return len(self.tasks)

    @property
    def n_workers(self) -> int:
        return len(self.workers)

    @property
    def task_names(self) -> np.ndarray:
        """Task names, object ndarray of str, shape (n_tasks,) (Python strings, built on first use)."""
        return self.tasks.to_numpy()

    @property
    def worker_names(self) -> np.ndarray:
        """Worker names, object ndarray of str, shape (n_workers,) (Python strings, built on first use)."""
        return self.workers.to_numpy()

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
    def worker_position(self) -> np.ndarray:
        """For each answer (in task order), its position in :attr:`worker_order`, shape (n_answers,), int64.

        ``worker_order[worker_position[i]] == i``: messages kept per answer in
        task order and in worker order (BP, KOS) map both ways.
        """
        pos = np.empty(self.n_answers, dtype=np.int64)
        pos[self.worker_order] = np.arange(self.n_answers, dtype=np.int64)
        pos.setflags(write=False)
        return pos

    @cached_property
    def cell(self) -> np.ndarray:
        """Per answer, ``worker * n_classes + label``, shape (n_answers,), int64.

        The column of the answer in the tasks × (workers · classes) one-hot
        matrix that moment methods work on (never built densely).
        """
        out = self.worker.astype(np.int64) * self.n_classes + self.label
        out.setflags(write=False)
        return out

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
        if cn is None:
            cn = [str(i) for i in range(n_classes)]
        return cls._build(
            t.astype(np.int32, copy=False),
            w.astype(np.int32, copy=False),
            y.astype(label_dtype, copy=False),
            Vocabulary.from_strings(tn) if tn is not None else Vocabulary.range(n_tasks),
            Vocabulary.from_strings(wn) if wn is not None else Vocabulary.range(n_workers),
            tuple(cn),
            duplicates=duplicates,
        )

    @classmethod
    def _build(
        cls,
        task: np.ndarray,
        worker: np.ndarray,
        label: np.ndarray,
        tasks: Vocabulary,
        workers: Vocabulary,
        classes: tuple[str, ...],
        *,
        duplicates: DuplicatePolicy = "keep",
        locate: Locator | None = None,
    ) -> AnnotationSet:
        """Sort by task, apply the duplicate policy and freeze.

        ``task``/``worker``/``label`` are in input order and owned by this
        call; ``locate`` maps an input row number to a human description
        ("file.csv line 12").  Duplicates and a single class are reported
        as :class:`~crowdagg.errors.CrowdaggWarning`.

        The sort is one stable counting sort (each task's answers keep their
        input order), so a repeated (task, worker) pair is found by one pass
        over each task's answers -- the first in input order is the first in
        its task.
        """
        if duplicates not in DUPLICATE_POLICIES:
            raise UsageError(
                f"{param('duplicates')} must be one of {', '.join(DUPLICATE_POLICIES)}, got {duplicates!r}"
            )
        from .kernels import group_order, repeated_answers, sort_by_task

        n_tasks = len(tasks)
        ptr, t_sorted, w_sorted, y_sorted = sort_by_task(task, worker, label, n_tasks)
        n_dup, repeat = repeated_answers(
            ptr, w_sorted, len(workers), keep="last" if duplicates == "last" else "first",
            mark=duplicates != "keep",
        )
        if n_dup:
            if duplicates == "error":
                order, _ = group_order(task, n_tasks)
                row = int(order[repeat].min())  # the first repeat in input order
                where = locate(row) if locate else f"answer {row}"
                raise DataError(
                    f"duplicate answer at {where}: worker {workers[worker[row]]!r} "
                    f"already labelled task {tasks[task[row]]!r} "
                    f"({n_dup} duplicate answer(s) in all; see {param('duplicates')})"
                )
            if duplicates in ("first", "last"):
                keep = ~repeat
                t_sorted, w_sorted, y_sorted = t_sorted[keep], w_sorted[keep], y_sorted[keep]
                ptr = np.zeros(n_tasks + 1, dtype=np.int64)
                np.cumsum(np.bincount(t_sorted, minlength=n_tasks), out=ptr[1:])
            _warn_duplicates(n_dup, duplicates)
        del repeat
        for arr in (t_sorted, w_sorted, y_sorted, ptr):
            arr.setflags(write=False)
        if len(classes) == 1 and t_sorted.size:
            warn(
                CrowdaggWarning(
                    f"only one class ({classes[0]!r}) is present: every task gets it; "
                    f"pass {param('classes')} to name the others"
                )
            )
        out = cls(
            task=t_sorted,
            worker=w_sorted,
            label=y_sorted,
            tasks=tasks,
            workers=workers,
            classes=classes,
            n_duplicates=n_dup,
            duplicates=duplicates,
        )
        out.__dict__["task_ptr"] = ptr  # the sort's offsets are the CSR offsets
        return out

    @classmethod
    def from_names(
        cls,
        task: Sequence[object] | np.ndarray | pa.Array,
        worker: Sequence[object] | np.ndarray | pa.Array,
        label: Sequence[object] | np.ndarray | pa.Array,
        *,
        classes: Sequence[str] | None = None,
        duplicates: DuplicatePolicy = "keep",
        locate: Locator | None = None,
        label_col: str = "label",
        task_order: Sequence[object] | np.ndarray | pa.Array | None = None,
        header: tuple[str, str, str] | Sequence[tuple[str, str, str]] | None = None,
        workers: Vocabulary | Sequence[object] | None = None,
    ) -> AnnotationSet:
        """Build a set from identifier columns (Arrow arrays, numpy arrays or sequences).

        Ids become text (:func:`crowdagg.vocab.as_strings`: numbers as
        Python writes them, missing values blank).  Surrounding whitespace
        is stripped from every name (``" w1"`` is ``"w1"``); how many cells
        changed and how many ids merged is said in a warning.  Classes are
        inferred from the labels unless ``classes`` is given: numeric-looking
        names sort numerically, others lexically.  Labels that differ only
        by letter case or number format (``Cat`` / ``cat``, ``1`` / ``1.0``)
        stay distinct classes, with a warning.

        ``task_order`` lists task names in output order, including tasks
        that have no answers (a JSON ``{task: {}}`` entry); tasks of the
        answers missing from it follow in order of appearance.

        ``header`` (the task, worker and label column names, or a list of
        such triples when several files were joined) makes rows that repeat
        it -- files joined with ``cat``, a BOM, spaces or another letter case
        aside -- skipped, with a warning.

        ``workers`` (a :class:`~crowdagg.vocab.Vocabulary`, such as another
        set's ``workers``, or a sequence of names) fixes the worker codes:
        its names keep their codes, workers new to it follow in order of
        first appearance, and its workers without answers here stay (with 0
        answers).  Sets built against one vocabulary -- the partitions of a
        data set, batches labelled with known workers -- agree on worker
        codes, as ``classes`` makes them agree on class codes.

        Every check runs on the distinct names (Arrow dictionary encoding),
        then is looked up per row by code: no Python object per answer.
        """
        return cls._from_columns(
            [task, worker, label], classes=classes, duplicates=duplicates, locate=locate, label_col=label_col,
            task_order=task_order, header=header, workers=workers,
        )

    @classmethod
    def _from_columns(
        cls,
        columns: list[Any],
        *,
        classes: Sequence[str] | None = None,
        duplicates: DuplicatePolicy = "keep",
        locate: Locator | None = None,
        label_col: str = "label",
        task_order: Sequence[object] | np.ndarray | pa.Array | None = None,
        header: tuple[str, str, str] | Sequence[tuple[str, str, str]] | None = None,
        dtypes: tuple[str | None, str | None] | None = None,
        workers: Vocabulary | Sequence[object] | None = None,
    ) -> AnnotationSet:
        """:meth:`from_names` taking the (task, worker, label) columns in a list that it empties.

        ``dtypes`` gives the task and worker ids' original dtypes when the
        columns are already text (several files joined).

        A reader that drops its own references first lets the parsed text
        columns be freed as soon as they are encoded (gigabytes at 100M
        answers) instead of when the set is built.
        """
        from . import vocab

        (t, t_dtype), (w, w_dtype), (y, _) = (
            vocab.as_strings(v, role) for v, role in zip(columns, ("task", "worker", "label"))
        )
        columns.clear()
        if dtypes is not None:
            t_dtype, w_dtype = dtypes
        if not len(t) == len(w) == len(y):
            raise DataError(f"task, worker and label columns differ in length ({len(t)}, {len(w)}, {len(y)})")
        n_extra = 0
        if task_order is not None:
            extra, _ = vocab.as_strings(task_order, "task")
            n_extra = len(extra)
            t = vocab.concat([extra, t])
        if len(y) == 0 and (n_extra == 0 or classes is None):
            raise DataError(
                "no answers in the input"
                + (f" ({n_extra} task(s), none answered); give {param('classes')} to get their prior rows"
                   if n_extra else "")
            )
        with _timing.stage("encode"):
            (t_codes, t_names, c_t, m_t), (w_codes, w_names, c_w, m_w), (y_codes, y_uniques, c_y, m_y) = _encode_all(
                [(t, n_extra), (w, 0), (y, 0)]
            )
        del t, w, y
        vocab.release_memory()
        end_names_stage = _timing.start("names")
        if n_extra and vocab.blank(t_names)[t_codes[:n_extra]].any():
            raise DataError("a blank task name in the list of tasks")
        t_codes = t_codes[n_extra:]
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
        names3 = (t_names, w_names, y_uniques)
        codes3 = (t_codes, w_codes, y_codes)
        blank_name = [vocab.blank(n) for n in names3]
        headers: list[Any] = [] if header is None else ([header] if isinstance(header[0], str) else list(header))
        header_name = [np.zeros(len(n), dtype=bool) for n in names3]
        for h in dict.fromkeys(tuple(h) for h in headers):
            for i, n in enumerate(names3):
                header_name[i] |= vocab.spells(n, header_key(h[i]), header_key)
        repeated = _rows_with(header_name, codes3)
        blank_row = _rows_with(blank_name, codes3)
        if blank_row is not None and repeated is not None:
            blank_row &= ~repeated
        skip = None
        for mask, what in (
            (repeated, "line(s) repeating the header ({}); were files joined with their headers?"),
            (blank_row, "row(s) with no task, worker or label ({})"),
        ):
            if mask is not None and mask.any():
                first = int(np.flatnonzero(mask)[0])
                where = "first at " + (locate(first) if locate else f"answer {first}")
                warn(CrowdaggWarning(f"skipped {int(mask.sum())} " + what.format(where)))
                skip = mask if skip is None else skip | mask
        if skip is not None:
            keep = np.flatnonzero(~skip)
            t_codes, w_codes, y_codes = t_codes[keep], w_codes[keep], y_codes[keep]
            codes3 = (t_codes, w_codes, y_codes)
            locate = locate.subset(keep) if locate else None
        # A partly blank row is an error naming its line.
        for role, b, codes in zip(("task", "worker", "label"), blank_name, codes3):
            if b.any():
                mask = b[codes]
                if mask.any():
                    row = int(np.flatnonzero(mask)[0])
                    where = locate(row) if locate else f"answer {row}"
                    raise DataError(f"blank {role} at {where} ({int(mask.sum())} blank {role} cell(s) in all)")
        # The blank name and the header's own cells leave the vocabularies once no row uses them.
        t_codes, t_names = _forget(t_codes, t_names, blank_name[0] | header_name[0])
        w_codes, w_names = _forget(w_codes, w_names, blank_name[1] | header_name[1])
        if workers is not None:
            known = _known_vocabulary(workers, "worker")
            remap, extended = known.extend(w_names)
            w_codes, w_names = remap[w_codes], extended.names
            if extended is known or len(known) and known.dtype == w_dtype:
                w_dtype = known.dtype  # every name is the vocabulary's, or both had one type
            elif len(known):
                w_dtype = None
        y_codes, y_uniques = _forget(y_codes, y_uniques, blank_name[2] | header_name[2])
        if len(y_codes) == 0 and classes is None:
            raise DataError("no answers in the input (every row is blank)")
        uniques = [str(u) for u in y_uniques.to_pylist()]
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
        remap = np.array([index[u] for u in uniques], dtype=dtype)
        labels = remap[y_codes] if len(remap) else np.zeros(0, dtype=dtype)
        end_names_stage()
        from . import kernels  # noqa: F401  (numba's import is not the sort's time)

        with _timing.stage("sort"):
            return cls._build(
                t_codes.astype(np.int32, copy=False),
                w_codes.astype(np.int32, copy=False),
                labels,
                vocab.Vocabulary(t_names, t_dtype),
                vocab.Vocabulary(w_names, w_dtype),
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


class JoinedLocator(Locator):
    """The locator of several inputs read as one: row ``r`` is found in the file that holds it.

    ``parts`` are the files' locators and ``sizes`` their row counts;
    ``rows`` (after a subset) maps rows back to rows of the joined input.
    """

    def __init__(self, parts: Sequence[Locator], sizes: Sequence[int], rows: np.ndarray | None = None) -> None:
        self.parts = list(parts)
        self.starts = np.concatenate([[0], np.cumsum(np.asarray(sizes, dtype=np.int64))])
        self.rows = rows
        self.source = ", ".join(p.source for p in self.parts)

    def _part(self, row: int) -> tuple[Locator, int]:
        r = int(self.rows[row]) if self.rows is not None else int(row)
        i = int(np.searchsorted(self.starts, r, side="right")) - 1
        return self.parts[i], r - int(self.starts[i])

    def line(self, row: int) -> int:
        part, r = self._part(row)
        return part.line(r)

    def __call__(self, row: int) -> str:
        part, r = self._part(row)
        return part(r)

    def subset(self, rows: np.ndarray) -> Locator:
        rows = np.asarray(rows, dtype=np.int64)
        joined = JoinedLocator.__new__(JoinedLocator)
        joined.parts, joined.starts, joined.source = self.parts, self.starts, self.source
        joined.rows = self.rows[rows] if self.rows is not None else rows
        return joined


def _size(what: str, codes: np.ndarray, given: int | None, names: list | None) -> int:
    seen = int(codes.max()) + 1 if codes.size else 0
    n = given if given is not None else (len(names) if names is not None else seen)
    if names is not None and len(names) != n:
        raise DataError(f"{len(names)} {what} names given for {n} {what}s")
    if seen > n:
        raise DataError(f"{what} code {seen - 1} is out of range for {n} {what}s")
    return n


def _known_vocabulary(given: Any, role: str) -> Vocabulary:
    """A vocabulary given to encode against: a :class:`Vocabulary` as it is, names stripped like the data's;
    checked (no blank or repeated name)."""
    from . import vocab

    if not isinstance(given, Vocabulary):
        if isinstance(given, (str, bytes, dict, AnnotationSet)):
            what = "another set's .workers" if isinstance(given, AnnotationSet) else "not one name or a mapping"
            raise UsageError(f"{param(role + 's')} must be a list of names or a Vocabulary ({what})")
        import pyarrow as pa

        if not isinstance(given, (np.ndarray, pa.Array, pa.ChunkedArray)):
            given = np.asarray(list(given))  # a list of ints keeps its integer type, as a column would
        names, dtype = vocab.as_strings(given, role)
        given = Vocabulary(vocab.strip(names)[0], dtype)
    given.check_distinct(role)
    return given


def _encode_all(columns: list[tuple[pa.Array, int]]) -> list[tuple[np.ndarray, pa.Array, int, int]]:
    """:func:`_encode_names` of each column, on two threads when the data is large.

    Arrow's hashing releases the GIL.  The first column (the task ids, the
    most distinct) is split in two halves encoded apart and then joined
    (:func:`crowdagg.vocab.encode_halves`), so both cores work on the
    longest job.
    """
    from . import vocab

    if len(columns[0][0]) < 2_000_000:
        return [_encode_names(c, offset=o) for c, o in columns]
    from concurrent.futures import ThreadPoolExecutor

    fast = vocab._encode_prefixed_ints(columns[0][0])  # ids like t17: no hashing, nothing to split
    with ThreadPoolExecutor(max_workers=2) as pool:
        first = (lambda: fast) if fast is not None else vocab.encode_halves(columns[0][0], pool)
        rest = [pool.submit(_encode_names, c, o) for c, o in columns[1:]]
        out = [_encode_names(columns[0][0], offset=columns[0][1], encoded=first())]
        return out + [r.result() for r in rest]


def _encode_names(
    values: pa.Array, offset: int = 0, encoded: tuple[np.ndarray, pa.Array] | None = None
) -> tuple[np.ndarray, pa.Array, int, int]:
    """Codes in order of first appearance, stripped names, cells changed, names merged.

    Stripping runs on the distinct values, not the rows.  The blank name
    ``""`` (a cell that was empty or only whitespace) keeps a code so that
    the caller can tell skipped rows from errors.
    ``offset`` rows at the start are not answers (a task order list) and are
    not counted as changed cells.  ``encoded`` is the column's
    :func:`crowdagg.vocab.encode`, when already done.
    """
    from . import vocab

    codes, uniques = encoded if encoded is not None else vocab.encode(values)
    n_changed = 0
    n_merged = 0
    stripped, differs = vocab.strip(uniques)
    if differs.any():
        now_blank = vocab.blank(stripped)
        counts = np.bincount(codes[offset:], minlength=len(uniques))
        n_changed = int(counts[differs & ~now_blank].sum())
        remap, names = vocab.encode(stripped)
        nonblank = int(np.count_nonzero(~now_blank))
        n_merged = nonblank - (len(names) - int(vocab.blank(names).any()))
        codes = remap[codes]
        uniques = names
    return codes, uniques, n_changed, n_merged


def header_key(text: str) -> str:
    """A header cell as a repeated header line may spell it: BOM, spaces and case aside."""
    return text.lstrip("\ufeff").strip().casefold()


def _rows_with(name_masks: list[np.ndarray], codes: tuple[np.ndarray, ...]) -> np.ndarray | None:
    """Rows whose task, worker and label names all satisfy their masks (per distinct name), or None
    when one mask holds for no name -- then no row can, and nothing is built per row."""
    if not all(m.any() for m in name_masks):
        return None
    return name_masks[0][codes[0]] & name_masks[1][codes[1]] & name_masks[2][codes[2]]


def _forget(codes: np.ndarray, names: pa.Array, candidates: np.ndarray) -> tuple[np.ndarray, pa.Array]:
    """Drop the candidate names no code uses any more, renumbering the codes (order kept)."""
    if not candidates.any():
        return codes, names
    drop = candidates & (np.bincount(codes, minlength=len(names)) == 0)
    if not drop.any():
        return codes, names
    new_index = (np.cumsum(~drop) - 1).astype(codes.dtype)
    from .vocab import take

    return new_index[codes], take(names, np.flatnonzero(~drop))


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
    from .vocab import python_strings

    arr = np.asarray(values, dtype=object)
    if arr.ndim != 1:
        raise DataError(f"{role} names must be one-dimensional, got an array of shape {arr.shape}")
    return python_strings(arr, role)


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
