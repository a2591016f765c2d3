"""GLAD's kernels against a slow reference written from the model, and the gradient against finite differences."""

from __future__ import annotations

import math

import numpy as np
import pytest

from crowdagg.core import threads
from crowdagg.errors import DataError
from crowdagg.kernels import glad as kernels
from crowdagg.kernels.glad import GladWorkspace


def crowd(rng, n_tasks=60, n_workers=9, k=3, per_task=4, empty=(5,)):
    """Answers sorted by task (some tasks without answers), parameters spread over both signs."""
    counts = np.full(n_tasks, per_task)
    counts[list(empty)] = 0
    task_ptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    worker = np.concatenate([rng.choice(n_workers, size=c, replace=False) for c in counts]).astype(np.int32)
    label = rng.integers(0, k, size=len(worker)).astype(np.int32)
    alpha = rng.normal(0.8, 1.5, n_workers)
    log_beta = rng.normal(0.3, 0.8, n_tasks)
    prior = rng.dirichlet(np.ones(k))
    return task_ptr, worker, label, alpha, log_beta, np.log(prior)


def log_lik(y, c, z, k):
    """log P(answer y | class c) under GLAD, computed the plain way."""
    right, wrong = 1.0 / (1.0 + math.exp(-z)), 1.0 / (1.0 + math.exp(z))  # σ(z) and 1 - σ(z) = σ(-z)
    return math.log(right) if y == c else math.log(wrong) - (math.log(k - 1) if k > 1 else 0.0)


def slow_e_step(task_ptr, worker, label, alpha, log_beta, log_prior, k, clamp):
    n = len(task_ptr) - 1
    post, ll = np.zeros((n, k)), 0.0
    for t in range(n):
        score = np.array(log_prior, dtype=float)
        for e in range(task_ptr[t], task_ptr[t + 1]):
            z = alpha[worker[e]] * math.exp(log_beta[t])
            score += [log_lik(label[e], c, z, k) for c in range(k)]
        if clamp[t] >= 0:
            post[t, clamp[t]] = 1.0
            ll += score[clamp[t]]
        else:
            m = score.max()
            post[t] = np.exp(score - m) / np.exp(score - m).sum()
            ll += m + math.log(np.exp(score - m).sum())
    return post, ll


def slow_objective(task_ptr, worker, label, alpha, log_beta, post, k):
    """Σ_tasks Σ_c post[t, c] Σ_answers log P(y | c): the expected complete-data log-likelihood, over classes."""
    f = 0.0
    for t in range(len(task_ptr) - 1):
        for e in range(task_ptr[t], task_ptr[t + 1]):
            z = alpha[worker[e]] * math.exp(log_beta[t])
            f += sum(post[t, c] * log_lik(label[e], c, z, k) for c in range(k))
    return f


@pytest.mark.parametrize("k", [2, 3, 5])
def test_e_step_matches_the_slow_reference(rng, k):
    task_ptr, worker, label, alpha, log_beta, log_prior = crowd(rng, k=k)
    clamp = np.full(len(task_ptr) - 1, -1)
    clamp[[2, 5, 9]] = [1, 0, k - 1]  # task 5 has no answers: clamped all the same
    ws = GladWorkspace(task_ptr, worker, label, len(alpha), k)
    ll = ws.e_step(alpha, log_beta, log_prior, clamp)
    post, want = slow_e_step(task_ptr, worker, label, alpha, log_beta, log_prior, k, clamp)
    np.testing.assert_allclose(ws.post, post, rtol=1e-12, atol=1e-15)
    assert ll == pytest.approx(want, rel=1e-10)
    task = np.repeat(np.arange(len(task_ptr) - 1), np.diff(task_ptr))
    np.testing.assert_array_equal(ws.q, ws.post[task, label])
    # A task without answers and no gold gets the prior.
    ws.e_step(alpha, log_beta, log_prior)
    np.testing.assert_allclose(ws.post[5], np.exp(log_prior), rtol=1e-12)


@pytest.mark.parametrize("k", [2, 4])
def test_objective_matches_the_slow_reference_and_its_gradient_finite_differences(rng, k):
    task_ptr, worker, label, alpha, log_beta, log_prior = crowd(rng, k=k)
    ws = GladWorkspace(task_ptr, worker, label, len(alpha), k)
    ws.e_step(alpha + 0.3, log_beta - 0.2, log_prior)  # posteriors of other parameters than those scored
    post = ws.post.copy()
    f, g_alpha, g_log_beta = ws.objective(alpha, log_beta)
    assert f == pytest.approx(slow_objective(task_ptr, worker, label, alpha, log_beta, post, k), rel=1e-10)
    eps = 1e-6
    for j in range(len(alpha)):
        step = np.zeros_like(alpha)
        step[j] = eps
        fd = (ws.objective(alpha + step, log_beta)[0] - ws.objective(alpha - step, log_beta)[0]) / (2 * eps)
        assert g_alpha[j] == pytest.approx(fd, rel=1e-6, abs=1e-7)
    for t in range(0, len(log_beta), 7):
        step = np.zeros_like(log_beta)
        step[t] = eps
        fd = (ws.objective(alpha, log_beta + step)[0] - ws.objective(alpha, log_beta - step)[0]) / (2 * eps)
        assert g_log_beta[t] == pytest.approx(fd, rel=1e-6, abs=1e-7)
    assert g_log_beta[5] == 0.0  # a task without answers: no likelihood term


