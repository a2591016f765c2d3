r"""Coupled CPD moment matching (TensorADMM): every worker's confusion matrix and the class prior fitted to the
first-, second- and third-order statistics of the answers by alternating optimisation with an inner ADMM.

Model (Traganitis, Pagès-Zamora & Giannakis 2018; ALGORITHMS.md §4)
--------------------------------------------------------------------
Dawid--Skene: :math:`y_n \sim \mathrm{Cat}(d)`, and given :math:`y_n = k`
worker m answers :math:`\tilde y \sim \mathrm{Cat}(A_m[:, k])`,
independently.  The moments of one-hot answers :math:`e` are then

* first order :math:`\mu_m = E[e^{(m)}] = A_m d`;
* second order, two workers on a shared task,
  :math:`R_{mm'} = E[e^{(m)} e^{(m')T}] = A_m D A_{m'}^T`, ``D = diag(d)``;
* third order, three workers on a shared task,
  :math:`T_{mm'm''} = \sum_k d_k\, a_{m,k} \circ a_{m',k} \circ a_{m'',k}
  = [[D; A_m, A_{m'}, A_{m''}]]`, a rank-K CPD whose factors are the
  workers' confusion matrices, coupled across every triple that shares a
  worker.

The empirical moments come from the engine's sparse statistics
(:mod:`crowdagg.kernels.cooc`): :math:`\hat\mu_m` = worker m's answers per
label / its answers (``label_counts``); :math:`\hat R_{mm'}` = ``joint /
n_tasks`` of each co-labelled pair (``co_occurrence``); :math:`\hat
T_{mm'm''}` = ``joint / n_tasks`` of each worker triple sharing at least
``min_triple_tasks`` tasks (``triple_statistics``).  The fit minimises

.. math::

    \tfrac12 \sum_m \|\hat\mu_m - A_m d\|^2
    + \tfrac12 \sum_{(m,m')} \|\hat R_{mm'} - A_m D A_{m'}^T\|_F^2
    + \tfrac12 \sum_{(m,m',m'')} \|\hat T_{mm'm''} - [[D; A_m, A_{m'}, A_{m''}]]\|_F^2

over column-stochastic :math:`A_m` and :math:`d` on the simplex, the sums
running over the kept pairs and triples only (the validity masks of
``calc_annotator_moments.m``): the first- and second-order terms as the
authors' code has them, beside the third-order term of the paper.

Algorithm
---------
AO-ADMM (Huang, Sidiropoulos & Liavas 2016, as ``EstConfMat_AO_ADMM.m``):
each outer sweep updates every worker's block in turn -- the objective is
a quadratic in one block, whose Gram matrix and right-hand side come from
that worker's own pairs and triples (:mod:`crowdagg.kernels.cpd`) -- by
``inner_iter`` steps of ADMM with the columns projected on the simplex
(``simplex_prox``) and a small proximal term towards the previous value
(weight :math:`10^{-7} + 10^{-2} f / \|\text{data}\|^2`, the reference
code's), then the prior by the same ADMM
(``tensorly.tenalg.proximal.simplex_prox``).  A block's update is kept
only when it does not raise the objective, so the trace never rises.  It
stops when the relative L1 change of the matrices and of the prior over a
sweep are both below ``tol``, or after ``max_iter`` sweeps.  One sweep
costs :math:`O(P K^3 + T K^4)` for P kept pairs and T kept triples; the
statistics hold :math:`P K^2 + T K^3` numbers, never an
:math:`M^3 K^3` array.

**Start** -- the MV histogram (``init=2`` of ``alg_init.m``): each worker's
answers counted against the soft majority vote (one pseudo-count a cell,
columns normalised; :func:`~.estimate.soft_vote_matrices`), the prior the
vote's class shares.  The fit is deterministic (no random start).
**Class order** -- the CPD is unique up to one permutation common to all
workers; it is resolved after the fit by :func:`.align.common_order` (the
average confusion's diagonal; never the truth).

Which triples
-------------
A triple's :math:`\hat T` is a histogram of K³ cells from its n shared
tasks; its squared error :math:`E\|\hat T - T\|_F^2 = (1 - \|T\|_F^2)/n`
is about 1/n, against :math:`\|T\|_F^2 \approx \sum_k d_k^2 \prod \|a_k\|^2`
-- about 1/K for good workers, 1/K³ for spammers.  Every kept triple
counts as much as any other in the objective, so a triple seen on a
handful of tasks adds noise of the signal's size: the default keeps
triples sharing at least ``min_triple_tasks = 20`` tasks (an error norm
:math:`\lesssim 0.22`, below the :math:`1/\sqrt K` of a good worker's
tensor up to K = 20), which also bounds their number by
:math:`\sum_n \binom{c_n}{3} / 20` for tasks with :math:`c_n` answers --
the memory check uses that bound before any statistic is computed.  Pairs
need far fewer shared tasks (a K² histogram): ``min_pair_tasks`` (default
5).

When it applies
---------------
Identifiability (Kruskal; the paper's Theorem 1): the CPD is unique up to
the common permutation when at least three workers of a triple have
full-rank confusion matrices and the workers are linked by triples and
pairs that share enough tasks -- dense crowds where workers label many
tasks in common (the MultiSPA demo: 25 workers, each task w.p. 0.2, every
pair ~400 shared tasks per 10,000).  The permutation needs the crowd to be
better than chance on average.  What the user sees otherwise:

* fewer than three workers: no third-order moment exists; no worker is
  estimated (the fallback below, with its warning);
* no pair nor triple sharing enough tasks: no worker is estimated, every
  one takes the fallback below, and the warning names the thresholds
  (lower ``min_pair_tasks`` / ``min_triple_tasks``, or use ds);
* no triple sharing ``min_triple_tasks`` tasks but some pairs: a warning,
  and the fit of the first- and second-order terms alone (coupled matrix
  factorisation, identifiable under MultiSPA's conditions);
* a worker in no kept pair nor triple: not estimated; the base gives it
  the soft-vote fallback and says how many (:mod:`.estimate`).

Reference
---------
P. A. Traganitis, A. Pagès-Zamora and G. B. Giannakis, "Blind multiclass
ensemble classification", IEEE Trans. Signal Processing 66(18), 2018,
doi:10.1109/TSP.2018.2860562.  K. Huang, N. D. Sidiropoulos and A. P.
Liavas, "A flexible and efficient algorithmic framework for constrained
matrix and tensor factorization", IEEE Trans. Signal Processing 64(19),
2016, doi:10.1109/TSP.2016.2576427.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...core import memory
from ...data.annotations import AnnotationSet
from ...errors import ConvergenceWarning, CrowdaggWarning, param, warn
from ...kernels import cooc
from ...kernels import cpd as kernel
from ..base import FitContext
from ..em.ds import em_memory
from .align import common_order, reorder
from .estimate import Estimate, MomentAggregator, soft_vote

#: Bytes a kept triple holds: its int64 joint counts and their float64 normalisation (K³ each), ids and counts.
_TRIPLE_BYTES = (16, 40)


@dataclass(frozen=True)
class Moments:
    """The empirical moments the fit matches (the module notes' :math:`\\hat\\mu`, :math:`\\hat R`, :math:`\\hat T`).

    Attributes
    ----------
    mu : ndarray of float64, shape (n_workers, K)
        Each worker's answers per label over its answers (zeros for a worker without answers).
    pairs : ndarray of int64, shape (P, 2)
        The kept pairs ``w1 < w2`` (sharing at least ``min_pair_tasks`` tasks).
    R : ndarray of float64, shape (P, K, K)
        ``R[p, a, b]``: the share of their shared tasks where w1 answered ``a`` and w2 ``b``.
    triples : ndarray of int64, shape (T, 3)
        The kept triples ``u1 < u2 < u3`` (sharing at least ``min_triple_tasks`` tasks).
    T : ndarray of float64, shape (T, K, K, K)
        The empirical joint distribution of their answers on their shared tasks.
    active : ndarray of bool, shape (n_workers,)
        The workers in a kept pair or triple: the ones the fit estimates.
    """

    mu: np.ndarray
    pairs: np.ndarray
    R: np.ndarray
    triples: np.ndarray
    T: np.ndarray
    active: np.ndarray

    @property
    def n_workers(self) -> int:
        return int(self.mu.shape[0])

    @property
    def n_classes(self) -> int:
        return int(self.mu.shape[1])

    def norm2(self) -> float:
        """½ the squared norm of the active workers' moments (the objective's scale)."""
        return 0.5 * float((self.mu[self.active] ** 2).sum() + (self.R ** 2).sum() + (self.T ** 2).sum())


@dataclass
class CPDFit:
    """The AO-ADMM's result: ``prior`` (K,), ``conf_ot`` (n_workers, K, K) in the fit's own class order (rows of
    inactive workers: their start), the objective after the start and after each sweep, sweeps, convergence."""

    prior: np.ndarray
    conf_ot: np.ndarray
    objective: np.ndarray
    n_iter: int
    converged: bool


def triple_bound(data: AnnotationSet, min_tasks: int) -> int:
    """At most how many worker triples share ``min_tasks`` tasks: ``min(C(M, 3), Σ_n C(c_n, 3) // min_tasks)``
    (each kept triple takes ``min_tasks`` of the tasks' answer triples) -- known before any statistic."""
    c = data.answers_per_task.astype(np.int64)
    answer_triples = int((c * (c - 1) * (c - 2) // 6).sum())
    return min(math.comb(data.n_workers, 3), answer_triples // max(int(min_tasks), 1))


def _relabelled(members: np.ndarray, rank: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``members`` (n, r) renamed by ``rank`` (old code -> new), each row ascending, the rows in lexicographic order:
    ``(new members, the source row of each, how each source row's members were reordered)``."""
    renamed = rank[members]
    axes = np.argsort(renamed, axis=1, kind="stable")
    renamed = np.take_along_axis(renamed, axes, axis=1)
    order = np.lexsort(renamed.T[::-1]) if len(renamed) else np.empty(0, dtype=np.int64)
    return renamed[order], order, axes[order]


def _joint_in_order(joint: np.ndarray, n_tasks: np.ndarray, order: np.ndarray, axes: np.ndarray) -> np.ndarray:
    """``joint[order] / n_tasks[order]`` as float64, each row's member axes permuted by ``axes`` (one permutation of
    the r members per row), filled pattern by pattern into one new array (no second copy of the int counts)."""
    out = np.empty(joint.shape, dtype=np.float64)
    if not len(order):
        return out
    patterns, which = np.unique(axes, axis=0, return_inverse=True)
    for j, pattern in enumerate(patterns):
        rows = np.flatnonzero(which.ravel() == j)
        src = order[rows]
        out[rows] = np.transpose(joint[src], (0, *(1 + pattern))) / n_tasks[src].reshape(-1, *[1] * len(pattern))
    return out


def moments(engine: Any, n_workers: int, n_classes: int, *, min_pair_tasks: int, min_triple_tasks: int,
            rank: np.ndarray | None = None, max_memory: memory.MaxMemory = None) -> Moments:
    """The empirical first-, second- and third-order moments, from three passes over ``engine``'s grid.

    Pairs sharing fewer than ``min_pair_tasks`` tasks and triples sharing
    fewer than ``min_triple_tasks`` are left out (the triples' statistics
    are never computed for them: ``triple_statistics(min_tasks=...)``).
    ``rank`` (n_workers,) renames the workers (worker ``w`` becomes
    ``rank[w]``; default unchanged): the fit then sees them, their pairs
    and triples in an order that does not depend on the data's codes.
    """
    rank = np.arange(n_workers) if rank is None else np.asarray(rank, dtype=np.int64)
    counts = np.asarray(cooc.label_counts(engine), dtype=np.float64)
    n_m = counts.sum(axis=1, keepdims=True)
    mu = np.empty_like(counts)
    mu[rank] = np.divide(counts, n_m, out=np.zeros_like(counts), where=n_m > 0)
    pair_stats = cooc.co_occurrence(engine, max_memory=max_memory)
    keep = np.flatnonzero(pair_stats.n_tasks >= min_pair_tasks)
    pairs, order, axes = _relabelled(pair_stats.pairs[keep].astype(np.int64), rank)
    R = _joint_in_order(pair_stats.joint[keep], pair_stats.n_tasks[keep], order, axes)
    del pair_stats
    trip = cooc.triple_statistics(engine, min_tasks=min_triple_tasks, max_memory=max_memory)
    k = n_classes
    memory.check(_TRIPLE_BYTES[0] * trip.n_triples * k**3,
                 f"{trip.n_triples:,} worker triples sharing ≥ {min_triple_tasks} tasks × {k}³ classes",
                 max_memory, advice=f"raise {param('min_triple_tasks')}")
    triples, order, axes = _relabelled(np.asarray(trip.triples, dtype=np.int64).reshape(-1, 3), rank)
    T = _joint_in_order(np.asarray(trip.joint).reshape(-1, k, k, k), np.asarray(trip.n_tasks), order, axes)
    del trip
    active = np.zeros(n_workers, dtype=bool)
    active[pairs.ravel()] = True
    active[triples.ravel()] = True
    return Moments(mu, pairs, R.reshape(-1, k, k), triples, T, active)


def _incidence(members: np.ndarray, n_workers: int) -> tuple[np.ndarray, np.ndarray]:
    """CSR of the rows of ``members`` (n, r) each worker is in: ``ids[ptr[w]:ptr[w+1]]`` ascending."""
    flat = members.ravel()
    order = np.argsort(flat, kind="stable")
    ids = (order // max(members.shape[1], 1)).astype(np.int64)
    ptr = np.zeros(n_workers + 1, dtype=np.int64)
    np.cumsum(np.bincount(flat, minlength=n_workers), out=ptr[1:])
    return ptr, ids


def _prior_block(g: np.ndarray, b: np.ndarray, d: np.ndarray, prox: float, inner_iter: int,
                 inner_tol: float) -> np.ndarray:
    """The prior's ADMM: ``argmin ½ dᵀ G d − bᵀ d + prox/2 ‖d − d₀‖²`` on the simplex (the worker blocks' rule,
    :func:`crowdagg.kernels.cpd.admm_block`, with tensorly's ``simplex_prox`` as the projection)."""
    from tensorly.tenalg.proximal import simplex_prox

    k = len(d)
    utu = g + prox * np.eye(k)
    rho = float(np.trace(utu)) / k
    low = np.linalg.cholesky(utu + rho * np.eye(k))
    x, dual = d.copy(), np.zeros(k)
    for _ in range(inner_iter):
        rhs = b + prox * d + rho * (x + dual)
        split = np.linalg.solve(low.T, np.linalg.solve(low, rhs))
        x_old = x
        x = np.asarray(simplex_prox(split - dual, 1.0), dtype=np.float64)
        dual = dual + x - split
        if (np.linalg.norm(x - split) < inner_tol * np.linalg.norm(x)
                and np.linalg.norm(x - x_old) < inner_tol * np.linalg.norm(dual)):
            break
    return x


def coupled_cpd(mom: Moments, prior: np.ndarray, conf_ot: np.ndarray, *, max_iter: int = 100, inner_iter: int = 10,
                tol: float = 1e-6, inner_tol: float = 1e-8) -> CPDFit:
    """Fit the coupled CPD to ``mom`` by AO-ADMM from ``(prior, conf_ot)`` (module notes).

    Parameters
    ----------
    mom : Moments
    prior : ndarray, shape (K,)
        Start of the prior (on the simplex).
    conf_ot : ndarray, shape (n_workers, K, K)
        Start of the column-stochastic confusion matrices ``[w, observed, true]``.
    max_iter, inner_iter : int
        Outer sweeps at most; ADMM steps per block and sweep.
    tol : float
        Stop when the relative L1 change of the active workers' matrices and of the prior over a sweep are
        both below it (0: run ``max_iter`` sweeps).
    inner_tol : float
        The ADMM's own stop (tensorly's residual rule), usually not reached in ``inner_iter`` steps.

    Returns
    -------
    CPDFit
        The objective trace starts at the start's value; it never rises (a block's update that would raise
        its quadratic is not taken).
    """
    k = mom.n_classes
    conf = np.ascontiguousarray(conf_ot, dtype=np.float64).copy()
    d = np.asarray(prior, dtype=np.float64).copy()
    gram = np.ascontiguousarray(np.einsum("wat,was->wts", conf, conf))
    dual = np.zeros_like(conf)
    pair_ptr, pair_of = _incidence(mom.pairs, mom.n_workers)
    trip_ptr, trip_of = _incidence(mom.triples, mom.n_workers)
    order = np.flatnonzero(mom.active).astype(np.int64)
    pairs = np.ascontiguousarray(mom.pairs, dtype=np.int64).reshape(-1, 2)
    triples = np.ascontiguousarray(mom.triples, dtype=np.int64).reshape(-1, 3)
    data_norm = max(mom.norm2(), 1e-300)
    size_a = float(k * len(order)) or 1.0

    def objective() -> float:
        return float(sum(kernel.objective(conf, d, mom.mu, mom.active, pairs, mom.R, triples, mom.T)))

    trace = [objective()]
    if not len(order):  # no kept pair nor triple: nothing to fit (the caller gives every worker its fallback)
        return CPDFit(d, conf, np.asarray(trace), 0, True)
    converged = False
    n_iter = 0
    for n_iter in range(1, max_iter + 1):  # noqa: B007 - read after the loop
        prox = 1e-7 + 1e-2 * trace[-1] / data_norm
        change = kernel.sweep(conf, gram, dual, d, mom.mu, order, pairs, mom.R, pair_ptr, pair_of, triples, mom.T,
                              trip_ptr, trip_of, prox, inner_iter, inner_tol)
        g_d, b_d = kernel.prior_terms(conf, gram, mom.mu, mom.active, pairs, mom.R, triples, mom.T)
        new_d = _prior_block(g_d, b_d, d, prox, inner_iter, inner_tol)
        d_change = 0.0
        if 0.5 * new_d @ g_d @ new_d - b_d @ new_d <= 0.5 * d @ g_d @ d - b_d @ d:
            d_change = float(np.abs(new_d - d).sum())
            d = new_d
        trace.append(objective())
        if tol > 0 and change / size_a < tol and d_change < tol:
            converged = True
            break
    return CPDFit(d, conf, np.asarray(trace), n_iter, converged)


class CoupledCPD(MomentAggregator):
    """Coupled CPD moment matching (TensorADMM): see the module notes for the model, the algorithm and when it
    applies.

    Parameters (declared in :mod:`crowdagg.methods.moments`): ``seed``, ``refine`` (default ``none``: the raw
    estimate, the papers' TensorADMM), ``refine_iter``, ``max_iter`` (outer sweeps, 100), ``inner_iter`` (ADMM
    steps per block, 10), ``tol`` (1e-6), ``min_pair_tasks`` (5), ``min_triple_tasks`` (20).
    """

    name = "cpd"
    #: What its own iterations minimise (the trace's first entries); ``tol`` reads the change of the parameters.
    objective_name = "moment residual"
    min_triple_tasks: int  # set from the declaration by Aggregator.__init__
    memory_advice = "its third-order moments grow with worker triples × classes³: raise min_triple_tasks, or use ds"

    def memory_needed(self, data: AnnotationSet) -> tuple[float, str]:
        """EM's decoding and refinement, and the kept triples' statistics at most (:func:`triple_bound`)."""
        em, what = em_memory(data)
        min_tasks = int(self.min_triple_tasks)
        n = triple_bound(data, min_tasks)
        k = data.n_classes
        need = n * (_TRIPLE_BYTES[0] * k**3 + _TRIPLE_BYTES[1])
        return em + need, f"{what}; up to {n:,} worker triples sharing ≥ {min_tasks} tasks × {k}³ classes"

    def _estimate(self, data: AnnotationSet, checked: FitContext) -> Estimate:
        w, k = data.n_workers, data.n_classes
        prior0, conf0 = soft_vote(checked.engine)  # the start, and the fallback of the workers left out
        if w < 3:  # no triple exists, and two workers' joint alone does not identify their matrices
            return Estimate(prior0, conf0, np.zeros(w, dtype=bool), f"cpd needs three workers for its third-order "
                            f"moments, the data have {w}", fallback=lambda: conf0)
        # The sweep visits the workers in the order of their names, not of their codes (first appearance): the
        # same answers in another row order give the same bits.
        canon = np.argsort(np.asarray(data.worker_names).astype(str), kind="stable")
        rank = np.empty(w, dtype=np.int64)
        rank[canon] = np.arange(w)
        mom = moments(checked.engine, w, k, min_pair_tasks=checked["min_pair_tasks"],
                      min_triple_tasks=checked["min_triple_tasks"], rank=rank, max_memory=checked.max_memory)
        if len(mom.pairs) and not len(mom.triples):
            warn(CrowdaggWarning(f"cpd: no three workers share {checked['min_triple_tasks']} tasks: fitting the first- "
                                 f"and second-order moments only ({len(mom.pairs):,} pairs); lower "
                                 f"{param('min_triple_tasks')} for third-order moments"))
        fit = coupled_cpd(mom, prior0, conf0[canon], max_iter=checked["max_iter"], inner_iter=checked["inner_iter"],
                          tol=checked["tol"])
        if not fit.converged and checked["tol"] > 0:
            warn(ConvergenceWarning(f"cpd: AO-ADMM did not reach {param('tol')} = {checked['tol']:g} in "
                                    f"{fit.n_iter} sweeps ({param('max_iter')}); the estimate is its last sweep's"))
        active = mom.active[rank]
        order = common_order(fit.conf_ot[rank], active.astype(np.float64))
        conf_ot, prior = reorder(fit.conf_ot[rank], fit.prior, order)
        missing = int((~active).sum())
        why = (f"in no worker pair sharing ≥ {checked['min_pair_tasks']} tasks nor triple sharing "
               f"≥ {checked['min_triple_tasks']}") if missing else ""
        return Estimate(prior, conf_ot, active, why, fit.n_iter, fit.converged, fit.objective,
                        fallback=lambda: conf0)


__all__ = ["CPDFit", "CoupledCPD", "Moments", "coupled_cpd", "moments", "triple_bound"]
