"""What the moment methods' tests share: a quiet fit and the accuracy on a real dataset's truth."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd

from crowdagg.errors import CrowdaggWarning
from crowdagg.methods.api import aggregate


def fit(data, method: str, **params):
    """``aggregate(data, method, **params)`` with crowdagg's warnings (fallbacks, convergence) silenced."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CrowdaggWarning)
        return aggregate(data, method, **params)


def accuracy_on(datasets_dir, name: str, result) -> float:
    """The accuracy (%) of ``result``'s labels on the tasks of ``name``'s truth.csv (a task missing: wrong)."""
    gold = pd.read_csv(datasets_dir / name / "truth.csv", dtype=str, keep_default_na=False)
    labels = dict(zip(result.data.task_names, result.label_names()))
    return 100.0 * float(np.mean([labels.get(t) == y for t, y in zip(gold["task"], gold["label"])]))
