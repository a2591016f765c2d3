r"""The class order of a moment estimate: resolved from the data, never from the truth.

A moment estimate is identified up to one permutation of the classes,
common to every worker and the prior (CPD, coupled NMF: ALGORITHMS.md §4.2,
§5.5); a per-worker method (MultiSPA's SPA) also leaves each worker its own
order, which must first be made common.  The reference codes resolve it
from the **truth** in their synthetic demos (``perm2match``: an oracle) or
by forcing every worker to look diagonally dominant
(``getPermutedMatrix``: adversaries included); neither is done here.

:func:`common_order` takes the assumption the papers state for
identifiability -- on average the workers are better than chance: the
order that maximises the trace of the **average** confusion,
:math:`\sigma = \arg\max_\sigma \sum_k \bar A[k, \sigma(k)]` with
:math:`\bar A = \frac1M \sum_m A_m` (the Hungarian algorithm,
``scipy.optimize.linear_sum_assignment``; ties go to the lower class).
When the crowd's average is not diagonally dominant, no method can tell
the classes apart without labels; gold labels (``--gold``) then pin them.
"""

from __future__ import annotations

import numpy as np


def common_order(conf_ot: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
    r"""``order`` (K,) int: true class ``k`` of the aligned estimate is column ``order[k]`` of ``conf_ot``.

    Parameters
    ----------
    conf_ot : ndarray, shape (n_workers, K_observed, K_true)
        Column-stochastic matrices sharing one (unknown) class order.
    weights : ndarray, shape (n_workers,), optional
        Per-worker weights of the average (default equal; 0 leaves a worker out).

    Returns
    -------
    ndarray of int64, shape (K,)
        Maximises :math:`\sum_k \bar A[k, \text{order}[k]]`.
    """
    conf = np.asarray(conf_ot, dtype=np.float64)
    w = np.ones(conf.shape[0]) if weights is None else np.asarray(weights, dtype=np.float64)
    return assignment(np.tensordot(w, conf, axes=1) / max(float(w.sum()), 1e-300))


def assignment(score: np.ndarray) -> np.ndarray:
    """``order`` (K,) int64: row ``k`` assigned to column ``order[k]``, maximising ``sum_k score[k, order[k]]``
    (the Hungarian algorithm, ``scipy.optimize.linear_sum_assignment``; ties to the lower index)."""
    from scipy.optimize import linear_sum_assignment

    rows, cols = linear_sum_assignment(-np.asarray(score))
    order = np.empty(len(rows), dtype=np.int64)
    order[rows] = cols
    return order


def reorder(conf_ot: np.ndarray, prior: np.ndarray, order: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(conf_ot[:, :, order], prior[order])``: the estimate in the order ``order`` (copies)."""
    return np.ascontiguousarray(np.asarray(conf_ot)[:, :, order]), np.asarray(prior)[order].copy()


__all__ = ["assignment", "common_order", "reorder"]
