"""Agreement statistics between workers, for people to read: built on the co-occurrence kernel.

The statistics themselves live in :mod:`crowdagg.kernels.cooc`, which takes
any engine of the block protocol (the methods call it with their fit's
engine).  This layer sits above the engines, so it may build the local
one for a plain :class:`~crowdagg.data.annotations.AnnotationSet`: the
entry a report (``crowdagg stats``' agreement table) or a notebook calls.
"""

from __future__ import annotations

from typing import Any

from ..core.memory import MaxMemory
from ..data.annotations import AnnotationSet
from ..engine import LocalEngine
from ..kernels import cooc
from ..kernels.cooc import CoOccurrence


def co_occurrence(data: AnnotationSet, weights: Any = None, *, engine: Any = None,
                  max_memory: MaxMemory = None) -> CoOccurrence:
    """The co-occurrence statistics of ``data``'s co-labelled worker pairs (:func:`crowdagg.kernels.cooc.co_occurrence`).

    Parameters
    ----------
    data : AnnotationSet
    weights : array-like of float, shape (n_tasks,), optional
        Per-task weights (the joint counts are then float64 sums).
    engine : engine, optional
        An engine over ``data`` to run on (default: ``LocalEngine(data)``, this machine's threads).
    max_memory : int, float, str or None

    Returns
    -------
    CoOccurrence
        ``pairs`` (P, 2) int32 worker codes (``data.worker_names[pairs]`` their names), ``joint``
        (P, K, K), ``n_tasks`` (P,).
    """
    return cooc.co_occurrence(LocalEngine(data) if engine is None else engine, weights, max_memory=max_memory)


__all__ = ["co_occurrence"]
