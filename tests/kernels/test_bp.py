"""BP kernels: the worker and task passes against a slow pure-Python reference; the split heavy worker; threads."""

from __future__ import annotations

import itertools
import math

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
    kb._worker_block(rows, data.worker[rows], data.label[rows], tmsg, old, pts.tht, pts.logw, pts.wlin, pts.chunk,
                     pts.cut, span, False, False, 0.0, False, whole)
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


def _own_points(data, k, owned, seed=3):
    """Shared prior draws (30) and draws of their own for the workers ``owned``, from proposals at soft counts."""
    shared = kb.sample_points(2.0, 1.0, k, 30, seed=seed)
    owner = np.full(data.n_workers, -1)
    owner[owned] = np.arange(len(owned))
    rng = np.random.default_rng(seed)
    counts = rng.random((len(owned), k, k)) * 20
    return kb.proposal_points(shared, 2.0, 1.0, counts, owner, seed), owner


@pytest.mark.parametrize("k", [2, 3])
def test_a_worker_with_its_own_points_gets_the_messages_of_its_points_alone(k):
    """Stacked point sets (importance sampling, :func:`proposal_points`): each worker's messages, posterior mean
    and effective number are those of its own set as if every worker read it; the others read the shared set."""
    rng = np.random.default_rng(40 + k)
    data = _crowd(rng, 60, 6, k, 2, heavy=1)  # worker 0: 60 answers (the per-point log path), the others ~24
    pts, owner = _own_points(data, k, [0, 3])
    engine = LocalEngine(data)
    tmsg = rng.dirichlet(np.ones(k), data.n_answers)
    old = np.full((data.n_answers, k), 1.0 / k)
    p = kb.WorkerPass(tmsg, old, pts, 0.0, False, kb.spans(engine.worker_part))
    got, _ = kb.worker_pass(engine, p)
    means, ess = kb.worker_posteriors(engine, p)
    got = got[data.worker_position]
    for w in range(data.n_workers):
        s = owner[w]
        theta, logw = (pts.theta, pts.logw) if s < 0 else (pts.own_theta[s], pts.own_logw[s])
        alone = kb.Points(theta, logw)
        edges = data.worker == w
        want = ref.worker_messages(data, tmsg, old, alone.theta, alone.logw)
        np.testing.assert_allclose(got[edges], want[edges], rtol=0, atol=1e-12)
        p_alone = kb.WorkerPass(tmsg, old, alone, 0.0, False, kb.spans(engine.worker_part))
        m_alone, e_alone = kb.worker_posteriors(engine, p_alone)
        np.testing.assert_allclose(means[w], m_alone[w], rtol=0, atol=1e-12)
        assert ess[w] == pytest.approx(e_alone[w], rel=1e-12)


def test_a_split_worker_with_its_own_points_combines_to_its_points_alone(heavy_crowd):
    data = heavy_crowd
    engine = LocalEngine(data)
    pts, _ = _own_points(data, 2, [0, 5])
    assert kb.spans(engine.worker_part).any
    rng = np.random.default_rng(11)
    tmsg = rng.dirichlet([0.5, 0.5], data.n_answers)
    old = np.full((data.n_answers, 2), 0.5)
    got, _ = kb.worker_pass(engine, kb.WorkerPass(tmsg, old, pts, 0.0, False, kb.spans(engine.worker_part)))
    alone = kb.Points(pts.own_theta[0], pts.own_logw[0])
    want, _ = kb.worker_pass(engine, kb.WorkerPass(tmsg, old, alone, 0.0, False, kb.spans(engine.worker_part)))
    rows = slice(data.worker_ptr[0], data.worker_ptr[1])
    np.testing.assert_allclose(got[rows], want[rows], rtol=0, atol=1e-12)
    shared, _ = kb.worker_pass(engine, kb.WorkerPass(tmsg, old, kb.Points(pts.theta, pts.logw), 0.0, False,
                                                     kb.spans(engine.worker_part)))
    others = np.ones(data.n_answers, bool)
    others[rows] = False
    others[data.worker_ptr[5]:data.worker_ptr[6]] = False
    np.testing.assert_array_equal(got[others], shared[others])  # the others' on the shared points: the same bits
    p = kb.WorkerPass(tmsg, old, pts, 0.0, False, kb.spans(engine.worker_part))
    means, ess = kb.worker_posteriors(engine, p)
    m_alone, e_alone = kb.worker_posteriors(engine, kb.WorkerPass(tmsg, old, alone, 0.0, False,
                                                                  kb.spans(engine.worker_part)))
    np.testing.assert_allclose(means[0], m_alone[0], rtol=0, atol=1e-12)
    assert ess[0] == pytest.approx(e_alone[0], rel=1e-9)


