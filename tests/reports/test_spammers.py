"""Spammer scores and the cross-covariance spammer detector (crowdagg.reports.spammers)."""

from __future__ import annotations

import itertools
import math
import warnings

import numpy as np
import pytest

from crowdagg.core.threads import use_threads
from crowdagg.data.annotations import AnnotationSet
from crowdagg.engine import LocalEngine
from crowdagg.errors import CrowdaggWarning, DataError, ResourceError, UsageError
from crowdagg.kernels import cooc
from crowdagg.kernels.spammers import TermParams, answer_terms_block, apply_filled, null_energy
from crowdagg.reports import spammers as sp
from crowdagg.simulate import simulate


def h2(p: float) -> float:
    return 0.0 if p in (0.0, 1.0) else -p * math.log2(p) - (1 - p) * math.log2(1 - p)


# ----------------------------------------------------------------------------------------- channel capacity


def test_capacity_of_binary_symmetric_channels_is_one_minus_the_entropy():
    ps = [0.0, 0.01, 0.1, 0.25, 0.4, 0.5, 0.7, 1.0]
    conf = np.array([[[1 - p, p], [p, 1 - p]] for p in ps])
    np.testing.assert_allclose(sp.channel_capacity(conf), [1 - h2(p) for p in ps], atol=1e-6)


def test_capacity_of_k_ary_symmetric_channels():
    rows = []
    expected = []
    for k, e in [(3, 0.2), (4, 0.3), (5, 0.6), (4, 0.75)]:
        a = np.full((k, k), e / (k - 1))
        np.fill_diagonal(a, 1 - e)
        rows.append(a)
        expected.append(math.log2(k) - h2(e) - e * math.log2(k - 1))
    for a, c in zip(rows, expected):
        assert sp.channel_capacity(a[None])[0] == pytest.approx(c, abs=1e-6)
    assert expected[-1] == pytest.approx(0.0, abs=1e-12)  # e = (K-1)/K: every row uniform, a spammer


def test_capacity_of_z_channels_and_an_erasure_channel():
    for p in (0.1, 0.3, 0.5, 0.9):
        z = np.array([[[1.0, 0.0], [p, 1 - p]]])
        closed = math.log2(1 + (1 - p) * p ** (p / (1 - p)))
        assert sp.channel_capacity(z)[0] == pytest.approx(closed, abs=1e-6)
    eps = 0.35  # binary erasure: 2 inputs, 3 outputs, capacity 1 - eps
    bec = np.array([[[1 - eps, eps, 0.0], [0.0, eps, 1 - eps]]])
    assert sp.channel_capacity(bec)[0] == pytest.approx(1 - eps, abs=1e-6)


def test_capacity_is_zero_for_spammers_and_log_k_for_permutations():
    rng = np.random.default_rng(0)
    s = rng.dirichlet(np.ones(4), size=3)
    spam = np.repeat(s[:, None, :], 4, axis=1)
    perm = np.eye(4)[[2, 0, 3, 1]][None]
    caps = sp.channel_capacity(np.concatenate([spam, perm, np.eye(4)[None]]))
    np.testing.assert_allclose(caps, [0, 0, 0, 2, 2], atol=1e-9)


def test_capacity_stays_within_its_bounds_on_random_channels():
    rng = np.random.default_rng(1)
    conf = rng.dirichlet(np.ones(3) * 0.7, size=(40, 3))
    caps = sp.channel_capacity(conf)
    # I(uniform input) <= C <= log2 K
    q = conf.mean(axis=1)
    mi = np.sum(conf / 3 * np.log2(np.where(conf > 0, conf, 1) / q[:, None, :]), axis=(1, 2))
    assert np.all(caps >= mi - 1e-9) and np.all(caps <= math.log2(3) + 1e-12)


# -------------------------------------------------------------------------------------------- Raykar & Yu


def test_raykar_yu_score_binary_is_alpha_plus_beta_minus_one_squared():
    alpha, beta = np.array([0.9, 0.5, 0.2, 1.0, 0.7]), np.array([0.8, 0.5, 0.3, 1.0, 0.3])
    conf = np.stack([np.array([[b, 1 - b], [1 - a, a]]) for a, b in zip(alpha, beta)])  # [true, observed]
    np.testing.assert_allclose(sp.raykar_yu_score(conf), (alpha + beta - 1) ** 2, atol=1e-14)


