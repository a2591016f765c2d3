r"""Sum-product belief propagation on the worker--task graph, on the engine's block protocol.

The factor graph (ALGORITHMS.md §6.1; Liu, Peng & Ihler 2012; Kim, Cho,
Kim & Ok 2022 §3.2): one variable per task (its true class), a task factor
:math:`h_i` (uniform, one-hot at a gold label, or a per-task prior -- deepBP's classifier output,
``TaskPass.log_prior``) and one worker factor per
worker with the worker's confusion integrated out under its prior.  Here
the prior is always a **finite mixture of points** (:class:`Points`):
confusions :math:`\theta_g` (G, K, K) ``[g, true, observed]`` with
log-weights :math:`\log w_g`, so that

.. math:: g_u(z_{N_u}) = \sum_g w_g \prod_{j \in N_u} \theta_g[z_j, y_{ju}].

Both of the method's worker models are such a mixture
(:func:`grid_points`: a one-coin accuracy on a grid of midpoints, weighted
by the Beta prior's mass on each cell; :func:`sample_points`: full
confusions drawn from a Dirichlet prior, equal weights -- deepBP's
Monte-Carlo messages), and one kernel serves both.  A worker may read
a set of points of its own instead of the shared one (importance
sampling from a proposal near its posterior, :func:`proposal_points`):
the same kernels, run by run of consecutive workers reading the same
set (:func:`_worker_block_sets`), so that the shared-points path stays
the plain kernel.

Messages, per edge (answer) :math:`(u, i)`, all normalised to sum 1:

* worker→task :math:`m_{u\to i}(z) \propto \sum_g w_g\, \theta_g[z, y_{iu}]
  \prod_{j \in N_u \setminus i} f_g(j)`, with
  :math:`f_g(j) = \sum_z m_{j\to u}(z)\, \theta_g[z, y_{ju}]`;
* task→worker :math:`m_{i\to u}(z) \propto h_i(z) \prod_{v \in M_i
  \setminus u} m_{v\to i}(z)`;
* belief :math:`q_i(z) \propto h_i(z) \prod_{v \in M_i} m_{v\to i}(z)`.

**The worker side costs O(n_u × G) per worker, never O(n_u²)**, and no
transcendental function per answer and point.  A worker with at most
:attr:`Points.chunk` answers (the sparse graphs' every worker) takes
prefix and suffix products of its factors in linear space: each edge's
leave-one-out weight is two multiplications a point, no division, no log
(:func:`_short_worker`).  A longer worker's product over *all* of its
answers is taken once per point, in linear space with a renormalisation
into a per-point log every ``chunk`` factors (one ``log`` per point per
chunk), and each edge's leave-one-out weight is that product divided by
the edge's own factor :math:`f_g(i)`; its points whose log-weight lies
more than :attr:`Points.cut` below its best are skipped (see
:func:`_worker_block`) -- an extreme spammer's product concentrates on a
few points.

**Blocks.**  The task side runs over the task-ordered grid
(:func:`task_block`, ``by="task"``): it reads the worker→task messages
(kept in worker order) through ``worker_position`` and returns its edges'
task→worker messages in task order, and its tasks' beliefs.  The worker
side runs over the worker-ordered grid (:func:`worker_block`,
``by="worker"``): it reads the task→worker messages through the block's
task-order rows and returns its edges' new worker→task messages in worker
order with the largest change of a message (the residual).  A heavy worker
whose answers span several worker blocks cannot form its product inside
one block: a first pass (:func:`partial_block`) returns, per block, the
partial log-products of the (at most two) workers that cross its
boundaries, :func:`combine_partials` adds them over each worker's blocks
in block order (deterministic), and the message pass reads the totals.
The grid is fixed by the data's shape, so every message is bit-identical
for any thread count.  On a sparse graph the other side's messages lie at
random places of an array far larger than the caches (160 MB at 10M
answers): a worker block first copies the task→worker messages of its
answers into its own order (:func:`_gather_rows`, whose reads overlap, one
prefetched :data:`AHEAD` answers on), so that the kernel reads them in
sequence (the same values: the same bits), and the task pass prefetches
the worker→task message it will read :data:`AHEAD` answers on.  Both passes
can write into arrays kept from sweep to sweep (``into``) instead of
returning per-block arrays to be joined.  The kernels read the partition's answers by their
position in the whole set: the passes run on the local engine (one
partition holding every block).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from numba import njit

from ..errors import DataError
from .prefetch import prefetch

#: A point whose log-weight falls this far below the worker's best (beyond the span one edge can move it,
#: ``Points.log_floor``) carries under e^-60 of a leave-one-out message's mass: skipped.
SKIP_LOG = 60.0
#: Running products are renormalised into a log before they can fall below e^-LOG_RANGE (doubles reach ~e^-708).
LOG_RANGE = 600.0
#: The most factors a running product takes before its renormalisation (one log per point per chunk).
MAX_CHUNK = 32
#: Sampled confusion entries are floored here (a Dirichlet draw with small parameters can be exactly 0).
THETA_FLOOR = 1e-100


@dataclass(frozen=True)
class Points:
    """A worker prior as a finite mixture: confusions ``theta`` (G, K, K) ``[g, true, observed]``, ``logw`` (G,).

    ``logw`` need not be normalised (it is the same for every worker, so
    the messages do not see its total); ``-inf`` marks a point of no mass.

    Attributes
    ----------
    tht : ndarray, shape (K, K, G)
        ``theta`` laid out ``[observed, true, g]``: one answer reads a
        contiguous run of G values per true class.
    log_floor : float
        ``-log`` of the smallest entry: the most one factor :math:`f_g(j)`
        moves a point's log-product.
    chunk : int
        Factors multiplied before a renormalisation: ``chunk × log_floor <=``
        :data:`LOG_RANGE`, so a running product never underflows.
    wlin : ndarray, shape (G,)
        ``exp(logw - max logw)``: the weights of the linear products.
    cut : float
        Points below the worker's best log-weight by more than this are
        skipped: :data:`SKIP_LOG` ``+ log_floor``.
    """

    theta: np.ndarray
    logw: np.ndarray
    #: Optional per-worker point sets (importance sampling from a proposal near each worker's posterior,
    #: :func:`proposal_points`): ``own_theta`` (P, G, K, K) and ``own_logw`` (P, G), and ``owner`` (n_workers,)
    #: the set of each worker (-1: the shared ``theta``/``logw``).  ``None``: every worker reads the shared set.
    own_theta: np.ndarray | None = field(default=None, repr=False)
    own_logw: np.ndarray | None = field(default=None, repr=False)
    owner: np.ndarray | None = field(default=None, repr=False)
    tht: np.ndarray = field(init=False, repr=False)
    log_floor: float = field(init=False)
    chunk: int = field(init=False)
    cut: float = field(init=False)
    wlin: np.ndarray = field(init=False, repr=False)
    #: The kernels' stacked sets, the shared one first: ``theta_all`` (P + 1, G, K, K), ``tht_all``
    #: (P + 1, K, K, G), ``logw_all`` and ``wlin_all`` (P + 1, G); ``wset`` (n_workers,) each worker's set
    #: (``owner + 1``), empty when every worker reads the shared one.
    theta_all: np.ndarray = field(init=False, repr=False)
    tht_all: np.ndarray = field(init=False, repr=False)
    logw_all: np.ndarray = field(init=False, repr=False)
    wlin_all: np.ndarray = field(init=False, repr=False)
    wset: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        theta = np.ascontiguousarray(self.theta, dtype=np.float64)
        logw = np.ascontiguousarray(self.logw, dtype=np.float64)
        if theta.ndim != 3 or theta.shape[1] != theta.shape[2] or logw.shape != theta.shape[:1] or 0 in theta.shape:
            raise DataError(f"points: theta must be (G, K, K) and logw (G,), G and K >= 1, got {theta.shape} and "
                            f"{logw.shape}")
        if not (np.isfinite(theta).all() and theta.min() > 0) or np.isnan(logw).any() or not np.isfinite(logw.max()):
            raise DataError("points: theta must be positive and finite, logw finite somewhere and never NaN")
        theta_all, logw_all, wset = theta[None], logw[None], np.zeros(0, dtype=np.int64)
        if self.own_theta is not None or self.own_logw is not None or self.owner is not None:
            if self.own_theta is None or self.own_logw is None or self.owner is None:
                raise DataError("points: own_theta, own_logw and owner go together")
            own = np.ascontiguousarray(self.own_theta, dtype=np.float64)
            own_logw = np.ascontiguousarray(self.own_logw, dtype=np.float64)
            owner = np.asarray(self.owner)
            if own.ndim != 4 or own.shape[1:] != theta.shape or own_logw.shape != own.shape[:2] or owner.ndim != 1:
                raise DataError(f"points: own_theta must be (P, {theta.shape[0]}, {theta.shape[1]}, "
                                f"{theta.shape[2]}), own_logw (P, {theta.shape[0]}) and owner (n_workers,), got "
                                f"{own.shape}, {own_logw.shape} and {owner.shape}")
            from .validate import as_code_array

            owner = np.ascontiguousarray(as_code_array(owner, "points: owner"), dtype=np.int64)  # (0.5: not set 0)
            if own.size and not (np.isfinite(own).all() and own.min() > 0) or np.isnan(own_logw).any() \
                    or (own_logw.size and not np.isfinite(own_logw.max(axis=1)).all()):
                raise DataError("points: own_theta must be positive and finite, each own_logw finite somewhere and "
                                "never NaN")
            if owner.size and (int(owner.min()) < -1 or int(owner.max()) >= own.shape[0]):
                raise DataError(f"points: owner holds a set outside -1 .. {own.shape[0] - 1}")
            theta_all = np.concatenate([theta[None], own])
            logw_all = np.concatenate([logw[None], own_logw])
            wset = owner + 1
        object.__setattr__(self, "theta", theta)
        object.__setattr__(self, "logw", logw)
        object.__setattr__(self, "tht", np.ascontiguousarray(theta.transpose(2, 1, 0)))
        object.__setattr__(self, "theta_all", theta_all)
        object.__setattr__(self, "tht_all", self.tht[None] if theta_all.shape[0] == 1
                           else np.ascontiguousarray(theta_all.transpose(0, 3, 2, 1)))
        object.__setattr__(self, "logw_all", logw_all)
        object.__setattr__(self, "wset", wset)
        log_floor = float(-math.log(theta_all.min()))
        object.__setattr__(self, "log_floor", log_floor)
        object.__setattr__(self, "chunk", int(max(1, min(MAX_CHUNK, LOG_RANGE // max(log_floor, 1e-300)))))
        object.__setattr__(self, "cut", SKIP_LOG + log_floor)
        object.__setattr__(self, "wlin", np.exp(logw - logw.max()))
        object.__setattr__(self, "wlin_all", np.exp(logw_all - logw_all.max(axis=1, keepdims=True)))

    def with_own(self, sets: np.ndarray, theta: np.ndarray, logw: np.ndarray) -> Points:
        """These points with their own sets ``sets`` (m,) replaced by ``theta`` (m, G, K, K) and ``logw`` (m, G).

        The same fields, bit for bit, as :class:`Points` built anew from the
        replaced ``own_theta`` and ``own_logw``, in the time of copying the
        stacked arrays once instead of checking and laying out every set
        again (deepBP drawing a few workers again: 1.6 ms against 6.6 ms at 34
        sets of 400 8 × 8 draws).
        """
        if self.own_theta is None or self.own_logw is None or self.owner is None:
            raise DataError("points: with_own replaces own sets, these points have none")
        from .validate import as_code_array, as_float_array

        sets = np.ascontiguousarray(as_code_array(sets, "points: with_own's sets"), dtype=np.int64)  # (0.7: not 0)
        theta = as_float_array(theta, "points: with_own's theta", 4)
        logw = as_float_array(logw, "points: with_own's logw", 2)
        n_sets = self.own_theta.shape[0]
        if sets.ndim != 1 or theta.shape != (sets.size, *self.own_theta.shape[1:]) or logw.shape != theta.shape[:2]:
            raise DataError(f"points: with_own takes sets (m,), theta (m, {', '.join(map(str, self.theta.shape))}) "
                            f"and logw (m, {self.n_points}), got {sets.shape}, {theta.shape} and {logw.shape}")
        if sets.size and (int(sets.min()) < 0 or int(sets.max()) >= n_sets or np.unique(sets).size != sets.size):
            raise DataError(f"points: with_own's sets must be distinct, within 0 .. {n_sets - 1}")
        if theta.size and not (np.isfinite(theta).all() and theta.min() > 0) or np.isnan(logw).any() \
                or (logw.size and not np.isfinite(logw.max(axis=1)).all()):
            raise DataError("points: own_theta must be positive and finite, each own_logw finite somewhere and "
                            "never NaN")
        out = object.__new__(Points)
        fields = dict(self.__dict__)
        for name, rows in (("theta_all", theta), ("tht_all", theta.transpose(0, 3, 2, 1)), ("logw_all", logw),
                           ("wlin_all", np.exp(logw - logw.max(axis=1, keepdims=True)))):
            fields[name] = fields[name].copy()
            fields[name][sets + 1] = rows
        # the own sets are the stacked ones but the shared first (views: the same values, not a third copy)
        fields.update(own_theta=fields["theta_all"][1:], own_logw=fields["logw_all"][1:])
        log_floor = float(-math.log(fields["theta_all"].min()))
        fields.update(log_floor=log_floor, chunk=int(max(1, min(MAX_CHUNK, LOG_RANGE // max(log_floor, 1e-300)))),
                      cut=SKIP_LOG + log_floor)
        for name, value in fields.items():
            object.__setattr__(out, name, value)
        return out

    def set_of(self, worker: int) -> int:
        """The index into the stacked sets (``tht_all`` …) of ``worker``'s points (0: the shared set)."""
        return int(self.wset[worker]) if self.wset.shape[0] else 0

    @property
    def n_points(self) -> int:
        return int(self.logw.shape[0])

    @property
    def n_classes(self) -> int:
        return int(self.theta.shape[1])


