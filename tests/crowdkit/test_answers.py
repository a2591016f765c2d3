"""The shared answers layer (crowdagg/crowdkit/_answers.py) across every class: frame encoding, orders, dtypes,
edge cases and checks, as crowd-kit 1.4.2 gives them (restated here) and against crowd-kit itself."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from pandas.testing import assert_frame_equal, assert_series_equal

from crowdagg import crowdkit as ours
from crowdagg.crowdkit import GLAD, DawidSkene, MajorityVote, OneCoinDawidSkene, Wawa

from .crowds import PANDAS3, SIMPLE_TRUTH, SIMPLE_WORKERS, P, skills_series
from .oracle import SMALL, ck, quiet, same_frame, same_labels, same_series


def test_pandas_2_order(simple, monkeypatch):
    """Under pandas 2 crowd-kit's majority vote sorts tasks and labels: its own tests' values (they assume it)."""
    import sys

    for module in [m for name, m in sys.modules.items() if name.startswith("crowdagg.crowdkit.")]:
        if hasattr(module, "first_appearance"):  # the rule, wherever a module of the surface reads it
            monkeypatch.setattr(module, "first_appearance", lambda: False)
    mv = MajorityVote().fit(simple)
    assert mv.labels_[P + "efd"] == "chicken" and list(mv.probas_.columns) == ["chicken", "goose", "parrot"]
    assert mv.probas_.index.is_monotonic_increasing
    assert_series_equal(mv.skills_, skills_series(SIMPLE_WORKERS, [1 / 3, 1.0, 1.0, 1.0, 1.0, 2 / 3]))
    wawa = Wawa()
    wawa.fit_predict(simple)
    np.testing.assert_allclose(wawa.probas_.loc[P + "efd"], [0.5, 1 / 3, 1 / 6])
    ds = DawidSkene(0).fit(simple)
    assert list(ds.priors_.index) == ["chicken", "goose", "parrot"] and ds.probas_.index.is_monotonic_increasing
    assert list(DawidSkene(3).fit(simple).errors_.columns) == ["chicken", "goose", "parrot"]


# ----------------------------------------------------------------------------- edge cases
@pytest.mark.parametrize("cls", [MajorityVote, Wawa, DawidSkene, OneCoinDawidSkene, GLAD])
@pytest.mark.parametrize("columns", [["worker", "label"], ["worker", "task"], ["task", "label"]])
def test_a_missing_column_is_a_key_error(cls, columns):
    data = pd.DataFrame({c: [{"worker": "w1", "task": "t1", "label": "no"}[c]] for c in columns})
    for method in ("fit_predict", "fit_predict_proba"):
        with pytest.raises(KeyError):
            getattr(cls(), method)(data)


def test_empty_input():
    empty = pd.DataFrame([], columns=["task", "worker", "label"])
    ds = DawidSkene(10).fit(empty)
    assert_frame_equal(ds.probas_, pd.DataFrame(), check_like=True)
    assert_frame_equal(ds.errors_, pd.DataFrame(), check_like=True)
    assert_series_equal(ds.priors_, pd.Series(dtype=float, name="prior"))
    assert_series_equal(ds.labels_, pd.Series(dtype=float, name="agg_label"))
    assert not hasattr(ds, "loss_history_")
    for cls in (MajorityVote, Wawa):
        agg = cls()
        assert agg.fit_predict(empty).empty and agg.labels_.name == "agg_label" and agg.labels_.dtype == object
        assert agg.probas_.empty and agg.probas_.index.name == "task" and agg.probas_.columns.name == "label"
        assert agg.skills_.empty and agg.skills_.index.name == "worker"


def test_a_single_answer():
    one = pd.DataFrame({"task": ["t1"], "worker": ["w1"], "label": ["a"]})
    ds = DawidSkene(10).fit(one)
    assert ds.probas_.loc["t1", "a"] == 1.0 and ds.errors_.iloc[0, 0] == 1.0
    assert ds.loss_history_ == [0.0, 0.0]
    oc = OneCoinDawidSkene(10).fit(one)
    assert oc.errors_.iloc[0, 0] == pytest.approx(1 - 1e-10) and oc.loss_history_ == pytest.approx([-1e-10, -1e-10])
    mv = MajorityVote().fit(one)
    assert mv.labels_.tolist() == ["a"] and mv.skills_.tolist() == [1.0]


def test_zero_iterations_is_the_majority_vote(simple):
    labels = DawidSkene(n_iter=0).fit_predict(simple)
    assert sorted(labels.index) == sorted(P + t for t in SIMPLE_TRUTH)
    assert_series_equal(labels, MajorityVote().fit_predict(simple))


@pytest.mark.parametrize("cls", [MajorityVote, Wawa, DawidSkene])
def test_int_labels_including_a_task_where_everyone_says_zero(cls):
    data = pd.DataFrame({"task": ["t1", "t1", "t1", "t2", "t2", "t2"], "worker": ["w1", "w2", "w3"] * 2,
                         "label": [1, 1, 0, 0, 0, 0]})
    labels = cls().fit_predict(data)
    assert labels.dtype == np.int64 and labels.sort_index().tolist() == [1, 0]


# ----------------------------------------------------------------------------- where we differ from crowd-kit on purpose
def test_nan_labels_are_no_answers():
    data = pd.DataFrame({"task": ["t1", "t1", "t2", "t2", "t3"], "worker": ["w1", "w2", "w1", "w2", "w1"],
                         "label": ["a", "b", "b", "b", np.nan]})
    ds = DawidSkene(2).fit(data)
    assert ds.probas_.index.tolist() == ["t1", "t2"]  # crowd-kit keeps t3 with its prior as a row
    assert ds.loss_history_[0] == pytest.approx(DawidSkene(2).fit(data.iloc[:4]).loss_history_[0])
    # a worker whose only answer is NaN: crowd-kit's Wawa votes without them; so do we (no missing-skill error)
    only_nan = pd.DataFrame({"task": ["t1", "t1"], "worker": ["w1", "w2"], "label": ["a", np.nan]})
    assert Wawa().fit_predict(only_nan).tolist() == ["a"]
    mv = MajorityVote().fit(pd.DataFrame({"task": ["t1", "t1", "t1"], "worker": ["w1", "w2", "w1"],
                                          "label": ["a", "a", np.nan]}))
    assert mv.skills_.tolist() == [1.0, 1.0]  # crowd-kit counts w1's NaN answer as wrong (0.5)


def test_labels_and_ids_of_mixed_types_and_parameter_checks(toy):
    # crowd-kit answers with labels or ids of mixed types (pandas orders them numbers first, then text): so do we
    mixed = pd.DataFrame({"task": ["t1", 2, "t1"], "worker": ["w1", "w1", 3], "label": ["a", 1, 1]})
    assert MajorityVote().fit_predict(mixed).to_dict() == {"t1": "a" if PANDAS3 else 1, 2: 1}  # t1: a tie
    wawa = Wawa()
    assert wawa.fit_predict(mixed).index.tolist() == [2, "t1"] and wawa.skills_.index.tolist() == [3, "w1"]
    for bad in ({"n_iter": -1}, {"n_iter": True}, {"n_iter": 2.0}, {"tol": np.nan}, {"tol": None}):
        with pytest.raises(ValueError, match="n_iter|tol"):
            DawidSkene(**bad).fit(toy)
    with pytest.raises(ValueError, match="may not be missing"):
        DawidSkene(3).fit(pd.DataFrame({"task": ["t1", None], "worker": ["w1", "w1"], "label": ["a", "b"]}))


# --------------------------------------------------------------------------- memory refused up front
@pytest.mark.parametrize("make", [MajorityVote, Wawa, lambda: DawidSkene(n_iter=1), lambda: OneCoinDawidSkene(n_iter=1),
                                  lambda: GLAD(n_iter=1)])
def test_tables_beyond_memory_are_refused_up_front_with_their_size(make, monkeypatch):
    """OneCoinDawidSkene on 32,767 labels was killed by the OOM killer (2 workers × 32,767² floats per table);
    MajorityVote and Wawa on 100,000 tasks × 20,000 labels raised a bare MemoryError after allocating."""
    from crowdagg.core import memory
    from crowdagg.errors import ResourceError

    monkeypatch.setattr(memory, "available_bytes", lambda: 2**23 / memory.DEFAULT_FRACTION)  # 8 MiB may be planned
    n = 4000  # 2,000 tasks × 2,000 labels: 32 MB of vote shares, 2 workers × 2,000² × 8 B = 64 MB of errors
    frame = pd.DataFrame({"task": np.arange(n) // 2, "worker": np.arange(n) % 2, "label": np.arange(n) % 2000})
    with pytest.raises(ResourceError, match=r"this needs ~[0-9.]+ [MG]B \(.*2,000.* more than the limit of 8\.00 MB"):
        make().fit(frame)
    small = frame.iloc[:6].assign(label=[0, 1, 0, 0, 1, 1])
    assert len(make().fit_predict_proba(small)) == 3  # small data still fits under the same limit


@pytest.mark.parametrize("n_iter", [np.uint8(255), np.int32(2**31 - 1), np.int64(2**63 - 1), np.uint64(2**64 - 1)])
@pytest.mark.parametrize("cls", [GLAD, DawidSkene, OneCoinDawidSkene])
def test_a_numpy_n_iter_at_its_types_maximum_is_a_budget(toy, cls, n_iter):
    """crowd-kit's ``range(n_iter)`` runs to convergence; the budget + 1 in the numpy type wrapped to 0
    iterations (the majority vote, with an overflow warning)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fitted = cls(n_iter=n_iter).fit(toy)
    assert fitted.loss_history_ == cls(n_iter=1000).fit(toy).loss_history_
    assert len(fitted.loss_history_) > 1


