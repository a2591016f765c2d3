"""deepBP: exact on a tree (brute-force enumeration of every labelling and every draw), the aggregator bp's bits when
the features are ignored, learning, the messages carried between epochs."""

from __future__ import annotations

import itertools
from types import SimpleNamespace

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from crowdagg.data.annotations import AnnotationSet  # noqa: E402
from crowdagg.engine import LocalEngine  # noqa: E402
from crowdagg.learning.methods.graph.deepbp import DeepBP, _Messages  # noqa: E402
from crowdagg.learning.trainer import canonical  # noqa: E402
from crowdagg.methods.base import FitContext  # noqa: E402
from crowdagg.methods.registry import get_method  # noqa: E402
from tests.learning.methods.graph.test_deepmf import crowd  # noqa: E402

#: A tree: 7 tasks, 6 workers, 12 answers (13 nodes), connected, no cycle; worker 4 and 5 answer one task each.
TREE = {0: (0, 1, 2), 1: (2, 3), 2: (3, 4, 5), 3: (1, 6), 4: (6,), 5: (0,)}


def tree_crowd(k: int, seed: int) -> AnnotationSet:
    rng = np.random.default_rng(seed)
    task = np.array([t for w in TREE for t in TREE[w]])
    worker = np.array([w for w in TREE for _ in TREE[w]])
    order = np.lexsort((worker, task))
    return AnnotationSet.from_codes(task[order], worker[order], rng.integers(0, k, task.size)[order], n_tasks=7,
                                    n_workers=len(TREE), n_classes=k)


def messages(data: AnnotationSet, **params) -> _Messages:
    """deepBP's BP over ``data`` as an epoch runs it (its parameters checked by the declaration)."""
    checked = DeepBP(**{"bp_tol": 1e-14, "bp_iters": 100, "worker_model": "confusion", **params}).check_params()
    ctx = SimpleNamespace(params=FitContext(checked, method="deepbp"), method="deepbp")
    return _Messages(ctx, data, LocalEngine(data))  # type: ignore[arg-type]


def enumerate_marginals(data: AnnotationSet, log_prior: np.ndarray, pts, drop: int | None = None) -> np.ndarray:
    """Each task's marginal (n_tasks, K) of p(z) ∝ Π_i h_i(z_i) Π_u Σ_g w_ug Π_{j ∈ N_u} θ_ug[z_j, y_ju], by summing
    over all K^n labellings and, per worker, all of its points (its own set, else the shared one); ``drop``: leave
    that worker's factor out."""
    k, n = data.n_classes, data.n_tasks
    z = np.array(list(itertools.product(range(k), repeat=n)))  # (K^n, n)
    log_p = log_prior[np.arange(n), z].sum(axis=1)
    for u in range(data.n_workers):
        if u == drop:
            continue
        own = pts.owner[u] if pts.owner is not None else -1
        theta, logw = (pts.theta, pts.logw) if own < 0 else (pts.own_theta[own], pts.own_logw[own])
        mine = np.flatnonzero(data.worker == u)
        factor = np.zeros(z.shape[0])
        for g in range(theta.shape[0]):
            factor += np.exp(logw[g]) * np.prod(theta[g][z[:, data.task[mine]], data.label[mine]], axis=1)
        log_p += np.log(factor)
    p = np.exp(log_p - log_p.max())
    out = np.stack([np.bincount(z[:, i], weights=p, minlength=k) for i in range(n)])
    return out / out.sum(axis=1, keepdims=True)


@pytest.mark.quick
@pytest.mark.parametrize("model", ["confusion", "one-coin"])
@pytest.mark.parametrize("k", [2, 3])
def test_the_messages_are_exact_on_a_tree(k, model):
    """On a tree BP's beliefs are the exact marginals of the mixture its points define, and each task→worker
    message the marginal of the task with that worker's factor left out -- with the classifier as the task
    factors, from the first run and from the last one's messages (the next epoch's)."""
    data = tree_crowd(k, seed=k)
    msgs = messages(data, samples=30, prior=(2.0, 1.0), proposal="prior", seed=7, worker_model=model, grid=12)
    rng = np.random.default_rng(k)
    for log_prior in (np.log(rng.dirichlet(np.ones(k), data.n_tasks)), np.log(rng.dirichlet(np.ones(k) * 3, 7))):
        belief = msgs.run(log_prior, 0)
        pts = msgs.state.points
        np.testing.assert_allclose(belief, enumerate_marginals(data, log_prior, pts), rtol=0, atol=1e-10)
        for e, (t, w) in enumerate(zip(data.task, data.worker)):
            want = enumerate_marginals(data, log_prior, pts, drop=int(w))[t]
            np.testing.assert_allclose(msgs.state.tmsg[e], want, rtol=0, atol=1e-10)


