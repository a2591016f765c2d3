"""crowdagg.crowdkit.DawidSkene and OneCoinDawidSkene: crowd-kit 1.4.2's own test cases restated (step by step,
gold, initial_error), `aggregate` step for step, crowd-kit's figures on real data, the adapter as settings of
crowdagg's loop, and crowd-kit itself on the real datasets."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from pandas.testing import assert_frame_equal, assert_series_equal

from crowdagg import aggregate, load_annotations
from crowdagg import crowdkit as ours
from crowdagg.crowdkit import DawidSkene, MajorityVote, OneCoinDawidSkene

from .crowds import PANDAS3, SIMPLE_TRUTH, TOY_TRUTH, P, frame, labels_equal, toy_frame, truth
from .oracle import CATEGORICAL, SLOW_ONE_COIN, TOL, ck, quiet, same_frame, same_labels, same_series


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

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "crowdkit_reference.json"
    return json.loads(path.read_text())["datasets"]


def reference_versions() -> dict:
    import json
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "crowdkit_reference.json"
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



@pytest.mark.parametrize("cls", [DawidSkene, OneCoinDawidSkene])
@pytest.mark.parametrize(("n_iter", "tol"), [(100, 1e-5), (100, 1e-2), (3, -np.inf), (0, 1e-5)])
def test_the_iterations_are_crowdagg_loops(loop_runs, toy, cls, n_iter, tol):
    """One run of the loop per fit: loss_history_ is its objective trace, stopped by crowd-kit's rule."""

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
    from crowdagg.crowdkit.dawid_skene import _EM
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
    from crowdagg.crowdkit.dawid_skene import _OneCoinEM

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
    from crowdagg.crowdkit.dawid_skene import _EM

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
    from crowdagg.crowdkit.dawid_skene import _EM
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


# ----------------------------------------------------------------------------- Dawid-Skene, one-coin
@pytest.mark.parametrize("name", CATEGORICAL)
def test_dawid_skene_as_crowd_kit(answers, name):
    data = answers(name)
    mine, theirs = ours.DawidSkene(n_iter=100).fit(data), quiet(lambda: ck.DawidSkene(n_iter=100).fit(data))
    assert mine.loss_history_ == pytest.approx(theirs.loss_history_, rel=1e-9, abs=1e-12)
    same_labels(mine.labels_, theirs.labels_)
    same_frame(mine.probas_, theirs.probas_)
    same_series(mine.priors_, theirs.priors_)
    same_frame(mine.errors_, theirs.errors_)
    assert (mine.errors_.dtypes == theirs.errors_.dtypes).all()


@pytest.mark.parametrize("name", CATEGORICAL)
def test_one_coin_as_crowd_kit(answers, name):
    data = answers(name)
    n_iter = SLOW_ONE_COIN.get(name, 100)
    mine = ours.OneCoinDawidSkene(n_iter=n_iter).fit(data)
    theirs = quiet(lambda: ck.OneCoinDawidSkene(n_iter=n_iter).fit(data))
    assert mine.loss_history_ == pytest.approx(theirs.loss_history_, rel=1e-9, abs=1e-12)
    same_labels(mine.labels_, theirs.labels_)
    same_frame(mine.probas_, theirs.probas_)
    same_series(mine.priors_, theirs.priors_)
    same_series(mine.skills_, theirs.skills_)
    same_frame(mine.errors_, theirs.errors_)


@pytest.mark.parametrize("n_iter", [0, 1])
@pytest.mark.parametrize("cls", ["DawidSkene", "OneCoinDawidSkene"])
def test_the_start_and_first_step_as_crowd_kit(answers, cls, n_iter):
    """n_iter=0 is the majority vote's shares and the first M-step, in crowd-kit's layout."""
    data = answers("web")
    mine, theirs = getattr(ours, cls)(n_iter=n_iter).fit(data), quiet(lambda: getattr(ck, cls)(n_iter=n_iter).fit(data))
    same_labels(mine.labels_, theirs.labels_)
    same_frame(mine.probas_, theirs.probas_)
    same_series(mine.priors_, theirs.priors_)
    same_frame(mine.errors_, theirs.errors_)


@pytest.mark.parametrize("name", ["bluebird", "web"])
def test_dawid_skene_with_gold_as_crowd_kit(datasets_dir, answers, name):
    """``true_labels`` on every third task with gold: clamped in every step, as crowd-kit does."""
    data = answers(name)
    gold = pd.read_csv(datasets_dir / name / "truth.csv").set_index("task")["label"].iloc[::3]
    mine, theirs = ours.DawidSkene(n_iter=10).fit(data, gold), quiet(lambda: ck.DawidSkene(n_iter=10).fit(data, gold))
    same_labels(mine.labels_, theirs.labels_)
    same_frame(mine.probas_, theirs.probas_)
    same_series(mine.priors_, theirs.priors_)
    same_frame(mine.errors_, theirs.errors_)


# ----------------------------------------------------------------------------- crowd-kit's own step-by-step tests
def toy() -> pd.DataFrame:
    """crowd-kit's ``toy_answers_df`` fixture (tests/aggregation/conftest.py), worker-major."""
    grid = {"w1": ["no", "yes", "yes", "yes", "yes"], "w2": ["yes", "yes", "no", "yes", "no"],
            "w3": [None, "yes", "no", "yes", "no"], "w4": ["yes", "no", "yes", "yes", "no"],
            "w5": ["no", "no", "no", "yes", "no"]}
    rows = [(w, f"t{i + 1}", y) for w, ys in grid.items() for i, y in enumerate(ys) if y]
    return pd.DataFrame(rows, columns=["worker", "task", "label"])


@pytest.mark.parametrize("n_iter", [0, 1, 2])
def test_step_by_step_dawid_skene_as_crowd_kit(n_iter):
    """crowd-kit's ``test_dawid_skene_step_by_step`` compares ``errors_`` with ``assert_frame_equal``: the
    columns' dtype is part of it (``str`` under pandas 3, where ours were ``object``)."""
    data = toy().sort_values(["task", "worker"], kind="stable")[["task", "worker", "label"]].reset_index(drop=True)
    mine, theirs = ours.DawidSkene(n_iter=n_iter).fit(data), quiet(lambda: ck.DawidSkene(n_iter=n_iter).fit(data))
    assert_frame_equal(mine.errors_, theirs.errors_, check_exact=False, **TOL)
    assert_frame_equal(mine.probas_, theirs.probas_, check_exact=False, **TOL)
    assert_series_equal(mine.priors_, theirs.priors_, check_exact=False, **TOL)
    assert_series_equal(mine.labels_, theirs.labels_)
    assert mine.loss_history_ == pytest.approx(theirs.loss_history_, rel=1e-12)
