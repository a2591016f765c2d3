"""A directory of parts written on the Dask workers (:mod:`crowdagg.io.parts`): one part per partition.

Each partition's part is rendered and written by the worker that holds
the partition: its task names (the widest column) and answer counts are
already there; the client sends each partition its rows of the fit's
labels, confidences and, with ``--proba``, posteriors -- numbers only, to
that worker directly.  The rows are the global task order's (a partition
is a contiguous range of it, :mod:`crowdagg.io.dask_read`), so the parts
in partition order are the local engine's table, row for row and byte for
byte (:func:`crowdagg.methods.result.task_table` builds both, reached here through the result's
``rows_table``).

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
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

from ..errors import ResourceError

#: Seconds an interrupted run waits for the parts being written to end, so that none is written into the temporary
#: directory while it is removed (longer: the directory may be left behind, hidden, beside the output).
STOP_WAIT = 10


def part_tasks(part: Any) -> tuple[int, int]:
    """On a worker: a partition's first global task and its number of tasks."""
    return int(part.first_task), int(part.n_tasks)


def write_partition(part: Any, directory: str, index: int, fmt: str, gzip: bool, classes: tuple[str, ...],
                    rows: tuple[np.ndarray, np.ndarray, np.ndarray | None, dict[str, np.ndarray]], count: int,
                    layout: Callable[..., dict[str, Any]]) -> tuple[str, int]:
    """On a worker: partition ``part``'s rows (``rows``: its labels (n,), confidences (n,), posteriors (n, K) or
    None, and the result's flags (n,) each) as part ``index`` of the ``count`` of ``directory``; ``(file name, size)``.  ``layout``: the result's
    :meth:`~crowdagg.methods.result.AggregationResult.rows_table` (sent by reference), which makes the columns."""
    from .part_files import write_part

    labels, confidence, posteriors, flags = rows
    answers = None if posteriors is None else np.diff(part.task_ptr)
    table = layout(part.task_names.names, labels, classes, confidence, posteriors=posteriors,
                   answers_per_task=answers, arrow=True, flags=flags)
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
    from ..engine.dask import gather, settle
    from .part_files import check_parts

    client = engine.client
    directory = os.path.abspath(directory)
    # Every wait through the engine's settle/gather: a scheduler lost (killed, frozen) while the parts are written
    # ends the run with the engine's one-line error, as during the fit, instead of a wait without an end.
    what = "writing the parts"
    parts = list(engine.parts)
    ranges = gather(client, client.map(part_tasks, parts, pure=False), what)
    starts = [0] + list(np.cumsum([n for _, n in ranges]))
    if [t0 for t0, _ in ranges] != starts[:-1] or starts[-1] != len(result.labels):
        from ..errors import UsageError

        raise UsageError(f"engine: its partitions hold {starts[-1]:,} tasks, not the {len(result.labels):,} of the "
                         "result; give the engine the result was fitted on")
    where = settle(client, partial(client.scheduler.who_has, keys=[part.key for part in parts]), what)  # key: holders
    confidence = result.confidence
    futures = []
    for p, (part, (t0, n)) in enumerate(zip(parts, ranges)):
        rows = (result.labels[t0:t0 + n], confidence[t0:t0 + n], result.posteriors[t0:t0 + n] if proba else None,
                {name: flag[t0:t0 + n] for name, flag in result.flags.items()})
        holders = list(where.get(part.key, ())) or None
        # Scattered to the worker that holds the partition: the rows go there once, not through the scheduler.
        [sent] = settle(client, partial(client.scatter, [rows], workers=holders, hash=False, asynchronous=True), what)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            futures.append(client.submit(write_partition, part, directory, p, fmt, gzip, tuple(result.data.classes),
                                         sent, len(engine.parts), type(result).rows_table, pure=False))
    try:
        gather(client, futures, what, errors="skip")  # every write's outcome, failed or not
    except ResourceError:
        raise  # the scheduler is gone: nothing to wait on (a worker still writing there meets a removed directory)
    except BaseException:  # an interrupt: the writes already running end before the directory is removed
        with contextlib.suppress(Exception):
            settle_for(client, futures, STOP_WAIT)
        raise
    for f in futures:  # the first failing partition in task order is the error (as the local writer's)
        if f.status == "error":
            f.result()  # ended: no wait
    written = gather(client, futures, what)
    del futures
    check_parts(directory, written)


def settle_for(client: Any, futures: list[Any], seconds: float) -> None:
    """Wait at most ``seconds`` for ``futures`` to end, failed or not (an interrupted run's last look), through the
    engine's :func:`~crowdagg.engine.dask.settle`: a lost scheduler ends it sooner."""
    import asyncio

    from ..engine.dask import settle

    async def ended() -> None:
        # Not cancelled at the time limit (asyncio.wait, not wait_for): a gather cancelled midway leaves Dask's
        # inner waits failing unretrieved; it ends with the client.
        await asyncio.wait([asyncio.ensure_future(client.gather(futures, errors="skip", asynchronous=True))],
                           timeout=seconds)

    settle(client, ended, "writing the parts")


__all__ = ["fill_on_workers", "part_tasks", "write_partition"]
