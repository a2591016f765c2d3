"""zbs: zero-based skill with crowd-kit's ZeroBasedSkill semantics."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.stats import spearmanr

from crowdagg import load_annotations
from crowdagg.data.annotations import AnnotationSet
from crowdagg.errors import UsageError
from crowdagg.methods.api import aggregate
from crowdagg.methods.votes.zbs import learning_rate
from tests.realdata import fit_real
from tests.tiers import quick_case


def reference_zbs(data: AnnotationSet, n_iter=100, lr_init=1.0, steps=20, factor=0.5, eps=1e-5):
    """crowd-kit's loop, written out in plain numpy over the answers (no engine, no block): the skills after
    ``n_iter`` iterations.  For crowds without ties (the tie rule is the only place the two may differ)."""
    task, worker, label = data.task, data.worker, data.label
    k = data.n_classes
    skills = np.full(data.n_workers, 1.0 / k + eps)
    lr = lr_init
    for it in range(1, n_iter + 1):
        if it % steps == 0:
            lr *= factor
        votes = np.zeros((data.n_tasks, k))
        np.add.at(votes, (task, label), skills[worker])
        labels = votes.argmax(axis=1)
        right = np.bincount(worker, weights=(label == labels[task]).astype(float), minlength=data.n_workers)
        total = np.bincount(worker, minlength=data.n_workers)
        skills = skills + lr * (right / total - skills)
    return skills


def odd_crowd(seed=0, n_tasks=300, n_workers=15, per_task=5):
    """A binary crowd of one-coin workers, an odd number of answers a task: the first vote never ties."""
    rng = np.random.default_rng(seed)
    acc = rng.uniform(0.55, 0.95, n_workers)
    truth = rng.integers(0, 2, n_tasks)
    task = np.repeat(np.arange(n_tasks), per_task)
    worker = np.concatenate([rng.choice(n_workers, per_task, replace=False) for _ in range(n_tasks)])
    right = rng.random(task.size) < acc[worker]
    label = np.where(right, truth[task], 1 - truth[task])
    return AnnotationSet.from_codes(task, worker, label, n_tasks=n_tasks, n_workers=n_workers, n_classes=2)


@pytest.mark.quick
def test_the_learning_rate_halves_at_every_twentieth_iteration():
    assert [learning_rate(t, 1.0, 20, 0.5) for t in (1, 19, 20, 39, 40, 100)] == [1, 1, 0.5, 0.5, 0.25, 1 / 32]
    assert learning_rate(3, 0.8, 3, 0.1) == pytest.approx(0.08)


@pytest.mark.quick
@pytest.mark.parametrize("params", [{}, {"max_iter": 7, "lr_init": 0.6, "lr_steps_to_reduce": 3,
                                         "lr_reduce_factor": 0.2, "eps": 0.01}])
def test_skills_are_the_plain_loops(params):
    data = odd_crowd()
    fit = aggregate(data, "zbs", **params)
    names = {"max_iter": "n_iter", "lr_steps_to_reduce": "steps", "lr_reduce_factor": "factor"}
    expected = reference_zbs(data, **{names.get(k, k): v for k, v in params.items()})
    np.testing.assert_allclose(fit.worker_params["skill"], expected, rtol=0, atol=1e-12)
    assert fit.n_iter == params.get("max_iter", 100)
    # the labels are the vote with the last skills; the posteriors its shares
    votes = np.zeros((data.n_tasks, 2))
    np.add.at(votes, (data.task, data.label), expected[data.worker])
    np.testing.assert_allclose(fit.posteriors, votes / votes.sum(axis=1, keepdims=True), atol=1e-12)
    np.testing.assert_array_equal(fit.labels, votes.argmax(axis=1))


@pytest.mark.quick
def test_a_worker_without_answers_keeps_the_start_and_a_repeated_answer_counts_once_in_the_skill():
    # w2 answered t0 twice the same: crowd-kit's get_accuracy counts that once (1 of 2 right, not 2 of 3)
    data = AnnotationSet.from_codes([0, 0, 0, 1, 1, 1, 0, 2, 2, 2], [0, 1, 2, 0, 1, 2, 2, 0, 1, 2],
                                    [0, 0, 0, 1, 1, 0, 0, 1, 1, 1], n_workers=4, n_classes=2)
    fit = aggregate(data, "zbs", max_iter=1)
    # one iteration at learning rate 1: the skills are the agreements with the majority labels (0, 1, 1)
    np.testing.assert_allclose(fit.worker_params["skill"], [1.0, 1.0, 2 / 3, 0.5 + 1e-5], atol=1e-12)


@pytest.mark.quick
def test_tol_stops_when_no_skill_moves_and_zero_runs_every_iteration():
    data = odd_crowd(seed=1)
    full = aggregate(data, "zbs")
    assert (full.n_iter, full.converged) == (100, False)
    early = aggregate(data, "zbs", tol=1e-6)
    assert early.converged and early.n_iter < 100
    np.testing.assert_allclose(early.worker_params["skill"], full.worker_params["skill"], atol=1e-4)


def tie_crowd(seed=0, n_tasks=400, n_workers=12, k=3):
    """Few workers, even answers a task, three classes: many tied votes, labels that keep moving for a while."""
    rng = np.random.default_rng(seed)
    acc = rng.uniform(0.35, 0.8, n_workers)
    truth = rng.integers(0, k, n_tasks)
    per = rng.choice([2, 4, 6], n_tasks)
    task = np.repeat(np.arange(n_tasks), per)
    worker = np.concatenate([rng.choice(n_workers, p, replace=False) for p in per])
    right = rng.random(task.size) < acc[worker]
    label = np.where(right, truth[task], (truth[task] + rng.integers(1, k, task.size)) % k)
    return AnnotationSet.from_codes(task, worker, label, n_tasks=n_tasks, n_workers=n_workers, n_classes=k)


@pytest.mark.quick
@pytest.mark.parametrize("crowd", ["odd", "ties"])
@pytest.mark.parametrize("params", [{}, {"max_iter": 9, "lr_init": 0.7, "lr_steps_to_reduce": 2}])
def test_voting_again_only_the_tasks_that_may_change_is_exact(monkeypatch, crowd, params):
    """The margin test (a task is voted again only when the skills' moves could have changed its label) and the
    fixed-point stop give the bits of voting every task every iteration: with a rounding bound so large that every
    task is always voted again, the same skills, labels and posteriors."""
    import crowdagg.methods.votes.zbs as zbs

    data = odd_crowd(seed=4) if crowd == "odd" else tie_crowd()
    pruned = aggregate(data, "zbs", **params)
    monkeypatch.setattr(zbs, "ROUNDING", 1e9)
    everything = aggregate(data, "zbs", **params)
    np.testing.assert_array_equal(pruned.worker_params["skill"], everything.worker_params["skill"])
    np.testing.assert_array_equal(pruned.labels, everything.labels)
    np.testing.assert_array_equal(pruned.posteriors, everything.posteriors)


@pytest.mark.quick
def test_recovers_the_ranking_of_simulated_accuracies():
    """Workers of one-coin accuracies from .55 to .95: the skills rank them as their true accuracies do, and are
    close to them (agreement with labels that are mostly right)."""
    from crowdagg.simulate import simulate

    crowd = simulate(2000, 30, 3, 7, model="onecoin", skill=(0.55, 0.95), seed=3)
    fit = aggregate(crowd.to_annotations(), "zbs")
    true = crowd.worker_accuracy()
    skill = fit.worker_params["skill"]
    assert spearmanr(skill, true).statistic > 0.95
    assert np.abs(skill - true).mean() < 0.05
    assert (fit.labels == crowd.truth).mean() > 0.95


@pytest.mark.quick
def test_workers_output_names_the_skill():
    fit = aggregate(odd_crowd(), "zbs", max_iter=3)
    assert fit.worker_columns() == ("worker", "skill", "n_answers")
    assert not fit.has_confusion


@pytest.mark.quick
@pytest.mark.parametrize(("params", "message"), [
    ({"lr_init": 1.5}, "lr_init"), ({"lr_steps_to_reduce": 0}, "lr_steps_to_reduce"),
    ({"lr_reduce_factor": -0.1}, "lr_reduce_factor"), ({"eps": 2.0}, "eps")])
def test_bad_settings_are_refused(params, message):
    with pytest.raises(UsageError, match=message):
        aggregate(odd_crowd(n_tasks=5), "zbs", **params)


# ----------------------------------------------------------------------------- the real datasets
#: crowd-kit 1.4.2 ZeroBasedSkill() (its defaults), duplicates dropped keeping the last
#: (benchmarks/results/crowdkit_reference.json, zbs_acc).
CROWDKIT_ZBS = {"cf": 0.8933, "music": 0.8000, "bluebird": 0.7593, "rte": 0.9213, "dog": 0.8302}


@pytest.mark.parametrize("name", quick_case(CROWDKIT_ZBS, "cf", "zbs"))
def test_accuracy_on_real_data_matches_crowdkit(datasets_dir, name):
    acc, fit = fit_real(datasets_dir, name, "zbs")
    assert acc >= CROWDKIT_ZBS[name] - 0.005, (name, acc)
    assert fit.n_iter == 100


@pytest.mark.parametrize("name", ["bluebird", "music", "rte"])
def test_the_same_skills_and_labels_as_crowd_kit(datasets_dir, name):
    """crowd-kit's ZeroBasedSkill itself: where no vote of the run ties (bluebird, music) the same skills to rounding
    and the same labels; where votes tie (rte: 10 answers a task) its ``idxmax`` takes the first label and ours a
    seeded draw, so a worker who answered a tied task may differ by that answer's share (1/20 on rte: each of its
    workers answered 20 or more tasks) while most workers' skills and nearly all labels agree."""
    from crowdkit.aggregation import ZeroBasedSkill

    path = datasets_dir / name / "labels.csv"
    answers = pd.read_csv(path, dtype=str, keep_default_na=False).drop_duplicates(["task", "worker"], keep="last")
    theirs = ZeroBasedSkill().fit(answers)
    their_labels = theirs.predict(answers)
    data = load_annotations(path, duplicates="last")
    fit = aggregate(data, "zbs")
    skills = pd.Series(fit.worker_params["skill"], index=data.worker_names)
    gap = np.abs(skills - theirs.skills_.reindex(skills.index))
    ours = pd.Series(fit.label_names(), index=data.task_names)
    agree = float((ours == their_labels.reindex(ours.index).astype(str)).mean())
    if name in ("bluebird", "music"):
        assert gap.max() < 1e-12 and agree == 1.0
    else:
        assert gap.max() <= 0.05 + 1e-12 and (gap < 1e-12).mean() > 0.85 and agree > 0.99, (gap.max(), agree)


def test_dask_gives_the_local_result(datasets_dir):
    distributed = pytest.importorskip("distributed")
    from crowdagg.io.dask_read import read_distributed
    from crowdagg.methods.registry import get

    path = str(datasets_dir / "music" / "labels.csv")
    local = aggregate(load_annotations(path), "zbs")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=":0") as cluster, distributed.Client(cluster) as client:
        data, engine = read_distributed([path], client, partitions=2)
        try:
            remote = get("zbs").load()().fit(data, engine=engine)
        finally:
            engine.close()
    np.testing.assert_array_equal(remote.labels, local.labels)
    np.testing.assert_allclose(remote.worker_params["skill"], local.worker_params["skill"], rtol=0, atol=1e-12)
    np.testing.assert_allclose(remote.posteriors, local.posteriors, rtol=0, atol=1e-12)
