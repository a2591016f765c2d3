r"""Dawid--Skene EM: a full confusion matrix per worker (and the EM engine :mod:`.onecoin` shares).

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

EM starts from soft majority vote (one M-step on the vote shares), then
iterate M-step + E-step with the fused E/M kernel of :mod:`crowdagg.kernels`
(O(L K) per iteration), and stop when the relative change of the
observed-data log-likelihood falls below ``tol`` (1e-6) or after
``max_iter`` (200) iterations (``tol=0`` runs exactly ``max_iter``).  The
result ends on an E-step: its posteriors are those of its parameters.
Gold labels, when given, clamp those tasks' posteriors to one-hot
(semi-supervised DS; the base resolves the clamp, :class:`~crowdagg.methods.base.FitContext`) in every E-step, so they also shape the confusion
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

from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np

from ...data.annotations import AnnotationSet
from ...errors import param
from ...kernels.em import EMParams, em_block
from ..base import PRODUCT, FitContext, IterativeAggregator, make_result
from ..blocks import TieBreaker, argmax_random_ties, full_m_step, one_coin_spread, prior_m_step
from ..loop import Run
from ..model_file import Field, SavedForm, WorkerModel
from ..result import AggregationResult
from ..starts import starting_posteriors

__all__ = ["DawidSkene", "DawidSkeneForm", "EMState", "em_memory", "model_parameters", "starting_posteriors"]

MStep = Callable[[np.ndarray, np.ndarray, float], "tuple[np.ndarray, np.ndarray]"]


class EMState:
    """The state of one EM start: its engine, the current parameters, the statistics of the last pass, the clamp.

    Every pass over the answers is one ``engine.map_reduce`` of
    :func:`~crowdagg.kernels.em.em_block` (an E-step fused with the expected
    counts of its posteriors); between passes the state holds only
    parameters and statistics (workers × K² floats), never the answers or
    the posteriors, so any engine of :mod:`crowdagg.engine` runs it.  The
    posteriors are made once, at the end (:meth:`posteriors`).

    ``start``: the first statistics' posteriors over all tasks (another
    method's, a restart's blend), or None for the soft majority vote,
    counted inside the blocks; ``params`` (prior, conf_ot) instead starts
    from parameters.  ``clamp`` (n_tasks,) is the gold (-1 free), or None.
    ``warm`` (a :class:`~crowdagg.methods.model_file.WarmStart`) adds a saved
    model's counts to the expected counts of every M-step (pseudo-counts:
    evidence from an earlier batch).  ``counts_ot`` and ``class_tot`` are the
    statistics the current parameters were estimated from (what a saved
    model records).
    """

    def __init__(
        self, engine: Any, start: np.ndarray | None, clamp: np.ndarray | None, m_step: MStep, smoothing: float,
        warm: Any = None, params: tuple[np.ndarray, np.ndarray] | None = None,
    ):
        self.engine = engine
        self.clamp = None if clamp is None or not (clamp >= 0).any() else clamp
        self.m_step = m_step
        self.smoothing = smoothing
        self.warm = warm
        if params is not None:  # start from parameters (prior, conf_ot): an E-step gives the posteriors
            self.prior, self.conf_ot = params
            self.objective = self.e_step()
        else:  # start from posteriors (given, or the soft vote): an M-step on their statistics, then the E-step
            (counts, tot, _), _ = engine.map_reduce(em_block, EMParams(post=start, clamp=self.clamp))
            self._stats = counts, tot
            self.objective = self.iterate()

    def _e_params(self) -> EMParams:
        return EMParams(np.log(self.prior), np.log(self.conf_ot), clamp=self.clamp)  # the kernel clamps

    def e_step(self) -> float:
        """The E-step of the current parameters and the statistics of its posteriors; its log-likelihood."""
        (counts, tot, loglik), _ = self.engine.map_reduce(em_block, self._e_params())
        self._stats = counts, tot
        return float(loglik)

    def iterate(self) -> float:
        """One M-step on the last pass's statistics, then the E-step: the log-likelihood of the new parameters."""
        counts, tot = self._stats
        if self.warm is not None:
            counts, tot = counts + self.warm.counts_ot, tot + self.warm.class_counts
        self.counts_ot, self.class_tot = counts, tot  # (the reduction's fresh arrays: the next pass makes new ones)
        self.prior, self.conf_ot = self.m_step(counts, tot, self.smoothing)
        return self.e_step()

    def posteriors(self) -> np.ndarray:
        """The current parameters' posteriors (n_tasks, K): their E-step again, its blocks' rows kept and joined.

        The same arithmetic per task as the E-step that scored them, so the
        same bits; one pass more per fit instead of a posterior buffer
        written by every iteration.
        """
        _, outs = self.engine.map_reduce(em_block, self._e_params(), keep=True)
        return np.asarray(self.engine.gather(outs))

    @property
    def confusion(self) -> np.ndarray:
        """confusion[w, true, observed], shape (n_workers, K, K)."""
        return np.ascontiguousarray(self.conf_ot.transpose(0, 2, 1))


