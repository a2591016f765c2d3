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


def test_pandas_series_are_compared_by_their_index():
    """``evaluate_labels(result.labels_series(), truth)`` raised TypeError ('numpy.ndarray' object is not callable)."""
    import pandas as pd

    from crowdagg import aggregate
    from crowdagg.errors import UsageError

    frame = pd.DataFrame({"task": [1, 1, 2, 2, 3, 3], "worker": ["a", "b"] * 3, "label": [0, 0, 1, 1, 1, 0]})
    predicted = aggregate(frame, "mv").labels_series()
    truth = pd.Series({1: 0, 2: 1, 3: 0})
    ev = evaluate_labels(predicted, truth)
    assert ev.n_compared == 3 and ev.accuracy == float((predicted == truth).mean())
    assert evaluate_labels(predicted.to_dict(), truth).accuracy == ev.accuracy
    with pytest.raises(DataError, match="match as text but differ in type: predicted int, truth str"):
        evaluate_labels(predicted, {"1": 0, "2": 1})
    with pytest.raises(DataError, match="lists task 1 more than once"):
        evaluate_labels(predicted, pd.Series([0, 1], index=[1, 1]))
    with pytest.raises(UsageError, match="truth must map each task to its label"):
        evaluate_labels(predicted, [0, 1, 0])
