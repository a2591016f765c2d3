"""Assignment graphs: which worker labels which task.

* ``random`` -- each task gets ``per_task`` distinct workers, the set uniform
  among all such sets (:func:`random_assignment`).
* ``regular`` -- an (l, r)-regular bipartite task--worker graph, the graph
  of the belief-propagation analyses (Karger, Oh & Shah 2011; Kim, Cho, Kim
  & Ok, AISTATS 2022, arXiv:2111.00734 §4): every task has exactly l =
  ``per_task`` workers and, when l * N = r * M, every worker exactly r tasks
  (:func:`regular_assignment`, a configuration model with repeats rewired
  away).
* ``dense`` -- every worker labels every task.
* ``bernoulli`` -- each worker labels each task independently w.p. ``p_obs``
  (MultiSPA ``main_demo.m``; scenarios only, not a ``simulate(assignment=)``
  value).
* one heavy worker on a fixed share of the tasks beside a crowd drawn as
  ``random`` (:func:`heavy_worker`; the ``dense-heavy`` scenario draws it
  through its plan's own graph, it has no registry name).
* batches of tasks, each with its own team of workers, beside a crowd that
  works on every batch (:func:`team_batches`; the ``em-trap`` scenario draws
  it through its plan's own graph, it has no registry name).

:data:`REGISTRY` maps each name to an :class:`Assignment` whose ``edges``
returns task-sorted ``(task, worker)`` int32 arrays with no repeated pair.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

#: Random keys drawn per chunk (tasks x workers cells) by the dense "random" assignment.
_CHUNK_CELLS = 1 << 22
#: Rounds of edge reshuffling before the circulant fallback of a regular graph.
_MAX_REWIRE_ROUNDS = 1000

#: ``edges(rng, n_tasks, n_workers, per_task, p_obs)`` -> task-sorted (task, worker) arrays.
EdgeDraw = Callable[[np.random.Generator, int, int, int, float], tuple[np.ndarray, np.ndarray]]


@dataclass(frozen=True)
class Assignment:
    """An assignment graph; ``scenario_only`` ones are not offered by ``simulate(assignment=...)``."""

    name: str
    description: str
    edges: EdgeDraw
    scenario_only: bool = False


def random_assignment(rng: np.random.Generator, n: int, m: int, per_task: int) -> np.ndarray:
    """(n, per_task) distinct workers per task, each set uniform among all subsets; rows sorted.

    Sparse case: draw with replacement and redraw the repeats.  The procedure
    depends only on the set drawn so far, so it commutes with relabelling the
    workers and every subset is equally likely.  Dense case (per_task > M/4):
    the per_task smallest of M uniform keys per task, in chunks.
    """
    if 4 * per_task <= m:
        w = np.sort(rng.integers(0, m, size=(n, per_task), dtype=np.int32), axis=1)
        bad = np.flatnonzero((w[:, 1:] == w[:, :-1]).any(axis=1))
        while bad.size:
            sub = w[bad]
            rep = np.zeros(sub.shape, dtype=bool)
            rep[:, 1:] = sub[:, 1:] == sub[:, :-1]
            sub[rep] = rng.integers(0, m, size=int(rep.sum()), dtype=np.int32)
            sub.sort(axis=1)
            w[bad] = sub
            bad = bad[(sub[:, 1:] == sub[:, :-1]).any(axis=1)]
        return w
    out = np.empty((n, per_task), dtype=np.int32)
    step = max(1, _CHUNK_CELLS // m)
    for start in range(0, n, step):
        keys = rng.random((min(step, n - start), m))
        pick = np.argpartition(keys, per_task - 1, axis=1)[:, :per_task]
        out[start : start + keys.shape[0]] = np.sort(pick, axis=1)
    return out


def regular_assignment(rng: np.random.Generator, n: int, m: int, per_task: int) -> np.ndarray:
    """(n, per_task) workers per task; worker degrees differ by at most one.

    Configuration model: ``n * per_task`` worker stubs (each worker gets
    ``floor`` or ``ceil`` of ``n * per_task / m`` of them) are shuffled onto
    the task stubs; then each repeated (task, worker) pair is removed by a
    degree-preserving switch of workers with a random edge of another task,
    accepted only when it creates no new repeat.  If that has not finished after
    ``_MAX_REWIRE_ROUNDS`` rounds (nearly complete graphs), a randomly
    relabelled circulant graph is used instead.  Task degree is exactly
    ``per_task``; worker degree is at most ``ceil(n * per_task / m)``.  The
    deepBP code instead fills tasks greedily and drops idle workers, which is
    only approximately regular as well.
    """
    e = n * per_task
    q, rem = divmod(e, m)
    deg = np.full(m, q, dtype=np.int64)
    deg[rng.permutation(m)[:rem]] += 1
    w = rng.permutation(np.repeat(np.arange(m, dtype=np.int32), deg)).reshape(n, per_task)
    flat = w.reshape(-1)  # a view: switching entries of ``flat`` edits ``w``
    rows = np.arange(n)
    for _ in range(_MAX_REWIRE_ROUNDS):
        sub = w[rows]
        order = np.argsort(sub, axis=1, kind="stable")
        srt = np.take_along_axis(sub, order, axis=1)
        r_i, c_i = np.nonzero(srt[:, 1:] == srt[:, :-1])
        if r_i.size == 0:
            return np.sort(w, axis=1)
        # One repeated edge per offending task; at most a quarter of the tasks
        # per round, so that partners seldom fall on a task already switching.
        r_i, first = np.unique(r_i, return_index=True)
        dup_rows = rows[r_i]
        d = dup_rows * per_task + order[r_i, c_i[first] + 1]
        cap = max(1, n // 4)
        if d.size > cap:
            d = d[rng.permutation(d.size)[:cap]]
        d_rows = d // per_task
        p = rng.integers(0, e, size=d.size)
        p_rows = p // per_task
        # A task may take part in one switch per round.
        _, inv, cnt = np.unique(np.concatenate([d_rows, p_rows]), return_inverse=True, return_counts=True)
        once = cnt[inv] == 1
        ok = once[: d.size] & once[d.size :]
        wd, wp = flat[d], flat[p]
        # Accept only switches that create no repeat: each one removes a repeat.
        ok &= ~(w[d_rows] == wp[:, None]).any(axis=1)
        ok &= ~(w[p_rows] == wd[:, None]).any(axis=1)
        flat[d[ok]] = wp[ok]
        flat[p[ok]] = wd[ok]
        rows = dup_rows
    # Circulant graph (task t gets workers t*l .. t*l+l-1 mod M) under random
    # task and worker relabellings: simple, with the same degrees.
    circ = (np.arange(n, dtype=np.int64)[:, None] * per_task + np.arange(per_task)) % m
    relabel = rng.permutation(m).astype(np.int32)
    return np.sort(relabel[circ[rng.permutation(n)]], axis=1)


def bernoulli_assignment(rng: np.random.Generator, n: int, m: int, p_obs: float) -> tuple[np.ndarray, np.ndarray]:
    """Each worker labels each task independently w.p. ``p_obs``; unanswered tasks get one random worker."""
    tasks = []
    workers = []
    answered = np.zeros(n, dtype=bool)
    for w in range(m):
        t = np.flatnonzero(rng.random(n) < p_obs).astype(np.int32)
        tasks.append(t)
        workers.append(np.full(t.shape[0], w, dtype=np.int32))
        answered[t] = True
    orphans = np.flatnonzero(~answered).astype(np.int32)
    tasks.append(orphans)
    workers.append(rng.integers(0, m, size=orphans.shape[0], dtype=np.int32))
    task = np.concatenate(tasks)
    worker = np.concatenate(workers)
    order = np.argsort(task.astype(np.int64) * m + worker, kind="stable")
    return task[order], worker[order]


def team_batches(
    rng: np.random.Generator, n: int, n_teams: int, team_size: int, team_rate: float, n_crowd: int, crowd_rate: float
) -> tuple[np.ndarray, np.ndarray]:
    """Tasks in ``n_teams`` batches, each batch labelled by its own team, and a crowd that labels every batch.

    Each task falls in a batch uniformly at random (independently of its
    class); workers ``b * team_size`` .. ``(b + 1) * team_size - 1`` form
    team ``b`` and label each task of batch ``b`` w.p. ``team_rate`` (never
    another batch's); the ``n_crowd`` workers after the teams label each task
    w.p. ``crowd_rate``.  A task left unlabelled gets one random crowd worker.
    Task-sorted (task, worker) int32 arrays, no repeated pair.
    """
    batch = rng.integers(0, n_teams, size=n)
    m = n_teams * team_size + n_crowd
    tasks = []
    workers = []
    for w in range(m):
        team = w // team_size
        u = rng.random(n)
        t = np.flatnonzero((u < team_rate) & (batch == team) if team < n_teams else u < crowd_rate).astype(np.int32)
        tasks.append(t)
        workers.append(np.full(t.shape[0], w, dtype=np.int32))
    answered = np.zeros(n, dtype=bool)
    for t in tasks:
        answered[t] = True
    orphans = np.flatnonzero(~answered).astype(np.int32)
    tasks.append(orphans)
    workers.append(rng.integers(n_teams * team_size, m, size=orphans.shape[0], dtype=np.int32))
    task = np.concatenate(tasks)
    worker = np.concatenate(workers)
    order = np.argsort(task.astype(np.int64) * m + worker, kind="stable")
    return task[order], worker[order]


def heavy_worker(
    rng: np.random.Generator, n: int, m: int, per_task: int, share: float
) -> tuple[np.ndarray, np.ndarray]:
    """Worker 0 on ``round(share * n)`` tasks, the rest of every task's ``per_task`` workers from 1..m-1.

    Each task first gets ``per_task`` distinct workers among 1..m-1, the set
    uniform (:func:`random_assignment`); then, on ``round(share * n)`` tasks
    chosen uniformly without replacement, one of those workers, chosen
    uniformly, gives way to worker 0.  So every task keeps exactly
    ``per_task`` distinct workers, worker 0 answers exactly ``round(share *
    n)`` tasks, and the others share the remaining answers evenly in
    expectation.  Task-sorted (task, worker) int32 arrays, no repeated pair.
    """
    rows = random_assignment(rng, n, m - 1, per_task) + np.int32(1)
    mine = np.sort(rng.choice(n, size=round(share * n), replace=False))
    sub = rows[mine]
    sub[np.arange(mine.size), rng.integers(0, per_task, size=mine.size)] = 0
    sub.sort(axis=1)
    rows[mine] = sub
    return grid(rows)


def grid(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(N, d) worker table -> flat task-sorted (task, worker) arrays."""
    n, d = rows.shape
    return np.repeat(np.arange(n, dtype=np.int32), d), rows.reshape(-1).astype(np.int32, copy=False)


def dense_assignment(n: int, m: int) -> tuple[np.ndarray, np.ndarray]:
    """Every worker on every task, as task-sorted (task, worker) arrays."""
    return np.repeat(np.arange(n, dtype=np.int32), m), np.tile(np.arange(m, dtype=np.int32), n)


#: Assignment graphs by name: the three of ``simulate(assignment=...)``, in the order the errors list them, then ``bernoulli``.
REGISTRY: dict[str, Assignment] = {
    spec.name: spec
    for spec in (
        Assignment(
            "random",
            "each task gets per_task distinct workers chosen uniformly at random",
            lambda rng, n, m, per_task, p_obs: grid(random_assignment(rng, n, m, per_task)),
        ),
        Assignment(
            "regular",
            "(per_task, tasks_per_worker)-regular bipartite graph (configuration model)",
            lambda rng, n, m, per_task, p_obs: grid(regular_assignment(rng, n, m, per_task)),
        ),
        Assignment(
            "dense",
            "every worker labels every task",
            lambda rng, n, m, per_task, p_obs: dense_assignment(n, m),
        ),
        Assignment(
            "bernoulli",
            "each worker labels each task independently w.p. p_obs; a task left unlabelled gets one random worker",
            lambda rng, n, m, per_task, p_obs: bernoulli_assignment(rng, n, m, p_obs),
            scenario_only=True,
        ),
    )
}
