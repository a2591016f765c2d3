"""Coupled CPD (cpd, TensorADMM): the kernels against tensorly, recovery, real data, determinism, engines."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

# ------------------------------------------------------------------------------- slow twins of the statistics


@dataclass(frozen=True)
class TwinTriples:
    triples: np.ndarray
    joint: np.ndarray
    n_tasks: np.ndarray
    n_units: int
    n_classes: int


def twin_label_counts(data) -> np.ndarray:
    """Answers of each worker per label, (n_workers, K) int64."""
    out = np.zeros((data.n_workers, data.n_classes), dtype=np.int64)
    np.add.at(out, (data.worker, data.label), 1)
    return out


def twin_triples(data, min_tasks: int = 1) -> TwinTriples:
    """Every answer triple of three different workers on one task, every combination (the obvious loops)."""
    k = data.n_classes
    joint: dict[tuple[int, int, int], np.ndarray] = {}
    tasks: dict[tuple[int, int, int], int] = {}
    ptr = data.task_ptr
    for t in range(data.n_tasks):
        rows = range(ptr[t], ptr[t + 1])
        seen = set()
        for a, b, c in itertools.combinations(rows, 3):
            ws = [int(data.worker[a]), int(data.worker[b]), int(data.worker[c])]
            if len(set(ws)) < 3:
                continue
            order = np.argsort(ws)
            key = tuple(ws[o] for o in order)
            labels = [int(data.label[r]) for r in (a, b, c)]
            cell = tuple(labels[o] for o in order)
            joint.setdefault(key, np.zeros((k, k, k), dtype=np.int64))[cell] += 1
            seen.add(key)
        for key in seen:
            tasks[key] = tasks.get(key, 0) + 1
    keys = sorted(key for key in joint if tasks[key] >= min_tasks)
    triples = np.array(keys, dtype=np.int32).reshape(-1, 3)
    return TwinTriples(triples, np.array([joint[key] for key in keys], dtype=np.int64).reshape(-1, k, k, k),
                       np.array([tasks[key] for key in keys], dtype=np.int64), data.n_workers, k)


def fast_twin_triples(data, min_tasks: int = 1) -> TwinTriples:
    """The same, vectorised over tasks of one answer count (no repeated worker on a task): for larger data."""
    k, w = data.n_classes, data.n_workers
    counts = data.answers_per_task.astype(np.int64)
    ptr = data.task_ptr
    keys_all, cells_all = [], []
    for c in np.unique(counts):
        if c < 3:
            continue
        tasks = np.flatnonzero(counts == c)
        rows = ptr[tasks][:, None] + np.arange(c)[None, :]
        combos = np.array(list(itertools.combinations(range(c), 3)))
        wk = data.worker[rows][:, combos].astype(np.int64)  # (n, C, 3)
        lb = data.label[rows][:, combos].astype(np.int64)
        order = np.argsort(wk, axis=2, kind="stable")
        wk = np.take_along_axis(wk, order, axis=2).reshape(-1, 3)
        lb = np.take_along_axis(lb, order, axis=2).reshape(-1, 3)
        ok = (wk[:, 0] < wk[:, 1]) & (wk[:, 1] < wk[:, 2])
        keys_all.append(((wk[ok, 0] * w + wk[ok, 1]) * w + wk[ok, 2]))
        cells_all.append((lb[ok, 0] * k + lb[ok, 1]) * k + lb[ok, 2])
    keys = np.concatenate(keys_all) if keys_all else np.empty(0, np.int64)
    cells = np.concatenate(cells_all) if cells_all else np.empty(0, np.int64)
    uniq, inv, n_tasks = np.unique(keys, return_inverse=True, return_counts=True)
    joint = np.zeros((len(uniq), k**3), dtype=np.int64)
    np.add.at(joint, (inv, cells), 1)
    keep = n_tasks >= min_tasks
    uniq = uniq[keep]
    triples = np.stack([uniq // (w * w), uniq // w % w, uniq % w], axis=1).astype(np.int32)
    return TwinTriples(triples, joint[keep].reshape(-1, k, k, k), n_tasks[keep], w, k)


def install_twins(monkeypatch=None, fast: bool = True):
    """Until the engine's kernels land: ``cooc.label_counts`` and ``cooc.triple_statistics`` from the twins."""
    from crowdagg.kernels import cooc

    def label_counts(engine):
        return twin_label_counts(engine.data)

    def triple_statistics(engine, units=None, n_units=None, *, min_tasks=1, max_memory=None):
        return (fast_twin_triples if fast else twin_triples)(engine.data, min_tasks)

    for name, fn in (("label_counts", label_counts), ("triple_statistics", triple_statistics)):
        if monkeypatch is None:
            if not hasattr(cooc, name):
                setattr(cooc, name, fn)
        elif not hasattr(cooc, name):
            monkeypatch.setattr(cooc, name, fn, raising=False)
