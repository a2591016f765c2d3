"""Synthetic crowds with known truth and known worker confusion matrices.

:func:`simulate` draws a ground truth ``y_n ~ Cat(prior)``, one confusion
matrix per worker and a task--worker assignment graph, then samples each
answer from the Dawid--Skene model

.. math::

    \\tilde y_n^{(m)} \\mid y_n = k \\;\\sim\\; \\mathrm{Cat}(C_m[k, :]),

with ``C_m = confusion[m]`` row-stochastic (``confusion[worker, true,
observed]``, the layout of every crowdagg result; the transpose of the
column-stochastic ``A_m`` of the tutorial seed).  Answers are drawn for all
edges at once by inverse-CDF sampling on the cumulative confusion rows, so
ten million answers take a few seconds and O(L) memory.

Worker models and scenarios follow the seed papers:

* Dawid & Skene (1979), "Maximum likelihood estimation of observer
  error-rates using the EM algorithm", doi:10.2307/2346806 (``model="ds"``;
  ``"onecoin"`` is its homogeneous special case).
* Cao, Xu, Kong & Wang (ICLR 2019), "Max-MIG: an information theoretic
  approach for joint learning from crowds", arXiv:1905.13436
  (``maxmig-*`` scenarios: independent, naive-majority and correlated crowds).
* Kim, Cho, Kim & Ok (AISTATS 2022), "Robust deep learning from crowds with
  belief propagation", arXiv:2111.00734 (``deepbp``: one-coin Beta(2, 1)
  workers on an (l, r)-regular graph, plus extreme spammers).
* Ibrahim, Traganitis, Fu et al., ICASSP 2025 tutorial "Learning from
  crowdsourced noisy labels" (``tutorial-spammers``: spammers and malicious
  workers), and Ibrahim, Fu, Kargas & Huang (NeurIPS 2019), "Crowdsourcing
  via pairwise co-occurrences: identifiability and algorithms"
  (``multispa-demo``, after ``main_demo.m``/``generate_confusion_mat.m``).

Every random draw comes from one ``np.random.default_rng(seed)``: the same
arguments and seed give identical arrays.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from . import memory
from .aggregators.base import one_coin_matrices
from .checks import check_float, check_int, check_seed
from .data import AnnotationSet
from .errors import UsageError, param

__all__ = ["ASSIGNMENTS", "MODELS", "SCENARIOS", "SimulatedCrowd", "simulate"]

#: Worker models accepted by ``simulate(model=...)``.
MODELS: dict[str, str] = {
    "ds": "full confusion: diagonal ~ Uniform(skill), off-diagonal mass split by Dirichlet(1,...,1)",
    "onecoin": "one accuracy per worker ~ Uniform(skill), errors uniform over the other classes",
    "hammer-spammer": "hammers (one-coin, accuracy skill[1]) and spammers answering uniformly at random",
}

#: Assignment graphs accepted by ``simulate(assignment=...)``.
ASSIGNMENTS: dict[str, str] = {
    "random": "each task gets per_task distinct workers chosen uniformly at random",
    "regular": "(per_task, tasks_per_worker)-regular bipartite graph (configuration model)",
    "dense": "every worker labels every task",
}

#: Named scenarios from the seed papers (name -> one-line description).
SCENARIOS: dict[str, str] = {
    "maxmig-independent": (
        "Max-MIG case 4.1 (H): 5 binary seniors A-E with the paper's Dogs-vs-Cats expertise, dense, N=12500"
    ),
    "maxmig-naive-majority": ("Max-MIG case 4.2 (H): 5 seniors + 5 juniors who always answer class 0, dense, N=12500"),
    "maxmig-correlated": ("Max-MIG case 4.3 (H): 5 seniors + 5 juniors copying senior A (2) or C (3), dense, N=12500"),
    "deepbp": (
        "deepBP §4: binary one-coin workers q ~ Beta(2,1) on a (3,4)-regular graph, N=1000, "
        "M=750, plus --extreme-spammers labelling every task"
    ),
    "tutorial-spammers": (
        "ICASSP'25 tutorial: N=10000, K=4, M=20 dense DS workers, a fraction (default 0.3) "
        "of them spammers whose answers ignore the truth"
    ),
    "multispa-demo": (
        "MultiSPA main_demo.m: N=10000, M=25, K=3, each worker labels each task w.p. 0.2; "
        "K specialists, 1 worse-than-random worker, the rest random"
    ),
}

#: Max-MIG (H) Dogs-vs-Cats seniors, paper App. B.1, as (P(correct | cat),
#: P(correct | dog)); class 0 is "cat".  The paper lists dog/cat accuracies
#: A 0.6/0.8, B 0.6/0.6, C 0.9/0.6, D 0.7/0.7, E 0.6/0.7 (the released code
#: uses different matrices; see ALGORITHMS.md §14.1).
_MAXMIG_SENIORS: tuple[tuple[float, float], ...] = (
    (0.8, 0.6),  # A
    (0.6, 0.6),  # B
    (0.6, 0.9),  # C
    (0.7, 0.7),  # D
    (0.7, 0.6),  # E
)
_MAXMIG_N_TASKS = 12_500

#: Random keys drawn per chunk (tasks x workers cells) by the dense "random" assignment.
_CHUNK_CELLS = 1 << 22
#: Rounds of edge reshuffling before the circulant fallback of a regular graph.
_MAX_REWIRE_ROUNDS = 1000


# --------------------------------------------------------------------- result
@dataclass(eq=False)
class SimulatedCrowd:
    """A simulated crowd: the answers, the hidden truth and the true worker models.

    Attributes
    ----------
    task : ndarray of int32, shape (n_answers,)
        Task index of each answer, non-decreasing.
    worker : ndarray of int32, shape (n_answers,)
        Worker index of each answer.  No (task, worker) pair repeats.
    label : ndarray of int8 (int16 beyond 127 classes), shape (n_answers,)
        Observed class index of each answer.
    truth : ndarray of int64, shape (n_tasks,)
        True class of each task.
    confusion : ndarray of float64, shape (n_workers, n_classes, n_classes)
        ``confusion[w, true, observed]``; rows sum to 1.  For copiers this is
        the copied worker's matrix, i.e. the copier's marginal behaviour.
    prior : ndarray of float64, shape (n_classes,)
        Class prior the truth was drawn from.
    worker_kind : ndarray of str (object), shape (n_workers,)
        ``"ds"``, ``"onecoin"``, ``"hammer"``, ``"spammer"``, ``"adversary"``,
        ``"extreme_spammer"``, ``"senior"``, ``"junior_constant"``,
        ``"copier"``, ``"specialist"``, ``"worse_than_random"`` or ``"random"``.
    n_classes : int
    copy_of : ndarray of int64, shape (n_workers,), optional
        For a copier, the worker whose answer it repeats on every task; -1
        for everyone else.  ``None`` is read as "nobody copies".
    """

    task: np.ndarray
    worker: np.ndarray
    label: np.ndarray
    truth: np.ndarray
    confusion: np.ndarray
    prior: np.ndarray
    worker_kind: np.ndarray
    n_classes: int
    copy_of: np.ndarray | None = None

    def __post_init__(self) -> None:
        if self.copy_of is None:
            self.copy_of = np.full(self.n_workers, -1, dtype=np.int64)

    @property
    def n_tasks(self) -> int:
        return int(self.truth.shape[0])

    @property
    def n_workers(self) -> int:
        return int(self.confusion.shape[0])

    @property
    def n_answers(self) -> int:
        return int(self.task.shape[0])

    def __repr__(self) -> str:
        return (
            f"SimulatedCrowd(n_answers={self.n_answers}, n_tasks={self.n_tasks}, "
            f"n_workers={self.n_workers}, n_classes={self.n_classes})"
        )

    def task_names(self) -> list[str]:
        """``["t0", "t1", ...]``: the task names used by every output."""
        return [f"t{i}" for i in range(self.n_tasks)]

    def worker_names(self) -> list[str]:
        """``["w0", "w1", ...]``: the worker names used by every output."""
        return [f"w{i}" for i in range(self.n_workers)]

    def class_names(self) -> list[str]:
        """``["0", ..., "K-1"]``."""
        return [str(k) for k in range(self.n_classes)]

    def worker_accuracy(self) -> np.ndarray:
        """Expected accuracy of each worker under the prior, shape (n_workers,).

        ``sum_k prior[k] * confusion[w, k, k]``: the model value, not the
        empirical rate of the sampled answers.
        """
        diag = np.diagonal(self.confusion, axis1=1, axis2=2)
        return diag @ self.prior

    def to_annotations(self) -> AnnotationSet:
        """The answers as an :class:`~crowdagg.data.AnnotationSet` (names ``t*``, ``w*``, ``0..K-1``)."""
        return AnnotationSet.from_codes(
            self.task,
            self.worker,
            self.label,
            n_tasks=self.n_tasks,
            n_workers=self.n_workers,
            n_classes=self.n_classes,
            task_names=self.task_names(),
            worker_names=self.worker_names(),
            classes=self.class_names(),
        )

    def write(self, outdir: str | Path) -> list[Path]:
        """Write the crowd as four CSV files in ``outdir`` (created if needed).

        * ``labels.csv``: ``task,worker,label`` -- the answers;
        * ``truth.csv``: ``task,label`` -- the hidden true class;
        * ``confusion.csv``: ``worker,true_label,observed_label,probability``;
        * ``workers.csv``: ``worker,kind,accuracy,n_answers`` (accuracy as in
          :meth:`worker_accuracy`).

        Names match :meth:`to_annotations`.  The files are written through
        :func:`crowdagg.output.commit`: all four appear, or none does
        (a directory created for them is removed again on failure).

        Returns
        -------
        list of Path
            The four paths, in the order above.
        """
        from .output import commit, resolve
        from .render import render_table

        out = Path(outdir)
        task_names = _byte_names(b"t", self.n_tasks)
        worker_names = _byte_names(b"w", self.n_workers)
        class_names = _byte_names(b"", self.n_classes)
        workers_all = np.asarray(self.worker_names(), dtype=object)
        classes = np.asarray(self.class_names(), dtype=object)
        k = self.n_classes
        m = self.n_workers
        tables = {
            "labels.csv": _coded_rows(
                b"task,worker,label",
                [(task_names, self.task), (worker_names, self.worker), (class_names, self.label)],
            ),
            "truth.csv": _coded_rows(b"task,label", [(task_names, np.arange(self.n_tasks)), (class_names, self.truth)]),
            "confusion.csv": render_table(
                {
                    "worker": np.repeat(workers_all, k * k),
                    "true_label": np.tile(np.repeat(classes, k), m),
                    "observed_label": np.tile(classes, m * k),
                    "probability": self.confusion.reshape(-1),
                },
                "csv",
            ),
            "workers.csv": render_table(
                {
                    "worker": workers_all,
                    "kind": np.asarray(self.worker_kind, dtype=object),
                    "accuracy": self.worker_accuracy(),
                    "n_answers": np.bincount(self.worker, minlength=m),
                },
                "csv",
            ),
        }
        paths = [out / name for name in tables]
        created: list[Path] = []
        try:
            _make_dirs(out, created)
            commit([(resolve(str(p)), data) for p, data in zip(paths, tables.values())])
        except BaseException:
            for d in reversed(created):  # directories this call made go again
                with contextlib.suppress(OSError):
                    d.rmdir()
            raise
        return paths


def _make_dirs(out: Path, made: list[Path]) -> None:
    """``mkdir -p out``, recording in ``made`` each directory created (outermost first)."""
    from .errors import DataError, os_reason

    for d in [d for d in (out, *out.parents) if not d.exists()][::-1]:
        try:
            d.mkdir()
        except OSError as exc:
            raise DataError(f"{out}: cannot create the directory ({os_reason(exc)})") from None
        made.append(d)


def _byte_names(prefix: bytes, n: int) -> np.ndarray:
    """``[prefix + b"0", prefix + b"1", ...]`` as a fixed-width bytes array."""
    return np.char.add(prefix, np.arange(n).astype("S"))


def _coded_rows(header: bytes, columns: list[tuple[np.ndarray, np.ndarray]]) -> bytes:
    """CSV text whose cells are ``names[codes]``, built in C a chunk at a time.

    About four times faster than ``DataFrame.to_csv`` on ten million answers.
    """
    parts = [header + b"\n"]
    n_rows = columns[0][1].shape[0]
    step = 1 << 20
    for start in range(0, n_rows, step):
        cells = [names[codes[start : start + step]] for names, codes in columns]
        line = cells[0]
        for cell in cells[1:]:
            line = np.char.add(np.char.add(line, b","), cell)
        parts.append(b"".join(np.char.add(line, b"\n").tolist()))
    return b"".join(parts)


# ----------------------------------------------------------------- validation
def _skill_arg(skill: Any) -> tuple[float, float]:
    try:
        lo, hi = (float(s) for s in skill)
    except (TypeError, ValueError):
        raise UsageError(f"{param('skill')} must be a pair (low, high) of probabilities, got {skill!r}") from None
    if not (0.0 <= lo <= hi <= 1.0):
        raise UsageError(f"{param('skill')} must satisfy 0 <= low <= high <= 1, got {skill!r}")
    return lo, hi


def _choice_arg(name: str, value: Any, valid: Sequence[str]) -> str:
    if value not in valid:
        raise UsageError(f"unknown {param(name)} {value!r}; valid values are {', '.join(valid)}")
    return str(value)


def _prior_arg(prior: Sequence[float] | None, k: int) -> np.ndarray:
    if prior is None:
        return np.full(k, 1.0 / k)
    try:
        p = np.asarray(prior, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError):
        raise UsageError(f"{param('prior')} must be a sequence of {k} non-negative numbers, got {prior!r}") from None
    if p.shape[0] != k:
        raise UsageError(f"{param('prior')} must have {param('n_classes')}={k} entries, got {p.shape[0]} ({list(p)!r})")
    if not np.all(np.isfinite(p)) or np.any(p < 0) or p.sum() <= 0:
        raise UsageError(f"{param('prior')} must be non-negative numbers with a positive sum, got {list(p)!r}")
    return p / p.sum()


def _fixed(scenario: str, name: str, given: int | None, value: int) -> int:
    """A size the scenario fixes: an explicit, different value is an error."""
    if given is not None and given != value:
        raise UsageError(f"scenario {scenario!r} fixes {param(name)}={value}; got {param(name)}={given}")
    return value


def _unused(scenario: str, **given: Any) -> None:
    for name, value in given.items():
        if value is not None:
            raise UsageError(f"scenario {scenario!r} does not use {param(name)} (got {param(name)}={value!r})")


# ------------------------------------------------------------ worker matrices
def _ds_matrices(rng: np.random.Generator, m: int, k: int, skill: tuple[float, float]) -> np.ndarray:
    """Diagonal ~ Uniform(skill) per (worker, class); the rest of each row ~ (1 - diag) * Dirichlet(1)."""
    diag = rng.uniform(skill[0], skill[1], size=(m, k))
    # Normalised standard exponentials are Dirichlet(1, ..., 1) draws.
    off = rng.standard_exponential((m, k, k))
    idx = np.arange(k)
    off[:, idx, idx] = 0.0
    off *= ((1.0 - diag) / off.sum(axis=2))[:, :, None]
    off[:, idx, idx] = diag
    return off


def _spammer_matrices(rng: np.random.Generator, m: int, k: int, uniform: bool) -> np.ndarray:
    """Rows all equal to one distribution per worker (answers ignore the truth)."""
    if uniform:
        return np.full((m, k, k), 1.0 / k)
    s = rng.standard_exponential((m, k))
    s /= s.sum(axis=1, keepdims=True)
    return np.repeat(s[:, None, :], k, axis=1)


def _derangement(rng: np.random.Generator, k: int) -> np.ndarray:
    while True:  # expected e ~ 2.7 tries
        perm = rng.permutation(k)
        if not np.any(perm == np.arange(k)):
            return perm


def _adversary_matrices(rng: np.random.Generator, m: int, k: int, skill: tuple[float, float]) -> np.ndarray:
    """Report ``pi(k)`` w.p. ``a ~ Uniform(skill)`` for a random derangement ``pi``; else uniform over the rest."""
    a = rng.uniform(skill[0], skill[1], size=m)
    mats = np.repeat(((1.0 - a) / (k - 1))[:, None, None], k, axis=1).repeat(k, axis=2)
    rows = np.arange(k)
    for w in range(m):
        mats[w, rows, _derangement(rng, k)] = a[w]
    return mats


def _multispa_matrices(rng: np.random.Generator, m: int, k: int) -> tuple[np.ndarray, list[str]]:
    """``generate_confusion_mat(M, K, -4)`` of the MultiSPA code, row-stochastic.

    K random workers are class specialists (worker ``U[i]``'s row ``i`` has its
    largest entry swapped onto the diagonal), one more has every row's
    smallest entry on the diagonal (worse than random), and every other row
    of every worker is ``rand(K)`` normalised.
    """
    mats = rng.random((m, k, k))
    kinds = ["random"] * m
    chosen = rng.permutation(m)[: k + 1]
    rows = np.arange(k)
    for i, w in enumerate(chosen):
        if i < k:
            pos = int(np.argmax(mats[w, i]))
            mats[w, i, [i, pos]] = mats[w, i, [pos, i]]
            kinds[w] = "specialist"
        else:
            pos = np.argmin(mats[w], axis=1)
            diag = mats[w, rows, rows].copy()
            mats[w, rows, rows] = mats[w, rows, pos]
            mats[w, rows, pos] = diag
            kinds[w] = "worse_than_random"
    mats /= mats.sum(axis=2, keepdims=True)
    return mats, kinds


# ---------------------------------------------------------------- assignment
def _random_assignment(rng: np.random.Generator, n: int, m: int, per_task: int) -> np.ndarray:
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


def _regular_assignment(rng: np.random.Generator, n: int, m: int, per_task: int) -> np.ndarray:
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


def _bernoulli_assignment(rng: np.random.Generator, n: int, m: int, p_obs: float) -> tuple[np.ndarray, np.ndarray]:
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


# ------------------------------------------------------------------ sampling
def _sample_labels(
    rng: np.random.Generator, confusion: np.ndarray, worker: np.ndarray, true_class: np.ndarray
) -> np.ndarray:
    """Inverse-CDF draw of one answer per edge from ``confusion[worker, true_class, :]``."""
    m, k, _ = confusion.shape
    dtype = np.int8 if k <= 127 else np.int16
    cum = np.cumsum(confusion, axis=2)
    cum /= cum[:, :, -1:]
    flat = cum.reshape(-1)
    base = (worker.astype(np.int64) * k + true_class) * k
    # u in (0, 1], so a class of probability 0 (flat CDF step) is never drawn.
    u = 1.0 - rng.random(worker.shape[0])
    label: np.ndarray = np.zeros(worker.shape[0], dtype=dtype)
    for j in range(k - 1):
        label += u > flat[base + j]
    return label


@dataclass
class _Plan:
    """What a scenario or the generic path decides before answers are drawn."""

    n_tasks: int
    confusion: np.ndarray  # (M, K, K) without extreme spammers
    kinds: list[str]
    prior: np.ndarray
    assignment: str  # one of ASSIGNMENTS, or "bernoulli" (each edge w.p. p_obs)
    per_task: int = 0
    p_obs: float = 0.0
    copy_of: np.ndarray | None = None

    def assign(self, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """Task-sorted (task, worker) arrays of the assignment graph."""
        n, m = self.n_tasks, self.confusion.shape[0]
        if self.assignment == "random":
            return _grid(_random_assignment(rng, n, m, self.per_task))
        if self.assignment == "regular":
            return _grid(_regular_assignment(rng, n, m, self.per_task))
        if self.assignment == "bernoulli":
            return _bernoulli_assignment(rng, n, m, self.p_obs)
        return _dense(n, m)


def _grid(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(N, d) worker table -> flat task-sorted (task, worker) arrays."""
    n, d = rows.shape
    return np.repeat(np.arange(n, dtype=np.int32), d), rows.reshape(-1).astype(np.int32, copy=False)


