"""deepMF: the clipping, the E- and M-step against a slow numpy reference, c = 1/K as the aggregator mf, learning."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from scipy.special import digamma  # noqa: E402

from crowdagg.errors import UsageError  # noqa: E402
from crowdagg.learning.methods.graph import deepmf as deepmf_module  # noqa: E402
from crowdagg.learning.methods.graph.deepmf import DeepMF, clip  # noqa: E402
from crowdagg.methods.registry import get_method, get_trainer  # noqa: E402
from crowdagg.simulate import simulate  # noqa: E402
from crowdagg.simulate.features import gaussian_features  # noqa: E402


def crowd(seed: int = 3, n_tasks: int = 300, k: int = 3, per_task: int = 3, n_workers: int = 12,
          separation: float = 4.0):
    """A Dawid-Skene crowd (accuracies 0.55-0.85) with Gaussian features of the true classes."""
    sim = simulate(n_tasks=n_tasks, n_workers=n_workers, n_classes=k, per_task=per_task, model="ds",
                   skill=(0.55, 0.85), seed=seed)
    data = sim.to_annotations()
    tasks = np.array([int(t[1:]) for t in data.task_names])
    x = gaussian_features(sim.truth, k, dim=8, separation=separation, seed=seed)
    return data, x[tasks], sim.truth[tasks]


def clip_reference(p: np.ndarray, c: float) -> np.ndarray:
    """The paper's clipping, slowly: cap the classes above c, spread the excess evenly over the others, repeat."""
    out = p.astype(np.float64).copy()
    for row in out:
        capped = np.zeros(row.size, dtype=bool)
        while (row > c + 1e-15).any():
            over = row > c
            excess = (row[over] - c).sum()
            row[over] = c
            capped |= over
            row[~capped] += excess / (~capped).sum()
    return out


@pytest.mark.quick
@pytest.mark.parametrize("k, c", [(2, 0.9), (3, 0.6), (5, 0.3), (5, 0.9), (8, 0.2)])
def test_clip_caps_at_c_and_spreads_the_mass_evenly(k, c):
    rng = np.random.default_rng(k)
    p = rng.dirichlet(np.full(k, 0.3), 200)
    got = clip(torch.as_tensor(p), c).numpy()
    np.testing.assert_allclose(got, clip_reference(p, c), rtol=0, atol=1e-12)
    np.testing.assert_allclose(got.sum(axis=1), 1.0, atol=1e-12)
    assert got.max() <= c + 1e-12
    kept = p.max(axis=1) <= c  # nothing above the cap: untouched
    np.testing.assert_allclose(got[kept], p[kept], rtol=0, atol=1e-15)


@pytest.mark.quick
def test_clip_binary_is_the_papers_clamp_with_no_gradient_past_c():
    logits = torch.tensor([[3.0, -1.0], [0.1, 0.0], [-4.0, 2.0]], dtype=torch.float64, requires_grad=True)
    p = torch.softmax(logits, dim=1)
    got = clip(p, 0.9)
    np.testing.assert_allclose(got.detach().numpy(), p.clamp(0.1, 0.9).detach().numpy(), rtol=0, atol=1e-15)
    (got[:, 0] * torch.tensor([1.0, 1.0, 1.0], dtype=torch.float64)).sum().backward()
    grad = logits.grad.numpy()
    assert np.abs(grad[[0, 2]]).max() < 1e-12  # rows 0 and 2 are past c: the clipped value does not move
    assert np.abs(grad[1]).max() > 0.1


@pytest.mark.quick
def test_clip_off_at_one_and_uniform_at_one_over_k():
    p = torch.tensor([[0.97, 0.02, 0.01], [0.2, 0.5, 0.3]], dtype=torch.float64)
    assert clip(p, 1.0) is p and clip(p, 3.0) is p
    np.testing.assert_array_equal(clip(p, 1 / 3).numpy(), np.full((2, 3), 1 / 3))


