"""BP kernels: the worker and task passes against a slow pure-Python reference; the split heavy worker; threads."""

from __future__ import annotations

import numpy as np
import pytest

from crowdagg.core import threads
from crowdagg.data.annotations import AnnotationSet
from crowdagg.engine import LocalEngine
from crowdagg.errors import DataError
from crowdagg.kernels import bp as kb
from tests.methods.graph import bp_reference as ref


def _crowd(rng, n_tasks, n_workers, k, per_task, heavy=0):
    """Random answers (``per_task`` distinct workers a task), worker 0 answering every task when ``heavy``."""
    task = np.repeat(np.arange(n_tasks), per_task)
    worker = np.concatenate([rng.choice(np.arange(1, n_workers), per_task, replace=False) for _ in range(n_tasks)])
    if heavy:
        task = np.concatenate([task, np.arange(n_tasks)])
        worker = np.concatenate([worker, np.zeros(n_tasks, dtype=np.int64)])
    truth = rng.integers(0, k, n_tasks)
    label = np.where(rng.random(task.size) < 0.7, truth[task], rng.integers(0, k, task.size))
    return AnnotationSet.from_codes(task, worker, label, n_tasks=n_tasks, n_workers=n_workers, n_classes=k)


def _points(model, k):
    return kb.grid_points(2.0, 1.0, k, 16) if model == "grid" else kb.sample_points(1.5, 0.7, k, 30, seed=4)


@pytest.mark.parametrize("k", [2, 3])
@pytest.mark.parametrize("model", ["grid", "samples"])
@pytest.mark.parametrize("damping", [0.0, 0.4])
def test_worker_and_task_passes_equal_the_reference(k, model, damping):
    rng = np.random.default_rng(k * 10 + len(model))
    data = _crowd(rng, 30, 9, k, 3)
    pts = _points(model, k)
    engine = LocalEngine(data)
    tmsg = rng.dirichlet(np.ones(k), data.n_answers)
    old_task_order = rng.dirichlet(np.ones(k), data.n_answers)
    old = old_task_order[data.worker_order]
    p = kb.WorkerPass(tmsg, old, pts, damping, True, kb.spans(engine.worker_part))
    got, residual = kb.worker_pass(engine, p)
    want = ref.worker_messages(data, tmsg, old_task_order, pts.theta, pts.logw, damping, True)
    np.testing.assert_allclose(got[data.worker_position], want, rtol=0, atol=1e-12)
    assert residual == pytest.approx(np.abs(want - old_task_order).max(), abs=1e-12)

    clamp = np.full(data.n_tasks, -1)
    clamp[[2, 7]] = [1, 0]
    tm, belief = kb.task_pass(engine, kb.TaskPass(got, data.worker_position, clamp))
    tm_want, belief_want = ref.task_messages(data, want, clamp)
    np.testing.assert_allclose(tm, tm_want, rtol=0, atol=1e-12)
    np.testing.assert_allclose(belief, belief_want, rtol=0, atol=1e-12)


def test_long_workers_take_the_log_products_and_skip_far_points():
    """A worker with more answers than a chunk goes through the per-point logs (and skips points far below its
    best): the same messages as the reference."""
    rng = np.random.default_rng(5)
    data = _crowd(rng, 60, 6, 2, 2, heavy=1)  # worker 0: 60 answers
    pts = kb.grid_points(2.0, 1.0, 2, 64)
    assert data.answers_per_worker[0] > pts.chunk
    engine = LocalEngine(data)
    tmsg = rng.dirichlet([0.3, 0.3], data.n_answers)  # confident messages: the heavy worker's points concentrate
    old = np.full((data.n_answers, 2), 0.5)
    got, _ = kb.worker_pass(engine, kb.WorkerPass(tmsg, old, pts, 0.0, False, kb.spans(engine.worker_part)))
    want = ref.worker_messages(data, tmsg, old, pts.theta, pts.logw)
    np.testing.assert_allclose(got[data.worker_position], want, rtol=0, atol=1e-12)


def test_worker_means_equal_the_posterior_over_points():
    rng = np.random.default_rng(6)
    data = _crowd(rng, 25, 7, 3, 3)
    pts = _points("samples", 3)
    engine = LocalEngine(data)
    tmsg = rng.dirichlet(np.ones(3), data.n_answers)
    means = kb.worker_means(engine, kb.WorkerPass(tmsg, tmsg, pts, 0.0, False, kb.spans(engine.worker_part)))
    for w in range(data.n_workers):
        edges = np.flatnonzero(data.worker == w)
        lp = pts.logw + np.array([sum(np.log(tmsg[j] @ pts.theta[g][:, data.label[j]]) for j in edges)
                                  for g in range(pts.n_points)])
        c = np.exp(lp - lp.max())
        want = np.einsum("g,gij->ij", c / c.sum(), pts.theta) if edges.size else np.zeros((3, 3))
        np.testing.assert_allclose(means[w], want, rtol=0, atol=1e-12)


