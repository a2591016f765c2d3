"""GLAD's kernels against a slow reference written from the model, and the gradient against finite differences."""

from __future__ import annotations

import math

import numpy as np
import pytest

from crowdagg.core import threads
from crowdagg.data.annotations import AnnotationSet
from crowdagg.engine import LocalEngine
from crowdagg.errors import DataError
from crowdagg.kernels import glad as kernels


class Workspace:
    """The kernels' public functions on the local engine over these answers (what GladWorkspace held)."""

    def __init__(self, task_ptr, worker, label, n_workers, k):
        task = np.repeat(np.arange(len(task_ptr) - 1), np.diff(task_ptr))
        data = AnnotationSet.from_codes(task, worker, label, n_tasks=len(task_ptr) - 1, n_workers=n_workers,
                                        n_classes=k)
        self.engine = LocalEngine(data)
        self.n_blocks = self.engine.n_blocks
        self.posteriors = None

    def e_step(self, alpha, log_beta, log_prior, clamp=None):
        self.posteriors = kernels.e_step(self.engine, alpha, log_beta, log_prior, clamp)
        return self.posteriors.loglik

    @property
    def post(self):
        return self.posteriors.post

    @property
    def q(self):
        return self.posteriors.q

    def objective(self, alpha, log_beta, q=None):
        return kernels.objective(self.engine, alpha, log_beta, self.posteriors if q is None else q)

    def curvature(self, alpha, log_beta):
        return kernels.curvatures(self.engine, alpha, log_beta)[0]

    def curvatures(self, alpha, log_beta):
        return kernels.curvatures(self.engine, alpha, log_beta)

    def set_posteriors(self, post):
        self.posteriors = kernels.answer_posteriors(self.engine, post)


GladWorkspace = Workspace


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
    """Many blocks (small blocks forced), 1, 2 and 3 threads: the same bits."""
    monkeypatch.setattr("crowdagg.engine.grid.MIN_BLOCK_ANSWERS", 50)
    monkeypatch.setattr("crowdagg.engine.grid.ACCUMULATOR_FACTOR", 1)  # blocks of max(min, W·K²)
    task_ptr, worker, label, alpha, log_beta, log_prior = crowd(rng, n_tasks=400, k=3)
    out = []
    for n in (1, 2, 3):
        with threads.use_threads(n):
            ws = GladWorkspace(task_ptr, worker, label, len(alpha), 3)
            assert ws.n_blocks > 4
            ll = ws.e_step(alpha, log_beta, log_prior)
            f, ga, gb = ws.objective(alpha, log_beta)
            out.append((ll, ws.post.copy(), ws.q.copy(), ws.posteriors.class_total, f, ga, gb,
                        *ws.curvatures(alpha, log_beta)))
    for other in out[1:]:
        for a, b in zip(out[0], other):
            assert np.array_equal(a, b)


def test_many_blocks_agree_with_one_block(rng, monkeypatch):
    """The per-block kernels over many blocks give the one-block results up to the order of the sums."""
    task_ptr, worker, label, alpha, log_beta, log_prior = crowd(rng, n_tasks=400, k=3)
    one = GladWorkspace(task_ptr, worker, label, len(alpha), 3)
    assert one.n_blocks == 1
    monkeypatch.setattr("crowdagg.engine.grid.MIN_BLOCK_ANSWERS", 50)
    monkeypatch.setattr("crowdagg.engine.grid.ACCUMULATOR_FACTOR", 1)  # blocks of max(min, W·K²)
    many = GladWorkspace(task_ptr, worker, label, len(alpha), 3)
    assert many.n_blocks > 4
    for ws in (one, many):
        ws.e_step(alpha, log_beta, log_prior)
    np.testing.assert_array_equal(one.post, many.post)  # per task: no sum across blocks
    np.testing.assert_array_equal(one.q, many.q)
    np.testing.assert_allclose(one.posteriors.loglik, many.posteriors.loglik, rtol=1e-13)
    f1, ga1, gb1 = one.objective(alpha, log_beta)
    f2, ga2, gb2 = many.objective(alpha, log_beta)
    np.testing.assert_array_equal(gb1, gb2)
    np.testing.assert_allclose(f1, f2, rtol=1e-13)
    np.testing.assert_allclose(ga1, ga2, rtol=1e-12)


