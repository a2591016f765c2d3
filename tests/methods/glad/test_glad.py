"""GLAD: a slow reference of its EM, recovery of its own model, the real datasets, gold, saved models, threads."""

from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pytest
from scipy.optimize import minimize
from scipy.stats import spearmanr

from crowdagg import load_annotations
from crowdagg.core import threads
from crowdagg.data.annotations import AnnotationSet
from crowdagg.engine import LocalEngine, grid
from crowdagg.errors import ConvergenceWarning, CrowdaggWarning, DataError, UsageError
from crowdagg.io.read import read_task_labels
from crowdagg.methods.api import aggregate
from crowdagg.methods.glad.glad import Glad, GladForm
from crowdagg.methods.model_file import from_json, to_json
from tests.tiers import quick_case


def quiet(*args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CrowdaggWarning)
        return aggregate(*args, **kwargs)


def glad_crowd(seed=0, n_tasks=1500, n_workers=40, k=3, per_task=5, ability=(1.0, 1.0), log_beta=(1.0, 0.6),
               sorted_by_difficulty=False):
    """Answers drawn from GLAD's own model: α ~ N(ability), log β ~ N(log_beta), distinct workers per task.

    ``sorted_by_difficulty``: the first half of the tasks hard (log β ~ N(0, .3)), the rest easy (N(2, .3)),
    and the first half of the workers draw 85% of their tasks from the hard half: a worker's share of right
    answers then says more about its tasks than about itself.
    Returns (data, truth (n_tasks,), alpha (n_workers,), log_beta (n_tasks,)).
    """
    rng = np.random.default_rng(seed)
    alpha = rng.normal(*ability, n_workers)
    truth = rng.integers(0, k, n_tasks)
    task = np.repeat(np.arange(n_tasks), per_task)
    if sorted_by_difficulty:
        hard = np.arange(n_tasks) < n_tasks // 2
        lb = np.where(hard, rng.normal(0.0, 0.3, n_tasks), rng.normal(2.0, 0.3, n_tasks))
        group = np.arange(n_workers) < n_workers // 2
        weights = {h: np.where(group == h, 0.85, 0.15) for h in (True, False)}
        worker = np.concatenate([rng.choice(n_workers, per_task, replace=False, p=weights[h] / weights[h].sum())
                                 for h in hard])
    else:
        lb = rng.normal(*log_beta, n_tasks)
        worker = np.concatenate([rng.choice(n_workers, per_task, replace=False) for _ in range(n_tasks)])
    right = rng.random(task.size) < 1.0 / (1.0 + np.exp(-alpha[worker] * np.exp(lb[task])))
    label = np.where(right, truth[task], (truth[task] + rng.integers(1, k, task.size)) % k)
    data = AnnotationSet.from_codes(task, worker, label, n_tasks=n_tasks, n_workers=n_workers, n_classes=k)
    return data, truth, alpha, lb


