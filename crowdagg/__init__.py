"""crowdagg: trustworthy labels from noisy crowds.

>>> from crowdagg import load_annotations, aggregate
>>> data = load_annotations("labels.csv")          # doctest: +SKIP
>>> result = aggregate(data, "ds")                  # doctest: +SKIP
>>> result.to_frame().head()                        # doctest: +SKIP

Heavy modules (pandas, numba) load on first use, so ``import crowdagg``
stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:  # pragma: no cover
    from .aggregators import REGISTRY, aggregate, get_method
    from .data import AnnotationSet
    from .io import load_annotations, read_task_labels
    from .result import AggregationResult

_LAZY = {
    "aggregate": ("aggregators", "aggregate"),
    "get_method": ("aggregators", "get_method"),
    "REGISTRY": ("aggregators", "REGISTRY"),
    "AnnotationSet": ("data", "AnnotationSet"),
    "AggregationResult": ("result", "AggregationResult"),
    "load_annotations": ("io", "load_annotations"),
    "read_task_labels": ("io", "read_task_labels"),
}

__all__ = [
    "__version__",
    "aggregate",
    "get_method",
    "REGISTRY",
    "AnnotationSet",
    "AggregationResult",
    "load_annotations",
    "read_task_labels",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        module, attr = _LAZY[name]
        value = getattr(importlib.import_module(f".{module}", __name__), attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'crowdagg' has no attribute {name!r}")