def test_curvature_is_minus_the_second_derivative(rng):
    task_ptr, worker, label, alpha, log_beta, log_prior = crowd(rng)
    ws = GladWorkspace(task_ptr, worker, label, len(alpha), 3)
    ws.e_step(alpha, log_beta, log_prior)
    h = ws.curvature(alpha, log_beta)
    eps = 1e-4
    for j in range(len(alpha)):
        step = np.zeros_like(alpha)
        step[j] = eps
        second = (ws.objective(alpha + step, log_beta)[1][j] - ws.objective(alpha - step, log_beta)[1][j]) / (2 * eps)
        assert h[j] == pytest.approx(-second, rel=1e-6)
    assert (h > 0).all()
    # Per task: the Fisher information of log β, Σ (αβ)² σ(1 - σ) (the Gauss--Newton part of -∂²f/∂b²).
    h_alpha, h_task = ws.curvatures(alpha, log_beta)
    np.testing.assert_array_equal(h_alpha, h)
    z = alpha[worker] * np.exp(np.repeat(log_beta, np.diff(task_ptr)))
    s = 1.0 / (1.0 + np.exp(-z))
    want = np.bincount(np.repeat(np.arange(len(log_beta)), np.diff(task_ptr)), weights=z * z * s * (1 - s),
                       minlength=len(log_beta))
    np.testing.assert_allclose(h_task, want, rtol=1e-12)


def test_extreme_parameters_stay_finite(rng):
    """|αβ| in the thousands: log σ and log(1 - σ) without overflow, posteriors still distributions."""
    task_ptr, worker, label, alpha, log_beta, log_prior = crowd(rng, k=2)
    alpha = np.where(np.arange(len(alpha)) % 2, 900.0, -900.0)
    ws = GladWorkspace(task_ptr, worker, label, len(alpha), 2)
    ll = ws.e_step(alpha, log_beta + 3.0, log_prior)
    assert np.isfinite(ll) and np.isfinite(ws.post).all()
    np.testing.assert_allclose(ws.post.sum(axis=1), 1.0)
    f, ga, gb = ws.objective(alpha, log_beta + 3.0)
    assert np.isfinite(f) and np.isfinite(ga).all() and np.isfinite(gb).all()


def test_one_class_has_no_wrong_answers(rng):
    task_ptr, worker, _, alpha, log_beta, _ = crowd(rng, k=1)
    label = np.zeros(len(worker), dtype=np.int32)
    ws = GladWorkspace(task_ptr, worker, label, len(alpha), 1)
    ll = ws.e_step(alpha, log_beta, np.zeros(1))
    np.testing.assert_array_equal(ws.post, 1.0)
    f, ga, _ = ws.objective(alpha, log_beta)
    z = alpha[worker] * np.exp(np.repeat(log_beta, np.diff(task_ptr)))
    assert ll == pytest.approx(-np.logaddexp(0, -z).sum()) and f == pytest.approx(ll)
    assert np.isfinite(ga).all()


def test_results_do_not_depend_on_the_thread_count(rng, monkeypatch):
    """Many blocks (small blocks forced), 1 and 2 threads: the same bits."""
    monkeypatch.setattr("crowdagg.kernels.schedule._ANSWERS_PER_BLOCK", 50)
    task_ptr, worker, label, alpha, log_beta, log_prior = crowd(rng, n_tasks=400, k=3)
    out = []
    for n in (1, 2):
        with threads.use_threads(n):
            ws = GladWorkspace(task_ptr, worker, label, len(alpha), 3)
            assert ws.n_blocks > 4
            ll = ws.e_step(alpha, log_beta, log_prior)
            f, ga, gb = ws.objective(alpha, log_beta)
            out.append((ll, ws.post.copy(), f, ga, gb, ws.curvature(alpha, log_beta)))
    for a, b in zip(*out):
        np.testing.assert_array_equal(a, b)


def test_bad_arrays_are_refused_not_read_out_of_bounds(rng):
    task_ptr, worker, label, alpha, log_beta, log_prior = crowd(rng)
    with pytest.raises(DataError, match="worker"):
        GladWorkspace(task_ptr, worker, label, 3, 3)  # worker codes up to 8
    with pytest.raises(DataError, match="label"):
        GladWorkspace(task_ptr, worker, label, len(alpha), 2)
    with pytest.raises(DataError, match="task_ptr"):
        GladWorkspace(task_ptr[:-1], worker, label, len(alpha), 3)
    ws = GladWorkspace(task_ptr, worker, label, len(alpha), 3)
    with pytest.raises(DataError, match="alpha has 8 entries, not 9"):
        ws.objective(alpha[:-1], log_beta)
    with pytest.raises(DataError, match="log_beta"):
        ws.e_step(alpha, log_beta[:3], log_prior)
    with pytest.raises(DataError, match="clamp holds a class outside -1 .. 2"):
        ws.e_step(alpha, log_beta, log_prior, np.full(len(log_beta), 3))
    with pytest.raises(DataError, match="q has"):
        ws.objective(alpha, log_beta, np.zeros(4))
    with pytest.raises(DataError, match="must hold numbers"):
        ws.objective(np.array(["a"] * len(alpha)), log_beta)


def test_kernels_are_cached_and_release_the_gil():
    for k in (kernels._e_step_blocks, kernels._objective_blocks, kernels._curvature_blocks):
        assert k.targetoptions.get("nogil") and k._cache is not None
