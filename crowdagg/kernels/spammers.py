"""Kernels of the cross-covariance spammer detector (:mod:`crowdagg.reports.spammers`, ALGORITHMS.md §7.1).

The detector fits ``Ĉ ≈ V Vᵀ`` to the stacked K×K cross-covariance blocks
``Ĉ_{mm'}`` of the co-labelled worker pairs, the diagonal blocks and the
pairs that share too few tasks being unknown (an unknown block is filled
with the current ``V_m V_{m'}ᵀ``: :func:`crowdagg.reports.spammers.fit_low_rank`).  Nothing here holds the
MK × MK matrix: the filled matrix times a block of r vectors is

    X Q = V (Vᵀ Q) + Σ over observed pairs of (Ĉ_{mm'} − V_m V_{m'}ᵀ) Q_{m'}  (and the transposed term),

one pass over the P observed pairs (:func:`apply_filled`, O(P K² r)).

The permutation null of the detector needs, for each answer ``a`` (worker
m, task t), the r-vector ``g_a = Σ over m's observed partners m' on t of
(U_{m'}[y_{m't}] − U_{m'}ᵀ μ_{m'|m}) / n_{mm'}``: the row block
``Σ_{m'} Ĉ_{mm'} U_{m'}`` is then ``Σ_a e_{y_a} g_aᵀ``, linear in m's
one-hot answers, so permuting m's answers among its tasks only permutes
which class row each ``g_a`` lands in, and the mean square over all
permutations has a closed form in ``Σ_a ‖T_mᵀ g_a‖²`` (:func:`null_energy`).
:func:`answer_terms_block` computes ``g`` per answer over the engine's task
grid (outputs per answer that stay with their block).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numba import njit

from ..errors import DataError
from .cooc import _check_lookup, _pair_id, _runs


def apply_filled(pairs: Any, cov: Any, v: Any, q: Any, out: Any) -> None:
    """``out += Σ_p (cov[p] − V_a V_bᵀ) Q_b`` into block a and its transpose into block b, pair p = (a, b).

    ``pairs`` (P, 2) worker positions in the fit, ``cov`` (P, K, K), ``v`` (M, K, rank), ``q`` and ``out`` (M, K, r)
    (added to: the caller puts ``V (Vᵀ Q)`` there first).  Checked here (a :class:`~crowdagg.errors.DataError`
    for a shape or a pair outside the M workers: the compiled pass reads without bounds checks), then one serial
    pass in pair order (:func:`_apply_filled`): the same bits for any thread count.
    """
    from .validate import as_code_array, as_float_array, check_out_array

    pairs = np.asarray(pairs)
    if pairs.ndim != 2 or pairs.shape[1] != 2:
        raise DataError(f"pairs must be (P, 2), got shape {pairs.shape}")
    pairs = np.ascontiguousarray(as_code_array(pairs.reshape(-1), "pairs"), dtype=np.int64).reshape(-1, 2)
    cov = as_float_array(cov, "cov", 3)
    v = as_float_array(v, "v", 3)
    q = as_float_array(q, "q", 3)
    out = check_out_array(out, "out", 3)
    m, k = v.shape[0], v.shape[1]
    if cov.shape != (pairs.shape[0], k, k) or q.shape[:2] != (m, k) or out.shape != q.shape:
        raise DataError(f"apply_filled: shapes pairs {pairs.shape}, cov {cov.shape}, v {v.shape}, q {q.shape}, "
                        f"out {out.shape} do not agree (cov (P, K, K), v (M, K, rank), q and out (M, K, r))")
    if pairs.size and (int(pairs.min()) < 0 or int(pairs.max()) >= m):
        raise DataError(f"pairs holds a worker position outside 0 .. {m - 1:,}")
    _apply_filled(pairs, cov, v, q, out)


@njit(cache=True, nogil=True)
def _apply_filled(pairs, cov, v, q, out):  # pragma: no cover - compiled
    """``out += Σ_p (cov[p] − V_a V_bᵀ) Q_b`` into block a and its transpose into block b, pair p = (a, b).

    ``pairs`` (P, 2) worker positions in the fit, ``cov`` (P, K, K), ``v`` (M, K, rank), ``q`` and ``out`` (M, K, r)
    (added to: the caller puts ``V (Vᵀ Q)`` there first).  One serial pass in pair order: the same bits for any
    thread count.
    """
    n_pairs = pairs.shape[0]
    k = cov.shape[1]
    rank = v.shape[2]
    r = q.shape[2]
    res = np.empty((k, k))
    for p in range(n_pairs):
        a = pairs[p, 0]
        b = pairs[p, 1]
        for i in range(k):
            for j in range(k):
                s = 0.0
                for c in range(rank):
                    s += v[a, i, c] * v[b, j, c]
                res[i, j] = cov[p, i, j] - s
        for i in range(k):
            for c in range(r):
                s_ab = 0.0
                s_ba = 0.0
                for j in range(k):
                    s_ab += res[i, j] * q[b, j, c]
                    s_ba += res[j, i] * q[a, j, c]
                out[a, i, c] += s_ab
                out[b, i, c] += s_ba


@njit(cache=True, nogil=True)
def _answer_terms(task_ptr, worker, label, t0, t1, n_workers, index, ranked, table, terms,
                  out):  # pragma: no cover - compiled
    """``out[a - task_ptr[t0]] = g_a`` for the answers of tasks [t0, t1) (see the module notes).

    ``terms`` (P, 2, K + 1, r), one record per pair p = (w1, w2) (one memory line for small K and r: the pairs
    are read in task order, at random): ``terms[p, 0, y] = U_{w2}[y] / n_p`` is what w2's answer y adds to w1's
    answer and ``terms[p, 0, K] = U_{w2}ᵀ μ_{w2} / n_p`` the centring term subtracted with it; ``terms[p, 1]``
    the same for w1's answers added to w2's.  ``index`` holds the fitted pairs only: a pair outside it adds
    nothing.  Each answer pair of two different workers counts (as the co-occurrence counts do).
    """
    r = out.shape[1]
    k = terms.shape[2] - 1
    base = task_ptr[t0]
    longest = 0
    for t in range(t0, t1):
        longest = max(longest, task_ptr[t + 1] - task_ptr[t])
    order = np.empty(longest, dtype=np.int64)
    starts = np.empty(longest + 1, dtype=np.int64)
    out[:, :] = 0.0
    for t in range(t0, t1):
        runs = _runs(worker, task_ptr[t], task_ptr[t + 1], order, starts)
        for u in range(runs):
            wu = np.int64(worker[order[starts[u]]])
            for v in range(u + 1, runs):
                p = _pair_id(wu * n_workers + worker[order[starts[v]]], index, ranked, table)
                if p < 0:
                    continue
                for i in range(starts[u], starts[u + 1]):
                    ai = order[i]
                    for j in range(starts[v], starts[v + 1]):
                        aj = order[j]
                        for c in range(r):
                            out[ai - base, c] += terms[p, 0, label[aj], c] - terms[p, 0, k, c]
                            out[aj - base, c] += terms[p, 1, label[ai], c] - terms[p, 1, k, c]


@dataclass(frozen=True)
class TermParams:
    """The answer-terms pass's broadcast parameters: the fitted pairs' sorted keys ``w1 · n_workers + w2`` with
    their look-up (:func:`crowdagg.kernels.cooc.key_lookup`), and the per-pair records of :func:`_answer_terms`."""

    index: np.ndarray
    ranked: np.ndarray | None
    table: np.ndarray | None
    terms: np.ndarray


def answer_terms_block(part: Any, b: int, params: TermParams, keep: bool) -> tuple[int, np.ndarray | None]:
    """Block function: the block's per-answer r-vectors ``g`` (in task order), kept with the block; no sums."""
    from .validate import check_block, check_part

    check_part(part)
    b = check_block(part, b)
    start, stop = part.tasks_of(b)
    lo, hi = part.answers_of(b)
    n_workers = int(part.n_workers)
    ranked, table = _check_lookup(params, n_workers ** 2, f"{n_workers:,}² workers")
    index = np.ascontiguousarray(params.index, dtype=np.int64)
    terms = np.asarray(params.terms)
    k = int(part.n_classes)
    if index.ndim != 1 or terms.ndim != 4 or terms.shape[:3] != (index.shape[0], 2, k + 1):
        raise DataError(f"the answer terms have shape {terms.shape} for an index of shape {index.shape}: they need "
                        f"(pairs, 2, {k + 1}, r), one record per pair of the index")
    terms = np.ascontiguousarray(terms, dtype=np.float64)
    out = np.empty((hi - lo, terms.shape[3]))
    _answer_terms(part.task_ptr, part.worker, part.label, start, stop, np.int64(n_workers),
                  index, ranked, table, terms, out)
    return 0, (out if keep else None)


