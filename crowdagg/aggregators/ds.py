r"""Dawid--Skene EM: full confusion matrices and the one-coin variant.

Model (Dawid & Skene 1979, doi:10.2307/2346806): the true class
:math:`y_n \sim \mathrm{Cat}(d)`; given :math:`y_n = k`, worker :math:`m`
answers :math:`\tilde y_n^{(m)} \sim \mathrm{Cat}(A_m[:, k])`, independently
across workers.

E-step (log space, max-shifted):

.. math:: \log q_n(k) = \log d_k + \sum_{m \in M_n} \log A_m[\tilde y_n^{(m)}, k] - \log Z_n

M-step with a symmetric Dirichlet(:math:`1 + s`) prior (``smoothing`` = s):

.. math:: A_m[k', k] \propto s + \sum_{n \in N_m} q_n(k)\,1[\tilde y_n^{(m)} = k'],
          \qquad d_k \propto s + \sum_n q_n(k)

The one-coin model (ALGORITHMS.md §2.3) ties each worker's matrix to one
accuracy :math:`p_m` with errors uniform over the other K - 1 classes;
its M-step is :math:`p_m = (s + \sum_{n\in N_m} q_n(\tilde y_n^{(m)})) / (|N_m| + 2s)`
and its E-step keeps the :math:`\log(K-1)` term (Liu et al.'s code drops it).

Both start from soft majority vote (one M-step on the vote shares), run the
fused E/M kernel of :mod:`crowdagg.kernels` (O(L K) per iteration) and stop
when the relative change of the observed-data log-likelihood falls below
``tol`` or after ``max_iter`` iterations (``tol=0`` runs exactly
``max_iter``).  Gold labels, when given, clamp those tasks' posteriors to
one-hot (semi-supervised DS).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from ..checks import check_float, check_int
from ..data import AnnotationSet
from ..errors import ConvergenceWarning, DataError
from ..result import AggregationResult
from .base import (
    Aggregator,
    argmax_random_ties,
    full_m_step,
    make_result,
    one_coin_m_step,
)
from .mv import soft_majority_vote

MStep = Callable[[np.ndarray, np.ndarray, float], "tuple[np.ndarray, np.ndarray]"]


def gold_clamp(data: AnnotationSet, gold: Mapping[str, str] | np.ndarray | None) -> np.ndarray:
    """Class index to clamp per task (-1 = free), shape (n_tasks,), int64.

    ``gold`` maps task name -> class name, or is already such an index array.
    Gold for tasks absent from the answers is ignored; an unknown class is
    an error.
    """
    clamp = np.full(data.n_tasks, -1, dtype=np.int64)
    if gold is None:
        return clamp
    if isinstance(gold, np.ndarray):
        if gold.shape != (data.n_tasks,):
            raise DataError(f"gold index array must have shape ({data.n_tasks},), got {gold.shape}")
        return gold.astype(np.int64)
    lookup = data.task_lookup()
    cls_index = {c: i for i, c in enumerate(data.classes)}
    for task, label in gold.items():
        t = lookup.get(str(task))
        if t is None:
            continue
        k = cls_index.get(str(label))
        if k is None:
            raise DataError(
                f"gold label {label!r} of task {task!r} is not one of the classes ({', '.join(data.classes)})"
            )
        clamp[t] = k
    return clamp


def dawid_skene(
    data: AnnotationSet,
    *,
    m_step: MStep = full_m_step,
    smoothing: float = 0.0,
    tol: float = 1e-6,
    max_iter: int = 100,
    clamp: np.ndarray | None = None,
    callback: Callable[[int, float], None] | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[float], bool]:
    """Run EM; return (posteriors, prior, confusion[w, true, observed], loglik trace, converged).

    ``posteriors`` come from the last E-step and the parameters from the
    M-step that follows it (as in crowd-kit).
    """
    from ..kernels import EMWorkspace

    if clamp is None:
        clamp = np.full(data.n_tasks, -1, dtype=np.int64)
    ws = EMWorkspace(data.task_ptr, data.worker, data.label, data.n_workers, data.n_classes)
    post = soft_majority_vote(data)
    fixed = clamp >= 0
    if fixed.any():
        post[fixed] = 0.0
        post[np.flatnonzero(fixed), clamp[fixed]] = 1.0
    ws.accumulate(post)
    prior, conf_ot = m_step(*ws.stats(), smoothing)
    trace: list[float] = []
    converged = False
    prev = -np.inf
    for it in range(1, max_iter + 1):
        ll = ws.e_step(np.log(prior), np.log(conf_ot), clamp)
        prior, conf_ot = m_step(*ws.stats(), smoothing)
        trace.append(ll)
        if callback is not None:
            callback(it, ll)
        if tol > 0 and it > 1 and abs(ll - prev) <= tol * abs(prev):
            converged = True
            break
        prev = ll
    return ws.post.copy(), prior, np.ascontiguousarray(conf_ot.transpose(0, 2, 1)), trace, converged


class DawidSkene(Aggregator):
    __doc__ = __doc__
    name = "ds"
    summary = "Dawid-Skene EM, full confusion matrix per worker (soft-MV init, Dirichlet smoothing)"
    params = ("smoothing", "tol", "max_iter", "gold")
    _m_step: MStep = staticmethod(full_m_step)  # type: ignore[assignment]

    def __init__(
        self,
        *,
        seed: int = 0,
        smoothing: float = 0.0,
        tol: float = 1e-6,
        max_iter: int = 100,
        gold: Mapping[str, str] | np.ndarray | None = None,
    ) -> None:
        super().__init__(seed=seed)
        self.smoothing = smoothing
        self.tol = tol
        self.max_iter = max_iter
        self.gold = gold

    def _fit(self, data: AnnotationSet, rng: np.random.Generator, callback: Any) -> AggregationResult:
        smoothing = check_float("smoothing", self.smoothing)
        tol = check_float("tol", self.tol)
        max_iter = check_int("max_iter", self.max_iter, 1)
        clamp = gold_clamp(data, self.gold)
        post, prior, confusion, trace, converged = dawid_skene(
            data,
            m_step=type(self)._m_step,
            smoothing=smoothing,
            tol=tol,
            max_iter=max_iter,
            clamp=clamp,
            callback=callback,
        )
        if tol > 0 and not converged:
            warnings.warn(
                f"{self.name}: EM did not converge in max_iter={max_iter} iterations "
                f"(relative log-likelihood change still above tol={tol:g}); "
                "raise --max-iter or loosen --tol",
                ConvergenceWarning,
                stacklevel=2,
            )
        labels = argmax_random_ties(post, rng, atol=1e-12)
        return make_result(
            self.name, data, post, labels, prior, confusion,
            n_iter=len(trace), converged=converged, log_likelihood=np.asarray(trace),
        )


class OneCoinDawidSkene(DawidSkene):
    __doc__ = __doc__
    name = "onecoin"
    summary = "one-coin Dawid-Skene EM: one accuracy per worker, errors uniform over other classes"
    _m_step = staticmethod(one_coin_m_step)  # type: ignore[assignment]
