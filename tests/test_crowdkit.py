"""The crowd-kit-compatible surface: every behaviour crowd-kit's own tests check for these classes.

The expected values are those crowd-kit 1.4.2 gives on the same answers
(its ``tests/aggregation``: the toy and "simple" crowds, step-by-step
Dawid--Skene, gold, ``initial_error``, skills, edge cases); the fixtures
are rebuilt here as data.  Where crowd-kit is wrong we do otherwise, and a
test below says so.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from pandas.testing import assert_frame_equal, assert_series_equal

from crowdagg import aggregate, load_annotations
from crowdagg.crowdkit import GLAD, DawidSkene, MajorityVote, NotFittedError, OneCoinDawidSkene, Wawa

# crowd-kit's majority vote keeps first appearance under pandas 3 and sorts under pandas 2 (tests below say where)
PANDAS3 = int(pd.__version__.split(".")[0]) >= 3

# ----------------------------------------------------------------------------- crowds
# toy: five workers, five tasks (w3 skipped t1); truth t1 yes, t2 yes, t3 no, t4 yes, t5 no
TOY_GRID = {
    "w1": ["no", "yes", "yes", "yes", "yes"],
    "w2": ["yes", "yes", "no", "yes", "no"],
    "w3": [None, "yes", "no", "yes", "no"],
    "w4": ["yes", "no", "yes", "yes", "no"],
    "w5": ["no", "no", "no", "yes", "no"],
}
TOY_TRUTH = {"t1": "yes", "t2": "yes", "t3": "no", "t4": "yes", "t5": "no"}

# "simple": six tasks (ids share a prefix), ten workers, three animals; one worker always answers parrot
P = "1231239876--5fac0d234ffb2f3b00893"
SIMPLE_ROWS = {
    "bde3b214b06c1efa6cb1bc6284dc72d2": "eec goose efb parrot f03 goose f05 goose f02 parrot f08 parrot",
    "b17c3301ad2ccbb798716fdd405d16e8": "efb parrot ee8 chicken f07 parrot efd chicken ee4 chicken f03 goose",
    "a452e450f913cfa987cad58d50393718": "ee8 chicken eec goose f05 goose f02 parrot f08 parrot",
    "0f65edea0a6dc7b9acba1dea313bbb3d": "eec goose ee8 chicken f03 goose ee4 chicken",
    "0c3eb7d5fcc414db137c4180a654c06e": "eec parrot efb parrot f07 parrot efd parrot ee4 parrot f05 parrot",
    "e563e2fb32fce9f00123a65a1bc78c55": "efb parrot ee8 goose f02 parrot f08 parrot f07 parrot efd goose",
}
SIMPLE_TRUTH = {"eec": "goose", "f03": "goose", "f05": "goose", "efb": "parrot", "f02": "parrot", "f08": "parrot",
                "f07": "parrot", "ee8": "chicken", "efd": "chicken", "ee4": "chicken"}


def toy_frame(task_major: bool = False) -> pd.DataFrame:
    rows = [(w, f"t{i + 1}", y) for w, ys in TOY_GRID.items() for i, y in enumerate(ys) if y]
    frame = pd.DataFrame(rows, columns=["worker", "task", "label"])
    if task_major:
        frame = frame.sort_values(["task", "worker"], kind="stable")[["task", "worker", "label"]]
    return frame.reset_index(drop=True)


def truth(mapping: dict, prefix: str = "") -> pd.Series:
    s = pd.Series({prefix + t: y for t, y in mapping.items()}, name="agg_label")
    s.index.name = "task"
    return s.sort_index()


def simple_frame() -> pd.DataFrame:
    rows = []
    for worker, text in SIMPLE_ROWS.items():
        cells = text.split()
        rows += [(worker, P + t, y) for t, y in zip(cells[::2], cells[1::2])]
    return pd.DataFrame(rows, columns=["worker", "task", "label"])


@pytest.fixture(scope="module")
def toy() -> pd.DataFrame:
    return toy_frame()


@pytest.fixture(scope="module")
def simple() -> pd.DataFrame:
    return simple_frame()


def labels_equal(result: pd.Series, expected: pd.Series) -> None:
    assert_series_equal(result.sort_index(), expected.sort_index())


# ----------------------------------------------------------------------------- Dawid-Skene, step by step
def frame(rows: dict, columns: list, name: str | None = "label") -> pd.DataFrame:
    out = pd.DataFrame.from_dict(rows, orient="index", columns=pd.Index(columns, name=name))
    out.index.name = "task"
    return out


def test_ds_starts_from_majority_vote_shares():
    ds = DawidSkene(0).fit(toy_frame(task_major=True))
    expected = frame({"t1": [0.5, 0.5], "t2": [0.4, 0.6], "t3": [0.6, 0.4], "t4": [0.0, 1.0], "t5": [0.8, 0.2]},
                     ["no", "yes"])
    assert_frame_equal(ds.probas_, expected)
    assert_series_equal(ds.priors_, pd.Series([0.46, 0.54], index=pd.Index(["no", "yes"], name="label"),
                                              name="prior"))
    # t1 is a tie: the first label in sorted order wins
    assert_series_equal(ds.labels_, pd.Series(["no", "yes", "no", "yes", "no"], name="agg_label",
                                              index=pd.Index([f"t{i}" for i in range(1, 6)], name="task")))
    assert ds.loss_history_ == []
    e = ds.errors_
    assert e.index.names == ["worker", "label"] and e.columns.name is None and list(e.columns) == ["no", "yes"]
    np.testing.assert_allclose(e.loc[("w1", "no")], [5 / 23, 5 / 27])
    np.testing.assert_allclose(e.loc[("w2", "no")], [14 / 23, 6 / 27])
    np.testing.assert_allclose(e.loc[("w5", "no")], [1.0, 17 / 27], atol=1e-10)


def test_ds_one_and_two_iterations():
    data = toy_frame(task_major=True)
    one = DawidSkene(1).fit(data)
    np.testing.assert_allclose(one.probas_.loc[["t1", "t2", "t3", "t5"], "no"],
                               [0.351937681231, 0.260221371851, 0.873399967394, 0.947018189850], atol=1e-11)
    assert one.probas_.loc["t4", "no"] == pytest.approx(1e-10)  # crowd-kit's floor, kept
    np.testing.assert_allclose(one.priors_, [0.486515442067, 0.513484557933], atol=1e-11)
    assert one.labels_.tolist() == ["yes", "yes", "no", "yes", "no"]
    assert one.labels_.index.tolist() == ["t1", "t2", "t3", "t4", "t5"]
    assert one.loss_history_ == pytest.approx([-1.0697608706302792], rel=1e-13)
    expected_errors = {("w1", "no"): [0.144676880033, 0.252417451998], ("w2", "yes"): [0.251650410310, 0.930053654007],
                       ("w3", "no"): [0.874932025360, 0.093563374613], ("w4", "yes"): [0.503719940904, 0.691223260348],
                       ("w5", "yes"): [4.1e-11, 0.389495646769]}
    for row, values in expected_errors.items():
        np.testing.assert_allclose(one.errors_.loc[row], values, atol=1e-11)
    # rows: the (worker, label) pairs of the data, in order of first appearance
    assert one.errors_.index.tolist()[:4] == [("w1", "no"), ("w2", "yes"), ("w4", "yes"), ("w5", "no")]
    two = DawidSkene(2).fit(data)
    np.testing.assert_allclose(two.probas_.loc[["t1", "t2", "t3", "t5"], "no"],
                               [0.149223188760, 0.096285991592, 0.992334721738, 0.996509883696], atol=1e-11)
    assert two.loss_history_ == pytest.approx([-1.0697608706302792, -1.0176901520215347], rel=1e-13)


@pytest.mark.parametrize(("n_iter", "tol", "runs"), [(10, 0, 10), (100500, 1e-5, 6)])
def test_ds_on_toy(toy, n_iter, tol, runs):
    ds = DawidSkene(n_iter, tol).fit(toy)
    labels_equal(ds.labels_, truth(TOY_TRUTH))
    assert len(ds.loss_history_) == runs
    assert ds.loss_history_[:6] == pytest.approx(
        [-1.069760870630279, -1.0176901520215347, -0.9849568901496716, -0.976515609771956, -0.9762247050340861,
         -0.9762244965136584], rel=1e-12)
    np.testing.assert_allclose(ds.priors_, [0.4, 0.6], atol=1e-9)
    np.testing.assert_allclose(ds.errors_.loc[("w1", "no")], [5e-11, 1 / 3], atol=1e-9)
    np.testing.assert_allclose(ds.errors_.loc[("w4", "yes")], [0.5, 2 / 3], atol=1e-9)
    # after an iteration, tasks are in order of first appearance (the data's worker-major rows)
    assert ds.probas_.index.tolist() == ["t1", "t2", "t3", "t4", "t5"]


# crowd-kit's own test_dawid_skene_step_by_step (tests/aggregation/test_ds_aggregation.py), its expected frames
# rebuilt as it builds them: the columns of a frame made from a list of names, so pandas 3's ``str`` dtype
CK_ERRORS = {
    0: [["w1", "no", 0.22, 0.19], ["w1", "yes", 0.78, 0.81], ["w2", "no", 0.61, 0.22], ["w2", "yes", 0.39, 0.78],
        ["w3", "no", 0.78, 0.27], ["w3", "yes", 0.22, 0.73], ["w4", "no", 0.52, 0.30], ["w4", "yes", 0.48, 0.70],
        ["w5", "no", 1.00, 0.63], ["w5", "yes", 0.00, 0.37]],
    1: [["w1", "no", 0.14, 0.25], ["w1", "yes", 0.86, 0.75], ["w2", "no", 0.75, 0.07], ["w2", "yes", 0.25, 0.93],
        ["w3", "no", 0.87, 0.09], ["w3", "yes", 0.13, 0.91], ["w4", "no", 0.50, 0.31], ["w4", "yes", 0.50, 0.69],
        ["w5", "no", 1.00, 0.61], ["w5", "yes", 0.00, 0.39]],
}
CK_PROBAS = {0: [["t1", 0.5, 0.5], ["t2", 0.4, 0.6], ["t3", 0.6, 0.4], ["t4", 0.0, 1.0], ["t5", 0.8, 0.2]],
             1: [["t1", 0.35, 0.65], ["t2", 0.26, 0.74], ["t3", 0.87, 0.13], ["t4", 0.00, 1.00], ["t5", 0.95, 0.05]]}
CK_PRIORS = {0: [0.46, 0.54], 1: [0.49, 0.51]}
CK_LABELS = {0: ["no", "yes", "no", "yes", "no"], 1: ["yes", "yes", "no", "yes", "no"]}


@pytest.mark.parametrize("n_iter", [0, 1])
def test_crowd_kits_own_step_by_step_test(n_iter):
    """Its ``assert_frame_equal`` on ``errors_`` checks the columns' dtype: ``str`` under pandas 3 (ours were
    object, which failed both cases)."""
    ds = DawidSkene(n_iter).fit(toy_frame(task_major=True))
    probas = pd.DataFrame(CK_PROBAS[n_iter], columns=pd.Index(["task", "no", "yes"], name="label")).set_index("task")
    errors = pd.DataFrame(CK_ERRORS[n_iter], columns=["worker", "label", "no", "yes"]).set_index(["worker", "label"])
    priors = pd.Series(CK_PRIORS[n_iter], pd.Index(["no", "yes"], name="label"), name="prior")
    labels = pd.DataFrame([[f"t{i + 1}", y] for i, y in enumerate(CK_LABELS[n_iter])], columns=["task", "label"])
    labels = labels.set_index("task").squeeze().rename("agg_label")
    assert_frame_equal(probas, ds.probas_, check_like=True, atol=0.005)
    assert_frame_equal(errors, ds.errors_, check_like=True, atol=0.005)
    assert_series_equal(priors, ds.priors_, atol=0.005)
    assert_series_equal(labels, ds.labels_, atol=0.005)


@pytest.mark.parametrize(("n_iter", "tol"), [(10, 0), (100500, 1e-5)])
def test_ds_on_simple_stops_when_its_loss_falls(simple, n_iter, tol):
    ds = DawidSkene(n_iter, tol).fit(simple)
    labels_equal(ds.labels_, truth(SIMPLE_TRUTH, P))
    # crowd-kit's loss counts the log-prior once per answer, so it can fall; a fall stops the loop
    assert ds.loss_history_ == pytest.approx(
        [-1.1082305294277341, -1.0901204769141548, -1.0897061355246336, -1.0900750447737992], rel=1e-12)
    np.testing.assert_allclose(ds.priors_.sort_index(), [0.271553172854, 0.319726756608, 0.408720070538], atol=1e-11)
    np.testing.assert_allclose(ds.probas_.loc[P + "efd", ["chicken", "goose", "parrot"]],
                               [0.802912392354, 0.197086759308, 8.48338e-7], atol=1e-11)


@pytest.mark.parametrize("overlap", [3, 300, 30000])
def test_ds_overlap(overlap):
    rows = [(t, w, "yes" if (w - t) % 3 else "no") for w in range(overlap) for t in range(3)]
    ds = DawidSkene(20).fit(pd.DataFrame(rows, columns=["task", "worker", "label"]))
    np.testing.assert_allclose(ds.probas_.to_numpy(), np.tile([1 / 3, 2 / 3], (3, 1)), atol=1e-9)
    assert ds.probas_.index.tolist() == [0, 1, 2] and ds.labels_.tolist() == ["yes"] * 3
    assert ds.labels_.index.dtype == np.int64 and len(ds.loss_history_) == 2
    np.testing.assert_allclose(ds.priors_, [1 / 3, 2 / 3])


# ----------------------------------------------------------------------------- gold
@pytest.mark.parametrize(("n_iter", "tol", "runs"), [(10, 0, 10), (100500, 1e-5, 4)])
def test_ds_with_gold(toy, n_iter, tol, runs):
    ds = DawidSkene(n_iter, tol).fit(toy, pd.Series({"t1": "yes", "t2": "yes"}))
    labels_equal(ds.labels_, truth(TOY_TRUTH))
    assert len(ds.loss_history_) == runs


@pytest.mark.parametrize(("n_iter", "t3", "t5", "prior_no"), [
    (0, 0.6, 0.8, 0.28), (1, 0.925714285695, 0.970786516846, 0.379300160508),
    (2, 0.998313757351, 0.999201460884, 0.399503043647)])
def test_gold_tasks_are_clamped_at_every_step(toy, n_iter, t3, t5, prior_no):
    gold = pd.Series({"t1": "yes", "t2": "yes"})
    ds = DawidSkene(n_iter).fit(toy, gold)
    np.testing.assert_allclose(ds.probas_.loc[["t1", "t2"], "yes"], 1.0, atol=1e-8)
    np.testing.assert_allclose(ds.probas_.sum(axis=1), 1.0, atol=1e-8)
    assert ds.labels_[["t1", "t2"]].tolist() == ["yes", "yes"]
    np.testing.assert_allclose(ds.probas_.loc[["t3", "t5"], "no"], [t3, t5], atol=1e-11)
    assert ds.priors_["no"] == pytest.approx(prior_no, abs=1e-11)


def test_a_gold_label_nobody_answered_becomes_a_class(toy):
    ds = DawidSkene(3).fit(toy, pd.Series({"t1": "maybe", "t99": "no"}))  # t99 is not in the data: ignored
    assert list(ds.probas_.columns) == ["no", "yes", "maybe"] and ds.labels_["t1"] == "maybe"
    assert "t99" not in ds.probas_.index


# ----------------------------------------------------------------------------- initial_error
def zero_errors() -> pd.DataFrame:
    index = pd.MultiIndex.from_product([[f"w{i}" for i in range(1, 6)], ["yes", "no"]], names=["worker", "label"])
    return pd.DataFrame(0.0, index=index, columns=["no", "yes"])


@pytest.mark.parametrize("strategy", ["addition", "assign", None])
def test_no_initial_error_with_any_strategy(toy, strategy):
    labels_equal(DawidSkene(10, 0, initial_error_strategy=strategy).fit(toy, initial_error=None).labels_,
                 truth(TOY_TRUTH))


@pytest.mark.parametrize(("n_iter", "tol"), [(10, 0), (100500, 1e-5)])
def test_zero_initial_error(toy, n_iter, tol):
    labels_equal(DawidSkene(n_iter, tol, "addition").fit(toy, initial_error=zero_errors()).labels_, truth(TOY_TRUTH))
    with pytest.raises(ValueError, match="The sum of each worker's error matrix in initial_error should be 1.0"):
        DawidSkene(n_iter, tol, "assign").fit(toy, initial_error=zero_errors())
    partial = zero_errors().iloc[:3]
    labels_equal(DawidSkene(n_iter, tol, "addition").fit(toy, initial_error=partial).labels_, truth(TOY_TRUTH))
    with pytest.raises(ValueError, match="can not find 4 workers"):
        DawidSkene(n_iter, tol, "assign").fit(toy, initial_error=partial)


@pytest.mark.parametrize(("n_iter", "tol"), [(10, 0), (100500, 1e-5)])
def test_addition_with_columns_that_are_no_label(toy, n_iter, tol):
    # crowd-kit's own test adds four junk columns here (a tuple key on the frame) and carries them on
    # as classes with NaN probabilities; we drop them: the labels are the truth, the columns the labels.
    init = zero_errors()
    for key, value in {(("w2", "yes"), "no"): 1.0, (("w2", "yes"), "yes"): 99.0}.items():
        init[key] = value
    ds = DawidSkene(n_iter, tol, "addition").fit(toy, initial_error=init)
    labels_equal(ds.labels_, truth(TOY_TRUTH))
    assert list(ds.probas_.columns) == ["no", "yes"] and not ds.probas_.isna().any().any()


@pytest.mark.parametrize(("n_iter", "tol"), [(10, 0), (100500, 1e-5)])
def test_assign_a_fitted_model_back(toy, n_iter, tol):
    first = DawidSkene(n_iter, tol, "assign").fit(toy)
    labels_equal(first.labels_, truth(TOY_TRUTH))
    labels_equal(DawidSkene(n_iter, tol, "assign").fit(toy, initial_error=first.errors_).labels_, truth(TOY_TRUTH))


@pytest.mark.parametrize(("n_iter", "tol"), [(10, 0), (100500, 1e-5)])
def test_initial_error_can_change_a_label(toy, n_iter, tol):
    counts = zero_errors()
    for worker, label in (("w1", "yes"), ("w2", "yes"), ("w3", "yes"), ("w4", "no"), ("w5", "no")):
        counts.loc[(worker, label), "no"] = 99.0
    added = DawidSkene(n_iter, tol, "addition").fit(toy, initial_error=counts)
    assert added.labels_["t2"] == "no"
    probabilities = zero_errors() + 0.5
    for worker in ("w1", "w2", "w3", "w4", "w5"):
        believed = "yes" if worker in ("w1", "w2", "w3") else "no"
        probabilities.loc[(worker, believed), "no"] = 0.99
        probabilities.loc[(worker, "no" if believed == "yes" else "yes"), "no"] = 0.01
    assigned = DawidSkene(n_iter, tol, "assign").fit(toy, initial_error=probabilities)
    assert assigned.labels_["t2"] == "no"
    if n_iter == 10:
        assert added.probas_.loc["t2", "no"] == pytest.approx(0.881741176214, abs=1e-11)
        assert assigned.probas_.loc["t2", "no"] == pytest.approx(0.881742649457, abs=1e-11)


def test_addition_adds_counts_in_the_first_m_step(toy):
    init = zero_errors()
    init.loc[("w2", "yes"), ["no", "yes"]] = [1.1, 0.9]
    init.loc[("w2", "no"), ["no", "yes"]] = [0.6, 0.4]
    ds = DawidSkene(n_iter=0, tol=0.0, initial_error_strategy="addition").fit(toy, initial_error=init)
    w2 = ds.errors_.loc["w2"]
    np.testing.assert_allclose([w2.loc["yes", "no"], w2.loc["yes", "yes"], w2.loc["no", "yes"], w2.loc["no", "no"]],
                               [0.5, 0.75, 0.25, 0.5])
    np.testing.assert_allclose(ds.errors_.loc[("w1", "yes")], [0.782608695652, 0.814814814815], atol=1e-11)


def test_assign_takes_the_given_matrix_as_it_is(toy):
    values = np.random.RandomState(42).randint(1, 100, size=(10, 2)).astype(float)
    init = zero_errors() + values
    init = init / init.groupby(level="worker").transform("sum")
    ds = DawidSkene(n_iter=0, tol=0.0, initial_error_strategy="assign").fit(toy, initial_error=init)
    assert_frame_equal(init, ds.errors_)  # its rows in its order, its columns, its index names


def test_initial_error_checks(toy):
    bad_names = zero_errors().rename_axis(["w", "l"])
    with pytest.raises(ValueError, match="index of initial_error must be"):
        DawidSkene(3, initial_error_strategy="addition").fit(toy, initial_error=bad_names)
    with pytest.raises(ValueError, match="Invalid initial_error_strategy"):
        DawidSkene(3, initial_error_strategy="replace").fit(toy, initial_error=zero_errors())


# ----------------------------------------------------------------------------- one-coin
@pytest.mark.parametrize(("n_iter", "tol", "runs", "skills"), [
    (10, 0, 10, [0.400000000567, 0.999999999433, 1.0, 0.599999999433, 0.600000000567]),
    (100500, 1e-5, 7, [0.400000807059, 0.999999192941, 1.0, 0.599999192941, 0.600000807059])])
def test_one_coin_on_toy(toy, n_iter, tol, runs, skills):
    oc = OneCoinDawidSkene(n_iter, tol).fit(toy)
    labels_equal(oc.labels_, truth(TOY_TRUTH))
    labels_equal(OneCoinDawidSkene(n_iter, tol).fit_predict(toy), truth(TOY_TRUTH))
    probas = OneCoinDawidSkene(n_iter, tol).fit_predict_proba(toy)
    assert ((probas >= 0) & (probas <= 1)).all().all()
    assert len(oc.loss_history_) == runs
    assert oc.skills_.name == "skill" and oc.skills_.index.name == "worker"
    np.testing.assert_allclose(oc.skills_.loc[["w1", "w2", "w3", "w4", "w5"]], skills, atol=1e-11)


def test_one_coin_start_and_errors(toy):
    oc = OneCoinDawidSkene(0).fit(toy)
    np.testing.assert_allclose(oc.skills_, [0.54, 0.70, 0.75, 0.62, 0.66])
    np.testing.assert_allclose(oc.errors_.loc[("w1", "no")], [0.54, 0.46])  # skill on the diagonal, not renormalised
    assert oc.loss_history_ == []


@pytest.mark.parametrize(("n_iter", "tol", "runs"), [(10, 0, 10), (100500, 1e-5, 13)])
def test_one_coin_on_simple(simple, n_iter, tol, runs):
    oc = OneCoinDawidSkene(n_iter, tol).fit(simple)
    labels_equal(oc.labels_, truth(SIMPLE_TRUTH, P))
    assert len(oc.loss_history_) == runs
    if runs == 13:
        np.testing.assert_allclose(
            oc.skills_.loc[["bde3b214b06c1efa6cb1bc6284dc72d2", "b17c3301ad2ccbb798716fdd405d16e8",
                            "0c3eb7d5fcc414db137c4180a654c06e", "e563e2fb32fce9f00123a65a1bc78c55"]],
            [1.0, 0.999955437251, 0.333340814438, 0.666694971137], atol=1e-11)


@pytest.mark.parametrize("cls", [DawidSkene, OneCoinDawidSkene])
def test_bool_labels(cls):
    data = pd.DataFrame({"worker": ["w1", "w1", "w2", "w2", "w3", "w3"], "task": ["t1", "t2"] * 3,
                         "label": [True, True, True, True, False, False]})
    labels = cls(20).fit(data).labels_
    assert_series_equal(labels, pd.Series([True, True], index=pd.Index(["t1", "t2"], name="task"), name="agg_label"))


# ----------------------------------------------------------------------------- majority vote, Wawa
TOY_MV = {"t1": [0.5, 0.5], "t2": [0.4, 0.6], "t3": [0.6, 0.4], "t4": [0.0, 1.0], "t5": [0.8, 0.2]}
TOY_WAWA = {"t1": [1.4 / 2.6, 1.2 / 2.6], "t2": [1 / 3, 2 / 3], "t3": [2.6 / 3.6, 1 / 3.6], "t4": [0.0, 1.0],
            "t5": [3 / 3.6, 0.6 / 3.6]}
TOY_MV_LABELS = {"t1": "no", "t2": "yes", "t3": "no", "t4": "yes", "t5": "no"}
TOY_SKILLS = [0.6, 0.8, 1.0, 0.4, 0.8]
SIMPLE_MV = {"ee4": [2 / 3, 0, 1 / 3], "ee8": [3 / 4, 1 / 4, 0], "eec": [0, 3 / 4, 1 / 4], "efb": [0, 0, 1],
             "efd": [1 / 3, 1 / 3, 1 / 3], "f02": [0, 0, 1], "f03": [0, 1, 0], "f05": [0, 2 / 3, 1 / 3],
             "f07": [0, 0, 1], "f08": [0, 0, 1]}
SIMPLE_WAWA = {"ee4": [6 / 7, 0, 1 / 7], "ee8": [9 / 11, 2 / 11, 0], "eec": [0, 0.9, 0.1], "efb": [0, 0, 1],
               "efd": [0.5, 1 / 3, 1 / 6], "f02": [0, 0, 1], "f03": [0, 1, 0], "f05": [0, 6 / 7, 1 / 7],
               "f07": [0, 0, 1], "f08": [0, 0, 1]}
SIMPLE_WORKERS = sorted(SIMPLE_ROWS)
SIMPLE_SKILLS = [1 / 3, 1.0, 1.0, 1.0, 1.0, 2 / 3]  # in sorted worker order: 0c3e (the parrot), ..., e563
if PANDAS3:  # MV's tie on efd goes to goose (the first label to appear): two workers' skills, so Wawa's weights, move
    SIMPLE_SKILLS = [1 / 3, 1.0, 1.0, 5 / 6, 1.0, 5 / 6]
    SIMPLE_WAWA = {**SIMPLE_WAWA, "ee4": [11 / 13, 0, 2 / 13], "ee8": [17 / 22, 5 / 22, 0], "efd": [5 / 12, 5 / 12, 1 / 6]}


def skills_series(names, values) -> pd.Series:
    return pd.Series(values, index=pd.Index(names, name="worker"), name="skill")


@pytest.mark.parametrize("cls", [MajorityVote, Wawa])
@pytest.mark.parametrize("dataset", ["toy", "simple"])
@pytest.mark.parametrize("method", ["fit_predict", "fit_predict_proba"])
def test_majority_vote_and_wawa(cls, dataset, method, toy, simple):
    answers = toy if dataset == "toy" else simple
    expected = {(MajorityVote, "toy"): TOY_MV, (Wawa, "toy"): TOY_WAWA, (MajorityVote, "simple"): SIMPLE_MV,
                (Wawa, "simple"): SIMPLE_WAWA}[cls, dataset]
    prefix = "" if dataset == "toy" else P
    columns = ["no", "yes"] if dataset == "toy" else ["chicken", "goose", "parrot"]
    agg = cls()
    out = getattr(agg, method)(answers)
    assert out is (agg.probas_ if method.endswith("proba") else agg.labels_)
    assert_frame_equal(agg.probas_, frame({prefix + t: v for t, v in expected.items()}, columns), check_like=True,
                       rtol=1e-12)
    # on toy both give t1 'no' (MV's tie, and Wawa's weights follow MV); on simple both give the truth, but
    # for MV's three-way tie on efd under pandas 3 (the first label to appear, goose)
    expected_labels = TOY_MV_LABELS if dataset == "toy" else dict(SIMPLE_TRUTH)
    if dataset == "simple" and cls is MajorityVote and PANDAS3:
        expected_labels["efd"] = "goose"
    labels_equal(agg.labels_, truth(expected_labels, prefix))
    skills = skills_series([f"w{i}" for i in range(1, 6)], TOY_SKILLS) if dataset == "toy" else skills_series(
        SIMPLE_WORKERS, SIMPLE_SKILLS)
    assert_series_equal(agg.skills_.sort_index(), skills, rtol=1e-12)
    assert agg.labels_.name == "agg_label" and agg.skills_.name == "skill"


def test_majority_vote_tie_goes_to_the_first_label_in_crowd_kits_order(simple):
    # efd is a three-way tie: chicken, goose, parrot; goose is the frame's first label, chicken the first sorted
    mv = MajorityVote().fit(simple)
    assert mv.labels_[P + "efd"] == ("goose" if PANDAS3 else "chicken")
    assert list(mv.probas_.columns) == (["goose", "parrot", "chicken"] if PANDAS3 else ["chicken", "goose", "parrot"])
    tasks = list(dict.fromkeys(simple["task"]))
    assert mv.probas_.index.tolist() == (tasks if PANDAS3 else sorted(tasks))


def test_pandas_2_order(simple, monkeypatch):
    """Under pandas 2 crowd-kit's majority vote sorts tasks and labels: its own tests' values (they assume it)."""
    import crowdagg.crowdkit as surface

    monkeypatch.setattr(surface, "_first_appearance", lambda: False)
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


def test_majority_vote_with_skills(simple):
    weights = skills_series(SIMPLE_WORKERS, SIMPLE_SKILLS)
    mv = MajorityVote()
    mv.fit_predict(simple, skills=weights)
    # the weighted vote gives the truth (efd: chicken), so its skills are the ones under pandas 2's ties
    assert_series_equal(mv.skills_, skills_series(SIMPLE_WORKERS, [1 / 3, 1.0, 1.0, 1.0, 1.0, 2 / 3]))
    assert_frame_equal(mv.probas_, frame({P + t: v for t, v in SIMPLE_WAWA.items()}, ["chicken", "goose", "parrot"]),
                       check_like=True, rtol=1e-12)


def test_majority_vote_missing_skills(simple):
    fraudster = "0c3eb7d5fcc414db137c4180a654c06e"
    weights = skills_series(SIMPLE_WORKERS, SIMPLE_SKILLS).drop(fraudster)
    valued = MajorityVote(on_missing_skill="value", default_skill=1000000).fit_predict(simple, skills=weights)
    assert (valued[[P + t for t in ("eec", "efb", "f07", "efd", "ee4", "f05")]] == "parrot").all()
    with pytest.raises(ValueError, match="Skill value is missing in 6 assignments"):
        MajorityVote(on_missing_skill="error").fit_predict(simple, skills=weights)
    ignored = MajorityVote(on_missing_skill="ignore")
    ignored.fit_predict(simple, skills=weights)
    assert fraudster not in ignored.skills_.index and len(ignored.skills_) == 5
    # efd: chicken by ee8 (skill 1) and ee4 (skill 1 under pandas 2, 5/6 under 3) against goose by f05 (1)
    np.testing.assert_allclose(ignored.probas_.loc[P + "efd"], [0.5, 0.5, 0.0] if PANDAS3 else [0.6, 0.4, 0.0])
    with pytest.raises(ValueError, match="10 tasks have no workers with known skills"):
        MajorityVote(on_missing_skill="ignore").fit_predict(simple, skills=pd.Series([], dtype=float))
    with pytest.raises(ValueError, match="Default skill value must be specified"):
        MajorityVote(on_missing_skill="value").fit_predict(simple, skills=weights)
    with pytest.raises(ValueError, match='on_missing_skill is not "value"'):
        MajorityVote(default_skill=1.0).fit_predict(simple, skills=weights)
    with pytest.raises(ValueError, match="Unknown option 'drop'"):
        MajorityVote(on_missing_skill="drop").fit_predict(simple, skills=weights)


def test_wawa_predicts_on_new_answers_with_its_skills(toy):
    wawa = Wawa().fit(toy)
    again = wawa.predict_proba(toy)
    np.testing.assert_allclose(again.loc["t3"], TOY_WAWA["t3"])
    with pytest.raises(NotFittedError):
        Wawa().predict(toy)
    with pytest.raises(ValueError, match="Skill value is missing"):
        wawa.predict(pd.DataFrame({"task": ["x"], "worker": ["stranger"], "label": ["yes"]}))


def test_zero_weight_voters_get_the_mean_share_not_nan():
    # crowd-kit divides by a zero total and gives NaN; we give the mean share of the other tasks
    data = pd.DataFrame({"task": ["a", "a", "b"], "worker": ["good", "bad", "bad"], "label": ["x", "y", "x"]})
    mv = MajorityVote().fit(data, skills=pd.Series({"good": 1.0, "bad": 0.0}))
    assert not mv.probas_.isna().any().any()
    np.testing.assert_allclose(mv.probas_.loc["b"], mv.probas_.loc["a"])


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


# ----------------------------------------------------------------------------- the same numbers as `aggregate`
@pytest.fixture(scope="module")
def bluebird() -> pd.DataFrame:
    from importlib.resources import files

    return pd.read_csv(files("crowdagg.examples") / "bluebird_labels.csv")


def test_majority_vote_and_wawa_match_aggregate(bluebird):
    data = load_annotations(bluebird)
    for cls, method in ((MajorityVote, "mv"), (Wawa, "wawa")):
        ours = aggregate(data, method).proba_frame().sort_index()
        theirs = cls().fit_predict_proba(bluebird)
        assert sorted(theirs.index) == sorted(ours.index)
        theirs = theirs.reindex(index=ours.index, columns=ours.columns.astype(theirs.columns.dtype))
        np.testing.assert_array_equal(theirs.to_numpy(), ours.to_numpy())


@pytest.mark.parametrize("n_iter", [1, 3])
def test_dawid_skene_matches_aggregate_step_for_step(bluebird, n_iter):
    # aggregate's start includes one E-step, so its max_iter=n is crowd-kit's n_iter=n+1; tol=-inf never stops
    ours = aggregate(load_annotations(bluebird), "ds", max_iter=n_iter, tol=0).proba_frame()
    theirs = DawidSkene(n_iter=n_iter + 1, tol=-np.inf).fit_predict_proba(bluebird)
    theirs = theirs.reindex(columns=ours.columns.astype(theirs.columns.dtype))
    np.testing.assert_allclose(theirs.to_numpy(), ours.loc[theirs.index].to_numpy(), rtol=0, atol=2e-10)


# ----------------------------------------------------------------------------- real data: crowd-kit's own figures
def reference_figures() -> dict:
    import json
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "results" / "crowdkit_reference.json"
    return json.loads(path.read_text())["datasets"]


def reference_versions() -> dict:
    import json
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "results" / "crowdkit_reference.json"
    return json.loads(path.read_text())["versions"]


@pytest.mark.parametrize("name", sorted(reference_figures()))
def test_the_same_accuracy_and_iterations_as_crowd_kit_on_real_data(datasets_dir, name):
    """crowd-kit 1.4.2's DawidSkene and OneCoinDawidSkene (n_iter=100) on the real datasets
    (benchmarks/crowdkit_reference.py): the same accuracy and the same number of iterations."""
    ref = reference_figures()[name]
    answers = pd.read_csv(datasets_dir / name / "labels.csv", dtype=str, keep_default_na=False)
    answers = answers.drop_duplicates(["task", "worker"], keep="last")
    gold = pd.read_csv(datasets_dir / name / "truth.csv", dtype=str, keep_default_na=False).set_index("task")["label"]

    def accuracy(labels: pd.Series) -> float:
        return float((labels.reindex(gold.index).astype(object) == gold).sum() / len(gold))

    ds = DawidSkene(n_iter=100).fit(answers)
    assert (accuracy(ds.labels_), len(ds.loss_history_)) == pytest.approx((ref["ds_acc"], ref["ds_iters"]), abs=1e-12)
    oc = OneCoinDawidSkene(n_iter=100).fit(answers)
    assert (accuracy(oc.labels_), len(oc.loss_history_)) == pytest.approx(
        (ref["onecoin_acc"], ref["onecoin_iters"]), abs=1e-12)
    # Majority vote's shares give the reference's ties-split accuracy; its hard labels the reference's accuracy
    # where the reference ran under the same pandas major version (crowd-kit's tie order depends on it)
    mv = MajorityVote().fit(answers)
    if pd.__version__.split(".")[0] == reference_versions()["pandas"].split(".")[0]:
        assert accuracy(mv.labels_) == pytest.approx(ref["mv_acc"], abs=1e-12)
    probas = mv.probas_.reindex(gold.index)
    top = probas.to_numpy() >= probas.max(axis=1).to_numpy()[:, None]
    column = probas.columns.get_indexer(gold.to_numpy())
    hit = (column >= 0) & top[np.arange(len(gold)), np.maximum(column, 0)]
    split = np.where(hit, 1.0 / top.sum(axis=1), 0.0)
    assert float(np.nansum(split) / len(gold)) == pytest.approx(ref["mv_acc_ties_split"], abs=1e-12)


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


def test_skills_must_be_weights():
    data = pd.DataFrame({"task": ["t1", "t1", "t2"], "worker": ["w1", "w2", "w1"], "label": ["a", "b", "a"]})
    with pytest.raises(ValueError, match="non-negative"):  # crowd-kit divides by the negative total: 'a' wins t1
        MajorityVote().fit(data, skills=pd.Series({"w1": -1.0, "w2": 0.5}))
    with pytest.raises(ValueError, match="'w1' more than once"):  # crowd-kit counts w1's answers twice
        MajorityVote().fit(data, skills=pd.Series([0.8, 0.2, 0.5], index=["w1", "w1", "w2"]))


def test_gold_without_a_label_and_the_prior_floor():
    data = pd.DataFrame({"task": ["t1", "t2", "t2"], "worker": ["w1", "w1", "w2"], "label": ["a", "a", "b"]})
    ds = DawidSkene(2).fit(data, pd.Series({"t1": np.nan, "t2": "b"}))
    assert ds.labels_["t2"] == "b" and list(ds.probas_.columns) == ["a", "b"]  # the NaN gold is no gold
    floored = DawidSkene(3).fit(data, pd.Series({"t1": "a", "t2": "a"}))
    assert floored.priors_.tolist() == [1.0, 1e-10]  # as crowd-kit's loss step leaves them
    assert DawidSkene(0).fit(data, pd.Series({"t1": "a", "t2": "a"})).priors_.tolist() == [1.0, 0.0]


def test_initial_error_must_fit_the_data(toy):
    probabilities = zero_errors() + 0.5
    with pytest.raises(ValueError, match=r"no column for the label\(s\) \['yes'\]"):
        DawidSkene(3, initial_error_strategy="assign").fit(toy, initial_error=probabilities[["no"]] * 2)
    with pytest.raises(ValueError, match="more than once"):
        DawidSkene(3, initial_error_strategy="addition").fit(toy, initial_error=pd.concat([probabilities] * 2))
    swapped = DawidSkene(0, initial_error_strategy="assign").fit(toy, initial_error=probabilities[["yes", "no"]])
    assert list(swapped.errors_.columns) == ["yes", "no"]  # n_iter=0 gives the frame as it was given


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


def test_layout_details_follow_crowd_kit():
    data = pd.DataFrame({"task": np.array([1, 1, 2], dtype=object), "worker": ["w1", "w2", "w1"], "label": [0, 1, 0]})
    ds = DawidSkene(2).fit(data)
    assert ds.errors_.columns.dtype == object and ds.probas_.columns.dtype == np.int64
    assert ds.probas_.index.dtype == np.int64  # object ids holding ints come back as int64, as in crowd-kit


def test_initial_error_with_bool_labels_and_a_gold_only_class():
    data = pd.DataFrame({"task": [1, 2], "worker": ["w", "w"], "label": [True, False]})
    init = pd.DataFrame([[0.5323414863935437, 0.4185590335810425], [0.4676585136064562, 0.5814409664189575]],
                        columns=[False, True],
                        index=pd.MultiIndex.from_tuples([("w", False), ("w", True)], names=["worker", "label"]))
    ds = DawidSkene(0, initial_error_strategy="assign").fit(data, initial_error=init)
    assert_frame_equal(ds.errors_, init)  # bool column labels select columns, not rows
    one = DawidSkene(1, initial_error_strategy="assign").fit(data, initial_error=init)
    np.testing.assert_allclose(one.probas_.iloc[:, one.probas_.columns.get_indexer([False, True])].to_numpy(), [[0.4457713710763897, 0.5542286289236102],
                                                        [0.5598287888282689, 0.44017121117173114]], atol=1e-12)
    gold = DawidSkene(1, initial_error_strategy="assign").fit(data, pd.Series({1: "maybe"}), initial_error=init)
    assert gold.labels_[1] == "maybe"
    assert list(gold.probas_.columns) == ([True, False, "maybe"] if PANDAS3 else [False, True, "maybe"])


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


# --------------------------------------------------------------------------- adapters: settings of crowdagg's loop
@pytest.fixture
def loop_runs(monkeypatch):
    """Every run of crowdagg's iterative loop (crowdagg.methods.loop.iterate) the crowd-kit classes make during
    the test: (its stop rule, objective direction, the Run it returned)."""
    import crowdagg.crowdkit
    from crowdagg.methods import loop

    assert crowdagg.crowdkit.iterate is loop.iterate  # the loop every registered iterative method runs in
    runs = []

    def spy(start, step, *, rule, direction, **settings):
        run = loop.iterate(start, step, rule=rule, direction=direction, **settings)
        runs.append((rule, direction, run))
        return run

    monkeypatch.setattr(crowdagg.crowdkit, "iterate", spy)
    return runs


@pytest.mark.parametrize("cls", [DawidSkene, OneCoinDawidSkene])
@pytest.mark.parametrize(("n_iter", "tol"), [(100, 1e-5), (100, 1e-2), (3, -np.inf), (0, 1e-5)])
def test_the_iterations_are_crowdagg_loops(loop_runs, toy, cls, n_iter, tol):
    """One run of the loop per fit: loss_history_ is its objective trace, stopped by crowd-kit's rule."""
    import warnings

    from crowdagg.methods.loop import MAXIMISE, AbsoluteGain

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # crowd-kit's n_iter is a budget: running out of it is no warning
        model = cls(n_iter, tol).fit(toy)
    [(rule, direction, run)] = loop_runs
    assert isinstance(rule, AbsoluteGain) and direction == MAXIMISE
    assert model.loss_history_ is run.trace and len(run.trace) == run.n_iter
    trace = run.trace
    if n_iter == 100:  # stopped by the rule: the last rise is below tol, every earlier one is not
        assert run.converged and run.n_iter < n_iter
        rises = np.diff(trace)
        assert rises[-1] < tol and (rises[:-1] >= tol).all()
    else:  # tol=-inf never stops; n_iter=0 is the start alone (the majority vote)
        assert run.n_iter == n_iter and not run.converged


