"""Numeric answers: the data model of the numeric methods (``mean``, ``median``, ``catd``, ``crh``).

A :class:`NumericAnswers` holds ``L`` answers that are measurements, not
classes -- a rating on a scale, a count, an estimate -- as three flat
arrays sorted by task: ``task`` (int32), ``worker`` (int32) and ``value``
(float64, every one finite), with the task and worker vocabularies of an
:class:`~crowdagg.data.annotations.AnnotationSet` (names in order of first
appearance, kept as Arrow strings).

They are read by the same readers as categorical answers
(:func:`crowdagg.io.read.load_numeric`: CSV, TSV, JSON, JSON Lines,
Parquet, ``-``, globs, the column aliases, the duplicates policy); only the
last step differs: the distinct label texts are read as numbers
(:func:`parse_values`) instead of becoming classes.  A value that is not a
number, or is not finite (``inf``), is a
:class:`~crowdagg.errors.DataError` naming the file, the line and the
value.  A blank value is a skipped answer, as a blank label is.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from ..core import timing as _timing
from ..core.memory import MaxMemory
from ..errors import DataError, UsageError, param
from .annotations import (
    AnnotationSet,
    DecodedAnswers,
    DuplicatePolicy,
    FlatAnswers,
    Locator,
    _as_str_array,
    _frozen,
    _listed,
    check_duplicates,
    sort_answers,
)
from .vocab import Vocabulary

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa

#: Bytes a numeric answer takes in the set: task and worker codes (int32) and the value (float64).
BYTES_PER_ANSWER = 4 + 4 + 8


@dataclass(frozen=True, eq=False)
class NumericAnswers(FlatAnswers):
    """Numeric crowd answers in flat-array form, sorted by task.

    Attributes
    ----------
    value : ndarray of float64, shape (n_answers,)
        The answer, finite.
    task, worker, tasks, workers, n_duplicates, duplicates
        As an :class:`~crowdagg.data.annotations.AnnotationSet`'s (what
        every answer container holds, :class:`~crowdagg.data.annotations.FlatAnswers`):
        the task (non-decreasing) and worker codes (int32, shape
        (n_answers,)), the vocabularies (names in order of first appearance
        in the input) and what was done with repeated (task, worker) answers.

    Build one with :meth:`from_codes` (integer codes and values, checked) or
    read one with :func:`crowdagg.io.read.load_numeric`; the arrays are
    read-only.  The constructor itself checks what it is given as
    :class:`~crowdagg.data.annotations.AnnotationSet`'s does (codes within
    the vocabularies, finite values, equal lengths) and sorts the answers by
    task where they are not.
    """

    numeric: ClassVar[bool] = True

    task: np.ndarray
    worker: np.ndarray
    value: np.ndarray
    tasks: Vocabulary
    workers: Vocabulary
    n_duplicates: int = 0
    duplicates: str = "keep"

    def __post_init__(self) -> None:
        """Check and canonicalise what a caller passed (copies, read-only, sorted by task with a stable sort);
        never runs for :meth:`_trusted`.  Unchecked, a task code past the vocabulary was a bare numpy error, a
        worker code past it a read past the end of an array in a kernel, and answers not sorted by task were
        averaged into the wrong tasks."""
        from ..kernels.validate import as_code_array, check_codes

        tasks, workers = self._checked_vocabularies()
        self._check_duplicates_record()
        t, w = (as_code_array(a, r) for a, r in ((self.task, "task"), (self.worker, "worker")))
        v = _as_values(self.value)
        if len(v) != len(t):
            raise DataError(f"value has {len(v):,} answers, task {len(t):,}: the arrays must have equal lengths")
        scan = check_codes(t, w, np.zeros(len(t), dtype=np.int8), len(tasks), len(workers), 1)
        t, w, v = t.astype(np.int32), w.astype(np.int32), v.copy()  # always copies: the caller's arrays stay theirs
        if not scan.task_sorted:
            order = np.argsort(t, kind="stable")
            t, w, v = t[order], w[order], v[order]
        for name, arr in (("task", t), ("worker", w), ("value", v)):
            object.__setattr__(self, name, _frozen(arr))
        for name, given in (("tasks", tasks), ("workers", workers), ("n_duplicates", int(self.n_duplicates))):
            object.__setattr__(self, name, given)

    def __repr__(self) -> str:
        return f"NumericAnswers(n_answers={self.n_answers}, n_tasks={self.n_tasks}, n_workers={self.n_workers})"

    @cached_property
    def task_std(self) -> np.ndarray:
        """Each task's sample standard deviation (``ddof=1``), shape (n_tasks,); 0 below two answers."""
        from ..kernels.numeric import task_stds

        return _frozen(task_stds(self.task_ptr, self.value))

    # -------------------------------------------------------------- builders
    @classmethod
    def from_codes(
        cls,
        task: Sequence[int] | np.ndarray,
        worker: Sequence[int] | np.ndarray,
        value: Sequence[float] | np.ndarray,
        *,
        n_tasks: int | None = None,
        n_workers: int | None = None,
        task_names: Iterable[str] | None = None,
        worker_names: Iterable[str] | None = None,
        duplicates: DuplicatePolicy = "keep",
        max_memory: MaxMemory = None,
    ) -> NumericAnswers:
        """Numeric answers from integer codes and values.

        The codes are checked as :meth:`AnnotationSet.from_codes
        <crowdagg.data.annotations.AnnotationSet.from_codes>` checks them
        (integers, equal lengths, ``0 <= code < n``; sizes not given are the
        largest code + 1; task ``t`` is ``task_names[t]``, by default
        ``str(t)``); the values must be finite numbers.  The caller's arrays
        are copied, never changed.
        """
        from ..core import memory
        from ..kernels.validate import as_code_array, check_codes

        t, w = (as_code_array(a, r) for a, r in ((task, "task"), (worker, "worker")))
        v = _as_values(value)
        if len(v) != len(t):
            raise DataError(f"value has {len(v):,} answers, task {len(t):,}: the arrays must have equal lengths")
        for name, given in (("n_tasks", n_tasks), ("n_workers", n_workers)):
            if given is not None and (isinstance(given, bool) or not isinstance(given, (int, np.integer)) or given < 0):
                raise UsageError(f"{param(name)} must be an integer >= 0, got {given!r}")
        tn = _as_str_array(_listed(task_names, "task_names"), "task").tolist() if task_names is not None else None
        wn = _as_str_array(_listed(worker_names, "worker_names"), "worker").tolist() if worker_names is not None else None
        known = [given if given is not None else (len(names) if names is not None else -1)
                 for given, names in ((n_tasks, tn), (n_workers, wn))]
        # the annotation set's one-pass check of the codes; no class codes here (zeros, in range by construction)
        scan = check_codes(t, w, np.zeros(len(t), dtype=np.int8), known[0], known[1], 1)
        sizes = [int(k) if k >= 0 else largest + 1 for k, largest in zip(known, (scan.max_task, scan.max_worker))]
        memory.check(2 * BYTES_PER_ANSWER * len(t) + 8 * (sizes[0] + sizes[1]),
                     f"{len(t):,} numeric answers", max_memory)
        for what, names in (("task", tn), ("worker", wn)):
            if names is not None and len(set(names)) != len(names):
                raise DataError(f"{what} names must identify one {what} each: a name is given twice")
        return cls._build(
            [t.astype(np.int32), w.astype(np.int32), v.copy()],
            Vocabulary.from_strings(tn) if tn is not None else Vocabulary.range(sizes[0]),
            Vocabulary.from_strings(wn) if wn is not None else Vocabulary.range(sizes[1]),
            duplicates=duplicates,
        )

    @classmethod
    def _build(cls, owned: list[np.ndarray], tasks: Vocabulary, workers: Vocabulary, *,
               duplicates: DuplicatePolicy = "keep", locate: Locator | None = None) -> NumericAnswers:
        """Sort valid, owned ``[task, worker, value]`` by task and apply the duplicate policy
        (:func:`~crowdagg.data.annotations.sort_answers`, the annotation set's own)."""
        check_duplicates(duplicates)
        ptr, t, w, v, n_dup = sort_answers(owned, None, None, tasks, workers, duplicates=duplicates, locate=locate)
        out = cls._trusted(task=t, worker=w, value=v, tasks=tasks, workers=workers, n_duplicates=n_dup,
                           duplicates=duplicates)
        out.__dict__["task_ptr"] = ptr  # the sort's offsets are the CSR offsets
        return out

    @classmethod
    def _from_decoded(cls, read: DecodedAnswers, *, duplicates: DuplicatePolicy = "keep",
                      label_col: str = "label") -> NumericAnswers:
        """The numeric finish of a read (:func:`crowdagg.io.read.load_numeric`): the distinct label texts of
        ``read`` (:func:`~crowdagg.data.annotations.decode_answers`, whose codes this takes) read as numbers
        (:func:`parse_values`) instead of becoming classes, the answers sorted by task (:meth:`_build`)."""
        if len(read.codes[2]) == 0:
            raise DataError("no answers in the input: every value is blank" if read.n_blank_labels
                            else "no answers in the input (every row is blank)")
        t_codes, w_codes, y_codes = read.take()
        values = parse_values(read.label_texts, y_codes, read.locate, label_col)[y_codes]
        read.end_stage()
        owned = [t_codes.astype(np.int32, copy=False), w_codes.astype(np.int32, copy=False), values]
        del t_codes, w_codes, values, y_codes
        with _timing.stage("sort"):
            return cls._build(owned, read.tasks, read.workers, duplicates=duplicates, locate=read.locate)

    def with_values(self, value: np.ndarray) -> NumericAnswers:
        """The same answers with other values (same order; finite), e.g. rescaled."""
        v = _as_values(value)
        if v.shape != self.value.shape:
            raise DataError(f"value must have shape {self.value.shape}, got {v.shape}")
        out = self._trusted(**{f.name: getattr(self, f.name) for f in dataclasses.fields(self)} | {
            "value": _frozen(v.copy())})
        out.__dict__["task_ptr"] = self.task_ptr
        return out


