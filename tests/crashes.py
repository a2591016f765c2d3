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


def assert_block_refusals(module: str, cases: dict[str, tuple[str, str]], task_names: bool = False) -> None:
    """Run each block-function call of ``cases`` (name -> (call, message)) in a child process, with ``module``'s
    names imported and two one-block parts defined, ``good`` and ``bad_label`` (a label code 7 of 2 classes;
    ``task_names``: the parts carry names), and assert each was refused with its message, not a crash."""
    names = ", np.array(['t'])" if task_names else ""
    part = "Part(0, 1, 0, np.array([0, 1]), np.array([0, 2]), np.array([0, 1], np.int32), np.array([0, {y}], np.int8), 2, 2"
    prelude = (
        "from crowdagg.engine import Part\n"
        f"from {module} import *\n"
        f"good = {part.format(y=1)}{names})\n"
        f"bad_label = {part.format(y=7)}{names})"
    )
    found = refusals(prelude, {name: call for name, (call, _) in cases.items()})
    for name, (_, message) in cases.items():
        assert message in found[name], (name, found[name])
