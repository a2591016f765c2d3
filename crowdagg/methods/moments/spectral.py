r"""Spectral-DS: three-view moments, a robust tensor power method, then EM ("Spectral methods meet EM").

Model
-----
Dawid--Skene: :math:`y_n \sim \mathrm{Cat}(d)`; given :math:`y_n = k`,
worker :math:`m` answers :math:`\tilde y_n^{(m)} \sim \mathrm{Cat}(A_m[:, k])`,
independently of the others.  Zhang, Chen, Zhou & Jordan (NeurIPS 2014;
JMLR 17(102), 2016) estimate every :math:`A_m` and :math:`d` by the method
of moments, then refine by EM (ALGORITHMS.md §3):

1. **Three views.**  The workers are split into three groups
   :math:`G_1, G_2, G_3` (``groups``, below).  The view of group :math:`g`
   on task :math:`n` is the *sum* of its workers' one-hot answers,
   :math:`x_g(n) = \sum_{m \in G_g} e_{\tilde y_n^{(m)}} \in \mathbb R^K`
   (a missing answer adds nothing).  Given :math:`y_n = k` the three views
   are independent, with :math:`E[x_g \mid y = k] = C_g[:, k]` (the group's
   confusion scaled by its labelling rates).
2. **Moments** (:math:`E[\cdot] = \frac1N \sum_n`, N the tasks), all
   from the engine's sparse statistics, never a tasks × workers array:
   :math:`E[x_a x_b^\top]` is the sum of the joint counts of the worker
   pairs across groups :math:`a, b` (:func:`crowdagg.kernels.cooc.co_occurrence`,
   each pair oriented), and :math:`E[x_a \otimes x_b \otimes x_c]` the one
   triple of units of :func:`crowdagg.kernels.cooc.triple_statistics` with
   the groups as units.
3. **Symmetrisation** (``SolveCFG(x_a, x_b, x_c)``, for each group c in
   turn): :math:`\tilde x_a = E[x_c x_b^\top] E[x_a x_b^\top]^{-1} x_a`,
   :math:`\tilde x_b = E[x_c x_a^\top] E[x_b x_a^\top]^{-1} x_b`, so that
   :math:`M_2 = E[\tilde x_a \tilde x_b^\top] = \sum_k d_k \mu_k \mu_k^\top`
   and :math:`M_3 = E[\tilde x_a \otimes \tilde x_b \otimes x_c] =
   \sum_k d_k \mu_k^{\otimes 3}` with :math:`\mu_k = C_c[:, k]`.
4. **Whitening and the robust tensor power method** (Anandkumar et al.,
   JMLR 2014, Algorithm 1): :math:`M_2 = U S U^\top`,
   :math:`W = U S^{-1/2}`; :math:`T = M_3(W, W, W)` (tensorly's
   ``multi_mode_dot``), averaged over its six transpositions (the
   population tensor is symmetric; the estimate only nearly -- the
   reference codes decompose it as it is).  Each of the K components:
   ``restarts`` random unit starts (uniform on :math:`[-\frac12, \frac12]^K`,
   normalised, as ``RobustPowerMethod.m``; drawn from ``seed``), each
   iterated ``power_iter`` times :math:`v \leftarrow T(I, v, v) /
   \lVert\cdot\rVert`; the start of largest :math:`\lambda = T(v, v, v)`
   is iterated ``power_iter`` times more and deflated,
   :math:`T \leftarrow T - \lambda v^{\otimes 3}`.
5. **Un-whitening**: :math:`\mu = \lambda (W^\top)^{-1} v =
   \lambda U S^{1/2} v`, weight :math:`w = 1/\lambda^2` (the class prior).
6. **Per worker**: with :math:`x_{alt}` the sum of the two other groups'
   views, :math:`E[x_m x_{alt}^\top] = A_m \operatorname{diag}(d)
   C_{alt}^\top`, so :math:`A_m \propto \frac1N \sum_n x_m x_{alt}^\top \,
   (\operatorname{diag}(w_{alt}) C_{alt}^\top)^{-1}` -- the worker's joint
   counts with its partners in the other two groups, again from the pair
   statistics; :math:`C_{alt}` the sum of the other groups' matrices and
   :math:`w_{alt}` the mean of their weights (``MainProgram.m``).  Then
   clipped at 1e-6 and column-normalised (which cancels the labelling
   rate).
7. **Refinement** (``refine=ds``, the default: "Spectral-D&S"):
   Dawid--Skene EM started from the estimate, at most ``refine_iter``
   iterations (default 200, in practice to ds's tolerance 1e-6).  The
   paper's theory is for **one** EM step, the authors' code runs 10
   rounds (``Nround = 10``, no class prior in its E-step); iterating to
   convergence is this package's choice: it only climbs the likelihood
   from the spectral start, and ``-p refine_iter=1`` (or ``10``) gives the
   published variants.  ``refine=none`` is the spectral estimate itself,
   decoded by MAP.

The class order
---------------
Each tensor decomposition returns its components in an arbitrary order.
``MainProgram.m`` puts each group's component in the row of its largest
entry (``SolveCFG.m``: the group aggregate assumed diagonally dominant,
group by group).  Here the order is resolved from the data, never from
the truth, in two steps: (a) the three groups are put in **one** order
by their cross moment -- :math:`C_1^{+} E[x_1 x_g^\top] (C_g^{+})^\top =
P\,\operatorname{diag}(d)` for the permutation :math:`P` matching group
g's components to group 1's, found by the Hungarian algorithm -- which
needs no assumption on the workers; (b) the common order is the one that
makes the **average** worker's matrix diagonally dominant
(:func:`.align.common_order`), the identifiability assumption of the
papers.

Group construction (``groups``)
-------------------------------
``balanced`` (default): the workers by answer count, largest first (ties
by name), each to the group with the fewest answers so far -- the three
groups carry nearly equal answer counts, so no view is much noisier than
the others (a crowd's answer counts are heavy-tailed: on rte one worker
gave 10% of the answers).  Deterministic from the answers, no random draw,
whatever the order of the rows.  ``round-robin``: the i-th worker in the
order of the names to group :math:`i \bmod 3`, as ``MainProgram.m``
(``mod(1:m, 3) + 1``) does over its worker numbers.

When it applies
---------------
Identifiability needs each group's matrix :math:`C_g` of rank K (every
group, as a whole, tells the K classes apart: better than chance on
average, each class answered), three groups sharing tasks (a task
answered by all three), and enough tasks for the third-order moments
(their error falls as :math:`1/\sqrt N`; thousands of tasks for K = 5).
What the user sees when it does not:

* fewer than three workers with answers, a group with no answer, no task
  answered by all three groups, a cross moment
  :math:`E[x_a x_b^\top]` or :math:`M_2` of rank below K (relative
  singular value below :data:`RANK_TOL`), or a decomposition that finds
  fewer than K positive components: nothing can be estimated -- every
  worker gets the family's fallback (answers against the soft majority
  vote, :mod:`.estimate`), the prior is the answers' label shares, and a
  warning names the cause (``refine=ds`` then is Dawid--Skene EM from that
  start; ``ds`` needs none of these conditions).  The helpers raise
  :class:`Unidentified` (a :class:`~crowdagg.errors.DataError`) with the
  cause;
* a worker who shares no task with the other two groups' workers, or
  whose group's system :math:`\operatorname{diag}(w_{alt}) C_{alt}^\top`
  is singular: not estimated -- the family's fallback (answers against the
  soft majority vote) and a warning saying how many
  (:mod:`.estimate`); a worker with few shared tasks gets a noisy matrix
  (clipped, never NaN), which ``refine=ds`` corrects from the data;
* groups made mostly of near-random workers (MultiSPA's demo crowd: 21 of
  25 workers answer from random distributions): each group's summed view
  is nearly the same for every class, :math:`C_g` is nearly rank one
  (condition number 16 to 69 there), and the whitening multiplies the
  moments' sampling error by its square -- the raw estimate is finite but
  poor (aligned MSE 0.02 against DS's 8e-4, not better at N = 10^5), and
  may collapse onto one class (the base warns); ``refine=ds`` recovers
  DS's matrices.  A per-worker method (MultiSPA) has no such sums.

The tensor power method is written here rather than taken from
``tensorly.decomposition.symmetric_parafac_power_iteration``: that one
draws its starts from NumPy's global generator (not from ``seed``) and
runs one start at a time (100 x 100 x K calls of ``multi_mode_dot``,
seconds); here the starts of a component iterate together, one matrix
product a step.  tensorly does the multilinear maps (symmetrisation,
whitening).

Cost: the pair and triple passes O(Σ_n c_n² + Σ_n c_n³) over tasks with
c_n answers (on the engine, any thread count or engine the same bits);
the three decompositions O(restarts · power_iter · K⁴) each; per worker
O(K³).  Memory: the pairs' P × K² counts and W × K² tables.

References
----------
Y. Zhang, X. Chen, D. Zhou, M. I. Jordan, "Spectral methods meet EM: a
provably optimal algorithm for crowdsourcing", NeurIPS 2014 and JMLR
17(102), 2016.  A. Anandkumar, R. Ge, D. Hsu, S. Kakade, M. Telgarsky,
"Tensor decompositions for learning latent variable models", JMLR 15,
2014.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from ...data.annotations import AnnotationSet
from ...errors import DataError
from ..base import FitContext
from ..em.ds import em_memory
from .align import assignment, common_order, reorder
from .estimate import FLOOR, Estimate, MomentAggregator

#: A K×K moment whose smallest singular value is below this fraction of its largest counts as rank-deficient.
RANK_TOL = 1e-10

def make_groups(answers: np.ndarray, how: str = "balanced", names: np.ndarray | None = None) -> np.ndarray:
    """Each worker's group, 0, 1 or 2: ``(n_workers,)`` int64.

    Parameters
    ----------
    answers : ndarray of int, shape (n_workers,)
        Each worker's answer count.
    how : {"balanced", "round-robin"}
        ``balanced``: workers by count, largest first (ties: in the order of ``names``), each to the group holding
        the fewest answers so far (ties: the lower group); ``round-robin``: the i-th worker in the order of
        ``names`` to group ``i mod 3``.
    names : ndarray, shape (n_workers,), optional
        The workers' names (distinct): the order that breaks ties, so that the groups depend on the answers
        alone, not on the order of the rows (which decides the worker codes).  Default: the codes' order.
    """
    answers = np.asarray(answers, dtype=np.int64)
    n = answers.shape[0]
    rank = np.arange(n) if names is None else np.argsort(np.argsort(np.asarray(names), kind="stable"), kind="stable")
    if how == "round-robin":
        return (rank % 3).astype(np.int64)
    if how != "balanced":
        raise ValueError(f"unknown grouping {how!r}")
    group = np.zeros(n, dtype=np.int64)
    load = [0, 0, 0]
    for m in np.lexsort((rank, -answers)):  # one step a worker, not an answer
        g = load.index(min(load))
        group[m] = g
        load[g] += int(answers[m])
    return group


def cross_moments(pairs: np.ndarray, joint: np.ndarray, group: np.ndarray, n_classes: int) -> np.ndarray:
    """``M[g, h]`` = Σ_n x_g(n) x_h(n)ᵀ (counts, int64), shape (3, 3, K, K), for g ≠ h (zero on g = h).

    The group views' cross products are the sums of the joint counts of the worker pairs across the two groups,
    each pair oriented ``[answer in g, answer in h]``; ``M[h, g] = M[g, h]ᵀ``.
    """
    k = n_classes
    out = np.zeros((3, 3, k, k), dtype=np.int64)
    g1, g2 = group[pairs[:, 0]], group[pairs[:, 1]]
    for g in range(3):
        for h in range(3):
            if g != h:
                out[g, h] = joint[(g1 == g) & (g2 == h)].sum(axis=0) + joint[(g1 == h) & (g2 == g)].sum(axis=0).T
    return out


def partner_moments(pairs: np.ndarray, joint: np.ndarray, group: np.ndarray, n_workers: int,
                    n_classes: int) -> np.ndarray:
    """``S[m]`` = Σ_n x_m(n) x_alt(n)ᵀ (counts, int64), shape (n_workers, K, K): worker m's answers against those of
    its partners in the two other groups, ``[answer of m, answer of partner]``."""
    out = np.zeros((n_workers, n_classes, n_classes), dtype=np.int64)
    cross = group[pairs[:, 0]] != group[pairs[:, 1]]
    p, j = pairs[cross], joint[cross]
    np.add.at(out, p[:, 0], j)  # integer sums: the same bits in any order
    np.add.at(out, p[:, 1], j.transpose(0, 2, 1))
    return out


class Unidentified(DataError):
    """The moments cannot identify the classes; the message is the cause (the method falls back, see the notes)."""


def _check_rank(matrix: np.ndarray, what: str) -> None:
    s = np.linalg.svd(matrix, compute_uv=False)
    if not np.isfinite(s).all() or s[0] <= 0 or s[-1] < RANK_TOL * s[0]:
        rank = int(np.sum(s > RANK_TOL * s[0])) if np.isfinite(s).all() and s[0] > 0 else 0
        raise Unidentified(f"{what} has rank {rank} < {matrix.shape[0]} classes: the three groups cannot tell the "
                           "classes apart -- a class no group answers, groups sharing too few tasks, or workers no "
                           "better than chance")


def power_method(tensor: np.ndarray, rng: np.random.Generator, restarts: int, iterations: int
                 ) -> tuple[np.ndarray, np.ndarray]:
    """The robust tensor power method with deflation: ``(lam (K,), vectors (K, K))``, component r in column r.

    For each of the K components: ``restarts`` starts uniform on [-1/2, 1/2]^K (normalised), iterated
    ``iterations`` times together (one matrix product a step for all starts); the start of the largest
    ``|T(v, v, v)|`` (ties: the first) is iterated ``iterations`` times more, then deflated.  ``tensor`` is
    symmetric (K, K, K).  A component found with λ < 0 is returned as (-λ, -v), the same rank-one term: a
    class's weight is positive, and the map v -> T(I, v, v) cannot tell v from -v (an estimated tensor's
    fixed point of negative λ flips sign every step, so its sign after the iterations is arbitrary).
    """
    t = np.array(tensor, dtype=np.float64)
    k = t.shape[0]
    lam = np.empty(k)
    vectors = np.empty((k, k))

    def step(v: np.ndarray) -> np.ndarray:
        # T(I, v, v) for each row v: the unfolding T_(1) (K × K²) times v ⊗ v
        out = (v[:, :, None] * v[:, None, :]).reshape(v.shape[0], k * k) @ t.reshape(k, k * k).T
        norm = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.where(norm > 0, norm, 1.0)

    def value(v: np.ndarray) -> np.ndarray:
        return np.einsum("ijl,ri,rj,rl->r", t, v, v, v)

    for r in range(k):
        v = rng.uniform(-0.5, 0.5, size=(restarts, k))
        v /= np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-300)
        for _ in range(iterations):
            v = step(v)
        best = v[int(np.argmax(np.abs(value(v))))][None, :]
        for _ in range(iterations):
            best = step(best)
        lam[r] = value(best)[0]
        if lam[r] < 0:  # (λ, v) and (-λ, -v) are the same term λ v⊗v⊗v: the positive one is the class's
            lam[r], best = -lam[r], -best
        vectors[:, r] = best[0]
        t = t - lam[r] * np.einsum("i,j,l->ijl", best[0], best[0], best[0])
    return lam, vectors


def symmetrise(tensor: np.ndarray) -> np.ndarray:
    """The average of a (K, K, K) tensor's six transpositions."""
    out = np.zeros_like(tensor, dtype=np.float64)
    for p in itertools.permutations(range(3)):
        out += np.transpose(tensor, p)
    return out / 6.0