def _dense(n: int, m: int) -> tuple[np.ndarray, np.ndarray]:
    return np.repeat(np.arange(n, dtype=np.int32), m), np.tile(np.arange(m, dtype=np.int32), n)


def _realise(rng: np.random.Generator, plan: _Plan, extreme_spammers: int) -> SimulatedCrowd:
    n = plan.n_tasks
    m, k, _ = plan.confusion.shape
    truth = rng.choice(k, size=n, p=plan.prior).astype(np.int64)
    task, worker = plan.assign(rng)
    kinds = list(plan.kinds)
    confusion = plan.confusion
    copy_of = plan.copy_of if plan.copy_of is not None else np.full(m, -1, dtype=np.int64)
    if extreme_spammers:
        e = extreme_spammers
        confusion = np.concatenate([confusion, np.full((e, k, k), 1.0 / k)])
        kinds += ["extreme_spammer"] * e
        copy_of = np.concatenate([copy_of, np.full(e, -1, dtype=np.int64)])
        # Both parts are task-sorted: answer i of task t moves to i + t*e, and
        # the extremes follow the task's own answers.
        counts = np.bincount(task, minlength=n)
        ends = np.cumsum(counts)
        total = task.shape[0] + n * e
        new_task = np.empty(total, dtype=np.int32)
        new_worker = np.empty(total, dtype=np.int32)
        pos = np.arange(task.shape[0], dtype=np.int64) + task.astype(np.int64) * e
        new_task[pos] = task
        new_worker[pos] = worker
        ext = (ends + np.arange(n, dtype=np.int64) * e)[:, None] + np.arange(e)
        new_task[ext.reshape(-1)] = np.repeat(np.arange(n, dtype=np.int32), e)
        new_worker[ext.reshape(-1)] = np.tile(np.arange(m, m + e, dtype=np.int32), n)
        task, worker = new_task, new_worker
    label = _sample_labels(rng, confusion, worker, truth[task])
    for w in np.flatnonzero(copy_of >= 0):
        src = int(copy_of[w])
        by_task = np.full(n, -1, dtype=np.int16)
        mine = worker == src
        by_task[task[mine]] = label[mine]
        sel = np.flatnonzero(worker == w)
        copied = by_task[task[sel]]
        # Where the copied worker did not answer, the copier answers by its own (the same) matrix.
        label[sel] = np.where(copied >= 0, copied, label[sel])
    return SimulatedCrowd(
        task=task,
        worker=worker,
        label=label,
        truth=truth,
        confusion=confusion,
        prior=plan.prior,
        worker_kind=np.asarray(kinds, dtype=object),
        n_classes=k,
        copy_of=copy_of,
    )


