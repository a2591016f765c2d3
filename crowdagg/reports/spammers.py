"""Spammer scores and the cross-covariance spammer detector (ALGORITHMS.md §7; tutorial seed 004, Part III).

Three views of "this worker's answers do not depend on the truth":

* :func:`channel_capacity` -- each worker as a channel true → observed
  class: its capacity ``max_π I(y; ỹ)`` in bits, by Blahut–Arimoto.  0 for
  a spammer (all rows of its confusion equal: ``A = 1 sᵀ``), log2 K for a
  perfect (or perfectly permuting) worker.  The tutorial's
  information-theoretic characterisation of spammers.
* :func:`raykar_yu_score` -- Raykar & Yu's spammer score (JMLR 2012):
  the mean squared distance between the rows of the confusion matrix,
  0 iff all rows are equal, 1 for a permutation.
* :func:`detect_spammers` -- from the answers alone, no model fit: the
  cross-covariance detector of Traganitis & Giannakis (ICASSP 2021; the
  tutorial's Alg. 1), with a permutation test guarding its 2-means split
  (see its notes).

The first two read estimated confusion matrices (any method's
``worker_params``); the third reads the data through the engine's
co-occurrence kernel (:mod:`crowdagg.kernels.cooc`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..core import memory, threads
from ..data.annotations import AnnotationSet
from ..engine import LocalEngine
from ..errors import CrowdaggWarning, DataError, UsageError, param, warn
from ..kernels import cooc
from ..kernels.spammers import TermParams, answer_terms_block, apply_filled, null_energy

# ------------------------------------------------------------------------------------------ confusion scores

#: Blahut–Arimoto stops when the capacity's upper and lower bounds are this close (bits).
CAPACITY_TOL = 1e-9
#: ... or after this many iterations (a worker still open then gets the midpoint of its bounds).
CAPACITY_MAX_ITER = 100_000
#: How far a confusion row may sum from 1 before it is refused.
ROW_SUM_TOL = 1e-6


def _check_confusion(confusion: Any) -> np.ndarray:
    """``confusion`` as float64 (W, K_true, K_obs): finite, non-negative, each row summing to 1 (renormalised
    within :data:`ROW_SUM_TOL`), else a DataError naming the first bad worker."""
    try:
        arr = np.asarray(confusion, dtype=np.float64)
    except (TypeError, ValueError):
        raise DataError("a confusion array must hold numbers, shape (workers, true classes, observed classes)") \
            from None
    if arr.ndim != 3 or arr.shape[1] < 1 or arr.shape[2] < 1:
        raise DataError(f"a confusion array has shape (workers, true classes, observed classes), got {arr.shape}")
    bad = ~np.isfinite(arr) | (arr < 0)
    if bad.any():
        w = int(np.argwhere(bad)[0, 0])
        raise DataError(f"worker {w}'s confusion matrix holds a negative, NaN or infinite entry")
    sums = arr.sum(axis=2)
    off = np.abs(sums - 1.0) > ROW_SUM_TOL
    if off.any():
        w, c = (int(x) for x in np.argwhere(off)[0])
        raise DataError(f"worker {w}'s confusion row for true class {c} sums to {sums[w, c]:.6g}, not 1")
    return arr / sums[:, :, None]


def _xlogy_ratio(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """``p log(p / q)`` elementwise, 0 where ``p == 0`` (natural log)."""
    out = np.zeros_like(p)
    pos = p > 0
    out[pos] = p[pos] * np.log(p[pos] / q[pos])
    return out


def channel_capacity(confusion: Any, *, tol: float = CAPACITY_TOL, max_iter: int = CAPACITY_MAX_ITER) -> np.ndarray:
    """The capacity (bits) of each worker's channel true class → observed class.

    ``C_w = max_π I(y; ỹ_w)`` over input distributions π, with
    ``P(ỹ = k | y = c) = confusion[w, c, k]``.  Computed by the
    Blahut–Arimoto iteration, all workers at once: with ``q = πᵀA`` and
    ``D_c = KL(A[c] ‖ q)``, ``π_c ← π_c exp(D_c) / Σ``; the capacity lies
    between ``log Σ_c π_c exp(D_c)`` and ``max_c D_c`` (Blahut 1972), and a
    worker stops when the two are within ``tol`` bits.

    Parameters
    ----------
    confusion : array-like, shape (W, K_true, K_obs)
        Row-stochastic confusion matrices ``[worker, true, observed]`` (the
        layout of ``AggregationResult.confusion``).
    tol : float
        Gap between the bounds (bits) at which a worker stops (default 1e-9).
    max_iter : int
        Iteration cap (default 100,000; near-degenerate channels converge
        sublinearly).  A worker still open gets the midpoint of its bounds,
        at most half its gap away from the capacity.

    Returns
    -------
    ndarray of float64, shape (W,)
        In ``[0, log2 min(K_true, K_obs)]``: 0 for a spammer (all rows
        equal), ``log2 K`` for a permutation, ``1 − H(p)`` for a binary
        symmetric channel of error ``p``.

    Raises
    ------
    DataError
        A negative or non-finite entry, a row not summing to 1, a wrong shape.
    """
    a = _check_confusion(confusion)
    if not (isinstance(tol, (int, float)) and math.isfinite(tol) and tol > 0):
        raise UsageError(f"{param('tol')} must be a positive number, got {tol!r}")
    if isinstance(max_iter, bool) or not isinstance(max_iter, (int, np.integer)) or max_iter < 1:
        raise UsageError(f"{param('max_iter')} must be an integer >= 1, got {max_iter!r}")
    n_workers, k_in, _ = a.shape
    out = np.zeros(n_workers)
    pi = np.full((n_workers, k_in), 1.0 / k_in)
    open_ = np.arange(n_workers)
    tol_nats = tol * math.log(2.0)
    lower = upper = np.zeros(0)
    for _ in range(max_iter):
        if open_.size == 0:
            break
        aw, pw = a[open_], pi[open_]
        q = np.einsum("wc,wck->wk", pw, aw)
        d = _xlogy_ratio(aw, np.broadcast_to(q[:, None, :], aw.shape)).sum(axis=2)  # (w, c): KL(A[c] || q)
        # exp(D) only where the input is used: a zero π stays zero, and its D (possibly infinite: unused
        # output) never reaches the bounds through it
        top = d.max(axis=1, keepdims=True)
        weights = pw * np.exp(d - top)
        total = weights.sum(axis=1)
        lower = np.log(total) + top[:, 0]
        upper = np.max(np.where(pw > 0, d, -np.inf), axis=1)
        done = upper - lower <= tol_nats
        out[open_[done]] = lower[done]
        pi[open_] = weights / total[:, None]
        open_, lower, upper = open_[~done], lower[~done], upper[~done]
    out[open_] = 0.5 * (lower + upper)
    return np.maximum(out, 0.0) / math.log(2.0)


def raykar_yu_score(confusion: Any) -> np.ndarray:
    """Raykar & Yu's spammer score of each worker's confusion matrix.

    ``S = (1 / (K(K − 1))) Σ_{c < c'} Σ_k (A[c, k] − A[c', k])²`` with
    ``A[c, k] = P(answer k | true class c)`` (Raykar & Yu, "Eliminating
    spammers and ranking annotators for crowdsourced labeling tasks", JMLR
    13, 2012, the categorical score).  A spammer answers the same way
    whatever the truth: all rows equal, score 0.  A perfect worker or a
    perfect permutation scores 1.  For K = 2 it is ``(α + β − 1)²``
    (sensitivity α, specificity β).

    Parameters
    ----------
    confusion : array-like, shape (W, K, K)
        Row-stochastic ``[worker, true, observed]`` matrices.

    Returns
    -------
    ndarray of float64, shape (W,), in [0, 1]
        0 for one class (K = 1: no two rows to compare).

    Raises
    ------
    DataError
        A malformed confusion array (see :func:`channel_capacity`), or rows and columns of different sizes.
    """
    a = _check_confusion(confusion)
    k = a.shape[1]
    if a.shape[2] != k:
        raise DataError(f"the spammer score needs square confusion matrices, got {a.shape[1]} × {a.shape[2]}")
    if k < 2:
        return np.zeros(a.shape[0])
    # Σ_{c<c'} ||A_c − A_c'||² = K Σ_c ||A_c||² − ||Σ_c A_c||²  (half the sum over all ordered pairs)
    total = k * np.einsum("wck,wck->w", a, a) - np.einsum("wk,wk->w", a.sum(axis=1), a.sum(axis=1))
    return np.clip(total / (k * (k - 1)), 0.0, 1.0)


# ------------------------------------------------------------------------------------- the detector

#: The low-rank fit stops when ‖V Vᵀ − V' V'ᵀ‖_F / ‖V Vᵀ‖_F falls below this ...
FIT_TOL = 1e-5
#: ... or after this many iterations (one product with the filled matrix each).
FIT_MAX_ITER = 300
#: The fit's pairs are cut into this many chunks (at most; fewer for few pairs), shared by the threads.
FIT_CHUNKS = 16
#: Extra columns of the subspace iteration beyond the rank (a faster, steadier subspace).
OVERSAMPLE = 2
#: Co-labelling partners a worker needs to be judged (ALGORITHMS.md §7.1's guard rail).
MIN_PARTNERS = 5
#: Tasks a pair must share for its covariance to count.  At K = 2 an entry's standard error is about
#: 0.25/sqrt(n) against an honest pair's covariance of (2p - 1)(2p' - 1)/4 (0.06 for two workers at 0.75): at 10
#: shared tasks the noise exceeds the signal, and on a dense crowd of a thousand workers whose pairs share about
#: four tasks each, the few pairs that reach 10 by chance made the fit call 798 of 1,000 honest workers spammers.
#: At 20 such a crowd is skipped (and said so) instead.
MIN_SHARED = 20
#: A score at most this many times its permutation noise is consistent with a spammer's (see detect_spammers).
NOISE_RATIO = 3.0
#: The most multiply-adds the fit may cost (at :data:`FIT_MAX_ITER` iterations, :func:`fit_cost`) before
#: detect_spammers skips it, saying so.  Measured: 1.5-2.5e8 a second on one core of the build machine, so about a
#: minute at worst; a crowd of 100 workers sharing 4,674 pairs over 20 classes costs 2.5e10 (84 s, ds: 0.03 s),
#: over 40 classes 1.9e11 (254 s), while every real set of the benchmarks costs under 1e8 and the speed benchmark's
#: dense million answers (1,000 binary workers) 3.6e9.
MAX_FIT_COST = 1e10


@dataclass(frozen=True)
class SpammerScan:
    """What :func:`detect_spammers` found.

    Attributes
    ----------
    score : ndarray of float64, shape (W,)
        ``‖V_m‖_F``: the norm of worker m's K rows of the low-rank factor
        of the cross-covariances (NaN where skipped).  Near 0 for a spammer.
    flagged : ndarray of bool, shape (W,)
        True = spammer (never where skipped).
    skipped : ndarray of bool, shape (W,)
        Too few co-labelled partners to judge.
    rank : int
        Rank of the low-rank fit (K − 1; 0 when nobody was judged).
    n_iter : int
        Iterations of the fit.
    why : str
        One line: how the split was decided.
    noise : ndarray of float64, shape (W,)
        Each judged worker's permutation noise level (the RMS score of its answers permuted among its own
        tasks; NaN where skipped).
    cost : float
        The fit's cost bound, multiply-adds (:func:`fit_cost`; 0 where nothing was fitted).
    over_budget : bool
        The fit was not run: ``cost`` is over ``max_cost`` (every worker skipped; ``why`` says so).
    """

    score: np.ndarray
    flagged: np.ndarray
    skipped: np.ndarray
    rank: int
    n_iter: int
    why: str
    noise: np.ndarray | None = None
    cost: float = 0.0
    over_budget: bool = False

    @property
    def n_flagged(self) -> int:
        return int(self.flagged.sum())

    @property
    def n_skipped(self) -> int:
        return int(self.skipped.sum())


def _count(value: Any, name: str, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
        raise UsageError(f"{param(name)} must be an integer >= {low}, got {value!r}")
    return int(value)


def judged_workers(pairs: np.ndarray, n_tasks: np.ndarray, n_workers: int, min_partners: int,
                   min_shared: int) -> tuple[np.ndarray, np.ndarray]:
    """``(judged, kept)``: the workers with at least ``min_partners`` judged partners sharing at least
    ``min_shared`` tasks, and the mask of the pairs the fit uses (both judged, enough shared tasks).

    A fixed point: dropping a worker can drop its partners below ``min_partners``, so the rule is applied until
    nothing changes (at most once per worker dropped; each round is O(P)).
    """
    usable = n_tasks >= min_shared
    judged = np.ones(n_workers, dtype=bool)
    while True:
        kept = usable & judged[pairs[:, 0]] & judged[pairs[:, 1]]
        partners = np.bincount(pairs[kept].ravel(), minlength=n_workers)
        now = judged & (partners >= min_partners)
        if np.array_equal(now, judged):
            return judged, kept
        judged = now


def cross_covariances(joint: np.ndarray, n_tasks: np.ndarray) -> np.ndarray:
    """``Ĉ_p = joint_p / n_p − μ1 μ2ᵀ`` per pair, μ1 and μ2 the margins of the pair's joint (each worker's label
    frequencies on the tasks the two share), shape (P, K, K) float64."""
    r = joint.astype(np.float64) / n_tasks[:, None, None]
    return r - r.sum(axis=2)[:, :, None] * r.sum(axis=1)[:, None, :]


@dataclass(frozen=True)
class LowRankFit:
    """``V`` (M, K, r) = U (Λ − τ)₊^½ from the top Ritz pairs ``U`` (M, K, r), ``lam`` (r,) of the filled matrix
    and the shrinkage ``shrink`` = τ, after ``n_iter`` iterations (``converged`` when the change fell below the
    tolerance)."""

    v: np.ndarray
    u: np.ndarray
    lam: np.ndarray
    shrink: float
    n_iter: int
    converged: bool


def fit_cost(n_pairs: int, n_units: int, n_classes: int, max_iter: int = FIT_MAX_ITER) -> float:
    """Multiply-adds of :func:`fit_low_rank` at ``max_iter`` iterations, an upper bound known before it runs.

    Each iteration multiplies every observed block (K × K, both ways) by the subspace (width K + 1 at rank
    K − 1: :data:`OVERSAMPLE`), ``2 P K² (K + 1)``, and works on the M K × (K + 1) subspace (``V Vᵀ Q``, the QR,
    the Ritz vectors: about ``4 M K² (K + 1)``): O(P K³) per iteration -- a cubic in the classes, which is what
    makes many classes slow.
    """
    k = int(n_classes)
    width = k - 1 + OVERSAMPLE
    return float(max_iter) * (2.0 * n_pairs * k * k * width + 4.0 * n_units * k * k * width)


def fit_low_rank(pairs: np.ndarray, cov: np.ndarray, n_units: int, rank: int, rng: np.random.Generator, *,
                 tol: float = FIT_TOL, max_iter: int = FIT_MAX_ITER,
                 callback: Callable[[int, float], None] | None = None) -> LowRankFit:
    """Impute-and-truncate fit of ``Ĉ ≈ V Vᵀ`` (MK × MK, PSD of rank ``rank``) to the observed off-diagonal blocks.

    Each iteration: the filled matrix ``X`` (observed blocks from ``cov``,
    every other block -- the diagonal ones, the pairs not observed --
    from the current ``V Vᵀ``: ALGORITHMS.md §7.1's hard-impute) times the
    subspace ``Q`` (``rank`` + :data:`OVERSAMPLE` columns, warm-started: one
    product per iteration, :func:`crowdagg.kernels.spammers.apply_filled`,
    never the MK × MK matrix); the Rayleigh–Ritz pairs of ``Qᵀ X Q``; ``V =
    U_r (Λ_r − τ)₊^½`` from the ``rank`` largest; ``Q`` the orthonormal
    basis of ``X Q``.  Starts from ``V = 0`` (unknown blocks zero) and a
    Gaussian ``Q`` drawn from ``rng``.

    The shrinkage τ is the largest Ritz value past the rank -- the level
    of the noise eigenvalues -- as in soft-impute (Mazumder, Hastie &
    Tibshirani 2010).  Plain hard-impute (τ = 0) has no fixed point on
    sparse crowds: a worker whose blocks are mostly unknown feeds its own
    filled blocks, and its row of V grows without bound (web's eigenvalues
    grew from 7 to 16 over 3,000 iterations); with τ every such feedback
    loop contracts.  Negative Ritz values give 0 (the model's low-rank
    part ``A_m (D − ddᵀ) A_{m'}ᵀ`` is PSD).

    Parameters
    ----------
    pairs : ndarray of int, shape (P, 2)
        Observed blocks (a, b), a ≠ b, positions in ``[0, n_units)``.
    cov : ndarray of float64, shape (P, K, K)
        ``Ĉ_{ab}`` (block (b, a) is its transpose).
    n_units, rank : int
    rng : numpy Generator
    tol, max_iter : the stop rule (relative change of V Vᵀ in Frobenius norm).
    callback : callable(iteration, relative change), optional
        Called after each iteration (a progress display).
    """
    k = cov.shape[1]
    dim = n_units * k
    width = min(rank + OVERSAMPLE, dim)
    if width <= rank:
        raise DataError(f"a rank-{rank} fit needs more than {rank} rows, got {dim}")
    q, _ = np.linalg.qr(rng.standard_normal((dim, width)))
    q = np.ascontiguousarray(q)
    v = np.zeros((n_units, k, rank))
    u = np.zeros((n_units, k, rank))
    lam = np.zeros(rank)
    shrink = 0.0
    pairs = np.ascontiguousarray(pairs, dtype=np.int64)
    cov = np.ascontiguousarray(cov, dtype=np.float64)
    gram = np.zeros((rank, rank))
    # the pairs in a fixed number of chunks, each into its own output, added in chunk order: the threads share
    # the work and the bits do not depend on how many there are
    n_chunks = max(1, min(FIT_CHUNKS, len(pairs) // 4096, (64 << 20) // (8 * dim * width)))
    bounds = np.linspace(0, len(pairs), n_chunks + 1).astype(np.int64)
    parts = np.empty((n_chunks, n_units, k, width))
    n_iter, converged = 0, False
    with ThreadPoolExecutor(max(1, min(threads.count(), n_chunks))) as pool:
        while n_iter < max_iter:
            n_iter += 1
            vf = v.reshape(dim, rank)
            z = vf @ (vf.T @ q)  # the unknown blocks (and the observed ones, corrected below) from V Vᵀ
            q3 = q.reshape(n_units, k, width)

            def chunk(c: int, v: np.ndarray = v, q3: np.ndarray = q3) -> None:
                parts[c] = 0.0
                lo, hi = bounds[c], bounds[c + 1]
                apply_filled(pairs[lo:hi], cov[lo:hi], v, q3, parts[c])

            list(pool.map(chunk, range(n_chunks)))
            z += parts.sum(axis=0).reshape(dim, width)
            t = q.T @ z
            evals, evecs = np.linalg.eigh(0.5 * (t + t.T))
            order = np.argsort(-evals, kind="stable")
            evals, evecs = evals[order], evecs[:, order]
            lam = evals[:rank]
            shrink = max(float(evals[rank]), 0.0)  # the largest Ritz value past the rank: the noise's level
            uf = q @ evecs[:, :rank]
            v_new = uf * np.sqrt(np.maximum(lam - shrink, 0.0))
            q, _ = np.linalg.qr(z @ evecs)
            q = np.ascontiguousarray(q)
            # ||V'V'ᵀ − VVᵀ||_F² = ||V'ᵀV'||² + ||VᵀV||² − 2||VᵀV'||², all r × r
            gram_new = v_new.T @ v_new
            cross = vf.T @ v_new
            change2 = np.sum(gram_new ** 2) + np.sum(gram ** 2) - 2.0 * np.sum(cross ** 2)
            size = math.sqrt(float(np.sum(gram_new ** 2)))
            v = v_new.reshape(n_units, k, rank)
            u = uf.reshape(n_units, k, rank)
            gram = gram_new
            if callback is not None:
                callback(n_iter, math.sqrt(max(float(change2), 0.0)) / size if size else 0.0)
            if size == 0.0 or math.sqrt(max(float(change2), 0.0)) <= tol * size:
                converged = True
                break
    return LowRankFit(np.ascontiguousarray(v), np.ascontiguousarray(u), lam, shrink, n_iter, converged)


def two_means(scores: np.ndarray) -> int:
    """Exact 2-means of 1-D ``scores`` sorted ascending: the size of the low cluster (0 when all are equal).

    Every split between consecutive sorted values is tried (prefix sums: O(n)); the within-cluster sum of
    squares is smallest at the one returned (the first such split on a tie).
    """
    n = len(scores)
    if n < 2 or scores[0] == scores[-1]:
        return 0
    c1 = np.cumsum(scores)
    c2 = np.cumsum(scores ** 2)
    i = np.arange(1, n)
    left = c2[:-1] - c1[:-1] ** 2 / i
    right = (c2[-1] - c2[:-1]) - (c1[-1] - c1[:-1]) ** 2 / (n - i)
    sse = left + right
    sse[scores[1:] == scores[:-1]] = np.inf  # a split between equal scores is not a split
    return int(np.argmin(sse)) + 1


def _scan(n_workers: int, why: str, *, rank: int = 0, n_iter: int = 0, skipped: np.ndarray | None = None,
          score: np.ndarray | None = None, flagged: np.ndarray | None = None,
          noise: np.ndarray | None = None, cost: float = 0.0, over_budget: bool = False) -> SpammerScan:
    nan = np.full(n_workers, np.nan)
    return SpammerScan(
        score=nan if score is None else score,
        flagged=np.zeros(n_workers, dtype=bool) if flagged is None else flagged,
        skipped=np.ones(n_workers, dtype=bool) if skipped is None else skipped,
        rank=rank, n_iter=n_iter, why=why,
        noise=nan.copy() if noise is None else noise, cost=cost, over_budget=over_budget,
    )


def _warn_skipped(n: int, total: int, min_partners: int, min_shared: int) -> None:
    if n:
        warn(CrowdaggWarning(
            f"spammer detection skipped {n:,} of {total:,} workers with fewer than {min_partners} co-labelling "
            f"partners sharing {min_shared}+ tasks ({param('min_partners')}, {param('min_shared')})"))


def detect_spammers(data: AnnotationSet, *, engine: Any = None, min_partners: int = MIN_PARTNERS, min_shared: int = MIN_SHARED,
                    seed: int = 0, max_memory: memory.MaxMemory = None, max_cost: float | None = MAX_FIT_COST,
                    callback: Callable[[int, float], None] | None = None) -> SpammerScan:
    """Flag spammers from the cross-covariances of co-labelling workers (Traganitis & Giannakis, ICASSP 2021).

    Model.  With one-hot answers, the cross-covariance of workers m and m'
    over the tasks both answered is ``C_{mm'} = A_m (D − d dᵀ) A_{m'}ᵀ``
    (A_m = P(answer | truth) as [answer, truth], d the class prior, D =
    diag(d)).  A spammer's answers ignore the truth, ``A_m = s 1ᵀ``, so
    ``A_m (D − d dᵀ) = s (dᵀ − dᵀ) = 0``: every covariance with a spammer
    vanishes.  Stacked over the workers the MK × MK matrix is ``V Vᵀ``
    (rank ≤ K − 1, ``V_m = A_m (D − ddᵀ)^½``) off its block diagonal, and a
    spammer's K rows of V are 0 (ALGORITHMS.md §7.1).

    Steps.

    1. Statistics: the co-occurrence kernel on the engine
       (:func:`crowdagg.kernels.cooc.co_occurrence`); per co-labelled pair
       ``Ĉ = R/n − μ μ'ᵀ``, the margins μ, μ' taken over the shared tasks.
    2. Who is judged: pairs sharing ≥ ``min_shared`` tasks are observed;
       workers with ≥ ``min_partners`` such partners (among the judged: a
       fixed point) are judged, the others ``skipped`` (a warning counts
       them).
    3. The fit: :func:`fit_low_rank` (hard-impute, rank K − 1, unknown
       diagonal and missing blocks filled by the estimate; matrix-free).
    4. Score ``s_m = ‖V_m‖_F``; exact 2-means on the scores
       (:func:`two_means`): the low cluster is the spammer candidates.
    5. The guard: 2-means always splits, so a crowd without spammers would
       lose its weaker half.  Each judged worker's score is compared with
       its *permutation noise*: the RMS score of its own answers permuted
       among its own tasks -- a spammer by construction, with the same
       tasks, partners and label frequencies -- scored against the fitted
       subspace (exact: the mean over all permutations, no refit, no
       sampling; :func:`_permutation_noise`).  A worker of the low cluster
       is flagged when its score is at most :data:`NOISE_RATIO` (3) times
       its noise, i.e. when its covariances are what a spammer's would be;
       one above that is weak but informative and is kept.  A spammer's
       ratio is about 1 (its squared ratio is a quadratic form in its
       permuted answers over its mean, roughly χ² with (K − 1)² degrees of
       freedom over their number: above 9 with probability ~0.3% at K = 2,
       far less for larger K); an honest worker's grows with its signal
       and its answers (about 35 for the tutorial's honest workers).  When
       the upper cluster's median is within that bound too -- nobody
       co-varies with anyone beyond chance, a crowd of spammers only --
       every worker at its noise level is flagged, not the lower half.

    Parameters
    ----------
    data : AnnotationSet
    engine : engine of the block protocol, optional
        Over ``data`` (default ``LocalEngine(data)``): where the co-occurrence statistics and the per-answer terms
        of the permutation test are computed.
    min_partners : int
        Co-labelling partners a worker needs to be judged (default 5, ALGORITHMS.md §7.1's guard rail).
    min_shared : int
        Tasks a pair must share to count (default 20, :data:`MIN_SHARED` says why).
    seed : int
        Seeds the fit's starting subspace: same data and seed, same bits, any thread count.
    max_memory : int, float, str or None
        Memory limit for the up-front checks (default 80% of the available memory).
    max_cost : float or None
        The fit is skipped, every worker with it, when its cost bound (:func:`fit_cost`: O(pairs × K³)) is over
        this many multiply-adds (default :data:`MAX_FIT_COST`, about a minute); None: no limit.  Checked once the
        co-occurrence statistics are counted (their cost is that of one pass over the answers), before the fit.
    callback : callable(iteration, relative change), optional
        Called after each iteration of the fit (a progress display).

    Returns
    -------
    SpammerScan
        ``why`` says how the split was decided; it says so when more than half the judged workers are flagged.

    Raises
    ------
    ResourceError
        When the co-occurrence statistics or the fit would not fit in ``max_memory`` (checked before
        allocating).

    Warns
    -----
    CrowdaggWarning
        The count of skipped workers.
    """
    if not isinstance(data, AnnotationSet):
        raise UsageError(f"{param('data')} must be an AnnotationSet, got {type(data).__name__}")
    min_partners = _count(min_partners, "min_partners", 1)
    min_shared = _count(min_shared, "min_shared", 1)
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise UsageError(f"{param('seed')} must be an integer >= 0, got {seed!r}")
    if max_cost is not None and (isinstance(max_cost, bool) or not isinstance(max_cost, (int, float, np.number))
                                 or not max_cost >= 0):
        raise UsageError(f"{param('max_cost')} must be a number >= 0 or None, got {max_cost!r}")
    n_workers, k = data.n_workers, data.n_classes
    if n_workers == 0 or data.n_answers == 0:
        return _scan(n_workers, "no answers: nobody to judge")
    if k < 2:
        _warn_skipped(n_workers, n_workers, min_partners, min_shared)
        return _scan(n_workers, "one class: every answer is the same, so there is no covariance to judge by")
    engine = LocalEngine(data) if engine is None else engine
    stats = cooc.co_occurrence(engine, max_memory=max_memory)
    judged, kept = judged_workers(stats.pairs.astype(np.int64), stats.n_tasks, n_workers, min_partners,
                                  min_shared)
    skipped = ~judged
    m = int(judged.sum())
    cost = fit_cost(int(kept.sum()), m, k)
    if max_cost is not None and cost > max_cost:
        return _scan(n_workers, f"not run: its fit of {m:,} workers × {k} classes over {int(kept.sum()):,} "
                     f"co-labelled pairs costs up to {cost:.2g} multiply-adds (pairs × K³ × {FIT_MAX_ITER} iterations), "
                     f"over the budget of {max_cost:.2g}", cost=cost, over_budget=True)
    _warn_skipped(int(skipped.sum()), n_workers, min_partners, min_shared)
    if m == 0:
        return _scan(n_workers, f"no worker keeps {min_partners}+ partners sharing {min_shared}+ tasks among the workers "
                     "who do (a partner counts only if it is judged too): nobody judged",
                     skipped=skipped)
    rank = k - 1
    n_pairs = int(kept.sum())
    width = rank + OVERSAMPLE
    # per pair: its covariance and a copy, its answer-term record (2 (K + 1) r), pair codes, counts and key; the
    # subspaces and factors (a few M K width); the per-answer terms (n_answers r, the blocks' and the gathered)
    need = 8 * (n_pairs * (2 * k * k + 2 * (k + 1) * rank + 4) + 8 * m * k * width + 2 * data.n_answers * rank)
    memory.check(need, f"the low-rank fit of {m:,} workers × {k} classes over {n_pairs:,} co-labelled pairs "
                       f"and the permutation test over {data.n_answers:,} answers", max_memory)
    position = np.full(n_workers, -1, dtype=np.int64)
    position[judged] = np.arange(m)
    pairs = stats.pairs[kept].astype(np.int64)
    n_shared = stats.n_tasks[kept]
    joint = stats.joint[kept]
    cov = cross_covariances(joint, n_shared)
    rng = np.random.default_rng(seed)
    fit = fit_low_rank(position[pairs], cov, m, rank, rng, callback=callback)
    score_m = np.sqrt(np.einsum("mkr,mkr->m", fit.v, fit.v))
    noise_m = _permutation_noise(data, engine, fit, pairs, position, joint, n_shared)

    score = np.full(n_workers, np.nan)
    noise = np.full(n_workers, np.nan)
    score[judged] = score_m
    noise[judged] = noise_m
    flagged = np.zeros(n_workers, dtype=bool)
    ratio = np.divide(score_m, noise_m, out=np.zeros(m), where=noise_m > 0)  # noise 0: one label, score 0
    order = np.argsort(score_m, kind="stable")
    n_low = two_means(score_m[order])
    if n_low == 0:
        why = f"all {m:,} judged workers score {score_m[0]:.3g}: no split, nobody flagged"
        return _scan(n_workers, why, rank=rank, n_iter=fit.n_iter, skipped=skipped, score=score, noise=noise)
    low = order[:n_low]
    cut = 0.5 * (score_m[order[n_low - 1]] + score_m[order[n_low]])
    if np.median(ratio[order[n_low:]]) <= NOISE_RATIO:
        # Even the upper cluster scores as its own noise: no worker's answers co-vary with anyone's beyond chance
        # (a crowd of spammers only), so the split separates noise from noise; every worker at its noise level
        # is flagged, not the lower half of them.
        chosen = np.flatnonzero(ratio <= NOISE_RATIO)
        why = (f"the upper cluster of 2-means on the scores of {m:,} judged workers scores within {NOISE_RATIO:g}x "
               f"its permutation noise too (no worker co-varies with the others beyond chance): the {len(chosen):,} "
               "at their noise level are flagged")
    else:
        chosen = low[ratio[low] <= NOISE_RATIO]
        why = (f"2-means on the scores of {m:,} judged workers cuts at {cut:.3g}: {n_low:,} below, of whom "
               f"{len(chosen):,} score within {NOISE_RATIO:g}x their permutation noise (a spammer's level) and are "
               "flagged")
        if len(chosen) < n_low:
            why += f", {n_low - len(chosen):,} above it are kept"
    flagged[np.flatnonzero(judged)[chosen]] = True
    n_flag = len(chosen)
    if 2 * n_flag > m:
        why += f" -- more than half the judged workers ({n_flag:,} of {m:,}) are flagged"
    if not fit.converged:
        why += f" (the fit stopped at {fit.n_iter} iterations before its tolerance)"
    return SpammerScan(score, flagged, skipped, rank, fit.n_iter, why, noise, cost)


def fixed_point_maps(fit: LowRankFit, pairs: np.ndarray) -> np.ndarray:
    """``T`` (M, r, r): at the fit's fixed point ``V_m = B_m T_m``, ``B_m = Σ_{m'} Ĉ_{mm'} U_{m'}`` over m's
    observed partners (``pairs``: positions in the fit).

    The filled matrix X has ``X U = U Λ``; its row block m is ``B_m`` plus
    the filled blocks' ``V_m Σ_{m' unobserved or m} V_{m'}ᵀ U_{m'} = V_m
    G_m``, ``G_m = E − S_m`` with ``E = (Λ − τ)₊^½`` (``Σ_{all m'} V_{m'}ᵀ
    U_{m'} = E``) and ``S_m = Σ_{m' observed} V_{m'}ᵀ U_{m'}``.  With ``V_m
    = U_m E = (X U)_m Λ⁻¹ E``: ``V_m (I − G_m D) = B_m D``, ``D = Λ⁻¹ E``,
    so ``T_m = D (I − G_m D)⁺`` -- for any row block B, the score the fit
    would give a worker with that row.
    """
    m, _, rank = fit.v.shape
    e = np.sqrt(np.maximum(fit.lam - fit.shrink, 0.0))
    d = np.divide(e, fit.lam, out=np.zeros(rank), where=e > 0)
    h = np.einsum("mkr,mks->mrs", fit.v, fit.u)
    s = np.zeros((m, rank, rank))
    np.add.at(s, pairs[:, 0], h[pairs[:, 1]])
    np.add.at(s, pairs[:, 1], h[pairs[:, 0]])
    g = np.diag(e)[None] - s
    inner = np.eye(rank)[None] - g * d[None, None, :]
    return np.ascontiguousarray(d[None, :, None] * np.linalg.pinv(inner))


def _permutation_noise(data: AnnotationSet, engine: Any, fit: LowRankFit, pairs: np.ndarray,
                       position: np.ndarray, joint: np.ndarray, n_shared: np.ndarray) -> np.ndarray:
    """Each judged worker's permutation noise: the RMS score over all permutations of its answers among its tasks.

    Worker m's row block ``B_m = Σ_{m'} Ĉ_{mm'} U_{m'} = Σ_a e_{y_a} g_aᵀ``
    (:mod:`crowdagg.kernels.spammers`) scores ``‖B_m T_m‖_F`` against the
    fit (:func:`fixed_point_maps`).  With ``h_a = T_mᵀ g_a`` and π uniform over the permutations of m's n
    answers, ``E‖Σ_a e_{y_π(a)} h_aᵀ‖² = Σ_a ‖h_a‖² + ρ Σ_{a≠b} h_aᵀh_b``,
    ρ = P(two different answers share a label) = ``Σ_k f_k (n f_k − 1) /
    (n − 1)`` (f the label frequencies), and ``Σ_a h_a = 0`` (every pair's
    terms are centred), so the mean square is ``(1 − ρ) Σ_a ‖h_a‖²``:
    exact, no sampling.
    """
    n_workers = data.n_workers
    m, k, rank = fit.v.shape
    a, b = position[pairs[:, 0]], position[pairs[:, 1]]
    transform = fixed_point_maps(fit, position[pairs])
    n = n_shared.astype(np.float64)[:, None, None]
    terms = np.empty((len(pairs), 2, k + 1, rank))
    terms[:, 0, :k] = fit.u[b] / n
    terms[:, 1, :k] = fit.u[a] / n
    mu_2 = joint.sum(axis=1) / n[:, :, 0]  # w2's label frequencies on the shared tasks
    mu_1 = joint.sum(axis=2) / n[:, :, 0]
    terms[:, 0, k] = np.einsum("pk,pkr->pr", mu_2, fit.u[b]) / n[:, :, 0]
    terms[:, 1, k] = np.einsum("pk,pkr->pr", mu_1, fit.u[a]) / n[:, :, 0]
    keys = pairs[:, 0] * n_workers + pairs[:, 1]
    ranked, table = cooc.key_lookup(keys, n_workers * n_workers)
    _, outs = engine.map_reduce(answer_terms_block, TermParams(keys, ranked, table, terms), keep=True)
    g = np.ascontiguousarray(engine.gather(outs), dtype=np.float64)
    energy = null_energy(data.worker, position, g, transform, np.empty(m))
    judged = np.flatnonzero(position >= 0)
    counts = cooc.label_counts(engine)[judged].astype(np.float64)
    total = counts.sum(axis=1)
    same = np.einsum("mk,mk->m", counts, counts - 1.0) / np.maximum(total * (total - 1.0), 1.0)
    return np.sqrt(np.maximum(1.0 - same, 0.0) * energy)


__all__ = ["CAPACITY_MAX_ITER", "CAPACITY_TOL", "FIT_MAX_ITER", "FIT_TOL", "MIN_PARTNERS", "MIN_SHARED", "NOISE_RATIO",
           "MAX_FIT_COST", "LowRankFit", "SpammerScan", "channel_capacity", "cross_covariances", "detect_spammers", "fit_cost", "fit_low_rank",
           "fixed_point_maps",
           "judged_workers", "raykar_yu_score", "two_means"]
