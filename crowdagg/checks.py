"""Argument checks shared by the library's public entry points.

Each raises :class:`~crowdagg.errors.UsageError` naming the parameter and
showing the bad value.
"""

from __future__ import annotations

import math
import operator
from typing import Any

from .errors import UsageError


def check_int(name: str, value: Any, minimum: int) -> int:
    """``value`` as an int >= ``minimum`` (bools refused)."""
    msg = f"{name} must be an integer >= {minimum}, got {value!r}"
    if isinstance(value, bool):
        raise UsageError(msg)
    try:
        v = operator.index(value)
    except TypeError:
        raise UsageError(msg) from None
    if v < minimum:
        raise UsageError(msg)
    return int(v)


def check_float(name: str, value: Any, low: float = 0.0, high: float = math.inf) -> float:
    """``value`` as a finite float in [low, high]."""
    bounds = f"in [{low:g}, {high:g}]" if math.isfinite(high) else f">= {low:g}"
    msg = f"{name} must be a finite number {bounds}, got {value!r}"
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise UsageError(msg) from None
    if not math.isfinite(v) or not (low <= v <= high):
        raise UsageError(msg)
    return v
