"""BayesDGC's natural-gradient SVI: the conjugate update, mf's Bayesian Dawid-Skene, a numpy reference, learning."""

from __future__ import annotations

import copy

import numpy as np
import pytest

pytest.importorskip("torch")

import torch  # noqa: E402
from scipy.special import digamma  # noqa: E402
from torch import nn  # noqa: E402

from crowdagg.engine import LocalEngine  # noqa: E402
from crowdagg.errors import UsageError  # noqa: E402
from crowdagg.learning.methods.bayes import bayesdgc as bdgc  # noqa: E402
from crowdagg.methods.graph.mf import MFState  # noqa: E402
from crowdagg.methods.registry import get_method, get_trainer  # noqa: E402
from crowdagg.methods.variational import expected_log  # noqa: E402
from crowdagg.simulate import simulate  # noqa: E402
from crowdagg.simulate.features import gaussian_features  # noqa: E402

PRIOR, CLASS_PRIOR = (5.0, 2.0), 1.1  # the paper's β⁰ (diagonal, off) and α⁰


def crowd(n_tasks: int = 300, n_workers: int = 7, n_classes: int = 3, per_task: int = 3, seed: int = 2,
          separation: float = 3.0):
    """A Dawid-Skene crowd (accuracies 0.5-0.8) with Gaussian class features, in the data's task order:
    (data, features, truth)."""
    sim = simulate(n_tasks=n_tasks, n_workers=n_workers, n_classes=n_classes, per_task=per_task, model="ds",
                   skill=(0.5, 0.8), seed=seed)
    data = sim.to_annotations()
    order = np.array([int(t[1:]) for t in data.task_names])  # simulated task names are t<index>
    x = gaussian_features(sim.truth, n_classes, dim=8, separation=separation, seed=seed)
    return data, x[order], sim.truth[order]


def beta0(k: int) -> np.ndarray:
    out = np.full((k, k), PRIOR[1])
    np.fill_diagonal(out, PRIOR[0])
    return out


class Constant(nn.Module):
    """A network whose prior is uniform whatever the features: zero logits.  Its one weight gets a zero gradient
    (the output is ``0 · w``), so it never moves and the classifier never stops being constant."""

    def __init__(self, n_classes: int) -> None:
        super().__init__()
        self.n_classes = n_classes
        self.w = nn.Parameter(torch.zeros(()))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w * torch.zeros((x.shape[0], self.n_classes), device=x.device)


# --------------------------------------------------------------------------- (1) the conjugate update
@pytest.mark.quick  # numpy and the kernels: no training
def test_a_full_batch_natural_step_of_size_one_is_the_closed_form_conjugate_update():
    """The local step of every task then the natural-gradient step with N/|B| = 1 and ρ = 1, from an arbitrary η,
    land exactly on the mean-field update β = β⁰ + Σ_i q_i ⊗ L̄_ij, α = α⁰ + Σ_i q_i: what mf's M-step computes from
    the same posteriors (its MFState started at them)."""
    data, _, _ = crowd()
    k, w = data.n_classes, data.n_workers
    rng = np.random.default_rng(0)
    eta_nu = rng.gamma(2.0, 3.0, size=(w, k, k))  # anywhere: ρ = 1 forgets it
    eta_pi = rng.gamma(2.0, 30.0, size=k)
    log_tau = np.log(rng.dirichlet(np.ones(k), size=data.n_tasks))
    log_prior = log_tau + expected_log(eta_pi + 1.0)
    q, counts, totals = bdgc.local_step(data.task_ptr, data.worker, data.label, log_prior,
                                        expected_log(eta_nu + 1.0, axis=1))
    eta0_nu, eta0_pi = beta0(k) - 1.0, np.full(k, CLASS_PRIOR - 1.0)
    new_nu = bdgc.natural_step(eta_nu, eta0_nu, counts, 1.0, 1.0)
    new_pi = bdgc.natural_step(eta_pi, eta0_pi, totals, 1.0, 1.0)

    mf = MFState(LocalEngine(data), data, "confusion", PRIOR, CLASS_PRIOR, None, q)  # its first M-step reads q
    np.testing.assert_allclose(new_nu + 1.0, mf.beta_ot, rtol=1e-14, atol=0)
    np.testing.assert_allclose(new_pi + 1.0, mf.gamma, rtol=1e-14, atol=0)
    assert np.array_equal(new_nu, eta0_nu + counts) and np.array_equal(new_pi, eta0_pi + totals)  # exactly
    # the statistics are the posteriors' own: every task's q sums to one, every answer counted once
    assert totals.sum() == pytest.approx(data.n_tasks) and counts.sum() == pytest.approx(data.n_answers)
    # and a step of size ρ < 1 is the convex combination of the old η and that update
    half = bdgc.natural_step(eta_nu, eta0_nu, counts, 1.0, 0.25)
    np.testing.assert_allclose(half, 0.75 * eta_nu + 0.25 * new_nu, rtol=1e-14)