def model_parameters(result: AggregationResult) -> tuple[np.ndarray, np.ndarray]:
    """A fitted confusion model's (prior (K,), conf_ot (n_workers, K_observed, K_true)): where EM starts from it."""
    prior = np.ascontiguousarray(result.prior, dtype=np.float64)
    return prior, np.ascontiguousarray(np.asarray(result.confusion, dtype=np.float64).transpose(0, 2, 1))


def em_memory(data: AnnotationSet) -> tuple[float, str]:
    """Bytes an EM fit allocates: posteriors, the count tensors alive in a pass, M-step temporaries, the cells.

    A pass holds, per thread, the reduction tree's stack of partial sums
    (at most depth + 1, the depth log₂ of the blocks, :mod:`crowdagg.engine.tree`)
    and the block being filled -- O(log n) accumulators of workers × K²
    floats, never one per block; the posteriors (tasks × K) are made
    once, at the end, beside a start's given ones.  The kernel reads the
    answers' worker and label codes in place (no per-answer array).
    """
    from ...core import threads
    from ...engine.grid import answers_per_block, block_count
    from ...engine.tree import depth

    n, w, k = data.n_tasks, data.n_workers, data.n_classes
    n_blocks = block_count(data.n_answers, max(n, 1), answers_per_block(w, k))
    live = min(threads.count(), n_blocks) * (depth(n_blocks) + 2)
    need = 8.0 * (3 * n * k + (live + 6) * w * k * k)
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
    fields = (Field("counts", "counts", _MATRIX_AXES),
              Field("confusion", "probabilities", _MATRIX_AXES, sums=True, derived=True))
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


class DawidSkene(IterativeAggregator):
    __doc__ = __doc__
    name = "ds"
    _m_step: MStep = staticmethod(full_m_step)  # type: ignore[assignment]
    loop_name = "EM"
    #: Its posteriors are the E-step's π_k Π θ_w[k, l] (the base says what that serves).
    posterior_form = PRODUCT
    objective_name = "log-likelihood"
    #: Its worker parameters are full confusion matrices; it can start from a confusion or a one-coin model's.
    worker_form = "confusion"
    starts_from: ClassVar[tuple[str, ...]] = ("confusion", "one-coin")
    collapse_advice = f"try mv, or ds with {param('smoothing')} 1 (pseudo-counts that keep rare classes alive)"
    memory_advice = "its tables grow with workers × classes²: use mv or wmv, or fewer classes"
    #: What it saves (--save-workers) and how saved counts enter its fit (--init-workers).
    saved_form: ClassVar[SavedForm] = DawidSkeneForm()

    def memory_needed(self, data: AnnotationSet) -> tuple[float, str]:
        need, what = em_memory(data)
        if getattr(self, "n_init", 1) > 1:  # the best start's tables (parameters, statistics) kept beside the next
            need += 8.0 * 4 * data.n_workers * data.n_classes ** 2
        return need, what  # (the base adds a saved model's counts)

    def _start(
        self, data: AnnotationSet, checked: FitContext, start: int, rng: np.random.Generator
    ) -> tuple[EMState, float]:
        # The base resolves both for a declaration with gold=True and init (without them: no gold, soft vote).
        begin = checked.start
        m_step, smoothing = type(self)._m_step, checked["smoothing"]
        if start == 0 and begin is not None and begin.model is not None:
            # another method's confusion model: its parameters, then an E-step
            state = EMState(checked.engine, None, checked.clamp, m_step, smoothing, checked.warm,
                            params=model_parameters(begin.model))
        else:
            # None: the soft vote, counted in the blocks (any engine); a restart's blend or another method's
            # posteriors are an array over all tasks (the local engine)
            given = checked.start_posterior(data, start, rng)
            state = EMState(checked.engine, given, checked.clamp, m_step, smoothing, checked.warm)
        return state, state.objective

    def worker_model(self, state: EMState, checked: FitContext) -> tuple[dict[str, Any], dict[str, Any], Any]:
        """The fitted worker parameters, the statistics behind them, and the confusion when it is not among them.

        Returns ``(worker_params, counts, confusion_array)`` for the result:
        ds's parameters are the confusion ``[w, true, observed]``; its
        counts (what a saved model records, :mod:`crowdagg.methods.model_file`)
        are the expected class totals and the expected answer counts
        ``[w, true, observed]``, pseudo-counts included.
        """
        counts = {"class_counts": state.class_tot, "smoothing": float(checked["smoothing"]),
                  "counts": np.ascontiguousarray(state.counts_ot.transpose(0, 2, 1))}
        return {"confusion": state.confusion}, counts, None

    def _finish(self, data: AnnotationSet, run: Run, checked: FitContext) -> AggregationResult:
        state: EMState = run.state
        post = state.posteriors()
        labels = argmax_random_ties(post, TieBreaker(data.tasks, checked["seed"]), atol=1e-12)
        worker_params, counts, confusion = self.worker_model(state, checked)
        return make_result(
            self.name, data, post, labels, state.prior, worker_params=worker_params,
            confusion_array=confusion, counts=counts,
            init_model=None if checked.warm is None else checked.warm.model,
            n_iter=run.n_iter, converged=run.converged, objective=np.asarray(run.trace), objective_name=self.objective_name,
        )