# ----------------------------------------------------------------------------- a slow reference
def reference_glad(data, n_iter=500, alpha_mean=1.0, beta_mean=1.0):
    """GLAD's EM written plainly: dense (answers × classes) log-likelihoods, the M-step as unscaled L-BFGS-B on
    Q + log-priors to tight tolerances, from the soft vote, α = 1, log β = 1, a uniform prior.  Returns
    (posteriors, alpha, log_beta)."""
    k, w, n = data.n_classes, data.n_workers, data.n_tasks
    task = np.repeat(np.arange(n), np.diff(data.task_ptr))
    worker, label = data.worker.astype(int), data.label.astype(int)
    onehot = np.eye(k)[label]  # (L, K): 1 where the class is the answer

    def loglik(alpha, lb):  # (L, K): log P(answer | class)
        z = alpha[worker] * np.exp(lb[task])
        right, wrong = -np.logaddexp(0, -z), -np.logaddexp(0, z) - (math.log(k - 1) if k > 1 else 0.0)
        return onehot * right[:, None] + (1 - onehot) * wrong[:, None]

    post = np.zeros((n, k))
    np.add.at(post, (task, label), 1.0)
    post /= post.sum(axis=1, keepdims=True)
    alpha, lb = np.full(w, alpha_mean), np.full(n, beta_mean)
    for _ in range(n_iter):
        weights = post[task]  # (L, K)

        def negative(x, weights=weights):
            a, b = x[:w], x[w:]
            z = a[worker] * np.exp(b[task])
            q = (weights * onehot).sum(axis=1)
            s = 1.0 / (1.0 + np.exp(-z))
            value = (weights * loglik(a, b)).sum() - 0.5 * ((a - alpha_mean) ** 2).sum() - 0.5 * ((b - beta_mean) ** 2).sum()
            d = q - s
            ga = np.bincount(worker, weights=d * np.exp(b[task]), minlength=w) - (a - alpha_mean)
            gb = np.bincount(task, weights=d * z, minlength=n) - (b - beta_mean)
            return -value, -np.concatenate([ga, gb])

        res = minimize(negative, np.concatenate([alpha, lb]), jac=True, method="L-BFGS-B",
                       options={"ftol": 1e-15, "gtol": 1e-10, "maxiter": 10_000})
        alpha, lb = res.x[:w], res.x[w:]
        scores = np.zeros((n, k)) - math.log(k)
        np.add.at(scores, task, loglik(alpha, lb))
        new = np.exp(scores - scores.max(axis=1, keepdims=True))
        new /= new.sum(axis=1, keepdims=True)
        if np.abs(new - post).max() < 1e-12:
            post = new
            break
        post = new
    return post, alpha, lb


@pytest.mark.slow  # the pure-Python reference EM to 500 iterations: 80 s on a loaded machine
def test_agrees_with_the_slow_reference_on_bluebird(bluebird):
    post, alpha, log_beta = reference_glad(bluebird)
    fit = aggregate(bluebird, "glad", tol=1e-13, max_iter=500)
    # (Our M-step stops at L-BFGS-B's default relative reduction, 2.2e-9: the fixed points agree to ~3e-5.)
    np.testing.assert_allclose(fit.posteriors, post, atol=2e-5)
    np.testing.assert_allclose(fit.worker_params["alpha"], alpha, atol=1e-4)
    np.testing.assert_allclose(np.log(fit.task_params["beta"]), log_beta, atol=1e-4)


@pytest.fixture(scope="module")
def bluebird():
    return load_annotations("example:bluebird")


# ----------------------------------------------------------------------------- EM itself
def test_em_never_lowers_the_log_posterior_and_reports_it():
    data, *_ = glad_crowd(seed=1, n_tasks=400)
    fit = aggregate(data, "glad", tol=0, max_iter=15)
    trace = fit.objective
    assert fit.objective_name == "log-posterior" and len(trace) == 15 and fit.n_iter == 15
    assert np.all(np.diff(trace) >= -1e-6 * np.abs(trace[1:])), np.diff(trace)
    # The trace's last value is the log-posterior of the result's parameters, recomputed here from scratch.
    k, task = data.n_classes, np.repeat(np.arange(data.n_tasks), np.diff(data.task_ptr))
    z = fit.worker_params["alpha"][data.worker] * fit.task_params["beta"][task]
    right, wrong = -np.logaddexp(0, -z), -np.logaddexp(0, z) - math.log(k - 1)
    scores = np.full((data.n_tasks, k), -math.log(k))
    np.add.at(scores, task, wrong[:, None])
    np.add.at(scores, (task, data.label), right - wrong)
    m = scores.max(axis=1)
    ll = float((m + np.log(np.exp(scores - m[:, None]).sum(axis=1))).sum())
    a, lb = fit.worker_params["alpha"], np.log(fit.task_params["beta"])
    log_prior = -0.5 * ((a - 1) ** 2).sum() - 0.5 * ((lb - 1) ** 2).sum() - 0.5 * math.log(2 * math.pi) * (a.size + lb.size)
    assert trace[-1] == pytest.approx(ll + log_prior, rel=1e-12)


