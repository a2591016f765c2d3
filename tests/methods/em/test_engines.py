"""ds and onecoin on the block protocol: the same bytes for any thread count and any partitioning of the grid."""

from __future__ import annotations

import numpy as np
import pytest

from crowdagg.core.threads import use_threads
from crowdagg.engine import LocalEngine
from crowdagg.methods.api import aggregate
from crowdagg.methods.blocks import posterior_confusion, soft_majority_vote
from crowdagg.methods.registry import get

from ...engine.split import SplitEngine, simulated_crowd


@pytest.fixture(scope="module")
def crowd():
    """500k answers, K=3, 120 workers: seven blocks of the grid (so seven partitions hold one block each)."""
    data, truth = simulated_crowd(500_000, n_classes=3, n_workers=120, seed=3)
    assert LocalEngine(data).n_blocks == 7
    return data, truth


def fit(data, method, engine=None, **params):
    cls = get(method).load()
    return cls(**params).fit(data, engine=engine)


def same(a, b) -> None:
    assert np.array_equal(a.posteriors, b.posteriors)
    assert np.array_equal(a.labels, b.labels)
    assert np.array_equal(a.prior, b.prior)
    assert np.array_equal(a.confusion, b.confusion)
    assert np.array_equal(a.objective, b.objective)
    for key in a.counts:
        assert np.array_equal(a.counts[key], b.counts[key]), key


@pytest.mark.parametrize("method", ["ds", "onecoin"])
def test_threads_and_partitions_give_the_same_bytes(crowd, method):
    data, truth = crowd
    gold = {data.tasks[t]: data.classes[truth[t]] for t in range(0, data.n_tasks, 97)}  # clamps in every block
    params = {"max_iter": 4, "tol": 0.0, "gold": gold}
    with use_threads(1):
        base = fit(data, method, **params)
    assert base.n_iter == 4 and (base.labels == truth).mean() > 0.8
    for n in (2, 3):
        with use_threads(n):
            same(base, fit(data, method, **params))
    for n_parts in (1, 2, 7):
        engine = SplitEngine(data, n_parts)
        assert len(engine.parts) == n_parts
        same(base, fit(data, method, engine=engine, **params))


def test_given_starts_and_restarts_are_partition_invariant(crowd):
    """A start from given posteriors and the restarts' blends: global arrays sliced by each partition's tasks."""
    data, _ = crowd
    given = np.random.default_rng(0).dirichlet(np.ones(3), size=data.n_tasks)
    for params in ({"init": given, "max_iter": 2, "tol": 0.0}, {"n_init": 2, "max_iter": 2, "tol": 0.0, "seed": 4}):
        base = fit(data, "ds", **params)
        for n_parts in (2, 7):
            same(base, fit(data, "ds", engine=SplitEngine(data, n_parts), **params))


def test_mv_confusion_is_partition_invariant_and_one_m_step_of_the_vote(crowd):
    data, _ = crowd
    post = soft_majority_vote(data)
    prior, conf = posterior_confusion(data, post, 0.5)
    for n_parts in (2, 7):
        p2, c2 = posterior_confusion(data, post, 0.5, SplitEngine(data, n_parts))
        assert np.array_equal(prior, p2) and np.array_equal(conf, c2)
    # the M-step by numpy: expected counts [w, true, observed] of the vote shares, smoothed, rows normalised
    counts = np.zeros((data.n_workers, 3, 3))
    np.add.at(counts, (data.worker, slice(None), data.label), post[data.task])
    want = (counts + 0.5) / (counts + 0.5).sum(axis=2, keepdims=True)
    np.testing.assert_allclose(conf, want, rtol=1e-10)
    from crowdagg.methods.votes.mv import REPORT_SMOOTHING

    assert np.array_equal(aggregate(data, "mv").confusion, posterior_confusion(data, post, REPORT_SMOOTHING)[1])


def test_the_default_start_counts_the_vote_in_the_blocks(crowd, monkeypatch):
    """ds's default start needs no array over all tasks: the soft vote is never built."""
    import crowdagg.methods.blocks as blocks
    import crowdagg.methods.starts as starts

    data, _ = crowd

    def refuse(_data):
        raise AssertionError("the soft vote was built over all tasks")

    want = fit(data, "ds", max_iter=2, tol=0.0)
    monkeypatch.setattr(blocks, "soft_majority_vote", refuse)
    monkeypatch.setattr(starts, "soft_majority_vote", refuse)
    same(want, fit(data, "ds", engine=SplitEngine(data, 7), max_iter=2, tol=0.0))
