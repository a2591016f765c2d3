"""Threads for the ingest kernels (the counting sort, the record scan): the thread policy's count, two at most.

The block grid, the reduction tree and the threads of the fitting kernels
are the engine's (:mod:`crowdagg.engine`).
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ..core import threads


def n_threads() -> int:
    """Threads the kernels may use: the thread policy's count (:func:`crowdagg.core.threads.count`)."""
    return threads.count()


#: Below this many answers the ingest kernels run on one thread (threads cost more than they save).
PARALLEL_ANSWERS = 4_000_000


def two_threads(jobs: list[Callable[[], Any]]) -> list[Any]:
    """Run the jobs (nogil kernels) on two threads, or one where the thread policy says so; results in order."""
    if len(jobs) == 1 or n_threads() < 2:
        return [job() for job in jobs]
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = [pool.submit(job) for job in jobs[1:]]
        first = jobs[0]()
        return [first, *(f.result() for f in futures)]
