"""Numeric predictions against numeric truth (``evaluate --numeric``)."""

from __future__ import annotations

import numpy as np
import pytest

from crowdagg.errors import CrowdaggWarning, DataError
from crowdagg.io.read import read_task_values
from crowdagg.reports.numeric import evaluate_values, summary_line


@pytest.mark.quick
def test_the_scores_are_numpys(rng):
    truth = {f"t{i}": float(v) for i, v in enumerate(rng.normal(0, 10, 50))}
    pred = {t: v + float(rng.normal(1, 2)) for t, v in list(truth.items())[:40]} | {"extra": 3.0}
    ev = evaluate_values(pred, truth)
    p = np.array([pred[f"t{i}"] for i in range(40)])
    y = np.array([truth[f"t{i}"] for i in range(40)])
    assert ev.mae == pytest.approx(np.mean(np.abs(p - y))) and ev.rmse == pytest.approx(np.sqrt(np.mean((p - y) ** 2)))
    assert ev.pearson == pytest.approx(np.corrcoef(p, y)[0, 1]) and ev.bias == pytest.approx(np.mean(p - y))
    assert (ev.n_compared, ev.n_without_truth, ev.n_truth_unpredicted) == (40, 1, 10)
    assert summary_line(ev).endswith("(40 tasks compared, 1 without truth, 10 truth task(s) not in the output)")


def test_undefined_correlation_and_nothing_in_common():
    assert evaluate_values({"a": 1.0, "b": 1.0}, {"a": 0.0, "b": 2.0}).pearson is None  # constant predictions
    assert evaluate_values({"a": 1.0}, {"a": 0.0}).as_dict()["pearson"] is None
    with pytest.raises(DataError, match="no task of the 1 predictions has a true value"):
        evaluate_values({"a": 1.0}, {"b": 1.0})


def test_reading_values_names_the_bad_line(tmp_path):
    p = tmp_path / "v.csv"
    p.write_text("task,value\na,1.5\nb,\nc,x\n")
    with pytest.raises(DataError, match=r"predicted value 'x' of task 'c' at .*v.csv line 4 is not a number"):
        with pytest.warns(CrowdaggWarning, match="1 task\\(s\\) without a value"):
            read_task_values(p, what="predicted")
    p.write_text("task,value\na,1.5\nb,\n")
    with pytest.warns(CrowdaggWarning, match="1 task\\(s\\) without a value"):
        assert read_task_values(p) == {"a": 1.5}


@pytest.mark.quick
def test_values_near_the_ends_of_the_float_range_are_scored_not_overflowed():
    """Hostile input: predictions near 1e300 gave an RMSE of inf (written as 'inf') and a correlation of -0.0
    where it is -1; values near 1e-300 had their squares underflow.  The scores are now those of the same
    values rescaled by a power of two; errors that themselves pass the largest float are a DataError."""
    ev = evaluate_values({"a": 1e300, "b": -1e300}, {"a": 1.0, "b": 3.0})
    assert ev.mae == 1e300 and ev.rmse == pytest.approx(1e300, rel=1e-15) and ev.bias == 0.0
    assert ev.pearson == pytest.approx(-1.0)
    small = {t: np.ldexp(v, -1000) for t, v in {"a": 1.0, "b": 2.0, "c": 4.0}.items()}
    ev = evaluate_values(small, {"a": 0.0, "b": 0.0, "c": 0.0})
    assert ev.rmse == pytest.approx(np.ldexp(np.sqrt(7.0), -1000), rel=1e-14) and ev.rmse > 0
    ev = evaluate_values(small, {t: 2 * v for t, v in small.items()})
    assert ev.pearson == pytest.approx(1.0) and ev.bias == pytest.approx(-np.ldexp(7 / 3, -1000), rel=1e-14)
    with pytest.raises(DataError, match=r"the mae, rmse of these values exceed the largest float"):
        evaluate_values({"a": 1.7e308, "b": -1.7e308}, {"a": -1.7e308, "b": 1.7e308})


@pytest.mark.quick
def test_a_task_listed_twice_with_the_same_number_written_two_ways_is_one_value(tmp_path):
    """Hostile input: a truth file listing t1 as '1' and again as '1.0' was refused as 'two different truth
    labels'; the same number is one value, and two numbers that differ are named values."""
    p = tmp_path / "truth.csv"
    p.write_text("task,value\nt1,1\nt1,1.0\nt2,3\nt2,3e0\n")
    assert read_task_values(p) == {"t1": 1.0, "t2": 3.0}
    p.write_text("task,value\nt1,1\nt1,1.5\n")
    with pytest.raises(DataError, match=r"task 't1' has two different truth values \('1' and '1.5'; second at .* line 3"):
        read_task_values(p)
