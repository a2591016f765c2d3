"""Spectral-DS (crowdagg.methods.moments.spectral): its statistics against dense numpy twins, the exact matrices from
exact moments, recovery on simulated crowds, the class order from the data, the published real-data figures, the
same bytes for any seed-fixed run, thread count and engine, and clear errors on what it cannot identify."""

from __future__ import annotations

import itertools
import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pytest

from crowdagg.core.threads import use_threads
from crowdagg.data.annotations import AnnotationSet
from crowdagg.engine import LocalEngine
from crowdagg.errors import CrowdaggWarning
from crowdagg.kernels import cooc
from crowdagg.methods.moments import spectral
from crowdagg.methods.registry import get
from crowdagg.simulate import simulate
from tests.tiers import quick_case

from .common import assert_decoded, fallback_conf


# ----------------------------------------------------------------------------- slow numpy twins of the kernels
@dataclass(frozen=True)
class Triples:
    triples: np.ndarray
    joint: np.ndarray
    n_tasks: np.ndarray
    n_units: int
    n_classes: int


def views_of(data: AnnotationSet, units: np.ndarray, n_units: int) -> np.ndarray:
    """Dense per-task unit views, shape (n_tasks, n_units, K): Σ of the unit's workers' one-hot answers."""
    task = np.repeat(np.arange(data.n_tasks), np.diff(data.task_ptr))
    views = np.zeros((data.n_tasks, n_units, data.n_classes), dtype=np.int64)
    np.add.at(views, (task, np.asarray(units)[data.worker], data.label), 1)
    return views


def triple_twin(data: AnnotationSet, units=None, n_units=None, *, min_tasks: int = 1) -> Triples:
    """``triple_statistics`` by dense views: every unit triple u1 < u2 < u3 sharing ≥ min_tasks tasks."""
    units = np.arange(data.n_workers) if units is None else np.asarray(units)
    n_units = data.n_workers if n_units is None else int(n_units)
    views = views_of(data, units, n_units)
    answered = views.any(axis=2)
    found, joint, shared = [], [], []
    for a, b, c in itertools.combinations(range(n_units), 3):
        both = answered[:, a] & answered[:, b] & answered[:, c]
        if both.sum() >= max(min_tasks, 1):
            found.append((a, b, c))
            shared.append(int(both.sum()))
            joint.append(np.einsum("ni,nj,nl->ijl", views[both, a], views[both, b], views[both, c]))
    k = data.n_classes
    return Triples(np.array(found, dtype=np.int32).reshape(-1, 3), np.array(joint, dtype=np.int64).reshape(-1, k, k, k),
                   np.array(shared, dtype=np.int64), n_units, k)


def label_counts_twin(data: AnnotationSet) -> np.ndarray:
    out = np.zeros((data.n_workers, data.n_classes), dtype=np.int64)
    np.add.at(out, (data.worker, data.label), 1)
    return out


def test_the_triple_and_label_kernels_match_the_dense_twins():
    """The engine's kernels the method reads (crowdagg.kernels.cooc) against the dense twins above: every worker its
    own unit, the three groups as units, a min_tasks cut."""
    data = simulate(n_tasks=300, n_workers=9, n_classes=3, per_task=4, seed=2).to_annotations()
    engine = LocalEngine(data)
    assert np.array_equal(cooc.label_counts(engine), label_counts_twin(data))
    group = spectral.make_groups(data.answers_per_worker, "balanced")
    for units, n_units, min_tasks in ((None, None, 1), (group, 3, 1), (None, None, 5)):
        got = cooc.triple_statistics(engine, units, n_units, min_tasks=min_tasks)
        want = triple_twin(data, units, n_units, min_tasks=min_tasks)
        assert np.array_equal(got.triples, want.triples)
        assert np.array_equal(got.joint, want.joint) and np.array_equal(got.n_tasks, want.n_tasks)


