"""GeoCrowdNet (F), (W) (crowdagg.learning.methods.coupled.geocrowdnet): learning, identifiability against CrowdLayer, the volume."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from crowdagg.learning.methods.coupled import geocrowdnet
from crowdagg.methods.registry import get_trainer
from crowdagg.simulate import simulate

SMALL = {"hidden": 16, "epochs": 12, "batch_size": 32, "lr": 1e-2}
SPARSE = {"model": "linear", "epochs": 20, "batch_size": 32}


def trainer(name: str, **params):
    return get_trainer(name).load()(**params)


def cm_error(estimate: np.ndarray, truth: np.ndarray) -> float:
    """(1 / (M K²)) Σ_m Σ_ij (a_ij - â_ij)²."""
    return float(((estimate - truth) ** 2).mean())


@pytest.fixture(scope="module")
def fitted(separable):
    data, x, _, _ = separable
    return {name: trainer(name, seed=5, **SMALL).fit(data, x) for name in ("geocrowdnet-f", "geocrowdnet-w")}


@pytest.fixture(scope="module")
def sparse():
    """The identifiability setting (geocrowdnet-sparse: ~1 label per item from annotators of accuracy 15-85 %),
    fitted by CrowdLayer and both GeoCrowdNets: name -> (result, CM error)."""
    crowd = simulate(1500, 5, 3, scenario="geocrowdnet-sparse", seed=2)
    data = crowd.to_annotations()
    order = np.array([int(t[1:]) for t in data.task_names])
    out = {}
    for name in ("crowdlayer", "geocrowdnet-f", "geocrowdnet-w"):
        # the theory's start (the identity), at 10 x lr: in 900 steps the confusions must move
        own = {} if name == "crowdlayer" else {"confusion_lr_scale": 10.0, "confusion_init": "identity"}
        if name == "geocrowdnet-w":
            own["lam"] = 0.001  # the paper's λ for machine annotators (its MNIST setting); 0.01 over-spreads W here
        result = trainer(name, seed=0, **SPARSE, **own).fit(data, crowd.features[order])
        out[name] = (result, cm_error(result.worker_params["confusion"], crowd.confusion))
    return out, crowd.truth[order]


@pytest.mark.parametrize("name", ["geocrowdnet-f", "geocrowdnet-w"])
def test_a_separable_problem_is_learnt_from_noisy_answers(separable, fitted, name):
    data, x, truth, _ = separable
    result = fitted[name]
    assert (result.labels == truth).mean() > 0.95
    assert (result.model_params["model"].predict_proba(x).argmax(1) == truth).mean() > 0.95
    conf = result.worker_params["confusion"]
    assert conf.shape == (data.n_workers, 3, 3) and np.allclose(conf.sum(axis=2), 1) and (conf >= 0).all()


def test_plain_geocrowdnet_is_the_f_variant_under_its_own_name(separable, fitted):
    data, x, _, _ = separable
    short = trainer("geocrowdnet", seed=5, **SMALL).fit(data, x)
    assert short.method == "geocrowdnet" and short.model_params["model"].method == "geocrowdnet"
    assert np.array_equal(short.posteriors, fitted["geocrowdnet-f"].posteriors)


@pytest.mark.parametrize("name", ["geocrowdnet-f", "geocrowdnet-w"])
def test_the_same_seed_gives_identical_arrays(separable, fitted, name):
    data, x, _, _ = separable
    again = trainer(name, seed=5, **SMALL).fit(data, x)
    assert np.array_equal(again.posteriors, fitted[name].posteriors)
    assert np.array_equal(again.worker_params["confusion"], fitted[name].worker_params["confusion"])


def test_both_recover_the_confusions_better_than_crowdlayer_where_identifiable(sparse):
    fits, truth = sparse
    errors = {name: error for name, (_, error) in fits.items()}
    assert errors["geocrowdnet-f"] < 0.8 * errors["crowdlayer"], errors
    assert errors["geocrowdnet-w"] < 0.8 * errors["crowdlayer"], errors
    for name in ("geocrowdnet-f", "geocrowdnet-w"):
        assert (fits[name][0].labels == truth).mean() > (fits["crowdlayer"][0].labels == truth).mean()


@pytest.mark.parametrize("init", ["diagonal", "counts"])
def test_each_confusion_start_learns(separable, init):
    data, x, truth, _ = separable
    result = trainer("geocrowdnet-f", seed=1, confusion_init=init, **SMALL).fit(data, x)
    from crowdagg import aggregate

    vote = aggregate(data, "mv", seed=1).labels
    # the diagonal start (0.98 on the diagonal) trusts each answer at first: better than the vote, not yet .95
    assert (result.labels == truth).mean() > (vote == truth).mean() + 0.03


@pytest.mark.quick  # the small fast variant: one epoch at lr 1e-8 of an 8-unit network
def test_the_counts_start_is_the_soft_vote_count_matrix_on_the_log_scale(separable):
    data, x, _, crowd = separable
    # at a negligible learning rate the fitted confusions are the start: rows of the counts against the soft vote
    result = trainer("geocrowdnet-f", seed=0, epochs=1, lr=1e-8, val_fraction=0.0, hidden=8,
                     confusion_init="counts").fit(data, x)
    conf = result.worker_params["confusion"]
    votes = np.zeros((data.n_tasks, 3))
    np.add.at(votes, (data.task, data.label), 1.0)
    soft = votes / votes.sum(axis=1, keepdims=True)
    counts = np.zeros((data.n_workers, 3, 3))
    for t, w, lab in zip(data.task, data.worker, data.label):
        counts[w, :, lab] += soft[t]
    rows = counts + 1.0 / 3
    assert np.allclose(conf, rows / rows.sum(axis=2, keepdims=True), atol=1e-4)
    # the orientation: a good worker's matrix is diagonally dominant (the code's mle_based is transposed)
    assert (np.diagonal(conf, axis1=1, axis2=2) > 0.5).mean() > 0.9


def test_the_log_det_stays_finite_on_a_singular_gram():
    k = 4
    assert math.isclose(float(geocrowdnet._logdet(torch.zeros(k, k))), k * math.log(geocrowdnet.VOLUME_EPS),
                        rel_tol=1e-4)
    f = torch.full((1, k), 1.0 / k, requires_grad=True)  # one task: F^T F has rank 1
    value = geocrowdnet._logdet(f.T @ f)
    value.backward()
    assert torch.isfinite(value) and torch.isfinite(f.grad).all()


def test_the_volume_term_spreads_what_it_regularises(separable):
    data, x, _, _ = separable

    def log_volume_w(result):
        c = result.worker_params["confusion"]
        return np.linalg.slogdet(np.einsum("mij,mkj->ik", c, c) / c.shape[0])[1]

    plain, heavy = (trainer("geocrowdnet-w", seed=1, lam=lam, **SMALL).fit(data, x) for lam in (0.0, 1.0))
    assert log_volume_w(heavy) > log_volume_w(plain) + 0.1
