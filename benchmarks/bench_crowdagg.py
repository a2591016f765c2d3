"""crowdagg benchmarks: accuracy on the real datasets, EM speed, whole-CLI time and memory.

Run from the repository root with the project's environment:

    .venv/bin/python benchmarks/bench_crowdagg.py                 # everything
    .venv/bin/python benchmarks/bench_crowdagg.py accuracy        # real-data accuracy table
    .venv/bin/python benchmarks/bench_crowdagg.py speed --answers 1000000 10000000
    .venv/bin/python benchmarks/bench_crowdagg.py speed --answers 1000000 --threads 1 2
    .venv/bin/python benchmarks/bench_crowdagg.py cli --answers 1000000

crowd-kit figures are read from the JSON files that ``benchmarks/crowdkit_reference.py``
and ``benchmarks/crowdkit_speed.py`` write (``benchmarks/run.sh`` runs them all in
order); columns are left blank when a file is missing.

* accuracy: mv, wmv, ds, onecoin on every dataset with classes (emotion, numeric, is
  skipped), duplicate answers dropped keeping the last, accuracy on tasks with truth.
* speed: Dawid-Skene ms per EM iteration on the synthetic crowd of benchmarks/synth.py
  (K classes, 5 answers per task), from fits of N1 and N2 iterations with tol=0
  (t(N2) - t(N1)) / (N2 - N1), min of --repeats; each size in a fresh process, whose
  peak RSS is reported.  ``--threads N ...`` runs each size once per thread count
  (``CROWDAGG_THREADS=N`` in that process); default: the environment's count.
* cli: the synthetic crowd written as a CSV with string ids in shuffled order, then
  ``crowdagg aggregate FILE --method ds -o OUT`` timed as a whole process (wall time,
  peak RSS from wait4), once cold (numba cache cleared) and three times warm.
  ``--baseline REV`` runs the same command with the code of git revision REV
  (extracted with ``git archive``) in the same run, alternating with this
  checkout, so the two columns are comparable.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
import synth  # noqa: E402

RESULTS = HERE / "results"
DEFAULT_DATASETS = Path(os.environ.get("CROWDAGG_DATASETS", ROOT.parent / "shared" / "datasets"))
METHODS = ("mv", "wmv", "ds", "onecoin")


def _load_json(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


# --------------------------------------------------------------------------- accuracy
def run_accuracy(datasets: Path) -> dict:
    from crowdagg import aggregate, load_annotations
    from crowdagg.io.read import read_task_labels

    ck = _load_json(RESULTS / "crowdkit_reference.json") or {}
    ck_sets = ck.get("datasets", {})
    names = sorted(p.name for p in datasets.iterdir() if (p / "labels.csv").exists() and p.name != "emotion")
    out: dict[str, dict] = {}
    print(f"datasets: {datasets}; duplicates dropped keeping the last; accuracy on tasks with truth\n")
    head = (
        "| dataset | answers | " + " | ".join(METHODS)
        + " | onecoin smoothing 0 | crowd-kit MV (ties split) | crowd-kit DS | crowd-kit OneCoin | ds iterations | ds seconds |"
    )
    print(head)
    print("|---|---:|" + "---:|" * (len(METHODS) + 6))
    runs = [(m, m, {}) for m in METHODS] + [("onecoin_s0", "onecoin", {"smoothing": 0.0})]
    for name in names:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            data = load_annotations(datasets / name / "labels.csv", duplicates="last")
        truth = read_task_labels(datasets / name / "truth.csv")
        row: dict[str, float] = {}
        for key, m, params in runs:
            t0 = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                res = aggregate(data, m, **params)
            dt = time.perf_counter() - t0
            pred = dict(zip(data.task_names.tolist(), res.label_names().tolist()))
            scored = [t for t in truth if t in pred]
            row[key] = float(np.mean([pred[t] == truth[t] for t in scored]))
            row[f"{key}_seconds"] = dt
            row[f"{key}_iterations"] = res.n_iter
            row[f"{key}_converged"] = bool(res.converged)
        ref = ck_sets.get(name, {})
        out[name] = {"answers": data.n_answers, **row, "crowdkit": ref}

        def f(v: float | None) -> str:
            return "" if v is None else f"{v:.4f}"

        print(
            f"| {name} | {data.n_answers} | " + " | ".join(f(row[m]) for m in METHODS)
            + f" | {f(row['onecoin_s0'])}"
            + f" | {f(ref.get('mv_acc_ties_split'))} | {f(ref.get('ds_acc'))} | {f(ref.get('onecoin_acc'))}"
            + f" | {row['ds_iterations']:.0f}{'' if row['ds_converged'] else ' (not converged)'}"
            + f" | {row['ds_seconds']:.3f} |",
            flush=True,
        )
    return out


# --------------------------------------------------------------------------- speed
def _speed_one(n_answers: int, n_classes: int, seed: int, n1: int, iters: int, repeats: int) -> dict:
    import resource

    from crowdagg import aggregate
    from crowdagg.data.annotations import AnnotationSet

    t0 = time.perf_counter()
    task, worker, label, truth, n_tasks, n_workers = synth.make_crowd(n_answers, n_classes, seed)
    data = AnnotationSet.from_codes(task, worker, label, n_classes=n_classes)
    del task, worker, label
    build = time.perf_counter() - t0
    aggregate(data, "ds", max_iter=1, tol=0)  # compile / load the kernels

    def best(n_iter: int) -> tuple[float, object]:
        times = []
        for _ in range(repeats):
            t = time.perf_counter()
            res = aggregate(data, "ds", max_iter=n_iter, tol=0)
            times.append(time.perf_counter() - t)
            assert res.n_iter == n_iter
        return min(times), res

    n2 = n1 + iters
    t1, _ = best(n1)
    t2, res = best(n2)
    from crowdagg.kernels import n_threads

    return {
        "answers": int(data.n_answers), "tasks": int(n_tasks), "workers": int(n_workers), "classes": n_classes,
        "threads": n_threads(), "build_s": build, "fit_n1_s": t1, "fit_n2_s": t2, "n1": n1, "n2": n2,
        "ms_per_iter": (t2 - t1) / iters * 1e3, "accuracy": float((res.labels == truth).mean()),  # type: ignore[attr-defined]
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def run_speed(
    sizes: list[int], n_classes: int, seed: int, iters: int, repeats: int, threads: list[int | None] | None = None
) -> list[dict]:
    rows = []
    print(f"Dawid-Skene, K={n_classes}, 5 answers per task, tol=0; ms per EM iteration = (t(N2)-t(N1))/(N2-N1), "
          f"min of {repeats} runs; each size in a fresh process\n")
    print("| answers | tasks | workers | threads | crowdagg ms/iter | crowd-kit ms/iter | speed-up | crowdagg peak RSS (MiB) | crowd-kit peak RSS (MiB) |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for n, count in ((n, count) for n in sizes for count in (threads or [None])):
        cmd = [sys.executable, __file__, "_speed_one", str(n), str(n_classes), str(seed), "2", str(iters), str(repeats)]
        env = dict(os.environ) if count is None else dict(os.environ, CROWDAGG_THREADS=str(count))
        out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout
        r = json.loads(out.strip().splitlines()[-1])
        ck = _load_json(RESULTS / f"crowdkit_speed_{_size_tag(n)}.json") or {}
        ck_ms = ck.get("ms_per_iter")
        r["crowdkit"] = ck
        rows.append(r)
        print(
            f"| {r['answers']:,} | {r['tasks']:,} | {r['workers']:,} | {r['threads']} | {r['ms_per_iter']:.1f} | "
            + (f"{ck_ms:.0f} | {ck_ms / r['ms_per_iter']:.0f}x" if ck_ms else " | ")
            + f" | {r['peak_rss_mib']:.0f} | " + (f"{ck['peak_rss_mib']:.0f}" if ck else "") + " |",
            flush=True,
        )
    return rows


def _size_tag(n: int) -> str:
    return f"{n // 1_000_000}M" if n % 1_000_000 == 0 else str(n)


# --------------------------------------------------------------------------- whole CLI
def _timed_process(cmd: list[str], env: dict, cwd: Path | None = None) -> tuple[float, float, int]:
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, cwd=cwd)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read().decode() if proc.stderr else ""
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}): {err}")
    return wall, usage.ru_maxrss / 1024, proc.returncode


def _extract_revision(rev: str, dest: Path) -> None:
    """The package as it was at git revision ``rev``, under ``dest``."""
    dest.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "crowdagg"], check=True, capture_output=True)
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive.stdout, check=True)


def run_cli(sizes: list[int], n_classes: int, seed: int, baseline: str | None = None) -> list[dict]:
    import pandas as pd

    rows = []
    print("whole process: `crowdagg aggregate FILE.csv --method ds -o OUT.csv` (default options)\n")
    cols = "| answers (CSV rows) | CSV MB | code | cold wall s (empty numba cache) | warm wall s (best of 3) | peak RSS MiB |"
    print(cols)
    print("|---:|---:|---|---:|---:|---:|")
    with tempfile.TemporaryDirectory(prefix="crowdagg-bench-") as tmp:
        codes = [("this checkout", ROOT)]
        if baseline:
            base_dir = Path(tmp) / "baseline"
            _extract_revision(baseline, base_dir)
            codes.append((f"baseline {baseline}", base_dir))
        for n in sizes:
            task, worker, label, _, _, _ = synth.make_crowd(n, n_classes, seed)
            order = np.random.default_rng(seed).permutation(task.size)
            csv = Path(tmp) / f"labels_{_size_tag(n)}.csv"
            pd.DataFrame({
                "task": np.char.add("t", task[order].astype(str)),
                "worker": np.char.add("w", worker[order].astype(str)),
                "label": label[order],
            }).to_csv(csv, index=False)
            results: dict[str, dict] = {}
            for name, code_dir in codes:
                cache = Path(tmp) / f"numba-cache-{len(results)}"
                env = dict(os.environ, NUMBA_CACHE_DIR=str(cache), PYTHONPATH=str(code_dir))
                cmd = [sys.executable, "-m", "crowdagg", "aggregate", str(csv), "--method", "ds",
                       "-o", str(Path(tmp) / "out.csv")]
                shutil.rmtree(cache, ignore_errors=True)
                t = time.perf_counter()
                _timed_process(cmd, env, cwd=code_dir)
                results[name] = {"cold": time.perf_counter() - t, "warm": [], "peak": 0.0, "env": env, "cmd": cmd,
                                 "dir": code_dir}
            for _ in range(3):  # alternate the versions so that machine noise hits both alike
                for r in results.values():
                    wall, peak, _ = _timed_process(r["cmd"], r["env"], cwd=r["dir"])
                    r["warm"].append(wall)
                    r["peak"] = max(r["peak"], peak)
            for name, r in results.items():
                row = {"answers": n, "csv_mb": csv.stat().st_size / 1e6, "code": name, "cold_wall_s": r["cold"],
                       "warm_wall_s": min(r["warm"]), "peak_rss_mib": r["peak"]}
                rows.append(row)
                print(f"| {n:,} | {row['csv_mb']:.1f} | {name} | {row['cold_wall_s']:.2f} | {row['warm_wall_s']:.2f} "
                      f"| {row['peak_rss_mib']:.0f} |", flush=True)
    return rows


def _merge_rows(old: list[dict], new: list[dict]) -> list[dict]:
    """Rows of earlier runs, replaced by new rows of the same size and thread count, sorted by size."""
    by_size = {(r["answers"], r.get("threads", 0)): r for r in old}
    by_size.update({(r["answers"], r.get("threads", 0)): r for r in new})
    return [by_size[k] for k in sorted(by_size)]


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "_speed_one":
        n, k, seed, n1, iters, repeats = (int(x) for x in argv[1:7])
        print(json.dumps(_speed_one(n, k, seed, n1, iters, repeats)))
        return 0
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", nargs="*", help="accuracy, speed and/or cli (default: all)")
    ap.add_argument("--datasets", type=Path, default=DEFAULT_DATASETS)
    ap.add_argument("--answers", type=int, nargs="+", default=None, help="sizes (speed: 1M 10M; cli: 1M)")
    ap.add_argument("--classes", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, nargs="+", default=None,
                    help="speed: thread counts to run each size with (CROWDAGG_THREADS), default: the environment's")
    ap.add_argument("--baseline", default=None, help="cli: also time the code of this git revision, side by side")
    ap.add_argument("--json", type=Path, default=RESULTS / "crowdagg.json", help="write results here")
    args = ap.parse_args(argv)
    what = args.what or ["accuracy", "speed", "cli"]
    unknown = set(what) - {"accuracy", "speed", "cli"}
    if unknown:
        ap.error(f"unknown benchmark(s): {', '.join(sorted(unknown))}; choose accuracy, speed, cli")
    results: dict = _load_json(args.json) or {}
    if "accuracy" in what:
        results["accuracy"] = run_accuracy(args.datasets)
        print()
    if "speed" in what:
        rows = run_speed(
            args.answers or [1_000_000, 10_000_000], args.classes, args.seed, args.iters, args.repeats, args.threads
        )
        results["speed"] = _merge_rows(results.get("speed", []), rows)
        print()
    if "cli" in what:
        rows = run_cli(args.answers or [1_000_000], args.classes, args.seed, args.baseline)
        results["cli"] = rows
        print()
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
