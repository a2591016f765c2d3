"""The cross-covariance spammer detector (crowdagg.reports.spammers.detect_spammers): detection on the tutorial's
synthetic crowds, the extreme spammers of temp and rte, prune-then-aggregate on real data, and its speed.

    PYTHONPATH=. .venv/bin/python benchmarks/bench_spammers.py [synthetic] [extreme] [prune] [speed]
    PYTHONPATH=. .venv/bin/python benchmarks/bench_spammers.py --quick     # all four, small, in seconds

**synthetic** -- ``simulate(scenario="tutorial-spammers", spammers=α, seed=s)`` (ICASSP'25 tutorial: N = 10,000,
K = 4, M = 20 dense Dawid--Skene workers, a fraction α of them spammers whose answer distribution ignores the
truth).  For each α, over the seeds: sensitivity (spammers flagged / spammers) and specificity (honest kept /
honest), pooled over the seeds, with the worst seed beside them; α = 0 has no spammer (sensitivity "–") and
must flag nobody.  The tutorial aims at ≥ 0.9 and ≥ 0.95.

With ``union`` rows: the same crowds judged by the report's two criteria together
(:func:`crowdagg.reports.workers.spammer_flags`: the detector's flags that the ds fit cannot show above chance,
or the near-chance rule on that fit).

**extreme** -- temp and rte (Snow et al. 2008): the workers who answered most tasks, with their accuracy
against the truth and whether they are flagged (deepBP's App. H: temp's three with 442/452/462 tasks at
.50/.44/.44, rte's four with 540/700/760/800 at .50/.58/.49/.50), and how many others are flagged; beside the
detector, the near-chance rule's bound (bits) and the report's verdict.

**prune** -- accuracy of ds and mv on the tasks with truth, before and after removing the flagged workers'
answers (the tutorial's "Alg. 1 + EM / MV" table: bluebird 0.88 → 0.899, dog 0.834 → 0.834, web 0.871 →
0.91, pruned 22 / 12 / 158), with how many workers were flagged and skipped.  Tasks left without answers
keep the method's label for an empty task (they count as they come out).  A second table prunes the report's
verdict (the detector's flags that the ds fit cannot show above chance, or the near-chance rule: what
``crowdagg aggregate --drop-spammers`` removes), with how many workers each rule flagged.

**speed** -- ``detect_spammers`` on a dense crowd of 1M answers (``simulate(n_tasks=100_000, n_workers=1000,
per_task=10, seed=0)``: 1,000 workers, 10 answers a task), after a warm-up on a small crowd (numba's cache),
the median of ``--repeats`` runs; the co-occurrence statistics alone beside it.
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

#: The tutorial's prune-then-aggregate table (ICASSP'25, seed 004): EM and MV before, after, and pruned count.
TUTORIAL = {"bluebird": (0.88, 0.899, 0.759, 0.852, 22), "dog": (0.834, 0.834, 0.817, 0.819, 12),
            "web": (0.871, 0.91, 0.776, 0.841, 158)}
#: deepBP's App. H: how many extreme spammers each dataset has (its most active workers).
EXTREME = {"temp": 3, "rte": 4}


def union(data, scan):
    """The report's verdict (``crowdagg workers`` / ``aggregate --drop-spammers``): the detector's ``scan``, less the
    flags the ds fit shows above chance, or the near-chance rule on that fit."""
    from crowdagg import aggregate
    from crowdagg.reports.workers import spammer_flags

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return spammer_flags(data, aggregate(data, "ds", seed=0), scan)


def detect(data, **kw):
    from crowdagg.reports.spammers import detect_spammers

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the skipped-workers count is in the table
        return detect_spammers(data, **kw)


# --------------------------------------------------------------------------------------------------- synthetic
def run_synthetic(alphas: list[float], seeds: list[int], n_tasks: int | None) -> list[dict]:
    from crowdagg.simulate import simulate

    rows: list[dict] = []
    for alpha in alphas:
        counts = {rule: [0, 0, 0, 0, 1.0, 1.0] for rule in ("detector", "union")}  # tp fn tn fp worst-sens/spec
        for seed in seeds:
            crowd = simulate(scenario="tutorial-spammers", spammers=alpha, seed=seed, n_tasks=n_tasks)
            data = crowd.to_annotations()
            scan = detect(data, seed=0)
            # the crowd's worker codes are its positions in worker_names ("w0", "w1", ...)
            kind = np.asarray(crowd.worker_kind)[[int(n[1:]) for n in data.worker_names]]
            spam = kind == "spammer"
            for rule, flagged in (("detector", scan.flagged), ("union", union(data, scan).flagged)):
                c = counts[rule]
                a, b = int((flagged & spam).sum()), int((~flagged & spam).sum())
                t, f = int((~flagged & ~spam).sum()), int((flagged & ~spam).sum())
                c[0], c[1], c[2], c[3] = c[0] + a, c[1] + b, c[2] + t, c[3] + f
                if a + b:
                    c[4] = min(c[4], a / (a + b))
                c[5] = min(c[5], t / (t + f))
        for rule, (tp, fn, tn, fp, worst_sens, worst_spec) in counts.items():
            rows.append({"alpha": alpha, "rule": rule, "seeds": len(seeds), "spammers": tp + fn, "honest": tn + fp,
                         "sensitivity": tp / (tp + fn) if tp + fn else None, "specificity": tn / (tn + fp),
                         "worst_sensitivity": worst_sens if tp + fn else None, "worst_specificity": worst_spec,
                         "flagged_honest": fp})
    for rule, title in (("detector", "the detector"), ("union", "the detector or the near-chance rule")):
        print(f"\n### Synthetic (tutorial-spammers, N = {n_tasks or 10_000:,}, K = 4, M = 20; seeds "
              f"{seeds[0]}..{seeds[-1]}): {title}\n")
        print("| α | spammers | honest | sensitivity (worst seed) | specificity (worst seed) | honest flagged |")
        print("|---:|---:|---:|---:|---:|---:|")
        for r in rows:
            if r["rule"] != rule:
                continue
            sens = "–" if r["sensitivity"] is None else f"{r['sensitivity']:.3f} ({r['worst_sensitivity']:.2f})"
            print(f"| {r['alpha']:.1f} | {r['spammers']} | {r['honest']} | {sens} | {r['specificity']:.3f} "
                  f"({r['worst_specificity']:.2f}) | {r['flagged_honest']} |")
    return rows


# ----------------------------------------------------------------------------------------------- real data
def load(datasets: Path, name: str):
    from crowdagg import load_annotations
    from crowdagg.io.read import read_task_labels

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        data = load_annotations(datasets / name / "labels.csv")
    truth = read_task_labels(datasets / name / "truth.csv")
    return data, truth


def worker_accuracy(data, truth: dict) -> tuple[np.ndarray, np.ndarray]:
    """Each worker's answers and accuracy on the tasks with truth."""
    index = {c: i for i, c in enumerate(data.classes)}
    true = np.array([index.get(truth.get(t), -1) for t in data.task_names.tolist()])[data.task]
    known = true >= 0
    w = data.n_workers
    right = np.bincount(data.worker[known], weights=(data.label[known] == true[known]), minlength=w)
    return np.bincount(data.worker, minlength=w), right / np.maximum(np.bincount(data.worker[known], minlength=w), 1)


