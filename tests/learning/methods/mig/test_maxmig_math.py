"""Max-MIG's mathematics against hand-computed values: the KL f-MIG of a batch, the aggregator, its start,
the forecaster (crowdagg.learning.methods.mig.maxmig)."""

from __future__ import annotations

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from crowdagg.data.annotations import AnnotationSet  # noqa: E402
from crowdagg.learning.methods.mig.maxmig import (  # noqa: E402
    COPY_MIN_SHARED,
    INIT_FLOOR,
    CrowdsAggregator,
    agreement,
    agreement_votes,
    agreement_weights,
    centred_votes,
    consistency_temperature,
    duplicate_weights,
    forecaster,
    initial_weights,
    mig_kl,
    mig_kl_loss,
)

#: The 3-item batch worked by hand below: the classifier's and the aggregator's outputs (K = 2).
H = [[0.8, 0.2], [0.4, 0.6], [0.5, 0.5]]
G = [[0.9, 0.1], [0.2, 0.8], [0.5, 0.5]]


def t(rows) -> torch.Tensor:
    return torch.tensor(rows, dtype=torch.float64)


def test_mig_kl_of_a_three_item_batch_uniform_prior():
    # p = (.5, .5): m_ij = 2 (h_i0 g_j0 + h_i1 g_j1)
    #   m_11 = 2 (.72 + .02) = 1.48   m_22 = 2 (.08 + .48) = 1.12   m_33 = 2 (.25 + .25) = 1
    #   m_12 = 2 (.16 + .16) = .64    m_13 = 2 (.4 + .1) = 1        m_21 = 2 (.36 + .06) = .84
    #   m_23 = 2 (.2 + .3) = 1        m_31 = 2 (.45 + .05) = 1      m_32 = 2 (.1 + .4) = 1
    # MIG = (1/3)(3 + ln 1.48 + ln 1.12 + ln 1) - (.64 + 1 + .84 + 1 + 1 + 1) / (3 · 2)
    #     = 1 + (.392042 + .113329) / 3 - 5.48 / 6 = 1.168457 - .913333 = .255124
    got = mig_kl(t(H), t(G), t([0.5, 0.5]))
    assert float(got) == pytest.approx(0.255124, abs=1e-6)
    assert float(mig_kl_loss(t(H), t(G), t([0.5, 0.5]))) == pytest.approx(-0.255124, abs=1e-6)
    diag, off = agreement(t(H), t(G), t([0.5, 0.5]))
    np.testing.assert_allclose(diag.numpy(), [1.48, 1.12, 1.0])
    assert float(off) == pytest.approx(5.48)


def test_mig_kl_of_a_three_item_batch_skewed_prior():
    # p = (.75, .25): m_ij = (4/3) h_i0 g_j0 + 4 h_i1 g_j1
    #   m_11 = .96 + .08 = 1.04   m_22 = .106667 + 1.92 = 2.026667   m_33 = .333333 + 1 = 1.333333
    #   m_12 = .213333 + .64 = .853333   m_13 = .533333 + .4 = .933333   m_21 = .48 + .24 = .72
    #   m_23 = .266667 + 1.2 = 1.466667  m_31 = .6 + .2 = .8             m_32 = .133333 + 1.6 = 1.733333
    # MIG = 1 + (ln 1.04 + ln 2.026667 + ln 1.333333) / 3 - 6.506667 / 6
    #     = 1 + (.039221 + .706392 + .287682) / 3 - 1.084444 = .259987
    assert float(mig_kl(t(H), t(G), t([0.75, 0.25]))) == pytest.approx(0.259987, abs=1e-6)


def test_off_diagonal_sum_is_the_matrix_one():
    rng = np.random.default_rng(0)
    h, g = (torch.softmax(t(rng.standard_normal((7, 4))), dim=1) for _ in range(2))
    p = torch.softmax(t(rng.standard_normal(4)), dim=0)
    m = (h / p) @ g.T  # the reference code's B × B matrix
    diag, off = agreement(h, g, p)
    np.testing.assert_allclose(diag.numpy(), np.diag(m.numpy()))
    assert float(off) == pytest.approx(float(m.sum() - m.diagonal().sum()))
    expected = (1 + torch.log(m.diagonal())).mean() - (m.sum() - m.diagonal().sum()) / (7 * 6)
    assert float(mig_kl(h, g, p)) == pytest.approx(float(expected))