@pytest.mark.quick
@pytest.mark.parametrize("prior", [(5.0,), (5.0, 2.0, 1.0)])
def test_a_prior_of_other_than_two_numbers_is_refused_naming_it(prior):
    with pytest.raises(UsageError, match=rf"prior.*two numbers.*got {len(prior)}"):
        bdgc.BayesDGC(prior=prior).check_params()


@pytest.mark.quick
def test_the_step_sizes_are_robbins_monro_and_kappa_zero_keeps_one():
    assert bdgc.step_size(1, 1.0, 0.75) == pytest.approx(2 ** -0.75)
    assert bdgc.step_size(10, 5.0, 0.5) == pytest.approx(15 ** -0.5)
    assert [bdgc.step_size(t, 1.0, 0.0) for t in (1, 2, 100)] == [1.0, 1.0, 1.0]
    rho = [bdgc.step_size(t, 1.0, 0.75) for t in range(1, 10_000)]
    assert all(a > b for a, b in zip(rho, rho[1:]))  # decreasing, Σρ diverges and Σρ² converges for κ in (.5, 1]


# --------------------------------------------------------------------------- (2) mf with a constant network
@pytest.mark.parametrize("epochs", [1, 4, 40])
def test_with_a_constant_network_a_full_batch_and_step_one_it_is_mfs_bayesian_dawid_skene(epochs):
    """Network replaced by a constant (uniform) prior, the whole set one batch, ρ = 1, π learned with α⁰: epoch t of
    the SVI is iteration t of mf's coordinate ascent (same priors, same soft-vote start) -- the same Dirichlet
    posteriors, the same task posteriors, the same labels."""
    data, x, truth = crowd()
    k = data.n_classes
    result = get_trainer("bayesdgc").load()(
        seed=0, epochs=epochs, batch_size=10_000, step_decay=0.0, val_fraction=0.0, patience=0,
        learn_class_prior=True, class_prior=CLASS_PRIOR, prior=PRIOR,
    ).fit(data, x, network=Constant(k))
    mf = get_method("mf")(max_iter=epochs, tol=0.0, prior=PRIOR, class_prior=CLASS_PRIOR, seed=0).fit(data)
    assert mf.n_iter == epochs
    np.testing.assert_allclose(result.model_params["beta"], mf.model_params["beta"], rtol=1e-9)
    np.testing.assert_allclose(result.model_params["alpha"], mf.model_params["gamma"], rtol=1e-9)
    np.testing.assert_allclose(result.posteriors, mf.posteriors, rtol=0, atol=1e-9)
    assert np.array_equal(result.labels, mf.labels)
    # the reported confusion passes the base's float32 answer model (Trainer._confusions): to float32's precision
    np.testing.assert_allclose(result.worker_params["confusion"], mf.worker_params["confusion"], atol=1e-6)
    assert (result.labels == truth).mean() > 0.7  # and it is a fit, not a coincidence of two failures


