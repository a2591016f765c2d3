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

The ``tasks`` and ``workers`` vocabularies (:class:`crowdagg.data.vocab.Vocabulary`)
keep the names as Arrow strings; ``task_names``/``worker_names`` give Python
strings on demand.  Names are stripped and checked on the distinct values,
not per row.  The answers are grouped by task with one stable counting sort,
and repeated (task, worker) answers found in one pass over each task's
answers (:mod:`crowdagg.kernels.ingest`).  Given a worker vocabulary
(``workers=``) and ``classes``, separate batches and partitions of a data set
agree on every code.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Self, cast

import numpy as np

from ..core import timing as _timing
from ..core.memory import MaxMemory
from ..errors import CrowdaggWarning, DataError, UsageError, param, warn
from .vocab import Vocabulary

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa

    from .encode import ColumnsEncoder

DuplicatePolicy = Literal["keep", "first", "last", "error"]
DUPLICATE_POLICIES: tuple[str, ...] = ("keep", "first", "last", "error")

#: What to do with an answer whose label is blank (missing: see :mod:`crowdagg.data.vocab`), a skipped
#: question in most exports: ``skip`` it (its task still gets an output row), or refuse it (``error``).
BlankLabelPolicy = Literal["skip", "error"]
BLANK_LABEL_POLICIES: tuple[str, ...] = ("skip", "error")


def check_duplicates(policy: object) -> None:
    """A :class:`~crowdagg.errors.UsageError` unless ``policy`` is one of :data:`DUPLICATE_POLICIES`."""
    if policy not in DUPLICATE_POLICIES:
        raise UsageError(f"{param('duplicates')} must be one of {', '.join(DUPLICATE_POLICIES)}, got {policy!r}")


def check_blank_labels(policy: object) -> None:
    """A :class:`~crowdagg.errors.UsageError` unless ``policy`` is one of :data:`BLANK_LABEL_POLICIES`."""
    if policy not in BLANK_LABEL_POLICIES:
        raise UsageError(
            f"{param('blank_labels')} must be one of {', '.join(BLANK_LABEL_POLICIES)}, got {policy!r}"
        )

#: More distinct numeric labels than this, not forming a 0..K-1 / 1..K code,
#: means the column holds measurements rather than classes.
MAX_NUMERIC_CLASSES = 20

#: The numeric methods, named where numeric answers are refused as classes (tested to be the registry's).
NUMERIC_METHODS = ("mean", "median", "catd", "crh")

#: Class codes are int16: more classes than this are refused, never wrapped.
MAX_CLASSES = 32767


def _label_dtype(n_classes: int) -> type[np.signedinteger]:
    if n_classes > MAX_CLASSES:
        raise DataError(
            f"{n_classes:,} classes: crowdagg supports at most {MAX_CLASSES:,} classes "
            "(is the label column really a class label?)"
        )
    return np.int8 if n_classes <= 127 else np.int16


class FlatAnswers:
    """What every answer container shares: answers as flat arrays sorted by task, the task and worker
    vocabularies, the duplicates record, their checks, sizes and CSR offsets.

    :class:`AnnotationSet` (classes) and :class:`~crowdagg.data.numeric.NumericAnswers` (values) are the
    containers; ``numeric`` tells them apart where only this module is known (:func:`check_annotations`).
    """

    #: Whether the answers are numbers (measurements) rather than class codes.
    numeric: ClassVar[bool] = False

    task: np.ndarray
    worker: np.ndarray
    tasks: Vocabulary
    workers: Vocabulary
    n_duplicates: int
    duplicates: str

    def _checked_vocabularies(self) -> tuple[Vocabulary, Vocabulary]:
        """The constructor's ``tasks`` and ``workers`` as vocabularies (:func:`_as_vocabulary`)."""
        return _as_vocabulary(self.tasks, "tasks"), _as_vocabulary(self.workers, "workers")

    def _check_duplicates_record(self) -> None:
        """The constructor's ``duplicates`` (a policy) and ``n_duplicates`` (a count >= 0)."""
        check_duplicates(self.duplicates)
        if isinstance(self.n_duplicates, bool) or not isinstance(self.n_duplicates, (int, np.integer)) \
                or self.n_duplicates < 0:
            raise UsageError(f"{param('n_duplicates')} must be a count >= 0, got {self.n_duplicates!r}")

    @classmethod
    def _trusted(cls, **fields: Any) -> Self:
        """A container from arrays this package made valid, canonical and read-only: no check, no copy.

        The readers' and ``_build``'s way in; the public constructor
        checks instead.
        """
        out = object.__new__(cls)
        for f in dataclasses.fields(cls):  # type: ignore[arg-type]  # every container is a dataclass
            object.__setattr__(out, f.name, fields.pop(f.name) if f.name in fields else f.default)
        if fields:
            raise TypeError(f"unknown {cls.__name__} fields: {', '.join(fields)}")
        return out

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
    def n_answers(self) -> int:
        return int(self.task.shape[0])

    def __len__(self) -> int:
        return self.n_answers

    # ------------------------------------------------------------ CSR indices
    @cached_property
    def task_ptr(self) -> np.ndarray:
        """CSR offsets, shape (n_tasks + 1,): task ``t`` owns answers ``task_ptr[t]:task_ptr[t+1]``."""
        return _frozen(_offsets(self.task, self.n_tasks))

    @cached_property
    def answers_per_task(self) -> np.ndarray:
        return _frozen(np.diff(self.task_ptr))

    @cached_property
    def answers_per_worker(self) -> np.ndarray:
        return _frozen(np.bincount(self.worker, minlength=self.n_workers))


