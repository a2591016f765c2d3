"""The vote family and GLAD on the engine's block protocol: block kernels against slow twins, and the same bits
for any thread count and any partitioning of the grid."""

from __future__ import annotations

import numpy as np
import pytest

from crowdagg.core import threads
from crowdagg.data.annotations import AnnotationSet
from crowdagg.engine import LocalEngine, Part, join, tree
from crowdagg.engine.grid import task_grid
from crowdagg.methods.blocks import (
    SHARES,
    SOFTMAX,
    Posterior,
    Vote,
    agreement_block,
    finish_votes,
    hard_majority_vote,
    posterior_block,
    revote_block,
    soft_majority_vote,
)
from crowdagg.methods.registry import get


class PartEngine:
    """A test engine: the grid cut into ``n_parts`` contiguous Parts (their own arrays, local task offsets, their
    slice of the names), each reduced to its tree cover (:func:`tree.reduce_range`), the root by
    :func:`tree.combine` -- what a distributed engine does, in one process."""

    name = "parts"

    def __init__(self, data: AnnotationSet, n_parts: int) -> None:
        self.data = data
        bounds = task_grid(data.task_ptr, data.n_workers, data.n_classes)
        self.n_blocks = n = len(bounds) - 1
        names = np.asarray(data.task_names, dtype=object)
        self.parts = []
        for lo, hi in tree.ranges(n, n_parts):
            t0, t1 = int(bounds[lo]), int(bounds[hi])
            a0, a1 = int(data.task_ptr[t0]), int(data.task_ptr[t1])
            self.parts.append(Part(lo, n, t0, bounds[lo:hi + 1] - t0, data.task_ptr[t0:t1 + 1] - a0,
                                   data.worker[a0:a1].copy(), data.label[a0:a1].copy(), data.n_workers,
                                   data.n_classes, names[t0:t1].copy()))
        self.part = self.parts[0]

    def map_reduce(self, fn, params=None, *, keep=False):
        nodes, outs = {}, []
        for part in self.parts:
            def block(b, part=part):
                sums, out = fn(part, b - part.first_block, params, keep)
                outs.append(out)
                return sums

            nodes.update(tree.reduce_range(part.first_block, part.first_block + part.n_blocks, self.n_blocks, block))
        return tree.combine(nodes, self.n_blocks), (outs if keep else None)

    def gather(self, outs):
        return join(outs)


def crowd(n_tasks: int = 60_000, seed: int = 3) -> AnnotationSet:
    """About 300k answers (5 per task, 3 classes, 400 workers) with ties, repeated answers and a task without any."""
    from crowdagg.simulate import simulate

    data = simulate(n_tasks, 400, 3, 5, seed=seed).to_annotations()
    task = np.repeat(np.arange(data.n_tasks), np.diff(data.task_ptr))
    worker, label = data.worker.copy(), data.label.copy()
    worker[1], label[1] = worker[0], label[0]  # a repeated identical answer
    names = [*np.asarray(data.task_names, dtype=object), "no-answers"]
    return AnnotationSet.from_codes(task, worker, label, n_tasks=len(names), n_workers=data.n_workers,
                                    task_names=names, worker_names=list(data.worker_names), classes=data.classes)


@pytest.fixture(scope="module")
def big() -> AnnotationSet:
    return crowd()


def fit(data, method, engine=None, **params):
    return get(method).load()(**params).fit(data, engine=engine)


def outputs(res):
    keys = sorted(res.worker_params)
    return [res.posteriors, res.labels, res.prior, *(res.worker_params[k] for k in keys),
            *(res.task_params[k] for k in sorted(res.task_params)), np.asarray(res.objective), res.n_iter]


METHODS = [("mv", {}), ("wmv", {}), ("wawa", {}), ("glad", {"max_iter": 2, "tol": 0.0})]