def test_raykar_yu_score_matches_the_double_sum():
    rng = np.random.default_rng(2)
    conf = rng.dirichlet(np.ones(5), size=(7, 5))
    ref = [sum(np.sum((a[c] - a[d]) ** 2) for c in range(5) for d in range(c + 1, 5)) / 20 for a in conf]
    np.testing.assert_allclose(sp.raykar_yu_score(conf), ref, atol=1e-12)
    spam = np.repeat(conf[:, :1, :], 5, axis=1)
    np.testing.assert_allclose(sp.raykar_yu_score(spam), 0, atol=1e-15)
    assert sp.raykar_yu_score(np.eye(5)[[1, 2, 3, 4, 0]][None])[0] == pytest.approx(1.0)


@pytest.mark.parametrize("bad, words", [
    (np.array([[[0.5, np.nan], [0.5, 0.5]]]), "NaN"),
    (np.array([[[1.2, -0.2], [0.5, 0.5]]]), "negative"),
    (np.array([[[0.5, 0.4], [0.5, 0.5]]]), "sums to 0.9"),
    (np.ones((2, 2)), "shape"),
])
def test_malformed_confusions_are_refused(bad, words):
    for fn in (sp.channel_capacity, sp.raykar_yu_score):
        with pytest.raises(DataError, match=words):
            fn(bad)


# ------------------------------------------------------------------------------------------ the pieces


def test_two_means_is_the_exact_1d_split():
    rng = np.random.default_rng(3)
    for _ in range(30):
        x = np.sort(rng.random(rng.integers(2, 12)) ** 2)
        sse = [np.var(x[:i]) * i + np.var(x[i:]) * (len(x) - i) for i in range(1, len(x))]
        assert sp.two_means(x) == int(np.argmin(sse)) + 1
    assert sp.two_means(np.array([0.3, 0.3, 0.3])) == 0
    assert sp.two_means(np.array([0.0, 0.0, 1.0])) == 2


def test_apply_filled_equals_the_dense_filled_matrix_product():
    rng = np.random.default_rng(4)
    m, k, rank, width = 6, 3, 2, 4
    pairs = np.array([[0, 1], [0, 3], [1, 2], [2, 5], [3, 4]], dtype=np.int64)
    cov = rng.standard_normal((len(pairs), k, k))
    v = rng.standard_normal((m, k, rank))
    q = rng.standard_normal((m, k, width))
    vf = v.reshape(m * k, rank)
    dense = vf @ vf.T
    for p, (a, b) in enumerate(pairs):
        dense[a * k:(a + 1) * k, b * k:(b + 1) * k] = cov[p]
        dense[b * k:(b + 1) * k, a * k:(a + 1) * k] = cov[p].T
    out = vf @ (vf.T @ q.reshape(m * k, width))
    apply_filled(pairs, cov, v, q, out.reshape(m, k, width))
    np.testing.assert_allclose(out, dense @ q.reshape(m * k, width), atol=1e-12)


def test_fit_recovers_an_exact_low_rank_matrix_with_unknown_diagonal_and_missing_blocks():
    rng = np.random.default_rng(5)
    m, k, rank = 10, 3, 2
    v_true = rng.standard_normal((m, k, rank)) * 0.5
    pairs = np.array([(a, b) for a in range(m) for b in range(a + 1, m) if (a + b) % 4], dtype=np.int64)  # some missing
    cov = np.einsum("pkr,plr->pkl", v_true[pairs[:, 0]], v_true[pairs[:, 1]])
    fit = sp.fit_low_rank(pairs, cov, m, rank, np.random.default_rng(0), tol=1e-12, max_iter=5000)
    assert fit.converged
    got = fit.v.reshape(m * k, rank)
    want = v_true.reshape(m * k, rank)
    np.testing.assert_allclose(got @ got.T, want @ want.T, atol=1e-6)  # the diagonal blocks too


@pytest.fixture(scope="module")
def tutorial_crowds():
    """The tutorial's setting (N = 10,000, K = 4, M = 20) at α = 0, 0.1 and 0.3, and their scans."""
    out = {}
    for alpha, seed in ((0.0, 0), (0.1, 1), (0.3, 0), (0.5, 2)):
        crowd = simulate(scenario="tutorial-spammers", spammers=alpha, seed=seed)
        data = crowd.to_annotations()
        assert list(data.worker_names) == [f"w{i}" for i in range(20)]
        out[alpha] = (crowd, data, sp.detect_spammers(data, seed=0))
    return out


