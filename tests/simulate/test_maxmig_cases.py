"""Max-MIG's three cases on given items (crowdagg.simulate.maxmig): the crowds the paper describes."""

from __future__ import annotations

import numpy as np
import pytest

from crowdagg.errors import UsageError
from crowdagg.simulate.maxmig import CASES, maxmig_case
from crowdagg.simulate.workers import MAXMIG_HARD_PAIRS, maxmig_cifar_seniors


def items(n: int = 2000, k: int = 10, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, k, size=n)
    return rng.standard_normal((n, 5)).astype(np.float32), truth


def grid(crowd) -> np.ndarray:
    """The answers as an (n_tasks, n_workers) table (every expert labels every item)."""
    out = np.full((crowd.n_tasks, crowd.n_workers), -1)
    out[crowd.task, crowd.worker] = crowd.label
    return out


@pytest.mark.parametrize("case, expertise, m", [
    ("independent", "H", 5), ("naive-majority", "H", 10), ("correlated", "H", 10),
    ("independent", "L", 10), ("naive-majority", "L", 25), ("correlated", "L", 12),
])
def test_every_expert_labels_every_item(case, expertise, m):
    x, truth = items(300)
    crowd = maxmig_case(x, truth, case, expertise=expertise, seed=1)
    assert crowd.n_workers == m and crowd.n_answers == 300 * m
    assert (grid(crowd) >= 0).all()
    np.testing.assert_array_equal(crowd.truth, truth)
    np.testing.assert_array_equal(crowd.features, x)
    n_seniors = 5 if expertise == "H" else 10
    assert list(crowd.worker_kind[:n_seniors]) == ["senior"] * n_seniors


def test_naive_juniors_answer_class_zero_whatever_the_item():
    x, truth = items()
    crowd = maxmig_case(x, truth, "naive-majority", seed=2)
    answers = grid(crowd)
    assert (answers[:, 5:] == 0).all()
    assert list(crowd.worker_kind[5:]) == ["junior_constant"] * 5
    # the seniors are the independent case's, answer for answer
    np.testing.assert_array_equal(answers[:, :5], grid(maxmig_case(x, truth, "independent", seed=2)))


def test_copiers_repeat_senior_a_and_c_on_every_item():
    x, truth = items()
    crowd = maxmig_case(x, truth, "correlated", seed=3)
    answers = grid(crowd)
    np.testing.assert_array_equal(crowd.copy_of, [-1] * 5 + [0, 0, 2, 2, 2])  # two copy A, three copy C
    for junior, senior in ((5, 0), (6, 0), (7, 2), (8, 2), (9, 2)):
        np.testing.assert_array_equal(answers[:, junior], answers[:, senior])
    np.testing.assert_array_equal(answers[:, :5], grid(maxmig_case(x, truth, "independent", seed=3)))
    low = grid(maxmig_case(x, truth, "correlated", expertise="L", seed=3))
    np.testing.assert_array_equal(low[:, 10], low[:, 0])
    np.testing.assert_array_equal(low[:, 11], low[:, 2])


def test_cifar_seniors_confuse_only_the_hard_pairs_as_described():
    mats = maxmig_cifar_seniors()
    np.testing.assert_allclose(mats.sum(axis=2), 1.0)
    a, b, c, d, e = mats
    for first, second in MAXMIG_HARD_PAIRS:
        assert a[first, first] == a[second, first] == 1.0  # A: one fixed member of each pair
        assert b[first, first] == b[first, second] == b[second, second] == 0.5
        assert e[first, first] == e[second, second] == 0.6 and e[first, second] == 0.4
    assert c[3, 3] == c[5, 5] == c[4, 4] == c[7, 7] == 1.0 and c[0, 0] == c[0, 2] == 0.5  # C: mammals
    assert d[0, 0] == d[2, 2] == d[1, 1] == d[9, 9] == d[6, 6] == d[8, 8] == 1.0 and d[5, 3] == 1.0  # D: vehicles
    pair_of = {cls: i for i, pair in enumerate(MAXMIG_HARD_PAIRS) for cls in pair}
    same_pair = np.array([[pair_of[t] == pair_of[o] for o in range(10)] for t in range(10)])
    assert (mats[:, ~same_pair] == 0).all()


