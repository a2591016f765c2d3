"""twothird: peerannot's two-thirds agreement, tasks below the rule flagged in a column."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from crowdagg import load_annotations
from crowdagg.cli import app
from crowdagg.data.annotations import AnnotationSet
from crowdagg.errors import CrowdaggWarning, UsageError
from crowdagg.methods.api import aggregate
from tests.realdata import fit_real
from tests.tiers import quick_case


def crowd(*tasks: str) -> AnnotationSet:
    """One task per string, one answer (class a, b, c) per character, each from its own worker (w0, w1, ...)."""
    rows = [(f"t{n}", f"w{i}", c) for n, answers in enumerate(tasks) for i, c in enumerate(answers)]
    task, worker, label = zip(*rows)
    return AnnotationSet.from_names(list(task), list(worker), list(label), classes=["a", "b", "c"])


def fit(data: AnnotationSet, **params):
    """The fit of a crowd with flagged tasks (it warns)."""
    with pytest.warns(CrowdaggWarning, match="twothird: .* not accepted"):
        return aggregate(data, "twothird", **params)


def fit_silently(data: AnnotationSet, **params):
    """The fit of a crowd where every task is accepted: no warning at all."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return aggregate(data, "twothird", **params)


@pytest.mark.quick
def test_exactly_two_thirds_is_accepted_and_below_is_not():
    #          2 of 3  1 of 3  4 of 6    3 of 5 (.6)  3 of 4  2 of 4 (.5)
    res = fit(crowd("aab", "abc", "aaaabb", "bbbaa", "ccca", "aabc"))
    assert res.flags["accepted"].tolist() == [True, False, True, False, True, False]
    assert res.label_names().tolist()[:5] == ["a", res.label_names()[1], "a", "b", "c"]
    np.testing.assert_allclose(res.confidence, [2 / 3, 1 / 3, 4 / 6, 3 / 5, 3 / 4, 1 / 2])


@pytest.mark.quick
def test_fewer_answers_than_the_minimum_are_never_accepted():
    # one answer is a unanimous 1 of 1, but below peerannot's minimum of 2
    assert fit(crowd("a", "aa", "ab")).flags["accepted"].tolist() == [False, True, False]
    assert fit(crowd("a", "aa", "ab"), min_answers=1).flags["accepted"].tolist() == [True, True, False]
    assert fit(crowd("aaa", "aaaa"), min_answers=4).flags["accepted"].tolist() == [False, True]


@pytest.mark.quick
def test_a_tie_is_never_an_agreement():
    # at the lowest fraction, 1/2, two classes holding half each reach it: a tie, not accepted; 2 of 4 alone is
    res = fit(crowd("ab", "aabb", "aabc", "abc"), fraction=0.5)
    assert res.flags["accepted"].tolist() == [False, False, True, False]
    # the tied tasks still have a label, one of the tied classes, drawn by the seed
    assert res.label_names()[0] in ("a", "b") and res.label_names()[1] in ("a", "b")


@pytest.mark.quick
def test_the_fraction_is_a_parameter():
    data = crowd("aaab", "aab", "aaaaab")  # 3/4, 2/3, 5/6
    assert fit(data, fraction=0.75).flags["accepted"].tolist() == [True, False, True]
    assert fit(data, fraction=0.9).flags["accepted"].tolist() == [False, False, False]
    assert fit_silently(data, fraction=0.5).flags["accepted"].all()
    assert fit_silently(data).flags["accepted"].all()


@pytest.mark.quick
@pytest.mark.parametrize(("params", "message"), [({"fraction": 0.4}, "fraction"), ({"fraction": 1.5}, "fraction"),
                                                 ({"min_answers": 0}, "min_answers")])
def test_bad_settings_are_refused(params, message):
    with pytest.raises(UsageError, match=message):
        aggregate(crowd("aa"), "twothird", **params)


@pytest.mark.quick
def test_every_task_appears_once_with_the_flag_column_and_the_warning_counts_them():
    data = crowd("aab", "abc", "a", "bb")
    with pytest.warns(CrowdaggWarning, match=r"twothird: 2 of 4 tasks not accepted \(1 with fewer than 2 answers, 1 "
                                             r"where no class has 0.6667 of the answers\)"):
        res = aggregate(data, "twothird")
    table = res.table()
    assert list(table) == ["task", "label", "confidence", "accepted"]
    assert table["task"].tolist() == ["t0", "t1", "t2", "t3"]
    assert table["accepted"].tolist() == [True, False, False, True]
    assert list(res.table(proba=True))[:6] == ["task", "label", "confidence", "accepted", "n_answers", "p_a"]
    frame = res.to_frame()
    assert frame["accepted"].dtype == bool and frame.shape == (4, 4)
    # no flagged task: no warning
    assert fit_silently(crowd("aa", "bbb")).flags["accepted"].all()


@pytest.mark.quick
def test_workers_agreement_counts_accepted_tasks_only():
    #        t0: a a b (accepted a)   t1: a b c (not)   t2: c c (accepted c)
    data = crowd("aab", "abc", "cc")
    res = fit(data)
    agreement = dict(zip(data.worker_names.tolist(), res.worker_params["accepted_agreement"].tolist()))
    # w0: a on t0 (right), c on t2 (right); w1: a on t0 (right), c on t2 (right); w2: b on t0 (wrong) -- t1 left out
    assert agreement == {"w0": 1.0, "w1": 1.0, "w2": 0.0}
    assert res.worker_columns() == ("worker", "accepted_agreement", "n_answers")
    # a worker with answers on flagged tasks only is at chance, 1/K
    only = AnnotationSet.from_names(["t0", "t0", "t0", "t1", "t1", "t1"], ["u", "v", "w", "u", "v", "x"],
                                    ["a", "a", "a", "a", "b", "c"], classes=["a", "b", "c"])
    res = fit(only)
    assert dict(zip(only.worker_names.tolist(), res.worker_params["accepted_agreement"].tolist()))["x"] == pytest.approx(1 / 3)


