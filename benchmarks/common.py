"""What the side-by-side speed benchmarks (``bench_glad.py``, ``bench_mace.py``, ``bench_zbs.py``) share: their
common options, the check that crowd-kit is there, the machine line and the crowd-kit cells of their tables.

Standard library only (crowdagg's thread policy is imported when asked for), so that a benchmark imports it
before anything heavy.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any


def speed_options(ap: argparse.ArgumentParser) -> None:
    """``--answers N ...`` (the crowd sizes), ``--no-crowdkit`` and ``--json OUT``, in that order: every speed
    benchmark's options (its own ones follow)."""
    ap.add_argument("--answers", type=int, nargs="+", default=[100_000, 1_000_000])
    ap.add_argument("--no-crowdkit", action="store_true", help="crowdagg only")
    ap.add_argument("--json", type=Path, default=None)


def without_crowdkit(no_crowdkit: bool) -> bool:
    """True when crowd-kit is not to be timed: ``--no-crowdkit``, or crowd-kit is not installed (said on
    stderr: the benchmark then times crowdagg alone rather than fail)."""
    if no_crowdkit:
        return True
    try:
        import crowdkit  # noqa: F401
    except ImportError:
        print("crowd-kit is not installed here (pip install -e '.[test]'): crowdagg only", file=sys.stderr)
        return True
    return False


def processor() -> str:
    """The processor's name, else the machine's architecture."""
    return platform.processor() or platform.machine()


def machine() -> str:
    """``threads: 2, x86_64, 2 cores``: crowdagg's thread count and the machine, the tables' first line."""
    from crowdagg.core import threads

    return f"threads: {threads.count()}, {processor()}, {os.cpu_count()} cores"


def crowdkit_cells(row: dict[str, Any]) -> str:
    """A table row's crowd-kit seconds per iteration and speed-up cells (``— | — |`` without crowd-kit)."""
    ck = row.get("crowdkit")
    return f"{ck['per_iteration']:.2f} | {row['speedup_per_iteration']:.0f}× |" if ck else "— | — |"


def scored(n_answers: int, mine: dict[str, Any], truth: Any) -> dict[str, Any]:
    """One size's row: crowdagg's figures (``mine`` without its ``labels``) and their accuracy on ``truth``."""
    return {"answers": n_answers, "crowdagg": {k: v for k, v in mine.items() if k != "labels"},
            "accuracy": float((mine["labels"] == truth).mean())}


def with_crowdkit(row: dict[str, Any], theirs: Callable[[], dict[str, Any]] | None) -> dict[str, Any]:
    """``row`` with crowd-kit's figures (``theirs()``) and the speed-up per iteration over crowdagg's, unless
    ``theirs`` is None (crowd-kit not timed)."""
    if theirs is not None:
        row["crowdkit"] = theirs()
        row["speedup_per_iteration"] = row["crowdkit"]["per_iteration"] / row["crowdagg"]["per_iteration"]
    return row
