"""The numeric methods' kernels against slow, obvious references (numpy per task)."""

from __future__ import annotations

import numpy as np
import pytest

from crowdagg.errors import DataError
from crowdagg.kernels.numeric import task_means, task_medians, task_stds, weighted_means, worker_losses


def ragged(rng, n_tasks=120, n_workers=9):
    lengths = rng.integers(0, 8, n_tasks)  # tasks without answers, odd and even counts
    ptr = np.concatenate([[0], np.cumsum(lengths)])
    value = np.round(rng.normal(0, 5, ptr[-1]), 1)
    worker = rng.integers(0, n_workers, ptr[-1]).astype(np.int32)
    return ptr, worker, value, lengths


def per_task(ptr, fn, empty):
    return np.array([fn(ptr[t], ptr[t + 1]) if ptr[t + 1] > ptr[t] else empty for t in range(len(ptr) - 1)])


@pytest.mark.quick
def test_per_task_statistics_are_numpys(rng):
    ptr, _, value, lengths = ragged(rng)
    np.testing.assert_allclose(task_means(ptr, value), per_task(ptr, lambda a, b: np.mean(value[a:b]), np.nan),
                               rtol=1e-13)
    np.testing.assert_array_equal(task_medians(ptr, value),
                                  per_task(ptr, lambda a, b: np.median(value[a:b]), np.nan))
    want = per_task(ptr, lambda a, b: np.std(value[a:b], ddof=1) if b - a > 1 else 0.0, 0.0)
    np.testing.assert_allclose(task_stds(ptr, value), want, rtol=1e-12, atol=1e-12)
    assert np.isnan(task_means(ptr, value)[lengths == 0]).all()


def test_the_median_of_a_task_with_many_answers_is_numpys_too(rng):
    value = rng.normal(0, 1, 1000)
    ptr = np.array([0, 33, 33, 100, 1000])  # beyond the insertion sort's size, and below it
    np.testing.assert_array_equal(task_medians(ptr, value)[[0, 2, 3]],
                                  [np.median(value[:33]), np.median(value[33:100]), np.median(value[100:])])


def test_weighted_means_and_worker_losses_are_the_sums(rng):
    ptr, worker, value, lengths = ragged(rng)
    weight = rng.random(9)
    weight[3] = 0.0
    got = weighted_means(ptr, worker, value, weight)
    want = per_task(ptr, lambda a, b: (np.sum(weight[worker[a:b]] * value[a:b]) / np.sum(weight[worker[a:b]])
                                       if np.sum(weight[worker[a:b]]) > 0 else np.mean(value[a:b])), np.nan)
    np.testing.assert_allclose(got, want, rtol=1e-12)
    truth = rng.normal(0, 5, len(lengths))
    norm = rng.random(len(lengths))
    norm[::7] = 0.0  # left out
    task = np.repeat(np.arange(len(lengths)), lengths)
    contrib = np.where(norm[task] > 0, (value - truth[task]) ** 2 / np.where(norm[task] > 0, norm[task], 1), 0)
    np.testing.assert_allclose(worker_losses(ptr, worker, value, truth, norm, 9),
                               np.bincount(worker, contrib, minlength=9), rtol=1e-12)


def test_bad_offsets_and_codes_are_data_errors():
    with pytest.raises(DataError, match="task_ptr must run from 0 to 3"):
        task_means(np.array([0, 2]), np.ones(3))
    with pytest.raises(DataError, match="worker"):
        weighted_means(np.array([0, 2]), np.array([0, 5]), np.ones(2), np.ones(3))
    with pytest.raises(DataError, match="value must hold numbers"):
        task_medians(np.array([0, 1]), np.array(["a"]))


@pytest.mark.quick
def test_arrays_that_do_not_match_the_answers_are_errors_not_reads_past_their_end():
    """Hostile input: a worker array shorter than the answers, or per-task arrays shorter than the tasks, were
    read past their end by the kernels (worker_losses crashed the interpreter with a bus error); NaN values,
    negative weights and a bad worker count went through or came back as numpy's own errors."""
    from crowdagg.errors import ResourceError, UsageError

    ptr, worker, value = np.array([0, 1, 2]), np.array([0, 1]), np.ones(2)
    with pytest.raises(DataError, match=r"worker must hold one code per answer \(2\)"):
        worker_losses(ptr, worker[:1], value, np.ones(2), np.ones(2), 2)
    with pytest.raises(DataError, match=r"worker must hold one code per answer \(2\)"):
        weighted_means(ptr, worker[:1], value, np.ones(2))
    for truth, norm, name in ((np.ones(1), np.ones(2), "truth"), (np.ones(2), np.ones(1), "norm")):
        with pytest.raises(DataError, match=rf"{name} must hold one number per task \(2\), got 1"):
            worker_losses(ptr, worker, value, truth, norm, 2)
    with pytest.raises(DataError, match="truth at position 1 is nan"):
        worker_losses(ptr, worker, value, np.array([0.0, np.nan]), np.ones(2), 2)
    for kernel in (task_means, task_medians, task_stds):
        with pytest.raises(DataError, match="value at position 0 is nan"):
            kernel(np.array([0, 3]), np.array([np.nan, 1.0, 2.0]))
    with pytest.raises(DataError, match="weight at position 1 is -1.0"):
        weighted_means(ptr, worker, value, np.array([1.0, -1.0]))
    with pytest.raises(DataError, match="weight at position 0 is inf"):
        weighted_means(ptr, worker, value, np.array([np.inf, 1.0]))
    for n in (-1, 2.5, "2"):
        with pytest.raises(UsageError, match="n_workers must be an integer >= 0"):
            worker_losses(ptr, worker, value, np.ones(2), np.ones(2), n)
    with pytest.raises(ResourceError, match="the losses of 10,000,000,000,000 workers"):
        worker_losses(ptr, worker, value, np.ones(2), np.ones(2), 10**13)
    # what still fits is computed: plain lists, and a worker count above the codes
    np.testing.assert_array_equal(worker_losses([0, 1, 2], [0, 1], [1.0, 3.0], [2.0, 2.0], [1.0, 1.0], 3),
                                  [1.0, 1.0, 0.0])
