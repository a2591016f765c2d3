"""Raykar / AggNet deep EM: learning from noisy answers, recovering confusions, the split, determinism."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("torch")

from crowdagg.learning.methods.em import raykar as raykar_module  # noqa: E402
from crowdagg.learning.trainer import TrainContext, canonical, split  # noqa: E402
from crowdagg.methods.blocks import soft_majority_vote  # noqa: E402
from crowdagg.methods.registry import get_method, get_trainer  # noqa: E402
from crowdagg.simulate import simulate  # noqa: E402
from crowdagg.simulate.features import gaussian_features  # noqa: E402

FIT = dict(model="linear", epochs=15, batch_size=100, lr=1e-2, seed=0)


def dense_crowd(seed: int = 2):
    """600 tasks, 3 classes, 8 workers who each answer every task (DS confusions, accuracy 0.5-0.8), features
    two Gaussian classes 4 apart: the confusions are identifiable from the answers alone."""
    crowd = simulate(n_tasks=600, n_workers=8, n_classes=3, per_task=8, model="ds", skill=(0.5, 0.8),
                     assignment="dense", seed=seed)
    data = crowd.to_annotations()
    tasks = np.array([int(t[1:]) for t in data.task_names])
    workers = np.array([int(w[1:]) for w in data.worker_names])
    assert data.classes == ("0", "1", "2")
    x = gaussian_features(crowd.truth, 3, dim=16, separation=4.0, seed=seed)
    return data, x[tasks], crowd.truth[tasks], crowd.confusion[workers]


@pytest.fixture(scope="module")
def dense():
    data, x, truth, confusion = dense_crowd()
    result = get_trainer("raykar").load()(**FIT).fit(data, x)
    return data, x, truth, confusion, result


def test_learns_the_truth_from_noisy_answers(dense):
    data, x, truth, _, result = dense
    # measured: .983 inferred, .943 the classifier alone; mv .923 and ds .947 on the answers alone
    assert (result.labels == truth).mean() >= 0.97
    assert (result.model_params["classifier_proba"].argmax(1) == truth).mean() >= 0.92
    ds = get_method("ds")(seed=0).fit(data)
    assert (result.labels == truth).mean() > (ds.labels == truth).mean() + 0.02


def test_recovers_the_confusions_of_a_dense_crowd(dense):
    data, _, truth, confusion, result = dense
    estimate = result.worker_params["confusion"]
    assert estimate.shape == (8, 3, 3)
    np.testing.assert_allclose(estimate.sum(axis=2), 1.0, atol=1e-9)
    err = np.abs(estimate - confusion)
    # measured: mean 0.022, max 0.081 (the ds aggregator on the answers alone: mean 0.022); the soft-MV start's
    # counts are off by 0.075 on average, so an M-step that did not move A would fail
    assert err.mean() < 0.035 and err.max() < 0.15
    start = raykar_module.m_step(soft_majority_vote(data), data, 1.0)
    assert np.abs(start - confusion).mean() > 2 * err.mean()


def test_m_step_is_the_smoothed_count_matrix():
    from crowdagg.data.annotations import AnnotationSet

    data = AnnotationSet.from_codes([0, 0, 1, 1], [0, 1, 0, 1], [0, 1, 1, 1], n_classes=2)
    post = np.array([[0.75, 0.25], [0.0, 1.0]])
    got = raykar_module.m_step(post, data, 1.0)
    # worker 0: answered 0 on task 0, 1 on task 1 -> counts [true 0: (.75, 0)], [true 1: (.25, 1)]
    np.testing.assert_allclose(got[0], [[1.75 / 2.75, 1 / 2.75], [1.25 / 3.25, 2 / 3.25]])
    # worker 1: answered 1 on both -> [true 0: (0, .75)], [true 1: (0, 1.25)]
    np.testing.assert_allclose(got[1], [[1 / 2.75, 1.75 / 2.75], [1 / 3.25, 2.25 / 3.25]])


def test_held_out_answers_never_reach_the_targets(monkeypatch):
    data, x, _, _ = dense_crowd(seed=4)
    seen = []
    real = TrainContext.training_set

    def spy(ctx):
        out = real(ctx)
        if not any(out is s for s in seen):
            seen.append(out)
        return out

    monkeypatch.setattr(TrainContext, "training_set", spy)
    get_trainer("raykar").load()(**{**FIT, "epochs": 2, "val_fraction": 0.2}).fit(data, x)
    (train,) = seen
    keep = split(data, 0.2, 0)
    assert train.n_answers == keep.sum() < data.n_answers
    canon = canonical(data)  # the order a trainer trains in
    kept = keep[canon.answers]
    for a in ("task", "worker", "label"):
        np.testing.assert_array_equal(getattr(train, a), getattr(canon.data, a)[kept])
    np.testing.assert_array_equal(train.task_ptr,
                                  np.r_[0, np.cumsum(np.bincount(canon.data.task[kept], minlength=600))])


def test_same_seed_same_result(dense):
    data, x, _, _, first = dense
    again = get_trainer("raykar").load()(**FIT).fit(data, x)
    np.testing.assert_array_equal(first.posteriors, again.posteriors)
    np.testing.assert_array_equal(first.worker_params["confusion"], again.worker_params["confusion"])
    np.testing.assert_array_equal(first.objective, again.objective)
    other = get_trainer("raykar").load()(**{**FIT, "seed": 1}).fit(data, x)
    assert not np.array_equal(first.posteriors, other.posteriors)


def test_one_answer_per_item_starts_at_the_identity_and_moves_only_through_the_classifier():
    """The documented failure mode (Tanno et al. 2019, Fig. 4): with one answer per task the soft-MV start is each
    answer and every worker looks perfect; only a classifier that disagrees with the answers (here a linear model
    on separated features, which cannot fit the noise) moves A towards the truth."""
    crowd = simulate(n_tasks=400, n_workers=5, n_classes=3, per_task=1, model="ds", skill=(0.5, 0.7), seed=3)
    data = crowd.to_annotations()
    x = gaussian_features(crowd.truth, 3, dim=8, separation=4.0, seed=3)[[int(t[1:]) for t in data.task_names]]
    truth = crowd.confusion[[int(w[1:]) for w in data.worker_names]]
    one, five = (get_trainer("raykar").load()(**{**FIT, "epochs": e}).fit(data, x).worker_params["confusion"]
                 for e in (1, 5))
    # measured: mean diagonal 0.92 after one epoch, 0.69 after five; the truth 0.60
    assert np.diagonal(one, axis1=1, axis2=2).mean() > 0.85 > np.diagonal(truth, axis1=1, axis2=2).mean() + 0.2
    assert np.abs(five - truth).mean() < 0.6 * np.abs(one - truth).mean()
