"""crowdagg.crowdkit.metrics: crowd-kit's data and worker metrics -- crowd-kit's documented examples, slow obvious
references, and crowd-kit itself on real datasets (equal to 1e-12)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest
from pandas.testing import assert_index_equal, assert_series_equal

from crowdagg.crowdkit import MajorityVote, Wawa
from crowdagg.crowdkit.aggregation.utils import get_accuracy
from crowdagg.crowdkit.metrics import accuracy_on_aggregates, alpha_krippendorff, consistency, uncertainty
from crowdagg.crowdkit.metrics.data import alpha_krippendorff as alpha_by_path
from crowdagg.crowdkit.metrics.workers import accuracy_on_aggregates as accuracy_by_path
from crowdagg.kernels.agreement import group_counts, one_coin_entropy

from .crowds import TOY_SKILLS, skills_series
from .oracle import SMALL, ck, quiet

XY = pd.DataFrame.from_records([
    {"task": "X", "worker": "A", "label": "Yes"}, {"task": "X", "worker": "B", "label": "No"},
    {"task": "Y", "worker": "A", "label": "Yes"}, {"task": "Y", "worker": "B", "label": "Yes"},
])
#: real datasets for the comparisons with crowd-kit (its metrics apply a Python function per answer and label:
#: seconds each on these, a minute on the largest); binary numbers, binary text, eight classes
REAL = ["bluebird", "cf", "labelme"]
EXACT = {"rtol": 1e-12, "atol": 1e-12}


def _frame(task, worker, label) -> pd.DataFrame:
    return pd.DataFrame({"task": task, "worker": worker, "label": label})


def _random_crowd(seed: int, n_tasks: int = 30, n_workers: int = 7, k: int = 4) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = [(f"t{t}", f"w{w}", f"c{rng.integers(k)}") for t in range(n_tasks) for w in range(n_workers)
            if rng.random() < 0.5]
    return pd.DataFrame(rows, columns=["task", "worker", "label"])


# ----------------------------------------------------------------------------- crowd-kit's documented examples
@pytest.mark.quick
def test_crowd_kits_examples():
    agree = _frame(["X", "X", "Y", "Y"], ["A", "B", "A", "B"], ["Yes", "Yes", "No", "No"])
    assert alpha_krippendorff(agree) == 1.0
    partly = pd.concat([agree, _frame(["Z", "Z"], ["A", "B"], ["Yes", "No"])], ignore_index=True)
    assert alpha_krippendorff(partly) == pytest.approx(0.4444444444444444, rel=1e-15)
    assert uncertainty(_frame(["X", "X"], ["A", "B"], ["Yes", "Yes"])) == 0.0
    assert uncertainty(_frame(["X"] * 3, ["A", "B", "C"], ["Yes", "No", "Maybe"])) == pytest.approx(math.log(3))
    skills = pd.Series([1, 1], index=["A", "B"])
    by_task = uncertainty(XY, workers_skills=skills, compute_by="task", aggregate=False)
    assert_series_equal(by_task, pd.Series([math.log(2), 0.0], index=pd.Index(["X", "Y"], name="task")))
    by_worker = uncertainty(XY, workers_skills=skills, compute_by="worker", aggregate=False)
    assert_series_equal(by_worker, pd.Series([0.0, math.log(2)], index=pd.Index(["A", "B"], name="worker")))
    # crowd-kit's import paths
    assert alpha_by_path is alpha_krippendorff and accuracy_by_path is accuracy_on_aggregates


def test_accuracy_on_aggregates_is_the_share_of_answers_equal_to_the_vote(toy):
    by_worker = accuracy_on_aggregates(toy, by="worker")
    assert_series_equal(by_worker, skills_series([f"w{i}" for i in range(1, 6)], TOY_SKILLS).rename(None))
    assert accuracy_on_aggregates(toy) == pytest.approx(17 / 24)  # crowd-kit's 0.7083333333333334
    votes = MajorityVote().fit_predict(toy)
    assert accuracy_on_aggregates(toy, aggregator=None, aggregates=votes) == accuracy_on_aggregates(toy)
    with pytest.raises(ValueError, match="give an aggregator or the aggregates"):
        accuracy_on_aggregates(toy, aggregator=None)
    # a repeated identical answer counts once, as crowd-kit's get_accuracy
    twice = pd.concat([toy, toy.iloc[:1]], ignore_index=True)
    assert accuracy_on_aggregates(twice, aggregates=votes) == accuracy_on_aggregates(toy, aggregates=votes)
    assert get_accuracy(toy, votes.iloc[:2], by="task").index.tolist() == sorted(votes.index[:2])


def test_consistency_is_the_one_coin_posterior_of_the_vote():
    # X: A says Yes, B says No; skills A .9, B .6; K = 2: P(Yes) ∝ .9 × .4, P(No) ∝ .1 × .6; the vote (a tie) is
    # the first label, Yes.  Y: both say Yes: .9 × .6 against .1 × .4
    skills = pd.Series({"A": 0.9, "B": 0.6})
    by_task = consistency(XY, workers_skills=skills, by_task=True)
    expected = [0.36 / (0.36 + 0.06), 0.54 / (0.54 + 0.04)]
    assert_series_equal(by_task, pd.Series(expected, index=pd.Index(["X", "Y"], name="task")), rtol=1e-14)
    assert consistency(XY, workers_skills=skills) == pytest.approx(np.mean(expected), rel=1e-14)
    # the aggregator's skills by default: majority vote's (A 1, B 1/2)
    assert consistency(XY) == pytest.approx((1.0 + 1.0) / 2)
    assert consistency(XY, aggregator=Wawa()) == consistency(XY, workers_skills=Wawa().fit(XY).skills_)


def _one_coin_entropy_slowly(frame: pd.DataFrame, skills: pd.Series, by: str) -> pd.Series:
    labels = list(pd.unique(frame["label"]))
    k = len(labels)
    out = {}
    for key, group in frame.groupby(by):
        mass = np.zeros(k)
        for _, row in group.iterrows():
            s = skills[row["worker"]]
            mass += [s if c == row["label"] else (1 - s) / (k - 1) for c in labels]
        p = mass / mass.sum()
        out[key] = -sum(q * math.log(q) for q in p if q > 0)
    return pd.Series(out).rename_axis(by)


@pytest.mark.parametrize("by", ["task", "worker"])
def test_uncertainty_with_skills_against_a_slow_reference(by):
    frame = _random_crowd(3)
    skills = pd.Series(np.random.default_rng(4).uniform(0, 1, 7), index=[f"w{w}" for w in range(7)])
    skills.iloc[0], skills.iloc[1] = 0.0, 1.0  # the ends: a label of probability 0
    got = uncertainty(frame, workers_skills=skills, compute_by=by, aggregate=False)
    assert_series_equal(got, _one_coin_entropy_slowly(frame, skills, by), **EXACT)
    assert uncertainty(frame, workers_skills=skills, compute_by=by) == pytest.approx(got.mean(), rel=1e-14)


def test_one_coin_entropy_with_skills_one_is_the_answers_entropy():
    rng = np.random.default_rng(5)
    task = np.sort(rng.integers(0, 40, 300))
    ptr = np.searchsorted(task, np.arange(41))
    worker, label = rng.integers(0, 9, 300), rng.integers(0, 5, 300)
    np.testing.assert_allclose(one_coin_entropy(ptr, worker, label, np.ones(9), 5), group_counts(ptr, label, 5)[2],
                               rtol=1e-14, atol=1e-15)


def _alpha_slowly(frame: pd.DataFrame, distance) -> float:
    """Krippendorff's alpha from its definition: pairs of answers within a task, against all pairs."""
    units = [g["label"].tolist() for _, g in frame.groupby("task") if len(g) >= 2]
    values = [v for u in units for v in u]
    n = len(values)
    observed = sum(sum(distance(a, b) for a, b in itertools.permutations(u, 2)) / (len(u) - 1) for u in units) / n
    expected = sum(distance(a, b) for a, b in itertools.permutations(values, 2)) / (n * (n - 1))
    return 1 - observed / expected