def test_recovers_its_own_model():
    """Abilities and log β of a crowd drawn from GLAD's own model (``simulate(model="glad")``: log β ~ N(0, .5),
    so the fit's prior on log β is centred there too -- GLAD identifies αβ, the priors fix the scale) come back
    within a stated error: 900 answers a worker pin α down (mean error .17 here), 12 answers a task only
    roughly β (.38; the N(0, 1) prior weighs as much as a few answers)."""
    from crowdagg.simulate import simulate

    crowd = simulate(3000, 40, 3, 12, model="glad", difficulty_spread=0.5, seed=1)
    fit = aggregate(crowd.to_annotations(), "glad", log_beta_mean=0.0)
    assert fit.converged and (fit.labels == crowd.truth).mean() > 0.98
    alpha, log_beta = crowd.ability, np.log(crowd.task_beta)
    est_alpha, est_lb = fit.worker_params["alpha"], np.log(fit.task_params["beta"])
    assert np.abs(est_alpha - alpha).mean() < 0.25, np.abs(est_alpha - alpha).mean()
    assert np.corrcoef(est_alpha, alpha)[0, 1] > 0.97
    assert np.abs(est_lb - log_beta).mean() < 0.5, np.abs(est_lb - log_beta).mean()
    assert np.corrcoef(est_lb, log_beta)[0, 1] > 0.5
    # With the default prior (log β around 1) the scale shifts: β up by about e, α down (the same products αβ).
    shifted = aggregate(crowd.to_annotations(), "glad")
    assert shifted.worker_params["alpha"].mean() < 0.7 * est_alpha.mean()
    np.testing.assert_array_equal(shifted.labels, fit.labels)


@pytest.mark.parametrize("seed", [2, 3])
def test_ranks_workers_better_than_ds_and_onecoin_when_their_tasks_differ_in_difficulty(seed):
    """Half the workers see mostly hard tasks: their share of right answers (what ds's and onecoin's accuracies
    measure) understates them; GLAD's abilities, net of the tasks' difficulty, rank the workers better (Spearman
    with the true α: .91--.92 against .86--.88 on these seeds)."""
    data, _, alpha, _ = glad_crowd(seed=seed, n_tasks=3000, n_workers=40, per_task=6, sorted_by_difficulty=True)
    glad_rank = spearmanr(aggregate(data, "glad").worker_params["alpha"], alpha).statistic
    for method, skill in (("ds", lambda r: r.worker_accuracy), ("onecoin", lambda r: r.worker_params["accuracy"])):
        other = spearmanr(skill(quiet(data, method)), alpha).statistic
        assert glad_rank > other + 0.03, (method, glad_rank, other)
    assert glad_rank > 0.9


# ----------------------------------------------------------------------------- the real datasets
#: crowd-kit 1.4.2 GLAD(n_iter=20), duplicates dropped keeping the last (benchmarks/crowdkit_glad_reference.py).
CROWDKIT_GLAD = {"bluebird": 0.7222, "rte": 0.9250, "dog": 0.8340, "web": 0.8213, "sentiment": 0.9168,
                 "temp": 0.9351}


@pytest.mark.parametrize("name", quick_case(CROWDKIT_GLAD, "bluebird", "glad"))
def test_accuracy_on_real_data_matches_or_beats_crowdkit(datasets_dir, name):
    data = load_annotations(datasets_dir / name / "labels.csv", duplicates="last")
    truth = read_task_labels(datasets_dir / name / "truth.csv")
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        fit = aggregate(data, "glad")
    pred = dict(zip(data.task_names.tolist(), fit.label_names().tolist()))
    acc = float(np.mean([pred[t] == y for t, y in truth.items() if t in pred]))
    assert acc >= CROWDKIT_GLAD[name] - 0.005, (name, acc)
    assert fit.converged


