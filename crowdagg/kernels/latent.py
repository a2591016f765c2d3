r"""One latent-class E-step on the engine's block protocol (:mod:`crowdagg.engine`).

The posterior of a task's latent state when each answer is independent
given it, and the task carries its own prior:

.. math:: \log q_n(z) = \log \pi_n(z) + \sum_{(w, l) \in \mathcal{A}_n} \log T_w[l, z] - \log Z_n,
          \qquad z = 0 .. K_{latent} - 1

``log_table[w, l, z]`` is :math:`\log T_w[l, z]`, the log-probability that
worker ``w`` answers class ``l`` when the task's latent state is ``z``
(the E-step kernels' layout ``[worker, observed, latent]``: one answer
reads one contiguous row).  ``log_prior[n, z]`` is the task's own log
prior: a classifier's log-probabilities (Raykar/AggNet, deepMF, BayesDGC:
Bayes' rule over the classifier and the answers), or one class prior
repeated over the tasks (Dawid--Skene).  A map ``latent_class[z]`` from
latent states to classes sums the latent posterior into the class
posterior :math:`P(y_n = c) = \sum_{z: \mathrm{class}(z) = c} q_n(z)`
(EBCC's subtypes of a class, Li, Rubinstein & Cohn, ICML 2019).  With
:math:`K_{latent} = K` and the identity map it is the square-confusion
E-step of Dawid--Skene (:func:`crowdagg.kernels.em.em_block`, the same
arithmetic: the same bits) and of the trainers' Bayes rule
(``Trainer._posterior``: ``log_table`` is ``log A`` transposed from
``[worker, true, observed]``).

Per block the kernel also gives, on request:

* the log-likelihood :math:`\sum_n \log Z_n` (always; a sum the engine
  reduces);
* **draws**: one latent state per task from :math:`q_n`, for Gibbs and
  other sampling methods.  A task's draw is keyed on the seed, the round
  (a chain's sweep) and the task's *name*: draw ``round`` of the task's
  stream (:mod:`.draws`, the stream of
  :class:`~crowdagg.methods.blocks.TieBreaker`'s tie draws) is the
  uniform the state is drawn by (inverse CDF over :math:`q_n` in state
  order).  So a draw depends on
  neither the block grid, the thread count nor the task's row;
* **expected counts** ``counts[w, l, z]`` :math:`= \sum_n q_n(z)
  1[(w, l) \in \mathcal{A}_n]` and the totals :math:`\sum_n q_n(z)` -- of the
  posteriors, or of the drawn states (one-hot) -- the statistics an M-step
  reads, reduced along the engine's tree (bit-identical for any thread
  count and any partitioning aligned with the grid).

``-inf`` in either array rules a state out (for that task, or for that
answer); NaN and ``+inf`` are refused.  A task that every state is ruled
out for has no posterior (its evidence is 0): a
:class:`~crowdagg.errors.DataError` naming it, never a row of NaN.  A task
without answers gets its normalised prior.

The library's entry is :func:`crowdagg.methods.blocks.latent_posterior`;
:func:`latent_block` is the block function it maps.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numba import njit

from ..errors import DataError, UsageError, param
from .draws import name_keys, seed_key, uniform
from .softmax import softmax_into
from .validate import as_code_array, as_float_array, check_block, check_part

#: What the fused counts are of: none, the posteriors, the drawn states.
_NO_COUNTS, _POSTERIOR_COUNTS, _DRAW_COUNTS = 0, 1, 2
COUNT_MODES = {None: _NO_COUNTS, "posterior": _POSTERIOR_COUNTS, "draws": _DRAW_COUNTS}

@njit(cache=True, nogil=True)
def _latent_block(
    start, stop, task_ptr, worker, label, log_prior, log_table, latent_class, n_classes, keys, draw_round,
    count_mode, keep, post, cpost, draws, counts, tot,
):  # pragma: no cover - compiled
    """The latent E-step of tasks ``[start, stop)``; returns (Σ log Z, a block-local task with Z = 0 or -1).

    ``log_prior`` (stop - start, KL): the block's rows.  ``log_table``
    (W, K, KL).  ``latent_class`` (KL,) or empty (no class posterior).
    ``keys`` (stop - start,) uint64 or empty (no draws).  ``keep``: write
    ``post[i]``, ``cpost[i]`` (when ``latent_class`` is given) and
    ``draws[i]``.  ``count_mode`` 1 adds q to ``counts[w, l, :]`` for each
    answer and to ``tot``; 2 adds 1 at the drawn state.  Stops at the first
    task with Z = 0 (every state -inf), its outputs unwritten.

    Offsets into the table are unsigned (no negative-index wrap test, as
    in :func:`crowdagg.kernels.em._em_block`), and the scores are
    normalised by :func:`~crowdagg.kernels.softmax.softmax_into`: per task
    the same operations in the same order as DS's E-step.
    """
    n_latent = log_table.shape[2]
    nl = np.uint64(n_latent)
    nk = np.uint64(log_table.shape[1])
    lt = log_table.reshape(-1)
    cnt = counts.reshape(-1)
    has_map = latent_class.shape[0] > 0
    has_draw = keys.shape[0] > 0
    q = np.empty(n_latent, dtype=np.float64)
    ll = 0.0
    for t in range(start, stop):
        i = t - start
        lo = task_ptr[t]
        hi = task_ptr[t + 1]
        for z in range(n_latent):
            q[z] = log_prior[i, z]
        for e in range(lo, hi):
            base = (np.uint64(worker[e]) * nk + np.uint64(label[e])) * nl
            for z in range(n_latent):
                q[z] += lt[base + np.uint64(z)]
        top = q[0]
        for z in range(1, n_latent):
            if q[z] > top:
                top = q[z]
        if top == -np.inf:  # every state ruled out: exp(-inf - -inf) would be NaN
            return ll, i
        m, s = softmax_into(q, q)
        ll += m + np.log(s)
        pick = -1
        if has_draw:
            u = uniform(keys[i], draw_round)
            total = 0.0
            for z in range(n_latent):
                total += q[z]
            target = u * total
            acc = 0.0
            for z in range(n_latent):
                acc += q[z]
                if q[z] > 0.0:
                    pick = z  # the last possible state, should rounding leave acc at or below the target
                    if acc > target:
                        break
        if keep:
            for z in range(n_latent):
                post[i, z] = q[z]
            if has_map:
                for c in range(n_classes):
                    cpost[i, c] = 0.0
                for z in range(n_latent):
                    cpost[i, latent_class[z]] += q[z]
            if has_draw:
                draws[i] = pick
        if count_mode == 1:
            for z in range(n_latent):
                tot[z] += q[z]
            for e in range(lo, hi):
                base = (np.uint64(worker[e]) * nk + np.uint64(label[e])) * nl
                for z in range(n_latent):
                    cnt[base + np.uint64(z)] += q[z]
        elif count_mode == 2:
            tot[pick] += 1.0
            for e in range(lo, hi):
                cnt[(np.uint64(worker[e]) * nk + np.uint64(label[e])) * nl + np.uint64(pick)] += 1.0
    return ll, -1


def _finite_or_minus_inf(arr: np.ndarray, name: str) -> None:
    """A DataError at the first NaN or +inf of a log-probability array (-inf rules a state out: allowed)."""
    bad = np.isnan(arr) | (arr == np.inf)
    if bad.any():
        at = np.unravel_index(int(np.flatnonzero(bad)[0]), arr.shape)
        raise DataError(f"{name}{list(map(int, at))} is {float(arr[at])!r}: a log-probability is finite or -inf")


@dataclass(frozen=True, eq=False)
class LatentParams:
    """What :func:`latent_block` computes a block's latent E-step from (broadcast to every block of a pass).

    Parameters
    ----------
    log_table : ndarray (n_workers, K, K_latent)
        ``log_table[w, l, z]``: log P(worker w answers class l | latent state z).
    log_prior : ndarray (n_tasks, K_latent)
        Each task's log prior over the latent states, global rows (each
        block reads its own).
    latent_class : ndarray of int (K_latent,), optional
        The class of each latent state (0 .. K-1): the blocks also give the
        class posterior (n_tasks, K).  None: no class posterior (the latent
        one is it).
    draw_seed : int, optional
        Draw one latent state per task from its posterior, keyed by
        (``draw_seed``, ``draw_round``, the task's name).
    draw_round : int
        Which draw of the task's stream (a Gibbs chain's sweep), >= 0.
    counts : {None, "posterior", "draws"}
        Also reduce the expected counts ``[worker, observed, latent]`` and
        the latent totals, of the posteriors or of the drawn states.

    Arrays are converted to contiguous float64 / int64 once, here, and
    checked (NaN and +inf refused); shapes against the data are checked by
    each block (O(1), the map's classes O(K_latent)).
    """

    log_table: np.ndarray
    log_prior: np.ndarray
    latent_class: np.ndarray | None = None
    draw_seed: int | None = None
    draw_round: int = 0
    counts: str | None = None

    def __post_init__(self) -> None:
        def put(name: str, value: Any) -> None:
            object.__setattr__(self, name, value)

        put("log_table", as_float_array(self.log_table, "log_table", 3))
        put("log_prior", as_float_array(self.log_prior, "log_prior", 2))
        _finite_or_minus_inf(self.log_table, "log_table")
        _finite_or_minus_inf(self.log_prior, "log_prior")
        n_latent = self.log_table.shape[2]
        if self.log_prior.shape[1] != n_latent:
            raise DataError(f"log_prior has {self.log_prior.shape[1]:,} latent states a task, log_table "
                            f"{n_latent:,} (shape {self.log_table.shape}: [worker, observed, latent])")
        if n_latent == 0:
            raise DataError("log_table has no latent states (its last axis is empty)")
        if self.latent_class is not None:
            codes = as_code_array(self.latent_class, "latent_class")
            if codes.shape != (n_latent,):
                raise DataError(f"latent_class maps {codes.shape[0]:,} latent states, the table has {n_latent:,}")
            if codes.size and int(codes.min()) < 0:
                raise DataError(f"latent_class holds {int(codes.min())}: classes are codes 0 .. K-1")
            put("latent_class", np.ascontiguousarray(codes, dtype=np.int64))
        if self.draw_seed is not None:
            if isinstance(self.draw_seed, bool) or not isinstance(self.draw_seed, (int, np.integer)):
                raise UsageError(f"{param('draw_seed')} must be an integer, got {self.draw_seed!r}")
            put("draw_seed", int(self.draw_seed))
        if isinstance(self.draw_round, bool) or not isinstance(self.draw_round, (int, np.integer)) \
                or not 0 <= self.draw_round < 2**63:
            raise UsageError(f"{param('draw_round')} must be an integer >= 0, got {self.draw_round!r}")
        put("draw_round", int(self.draw_round))
        if not (self.counts is None or isinstance(self.counts, str)) or self.counts not in COUNT_MODES:
            raise UsageError(f"{param('counts')} must be None, 'posterior' or 'draws', got {self.counts!r}")
        if self.counts == "draws" and self.draw_seed is None:
            raise UsageError(f"counts of the draws need a {param('draw_seed')}")


#: Stand-ins for the arrays a pass does not use (the kernel's argument types stay the same).
_NO_MAP = np.zeros(0, dtype=np.int64)
_NO_KEYS = np.zeros(0, dtype=np.uint64)


def _task_keys(part: Any, b: int, seed: int, start: int, stop: int) -> np.ndarray:
    """Block ``b``'s task keys under ``seed`` (:func:`~.draws.name_keys`, TieBreaker's), made once.

    Kept with the partition (8 bytes a task a seed): hashing the names
    costs ~0.2 s per million tasks, twice the E-step of their answers at five a task, and
    a chain draws under one seed for every sweep.  Each block is one
    thread's within a pass, so the cache is written without a lock.
    """
    if part.task_names is None:
        raise UsageError("latent draws are keyed by task name: this partition has no task names")
    name = f"latent_keys:{seed}:{b}"
    keys = part._built.get(name)
    if keys is None:
        keys = name_keys(part.task_names[np.arange(start, stop)], seed_key(seed))
        part._built[name] = keys
    return keys


def latent_block(part: Any, b: int, params: LatentParams, keep: bool = False) -> tuple[tuple[Any, ...], Any]:
    """The latent E-step of block ``b`` of the partition ``part`` (a :class:`crowdagg.engine.Part`): a block function.

    Parameters
    ----------
    part : Part
    b : int
        Local block index.
    params : LatentParams
    keep : bool
        Return the block's rows.

    Returns
    -------
    sums : tuple
        ``(loglik,)``, or ``(loglik, counts, latent_tot)`` when
        ``params.counts`` is set: fresh arrays (n_workers, K, K_latent) and
        (K_latent,).
    out : dict or None
        When ``keep``: ``"latent"`` (its tasks, K_latent), and
        ``"classes"`` (its tasks, K) with a ``latent_class``, ``"draws"``
        (its tasks,) int64 with a ``draw_seed``.
    """
    if not isinstance(params, LatentParams):
        raise UsageError(f"latent_block takes LatentParams, got {type(params).__name__}")
    check_part(part)
    w, k = int(part.n_workers), int(part.n_classes)
    b = check_block(part, b)
    table = params.log_table
    n_latent = table.shape[2]
    if table.shape[:2] != (w, k):
        raise DataError(f"log_table has shape {table.shape}, the data's [worker, observed, latent] is "
                        f"({w:,}, {k:,}, K_latent)")
    start, stop = part.tasks_of(b)
    lo, hi = part.first_task + start, part.first_task + stop
    need = part.first_task + part.n_tasks
    if params.log_prior.shape[0] < need:
        raise DataError(f"log_prior has {params.log_prior.shape[0]:,} rows, the data has {need:,} tasks")
    latent_class = _NO_MAP
    if params.latent_class is not None:
        latent_class = params.latent_class
        if int(latent_class.max()) >= k:
            raise DataError(f"latent_class holds {int(latent_class.max())}, not one of the data's {k} classes")
    keys = _NO_KEYS
    if params.draw_seed is not None:
        keys = _task_keys(part, b, params.draw_seed, start, stop)
    n = stop - start
    mode = COUNT_MODES[params.counts]
    counts = np.zeros((w, k, n_latent)) if mode else np.zeros((0, 0, 0))
    tot = np.zeros(n_latent) if mode else np.zeros(0)
    post = np.empty((n, n_latent)) if keep else np.empty((0, n_latent))
    cpost = np.empty((n, k)) if keep and params.latent_class is not None else np.empty((0, k))
    draws = np.empty(n, dtype=np.int64) if keep and params.draw_seed is not None else np.empty(0, dtype=np.int64)
    ll, bad = _latent_block(start, stop, part.task_ptr, part.worker, part.label, params.log_prior[lo:hi], table,
                            latent_class, k, keys, params.draw_round, mode, keep, post, cpost, draws, counts, tot)
    if bad >= 0:
        name = "" if part.task_names is None else f" ({str(part.task_names[start + bad])!r})"
        raise DataError(f"task {lo + bad}{name}: every latent state has probability 0 under its prior and its "
                        "answers (log_prior + log_table are -inf for all of them), so it has no posterior")
    sums = (float(ll), counts, tot) if mode else (float(ll),)
    if not keep:
        return sums, None
    out = {"latent": post}
    if params.latent_class is not None:
        out["classes"] = cpost
    if params.draw_seed is not None:
        out["draws"] = draws
    return sums, out


__all__ = ["COUNT_MODES", "LatentParams", "latent_block"]
