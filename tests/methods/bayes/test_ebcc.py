"""EBCC (``ebcc``): a slow reference of its updates, one subtype is mf, row order, recovery of correlated crowds,
the CLI's --proba and --workers, the Dask engine, and the authors' published accuracies on the real datasets."""

from __future__ import annotations

import io
import math
import warnings

import numpy as np
import pandas as pd
import pytest
from scipy.special import digamma

from crowdagg.data.annotations import AnnotationSet
from crowdagg.errors import ResourceError, UsageError
from crowdagg.methods.api import aggregate
from crowdagg.methods.bayes.ebcc import EBCC, subtype_split
from crowdagg.simulate import simulate
from tests.realdata import accuracy_on
from tests.reference import dirichlet_kl_one
from tests.tiers import quick_case


# --------------------------------------------------------------------------- the reference
def reference_ebcc(data, split: np.ndarray, n_iter: int, a_pi=0.1, prior=(4.0, 1.0), alpha=1.0):
    """EBCC's mean-field updates answer by answer from the subtype split ``split`` (n_tasks, K, M): the class
    posteriors and the ELBO after each of ``n_iter + 1`` M/E rounds (the first is the fit's start)."""
    n, k, m = split.shape
    w = data.n_workers
    answers = [[] for _ in range(n)]
    for t, u, y in zip(data.task, data.worker, data.label, strict=True):
        answers[int(t)].append((int(u), int(y)))
    q = split.copy()
    beta = np.full((k, k), prior[1])
    np.fill_diagonal(beta, prior[0])
    trace, posts = [], []
    for _ in range(n_iter + 1):
        mu = np.zeros((w, k, m, k)) + beta[None, :, None, :]  # [worker, true, subtype, observed]
        for t, ans in enumerate(answers):
            for u, y in ans:
                mu[u, :, :, y] += q[t]
        eta = a_pi / m + q.sum(axis=0)
        nu = alpha + q.sum(axis=(0, 2))
        kl = dirichlet_kl_one(nu, np.broadcast_to(alpha, (k,)))
        kl += sum(dirichlet_kl_one(eta[c], np.full(m, a_pi / m)) for c in range(k))
        kl += sum(dirichlet_kl_one(mu[u, c, g], beta[c]) for u in range(w) for c in range(k) for g in range(m))
        e_tau = digamma(nu) - digamma(nu.sum())
        e_pi = digamma(eta) - digamma(eta.sum(axis=1, keepdims=True))
        e_v = digamma(mu) - digamma(mu.sum(axis=3, keepdims=True))
        log_z = 0.0
        for t, ans in enumerate(answers):
            s = e_tau[:, None] + e_pi
            for u, y in ans:
                s = s + e_v[u, :, :, y]
            top = s.max()
            z = np.exp(s - top).sum()
            log_z += top + math.log(z)
            q[t] = np.exp(s - top) / z
        trace.append(log_z - kl)
        posts.append(q.sum(axis=2))
    return posts, np.array(trace)


@pytest.fixture(scope="module")
def small():
    return simulate(n_tasks=50, n_workers=6, n_classes=3, per_task=4, seed=4).to_annotations()


def split_of(data, seed: int, m: int, start: int = 0) -> np.ndarray:
    """The subtype split of a fit's start ``start``: the soft vote split under the seed that start draws from the
    generator (seed, start)."""
    from crowdagg.methods.blocks import soft_majority_vote

    split_seed = int(np.random.default_rng([seed, start]).integers(2**63 - 1))
    return subtype_split(soft_majority_vote(data), data.task_names, m, split_seed)


@pytest.mark.parametrize("empirical", [False, True])
def test_ebcc_equals_the_reference_updates(small, empirical):
    got = EBCC(subtypes=3, n_init=1, max_iter=6, tol=0.0, seed=7, a_pi=0.5, prior=(3.0, 0.5),
               class_prior=2.0, empirical_prior=empirical).fit(small)
    split = split_of(small, 7, 3)
    alpha = 2.0 + (split.sum(axis=(0, 2)) if empirical else 0.0)  # the start's class totals, with empirical_prior
    posts, trace = reference_ebcc(small, split, 6, a_pi=0.5, prior=(3.0, 0.5), alpha=alpha)
    assert got.n_iter == 6 and got.objective_name == "ELBO"
    np.testing.assert_allclose(got.posteriors, posts[-1], rtol=0, atol=1e-10)
    np.testing.assert_allclose(got.objective, trace[1:], rtol=1e-10, atol=0)
    assert (np.diff(got.objective) >= -1e-9 * np.abs(got.objective[1:])).all()  # coordinate ascent


