r"""MultiSPA: every worker's confusion matrix from the pairwise co-occurrences, by the successive projection algorithm.

Model (Dawid--Skene): the true class :math:`y_n \sim \mathrm{Cat}(d)`;
given :math:`y_n = k`, worker :math:`m` answers
:math:`\sim \mathrm{Cat}(A_m[:, k])`, independently across workers.  For
two workers :math:`m \ne j` the joint distribution of their answers on a
task both labelled is then

.. math:: R_{mj} = A_m D A_j^\top, \qquad D = \mathrm{diag}(d),

estimated by :math:`\hat R_{mj}` = the pair's joint answer counts over the
tasks they share, divided by that number of tasks
(:func:`crowdagg.kernels.cooc.co_occurrence`: co-labelled pairs only,
sparse).  Stacking a worker's full-rank blocks (rows: its own answers)

.. math:: Z_m = [\hat R_{m j_1}, \ldots, \hat R_{m j_T}] = A_m\,[D A_{j_1}^\top, \ldots, D A_{j_T}^\top]

shows every column of :math:`Z_m`, normalised to sum 1, as a convex
combination of the columns of :math:`A_m` (which sum to 1).  When some
partner is a "specialist" for each class (a row of :math:`A_j D`
proportional to a unit vector: near-separability, which holds with high
probability when the crowd is large) the :math:`K` vertices of that hull
are columns of :math:`Z_m`, and the successive projection algorithm (SPA,
Gillis & Vavasis 2014: take the column of largest norm, project every
column onto its orthogonal complement, repeat :math:`K` times) finds them:
:math:`\hat A_m` = the picked columns.

Reference: S. Ibrahim, X. Fu, N. Kargas & K. Huang, "Crowdsourcing via
pairwise co-occurrences: identifiability and algorithms", NeurIPS 2019
(arXiv:1909.12325); ALGORITHMS.md §5.1--§5.3, §5.5.

**What is computed** (array shapes: P co-labelled pairs, W workers, K
classes):

1. :math:`\hat R` (P, K, K) from one co-occurrence pass on the engine;
2. a block enters :math:`Z_m` when it has full rank :math:`K`: its
   singular values :math:`\sigma_K > 10^{-10} \sigma_1`
   (:data:`RANK_RTOL`; MATLAB's ``rank`` in the reference code uses
   :math:`K \epsilon \sigma_1`, about :math:`10^{-15}`: a numerically
   singular block is left out here, any other is kept as there);
3. a worker is **eligible** with at least ``min_partners`` such blocks
   (``min_partners`` :math:`\times K` columns).  The 2019 code (whose
   figures the paper reports) requires more than :math:`7K` columns
   (``min_partners=8``, the default), the 2021 code more than :math:`K`
   (``min_partners=2``).  With 2, the light workers enter with blocks of a
   few shared tasks, whose extreme columns SPA picks as vertices: 81.61%
   on web, 90.00% on rte and 68.22% on trec, against 85.26%, 90.25% and
   68.66% with 8 (dog 83.15% against 82.28%);
4. SPA on the columns of every eligible worker at once (vectorised over
   the concatenated columns, :func:`spa`); the worker is **estimated**
   when :math:`K` columns were picked and
   :math:`\sigma_K(\hat A_m) > 10^{-10}\sigma_1(\hat A_m)`;
5. the **class orders** are made common from the data (:func:`align_workers`,
   below), then one common order is chosen by
   :func:`~crowdagg.methods.moments.align.common_order` (the average
   confusion's trace);
6. the class prior: uniform (``prior=uniform``, the published default) or
   (``prior=estimate``, ``prior_estim.m``) for every full-rank pair of
   estimated workers :math:`\mathrm{vec}(\hat R_{mj}) \approx (\hat A_m \odot
   \hat A_j)\,d` solved by pseudo-inverse, clipped at 0, normalised and
   averaged over the pairs.

**Permutations, without an oracle.**  SPA returns each worker's columns in
its own order.  The reference codes fix it from the truth (``perm2match``,
synthetic demo) or by forcing each worker to look diagonally dominant
(``getPermutedMatrix``, real data), which "corrects" an adversary or a
class-swapping worker into a good one.  Here the orders are tied together
through the co-occurrences themselves.  For a worker :math:`m` whose
partners :math:`j` are already placed, :math:`B_j = \hat A_j \Pi_j` in the
common order, the model :math:`\hat R_{mj} \approx A_m D B_j^\top` is fitted
by least squares over all of them,

.. math:: Y_m = \Big(\sum_j \hat R_{mj} B_j\Big)\Big(\sum_j B_j^\top B_j\Big)^{+}
          \approx A_m \Pi D,

and :math:`\hat A_m`'s columns are matched to :math:`Y_m`'s normalised
columns (Hungarian algorithm on their L1 distances).  Workers are placed
from the one with the most estimated partners, each next the one with the
most placed partners; then every worker is re-placed against all its
partners until nothing moves (at most :data:`ALIGN_SWEEPS` sweeps).  Every
co-labelled pair counts once, as every block enters :math:`Z_m` once
(weighted by the tasks they share, a few heavy pairs decide: trec 66.95%
against 68.66%).  A pairwise :math:`\hat A_m^{+} \hat R_{mj} (\hat
A_j^{+})^\top \approx \Pi_m^\top D \Pi_j` says the same for one pair, but
is far noisier where pairs share a few tasks (trec: 58.8%).
The assumption is the model's own -- the same true class behind every
worker's columns -- and no worker is assumed better than chance: an
adversary keeps its off-diagonal matrix.  Only the one global order is
taken from the crowd's average being diagonally dominant (as in every
method of this family).  Workers the pairs cannot link to the largest
group (a separate component of the graph of co-labelled pairs of
estimated workers) are placed, component by component, against their soft
majority-vote confusion (one permutation per component, the least L1
distance between columns).

**When it applies.**  Identifiability needs, for each estimated worker,
full-rank co-occurrences with enough partners, and near-separability
(class specialists among them); the estimate is noise-sensitive when no
partner comes close to a specialist (then prefer ``cnmf`` or
``refine=ds``).  Workers with fewer than ``min_partners`` full-rank
partners (sparse designs, light workers, a worker who always gives the
same answer: rank 1), or whose SPA estimate is rank-deficient, are not
estimated: the base gives them their answers against the soft majority
vote and says how many on stderr (never NaN).  With no estimable worker
at all (fewer than three workers, K larger than the workers' answers can
span) every worker gets that fallback, with the same warning: the result
is then one soft-vote M-step and its MAP labels.

Cost: the pair pass O(Σ_n |M_n|²); SPA O(K² · columns) =
O(P K³); the alignment O(P K³ + W K³).  Memory O(P K²).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ...data.annotations import AnnotationSet
from ...kernels.cooc import CoOccurrence, co_occurrence
from ..base import FitContext
from .align import assignment, common_order
from .estimate import Estimate, MomentAggregator, fallback_once

__all__ = ["ALIGN_SWEEPS", "RANK_RTOL", "SPA_STOP", "SPA_TIE", "MultiSPA", "SPAEstimate", "align_workers",
           "estimate_prior", "full_rank", "in_name_order", "multispa", "pair_tables_memory", "numerical_rank", "pair_moments", "spa", "worker_columns"]

#: A K×K block (or estimate) has full rank when its smallest singular value exceeds this times its largest.
RANK_RTOL = 1e-10

#: SPA's relative tie tolerance on the residual norms (ties go to the larger original norm, then the first).
SPA_TIE = 1e-6

#: SPA stops early when the largest residual squared norm falls to this fraction of the largest original one.
SPA_STOP = 1e-9

#: Re-placement sweeps of the alignment after its first pass (it stops earlier when nothing changes).
ALIGN_SWEEPS = 10


# ----------------------------------------------------------------------------------------------- statistics
def pair_moments(stats: CoOccurrence) -> np.ndarray:
    r""":math:`\hat R` (P, K, K): each co-labelled pair's joint answer distribution over the tasks it shares,
    ``joint[p] / n_tasks[p]`` (rows: the answers of ``pairs[p, 0]``)."""
    return stats.joint.astype(np.float64) / np.maximum(stats.n_tasks, 1)[:, None, None]


def numerical_rank(mats: np.ndarray, rtol: float = RANK_RTOL) -> np.ndarray:
    """The rank (n,) of each matrix of ``mats`` (n, K, K): singular values above ``rtol`` times the largest."""
    if mats.shape[0] == 0:
        return np.zeros(0, dtype=np.int64)
    s = np.linalg.svd(mats, compute_uv=False)
    return np.count_nonzero(s > rtol * s[:, :1], axis=1).astype(np.int64)


def full_rank(mats: np.ndarray, rtol: float = RANK_RTOL) -> np.ndarray:
    """Whether each matrix of ``mats`` (n, K, K) has full rank K (bool (n,); see :func:`numerical_rank`)."""
    return numerical_rank(mats, rtol) == mats.shape[-1]


def worker_columns(pairs: np.ndarray, moments: np.ndarray, keep: np.ndarray,
                   n_workers: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    r"""Every worker's :math:`Z_m` as rows of one array: ``(columns, owner, starts)``.

    Parameters
    ----------
    pairs : ndarray of int, shape (P, 2)
    moments : ndarray of float, shape (P, K, K)
        :math:`\hat R`, rows the answers of ``pairs[:, 0]``.
    keep : ndarray of bool, shape (P,)
        The blocks that enter (full rank).
    n_workers : int

    Returns
    -------
    columns : ndarray of float, shape (C, K)
        The columns of every :math:`Z_m`, each normalised to sum 1 (an all-zero column stays 0), grouped by
        worker, within a worker by partner then by the partner's answer.
    owner : ndarray of int64, shape (C,)
        The worker each column belongs to (non-decreasing).
    starts : ndarray of int64, shape (n_workers + 1,)
        Worker ``m``'s columns are ``columns[starts[m]:starts[m + 1]]``.
    """
    k = moments.shape[-1]
    r = moments[keep]
    a, b = pairs[keep, 0].astype(np.int64), pairs[keep, 1].astype(np.int64)
    # worker a's columns are R's columns (a's answers down each), worker b's are R's rows
    cols = np.concatenate([r.transpose(0, 2, 1).reshape(-1, k), r.reshape(-1, k)])
    owner = np.concatenate([np.repeat(a, k), np.repeat(b, k)])
    partner = np.concatenate([np.repeat(b, k), np.repeat(a, k)])
    within = np.tile(np.arange(k), 2 * len(a))
    order = np.lexsort((within, partner, owner))
    cols, owner = cols[order], owner[order]
    total = cols.sum(axis=1, keepdims=True)
    cols = np.divide(cols, total, out=np.zeros_like(cols), where=total > 0)
    starts = np.searchsorted(owner, np.arange(n_workers + 1)).astype(np.int64)
    return cols, owner, starts


# ----------------------------------------------------------------------------------------------- SPA
def spa(columns: np.ndarray, owner: np.ndarray, starts: np.ndarray, r: int) -> np.ndarray:
    r"""The successive projection algorithm (Gillis & Vavasis, arXiv:1208.1237) on every worker's columns at once.

    For each worker: ``r`` times, pick the column whose residual has the
    largest squared norm (ties within :data:`SPA_TIE` relative go to the
    larger original norm, then to the first column), then project every
    residual onto the orthogonal complement of the picked one.  A worker
    stops early when its largest residual is below :data:`SPA_STOP` times
    its largest original squared norm (its columns span fewer than ``r``
    dimensions).

    Parameters
    ----------
    columns : ndarray of float, shape (C, K)
        The columns, grouped by worker (:func:`worker_columns`).
    owner : ndarray of int, shape (C,)
        Each column's worker (non-decreasing).
    starts : ndarray of int, shape (W + 1,)
        Each worker's first column.
    r : int
        Columns to pick per worker.

    Returns
    -------
    ndarray of int64, shape (W, r)
        The picked columns' positions in ``columns``, in the order picked; -1 where a worker had no column
        left to pick (or none at all).
    """
    n_workers = len(starts) - 1
    picks = np.full((n_workers, r), -1, dtype=np.int64)
    has = starts[1:] > starts[:-1]
    if not has.any():
        return picks
    heads = starts[:-1][has]  # reduceat over the workers with columns only (an empty segment would read its neighbour)
    seg = np.repeat(np.arange(int(has.sum())), np.diff(starts)[has])
    resid = columns.astype(np.float64, copy=True)
    norm0 = np.einsum("ck,ck->c", resid, resid)
    norm = norm0.copy()
    first = np.maximum.reduceat(norm0, heads)
    active = first > 0
    index = np.arange(len(columns))
    rows = np.flatnonzero(has)
    for i in range(r):
        top = np.maximum.reduceat(norm, heads)
        active &= top > SPA_STOP * first
        if not active.any():
            break
        tied = (top[seg] - norm) <= SPA_TIE * top[seg]
        score = np.where(tied, norm0, -np.inf)
        best = np.maximum.reduceat(score, heads)
        chosen = np.minimum.reduceat(np.where(tied & (score == best[seg]), index, len(columns)), heads)
        chosen = np.where(active, chosen, -1)
        picks[rows, i] = chosen
        u = np.zeros((len(heads), columns.shape[1]))
        live = chosen >= 0
        u[live] = resid[chosen[live]] / np.sqrt(norm[chosen[live]])[:, None]
        resid -= np.einsum("ck,ck->c", resid, u[seg])[:, None] * u[seg]
        norm = np.einsum("ck,ck->c", resid, resid)
    return picks


# ----------------------------------------------------------------------------------------------- permutations
def _pinv(mats: np.ndarray) -> np.ndarray:
    return np.linalg.pinv(mats) if len(mats) else mats.copy()


def _match(conf: np.ndarray, fitted: np.ndarray) -> np.ndarray:
    """``sigma`` (K,): the columns of ``conf`` (K, K) matched to those of ``fitted`` (K, K; clipped at 0 and
    column-normalised) at the least total L1 distance: ``conf[:, sigma]`` is in ``fitted``'s order."""
    f = np.maximum(fitted, 0.0)
    total = f.sum(axis=0, keepdims=True)
    f = np.divide(f, total, out=np.zeros_like(f), where=total > 0)
    return assignment(-np.abs(conf[:, :, None] - f[:, None, :]).sum(axis=0).T)  # sigma[column] = its row