def run_extreme(datasets: Path, names: list[str]) -> list[dict]:
    rows = []
    print("\n### Extreme spammers (the workers with most answers)\n")
    print("| dataset | answers | accuracy | score | noise | flagged | chance bound (bits) | flagged by |")
    print("|---|---:|---:|---:|---:|---|---:|---|")
    for name in names:
        data, truth = load(datasets, name)
        scan = detect(data)
        flags = union(data, scan)
        by = flags.flagged_by
        answers, acc = worker_accuracy(data, truth)
        top = EXTREME.get(name, 4)
        heavy = np.argsort(-answers, kind="stable")[:top]
        for w in heavy:
            rows.append({"dataset": name, "worker": str(data.worker_names[w]), "answers": int(answers[w]),
                         "accuracy": float(acc[w]), "score": float(scan.score[w]), "flagged": bool(scan.flagged[w]),
                         "chance_bound": float(flags.bound[w]), "flagged_by": str(by[w]),
                         "union": bool(flags.flagged[w])})
            noise = scan.noise[w] if scan.noise is not None else float("nan")
            print(f"| {name} | {answers[w]} | {acc[w]:.2f} | {scan.score[w]:.3f} | {noise:.3f} | "
                  f"{'yes' if scan.flagged[w] else 'no'} | {flags.bound[w]:.3f} | {by[w] or '–'} |")
        others = int(scan.flagged.sum() - scan.flagged[heavy].sum())
        others_union = int(flags.flagged.sum() - flags.flagged[heavy].sum())
        print(f"| {name}: {others} others flagged of {data.n_workers - top} ({others_union} by the report), "
              f"{scan.n_skipped} skipped | | | | | | | |")
        rows.append({"dataset": name, "others_flagged": others, "others_flagged_union": others_union,
                     "skipped": scan.n_skipped, "why": scan.why})
    return rows


