"""Coupled NMF (MultiSPA-KL): the cost and its gradient by hand, the mirror step and its line search, descent,
recovery of known confusion matrices, the real datasets' published figures, the same bytes everywhere, Dask."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from crowdagg import load_annotations
from crowdagg.core.threads import use_threads
from crowdagg.data.annotations import AnnotationSet
from crowdagg.errors import ConvergenceWarning, CrowdaggWarning
from crowdagg.methods.api import aggregate, get_method
from crowdagg.methods.moments import cnmf as cn
from crowdagg.simulate import simulate
from tests.realdata import dataset_in_files

from ...engine.split import SplitEngine
from . import common
from .common import accuracy_on
from .test_multispa import aligned_mse, same

#: Ibrahim et al. 2019, their re-runs (accuracy %): MultiSPA-KL.
PUBLISHED = {"rte": 92.88, "dog": 84.52, "web": 85.42, "trec": 70.77}
#: Where our faithful implementation does not reach the figure (see benchmarks/README and the report): the objective's
#: fit descends to ~78-81% on web from any start, the true labels' included (bench_moments.py objective).
SHORT = {"web": "80.6%: the KL sweeps move MultiSPA's 85.3% start away; from the truth's confusions too (81.4% by 30)",
         "trec": "68.0%: the KL sweeps do not lift MultiSPA's 68.7% start on trec (the truth's start keeps 71.3%)"}


def fit(data, method="cnmf", **params):
    return common.fit(data, method, **params)


def random_problem(rng, w=6, k=3):
    conf = rng.dirichlet(np.ones(k), size=(w, k)).transpose(0, 2, 1)  # [w, observed, true]
    prior = rng.dirichlet(np.ones(k) * 3)
    pairs = np.array([(a, b) for a in range(w) for b in range(a + 1, w)], dtype=np.int32)
    truth = rng.dirichlet(np.ones(k), size=(w, k)).transpose(0, 2, 1)
    r = np.einsum("pak,k,pbk->pab", truth[pairs[:, 0]], prior, truth[pairs[:, 1]])
    r = (r * 50).round() / 50  # a sample's roundness: some zero entries
    r /= r.sum(axis=(1, 2), keepdims=True)
    return conf, prior, pairs, r


# ----------------------------------------------------------------------------------------------- the pieces
def test_block_cost_and_its_gradient_by_hand(rng):
    conf, prior, pairs, r = random_problem(rng)
    omega = cn.CoupledPairs.build(pairs, r, np.ones(len(pairs), bool), len(conf))
    m = 2
    lo, hi = omega.starts[m], omega.starts[m + 1]
    target, q = omega.target[lo:hi], conf[omega.partner[lo:hi]] * prior
    # by hand: each pair's model A_m D A_j^T (floored, renormalised), KL over the positive entries
    want = 0.0
    for t, j in zip(target, omega.partner[lo:hi]):
        model = np.maximum(conf[m] @ np.diag(prior) @ conf[j].T, cn.MODEL_FLOOR)
        model /= model.sum()
        want += sum(t[a, b] * np.log(t[a, b] / model[a, b]) for a in range(3) for b in range(3) if t[a, b] > 0)
    assert cn.block_cost(conf[m], target, q) == pytest.approx(want, rel=1e-12)
    # the gradient the update steps along is the cost's own (no entry floored here): a central difference
    model = cn._modelled(np.broadcast_to(conf[m], q.shape), q)
    grad = -np.einsum("pab,pbk->ak", np.divide(target, model, out=np.zeros_like(target), where=target > 0), q)
    eps = 1e-7
    # along a direction of zero total change in every modelled block's mass, numeric == analytic
    d = np.zeros((3, 3))
    d[0, 0], d[1, 0] = 1.0, -1.0  # column 0 keeps its sum: every block's mass is unchanged
    numeric = (cn.block_cost(conf[m] + eps * d, target, q) - cn.block_cost(conf[m] - eps * d, target, q)) / (2 * eps)
    assert numeric == pytest.approx(float(np.sum(grad * d)), rel=1e-5, abs=1e-7)


def test_the_mirror_step_is_exponentiated_gradient_without_overflow():
    x = np.array([[0.5, 0.2], [0.5, 0.8]])
    g = np.array([[1.0, -2.0], [0.0, 3.0]])
    want = x * np.exp(-0.1 * g)
    np.testing.assert_allclose(cn._mirror(x, g, 0.1, 0), want / want.sum(axis=0), rtol=1e-14)
    huge = cn._mirror(x, np.array([[-1e6, 0.0], [0.0, 0.0]]), 0.1, 0)  # exp(1e5): overflows done naively
    assert np.isfinite(huge).all() and huge[0, 0] == pytest.approx(1.0)
    assert (cn._mirror(np.array([0.0, 1.0]), np.array([-5.0, 0.0]), 0.1, 0) == [0.0, 1.0]).all()  # zeros stay


def test_the_line_search_keeps_the_block_when_no_step_lowers_the_cost():
    x = np.array([0.3, 0.7])
    new, after, taken = cn._armijo(x, np.array([-1.0, 1.0]), lambda v: 1.0 + float(v[0]), 1.0 + 0.3, axis=0)
    assert not taken and new is x and after == pytest.approx(1.3)
    new, after, taken = cn._armijo(x, np.array([1.0, -1.0]), lambda v: float(v[0]), 0.3, axis=0)
    assert taken and new[0] < 0.3 and after == pytest.approx(new[0])


def test_every_sweep_lowers_the_cost(rng):
    conf, prior, pairs, r = random_problem(rng, w=8)
    omega = cn.CoupledPairs.build(pairs, r, np.ones(len(pairs), bool), len(conf))
    _, fitted_prior, trace, _ = cn.coupled_nmf(conf.copy(), prior.copy(), omega, 20, 0.0)
    assert len(trace) == 21 and (np.diff(trace) <= 1e-12).all() and trace[-1] < 0.8 * trace[0]
    np.testing.assert_allclose(fitted_prior.sum(), 1.0)


def test_noiseless_moments_are_fitted_down_to_zero_cost(rng):
    """The truth has cost 0; from a perturbed start the sweeps reproduce every pair's moments (the matrices
    themselves are unique only for sufficiently scattered crowds, which these are not asked to be)."""
    k, w = 3, 10
    truth = rng.dirichlet(np.ones(k), size=(w, k)).transpose(0, 2, 1) * 0.5 + np.eye(k) * 0.5
    prior = np.array([0.5, 0.3, 0.2])
    pairs = np.array([(a, b) for a in range(w) for b in range(a + 1, w)], dtype=np.int32)
    r = np.einsum("pak,k,pbk->pab", truth[pairs[:, 0]], prior, truth[pairs[:, 1]])
    omega = cn.CoupledPairs.build(pairs, r, np.ones(len(pairs), bool), w)
    assert cn.prior_cost(prior, truth, omega) == pytest.approx(0.0, abs=1e-12)
    start = np.clip(truth + rng.normal(0, 0.03, truth.shape), 0.01, None)
    start /= start.sum(axis=1, keepdims=True)
    fitted, d, trace, _ = cn.coupled_nmf(start, np.full(k, 1 / k), omega, 100, 0.0)
    assert trace[-1] < 0.02 * trace[0]
    model = np.einsum("pak,k,pbk->pab", fitted[pairs[:, 0]], d, fitted[pairs[:, 1]])
    assert np.abs(model - r).max() < 0.02


# ----------------------------------------------------------------------------------------------- the method
def test_recovers_the_demo_crowds_confusion_matrices_better_than_multispa():
    """main_demo.m's setting (N=10,000, M=25, K=3, p=0.2): the KL fit from MultiSPA's start halves its error or
    better under one common permutation (the test's oracle)."""
    crowd = simulate(scenario="multispa-demo", seed=0)
    data = crowd.to_annotations()
    mse, perm = aligned_mse(fit(data, "cnmf").confusion, crowd.confusion)
    start, _ = aligned_mse(fit(data, "multispa").confusion, crowd.confusion)
    ds, _ = aligned_mse(fit(data, "ds").confusion, crowd.confusion)
    assert mse < 0.004 and mse < 0.5 * start and mse < 10 * ds, (mse, start, ds)


def test_workers_outside_omega_keep_the_fallback_and_nothing_is_nan():
    crowd = simulate(2000, 10, 3, per_task=5, skill=(0.6, 0.9), seed=3)
    data = crowd.to_annotations()
    # worker 10 answers one task only: co-occurrences of rank 1, outside Omega
    extra = AnnotationSet.from_codes(np.concatenate([data.task, [0]]), np.concatenate([data.worker, [10]]),
                                     np.concatenate([data.label, [2]]), n_classes=3)
    with pytest.warns(CrowdaggWarning, match="cnmf: 1 of 11 workers could not be estimated"):
        res = aggregate(extra, "cnmf", tol=0.0)
    assert np.isfinite(res.posteriors).all() and np.isfinite(res.confusion).all()
    np.testing.assert_allclose(res.confusion[10], common.fallback_conf(extra)[10])
    assert res.n_iter == 10 and res.converged is False


def test_the_cap_warns_and_tol_zero_runs_it_silently():
    crowd = simulate(2000, 10, 3, per_task=5, skill=(0.6, 0.9), seed=3)
    data = crowd.to_annotations()
    with pytest.warns(ConvergenceWarning, match="cnmf: the coupled NMF did not converge in 2 sweeps"):
        aggregate(data, "cnmf", max_iter=2)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        assert aggregate(data, "cnmf", max_iter=2, tol=0.0).n_iter == 2


def test_declaration_defaults_are_as_published():
    spec = get_method("cnmf").spec()
    assert {p.name: p.default for p in spec.params} == {
        "seed": 0, "refine_iter": 200, "refine": "none", "max_iter": 10, "tol": 1e-6, "min_partners": 8,
        "prior": "uniform"}


# ----------------------------------------------------------------------------------------------- real data
@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.xfail(reason=SHORT[n], strict=True))
                                  if n in SHORT else n for n in sorted(PUBLISHED)])
