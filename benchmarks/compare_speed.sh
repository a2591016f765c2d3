#!/usr/bin/env bash
# DS time per EM iteration of two commits, alternately in one run on this machine:
#   bash benchmarks/compare_speed.sh BEFORE AFTER [ROUNDS] [ANSWERS[,ANSWERS...]]
# Each commit is checked out in a temporary worktree and run with its own code
# (PYTHONPATH) by this checkout's .venv; prints one line per round and commit.
set -euo pipefail
cd "$(dirname "$0")/.."
before=$1 after=$2 rounds=${3:-3} answers=${4:-1000000}
py=${PYTHON:-$PWD/.venv/bin/python}
tmp=$(mktemp -d)
trap 'for c in "$before" "$after"; do git worktree remove --force "$tmp/$c" 2>/dev/null || true; done; rm -rf "$tmp"' EXIT
for c in "$before" "$after"; do git worktree add -q --detach "$tmp/$c" "$c"; done
for r in $(seq "$rounds"); do
  for n in ${answers//,/ }; do
    for c in "$before" "$after"; do
      (cd "$tmp/$c" && PYTHONPATH="$tmp/$c" "$py" benchmarks/bench_crowdagg.py speed --answers "$n" --repeats 5 \
        --json "$tmp/$c.$r.$n.json" >/dev/null 2>&1)
      "$py" -c 'import json, sys; r = json.load(open(sys.argv[1]))["speed"][0]
print("round %s %s: %.1f ms per EM iteration (%d answers)" % (sys.argv[2], sys.argv[3], r["ms_per_iter"], r["answers"]))' \
        "$tmp/$c.$r.$n.json" "$r" "$c"
    done
  done
done
