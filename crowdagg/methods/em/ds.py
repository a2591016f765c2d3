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

A saved worker model (``init_workers``, :mod:`crowdagg.methods.model_file`) is
evidence from earlier tasks: its expected counts are added to every
M-step's, :math:`A_m[k', k] \propto s + c_m[k', k] + \sum_n q_n(k)\,1[\ldots]`
and :math:`d_k \propto s + c_k + \sum_n q_n(k)`, while EM still starts from
the new tasks' own soft majority vote (started from the saved
probabilities instead, a warm start can lock onto them: on music's second
half it agrees with the joint fit on .451 of the tasks, against .929;
benchmarks/bench_warm_start.py).  The result's
``counts`` are the statistics its parameters were estimated from,
pseudo-counts included, which the next saved model records.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from ...core.checks import check_index_array, check_task_mapping
from ...data.annotations import AnnotationSet
from ...errors import CrowdaggWarning, DataError, param, warn
from ..base import (
    IterativeAggregator,
    Run,
    TieBreaker,
    argmax_random_ties,
    full_m_step,
    make_result,
    one_coin_accuracy,
    one_coin_m_step,
    prior_m_step,
)
from ..model_file import TOLERANCE, Field, SavedForm, WorkerModel
from ..result import AggregationResult
from ..votes.mv import soft_majority_vote

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
    gold = check_task_mapping(gold, "gold")  # a dict, or a pandas Series by its index
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


class EMState:
    """The state of one EM start: the fused E/M workspace, the current parameters, the clamp.

    ``warm`` (a :class:`~crowdagg.methods.model_file.WarmStart`) adds a saved model's
    counts to the expected counts of every M-step (pseudo-counts: evidence
    from an earlier batch).  ``counts_ot`` and ``class_tot`` are the
    statistics the current parameters were estimated from (what a saved
    model records).
    """

    def __init__(
        self, data: AnnotationSet, post: np.ndarray, clamp: np.ndarray, m_step: MStep, smoothing: float,
        warm: Any = None,
    ):
        from ...kernels import EMWorkspace

        self.ws = EMWorkspace(data.task_ptr, data.worker, data.label, data.n_workers, data.n_classes)
        self.clamp = clamp
        self.m_step = m_step
        self.smoothing = smoothing
        self.warm = warm
        fixed = clamp >= 0
        if fixed.any():
            post[fixed] = 0.0
            post[np.flatnonzero(fixed), clamp[fixed]] = 1.0
        self.ws.accumulate(post)
        self.objective = self.iterate()

    def e_step(self) -> float:
        return float(self.ws._e_step(np.log(self.prior), np.log(self.conf_ot), self.clamp))  # clamp checked once by gold_clamp

    def iterate(self) -> float:
        """One M-step on the current statistics, then the E-step: the log-likelihood of the new parameters."""
        counts, tot = self.ws.stats()
        if self.warm is not None:
            counts, tot = counts + self.warm.counts_ot, tot + self.warm.class_counts
        else:  # (a view of the workspace's blocks, which the E-step overwrites)
            counts, tot = counts.copy(), tot.copy()
        self.counts_ot, self.class_tot = counts, tot
        self.prior, self.conf_ot = self.m_step(counts, tot, self.smoothing)
        return self.e_step()

    @property
    def confusion(self) -> np.ndarray:
        """confusion[w, true, observed], shape (n_workers, K, K)."""
        return np.ascontiguousarray(self.conf_ot.transpose(0, 2, 1))


def starting_posteriors(data: AnnotationSet, start: int, rng: np.random.Generator) -> np.ndarray:
    """Start 0: soft majority vote.  Later starts: soft MV blended half and half with a Dirichlet(1) draw per task."""
    post = soft_majority_vote(data)
    if start == 0:
        return post
    noise = rng.dirichlet(np.ones(data.n_classes), size=data.n_tasks)
    answered = (data.answers_per_task > 0)[:, None]
    return np.where(answered, 0.5 * post + 0.5 * noise, 0.0)


