r"""Numba kernels of coupled CPD moment matching (:mod:`crowdagg.methods.moments.cpd`): one AO-ADMM sweep over the
workers, the prior block's normal equations and the objective, all from the sparse lists of kept pairs and triples.

The model (ALGORITHMS.md §4.1): worker m's confusion ``A[m]`` (K_observed ×
K_true, columns on the simplex), the class prior ``d``; first-order moments
:math:`\mu_m = A_m d`, second-order :math:`R_{mm'} = A_m D A_{m'}^T`
(``D = diag(d)``), third-order :math:`T_{mm'm''} = [[D; A_m, A_{m'},
A_{m''}]]`.  The objective, halved squared residuals summed over the
workers, the kept pairs and the kept triples:

.. math::

    f = \tfrac12 \sum_m \|\hat\mu_m - A_m d\|^2
      + \tfrac12 \sum_{(i,j)} \|\hat R_{ij} - A_i D A_j^T\|_F^2
      + \tfrac12 \sum_{(i,j,l)} \|\hat T_{ijl} - [[D; A_i, A_j, A_l]]\|_F^2

With every block but ``A[i]`` fixed, ``f`` is the quadratic
:math:`\tfrac12 \mathrm{tr}(A_i G_i A_i^T) - \mathrm{tr}(A_i B_i^T) +
\mathrm{const}` with (a pair's :math:`\hat R` oriented with i's answers on
its rows, a triple's mode-i unfolding :math:`\hat T_{(i)}` against the
Khatri--Rao product of the other two)

.. math::

    G_i = d d^T + D \Big(\sum_{j} A_j^T A_j + \sum_{(j,l)} (A_j^T A_j) * (A_l^T A_l)\Big) D, \qquad
    B_i = \hat\mu_i d^T + \Big(\sum_j \hat R_{ij} A_j + \sum_{(j,l)} \hat T_{(i)} (A_j \odot A_l)\Big) D

so a sweep (Gauss--Seidel over the workers, each block once, the next
block seeing the new one) builds ``G_i``, ``B_i`` from worker i's own
pairs and triples -- ``O(K^3)`` a pair, ``O(K^4)`` a triple -- and runs the
inner ADMM of Huang, Sidiropoulos & Liavas (2016) on it, as
``tensorly.solvers.admm.admm`` does for ``constrained_parafac`` (``ρ =
tr(G)/K``; a proximal weight ``prox`` towards the block's previous value),
with the columns projected on the simplex as
``tensorly.tenalg.proximal.simplex_prox`` does.  A block's update is kept
only if it does not raise the block's quadratic (ten ADMM steps need not
reach the block's minimum): so each sweep leaves ``f`` where it was or
lower.  The tests check every kernel against tensorly (``unfold``,
``khatri_rao``, ``cp_to_tensor``, ``admm``) on the same numbers.

Arrays: ``pairs`` (P, 2) and ``triples`` (T, 3) int worker codes in
increasing order; ``R`` (P, K, K) and ``T`` (T, K, K, K) float64, the
empirical joint distributions indexed by the members' answers in that
order; ``pair_ptr``/``pair_of`` and ``trip_ptr``/``trip_of``: for worker i,
``pair_of[pair_ptr[i]:pair_ptr[i+1]]`` are the ids of its pairs (CSR).
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def simplex_columns(x):  # pragma: no cover - compiled
    """Each column of ``x`` (K, n) projected on the unit simplex (Held, Wolfe & Crowder 1974; the sort-based rule of
    ``tensorly.tenalg.proximal.simplex_prox``), as a new array."""
    k, n = x.shape
    out = np.empty_like(x)
    for c in range(n):
        s = np.sort(x[:, c])[::-1]
        cum = 0.0
        theta = 0.0
        for r in range(k):
            cum += s[r]
            t = (cum - 1.0) / (r + 1)
            if s[r] > t:
                theta = t
        for r in range(k):
            out[r, c] = max(x[r, c] - theta, 0.0)
    return out


@njit(cache=True, nogil=True)
def _cholesky(a):  # pragma: no cover - compiled
    """The lower Cholesky factor of the symmetric positive definite ``a`` (a small K × K: no LAPACK call)."""
    k = a.shape[0]
    low = np.zeros_like(a)
    for i in range(k):
        for j in range(i + 1):
            s = a[i, j]
            for q in range(j):
                s -= low[i, q] * low[j, q]
            if i == j:
                low[i, i] = np.sqrt(max(s, 1e-300))
            else:
                low[i, j] = s / low[j, j]
    return low


@njit(cache=True, nogil=True)
def _cho_solve(low, rhs):  # pragma: no cover - compiled
    """``(L Lᵀ)⁻¹ rhs`` for the Cholesky factor ``low`` and ``rhs`` (K, n)."""
    k, n = rhs.shape
    y = np.empty_like(rhs)
    for c in range(n):
        for i in range(k):
            s = rhs[i, c]
            for q in range(i):
                s -= low[i, q] * y[q, c]
            y[i, c] = s / low[i, i]
        for i in range(k - 1, -1, -1):
            s = y[i, c]
            for q in range(i + 1, k):
                s -= low[q, i] * y[q, c]
            y[i, c] = s / low[i, i]
    return y


@njit(cache=True, nogil=True)
def block_quadratic(a, g, b):  # pragma: no cover - compiled
    """``½ tr(A G Aᵀ) − tr(A Bᵀ)``: the objective as a function of one block, less a constant."""
    k_obs, k = a.shape
    f = 0.0
    for r in range(k_obs):
        for p in range(k):
            ga = 0.0
            for q in range(k):
                ga += g[p, q] * a[r, q]
            f += a[r, p] * (0.5 * ga - b[r, p])
    return f


@njit(cache=True, nogil=True)
def admm_block(g, b, a, dual, prox, inner_iter, inner_tol):  # pragma: no cover - compiled
    """The inner ADMM on one block: ``argmin ½ tr(A G Aᵀ) − tr(A Bᵀ) + prox/2 ‖A − a‖²`` over column-stochastic A.

    Huang, Sidiropoulos & Liavas (2016), as ``tensorly.solvers.admm.admm``
    with ``UtU = G + prox I``, ``UtM = B + prox a``, ``simplex=1``: ``ρ =
    tr(UtU)/K``; ``Φ = (UtU + ρI)⁻¹ (UtM + ρ(A + U))ᵀ``, ``A = Π(Φᵀ − U)``,
    ``U += A − Φᵀ``, stopping after ``inner_iter`` steps or when both
    residuals are below ``inner_tol`` (tensorly's rule).  ``a`` (K_obs, K)
    is the start; ``dual`` (K_obs, K) the scaled dual, updated in place.
    Returns the new block (a new array) and the steps taken.
    """
    k_obs, k = a.shape
    utu = g.copy()
    rho = 0.0
    for p in range(k):
        utu[p, p] += prox
        rho += utu[p, p]
    rho /= k
    lhs = utu.copy()
    for p in range(k):
        lhs[p, p] += rho
    low = _cholesky(lhs)
    x = a.copy()
    steps = 0
    for _ in range(inner_iter):
        steps += 1
        rhs = np.empty((k, k_obs))
        for p in range(k):
            for r in range(k_obs):
                rhs[p, r] = b[r, p] + prox * a[r, p] + rho * (x[r, p] + dual[r, p])
        phi = _cho_solve(low, rhs)  # (K, K_obs)
        arg = np.empty((k_obs, k))
        for r in range(k_obs):
            for p in range(k):
                arg[r, p] = phi[p, r] - dual[r, p]
        x_old = x
        x = simplex_columns(arg)
        dres = 0.0
        pres = 0.0
        xn = 0.0
        un = 0.0
        for r in range(k_obs):
            for p in range(k):
                res = x[r, p] - phi[p, r]
                dual[r, p] += res
                dres += res * res
                pres += (x[r, p] - x_old[r, p]) ** 2
                xn += x[r, p] ** 2
                un += dual[r, p] ** 2
        if dres < inner_tol * inner_tol * xn and pres < inner_tol * inner_tol * un:
            break
    return x, steps


@njit(cache=True, nogil=True)
def block_terms(i, conf, gram, prior, mu, pairs, R, pair_ptr, pair_of, triples, T, trip_ptr,
                trip_of):  # pragma: no cover - compiled
    """``(G_i, B_i)`` of worker ``i`` (module notes) from its own pairs and triples and the others' blocks.

    ``conf`` (W, K_obs, K) the blocks, ``gram`` (W, K, K) their ``AᵀA``,
    ``prior`` (K,), ``mu`` (W, K_obs) the first-order moments.
    """
    k = prior.shape[0]
    g = np.zeros((k, k))
    b = np.zeros((k, k))
    # second order: D (Σ AⱼᵀAⱼ) D and (Σ R̂ᵢⱼ Aⱼ) D
    for e in range(pair_ptr[i], pair_ptr[i + 1]):
        p = pair_of[e]
        first = pairs[p, 0] == i
        j = pairs[p, 1] if first else pairs[p, 0]
        for s in range(k):
            for t in range(k):
                g[s, t] += gram[j, s, t]
        for x in range(k):
            for y in range(k):
                v = R[p, x, y] if first else R[p, y, x]  # rows: i's answer
                for t in range(k):
                    b[x, t] += v * conf[j, y, t]
    # third order: D (Σ (AⱼᵀAⱼ) ∗ (AₗᵀAₗ)) D and (Σ T̂₍ᵢ₎ (Aⱼ ⊙ Aₗ)) D
    for e in range(trip_ptr[i], trip_ptr[i + 1]):
        q = trip_of[e]
        u0, u1, u2 = triples[q, 0], triples[q, 1], triples[q, 2]
        pos = 0 if u0 == i else (1 if u1 == i else 2)
        j = u1 if pos == 0 else u0
        m = u1 if pos == 2 else u2
        for s in range(k):
            for t in range(k):
                g[s, t] += gram[j, s, t] * gram[m, s, t]
        for x in range(k):
            for y in range(k):
                for z in range(k):
                    v = T[q, x, y, z]
                    if v == 0.0:
                        continue
                    if pos == 0:
                        a, bj, bm = x, y, z
                    elif pos == 1:
                        a, bj, bm = y, x, z
                    else:
                        a, bj, bm = z, x, y
                    for t in range(k):
                        b[a, t] += v * conf[j, bj, t] * conf[m, bm, t]
    for s in range(k):
        for t in range(k):
            g[s, t] = prior[s] * g[s, t] * prior[t] + prior[s] * prior[t]
    for x in range(k):
        for t in range(k):
            b[x, t] = b[x, t] * prior[t] + mu[i, x] * prior[t]
    return g, b


@njit(cache=True, nogil=True)
def sweep(conf, gram, dual, prior, mu, order, pairs, R, pair_ptr, pair_of, triples, T, trip_ptr, trip_of,
          prox, inner_iter, inner_tol):  # pragma: no cover - compiled
    """One Gauss--Seidel sweep: each worker of ``order`` in turn, its block updated in place (``conf``, ``gram``,
    ``dual``) when the ADMM's result does not raise its quadratic.

    Returns ``Σ_i ‖A_i^new − A_i‖₁``.
    """
    change = 0.0
    k = prior.shape[0]
    for i in order:
        g, b = block_terms(i, conf, gram, prior, mu, pairs, R, pair_ptr, pair_of, triples, T, trip_ptr, trip_of)
        old = conf[i].copy()
        new, _ = admm_block(g, b, old, dual[i], prox, inner_iter, inner_tol)
        if block_quadratic(new, g, b) > block_quadratic(old, g, b):
            continue
        for r in range(k):
            for t in range(k):
                change += abs(new[r, t] - old[r, t])
        conf[i] = new
        for s in range(k):
            for t in range(k):
                acc = 0.0
                for r in range(k):
                    acc += new[r, s] * new[r, t]
                gram[i, s, t] = acc
    return change


@njit(cache=True, nogil=True)
def prior_terms(conf, gram, mu, active, pairs, R, triples, T):  # pragma: no cover - compiled
    """``(G_d, b_d)``: the objective as a function of the prior is ``½ dᵀ G_d d − b_dᵀ d + const``.

    ``G_d = Σ_m AₘᵀAₘ + Σ_pairs (AᵢᵀAᵢ) ∗ (AⱼᵀAⱼ) + Σ_triples (AᵢᵀAᵢ) ∗ (AⱼᵀAⱼ) ∗ (AₗᵀAₗ)`` (the Grams of the
    Khatri--Rao products), ``b_d = Σ_m Aₘᵀ μ̂ₘ + Σ_pairs diag(Aᵢᵀ R̂ Aⱼ) + Σ_triples T̂ ×₁ Aᵢ ×₂ Aⱼ ×₃ Aₗ`` (its
    diagonal); the first-order sums over the ``active`` workers only.
    """
    w, k_obs, k = conf.shape
    g = np.zeros((k, k))
    b = np.zeros(k)
    for m in range(w):
        if not active[m]:
            continue
        for s in range(k):
            for t in range(k):
                g[s, t] += gram[m, s, t]
            for x in range(k_obs):
                b[s] += conf[m, x, s] * mu[m, x]
    for p in range(pairs.shape[0]):
        i, j = pairs[p, 0], pairs[p, 1]
        for s in range(k):
            for t in range(k):
                g[s, t] += gram[i, s, t] * gram[j, s, t]
        for x in range(k_obs):
            for y in range(k_obs):
                v = R[p, x, y]
                if v == 0.0:
                    continue
                for t in range(k):
                    b[t] += v * conf[i, x, t] * conf[j, y, t]
    for q in range(triples.shape[0]):
        i, j, m = triples[q, 0], triples[q, 1], triples[q, 2]
        for s in range(k):
            for t in range(k):
                g[s, t] += gram[i, s, t] * gram[j, s, t] * gram[m, s, t]
        for x in range(k_obs):
            for y in range(k_obs):
                for z in range(k_obs):
                    v = T[q, x, y, z]
                    if v == 0.0:
                        continue
                    for t in range(k):
                        b[t] += v * conf[i, x, t] * conf[j, y, t] * conf[m, z, t]
    return g, b


@njit(cache=True, nogil=True)
def objective(conf, prior, mu, active, pairs, R, triples, T):  # pragma: no cover - compiled
    """``(f₁, f₂, f₃)``: the halved squared residuals of the first-, second- and third-order terms (module notes),
    the model's entries reconstructed one at a time (no K³ table per triple)."""
    w, k_obs, k = conf.shape
    f1 = 0.0
    for m in range(w):
        if not active[m]:
            continue
        for x in range(k_obs):
            model = 0.0
            for t in range(k):
                model += conf[m, x, t] * prior[t]
            f1 += (mu[m, x] - model) ** 2
    f2 = 0.0
    for p in range(pairs.shape[0]):
        i, j = pairs[p, 0], pairs[p, 1]
        for x in range(k_obs):
            for y in range(k_obs):
                model = 0.0
                for t in range(k):
                    model += prior[t] * conf[i, x, t] * conf[j, y, t]
                f2 += (R[p, x, y] - model) ** 2
    f3 = 0.0
    for q in range(triples.shape[0]):
        i, j, m = triples[q, 0], triples[q, 1], triples[q, 2]
        for x in range(k_obs):
            for y in range(k_obs):
                for z in range(k_obs):
                    model = 0.0
                    for t in range(k):
                        model += prior[t] * conf[i, x, t] * conf[j, y, t] * conf[m, z, t]
                    f3 += (T[q, x, y, z] - model) ** 2
    return 0.5 * f1, 0.5 * f2, 0.5 * f3


__all__ = ["admm_block", "block_quadratic", "block_terms", "objective", "prior_terms", "simplex_columns", "sweep"]