# ----------------------------------------------------------------- scenarios
def _maxmig(name: str, n_tasks: int | None, prior: np.ndarray, given: dict[str, Any]) -> _Plan:
    seniors = np.array([[[a0, 1 - a0], [1 - a1, a1]] for a0, a1 in _MAXMIG_SENIORS])
    kinds = ["senior"] * 5
    copy_of = np.full(5, -1, dtype=np.int64)
    if name == "maxmig-independent":
        confusion = seniors
    elif name == "maxmig-naive-majority":
        juniors = np.repeat(np.array([[[1.0, 0.0], [1.0, 0.0]]]), 5, axis=0)
        confusion = np.concatenate([seniors, juniors])
        kinds += ["junior_constant"] * 5
        copy_of = np.full(10, -1, dtype=np.int64)
    else:  # maxmig-correlated: juniors 5, 6 copy senior A (0); 7, 8, 9 copy C (2)
        sources = np.array([0, 0, 2, 2, 2])
        confusion = np.concatenate([seniors, seniors[sources]])
        kinds += ["copier"] * 5
        copy_of = np.concatenate([copy_of, sources])
    m = confusion.shape[0]
    _fixed(name, "n_workers", given["n_workers"], m)
    _fixed(name, "n_classes", given["n_classes"], 2)
    _unused(name, per_task=given["per_task"], tasks_per_worker=given["tasks_per_worker"])
    n = _MAXMIG_N_TASKS if n_tasks is None else n_tasks
    _check_size(n, m, 2, n * m + n * given["extreme_spammers"], given["max_memory"])
    return _Plan(n, confusion, kinds, prior, "dense", copy_of=copy_of)


