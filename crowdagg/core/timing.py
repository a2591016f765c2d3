"""Stage timings for the benchmarks: wall time and peak memory of each stage of a run.

Off unless ``CROWDAGG_TIMINGS`` names a file: then each :func:`stage` adds
``{"stage", "seconds", "peak_rss_mib"}`` and :func:`note` adds facts (EM
iterations, sizes); the record is written there as JSON when the process
exits.  Costs one dictionary lookup per stage when off.
"""

from __future__ import annotations

import atexit
import json
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

_PATH = os.environ.get("CROWDAGG_TIMINGS")
_RECORD: dict[str, Any] = {"stages": [], "notes": {}}


def _peak_mib() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


@contextmanager
def stage(name: str) -> Iterator[None]:
    """Time the enclosed block as stage ``name`` (when timings are on)."""
    stop = start(name)
    try:
        yield
    finally:
        stop()


def start(name: str) -> Callable[[], None]:
    """Begin stage ``name``; call the returned function to end it (for a stage spanning a long block)."""
    if not _PATH:
        return _nothing
    t = time.perf_counter()

    def stop() -> None:
        _RECORD["stages"].append({"stage": name, "seconds": time.perf_counter() - t, "peak_rss_mib": _peak_mib()})

    return stop


def record(name: str, seconds: float) -> None:
    """Add stage ``name`` measured elsewhere (a stage interleaved with another, e.g. render with write)."""
    if _PATH:
        _RECORD["stages"].append({"stage": name, "seconds": seconds, "peak_rss_mib": _peak_mib()})


def _nothing() -> None:
    return None


def note(**facts: Any) -> None:
    if _PATH:
        _RECORD["notes"].update(facts)


def _write() -> None:  # pragma: no cover - at exit
    if _PATH:
        with open(_PATH, "w") as fh:
            json.dump(_RECORD, fh)


if _PATH:
    atexit.register(_write)