def test_the_cli_writes_the_flag_and_says_how_many_on_stderr(tmp_path):
    path = tmp_path / "answers.csv"
    path.write_text("task,worker,label\nt1,w1,a\nt1,w2,a\nt1,w3,b\nt2,w1,a\nt2,w2,b\nt3,w1,b\n")
    out = CliRunner().invoke(app, ["aggregate", str(path), "-m", "twothird"])
    assert out.exit_code == 0, out.stderr
    assert out.stdout.splitlines() == ["task,label,confidence,accepted", "t1,a,0.6666666666666666,true",
                                       f"t2,{out.stdout.splitlines()[2].split(',')[1]},0.5,false", "t3,b,1.0,false"]
    assert "twothird: 2 of 3 tasks not accepted" in out.stderr
    # an earlier run's output is recognised as such (overwritten, never read as answers)
    target = tmp_path / "labels.csv"
    for _ in range(2):
        again = CliRunner().invoke(app, ["aggregate", str(path), "-m", "twothird", "-o", str(target)])
        assert again.exit_code == 0, again.stderr
    assert target.read_text().splitlines()[0] == "task,label,confidence,accepted"


# ----------------------------------------------------------------------------- the real datasets
def peerannot_rule(path) -> pd.Series:
    """peerannot's rule written over the answers with pandas: a task accepted when it has 2 answers or more and its
    most frequent label holds 2/3 of them or more (duplicates dropped keeping the last, as the fit's data)."""
    answers = pd.read_csv(path, dtype=str, keep_default_na=False).drop_duplicates(["task", "worker"], keep="last")
    counts = answers.groupby(["task", "label"]).size().unstack(fill_value=0)
    n = counts.sum(axis=1)
    return (n >= 2) & (counts.max(axis=1) / n >= 2 / 3)


@pytest.mark.parametrize("name", quick_case(["cf", "rte", "dog", "music"], "cf", "twothird"))
def test_flags_follow_peerannots_rule_and_the_accepted_tasks_are_more_accurate(datasets_dir, name):
    path = datasets_dir / name / "labels.csv"
    acc, res = fit_real(datasets_dir, name, "twothird")
    data = load_annotations(path, duplicates="last")
    ours = pd.Series(res.flags["accepted"], index=data.task_names)
    expected = peerannot_rule(path).reindex(ours.index)
    assert (ours == expected).all()
    truth = pd.read_csv(datasets_dir / name / "truth.csv", dtype=str, keep_default_na=False).set_index("task")["label"]
    labels = pd.Series(res.label_names(), index=data.task_names)
    scored = labels.index.intersection(truth.index)
    right = labels[scored] == truth[scored]
    kept = ours[scored]
    assert 0 < kept.sum() < len(scored)
    assert right[kept].mean() > right[~kept].mean() and right[kept].mean() > acc


def test_dask_gives_the_local_flags_and_writes_them_in_each_part(datasets_dir, tmp_path):
    distributed = pytest.importorskip("distributed")
    from crowdagg.io.dask_read import read_distributed
    from crowdagg.io.parts import write_directory
    from crowdagg.methods.registry import get

    path = str(datasets_dir / "dog" / "labels.csv")
    with pytest.warns(CrowdaggWarning):
        local = aggregate(load_annotations(path), "twothird")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=":0") as cluster, distributed.Client(cluster) as client:
        data, engine = read_distributed([path], client, partitions=2)
        try:
            with pytest.warns(CrowdaggWarning):
                remote = get("twothird").load()().fit(data, engine=engine)
            write_directory(remote, tmp_path / "out", fmt="csv", engine=engine)
        finally:
            engine.close()
    np.testing.assert_array_equal(remote.flags["accepted"], local.flags["accepted"])
    np.testing.assert_array_equal(remote.labels, local.labels)
    np.testing.assert_array_equal(remote.worker_params["accepted_agreement"], local.worker_params["accepted_agreement"])
    parts = sorted((tmp_path / "out").glob("part-*"))
    assert len(parts) == 2
    written = pd.concat([pd.read_csv(p, dtype={"task": str}) for p in parts])
    assert list(written.columns) == ["task", "label", "confidence", "accepted"]
    assert written["accepted"].tolist() == local.flags["accepted"].tolist()


@pytest.mark.quick
def test_the_workers_report_keeps_the_accepted_agreement_beside_its_own_agreement():
    """Found hostile: the worker parameter was named ``agreement``, the name of a column of ``crowdagg workers``
    (every answer against the label), so the report dropped twothird's own value and showed another under its name:
    rte's first worker .875 there, .970 in ``aggregate --workers``.  Now ``accepted_agreement``: both, each its own."""
    from crowdagg.reports.workers import worker_report

    #        t0: a a b (accepted a)   t1: a b c (not: plurality drawn)   t2: c c (accepted c)
    data = crowd("aab", "abc", "cc")
    res = fit(data)
    report = worker_report(data, res, chance=False).set_index("worker")
    assert report["accepted_agreement"].to_dict() == {"w0": 1.0, "w1": 1.0, "w2": 0.0}
    share = (res.labels[data.task] == data.label)  # the report's own: every answer against the label
    expected = {w: float(share[data.worker == i].mean()) for i, w in enumerate(data.worker_names.tolist())}
    assert report["agreement"].to_dict() == pytest.approx(expected)