# --------------------------------------------------------------------------- (3) a numpy reference of one step
def reference_step(state: dict, log_tau: np.ndarray, row: np.ndarray, worker: np.ndarray, label: np.ndarray,
                   n_train: int, rho: float) -> tuple[np.ndarray, dict]:
    """One local + global step by loops: q_i(k) ∝ exp(E log π_k + log τ_ik + Σ_j ψ(β_jk[L_ij]) - ψ(Σ_l β_jkl)),
    then η ← (1 - ρ) η + ρ (η⁰ + N/|B| Σ_B t)."""
    b, k = log_tau.shape
    beta = state["eta_nu"] + 1.0  # [worker, observed, true]
    alpha = state["eta_pi"] + 1.0
    q = np.empty((b, k))
    for i in range(b):
        score = np.empty(k)
        for c in range(k):
            s = digamma(alpha[c]) - digamma(alpha.sum()) + log_tau[i, c]
            for a in np.flatnonzero(row == i):
                s += digamma(beta[worker[a], label[a], c]) - digamma(beta[worker[a], :, c].sum())
            score[c] = s
        score = np.exp(score - score.max())
        q[i] = score / score.sum()
    counts = np.zeros_like(beta)
    for a in range(row.shape[0]):
        counts[worker[a], label[a], :] += q[row[a]]
    scale = n_train / b
    new = {
        "eta_nu": (1 - rho) * state["eta_nu"] + rho * (state["eta0_nu"] + scale * counts),
        "eta_pi": (1 - rho) * state["eta_pi"] + rho * (state["eta0_pi"] + scale * q.sum(axis=0)),
    }
    return q, new


def test_one_minibatch_step_matches_a_slow_numpy_reference():
    """The second minibatch of a real fit (ρ_2 = (2 + τ)^-κ, N/|B| = 250/64, π learned): its q and the η after its
    global step, against the loops of :func:`reference_step` on the same inputs."""
    data, x, _ = crowd(n_tasks=250)
    seen: list = []

    class Recorded(bdgc.BayesDGC):
        def _svi_step(self, ctx, log_tau, batch):
            before = copy.deepcopy(ctx.state)
            q = super()._svi_step(ctx, log_tau, batch)
            seen.append((before, log_tau.double().numpy(), batch.row.numpy(), batch.worker.numpy(),
                         batch.label.numpy(), int(ctx.train_tasks.shape[0]), q.double().numpy(),
                         copy.deepcopy(ctx.state)))
            return q

    Recorded(seed=0, epochs=1, batch_size=64, val_fraction=0.1, learn_class_prior=True, step_delay=2.0,
             step_decay=0.6, model="linear").fit(data, x)
    before, log_tau, row, worker, label, n_train, q, after = seen[1]
    assert log_tau.shape[0] == 64 and n_train <= 250  # a minibatch: N/|B| != 1
    rho = (2 + 2.0) ** -0.6
    q_ref, new = reference_step(before, log_tau, row, worker, label, n_train, rho)
    np.testing.assert_allclose(q, q_ref, rtol=1e-6, atol=1e-7)  # q goes back to the device as float32
    # the global step from the float64 q: to the kernel's summation order
    np.testing.assert_allclose(after["eta_nu"], new["eta_nu"], rtol=1e-12)
    np.testing.assert_allclose(after["eta_pi"], new["eta_pi"], rtol=1e-12)
    assert after["steps"] == 2
    assert not np.allclose(after["eta_nu"], before["eta_nu"])  # the step moved it


def test_the_held_out_answers_never_reach_the_statistics():
    """With a full batch, ρ = 1 and a constant network the Dirichlet counts after an epoch add up to the training
    answers: the held-out ones (val_fraction) are not counted."""
    data, x, _ = crowd(n_tasks=200)
    result = get_trainer("bayesdgc").load()(
        seed=0, epochs=1, batch_size=10_000, step_decay=0.0, val_fraction=0.2, patience=0,
    ).fit(data, x, network=Constant(data.n_classes))
    counts = result.model_params["beta"] - beta0(data.n_classes)[None]
    held_out = result.model_params["n_held_out"]
    assert held_out == round(0.2 * data.n_answers)
    assert counts.sum() == pytest.approx(data.n_answers - held_out, rel=1e-12)
    assert "alpha" not in result.model_params  # π held uniform by default: no q(π)


