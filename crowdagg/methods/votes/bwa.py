r"""BWA: Bayesian weighted average (Li, Rubinstein & Cohn, WWW 2019), one-vs-rest over the classes.

Model (binary, one problem per class k; the answer ``y_{nm} = 1[worker m
answered k on task n]``, relaxed to a real number): each task has a score
:math:`z_n` and each worker a precision :math:`v_m`,

.. math:: y_{nm} \sim \mathcal N(z_n, 1/v_m), \qquad z_n \sim \mathcal N(\mu, 1/\lambda), \qquad
          v_m \sim \mathrm{Gamma}(a_v/2,\ b_v/2) \text{ (shape, rate)},

so a worker's answers are a noisy reading of the task's score, and a
precise worker's reading counts more.  Inference alternates the two
conditional updates (the posterior mean of each given the other),
starting from the vote shares :math:`z_n = \frac1{|M_n|}\sum_m y_{nm}`:

.. math:: \mu = \operatorname{mean}_n z_n, \qquad
          v_m = \frac{a_v + N_m}{b_v + \sum_{n \in N_m} (z_n - y_{nm})^2}, \qquad
          z_n = \frac{\lambda \mu + \sum_{m \in M_n} v_m y_{nm}}{\lambda + \sum_{m \in M_n} v_m},

:math:`N_m` the worker's answers (over all classes), until no score moves:
numpy's ``allclose(z_before, z, rtol=tol, atol=1e-8)`` of the class's
scores, each class stopping on its own (or ``max_iter`` updates).  The
rate is set from the data (empirical Bayes): with :math:`W_n` the task's
answers, :math:`L` all answers and the start's shares,

.. math:: b_v = a_v \, c \, \frac{\sum_n W_n z_n (1 - z_n)}{L}, \qquad c = 4 (1 - 1/K)

(``prior_correction``; c = 1 without it): the prior's mean precision
:math:`a_v / b_v` is the inverse of the answers' average binomial
variance under the vote, rescaled by :math:`c` (which is 2 for two
classes: the binary problem's variance is at most 1/4).  A rate of 0 (a
class every task is unanimous about) is floored at :data:`RATE_FLOOR`,
where the authors' code divides by zero.

Output: the class scores :math:`z_{nk}` (in [0, 1]; the K one-vs-rest
problems are fitted apart, so a row need not sum to 1) normalised per
task are the posteriors; the label is their argmax (ties within 1e-12
drawn by task name).  The means :math:`\mu_k` are over the tasks with
answers, and a task without answers gets them (normalised: the prior).
Worker parameters: ``class_precision`` :math:`v_{mk}` (n_workers, K) and
``precision``, its mean over the classes (n_workers,); a worker without
answers has the prior's mean :math:`a_v / b_v`.

Defaults are the authors' code (the function ``bwa`` beside ``ebcc_vb``
in their release; the paper, §3--4): ``a_v`` = 15, ``lam`` (λ) = 1,
``prior_correction`` on, at most 500 updates, ``tol`` 1e-3 (their
``np.allclose(last, z, rtol=1e-3)``).

Reference: Y. Li, B. I. P. Rubinstein and T. Cohn, "Truth inference at
scale: a Bayesian model for adjudicating highly redundant crowd
annotations", WWW 2019, doi:10.1145/3308558.3313459, arXiv:1902.08918.

Each update is one pass of :func:`crowdagg.kernels.votes._block_bwa` over
the engine's task blocks, O(L K): the scores of the current parameters,
and the per-worker squared errors and per-class sums the next parameters
are made of (reduced); between passes the state holds per-worker and
per-class numbers only (n_workers × K), never the scores, which are made
once more at the end.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from ...core.checks import check_float
from ...data.annotations import AnnotationSet
from ...errors import DataError, UsageError, param
from ...kernels.validate import as_float_array
from ..base import FitContext, IterativeAggregator, make_result
from ..blocks import TieBreaker, _block, argmax_random_ties
from ..loop import NO_OBJECTIVE, Run, Step, StopRule
from ..result import AggregationResult

#: Smallest rate b_v: a class every task is unanimous about has b_v = 0 and, for a worker who never disagrees,
#: a precision of (a_v + N)/0.  The floor keeps the precision finite (about 1e11 a worker) and the scores the shares.
RATE_FLOOR = 1e-10
#: numpy's default ``atol`` in the authors' stopping test ``np.allclose(last, z, rtol=1e-3)``.
ATOL = 1e-8


@dataclass(frozen=True)
class Scores:
    """How a pass makes the tasks' scores: one-vs-rest parameters, or the vote shares.

    precision : ndarray (n_workers, K)
        Each worker's precision per class (unused for the shares).
    mean : ndarray (K,)
        The class means μ (the prior's means; the score of a task without answers).
    shares : bool
        The vote shares instead (the start).
    """

    precision: np.ndarray
    mean: np.ndarray
    shares: bool = False

    def __post_init__(self) -> None:
        # the kernel reads them as float64 arrays of these ranks: text or a list was numba's TypingError or an
        # AttributeError, a NaN precision a row of NaN scores
        precision = as_float_array(self.precision, "bwa's precision (n_workers, K)", 2)
        mean = as_float_array(self.mean, "bwa's class means (K,)", 1)
        if not (np.isfinite(precision).all() and (precision >= 0).all() and np.isfinite(mean).all()):
            raise DataError("bwa's precisions must be finite and >= 0 and its class means finite")
        object.__setattr__(self, "precision", precision)
        object.__setattr__(self, "mean", mean)
        object.__setattr__(self, "shares", bool(self.shares))


@dataclass(frozen=True)
class BwaPass:
    """One pass of :func:`bwa_block`: the scores ``now`` and, when ``before`` is given, the count of tasks whose
    scores moved from ``before``'s by more than ``atol + rtol |z|`` (per class)."""

    now: Scores
    before: Scores | None
    lam: float
    rtol: float

    def __post_init__(self) -> None:
        if not isinstance(self.now, Scores) or not (self.before is None or isinstance(self.before, Scores)):
            raise UsageError(f"BwaPass takes Scores (now, and before or None), got {type(self.now).__name__} and "
                             f"{type(self.before).__name__}")
        object.__setattr__(self, "lam", check_float("lam", self.lam))
        object.__setattr__(self, "rtol", check_float("tol", self.rtol))


def bwa_block(part: Any, b: int, p: BwaPass, keep: bool) -> tuple[Any, Any]:
    """Block function (:mod:`crowdagg.engine`): block ``b``'s BWA pass.

    Sums: ``(sq (n_workers, K), z_sum (K,), n_answered, spread (K,), moved (K,))``
    (:func:`crowdagg.kernels.votes._block_bwa`); kept: the block's scores (its tasks, K).
    """
    from ...kernels.votes import _block_bwa

    if not isinstance(p, BwaPass):
        raise UsageError(f"bwa_block takes a BwaPass, got {type(p).__name__}")
    t0, t1 = _block(part, b)
    now, before = p.now, p.before if p.before is not None else p.now
    k = part.n_classes
    for scores in (now, before):  # the kernel indexes them by the answers' codes: their shapes checked here
        if scores.mean.shape != (k,) or not (scores.shares or scores.precision.shape == (part.n_workers, k)):
            raise DataError(f"bwa's parameters have shapes {scores.precision.shape} and {scores.mean.shape}; "
                            f"the data has {part.n_workers:,} workers and {k:,} classes")
    sq, z_sum, n_answered, spread, moved, rows = _block_bwa(
        part.task_ptr, part.worker, part.label, t0, t1, part.n_workers, now.precision, now.mean, now.shares,
        before.precision, before.mean, before.shares, p.lam, p.rtol, ATOL, p.before is not None, keep)
    return (sq, z_sum, n_answered, spread, moved), (rows if keep else None)


def prior_rate(a_v: float, spread: np.ndarray, n_answers: int, n_classes: int, correction: bool) -> np.ndarray:
    r"""The Gamma prior's rate per class (K,): :math:`b_v = a_v c \sum_n W_n z_n(1 - z_n) / L`, floored.

    ``spread`` (K,) is :math:`\sum_n W_n z_n(1 - z_n)` of the start's shares;
    ``c = 4 (1 - 1/K)`` with ``correction``, else 1.
    """
    c = 4.0 * (1.0 - 1.0 / n_classes) if correction else 1.0
    return np.maximum(a_v * c * spread / max(n_answers, 1), RATE_FLOOR)


def worker_precision(a_v: float, rate: np.ndarray, answers: np.ndarray, sq: np.ndarray) -> np.ndarray:
    r"""Each worker's precision per class (n_workers, K): :math:`(a_v + N_m) / (b_v + \sum (z - y)^2)`.

    ``rate`` (K,), ``answers`` (n_workers,) the workers' answer counts, ``sq`` (n_workers, K) their squared
    errors against the current scores.
    """
    return (a_v + answers[:, None]) / (rate[None, :] + sq)


@dataclass(frozen=True)
class ScoresSettled(StopRule):
    """Stop when no class's scores moved (``Step.changed``: the tasks whose score moved by more than
    ``1e-8 + tol |z|``, over the classes still updating); ``tol = 0`` runs ``max_iter``."""

    def reached(self, step: Step, prev: float | None, tol: float, direction: str) -> bool:
        if step.changed is None:
            raise TypeError("ScoresSettled reads how many scores moved: return Step(changed=...) from _step")
        return tol > 0 and step.changed == 0

    def still(self, tol: float, objective: str) -> str:
        return f"task scores still moving by more than {param('tol')}={tol:g} of their size"


class BwaState:
    """One BWA run: the parameters of the last scores made, and the statistics of that pass.

    ``now`` (:class:`Scores`) made the last pass's scores; ``stats`` are its
    sums; ``active`` (K,) the classes still updating (a class stops once
    its scores stop moving, as the authors' per-class loops do); ``rate``
    the prior's rate per class (fixed at the start).
    """

    def __init__(self, now: Scores, stats: tuple[Any, ...], rate: np.ndarray) -> None:
        self.now = now
        self.stats = stats
        self.rate = rate
        self.active = np.ones(rate.shape[0], dtype=bool)


class BayesianWeightedAverage(IterativeAggregator):
    __doc__ = __doc__
    name = "bwa"
    stop_rule: ClassVar[StopRule] = ScoresSettled()
    objective_direction = NO_OBJECTIVE
    loop_name = ""
    worker_param_names: ClassVar[tuple[str, ...]] = ("precision",)
    empty_posterior = "the class means, normalised (the prior)"

    def memory_needed(self, data: AnnotationSet) -> tuple[float, str]:
        """The scores (made at the end, and joined), about eight per-worker-per-class tables beside the
        reduction's live accumulators (per thread the tree's stack of depth + 2, each workers × K)."""
        from ...core import threads
        from ...engine.grid import answers_per_block, block_count
        from ...engine.tree import depth

        n, w, k = data.n_tasks, data.n_workers, data.n_classes
        n_blocks = block_count(data.n_answers, max(n, 1), answers_per_block(w, k))
        live = min(threads.count(), n_blocks) * (depth(n_blocks) + 2)
        return 8.0 * (3 * n * k + (live + 8) * w * k), f"{w:,} workers × {k:,} classes, {n:,} tasks"

    def _pass(self, checked: FitContext, now: Scores, before: Scores | None, keep: bool = False) -> Any:
        return checked.engine.map_reduce(bwa_block, BwaPass(now, before, checked["lam"], checked["tol"]),
                                         keep=keep)

    def _start(self, data: AnnotationSet, checked: FitContext, start: int,
               rng: np.random.Generator) -> tuple[BwaState, None]:
        k = data.n_classes
        shares = Scores(np.zeros((0, k)), np.zeros(k), shares=True)
        stats, _ = self._pass(checked, shares, None)
        spread = stats[3]
        rate = prior_rate(checked["a_v"], spread, data.n_answers, k, checked["prior_correction"])
        return BwaState(shares, stats, rate), None

    def _step(self, data: AnnotationSet, state: BwaState, checked: FitContext) -> Step:
        """One update of every class still moving: the parameters from the last scores, their scores, and how
        many moved (a class whose scores did not move stops: its parameters stay)."""
        sq, z_sum, n_answered = state.stats[:3]
        k, active = data.n_classes, state.active
        answers = data.answers_per_worker.astype(np.float64)
        precision = worker_precision(checked["a_v"], state.rate, answers, sq)
        mean = z_sum / n_answered if n_answered > 0 else np.full(k, 1.0 / k)
        if not state.now.shares:  # the stopped classes keep their parameters (hence their scores)
            precision[:, ~active] = state.now.precision[:, ~active]
            mean[~active] = state.now.mean[~active]
        now = Scores(precision, mean)
        stats, _ = self._pass(checked, now, state.now)
        moved = stats[4]
        changed = int(moved[active].sum())
        if checked["tol"] > 0:
            state.active = active & (moved > 0)
        state.now, state.stats = now, stats
        return Step(changed=changed)

    def _finish(self, data: AnnotationSet, run: Run, checked: FitContext) -> AggregationResult:
        state: BwaState = run.state
        k = data.n_classes
        _, outs = self._pass(checked, state.now, None, keep=True)
        scores = np.asarray(checked.engine.gather(outs))
        total = scores.sum(axis=1, keepdims=True)
        post = scores / np.where(total > 0, total, 1.0)
        # (every row with answers has a positive score for each class it was answered; an empty row's is the means)
        mean_total = state.now.mean.sum()
        prior = state.now.mean / mean_total if mean_total > 0 else np.full(k, 1.0 / k)
        post[total[:, 0] <= 0] = prior
        labels = argmax_random_ties(post, TieBreaker(data.tasks, checked["seed"]), atol=1e-12)
        precision = state.now.precision  # (max_iter >= 1: at least one update was made, the start's shares are gone)
        return make_result(
            self.name, data, post, labels, prior,
            worker_params={"precision": precision.mean(axis=1), "class_precision": precision},
            model_params={"rate": state.rate, "mean": state.now.mean},
            n_iter=run.n_iter, converged=run.converged,
        )


__all__ = ["BayesianWeightedAverage", "BwaPass", "Scores", "bwa_block", "prior_rate",
           "worker_precision"]