def _exact_message(tmsg, labels, i, alpha, beta, k):
    r"""The worker→task message of answer ``i`` with the confusion integrated out exactly: the Dirichlet rows'
    moments :math:`E[\prod_{r,o} \theta[r, o]^{c_{ro}}] = \prod_r B(\text{prior}_r + c_r) / B(\text{prior}_r)`
    summed over every labelling of the worker's other answers, each weighted by its task→worker messages."""
    from scipy.special import gammaln

    prior = np.full((k, k), beta)
    np.fill_diagonal(prior, alpha)

    def log_moment(c):
        conc = prior + c
        return float((gammaln(conc).sum(axis=1) - gammaln(conc.sum(axis=1))).sum())

    others = [j for j in range(len(labels)) if j != i]
    m = np.zeros(k)
    for z in range(k):
        for zs in itertools.product(range(k), repeat=len(others)):
            c = np.zeros((k, k))
            c[z, labels[i]] += 1
            w = 1.0
            for j, zj in zip(others, zs):
                c[zj, labels[j]] += 1
                w *= tmsg[j, zj]
            m[z] += w * math.exp(log_moment(c))
    return m / m.sum()


@pytest.mark.parametrize("k", [2, 3])
def test_the_importance_sampled_message_is_the_exact_integral(k):
    """One worker with confident task messages: its own draws near its posterior, importance-weighted
    (log p - log q), give its messages to within 0.01 of the exact integral over the Dirichlet prior (enumerated
    over the labellings of its other answers) and rest on nearly all of the draws; the prior draws on under half."""
    rng = np.random.default_rng(50 + k)
    n = 9 if k == 2 else 6
    truth = rng.integers(0, k, n)
    labels = np.where(rng.random(n) < 0.85, truth, rng.integers(0, k, n))
    tmsg = np.full((n, k), 0.02 / (k - 1))
    tmsg[np.arange(n), truth] = 0.98
    data = AnnotationSet.from_codes(np.arange(n), np.zeros(n, dtype=np.int64), labels, n_tasks=n, n_workers=1,
                                    n_classes=k)
    engine = LocalEngine(data)
    shared = kb.sample_points(2.0, 1.0, k, 4000, seed=1)
    counts = np.zeros((1, k, k))
    np.add.at(counts[0], (truth, labels), 1.0)
    own = kb.proposal_points(shared, 2.0, 1.0, counts, np.zeros(1, dtype=np.int64), seed=1)
    want = np.array([_exact_message(tmsg, labels, i, 2.0, 1.0, k) for i in range(n)])
    old = np.full((n, k), 1.0 / k)
    results = {}
    for name, pts in (("prior", shared), ("own", own)):
        p = kb.WorkerPass(tmsg, old, pts, 0.0, False, kb.spans(engine.worker_part))
        got, _ = kb.worker_pass(engine, p)
        results[name] = (np.abs(got[data.worker_position] - want).max(), kb.worker_posteriors(engine, p)[1][0])
    err, ess = results["own"]
    assert err < 0.01 and ess > 0.9 * 4000  # (measured: errors 3e-3, 2.8e-3; 3916 and 3998 effective draws)
    assert results["prior"][1] < ess / 2  # (1664 and 907: the prior draws already thin out at 6-9 answers)


def test_own_points_are_drawn_per_worker_from_the_seed():
    """A worker's own draws depend on the seed and the worker alone (not on which or how many others draw)."""
    shared = kb.sample_points(2.0, 1.0, 3, 20, seed=0)
    counts = np.arange(2 * 9, dtype=float).reshape(2, 3, 3)
    a = kb.proposal_points(shared, 2.0, 1.0, counts, np.array([-1, 0, 1]), seed=7)
    b = kb.proposal_points(shared, 2.0, 1.0, counts[1:], np.array([-1, -1, 0]), seed=7)
    np.testing.assert_array_equal(a.own_theta[1], b.own_theta[0])
    np.testing.assert_array_equal(a.own_logw[1], b.own_logw[0])
    c = kb.proposal_points(shared, 2.0, 1.0, counts, np.array([-1, 0, 1]), seed=8)
    assert not np.array_equal(a.own_theta, c.own_theta)
    with pytest.raises(DataError, match="owner holds a set outside"):
        kb.Points(shared.theta, shared.logw, a.own_theta, a.own_logw, np.array([0, 2, -1]))
    with pytest.raises(DataError, match="go together"):
        kb.Points(shared.theta, shared.logw, a.own_theta)
    with pytest.raises(DataError, match="counts must be"):
        kb.proposal_points(shared, 2.0, 1.0, -counts - 5, np.array([-1, 0, 1]), seed=7)


