"""What to relabel next (:mod:`crowdagg.reports.relabel`): the expected information gain against hand-worked values
and a slow reference, the worker pool, the order and its ties, and a crowd whose most uncertain task is known."""

from __future__ import annotations

import numpy as np
import pytest

from crowdagg.data.annotations import AnnotationSet
from crowdagg.errors import UsageError
from crowdagg.kernels.relabel import information_gain
from crowdagg.methods.api import aggregate
from crowdagg.reports.relabel import relabel_plan, worker_pool


def entropy_bits(p: np.ndarray) -> float:
    p = p[p > 0]
    return float(-(p * np.log2(p)).sum())


def slow_gain(q: np.ndarray, confusion: np.ndarray) -> float:
    """H(q) - E_l[H(q | l)] by Bayes' rule for each answer l: the definition, one worker."""
    pred = q @ confusion
    after = 0.0
    for col in range(len(pred)):
        if pred[col] > 0:
            after += pred[col] * entropy_bits(q * confusion[:, col] / pred[col])
    return entropy_bits(q) - after


@pytest.mark.quick
def test_information_gain_of_a_hand_worked_two_class_task():
    # q = (.9, .1), a worker right 80% on class 0 and 70% on class 1: the answer is 0 with p = .75, 1 with .25;
    # after a 0 the posterior is (.96, .04), after a 1 (.72, .28); H(q) = .468996 bits,
    # E[H] = .75 H(.96) + .25 H(.72) = .75 (.242292) + .25 (.855451) = .395582; the gain .073414.
    q = np.array([[0.9, 0.1]])
    conf = np.array([[[0.8, 0.2], [0.3, 0.7]]])
    assert information_gain(q, conf, np.array([1.0]))[0] == pytest.approx(0.073414, abs=1e-6)
    # a coin at .8 on a task at .5/.5: 1 - H(.8) = 1 - .721928 bits; a settled task gains nothing
    coin = np.array([[[0.8, 0.2], [0.2, 0.8]]])
    gains = information_gain(np.array([[0.5, 0.5], [1.0, 0.0]]), coin, np.array([1.0]))
    np.testing.assert_allclose(gains, [1 - 0.7219280948873623, 0.0], atol=1e-12)
    # two workers weighted .25/.75: the weighted mean of their gains
    both = information_gain(q, np.concatenate([conf, coin]), np.array([0.25, 0.75]))[0]
    assert both == pytest.approx(0.25 * slow_gain(q[0], conf[0]) + 0.75 * slow_gain(q[0], coin[0]), abs=1e-12)


def test_information_gain_matches_bayes_rule_on_random_workers(rng):
    k, s = 4, 6
    q = rng.dirichlet(np.full(k, 0.7), size=30)
    q[0] = [1.0, 0.0, 0.0, 0.0]  # a settled task: 0
    conf = rng.dirichlet(np.ones(k), size=(s, k))
    conf[0, 1] = [0.0, 1.0, 0.0, 0.0]  # zeros in a row are allowed
    w = rng.dirichlet(np.ones(s))
    got = information_gain(q, conf, w)
    want = [sum(w[j] * slow_gain(q[i], conf[j]) for j in range(s)) for i in range(len(q))]
    np.testing.assert_allclose(got, want, atol=1e-12)
    assert got[0] < 1e-14 and (got >= 0).all()  # a settled task: 0 up to rounding (the report rounds it to 0)
    assert (got <= np.array([entropy_bits(r) for r in q]) + 1e-12).all()  # never more than the task's entropy


def known_crowd(tie_first: bool = True) -> AnnotationSet:
    """30 tasks answered by 4 good workers (each wrong once), one task 'tie' that w1 and w2 split, and one task
    'single' answered by w3 alone: 'tie' is the most uncertain, 'single' the next."""
    rows = []
    for n in range(30):
        truth = "ab"[n % 2]
        for w in range(4):
            wrong = n == 7 * w + 3
            rows.append((f"t{n:02d}", f"w{w + 1}", ("ab".replace(truth, "") if wrong else truth)))
    extra = [("tie", "w1", "a"), ("tie", "w2", "b"), ("single", "w3", "a")]
    rows = extra + rows if tie_first else rows + extra
    task, worker, label = zip(*rows)
    return AnnotationSet.from_names(task, worker, label)


@pytest.mark.parametrize("method", ["ds", "mv", "onecoin", "glad"])
def test_the_task_two_good_workers_split_ranks_first(method):
    data = known_crowd()
    result = aggregate(data, method)
    plan = relabel_plan(result)
    names = data.task_names[plan.order]
    assert names[0] == "tie"
    # mv gives one answer a vote share of 1 (settled, below the 3-to-1 tasks); glad makes the 3-to-1 tasks hard
    assert (names[1] == "single") == (method in ("ds", "onecoin"))
    assert plan.worker_model == ("one-coin" if method == "glad" else "confusion")
    assert plan.n_pool == plan.n_workers == 4
    table = plan.table(result, 2)
    assert table["task"][0] == "tie" and list(table["rank"]) == [1, 2] and table["n_answers"][0] == 2
    assert table["score"][0] > table["score"][1] > 0
    assert table["confidence"][0] == result.confidence[data.task_lookup()["tie"]]


