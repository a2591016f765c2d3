#!/usr/bin/env bash
# Create (idempotently) the isolated benchmark-only virtualenv holding crowd-kit 1.4.2.
# crowd-kit is NOT a dependency of crowdagg; it is used only by benchmarks/crowdkit_*.py
# as a reference implementation. Usage (from anywhere):  bash benchmarks/setup_crowdkit.sh
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv-bench"
PY="${PYTHON:-python3}"
if [ ! -x "$VENV/bin/python" ]; then
    "$PY" -m venv "$VENV"
fi
if ! "$VENV/bin/python" -c 'import crowdkit, psutil, sys; from importlib.metadata import version; sys.exit(version("crowd-kit") != "1.4.2")' 2>/dev/null; then
    "$VENV/bin/pip" install --quiet "crowd-kit==1.4.2" psutil
fi
"$VENV/bin/python" - <<'PY'
from importlib.metadata import version
print("crowd-kit", version("crowd-kit"), "| pandas", version("pandas"), "| numpy", version("numpy"),
      "| scipy", version("scipy"), "| psutil", version("psutil"))
PY
