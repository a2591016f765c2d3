r"""The one latent-class E-step of the package, on the engine's block protocol (:mod:`crowdagg.engine`).

Every EM-style E-step runs this module's compiled per-task loop,
:func:`_latent_block`, and no other: Dawid--Skene and onecoin
(:mod:`crowdagg.methods.em`), mf (:mod:`crowdagg.methods.graph.mf`), the
moment methods' EM refinement, the crowd-kit wrappers (all through
:func:`crowdagg.kernels.em.em_block`, a thin adapter: K states, the
identity map, one class prior), EBCC (subtypes of each class) and the
trainers' Bayes rule and variational E-steps (through
:func:`crowdagg.methods.blocks.latent_posterior`).

The posterior of a task's latent state when each answer is independent
given it, and the task carries its own prior:

.. math:: \log q_n(z) = \log \pi_n(z) + \sum_{(w, l) \in \mathcal{A}_n} \log T_w[l, z] - \log Z_n,
          \qquad z = 0 .. K_{latent} - 1

``log_table[w, l, z]`` is :math:`\log T_w[l, z]`, the log-probability that
worker ``w`` answers class ``l`` when the task's latent state is ``z``
(the E-step kernels' layout ``[worker, observed, latent]``: one answer
reads one contiguous row).  ``log_prior[n, z]`` is the task's own log
prior: a classifier's log-probabilities (Raykar/AggNet, deepMF, BayesDGC:
Bayes' rule over the classifier and the answers), or one row shared by
every task (Dawid--Skene's class prior: a 1-D ``log_prior``, no array over
the tasks).  A map ``latent_class[z]`` from latent states to classes sums
the latent posterior into the class posterior
:math:`P(y_n = c) = \sum_{z: \mathrm{class}(z) = c} q_n(z)` (EBCC's
subtypes of a class, Li, Rubinstein & Cohn, ICML 2019).  With
:math:`K_{latent} = K` and the identity map it is the square-confusion
E-step of Dawid--Skene (:func:`crowdagg.kernels.em.em_block` is that
call: the same bits) and of the trainers' Bayes rule
(``Trainer._posterior``: ``log_table`` is ``log A`` transposed from
``[worker, true, observed]``).

**Gold** (``clamp[n] = c``): the task's posterior keeps only the states
of class c (the others are -inf before the softmax), and its evidence
:math:`\log Z_n` is theirs; under the identity map that is the one-hot
row at c and the joint log-probability of c, DS's gold.  Should every
state of c be ruled out by the answers, the states of c share the mass
equally and the log-likelihood is -inf.

Per block the kernel also gives, on request:

* the log-likelihood :math:`\sum_n \log Z_n` (always; a sum the engine
  reduces);
* the entropy term :math:`\sum_n \sum_z f \log f`, :math:`f =
  \max(q_n(z), \text{floor})` (an EM loss's, crowd-kit's);
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
:func:`latent_block` is the block function it maps.  Both block functions
(:func:`latent_block`, :func:`~crowdagg.kernels.em.em_block`) check their
parameters against the data and hand the pass to :func:`block_pass`, which
slices the block's rows, makes its buffers, runs the kernel and names the
task it refused.  The kernel's other two modes are em_block's starts: the
statistics of given posterior rows, and of the soft majority vote counted
inside the block.
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

#: How a task's posterior is made: the E-step, or (em_block's starts) given rows or the soft vote of its answers.
E_STEP, GIVEN, VOTE = 0, 1, 2

#: Why the kernel stopped at a task: no posterior (Z = 0), a clamp that is not a class, a clamp to a class no
#: latent state maps to, log-scores whose sum overflows (+inf, or +inf + -inf = NaN: finite inputs near 1e308).
_NO_POSTERIOR, _CLAMP_NOT_A_CLASS, _CLAMP_WITHOUT_STATES, _OVERFLOW = 0, 1, 2, 3


@njit(cache=True, nogil=True)
def _spread(q, g, latent_class, has_map):  # pragma: no cover - compiled
    """``q`` uniform over the states of class ``g`` (0 elsewhere); returns how many states class ``g`` has.

    Not inlined, as the helpers below: the rare paths stay out of the hot
    loop's code (its registers and its branches).
    """
    n = 0
    for z in range(q.shape[0]):
        if (latent_class[z] if has_map else z) == g:
            n += 1
    for z in range(q.shape[0]):
        q[z] = 1.0 / n if n > 0 and (latent_class[z] if has_map else z) == g else 0.0
    return n


@njit(cache=True, nogil=True)
def _start_row(mode, q, given, i, label, lo, hi, g, latent_class, has_map):  # pragma: no cover - compiled
    """em_block's starts: ``q`` = the given row ``given[i]`` (``GIVEN``) or the vote shares of the answers
    ``label[lo:hi]`` (``VOTE``; zeros without answers), then held to class ``g`` when ``g >= 0``: the other
    classes' states zeroed, the rest renormalised, or uniform over g's states if no mass is left.  Returns the
    number of g's states (0: a clamp no state maps to), or 1 when ``g < 0``."""
    n_latent = q.shape[0]
    if mode == GIVEN:
        for k in range(n_latent):
            q[k] = given[i, k]
    else:  # the vote shares: whole counts, so their sum is exact in any order
        for k in range(n_latent):
            q[k] = 0.0
        for e in range(lo, hi):
            q[label[e]] += 1.0
        z = 0.0
        for k in range(n_latent):
            z += q[k]
        if z > 0.0:
            for k in range(n_latent):
                q[k] = q[k] / z
    if g < 0:
        return 1
    z = 0.0
    for k in range(n_latent):
        if (latent_class[k] if has_map else k) != g:
            q[k] = 0.0
        z += q[k]
    if z > 0.0:
        for k in range(n_latent):
            q[k] = q[k] / z  # a division: x / x is exactly 1 (the one-hot row under the identity)
        return 1
    return _spread(q, g, latent_class, has_map)


