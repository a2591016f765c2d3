"""Seeded draws keyed on the task's name: the one stream every task-keyed draw reads.

A task's key is SipHash-2-4 of its name's UTF-8 bytes under a key made
from the seed (``pandas.util.hash_array``); its draw ``j`` is splitmix64's
finaliser of ``key + (j + 1)·φ`` (φ the 64-bit golden ratio), the top 53
bits as a uniform in [0, 1).  So a task gets the same draws wherever it
sits in the input (row order never changes them), in whichever block and
on whichever thread it is drawn, on every machine.

:class:`~crowdagg.methods.blocks.TieBreaker` draws ties with it (draw
``j`` of a task for class ``j``); :mod:`.latent` draws a latent state with
draw ``j`` = the chain's round, inside the kernel (:func:`uniform`, the
same bits as :func:`uniforms`).
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
from numba import njit

_IMPORT_LOCK = threading.Lock()

#: splitmix64's increment (the 64-bit golden ratio) and its finaliser's multipliers.
GOLDEN = np.uint64(0x9E3779B97F4A7C15)
MIX1 = np.uint64(0xBF58476D1CE4E5B9)
MIX2 = np.uint64(0x94D049BB133111EB)


def seed_key(seed: int) -> str:
    """The SipHash key text of ``seed`` (its low 64 bits as 16 hex digits)."""
    return f"{int(seed) & (2**64 - 1):016x}"


def name_keys(names: Any, key: str) -> np.ndarray:
    """The names' 64-bit keys under ``key`` (:func:`seed_key`), shape (len(names),), uint64."""
    with _IMPORT_LOCK:  # blocks draw on several threads: two first imports of pandas at once deadlock in the
        from pandas.util import hash_array  # import system on its circular imports ('_DeadlockError')

    names = np.asarray(names, dtype=object)
    return hash_array(names, encoding="utf8", hash_key=key, categorize=False).astype(np.uint64)


def uniforms(keys: np.ndarray, n: int) -> np.ndarray:
    """Draws ``0 .. n-1`` of each key: uniforms in [0, 1), shape (len(keys), n)."""
    with np.errstate(over="ignore"):
        x = keys[:, None] + (np.arange(1, n + 1, dtype=np.uint64) * GOLDEN)
        x = (x ^ (x >> np.uint64(30))) * MIX1
        x = (x ^ (x >> np.uint64(27))) * MIX2
        x = x ^ (x >> np.uint64(31))
    return (x >> np.uint64(11)).astype(np.float64) * (1.0 / 2**53)


@njit(cache=True, nogil=True, inline="always")
def uniform(key, j):  # pragma: no cover - compiled
    """Draw ``j`` (0-based) of ``key`` inside a kernel: ``uniforms(keys, n)[:, j]``, the same bits."""
    x = key + (np.uint64(j) + np.uint64(1)) * GOLDEN
    x = (x ^ (x >> np.uint64(30))) * MIX1
    x = (x ^ (x >> np.uint64(27))) * MIX2
    x = x ^ (x >> np.uint64(31))
    return np.float64(x >> np.uint64(11)) * (1.0 / 9007199254740992.0)


__all__ = ["GOLDEN", "MIX1", "MIX2", "name_keys", "seed_key", "uniform", "uniforms"]
