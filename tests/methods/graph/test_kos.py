"""KOS (``kos``): accuracy beside crowd-kit's KOS on the deepBP graph, adversaries and spammers read from the
reliabilities, honest posteriors (one-hot, 0.5/0.5 on a tie), gold, seeds, and the refusals (K != 2, no shared
tasks) in the library and the CLI."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from typer.testing import CliRunner

from crowdagg.cli import app
from crowdagg.data.annotations import AnnotationSet
from crowdagg.errors import ConvergenceWarning, CrowdaggWarning, DataError
from crowdagg.methods.api import aggregate
from crowdagg.methods.graph.kos import KOS
from crowdagg.simulate import simulate


def _fit(data, **params):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return KOS(**params).fit(data)


def test_accuracy_beside_crowdkit_on_the_deepbp_graph():
    """The (3, 4)-regular deepBP crowd, five seeds: crowd-kit's start is random (numpy's global state), so the
    accuracies are compared over seeds, not bytes.  Both are the same algorithm (ours normalised, theirs not);
    measured: ours .551 .588 .525 .472 .494, crowd-kit's .547 .557 .521 .474 .494."""
    import pandas as pd

    crowdkit = pytest.importorskip("crowdkit.aggregation")
    ours, theirs = [], []
    for seed in range(5):
        crowd = simulate(scenario="deepbp", seed=seed)
        data = crowd.to_annotations()
        ours.append(np.mean(_fit(data, seed=seed).labels == crowd.truth))
        frame = pd.DataFrame({"task": data.task, "worker": data.worker, "label": data.label})
        np.random.seed(seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            labels = crowdkit.KOS().fit_predict(frame).sort_index().to_numpy()
        theirs.append(np.mean(labels == crowd.truth))
    assert abs(np.mean(ours) - np.mean(theirs)) < 0.03, (ours, theirs)
    assert np.max(np.abs(np.array(ours) - np.array(theirs))) < 0.06, (ours, theirs)


def test_above_its_threshold_kos_matches_crowdkit_and_beats_chance():
    """On deepBP's graph with the sparse worker prior Beta(0.5, 0.25) (hammers and adversaries, above Karger, Oh &
    Shah's threshold) message passing carries the labels: ours and crowd-kit's KOS reach the same accuracy on
    every seed (measured .909 .891 .905 .907 .895 for both), far from chance -- the deepBP crowd above is at
    chance for both, so it alone would not tell a broken kernel from a working one."""
    import pandas as pd

    crowdkit = pytest.importorskip("crowdkit.aggregation")
    for seed in range(3):
        crowd = simulate(scenario="deepbp", worker_prior=(0.5, 0.25), seed=seed)
        data = crowd.to_annotations()
        ours = np.mean(_fit(data, seed=seed).labels == crowd.truth)
        frame = pd.DataFrame({"task": data.task, "worker": data.worker, "label": data.label})
        np.random.seed(seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            theirs = np.mean(crowdkit.KOS().fit_predict(frame).sort_index().to_numpy() == crowd.truth)
        assert ours > 0.85 and abs(ours - theirs) <= 0.01, (seed, ours, theirs)


def test_reliability_reads_adversaries_and_spammers():
    """A denser crowd (8 answers a task): KOS converges in a few rounds, beats majority vote, and each adversary's
    reliability is negative, each spammer's near 0, each honest worker's positive (measured, seeds 0-1: adversaries
    -.28 .. -.09, spammers -.02 .. .02, honest .09 .. .30)."""
    for seed in range(2):
        crowd = simulate(n_tasks=2000, n_workers=30, n_classes=2, per_task=8, adversaries=0.2, spammers=0.1,
                         seed=seed)
        data = crowd.to_annotations()
        r = KOS(seed=seed).fit(data)
        assert r.converged and r.n_iter < 30
        kinds = np.asarray(crowd.worker_kind)
        rel = r.worker_params["reliability"]
        assert np.abs(rel).max() <= 1.0
        assert (rel[kinds == "adversary"] < -0.05).all()
        assert (np.abs(rel[kinds == "spammer"]) < 0.05).all()
        assert (rel[kinds == "ds"] > 0.05).all()
        assert np.mean(r.labels == crowd.truth) > np.mean(aggregate(data, "mv").labels == crowd.truth) + 0.1


def test_posteriors_are_decisions_and_silent_tasks_get_their_vote():
    """Tasks t3, t4 and t6 are answered only by workers with no other task: their messages are 0, their beliefs
    exactly 0 -- they get their vote shares (the decision of all-trusting messages), with one warning; t6's vote
    ties (0.5/0.5), its label drawn by the seed."""
    data = AnnotationSet.from_names(
        ["t1", "t1", "t1", "t2", "t2", "t2", "t5", "t5", "t5", "t3", "t4", "t6", "t6"],
        ["a", "b", "c", "a", "b", "c", "a", "b", "c", "d", "e", "f", "g"],
        ["x", "x", "y", "y", "y", "y", "x", "x", "x", "y", "x", "x", "y"])
    with pytest.warns(CrowdaggWarning, match="kos: 3 task.*belief of exactly 0.*majority vote"):
        r = KOS().fit(data)
    row = {t: list(data.tasks).index(t) for t in ("t1", "t2", "t3", "t4", "t5", "t6")}
    assert np.array_equal(r.posteriors[[row["t3"], row["t4"], row["t6"]]], [[0.0, 1.0], [1.0, 0.0], [0.5, 0.5]])
    decided = [row[t] for t in ("t1", "t2", "t5")]
    assert np.array_equal(np.sort(r.posteriors[decided], axis=1), np.tile([0.0, 1.0], (3, 1)))
    assert np.array_equal(r.labels[decided], r.posteriors[decided].argmax(axis=1))
    assert np.array_equal(r.labels[[row["t2"], row["t5"]]], [1, 0])  # unanimous tasks
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CrowdaggWarning)
        draws = {int(KOS(seed=s).fit(data).labels[row["t6"]]) for s in range(12)}
    assert draws == {0, 1}  # the seed decides the tie
    assert r.worker_params["reliability"][list(data.workers).index("d")] == 0.0
    with pytest.raises(AttributeError, match="no worker confusion"):
        r.confusion  # noqa: B018


def test_same_seed_same_bytes_and_gold_clamps():
    crowd = simulate(n_tasks=500, n_workers=40, n_classes=2, per_task=5, adversaries=0.3, seed=9)
    data = crowd.to_annotations()
    a, b = _fit(data, seed=4), _fit(data, seed=4)
    assert np.array_equal(a.posteriors, b.posteriors)
    assert np.array_equal(a.worker_params["reliability"], b.worker_params["reliability"])
    gold_rows = np.arange(0, 500, 5)
    gold = {data.tasks[t]: data.classes[crowd.truth[t]] for t in gold_rows}
    g = _fit(data, seed=4, gold=gold)
    assert np.array_equal(g.labels[gold_rows], crowd.truth[gold_rows])
    assert (g.posteriors[gold_rows].max(axis=1) == 1.0).all()
    free = np.setdiff1d(np.arange(500), gold_rows)
    assert np.mean(g.labels[free] == crowd.truth[free]) >= np.mean(a.labels[free] == crowd.truth[free])


def test_three_classes_are_refused_and_one_class_labels_everything():
    data = simulate(n_tasks=30, n_workers=5, n_classes=3, per_task=3, seed=1).to_annotations()
    with pytest.raises(DataError, match=r"kos is binary .* these answers have 3 classes; use bp, mf or ds"):
        KOS().fit(data)
    one = AnnotationSet.from_names(["a", "b", "b"], ["u", "u", "v"], ["x", "x", "x"])
    r = KOS().fit(one)
    assert r.label_names().tolist() == ["x", "x"] and np.array_equal(r.posteriors, np.ones((2, 1)))


def test_a_crowd_without_shared_tasks_is_refused():
    one = AnnotationSet.from_names(["a", "b", "c"], ["w", "w", "w"], ["x", "y", "x"])
    with pytest.raises(DataError, match="kos needs workers who share tasks: 1 worker"):
        KOS().fit(one)
    apart = AnnotationSet.from_names(["a", "b", "c"], ["u", "v", "w"], ["x", "y", "x"])
    with pytest.raises(DataError, match="0 task.*two answers or more"):
        KOS().fit(apart)


def test_cli_refuses_three_classes_with_one_error_line(tmp_path):
    path = tmp_path / "labels.csv"
    path.write_text("task,worker,label\n" + "".join(f"t{i},w{j},{'abc'[(i + j) % 3]}\n" for i in range(6)
                                                   for j in range(3)))
    out = CliRunner().invoke(app, ["aggregate", str(path), "-m", "kos"])
    assert out.exit_code != 0
    errors = [line for line in out.stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and "kos is binary" in errors[0] and "3 classes" in errors[0], out.stderr
    assert "Traceback" not in out.stderr
