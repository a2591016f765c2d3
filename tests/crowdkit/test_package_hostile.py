"""The crowd-kit surface as a package (crowdagg/crowdkit/): every public name of the one-module
``crowdagg.crowdkit`` it replaced still imports, ``crowdagg.crowdkit.aggregation`` holds the same objects under
crowd-kit's module path, and fitted objects survive pickling -- including pickles that name the old module."""

from __future__ import annotations

import copy
import pickle

import pandas as pd
import pytest

import crowdagg.crowdkit as ck
import crowdagg.crowdkit.aggregation as aggregation

#: What the one-module crowdagg.crowdkit (before the package) offered by public name: its __all__, and the two
#: constants it defined at the top level.
OLD_PUBLIC = ("GLAD", "DawidSkene", "MajorityVote", "NotFittedError", "OneCoinDawidSkene", "Wawa", "EPS", "COLUMNS")
#: Each class with settings that fit the toy crowd quickly.
CLASSES = [("MajorityVote", {}), ("Wawa", {}), ("DawidSkene", {"n_iter": 20}), ("OneCoinDawidSkene", {"n_iter": 20}),
           ("GLAD", {"n_iter": 5})]


@pytest.mark.quick
def test_every_public_name_of_the_old_module_still_imports():
    from crowdagg.crowdkit import COLUMNS, EPS  # the constants a user could import beside the classes

    assert COLUMNS == ["task", "worker", "label"] and EPS == 1e-10
    for name in OLD_PUBLIC:
        assert hasattr(ck, name), name
    for name in aggregation.__all__:  # one object under both paths: isinstance and monkeypatching shared
        assert getattr(aggregation, name) is getattr(ck, name)
    assert sorted(ck.__all__) == sorted(aggregation.__all__)


@pytest.mark.quick
@pytest.mark.parametrize("name, settings", CLASSES)
def test_a_fitted_object_pickles_and_so_does_one_pickled_under_the_old_module_path(toy, name, settings):
    model = getattr(ck, name)(**settings)
    labels = model.fit_predict(toy)
    for again in (pickle.loads(pickle.dumps(model)), copy.deepcopy(model)):
        pd.testing.assert_series_equal(again.labels_, labels)
        pd.testing.assert_series_equal(again.fit_predict(toy), labels)  # and it fits again
    # a pickle written by the one-module crowdagg.crowdkit names the class there (protocol 2 spells it as text)
    module = type(model).__module__
    assert module.startswith("crowdagg.crowdkit.")
    old = pickle.dumps(model, protocol=2).replace(f"{module}\n{name}\n".encode(), f"crowdagg.crowdkit\n{name}\n".encode())
    assert b"crowdagg.crowdkit\n" + name.encode() in old
    restored = pickle.loads(old)
    assert type(restored) is type(model)
    pd.testing.assert_series_equal(restored.labels_, labels)
