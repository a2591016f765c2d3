r"""Minimax conditional entropy (categorical form): a worker matrix and a task matrix bend every answer.

Model (Zhou, Liu, Platt & Meek, ICML 2014, the categorical form of the
minimax conditional entropy principle of Zhou, Basu, Mao & Platt, NIPS
2012): worker :math:`j`'s answer on task :math:`i` of true class :math:`k`
is :math:`l` with probability

.. math:: P(l \mid k, i, j) = \frac{\exp(\sigma_j[k, l] + \tau_i[k, l])}{\sum_{l'} \exp(\sigma_j[k, l'] + \tau_i[k, l'])},

the maximum-entropy distribution matching the worker's and the task's
expected confusion counts; the minimax dual is this likelihood with an L2
penalty on the multipliers, :math:`\frac{\lambda_w}{2}\sum_j \lVert\sigma_j\rVert^2 +
\frac{\lambda_t}{2}\sum_i \lVert\tau_i\rVert^2` (the regularised form:
the moment constraints relaxed), under a uniform class prior.

Inference alternates, from the vote shares :math:`q_i` and
:math:`\sigma = \tau = 0`: each worker's :math:`\sigma_j` minimising
:math:`-\sum_{i} \sum_k q_i(k) \log P(l_{ij} \mid k, i, j) + \frac{\lambda_w}{2}\lVert\sigma_j\rVert^2`
over its answers, then each task's :math:`\tau_i` likewise with
:math:`\lambda_t` (each a K × K convex problem, solved by at most
``inner_iter`` L-BFGS iterations from its last value:
:func:`crowdagg.kernels.entropy._solve_groups`), then the posteriors
:math:`q_i(k) \propto \prod_j P(l_{ij} \mid k, i, j)`
(:func:`crowdagg.kernels.entropy._e_step`), until no posterior entry
moves by more than ``tol`` in an iteration, or ``max_iter`` iterations.

Defaults are the authors' (``MinimaxEntropy_crowd_model.m`` with the
settings of their demo, which Ibrahim, Fu, Kargas & Huang's NeurIPS 2019
comparisons use): :math:`\lambda_w = 0.25 K^2`, :math:`\lambda_t =
\lambda_w \cdot \bar d_{\text{worker}} / \bar d_{\text{task}}` (the mean
answers per worker over the mean per task), 50 iterations at most, TOL
5e-3 on the largest posterior change; the M-step's L-BFGS (minFunc in
theirs) at most 25 iterations with optTol = progTol = 1e-3.  Ours stops
each inner problem as minFunc does but searches its steps by Armijo
backtracking (minFunc: a Wolfe search), so figures can differ from theirs
in the last digits where the 25 iterations end short of the optimum.

The model's classes are those the answers give (the authors'
``LabelDomain``, the labels present): a class no answer gives is outside
it -- posterior 0, prior 0 -- since nothing in the answers could tell it
from the others (fitted with it, the uniform prior and the symmetric
penalty let every task drift towards it).

Outputs: the posteriors :math:`q` (n_tasks, K) (a task without answers:
the uniform prior over the model's classes); ``worker_params["sigma"]`` (n_workers, K, K) and
``task_params["tau"]`` (n_tasks, K, K); the worker's confusion is its
:math:`\mathrm{softmax}_l \sigma_j[k, :]` -- its answers on a task of no
task effect (:math:`\tau = 0`, the regulariser's centre) (entries of a
class outside the model: 0 in σ and τ; never answered in the confusion,
and a true class outside it answers uniformly over the model's classes).  A worker
without answers keeps :math:`\sigma = 0`: uniform rows.

Cost: each outer iteration O(inner_iter × L × K²) (each L-BFGS iteration
evaluates its group's answers once or a few times); memory: the task
matrices, n_tasks × K² floats.  Local engine only (the per-task matrices
are state that crosses iterations).

References: D. Zhou, S. Basu, Y. Mao and J. Platt, "Learning from the
wisdom of crowds by minimax entropy", NIPS 2012; D. Zhou, Q. Liu, J. Platt
and C. Meek, "Aggregating ordinal labels from crowds by minimax
conditional entropy", ICML 2014; S. Ibrahim, X. Fu, N. Kargas and K.
Huang, "Crowdsourcing via pairwise co-occurrences: identifiability and
algorithms", NeurIPS 2019 (the re-runs).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from ...core.checks import check_float, check_int
from ...data.annotations import AnnotationSet, check_annotations
from ...errors import CrowdaggWarning, DataError, param, warn
from ...kernels.validate import as_float_array
from ..base import FitContext, IterativeAggregator, make_result
from ..blocks import TieBreaker, argmax_random_ties, soft_majority_vote, softmax_rows
from ..loop import NO_OBJECTIVE, Residual, Run, Step, StopRule
from ..result import AggregationResult


def regularisers(data: AnnotationSet, worker_reg: float, task_reg: float, k: int) -> tuple[float, float]:
    r"""(λ_worker, λ_task): :math:`\lambda_w = ` ``worker_reg`` :math:`K^2` (``k``: the classes fitted),
    :math:`\lambda_t = ` ``task_reg`` :math:`\lambda_w \bar d_w / \bar d_t`, the mean answers per worker over
    the mean per task (= n_tasks / n_workers: both means are of the same answers)."""
    check_annotations(data, "regularisers(data, ...)")
    worker_reg, task_reg = check_float("worker_reg", worker_reg), check_float("task_reg", task_reg)
    k = check_int("k", k, 1)
    lam_w = worker_reg * k ** 2
    return lam_w, task_reg * lam_w * data.n_tasks / max(data.n_workers, 1)


@dataclass
class MinimaxState:
    """One run over the model's classes (``used`` (K,) bool, K' of them: :func:`label_domain`): the worker
    matrices ``sigma`` (n_workers, K', K'), the task matrices ``tau`` (n_tasks, K', K') and the posteriors
    ``post`` (n_tasks, K'), updated in place; ``label`` (L,) the answers as codes of the domain; ``capped``
    counts the M-step problems that used every inner iteration, of ``solves``."""

    sigma: np.ndarray
    tau: np.ndarray
    post: np.ndarray
    used: np.ndarray
    label: np.ndarray
    capped: int = 0
    solves: int = 0


class MinimaxEntropy(IterativeAggregator):
    __doc__ = __doc__
    name = "minimax"
    stop_rule: ClassVar[StopRule] = Residual("posteriors")
    objective_direction = NO_OBJECTIVE
    task_param_names: ClassVar[tuple[str, ...]] = ()
    empty_posterior = "uniform (the model's class prior)"
    memory_advice = "its task matrices are tasks × classes²: use fewer classes, or ds"

    def memory_needed(self, data: AnnotationSet) -> tuple[float, str]:
        """The task and worker matrices (kept, and the result's copies), the posteriors, the index arrays."""
        n, w, k = data.n_tasks, data.n_workers, data.n_classes
        need = 8.0 * (2 * (n + w) * k * k + 4 * n * k + 2 * data.n_answers)
        return need, f"{n:,} tasks × {k:,}² classes, {w:,} workers"

    def _start(self, data: AnnotationSet, checked: FitContext, start: int,
               rng: np.random.Generator) -> tuple[MinimaxState, None]:
        used = label_domain(data)
        n, w, k = data.n_tasks, data.n_workers, int(used.sum())
        post = np.ascontiguousarray(soft_majority_vote(data)[:, used], dtype=np.float64)
        label = np.cumsum(used)[data.label] - 1  # the answers' classes as codes of the domain
        return MinimaxState(np.zeros((w, k, k)), np.zeros((n, k, k)), post, used, label), None

    def _step(self, data: AnnotationSet, state: MinimaxState, checked: FitContext) -> Step:
        """The workers' matrices, then the tasks', then the E-step; the largest change of a posterior entry."""
        from ...kernels.entropy import _e_step

        lam_w, lam_t = regularisers(data, checked["worker_reg"], checked["task_reg"], int(state.used.sum()))
        inner, tol = checked["inner_iter"], checked["inner_tol"]
        task, worker, label = data.task, data.worker, state.label
        state.capped += _solve_all(data.worker_ptr, (data.worker_order, task, task, label, state.sigma, state.tau,
                                                     state.post, np.full(data.n_workers, lam_w), inner, tol, tol))
        state.capped += _solve_all(data.task_ptr, (_identity(data.n_answers), worker, task, label, state.tau,
                                                   state.sigma, state.post, np.full(data.n_tasks, lam_t), inner, tol,
                                                   tol))
        state.solves += data.n_workers + data.n_tasks
        return Step(residual=float(_e_step(data.task_ptr, worker, label, state.sigma, state.tau, state.post)))

    def _finish(self, data: AnnotationSet, run: Run, checked: FitContext) -> AggregationResult:
        state: MinimaxState = run.state
        used, k = state.used, data.n_classes
        post = np.zeros((data.n_tasks, k))
        post[:, used] = state.post
        prior = used / used.sum()
        labels = argmax_random_ties(post, TieBreaker(data.tasks, checked["seed"]), atol=1e-12)
        sigma, tau = _widen(state.sigma, used), _widen(state.tau, used)
        lam_w, lam_t = regularisers(data, checked["worker_reg"], checked["task_reg"], int(used.sum()))
        _warn_if_flat(data, state.post, lam_w, lam_t)
        fitted = state.sigma
        return make_result(
            self.name, data, post, labels, prior, lambda: worker_confusion(fitted, used),
            worker_params={"sigma": sigma}, task_params={"tau": tau},
            model_params={"lambda_worker": lam_w, "lambda_task": lam_t, "classes_fitted": used.copy(),
                          "inner_capped_share": state.capped / max(state.solves, 1)},
            n_iter=run.n_iter, converged=run.converged,
        )


#: A fit whose mean confidence exceeds chance by less than this share of the vote's excess has fallen flat.
FLAT_SHARE = 0.1


def flatness(data: AnnotationSet, post: np.ndarray) -> float:
    """How far the posteriors (n_tasks, K') stand above chance, as a share of how far the vote shares do: the
    mean over the answered tasks of (max posterior - 1/K') over that of (max vote share - 1/K'); 1 when the
    vote itself is at chance."""
    check_annotations(data, "flatness(data, post)")
    post = as_float_array(post, "flatness: post (n_tasks, K')", 2)
    if post.shape[0] != data.n_tasks or post.shape[1] < 1:
        raise DataError(f"flatness: post has shape {post.shape}, the data has {data.n_tasks:,} tasks")
    answered = data.answers_per_task > 0
    chance = 1.0 / post.shape[1]
    vote = soft_majority_vote(data)[answered].max(axis=1).mean() - chance if answered.any() else 0.0
    if vote <= 0:
        return 1.0
    return float((post[answered].max(axis=1).mean() - chance) / vote)


def _warn_if_flat(data: AnnotationSet, post: np.ndarray, lam_w: float, lam_t: float) -> None:
    """Warn when the fit ended at the model's uniform fixed point (posteriors at 1/K', every σ row alike, the
    labels near-ties): the penalties outweighed the answers.

    The authors' defaults end there on labelme (K = 8) and music (K = 10), where each row of a worker's
    matrix rests on about a tenth of its 30 to 70 answers against λ_worker = 16 or 25 (accuracy .28 and .52;
    a smaller ``worker_reg`` escapes it); every other real set stands at .79 of the vote's excess or more.
    """
    share = flatness(data, post)
    if share < FLAT_SHARE:
        warn(CrowdaggWarning(
            f"minimax: the fit fell to its uniform fixed point (posteriors {share:.0%} as far above chance as the "
            f"vote's; the labels rest on near-ties): the penalties λ_worker = {lam_w:g}, λ_task = {lam_t:g} outweigh "
            f"{data.n_answers / max(data.n_workers, 1):.0f} answers a worker over {post.shape[1]} classes; lower "
            f"{param('worker_reg')} (the authors' demo picks it by held-out likelihood among 2^-2..2^2 × its "
            f"default), or use ds"
        ))


def label_domain(data: AnnotationSet) -> np.ndarray:
    """The classes the model is fitted on, (K,) bool: those some answer gives (the authors' ``LabelDomain``);
    every class when no answer gives any."""
    check_annotations(data, "label_domain(data)")
    used = data.answers_per_class > 0
    return used if used.any() else np.ones(data.n_classes, dtype=bool)


def _widen(matrices: np.ndarray, used: np.ndarray) -> np.ndarray:
    """(n, K', K') matrices over the domain as (n, K, K), 0 for the classes outside it (not fitted)."""
    k = used.shape[0]
    out = np.zeros((matrices.shape[0], k, k))
    idx = np.flatnonzero(used)
    out[:, idx[:, None], idx[None, :]] = matrices
    return out


def worker_confusion(sigma: np.ndarray, used: np.ndarray) -> np.ndarray:
    """confusion[w, true, observed] (n_workers, K, K) of the fitted σ (n_workers, K', K'): the softmax of its rows
    over the domain (a task of no task effect, τ = 0); a class outside the domain is never answered (0), and a
    true class outside it -- of which the answers say nothing -- answers uniformly over the domain."""
    used = np.asarray(used)
    sigma = as_float_array(sigma, "worker_confusion: sigma (n_workers, K', K')", 3)
    if used.ndim != 1 or used.dtype != np.bool_ or sigma.shape[1:] != (int(used.sum()),) * 2:
        raise DataError(f"worker_confusion takes sigma (n_workers, K', K') and used, a (K,) bool mask of K' "
                        f"classes (label_domain); got shapes {sigma.shape} and {used.shape} ({used.dtype})")
    k, kd = used.shape[0], sigma.shape[1]
    idx = np.flatnonzero(used)
    conf = np.zeros((sigma.shape[0], k, k))
    conf[:, :, idx] = 1.0 / kd
    conf[:, idx[:, None], idx[None, :]] = softmax_rows(sigma.reshape(-1, kd)).reshape(sigma.shape)
    return conf


#: Answers a thread's share of an M-step takes at least (fewer answers: fewer threads).
MIN_THREAD_ANSWERS = 20_000


def _solve_all(ptr: np.ndarray, args: tuple[Any, ...]) -> int:
    """One M-step side: :func:`crowdagg.kernels.entropy._solve_groups` over every group (``ptr`` (n_groups + 1,)
    their answers' offsets; ``args`` the kernel's other arguments), the groups cut into runs of about equal
    answers, one a thread (each group's solve alone: the same bits for any thread count).  Returns how many
    groups used every inner iteration."""
    from ...core import threads
    from ...engine.local import run_each
    from ...kernels.entropy import _solve_groups

    n_groups = len(ptr) - 1
    n = max(1, min(threads.count(), int(ptr[-1]) // MIN_THREAD_ANSWERS, n_groups))
    cuts = np.searchsorted(ptr, np.linspace(0, ptr[-1], n + 1)[1:-1]).tolist()
    bounds = [0, *cuts, n_groups]
    solve: Any = _solve_groups  # (numba's Dispatcher types its call as taking no arguments)
    return sum(run_each(lambda i: solve(ptr, *args, bounds[i], bounds[i + 1]), n))


def _identity(n: int) -> np.ndarray:
    """The answers' indices in task order, (n,) int64: the task groups' ``edge`` array."""
    return np.arange(n, dtype=np.int64)


__all__ = ["MinimaxEntropy", "MinimaxState", "flatness", "label_domain", "regularisers", "worker_confusion"]
