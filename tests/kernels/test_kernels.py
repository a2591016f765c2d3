"""The numba kernels agree with slow reference implementations."""

from __future__ import annotations

import numpy as np
import pytest

from crowdagg.data.annotations import AnnotationSet
from crowdagg.kernels import group_order, vote_counts, worker_agreement
from crowdagg.methods.api import aggregate

from .. import reference


def random_crowd(rng, n_tasks=60, n_workers=12, n_classes=3, per_task=4):
    task = np.repeat(np.arange(n_tasks), per_task)
    worker = np.concatenate([rng.choice(n_workers, per_task, replace=False) for _ in range(n_tasks)])
    truth = rng.integers(0, n_classes, n_tasks)
    correct = rng.random(task.size) < 0.7
    label = np.where(correct, truth[task], rng.integers(0, n_classes, task.size))
    perm = rng.permutation(task.size)
    return task[perm], worker[perm], label[perm]


def test_group_order_is_a_stable_counting_sort(rng):
    keys = rng.integers(0, 7, 500).astype(np.int32)
    order, ptr = group_order(keys, 9)
    np.testing.assert_array_equal(order, np.argsort(keys, kind="stable"))
    np.testing.assert_array_equal(ptr, np.concatenate([[0], np.cumsum(np.bincount(keys, minlength=9))]))


def test_worker_agreement_counts_a_repeated_answer_once(rng):
    # answers in random order, with repeats: the same answer again, and the same worker with another label
    t, w, y = random_crowd(rng)  # 240 answers
    again = rng.integers(0, 240, 60)
    other = rng.integers(0, 240, 20)
    t = np.concatenate([t, t[again], t[other]])
    w = np.concatenate([w, w[again], w[other]])
    y = np.concatenate([y, y[again], (y[other] + 1) % 3])
    perm = rng.permutation(t.size)
    t, w, y = t[perm], w[perm], y[perm]
    n_tasks, n_workers = int(t.max()) + 1, int(w.max()) + 1
    label_of_task = rng.integers(0, 3, n_tasks)
    right, total = worker_agreement(t, w, y, label_of_task, n_tasks, n_workers)
    # slow twin: crowd-kit's get_accuracy -- drop repeated (task, worker, label) rows, then count per worker
    distinct = set(zip(t.tolist(), w.tolist(), y.tolist()))
    expected_right, expected_total = np.zeros(n_workers), np.zeros(n_workers)
    for ti, wi, yi in distinct:
        expected_total[wi] += 1
        expected_right[wi] += yi == label_of_task[ti]
    np.testing.assert_array_equal(total, expected_total)
    np.testing.assert_array_equal(right, expected_right)
    assert total.sum() < t.size  # the repeats were there to drop


def test_vote_counts_match_loop(rng):
    t, w, y = random_crowd(rng)
    data = AnnotationSet.from_codes(t, w, y)
    weights = rng.normal(size=data.n_workers)
    expected = np.zeros((data.n_tasks, data.n_classes))
    expected_w = np.zeros_like(expected)
    for ti, wi, yi in zip(t, w, y):
        expected[ti, yi] += 1
        expected_w[ti, yi] += weights[wi]
    np.testing.assert_array_equal(vote_counts(data.task, data.worker, data.label, data.n_tasks, 3), expected)
    np.testing.assert_allclose(vote_counts(data.task, data.worker, data.label, data.n_tasks, 3, weights), expected_w)


