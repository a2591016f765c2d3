"""The simulated crowd and how a plan becomes one.

:class:`Plan` is what the generic path or a scenario decides before any
answer is drawn (tasks, worker confusion matrices and kinds, prior,
assignment graph, copiers); :func:`realise` draws the truth ``y_n ~
Cat(prior)``, the assignment graph, the extreme spammers' edges and one
answer per edge from the Dawid--Skene model (Dawid & Skene 1979,
doi:10.2307/2346806)

.. math::

    \\tilde y_n^{(m)} \\mid y_n = k \\;\\sim\\; \\mathrm{Cat}(C_m[k, :]),

by inverse-CDF sampling on the cumulative confusion rows
(:func:`sample_labels`: all edges at once, O(L) memory) -- or, for a GLAD
plan (one with task parameters), from the GLAD model
(:func:`crowdagg.simulate.glad.sample_labels`).  Copiers (Max-MIG's
correlated crowd, Cao et al., ICLR 2019, arXiv:1905.13436 §4.3) then repeat
their source's answers.  :class:`SimulatedCrowd` holds the result and writes
it as CSV files.
"""

from __future__ import annotations

import contextlib
import io
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..data.annotations import AnnotationSet
from . import glad
from .assignment import REGISTRY as _GRAPHS
from .features import gaussian_features


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
        Under GLAD a worker's confusion changes from task to task; this is
        its expectation over the difficulty distribution, a one-coin matrix
        with diagonal ``E[sigma(ability[w] * beta)]``, ``log beta ~ N(0,
        difficulty_spread^2)`` (:func:`crowdagg.simulate.glad.expected_accuracy`),
        not the average over this crowd's drawn tasks.
    prior : ndarray of float64, shape (n_classes,)
        Class prior the truth was drawn from.
    worker_kind : ndarray of str (object), shape (n_workers,)
        ``"ds"``, ``"onecoin"``, ``"hammer"``, ``"glad"``, ``"spammer"``,
        ``"adversary"``, ``"extreme_spammer"``, ``"senior"``,
        ``"junior_constant"``, ``"copier"``, ``"specialist"``,
        ``"worse_than_random"``, ``"random"``, ``"team"``, ``"swapping_team"``
        or ``"heavy_spammer"``.
    n_classes : int
    copy_of : ndarray of int64, shape (n_workers,), optional
        For a copier, the worker whose answer it repeats on every task; -1
        for everyone else.  ``None`` is read as "nobody copies".
    ability : ndarray of float64, shape (n_workers,), optional
        GLAD crowds only (``None`` otherwise): each worker's true ability
        ``alpha``; worker ``w`` answers task ``n`` correctly with probability
        ``sigma(ability[w] * task_beta[n])``, otherwise a uniformly random
        other class.  Workers answering uniformly at random (spammers,
        extreme spammers) have 0 when ``n_classes == 2`` and NaN otherwise
        (no ability gives them accuracy ``1/K`` on every task).
    task_beta : ndarray of float64, shape (n_tasks,), optional
        GLAD crowds only (``None`` otherwise): each task's true ``beta > 0``;
        ``1 / beta`` is its difficulty.
    features : ndarray of float32, shape (n_tasks, dim), optional
        Scenarios for trainers only (``None`` otherwise): each task's feature
        vector, drawn from its true class's Gaussian
        (:func:`crowdagg.simulate.features.gaussian_features`), rows in task
        order.
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
    ability: np.ndarray | None = None
    task_beta: np.ndarray | None = None
    features: np.ndarray | None = None

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
        """The answers as an :class:`~crowdagg.data.annotations.AnnotationSet` (names ``t*``, ``w*``, ``0..K-1``)."""
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

    def write(self, outdir: str | Path, extra: Sequence[tuple[str | Path, bytes]] = ()) -> list[Path]:
        """Write the crowd as CSV files in ``outdir`` (created if needed).

        * ``labels.csv``: ``task,worker,label`` -- the answers;
        * ``truth.csv``: ``task,label`` -- the hidden true class;
        * ``confusion.csv``: ``worker,true_label,observed_label,probability``;
        * ``workers.csv``: ``worker,kind,accuracy,n_answers`` (accuracy as in
          :meth:`worker_accuracy`); a GLAD crowd has ``worker,kind,alpha,
          accuracy,n_answers``, ``alpha`` the true :attr:`ability` (an empty
          cell where it is NaN);
        * ``tasks.csv`` (GLAD crowds only): ``task,beta,n_answers``, ``beta``
          the true :attr:`task_beta` (``1 / beta`` is the task's difficulty);
        * ``features.npy`` and ``tasks.txt`` (crowds with :attr:`features`
          only): the features, one row per task, and the task names in that
          order, one per line (what ``crowdagg train --features`` reads).

        Names match :meth:`to_annotations`.  ``extra`` (path, bytes) pairs
        -- e.g. the features of ``crowdagg simulate --features`` -- are
        written in the same commit, their directories created as needed.
        The files are written through :func:`crowdagg.io.output.commit`: all
        of them appear, or none does (a directory created for them is removed
        again on failure).

        Returns
        -------
        list of Path
            The four (GLAD: five; with features: six) paths, in the order above, then ``extra``'s.
        """
        from ..errors import DataError, param
        from ..io.output import commit, resolve
        from ..io.read import DIRECTORY, output_format
        from ..io.render import render_table
        from ..kernels.validate import check_codes, check_index

        output_format(None, os.fspath(outdir), param("outdir"), DIRECTORY)  # "-", a file, "out.csv": refused
        # Names are looked up by code below: a code out of range would write another id (or none).
        check_codes(self.task, self.worker, self.label, self.n_tasks, self.n_workers, self.n_classes)
        check_index(self.truth, self.n_classes, "truth", "class")
        if self.confusion.shape != (self.n_workers, self.n_classes, self.n_classes):
            raise DataError(f"confusion has shape {self.confusion.shape}, not (n_workers, n_classes, n_classes)")
        if (self.ability is None) != (self.task_beta is None):
            raise DataError("ability and task_beta go together: a GLAD crowd has both, any other crowd neither")
        if self.ability is not None and self.ability.shape != (self.n_workers,):
            raise DataError(f"ability has shape {self.ability.shape}, not (n_workers,) = ({self.n_workers},)")
        if self.task_beta is not None and (
            self.task_beta.shape != (self.n_tasks,) or not np.all(np.isfinite(self.task_beta) & (self.task_beta > 0))
        ):
            raise DataError(f"task_beta must hold {self.n_tasks} finite positive numbers (one per task)")
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
                    **({} if self.ability is None else {"alpha": _optional_floats(self.ability, "alpha")}),
                    "accuracy": self.worker_accuracy(),
                    "n_answers": np.bincount(self.worker, minlength=m),
                },
                "csv",
            ),
        }
        if self.task_beta is not None:
            tables["tasks.csv"] = render_table(
                {
                    "task": np.asarray(self.task_names(), dtype=object),
                    "beta": self.task_beta,
                    "n_answers": np.bincount(self.task, minlength=self.n_tasks),
                },
                "csv",
            )
        if self.features is not None:
            if self.features.ndim != 2 or self.features.shape[0] != self.n_tasks:
                raise DataError(f"features have shape {self.features.shape}, not (n_tasks, dim) with n_tasks = "
                                f"{self.n_tasks}")
            buffer = io.BytesIO()
            np.save(buffer, np.ascontiguousarray(self.features), allow_pickle=False)
            tables["features.npy"] = buffer.getvalue()
            tables["tasks.txt"] = b"".join(np.char.add(task_names, b"\n").tolist())
        paths = [out / name for name in tables] + [Path(p) for p, _ in extra]
        created: list[Path] = []
        try:
            for d in dict.fromkeys([out, *(p.parent for p in paths[len(tables):])]):
                _make_dirs(d, created)
            commit([(resolve(str(p)), data) for p, data in zip(paths, [*tables.values(), *(b for _, b in extra)])])
        except BaseException:
            for d in reversed(created):  # directories this call made go again
                with contextlib.suppress(OSError):
                    d.rmdir()
            raise
        return paths


