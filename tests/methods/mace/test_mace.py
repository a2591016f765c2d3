"""MACE: recovery of its own model, the M-step by hand, crowd-kit 1.4.2 on the real datasets (and where it is wrong),
restarts, gold, row order and threads, the command line."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from scipy.special import digamma
from scipy.stats import spearmanr

from crowdagg import load_annotations
from crowdagg.core import threads
from crowdagg.data.annotations import AnnotationSet
from crowdagg.engine import LocalEngine, grid
from crowdagg.errors import CrowdaggWarning, UsageError
from crowdagg.io.read import read_task_labels
from crowdagg.methods.api import aggregate
from crowdagg.methods.mace.mace import m_step, start_weights
from tests.tiers import quick_case


def quiet(*args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CrowdaggWarning)
        return aggregate(*args, **kwargs)


def mace_crowd(seed=0, n_tasks=1500, n_workers=30, k=3, per_task=5):
    """Answers drawn from MACE's own model: competence c ~ U(.05, .95), spam distribution θ ~ Dir(1), the truth
    uniform, distinct workers per task.  Returns (data, truth (n_tasks,), competence (n_workers,), theta (n_workers,
    K))."""
    rng = np.random.default_rng(seed)
    competence = rng.uniform(0.05, 0.95, n_workers)
    theta = rng.dirichlet(np.ones(k), n_workers)
    truth = rng.integers(0, k, n_tasks)
    task = np.repeat(np.arange(n_tasks), per_task)
    worker = np.concatenate([rng.choice(n_workers, per_task, replace=False) for _ in range(n_tasks)])
    spam = rng.random(task.size) >= competence[worker]
    spam_label = (rng.random(task.size)[:, None] > np.cumsum(theta[worker], axis=1)).sum(axis=1)
    label = np.where(spam, np.minimum(spam_label, k - 1), truth[task])
    data = AnnotationSet.from_codes(task, worker, label, n_tasks=n_tasks, n_workers=n_workers, n_classes=k)
    return data, truth, competence, theta


@pytest.fixture(scope="module")
def bluebird():
    return load_annotations("example:bluebird")


# ----------------------------------------------------------------------------- its own model
@pytest.mark.quick
def test_recovers_its_own_model():
    """Spamming probabilities ranked as the true ones (Spearman > .95 on 30 workers of 250 answers), close to them,
    and the labels within a point of the posteriors under the true parameters (and well above the vote's)."""
    from crowdagg.kernels.mace import e_step

    data, truth, competence, theta = mace_crowd()
    fit = aggregate(data, "mace")
    spamming = fit.worker_params["spamming"]
    assert spearmanr(spamming, 1 - competence).statistic > 0.95
    assert np.abs(spamming - (1 - competence)).mean() < 0.06, np.abs(spamming - (1 - competence)).mean()
    np.testing.assert_allclose(fit.worker_params["competence"] + spamming, 1.0)
    acc, vote = (fit.labels == truth).mean(), (aggregate(data, "mv").labels == truth).mean()
    oracle = (e_step(LocalEngine(data), 1 - competence, competence, theta).post.argmax(axis=1) == truth).mean()
    assert acc >= oracle - 0.01 and acc > vote + 0.03, (acc, oracle, vote)
    np.testing.assert_allclose(fit.worker_params["spam_distribution"].sum(axis=1), 1.0)
    np.testing.assert_allclose(fit.prior, 1 / 3)


def test_the_m_step_is_expected_logs_of_the_beta_and_dirichlet_posteriors():
    """By hand: ψ(count + prior) − ψ(row total); em: the smoothed counts normalised (crowd-kit's two M-steps)."""
    spam = np.array([[2.0, 1.0, 0.5], [0.0, 0.0, 0.0]])
    know = np.array([6.5, 0.0])
    log_s, log_c, log_theta = m_step(spam, know, (0.5, 0.5, 10.0), variational=True)
    assert log_s[0] == pytest.approx(digamma(3.5 + 0.5) - digamma(10.0 + 1.0))
    assert log_c[0] == pytest.approx(digamma(6.5 + 0.5) - digamma(10.0 + 1.0))
    assert log_theta[0, 2] == pytest.approx(digamma(10.5) - digamma(33.5))
    assert log_s[1] == log_c[1] == pytest.approx(digamma(0.5) - digamma(1.0))  # no answers: the prior's
    sm = 0.01 / 3
    log_s, log_c, log_theta = m_step(spam, know, (sm, sm, sm), variational=False)
    assert np.exp(log_s[0]) == pytest.approx((3.5 + sm) / (10.0 + 2 * sm))
    assert np.exp(log_theta[0, 1]) == pytest.approx((1.0 + sm) / (3.5 + 3 * sm))
    np.testing.assert_allclose(np.exp(log_theta[1]), 1 / 3)


def test_starts_are_drawn_per_worker_name_within_crowdkits_range():
    pair, theta = start_weights(np.array(["a", "b", "c"], dtype=object), 4, 7, 0.5)
    again, _ = start_weights(np.array(["c", "a"], dtype=object), 4, 7, 0.5)
    np.testing.assert_array_equal(again, pair[[2, 0]])
    np.testing.assert_allclose(pair.sum(axis=1), 1.0)
    # each weight U(1, 2.5) before normalising: a share of two lies within [1/3.5, 2.5/3.5]
    assert (pair >= 1 / 3.5).all() and (pair <= 2.5 / 3.5).all()
    other, _ = start_weights(np.array(["a", "b", "c"], dtype=object), 4, 8, 0.5)
    assert not np.array_equal(other, pair)


def test_restarts_keep_the_best_log_marginal_likelihood():
    data, *_ = mace_crowd(seed=2, n_tasks=300, n_workers=12)
    ends = [aggregate(data, "mace", n_init=1, seed=s, max_iter=5).objective[-1] for s in range(3)]
    assert len(set(ends)) > 1  # the starts differ
    best = aggregate(data, "mace", n_init=4, max_iter=5)
    assert best.objective[-1] >= aggregate(data, "mace", n_init=1, max_iter=5).objective[-1]


def test_a_worker_without_answers_keeps_the_prior():
    data = AnnotationSet.from_codes([0, 0, 1, 1], [0, 2, 0, 2], [0, 0, 1, 2], n_workers=3, n_classes=3)
    fit = aggregate(data, "mace", alpha=0.5, beta=1.5)
    assert fit.worker_params["competence"][1] == pytest.approx(1.5 / 2.0)
    np.testing.assert_allclose(fit.worker_params["spam_distribution"][1], 1 / 3)


def test_gold_clamps_its_tasks():
    data, truth, *_ = mace_crowd(seed=4, n_tasks=200, n_workers=10)
    gold = {data.task_names[i]: data.classes[(truth[i] + 1) % 3] for i in range(5)}
    fit = aggregate(data, "mace", gold=gold, max_iter=5)
    np.testing.assert_array_equal(fit.labels[:5], (truth[:5] + 1) % 3)
    np.testing.assert_array_equal(fit.posteriors[:5].max(axis=1), 1.0)


def test_em_m_step_runs_and_recovers_too():
    data, truth, competence, _ = mace_crowd(seed=5)
    fit = aggregate(data, "mace", m_step="em")
    assert (fit.labels == truth).mean() > 0.92
    assert spearmanr(fit.worker_params["spamming"], 1 - competence).statistic > 0.9


@pytest.mark.parametrize(("params", "message"), [
    ({"m_step": "gibbs"}, "m_step must be"),
    ({"alpha": 0}, "alpha must be"),
    ({"n_init": 0}, "n_init must be"),
])
def test_bad_settings_are_refused(params, message):
    with pytest.raises(UsageError, match=message):
        aggregate(AnnotationSet.from_codes([0], [0], [0], n_classes=2), "mace", **params)


# ----------------------------------------------------------------------------- reproducible
def test_the_same_bytes_whatever_the_thread_count_and_the_same_fit_whatever_the_row_order(monkeypatch):
    monkeypatch.setattr(grid, "MIN_BLOCK_ANSWERS", 500)
    monkeypatch.setattr(grid, "ACCUMULATOR_FACTOR", 1)
    data, *_ = mace_crowd(seed=6, n_tasks=1000, n_workers=20)
    assert LocalEngine(data).n_blocks > 4
    frame = pd.DataFrame({"task": data.task_names[np.repeat(np.arange(data.n_tasks), np.diff(data.task_ptr))],
                          "worker": data.worker_names[data.worker], "label": np.asarray(data.classes)[data.label]})
    shuffled = frame.sample(frac=1.0, random_state=1)
    fits = []
    for n, rows in ((1, frame), (2, frame), (2, shuffled)):
        with threads.use_threads(n):
            fits.append(aggregate(rows, "mace", n_init=3, max_iter=10))
    a, b, c = fits
    np.testing.assert_array_equal(a.posteriors, b.posteriors)  # threads: the engine's fixed tree, the same bits
    np.testing.assert_array_equal(a.worker_params["competence"], b.worker_params["competence"])
    np.testing.assert_array_equal(a.objective, b.objective)
    # Shuffled rows: the starts are the same bits (keyed on names); a task's answers are added in the file's order,
    # so the fits agree to rounding and the labels exactly.
    order = pd.Index(c.data.task_names).get_indexer(a.data.task_names)
    worder = pd.Index(c.data.worker_names).get_indexer(a.data.worker_names)
    np.testing.assert_allclose(c.posteriors[order], a.posteriors, rtol=0, atol=1e-12)
    np.testing.assert_allclose(c.worker_params["competence"][worder], a.worker_params["competence"], rtol=1e-12)
    np.testing.assert_allclose(c.objective, a.objective, rtol=1e-12)
    assert c.label_names()[order].tolist() == a.label_names().tolist()


# ----------------------------------------------------------------------------- the real datasets
#: crowd-kit 1.4.2 MACE(n_iter=50), duplicates dropped keeping the last (measured here, and in issue 33).
CROWDKIT_MACE = {"bluebird": 0.7500, "rte": 0.9250, "dog": 0.8302, "web": 0.8266, "music": 0.7957}


@pytest.mark.parametrize("name", quick_case(CROWDKIT_MACE, "bluebird", "mace"))
def test_accuracy_on_real_data_matches_or_beats_crowdkit(datasets_dir, name):
    data = load_annotations(datasets_dir / name / "labels.csv", duplicates="last")
    truth = read_task_labels(datasets_dir / name / "truth.csv")
    fit = quiet(data, "mace")
    pred = dict(zip(data.task_names.tolist(), fit.label_names().tolist()))
    acc = float(np.mean([pred[t] == y for t, y in truth.items() if t in pred]))
    assert acc >= CROWDKIT_MACE[name] - 0.005, (name, acc)


def crowdkit_frame(datasets_dir, name):
    frame = pd.read_csv(datasets_dir / name / "labels.csv", dtype=str)
    return frame.drop_duplicates(["task", "worker"], keep="last").reset_index(drop=True)


def test_crowdkit_on_bluebird_and_why_it_falls_short(datasets_dir):
    """crowd-kit's own MACE gives bluebird .7500.  Its M-step reads ``groupby(["worker", "label"])`` counts --
    workers in sorted order -- as rows indexed by ``pd.factorize`` codes (order of appearance): worker j gets
    another worker's spam distribution.  With those counts put back in its own order (nothing else changed)
    crowd-kit gives .8611, and its posteriors are ours run from its own start to 1e-9."""
    from crowdkit.aggregation import MACE as CrowdKitMACE

    from crowdagg.kernels.mace import _e_step

    class Reordered(CrowdKitMACE):
        def fit(self, data):
            self.order = pd.factorize(data["worker"])[1], pd.factorize(data["label"])[1]
            return super().fit(data)

        def _e_step(self, *args):
            ll, gold, strategy, knowing = super()._e_step(*args)
            return ll, gold, strategy.reindex(index=self.order[0], columns=self.order[1]).fillna(0.0), knowing

    frame = crowdkit_frame(datasets_dir, "bluebird")
    truth = pd.read_csv(datasets_dir / "bluebird" / "truth.csv", dtype=str).set_index("task")["label"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = CrowdKitMACE(n_iter=50, n_restarts=1).fit(frame)
        fixed = Reordered(n_iter=50, n_restarts=1).fit(frame)
    for model, expected in ((theirs, 0.7500), (fixed, 0.8611)):
        assert (model.labels_[truth.index] == truth).mean() == pytest.approx(expected, abs=1e-4)
    assert not np.array_equal(np.sort(frame["worker"].unique()), pd.factorize(frame["worker"])[1])

    # ours, from crowd-kit's own start (its _initialize, random_state 0), 50 rounds
    data = load_annotations(datasets_dir / "bluebird" / "labels.csv", duplicates="last")
    start = CrowdKitMACE()
    start._initialize(data.n_workers, data.n_classes)
    workers = pd.Index(pd.factorize(frame["worker"])[1]).get_indexer(data.worker_names)
    classes = pd.Index(pd.factorize(frame["label"])[1]).get_indexer(list(data.classes))
    pair, theta = start.spamming_[workers], start.thetas_[workers][:, classes]
    engine, clamp = LocalEngine(data), np.full(data.n_tasks, -1)
    logs = np.log(pair[:, 0]), np.log(pair[:, 1]), np.log(theta)
    post = _e_step(engine, *logs, clamp)
    for _ in range(50):
        logs = m_step(post.spam, post.know, (0.5, 0.5, 10.0), variational=True)
        post = _e_step(engine, *logs, clamp)
    tasks = pd.Index(data.task_names)
    expected = fixed.probas_.loc[tasks, list(data.classes)].to_numpy()
    np.testing.assert_allclose(post.post, expected, atol=1e-9)


# ----------------------------------------------------------------------------- the command line
def test_the_cli_writes_competence_and_spamming_per_worker_and_posteriors(tmp_path):
    from typer.testing import CliRunner

    from crowdagg.cli import app

    runner = CliRunner()
    workers = tmp_path / "w.csv"
    res = runner.invoke(app, ["aggregate", "example:bluebird", "-m", "mace", "--proba", "--workers", str(workers),
                              "-p", "n_init=2"])
    assert res.exit_code == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0].startswith("task,label,confidence,") and len(lines) == 109
    rows = workers.read_text().splitlines()
    assert rows[0] == "worker,competence,spamming,n_answers" and len(rows) == 40
    competence, spamming = map(float, rows[1].split(",")[1:3])
    assert competence + spamming == pytest.approx(1.0)
    shown = runner.invoke(app, ["methods", "mace"])
    assert "--workers: competence" in " ".join(shown.stdout.split())
    bad = runner.invoke(app, ["aggregate", "example:bluebird", "-m", "mace", "-p", "m_step=gibbs"])
    assert bad.exit_code == 2 and bad.stderr.startswith("Error: -p m_step must be")


def test_the_workers_report_ends_with_competence_and_spamming(tmp_path):
    from typer.testing import CliRunner

    from crowdagg.cli import app
    from crowdagg.reports.workers import report_columns, worker_report

    data, _, competence, _ = mace_crowd(seed=7, n_tasks=300, n_workers=10)
    fit = aggregate(data, "mace", n_init=2)
    report = worker_report(data, fit)
    assert tuple(report.columns) == report_columns(data.classes, False, ("competence", "spamming"))
    np.testing.assert_array_equal(report["competence"].to_numpy(dtype=float), fit.worker_params["competence"])
    assert report["accuracy"].isna().all()  # MACE estimates no accuracy: the near-chance rule leaves it alone
    out = tmp_path / "workers.csv"
    res = CliRunner().invoke(app, ["workers", "example:bluebird", "-m", "mace", "-o", str(out)])
    assert res.exit_code == 0, res.stderr
    header = out.read_text().splitlines()[0].split(",")
    assert header[-2:] == ["competence", "spamming"] and header[:3] == ["worker", "answers", "accuracy"]


def test_dask_engine_gives_the_local_bytes(tmp_path):
    """The restarts draw from worker names on the client, every pass is the engine's: the same bits on Dask."""
    distributed = pytest.importorskip("distributed")
    from crowdagg.simulate import simulate

    simulate(n_tasks=2000, n_workers=12, n_classes=3, per_task=4, seed=5).write(tmp_path)
    path = tmp_path / "labels.csv"
    local = aggregate(str(path), "mace", n_init=3, max_iter=20)
    with distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=False,
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as client:
        remote = aggregate(str(path), "mace", n_init=3, max_iter=20, engine="dask", client=client)
    np.testing.assert_array_equal(local.posteriors, remote.posteriors)
    np.testing.assert_array_equal(local.objective, remote.objective)
    np.testing.assert_array_equal(local.worker_params["spamming"], remote.worker_params["spamming"])


@pytest.mark.quick
def test_start_weights_and_m_step_refuse_what_they_cannot_use():
    """Both are public (the module's __all__): a negative or NaN noise drew weights that were NaN or below 0, no
    worker names a bare numpy ValueError, a negative prior NaN log-weights, counts of two shapes numpy's broadcast
    error.  UsageError / DataError now; good input unchanged."""
    from crowdagg.errors import DataError, UsageError
    from crowdagg.methods.mace.mace import m_step, start_weights

    pair, theta = start_weights(["w1", "w2"], 3, 0, 0.5)
    np.testing.assert_allclose(pair.sum(axis=1), 1.0)
    np.testing.assert_allclose(theta.sum(axis=1), 1.0)
    for bad, match in (((["w1"], 3, 0, -3.0), "default_noise"), ((["w1"], 3, 0, float("nan")), "default_noise"),
                       ((["w1"], 0, 0, 0.5), "n_classes"), ((None, 3, 0, 0.5), "worker_names")):
        with pytest.raises(UsageError, match=match):
            start_weights(*bad)
    log_s, log_c, log_t = m_step(np.ones((2, 3)), np.ones(2), (0.5, 0.5, 10.0), False)
    # em: spamming (3 spam answers + .5) against competence (1 + .5); each class of θ 1 + 10
    np.testing.assert_allclose(np.exp(log_s), 0.7)
    np.testing.assert_allclose(np.exp(log_c), 0.3)
    np.testing.assert_allclose(np.exp(log_t), 1 / 3)
    with pytest.raises(UsageError, match="finite and positive"):
        m_step(np.ones((2, 3)), np.ones(2), (-5.0, 0.5, 10.0), True)
    with pytest.raises(DataError, match="2 rows, know 3"):
        m_step(np.ones((2, 3)), np.ones(3), (0.5, 0.5, 10.0), True)
