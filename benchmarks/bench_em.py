"""EM iteration time on the ingest benchmark's crowd (K=2, n/10 tasks with 10 answers, 2,000 workers at 100M).

    .venv/bin/python benchmarks/bench_em.py --answers 100000000

Builds the crowd of ``benchmarks/bench_ingest.py`` directly as codes (no
CSV), starts Dawid-Skene from soft majority vote, and times --iters
iterations (an M-step and the fused E-step + statistics pass each) on all
cores; prints the per-iteration times and their minimum.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_ingest  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    from crowdagg.data.annotations import AnnotationSet
    from crowdagg.engine import LocalEngine
    from crowdagg.kernels import n_threads
    from crowdagg.methods.blocks import full_m_step
    from crowdagg.methods.em.ds import EMState

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--answers", type=int, default=100_000_000)
    ap.add_argument("--iters", type=int, default=8)
    args = ap.parse_args(argv)
    task, worker, label, k = bench_ingest._crowd(args.answers, 0)
    data = AnnotationSet.from_codes(task, worker, label, n_classes=k)
    del task, worker, label
    state = EMState(LocalEngine(data), None, None, full_m_step, 0.0)  # from the soft vote, no gold
    times = []
    for _ in range(args.iters):
        t = time.perf_counter()
        state.iterate()
        times.append(time.perf_counter() - t)
    print(f"{data!r}, {n_threads()} threads")
    print("ms per iteration:", " ".join(f"{1000 * x:.0f}" for x in times), f"(min {1000 * min(times):.0f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
