"""Collapse check on the real datasets: each class's share of the labels against its share of the answers.

For every categorical dataset and every method, the largest gap over the
classes (:func:`crowdagg.methods.base.label_share_gap`); a fit whose gap
is over :data:`~crowdagg.methods.base.COLLAPSE_GAP` (0.25) warns that it
may have collapsed, and is marked ``*``.

    CROWDAGG_DATASETS=../shared/datasets python benchmarks/bench_collapse.py
"""

from __future__ import annotations

import os
import sys
import warnings
from pathlib import Path

from crowdagg import load_annotations
from crowdagg.methods.api import REGISTRY, aggregate
from crowdagg.methods.base import COLLAPSE_GAP, label_share_gap
from crowdagg.methods.registry import METHODS

#: The methods whose label shares can collapse: the categorical ones (a numeric method gives values, not labels).
LABELLERS = [name for name in REGISTRY if METHODS[name].kind == "categorical"]

DATASETS = Path(os.environ.get("CROWDAGG_DATASETS", Path(__file__).resolve().parents[2] / "shared" / "datasets"))
CATEGORICAL = ("bluebird", "cf", "cf_amt", "dog", "face", "labelme", "music", "rte", "sentiment", "sp_amt", "temp",
               "trec", "web", "zencrowd")


def gaps(name: str, root: Path = DATASETS) -> dict[str, float]:
    """The gap of each categorical method's fit on one dataset (defaults, duplicates kept)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        data = load_annotations(str(root / name / "labels.csv"))
        return {m: label_share_gap(data, aggregate(data, m).labels)[0] for m in LABELLERS}


def main(names: list[str]) -> None:
    methods = LABELLERS
    print("| dataset | " + " | ".join(methods) + " |")
    print("|---|" + "---|" * len(methods))
    for name in names:
        row = gaps(name)
        print(f"| {name} | " + " | ".join(f"{row[m]:.3f}{'*' if row[m] > COLLAPSE_GAP else ''}" for m in methods)
              + " |", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:] or list(CATEGORICAL))