def accuracy(data, truth: dict, method: str) -> float:
    from crowdagg import aggregate

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = aggregate(data, method, seed=0)
    pred = dict(zip(data.task_names.tolist(), result.label_names().tolist()))
    scored = [t for t in truth if t in pred]
    return float(np.mean([pred[t] == truth[t] for t in scored]))


def pruned(data, flagged: np.ndarray):
    """``data`` without the answers of the flagged workers (every task and worker name kept)."""
    from crowdagg.data.annotations import AnnotationSet

    keep = ~flagged[data.worker]
    return AnnotationSet.from_codes(data.task[keep], data.worker[keep], data.label[keep], n_tasks=data.n_tasks,
                                    n_workers=data.n_workers, task_names=data.task_names.tolist(),
                                    worker_names=data.worker_names.tolist(), classes=data.classes)


def run_prune(datasets: Path, names: list[str]) -> list[dict]:
    rows = []
    for name in names:
        data, truth = load(datasets, name)
        scan = detect(data)
        flags = union(data, scan)
        after = pruned(data, scan.flagged)
        after_union = pruned(data, flags.flagged)
        assert flags.chance is not None
        row = {"dataset": name, "workers": data.n_workers, "flagged": scan.n_flagged, "skipped": scan.n_skipped,
               "why": scan.why, "flagged_chance": int(flags.chance.sum()), "flagged_union": int(flags.flagged.sum())}
        for method in ("ds", "mv"):
            row[f"{method}_before"] = accuracy(data, truth, method)
            row[f"{method}_after"] = accuracy(after, truth, method)
            row[f"{method}_after_union"] = accuracy(after_union, truth, method)
        rows.append(row)
    print("\n### Prune then aggregate: accuracy before → after removing the flagged workers (tutorial's)\n")
    print("| dataset | workers | flagged (tutorial) | skipped | ds before → after (tutorial EM) | "
          "mv before → after (tutorial MV) |")
    print("|---|---:|---:|---:|---|---|")
    for r in rows:
        t = TUTORIAL.get(r["dataset"])
        tut_em = f" ({t[0]:.3f} → {t[1]:.3f})" if t else ""
        tut_mv = f" ({t[2]:.3f} → {t[3]:.3f})" if t else ""
        tut_n = f" ({t[4]})" if t else ""
        print(f"| {r['dataset']} | {r['workers']} | {r['flagged']}{tut_n} | {r['skipped']} | "
              f"{r['ds_before']:.3f} → {r['ds_after']:.3f}{tut_em} | {r['mv_before']:.3f} → {r['mv_after']:.3f}{tut_mv} |")
    print("\n### Prune then aggregate with the report's verdict (the detector's flags the ds fit cannot show above "
          "chance, or the near-chance rule on ds): what `aggregate --drop-spammers` removes\n")
    print("| dataset | workers | detector | near-chance | report | ds before → detector / report | "
          "mv before → detector / report |")
    print("|---|---:|---:|---:|---:|---|---|")
    for r in rows:
        print(f"| {r['dataset']} | {r['workers']} | {r['flagged']} | {r['flagged_chance']} | {r['flagged_union']} | "
              f"{r['ds_before']:.3f} → {r['ds_after']:.3f} / {r['ds_after_union']:.3f} | "
              f"{r['mv_before']:.3f} → {r['mv_after']:.3f} / {r['mv_after_union']:.3f} |")
    return rows


