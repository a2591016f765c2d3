"""Aggregators and the registry that maps CLI names to classes.

Importing this package is cheap: numba kernels are imported only when a
method is fitted.
"""

from __future__ import annotations

from typing import Any

from ..data import AnnotationSet
from ..memory import MaxMemory
from ..methods import METHODS
from ..result import AggregationResult
from .base import Aggregator
from .ds import DawidSkene, OneCoinDawidSkene
from .mv import MajorityVote
from .wmv import WeightedMajorityVote

#: Every declared method's class, by name (from :data:`crowdagg.methods.METHODS`).
REGISTRY: dict[str, type[Aggregator]] = {name: spec.load() for name, spec in METHODS.items()}


def get_method(name: str) -> type[Aggregator]:
    """The aggregator class registered under ``name`` (:mod:`crowdagg.methods`; its module imported on use)."""
    from ..methods import get

    return get(name).load()


def aggregate(
    data: AnnotationSet,
    method: str = "ds",
    *,
    callback: Any = None,
    max_memory: MaxMemory = None,
    **params: Any,
) -> AggregationResult:
    """Fit the method registered as ``method`` with keyword ``params`` (its declared parameters).

    ``max_memory`` bounds what the fit may allocate (bytes, or ``"4G"``;
    default 80% of the available memory).  A parameter the method does not
    take is a :class:`~crowdagg.errors.UsageError` naming the ones it does.

    >>> from crowdagg import load_annotations, aggregate
    >>> result = aggregate(load_annotations("labels.csv"), "ds", max_iter=50)  # doctest: +SKIP
    """
    return get_method(method)(**params).fit(data, callback=callback, max_memory=max_memory)


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