def test_disagreeing_views_cost_a_floored_log_not_infinity():
    h, g = t([[1.0, 0.0], [0.0, 1.0]]), t([[0.0, 1.0], [1.0, 0.0]])
    got = mig_kl(h, g, t([0.5, 0.5]))
    # m_11 = m_22 = 0 floored at 1e-10; m_12 = m_21 = 2: MIG = 1 + ln 1e-10 - 4 / 2
    assert math.isfinite(float(got))
    assert float(got) == pytest.approx(1 + math.log(1e-10) - 2.0)


def test_aggregator_sums_the_answers_columns_and_the_log_prior():
    # W^0 = [[ln .9, 0], [ln .1, 0]]: answer 0 scores (ln .9, ln .1), answer 1 nothing; W^1's answer 1: (ln .2, ln .8)
    w = np.zeros((2, 2, 2))
    w[0, :, 0] = np.log([0.9, 0.1])
    w[1, :, 1] = np.log([0.2, 0.8])
    agg = CrowdsAggregator(w, learn_prior=False)
    # row 0: worker 0 answers 0; row 1: worker 0 answers 1, worker 1 answers 1; row 2: no answer
    row, worker, label = (torch.tensor(a) for a in ([0, 1, 1], [0, 0, 1], [0, 1, 1]))
    logits = agg.answer_logits(row, worker, label, 3)
    np.testing.assert_allclose(logits.detach().numpy(), np.log([[0.9, 0.1], [0.2, 0.8], [1, 1]]), rtol=1e-6)
    np.testing.assert_allclose(agg(row, worker, label, 3).detach().numpy(), G, rtol=1e-6)  # + log(.5, .5)
    np.testing.assert_allclose(agg.prior().numpy(), [0.5, 0.5])
    assert not agg.phi.requires_grad  # fixed: not trained


def test_learned_prior_is_a_softmax_and_enters_the_bias():
    agg = CrowdsAggregator(np.zeros((1, 3, 3)), learn_prior=True)
    assert agg.phi.requires_grad
    with torch.no_grad():
        agg.phi.copy_(torch.log(torch.tensor([0.5, 0.3, 0.2])))
    none = torch.zeros(0, dtype=torch.long)
    np.testing.assert_allclose(agg(none, none, none, 1).detach().numpy(), [[0.5, 0.3, 0.2]], rtol=1e-6)


def test_initial_weights_are_the_log_counts_against_the_soft_vote():
    # task 0: both workers answer 0 -> Q = (1, 0); task 1: worker 0 answers 1, worker 1 answers 0 -> Q = (.5, .5)
    data = AnnotationSet.from_codes([0, 0, 1, 1], [0, 1, 0, 1], [0, 0, 1, 0], n_classes=2, n_workers=3)
    got = initial_weights(data, "votes")
    # worker 0: true 0 -> answer 0 w. 1 (task 0), answer 1 w. .5 (task 1): (2/3, 1/3); true 1 -> answer 1 w. .5: (0, 1)
    np.testing.assert_allclose(got[0], np.log(np.array([[2 / 3, 1 / 3], [0, 1]]) + INIT_FLOOR))
    # worker 1: answers 0 on both: true 0 (1.5, 0) -> (1, 0); true 1 (.5, 0) -> (1, 0)
    np.testing.assert_allclose(got[1], np.log(np.array([[1, 0], [1, 0]]) + INIT_FLOOR))
    # worker 2 answered nothing: uniform rows
    np.testing.assert_allclose(got[2], np.log(np.full((2, 2), 0.5) + INIT_FLOOR))


