"""Memory estimates checked before large allocations.

Any allocation that grows with workers x classes² or tasks x classes is
estimated first; above the limit the request is refused with
:class:`~crowdagg.errors.ResourceError` saying how much it would need, so
the OOM killer never decides.  The default limit is 80% of the memory
available when the check runs (``MemAvailable``, capped by a cgroup limit);
``max_memory`` (``--max-memory``) sets another: bytes, or text such as
``"4G"``, ``"512MiB"``, ``"none"`` (no limit).
"""

from __future__ import annotations

import math
import os
import re

from ..errors import ResourceError, UsageError, param

#: Share of the available memory a run may plan to use by default.
DEFAULT_FRACTION = 0.8

_UNITS = {"": 1, "b": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40, "p": 2**50}
_SIZE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([kmgtp]?)(?:i?b)?\s*$", re.IGNORECASE)

MaxMemory = int | float | str | None


def parse_size(text: MaxMemory, name: str = "max_memory") -> float | None:
    """Bytes from ``4G``, ``512MiB``, ``1.5GB``, ``1000000`` (units are powers of 1024).

    ``None`` means the default; ``"none"``/``"inf"`` mean no limit
    (returned as ``math.inf``).
    """
    if text is None:
        return None
    if isinstance(text, bool):
        raise UsageError(f"{param(name)} must be a size such as 4G or 512M, got {text!r}")
    if isinstance(text, (int, float)):
        value = float(text)
    else:
        t = str(text).strip().lower()
        if t in ("none", "inf", "unlimited", "off"):
            return math.inf
        m = _SIZE.match(t)
        if not m:
            raise UsageError(f"{param(name)} must be a size such as 4G, 512M or none, got {text!r}")
        value = float(m.group(1)) * _UNITS[m.group(2).lower()]
    if math.isnan(value) or value <= 0:
        raise UsageError(f"{param(name)} must be a positive size such as 4G (or none), got {text!r}")
    return value


def available_bytes() -> float:
    """Memory this process can still take: MemAvailable, capped by a cgroup v2/v1 limit."""
    avail = math.inf
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    avail = float(line.split()[1]) * 1024
                    break
    except OSError:
        try:
            avail = float(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
        except (ValueError, OSError, AttributeError):
            pass
    for limit_file, usage_file in (
        ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
        ("/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory/memory.usage_in_bytes"),
    ):
        try:
            with open(limit_file) as fh:
                raw = fh.read().strip()
            if raw == "max":
                continue
            limit = float(raw)
            with open(usage_file) as fh:
                used = float(fh.read().strip())
            if limit < 2**60:
                avail = min(avail, max(limit - used, 0.0))
        except (OSError, ValueError):
            continue
    return avail


def human(n: float) -> str:
    """``1.5 GB``-style text (powers of 1024)."""
    if not math.isfinite(n):
        return "unlimited"
    for unit, scale in (("TB", 2**40), ("GB", 2**30), ("MB", 2**20), ("KB", 2**10)):
        if n >= scale:
            v = n / scale
            return f"{v:.0f} {unit}" if v >= 100 else f"{v:.1f} {unit}" if v >= 10 else f"{v:.2f} {unit}"
    return f"{int(n)} bytes"


def limit_bytes(max_memory: MaxMemory = None) -> tuple[float, str]:
    """The limit in bytes and how it was set (for messages)."""
    given = parse_size(max_memory)
    if given is not None:
        return given, f"{param('max_memory')}={human(given)}"
    avail = available_bytes()
    return DEFAULT_FRACTION * avail, f"{DEFAULT_FRACTION:.0%} of the {human(avail)} available"


def check(nbytes: float, what: str, max_memory: MaxMemory = None, advice: str = "") -> None:
    """Refuse (``ResourceError``) if ``nbytes`` exceeds the limit.

    ``what`` says where the size comes from, e.g. ``"200 workers × 1,000²
    classes"``; ``advice`` what to do instead.
    """
    limit, how = limit_bytes(max_memory)
    if nbytes <= limit:
        return
    tip = f"{advice}; " if advice else ""
    raise ResourceError(
        f"this needs ~{human(nbytes)} ({what}), more than the limit of {human(limit)} ({how}); "
        f"{tip}or raise {param('max_memory')} if the machine really has the memory"
    )


#: Bytes ``json.loads`` may build per structural character (``[ { , :``): one Python object (a list, a dict,
#: a float, a big int) and its slot in the container holding it, plus, for a checked document, a copy of the
#: slot while its lists are flattened and the float64 it becomes.  Measured peaks (tracemalloc, Python
#: 3.11): 52 bytes per ``[[]],``, 36 per ``1.5,``, 64 per ``{"a":[]},``, 78 per ``"k1":0,`` of one large
#: object; tests/test_memory.py checks the bound against such documents.
JSON_BYTES_PER_STRUCTURE = 128
#: Bytes per quote: the header of the string object it opens or closes (two quotes per string).
JSON_BYTES_PER_QUOTE = 48


def json_parse_bytes(text: bytes | str) -> float:
    """An upper bound on the memory parsing ``text`` as JSON takes, from counts of a few characters.

    The decoded text itself (1 byte per character, 4 when any is not
    ASCII) and the strings' contents (as much again), plus
    :data:`JSON_BYTES_PER_STRUCTURE` per ``[``, ``{``, ``,``, ``:`` and
    :data:`JSON_BYTES_PER_QUOTE` per ``"``.  Characters inside strings
    are counted too, which only raises the bound.  O(len(text)), no copy.
    """
    if isinstance(text, str):
        structure, quotes = sum(text.count(m) for m in "[{,:"), text.count('"')
    else:
        structure, quotes = sum(text.count(m) for m in (b"[", b"{", b",", b":")), text.count(b'"')
    per_byte = 2.0 if text.isascii() else 8.0
    return JSON_BYTES_PER_STRUCTURE * structure + JSON_BYTES_PER_QUOTE * quotes + per_byte * len(text) + 65536.0


__all__ = ["json_parse_bytes", "parse_size", "available_bytes", "limit_bytes", "check", "human", "MaxMemory",
           "DEFAULT_FRACTION"]
