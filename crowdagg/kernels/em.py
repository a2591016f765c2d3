"""Dawid--Skene EM on the engine's block protocol (:mod:`crowdagg.engine`).

One block function, :func:`em_block`, gives a block's EM statistics: for
each task of the block its posterior ``q`` (one of three ways, by the
:class:`EMParams` it is given) and then, fused into the same pass over the
task's answers, the expected counts of its answers.  The engine adds the
blocks' statistics along its fixed reduction tree, so the totals are
bit-identical for any thread count and any partitioning aligned with the
grid; a method's M-step reads the totals.

The three ways of getting a block's posteriors:

* **E-step** (``log_prior``, ``log_conf_ot`` given): ``q = softmax(log_prior
  + Σ_answers log_conf_ot[w, y, :])``, and its log-evidence summed;
* **the soft majority vote** (neither given): the vote shares of the task's
  answers, counted inside the block -- the default start, which needs no
  array over all tasks and so runs on any engine;
* **given posteriors** (``post``, an array over all tasks): their
  statistics.  Only the starts from another method's posteriors and the
  random restarts use it; the array lives with the caller, so it is meant
  for the local engine.

Either way a task clamped by gold (``clamp[t] >= 0``) has the one-hot
posterior at its class.

Confusion layout inside kernels is ``log_conf[w, observed, true]`` so that
one answer reads one contiguous row of K values; the public layout
(``AggregationResult.confusion``) is ``[w, true, observed]``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numba import njit

from ..errors import DataError, UsageError
from .softmax import softmax_into
from .validate import as_code_array, as_float_array, check_block, check_part

#: The kernel's modes: how a block's posteriors are made.
_E_STEP, _GIVEN, _VOTE = 0, 1, 2


@njit(cache=True, nogil=True)
def _em_block(
    mode, start, stop, task_ptr, worker, label, log_prior, log_conf, clamp, given, floor, keep, counts, tot, post
):  # pragma: no cover - compiled
    """One block's EM pass over its tasks ``[start, stop)``: posteriors fused with their expected counts.

    For each task t (``i = t - start``): its posterior q -- by ``mode``:
    the E-step ``softmax(log_prior + Σ_e log_conf[w_e, y_e, :])`` with its
    log-evidence summed into the returned log-likelihood, the given row
    ``given[i]``, or the vote shares of its answers -- one-hot at
    ``clamp[i]`` when that is >= 0 (``clamp`` empty: nothing clamped).  q
    is added to ``counts[w_e, y_e, :]`` for each answer and to ``tot``,
    written to ``post[i]`` when ``keep``, and, when ``floor >= 0``, Σ_k f
    log f with f = max(q_k, floor) is summed (an EM loss's entropy term).
    An answer's row of the tables is its cell ``w_e * K + y_e``, made from
    ``worker`` and ``label`` as it is read (an array of cells would cost 4
    bytes an answer: 0.4 GB at 100M answers).

    Returns (log-likelihood, Σ f log f, the block-local index of a task
    whose clamp is not a class or -1, else -1).

    The per-answer table offsets are unsigned: numba then skips the
    negative-index wrap-around test on those accesses (~20% of the time).
    Two classes (the most common case) run the same arithmetic in scalars
    (bit-identical results, fewer memory round trips).
    """
    n_classes = tot.shape[0]
    nk = np.uint64(n_classes)
    has_clamp = clamp.shape[0] > 0
    # Flat views: one answer touches the K contiguous entries from its cell times K.
    lc = log_conf.reshape(-1)
    cnt = counts.reshape(-1)
    q = np.empty(n_classes, dtype=np.float64)
    # The table offsets of the task's answers, computed once in the E-step and read again for the counts.
    bases = np.empty(64, dtype=np.uint64)
    ll = 0.0
    h = 0.0
    for t in range(start, stop):
        i = t - start
        lo = task_ptr[t]
        hi = task_ptr[t + 1]
        if hi - lo > bases.shape[0]:
            bases = np.empty(2 * (hi - lo), dtype=np.uint64)
        have = False
        g = -1
        if has_clamp:
            g = clamp[i]
            if g != -1 and (g < 0 or g >= n_classes):
                return ll, h, i
        if mode == 0 and g >= 0:
            s = log_prior[g]
            for e in range(lo, hi):
                s += lc[(np.uint64(worker[e]) * nk + np.uint64(label[e])) * nk + np.uint64(g)]
            ll += s
            for k in range(n_classes):
                q[k] = 0.0
            q[g] = 1.0
        elif mode == 0 and n_classes == 2:
            # The same arithmetic as below, in scalars the compiler keeps in registers.
            a = log_prior[0]
            b = log_prior[1]
            for e in range(lo, hi):
                base = (np.uint64(worker[e]) * nk + np.uint64(label[e])) * nk
                bases[e - lo] = base
                a += lc[base]
                b += lc[base + np.uint64(1)]
            have = True
            m = b if b > a else a
            ea = np.exp(a - m)
            eb = np.exp(b - m)
            z = 0.0 + ea + eb
            inv = 1.0 / z
            q[0] = ea * inv
            q[1] = eb * inv
            ll += m + np.log(z)
        elif mode == 0:
            for k in range(n_classes):
                q[k] = log_prior[k]
            for e in range(lo, hi):
                base = (np.uint64(worker[e]) * nk + np.uint64(label[e])) * nk
                bases[e - lo] = base
                for k in range(n_classes):
                    q[k] += lc[base + np.uint64(k)]
            have = True
            m, z = softmax_into(q, q)
            ll += m + np.log(z)
        else:
            if mode == 1:
                for k in range(n_classes):
                    q[k] = given[i, k]
            else:  # the vote shares: whole counts, so their sum is exact in any order
                for k in range(n_classes):
                    q[k] = 0.0
                for e in range(lo, hi):
                    q[label[e]] += 1.0
                z = 0.0
                for k in range(n_classes):
                    z += q[k]
                if z > 0.0:
                    for k in range(n_classes):
                        q[k] = q[k] / z
            if g >= 0:
                for k in range(n_classes):
                    q[k] = 0.0
                q[g] = 1.0
        for k in range(n_classes):
            tot[k] += q[k]
        if keep:
            for k in range(n_classes):
                post[i, k] = q[k]
        if floor >= 0.0:
            for k in range(n_classes):
                f = q[k] if q[k] > floor else floor
                h += f * np.log(f)
        if not have:
            for e in range(lo, hi):
                bases[e - lo] = (np.uint64(worker[e]) * nk + np.uint64(label[e])) * nk
        if n_classes == 2:
            q0 = q[0]
            q1 = q[1]
            for e in range(hi - lo):
                base = bases[e]
                cnt[base] += q0
                cnt[base + np.uint64(1)] += q1
        else:
            for e in range(hi - lo):
                base = bases[e]
                for k in range(n_classes):
                    cnt[base + np.uint64(k)] += q[k]
    return ll, h, -1


@dataclass(frozen=True, eq=False)
class EMParams:
    """What :func:`em_block` computes a block's posteriors from (broadcast to every block of an iteration).

    Parameters
    ----------
    log_prior : ndarray (K,), optional
        Log class prior.  With ``log_conf_ot``: an E-step.
    log_conf_ot : ndarray (n_workers, K_observed, K_true), optional
        Log confusion matrices, ``[w, observed, true]``.
    post : ndarray (n_tasks, K), optional
        Given posteriors over *all* tasks (global rows, sliced by each
        block): their statistics, no E-step.  An array over every task held
        by the caller: the starts from another method's posteriors and the
        random restarts use it, on the local engine.
    clamp : ndarray of int (n_tasks,), optional
        Gold: the class each task is clamped to, -1 free, over all tasks
        (global rows); None clamps nothing.
    entropy_floor : float, optional
        Also sum Σ_k f log f over the tasks, f = max(q_k, floor): the
        entropy term of crowd-kit's loss.

    Neither ``log_conf_ot`` nor ``post``: the soft majority vote, counted
    inside each block.  Arrays are converted to contiguous float64 / int64
    once, here; shapes against the data are checked by each block (O(1)),
    a clamp's classes inside the kernel.
    """

    log_prior: np.ndarray | None = None
    log_conf_ot: np.ndarray | None = None
    post: np.ndarray | None = None
    clamp: np.ndarray | None = None
    entropy_floor: float | None = None

    def __post_init__(self) -> None:
        def put(name: str, value: Any) -> None:
            object.__setattr__(self, name, value)

        if self.log_conf_ot is not None:
            if self.post is not None:
                raise UsageError("EMParams: give log_conf_ot (an E-step) or post (given posteriors), not both")
            if self.log_prior is None:
                raise UsageError("EMParams: an E-step needs log_prior beside log_conf_ot")
            put("log_prior", as_float_array(self.log_prior, "log_prior", 1))
            put("log_conf_ot", as_float_array(self.log_conf_ot, "log_conf_ot", 3))
            for name in ("log_prior", "log_conf_ot"):
                arr = getattr(self, name)
                bad = np.isnan(arr) | (arr == np.inf)  # -inf rules a class or an answer out; NaN, +inf mean nothing
                if bad.any():
                    at = np.unravel_index(int(np.flatnonzero(bad)[0]), arr.shape)
                    raise DataError(f"{name}{list(map(int, at))} is {float(arr[at])!r}: a log-probability is finite "
                                    "or -inf")
            k = self.log_prior.shape[0]
            if self.log_conf_ot.shape[1:] != (k, k):
                raise DataError(f"log_conf_ot has shape {self.log_conf_ot.shape}, not (n_workers, {k}, {k}) for the "
                                f"{k} classes of log_prior")
        elif self.log_prior is not None:
            raise UsageError("EMParams: log_prior without log_conf_ot (an E-step needs both)")
        if self.post is not None:
            put("post", as_float_array(self.post, "post", 2))
            bad = ~((self.post >= 0.0) & (self.post <= 1.0 + 1e-9))  # NaN fails both
            if bad.any():
                t, c = np.unravel_index(int(np.flatnonzero(bad)[0]), self.post.shape)
                raise DataError(f"post[{int(t)}, {int(c)}] is {float(self.post[t, c])!r}: posteriors lie in [0, 1]")
        if self.clamp is not None:
            clamp = as_code_array(self.clamp, "clamp")
            if clamp.dtype != np.int64:
                # Checked on the given dtype before the cast could wrap a large unsigned code to -1.
                if clamp.size and (int(clamp.min()) < -1 or int(clamp.max()) > np.iinfo(np.int32).max):
                    raise DataError(f"clamp holds a class outside -1 .. K-1 ({int(clamp.max())})")
                clamp = clamp.astype(np.int64)
            put("clamp", np.ascontiguousarray(clamp))
        if self.entropy_floor is not None:
            try:
                put("entropy_floor", float(self.entropy_floor))
            except (TypeError, ValueError):
                raise DataError(f"entropy_floor must be a number, got {self.entropy_floor!r}") from None
            if not self.entropy_floor >= 0.0:
                raise DataError(f"entropy_floor must be >= 0, got {self.entropy_floor!r}")

    @property
    def mode(self) -> str:
        """``"e-step"``, ``"given"`` or ``"vote"``."""
        return "e-step" if self.log_conf_ot is not None else "given" if self.post is not None else "vote"


#: Stand-ins for the arrays a mode does not read (the kernel's argument types stay the same).
_NO_PRIOR = np.zeros(1)
_NO_CONF = np.zeros((1, 1, 1))
_NO_POST = np.zeros((0, 1))
_NO_CLAMP = np.zeros(0, dtype=np.int64)

def _check_part(part: Any) -> None:
    """A partition checked once (:func:`~crowdagg.kernels.validate.check_part`)."""
    check_part(part)


def em_block(part: Any, b: int, params: EMParams, keep: bool = False) -> tuple[tuple[Any, ...], np.ndarray | None]:
    """The EM statistics of block ``b`` of the partition ``part`` (a :class:`crowdagg.engine.Part`): a block function.

    Parameters
    ----------
    part : Part
        The partition (its arrays are checked the first time, once).
    b : int
        Local block index.
    params : EMParams
        How the block's posteriors are made (an E-step, given, the soft vote).
    keep : bool
        Return the block's posteriors.

    Returns
    -------
    sums : tuple
        ``(counts, class_tot, loglik)`` -- fresh arrays: the expected answer
        counts ``[worker, observed, true]`` (n_workers, K, K), the
        posteriors' column sums (K,), the E-step's log-likelihood (0.0
        otherwise) -- and Σ f log f when ``params.entropy_floor`` is set.
    out : ndarray (tasks in the block, K) or None
        The block's posteriors, when ``keep``.
    """
    if not isinstance(params, EMParams):
        raise UsageError(f"em_block takes EMParams, got {type(params).__name__}")
    _check_part(part)
    w, k = int(part.n_workers), int(part.n_classes)
    b = check_block(part, b)
    start, stop = part.tasks_of(b)
    lo, hi = part.first_task + start, part.first_task + stop  # the block's rows of the per-task arrays
    need = part.first_task + part.n_tasks
    mode = {"e-step": _E_STEP, "given": _GIVEN, "vote": _VOTE}[params.mode]
    log_prior, log_conf = _NO_PRIOR, _NO_CONF
    if params.log_prior is not None and params.log_conf_ot is not None:
        log_prior, log_conf = params.log_prior, params.log_conf_ot
        if log_conf.shape != (w, k, k):
            raise DataError(f"log_conf_ot has shape {log_conf.shape}, the data's (n_workers, K, K) is {(w, k, k)}")
    given = _NO_POST
    if params.post is not None:
        if params.post.shape[1:] != (k,) or params.post.shape[0] < need:
            raise DataError(f"post has shape {params.post.shape}, the data's tasks × classes need ({need:,}, {k})")
        given = params.post[lo:hi]
    clamp = _NO_CLAMP
    if params.clamp is not None:
        if params.clamp.shape[0] < need:
            raise DataError(f"clamp holds {params.clamp.shape[0]:,} tasks, the data has {need:,}")
        clamp = params.clamp[lo:hi]
    counts = np.zeros((w, k, k))
    tot = np.zeros(k)
    post = np.empty((stop - start, k)) if keep else np.empty((0, k))
    floor = -1.0 if params.entropy_floor is None else params.entropy_floor
    ll, h, bad = _em_block(mode, start, stop, part.task_ptr, part.worker, part.label, log_prior, log_conf, clamp, given, floor, keep,
                           counts, tot, post)
    if bad >= 0:
        raise DataError(f"clamp holds {int(clamp[bad])} for task {lo + bad}, not a class (-1 .. {k - 1})")
    sums = (counts, tot, float(ll)) if params.entropy_floor is None else (counts, tot, float(ll), float(h))
    return sums, (post if keep else None)