def _make_dirs(out: Path, made: list[Path]) -> None:
    """``mkdir -p out``, recording in ``made`` each directory created (outermost first)."""
    from ..errors import DataError, os_reason

    for d in [d for d in (out, *out.parents) if not d.exists()][::-1]:
        try:
            d.mkdir()
        except OSError as exc:
            raise DataError(f"{out}: cannot create the directory ({os_reason(exc)})") from None
        made.append(d)


def _optional_floats(values: np.ndarray, column: str) -> np.ndarray:
    """Shortest round-trip text of each float, an empty cell for NaN (the CSV writer refuses NaN)."""
    from ..io.render import float_text

    cells = np.full(values.shape[0], "", dtype=object)
    known = np.flatnonzero(~np.isnan(values))
    cells[known] = float_text(values[known], column=column)
    return cells


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


# ------------------------------------------------------------------ sampling
def sample_labels(
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


def copy_answers(task: np.ndarray, worker: np.ndarray, label: np.ndarray, copy_of: np.ndarray, n_tasks: int) -> None:
    """Copiers repeat their source's answer, in place: ``label`` of each worker ``w`` with ``copy_of[w] >= 0``
    becomes ``copy_of[w]``'s answer on the same task (Max-MIG's correlated mistakes, Cao et al. 2019 §4.3).

    Where the copied worker did not answer, the copier keeps its own draw (from the same matrix).
    """
    for w in np.flatnonzero(copy_of >= 0):
        src = int(copy_of[w])
        by_task = np.full(n_tasks, -1, dtype=np.int16)
        mine = worker == src
        by_task[task[mine]] = label[mine]
        sel = np.flatnonzero(worker == w)
        copied = by_task[task[sel]]
        label[sel] = np.where(copied >= 0, copied, label[sel])


@dataclass
class Plan:
    """What a scenario or the generic path decides before answers are drawn."""

    n_tasks: int
    confusion: np.ndarray  # (M, K, K) without extreme spammers
    kinds: list[str]
    prior: np.ndarray
    assignment: str  # a name in crowdagg.simulate.assignment.REGISTRY ("bernoulli": each edge w.p. p_obs), or
    # what ``graph`` draws
    per_task: int = 0
    p_obs: float = 0.0
    copy_of: np.ndarray | None = None
    # GLAD plans only: abilities (M,) without extreme spammers, and one beta per task (N,).
    ability: np.ndarray | None = None
    task_beta: np.ndarray | None = None
    # A scenario's own graph (``graph(rng)`` -> task-sorted (task, worker)), drawn in place of ``assignment``'s.
    graph: Callable[[np.random.Generator], tuple[np.ndarray, np.ndarray]] | None = None
    # A trainer's scenario: (dim, separation) of the class-conditional Gaussian features drawn for its tasks.
    features: tuple[int, float] | None = None

    def assign(self, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """Task-sorted (task, worker) arrays of the assignment graph."""
        if self.graph is not None:
            return self.graph(rng)
        return _GRAPHS[self.assignment].edges(rng, self.n_tasks, self.confusion.shape[0], self.per_task, self.p_obs)


def realise(rng: np.random.Generator, plan: Plan, extreme_spammers: int) -> SimulatedCrowd:
    """Draw truth, graph and answers of ``plan``, with ``extreme_spammers`` appended workers labelling every task."""
    n = plan.n_tasks
    m, k, _ = plan.confusion.shape
    truth = rng.choice(k, size=n, p=plan.prior).astype(np.int64)
    task, worker = plan.assign(rng)
    kinds = list(plan.kinds)
    confusion = plan.confusion
    copy_of = plan.copy_of if plan.copy_of is not None else np.full(m, -1, dtype=np.int64)
    ability = plan.ability
    if extreme_spammers:
        e = extreme_spammers
        confusion = np.concatenate([confusion, np.full((e, k, k), 1.0 / k)])
        kinds += ["extreme_spammer"] * e
        copy_of = np.concatenate([copy_of, np.full(e, -1, dtype=np.int64)])
        if ability is not None:  # uniformly random: see crowdagg.simulate.glad
            ability = np.concatenate([ability, np.full(e, 0.0 if k == 2 else np.nan)])
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
    if ability is not None and plan.task_beta is not None:  # a GLAD plan has both
        label = glad.sample_labels(rng, ability, plan.task_beta, worker, task, truth[task], k)
    else:
        label = sample_labels(rng, confusion, worker, truth[task])
    copy_answers(task, worker, label, copy_of, n)
    features = None
    if plan.features is not None:  # drawn last: a plan without features draws exactly what it did before
        dim, separation = plan.features
        features = gaussian_features(truth, k, dim=dim, separation=separation,
                                     seed=int(rng.integers(0, 2**63 - 1)))
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
        ability=ability,
        task_beta=plan.task_beta,
        features=features,
    )
