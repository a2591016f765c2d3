"""The one result type every aggregator returns."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ..core.memory import MaxMemory

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from ..data.annotations import AnnotationSet


@dataclass(eq=False, repr=False)
class AggregationResult:
    """What an aggregator learned from an :class:`~crowdagg.data.annotations.AnnotationSet`.

    Attributes
    ----------
    method : str
        Registry name of the method that produced it (``"ds"``, ``"mv"``, ...).
    posteriors : ndarray, shape (n_tasks, n_classes)
        P(true class | answers) per task; rows sum to 1.  A task without
        answers gets the class prior.
    labels : ndarray of int64, shape (n_tasks,)
        Hard label per task (class index); ties broken by a seeded draw
        keyed on the task's name.
    prior : ndarray, shape (n_classes,)
        Estimated class prior.
    data : AnnotationSet
        The answers it was fitted on (for names and counts).
    n_iter : int
        Iterations run (0 for one-shot methods).
    converged : bool
        Whether the stopping rule was met (True for one-shot methods).
    objective : ndarray, shape (n_iter,)
        The method's objective after each iteration (empty when the method
        has none, as wmv); ``objective_name`` says what it is.
    objective_name : str
        ``"log-likelihood"`` (ds, onecoin), ``"ELBO"``, ... or ``""``.
    worker_params : dict of str -> ndarray
        What the method learned about each worker, in its own form; every
        array's first axis is the worker (``data.workers``' order):
        ``{"confusion": (n_workers, K, K)}`` for ds, ``{"accuracy":
        (n_workers,)}`` for onecoin, wawa (agreement with the vote), wmv
        (with its vote ``"weight"``); a GLAD ability or a MACE spamming
        probability when those land.  Empty for mv.
    task_params : dict of str -> ndarray
        Per-task parameters (first axis the task, ``data.tasks``' order),
        e.g. a GLAD difficulty; empty for the current methods.
    flags : dict of str -> ndarray of bool
        Per-task yes/no columns that every labels output writes right after
        ``confidence`` (first axis the task): twothird's ``accepted`` (whether
        the task's label reached its agreement rule).  Empty for the other
        methods, whose outputs keep ``task, label, confidence``.
    model_params : dict of str -> Any
        What the method learned that is neither per worker nor per task
        (EBCC's subtype weights, a trained network's handle); empty for the
        current methods.
    confusion : ndarray, shape (n_workers, n_classes, n_classes)
        ``confusion[w, true, observed]`` = P(worker w answers ``observed`` |
        ``true``); each ``confusion[w, k, :]`` sums to 1.  The worker
        parameters of ds; computed on first access from the method's own
        parameters (a one-coin accuracy, the empirical confusion against
        the vote for mv), after a memory check (it grows with workers ×
        classes²).  Optional: a method whose worker model is not a
        confusion and implies none (a GLAD ability) has none, and reading
        it raises ``AttributeError`` naming its worker parameters
        (:attr:`has_confusion` asks first).
    """

    method: str
    posteriors: np.ndarray
    labels: np.ndarray
    prior: np.ndarray
    data: AnnotationSet
    n_iter: int = 0
    converged: bool = True
    objective: np.ndarray = field(default_factory=lambda: np.empty(0))
    objective_name: str = ""
    worker_params: dict[str, np.ndarray] = field(default_factory=dict)
    task_params: dict[str, np.ndarray] = field(default_factory=dict)
    flags: dict[str, np.ndarray] = field(default_factory=dict)
    model_params: dict[str, Any] = field(default_factory=dict)
    #: ds, onecoin: the statistics behind ``prior`` and ``worker_params`` -- ``class_counts`` (K,), ds ``counts``
    #: (n_workers, K, K) ``[w, true, observed]``, onecoin ``correct`` and ``answers`` (n_workers,), all expected
    #: counts including a warm start's pseudo-counts -- and the ``smoothing`` of the M-step that made them the
    #: parameters; what a saved worker model records (:mod:`crowdagg.methods.model_file`).
    counts: dict[str, Any] = field(default_factory=dict, repr=False)
    #: The saved worker model a warm start added (its workers absent from the data are saved again).
    init_model: Any = field(default=None, repr=False)
    confusion_array: np.ndarray | None = field(default=None, repr=False)
    confusion_fn: Callable[[], np.ndarray] | None = field(default=None, repr=False)
    max_memory: MaxMemory = field(default=None, repr=False)

    def __repr__(self) -> str:
        parts = [f"method={self.method!r}", f"n_tasks={len(self.labels)}", f"n_classes={len(self.prior)}"]
        if self.n_iter:
            parts += [f"n_iter={self.n_iter}", f"converged={self.converged}"]
        if len(self.objective):
            parts.append(f"{self.objective_name or 'objective'}={float(self.objective[-1]):.6g}")
        for kind, params in (("worker", self.worker_params), ("task", self.task_params),
                             ("model", self.model_params)):
            if params:
                parts.append(f"{kind}_params=[{', '.join(params)}]")
        return f"AggregationResult({', '.join(parts)})"

    @property
    def log_likelihood(self) -> np.ndarray:
        """The objective trace when it is the log-likelihood (ds, onecoin), else empty."""
        return self.objective if self.objective_name == "log-likelihood" else np.empty(0)

    @property
    def has_confusion(self) -> bool:
        """Whether :attr:`confusion` exists: the method's worker parameters are one or imply one."""
        return (self.confusion_array is not None or self.confusion_fn is not None
                or "confusion" in self.worker_params)

    @property
    def confusion(self) -> np.ndarray:
        if self.confusion_array is None and "confusion" in self.worker_params:
            self.confusion_array = self.worker_params["confusion"]
        if self.confusion_array is None:
            if self.confusion_fn is None:
                own = ", ".join(self.worker_params) or "none"
                raise AttributeError(
                    f"method {self.method!r} has no worker confusion matrices: its worker model is not a confusion "
                    f"(its worker parameters, in worker_params: {own})"
                )
            from ..core import memory

            need = 3.0 * 8 * self.data.n_workers * self.data.n_classes**2
            memory.check(
                need,
                f"{self.data.n_workers:,} workers × {self.data.n_classes:,}² classes of confusion matrices",
                self.max_memory,
            )
            self.confusion_array = self.confusion_fn()
        return self.confusion_array

    @property
    def confidence(self) -> np.ndarray:
        """Posterior probability of the chosen label, shape (n_tasks,)."""
        return self.posteriors[np.arange(len(self.labels)), self.labels]

    @property
    def worker_accuracy(self) -> np.ndarray:
        """Each worker's accuracy, shape (n_workers,): the method's own (``worker_params["accuracy"]``) when it
        has one, else the expected accuracy of the confusion under the class prior."""
        if "accuracy" in self.worker_params:
            return self.worker_params["accuracy"]
        diag = np.diagonal(self.confusion, axis1=1, axis2=2)
        return diag @ self.prior

    def label_names(self) -> np.ndarray:
        """Hard labels as class names (object array of str)."""
        return np.asarray(self.data.classes, dtype=object)[self.labels]

    def label_values(self) -> Any:
        """Hard labels in the dtype the label column had (``data.class_dtype``), shape (n_tasks,).

        int64 labels stay int64, floats floats, booleans booleans; a
        pandas ``Int64``/``boolean``/``string`` column gives that extension
        array, a categorical one a ``Categorical`` whose categories are the
        classes; text (CSV input) gives the names, an object array of str.
        """
        classes = _class_values(self.data)
        if isinstance(classes, _Categories):
            import pandas as pd

            return pd.Categorical.from_codes(self.labels, categories=classes.values)
        return classes.take(self.labels)

    def _check_memory(self, nbytes: float, what: str, max_memory: Any, *, workers: bool = False) -> None:
        """Refuse a view needing more than the limit (``max_memory``, else the fit's), before building it."""
        from ..core import memory

        advice = ("use worker_params (each method's own, smaller form) instead" if workers
                  else "use the posteriors array instead of a labelled table")
        memory.check(nbytes, what, max_memory if max_memory is not None else self.max_memory, advice=advice)

    @staticmethod
    def rows_table(names: Any, labels: np.ndarray, classes: Any, confidence: np.ndarray, *,
                   posteriors: np.ndarray | None = None, answers_per_task: np.ndarray | None = None,
                   arrow: bool = False, flags: dict[str, np.ndarray] | None = None) -> dict[str, Any]:
        """:func:`task_table`: the columns of :meth:`table` for a run of tasks, reached through the result, so that a
        writer handed a result (one partition's rows written on a Dask worker, :mod:`crowdagg.io.dask_write`) lays
        its rows out by the result's own rule without importing the methods."""
        return task_table(names, labels, classes, confidence, posteriors=posteriors,
                          answers_per_task=answers_per_task, arrow=arrow, flags=flags)

    def table(self, *, proba: bool = False, arrow: bool = False) -> dict[str, Any]:
        """One row per task, in input order, as columns: ``task, label, confidence``, then each of :attr:`flags`.

        With ``proba``: also ``n_answers`` (0 flags a task without answers)
        and one ``p_<class>`` column per class.  Names are object arrays of
        str, or with ``arrow`` Arrow arrays (the task vocabulary itself, the
        labels dictionary-encoded): no Python object per row, for writers.
        """
        return task_table(self.data.tasks.names if arrow else self.data.task_names, self.labels, self.data.classes,
                          self.confidence, posteriors=self.posteriors if proba else None,
                          answers_per_task=self.data.answers_per_task if proba else None, arrow=arrow,
                          flags=self.flags)

    def to_frame(self, *, proba: bool = False, max_memory: MaxMemory = None) -> pd.DataFrame:
        """:meth:`table` as a pandas DataFrame, ``task`` and ``label`` in the dtypes their columns had.

        With ``proba`` it holds tasks × classes probabilities: the size is
        checked first against ``max_memory`` (default: the fit's limit).
        """
        import pandas as pd

        n, k = self.data.n_tasks, self.data.n_classes
        per_task = _BYTES_PER_NAME + 3 * 8 + len(self.flags) + (2 * 8 * (k + 1) if proba else 0)
        self._check_memory(per_task * n, f"a table of {n:,} tasks" + (f" × {k:,} classes" if proba else ""),
                           max_memory)
        cols = self.table(proba=proba)
        cols["task"] = _id_index(self.data.tasks, "task").to_numpy() if self.data.tasks.dtype else cols["task"]
        cols["label"] = self.label_values() if self.data.class_dtype else cols["label"]
        return pd.DataFrame(cols)

    def workers_table(self, *, arrow: bool = False, max_memory: MaxMemory = None) -> dict[str, Any]:
        """Each worker's parameters, as columns (what ``--workers`` writes); the layout is :meth:`worker_columns`.

        Where the result has a confusion (:attr:`has_confusion`), its long
        form: ``worker, true_label, observed_label, probability, accuracy,
        n_answers`` (the last two repeat on each of a worker's rows;
        workers × classes² rows).  Otherwise one row per worker: ``worker``,
        each one-number worker parameter (``worker_params`` of one
        dimension, in their order), ``n_answers``.  With ``arrow`` the names
        are dictionary-encoded Arrow arrays.  The size is checked first
        against ``max_memory`` (default: the fit's limit).
        """
        if not self.has_confusion:
            return self._params_table("worker", arrow, max_memory)
        w, k = self.data.n_workers, self.data.n_classes
        self._check_memory(_WORKER_ROW_BYTES * w * k * k,
                           f"a table of {w:,} workers × {k:,}² classes of confusion", max_memory,
                           workers=True)
        conf = self.confusion
        n_w, k, _ = conf.shape
        worker = np.repeat(np.arange(n_w, dtype=np.int32), k * k)
        true = np.tile(np.repeat(np.arange(k, dtype=np.int32), k), n_w)
        observed = np.tile(np.arange(k, dtype=np.int32), n_w * k)
        if arrow:
            names = {"worker": _dictionary(worker, self.data.workers.names),
                     "true_label": _dictionary(true, self.data.classes),
                     "observed_label": _dictionary(observed, self.data.classes)}
        else:
            classes = np.asarray(self.data.classes, dtype=object)
            names = {"worker": self.data.worker_names[worker], "true_label": classes[true],
                     "observed_label": classes[observed]}
        return {
            **names,
            "probability": conf.reshape(-1),
            "accuracy": np.repeat(self.worker_accuracy, k * k),
            "n_answers": np.repeat(self.data.answers_per_worker, k * k),
        }

    def task_params_table(self, *, arrow: bool = False, max_memory: MaxMemory = None) -> dict[str, Any]:
        """One row per task, in input order (what ``--task-params`` writes): ``task``, each one-number task
        parameter (``task_params`` of one dimension, in their order), ``n_answers``; :meth:`task_columns`.

        A method without task parameters gives ``task, n_answers``.  With
        ``arrow`` the names are Arrow arrays.  The size is checked first
        against ``max_memory`` (default: the fit's limit).
        """
        return self._params_table("task", arrow, max_memory)

    def worker_columns(self) -> tuple[str, ...]:
        """The header of :meth:`workers_table` (the rule: :func:`params_columns` unless there is a confusion)."""
        return WORKERS_LONG if self.has_confusion else params_columns("worker", _one_number(self.worker_params))

    def task_columns(self) -> tuple[str, ...]:
        """The header of :meth:`task_params_table`."""
        return params_columns("task", _one_number(self.task_params))

    def _params_table(self, kind: str, arrow: bool, max_memory: MaxMemory) -> dict[str, Any]:
        """``kind`` (worker or task), its one-number parameters, ``n_answers``: one row per worker or task."""
        vocab, params, answers = ((self.data.workers, self.worker_params, self.data.answers_per_worker)
                                  if kind == "worker" else (self.data.tasks, self.task_params,
                                                            self.data.answers_per_task))
        own = _one_number(params)
        rows = len(vocab)
        self._check_memory((_BYTES_PER_NAME + 8.0 * (len(own) + 1)) * rows,
                           f"a table of {rows:,} {kind}s × {len(own) + 2} columns", max_memory,
                           workers=kind == "worker")
        names = vocab.names if arrow else vocab.to_numpy()
        return {kind: names, **{name: params[name] for name in own}, "n_answers": answers}

    # ------------------------------------------------------------ labelled pandas views
    def labels_series(self) -> pd.Series:
        """Hard labels as a Series indexed by task.

        Task ids and labels come back in the dtypes their columns had in a
        DataFrame or Parquet input (:meth:`label_values`), so the Series
        compares with a pandas truth column as it is:
        ``(result.labels_series() == truth).mean()`` is the accuracy.
        Text input (CSV) gives str.
        """
        import pandas as pd

        return pd.Series(self.label_values(), index=_id_index(self.data.tasks, "task"), name="label")

    def proba_frame(self, *, max_memory: MaxMemory = None) -> pd.DataFrame:
        """Posteriors as a DataFrame, one row per task (indexed by task), one column per class.

        The columns are the classes in the labels' dtype (``frame[1]`` for
        integer labels).  Its tasks × classes size is checked first against
        ``max_memory`` (default: the fit's limit).
        """
        import pandas as pd

        n, k = self.data.n_tasks, self.data.n_classes
        self._check_memory(8.0 * n * k + _BYTES_PER_NAME * n, f"a frame of {n:,} tasks × {k:,} classes", max_memory)
        return pd.DataFrame(self.posteriors, index=_id_index(self.data.tasks, "task"),
                            columns=_class_index(self.data, "label"))

    def confusion_frame(self, *, max_memory: MaxMemory = None) -> pd.DataFrame:
        """Per-worker confusion, rows (worker, true label), columns the observed label.

        Its workers × classes² size is checked first against ``max_memory``
        (default: the fit's limit).
        """
        import pandas as pd

        w, k = self.data.n_workers, self.data.n_classes
        self._check_memory(2 * 8.0 * w * k * k + 40.0 * w * k,
                           f"a frame of {w:,} workers × {k:,}² classes of confusion", max_memory,
                           workers=True)
        conf = self.confusion
        n_w, k, _ = conf.shape
        workers = _id_index(self.data.workers, "worker")
        classes = _class_index(self.data, "true")
        rows = pd.MultiIndex.from_arrays([workers.repeat(k), classes[np.tile(np.arange(k), n_w)]],
                                         names=["worker", "true"])
        return pd.DataFrame(conf.reshape(n_w * k, k), index=rows, columns=_class_index(self.data, "observed"))

    def worker_params_frame(self) -> pd.DataFrame:
        """One row per worker (indexed by worker): ``n_answers`` and each one-number worker parameter."""
        import pandas as pd

        cols = {"n_answers": self.data.answers_per_worker}
        cols |= {k: v for k, v in self.worker_params.items() if np.ndim(v) == 1}
        return pd.DataFrame(cols, index=_id_index(self.data.workers, "worker"))

    def task_params_frame(self) -> pd.DataFrame:
        """One row per task (indexed by task): ``n_answers`` and each one-number task parameter."""
        import pandas as pd

        cols = {"n_answers": self.data.answers_per_task}
        cols |= {k: v for k, v in self.task_params.items() if np.ndim(v) == 1}
        return pd.DataFrame(cols, index=_id_index(self.data.tasks, "task"))

    def check_shapes(self) -> None:
        """Every array has its documented shape (a method's contract; a broken one is a bug, not bad data)."""
        n, w, k = self.data.n_tasks, self.data.n_workers, self.data.n_classes
        want = {"posteriors": (self.posteriors, (n, k)), "labels": (self.labels, (n,)), "prior": (self.prior, (k,))}
        wrong = [f"{name} {np.shape(a)}" for name, (a, shape) in want.items() if np.shape(a) != shape]
        wrong += [f"flags[{name!r}] {np.shape(v)}" for name, v in self.flags.items()
                  if np.shape(v) != (n,) or name in ("task", "label", "confidence", "n_answers")]
        for kind, params, size in (("worker", self.worker_params, w), ("task", self.task_params, n)):
            wrong += [f"{kind}_params[{name!r}] {np.shape(v)}" for name, v in params.items()
                      if np.ndim(v) == 0 or np.shape(v)[0] != size or name in ("n_answers", kind)
                      or (name == "confusion" and np.shape(v) != (w, k, k))]
        if not wrong and n and (int(np.min(self.labels)) < 0 or int(np.max(self.labels)) >= k):
            wrong.append(f"labels outside 0 .. {k - 1}")
        if wrong:
            raise RuntimeError(f"{self.method}: result arrays of the wrong shape for {n} tasks, {w} workers, "
                               f"{k} classes (or a reserved name): {', '.join(wrong)}")

    def workers_frame(self, *, max_memory: MaxMemory = None) -> pd.DataFrame:
        """:meth:`workers_table` as a pandas DataFrame (its size checked first, as there)."""
        import pandas as pd

        if not self.has_confusion:
            return pd.DataFrame(self.workers_table(max_memory=max_memory))
        w, k = self.data.n_workers, self.data.n_classes
        self._check_memory(2 * _WORKER_ROW_BYTES * w * k * k,
                           f"a frame of {w:,} workers × {k:,}² classes of confusion", max_memory,
                           workers=True)
        return pd.DataFrame(self.workers_table(max_memory=math.inf))


def task_table(names: Any, labels: np.ndarray, classes: Any, confidence: np.ndarray, *,
               posteriors: np.ndarray | None = None, answers_per_task: np.ndarray | None = None,
               arrow: bool = False, flags: dict[str, np.ndarray] | None = None) -> dict[str, Any]:
    """The columns of :meth:`AggregationResult.table` for a run of tasks: the one rule, for the whole result or for
    one partition's rows (written where the partition lives, :mod:`crowdagg.io.parts`).

    Parameters
    ----------
    names : the tasks' names, shape (n,) (an object array, or with ``arrow`` an Arrow string array)
    labels : ndarray of int, shape (n,), class codes
    classes : sequence of str, the class names (K)
    confidence : ndarray, shape (n,), the posterior of each label
    posteriors : ndarray, shape (n, K), optional
        Given (with ``answers_per_task``, shape (n,)): the ``--proba`` columns ``n_answers`` and ``p_<class>``.
    flags : dict of str -> ndarray of bool, shape (n,) each, optional
        The result's :attr:`~AggregationResult.flags`: a column each, right after ``confidence``.
    """
    cols: dict[str, Any] = {
        "task": names,
        "label": _dictionary(labels, classes) if arrow else np.asarray(classes, dtype=object)[labels],
        "confidence": confidence,
    }
    for name, values in (flags or {}).items():
        cols[name] = np.asarray(values, dtype=bool)
    if posteriors is not None:
        cols["n_answers"] = answers_per_task
        for k, name in enumerate(classes):
            cols[f"p_{name}"] = posteriors[:, k]
    return cols


#: The long form of ``--workers`` (:meth:`AggregationResult.workers_table` for a result with a confusion).
WORKERS_LONG = ("worker", "true_label", "observed_label", "probability", "accuracy", "n_answers")


def params_columns(kind: str, names: Any) -> tuple[str, ...]:
    """The header of a one-row-per-``kind`` parameter table (``"worker"`` or ``"task"``): ``kind``, the
    one-number parameters ``names`` in their order, ``n_answers``.  The CLI asks it before a fit, with the
    names a method declares, to recognise an earlier run's file."""
    return (kind, *names, "n_answers")


def _one_number(params: dict[str, Any]) -> list[str]:
    """The names of the parameters that are one number per row (one dimension): the columns of a table."""
    return [name for name, value in params.items() if np.ndim(value) == 1]


def _dictionary(codes: np.ndarray, names: Any) -> Any:
    """Names by code as an Arrow dictionary array (``names``: a sequence of str or an Arrow string array)."""
    import pyarrow as pa

    from ..data.vocab import arrow_of

    dictionary = names if isinstance(names, pa.Array) else pa.array(list(names), type=pa.string())
    return pa.DictionaryArray.from_arrays(arrow_of(np.asarray(codes, dtype=np.int32)), dictionary)


#: Bytes a labelled view spends per task on its name (object slot and a Python str).
_BYTES_PER_NAME = 70
#: Bytes per row of :meth:`AggregationResult.workers_table`: three name columns (int32 codes and object
#: slots) and three numbers.
_WORKER_ROW_BYTES = 3 * (4 + 8) + 3 * 8


class _Categories:
    """Typed classes that come back as a pandas ``Categorical`` (a categorical label column)."""

    def __init__(self, values: Any) -> None:
        self.values = values


def _typed(names: np.ndarray, dtype: str | None) -> Any:
    """Names (object array of str) back in ``dtype`` -- a NumPy, Arrow or pandas dtype name -- or None when
    there is no dtype or a name cannot be held in it (the names are kept then)."""
    if not dtype:
        return None
    import pandas as pd

    if dtype.endswith("[pyarrow]"):  # pandas' Arrow-backed dtypes (dtype_backend="pyarrow"): "int64[pyarrow]"
        inner = _typed(names, dtype[: -len("[pyarrow]")])
        try:
            return None if inner is None else pd.array(inner, dtype=dtype)
        except (TypeError, ValueError):
            return None
    base = {"double": "float64", "float": "float32", "halffloat": "float16", "boolean": "bool"}.get(dtype, dtype)
    numpy_name = base.lower()
    try:
        if numpy_name == "bool":
            if not np.isin(names, ["True", "False"]).all():
                return None
            values: Any = names == "True"
        elif numpy_name.startswith(("int", "uint")):
            values = names.astype(object).astype(numpy_name)
        elif numpy_name.startswith("float"):
            values = names.astype(np.float64).astype(numpy_name)
        else:  # a pandas text dtype ("string", "str", "string[pyarrow]")
            return pd.array(names, dtype=dtype)
        if base != numpy_name or dtype == "boolean":  # Int64, UInt8, Float64, boolean: the pandas extension array
            return pd.array(values, dtype=dtype)
        return values
    except (TypeError, ValueError, OverflowError):
        return None


def _class_values(data: AnnotationSet) -> Any:
    """The classes in the labels' dtype: an array (``take``-able) or :class:`_Categories`."""
    dtype = data.class_dtype or ""
    names = np.asarray(data.classes, dtype=object)
    if dtype.startswith("category"):
        inner = dtype[len("category["):-1] if dtype.endswith("]") else None
        typed = _typed(names, inner)
        return _Categories(typed if typed is not None else names)
    typed = _typed(names, dtype)
    if typed is None or len(set(typed.tolist())) != len(names):  # 1 and 1.0 are two classes: keep the names
        return names
    return typed


def _class_index(data: AnnotationSet, name: str) -> pd.Index:
    """The classes as a pandas Index, in the labels' dtype (categorical for a categorical label column)."""
    import pandas as pd

    classes = _class_values(data)
    if isinstance(classes, _Categories):
        return pd.CategoricalIndex(classes.values, categories=classes.values, name=name)
    return pd.Index(classes, name=name)


def _id_index(vocab: Any, name: str) -> pd.Index:
    """The names of a vocabulary as a pandas Index, back in the ids' original dtype when it was numeric or boolean."""
    import pandas as pd

    names = vocab.to_numpy()
    dtype = vocab.dtype or ""
    numpy_dtype = {"double": "float64", "float": "float32", "halffloat": "float16"}.get(dtype, dtype)
    try:
        if dtype == "bool":
            index = pd.Index(names == "True", name=name)
        elif numpy_dtype.startswith(("int", "uint", "float")):
            index = pd.Index(names.astype(np.float64 if "float" in numpy_dtype else object).astype(numpy_dtype),
                             name=name)
        else:
            return pd.Index(names, name=name)
    except (TypeError, ValueError, OverflowError):  # a blank id, or text the type cannot hold: keep the names
        return pd.Index(names, name=name)
    return index if index.is_unique else pd.Index(names, name=name)  # -0.0 and 0.0 are two ids