def test_the_stop_rule_is_crowd_kits():
    """crowd-kit's ``if new_loss - loss < tol: break`` with ``loss = -inf`` before the first iteration."""
    from crowdagg.crowdkit import _EM
    from crowdagg.methods.loop import Step

    def stopped(prev, value, tol):
        return _EM.stop_rule.reached(Step(objective=value), prev, tol, _EM.objective_direction)

    assert not stopped(None, -5.0, 1e-5)  # the first iteration compares with a loss of -inf
    assert stopped(-1.0, -1.0, 1e-5) and stopped(-1.0, -1.0 + 1e-6, 1e-5) and not stopped(-1.0, -0.9, 1e-5)
    assert stopped(-1.0, -1.5, 1e-5) and stopped(-1.0, -1.5, -0.1)  # a fall stops too, by more than -tol
    assert not stopped(-1.0, -1.05, -0.1) and not stopped(-1.0, -9.0, -np.inf)  # tol=-inf never stops
    assert stopped(-1.0, -1.0 - 1e-12, 0.0) and not stopped(-1.0, -1.0, 0.0)  # tol=0: only a fall; a plateau runs on


def test_one_coin_is_dawid_skene_with_its_m_step(toy, simple):
    """A crowd-kit class of the family is its settings: DawidSkene with the one-coin EM flavour is
    OneCoinDawidSkene, result for result (skills_ are the one thing it adds)."""
    from crowdagg.crowdkit import _OneCoinEM

    swapped = type("Swapped", (DawidSkene,), {"_em": _OneCoinEM})
    for data in (toy, simple):
        ours, theirs = swapped(100).fit(data), OneCoinDawidSkene(100).fit(data)
        assert_frame_equal(ours.probas_, theirs.probas_, check_exact=True)
        assert_frame_equal(ours.errors_, theirs.errors_, check_exact=True)
        assert_series_equal(ours.priors_, theirs.priors_, check_exact=True)
        assert ours.loss_history_ == theirs.loss_history_ and not hasattr(ours, "skills_")


