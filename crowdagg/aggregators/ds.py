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

With ``smoothing = 0`` (the default) entries are floored at 1e-10, as
crowd-kit does.  A worker without answers gets uniform columns.

The one-coin model (ALGORITHMS.md §2.3) ties each worker's matrix to one
accuracy :math:`p_m` with errors uniform over the other K - 1 classes; its
M-step is :math:`p_m = (s/K + \sum_{n\in N_m} q_n(\tilde y_n^{(m)})) / (|N_m| + s)`:
``s`` pseudo-answers at chance accuracy 1/K (default s = 1), so a worker
with one or two answers stays near 1/K, whose vote weight is zero, instead
of running to p = 0 or 1 and overriding the crowd; a worker without answers
gets exactly 1/K.  Its E-step keeps the :math:`\log(K-1)` term (Liu et
al.'s code drops it).

Both start from soft majority vote (one M-step on the vote shares), then
iterate M-step + E-step with the fused E/M kernel of :mod:`crowdagg.kernels`
(O(L K) per iteration), and stop when the relative change of the
observed-data log-likelihood falls below ``tol`` (1e-6) or after
``max_iter`` (200) iterations (``tol=0`` runs exactly ``max_iter``).  The
result ends on an E-step: its posteriors are those of its parameters.
Gold labels, when given, clamp those tasks' posteriors to one-hot
(semi-supervised DS) in every E-step, so they also shape the confusion
matrices.  Tasks without answers get the class prior.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from ..checks import check_float, check_index_array, check_int
from ..data import AnnotationSet
from ..errors import ConvergenceWarning, CrowdaggWarning, DataError, param, warn
from ..result import AggregationResult
from .base import (
    MAX_SMOOTHING,
    Aggregator,
    TieBreaker,
    argmax_random_ties,
    full_m_step,
    make_result,
    one_coin_m_step,
)
from .mv import soft_majority_vote

MStep = Callable[[np.ndarray, np.ndarray, float], "tuple[np.ndarray, np.ndarray]"]


def gold_clamp(data: AnnotationSet, gold: Mapping[str, str] | np.ndarray | None) -> np.ndarray:
    """Class index to clamp per task (-1 = free), shape (n_tasks,), int64.

    ``gold`` maps task name -> class name, or is already such an index array
    (integers in [-1, K-1]).  Gold for tasks absent from the answers is
    ignored, with a warning saying how many; an unknown class is an error.
    """
    clamp = np.full(data.n_tasks, -1, dtype=np.int64)
    if gold is None:
        return clamp
    if isinstance(gold, np.ndarray):
        return check_index_array("gold", gold, data.n_tasks, -1, data.n_classes - 1)
    if not isinstance(gold, Mapping):
        raise DataError(f"{param('gold')} must map task names to class names, or be an index array")
    lookup = data.task_lookup()
    cls_index = {c: i for i, c in enumerate(data.classes)}
    missing = 0
    for task, label in gold.items():
        t = lookup.get(str(task).strip())
        if t is None:
            missing += 1
            continue
        k = cls_index.get(str(label).strip())
        if k is None:
            raise DataError(
                f"gold label {label!r} of task {task!r} is not one of the classes ({', '.join(data.classes)})"
            )
        clamp[t] = k
    if missing:
        text = (
            f"none of the {len(gold)} gold task(s) is in the answers (check that the task ids match)"
            if missing == len(gold)
            else f"{missing} of {len(gold)} gold task(s) are not in the answers and are ignored"
        )
        warn(CrowdaggWarning(text))
    return clamp


def dawid_skene(
    data: AnnotationSet,
    *,
    m_step: MStep = full_m_step,
    smoothing: float = 0.0,
    tol: float = 1e-6,
    max_iter: int = 200,
    clamp: np.ndarray | None = None,
    callback: Callable[[int, float], None] | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[float], bool]:
    """Run EM; return (posteriors, prior, confusion[w, true, observed], loglik trace, converged).

    Parameters start from one M-step on soft majority vote.  An iteration is
    an M-step followed by an E-step, so the returned posteriors are the
    E-step of the returned parameters (the result is self-consistent) and
    ``trace[i]`` is the log-likelihood of the parameters after iteration
    ``i + 1``.  Convergence: relative change of the log-likelihood below
    ``tol`` (compared with the previous iteration, or with the starting
    parameters for the first); ``tol=0`` runs exactly ``max_iter``.
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
    prev = ws.e_step(np.log(prior), np.log(conf_ot), clamp)
    trace: list[float] = []
    converged = False
    for it in range(1, max_iter + 1):
        prior, conf_ot = m_step(*ws.stats(), smoothing)
        ll = ws.e_step(np.log(prior), np.log(conf_ot), clamp)
        trace.append(ll)
        if callback is not None:
            callback(it, ll)
        if tol > 0 and abs(ll - prev) <= tol * abs(prev):
            converged = True
            break
        prev = ll
    return ws.post.copy(), prior, np.ascontiguousarray(conf_ot.transpose(0, 2, 1)), trace, converged


def em_memory(data: AnnotationSet) -> tuple[float, str]:
    """Bytes an EM fit allocates (posteriors, per-chunk count tensors, M-step temporaries)."""
    from ..kernels import em_chunk_count

    n, w, k = data.n_tasks, data.n_workers, data.n_classes
    chunks = em_chunk_count(data.n_answers, n, w, k)
    need = 8.0 * (3 * n * k + (chunks + 6) * w * k * k) + 4.0 * data.n_answers
    return need, f"{w:,} workers × {k:,}² classes, {n:,} tasks"


class DawidSkene(Aggregator):
    __doc__ = __doc__
    name = "ds"
    summary = "Dawid-Skene EM, full confusion matrix per worker (soft-MV init, Dirichlet smoothing)"
    params = ("smoothing", "tol", "max_iter", "gold")
    _m_step: MStep = staticmethod(full_m_step)  # type: ignore[assignment]
    #: Default ``smoothing`` (``None`` in ``__init__`` picks it).
    default_smoothing: float = 0.0
    memory_advice = "its tables grow with workers × classes²: use mv or wmv, or fewer classes"

    def __init__(
        self,
        *,
        seed: int = 0,
        smoothing: float | None = None,
        tol: float = 1e-6,
        max_iter: int = 200,
        gold: Mapping[str, str] | np.ndarray | None = None,
    ) -> None:
        super().__init__(seed=seed)
        self.smoothing = self.default_smoothing if smoothing is None else smoothing
        self.tol = tol
        self.max_iter = max_iter
        self.gold = gold

    def memory_needed(self, data: AnnotationSet) -> tuple[float, str]:
        return em_memory(data)

    def check_params(self) -> dict[str, Any]:
        return {
            **super().check_params(),
            "smoothing": check_float("smoothing", self.smoothing, 0.0, MAX_SMOOTHING),
            "tol": check_float("tol", self.tol, 0.0, 0.5),
            "max_iter": check_int("max_iter", self.max_iter, 1, 10**7),
        }

    def _fit(self, data: AnnotationSet, seed: int, callback: Any) -> AggregationResult:
        checked = self.check_params()
        smoothing, tol, max_iter = checked["smoothing"], checked["tol"], checked["max_iter"]
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
            warn(
                ConvergenceWarning(
                    f"{self.name}: EM did not converge in {param('max_iter')}={max_iter} iterations "
                    f"(relative log-likelihood change still above {param('tol')}={tol:g}); "
                    f"raise {param('max_iter')} or loosen {param('tol')}"
                )
            )
        labels = argmax_random_ties(post, TieBreaker(data.tasks, seed), atol=1e-12)
        accuracy = np.diagonal(confusion, axis1=1, axis2=2)[:, 0].copy() if self.name == "onecoin" else None
        return make_result(
            self.name, data, post, labels, prior, confusion,
            n_iter=len(trace), converged=converged, log_likelihood=np.asarray(trace), accuracy=accuracy,
        )


class OneCoinDawidSkene(DawidSkene):
    __doc__ = __doc__
    name = "onecoin"
    summary = "one-coin Dawid-Skene EM: one accuracy per worker, errors uniform over other classes"
    _m_step = staticmethod(one_coin_m_step)  # type: ignore[assignment]
    default_smoothing = 1.0
