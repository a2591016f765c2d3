r"""CATD: confidence-aware truth discovery (Li et al., PVLDB 2014) for numeric answers.

Model
-----
Worker :math:`m`'s answers err around the truth with variance
:math:`\sigma_m^2`; the truth is the weighted mean that minimises
:math:`\sum_m w_m \sum_{n \in N_m} (x_{mn} - v_n)^2`, with
:math:`w_m \propto 1/\sigma_m^2`.  A worker with few answers has a poorly
known variance, so CATD weights by the *upper* end of its :math:`(1 - \alpha)`
confidence interval,

.. math::

    \hat\sigma^2_m = \frac{\sum_{n \in N_m} (x_{mn} - v_n)^2}{\chi^2_{\alpha/2}(|N_m|)},
    \qquad w_m = 1 / \hat\sigma^2_m,

:math:`\chi^2_{\alpha/2}(N)` the :math:`\alpha/2` quantile of the chi-square
distribution with :math:`N` degrees of freedom (``scipy.stats.chi2.ppf``).
Starting from the median of each task, the weights and the weighted means
alternate until no estimate moves (the paper's Algorithm 1).

spark-crowd's CATD takes the :math:`1 - \alpha/2` quantile instead, the
*lower* end of the variance's interval: it trusts a worker with one answer
about 5 000 times more than the paper does at :math:`\alpha = 0.05`
(:math:`\chi^2_{0.975}(1) = 5.02` against :math:`\chi^2_{0.025}(1) = 0.00098`),
the opposite of the method's point; this module follows the paper
(``tests/methods/numeric/test_numeric.py`` shows the difference).

The iteration has a fixed point the paper does not discuss: a worker much
better than the others on their tasks weighs so much that their own answers
become the estimates there, so their error sum -- and variance estimate --
shrink toward 0 with each iteration (their weight grows as the square of
itself).  The estimates and the workers' ranking survive it (on simulated
crowds the error stays at a quarter of the mean's); the variance reported
for that worker does not mean their answers are exact.

A worker whose answers all equal the estimates (the only answer on each of
their tasks) has a summed error of 0: it is floored at :data:`ERROR_FLOOR`
times the answers' variance per answer (times 1 where every answer is the
same), so the weight stays finite; answers far from 1 in magnitude are
fitted rescaled (:func:`~crowdagg.data.numeric.value_scale`), so
that neither their squares nor these weights leave float64's range.
Workers without answers get weight 0.

Reference: Q. Li, Y. Li, J. Gao, L. Su, B. Zhao, M. Demirbas, W. Fan and
J. Han, A confidence-aware approach for truth discovery on long-tail data,
PVLDB 8(4):425-436, 2014, doi:10.14778/2735496.2735505.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...data.numeric import NumericAnswers
from .base import NumericAggregator

#: A worker's summed squared error is at least this × (the answers' variance) × (their answer count).
ERROR_FLOOR = 1e-9


def chi2_lower(n_answers: np.ndarray, alpha: float) -> np.ndarray:
    """``χ²_{α/2}(N)`` per worker: the α/2 quantile of the chi-square with ``N`` degrees of freedom (0 for N = 0)."""
    from scipy.stats import chi2

    n = np.asarray(n_answers, dtype=np.float64)
    # on the distinct counts only: a long tail of workers shares a few small counts, and the quantile is
    # costly (0.09 s for 200k workers, once per iteration)
    counts, inverse = np.unique(n, return_inverse=True)
    q = np.zeros_like(counts)
    has = counts > 0
    q[has] = chi2.ppf(alpha / 2, counts[has])
    return q[inverse.reshape(n.shape)]


def catd_weights(errors: np.ndarray, n_answers: np.ndarray, alpha: float, floor: float) -> tuple[np.ndarray, np.ndarray]:
    """``(weight, variance)`` per worker from their summed squared errors and answer counts (shape (n_workers,)).

    ``variance`` is the upper confidence bound ``Σ err² / χ²_{α/2}(N)`` (inf
    without answers), ``weight`` its reciprocal (0 without answers); an error
    sum below ``floor × N`` is raised to it.
    """
    n = np.asarray(n_answers, dtype=np.float64)
    q = chi2_lower(n, alpha)
    err = np.maximum(errors, floor * n)
    with np.errstate(divide="ignore", invalid="ignore"):
        weight = np.where(n > 0, q / err, 0.0)
        variance = np.where(n > 0, err / q, np.inf)
    return weight, variance


class CATD(NumericAggregator):
    """Confidence-aware truth discovery (declared in :mod:`crowdagg.methods.numeric`)."""

    name = "catd"
    iterative = True
    worker_param_names = ("weight", "variance")
    worker_param_units = (-2, 2)

    def _weights(self, data: NumericAnswers, values: np.ndarray,
                 checked: dict[str, Any]) -> tuple[dict[str, np.ndarray], float]:
        from ...kernels.numeric import worker_losses

        errors = worker_losses(data.task_ptr, data.worker, data.value, values, np.ones(data.n_tasks),
                               data.n_workers)
        # every answer equal: every error is 0, and any floor gives each worker the weight of their count alone;
        # 1 keeps it finite (the answers are within SAFE_RANGE of 1 here, rescaled where they were not)
        floor = ERROR_FLOOR * (float(np.var(data.value)) or 1.0)
        weight, variance = catd_weights(errors, data.answers_per_worker, checked["alpha"], floor)
        return {"weight": weight, "variance": variance}, float(np.dot(weight, errors))