# --------------------------------------------------------------------------- (4) learning
def test_a_separable_problem_is_learned_beyond_the_answers_alone():
    """600 tasks, 3 answers each from annotators of accuracy 0.5-0.8, features 3 apart: the training labels are
    well above majority vote's and mf's (the answers alone), and the classifier predicts the truth."""
    data, x, truth = crowd(n_tasks=600, n_workers=8)
    result = get_trainer("bayesdgc").load()(seed=0, epochs=30).fit(data, x)
    accuracy = (result.labels == truth).mean()
    mv = (get_method("mv")().fit(data).labels == truth).mean()
    mf = (get_method("mf")(prior=PRIOR, class_prior=CLASS_PRIOR).fit(data).labels == truth).mean()
    assert accuracy > 0.88 and accuracy > mf + 0.1 and accuracy > mv + 0.1
    predicted = result.model_params["model"].predict_proba(x).argmax(axis=1)
    assert (predicted == truth).mean() > 0.85
    # the confusions are the Dirichlet posteriors' means, rows on the simplex
    beta = result.model_params["beta"]
    np.testing.assert_allclose(result.worker_params["confusion"], beta / beta.sum(axis=2, keepdims=True), atol=1e-6)


def test_a_class_nobody_answers_under_a_learned_sparse_class_prior_keeps_finite_confusions():
    """class_prior 1e-6 with learn_class_prior and a declared class no answer gives: E log π of that class is
    ψ(~1e-6) ≈ -1e6, exp of it 0, and the confusions were read through the answer model of a one-hot row
    weighted by π (0 / 0: NaN rows in --workers and in the saved model).  They are the posterior means ν̄."""
    from crowdagg.data.annotations import AnnotationSet

    data, x, _ = crowd(n_tasks=60, n_classes=2)
    data = AnnotationSet.from_names(np.asarray(data.task_names)[data.task], np.asarray(data.worker_names)[data.worker],
                                    np.asarray(data.classes, dtype=object)[data.label],
                                    classes=[*data.classes, "never"], task_order=list(data.task_names))
    result = get_trainer("bayesdgc").load()(seed=0, epochs=1, model="linear", learn_class_prior=True,
                                            class_prior=1e-6).fit(data, x)
    confusion, beta = result.worker_params["confusion"], result.model_params["beta"]
    assert np.isfinite(confusion).all() and np.isfinite(result.model_params["model"].confusion).all()
    np.testing.assert_allclose(confusion, beta / beta.sum(axis=2, keepdims=True), atol=1e-6)


class NaNNetwork(nn.Module):
    """A network that has diverged: NaN logits."""

    def __init__(self, n_classes: int) -> None:
        super().__init__()
        self.n_classes = n_classes
        self.w = nn.Parameter(torch.zeros(()))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w + torch.full((x.shape[0], self.n_classes), float("nan"), device=x.device)


def test_a_network_giving_nan_is_refused_as_a_divergence_not_by_the_kernels_argument_check():
    """NaN logits reached the local step's kernel, whose check named its own argument ('log_prior[0, 0] is nan:
    a log-probability is finite or -inf'), which the user never gave; the other trainers say the training
    diverged and which epoch."""
    from crowdagg.errors import DataError

    data, x, _ = crowd(n_tasks=40)
    with pytest.raises(DataError, match=r"bayesdgc: training diverged at epoch 1 .*nan.*lr") as caught:
        get_trainer("bayesdgc").load()(seed=0, epochs=1).fit(data, x, network=NaNNetwork(data.n_classes))
    assert "log_prior" not in str(caught.value)