def test_centred_votes_leave_out_an_annotator_who_always_answers_one_class():
    # worker 0 answers (0, 1, 1), worker 1 (constant) answers 0 everywhere; shares π_0 = (1/3, 2/3), π_1 = (1, 0)
    data = AnnotationSet.from_codes([0, 0, 1, 1, 2, 2], [0, 1, 0, 1, 0, 1], [0, 0, 1, 0, 1, 0], n_classes=2)
    got = centred_votes(data)
    # task 0: (1, 0) - π_0 + (1, 0) - π_1 = (2/3, -2/3) + (0, 0) -> (1, 0)
    # tasks 1, 2: (0, 1) - π_0 + (1, 0) - π_1 = (-1/3, 1/3) + (0, 0) -> (0, 1); the plain vote says (.5, .5)
    np.testing.assert_allclose(got, [[1, 0], [0, 1], [0, 1]])
    # a task whose centred votes are all <= 0 keeps its plain vote shares: worker 1 alone on task 3
    data = AnnotationSet.from_codes([0, 0, 1, 1, 2], [0, 1, 0, 1, 1], [0, 0, 1, 0, 0], n_classes=2)
    np.testing.assert_allclose(centred_votes(data)[2], [1, 0])
    # the start reads them: worker 0's counts are against (1, 0), (0, 1), (0, 1) -> the identity
    np.testing.assert_allclose(initial_weights(data, "centred")[0], np.log(np.eye(2) + INIT_FLOOR))


def test_agreement_weights_by_hand_a_constant_annotator_gets_none():
    # worker 0 answers (0, 0, 1, 1), worker 1 (0, 0, 1, 0), worker 2 answers 0 everywhere
    data = AnnotationSet.from_codes(np.repeat(np.arange(4), 3), np.tile(np.arange(3), 4),
                                    [0, 0, 0, 0, 0, 0, 1, 1, 0, 1, 0, 0], n_classes=2)
    # worker 2 agrees with anyone exactly as chance says: κ = 0 from the first round on; then workers 0 and 1
    # see only each other: p_o = 3/4, p_e = (1/2)(3/4) + (1/2)(1/4) = 1/2, κ = (3/4 - 1/2) / (1/2) = 1/2
    np.testing.assert_allclose(agreement_weights(data, np.arange(3)), [0.5, 0.5, 0.0], atol=1e-12)
    # the vote without worker 2: task 3 is a tie (the plain vote: 2/3 for class 0)
    np.testing.assert_allclose(agreement_votes(data), [[1, 0], [1, 0], [0, 1], [0.5, 0.5]])


def test_agreement_weight_of_two_annotators_is_cohens_kappa():
    sklearn_metrics = pytest.importorskip("sklearn.metrics")
    rng = np.random.default_rng(3)
    truth = rng.integers(0, 4, 200)
    a = np.where(rng.random(200) < 0.8, truth, rng.integers(0, 4, 200))
    b = np.where(rng.random(200) < 0.6, truth, rng.integers(0, 4, 200))
    data = AnnotationSet.from_codes(np.tile(np.arange(200), 2), np.repeat([0, 1], 200), np.concatenate([a, b]),
                                    n_classes=4)
    kappa = sklearn_metrics.cohen_kappa_score(a, b)
    assert 0.2 < kappa < 0.8
    np.testing.assert_allclose(agreement_weights(data, np.arange(2)), [kappa, kappa], rtol=1e-9)


def test_agreement_votes_keep_a_rare_class_and_count_copies_once():
    rng = np.random.default_rng(0)
    n = 1000
    truth = (rng.random(n) < 0.05).astype(int)
    task, worker = np.repeat(np.arange(n), 3), np.tile(np.arange(3), n)
    label = np.where(rng.random(3 * n) < 0.9, truth[task], 1 - truth[task])
    data = AnnotationSet.from_codes(task, worker, label, n_classes=2)
    plain = np.bincount(task, weights=label, minlength=n) >= 2
    # three annotators of one skill: equal weights, the majority vote (the centred vote gives class 1 to every
    # task one annotator says it of)
    np.testing.assert_array_equal(agreement_votes(data).argmax(axis=1), plain)
    assert (centred_votes(data).argmax(axis=1) > plain).sum() > 100
    # a fourth and fifth annotator copying worker 0 leave the vote as it was: the group of copies votes once
    copy = label[worker == 0]
    more = AnnotationSet.from_codes(np.concatenate([task, np.arange(n), np.arange(n)]),
                                    np.concatenate([worker, np.full(n, 3), np.full(n, 4)]),
                                    np.concatenate([label, copy, copy]), n_classes=2)
    np.testing.assert_array_equal(agreement_votes(more).argmax(axis=1), plain)
    np.testing.assert_allclose(initial_weights(more, "agreement")[1], initial_weights(data, "agreement")[1],
                               atol=1e-12)


