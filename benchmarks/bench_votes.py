"""Fit time of the vote family (and GLAD) on a simulated crowd: seconds per fit, the best of ``--repeat``.

    PYTHONPATH=. .venv/bin/python benchmarks/bench_votes.py [--answers 1000000] [--methods mv wmv wawa glad]

The crowd: ``simulate(n_answers // 5, 1000, 5, 5, seed=0)`` (1,000 workers,
K = 5, 5 answers a task).  Each method runs once on a small crowd first
(compiling its kernels), then ``--repeat`` times on the prepared
AnnotationSet; the fit alone is timed (no reading, no writing): wall and CPU seconds,
the best of each (on a shared machine, CPU seconds with
``CROWDAGG_THREADS=1`` compare the work when wall times are noise).  Run it
with ``PYTHONPATH`` on two checkouts in one shell to compare them side by
side.  Prints one line per method; ``--json`` writes the figures.
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--answers", type=int, default=1_000_000)
    ap.add_argument("--methods", nargs="+", default=["mv", "wmv", "wawa"])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)

    import crowdagg
    from crowdagg.methods.api import aggregate
    from crowdagg.simulate import simulate

    data = simulate(args.answers // 5, 1000, 5, 5, seed=0).to_annotations()
    warm = simulate(2_000, 50, 5, 5, seed=1).to_annotations()
    rows = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for method in args.methods:
            aggregate(warm, method)
            times, cpu, n_iter = [], [], 0
            for _ in range(args.repeat):
                t, c = time.perf_counter(), time.process_time()
                fit = aggregate(data, method)
                times.append(time.perf_counter() - t)
                cpu.append(time.process_time() - c)
                n_iter = fit.n_iter
            rows[method] = {"seconds": min(times), "cpu_seconds": min(cpu), "iterations": n_iter}
            print(f"{method:5s} {data.n_answers:>10,} answers  {min(times):7.3f} s  {min(cpu):7.3f} s CPU  "
                  f"({n_iter} iterations)  [{Path(crowdagg.__file__).parent.parent}]", flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
