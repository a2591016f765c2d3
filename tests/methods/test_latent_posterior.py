"""crowdagg.methods.blocks.latent_posterior: the latent E-step on an engine's blocks -- the trainers' Bayes rule in
the square case, the same bytes for any thread count and grid, its shapes and memory checked up front."""

from __future__ import annotations

import numpy as np
import pytest

from crowdagg.core import threads
from crowdagg.data.annotations import AnnotationSet
from crowdagg.engine import LocalEngine
from crowdagg.errors import DataError, ResourceError
from crowdagg.methods.blocks import PROB_FLOOR, latent_posterior
from crowdagg.simulate import simulate


@pytest.fixture(scope="module")
def data() -> AnnotationSet:
    """About 30k answers (5 per task, 3 classes, 60 workers), and a task without answers."""
    base = simulate(6_000, 60, 3, 5, seed=2).to_annotations()
    task = np.repeat(np.arange(base.n_tasks), np.diff(base.task_ptr))
    names = [*np.asarray(base.task_names, dtype=object), "no-answers"]
    return AnnotationSet.from_codes(task, base.worker, base.label, n_tasks=len(names), n_workers=base.n_workers,
                                    n_classes=3, task_names=names)


def bayes_rule(data: AnnotationSet, proba: np.ndarray, confusion: np.ndarray) -> np.ndarray:
    """Trainer._posterior's Bayes rule (crowdagg/learning/trainer.py before the services): ``q_n ∝ f(x_n)
    Π_m A_m[:, answer]``, A ``[worker, true, observed]``, both floored at PROB_FLOOR -- in numpy."""
    log_a = np.log(np.maximum(confusion, PROB_FLOOR))
    score = np.log(np.maximum(proba, PROB_FLOOR))
    task = np.repeat(np.arange(data.n_tasks), np.diff(data.task_ptr))
    np.add.at(score, task, log_a[data.worker, :, data.label])
    score -= score.max(axis=1, keepdims=True)
    post = np.exp(score)
    return post / post.sum(axis=1, keepdims=True)


def classifier_and_confusions(rng, data):
    proba = rng.dirichlet(np.ones(3), size=data.n_tasks)
    proba[:5, 1] = 0.0  # a classifier sure a class is out: the floor keeps the answers' say
    confusion = rng.dirichlet(np.ones(3) * 0.5, size=(data.n_workers, 3))  # [worker, true, observed]
    return proba / proba.sum(axis=1, keepdims=True), confusion


def test_the_square_case_is_the_trainers_bayes_rule(rng, data):
    proba, confusion = classifier_and_confusions(rng, data)
    log_table = np.log(np.maximum(confusion, PROB_FLOOR)).transpose(0, 2, 1)  # [worker, observed, true]
    out = latent_posterior(data, log_table, np.log(np.maximum(proba, PROB_FLOOR)))
    np.testing.assert_allclose(out.classes, bayes_rule(data, proba, confusion), rtol=1e-10, atol=1e-13)
    assert out.classes is out.latent and out.draws is None and out.counts is None
    np.testing.assert_allclose(out.latent[-1], proba[-1], rtol=1e-12)  # no answers: the classifier's prediction
    # the log-likelihood is the answers' evidence under the classifier: Σ_n log Σ_k f_k Π A[k, answer]
    task = np.repeat(np.arange(data.n_tasks), np.diff(data.task_ptr))
    lik = np.maximum(proba, PROB_FLOOR)
    per = np.ones((data.n_tasks, 3))
    np.multiply.at(per, task, np.maximum(confusion, PROB_FLOOR)[data.worker, :, data.label])
    assert out.loglik == pytest.approx(float(np.log((lik * per).sum(axis=1)).sum()), rel=1e-10)