@njit(cache=True, nogil=True)
def _draw(q, key, draw_round):  # pragma: no cover - compiled
    """One state drawn from ``q`` by the uniform ``draw_round`` of the stream ``key`` (inverse CDF, state order)."""
    u = uniform(key, draw_round)
    total = 0.0
    for k in range(q.shape[0]):
        total += q[k]
    target = u * total
    acc = 0.0
    pick = -1
    for k in range(q.shape[0]):
        acc += q[k]
        if q[k] > 0.0:
            pick = k  # the last possible state, should rounding leave acc at or below the target
            if acc > target:
                break
    return pick


@njit(cache=True, nogil=True)
def _latent_block(
    mode, start, stop, task_ptr, worker, label, log_prior, shared_prior, log_table, latent_class, n_classes, clamp,
    given, floor, keys, draw_round, count_mode, keep, post, cpost, draws, counts, tot,
):  # pragma: no cover - compiled
    """The E-step of tasks ``[start, stop)`` fused with its statistics; returns (Σ log Z, Σ f log f, task, why).

    The one per-task loop of every EM-style E-step (DS, onecoin, mf, EBCC,
    the trainers).  For each task t (``i = t - start``) its posterior q over
    the ``n_latent = post.shape[1]`` states, by ``mode``:

    * ``E_STEP``: ``softmax(log_prior[r] + Σ_e log_table[w_e, y_e, :])``,
      r = 0 when ``shared_prior`` (one prior row for every task) else i,
      with its log-evidence log Z summed;
    * ``GIVEN``: the row ``given[i]``;
    * ``VOTE``: the shares of the task's answers (n_latent = n_classes, no
      map; a task without answers gets zeros).

    ``clamp`` (empty: nothing clamped): ``clamp[i] = g >= 0`` keeps only
    the states of class g -- in the E-step the others are -inf before the
    softmax (log Z is then the evidence of class g), otherwise they are
    zeroed and the rest renormalised; no mass left (every state of g ruled
    out): uniform over g's states, the evidence -inf.  Under the identity
    map that is the one-hot row at g, DS's gold.
    ``latent_class`` (n_latent,) maps states to classes (empty: the
    identity, or no class posterior).  ``keys`` (stop - start,) uint64 or
    empty: no draws.  ``keep``: write ``post[i]``, ``cpost[i]`` (with a
    map) and ``draws[i]``.  ``floor >= 0``: also Σ_z f log f with f =
    max(q_z, floor) (an EM loss's entropy term).  ``count_mode`` 1 adds q
    to ``counts[w_e, y_e, :]`` and ``tot``; 2 adds 1 at the drawn state.

    Stops at the first task without a posterior (why 0: every state -inf
    and no clamp), whose clamp is not -1 .. n_classes - 1 (why 1) or
    names a class no state maps to (why 2), or whose log-sum-exp is +inf
    or NaN (why 3: finite log-scores whose sum overflows), its outputs
    unwritten; task -1 when none.

    An answer's row of the table is its cell ``(w_e * K + y_e) * n_latent``,
    made from ``worker`` and ``label`` as the E-step reads it and kept for
    the counts (an array of cells would cost 4 bytes an answer: 0.4 GB at
    100M answers).  The offsets are unsigned: numba then skips the
    negative-index wrap-around test on those accesses (~20% of the time).
    Two states (the most common case) run the same arithmetic in scalars
    (bit-identical results, fewer memory round trips); every other task
    is normalised by :func:`~crowdagg.kernels.softmax.softmax_into`.
    """
    n_latent = post.shape[1]
    nl = np.uint64(n_latent)
    nk = np.uint64(n_classes)
    # Flat views: one answer touches the n_latent contiguous entries from its offset.
    lt = log_table.reshape(-1)
    lp = log_prior.reshape(-1)
    cnt = counts.reshape(-1)
    has_map = latent_class.shape[0] > 0
    has_clamp = clamp.shape[0] > 0
    has_draw = keys.shape[0] > 0
    q = np.empty(n_latent, dtype=np.float64)
    bases = np.empty(64, dtype=np.uint64)
    ll = 0.0
    h = 0.0
    for t in range(start, stop):
        i = t - start
        lo = task_ptr[t]
        hi = task_ptr[t + 1]
        if hi - lo > bases.shape[0]:
            bases = np.empty(2 * (hi - lo), dtype=np.uint64)
        g = -1
        if has_clamp:
            g = clamp[i]
            if g != -1 and (g < 0 or g >= n_classes):
                return ll, h, i, _CLAMP_NOT_A_CLASS
        row = np.uint64(0) if shared_prior else np.uint64(i) * nl  # the task's prior row in lp
        if mode == E_STEP and n_latent == 2 and g < 0:
            # The arithmetic of softmax_into, in scalars the compiler keeps in registers.
            a = lp[row]
            b = lp[row + np.uint64(1)]
            for e in range(lo, hi):
                base = (np.uint64(worker[e]) * nk + np.uint64(label[e])) * nl
                bases[e - lo] = base
                a += lt[base]
                b += lt[base + np.uint64(1)]
            m = b if b > a else a
            if m == -np.inf:  # both states ruled out: exp(-inf - -inf) would be NaN
                return ll, h, i, _NO_POSTERIOR
            ea = np.exp(a - m)
            eb = np.exp(b - m)
            z = 0.0 + ea + eb
            inv = 1.0 / z
            q[0] = ea * inv
            q[1] = eb * inv
            lse = m + np.log(z)
            if not lse < np.inf:  # +inf or NaN: the posterior would be a row of NaN
                return ll, h, i, _OVERFLOW
            ll += lse
        elif mode == E_STEP:
            for k in range(n_latent):
                q[k] = lp[row + np.uint64(k)]
            for e in range(lo, hi):
                base = (np.uint64(worker[e]) * nk + np.uint64(label[e])) * nl
                bases[e - lo] = base
                for k in range(n_latent):
                    q[k] += lt[base + np.uint64(k)]
            if g >= 0:  # gold: only its class's states (one, under the identity: log Z is its joint)
                for k in range(n_latent):
                    if (latent_class[k] if has_map else k) != g:
                        q[k] = -np.inf
            m, z = softmax_into(q, q)
            if m == -np.inf:  # every state ruled out: q is exp(-inf - -inf), NaN, and is made again
                if g < 0:
                    return ll, h, i, _NO_POSTERIOR
                if _spread(q, g, latent_class, has_map) == 0:
                    return ll, h, i, _CLAMP_WITHOUT_STATES
                ll += m  # the gold class has no evidence: the log-likelihood says so
            else:
                lse = m + np.log(z)
                if not lse < np.inf:  # +inf or NaN: the posterior would be a row of NaN
                    return ll, h, i, _OVERFLOW
                ll += lse
        else:
            for e in range(lo, hi):
                bases[e - lo] = (np.uint64(worker[e]) * nk + np.uint64(label[e])) * nl
            if _start_row(mode, q, given, i, label, lo, hi, g, latent_class, has_map) == 0:
                return ll, h, i, _CLAMP_WITHOUT_STATES
        pick = _draw(q, keys[i], draw_round) if has_draw else -1
        if keep:
            for k in range(n_latent):
                post[i, k] = q[k]
            if has_map:
                for c in range(n_classes):
                    cpost[i, c] = 0.0
                for k in range(n_latent):
                    cpost[i, latent_class[k]] += q[k]
            if has_draw:
                draws[i] = pick
        if floor >= 0.0:
            for k in range(n_latent):
                f = q[k] if q[k] > floor else floor
                h += f * np.log(f)
        if count_mode == 1:
            for k in range(n_latent):
                tot[k] += q[k]
            if n_latent == 2:
                q0 = q[0]
                q1 = q[1]
                for e in range(hi - lo):
                    base = bases[e]
                    cnt[base] += q0
                    cnt[base + np.uint64(1)] += q1
            else:
                for e in range(hi - lo):
                    base = bases[e]
                    for k in range(n_latent):
                        cnt[base + np.uint64(k)] += q[k]
        elif count_mode == 2:
            tot[pick] += 1.0
            at = np.uint64(pick)
            for e in range(hi - lo):
                cnt[bases[e] + at] += 1.0
    return ll, h, -1, _NO_POSTERIOR


