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
from collections.abc import Iterator
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
    if not _PATH:
        yield
        return
    t = time.perf_counter()
    try:
        yield
    finally:
        _RECORD["stages"].append({"stage": name, "seconds": time.perf_counter() - t, "peak_rss_mib": _peak_mib()})


def note(**facts: Any) -> None:
    if _PATH:
        _RECORD["notes"].update(facts)


def _write() -> None:  # pragma: no cover - at exit
    if _PATH:
        with open(_PATH, "w") as fh:
            json.dump(_RECORD, fh)


if _PATH:
    atexit.register(_write)