def _fit_of(data, min_partners=5, min_shared=10):
    engine = LocalEngine(data)
    stats = cooc.co_occurrence(engine)
    judged, kept = sp.judged_workers(stats.pairs.astype(np.int64), stats.n_tasks, data.n_workers, min_partners,
                                     min_shared)
    position = np.full(data.n_workers, -1, dtype=np.int64)
    position[judged] = np.arange(judged.sum())
    pairs = stats.pairs[kept].astype(np.int64)
    cov = sp.cross_covariances(stats.joint[kept], stats.n_tasks[kept])
    fit = sp.fit_low_rank(position[pairs], cov, int(judged.sum()), data.n_classes - 1, np.random.default_rng(0),
                          tol=1e-12, max_iter=5000)
    return engine, stats, kept, position, pairs, cov, fit


def test_cross_covariances_are_the_sample_covariances_over_the_shared_tasks():
    data = AnnotationSet.from_codes([0, 0, 1, 1, 2, 2, 3, 3, 3], [0, 1, 0, 1, 0, 1, 0, 1, 2],
                                    [0, 1, 1, 1, 0, 0, 1, 0, 1])
    stats = cooc.co_occurrence(LocalEngine(data))
    cov = sp.cross_covariances(stats.joint, stats.n_tasks)
    x = np.eye(2)[[0, 1, 0, 1]]  # worker 0 on tasks 0..3
    y = np.eye(2)[[1, 1, 0, 0]]  # worker 1
    want = (x - x.mean(0)).T @ (y - y.mean(0)) / 4
    np.testing.assert_allclose(cov[0], want, atol=1e-15)


def test_answer_terms_rebuild_each_workers_row_block_exactly(tutorial_crowds):
    _, data, _ = tutorial_crowds[0.3]
    engine, stats, kept, position, pairs, cov, fit = _fit_of(data)
    m, k, rank = fit.v.shape
    a, b = position[pairs[:, 0]], position[pairs[:, 1]]
    direct = np.zeros((m, k, rank))
    np.add.at(direct, a, np.einsum("pkl,plr->pkr", cov, fit.u[b]))
    np.add.at(direct, b, np.einsum("plk,plr->pkr", cov, fit.u[a]))
    n = stats.n_tasks[kept].astype(float)[:, None, None]
    terms = np.empty((len(pairs), 2, k + 1, rank))
    terms[:, 0, :k], terms[:, 1, :k] = fit.u[b] / n, fit.u[a] / n
    terms[:, 0, k] = np.einsum("pk,pkr->pr", stats.joint[kept].sum(1) / n[:, :, 0], fit.u[b]) / n[:, :, 0]
    terms[:, 1, k] = np.einsum("pk,pkr->pr", stats.joint[kept].sum(2) / n[:, :, 0], fit.u[a]) / n[:, :, 0]
    keys = pairs[:, 0] * data.n_workers + pairs[:, 1]
    ranked, table = cooc.key_lookup(keys, data.n_workers ** 2)
    _, outs = engine.map_reduce(answer_terms_block, TermParams(keys, ranked, table, terms), keep=True)
    g = engine.gather(outs)
    rebuilt = np.zeros((m, k, rank))
    np.add.at(rebuilt, (position[data.worker], data.label.astype(np.int64)), g)
    np.testing.assert_allclose(rebuilt, direct, atol=1e-12)
    # the fixed point: V_m = B_m T_m
    t = sp.fixed_point_maps(fit, position[pairs])
    np.testing.assert_allclose(np.einsum("mkr,mrs->mks", direct, t), fit.v, atol=1e-8)


def test_permutation_noise_closed_form_equals_the_mean_over_every_permutation():
    rng = np.random.default_rng(6)
    k, rank, n = 3, 2, 7
    labels = np.array([0, 0, 1, 2, 2, 2, 1])
    g = rng.standard_normal((n, rank))
    g -= g.mean(axis=0)  # a worker's terms sum to 0
    t = rng.standard_normal((1, rank, rank))
    h = g @ t[0]
    total = 0.0
    perms = list(itertools.permutations(range(n)))
    for perm in perms:
        block = np.zeros((k, rank))
        np.add.at(block, labels[list(perm)], h)
        total += np.sum(block ** 2)
    energy = null_energy(np.zeros(n, dtype=np.int32), np.zeros(1, dtype=np.int64), g, t, np.empty(1))
    counts = np.bincount(labels, minlength=k).astype(float)
    same = counts @ (counts - 1) / (n * (n - 1))
    assert (1 - same) * energy[0] == pytest.approx(total / len(perms), rel=1e-12)


# ------------------------------------------------------------------------------------------- acceptance


def _truth_kinds(crowd, data):
    return np.asarray(crowd.worker_kind)[[int(name[1:]) for name in data.worker_names]] == "spammer"