def test_forecaster_is_the_normalised_product_over_the_prior():
    h, g, p = t([[0.8, 0.2]]), t([[0.9, 0.1]]), t([0.75, 0.25])
    # h ⊙ g ⊘ p = (.72 / .75, .02 / .25) = (.96, .08), normalised: (.923077, .076923)
    answers = torch.log(g) - torch.log(p)  # g's logits less its bias log p
    np.testing.assert_allclose(forecaster(torch.log(h), answers).numpy(), [[0.96 / 1.04, 0.08 / 1.04]])


def test_consistency_temperature_recovers_the_scale_of_an_over_confident_aggregator():
    rng = np.random.default_rng(2)
    a = rng.normal(scale=6.0, size=(500, 4))  # g's answer logits, over-confident by a factor 4
    lp = np.log([0.4, 0.3, 0.2, 0.1])
    z = 0.25 * a + lp
    h = np.exp(z - z.max(axis=1, keepdims=True))
    h /= h.sum(axis=1, keepdims=True)
    assert consistency_temperature(h, a, lp) == pytest.approx(0.25, rel=1e-3)
    assert consistency_temperature(h[:0], a[:0], lp) == 1.0
    # the forecaster with it: log h + τ a, normalised
    got = forecaster(torch.log(t(h[:2])), t(a[:2]), 0.25).numpy()
    want = np.exp(np.log(h[:2]) + 0.25 * a[:2])
    np.testing.assert_allclose(got, want / want.sum(axis=1, keepdims=True), rtol=1e-12)


def test_copies_share_one_vote_and_near_copies_do_not():
    rng = np.random.default_rng(0)
    n = 40
    source = rng.integers(0, 3, size=n)
    near = source.copy()
    near[7] = (near[7] + 1) % 3  # differs on one task
    answers = {0: source, 1: source, 2: rng.integers(0, 3, size=n), 3: near, 4: source}
    task = np.concatenate([np.arange(n)] * 5)
    worker = np.repeat(np.arange(5), n)
    label = np.concatenate([answers[w] for w in range(5)])
    keep = np.ones(task.size, dtype=bool)
    keep[[3, 45, 170]] = False  # held-out gaps: copies need not have the same answer sets
    short = (worker == 4) & (task >= COPY_MIN_SHARED - 1)  # worker 4 shares only 19 tasks: too few to call a copy
    keep &= ~short
    data = AnnotationSet.from_codes(task[keep], worker[keep], label[keep], n_classes=3)
    # workers 0 and 1 agree on all 38 tasks both answered; 3 differs on one; 4 agrees with 0 on only 19
    np.testing.assert_array_equal(duplicate_weights(data), [0.5, 0.5, 1.0, 1.0, 1.0])


def dense_crowd(m: int, n: int, k: int = 2, copies: bool = False) -> AnnotationSet:
    """``m`` annotators answering every one of ``n`` tasks (all the same answers with ``copies``)."""
    rng = np.random.default_rng(0)
    task, worker = np.repeat(np.arange(n), m), np.tile(np.arange(m), n)
    label = np.repeat(rng.integers(0, k, n), m) if copies else rng.integers(0, k, n * m)
    return AnnotationSet.from_codes(task, worker, label, n_tasks=n, n_workers=m, n_classes=k)


