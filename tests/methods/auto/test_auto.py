"""auto: the folds, the scoring model, the stacking weights, its choices on simulated crowds, and that it never
reads the truth."""

from __future__ import annotations

import numpy as np
import pytest
from typer.testing import CliRunner

from crowdagg.cli import app
from crowdagg.core import threads
from crowdagg.data.annotations import AnnotationSet
from crowdagg.errors import CrowdaggNote, CrowdaggWarning, DataError, UsageError
from crowdagg.methods.api import aggregate
from crowdagg.methods.auto.auto import (
    answer_probability,
    held_out_folds,
    scoring_confusion,
    stacking_weights,
    tempered,
)
from crowdagg.simulate import simulate

QUICK = {"candidates": ("mv", "ds"), "folds": 2}


def crowd(seed=0, **kw):
    return simulate(**{"n_tasks": 200, "n_workers": 15, "n_classes": 3, "per_task": 4, "seed": seed, **kw})


# --------------------------------------------------------------------------- folds
@pytest.mark.quick
def test_folds_are_keyed_on_names_share_the_answers_and_keep_every_task_answered(rng):
    data = crowd().to_annotations()
    fold = held_out_folds(data, 5, 0.1, seed=3)
    assert set(np.unique(fold)) <= {-1, 0, 1, 2, 3, 4}
    # each fold holds about a tenth of the answers (800 answers: 80 ± a few binomial sds)
    counts = np.bincount(fold[fold >= 0], minlength=5)
    assert np.all(np.abs(counts - 0.1 * data.n_answers) < 4 * np.sqrt(0.1 * data.n_answers)), counts
    for f in range(5):  # no fold empties a task
        kept = data.without_answers(fold == f)
        assert np.all(kept.answers_per_task > 0)
        assert kept.n_answers == data.n_answers - counts[f]
    # the same answers in another row order: the same fold per (task, worker)
    perm = rng.permutation(data.n_answers)
    names = lambda d, i: (d.task_names[d.task[i]], d.worker_names[d.worker[i]])  # noqa: E731
    shuffled = AnnotationSet.from_names([data.task_names[t] for t in data.task[perm]],
                                        [data.worker_names[w] for w in data.worker[perm]],
                                        [data.classes[y] for y in data.label[perm]])
    other = held_out_folds(shuffled, 5, 0.1, seed=3)
    a = {names(data, i): fold[i] for i in range(data.n_answers)}
    b = {names(shuffled, i): other[i] for i in range(shuffled.n_answers)}
    assert a == b
    assert not np.array_equal(held_out_folds(data, 5, 0.1, seed=4), fold)  # the seed draws other folds


@pytest.mark.quick
def test_folds_beyond_every_answer_are_refused():
    data = crowd().to_annotations()
    with pytest.raises(UsageError, match="folds × held_out must be at most 1"):
        held_out_folds(data, 5, 0.3, 0)
    with pytest.raises(UsageError, match="folds × held_out must be at most 1"):
        aggregate(data, "auto", folds=4, held_out=0.3)


@pytest.mark.quick
def test_without_answers_keeps_the_vocabularies_and_refuses_a_wrong_mask():
    data = AnnotationSet.from_names(["a", "a", "b", "b"], ["u", "v", "u", "v"], ["x", "y", "x", "x"])
    sub = data.without_answers(np.array([False, True, False, True]))
    assert sub.n_tasks == 2 and sub.n_workers == 2 and sub.classes == data.classes
    assert sub.worker.tolist() == [0, 0] and sub.task_ptr.tolist() == [0, 1, 2]
    assert data.without_answers(np.zeros(4, bool)) is data
    with pytest.raises(UsageError, match="4 booleans, one per answer"):
        data.without_answers(np.zeros(3, bool))


# --------------------------------------------------------------------------- the scoring model
@pytest.mark.quick
def test_scoring_confusion_by_hand():
    # two tasks, two workers; worker 0 answers both, worker 1 only task 0; worker 2 answers nothing
    data = AnnotationSet.from_codes([0, 0, 1], [0, 1, 0], [0, 1, 1], n_workers=3, n_classes=2)
    post = np.array([[0.75, 0.25], [0.5, 0.5]])
    conf = scoring_confusion(data, post, (4.0, 1.0))
    # worker 0: true 0 saw 0 with 0.75 (task 0) and 1 with 0.5 (task 1): row 0 = (4 + .75, 1 + .5) / 6.25
    np.testing.assert_allclose(conf[0, 0], [4.75 / 6.25, 1.5 / 6.25])
    np.testing.assert_allclose(conf[0, 1], [(1 + 0.25) / 5.75, (4 + 0.5) / 5.75])
    np.testing.assert_allclose(conf[1, 0], [4 / 5.75, 1.75 / 5.75])
    np.testing.assert_allclose(conf[1, 1], [1 / 5.25, 4.25 / 5.25])
    np.testing.assert_allclose(conf[2], 0.5)  # no answers: chance
    p = answer_probability(post, conf, np.array([1]), np.array([1]), np.array([0]))
    np.testing.assert_allclose(p, [0.5 * 4 / 5.75 + 0.5 * 1 / 5.25])