def solve_group(m_ab: np.ndarray, m_cb: np.ndarray, m_ca: np.ndarray, t_abc: np.ndarray,
                rng: np.random.Generator, restarts: int, iterations: int, names: str) -> tuple[np.ndarray, np.ndarray]:
    """``SolveCFG``: view c's matrix ``C_c`` (K, K) (component r in column r) and weights ``w`` (K,).

    Parameters
    ----------
    m_ab, m_cb, m_ca : ndarray, shape (K, K)
        E[x_a x_bᵀ], E[x_c x_bᵀ], E[x_c x_aᵀ].
    t_abc : ndarray, shape (K, K, K)
        E[x_a ⊗ x_b ⊗ x_c].
    names : str
        The groups, for messages ("groups 2, 3 for group 1").
    """
    import tensorly as tl

    _check_rank(m_ab, f"the cross moment E[x_a x_b^T] of {names}")
    s_a = np.linalg.solve(m_ab.T, m_cb.T).T  # E[x_c x_bᵀ] E[x_a x_bᵀ]⁻¹
    s_b = np.linalg.solve(m_ab, m_ca.T).T  # E[x_c x_aᵀ] E[x_b x_aᵀ]⁻¹, E[x_b x_aᵀ] = E[x_a x_bᵀ]ᵀ
    m2 = s_a @ m_ab @ s_b.T
    m2 = (m2 + m2.T) / 2.0  # symmetric in the population; the estimate's antisymmetric part is noise
    m3 = tl.tenalg.multi_mode_dot(tl.tensor(t_abc), [s_a, s_b], modes=[0, 1])
    _check_rank(m2, f"the second moment M2 of {names}")
    u, s, _ = np.linalg.svd(m2)
    whiten = u / np.sqrt(s)
    t = symmetrise(tl.to_numpy(tl.tenalg.multi_mode_dot(m3, [whiten.T] * 3, modes=[0, 1, 2])))
    lam, v = power_method(t, rng, restarts, iterations)
    if not (np.isfinite(lam).all() and (lam > RANK_TOL * max(float(lam.max()), 1e-300)).all()):
        raise Unidentified(f"the third-order moments of {names} show fewer than {len(lam)} components "
                           f"(eigenvalues {np.array2string(lam, precision=3)}): too few tasks answered by all three "
                           "groups, or classes the groups cannot tell apart")
    conf = (u * np.sqrt(s)) @ v * lam  # λ (Wᵀ)⁻¹ v, column by column
    return conf, 1.0 / lam**2


