"""The Dask engine beside the local engine: Dawid-Skene on answers read from many Parquet files.

    PYTHONPATH=. .venv/bin/python benchmarks/bench_dask.py --answers 10000000 --files 20

Writes the crowd of ``benchmarks/bench_ingest.py`` (shuffled rows; K=5 below
100M answers, K=2 with 2,000 workers at 100M) as ``--files`` Parquet files
(``task``: ``t17``, ``worker``: ``w3``, ``label``: integers) under
``--dir`` (kept: a second run reuses them), then runs, each in a fresh
process:

* ``local`` -- ``load_annotations`` of the files, ``ds`` with ``tol=0``
  for ``--iters`` iterations on the local engine (all threads);
* ``dask`` -- a ``LocalCluster`` of ``--workers`` worker processes (one
  thread each), :func:`crowdagg.io.dask_read.read_distributed`, the same
  fit on the Dask engine.

and prints, for each: read and fit time, the per-iteration times (between
successive progress callbacks: an M-step on the client, the E-step and
statistics pass on the engine), the whole run (read + fit + rendering the
labels), the process's peak memory and, for Dask, each worker process's
peak.  The two engines' posteriors are checked to be bit-identical.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))


def write_files(n: int, n_files: int, directory: Path) -> list[str]:
    """The benchmark crowd of ``n`` answers in ``n_files`` Parquet files (written once)."""
    import bench_ingest
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    directory.mkdir(parents=True, exist_ok=True)
    paths = [directory / f"part-{i:03d}.parquet" for i in range(n_files)]
    if all(p.exists() for p in paths):
        return [str(p) for p in paths]
    task, worker, label, _ = bench_ingest._crowd(n, 0)
    cuts = np.linspace(0, n, n_files + 1).astype(np.int64)
    for p, lo, hi in zip(paths, cuts[:-1], cuts[1:]):
        table = pa.table({
            "task": pc.binary_join_element_wise("t", pc.cast(pa.array(task[lo:hi]), pa.string()), ""),
            "worker": pc.binary_join_element_wise("w", pc.cast(pa.array(worker[lo:hi]), pa.string()), ""),
            "label": pa.array(label[lo:hi].astype(np.int64)),
        })
        pq.write_table(table, p)
    return [str(p) for p in paths]


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def run_engine(engine: str, files: list[str], iters: int, n_workers: int, out: Path) -> dict:
    """One engine's run in this process: timings, peaks, and the posteriors saved to ``out`` (.npy)."""
    from crowdagg.io.read import load_annotations
    from crowdagg.io.render import render_table
    from crowdagg.methods.em.ds import DawidSkene

    stamps: list[float] = []
    row: dict = {"engine": engine}
    t0 = time.perf_counter()
    client = cluster = None
    if engine == "dask":
        import distributed

        from crowdagg.io.dask_read import read_distributed

        cluster = distributed.LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True,
                                           dashboard_address=None)
        client = distributed.Client(cluster)
        row["cluster_s"] = time.perf_counter() - t0
        t = time.perf_counter()
        data, fit_engine = read_distributed(files, client)
        row["partitions"], row["blocks"] = len(fit_engine.parts), fit_engine.n_blocks
    else:
        t = time.perf_counter()
        data, fit_engine = load_annotations(files), None
    row["read_s"] = time.perf_counter() - t
    row["answers"], row["tasks"], row["workers"], row["classes"] = (data.n_answers, data.n_tasks, data.n_workers,
                                                                    data.n_classes)
    t = time.perf_counter()
    stamps.append(t)
    result = DawidSkene(max_iter=iters, tol=0).fit(data, engine=fit_engine,
                                                   callback=lambda i, f: stamps.append(time.perf_counter()))
    row["fit_s"] = time.perf_counter() - t
    row["iteration_ms"] = [round(1000 * (b - a), 1) for a, b in zip(stamps[:-1], stamps[1:])]
    t = time.perf_counter()
    rendered = render_table(result.table(arrow=True), "csv")
    row["render_s"] = time.perf_counter() - t
    row["whole_s"] = time.perf_counter() - t0
    row["output_bytes"] = len(rendered)
    np.save(out, result.posteriors)
    if client is not None and cluster is not None:
        peaks = client.run(_peak_mb)
        row["worker_peak_mb"] = [round(v) for v in peaks.values()]
        client.close()
        cluster.close()
    row["process_peak_mb"] = round(_peak_mb())
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--answers", type=int, default=10_000_000)
    ap.add_argument("--files", type=int, default=20)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--workers", type=int, default=2, help="Dask worker processes (one thread each)")
    ap.add_argument("--dir", type=Path, default=Path("/tmp/crowdagg-bench-dask"))
    ap.add_argument("--engine", choices=("local", "dask"), help=argparse.SUPPRESS)  # one run, in this process
    args = ap.parse_args(argv)
    directory = args.dir / f"{args.answers}-{args.files}"
    if args.engine:
        files = sorted(str(p) for p in directory.glob("part-*.parquet"))
        row = run_engine(args.engine, files, args.iters, args.workers, directory / f"post-{args.engine}.npy")
        print(json.dumps(row))
        return 0
    t = time.perf_counter()
    write_files(args.answers, args.files, directory)
    print(f"{args.answers:,} answers in {args.files} Parquet files under {directory} ({time.perf_counter() - t:.1f} s)")
    rows = []
    for engine in ("local", "dask"):
        cmd = [sys.executable, __file__, "--answers", str(args.answers), "--files", str(args.files), "--iters",
               str(args.iters), "--workers", str(args.workers), "--dir", str(args.dir), "--engine", engine]
        t = time.perf_counter()
        done = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ), check=False)
        if done.returncode:
            print(done.stderr, file=sys.stderr)
            return done.returncode
        row = json.loads(done.stdout.strip().splitlines()[-1])
        row["process_s"] = time.perf_counter() - t
        rows.append(row)
        print(json.dumps(row))
    same = np.array_equal(np.load(directory / "post-local.npy"), np.load(directory / "post-dask.npy"))
    print(f"posteriors bit-identical: {same}")
    print("engine  read s  fit s  ms/iteration (median)  whole s  process s  peak MB (process; per worker)")
    for r in rows:
        its = r["iteration_ms"]
        print(f"{r['engine']:<6}  {r['read_s']:6.1f}  {r['fit_s']:5.1f}  {np.median(its):21.0f}  {r['whole_s']:7.1f}  "
              f"{r['process_s']:9.1f}  {r['process_peak_mb']}" + (f"; {r['worker_peak_mb']}" if "worker_peak_mb" in r
                                                               else ""))
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
