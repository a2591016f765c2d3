"""MACE's fused E-step kernel against a plain per-answer reference and against crowd-kit 1.4.2's own E-step."""

from __future__ import annotations

import numpy as np
import pytest

from crowdagg.data.annotations import AnnotationSet
from crowdagg.engine import LocalEngine
from crowdagg.errors import DataError
from crowdagg.kernels.mace import e_step


def crowd(seed=0, n_tasks=40, n_workers=6, k=3):
    """Random answers (1 to 5 a task, repeats of a worker allowed) and positive, sub-normalised weights."""
    rng = np.random.default_rng(seed)
    per = rng.integers(1, 6, n_tasks)
    task = np.repeat(np.arange(n_tasks), per)
    worker = rng.integers(0, n_workers, task.size)
    label = rng.integers(0, k, task.size)
    data = AnnotationSet.from_codes(task, worker, label, n_tasks=n_tasks + 1, n_workers=n_workers, n_classes=k)
    weights = (rng.uniform(0.05, 0.9, n_workers), rng.uniform(0.05, 0.9, n_workers),
               rng.dirichlet(np.ones(k), n_workers) * 0.8)
    return data, weights


def reference(data, spamming, competence, theta, clamp):
    """The E-step written plainly over the answers × classes: P(a | k) = s θ[a] + c [a = k], the product per task
    (the true class uniform), a spam answer's posterior Σ_k q(k) s θ[a] / P(a | k)."""
    k = data.n_classes
    task = np.repeat(np.arange(data.n_tasks), np.diff(data.task_ptr))
    w, a = data.worker, data.label
    lik = spamming[w, None] * theta[w, a][:, None] + competence[w, None] * (a[:, None] == np.arange(k))  # (L, K)
    logp = np.full((data.n_tasks, k), -np.log(k))
    np.add.at(logp, task, np.log(lik))
    ll_rows = np.logaddexp.reduce(logp, axis=1)
    post = np.exp(logp - ll_rows[:, None])
    gold = clamp >= 0
    ll_rows[gold] = logp[gold, clamp[gold]]
    post[gold] = np.eye(k)[clamp[gold]]
    spam_share = (post[task] * (spamming[w] * theta[w, a])[:, None] / lik).sum(axis=1)
    know_share = post[task, a] * competence[w] / lik[np.arange(a.size), a]
    spam = np.zeros((data.n_workers, k))
    np.add.at(spam, (w, a), spam_share)
    know = np.bincount(w, weights=know_share, minlength=data.n_workers)
    return post, ll_rows.sum(), spam, know


@pytest.mark.quick
def test_the_kernel_is_the_plain_e_step_with_and_without_gold():
    data, weights = crowd()
    engine = LocalEngine(data)
    clamp = np.full(data.n_tasks, -1)
    for gold in (False, True):
        if gold:
            clamp[[0, 3, 7]] = [2, 0, 1]
        got = e_step(engine, *weights, clamp)
        post, ll, spam, know = reference(data, *weights, clamp)
        np.testing.assert_allclose(got.post, post, rtol=1e-12, atol=1e-15)
        assert got.loglik == pytest.approx(ll, rel=1e-12)
        np.testing.assert_allclose(got.spam, spam, rtol=1e-11)
        np.testing.assert_allclose(got.know, know, rtol=1e-11)
        # every answer is spam or competent: the counts add up to the answers
        np.testing.assert_allclose(got.spam.sum(axis=1) + got.know, data.answers_per_worker, rtol=1e-12)
    np.testing.assert_allclose(got.post[-1], 1 / 3)  # the task without answers: the uniform prior