@pytest.mark.quick
def test_a_clip_below_one_over_k_is_refused():
    data, x, _ = crowd(n_tasks=40)
    with pytest.raises(UsageError, match="clip"):
        DeepMF(clip=0.2, epochs=1, model="linear", device="cpu").fit(data, x)


class _Recorder(DeepMF):
    """deepMF keeping what each epoch's E-step read and wrote: the workers' posteriors (``key``: ``beta`` for the
    confusion model, ``ab`` for one-coin) before and after, the classifier's output, the targets."""

    name = "deepmf"
    key = "beta"
    log: list = []

    def _epoch_begin(self, ctx):
        before = ctx.state[self.key].copy()
        proba = ctx.proba().double().cpu().numpy()
        super()._epoch_begin(ctx)
        self.log.append((before, proba, ctx.state["targets"].double().cpu().numpy(), ctx.state[self.key].copy(),
                         ctx.training_set()))


def test_the_e_and_m_steps_equal_a_slow_numpy_reference():
    data, x, _ = crowd(n_tasks=120)
    _Recorder.log = []
    _Recorder(model="linear", epochs=3, val_fraction=0.2, clip=0.7, prior=(3.0, 0.5), lr=0.05, device="cpu",
              patience=0, worker_model="confusion").fit(data, x)
    assert len(_Recorder.log) == 3
    alpha = np.full((3, 3), 0.5)
    np.fill_diagonal(alpha, 3.0)
    for before, proba, q, after, train in _Recorder.log:
        f_hat = clip_reference(proba, 0.7)
        e_log = digamma(before) - digamma(before.sum(axis=2, keepdims=True))  # [worker, true, observed]
        log_q = np.log(f_hat)
        for t, w, y in zip(train.task, train.worker, train.label):
            log_q[t] += e_log[w, :, y]
        want = np.exp(log_q - log_q.max(axis=1, keepdims=True))
        want /= want.sum(axis=1, keepdims=True)
        answered = np.bincount(train.task, minlength=train.n_tasks) > 0
        want[~answered] = 0.0
        np.testing.assert_allclose(q, want, rtol=0, atol=1e-6)  # (the targets are float32)
        beta = np.broadcast_to(alpha, before.shape).copy()
        for t, w, y in zip(train.task, train.worker, train.label):
            beta[w, :, y] += want[t]
        np.testing.assert_allclose(after, beta, rtol=1e-9, atol=1e-9)
    first = _Recorder.log[0][0]
    np.testing.assert_array_equal(first, np.broadcast_to(alpha, first.shape))  # β starts at α


@pytest.mark.parametrize("k", [2, 3])
@pytest.mark.parametrize("model", ["one-coin", "confusion"])
def test_features_ignored_it_is_the_aggregator_mf(k, model):
    """c = 1/K: the prior is uniform whatever the network, and deepMF's sweeps are mf's with the class proportions
    held uniform (mf learns them: a huge class_prior holds them), with either worker model.  The starts differ
    (deepMF: the prior; mf: the soft vote), so the iterates differ, but both run to the same fixed point: the
    same labels, posteriors within 1e-4."""
    data, x, _ = crowd(seed=k, n_tasks=200, k=k)
    result = DeepMF(clip=1.0 / k, epochs=150, model="linear", val_fraction=0.0, patience=0, device="cpu",
                    prior=(2.0, 1.0), worker_model=model).fit(data, x)
    mf = get_method("mf")(prior=(2.0, 1.0), class_prior=1e9, max_iter=500, tol=1e-12,
                          worker_model=model).fit(data)
    np.testing.assert_array_equal(result.labels, mf.labels)
    np.testing.assert_allclose(result.posteriors, mf.posteriors, atol=1e-4)
    np.testing.assert_allclose(result.worker_params["confusion"], mf.worker_params["confusion"], atol=1e-4)