def test_the_group_and_partner_moments_are_the_dense_views_products():
    data = simulate(n_tasks=500, n_workers=10, n_classes=3, per_task=4, seed=4).to_annotations()
    group = spectral.make_groups(data.answers_per_worker, "balanced")
    stats = cooc.co_occurrence(LocalEngine(data))
    cross = spectral.cross_moments(stats.pairs, stats.joint, group, 3)
    views = views_of(data, group, 3)
    for g, h in itertools.permutations(range(3), 2):
        assert np.array_equal(cross[g, h], views[:, g].T @ views[:, h])
    assert not cross[[0, 1, 2], [0, 1, 2]].any()
    partners = spectral.partner_moments(stats.pairs, stats.joint, group, data.n_workers, 3)
    own = views_of(data, np.arange(data.n_workers), data.n_workers)
    for m in range(data.n_workers):
        alt = views.sum(axis=1) - views[:, group[m]]
        assert np.array_equal(partners[m], own[:, m].T @ alt)


def test_groups_balance_the_answers_or_follow_the_codes():
    answers = np.array([50, 1, 1, 1, 30, 20, 0, 5])
    group = spectral.make_groups(answers, "balanced")
    assert group.tolist() == [0, 2, 2, 2, 1, 2, 2, 2]  # 50 | 30 | 20 + 5 + 1 + 1 + 1 + 0, each to the lightest
    load = np.bincount(group, weights=answers, minlength=3)
    assert load.max() - load.min() <= answers.max()
    assert spectral.make_groups(answers, "round-robin").tolist() == [0, 1, 2, 0, 1, 2, 0, 1]


# ----------------------------------------------------------------------------- the mathematics on exact moments
def test_the_power_method_recovers_an_orthogonal_decomposition():
    rng = np.random.default_rng(0)
    k = 5
    basis, _ = np.linalg.qr(rng.standard_normal((k, k)))
    lam = np.array([3.0, 2.5, 2.0, 1.5, 1.2])
    tensor = np.einsum("r,ir,jr,lr->ijl", lam, basis, basis, basis)
    got, vectors = spectral.power_method(tensor, np.random.default_rng(1), 100, 100)
    order = np.argsort(-got)
    np.testing.assert_allclose(got[order], lam, rtol=1e-10)
    np.testing.assert_allclose(np.abs(vectors[:, order].T @ basis), np.eye(k), atol=1e-8)
    # a negative weight is the same term with the vector negated: returned positive
    got, vectors = spectral.power_method(-tensor, np.random.default_rng(1), 100, 100)
    assert (got > 0).all()
    again, _ = spectral.power_method(tensor, np.random.default_rng(1), 100, 100)
    assert np.array_equal(spectral.power_method(tensor, np.random.default_rng(1), 100, 100)[0], again)


def test_groups_are_matched_by_their_cross_moment_not_by_their_largest_entries():
    """C_1 with an adversarial column order and no diagonal dominance: the cross moment still pins the match."""
    rng = np.random.default_rng(3)
    c0, c1 = rng.random((4, 4)), rng.random((4, 4))
    d = np.array([0.1, 0.2, 0.3, 0.4])
    perm = np.array([2, 0, 3, 1])
    order = spectral.match_order(c0, c1[:, perm], c0 @ np.diag(d) @ c1.T)
    assert np.array_equal(perm[order], np.arange(4))


def exact_moments(crowd, group, rate):
    """Population moments of a crowd whose workers each answer a task w.p. ``rate``: (cross, triple, partners)."""
    a = crowd.confusion.transpose(0, 2, 1)  # [w, observed, true]
    d = crowd.prior
    c = np.stack([rate * a[group == g].sum(axis=0) for g in range(3)])
    cross = np.einsum("gik,k,hjk->ghij", c, d, c)
    cross[[0, 1, 2], [0, 1, 2]] = 0
    triple = np.einsum("k,ik,jk,lk->ijl", d, c[0], c[1], c[2])
    partners = np.stack([rate * a[m] @ np.diag(d) @ (c.sum(axis=0) - c[group[m]]).T for m in range(len(a))])
    return cross, triple, partners


