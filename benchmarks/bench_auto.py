"""``auto`` against its candidates on the real datasets, on simulated crowds, and its time on a 1M-answer crowd.

Run from the repository root with the project's environment:

    .venv/bin/python benchmarks/bench_auto.py                    # real sets + simulated crowds + 1M timing
    .venv/bin/python benchmarks/bench_auto.py real               # the per-dataset table only
    .venv/bin/python benchmarks/bench_auto.py simulated
    .venv/bin/python benchmarks/bench_auto.py synth --answers 1000000
    .venv/bin/python benchmarks/bench_auto.py real -p temperature=held-out   # auto's parameters

* real: every categorical dataset of ``../shared/datasets`` (every folder with a truth
  file but emotion), duplicates dropped keeping the last; per dataset every candidate's
  accuracy (tasks with truth) and ECE (:mod:`crowdagg.reports.calibration`, 15
  equal-mass bins), what auto did (its weights), auto's accuracy and ECE, auto's time
  and the slowest candidate's (one fit each, this process, numba warm), and the oracle
  (the per-dataset best candidate: it reads the truth, auto does not); a mean row.
* simulated: crowds drawn by :func:`crowdagg.simulate.simulate` where different
  candidates win (one-coin workers, full confusions, GLAD difficulties, hammers and
  spammers, adversaries), three seeds each; the same columns.
* synth: auto and each candidate timed on the synthetic crowd of ``synth.py``.

Writes ``benchmarks/results/auto.json`` (each part it ran).
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

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
import synth  # noqa: E402

RESULTS = HERE / "results"
DEFAULT_DATASETS = Path(os.environ.get("CROWDAGG_DATASETS", ROOT.parent / "shared" / "datasets"))


def _fit(data, method: str, **params):
    from crowdagg import aggregate

    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = aggregate(data, method, **params)
    return res, time.perf_counter() - t0


def _scores(res, rows: np.ndarray, truth: np.ndarray) -> tuple[float, float]:
    from crowdagg.reports.calibration import expected_calibration_error

    post = res.posteriors[rows]
    return float(np.mean(res.labels[rows] == truth)), float(expected_calibration_error(post, truth))


def compare(data, rows: np.ndarray, truth: np.ndarray, params: dict) -> dict:
    """Every candidate's and auto's accuracy, ECE and time on one crowd (``rows``: tasks with truth, ``truth``:
    their class codes)."""
    from crowdagg.methods.registry import get

    candidates = params.get("candidates") or get("auto").param("candidates").default
    if isinstance(candidates, str):
        candidates = tuple(candidates.split(","))
    row: dict = {"answers": int(data.n_answers), "candidates": {}}
    for c in candidates:
        res, dt = _fit(data, c, seed=0)
        acc, ece = _scores(res, rows, truth)
        row["candidates"][c] = {"accuracy": acc, "ece": ece, "seconds": dt}
    res, dt = _fit(data, "auto", **{"seed": 0, **params})
    acc, ece = _scores(res, rows, truth)
    weights = {c: round(float(w), 4) for c, w in zip(res.model_params["candidates"], res.model_params["weights"])}
    row["auto"] = {"accuracy": acc, "ece": ece, "seconds": dt, "weights": weights,
                   "temperature": float(res.model_params["temperature"])}
    best = max(row["candidates"], key=lambda c: row["candidates"][c]["accuracy"])
    row["oracle"] = {"method": best, "accuracy": row["candidates"][best]["accuracy"]}
    row["slowest"] = max(v["seconds"] for v in row["candidates"].values())
    return row


def did(weights: dict) -> str:
    kept = sorted(((w, c) for c, w in weights.items() if w >= 0.005), reverse=True)
    return kept[0][1] if len(kept) == 1 else " ".join(f"{c} {w:.2f}" for w, c in kept)


def table(rows: dict, title: str) -> None:
    names = list(rows)
    cands = list(next(iter(rows.values()))["candidates"])
    print(f"\n{title}\n")
    print("| crowd | " + " | ".join(cands) + " | oracle | auto | auto ECE | best ECE | what auto did | auto s | "
          "slowest s |")
    print("|---|" + "---:|" * (len(cands) + 4) + "---|---:|---:|")
    for n in names:
        r = rows[n]
        cells = [f"{r['candidates'][c]['accuracy']:.3f}" for c in cands]
        best_ece = min(v["ece"] for v in r["candidates"].values())
        print(f"| {n} | " + " | ".join(cells) + f" | {r['oracle']['accuracy']:.3f} ({r['oracle']['method']}) | "
              f"{r['auto']['accuracy']:.3f} | {r['auto']['ece']:.3f} | {best_ece:.3f} | {did(r['auto']['weights'])} "
              f"| {r['auto']['seconds']:.2f} | {r['slowest']:.2f} |")
    mean = {c: np.mean([rows[n]["candidates"][c]["accuracy"] for n in names]) for c in cands}
    mean_ece = {c: np.mean([rows[n]["candidates"][c]["ece"] for n in names]) for c in cands}
    print("| **mean accuracy** | " + " | ".join(f"{mean[c]:.4f}" for c in cands)
          + f" | {np.mean([rows[n]['oracle']['accuracy'] for n in names]):.4f} | "
          f"{np.mean([rows[n]['auto']['accuracy'] for n in names]):.4f} | "
          f"{np.mean([rows[n]['auto']['ece'] for n in names]):.4f} | | | "
          f"{np.mean([rows[n]['auto']['seconds'] for n in names]):.2f} | {np.mean([rows[n]['slowest'] for n in names]):.2f} |")
    print("| **mean ECE** | " + " | ".join(f"{mean_ece[c]:.4f}" for c in cands) + " | | | | | | | |")


def run_real(datasets: Path, params: dict) -> dict:
    from crowdagg import load_annotations
    from crowdagg.io.read import read_task_labels

    names = sorted(p.name for p in datasets.iterdir() if (p / "truth.csv").exists() and p.name != "emotion")
    rows = {}
    for name in names:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            data = load_annotations(datasets / name / "labels.csv", duplicates="last")
        truth = read_task_labels(datasets / name / "truth.csv")
        index = {c: i for i, c in enumerate(data.classes)}
        tasks = data.task_names.tolist()
        rows_t = np.array([i for i, t in enumerate(tasks) if t in truth and truth[t] in index], dtype=np.int64)
        codes = np.array([index[truth[tasks[i]]] for i in rows_t], dtype=np.int64)
        rows[name] = compare(data, rows_t, codes, params)
        print(f"{name}: auto {rows[name]['auto']['accuracy']:.4f} ({did(rows[name]['auto']['weights'])})",
              file=sys.stderr, flush=True)
    table(rows, f"real datasets ({datasets}; duplicates dropped keeping the last; auto {params or 'defaults'})")
    return rows


#: Simulated crowds where different candidates should win (:func:`crowdagg.simulate.simulate`'s settings): one-coin
#: workers (onecoin, wawa), full confusions (ds, mf), GLAD's task difficulties (glad), hammers and spammers, and a
#: fifth of adversaries (the vote's weak spot).  600 tasks, 30 workers, 3 classes, 5 answers a task.
SCENARIOS = {
    "one-coin": dict(model="onecoin", skill=(0.55, 0.85)),
    "full confusion": dict(model="ds", skill=(0.5, 0.9)),
    "glad": dict(model="glad", difficulty_spread=1.0),
    "hammer-spammer": dict(model="hammer-spammer", spammers=0.5),
    "adversaries": dict(model="ds", skill=(0.6, 0.9), adversaries=0.2),
}


def run_simulated(params: dict, seeds: tuple[int, ...] = (0, 1, 2)) -> dict:
    from crowdagg.simulate import simulate

    rows = {}
    for label, kw in SCENARIOS.items():
        for seed in seeds:
            crowd = simulate(600, 30, 3, 5, seed=seed, **kw)
            data = crowd.to_annotations()
            rows[f"{label} #{seed}"] = compare(data, np.arange(data.n_tasks), np.asarray(crowd.truth), params)
            print(f"{label} #{seed}: auto {rows[f'{label} #{seed}']['auto']['accuracy']:.4f}", file=sys.stderr,
                  flush=True)
    table(rows, f"simulated crowds (crowdagg.simulate; auto {params or 'defaults'})")
    return rows


def run_synth(n_answers: int, params: dict) -> dict:
    from crowdagg.data.annotations import AnnotationSet
    from crowdagg.methods.registry import get

    task, worker, label, truth, n_tasks, n_workers = synth.make_crowd(n_answers, 4, seed=0)
    data = AnnotationSet.from_codes(task, worker, label, n_tasks=n_tasks, n_workers=n_workers, n_classes=4)
    candidates = params.get("candidates") or get("auto").param("candidates").default
    if isinstance(candidates, str):
        candidates = tuple(candidates.split(","))
    out = {"answers": n_answers, "candidates": {}}
    for c in candidates:
        _fit(data, c, seed=0)  # numba warm
        out["candidates"][c] = _fit(data, c, seed=0)[1]
    out["auto"] = _fit(data, "auto", **{"seed": 0, **params})[1]
    print(f"\n{n_answers:,} answers (synth.py, 4 classes): " + ", ".join(f"{c} {t:.2f} s" for c, t in
                                                                       out["candidates"].items())
          + f"; auto {out['auto']:.2f} s ({out['auto'] / max(out['candidates'].values()):.1f}× the slowest, "
          f"{out['auto'] / sum(out['candidates'].values()):.1f}× their sum)")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("part", nargs="?", choices=("all", "real", "simulated", "synth"), default="all")
    ap.add_argument("--datasets", type=Path, default=DEFAULT_DATASETS)
    ap.add_argument("--answers", type=int, default=1_000_000)
    ap.add_argument("-p", dest="params", action="append", default=[], help="auto's parameter NAME=VALUE")
    args = ap.parse_args()
    from crowdagg.methods.registry import get

    spec = get("auto")
    params = {}
    for text in args.params:
        name, _, value = text.partition("=")
        params[name] = spec.param(name).parse(value)
    path = RESULTS / "auto.json"
    try:
        out = json.loads(path.read_text())
    except (OSError, ValueError):
        out = {}
    key = ",".join(f"{k}={v}" for k, v in sorted(args.params and [p.split("=", 1) for p in args.params])) or "defaults"
    runs = out.setdefault(key, {})
    if args.part in ("all", "real"):
        runs["real"] = run_real(args.datasets, params)
    if args.part in ("all", "simulated"):
        runs["simulated"] = run_simulated(params)
    if args.part in ("all", "synth"):
        runs["synth"] = run_synth(args.answers, params)
    RESULTS.mkdir(exist_ok=True)
    path.write_text(json.dumps(_rounded(out), indent=1, sort_keys=True) + "\n")


def _rounded(value):
    """Floats to 5 decimals (the tables show 3-4): a results file a reader can diff."""
    if isinstance(value, float):
        return round(value, 5)
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    return value


if __name__ == "__main__":
    main()
