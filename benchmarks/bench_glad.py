"""GLAD speed, crowdagg beside crowd-kit 1.4.2 in one run: seconds per EM iteration, and the whole CLI run.

    .venv/bin/python benchmarks/bench_glad.py [--answers 100000 1000000] [--no-crowdkit] [--json OUT]

The crowd: ``simulate(n_answers // 5, 1000, 5, 5, model="glad", seed=0)``
(GLAD's own model: 1,000 workers, K = 5, 5 answers a task, log β ~ N(0, 1)).

* crowdagg: ``aggregate(data, "glad")`` with its defaults on the prepared
  AnnotationSet (after a warm-up fit, so no compilation), its wall time
  divided by its EM iterations -- the start's M-step and E-step included;
* crowd-kit: ``GLAD(n_iter=1)`` on the same answers as a DataFrame; its
  EM iteration is the time spent in its ``_e_step``, ``_m_step`` and
  ``_compute_Q`` after its set-up (timed by wrapping the fitted instance's
  methods; crowd-kit's code is not changed).  crowd-kit needs crowd-kit
  installed (the test extra);
* the CLI: ``crowdagg aggregate answers.csv -m glad > /dev/null`` on the
  largest size, written as CSV first (reading, EM and writing; one process,
  kernels already compiled by the warm-up).

Prints a Markdown table; ``--json`` writes the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import warnings
from functools import partial
from pathlib import Path

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def crowd(n_answers: int):
    from crowdagg.simulate import simulate

    return simulate(n_answers // 5, 1000, 5, 5, model="glad", seed=0)


def ours(data) -> dict:
    from crowdagg.methods.api import aggregate

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = time.perf_counter()
        fit = aggregate(data, "glad")
        seconds = time.perf_counter() - t
    return {"seconds": seconds, "iterations": fit.n_iter, "per_iteration": seconds / fit.n_iter, "labels": fit.labels}


def theirs(sim) -> dict:
    import pandas as pd
    from crowdkit.aggregation import GLAD

    frame = pd.DataFrame({"task": sim.task, "worker": sim.worker, "label": sim.label})
    model = GLAD(n_iter=1, tol=-np.inf)
    spent = {"loop": 0.0, "started": False}

    def timed(name):
        method = getattr(model, name)

        def wrapper(*args, **kwargs):
            t = time.perf_counter()
            try:
                return method(*args, **kwargs)
            finally:
                if spent["started"]:
                    spent["loop"] += time.perf_counter() - t

        return wrapper

    # The set-up runs one E-step and one loss before the loop: those calls are not an iteration.
    calls = {"n": 0}
    e_step = timed("_e_step")

    def first_e_steps(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 2:  # the loop's first E-step
            spent["started"] = True
        return e_step(*args, **kwargs)

    model._e_step = first_e_steps
    model._m_step = timed("_m_step")
    model._compute_Q = timed("_compute_Q")
    t = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.fit(frame)
    total = time.perf_counter() - t
    return {"seconds": total, "iterations": len(model.loss_history_), "per_iteration": spent["loop"]}


def cli_run(sim, path: Path) -> float:
    sim_frame = np.column_stack([sim.task, sim.worker, sim.label])
    with path.open("w") as f:
        f.write("task,worker,label\n")
        np.savetxt(f, sim_frame, fmt="t%d,w%d,%d")
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    t = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "crowdagg", "aggregate", str(path), "-m", "glad"],
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, cwd=ROOT)
    seconds = time.perf_counter() - t
    if proc.returncode:
        raise SystemExit(proc.stderr.decode())
    return seconds


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    common.speed_options(ap)
    args = ap.parse_args(argv)
    from crowdagg.core import threads

    no_crowdkit = common.without_crowdkit(args.no_crowdkit)
    ours(crowd(5_000).to_annotations())  # compile (or load) the kernels, import scipy
    rows = []
    for n in args.answers:
        sim = crowd(n)
        row = common.scored(n, ours(sim.to_annotations()), sim.truth)
        rows.append(common.with_crowdkit(row, None if no_crowdkit else partial(theirs, sim)))
        print(json.dumps(row), file=sys.stderr)
    with tempfile.TemporaryDirectory() as tmp:
        cli = cli_run(crowd(max(args.answers)), Path(tmp) / "answers.csv")
    print(common.machine())
    print("| answers | crowdagg glad s/iteration (iterations) | crowd-kit GLAD s/iteration | speed-up | accuracy |")
    print("|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['answers']:,} | {r['crowdagg']['per_iteration']:.4f} ({r['crowdagg']['iterations']}) | "
              + common.crowdkit_cells(r) + f" {r['accuracy']:.4f} |")
    print(f"\nCLI `crowdagg aggregate` on {max(args.answers):,} answers (CSV in, labels out): {cli:.2f} s")
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "cli_seconds": cli, "cli_answers": max(args.answers),
                                         "threads": threads.count()}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
