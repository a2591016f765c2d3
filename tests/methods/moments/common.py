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


def fallback_conf(data) -> np.ndarray:
    """The soft-vote fallback's matrices in the result's ``[worker, true, observed]`` layout."""
    from crowdagg.engine import LocalEngine
    from crowdagg.methods.moments.estimate import soft_vote_matrices

    return soft_vote_matrices(LocalEngine(data)).transpose(0, 2, 1)


def assert_decoded(result, data, conf: np.ndarray) -> None:
    """``result``'s posteriors are one E-step under its prior and ``conf`` ([worker, true, observed]), written plainly,
    and its labels their argmax wherever that is unique (a tie is drawn by the seed)."""
    task = np.repeat(np.arange(data.n_tasks), np.diff(data.task_ptr))
    with np.errstate(divide="ignore"):
        log = np.tile(np.log(result.prior), (data.n_tasks, 1))
        np.add.at(log, task, np.log(conf[data.worker, :, data.label]))
    log -= log.max(axis=1, keepdims=True)
    post = np.exp(log)
    post /= post.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(result.posteriors, post, atol=1e-9)
    top = np.sort(post, axis=1)
    unique = top[:, -1] - top[:, -2] > 1e-9 if post.shape[1] > 1 else np.ones(len(post), dtype=bool)
    np.testing.assert_array_equal(result.labels[unique], post[unique].argmax(axis=1))
