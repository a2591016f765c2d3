r"""CRH: conflict resolution on heterogeneous data (Li et al., SIGMOD 2014), for numeric answers.

Model
-----
CRH minimises :math:`\sum_m w_m \sum_{n \in N_m} d(x_{mn}, v_n)` under
:math:`\sum_m \exp(-w_m) = 1`, whose solution for fixed estimates is

.. math::

    w_m = -\log \frac{L_m}{\sum_{m'} L_{m'}}, \qquad
    L_m = \sum_{n \in N_m} \frac{(x_{mn} - v_n)^2}{\mathrm{std}_n},

the continuous loss normalised by the standard deviation of each task's
answers (so that tasks on different scales weigh alike; the paper's
normalised squared loss, as spark-crowd's PM), and for fixed weights the
weighted mean :math:`v_n = \sum_m w_m x_{mn} / \sum_m w_m`.  Starting from
the median of each task, the two alternate until no estimate moves.

A task whose answers all agree (std 0, or a single answer) tells nothing
about the workers: it is left out of the losses.  A loss below
:data:`LOSS_FLOOR` of the total is raised to it, so that a worker who never
disagrees gets a large, finite weight; a worker with a loss above the total
cannot occur (each loss is a part of it), so weights are >= 0.  Workers
without answers get weight 0; where a task's answerers all weigh 0 (one
worker in all) its estimate is the plain mean.

Reference: Q. Li, Y. Li, J. Gao, B. Zhao, W. Fan and J. Han, Resolving
conflicts in heterogeneous data by truth discovery and source reliability
estimation, SIGMOD 2014, pp. 1187-1198, doi:10.1145/2588555.2610509.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...data.numeric import NumericAnswers
from .base import NumericAggregator

#: A worker's loss is at least this share of the total (the weight at most −log of it, about 27.6).
LOSS_FLOOR = 1e-12


def crh_weights(losses: np.ndarray, n_answers: np.ndarray) -> np.ndarray:
    """``−log(L_m / Σ L)`` per worker (shape (n_workers,)); 0 for a worker without answers, and for all when the
    total loss is 0 (every task unanimous)."""
    has = np.asarray(n_answers) > 0
    total = float(losses[has].sum())
    if total <= 0:
        return np.zeros(len(losses))
    share = np.maximum(losses / total, LOSS_FLOOR)
    return np.where(has, -np.log(share), 0.0)


class CRH(NumericAggregator):
    """CRH truth discovery, continuous loss (declared in :mod:`crowdagg.methods.numeric`)."""

    name = "crh"
    iterative = True
    worker_param_names = ("weight", "loss")
    worker_param_units = (0, 1)  # a loss is a square over a standard deviation
    objective_unit = 1

    def _weights(self, data: NumericAnswers, values: np.ndarray,
                 checked: dict[str, Any]) -> tuple[dict[str, np.ndarray], float]:
        from ...kernels.numeric import worker_losses

        losses = worker_losses(data.task_ptr, data.worker, data.value, values, data.task_std, data.n_workers)
        weight = crh_weights(losses, data.answers_per_worker)
        return {"weight": weight, "loss": losses}, float(np.dot(weight, losses))