def test_alpha_with_a_distance_against_its_definition():
    frame = _random_crowd(6, k=5)
    frame["label"] = frame["label"].str[1:].astype(int)

    def squared(a, b):
        return float((a - b) ** 2)

    def binary(a, b):
        return float(a != b)

    assert alpha_krippendorff(frame, squared) == pytest.approx(_alpha_slowly(frame, squared), rel=1e-12)
    assert alpha_krippendorff(frame, binary) == pytest.approx(_alpha_slowly(frame, binary), rel=1e-12)
    assert alpha_krippendorff(frame, binary) == pytest.approx(alpha_krippendorff(frame), rel=1e-12)


def test_bad_input_is_a_clear_error():
    with pytest.raises(TypeError, match="pandas DataFrame"):
        uncertainty(XY.to_dict())
    with pytest.raises(KeyError):
        alpha_krippendorff(XY.drop(columns="label"))
    with pytest.raises(ValueError, match=r"1 workers have no skill \(first 'B': missing\)"):
        uncertainty(XY, workers_skills=pd.Series({"A": 0.5}))
    with pytest.raises(ValueError, match=r"a skill outside \[0, 1\] \(first 'A': 1.5\)"):
        consistency(XY, workers_skills=pd.Series({"A": 1.5, "B": 0.5}))
    with pytest.raises(ValueError, match="compute_by must be 'task' or 'worker'"):
        uncertainty(XY, compute_by="label")
    with pytest.raises(ValueError, match="no task has two answers"):
        alpha_krippendorff(_frame(["X", "Y"], ["A", "A"], ["Yes", "No"]))
    with pytest.raises(ValueError, match="no answers"):
        alpha_krippendorff(_frame([], [], []))
    assert alpha_krippendorff(_frame(["X", "Y"], ["A", "A"], ["Yes", "Yes"])) == 1.0  # one label: NLTK's 1

    def text(a, b):
        return None

    with pytest.raises(ValueError, match="distance\\('Yes', 'Yes'\\) gave None"):
        alpha_krippendorff(XY, text)

    class NoSkills:
        def fit(self, data):
            return self

        def fit_predict(self, data):
            return MajorityVote().fit_predict(data)

    with pytest.raises(ValueError, match="NoSkills has no skills_: give workers_skills"):
        consistency(XY, aggregator=NoSkills())


