"""Shared building blocks (crowdagg.methods.blocks): votes, the gold clamp, one-coin workers."""

from __future__ import annotations

import numpy as np
import pytest

from crowdagg.data.annotations import AnnotationSet
from crowdagg.errors import CrowdaggWarning, DataError
from crowdagg.methods.blocks import (
    TieBreaker,
    argmax_random_ties,
    clamp_posteriors,
    gold_clamp,
    hard_majority_vote,
    soft_majority_vote,
)


def small() -> AnnotationSet:
    """t0: a a b; t1: a b (a tie); t2: b; t3 is named by gold only (no answers)."""
    return AnnotationSet.from_names(["t0", "t0", "t0", "t1", "t1", "t2"], ["u", "v", "w", "u", "v", "w"],
                                    ["a", "a", "b", "a", "b", "b"])


def test_soft_majority_vote_is_the_vote_shares():
    data = small()
    np.testing.assert_allclose(soft_majority_vote(data), [[2 / 3, 1 / 3], [0.5, 0.5], [0.0, 1.0]])


def test_hard_majority_vote_is_one_hot_on_mv_labels_ties_drawn_by_seed():
    data = AnnotationSet.from_codes([0, 0, 0, 1, 1, 2, 3], [0, 1, 2, 0, 1, 2, 0], [0, 0, 1, 0, 1, 1, 0],
                                    n_tasks=5, n_classes=2)  # task 4 has no answers
    for seed in (0, 1, 2, 3):
        hard = hard_majority_vote(data, seed)
        tie = argmax_random_ties(np.array([[0.5, 0.5]]), TieBreaker(data.tasks[[1]], seed))[0]
        expected = np.zeros((5, 2))
        expected[[0, 2, 3], [0, 1, 0]] = 1.0
        expected[1, tie] = 1.0
        np.testing.assert_array_equal(hard, expected)
    # the tie is the seeded draw, so both classes come up over a few seeds
    assert {int(hard_majority_vote(data, s)[1].argmax()) for s in range(16)} == {0, 1}


def test_hard_majority_vote_sits_on_mv_s_labels(rng):
    from crowdagg.methods.api import aggregate

    n = 300
    task = np.repeat(np.arange(n), 4)
    data = AnnotationSet.from_codes(task, rng.integers(0, 20, task.size), rng.integers(0, 3, task.size),
                                    n_classes=3)
    for seed in (0, 9):
        hard = hard_majority_vote(data, seed)
        np.testing.assert_array_equal(hard.argmax(axis=1), aggregate(data, "mv", seed=seed).labels)
    assert not np.array_equal(hard_majority_vote(data, 0), hard_majority_vote(data, 9))  # 4 answers, 3 classes: ties


def test_gold_clamp_maps_names_and_checks_classes():
    data = small()
    np.testing.assert_array_equal(gold_clamp(data, None), [-1, -1, -1])
    np.testing.assert_array_equal(gold_clamp(data, {"t1": "b", " t2 ": "a"}), [-1, 1, 0])
    with pytest.raises(DataError, match=r"gold label 'c' of task 't0' is not one of the classes \(a, b\)"):
        gold_clamp(data, {"t0": "c"})
    with pytest.warns(CrowdaggWarning, match="1 of 2 gold task"):
        np.testing.assert_array_equal(gold_clamp(data, {"t0": "b", "t3": "a"}), [1, -1, -1])


def test_clamp_posteriors_sets_one_hot_rows_in_place():
    post = np.full((3, 2), 0.5)
    out = clamp_posteriors(post, np.array([-1, 1, 0]))
    assert out is post
    np.testing.assert_array_equal(post, [[0.5, 0.5], [0.0, 1.0], [1.0, 0.0]])
    same = np.full((2, 2), 0.5)
    assert clamp_posteriors(same, None) is same and np.all(same == 0.5)


def test_tie_draws_on_two_threads_in_a_fresh_interpreter_do_not_deadlock_importing_pandas():
    """mv on a multi-block crowd with ties, 2 threads, pandas not yet imported: the blocks' first tie draws import
    pandas on both threads at once, which deadlocked in the import system (about one run in four: four runs at once)."""
    import subprocess
    import sys

    code = (
        "import sys, numpy as np\n"
        "from crowdagg.data.annotations import AnnotationSet\n"
        "from crowdagg.methods.registry import get_method\n"
        "from crowdagg.core.threads import use_threads\n"
        "rng = np.random.default_rng(0)\n"
        "n = 140_000\n"
        "data = AnnotationSet.from_codes(np.repeat(np.arange(n // 2), 2), rng.integers(0, 50, n),\n"
        "                                rng.integers(0, 2, n), n_classes=2)\n"
        "assert 'pandas' not in sys.modules\n"
        "with use_threads(2):\n"
        "    get_method('mv')().fit(data)\n"
    )
    runs = [subprocess.Popen([sys.executable, "-c", code], stderr=subprocess.PIPE, text=True) for _ in range(4)]
    for run in runs:
        _, err = run.communicate(timeout=120)
        assert run.returncode == 0, err[-500:]
