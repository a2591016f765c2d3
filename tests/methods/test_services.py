"""Services the base gives every method that declares them: the gold clamp (and, below, the loop's)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from crowdagg.data.annotations import AnnotationSet
from crowdagg.errors import CrowdaggWarning, DataError
from crowdagg.methods import registry
from crowdagg.methods.api import REGISTRY, aggregate, get_method
from crowdagg.methods.base import Aggregator, make_result

GOLD_METHODS = [name for name, m in registry.METHODS.items() if m.gold]


def unanimous() -> AnnotationSet:
    """Tasks t0..t39, three workers each answering 'a' on t0..t19 and 'b' on t20..t39."""
    tasks = [f"t{i}" for i in range(40) for _ in range(3)]
    workers = ["u", "v", "w"] * 40
    labels = ["a" if i < 20 else "b" for i in range(40) for _ in range(3)]
    return AnnotationSet.from_names(tasks, workers, labels)


def test_ds_and_onecoin_declare_gold():
    assert {"ds", "onecoin"} <= set(GOLD_METHODS)


@pytest.mark.parametrize("method", GOLD_METHODS)
def test_gold_tasks_get_one_hot_posteriors_and_their_labels(method):
    data = unanimous()
    gold = {"t0": "b", "t1": "b", "t25": "a"}  # against the crowd's unanimous answers
    res = aggregate(data, method, gold=gold)
    lookup = data.task_lookup()
    for task, label in gold.items():
        row = lookup[task]
        expected = np.eye(2)[data.classes.index(label)]
        np.testing.assert_array_equal(res.posteriors[row], expected)
        assert res.label_names()[row] == label
    free = aggregate(data, method)
    assert free.label_names()[lookup["t0"]] == "a"
    if "refine" in get_method(method).params():
        # a moment method: its moments carry no gold, which clamps the decoding (above) and the refinement's E-steps
        res, free = aggregate(data, method, gold=gold, refine="ds"), aggregate(data, method, refine="ds")
        for task, label in gold.items():
            np.testing.assert_array_equal(res.posteriors[lookup[task]], np.eye(2)[data.classes.index(label)])
    if res.has_confusion:  # gold entered every E-step: the workers' P(answer a | true b) grew from ~0
        assert np.all(res.confusion[:, 1, 0] > free.confusion[:, 1, 0] + 0.02)
    else:  # a worker model of another form: gold moved it too
        assert any(not np.allclose(res.worker_params[p], free.worker_params[p]) for p in res.worker_params)


@pytest.mark.parametrize("method", GOLD_METHODS)
def test_gold_errors_and_warnings_are_the_base_s(method):
    data = unanimous()
    with pytest.raises(DataError, match=r"gold label 'c' of task 't3' is not one of the classes \(a, b\)"):
        aggregate(data, method, gold={"t3": "c"})
    with pytest.warns(CrowdaggWarning, match="1 of 2 gold task"):
        aggregate(data, method, gold={"t3": "a", "nowhere": "b"})


class Recorder(Aggregator):
    """A one-pass method that records what the base resolved for it."""

    name = "recorder"
    seen: list = []

    def _fit(self, data, checked, callback):
        Recorder.seen.append((dict(checked), checked.clamp))
        post = np.full((data.n_tasks, data.n_classes), 1.0 / data.n_classes)
        return make_result(self.name, data, post, np.zeros(data.n_tasks, np.int64), post[0].copy())


@pytest.mark.parametrize("gold_declared", [True, False])
def test_any_method_declaring_gold_gets_the_clamp_from_the_base(monkeypatch, gold_declared):
    spec = dataclasses.replace(registry.METHODS["mv"], name="recorder", target=f"{__name__}:Recorder",
                               gold=gold_declared)
    monkeypatch.setitem(registry.METHODS, "recorder", spec)
    Recorder.seen.clear()
    data = unanimous()
    if gold_declared:
        Recorder(gold={"t2": "b"}).fit(data)
        Recorder().fit(data)
        (params, clamp), (_, no_gold) = Recorder.seen
        assert params == {"seed": 0}
        expected = np.full(data.n_tasks, -1)
        np.testing.assert_array_equal(no_gold, expected)
        expected[data.task_lookup()["t2"]] = 1
        np.testing.assert_array_equal(clamp, expected)
    else:
        Recorder().fit(data)
        assert Recorder.seen[0][1] is None
    assert "recorder" in REGISTRY  # the registry is live (lazy): the declaration set here is seen ...
    monkeypatch.undo()
    assert "recorder" not in REGISTRY  # ... and never leaks out of the test


@pytest.mark.parametrize("method, advice", [("ds", "try another method or a smaller smoothing"),
                                            ("glad", "try another method")])
def test_a_numerical_breakdown_suggests_smoothing_only_to_a_method_that_has_it(method, advice, monkeypatch):
    """(glad, which has no smoothing, was told to try a smaller one.)"""
    from crowdagg.methods import base

    data = AnnotationSet.from_codes([0, 0, 1, 1], [0, 1, 0, 1], [0, 1, 1, 1], n_classes=2)
    monkeypatch.setattr(base, "_check_collapse", lambda *a: None)
    fit = get_method(method)()
    monkeypatch.setattr(type(fit), "_fit", lambda self, d, c, cb, _f=type(fit)._fit: _nan(_f(self, d, c, cb)))
    with pytest.raises(DataError, match=rf"^{method}: the fit broke down numerically .*; {advice}$"):
        fit.fit(data)


def _nan(result):
    result.posteriors[0, 0] = np.nan
    return result


def test_an_aggregators_fit_refuses_a_frame_and_a_callback_that_is_not_callable():
    """ds.fit(DataFrame) raised a bare TypeError; callback=5 Python's TypeError after the first iteration."""
    import pandas as pd

    from crowdagg.errors import UsageError
    from crowdagg.methods.registry import get_method
    from crowdagg.simulate import simulate

    ds = get_method("ds")
    with pytest.raises(UsageError, match=r"^ds.fit\(data\): data must be an AnnotationSet .*got DataFrame$"):
        ds().fit(pd.DataFrame({"task": ["a"], "worker": ["w"], "label": ["x"]}))
    with pytest.raises(UsageError, match="callback must be callable as callback.iteration, objective., got int"):
        ds().fit(simulate(20, 3, 2, 2, seed=1).to_annotations(), callback=5)