def test_an_estimated_prior_is_the_class_totals_and_collapses_on_bluebird(bluebird):
    """prior=estimate: d ∝ Σ q; on bluebird it runs to the majority class (the docs' .574), with a warning."""
    with pytest.warns(CrowdaggWarning, match="glad: the fit may have collapsed"):
        fit = aggregate(bluebird, "glad", prior="estimate")
    uniform = aggregate(bluebird, "glad")
    np.testing.assert_allclose(uniform.prior, 0.5)
    assert abs(fit.prior[0] - fit.prior[1]) > 0.5
    # The saved model's class counts are the totals the prior was estimated from.
    model = from_json(to_json(fit))
    np.testing.assert_allclose(model["class_counts"] / model["class_counts"].sum(), fit.prior, atol=1e-6)


# ----------------------------------------------------------------------------- services
def test_gold_clamps_the_tasks_and_shapes_the_abilities():
    data, truth, alpha, _ = glad_crowd(seed=3, n_tasks=300, n_workers=12)
    gold = {str(t): str(truth[t]) for t in range(0, 300, 3)}
    fit = aggregate(data, "glad", gold=gold)
    rows = np.arange(0, 300, 3)
    np.testing.assert_array_equal(fit.labels[rows], truth[rows])
    np.testing.assert_array_equal(fit.posteriors[rows, truth[rows]], 1.0)
    free = aggregate(data, "glad")
    assert not np.allclose(free.worker_params["alpha"], fit.worker_params["alpha"])
    assert np.abs(fit.worker_params["alpha"] - alpha).mean() <= np.abs(free.worker_params["alpha"] - alpha).mean()


def test_restarts_keep_the_best_log_posterior():
    data, *_ = glad_crowd(seed=4, n_tasks=200, n_workers=10)
    one = aggregate(data, "glad", n_init=1)
    many = aggregate(data, "glad", n_init=4, seed=7)
    assert many.objective[-1] >= one.objective[-1] - 1e-9 * abs(one.objective[-1])


def test_starts_from_another_methods_posteriors(bluebird):
    from_ds = quiet(bluebird, "glad", init="ds")
    from_vote = aggregate(bluebird, "glad")
    assert from_ds.n_iter >= 1 and not np.allclose(from_ds.posteriors, from_vote.posteriors)
    with pytest.raises(UsageError, match="cannot start from its own output"):
        aggregate(bluebird, "glad", init="glad")


def test_results_and_outputs_name_alpha_and_beta(bluebird):
    fit = aggregate(bluebird, "glad")
    assert fit.worker_columns() == ("worker", "alpha", "n_answers")
    assert fit.task_columns() == ("task", "beta", "n_answers")
    assert (fit.task_params["beta"] > 0).all() and fit.worker_params["alpha"].min() < 0.5
    with pytest.raises(AttributeError, match="no worker confusion matrices"):
        fit.confusion  # noqa: B018 - the access is the test


def test_a_task_without_answers_keeps_its_row_with_the_prior_and_the_prior_beta():
    data = AnnotationSet.from_codes([0, 0, 1, 1, 2, 2, 2], [0, 1, 0, 1, 0, 1, 2], [0, 0, 1, 1, 0, 1, 1],
                                    n_tasks=4, n_classes=2)
    with pytest.warns(CrowdaggWarning, match="1 task"):
        fit = aggregate(data, "glad")
    np.testing.assert_allclose(fit.posteriors[3], [0.5, 0.5])
    assert fit.task_params["beta"][3] == pytest.approx(math.e, rel=1e-6)


def test_a_worker_without_answers_keeps_the_prior_ability():
    """GLAD's chance is α = 0; a worker with no answers has no evidence and keeps the prior's mean (1, or
    ``alpha_mean``), with the prior's precision 1 as its saved curvature."""
    data = AnnotationSet.from_codes([0, 0, 1, 1], [0, 2, 0, 2], [0, 0, 1, 2], n_workers=3, n_classes=3)
    fit = aggregate(data, "glad")
    assert fit.worker_params["alpha"][1] == pytest.approx(1.0, abs=1e-6)
    assert aggregate(data, "glad", alpha_mean=-0.5).worker_params["alpha"][1] == pytest.approx(-0.5, abs=1e-6)
    assert from_json(to_json(fit))["curvature"][1] == 1.0


