r"""Karger--Oh--Shah message passing on the engine's block protocol (:mod:`crowdagg.engine`): two block functions.

Binary answers :math:`L_{ij} = \pm 1` (class code 1 is +1, code 0 is -1) on
the edges of the worker--task graph (Karger, Oh & Shah 2011/2014;
ALGORITHMS.md §6.6).  One round of messages, each edge ``e = (i, j)``:

.. math:: y_{j \to i} = \sum_{i' \in \partial j \setminus i} L_{i'j}\, x_{i' \to j}
          = T_j - L_{ij}\, x_{i \to j}, \qquad
          x_{i \to j} = \sum_{j' \in \partial i \setminus j} L_{ij'}\, y_{j' \to i}
          = S_i - L_{ij}\, y_{j \to i}

with :math:`T_j = \sum_{i \in \partial j} L_{ij}\, x_{i \to j}` (worker j's
total message) and :math:`S_i = \sum_{j \in \partial i} L_{ij}\, y_{j \to i}`
(task i's belief, whose sign is its decision): leave-one-out sums as a
total minus the edge's own term, O(1) per edge, O(L) per round.

A round is two passes over the task-ordered blocks:

* :func:`kos_round_block`: per edge the own-edge subtraction
  :math:`\hat y_e = T_j - L_e x_e` (from the last round's totals, a vector
  over the workers), per task :math:`\hat S_i` and :math:`\hat x_e = \hat S_i
  - L_e \hat y_e`, and the sums: the new worker totals :math:`\hat T_j =
  \sum L_e \hat x_e` over free tasks, a dense per-worker accumulator like
  EM's expected counts (a heavy worker spread over many blocks is added by
  the reduction tree), and the largest :math:`|\hat y|` (a :class:`Max`,
  exact in any order);
* :func:`kos_normalise_block`: every message divided by that largest
  :math:`|\hat y|` -- normalised every round, so nothing overflows however
  many rounds run (crowd-kit's grow geometrically and stop once a sum
  passes 1e300) -- the largest change of y since the last round (the stop
  rule's residual), and the gold: a clamped task sends ``±gold`` on each
  edge.  The caller adds the gold edges' constant share to the totals.

The worker totals are summed in the task pass rather than in a pass over
the worker-ordered grid: adding into a vector of workers is a scattered
write into a few MB, while a worker pass must gather every message through
the answers' worker order (1M answers: ~10 ms against ~48 ms a round on
the development machine).  Messages are per-edge outputs in task order
that stay with their task block (``keep``).  Every sum is added along the
engine's fixed tree and a maximum is exact, so a round gives the same bits
for any thread count.

**One block** (a crowd with many workers for its answers, e.g. deepBP's
sparse graph: 250,000 workers make the standard grid one block of 1M
answers): the per-worker sums need no tree, and a round is
:func:`whole_round` -- both functions' work in one pass over buffers kept
from round to round (the last round's normalisation read on the fly as
``x_hat * scale``, no array allocated per round), the totals of the answer
:data:`AHEAD` on prefetched (:mod:`.prefetch`), since 2.5 million workers'
totals outgrow the caches and every answer reads a random one -- then
:func:`whole_settle` (the residual, the totals scaled).  With several
threads the same round can run split (:class:`Split`): the task pass over
task ranges side by side, then each worker's total summed in the worker
order (each worker's answers in task order: the same additions in the same
order) over worker ranges.  Every value is computed as the block functions
compute it: the same bits, whichever way and on however many threads.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numba import njit

from ..errors import DataError
from .prefetch import prefetch
from .validate import check_block, check_part

__all__ = ["Max", "Normalise", "Round", "kos_normalise_block", "kos_round_block"]


class Max:
    """A maximum as a reducible sum (:func:`crowdagg.engine.tree.add` adds by ``+``): exact in any order."""

    __slots__ = ("value",)

    def __init__(self, value: float) -> None:
        self.value = float(value)

    def __add__(self, other: Max) -> Max:
        return Max(max(self.value, other.value))


# ----------------------------------------------------------------------------- kernels
@njit(cache=True, nogil=True)
def _round(start, stop, task_ptr, worker, label, from_y, y_in, x, clamp, y_hat, x_hat, belief, totals
           ):  # pragma: no cover - compiled
    """Tasks ``[start, stop)``: y_hat, the beliefs, x_hat, the free tasks' worker totals; returns max |y_hat|.

    ``totals`` (n_workers, 2): column 0 the last round's totals (read),
    column 1 this block's new ones (added to) -- side by side, so that an
    answer's worker costs one cache line, not two, in a scattered access.
    ``from_y``: y_hat is ``y_in`` (the start's draw) instead of ``T_j - L_e
    x_e``.  Per-edge arrays are the block's (index ``e - task_ptr[start]``);
    ``clamp`` empty: no gold.
    """
    base = task_ptr[start]
    has_clamp = clamp.shape[0] > 0
    top = 0.0
    for t in range(start, stop):
        lo = task_ptr[t]
        hi = task_ptr[t + 1]
        s = 0.0
        for e in range(lo, hi):
            i = e - base
            if from_y:
                v = y_in[i]
            elif label[e] == 1:
                v = totals[worker[e], 0] - x[i]
            else:
                v = totals[worker[e], 0] + x[i]
            y_hat[i] = v
            a = abs(v)
            if a > top:
                top = a
            s += v if label[e] == 1 else -v
        belief[t - start] = s
        gold = has_clamp and clamp[t - start] >= 0
        for e in range(lo, hi):
            i = e - base
            if label[e] == 1:
                v = s - y_hat[i]
                if not gold:
                    totals[worker[e], 1] += v
            else:
                v = s + y_hat[i]
                if not gold:
                    totals[worker[e], 1] -= v
            x_hat[i] = v
    return top


@njit(cache=True, inline="always")
def _task_message(g, gold, value):  # pragma: no cover - compiled
    """A task's message on one of its edges: ``+gold`` on a task clamped to class 1 (``g == 1``), ``-gold`` to
    class 0, else ``value`` (its scaled x_hat)."""
    if g == 1:
        return gold
    if g == 0:
        return -gold
    return value


@njit(cache=True, nogil=True)
def _normalise(start, stop, task_ptr, y_hat, x_hat, scale, y_prev, clamp, gold, y, x):  # pragma: no cover - compiled
    """Tasks ``[start, stop)``: y = scale y_hat, x = scale x_hat (± ``gold`` on a clamped task's edges); returns the
    largest |y - y_prev| (0 when ``y_prev`` is empty)."""
    base = task_ptr[start]
    has_prev = y_prev.shape[0] > 0
    has_clamp = clamp.shape[0] > 0
    res = 0.0
    for t in range(start, stop):
        g = clamp[t - start] if has_clamp else -1
        for i in range(task_ptr[t] - base, task_ptr[t + 1] - base):
            v = y_hat[i] * scale
            y[i] = v
            if has_prev:
                d = abs(v - y_prev[i])
                if d > res:
                    res = d
            x[i] = _task_message(g, gold, x_hat[i] * scale)
    return res


#: How many answers ahead :func:`_whole_round` prefetches a worker's totals (a few hundred ns of memory latency
#: over ~10 ns an answer).
AHEAD = 64


@njit(cache=True, nogil=True)
def _whole_round(task_ptr, worker, label, from_y, y_in, xh, x_scale, clamp, gold, tw, yh, s_out
                 ):  # pragma: no cover - compiled
    """Every task in order, one pass: :func:`_round` and the last round's normalisation fused; returns max |y_hat|.

    For a partition of one block (the whole set), where the per-worker sums
    need no tree.  The last round's x is read as ``xh[e] * x_scale`` (its
    unnormalised x_hat times its scale; ``±gold`` on a clamped task) -- the
    same product :func:`_normalise` stored -- and this round's x_hat is
    written over it, in place.  ``tw`` (n_workers, 2): column 0 the last
    round's totals, column 1 this round's (added to, from 0); ``yh`` this
    round's y_hat; ``s_out`` (n_tasks,) the unnormalised beliefs.  Every sum
    is added in the order :func:`_round` adds it, and a term ``±v`` as
    ``sign * v`` (``sign = ±1.0``, exact), so the bits are the same;
    without branches on the answers' labels (a sparse crowd's labels are
    coin flips to the branch predictor), and with the totals of the answer
    :data:`AHEAD` answers on prefetched (:mod:`.prefetch`): on 2.5M workers
    the totals outgrow the caches, and every answer reads a random worker's.
    """
    has_clamp = clamp.shape[0] > 0
    n = worker.shape[0]
    flat = tw.reshape(-1)  # (a view: prefetch takes 1-D arrays)
    top = 0.0
    for t in range(task_ptr.shape[0] - 1):
        lo = task_ptr[t]
        hi = task_ptr[t + 1]
        g = clamp[t] if has_clamp else -1
        s = 0.0
        for e in range(lo, hi):
            sign = 2.0 * label[e] - 1.0
            if from_y:
                v = y_in[e]
            else:
                if e + AHEAD < n:
                    prefetch(flat, 2 * np.int64(worker[e + AHEAD]))
                x = _task_message(g, gold, xh[e] * x_scale)
                v = tw[worker[e], 0] - sign * x
            yh[e] = v
            a = abs(v)
            if a > top:
                top = a
            s += sign * v
        s_out[t] = s
        for e in range(lo, hi):
            sign = 2.0 * label[e] - 1.0
            v = s - sign * yh[e]
            if g < 0:
                tw[worker[e], 1] += sign * v
            xh[e] = v
    return top


@njit(cache=True, nogil=True)
def _whole_settle(yh, scale, y_prev, prev_scale, tw, gold_totals):  # pragma: no cover - compiled
    """After :func:`_whole_round`: the largest ``|yh scale - y_prev prev_scale|`` (0 when ``y_prev`` is empty) --
    :func:`_normalise`'s residual from the unnormalised messages -- and the totals moved on: ``tw[:, 0] =
    tw[:, 1] scale + gold_totals`` (``+ 0.0`` when ``gold_totals`` is empty: no gold), ``tw[:, 1] = 0``."""
    res = 0.0
    if y_prev.shape[0] > 0:
        for i in range(yh.shape[0]):
            d = abs(yh[i] * scale - y_prev[i] * prev_scale)
            if d > res:
                res = d
    has_gold = gold_totals.shape[0] > 0
    for w in range(tw.shape[0]):
        tw[w, 0] = tw[w, 1] * scale + (gold_totals[w] if has_gold else 0.0)
        tw[w, 1] = 0.0
    return res


@njit(cache=True, nogil=True)
def _split_tasks(t0, t1, task_ptr, worker, label, from_y, y_in, xh, x_scale, clamp, gold, totals, yh, s_out
                 ):  # pragma: no cover - compiled
    """Tasks ``[t0, t1)`` of :func:`_whole_round` without the per-worker sums (:func:`_split_workers` adds them,
    in a pass of its own): y_hat into ``yh``, x_hat over ``xh``, the beliefs into ``s_out``; returns max |y_hat|.

    ``totals`` (n_workers,) the last round's (read only, so that threads run task ranges side by side), the
    totals of the answer :data:`AHEAD` on prefetched."""
    has_clamp = clamp.shape[0] > 0
    end = task_ptr[t1]
    top = 0.0
    for t in range(t0, t1):
        lo = task_ptr[t]
        hi = task_ptr[t + 1]
        g = clamp[t] if has_clamp else -1
        s = 0.0
        for e in range(lo, hi):
            sign = 2.0 * label[e] - 1.0
            if from_y:
                v = y_in[e]
            else:
                if e + AHEAD < end:
                    prefetch(totals, worker[e + AHEAD])
                x = _task_message(g, gold, xh[e] * x_scale)
                v = totals[worker[e]] - sign * x
            yh[e] = v
            a = abs(v)
            if a > top:
                top = a
            s += sign * v
        s_out[t] = s
        for e in range(lo, hi):
            xh[e] = s - (2.0 * label[e] - 1.0) * yh[e]
    return top


@njit(cache=True, nogil=True)
def _split_workers(w0, w1, worker_ptr, order, wlabel, xh, scale, gold_totals, totals, e0, e1, yh, y_prev,
                   prev_scale):  # pragma: no cover - compiled
    """After :func:`_split_tasks` over every task: workers ``[w0, w1)``'s totals and answers ``[e0, e1)``'s residual.

    ``totals[w] = (Σ sign x_hat) scale + gold_totals[w]`` (``+ 0.0`` when
    ``gold_totals`` is empty) over the worker's
    answers of free tasks (``wlabel`` -- the labels in the worker order
    ``order`` -- is -1 on a clamped task's), added from 0 in the worker
    order, which is each worker's answers in task order: the sum
    :func:`_whole_round` adds answer by answer, the same bits.  The x_hat
    of the answer :data:`AHEAD` on is prefetched.  Returns the largest
    ``|yh scale - y_prev prev_scale|`` over ``[e0, e1)`` (0 when ``y_prev``
    is empty)."""
    end = worker_ptr[w1]
    has_gold = gold_totals.shape[0] > 0
    for w in range(w0, w1):
        acc = 0.0
        for k in range(worker_ptr[w], worker_ptr[w + 1]):
            if k + AHEAD < end:
                prefetch(xh, order[k + AHEAD])
            lab = wlabel[k]
            if lab >= 0:
                acc += (2.0 * lab - 1.0) * xh[order[k]]
        totals[w] = acc * scale + (gold_totals[w] if has_gold else 0.0)
    res = 0.0
    if y_prev.shape[0] > 0:
        for i in range(e0, e1):
            d = abs(yh[i] * scale - y_prev[i] * prev_scale)
            if d > res:
                res = d
    return res


@njit(cache=True, nogil=True)
def _x_top(task_ptr, xh, scale, clamp, gold):  # pragma: no cover - compiled
    """``np.abs(x).max()`` of the messages x (``xh * scale``, ``±gold`` on a clamped task) without building x:
    NaN when any is (as NumPy's maximum), 0 without answers."""
    has_clamp = clamp.shape[0] > 0
    top = 0.0
    for t in range(task_ptr.shape[0] - 1):
        g = clamp[t] if has_clamp else -1
        for e in range(task_ptr[t], task_ptr[t + 1]):
            a = abs(gold) if g >= 0 else abs(xh[e] * scale)
            if a != a:
                return a
            if a > top:
                top = a
    return top


# ----------------------------------------------------------------------------- parameters
@dataclass(frozen=True, eq=False)
class Round:
    """:func:`kos_round_block`'s inputs.

    totals : ndarray (n_workers,)
        The workers' total messages of the last round (gold included).
    x : list of ndarray
        Each task block's x messages of the last round (its answers, task order).
    y0 : list of ndarray, or None
        The start: each block's drawn y, used as y_hat (``totals`` and ``x`` unread).
    clamp : ndarray of int64 (n_tasks,), or None
        Gold class per task (0 or 1; -1 free): those tasks add nothing to the totals.
    """

    totals: np.ndarray
    x: list[np.ndarray] | None
    y0: list[np.ndarray] | None = None
    clamp: np.ndarray | None = None


@dataclass(frozen=True, eq=False)
class Normalise:
    """:func:`kos_normalise_block`'s inputs: each block's y_hat and x_hat, the ``scale`` (1 / largest |y_hat|),
    the previous normalised y (None: no residual), the gold ``clamp`` (n_tasks,) and the message ``gold`` a
    clamped task sends."""

    y_hat: list[np.ndarray]
    x_hat: list[np.ndarray]
    scale: float
    y_prev: list[np.ndarray] | None = None
    clamp: np.ndarray | None = None
    gold: float = 1.0


_NO_ARRAY = np.zeros(0)
_NO_CLAMP = np.zeros(0, dtype=np.int64)


def _block(part: object, b: int) -> tuple[int, int, int, int]:
    """Block ``b`` checked (the partition once, its classes binary): (b, first task, last task + 1, answers)."""
    check_part(part)
    if int(part.n_classes) != 2:  # type: ignore[attr-defined]
        raise DataError(f"KOS message passing is binary: these answers have {int(part.n_classes)} classes")  # type: ignore[attr-defined]
    b = check_block(part, b)
    start, stop = part.tasks_of(b)  # type: ignore[attr-defined]
    lo, hi = part.answers_of(b)  # type: ignore[attr-defined]
    return b, start, stop, hi - lo


def _per_edge(arrays: list[np.ndarray] | None, b: int, n: int, name: str) -> np.ndarray:
    if arrays is None:
        return _NO_ARRAY
    arr = np.asarray(arrays[b], dtype=np.float64)
    if arr.shape != (n,):
        raise DataError(f"{name} of block {b} has shape {arr.shape}, its answers need ({n:,},)")
    return arr


def _clamp(part: object, clamp: np.ndarray | None, start: int, stop: int) -> np.ndarray:
    if clamp is None:
        return _NO_CLAMP
    first = int(part.first_task)  # type: ignore[attr-defined]
    if len(clamp) < first + int(part.n_tasks):  # type: ignore[attr-defined]
        raise DataError(f"clamp holds {len(clamp):,} tasks, the data has {first + int(part.n_tasks):,}")  # type: ignore[attr-defined]
    out = np.ascontiguousarray(clamp[first + start:first + stop], dtype=np.int64)
    if out.size and (int(out.min()) < -1 or int(out.max()) > 1):
        raise DataError("clamp holds a class outside -1 .. 1 (KOS is binary)")
    return out


# ----------------------------------------------------------------------------- block functions
def kos_round_block(part: object, b: int, params: Round, keep: bool = False
                    ) -> tuple[tuple[np.ndarray, Max], tuple[np.ndarray, np.ndarray, np.ndarray] | None]:
    r"""Block ``b`` of a task-ordered partition: one round's unnormalised messages.

    Returns ``((totals, Max), out)``: the free tasks' :math:`\sum L_e \hat
    x_e` per worker (n_workers,) and the largest :math:`|\hat y|`; ``out``
    when ``keep``: the block's ``(y_hat, x_hat)`` (block answers,) and
    :math:`\hat S` (block tasks,).
    """
    b, start, stop, n = _block(part, b)
    w = int(part.n_workers)  # type: ignore[attr-defined]
    from_y = params.y0 is not None
    y_in = _per_edge(params.y0, b, n, "y0")
    x = _NO_ARRAY if from_y else _per_edge(params.x, b, n, "x")
    totals = np.asarray(params.totals, dtype=np.float64)
    if not from_y and totals.shape != (w,):
        raise DataError(f"totals has shape {totals.shape}, the workers need ({w:,},)")
    clamp = _clamp(part, params.clamp, start, stop)
    both = np.zeros((w, 2))
    if not from_y:
        both[:, 0] = totals
    y_hat, x_hat, belief = np.empty(n), np.empty(n), np.empty(stop - start)
    top = _round(start, stop, part.task_ptr, part.worker, part.label, from_y, y_in, x, clamp,  # type: ignore[attr-defined]
                 y_hat, x_hat, belief, both)
    return (np.ascontiguousarray(both[:, 1]), Max(top)), ((y_hat, x_hat, belief) if keep else None)


def kos_normalise_block(part: object, b: int, params: Normalise, keep: bool = False
                        ) -> tuple[Max, tuple[np.ndarray, np.ndarray] | None]:
    r"""Block ``b`` of a task-ordered partition: the normalised messages and the largest change of y.

    Returns ``(Max(largest |y - y_prev|), (y, x))``, the block's y and x
    (block answers,) when ``keep``.
    """
    b, start, stop, n = _block(part, b)
    y_hat = _per_edge(params.y_hat, b, n, "y_hat")
    x_hat = _per_edge(params.x_hat, b, n, "x_hat")
    y_prev = _per_edge(params.y_prev, b, n, "y_prev")
    if not (np.isfinite(params.scale) and np.isfinite(params.gold)):
        raise DataError(f"scale {params.scale!r} and gold {params.gold!r} must be finite")
    clamp = _clamp(part, params.clamp, start, stop)
    y, x = np.empty(n), np.empty(n)
    res = _normalise(start, stop, part.task_ptr, y_hat, x_hat, float(params.scale), y_prev, clamp,  # type: ignore[attr-defined]
                     float(params.gold), y, x)
    return Max(res), ((y, x) if keep else None)


# ----------------------------------------------------------------------------- one block, fused
def whole_buffers(part: object, clamp: np.ndarray | None
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The buffers of :func:`whole_round` over a partition that is the whole grid's one block (checked, binary):
    ``(clamp, tw, xh, yh, yh_free, s)`` -- the gold clamp (n_tasks,) int64 or empty, the totals (n_workers, 2)
    zeroed, three per-answer and one per-task float arrays."""
    _, start, stop, n = _block(part, 0)
    if int(part.n_blocks_total) != 1 or start != 0 or stop != int(part.n_tasks):  # type: ignore[attr-defined]
        raise DataError("the fused KOS round runs over a grid of one block")
    w = int(part.n_workers)  # type: ignore[attr-defined]
    return (_clamp(part, clamp, start, stop), np.zeros((w, 2)), np.empty(n), np.empty(n), np.empty(n),
            np.empty(stop - start))


def whole_round(part: object, y0: np.ndarray | None, xh: np.ndarray, x_scale: float, clamp: np.ndarray, gold: float,
                tw: np.ndarray, yh: np.ndarray, s: np.ndarray) -> float:
    r"""One round of :func:`kos_round_block` and the last round's :func:`kos_normalise_block` in one pass over
    the one block of ``part`` (buffers from :func:`whole_buffers`); returns the largest :math:`|\hat y|`.

    ``y0`` (n_answers,): the start's draw (then ``xh`` and ``tw``'s totals
    are unread); else the last round's x is ``xh * x_scale`` (``±gold`` on
    a clamped task).  Writes this round's x_hat into ``xh``, y_hat into
    ``yh``, the unnormalised beliefs into ``s`` and the free tasks' sums
    into ``tw[:, 1]`` (zero before the call).
    """
    n = xh.shape[0]
    for name, arr in (("xh", xh), ("yh", yh)) + ((("y0", y0),) if y0 is not None else ()):
        if arr.shape != (n,) or arr.dtype != np.float64 or not arr.flags.c_contiguous:
            raise DataError(f"{name} must be a contiguous float64 array of the {n:,} answers")
    if not (np.isfinite(x_scale) and np.isfinite(gold)):
        raise DataError(f"scale {x_scale!r} and gold {gold!r} must be finite")
    if tw.shape != (int(part.n_workers), 2) or s.shape != (int(part.n_tasks),):  # type: ignore[attr-defined]
        raise DataError("the totals must be (n_workers, 2) and the beliefs (n_tasks,)")
    return float(_whole_round(part.task_ptr, part.worker, part.label, y0 is not None,  # type: ignore[attr-defined]
                              _NO_ARRAY if y0 is None else y0, xh, float(x_scale), clamp, float(gold), tw, yh, s))


def x_top(part: Any, xh: np.ndarray, scale: float, clamp: np.ndarray, gold: float) -> float:
    """The largest |x| of the messages :func:`whole_round` leaves in ``xh`` with their ``scale`` (``±gold`` on a
    clamped task), as ``np.abs(x).max()`` of the built messages gives it."""
    if xh.shape != (int(part.n_answers),) or (clamp.size and clamp.shape != (int(part.n_tasks),)):
        raise DataError("xh must hold the answers and clamp the tasks (or nothing)")
    return float(_x_top(part.task_ptr, xh, float(scale), clamp, float(gold)))


def whole_settle(yh: np.ndarray, scale: float, y_prev: np.ndarray | None, prev_scale: float, tw: np.ndarray,
                 gold_totals: np.ndarray) -> float:
    """After :func:`whole_round`: the round's residual (largest change of the normalised y; 0 without ``y_prev``,
    the last round's y_hat, normalised by ``prev_scale``) and the totals moved on (:func:`_whole_settle`)."""
    prev = _NO_ARRAY if y_prev is None else y_prev
    if prev.size and prev.shape != yh.shape:
        raise DataError(f"y_prev has shape {prev.shape}, y_hat {yh.shape}")
    gold_totals = np.ascontiguousarray(gold_totals, dtype=np.float64)
    if gold_totals.shape != (tw.shape[0],) and gold_totals.size:
        raise DataError(f"gold_totals has shape {gold_totals.shape}, the workers need ({tw.shape[0]:,},) (or none)")
    return float(_whole_settle(yh, float(scale), prev, float(prev_scale), tw, gold_totals))


class Split:
    """:func:`whole_round`'s work for ``n`` threads over a grid of one block: the task ranges of
    :func:`_split_tasks`, then the worker and answer ranges of :func:`_split_workers` (each about ``1/n`` of the
    answers), and the labels in the worker order (-1 on a clamped task's answers).

    The same messages and totals as :func:`whole_round` and :func:`whole_settle`, bit for bit, for any ``n``:
    every value is computed alone (its sum in the same order), and the maxima are exact.  Two random reads an
    answer (a worker's totals by task, an answer's x_hat by worker) against the fused round's one, but on every
    thread.
    """

    def __init__(self, part: Any, worker_part: Any, clamp: np.ndarray, n: int) -> None:
        _, start, stop, n_answers = _block(part, 0)
        task_ptr = np.asarray(part.task_ptr)
        order = np.asarray(worker_part.order)
        worker_ptr = np.asarray(worker_part.worker_ptr, dtype=np.int64)
        if int(part.n_blocks_total) != 1 or start != 0 or stop != int(part.n_tasks) or order.shape != (n_answers,) \
                or worker_ptr.shape != (int(part.n_workers) + 1,) or int(worker_ptr[-1]) != n_answers:
            raise DataError("the split KOS round runs over a grid of one block and its answers' worker order")
        self.order, self.worker_ptr = np.ascontiguousarray(order, dtype=np.int64), worker_ptr
        wlabel = np.asarray(part.label)[self.order].astype(np.int8)
        if clamp.size:
            wlabel[(np.repeat(clamp, np.diff(task_ptr)) >= 0)[self.order]] = -1
        self.wlabel = wlabel
        targets = np.linspace(0, n_answers, n + 1)
        self.tasks = np.maximum.accumulate(np.searchsorted(task_ptr, targets).clip(0, stop))
        self.workers = np.maximum.accumulate(np.searchsorted(worker_ptr, targets).clip(0, len(worker_ptr) - 1))
        self.tasks[0], self.tasks[-1], self.workers[0], self.workers[-1] = 0, stop, 0, len(worker_ptr) - 1
        self.answers = targets.astype(np.int64)
        self.n = n

    def round(self, run: Any, part: Any, y0: np.ndarray | None, xh: np.ndarray, x_scale: float,
              clamp: np.ndarray, gold: float, totals: np.ndarray, yh: np.ndarray, s: np.ndarray) -> float:
        """:func:`whole_round` over the task ranges, ``run(fn, n)`` calling ``fn(i)`` for ``i < n`` on threads and
        returning their results; ``totals`` (n_workers,) the last round's.  Returns the largest |y_hat|."""
        y_in = _NO_ARRAY if y0 is None else y0

        def one(i: int) -> float:
            return float(_split_tasks(int(self.tasks[i]), int(self.tasks[i + 1]), part.task_ptr,
                                      part.worker, part.label, y0 is not None, y_in, xh, float(x_scale),
                                      clamp, float(gold), totals, yh, s))

        return max(run(one, self.n))

    def settle(self, run: Any, xh: np.ndarray, scale: float, gold_totals: np.ndarray, totals: np.ndarray,
               yh: np.ndarray, y_prev: np.ndarray | None, prev_scale: float) -> float:
        """After :meth:`round`: the totals (:func:`_split_workers`) and the residual (as :func:`whole_settle`)."""
        prev = _NO_ARRAY if y_prev is None else y_prev

        def one(i: int) -> float:
            return float(_split_workers(int(self.workers[i]), int(self.workers[i + 1]), self.worker_ptr, self.order,
                                        self.wlabel, xh, float(scale), gold_totals, totals, int(self.answers[i]),
                                        int(self.answers[i + 1]), yh, prev, float(prev_scale)))

        return max(run(one, self.n))