def test_copy_search_on_a_dense_crowd_is_refused_up_front_with_its_size():
    from crowdagg.errors import ResourceError
    from crowdagg.learning.methods.mig.maxmig import COPY_BYTES_PER_PAIR, MaxMIG, copy_pairs

    data = dense_crowd(300, 30)
    pairs, kept = copy_pairs(data)
    assert pairs == 300 * 300 and kept.all()  # min(Σ_n d_n² = 30 × 300², M² = 300²)
    need = COPY_BYTES_PER_PAIR * pairs  # 4.3 MB
    with pytest.raises(ResourceError, match="90,000 pairs of annotators"):
        duplicate_weights(data, max_memory=need // 2)
    with pytest.raises(ResourceError, match="90,000 pairs of annotators compared to find copies"):
        MaxMIG(model="linear", epochs=1, aggregator_init="centred").fit(data, np.zeros((30, 2), np.float32),
                                                                         max_memory=need // 2)
    # the plain vote's start compares no pairs: the same limit leaves room for it
    x = np.zeros((30, 2), np.float32)
    base, _ = MaxMIG(model="linear", aggregator_init="votes").memory_needed(data, x)
    with_pairs, _ = MaxMIG(model="linear", aggregator_init="centred").memory_needed(data, x)
    assert with_pairs == base + need
    # the agreement start (the default): the pairs and its rounds' per-answer arrays
    from crowdagg.learning.methods.mig.maxmig import AGREEMENT_BYTES_PER_ANSWER, AGREEMENT_BYTES_PER_CELL

    default, what = MaxMIG(model="linear").memory_needed(data, x)
    rounds = AGREEMENT_BYTES_PER_CELL * 30 * 300 * 2 + AGREEMENT_BYTES_PER_ANSWER * 30 * 300
    assert default == base + need + rounds and "90,000 pairs" in what
    np.testing.assert_array_equal(duplicate_weights(data, max_memory=need), np.ones(300))


def test_annotators_with_too_few_answers_to_be_copies_are_not_compared():
    from crowdagg.learning.methods.mig.maxmig import copy_pairs

    data = dense_crowd(50, COPY_MIN_SHARED - 1, copies=True)  # 19 tasks each: nobody can be a copy
    assert copy_pairs(data)[0] == 0
    np.testing.assert_array_equal(duplicate_weights(data, max_memory=1), np.ones(50))
    data = dense_crowd(50, COPY_MIN_SHARED, copies=True)  # 20 identical answers each: one group of 50
    np.testing.assert_array_equal(duplicate_weights(data), np.full(50, 1 / 50))


def test_mig_kl_refuses_one_task_and_unequal_shapes():
    from crowdagg.errors import UsageError

    p = t([0.5, 0.5])
    with pytest.raises(UsageError, match="B >= 2"):
        mig_kl(t([[0.5, 0.5]]), t([[0.5, 0.5]]), p)  # was nan: the cross-task mean over 0 pairs
    with pytest.raises(UsageError, match=r"\(3, 2\), \(2, 2\)"):
        mig_kl(t(H), t(G[:2]), p)  # was torch's RuntimeError
    with pytest.raises(UsageError, match=r"\(3,\)"):
        mig_kl(t(H), t(G), t([0.2, 0.3, 0.5]))


def test_memory_counts_the_aggregator_beyond_the_base():
    from crowdagg.learning.methods.mig.maxmig import AGGREGATOR_BYTES_PER_CELL, MaxMIG
    from crowdagg.methods.registry import get_trainer

    data = AnnotationSet.from_codes([0, 1, 2], [0, 1, 2], [0, 1, 2], n_tasks=3, n_workers=50, n_classes=3)
    x = np.zeros((3, 2), np.float32)
    ours, _ = MaxMIG(model="linear", aggregator_init="votes").memory_needed(data, x)
    base, _ = get_trainer("mv-then-train").load()(model="linear").memory_needed(data, x)
    assert ours == base + AGGREGATOR_BYTES_PER_CELL * 50 * 9


def test_answer_logits_by_chunks_are_the_whole_gather(monkeypatch):
    import crowdagg.learning.methods.mig.maxmig as mm

    rng = np.random.default_rng(0)
    agg = CrowdsAggregator(rng.normal(size=(6, 4, 4)), learn_prior=False)
    row, worker, label = (torch.as_tensor(rng.integers(0, hi, 50)) for hi in (9, 6, 4))
    whole = agg.answer_logits(row, worker, label, 9)
    expected = torch.zeros(9, 4).index_add(0, row, agg.weights[worker, :, label])
    np.testing.assert_allclose(whole.detach().numpy(), expected.detach().numpy(), atol=1e-6)
    monkeypatch.setattr(mm, "ANSWER_CHUNK", 7)  # 50 answers in 8 chunks: the forecaster's path on a large set
    chunked = agg.answer_logits(row, worker, label, 9)
    np.testing.assert_allclose(chunked.detach().numpy(), whole.detach().numpy(), atol=1e-6)
    chunked.sum().backward()  # still differentiable through every chunk
    assert agg.weights.grad is not None and agg.weights.grad.abs().sum() > 0


def test_initial_weights_refuse_an_unknown_start():
    from crowdagg.errors import UsageError

    data = AnnotationSet.from_codes([0, 1], [0, 0], [0, 1], n_classes=2)
    with pytest.raises(UsageError, match="'centered'"):
        initial_weights(data, "centered")  # was the plain vote's start, silently


def test_agreement_weight_of_two_annotators_on_partly_shared_tasks_is_cohens_kappa_on_the_shared_ones():
    """Annotator 0 also answered 100 tasks nobody else did: its chance agreement p_e is over the answers its
    p_o is over (the shared tasks), so the weight is Cohen's κ of the 100 shared tasks (its answer shares over
    all 200 gave .429 against .431 here; one answering a single class on the shared tasks got κ > 0)."""
    sklearn_metrics = pytest.importorskip("sklearn.metrics")
    rng = np.random.default_rng(0)
    truth = rng.integers(0, 3, 200)
    a = np.where(rng.random(200) < 0.7, truth, rng.integers(0, 3, 200))
    b = np.where(rng.random(200) < 0.8, truth, rng.integers(0, 3, 200))
    data = AnnotationSet.from_codes(np.concatenate([np.arange(200), np.arange(100)]),
                                    np.repeat([0, 1], [200, 100]), np.concatenate([a, b[:100]]), n_classes=3)
    kappa = sklearn_metrics.cohen_kappa_score(a[:100], b[:100])
    np.testing.assert_allclose(agreement_weights(data, np.arange(2)), [kappa, kappa], rtol=1e-9)
    # constant on the shared tasks, other classes alone: no better than chance where it can be compared
    a0 = np.concatenate([np.zeros(100, dtype=np.int64), rng.integers(1, 3, 100)])
    data = AnnotationSet.from_codes(np.concatenate([np.arange(200), np.arange(100)]),
                                    np.repeat([0, 1], [200, 100]), np.concatenate([a0, b[:100]]), n_classes=3)
    assert agreement_weights(data, np.arange(2))[0] == 0.0


@pytest.mark.parametrize("k", [2, 8])
def test_the_agreement_rounds_stay_within_the_memory_they_declare(k):
    """tracemalloc's peak of agreement_weights against what memory_needed adds for it: it was declared as 24
    bytes per answer and class, and took 34 per cell plus ~60 per answer (the int64 codes, the (task, group)
    cells' sort, the seen answers' gathers): 65 per cell at K = 2, so --max-memory let through a start it
    could not afford."""
    import tracemalloc

    from crowdagg.learning.methods.mig.maxmig import AGREEMENT_BYTES_PER_ANSWER, AGREEMENT_BYTES_PER_CELL

    rng = np.random.default_rng(0)
    n, per, m = 20_000, 3, 200
    task = np.repeat(np.arange(n), per)
    worker = np.concatenate([rng.choice(m, per, replace=False) for _ in range(n)])
    data = AnnotationSet.from_codes(task, worker, rng.integers(0, k, n * per), n_tasks=n, n_workers=m, n_classes=k)
    group = np.arange(m)
    tracemalloc.start()
    try:
        agreement_weights(data, group)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    declared = AGREEMENT_BYTES_PER_CELL * data.n_answers * k + AGREEMENT_BYTES_PER_ANSWER * data.n_answers
    assert peak <= declared
