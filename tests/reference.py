"""Slow, obvious reference implementations used to check the fast kernels.

Written from the equations (ALGORITHMS.md §2), not from the package: the
M-step is the textbook MAP update with a symmetric Dirichlet (full
confusion) or Beta (one-coin) prior and has no floor, so it is compared
with the package at smoothing > 0 only; the floor used at smoothing 0 is
checked by a hand-computed example in ``test_aggregators``.
"""

from __future__ import annotations

import math

import numpy as np


def soft_mv(task, label, n_tasks, n_classes):
    votes = np.zeros((n_tasks, n_classes))
    for t, y in zip(task, label):
        votes[t, y] += 1
    total = votes.sum(axis=1, keepdims=True)
    return np.divide(votes, total, out=np.zeros_like(votes), where=total > 0)


def m_step(task, worker, label, post, n_workers, smoothing, one_coin=False):
    """MAP M-step: prior_k ∝ s + Σ_n q_nk; A_w[k, j] ∝ s + Σ q_nk [y = j]; one-coin p_w = (c_w + s/K)/(n_w + s)."""
    n_classes = post.shape[1]
    counts = np.zeros((n_workers, n_classes, n_classes))  # [w, true, observed]
    for t, w, y in zip(task, worker, label):
        for k in range(n_classes):
            counts[w, k, y] += post[t, k]
    prior = post.sum(axis=0) + smoothing
    prior = prior / prior.sum()
    conf = np.zeros_like(counts)
    for w in range(n_workers):
        if one_coin:
            answers = counts[w].sum()
            p = (np.trace(counts[w]) + smoothing / n_classes) / (answers + smoothing)
            for k in range(n_classes):
                for j in range(n_classes):
                    conf[w, k, j] = p if k == j else (1 - p) / (n_classes - 1)
        else:
            for k in range(n_classes):
                row = counts[w, k] + smoothing
                conf[w, k] = row / row.sum()
    return prior, conf


def e_step(task, worker, label, prior, conf, n_tasks):
    n_classes = prior.shape[0]
    logp = np.tile(np.log(prior), (n_tasks, 1))
    for t, w, y in zip(task, worker, label):
        for k in range(n_classes):
            logp[t, k] += math.log(conf[w, k, y])
    ll = 0.0
    post = np.zeros_like(logp)
    for t in range(n_tasks):
        m = logp[t].max()
        z = sum(math.exp(v - m) for v in logp[t])
        ll += m + math.log(z)
        post[t] = [math.exp(v - m) / z for v in logp[t]]
    return post, ll


def dawid_skene(task, worker, label, n_tasks, n_workers, n_classes, n_iter, smoothing, one_coin=False):
    """Plain DS EM: soft-MV start, then ``n_iter`` times (M-step, E-step).

    The parameters start from one M-step on the vote shares and are scored
    by an E-step; each iteration is an M-step followed by an E-step.
    Returns the last E-step's posteriors, the parameters it used, and the
    log-likelihood after each iteration.
    """
    post = soft_mv(task, label, n_tasks, n_classes)
    prior, conf = m_step(task, worker, label, post, n_workers, smoothing, one_coin)
    post, _ = e_step(task, worker, label, prior, conf, n_tasks)
    trace = []
    for _ in range(n_iter):
        prior, conf = m_step(task, worker, label, post, n_workers, smoothing, one_coin)
        post, ll = e_step(task, worker, label, prior, conf, n_tasks)
        trace.append(ll)
    return post, prior, conf, trace
