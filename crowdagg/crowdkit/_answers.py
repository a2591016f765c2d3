"""What every crowd-kit class here shares: its answers frame as flat codes, crowd-kit's orders and dtypes, checks.

:class:`Answers` encodes a ``task``/``worker``/``label`` frame once (int64
codes, the distinct values as pandas indexes) and labels results back as
crowd-kit lays them out; the helpers below are the rules every class
follows (crowd-kit's majority-vote order under the installed pandas, its
``idxmax`` tie rule, its dtypes for nullable labels) and the checks of its
settings.  The fitting is crowdagg's, in the class modules beside this one.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from ..data.annotations import AnnotationSet

#: crowd-kit's floor on probabilities (errors, priors, posteriors in its loss).
EPS = 1e-10

COLUMNS = ["task", "worker", "label"]


class NotFittedError(ValueError, AttributeError):
    """``predict`` before ``fit`` (the same bases as scikit-learn's, which crowd-kit raises)."""


class MissingColumn(KeyError, AttributeError):
    """A missing ``task`` or ``worker`` column for ``GLAD``: crowd-kit's GLAD reads them as attributes
    (``data.worker``), an AttributeError; a KeyError as a missing column is for the other classes."""


def first_appearance() -> bool:
    """Whether crowd-kit's majority vote keeps tasks and labels in order of first appearance.

    Its ``data[["task", "label"]].value_counts().unstack("label")`` takes
    the order of ``value_counts``' groups: sorted under pandas 2, in order of
    first appearance under pandas 3 (whose ``DataFrame.value_counts`` groups
    with ``sort=False``).  That order is its ties' order (``idxmax`` takes
    the first column) and, through Dawid--Skene's start, the classes' order
    of every EM result.
    """
    import pandas as pd

    return int(pd.__version__.split(".", 1)[0]) >= 3


def _arrow_text(column: Any) -> bool:
    import pandas as pd

    return isinstance(column.dtype, pd.StringDtype) and column.dtype.storage == "pyarrow"


def _factorize(column: pd.Series) -> tuple[np.ndarray, pd.Index]:
    """(int64 codes, distinct values) in order of first appearance, as ``pd.factorize``, with crowd-kit's dtypes.

    An Arrow-backed text column (pandas 3's default ``str``) is encoded by
    Arrow's dictionary encoding (:func:`crowdagg.data.vocab.encode`, a direct
    table for ids like ``t17``): several times faster than pandas' hashing of
    the strings; the distinct values are taken from the column itself, so
    they keep its dtype.
    """
    import pandas as pd

    if _arrow_text(column):
        import pyarrow as pa

        from ..data.vocab import encode

        values = pa.array(column.array)
        if pa.types.is_large_string(values.type) and values.nbytes < 2**31 - 1:
            values = values.cast(pa.string())  # pandas keeps large_string; the id fast path reads 32-bit offsets
        codes = encode(values)[0].astype(np.int64)
        # codes are in order of first appearance: a value is new where the running maximum grows
        top = np.maximum.accumulate(codes) if len(codes) else codes
        first = np.flatnonzero(np.concatenate([[True], top[1:] > top[:-1]])) if len(codes) else codes
        return codes, pd.Index(column.array.take(first))
    codes, uniques = pd.factorize(column)
    return codes.astype(np.int64, copy=False), pd.Index(uniques).infer_objects()


def sort_order(values: pd.Index) -> np.ndarray:
    """The permutation that sorts ``values`` as pandas' ``groupby(sort=True)`` does (mixed types included)."""
    import pandas as pd

    if _arrow_text(values):  # UTF-8 byte order is code point order, Python's order of str
        import pyarrow as pa
        import pyarrow.compute as pc

        from ..data.vocab import numpy_of

        return numpy_of(pc.sort_indices(pa.array(values.array))).astype(np.int64)
    rank = pd.factorize(values, sort=True)[0]  # pandas' safe sort: numbers before text, as groupby
    order = np.empty(len(rank), dtype=np.int64)
    order[rank] = np.arange(len(rank))
    return order


class Answers:
    """A crowd-kit answers frame as flat codes plus the pandas indexes to label results with.

    ``tasks``, ``workers``: pandas Index of the ids in order of first
    appearance (their original dtype); ``classes``: the distinct labels in
    crowd-kit's majority-vote order (:func:`first_appearance`: first
    appearance under pandas 3, sorted under pandas 2), then any ``extra``
    labels; ``task``, ``worker``, ``label``: int64 codes per answer, in row
    order; ``data``: the same answers as an
    :class:`~crowdagg.data.annotations.AnnotationSet` (sorted by task) for the kernels.
    """

    @staticmethod
    def columns_of(frame: Any) -> pd.DataFrame:
        """The ``task``, ``worker``, ``label`` columns of a DataFrame; a missing one is a KeyError, as in crowd-kit,
        and anything but a DataFrame a TypeError (an array or a dict failed in numpy's or pandas' indexing)."""
        import pandas as pd

        if not isinstance(frame, pd.DataFrame):
            raise TypeError(f"the answers must be a pandas DataFrame (task, worker, label), got {type(frame).__name__}")
        return frame[COLUMNS]

    def __init__(self, frame: pd.DataFrame, extra: Any = ()) -> None:
        import pandas as pd

        frame = self.columns_of(frame)
        missing = frame["label"].isna()
        if missing.any():  # a NaN answer does not vote
            frame = frame[~missing.to_numpy()]
        if frame["task"].isna().any() or frame["worker"].isna().any():
            raise ValueError("task and worker ids may not be missing (NaN)")
        self.n_answers = len(frame)
        self.label_dtype = frame["label"].dtype
        self.task, self.tasks = _factorize(frame["task"])
        self.worker, self.workers = _factorize(frame["worker"])
        self.label, classes = _factorize(frame["label"])
        if not first_appearance():  # crowd-kit's majority vote sorts its classes under pandas 2
            order = sort_order(classes)
            rank = np.empty(len(order), dtype=np.int64)
            rank[order] = np.arange(len(order))
            self.label, classes = rank[self.label], classes[order]
        extra = [c for c in pd.unique(pd.Series(list(extra), dtype=object)) if c not in classes]
        if extra:  # True is 1 to Python (and to crowd-kit's ``==``), not to an Index of ints: ambiguous
            same = pd.Index([*classes, *extra], dtype=object)
            if same.has_duplicates:
                twin = same[same.duplicated()][0]
                twin = twin.item() if isinstance(twin, np.generic) else twin
                answer = next(c for c in classes.tolist() if c == twin)  # an error path: a scan is fine
                raise ValueError(f"label {twin!r} (of a prior or gold label) equals the label {answer!r} of the "
                                 "answers but is of another type: give it as the answers' labels are")
        self.classes = classes.append(pd.Index(extra)) if extra else classes
        self.answered = classes  # the labels of the answers (the others come from gold)
        self._frame = frame  # the answers kept (for :meth:`uniques`; the same columns, no copy)
        self._data: AnnotationSet | None = None
        self._engine: Any = None

    @property
    def n_classes(self) -> int:
        return len(self.classes)

    @property
    def data(self) -> AnnotationSet:
        if self._data is None:
            from ..data.annotations import AnnotationSet
            from ..errors import CrowdaggWarning

            with warnings.catch_warnings():  # crowd-kit counts repeated answers silently
                warnings.simplefilter("ignore", CrowdaggWarning)
                self._data = AnnotationSet.from_codes(
                    self.task, self.worker, self.label,
                    n_tasks=len(self.tasks), n_workers=len(self.workers), n_classes=self.n_classes,
                )
        return self._data

    @property
    def engine(self) -> Any:
        """The local engine over :attr:`data` (the votes and agreements run on its blocks)."""
        if self._engine is None:
            from ..engine import LocalEngine

            self._engine = LocalEngine(self.data)
        return self._engine

    def uniques(self, name: str) -> Any:
        """``pd.unique`` of the column ``name`` ("task", "worker" or "label") as crowd-kit computes it.

        The distinct values in order of first appearance with the dtype
        ``pd.unique`` gives them (an object column of numbers stays object,
        a categorical stays categorical: crowd-kit's ``tasks_``/``workers_``
        and GLAD's labels), taken from one row per value, not by hashing
        the column again.
        """
        import pandas as pd

        codes = {"task": self.task, "worker": self.worker, "label": self.label}[name]
        first = np.sort(np.unique(codes, return_index=True)[1])  # sorted: the codes may be in another order
        return pd.unique(self._frame[name].iloc[first])

    # ------------------------------------------------------------- labelled views
    def probas(self, q: np.ndarray, rows: np.ndarray | None = None, classes: np.ndarray | None = None) -> pd.DataFrame:
        """Tasks × classes; ``rows``, ``classes``: the order of the tasks and of the columns (default: as is)."""
        import pandas as pd

        columns = self.classes
        if classes is not None:
            q, columns = q[:, classes], columns[classes]
        tasks = self.tasks
        if rows is not None:
            q, tasks = q[rows], tasks[rows]
        return pd.DataFrame(q, index=tasks.rename("task"), columns=columns.rename("label"), copy=False)

    def priors(self, p: np.ndarray) -> pd.Series:
        import pandas as pd

        return pd.Series(p, index=self.classes.rename("label"), name="prior")

    def errors(self, errors_ot: np.ndarray) -> pd.DataFrame:
        """Rows (worker, observed label) for the pairs in the data, in order of first appearance."""
        import pandas as pd

        k = self.n_classes
        cells = pd.unique(self.worker * k + self.label)
        w, y = cells // k, cells % k
        index = pd.MultiIndex.from_arrays([self.workers[w], self.classes[y]], names=["worker", "label"])
        # crowd-kit's columns come from joining the probabilities onto the answers (one index of the answers'
        # column names and the labels): a text dtype (pandas 3's ``str``) stays, any other becomes object
        text = isinstance(self.classes.dtype, pd.StringDtype)
        columns = pd.Index(list(self.classes), dtype=self.classes.dtype if text else object)
        return pd.DataFrame(errors_ot[w, y], index=index, columns=columns)

    def worker_skills(self, values: np.ndarray, sort: bool) -> pd.Series:
        import pandas as pd

        workers = self.workers
        if sort:
            order = sort_order(workers)
            values, workers = values[order], workers[order]
        return pd.Series(values, index=workers.rename("worker"), name="skill")

    def subset(self, keep: np.ndarray) -> Answers:
        """The answers ``keep`` (a mask), re-encoded: ids and labels no kept answer uses are gone."""
        import copy

        out = copy.copy(self)
        out._data = None
        out._engine = None
        out._frame = self._frame[keep]
        out.n_answers = int(keep.sum())
        for codes, names in (("task", "tasks"), ("worker", "workers")):
            kept, index = np.unique(getattr(self, codes)[keep], return_inverse=True)
            setattr(out, codes, index.astype(np.int64))
            setattr(out, names, getattr(self, names)[kept])
        kept, index = np.unique(self.label[keep], return_inverse=True)
        out.label, out.classes = index.astype(np.int64), self.classes[kept]
        out.answered = out.classes
        return out



def graded(ans: Answers, truth: pd.Series) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The answers on tasks with a ``truth`` label, each once, and whether it is right (crowd-kit's ``get_accuracy``).

    ``truth`` (indexed by task) may give a task several labels (a repeated
    index): an answer equal to any of them is right.  A repeated identical
    answer (same task, worker and label) counts once; a NaN truth is none;
    truth of a task nobody answered is not used.  ``ans`` must hold
    ``truth``'s labels among its classes (``Answers(frame, extra=truth)``).

    Returns
    -------
    task, worker, label : ndarray of int64, shape (n_graded,)
        Codes of each graded answer's task, worker and label.
    right : ndarray of bool, shape (n_graded,)
    """
    truth = truth[truth.notna().to_numpy()]
    k = ans.n_classes
    rows = ans.tasks.get_indexer(truth.index)
    known = rows >= 0
    pairs = rows[known] * k + ans.classes.get_indexer(truth.to_numpy()[known])
    has_truth = np.zeros(len(ans.tasks), dtype=bool)
    has_truth[rows[known]] = True
    on_truth = has_truth[ans.task]
    task, worker, label = ans.task[on_truth], ans.worker[on_truth], ans.label[on_truth]
    n_workers = len(ans.workers)
    if len(ans.tasks) * n_workers * k < 2**63:  # one int64 key per answer: a sort of numbers, not of rows
        key = np.sort((task * n_workers + worker) * k + label)
        key = key[np.concatenate([[True], key[1:] != key[:-1]])] if len(key) else key  # np.unique hashes: slower
        task, rest = np.divmod(key, n_workers * k)
        worker, label = np.divmod(rest, k)
    else:
        task, worker, label = np.unique(np.stack([task, worker, label]), axis=1)
    return task, worker, label, np.isin(task * k + label, pairs)



def top_labels(probas: pd.DataFrame) -> pd.Series:
    """The most probable label of each row; a tie goes to the first column (crowd-kit's ``idxmax``)."""
    import pandas as pd

    if probas.size == 0:
        return pd.Series(dtype=object, name="agg_label")
    codes = np.argmax(probas.to_numpy(), axis=1)
    labels = pd.Series(probas.columns[codes], index=probas.index, name="agg_label")
    # idxmax infers text only: object columns holding text give pandas 3's ``str``, numbers stay object
    return labels.infer_objects() if pd.api.types.infer_dtype(labels, skipna=False) == "string" else labels


def as_masked(values: Any, dtype: Any) -> Any:
    """``values`` (floats) as pandas' nullable ``Float64`` where ``dtype`` is a nullable (masked) dtype, as
    crowd-kit's come out: its skills compare such labels into ``boolean`` and average them into ``Float64``,
    and a vote weighted by ``Float64`` skills sums into ``Float64``."""
    return values.astype("Float64") if masked(dtype) and len(values) else values


def masked(dtype: Any) -> bool:
    """Whether ``dtype`` is one of pandas' nullable (masked) numbers or booleans (``Int64``, ``Float64``, ...)."""
    import pandas as pd

    return isinstance(dtype, pd.api.extensions.ExtensionDtype) and dtype.kind in "iufb" and not isinstance(
        dtype, (pd.ArrowDtype, pd.CategoricalDtype, pd.StringDtype))


def check_count(value: Any, name: str) -> None:
    """A non-negative integer setting (``n_iter``, ``m_step_max_iter``): a ValueError naming it otherwise."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
        raise ValueError(f"{name} must be a non-negative integer, got {value!r}")


def seed_of(random_state: Any) -> int:
    """A seed for crowdagg's fit from crowd-kit's ``random_state``: an integer as it is, None seed 0 (a fit is
    reproducible here; crowd-kit's None draws fresh), a ``numpy.random.RandomState`` or ``Generator`` one integer
    drawn from it (crowd-kit hands those to scipy's draws); anything else a TypeError naming it."""
    if random_state is None:
        return 0
    if isinstance(random_state, np.random.RandomState):
        return int(random_state.randint(2**31 - 1))
    if isinstance(random_state, np.random.Generator):
        return int(random_state.integers(2**63 - 1))
    if isinstance(random_state, bool) or not isinstance(random_state, (int, np.integer)):
        raise TypeError(f"random_state must be an integer, None, a numpy RandomState or Generator, got "
                        f"{random_state!r}")
    return int(random_state)


def check_number(value: Any, name: str) -> None:
    """A tolerance (``tol``, ``m_step_tol``): any number but NaN (crowd-kit's -inf never stops)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) or np.isnan(value):
        raise ValueError(f"{name} must be a number, got {value!r}")



def as_numbers(values: pd.Series, name: str) -> np.ndarray:
    """``values`` as float64, NaN where missing; text is refused, "0.5" too (crowd-kit's arithmetic refuses it)."""
    import pandas as pd

    if pd.api.types.infer_dtype(values, skipna=True) in ("string", "bytes", "mixed"):
        raise ValueError(f"{name} must hold numbers")
    try:
        return np.asarray(values.to_numpy(dtype=np.float64, na_value=np.nan))
    except (TypeError, ValueError):
        raise ValueError(f"{name} must hold numbers") from None
