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
answer distribution from the predictive one.  The kernel sums it as
:math:`H(p_s) - \sum_t q_t H(C_s[t])`, the entropies of the rows
computed once per worker: K logarithms per task and worker rather than
K² (a third of the time at K = 2).  The two halves nearly cancel for a
settled task, leaving rounding of about 1e-16 bits, which the report
rounds away (to 12 decimals); a result below 0 is 0.  In bits.

O(N S K²) time, O(S K) extra memory: no tasks × workers array.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ..errors import DataError
from .validate import as_float_array


@njit(cache=True, nogil=True)
def _information_gain(posteriors: np.ndarray, confusion: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """EIG per task (bits).  ``posteriors`` (N, K) rows summing to 1; ``confusion`` (S, K, K)
    ``[worker, true, observed]`` rows summing to 1; ``weights`` (S,) summing to 1.  Returns (N,) float64, >= 0."""
    n, k = posteriors.shape
    s_count = confusion.shape[0]
    # sum_l C log C per worker and class: the sum's first half, read by every task (K logs per task and worker
    # instead of K^2)
    neg_entropy = np.zeros((s_count, k))
    for s in range(s_count):
        for t in range(k):
            acc = 0.0
            for col in range(k):
                c = confusion[s, t, col]
                if c > 0.0:
                    acc += c * np.log(c)
            neg_entropy[s, t] = acc
    out = np.zeros(n)
    pred = np.empty(k)
    inv_ln2 = 1.0 / np.log(2.0)
    for i in range(n):
        gain = 0.0
        for s in range(s_count):
            for col in range(k):
                pred[col] = 0.0
            info = 0.0
            for t in range(k):
                qt = posteriors[i, t]
                if qt > 0.0:
                    info += qt * neg_entropy[s, t]
                    for col in range(k):
                        pred[col] += qt * confusion[s, t, col]
            for col in range(k):
                p = pred[col]
                if p > 0.0:
                    info -= p * np.log(p)
            gain += weights[s] * info
        # H(p) - E_t H(C_t) is >= 0; a settled task's two nearly equal halves can leave -1e-16
        out[i] = max(gain * inv_ln2, 0.0)
    return out


def information_gain(posteriors: np.ndarray, confusion: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """:func:`_information_gain` on C-contiguous float64 copies of its arrays (shapes as there).

    Raises
    ------
    DataError
        Shapes that do not fit together (the kernel reads by them: a
        mismatch would read past an array's end), or a value that is not
        a finite probability.
    """
    post = as_float_array(posteriors, "information_gain: posteriors (N, K)", 2)
    conf = as_float_array(confusion, "information_gain: confusion (S, K, K)", 3)
    wts = as_float_array(weights, "information_gain: weights (S,)", 1)
    k = post.shape[1]
    if conf.shape[1:] != (k, k) or wts.shape[0] != conf.shape[0]:
        raise DataError(f"information_gain: confusion must be (S, {k}, {k}) for posteriors of {k} classes and "
                        f"weights (S,); got shapes {conf.shape} and {wts.shape}")
    for name, arr in (("posteriors", post), ("confusion", conf), ("weights", wts)):
        bad = ~np.isfinite(arr) | (arr < 0.0)
        if bad.any():
            at = tuple(int(i) for i in np.argwhere(bad)[0])
            raise DataError(f"information_gain: {name}{list(at)} is {float(arr[at])!r}, not a probability")
    return _information_gain(post, conf, wts)