# ----------------------------------------------------------------------------- crowd-kit itself, on real sets
def _metrics():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        data = pytest.importorskip("crowdkit.metrics.data")
        workers = pytest.importorskip("crowdkit.metrics.workers")
    return data, workers


def _same(mine, theirs) -> None:
    if isinstance(theirs, pd.Series):
        assert_index_equal(mine.index, theirs.index, exact=True)
        assert_series_equal(mine, theirs, check_exact=False, **EXACT)
    else:
        assert isinstance(mine, float) and mine == pytest.approx(float(theirs), **{"rel": 1e-12, "abs": 1e-12})


@pytest.mark.parametrize("name", REAL)
def test_alpha_krippendorff_as_crowd_kit(answers, name):
    data = answers(name)
    theirs, _ = _metrics()
    _same(alpha_krippendorff(data), quiet(lambda: theirs.alpha_krippendorff(data)))
    if name == "bluebird":  # numbers: NLTK's interval distance too
        from nltk.metrics.distance import interval_distance

        _same(alpha_krippendorff(data, interval_distance),
              quiet(lambda: theirs.alpha_krippendorff(data, interval_distance)))


@pytest.mark.parametrize("name", REAL)
def test_uncertainty_as_crowd_kit(answers, name):
    data = answers(name)
    theirs, _ = _metrics()
    _same(uncertainty(data), quiet(lambda: theirs.uncertainty(data)))
    for by in ("task", "worker"):
        _same(uncertainty(data, compute_by=by, aggregate=False),
              quiet(lambda by=by: theirs.uncertainty(data, compute_by=by, aggregate=False)))
    skills = quiet(lambda: ck.Wawa().fit(data).skills_)
    _same(uncertainty(data, workers_skills=skills, aggregate=False),
          quiet(lambda: theirs.uncertainty(data, workers_skills=skills, aggregate=False)))
    # the skills of an aggregator: ours and crowd-kit's majority vote, each on its own side
    _same(uncertainty(data, aggregator=MajorityVote(), compute_by="worker"),
          quiet(lambda: theirs.uncertainty(data, aggregator=ck.MajorityVote(), compute_by="worker")))


