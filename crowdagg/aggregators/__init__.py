"""Aggregators and the registry that maps CLI names to classes.

Importing this package is cheap: numba kernels are imported only when a
method is fitted.
"""

from __future__ import annotations

from typing import Any

from ..data import AnnotationSet
from ..errors import UsageError
from ..result import AggregationResult
from .base import Aggregator
from .ds import DawidSkene, OneCoinDawidSkene
from .mv import MajorityVote
from .wmv import WeightedMajorityVote

REGISTRY: dict[str, type[Aggregator]] = {
    cls.name: cls for cls in (MajorityVote, WeightedMajorityVote, DawidSkene, OneCoinDawidSkene)
}


def get_method(name: str) -> type[Aggregator]:
    """The aggregator class registered under ``name``."""
    try:
        return REGISTRY[name]
    except KeyError:
        raise UsageError(
            f"unknown method {name!r}; valid methods: {', '.join(REGISTRY)}"
        ) from None


def aggregate(data: AnnotationSet, method: str = "ds", *, callback: Any = None, **params: Any) -> AggregationResult:
    """Fit the method registered as ``method`` with keyword ``params``.

    >>> from crowdagg import load_annotations, aggregate
    >>> result = aggregate(load_annotations("labels.csv"), "ds", max_iter=50)  # doctest: +SKIP
    """
    cls = get_method(method)
    unknown = sorted(set(params) - set(cls.params) - {"seed"})
    if unknown:
        raise UsageError(
            f"method {method!r} does not take {', '.join(unknown)}; it takes: "
            f"{', '.join(('seed', *cls.params))}"
        )
    return cls(**params).fit(data, callback=callback)


__all__ = [
    "Aggregator",
    "REGISTRY",
    "get_method",
    "aggregate",
    "MajorityVote",
    "WeightedMajorityVote",
    "DawidSkene",
    "OneCoinDawidSkene",
]