def test_row_order_changes_nothing_and_equal_scores_go_by_name():
    a, b = (relabel_plan(aggregate(known_crowd(first), "ds")) for first in (True, False))
    names_a, names_b = (known_crowd(first).task_names for first in (True, False))
    assert list(names_a[a.order]) == list(names_b[b.order])
    by_a = dict(zip(names_a, a.score))
    assert all(by_a[n] == s for n, s in zip(names_b, b.score))
    # equal scores (the settled tasks of one pattern) come in name order
    ordered = names_a[a.order]
    scores = a.score[a.order]
    for i in range(len(scores) - 1):
        if scores[i] == scores[i + 1]:
            assert ordered[i] < ordered[i + 1]
    assert (np.diff(scores) <= 0).all()


def test_a_large_crowd_is_averaged_over_a_seeded_draw_by_answer_share():
    counts = np.array([0, 5, 1, 100, 3, 7, 50, 2, 2, 9], dtype=np.int64)
    names = np.array([f"w{i}" for i in range(10)], dtype=object)
    workers, weights = worker_pool(counts, names, n_sample=20)  # 9 active workers: all of them, exactly
    assert list(workers) == [1, 2, 3, 4, 5, 6, 7, 8, 9]
    np.testing.assert_allclose(weights, counts[1:] / counts.sum())
    w1, p1 = worker_pool(counts, names, n_sample=4, seed=3)
    w2, p2 = worker_pool(counts, names, n_sample=4, seed=3)
    assert list(w1) == list(w2) and list(p1) == list(p2)
    assert p1.sum() == pytest.approx(1.0) and len(w1) <= 4 and 0 not in w1
    assert np.all(np.isin(np.round(p1 * 4), [1, 2, 3, 4]))  # a drawn worker weighs its count of draws
    # the names' order decides the draw, not the workers' codes
    perm = np.array([0, 9, 8, 7, 6, 5, 4, 3, 2, 1])
    w3, p3 = worker_pool(counts[perm], names[perm], n_sample=4, seed=3)
    assert sorted(zip(names[perm][w3], p3)) == sorted(zip(names[w1], p1))


def test_a_drawn_pool_estimates_the_whole_crowds_gain(rng):
    from crowdagg.simulate import simulate

    crowd = simulate(300, 150, 3, 4, seed=1)
    result = aggregate(crowd.to_annotations(), "ds")
    exact = relabel_plan(result, n_sample=1000)
    drawn = relabel_plan(result, n_sample=60, seed=2)
    assert exact.n_pool == exact.n_workers and drawn.n_pool <= 60
    # an unbiased draw: the ranks agree closely (the scores' correlation) and the mean gain is close
    assert np.corrcoef(exact.score, drawn.score)[0, 1] > 0.9
    assert drawn.score.mean() == pytest.approx(exact.score.mean(), rel=0.15)


@pytest.mark.parametrize("bad", [0, -1, 2.5, True])
def test_n_sample_must_be_a_whole_number_at_least_one(bad):
    with pytest.raises(UsageError, match="n_sample must be a whole number >= 1"):
        relabel_plan(aggregate(known_crowd(), "mv"), n_sample=bad)


def test_the_pool_confusions_are_refused_up_front_over_the_memory_limit():
    from crowdagg.errors import ResourceError

    result = aggregate(known_crowd(), "ds")
    result.max_memory = 100  # bytes: 4 workers x 2 x 2 confusions need 128
    with pytest.raises(ResourceError, match=r"4 workers' confusions of 2² classes for --relabel.*draw fewer workers"):
        relabel_plan(result)
    result.max_memory = None
    assert relabel_plan(result).n_pool == 4


