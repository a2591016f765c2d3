"""maxmig through ``crowdagg train`` and ``crowdagg predict``: a dense crowd's search for copies refused up front,
the forecaster's labels, the annotators' confusions, the saved model (CPU, tiny epochs)."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("torch")

from tests.cli.test_train import invoke, ok, one_error  # noqa: E402


def write_crowd(folder: Path, n_tasks: int, n_workers: int, accuracy: float, seed: int = 0) -> np.ndarray:
    """f.npy, tasks.txt, labels.csv: every annotator answers every task, right w.p. ``accuracy``, 3 classes,
    features separating the classes; the truth."""
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, 3, n_tasks)
    np.save(folder / "f.npy", (rng.normal(size=(n_tasks, 4)) + 4 * np.eye(3, 4)[truth]).astype(np.float32))
    (folder / "tasks.txt").write_text("".join(f"t{i}\n" for i in range(n_tasks)))
    task, worker = np.repeat(np.arange(n_tasks), n_workers), np.tile(np.arange(n_workers), n_tasks)
    label = np.where(rng.random(task.size) < accuracy, truth[task], rng.integers(0, 3, task.size))
    pd.DataFrame({"task": [f"t{i}" for i in task], "worker": [f"w{w}" for w in worker],
                  "label": [f"c{c}" for c in label]}).to_csv(folder / "labels.csv", index=False)
    return truth


@pytest.mark.quick  # the module's cheapest: one epoch on 30 tasks after a refusal before any training
def test_dense_crowd_copy_search_refused_up_front_naming_its_pairs_and_the_way_out(tmp_path):
    write_crowd(tmp_path, 30, 300, 0.5)
    feats = tmp_path / "f.npy"
    line = one_error(invoke("train", "--features", feats, "-m", "maxmig", "--epochs", "1", "--device", "cpu",
                            "--max-memory", "4M"), 1)
    assert "90,000 pairs of annotators compared to find copies" in line and "-p aggregator_init=votes" in line
    # the plain vote's start searches for no copies: the same limit leaves room
    ok(invoke("train", "--features", feats, "-m", "maxmig", "--epochs", "1", "--device", "cpu", "--max-memory",
              "4M", "-p", "aggregator_init=votes"))


def test_forecaster_workers_save_then_predict(tmp_path):
    truth = write_crowd(tmp_path, 120, 4, 0.8)
    workers, model = tmp_path / "workers.csv", tmp_path / "m.pt"
    args = ("train", "--features", tmp_path / "f.npy", "-m", "maxmig", "--device", "cpu", "--epochs", "60",
            "--lr", "0.02", "--patience", "0", "--seed", "1", "--workers", workers, "--save", model)
    first = ok(invoke(*args, "-p", "forecaster=true"))
    labels = pd.read_csv(io.StringIO(first.stdout))
    assert len(labels) == 120 and (labels["label"] == [f"c{c}" for c in truth]).mean() >= 0.95
    # the annotators' confusions, implied by the classifier's soft outputs against the answers (maxmig's W is no
    # answer model): right w.p. .8 + .2/3 ~ .87 each; measured .74-.82 (soft counts read low)
    acc = pd.read_csv(workers).groupby("worker")["accuracy"].first()
    assert len(acc) == 4 and ((acc > 0.7) & (acc < 0.95)).all(), acc
    predicted = ok(invoke("predict", "--model", model, "--features", tmp_path / "f.npy", "--tasks",
                          tmp_path / "tasks.txt"))
    pred = pd.read_csv(io.StringIO(predicted.stdout))
    assert (pred["label"] == [f"c{c}" for c in truth]).mean() >= 0.95
    assert ok(invoke(*args, "-p", "forecaster=true")).stdout == first.stdout  # same seed, same bytes