def test_the_split_is_a_dirichlet_share_of_each_class_keyed_on_names():
    post = np.array([[0.25, 0.75], [1.0, 0.0], [0.5, 0.5]])
    names = np.array(["a", "b", "c"], dtype=object)
    split = subtype_split(post, names, 4, seed=11)
    assert split.shape == (3, 2, 4)
    np.testing.assert_allclose(split.sum(axis=2), post, atol=1e-15)
    assert (split[1, 1] == 0).all() and (split[0] > 0).all()
    again = subtype_split(post[[2, 0, 1]], names[[2, 0, 1]], 4, seed=11)
    assert np.array_equal(again, split[[2, 0, 1]])  # the same task gets the same split wherever it is
    assert not np.array_equal(subtype_split(post, names, 4, seed=12), split)
    # Dirichlet(1) shares: a share's mean 1/M, its variance (M - 1) / (M² (M + 1))
    many = subtype_split(np.ones((20_000, 1)), np.array([f"t{i}" for i in range(20_000)], dtype=object), 4, 3)
    share = many[:, 0, :]
    np.testing.assert_allclose(share.mean(axis=0), 0.25, atol=0.01)
    np.testing.assert_allclose(share.var(axis=0), 3 / (16 * 5), rtol=0.05)


# --------------------------------------------------------------------------- one subtype is mf
@pytest.mark.parametrize("gold_rows", [{}, {0: 2, 5: 0, 17: 1}])
def test_one_subtype_is_mf(small, gold_rows):
    gold = {small.tasks[t]: small.classes[g] for t, g in gold_rows.items()} or None
    e = EBCC(subtypes=1, max_iter=12, tol=0.0, gold=gold, empirical_prior=False).fit(small)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from crowdagg.methods.graph.mf import MeanField

        f = MeanField(worker_model="confusion", prior=(4.0, 1.0), class_prior=1.0, max_iter=12, tol=0.0,
                      gold=gold).fit(small)
    # The same arithmetic but for the start's counts (the kernel's softmax of the start's logs) and the order of
    # a few sums: equal to 1e-12.
    np.testing.assert_allclose(e.posteriors, f.posteriors, rtol=0, atol=1e-12)
    np.testing.assert_allclose(e.objective, f.objective, rtol=1e-12, atol=0)
    np.testing.assert_allclose(e.confusion, f.confusion, rtol=0, atol=1e-12)
    np.testing.assert_allclose(e.prior, f.prior, rtol=0, atol=1e-12)
    np.testing.assert_allclose(e.model_params["beta"][:, :, 0, :], f.model_params["beta"], rtol=1e-12)
    assert np.array_equal(e.labels, f.labels)
    for t, g in gold_rows.items():
        assert e.posteriors[t, g] == 1.0


# --------------------------------------------------------------------------- row order, seeds, restarts
def test_shuffled_rows_give_the_same_bytes():
    crowd = simulate(n_tasks=300, n_workers=10, n_classes=3, per_task=4, seed=8).to_annotations()
    t = np.asarray(crowd.tasks, dtype=object)[crowd.task]
    w = np.asarray(crowd.workers, dtype=object)[crowd.worker]
    y = np.asarray(crowd.classes, dtype=object)[crowd.label]
    perm = np.random.default_rng(1).permutation(len(t))
    a = aggregate(AnnotationSet.from_names(t, w, y), "ebcc", subtypes=4, n_init=2, seed=3)
    b = aggregate(AnnotationSet.from_names(t[perm], w[perm], y[perm]), "ebcc", subtypes=4, n_init=2, seed=3)
    pos = {name: i for i, name in enumerate(b.data.task_names)}
    order = [pos[name] for name in a.data.task_names]
    wpos = {name: i for i, name in enumerate(b.data.worker_names)}
    worder = [wpos[name] for name in a.data.worker_names]
    assert a.data.classes == b.data.classes and a.n_iter == b.n_iter
    # The splits are the same bits (keyed on names); the sums over tasks run in each file's task order, so the
    # fits agree to rounding, and the written output (6 digits) byte for byte.
    np.testing.assert_allclose(b.posteriors[order], a.posteriors, rtol=0, atol=1e-12)
    np.testing.assert_allclose(b.confusion[worder], a.confusion, rtol=0, atol=1e-12)
    np.testing.assert_allclose(b.objective, a.objective, rtol=1e-12)
    assert dict(zip(a.data.task_names, a.label_names())) == dict(zip(b.data.task_names, b.label_names()))
    fa = a.to_frame(proba=True).set_index("task").sort_index().round(6)
    fb = b.to_frame(proba=True).set_index("task").sort_index().round(6)
    assert fa.to_csv() == fb.to_csv()