def test_a_new_crowd_kit_class_is_a_few_lines_of_settings(loop_runs, toy):
    """A Dawid-Skene with add-one counts on the data's (worker, label) pairs: its M-step is all it writes; the
    start, the E-step kernel, the loss, the stop rule and the pandas layouts are the adapter's."""
    from crowdagg.crowdkit import _EM

    class _AddOneEM(_EM):
        @staticmethod
        def m_step(counts, present, n_answers):
            return _EM.m_step(counts + present[:, :, None], present, n_answers)

    class AddOneDawidSkene(DawidSkene):
        _em = _AddOneEM

    start = AddOneDawidSkene(0).fit(toy_frame(task_major=True))
    # majority-vote shares: w1 said "no" on t1 only (q = .5/.5); its columns total 2.3 ("no") and 2.7 ("yes")
    # over its five answers, on two (worker, label) pairs: (.5 + 1)/(2.3 + 2) and (.5 + 1)/(2.7 + 2)
    np.testing.assert_allclose(start.errors_.loc[("w1", "no")], [15 / 43, 15 / 47], rtol=1e-14)
    np.testing.assert_allclose(start.errors_.loc[("w1", "yes")], [28 / 43, 32 / 47], rtol=1e-14)
    fitted = AddOneDawidSkene(100).fit(toy)
    labels_equal(fitted.labels_, truth(TOY_TRUTH))
    np.testing.assert_allclose(fitted.errors_.groupby(level="worker").sum(), 1.0, rtol=1e-12)
    assert fitted.errors_.to_numpy().min() > 0.1  # a pseudo-count keeps every pair of the data away from 0
    plain = DawidSkene(100).fit(toy)
    assert plain.errors_.to_numpy().min() < 1e-9  # (the plain M-step drives some to its floor)
    [_, (_, _, run), _] = loop_runs
    assert fitted.loss_history_ is run.trace and run.converged  # the middle fit ran in the loop, stopped by its rule