def test_senior_answers_follow_their_matrices():
    x, truth = items(6000, k=2, seed=4)
    crowd = maxmig_case(x, truth, "independent", seed=4)
    answers = grid(crowd)
    for w in range(5):
        for t in range(2):
            rate = (answers[truth == t, w] == t).mean()
            # ~3000 items a class: a binomial rate within 0.03 of its probability (4 standard deviations)
            assert abs(rate - crowd.confusion[w, t, t]) < 0.03


def test_same_seed_same_answers_and_bad_arguments_refused():
    x, truth = items(200)
    first, again = (maxmig_case(x, truth, "correlated", seed=5) for _ in range(2))
    np.testing.assert_array_equal(first.label, again.label)
    assert not np.array_equal(first.label, maxmig_case(x, truth, "correlated", seed=6).label)
    with pytest.raises(UsageError, match="case"):
        maxmig_case(x, truth, "copiers")
    with pytest.raises(UsageError, match="2 classes .* and 10"):
        maxmig_case(x, truth % 3, "independent")
    with pytest.raises(UsageError, match="features"):
        maxmig_case(x[:10], truth, "independent")
    assert set(CASES) == {"independent", "naive-majority", "correlated"}


@pytest.mark.parametrize("n_classes", [0, -2, 2.0, "2", True])
def test_n_classes_must_be_an_integer_not_read_loosely(n_classes):
    # 0 was read as "not given" (K = 2), "2" and 2.0 passed, True made K = 1 and -2 "indices in 0..-3"
    x, truth = items(20, k=2)
    with pytest.raises(UsageError, match="n_classes must be an integer"):
        maxmig_case(x, truth, "independent", n_classes=n_classes)


def test_truth_with_a_class_beyond_the_experts_names_the_class():
    x, truth = items(20)
    truth[3] = 11
    with pytest.raises(UsageError, match="truth has classes up to 11 .pass n_classes"):
        maxmig_case(x, truth, "independent")  # was: "got n_classes=12", a value never passed
    with pytest.raises(UsageError, match=r"truth must be class indices in 0\.\.9, got 11"):
        maxmig_case(x, truth, "independent", n_classes=10)
    truth[3] = -1
    with pytest.raises(UsageError, match=r"0\.\.9, got -1"):
        maxmig_case(x, truth, "independent")


@pytest.mark.parametrize("truth", [[], np.zeros(0)])
def test_no_items_whatever_the_empty_truths_dtype(truth):
    # [] and np.zeros(0) are float arrays: bincount raised a bare TypeError
    crowd = maxmig_case(np.zeros((0, 3)), truth, "correlated")
    assert crowd.n_classes == 2 and crowd.label.size == 0 and crowd.truth.dtype == np.int64


@pytest.mark.parametrize("features, what", [
    (np.array([["a", "b"]] * 20), "must be numbers"),  # numpy's own ValueError
    (np.full((20, 2), np.nan), "row 0 holds NaN"),
    (np.r_[np.zeros((4, 2)), np.full((16, 2), 1e300)], "row 4 holds"),  # inf in float32, warned, then kept
])
def test_features_must_be_finite_numbers(features, what):
    import warnings

    _, truth = items(20)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no RuntimeWarning from the float32 cast on the way
        with pytest.raises(UsageError, match=what):
            maxmig_case(features, truth, "independent")


def test_seniors_refuse_an_unknown_expertise():
    from crowdagg.simulate.maxmig import seniors

    with pytest.raises(UsageError, match="expertise"):
        seniors(10, "x")  # was: the (L) seniors
    assert seniors(10, "H").shape == (5, 10, 10) and seniors(2, "L").shape == (10, 2, 2)