def match_order(c_ref: np.ndarray, c_g: np.ndarray, m_ref_g: np.ndarray) -> np.ndarray:
    """``order`` (K,): column ``order[r]`` of ``c_g`` is the class of column r of ``c_ref``.

    E[x_ref x_gᵀ] = C_ref diag(d) C_gᵀ, so C_ref⁺ E[x_ref x_gᵀ] (C_g⁺)ᵀ is diag(d) with its columns permuted as the
    components of g are relative to those of ref: the assignment of largest total (the Hungarian algorithm).
    """
    return assignment(np.linalg.pinv(c_ref) @ m_ref_g @ np.linalg.pinv(c_g).T)


@dataclass(frozen=True)
class GroupFit:
    """The three groups' matrices ``conf`` (3, K, K) and weights ``weights`` (3, K), in one common order."""

    conf: np.ndarray
    weights: np.ndarray


def fit_groups(cross: np.ndarray, triple: np.ndarray, rng: np.random.Generator, restarts: int,
               iterations: int) -> GroupFit:
    """``SolveCFG`` for each group (c = 0, 1, 2 with a, b = c + 1, c + 2 mod 3, as ``MainProgram.m``), the
    groups then matched to group 0's order (:func:`match_order`).

    ``cross`` (3, 3, K, K) the moments E[x_g x_hᵀ], ``triple`` (K, K, K) E[x_0 ⊗ x_1 ⊗ x_2].
    """
    k = triple.shape[0]
    conf = np.empty((3, k, k))
    weights = np.empty((3, k))
    for c in range(3):
        a, b = (c + 1) % 3, (c + 2) % 3
        names = f"groups {a + 1}, {b + 1} for group {c + 1}"
        conf[c], weights[c] = solve_group(cross[a, b], cross[c, b], cross[c, a], np.transpose(triple, (a, b, c)),
                                          rng, restarts, iterations, names)
    for g in (1, 2):
        order = match_order(conf[0], conf[g], cross[0, g])
        conf[g], weights[g] = conf[g][:, order], weights[g][order]
    return GroupFit(conf, weights)