def _fitted(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """``num @ pinv(den)`` for stacks (n, K, K): the least-squares fit of :func:`align_workers`."""
    return np.einsum("nab,nbc->nac", num, _pinv(den)) if len(num) else num.copy()


def align_workers(conf: np.ndarray, estimated: np.ndarray, pairs: np.ndarray, moments: np.ndarray,
                  weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    r"""Each estimated worker's column order, common to every worker linked to it by shared tasks.

    Parameters
    ----------
    conf : ndarray, shape (W, K, K)
        Each worker's :math:`\hat A_m` ``[observed, column]``, its columns in its own order (rows of workers not
        ``estimated`` are ignored).
    estimated : ndarray of bool, shape (W,)
    pairs : ndarray of int, shape (P, 2)
    moments : ndarray, shape (P, K, K)
        :math:`\hat R` (rows: the answers of ``pairs[:, 0]``).
    weights : ndarray, shape (P,)
        Each pair's weight (:func:`multispa`: 1, each pair once).

    Returns
    -------
    sigma : ndarray of int64, shape (W, K)
        ``conf[m][:, sigma[m]]`` is worker ``m`` in its component's common order (identity for the others).
    component : ndarray of int64, shape (W,)
        The component of the graph of co-labelled pairs of estimated workers each estimated worker is in (0: the
        largest; ties to the one holding the lowest worker), -1 for workers not estimated.

    Notes
    -----
    With the placed partners :math:`B_j = \hat A_j \Pi_j` in the common order,
    worker :math:`m`'s co-occurrences are fitted by least squares,
    :math:`Y_m = (\sum_j n_{mj} \hat R_{mj} B_j)(\sum_j n_{mj} B_j^\top B_j)^{+}
    \approx A_m \Pi D`, pooling all its placed partners (a pairwise
    :math:`\hat A_m^+ \hat R_{mj} (\hat A_j^+)^\top` is far noisier where pairs
    share few tasks), and :math:`\hat A_m`'s columns are matched to
    :math:`Y_m`'s normalised columns (Hungarian algorithm on their L1
    distances).  Workers are placed from the one sharing the most tasks
    with estimated workers, each next the one sharing the most with those
    already placed; then every worker is re-placed against all its
    partners until nothing moves (:data:`ALIGN_SWEEPS`).
    """
    n_workers, k = conf.shape[0], conf.shape[2]
    sigma = np.tile(np.arange(k, dtype=np.int64), (n_workers, 1))
    component = np.full(n_workers, -1, dtype=np.int64)
    p_idx = np.flatnonzero(estimated[pairs[:, 0]] & estimated[pairs[:, 1]])
    a, b = pairs[p_idx, 0].astype(np.int64), pairs[p_idx, 1].astype(np.int64)
    # each pair in both directions: (worker, partner, R oriented with rows the worker's answers, weight)
    ends = np.concatenate([a, b])
    other = np.concatenate([b, a])
    target = np.concatenate([moments[p_idx], moments[p_idx].transpose(0, 2, 1)])
    ew = np.concatenate([weights[p_idx], weights[p_idx]]).astype(np.float64)
    order = np.lexsort((other, ends))
    ends, other, target, ew = ends[order], other[order], target[order], ew[order]
    starts = np.searchsorted(ends, np.arange(n_workers + 1))
    strength = np.bincount(ends, weights=ew, minlength=n_workers)

    num = np.zeros((n_workers, k, k))
    den = np.zeros((n_workers, k, k))
    pull = np.zeros(n_workers)
    todo = estimated.copy()
    n_comp = 0
    while todo.any():
        # a new component from its strongest worker; then the worker sharing most tasks with those placed
        m: int | None = int(np.argmax(np.where(todo, strength, -1.0)))
        component[m] = n_comp
        while m is not None:
            todo[m] = False
            lo, hi = starts[m], starts[m + 1]
            nb = other[lo:hi]
            placed = conf[m][:, sigma[m]]
            # the partners' view: their rows of R (R^T here) against m's placed columns
            num[nb] += ew[lo:hi, None, None] * np.einsum("pab,ac->pbc", target[lo:hi], placed)
            den[nb] += ew[lo:hi, None, None] * (placed.T @ placed)[None]
            pull[nb] += ew[lo:hi]
            candidates = np.flatnonzero(todo & (pull > 0))
            m = None
            if len(candidates):
                m = int(candidates[np.argmax(pull[candidates])])
                sigma[m] = _match(conf[m], _fitted(num[m][None], den[m][None])[0])
                component[m] = n_comp
        n_comp += 1
    # re-place every worker against all its partners until nothing moves
    linked = np.flatnonzero(estimated & (starts[1:] > starts[:-1]))
    for _ in range(ALIGN_SWEEPS):
        placed_all = np.take_along_axis(conf, sigma[:, None, :].repeat(k, axis=1), axis=2)
        b_other = placed_all[other]
        num = np.zeros((n_workers, k, k))
        den = np.zeros((n_workers, k, k))
        np.add.at(num, ends, ew[:, None, None] * np.einsum("pab,pbc->pac", target, b_other))
        np.add.at(den, ends, ew[:, None, None] * np.einsum("pab,pac->pbc", b_other, b_other))
        fitted = _fitted(num[linked], den[linked])
        moved = False
        for i, w in enumerate(linked.tolist()):
            new = _match(conf[w], fitted[i])
            if not np.array_equal(new, sigma[w]):
                sigma[w], moved = new, True
        if not moved:
            break
    # the largest component first (ties: the one holding the lowest worker)
    comps = component[component >= 0]
    if len(comps):
        size = np.bincount(comps)
        lowest = np.full(len(size), n_workers)
        np.minimum.at(lowest, comps, np.flatnonzero(component >= 0))
        rank = np.empty(len(size), dtype=np.int64)
        rank[np.lexsort((lowest, -size))] = np.arange(len(size))
        component[component >= 0] = rank[comps]
    return sigma, component


def _to_reference(conf: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """``order`` (K,): the one column permutation of the workers ``conf`` (n, K, K) closest (L1, summed) to their
    ``reference`` matrices (n, K, K): ``conf[:, :, order]`` in the reference's order."""
    dist = np.abs(conf[:, :, :, None] - reference[:, :, None, :]).sum(axis=(0, 1))  # [conf column, ref column]
    return assignment(-dist.T)  # sigma[column] = its row


def estimate_prior(conf: np.ndarray, pairs: np.ndarray, moments: np.ndarray, usable: np.ndarray) -> np.ndarray:
    r"""The class prior from the pairs (``prior_estim.m``): per usable pair,
    :math:`d = (A_a \odot A_b)^+ \mathrm{vec}(\hat R_{ab})` clipped at 0 and normalised; averaged over the pairs.

    ``conf`` (W, K, K) in the common order; ``usable`` (P,) the full-rank pairs of two estimated workers.  A pair
    whose solution is all zeros adds zeros (as in the reference code); no usable pair: uniform.
    """
    k = conf.shape[-1]
    idx = np.flatnonzero(usable)
    if not len(idx):
        return np.full(k, 1.0 / k)
    a, b = conf[pairs[idx, 0]], conf[pairs[idx, 1]]
    kr = np.einsum("pxk,pyk->pxyk", a, b).reshape(len(idx), k * k, k)
    d = np.einsum("pkc,pc->pk", np.linalg.pinv(kr), moments[idx].reshape(len(idx), k * k))
    d = np.maximum(d, 0.0)
    total = d.sum(axis=1, keepdims=True)
    d = np.divide(d, total, out=np.zeros_like(d), where=total > 0)
    mean = d.mean(axis=0)
    return mean / mean.sum() if mean.sum() > 0 else np.full(k, 1.0 / k)


# ----------------------------------------------------------------------------------------------- the method
@dataclass
class SPAEstimate:
    r"""MultiSPA's estimate with what the coupled NMF (:mod:`.cnmf`) reuses.

    Attributes
    ----------
    estimate : Estimate
        Prior (K,), ``conf_ot`` (W, K, K) in the common order, ``estimated`` (W,), ``why``.
    moments : ndarray, shape (P, K, K)
        :math:`\hat R`.
    pairs : ndarray of int32, shape (P, 2)
    n_tasks : ndarray of int64, shape (P,)
    rank : ndarray of int64, shape (P,)
        Each block's numerical rank (:func:`numerical_rank`).
    """

    estimate: Estimate
    moments: np.ndarray
    pairs: np.ndarray
    n_tasks: np.ndarray
    rank: np.ndarray


def multispa(stats: CoOccurrence, min_partners: int, prior: str,
             reference: Callable[[], np.ndarray]) -> SPAEstimate:
    """MultiSPA from the co-occurrence statistics (see the module notes).

    Parameters
    ----------
    stats : CoOccurrence
        Unweighted pair statistics (:func:`crowdagg.kernels.cooc.co_occurrence`).
    min_partners : int
        Full-rank partners a worker needs to be estimated.
    prior : {"uniform", "estimate"}
    reference : callable
        ``reference()`` -> (W, K, K) the soft majority-vote matrices ``[observed, true]``; called only when the
        full-rank pairs leave more than one group of estimated workers.

    Returns
    -------
    SPAEstimate
    """
    n_workers, k = stats.n_workers, stats.n_classes
    moments = pair_moments(stats)
    pairs = stats.pairs
    rank = numerical_rank(moments)
    keep = rank == k
    partners = np.bincount(pairs[keep].reshape(-1), minlength=n_workers)
    eligible = partners >= min_partners
    cols, owner, _ = worker_columns(pairs, moments, keep, n_workers)
    cols, owner = cols[eligible[owner]], owner[eligible[owner]]  # only eligible workers run SPA
    starts = np.searchsorted(owner, np.arange(n_workers + 1)).astype(np.int64)
    picks = spa(cols, owner, starts, k)
    conf = np.zeros((n_workers, k, k))
    got: np.ndarray = np.all(picks >= 0, axis=1)
    conf[got] = cols[picks[got]].transpose(0, 2, 1)  # [observed, picked column]
    total = conf.sum(axis=1, keepdims=True)
    conf = np.divide(conf, total, out=np.zeros_like(conf), where=total > 0)
    estimated: np.ndarray = got.copy()
    estimated[got] = full_rank(conf[got])
    usable = keep & estimated[pairs[:, 0]] & estimated[pairs[:, 1]]
    # every co-labelled pair counts once, as every block enters Z_m once: weighted by shared tasks, a few heavy
    # pairs decide the orders (trec: 66.95% against 68.66%; web 84.77% against 85.26%)
    sigma, component = align_workers(conf, estimated, pairs, moments, np.ones(len(pairs)))
    conf = np.take_along_axis(conf, sigma[:, None, :].repeat(k, axis=1), axis=2)
    main = component == 0
    if main.any():
        order = common_order(conf, main.astype(np.float64))
        conf = conf[:, :, order]
        others = np.unique(component[component > 0])
        if len(others):
            ref = reference()
            for c in others:
                members = component == c
                conf[members] = conf[members][:, :, _to_reference(conf[members], ref[members])]
    d = estimate_prior(conf, pairs, moments, usable) if prior == "estimate" else np.full(k, 1.0 / k)
    few = int((~eligible).sum())
    deficient = int((eligible & ~estimated).sum())
    reasons = []
    if few:
        reasons.append(f"{few:,} with fewer than {min_partners} co-labelling workers whose {k}×{k} co-occurrence "
                       "matrix has full rank")
    if deficient:
        reasons.append(f"{deficient:,} whose SPA estimate is rank-deficient")
    return SPAEstimate(Estimate(d, conf, estimated, "; ".join(reasons)), moments, pairs, stats.n_tasks, rank)


def in_name_order(stats: CoOccurrence, names: np.ndarray) -> tuple[CoOccurrence, np.ndarray]:
    """``(stats, rank)``: the statistics with the workers renumbered by their names' order (``rank[m]``, worker
    code ``m``'s new number), pairs re-sorted and joints transposed where a pair's order turned.

    Every choice of the methods that follows the workers' order (SPA's ties, where the alignment starts, the
    coupled NMF's sweep) then depends on the workers' names, not on the order of the input's rows.
    """
    n = stats.n_workers
    rank = np.empty(n, dtype=np.int64)
    rank[np.argsort(np.asarray(names), kind="stable")] = np.arange(n)
    a, b = rank[stats.pairs[:, 0]], rank[stats.pairs[:, 1]]
    turned = a > b
    lo, hi = np.minimum(a, b), np.maximum(a, b)
    joint = np.where(turned[:, None, None], stats.joint.transpose(0, 2, 1), stats.joint)
    order = np.lexsort((hi, lo))
    pairs = np.stack([lo, hi], axis=1)[order].astype(np.int32)
    weight = None if stats.weight is None else stats.weight[order]
    return CoOccurrence(pairs, np.ascontiguousarray(joint[order]), stats.n_tasks[order], weight, n,
                        stats.n_classes), rank


def pair_tables_memory(data: AnnotationSet, copies: int) -> tuple[float, str]:
    """Bytes of ``copies`` float64 tables of K² per co-labelled worker pair (at most every pair of workers, and at
    most the answer pairs of the tasks), beside the decoding's (:meth:`MomentAggregator.memory_needed`)."""
    per_task = np.asarray(data.answers_per_task, dtype=np.int64)
    w, k = data.n_workers, data.n_classes
    pairs = min(w * (w - 1) // 2, int((per_task * (per_task - 1) // 2).sum()))
    return 8.0 * copies * pairs * k * k, f"up to {pairs:,} co-labelled worker pairs × {k}² classes"


class MultiSPA(MomentAggregator):
    """MultiSPA (Ibrahim, Fu, Kargas & Huang, NeurIPS 2019): see the module notes."""

    name = "multispa"
    #: Per pair: the joint counts, the moments, their ranks, the stacked columns (twice, sorted), the alignment's
    #: oriented blocks and products (the co-occurrence pass checks its own before it runs).
    pair_copies: ClassVar[int] = 10

    def memory_needed(self, data: AnnotationSet) -> tuple[float, str]:
        base, what = super().memory_needed(data)
        own, pairs = pair_tables_memory(data, self.pair_copies)
        return base + own, f"{what}; {pairs}"

    def _estimate(self, data: AnnotationSet, checked: FitContext) -> Estimate:
        fallback = fallback_once(checked.engine)
        found, rank = spa_estimate(data, checked, fallback)
        est = found.estimate
        return Estimate(est.prior, est.conf_ot[rank], est.estimated[rank], est.why, fallback=fallback)


def spa_estimate(data: AnnotationSet, checked: FitContext,
                 fallback: Callable[[], np.ndarray]) -> tuple[SPAEstimate, np.ndarray]:
    """:func:`multispa` on the fit's engine (one co-occurrence pass), with the workers in their names' order:
    ``(estimate, rank)``, worker code ``m`` at ``rank[m]`` (:func:`in_name_order`).  ``fallback()`` gives the
    soft-vote matrices in worker-code order (:func:`~.estimate.soft_vote_matrices`, made once per fit by the
    caller, only if needed)."""
    stats, rank = in_name_order(co_occurrence(checked.engine, max_memory=checked.max_memory), data.worker_names)
    by_name = np.argsort(rank)
    return multispa(stats, checked["min_partners"], checked["prior"], lambda: fallback()[by_name]), rank