@pytest.mark.parametrize("init", ["hard-vote", "ds"])
def test_the_start_is_a_setting_too(toy, init):
    """A flavour starting elsewhere names one of the base's start strategies: one-hot majority labels, or another
    method's posteriors (here ``n_iter=0`` shows the start itself)."""
    from crowdagg.crowdkit import _EM
    from crowdagg.methods.api import aggregate

    flavour = type("Flavour", (DawidSkene,), {"_em": type("_FlavourEM", (_EM,), {"init": init})})
    frame = toy_frame(task_major=True)
    start = flavour(0).fit(frame).probas_
    result = aggregate(load_annotations(frame), "mv" if init == "hard-vote" else init, seed=0)
    if init == "hard-vote":  # one-hot on the majority labels (t1, a 2-2 tie, on one of the two)
        labels = pd.Series(result.label_names(), index=result.data.tasks)
        assert ((start == 0) | (start == 1)).all().all() and (start.sum(axis=1) == 1).all()
        assert (start.idxmax(axis=1) == labels[start.index]).drop("t1").all()
    else:  # crowdagg's ds, run unrefined: its posteriors (summed in another task order: close, not equal)
        expected = result.proba_frame()
        np.testing.assert_allclose(start.to_numpy(), expected.loc[start.index, list(start.columns)].to_numpy(),
                                   rtol=1e-12, atol=1e-15)
    assert 1 < len(flavour(100).fit(toy).loss_history_) < 100  # and EM goes on from there until the rule stops it



