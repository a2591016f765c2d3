"""The one result type every aggregator returns."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from .data import AnnotationSet


@dataclass(eq=False)
class AggregationResult:
    """What an aggregator learned from an :class:`~crowdagg.data.AnnotationSet`.

    Attributes
    ----------
    method : str
        Registry name of the method that produced it (``"ds"``, ``"mv"``, ...).
    posteriors : ndarray, shape (n_tasks, n_classes)
        P(true class | answers) per task; rows sum to 1.
    labels : ndarray of int64, shape (n_tasks,)
        Hard label per task (class index); ties broken by a seeded draw.
    prior : ndarray, shape (n_classes,)
        Estimated class prior.
    confusion : ndarray, shape (n_workers, n_classes, n_classes)
        ``confusion[w, true, observed]`` = P(worker w answers ``observed`` | ``true``);
        each ``confusion[w, k, :]`` sums to 1.
    n_iter : int
        Iterations run (0 for one-shot methods).
    converged : bool
        Whether the stopping rule was met (True for one-shot methods).
    log_likelihood : ndarray, shape (n_iter,)
        Observed-data log-likelihood after each iteration (empty when the
        method has none).
    data : AnnotationSet
        The answers it was fitted on (for names and counts).
    """

    method: str
    posteriors: np.ndarray
    labels: np.ndarray
    prior: np.ndarray
    confusion: np.ndarray
    data: AnnotationSet
    n_iter: int = 0
    converged: bool = True
    log_likelihood: np.ndarray = field(default_factory=lambda: np.empty(0))

    @property
    def confidence(self) -> np.ndarray:
        """Posterior probability of the chosen label, shape (n_tasks,)."""
        return self.posteriors[np.arange(len(self.labels)), self.labels]

    @property
    def worker_accuracy(self) -> np.ndarray:
        """Expected accuracy of each worker under the class prior, shape (n_workers,)."""
        diag = np.diagonal(self.confusion, axis1=1, axis2=2)
        return diag @ self.prior

    def label_names(self) -> np.ndarray:
        """Hard labels as class names (object array of str)."""
        return np.asarray(self.data.classes, dtype=object)[self.labels]

    def to_frame(self, *, proba: bool = False) -> pd.DataFrame:
        """One row per task, in input order: ``task, label, confidence`` [+ ``p_<class>``]."""
        import pandas as pd

        cols: dict[str, object] = {
            "task": self.data.task_names,
            "label": self.label_names(),
            "confidence": self.confidence,
        }
        if proba:
            for k, name in enumerate(self.data.classes):
                cols[f"p_{name}"] = self.posteriors[:, k]
        return pd.DataFrame(cols)

    def workers_frame(self) -> pd.DataFrame:
        """Long-form confusion per worker.

        Columns ``worker, true_label, observed_label, probability, accuracy,
        n_answers`` (the last two repeat on each of a worker's rows).
        """
        import pandas as pd

        n_w, k, _ = self.confusion.shape
        classes = np.asarray(self.data.classes, dtype=object)
        acc = self.worker_accuracy
        n_ans = self.data.answers_per_worker
        return pd.DataFrame(
            {
                "worker": np.repeat(self.data.worker_names, k * k),
                "true_label": np.tile(np.repeat(classes, k), n_w),
                "observed_label": np.tile(classes, n_w * k),
                "probability": self.confusion.reshape(-1),
                "accuracy": np.repeat(acc, k * k),
                "n_answers": np.repeat(n_ans, k * k),
            }
        )
