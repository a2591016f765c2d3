r"""MACE's fused E-step and expected counts over one block of answers, as a block function of the engine.

MACE (Hovy, Berg-Kirkpatrick, Vaswani & Hovy, "Learning whom to trust with
MACE", NAACL-HLT 2013) gives worker :math:`w` a spamming weight
:math:`s_w`, a competence (not-spamming) weight :math:`c_w` and a spam
distribution :math:`\theta_w` over the K classes; an answer :math:`a` of a
task whose class is :math:`k` has weight

.. math:: P(a \mid k) = s_w \theta_w[a] + c_w [a = k]

(variational Bayes hands sub-normalised weights: :math:`\exp\mathbb{E}\log`
of each).  With :math:`b_e = \log(s_w \theta_w[a_e])` and
:math:`g_e = \log(s_w \theta_w[a_e] + c_w) - b_e`, a task's class scores are
:math:`-\log K + \sum_e b_e + \sum_{e: a_e = k} g_e` (the true class
uniform): O(answers + K) per task, whatever K.  Given the posteriors
:math:`q`, an answer was a spam answer with probability

.. math:: P(\text{spam}_e) = \sum_k q(k)\frac{s_w\theta_w[a_e]}{s_w\theta_w[a_e] + c_w[a_e = k]}
          = 1 - q(a_e)\,\rho_e, \qquad \rho_e = \frac{c_w}{s_w\theta_w[a_e] + c_w},

and a competent one with probability :math:`q(a_e)\rho_e`.  One pass per
block computes a task's posteriors, then adds its answers' spam
probabilities to the worker's expected spam counts per class
``spam[w, a]`` and the competent ones to ``know[w]``: the M-step's
statistics, dense per worker (K + 1 floats; the grid keeps them small
beside a block's work, :mod:`crowdagg.engine.grid`).  The engine adds
the blocks' sums along its fixed tree: bit-identical for any thread count
and any partitioning aligned with the grid (the local and Dask engines).

The per-worker tables (``log_base``, ``log_boost``, ``know_share``, each
(n_workers, K)) are made once per iteration by :func:`tables` from the
parameters' logs; a gold task (``clamp[t] >= 0``) is one-hot at its class and
adds its log-joint there.  :func:`e_step` checks what it is given;
:func:`_e_step`, for a fit's loop, trusts arrays it made.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numba import njit

from .softmax import clamped_softmax_into


@njit(cache=True, nogil=True)
def _e_step_block(task_ptr, worker, label, t0, t1, log_base, log_boost, know_share, clamp):  # pragma: no cover
    """E-step over the tasks ``[t0, t1)``: ``post`` (t1 - t0, K), the log-evidence, ``spam`` (n_workers, K), ``know``
    (n_workers,).

    ``clamp`` is indexed by the partition's task ``t``.  A task without answers gets the uniform prior and adds 0.
    """
    n_workers, k = log_base.shape
    post = np.empty((t1 - t0, k))
    spam = np.zeros((n_workers, k))
    know = np.zeros(n_workers)
    s = np.empty(k)
    log_k = math.log(k)
    ll = 0.0
    for t in range(t0, t1):
        row = t - t0
        start = task_ptr[t]
        stop = task_ptr[t + 1]
        base = -log_k
        for c in range(k):
            s[c] = 0.0
        for e in range(start, stop):
            w = worker[e]
            a = label[e]
            base += log_base[w, a]
            s[a] += log_boost[w, a]
        ll += clamped_softmax_into(s, post[row], clamp[t], base)
        for e in range(start, stop):
            w = worker[e]
            a = label[e]
            competent = post[row, a] * know_share[w, a]
            know[w] += competent
            spam[w, a] += 1.0 - competent
    return post, ll, spam, know


# ------------------------------------------------------------------------------------------ block function
@dataclass(frozen=True)
class EStepParams:
    """The E-step's per-worker tables (n_workers, K) -- ``log_base`` log(s θ[a]), ``log_boost`` log(s θ[a] + c) −
    log(s θ[a]), ``know_share`` c / (s θ[a] + c) -- and ``clamp`` (n_tasks,) int64 (-1: free), global: each block
    reads its rows.  Converted to contiguous float64 / int64 once, here."""

    log_base: np.ndarray
    log_boost: np.ndarray
    know_share: np.ndarray
    clamp: np.ndarray

    def __post_init__(self) -> None:
        from ..errors import DataError
        from .validate import as_code_array, as_float_array

        arrays = [np.ascontiguousarray(as_float_array(getattr(self, n), n, 2)) for n in ("log_base", "log_boost",
                                                                                     "know_share")]
        shape = arrays[0].shape
        for name, arr in zip(("log_base", "log_boost", "know_share"), arrays):
            if arr.shape != shape:
                raise DataError(f"{name} has shape {arr.shape}, log_base {shape}")
            if np.isnan(arr).any():  # a NaN would spread through every posterior and the log-evidence
                raise DataError(f"{name} holds NaN")
            object.__setattr__(self, name, arr)
        clamp = as_code_array(self.clamp, "clamp")
        if clamp.size and (int(clamp.min()) < -1 or int(clamp.max()) >= shape[1]):
            raise DataError(f"clamp holds a class outside -1 .. {shape[1] - 1}")
        object.__setattr__(self, "clamp", np.ascontiguousarray(clamp, dtype=np.int64))


def e_step_block(part: Any, b: int, p: EStepParams, keep: bool) -> tuple[Any, Any]:
    """Block function of the E-step: sums ``(log-evidence, spam (n_workers, K), know (n_workers,))``; kept ``post``."""
    from ..errors import DataError, UsageError
    from .validate import check_block, check_part

    if not isinstance(p, EStepParams):
        raise UsageError(f"e_step_block takes EStepParams, got {type(p).__name__}")
    check_part(part)
    b = check_block(part, b)
    if p.log_base.shape != (part.n_workers, part.n_classes):
        raise DataError(f"the worker tables have shape {p.log_base.shape}, the data has {part.n_workers:,} workers × "
                        f"{part.n_classes} classes")
    if p.clamp.shape[0] < part.first_task + part.n_tasks:
        raise DataError(f"clamp has {p.clamp.shape[0]:,} entries, the data has {part.first_task + part.n_tasks:,} tasks")
    t0, t1 = part.tasks_of(b)
    post, ll, spam, know = _e_step_block(part.task_ptr, part.worker, part.label, t0, t1, p.log_base, p.log_boost,
                                         p.know_share, part.task_rows(p.clamp))
    return (ll, spam, know), (post if keep else None)


# ------------------------------------------------------------------------------------------ on an engine
@dataclass
class Posteriors:
    """An E-step's outcome on an engine: the kept posteriors of each block, the log-evidence, the expected counts.

    ``spam`` (n_workers, K): each worker's expected spam answers per class answered; ``know`` (n_workers,): its
    expected competent answers.  ``post`` (n_tasks, K) joins the blocks' (one block: its array, no copy).
    """

    blocks: list[Any]
    loglik: float
    spam: np.ndarray
    know: np.ndarray
    engine: Any

    @property
    def post(self) -> np.ndarray:
        return self.engine.gather(self.blocks)


def tables(log_spamming: np.ndarray, log_competence: np.ndarray,
           log_theta: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The E-step's per-worker tables from the log-weights ``log_spamming``, ``log_competence`` (n_workers,) and
    ``log_theta`` (n_workers, K): ``(log_base, log_boost, know_share)``, each (n_workers, K), C-contiguous.

    In logs throughout (``logaddexp``): exact for a competence far below the spam weight or far above it.
    """
    from ..errors import DataError
    from .validate import as_float_array

    log_spamming, log_competence = as_float_array(log_spamming, "log_spamming", 1), as_float_array(
        log_competence, "log_competence", 1)
    log_theta = as_float_array(log_theta, "log_theta", 2)
    if not log_spamming.shape[0] == log_competence.shape[0] == log_theta.shape[0]:
        raise DataError(f"log_spamming, log_competence and log_theta have {log_spamming.shape[0]:,}, "
                        f"{log_competence.shape[0]:,} and {log_theta.shape[0]:,} rows: one each per worker")
    log_base = log_spamming[:, None] + log_theta
    log_total = np.logaddexp(log_base, log_competence[:, None])
    return log_base, log_total - log_base, np.exp(log_competence[:, None] - log_total)