def test_one_class_is_certain():
    data = AnnotationSet.from_codes([0, 0, 1], [0, 1, 0], [0, 0, 0], n_classes=1)
    fit = aggregate(data, "glad")
    np.testing.assert_array_equal(fit.posteriors, 1.0)


@pytest.mark.parametrize("params, message", [
    ({"prior": "learned"}, "prior"), ({"alpha_mean": 1e6}, "alpha_mean"), ({"m_step_max_iter": 0}, "m_step_max_iter"),
    ({"smoothing": 1.0}, "does not take smoothing"),
])
def test_bad_settings_are_refused_before_any_fit(params, message):
    with pytest.raises(UsageError, match=message):
        Glad(**params).check_params()


def test_an_m_step_cut_short_is_said():
    data, *_ = glad_crowd(seed=5, n_tasks=200, n_workers=10)
    with pytest.warns(ConvergenceWarning, match=r"glad: the optimiser of the M-step .* did not converge"):
        aggregate(data, "glad", m_step_max_iter=1, max_iter=2)


def test_m_steps_cut_short_are_said_once_per_fit_not_once_per_iteration():
    """(It warned at every EM iteration: 30 lines on stderr for -p m_step_max_iter=1 --max-iter 30.)"""
    data, *_ = glad_crowd(seed=5, n_tasks=200, n_workers=10)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fit = aggregate(data, "glad", m_step_max_iter=1, max_iter=30, tol=0, n_init=2)
    said = [str(w.message) for w in caught if issubclass(w.category, ConvergenceWarning)]
    assert len(said) == 1, said
    # Each of the two starts' 31 M-steps (the start's and 30 iterations') stopped after its one iteration.
    assert said[0].startswith("glad: the optimiser of the M-step (abilities and difficulties) did not converge in "
                              "62 of its 62 runs (the first at iteration 0 after 1 iterations: ")
    assert said[0].endswith("); the fit went on from their last points; raise m_step_max_iter")
    assert np.isfinite(fit.posteriors).all()


# ----------------------------------------------------------------------------- saved models
def test_a_saved_model_round_trips_alpha_and_curvature(bluebird):
    fit = aggregate(bluebird, "glad")
    doc = json.loads(to_json(fit))
    assert doc["method"] == "glad" and list(doc)[8:10] == ["alpha", "curvature"]
    model = from_json(to_json(fit), "g.json")
    np.testing.assert_array_equal(model["alpha"], fit.worker_params["alpha"])
    # The curvature is the precision of each ability: the prior's 1 plus the answers' Fisher information.
    from crowdagg.engine import LocalEngine
    from crowdagg.kernels.glad import curvatures

    h_alpha = curvatures(LocalEngine(bluebird), fit.worker_params["alpha"], np.log(fit.task_params["beta"]))[0]
    np.testing.assert_allclose(model["curvature"], 1.0 + h_alpha, rtol=1e-12)
    np.testing.assert_allclose(model["prior"], 0.5)
    doc["curvature"][3] = 0.0
    with pytest.raises(DataError, match=r"^g\.json: curvature\[3\] is 0\.0, not a precision"):
        from_json(json.dumps(doc), "g.json")
    doc = json.loads(to_json(fit))
    doc["alpha"][0] = "x"
    with pytest.raises(DataError, match=r'alpha\[0\] is "x" \(a string\), not a number'):
        from_json(json.dumps(doc), "g.json")
    assert isinstance(Glad.saved_form, GladForm)


