r"""MACE: multi-annotator competence estimation, with crowd-kit 1.4.2's semantics.

Model (Hovy, Berg-Kirkpatrick, Vaswani & Hovy, "Learning whom to trust
with MACE", NAACL-HLT 2013, 1120--1130, aclanthology N13-1132).  A task's
true class :math:`y_t` is uniform over the K classes; on each answer
worker :math:`w` spams with probability :math:`1 - c_w`, then answering
from its own spam distribution :math:`\theta_w`, and otherwise gives the
truth:

.. math:: P(a \mid y_t = k) = (1 - c_w)\,\theta_w[a] + c_w\,[a = k].

Priors (``m_step=vb``, the default): :math:`(1 - c_w, c_w) \sim
\mathrm{Beta}(\alpha, \beta)` (``alpha`` the spamming pseudo-count,
``beta`` the competence one, both 0.5) and :math:`\theta_w \sim
\mathrm{Dir}(\text{strategy\_prior})` (10, the authors' and crowd-kit's).

Inference, as crowd-kit's ``MACE``:

* E-step (:func:`crowdagg.kernels.mace.e_step_block`, one fused pass per
  block of the engine): :math:`q_t(k) \propto \prod_e (s_w\theta_w[a_e] +
  c_w[a_e = k])` with the current weights, and each answer's expected
  spam (counted per worker and class answered, ``spam`` (n_workers, K))
  and competent (``know`` (n_workers,)) shares;
* M-step, variational Bayes: the weights the next E-step uses are
  :math:`\exp\mathbb{E}\log` under the Beta and Dirichlet posteriors
  (:func:`crowdagg.methods.variational.expected_log` of prior +
  expected counts; sub-normalised, as crowd-kit's ``spamming_`` and
  ``thetas_``); ``m_step=em``: the counts plus ``smoothing``/K,
  normalised (crowd-kit's ``method="em"``, whose smoothing is 0.01/K).

Each of ``n_init`` starts (crowd-kit's ``n_restarts``, 10) draws a
worker's two spamming weights and K spam-distribution weights from
:math:`U(1, 2 + \text{default\_noise})` and normalises them (what
crowd-kit's ``scipy.stats.uniform(1, 1 + default_noise)`` -- location
and *scale* -- draws), from uniforms keyed on the worker's *name* under
the start's seed (:mod:`crowdagg.kernels.draws`): the fit does not depend
on the answers' row order or the thread count.  Then an E-step, and
``max_iter`` (crowd-kit's ``n_iter``, 50) rounds of M-step and E-step;
``tol`` 0 runs them all, as crowd-kit does.  The start whose last
E-step has the highest log marginal likelihood
:math:`\sum_t \log \frac1K \sum_k \prod_e P(a_e \mid k)` is kept.

Where crowd-kit 1.4.2 differs (its bugs, not the model):

* its restarts all draw with the same ``random_state``, so its ten
  restarts are one start run ten times; ours are ten seeded starts;
* its M-step reads the spam counts of ``groupby(["worker", "label"])``
  -- workers and labels in *sorted* order -- as rows and columns indexed
  by ``pd.factorize`` codes (order of first appearance): unless the two
  orders agree, worker j's spam distribution is another worker's, its
  columns another class's.  We index both by the same codes;
* it multiplies a task's answer probabilities (underflow to 0 beyond a
  few hundred answers, then ``log(0 + 1e-8)``); we add logs.

Result: posteriors of the last E-step (gold tasks one-hot at their
class), labels (ties drawn by the seed), the uniform class prior, and
``worker_params``: ``competence`` (n_workers,), the posterior mean
probability of not spamming, :math:`(\text{know} + \beta) / (\text{know} +
\text{spam} + \alpha + \beta)` (em: the smoothed share), ``spamming`` = 1 −
competence, and ``spam_distribution`` (n_workers, K), the posterior mean
of :math:`\theta_w`.  ``model_params``: ``spamming_weights`` (n_workers,
2), columns (spamming, competence), and ``theta_weights`` (n_workers, K):
the weights of the last E-step (under vb :math:`\exp\mathbb{E}\log`,
crowd-kit's ``spamming_`` and ``thetas_``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from ...data.annotations import AnnotationSet
from ..base import FitContext, IterativeAggregator, make_result
from ..blocks import TieBreaker, argmax_random_ties
from ..loop import Run, Step
from ..result import AggregationResult
from ..variational import expected_log

if TYPE_CHECKING:  # pragma: no cover
    from ...kernels.mace import Posteriors

__all__ = ["MACE", "MACEState", "m_step", "start_weights", "mace_memory"]


@dataclass
class MACEState:
    """One start: the engine, the log-weights the last E-step used and its outcome.

    ``log_spamming``, ``log_competence`` (n_workers,), ``log_theta`` (n_workers, K); ``posteriors`` the last
    E-step's (:class:`crowdagg.kernels.mace.Posteriors`: kept posteriors, log-evidence, expected counts).
    """

    engine: Any
    clamp: np.ndarray
    log_spamming: np.ndarray
    log_competence: np.ndarray
    log_theta: np.ndarray
    posteriors: Posteriors

    def e_step(self) -> float:
        """The E-step at the current log-weights (``self.posteriors``); returns its log marginal likelihood."""
        from ...kernels.mace import _e_step

        self.posteriors = _e_step(self.engine, self.log_spamming, self.log_competence, self.log_theta, self.clamp)
        return self.posteriors.loglik


def start_weights(worker_names: Any, n_classes: int, seed: int, noise: float) -> tuple[np.ndarray, np.ndarray]:
    """A start's weights: ``(spamming (n_workers, 2) [spamming, competence], theta (n_workers, K))``, each row
    drawn from U(1, 2 + ``noise``) and normalised, from uniforms keyed on each worker's name under ``seed``."""
    from ...errors import UsageError
    from ...kernels.draws import name_keys, seed_key, uniforms

    if isinstance(n_classes, bool) or not isinstance(n_classes, (int, np.integer)) or n_classes < 1:
        raise UsageError(f"n_classes must be an integer >= 1, got {n_classes!r}")
    if not (isinstance(noise, (int, float, np.integer, np.floating)) and np.isfinite(noise) and noise >= 0):
        raise UsageError(f"default_noise must be a finite number >= 0, got {noise!r}")
    if np.ndim(worker_names) != 1:
        raise UsageError(f"worker_names must be one name per worker (1-D), got {type(worker_names).__name__}")
    u = 1.0 + (1.0 + noise) * uniforms(name_keys(worker_names, seed_key(seed)), 2 + n_classes)
    pair, theta = u[:, :2], u[:, 2:]
    return pair / pair.sum(axis=1, keepdims=True), theta / theta.sum(axis=1, keepdims=True)


