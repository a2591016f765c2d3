"""Zero-based skill speed, crowdagg beside crowd-kit 1.4.2 in one run: seconds per iteration.

    .venv/bin/python benchmarks/bench_zbs.py [--answers 100000 1000000] [--crowdkit-iter 2] [--repeats 3]
                                             [--ids int|str] [--no-crowdkit] [--json OUT]

The crowd (the issue's): ``simulate(n_answers // 10, 1000, 5, 10, model="onecoin", seed=0)`` -- 1,000
one-coin workers of accuracy U(.6, .9), K = 5, 10 answers a task (100,000 tasks at 1M answers).

* crowdagg: ``aggregate(data, "zbs")`` with its defaults (100 iterations) on the prepared AnnotationSet,
  after a warm-up fit (no compilation), its wall time divided by its iterations -- the final vote included;
* crowd-kit: ``ZeroBasedSkill(n_iter=N).fit`` (``--crowdkit-iter``, default 2: each of its iterations is the
  same weighted majority vote and accuracy over the whole frame, so a few give its rate) on the same answers
  as a DataFrame -- int64 columns, or with ``--ids str`` task and worker names as text (``t17``, ``w3``), as a
  CSV gives them --, its wall time divided by N (its set-up, the starting skills, is one ``unique``).  Needs
  crowd-kit installed (the test extra).

Each side's time is the least of ``--repeats`` runs (the machine may be shared).  crowdagg's iterations after
the first vote again only the tasks whose label may have changed, and stop working at a fixed point (no skill
moved): its time per iteration is an average over such iterations, so the table also gives its whole fit with
``max_iter=1`` (the start, one iteration voting every task, the final vote) -- what a single full iteration
costs.

Prints a Markdown table with the ratio; ``--json`` writes the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings
from functools import partial

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402


def crowd(n_answers: int):
    from crowdagg.simulate import simulate

    return simulate(n_answers // 10, 1000, 5, 10, model="onecoin", seed=0)


def ours(data, repeats: int = 1) -> dict:
    from crowdagg.methods.api import aggregate

    seconds = one = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        fit = aggregate(data, "zbs")
        seconds = min(seconds, time.perf_counter() - t)
        t = time.perf_counter()
        aggregate(data, "zbs", max_iter=1)
        one = min(one, time.perf_counter() - t)
    return {"seconds": seconds, "iterations": fit.n_iter, "per_iteration": seconds / fit.n_iter,
            "one_iteration_fit": one, "labels": fit.labels}


def theirs(sim, n_iter: int, repeats: int, ids: str) -> dict:
    import pandas as pd
    from crowdkit.aggregation import ZeroBasedSkill

    frame = pd.DataFrame({"task": sim.task, "worker": sim.worker, "label": sim.label})
    if ids == "str":
        frame["task"] = "t" + frame["task"].astype(str)
        frame["worker"] = "w" + frame["worker"].astype(str)
    seconds = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ZeroBasedSkill(n_iter=n_iter).fit(frame)
        seconds = min(seconds, time.perf_counter() - t)
    return {"seconds": seconds, "iterations": n_iter, "per_iteration": seconds / n_iter}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    common.speed_options(ap)
    ap.add_argument("--crowdkit-iter", type=int, default=2, help="crowd-kit's iterations timed (default %(default)s)")
    ap.add_argument("--repeats", type=int, default=3, help="runs of each side, the least time kept (default "
                    "%(default)s)")
    ap.add_argument("--ids", choices=("int", "str"), default="int", help="crowd-kit's task and worker columns: "
                    "int64, or names as text (default %(default)s)")
    args = ap.parse_args(argv)
    from crowdagg.core import threads

    no_crowdkit = common.without_crowdkit(args.no_crowdkit)
    ours(crowd(5_000).to_annotations())  # compile (or load) the kernels
    rows = []
    for n in args.answers:
        sim = crowd(n)
        row = common.scored(n, ours(sim.to_annotations(), args.repeats), sim.truth)
        their_fit = None if no_crowdkit else partial(theirs, sim, args.crowdkit_iter, args.repeats, args.ids)
        rows.append(common.with_crowdkit(row, their_fit))
        print(json.dumps(row), file=sys.stderr)
    print(f"{common.machine()}; crowd-kit ids: {args.ids}; least of {args.repeats} runs")
    print("| answers | crowdagg zbs s/iteration (iterations) | crowd-kit ZeroBasedSkill s/iteration | speed-up | "
          "accuracy | crowdagg fit of 1 iteration s |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['answers']:,} | {r['crowdagg']['per_iteration']:.4f} ({r['crowdagg']['iterations']}) | "
              + common.crowdkit_cells(r)
              + f" {r['accuracy']:.4f} | {r['crowdagg']['one_iteration_fit']:.4f} |")
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "threads": threads.count(), "crowdkit_ids": args.ids,
                                         "repeats": args.repeats}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