@pytest.mark.parametrize(("method", "params"), METHODS, ids=[m for m, _ in METHODS])
def test_same_bits_for_threads_1_2_3_and_partitions_1_2_7(big, method, params, monkeypatch):
    monkeypatch.setattr("crowdagg.engine.grid.MIN_BLOCK_ANSWERS", 20_000)  # 15 blocks: uneven partitions
    monkeypatch.setattr("crowdagg.engine.grid.ACCUMULATOR_FACTOR", 1)  # blocks of max(min, W·K²)
    assert big.n_answers >= 300_000
    results = []
    for n in (1, 2, 3):
        with threads.use_threads(n):
            results.append(outputs(fit(big, method, seed=4, **params)))
    for p in (1, 2, 7):
        engine = PartEngine(big, p)
        assert engine.n_blocks == 15 and len(engine.parts) == p
        results.append(outputs(fit(big, method, engine, seed=4, **params)))
    for other in results[1:]:
        for a, b in zip(results[0], other, strict=True):
            assert np.array_equal(a, b)


@pytest.mark.parametrize(("method", "params"), METHODS, ids=[m for m, _ in METHODS])
def test_many_blocks_agree_with_one_block(big, method, params, monkeypatch):
    """Many blocks change only the order of the reductions' sums: labels equal, the rest to rounding."""
    one = fit(big, method, seed=4, **params)
    monkeypatch.setattr("crowdagg.engine.grid.MIN_BLOCK_ANSWERS", 20_000)
    monkeypatch.setattr("crowdagg.engine.grid.ACCUMULATOR_FACTOR", 1)  # blocks of max(min, W·K²)
    many = fit(big, method, seed=4, **params)
    assert LocalEngine(big).n_blocks == 15
    np.testing.assert_array_equal(one.labels, many.labels)
    np.testing.assert_allclose(one.posteriors, many.posteriors, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(one.prior, many.prior, rtol=1e-12)


# ----------------------------------------------------------------------------- slow twins
def slow_votes(data, weight=None):
    """Votes per task and class, one answer at a time."""
    out = np.zeros((data.n_tasks, data.n_classes))
    task = np.repeat(np.arange(data.n_tasks), np.diff(data.task_ptr))
    for t, w, y in zip(task, data.worker, data.label):
        out[t, y] += 1.0 if weight is None else weight[w]
    return out


def slow_agreement(data, labels, once=False):
    right, total = np.zeros(data.n_workers), np.zeros(data.n_workers)
    seen = set()
    task = np.repeat(np.arange(data.n_tasks), np.diff(data.task_ptr))
    for t, w, y in zip(task, data.worker, data.label):
        if once:
            if (t, w, y) in seen:
                continue
            seen.add((t, w, y))
        total[w] += 1
        right[w] += y == labels[t]
    return right, total


@pytest.fixture(scope="module")
def small() -> AnnotationSet:
    return crowd(3_000, seed=8)


def test_block_votes_and_agreement_match_slow_twins(small, monkeypatch):
    from crowdagg.methods.blocks import agreement_with_block

    monkeypatch.setattr("crowdagg.engine.grid.MIN_BLOCK_ANSWERS", 1_000)  # 400 workers × 3²: 3,600 a block
    monkeypatch.setattr("crowdagg.engine.grid.ACCUMULATOR_FACTOR", 1)  # blocks of max(min, W·K²)
    engine = LocalEngine(small)
    assert engine.n_blocks == 4
    weight = np.random.default_rng(0).normal(size=small.n_workers)
    for w in (None, weight):
        _, outs = engine.map_reduce(posterior_block, Posterior(Vote(w), rows="counts", labels=False), keep=True)
        assert np.array_equal(engine.gather(outs)[0], slow_votes(small, w))  # each task's answers in order
    labels = np.random.default_rng(1).integers(0, 3, small.n_tasks)
    for once in (False, True):
        right, total = engine.map_reduce(agreement_with_block, (labels, once))[0]
        want = slow_agreement(small, labels, once)
        assert np.array_equal(right, want[0]) and np.array_equal(total, want[1])
    assert slow_agreement(small, labels, True)[1].sum() == small.n_answers - 1  # the repeated answer, once


def test_mv_wawa_wmv_match_whole_array_numpy_twins(small):
    """The vote family against its whole-array definition (the code before the engine): the same bits."""
    from crowdagg.methods.blocks import TieBreaker, argmax_random_ties, fill_empty_rows, normalize_rows, softmax_rows

    seed = 5
    ties = TieBreaker(small.tasks, seed)
    empty = small.answers_per_task == 0
    assert empty.sum() == 1
    # mv
    post = normalize_rows(slow_votes(small))
    prior = fill_empty_rows(post, empty)
    res = fit(small, "mv", seed=seed)
    assert np.array_equal(res.posteriors, post) and np.array_equal(res.prior, prior)
    assert np.array_equal(res.labels, argmax_random_ties(post, ties))
    # wawa
    mv_labels = argmax_random_ties(normalize_rows(slow_votes(small)), ties)
    right, total = slow_agreement(small, mv_labels)
    skills = np.where(total > 0, right / np.maximum(total, 1), 1 / 3)
    post = normalize_rows(slow_votes(small, skills))
    prior = fill_empty_rows(post, post.sum(axis=1) == 0)
    res = fit(small, "wawa", seed=seed)
    assert np.array_equal(res.posteriors, post) and np.array_equal(res.prior, prior)
    assert np.array_equal(res.labels, argmax_random_ties(post, ties, atol=1e-12))
    # wmv, three rounds by hand
    from crowdagg.methods.votes.wmv import log_odds_weights

    labels, n_iter, done = mv_labels, 0, False
    while not done and n_iter < 50:
        n_iter += 1
        right, total = slow_agreement(small, labels)
        accuracy = np.where(total > 0, (right + 1) / (total + 2), 1 / 3)
        scores = slow_votes(small, log_odds_weights(accuracy, 3))
        new = argmax_random_ties(scores, ties, atol=1e-12)
        done = np.array_equal(new, labels)
        labels = new
    assert done and n_iter > 1
    post = softmax_rows(scores)
    prior = fill_empty_rows(post, empty)
    labels[empty] = argmax_random_ties(post[empty], TieBreaker(small.tasks[np.flatnonzero(empty)], seed))
    res = fit(small, "wmv", seed=seed)
    assert res.n_iter == n_iter
    assert np.array_equal(res.posteriors, post) and np.array_equal(res.prior, prior)
    assert np.array_equal(res.labels, labels) and np.array_equal(res.worker_params["accuracy"], accuracy)


def test_soft_and_hard_majority_vote_on_any_engine(small, monkeypatch):
    want_soft, want_hard = soft_majority_vote(small), hard_majority_vote(small, 2)
    monkeypatch.setattr("crowdagg.engine.grid.MIN_BLOCK_ANSWERS", 1_000)
    monkeypatch.setattr("crowdagg.engine.grid.ACCUMULATOR_FACTOR", 1)  # blocks of max(min, W·K²)
    for engine in (LocalEngine(small), PartEngine(small, 4)):
        assert np.array_equal(soft_majority_vote(small, engine), want_soft)  # per task: no sum across blocks
        assert np.array_equal(hard_majority_vote(small, 2, engine), want_hard)


def test_empty_tasks_get_the_prior_and_a_label_drawn_on_it():
    """A prior with a tie: each empty task's label is its own seeded draw between the tied classes."""
    names = [f"t{i}" for i in range(40)]
    data = AnnotationSet.from_codes([0, 0, 1, 1], [0, 1, 0, 1], [0, 1, 1, 0], n_tasks=40, task_names=names,
                                    classes=["a", "b"])
    engine = LocalEngine(data)
    post, labels, prior = finish_votes(engine, Posterior(Vote(seed=1)), 2)
    np.testing.assert_array_equal(prior, [0.5, 0.5])
    np.testing.assert_array_equal(post, 0.5)
    assert set(labels[2:].tolist()) == {0, 1}  # drawn per task, not one class for all
    from crowdagg.methods.blocks import TieBreaker, argmax_random_ties

    np.testing.assert_array_equal(labels, argmax_random_ties(post, TieBreaker(data.tasks, 1)))


def test_revote_counts_changes_and_agreement(small):
    engine = LocalEngine(small)
    first = Vote(seed=0)
    weight = np.random.default_rng(2).normal(size=small.n_workers)
    second = Vote(weight, 0, 1e-12, on_shares=False)
    (agree, changed), _ = engine.map_reduce(revote_block, (first, second))
    (_, _), outs = engine.map_reduce(agreement_block, first, keep=True)
    before = engine.gather(outs)
    (_, _), outs = engine.map_reduce(agreement_block, second, keep=True)
    after = engine.gather(outs)
    assert changed == np.count_nonzero(before != after) > 0
    assert np.array_equal(agree, slow_agreement(small, after)[0])


def test_block_functions_are_picklable_by_reference():
    import pickle

    from crowdagg.methods import blocks

    for fn in (blocks.posterior_block, blocks.agreement_block, blocks.revote_block, blocks.agreement_with_block):
        assert pickle.loads(pickle.dumps(fn)) is fn
    p = Posterior(Vote(np.ones(3), 1, 1e-12, False), SOFTMAX)
    assert pickle.loads(pickle.dumps(p)).rows == SOFTMAX and SHARES == "shares"


def test_glad_is_declared_local_only():
    """GLAD's L-BFGS-B makes ~25 map-reduce rounds per iteration with log β on the client: local engine only,
    said on the class (what a distributed engine reads) and in its declaration (``crowdagg methods``)."""
    from crowdagg.methods.glad.glad import Glad

    assert Glad.engines == ("local",) and get("glad").engines == ("local",)


VOTE_BLOCK_CASES = {
    # a label beyond K: the vote kernel wrote past its table (glibc: "double free or corruption")
    "label code": ("posterior_block(bad_label, 0, Posterior(), True)", "label code 7 at position 1"),
    "short weight": ("posterior_block(good, 0, Posterior(Vote(weight=np.ones(1))), True)",
                     "the vote weights have shape (1,), the data has 2 workers"),
    "agreement weight": ("agreement_block(good, 0, Vote(weight=np.ones(5)), True)", "the vote weights have shape (5,)"),
    "revote weight": ("revote_block(good, 0, (Vote(), Vote(weight=np.ones(1))), True)", "the vote weights"),
    "block": ("posterior_block(good, 5, Posterior(), True)", "block 5 is not one of the partition's 1 blocks"),
    "negative block": ("agreement_block(good, -1, Vote(), True)", "block -1 is not one of"),
    "short labels": ("agreement_with_block(good, 0, (np.zeros(0, np.int64), True), True)",
                     "0 labels for the data's 1 tasks"),
    "text weight": ("Vote(weight=np.array(['a', 'b']))", "weight must hold numbers"),
}


def test_block_functions_refuse_bad_parts_and_parameters_never_a_crash():
    from tests.crashes import assert_block_refusals

    assert_block_refusals("crowdagg.methods.blocks", VOTE_BLOCK_CASES, task_names=True)


@pytest.mark.quick
def test_selective_revote_refuses_arrays_that_do_not_fit_the_tasks():
    """zbs' block function is public: a select/labels/margins shorter than the tasks was read past its end by the
    kernel (the interpreter crashed), labels outside -1 .. K-1 or a non-boolean select were taken as they came.
    Each is a DataError naming the array; the right arrays, given as lists, vote every task."""
    from crowdagg.errors import DataError
    from crowdagg.methods.blocks import Revote, selective_revote_block

    data = crowd(500, seed=2)
    n, k = data.n_tasks, data.n_classes
    engine = LocalEngine(data)
    vote = Vote(np.ones(data.n_workers), 0, atol=1e-12, on_shares=False)
    free = np.full(n, -1)

    def run(select, labels=free, margins=None):
        margins = np.full(len(labels), -np.inf) if margins is None else margins
        return engine.map_reduce(selective_revote_block, Revote(vote, select, labels, margins), keep=True)

    with pytest.raises(DataError, match=f"3 entries, the data has {n:,} tasks"):
        run(np.ones(3, bool), np.full(3, -1))
    with pytest.raises(DataError, match="one each per task"):
        run(np.ones(n, bool), np.full(n - 1, -1))
    with pytest.raises(DataError, match=f"labels holds {k}, the data has {k} classes"):
        run(np.ones(n, bool), np.full(n, k))
    with pytest.raises(DataError, match="labels holds -2"):
        run(np.ones(n, bool), np.full(n, -2))
    with pytest.raises(DataError, match="1-D boolean"):
        run(np.full(n, 0.5))
    with pytest.raises(DataError, match="1-D boolean"):
        run(None)
    (right, changed), outs = run([True] * n, [-1] * n, [0.0] * n)
    from crowdagg.methods.blocks import TieBreaker, argmax_random_ties

    labels, _ = engine.gather(outs)
    votes = np.zeros((n, k))
    np.add.at(votes, (data.task, data.label), 1.0)
    np.testing.assert_array_equal(labels, argmax_random_ties(votes, TieBreaker(data.tasks, 0), atol=1e-12))
    assert changed == n  # every task had no label yet
