"""The max-shifted softmax every posterior kernel ends a task with (EM, GLAD, MACE).

One place, so that every family normalises a task's log-scores with the
same operations in the same order: the posteriors and log-evidence of each
family keep their bits whichever kernel calls it.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit


@njit(cache=True, nogil=True, inline="always")
def softmax_into(s, out):  # pragma: no cover - compiled
    """``out = softmax(s)``, shifted by the maximum; ``s`` is overwritten with ``exp(s - max)``.

    ``s``, ``out``: float64 arrays of shape (K,) (``out`` may be ``s``).
    Returns ``(m, z)``: the maximum and the shifted sum, so that the
    log-sum-exp is ``m + log(z)`` -- the caller adds it in its own order.
    """
    k = s.shape[0]
    m = s[0]
    for c in range(1, k):
        if s[c] > m:
            m = s[c]
    z = 0.0
    for c in range(k):
        s[c] = np.exp(s[c] - m)
        z += s[c]
    inv = 1.0 / z
    for c in range(k):
        out[c] = s[c] * inv
    return m, z


@njit(cache=True, nogil=True, inline="always")
def clamped_softmax_into(s, out, g, base):  # pragma: no cover - compiled
    """A task's posterior row from its log-scores ``s`` (K,): ``softmax(s)`` into ``out`` (``s`` overwritten), or,
    for a gold task (``g >= 0``), one-hot at ``g``.  Returns the task's log-evidence: ``base`` plus the log-sum-exp
    of ``s`` (the gold class's score for a gold task), in the order the families add it."""
    if g >= 0:
        for c in range(out.shape[0]):
            out[c] = 0.0
        out[g] = 1.0
        return s[g] + base
    m, z = softmax_into(s, out)
    return m + base + math.log(z)
