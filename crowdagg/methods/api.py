"""The library's entry point: :func:`aggregate`, and the method classes by name.

Importing this module imports no method: :data:`REGISTRY` and
:func:`get_method` (from :mod:`crowdagg.methods.registry`) import a
method's module when its class is asked for, and numba kernels are
compiled or loaded only when a method is fitted.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, overload

from ..core.memory import MaxMemory
from ..data.annotations import AnnotationSet
from ..errors import DataError, UsageError, param
from .registry import REGISTRY, get_method
from .result import AggregationResult

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from ..data.numeric import NumericAnswers
    from .numeric.base import NumericResult


@overload
def aggregate(data: NumericAnswers, method: str | None = None, *, numeric: Literal[True] | None = None,
              **params: Any) -> NumericResult: ...


@overload
def aggregate(data: Any, method: str | None = None, *, numeric: Literal[True], **params: Any) -> NumericResult: ...


@overload
def aggregate(data: Any, method: str | None = None, *, numeric: Literal[False] | None = None,
              **params: Any) -> AggregationResult: ...


def aggregate(
    data: AnnotationSet | NumericAnswers | pd.DataFrame | Sequence[Mapping[str, Any]] | str | os.PathLike[str],
    method: str | None = None,
    *,
    numeric: bool | None = None,
    callback: Callable[[int, float], Any] | None = None,
    max_memory: MaxMemory = None,
    task_col: str | None = None,
    worker_col: str | None = None,
    label_col: str | None = None,
    engine: Any = None,
    client: Any = None,
    partitions: int | Sequence[int] | None = None,
    **params: Any,
) -> AggregationResult | NumericResult:
    """Fit the method registered as ``method`` with keyword ``params`` (its declared parameters).

    Parameters
    ----------
    data : AnnotationSet, DataFrame, list of records, or path
        The answers.  Anything but an :class:`~crowdagg.data.annotations.AnnotationSet`
        is read by :func:`crowdagg.io.read.load_annotations` first: a DataFrame
        or a file path as it reads them, a list of records
        (``[{"task": ..., "worker": ..., "label": ...}, ...]``) as a
        DataFrame of them.  Columns are found as ``load_annotations``
        finds them (``task``/``worker``/``label``, common aliases, platform
        exports) unless ``task_col``/``worker_col``/``label_col`` name them.
        Task ids and labels keep their dtype in the result's pandas views.
    method : str, optional
        A registered method (:data:`REGISTRY`), default ``"ds"`` (``"mean"``
        for numeric answers).
    numeric : bool, optional
        The answers are numbers, aggregated into one value per task by a
        numeric method (``mean``, ``median``, ``catd``, ``crh``): ``data``
        is read by :func:`crowdagg.io.read.load_numeric` and the result is a
        :class:`~crowdagg.methods.numeric.base.NumericResult`.  Default:
        True for :class:`~crowdagg.data.numeric.NumericAnswers`, else False.
        A numeric method without it, or a categorical method with it, is a
        :class:`~crowdagg.errors.UsageError`: the choice is explicit.
    callback : callable, optional
        ``callback(iteration, objective)`` after each iteration.
    max_memory : int, float or str, optional
        Bounds what reading and fitting may allocate (bytes, or ``"4G"``;
        default 80% of the available memory); a larger need is refused up
        front with :class:`~crowdagg.errors.ResourceError`.
    engine : ``"local"`` (default), ``"dask"``, or an engine object
        Where the method runs (:mod:`crowdagg.engine`).  ``"dask"`` reads
        ``data`` -- CSV, TSV or Parquet files -- on the Dask cluster of
        ``client`` (default: a ``LocalCluster`` of worker processes started
        for this call and closed after it) into ``partitions`` partitions
        (default: one per worker thread) and fits there: the same result,
        to the bit, as the local engine.  A method that does not declare the
        engine (``crowdagg methods NAME``) is a :class:`~crowdagg.errors.UsageError`.
    client : distributed.Client, optional
        The Dask cluster of ``engine="dask"``.
    partitions : int or sequence of int, optional
        ``engine="dask"``: how many partitions, or their block boundaries
        (:func:`crowdagg.io.dask_read.read_distributed`).
    **params
        The method's parameters; one it does not take is a
        :class:`~crowdagg.errors.UsageError` naming the ones it does.

    Examples
    --------
    >>> import pandas as pd
    >>> from crowdagg import aggregate
    >>> df = pd.DataFrame({"task": [1, 1, 2], "worker": ["a", "b", "a"], "label": [0, 1, 1]})
    >>> aggregate(df, "mv").labels_series().dtype                    # doctest: +SKIP
    dtype('int64')
    """
    columns = (task_col, worker_col, label_col)
    numeric, method = check_kind(method, numeric, data)
    if numeric:
        return _aggregate_numeric(data, method, callback, max_memory, columns, engine, client, partitions, params)
    if engine == "dask":
        return _aggregate_on_dask(data, method, client, partitions, columns, callback, max_memory, params)
    for name, value in (("client", client), ("partitions", partitions)):
        if value is not None:
            raise UsageError(f"{param(name)} applies to engine='dask' only")
    if isinstance(data, AnnotationSet):
        given = [param(k) for k, v in zip(("task_col", "worker_col", "label_col"), columns) if v is not None]
        if given:
            raise UsageError(f"{', '.join(given)} apply to a DataFrame, records or a file, not to an AnnotationSet")
    else:
        data = _as_annotations(data, max_memory, columns)
    return get_method(method)(**params).fit(data, callback=callback, max_memory=max_memory, engine=engine)


def check_kind(method: str | None, numeric: bool | None, data: Any = None) -> tuple[bool, str]:
    """Whether this run is numeric, and its method (the default of its kind when None).

    ``numeric`` None: numeric for :class:`~crowdagg.data.numeric.NumericAnswers`.  A numeric method on a
    categorical run, a categorical method on a numeric one, and ``numeric`` against the data given are a
    :class:`~crowdagg.errors.UsageError` naming the methods of the run's kind.
    """
    from ..data.numeric import NumericAnswers
    from .numeric import DEFAULT
    from .registry import METHODS, get

    if numeric is not None and not isinstance(numeric, bool):
        raise UsageError(f"{param('numeric')} must be true or false, got {numeric!r}")
    given = isinstance(data, NumericAnswers)
    if numeric is None:
        numeric = given
    elif numeric != given and isinstance(data, (AnnotationSet, NumericAnswers)):
        what = "numeric answers (NumericAnswers)" if given else "categorical answers (an AnnotationSet)"
        raise UsageError(f"{param('numeric')}={numeric} does not fit {what}")
    if method is None:
        return numeric, DEFAULT if numeric else "ds"
    kind = get(method).kind
    numeric_methods = [n for n, m in METHODS.items() if m.kind == "numeric"]
    if numeric and kind != "numeric":
        raise UsageError(f"method {method!r} is categorical: numeric answers take a numeric method "
                         f"({', '.join(numeric_methods)})")
    if not numeric and kind == "numeric":
        raise UsageError(f"method {method!r} aggregates numeric answers: give {param('numeric')} "
                         f"(numeric methods: {', '.join(numeric_methods)})")
    return numeric, method


def _aggregate_numeric(data: Any, method: str, callback: Any, max_memory: MaxMemory,
                       columns: tuple[str | None, str | None, str | None], engine: Any, client: Any,
                       partitions: Any, params: dict[str, Any]) -> NumericResult:
    """:func:`aggregate` of numeric answers: read by :func:`crowdagg.io.read.load_numeric` unless given as
    :class:`~crowdagg.data.numeric.NumericAnswers`, fitted on the local engine."""
    from ..data.numeric import NumericAnswers

    for name, value in (("client", client), ("partitions", partitions)):
        if value is not None:
            raise UsageError(f"{param(name)} applies to engine='dask' only")
    if engine not in (None, "local"):
        raise UsageError(f"the numeric methods run on the local engine only, not {param('engine')}={engine!r}")
    estimator = get_method(method)(**params)
    if not isinstance(data, NumericAnswers):
        estimator.check_params()  # a bad parameter before a large input is read
        data = _as_annotations(data, max_memory, columns, numeric=True)
    result: NumericResult = estimator.fit(data, callback=callback, max_memory=max_memory)
    return result


def check_engine(method: str, engine: str, params: Mapping[str, Any]) -> None:
    """Refuse, before any data is read, a method that does not declare ``engine``, or a parameter whose
    service the engine does not run (:class:`~crowdagg.errors.UsageError`)."""
    from .registry import ENGINES, METHODS, get

    if engine not in ENGINES:
        raise UsageError(f"{param('engine')} must be one of {', '.join(ENGINES)}, got {engine!r}")
    spec = get(method)
    if engine not in spec.engines:
        able = [m.name for m in METHODS.values() if engine in m.engines]
        raise UsageError(f"method {method!r} runs on the {' and '.join(spec.engines)} engine only, not on {engine}; "
                         f"methods that run on {engine}: {', '.join(able) or 'none'}")
    # Gold, the starts (init) and a saved worker model go through the engine; EM's restarts (the shared N_INIT)
    # still draw their blends over every task's vote shares on the client.  A method declaring its own n_init
    # (ebcc: subtype splits keyed on task names, drawn inside the blocks) runs its restarts on any engine.
    from .registry import N_INIT

    if engine == "dask" and params.get("n_init") not in (None, 1) and N_INIT in spec.params:
        raise UsageError(f"{param('n_init')} {params['n_init']} is not supported with the Dask engine (the restarts "
                         "draw their starts from every answer on the client): use n_init 1, or the local engine")


def _aggregate_on_dask(data: Any, method: str, client: Any, partitions: Any,
                       columns: tuple[str | None, str | None, str | None], callback: Any, max_memory: MaxMemory,
                       params: dict[str, Any]) -> AggregationResult:
    """:func:`aggregate` with ``engine="dask"``: the files read on the cluster, the fit run there."""
    from contextlib import nullcontext

    from ..engine.dask import connect
    from ..io.dask_read import read_distributed

    check_engine(method, "dask", params)
    estimator = get_method(method)(**params)
    estimator.check_params()
    if not (isinstance(data, (str, os.PathLike)) or (isinstance(data, (list, tuple)) and data
                                                    and all(isinstance(p, (str, os.PathLike)) for p in data))):
        raise UsageError(f"engine='dask' reads files on the cluster: give a path or a list of paths, "
                         f"got {type(data).__name__}")
    with connect() if client is None else nullcontext(client) as c:
        remote, engine = read_distributed(data, c, partitions=partitions, task_col=columns[0], worker_col=columns[1],
                                          label_col=columns[2], max_memory=max_memory)
        try:
            result = estimator.fit(remote, callback=callback, max_memory=max_memory, engine=engine)
            if result.confusion_fn is not None:  # made on demand by another pass: now, while the data is there
                result.confusion  # noqa: B018
            return result
        finally:
            engine.close()


def _as_annotations(data: Any, max_memory: MaxMemory, columns: tuple[str | None, str | None, str | None],
                    takes: str = "aggregate takes", numeric: bool = False) -> Any:
    """What :func:`aggregate` was given (or :func:`crowdagg.train` as its answers: ``takes`` begins the message
    refusing anything else), read into an annotation set by :func:`crowdagg.io.read.load_annotations`
    (``numeric``: into numeric answers by :func:`crowdagg.io.read.load_numeric`)."""
    import sys

    from ..io.read import load_annotations, load_numeric

    def load(source: Any) -> Any:
        reader = load_numeric if numeric else load_annotations
        return reader(source, max_memory=max_memory, task_col=columns[0], worker_col=columns[1],
                      label_col=columns[2])

    loaded = sys.modules.get("pandas")  # a DataFrame means pandas is loaded: never import it just to check
    if loaded is not None and isinstance(data, loaded.DataFrame):
        return load(data)
    if isinstance(data, (list, tuple)) and data and isinstance(data[0], Mapping):
        return load(data)  # records: load_annotations reads them as the DataFrame they make
    if isinstance(data, (list, tuple)) and not data:
        raise DataError("no answers: the list of records is empty")
    if isinstance(data, (str, os.PathLike)) or (isinstance(data, (list, tuple))
                                                and all(isinstance(p, (str, os.PathLike)) for p in data)):
        return load(data)
    raise UsageError(
        f"{takes} an AnnotationSet, a pandas DataFrame, a list of records "
        f"({{'task': ..., 'worker': ..., 'label': ...}}) or a file path, got {type(data).__name__}"
    )


__all__ = ["REGISTRY", "get_method", "aggregate", "check_engine", "check_kind"]
