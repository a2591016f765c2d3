"""The spammer flags of ``crowdagg workers`` measured against the truth: how many flagged workers are in fact good.

    PYTHONPATH=. .venv/bin/python benchmarks/bench_workers.py [--names rte temp web dog bluebird] [--json PATH]

For each real set with truth, with ``-m ds`` (seed 0) and the detector's defaults, as ``crowdagg workers`` decides
(:func:`crowdagg.reports.workers.spammer_flags`):

* **workers**, **judged** -- all workers, and those with a verdict (judged by the detector, or flagged);
* **detector** -- the cross-covariance detector's own flags, and how many of them are *false*: right 80% of the
  time or more by the truth, on the worker's answers to tasks with truth (the issue's measure);
* **withdrawn** -- the detector's flags withdrawn because the ds fit shows the worker right more often than
  chance (the one-sided score test, Benjamini--Hochberg at 10% over the detector's flags);
* **flagged** -- the report's spammers (the detector's flags left, and the near-chance rule), by rule
  (covariance / chance / both), the false flags among them and their share;
* **extreme** -- deepBP's App. H extreme spammers (the most active workers, at chance by the truth: temp's
  three, rte's four), how many are flagged.

A flagged worker with no answer on a task with truth cannot be scored and is counted apart ("unscored").
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import warnings
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent

#: deepBP's App. H: how many extreme spammers each dataset has (its most active workers, at chance).
EXTREME = {"temp": 3, "rte": 4}
#: A flagged worker right this often (by the truth) or more is a false flag.
GOOD = 0.8


def load(datasets: Path, name: str):
    from crowdagg import load_annotations
    from crowdagg.io.read import read_task_labels

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        data = load_annotations(datasets / name / "labels.csv")
    return data, read_task_labels(datasets / name / "truth.csv")


def truth_accuracy(data, truth: dict) -> tuple[np.ndarray, np.ndarray]:
    """Each worker's answers on tasks with truth, and the share of them right (NaN without any)."""
    index = {c: i for i, c in enumerate(data.classes)}
    true = np.array([index.get(truth.get(t), -1) for t in data.task_names.tolist()])[data.task]
    known = true >= 0
    n = np.bincount(data.worker[known], minlength=data.n_workers)
    right = np.bincount(data.worker[known], weights=(true == data.label)[known], minlength=data.n_workers)
    with np.errstate(invalid="ignore", divide="ignore"):
        return n, np.where(n > 0, right / n, np.nan)


def measure(datasets: Path, name: str) -> dict:
    from crowdagg import aggregate
    from crowdagg.reports.spammers import detect_spammers
    from crowdagg.reports.workers import spammer_flags

    data, truth = load(datasets, name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the skipped-workers count is in the table
        scan = detect_spammers(data, seed=0)
        flags = spammer_flags(data, aggregate(data, "ds", seed=0), scan)
    scored, acc = truth_accuracy(data, truth)
    good = scored > 0
    good[good] = acc[good] >= GOOD

    def false(mask: np.ndarray) -> int:
        return int((mask & good).sum())

    by = flags.flagged_by
    flagged = flags.flagged
    answers = np.bincount(data.worker, minlength=data.n_workers)
    top = EXTREME.get(name, 0)
    heavy = np.argsort(-answers, kind="stable")[:top]
    row = {
        "dataset": name, "workers": data.n_workers, "judged": int(flags.judged.sum()),
        "detector": int(scan.flagged.sum()), "detector_false": false(scan.flagged),
        "withdrawn": int(flags.withdrawn.sum()),
        "flagged": int(flagged.sum()), **{f"by_{b}": int((by == b).sum()) for b in ("covariance", "chance", "both")},
        "false": false(flagged), "unscored": int((flagged & (scored == 0)).sum()),
        "extreme": top, "extreme_flagged": int(flagged[heavy].sum()),
        "extreme_answers": answers[heavy].tolist(), "extreme_accuracy": [round(float(a), 3) for a in acc[heavy]],
        "false_flags": [{"worker": str(data.worker_names[w]), "answers": int(answers[w]), "truth_accuracy":
                         round(float(acc[w]), 3), "flagged_by": str(by[w])} for w in np.flatnonzero(flagged & good)],
    }
    row["false_share"] = row["false"] / row["flagged"] if row["flagged"] else 0.0
    return row


def print_table(rows: list[dict]) -> None:
    print("| dataset | workers | judged | detector flags (false) | withdrawn | flagged: covariance / chance / both "
          "| false flags (share) | extreme spammers flagged |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        extreme = f"{r['extreme_flagged']}/{r['extreme']}" if r["extreme"] else "–"
        print(f"| {r['dataset']} | {r['workers']} | {r['judged']} | {r['detector']} ({r['detector_false']}) | "
              f"{r['withdrawn']} | {r['flagged']}: {r['by_covariance']} / {r['by_chance']} / {r['by_both']} | "
              f"{r['false']} ({100 * r['false_share']:.0f}%) | {extreme} |")
    notes = [f"{r['dataset']}: {r['unscored']} flagged worker(s) without an answer on a task with truth"
             for r in rows if r["unscored"]]
    for note in notes:
        print(f"\n{note}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", type=Path, default=Path(os.environ.get(
        "CROWDAGG_DATASETS", HERE.parent.parent / "shared" / "datasets")))
    ap.add_argument("--names", nargs="+", default=["rte", "temp", "web", "dog", "bluebird"])
    ap.add_argument("--json", type=Path, help="write every row here")
    args = ap.parse_args(argv)
    have = [n for n in args.names if (args.datasets / n / "labels.csv").is_file()
            and (args.datasets / n / "truth.csv").is_file()]
    if len(have) < len(args.names):
        print(f"datasets with truth not found under {args.datasets} (left out): "
              + ", ".join(n for n in args.names if n not in have))
    rows = [measure(args.datasets, n) for n in have]
    print_table(rows)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