# --------------------------------------------------------------------------- GLAD
# crowd-kit's tests/aggregation/test_glad_aggregation.py: the toy and simple crowds recovered exactly (to convergence
# and with tol=0), the first E-step on one task, and Q's gradient against finite differences; then what its code
# does that those tests leave unchecked, against a slow reference of crowd-kit's model written from its definition.
def slow_glad_e_step(frame: pd.DataFrame, alphas: pd.Series, log_betas: pd.Series, priors: pd.Series) -> pd.DataFrame:
    """Posteriors (tasks × the prior's labels) from α and log β, one answer at a time."""
    k = len(priors)
    scores = pd.DataFrame(np.log(priors.to_numpy(dtype=float)), index=priors.index, columns=["s"]).T
    scores = pd.concat([scores] * frame["task"].nunique(), ignore_index=True)
    scores.index = pd.unique(frame["task"])
    for task, worker, label in frame[["task", "worker", "label"]].itertuples(index=False):
        right = 1.0 / (1.0 + np.exp(-alphas[worker] * np.exp(log_betas[task])))
        for c in priors.index:
            scores.loc[task, c] += np.log(right) if c == label else np.log((1.0 - right) / (k - 1))
    post = np.exp(scores.to_numpy() - scores.to_numpy().max(axis=1, keepdims=True))
    return pd.DataFrame(post / post.sum(axis=1, keepdims=True), index=scores.index, columns=priors.index)


