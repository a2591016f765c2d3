r"""GLAD's E-step, objective and gradient over one block of answers, as block functions of the engine.

GLAD (Whitehill, Ruvolo, Wu, Bergsma & Movellan, "Whose vote should count
more: optimal integration of labels from labelers of unknown expertise",
NIPS 2009) gives worker :math:`m` an ability :math:`\alpha_m \in \mathbb{R}`
and task :math:`n` a parameter :math:`\beta_n = e^{b_n} > 0` (its
difficulty is :math:`1/\beta_n`); an answer is the true class with
probability :math:`\sigma(\alpha_m \beta_n)`, otherwise one of the other
:math:`K - 1` classes, uniformly.  With :math:`z = \alpha_m \beta_n`, an
answer :math:`\tilde y` of a task whose class is :math:`c` has

.. math:: \log P(\tilde y \mid c) = \begin{cases} \log\sigma(z) & \tilde y = c \\
          \log(1 - \sigma(z)) - \log(K - 1) & \tilde y \ne c \end{cases}

so a task's class scores are :math:`\log d_c + \sum_e w_e + [\tilde y_e = c](\ell_e - w_e)`
(:math:`\ell_e` the log-probability of a right answer, :math:`w_e` of a
given wrong one): O(answers + K) per task, whatever K.

Three kernels, each one pass over the answers of one task block of the
engine's grid (:mod:`crowdagg.engine`; a GLAD block's dense accumulator is
one float per worker), run as block functions (:func:`e_step_block`,
:func:`objective_block`, :func:`curvature_block`: ``fn(part, b, params,
keep) -> (sums, out)``):

* the E-step: the posteriors (the block's tasks, K) and each answer's
  posterior of its own label ``q`` (the block's answers,) -- all the M-step
  reads of them -- kept with the block; the log-evidence and the expected
  class totals reduced;
* the objective of the M-step, the expected complete-data log-likelihood
  of the answers
  :math:`f = \sum_e q_e \log\sigma(z_e) + (1 - q_e)(\log(1 - \sigma(z_e)) - \log(K - 1))`,
  with its gradient: :math:`\partial f / \partial \alpha_m = \sum_{e \in m} (q_e - \sigma(z_e))\beta_{n(e)}`
  (dense per worker, reduced) and
  :math:`\partial f / \partial b_n = \sum_{e \in n} (q_e - \sigma(z_e))\alpha_{m(e)}\beta_n`
  (per task, kept with the block);
* the curvature in the abilities,
  :math:`-\partial^2 f / \partial \alpha_m^2 = \sum_{e \in m} \beta_{n(e)}^2 \sigma(z_e)(1 - \sigma(z_e))`,
  and its twin per task, :math:`\sum_{e \in n} z_e^2 \sigma(z_e)(1 - \sigma(z_e))` (the Fisher
  information of :math:`\log\beta_n`).

The engine adds the block sums along its fixed tree, so every result is
bit-identical for any thread count and any partitioning of the grid.  The
per-task parameter log β is a global array in the parameters, each block
reading its rows (``part.task_rows``).  GLAD's M-step runs about 25 rounds
of these per EM iteration with log β on the client: the method is declared
local-only (:attr:`crowdagg.methods.glad.glad.Glad.engines`).

The public functions (:func:`e_step`, :func:`objective`,
:func:`curvatures`, :func:`answer_posteriors`) check what they are given
(a :class:`~crowdagg.errors.DataError`, never a read outside an array) and
run the block functions on an engine; their ``_``-prefixed twins, for a
fit's loop, trust arrays it made.  One ``exp`` and one ``log1p`` per
answer: :math:`\log\sigma(z) = -\mathrm{softplus}(-z)`,
:math:`\log(1 - \sigma(z)) = \log\sigma(z) - z`, computed without overflow
for any :math:`z`.  The priors on :math:`\alpha` and :math:`b` are the
method's (:mod:`crowdagg.methods.glad.glad`): these kernels hold the
likelihood only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numba import njit

from .softmax import clamped_softmax_into


@njit(cache=True, nogil=True, inline="always")
def _log_sigmoids(z):  # pragma: no cover - compiled
    """(log σ(z), log(1 − σ(z)), σ(z)) with one exp and one log1p, finite for every finite z."""
    if z >= 0.0:
        e = math.exp(-z)
        l1 = math.log1p(e)
        return -l1, -z - l1, 1.0 / (1.0 + e)
    e = math.exp(z)
    l1 = math.log1p(e)
    return z - l1, -l1, e / (1.0 + e)


@njit(cache=True, nogil=True)
def _e_step_block(task_ptr, worker, label, t0, t1, alpha, log_beta, log_prior, log_km1, clamp):  # pragma: no cover
    """E-step over the tasks ``[t0, t1)``: fresh ``post`` (t1 - t0, K), ``q`` (their answers,) and the log-evidence.

    ``log_beta`` and ``clamp`` are indexed by the partition's task ``t``.  A
    clamped task (``clamp[t] >= 0``) is one-hot at its gold class and adds
    its log-joint at that class; a task without answers gets the prior.
    """
    k = log_prior.shape[0]
    a0 = task_ptr[t0]
    post = np.empty((t1 - t0, k))
    q = np.empty(task_ptr[t1] - a0)
    s = np.empty(k)
    ll = 0.0
    for t in range(t0, t1):
        row = t - t0
        start = task_ptr[t]
        stop = task_ptr[t + 1]
        beta = math.exp(log_beta[t])
        base = 0.0
        for c in range(k):
            s[c] = log_prior[c]
        for e in range(start, stop):
            right, wrong, _ = _log_sigmoids(alpha[worker[e]] * beta)
            wrong -= log_km1
            base += wrong
            s[label[e]] += right - wrong
        ll += clamped_softmax_into(s, post[row], clamp[t], base)
        for e in range(start, stop):
            q[e - a0] = post[row, label[e]]
    return post, q, ll


@njit(cache=True, nogil=True)
def _objective_block(task_ptr, worker, t0, t1, alpha, log_beta, q, log_km1, n_workers):  # pragma: no cover
    """The M-step objective over the tasks ``[t0, t1)``: ``f``, ``g_alpha`` (n_workers,), ``g_log_beta`` (t1 - t0,).

    ``q`` holds the block's answers' posteriors of their own labels (from answer ``task_ptr[t0]``).
    """
    a0 = task_ptr[t0]
    ga = np.zeros(n_workers)
    g_log_beta = np.empty(t1 - t0)
    f = 0.0
    for t in range(t0, t1):
        beta = math.exp(log_beta[t])
        gt = 0.0
        for e in range(task_ptr[t], task_ptr[t + 1]):
            w = worker[e]
            a = alpha[w]
            right, wrong, sig = _log_sigmoids(a * beta)
            qe = q[e - a0]
            f += qe * right + (1.0 - qe) * (wrong - log_km1)
            d = qe - sig
            ga[w] += d * beta
            gt += d * a
        g_log_beta[t - t0] = gt * beta
    return f, ga, g_log_beta


@njit(cache=True, nogil=True)
def _curvature_block(task_ptr, worker, t0, t1, alpha, log_beta, n_workers):  # pragma: no cover - compiled
    """Over the tasks ``[t0, t1)``: each worker's Σ β² σ(αβ)(1 − σ(αβ)) (n_workers,); per task Σ (αβ)² σ(1 − σ)."""
    h = np.zeros(n_workers)
    h_task = np.empty(t1 - t0)
    for t in range(t0, t1):
        beta = math.exp(log_beta[t])
        b2 = beta * beta
        ht = 0.0
        for e in range(task_ptr[t], task_ptr[t + 1]):
            w = worker[e]
            a = alpha[w]
            _, _, sig = _log_sigmoids(a * beta)
            v = sig * (1.0 - sig)
            h[w] += b2 * v
            ht += a * a * v
        h_task[t - t0] = ht * b2
    return h, h_task