def em_memory(data: AnnotationSet) -> tuple[float, str]:
    """Bytes an EM fit allocates (posteriors, per-chunk count tensors, M-step temporaries)."""
    from ...kernels import em_chunk_count

    n, w, k = data.n_tasks, data.n_workers, data.n_classes
    chunks = em_chunk_count(data.n_answers, n, w, k)
    need = 8.0 * (3 * n * k + (chunks + 6) * w * k * k) + 4.0 * data.n_answers
    return need, f"{w:,} workers × {k:,}² classes, {n:,} tasks"


# ----------------------------------------------------------------------------- the saved model
#: The axes of a per-worker matrix in a saved model: ``[worker, true, observed]``.
_MATRIX_AXES = ("worker", "true class", "observed class")


class DawidSkeneForm(SavedForm):
    """ds's saved model (:mod:`crowdagg.methods.model_file`): per worker ``counts`` (n_workers, K, K), the expected
    answers ``[worker, true, observed]`` the last M-step read, and the ``confusion`` it made of them.

    A warm start adds the counts, transposed to ``[worker, observed, true]``,
    to every M-step's.  A ``onecoin`` model converts: each worker's correct
    answers spread over the true classes by the model's class counts, its
    wrong ones also, evenly over the other classes.
    """

    method = "ds"
    fields = (Field("counts", "counts", _MATRIX_AXES), Field("confusion", "probabilities", _MATRIX_AXES, sums=True))
    converts = ("onecoin",)

    def from_result(self, result: AggregationResult) -> dict[str, np.ndarray]:
        return {"counts": result.counts["counts"], "confusion": result.worker_params["confusion"]}

    def parameters(self, stats: dict[str, np.ndarray], smoothing: float, k: int) -> dict[str, np.ndarray]:
        _, conf_ot = full_m_step(stats["counts"].transpose(0, 2, 1), np.zeros(k), smoothing)
        return {"confusion": np.ascontiguousarray(conf_ot.transpose(0, 2, 1))}

    def prior(self, class_counts: np.ndarray, smoothing: float) -> np.ndarray:
        return prior_m_step(class_counts, smoothing)

    def convert(self, model: WorkerModel, order: np.ndarray, rows: np.ndarray) -> dict[str, np.ndarray]:
        if model["method"] == "ds":
            return {"counts": model["counts"][rows][:, order][:, :, order]}
        correct, wrong, share = one_coin_spread(model, order, rows)
        k = len(order)
        counts = (wrong[:, None, None] * share[None, :, None]).repeat(k, axis=2)
        idx = np.arange(k)
        counts[:, idx, idx] = correct[:, None] * share[None, :]
        return {"counts": counts}

    def pseudo_counts(self, stats: dict[str, np.ndarray], known: np.ndarray, k: int) -> np.ndarray:
        pseudo = np.zeros((known.size, k, k))
        pseudo[known] = stats["counts"].transpose(0, 2, 1)
        return pseudo


class OneCoinForm(SavedForm):
    """onecoin's saved model (:mod:`crowdagg.methods.model_file`): per worker ``correct`` (expected correct
    answers) and ``answers`` (n_workers,), and the ``accuracy`` the M-step made of them.

    A warm start adds, to every M-step's expected counts, matrices whose
    trace is the correct answers and whose total is the answers (all a
    one-coin M-step reads).  A ``ds`` model converts: the trace and the total
    of each worker's counts.
    """

    method = "onecoin"
    fields = (Field("correct", "counts"), Field("answers", "counts"), Field("accuracy", "probabilities"))
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


def one_coin_spread(model: WorkerModel, order: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, ...]:
    """A one-coin model's workers ``rows`` as matrices would hold them: (correct, wrong per other class, share).

    ``correct`` and ``wrong`` (len(rows),): the correct answers and the
    wrong ones spread evenly over the model's other K - 1 classes; ``share``
    (len(order),): each kept class's share of the model's class counts (by
    which both spread over the true classes; uniform without counts).
    """
    correct, answers = model["correct"][rows], model["answers"][rows]
    k_model = len(model["classes"])
    total = model["class_counts"].sum()
    share = model["class_counts"][order] / total if total > 0 else np.full(len(order), 1.0 / k_model)
    return correct, (answers - correct) / max(k_model - 1, 1), share


