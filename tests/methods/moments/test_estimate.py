"""The moment methods' shared base (crowdagg.methods.moments.estimate): floor, fallback, never NaN."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from crowdagg.engine import LocalEngine
from crowdagg.errors import CrowdaggWarning
from crowdagg.methods.moments.estimate import FLOOR, Estimate, settle, soft_vote_matrices
from crowdagg.simulate import simulate


@pytest.fixture(scope="module")
def crowd():
    return simulate(n_tasks=400, n_workers=12, n_classes=3, per_task=4, seed=3).to_annotations()


def test_estimates_are_floored_and_renormalised(crowd):
    k, w = 3, crowd.n_workers
    conf = np.zeros((w, k, k))
    conf[:, np.arange(k), np.arange(k)] = 2.0  # zeros off the diagonal, columns summing to 2
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # every worker estimated: nothing said
        prior, out = settle(Estimate(np.array([0.0, 1.0, 3.0]), conf, np.ones(w, bool)), LocalEngine(crowd), w, k,
                            "m")
    np.testing.assert_allclose(out.sum(axis=1), 1.0)
    assert out.min() == pytest.approx(FLOOR / (2 + 2 * FLOOR))
    assert prior[0] == pytest.approx(FLOOR / (4 + FLOOR)) and prior.sum() == pytest.approx(1.0)


def test_unidentified_and_non_finite_workers_get_the_soft_vote_fallback_with_a_warning(crowd):
    k, w = 3, crowd.n_workers
    conf = np.full((w, k, k), 1.0 / k)
    conf[0] = np.nan  # said to be estimated, but not finite: treated as not estimated
    known = np.ones(w, bool)
    known[[3, 4]] = False
    with pytest.warns(CrowdaggWarning, match=r"m: 3 of 12 workers could not be estimated .*\(too few\)"):
        prior, out = settle(Estimate(np.ones(k), conf, known, why="too few"), LocalEngine(crowd), w, k, "m")
    fallback = soft_vote_matrices(LocalEngine(crowd))
    np.testing.assert_array_equal(out[[0, 3, 4]], fallback[[0, 3, 4]])
    np.testing.assert_allclose(out[1], 1.0 / k)
    assert np.isfinite(out).all() and np.isfinite(prior).all()
    np.testing.assert_allclose(fallback.sum(axis=1), 1.0)


def test_a_non_finite_prior_becomes_uniform_and_wrong_shapes_are_refused(crowd):
    k, w = 3, crowd.n_workers
    prior, _ = settle(Estimate(np.array([np.nan, 1, 1]), np.full((w, k, k), 1 / k), np.ones(w, bool)),
                      LocalEngine(crowd), w, k, "m")
    np.testing.assert_allclose(prior, 1.0 / k)
    with pytest.raises(ValueError, match="an estimate of prior"):
        settle(Estimate(np.ones(k), np.ones((w, k)), np.ones(w, bool)), LocalEngine(crowd), w, k, "m")


def test_a_refinement_cut_short_is_said_in_the_methods_terms_and_the_raw_objective_is_named(crowd):
    from crowdagg.errors import ConvergenceWarning
    from crowdagg.methods.api import aggregate

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        refined = aggregate(crowd, "spectral", refine_iter=1)
    said = [str(w.message) for w in caught if issubclass(w.category, ConvergenceWarning)]
    assert said == [  # (the library's parameter names; the CLI words them as its options)
        "spectral: the refinement (refine=ds) did not converge in refine_iter=1 EM iterations; raise refine_iter"]
    assert refined.method == "spectral" and refined.n_iter == 1
    raw = aggregate(crowd, "spectral", refine="none")
    assert raw.objective_name == "log-likelihood" and raw.objective.tolist() == [raw.model_params["log_likelihood"]]
    cpd = aggregate(crowd, "cpd")
    assert cpd.objective_name == "moment residual" and len(cpd.objective) == cpd.n_iter + 1
    assert np.isfinite(cpd.model_params["log_likelihood"])