@pytest.mark.parametrize("scenario", [None, "multispa-demo"])
def test_exact_moments_give_the_exact_matrices_and_prior_in_one_order(scenario, monkeypatch):
    """Population moments in: every worker's matrix and the prior out to rounding, the three groups' components
    matched to one order (whatever order each decomposition found them in: here each call's components are
    shuffled), then the classes' own order."""
    real = spectral.power_method
    shuffle = np.random.default_rng(7)

    def shuffled(tensor, rng, restarts, iterations):
        lam, vectors = real(tensor, rng, restarts, iterations)
        order = shuffle.permutation(len(lam))
        return lam[order], vectors[:, order]

    monkeypatch.setattr(spectral, "power_method", shuffled)
    if scenario:
        crowd = simulate(scenario=scenario, n_tasks=100, prior=[0.5, 0.3, 0.2], seed=1)
    else:
        crowd = simulate(100, 25, 4, 5, prior=[0.4, 0.3, 0.2, 0.1], seed=1)
    group = spectral.make_groups(np.ones(25, dtype=np.int64))
    cross, triple, partners = exact_moments(crowd, group, 0.2)
    fit = spectral.fit_groups(cross, triple, np.random.default_rng(3), 100, 100)
    conf, estimated, why = spectral.worker_matrices(partners, group, fit, 1)
    assert estimated.all() and why == ""
    truth = crowd.confusion.transpose(0, 2, 1)
    best = min(itertools.permutations(range(crowd.prior.size)),
               key=lambda p: np.abs(conf[:, :, list(p)] - truth).max())
    np.testing.assert_allclose(conf[:, :, list(best)], truth, atol=1e-9)
    np.testing.assert_allclose(fit.weights.mean(axis=0)[list(best)], crowd.prior, atol=1e-9)
    if scenario is None:  # diagonally dominant workers: the data's own order is the truth's
        from crowdagg.methods.moments.align import common_order

        assert list(common_order(conf)) == list(best)


# ----------------------------------------------------------------------------- recovery on simulated crowds
def fit(data, method="spectral", **params):
    return get(method).load()(**params).fit(data)


def aligned_mse(result, crowd) -> tuple[float, tuple[int, ...]]:
    """The mean squared error of the [w, true, observed] matrices against the truth under the best common
    permutation of the estimated (latent) classes -- the observed answers' axis is the data's own -- (the TEST may
    use the truth to align; the method never does)."""
    k = crowd.prior.size
    errors = {p: float(np.mean((result.confusion[:, list(p)] - crowd.confusion) ** 2))
              for p in itertools.permutations(range(k))}
    best = min(errors, key=errors.get)
    return errors[best], best


@pytest.fixture(scope="module")
def ds_crowd():
    """N = 10,000, M = 25, K = 3, 5 workers a task (p_obs 0.2), Dawid-Skene workers with accuracies in [0.6, 0.9]."""
    crowd = simulate(10_000, 25, 3, 5, seed=1)
    return crowd, crowd.to_annotations()