@pytest.fixture(scope="module")
def heavy_crowd():
    """About 330k answers: ~5 worker blocks, worker 0 (an extreme spammer answering every task at random) spans
    at least two of them."""
    rng = np.random.default_rng(7)
    n = 110_000
    task = np.repeat(np.arange(n), 2)
    worker = rng.integers(1, 300, task.size)
    truth = rng.integers(0, 2, n)
    label = np.where(rng.random(task.size) < 0.8, truth[task], 1 - truth[task])
    task = np.concatenate([task, np.arange(n)])
    worker = np.concatenate([worker, np.zeros(n, dtype=np.int64)])
    label = np.concatenate([label, rng.integers(0, 2, n)])
    return AnnotationSet.from_codes(task, worker, label, n_tasks=n, n_workers=300, n_classes=2)


def test_a_split_worker_combines_to_the_unsplit_computation(heavy_crowd):
    data = heavy_crowd
    engine = LocalEngine(data)
    wp = engine.worker_part
    sp = kb.spans(wp)
    heavy = [b for b in range(wp.n_blocks) if wp.workers_of(b)[0] == 0]
    assert len(heavy) >= 2 and all(sp.first[b] or sp.last[b] for b in heavy)
    assert not sp.starts_before[heavy[0]] and all(sp.starts_before[b] for b in heavy[1:])
    rng = np.random.default_rng(8)
    tmsg = rng.dirichlet([2, 2], data.n_answers)
    old = np.full((data.n_answers, 2), 0.5)
    pts = kb.grid_points(2.0, 1.0, 2, 32)
    p = kb.WorkerPass(tmsg, old, pts, 0.0, False, sp)
    got, _ = kb.worker_pass(engine, p)
    # the unsplit computation: every answer in one block, no crossing segment
    rows = data.worker_order
    whole = np.empty_like(old)
    span = np.zeros((2, pts.n_points))
    kb._worker_block(rows, data.worker[rows], data.label[rows], tmsg, old, pts.tht_all, pts.logw_all, pts.wlin_all,
                     pts.wset, pts.chunk, pts.cut, span, False, False, 0.0, False, whole)
    np.testing.assert_allclose(got, whole, rtol=1e-11, atol=1e-13)
    # the combined totals are the heavy worker's whole log-product
    totals = kb.span_totals(engine, p)
    one = np.zeros(pts.n_points)
    lo, hi = data.worker_ptr[0], data.worker_ptr[1]
    kb._log_products(lo, hi, rows, data.label[rows], tmsg, pts.tht, pts.chunk, one)
    for b in heavy:
        np.testing.assert_allclose(totals[b, 0 if sp.first[b] else 1], one, rtol=1e-12)
    means = kb.worker_means(engine, p)
    np.testing.assert_allclose(means.sum(axis=2), 1.0, atol=1e-12)  # every worker answered; each counted once
    lp = pts.logw + one
    c = np.exp(lp - lp.max())
    np.testing.assert_allclose(means[0], np.einsum("g,gij->ij", c / c.sum(), pts.theta), atol=1e-12)


def test_thread_count_does_not_change_a_bit(heavy_crowd):
    from crowdagg.methods.api import aggregate

    got = []
    for n in (1, 2):
        with threads.use_threads(n):
            res = aggregate(heavy_crowd, "bp", max_iter=4, tol=0, grid=16, damping=0.2)
        got.append(res)
    assert np.array_equal(got[0].posteriors, got[1].posteriors)
    assert np.array_equal(got[0].confusion, got[1].confusion)


def test_points_refuse_what_the_kernels_cannot_take():
    with pytest.raises(DataError, match="positive and finite"):
        kb.Points(np.zeros((2, 2, 2)), np.zeros(2))
    with pytest.raises(DataError, match=r"\(G, K, K\)"):
        kb.Points(np.ones((2, 2, 3)), np.zeros(2))
    sparse = kb.grid_points(0.01, 0.01, 2, 64)  # mass piled at both ends: every weight finite or -inf, never NaN
    assert not np.isnan(sparse.logw).any() and np.isfinite(sparse.theta).all()
    assert sparse.chunk * sparse.log_floor <= kb.LOG_RANGE


def test_worker_posteriors_give_each_workers_effective_number_of_points(heavy_crowd):
    """Kish's 1 / Σ p_g² of each worker's posterior weights over the points, also for a worker split over blocks."""
    for data, pts in ((_crowd(np.random.default_rng(9), 25, 7, 3, 3), _points("samples", 3)),
                      (heavy_crowd, kb.sample_points(2.0, 1.0, 2, 40, seed=2))):
        engine = LocalEngine(data)
        tmsg = np.random.default_rng(10).dirichlet(np.ones(data.n_classes), data.n_answers)
        p = kb.WorkerPass(tmsg, tmsg, pts, 0.0, False, kb.spans(engine.worker_part))
        means, ess = kb.worker_posteriors(engine, p)
        np.testing.assert_array_equal(means, kb.worker_means(engine, p))
        for w in range(min(data.n_workers, 8)):
            edges = np.flatnonzero(data.worker == w)
            lp = pts.logw.copy()
            for j in edges:
                lp += np.log(tmsg[j] @ pts.theta[:, :, data.label[j]].transpose(1, 0))
            c = np.exp(lp - lp.max())
            c = c / c.sum()
            want = 1.0 / np.sum(c[c >= np.exp(-kb.SKIP_LOG)] ** 2) if edges.size else 0.0
            assert ess[w] == pytest.approx(want, rel=1e-9)
