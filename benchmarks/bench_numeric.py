"""The numeric methods (mean, median, catd, crh): error on the emotion set, and time on a 1M-answer crowd.

    .venv/bin/python benchmarks/bench_numeric.py [--answers 1000000] [--repeats 3] [--json OUT]

* **emotion** (``../shared/datasets/emotion``: 700 tasks, 38 workers, 10
  answers a task on -100 .. 100): ``load_numeric(labels.csv,
  duplicates="last")``, every numeric method with its defaults; mean absolute
  error, root-mean-square error and Pearson correlation against
  ``truth.csv`` on the tasks with truth, iterations;
* **speed**: a simulated continuous crowd of ``--answers`` answers (5 a
  task from distinct workers, ``max(100, answers // 5000)`` workers, truth
  ~ N(50, 20²), worker m's answers truth + N(0, σ_m²), σ_m ~ U(1, 20),
  seed 0), built with ``NumericAnswers.from_codes``; each method's fit after
  a warm-up (numba compiled), the best of ``--repeats``, and its RMSE
  against the simulated truth.  crowd-kit has no numeric method to compare
  with (spark-crowd's CATD and PM run on Spark).

Prints Markdown tables; ``--json`` writes the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
DATASETS = Path(os.environ.get("CROWDAGG_DATASETS", ROOT.parent / "shared" / "datasets"))


def scores(pred: np.ndarray, truth: np.ndarray) -> dict[str, float]:
    """MAE, RMSE and Pearson's r of ``pred`` against ``truth`` (same order)."""
    err = pred - truth
    return {"mae": float(np.mean(np.abs(err))), "rmse": float(np.sqrt(np.mean(err**2))),
            "pearson": float(np.corrcoef(pred, truth)[0, 1])}


def emotion(methods: list[str]) -> list[dict]:
    import pandas as pd

    from crowdagg import aggregate, load_numeric

    path = DATASETS / "emotion"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        data = load_numeric(path / "labels.csv", duplicates="last")
    truth = pd.read_csv(path / "truth.csv", dtype={"task": str}).set_index("task")["label"]
    rows = []
    for m in methods:
        t0 = time.perf_counter()
        res = aggregate(data, m)
        seconds = time.perf_counter() - t0
        pred = pd.Series(res.values, index=data.task_names)
        scored = truth.index.intersection(pred.index)
        rows.append({"method": m, **scores(pred[scored].to_numpy(), truth[scored].to_numpy().astype(float)),
                     "n_iter": res.n_iter, "seconds": seconds, "n_tasks": len(scored)})
    return rows


def crowd(n_answers: int, seed: int = 0):
    """(NumericAnswers, truth) of the simulated continuous crowd (module docstring)."""
    from crowdagg.data.numeric import NumericAnswers

    rng = np.random.Generator(np.random.PCG64(seed))
    n_tasks = n_answers // 5
    n_workers = max(100, n_answers // 5000)
    truth = rng.normal(50, 20, n_tasks)
    sigma = rng.uniform(1, 20, n_workers)
    workers = rng.integers(0, n_workers, size=(n_tasks, 5))
    while True:  # 5 distinct workers a task
        s = np.sort(workers, axis=1)
        bad = np.flatnonzero((s[:, 1:] == s[:, :-1]).any(axis=1))
        if bad.size == 0:
            break
        workers[bad] = rng.integers(0, n_workers, size=(bad.size, 5))
    task = np.repeat(np.arange(n_tasks), 5)
    worker = workers.reshape(-1)
    value = truth[task] + rng.normal(0, 1, task.size) * sigma[worker]
    return NumericAnswers.from_codes(task, worker, value, n_tasks=n_tasks, n_workers=n_workers), truth


def speed(methods: list[str], n_answers: int, repeats: int) -> list[dict]:
    from crowdagg import aggregate

    t0 = time.perf_counter()
    data, truth = crowd(n_answers)
    build = time.perf_counter() - t0
    small, _ = crowd(1000)
    rows = []
    for m in methods:
        aggregate(small, m)  # numba compiled or loaded before timing
        best, res = np.inf, None
        for _ in range(repeats):
            t0 = time.perf_counter()
            res = aggregate(data, m)
            best = min(best, time.perf_counter() - t0)
        rows.append({"method": m, "seconds": best, "n_iter": res.n_iter,
                     "rmse": scores(res.values, truth)["rmse"], "answers": data.n_answers,
                     "tasks": data.n_tasks, "workers": data.n_workers, "build_seconds": build})
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--answers", type=int, default=1_000_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    from crowdagg.methods.registry import METHODS

    methods = [n for n, m in METHODS.items() if m.kind == "numeric"]
    out: dict = {"methods": methods}
    if (DATASETS / "emotion" / "labels.csv").exists():
        out["emotion"] = emotion(methods)
        print("emotion (700 tasks, 10 answers each, -100 .. 100; duplicates='last'):\n")
        print("| method | MAE | RMSE | Pearson r | iterations |\n|---|---:|---:|---:|---:|")
        for r in out["emotion"]:
            print(f"| {r['method']} | {r['mae']:.3f} | {r['rmse']:.3f} | {r['pearson']:.4f} | {r['n_iter']} |")
    else:
        print(f"emotion not found under {DATASETS}: its table is left out", file=sys.stderr)
    out["speed"] = speed(methods, args.answers, args.repeats)
    first = out["speed"][0]
    print(f"\nsimulated crowd: {first['answers']:,} answers, {first['tasks']:,} tasks, {first['workers']:,} workers "
          f"(best of {args.repeats}; built in {first['build_seconds']:.2f} s):\n")
    print("| method | seconds | iterations | RMSE vs truth |\n|---|---:|---:|---:|")
    for r in out["speed"]:
        print(f"| {r['method']} | {r['seconds']:.3f} | {r['n_iter']} | {r['rmse']:.3f} |")
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
