"""Mean-field VB (``mf``): a slow numpy reference of its updates, the ELBO's ascent, recovery of simulated
confusions, the Dask engine's bytes, real data beside ds, and the extreme spammers of the deepBP scenario."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from scipy.special import digamma

from crowdagg.core.threads import use_threads
from crowdagg.errors import UsageError
from crowdagg.methods.api import aggregate
from crowdagg.methods.graph.mf import MeanField
from crowdagg.methods.variational import dirichlet_kl, expected_log
from crowdagg.simulate import simulate
from tests.reference import dirichlet_kl_one
from tests.tiers import quick_case


# --------------------------------------------------------------------------- the reference
def reference_mf(data, model: str, prior=(2.0, 1.0), gamma0: float = 1.0, n_iter: int = 10, gold=None):
    """Mean-field VB answer by answer, loops over tasks, workers and classes: (posteriors, ELBO trace)."""
    k, w = data.n_classes, data.n_workers
    answers = [[] for _ in range(data.n_tasks)]
    for t, u, y in zip(data.task, data.worker, data.label, strict=True):
        answers[int(t)].append((int(u), int(y)))
    q = np.zeros((data.n_tasks, k))
    for t, ans in enumerate(answers):  # soft majority vote
        for _, y in ans:
            q[t, y] += 1.0
        if ans:
            q[t] /= len(ans)
    gold = {} if gold is None else gold
    for t, g in gold.items():
        q[t] = np.eye(k)[g]
    trace = []
    for _ in range(n_iter + 1):
        # M-step
        counts = np.zeros((w, k, k))  # [worker, true, observed]
        for t, ans in enumerate(answers):
            for u, y in ans:
                counts[u, :, y] += q[t]
        gamma = gamma0 + q.sum(axis=0)
        e_pi = [digamma(gamma[c]) - digamma(gamma.sum()) for c in range(k)]
        e_theta = np.zeros((w, k, k))
        kl = dirichlet_kl_one(gamma, np.full(k, gamma0))
        if model == "one-coin":
            for u in range(w):
                a = prior[0] + np.trace(counts[u])
                b = prior[1] + counts[u].sum() - np.trace(counts[u])
                kl += dirichlet_kl_one(np.array([a, b]), np.array(prior))
                for c in range(k):
                    for y in range(k):
                        e_theta[u, c, y] = digamma(a) - digamma(a + b) if c == y else \
                            digamma(b) - digamma(a + b) - math.log(k - 1)
        else:
            for u in range(w):
                for c in range(k):
                    alpha = np.array([prior[0] if y == c else prior[1] for y in range(k)])
                    beta = alpha + counts[u, c]
                    kl += dirichlet_kl_one(beta, alpha)
                    for y in range(k):
                        e_theta[u, c, y] = digamma(beta[y]) - digamma(beta.sum())
        # E-step
        log_z = 0.0
        for t, ans in enumerate(answers):
            s = np.array(e_pi, dtype=float)
            for u, y in ans:
                s += e_theta[u, :, y]
            if t in gold:
                log_z += s[gold[t]]
                q[t] = np.eye(k)[gold[t]]
                continue
            m = s.max()
            z = np.exp(s - m).sum()
            log_z += m + math.log(z)
            q[t] = np.exp(s - m) / z
        trace.append(log_z - kl)
    return q, np.array(trace)


@pytest.fixture(scope="module")
def small():
    return simulate(n_tasks=60, n_workers=7, n_classes=3, per_task=4, seed=3).to_annotations()


@pytest.mark.parametrize("model", ["confusion", "one-coin"])
def test_mf_equals_the_reference_updates(small, model):
    got = MeanField(worker_model=model, max_iter=8, tol=0.0, prior=(1.5, 0.7), class_prior=2.0).fit(small)
    want_q, want_trace = reference_mf(small, model, (1.5, 0.7), 2.0, n_iter=8)
    assert got.n_iter == 8 and got.objective_name == "ELBO"
    np.testing.assert_allclose(got.posteriors, want_q, rtol=0, atol=1e-10)
    np.testing.assert_allclose(got.objective, want_trace[1:], rtol=1e-10, atol=0)


def test_mf_gold_clamps_and_equals_the_reference(small):
    gold_rows = {0: 2, 5: 0, 17: 1}
    gold = {small.tasks[t]: small.classes[g] for t, g in gold_rows.items()}
    got = MeanField(max_iter=5, tol=0.0, gold=gold).fit(small)
    want_q, want_trace = reference_mf(small, "confusion", n_iter=5, gold=gold_rows)
    np.testing.assert_allclose(got.posteriors, want_q, rtol=0, atol=1e-10)
    np.testing.assert_allclose(got.objective, want_trace[1:], rtol=1e-10, atol=0)
    for t, g in gold_rows.items():
        assert got.labels[t] == g and got.posteriors[t, g] == 1.0


def test_shared_dirichlet_pieces_against_the_formulas():
    beta = np.array([[2.5, 1.0, 0.3], [4.0, 4.0, 1.0]])
    alpha = np.array([1.0, 2.0, 0.5])
    e = expected_log(beta)
    for r in range(2):
        for c in range(3):
            assert e[r, c] == pytest.approx(digamma(beta[r, c]) - digamma(beta[r].sum()), abs=1e-14)
    assert dirichlet_kl(beta, alpha) == pytest.approx(dirichlet_kl_one(beta[0], alpha) + dirichlet_kl_one(beta[1], alpha), abs=1e-12)
    assert dirichlet_kl(alpha[None], alpha) == pytest.approx(0.0, abs=1e-14)
    # E[log θ] against a Monte-Carlo average of log Dirichlet draws
    draws = np.random.default_rng(0).dirichlet(beta[0], size=200_000)
    np.testing.assert_allclose(np.log(draws).mean(axis=0), e[0], atol=0.02)


# --------------------------------------------------------------------------- properties
@pytest.mark.parametrize("model", ["confusion", "one-coin"])
def test_the_elbo_never_decreases(model, datasets_dir):
    from crowdagg.io.read import load_annotations

    crowds = [simulate(n_tasks=400, n_workers=12, n_classes=k, per_task=3, spammers=0.3, adversaries=0.1,
                       seed=s).to_annotations() for s, k in ((0, 2), (1, 4))]
    crowds += [load_annotations(datasets_dir / name / "labels.csv") for name in ("dog", "web")]
    for data in crowds:
        for prior in ((2.0, 1.0), (0.5, 0.5)):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                r = MeanField(worker_model=model, prior=prior, max_iter=60, tol=0.0).fit(data)
            trace = r.objective
            assert np.isfinite(trace).all()
            assert (np.diff(trace) >= -1e-9 * np.abs(trace[1:])).all(), (model, prior, np.diff(trace).min())


def test_recovers_simulated_confusions():
    crowd = simulate(n_tasks=4000, n_workers=10, n_classes=3, per_task=6, seed=11)
    r = MeanField().fit(crowd.to_annotations())
    err = np.abs(r.worker_params["confusion"] - crowd.confusion)
    assert err.mean() < 0.02 and err.max() < 0.08, (err.mean(), err.max())
    assert np.mean(r.labels == crowd.truth) > 0.95
    one = simulate(n_tasks=4000, n_workers=10, n_classes=3, per_task=6, model="onecoin", seed=12)
    r1 = MeanField(worker_model="one-coin").fit(one.to_annotations())
    acc = np.diagonal(one.confusion, axis1=1, axis2=2)[:, 0]
    assert np.abs(r1.worker_params["accuracy"] - acc).max() < 0.04
    np.testing.assert_allclose(r1.worker_params["confusion"].sum(axis=2), 1.0, atol=1e-12)


def test_thread_count_does_not_change_a_bit():
    data = simulate(n_tasks=30_000, n_workers=20, n_classes=2, per_task=5, seed=2).to_annotations()
    assert data.n_answers > 2 * 65_536  # several blocks
    fits = []
    for n in (1, 2):
        with use_threads(n):
            fits.append(MeanField(max_iter=10, tol=0.0).fit(data))
    assert np.array_equal(fits[0].posteriors, fits[1].posteriors)
    assert np.array_equal(fits[0].objective, fits[1].objective)
    assert np.array_equal(fits[0].worker_params["confusion"], fits[1].worker_params["confusion"])


def test_bad_settings_are_refused_before_the_data():
    with pytest.raises(UsageError, match="prior.*two numbers"):
        MeanField(prior=(2.0, 1.0, 1.0)).check_params()
    with pytest.raises(UsageError, match="prior"):
        MeanField(prior=(0.0, 1.0)).check_params()
    with pytest.raises(UsageError, match="class_prior"):
        MeanField(class_prior=float("nan")).check_params()
    with pytest.raises(UsageError, match="worker_model"):
        MeanField(worker_model="two-coin").check_params()


def test_one_worker_and_one_class_give_finite_results():
    from crowdagg.data.annotations import AnnotationSet

    one = AnnotationSet.from_names(["a", "b", "c"], ["w", "w", "w"], ["x", "y", "x"])
    r = MeanField().fit(one)
    assert np.isfinite(r.posteriors).all() and list(r.labels) == [0, 1, 0]
    single = AnnotationSet.from_names(["a", "b"], ["w", "v"], ["x", "x"])
    r = MeanField().fit(single)
    assert np.array_equal(r.posteriors, np.ones((2, 1)))


# --------------------------------------------------------------------------- engines
def test_dask_engine_gives_the_local_bytes(tmp_path):
    distributed = pytest.importorskip("distributed")
    simulate(n_tasks=3000, n_workers=15, n_classes=3, per_task=4, seed=5).write(tmp_path)
    path = tmp_path / "labels.csv"
    local = aggregate(str(path), "mf", max_iter=20)
    with distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=False,
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as client:
        remote = aggregate(str(path), "mf", max_iter=20, engine="dask", client=client)
    assert np.array_equal(local.posteriors, remote.posteriors)
    assert np.array_equal(local.objective, remote.objective)
    assert np.array_equal(local.worker_params["confusion"], remote.worker_params["confusion"])


# --------------------------------------------------------------------------- real data
#: Accuracy with the defaults (measured; ds beside it for reference: rte .9275, dog .8426, web .8289,
#: temp .9416, bluebird .8981).
REAL = {"rte": 0.9287, "dog": 0.8389, "web": 0.8017, "temp": 0.9416, "bluebird": 0.8889}


@pytest.mark.parametrize("name", quick_case(sorted(REAL), "bluebird", "mf"))
def test_real_data_accuracy(datasets_dir, name):
    from crowdagg.io.read import load_annotations, read_task_labels
    from crowdagg.reports.evaluate import evaluate_labels

    data = load_annotations(datasets_dir / name / "labels.csv")
    truth = read_task_labels(datasets_dir / name / "truth.csv")
    r = aggregate(data, "mf")
    assert r.converged
    assert evaluate_labels(r.labels_series(), truth).accuracy >= REAL[name] - 1e-4


def test_extreme_spammers_of_the_deepbp_scenario():
    """deepBP §4.1: MF is over-confident and can read an extreme spammer (answers every task at random) as an
    adversary.  Ours (Dirichlet(2,1) rows, from the soft vote) puts each of the three spammers' balanced accuracy
    (the mean of its confusion diagonal) within .11 of chance -- .46 at the lowest over seeds 0-4, never an
    adversary -- where ds, with point estimates, reads them as .57-.70 and holds ~85% of its posteriors above .99
    (MF ~5%); MF stays above majority vote (and ds) on every seed."""
    for seed in range(3):
        crowd = simulate(scenario="deepbp", extreme_spammers=3, seed=seed)
        data = crowd.to_annotations()
        spam = np.flatnonzero(np.asarray(crowd.worker_kind) == "extreme_spammer")
        assert spam.size == 3
        fits = {m: aggregate(data, m, seed=seed) for m in ("mf", "ds", "mv")}
        acc = {m: np.mean(r.labels == crowd.truth) for m, r in fits.items()}
        assert acc["mf"] > acc["mv"] and acc["mf"] > acc["ds"], acc
        balanced = {m: np.diagonal(fits[m].confusion[spam], axis1=1, axis2=2).mean(axis=1) for m in ("mf", "ds")}
        assert np.abs(balanced["mf"] - 0.5).max() < 0.11, balanced
        assert np.abs(balanced["mf"] - 0.5).mean() < np.abs(balanced["ds"] - 0.5).mean(), balanced
        sure = {m: np.mean(fits[m].posteriors.max(axis=1) > 0.99) for m in ("mf", "ds")}
        assert sure["mf"] < 0.2 < 0.7 < sure["ds"], sure