def test_learns_a_separable_problem_past_the_answers():
    """Three answers a task from workers of accuracy .55-.85 and well-separated features: deepMF's labels beat
    majority vote and mf, and its classifier predicts fresh points of the same classes."""
    data, x, truth = crowd(seed=5, n_tasks=400, separation=6.0)
    # a Dawid-Skene crowd: the worker model it was drawn from (one-coin, the default, .960)
    result = get_trainer("deepmf").load()(model="linear", device="cpu", seed=0, worker_model="confusion").fit(data, x)
    acc = (np.asarray(result.labels).astype(int) == truth).mean()
    mv = get_method("mv")(seed=0).fit(data)
    mf = get_method("mf")().fit(data)
    assert acc > 0.97
    assert acc > (np.asarray(mv.labels).astype(int) == truth).mean() + 0.05
    assert acc > (np.asarray(mf.labels).astype(int) == truth).mean() + 0.03
    rng = np.random.default_rng(9)
    fresh_truth = rng.integers(0, 3, 300)
    fresh = gaussian_features(fresh_truth, 3, dim=8, separation=6.0, seed=5)  # the same class means (seed)
    model = result.model_params["model"]
    assert (np.asarray(model.predict(fresh)).astype(int) == fresh_truth).mean() > 0.95


def test_full_batch_and_the_same_bytes_from_the_same_seed():
    data, x, _ = crowd(n_tasks=80)
    fit = dict(model="linear", epochs=4, device="cpu", seed=3)
    a = DeepMF(**fit).fit(data, x)
    b = DeepMF(**fit).fit(data, x)
    np.testing.assert_array_equal(a.posteriors, b.posteriors)
    assert deepmf_module.DeepMF.batch_policy.full_batch


class _OneCoinRecorder(_Recorder):
    key = "ab"
    log: list = []


def test_one_coin_e_and_m_steps_equal_a_slow_numpy_reference():
    """The paper's eq. 3 (the default): E[log θ[k, y]] = ψ(a) - ψ(a + b) when y = k, ψ(b) - ψ(a + b) - log(K - 1)
    else; a_u = A + Σ q_i(y_iu), b_u = B + Σ (1 - q_i(y_iu)) over worker u's training answers."""
    data, x, _ = crowd(n_tasks=120)
    _OneCoinRecorder.log = []
    _OneCoinRecorder(model="linear", epochs=3, val_fraction=0.2, clip=0.7, prior=(3.0, 0.5), lr=0.05,
                     device="cpu", patience=0).fit(data, x)
    assert len(_OneCoinRecorder.log) == 3
    for before, proba, q, after, train in _OneCoinRecorder.log:
        f_hat = clip_reference(proba, 0.7)
        right = digamma(before[:, 0]) - digamma(before.sum(axis=1))
        wrong = digamma(before[:, 1]) - digamma(before.sum(axis=1)) - np.log(2.0)
        log_q = np.log(f_hat)
        for t, w, y in zip(train.task, train.worker, train.label):
            log_q[t] += np.where(np.arange(3) == y, right[w], wrong[w])
        want = np.exp(log_q - log_q.max(axis=1, keepdims=True))
        want /= want.sum(axis=1, keepdims=True)
        answered = np.bincount(train.task, minlength=train.n_tasks) > 0
        want[~answered] = 0.0
        np.testing.assert_allclose(q, want, rtol=0, atol=1e-6)  # (the targets are float32)
        ab = np.tile([3.0, 0.5], (before.shape[0], 1))
        for t, w, y in zip(train.task, train.worker, train.label):
            ab[w] += [want[t, y], 1.0 - want[t, y]]
        np.testing.assert_allclose(after, ab, rtol=1e-9, atol=1e-9)
    np.testing.assert_array_equal(_OneCoinRecorder.log[0][0], np.tile([3.0, 0.5], (data.n_workers, 1)))


