"""COINNet against GeoCrowdNet (F) on LabelMe with a share of corrupted items, and its outlier detection.

    PYTHONPATH=. .venv/bin/python benchmarks/bench_coinnet.py --threads 1
    PYTHONPATH=. .venv/bin/python benchmarks/bench_coinnet.py --seeds 0 --epochs 20 --json /tmp/coinnet.json

Issue 31's COINNet scenario (Nguyen, Ibrahim & Fu, NeurIPS 2024; ALGORITHMS.md §10.4): LabelMe's answers and
VGG features (``$CROWDAGG_DATASETS/labelme``, read by :func:`bench_train.load_dataset`), with ``--corrupt``
(default 20 %) of the items -- a seeded draw -- whose every answer is replaced by a class drawn uniformly at
random (the same annotators, the same number of answers: answers that follow no annotator's confusion).  For
each seed (``--seeds``, default 0 1 2: the corruption's draw and the trainers' seed) ``coinnet`` and
``geocrowdnet-f`` are trained with their declared defaults (``--epochs`` and ``--param NAME=VALUE``, given to
every method declaring NAME, override them) and scored on the truth: the accuracy of the labels each infers for
the training items (``crowdagg train``'s stdout), on all items and on the clean and corrupted ones apart, and the
ROC AUC of ``coinnet``'s outlier scores (``task_params["outlier_score"]``, what ``--task-params`` writes) for the
corrupted items.  Targets (the issue): ``coinnet`` ≥ ``geocrowdnet-f`` + 2 points, AUC ≥ 0.8.

A markdown table on stdout; ``--json FILE`` writes every measurement and each seed's corrupted items (by
task name).  ``--threads N`` runs torch on N threads (1 is fastest on a shared machine).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from bench_train import accuracy, cell, datasets_root, load_dataset, mean, parse_param, table  # noqa: E402

METHODS = ("coinnet", "geocrowdnet-f")
TARGET_GAIN = 0.02
TARGET_AUC = 0.8


def corrupt(data, share: float, seed: int):
    """``data`` with ``share`` of its answered items (a seeded draw) answered uniformly at random: (the new set,
    the corrupted items' task indices, sorted)."""
    from crowdagg.data.annotations import AnnotationSet

    rng = np.random.default_rng([seed, 0xC01])
    answered = np.flatnonzero(data.answers_per_task > 0)
    bad = np.sort(rng.choice(answered, size=int(round(share * answered.size)), replace=False))
    label = np.array(data.label, dtype=np.int64)
    hit = np.isin(data.task, bad)
    label[hit] = rng.integers(0, data.n_classes, size=int(hit.sum()))
    out = AnnotationSet.from_codes(
        np.asarray(data.task, dtype=np.int64), np.asarray(data.worker, dtype=np.int64), label, n_tasks=data.n_tasks,
        n_workers=data.n_workers, n_classes=data.n_classes, task_names=[str(t) for t in data.task_names],
        worker_names=[str(w) for w in data.worker_names], classes=[str(c) for c in data.classes])
    return out, bad


def auc(scores: np.ndarray, positive: np.ndarray) -> float:
    """ROC AUC of ``scores`` for the ``positive`` mask (ties count one half): the Mann-Whitney statistic."""
    from scipy.stats import rankdata

    ranks = rankdata(scores)
    n_pos, n_neg = int(positive.sum()), int((~positive).sum())
    return float((ranks[positive].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def fit(method: str, data, x: np.ndarray, seed: int, opts):
    from crowdagg.methods.registry import get_trainer

    spec = get_trainer(method)
    declared = {p.name for p in spec.params}
    params = {k: v for k, v in opts.param.items() if k in declared}
    if opts.epochs is not None:
        params["epochs"] = opts.epochs
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return spec.load()(**params, seed=seed).fit(data, x)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--corrupt", type=float, default=0.2, help="share of the items answered at random (0.2)")
    ap.add_argument("--epochs", type=int, default=None)
    ap.add_argument("--param", type=parse_param, action="append", default=[], metavar="NAME=VALUE")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--json", default=None)
    opts = ap.parse_args(argv)
    opts.param = dict(opts.param)
    if opts.threads is not None:
        from crowdagg.core import threads

        threads.set_threads(opts.threads)
    ds = load_dataset("labelme", datasets_root())
    runs = []
    for seed in opts.seeds:
        data, bad = corrupt(ds.data, opts.corrupt, seed)
        is_bad = np.zeros(data.n_tasks, dtype=bool)
        is_bad[bad] = True
        run = {"seed": seed, "corrupted": [str(t) for t in data.task_names[bad]]}
        for method in METHODS:
            start = time.perf_counter()
            result = fit(method, data, ds.x, seed, opts)
            labels = np.asarray(result.labels)
            run[method] = {
                "labels": accuracy(labels, ds.truth),
                "clean": accuracy(labels[~is_bad], ds.truth[~is_bad]),
                "corrupted": accuracy(labels[is_bad], ds.truth[is_bad]),
                "seconds": time.perf_counter() - start, "best_epoch": result.model_params["best_epoch"],
            }
            if method == "coinnet":
                run[method]["auc"] = auc(result.task_params["outlier_score"], is_bad)
            print(f"seed {seed} {method}: " + ", ".join(f"{k} {v:.3f}" for k, v in run[method].items()),
                  file=sys.stderr)
        runs.append(run)
    head = ["method", "training labels", "clean items", "corrupted items", "outlier AUC"]
    rows = []
    for method in METHODS:
        got = [r[method] for r in runs]
        rows.append([f"`{method}`", *(cell([g[k] for g in got]) for k in ("labels", "clean", "corrupted")),
                     cell([g["auc"] for g in got]) if "auc" in got[0] else "—"])
    print(f"\n### LabelMe with {opts.corrupt:.0%} of the items answered at random: accuracy, mean ± std over seeds "
          f"{opts.seeds}\n")
    print(table(head, rows))
    gain = mean([r["coinnet"]["labels"] - r["geocrowdnet-f"]["labels"] for r in runs])
    area = mean([r["coinnet"]["auc"] for r in runs])
    print(f"\n- coinnet − geocrowdnet-f: {100 * gain:+.1f} points (target ≥ +{100 * TARGET_GAIN:.0f}: "
          f"{'met' if gain >= TARGET_GAIN else 'NOT met'}); outlier AUC {area:.3f} (target ≥ {TARGET_AUC}: "
          f"{'met' if area >= TARGET_AUC else 'NOT met'})")
    if opts.json:
        Path(opts.json).write_text(json.dumps({"corrupt": opts.corrupt, "params": opts.param, "epochs": opts.epochs,
                                               "runs": runs}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
