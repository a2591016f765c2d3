"""Shared fixtures of the trainers' tests: torch is the optional extra ``train`` (skipped without it)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("torch")


@pytest.fixture(scope="session")
def separable():
    """A crowd of 400 tasks, 3 classes, 12 workers (4 answers a task, accuracy .6-.9) and well-separated
    Gaussian features (class means 5 apart: Bayes accuracy ~ 99%): (data, features aligned to data.tasks, truth)."""
    from crowdagg.simulate import simulate
    from crowdagg.simulate.features import gaussian_features

    crowd = simulate(n_tasks=400, n_workers=12, n_classes=3, per_task=4, seed=3)
    data = crowd.to_annotations()
    x = gaussian_features(crowd.truth, 3, dim=8, separation=5.0, seed=4)
    order = np.array([int(t[1:]) for t in data.task_names])  # simulated task names are t<index>
    return data, x[order], crowd.truth[order], crowd