def worker_matrices(partners: np.ndarray, group: np.ndarray, fit: GroupFit, n_tasks: int
                    ) -> tuple[np.ndarray, np.ndarray, str]:
    """``(conf_ot (W, K, K), estimated (W,), why)``: A_m ∝ (S_m / N) (diag(w_alt) C_altᵀ)⁻¹, clipped at
    :data:`~.estimate.FLOOR`, columns normalised; in the groups' common order."""
    n_workers, k, _ = partners.shape
    conf = np.zeros((n_workers, k, k))
    estimated: np.ndarray = np.asarray(partners.reshape(n_workers, -1).any(axis=1))
    why = []
    if not estimated.all():
        why.append(f"{int((~estimated).sum()):,} share no task with the other two groups")
    for g in range(3):
        others = [h for h in range(3) if h != g]
        system = np.diag(fit.weights[others].mean(axis=0)) @ fit.conf[others].sum(axis=0).T
        members = np.flatnonzero((group == g) & estimated)
        s = np.linalg.svd(system, compute_uv=False)
        if not np.isfinite(s).all() or s[-1] < RANK_TOL * s[0]:
            estimated[members] = False
            why.append(f"group {g + 1}'s system diag(w_alt) C_alt^T is singular")
            continue
        conf[members] = (partners[members] / n_tasks) @ np.linalg.inv(system)  # every member at once
    conf = np.maximum(conf, FLOOR)
    conf /= conf.sum(axis=1, keepdims=True)
    return conf, estimated, "; ".join(why)


