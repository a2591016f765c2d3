"""Slow, obvious reference implementations used to check the fast kernels."""

from __future__ import annotations

import math

import numpy as np


def soft_mv(task, label, n_tasks, n_classes):
    votes = np.zeros((n_tasks, n_classes))
    for t, y in zip(task, label):
        votes[t, y] += 1
    return votes / votes.sum(axis=1, keepdims=True)


def m_step(task, worker, label, post, n_workers, smoothing, one_coin=False):
    n_classes = post.shape[1]
    counts = np.zeros((n_workers, n_classes, n_classes))  # [w, true, observed]
    for t, w, y in zip(task, worker, label):
        for k in range(n_classes):
            counts[w, k, y] += post[t, k]
    prior = post.sum(axis=0) + smoothing
    prior = np.maximum(prior, 1e-10)
    prior /= prior.sum()
    if one_coin:
        conf = np.zeros_like(counts)
        for w in range(n_workers):
            p = (np.trace(counts[w]) + smoothing) / (counts[w].sum() + 2 * smoothing)
            p = min(max(p, 1e-10), 1 - 1e-10)
            for k in range(n_classes):
                for j in range(n_classes):
                    conf[w, k, j] = p if k == j else (1 - p) / (n_classes - 1)
        return prior, conf
    conf = np.maximum(counts + smoothing, 1e-10)
    conf /= conf.sum(axis=2, keepdims=True)
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


def dawid_skene(task, worker, label, n_tasks, n_workers, n_classes, n_iter, smoothing=0.0, one_coin=False):
    """Plain DS EM, soft-MV start, fixed number of iterations.

    Returns posteriors of the last E-step, the parameters of the M-step that
    follows it, and the log-likelihood trace.
    """
    post = soft_mv(task, label, n_tasks, n_classes)
    prior, conf = m_step(task, worker, label, post, n_workers, smoothing, one_coin)
    trace = []
    for _ in range(n_iter):
        post, ll = e_step(task, worker, label, prior, conf, n_tasks)
        prior, conf = m_step(task, worker, label, post, n_workers, smoothing, one_coin)
        trace.append(ll)
    return post, prior, conf, trace