@njit(cache=True, nogil=True)
def _answer_q_block(task_ptr, label, t0, t1, post):  # pragma: no cover - compiled
    """Each answer's posterior of its own label over the tasks ``[t0, t1)``; ``post`` (t1 - t0, K) the block's rows."""
    a0 = task_ptr[t0]
    q = np.empty(task_ptr[t1] - a0)
    for t in range(t0, t1):
        for e in range(task_ptr[t], task_ptr[t + 1]):
            q[e - a0] = post[t - t0, label[e]]
    return q


def log_km1(n_classes: int) -> float:
    """log(K - 1), a wrong answer's share; one class has no wrong answers (their weight 1 - q is 0)."""
    return math.log(n_classes - 1) if n_classes > 1 else 0.0


# ------------------------------------------------------------------------------------------ block functions
@dataclass(frozen=True)
class EStepParams:
    """The E-step's parameters: ``alpha`` (n_workers,), ``log_beta`` (n_tasks,), ``log_prior`` (K,), ``clamp``
    (n_tasks,) int64 (-1: free); the per-task arrays are global, each block reads its rows.

    Converted to contiguous float64 / int64 once, here; a clamp outside -1 .. K-1 (K = len(log_prior)) is a
    :class:`~crowdagg.errors.DataError` (the kernel writes the clamped class's column).
    """

    alpha: np.ndarray
    log_beta: np.ndarray
    log_prior: np.ndarray
    clamp: np.ndarray

    def __post_init__(self) -> None:
        from ..errors import DataError
        from .validate import as_code_array, as_float_array

        for name in ("alpha", "log_beta", "log_prior"):
            object.__setattr__(self, name, as_float_array(getattr(self, name), name, 1))
        clamp = as_code_array(self.clamp, "clamp")
        k = self.log_prior.shape[0]
        if clamp.size and (int(clamp.min()) < -1 or int(clamp.max()) >= k):
            raise DataError(f"clamp holds a class outside -1 .. {k - 1}")
        object.__setattr__(self, "clamp", np.ascontiguousarray(clamp, dtype=np.int64))


