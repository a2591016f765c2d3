"""Warm start on a split real dataset: cold, warm (saved counts as pseudo-counts) and the joint fit.

Each dataset's tasks are sorted as strings and cut in two halves.  Batch 1
is fitted and its worker model saved (:func:`crowdagg.methods.model_file.to_json`);
batch 2 is then fitted cold, warm from that model, and the joint fit (both
batches at once) is restricted to batch 2's tasks.  Printed per dataset and
method: accuracy on batch 2's tasks with truth, and agreement of each
batch-2 fit with the joint fit's labels.

    CROWDAGG_DATASETS=../shared/datasets python benchmarks/bench_warm_start.py [web music ...]
"""

from __future__ import annotations

import os
import sys
import warnings
from pathlib import Path

import numpy as np

from crowdagg import load_annotations
from crowdagg.data.annotations import AnnotationSet
from crowdagg.io.read import read_task_labels
from crowdagg.methods.api import aggregate
from crowdagg.methods.blocks import PROB_FLOOR, one_coin_matrices
from crowdagg.methods.em.ds import DawidSkene
from crowdagg.methods.em.onecoin import OneCoinDawidSkene
from crowdagg.methods.model_file import class_order, from_json, to_json

DATASETS = Path(os.environ.get("CROWDAGG_DATASETS", Path(__file__).resolve().parents[2] / "shared" / "datasets"))


def subset(data: AnnotationSet, keep_task: np.ndarray) -> AnnotationSet:
    """The answers of the tasks ``keep_task`` (bool, per task), by name."""
    rows = keep_task[data.task]
    classes = np.asarray(data.classes, dtype=object)
    return AnnotationSet.from_names(data.task_names[data.task[rows]], data.worker_names[data.worker[rows]],
                                    classes[data.label[rows]], classes=list(data.classes))


def halves(data: AnnotationSet) -> tuple[AnnotationSet, AnnotationSet]:
    """Batch 1 and batch 2: the tasks sorted as strings, first half and second half."""
    names = data.task_names.astype(str)
    first = np.zeros(data.n_tasks, dtype=bool)
    first[np.argsort(names, kind="stable")[: data.n_tasks // 2]] = True
    return subset(data, first), subset(data, ~first)


def old_warm_start(data: AnnotationSet, method: str, model: dict, add_counts: bool = False) -> object:
    """The rule before worker-model format 2: EM started from the saved probabilities, nothing added after.

    ``add_counts``: started there, but the saved counts added in every M-step (the new rule's prior with the
    old rule's start).
    """
    order = class_order(model, list(data.classes))
    found = np.array([model["workers"].index(w) if w in model["workers"] else -1 for w in data.worker_names])
    known = found >= 0
    conf = model["confusion"] if "confusion" in model else one_coin_matrices(model["accuracy"], len(model["classes"]))
    conf_ot = conf[found[known]][:, order][:, :, order].transpose(0, 2, 1)
    prior = model["prior"][order] / model["prior"][order].sum()

    class Old(OneCoinDawidSkene if method == "onecoin" else DawidSkene):  # type: ignore[misc,valid-type]
        def _start(self, data, checked, start, rng):  # type: ignore[no-untyped-def]
            state, _ = super()._start(data, checked, start, rng)
            state.prior = np.maximum(prior, PROB_FLOOR)
            state.conf_ot = state.conf_ot.copy()
            state.conf_ot[known] = np.maximum(conf_ot / conf_ot.sum(axis=1, keepdims=True), PROB_FLOOR)
            state.objective = state.e_step()
            return state, state.objective

    return Old(init_workers=model if add_counts else None).fit(data)


def labels_by_name(result) -> dict[str, str]:
    return dict(zip(result.data.task_names.tolist(), result.label_names().tolist()))


def compare(name: str, method: str, root: Path = DATASETS) -> dict[str, float]:
    """Accuracy of cold, warm and joint fits on batch 2, and their agreement with the joint fit."""
    data = load_annotations(str(root / name / "labels.csv"))
    truth = read_task_labels(str(root / name / "truth.csv"))
    one, two = halves(data)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = from_json(to_json(aggregate(one, method)))
        fits = {"cold": aggregate(two, method), "old warm": old_warm_start(two, method, model),
                "warm": aggregate(two, method, init_workers=model),
                "counts + old start": old_warm_start(two, method, model, add_counts=True), "joint": aggregate(data, method)}
    joint = labels_by_name(fits["joint"])
    tasks = two.task_names.tolist()
    scored = [t for t in tasks if t in truth]
    row: dict[str, float] = {}
    for kind, fit in fits.items():
        got = labels_by_name(fit)
        row[f"{kind} accuracy"] = float(np.mean([got[t] == truth[t] for t in scored]))
        if kind != "joint":
            row[f"{kind} agrees with joint"] = float(np.mean([got[t] == joint[t] for t in tasks]))
    return row


def main(names: list[str]) -> None:
    kinds = ("cold", "old warm", "warm", "counts + old start")
    header = ["dataset", "method", *(f"{k} acc" for k in (*kinds, "joint")), *(f"{k} = joint" for k in kinds)]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for name in names:
        for method in ("ds", "onecoin"):
            r = compare(name, method)
            cells = [r[f"{k} accuracy"] for k in (*kinds, "joint")] + [r[f"{k} agrees with joint"] for k in kinds]
            print("| " + " | ".join([name, method, *(f"{v:.3f}" for v in cells)]) + " |", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:] or ["web", "music"])