def test_a_prior_or_gold_label_equal_to_a_label_of_another_type_is_refused():
    """True is 1 to Python (crowd-kit compares with ``==`` and then fails: "Item wrong length", "cannot reindex
    on an axis with duplicate labels"); it became one more class that pandas' lookups then refused
    (InvalidIndexError, no ValueError)."""
    data = pd.DataFrame({"task": ["t1", "t1", "t2"], "worker": ["w1", "w2", "w1"], "label": [1, 0, 0]})
    with pytest.raises(ValueError, match="label True .* equals the label 1 of the answers"):
        GLAD(n_iter=1, labels_priors=pd.Series([0.3, 0.7], index=[True, False])).fit(data)
    with pytest.raises(ValueError, match="label True .* equals the label 1 of the answers"):
        DawidSkene(n_iter=2).fit(data, pd.Series([True], index=["t2"]))
    flags = data.assign(label=data["label"].astype(bool))
    with pytest.raises(ValueError, match="label 1 .* equals the label True of the answers"):
        GLAD(n_iter=1, labels_priors=pd.Series([0.3, 0.7], index=[1, 0])).fit(flags)
    # the same value in another numeric type is the same label, as in crowd-kit
    as_float = GLAD(n_iter=2, labels_priors=pd.Series([0.3, 0.7], index=[1.0, 0.0])).fit(data)
    assert_frame_equal(as_float.probas_, GLAD(n_iter=2, labels_priors=pd.Series([0.3, 0.7], index=[1, 0])).fit(data)
                       .probas_, check_column_type=False)