def finite_or_minus_inf(arr: np.ndarray, name: str) -> None:
    """A DataError at the first NaN or +inf of a log-probability array (-inf rules a state out: allowed)."""
    bad = np.isnan(arr) | (arr == np.inf)
    if bad.any():
        at = np.unravel_index(int(np.flatnonzero(bad)[0]), arr.shape)
        raise DataError(f"{name}{list(map(int, at))} is {float(arr[at])!r}: a log-probability is finite or -inf")


def as_clamp(values: object) -> np.ndarray:
    """Gold as the kernel reads it: contiguous int64 class codes over all tasks, -1 free.

    Each class is checked against the data's K by the kernel (per block);
    here only what a cast could hide: a code beyond int32, or below -1,
    is refused on the given dtype before a large unsigned code could wrap
    to -1.
    """
    clamp = as_code_array(values, "clamp")
    if clamp.dtype != np.int64:
        if clamp.size and (int(clamp.min()) < -1 or int(clamp.max()) > np.iinfo(np.int32).max):
            raise DataError(f"clamp holds a class outside -1 .. K-1 ({int(clamp.max())})")
        clamp = clamp.astype(np.int64)
    return np.ascontiguousarray(clamp)


def as_floor(value: object) -> float:
    """An entropy floor: a number >= 0, or a DataError."""
    try:
        floor = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise DataError(f"entropy_floor must be a number, got {value!r}") from None
    if not floor >= 0.0:
        raise DataError(f"entropy_floor must be >= 0, got {value!r}")
    return floor


