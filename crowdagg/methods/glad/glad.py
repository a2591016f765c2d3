r"""GLAD: one ability per worker, one difficulty per task, EM with an L-BFGS-B M-step.

Model (Whitehill, Ruvolo, Wu, Bergsma & Movellan, "Whose vote should count
more: optimal integration of labels from labelers of unknown expertise",
NIPS 2009, in its multiclass form): the true class :math:`y_n \sim d`;
worker :math:`m` has an ability :math:`\alpha_m \in \mathbb{R}` (0: chance,
negative: worse than chance) and task :math:`n` a parameter
:math:`\beta_n > 0` -- :math:`1/\beta_n` is its difficulty -- and

.. math:: P(\tilde y_n^{(m)} = y_n) = \sigma(\alpha_m \beta_n), \qquad
          P(\tilde y_n^{(m)} = k') = \frac{1 - \sigma(\alpha_m \beta_n)}{K - 1} \quad (k' \ne y_n).

Priors as in the authors' code: :math:`\alpha_m \sim N(\mu_\alpha, 1)` and
:math:`b_n = \log\beta_n \sim N(\mu_b, 1)`, both means 1
(``alpha_mean``, ``log_beta_mean``); the parameters start at the means.

EM maximises the log-posterior
:math:`\sum_n \log \sum_k d_k \prod_m P(\tilde y_n^{(m)} \mid k) + \log p(\alpha) + \log p(b)`:

* E-step: :math:`q_n(k) \propto d_k \prod_{m} P(\tilde y_n^{(m)} \mid k)`
  (:func:`crowdagg.kernels.glad.e_step_block` on the fit's engine, O(answers + tasks K));
* M-step: scipy's L-BFGS-B over all :math:`\alpha` and :math:`b` at once,
  maximising the expected complete-data log-likelihood
  :math:`\sum_e q_e \log\sigma(z_e) + (1 - q_e)(\log(1 - \sigma(z_e)) - \log(K-1))`
  (:math:`q_e` the posterior of answer e's own label) plus the
  log-priors, with its analytic gradient (the kernels; one pass over the
  answers per evaluation, warm-started from the previous parameters).

The class prior :math:`d` stays uniform by default, as in the authors'
code and crowd-kit: re-estimating it (``prior=estimate``, :math:`d_k
\propto \sum_n q_n(k)`) lets EM run to the majority class on unbalanced
data (bluebird, web).  EM starts from soft majority vote (``init``), stops
when the relative change of the log-posterior falls below ``tol``, and
ends on an E-step.  Gold labels clamp their tasks' posteriors; restarts
(``n_init``) blend the start with seeded noise.

**A saved model is a prior.**  ``--save-workers`` records each worker's
ability :math:`\hat\alpha_m` and the curvature of the fit's objective there,
:math:`h_m = -\partial^2 / \partial\alpha_m^2` = the prior's precision +
:math:`\sum_{e \in m} \beta^2 \sigma(z_e)(1 - \sigma(z_e))` (at the final
posteriors); a warm start (``init_workers``) replaces a known worker's
prior with :math:`N(\hat\alpha_m, 1/h_m)` -- a Laplace approximation of
what the earlier batch said -- so that evidence accumulates across batches
as counts do for Dawid--Skene.

Shapes: ``worker_params["alpha"]`` (n_workers,), ``task_params["beta"]``
(n_tasks,) (β itself, 1/β the difficulty; a task without answers keeps the
prior's :math:`e^{\mu_b}`), ``prior`` (K,), posteriors (n_tasks, K).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
from scipy.optimize import minimize  # (at import: the fit's BLAS limit then covers scipy's BLAS, crowdagg.core.threads)

from ...data.annotations import AnnotationSet
from ...errors import DataError, param
from ..base import FitContext, IterativeAggregator, make_result
from ..blocks import TieBreaker, argmax_random_ties, clamp_posteriors, prior_m_step
from ..loop import Run, Step
from ..model_file import Field, SavedForm, WorkerModel
from ..starts import starting_posteriors

if TYPE_CHECKING:  # pragma: no cover
    from ...kernels.glad import Posteriors
    from ..result import AggregationResult

_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)
#: scipy's default relative-reduction tolerance of L-BFGS-B (factr 1e7 × machine epsilon), the M-step's floor.
_LBFGSB_FTOL = 1e7 * np.finfo(float).eps
#: The largest saved ability a warm start takes.  A fit's abilities stay within a few units of their prior's
#: mean (itself within ±100); far beyond, α·β and α²σ(1 − σ) overflow the kernels.
MAX_ABILITY = 1e6
#: The largest saved curvature a warm start takes: a fit's is 1 + Σ β² σ(1 − σ) over a worker's answers, far
#: below this; far above it the prior term h (α − α̂)² drowns the M-step in the rounding of α (its line
#: search fails at once and every task's β stays at the prior's).
MAX_CURVATURE = 1e15


@dataclass
class GladState:
    """One EM start: the engine, the last E-step's posteriors (kept in the engine's blocks), the parameters and
    the priors on them.

    ``alpha`` (n_workers,), ``log_beta`` (n_tasks,), ``log_prior`` (K,);
    the abilities' prior is :math:`N(\text{mean}_m, 1/\text{precision}_m)`
    per worker (a saved model's for the workers it knows); ``class_tot``
    (K,) the expected class totals the last M-step read, a saved model's
    ``class_counts`` (``saved_class_counts``) included, as Dawid--Skene adds
    them.
    """

    engine: Any
    posteriors: Posteriors
    alpha: np.ndarray
    log_beta: np.ndarray
    log_prior: np.ndarray
    clamp: np.ndarray
    mean: np.ndarray
    precision: np.ndarray
    class_tot: np.ndarray
    saved_class_counts: np.ndarray
    iteration: int = 0


def log_priors(state: GladState, beta_mean: float) -> tuple[float, np.ndarray, np.ndarray]:
    """The log-densities of the priors at the state's parameters, and their gradients (n_workers,), (n_tasks,)."""
    da, db = state.alpha - state.mean, state.log_beta - beta_mean
    # numpy's own sums, not BLAS dot products: a BLAS sum's order follows its thread count.
    value = (0.5 * np.log(state.precision).sum() - 0.5 * float((state.precision * da * da).sum())
             - _HALF_LOG_2PI * (da.size + db.size) - 0.5 * float((db * db).sum()))
    return value, -state.precision * da, -db


def m_step(state: GladState, checked: FitContext) -> None:
    """α and log β by L-BFGS-B from the current ones, at the E-step's ``q``; the prior when estimated.

    L-BFGS-B runs in coordinates scaled by the square root of each
    parameter's curvature at the start (the diagonal of the Fisher
    information, priors included): a worker with thousands of answers and a
    task with three are then on one scale, and the optimiser needs tens of
    iterations instead of hundreds.  The optimum is the same.  It stops when
    an iteration improves the objective by less than a tenth of EM's
    ``tol`` (relative; scipy's default when ``tol`` is 0), or after
    ``m_step_max_iter`` iterations (recorded in the fit's
    ``checked.optimizer``; the base says it once per fit).
    """
    from ...kernels import glad as kernels

    engine, n_workers, beta_mean = state.engine, state.alpha.size, checked["log_beta_mean"]
    h_alpha, h_log_beta = kernels._curvatures(engine, state.alpha, state.log_beta)
    scale = 1.0 / np.sqrt(np.concatenate([h_alpha + state.precision, h_log_beta + 1.0]))

    def negative(y: np.ndarray) -> tuple[float, np.ndarray]:
        x = y * scale
        state.alpha, state.log_beta = x[:n_workers], x[n_workers:]
        f, g_alpha, g_log_beta = kernels._objective(engine, state.alpha, state.log_beta, state.posteriors)
        p, p_alpha, p_log_beta = log_priors(state, beta_mean)
        return -(f + p), -np.concatenate([g_alpha + p_alpha, g_log_beta + p_log_beta]) * scale

    y0 = np.concatenate([state.alpha, state.log_beta]) / scale
    # Solved to a tenth of the precision EM stops at (scipy's default when EM runs max_iter, tol 0).
    ftol = max(0.1 * checked.get("tol", 0.0), _LBFGSB_FTOL)
    res = minimize(negative, y0, jac=True, method="L-BFGS-B",
                   options={"maxiter": checked["m_step_max_iter"], "ftol": ftol})
    checked.optimizer("the M-step (abilities and difficulties)",
                      advice=f"raise {param('m_step_max_iter')}").record(res, state.iteration)
    x = res.x * scale
    state.alpha, state.log_beta = x[:n_workers].copy(), x[n_workers:].copy()
    state.class_tot = state.posteriors.class_total + state.saved_class_counts
    if checked["prior"] == "estimate":
        state.log_prior = np.log(prior_m_step(state.class_tot, 0.0))


def e_step(state: GladState, checked: FitContext) -> float:
    """Posteriors (``state.posteriors``: each block's posteriors and ``q``) of the current parameters; returns the
    log-posterior."""
    from ...kernels.glad import _e_step

    state.posteriors = _e_step(state.engine, state.alpha, state.log_beta, state.log_prior, state.clamp)
    return state.posteriors.loglik + log_priors(state, checked["log_beta_mean"])[0]


# ----------------------------------------------------------------------------- the saved model
class GladForm(SavedForm):
    """glad's saved model (:mod:`crowdagg.methods.model_file`): per worker the ability ``alpha`` and the
    ``curvature`` of the fit's objective there (the precision of what the fit learnt of it, prior included).

    A warm start takes ``N(alpha, 1/curvature)`` as a known worker's prior
    (:meth:`pseudo_counts` gives its natural parameters, ``(curvature ×
    alpha, curvature)`` per worker, zero for unknown workers).  The
    envelope's ``class_counts`` are the expected class totals with
    ``prior=estimate``; a uniform prior records its total split evenly over
    the classes, the counts that prior stands for, so ``prior`` follows
    from ``class_counts`` in both.  The abilities do not depend on the
    classes, but the warm start reads ``class_counts`` class by class: a
    model without one of the data's classes is refused (name every class
    with ``classes`` when saving), and classes the data lacks are left out
    with a warning.
    """

    method = "glad"
    fields = (Field("alpha", "numbers"), Field("curvature", "numbers"))

    def from_result(self, result: AggregationResult) -> dict[str, np.ndarray]:
        return {"alpha": result.worker_params["alpha"], "curvature": result.counts["curvature"]}

    def parameters(self, stats: dict[str, np.ndarray], smoothing: float, k: int) -> dict[str, np.ndarray]:
        return {}  # nothing derived: the ability is the model

    def prior(self, class_counts: np.ndarray, smoothing: float) -> np.ndarray:
        return prior_m_step(class_counts, smoothing)

    def check(self, model: WorkerModel, display: str) -> None:
        alpha, curvature = model["alpha"], model["curvature"]
        flat = np.flatnonzero(np.abs(alpha) > MAX_ABILITY)
        if flat.size:
            i = int(flat[0])
            raise DataError(f"{display}: alpha[{i}] is {float(alpha[i])!r}, not an ability (|alpha| <= "
                            f"{MAX_ABILITY:g}: a fit's lie within a few units of the prior's mean)")
        flat = np.flatnonzero((curvature <= 0) | (curvature > MAX_CURVATURE))
        if flat.size:
            i = int(flat[0])
            why = "> 0: the prior alone gives 1" if curvature[i] <= 0 else \
                f"{MAX_CURVATURE:g} at most: a fit's is 1 + the answers' information"
            raise DataError(f"{display}: curvature[{i}] is {float(curvature[i])!r}, not a precision ({why})")

    def convert(self, model: WorkerModel, order: np.ndarray, rows: np.ndarray) -> dict[str, np.ndarray]:
        return {"alpha": model["alpha"][rows].copy(), "curvature": model["curvature"][rows].copy()}

    def pseudo_counts(self, stats: dict[str, np.ndarray], known: np.ndarray, k: int) -> np.ndarray:
        pseudo = np.zeros((known.size, 2))
        pseudo[known, 0] = stats["curvature"] * stats["alpha"]
        pseudo[known, 1] = stats["curvature"]
        return pseudo

    def memory(self, n_workers: int, k: int, k_model: int) -> float:
        return 8.0 * 4 * n_workers


def glad_memory(data: AnnotationSet) -> tuple[float, str]:
    """Bytes a GLAD fit allocates: posteriors, per-answer floats (q), the reduction's per-worker partial sums
    (a stack of the tree's depth per thread), L-BFGS-B's history (10 pairs of vectors of workers + tasks)."""
    from ...core import threads
    from ...engine.grid import task_grid
    from ...engine.tree import depth

    n, w, k = data.n_tasks, data.n_workers, data.n_classes
    blocks = len(task_grid(data.task_ptr, w, k)) - 1
    partial = min(blocks, threads.count() * (depth(blocks) + 2))
    need = 8.0 * (3 * n * k + 2 * data.n_answers + partial * w + 30 * (w + n)) + 8.0 * data.n_answers
    return need, f"{data.n_answers:,} answers, {n:,} tasks × {k:,} classes, {w:,} workers"


class Glad(IterativeAggregator):
    __doc__ = __doc__
    name = "glad"
    loop_name = "EM"
    objective_name = "log-posterior"
    #: Its worker parameters are abilities; it starts from another method's posteriors, never its parameters.
    worker_form = "ability"
    starts_from: ClassVar[tuple[str, ...]] = ()
    saved_form: ClassVar[SavedForm] = GladForm()
    worker_param_names: ClassVar[tuple[str, ...]] = ("alpha",)
    task_param_names: ClassVar[tuple[str, ...]] = ("beta",)
    #: The engines it runs on: its M-step's L-BFGS-B makes ~25 map-reduce rounds per EM iteration with the
    #: per-task log β on the client, so it runs on the local engine only.
    engines: ClassVar[tuple[str, ...]] = ("local",)

    def memory_needed(self, data: AnnotationSet) -> tuple[float, str]:
        need, what = glad_memory(data)
        return need * (2 if getattr(self, "n_init", 1) > 1 else 1), what

    def _start(
        self, data: AnnotationSet, checked: FitContext, start: int, rng: np.random.Generator
    ) -> tuple[GladState, float]:
        from ...kernels.glad import _answer_posteriors

        k, w = data.n_classes, data.n_workers
        mean, precision = np.full(w, float(checked["alpha_mean"])), np.ones(w)
        if checked.warm is not None:  # a saved model's workers: N(alpha, 1/curvature)
            natural = checked.warm.pseudo
            known = natural[:, 1] > 0
            precision[known] = natural[known, 1]
            mean[known] = natural[known, 0] / natural[known, 1]
        clamp = checked.clamp if checked.clamp is not None else np.full(data.n_tasks, -1, dtype=np.int64)
        first = None if checked.start is None else checked.start.posterior
        post = clamp_posteriors(starting_posteriors(data, start, rng, first, checked.engine), clamp)
        state = GladState(checked.engine, _answer_posteriors(checked.engine, post), mean.copy(), np.full(data.n_tasks, float(checked["log_beta_mean"])),
                          np.full(k, -math.log(k)), clamp, mean, precision, np.zeros(k),
                          np.zeros(k) if checked.warm is None else checked.warm.class_counts)
        return state, self._iterate(state, checked)

    def _iterate(self, state: GladState, checked: FitContext) -> float:
        m_step(state, checked)
        return e_step(state, checked)

    def _step(self, data: AnnotationSet, state: GladState, checked: FitContext) -> Step:
        state.iteration += 1
        return Step(objective=self._iterate(state, checked))

    def _finish(self, data: AnnotationSet, run: Run, checked: FitContext) -> AggregationResult:
        state: GladState = run.state
        from ...kernels.glad import _curvatures

        post = state.posteriors.post.copy()
        labels = argmax_random_ties(post, TieBreaker(data.tasks, checked["seed"]), atol=1e-12)
        prior = np.exp(state.log_prior)
        curvature = state.precision + _curvatures(checked.engine, state.alpha, state.log_beta)[0]
        class_counts = state.class_tot if checked["prior"] == "estimate" else \
            np.full(data.n_classes, state.class_tot.sum() / data.n_classes)
        counts = {"class_counts": class_counts, "smoothing": 0.0, "curvature": curvature}
        return make_result(
            self.name, data, post, labels, prior / prior.sum(),
            worker_params={"alpha": state.alpha.copy()}, task_params={"beta": np.exp(state.log_beta)},
            counts=counts,  # (a warm start's model: the base carries it into the result)
        )


__all__ = ["Glad", "GladForm", "GladState", "glad_memory", "log_priors", "m_step", "e_step"]