def _block(part: Any, b: int, worker_arrays: tuple[np.ndarray, ...] = (),
           task_arrays: tuple[np.ndarray, ...] = ()) -> tuple[int, int]:
    """Block ``b``'s task range once the partition is checked (:func:`~crowdagg.kernels.validate.check_part`) and
    the parameters fit it: per worker arrays of ``n_workers`` entries, per task (global) arrays reaching its last
    task.  O(1) after the partition's first check: the kernels then index nothing outside an array."""
    from ..errors import DataError
    from .validate import check_block, check_part

    check_part(part)
    b = check_block(part, b)
    for arr in worker_arrays:
        if not isinstance(arr, np.ndarray) or arr.ndim != 1 or arr.shape[0] != part.n_workers:
            raise DataError(f"a per-worker parameter has shape {np.shape(arr)}, the data has {part.n_workers:,} workers")
    need = part.first_task + part.n_tasks
    for arr in task_arrays:
        if not isinstance(arr, np.ndarray) or arr.ndim != 1 or arr.shape[0] < need:
            raise DataError(f"a per-task parameter has shape {np.shape(arr)}, the data has {need:,} tasks")
    return part.tasks_of(b)


def e_step_block(part: Any, b: int, p: EStepParams, keep: bool) -> tuple[Any, Any]:
    """Block function of the E-step: sums ``(log-evidence, expected class totals (K,))``; kept ``(post, q)``."""
    if not isinstance(p, EStepParams):
        from ..errors import UsageError

        raise UsageError(f"e_step_block takes EStepParams, got {type(p).__name__}")
    t0, t1 = _block(part, b, (p.alpha,), (p.log_beta, p.clamp))
    if p.log_prior.shape != (part.n_classes,):
        from ..errors import DataError

        raise DataError(f"log_prior has shape {p.log_prior.shape}, the data has {part.n_classes} classes")
    post, q, ll = _e_step_block(part.task_ptr, part.worker, part.label, t0, t1, p.alpha,
                                part.task_rows(p.log_beta), p.log_prior, log_km1(len(p.log_prior)),
                                part.task_rows(p.clamp))
    return (ll, post.sum(axis=0)), ((post, q) if keep else None)


