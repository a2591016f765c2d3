"""Agreement statistics (:mod:`crowdagg.reports.agreement`): hand-made crowds with known figures, Krippendorff's
alpha against the ``krippendorff`` package on every real categorical dataset, crowd-kit's metrics on a real set."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from crowdagg import aggregate, load_annotations
from crowdagg.data.annotations import AnnotationSet
from crowdagg.errors import DataError, ResourceError, UsageError
from crowdagg.reports.agreement import (
    SUMMARY_COLUMNS,
    TASK_COLUMNS,
    WORKER_COLUMNS,
    fleiss_kappa,
    krippendorff_alpha,
    stats,
)
from tests.tiers import quick_case

#: The real categorical datasets (``emotion`` is numeric).
CATEGORICAL = ("bluebird", "cf", "cf_amt", "dog", "face", "labelme", "music", "rte", "sentiment", "sp_amt", "temp",
               "trec", "web", "zencrowd")


def crowd(rows: list[tuple[object, object, object]], classes=None) -> AnnotationSet:
    """An annotation set from (task, worker, label) rows."""
    task, worker, label = zip(*rows)
    return AnnotationSet.from_names(list(map(str, task)), list(map(str, worker)), list(map(str, label)),
                                    classes=classes)


def from_count_table(table: np.ndarray) -> AnnotationSet:
    """A crowd whose task ``u`` has ``table[u, c]`` answers of class ``c``, each by a worker of its own."""
    rows = []
    for u, counts in enumerate(table):
        j = 0
        for c, n in enumerate(counts):
            for _ in range(int(n)):
                rows.append((f"t{u}", f"w{j}", f"c{c}"))
                j += 1
    return crowd(rows, classes=[f"c{c}" for c in range(table.shape[1])])


def slow_fleiss(table: np.ndarray) -> float:
    """Fleiss' kappa of a (tasks, classes) count table, as statsmodels' ``fleiss_kappa`` writes it."""
    n_sub, _ = table.shape
    n_rat = table.sum(axis=1)[0]
    p_cat = table.sum(axis=0) / (n_sub * n_rat)
    p_row = ((table * table).sum(axis=1) - n_rat) / (n_rat * (n_rat - 1.0))
    p_mean, p_e = p_row.mean(), (p_cat * p_cat).sum()
    return (p_mean - p_e) / (1 - p_e)


@pytest.mark.quick
def test_crowd_kit_docstring_example_and_perfect_agreement():
    """crowd-kit's example: alpha 0.4444; two workers agreeing on everything: alpha 1, Fleiss' kappa 1."""
    partial = crowd([("X", "A", "Yes"), ("X", "B", "Yes"), ("Y", "A", "No"), ("Y", "B", "No"),
                     ("Z", "A", "Yes"), ("Z", "B", "No")])
    assert stats(partial).alpha == pytest.approx(4 / 9, abs=1e-15)
    perfect = crowd([(t, w, lab) for t, lab in (("a", "x"), ("b", "y"), ("c", "x"), ("d", "z")) for w in "PQR"])
    s = stats(perfect)
    assert s.alpha == 1.0 and s.fleiss_kappa == 1.0
    assert s.uncertainty == 0.0 and s.agreement == 1.0 and s.consistency == 1.0
    assert s.fleiss_note == "4 tasks of 3 answers each"
    np.testing.assert_array_equal(s.worker_agreement, [1.0, 1.0, 1.0])


@pytest.mark.quick
def test_one_class_only_leaves_alpha_and_kappa_undefined_and_says_why():
    s = stats(crowd([(t, w, "yes") for t in "abc" for w in "PQ"]))
    assert np.isnan(s.alpha) and "undefined" in s.alpha_note and "one class" in s.alpha_note
    assert np.isnan(s.fleiss_kappa) and "one class" in s.fleiss_note
    summary = s.summary()
    assert list(summary.columns) == list(SUMMARY_COLUMNS)
    assert summary.set_index("statistic")["value"].isna()[["krippendorff_alpha", "fleiss_kappa"]].all()


@pytest.mark.quick
def test_one_answer_per_task_leaves_alpha_undefined_and_kappa_not_applicable():
    s = stats(crowd([("a", "P", "x"), ("b", "Q", "y"), ("c", "P", "y")]))
    assert np.isnan(s.alpha) and s.alpha_note.startswith("undefined: no task has two answers")
    assert np.isnan(s.fleiss_kappa) and s.fleiss_note.startswith("does not apply: every task has one answer")
    assert s.answer_counts == {1: 3}


@pytest.mark.quick
def test_fleiss_kappa_says_how_many_tasks_have_how_many_answers_where_it_does_not_apply():
    rows = [("a", w, "x") for w in "PQR"] + [("b", w, "y") for w in "PQ"] + [("c", w, "x") for w in "PQ"]
    s = stats(crowd(rows))
    assert np.isnan(s.fleiss_kappa)
    assert s.fleiss_note.startswith("does not apply: the tasks have different numbers of answers "
                                    "(2 tasks with 2 answers, 1 with 3)")
    assert s.answer_counts == {2: 2, 3: 1}
    assert not np.isnan(s.alpha)  # alpha takes tasks of any number of answers


@pytest.mark.quick
def test_fleiss_kappa_of_the_textbook_example():
    """Fleiss (1971) as Wikipedia works it: 10 subjects, 14 raters, 5 categories; P̄ = .378, P_e = .213, κ = .210."""
    table = np.array([[0, 0, 0, 0, 14], [0, 2, 6, 4, 2], [0, 0, 3, 5, 6], [0, 3, 9, 2, 0], [2, 2, 8, 1, 1],
                      [7, 7, 0, 0, 0], [3, 2, 6, 3, 0], [2, 5, 3, 2, 2], [6, 5, 2, 1, 0], [0, 2, 2, 3, 7]])
    s = stats(from_count_table(table))
    assert s.fleiss_kappa == pytest.approx(0.20993070, abs=1e-8)
    assert s.fleiss_kappa == pytest.approx(slow_fleiss(table), abs=1e-14)
    assert s.fleiss_note == "10 tasks of 14 answers each"


@pytest.mark.quick
@pytest.mark.parametrize("seed", range(4))
def test_fleiss_kappa_and_alpha_of_random_tables_against_the_formulas(seed):
    import krippendorff

    rng = np.random.default_rng(seed)
    m, k = int(rng.integers(2, 8)), int(rng.integers(2, 6))
    table = rng.multinomial(m, rng.dirichlet(np.ones(k)), size=40)
    data = from_count_table(table)
    s = stats(data)
    assert s.fleiss_kappa == pytest.approx(slow_fleiss(table), abs=1e-12)
    assert s.alpha == pytest.approx(krippendorff.alpha(value_counts=table.astype(float),
                                                       level_of_measurement="nominal"), abs=1e-12)


@pytest.mark.quick
def test_the_figures_from_counts_alone():
    """The two formulas take counts: one task of answers (x, x, y) and one of (y, y): n = 5, A = 2/2 + 2/1 = 3,
    n_x = 2, n_y = 3 -> alpha = 1 − 4·2/(25 − 13) = 1/3."""
    alpha, note = krippendorff_alpha(np.array([3, 2]), np.array([5, 4]), np.array([2, 3]))
    assert alpha == pytest.approx(1 / 3, abs=1e-15)
    assert note == "nominal, over the 5 answers of the 2 tasks with two or more"
    assert krippendorff_alpha(np.array([2]), np.array([2]), np.array([1, 1]))[1] == \
        "nominal, over the 2 answers of the 1 task with two or more"
    kappa, note, counts = fleiss_kappa(np.array([3, 2, 0]), np.array([5, 4, 0]), np.array([2, 3]))
    assert np.isnan(kappa) and counts == {2: 1, 3: 1}


@pytest.mark.quick
def test_tables_hold_every_task_and_worker_in_the_data_order():
    rows = [("a", "P", "x"), ("a", "Q", "x"), ("a", "R", "y"), ("b", "P", "y"), ("b", "R", "y")]
    data = crowd(rows)
    s = stats(data)
    tasks, workers = s.tasks(), s.workers()
    assert list(tasks.columns) == list(TASK_COLUMNS) and list(workers.columns) == list(WORKER_COLUMNS)
    assert tasks["task"].tolist() == ["a", "b"] and tasks["label"].tolist() == ["x", "y"]
    assert tasks["answers"].tolist() == [3, 2]
    assert tasks["agreement"].tolist() == pytest.approx([2 / 3, 1.0])
    h = -(2 / 3 * np.log(2 / 3) + 1 / 3 * np.log(1 / 3))
    assert tasks["uncertainty"].tolist() == pytest.approx([h, 0.0])
    assert workers["worker"].tolist() == ["P", "Q", "R"] and workers["answers"].tolist() == [2, 1, 2]
    # P agreed twice; Q once; R once of two (a: y against x)
    assert workers["agreement"].tolist() == pytest.approx([1.0, 1.0, 0.5])
    assert s.agreement == pytest.approx(4 / 5)
    # task a: P (1) and Q (1) say x, R (.5) says y -> y impossible, x certain; b: P says y -> x impossible
    assert tasks["consistency"].tolist() == pytest.approx([1.0, 1.0])


@pytest.mark.quick
def test_a_task_without_answers_has_missing_figures():
    data = crowd([("a", "P", "x"), ("a", "Q", "y")]).with_tasks(["b"])
    tasks = stats(data).tasks()
    assert tasks["answers"].tolist() == [2, 0]
    assert tasks.loc[1, ["agreement", "uncertainty", "consistency"]].isna().all()


@pytest.mark.quick
def test_library_entry_checks():
    df = pd.DataFrame({"task": [1, 1, 2, 2], "worker": ["a", "b", "a", "b"], "label": ["x", "x", "y", "x"]})
    s = stats(df)  # a DataFrame, as aggregate takes it
    assert s.method == "mv" and s.alpha == pytest.approx(stats(load_annotations(df)).alpha)
    data = load_annotations(df)
    result = aggregate(data, "ds")
    assert stats(data, result).method == "ds"
    with pytest.raises(UsageError, match="seed"):
        stats(data, result, seed=3)
    with pytest.raises(ResourceError, match="statistics"):
        stats(data, max_memory=10)


@pytest.mark.parametrize("name", quick_case(CATEGORICAL, "rte"))
def test_alpha_matches_the_krippendorff_package_on_every_real_dataset(datasets_dir, name):
    """Its reliability data (workers × tasks, NaN where a worker did not answer), duplicates dropped keeping the
    last as the accuracy protocol reads the sets: one value per worker and task, as the package takes them."""
    import krippendorff

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        data = load_annotations(datasets_dir / name / "labels.csv", duplicates="last")
    reliability = np.full((data.n_workers, data.n_tasks), np.nan)
    reliability[data.worker, data.task] = data.label
    want = krippendorff.alpha(reliability_data=reliability, level_of_measurement="nominal")
    got = stats(data)
    assert got.alpha == pytest.approx(want, abs=1e-9)


def test_against_crowd_kit_metrics_on_a_real_dataset(datasets_dir):
    """bluebird: crowd-kit's uncertainty (per task and per worker), accuracy_on_aggregates (per worker and overall),
    consistency (per task and mean) with its MajorityVote, and alpha_krippendorff (nltk's), all as crowd-kit gives
    them (its majority vote labels bluebird as mv does: no ties)."""
    from crowdkit.aggregation import MajorityVote
    from crowdkit.metrics.data import alpha_krippendorff, consistency, uncertainty
    from crowdkit.metrics.workers import accuracy_on_aggregates

    data = load_annotations(datasets_dir / "bluebird" / "labels.csv", duplicates="last")
    df = pd.DataFrame({"task": data.task_names[data.task], "worker": data.worker_names[data.worker],
                       "label": np.asarray(data.classes, dtype=object)[data.label]})
    ours = stats(data)
    mv = MajorityVote().fit(df).labels_
    assert (mv.reindex(data.task_names).to_numpy() == ours.task_labels).all()
    tasks = pd.Index(data.task_names)
    workers = pd.Index(data.worker_names)
    np.testing.assert_allclose(ours.task_uncertainty,
                               uncertainty(df, aggregate=False).reindex(tasks).to_numpy(), atol=1e-12)
    assert ours.uncertainty == pytest.approx(uncertainty(df), abs=1e-12)
    np.testing.assert_allclose(ours.worker_uncertainty,
                               uncertainty(df, compute_by="worker", aggregate=False).reindex(workers).to_numpy(),
                               atol=1e-12)
    np.testing.assert_allclose(ours.worker_agreement,
                               accuracy_on_aggregates(df, by="worker").reindex(workers).to_numpy(), atol=1e-12)
    assert ours.agreement == pytest.approx(accuracy_on_aggregates(df), abs=1e-12)
    np.testing.assert_allclose(ours.task_consistency, consistency(df, by_task=True).reindex(tasks).to_numpy(),
                               atol=1e-12)
    assert ours.consistency == pytest.approx(consistency(df), abs=1e-12)
    assert ours.alpha == pytest.approx(alpha_krippendorff(df), abs=1e-12)


@pytest.mark.quick
def test_a_result_of_other_answers_or_not_a_result_is_refused_before_the_kernels():
    """A label beyond the data's classes reached the kernels unchecked (a crash for a far one); another
    data set's fit, or something else in ``result``'s place, is a UsageError, not an IndexError/AttributeError."""
    data = crowd([(1, "a", "x"), (1, "b", "x"), (2, "a", "y"), (2, "b", "x"), (3, "a", "y"), (3, "b", "y")])
    six = crowd([(1, "a", "p"), (1, "b", "q"), (2, "a", "r"), (2, "b", "s"), (3, "a", "t"), (3, "b", "u")])
    with pytest.raises(UsageError, match=r"other answers: 3 tasks × 6 classes; the data has 3 × 2"):
        stats(data, aggregate(six, "mv"))
    renamed = crowd([(7, "a", "x"), (8, "b", "x"), (9, "a", "y"), (9, "b", "y")])
    with pytest.raises(UsageError, match="other ones or in another order"):
        stats(data, aggregate(renamed, "mv"))
    reordered = crowd([(1, "a", "x"), (1, "b", "x"), (2, "a", "y"), (2, "b", "x"), (3, "a", "y"), (3, "b", "y")],
                      classes=["y", "x"])  # code 0 is another class: its labels would be read as the other
    with pytest.raises(UsageError, match="other ones or in another order"):
        stats(data, aggregate(reordered, "mv"))
    for wrong in ("mv", 5, data):
        with pytest.raises(UsageError, match="AggregationResult"):
            stats(data, wrong)
    result = aggregate(data, "mv")
    result.labels = np.array([10**11, 0, 1])
    with pytest.raises(DataError, match="result.labels code 100000000000 at position 0"):
        stats(data, result)
    # the same answers read again are the same tasks: accepted
    again = crowd([(1, "a", "x"), (1, "b", "x"), (2, "a", "y"), (2, "b", "x"), (3, "a", "y"), (3, "b", "y")])
    assert stats(again, aggregate(data, "ds")).alpha == pytest.approx(stats(data).alpha)


@pytest.mark.quick
def test_a_method_beside_a_result_of_another_method_is_refused_not_ignored():
    """``stats(data, ds_result, method="mv")`` reported ds's figures as asked for mv's, silently."""
    data = crowd([(1, "a", "x"), (1, "b", "x"), (2, "a", "y"), (2, "b", "x"), (3, "a", "y"), (3, "b", "y")])
    result = aggregate(data, "ds")
    with pytest.raises(UsageError, match="method='mv' names a fit, but the result given is a fit of 'ds'"):
        stats(data, result, method="mv")
    assert stats(data, result, method="ds").method == "ds"  # its own method: agreed
    assert stats(data).method == "mv" and stats(data, method="wawa").method == "wawa"


@pytest.mark.quick
def test_the_public_formulas_refuse_counts_that_are_not_one_crowds():
    """krippendorff_alpha and fleiss_kappa took anything: lists failed in numpy (TypeError), arrays of unequal
    length raised IndexError, and impossible counts gave an alpha of 48; co_occurrence of a non-set an
    AttributeError."""
    from crowdagg.reports.agreement import co_occurrence

    assert krippendorff_alpha([2, 2], [4, 2], [3, 1])[0] == pytest.approx(0.0)  # lists are arrays
    assert fleiss_kappa([2, 2], [4, 2], [3, 1])[0] == pytest.approx(-1 / 3)
    for formula, last in ((krippendorff_alpha, [3, 1]), (fleiss_kappa, [3, 1])):
        with pytest.raises(DataError, match="size has 2 tasks, squares 1"):
            formula(np.array([2, 2]), np.array([4]), np.array(last))
        with pytest.raises(DataError, match="size holds counts, got -2 at position 1"):
            formula(np.array([2, -2]), np.array([4, 2]), np.array(last))
        with pytest.raises(DataError, match="task 0 has 2 answers but squares 100"):
            formula(np.array([2, 2]), np.array([100, 2]), np.array(last))
        with pytest.raises(DataError, match="integers"):
            formula(np.array(["2", "2"]), np.array([4, 2]), np.array(last))
    with pytest.raises(UsageError, match="co_occurrence takes an AnnotationSet"):
        co_occurrence("labels.csv")


@pytest.mark.quick
def test_without_a_single_answer_every_missing_value_says_why():
    """The means (uncertainty, agreement, consistency) were missing beside their definitions alone."""
    empty = AnnotationSet.from_codes(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64), n_tasks=3,
                                     n_workers=2, n_classes=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        table = stats(empty).summary().set_index("statistic")
    assert table["value"].isna().all()
    assert table.loc["krippendorff_alpha", "note"].startswith("undefined: no task has two answers")
    assert table.loc["fleiss_kappa", "note"] == "does not apply: no task has an answer"
    for name in ("uncertainty", "agreement", "consistency"):
        assert table.loc[name, "note"] == "undefined: no answers"
    one = stats(crowd([(1, "a", "x"), (1, "b", "y")])).summary().set_index("statistic")
    assert one.loc["uncertainty", "note"] == "mean entropy of a task's answers, nats"  # defined: its definition
