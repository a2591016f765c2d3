"""The result type: its fields per method, shapes checked, short repr, labelled pandas views."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from crowdagg import aggregate, load_annotations
from crowdagg.data.annotations import AnnotationSet
from crowdagg.errors import ResourceError
from crowdagg.methods.base import make_result, one_coin_matrices
from crowdagg.methods.votes.wmv import log_odds_weights


@pytest.fixture(scope="module")
def bluebird() -> AnnotationSet:
    return load_annotations("example:bluebird")


@pytest.fixture(scope="module")
def fits(bluebird):
    return {m: aggregate(bluebird, m) for m in ("mv", "wmv", "wawa", "ds", "onecoin")}


def test_worker_params_in_each_method_s_own_form(fits, bluebird):
    w, k = bluebird.n_workers, bluebird.n_classes
    assert set(fits["ds"].worker_params) == {"confusion"}
    assert fits["ds"].worker_params["confusion"].shape == (w, k, k)
    assert fits["ds"].confusion is fits["ds"].worker_params["confusion"]
    assert fits["mv"].worker_params == {}
    for m in ("onecoin", "wawa", "wmv"):
        acc = fits[m].worker_params["accuracy"]
        assert acc.shape == (w,) and np.all((acc >= 0) & (acc <= 1))
        np.testing.assert_array_equal(fits[m].worker_accuracy, acc)
        # the full confusion, built on demand, is the one-coin matrices of that accuracy
        np.testing.assert_array_equal(fits[m].confusion, one_coin_matrices(acc, k))
    np.testing.assert_array_equal(fits["wmv"].worker_params["weight"],
                                  log_odds_weights(fits["wmv"].worker_params["accuracy"], k))
    for r in fits.values():
        assert r.task_params == {}


def test_objective_trace_and_its_name(fits):
    ds = fits["ds"]
    assert ds.objective_name == "log-likelihood" and len(ds.objective) == ds.n_iter
    np.testing.assert_array_equal(ds.log_likelihood, ds.objective)
    assert np.all(np.diff(ds.objective) > -1e-8 * abs(ds.objective[-1]))  # EM never goes down
    wmv = fits["wmv"]
    assert wmv.n_iter > 0 and wmv.objective.size == 0 and wmv.objective_name == "" and wmv.log_likelihood.size == 0


def test_shapes_are_checked(bluebird):
    n, w, k = bluebird.n_tasks, bluebird.n_workers, bluebird.n_classes
    post = np.full((n, k), 1.0 / k)
    good = make_result("x", bluebird, post, np.zeros(n, np.int64), np.full(k, 1.0 / k),
                       worker_params={"ability": np.ones(w)}, task_params={"difficulty": np.ones(n)})
    good.check_shapes()
    for bad in ({"worker_params": {"ability": np.ones(w + 1)}}, {"task_params": {"difficulty": np.ones(w)}},
                {"worker_params": {"scalar": np.float64(1.0)}}):
        r = make_result("x", bluebird, post, np.zeros(n, np.int64), np.full(k, 1.0 / k), **bad)
        with pytest.raises(RuntimeError, match="wrong shape"):
            r.check_shapes()


def test_per_task_and_per_worker_parameter_frames():
    frame = pd.DataFrame({"task": [10, 11, 10, 12], "worker": [7, 8, 8, 7], "label": ["x", "y", "x", "y"]})
    data = load_annotations(frame)
    n, w = data.n_tasks, data.n_workers
    r = make_result("x", data, np.full((n, 2), 0.5), np.zeros(n, np.int64), np.full(2, 0.5),
                    worker_params={"ability": np.array([1.5, 0.5]), "matrix": np.ones((w, 2, 2))},
                    task_params={"difficulty": np.array([0.1, 0.2, 0.3])})
    wf = r.worker_params_frame()
    assert wf.index.name == "worker" and wf.index.dtype == np.int64 and wf.index.tolist() == [7, 8]
    assert list(wf.columns) == ["n_answers", "ability"]  # only one-number parameters become columns
    assert wf.loc[7, "ability"] == 1.5 and wf.loc[8, "n_answers"] == 2
    tf = r.task_params_frame()
    assert tf.index.tolist() == [10, 11, 12] and tf.loc[12, "difficulty"] == 0.3 and tf.loc[10, "n_answers"] == 2
    assert "worker_params=[ability, matrix]" in repr(r) and "task_params=[difficulty]" in repr(r)


def test_no_confusion_for_a_method_without_one(bluebird):
    n, k = bluebird.n_tasks, bluebird.n_classes
    r = make_result("x", bluebird, np.full((n, k), 0.5), np.zeros(n, np.int64), np.full(k, 0.5),
                    worker_params={"alpha": np.ones(bluebird.n_workers)})
    assert not r.has_confusion
    with pytest.raises(AttributeError, match=r"^method 'x' has no worker confusion matrices: its worker model is not "
                                             r"a confusion \(its worker parameters, in worker_params: alpha\)$"):
        _ = r.confusion
    with pytest.raises(AttributeError, match="no worker confusion"):
        _ = r.worker_accuracy  # (no accuracy of its own, and none to derive)


def test_model_params_slot(fits, bluebird):
    for r in fits.values():
        assert r.model_params == {} and "model_params" not in repr(r)
    n, k = bluebird.n_tasks, bluebird.n_classes
    handle = object()
    r = make_result("x", bluebird, np.full((n, k), 0.5), np.zeros(n, np.int64), np.full(k, 0.5),
                    model_params={"weights": np.array([0.25, 0.75]), "network": handle})
    assert r.model_params["network"] is handle and r.model_params["weights"].tolist() == [0.25, 0.75]
    assert repr(r).endswith("model_params=[weights, network])")
    r.check_shapes()  # neither per worker nor per task: no shape to keep


def test_workers_table_layout_follows_the_worker_parameters():
    """A confusion (given or derived): the long form as --workers always wrote it; none: one row per worker."""
    frame = pd.DataFrame({"task": [10, 11, 10, 12], "worker": [7, 8, 8, 7], "label": ["x", "y", "x", "y"]})
    data = load_annotations(frame)
    n, w = data.n_tasks, data.n_workers
    args = ("x", data, np.full((n, 2), 0.5), np.zeros(n, np.int64), np.full(2, 0.5))
    params = {"alpha": np.array([1.5, -0.5]), "matrix": np.ones((w, 2, 2)), "bias": np.array([0.0, 2.0])}
    wide = make_result(*args, worker_params=params, task_params={"beta": np.array([0.1, 0.2, 0.3]),
                                                                 "grid": np.ones((n, 2))})
    assert wide.worker_columns() == ("worker", "alpha", "bias", "n_answers")  # one-number parameters, in order
    table = wide.workers_table()
    assert list(table) == list(wide.worker_columns()) and table["worker"].tolist() == ["7", "8"]
    assert table["alpha"].tolist() == [1.5, -0.5] and table["n_answers"].tolist() == [2, 2]
    frame_ = wide.workers_frame()
    assert list(frame_.columns) == ["worker", "alpha", "bias", "n_answers"] and frame_["bias"].tolist() == [0.0, 2.0]
    assert wide.task_columns() == ("task", "beta", "n_answers")
    tasks = wide.task_params_table()
    assert tasks["task"].tolist() == ["10", "11", "12"] and tasks["beta"].tolist() == [0.1, 0.2, 0.3]
    assert tasks["n_answers"].tolist() == [2, 1, 1]
    arrow = wide.task_params_table(arrow=True)
    assert arrow["task"].to_pylist() == ["10", "11", "12"]
    # A method that can derive a confusion keeps the long form, whatever else it has.
    derived = make_result(*args, lambda: one_coin_matrices(np.array([0.9, 0.6]), 2), worker_params=params)
    assert derived.has_confusion and derived.worker_columns()[:3] == ("worker", "true_label", "observed_label")
    long = derived.workers_table()
    assert list(long) == list(derived.worker_columns()) and len(long["worker"]) == 8  # 2 workers × 2²
    # No task parameters: task and n_answers.
    assert derived.task_columns() == ("task", "n_answers")
    assert list(derived.task_params_table()) == ["task", "n_answers"]


def test_parameter_tables_check_their_size_first(bluebird):
    n, k, w = bluebird.n_tasks, bluebird.n_classes, bluebird.n_workers
    r = make_result("x", bluebird, np.full((n, k), 0.5), np.zeros(n, np.int64), np.full(k, 0.5),
                    worker_params={"alpha": np.ones(w)}, task_params={"beta": np.ones(n)})
    with pytest.raises(ResourceError, match=r"a table of 39 workers × 3 columns"):
        r.workers_table(max_memory=100)
    with pytest.raises(ResourceError, match=r"a table of 108 tasks × 3 columns"):
        r.task_params_table(max_memory=100)


def test_result_repr_is_short():
    r = aggregate(load_annotations("example:bluebird"), "ds")
    text = repr(r)
    assert text.startswith("AggregationResult(method='ds', n_tasks=108, n_classes=2, n_iter=") and len(text) < 160


def test_labelled_pandas_views_keep_the_ids_dtype():
    frame = pd.DataFrame({"task": [10, 11, 10, 12], "worker": ["a", "b", "b", "a"], "label": ["x", "y", "x", "y"]})
    r = aggregate(load_annotations(frame), "ds")
    s = r.labels_series()
    assert s.index.dtype == np.int64 and s.index.name == "task" and s.loc[10] == "x"
    p = r.proba_frame()
    assert list(p.columns) == ["x", "y"] and p.index.tolist() == [10, 11, 12]
    np.testing.assert_allclose(p.to_numpy().sum(axis=1), 1.0)
    c = r.confusion_frame()
    assert c.index.names == ["worker", "true"] and list(c.columns) == ["x", "y"]
    np.testing.assert_array_equal(c.loc[("a", "x")].to_numpy(), r.confusion[0, 0])


def test_labelled_views_with_awkward_ids():
    big = pd.DataFrame({"task": np.array([2**63 + 5, 2**63 + 5, 3, 3], np.uint64), "worker": [1, 2, 1, 2],
                        "label": list("pqpp")})
    s = aggregate(load_annotations(big), "mv").labels_series()
    assert s.index.dtype == np.uint64 and s.index.tolist() == [2**63 + 5, 3]
    zeros = pd.DataFrame({"task": [0.0, -0.0, 0.0], "worker": ["a", "b", "b"], "label": ["x", "y", "x"]})
    s2 = aggregate(load_annotations(zeros), "mv").labels_series()
    assert s2.index.is_unique and s2.index.tolist() == ["0.0", "-0.0"]  # two ids: kept as their names


def test_reserved_names_full_confusion_shape_and_the_confusion_argument(bluebird):
    n, w, k = bluebird.n_tasks, bluebird.n_workers, bluebird.n_classes
    args = ("x", bluebird, np.full((n, k), 0.5), np.zeros(n, np.int64), np.full(k, 0.5))
    for params in ({"confusion": np.ones((w, 3, 3))}, {"n_answers": np.ones(w)}, {"worker": np.ones(w)}):
        with pytest.raises(RuntimeError, match="wrong shape"):
            make_result(*args, worker_params=params).check_shapes()
    for params in ({"n_answers": np.ones(n)}, {"task": np.ones(n)}):  # the columns of --task-params
        with pytest.raises(RuntimeError, match="wrong shape"):
            make_result(*args, task_params=params).check_shapes()
    with pytest.raises(TypeError, match="callable"):
        make_result(*args, np.ones((w, k, k)))


# --------------------------------------------------------------------------- labels in their column's dtype
#: A small crowd: truth 0 1 1 0 1; three workers each; the vote is wrong on the last task only.
CROWD_TASKS = [101, 101, 101, 102, 102, 102, 103, 103, 103, 104, 104, 104, 105, 105, 105]
CROWD_WORKERS = ["a", "b", "c"] * 5
CROWD_CODES = [0, 0, 1, 1, 1, 0, 1, 1, 1, 0, 0, 0, 0, 0, 1]
TRUTH_CODES = [0, 1, 1, 0, 1]

LABEL_KINDS = {
    "int": (lambda c: pd.Series(c, dtype="int64"), np.dtype("int64")),
    "float": (lambda c: pd.Series(np.where(np.asarray(c) == 1, 2.5, 0.5)), np.dtype("float64")),
    "bool": (lambda c: pd.Series(np.asarray(c) == 1), np.dtype("bool")),
    "string": (lambda c: pd.Series(np.where(np.asarray(c) == 1, "yes", "no")).astype("string"), pd.StringDtype()),
    "Int64": (lambda c: pd.Series(c, dtype="Int64"), pd.Int64Dtype()),
    "boolean": (lambda c: pd.Series(np.asarray(c) == 1, dtype="boolean"), pd.BooleanDtype()),
    "category": (lambda c: pd.Series(np.where(np.asarray(c) == 1, "yes", "no")).astype("category"), "category"),
    "int category": (lambda c: pd.Series(c).astype("category"), "category"),
}


@pytest.mark.parametrize("source", ["frame", "parquet"])
@pytest.mark.parametrize("kind", sorted(LABEL_KINDS))
def test_labels_compare_with_a_pandas_truth_in_their_own_dtype(kind, source, tmp_path):
    make, dtype = LABEL_KINDS[kind]
    frame = pd.DataFrame({"task": CROWD_TASKS, "worker": CROWD_WORKERS, "label": make(CROWD_CODES)})
    truth = pd.Series(make(TRUTH_CODES).array, index=pd.Index([101, 102, 103, 104, 105], name="task"))
    if source == "parquet":
        frame.to_parquet(tmp_path / "answers.parquet")
        data = load_annotations(str(tmp_path / "answers.parquet"))
    else:
        data = load_annotations(frame)
    result = aggregate(data, "mv")
    labels = result.labels_series()
    assert labels.index.dtype == np.int64 and labels.index.tolist() == [101, 102, 103, 104, 105]
    assert (labels == truth).mean() == pytest.approx(0.8)  # today's strings gave 0
    if source == "frame" or kind in ("int", "float", "bool", "category"):  # Parquet keeps these, not pandas' own
        assert labels.dtype == dtype
    frame_view = result.to_frame()
    assert frame_view["task"].tolist() == [101, 102, 103, 104, 105]
    assert (frame_view["label"].to_numpy() == labels.to_numpy()).all()
    proba = result.proba_frame()
    assert list(proba.columns) == list(pd.unique(make([0, 1])))  # the classes in their own type, sorted
    assert proba.loc[105, labels[105]] == pytest.approx(2 / 3)
    assert result.confusion_frame().index.get_level_values("true")[0] == proba.columns[0]


def test_text_labels_stay_text(tmp_path):
    path = tmp_path / "answers.csv"
    pd.DataFrame({"task": CROWD_TASKS, "worker": CROWD_WORKERS, "label": CROWD_CODES}).to_csv(path, index=False)
    labels = aggregate(load_annotations(str(path)), "mv").labels_series()
    assert labels.tolist() == ["0", "1", "1", "0", "0"] and labels.index.tolist() == ["101", "102", "103", "104", "105"]


def test_labels_that_read_the_same_in_their_type_stay_names():
    # 1 and 1.0 are two classes in a text column; a float dtype would merge them: the names are kept.
    data = AnnotationSet.from_names(["t1", "t2"], ["w", "w"], ["1", "1.0"])
    object.__setattr__(data, "class_dtype", "double")
    result = aggregate(data, "mv")
    assert sorted(result.labels_series().tolist()) == ["1", "1.0"]


# --------------------------------------------------------------------------- labelled views check their size
def test_views_that_grow_with_classes_are_refused_up_front_with_their_size():
    from crowdagg.errors import ResourceError

    k = 2000
    data = AnnotationSet.from_codes(np.arange(200) % 100, np.arange(200) % 50, np.arange(200) % k, n_classes=k)
    result = aggregate(data, "mv")
    for call, what in ((lambda: result.to_frame(proba=True, max_memory="2M"), "a table of 100 tasks × 2,000 classes"),
                       (lambda: result.proba_frame(max_memory="1M"), "a frame of 100 tasks × 2,000 classes"),
                       (lambda: result.confusion_frame(max_memory="100M"), "a frame of 50 workers × 2,000² classes"),
                       (lambda: result.workers_frame(max_memory="100M"), "a frame of 50 workers × 2,000² classes"),
                       (lambda: result.workers_table(max_memory="100M"), "a table of 50 workers × 2,000² classes")):
        with pytest.raises(ResourceError, match=r"this needs ~[\d.]+ [MG]B \(" + what):
            call()
    assert result.to_frame(proba=True, max_memory="64M").shape == (100, 2004)
    result.max_memory = "1M"  # the fit's limit is the default
    with pytest.raises(ResourceError, match="max_memory=1.00 MB"):
        result.proba_frame()
