"""The GLAD worker/task model: worker abilities, task difficulties, and answers drawn from them.

Whitehill, Ruvolo, Wu, Bergsma & Movellan (NIPS 2009), "Whose vote should
count more: optimal integration of labels from labelers of unknown
expertise", in its multiclass form.  Worker ``m`` has an ability
``alpha_m`` in R, task ``n`` a parameter ``beta_n > 0`` (``1 / beta_n`` is
its difficulty), and

.. math::

    P(\\tilde y_n^{(m)} = y_n) = \\sigma(\\alpha_m \\beta_n), \\qquad
    P(\\tilde y_n^{(m)} = c) = \\frac{1 - \\sigma(\\alpha_m \\beta_n)}{K - 1}
    \\quad (c \\ne y_n).

``alpha = 0`` is a coin flip between the truth and a wrong class (chance
for K = 2), ``alpha < 0`` is right less often than that, and a larger
``beta`` pushes every worker towards its extreme (always right for
``alpha > 0``, never for ``alpha < 0``).

How :func:`crowdagg.simulate.simulate` draws the parameters:

* abilities: ``alpha_m = logit(p_m)``, ``p_m ~ Uniform(skill)``, so ``skill``
  keeps its meaning as the range of accuracies -- on a task with ``beta =
  1``, the median task (:func:`abilities`); adversaries mirror it,
  ``alpha_m = -logit(p_m)``;
* task parameters: ``log beta_n ~ N(0, difficulty_spread^2)``
  (:func:`task_betas`);
* answers: one uniform per answer, by inverse-CDF sampling
  (:func:`sample_labels`).

Workers whose answers are uniformly random (spammers, extreme spammers) are
GLAD workers with ``alpha = 0`` when K = 2; for K > 2 no ``alpha`` gives
accuracy ``1/K`` on every task, so their ability is NaN and their answers
are drawn with accuracy ``1/K``.
"""

from __future__ import annotations

import numpy as np

#: Standard deviation of log beta when ``difficulty_spread`` is not given: about a third of the tasks
#: have beta outside [1/e, e], e.g. a worker with accuracy 0.8 on the median task is right 0.62 of the
#: time at beta = exp(-1) and 0.98 at beta = e.
DEFAULT_DIFFICULTY_SPREAD = 1.0
#: Largest accepted ``difficulty_spread``: at 5, a third of the tasks have beta beyond exp(+-5), i.e.
#: are already answered either perfectly or at a coin flip; larger spreads only push beta towards
#: overflow.
MAX_DIFFICULTY_SPREAD = 5.0

#: Trapezoid grid of :func:`expected_accuracy`: z in [-_Z_MAX, _Z_MAX] (the normal density beyond is
#: < 1e-17), step 1 / (_STEPS_PER_UNIT * max(1, spread)); the integrand's step in z is ~1/spread wide,
#: and this grid integrates it to ~1e-14 (checked against scipy.integrate.quad for spreads up to 5).
_Z_MAX = 9.0
_STEPS_PER_UNIT = 8
#: Workers per block of :func:`expected_accuracy` (bounds its temporaries at ~25 MB).
_WORKER_BLOCK = 4096


def sigmoid(x: np.ndarray) -> np.ndarray:
    """``1 / (1 + exp(-x))`` without overflow warnings for large ``|x|``."""
    from scipy.special import expit

    return np.asarray(expit(x), dtype=np.float64)


def abilities(accuracy: np.ndarray) -> np.ndarray:
    """``logit(accuracy)``: the ability whose accuracy on a task with ``beta = 1`` is ``accuracy``.

    Parameters
    ----------
    accuracy : ndarray of float, shape (n_workers,)
        Probabilities strictly between 0 and 1.

    Returns
    -------
    ndarray of float64, shape (n_workers,)
    """
    p = np.asarray(accuracy, dtype=np.float64)
    return np.log(p) - np.log1p(-p)


