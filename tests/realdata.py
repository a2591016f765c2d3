"""The real datasets' accuracy protocol, shared by the methods' real-data tests.

A dataset of ``../shared/datasets`` (``datasets_dir``): its answers with
duplicates dropped keeping the last (``load_annotations(duplicates="last")``),
scored on the tasks of its ``truth.csv`` -- the protocol of the README's and
the benchmarks' figures (``benchmarks/bench_crowdagg.py``).
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from crowdagg import aggregate, load_annotations
from crowdagg.io.read import read_task_labels


def fit_real(datasets_dir: Any, name: str, method: str, **params: Any) -> tuple[float, Any]:
    """(accuracy on the tasks with truth, the result) of ``method`` on dataset ``name``; the fit's warnings
    silenced (a test that reads them fits on its own)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        data = load_annotations(datasets_dir / name / "labels.csv", duplicates="last")
        res = aggregate(data, method, **params)
    truth = read_task_labels(datasets_dir / name / "truth.csv")
    pred = dict(zip(data.task_names.tolist(), res.label_names().tolist()))
    scored = [t for t in truth if t in pred]
    return float(np.mean([pred[t] == truth[t] for t in scored])), res


def accuracy_on(datasets_dir: Any, name: str, method: str, **params: Any) -> float:
    """The accuracy of :func:`fit_real`."""
    return fit_real(datasets_dir, name, method, **params)[0]


def dataset_in_files(datasets_dir: Any, name: str, directory: Any, n_files: int = 3) -> list[str]:
    """Dataset ``name``'s answers split, rows in order, into ``n_files`` CSV files ``part-0.csv``, ... under
    ``directory`` (all text, as the file holds it): the several inputs the Dask engine's tests read."""
    import pandas as pd

    frame = pd.read_csv(datasets_dir / name / "labels.csv", dtype=str, keep_default_na=False)
    files = []
    for i, rows in enumerate(np.array_split(np.arange(len(frame)), n_files)):
        files.append(str(directory / f"part-{i}.csv"))
        frame.iloc[rows].to_csv(files[-1], index=False)
    return files