def star_crowd() -> AnnotationSet:
    """A tree: worker 0 answers 15 of 16 tasks (90% of its answers class 0), three workers one or two each."""
    star = {0: tuple(range(15)), 1: (14, 15), 2: (15,), 3: (0,)}
    task = np.array([t for w in star for t in star[w]])
    worker = np.array([w for w in star for _ in star[w]])
    order = np.lexsort((worker, task))
    label = np.where(np.random.default_rng(2).random(task.size) < 0.9, 0, 1)
    return AnnotationSet.from_codes(task[order], worker[order], label[order], n_tasks=16, n_workers=4, n_classes=2)


def test_exact_on_a_tree_with_a_workers_own_draws():
    """A star: worker 0 answers 15 of 16 tasks (90% of them class 0), so the 20 shared prior draws serve it poorly
    and it importance-samples its own (proposal=posterior, drawn again while they serve it poorly): the beliefs
    are still the exact marginals of the mixture -- its own draws and weights -- from either epoch."""
    data = star_crowd()
    msgs = messages(data, samples=20, prior=(2.0, 1.0), proposal="posterior", seed=7)
    rng = np.random.default_rng(2)
    for epoch in range(2):
        log_prior = np.log(rng.dirichlet(np.ones(2), 16))
        belief = msgs.run(log_prior, epoch)
        pts = msgs.state.points
        assert pts.owner is not None and pts.owner[0] == 0 and (pts.owner[1:] == -1).all()
        np.testing.assert_allclose(belief, enumerate_marginals(data, log_prior, pts), rtol=0, atol=1e-10)


@pytest.mark.parametrize("k", [2, 3])
def test_features_ignored_it_is_the_aggregator_bp(k):
    """c = 1/K: the task factors are uniform, and the labels of deepBP (its BP over every answer, from uniform
    messages, the prior draws) are the aggregator bp's with the same model to the bit.  Under the default
    proposal=posterior they are not: deepBP draws a worker's own points again at the beliefs while they serve it
    poorly, bp proposes once."""
    data, x, _ = crowd(seed=k, n_tasks=150, k=k)
    canon = canonical(data)
    data, x = canon.data, x[canon.tasks]
    fit = dict(samples=60, bp_iters=50, bp_tol=1e-3, prior=(2.0, 1.0), proposal="prior", seed=4,
               worker_model="confusion")
    result = DeepBP(clip=1.0 / k, epochs=3, model="linear", val_fraction=0.0, patience=0, device="cpu",
                    **fit).fit(data, x)
    bp = get_method("bp")(worker_model="confusion", samples=60, max_iter=50, tol=1e-3, prior=(2.0, 1.0),
                          proposal="prior", start="uniform", seed=4).fit(data)
    np.testing.assert_array_equal(result.posteriors, bp.posteriors)
    np.testing.assert_array_equal(result.labels, bp.labels)


def test_learns_a_separable_problem_past_the_answers():
    data, x, truth = crowd(seed=5, n_tasks=400, separation=6.0)
    # a Dawid-Skene crowd: the worker model it was drawn from (one-coin, the default, .958)
    result = DeepBP(model="linear", device="cpu", seed=0, samples=100, worker_model="confusion").fit(data, x)
    acc = (np.asarray(result.labels).astype(int) == truth).mean()
    bp = get_method("bp")(worker_model="confusion", samples=100, seed=0).fit(data)
    assert acc > 0.97
    assert acc > (np.asarray(bp.labels).astype(int) == truth).mean() + 0.03
    conf = result.worker_params["confusion"]
    np.testing.assert_allclose(conf.sum(axis=2), 1.0, atol=1e-9)
    assert np.diagonal(conf, axis1=1, axis2=2).mean() > 0.6  # workers better than chance (.55-.85 simulated)


@pytest.mark.quick
def test_the_messages_carry_over_and_the_draws_are_shared_with_the_kept_epoch():
    import copy

    data = tree_crowd(2, seed=1)
    msgs = messages(data, samples=20, prior=(2.0, 1.0), proposal="prior", bp_tol=0.03)
    msgs.run(np.zeros((7, 2)), 0)
    state = msgs.state
    assert copy.deepcopy({"bp": msgs})["bp"] is msgs  # a snapshot shares the fit's working memory
    msgs.run(np.log(np.full((7, 2), 0.5)), 1)  # the same factors: the carried messages are the fixed point
    assert msgs.state is state
    assert msgs.optimizer.runs == 2 and msgs.optimizer.failed == 0