def test_the_kernel_is_exact_when_competence_dwarfs_the_spam_weight():
    """log(sθ + c) − log(sθ) in logs (logaddexp): no overflow at sθ = 1e-300; still the plain E-step."""
    data, (s, c, theta) = crowd(seed=1)
    s = np.full_like(s, 1e-300)
    got = e_step(LocalEngine(data), s, c, theta)
    post, ll, spam, know = reference(data, s, c, theta, np.full(data.n_tasks, -1))
    assert np.isfinite(got.post).all() and got.loglik == pytest.approx(ll, rel=1e-12)
    np.testing.assert_allclose(got.post, post, rtol=1e-9, atol=1e-300)
    np.testing.assert_allclose(got.know, know, rtol=1e-9)
    np.testing.assert_allclose(got.spam, spam, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize(("which", "value", "message"), [
    (0, 0.0, "spamming holds 0.0: MACE's weights must be positive"),
    (1, np.nan, "competence holds nan"),
    (2, -1.0, "theta holds -1.0"),
])
def test_weights_that_are_not_positive_are_refused(which, value, message):
    data, weights = crowd()
    bad = [np.array(x, dtype=float) for x in weights]
    bad[which].reshape(-1)[2] = value
    with pytest.raises(DataError, match=message):
        e_step(LocalEngine(data), *bad)


def test_shapes_and_clamps_that_do_not_fit_are_refused():
    data, (s, c, theta) = crowd()
    with pytest.raises(DataError, match=r"theta has shape \(6, 2\), the data needs \(6, 3\)"):
        e_step(LocalEngine(data), s, c, theta[:, :2])
    with pytest.raises(DataError, match="clamp holds a class outside -1 .. 2"):
        e_step(LocalEngine(data), s, c, theta, np.full(data.n_tasks, 3))


def test_one_e_step_is_crowdkits_where_its_orders_agree():
    """crowd-kit 1.4.2's ``MACE._e_step`` at the same weights: the same posteriors, log marginal likelihood (its
    1e-8 per task aside), spam counts and competent counts -- on answers whose workers and labels appear in sorted
    order, where its M-step's ``groupby`` rows are its own codes (see tests/methods/mace for where they are not)."""
    import pandas as pd
    from crowdkit.aggregation import MACE as CrowdKitMACE

    rng = np.random.default_rng(3)
    n_tasks, n_workers, k = 60, 5, 3
    task = np.repeat(np.arange(n_tasks), 4)
    worker = np.concatenate([rng.choice(n_workers, 4, replace=False) for _ in range(n_tasks)])
    label = rng.integers(0, k, task.size)
    worker[:n_workers], label[:k] = np.arange(n_workers), np.arange(k)  # first appearances in sorted order
    frame = pd.DataFrame({"task": task, "worker": worker, "label": label})
    ck = CrowdKitMACE()
    ck.spamming_ = rng.uniform(0.1, 0.9, (n_workers, 2))
    ck.thetas_ = rng.dirichlet(np.ones(k), n_workers)
    tasks, task_names = pd.factorize(frame["task"])
    workers, worker_names = pd.factorize(frame["worker"])
    labels, label_names = pd.factorize(frame["label"])
    ll, gold, strategy, knowing = ck._e_step(frame.copy(), task_names, worker_names, label_names, tasks, workers,
                                            labels)
    data = AnnotationSet.from_codes(task, worker, label, n_tasks=n_tasks, n_workers=n_workers, n_classes=k)
    ours = e_step(LocalEngine(data), ck.spamming_[:, 0], ck.spamming_[:, 1], ck.thetas_)
    np.testing.assert_allclose(ours.post, gold.to_numpy() / gold.to_numpy().sum(axis=1, keepdims=True), rtol=1e-10)
    # crowd-kit adds 1e-8 to each task's marginal before its log: ours is the log of its marginals themselves
    assert ours.loglik == pytest.approx(np.log(gold.to_numpy().sum(axis=1)).sum(), rel=1e-12)
    assert ll > ours.loglik
    np.testing.assert_allclose(ours.spam, strategy.to_numpy(), rtol=1e-10)
    np.testing.assert_allclose(ours.know, knowing["knowing_expected_count_1"].to_numpy(), rtol=1e-10)
    np.testing.assert_allclose(ours.spam.sum(axis=1), knowing["knowing_expected_count_0"].to_numpy(), rtol=1e-10)


@pytest.mark.quick
def test_tables_and_block_params_refuse_what_the_kernel_cannot_read():
    """``tables`` and ``EStepParams`` are public: mismatched rows were numpy's broadcast ValueError, a 1-D theta
    made (n_workers, n_workers) tables without a word, and NaN tables a NaN log-evidence.  DataErrors now; the
    tables themselves are unchanged (lists are converted)."""
    from crowdagg.kernels.mace import EStepParams, e_step_block, tables

    w, k = 4, 3
    ls, lc, lt = np.log(np.full(w, 0.4)), np.log(np.full(w, 0.6)), np.log(np.full((w, k), 1 / k))
    with pytest.raises(DataError, match="have 2, 4 and 4 rows"):
        tables(ls[:2], lc, lt)
    with pytest.raises(DataError, match="log_theta must be a 2-D array"):
        tables(ls, lc, ls)
    base, boost, share = tables(list(ls), list(lc), lt.tolist())
    np.testing.assert_allclose(base, np.log(0.4 / k))
    np.testing.assert_allclose(boost, np.log(0.4 / k + 0.6) - np.log(0.4 / k))
    np.testing.assert_allclose(share, 0.6 / (0.4 / k + 0.6))
    with pytest.raises(DataError, match="log_boost holds NaN"):
        EStepParams(base, np.full_like(boost, np.nan), share, np.full(2, -1))
    data = AnnotationSet.from_codes(np.array([0, 0, 1]), np.array([0, 1, 2]), np.array([0, 1, 2]),
                                    n_tasks=2, n_workers=w, n_classes=k)
    (ll, spam, know), _ = LocalEngine(data).map_reduce(e_step_block, EStepParams(base, boost, share, np.full(2, -1)))
    assert np.isfinite(ll) and spam.sum() + know.sum() == pytest.approx(3.0)