def _scenario_plan(rng: np.random.Generator, name: str, args: dict[str, Any]) -> _Plan:
    given = args
    if name.startswith("maxmig-"):
        prior = _prior_arg(args["prior"], 2)
        return _maxmig(name, args["n_tasks"], prior, given)
    if name == "deepbp":
        _fixed(name, "n_classes", given["n_classes"], 2)
        n = 1000 if args["n_tasks"] is None else args["n_tasks"]
        ell = 3 if args["per_task"] is None else args["per_task"]
        r = 4 if args["tasks_per_worker"] is None else args["tasks_per_worker"]
        m = _fixed(name, "n_workers", given["n_workers"], math.ceil(n * ell / r))
        _check_per_task(m, ell)
        _check_size(n, m, 2, n * ell + n * given["extreme_spammers"], given["max_memory"])
        q = rng.beta(2.0, 1.0, size=m)
        return _Plan(n, one_coin_matrices(q, 2), ["onecoin"] * m, _prior_arg(args["prior"], 2), "regular", ell)
    if name == "tutorial-spammers":
        _unused(name, tasks_per_worker=given["tasks_per_worker"])
        n = 10_000 if args["n_tasks"] is None else args["n_tasks"]
        m = 20 if args["n_workers"] is None else args["n_workers"]
        k = 4 if args["n_classes"] is None else args["n_classes"]
        spam = 0.3 if args["spammers"] is None else args["spammers"]
        per_edge = m if args["per_task"] is None else args["per_task"]
        _check_size(n, m, k, n * per_edge + n * given["extreme_spammers"], given["max_memory"])
        confusion, kinds = _crowd_matrices(rng, m, k, "ds", args["skill"], spam, args["adversaries"])
        per_task = args["per_task"]
        prior = _prior_arg(args["prior"], k)
        if per_task is None:
            return _Plan(n, confusion, kinds, prior, "dense")
        _check_per_task(m, per_task)
        return _Plan(n, confusion, kinds, prior, "random", per_task)
    # multispa-demo
    _unused(name, per_task=given["per_task"], tasks_per_worker=given["tasks_per_worker"])
    n = 10_000 if args["n_tasks"] is None else args["n_tasks"]
    m = 25 if args["n_workers"] is None else args["n_workers"]
    k = 3 if args["n_classes"] is None else args["n_classes"]
    if m < k + 1:
        raise UsageError(f"scenario 'multispa-demo' needs {param('n_workers')} >= {param('n_classes')} + 1 = {k + 1}, got {m}")
    _check_size(n, m, k, 0.2 * n * m + n + n * given["extreme_spammers"], given["max_memory"])
    confusion, kinds = _multispa_matrices(rng, m, k)
    return _Plan(n, confusion, kinds, _prior_arg(args["prior"], k), "bernoulli", p_obs=0.2)


