"""Run calls that must be refused, not crash the interpreter, in a fresh interpreter of their own."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path


def refusals(prelude: str, calls: dict[str, str]) -> dict[str, str]:
    """Each call (a Python expression, after ``prelude``) run in one fresh interpreter: name -> the message of the
    crowdagg error it raised, or ``"accepted"``.  Asserts that the interpreter survived them all (a segfault or a
    heap corruption kills it)."""
    script = (
        "import json, numpy as np\n"
        "from crowdagg.errors import DataError, ResourceError, UsageError\n"
        f"{prelude}\n"
        "out = {}\n"
        f"for name, call in {calls!r}.items():\n"
        "    try:\n"
        "        eval(call)\n"
        "        out[name] = 'accepted'\n"
        "    except (DataError, UsageError, ResourceError) as exc:\n"
        "        out[name] = str(exc)\n"
        "print(json.dumps(out))\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                          cwd=Path(__file__).resolve().parents[1])
    assert proc.returncode == 0, f"crashed (exit {proc.returncode}): {proc.stderr[-2000:]}"
    return json.loads(proc.stdout.strip().splitlines()[-1])
