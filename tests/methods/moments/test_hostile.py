"""The moment methods on degenerate crowds (a hostile user's inputs): a warning and the documented fallback, never
NaN, never a label that no answer carries."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import crowdagg
from crowdagg.data.annotations import AnnotationSet
from crowdagg.errors import CrowdaggWarning

from .common import assert_decoded, fallback_conf

METHODS = ("spectral", "cpd", "multispa", "cnmf")


@pytest.fixture(scope="module")
def two_classes_of_four():
    """400 tasks, 8 workers (80% right) answering only classes 0 and 1 of the four the user named: (data, truth)."""
    rng = np.random.default_rng(5)
    truth = rng.integers(0, 2, 400)
    task = np.repeat(np.arange(400), 8)
    worker = np.tile(np.arange(8), 400)
    label = np.where(rng.random(task.size) < 0.8, truth[task], 1 - truth[task])
    return AnnotationSet.from_codes(task, worker, label, n_classes=4), truth


@pytest.mark.parametrize("refine", ["none", "ds"])
@pytest.mark.parametrize("method", METHODS)
def test_a_class_nobody_answers_labels_no_task(two_classes_of_four, method, refine):
    # spectral (refined from its fallback) and cnmf gave 10-27% of rte's tasks classes 2 and 3 with --classes
    # 0,1,2,3; ds from majority vote gives none
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = crowdagg.aggregate(two_classes_of_four[0], method, refine=refine)
    assert set(np.unique(result.labels)) <= {0, 1}
    # the labels are right, not merely in {0, 1}: 97.5-98% for every method and refinement (majority vote 98.25%)
    assert np.mean(result.labels == two_classes_of_four[1]) > 0.95
    assert np.isfinite(result.posteriors).all() and np.isfinite(result.prior).all()
    assert any(issubclass(w.category, CrowdaggWarning) and "classes have no answer" in str(w.message)
               for w in caught)


@pytest.mark.filterwarnings("error::RuntimeWarning")
def test_a_gold_label_keeps_its_class(two_classes_of_four):
    # a class that only the gold names is evidence: not vetoed
    result = crowdagg.aggregate(two_classes_of_four[0], "cpd", gold=np.array([2] + [-1] * 399))
    assert result.labels[0] == 2


def test_cnmf_with_two_workers_says_it_falls_back():
    # one pair's R = A_1 D A_2^T has infinitely many factorisations: cnmf returned 0.5 everywhere, silently
    task = np.repeat(np.arange(50), 2)
    worker = np.tile([0, 1], 50)
    data = AnnotationSet.from_codes(task, worker, (task + worker) % 2)
    with pytest.warns(CrowdaggWarning, match="2 of 2 workers could not be estimated .*needs three workers"):
        result = crowdagg.aggregate(data, "cnmf")
    assert np.isfinite(result.posteriors).all()
    conf = fallback_conf(data)
    np.testing.assert_allclose(result.confusion, conf)
    assert_decoded(result, data, conf)