@pytest.mark.quick
@pytest.mark.parametrize("k", [2, 3])
def test_a_per_task_prior_is_the_task_factor(k):
    """The task pass's ``log_prior`` (deepBP's classifier as h_i): a one-hot prior gives the gold clamp's bits, a
    uniform one (any constant row) today's bits without a prior, and any other multiplies the beliefs and the
    task→worker messages by h_i before their normalisation."""
    rng = np.random.default_rng(31 + k)
    data = _crowd(rng, 30, 9, k, 3)
    engine = LocalEngine(data)
    wmsg = rng.dirichlet(np.ones(k), data.n_answers)
    free = np.full(data.n_tasks, -1)
    plain = kb.task_pass(engine, kb.TaskPass(wmsg, data.worker_position, free))

    constant = np.repeat(rng.normal(size=(data.n_tasks, 1)) * 5, k, axis=1)
    uniform = kb.task_pass(engine, kb.TaskPass(wmsg, data.worker_position, free, constant))
    for got, want in zip(uniform, plain):
        np.testing.assert_array_equal(got, want)

    clamp = np.full(data.n_tasks, -1)
    clamp[[2, 7, 11]] = [1, 0, k - 1]
    one_hot = np.zeros((data.n_tasks, k))
    for t in (2, 7, 11):
        one_hot[t] = -np.inf
        one_hot[t, clamp[t]] = 0.0
    clamped = kb.task_pass(engine, kb.TaskPass(wmsg, data.worker_position, clamp))
    with np.errstate(divide="ignore"):
        by_prior = kb.task_pass(engine, kb.TaskPass(wmsg, data.worker_position, free, one_hot))
    for got, want in zip(by_prior, clamped):
        np.testing.assert_array_equal(got, want)

    log_h = np.log(rng.dirichlet(np.ones(k), data.n_tasks))
    tmsg, belief = kb.task_pass(engine, kb.TaskPass(wmsg, data.worker_position, free, log_h))
    h = np.exp(log_h)
    want_belief = h * plain[1]
    want_tmsg = h[data.task] * plain[0]
    np.testing.assert_allclose(belief, want_belief / want_belief.sum(1, keepdims=True), rtol=0, atol=1e-12)
    np.testing.assert_allclose(tmsg, want_tmsg / want_tmsg.sum(1, keepdims=True), rtol=0, atol=1e-12)


@pytest.mark.quick
def test_with_own_is_the_points_built_anew():
    """Replacing a few own sets (deepBP drawing some workers again) gives the fields of the points built from the
    replaced sets, bit for bit -- the kernels' stacked layouts, the weights, the floor and the chunk -- and the
    messages of a worker pass over them are the same; the original points are left as they were."""
    k, g = 3, 20
    shared = kb.sample_points(2.0, 1.0, k, g, seed=0)
    counts = np.arange(3 * k * k, dtype=float).reshape(3, k, k)
    owner = np.array([-1, 0, 1, 2])
    pts = kb.proposal_points(shared, 2.0, 1.0, counts, owner, seed=7)
    before = pts.own_theta.copy()
    sub = np.array([-1, -1, 0, -1])  # worker 2 (its set 1) drawn again, from a far sparser Dirichlet
    theta, logw = kb.proposal_draws(shared, 0.05, 0.05, np.zeros((1, k, k)), sub, seed=9)
    fast = pts.with_own(np.array([1]), theta, logw)
    own_theta, own_logw = pts.own_theta.copy(), pts.own_logw.copy()
    own_theta[1], own_logw[1] = theta[0], logw[0]
    built = kb.Points(shared.theta, shared.logw, own_theta, own_logw, owner)
    for name in ("theta", "logw", "own_theta", "own_logw", "owner", "tht", "theta_all", "tht_all", "logw_all",
                 "wlin", "wlin_all", "wset"):
        np.testing.assert_array_equal(getattr(fast, name), getattr(built, name), err_msg=name)
        assert getattr(fast, name).flags.c_contiguous, name
    assert (fast.log_floor, fast.chunk, fast.cut) == (built.log_floor, built.chunk, built.cut)
    assert fast.log_floor > pts.log_floor  # (the sparse draws hold smaller entries: the floor moved)
    np.testing.assert_array_equal(pts.own_theta, before)
    data = AnnotationSet.from_codes(np.arange(12) % 5, np.arange(12) % 4, np.arange(12) % k, n_tasks=5,
                                    n_workers=4, n_classes=k)
    engine = LocalEngine(data)
    tmsg = np.random.default_rng(1).dirichlet(np.ones(k), data.n_answers)[np.asarray(data.worker_position)]
    passes = []
    for points in (fast, built):
        p = kb.WorkerPass(np.ascontiguousarray(tmsg), np.zeros((data.n_answers, k)), points, 0.0, False,
                          kb.spans(engine.worker_part))
        passes.append(kb.worker_pass(engine, p)[0])
    np.testing.assert_array_equal(passes[0], passes[1])
    with pytest.raises(DataError, match="distinct"):
        pts.with_own(np.array([3]), theta, logw)
    with pytest.raises(DataError, match="with_own takes"):
        pts.with_own(np.array([0, 1]), theta, logw)
    with pytest.raises(DataError, match="positive and finite"):
        pts.with_own(np.array([0]), -theta, logw)
    with pytest.raises(DataError, match="has none|have none"):
        shared.with_own(np.array([0]), theta, logw)