#: Bytes per simulated answer: codes, sampling temporaries and the CSV text held before writing.
_BYTES_PER_ANSWER = 72


def _check_size(n: int, m: int, k: int, n_answers: float, max_memory: memory.MaxMemory) -> None:
    """Refuse, before drawing anything, a crowd that would not fit in memory."""
    need = _BYTES_PER_ANSWER * n_answers + 40.0 * n + 4 * 8.0 * m * k * k
    memory.check(
        need,
        f"{n_answers:,.0f} answers on {n:,} tasks by {m:,} workers, {k:,} classes",
        max_memory,
        advice=f"simulate fewer {param('n_tasks')} or {param('n_workers')}",
    )


def _check_per_task(m: int, per_task: int) -> None:
    if per_task > m:
        raise UsageError(f"{param('per_task')}={per_task} exceeds {param('n_workers')}={m}: a task cannot get that many distinct workers")


def _crowd_matrices(
    rng: np.random.Generator,
    m: int,
    k: int,
    model: str,
    skill: tuple[float, float],
    spammers: float,
    adversaries: float,
) -> tuple[np.ndarray, list[str]]:
    n_spam = min(m, round(spammers * m))
    n_adv = min(m - n_spam, round(adversaries * m))
    if n_adv and not (skill[0] >= 1.0 / k and skill[1] > 1.0 / k):
        raise UsageError(
            f"{param('adversaries')} report a wrong class with probability drawn from {param('skill')}={skill}; "
            f"{param('skill')} must lie above 1/{param('n_classes')}={1.0 / k:.3g} for them to be malicious"
        )
    perm = rng.permutation(m)
    spam_idx, adv_idx, rest = perm[:n_spam], perm[n_spam : n_spam + n_adv], perm[n_spam + n_adv :]
    confusion = np.empty((m, k, k))
    kinds = [""] * m
    if model == "ds":
        confusion[rest] = _ds_matrices(rng, rest.size, k, skill)
        kind = "ds"
    elif model == "onecoin":
        confusion[rest] = one_coin_matrices(rng.uniform(skill[0], skill[1], size=rest.size), k)
        kind = "onecoin"
    else:
        confusion[rest] = one_coin_matrices(np.full(rest.size, skill[1]), k)
        kind = "hammer"
    confusion[spam_idx] = _spammer_matrices(rng, spam_idx.size, k, uniform=model == "hammer-spammer")
    confusion[adv_idx] = _adversary_matrices(rng, adv_idx.size, k, skill)
    for idx, name in ((rest, kind), (spam_idx, "spammer"), (adv_idx, "adversary")):
        for w in idx:
            kinds[w] = name
    return confusion, kinds