def slow_glad_q(frame: pd.DataFrame, post: pd.DataFrame, alphas: pd.Series, log_betas: pd.Series,
                alpha_mean: float | pd.Series = 1.0, beta_mean: float | pd.Series = 1.0) -> float:
    """crowd-kit's Q: Σ over (answer, class) of post × log P(answer | class), plus the log N(0, 1) densities of
    α - μ_α and log β - μ_β; not divided."""
    k = post.shape[1]
    q = 0.0
    for task, worker, label in frame[["task", "worker", "label"]].itertuples(index=False):
        right = 1.0 / (1.0 + np.exp(-alphas[worker] * np.exp(log_betas[task])))
        for c in post.columns:
            q += post.loc[task, c] * (np.log(right) if c == label else np.log((1.0 - right) / (k - 1)))
    log_pdf = -0.5 * np.log(2 * np.pi)
    return float(q + (log_pdf - 0.5 * (alphas - alpha_mean) ** 2).sum() + (log_pdf - 0.5 * (log_betas - beta_mean) ** 2).sum())


def uniform(frame: pd.DataFrame) -> pd.Series:
    labels = pd.unique(frame["label"])
    return pd.Series(1.0 / len(labels), index=labels)


EEC = P + "eec"  # the "simple" task of crowd-kit's E-step test: three geese and a parrot


@pytest.mark.parametrize(("n_iter", "tol"), [(100, 0), (100500, 1e-5)])
@pytest.mark.parametrize("dataset", ["toy", "simple"])
def test_glad_recovers_crowd_kits_toy_and_simple_crowds(toy, simple, dataset, n_iter, tol):
    data, expected = (toy, truth(TOY_TRUTH)) if dataset == "toy" else (simple, truth(SIMPLE_TRUTH, P))
    glad = GLAD(n_iter=n_iter, tol=tol)
    labels = glad.fit_predict(data)
    labels_equal(labels, expected)
    assert labels is glad.labels_ and glad.fit_predict_proba(data) is glad.probas_
    if tol:  # stopped by its rule, well before the cap (tol=0 stops only on a fall: a plateau runs on)
        assert 1 < len(glad.loss_history_) < 100


def test_glad_first_e_step_on_one_task(simple):
    """crowd-kit's E-step test: at α = 1, log β = 1 three geese against a parrot give goose σ(2e) = 0.995664."""
    one = simple[simple["task"] == EEC]
    probas = GLAD(n_iter=0).fit(one).probas_
    assert list(probas.columns) == ["goose", "parrot"]
    expected = 1.0 / (1.0 + np.exp(-2 * np.e))  # log-odds 3·log σ(e) + log(1 − σ(e)) minus the reverse = 2e
    np.testing.assert_allclose(probas.to_numpy(), [[expected, 1 - expected]], rtol=1e-13)
    np.testing.assert_allclose(probas.to_numpy(), [[0.995664, 0.004336]], atol=1e-6)  # crowd-kit's figures


