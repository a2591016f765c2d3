"""The trainers' scenarios: Tanno et al.'s flippers and hammer-spammers, GeoCrowdNet's sparse crowd, their features."""

from __future__ import annotations

import numpy as np
import pytest

from crowdagg.errors import UsageError
from crowdagg.simulate import simulate

TRAINER_SCENARIOS = ("tanno-flippers", "tanno-hammer-spammer", "geocrowdnet-sparse")


def nearest_mean_accuracy(x: np.ndarray, truth: np.ndarray, k: int) -> float:
    means = np.stack([x[truth == c].mean(axis=0) for c in range(k)])
    return float((((x[:, None, :] - means[None]) ** 2).sum(axis=2).argmin(axis=1) == truth).mean())


@pytest.mark.parametrize("name", TRAINER_SCENARIOS)
def test_features_are_class_conditional_rows_in_task_order(name):
    c = simulate(2000, scenario=name, seed=3)
    assert c.features is not None and c.features.shape == (2000, 64) and c.features.dtype == np.float32
    assert nearest_mean_accuracy(c.features, c.truth, c.n_classes) > 0.97  # class means 6 noise units apart


@pytest.mark.parametrize("name", TRAINER_SCENARIOS)
def test_the_same_seed_gives_identical_arrays(name):
    a, b = simulate(500, scenario=name, seed=4), simulate(500, scenario=name, seed=4)
    for field in ("task", "worker", "label", "truth", "confusion", "features"):
        assert np.array_equal(getattr(a, field), getattr(b, field))
    assert not np.array_equal(simulate(500, scenario=name, seed=5).features, a.features)


def test_scenarios_without_features_have_none():
    assert simulate(50, scenario="deepbp", seed=0).features is None
    assert simulate(50, 5, 3, seed=0).features is None


def test_pairwise_flippers_flip_each_class_to_one_other_class():
    c = simulate(3000, scenario="tanno-flippers", skill=(0.3, 0.4), seed=1)
    conf = c.confusion
    assert conf.shape == (5, 10, 10) and np.allclose(conf.sum(axis=2), 1)
    diag = np.diagonal(conf, axis1=1, axis2=2)
    assert ((diag >= 0.3) & (diag <= 0.4)).all() and np.allclose(diag, diag[:, :1])  # one skill per annotator
    off = conf.copy()
    off[:, np.arange(10), np.arange(10)] = 0
    assert ((off > 0).sum(axis=2) == 1).all()  # exactly one flip target per (annotator, class), never itself
    assert np.allclose(off.sum(axis=2), 1 - diag)
    assert (c.worker_kind == "flipper").all()


def test_one_label_per_item_by_default_and_per_task_for_the_dense_regime():
    one = simulate(2000, scenario="tanno-flippers", seed=2)
    assert (np.bincount(one.task) == 1).all()
    share = np.bincount(one.worker, minlength=5) / 2000
    assert np.allclose(share, 0.2, atol=0.04)  # a uniformly random annotator per item
    dense = simulate(200, scenario="tanno-flippers", per_task=5, seed=2)
    assert (np.bincount(dense.task) == 5).all()


def test_hammer_spammers_are_right_per_label_and_otherwise_uniform():
    c = simulate(3000, scenario="tanno-hammer-spammer", skill=(0.5, 0.7), seed=1)
    diag = np.diagonal(c.confusion, axis1=1, axis2=2)
    assert ((diag >= 0.5) & (diag <= 0.7)).all()
    off = c.confusion[:, 0, 1:]
    assert np.allclose(off, ((1 - diag[:, 0]) / 9)[:, None])
    correct = c.label == c.truth[c.task]
    assert abs(correct.mean() - diag[c.worker, 0].mean()) < 0.03


def test_geocrowdnet_sparse_annotators_label_a_tenth_of_the_items():
    c = simulate(scenario="geocrowdnet-sparse", seed=0)
    assert (c.n_tasks, c.n_workers, c.n_classes) == (10_000, 10, 5)
    per_worker = np.bincount(c.worker, minlength=10) / c.n_tasks
    # 10% each, plus one random annotator for each item nobody drew (0.9^10 of them)
    assert np.allclose(per_worker, 0.1 + 0.9**10 / 10, atol=0.01)
    assert (np.bincount(c.task, minlength=c.n_tasks) >= 1).all()
    diag = np.diagonal(c.confusion, axis1=1, axis2=2)
    assert diag.min() >= 0.15 and diag.max() <= 0.85 and np.allclose(c.confusion.sum(axis=2), 1)


def test_scenario_arguments_they_have_no_use_for_are_refused():
    with pytest.raises(UsageError, match="does not use"):
        simulate(100, scenario="geocrowdnet-sparse", per_task=2)
    with pytest.raises(UsageError, match="does not use"):
        simulate(100, scenario="tanno-flippers", spammers=0.1)
    with pytest.raises(UsageError, match="n_classes"):
        simulate(100, n_classes=65, scenario="tanno-flippers")


def test_write_adds_the_features_and_their_task_order(tmp_path):
    c = simulate(30, scenario="tanno-flippers", seed=0)
    paths = c.write(tmp_path / "out")
    assert [p.name for p in paths][-2:] == ["features.npy", "tasks.txt"]
    assert np.array_equal(np.load(tmp_path / "out" / "features.npy"), c.features)
    assert (tmp_path / "out" / "tasks.txt").read_text().split() == c.task_names()
    plain = simulate(30, 5, 3, seed=0).write(tmp_path / "plain")
    assert [p.name for p in plain] == ["labels.csv", "truth.csv", "confusion.csv", "workers.csv"]