def test_the_best_elbo_of_the_restarts_is_kept(small):
    finals = [reference_elbo_of(small, split_of(small, 0, 3, start)) for start in range(3)]
    assert len(set(np.round(finals, 6))) > 1  # the splits do end in different optima
    best = EBCC(subtypes=3, n_init=3, seed=0).fit(small)
    assert best.objective[-1] == pytest.approx(max(finals), rel=1e-9)


def reference_elbo_of(data, split) -> float:
    """The final ELBO of a default run (tol 1e-3, the residual rule) from ``split``, by the reference updates."""
    posts, trace = reference_ebcc(data, split, 500, alpha=1.0 + split.sum(axis=(0, 2)))
    for i in range(1, len(posts)):
        answered = data.answers_per_task > 0
        if np.abs(posts[i][answered] - posts[i - 1][answered]).max() <= 1e-3:
            return float(trace[i])
    return float(trace[-1])


# --------------------------------------------------------------------------- recovery
def correlated_crowd(seed: int, n_tasks=1200, n_group=3, n_other=8, acc_group=0.95, acc_other=0.7):
    """A binary crowd where half the items of class 0 form a subpopulation on which a group of otherwise excellent
    workers answer 1 together (90%): their errors are correlated, not independent given the class."""
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, 2, n_tasks)
    tricky = (truth == 0) & (rng.random(n_tasks) < 0.5)
    tasks, workers, labels = [], [], []
    for w in range(n_group + n_other):
        acc = acc_group if w < n_group else acc_other
        lab = np.where(rng.random(n_tasks) < acc, truth, 1 - truth)
        if w < n_group:
            lab = np.where(tricky, (rng.random(n_tasks) < 0.9).astype(np.int64), lab)
        tasks.append(np.arange(n_tasks))
        workers.append(np.full(n_tasks, w))
        labels.append(lab)
    data = AnnotationSet.from_codes(np.concatenate(tasks), np.concatenate(workers), np.concatenate(labels),
                                    n_classes=2)
    return data, truth, tricky


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_correlated_workers_beat_ds(seed):
    data, truth, tricky = correlated_crowd(seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ds's fit on this crowd may be called a collapse
        ds = aggregate(data, "ds")
    eb = aggregate(data, "ebcc")
    acc_ds, acc_eb = np.mean(ds.labels == truth), np.mean(eb.labels == truth)
    assert acc_eb > 0.9 and acc_eb > acc_ds + 0.1, (acc_eb, acc_ds)
    # the subpopulation ds gives to the group's wrong class: ebcc reads it from the other 8 workers, whose majority
    # alone is right on about 80% of it (P(at least 5 of 8 right at .7) = .81)
    right_eb, right_ds = np.mean(eb.labels[tricky] == 0), np.mean(ds.labels[tricky] == 0)
    assert right_eb > 0.7 and right_eb > right_ds + 0.3, (right_eb, right_ds)
    # the group's class-0 confusion, marginalised over subtypes, says they answer 1 on about half of class 0
    assert eb.confusion[:3, 0, 1] == pytest.approx(0.45, abs=0.08)


def test_recovers_a_plain_dawid_skene_crowd():
    crowd = simulate(n_tasks=3000, n_workers=10, n_classes=3, per_task=5, prior=(0.5, 0.3, 0.2), seed=21)
    data = crowd.to_annotations()
    eb = aggregate(data, "ebcc")
    ds = aggregate(data, "ds")
    acc_eb, acc_ds = np.mean(eb.labels == crowd.truth), np.mean(ds.labels == crowd.truth)
    assert acc_eb >= acc_ds - 0.005 and acc_eb > 0.9, (acc_eb, acc_ds)
    # The authors' empirical prior holds the vote's class totals as pseudo-tasks: the class proportions land halfway
    # between the vote's shares and the truth's; without it they are the truth's.
    from crowdagg.methods.blocks import soft_majority_vote

    truth_share = np.bincount(crowd.truth, minlength=3) / len(crowd.truth)
    halfway = (soft_majority_vote(data).mean(axis=0) + truth_share) / 2
    np.testing.assert_allclose(eb.prior, halfway, atol=0.01)
    plain = aggregate(data, "ebcc", empirical_prior=False)
    np.testing.assert_allclose(plain.prior, [0.5, 0.3, 0.2], atol=0.03)
    np.testing.assert_allclose(plain.prior, truth_share, atol=0.01)
    err = np.abs(eb.confusion - crowd.confusion)
    assert err.mean() < 0.03 and err.max() < 0.12, (err.mean(), err.max())
    # few subtypes carry the weight (a_π = 0.1: sparse)
    assert (eb.model_params["subtype_weights"].max(axis=1) > 0.5).all()


# --------------------------------------------------------------------------- settings, memory, results
def test_bad_settings_are_refused_before_the_data():
    with pytest.raises(UsageError, match="subtypes"):
        EBCC(subtypes=0).check_params()
    with pytest.raises(UsageError, match="prior.*two numbers"):
        EBCC(prior=(4.0, 1.0, 1.0)).check_params()
    with pytest.raises(UsageError, match="a_pi"):
        EBCC(a_pi=0.0).check_params()


def test_memory_is_refused_up_front_with_the_size(small):
    with pytest.raises(ResourceError, match="latent states"):
        EBCC().fit(small, max_memory=1000)
    need, what = EBCC(subtypes=10).memory_needed(small)
    assert need > 8.0 * small.n_tasks * 30 and "30 latent states" in what


def test_result_holds_the_model_and_the_marginal_confusion(small):
    r = EBCC(subtypes=4, n_init=1).fit(small)
    k, w = small.n_classes, small.n_workers
    beta, eta = r.model_params["beta"], r.model_params["eta"]
    assert beta.shape == (w, k, 4, k) and eta.shape == (k, 4) and r.model_params["nu"].shape == (k,)
    weights = eta / eta.sum(axis=1, keepdims=True)
    want = np.einsum("km,wkml->wkl", weights, beta / beta.sum(axis=3, keepdims=True))
    np.testing.assert_allclose(r.confusion, want, atol=1e-14)
    np.testing.assert_allclose(r.confusion.sum(axis=2), 1.0, atol=1e-12)
    assert r.converged and 0 < r.n_iter < 500


def test_cli_proba_and_workers(tmp_path):
    from typer.testing import CliRunner

    from crowdagg.cli import app

    crowd = simulate(n_tasks=120, n_workers=8, n_classes=3, per_task=4, seed=2).to_annotations()
    path = tmp_path / "labels.csv"
    pd.DataFrame({"task": np.asarray(crowd.tasks, dtype=object)[crowd.task],
                  "worker": np.asarray(crowd.workers, dtype=object)[crowd.worker],
                  "label": np.asarray(crowd.classes, dtype=object)[crowd.label]}).to_csv(path, index=False)
    wpath = tmp_path / "workers.csv"
    res = CliRunner().invoke(app, ["aggregate", str(path), "-m", "ebcc", "--proba", "--workers", str(wpath),
                                   "-p", "subtypes=3"])
    assert res.exit_code == 0, res.stderr
    out = pd.read_csv(io.StringIO(res.stdout), dtype={"task": str, "label": str})
    assert len(out) == 120 and [c for c in out.columns if c.startswith("p_")] == ["p_0", "p_1", "p_2"]
    np.testing.assert_allclose(out[["p_0", "p_1", "p_2"]].sum(axis=1), 1.0, atol=1e-5)
    lib = aggregate(str(path), "ebcc", subtypes=3)
    np.testing.assert_allclose(out[["p_0", "p_1", "p_2"]].to_numpy(), lib.posteriors, atol=1e-6)
    w = pd.read_csv(wpath, dtype={"worker": str, "true_label": str, "observed_label": str})
    assert list(w.columns[:4]) == ["worker", "true_label", "observed_label", "probability"]
    assert len(w) == 8 * 3 * 3
    np.testing.assert_allclose(w.groupby(["worker", "true_label"])["probability"].sum(), 1.0, atol=1e-5)


# --------------------------------------------------------------------------- engines
def test_dask_engine_gives_the_local_bytes(tmp_path):
    distributed = pytest.importorskip("distributed")

    simulate(n_tasks=2000, n_workers=12, n_classes=3, per_task=4, seed=5).write(tmp_path)
    path = tmp_path / "labels.csv"
    # the default restarts (5): each splits the same start by task names, so they run on Dask too (ebcc declares
    # its own n_init; only EM's restarts, which blend per-task noise on the client, are refused there)
    local = aggregate(str(path), "ebcc", subtypes=3, max_iter=20)
    with distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=False,
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as client:
        remote = aggregate(str(path), "ebcc", subtypes=3, max_iter=20, engine="dask", client=client)
    assert np.array_equal(local.posteriors, remote.posteriors)
    assert np.array_equal(local.objective, remote.objective)
    assert np.array_equal(local.confusion, remote.confusion)


# --------------------------------------------------------------------------- real data
#: The authors' published EBCC accuracies (Li, Rubinstein & Cohn 2019, Table 2), and ours with the defaults
#: (measured: `load_annotations(..., duplicates="last")`, tasks with truth).  Within 1 point or better, except
#: web (see GAPS).
PUBLISHED = {"bluebird": 0.861, "rte": 0.931, "dog": 0.840, "web": 0.769, "trec": 0.704, "face": 0.635,
             "cf": 0.883, "cf_amt": 0.857, "sp_amt": 0.944, "music": 0.787, "zencrowd": 0.862}
OURS = {"bluebird": 0.8611, "rte": 0.9313, "dog": 0.8401, "web": 0.7437, "trec": 0.7037, "face": 0.6353,
        "cf": 0.8767, "cf_amt": 0.86, "sp_amt": 0.94, "music": 0.7871, "zencrowd": 0.8691, "labelme": 0.786,
        "sentiment": 0.9092, "temp": 0.9416}
#: Where ours is more than a point below the authors': web (.744 against .769; every one of 40 seeded splits ends
#: within .001 of .744, so it is not the restarts -- the authors' start from a task's distinct answered classes
#: gives .748, their ties are scored fractionally).
GAPS = ("web",)


@pytest.mark.parametrize("name", quick_case(sorted(OURS), "bluebird", "ebcc"))
def test_real_data_accuracy(datasets_dir, name):
    acc = accuracy_on(datasets_dir, name, "ebcc")
    assert acc == pytest.approx(OURS[name], abs=1e-4), acc  # the defaults' measured figure, to the digit
    if name in PUBLISHED and name not in GAPS:
        assert acc >= PUBLISHED[name] - 0.01, (name, acc, PUBLISHED[name])


def test_dirichlet_kl_counts_a_shared_prior_row_once_per_row_and_takes_given_expected_logs():
    from crowdagg.methods.variational import dirichlet_kl, expected_log

    rng = np.random.default_rng(0)
    mu = rng.random((4, 3, 2, 3)) * 3 + 0.5  # [worker, true, subtype, observed]
    beta = np.full((3, 3), 1.0)
    np.fill_diagonal(beta, 4.0)
    by_row = sum(dirichlet_kl_one(mu[w, k, m], beta[k]) for w in range(4) for k in range(3) for m in range(2))
    assert dirichlet_kl(mu, beta[None, :, None, :], 3) == pytest.approx(by_row, rel=1e-13)
    assert dirichlet_kl(mu, beta[None, :, None, :], 3, expected=expected_log(mu, 3)) == pytest.approx(by_row,
                                                                                                       rel=1e-13)
    eta = rng.random((3, 5)) + 0.1  # a scalar prior along the rows: Dir(0.02, ..., 0.02)
    assert dirichlet_kl(eta, np.asarray(0.02), 1) == pytest.approx(sum(dirichlet_kl_one(r, np.full(5, 0.02)) for r in eta),
                                                                   rel=1e-13)


def test_a_refused_size_names_subtypes_as_the_setting_to_lower(small):
    """The memory grows with tasks × classes × subtypes: the refusal's advice names subtypes (it said "use fewer
    classes", which a user cannot do and which was not what made it large)."""
    with pytest.raises(ResourceError, match=r"grow with tasks × classes × subtypes: lower subtypes, or use mf or ds"):
        EBCC(subtypes=1000).fit(small, max_memory="1M")


@pytest.mark.parametrize(("args", "match"), [
    ("np.full((3, 2), 0.5), NAMES, 0, 0", "n_sub must be an integer >= 1"),  # ZeroDivisionError before
    ("np.full((3, 2), 0.5), NAMES, -1, 0", "n_sub must be an integer >= 1"),  # an empty split before
    ("np.full((3, 2), 0.5), NAMES[:2], 2, 0", "2 task names for 3 rows"),
    ("np.full(2, 0.5), NAMES, 2, 0", "must be a 2-D array"),
    ("np.full((3, 2), 0.5), NAMES, 2, -1", "seed must be an integer"),
    ("np.full((3, 2), 0.5), NAMES, 2, 'x'", "seed must be an integer"),
])
def test_subtype_split_refuses_odd_arguments_with_crowdagg_errors(args, match):
    from crowdagg.errors import CrowdaggError

    env = {"np": np, "NAMES": np.array(["a", "b", "c"], dtype=object), "subtype_split": subtype_split}
    with pytest.raises(CrowdaggError, match=match):
        eval(f"subtype_split({args})", env)
    split = eval("subtype_split(np.full((3, 2), 0.5), NAMES, 4, 0)", env)
    np.testing.assert_allclose(split.sum(axis=2), 0.5)