@pytest.mark.quick
def test_stacking_weights_find_the_mixture_that_best_predicts():
    rng = np.random.default_rng(0)
    p = rng.uniform(0.05, 1.0, size=(400, 2))
    w = stacking_weights(p).weights
    grid = np.linspace(0, 1, 2001)
    loglik = [np.log(p @ np.array([g, 1 - g])).sum() for g in grid]
    assert w[0] == pytest.approx(grid[int(np.argmax(loglik))], abs=2e-3)
    # a candidate that is better on every answer takes (almost) all the weight
    better = np.column_stack([p[:, 0], 0.5 * p[:, 0]])
    assert stacking_weights(better).weights[0] > 0.99
    assert stacking_weights(p[:, :1]).weights.tolist() == [1.0]


@pytest.mark.quick
def test_tempered_rows():
    post = np.array([[0.8, 0.2], [0.5, 0.5], [1.0, 0.0]])
    np.testing.assert_allclose(tempered(post, 1.0), post)
    np.testing.assert_allclose(tempered(post, 2.0)[0], [0.64 / 0.68, 0.04 / 0.68])
    np.testing.assert_allclose(tempered(post, 0.5)[1:], post[1:])


# --------------------------------------------------------------------------- the method
@pytest.mark.quick
def test_auto_says_each_candidates_score_and_what_it_did():
    data = crowd().to_annotations()
    with pytest.warns(CrowdaggNote) as said:
        res = aggregate(data, "auto", **QUICK)
    notes = [str(w.message) for w in said if w.category is CrowdaggNote]
    assert any(n.startswith("auto: mv: held-out log-likelihood") for n in notes)
    assert any(n.startswith("auto: ds: held-out log-likelihood") for n in notes)
    assert any(n.startswith(("auto: chose", "auto: pooled")) for n in notes)
    w = res.model_params["weights"]
    assert res.model_params["candidates"] == ("mv", "ds") and w.sum() == pytest.approx(1.0)
    np.testing.assert_allclose(res.posteriors, w[0] * aggregate(data, "mv").posteriors
                               + w[1] * aggregate(data, "ds").posteriors, atol=1e-12)
    assert res.confusion.shape == (data.n_workers, 3, 3)


@pytest.mark.quick
def test_the_same_bits_on_any_thread_count():
    data = crowd(1).to_annotations()
    with threads.use_threads(1):
        one = aggregate(data, "auto", **QUICK)
    with threads.use_threads(3):
        three = aggregate(data, "auto", **QUICK)
    assert one.posteriors.tobytes() == three.posteriors.tobytes()
    assert one.confusion.tobytes() == three.confusion.tobytes()


@pytest.mark.quick
def test_candidates_must_be_categorical_aggregators_other_than_auto():
    data = crowd().to_annotations()
    with pytest.raises(UsageError, match="candidates lists 'auto', itself"):
        aggregate(data, "auto", candidates=("ds", "auto"))
    with pytest.raises(UsageError, match="candidates lists 'ds' twice"):
        aggregate(data, "auto", candidates="ds,ds")


@pytest.mark.quick
def test_gold_reaches_the_candidates_and_clamps_the_result():
    sim = crowd(2)
    data = sim.to_annotations()
    wrong = (sim.truth[:5] + 1) % 3  # gold that contradicts the crowd on five tasks
    gold = {data.task_names[i]: data.classes[wrong[i]] for i in range(5)}
    res = aggregate(data, "auto", gold=gold, **QUICK)
    assert res.labels[:5].tolist() == wrong.tolist()
    np.testing.assert_allclose(res.posteriors[np.arange(5), wrong], 1.0)


