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

from typing import TYPE_CHECKING, Any

import numpy as np

from ...errors import DataError
from ..base import FitContext, IterativeAggregator
from ..blocks import one_coin_accuracy, one_coin_matrices, one_coin_spread, prior_m_step
from ..model_file import TOLERANCE, Field, SavedForm, WorkerModel
from .ds import DawidSkene, EMState

if TYPE_CHECKING:  # pragma: no cover
    from ..result import AggregationResult


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


class OneCoinForm(SavedForm):
    """onecoin's saved model (:mod:`crowdagg.methods.model_file`): per worker ``correct`` (expected correct
    answers) and ``answers`` (n_workers,), and the ``accuracy`` the M-step made of them.

    A warm start adds, to every M-step's expected counts, matrices whose
    trace is the correct answers and whose total is the answers (all a
    one-coin M-step reads).  A ``ds`` model converts: the trace and the total
    of each worker's counts.
    """

    method = "onecoin"
    fields = (Field("correct", "counts"), Field("answers", "counts"),
              Field("accuracy", "probabilities", derived=True))
    converts = ("ds",)

    def from_result(self, result: AggregationResult) -> dict[str, np.ndarray]:
        return {"correct": result.counts["correct"], "answers": result.counts["answers"],
                "accuracy": result.worker_params["accuracy"]}

    def parameters(self, stats: dict[str, np.ndarray], smoothing: float, k: int) -> dict[str, np.ndarray]:
        return {"accuracy": one_coin_accuracy(stats["correct"], stats["answers"], smoothing, k)}

    def prior(self, class_counts: np.ndarray, smoothing: float) -> np.ndarray:
        return prior_m_step(class_counts, smoothing)

    def check(self, model: WorkerModel, display: str) -> None:
        over = np.flatnonzero(model["correct"] > model["answers"] * (1 + TOLERANCE) + TOLERANCE)
        if over.size:
            i = int(over[0])
            raise DataError(f"{display}: correct[{i}] is {float(model['correct'][i])!r}, more than answers[{i}] "
                            f"= {float(model['answers'][i])!r}")

    def convert(self, model: WorkerModel, order: np.ndarray, rows: np.ndarray) -> dict[str, np.ndarray]:
        if model["method"] == "ds":
            sub = model["counts"][rows][:, order][:, :, order]
            return {"correct": np.trace(sub, axis1=1, axis2=2).copy(), "answers": sub.sum(axis=(1, 2))}
        if len(order) == len(model["classes"]):
            return {"correct": model["correct"][rows].copy(), "answers": model["answers"][rows].copy()}
        # Classes dropped: the trace and total of the matrices ds would make, without making them.
        correct, wrong, share = one_coin_spread(model, order, rows)
        kept = share.sum()
        return {"correct": correct * kept, "answers": (correct + wrong * (len(order) - 1)) * kept}

    def pseudo_counts(self, stats: dict[str, np.ndarray], known: np.ndarray, k: int) -> np.ndarray:
        # What a one-coin M-step reads of them: the trace (correct) and the total (answers).
        pseudo = np.zeros((known.size, k, k))
        idx, rows = np.arange(k), np.flatnonzero(known)
        wrong = (stats["answers"] - stats["correct"]) / max(k * (k - 1), 1)
        pseudo[rows] = wrong[:, None, None]
        pseudo[rows[:, None], idx, idx] = stats["correct"][:, None] / k
        if k == 1:
            pseudo[rows, 0, 0] = stats["answers"]
        return pseudo


class OneCoinDawidSkene(DawidSkene):
    __doc__ = __doc__
    name = "onecoin"
    _m_step = staticmethod(one_coin_m_step)  # type: ignore[assignment]
    #: Its worker parameters are one-coin accuracies; it starts only from another one-coin model's.
    worker_form = "one-coin"
    starts_from = ("one-coin",)
    collapse_advice = IterativeAggregator.collapse_advice  # the base's "try ds", not the advice ds gives itself
    saved_form = OneCoinForm()

    def worker_model(self, state: EMState, checked: FitContext) -> tuple[dict[str, Any], dict[str, Any], Any]:
        """The accuracies (n_workers,), their counts (correct answers, answers, class totals) and the matrices."""
        confusion = state.confusion
        counts = {"class_counts": state.class_tot, "smoothing": float(checked["smoothing"]),
                  "correct": np.trace(state.counts_ot, axis1=1, axis2=2).copy(),
                  "answers": state.counts_ot.sum(axis=(1, 2))}
        return {"accuracy": np.diagonal(confusion, axis1=1, axis2=2)[:, 0].copy()}, counts, confusion