def check_numeric(value: Any, call: str) -> None:
    """A :class:`~crowdagg.errors.UsageError` unless ``value`` is :class:`NumericAnswers` (``call`` names the
    function refusing it); categorical answers are told where the numeric path starts."""
    if isinstance(value, NumericAnswers):
        return
    if isinstance(value, AnnotationSet):
        raise UsageError(f"{call} takes numeric answers (load_numeric, or {param('numeric')}), got categorical "
                         f"answers ({value.n_classes} classes): use a categorical method for them")
    raise UsageError(f"{call} takes NumericAnswers, got {type(value).__name__}")


def parse_values(uniques: pa.Array, codes: np.ndarray, locate: Locator | None, label_col: str) -> np.ndarray:
    """The distinct value texts ``uniques`` as float64 (shape (len(uniques),)); ``codes`` index them per answer.

    Arrow reads them all at once; where it cannot (text that is not a
    number) or a value is not finite, the first answer holding such a value
    is found and named (``file line N``) in a :class:`~crowdagg.errors.DataError`.
    Python's own number syntax beyond Arrow's (``1_000``, non-ASCII digits)
    is not a number here.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    try:
        values = pc.cast(uniques, pa.float64()).to_numpy(zero_copy_only=False)
        bad = np.flatnonzero(~np.isfinite(values))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        texts = uniques.to_pylist()
        values = np.array([_number(s) for s in texts], dtype=np.float64)
        bad = np.flatnonzero(~np.isfinite(values))  # NaN marks text that is not a number
    if len(bad):
        wrong = np.zeros(len(values), dtype=bool)
        wrong[bad] = True
        rows = np.flatnonzero(wrong[codes])
        first = int(rows[0])
        text = uniques[int(codes[first])].as_py()
        where = locate(first) if locate else f"answer {first}"
        what = "not finite" if _number(text) == _number(text) else "not a number"
        # a spreadsheet's decimal comma (1,5) or thousands separator (1,000) is the likeliest text that is not
        # a number: say how to write one
        comma = isinstance(text, str) and "," in text and any(
            _number(t) == _number(t) for t in (text.replace(",", ".", 1), text.replace(",", "")))
        raise DataError(
            f"{label_col} {text!r} at {where} is {what}: numeric answers are finite numbers "
            + ("written with a point for decimals and no separator for thousands " if comma else "")
            + f"({len(rows):,} answer(s) in all hold such values)"
        )
    return values


#: Answers whose largest magnitude lies outside ``[1/SAFE_RANGE, SAFE_RANGE]`` are fitted rescaled: their squares
#: (and sums of squares over a worker's answers) stay within float64's range inside it, with room to spare.
SAFE_RANGE = 2.0**64


def value_scale(value: np.ndarray) -> float:
    """The power of two the answers ``value`` are divided by to be fitted: 1 where their largest magnitude lies
    within :data:`SAFE_RANGE`, else that magnitude's (so that it becomes about 1).

    A mean of ``1e308`` and ``1.5e308`` overflows, and so do the squared
    errors of ``1e200``; the squares of ``1e-300`` underflow to 0, and
    CATD's weights (their reciprocals) overflow: answers on such a scale
    are fitted divided by this, and the estimates multiplied back.  A power
    of two divides exactly, so the fit is the one on the answers as given.
    """
    top = float(np.max(np.abs(value), initial=0.0))
    if top == 0 or 1 / SAFE_RANGE <= top <= SAFE_RANGE:
        return 1.0
    return math.ldexp(1.0, math.frexp(top)[1] - 1)  # top / scale in [1, 2): 2**1024 itself is not a float


def _number(text: str) -> float:
    """``text`` as a float; NaN when it is not a number as written here (ASCII, no ``_``)."""
    if not text.isascii() or "_" in text:
        return float("nan")
    try:
        v = float(text)
    except ValueError:
        return float("nan")
    return v if v == v else float("inf")  # a written "nan" is a value that is not finite, not text


def _as_values(value: Any) -> np.ndarray:
    """``value`` as a 1-D float64 array of finite numbers (a :class:`~crowdagg.errors.DataError` otherwise)."""
    if np.asarray(value).dtype == np.bool_:  # as the readers refuse 'true': a yes/no is a class, not a number
        raise DataError("value holds booleans: numeric answers are numbers (give value.astype(float) if 1 and 0 "
                        "are meant)")
    try:
        v = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError, OverflowError):  # OverflowError: a Python int beyond float64 (10**400)
        raise DataError("value must be numbers (a 1-D array of floats)") from None
    if v.ndim != 1:
        raise DataError(f"value must be one-dimensional, got an array of shape {v.shape}")
    bad = np.flatnonzero(~np.isfinite(v))
    if len(bad):
        raise DataError(f"value at position {int(bad[0])} is {float(v[bad[0]])!r}: numeric answers are finite numbers")
    return v


__all__ = ["NumericAnswers", "check_numeric", "parse_values", "value_scale", "BYTES_PER_ANSWER", "SAFE_RANGE"]
