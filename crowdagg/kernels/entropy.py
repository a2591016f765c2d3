r"""Minimax conditional entropy kernels: the per-worker and per-task M-steps (batched L-BFGS) and the E-step.

The model (:mod:`crowdagg.methods.entropy.minimax`): an answer ``l`` of
worker ``j`` on task ``i`` of true class ``k`` has probability
``softmax_l(sigma[j, k, :] + tau[i, k, :])``.  Every M-step problem -- one
worker's ``sigma[j]`` given the ``tau`` of its tasks, or one task's
``tau[i]`` given the ``sigma`` of its workers -- has the same form: a
K × K matrix ``x`` minimising

.. math:: f(x) = -\sum_{e} \sum_k q_{i_e}(k) \big[(x + O_e)[k, l_e] - \log\sum_{l'} e^{(x + O_e)[k, l']}\big]
          + \tfrac{\lambda}{2} \lVert x \rVert^2

over the group's answers ``e`` (``O_e`` the other side's matrix of the
answer, ``q`` the task's posterior), a smooth strictly convex problem
(:func:`_group_fg` gives ``f`` and its gradient).  :func:`_solve_groups`
runs a small L-BFGS on each group in turn, from the group's current
matrix: at most ``max_iter`` iterations, stopped as minFunc stops (the
gradient's largest entry at most ``opt_tol``, or the step's, or the
objective's change, at most ``prog_tol``), the first step scaled to
``min(1, 1/Σ|g|)`` as minFunc scales it, with an Armijo backtracking line
search (quadratic interpolation, halving at least) in place of minFunc's
Wolfe search.  :func:`_e_step` gives each task's posterior under a uniform
class prior.

Arrays: answers sorted by task (``task_ptr`` (n_tasks + 1,), ``task``,
``worker``, ``label`` (L,)); a group is ``ptr[g]:ptr[g+1]`` of ``edge``
(answer indices: the identity for tasks, ``worker_order`` for workers);
matrices ``(n, K, K)`` C-contiguous float64, posteriors ``(n_tasks, K)``.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .softmax import softmax_into


@njit(cache=True, nogil=True)
def _group_fg(x, lo, hi, edge, other_id, task, label, other, post, lam, k, grad):  # pragma: no cover - compiled
    """``f(x)`` of the group ``edge[lo:hi]`` (see the module docstring); its gradient written into ``grad`` (K²,).

    ``x`` is the group's matrix flattened row-major (``x[a * K + b]``);
    ``other[other_id[e]]`` is answer ``e``'s other matrix, ``post[task[e]]``
    its task's posterior.  A class of posterior 0 adds nothing (skipped).
    """
    f = 0.0
    ex = np.empty(k)
    for q in range(k * k):
        grad[q] = lam * x[q]
        f += 0.5 * lam * x[q] * x[q]
    for p in range(lo, hi):
        e = edge[p]
        o = other_id[e]
        i = task[e]
        lab = label[e]
        for a in range(k):
            w = post[i, a]
            if w == 0.0:
                continue
            mx = -np.inf
            for b in range(k):
                m = x[a * k + b] + other[o, a, b]
                if m > mx:
                    mx = m
            s = 0.0
            for b in range(k):
                ex[b] = np.exp(x[a * k + b] + other[o, a, b] - mx)
                s += ex[b]
            f -= w * (x[a * k + lab] + other[o, a, lab] - mx - np.log(s))
            ws = w / s
            for b in range(k):
                grad[a * k + b] += ws * ex[b]
            grad[a * k + lab] -= w
    return f


@njit(cache=True, nogil=True)
def _max_abs(v):  # pragma: no cover - compiled
    m = 0.0
    for q in range(v.shape[0]):
        if abs(v[q]) > m:
            m = abs(v[q])
    return m


@njit(cache=True, nogil=True)
def _solve_groups(ptr, edge, other_id, task, label, params, other, post, lam, max_iter, opt_tol,
                  prog_tol, g0, g1):  # pragma: no cover - compiled
    """Minimise each group ``g0 <= g < g1``'s :func:`_group_fg` by L-BFGS from ``params[g]``, written back in
    place (the groups are independent: threads may solve disjoint ranges at once).

    ``lam`` (n_groups,) each group's L2 weight.  Returns how many groups
    used all ``max_iter`` iterations without meeting a stopping test (the
    authors' M-step is truncated at 25 on purpose: a count, not an error).
    """
    k = params.shape[1]
    n = k * k
    memory = max(max_iter, 1)
    x = np.empty(n)
    g = np.empty(n)
    xn = np.empty(n)
    gn = np.empty(n)
    d = np.empty(n)
    s_hist = np.zeros((memory, n))
    y_hist = np.zeros((memory, n))
    rho = np.zeros(memory)
    alpha = np.zeros(memory)
    capped = 0
    for grp in range(g0, g1):
        lo = ptr[grp]
        hi = ptr[grp + 1]
        for a in range(k):
            for b in range(k):
                x[a * k + b] = params[grp, a, b]
        f = _group_fg(x, lo, hi, edge, other_id, task, label, other, post, lam[grp], k, g)
        if _max_abs(g) <= opt_tol:
            continue
        n_pairs = 0
        head = 0
        stopped = False
        for it in range(max_iter):
            if n_pairs == 0:
                gsum = 0.0
                for q in range(n):
                    d[q] = -g[q]
                    gsum += abs(g[q])
                t = min(1.0, 1.0 / gsum) if it == 0 else 1.0
            else:  # the two-loop recursion, newest pair first, scaled by s'y / y'y of the newest
                for q in range(n):
                    d[q] = -g[q]
                for r in range(n_pairs):
                    idx = (head - 1 - r) % memory
                    dot = 0.0
                    for q in range(n):
                        dot += s_hist[idx, q] * d[q]
                    alpha[idx] = rho[idx] * dot
                    for q in range(n):
                        d[q] -= alpha[idx] * y_hist[idx, q]
                newest = (head - 1) % memory
                yy = 0.0
                for q in range(n):
                    yy += y_hist[newest, q] * y_hist[newest, q]
                gamma = 1.0 / (rho[newest] * yy)
                for q in range(n):
                    d[q] *= gamma
                for r in range(n_pairs - 1, -1, -1):
                    idx = (head - 1 - r) % memory
                    dot = 0.0
                    for q in range(n):
                        dot += y_hist[idx, q] * d[q]
                    beta = rho[idx] * dot
                    for q in range(n):
                        d[q] += (alpha[idx] - beta) * s_hist[idx, q]
                t = 1.0
            gtd = 0.0
            for q in range(n):
                gtd += g[q] * d[q]
            if gtd > -prog_tol:  # not a descent direction worth taking: minFunc stops here too
                stopped = True
                break
            fn = 0.0
            armijo = False
            for _ls in range(40):
                for q in range(n):
                    xn[q] = x[q] + t * d[q]
                fn = _group_fg(xn, lo, hi, edge, other_id, task, label, other, post, lam[grp], k, gn)
                if fn <= f + 1e-4 * t * gtd:
                    armijo = True
                    break
                denom = 2.0 * (fn - f - gtd * t)
                tq = -gtd * t * t / denom if denom > 0 else 0.5 * t
                t = min(max(tq, 0.1 * t), 0.5 * t)
            if not armijo and not fn < f:  # no decrease found: x is as good as this search gets
                stopped = True
                break
            sy = 0.0
            step = 0.0
            for q in range(n):
                s_q = xn[q] - x[q]
                y_q = gn[q] - g[q]
                s_hist[head, q] = s_q
                y_hist[head, q] = y_q
                sy += s_q * y_q
                if abs(s_q) > step:
                    step = abs(s_q)
            if sy > 1e-10:  # keep the pair only where the curvature is positive
                rho[head] = 1.0 / sy
                head = (head + 1) % memory
                n_pairs = min(n_pairs + 1, memory)
            change = abs(fn - f)
            for q in range(n):
                x[q] = xn[q]
                g[q] = gn[q]
            f = fn
            if _max_abs(g) <= opt_tol or step <= prog_tol or change < prog_tol:
                stopped = True
                break
        if not stopped:
            capped += 1
        for a in range(k):
            for b in range(k):
                params[grp, a, b] = x[a * k + b]
    return capped


@njit(cache=True, nogil=True)
def _e_step(task_ptr, worker, label, sigma, tau, post):  # pragma: no cover - compiled
    """Each task's posterior (uniform class prior) into ``post`` (n_tasks, K), in place; returns the largest
    change of an entry.  A task without answers gets 1/K."""
    n, k = post.shape
    lp = np.empty(k)
    change = 0.0
    for t in range(n):
        for a in range(k):
            lp[a] = 0.0
        for e in range(task_ptr[t], task_ptr[t + 1]):
            j = worker[e]
            lab = label[e]
            for a in range(k):
                mx = -np.inf
                for b in range(k):
                    m = sigma[j, a, b] + tau[t, a, b]
                    if m > mx:
                        mx = m
                s = 0.0
                for b in range(k):
                    s += np.exp(sigma[j, a, b] + tau[t, a, b] - mx)
                lp[a] += sigma[j, a, lab] + tau[t, a, lab] - mx - np.log(s)
        softmax_into(lp, lp)
        for a in range(k):
            v = lp[a]
            if abs(v - post[t, a]) > change:
                change = abs(v - post[t, a])
            post[t, a] = v
    return change