@pytest.mark.quick
def test_proposal_draws_of_a_sparse_prior_are_finite_where_every_gamma_of_a_row_underflows():
    """Prior (1e-3, 1e-3) and no counts (the -p prior floor): a Gamma(1e-3) draw is 0.0 one time in nine, so some
    rows have every entry 0 and were 0/0 -- NaN draws, then "own_theta must be positive" out of deepBP and bp.
    Those rows are drawn in logs (Gamma(a) = Gamma(a + 1) U^(1/a)): finite, on the simplex, finite weights."""
    shared = kb.sample_points(1e-3, 1e-3, 3, 200, seed=0)
    owner = np.array([0, -1, 1])
    theta, logw = kb.proposal_draws(shared, 1e-3, 1e-3, np.zeros((2, 3, 3)), owner, seed=0)
    assert np.isfinite(theta).all() and theta.min() >= 0.99 * kb.THETA_FLOOR
    np.testing.assert_allclose(theta.sum(axis=3), 1.0, rtol=0, atol=1e-12)
    assert np.isfinite(logw).all()
    kb.Points(shared.theta, shared.logw, theta, logw, owner)  # (refused before: NaN draws)
    # a sparse Dirichlet's draws sit near a vertex: the largest entry of most rows near 1
    assert np.median(theta.max(axis=3)) > 0.99
    # where no row underflows the draws keep their bits: worker u's gammas from the seed (seed, u), normalised
    conc = np.array([[3.0, 2.0, 2.0], [2.0, 3.0, 2.0], [2.0, 2.0, 3.0]])
    dense, _ = kb.proposal_draws(shared, 2.0, 1.0, np.ones((2, 3, 3)), owner, seed=0)
    for u, p in ((0, 0), (2, 1)):
        g = np.random.default_rng([0, u]).standard_gamma(np.broadcast_to(conc, (200, 3, 3)))
        want = np.maximum(g / g.sum(axis=2, keepdims=True), kb.THETA_FLOOR)
        np.testing.assert_array_equal(dense[p], want / want.sum(axis=2, keepdims=True))


@pytest.mark.quick
@pytest.mark.parametrize("owner, n_sets", [([0, 2], 3), ([0, 0], 1), ([[0]], 1), ([-5], 0), ([0.5], 1)])
def test_proposal_draws_refuse_an_owner_that_leaves_a_set_unwritten_or_writes_one_twice(owner, n_sets):
    """owner [0, 2] left set 1 as np.empty returned it (garbage draws, accepted by Points when positive); [0, 0]
    drew set 0 twice, the last worker's kept; a 2-D owner was a bare TypeError."""
    shared = kb.sample_points(2.0, 1.0, 3, 5, seed=0)
    with pytest.raises(DataError, match="owner"):
        kb.proposal_draws(shared, 2.0, 1.0, np.ones((n_sets, 3, 3)), np.array(owner), seed=0)


@pytest.mark.quick
def test_proposal_draws_refuse_a_negative_seed():
    shared = kb.sample_points(2.0, 1.0, 3, 5, seed=0)
    with pytest.raises(DataError, match="seed"):
        kb.proposal_draws(shared, 2.0, 1.0, np.ones((1, 3, 3)), np.array([0]), seed=-1)


@pytest.mark.quick
def test_points_and_with_own_refuse_float_or_text_sets_instead_of_truncating_them():
    """An owner of 0.5 or with_own's sets of 0.7 were cast to set 0; text theta a bare ValueError."""
    theta, logw = np.full((2, 2, 2), 0.5), np.zeros(2)
    with pytest.raises(DataError, match="owner codes must be integers"):
        kb.Points(theta, logw, np.full((1, 2, 2, 2), 0.5), np.zeros((1, 2)), np.array([0.5]))
    pts = kb.Points(theta, logw, np.full((2, 2, 2, 2), 0.5), np.zeros((2, 2)), np.array([0, 1]))
    with pytest.raises(DataError, match="sets codes must be integers"):
        pts.with_own(np.array([0.7]), np.full((1, 2, 2, 2), 0.5), np.zeros((1, 2)))
    with pytest.raises(DataError, match="with_own's theta"):
        pts.with_own(np.array([0]), np.full((1, 2, 2, 2), "x"), np.zeros((1, 2)))
    with pytest.raises(DataError, match="with_own's logw"):
        pts.with_own(np.array([0]), np.full((1, 2, 2, 2), 0.5), "x")