@pytest.mark.parametrize("method,one_coin", [("ds", False), ("onecoin", True)])
@pytest.mark.parametrize("smoothing", [0.5, 3.0])
def test_em_matches_reference(rng, method, one_coin, smoothing):
    t, w, y = random_crowd(rng)
    # a worker with no answers and a task with no answers ride along
    data = AnnotationSet.from_codes(t, w, y, n_tasks=61, n_workers=13)
    ref_post, ref_prior, ref_conf, ref_trace = reference.dawid_skene(
        data.task, data.worker, data.label, data.n_tasks, data.n_workers, data.n_classes,
        n_iter=7, smoothing=smoothing, one_coin=one_coin,
    )
    res = aggregate(data, method, max_iter=7, tol=0, smoothing=smoothing)
    assert res.n_iter == 7
    np.testing.assert_allclose(res.posteriors, ref_post, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(res.prior, ref_prior, rtol=1e-9)
    np.testing.assert_allclose(res.confusion, ref_conf, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(res.log_likelihood, ref_trace, rtol=1e-10)


# --------------------------------------------------------------------------- public kernels check what they index by
KERNEL_CASES = {
    "sort_by_task": ("sort_by_task(np.array([0, 5]), np.array([0, 0]), np.array([0, 0]), 2)",
                     "task code 5 at position 1 is out of range for 2 tasks"),
    "sort_by_task lengths": ("sort_by_task(np.array([0, 1]), np.array([0]), np.array([0, 0]), 2)",
                             "equal lengths, got task 2, worker 1, label 2"),
    "group_order": ("group_order(np.array([0, 3, 9]), 4)", "key code 9 at position 2 is out of range for 4 groups"),
    "group_order float": ("group_order(np.array([0.0, np.nan]), 4)", "key codes must be integers"),
    "repeated_answers worker": ("repeated_answers(np.array([0, 2]), np.array([0, 10**6]), 3)",
                                "worker code 1000000 at position 1 is out of range for 3 workers"),
    "repeated_answers ptr": ("repeated_answers(np.array([0, 5]), np.array([0, 1]), 3)",
                             "task_ptr must run from 0 to 2"),
    "repeated_answers ptr order": ("repeated_answers(np.array([0, 2, 1, 2]), np.array([0, 1]), 3)",
                                   "task_ptr must be non-decreasing; position 2 holds 1 after 2"),
    "vote_counts": ("vote_counts(np.array([0, 1]), np.array([0, 0]), np.array([0, 4]), 2, 2)",
                    "label code 4 at position 1 is out of range for 2 classes"),
    "vote_counts weights": ("vote_counts(np.array([0, 1]), np.array([0, 3]), np.array([0, 1]), 2, 2, np.ones(2))",
                            "worker code 3 at position 1 is out of range for 2 workers"),
    # worker_agreement indexed its per-worker tables unchecked: these three crashed the interpreter (SIGSEGV).
    "worker_agreement worker": ("worker_agreement(np.array([0, 0]), np.array([0, 10**9]), np.array([0, 1]), "
                                "np.array([0]), 1, 2)", "worker code 1000000000 at position 1 is out of range for 2"),
    "worker_agreement task": ("worker_agreement(np.array([0, 10**9]), np.array([0, 1]), np.array([0, 1]), "
                              "np.array([0]), 1, 2)", "task code 1000000000 at position 1 is out of range for 1 tasks"),
    "worker_agreement negative": ("worker_agreement(np.array([0, -5]), np.array([0, 1]), np.array([0, 1]), "
                                  "np.array([0]), 1, 2)", "task code -5 at position 1 is out of range"),
    "worker_agreement labels": ("worker_agreement(np.array([0, 1]), np.array([0, 1]), np.array([0, 1]), "
                                "np.array([0]), 2, 2)", "label_of_task holds 1 labels for 2 tasks"),
    # Wrong sizes and types: library errors, not numpy's or numba's.
    "group_order size": ("group_order(np.array([], np.int64), -5)", "n_groups must be an integer >= 0, got -5"),
    "vote_counts size": ("vote_counts(np.array([0]), np.array([0]), np.array([0]), 1.5, 2)",
                         "n_tasks must be an integer >= 0, got 1.5"),
    "vote_counts weights 2-D": ("vote_counts(np.array([0]), np.array([0]), np.array([0]), 1, 2, np.ones((2, 2)))",
                                "worker_weight must be a 1-D array"),
    "repeated_answers keep": ("repeated_answers(np.array([0, 2]), np.array([0, 1]), 2, keep='nope')",
                              "keep must be first or last, got 'nope'"),
    "scan_records text": ("scan_records('a,b', ',', True, 2)", "data must be bytes"),
    "scan_records sep": ("scan_records(b'a,b', ',,', True, 2)", "sep must be one ASCII character"),
}


def test_public_kernels_refuse_bad_codes_never_crash():
    from tests.crashes import refusals

    found = refusals("from crowdagg.kernels import *", {name: call for name, (call, _) in KERNEL_CASES.items()})
    for name, (_, message) in KERNEL_CASES.items():
        assert message in found[name], (name, found[name])


def test_public_kernels_take_big_endian_and_strided_codes():
    """Non-native byte order (arrays read from a file) and strided views give the native arrays' results."""
    from crowdagg.kernels import group_order, repeated_answers, sort_by_task, vote_counts, worker_agreement

    task, worker, label = np.array([2, 0, 1, 0]), np.array([0, 1, 1, 0]), np.array([1, 0, 1, 1])
    big = [a.astype(">i8") for a in (task, worker, label)]
    for got, want in zip(sort_by_task(*big, 3), sort_by_task(task, worker, label, 3)):
        np.testing.assert_array_equal(got, want)
    for got, want in zip(group_order(big[0], 3), group_order(task, 3)):
        np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(vote_counts(*big, 3, 2), [[1, 1], [0, 1], [0, 1]])
    strided = np.array([[2, 9], [0, 9], [1, 9], [0, 9]])[:, 0]
    np.testing.assert_array_equal(vote_counts(strided, worker, label, 3, 2), [[1, 1], [0, 1], [0, 1]])
    right, total = worker_agreement(*big, np.array([1, 1, 0], ">i4"), 3, 2)
    np.testing.assert_array_equal(right, [1, 1])  # worker 0: task 2 wrong, task 0 right; worker 1: 0 wrong, 1 right
    np.testing.assert_array_equal(total, [2, 2])
    n, mask = repeated_answers(np.array([0, 2], ">i8"), np.array([1, 1], ">i4"), 2)
    assert n == 1 and mask.tolist() == [False, True]


def test_check_codes_reports_sortedness_and_maxima():
    from crowdagg.kernels.validate import check_codes

    assert check_codes(np.array([0, 0, 2]), np.array([4, 1, 0]), np.array([1, 0, 1], np.int8)) == (True, 2, 4, 1)
    assert check_codes(np.array([1, 0]), np.array([0, 0]), np.array([0, 0]), 2, 1, 1).task_sorted is False
    assert check_codes(np.zeros(0, np.int64), [], []) == (True, -1, -1, -1)