@pytest.mark.parametrize("dataset", ["one task", "toy"])
def test_glad_q_and_its_gradient(toy, simple, dataset):
    """crowd-kit's derivative test, and more: Q (kernel + priors) equals the slow reference at the start and at a
    random point, and its gradient equals finite differences of it."""
    from scipy.optimize import approx_fprime

    from crowdagg.crowdkit import _Answers, _glad_log_prior, _GladEM

    data = simple[simple["task"] == EEC] if dataset == "one task" else toy
    ans = _Answers(data)
    d = ans.data
    rng = np.random.default_rng(5)
    means = rng.normal(1.0, 0.5, d.n_workers + d.n_tasks)
    em = _GladEM(d, _glad_log_prior(ans, None), means, 25, 1e-2)
    state, q0 = em.start(0, rng)
    ones = pd.Series(1.0, index=ans.workers), pd.Series(1.0, index=ans.tasks)
    post = slow_glad_e_step(data, *ones, uniform(data))
    mean_a, mean_b = pd.Series(means[:d.n_workers], ans.workers), pd.Series(means[d.n_workers:], ans.tasks)
    assert q0 == pytest.approx(slow_glad_q(data, post, *ones, mean_a, mean_b), rel=1e-13)
    for x in (np.ones(d.n_workers + d.n_tasks), rng.normal(0.5, 1.0, d.n_workers + d.n_tasks)):
        value, grad = em.q_value(state, x)
        a, b = pd.Series(x[:d.n_workers], ans.workers), pd.Series(x[d.n_workers:], ans.tasks)
        assert value == pytest.approx(slow_glad_q(data, post, a, b, mean_a, mean_b), rel=1e-13)
        numeric = approx_fprime(x, lambda y: em.q_value(state, y)[0], 1e-7)
        np.testing.assert_allclose(grad, numeric, rtol=1e-5, atol=1e-5)


def test_glad_probas_come_from_the_e_step_before_the_last_m_step(toy):
    """n_iter=1: the start's E-step (the same as n_iter=0's) with α, log β after one M-step; n_iter=2: the E-step
    at n_iter=1's α, log β; loss_history_[-1] is Q at the fitted α, log β over those posteriors, per (answer, class)."""
    zero, one, two = (GLAD(n_iter=n, tol=-np.inf).fit(toy) for n in (0, 1, 2))
    assert_frame_equal(one.probas_, zero.probas_)
    assert (zero.alphas_ == 1).all() and (zero.betas_ == 1).all() and not (one.alphas_ == 1).any()
    expected = slow_glad_e_step(toy, one.alphas_, one.betas_, uniform(toy))
    np.testing.assert_allclose(two.probas_.to_numpy(), expected.loc[two.probas_.index, two.probas_.columns].to_numpy(),
                               rtol=1e-12)
    for fit in (one, two):
        q = slow_glad_q(toy, fit.probas_, fit.alphas_, fit.betas_)
        assert fit.loss_history_[-1] == pytest.approx(q / (len(toy) * 2), rel=1e-12)
    assert two.loss_history_[0] == one.loss_history_[0]


def test_glad_first_comparison_is_against_the_undivided_start(toy):
    """crowd-kit sets Q = Q_start (not divided) before its loop, so its first iteration stops only when
    Q_1 / (n_answers K) − Q_start < tol: with the divided start it would stop at a tol 100 times smaller."""
    ones = pd.Series(1.0, index=pd.unique(toy["worker"])), pd.Series(1.0, index=pd.unique(toy["task"]))
    q_start = slow_glad_q(toy, slow_glad_e_step(toy, *ones, uniform(toy)), *ones)
    q_1 = GLAD(n_iter=1).fit(toy).loss_history_[0]
    gain = q_1 - q_start
    assert gain > 100 * (q_1 - q_start / (len(toy) * 2)) > 0
    assert len(GLAD(n_iter=50, tol=gain * 1.001).fit(toy).loss_history_) == 1
    assert len(GLAD(n_iter=50, tol=gain * 0.999).fit(toy).loss_history_) > 1


