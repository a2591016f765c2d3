"""Slow pure-Python references for belief propagation (tests only): the messages by loops over edges, the exact
posterior by enumerating every labelling."""

from __future__ import annotations

import itertools
import math

import numpy as np
from scipy.special import betaln


def worker_messages(data, tmsg, old, theta, logw, damping=0.0, damp=False):
    """Worker→task messages per answer (task order): exact leave-one-out, each product recomputed."""
    k = data.n_classes
    new = np.empty_like(tmsg)
    by_worker: dict[int, list[int]] = {}
    for e in range(data.n_answers):
        by_worker.setdefault(int(data.worker[e]), []).append(e)
    for edges in by_worker.values():
        for i in edges:
            lp = np.array([logw[g] + sum(math.log(sum(tmsg[j, z] * theta[g, z, data.label[j]] for z in range(k)))
                                         for j in edges if j != i) for g in range(len(logw))])
            lp -= lp.max()
            m = np.array([sum(math.exp(lp[g]) * theta[g, z, data.label[i]] for g in range(len(logw)))
                          for z in range(k)])
            m /= m.sum()
            new[i] = (1 - damping) * m + damping * old[i] if damp else m
    return new


def task_messages(data, wmsg, clamp):
    """Task→worker messages per answer (task order) and beliefs: products of the others' messages."""
    k = data.n_classes
    tmsg = np.empty_like(wmsg)
    belief = np.full((data.n_tasks, k), 1.0 / k)
    for t in range(data.n_tasks):
        edges = range(data.task_ptr[t], data.task_ptr[t + 1])
        if clamp[t] >= 0:
            belief[t] = np.eye(k)[clamp[t]]
            for e in edges:
                tmsg[e] = belief[t]
            continue
        if len(edges):
            b = np.array([math.prod(wmsg[e, z] for e in edges) for z in range(k)])
            belief[t] = b / b.sum()
        for e in edges:
            m = np.array([math.prod(wmsg[f, z] for f in edges if f != e) for z in range(k)])
            tmsg[e] = m / m.sum()
    return tmsg, belief


def run(data, theta, logw, clamp, n_sweeps, damping=0.0, start="vote"):
    """BP with the method's schedule: the start, then ``n_sweeps`` of (damped worker pass, task pass).
    Messages in task order; returns the beliefs and the last worker→task messages."""
    k = data.n_classes
    a = data.n_answers
    if start == "uniform":
        wmsg = np.full((a, k), 1.0 / k)
    else:
        votes = np.zeros((data.n_tasks, k))
        np.add.at(votes, (data.task, data.label), 1.0)
        votes /= np.maximum(votes.sum(axis=1, keepdims=True), 1)
        for t in np.flatnonzero(clamp >= 0):
            votes[t] = np.eye(k)[clamp[t]]
        wmsg = worker_messages(data, votes[data.task], None, theta, logw)
    tmsg, belief = task_messages(data, wmsg, clamp)
    for _ in range(n_sweeps):
        wmsg = worker_messages(data, tmsg, wmsg, theta, logw, damping, True)
        tmsg, belief = task_messages(data, wmsg, clamp)
    return belief, wmsg, tmsg


def worker_factor_mixture(z, edges, data, theta, logw):
    """log g_u(z) of the mixture prior: log Σ_g w_g Π_j θ_g[z_j, y_j]."""
    lp = [logw[g] + sum(math.log(theta[g, z[data.task[j]], data.label[j]]) for j in edges) for g in range(len(logw))]
    top = max(lp)
    return top + math.log(sum(math.exp(v - top) for v in lp))


def worker_factor_beta(z, edges, data, a, b):
    """log g_u(z) of one-coin workers with accuracy ~ Beta(a, b): B(a + c, b + n - c)/B(a, b)/(K - 1)^(n - c)."""
    k = data.n_classes
    c = sum(int(z[data.task[j]] == data.label[j]) for j in edges)
    n = len(edges)
    return float(betaln(a + c, b + n - c) - betaln(a, b)) - (n - c) * math.log(k - 1)


def enumerated_posterior(data, factor, clamp):
    """Exact marginals by enumerating every labelling: p(z) ∝ Π_gold 1[z_i = gold] Π_u g_u(z)."""
    k = data.n_classes
    by_worker: dict[int, list[int]] = {}
    for e in range(data.n_answers):
        by_worker.setdefault(int(data.worker[e]), []).append(e)
    post = np.zeros((data.n_tasks, k))
    logs, zs = [], []
    for z in itertools.product(range(k), repeat=data.n_tasks):
        if any(clamp[t] >= 0 and z[t] != clamp[t] for t in range(data.n_tasks)):
            continue
        logs.append(sum(factor(z, edges) for edges in by_worker.values()))
        zs.append(z)
    logs = np.array(logs)
    p = np.exp(logs - logs.max())
    p /= p.sum()
    for z, pz in zip(zs, p):
        post[np.arange(data.n_tasks), z] += pz
    return post


def random_tree(rng, n_tasks, n_workers, k):
    """A bipartite tree: each new task or worker joins one existing node of the other side; random answers."""
    tasks, workers = [0], []
    edges = []
    order = ["w"] * n_workers + ["t"] * (n_tasks - 1)
    order = ["w"] + list(rng.permutation(order[1:]))
    for kind in order:
        if kind == "w":
            w = len(workers)
            workers.append(w)
            edges.append((int(rng.choice(tasks)), w))
        else:
            t = len(tasks)
            tasks.append(t)
            edges.append((t, int(rng.choice(workers))))
    from crowdagg.data.annotations import AnnotationSet

    task = np.array([e[0] for e in edges])
    worker = np.array([e[1] for e in edges])
    label = rng.integers(0, k, len(edges))
    return AnnotationSet.from_codes(task, worker, label, n_tasks=n_tasks, n_workers=n_workers, n_classes=k)