def _e_step(engine: Any, log_spamming: np.ndarray, log_competence: np.ndarray, log_theta: np.ndarray,
            clamp: np.ndarray) -> Posteriors:
    log_base, log_boost, know_share = tables(log_spamming, log_competence, log_theta)
    params = EStepParams(log_base, log_boost, know_share, clamp)
    (ll, spam, know), outs = engine.map_reduce(e_step_block, params, keep=True)
    return Posteriors(outs, float(ll), spam, know, engine)


def e_step(engine: Any, spamming: object, competence: object, theta: object, clamp: object = None) -> Posteriors:
    r"""The posteriors and expected counts at these weights on ``engine``'s blocks, and the log-evidence.

    ``spamming``, ``competence`` (n_workers,) and ``theta`` (n_workers, K):
    positive, finite weights (sub-normalised ones, as variational Bayes
    hands them, are fine).  ``clamp`` (n_tasks,) int, -1 where a task is
    free (None: all free).  The log-evidence is
    :math:`\sum_t \log \frac1K \sum_k \prod_e (s\theta[a_e] + c[a_e = k])`,
    a clamped task's term taken at its gold class.
    """
    from ..errors import DataError, UsageError
    from .validate import as_code_array, as_float_array

    d = getattr(engine, "data", None)
    if d is None or not callable(getattr(engine, "map_reduce", None)):
        raise UsageError(f"the MACE kernels run on an engine over the data (LocalEngine(data)), got {engine!r}")
    w, n, k = d.n_workers, d.n_tasks, d.n_classes
    arrays = {}
    for name, value, shape in (("spamming", spamming, (w,)), ("competence", competence, (w,)),
                               ("theta", theta, (w, k))):
        arr = as_float_array(value, name, len(shape))
        if arr.shape != shape:
            raise DataError(f"{name} has shape {arr.shape}, the data needs {shape}")
        bad = np.flatnonzero(~(np.isfinite(arr) & (arr > 0)).reshape(-1))
        if bad.size:
            raise DataError(f"{name} holds {float(arr.reshape(-1)[bad[0]])!r}: MACE's weights must be positive and "
                            "finite")
        arrays[name] = np.ascontiguousarray(arr, dtype=np.float64)
    codes = np.full(n, -1, dtype=np.int64) if clamp is None else as_code_array(clamp, "clamp")
    if codes.shape[0] != n:
        raise DataError(f"clamp has {codes.shape[0]:,} entries, not {n:,}")
    return _e_step(engine, np.log(arrays["spamming"]), np.log(arrays["competence"]), np.log(arrays["theta"]),
                   np.ascontiguousarray(codes, dtype=np.int64))


__all__ = ["EStepParams", "Posteriors", "e_step", "e_step_block", "tables"]