def _check_prior(a: Any, b: Any, k: Any, n: Any, what: str) -> None:
    """The points' prior parameters (positive, finite) and sizes (integers >= 1), else a DataError."""
    for name, value in (("the prior's first parameter", a), ("the prior's second parameter", b)):
        if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) \
                or not (math.isfinite(value) and value > 0):
            raise DataError(f"points: {name} must be a positive finite number, got {value!r}")
    for name, value in (("classes", k), (what, n)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise DataError(f"points: the number of {name} must be an integer >= 1, got {value!r}")


def grid_points(a: float, b: float, k: int, n_points: int) -> Points:
    r"""One-coin workers with accuracy q ~ Beta(a, b) on a grid of ``n_points`` equal cells of [0, 1].

    Point g carries the prior's exact mass on its cell (differences of the
    Beta CDF: finite for a, b < 1 too) as its weight -- Liu, Peng &
    Ihler's ``'discrete'`` prior -- and sits at the prior's mean within the
    cell, :math:`t_g = E[q \mid q \in \text{cell}_g] = \frac{a}{a+b}
    \frac{\Delta I(a+1, b)}{\Delta I(a, b)}` (the cell's midpoint where its
    mass underflows to 0); its confusion has :math:`t_g` on the diagonal and
    :math:`(1 - t_g)/(K - 1)` off it (K = 1: the 1 × 1 matrix of ones).

    The conditional mean rather than the midpoint: both err as 1/G² for a
    smooth prior, but for a sparse prior (a or b < 1, mass piled at an end
    of [0, 1]) the midpoint's error decays as ~1/G only (measured on small
    trees at G = 64: 4.7e-3 against 6.7e-5 for Beta(0.5, 0.25); the table
    in :mod:`crowdagg.methods.graph.bp`).
    """
    from scipy.stats import beta as beta_dist

    _check_prior(a, b, k, n_points, "cells")
    edges = np.linspace(0.0, 1.0, n_points + 1)
    mass = np.maximum(np.diff(beta_dist.cdf(edges, a, b)), 0.0)
    first = np.maximum(a / (a + b) * np.diff(beta_dist.cdf(edges, a + 1.0, b)), 0.0)
    mid = (np.arange(n_points) + 0.5) / n_points
    held = mass > 0
    t = np.where(held, first / np.where(held, mass, 1.0), mid)
    t = np.clip(t, edges[:-1], edges[1:])  # rounding: the mean stays in its cell
    t = np.clip(t, 1e-12, 1.0 - 1e-12)  # (an end cell's mean of an extreme prior rounds to 0 or 1: logs stay finite)
    with np.errstate(divide="ignore"):
        logw = np.log(mass)
    if k == 1:
        theta = np.ones((n_points, 1, 1))
    else:
        theta = np.repeat(((1.0 - t) / (k - 1))[:, None, None], k, axis=1).repeat(k, axis=2)
        idx = np.arange(k)
        theta[:, idx, idx] = t[:, None]
    return Points(theta, logw)


def sample_points(alpha: float, beta: float, k: int, n_samples: int, seed: int) -> Points:
    """Full confusions drawn from the prior: row k of each ~ Dirichlet(β, …, α at k, …, β), equal weights.

    deepBP's Monte-Carlo messages (ALGORITHMS.md §6.5): ``n_samples``
    draws shared by all workers, rows independent (with (α, β) = (2, 1) and
    K = 2 the code's ``[[α, β], [β, α]]``).  Entries are floored at
    :data:`THETA_FLOOR` and the rows renormalised, so every log is finite.
    """
    _check_prior(alpha, beta, k, n_samples, "samples")
    rng = np.random.default_rng(seed)
    conc = np.full((k, k), float(beta))
    np.fill_diagonal(conc, float(alpha))
    theta = np.empty((n_samples, k, k))
    for row in range(k):
        theta[:, row, :] = rng.dirichlet(conc[row], size=n_samples)
    theta = np.maximum(theta, THETA_FLOOR)
    theta /= theta.sum(axis=2, keepdims=True)
    return Points(theta, np.full(n_samples, -math.log(n_samples)))


def _log_dirichlet_rows(theta: np.ndarray, conc: np.ndarray) -> np.ndarray:
    """The log density (G,) at confusions ``theta`` (G, K, K) of independent Dirichlet rows ``conc`` (K, K)."""
    from scipy.special import gammaln

    norm = float((gammaln(conc.sum(axis=1)) - gammaln(conc).sum(axis=1)).sum())
    return norm + np.einsum("gko,ko->g", np.log(theta), conc - 1.0)


def proposal_points(shared: Points, alpha: float, beta: float, counts: np.ndarray, owner: np.ndarray,
                    seed: int) -> Points:
    r"""``shared`` with a point set of its own for each worker ``owner >= 0``: importance sampling.

    Worker u's message is an expectation under the prior,
    :math:`E_{\theta \sim p}[\theta[z, y_{iu}] \prod_{j \ne i} f_\theta(j)]`;
    the shared prior draws estimate it badly once the worker's answers
    make the product peak far narrower than the prior (ALGORITHMS.md
    §6.5).  Its own ``G`` draws come from the proposal :math:`q_u` with
    rows :math:`\mathrm{Dir}(\text{prior row} + \text{counts}_u[k])` --
    near its posterior when ``counts`` (P, K, K) ``[set, true, observed]``
    are its soft counts -- weighted :math:`\log w_s = \log p(\theta_s) -
    \log q_u(\theta_s)`: the same expectation (the messages are
    normalised, so a worker's constant drops), with the weights spread
    evenly where :math:`q_u` is close to the posterior.

    Worker u's draws come from the generator seeded ``(seed, u)``:
    the same bits for any order or thread count.  Entries are floored at
    :data:`THETA_FLOOR` and the rows renormalised (as
    :func:`sample_points`), the densities read at the floored draws.
    """
    owner = np.ascontiguousarray(owner, dtype=np.int64)
    theta, logw = proposal_draws(shared, alpha, beta, counts, owner, seed)
    return Points(shared.theta, shared.logw, theta, logw, owner)


def proposal_draws(shared: Points, alpha: float, beta: float, counts: np.ndarray, owner: np.ndarray,
                   seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The own draws of :func:`proposal_points` without the points built around them: ``theta`` (P, G, K, K)
    and ``logw`` (P, G) of each set ``owner[u] >= 0`` (worker u's from the seed ``(seed, u)``), for a caller
    that puts them into a set of points it already holds (deepBP drawing a few workers again)."""
    _check_prior(alpha, beta, shared.n_classes, shared.n_points, "samples")
    k, g = shared.n_classes, shared.n_points
    from .validate import as_code_array

    owner = np.ascontiguousarray(as_code_array(owner, "points: owner"), dtype=np.int64)  # (0.5: not set 0)
    counts = np.asarray(counts, dtype=np.float64)
    n_sets = int(owner.max()) + 1 if owner.size else 0
    # each set one worker's: a set nobody owns would be returned unwritten (np.empty), one owned twice overwritten
    if (owner.size and int(owner.min()) < -1) or not np.array_equal(np.sort(owner[owner >= 0]), np.arange(n_sets)):
        raise DataError(f"points: owner (n_workers,) must give each set 0 .. P - 1 to exactly one worker (-1: none), "
                        f"got shape {owner.shape}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise DataError(f"points: the seed must be an integer >= 0, got {seed!r}")
    prior = np.full((k, k), float(beta))
    np.fill_diagonal(prior, float(alpha))
    if counts.shape != (n_sets, k, k) or not (np.isfinite(counts).all() and (prior + counts > 0).all()):
        raise DataError(f"points: counts must be ({n_sets}, {k}, {k}), finite and above minus the prior, got "
                        f"{counts.shape}")
    theta = np.empty((n_sets, g, k, k))
    logw = np.empty((n_sets, g))
    for u in np.flatnonzero(owner >= 0):
        p = int(owner[u])
        conc = prior + counts[p]
        rng = np.random.default_rng([int(seed), int(u)])
        th = rng.standard_gamma(np.broadcast_to(conc, (g, k, k)))
        tot = th.sum(axis=2, keepdims=True)
        flat = tot[..., 0] == 0.0  # rows whose gammas all underflowed (concentrations far below 1): 0/0
        if flat.any():  # drawn again in logs, Gamma(a) = Gamma(a + 1) U^(1/a) (the other rows keep their bits)
            rows = np.broadcast_to(conc, (g, k, k))[flat]
            log_g = np.log(rng.standard_gamma(rows + 1.0)) + np.log(rng.random(rows.shape)) / rows
            th[flat] = np.exp(log_g - log_g.max(axis=1, keepdims=True))
            tot = th.sum(axis=2, keepdims=True)
        th = np.maximum(th / tot, THETA_FLOOR)
        th /= th.sum(axis=2, keepdims=True)
        theta[p] = th
        logw[p] = _log_dirichlet_rows(th, prior) - _log_dirichlet_rows(th, conc)
    return theta, logw


# ----------------------------------------------------------------------------- compiled kernels
#: LLVM may reassociate the sums over the points (so that they run in SIMD lanes) and contract multiply-adds; no
#: flag that assumes away infinities or NaN (a point of no mass has log-weight -inf).  The order is fixed by the
#: compiled code, so the results do not depend on the thread count.
_FAST = {"reassoc", "contract", "nsz", "arcp"}

@njit(cache=True, nogil=True, fastmath=_FAST)
def _factors(tmsg, r, y, tht, f):  # pragma: no cover - compiled
    """``f[g] = Σ_z tmsg[r, z] θ_g[z, y]``: an answer's factor at every point (the task→worker message ``r``
    against the points' column of its label ``y``; ``tht`` is [observed, true, point])."""
    n_points = f.shape[0]
    for g in range(n_points):
        f[g] = 0.0
    for z in range(tmsg.shape[1]):
        mz = tmsg[r, z]
        for g in range(n_points):
            f[g] += mz * tht[y, z, g]


@njit(cache=True, nogil=True, fastmath=_FAST)
def _log_products(lo, hi, rows, label, tmsg, tht, chunk, out):  # pragma: no cover - compiled
    """``out[g] += Σ_{e ∈ [lo, hi)} log f_g(e)``, :math:`f_g(e) = Σ_z tmsg[rows[e], z] θ_g[z, label[e]]`.

    Linear running products per point, renormalised into ``out`` every
    ``chunk`` factors (and at the end).
    """
    n_points = tht.shape[2]
    prod = np.ones(n_points)
    f = np.empty(n_points)
    taken = 0
    for e in range(lo, hi):
        y = label[e]
        r = rows[e]
        _factors(tmsg, r, y, tht, f)
        for g in range(n_points):
            prod[g] *= f[g]
        taken += 1
        if taken == chunk:
            for g in range(n_points):
                out[g] += math.log(prod[g])
                prod[g] = 1.0
            taken = 0
    if taken:
        for g in range(n_points):
            out[g] += math.log(prod[g])


@njit(cache=True, nogil=True, fastmath=_FAST)
def _weights(lo, hi, rows, label, tmsg, tht, logw, wlin, chunk, cut, span, use_span, logp, f, c):  # pragma: no cover
    r"""``c[g]``: point g's weight in the worker's factor over answers ``[lo, hi)``, relative to the best (1).

    :math:`c_g \propto w_g \prod_j f_g(j)`, points more than ``cut`` below
    the best set to 0.  A worker with at most ``chunk`` answers (and no
    crossing totals ``span``, used when ``use_span``) takes the linear
    product times the linear weights ``wlin`` (``exp(logw - max logw)``):
    no ``log`` or ``exp`` at all -- the common sparse worker.  (A product
    of at most ``chunk`` factors stays above e^-600, so the best point's
    weight does, and a weight that underflows to 0 is far below e^-cut of
    it.)  Longer workers go through the per-point log-products
    (:func:`_log_products`, or ``span``), one ``exp`` per point.
    """
    n_points = logw.shape[0]
    k = tmsg.shape[1]
    floor = math.exp(-cut)
    if not use_span and hi - lo <= chunk:
        for g in range(n_points):
            c[g] = wlin[g]
        for e in range(lo, hi):
            y = label[e]
            r = rows[e]
            if k == 2:
                m0 = tmsg[r, 0]
                m1 = tmsg[r, 1]
                col0 = tht[y, 0]
                col1 = tht[y, 1]
                for g in range(n_points):
                    c[g] *= m0 * col0[g] + m1 * col1[g]
                continue
            _factors(tmsg, r, y, tht, f)
            for g in range(n_points):
                c[g] *= f[g]
        best = 0.0
        for g in range(n_points):
            best = max(best, c[g])
        scale = 1.0 / best
        for g in range(n_points):
            v = c[g] * scale
            c[g] = v if v >= floor else 0.0
        return
    if use_span:
        for g in range(n_points):
            logp[g] = span[g]
    else:
        for g in range(n_points):
            logp[g] = 0.0
        _log_products(lo, hi, rows, label, tmsg, tht, chunk, logp)
    best = -np.inf
    for g in range(n_points):
        best = max(best, logw[g] + logp[g])
    for g in range(n_points):
        v = logw[g] + logp[g] - best
        c[g] = math.exp(v) if v >= -cut else 0.0


@njit(cache=True, nogil=True)
def _compact(c, tht, idx, ca, tha):  # pragma: no cover - compiled
    """The points of nonzero weight: their count n, indices ``idx[:n]``, weights ``ca[:n]`` and confusions
    ``tha[:, :, :n]`` (copied only when some point is left out; else ``tha`` is not written and n = G)."""
    n_points = c.shape[0]
    k = tht.shape[0]
    n = 0
    for g in range(n_points):
        if c[g] > 0.0:
            idx[n] = g
            ca[n] = c[g]
            n += 1
    if n < n_points:
        for y in range(k):
            for z in range(k):
                for a in range(n):
                    tha[y, z, a] = tht[y, z, idx[a]]
    return n


@njit(cache=True, nogil=True, fastmath=_FAST)
def _emit(m, e, old, damping, damp, out, residual):  # pragma: no cover - compiled
    """Answer ``e``'s new message: ``m`` (K,) normalised, damped towards ``old[e]`` when ``damp``, written to
    ``out[e]``; returns the running residual (the largest ``|out - old|`` so far)."""
    k = m.shape[0]
    tot = 0.0
    for z in range(k):
        tot += m[z]
    for z in range(k):
        v = m[z] / tot
        if damp:
            v = (1.0 - damping) * v + damping * old[e, z]
        d = abs(v - old[e, z])
        if d > residual:
            residual = d
        out[e, z] = v
    return residual


@njit(cache=True, nogil=True, fastmath=_FAST)
def _short_worker(lo, hi, rows, label, tmsg, old, tht, wlin, damping, damp, out, fw, pre, suf, m,
                  residual):  # pragma: no cover - compiled
    r"""The messages of a worker with at most ``chunk`` answers ``[lo, hi)``, without a division or a log.

    Its factors :math:`f_g(j)` go into ``fw`` (answers, G); prefix products
    ``pre[j] = wlin · Π_{j' < j} f(j')`` and a running suffix product give
    each answer's leave-one-out weight :math:`w_g \prod_{j \ne i} f_g(j)` by
    two multiplications a point (every loop over the points runs in SIMD
    lanes: unsigned indices, no stores in the reductions).  No point is
    skipped: the products of at most ``chunk`` factors stay above e^-600
    for the best point, and a weight that underflows to 0 is negligible
    beside it.  Messages normalised, damped, written to ``out``; returns the
    running residual.
    """
    k = tmsg.shape[1]
    g_n = np.uint64(wlin.shape[0])
    # Plain indexing throughout, no row views: a view per answer (and per class) costs reference counting that
    # took more time than the arithmetic on sparse graphs (250k workers of 4 answers).
    for g in range(g_n):
        pre[0, g] = wlin[g]
    for j in range(hi - lo):
        e = lo + j
        y = label[e]
        r = rows[e]
        if k == 2:
            m0 = tmsg[r, 0]
            m1 = tmsg[r, 1]
            for g in range(g_n):
                v = m0 * tht[y, 0, g] + m1 * tht[y, 1, g]
                fw[j, g] = v
                pre[j + 1, g] = pre[j, g] * v
        else:
            for g in range(g_n):
                fw[j, g] = 0.0
            for z in range(k):
                mz = tmsg[r, z]
                for g in range(g_n):
                    fw[j, g] += mz * tht[y, z, g]
            for g in range(g_n):
                pre[j + 1, g] = pre[j, g] * fw[j, g]
    for g in range(g_n):
        suf[g] = 1.0
    for j in range(hi - lo - 1, -1, -1):
        e = lo + j
        y = label[e]
        for z in range(k):
            acc = 0.0
            for g in range(g_n):
                acc += pre[j, g] * suf[g] * tht[y, z, g]
            m[z] = acc
        for g in range(g_n):
            suf[g] *= fw[j, g]
        residual = _emit(m, e, old, damping, damp, out, residual)
    return residual


@njit(cache=True, nogil=True)
def _segment(worker, s, has_first, has_last):  # pragma: no cover - compiled
    """The worker segment starting at answer ``s`` of a worker block: its end, whether it is the block's first
    segment crossing its start (``has_first``) and whether it is its last one crossing its end (``has_last``, and
    not also the first)."""
    n = worker.shape[0]
    w = worker[s]
    e_end = s + 1
    while e_end < n and worker[e_end] == w:
        e_end += 1
    first = s == 0 and has_first
    last = e_end == n and has_last and not first
    return e_end, first, last


@njit(cache=True, nogil=True, fastmath=_FAST)
def _worker_block(rows, worker, label, tmsg, old, tht, logw, wlin, chunk, cut, span, has_first, has_last,
                  damping, damp, out):  # pragma: no cover - compiled
    r"""A worker block's new worker→task messages ``out`` (block answers, K), in worker order; the residual.

    The block's answers are grouped by worker (``worker`` constant over a
    segment).  Per segment: its points' weights over all of its answers
    (:func:`_weights`; ``span[0]`` for a first segment crossing the
    block's start when ``has_first``, ``span[1]`` for a last segment
    crossing its end when ``has_last``: the worker's totals over every
    block), then for each answer i

        m(z) ∝ Σ_g c_g θ_g[z, y_i] / f_g(i)

    (the product without edge i's own factor), normalised, then damped:
    ``(1 - damping) m + damping old`` when ``damp``.  Returns the largest
    ``|out - old|`` (``old`` the previous messages of the block's answers).

    Why skipping is safe: dropping edge i's factor raises a point's
    log-weight by :math:`-\log f_g(i) \le` ``log_floor`` and lowers none,
    so a point more than ``cut = 60 + log_floor`` below the best is, for
    every edge, more than 60 below the leave-one-out best: its weight is
    under e^-60 of the message's.  (A kept weight is above e^-cut ≥
    e^-700: none underflows.)
    """
    n = rows.shape[0]
    k = tmsg.shape[1]
    n_points = logw.shape[0]
    logp = np.empty(n_points)
    idx = np.empty(n_points, dtype=np.int64)
    c = np.empty(n_points)
    ca = np.empty(n_points)
    tha = np.empty((k, k, n_points))
    f = np.empty(n_points)
    m = np.empty(k)
    fw = np.empty((chunk, n_points))
    pre = np.empty((chunk + 1, n_points))
    suf = np.empty(n_points)
    residual = 0.0
    s = 0
    while s < n:
        e_end, first, last = _segment(worker, s, has_first, has_last)
        if not (first or last) and e_end - s <= chunk:
            residual = _short_worker(s, e_end, rows, label, tmsg, old, tht, wlin, damping, damp, out, fw, pre,
                                     suf, m, residual)
            s = e_end
            continue
        _weights(s, e_end, rows, label, tmsg, tht, logw, wlin, chunk, cut, span[1] if last else span[0],
                 first or last, logp, f, c)
        n_act = _compact(c, tht, idx, ca, tha)
        src = tht if n_act == n_points else tha
        for e in range(s, e_end):
            y = label[e]
            r = rows[e]
            if k == 2:  # one fused loop with no stores: it runs in SIMD lanes
                m0 = tmsg[r, 0]
                m1 = tmsg[r, 1]
                col0 = src[y, 0]
                col1 = src[y, 1]
                acc0 = 0.0
                acc1 = 0.0
                for a in range(n_act):
                    wgt = ca[a] / (m0 * col0[a] + m1 * col1[a])
                    acc0 += wgt * col0[a]
                    acc1 += wgt * col1[a]
                m[0] = acc0
                m[1] = acc1
            else:
                for a in range(n_act):
                    f[a] = 0.0
                for z in range(k):
                    mz = tmsg[r, z]
                    col = src[y, z]
                    for a in range(n_act):
                        f[a] += mz * col[a]
                for a in range(n_act):
                    f[a] = ca[a] / f[a]
                for z in range(k):
                    col = src[y, z]
                    acc = 0.0
                    for a in range(n_act):
                        acc += f[a] * col[a]
                    m[z] = acc
            residual = _emit(m, e, old, damping, damp, out, residual)
        s = e_end
    return residual


@njit(cache=True, nogil=True)
def _worker_means(rows, worker, label, tmsg, theta, tht, logw, wlin, chunk, span, has_first, has_last, skip_first,
                  means):  # pragma: no cover - compiled
    """Each worker's posterior mean confusion :math:`Σ_g c_g θ_g / Σ_g c_g` (the belief at its factor: the
    product over all of its answers), added into ``means[w, :K]`` (W, K + 1, K) by the block holding the
    worker's first answer only (``skip_first``: the block's first segment began in an earlier block), and the
    effective number of its points :math:`1 / Σ_g p_g^2` (:math:`p_g = c_g / Σ c`) into ``means[w, K, 0]``.
    Points more than :data:`SKIP_LOG` below the best carry under e^-60 of the posterior: skipped."""
    n = rows.shape[0]
    k = tmsg.shape[1]
    n_points = logw.shape[0]
    logp = np.empty(n_points)
    c = np.empty(n_points)
    f = np.empty(n_points)
    s = 0
    while s < n:
        w = worker[s]
        e_end, first, last = _segment(worker, s, has_first, has_last)
        if s == 0 and skip_first:
            s = e_end
            continue
        _weights(s, e_end, rows, label, tmsg, tht, logw, wlin, chunk, SKIP_LOG, span[1] if last else span[0],
                 first or last, logp, f, c)
        tot = 0.0
        for g in range(n_points):
            tot += c[g]
        sq = 0.0
        for g in range(n_points):
            if c[g] > 0.0:
                p = c[g] / tot
                sq += p * p
                for t in range(k):
                    for o in range(k):
                        means[w, t, o] += p * theta[g, t, o]
        means[w, k, 0] += 1.0 / sq
        s = e_end


@njit(cache=True, nogil=True)
def _set_runs(worker, wset):  # pragma: no cover - compiled
    """The block's runs of consecutive answers whose workers read the same point set: their starts (runs + 1,
    the last the block's end) and sets."""
    n = worker.shape[0]
    starts = np.empty(n + 1, dtype=np.int64)
    sets = np.empty(n, dtype=np.int64)
    m = 0
    for e in range(n):
        v = wset[worker[e]]
        if e == 0 or v != sets[m - 1]:
            starts[m] = e
            sets[m] = v
            m += 1
    starts[m] = n
    return starts[:m + 1], sets[:m]


@njit(cache=True, nogil=True)
def _worker_block_sets(rows, worker, label, tmsg, old, tht_all, logw_all, wlin_all, wset, chunk, cut, span,
                       has_first, has_last, damping, damp, out):  # pragma: no cover - compiled
    """:func:`_worker_block` where workers read their own point sets (:class:`Points` ``wset``): run by run of
    workers reading the same set (a worker's answers lie in one run), each run its set's arrays; the first run
    keeps the block's crossing first segment, the last its crossing last one.  Returns the largest residual."""
    starts, sets = _set_runs(worker, wset)
    runs = sets.shape[0]
    residual = 0.0
    for r in range(runs):
        lo = starts[r]
        hi = starts[r + 1]
        v = sets[r]
        res = _worker_block(rows[lo:hi], worker[lo:hi], label[lo:hi], tmsg, old[lo:hi], tht_all[v], logw_all[v],
                            wlin_all[v], chunk, cut, span, has_first and r == 0, has_last and r == runs - 1,
                            damping, damp, out[lo:hi])
        residual = max(residual, res)
    return residual


@njit(cache=True, nogil=True)
def _worker_means_sets(rows, worker, label, tmsg, theta_all, tht_all, logw_all, wlin_all, wset, chunk, span,
                       has_first, has_last, skip_first, means):  # pragma: no cover - compiled
    """:func:`_worker_means` where workers read their own point sets, run by run (:func:`_worker_block_sets`)."""
    starts, sets = _set_runs(worker, wset)
    runs = sets.shape[0]
    for r in range(runs):
        lo = starts[r]
        hi = starts[r + 1]
        v = sets[r]
        _worker_means(rows[lo:hi], worker[lo:hi], label[lo:hi], tmsg, theta_all[v], tht_all[v], logw_all[v],
                      wlin_all[v], chunk, span, has_first and r == 0, has_last and r == runs - 1,
                      skip_first and r == 0, means)


#: A task's running product of messages is rescaled (by its largest class) once that falls below this.
_RESCALE = 1e-150
#: How many answers ahead the passes prefetch a message they read at a random place (a few hundred ns of memory
#: latency over some ns an answer).
AHEAD = 32


@njit(cache=True, nogil=True)
def _gather_rows(src, rows, dst):  # pragma: no cover - compiled
    """``dst[i] = src[rows[i]]`` (rows of K floats), the row :data:`AHEAD` on prefetched: a worker block's
    task→worker messages, read at random places of the task order, copied into the block's order once."""
    n = rows.shape[0]
    k = src.shape[1]
    flat = src.reshape(-1)
    for i in range(n):
        if i + AHEAD < n:
            prefetch(flat, rows[i + AHEAD] * k)
        r = rows[i]
        for z in range(k):
            dst[i, z] = src[r, z]


_IOTA = [np.arange(0, dtype=np.int64)]


def _iota(n: int) -> np.ndarray:
    """``0 .. n-1`` (int64): a view of one shared, read-only array, grown when a longer one is asked for."""
    held = _IOTA[0]
    if held.shape[0] < n:
        held = np.arange(max(n, 2 * held.shape[0]), dtype=np.int64)
        held.setflags(write=False)
        _IOTA[0] = held  # (two threads growing it at once each keep a correct array)
    return held[:n]


@njit(cache=True, nogil=True)
def _task_block(lo, hi, task_ptr, pos, wmsg, clamp, prior, tmsg, belief):  # pragma: no cover - compiled
    """Tasks ``[lo, hi)``: task→worker messages ``tmsg`` (their answers, K) and beliefs ``belief`` (tasks, K).

    ``P(z) = h(z) Π_e m_e(z)`` over the task's answers' worker→task messages
    (``wmsg[pos[e]]``, worker order), in linear space, rescaled by its
    largest class whenever that falls below :data:`_RESCALE` (only the
    ratios between classes matter); belief ``P`` normalised; each answer's
    message ``P(z) / m_e(z)`` normalised (its own message left out).  No
    ``log`` or ``exp``: a class whose product underflows to 0 is below
    1e-308 of the best, and leaving one message out moves a ratio between
    classes by at most the largest ratio of two entries of a point's
    confusion column (1/θ_min), so it stays negligible.  A task with
    ``clamp >= 0`` sends and believes the one-hot at its gold class; a task
    without answers believes its factor ``h``.  ``h`` is uniform when
    ``prior`` is empty, else ``exp(prior[t] - max prior[t])`` (a per-task log
    prior, deepBP's classifier): its largest entry is exactly 1, so a
    uniform ``prior`` multiplies by 1.0 and gives today's bits.  The message of the answer :data:`AHEAD`
    answers on is prefetched (:mod:`.prefetch`): the worker order scatters a
    task's answers over the whole array.
    """
    k = wmsg.shape[1]
    a0 = task_ptr[lo]
    a1 = task_ptr[hi]
    flat = wmsg.reshape(-1)  # (a view: prefetch takes 1-D arrays)
    prod = np.empty(k)
    has_clamp = clamp.shape[0] > 0
    has_prior = prior.shape[0] > 0
    for t in range(lo, hi):
        p0 = task_ptr[t]
        p1 = task_ptr[t + 1]
        i = t - lo
        c = clamp[t] if has_clamp else -1
        if c >= 0:
            for z in range(k):
                belief[i, z] = 0.0
            belief[i, c] = 1.0
            for e in range(p0 - a0, p1 - a0):
                for z in range(k):
                    tmsg[e, z] = 0.0
                tmsg[e, c] = 1.0
            continue
        if has_prior:
            top = prior[t, 0]
            for z in range(1, k):
                if prior[t, z] > top:
                    top = prior[t, z]
            for z in range(k):
                prod[z] = math.exp(prior[t, z] - top)
        else:
            for z in range(k):
                prod[z] = 1.0
        for e in range(p0, p1):
            if e + AHEAD < a1:
                prefetch(flat, pos[e + AHEAD] * k)
            q = pos[e]
            best = 0.0
            for z in range(k):
                mz = wmsg[q, z]
                tmsg[e - a0, z] = mz
                prod[z] *= mz
                if prod[z] > best:
                    best = prod[z]
            if best < _RESCALE:
                for z in range(k):
                    prod[z] /= best
        tot = 0.0
        for z in range(k):
            tot += prod[z]
        for z in range(k):
            belief[i, z] = prod[z] / tot
        for e in range(p0 - a0, p1 - a0):
            tot = 0.0
            for z in range(k):
                v = prod[z] / tmsg[e, z]
                tmsg[e, z] = v
                tot += v
            for z in range(k):
                tmsg[e, z] /= tot


# ----------------------------------------------------------------------------- block functions
@dataclass(frozen=True)
class TaskPass:
    """The task side's inputs: worker→task messages (n_answers, K) in worker order, ``worker_position``
    (n_answers,), the gold ``clamp`` (n_tasks,) or an empty array, and the task factors ``log_prior``."""

    wmsg: np.ndarray
    position: np.ndarray
    clamp: np.ndarray
    #: Optional (n_tasks, K) log task factors h_i (deepBP: the classifier's clipped log-probabilities;
    #: a row may hold -inf, never NaN or +inf, and not only -inf); None: uniform.  A gold clamp overrides it.
    log_prior: np.ndarray | None = None
    #: Optional ``(tmsg, belief)`` (n_answers, K) and (n_tasks, K), C-contiguous float64: every block writes its
    #: rows there (the pass returns them, no per-block arrays joined); else fresh arrays.
    into: tuple[np.ndarray, np.ndarray] | None = None


def _into(arrays: Any, i: int, lo: int, hi: int, k: int, name: str) -> np.ndarray:
    """Rows ``[lo, hi)`` of ``arrays[i]`` (a view the block writes), or a fresh (hi - lo, K) array."""
    if arrays is None:
        return np.empty((hi - lo, k))
    arr = arrays[i]
    if not (isinstance(arr, np.ndarray) and arr.dtype == np.float64 and arr.ndim == 2 and arr.shape[1] == k
            and arr.flags.c_contiguous and arr.flags.writeable and arr.shape[0] >= hi):
        raise DataError(f"{name} must be a writable C-contiguous float64 (>= {hi:,}, {k}) array")
    return arr[lo:hi]


def task_block(part: Any, b: int, p: TaskPass, keep: bool) -> tuple[float, Any]:
    """Block function (``by="task"``): the block's edges' task→worker messages in task order and its beliefs."""
    lo, hi, a0, a1, wmsg, position, clamp, prior = _check_task(part, b, p)
    k = wmsg.shape[1]
    tmsg = _into(p.into, 0, a0, a1, k, "into's tmsg")
    belief = _into(p.into, 1, lo, hi, k, "into's belief")
    _task_block(lo, hi, part.task_ptr, position, wmsg, clamp, prior, tmsg, belief)
    return 0.0, (tmsg, belief)


@dataclass(frozen=True)
class Spans:
    """The worker-ordered grid's segments that cross a block boundary (a heavy worker's answers in several blocks).

    Per block (n_blocks,): ``first`` -- its first segment crosses (began in
    an earlier block, or runs on past the block's end as its only
    segment); ``last`` -- its last segment (not also its first) runs on
    past its end; ``starts_before`` -- its first segment began in an
    earlier block; ``first_worker``/``last_worker`` -- the workers of the
    first and last segments.  Every segment of a worker spanning blocks is
    marked, in one of the two slots.
    """

    first: np.ndarray
    last: np.ndarray
    starts_before: np.ndarray
    first_worker: np.ndarray
    last_worker: np.ndarray

    @property
    def any(self) -> bool:
        return bool(self.first.any() or self.last.any())


def spans(wpart: Any) -> Spans:
    """The crossing segments of the worker-ordered grid (from its bounds and ``worker_ptr`` alone)."""
    n = wpart.n_blocks
    first, last, before = np.zeros(n, bool), np.zeros(n, bool), np.zeros(n, bool)
    fw, lw = np.full(n, -1, np.int64), np.full(n, -1, np.int64)
    ptr = wpart.worker_ptr
    for b in range(n):
        lo, hi = wpart.answers_of(b)
        if hi <= lo:
            continue
        lo, hi = lo + wpart.first_answer, hi + wpart.first_answer
        f = int(np.searchsorted(ptr, lo, side="right")) - 1
        la = int(np.searchsorted(ptr, hi - 1, side="right")) - 1
        fw[b], lw[b] = f, la
        before[b] = ptr[f] < lo
        first[b] = before[b] or (f == la and ptr[f + 1] > hi)
        last[b] = f != la and ptr[la + 1] > hi
    return Spans(first, last, before, fw, lw)


@dataclass(frozen=True)
class WorkerPass:
    """The worker side's inputs: task→worker messages (n_answers, K) in task order, the previous worker→task
    messages (n_answers, K) in worker order, the points, ``damping`` (applied when ``damp``), the crossing
    segments and, per block, their total log-products (2, G) (``None`` while they are being computed)."""

    tmsg: np.ndarray
    old: np.ndarray
    points: Points
    damping: float
    damp: bool
    spans: Spans
    totals: Any = None
    #: Optional (n_answers, K) C-contiguous float64, not ``old``: every block writes its new messages there (worker
    #: order; the pass returns it, no per-block arrays joined); else fresh arrays.
    into: np.ndarray | None = None


def partial_block(part: Any, b: int, p: WorkerPass, keep: bool) -> tuple[float, Any]:
    """Block function (``by="worker"``): the partial log-products (2, G) of the block's crossing first and last
    segments over this block's answers (zeros where the segment does not cross)."""
    b, (rows, worker, label, _), tmsg, _ = _check_worker(part, b, p)
    pts = p.points
    out = np.zeros((2, pts.n_points))
    if (p.spans.first[b] or p.spans.last[b]) and rows.shape[0]:
        n = rows.shape[0]
        if p.spans.first[b]:
            end = int(np.searchsorted(worker, worker[0], side="right"))
            _log_products(0, end, rows, label, tmsg, pts.tht_all[pts.set_of(worker[0])], pts.chunk, out[0])
        if p.spans.last[b]:
            start = int(np.searchsorted(worker, worker[n - 1], side="left"))
            _log_products(start, n, rows, label, tmsg, pts.tht_all[pts.set_of(worker[n - 1])], pts.chunk, out[1])
    return 0.0, out


def combine_partials(sp: Spans, partials: np.ndarray) -> np.ndarray:
    """Per block, the total log-products (2, G) of its crossing segments: each crossing worker's partials added
    over its blocks in block order (deterministic).  ``partials`` (n_blocks, 2, G) from :func:`partial_block`."""
    segments: dict[int, list[tuple[int, int]]] = {}
    for b in range(partials.shape[0]):
        if sp.first[b]:
            segments.setdefault(int(sp.first_worker[b]), []).append((b, 0))
        if sp.last[b]:
            segments.setdefault(int(sp.last_worker[b]), []).append((b, 1))
    totals = np.zeros_like(partials)
    for held in segments.values():
        total = partials[held[0]].copy()
        for where in held[1:]:
            total += partials[where]
        for where in held:
            totals[where] = total
    return totals


def worker_block(part: Any, b: int, p: WorkerPass, keep: bool) -> tuple[float, Any]:
    """Block function (``by="worker"``): the block's new worker→task messages (worker order) and its residual."""
    b, (rows, worker, label, _), tmsg, old = _check_worker(part, b, p)
    lo, hi = part.answers_of(b)
    pts = p.points
    first = int(part.first_answer)
    if p.into is not None and p.into is old:
        raise DataError("the worker pass cannot write its messages over the old ones (into is old)")
    out = _into(None if p.into is None else (p.into,), 0, lo + first, hi + first, pts.n_classes, "into")
    span = np.ascontiguousarray(p.totals[b], dtype=np.float64) if p.totals is not None else np.zeros((2, pts.n_points))
    # The block's task→worker messages copied into its own order first (a gather whose reads overlap): the
    # kernel then reads them in sequence, with the same values, instead of waiting on one random read an answer.
    local = np.empty((rows.shape[0], pts.n_classes))
    _gather_rows(tmsg, rows, local)
    args = (_iota(rows.shape[0]), worker, label, local, old[lo + first:hi + first])
    flags = (bool(p.spans.first[b]), bool(p.spans.last[b]), float(p.damping), bool(p.damp), out)
    if pts.wset.shape[0]:
        residual = _worker_block_sets(*args, pts.tht_all, pts.logw_all, pts.wlin_all, pts.wset, pts.chunk, pts.cut,
                                      span, *flags)
    else:  # (every worker on the shared points: the kernel without the runs)
        residual = _worker_block(*args, pts.tht, pts.logw, pts.wlin, pts.chunk, pts.cut, span, *flags)
    return 0.0, (out, np.array([residual]))


def _means(rows: np.ndarray, worker: np.ndarray, label: np.ndarray, tmsg: np.ndarray, pts: Points, span: np.ndarray,
           has_first: bool, has_last: bool, skip_first: bool, means: np.ndarray) -> None:
    """:func:`_worker_means` on the shared points, or run by run of the workers' own sets."""
    if pts.wset.shape[0]:
        _worker_means_sets(rows, worker, label, tmsg, pts.theta_all, pts.tht_all, pts.logw_all, pts.wlin_all,
                           pts.wset, pts.chunk, span, has_first, has_last, skip_first, means)
    else:
        _worker_means(rows, worker, label, tmsg, pts.theta, pts.tht, pts.logw, pts.wlin, pts.chunk, span,
                      has_first, has_last, skip_first, means)


def means_block(part: Any, b: int, p: WorkerPass, keep: bool) -> tuple[np.ndarray, Any]:
    """Block function (``by="worker"``): sums = each worker's posterior mean confusion and effective number of
    points (W, K + 1, K) (:func:`_worker_means`), added by the block holding its first answer."""
    b, (rows, worker, label, _), tmsg, _ = _check_worker(part, b, p)
    pts = p.points
    k = pts.n_classes
    means = np.zeros((part.n_workers, k + 1, k))
    span = np.ascontiguousarray(p.totals[b], dtype=np.float64) if p.totals is not None else np.zeros((2, pts.n_points))
    _means(rows, worker, label, tmsg, pts, span, bool(p.spans.first[b]), bool(p.spans.last[b]),
           bool(p.spans.starts_before[b]), means)
    return means, None


# ----------------------------------------------------------------------------- checks
# The compiled kernels index without bounds checks: a block function checks what it is handed against its block
# (the block's own slices, O(block answers), never the whole set per block) so that a wrong array is a DataError,
# never a read or write outside an array.
def _messages(arr: Any, name: str, k: int, rows: int | None = None) -> np.ndarray:
    """``arr`` as the kernels read it: a C-contiguous float64 (n, K) array (at least ``rows`` rows)."""
    from .validate import as_float_array

    out = as_float_array(arr, name, 2)
    if out.shape[1] != k or (rows is not None and out.shape[0] < rows):
        want = f"({'n' if rows is None else f'>= {rows:,}'}, {k})"
        raise DataError(f"{name} has shape {out.shape}, the block needs {want}")
    return out


def _in_range(values: np.ndarray, n: int, name: str) -> None:
    if values.size and (int(values.min()) < 0 or int(values.max()) >= n):
        raise DataError(f"{name} holds an index outside 0 .. {n - 1:,} (got {int(values.min()):,} .. "
                        f"{int(values.max()):,})")


def _check_task(part: Any, b: Any,
                p: TaskPass) -> tuple[int, int, int, int, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Block ``b`` of a task-ordered partition and the task pass's inputs checked against it:
    (lo, hi, a0, a1, wmsg, position, clamp, log prior or an empty (0, K) array)."""
    from .validate import as_code_array, check_block, check_part

    check_part(part)
    b = check_block(part, b)
    if not isinstance(p, TaskPass):
        raise DataError(f"the task pass takes a TaskPass, got {type(p).__name__}")
    lo, hi = part.tasks_of(b)
    a0, a1 = part.answers_of(b)
    k = int(part.n_classes)
    wmsg = _messages(p.wmsg, "wmsg", k)
    position = np.ascontiguousarray(as_code_array(p.position, "position"), dtype=np.int64)
    if position.shape[0] < a1:
        raise DataError(f"position holds {position.shape[0]:,} answers, the block reads up to {a1:,}")
    _in_range(position[a0:a1], wmsg.shape[0], "position (rows of wmsg)")
    clamp = np.ascontiguousarray(as_code_array(p.clamp, "clamp"), dtype=np.int64)
    if clamp.size:
        if clamp.shape[0] < hi:
            raise DataError(f"clamp holds {clamp.shape[0]:,} tasks, the block reads up to {hi:,}")
        block = clamp[lo:hi]
        if block.size and (int(block.min()) < -1 or int(block.max()) >= k):
            raise DataError(f"clamp holds a class outside -1 .. {k - 1}")
    prior = np.zeros((0, k))
    if p.log_prior is not None:
        prior = _messages(p.log_prior, "log_prior", k, hi)
        rows = prior[lo:hi]
        if np.isnan(rows).any() or np.isposinf(rows).any() or (rows.size and not np.isfinite(rows.max(axis=1)).all()):
            raise DataError("log_prior holds NaN, +inf or a row of -inf (a task no class is possible for)")
    return lo, hi, a0, a1, wmsg, position, clamp, prior


def _check_worker(part: Any, b: Any, p: WorkerPass) -> tuple[int, tuple[np.ndarray, ...], np.ndarray, np.ndarray]:
    """Block ``b`` of a worker-ordered partition and the worker pass's inputs checked against it:
    (b, its answers (rows, worker, label, task), tmsg, old)."""
    from .validate import check_block

    if not all(hasattr(part, name) for name in ("order", "worker_ptr", "bounds", "answers", "first_answer")):
        raise DataError(f"a worker-side block function takes a worker-ordered partition (an engine's worker_part), "
                        f"got {type(part).__name__}")
    b = check_block(part, b)
    if not isinstance(p, WorkerPass) or not isinstance(p.points, Points):
        raise DataError("the worker pass takes a WorkerPass holding Points")
    pts = p.points
    k = int(part.n_classes)
    if pts.n_classes != k:
        raise DataError(f"the points are {pts.n_classes}-class confusions, the answers have {k} classes")
    if pts.wset.shape[0] and pts.wset.shape[0] != int(part.n_workers):
        raise DataError(f"the points' owner holds {pts.wset.shape[0]:,} workers, the answers have "
                        f"{int(part.n_workers):,}")
    damping = float(p.damping)
    if not 0.0 <= damping < 1.0:
        raise DataError(f"damping must lie in [0, 1), got {p.damping!r}")
    sp = p.spans
    n_blocks = int(part.n_blocks)
    for name in ("first", "last", "starts_before"):
        if np.shape(getattr(sp, name)) != (n_blocks,):
            raise DataError(f"spans.{name} must hold one flag per block ({n_blocks:,}): build it with spans()")
    if p.totals is not None and np.shape(p.totals) != (n_blocks, 2, pts.n_points):
        raise DataError(f"totals has shape {np.shape(p.totals)}, the blocks need ({n_blocks:,}, 2, "
                        f"{pts.n_points:,})")
    rows, worker, label, task = part.answers(b)
    tmsg = _messages(p.tmsg, "tmsg", k)
    _in_range(rows, tmsg.shape[0], "the block's rows (rows of tmsg)")
    _in_range(label, k, "label")
    _in_range(worker, int(part.n_workers), "worker")
    lo, hi = part.answers_of(b)
    old = _messages(p.old, "old", k, hi + int(part.first_answer))
    return b, (rows, worker, label, task), tmsg, old


# ----------------------------------------------------------------------------- passes
def span_totals(engine: Any, p: WorkerPass) -> Any:
    """The crossing segments' total log-products per worker block, or None when no worker spans blocks."""
    if not p.spans.any:
        return None
    _, outs = engine.map_reduce(partial_block, p, keep=True, by="worker")
    return combine_partials(p.spans, np.stack(outs))


def worker_pass(engine: Any, p: WorkerPass) -> tuple[np.ndarray, float]:
    """New worker→task messages (n_answers, K), worker order, and the residual (largest change of a message)."""
    p = replace(p, totals=span_totals(engine, p))
    _, outs = engine.map_reduce(worker_block, p, keep=True, by="worker")
    if p.into is not None:  # (the blocks wrote their rows there)
        res = np.concatenate([o[1] for o in outs])
        return p.into, float(res.max()) if res.size else 0.0
    msgs, res = engine.gather(outs)
    return msgs, float(res.max()) if res.size else 0.0


def task_pass(engine: Any, p: TaskPass) -> tuple[np.ndarray, np.ndarray]:
    """Task→worker messages (n_answers, K) in task order, and the beliefs (n_tasks, K)."""
    _, outs = engine.map_reduce(task_block, p, keep=True, by="task")
    if p.into is not None:  # (the blocks wrote their rows there)
        return p.into
    tmsg, belief = engine.gather(outs)
    return tmsg, belief


def _means_apart_block(part: Any, b: int, p: WorkerPass, keep: bool) -> tuple[float, Any]:
    """Block function (``by="worker"``) of a grid where no worker's answers span two blocks: the block's workers'
    posterior mean confusions and effective numbers of points written into ``p.into`` (n_workers, K + 1, K),
    zeros before (each worker's rows by
    its one block, so threads never write the same row)."""
    b, (rows, worker, label, _), tmsg, _ = _check_worker(part, b, p)
    pts = p.points
    if p.spans.first[b] or p.spans.last[b]:
        raise DataError(f"block {b} holds a worker whose answers span blocks: its means need the block sums")
    if p.into is None:
        raise DataError("the means of workers within one block are written into p.into: give it")
    local = np.empty((rows.shape[0], pts.n_classes))
    _gather_rows(tmsg, rows, local)
    _means(_iota(rows.shape[0]), worker, label, local, pts, np.zeros((2, pts.n_points)), False, False, False, p.into)
    return 0.0, None


def worker_means(engine: Any, p: WorkerPass) -> np.ndarray:
    """Each worker's posterior mean confusion (n_workers, K, K) ``[w, true, observed]``; zeros without answers
    (:func:`worker_posteriors`, without the effective numbers of points)."""
    return worker_posteriors(engine, p)[0]


def worker_posteriors(engine: Any, p: WorkerPass) -> tuple[np.ndarray, np.ndarray]:
    """Each worker's posterior mean confusion (n_workers, K, K) ``[w, true, observed]`` (zeros without answers)
    and the effective number of points its posterior rests on (n_workers,) (0 without answers).

    The effective number :math:`1 / Σ_g p_g^2` of the posterior weights
    :math:`p_g` over the points is Kish's effective sample size: near 1
    when one point carries the whole posterior -- for Monte-Carlo points
    (:func:`sample_points`) the sign that the draws from the prior miss the
    worker's posterior and its messages are those of one random draw.

    Where no worker's answers span two blocks of ``engine``'s worker grid
    (``p.spans``), each block writes its workers' means into one shared
    array instead of returning a dense per-worker sum (the fine grid's
    blocks then run on every thread, with no workers × K² array a block):
    the same bits, since every other block's sum of a worker is zero.
    """
    k = p.points.n_classes
    if not p.spans.any:
        total = np.zeros((int(engine.worker_part.n_workers), k + 1, k))
        engine.map_reduce(_means_apart_block, replace(p, into=total), by="worker")
    else:
        total, _ = engine.map_reduce(means_block, replace(p, totals=span_totals(engine, p)), by="worker")
        total = np.asarray(total)
    return np.ascontiguousarray(total[:, :k]), total[:, k, 0].copy()


__all__ = [
    "Points", "Spans", "TaskPass", "WorkerPass", "combine_partials", "grid_points", "means_block", "partial_block",
    "proposal_draws", "proposal_points", "sample_points", "spans", "task_block", "task_pass", "worker_block", "worker_means", "worker_pass", "worker_posteriors",
]
