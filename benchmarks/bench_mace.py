"""MACE speed, crowdagg beside crowd-kit 1.4.2 in one run: seconds per iteration on the same synthetic crowds.

    .venv/bin/python benchmarks/bench_mace.py [--answers 100000 1000000] [--no-crowdkit] [--json OUT]

The crowds: :func:`synth.make_crowd` (``benchmarks/synth.py``, seed 0, K = 5:
answers // 5 tasks of 5 distinct workers, max(100, answers // 5,000)
one-coin workers), the same arrays for both tools.

* crowdagg: ``aggregate(data, "mace", n_init=1)`` (50 iterations) on the
  prepared AnnotationSet after a warm-up fit (no compilation), its wall time
  divided by its 50 iterations -- the start's E-step included, so slightly
  against us; and the default fit (10 restarts) once, whole;
* crowd-kit: ``MACE(n_restarts=1, n_iter=1)`` on the same answers as a
  DataFrame; its iteration is the time spent in its loop's
  ``_variational_m_step`` and ``_e_step`` (timed by wrapping the fitted
  instance's methods; crowd-kit's code is not changed), after its set-up and
  first E-step.  The fit is stopped once that iteration is timed (its final
  E-step, a copy of the loop's, is not run): one crowd-kit run a size.  At
  1M answers that is about 2.4 s to its first iteration and 1.2-1.6 s an
  E-step (``results/mace_speed.json``: 1.15 s; the README's table), not the
  minutes the issue measured.

Prints a Markdown table; ``--json`` writes the figures.
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
import synth  # noqa: E402

K = 5


class _Timed(Exception):
    """Raised inside crowd-kit's fit once its first iteration is timed."""


def crowd(n_answers: int):
    task, worker, label, truth, n_tasks, n_workers = synth.make_crowd(n_answers, K, 0)
    return task, worker, label, truth, n_tasks, n_workers


def ours(arrays) -> dict:
    from crowdagg.data.annotations import AnnotationSet
    from crowdagg.methods.api import aggregate

    task, worker, label, truth, n_tasks, n_workers = arrays
    data = AnnotationSet.from_codes(task, worker, label, n_tasks=n_tasks, n_workers=n_workers, n_classes=K)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = time.perf_counter()
        fit = aggregate(data, "mace", n_init=1)
        seconds = time.perf_counter() - t
        t = time.perf_counter()
        default = aggregate(data, "mace")
        default_seconds = time.perf_counter() - t
    return {"seconds": seconds, "iterations": fit.n_iter, "per_iteration": seconds / fit.n_iter,
            "default_seconds": default_seconds, "default_restarts": 10,
            "accuracy": float((fit.labels == truth).mean()), "default_accuracy": float((default.labels == truth).mean())}


def theirs(arrays) -> dict:
    import pandas as pd
    from crowdkit.aggregation import MACE

    task, worker, label = arrays[:3]
    frame = pd.DataFrame({"task": task, "worker": worker, "label": label})
    model = MACE(n_restarts=1, n_iter=1)
    spent = {"m_step": 0.0, "e_step": 0.0, "e_steps": 0}
    e_step, m_step = model._e_step, model._variational_m_step

    def timed_e_step(*args, **kwargs):
        spent["e_steps"] += 1
        t = time.perf_counter()
        out = e_step(*args, **kwargs)
        if spent["e_steps"] == 2:  # the loop's E-step: the iteration is timed, the fit need not go on
            spent["e_step"] = time.perf_counter() - t
            raise _Timed
        return out

    def timed_m_step(*args, **kwargs):
        t = time.perf_counter()
        try:
            return m_step(*args, **kwargs)
        finally:
            spent["m_step"] = time.perf_counter() - t

    model._e_step, model._variational_m_step = timed_e_step, timed_m_step
    t = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            model.fit(frame)
        except _Timed:
            pass
    total = time.perf_counter() - t
    return {"seconds_to_first_iteration": total, "m_step": spent["m_step"], "e_step": spent["e_step"],
            "per_iteration": spent["m_step"] + spent["e_step"]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    common.speed_options(ap)
    args = ap.parse_args(argv)
    from crowdagg.core import threads

    no_crowdkit = common.without_crowdkit(args.no_crowdkit)
    ours(crowd(5_000))  # compile (or load) the kernels
    rows = []
    for n in args.answers:
        arrays = crowd(n)
        row = {"answers": n, "tasks": arrays[4], "workers": arrays[5], "crowdagg": ours(arrays)}
        rows.append(common.with_crowdkit(row, None if no_crowdkit else partial(theirs, arrays)))
        print(json.dumps(row), file=sys.stderr)
    print(common.machine())
    print("| answers | crowdagg mace s/iteration | crowd-kit MACE s/iteration | speed-up | crowdagg default fit "
          "(10 restarts × 50) s | accuracy |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        ca = r["crowdagg"]
        print(f"| {r['answers']:,} | {ca['per_iteration']:.4f} | " + common.crowdkit_cells(r)
              + f" {ca['default_seconds']:.2f} | {ca['default_accuracy']:.4f} |")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"rows": rows, "threads": threads.count(), "classes": K,
                                         "machine": f"{common.processor()}, {os.cpu_count()} cores"}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
