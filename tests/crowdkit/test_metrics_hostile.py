"""crowdagg.crowdkit.metrics and aggregation.utils under hostile input: what the hostile review found and fixed."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from pandas.testing import assert_series_equal

from crowdagg.crowdkit.metrics import consistency, uncertainty

from .oracle import quiet

EMPTY_TEXT = pd.DataFrame({c: pd.Series([], dtype=object) for c in ("task", "worker", "label")})


@pytest.mark.quick
@pytest.mark.parametrize("empty", [EMPTY_TEXT, pd.DataFrame({"task": [], "worker": [], "label": []})])
def test_uncertainty_and_consistency_of_no_answers_are_nan_or_empty(empty):
    """An empty frame was crowdagg's 'at least one class is needed (give n_classes or classes)', a message about
    arguments these functions do not have; crowd-kit answers NaN or an empty Series."""
    for by in ("task", "worker"):
        assert math.isnan(uncertainty(empty, compute_by=by))
        got = uncertainty(empty, compute_by=by, aggregate=False)
        assert got.empty and got.dtype == np.float64 and got.index.name == by
        assert got.index.dtype == empty[by].dtype  # crowd-kit's groupby keeps the column's dtype
    assert math.isnan(consistency(empty))
    by_task = consistency(empty, by_task=True)
    assert by_task.empty and by_task.dtype == np.float64 and by_task.index.name == "task"


def test_uncertainty_of_no_answers_as_crowd_kit():
    theirs = pytest.importorskip("crowdkit.metrics.data")
    for by in ("task", "worker"):
        assert math.isnan(quiet(lambda by=by: theirs.uncertainty(EMPTY_TEXT, compute_by=by)))
        assert_series_equal(uncertainty(EMPTY_TEXT, compute_by=by, aggregate=False),
                            quiet(lambda by=by: theirs.uncertainty(EMPTY_TEXT, compute_by=by, aggregate=False)))


@pytest.mark.quick
@pytest.mark.parametrize("gives", ["x", "1", [1.0, 2.0]])
def test_alpha_with_a_distance_that_gives_no_number_is_a_type_error_naming_it(gives):
    """Text or a sequence was numpy's ``could not convert string to float``, and "1" was read as 1.0; crowd-kit
    raises TypeError (``can't multiply sequence``): so do we, naming the distance's call."""
    from crowdagg.crowdkit.metrics import alpha_krippendorff

    frame = pd.DataFrame({"task": [1, 1, 2, 2], "worker": ["a", "b", "a", "b"], "label": ["x", "y", "x", "x"]})
    with pytest.raises(TypeError, match=r"distance\('x', 'x'\) gave .*: a distance is a number"):
        alpha_krippendorff(frame, lambda a, b: gives)
    # a number of any kind is one: numpy's float32 and bool, Python's int
    nominal = alpha_krippendorff(frame)
    for number in (lambda a, b: np.float32(a != b), lambda a, b: a != b, lambda a, b: int(a != b)):
        assert alpha_krippendorff(frame, number) == pytest.approx(nominal, rel=1e-12)


@pytest.mark.quick
def test_alpha_with_a_distance_refuses_a_table_of_distances_beyond_memory_before_calling_it(monkeypatch):
    """20,000 labels: a 3.2 GB (2.98 GiB) table of distances was allocated, and 4·10⁸ calls of ``distance`` begun, before
    the memory check of the per-task table."""
    from crowdagg.core import memory
    from crowdagg.crowdkit.metrics import alpha_krippendorff
    from crowdagg.errors import ResourceError

    monkeypatch.setattr(memory, "available_bytes", lambda: 2**23 / memory.DEFAULT_FRACTION)  # 8 MiB may be planned
    n = 20_000
    frame = pd.DataFrame({"task": np.arange(n) // 2, "worker": np.arange(n) % 2, "label": np.arange(n)})
    calls = []

    def distance(a, b):
        calls.append(1)
        return float(a != b)

    with pytest.raises(ResourceError, match=r"this needs ~2\.98 GB \(20,000² distances between labels\)"):
        alpha_krippendorff(frame, distance)
    assert not calls
    # small data still fits: one disagreement of three tasks, D_o = 2/6, D_e = 2·3·3/(6·5): alpha = 1 − 5/9
    assert alpha_krippendorff(frame.iloc[:6].assign(label=[0, 1, 0, 0, 1, 1]), distance) == pytest.approx(4 / 9)


XY = pd.DataFrame.from_records([{"task": "X", "worker": "A", "label": "Yes"}, {"task": "X", "worker": "B", "label": "No"}])


@pytest.mark.quick
def test_skills_as_a_one_column_frame_are_taken_and_bad_skills_are_named():
    """A one-column DataFrame of skills (crowd-kit takes one) was pandas' 'Cannot construct a Series from a
    DataFrame'; a worker named twice and text were pandas' and numpy's messages, which named no argument."""
    frame = pd.DataFrame({"s": [0.5, 0.6]}, index=["A", "B"])
    # Yes: 0.5 + 0.4, No: 0.5 + 0.6 -> (0.45, 0.55); the majority vote's label (No, the tie's first in
    # crowd-kit's order) has posterior 0.5·0.6/(0.5·0.6 + 0.5·0.4)
    assert uncertainty(XY, workers_skills=frame) == pytest.approx(-(0.45 * math.log(0.45) + 0.55 * math.log(0.55)),
                                                                  rel=1e-12)
    assert uncertainty(XY, workers_skills=frame) == uncertainty(XY, workers_skills=frame["s"])
    assert consistency(XY, workers_skills=frame) == consistency(XY, workers_skills=frame["s"])
    for call in (uncertainty, consistency):
        with pytest.raises(ValueError, match="a DataFrame of 2 columns"):
            call(XY, workers_skills=frame.assign(t=1.0))
        with pytest.raises(ValueError, match=r"names 1 workers twice \(first 'A'\)"):
            call(XY, workers_skills=pd.Series([0.5, 0.6, 0.7], index=["A", "B", "A"]))
        with pytest.raises(ValueError, match="workers_skills must hold numbers"):
            call(XY, workers_skills=pd.Series(["a", "b"], index=["A", "B"]))


def test_skills_as_a_one_column_frame_as_crowd_kit():
    theirs = pytest.importorskip("crowdkit.metrics.data")
    frame = pd.DataFrame({"s": [0.5, 0.6]}, index=["A", "B"])
    for mine, crowd_kit in ((uncertainty, theirs.uncertainty), (consistency, theirs.consistency)):
        want = quiet(lambda crowd_kit=crowd_kit: crowd_kit(XY, workers_skills=frame))
        assert mine(XY, workers_skills=frame) == pytest.approx(float(want), rel=1e-12, abs=1e-12)


class _Labels:
    """An aggregator whose labels come in another container than a Series (skills 0.7 for everyone)."""

    def __init__(self, wrap) -> None:
        self.wrap = wrap

    def fit(self, data: pd.DataFrame) -> _Labels:
        self.skills_ = pd.Series(0.7, index=sorted(data["worker"].unique()))
        return self

    def fit_predict(self, data: pd.DataFrame):
        from crowdagg.crowdkit import MajorityVote

        self.fit(data)
        return self.wrap(MajorityVote().fit_predict(data))


CROWD = pd.DataFrame({"task": ["t2", "t2", "t2", "t1", "t1", "t3", "t3"], "worker": ["a", "b", "c", "a", "c", "b", "c"],
                      "label": ["x", "x", "y", "y", "y", "x", "y"]})


@pytest.mark.quick
def test_consistency_takes_the_aggregators_labels_as_crowd_kit_assigns_them():
    """A list (by position over the sorted tasks) or a one-column DataFrame of labels: crowd-kit's column
    assignment takes both; they were 'list' object has no attribute 'reindex' and 'Index data must be
    1-dimensional'.  Labels repeated for a task were pandas' 'cannot reindex on an axis with duplicate labels'."""
    want = consistency(CROWD, aggregator=_Labels(lambda s: s), by_task=True)
    # by position: crowd-kit's groupby sorts the tasks (t1, t2, t3); the majority vote gives them as first seen
    for wrap in (lambda s: s.sort_index().tolist(), lambda s: s.sort_index().to_numpy(), lambda s: s.to_frame()):
        assert_series_equal(consistency(CROWD, aggregator=_Labels(wrap), by_task=True), want)
    with pytest.raises(ValueError, match=r"gave \(2,\) labels for 3 tasks"):
        consistency(CROWD, aggregator=_Labels(lambda s: s.tolist()[:2]))
    with pytest.raises(ValueError, match="a DataFrame of 2 columns"):
        consistency(CROWD, aggregator=_Labels(lambda s: s.to_frame().assign(z=1)))
    with pytest.raises(ValueError, match=r"labelled 1 tasks twice \(first 't2'\)"):
        consistency(CROWD, aggregator=_Labels(lambda s: pd.concat([s, s.iloc[:1]])))


def test_consistency_with_labels_in_a_list_or_frame_as_crowd_kit():
    theirs = pytest.importorskip("crowdkit.metrics.data")
    for wrap in (lambda s: s.sort_index().tolist(), lambda s: s.tolist(), lambda s: s.to_frame()):
        want = quiet(lambda wrap=wrap: theirs.consistency(CROWD, aggregator=_Labels(wrap), by_task=True))
        assert_series_equal(consistency(CROWD, aggregator=_Labels(wrap), by_task=True), want, check_exact=False,
                            rtol=1e-12, atol=1e-12)
