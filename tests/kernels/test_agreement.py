"""The agreement kernels (:mod:`crowdagg.kernels.agreement`) against slow, obvious references."""

from __future__ import annotations

import numpy as np
import pytest

from crowdagg.errors import DataError
from crowdagg.kernels.agreement import group_counts, label_posterior


def _crowd(seed: int, n_tasks: int = 60, n_workers: int = 9, k: int = 4, max_answers: int = 7):
    """Answers sorted by task, with tasks of 0 to ``max_answers`` answers (a worker may repeat a task)."""
    rng = np.random.default_rng(seed)
    size = rng.integers(0, max_answers + 1, n_tasks)
    task = np.repeat(np.arange(n_tasks), size)
    worker = rng.integers(0, n_workers, task.size)
    label = rng.integers(0, k, task.size)
    ptr = np.concatenate([[0], np.cumsum(size)])
    return ptr, task, worker, label


def _slow_counts(groups: list[np.ndarray], label: np.ndarray, k: int):
    """Per group (answers, Σ n_c², entropy) from ``np.bincount``; per class totals and pairable totals."""
    size, squares, entropy = [], [], []
    totals = np.zeros(k, np.int64)
    pairable = np.zeros(k, np.int64)
    for members in groups:
        n = np.bincount(label[members], minlength=k)
        size.append(n.sum())
        squares.append(int((n * n).sum()))
        p = n[n > 0] / n.sum() if n.sum() else np.zeros(0)
        entropy.append(float(-(p * np.log(p)).sum()) if n.sum() else np.nan)
        totals += n
        if n.sum() >= 2:
            pairable += n
    return np.array(size), np.array(squares), np.array(entropy), totals, pairable


@pytest.mark.quick
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_group_counts_by_task_and_by_worker_match_bincount(seed):
    ptr, task, worker, label = _crowd(seed)
    k = 4
    got = group_counts(ptr, label, k)
    want = _slow_counts([np.arange(ptr[t], ptr[t + 1]) for t in range(len(ptr) - 1)], label, k)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=0, atol=1e-12)
    order = np.argsort(worker, kind="stable")
    wptr = np.concatenate([[0], np.cumsum(np.bincount(worker, minlength=9))])
    got = group_counts(wptr, label, k, order=order)
    want = _slow_counts([np.flatnonzero(worker == w) for w in range(9)], label, k)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=0, atol=1e-12)


def _slow_posterior(ptr, worker, label, given, skill, k):
    """The posterior of ``given`` by the product of probabilities (crowd-kit's way), and the share agreeing."""
    share, post = [], []
    for t in range(len(ptr) - 1):
        e = np.arange(ptr[t], ptr[t + 1])
        if e.size == 0:
            share.append(np.nan)
            post.append(np.nan)
            continue
        s = skill[worker[e]]
        prob = np.array([np.prod(np.where(label[e] == c, s, (1 - s) / (k - 1))) for c in range(k)])
        share.append(np.mean(label[e] == given[t]))
        post.append(prob[given[t]] / prob.sum() if prob.sum() > 0 else 0.0)
    return np.array(share), np.array(post)


@pytest.mark.quick
@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_label_posterior_matches_the_product_of_probabilities(seed):
    ptr, task, worker, label = _crowd(seed)
    rng = np.random.default_rng(100 + seed)
    skill = rng.uniform(0.05, 0.95, 9)
    if seed >= 2:  # skills of exactly 0 and 1: factors of 0, counted apart from the logs
        skill[:3] = [0.0, 1.0, 1.0]
    given = rng.integers(0, 4, len(ptr) - 1)
    share, post = label_posterior(ptr, worker, label, given, skill, 4)
    want_share, want_post = _slow_posterior(ptr, worker, label, given, skill, 4)
    np.testing.assert_allclose(share, want_share, rtol=0, atol=1e-12)
    np.testing.assert_allclose(post, want_post, rtol=1e-10, atol=1e-12)
    assert np.isnan(post[np.diff(ptr) == 0]).all()


@pytest.mark.quick
def test_label_posterior_does_not_underflow_where_the_product_does():
    """600 answers of skill .6 on one task: the product of probabilities is 0 for every class (crowd-kit gets
    0/0 and reports 0); in logs the posterior of the majority is its true value, near 1."""
    n = 600
    label = np.array([0] * 400 + [1] * 200)
    ptr = np.array([0, n])
    share, post = label_posterior(ptr, np.arange(n), label, np.array([0]), np.full(n, 0.6), 2)
    assert share[0] == pytest.approx(400 / 600)
    # log odds of class 0 over 1: (400 − 200) log(.6/.4)
    assert post[0] == pytest.approx(1 / (1 + np.exp(-200 * np.log(1.5))))


@pytest.mark.quick
def test_label_posterior_of_an_impossible_task_is_zero_as_crowd_kit_gives():
    """Two workers of skill 1 who disagree: every class has probability 0."""
    share, post = label_posterior(np.array([0, 2]), np.array([0, 1]), np.array([0, 1]), np.array([0]),
                                  np.array([1.0, 1.0]), 3)
    assert share[0] == 0.5 and post[0] == 0.0


@pytest.mark.quick
def test_bad_codes_are_data_errors():
    with pytest.raises(DataError, match="label"):
        group_counts(np.array([0, 2]), np.array([0, 5]), 3)
    with pytest.raises(DataError, match="worker"):
        label_posterior(np.array([0, 2]), np.array([0, 4]), np.array([0, 1]), np.array([0]), np.ones(2), 2)
    with pytest.raises(DataError):
        group_counts(np.array([0, 3]), np.array([0, 1]), 2)  # offsets past the answers


