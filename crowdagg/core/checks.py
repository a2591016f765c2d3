"""Argument checks shared by the library's public entry points.

Each raises :class:`~crowdagg.errors.UsageError` naming the parameter (as a
:func:`~crowdagg.errors.param` reference, so the CLI shows its flag) and
showing the bad value.
"""

from __future__ import annotations

import json
import math
import operator
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from ..errors import DataError, UsageError, param

#: How far a row of posteriors may sum from 1 where it is read or given (``evaluate``'s ``p_<class>`` columns): a
#: file's probabilities rounded to 4 decimals stay within it for a few classes, a wrong or missing column does not.
PROBA_SUM_TOLERANCE = 1e-3
#: How far a probability may stray outside [0, 1] by rounding (1.0000000000000002) before it is refused; within
#: it, it is clipped.
PROBA_ROUNDING = 1e-9


def check_int(name: str, value: Any, minimum: int, maximum: int | None = None) -> int:
    """``value`` as an int in [minimum, maximum] (bools refused)."""
    bounds = f">= {minimum}" if maximum is None else f"in [{minimum}, {maximum}]"
    msg = f"{param(name)} must be an integer {bounds}, got {value!r}"
    if isinstance(value, bool):
        raise UsageError(msg)
    try:
        v = operator.index(value)
    except TypeError:
        raise UsageError(msg) from None
    if v < minimum or (maximum is not None and v > maximum):
        raise UsageError(msg)
    return int(v)


def check_float(name: str, value: Any, low: float = 0.0, high: float = math.inf) -> float:
    """``value`` as a finite float in [low, high]."""
    bounds = f"in [{low:g}, {high:g}]" if math.isfinite(high) else f">= {low:g}"
    msg = f"{param(name)} must be a finite number {bounds}, got {value!r}"
    if isinstance(value, bool):
        raise UsageError(msg)
    try:
        v = float(value)
    except (TypeError, ValueError, OverflowError):  # OverflowError: an int beyond a float's range
        raise UsageError(msg) from None
    if not math.isfinite(v) or not (low <= v <= high):
        raise UsageError(msg)
    return v


def check_seed(value: Any, name: str = "seed") -> int:
    """A seed: an integer in [0, 2**63 - 1]."""
    return check_int(name, value, 0, 2**63 - 1)


def check_index_array(name: str, value: Any, size: int, low: int, high: int) -> np.ndarray:
    """An integer array of shape (size,) with entries in [low, high], as int64."""
    arr = np.asarray(value)
    if arr.shape != (size,):
        raise UsageError(f"{param(name)} must have shape ({size},), got {arr.shape}")
    if arr.size and arr.dtype.kind not in "iu":
        raise UsageError(f"{param(name)} must hold integers, got dtype {arr.dtype}")
    if arr.size and (arr.min() < low or arr.max() > high):
        bad = arr[(arr < low) | (arr > high)][0]
        raise UsageError(f"{param(name)} entries must be in [{low}, {high}], found {int(bad)}")
    return arr.astype(np.int64)


def check_task_mapping(given: Any, name: str) -> Mapping[Any, Any]:
    """A {task: label} argument as a mapping: a pandas Series by its index (a Series is no ``Mapping``).

    A Series listing a task twice is a DataError; anything else that is not
    a mapping a UsageError.
    """
    import sys

    pd = sys.modules.get("pandas")  # a Series means pandas is loaded: never import it just to check
    if pd is not None and isinstance(given, pd.Series):
        if not given.index.is_unique:
            raise DataError(f"{param(name)} lists task {given.index[given.index.duplicated()].tolist()[0]!r} "
                            "more than once")
        return dict(zip(given.index.tolist(), given.tolist()))
    if not isinstance(given, Mapping):
        raise UsageError(f"{param(name)} must map each task to its label (a dict or a pandas Series), "
                         f"got {type(given).__name__}")
    return given


def json_unique_keys(message: Callable[[str], str]) -> Callable[[list[tuple[str, Any]]], dict[str, Any]]:
    """An ``object_pairs_hook`` for :func:`json.loads` that refuses a key repeated in one object (Python's json
    would keep the last silently): a :class:`~crowdagg.errors.DataError` of ``message(the key as JSON)``."""

    def unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        obj = dict(pairs)
        if len(obj) != len(pairs):
            seen: set[str] = set()
            dup = next(key for key, _ in pairs if key in seen or seen.add(key))  # type: ignore[func-returns-value]
            raise DataError(message(json.dumps(dup)))
        return obj

    return unique_keys