@dataclass(frozen=True, eq=False)
class AnnotationSet(FlatAnswers):
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
    class_dtype : str or None
        The dtype the labels had before they became class names (``"int64"``,
        ``"double"``, ``"bool"`` as :class:`~crowdagg.data.vocab.Vocabulary` records
        ids; ``"Int64"``, ``"boolean"``, ``"category"``, ``"string"`` for a
        pandas column of that dtype), ``None`` for text.  The result's pandas
        views give labels back in it.

    Notes
    -----
    The constructor checks what it is given, in one numba pass over the
    answers (:func:`crowdagg.kernels.validate.check_codes`): integer codes of
    equal lengths with ``0 <= task < n_tasks``, ``0 <= worker < n_workers``,
    ``0 <= label < n_classes``; distinct class names.  A bad array is a
    :class:`~crowdagg.errors.DataError` naming it and its first bad position.
    Answers not sorted by task are sorted (stable: each task's answers keep
    their order).  The arrays are copied into the canonical dtypes and made
    read-only, so changing the caller's arrays later cannot reach the set.
    :meth:`from_codes` and :meth:`from_names` are the usual ways in; the
    readers build sets that are valid by construction and skip the check.
    """

    task: np.ndarray
    worker: np.ndarray
    label: np.ndarray
    tasks: Vocabulary
    workers: Vocabulary
    classes: tuple[str, ...]
    n_duplicates: int = 0
    duplicates: str = "keep"
    class_dtype: str | None = None

    def __post_init__(self) -> None:
        """Check and canonicalise what a caller passed (see the class notes); never runs for :meth:`_trusted`."""
        tasks, workers = self._checked_vocabularies()
        classes = _as_classes(self.classes)
        self._check_duplicates_record()
        if self.class_dtype is not None and not isinstance(self.class_dtype, str):
            raise UsageError(f"{param('class_dtype')} must be a dtype name or None, got {self.class_dtype!r}")
        from ..kernels.validate import as_code_array, check_codes

        arrays = [as_code_array(a, r) for a, r in zip((self.task, self.worker, self.label), ("task", "worker", "label"))]
        n_answers = len(arrays[0])
        label_dtype = _label_dtype(len(classes))
        _check_build_memory(n_answers, len(tasks), np.dtype(label_dtype).itemsize, None)
        scan = check_codes(arrays[0], arrays[1], arrays[2], len(tasks), len(workers), len(classes))
        task = arrays[0].astype(np.int32)  # always a copy: the caller's arrays stay theirs
        worker = arrays[1].astype(np.int32)
        label = arrays[2].astype(label_dtype)
        ptr = None
        if not scan.task_sorted:
            from ..kernels.ingest import _sort_by_task

            ptr, task, worker, label = _sort_by_task(task, worker, label, len(tasks))
        for arr in (task, worker, label):
            arr.setflags(write=False)
        for name, value in (("task", task), ("worker", worker), ("label", label), ("tasks", tasks),
                            ("workers", workers), ("classes", classes), ("n_duplicates", int(self.n_duplicates))):
            object.__setattr__(self, name, value)
        if ptr is not None:
            ptr.setflags(write=False)
            self.__dict__["task_ptr"] = ptr

    # ------------------------------------------------------------------ sizes
    @property
    def n_classes(self) -> int:
        return len(self.classes)

    def __repr__(self) -> str:
        return (
            f"AnnotationSet(n_answers={self.n_answers}, n_tasks={self.n_tasks}, "
            f"n_workers={self.n_workers}, classes={list(self.classes)!r})"
        )

    # ------------------------------------------------------------ CSR indices
    @cached_property
    def worker_order(self) -> np.ndarray:
        """Answer indices grouped by worker (stable), shape (n_answers,), int64."""
        from ..kernels.votes import _group_order

        order, _ = _group_order(self.worker, self.n_workers)  # codes checked when the set was built
        return _frozen(order)

    @cached_property
    def worker_ptr(self) -> np.ndarray:
        """CSR offsets into :attr:`worker_order`, shape (n_workers + 1,)."""
        return _frozen(_offsets(self.worker, self.n_workers))

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
    def answers_per_class(self) -> np.ndarray:
        """Answers given in each class, shape (n_classes,), int64.

        Counted a million answers at a time: ``bincount`` widens its input to
        intp, and the whole int8 label array widened is 8 bytes an answer
        (0.8 GB and 2.3 s at 100M answers, against 0.2 s in pieces).
        """
        counts = np.zeros(self.n_classes, dtype=np.int64)
        for start in range(0, self.n_answers, 1 << 20):
            counts += np.bincount(self.label[start:start + (1 << 20)], minlength=self.n_classes)
        return _frozen(counts)

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
        max_memory: MaxMemory = None,
    ) -> AnnotationSet:
        """Build a set from integer codes (already indices, not names).

        Indices keep their meaning: task ``t`` is ``task_names[t]`` (by default
        ``str(t)``); tasks and workers without answers are allowed (give
        ``n_tasks``/``n_workers``).  The arrays are never modified or frozen.

        The codes are checked in one pass (integers, equal lengths,
        ``0 <= code < n``; :func:`crowdagg.kernels.validate.check_codes`), a
        bad one a :class:`~crowdagg.errors.DataError` naming the array and
        its first bad position.  Sizes not given are the largest code + 1.
        The memory the set needs (it grows with ``n_tasks`` and
        ``n_workers``) is estimated first and refused with its size
        (:class:`~crowdagg.errors.ResourceError`) above ``max_memory``
        (bytes or ``"4G"``; default 80% of the available memory).
        """
        from ..kernels.validate import as_code_array, check_codes

        t, w, y = (as_code_array(a, r) for a, r in zip((task, worker, label), ("task", "worker", "label")))
        for name, given in (("n_tasks", n_tasks), ("n_workers", n_workers), ("n_classes", n_classes)):
            if given is not None and (isinstance(given, bool) or not isinstance(given, (int, np.integer)) or given < 0):
                raise UsageError(f"{param(name)} must be an integer >= 0, got {given!r}")
        if n_classes is not None:
            _label_dtype(int(n_classes))  # a class count beyond int16 is refused before anything is built
        for what, given in (("task", n_tasks), ("worker", n_workers)):
            if given is not None and given > np.iinfo(np.int32).max:
                raise DataError(f"{given:,} {what}s: more than int32 codes can hold")
        cn = _as_str_array(_listed(classes, "classes"), "class").tolist() if classes is not None else None
        if cn is not None:
            _label_dtype(len(cn))
        tn = _as_str_array(_listed(task_names, "task_names"), "task").tolist() if task_names is not None else None
        wn = _as_str_array(_listed(worker_names, "worker_names"), "worker").tolist() if worker_names is not None else None
        known = [given if given is not None else (len(names) if names is not None else -1)
                 for given, names in ((n_tasks, tn), (n_workers, wn), (n_classes, cn))]
        scan = check_codes(t, w, y, *known)
        n_tasks = _size("task", scan.max_task, n_tasks, tn)
        n_workers = _size("worker", scan.max_worker, n_workers, wn)
        n_classes = _size("class", scan.max_label, n_classes, cn)
        for what, n in (("task", n_tasks), ("worker", n_workers)):
            if n > np.iinfo(np.int32).max:
                raise DataError(f"{n:,} {what}s: more than int32 codes can hold")
        if n_classes < 1:
            raise DataError("at least one class is needed (give n_classes or classes)")
        label_dtype = _label_dtype(n_classes)
        _check_build_memory(len(t), n_tasks, np.dtype(label_dtype).itemsize, max_memory, n_workers,
                            named=(tn is not None, wn is not None))
        for what, names in (("task", tn), ("worker", wn)):
            if names is not None and len(set(names)) != len(names):
                seen: set[str] = set()
                dup = next(n for n in names if n in seen or seen.add(n))  # type: ignore[func-returns-value]
                raise DataError(f"{what} name {dup!r} is given twice; names must identify one {what} each")
        if cn is not None and len(set(cn)) != len(cn):
            raise UsageError(f"{param('classes')} lists a class twice")
        if cn is None:
            cn = [str(i) for i in range(n_classes)]
        return cls._build(
            t.astype(np.int32, copy=False),  # _build only reads them: the sort writes new arrays
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
        class_dtype: str | None = None,
    ) -> AnnotationSet:
        """Sort by task, apply the duplicate policy and freeze.

        The codes must be valid (checked by the caller, or valid by
        construction): nothing here checks them again.

        ``task``/``worker``/``label`` are in input order and owned by this
        call; ``locate`` maps an input row number to a human description
        ("file.csv line 12").  Duplicates and a single class are reported
        as :class:`~crowdagg.errors.CrowdaggWarning`.

        The sort is one stable counting sort (each task's answers keep their
        input order), so a repeated (task, worker) pair is found by one pass
        over each task's answers -- the first in input order is the first in
        its task.
        """
        ptr, t_sorted, w_sorted, y_sorted, n_dup = sort_answers(task, worker, label, tasks, workers,
                                                                duplicates=duplicates, locate=locate)
        if len(classes) == 1 and t_sorted.size:
            warn_one_class(classes[0])
        out = cls._trusted(
            task=t_sorted,
            worker=w_sorted,
            label=y_sorted,
            tasks=tasks,
            workers=workers,
            classes=classes,
            n_duplicates=n_dup,
            duplicates=duplicates,
            class_dtype=class_dtype,
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
        blank_labels: BlankLabelPolicy = "skip",
    ) -> AnnotationSet:
        """Build a set from identifier columns (Arrow arrays, numpy arrays or sequences).

        Ids become text (:func:`crowdagg.data.vocab.as_strings`: numbers as
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

        ``workers`` (a :class:`~crowdagg.data.vocab.Vocabulary`, such as another
        set's ``workers``, or a sequence of names) fixes the worker codes:
        its names keep their codes, workers new to it follow in order of
        first appearance, and its workers without answers here stay (with 0
        answers).  Sets built against one vocabulary -- the partitions of a
        data set, batches labelled with known workers -- agree on worker
        codes, as ``classes`` makes them agree on class codes.

        Missing values (None, NaN, ``pd.NA``, nulls) and empty or
        whitespace-only cells are blank (:mod:`crowdagg.data.vocab`).  A row blank
        in all three columns is skipped with a warning.  An answer with a
        blank label is a skipped question: by default (``blank_labels="skip"``)
        it is left out, with a warning giving the count; its task keeps its
        output row (with no answers, like a JSON ``{task: {}}`` entry) and a
        worker left with no answers leaves the worker vocabulary.
        ``blank_labels="error"`` refuses it, naming the first.  A blank task
        or worker is always an error.  A value that cannot be a name (a
        nested value, bytes that are not UTF-8, a lone surrogate, a NUL
        character) is a :class:`~crowdagg.errors.DataError` naming the row
        (through ``locate``) and the column.

        Every check runs on the distinct names (Arrow dictionary encoding),
        then is looked up per row by code: no Python object per answer.
        """
        return cast(AnnotationSet, cls._from_columns(
            [task, worker, label], classes=classes, duplicates=duplicates, locate=locate, label_col=label_col,
            task_order=task_order, header=header, workers=workers, blank_labels=blank_labels,
        ))

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
        blank_labels: BlankLabelPolicy = "skip",
        class_dtype: str | None = None,
    ) -> AnnotationSet:
        """:meth:`from_names` taking the (task, worker, label) columns in a list that it empties
        (:func:`encode_columns`, then :meth:`_assemble`)."""
        encoder, ids_dtypes, class_dtype = encode_columns(
            columns, classes=classes, locate=locate, task_order=task_order, header=header, dtypes=dtypes,
            blank_labels=blank_labels, class_dtype=class_dtype,
        )
        return cls._assemble(
            encoder, classes=classes, duplicates=duplicates, locate=locate, label_col=label_col, header=header,
            dtypes=ids_dtypes, workers=workers, blank_labels=blank_labels, class_dtype=class_dtype,
        )

    @classmethod
    def _assemble(
        cls,
        encoder: ColumnsEncoder,
        *,
        classes: Sequence[str] | None = None,
        duplicates: DuplicatePolicy = "keep",
        locate: Locator | None = None,
        label_col: str = "label",
        header: tuple[str, str, str] | Sequence[tuple[str, str, str]] | None = None,
        dtypes: tuple[str | None, str | None] = (None, None),
        workers: Vocabulary | Sequence[object] | None = None,
        blank_labels: BlankLabelPolicy = "skip",
        class_dtype: str | None = None,
    ) -> AnnotationSet:
        """The last stage of reading: encoded columns (:class:`crowdagg.data.encode.ColumnsEncoder`, which
        this empties) to an annotation set -- the steps every reading shares (:func:`decode_answers`), then
        the classes found and the answers sorted by task (:meth:`_from_decoded`).

        ``dtypes``: the task and worker ids' original dtypes; ``class_dtype`` the labels'.
        """
        decoded = decode_answers(encoder, has_classes=classes is not None, locate=locate, header=header,
                                 dtypes=dtypes, workers=workers, blank_labels=blank_labels)
        return cls._from_decoded(decoded, classes=classes, duplicates=duplicates, label_col=label_col,
                                 class_dtype=class_dtype)

    @classmethod
    def _from_decoded(
        cls,
        read: DecodedAnswers,
        *,
        classes: Sequence[str] | None,
        duplicates: DuplicatePolicy,
        label_col: str,
        class_dtype: str | None,
    ) -> AnnotationSet:
        """The categorical finish of a read: the distinct label texts of ``read`` (whose codes this takes)
        become classes (``classes``, or found by :func:`infer_classes`), the answers sorted by task."""
        t_codes, w_codes, y_codes = read.take()
        y_uniques, locate, n_blank_labels = read.label_texts, read.locate, read.n_blank_labels
        if len(y_codes) == 0 and classes is None:
            if n_blank_labels:
                raise DataError(
                    f"no answers in the input: every label is blank ({n_blank_labels} answer(s) skipped); "
                    f"give {param('classes')} to get the tasks' prior rows"
                )
            raise DataError("no answers in the input (every row is blank)")
        uniques = [str(u) for u in y_uniques.to_pylist()]
        if classes is not None:
            class_list = [str(c).strip() for c in _listed(classes, "classes")]
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
        read.end_stage()
        from .. import kernels  # noqa: F401  (numba's import is not the sort's time)

        owned = [t_codes.astype(np.int32, copy=False), w_codes.astype(np.int32, copy=False), labels]
        del t_codes, w_codes, labels, y_codes
        with _timing.stage("sort"):
            return cls._build(
                owned,  # type: ignore[arg-type]  # emptied by the sort as it goes
                None,  # type: ignore[arg-type]
                None,  # type: ignore[arg-type]
                read.tasks,
                read.workers,
                tuple(class_list),
                duplicates=duplicates,
                locate=locate,
                class_dtype=class_dtype,
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

    def without_workers(self, drop: Sequence[bool] | np.ndarray) -> AnnotationSet:
        """The set without the answers of the workers ``drop`` marks, every task kept in its place.

        Parameters
        ----------
        drop : array-like of bool, shape (n_workers,)
            True for a worker to remove (e.g. a spammer detector's flags).

        Returns
        -------
        AnnotationSet
            The same tasks (vocabulary and order: a task whose answers all
            came from dropped workers stays, with no answers), the same
            classes and label dtype; the kept workers renumbered
            ``0..n_kept-1`` in their old order (their names with them).
            ``n_duplicates`` and ``duplicates`` say what reading did and are
            kept as they were.  ``self`` when nobody is dropped.

        Notes
        -----
        O(n_answers) in numpy: a mask over the answers keeps their task
        order, so the subset is still sorted by task and its CSR offsets are
        a cumulative count of the kept answers per task.
        """
        mask = np.asarray(drop)
        if mask.shape != (self.n_workers,) or (mask.size and mask.dtype != np.bool_):
            raise UsageError(f"{param('drop')} must be {self.n_workers:,} booleans, one per worker; got "
                             f"shape {mask.shape} {mask.dtype}")
        if not mask.any():
            return self
        kept = np.flatnonzero(~mask)
        code = np.full(self.n_workers, -1, dtype=np.int32)
        code[kept] = np.arange(kept.size, dtype=np.int32)
        keep = ~mask[self.worker]
        task = self.task[keep]
        worker = code[self.worker[keep]]
        label = self.label[keep]
        ptr = _offsets(task, self.n_tasks)
        for arr in (task, worker, label, ptr):
            arr.setflags(write=False)
        from .vocab import take

        out = AnnotationSet._trusted(
            task=task, worker=worker, label=label, tasks=self.tasks,
            workers=Vocabulary(take(self.workers.names, kept), self.workers.dtype),
            classes=self.classes, n_duplicates=self.n_duplicates, duplicates=self.duplicates,
            class_dtype=self.class_dtype,
        )
        out.__dict__["task_ptr"] = ptr
        return out

    def without_answers(self, drop: Sequence[bool] | np.ndarray) -> AnnotationSet:
        """The set without the answers ``drop`` marks, every task, worker and class kept in its place.

        Parameters
        ----------
        drop : array-like of bool, shape (n_answers,)
            True for an answer to hide (e.g. a fold of held-out answers).

        Returns
        -------
        AnnotationSet
            The same task, worker and class vocabularies (codes unchanged: a
            task or worker whose answers are all dropped stays, without
            answers), the kept answers in their order.  ``self`` when nothing
            is dropped.
        """
        mask = np.asarray(drop)
        if mask.shape != (self.n_answers,) or (mask.size and mask.dtype != np.bool_):
            raise UsageError(f"{param('drop')} must be {self.n_answers:,} booleans, one per answer; got "
                             f"shape {mask.shape} {mask.dtype}")
        if not mask.any():
            return self
        keep = ~mask
        task, worker, label = self.task[keep], self.worker[keep], self.label[keep]
        ptr = _offsets(task, self.n_tasks)  # a mask keeps the task order: still sorted
        for arr in (task, worker, label, ptr):
            arr.setflags(write=False)
        out = AnnotationSet._trusted(
            task=task, worker=worker, label=label, tasks=self.tasks, workers=self.workers, classes=self.classes,
            n_duplicates=self.n_duplicates, duplicates=self.duplicates, class_dtype=self.class_dtype,
        )
        out.__dict__["task_ptr"] = ptr
        return out

    def with_tasks(self, names: Sequence[str] | np.ndarray) -> AnnotationSet:
        """The set with the tasks ``names`` added after its own, without answers.

        Parameters
        ----------
        names : sequence of str, shape (n_new,)
            New task names, distinct, none of them a task of the set (the
            features of tasks nobody labelled, for ``crowdagg train``).

        Returns
        -------
        AnnotationSet
            The same answers, workers, classes and label dtype; the tasks
            ``0..n_tasks-1`` as they were, then ``names`` in their order.
            The ids' dtype is kept when every new name is written as it
            would be (an integer id column gains integer names), else the
            ids become text.  ``self`` when ``names`` is empty.
        """
        import pyarrow as pa

        new = _as_str_array(names, "task")
        if new.size == 0:
            return self
        if (new == "").any():
            raise UsageError(f"{param('names')}: a task name is blank")
        import pandas as pd

        index = pd.Index(new)
        if index.has_duplicates:
            raise UsageError(f"{param('names')}: task {new[index.duplicated()][0]!r} is given twice")
        taken = index.isin(self.task_names)
        if taken.any():
            raise UsageError(f"{param('names')}: task {new[taken][0]!r} is already a task of the set")
        dtype = self.tasks.dtype
        if dtype is not None and not (dtype.startswith(("int", "uint", "Int", "UInt"))
                                      and all(s.lstrip("-").isdigit() and str(int(s)) == s for s in new.tolist())):
            dtype = None
        tasks = Vocabulary(pa.concat_arrays([self.tasks.names, pa.array(new.tolist(), type=pa.string())]), dtype)
        ptr = np.concatenate([self.task_ptr, np.full(new.size, self.task_ptr[-1], dtype=self.task_ptr.dtype)])
        ptr.setflags(write=False)
        out = AnnotationSet._trusted(
            task=self.task, worker=self.worker, label=self.label, tasks=tasks, workers=self.workers,
            classes=self.classes, n_duplicates=self.n_duplicates, duplicates=self.duplicates,
            class_dtype=self.class_dtype,
        )
        out.__dict__["task_ptr"] = ptr
        return out


def sort_answers(
    task: np.ndarray | list[np.ndarray],
    worker: np.ndarray | None,
    label: np.ndarray | None,
    tasks: Vocabulary,
    workers: Vocabulary,
    *,
    duplicates: DuplicatePolicy = "keep",
    locate: Locator | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:
    """Answers sorted by task, the duplicate policy applied, frozen: ``(task_ptr, task, worker, label, n_dup)``.

    What every answer container's builder shares (the annotation set's class codes, the numeric answers'
    values: ``label`` may be any dtype).  The codes must be valid; ``task``/``worker``/``label`` are owned by
    this call (or given as one list ``[task, worker, label]``, emptied by the sort as it goes).  A repeated
    (task, worker) pair is found by one pass over each task's answers, the sort being stable; duplicates are
    warned about, or with ``error`` a :class:`~crowdagg.errors.DataError` naming the first one's line.
    """
    check_duplicates(duplicates)
    from ..kernels import group_order
    from ..kernels.ingest import _repeated_answers, _sort_by_task

    n_tasks = len(tasks)
    if isinstance(task, list):  # owned codes, freed by the sort as it goes; the task codes come back
        ptr, t_sorted, w_sorted, y_sorted = _sort_by_task(task, n_tasks=n_tasks)
        task = task.pop()
    else:
        ptr, t_sorted, w_sorted, y_sorted = _sort_by_task(task, worker, label, n_tasks)
    n_dup, repeat = _repeated_answers(
        ptr, w_sorted, len(workers), keep="last" if duplicates == "last" else "first",
        mark=duplicates != "keep",
    )
    if n_dup:
        if duplicates == "error":
            order, _ = group_order(task, n_tasks)
            repeats = np.flatnonzero(repeat)
            first = int(repeats[np.argmin(order[repeats])])  # the first repeat in input order
            row = int(order[first])
            where = locate(row) if locate else f"answer {row}"
            raise DataError(
                f"duplicate answer at {where}: worker {workers[w_sorted[first]]!r} "
                f"already labelled task {tasks[t_sorted[first]]!r} "
                f"({n_dup} duplicate answer(s) in all; see {param('duplicates')})"
            )
        if duplicates in ("first", "last"):
            keep = ~repeat
            t_sorted, w_sorted, y_sorted = t_sorted[keep], w_sorted[keep], y_sorted[keep]
            ptr = _offsets(t_sorted, n_tasks)
        _warn_duplicates(n_dup, duplicates)
    del repeat, task
    for arr in (t_sorted, w_sorted, y_sorted, ptr):
        arr.setflags(write=False)
    return ptr, t_sorted, w_sorted, y_sorted, n_dup


@dataclass(eq=False)
class DecodedAnswers:
    """The answers of a read once the steps every container shares are done (:func:`decode_answers`).

    ``codes`` are the task, worker and label codes per answer (the label's
    into the distinct label texts ``label_texts``, an Arrow string array),
    in input order, rows that are not answers dropped; ``tasks`` and
    ``workers`` the final vocabularies; ``locate`` names an answer's input
    line; ``n_blank_labels`` the answers skipped for a blank label;
    ``end_stage`` ends the ``names`` timing stage once the labels are
    decoded.  The container that finishes the read takes the codes with
    :meth:`take`, so that the sort can free them.
    """

    codes: list[np.ndarray]
    label_texts: pa.Array
    tasks: Vocabulary
    workers: Vocabulary
    locate: Locator | None
    n_blank_labels: int
    end_stage: Callable[[], None]

    def take(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The task, worker and label codes, no longer held here."""
        task, worker, label = self.codes
        self.codes.clear()
        return task, worker, label


def encode_columns(
    columns: list[Any],
    *,
    classes: Sequence[str] | None = None,
    locate: Locator | None = None,
    task_order: Sequence[object] | np.ndarray | pa.Array | None = None,
    header: tuple[str, str, str] | Sequence[tuple[str, str, str]] | None = None,
    dtypes: tuple[str | None, str | None] | None = None,
    blank_labels: BlankLabelPolicy = "skip",
    class_dtype: str | None = None,
) -> tuple[ColumnsEncoder, tuple[str | None, str | None], str | None]:
    """The (task, worker, label) columns, in a list that this empties, encoded: ``(encoder, (task dtype,
    worker dtype), class_dtype)`` for :func:`decode_answers`.

    ``dtypes`` gives the task and worker ids' original dtypes when the
    columns are already text (several files joined); ``class_dtype`` the
    labels' (:attr:`AnnotationSet.class_dtype`; default: the label column's
    own, when it is typed).  A value that cannot be a name is a
    :class:`~crowdagg.errors.DataError` naming its row and column.

    A reader that drops its own references first lets the parsed text
    columns be freed as soon as they are encoded (gigabytes at 100M
    answers) instead of when the set is built.
    """
    if classes is not None and hasattr(classes, "__len__"):
        _label_dtype(len(classes))  # refused before a string is made per class
    from . import vocab

    check_blank_labels(blank_labels)
    is_category = _is_dictionary(columns[2])
    roles = ("task", "worker", "label")
    named = []
    for i, (v, role) in enumerate(zip(columns, roles)):
        try:
            named.append(vocab.as_strings(v, role))
        except vocab.InvalidName as exc:
            raise name_error(exc, role, locate, _column_name(header, i)) from None
    (t, t_dtype), (w, w_dtype), (y, y_dtype) = named
    del named
    if class_dtype is None:
        class_dtype = f"category[{y_dtype}]" if is_category and y_dtype else "category" if is_category else y_dtype
    columns.clear()
    if dtypes is not None:
        t_dtype, w_dtype = dtypes
    if not len(t) == len(w) == len(y):
        raise DataError(f"task, worker and label columns differ in length ({len(t)}, {len(w)}, {len(y)})")
    from .encode import ColumnsEncoder

    encoder = ColumnsEncoder()
    if task_order is not None:
        try:
            extra, _ = vocab.as_strings(task_order, "task")
        except vocab.InvalidName as exc:
            raise name_error(exc, "task", None, None, what="the list of tasks") from None
        encoder.add_tasks(extra)
        del extra
    with _timing.stage("encode"):
        encoder.add(t, w, y)
    del t, w, y
    return encoder, (t_dtype, w_dtype), class_dtype


def decode_answers(
    encoder: ColumnsEncoder,
    *,
    has_classes: bool = False,
    locate: Locator | None = None,
    header: tuple[str, str, str] | Sequence[tuple[str, str, str]] | None = None,
    dtypes: tuple[str | None, str | None] = (None, None),
    workers: Vocabulary | Sequence[object] | None = None,
    blank_labels: BlankLabelPolicy = "skip",
) -> DecodedAnswers:
    """The steps of reading that every answer container shares: encoded columns
    (:class:`crowdagg.data.encode.ColumnsEncoder`, which this empties) with the names checked, stripped and
    merged on the distinct names, rows that are not answers (blank, repeated headers) dropped, blank
    labels skipped or refused, the vocabularies final (``workers`` extended).

    ``has_classes``: the caller was given the classes (an input with no
    answer is then not refused here).  ``dtypes``: the task and worker ids'
    original dtypes.  What remains -- labels to classes, or to numbers --
    is the container's (:meth:`AnnotationSet._from_decoded`,
    :meth:`crowdagg.data.numeric.NumericAnswers._from_decoded`).
    """
    from . import vocab

    roles = ("task", "worker", "label")
    t_dtype, w_dtype = dtypes
    n_extra = encoder.extra.n
    if encoder.rows == 0 and (n_extra == 0 or not has_classes):
        raise DataError(
            "no answers in the input"
            + (f" ({n_extra} task(s), none answered); give {param('classes')} to get their prior rows"
               if n_extra else "")
        )
    with _timing.stage("encode"):
        try:
            (t_codes, t_names, c_t, m_t), (w_codes, w_names, c_w, m_w), (y_codes, y_uniques, c_y, m_y) = (
                _finish_names(encoder)
            )
        except _BadName as failure:
            invalid, i = failure.args
            row = invalid.row - (n_extra if i == 0 else 0)
            if row < 0:
                raise name_error(invalid, "task", None, None, what="the list of tasks") from None
            invalid.row = row
            raise name_error(invalid, roles[i], locate, _column_name(header, i)) from None
    vocab.release_memory()
    end_names_stage = _timing.start("names")
    if n_extra and vocab.blank(t_names)[encoder.extra.take()].any():
        raise DataError("a blank task name in the list of tasks")
    encoder.release()
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
    # A partly blank row is an error naming its line -- unless only its label is blank: a
    # skipped question, left out by default (its task keeps its row with no answers).
    n_blank_labels = 0
    answerless_workers = np.zeros(len(w_names), dtype=bool)
    for role, b, codes in zip(roles, blank_name, codes3):
        if b.any():
            mask = b[codes]
            if mask.any():
                row = int(np.flatnonzero(mask)[0])
                where = locate(row) if locate else f"answer {row}"
                if role != "label" or blank_labels == "error":
                    raise DataError(f"blank {role} at {where} ({int(mask.sum())} blank {role} cell(s) in all)")
                n_blank_labels = int(mask.sum())
                warn(
                    CrowdaggWarning(
                        f"skipped {n_blank_labels} answer(s) with a blank label (first at {where}); "
                        f"set {param('blank_labels')} to error to refuse them"
                    )
                )
                answerless_workers[w_codes[mask]] = True  # those left with no answer are forgotten below
                keep = np.flatnonzero(~mask)
                t_codes, w_codes, y_codes = t_codes[keep], w_codes[keep], y_codes[keep]
                locate = locate.subset(keep) if locate else None
    # The blank name and the header's own cells leave the vocabularies once no row uses them.
    t_codes, t_names = _forget(t_codes, t_names, blank_name[0] | header_name[0])
    w_codes, w_names = _forget(w_codes, w_names, blank_name[1] | header_name[1] | answerless_workers)
    if workers is not None:
        known = _known_vocabulary(workers, "worker")
        remap, extended = known.extend(w_names)
        w_codes, w_names = remap[w_codes], extended.names
        if extended is known or len(known) and known.dtype == w_dtype:
            w_dtype = known.dtype  # every name is the vocabulary's, or both had one type
        elif len(known):
            w_dtype = None
    y_codes, y_uniques = _forget(y_codes, y_uniques, blank_name[2] | header_name[2])
    return DecodedAnswers(
        [t_codes, w_codes, y_codes], y_uniques, vocab.Vocabulary(t_names, t_dtype), vocab.Vocabulary(w_names, w_dtype),
        locate, n_blank_labels, end_names_stage,
    )


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


def _size(what: str, largest: int, given: int | None, names: list | None) -> int:
    """A size: given, else the number of names, else the largest code + 1 (codes already checked against it)."""
    n = given if given is not None else (len(names) if names is not None else largest + 1)
    if names is not None and len(names) != n:
        raise DataError(f"{len(names)} {what} names given for {n} {what}{'es' if what == 'class' else 's'}")
    return int(n)


def check_annotations(value: Any, call: str) -> None:
    """A :class:`~crowdagg.errors.UsageError` unless ``value`` is an
    :class:`~crowdagg.data.annotations.AnnotationSet`: the message names ``call`` (``"split(data, ...)"``) and how
    to make one -- where reading ``data.task_names`` of a DataFrame raised AttributeError."""
    if not isinstance(value, AnnotationSet):
        if isinstance(value, FlatAnswers) and value.numeric:  # the categorical methods refuse numbers, naming what takes them
            raise UsageError(f"{call}: numeric answers take a numeric method ({', '.join(NUMERIC_METHODS)}; "
                             f"{param('numeric')}), not a categorical one")
        raise UsageError(f"{call}: data must be an AnnotationSet (crowdagg.load_annotations reads a DataFrame, "
                         f"records or a file into one), got {type(value).__name__}")


def pandas_class_dtype(frame: Any, column: str) -> str | None:
    """The dtype to record for a DataFrame's label column when Arrow would not keep it.

    A pandas extension dtype (``Int64``, ``boolean``, ``string``, ``str``)
    by its name; None for NumPy dtypes and categoricals, which the Arrow
    column itself records (:meth:`AnnotationSet._from_columns`).
    """
    import pandas as pd

    # ``column`` is the header text, str(label) (the reader's header): an integer or tuple label is found by it.
    at = [j for j, c in enumerate(frame.columns) if str(c) == column]
    if len(at) != 1:  # two columns of that name: no single dtype
        return None
    dtype = frame.iloc[:, at[0]].dtype
    if isinstance(dtype, (np.dtype, pd.CategoricalDtype)):
        return None
    return str(dtype)


def _is_dictionary(column: Any) -> bool:
    """Whether a label column is dictionary-encoded (a pandas categorical, a Parquet dictionary column)."""
    import sys

    pa = sys.modules.get("pyarrow")
    return pa is not None and isinstance(column, (pa.Array, pa.ChunkedArray)) and pa.types.is_dictionary(column.type)


def _offsets(codes: np.ndarray, n: int) -> np.ndarray:
    """CSR offsets of codes in [0, n): shape (n + 1,), int64; group ``g`` owns ``offsets[g]:offsets[g+1]``."""
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(codes, minlength=n), out=ptr[1:])
    return ptr


def _frozen(arr: np.ndarray) -> np.ndarray:
    """``arr`` made read-only: a set's derived arrays index kernels, so a caller's write must not reach them."""
    arr.setflags(write=False)
    return arr


def _as_vocabulary(given: Any, name: str) -> Vocabulary:
    """The constructor's ``tasks``/``workers``: a Vocabulary as it is (its names are distinct by its contract;
    checking a million names again would cost more than the answers' check), or a list of names made one
    and checked (distinct, none blank)."""
    if isinstance(given, Vocabulary):
        if given.names.null_count:  # O(1): a null name would reach the output as a missing id
            raise DataError(f"the {name} vocabulary has a missing (null) name")
        return given
    vocabulary = Vocabulary.from_strings(_as_str_array(_listed(given, name), name[:-1]))
    try:
        vocabulary.check_distinct(name[:-1])
    except UsageError as exc:
        raise DataError(str(exc)) from None
    return vocabulary


def _as_classes(given: Any) -> tuple[str, ...]:
    """The constructor's ``classes``: a tuple of distinct, non-blank str, at least one."""
    names = tuple(_as_str_array(_listed(given, "classes"), "class").tolist())
    _label_dtype(len(names))
    if not names:
        raise DataError("at least one class is needed")
    if any(not n.strip() for n in names) or len(set(names)) != len(names):
        raise UsageError(f"{param('classes')} must be distinct, non-blank names, got {list(names)[:10]!r}")
    return names


def _listed(values: Any, name: str) -> list:
    """A names argument as a list.

    Refused (a UsageError): one string (which would iterate by character), a
    mapping, a set (its order changes from one run to the next with string
    hashing, and the order gives each name its code), anything not iterable.
    """
    from collections.abc import Mapping

    if isinstance(values, (str, bytes, Mapping, set, frozenset)):
        why = " (a set has no order; the order gives each name its code)" if isinstance(values, (set, frozenset)) else ""
        raise UsageError(f"{param(name)} must be a list of names, got {type(values).__name__}{why}")
    try:
        return list(values)
    except TypeError:
        raise UsageError(f"{param(name)} must be a list of names, got {type(values).__name__}") from None


#: Bytes per task (or worker) of a set built from codes: the counting sort's counts, offsets and fill
#: pointers (24), the vocabulary's offsets and int64 codes cast to text (12) and its digits.
_BYTES_PER_ID = 36
#: ... when names are given: an object array slot, a Python str (~50) and Arrow offsets and text.
_BYTES_PER_NAME = 90


def _check_build_memory(
    n_answers: int, n_tasks: int, label_size: int, max_memory: MaxMemory,
    n_workers: int = 0, named: tuple[bool, bool] = (False, False),
) -> None:
    """Refuse (:class:`~crowdagg.errors.ResourceError`) a set whose building would need more than the limit.

    It grows with the answers (the sorted copies, the duplicate mask) and
    with ``n_tasks``/``n_workers``, which a caller may give far beyond the
    codes (``n_tasks=2_000_000_000``).
    """
    from ..core import memory

    def per_id(n: int, has_names: bool) -> float:
        return n * (_BYTES_PER_NAME if has_names else _BYTES_PER_ID + len(str(max(n - 1, 0))))

    need = 2.0 * n_answers * (8 + label_size) + n_answers + per_id(n_tasks, named[0]) + per_id(n_workers, named[1])
    memory.check(
        need, f"an annotation set of {n_answers:,} answers, {n_tasks:,} tasks and {n_workers:,} workers",
        max_memory, advice="give n_tasks and n_workers as the numbers of tasks and workers there are",
    )


def _known_vocabulary(given: Any, role: str) -> Vocabulary:
    """A vocabulary given to encode against: a :class:`Vocabulary` as it is, names stripped like the data's;
    checked (no blank or repeated name)."""
    from . import vocab

    if not isinstance(given, Vocabulary):
        # A set's order changes from run to run (string hashing); dict keys keep theirs.
        if isinstance(given, (str, bytes, dict, AnnotationSet, set, frozenset)):
            what = ("another set's .workers" if isinstance(given, AnnotationSet)
                    else "a set has no order, and the order gives each name its code"
                    if isinstance(given, (set, frozenset))
                    else "not one name or a mapping")
            raise UsageError(f"{param(role + 's')} must be a list of names or a Vocabulary ({what})")
        import pyarrow as pa

        if not isinstance(given, (np.ndarray, pa.Array, pa.ChunkedArray)):
            given = np.asarray(list(given))  # a list of ints keeps its integer type, as a column would
        names, dtype = vocab.as_strings(given, role)
        given = Vocabulary(vocab.strip(names)[0], dtype)
    given.check_distinct(role)
    return given


class _BadName(Exception):
    """(InvalidName with a row of the encoded column, index of the column): raised by :func:`_finish_names`."""


def _finish_names(encoder: ColumnsEncoder) -> list[tuple[np.ndarray, pa.Array, int, int]]:
    """Per column (task, worker, label): codes in order of first appearance, stripped names, cells
    changed, names merged -- the encoder's codes taken, its vocabularies checked and stripped.

    Checks and stripping run on the distinct names, not the rows.  The blank
    name ``""`` (a cell that was empty or only whitespace) keeps a code so
    that the caller can tell skipped rows from errors.  A name that is not
    valid text raises :class:`_BadName` with its first row (counting the
    task list given apart, :attr:`ColumnsEncoder.extra`, first).  The task
    list's codes are remapped in place.
    """
    from . import vocab

    out = []
    for index, (enc, column) in enumerate(zip(encoder.encoders, encoder.codes)):
        codes = column.take()
        uniques = enc.names()
        enc.release()
        extra = encoder.extra.array[: encoder.extra.n] if index == 0 else codes[:0]
        bad = vocab.invalid_names(uniques)  # on the distinct names: not UTF-8, a NUL character
        if bad is not None:
            code = bad[0]
            hits = np.flatnonzero(extra == code)
            row = int(hits[0]) if hits.size else len(extra) + int(np.argmax(codes == code))
            raise _BadName(vocab.InvalidName(row, bad[1]), index)
        n_changed = 0
        n_merged = 0
        stripped, differs = vocab.strip(uniques)
        if differs.any():
            now_blank = vocab.blank(stripped)
            counts = np.bincount(codes, minlength=len(uniques))
            n_changed = int(counts[differs & ~now_blank].sum())
            from .encode import encode_column

            remap, names = encode_column(stripped)
            nonblank = int(np.count_nonzero(~now_blank))
            n_merged = nonblank - (len(names) - int(vocab.blank(names).any()))
            codes = remap[codes]
            if extra.size:
                extra[:] = remap[extra]
            uniques = names
        out.append((codes, uniques, n_changed, n_merged))
    return out


def _column_name(header: Any, i: int) -> str | None:
    """The name of column ``i`` (task, worker, label) in messages: from ``header`` when every input agrees."""
    if header is None:
        return None
    headers = [header] if isinstance(header[0], str) else list(header)
    names = {str(h[i]) for h in headers}
    return names.pop() if len(names) == 1 else None


def name_error(
    exc: Any, role: str, locate: Locator | None, column: str | None, what: str | None = None
) -> DataError:
    """A :class:`~crowdagg.data.vocab.InvalidName` worded with where it is: the row (through ``locate``), the column."""
    subject = f"the {role}" + (f" (column {column!r})" if column else "")
    if exc.row is None:
        source = f" of {locate.source}" if locate is not None else ""
        col = f" {column!r}" if column else ""
        return DataError(f"the {role} column{col}{source} {exc.reason}")
    if what is not None:
        where = f"entry {exc.row + 1} of {what}"
    else:
        where = locate(exc.row) if locate is not None else f"answer {exc.row}"
    return DataError(f"{subject} at {where} {exc.reason}")


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


def warn_one_class(name: str) -> None:
    """Warn that the answers hold one class only (every task gets it)."""
    warn(CrowdaggWarning(f"only one class ({name!r}) is present: every task gets it; "
                         f"pass {param('classes')} to name the others"))


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
    from .vocab import InvalidName, as_strings, invalid_names, python_strings

    arr = np.asarray(values, dtype=object)
    if arr.ndim != 1:
        raise DataError(f"{role} names must be one-dimensional, got an array of shape {arr.shape}")
    try:
        out = python_strings(arr, role)
        bad = invalid_names(as_strings(out, role)[0])  # a lone surrogate, a NUL character
        if bad is not None:
            raise InvalidName(*bad, role)
    except InvalidName as exc:
        raise name_error(exc, role, None, None, what=f"the {role} names") from None
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
                    f"({_fmt(vals[0])} .. {_fmt(vals[-1])}): numeric answers, which the categorical methods do not "
                    f"aggregate; aggregate them with {param('numeric')} and a numeric method "
                    f"({', '.join(NUMERIC_METHODS)}), or pass {param('classes')} to treat these values as classes"
                )
        return ordered
    return sorted(names)


def _fmt(v: float) -> str:
    return str(int(v)) if v.is_integer() else repr(v)