class DawidSkene(IterativeAggregator):
    __doc__ = __doc__
    name = "ds"
    _m_step: MStep = staticmethod(full_m_step)  # type: ignore[assignment]
    _model: Any = None
    collapse_advice = f"try mv, or ds with {param('smoothing')} 1 (pseudo-counts that keep rare classes alive)"
    memory_advice = "its tables grow with workers × classes²: use mv or wmv, or fewer classes"
    saved_form: SavedForm = DawidSkeneForm()

    def memory_needed(self, data: AnnotationSet) -> tuple[float, str]:
        need, what = em_memory(data)
        need *= 2 if getattr(self, "n_init", 1) > 1 else 1  # the best start is kept beside the next
        if self._model is not None:
            from ..model_file import WarmStart

            need += WarmStart.memory(data, self._model, self.name)
        return need, what

    def _prepare(self, data: AnnotationSet, max_memory: Any) -> None:
        """Read and check the saved worker model (its parse is bounded by ``max_memory``)."""
        from ..model_file import coerce

        self._model = None if self.init_workers is None else coerce(self.init_workers, max_memory)

    def _start(
        self, data: AnnotationSet, checked: dict[str, Any], start: int, rng: np.random.Generator
    ) -> tuple[EMState, float]:
        if start == 0:
            from ..model_file import WarmStart

            self._clamp = gold_clamp(data, self.gold)
            # Every start adds the same pseudo-counts: they are a prior, not a starting point.
            self._warm = None if self._model is None else WarmStart(self._model, data, self.name)
        state = EMState(data, starting_posteriors(data, start, rng), self._clamp, type(self)._m_step,
                        checked["smoothing"], self._warm)
        return state, state.objective

    def _step(self, data: AnnotationSet, state: EMState, checked: dict[str, Any]) -> float:
        return state.iterate()

    def _not_converged(self, checked: dict[str, Any]) -> str:
        return (
            f"{self.name}: EM did not converge in {param('max_iter')}={checked['max_iter']} iterations "
            f"(relative log-likelihood change still above {param('tol')}={checked['tol']:g}); "
            f"raise {param('max_iter')} or loosen {param('tol')}"
        )

    def _finish(self, data: AnnotationSet, run: Run, checked: dict[str, Any]) -> AggregationResult:
        state: EMState = run.state
        post, confusion = state.ws.post.copy(), state.confusion
        labels = argmax_random_ties(post, TieBreaker(data.tasks, checked["seed"]), atol=1e-12)
        # onecoin's parameter is the accuracy; its matrices (already made by the M-step) are kept for reports.
        onecoin = self.name == "onecoin"
        worker_params = {"accuracy": np.diagonal(confusion, axis1=1, axis2=2)[:, 0].copy()} if onecoin else {
            "confusion": confusion}
        # The statistics behind those parameters, for a saved model (crowdagg.methods.model_file).
        counts: dict[str, Any] = {"class_counts": state.class_tot, "smoothing": float(checked["smoothing"])}
        if onecoin:
            counts["correct"] = np.trace(state.counts_ot, axis1=1, axis2=2).copy()
            counts["answers"] = state.counts_ot.sum(axis=(1, 2))
        else:
            counts["counts"] = np.ascontiguousarray(state.counts_ot.transpose(0, 2, 1))
        return make_result(
            self.name, data, post, labels, state.prior, worker_params=worker_params,
            confusion_array=confusion if onecoin else None, counts=counts,
            init_model=None if self._warm is None else self._warm.model,
            n_iter=run.n_iter, converged=run.converged, objective=np.asarray(run.trace), objective_name="log-likelihood",
        )


class OneCoinDawidSkene(DawidSkene):
    __doc__ = __doc__
    name = "onecoin"
    _m_step = staticmethod(one_coin_m_step)  # type: ignore[assignment]
    collapse_advice = IterativeAggregator.collapse_advice  # the base's "try ds", not the advice ds gives itself
    saved_form = OneCoinForm()