@pytest.mark.parametrize("posteriors, confusion, weights", [
    (np.full((3, 5), 0.2), np.full((1, 3, 3), 1 / 3), np.ones(1)),  # K of the posteriors beyond the confusion's
    (np.full((3, 2), 0.5), np.full((1, 3, 3), 1 / 3), np.ones(1)),
    (np.full((3, 3), 1 / 3), np.full((2, 3, 3), 1 / 3), np.ones(1)),  # fewer weights than workers
    (np.full(3, 1 / 3), np.full((2, 3, 3), 1 / 3), np.full(2, 0.5)),  # 1-D posteriors: numba's TypingError
    (np.full((3, 3), np.nan), np.full((1, 3, 3), 1 / 3), np.ones(1)),
    (np.full((3, 3), 1 / 3), np.full((1, 3, 3), -1.0), np.ones(1)),
    (np.full((3, 3), "a"), np.full((1, 3, 3), 1 / 3), np.ones(1)),
])
def test_information_gain_refuses_arrays_that_do_not_fit_before_the_kernel_reads_past_them(posteriors, confusion,
                                                                                            weights):
    """The kernel reads by the posteriors' K and the confusions' S: arrays that do not fit were read past their
    ends (garbage scores, or a crash); they are a DataError naming the shapes or the value, as is a NaN or a
    negative probability and text."""
    from crowdagg.errors import DataError

    with pytest.raises(DataError, match="information_gain"):
        information_gain(posteriors, confusion, weights)


@pytest.mark.parametrize("call, message", [
    ("relabel_plan(None)", "result must be an AggregationResult"),
    ("relabel_plan('ds')", "result must be an AggregationResult"),
    ("relabel_plan(result, seed=-1)", "seed must be an integer"),
    ("relabel_plan(result, seed='x')", "seed must be an integer"),
    ("worker_pool(np.arange(200), np.array(['a']), 5)", "one name per worker"),
    ("worker_pool(np.array([np.nan, 1.0]), np.array(['a', 'b']), 5)", "a NaN"),
])
def test_relabel_plan_and_worker_pool_raise_usage_errors_not_bare_ones(call, message):
    """Not a result, a negative or text seed, names that do not match the counts: crowdagg's errors (they were
    AttributeError, numpy's ValueError/TypeError and IndexError)."""
    from crowdagg.errors import CrowdaggError

    result = aggregate(known_crowd(), "mv")
    env = {"relabel_plan": relabel_plan, "worker_pool": worker_pool, "result": result, "np": np}
    with pytest.raises(CrowdaggError, match=message):
        eval(call, env)


def test_scores_all_zero_are_said_not_left_as_an_order_by_name():
    """kos gives decisions: one-hot posteriors, so every task scored 0 bits and the file was the tasks in name
    order, with nothing said; a warning now names why.  ds's graded posteriors do not warn."""
    import warnings

    from crowdagg.errors import CrowdaggWarning

    data = known_crowd()
    with pytest.warns(CrowdaggWarning, match="every task scores 0 bits: kos's posteriors are all certain"):
        plan = relabel_plan(aggregate(data, "kos"))
    assert not plan.score.any() and list(data.task_names[plan.order]) == sorted(data.task_names)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CrowdaggWarning)
        assert relabel_plan(aggregate(data, "ds")).score.any()


def test_a_plans_budget_and_result_are_checked():
    """top(-1) was every task but the last and top(0) none (a slice), a fractional budget a TypeError; table()
    of another data set's result gave its task names at this plan's rows (or an IndexError)."""
    data = known_crowd()
    result = aggregate(data, "ds")
    plan = relabel_plan(result)
    for bad in (-1, 0, 2.5, "3"):
        with pytest.raises(UsageError, match="budget must be an integer >= 1"):
            plan.top(bad)
    assert len(plan.top(None)) == len(plan.top(10**9)) == data.n_tasks
    other = aggregate(AnnotationSet.from_names(["x", "x", "y"], ["w1", "w2", "w1"], ["a", "b", "a"]), "ds")
    with pytest.raises(UsageError, match="the result the plan was made from"):
        plan.table(other, 2)
    with pytest.raises(UsageError, match="got NoneType"):
        plan.table(None)
    assert list(plan.table(result, 1)["task"]) == ["tie"]


def test_the_one_coin_agreement_is_summed_on_the_engines_blocks():
    """The one-coin workers of a method without confusions (glad): accuracy (Σ q_t(answer) + 1) / (n + 2), the
    agreement summed on the engine's blocks (on Dask the client holds no answers) -- the same on any block grid
    as one bincount over every answer."""
    from crowdagg.engine import LocalEngine
    from crowdagg.reports.relabel import _one_coin
    from crowdagg.simulate import simulate

    data = simulate(120, 9, 3, 4, seed=2).to_annotations()
    result = aggregate(data, "glad", max_iter=5)
    post = result.posteriors
    agree = np.bincount(data.worker, weights=post[data.task, data.label], minlength=data.n_workers)
    acc = (agree + 1.0) / (data.answers_per_worker + 2.0)
    workers = np.arange(data.n_workers)
    for per_block in (None, 7):
        conf = _one_coin(result, workers, LocalEngine(data, per_block=per_block))
        np.testing.assert_allclose(conf[:, 1, 1], acc, rtol=1e-12)
        np.testing.assert_allclose(conf[:, 0, 2], (1.0 - acc) / 2, rtol=1e-12)
        np.testing.assert_allclose(conf.sum(axis=2), 1.0, rtol=1e-12)
