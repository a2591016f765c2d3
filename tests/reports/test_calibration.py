"""ECE, Brier score and the reliability table against hand-worked examples."""

import numpy as np
import pytest

from crowdagg.errors import DataError
from crowdagg.reports.calibration import (
    brier_score,
    calibration,
    expected_calibration_error,
    reliability_bins,
)

# Confidences .9 (right), .8 (wrong), .6 (right), .7 (right).
PROBA = np.array([[0.9, 0.1], [0.2, 0.8], [0.6, 0.4], [0.3, 0.7]])
TRUTH = np.array([0, 0, 0, 1])


@pytest.mark.quick
def test_ece_two_equal_mass_bins_by_hand():
    # sorted confidences .6 .7 | .8 .9: bin 1 conf .65 acc 1, bin 2 conf .85 acc .5: |.35| each, weight 1/2
    assert expected_calibration_error(PROBA, TRUTH, n_bins=2) == pytest.approx(0.35)
    bins = reliability_bins(PROBA, TRUTH, n_bins=2)
    assert [b.count for b in bins] == [2, 2]
    assert bins[0].confidence == pytest.approx(0.65) and bins[0].accuracy == 1.0
    assert (bins[1].low, bins[1].high) == (0.8, 0.9) and bins[1].accuracy == 0.5


def test_brier_by_hand():
    # (.01 + .01) + (.64 + .64) + (.16 + .16) + (.09 + .09) over 4 tasks
    assert brier_score(PROBA, TRUTH) == pytest.approx(0.45)


def test_perfectly_calibrated_and_one_hot():
    # one-hot right answers: ECE 0, Brier 0; one-hot with a quarter wrong: ECE .25
    eye = np.eye(3)[[0, 1, 2, 0]]
    assert expected_calibration_error(eye, np.array([0, 1, 2, 0])) == 0.0
    assert brier_score(eye, np.array([0, 1, 2, 0])) == 0.0
    assert expected_calibration_error(eye, np.array([0, 1, 2, 1]), n_bins=1) == pytest.approx(0.25)


def test_fewer_tasks_than_bins_and_given_labels():
    cal = calibration(PROBA, TRUTH)  # 15 bins asked, 4 tasks: one task a bin
    assert len(cal.bins) == 4 and cal.n_bins == 15
    # scoring given labels in place of the argmax: all right -> every bin accuracy 1
    bins = reliability_bins(PROBA, TRUTH, predicted=np.array([0, 0, 0, 1]))
    assert all(b.accuracy == 1.0 for b in bins)
    assert expected_calibration_error(PROBA[:0], TRUTH[:0]) == 0.0


def test_bad_input_refused():
    with pytest.raises(DataError, match="outside"):
        expected_calibration_error(PROBA, np.array([0, 0, 0, 2]))
    with pytest.raises(DataError, match="NaN"):
        brier_score(np.array([[np.nan, 1.0]]), np.array([0]))
    with pytest.raises(DataError, match="posteriors"):
        calibration(PROBA, TRUTH[:2])


def test_given_labels_are_scored_at_their_own_posterior():
    # task 2 labelled 0 (posterior .2) and right: its confidence is .2, not the argmax's .8
    bins = reliability_bins(PROBA, TRUTH, n_bins=4, predicted=np.array([0, 0, 0, 1]))
    assert [b.confidence for b in bins] == pytest.approx([0.2, 0.6, 0.7, 0.9])
    assert expected_calibration_error(PROBA, TRUTH, n_bins=4, predicted=np.array([0, 0, 0, 1])) == \
        pytest.approx((0.8 + 0.4 + 0.3 + 0.1) / 4)
    with pytest.raises(DataError, match="predicted classes"):
        reliability_bins(PROBA, TRUTH, predicted=np.array([0, 0, 2, 1]))


def test_confidence_calibration_by_hand():
    from crowdagg.reports.calibration import confidence_calibration

    cal = confidence_calibration(np.array([0.9, 0.8, 0.6, 0.7]), np.array([True, False, True, True]), n_bins=2)
    assert cal.ece == pytest.approx(0.35) and cal.brier is None
    with pytest.raises(DataError, match="outside"):
        confidence_calibration(np.array([1.2]), np.array([True]))


@pytest.mark.parametrize(("call", "match"), [
    ("expected_calibration_error(PROBA, TRUTH, n_bins=2.5)", "n_bins must be at least 1, got 2.5"),
    ("expected_calibration_error(PROBA, TRUTH, n_bins='3')", "n_bins must be at least 1, got '3'"),
    ("expected_calibration_error(PROBA, TRUTH, n_bins=True)", "n_bins must be at least 1, got True"),
    ("brier_score(PROBA, np.array(['a', 'a', 'a', 'b']))", "true class codes must be integers"),
    ("brier_score(PROBA, TRUTH + 0.5)", "true class codes must be integers"),  # was truncated to 0
    ("brier_score(PROBA, np.array([None, 0, 0, 1]))", "true class codes must be integers"),
    ("brier_score(PROBA.astype(str), TRUTH)", "posteriors must hold numbers"),
    ("brier_score(PROBA.astype(complex), TRUTH)", "posteriors must hold numbers"),
    ("brier_score(np.array([[-5.0, 6.0]]), np.array([0]))", r"row 0: probability -5.0 is not a number in \[0, 1\]"),
    ("calibration(np.array([[0.5, 0.6]]), np.array([0]))", "row 0: the probabilities sum to 1.1, not 1"),
    ("reliability_bins(PROBA, TRUTH, predicted=np.array([0.7, 0, 0, 1]))", "predicted class codes must be integers"),
    ("reliability_bins(PROBA, TRUTH, predicted=np.array(['a'] * 4))", "predicted class codes must be integers"),
    ("confidence_calibration(np.array(['a']), np.array([True]))", "confidences must hold numbers"),
    ("confidence_calibration(np.array([0.5]), np.array(['yes']))", "outcomes must hold numbers"),
    ("confidence_calibration(np.array([0.5]), np.array([2]))", "an outcome is 2.0, not right"),
])
def test_odd_arguments_are_data_errors_not_numpy_errors_nor_silent_casts(call, match):
    """Text, complex, float class indices, fractional bin counts, probabilities outside [0, 1], rows not summing
    to 1 and outcomes other than right/wrong: each a DataError naming it (they were numpy's TypeError/ValueError, a
    Brier score of 72 for a probability of -5, a bin accuracy of 2.0, or a class 0.5 cast silently to 0)."""
    from crowdagg.reports.calibration import confidence_calibration

    env = {"np": np, "PROBA": PROBA, "TRUTH": TRUTH, "brier_score": brier_score, "calibration": calibration,
           "expected_calibration_error": expected_calibration_error, "reliability_bins": reliability_bins,
           "confidence_calibration": confidence_calibration}
    with pytest.raises(DataError, match=match):
        eval(call, env)
    assert calibration(PROBA, TRUTH.astype(np.int32), n_bins=np.int64(2)).ece == pytest.approx(0.35)