def test_a_warm_start_accumulates_evidence_as_one_fit_on_both_batches():
    """Batch 1, saved, then batch 2 warm: the abilities are closer to one fit on both batches than batch 2's
    own; the saved model of the warm fit carries both batches' precision."""
    data, _, alpha, _ = glad_crowd(seed=6, n_tasks=1200, n_workers=30)
    names, workers, classes = np.asarray(data.task_names), np.asarray(data.worker_names), np.asarray(data.classes)
    codes = np.repeat(np.arange(data.n_tasks), np.diff(data.task_ptr))
    halves = []
    for part in (codes < 600, codes >= 600):
        halves.append(AnnotationSet.from_names(names[codes[part]], workers[data.worker[part]],
                                               classes[data.label[part]], classes=list(classes)))
    one, two = halves
    joint = aggregate(data, "glad")
    first = aggregate(one, "glad")
    warm = aggregate(two, "glad", init_workers=to_json(first))
    cold = aggregate(two, "glad")
    order = [list(data.worker_names).index(w) for w in two.worker_names]
    target = joint.worker_params["alpha"][order]
    # (measured: .053 against .103 -- half the distance)
    assert np.abs(warm.worker_params["alpha"] - target).mean() < 0.7 * np.abs(cold.worker_params["alpha"] - target).mean()
    saved = from_json(to_json(warm))
    first_model = from_json(to_json(first))
    row = [first_model["workers"].index(w) for w in two.worker_names]
    assert (saved["curvature"] > first_model["curvature"][row]).all()  # evidence added, never lost
    # Tasks already in the saved fit: the warning of every warm start.
    with pytest.warns(CrowdaggWarning, match="already in the fit"):
        aggregate(one, "glad", init_workers=to_json(first))


@pytest.mark.parametrize(("field", "value", "message"), [
    # An ability of 1e200 overflowed the kernels (the fit "broke down numerically"); a curvature of 1e100 made
    # the M-step's line search fail at once every iteration, every task's beta left at the prior's.
    ("alpha", 1e200, r"alpha\[2\] is 1e\+200, not an ability \(\|alpha\| <= 1e\+06"),
    ("alpha", -2e6, r"alpha\[2\] is -2000000\.0, not an ability"),
    ("curvature", 1e100, r"curvature\[2\] is 1e\+100, not a precision \(1e\+15 at most"),
    ("curvature", -1.0, r"curvature\[2\] is -1\.0, not a precision \(> 0"),
])
def test_a_hand_edited_model_beyond_any_fit_is_refused(bluebird, field, value, message):
    doc = json.loads(to_json(aggregate(bluebird, "glad")))
    doc[field][2] = value
    with pytest.raises(DataError, match=r"^<workers>: " + message):
        aggregate(bluebird, "glad", init_workers=json.dumps(doc))


def test_a_model_at_the_bounds_still_fits_every_task(bluebird):
    """Abilities of ±1e6 known to a precision of 1e15 (the largest accepted): they stay put, and the tasks'
    betas are still fitted to them (every worker then decides; the M-step converges)."""
    cold = aggregate(bluebird, "glad")
    doc = json.loads(to_json(cold))
    doc["alpha"] = [1e6 * (-1) ** i for i in range(len(doc["alpha"]))]
    doc["curvature"] = [1e15] * len(doc["curvature"])
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        warm = quiet(bluebird, "glad", init_workers=json.dumps(doc))
    np.testing.assert_allclose(warm.worker_params["alpha"], doc["alpha"], rtol=1e-12)
    assert np.isfinite(warm.posteriors).all() and np.isfinite(warm.task_params["beta"]).all()
    # Abilities of ±1e6 answer every task with certainty at beta ~ 1e-6: the betas left the prior's e.
    assert (warm.task_params["beta"] < 1e-3).all()


def test_a_model_of_another_method_cannot_start_glad(bluebird):
    with pytest.raises(DataError, match="a ds worker model cannot start glad"):
        aggregate(bluebird, "glad", init_workers=to_json(quiet(bluebird, "ds")))


# ----------------------------------------------------------------------------- the thread policy
def test_same_bytes_with_one_and_two_threads(monkeypatch):
    monkeypatch.setattr(grid, "MIN_BLOCK_ANSWERS", 500)
    monkeypatch.setattr(grid, "ACCUMULATOR_FACTOR", 1)  # blocks of max(min, W·K²)
    data, *_ = glad_crowd(seed=8, n_tasks=1000, n_workers=20)
    assert LocalEngine(data).n_blocks > 4
    fits = []
    for n in (1, 2):
        with threads.use_threads(n):
            fits.append(aggregate(data, "glad"))
    a, b = fits
    np.testing.assert_array_equal(a.posteriors, b.posteriors)
    np.testing.assert_array_equal(a.worker_params["alpha"], b.worker_params["alpha"])
    np.testing.assert_array_equal(a.task_params["beta"], b.task_params["beta"])
    np.testing.assert_array_equal(a.objective, b.objective)


