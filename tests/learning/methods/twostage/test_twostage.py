"""The two-stage baselines: the registered aggregator on the training answers, then a classifier on its labels."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("torch")

from crowdagg.learning import soft_targets
from crowdagg.learning.methods.twostage import twostage  # noqa: E402
from crowdagg.learning.trainer import canonical, split  # noqa: E402
from crowdagg.methods.registry import get_method, get_trainer  # noqa: E402
from crowdagg.simulate import simulate  # noqa: E402
from crowdagg.simulate.features import gaussian_features  # noqa: E402

FIT = dict(model="linear", epochs=15, batch_size=100, lr=1e-2, seed=0)


def spammy_crowd():
    """500 tasks, 3 classes, 5 answers each from 20 workers, 30% spammers and 20% adversaries: MV is misled
    (.62), DS is not (.89)."""
    crowd = simulate(n_tasks=500, n_workers=20, n_classes=3, per_task=5, model="ds", skill=(0.6, 0.9),
                     spammers=0.3, adversaries=0.2, seed=7)
    data = crowd.to_annotations()
    x = gaussian_features(crowd.truth, 3, dim=16, separation=4.0, seed=7)
    return data, x[[int(t[1:]) for t in data.task_names]], crowd.truth[[int(t[1:]) for t in data.task_names]]


@pytest.fixture(scope="module")
def crowd():
    return spammy_crowd()


@pytest.fixture(scope="module")
def fits(crowd):
    """Each baseline's result, the aggregations it ran and the targets it trained on (spied)."""
    data, x, _ = crowd
    out = {}
    for name in ("mv-then-train", "ds-then-train"):
        calls, targets = [], []
        real_aggregate, real_set = twostage.aggregate, soft_targets.SoftTargetTrainer._set_targets

        def aggregate(d, method, seed, calls=calls, real=real_aggregate):
            calls.append((d, method, seed, real(d, method, seed)))
            return calls[-1][-1]

        def set_targets(state, t, targets=targets, real=real_set):
            targets.append(np.array(t))
            real(state, t)

        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(twostage, "aggregate", aggregate)
            mp.setattr(soft_targets.SoftTargetTrainer, "_set_targets", staticmethod(set_targets))
            result = get_trainer(name).load()(**FIT).fit(data, x)
        out[name] = (result, calls, targets)
    return out


@pytest.mark.parametrize("name", ["mv-then-train", "ds-then-train"])
def test_learns_a_separable_problem_from_noisy_answers(crowd, fits, name):
    _, _, truth = crowd
    result, _, _ = fits[name]
    # the labels are the classifier's (labels_from = "classifier")
    np.testing.assert_array_equal(result.posteriors, result.model_params["classifier_proba"])
    # measured: mv-then-train .894 (its labels: mv .622), ds-then-train .954 (ds .890)
    assert (result.labels == truth).mean() >= (0.87 if name == "mv-then-train" else 0.93)


def test_ds_then_train_beats_mv_then_train_when_spammers_mislead_the_vote(crowd, fits):
    data, _, truth = crowd
    acc = {name: (fits[name][0].labels == truth).mean() for name in fits}
    mv, ds = (get_method(m)(seed=0).fit(data) for m in ("mv", "ds"))
    assert (ds.labels == truth).mean() > (mv.labels == truth).mean() + 0.2  # the premise
    assert acc["ds-then-train"] > acc["mv-then-train"] + 0.03


@pytest.mark.parametrize("name,method", [("mv-then-train", "mv"), ("ds-then-train", "ds")])
def test_the_aggregation_is_the_registered_aggregator_on_the_training_answers_only(crowd, fits, name, method):
    data, _, _ = crowd
    _, calls, targets = fits[name]
    ((train, called, seed, result),) = calls
    assert (called, seed) == (method, 0)
    canon = canonical(data)  # the order a trainer trains in
    keep, data = split(data, 0.1, 0)[canon.answers], canon.data  # the base's held-out draw
    assert 0 < (~keep).sum() and train.n_answers == keep.sum()
    for a in ("task", "worker", "label"):
        np.testing.assert_array_equal(getattr(train, a), getattr(data, a)[keep])
    assert (train.task_names == data.task_names).all() and (train.worker_names == data.worker_names).all()
    assert train.classes == data.classes
    expected = get_method(method)(seed=0).fit(train)  # exact: the same aggregator, data and seed
    np.testing.assert_array_equal(result.posteriors, expected.posteriors)
    np.testing.assert_array_equal(result.labels, expected.labels)
    (trained_on,) = targets
    answered = np.bincount(data.task[keep], minlength=data.n_tasks) > 0
    onehot = np.eye(data.n_classes)[expected.labels]
    np.testing.assert_array_equal(trained_on[answered], onehot[answered])
    assert not trained_on[~answered].any()


def test_soft_targets_are_the_posteriors(crowd):
    data, x, _ = crowd
    seen = []
    real = soft_targets.SoftTargetTrainer._set_targets
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(soft_targets.SoftTargetTrainer, "_set_targets",
                   staticmethod(lambda state, t: (seen.append(np.array(t)), real(state, t))))
        get_trainer("ds-then-train").load()(**{**FIT, "epochs": 1, "targets": "soft"}).fit(data, x)
    canon = canonical(data)  # the order a trainer trains in
    keep, data = split(data, 0.1, 0)[canon.answers], canon.data
    train = data.__class__.from_codes(data.task[keep], data.worker[keep], data.label[keep], n_tasks=data.n_tasks,
                                      n_workers=data.n_workers, n_classes=data.n_classes)
    expected = get_method("ds")(seed=0).fit(train).posteriors
    answered = train.answers_per_task > 0
    np.testing.assert_allclose(seen[0][answered], expected[answered], rtol=0, atol=1e-12)


def test_same_seed_same_result(crowd, fits):
    data, x, _ = crowd
    again = get_trainer("ds-then-train").load()(**FIT).fit(data, x)
    first = fits["ds-then-train"][0]
    np.testing.assert_array_equal(first.posteriors, again.posteriors)
    np.testing.assert_array_equal(first.worker_params["confusion"], again.worker_params["confusion"])


@pytest.mark.quick  # one epoch of a linear model on 200 tasks
def test_tasks_whose_answers_are_all_held_out_are_not_trained_on_and_not_warned_about():
    import warnings

    crowd = simulate(n_tasks=200, n_workers=5, n_classes=3, per_task=1, seed=1)
    data = crowd.to_annotations()
    x = gaussian_features(crowd.truth, 3, dim=4, separation=4.0, seed=1)[[int(t[1:]) for t in data.task_names]]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the aggregator's "task(s) have no answers" would be raised
        result = get_trainer("mv-then-train").load()(**{**FIT, "epochs": 1, "val_fraction": 0.2}).fit(data, x)
    assert result.posteriors.shape == (200, 3)
