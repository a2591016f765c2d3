"""Tests of crowdagg.simulate: the synthetic-crowd generator."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from crowdagg.data.annotations import AnnotationSet
from crowdagg.errors import UsageError
from crowdagg.simulate import ASSIGNMENTS, MODELS, SCENARIOS, SimulatedCrowd, simulate

ARRAYS = ("task", "worker", "label", "truth", "confusion", "prior")


def _keys(c: SimulatedCrowd) -> np.ndarray:
    return c.task.astype(np.int64) * c.n_workers + c.worker


def _check_invariants(c: SimulatedCrowd) -> None:
    n_answers = c.task.shape[0]
    assert c.task.dtype == np.int32 and c.worker.dtype == np.int32
    assert c.label.dtype in (np.int8, np.int16, np.int64)
    assert c.truth.dtype == np.int64 and c.confusion.dtype == np.float64
    assert c.worker.shape == c.label.shape == (n_answers,)
    assert c.confusion.shape == (c.n_workers, c.n_classes, c.n_classes)
    assert c.prior.shape == (c.n_classes,)
    assert c.worker_kind.shape == (c.n_workers,) and c.worker_kind.dtype == object
    np.testing.assert_allclose(c.confusion.sum(axis=2), 1.0, atol=1e-12)
    assert np.all(c.confusion >= 0)
    np.testing.assert_allclose(c.prior.sum(), 1.0)
    assert np.all(np.diff(c.task) >= 0), "answers sorted by task"
    assert np.unique(_keys(c)).size == n_answers, "no repeated (task, worker) pair"
    assert np.all(np.bincount(c.task, minlength=c.n_tasks) >= 1), "every task answered"
    assert c.label.min() >= 0 and c.label.max() < c.n_classes
    assert c.worker.max() < c.n_workers and c.truth.max() < c.n_classes


# ---------------------------------------------------------------- basics
@pytest.mark.parametrize("model", list(MODELS))
@pytest.mark.parametrize("assignment", list(ASSIGNMENTS))
def test_invariants_every_model_and_assignment(model: str, assignment: str) -> None:
    c = simulate(
        120, 24, 3, 4, model=model, assignment=assignment, spammers=0.25, adversaries=0.1, extreme_spammers=2, seed=5
    )
    _check_invariants(c)
    assert c.n_tasks == 120 and c.n_classes == 3
    assert c.n_workers == 24 + 2  # regular: ceil(120 * 4 / r) is not asked for, so n_workers stays 24
    if assignment == "random":
        assert np.all(np.bincount(c.task) == 4 + 2)
    if assignment == "dense":
        assert c.n_answers == 120 * 26


def test_defaults() -> None:
    c = simulate(seed=0)
    _check_invariants(c)
    assert (c.n_tasks, c.n_workers, c.n_classes, c.n_answers) == (1000, 50, 2, 5000)
    assert set(c.worker_kind) == {"ds"}
    np.testing.assert_allclose(c.prior, [0.5, 0.5])


def test_same_seed_same_output_different_seed_differs() -> None:
    def run(seed: int) -> SimulatedCrowd:
        return simulate(300, 20, 4, 3, spammers=0.2, adversaries=0.1, extreme_spammers=1, seed=seed)

    a, b, other = run(11), run(11), run(12)
    for name in ARRAYS:
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    np.testing.assert_array_equal(a.worker_kind, b.worker_kind)
    assert not np.array_equal(a.label, other.label)
    assert not np.array_equal(a.confusion, other.confusion)


def test_does_not_touch_global_random_state() -> None:
    np.random.seed(123)
    before = np.random.random()
    np.random.seed(123)
    simulate(100, 10, 2, 3, seed=1)
    assert np.random.random() == before


def test_prior_is_used() -> None:
    c = simulate(4000, 10, 3, 2, prior=[2, 1, 1], seed=2)
    np.testing.assert_allclose(c.prior, [0.5, 0.25, 0.25])
    freq = np.bincount(c.truth, minlength=3) / c.n_tasks
    # binomial sd at n=4000 is < 0.008; 0.04 is 5 sd
    np.testing.assert_allclose(freq, c.prior, atol=0.04)


# ---------------------------------------------------------- worker models
def test_ds_matrices_follow_skill_range() -> None:
    c = simulate(50, 40, 4, 2, model="ds", skill=(0.7, 0.8), seed=3)
    diag = np.diagonal(c.confusion, axis1=1, axis2=2)
    assert diag.min() >= 0.7 and diag.max() <= 0.8
    # full confusion: off-diagonal entries are not all equal
    off = c.confusion[0][~np.eye(4, dtype=bool)]
    assert np.ptp(off) > 0


def test_onecoin_and_hammer_matrices() -> None:
    c = simulate(50, 30, 3, 2, model="onecoin", skill=(0.5, 0.9), seed=4)
    diag = np.diagonal(c.confusion, axis1=1, axis2=2)
    assert np.allclose(diag, diag[:, :1])
    np.testing.assert_allclose(c.confusion[:, 0, 1], (1 - diag[:, 0]) / 2)
    h = simulate(200, 30, 3, 3, model="hammer-spammer", skill=(0.5, 1.0), seed=4)
    hammers = np.flatnonzero(h.worker_kind == "hammer")
    spam = np.flatnonzero(h.worker_kind == "spammer")
    assert hammers.size == spam.size == 15, "spammer fraction defaults to 0.5"
    np.testing.assert_array_equal(h.confusion[hammers], np.broadcast_to(np.eye(3), (15, 3, 3)))
    np.testing.assert_allclose(h.confusion[spam], 1 / 3)
    is_hammer = np.isin(h.worker, hammers)
    assert np.array_equal(h.label[is_hammer], h.truth[h.task[is_hammer]])


def test_empirical_confusion_matches_true() -> None:
    # Dense, 20k tasks, K=3: each row of worker 0 is estimated from ~6.7k answers.
    # Binomial sd of an entry <= sqrt(.25/6000) ~ 0.0065; tolerance 0.03 is > 4.5 sd.
    c = simulate(20_000, 3, 3, assignment="dense", skill=(0.5, 0.8), seed=7)
    for w in range(3):
        sel = c.worker == w
        counts = np.zeros((3, 3))
        np.add.at(counts, (c.truth[c.task[sel]], c.label[sel]), 1)
        emp = counts / counts.sum(axis=1, keepdims=True)
        np.testing.assert_allclose(emp, c.confusion[w], atol=0.03)


def test_spammers_answer_independently_of_truth() -> None:
    c = simulate(6000, 10, 3, assignment="dense", spammers=0.3, seed=8)
    spam = np.flatnonzero(c.worker_kind == "spammer")
    assert spam.size == 3
    for w in spam:
        assert np.allclose(c.confusion[w], c.confusion[w, :1])  # same row for every true class
        sel = c.worker == w
        counts = np.zeros((3, 3))
        np.add.at(counts, (c.truth[c.task[sel]], c.label[sel]), 1)
        emp = counts / counts.sum(axis=1, keepdims=True)
        # ~2000 answers per row: sd <= 0.011; rows agree within 0.06 (> 3.8 sd of a difference)
        assert np.abs(emp - emp.mean(axis=0)).max() < 0.06
        # chi-square test of independence at a loose level
        expected = counts.sum(1, keepdims=True) * counts.sum(0, keepdims=True) / counts.sum()
        chi2 = ((counts - expected) ** 2 / expected).sum()
        assert chi2 < 25.0  # df = 4; P(chi2_4 > 25) ~ 5e-5


def test_adversaries_prefer_a_wrong_class() -> None:
    c = simulate(100, 20, 4, 3, adversaries=0.5, seed=9)
    adv = np.flatnonzero(c.worker_kind == "adversary")
    assert adv.size == 10
    for w in adv:
        conf = c.confusion[w]
        wrong_best = np.argmax(conf, axis=1)
        assert np.all(wrong_best != np.arange(4))
        assert len(set(wrong_best)) == 4, "a permutation of the classes"


def test_extreme_spammers_label_every_task() -> None:
    c = simulate(150, 30, 2, 3, extreme_spammers=3, seed=10)
    ext = np.flatnonzero(c.worker_kind == "extreme_spammer")
    np.testing.assert_array_equal(ext, [30, 31, 32])
    np.testing.assert_array_equal(np.bincount(c.worker, minlength=33)[ext], 150)
    np.testing.assert_allclose(c.confusion[ext], 0.5)
    np.testing.assert_array_equal(np.bincount(c.task), 3 + 3)


# --------------------------------------------------------------- graphs
@pytest.mark.parametrize(("n", "ell", "r"), [(1000, 3, 4), (90, 5, 9), (20, 4, 20), (7, 3, 2)])
def test_regular_assignment_degrees(n: int, ell: int, r: int) -> None:
    c = simulate(n, None, 2, ell, assignment="regular", tasks_per_worker=r, seed=n)
    _check_invariants(c)
    assert c.n_workers == math.ceil(n * ell / r)
    np.testing.assert_array_equal(np.bincount(c.task, minlength=n), ell)
    deg = np.bincount(c.worker, minlength=c.n_workers)
    assert deg.max() <= r and deg.min() >= 1
    assert deg.max() - deg.min() <= 1


def test_random_assignment_uses_workers_evenly() -> None:
    # dense-ish branch (per_task > n_workers / 4) and sparse branch
    for m, ell in ((8, 6), (40, 3)):
        c = simulate(3000, m, 2, ell, seed=m)
        _check_invariants(c)
        np.testing.assert_array_equal(np.bincount(c.task), ell)
        share = np.bincount(c.worker, minlength=m) / c.n_answers
        np.testing.assert_allclose(share, 1 / m, atol=0.25 / m)


# ------------------------------------------------------------ scenarios
@pytest.mark.parametrize(
    ("scenario", "n_tasks", "n_workers", "n_classes"),
    [
        ("maxmig-independent", 12_500, 5, 2),
        ("maxmig-naive-majority", 12_500, 10, 2),
        ("maxmig-correlated", 12_500, 10, 2),
        ("deepbp", 1000, 750, 2),
        ("tutorial-spammers", 10_000, 20, 4),
        ("multispa-demo", 10_000, 25, 3),
        ("em-trap", 10_000, 39, 3),
        ("dense-heavy", 200_000, 1000, 2),
        ("tanno-flippers", 10_000, 5, 10),
        ("tanno-hammer-spammer", 10_000, 5, 10),
        ("geocrowdnet-sparse", 10_000, 10, 5),
    ],
)
def test_scenarios_have_documented_sizes(scenario: str, n_tasks: int, n_workers: int, n_classes: int) -> None:
    c = simulate(scenario=scenario, seed=1)
    _check_invariants(c)
    assert (c.n_tasks, c.n_workers, c.n_classes) == (n_tasks, n_workers, n_classes)
    # the one-line description (crowdagg simulate --list-scenarios) states the sizes it produces
    assert f"N={n_tasks}" in SCENARIOS[scenario]


def test_scenario_sizes_can_be_overridden() -> None:
    c = simulate(300, scenario="maxmig-independent", seed=0)
    assert c.n_tasks == 300 and c.n_answers == 1500
    d = simulate(400, scenario="deepbp", extreme_spammers=2, seed=0)
    assert (d.n_tasks, d.n_workers) == (400, 300 + 2)
    np.testing.assert_array_equal(np.bincount(d.task), 3 + 2)
    t = simulate(200, 10, 3, 4, scenario="tutorial-spammers", seed=0)
    assert (t.n_tasks, t.n_workers, t.n_classes, t.n_answers) == (200, 10, 3, 800)


def test_maxmig_independent_matrices() -> None:
    c = simulate(10, scenario="maxmig-independent")
    acc = np.diagonal(c.confusion, axis1=1, axis2=2)  # (P(cat|cat), P(dog|dog))
    np.testing.assert_allclose(acc, [[0.8, 0.6], [0.6, 0.6], [0.6, 0.9], [0.7, 0.7], [0.7, 0.6]])
    assert c.n_answers == 50, "dense"


def test_maxmig_naive_majority_juniors_always_answer_zero() -> None:
    c = simulate(500, scenario="maxmig-naive-majority", seed=2)
    juniors = np.flatnonzero(c.worker_kind == "junior_constant")
    np.testing.assert_array_equal(juniors, [5, 6, 7, 8, 9])
    sel = np.isin(c.worker, juniors)
    assert sel.sum() == 5 * 500 and np.all(c.label[sel] == 0)
    assert np.any(c.label[~sel] == 1)


def test_maxmig_correlated_copiers_equal_their_senior() -> None:
    c = simulate(500, scenario="maxmig-correlated", seed=3)
    np.testing.assert_array_equal(c.copy_of, [-1, -1, -1, -1, -1, 0, 0, 2, 2, 2])
    labels = c.label.reshape(500, 10)  # dense and task-sorted, workers in order
    np.testing.assert_array_equal(c.worker.reshape(500, 10), np.broadcast_to(np.arange(10), (500, 10)))
    for w, src in ((5, 0), (6, 0), (7, 2), (8, 2), (9, 2)):
        np.testing.assert_array_equal(labels[:, w], labels[:, src])
        np.testing.assert_array_equal(c.confusion[w], c.confusion[src])
    assert not np.array_equal(labels[:, 0], labels[:, 2])


def test_deepbp_is_one_coin_beta_2_1() -> None:
    c = simulate(scenario="deepbp", seed=4)
    q = c.confusion[:, 0, 0]
    np.testing.assert_allclose(c.confusion[:, 1, 1], q)
    # Beta(2,1): mean 2/3, sd 0.236; over 750 workers the mean's sd is 0.009
    assert abs(q.mean() - 2 / 3) < 0.04
    np.testing.assert_array_equal(np.bincount(c.task), 3)
    assert np.bincount(c.worker).max() <= 4


def test_tutorial_and_multispa_worker_kinds() -> None:
    t = simulate(100, scenario="tutorial-spammers", seed=5)
    assert (t.worker_kind == "spammer").sum() == 6  # 0.3 * 20
    assert (t.worker_kind == "ds").sum() == 14
    t2 = simulate(100, scenario="tutorial-spammers", spammers=0.5, seed=5)
    assert (t2.worker_kind == "spammer").sum() == 10
    m = simulate(2000, scenario="multispa-demo", seed=6)
    kinds = list(m.worker_kind)
    assert kinds.count("specialist") == 3 and kinds.count("worse_than_random") == 1
    for w in np.flatnonzero(m.worker_kind == "worse_than_random"):
        assert np.all(np.argmin(m.confusion[w], axis=1) == np.arange(3))
    spec = np.flatnonzero(m.worker_kind == "specialist")
    best_on_diag = np.argmax(m.confusion[spec], axis=2) == np.arange(3)  # (3 specialists, 3 classes)
    assert best_on_diag.any(axis=0).all(), "each class has a specialist"
    # each worker labels ~20% of the tasks
    share = np.bincount(m.worker, minlength=25) / 2000
    assert np.all(np.abs(share - 0.2) < 0.06)


# ------------------------------------------------------------------ output
def test_to_annotations() -> None:
    c = simulate(60, 8, 3, 3, seed=1)
    data = c.to_annotations()
    assert isinstance(data, AnnotationSet)
    assert (data.n_tasks, data.n_workers, data.n_classes, data.n_answers) == (60, 8, 3, 180)
    assert data.task_names[0] == "t0" and data.worker_names[7] == "w7" and data.classes == ("0", "1", "2")
    np.testing.assert_array_equal(data.label, c.label)
    assert data.n_duplicates == 0


def test_write_round_trips(tmp_path: Path) -> None:
    c = simulate(40, 6, 3, 2, spammers=0.3, extreme_spammers=1, seed=2)
    out = tmp_path / "nested" / "crowd"
    paths = c.write(out)
    assert [p.name for p in paths] == ["labels.csv", "truth.csv", "confusion.csv", "workers.csv"]
    assert sorted(p.name for p in out.iterdir()) == sorted(p.name for p in paths), "no temp files left"
    headers = {p.name: p.read_text().splitlines()[0] for p in paths}
    assert headers == {
        "labels.csv": "task,worker,label",
        "truth.csv": "task,label",
        "confusion.csv": "worker,true_label,observed_label,probability",
        "workers.csv": "worker,kind,accuracy,n_answers",
    }
    labels = pd.read_csv(out / "labels.csv", dtype=str)
    assert len(labels) == c.n_answers
    np.testing.assert_array_equal(labels["task"], [f"t{t}" for t in c.task])
    np.testing.assert_array_equal(labels["worker"], [f"w{w}" for w in c.worker])
    np.testing.assert_array_equal(labels["label"].astype(int), c.label)
    truth = pd.read_csv(out / "truth.csv")
    np.testing.assert_array_equal(truth["label"], c.truth)
    conf = pd.read_csv(out / "confusion.csv")
    assert len(conf) == c.n_workers * 9
    row = conf[(conf.worker == "w6") & (conf.true_label == 2) & (conf.observed_label == 1)]
    assert float(row.probability.iloc[0]) == c.confusion[6, 2, 1]
    workers = pd.read_csv(out / "workers.csv")
    np.testing.assert_array_equal(workers["kind"], c.worker_kind.astype(str))
    np.testing.assert_array_equal(workers["n_answers"], np.bincount(c.worker, minlength=c.n_workers))
    np.testing.assert_allclose(workers["accuracy"], np.diagonal(c.confusion, axis1=1, axis2=2) @ c.prior)
    # rewriting replaces the files
    c.write(out)
    assert len(list(out.iterdir())) == 4
    # floats in the shortest text that reads back exactly
    assert (out / "confusion.csv").read_text().count(repr(float(c.confusion[6, 2, 1]))) >= 1


def test_write_follows_symlinks_and_keeps_modes(tmp_path: Path) -> None:
    c = simulate(20, 4, 2, 2, seed=1)
    real = tmp_path / "real"
    real.mkdir()
    (real / "labels.csv").write_text("old")
    (real / "labels.csv").chmod(0o640)
    out = tmp_path / "out"
    out.mkdir()
    (out / "labels.csv").symlink_to(real / "labels.csv")
    c.write(out)
    assert (out / "labels.csv").is_symlink()
    assert (real / "labels.csv").read_text().startswith("task,worker,label\n")
    assert ((real / "labels.csv").stat().st_mode & 0o777) == 0o640


def test_write_leaves_nothing_when_it_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from crowdagg.errors import DataError

    c = simulate(20, 4, 2, 2, seed=1)
    out = tmp_path / "existing"
    out.mkdir()
    (out / "truth.csv").mkdir()  # one of the four cannot be written: none is
    with pytest.raises(DataError, match="is a directory"):
        c.write(out)
    assert sorted(p.name for p in out.iterdir()) == ["truth.csv"]

    import crowdagg.io.output

    def fail(outputs):
        raise DataError("disk full")

    monkeypatch.setattr(crowdagg.io.output, "commit", fail)
    with pytest.raises(DataError, match="disk full"):
        c.write(tmp_path / "new")
    assert not (tmp_path / "new").exists()  # the directory it created is removed again
    monkeypatch.undo()
    fresh = tmp_path / "fresh" / "deeper"
    c.write(fresh)  # parents are created
    assert len(list(fresh.iterdir())) == 4


@pytest.mark.parametrize(
    "kwargs",
    [{"n_tasks": 10**12}, {"n_tasks": 10**9, "per_task": 3}, {"n_tasks": 10, "n_workers": 10**6, "n_classes": 10**3},
     {"scenario": "maxmig-independent", "n_tasks": 10**12}, {"n_tasks": 10**6, "assignment": "dense", "n_workers": 10**6}],
)
def test_absurd_sizes_are_refused_up_front(kwargs: dict) -> None:
    from crowdagg.errors import ResourceError

    with pytest.raises(ResourceError, match=r"this needs ~[\d.]+ [KMGT]B \("):
        simulate(**kwargs, max_memory="4G")


# ------------------------------------------------------------------ errors
@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"n_tasks": 0}, "n_tasks"),
        ({"n_tasks": 2.5}, "n_tasks"),
        ({"n_workers": True}, "n_workers"),
        ({"n_classes": 1}, "n_classes"),
        ({"per_task": 0}, "per_task"),
        ({"n_workers": 3, "per_task": 5}, "per_task=5 exceeds n_workers=3"),
        ({"n_workers": 3, "per_task": 5, "assignment": "regular"}, "per_task=5"),
        ({"spammers": 1.5}, "spammers"),
        ({"adversaries": -0.1}, "adversaries"),
        ({"spammers": 0.6, "adversaries": 0.6}, "spammers \\+ adversaries"),
        ({"extreme_spammers": -1}, "extreme_spammers"),
        ({"skill": (0.9, 0.6)}, "skill"),
        ({"skill": (0.5, 1.5)}, "skill"),
        ({"skill": "high"}, "skill"),
        ({"model": "mace"}, "unknown model 'mace'.*ds, onecoin, hammer-spammer, glad"),
        ({"assignment": "star"}, "unknown assignment 'star'.*random, regular, dense"),
        ({"scenario": "nope"}, "unknown scenario 'nope'.*maxmig-independent"),
        ({"prior": [0.5, 0.5, 0.0]}, "prior"),
        ({"prior": [-1, 2]}, "prior"),
        ({"tasks_per_worker": 4}, "tasks_per_worker"),
        ({"assignment": "regular", "tasks_per_worker": 4, "n_workers": 7}, "n_workers=7"),
        ({"adversaries": 0.2, "skill": (0.1, 0.3)}, "skill"),
        ({"scenario": "maxmig-independent", "n_workers": 7}, "n_workers=5"),
        ({"scenario": "deepbp", "n_classes": 3}, "n_classes=2"),
        ({"scenario": "maxmig-correlated", "per_task": 2}, "per_task"),
        ({"scenario": "multispa-demo", "n_workers": 3}, "n_workers"),
        ({"seed": -1}, "seed"),
    ],
)
def test_bad_arguments_raise_usage_error(kwargs: dict, match: str) -> None:
    args = {"n_tasks": 20, **kwargs}
    with pytest.raises(UsageError, match=match):
        simulate(**args)


@pytest.mark.parametrize(("n", "m", "ell"), [(30, 5, 5), (30, 5, 4), (9, 4, 3)])
def test_regular_assignment_nearly_complete_graphs(n: int, m: int, ell: int) -> None:
    c = simulate(n, m, 2, ell, assignment="regular", seed=1)
    _check_invariants(c)
    np.testing.assert_array_equal(np.bincount(c.task), ell)
    deg = np.bincount(c.worker, minlength=m)
    assert deg.max() - deg.min() <= 1 and deg.max() <= math.ceil(n * ell / m)


def test_regular_assignment_circulant_fallback(monkeypatch: pytest.MonkeyPatch) -> None:
    import crowdagg.simulate.assignment as sim

    monkeypatch.setattr(sim, "_MAX_REWIRE_ROUNDS", 0)
    c = simulate(50, 12, 2, 4, assignment="regular", seed=3)
    _check_invariants(c)
    np.testing.assert_array_equal(np.bincount(c.task), 4)
    deg = np.bincount(c.worker, minlength=12)
    assert deg.max() - deg.min() <= 1


def test_zero_spammers_can_be_asked_for():
    from crowdagg.simulate import simulate

    hs = simulate(200, 20, 2, 5, model="hammer-spammer", seed=1)
    assert (hs.worker_kind == "spammer").sum() == 10  # the model's default, 0.5
    none = simulate(200, 20, 2, 5, model="hammer-spammer", spammers=0, seed=1)
    assert (none.worker_kind == "spammer").sum() == 0
    tut = simulate(n_tasks=500, scenario="tutorial-spammers", seed=1)
    assert (tut.worker_kind == "spammer").sum() == 6  # 0.3 of 20
    tut0 = simulate(n_tasks=500, scenario="tutorial-spammers", spammers=0, seed=1)
    assert (tut0.worker_kind == "spammer").sum() == 0


def test_copiers_in_a_sparse_assignment_answer_only_real_classes():
    import numpy as np

    from crowdagg.simulate.crowd import Plan, realise

    rng = np.random.default_rng(0)
    conf = np.array([[[0.8, 0.2], [0.3, 0.7]]] * 6)
    plan = Plan(300, conf, ["senior"] * 4 + ["copier"] * 2, np.array([0.5, 0.5]), "random", 3,
                copy_of=np.array([-1, -1, -1, -1, 0, 1]))
    crowd = realise(rng, plan, 0)
    assert crowd.label.min() >= 0 and crowd.label.max() <= 1
    # where the copied worker answered the same task, the copier repeats it
    src = {(t, int(y)) for t, w, y in zip(crowd.task, crowd.worker, crowd.label) if w == 0}
    both = [(t, int(y)) for t, w, y in zip(crowd.task, crowd.worker, crowd.label)
            if w == 4 and any(s[0] == t for s in src)]
    assert both and all(b in src for b in both)


# ------------------------------------------------------- package registries
def test_scenario_registry_lists_each_scenario_once_with_its_description() -> None:
    from crowdagg.simulate import scenarios

    assert list(scenarios.REGISTRY) == list(SCENARIOS) == [
        "maxmig-independent", "maxmig-naive-majority", "maxmig-correlated",
        "deepbp", "tutorial-spammers", "multispa-demo", "em-trap", "dense-heavy",
        "tanno-flippers", "tanno-hammer-spammer", "geocrowdnet-sparse",
    ]  # fmt: skip
    for name, spec in scenarios.REGISTRY.items():
        assert spec.name == name
        assert spec.description.strip() and spec.description == SCENARIOS[name]
    with pytest.raises(ValueError, match="registered twice"):
        scenarios.scenario("deepbp", "again")(lambda name, rng, given: None)  # type: ignore[arg-type,return-value]
    assert scenarios.REGISTRY["deepbp"].description == SCENARIOS["deepbp"]


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_every_registered_scenario_runs_at_a_tiny_size(name: str) -> None:
    c = simulate(24, scenario=name, extreme_spammers=1, seed=0)
    _check_invariants(c)
    assert c.n_tasks == 24 and c.worker_kind[-1] == "extreme_spammer"


def test_model_registry_covers_every_model() -> None:
    from crowdagg.simulate import workers

    assert list(workers.REGISTRY) == list(MODELS)
    rng = np.random.default_rng(0)
    for name, spec in workers.REGISTRY.items():
        assert spec.name == name and spec.description == MODELS[name]
        mats = spec.draw(rng, 7, 3, (0.5, 0.9))
        assert mats.shape == (7, 3, 3)
        np.testing.assert_allclose(mats.sum(axis=2), 1.0)
        c = simulate(30, 6, 3, 2, model=name, spammers=0, seed=1)
        assert set(c.worker_kind) == {spec.kind}


def test_assignment_registry_covers_every_assignment() -> None:
    from crowdagg.simulate import assignment

    public = [name for name, a in assignment.REGISTRY.items() if not a.scenario_only]
    assert public == list(ASSIGNMENTS)
    rng = np.random.default_rng(0)
    for name, spec in assignment.REGISTRY.items():
        task, worker = spec.edges(rng, 40, 10, 3, 0.3)
        assert task.dtype == worker.dtype == np.int32
        assert np.all(np.diff(task) >= 0) and np.all(np.bincount(task, minlength=40) >= 1), name
        assert np.unique(task.astype(np.int64) * 10 + worker).size == task.size, name


@pytest.mark.parametrize(("n", "m", "ell", "r"), [(12, 9, 3, 4), (40, 10, 5, 20), (7, 7, 3, 3), (30, 5, 4, 24)])
@pytest.mark.parametrize("rounds", [None, 0])  # None: configuration model; 0: the circulant fallback
def test_regular_graph_is_exactly_l_r_regular(
    n: int, m: int, ell: int, r: int, rounds: int | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    from crowdagg.simulate import assignment

    assert ell * n == r * m
    if rounds is not None:
        monkeypatch.setattr(assignment, "_MAX_REWIRE_ROUNDS", rounds)
    rows = assignment.regular_assignment(np.random.default_rng(n), n, m, ell)
    assert rows.shape == (n, ell)
    assert np.all(np.diff(rows, axis=1) > 0), "each task: l distinct workers, no repeated (task, worker) pair"
    np.testing.assert_array_equal(np.bincount(rows.reshape(-1), minlength=m), r)


@pytest.mark.parametrize("field,value,message", [
    ("label", -1, "label code -1 at position 0 is out of range"),
    ("worker", 10**6, "worker code 1000000 at position 0 is out of range"),
    ("truth", 99, "truth code 99 at position 0 is out of range"),
])
def test_write_refuses_codes_it_cannot_name(tmp_path: Path, field: str, value: int, message: str) -> None:
    from crowdagg.errors import DataError

    crowd = simulate(n_tasks=20, n_workers=5, n_classes=3, seed=1)
    arr = getattr(crowd, field).astype(np.int64)
    arr[0] = value  # numpy would wrap -1 to the last class: a wrong file, not an error
    setattr(crowd, field, arr)
    with pytest.raises(DataError, match=message):
        crowd.write(tmp_path / "out")
    assert not (tmp_path / "out").exists()
