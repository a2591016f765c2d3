"""M-MSR at 1,000 and 10,000 workers: crowdagg's time and peak memory beside crowd-kit 1.4.2's, in one run.

    .venv/bin/python benchmarks/bench_mmsr.py [--answers 1000000] [--workers 1000 10000]
        [--crowdkit-limit 4G] [--crowdkit-timeout 600] [--no-crowdkit] [--json OUT]

The crowd: ``benchmarks/synth.py``'s ``make_crowd(answers, 5, seed 0, n_workers=W)``
(K = 5, five distinct workers a task, one-coin workers of accuracy
U(.6, .9)).  Every measurement runs in a child process of its own, so that
its peak RSS (``VmHWM``) is its own:

* crowdagg: ``aggregate(data, "mmsr")`` with its defaults on the prepared
  AnnotationSet (kernels compiled first on a small crowd), its wall time,
  the child's peak RSS, the memory the fit declared before running
  (``MMSR.memory_needed``), the co-labelled pairs, the accuracy against the
  crowd's truth;
* crowd-kit: ``MMSR().fit(frame)`` on the same answers as a DataFrame, under
  an address-space limit (``--crowdkit-limit``, ``RLIMIT_AS``; the machine is
  shared) and a time limit.  Its arrays are dense: the observations
  workers × tasks, the common tasks and the covariation workers × workers,
  and its sign graph (workers + positive pairs)²; an allocation beyond the
  limit fails with numpy's ``MemoryError``, whose message -- what it asked
  for -- is printed.  The sizes of those dense arrays at each crowd are
  printed beside it, computed from the crowd (what crowd-kit would ask for
  were it given the time and the memory).

Prints a Markdown table; ``--json`` writes the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
K = 5


def crowd(n_answers: int, n_workers: int):
    sys.path.insert(0, str(ROOT))
    from benchmarks.synth import make_crowd

    return make_crowd(n_answers, K, 0, n_workers=n_workers)


def peak_mib() -> float:
    sys.path.insert(0, str(ROOT))
    from benchmarks.procstat import status_mib

    return status_mib("VmHWM")


def ours(n_answers: int, n_workers: int) -> dict:
    from crowdagg.data.annotations import AnnotationSet
    from crowdagg.methods.api import aggregate, get_method

    def annotations(n: int, w: int):
        task, worker, label, truth, n_tasks, nw = crowd(n, w)
        return AnnotationSet.from_codes(task, worker, label, n_tasks=n_tasks, n_workers=nw, n_classes=K), truth

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        aggregate(annotations(5_000, 100)[0], "mmsr")  # compile (or load) the kernels
        data, truth = annotations(n_answers, n_workers)
        declared = get_method("mmsr")().memory_needed(data)[0]
        t = time.perf_counter()
        fit = aggregate(data, "mmsr")
        seconds = time.perf_counter() - t
    return {"seconds": seconds, "iterations": fit.n_iter, "peak_rss_mib": peak_mib(),
            "declared_mib": declared / 2**20, "accuracy": float((fit.labels == truth).mean()),
            "negative_skills": int((fit.worker_params["skill"] < 0).sum())}


def crowdkit_arrays(n_answers: int, n_workers: int) -> dict:
    """The dense arrays crowd-kit's MMSR allocates on this crowd, in bytes (float64)."""
    sys.path.insert(0, str(ROOT))
    from crowdagg.data.annotations import AnnotationSet
    from crowdagg.engine import LocalEngine
    from crowdagg.kernels.cooc import co_occurrence

    task, worker, label, _, n_tasks, nw = crowd(n_answers, n_workers)
    data = AnnotationSet.from_codes(task, worker, label, n_tasks=n_tasks, n_workers=nw, n_classes=K)
    stats = co_occurrence(LocalEngine(data))
    agree = np.trace(stats.joint, axis1=1, axis2=2) / stats.n_tasks
    positive = int(np.count_nonzero(K * agree - 1 > 0))
    return {"observations": 8 * nw * n_tasks, "covariation": 8 * nw * nw,
            "sign_graph": 8 * (nw + positive) ** 2, "pairs": stats.n_pairs, "positive_pairs": positive}


def theirs(n_answers: int, n_workers: int, limit: int) -> dict:
    import pandas as pd
    from crowdkit.aggregation import MMSR

    task, worker, label, truth, _, _ = crowd(n_answers, n_workers)
    frame = pd.DataFrame({"task": task, "worker": worker, "label": label})
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    t = time.perf_counter()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = MMSR().fit(frame)
            labels = model.predict(frame)
    except MemoryError as exc:
        return {"seconds": time.perf_counter() - t, "error": f"MemoryError: {exc}", "peak_rss_mib": peak_mib()}
    seconds = time.perf_counter() - t
    return {"seconds": seconds, "peak_rss_mib": peak_mib(), "iterations": len(model.loss_history_),
            "accuracy": float((labels.sort_index().to_numpy() == truth).mean())}