# ----------------------------------------------------------------------------- small frames of every kind


# crowd-kit's GLAD raises on these (bool labels: "Item wrong length"; empty: ZeroDivisionError), and on
# "nullable tie" its two tasks are exact mirror images whose 0.5/0.5 posteriors its sums round apart
GLAD_SKIPS = {"bool", "empty", "nullable tie"}


@pytest.mark.parametrize("kind", sorted(SMALL))
@pytest.mark.parametrize("cls", ["MajorityVote", "Wawa", "DawidSkene", "OneCoinDawidSkene", "GLAD"])
def test_small_frames_as_crowd_kit(kind, cls):
    if cls == "GLAD" and kind in GLAD_SKIPS:
        pytest.skip("crowd-kit's GLAD raises here, or breaks an exact tie by rounding")
    data = SMALL[kind]
    params = {"n_iter": 20} if "Skene" in cls or cls == "GLAD" else {}
    mine, theirs = getattr(ours, cls)(**params), getattr(ck, cls)(**params)
    same_labels(mine.fit_predict(data), quiet(lambda: theirs.fit_predict(data)))
    same_frame(mine.probas_, theirs.probas_)
    for name in ("skills_", "priors_", "alphas_", "betas_"):
        if hasattr(theirs, name):
            same_series(getattr(mine, name), getattr(theirs, name))
    if hasattr(theirs, "errors_"):
        same_frame(mine.errors_, theirs.errors_)
    assert_frame_equal(data, SMALL[kind])  # the input is not changed


def test_crowd_kits_module_path_gives_the_same_classes():
    """``from crowdkit.aggregation import X`` becomes ``from crowdagg.crowdkit.aggregation import X``: the same
    objects as ``crowdagg.crowdkit``'s, each from its own module of the package."""
    import crowdagg.crowdkit as package
    from crowdagg.crowdkit import aggregation

    assert sorted(aggregation.__all__) == sorted(package.__all__)
    for name in package.__all__:
        assert getattr(aggregation, name) is getattr(package, name)
    assert {GLAD.__module__, DawidSkene.__module__, OneCoinDawidSkene.__module__, MajorityVote.__module__,
            Wawa.__module__, package.KOS.__module__} == {
        "crowdagg.crowdkit.glad", "crowdagg.crowdkit.dawid_skene", "crowdagg.crowdkit.majority_vote",
        "crowdagg.crowdkit.wawa", "crowdagg.crowdkit.kos"}


@pytest.mark.quick
@pytest.mark.parametrize("given", [
    np.array([["t1", "w1", "x"]], dtype=object),  # numpy's IndexError before
    {"task": ["t1"], "worker": ["w1"], "label": ["x"]},  # pandas' unhashable list before
    [("t1", "w1", "x")],
])
def test_answers_that_are_no_data_frame_are_a_type_error_everywhere(given):
    """Every class and function of crowdagg.crowdkit refuses answers that are no DataFrame with one TypeError."""
    from crowdagg.crowdkit.aggregation.utils import get_accuracy
    from crowdagg.crowdkit.metrics import accuracy_on_aggregates, alpha_krippendorff, consistency, uncertainty

    truth = pd.Series({"t1": "x"})
    calls = [lambda: ours.MajorityVote().fit(given), lambda: ours.KOS().fit(given), lambda: ours.MMSR().fit(given),
             lambda: ours.Wawa().fit(given), lambda: ours.DawidSkene().fit(given),
             lambda: ours.ZeroBasedSkill().fit(given), lambda: ours.GoldMajorityVote().fit(given, truth),
             lambda: get_accuracy(given, truth), lambda: uncertainty(given), lambda: consistency(given),
             lambda: alpha_krippendorff(given), lambda: accuracy_on_aggregates(given, aggregates=truth)]
    for call in calls:
        with pytest.raises(TypeError, match="the answers must be a pandas DataFrame"):
            call()
