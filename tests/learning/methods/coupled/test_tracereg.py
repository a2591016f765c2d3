"""TraceReg (crowdagg.learning.methods.coupled.tracereg): learning, confusion recovery on Tanno et al.'s scenarios, the trace."""

from __future__ import annotations

import numpy as np
import pytest

from crowdagg.methods.registry import get_trainer
from crowdagg.simulate import simulate

SMALL = {"hidden": 16, "epochs": 12, "batch_size": 32, "lr": 1e-2}
#: Tanno's scenarios at a test's size: 5 classes, 1000 items, one label each, a linear classifier; 20 epochs are
#: 640 steps, so the confusions learn at 30 × lr (the default 10 × suits a real dataset's thousands of steps).
SCENARIO = {"model": "linear", "epochs": 20, "batch_size": 32, "confusion_lr_scale": 30.0}


def tracereg(**params):
    return get_trainer("tracereg").load()(**params)


def cm_error(estimate: np.ndarray, truth: np.ndarray) -> float:
    """Tanno et al.'s CM error: (1 / (R K²)) Σ_r Σ_ij (a_ij - â_ij)²."""
    return float(((estimate - truth) ** 2).mean())


def fit_scenario(scenario: str, skill: tuple[float, float], **params):
    crowd = simulate(1000, n_classes=5, scenario=scenario, skill=skill, seed=11)
    data = crowd.to_annotations()
    order = np.array([int(t[1:]) for t in data.task_names])
    result = tracereg(seed=0, **{**SCENARIO, **params}).fit(data, crowd.features[order])
    return result, crowd, order


@pytest.fixture(scope="module")
def fitted(separable):
    data, x, _, _ = separable
    return tracereg(seed=5, **SMALL).fit(data, x)


@pytest.fixture(scope="module")
def flippers():
    """Pairwise flippers of mean skill 0.7: the mean confusion is diagonally dominant."""
    return fit_scenario("tanno-flippers", (0.6, 0.8))


def test_a_separable_problem_is_learnt_from_noisy_answers(separable, fitted):
    data, x, truth, _ = separable
    assert (fitted.labels == truth).mean() > 0.95
    assert (fitted.model_params["model"].predict_proba(x).argmax(1) == truth).mean() > 0.95
    conf = fitted.worker_params["confusion"]
    assert conf.shape == (data.n_workers, 3, 3) and np.allclose(conf.sum(axis=2), 1) and (conf >= 0).all()


def test_the_same_seed_gives_identical_arrays(separable, fitted):
    data, x, _, _ = separable
    again = tracereg(seed=5, **SMALL).fit(data, x)
    assert np.array_equal(again.posteriors, fitted.posteriors)
    assert np.array_equal(again.worker_params["confusion"], fitted.worker_params["confusion"])
    assert np.array_equal(again.objective, fitted.objective)


@pytest.mark.quick  # one epoch at lr 1e-8: the start, not training
def test_the_confusions_start_near_the_identity_as_the_listing(separable):
    data, x, _, _ = separable
    # one epoch at a tiny learning rate: the matrices are still rownorm(softplus(6I - 5))
    result = tracereg(seed=0, epochs=1, lr=1e-8, val_fraction=0.0, hidden=8).fit(data, x)
    sp = np.log1p(np.exp([1.0, -5.0]))
    expected = sp[0] / (sp[0] + 2 * sp[1])
    assert np.allclose(np.diagonal(result.worker_params["confusion"], axis1=1, axis2=2), expected, atol=1e-4)


def test_flippers_confusions_are_recovered_when_the_mean_is_diagonally_dominant(flippers):
    result, crowd, order = flippers
    error = cm_error(result.worker_params["confusion"], crowd.confusion)
    # confusions left near their identity start (a trace term of the wrong sign, or one that never moves them)
    # are 0.04 away
    assert error < 0.01, error
    assert (result.labels == crowd.truth[order]).mean() > 0.9


def test_hammer_spammers_confusions_are_recovered_when_the_mean_is_diagonally_dominant():
    # mean skill 0.5 of 5 classes, one label per item: λ = 0.1 (the paper's robust range is 0.001-0.1); at 0.01
    # the matrices barely leave their start in 640 steps (error 0.046, the start's 0.05)
    result, crowd, order = fit_scenario("tanno-hammer-spammer", (0.4, 0.6), lam=0.1)
    error = cm_error(result.worker_params["confusion"], crowd.confusion)
    assert error < 0.01, error
    truth = crowd.truth[order]
    answered = np.zeros(len(truth), dtype=np.int64)
    answered[result.data.task] = result.data.label  # the one answer of each item
    classifier = result.model_params["classifier_proba"].argmax(axis=1)
    assert (classifier == truth).mean() > (answered == truth).mean() + 0.1


def test_the_error_grows_once_the_mean_is_not_diagonally_dominant(flippers):
    result, crowd, _ = flippers
    bad, bad_crowd, _ = fit_scenario("tanno-flippers", (0.1, 0.2))
    mean = bad_crowd.confusion.mean(axis=0)
    assert (np.diagonal(mean) < (mean - np.diag(np.diagonal(mean))).max(axis=1)).any()  # not diagonally dominant
    assert cm_error(bad.worker_params["confusion"], bad_crowd.confusion) > 3 * cm_error(
        result.worker_params["confusion"], crowd.confusion)


def test_a_heavier_trace_makes_the_confusions_less_confident(separable):
    data, x, _, _ = separable
    traces = [np.trace(tracereg(seed=1, lam=lam, **SMALL).fit(data, x).worker_params["confusion"], axis1=1,
                       axis2=2).mean() for lam in (0.0, 1.0)]
    assert traces[1] < traces[0] - 0.1