# --------------------------------------------------------------------------------------------------- speed
def run_speed(n_tasks: int, n_workers: int, repeats: int) -> dict:
    from crowdagg.engine import LocalEngine
    from crowdagg.kernels.cooc import co_occurrence
    from crowdagg.simulate import simulate

    detect(simulate(n_tasks=400, n_workers=30, per_task=10, seed=1).to_annotations())  # numba's cache
    data = simulate(n_tasks=n_tasks, n_workers=n_workers, per_task=10, seed=0).to_annotations()
    times, stats, scan = [], [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        co_occurrence(LocalEngine(data))
        stats.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        scan = detect(data)
        times.append(time.perf_counter() - t0)
    assert scan is not None
    row = {"answers": data.n_answers, "workers": data.n_workers, "classes": data.n_classes,
           "detect_s": float(np.median(times)), "cooc_s": float(np.median(stats)), "n_iter": scan.n_iter,
           "flagged": scan.n_flagged, "skipped": scan.n_skipped, "threads": os.cpu_count()}
    print("\n### Speed (median of", repeats, "runs)\n")
    print("| answers | workers | K | detect_spammers s | of which co-occurrence s | fit iterations | flagged | "
          "skipped |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    print(f"| {row['answers']:,} | {row['workers']:,} | {row['classes']} | {row['detect_s']:.2f} | "
          f"{row['cooc_s']:.2f} | {row['n_iter']} | {row['flagged']} | {row['skipped']} |")
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("parts", nargs="*", metavar="PART", help="synthetic, extreme, prune and/or speed (default: all)")
    ap.add_argument("--quick", action="store_true", help="small sizes for the test suite: N = 2,000, two α, one "
                    "seed; temp and bluebird; 50,000 answers")
    ap.add_argument("--alphas", type=float, nargs="+", default=[0.0, 0.1, 0.2, 0.3, 0.4, 0.5])
    ap.add_argument("--seeds", type=int, nargs="+", default=list(range(10)))
    ap.add_argument("--datasets", type=Path, default=Path(os.environ.get(
        "CROWDAGG_DATASETS", HERE.parent.parent / "shared" / "datasets")))
    ap.add_argument("--names", nargs="+", default=["bluebird", "dog", "web", "rte", "temp"], help="prune: datasets")
    ap.add_argument("--repeats", type=int, default=3, help="speed: runs (the median is shown)")
    ap.add_argument("--json", type=Path, help="write every row here")
    args = ap.parse_args(argv)
    parts = args.parts or ["synthetic", "extreme", "prune", "speed"]
    unknown = sorted(set(parts) - {"synthetic", "extreme", "prune", "speed"})
    if unknown:
        ap.error(f"unknown part(s) {', '.join(unknown)}: choose from synthetic, extreme, prune, speed")
    n_tasks, speed_tasks, speed_workers = None, 100_000, 1000
    extreme = ["temp", "rte"]
    if args.quick:
        n_tasks, args.alphas, args.seeds, args.repeats = 2_000, [0.0, 0.3], [0], 1
        args.names, extreme, speed_tasks, speed_workers = ["bluebird"], ["temp"], 5_000, 100
    out: dict = {}
    if "synthetic" in parts:
        rows = run_synthetic(args.alphas, args.seeds, n_tasks)
        out["synthetic"] = [r for r in rows if r["rule"] == "detector"]
        out["synthetic_union"] = [r for r in rows if r["rule"] == "union"]
    have = [n for n in dict.fromkeys(args.names + extreme) if (args.datasets / n / "labels.csv").is_file()]
    if len(have) < len(set(args.names + extreme)):
        print(f"datasets not found under {args.datasets} (left out): "
              + ", ".join(sorted(set(args.names + extreme) - set(have))))
    if "extreme" in parts:
        out["extreme"] = run_extreme(args.datasets, [n for n in extreme if n in have])
    if "prune" in parts:
        out["prune"] = run_prune(args.datasets, [n for n in args.names if n in have])
    if "speed" in parts:
        out["speed"] = run_speed(speed_tasks, speed_workers, args.repeats)
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
