"""An annotation set whose answers live elsewhere (on Dask workers): its vocabularies and counts, no answer arrays.

A distributed engine keeps the answers in partitions on its workers; the
client that fits a method needs only what is per task, per worker or per
class -- the names, the answer counts -- and the engine for everything per
answer.  :func:`remote_set` builds an :class:`~.annotations.AnnotationSet`
of those: its ``task``, ``worker`` and ``label`` are :class:`RemoteAnswers`
placeholders that refuse to be read, so code that still reaches the whole
answer arrays fails with a worded :class:`~crowdagg.errors.UsageError`
instead of computing on nothing.
"""

from __future__ import annotations

from typing import Any, NoReturn

import numpy as np

from ..errors import UsageError
from .annotations import AnnotationSet
from .vocab import Vocabulary


class RemoteAnswers:
    """Stands for an answer array held by a distributed engine's workers: it has a length and a dtype, no values."""

    ndim = 1

    def __init__(self, n: int, dtype: Any, what: str) -> None:
        self.shape = (int(n),)
        self.dtype = np.dtype(dtype)
        self.what = what

    def __len__(self) -> int:
        return self.shape[0]

    def __repr__(self) -> str:
        return f"RemoteAnswers({self.what}, n={self.shape[0]:,})"

    def _refuse(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise UsageError(
            f"the answers' {self.what} codes are held by the Dask workers, and this step reads them all at once: "
            "it is not supported with the Dask engine (run it with the local engine)"
        )

    __array__ = __getitem__ = __iter__ = __eq__ = __ne__ = __lt__ = __gt__ = __add__ = __mul__ = _refuse
    __hash__ = None  # type: ignore[assignment]

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):  # protocols probed by name (pickle, copy, numpy): absent, as on any object
            raise AttributeError(name)
        self._refuse()  # .astype, .max, ...: an array's methods, which need the values


def remote_set(
    *,
    tasks: Vocabulary,
    workers: Vocabulary,
    classes: tuple[str, ...],
    task_ptr: np.ndarray,
    answers_per_worker: np.ndarray,
    answers_per_class: np.ndarray,
    n_duplicates: int = 0,
    class_dtype: str | None = None,
) -> AnnotationSet:
    """An annotation set of ``task_ptr[-1]`` answers held elsewhere: the vocabularies and counts given, the
    answer arrays :class:`RemoteAnswers`.

    ``task_ptr`` (n_tasks + 1,) the answers' CSR offsets by task;
    ``answers_per_worker`` (n_workers,) and ``answers_per_class``
    (n_classes,) their counts.  All are frozen.
    """
    n = int(task_ptr[-1])
    label_dtype = np.int8 if len(classes) <= 127 else np.int16
    out = AnnotationSet._trusted(
        task=RemoteAnswers(n, np.int32, "task"), worker=RemoteAnswers(n, np.int32, "worker"),
        label=RemoteAnswers(n, label_dtype, "label"), tasks=tasks, workers=workers, classes=tuple(classes),
        n_duplicates=int(n_duplicates), duplicates="keep", class_dtype=class_dtype,
    )
    per_worker = np.asarray(answers_per_worker, dtype=np.int64)
    worker_ptr = np.zeros(len(per_worker) + 1, dtype=np.int64)
    np.cumsum(per_worker, out=worker_ptr[1:])
    for name, value in (("task_ptr", task_ptr), ("answers_per_worker", per_worker),
                        ("answers_per_class", answers_per_class), ("worker_ptr", worker_ptr)):
        value = np.asarray(value, dtype=np.int64)
        value.setflags(write=False)
        out.__dict__[name] = value
    # The set's per-answer arrays derived from the answers are placeholders too (computed, they would hand a
    # placeholder to a numba kernel: a TypingError, not this module's refusal).
    for name, what in (("worker_order", "worker order"), ("worker_position", "worker position"), ("cell", "cell")):
        out.__dict__[name] = RemoteAnswers(n, np.int64, what)
    return out


def is_remote(data: AnnotationSet) -> bool:
    """Whether ``data``'s answers are held elsewhere (:func:`remote_set`)."""
    return isinstance(data.task, RemoteAnswers)
