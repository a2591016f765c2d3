"""crowdagg: trustworthy labels from noisy crowds.

>>> import pandas as pd
>>> from crowdagg import aggregate
>>> df = pd.DataFrame({"task": [1, 1, 2], "worker": ["a", "b", "a"], "label": [0, 1, 1]})
>>> result = aggregate(df, "ds")                    # doctest: +SKIP
>>> result.labels_series()                          # doctest: +SKIP

Public API
----------
Reading and aggregating
    load_annotations(source, ...) -- a file, files, a DataFrame -> AnnotationSet
    read_task_labels(source, ...) -- a task -> label file (truth, gold) -> dict
    aggregate(data, method="ds", ...) -- AnnotationSet, DataFrame, records or path -> AggregationResult
    get_method(name), REGISTRY -- the aggregator classes by name (mv, wmv, wawa, ds, onecoin, ...)
Data model and results
    AnnotationSet -- the answers as flat code arrays plus names (from_names, from_codes)
    Vocabulary -- the names behind task and worker codes
    AggregationResult -- posteriors, labels, worker parameters; pandas views
Evaluation
    evaluate_labels(predicted, truth) -> Evaluation (accuracy, macro-F1, recall)
Errors and warnings
    DataError, UsageError, ResourceError (a ``MemoryError`` refused up front),
    CrowdaggWarning, ConvergenceWarning

Heavy modules (pandas, numba) load on first use of a name above, so
``import crowdagg`` stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

from . import _moved

_moved.install()  # old module paths (crowdagg.vocab, crowdagg.aggregators, ...) keep working

if TYPE_CHECKING:  # pragma: no cover
    from .data.annotations import AnnotationSet
    from .data.vocab import Vocabulary
    from .errors import ConvergenceWarning, CrowdaggWarning, DataError, ResourceError, UsageError
    from .io.read import load_annotations, read_task_labels
    from .methods.api import REGISTRY, aggregate, get_method
    from .methods.result import AggregationResult
    from .reports.evaluate import Evaluation, evaluate_labels

#: Public name -> (submodule, attribute), imported on first access.
_LAZY = {
    "aggregate": ("methods.api", "aggregate"),
    "get_method": ("methods.api", "get_method"),
    "REGISTRY": ("methods.api", "REGISTRY"),
    "AnnotationSet": ("data.annotations", "AnnotationSet"),
    "Vocabulary": ("data.vocab", "Vocabulary"),
    "AggregationResult": ("methods.result", "AggregationResult"),
    "load_annotations": ("io.read", "load_annotations"),
    "read_task_labels": ("io.read", "read_task_labels"),
    "evaluate_labels": ("reports.evaluate", "evaluate_labels"),
    "Evaluation": ("reports.evaluate", "Evaluation"),
    "DataError": ("errors", "DataError"),
    "UsageError": ("errors", "UsageError"),
    "ResourceError": ("errors", "ResourceError"),
    "CrowdaggWarning": ("errors", "CrowdaggWarning"),
    "ConvergenceWarning": ("errors", "ConvergenceWarning"),
}

#: Spelled out (not built from ``_LAZY``) so that linters and type checkers see it; a test keeps the two equal.
__all__ = [
    "__version__",
    "aggregate",
    "get_method",
    "REGISTRY",
    "AnnotationSet",
    "Vocabulary",
    "AggregationResult",
    "load_annotations",
    "read_task_labels",
    "evaluate_labels",
    "Evaluation",
    "DataError",
    "UsageError",
    "ResourceError",
    "CrowdaggWarning",
    "ConvergenceWarning",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        module, attr = _LAZY[name]
        value = getattr(importlib.import_module(f".{module}", __name__), attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'crowdagg' has no attribute {name!r}")


def __dir__() -> list[str]:
    """The public names (lazy ones included, before their first use) and the module's dunder attributes."""
    return sorted(set(__all__) | {n for n in globals() if n.startswith("__")})