def test_bad_arrays_are_refused_not_read_out_of_bounds(rng):
    task_ptr, worker, label, alpha, log_beta, log_prior = crowd(rng)
    ws = GladWorkspace(task_ptr, worker, label, len(alpha), 3)
    with pytest.raises(DataError, match="alpha has 8 entries, not 9"):
        ws.objective(alpha[:-1], log_beta)
    with pytest.raises(DataError, match="log_beta"):
        ws.e_step(alpha, log_beta[:3], log_prior)
    with pytest.raises(DataError, match="log_prior has 2 entries, not 3"):
        ws.e_step(alpha, log_beta, log_prior[:2])
    with pytest.raises(DataError, match="clamp holds a class outside -1 .. 2"):
        ws.e_step(alpha, log_beta, log_prior, np.full(len(log_beta), 3))
    with pytest.raises(DataError, match="clamp has 3 entries"):
        ws.e_step(alpha, log_beta, log_prior, np.full(3, -1))
    with pytest.raises(DataError, match="q has"):
        ws.objective(alpha, log_beta, np.zeros(4))
    with pytest.raises(DataError, match="must hold numbers"):
        ws.objective(np.array(["a"] * len(alpha)), log_beta)
    with pytest.raises(DataError, match=r"post has shape \(3, 3\)"):
        ws.set_posteriors(np.full((3, 3), 1 / 3))


def test_block_functions_are_module_level_and_their_kernels_cached_and_without_the_gil():
    """Block functions are shipped by reference (a distributed engine pickles them): module-level, picklable."""
    import pickle

    for fn in (kernels.e_step_block, kernels.objective_block, kernels.curvature_block, kernels.posterior_q_block):
        assert pickle.loads(pickle.dumps(fn)) is fn
    for k in (kernels._e_step_block, kernels._objective_block, kernels._curvature_block, kernels._answer_q_block):
        assert k.targetoptions.get("nogil") and k._cache is not None


def test_parameters_that_are_not_finite_are_refused_not_turned_into_nan_posteriors(rng):
    task_ptr, worker, label, alpha, log_beta, log_prior = crowd(rng)
    ws = GladWorkspace(task_ptr, worker, label, len(alpha), 3)
    bad = alpha.copy()
    bad[4] = np.nan
    with pytest.raises(DataError, match=r"^alpha\[4\] is nan: the parameters must be finite"):
        ws.e_step(bad, log_beta, log_prior)
    bad = log_beta.copy()
    bad[7] = np.inf
    with pytest.raises(DataError, match=r"^log_beta\[7\] is inf: the parameters must be finite"):
        ws.objective(alpha, bad)
    with pytest.raises(DataError, match=r"^log_beta\[7\] is inf"):
        ws.curvatures(alpha, bad)
    with pytest.raises(DataError, match=r"^log_prior\[1\] is nan"):
        ws.e_step(alpha, log_beta, [0.0, np.nan, 0.0])
    with pytest.raises(DataError, match=r"^log_prior has no finite entry"):
        ws.e_step(alpha, log_beta, [-np.inf] * 3)
    q = np.full(len(worker), 0.5)
    q[2] = 1.5
    with pytest.raises(DataError, match=r"^q\[2\] is 1\.5: each answer's posterior must lie in \[0, 1\]"):
        ws.objective(alpha, log_beta, q)
    # A class the prior rules out (log 0) is a prior, not an error.
    ws.e_step(alpha, log_beta, [0.0, -np.inf, 0.0])
    assert np.isfinite(ws.post).all() and (ws.post[:, 1] == 0).all()
    q[2] = 1.0 + 2.0**-52  # an E-step's rounding: taken
    ws.objective(alpha, log_beta, q)


