"""The maxmig trainer: its loss on a batch by hand, learning a separable problem, the forecaster, the learned
prior, and the paper's three cases (crowdagg.learning.methods.mig.maxmig)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from crowdagg.learning.methods.mig.maxmig import CrowdsAggregator, MaxMIG  # noqa: E402
from crowdagg.learning.trainer import Batch  # noqa: E402
from crowdagg.methods.registry import get_trainer  # noqa: E402

FIT = dict(model="linear", epochs=20, batch_size=50, lr=1e-2, aggregator_lr_scale=1.0, seed=0)


def test_loss_of_a_three_task_batch_by_hand():
    # Two annotators, K = 2, the prior fixed uniform.  W^0's column for answer 0 is (ln .9, ln .1), for answer 1
    # (0, 0); W^1's column for answer 1 is (ln .2, ln .8).  Task 0: annotator 0 answers 0; task 1: both answer 1;
    # task 2: annotator 1 answers 0 (a zero column).  So g = softmax(Σ columns + ln .5):
    #   g_1 = (.9, .1)   g_2 = softmax(ln .2, ln .8) = (.2, .8)   g_3 = (.5, .5)
    # and the classifier's logits ln h give h_1 = (.8, .2), h_2 = (.4, .6), h_3 = (.5, .5).
    # m_ij = Σ_c h_ic g_jc / .5:
    #   m_11 = 2 (.72 + .02) = 1.48   m_22 = 2 (.08 + .48) = 1.12   m_33 = 1
    #   m_12 = .64, m_13 = 1, m_21 = .84, m_23 = 1, m_31 = 1, m_32 = 1 (sum 5.48)
    # loss = -[(1/3)(3 + ln 1.48 + ln 1.12) - 5.48 / 6] = -(1.168457 - .913333) = -.255124
    w = np.zeros((2, 2, 2))
    w[0, :, 0] = np.log([0.9, 0.1])
    w[1, :, 1] = np.log([0.2, 0.8])
    ctx = SimpleNamespace(modules=torch.nn.ModuleDict({"aggregator": CrowdsAggregator(w, learn_prior=False)}),
                          params={"prior": "fixed"})
    logits = torch.log(torch.tensor([[0.8, 0.2], [0.4, 0.6], [0.5, 0.5]]))
    row, worker, label = (torch.tensor(a) for a in ([0, 1, 1, 2], [0, 0, 1, 1], [0, 1, 1, 0]))
    batch = Batch(tasks=torch.arange(3), x=torch.zeros(3, 1), row=row, worker=worker, label=label,
                  answers=torch.arange(4))
    loss = MaxMIG()._loss(ctx, logits, batch)
    assert float(loss.detach()) == pytest.approx(-0.255124, abs=1e-5)


@pytest.fixture(scope="module")
def fitted(separable):
    data, x, truth, _ = separable
    return get_trainer("maxmig").load()(**FIT).fit(data, x)


def test_learns_a_separable_problem(separable, fitted):
    data, x, truth, _ = separable
    classifier = fitted.model_params["classifier_proba"].argmax(axis=1)
    # measured: .99 (the labels are the classifier's); mv on the 4 answers a task .87
    assert (classifier == truth).mean() >= 0.97
    np.testing.assert_array_equal(fitted.labels, classifier)
    np.testing.assert_allclose(fitted.posteriors.sum(axis=1), 1.0)
    model = fitted.model_params["model"]
    np.testing.assert_allclose(model.predict_proba(x), fitted.model_params["classifier_proba"], atol=1e-6)
    assert fitted.objective_name == "held-out -MIG^KL"
    assert np.isfinite(fitted.objective).all()


def test_forecaster_combines_the_classifier_and_the_answers(separable, fitted):
    data, x, truth, _ = separable
    forecast = get_trainer("maxmig").load()(**FIT, forecaster=True).fit(data, x)
    # the same fit (the option changes only the labels written): the same classifier
    np.testing.assert_array_equal(forecast.model_params["classifier_proba"], fitted.model_params["classifier_proba"])
    assert not np.allclose(forecast.posteriors, fitted.posteriors)
    np.testing.assert_allclose(forecast.posteriors.sum(axis=1), 1.0)
    # the forecaster is at least as sharp as the classifier where both agree with the truth
    assert (forecast.labels == truth).mean() >= (fitted.labels == truth).mean() - 0.01


def test_learned_prior_stays_on_the_simplex_and_moves(separable):
    data, x, truth, _ = separable
    keep = np.flatnonzero((truth != 2) | (np.arange(truth.size) % 4 == 0))  # class 2 made rare: ~1/9 of tasks
    from crowdagg.data.annotations import AnnotationSet

    new = np.full(data.n_tasks, -1)
    new[keep] = np.arange(keep.size)
    sel = new[data.task] >= 0
    sub = AnnotationSet.from_codes(new[data.task[sel]], data.worker[sel], data.label[sel], n_tasks=keep.size,
                                   n_workers=data.n_workers, n_classes=3)
    seen = {}
    real = CrowdsAggregator.prior

    def spy(self):
        p = real(self)
        seen["prior"] = p.detach().clone()
        return p

    CrowdsAggregator.prior = spy  # type: ignore[method-assign]
    try:
        get_trainer("maxmig").load()(**FIT, prior="learned").fit(sub, x[keep])
    finally:
        CrowdsAggregator.prior = real  # type: ignore[method-assign]
    p = seen["prior"].numpy()
    assert (p > 0).all() and p.sum() == pytest.approx(1.0, abs=1e-6)
    assert p[2] < p[0] and p[2] < p[1]  # it learned the rare class: uniform at the start