class SpectralDS(MomentAggregator):
    """Spectral-DS (Zhang et al. 2014): the moment estimate of every worker's confusion matrix and of the class
    prior, then Dawid--Skene EM from it (``refine=ds``, the default).  See the module notes."""

    name = "spectral"

    def memory_needed(self, data: AnnotationSet) -> tuple[float, str]:
        """EM's (the decoding, the refinement), plus the per-worker tables (counts, matrices: W × K² each); the
        pair and triple passes check their own."""
        need, what = em_memory(data)
        return need + 3 * 8.0 * data.n_workers * data.n_classes**2, what

    def _estimate(self, data: AnnotationSet, checked: FitContext) -> Estimate:
        try:  # (the data's answer counts per worker and per class: no pass over the answers)
            return self._moments(data, checked, np.asarray(data.answers_per_worker))
        except Unidentified as cause:  # nothing to estimate: every worker the fallback, the prior the label shares
            shares = np.asarray(data.answers_per_class, dtype=np.float64)
            return Estimate(shares / max(float(shares.sum()), 1.0), np.zeros((data.n_workers, data.n_classes,
                            data.n_classes)), np.zeros(data.n_workers, dtype=bool), str(cause))

    def _moments(self, data: AnnotationSet, checked: FitContext, answers: np.ndarray) -> Estimate:
        from ...kernels import cooc

        engine, k, n_workers = checked.engine, data.n_classes, data.n_workers
        if int(np.count_nonzero(answers)) < 3:
            raise Unidentified(f"{int(np.count_nonzero(answers))} workers with answers: three groups need three")
        group = make_groups(answers, checked["groups"], data.worker_names)
        load = np.bincount(group, weights=answers, minlength=3)
        if (load == 0).any():
            raise Unidentified(f"group {int(np.argmin(load)) + 1} of the {checked['groups']} grouping has no answers")
        pairs = cooc.co_occurrence(engine, max_memory=checked.max_memory)
        triples = cooc.triple_statistics(engine, group, 3, max_memory=checked.max_memory)
        if triples.triples.shape[0] == 0:
            raise Unidentified("no task was answered by a worker of each of the three groups: no third-order moments")
        n = float(data.n_tasks)
        cross = cross_moments(pairs.pairs, pairs.joint, group, k) / n
        fit = fit_groups(cross, np.asarray(triples.joint[0], dtype=np.float64) / n,
                         np.random.default_rng(checked["seed"]), checked["restarts"], checked["power_iter"])
        partners = partner_moments(pairs.pairs, pairs.joint, group, n_workers, k)
        conf, estimated, why = worker_matrices(partners, group, fit, data.n_tasks)
        if not estimated.any():
            raise Unidentified(why)
        order = common_order(conf, estimated.astype(np.float64))
        conf, prior = reorder(conf, fit.weights.mean(axis=0), order)
        return Estimate(prior, conf, estimated, why)


__all__ = ["RANK_TOL", "GroupFit", "SpectralDS", "Unidentified", "cross_moments", "fit_groups", "make_groups",
           "match_order", "partner_moments", "power_method", "solve_group", "symmetrise", "worker_matrices"]
