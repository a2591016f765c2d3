#!/usr/bin/env bash
# All benchmarks, in order: crowd-kit reference figures (isolated .venv-bench),
# then crowdagg, whose tables include the crowd-kit columns.
# Usage (from the repository root, after the README's first set-up command):  bash benchmarks/run.sh [--no-10m]
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p benchmarks/results
bash benchmarks/setup_crowdkit.sh
.venv-bench/bin/python benchmarks/crowdkit_reference.py --json benchmarks/results/crowdkit_reference.json
.venv-bench/bin/python benchmarks/crowdkit_speed.py --answers 1000000 --classes 5 --seed 0 --json benchmarks/results/crowdkit_speed_1M.json
sizes="1000000 10000000"
if [ "${1:-}" = "--no-10m" ]; then
    sizes="1000000"
else
    .venv-bench/bin/python benchmarks/crowdkit_speed.py --answers 10000000 --classes 5 --seed 0 --repeats 1 --json benchmarks/results/crowdkit_speed_10M.json
fi
.venv/bin/python benchmarks/bench_crowdagg.py accuracy
.venv/bin/python benchmarks/bench_crowdagg.py speed --answers $sizes
.venv/bin/python benchmarks/bench_crowdagg.py cli --answers 1000000
.venv/bin/python benchmarks/bench_warm_start.py web music
.venv/bin/python benchmarks/bench_collapse.py
.venv/bin/python benchmarks/bench_glad.py --answers 100000 1000000 --json benchmarks/results/glad_speed.json