@pytest.mark.parametrize("method", ["deepmf", "deepbp"])
@pytest.mark.parametrize("worker_model", ["one-coin", "confusion"])
def test_one_class_present_trains_at_the_default_clip(method, worker_model):
    """One class (the CLI warns that every task gets it): any c clips a 1-class distribution to itself, so the
    default c = 0.9 is not refused as below 1/K = 1."""
    from crowdagg.data.annotations import AnnotationSet

    data = AnnotationSet.from_codes(np.repeat(np.arange(6), 2), np.tile([0, 1], 6), np.zeros(12, dtype=np.int64),
                                    n_tasks=6, n_workers=2, n_classes=1)
    x = np.random.default_rng(0).normal(size=(6, 3))
    extra = {"samples": 20} if method == "deepbp" else {}
    result = get_trainer(method).load()(model="linear", epochs=1, device="cpu", worker_model=worker_model,
                                        **extra).fit(data, x)
    np.testing.assert_array_equal(result.labels, np.zeros(6, dtype=np.int64))
    np.testing.assert_allclose(result.posteriors, 1.0)


@pytest.mark.parametrize("method", ["deepmf", "deepbp"])
def test_a_task_without_answers_is_said_to_get_the_clipped_prediction_it_gets(method):
    """A task without answers gets the model's prior, the classifier's prediction clipped at c (not the
    prediction, which `crowdagg predict` gives): the warning says so."""
    from crowdagg.data.annotations import AnnotationSet
    from crowdagg.errors import CrowdaggWarning

    data, x, _ = crowd(n_tasks=40)
    keep = data.task >= 3  # tasks 0-2 lose their answers (features kept)
    data = AnnotationSet.from_codes(data.task[keep], data.worker[keep], data.label[keep], n_tasks=data.n_tasks,
                                    n_workers=data.n_workers, n_classes=data.n_classes)
    with pytest.warns(CrowdaggWarning, match=r"3 task\(s\) have no answers: their posterior is .*clip"):
        result = get_trainer(method).load()(model="linear", epochs=3, lr=0.5, device="cpu", clip=0.5,
                                            val_fraction=0.0).fit(data, x)
    proba = result.model_params["classifier_proba"][:3]
    want = clip(torch.as_tensor(proba), 0.5).numpy()
    np.testing.assert_allclose(result.posteriors[:3], want, rtol=0, atol=1e-6)
    assert result.posteriors[:3].max() <= 0.5 + 1e-9


@pytest.mark.quick
def test_a_clip_just_below_one_over_k_is_refused_with_every_digit():
    """clip=0.33333 for K = 3 was refused as below "1/K = 0.3333" (four digits: it read as above it)."""
    from crowdagg.learning.methods.graph.deepmf import check_clip

    with pytest.raises(UsageError) as err:
        check_clip(0.33333, 3)
    assert "1/K = 1/3 = 0.3333333333333333" in str(err.value) and "got 0.33333" in str(err.value)
    check_clip(1.0 / 3.0, 3)  # exactly 1/K: the features ignored, not refused


@pytest.mark.quick
@pytest.mark.parametrize("method", ["deepmf", "deepbp"])
@pytest.mark.parametrize("prior", [(2.0,), (2.0, 1.0, 1.0)])
def test_a_prior_of_one_or_three_numbers_is_refused_before_the_answers_are_read(method, prior):
    """check_params (what crowdagg.train and the CLI call before reading the answers) refuses it, not the fit."""
    with pytest.raises(UsageError, match="prior takes two numbers"):
        get_trainer(method).load()(prior=prior).check_params()
    get_trainer(method).load()(prior=(3.0, 0.5)).check_params()
    get_trainer(method).load()().check_params()  # None: by the worker model


def test_a_batch_size_given_to_a_full_batch_trainer_is_said_not_to_be_read():
    from crowdagg.errors import CrowdaggWarning

    data, x, _ = crowd(n_tasks=40)
    with pytest.warns(CrowdaggWarning, match=r"deepmf trains on every task at once .*batch_size is not read"):
        DeepMF(model="linear", epochs=1, device="cpu", batch_size=8).fit(data, x)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", CrowdaggWarning)
        DeepMF(model="linear", epochs=1, device="cpu").fit(data, x)  # the declared default: nothing to say
