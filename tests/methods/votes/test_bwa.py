"""BWA: a slow dense twin of its updates, hand-worked pieces, recovery of its own model, edge cases, real data."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy.stats import spearmanr

from crowdagg.data.annotations import AnnotationSet
from crowdagg.engine import LocalEngine
from crowdagg.errors import ConvergenceWarning, CrowdaggWarning, DataError, UsageError
from crowdagg.methods.api import aggregate
from crowdagg.methods.votes.bwa import prior_rate, worker_precision
from tests.realdata import fit_real
from tests.tiers import quick_case


def quiet(*args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CrowdaggWarning)
        return aggregate(*args, **kwargs)


def slow_bwa(task, worker, label, n_tasks, n_workers, k, a_v=15.0, lam=1.0, correction=True, max_iter=500,
             rtol=1e-3):
    """The model's updates written out densely, one class at a time (the module docstring's equations).

    Returns (scores (n_tasks, K), precision (n_workers, K), updates per class (K,)).  Tasks without answers
    are left out of the means and get them.
    """
    answered = np.bincount(task, minlength=n_tasks) > 0
    seen = np.zeros((n_tasks, n_workers), dtype=bool)
    seen[task, worker] = True
    n_m = seen.sum(axis=0).astype(float)
    w_n = seen.sum(axis=1).astype(float)
    c = 4 * (1 - 1 / k) if correction else 1.0
    scores = np.zeros((n_tasks, k))
    precision = np.zeros((n_workers, k))
    updates = np.zeros(k, dtype=int)
    for cls in range(k):
        y = np.zeros((n_tasks, n_workers))
        y[task, worker] = label == cls
        z = np.where(answered, y.sum(axis=1) / np.maximum(w_n, 1), 0.0)
        b_v = max(a_v * c * (w_n * z * (1 - z)).sum() / len(task), 1e-10)
        for it in range(max_iter):
            last = z.copy()
            mu = z[answered].mean()
            v = (a_v + n_m) / (b_v + (seen * (z[:, None] - y) ** 2).sum(axis=0))
            z = (lam * mu + (seen * y) @ v) / (lam + seen @ v)
            updates[cls] = it + 1
            if np.allclose(last[answered], z[answered], rtol=rtol):
                break
        scores[:, cls], precision[:, cls] = z, v
    return scores, precision, updates


def random_crowd(rng, n_tasks=60, n_workers=9, k=3, skill=0.7):
    """Distinct workers per task, 1 to 6 answers a task; worker w right with probability skill - w / 40."""
    rows = [(t, w) for t in range(n_tasks) for w in rng.choice(n_workers, rng.integers(1, 7), replace=False)]
    task, worker = np.array(rows).T
    truth = rng.integers(0, k, n_tasks)
    right = rng.random(task.size) < skill - worker / 40
    label = np.where(right, truth[task], rng.integers(0, k, task.size))
    return task, worker, label, truth


@pytest.mark.parametrize("k", [2, 3, 5])
def test_equals_the_dense_twin_to_the_last_digits(rng, k):
    task, worker, label, _ = random_crowd(rng, k=k)
    data = AnnotationSet.from_codes(task, worker, label, n_tasks=60, n_workers=9, n_classes=k)
    res = quiet(data, "bwa")
    scores, precision, updates = slow_bwa(task, worker, label, 60, 9, k)
    np.testing.assert_allclose(res.posteriors, scores / scores.sum(axis=1, keepdims=True), rtol=1e-10)
    np.testing.assert_allclose(res.worker_params["class_precision"], precision, rtol=1e-10)
    np.testing.assert_allclose(res.worker_params["precision"], precision.mean(axis=1), rtol=1e-10)
    assert res.n_iter == updates.max() and res.converged
    np.testing.assert_array_equal(res.labels, scores.argmax(axis=1))


def test_the_twin_agrees_with_other_priors_and_without_the_correction(rng):
    task, worker, label, _ = random_crowd(rng)
    data = AnnotationSet.from_codes(task, worker, label, n_classes=3)
    res = quiet(data, "bwa", a_v=2.0, lam=5.0, prior_correction=False, tol=1e-6)
    scores, precision, _ = slow_bwa(task, worker, label, data.n_tasks, 9, 3, a_v=2.0, lam=5.0, correction=False,
                                    rtol=1e-6)
    np.testing.assert_allclose(res.posteriors, scores / scores.sum(axis=1, keepdims=True), rtol=1e-10)
    np.testing.assert_allclose(res.worker_params["class_precision"], precision, rtol=1e-10)


def test_each_class_stops_on_its_own_as_the_authors_loops_do(rng):
    # one class settles in fewer updates than another: it keeps the scores of its own last update
    task, worker, label, _ = random_crowd(rng, n_tasks=200, k=4, skill=0.5)
    data = AnnotationSet.from_codes(task, worker, label, n_classes=4)
    res = quiet(data, "bwa")
    scores, _, updates = slow_bwa(task, worker, label, data.n_tasks, 9, 4)
    assert len(set(updates.tolist())) > 1
    np.testing.assert_allclose(res.posteriors, scores / scores.sum(axis=1, keepdims=True), rtol=1e-10)


def test_the_same_bits_on_the_finest_grid(rng):
    task, worker, label, _ = random_crowd(rng, n_tasks=300)
    data = AnnotationSet.from_codes(task, worker, label, n_classes=3)
    whole = quiet(data, "bwa")
    fine = quiet(data, "bwa", engine=LocalEngine(data, per_block=8))
    np.testing.assert_allclose(fine.posteriors, whole.posteriors, rtol=1e-13)


def test_prior_rate_and_precision_by_hand():
    # two tasks answered (a, a, b) and (a, b): class a's shares 2/3 and 1/2, L = 5, K = 2 (c = 2)
    spread = np.array([3 * (2 / 3) * (1 / 3) + 2 * 0.5 * 0.5])
    np.testing.assert_allclose(prior_rate(15.0, spread, 5, 2, True), 15 * 2 * (2 / 3 + 0.5) / 5)
    np.testing.assert_allclose(prior_rate(15.0, spread, 5, 2, False), 15 * (2 / 3 + 0.5) / 5)
    np.testing.assert_allclose(prior_rate(15.0, np.zeros(1), 5, 2, True), 1e-10)  # unanimous: floored
    # a worker with 3 answers and squared errors 0.5: (15 + 3) / (2 + 0.5); without answers: the prior's mean 15 / 2
    v = worker_precision(15.0, np.array([2.0]), np.array([3.0, 0.0]), np.array([[0.5], [0.0]]))
    np.testing.assert_allclose(v[:, 0], [18 / 2.5, 7.5])


def test_one_update_by_hand():
    # tasks 0: w0 a, w1 a, w2 b; 1: w0 b, w1 b; max_iter 1: the first update from the vote shares
    data = AnnotationSet.from_codes([0, 0, 0, 1, 1], [0, 1, 2, 0, 1], [0, 0, 1, 1, 1], n_classes=2)
    with pytest.warns(ConvergenceWarning, match="task scores still moving"):
        res = aggregate(data, "bwa", max_iter=1)
    z = np.array([2 / 3, 0.0])  # class 0's shares
    b_v = 15 * 2 * (3 * z[0] * (1 - z[0])) / 5
    sq = np.array([(z[0] - 1) ** 2 + z[1] ** 2, (z[0] - 1) ** 2 + z[1] ** 2, z[0] ** 2])
    v = (15 + np.array([2, 2, 1])) / (b_v + sq)
    mu = z.mean()
    z_new = np.array([(mu + v[0] + v[1]) / (1 + v.sum()), mu / (1 + v[0] + v[1])])
    np.testing.assert_allclose(res.worker_params["class_precision"][:, 0], v, rtol=1e-12)
    np.testing.assert_allclose(res.posteriors[:, 0], z_new, rtol=1e-12)  # two classes: the scores sum to 1


def test_a_worker_and_a_task_without_answers(rng):
    data = AnnotationSet.from_codes([0, 0, 1, 1, 2], [0, 1, 0, 1, 0], [0, 0, 1, 0, 2], n_tasks=4, n_workers=3,
                                    n_classes=3)
    with pytest.warns(CrowdaggWarning, match="1 task\\(s\\) have no answers"):
        res = aggregate(data, "bwa")
    # worker 2 keeps the prior's mean precision a_v / b_v in every class
    np.testing.assert_allclose(res.worker_params["class_precision"][2], 15.0 / res.model_params["rate"])
    np.testing.assert_allclose(res.posteriors[3], res.prior)
    np.testing.assert_allclose(res.prior, res.model_params["mean"] / res.model_params["mean"].sum())


def test_a_unanimous_crowd_and_an_unanswered_class_stay_finite():
    # every task unanimous: each class's rate is 0 in the authors' code (a division by zero); floored here
    data = AnnotationSet.from_names(["a", "a", "b", "b", "c"], ["u", "v", "u", "v", "u"],
                                    ["x", "x", "y", "y", "x"], classes=["x", "y", "z"])
    res = quiet(data, "bwa")
    assert np.isfinite(res.worker_params["class_precision"]).all()
    assert res.label_names().tolist() == ["x", "y", "x"]
    assert np.all(res.posteriors[:, 2] < 1e-6)  # z never answered: no task's mass


def crowd_of_its_model(seed=1, n_tasks=3000, n_workers=20, per_task=7):
    """Binary answers drawn from BWA's own model: y = 1[z_n + ε > 1/2], ε ~ N(0, 1/v_m), z_n ∈ {0, 1} the truth,
    the workers' precisions v_m ~ Gamma(2, 2) + 0.3.  Returns (data, truth, v, each worker's error rate)."""
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, 2, n_tasks)
    v = rng.gamma(2.0, 2.0, n_workers) + 0.3
    task = np.repeat(np.arange(n_tasks), per_task)
    worker = np.concatenate([rng.choice(n_workers, per_task, replace=False) for _ in range(n_tasks)])
    label = (truth[task] + rng.normal(0.0, 1.0 / np.sqrt(v[worker])) > 0.5).astype(int)
    wrong = label != truth[task]
    err = np.bincount(worker, wrong, n_workers) / np.bincount(worker, minlength=n_workers)
    return AnnotationSet.from_codes(task, worker, label, n_classes=2), truth, v, err


def test_recovers_its_own_models_precisions():
    data, truth, v, err = crowd_of_its_model()
    res = quiet(data, "bwa")
    est = res.worker_params["precision"]
    # the precision is the inverse of the worker's squared error against the scores: its error rate's inverse,
    # raised a little because the scores sit near (not at) 0 and 1 -- measured 1.06 to 1.41 here
    assert spearmanr(est, v).correlation > 0.95
    assert np.all((est * err > 1.0) & (est * err < 1.5))
    # two classes are one problem seen from both sides: the same precision in each
    np.testing.assert_allclose(res.worker_params["class_precision"][:, 0], res.worker_params["class_precision"][:, 1],
                               rtol=1e-9)
    assert np.mean(res.labels == truth) >= np.mean(quiet(data, "mv").labels == truth)
    assert np.mean(res.labels == truth) > 0.975


#: The authors' accuracies (Li, Rubinstein & Cohn, WWW 2019, Table 3, BWA) and ours, duplicates dropped keeping
#: the last (`load_annotations(duplicates="last")`); every one within .001.
PUBLISHED = {"bluebird": .759, "rte": .928, "dog": .831, "web": .822, "trec": .604, "face": .618, "cf": .893,
             "cf_amt": .860, "sp_amt": .946, "music": .786, "zencrowd": .835}
MEASURED = {"bluebird": .7593, "rte": .9275, "dog": .8315, "web": .8225, "trec": .6044, "face": .6182, "cf": .8933,
            "cf_amt": .8600, "sp_amt": .9460, "music": .7857, "zencrowd": .8363}


@pytest.mark.parametrize("name", quick_case(sorted(PUBLISHED), "cf_amt", "bwa"))
def test_the_authors_accuracy_on_real_data(datasets_dir, name):
    acc, res = fit_real(datasets_dir, name, "bwa")
    assert acc == pytest.approx(MEASURED[name], abs=6e-5)
    assert abs(acc - PUBLISHED[name]) <= 0.01
    assert res.converged


@pytest.mark.parametrize(("make", "error", "match"), [
    ("BwaPass(Scores(np.full((W, K), 'a'), np.full(K, 0.2)), None, 1.0, 1e-3)", DataError, "must hold numbers"),
    ("BwaPass(Scores(np.full((W, K), np.nan), np.full(K, 0.2)), None, 1.0, 1e-3)", DataError, "finite and >= 0"),
    ("BwaPass(Scores(-np.ones((W, K)), np.full(K, 0.2)), None, 1.0, 1e-3)", DataError, "finite and >= 0"),
    ("BwaPass(Scores(np.ones((W, K)), np.full((K, 1), 0.2)), None, 1.0, 1e-3)", DataError, "1-D array"),
    ("BwaPass(Scores(np.ones((W, K)), np.full(K, 0.2)), None, 'x', 1e-3)", UsageError, "lam must be"),
    ("BwaPass(Scores(np.ones((W, K)), np.full(K, 0.2)), 'x', 1.0, 1e-3)", UsageError, "BwaPass takes Scores"),
    ("'not a pass'", UsageError, "bwa_block takes a BwaPass"),
])
def test_the_block_functions_parameters_are_checked_before_numba_reads_them(make, error, match):
    """bwa_block is public (its module's __all__): text parameters were numba's TypingError, a list or a wrong
    pass object an AttributeError, a NaN precision a row of NaN scores; a list of numbers is converted."""
    from crowdagg.engine import LocalEngine
    from crowdagg.methods.votes.bwa import BwaPass, Scores, bwa_block

    data = AnnotationSet.from_names(["t1", "t1", "t2"], ["a", "b", "a"], ["x", "y", "x"])
    part = LocalEngine(data).parts[0]
    env = {"np": np, "BwaPass": BwaPass, "Scores": Scores, "W": data.n_workers, "K": data.n_classes}
    with pytest.raises(error, match=match):
        bwa_block(part, 0, eval(make, env), True)
    listed = BwaPass(Scores([[1.0, 1.0], [1.0, 1.0]], [0.5, 0.5]), None, 1.0, 1e-3)
    (_, rows) = bwa_block(part, 0, listed, True)
    assert np.isfinite(rows).all() and rows.shape == (2, 2)