def test_no_spammer_in_an_honest_crowd(tutorial_crowds):
    _, _, scan = tutorial_crowds[0.0]
    assert not scan.flagged.any() and not scan.skipped.any()
    assert "0 score within 3x their permutation noise" in scan.why
    assert np.all(scan.score > 10 * scan.noise)


@pytest.mark.parametrize("alpha", [0.1, 0.3, 0.5])
def test_tutorial_spammers_are_found_and_honest_workers_kept(tutorial_crowds, alpha):
    crowd, data, scan = tutorial_crowds[alpha]
    spam = _truth_kinds(crowd, data)
    assert spam.sum() == round(20 * alpha)
    assert np.array_equal(scan.flagged, spam)
    assert scan.rank == 3 and scan.n_iter >= 1
    assert np.all(scan.score[spam] < 3 * scan.noise[spam])


def _real(datasets_dir, name):
    from crowdagg import load_annotations
    from crowdagg.io.read import read_task_labels

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        data = load_annotations(datasets_dir / name / "labels.csv")
    truth = read_task_labels(datasets_dir / name / "truth.csv")
    true = np.array([data.class_index(truth[t]) if t in truth else -1 for t in data.task_names])[data.task]
    answers = np.bincount(data.worker, minlength=data.n_workers)
    right = np.bincount(data.worker, weights=(true == data.label), minlength=data.n_workers)
    return data, answers, right / answers


def test_temp_extreme_spammers_are_flagged(datasets_dir):
    data, answers, acc = _real(datasets_dir, "temp")
    scan = sp.detect_spammers(data)
    heavy = np.argsort(-answers, kind="stable")[:3]
    assert sorted(answers[heavy].tolist()) == [442, 452, 462]
    np.testing.assert_allclose(sorted(acc[heavy]), [0.44, 0.44, 0.50], atol=0.006)
    assert scan.flagged[heavy].all()
    assert not scan.flagged[acc > 0.9].any() or answers[scan.flagged & (acc > 0.9)].max() <= 20


def test_rte_extreme_spammers_near_chance_are_flagged(datasets_dir):
    data, answers, acc = _real(datasets_dir, "rte")
    scan = sp.detect_spammers(data)
    heavy = np.argsort(-answers, kind="stable")[:4]
    assert sorted(answers[heavy].tolist()) == [540, 700, 760, 800]
    chance = heavy[np.abs(acc[heavy] - 0.5) < 0.02]  # 540, 760 and 800 answers at .50/.49/.50
    assert len(chance) == 3 and scan.flagged[chance].all()
    # the fourth (700 answers at .58) has a covariance signal several times its permutation noise
    fourth = heavy[answers[heavy] == 700][0]
    assert scan.score[fourth] > 3 * scan.noise[fourth]


# ----------------------------------------------------------------------------------- guard rails and input


def test_workers_with_few_partners_are_skipped_and_counted():
    # 30 dense workers on 200 tasks, and 5 workers who each share only 3 tasks with the crowd
    crowd = simulate(n_tasks=200, n_workers=30, per_task=30, n_classes=3, seed=3)
    task = [crowd.task]
    worker = [crowd.worker]
    label = [crowd.label]
    for j in range(5):
        task.append(np.arange(3) + 3 * j)
        worker.append(np.full(3, 30 + j))
        label.append(np.zeros(3, dtype=crowd.label.dtype))
    data = AnnotationSet.from_codes(np.concatenate(task), np.concatenate(worker), np.concatenate(label),
                                    n_workers=35)
    with pytest.warns(CrowdaggWarning, match="skipped 5 of 35 workers"):
        scan = sp.detect_spammers(data)
    assert scan.skipped.tolist() == [False] * 30 + [True] * 5
    assert np.isnan(scan.score[30:]).all() and np.isfinite(scan.score[:30]).all()
    assert not scan.flagged[scan.skipped].any()


def test_judged_workers_is_a_fixed_point():
    # worker 3 has 2 good partners, one of which (4) has only it and worker 0: dropping 4 drops 3 below 2
    pairs = np.array([[0, 1], [0, 2], [1, 2], [0, 3], [3, 4], [0, 4]])
    n = np.array([20, 20, 20, 20, 20, 5])
    judged, kept = sp.judged_workers(pairs, n, 5, 2, 10)
    assert judged.tolist() == [True, True, True, False, False]
    assert kept.tolist() == [True, True, True, False, False, False]


