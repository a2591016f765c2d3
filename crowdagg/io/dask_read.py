"""Distributed ingest: answer files read on Dask workers into the partitions of a :class:`~crowdagg.engine.dask.DaskEngine`.

The partitions must hold exactly what the local engine's single partition
holds, in the same order, for the fit to give the same bytes:

1. **Each file is read on a worker** by the local reader
   (:func:`crowdagg.io.read.load_annotations` on that one file: the same
   parsing, column detection, validation and error messages naming the
   file and line).  A file's set has its tasks and workers in order of
   first appearance *within the file*, its answers grouped by task in
   input order.
2. **The client merges the vocabularies** from the files' names, in file
   order: a task's (or worker's) global code is its rank by first
   appearance in the files read one after the other -- the group-by-min
   of its global position (file index, row) -- which is the order the
   local reader gives.  Classes are inferred from the union of the files'
   labels by the local rule (:func:`~crowdagg.data.annotations.infer_classes`:
   it depends on the set of labels alone) or given.  The global
   answers per task give the grid (:func:`~crowdagg.engine.grid.task_grid`),
   and the partitions are cut at its block boundaries.
3. **Each file is split on its worker** into one piece per partition
   (its answers re-coded to the global codes, grouped by global task,
   input order kept), and **each partition is built** from its pieces in
   file order: within a task, answers from earlier files first, each
   file's in input order -- the local engine's order.

Only the names and per-task, per-worker and per-class counts travel to the
client; the answers stay on the workers.  Every step is a Dask task whose
inputs are in the graph, so a partition lost with its worker is rebuilt
from its source files (Dask's lineage).

What the local reader decides on the whole input at once is decided here
on the merged vocabularies: the duplicate count (counted within each
partition, where a task's answers are together), a single class, labels
that differ only by letter case or number format.  Refused here, with a
:class:`~crowdagg.errors.UsageError`: formats other than CSV, TSV and
Parquet, standard input, and the ``first``, ``last`` and ``error``
duplicate policies (dropping answers changes the grid, which is cut
before the partitions see the duplicates).
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..core import timing as _timing
from ..core.memory import MaxMemory
from ..data.annotations import AnnotationSet
from ..errors import CrowdaggError, CrowdaggWarning, UsageError, param, warn

#: The formats read by the Dask engine: the ones data at that scale comes in.
FORMATS = ("csv", "tsv", "parquet")

#: Warnings of one file's reader that the client words again for the whole input (from the merged data).
_GLOBAL_WARNINGS = ("only one class", "labels that differ only by", "duplicate answer(s) (same task and worker)")


@dataclass
class FileRead:
    """One file read on a worker: its annotation set (local codes) and the warnings its reader gave."""

    data: AnnotationSet
    warnings: list[str]


@dataclass
class FileSummary:
    """What the client needs of one file: names and counts, no answers."""

    tasks: Any  # Vocabulary
    workers: Any  # Vocabulary
    classes: tuple[str, ...]
    class_dtype: str | None
    answers_per_task: np.ndarray
    answers_per_worker: np.ndarray
    answers_per_class: np.ndarray
    warnings: list[str]


def read_file(path: str, options: dict[str, Any], shown: str | None = None) -> FileRead:
    """On a worker: one file through the local reader, its warnings recorded (the client says them).

    ``path`` is absolute (a worker's working directory is not the client's);
    errors and warnings name the file as ``shown`` (as given on the client).
    """
    from .read import load_annotations

    shown = path if shown is None else shown
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", CrowdaggWarning)
        try:
            data = load_annotations(path, duplicates="keep", **options)
        except CrowdaggError as exc:
            if exc.args and isinstance(exc.args[0], str):
                exc.args = (exc.args[0].replace(path, shown), *exc.args[1:])
            raise
    # The templates, not str(): their parameters stay marked (errors.param), so the client words them as the
    # local engine does -- the CLI's flags (--blank-labels error), the library's keywords (blank_labels).
    said = [getattr(w.message, "template", str(w.message)).replace(path, shown) for w in caught
            if issubclass(w.category, CrowdaggWarning)]
    return FileRead(data, said)


def summarise(read: FileRead) -> FileSummary:
    d = read.data
    return FileSummary(d.tasks, d.workers, d.classes, d.class_dtype, np.asarray(d.answers_per_task),
                       np.asarray(d.answers_per_worker), np.asarray(d.answers_per_class), read.warnings)


def split_file(read: FileRead, task_code: np.ndarray, worker_code: np.ndarray, class_code: np.ndarray,
               task_cuts: np.ndarray) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """On a worker: a file's answers in global codes, one piece per partition (global task range
    ``task_cuts[p] .. task_cuts[p+1]``), each grouped by global task with the input order kept.

    ``task_code``, ``worker_code``, ``class_code``: the file's local codes' global ones.
    """
    d = read.data
    task = task_code[d.task]
    order = np.argsort(task, kind="stable")  # the file's answers are in input order within each local task
    task = task[order]
    worker = worker_code[d.worker[order]]
    label = class_code[d.label[order]]
    ends = np.searchsorted(task, task_cuts, side="left")
    return [(task[a:b], worker[a:b], label[a:b]) for a, b in zip(ends[:-1], ends[1:])]


def build_part(first_block: int, n_blocks_total: int, bounds: np.ndarray, n_workers: int, n_classes: int,
               task_names: Any, *pieces: tuple[np.ndarray, np.ndarray, np.ndarray]) -> Any:
    """On a worker: a partition from its pieces in file order (a task's answers: file order, then input order)."""
    from ..engine.part import Part

    first_task, stop_task = int(bounds[0]), int(bounds[-1])
    task = np.concatenate([p[0] for p in pieces])
    order = np.argsort(task, kind="stable")
    worker = np.concatenate([p[1] for p in pieces])[order].astype(np.int32, copy=False)
    label = np.concatenate([p[2] for p in pieces])[order]
    counts = np.bincount(task - first_task, minlength=stop_task - first_task) if len(task) else \
        np.zeros(stop_task - first_task, dtype=np.int64)
    task_ptr = np.zeros(stop_task - first_task + 1, dtype=np.int64)
    np.cumsum(counts, out=task_ptr[1:])
    for arr in (worker, label, task_ptr):
        arr.setflags(write=False)
    return Part(int(first_block), int(n_blocks_total), first_task, np.asarray(bounds, dtype=np.int64) - first_task,
                task_ptr, worker, label, int(n_workers), int(n_classes), task_names)


def part_duplicates(part: Any) -> int:
    """On a worker: the repeated (task, worker) answers in a partition (a task's answers are all in one)."""
    from ..kernels.ingest import _repeated_answers

    if part.n_answers == 0:
        return 0
    return _repeated_answers(part.task_ptr, part.worker, part.n_workers, mark=False)[0]


def check_sources(sources: Sequence[str | os.PathLike[str]] | str | os.PathLike[str],
                  input_format: str | None) -> list[str]:
    """The files the Dask engine reads (CSV, TSV or Parquet paths), or a :class:`~crowdagg.errors.UsageError`."""
    from .read import expand_inputs

    files = [str(f) for f in (sources if not isinstance(sources, (str, os.PathLike)) else [sources])]
    if any(f == "-" for f in files):
        raise UsageError("the Dask engine reads files, not standard input: write the answers to files first")
    paths = expand_inputs(files)
    if not paths:
        raise UsageError("no input given")
    if input_format is not None and input_format.lower() not in FORMATS:
        raise UsageError(f"the Dask engine reads {', '.join(FORMATS)}; {param('input_format')} "
                         f"{input_format!r} is not among them")
    from pathlib import Path

    from .read import _EXTENSIONS

    for f in paths:
        if input_format is None and _EXTENSIONS.get(Path(f.lower().removesuffix(".gz")).suffix) not in FORMATS:
            raise UsageError(f"{f}: the Dask engine reads {', '.join(FORMATS)} files (by extension, or give "
                             f"{param('input_format')}); use the local engine for other formats")
    return list(paths)


def read_distributed(
    sources: Sequence[str | os.PathLike[str]] | str | os.PathLike[str],
    client: Any,
    *,
    partitions: int | Sequence[int] | None = None,
    input_format: str | None = None,
    task_col: str | None = None,
    worker_col: str | None = None,
    label_col: str | None = None,
    classes: Sequence[str] | None = None,
    duplicates: str = "keep",
    blank_labels: str = "skip",
    rejected: str = "exclude",
    max_memory: MaxMemory = None,
) -> tuple[AnnotationSet, Any]:
    """Read answer files on the cluster of ``client``: ``(data, engine)``.

    ``data`` is the client's view (:func:`crowdagg.data.remote.remote_set`:
    the vocabularies, answers per task, worker and class); ``engine`` a
    :class:`~crowdagg.engine.dask.DaskEngine` over partitions built and
    held on the workers.  Fit with ``method.fit(data, engine=engine)``.

    ``partitions``: how many (default: one per worker thread of the
    cluster, at most one per block), or the block boundaries of each
    (``[0, 3, 3, 8]``: three partitions of an 8-block grid, the second
    empty).  The read options are :func:`crowdagg.io.read.load_annotations`'s.
    """
    from ..data import vocab
    from ..data.annotations import (
        DUPLICATE_POLICIES,
        _label_dtype,
        _warn_duplicates,
        _warn_near_collisions,
        infer_classes,
        warn_one_class,
    )
    from ..data.remote import remote_set
    from ..engine.dask import DaskEngine, gather, require_distributed
    from ..engine.grid import task_grid

    distributed = require_distributed()
    if not isinstance(client, distributed.Client):
        raise UsageError(f"{param('client')} must be a distributed.Client (e.g. distributed.Client('tcp://host:8786')), "
                         f"got {type(client).__name__}")
    if client.status != "running":
        raise UsageError(f"{param('client')} is {client.status}, not running: give an open distributed.Client")
    if duplicates not in DUPLICATE_POLICIES:
        raise UsageError(f"{param('duplicates')} must be one of {', '.join(DUPLICATE_POLICIES)}, got {duplicates!r}")
    if duplicates != "keep":
        raise UsageError(f"the Dask engine keeps repeated (task, worker) answers ({param('duplicates')} keep): "
                         f"{duplicates!r} drops or refuses answers after the data is partitioned; "
                         "use the local engine for it")
    check_partitions(partitions)
    paths = check_sources(sources, input_format)
    options = {"input_format": input_format, "task_col": task_col, "worker_col": worker_col, "label_col": label_col,
               "classes": None if classes is None else list(classes), "blank_labels": blank_labels,
               "rejected": rejected, "max_memory": max_memory}
    # 1. Every file read on a worker; the first failure in file order is the error (as the local reader's).
    end_stage = _timing.start("dask: read the files")
    reads = [client.submit(read_file, os.path.abspath(f), options, f, pure=False) for f in paths]
    summaries = client.map(summarise, reads, pure=False)
    # Every file's outcome first (errors skipped), then the first failure in file order: the local reader's error.
    # Through the engine's gather, which ends when the scheduler is lost (distributed.wait took the *default*
    # client, which a second client, since closed, had become: it waited forever).
    gather(client, summaries, "reading the files", errors="skip")
    for fut in summaries:
        if fut.status == "error":
            fut.result()  # raises the reader's error, which names the file (the future has ended: no wait)
    files: list[FileSummary] = gather(client, summaries, "reading the files")
    del summaries
    end_stage()
    # 2. The global vocabularies and counts, in the local reader's order.
    end_stage = _timing.start("dask: vocabularies")
    for f in files:
        for text in f.warnings:
            if not any(said in text for said in _GLOBAL_WARNINGS):
                warn(CrowdaggWarning(text))
    t_codes, t_names = vocab.encode(vocab.concat([f.tasks.names for f in files]))
    w_codes, w_names = vocab.encode(vocab.concat([f.workers.names for f in files]))
    class_list = list(files[0].classes) if classes is not None else \
        infer_classes({c for f in files for c in f.classes}, label_col=label_col or "label")
    index = {c: i for i, c in enumerate(class_list)}
    n_tasks, n_workers, k = len(t_names), len(w_names), len(class_list)
    label_dtype = _label_dtype(k)
    per_task = np.zeros(n_tasks, dtype=np.int64)
    per_worker = np.zeros(n_workers, dtype=np.int64)
    per_class = np.zeros(k, dtype=np.int64)
    codes = []
    t_at = w_at = 0
    for f in files:
        tc = t_codes[t_at:t_at + len(f.tasks)].astype(np.int32)
        wc = w_codes[w_at:w_at + len(f.workers)].astype(np.int32)
        cc = np.array([index[c] for c in f.classes], dtype=label_dtype)
        t_at, w_at = t_at + len(f.tasks), w_at + len(f.workers)
        per_task[tc] += f.answers_per_task  # a file's names are distinct: no index repeats
        per_worker[wc] += f.answers_per_worker
        np.add.at(per_class, cc, f.answers_per_class)
        codes.append((tc, wc, cc))
    _warn_near_collisions(class_list)
    if k == 1 and per_class.sum():
        warn_one_class(class_list[0])
    kinds = {f.tasks.dtype for f in files}
    tasks = vocab.Vocabulary(t_names, kinds.pop() if len(kinds) == 1 else None)
    kinds = {f.workers.dtype for f in files}
    workers = vocab.Vocabulary(w_names, kinds.pop() if len(kinds) == 1 else None)
    kinds = {f.class_dtype for f in files}
    class_dtype = kinds.pop() if len(kinds) == 1 else None
    task_ptr = np.zeros(n_tasks + 1, dtype=np.int64)
    np.cumsum(per_task, out=task_ptr[1:])
    end_stage()
    # 3. The grid, the partitions cut at its block boundaries, each built from its pieces of every file.
    end_stage = _timing.start("dask: partitions")
    bounds = task_grid(task_ptr, n_workers, k)
    n_blocks = len(bounds) - 1
    block_cuts = _block_cuts(partitions, n_blocks, client)
    task_cuts = bounds[block_cuts]
    pieces = [client.submit(split_file, r, tc, wc, cc, task_cuts, pure=False) for r, (tc, wc, cc) in zip(reads, codes)]
    del reads
    parts = []
    for p, (b0, b1) in enumerate(zip(block_cuts[:-1], block_cuts[1:])):
        mine = [client.submit(_piece, s, p, pure=False) for s in pieces]
        t0, t1 = int(bounds[b0]), int(bounds[b1])
        names = vocab.Vocabulary(vocab.take(t_names, np.arange(t0, t1)), tasks.dtype)  # a copy: a slice pickles whole
        parts.append(client.submit(build_part, int(b0), n_blocks, bounds[b0:b1 + 1], n_workers, k, names, *mine,
                                   pure=False))
    del pieces
    n_dup = sum(gather(client, client.map(part_duplicates, parts, pure=False), "building the partitions"))
    end_stage()
    if n_dup:
        _warn_duplicates(n_dup, duplicates)
    data = remote_set(tasks=tasks, workers=workers, classes=tuple(class_list), task_ptr=task_ptr,
                      answers_per_worker=per_worker, answers_per_class=per_class, n_duplicates=n_dup,
                      class_dtype=class_dtype)
    return data, DaskEngine(client, parts, n_blocks)


def _piece(pieces: list[Any], p: int) -> Any:
    return pieces[p]


def check_partitions(partitions: Any) -> None:
    """``partitions`` is None, a count >= 1, or a sequence of whole block boundaries (checked against the grid once
    it is known); else a :class:`~crowdagg.errors.UsageError` -- before any file is read."""
    import numbers

    def whole(v: Any) -> bool:
        return isinstance(v, numbers.Integral) and not isinstance(v, bool)

    if partitions is None:
        return
    if whole(partitions):
        if partitions < 1:
            raise UsageError(f"{param('partitions')} must be at least 1, got {partitions}")
        return
    if isinstance(partitions, (str, bytes)) or not isinstance(partitions, Sequence) and \
            not isinstance(partitions, np.ndarray) or not all(whole(v) for v in partitions):
        raise UsageError(f"{param('partitions')} must be a count (a whole number >= 1) or the partitions' block "
                         f"boundaries (whole numbers), got {partitions!r}")


def _block_cuts(partitions: int | Sequence[int] | None, n_blocks: int, client: Any) -> np.ndarray:
    """Block boundaries of the partitions (shape (n_parts + 1,)), from a count or given."""
    if partitions is None:
        from ..engine.dask import settle

        threads = sum(settle(client, lambda: client.nthreads(asynchronous=True), "counting the workers").values()) or 1
        partitions = min(threads, n_blocks)
    if isinstance(partitions, (int, np.integer)) and not isinstance(partitions, bool):
        if partitions < 1:
            raise UsageError(f"{param('partitions')} must be at least 1, got {partitions}")
        return np.linspace(0, n_blocks, int(partitions) + 1).astype(np.int64)
    cuts = np.asarray(list(partitions), dtype=np.int64)  # type: ignore[arg-type]
    if len(cuts) < 2 or cuts[0] != 0 or cuts[-1] != n_blocks or np.any(np.diff(cuts) < 0):
        raise UsageError(f"{param('partitions')} as block boundaries must rise from 0 to the grid's {n_blocks} "
                         f"blocks, got {cuts.tolist()}")
    return cuts