def test_real_data_reaches_the_published_figure(datasets_dir, name):
    """Within 1 point of Ibrahim et al.'s MultiSPA-KL (their re-runs) or above, the raw estimate.  web and trec
    fall short (strict xfail: the day they pass, the marks must go)."""
    data = load_annotations(datasets_dir / name / "labels.csv")
    acc = accuracy_on(datasets_dir, name, fit(data, "cnmf"))
    assert acc >= PUBLISHED[name] - 1 - 1e-9, (name, acc, PUBLISHED[name])


# ----------------------------------------------------------------------------------------------- the same bytes
def test_threads_and_partitions_give_the_same_bytes():
    crowd = simulate(scenario="multispa-demo", seed=1, n_tasks=3000)
    data = crowd.to_annotations()
    with use_threads(1):
        base = fit(data, "cnmf", max_iter=3, tol=0.0)
    with use_threads(2):
        same(base, fit(data, "cnmf", max_iter=3, tol=0.0))
    for n_parts in (2, 3):
        same(base, fit(data, "cnmf", max_iter=3, tol=0.0, engine=SplitEngine(data, n_parts)))


@pytest.mark.dask
@pytest.mark.xdist_group("dask")
def test_dask_gives_the_local_bytes_on_a_real_set(datasets_dir, tmp_path):
    """One short run of each on the Dask engine (a LocalCluster of two worker processes; dog in three CSV files,
    two partitions): the local engine's arrays, bit for bit."""
    distributed = pytest.importorskip("distributed")
    from crowdagg.io.dask_read import read_distributed

    files = dataset_in_files(datasets_dir, "dog", tmp_path)
    local = load_annotations(files)
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None)
    client = distributed.Client(cluster)
    try:
        data, engine = read_distributed(files, client, partitions=2)
        try:
            for method, params in (("multispa", {}), ("cnmf", {"max_iter": 3, "tol": 0.0}),
                                   ("multispa", {"refine": "ds", "refine_iter": 5})):
                want = fit(local, method, **params)
                got = fit(data, method, engine=engine, **params)
                same(want, got)
        finally:
            engine.close()
    finally:
        client.close()
        cluster.close()