def task_betas(rng: np.random.Generator, n_tasks: int, spread: float) -> np.ndarray:
    """``beta_n = exp(spread * z_n)``, ``z_n ~ N(0, 1)``: log-normal task parameters with median 1.

    Always draws ``n_tasks`` normals (also for ``spread = 0``, where every
    ``beta`` is 1), so the draws that follow do not depend on the spread.

    Returns
    -------
    ndarray of float64, shape (n_tasks,)
    """
    return np.exp(spread * rng.standard_normal(n_tasks))


def expected_accuracy(alpha: np.ndarray, spread: float, n_classes: int) -> np.ndarray:
    """``E[sigma(alpha * beta)]`` over ``log beta ~ N(0, spread^2)``, per worker.

    The probability that the worker answers a task drawn from the difficulty
    distribution correctly: the diagonal of its (one-coin) expected confusion
    matrix.  ``alpha = NaN`` (a uniformly random worker, see the module
    docstring) gives ``1 / n_classes``.  Computed by the trapezoid rule on a
    fine grid of the standard normal ``z`` (``log beta = spread * z``).

    Parameters
    ----------
    alpha : ndarray of float, shape (n_workers,)
    spread : float
        Standard deviation of ``log beta``, in [0, :data:`MAX_DIFFICULTY_SPREAD`].
    n_classes : int

    Returns
    -------
    ndarray of float64, shape (n_workers,)
    """
    alpha = np.asarray(alpha, dtype=np.float64)
    out = np.full(alpha.shape[0], 1.0 / n_classes)
    glad = np.flatnonzero(~np.isnan(alpha))
    if spread == 0.0:
        out[glad] = sigmoid(alpha[glad])
        return out
    h = 1.0 / (_STEPS_PER_UNIT * max(1.0, spread))
    z = np.arange(-_Z_MAX, _Z_MAX + h / 2, h)
    weight = np.exp(-0.5 * z * z) * (h / np.sqrt(2.0 * np.pi))
    beta = np.exp(spread * z)
    for start in range(0, glad.shape[0], _WORKER_BLOCK):
        idx = glad[start : start + _WORKER_BLOCK]
        out[idx] = sigmoid(alpha[idx, None] * beta[None, :]) @ weight
    return out


def sample_labels(
    rng: np.random.Generator,
    alpha: np.ndarray,
    beta: np.ndarray,
    worker: np.ndarray,
    task: np.ndarray,
    true_class: np.ndarray,
    n_classes: int,
) -> np.ndarray:
    """One answer per (task, worker) edge from the GLAD model, all edges at once.

    The answer's distribution, listed in the rotated class order ``y, y + 1,
    ..., y + K - 1 (mod K)``, is ``[p, (1 - p)/(K - 1), ...]`` with ``p =
    sigma(alpha[worker] * beta[task])`` (``1/K`` where ``alpha`` is NaN);
    one uniform ``u`` per answer is inverted through that CDF: ``u < p`` gives
    the truth, otherwise wrong class number ``floor((u - p) / (1 - p) * (K -
    1))`` in that order, uniform over the K - 1 others.

    Parameters
    ----------
    rng : numpy.random.Generator
    alpha : ndarray of float64, shape (n_workers,)
    beta : ndarray of float64, shape (n_tasks,)
    worker, task : ndarray of int, shape (n_answers,)
    true_class : ndarray of int, shape (n_answers,)
        The truth of each answer's task.
    n_classes : int

    Returns
    -------
    ndarray of int8 (int16 beyond 127 classes), shape (n_answers,)
    """
    k = n_classes
    a = alpha[worker]
    p = sigmoid(a * beta[task])
    p[np.isnan(a)] = 1.0 / k
    del a
    u = rng.random(int(worker.shape[0]))
    wrong = np.flatnonzero(u >= p)  # here p <= u < 1, so 1 - p > 0
    pw = p[wrong]
    # Rounding can give exactly K - 1 for u just below 1: that is the last wrong class.
    j = np.minimum(((u[wrong] - pw) / (1.0 - pw) * (k - 1)).astype(np.int64), k - 2)
    label = true_class.astype(np.int8 if k <= 127 else np.int16)
    label[wrong] = (true_class[wrong] + 1 + j) % k
    return label