@pytest.mark.quick
@pytest.mark.parametrize(("model", "kw", "right", "wrong"), [
    # one accuracy per worker, few answers each: a full confusion per worker overfits
    ("onecoin", {"n_classes": 5, "n_tasks": 300, "n_workers": 60, "per_task": 3, "skill": (0.5, 0.8)}, "onecoin", "ds"),
    # class-dependent confusions (diagonals 0.3-0.95), many answers each: one accuracy cannot say them
    ("ds", {"n_classes": 3, "n_tasks": 600, "n_workers": 8, "per_task": 5, "skill": (0.3, 0.95)}, "ds", "onecoin"),
])
def test_auto_picks_the_model_that_drew_the_crowd(model, kw, right, wrong):
    for seed in range(3):
        data = simulate(model=model, seed=seed, **kw).to_annotations()
        res = aggregate(data, "auto", candidates=(right, wrong), pool="choose", folds=3)
        weights = dict(zip(res.model_params["candidates"], res.model_params["weights"]))
        assert weights[right] == 1.0, (seed, res.model_params["scores"])


# --------------------------------------------------------------------------- never the truth
def answers_csv(sim) -> str:
    t, w, c = sim.task_names(), sim.worker_names(), sim.class_names()
    return "task,worker,label\n" + "".join(f"{t[i]},{w[j]},{c[y]}\n" for i, j, y in zip(sim.task, sim.worker, sim.label))


def test_the_truth_beside_the_answers_changes_nothing(tmp_path):
    sim = crowd(4)
    outs = []
    for i, truth in enumerate((sim.truth, (sim.truth + 1) % 3)):
        folder = tmp_path / f"copy{i}"
        folder.mkdir()
        (folder / "labels.csv").write_text(answers_csv(sim))
        (folder / "truth.csv").write_text("task,label\n" + "".join(
            f"{sim.task_names()[t]},{sim.class_names()[y]}\n" for t, y in enumerate(truth)))
        r = CliRunner().invoke(app, ["aggregate", str(folder / "labels.csv"), "-m", "auto", "-p", "candidates=mv,ds",
                                     "-p", "folds=2", "--proba"])
        assert r.exit_code == 0, r.stderr
        outs.append((r.stdout, r.stderr))
    assert outs[0] == outs[1]
    assert "Note: auto: pooled" in outs[0][1] or "Note: auto: chose" in outs[0][1]


def test_quiet_silences_the_notes(tmp_path):
    sim = crowd(5)
    path = tmp_path / "labels.csv"
    path.write_text(answers_csv(sim))
    r = CliRunner().invoke(app, ["aggregate", str(path), "-m", "auto", "-p", "candidates=mv,ds", "-p", "folds=2", "-q"])
    assert r.exit_code == 0 and "Note:" not in r.stderr


@pytest.mark.quick
def test_a_candidate_that_refuses_the_answers_is_left_out_with_a_warning():
    data = crowd(6).to_annotations()  # three classes: kos takes two
    with pytest.warns(CrowdaggWarning, match="auto: kos is left out: .*3 classes"):
        res = aggregate(data, "auto", candidates=("kos", "mv", "ds"), folds=2)
    weights = dict(zip(res.model_params["candidates"], res.model_params["weights"]))
    assert weights["kos"] == 0.0 and weights["mv"] + weights["ds"] == pytest.approx(1.0)
    assert res.model_params["scores"][0] == -np.inf
    with pytest.raises(DataError, match="3 classes"):  # nothing left: kos's own error
        aggregate(data, "auto", candidates=("kos",), folds=2)


@pytest.mark.quick
def test_one_answer_a_task_hides_nothing_and_takes_the_first_candidate():
    data = AnnotationSet.from_names([f"t{i}" for i in range(30)], [f"w{i % 4}" for i in range(30)],
                                    ["a" if i % 3 else "b" for i in range(30)])
    with pytest.warns(CrowdaggWarning, match="no answer could be hidden .* ds, is the result"):
        res = aggregate(data, "auto", candidates=("ds", "mv"), folds=2)
    np.testing.assert_allclose(res.posteriors, aggregate(data, "ds").posteriors)


@pytest.mark.quick
@pytest.mark.parametrize("n_threads", [1, 3])
def test_run_jobs_keeps_the_order_and_says_whose_warning_each_was(n_threads):
    import warnings

    from crowdagg.methods.auto.auto import run_jobs

    def job(i):
        def run():
            warnings.warn(CrowdaggWarning(f"from {i}"), stacklevel=2)
            return i * i
        return run

    results, notes = run_jobs([job(i) for i in range(7)], [f"j{i}" for i in range(7)], n_threads)
    assert results == [i * i for i in range(7)]
    assert {k: [str(m) for m in v] for k, v in notes.by_job.items()} == {f"j{i}": [f"from {i}"] for i in range(7)}
    with pytest.raises(ValueError, match="boom"):  # a job's error is the run's
        run_jobs([job(0), lambda: (_ for _ in ()).throw(ValueError("boom"))], ["a", "b"], n_threads)
