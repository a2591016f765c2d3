"""Metrics of predicted labels against truth."""

from __future__ import annotations

import pytest

from crowdagg.errors import CrowdaggWarning, DataError
from crowdagg.reports.evaluate import evaluate_labels


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


# --------------------------------------------------------------------------- scoring a run (--truth)
def _run(rows: str, truth: dict[str, str]):
    import io

    from crowdagg import aggregate, load_annotations
    from crowdagg.reports.evaluate import evaluate_run, summary_line

    data = load_annotations(io.BytesIO(rows.encode()), input_format="csv")
    result = aggregate(data, "mv")
    ev, note = evaluate_run(data, result, truth, None)
    return ev, note, summary_line(ev, note)


def test_a_task_whose_answers_were_all_left_out_is_not_scored(recwarn):
    """t2's only answer is blank (skipped): its label is the prior's guess, which the score must not count."""
    rows = "task,worker,label\nt1,w1,a\nt1,w2,a\nt3,w1,b\nt2,w1,\n"
    # t2 would be labelled 'a' (the prior's argmax), wrong against the truth 'b': accuracy 2/3 if it were scored
    ev, note, line = _run(rows, {"t1": "a", "t2": "b", "t3": "b", "t9": "a"})
    assert ev.accuracy == 1.0 and ev.n_compared == 2
    assert ev.n_without_truth == 0 and ev.n_truth_unpredicted == 1  # t9 alone: t2 is in the output
    assert note == ", 1 task(s) with no answers not scored"
    assert line.endswith("(2 tasks compared, 0 without truth, 1 truth task(s) not in the output, "
                         "1 task(s) with no answers not scored)")


def test_truth_only_on_unanswered_tasks_is_an_error(recwarn):
    rows = "task,worker,label\nt1,w1,a\nt2,w1,\n"
    with pytest.raises(DataError, match=r"every task of truth found in the answers \(1\) has no answers left"):
        _run(rows, {"t2": "a"})


def test_the_summary_line_counts_truth_tasks_the_output_lacks():
    rows = "task,worker,label\nt1,w1,a\nt2,w1,b\n"
    ev, note, line = _run(rows, {"t1": "a", "t7": "b", "t8": "b"})
    assert note == "" and ev.n_truth_unpredicted == 2
    assert line.endswith("(1 tasks compared, 1 without truth, 2 truth task(s) not in the output)")


@pytest.mark.parametrize("kind", ["int", "float", "bool", "str", "numpy"])
def test_every_metric_is_computed_for_any_label_type(kind):
    import numpy as np

    cast = {"int": int, "float": float, "bool": bool, "str": str, "numpy": np.int64}[kind]
    truth = {f"t{i}": cast(v) for i, v in enumerate([1, 1, 1, 0, 0])}
    pred = {f"t{i}": cast(v) for i, v in enumerate([1, 1, 0, 0, 1])}
    ev = evaluate_labels(pred, truth)
    names = [str(cast(0)), str(cast(1))]
    # class 1: tp 2, 3 true, 3 predicted (F1 2/3); class 0: tp 1, 2 true, 2 predicted (F1 1/2)
    assert ev.accuracy == pytest.approx(0.6)
    assert ev.recall == pytest.approx({names[0]: 0.5, names[1]: 2 / 3})
    assert ev.macro_f1 == pytest.approx((2 / 3 + 1 / 2) / 2)
    assert ev.classes == names


def test_integer_series_from_read_csv_are_scored_as_their_text_twins():
    import io

    import pandas as pd

    text = "task,label\n1,0\n2,1\n3,1\n4,2\n5,10\n"
    truth = pd.read_csv(io.StringIO(text)).set_index("task")["label"]
    pred = truth.copy()
    pred.iloc[1] = 0
    as_int = evaluate_labels(pred, truth)
    as_str = evaluate_labels(pred.astype(str), truth.astype(str))
    assert as_int.macro_f1 == pytest.approx(as_str.macro_f1)
    assert as_int.macro_f1 == pytest.approx((2 / 3 + 2 / 3 + 1 + 1) / 4)  # 0: F1 2/3, 1: F1 2/3
    assert as_int.recall == as_str.recall == {"0": 1.0, "1": 0.5, "2": 1.0, "10": 1.0}
    assert as_int.classes == ["0", "1", "2", "10"]  # numerically, as the CLI orders classes


