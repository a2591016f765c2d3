"""Speed / memory of crowd-kit 1.4.2 DawidSkene on a synthetic Dawid-Skene crowd.

crowd-kit is NOT a dependency of crowdagg. It is installed only for benchmarking,
into a separate, isolated virtualenv ``.venv-bench`` at the repository root:

    python3 -m venv .venv-bench && .venv-bench/bin/pip install crowd-kit==1.4.2 psutil
    # or, idempotently:  bash benchmarks/setup_crowdkit.sh

Run (from the repository root; use one fresh process per size so that the peak
RSS belongs to that size only):

    .venv-bench/bin/python benchmarks/crowdkit_speed.py --answers 1000000 --classes 5 --seed 0 [--iters 5] [--repeats 3] [--json OUT]

Synthetic crowd (deterministic for a given --answers/--classes/--seed, numpy PCG64):
  * n_tasks = answers // 5, true labels uniform over ``classes`` classes;
  * n_workers = max(100, answers // 5000); every task gets 5 answers from 5
    DISTINCT workers drawn uniformly at random;
  * one-coin Dawid-Skene workers: accuracy ~ U(0.6, 0.9); a wrong answer is
    uniform over the other classes.
The crowd-kit input is a DataFrame with int64 columns task, worker, label.

Timing: crowd-kit DawidSkene stops when ``new_elbo - old_elbo < tol``
(crowdkit/aggregation/classification/dawid_skene.py, ``DawidSkene.fit``), so the
fits here use ``tol=-inf`` and assert ``len(loss_history_) == n_iter``.  The fit is
timed with n_iter = N1 (=2) and N2 (=N1 + --iters); the per-EM-iteration time is
(t(N2) - t(N1)) / (N2 - N1), which cancels the one-off setup (majority-vote
initialisation + first M-step).  One crowd-kit iteration = E-step + M-step + ELBO
(the ELBO is computed every iteration for the stopping rule).  Each fit is run
--repeats times and the minimum is kept.  Peak memory is the process peak RSS
(resource.getrusage ru_maxrss), which includes the generated data.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import resource
import sys
import time
from importlib.metadata import version

import numpy as np
import pandas as pd
from crowdkit.aggregation import DawidSkene

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import synth  # noqa: E402

ANSWERS_PER_TASK = synth.ANSWERS_PER_TASK


def make_crowd(n_answers: int, n_classes: int, seed: int):
    """Deterministic synthetic crowd (benchmarks/synth.py); returns (DataFrame, truth, n_tasks, n_workers)."""
    task, worker, label, truth, n_tasks, n_workers = synth.make_crowd(n_answers, n_classes, seed)
    return pd.DataFrame({"task": task, "worker": worker, "label": label}), truth, n_tasks, n_workers


def timed_fit(df: pd.DataFrame, n_iter: int, repeats: int):
    best, model = float("inf"), None
    for _ in range(repeats):
        gc.collect()
        m = DawidSkene(n_iter=n_iter, tol=-np.inf)
        t0 = time.perf_counter()
        m.fit(df)
        dt = time.perf_counter() - t0
        assert len(m.loss_history_) == n_iter, (len(m.loss_history_), n_iter)
        if dt < best:
            best, model = dt, m
    return best, model


def peak_rss_mib() -> float:
    kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    return kb / 1024.0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--answers", type=int, default=1_000_000)
    ap.add_argument("--classes", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--iters", type=int, default=5, help="N2 - N1 (default %(default)s)")
    ap.add_argument("--n1", type=int, default=2, help="N1 (default %(default)s)")
    ap.add_argument("--repeats", type=int, default=3, help="runs per fit, min kept (default %(default)s)")
    ap.add_argument("--json", default=None, help="also write the results to this JSON file")
    args = ap.parse_args(argv)
    if args.classes < 2 or args.answers < ANSWERS_PER_TASK or args.iters < 1 or args.n1 < 1:
        ap.error("need --classes >= 2, --answers >= 5, --iters >= 1, --n1 >= 1")

    t0 = time.perf_counter()
    df, truth, n_tasks, n_workers = make_crowd(args.answers, args.classes, args.seed)
    gen_s = time.perf_counter() - t0
    rss_after_gen = peak_rss_mib()

    n1, n2 = args.n1, args.n1 + args.iters
    t1, _ = timed_fit(df, n1, args.repeats)
    t2, m2 = timed_fit(df, n2, args.repeats)
    per_iter = (t2 - t1) / (n2 - n1)
    setup = t1 - n1 * per_iter
    acc = float((m2.labels_.reindex(np.arange(n_tasks)).to_numpy() == truth).mean())
    peak = peak_rss_mib()

    res = {
        "tool": "crowd-kit DawidSkene",
        "versions": {p: version(p) for p in ("crowd-kit", "pandas", "numpy")},
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "answers": len(df), "tasks": n_tasks, "workers": n_workers, "classes": args.classes,
        "seed": args.seed, "n1": n1, "n2": n2, "repeats": args.repeats,
        "generate_s": gen_s, "fit_n1_s": t1, "fit_n2_s": t2,
        "ms_per_iter": per_iter * 1e3, "setup_s": setup,
        "accuracy_after_n2": acc,
        "peak_rss_after_generate_mib": rss_after_gen, "peak_rss_mib": peak,
    }

    print(f"crowd-kit {res['versions']['crowd-kit']}, pandas {res['versions']['pandas']}, "
          f"numpy {res['versions']['numpy']}, python {res['python']}, {res['cpus']} CPUs")
    print(f"synthetic crowd: {len(df)} answers, {n_tasks} tasks, {n_workers} workers, "
          f"{args.classes} classes, seed {args.seed} (generated in {gen_s:.2f} s)\n")
    print(f"| answers | fit n_iter={n1} (s) | fit n_iter={n2} (s) | ms / EM iteration | setup (s) | acc | peak RSS (MiB) |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    print(f"| {len(df)} | {t1:.3f} | {t2:.3f} | {per_iter * 1e3:.1f} | {setup:.3f} | {acc:.4f} | {peak:.0f} |")
    print(f"\n(peak RSS right after generating the data: {rss_after_gen:.0f} MiB; "
          f"tol=-inf, all iterations verified via len(loss_history_); min of {args.repeats} runs)")

    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w") as f:
            json.dump(res, f, indent=2)
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