def test_the_raw_estimate_recovers_a_ds_crowd(ds_crowd):
    """The bound: an entry of worker m's column k is a frequency over its ~n_mk = 2,000/3 answers on class k, so
    no estimator beats a mean squared error of about mean(p(1 - p) / n_mk) = 2e-4 here (DS, the MLE, reaches
    it); the moment estimate may be three times as noisy, and is about twice."""
    crowd, data = ds_crowd
    c = crowd.confusion
    n_mk = np.bincount(data.worker, minlength=25)[:, None, None] * crowd.prior[None, :, None]
    floor = float(np.mean(c * (1 - c) / n_mk))
    raw, ds, refined = fit(data, refine="none"), fit(data, "ds"), fit(data)
    mse_raw, order = aligned_mse(raw, crowd)
    mse_ds, _ = aligned_mse(ds, crowd)
    mse_refined, _ = aligned_mse(refined, crowd)
    assert order == (0, 1, 2)  # the class order from the data is the truth's
    assert mse_ds < 1.3 * floor and mse_raw < 3 * floor, (floor, mse_ds, mse_raw)  # 2.0e-4, 1.9e-4, 3.5e-4
    acc = {name: float((r.labels == crowd.truth).mean()) for name, r in (("raw", raw), ("ds", ds), ("ref", refined))}
    assert acc["raw"] > acc["ds"] - 0.005 and acc["ref"] >= acc["raw"], acc  # .962, .964, .964
    assert mse_refined <= mse_raw and mse_refined < 1.05 * mse_ds
    assert raw.n_iter == 0 and raw.method == refined.method == "spectral" and refined.n_iter > 1


def test_the_multispa_demo_crowd_and_why_its_raw_estimate_is_poor():
    """MultiSPA's demo crowd (N = 10,000, M = 25, K = 3, p_obs 0.2): 21 of its 25 workers answer each class from a
    random distribution, so a group's summed view is nearly the same for every class: its matrix C_g has condition
    number 16 to 69 (1.6 to 1.7 for the ds crowd above), and the whitening (M2 = C diag(d) Cᵀ, condition number its square) blows a moment's
    sampling error of 1% (N = 10^4) up to the matrices' own size -- a failure mode the paper's group views have
    and a per-worker method (MultiSPA) has not.  Measured: the raw estimate's aligned MSE is 0.019 against DS's
    7.6e-4 (it does not shrink with N = 10^5 either: 0.026); refined it is DS's.  Exact moments recover it
    exactly (test_exact_moments_give...)."""
    crowd = simulate(scenario="multispa-demo", n_tasks=10_000, seed=1)
    data = crowd.to_annotations()
    group = spectral.make_groups(data.answers_per_worker)
    a = crowd.confusion.transpose(0, 2, 1)
    assert min(np.linalg.cond(a[group == g].sum(axis=0)) for g in range(3)) > 15
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CrowdaggWarning)  # the raw estimate collapses onto one class: said
        raw = fit(data, refine="none")
    refined, ds = fit(data), fit(data, "ds")
    mse_raw, mse_refined, mse_ds = (aligned_mse(r, crowd)[0] for r in (raw, refined, ds))
    assert np.isfinite(raw.posteriors).all() and 0.005 < mse_raw < 0.05
    assert mse_refined < 1.3 * mse_ds < 0.002


@pytest.fixture(scope="module")
def blocks_crowd():
    """150,000 answers: three blocks of the grid."""
    crowd = simulate(30_000, 25, 3, 5, seed=5)
    data = crowd.to_annotations()
    assert LocalEngine(data).n_blocks >= 2
    return data


def same(a, b) -> None:
    for name in ("posteriors", "labels", "prior", "confusion", "objective"):
        assert np.array_equal(getattr(a, name), getattr(b, name)), name


def test_the_same_bytes_for_a_seed_and_any_thread_count(blocks_crowd):
    for refine in ("none", "ds"):
        with use_threads(1):
            base = fit(blocks_crowd, refine=refine, refine_iter=5)
        same(base, fit(blocks_crowd, refine=refine, refine_iter=5))
        with use_threads(2):
            same(base, fit(blocks_crowd, refine=refine, refine_iter=5))


def test_the_seed_draws_the_power_method_starts(monkeypatch, blocks_crowd):
    seen = []
    real = spectral.power_method

    def spy(tensor, rng, restarts, iterations):
        seen.append(rng.uniform())  # the generator's state as handed over
        return real(tensor, rng, restarts, iterations)

    monkeypatch.setattr(spectral, "power_method", spy)
    a = fit(blocks_crowd, refine="none", seed=1, restarts=7, power_iter=20)
    b = fit(blocks_crowd, refine="none", seed=2, restarts=7, power_iter=20)
    assert len(seen) == 6 and seen[:3] != seen[3:]
    np.testing.assert_allclose(a.confusion, b.confusion, atol=1e-8)  # the decomposition converges whatever the starts


