"""Co-occurrence statistics (pair index + per-pair K×K joint and shared-task counts): crowdagg beside a pandas self-join.

    PYTHONPATH=. .venv/bin/python benchmarks/bench_cooc.py --datasets ../shared/datasets --answers 10000000

Cases: the real ``trec`` crowd (88,385 answers, 762 workers, K = 2) and the
synthetic crowd of ``synth.py`` (``--answers``, 5 distinct workers per task,
K = 5).  Each (case, code) runs in a fresh process: the data is built as
codes, the peak RSS is reset (``/proc/self/clear_refs``), then the code runs
``--repeats`` times; the table gives the best wall time, the process's
CPU time in that run (all threads: on a loaded machine the steadier
figure) and the peak RSS above the loaded data.  crowdagg: :func:`crowdagg.kernels.cooc.pair_index`
then :func:`~crowdagg.kernels.cooc.pair_statistics` on a ``LocalEngine``
(numba cache warm: a tiny run first).  pandas: what a user would write
otherwise -- ``df.merge(df, on="task")``, keep ``worker_x < worker_y``,
``groupby`` the four codes for the joint and drop repeated (task, pair)
rows for the task counts; its result is checked equal to crowdagg's.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from procstat import status_mib  # noqa: E402


def _reset_peak() -> None:
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")


def _load(case: str, answers: int, datasets: Path):
    from crowdagg import load_annotations
    from crowdagg.data.annotations import AnnotationSet

    if case == "trec":
        return load_annotations(datasets / "trec" / "labels.csv")
    import synth

    task, worker, label, _, n_tasks, n_workers = synth.make_crowd(answers, 5, 0)
    return AnnotationSet.from_codes(task, worker, label, n_tasks=n_tasks, n_workers=n_workers, n_classes=5)


def _crowdagg(data):
    from crowdagg.engine import LocalEngine
    from crowdagg.kernels import cooc

    engine = LocalEngine(data)
    t = time.perf_counter()
    index = cooc.pair_index(engine)
    t_index = time.perf_counter() - t
    stats = cooc.pair_statistics(engine, index)
    return stats, {"index_s": t_index, "stats_s": time.perf_counter() - t - t_index, "blocks": engine.n_blocks}


def _pandas(data):
    import pandas as pd

    df = pd.DataFrame({"task": data.task, "worker": data.worker, "label": data.label})
    m = df.merge(df, on="task")
    m = m[m["worker_x"] < m["worker_y"]]
    joint = m.groupby(["worker_x", "worker_y", "label_x", "label_y"], sort=True).size()
    shared = m.drop_duplicates(["task", "worker_x", "worker_y"]).groupby(["worker_x", "worker_y"], sort=True).size()
    return joint, shared


def _same(stats, joint, shared) -> bool:
    pairs = np.stack([shared.index.get_level_values(0), shared.index.get_level_values(1)], axis=1)
    if not (np.array_equal(stats.pairs, pairs) and np.array_equal(stats.n_tasks, shared.to_numpy())):
        return False
    p = np.searchsorted(stats.pairs[:, 0].astype(np.int64) * stats.n_workers + stats.pairs[:, 1],
                        joint.index.get_level_values(0).to_numpy(np.int64) * stats.n_workers
                        + joint.index.get_level_values(1).to_numpy(np.int64))
    dense = np.zeros_like(stats.joint)
    dense[p, joint.index.get_level_values(2), joint.index.get_level_values(3)] = joint.to_numpy()
    return bool(np.array_equal(dense, stats.joint))


def child(case: str, code: str, answers: int, datasets: Path, repeats: int, check: bool) -> dict:
    data = _load(case, answers, datasets)
    if code == "crowdagg":  # load the compiled kernels from numba's cache before timing
        from crowdagg.data.annotations import AnnotationSet

        _crowdagg(AnnotationSet.from_codes([0, 0, 1], [0, 1, 0], [0, 1, 1]))
    base = status_mib("VmRSS")
    _reset_peak()
    best, info, result = float("inf"), {}, None
    for _ in range(repeats):
        result = None
        t, cpu = time.perf_counter(), time.process_time()
        result = _crowdagg(data) if code == "crowdagg" else _pandas(data)
        wall = time.perf_counter() - t
        if wall < best:
            best, info = wall, {"cpu_s": time.process_time() - cpu, **(result[1] if code == "crowdagg" else {})}
    row = {"case": case, "code": code, "answers": data.n_answers, "tasks": data.n_tasks, "workers": data.n_workers,
           "classes": data.n_classes, "wall_s": best, "peak_above_data_mib": status_mib("VmHWM") - base,
           "data_mib": base, **info}
    if code == "crowdagg":
        row["pairs"] = result[0].n_pairs
        if check:
            joint, shared = _pandas(data)
            row["equal_to_pandas"] = _same(result[0], joint, shared)
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", type=Path, default=Path(os.environ.get("CROWDAGG_DATASETS", HERE.parent.parent
                                                                         / "shared" / "datasets")))
    ap.add_argument("--answers", type=int, nargs="*", default=[1_000_000, 10_000_000])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--codes", nargs="+", choices=["crowdagg", "pandas"], default=["crowdagg", "pandas"],
                    help="which codes to run (pandas at 10M answers takes minutes and GBs)")
    ap.add_argument("--child", nargs=3, metavar=("CASE", "CODE", "ANSWERS"), help=argparse.SUPPRESS)
    ap.add_argument("--check", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        case, code, answers = args.child
        print(json.dumps(child(case, code, int(answers), args.datasets, args.repeats, args.check)))
        return 0
    cases = ([("trec", 0)] if (args.datasets / "trec" / "labels.csv").is_file() else []) \
        + [("sim", n) for n in args.answers]
    rows = []
    for case, n in cases:
        for code in args.codes:
            cmd = [sys.executable, __file__, "--child", case, code, str(n), "--datasets", str(args.datasets),
                   "--repeats", str(args.repeats)] + (["--check"] if code == "crowdagg" and n <= 1_000_000 else [])
            proc = subprocess.run(cmd, capture_output=True, text=True)
            if proc.returncode:
                sys.stderr.write(proc.stderr)
                return proc.returncode
            rows.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    print(f"| crowd | answers | workers | K | pairs | code | wall s (best of {args.repeats}) | CPU s | index s | "
          "statistics s | peak RSS above data MiB | equal |")
    print("|---|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---|")
    pairs = {}
    for r in rows:
        pairs.setdefault((r["case"], r["answers"]), r.get("pairs"))
        eq = r.get("equal_to_pandas")
        print(f"| {r['case']} | {r['answers']:,} | {r['workers']:,} | {r['classes']} | "
              f"{pairs[(r['case'], r['answers'])] or 0:,} | {r['code']} | {r['wall_s']:.3f} | {r['cpu_s']:.3f} | "
              + (f"{r['index_s']:.3f} | {r['stats_s']:.3f}" if r["code"] == "crowdagg" else " | ")
              + f" | {r['peak_above_data_mib']:.0f} | {'' if eq is None else ('yes' if eq else 'NO')} |")
    if args.json:
        args.json.write_text(json.dumps({"rows": rows}, indent=1))
    return 0 if all(r.get("equal_to_pandas", True) for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