def test_glad_stops_by_crowd_kits_signed_rule(toy):
    """Q − Q_prev < tol: a fall stops it, tol=-inf never stops (n_iter is a budget: no warning)."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        capped = GLAD(n_iter=7, tol=-np.inf).fit(toy)
    assert len(capped.loss_history_) == 7
    fitted = GLAD(n_iter=100).fit(toy)
    rises = np.diff(fitted.loss_history_)
    assert rises[-1] < 1e-5 and (rises[:-1] >= 1e-5).all()


def test_glad_layout_is_crowd_kits(toy):
    glad = GLAD(n_iter=3).fit(toy.iloc[::-1])  # tasks and workers first seen in reverse order
    assert glad.probas_.index.tolist() == ["t1", "t2", "t3", "t4", "t5"] and glad.probas_.index.name == "task"
    assert glad.probas_.columns.tolist() == ["no", "yes"] and glad.probas_.columns.name == "variable"
    assert glad.alphas_.index.tolist() == ["w5", "w4", "w3", "w2", "w1"] and glad.alphas_.index.name == "worker"
    assert glad.betas_.index.tolist() == ["t5", "t4", "t3", "t2", "t1"] and glad.betas_.index.name == "task"
    assert (glad.labels_.name, glad.alphas_.name, glad.betas_.name) == ("agg_label", "alpha", "beta")
    assert glad.priors_.index.tolist() == ["no", "yes"] and glad.priors_.tolist() == [0.5, 0.5]  # first appearance
    start = GLAD(n_iter=0).fit(toy)  # crowd-kit's starting Series carry no index name
    assert start.alphas_.index.name is None and start.betas_.index.name is None and start.loss_history_ == []
    # labels_ infers like idxmax; object ids holding numbers keep pd.unique's object dtype in alphas_/betas_
    data = pd.DataFrame({"task": pd.Series([1, 1, 2], dtype=object), "worker": ["a", "b", "a"], "label": [0, 1, 0]})
    glad = GLAD(n_iter=2).fit(data)
    assert glad.labels_.dtype == np.int64 and glad.betas_.index.dtype == object
    assert glad.probas_.index.dtype == np.int64 and glad.probas_.columns.dtype == np.int64


def test_glad_counts_a_repeated_answer_twice(toy):
    """crowd-kit keeps repeated (task, worker) rows: one more answer each, in the E-step and in Q."""
    twice = pd.concat([toy, toy.iloc[[0, 0]]], ignore_index=True)
    ones = pd.Series(1.0, index=pd.unique(toy["worker"])), pd.Series(1.0, index=pd.unique(toy["task"]))
    probas = GLAD(n_iter=0).fit(twice).probas_
    expected = slow_glad_e_step(twice, *ones, uniform(twice))
    np.testing.assert_allclose(probas.to_numpy(), expected.loc[probas.index, probas.columns].to_numpy(), rtol=1e-12)
    assert not np.allclose(probas.to_numpy(), GLAD(n_iter=0).fit(toy).probas_.to_numpy())
    one = GLAD(n_iter=1).fit(twice)
    assert one.loss_history_[0] == pytest.approx(
        slow_glad_q(twice, one.probas_, one.alphas_, one.betas_) / (len(twice) * 2), rel=1e-12)


def test_glad_labels_priors(toy):
    """A fixed class prior in the E-step; a label no answer used is one more class (K = 3 in Q's 1/(K − 1))."""
    priors = pd.Series({"yes": 0.2, "no": 0.5, "maybe": 0.3})
    start = GLAD(n_iter=0, labels_priors=priors).fit(toy)
    assert start.probas_.columns.tolist() == ["maybe", "no", "yes"] and start.priors_ is priors
    ones = pd.Series(1.0, index=pd.unique(toy["worker"])), pd.Series(1.0, index=pd.unique(toy["task"]))
    expected = slow_glad_e_step(toy, *ones, priors)
    np.testing.assert_allclose(start.probas_.to_numpy(), expected[start.probas_.columns].to_numpy(), rtol=1e-12)
    one = GLAD(n_iter=1, labels_priors=priors).fit(toy)
    assert one.loss_history_[0] == pytest.approx(
        slow_glad_q(toy, one.probas_, one.alphas_, one.betas_) / (len(toy) * 3), rel=1e-12)
    # a zero prior: that class is never the label
    never = GLAD(n_iter=5, labels_priors=pd.Series({"yes": 0.0, "no": 1.0})).fit(toy)
    assert (never.labels_ == "no").all() and (never.probas_["yes"] == 0).all()


def test_glad_priors_on_alpha_and_log_beta(toy):
    """The M-step maximises Q with the priors' means: run to convergence, Q's gradient there is 0 -- the data's
    pull on each α balances α − μ (a number, or a Series by worker / by task)."""
    means = pd.Series({"w1": -1.0, "w2": 2.0, "w3": 0.0, "w4": 3.0, "w5": 1.0})
    glad = GLAD(n_iter=1, alphas_priors_mean=means, betas_priors_mean=0.5, m_step_max_iter=1000,
                m_step_tol=1e-10).fit(toy)
    x = np.concatenate([glad.alphas_.to_numpy(), glad.betas_.to_numpy()])
    n_w = len(glad.alphas_)

    def q(y: np.ndarray) -> float:
        a, b = pd.Series(y[:n_w], glad.alphas_.index), pd.Series(y[n_w:], glad.betas_.index)
        return slow_glad_q(toy, glad.probas_, a, b, means, 0.5)

    from scipy.optimize import approx_fprime

    np.testing.assert_allclose(approx_fprime(x, q, 1e-6), 0.0, atol=1e-5)
    plain = GLAD(n_iter=1, m_step_max_iter=1000, m_step_tol=1e-10).fit(toy)
    assert (glad.alphas_ - plain.alphas_).abs().max() > 0.1  # the means moved the abilities
    # with one label the answers say nothing of α, log β (crowd-kit's data term is NaN, skipped): only the priors
    one_label = pd.DataFrame({"task": ["t1", "t1", "t2"], "worker": ["a", "b", "a"], "label": ["x", "x", "x"]})
    fit = GLAD(n_iter=5).fit(one_label)
    assert (fit.probas_["x"] == 1).all() and fit.labels_.tolist() == ["x", "x"]
    assert (fit.alphas_ == 1).all() and (fit.betas_ == 1).all()
    assert fit.loss_history_ == pytest.approx([-2 * np.log(2 * np.pi) / 3] * 2, rel=1e-14)  # 4 log N(0) / 3 rows
    moved = GLAD(n_iter=5, alphas_priors_mean=3.0).fit(one_label)
    np.testing.assert_allclose(moved.alphas_, 3.0, rtol=1e-12)


def test_glad_m_step_is_scipys_conjugate_gradient_from_the_current_point(toy, monkeypatch):
    import scipy.optimize

    calls = []
    real = scipy.optimize.minimize

    def spy(fun, x0, **kwargs):
        calls.append((x0.copy(), kwargs))
        result = real(fun, x0, **kwargs)
        calls[-1] += (result.x.copy(),)
        return result

    monkeypatch.setattr(scipy.optimize, "minimize", spy)
    glad = GLAD(n_iter=3, tol=-np.inf, m_step_max_iter=7, m_step_tol=0.5).fit(toy)
    assert len(calls) == 3
    np.testing.assert_array_equal(calls[0][0], 1.0)  # α = 1, log β = 1 to start
    for (x0, _, _), (_, _, previous) in zip(calls[1:], calls[:-1]):
        np.testing.assert_array_equal(x0, previous)
    for _, kwargs, _ in calls:
        assert kwargs["method"] == "CG" and kwargs["jac"] is True and kwargs["tol"] == 0.5
        assert kwargs["options"]["maxiter"] == 7
    np.testing.assert_array_equal(np.concatenate([glad.alphas_, glad.betas_]), calls[-1][2])


def test_glad_runs_in_crowdaggs_loop_on_the_glad_kernels(loop_runs, toy, monkeypatch):
    from crowdagg.kernels import glad as kernels
    from crowdagg.methods.loop import MAXIMISE, AbsoluteGain

    passes = {"e_step": 0, "objective": 0}
    for name in passes:
        real = getattr(kernels, f"_{name}")

        def counted(*args, _real=real, _name=name):
            passes[_name] += 1
            return _real(*args)

        monkeypatch.setattr(kernels, f"_{name}", counted)
    glad = GLAD(n_iter=100).fit(toy)
    [(rule, direction, run)] = loop_runs
    assert isinstance(rule, AbsoluteGain) and direction == MAXIMISE and run.converged
    assert glad.loss_history_ is run.trace
    # one E-step to start, one per later iteration (the first reuses the start's), Q and its gradient by the kernel
    assert passes["e_step"] == len(run.trace) and passes["objective"] > 2 * len(run.trace)


def test_glad_edge_cases_and_checks(toy):
    empty = GLAD().fit(pd.DataFrame([], columns=["task", "worker", "label"]))  # crowd-kit: ZeroDivisionError
    assert empty.probas_.empty and empty.labels_.empty and empty.alphas_.empty and empty.loss_history_ == []
    assert (empty.labels_.name, empty.alphas_.name, empty.betas_.name) == ("agg_label", "alpha", "beta")
    assert len(empty.tasks_) == len(empty.workers_) == len(empty.prior_labels_) == 0
    assert empty.alphas_priors_mean_.empty and empty.betas_priors_mean_.empty
    flags = pd.DataFrame({"task": ["t1", "t1", "t2"], "worker": ["a", "b", "a"], "label": [True, False, True]})
    assert GLAD(n_iter=5).fit_predict(flags).dtype == bool  # crowd-kit: "Item wrong length"
    nan = toy.assign(label=toy["label"].where(toy.index != 0))  # a NaN label is no answer
    assert_frame_equal(GLAD(n_iter=5).fit(nan).probas_, GLAD(n_iter=5).fit(toy.iloc[1:]).probas_)
    for bad in ({"n_iter": -1}, {"n_iter": 2.0}, {"tol": np.nan}, {"m_step_max_iter": True}, {"m_step_tol": None}):
        with pytest.raises(ValueError, match="n_iter|tol|m_step"):
            GLAD(**bad).fit(toy)
    with pytest.raises(ValueError, match=r"no prior for the label\(s\) \['yes'\]"):  # crowd-kit: NaN alphas
        GLAD(labels_priors=pd.Series({"no": 1.0})).fit(toy)
    for priors in (pd.Series({"no": -0.5, "yes": 1.5}), pd.Series({"no": 0.0, "yes": 0.0}), {"no": 0.5, "yes": 0.5}):
        with pytest.raises(ValueError, match="labels_priors"):
            GLAD(labels_priors=priors).fit(toy)
    for missing in (np.nan, None, pd.NA):  # crowd-kit counts it in K but drops its column; pandas' reindex raised
        with pytest.raises(ValueError, match="labels_priors names a missing label"):
            GLAD(labels_priors=pd.Series([0.5, 0.5, 0.0], index=pd.Index(["no", "yes", missing], dtype=object))).fit(toy)
    with pytest.raises(ValueError, match="alphas_priors_mean has no finite value for 1 worker.*'w5'"):
        GLAD(alphas_priors_mean=pd.Series({"w1": 1.0, "w2": 1.0, "w3": 1.0, "w4": 1.0})).fit(toy)
    with pytest.raises(ValueError, match="betas_priors_mean must be finite"):
        GLAD(betas_priors_mean=np.inf).fit(toy)
    assert repr(GLAD(n_iter=3)).startswith("GLAD(n_iter=3, tol=1e-05, silent=True, labels_priors=None")


def test_glad_prior_means_of_ids_without_answers_are_not_used(toy):
    """crowd-kit aligns a mean for an unknown worker or task into its Q (-inf, a line search on -inf); a
    table of means wider than the answers is used at the answers' ids only."""
    workers, tasks = pd.unique(toy["worker"]), pd.unique(toy["task"])
    alphas = pd.Series(np.linspace(0.5, 2.0, len(workers)), index=workers)
    betas = pd.Series(np.linspace(-0.5, 1.5, len(tasks)), index=tasks)
    wide = GLAD(n_iter=3, alphas_priors_mean=pd.concat([alphas, pd.Series({"nobody": 9.0})]),
                betas_priors_mean=pd.concat([pd.Series({"no task": -9.0}), betas])).fit(toy)
    exact = GLAD(n_iter=3, alphas_priors_mean=alphas, betas_priors_mean=betas).fit(toy)
    assert np.isfinite(wide.loss_history_).all()
    assert wide.loss_history_ == exact.loss_history_
    assert_series_equal(wide.alphas_, exact.alphas_)
    assert_frame_equal(wide.probas_, exact.probas_)


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


def test_glad_priors_given_as_text_are_refused(toy):
    """"0.5" is no number: crowd-kit's arithmetic raises on it; ``to_numpy(float)`` read it as 0.5."""
    workers = pd.unique(toy["worker"])
    with pytest.raises(ValueError, match="labels_priors must hold numbers"):
        GLAD(labels_priors=pd.Series({"no": "0.5", "yes": "0.5"})).fit(toy)
    with pytest.raises(ValueError, match="labels_priors must hold numbers"):
        GLAD(labels_priors=pd.Series({"no": 0.5, "yes": "0.5"}, dtype=object)).fit(toy)
    with pytest.raises(ValueError, match="alphas_priors_mean must hold numbers"):
        GLAD(alphas_priors_mean=pd.Series("1", index=workers)).fit(toy)
    numbers = pd.Series([0.5, 0.5], index=["no", "yes"], dtype=object)  # numbers in an object column are numbers
    assert_frame_equal(GLAD(n_iter=2, labels_priors=numbers).fit(toy).probas_,
                       GLAD(n_iter=2, labels_priors=numbers.astype(float)).fit(toy).probas_)