@pytest.mark.parametrize("name", REAL)
def test_consistency_as_crowd_kit(answers, name):
    data = answers(name)
    theirs, _ = _metrics()
    _same(consistency(data), quiet(lambda: theirs.consistency(data)))
    _same(consistency(data, by_task=True), quiet(lambda: theirs.consistency(data, by_task=True)))
    skills = quiet(lambda: ck.Wawa().fit(data).skills_)
    _same(quiet(lambda: consistency(data, workers_skills=skills, aggregator=ck.Wawa(), by_task=True)),
          quiet(lambda: theirs.consistency(data, workers_skills=skills, aggregator=ck.Wawa(), by_task=True)))


@pytest.mark.parametrize("name", REAL)
def test_accuracy_on_aggregates_as_crowd_kit(answers, name):
    data = answers(name)
    _, theirs = _metrics()
    _same(accuracy_on_aggregates(data), quiet(lambda: theirs.accuracy_on_aggregates(data)))
    _same(accuracy_on_aggregates(data, by="worker"), quiet(lambda: theirs.accuracy_on_aggregates(data, by="worker")))
    votes = quiet(lambda: ck.Wawa().fit_predict(data)).iloc[::2]  # some tasks without an aggregate
    _same(accuracy_on_aggregates(data, aggregates=votes, by="task"),
          quiet(lambda: theirs.accuracy_on_aggregates(data, aggregates=votes, by="task")))


#: crowd-kit fails on these (boolean labels become column names it then indexes with; NLTK sorts ids of mixed
#: types); we answer, and compare with the answers' own figures instead
CROWD_KIT_FAILS = {"bool": ("uncertainty", "consistency"), "mixed ids": ("alpha_krippendorff",)}


@pytest.mark.parametrize("name", [n for n in SMALL if n != "empty"])
def test_small_frames_as_crowd_kit(name):
    data = SMALL[name]
    theirs, workers = _metrics()
    calls = {
        "alpha_krippendorff": (alpha_krippendorff, theirs.alpha_krippendorff, {}),
        "uncertainty": (uncertainty, theirs.uncertainty, {"compute_by": "worker", "aggregate": False}),
        "consistency": (consistency, theirs.consistency, {"by_task": True}),
        "accuracy_on_aggregates": (accuracy_on_aggregates, workers.accuracy_on_aggregates, {"by": "worker"}),
    }
    for fn, (mine, crowd_kit, kwargs) in calls.items():
        if fn in CROWD_KIT_FAILS.get(name, ()):
            with pytest.raises((IndexError, ValueError, TypeError)):
                quiet(lambda crowd_kit=crowd_kit, kwargs=kwargs: crowd_kit(data, **kwargs))
            continue
        _same(mine(data, **kwargs), quiet(lambda crowd_kit=crowd_kit, kwargs=kwargs: crowd_kit(data, **kwargs)))
    if name == "bool":  # a: False, False, True; b: True, True
        by_worker = uncertainty(data, compute_by="worker", aggregate=False)
        np.testing.assert_allclose(by_worker, [-(2 / 3) * math.log(2 / 3) - (1 / 3) * math.log(1 / 3), 0.0])
    if name == "mixed ids":  # t1/1: x y; a: y y; 2: x x -> one disagreement in three pairs of values
        assert alpha_krippendorff(data) == pytest.approx(alpha_krippendorff(SMALL["mixed ids"].astype(str)))


def test_get_accuracy_by_label_and_what_it_refuses():
    data = _frame(["t1", "t1", "t2", "t2", "t2"], ["a", "b", "a", "b", "b"], ["x", "y", "y", "y", "y"])
    truth = pd.Series({"t1": "x", "t2": "y"})
    # b's repeated 'y' on t2 counts once: x right 1/1, y right 2/3 (b on t1 wrong; a and b on t2 right)
    assert_series_equal(get_accuracy(data, truth, by="label"), pd.Series([1.0, 2 / 3], index=pd.Index(
        ["x", "y"], name="label")))
    assert get_accuracy(data, truth) == pytest.approx(3 / 4)
    assert math.isnan(get_accuracy(data, pd.Series({"t9": "x"})))  # no graded answer
    with pytest.raises(KeyError):
        get_accuracy(data, truth, by="colour")
    with pytest.raises(ValueError, match="'weight' column"):
        get_accuracy(data.assign(weight=2.0), truth)
