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