def test_the_class_order_comes_from_the_data_not_from_the_class_codes(ds_crowd):
    """Renaming the classes (a permutation of the label codes) permutes the result, nothing else."""
    crowd, data = ds_crowd
    perm = np.array([2, 0, 1])
    renamed = AnnotationSet.from_codes(np.repeat(np.arange(data.n_tasks), np.diff(data.task_ptr)), data.worker,
                                       perm[data.label], n_classes=3)
    a, b = fit(data, refine="none"), fit(renamed, refine="none")
    assert np.array_equal(perm[a.labels], b.labels)
    np.testing.assert_allclose(b.confusion[:, perm][:, :, perm], a.confusion, atol=1e-9)


# ----------------------------------------------------------------------------- what it cannot identify
def codes(task, worker, label, n_classes):
    return AnnotationSet.from_codes(np.array(task), np.array(worker), np.array(label), n_classes=n_classes)


def falls_back(data, cause: str):
    """Nothing identifiable: every worker the soft-vote fallback, a warning naming the cause, finite output."""
    with pytest.warns(CrowdaggWarning, match=rf"spectral: {data.n_workers} of {data.n_workers} workers could not be "
                      rf"estimated from the moments \(.*{cause}"):
        raw = fit(data, refine="none")
    assert np.isfinite(raw.posteriors).all() and np.isfinite(raw.confusion).all()
    conf = fallback_conf(data)
    np.testing.assert_allclose(raw.confusion, conf)
    assert_decoded(raw, data, conf)
    # the answers' class frequencies, floored; a class no answer carries is vetoed (0: test_hostile.py)
    freq = np.bincount(data.label, minlength=data.n_classes) / data.n_answers
    expected = np.where(freq > 0, np.maximum(freq, 1e-6), 0.0)
    np.testing.assert_allclose(raw.prior, expected / expected.sum())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CrowdaggWarning)
        assert np.isfinite(fit(data).posteriors).all()
    with pytest.raises(spectral.Unidentified):  # the cause, for whoever calls the steps
        spectral.SpectralDS()._moments(data, _context(data), data.answers_per_worker)


def _context(data):
    from crowdagg.methods.base import FitContext

    params = {"seed": 0, "groups": "balanced", "restarts": 100, "power_iter": 100}
    return FitContext(params, engine=LocalEngine(data))


def test_fewer_than_three_workers_fall_back():
    falls_back(codes([0, 0, 1, 1], [0, 1, 0, 1], [0, 1, 1, 1], 2), "2 workers with answers: three groups need three")


def test_no_task_answered_by_all_three_groups_falls_back():
    # three workers, each pair sharing tasks, never all three
    data = codes(np.repeat(np.arange(9), 2), [0, 1, 1, 2, 0, 2] * 3, [0, 0, 1, 1, 0, 1] * 3, 2)
    falls_back(data, "no task was answered by a worker of each of the three groups")


def test_a_class_nobody_answers_is_a_rank_deficiency_and_falls_back():
    crowd = simulate(2000, 12, 2, 4, seed=1)
    falls_back(AnnotationSet.from_codes(crowd.task, crowd.worker, crowd.label, n_classes=3), r"has rank 2 < 3 classes")


def test_workers_sharing_no_task_with_the_other_groups_get_the_fallback_with_a_warning(ds_crowd):
    _, data = ds_crowd
    # worker 25 answers 30 tasks of its own, nobody else's
    task = np.concatenate([np.repeat(np.arange(data.n_tasks), np.diff(data.task_ptr)), data.n_tasks + np.arange(30)])
    worker = np.concatenate([data.worker, np.full(30, 25)])
    label = np.concatenate([data.label, np.arange(30) % 3])
    lone = AnnotationSet.from_codes(task, worker, label, n_classes=3)
    with pytest.warns(CrowdaggWarning, match=r"spectral: 1 of 26 workers could not be estimated .*share no task"):
        result = fit(lone, refine="none")
    assert np.isfinite(result.posteriors).all() and np.isfinite(result.confusion).all()
    np.testing.assert_allclose(result.confusion[25], fallback_conf(lone)[25])


