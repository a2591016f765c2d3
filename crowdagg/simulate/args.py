"""Argument checks shared by :func:`~crowdagg.simulate.simulate` and the scenarios.

Each check raises :class:`~crowdagg.errors.UsageError` (or, for sizes,
:class:`~crowdagg.errors.ResourceError`) naming the argument through
:func:`~crowdagg.errors.param`, so the CLI can speak its own flags.  Nothing
here draws a random number.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..core import memory
from ..errors import UsageError, param

#: Bytes per simulated answer: codes, sampling temporaries and the CSV text held before writing.
_BYTES_PER_ANSWER = 72


def skill_arg(skill: Any) -> tuple[float, float]:
    """``skill`` as a pair ``(low, high)`` with ``0 <= low <= high <= 1``."""
    try:
        lo, hi = (float(s) for s in skill)
    except (TypeError, ValueError):
        raise UsageError(f"{param('skill')} must be a pair (low, high) of probabilities, got {skill!r}") from None
    if not (0.0 <= lo <= hi <= 1.0):
        raise UsageError(f"{param('skill')} must satisfy 0 <= low <= high <= 1, got {skill!r}")
    return lo, hi


def worker_prior_arg(worker_prior: Any) -> tuple[float, float] | None:
    """``worker_prior`` as a pair ``(a, b)`` of finite positive Beta parameters (``None`` stays ``None``)."""
    if worker_prior is None:
        return None
    try:
        a, b = (float(x) for x in worker_prior)
    except (TypeError, ValueError):
        raise UsageError(
            f"{param('worker_prior')} must be a pair (a, b) of Beta parameters, got {worker_prior!r}"
        ) from None
    if not (np.isfinite(a) and np.isfinite(b) and a > 0 and b > 0):
        raise UsageError(f"{param('worker_prior')} must be two finite positive numbers (a, b), got {worker_prior!r}")
    return a, b


def choice_arg(name: str, value: Any, valid: Sequence[str]) -> str:
    """``value``, which must be one of ``valid`` (listed, in order, in the error)."""
    if value not in valid:
        raise UsageError(f"unknown {param(name)} {value!r}; valid values are {', '.join(valid)}")
    return str(value)


def prior_arg(prior: Sequence[float] | None, k: int) -> np.ndarray:
    """The normalised class prior (uniform when ``None``), shape (k,)."""
    if prior is None:
        return np.full(k, 1.0 / k)
    try:
        p = np.asarray(prior, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError):
        raise UsageError(f"{param('prior')} must be a sequence of {k} non-negative numbers, got {prior!r}") from None
    if p.shape[0] != k:
        raise UsageError(f"{param('prior')} must have {param('n_classes')}={k} entries, got {p.shape[0]} ({list(p)!r})")
    if not np.all(np.isfinite(p)) or np.any(p < 0) or p.sum() <= 0:
        raise UsageError(f"{param('prior')} must be non-negative numbers with a positive sum, got {list(p)!r}")
    return p / p.sum()


def fixed(scenario: str, name: str, given: int | None, value: int) -> int:
    """A size the scenario fixes: an explicit, different value is an error."""
    if given is not None and given != value:
        raise UsageError(f"scenario {scenario!r} fixes {param(name)}={value}; got {param(name)}={given}")
    return value


def unused(scenario: str, **given: Any) -> None:
    """Refuse the arguments a scenario has no use for when they were given."""
    for name, value in given.items():
        if value is not None:
            raise UsageError(f"scenario {scenario!r} does not use {param(name)} (got {param(name)}={value!r})")


def check_size(n: int, m: int, k: int, n_answers: float, max_memory: memory.MaxMemory) -> None:
    """Refuse, before drawing anything, a crowd that would not fit in memory."""
    need = _BYTES_PER_ANSWER * n_answers + 40.0 * n + 4 * 8.0 * m * k * k
    memory.check(
        need,
        f"{n_answers:,.0f} answers on {n:,} tasks by {m:,} workers, {k:,} classes",
        max_memory,
        advice=f"simulate fewer {param('n_tasks')} or {param('n_workers')}",
    )


def check_per_task(m: int, per_task: int) -> None:
    """A task cannot get more distinct workers than there are."""
    if per_task > m:
        raise UsageError(f"{param('per_task')}={per_task} exceeds {param('n_workers')}={m}: a task cannot get that many distinct workers")