def _priors(checked: FitContext, k: int) -> tuple[float, float, float]:
    """The pseudo-counts (spamming, competence, each spam-distribution class) the M-step adds."""
    if checked["m_step"] == "vb":
        return float(checked["alpha"]), float(checked["beta"]), float(checked["strategy_prior"])
    sm = float(checked["smoothing"]) / k
    return sm, sm, sm


def m_step(spam: np.ndarray, know: np.ndarray, prior: tuple[float, float, float],
           variational: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The next E-step's log-weights from the expected counts: ``(log_spamming, log_competence, log_theta)``.

    ``spam`` (n_workers, K) expected spam answers per class answered, ``know`` (n_workers,) expected
    competent answers, ``prior`` the pseudo-counts (spamming, competence, each class of θ).  ``variational``:
    E[log] under the Beta and Dirichlet posteriors (crowd-kit's ``variational_normalize``); else the log of
    the normalised counts (its ``normalize``).
    """
    from ...errors import DataError, UsageError
    from ...kernels.validate import as_float_array

    spam, know = as_float_array(spam, "spam", 2), as_float_array(know, "know", 1)
    if know.shape[0] != spam.shape[0]:
        raise DataError(f"spam has {spam.shape[0]:,} rows, know {know.shape[0]:,}: one each per worker")
    a, b, s = (float(x) for x in prior)
    if not all(np.isfinite(x) and x > 0 for x in (a, b, s)):
        raise UsageError(f"the prior pseudo-counts must be finite and positive, got {prior!r}")
    spam_total = spam.sum(axis=1)
    pair = np.stack([spam_total + a, know + b], axis=1)
    theta = spam + s
    if variational:
        log_pair, log_theta = expected_log(pair, axis=1), expected_log(theta, axis=1)
    else:
        log_pair = np.log(pair / pair.sum(axis=1, keepdims=True))
        log_theta = np.log(theta / theta.sum(axis=1, keepdims=True))
    return np.ascontiguousarray(log_pair[:, 0]), np.ascontiguousarray(log_pair[:, 1]), np.ascontiguousarray(log_theta)


def mace_memory(data: AnnotationSet) -> tuple[float, str]:
    """Bytes a MACE fit allocates: the posteriors (kept in the blocks, gathered once), the per-worker tables and
    weights, the reduction's per-worker partial sums (K + 1 floats a worker; a stack of the tree's depth per
    thread)."""
    from ...core import threads
    from ...engine.grid import task_grid
    from ...engine.tree import depth

    n, w, k = data.n_tasks, data.n_workers, data.n_classes
    blocks = len(task_grid(data.task_ptr, w, k)) - 1
    partial = min(blocks, threads.count() * (depth(blocks) + 2))
    need = 8.0 * (3 * n * k + 12 * w * (k + 1) + partial * w * (k + 1))
    return need, f"{n:,} tasks × {k:,} classes, {w:,} workers"


class MACE(IterativeAggregator):
    __doc__ = __doc__
    name = "mace"
    loop_name = "variational EM"
    objective_name = "log marginal likelihood"
    worker_param_names: ClassVar[tuple[str, ...]] = ("competence", "spamming")
    empty_posterior: ClassVar[str] = "uniform (MACE's prior)"

    def memory_needed(self, data: AnnotationSet) -> tuple[float, str]:
        return mace_memory(data)

    def _start(self, data: AnnotationSet, checked: FitContext, start: int, rng: np.random.Generator
               ) -> tuple[MACEState, float]:
        from ...kernels.mace import _e_step

        pair, theta = start_weights(data.worker_names, data.n_classes, int(rng.integers(2**63 - 1)),
                                    float(checked["default_noise"]))
        clamp = checked.clamp if checked.clamp is not None else np.full(data.n_tasks, -1, dtype=np.int64)
        logs = np.log(pair[:, 0]), np.log(pair[:, 1]), np.log(theta)
        state = MACEState(checked.engine, clamp, *logs, _e_step(checked.engine, *logs, clamp))
        return state, state.posteriors.loglik

    def _step(self, data: AnnotationSet, state: MACEState, checked: FitContext) -> Step:
        post = state.posteriors
        state.log_spamming, state.log_competence, state.log_theta = m_step(
            post.spam, post.know, _priors(checked, data.n_classes), checked["m_step"] == "vb")
        return Step(objective=state.e_step())

    def _finish(self, data: AnnotationSet, run: Run, checked: FitContext) -> AggregationResult:
        state: MACEState = run.state
        post_ = state.posteriors
        k = data.n_classes
        post = np.ascontiguousarray(post_.post, dtype=np.float64)
        labels = argmax_random_ties(post, TieBreaker(data.tasks, checked["seed"]), atol=1e-12)
        a, b, s = _priors(checked, k)
        spam_total = post_.spam.sum(axis=1)
        competence = (post_.know + b) / (post_.know + spam_total + a + b)
        spam_distribution = (post_.spam + s) / (spam_total + k * s)[:, None]
        model = {"spamming_weights": np.exp(np.stack([state.log_spamming, state.log_competence], axis=1)),
                 "theta_weights": np.exp(state.log_theta)}
        return make_result(
            self.name, data, post, labels, np.full(k, 1.0 / k),
            worker_params={"competence": competence, "spamming": 1.0 - competence,
                           "spam_distribution": spam_distribution},
            model_params=model, n_iter=run.n_iter, converged=run.converged, objective=np.asarray(run.trace),
            objective_name=self.objective_name,
        )