@dataclass(frozen=True, eq=False)
class LatentParams:
    """What :func:`latent_block` computes a block's latent E-step from (broadcast to every block of a pass).

    Parameters
    ----------
    log_table : ndarray (n_workers, K, K_latent)
        ``log_table[w, l, z]``: log P(worker w answers class l | latent state z).
    log_prior : ndarray (n_tasks, K_latent) or (K_latent,)
        Each task's log prior over the latent states, global rows (each
        block reads its own); or one row shared by every task (a class
        prior: Dawid--Skene's, no array over the tasks).
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
    clamp : ndarray of int (n_tasks,), optional
        Gold, over all tasks (global rows): the class each task is clamped
        to, -1 free.  A clamped task's posterior keeps only the states of
        its class (under the identity map: the one-hot row), and its
        log-evidence is theirs.  None clamps nothing.
    entropy_floor : float, optional
        Also sum Σ_z f log f over the tasks, f = max(q_z, floor) (the
        entropy term of an EM loss, crowd-kit's): the blocks' sums end
        with it.

    Arrays are converted to contiguous float64 / int64 once, here, and
    checked (NaN and +inf refused); shapes against the data are checked by
    each block (O(1), the map's classes O(K_latent)), a clamp's classes
    inside the kernel.
    """

    log_table: np.ndarray
    log_prior: np.ndarray
    latent_class: np.ndarray | None = None
    draw_seed: int | None = None
    draw_round: int = 0
    counts: str | None = None
    clamp: np.ndarray | None = None
    entropy_floor: float | None = None

    def __post_init__(self) -> None:
        def put(name: str, value: Any) -> None:
            object.__setattr__(self, name, value)

        put("log_table", as_float_array(self.log_table, "log_table", 3))
        put("log_prior", as_float_array(self.log_prior, "log_prior", 1 if np.ndim(self.log_prior) == 1 else 2))
        finite_or_minus_inf(self.log_table, "log_table")
        finite_or_minus_inf(self.log_prior, "log_prior")
        n_latent = self.log_table.shape[2]
        if self.log_prior.shape[-1] != n_latent:
            raise DataError(f"log_prior has {self.log_prior.shape[-1]:,} latent states a task, log_table "
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
        if self.clamp is not None:
            put("clamp", as_clamp(self.clamp))
        if self.entropy_floor is not None:
            put("entropy_floor", as_floor(self.entropy_floor))


#: Stand-ins for the arrays a pass does not use (the kernel's argument types stay the same).
_NO_MAP = np.zeros(0, dtype=np.int64)
_NO_KEYS = np.zeros(0, dtype=np.uint64)
_NO_CLAMP = np.zeros(0, dtype=np.int64)
_NO_ROWS = np.zeros((0, 1))
_NO_PRIOR = np.zeros(1)
_NO_TABLE = np.zeros((1, 1, 1))


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


@dataclass
class BlockPass:
    """What one block's pass of :func:`_latent_block` gave (arrays fresh: the engine's tree adds into them)."""

    loglik: float
    entropy: float
    counts: np.ndarray
    tot: np.ndarray
    latent: np.ndarray
    classes: np.ndarray
    draws: np.ndarray


def block_pass(
    part: Any, b: int, n_latent: int, *, mode: int = E_STEP, log_prior: np.ndarray | None = None,
    log_table: np.ndarray | None = None, latent_class: np.ndarray | None = None, clamp: np.ndarray | None = None,
    given: np.ndarray | None = None, entropy_floor: float | None = None, draw_seed: int | None = None,
    draw_round: int = 0, count_mode: int = _NO_COUNTS, keep: bool = False,
) -> BlockPass:
    """Block ``b``'s pass of the one E-step kernel: slices, buffers, the kernel, its refusals named.

    The block functions :func:`latent_block` and
    :func:`crowdagg.kernels.em.em_block` check their parameters against the
    data (the partition checked, ``b`` a block of it, the arrays' shapes)
    and call this with them, converted.  ``log_prior``: a 1-D row shared
    by every task, or global rows; ``clamp`` and ``given``: global rows.
    ``log_prior`` and ``log_table`` are read by the E-step only (None in
    the ``GIVEN`` and ``VOTE`` modes).
    """
    w, k = int(part.n_workers), int(part.n_classes)
    start, stop = part.tasks_of(b)
    lo, hi = part.first_task + start, part.first_task + stop  # the block's rows of the per-task arrays
    need = part.first_task + part.n_tasks
    log_prior, log_table, latent_class, clamp, given = _pass_arrays(
        w, k, n_latent, mode, log_prior, log_table, latent_class, clamp, given, count_mode, draw_seed)
    shared = log_prior.ndim == 1
    if not shared and log_prior.shape[0] < need:
        raise DataError(f"log_prior has {log_prior.shape[0]:,} rows, the data has {need:,} tasks")
    prior = log_prior.reshape(1, -1) if shared else log_prior[lo:hi]
    if given is not None and given.shape[0] < need:
        raise DataError(f"given has {given.shape[0]:,} rows, the data has {need:,} tasks")
    rows = _NO_CLAMP
    if clamp is not None:
        if clamp.shape[0] < need:
            raise DataError(f"clamp holds {clamp.shape[0]:,} tasks, the data has {need:,}")
        rows = clamp[lo:hi]
    mapping = _NO_MAP if latent_class is None else latent_class
    keys = _NO_KEYS if draw_seed is None else _task_keys(part, b, draw_seed, start, stop)
    n = stop - start
    counts = np.zeros((w, k, n_latent)) if count_mode else np.zeros((0, 0, 0))
    tot = np.zeros(n_latent) if count_mode else np.zeros(0)
    post = np.empty((n, n_latent)) if keep else np.empty((0, n_latent))
    cpost = np.empty((n, k)) if keep and latent_class is not None else np.empty((0, k))
    draws = np.empty(n, dtype=np.int64) if keep and draw_seed is not None else np.empty(0, dtype=np.int64)
    floor = -1.0 if entropy_floor is None else entropy_floor
    ll, h, bad, why = _latent_block(
        mode, start, stop, part.task_ptr, part.worker, part.label, prior, shared, log_table, mapping, k, rows,
        _NO_ROWS if given is None else given[lo:hi], floor, keys, draw_round, count_mode, keep, post, cpost, draws,
        counts, tot)
    if bad >= 0:
        name = "" if part.task_names is None else f" ({str(part.task_names[start + bad])!r})"
        if why == _CLAMP_NOT_A_CLASS:
            raise DataError(f"clamp holds {int(rows[bad])} for task {lo + bad}{name}, not a class (-1 .. {k - 1})")
        if why == _CLAMP_WITHOUT_STATES:
            raise DataError(f"clamp holds {int(rows[bad])} for task {lo + bad}{name}: no latent state maps to that "
                            "class")
        if why == _OVERFLOW:
            raise DataError(f"task {lo + bad}{name}: its log-scores (log_prior + the answers' log_table entries) "
                            "overflow to +inf or NaN; log-probabilities are at most 0")
        raise DataError(f"task {lo + bad}{name}: every latent state has probability 0 under its prior and its "
                        "answers (log_prior + log_table are -inf for all of them), so it has no posterior")
    return BlockPass(float(ll), float(h), counts, tot, post, cpost, draws)


def _pass_arrays(
    w: int, k: int, n_latent: int, mode: int, log_prior: np.ndarray | None, log_table: np.ndarray | None,
    latent_class: np.ndarray | None, clamp: np.ndarray | None, given: np.ndarray | None, count_mode: int,
    draw_seed: int | None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, np.ndarray | None, np.ndarray | None]:
    """:func:`block_pass`'s arrays checked against what the kernel indexes them by, and converted (no copy for
    the block functions' arrays, already float64 / int64 and contiguous): it reads and writes without bounds
    checks, so a table of the wrong shape, a map to a class past K or an unknown mode read past an array's end
    (garbage posteriors) or wrote past one (a crashed interpreter).  O(K_latent) a call, no pass over the tasks."""
    if isinstance(n_latent, bool) or not isinstance(n_latent, (int, np.integer)) or n_latent < 1:
        raise DataError(f"block_pass needs n_latent >= 1 latent states, got {n_latent!r}")
    if mode not in (E_STEP, GIVEN, VOTE) or count_mode not in COUNT_MODES.values():
        raise UsageError(f"block_pass: mode must be E_STEP, GIVEN or VOTE and count_mode one of "
                         f"{sorted(COUNT_MODES.values())}, got {mode!r} and {count_mode!r}")
    if count_mode == _DRAW_COUNTS and draw_seed is None:
        raise UsageError(f"counts of the draws need a {param('draw_seed')}")
    if mode == E_STEP:
        if log_prior is None or log_table is None:
            raise DataError("block_pass: the E-step needs log_prior and log_table")
        log_table = as_float_array(log_table, "log_table", 3)
        log_prior = as_float_array(log_prior, "log_prior", 1 if np.ndim(log_prior) == 1 else 2)
        if log_table.shape != (w, k, n_latent) or log_prior.shape[-1] != n_latent:
            raise DataError(f"log_table has shape {log_table.shape} and log_prior {log_prior.shape}; the data's "
                            f"[worker, observed, latent] is ({w:,}, {k:,}, {n_latent:,})")
    else:
        log_prior, log_table = _NO_PRIOR, _NO_TABLE
    if mode == GIVEN:
        if given is None:
            raise DataError("block_pass: the GIVEN start needs the given rows")
        given = as_float_array(given, "given", 2)
        if given.shape[1] != n_latent:
            raise DataError(f"given has {given.shape[1]:,} columns, for {n_latent:,} latent states")
    if mode == VOTE and (n_latent != k or latent_class is not None):
        raise DataError(f"the vote's start is over the {k} classes themselves, not {n_latent:,} latent states")
    if latent_class is not None:
        latent_class = np.ascontiguousarray(as_code_array(latent_class, "latent_class"), dtype=np.int64)
        if latent_class.shape != (n_latent,) or not 0 <= latent_class.min() <= latent_class.max() < k:
            got = (f"values {latent_class.min()} .. {latent_class.max()}" if latent_class.shape == (n_latent,) else
                   f"shape {latent_class.shape}")
            raise DataError(f"latent_class must map each of the {n_latent:,} latent states to a class 0 .. {k - 1}; "
                            f"got {got}")
    elif n_latent != k and (clamp is not None or mode != E_STEP):
        raise DataError(f"{n_latent:,} latent states for {k} classes need a latent_class map")
    if clamp is not None:
        clamp = np.ascontiguousarray(as_code_array(clamp, "clamp"), dtype=np.int64)
    return log_prior, log_table, latent_class, clamp, given


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
        ``(loglik,)``, then ``counts, latent_tot`` when ``params.counts``
        is set (fresh arrays (n_workers, K, K_latent) and (K_latent,)),
        then Σ f log f when ``params.entropy_floor`` is set.
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
    if params.latent_class is not None and int(params.latent_class.max()) >= k:
        raise DataError(f"latent_class holds {int(params.latent_class.max())}, not one of the data's {k} classes")
    if params.latent_class is None and params.clamp is not None and n_latent != k:
        raise DataError(f"a clamp names classes: log_table's {n_latent:,} latent states need a latent_class map to "
                        f"the data's {k}")
    mode = COUNT_MODES[params.counts]
    got = block_pass(part, b, n_latent, log_prior=params.log_prior, log_table=table,
                     latent_class=params.latent_class, clamp=params.clamp, entropy_floor=params.entropy_floor,
                     draw_seed=params.draw_seed, draw_round=params.draw_round, count_mode=mode, keep=keep)
    sums: tuple[Any, ...] = (got.loglik, got.counts, got.tot) if mode else (got.loglik,)
    if params.entropy_floor is not None:
        sums += (got.entropy,)
    if not keep:
        return sums, None
    out = {"latent": got.latent}
    if params.latent_class is not None:
        out["classes"] = got.classes
    if params.draw_seed is not None:
        out["draws"] = got.draws
    return sums, out


__all__ = ["COUNT_MODES", "E_STEP", "GIVEN", "VOTE", "LatentParams", "as_clamp", "as_floor", "block_pass",
           "finite_or_minus_inf", "latent_block"]