def posterior_q_block(part: Any, b: int, post: np.ndarray, keep: bool) -> tuple[Any, Any]:
    """Block function taking given posteriors (n_tasks, K, global) as the E-step's: kept ``(post rows, q)``;
    sums the expected class totals (K,)."""
    t0, t1 = _block(part, b)
    if not isinstance(post, np.ndarray) or post.ndim != 2 or post.shape[1] != part.n_classes \
            or post.shape[0] < part.first_task + part.n_tasks:
        from ..errors import DataError

        raise DataError(f"post has shape {np.shape(post)}, the data's tasks × classes need "
                        f"({part.first_task + part.n_tasks:,}, {part.n_classes})")
    rows = np.array(part.task_rows(post)[t0:t1], dtype=np.float64)  # fresh: the block owns its rows
    q = _answer_q_block(part.task_ptr, part.label, t0, t1, rows)
    return rows.sum(axis=0), ((rows, q) if keep else None)


@dataclass(frozen=True)
class ObjectiveParams:
    """The objective's parameters: ``alpha`` (n_workers,), ``log_beta`` (n_tasks,, global) and the E-step's kept
    ``(post, q)`` per block (``e_step`` in block order: block ``part.first_block + b`` reads its own)."""

    alpha: np.ndarray
    log_beta: np.ndarray
    e_step: list[Any]
    n_classes: int


def objective_block(part: Any, b: int, p: ObjectiveParams, keep: bool) -> tuple[Any, Any]:
    """Block function of the M-step's objective: sums ``(f, ∂f/∂α (n_workers,))``; kept ``∂f/∂log β`` (its tasks,)."""
    t0, t1 = _block(part, b, (p.alpha,), (p.log_beta,))
    g = part.first_block + b
    q: Any = p.e_step[g][1] if g < len(p.e_step) else None
    lo, hi = part.answers_of(b)
    if not isinstance(q, np.ndarray) or q.shape != (hi - lo,) or q.dtype != np.float64:
        from ..errors import DataError

        raise DataError(f"the posteriors of block {g} hold {np.shape(q)} answers, not the block's {hi - lo:,}: "
                        "they come from an E-step on other data or another grid")
    f, ga, gb = _objective_block(part.task_ptr, part.worker, t0, t1, p.alpha, part.task_rows(p.log_beta), q,
                                 log_km1(p.n_classes), part.n_workers)
    return (f, ga), (gb if keep else None)


def curvature_block(part: Any, b: int, p: tuple[np.ndarray, np.ndarray], keep: bool) -> tuple[Any, Any]:
    """Block function of the curvatures at ``p = (alpha, log_beta)``: sums (n_workers,); kept per task (its tasks,)."""
    alpha, log_beta = p
    t0, t1 = _block(part, b, (alpha,), (log_beta,))
    h, h_task = _curvature_block(part.task_ptr, part.worker, t0, t1, alpha, part.task_rows(log_beta),
                                 part.n_workers)
    return h, (h_task if keep else None)


# ------------------------------------------------------------------------------------------ on an engine
@dataclass
class Posteriors:
    """An E-step's outcome on an engine: the kept ``(post, q)`` of each block, the log-evidence, the class totals.

    ``post`` (n_tasks, K) and ``q`` (n_answers,) join the blocks' (one block: its arrays, no copy).
    """

    blocks: list[Any]
    loglik: float
    class_total: np.ndarray
    engine: Any

    @property
    def post(self) -> np.ndarray:
        return self.engine.gather([o[0] for o in self.blocks])

    @property
    def q(self) -> np.ndarray:
        return self.engine.gather([o[1] for o in self.blocks])