def test_same_seed_same_bits_any_thread_count(tutorial_crowds):
    _, data, _ = tutorial_crowds[0.3]
    with use_threads(1):
        one = sp.detect_spammers(data, seed=7)
    with use_threads(2):
        two = sp.detect_spammers(data, seed=7)
    for name in ("score", "noise"):
        assert np.array_equal(getattr(one, name), getattr(two, name), equal_nan=True)
    assert np.array_equal(one.flagged, two.flagged) and one.why == two.why and one.n_iter == two.n_iter


def test_one_class_one_worker_and_no_shared_tasks_give_a_clear_result():
    one_class = AnnotationSet.from_codes([0, 0, 1, 1], [0, 1, 0, 1], [0, 0, 0, 0])
    with pytest.warns(CrowdaggWarning, match="skipped 2 of 2"):
        scan = sp.detect_spammers(one_class)
    assert "one class" in scan.why and not scan.flagged.any() and scan.skipped.all() and scan.rank == 0
    lone = AnnotationSet.from_codes(np.arange(30), np.zeros(30, dtype=int), np.arange(30) % 2)
    with pytest.warns(CrowdaggWarning, match="skipped 1 of 1"):
        scan = sp.detect_spammers(lone)
    assert "nobody judged" in scan.why and scan.flagged.dtype == bool and not scan.flagged.any()
    apart = AnnotationSet.from_codes(np.arange(40), np.arange(40) % 4, np.arange(40) % 3 % 2)
    with pytest.warns(CrowdaggWarning, match="skipped 4 of 4"):
        scan = sp.detect_spammers(apart)
    assert np.isnan(scan.score).all() and not scan.flagged.any()


def test_bad_arguments_and_memory_are_refused_up_front(tutorial_crowds):
    _, data, _ = tutorial_crowds[0.1]
    with pytest.raises(UsageError, match="min_partners"):
        sp.detect_spammers(data, min_partners=0)
    with pytest.raises(UsageError, match="min_shared"):
        sp.detect_spammers(data, min_shared=2.5)
    with pytest.raises(UsageError, match="AnnotationSet"):
        sp.detect_spammers("labels.csv")
    with pytest.raises(ResourceError, match="max_memory"):
        sp.detect_spammers(data, max_memory=10_000)


def test_the_fit_shares_its_pairs_among_threads_with_the_same_bits():
    rng = np.random.default_rng(8)
    m, k, rank = 200, 3, 2
    v_true = rng.standard_normal((m, k, rank)) * 0.3
    pairs = np.array([(a, b) for a in range(m) for b in range(a + 1, m)], dtype=np.int64)  # 19,900: 4 chunks
    cov = np.einsum("pkr,plr->pkl", v_true[pairs[:, 0]], v_true[pairs[:, 1]])
    cov += rng.standard_normal(cov.shape) * 0.01
    fits = []
    for n in (1, 2, 3):
        with use_threads(n):
            fits.append(sp.fit_low_rank(pairs, cov, m, rank, np.random.default_rng(0), max_iter=40))
    for other in fits[1:]:
        assert np.array_equal(fits[0].v, other.v) and np.array_equal(fits[0].u, other.u)
        assert fits[0].n_iter == other.n_iter


# ----------------------------------------------------------------------------------- the fit's cost on many classes
def test_many_classes_skip_the_fit_over_its_cost_saying_so_and_run_it_when_asked():
    """12 classes: the fit's bound is pairs × K³; over max_cost nothing is fitted and nobody judged (no warning of
    partners: every worker had enough), at max_cost=None it runs."""
    crowd = simulate(n_tasks=400, n_workers=8, per_task=8, n_classes=12, seed=1).to_annotations()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no skipped-partners warning when the fit is skipped for its cost
        scan = sp.detect_spammers(crowd, max_cost=1e5)
    assert scan.over_budget and scan.skipped.all() and not scan.flagged.any() and scan.n_iter == 0
    assert scan.cost == sp.fit_cost(28, 8, 12) == 300 * (2 * 28 * 144 * 13 + 4 * 8 * 144 * 13)
    assert "not run" in scan.why and "8 workers × 12 classes over 28 co-labelled pairs" in scan.why
    steps = []
    run = sp.detect_spammers(crowd, max_cost=None, callback=lambda it, change: steps.append((it, change)))
    assert not run.over_budget and not run.skipped.any() and run.cost == scan.cost
    assert [it for it, _ in steps] == list(range(1, run.n_iter + 1)) and steps[-1][1] <= sp.FIT_TOL
    # the default budget runs it (28 pairs is cheap)
    assert not sp.detect_spammers(crowd).over_budget
    with pytest.raises(UsageError, match="max_cost"):
        sp.detect_spammers(crowd, max_cost=-1)