def test_subtypes_sum_to_their_class(rng, data):
    """Two subtypes per class, a table that cannot tell a class's subtypes apart and a prior split evenly: the
    class posterior is the square case's."""
    proba, confusion = classifier_and_confusions(rng, data)
    log_square = np.log(np.maximum(confusion, PROB_FLOOR)).transpose(0, 2, 1)
    latent_class = np.array([0, 0, 1, 1, 2, 2])
    square = latent_posterior(data, log_square, np.log(proba + PROB_FLOOR))
    split = latent_posterior(data, log_square[:, :, latent_class], np.log((proba + PROB_FLOOR) / 2)[:, latent_class],
                             latent_class, draw_seed=3, counts="posterior")
    np.testing.assert_allclose(split.classes, square.classes, rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(split.latent[:, ::2], split.latent[:, 1::2], rtol=1e-12)
    assert split.loglik == pytest.approx(square.loglik, rel=1e-12)
    assert split.counts.shape == (data.n_workers, 3, 6) and split.latent_tot.sum() == pytest.approx(data.n_tasks)
    assert latent_class[split.draws].shape == (data.n_tasks,)


def test_same_bytes_for_threads_1_and_2_and_any_block_size(rng, data, monkeypatch):
    """Per-task rows and draws: the same bytes on any grid and thread count; the reduced sums (log-likelihood,
    counts): the same bytes for any thread count on one grid, to rounding across grids."""
    proba, confusion = classifier_and_confusions(rng, data)
    args = (np.log(np.maximum(confusion, PROB_FLOOR)).transpose(0, 2, 1)[:, :, [0, 1, 2, 2]],
            np.log(np.maximum(proba, PROB_FLOOR))[:, [0, 1, 2, 2]] - np.log([1, 1, 2, 2]), np.array([0, 1, 2, 2]))
    kw = {"draw_seed": 9, "draw_round": 2, "counts": "posterior"}
    monkeypatch.setattr("crowdagg.engine.grid.MIN_BLOCK_ANSWERS", 1_000)
    monkeypatch.setattr("crowdagg.engine.grid.ACCUMULATOR_FACTOR", 1)
    runs = {}
    for per_block in (None, 1_000, 7_000):
        for n in (1, 2):
            with threads.use_threads(n):
                engine = LocalEngine(data, per_block)
                runs[per_block, n] = latent_posterior(data, *args, engine=engine, **kw)
    assert LocalEngine(data, 1_000).n_blocks >= 20
    first = runs[None, 1]
    for (per_block, n), other in runs.items():
        for name in ("latent", "classes", "draws"):
            assert np.array_equal(getattr(other, name), getattr(first, name)), (per_block, n, name)
        same_grid = runs[per_block, 1]
        assert other.loglik == same_grid.loglik and np.array_equal(other.counts, same_grid.counts)
        assert other.loglik == pytest.approx(first.loglik, rel=1e-12)
        np.testing.assert_allclose(other.counts, first.counts, rtol=1e-12)


def test_shapes_are_checked_against_the_data_and_memory_up_front(data):
    k, w = data.n_classes, data.n_workers
    with pytest.raises(DataError, match=r"log_prior has shape \(5, 3\), the data's tasks"):
        latent_posterior(data, np.zeros((w, k, 3)), np.zeros((5, 3)))
    with pytest.raises(DataError, match="log_table has 4 latent states for the data's 3 classes: give latent_class"):
        latent_posterior(data, np.zeros((w, k, 4)), np.zeros((data.n_tasks, 4)))
    with pytest.raises(DataError, match=r"log_table has shape \(2, 3, 3\)"):
        latent_posterior(data, np.zeros((2, k, 3)), np.zeros((data.n_tasks, 3)))
    with pytest.raises(ResourceError, match=r"this needs ~.* \(6,001 tasks × 3 latent states, 60 workers\)"):
        latent_posterior(data, np.zeros((w, k, 3)), np.zeros((data.n_tasks, 3)), max_memory="1K")


def test_ds_on_music_is_the_latent_e_step_of_its_parameters(datasets_dir):
    """A fitted Dawid--Skene model's posteriors are the latent E-step of its prior (every task's) and confusions
    -- the same bits, on a real crowd -- and the E-step's evidence is its final log-likelihood."""
    from crowdagg import aggregate, load_annotations
    from crowdagg.methods.em.ds import model_parameters

    data = load_annotations(datasets_dir / "music" / "labels.csv")
    fit = aggregate(data, "ds")
    prior, conf_ot = model_parameters(fit)
    out = latent_posterior(data, np.log(conf_ot), np.tile(np.log(prior), (data.n_tasks, 1)))
    assert np.array_equal(out.latent, fit.posteriors)
    assert out.loglik == pytest.approx(float(fit.objective[-1]), rel=1e-12)


def test_an_engine_over_other_answers_is_refused(data):
    """A training split's E-step on the whole set's engine read the held-out answers (the engine's blocks hold
    the answers, ``data`` only the rows): refused, by this helper and by the vote helpers alike."""
    from crowdagg.errors import UsageError
    from crowdagg.methods.blocks import soft_majority_vote

    keep = np.arange(data.n_answers) % 5 != 0
    task = np.repeat(np.arange(data.n_tasks), np.diff(data.task_ptr))
    train = AnnotationSet.from_codes(task[keep], data.worker[keep], data.label[keep], n_tasks=data.n_tasks,
                                     n_workers=data.n_workers, n_classes=3, task_names=list(data.task_names))
    whole = LocalEngine(data)
    args = (np.zeros((data.n_workers, 3, 3)), np.zeros((data.n_tasks, 3)))
    for call in (lambda: latent_posterior(train, *args, engine=whole), lambda: soft_majority_vote(train, whole)):
        with pytest.raises(UsageError, match=r"engine runs over other data \(6,001 tasks, 60 workers, 3 classes, "
                                             r"30,000 answers\) than the data's \(6,001 tasks, .* 24,000 answers\)"):
            call()
    np.testing.assert_array_equal(latent_posterior(train, *args, engine=LocalEngine(train)).latent, 1 / 3)


def test_the_wrong_kind_of_data_engine_or_counts_is_a_usage_error():
    """A DataFrame as the data and an int as the engine raised AttributeError, counts=[...] TypeError."""
    import pandas as pd

    from crowdagg.errors import UsageError

    small = simulate(20, 4, 3, 2, seed=1).to_annotations()
    args = (np.zeros((small.n_workers, 3, 3)), np.zeros((small.n_tasks, 3)))
    with pytest.raises(UsageError, match="data must be an AnnotationSet .*got DataFrame"):
        latent_posterior(pd.DataFrame({"task": ["a"], "worker": ["w"], "label": ["x"]}), *args)
    for engine in (5, "dask"):
        with pytest.raises(UsageError, match="engine must be 'local' or an engine object"):
            latent_posterior(small, *args, engine=engine)
    assert latent_posterior(small, *args, engine="local").latent.shape == (20, 3)
    with pytest.raises(UsageError, match=r"counts must be None, 'posterior' or 'draws', got \['posterior'\]"):
        latent_posterior(small, *args, counts=["posterior"])


def test_the_tables_converted_copy_is_counted_up_front():
    """A broadcast [worker, observed, latent] table is copied to a contiguous one: 10 tasks, 20 workers × 3 × 200,000
    latent states is 96 MB of table beside 48 MB of rows; it ran, 140 MB allocated, under a 100 MB limit."""
    small = simulate(10, 20, 3, 2, seed=1).to_annotations()
    n_latent = 200_000
    table = np.broadcast_to(np.zeros(1), (small.n_workers, 3, n_latent))
    prior = np.broadcast_to(np.zeros(1), (small.n_tasks, n_latent))
    with pytest.raises(ResourceError, match=r"10 tasks × 200,000 latent states, 20 workers"):
        latent_posterior(small, table, prior, np.zeros(n_latent, dtype=int), max_memory="100MB")


def test_gold_a_shared_prior_and_the_entropy_term_through_latent_posterior(rng, data):
    """The new optional arguments: ``clamp`` holds a task in its class's subtypes (all its class mass at the gold
    class, its evidence theirs), a 1-D log prior is every task's (the tiled prior's bits), ``entropy_floor`` adds
    Σ f log f; without them the result is what it was (entropy None)."""
    k, w = data.n_classes, data.n_workers
    log_table = np.log(rng.dirichlet(np.ones(k), size=(w, 6)).transpose(0, 2, 1).copy())
    log_prior = np.log(rng.dirichlet(np.ones(6)))
    latent_class = np.array([0, 0, 1, 1, 2, 2])
    clamp = np.where(rng.random(data.n_tasks) < 0.1, rng.integers(0, k, data.n_tasks), -1)
    free = latent_posterior(data, log_table, log_prior, latent_class)
    tiled = latent_posterior(data, log_table, np.tile(log_prior, (data.n_tasks, 1)), latent_class)
    assert np.array_equal(free.latent, tiled.latent) and free.loglik == tiled.loglik and free.entropy is None
    held = latent_posterior(data, log_table, log_prior, latent_class, clamp=clamp, entropy_floor=1e-12,
                            counts="posterior")
    gold = clamp >= 0
    np.testing.assert_array_equal(held.classes[gold].argmax(axis=1), clamp[gold])
    np.testing.assert_allclose(held.classes[gold].max(axis=1), 1.0, rtol=1e-15)
    assert np.array_equal(held.latent[~gold], free.latent[~gold])
    within = free.latent[gold] * (latent_class[None, :] == clamp[gold, None])  # the free posterior, renormalised
    np.testing.assert_allclose(held.latent[gold], within / within.sum(axis=1, keepdims=True), rtol=1e-12)
    assert held.loglik < free.loglik  # gold removes evidence from the other classes' states
    f = np.maximum(held.latent, 1e-12)
    assert held.entropy == pytest.approx(float((f * np.log(f)).sum()), rel=1e-12)
    with pytest.raises(DataError, match=r"clamp has shape \(3,\), the data has 6,001 tasks"):
        latent_posterior(data, log_table, log_prior, latent_class, clamp=np.zeros(3, np.int64))