def test_given_posteriors_that_are_not_probabilities_are_refused(rng):
    """(set_posteriors took NaN or negative posteriors: the next objective was NaN.)"""
    task_ptr, worker, label, alpha, log_beta, _ = crowd(rng)
    ws = GladWorkspace(task_ptr, worker, label, len(alpha), 3)
    post = np.full((len(log_beta), 3), 1 / 3)
    post[4, 1] = np.nan
    with pytest.raises(DataError, match=r"^post\[4, 1\] is nan: posteriors must lie in \[0, 1\]"):
        ws.set_posteriors(post)
    post[4, 1] = -0.2
    with pytest.raises(DataError, match=r"^post\[4, 1\] is -0\.2"):
        ws.set_posteriors(post)
    post[4, 1] = 1 / 3
    ws.set_posteriors(post)
    np.testing.assert_array_equal(ws.q, 1 / 3)


# The block functions are public (a distributed engine ships them): each checks its partition and parameters.
GLAD_BLOCK_CASES = {
    # a clamp beyond K: the kernel wrote post[row, g] past the block's table (a segfault)
    "clamp class": ("e_step_block(good, 0, EStepParams(np.zeros(2), np.zeros(1), np.zeros(2), np.array([9])), True)",
                    "clamp holds a class outside -1 .. 1"),
    "label code": ("e_step_block(bad_label, 0, EStepParams(np.zeros(2), np.zeros(1), np.zeros(2), np.array([-1])), "
                   "True)", "label code 7 at position 1"),
    "short alpha": ("e_step_block(good, 0, EStepParams(np.zeros(1), np.zeros(1), np.zeros(2), np.array([-1])), True)",
                    "per-worker parameter has shape (1,)"),
    "short beta": ("curvature_block(good, 0, (np.zeros(2), np.zeros(0)), True)", "per-task parameter has shape (0,)"),
    "prior": ("e_step_block(good, 0, EStepParams(np.zeros(2), np.zeros(1), np.zeros(3), np.array([-1])), True)",
              "log_prior has shape (3,)"),
    "block": ("curvature_block(good, 4, (np.zeros(2), np.zeros(1)), True)", "block 4 is not one of"),
    "given post": ("posterior_q_block(good, 0, np.zeros((1, 5)), True)", "post has shape (1, 5)"),
    "foreign q": ("objective_block(good, 0, ObjectiveParams(np.zeros(2), np.zeros(1), [(None, np.zeros(1))], 2), "
                  "True)", "the posteriors of block 0 hold (1,) answers, not the block's 2"),
    "no q": ("objective_block(good, 0, ObjectiveParams(np.zeros(2), np.zeros(1), [], 2), True)",
             "the posteriors of block 0 hold ()"),
}


def test_block_functions_refuse_bad_parts_and_parameters_never_a_crash():
    from tests.crashes import assert_block_refusals

    assert_block_refusals("crowdagg.kernels.glad", GLAD_BLOCK_CASES)


def test_an_objective_on_another_engines_posteriors_is_refused(rng):
    data = AnnotationSet.from_codes([0, 0, 0, 1, 1, 2, 2], [0, 1, 2, 0, 1, 1, 2], [1, 1, 0, 0, 1, 1, 1])
    other = AnnotationSet.from_codes([0], [0], [0], n_classes=2)
    post = kernels.e_step(LocalEngine(other), np.zeros(1), np.zeros(1), np.zeros(2))
    with pytest.raises(DataError, match="from an E-step on other data"):
        kernels.objective(LocalEngine(data), np.zeros(3), np.zeros(3), post)


def test_the_public_functions_need_an_engine():
    from crowdagg.errors import UsageError

    with pytest.raises(UsageError, match="run on an engine over the data"):
        kernels.e_step(None, np.zeros(3), np.zeros(3), np.zeros(2))