def null_energy(worker: Any, position: Any, g: Any, t: Any, out: Any) -> np.ndarray:
    """``out[s] = Σ_a ‖t[s]ᵀ g_a‖²`` over the answers ``a`` of each worker ``w`` with ``position[w] = s >= 0``.

    ``worker`` (n_answers,) codes, ``position`` (n_workers,) each worker's slot or -1, ``g`` (n_answers, r) in
    task order, ``t`` (S, r, r), ``out`` (S,) overwritten.  Checked here (a
    :class:`~crowdagg.errors.DataError` for a shape or a code outside its array), then one serial pass in
    answer order (:func:`_null_energy`): the same bits for any thread count.
    """
    from .validate import as_code_array, as_float_array, check_index, check_out_array

    g = as_float_array(g, "g", 2)
    t = as_float_array(t, "t", 3)
    out = check_out_array(out, "out", 1)
    position = np.ascontiguousarray(as_code_array(position, "position"), dtype=np.int64)
    worker = check_index(worker, position.shape[0], "worker", "worker")
    s, r = t.shape[0], g.shape[1]
    if g.shape[0] != worker.shape[0] or t.shape[1:] != (r, r) or out.shape != (s,):
        raise DataError(f"null_energy: shapes worker {worker.shape}, g {g.shape}, t {t.shape}, out {out.shape} "
                        "do not agree (g (n_answers, r), t (S, r, r), out (S,))")
    if position.size and (int(position.min()) < -1 or int(position.max()) >= s):
        raise DataError(f"position holds a slot outside -1 .. {s - 1:,}")
    return _null_energy(worker, position, g, t, out)


@njit(cache=True, nogil=True)
def _null_energy(worker, position, g, t, out):  # pragma: no cover - compiled
    """``out[s] = Σ_a ‖t[s]ᵀ g_a‖²`` over the answers ``a`` of each worker ``w`` with ``position[w] = s >= 0``.

    ``g`` (n_answers, r) in task order, ``t`` (S, r, r), ``out`` (S,) overwritten.  One pass in answer
    order (serial: the same bits for any thread count).
    """
    r = g.shape[1]
    out[:] = 0.0
    for a in range(worker.shape[0]):
        s = position[worker[a]]
        if s < 0:
            continue
        for c in range(r):
            h = 0.0
            for d in range(r):
                h += g[a, d] * t[s, d, c]
            out[s] += h * h
    return out


__all__ = ["TermParams", "answer_terms_block", "apply_filled", "null_energy"]