# ----------------------------------------------------------------------------- the command line
def test_the_cli_writes_alpha_per_worker_and_beta_per_task_and_round_trips_a_model(tmp_path):
    from typer.testing import CliRunner

    from crowdagg.cli import app

    runner = CliRunner()
    workers, tasks, model = tmp_path / "w.csv", tmp_path / "t.csv", tmp_path / "m.json"
    res = runner.invoke(app, ["aggregate", "example:bluebird", "-m", "glad", "--workers", str(workers),
                              "--task-params", str(tasks), "--save-workers", str(model)])
    assert res.exit_code == 0, res.stderr
    assert res.stdout.startswith("task,label,confidence\n") and len(res.stdout.splitlines()) == 109
    assert workers.read_text().splitlines()[0] == "worker,alpha,n_answers"
    assert len(workers.read_text().splitlines()) == 40
    rows = tasks.read_text().splitlines()
    assert rows[0] == "task,beta,n_answers" and len(rows) == 109 and rows[1].endswith(",39")
    again = runner.invoke(app, ["aggregate", "example:bluebird", "-m", "glad", "--init-workers", str(model)])
    assert again.exit_code == 0 and "already in the fit" in again.stderr
    shown = runner.invoke(app, ["methods", "glad"])
    text = " ".join(shown.stdout.split())
    assert "1/beta is the task's difficulty" in text and "--workers: alpha (ability" in text
    bad = runner.invoke(app, ["aggregate", "example:bluebird", "-m", "glad", "-p", "prior=learned"])
    assert bad.exit_code == 2 and bad.stderr.startswith("Error: -p prior must be")


def test_the_cli_gives_the_same_bytes_with_one_and_two_threads(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from crowdagg.cli import app

    monkeypatch.setattr(grid, "MIN_BLOCK_ANSWERS", 400)  # bluebird's 4,212 answers in 10 blocks
    monkeypatch.setattr(grid, "ACCUMULATOR_FACTOR", 1)  # blocks of max(min, W·K²)
    monkeypatch.delenv("CROWDAGG_THREADS", raising=False)
    outputs = []
    for n in ("1", "2"):
        workers, tasks = tmp_path / f"w{n}.csv", tmp_path / f"t{n}.csv"
        res = CliRunner().invoke(app, ["aggregate", "example:bluebird", "-m", "glad", "--proba", "--threads", n,
                                       "--workers", str(workers), "--task-params", str(tasks)])
        assert res.exit_code == 0, res.stderr
        outputs.append((res.stdout, workers.read_bytes(), tasks.read_bytes()))
    assert outputs[0] == outputs[1]


def test_a_warm_start_adds_the_saved_class_counts_as_ds_does():
    """With prior=estimate the class totals of batch 1 join batch 2's (the prior is both batches'), and with the
    uniform prior the saved totals cover both batches too."""
    data, *_ = glad_crowd(seed=9, n_tasks=400, n_workers=12)
    codes = np.repeat(np.arange(data.n_tasks), np.diff(data.task_ptr))
    names, workers, classes = np.asarray(data.task_names), np.asarray(data.worker_names), np.asarray(data.classes)
    one, two = (AnnotationSet.from_names(names[codes[p]], workers[data.worker[p]], classes[data.label[p]],
                                         classes=list(classes)) for p in (codes < 200, codes >= 200))
    for prior in ("estimate", "uniform"):
        first = from_json(to_json(aggregate(one, "glad", prior=prior)))
        warm = aggregate(two, "glad", prior=prior, init_workers=first)
        saved = from_json(to_json(warm))
        assert saved["class_counts"].sum() == pytest.approx(400.0)  # both batches' tasks
        if prior == "estimate":
            assert (saved["class_counts"] > first["class_counts"]).all()
            np.testing.assert_allclose(warm.prior, saved["class_counts"] / 400.0, atol=1e-6)
