r"""One-coin Dawid--Skene EM: one accuracy per worker, errors uniform over the other classes.

Model (Dawid & Skene 1979 with the symmetric worker model, e.g. Liu, Peng
& Ihler, NeurIPS 2012; ALGORITHMS.md §2.3): as :mod:`.ds`, with each
worker's confusion tied to one accuracy :math:`p_m`,

.. math:: A_m[k', k] = p_m \text{ if } k' = k, \qquad (1 - p_m) / (K - 1) \text{ otherwise.}

M-step:

.. math:: p_m = \frac{s/K + \sum_{n \in N_m} q_n(\tilde y_n^{(m)})}{|N_m| + s},
          \qquad d_k \propto s + \sum_n q_n(k)

``s`` (``smoothing``, default 1) pseudo-answers at chance accuracy 1/K, so a
worker with one or two answers stays near 1/K, whose vote weight is zero,
instead of running to p = 0 or 1 and overriding the crowd; a worker
without answers gets exactly 1/K.  The E-step is Dawid--Skene's on the
matrices :math:`A_m` and keeps the :math:`\log(K-1)` term (Liu et al.'s code
drops it).

Everything else -- the start from soft majority vote, the fused E/M
kernel, the stopping rule, restarts, gold clamping, a saved model's
pseudo-counts -- is Dawid--Skene's (:class:`~crowdagg.methods.em.ds.DawidSkene`).
The result's ``worker_params["accuracy"]`` is :math:`p` (n_workers,); the
matrices the M-step made are kept for reports (``result.confusion``).  Its
``counts`` are each worker's expected correct answers and answers
(n_workers,) and the class totals (K,), pseudo-counts included.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..base import FitContext, IterativeAggregator
from ..blocks import one_coin_accuracy, one_coin_matrices, prior_m_step
from .ds import DawidSkene, EMState


def one_coin_m_step(counts_ot: np.ndarray, class_tot: np.ndarray, smoothing: float) -> tuple[np.ndarray, np.ndarray]:
    r"""One-coin M-step: :math:`p_m = (c_m + s/K) / (n_m + s)`, errors uniform.

    ``counts_ot`` (n_workers, K_observed, K_true) expected answer counts,
    ``class_tot`` (K,) expected class totals.  ``c_m`` is worker m's
    expected number of correct answers (the trace) and ``n_m`` its number
    of answers; ``s`` pseudo-answers at chance accuracy 1/K (the MAP
    estimate under a Beta(1 + s/K, 1 + s(K-1)/K) prior) pull sparse workers
    towards 1/K, whose one-coin vote weight log((K-1)p/(1-p)) is zero.  A
    worker without answers gets exactly 1/K whatever ``s``.

    Returns the prior (K,) and the matrices (n_workers, K, K) (symmetric:
    the same in either layout).
    """
    k = class_tot.shape[0]
    p = one_coin_accuracy(np.trace(counts_ot, axis1=1, axis2=2), counts_ot.sum(axis=(1, 2)), smoothing, k)
    return prior_m_step(class_tot, smoothing), one_coin_matrices(p, k)


class OneCoinDawidSkene(DawidSkene):
    __doc__ = __doc__
    name = "onecoin"
    _m_step = staticmethod(one_coin_m_step)  # type: ignore[assignment]
    #: Its worker parameters are one-coin accuracies; it starts only from another one-coin model's.
    worker_form = "one-coin"
    starts_from = ("one-coin",)
    collapse_advice = IterativeAggregator.collapse_advice  # the base's "try ds", not the advice ds gives itself

    def worker_model(self, state: EMState, checked: FitContext) -> tuple[dict[str, Any], dict[str, Any], Any]:
        """The accuracies (n_workers,), their counts (correct answers, answers, class totals) and the matrices."""
        confusion = state.confusion
        counts = {"class_counts": state.class_tot, "smoothing": float(checked["smoothing"]),
                  "correct": np.trace(state.counts_ot, axis1=1, axis2=2).copy(),
                  "answers": state.counts_ot.sum(axis=(1, 2))}
        return {"accuracy": np.diagonal(confusion, axis1=1, axis2=2)[:, 0].copy()}, counts, confusion