@pytest.mark.parametrize("k", [2, 3])
def test_features_ignored_one_coin_is_the_aggregator_bp(k):
    """The paper's one-coin prior (the default): with c = 1/K deepBP's labels and posteriors are the aggregator
    bp's (its default one-coin grid) to the bit."""
    data, x, _ = crowd(seed=k, n_tasks=150, k=k)
    canon = canonical(data)
    data, x = canon.data, x[canon.tasks]
    result = DeepBP(clip=1.0 / k, epochs=3, model="linear", val_fraction=0.0, patience=0, device="cpu",
                    bp_iters=50, bp_tol=1e-3, seed=4).fit(data, x)
    bp = get_method("bp")(max_iter=50, tol=1e-3, start="uniform", seed=4).fit(data)
    np.testing.assert_array_equal(result.posteriors, bp.posteriors)
    np.testing.assert_array_equal(result.labels, bp.labels)


@pytest.mark.quick
def test_the_prior_by_default_keeps_the_papers_mean_accuracy():
    """No prior given: (2(K - 1), 1), a worker's prior mean accuracy 2/3 at every K as the paper's Dir(2, 1) for
    K = 2 (which it is there); a given prior is used as it is, by the BP and by the β the fit starts from."""
    from crowdagg.learning.methods.graph.deepmf import worker_prior

    assert DeepBP().check_params()["prior"] is None
    assert worker_prior(None, 2, "confusion") == (2.0, 1.0)
    for k in (2, 3, 8):  # one-coin: the paper's Beta(2, 1) at every K (its mean accuracy 2/3)
        assert worker_prior(None, k, "one-coin") == (2.0, 1.0)
    for k in (3, 8, 10):
        a, b = worker_prior(None, k, "confusion")
        assert (a, b) == (2.0 * (k - 1), 1.0) and a / (a + (k - 1) * b) == pytest.approx(2 / 3)
    assert worker_prior((3.0, 0.5), 8, "confusion") == (3.0, 0.5)
    data = tree_crowd(3, seed=3)
    assert messages(data).checked["prior"] == (4.0, 1.0)
    assert messages(data, prior=(2.0, 1.0)).checked["prior"] == (2.0, 1.0)


@pytest.mark.quick
def test_an_epoch_runs_bp_once_and_the_next_draws_the_stale_workers_again():
    """An epoch's run (rounds=1) runs BP once, whatever its draws; a worker its messages left on fewer than
    REDRAW_ESS × samples effective draws draws its own again at the next run's start, from its own seed."""
    from crowdagg.learning.methods.graph import deepbp

    data = star_crowd()
    msgs = messages(data, samples=20, prior=(2.0, 1.0), proposal="posterior", seed=7)
    msgs.run(np.zeros((16, 2)), 0)
    first = msgs.state.points
    assert first.owner is not None and first.owner[0] == 0
    assert msgs.optimizer.runs == 1 and not msgs._stale().any()
    # a classifier sure of class 1 everywhere: worker 0's answers (90% class 0) now say it errs, far from its draws
    msgs.run(np.log(np.tile([0.001, 0.999], (16, 1))), 1)
    assert msgs.state.points is first  # (drawn again only at a run's start)
    assert msgs.optimizer.runs == 2 and msgs._stale()[0]
    assert msgs.spread[0] < deepbp.REDRAW_ESS * 20
    msgs.run(np.log(np.tile([0.001, 0.999], (16, 1))), 2)
    new = msgs.state.points
    assert not np.array_equal(new.own_theta[0], first.own_theta[0])
    assert msgs.spread[0] > deepbp.REDRAW_ESS * 20  # its new draws serve it


def test_a_refusal_for_memory_advises_fewer_draws_not_only_a_smaller_network():
    """deepBP's memory is mostly its draws (samples × workers × K² with a worker's own draws): the refusal says
    so, where deepMF's advice (fewer tasks, a smaller hidden layer) would not shrink it."""
    from crowdagg.errors import ResourceError

    data, x, _ = crowd(n_tasks=40)
    with pytest.raises(ResourceError, match=r"samples.*grid|grid.*samples"):
        DeepBP(model="linear", epochs=1, device="cpu", worker_model="confusion", samples=100_000,
               ).fit(data, x, max_memory="10M")
