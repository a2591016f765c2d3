"""This process's memory as the kernel counts it (``/proc/self/status``), for the benchmarks' peak-memory columns."""

from __future__ import annotations


def status_mib(field: str) -> float:
    """A ``/proc/self/status`` memory field (``VmHWM``: the peak RSS, ``VmRSS``: now) in MiB; NaN where absent."""
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    return float("nan")
