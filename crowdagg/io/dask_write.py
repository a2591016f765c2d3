"""A directory of parts written on the Dask workers (:mod:`crowdagg.io.parts`): one part per partition.

Each partition's part is rendered and written by the worker that holds
the partition: its task names (the widest column) and answer counts are
already there; the client sends each partition its rows of the fit's
labels, confidences and, with ``--proba``, posteriors -- numbers only, to
that worker directly.  The rows are the global task order's (a partition
is a contiguous range of it, :mod:`crowdagg.io.dask_read`), so the parts
in partition order are the local engine's table, row for row and byte for
byte (:func:`crowdagg.methods.result.task_table` builds both).

The parts go into the temporary directory the client made
(:func:`crowdagg.io.output.commit`), which the workers must see at the
same path: a worker that does not is an error naming the directory, and
the client checks, when every part is written, that it sees each part
with the size its worker wrote.  Every partition's write is waited for,
failed or not, before the first failure (in partition order) is raised --
so no worker still writes into the directory that the failure removes (an
interrupt waits :data:`STOP_WAIT` seconds for them).
"""

from __future__ import annotations

import contextlib
import os
import warnings
from typing import Any

import numpy as np

#: Seconds an interrupted run waits for the parts being written to end, so that none is written into the temporary
#: directory while it is removed (longer: the directory may be left behind, hidden, beside the output).
STOP_WAIT = 10


def part_tasks(part: Any) -> tuple[int, int]:
    """On a worker: a partition's first global task and its number of tasks."""
    return int(part.first_task), int(part.n_tasks)


def write_partition(part: Any, directory: str, index: int, fmt: str, gzip: bool, classes: tuple[str, ...],
                    rows: tuple[np.ndarray, np.ndarray, np.ndarray | None], count: int = 1) -> tuple[str, int]:
    """On a worker: partition ``part``'s rows (``rows``: its labels (n,), confidences (n,) and posteriors (n, K) or
    None) as part ``index`` of the ``count`` of ``directory``; ``(file name, size)``."""
    from ..methods.result import task_table
    from .parts import write_part

    labels, confidence, posteriors = rows
    answers = None if posteriors is None else np.diff(part.task_ptr)
    table = task_table(part.task_names.names, labels, classes, confidence, posteriors=posteriors,
                       answers_per_task=answers, arrow=True)
    return write_part(directory, index, fmt, gzip, table, where=f" on Dask worker {_here()}", count=count)


def _here() -> str:
    try:
        from distributed import get_worker

        return str(get_worker().address)
    except (ImportError, ValueError):
        import socket

        return socket.gethostname()


def fill_on_workers(engine: Any, result: Any, directory: str, fmt: str, gzip: bool, *, proba: bool = False) -> None:
    """Write ``result`` (fitted on ``engine``, a :class:`~crowdagg.engine.dask.DaskEngine`) into ``directory``:
    part ``p`` on the worker holding partition ``p``; then check every part is seen here."""
    from ..engine.dask import require_distributed
    from .parts import check_parts

    distributed = require_distributed()
    client = engine.client
    directory = os.path.abspath(directory)
    ranges = client.gather(client.map(part_tasks, engine.parts, pure=False))
    starts = [0] + list(np.cumsum([n for _, n in ranges]))
    if [t0 for t0, _ in ranges] != starts[:-1] or starts[-1] != len(result.labels):
        from ..errors import UsageError

        raise UsageError(f"engine: its partitions hold {starts[-1]:,} tasks, not the {len(result.labels):,} of the "
                         "result; give the engine the result was fitted on")
    where = client.who_has(engine.parts)
    confidence = result.confidence
    futures = []
    for p, (part, (t0, n)) in enumerate(zip(engine.parts, ranges)):
        rows = (result.labels[t0:t0 + n], confidence[t0:t0 + n], result.posteriors[t0:t0 + n] if proba else None)
        holders = list(where.get(part.key, ())) or None
        # Scattered to the worker that holds the partition: the rows go there once, not through the scheduler.
        [sent] = client.scatter([rows], workers=holders, hash=False)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            futures.append(client.submit(write_partition, part, directory, p, fmt, gzip, tuple(result.data.classes),
                                         sent, len(engine.parts), pure=False))
    try:
        distributed.wait(futures)
    except BaseException:  # an interrupt: the writes already running end before the directory is removed
        with contextlib.suppress(Exception):
            distributed.wait(futures, timeout=STOP_WAIT)
        raise
    for f in futures:  # the first failing partition in task order is the error (as the local writer's)
        if f.status == "error":
            f.result()
    written = client.gather(futures)
    del futures
    check_parts(directory, written)


__all__ = ["fill_on_workers", "part_tasks", "write_partition"]