def child(kind: str, n_answers: int, n_workers: int, limit: int, timeout: float) -> dict:
    """One measurement in a fresh interpreter (its own peak RSS); a child past ``timeout`` is stopped and said."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", kind, str(n_answers), str(n_workers),
           str(limit)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    t = time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, cwd=ROOT)
    except subprocess.TimeoutExpired:
        return {"seconds": time.perf_counter() - t, "error": f"still running after {timeout:.0f} s: stopped"}
    if proc.returncode:
        tail = proc.stderr.strip().splitlines()[-1:] or [f"exit {proc.returncode}"]
        return {"seconds": time.perf_counter() - t, "error": tail[0]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def gib(n: float) -> str:
    return f"{n / 2**30:,.2f} GiB" if n < 2**40 else f"{n / 2**40:,.2f} TiB"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--answers", type=int, default=1_000_000)
    ap.add_argument("--workers", type=int, nargs="+", default=[1_000, 10_000])
    ap.add_argument("--crowdkit-limit", default="4G", help="crowd-kit's address-space limit (RLIMIT_AS)")
    ap.add_argument("--crowdkit-timeout", type=float, default=600.0, help="seconds before crowd-kit is stopped")
    ap.add_argument("--no-crowdkit", action="store_true", help="crowdagg only")
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--child", nargs=4, metavar=("KIND", "ANSWERS", "WORKERS", "LIMIT"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        kind, n, w, limit = args.child[0], int(args.child[1]), int(args.child[2]), int(args.child[3])
        print(json.dumps(ours(n, w) if kind == "ours" else theirs(n, w, limit)))
        return 0
    from crowdagg.core import memory, threads

    limit = int(memory.parse_size(args.crowdkit_limit, "crowdkit-limit") or 0)
    if not args.no_crowdkit:
        try:
            import crowdkit  # noqa: F401
        except ImportError:
            print("crowd-kit is not installed here (pip install -e '.[test]'): crowdagg only", file=sys.stderr)
            args.no_crowdkit = True
    rows = []
    for w in args.workers:
        row = {"answers": args.answers, "workers": w, "crowdagg": child("ours", args.answers, w, limit, 3600)}
        if not args.no_crowdkit:
            row["crowdkit_dense_bytes"] = crowdkit_arrays(args.answers, w)
            row["crowdkit"] = child("crowdkit", args.answers, w, limit, args.crowdkit_timeout)
        rows.append(row)
        print(json.dumps(row), file=sys.stderr)
    print(f"threads: {threads.count()}, {platform.processor() or platform.machine()}, {os.cpu_count()} cores; "
          f"crowd-kit under RLIMIT_AS {args.crowdkit_limit}, stopped after {args.crowdkit_timeout:.0f} s")
    print("| answers | workers | crowdagg mmsr s (iterations) | peak RSS | declared | accuracy | crowd-kit MMSR |"
          " crowd-kit's dense arrays |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        m, ck, dense = r["crowdagg"], r.get("crowdkit"), r.get("crowdkit_dense_bytes")
        if "error" in m:
            print(f"| {r['answers']:,} | {r['workers']:,} | failed: {m['error']} | | | | | |")
            continue
        theirs_cell = "—" if ck is None else (
            f"{ck['error']} after {ck['seconds']:.0f} s" if "error" in ck
            else f"{ck['seconds']:.1f} s, {ck['peak_rss_mib']:,.0f} MiB, accuracy {ck['accuracy']:.4f}")
        dense_cell = "—" if dense is None else (
            f"observations {gib(dense['observations'])}, covariation {gib(dense['covariation'])}, sign graph "
            f"{gib(dense['sign_graph'])} ({dense['positive_pairs']:,} positive of {dense['pairs']:,} pairs)")
        print(f"| {r['answers']:,} | {r['workers']:,} | {m['seconds']:.1f} ({m['iterations']}) | "
              f"{m['peak_rss_mib']:,.0f} MiB | {m['declared_mib']:,.0f} MiB | {m['accuracy']:.4f} | {theirs_cell} | "
              f"{dense_cell} |")
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "threads": threads.count(),
                                         "crowdkit_limit": args.crowdkit_limit,
                                         "crowdkit_timeout": args.crowdkit_timeout}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
