"""Evaluation's calibration fields: ECE, Brier score and reliability of posteriors (or confidences) given with the
labels, against hand-worked examples; a run's posteriors scored by evaluate_run."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from crowdagg.errors import DataError
from crowdagg.reports.evaluate import evaluate_labels, evaluate_run, evaluation_bytes, reliability_bytes

# The hand-worked example of test_calibration: confidences .9 (right), .8 (wrong), .6 (right), .7 (right).
PRED = {"t1": "a", "t2": "b", "t3": "a", "t4": "b"}
TRUTH = {"t1": "a", "t2": "a", "t3": "a", "t4": "b"}
PROBA = pd.DataFrame([[0.9, 0.1], [0.2, 0.8], [0.6, 0.4], [0.3, 0.7]], index=list(PRED), columns=["a", "b"])


@pytest.mark.quick
def test_posteriors_give_ece_brier_and_the_table_by_hand():
    ev = evaluate_labels(PRED, TRUTH, posteriors=PROBA)
    # 4 tasks, 15 bins asked: one task a bin; ECE = (|1-.6| + |1-.7| + |0-.8| + |1-.9|) / 4 = .4
    assert ev.ece == pytest.approx(0.4)
    # Brier: (.01+.01) + (.64+.64) + (.16+.16) + (.09+.09) over 4 tasks
    assert ev.brier == pytest.approx(0.45)
    assert ev.calibrated_from == "posteriors" and ev.n_bins == 15
    assert [b.count for b in ev.reliability] == [1, 1, 1, 1]
    assert [b.confidence for b in ev.reliability] == pytest.approx([0.6, 0.7, 0.8, 0.9])
    assert [b.accuracy for b in ev.reliability] == [1.0, 1.0, 0.0, 1.0]
    assert ev.accuracy == 0.75  # the label scores are as before
    assert dict(ev.rows())["ece"] == ev.ece and dict(ev.rows())["brier"] == ev.brier
    assert [n for n, _ in ev.rows()][:7] == [n for n, _ in evaluate_labels(PRED, TRUTH).rows()]  # old rows first


def test_two_bins_by_hand():
    ev = evaluate_labels(PRED, TRUTH, posteriors=PROBA, n_bins=2)
    # sorted .6 .7 | .8 .9: |1 - .65| and |.5 - .85| -> .35
    assert ev.ece == pytest.approx(0.35)
    assert [b.count for b in ev.reliability] == [2, 2]


def test_the_given_label_is_scored_not_the_argmax():
    # t1's label is b although its posterior says a (.9): its confidence is .1, and it is wrong
    pred = dict(PRED, t1="b")
    ev = evaluate_labels(pred, TRUTH, posteriors=PROBA)
    assert ev.accuracy == 0.5
    # confidences .1 (wrong) .6 (right) .7 (right) .8 (wrong): (.1 + .4 + .3 + .8) / 4
    assert ev.ece == pytest.approx(0.4)
    assert ev.reliability[0].confidence == pytest.approx(0.1) and ev.reliability[0].accuracy == 0.0
    assert ev.brier == pytest.approx(0.45)  # the Brier score reads the posteriors, whatever the label


def test_confidence_alone_gives_ece_without_brier():
    ev = evaluate_labels(PRED, TRUTH, confidence={"t1": 0.9, "t2": 0.8, "t3": 0.6, "t4": 0.7, "t9": 0.5})
    assert ev.ece == pytest.approx(0.4) and ev.brier is None and ev.calibrated_from == "confidence"
    assert "brier" not in dict(ev.rows())
    assert json.loads(evaluation_bytes(ev, "json"))["brier"] is None


def test_without_scores_nothing_changes():
    ev = evaluate_labels(PRED, TRUTH)
    assert ev.ece is None and ev.reliability is None and "ece" not in ev.as_dict()
    assert reliability_bytes(ev, "csv").decode() == "bin,count,confidence_low,confidence_high,confidence,accuracy\n"


def test_outputs_carry_the_table():
    ev = evaluate_labels(PRED, TRUTH, posteriors=PROBA)
    obj = json.loads(evaluation_bytes(ev, "json"))
    assert obj["ece"] == pytest.approx(0.4) and obj["calibrated_from"] == "posteriors"
    assert obj["reliability"][2] == pytest.approx(
        {"bin": 3, "count": 1, "confidence_low": 0.8, "confidence_high": 0.8, "confidence": 0.8, "accuracy": 0.0})
    lines = reliability_bytes(ev, "csv").decode().splitlines()
    assert lines[0] == "bin,count,confidence_low,confidence_high,confidence,accuracy" and len(lines) == 5


def test_posteriors_by_label_value_and_by_text():
    # integer labels (pandas) against integer columns; text labels against integer columns match by text
    proba = pd.DataFrame([[0.8, 0.2], [0.4, 0.6]], index=[1, 2], columns=[0, 1])
    ev = evaluate_labels({1: 0, 2: 1}, {1: 0, 2: 0}, posteriors=proba)
    assert ev.ece == pytest.approx((0.2 + 0.6) / 2)
    ev = evaluate_labels({1: "0", 2: "1"}, {1: "0", 2: "0"}, posteriors=proba)
    assert ev.ece == pytest.approx(0.4)


@pytest.mark.parametrize(("change", "match"), [
    (lambda p: p.drop(index="t3"), "no row for task 't3'"),
    (lambda p: p.rename(columns={"b": "c"}), "no column for the true label 'b'"),
    (lambda p: p.assign(b=[0.1, 0.8, np.nan, 0.7]), "task 't3'.*nan"),
    (lambda p: p.assign(b=[0.1, 0.8, 0.4, 0.8]), "task 't4'.*sum to 1.1"),
    (lambda p: p.assign(a=[0.9, -0.2, 0.6, 0.3], b=[0.1, 1.2, 0.4, 0.7]), "task 't2'.*-0.2"),
])
def test_bad_posteriors_are_refused_naming_the_task(change, match):
    with pytest.raises(DataError, match=match):
        evaluate_labels(PRED, TRUTH, posteriors=change(PROBA))


def test_a_true_class_without_a_column_and_bad_confidences_are_refused():
    with pytest.raises(DataError, match="no column for the true label 'c'"):
        evaluate_labels(PRED, dict(TRUTH, t1="c"), posteriors=PROBA)
    with pytest.raises(DataError, match="not a probability"):
        evaluate_labels(PRED, TRUTH, confidence={"t1": 1.5, "t2": 0.8, "t3": 0.6, "t4": 0.7})
    with pytest.raises(DataError, match="no value for task"):
        evaluate_labels(PRED, TRUTH, confidence={"t1": 0.5})
    with pytest.raises(DataError, match="not both"):
        evaluate_labels(PRED, TRUTH, posteriors=PROBA, confidence={"t1": 0.5})


def test_evaluate_run_scores_the_results_posteriors():
    from crowdagg import aggregate

    frame = pd.DataFrame({"task": ["t1"] * 3 + ["t2"] * 3 + ["t3"] * 3, "worker": ["w1", "w2", "w3"] * 3,
                          "label": list("aab") + list("bbb") + list("abb")})
    result = aggregate(frame, "mv")
    # majority vote shares: t1 a 2/3 (right), t2 b 1 (right), t3 b 2/3 (wrong, truth a); truth d is unseen
    ev, _ = evaluate_run(result.data, result, {"t1": "a", "t2": "b", "t3": "a"}, None)
    assert ev.ece == pytest.approx((1 / 3 + 0 + 2 / 3) / 3)
    assert ev.brier == pytest.approx((2 / 9 + 0 + 8 / 9) / 3)
    # a true class no answer gave: its posterior is 0 (a task the run could not get right), not an error
    ev, _ = evaluate_run(result.data, result, {"t1": "a", "t2": "d"}, None)
    assert ev.brier == pytest.approx((2 / 9 + 2) / 2)


def test_a_results_pandas_views_are_scored_as_they_come():
    """The README's way: ``evaluate_labels(result.labels_series(), truth, posteriors=result.proba_frame())`` with
    integer tasks and labels (a DataFrame's dtypes) -- the same figures as evaluate_run."""
    from crowdagg import aggregate

    frame = pd.DataFrame({"task": [1] * 3 + [2] * 3 + [3] * 3, "worker": ["w1", "w2", "w3"] * 3,
                          "label": [0, 0, 1, 1, 1, 1, 0, 1, 1]})
    result = aggregate(frame, "mv")
    truth = pd.Series({1: 0, 2: 1, 3: 0})
    ev = evaluate_labels(result.labels_series(), truth, posteriors=result.proba_frame())
    assert ev.accuracy == pytest.approx(2 / 3)
    assert ev.ece == pytest.approx(1 / 3) and ev.brier == pytest.approx((2 / 9 + 8 / 9) / 3)


def test_confidences_near_one_are_shown_by_their_distance_from_one():
    from crowdagg.reports.evaluate import confidence_text

    assert [confidence_text(c) for c in (0.5, 0.99995, 1 - 5e-11, 1.0)] == ["0.5000", "1-5.0e-05", "1-5.0e-11", "1"]


def test_a_posteriors_rounding_past_one_is_clipped_not_refused():
    proba = PROBA.assign(a=[1.0 + 2e-16, 0.2, 0.6, 0.3], b=[0.0, 0.8, 0.4, 0.7])
    ev = evaluate_labels(PRED, TRUTH, posteriors=proba)
    assert ev.reliability[-1].confidence == 1.0 and ev.reliability[-1].high == 1.0
    with pytest.raises(DataError, match="not a number in"):
        evaluate_labels(PRED, TRUTH, posteriors=PROBA.assign(a=[0.9, -1e-6, 0.6, 0.3], b=[0.1, 1.0, 0.4, 0.7]))


def test_posteriors_of_text_or_complex_and_a_confidence_beyond_a_float_are_data_errors():
    """A DataFrame of words, of complex numbers (pandas dropped the imaginary part with a warning), and an
    integer confidence beyond a float's range (OverflowError): DataErrors."""
    words = pd.DataFrame([["x", "y"]] * 4, index=list(PRED), columns=["a", "b"])
    with pytest.raises(DataError, match="posteriors must hold probabilities: could not convert string"):
        evaluate_labels(PRED, TRUTH, posteriors=words)
    with pytest.raises(DataError, match="posteriors holds complex numbers"):
        evaluate_labels(PRED, TRUTH, posteriors=PROBA.astype(complex))
    with pytest.raises(DataError, match="confidence of task 't1' is 1000.*not a probability"):
        evaluate_labels(PRED, TRUTH, confidence={"t1": 10**400, "t2": 0.8, "t3": 0.6, "t4": 0.7})
    assert evaluate_labels(PRED, TRUTH, posteriors=PROBA.astype(str)).ece == pytest.approx(  # numbers as text: read
        evaluate_labels(PRED, TRUTH, posteriors=PROBA).ece)


def test_the_ece_does_not_depend_on_the_order_of_tied_confidences():
    """30 tasks in 15 bins of 2: t00 at .5 (right), 29 at exactly 1.0 of which t17 is wrong.  Ties were binned in
    the order given, so t17's place in the file chose its bin partner: ECE 2/30 × (.25) + ... = 0.0167 with t17
    first, 0.05 with it later.  Ties now go by task name: one figure for any order."""
    tasks = [f"t{i:02d}" for i in range(30)]
    truth = dict.fromkeys(tasks, "a")
    pred = dict(truth, t17="b")
    conf = dict.fromkeys(tasks, 1.0)
    conf["t00"] = 0.5
    figures = set()
    for first in (["t00", "t17"], ["t29", "t00"], list(reversed(tasks))):
        order = first + [t for t in tasks if t not in first]
        ev = evaluate_labels({t: pred[t] for t in order}, truth, confidence={t: conf[t] for t in order})
        figures.add((ev.ece, tuple(b.accuracy for b in ev.reliability)))
    assert len(figures) == 1
    # by name: bin 1 (t00 .5 right, t01 1.0 right) |1 - .75|, t17's bin (t17, t18) |.5 - 1|
    assert figures.pop()[0] == pytest.approx(2 / 30 * (0.25 + 0.5))