def test_spammers_only_pass_the_rank_test_and_the_collapse_is_said():
    """No informative worker: the moments carry no classes, but the sampled moments' noise passes the rank test, so
    every worker is estimated (no fallback, no error) and the collapse check says what came of it (99% of the labels
    one class).  The output is finite and decoded from the estimate it reports."""
    crowd = simulate(3000, 15, 3, 5, spammers=1.0, seed=2)
    data = crowd.to_annotations()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = fit(data, refine="none")
    said = [str(w.message) for w in caught if issubclass(w.category, CrowdaggWarning)]
    assert not any("could not be estimated" in m for m in said), said
    assert any(m.startswith("spectral: the fit may have collapsed") for m in said), said
    assert np.isfinite(result.posteriors).all() and np.isfinite(result.confusion).all()
    assert not np.allclose(result.confusion, fallback_conf(data))
    assert_decoded(result, data, result.confusion)


# ----------------------------------------------------------------------------- real data: Ibrahim et al. 2019's re-runs
#: Spectral-D&S accuracy (%) in Ibrahim, Fu, Kargas & Huang (NeurIPS 2019), Table 2 (issue 16), and ours (refined,
#: default parameters).  rte and trec reproduce (0 and -0.27), dog is 2.1 above; web does not (-1.51): our raw
#: estimate there (70.4%, K = 5 on 2,665 tasks of ~6 answers, many of them from workers with a handful) is a poorer
#: start than theirs, and EM from it stops at another fixed point (from majority vote, ds: 82.89%); the grouping moves
#: web by over a point (round-robin: 80.40), the other sets by at most 0.27.
PUBLISHED = {"rte": 92.88, "dog": 82.16, "web": 83.12, "trec": 70.42}
OURS = {"rte": 92.88, "dog": 84.26, "web": 81.61, "trec": 70.15}


def accuracy(data: AnnotationSet, labels: np.ndarray, truth: pd.DataFrame) -> float:
    named = dict(zip(data.task_names.tolist(), np.asarray(data.classes)[labels].tolist()))
    return 100.0 * float(np.mean([named.get(t) == y for t, y in zip(truth["task"], truth["label"])]))


@pytest.mark.parametrize("name", quick_case(sorted(PUBLISHED), "rte", "spectral"))
def test_spectral_ds_on_the_real_datasets(datasets_dir, name):
    from crowdagg.io.read import load_annotations

    data = load_annotations(str(datasets_dir / name / "labels.csv"))
    truth = pd.read_csv(datasets_dir / name / "truth.csv", dtype=str, keep_default_na=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CrowdaggWarning)  # trec: 5 workers share no task with the other groups
        got = accuracy(data, fit(data).labels, truth)
    assert got == pytest.approx(OURS[name], abs=0.005)
    assert got > PUBLISHED[name] - (2.0 if name == "web" else 1.0)


# ----------------------------------------------------------------------------- the Dask engine
@pytest.mark.dask
def test_the_dask_engine_gives_the_local_bytes_on_a_real_set(datasets_dir):
    distributed = pytest.importorskip("distributed")
    from crowdagg.io.dask_read import read_distributed
    from crowdagg.io.read import load_annotations

    path = str(datasets_dir / "dog" / "labels.csv")
    local = fit(load_annotations(path))
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=":0") as cluster, distributed.Client(cluster) as client:
        data, engine = read_distributed([path], client, partitions=2)
        try:
            same(local, get("spectral").load()().fit(data, engine=engine))
        finally:
            engine.close()