def _slow_one_coin_entropy(groups: list[np.ndarray], worker, label, skill, k):
    """Per group the entropy of the normalised sum of its answers' one-coin distributions, dense."""
    out = []
    for members in groups:
        if members.size == 0:
            out.append(np.nan)
            continue
        s = skill[worker[members]][:, None]
        mass = np.where(label[members][:, None] == np.arange(k), s, (1 - s) / (k - 1)).sum(axis=0)
        p = mass[mass > 0] / mass.sum()
        out.append(float(-(p * np.log(p)).sum()))
    return np.array(out)


@pytest.mark.quick
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_one_coin_entropy_by_task_and_by_worker_matches_a_dense_sum(seed):
    from crowdagg.kernels.agreement import one_coin_entropy

    ptr, task, worker, label = _crowd(seed)
    k = 4
    skill = np.random.default_rng(seed).uniform(0, 1, 9)
    skill[:2] = [0.0, 1.0]  # the ends: classes of mass 0
    got = one_coin_entropy(ptr, worker, label, skill, k)
    want = _slow_one_coin_entropy([np.arange(ptr[t], ptr[t + 1]) for t in range(len(ptr) - 1)], worker, label,
                                  skill, k)
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-15)
    order = np.argsort(worker, kind="stable")
    wptr = np.concatenate([[0], np.cumsum(np.bincount(worker, minlength=9))])
    got = one_coin_entropy(wptr, worker, label, skill, k, order=order)
    want = _slow_one_coin_entropy([np.flatnonzero(worker == w) for w in range(9)], worker, label, skill, k)
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-15)
    # one class: all mass on it (entropy 0), none when every skill is 0
    one = one_coin_entropy(np.array([0, 2]), np.array([0, 1]), np.array([0, 0]), np.array([0.5, 0.0]), 1)
    assert one[0] == 0.0
    assert np.isnan(one_coin_entropy(np.array([0, 1]), np.array([1]), np.array([0]), np.array([0.5, 0.0]), 1)[0])
    with pytest.raises(DataError, match="worker"):
        one_coin_entropy(np.array([0, 2]), np.array([0, 4]), np.array([0, 1]), np.ones(2), 2)


@pytest.mark.quick
@pytest.mark.parametrize("skill, match", [
    (np.array([[0.8, 0.6], [0.1, 0.2]]), "1-D"),  # numba's typing error before
    (np.array(["a", "b"]), "numbers"),  # numpy's ValueError before
    (np.array([-0.5, 0.6]), "worker 0 has -0.5"),  # a posterior of 0 before, a log of a negative
    (np.array([0.8, np.nan]), "worker 1 has nan"),
    (np.array([1.5, 0.6]), r"\[0, 1\]"),
])
def test_label_posterior_refuses_skills_that_are_not_one_probability_per_worker(skill, match):
    with pytest.raises(DataError, match=match):
        label_posterior(np.array([0, 2, 4]), np.array([0, 1, 0, 1]), np.array([0, 1, 1, 1]), np.array([0, 1]),
                        skill, 2)


@pytest.mark.quick
@pytest.mark.parametrize("skill, match", [
    (np.array([[0.8], [0.6]]), "1-D"),  # numba's typing error before
    (np.array(["a", "b"]), "numbers"),  # numpy's ValueError before
    (np.array([0.8, np.nan]), "worker 1 has nan"),  # an entropy of 0 before
    (np.array([1.5, 0.6]), r"\[0, 1\]"),
])
def test_one_coin_entropy_refuses_skills_as_label_posterior_does(skill, match):
    from crowdagg.kernels.agreement import one_coin_entropy

    with pytest.raises(DataError, match=match):
        one_coin_entropy(np.array([0, 2, 4]), np.array([0, 1, 0, 1]), np.array([0, 1, 1, 1]), skill, 2)


@pytest.mark.quick
def test_one_coin_entropy_refuses_an_order_shorter_than_the_answers():
    """The kernel reads ``order`` at every position: a short one was read past its end (a segmentation fault)."""
    from crowdagg.kernels.agreement import one_coin_entropy

    with pytest.raises(DataError, match="order has 2 positions for 4 answers"):
        one_coin_entropy(np.array([0, 2, 4]), np.array([0, 1, 0, 1]), np.array([0, 1, 1, 1]), np.array([0.9, 0.8]),
                         2, order=np.array([0, 1]))
    with pytest.raises(DataError, match="order has 2 positions for 4 answers"):
        group_counts(np.array([0, 2, 4]), np.array([0, 1, 1, 1]), 2, order=np.array([0, 1]))


@pytest.mark.quick
def test_a_number_of_classes_beyond_memory_is_refused_up_front_with_its_size():
    """n_classes = 10¹² was numba's bare MemoryError ("Allocation failed") in each of the three kernels."""
    from crowdagg.errors import ResourceError
    from crowdagg.kernels.agreement import one_coin_entropy

    ptr, worker, label = np.array([0, 2]), np.array([0, 1]), np.array([0, 1])
    k = 10**12
    for call in (lambda: group_counts(ptr, label, k),
                 lambda: label_posterior(ptr, worker, label, np.array([0]), np.array([0.9, 0.8]), k),
                 lambda: one_coin_entropy(ptr, worker, label, np.array([0.9, 0.8]), k)):
        with pytest.raises(ResourceError, match=r"1,000,000,000,000 classes × 32 B of scratch"):
            call()