def test_a_missing_label_is_refused_by_task():
    with pytest.raises(DataError, match=r"truth.*task 'b'"):
        evaluate_labels({"a": 1, "b": 0}, {"a": 1.0, "b": float("nan")})
    with pytest.raises(DataError, match=r"predicted.*task 'a'"):
        evaluate_labels({"a": None, "b": 0}, {"a": 1, "b": 0})


def test_mixed_label_types_are_ordered_and_named_without_a_type_error(recwarn):
    ev = evaluate_labels({"a": 1, "b": "x", "c": "1"}, {"a": 1, "b": "x", "c": "1"})
    assert ev.accuracy == 1.0
    assert ev.recall == {"1": 1.0, "'1'": 1.0, "x": 1.0}


def test_integer_labels_get_their_recall_and_macro_f1():
    """The README's pandas labels (``labels_series()`` of an int column): the classes were inferred as text, so
    ``recall`` was empty and ``macro_f1`` NaN although accuracy was right."""
    import pandas as pd

    predicted = pd.Series([0, 1, 1, 0, 1], index=["t1", "t2", "t3", "t4", "t5"])
    truth = pd.Series([0, 1, 0, 0, 1], index=["t1", "t2", "t3", "t4", "t5"])
    ev = evaluate_labels(predicted, truth)
    assert ev.accuracy == pytest.approx(0.8)
    assert ev.recall == pytest.approx({"0": 2 / 3, "1": 1.0})
    assert ev.macro_f1 == pytest.approx((0.8 + 0.8) / 2)  # F1 of 0: 2*2/(3+2); of 1: 2*2/(2+3)
    assert ev.classes == ["0", "1"]
    as_text = evaluate_labels(predicted.astype(str), truth.astype(str))
    assert (as_text.recall, as_text.macro_f1, as_text.classes) == (ev.recall, ev.macro_f1, ev.classes)


def test_labels_of_mixed_types_are_compared_not_sorted():
    # the warning's sorted() of the truth's labels raised TypeError: '<' not supported between str and int
    with pytest.warns(CrowdaggWarning, match="absent from the truth"):
        ev = evaluate_labels({1: "a", 2: "b", 3: 3}, {1: "a", 2: 3, 3: 3})
    assert ev.accuracy == pytest.approx(2 / 3) and ev.recall == pytest.approx({"3": 0.5, "a": 1.0})


def test_labels_equal_only_as_text_are_wrong_with_a_warning():
    # 1 and "1" on both sides (a column read as numbers on one side, as text on the other, mixed in each)
    # scored 0.0 without a word: every predicted label also occurs in the truth, so no class looked foreign
    with pytest.warns(CrowdaggWarning, match=r"2 of 2 compared prediction\(s\) equal their truth label as text"):
        ev = evaluate_labels({"a": 1, "b": "1"}, {"a": "1", "b": 1})
    assert ev.accuracy == 0.0


def test_a_tuple_label_is_one_class_and_a_list_label_is_refused():
    # np.asarray made the tuples a 2-D array (then TypeError: unhashable type: 'list'), and `pred == c` compared
    # a tuple class element by element (accuracy 1.0 with recall {} and macro_f1 NaN)
    ev = evaluate_labels({"a": (1, 2), "b": (1, 2), "c": (3, 4)}, {"a": (1, 2), "b": (3, 4), "c": (3, 4)})
    assert ev.accuracy == pytest.approx(2 / 3)
    assert ev.recall == pytest.approx({"(1, 2)": 1.0, "(3, 4)": 0.5})
    with pytest.raises(DataError, match=r"predicted label of task 'a' is a list"):
        evaluate_labels({"a": [1]}, {"a": 1})


def test_pandas_nullable_and_categorical_labels():
    import pandas as pd

    idx = ["a", "b", "c"]
    ev = evaluate_labels(pd.Series([1, 2, 1], index=idx, dtype="Int64"), pd.Series([1, 2, 2], index=idx, dtype="Int64"))
    assert ev.recall == pytest.approx({"1": 1.0, "2": 0.5}) and ev.accuracy == pytest.approx(2 / 3)
    cat = pd.Series(pd.Categorical(["x", "y", "x"], categories=["x", "y", "z"]), index=idx)
    ev = evaluate_labels(cat, pd.Series(["x", "y", "y"], index=idx))
    assert ev.recall == pytest.approx({"x": 1.0, "y": 0.5})
    with pytest.raises(DataError, match=r"predicted has no label for task 'b' \(<NA>\)"):
        evaluate_labels(pd.Series([True, pd.NA], index=["a", "b"], dtype="boolean"), {"a": True, "b": False})
