"""Metrics of predicted labels against truth."""

from __future__ import annotations

import pytest

from crowdagg.errors import CrowdaggWarning, DataError
from crowdagg.evaluate import evaluate_labels


def test_metrics_by_hand():
    truth = {"a": "x", "b": "x", "c": "y", "d": "y", "e": "z"}
    pred = {"a": "x", "b": "y", "c": "y", "d": "y", "e": "x", "f": "x"}
    ev = evaluate_labels(pred, truth)
    assert ev.accuracy == pytest.approx(3 / 5)
    assert ev.recall == {"x": 0.5, "y": 1.0, "z": 0.0}
    # F1: x = 2*1/(2+2) = .5, y = 2*2/(2+3) = .8, z = 0
    assert ev.macro_f1 == pytest.approx((0.5 + 0.8 + 0.0) / 3)
    assert (ev.n_compared, ev.n_without_truth, ev.n_truth_unpredicted) == (5, 1, 0)


def test_numeric_classes_ordered_and_unpredicted_truth():
    ev = evaluate_labels({"1": "10", "2": "9"}, {"1": "10", "2": "9", "3": "9"})
    assert list(ev.recall) == ["9", "10"]
    assert ev.n_truth_unpredicted == 1 and ev.accuracy == 1.0


def test_no_overlap_is_an_error():
    with pytest.raises(DataError, match="task ids"):
        evaluate_labels({"a": "x"}, {"b": "x"})


def test_labels_absent_from_the_truth_are_warned_about():
    # dog-like predictions (4 classes) scored against rte-like truth (2 classes): ids overlap, classes do not all
    pred = {str(i): str(i % 4) for i in range(100)}
    truth = {str(i): str(i % 2) for i in range(100)}
    with pytest.warns(CrowdaggWarning, match="50 of 100 compared prediction.*absent from the truth.*'2', '3'"):
        evaluate_labels(pred, truth)
    with pytest.warns(CrowdaggWarning, match="no class in common"):
        evaluate_labels({"a": "cat", "b": "dog"}, {"a": "0", "b": "1"})


def test_matching_label_sets_do_not_warn(recwarn):
    evaluate_labels({"a": "x", "b": "x"}, {"a": "x", "b": "y"})
    assert not [w for w in recwarn.list if issubclass(w.category, CrowdaggWarning)]
