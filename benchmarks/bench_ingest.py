"""Whole-process ingest benchmark: `crowdagg aggregate FILE.csv --method ds -o OUT.csv` at 1M, 10M, 100M answers.

Run from the repository root with the project's environment (the DuckDB and
polars rows need the ``bench`` extra: ``pip install -e '.[bench]'``):

    .venv/bin/python benchmarks/bench_ingest.py                                  # 1M and 10M
    .venv/bin/python benchmarks/bench_ingest.py --answers 1000000 10000000 100000000
    .venv/bin/python benchmarks/bench_ingest.py --answers 1000000 --baseline 5bc0f43   # side by side
    .venv/bin/python benchmarks/bench_ingest.py --methods ds mv --others duckdb polars  # what else one would use

``--others`` times, on the same files in the same run, what a data engineer
would use instead for a plain majority vote: DuckDB (``GROUP BY task,
label`` then ``arg_max``) and polars (``group_by`` twice), each writing
``task,label`` CSV, as whole processes measured the same way.

The data (string ids, rows shuffled, no quotes) is written once per size into
--workdir (default a temporary folder):

* up to 10M answers: the synthetic crowd of ``benchmarks/synth.py`` with K=5
  (5 answers per task from distinct workers, n_workers = max(100, n/5000));
* from 100M answers: K=2, n/10 tasks with 10 answers each from distinct
  workers out of 2,000 (a random start and stride per task), one-coin
  workers with accuracy U(0.6, 0.9).

Each run is a fresh process with default options and the numba cache warm
(one untimed run first); wall time and peak RSS come from ``wait4``; the
stage breakdown (read, parse, encode, sort, fit, render, write; the rest is
interpreter start-up and imports) comes from ``CROWDAGG_TIMINGS``
(:mod:`crowdagg.core.timing`), with the EM iterations the run made.  Best of
--repeats runs.  ``--baseline REV`` also times the code of git revision REV
(``git archive``) on the same files in the same run, alternating with this
checkout, for sizes up to --baseline-max.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
import synth  # noqa: E402

RESULTS = HERE / "results"
STAGES = ("read", "parse", "encode", "names", "sort", "fit", "render", "write")

#: A plain majority vote (ties to the smallest label) by DuckDB and by polars: one whole process each.
OTHERS = {
    "duckdb": (
        "import duckdb, sys\n"
        "duckdb.sql(f\"COPY (SELECT task, arg_max(label, n ORDER BY label DESC) AS label FROM (\"\n"
        "           f\"SELECT task, label, count(*) AS n FROM read_csv('{sys.argv[1]}', all_varchar=true) \"\n"
        "           f\"GROUP BY task, label) GROUP BY task) TO '{sys.argv[2]}' (HEADER, DELIMITER ',')\")\n"
    ),
    "polars": (
        "import polars as pl, sys\n"
        "votes = pl.scan_csv(sys.argv[1], infer_schema=False).group_by('task', 'label').len()\n"
        "best = votes.sort(['len', 'label'], descending=[True, False]).group_by('task').first()\n"
        "best.select('task', 'label').collect().write_csv(sys.argv[2])\n"
    ),
}
#: The targets of the ingest issue (seconds, GB) and the figures measured before it (2 cores, same data).
TARGETS = {1_000_000: (1.5, None), 10_000_000: (8.0, 1.2), 100_000_000: (60.0, 8.0)}
BEFORE = {1_000_000: (2.5, 317), 10_000_000: (19.4, 1600), 100_000_000: (237.0, 14.8 * 1024)}


def _tag(n: int) -> str:
    return f"{n // 1_000_000}M" if n % 1_000_000 == 0 else str(n)


# --------------------------------------------------------------------------- data
def _crowd(n: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """(task, worker, label, K) in shuffled order."""
    rng = np.random.Generator(np.random.PCG64(seed))
    if n < 100_000_000:
        task, worker, label, _, _, _ = synth.make_crowd(n, 5, seed)
        k = 5
        task, worker, label = task.astype(np.int32), worker.astype(np.int32), label.astype(np.int8)
    else:
        k, per_task, n_workers = 2, 10, 2000
        n_tasks = n // per_task
        start = rng.integers(0, n_workers, n_tasks, dtype=np.int32)
        stride = (2 * rng.integers(0, 100, n_tasks, dtype=np.int32) + 1)  # odd: 10 distinct workers of 2000
        task = np.repeat(np.arange(n_tasks, dtype=np.int32), per_task)
        step = np.tile(np.arange(per_task, dtype=np.int32), n_tasks)
        worker = (np.repeat(start, per_task) + step * np.repeat(stride, per_task)) % n_workers
        del step
        truth = rng.integers(0, k, n_tasks, dtype=np.int8)
        acc = rng.uniform(0.6, 0.9, n_workers)
        correct = rng.random(n, dtype=np.float32) < acc[worker].astype(np.float32)
        label = np.where(correct, np.repeat(truth, per_task), 1 - np.repeat(truth, per_task)).astype(np.int8)
        del correct
    order = rng.permutation(task.size)
    return task[order], worker[order], label[order], k


def write_csv(n: int, path: Path, seed: int = 0, ids: str = "int") -> int:
    """Write the benchmark crowd of ``n`` answers to ``path``; returns K.

    ``ids="int"`` names tasks ``t17`` and workers ``w3``; ``"padded"`` pads
    the numbers with zeros to 9 digits (``t000000017``), which takes the
    general hashing path of the encoder instead of the prefix + integer one.
    """
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.csv as pcsv

    def text(values: np.ndarray) -> pa.Array:
        out = pc.cast(pa.array(values), pa.string())
        return pc.utf8_lpad(out, width=9, padding="0") if ids == "padded" else out

    task, worker, label, k = _crowd(n, seed)
    block = 10_000_000
    with open(path, "wb") as fh:
        fh.write(b"task,worker,label\n")
        for lo in range(0, n, block):
            hi = min(n, lo + block)
            table = pa.table({
                "task": pc.binary_join_element_wise("t", text(task[lo:hi]), ""),
                "worker": pc.binary_join_element_wise("w", text(worker[lo:hi]), ""),
                "label": pc.cast(pa.array(label[lo:hi]), pa.string()),
            })
            pcsv.write_csv(table, fh, write_options=pcsv.WriteOptions(include_header=False, quoting_style="none"))
    return k


# --------------------------------------------------------------------------- runs
def _run(cmd: list[str], env: dict, cwd: Path) -> tuple[float, float, dict]:
    timings = Path(tempfile.mktemp(prefix="crowdagg-timings-", suffix=".json"))
    env = dict(env, CROWDAGG_TIMINGS=str(timings))
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, cwd=cwd)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t
    err = proc.stderr.read().decode() if proc.stderr else ""
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed: {err}")
    record = json.loads(timings.read_text()) if timings.exists() else {"stages": [], "notes": {}}
    timings.unlink(missing_ok=True)
    return wall, usage.ru_maxrss / 1024, record


def _extract_revision(rev: str, dest: Path) -> None:
    dest.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "crowdagg"], check=True, capture_output=True)
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive.stdout, check=True)


def _row(n: int, mb: float, code: str, best: tuple[float, float, dict], peak: float) -> dict:
    wall, _, record = best
    stages = {s: 0.0 for s in STAGES}
    stage_peaks: dict[str, float] = {}
    for st in record.get("stages", []):
        if st["stage"] in stages:
            stages[st["stage"]] += st["seconds"]
            stage_peaks[st["stage"]] = max(stage_peaks.get(st["stage"], 0.0), st.get("peak_rss_mib", 0.0))
    return {
        "answers": n, "csv_mb": mb, "code": code, "wall_s": wall, "peak_rss_mib": peak, "stage_peaks": stage_peaks,
        "iterations": record.get("notes", {}).get("iterations"), "stages": stages,
        "other_s": wall - sum(stages.values()) if record.get("stages") else None,
    }


def _fmt_row(r: dict) -> str:
    n = r["answers"]
    target = TARGETS.get(n)
    before = BEFORE.get(n)
    stage_cells = " | ".join(f"{r['stages'][s]:.2f}" if r["other_s"] is not None else "" for s in STAGES)
    other = f"{r['other_s']:.2f}" if r["other_s"] is not None else ""
    tgt = "" if target is None else f"≤ {target[0]:g} s" + (f", ≤ {target[1]:g} GB" if target[1] else "")
    bef = "" if before is None else f"{before[0]:g} s, {before[1]:,.0f} MiB"
    return (f"| {n:,} | {r['csv_mb']:.0f} | {r['code']} | **{r['wall_s']:.2f}** | {r['peak_rss_mib']:,.0f} | "
            f"{r['iterations'] if r['iterations'] is not None else ''} | {stage_cells} | {other} | {tgt} | {bef} |")


def run(
    sizes: list[int], repeats: int, workdir: Path, baseline: str | None, baseline_max: int, seed: int, ids: str = "int",
    methods: tuple[str, ...] = ("ds",), others: tuple[str, ...] = (),
) -> list[dict]:
    print("whole process: `crowdagg aggregate FILE.csv --method M -o OUT.csv` (default options, numba cache warm)\n")
    print("| answers | CSV MB | code | wall s | peak RSS MiB | EM iters | " + " | ".join(STAGES)
          + " | start-up+other | target | before (issue) |")
    print("|---:|---:|---|---:|---:|---:|" + "---:|" * len(STAGES) + "---:|---|---|", flush=True)
    codes = [("this checkout", ROOT)]
    if baseline:
        base_dir = workdir / f"baseline-{baseline}"
        if not base_dir.exists():
            _extract_revision(baseline, base_dir)
        codes.append((f"baseline {baseline}", base_dir))
    rows = []
    for n in sizes:
        csv = workdir / f"labels_{_tag(n)}{'' if ids == 'int' else '_' + ids}.csv"
        if not csv.exists():  # in a fresh process: a child forked from a large driver inherits its peak RSS
            import multiprocessing

            proc = multiprocessing.get_context("spawn").Process(target=write_csv, args=(n, csv, seed, ids))
            proc.start()
            proc.join()
            if proc.exitcode != 0:
                raise RuntimeError(f"writing {csv} failed")
        mb = csv.stat().st_size / 1e6
        out = workdir / "out.csv"
        versions = [(name, d) for name, d in codes if name == "this checkout" or n <= baseline_max]
        for _name, code_dir in versions:  # warm the numba cache of each version
            env = dict(os.environ, PYTHONPATH=str(code_dir))
            small = workdir / "warm.csv"
            if not small.exists():
                write_csv(5000, small, seed)
            _run([sys.executable, "-m", "crowdagg", "aggregate", str(small), "-m", "ds", "-o", str(out)], env, code_dir)
        runs_of: dict[str, list] = {}
        for _ in range(repeats):  # alternate the versions so that machine noise hits both alike
            for method in methods:
                for name, code_dir in versions:
                    env = dict(os.environ, PYTHONPATH=str(code_dir))
                    cmd = [sys.executable, "-m", "crowdagg", "aggregate", str(csv), "--method", method, "-o", str(out)]
                    runs_of.setdefault(f"{name}, -m {method}", []).append(_run(cmd, env, code_dir))
            for other in others:
                cmd = [sys.executable, "-c", OTHERS[other], str(csv), str(out)]
                runs_of.setdefault(other, []).append(_run(cmd, dict(os.environ), ROOT))
        for name, runs in runs_of.items():
            best = min(runs, key=lambda r: r[0])
            row = _row(n, mb, name if ids == "int" else f"{name}, {ids} ids", best, max(r[1] for r in runs))
            rows.append(row)
            print(_fmt_row(row), flush=True)
        print("\npeak RSS (MiB) at the end of each stage, " + _tag(n) + ":\n")
        print("| code | " + " | ".join(STAGES) + " |")
        print("|---|" + "---:|" * len(STAGES))
        for r in rows[-len(runs_of):]:
            if r.get("stage_peaks"):
                cells = " | ".join(f"{r['stage_peaks'].get(s, 0):,.0f}" if s in r["stage_peaks"] else "" for s in STAGES)
                print(f"| {r['code']} | {cells} |")
        print(flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--answers", type=int, nargs="+", default=[1_000_000, 10_000_000])
    ap.add_argument("--repeats", type=int, default=3, help="runs per size and version; the best is reported")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workdir", type=Path, default=None, help="keep the generated files here (default: a temp dir)")
    ap.add_argument("--baseline", default=None, help="also time the code of this git revision, side by side")
    ap.add_argument("--baseline-max", type=int, default=10_000_000, help="largest size the baseline runs on")
    ap.add_argument("--ids", choices=("int", "padded"), default="int",
                    help="t17-style ids (default) or zero-padded t000000017 ids (the encoder's hashing path)")
    ap.add_argument("--methods", nargs="+", default=["ds"], help="crowdagg methods to time (e.g. ds mv)")
    ap.add_argument("--others", nargs="*", default=[], choices=sorted(OTHERS),
                    help="also time a plain majority vote by these tools (the bench extra)")
    ap.add_argument("--json", type=Path, default=RESULTS / "ingest.json", help="write results here")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="crowdagg-ingest-") as tmp:
        workdir = args.workdir or Path(tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        rows = run(sorted(args.answers), args.repeats, workdir, args.baseline, args.baseline_max, args.seed, args.ids,
                   tuple(args.methods), tuple(args.others))
    old = json.loads(args.json.read_text()) if args.json.exists() else {}
    keep = [r for r in old.get("rows", []) if (r["answers"], r["code"]) not in {(x["answers"], x["code"]) for x in rows}]
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"rows": sorted(keep + rows, key=lambda r: (r["answers"], r["code"]))}, indent=2) + "\n")
    print(f"\nwrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
