r"""M-MSR: worker skills by robust rank-one completion of the co-labelled pairs' agreement.

Model (Ma & Olshevsky, "Adversarial crowdsourcing through robust rank-one
matrix completion", NeurIPS 2020; ALGORITHMS.md §7.3; crowd-kit's
``MMSR``): worker :math:`i` answers right with probability :math:`p_i` and
otherwise uniformly among the other :math:`K - 1` classes, so that two
workers agree on a task with probability :math:`1/K + (K - 1) s_i s_j / K`,
:math:`s_i = (K p_i - 1)/(K - 1)` their *skill* (0: chance, negative:
adversarial).  The rescaled agreement rate of a pair sharing tasks,

.. math:: \tilde C_{ij} = \frac{K}{K - 1}\,\frac{\#\text{agree}_{ij}}{\#\text{shared}_{ij}} - \frac{1}{K - 1},

has expectation :math:`s_i s_j`: the observed entries of a rank-one
matrix.  The fit:

1. :math:`\tilde C` on the co-labelled pairs only, from the engine's pair
   statistics (:func:`crowdagg.kernels.cooc.co_occurrence`: the trace of
   each pair's joint counts over its shared tasks);
2. :math:`|\tilde C| \approx u v^T` by alternating mean-subsequence-reduced
   updates (:func:`crowdagg.kernels.mmsr.msr_half_step`):
   :math:`v_j` the trimmed mean of :math:`|\tilde C_{ij}|/u_i` over j's
   partners -- dropping the ``F`` largest values above :math:`v_j` and the
   ``F`` smallest below it, :math:`F = \lfloor d_{\min}/2 \rfloor - 1` with
   :math:`d_{\min}` the fewest partners a worker has -- then :math:`u` from
   :math:`v` alike, from a seeded uniform start (:math:`u = v`, drawn by
   worker name), until
   :math:`\|u v^T - u' v'^T\|_F \le` ``tol`` (1e-10, at most ``max_iter``
   10,000 rounds; the norm in O(workers), :func:`~crowdagg.kernels.mmsr.rank_one_change`);
   :math:`|s| = u \sqrt{\|v\| / \|u\|}`;
3. the signs (``signs``): by default each worker takes the sign of its
   evidence :math:`e_i = \sum_j n_{ij} \tilde C_{ij} \sigma_j |s_j|`
   (:math:`n_{ij}` the tasks the pair shares), all at once from all
   positive (most workers honest) until no sign changes
   (:func:`evidence_signs`).  ``signs=spectral`` is crowd-kit's step on the
   co-labelled pairs: a graph with a node per worker, an edge for each
   pair of negative :math:`\tilde C_{ij}` and a path of two edges (through
   a node of its own) for each positive one; on each connected component
   the eigenvector of its random walk for the eigenvalue nearest -1 -- a
   two-colouring where disagreeing pairs take opposite signs and agreeing
   pairs the same -- oriented so that most of the component's workers are
   positive (:func:`skill_signs`).  On sparse crowds, where most pairs
   share one task and :math:`\tilde C_{ij}` is -1/(K-1) or 1, its
   unweighted edges are noise: 10,000 honest workers (accuracy .6--.9,
   five answers a task) come out a third negative (accuracy .69 against
   majority vote's .96), where the evidence keeps 49 negative (.957); on
   the real datasets the evidence gains or ties on most (rte .8975 →
   .9275, cf .853 → .897, sentiment .9006 → .9032; music .800 → .794);
4. :math:`s` clipped to :math:`[-1/(K-1) + 1/\sqrt N,\ 1 - 1/\sqrt N]`
   (``N`` the tasks with answers), :math:`p = s (K-1)/K + 1/K`, and the
   weighted vote :math:`\arg\max_k \sum_m w_m 1[\tilde y^{(m)} = k]` with
   the one-coin log-odds :math:`w_m = \log((K-1) p_m / (1 - p_m))`;
   ``posteriors`` are its softmax (the one-coin posteriors under a uniform
   prior), ties drawn by the seed and the task's name.

A worker without answers has skill 0 (accuracy 1/K, weight 0).  A worker
whose tasks nobody else answered has no agreement to read: skill
:math:`1/\sqrt N`, the least positive one, so that their answers still
decide their own tasks (where crowd-kit keeps the random start).

**Where crowd-kit differs** (each shown by a test in
``tests/methods/mmsr/``): its covariation matrix is workers × workers,
and a pair that shares no task gets :math:`\tilde C = -1/(K-1)` there,
which its sign step reads as a disagreement, so two groups of workers who
never share a task come out of opposite signs and one group's answers are
turned against it (and two groups of equal size cancel: every skill 0,
and its vote fails on all-NaN scores); its sign graph is (workers +
positive pairs)² dense
(1,000 workers sharing half a million pairs ask for terabytes); and a
worker with fewer than two partners makes its F -1, which turns every
trimmed mean into the maximum.  Here F is at least 0 and read over the
workers who have partners.

Engines: the pair statistics and the vote are passes of the fit's engine
(local or Dask: the same bits); the rounds run where the fit runs, over the
P pairs' adjacency.

Memory: the pair statistics (:mod:`crowdagg.kernels.cooc`: P × K² joint
counts), the pairs' adjacency (2P entries), the sign graph (P nodes at
most) and its eigenvector: O(P K² + workers), P the co-labelled pairs --
never a workers × workers array (:func:`mmsr_memory`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from ...data.annotations import AnnotationSet
from ...errors import ConvergenceWarning, warn
from ..base import FitContext, IterativeAggregator, make_result
from ..blocks import SOFTMAX, Posterior, Vote, finish_votes
from ..loop import NO_OBJECTIVE, Residual, Run, Step
from ..result import AggregationResult

#: Components of the sign graph with at most this many nodes are solved densely (LAPACK's eigh, 8 n² bytes);
#: larger ones by ARPACK (scipy's eigsh) on the sparse matrix.
DENSE_NODES = 400
#: Bytes per co-labelled pair beyond its K² joint counts: cooc's keys, counts, pairs and look-up (~88), the
#: agreement, its magnitude and the shared counts (24), the adjacency (2 × 12), the evidence's temporaries (~48).
BYTES_PER_PAIR = 88 + 24 + 24 + 48
#: And with ``signs=spectral``: the sign graph's edges (up to 4 stored entries of a CSR and its COO, ~100) and the
#: Lanczos vectors of its midpoint node (~24 of 8 bytes).
SPECTRAL_BYTES_PER_PAIR = 100 + 192


def answer_pairs(data: AnnotationSet) -> int:
    """Σ c(c − 1)/2 over the tasks' answer counts c: the most co-labelled worker pairs ``data`` can have."""
    c = np.asarray(data.answers_per_task, dtype=np.int64)
    return int((c * (c - 1) // 2).sum())


def mmsr_memory(data: AnnotationSet, spectral: bool = False) -> tuple[float, str]:
    """Bytes an M-MSR fit allocates, and what they are for.

    P, the co-labelled pairs, is bounded before any pass by the answer pairs
    and by W(W − 1)/2; each costs its K² joint counts (8 bytes each) and
    :data:`BYTES_PER_PAIR`; each worker ~12 floats (the factors, their
    previous values, the signs, the skills); the vote's posteriors
    (tasks × K, a few copies); with ``spectral`` (``signs=spectral``) the
    sign graph (:data:`SPECTRAL_BYTES_PER_PAIR`) and a dense component of it
    (:data:`DENSE_NODES`², three copies).
    """
    w, n, k = data.n_workers, data.n_tasks, data.n_classes
    pairs = min(answer_pairs(data), w * (w - 1) // 2)
    per_pair = 8.0 * k * k + BYTES_PER_PAIR + (SPECTRAL_BYTES_PER_PAIR if spectral else 0)
    need = per_pair * pairs + 8.0 * 12 * w + 8.0 * 6 * n * k + (24.0 * DENSE_NODES ** 2 if spectral else 0.0)
    return need, (f"up to {pairs:,} co-labelled worker pairs × {k}² classes, {w:,} workers, "
                  f"{n:,} tasks × {k:,} classes")


def skill_signs(pairs: np.ndarray, c: np.ndarray, n_workers: int, seed: int) -> np.ndarray:
    """The sign (+1, -1, or 0 where the eigenvector is) of each worker's skill, from the pairs' ``c`` (P,).

    The graph of step 3 of the module notes: a negative pair is an edge, a
    positive pair a path of two edges through a node of its own (a pair of
    ``c`` exactly 0 says nothing: no edge).  Per connected component, the
    eigenvector of the random walk :math:`D^{-1} A` for its eigenvalue
    nearest -1 -- that of :math:`D^{-1/2} A D^{-1/2}` scaled by
    :math:`D^{-1/2}`, the same signs -- with most of the component's workers
    positive (ties positive: the first nonzero entry).  A worker in no edge
    is +1.  ``seed`` draws ARPACK's start vector.
    """
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components
    from scipy.sparse.linalg import eigsh

    pos, neg = np.flatnonzero(c > 0), np.flatnonzero(c < 0)
    n_nodes = n_workers + pos.size
    mid = n_workers + np.arange(pos.size, dtype=np.int64)
    a = np.concatenate([pairs[neg, 0], pairs[pos, 0], pairs[pos, 1]]).astype(np.int64)
    b = np.concatenate([pairs[neg, 1], mid, mid])
    graph = coo_matrix((np.ones(2 * a.size), (np.concatenate([a, b]), np.concatenate([b, a]))),
                       shape=(n_nodes, n_nodes)).tocsr()
    del a, b, mid
    degree = np.asarray(graph.sum(axis=1)).ravel()
    n_comp, comp = connected_components(graph, directed=False)
    signs = np.ones(n_workers)
    order = np.argsort(comp, kind="stable")
    bounds = np.searchsorted(comp[order], np.arange(n_comp + 1))
    rng = np.random.default_rng(seed)
    for lo, hi in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
        if hi - lo < 2:  # a worker in no edge
            continue
        nodes = order[lo:hi]
        scale = 1.0 / np.sqrt(degree[nodes])
        sub = graph[nodes][:, nodes]
        normal = sub.multiply(scale[:, None]).multiply(scale[None, :]).tocsr()
        if nodes.size <= DENSE_NODES:
            vector = np.linalg.eigh(normal.toarray())[1][:, 0]
        else:
            vector = eigsh(normal, k=1, which="SA", v0=rng.uniform(0.5, 1.5, nodes.size))[1][:, 0]
        workers = nodes < n_workers
        sign = np.sign(vector[workers] * scale[workers])
        total = sign.sum()
        first = sign[np.flatnonzero(sign)[0]] if np.any(sign) else 1.0
        signs[nodes[workers]] = -sign if total < 0 or (total == 0 and first < 0) else sign
    return signs


#: The most rounds of :func:`evidence_signs` (each flips the workers whose evidence disagrees with their sign; the
#: real datasets settle in 2 to 6).
MAX_SIGN_ROUNDS = 100


def evidence_signs(pairs: np.ndarray, c: np.ndarray, n_shared: np.ndarray, magnitude: np.ndarray,
                   signs: np.ndarray) -> np.ndarray:
    r"""The signs from ``signs`` (all +1: most workers honest) by the evidence of each worker's pairs.

    Worker i takes the sign of :math:`e_i = \sum_j n_{ij} 	ilde C_{ij}
    \sigma_j |s_j|` over its partners (:math:`n_{ij}` the tasks the pair
    shares, so a pair seen on many tasks weighs more than one seen on one;
    :math:`E 	ilde C_{ij} = s_i s_j`, so :math:`e_i` has the sign of
    :math:`s_i` when the partners' signs are right); all workers at once,
    until no sign changes or :data:`MAX_SIGN_ROUNDS`.  A worker without
    evidence (:math:`e_i = 0`) is positive.  The sums are numpy's
    ``bincount`` in pair order.
    """
    a, b = pairs[:, 0], pairs[:, 1]
    w = signs.size
    weight = n_shared * c
    for _ in range(MAX_SIGN_ROUNDS):
        evidence = (np.bincount(a, weight * signs[b] * magnitude[b], minlength=w)
                    + np.bincount(b, weight * signs[a] * magnitude[a], minlength=w))
        new = np.where(evidence < 0, -1.0, 1.0)
        if np.array_equal(new, signs):
            break
        signs = new
    return signs


@dataclass
class MMSRState:
    """The rank-one factors and what the half steps read: the pairs' adjacency (CSR over the workers, the
    magnitudes ``|C̃|`` as values), the trim ``F``, the floor that replaces a mean of one zero (1/√N), a scratch
    buffer; and the pairs (P, 2) with their signed ``C̃`` (P,), for the signs at the end."""

    u: np.ndarray
    v: np.ndarray
    offsets: np.ndarray
    partner: np.ndarray
    value: np.ndarray
    trim: int
    floor: float
    scratch: np.ndarray
    pairs: np.ndarray
    c: np.ndarray
    n_shared: np.ndarray


#: The factors' entries stay within [1/FACTOR_RANGE, FACTOR_RANGE]: a round that would take one beyond is not taken
#: (:func:`msr_step`).  Where no rank-one matrix fits the pairs' agreement -- three workers, one pair at chance
#: agreement and the two others above it ask for an infinite skill -- the rounds drive some entries up and others
#: down by a constant factor each (×4 a round on that crowd), until they overflow to inf and 0 and every skill is NaN
#: (crowd-kit's end after its 10,000 rounds).  The skills converge meanwhile (|s| = u √(‖v‖/‖u‖) is scale-free):
#: those of the last round within the range are their limit to many digits.  1e50 keeps every product of four of
#: them (the change's squared norms, over a billion workers) far from overflow.
FACTOR_RANGE = 1e50


def _in_range(x: np.ndarray) -> bool:
    """Every entry 0 (a worker at chance: :func:`~crowdagg.kernels.mmsr.msr_half_step`) or within
    [1/:data:`FACTOR_RANGE`, :data:`FACTOR_RANGE`] (NaN is neither)."""
    big = np.abs(x) > FACTOR_RANGE
    tiny = (np.abs(x) < 1.0 / FACTOR_RANGE) & (x != 0.0)
    return not (big.any() or tiny.any() or np.isnan(x).any())


def msr_step(state: MMSRState) -> float | None:
    """One round: ``v`` from ``u``, then ``u`` from the new ``v``; returns ‖uvᵀ − u'v'ᵀ‖_F, or None -- and the
    state unchanged -- where the new factors would leave [1/:data:`FACTOR_RANGE`, :data:`FACTOR_RANGE`]."""
    from ...kernels.mmsr import _msr_half_step, _rank_one_change

    u_prev, v_prev = state.u, state.v
    v, u = np.empty_like(v_prev), np.empty_like(u_prev)
    # the kernels unchecked: the state's arrays fit one another by construction (_start)
    _msr_half_step(state.offsets, state.partner, state.value, u_prev, v_prev, state.trim, state.floor, v,
                   state.scratch)
    _msr_half_step(state.offsets, state.partner, state.value, v, u_prev, state.trim, state.floor, u, state.scratch)
    if not all(_in_range(x) for x in (u, v)):
        return None
    state.u, state.v = u, v
    return float(_rank_one_change(u, v, u_prev, v_prev))


class MMSR(IterativeAggregator):
    __doc__ = __doc__
    name = "mmsr"
    loop_name = "M-MSR"
    objective_name = "change of u vᵀ (Frobenius)"
    stop_rule = Residual(quantity="rank-one estimate (‖uvᵀ − u'v'ᵀ‖_F)")
    objective_direction: ClassVar[str] = NO_OBJECTIVE
    worker_param_names: ClassVar[tuple[str, ...]] = ("skill", "accuracy", "weight")
    memory_advice = "its pair statistics grow with the co-labelled worker pairs × classes²: use wmv or onecoin"

    def memory_needed(self, data: AnnotationSet) -> tuple[float, str]:
        return mmsr_memory(data, getattr(self, "signs", "evidence") == "spectral")

    def _fit(self, data: AnnotationSet, checked: FitContext, callback: Any) -> AggregationResult:
        if data.n_classes == 1:  # nothing to decide: every task is the one class (as every method labels it)
            ones = np.ones(data.n_workers)
            return make_result(self.name, data, np.ones((data.n_tasks, 1)), np.zeros(data.n_tasks, dtype=np.int64),
                               np.ones(1), worker_params={"skill": np.zeros(data.n_workers), "accuracy": ones,
                                                          "weight": np.zeros(data.n_workers)}, converged=True)
        return super()._fit(data, checked, callback)

    def _start(self, data: AnnotationSet, checked: FitContext, start: int, rng: np.random.Generator
               ) -> tuple[MMSRState, None]:
        from ...kernels import cooc
        from ...kernels.draws import name_keys, seed_key, uniforms
        from ...kernels.mmsr import _pair_adjacency

        k, w = data.n_classes, data.n_workers
        stats = cooc.co_occurrence(checked.engine, max_memory=checked.max_memory)
        agree = np.trace(stats.joint, axis1=1, axis2=2) / stats.n_tasks
        pairs, c, n_shared = stats.pairs, (k * agree - 1.0) / (k - 1), stats.n_tasks
        del stats, agree
        offsets, partner, value = _pair_adjacency(pairs, np.abs(c), w)
        degree = np.diff(offsets)
        linked = degree[degree > 0]
        # crowd-kit's F = ⌊min partners / 2⌋ - 1, read over the workers who have partners and at least 0
        trim = max(int(linked.min()) // 2 - 1, 0) if linked.size else 0
        floor = 1.0 / np.sqrt(max(int(np.count_nonzero(data.answers_per_task)), 1))
        # u = v at the start, uniform as crowd-kit's: drawn by worker name (row order changes no bit), or as
        # crowd-kit draws it (numpy's legacy generator over the worker codes)
        if checked["start"] == "codes":
            u = np.random.RandomState(checked["seed"] % 2**32).uniform(size=w)
        else:
            u = uniforms(name_keys(data.worker_names, seed_key(checked["seed"])), 1)[:, 0]
        state = MMSRState(u, u.copy(), offsets, partner, value, trim, floor,
                          np.empty(max(int(degree.max()) if w else 0, 1)), pairs, c, n_shared)
        return state, None

    def _step(self, data: AnnotationSet, state: MMSRState, checked: FitContext) -> Step:
        change = msr_step(state)
        if change is None:  # the completion diverges: the skills are the last round's (FACTOR_RANGE)
            return Step(halted=True)
        return Step(objective=change, residual=change)  # the trace of the changes: crowd-kit's loss_history_

    def _finish(self, data: AnnotationSet, run: Run, checked: FitContext) -> AggregationResult:
        state: MMSRState = run.state
        k, w = data.n_classes, data.n_workers
        if run.halted:
            warn(ConvergenceWarning(
                f"mmsr: the rank-one completion diverges: after {run.n_iter:,} rounds its factors would leave "
                f"[{1 / FACTOR_RANGE:g}, {FACTOR_RANGE:g}] (no skills s fit the pairs' agreement as s_i s_j: as when two "
                "workers agree at chance while each agrees well with a third, in a small crowd); the skills are "
                "those of the last round, their limit, and the run is not converged; wmv or onecoin may be steadier"))
        # the norms summed in sorted order: the same bits in any order of the workers (the input's rows)
        nu, nv = (float(np.sqrt(np.sort(x * x).sum())) for x in (state.u, state.v))
        magnitude = state.u * np.sqrt(nv / nu) if nu > 0 else state.u.copy()
        if checked["signs"] == "spectral":
            signs = skill_signs(state.pairs, state.c, w, checked["seed"])
        else:
            signs = evidence_signs(state.pairs, state.c, state.n_shared, magnitude, np.ones(w))
        skill = signs * magnitude
        floor = state.floor
        skill[np.diff(state.offsets) == 0] = floor  # no partner: no agreement to read (crowd-kit: the random start)
        # crowd-kit's order: the upper clip, then the lower one (which wins on a handful of tasks); p stays in (0, 1)
        skill = np.maximum(np.minimum(skill, 1.0 - floor), -1.0 / (k - 1) + floor)
        skill[data.answers_per_worker == 0] = 0.0  # no answers: chance
        accuracy = skill * (k - 1) / k + 1.0 / k
        weight = np.log(accuracy * (k - 1) / (1.0 - accuracy))
        vote = Vote(weight, checked["seed"], atol=1e-12, on_shares=False)
        post, labels, prior = finish_votes(checked.engine, Posterior(vote, SOFTMAX), k)
        return make_result(self.name, data, post, labels, prior,
                           worker_params={"skill": skill, "accuracy": accuracy, "weight": weight},
                           n_iter=run.n_iter, converged=run.converged)


__all__ = ["MMSR", "MMSRState", "mmsr_memory", "msr_step", "skill_signs", "answer_pairs"]