# ------------------------------------------------------------------- public
def simulate(
    n_tasks: int | None = None,
    n_workers: int | None = None,
    n_classes: int | None = None,
    per_task: int | None = None,
    *,
    model: str = "ds",
    skill: tuple[float, float] = (0.6, 0.9),
    spammers: float | None = None,
    adversaries: float = 0.0,
    extreme_spammers: int = 0,
    assignment: str = "random",
    tasks_per_worker: int | None = None,
    prior: Sequence[float] | None = None,
    scenario: str | None = None,
    seed: int = 0,
    max_memory: memory.MaxMemory = None,
) -> SimulatedCrowd:
    """Draw a synthetic crowd from a Dawid--Skene-type model with known parameters.

    Generative model: ``y_n ~ Cat(prior)`` for each task; each worker ``w``
    has a row-stochastic confusion matrix ``C_w[true, observed]``; an
    assignment graph says who labels what; worker ``w`` answers task ``n``
    with ``Cat(C_w[y_n, :])``, independently across answers (except copiers,
    who repeat another worker's answer).

    Parameters
    ----------
    n_tasks : int, optional
        N, number of tasks (default 1000, or the scenario's own default).
    n_workers : int, optional
        M, number of regular workers, not counting ``extreme_spammers``
        (default 50; derived from ``tasks_per_worker`` for ``"regular"``).
    n_classes : int, optional
        K >= 2 (default 2).
    per_task : int, optional
        Workers per task for ``"random"`` and ``"regular"`` (default 5;
        ignored by ``"dense"``).
    model : {"ds", "onecoin", "hammer-spammer"}
        Worker model for the workers that are neither spammers nor adversaries:

        * ``"ds"`` (Dawid & Skene 1979): each diagonal entry ``C_w[k, k] ~
          Uniform(skill)`` independently; the remaining ``1 - C_w[k, k]`` of
          row ``k`` is split over the other classes by a Dirichlet(1, ..., 1)
          draw.
        * ``"onecoin"``: one accuracy ``p_w ~ Uniform(skill)``, errors uniform,
          ``C_w = p_w I + (1 - p_w)/(K - 1) (11^T - I)``.
        * ``"hammer-spammer"`` (per annotator, as in MBEM; Tanno et al. 2019
          §3): hammers are one-coin with accuracy ``skill[1]`` (pass
          ``skill=(x, 1.0)`` for perfect hammers); a fraction ``spammers`` of
          the workers (default 0.5) answer uniformly at random.
    skill : (float, float)
        Range ``[low, high]`` of worker accuracy, ``0 <= low <= high <= 1``.
    spammers : float
        Fraction of workers who are spammers (tutorial seed §7.1): every row
        of ``C_w`` is the same distribution ``s_w ~ Dirichlet(1, ..., 1)``
        (uniform under ``"hammer-spammer"``), so answers are independent of
        the truth.
    adversaries : float
        Fraction of malicious workers: for a random derangement ``pi`` of the
        classes, ``C_w[k, pi(k)] = a_w ~ Uniform(skill)`` and the rest of the
        row is uniform, so ``P(pi(k) | k) > P(k | k)``.  Needs ``skill`` above
        ``1/K``.  ``spammers + adversaries`` must not exceed 1.
    extreme_spammers : int
        Extra workers (appended after the others, kind
        ``"extreme_spammer"``) who label **every** task uniformly at random
        (deepBP §4.1).
    assignment : {"random", "regular", "dense"}
        ``"random"``: each task gets ``per_task`` distinct workers, the set
        uniform among all such sets.  ``"regular"``: configuration-model
        (``per_task``, ``tasks_per_worker``)-regular bipartite graph with
        repeated pairs rewired away; task degree is exactly ``per_task`` and
        worker degrees are as equal as possible (at most
        ``ceil(n_tasks * per_task / n_workers)``).  The deepBP code fills
        tasks greedily and is only approximately regular too.  ``"dense"``:
        every worker labels every task.
    tasks_per_worker : int, optional
        r for ``"regular"``; when given, ``n_workers = ceil(n_tasks *
        per_task / r)`` (an explicit, different ``n_workers`` is an error).
    prior : sequence of float, optional
        Class prior (normalised); default uniform.
    scenario : str, optional
        A named setting from the seed papers (see :data:`SCENARIOS`).  It
        replaces ``model``, ``skill``, ``assignment``, ``spammers`` and
        ``adversaries`` unless listed below; the sizes marked "may override"
        follow explicit arguments, and an explicit size the scenario fixes
        must equal the fixed value (else :class:`UsageError`).  Every
        scenario honours ``prior``, ``extreme_spammers`` and ``seed``.

        * ``"maxmig-independent"`` (Max-MIG §4.1, (H)): 5 binary seniors
          A--E, dense, row ``[P(.|cat), P(.|dog)]`` with accuracies
          (cat, dog) = A (0.8, 0.6), B (0.6, 0.6), C (0.6, 0.9),
          D (0.7, 0.7), E (0.7, 0.6) as in the paper's App. B.1 (class 0 is
          cat).  N = 12500 (may override); M = 5, K = 2 fixed.
        * ``"maxmig-naive-majority"`` (§4.2): the 5 seniors plus 5 juniors
          (kind ``"junior_constant"``) who always answer class 0.  M = 10.
        * ``"maxmig-correlated"`` (§4.3): the 5 seniors plus 5 copiers:
          workers 5, 6 repeat senior A's (worker 0) answer on every task,
          workers 7, 8, 9 repeat senior C's (worker 2), as in the paper
          (the Dogs code copies A and B instead).  ``copy_of`` records it.
        * ``"deepbp"`` (Kim et al. 2022 §4): binary one-coin workers with
          accuracy ``q ~ Beta(2, 1)`` (some below 1/2) on an (l, r)-regular
          graph, l = 3, r = 4, N = 1000, M = ceil(N l / r) = 750; N,
          ``per_task`` (l) and ``tasks_per_worker`` (r) may override.
        * ``"tutorial-spammers"`` (ICASSP'25 tutorial, "effect of
          spammers"): N = 10000, M = 20, K = 4 (all may override), DS workers
          with ``skill``; a fraction ``spammers`` (default 0.3) are spammers
          and ``adversaries`` malicious.  Dense, or ``"random"`` with
          ``per_task`` workers per task when ``per_task`` is given.
        * ``"multispa-demo"`` (MultiSPA ``main_demo.m``): N = 10000, M = 25,
          K = 3 (may override); each worker labels each task independently
          w.p. 0.2 (a task left unlabelled gets one random worker, so every
          task is answered); matrices as ``generate_confusion_mat(M, K,
          -4)``: K class specialists, one worse-than-random worker, the rest
          random (rows ``rand(K)`` normalised).
    seed : int
        Seed of the one ``np.random.default_rng`` used for every draw.
    max_memory : int, str or None
        Refuse (:class:`~crowdagg.errors.ResourceError`), before drawing
        anything, a crowd whose answers and text would need more memory
        than this (bytes or ``"4G"``; default 80% of the available memory).

    Returns
    -------
    SimulatedCrowd
        Answers sorted by task (and by worker within a task), truth,
        confusion matrices ``(n_workers, K, K)`` including extreme spammers,
        prior and worker kinds.

    Raises
    ------
    UsageError
        For an invalid argument; the message names it and shows the value.

    Examples
    --------
    >>> crowd = simulate(200, 20, 3, 4, spammers=0.2, seed=1)
    >>> crowd.task.shape, crowd.confusion.shape
    ((800,), (20, 3, 3))
    >>> data = crowd.to_annotations()
    """
    n_tasks_v = None if n_tasks is None else check_int("n_tasks", n_tasks, 1)
    n_workers_v = None if n_workers is None else check_int("n_workers", n_workers, 1)
    n_classes_v = None if n_classes is None else check_int("n_classes", n_classes, 2)
    per_task_v = None if per_task is None else check_int("per_task", per_task, 1)
    r_v = None if tasks_per_worker is None else check_int("tasks_per_worker", tasks_per_worker, 1)
    n_extreme = check_int("extreme_spammers", extreme_spammers, 0)
    skill_v = _skill_arg(skill)
    spam_given = None if spammers is None else check_float("spammers", spammers, 0.0, 1.0)
    spam = 0.0 if spam_given is None else spam_given
    adv = check_float("adversaries", adversaries, 0.0, 1.0)
    model = _choice_arg("model", model, tuple(MODELS))
    assignment = _choice_arg("assignment", assignment, tuple(ASSIGNMENTS))
    if spam + adv > 1.0:
        raise UsageError(f"{param('spammers')} + {param('adversaries')} must not exceed 1, got {spam} + {adv} = {spam + adv}")
    rng = np.random.default_rng(check_seed(seed))
    memory.parse_size(max_memory)

    if scenario is not None:
        scenario = _choice_arg("scenario", scenario, tuple(SCENARIOS))
        args = {
            "n_tasks": n_tasks_v, "n_workers": n_workers_v, "n_classes": n_classes_v,
            "per_task": per_task_v, "tasks_per_worker": r_v, "prior": prior,
            "skill": skill_v, "spammers": spam_given, "adversaries": adv,
            "extreme_spammers": n_extreme, "max_memory": max_memory,
        }  # fmt: skip
        plan = _scenario_plan(rng, scenario, args)
        return _realise(rng, plan, n_extreme)

    n = 1000 if n_tasks_v is None else n_tasks_v
    k = 2 if n_classes_v is None else n_classes_v
    ell = 5 if per_task_v is None else per_task_v
    prior_v = _prior_arg(prior, k)
    if r_v is not None and assignment != "regular":
        raise UsageError(f"{param('tasks_per_worker')} is only used with {param('assignment')}='regular', got {param('assignment')}={assignment!r}")
    if assignment == "regular" and r_v is not None:
        derived = math.ceil(n * ell / r_v)
        if n_workers_v is not None and n_workers_v != derived:
            raise UsageError(
                f"{param('n_workers')}={n_workers_v} contradicts {param('tasks_per_worker')}={r_v}: a "
                f"({ell}, {r_v})-regular graph on {n} tasks has ceil({n}*{ell}/{r_v}) = {derived} workers"
            )
        m = derived
    else:
        m = 50 if n_workers_v is None else n_workers_v
    if model == "hammer-spammer" and spam_given is None:
        spam = 0.5
    if assignment != "dense":
        _check_per_task(m, ell)
    _check_size(n, m, k, n * (m if assignment == "dense" else ell) + n * n_extreme, max_memory)
    confusion, kinds = _crowd_matrices(rng, m, k, model, skill_v, spam, adv)
    return _realise(rng, _Plan(n, confusion, kinds, prior_v, assignment, ell), n_extreme)
