r"""The expected information gain of one more answer, per task (:mod:`crowdagg.reports.relabel`'s kernel).

For a task with class posterior :math:`q` (K,) and a pool of workers
:math:`s = 0 .. S-1` drawn with weights :math:`\omega_s` (summing to 1),
each with the confusion :math:`C_s[t, l] = P(\text{answer } l \mid \text{class } t)`:

.. math:: \mathrm{EIG}(q) = \sum_s \omega_s\, I_s(q), \qquad
          I_s(q) = \sum_t q_t \sum_l C_s[t, l] \log_2 \frac{C_s[t, l]}{p_s(l)}, \qquad
          p_s(l) = \sum_t q_t C_s[t, l]

:math:`I_s(q)` is the mutual information between the task's class and
worker :math:`s`'s next answer, :math:`H(q) - E_l[H(q \mid l)]`, written
as the posterior-weighted Kullback--Leibler divergence of each class's
answer distribution from the predictive one: every term
:math:`q_t\,\mathrm{KL}(C_s[t] \,\|\, p_s)` is non-negative, so a nearly
certain task's gain is computed without the cancellation of
:math:`H(q) - E[H]` (two nearly equal entropies).  In bits.

O(N S K²) time, O(K) extra memory: no tasks × workers array.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def _information_gain(posteriors: np.ndarray, confusion: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """EIG per task (bits).  ``posteriors`` (N, K) rows summing to 1; ``confusion`` (S, K, K)
    ``[worker, true, observed]`` rows summing to 1; ``weights`` (S,) summing to 1.  Returns (N,) float64, >= 0."""
    n, k = posteriors.shape
    s_count = confusion.shape[0]
    out = np.zeros(n)
    pred = np.empty(k)
    inv_ln2 = 1.0 / np.log(2.0)
    for i in range(n):
        gain = 0.0
        for s in range(s_count):
            for col in range(k):
                pred[col] = 0.0
            for t in range(k):
                qt = posteriors[i, t]
                if qt > 0.0:
                    for col in range(k):
                        pred[col] += qt * confusion[s, t, col]
            info = 0.0
            for t in range(k):
                qt = posteriors[i, t]
                if qt > 0.0:
                    kl = 0.0
                    for col in range(k):
                        c = confusion[s, t, col]
                        if c > 0.0:
                            kl += c * np.log(c / pred[col])
                    if kl > 0.0:  # a KL divergence is >= 0; rounding can leave -1e-17
                        info += qt * kl
            gain += weights[s] * info
        out[i] = gain * inv_ln2
    return out


def information_gain(posteriors: np.ndarray, confusion: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """:func:`_information_gain` on C-contiguous float64 copies of its arrays (shapes as there)."""
    return _information_gain(
        np.ascontiguousarray(posteriors, dtype=np.float64),
        np.ascontiguousarray(confusion, dtype=np.float64),
        np.ascontiguousarray(weights, dtype=np.float64),
    )