def _sizes(engine: Any) -> tuple[int, int, int, int]:
    d = getattr(engine, "data", None)
    if d is None or not callable(getattr(engine, "map_reduce", None)):
        from ..errors import UsageError

        raise UsageError(f"the GLAD kernels run on an engine over the data (LocalEngine(data)), got {engine!r}")
    return d.n_workers, d.n_tasks, d.n_classes, d.n_answers


def _e_step(engine: Any, alpha: np.ndarray, log_beta: np.ndarray, log_prior: np.ndarray,
            clamp: np.ndarray) -> Posteriors:
    (ll, tot), outs = engine.map_reduce(e_step_block, EStepParams(alpha, log_beta, log_prior, clamp), keep=True)
    return Posteriors(outs, float(ll), tot, engine)


def _objective(engine: Any, alpha: np.ndarray, log_beta: np.ndarray,
               posteriors: Posteriors) -> tuple[float, np.ndarray, np.ndarray]:
    k = engine.data.n_classes
    (f, ga), outs = engine.map_reduce(objective_block, ObjectiveParams(alpha, log_beta, posteriors.blocks, k),
                                      keep=True)
    return float(f), ga, engine.gather(outs)


def _curvatures(engine: Any, alpha: np.ndarray, log_beta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    h, outs = engine.map_reduce(curvature_block, (alpha, log_beta), keep=True)
    return h, engine.gather(outs)


def _answer_posteriors(engine: Any, post: np.ndarray) -> Posteriors:
    tot, outs = engine.map_reduce(posterior_q_block, post, keep=True)
    return Posteriors(outs, 0.0, tot, engine)


# ------------------------------------------------------------------------------------------ checked
def _vector(values: object, name: str, n: int, finite: bool = True) -> np.ndarray:
    """A float vector of ``n`` entries; ``finite``: every entry finite (NaN or inf would give NaN posteriors)."""
    from ..errors import DataError
    from .validate import as_float_array

    arr = as_float_array(values, name, 1)
    if arr.shape[0] != n:
        raise DataError(f"{name} has {arr.shape[0]:,} entries, not {n:,}")
    if finite and not np.isfinite(arr).all():
        i = int(np.flatnonzero(~np.isfinite(arr))[0])
        raise DataError(f"{name}[{i}] is {float(arr[i])!r}: the parameters must be finite")
    return np.ascontiguousarray(arr, dtype=np.float64)


def _parameters(engine: Any, alpha: object, log_beta: object) -> tuple[np.ndarray, np.ndarray]:
    n_workers, n_tasks, _, _ = _sizes(engine)
    return _vector(alpha, "alpha", n_workers), _vector(log_beta, "log_beta", n_tasks)


def e_step(engine: Any, alpha: object, log_beta: object, log_prior: object, clamp: object = None) -> Posteriors:
    r"""The posteriors at these parameters on ``engine``'s blocks, and the log-evidence of the answers.

    ``alpha`` (n_workers,), ``log_beta`` (n_tasks,), ``log_prior`` (K,; -inf
    rules a class out), ``clamp`` (n_tasks,) int, -1 where a task is free
    (None: all free).  The log-evidence is
    :math:`\sum_n \log \sum_c d_c \prod_e P(\tilde y_e \mid c)`, a clamped
    task's term taken at its gold class.
    """
    from ..errors import DataError
    from .validate import as_code_array

    alpha_, log_beta_ = _parameters(engine, alpha, log_beta)
    _, n_tasks, k, _ = _sizes(engine)
    prior = _vector(log_prior, "log_prior", k, finite=False)
    bad = np.flatnonzero(np.isnan(prior) | (prior == np.inf))
    if bad.size:
        raise DataError(f"log_prior[{int(bad[0])}] is {float(prior[int(bad[0])])!r}: a log-probability is finite or -inf")
    if not np.isfinite(prior).any():
        raise DataError("log_prior has no finite entry: the prior rules out every class")
    codes = np.full(n_tasks, -1, dtype=np.int64) if clamp is None else as_code_array(clamp, "clamp")
    if codes.shape[0] != n_tasks:
        raise DataError(f"clamp has {codes.shape[0]:,} entries, not {n_tasks:,}")
    if n_tasks and (int(codes.min()) < -1 or int(codes.max()) >= k):
        raise DataError(f"clamp holds a class outside -1 .. {k - 1}")
    return _e_step(engine, alpha_, log_beta_, prior, np.ascontiguousarray(codes, dtype=np.int64))


def objective(engine: Any, alpha: object, log_beta: object,
              posteriors: Posteriors | object) -> tuple[float, np.ndarray, np.ndarray]:
    """(f, ∂f/∂α (n_workers,), ∂f/∂log β (n_tasks,)): the expected complete-data log-likelihood of the answers
    given an E-step's :class:`Posteriors`, or each answer's posterior of its own label ``q`` (n_answers,)."""
    from ..errors import DataError

    alpha_, log_beta_ = _parameters(engine, alpha, log_beta)
    if not isinstance(posteriors, Posteriors):
        _, _, _, n_answers = _sizes(engine)
        q = _vector(posteriors, "q", n_answers, finite=False)
        # (With a rounding's slack: an E-step's own q can exceed 1 by an ulp.)
        bad = np.flatnonzero(~((q >= -1e-9) & (q <= 1.0 + 1e-9)))  # NaN fails both
        if bad.size:
            raise DataError(f"q[{int(bad[0])}] is {float(q[int(bad[0])])!r}: each answer's posterior must lie in [0, 1]")
        posteriors = _split_q(engine, q)
    return _objective(engine, alpha_, log_beta_, posteriors)


def _split_q(engine: Any, q: np.ndarray) -> Posteriors:
    """Per-answer posteriors ``q`` (n_answers,) cut at the engine's block boundaries, as an E-step keeps them."""
    part = engine.part
    blocks = [(None, q[slice(*part.answers_of(b))]) for b in range(part.n_blocks)]
    return Posteriors(blocks, 0.0, np.zeros(part.n_classes), engine)


def curvatures(engine: Any, alpha: object, log_beta: object) -> tuple[np.ndarray, np.ndarray]:
    """(−∂²f/∂α_m² = Σ_answers of m β² σ(αβ)(1 − σ(αβ)) (n_workers,), and per task Σ (αβ)² σ(αβ)(1 − σ(αβ))
    (n_tasks,)): the diagonal of the Fisher information in α and log β (the Gauss--Newton part of −∂²f; the
    M-step's scaling), independent of the posteriors."""
    return _curvatures(engine, *_parameters(engine, alpha, log_beta))


def answer_posteriors(engine: Any, post: object) -> Posteriors:
    """Given posteriors (n_tasks, K), each in [0, 1], taken as an E-step's (each answer's ``q`` read from them)."""
    from ..errors import DataError
    from .validate import as_float_array

    _, n_tasks, k, _ = _sizes(engine)
    given = as_float_array(post, "post", 2)
    if given.shape != (n_tasks, k):
        raise DataError(f"post has shape {given.shape}, the data's tasks × classes are {(n_tasks, k)}")
    bad = np.flatnonzero(~((given >= 0.0) & (given <= 1.0 + 1e-9)))  # NaN fails both
    if bad.size:
        t, c = divmod(int(bad[0]), k)
        raise DataError(f"post[{t}, {c}] is {float(given[t, c])!r}: posteriors must lie in [0, 1]")
    return _answer_posteriors(engine, given)


__all__ = [
    "EStepParams",
    "ObjectiveParams",
    "Posteriors",
    "answer_posteriors",
    "curvature_block",
    "curvatures",
    "e_step",
    "e_step_block",
    "log_km1",
    "objective",
    "objective_block",
    "posterior_q_block",
]
