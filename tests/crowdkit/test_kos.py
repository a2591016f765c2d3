"""crowdagg.crowdkit.KOS: crowd-kit 1.4.2's own KOS tests restated, a slow reference of its algorithm written from
its definition (unnormalised messages, its 1e300 stop), and crowd-kit itself on the real binary datasets."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from pandas.testing import assert_series_equal

from crowdagg.crowdkit import KOS

from .crowds import simple_frame, toy_frame
from .oracle import ck, quiet, same_labels

#: The real datasets with two labels, and crowd-kit's KOS on each: trec has tasks whose sum is exactly 0, where
#: crowd-kit raises KeyError (see test_a_task_whose_sum_is_0_gets_its_vote_where_crowd_kit_raises).
BINARY = ["bluebird", "rte", "sentiment", "sp_amt", "temp", "zencrowd"]


def slow_kos(frame: pd.DataFrame, n_iter: int, random_state: int = 0) -> tuple[pd.Series, int]:
    """crowd-kit's KOS from its definition: (labels by task sorted, with NaN where the sum is 0; the rounds run).

    Messages per answer, unnormalised: task sums S = Σ L y, x = S - L y, worker sums T = Σ L x, y = T - L x;
    stop before a round whose S or T passes 1e300; the label of a task is the sign of Σ L y.
    """
    first = pd.unique(frame["label"])[0]
    sign = np.where(frame["label"].to_numpy() == first, 1.0, -1.0)
    task, tasks = pd.factorize(frame["task"])
    worker = pd.factorize(frame["worker"])[0]
    y = np.random.RandomState(random_state).normal(1, 1, len(frame))
    rounds = 0
    for _ in range(n_iter):
        s = np.bincount(task, sign * y)[task]
        if (np.abs(s) > 1e300).any():
            break
        x = s - sign * y
        t = np.bincount(worker, sign * x)[worker]
        if (np.abs(t) > 1e300).any():
            break
        y = t - sign * x
        rounds += 1
    belief = np.bincount(task, sign * y)
    other = next(v for v in pd.unique(frame["label"]) if v != first)
    labels = pd.Series(np.where(belief > 0, first, np.where(belief < 0, other, None)), index=tasks, dtype=object)
    return labels.sort_index(), rounds


def dense_crowd(seed: int = 0, n_tasks: int = 200, n_workers: int = 30) -> tuple[pd.DataFrame, np.ndarray]:
    """Every worker answers every task: 70% of the workers right 80% of the time, the others 40% (adversaries)."""
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, 2, n_tasks)
    skill = np.where(np.arange(n_workers) < 0.7 * n_workers, 0.8, 0.4)
    right = rng.random((n_workers, n_tasks)) < skill[:, None]
    answers = np.where(right, truth, 1 - truth)
    w, t = np.meshgrid(np.arange(n_workers), np.arange(n_tasks), indexing="ij")
    frame = pd.DataFrame({"task": [f"t{i:03d}" for i in t.ravel()], "worker": [f"w{j}" for j in w.ravel()],
                          "label": np.array(["no", "yes"])[answers.ravel()]})
    return frame.sample(frac=1.0, random_state=seed).reset_index(drop=True), truth


# ----------------------------------------------------------------------------- crowd-kit's own tests, restated
@pytest.mark.parametrize("n_iter", [10, 100])
def test_bool_labels(n_iter):
    """crowd-kit's test_aggregate_kos_on_data_with_bool_labels: two workers say True on both tasks, one False."""
    data = pd.DataFrame({"worker": ["w1", "w1", "w2", "w2", "w3", "w3"], "task": ["t1", "t2"] * 3,
                         "label": [True, True, True, True, False, False]})
    labels = KOS(n_iter=n_iter).fit(data).labels_
    assert_series_equal(labels, pd.Series([True, True], index=pd.Index(["t1", "t2"], name="task"), name="agg_label"))


def test_empty_input_and_more_than_two_labels():
    """crowd-kit's test_kos_on_empty_input and test_kos_not_binary_data (its "simple" crowd has three animals)."""
    empty = KOS(n_iter=10).fit(pd.DataFrame([], columns=["task", "worker", "label"])).labels_
    assert_series_equal(empty, pd.Series([], dtype="O", name="agg_label"))
    with pytest.raises(ValueError, match="binary classification only.*3 distinct labels"):
        KOS(n_iter=10).fit(simple_frame())
    with pytest.raises(ValueError, match="binary classification only.*1 distinct labels"):
        KOS().fit(pd.DataFrame({"task": ["t1", "t2"], "worker": ["w1", "w1"], "label": ["a", "a"]}))


# ----------------------------------------------------------------------------- against crowd-kit's definition
@pytest.mark.parametrize("n_iter", [0, 1, 3, 40, 100])
def test_kos_is_crowd_kits_algorithm_round_for_round(loop_runs, n_iter):
    """On a dense crowd the unnormalised sums pass 1e300 after ~70 rounds: crowd-kit stops there, and so do we
    (normalised messages, the stop read in logarithms), with the same labels at every budget."""
    frame, truth = dense_crowd()
    expected, rounds = slow_kos(frame, n_iter)
    fitted = KOS(n_iter=n_iter).fit(frame)
    assert_series_equal(fitted.labels_, expected.rename("agg_label").rename_axis("task"), check_dtype=False)
    [(_, _, run)] = loop_runs
    if rounds < n_iter:  # crowd-kit's stop: the step that found a sum past 1e300
        assert run.converged and run.n_iter == rounds + 1 and 30 < rounds < 100
    else:
        assert not run.converged and run.n_iter == n_iter
    if n_iter >= 40:
        assert (fitted.labels_.to_numpy() == np.array(["no", "yes"])[truth]).mean() > 0.95


@pytest.mark.parametrize("random_state", [0, 7])
def test_the_start_is_crowd_kits_draw_and_the_global_state_is_left_alone(random_state):
    """One N(1, 1) per row of the frame from numpy's legacy generator seeded with random_state (crowd-kit's
    np.random.seed): two rounds on the toy crowd, where the start still shows, follow it; numpy's global random
    state is not touched (crowd-kit reseeds it)."""
    toy = toy_frame()
    np.random.seed(123)
    before = np.random.get_state()[1].copy()
    labels = KOS(n_iter=1, random_state=random_state).fit(toy).labels_
    assert np.array_equal(np.random.get_state()[1], before)
    expected, _ = slow_kos(toy, 1, random_state)
    assert labels.tolist() == expected.tolist()


def test_a_task_whose_sum_is_0_gets_its_vote_where_crowd_kit_raises():
    """t3 and t4 are answered by workers who answered nothing else: every message to them is 0, so is their sum,
    and crowd-kit's back-mapping of the sign fails (KeyError: 0; on the real trec data too).  They get their
    majority vote (a tie: the first label in crowd-kit's majority-vote order); the other tasks are as defined."""
    data = pd.DataFrame({"task": ["t1", "t1", "t1", "t2", "t2", "t2", "t3", "t4", "t4"],
                         "worker": ["a", "b", "c", "a", "b", "c", "d", "e", "f"],
                         "label": ["x", "x", "y", "y", "y", "y", "y", "x", "y"]})
    labels = KOS(n_iter=5).fit(data).labels_
    expected, _ = slow_kos(data, 5)
    assert labels[["t1", "t2"]].tolist() == expected[["t1", "t2"]].tolist()
    assert expected[["t3", "t4"]].isna().all()
    assert labels[["t3", "t4"]].tolist() == ["y", "x"]  # t3: its one answer; t4: a tie, "x" appeared first


def test_nan_labels_are_no_answers_and_settings_are_checked():
    """crowd-kit counts NaN as a third label and refuses the frame as not binary; here it is no answer."""
    data = pd.DataFrame({"worker": ["w1", "w1", "w2", "w2", "w3", "w3", "w4"], "task": ["t1", "t2"] * 3 + ["t1"],
                         "label": [True, True, True, True, False, False, np.nan]})
    assert KOS(n_iter=10).fit(data).labels_.tolist() == [True, True]
    for bad in (-1, 2.5, True):
        with pytest.raises(ValueError, match="n_iter"):
            KOS(n_iter=bad).fit(data)


# ----------------------------------------------------------------------------- crowd-kit itself
@pytest.mark.parametrize("n_iter", [10, 100])
@pytest.mark.parametrize("name", BINARY)
def test_kos_as_crowd_kit_on_real_data(answers, name, n_iter):
    """The same labels, index and dtype as crowd-kit's KOS (its sums pass 1e300 within 100 rounds on bluebird)."""
    data = answers(name)
    same_labels(KOS(n_iter=n_iter).fit(data).labels_, quiet(lambda: ck.KOS(n_iter=n_iter).fit(data).labels_))


@pytest.mark.parametrize("n_iter", [0, 1, 10, 100])
@pytest.mark.parametrize("kind", ["toy", "bool", "int", "str"])
def test_kos_as_crowd_kit_on_its_crowds(kind, n_iter):
    toy = toy_frame()
    data = {"toy": toy, "bool": toy.assign(label=toy["label"] == "yes"),
            "int": toy.assign(label=(toy["label"] == "yes").astype(int)),
            "str": toy.astype({"label": "str"})}[kind]
    same_labels(KOS(n_iter=n_iter).fit(data).labels_, quiet(lambda: ck.KOS(n_iter=n_iter).fit(data).labels_))


def test_on_trec_crowd_kit_raises_and_we_follow_its_definition(answers):
    """trec (88,385 answers) has tasks whose sum is exactly 0: crowd-kit raises KeyError; every other task is
    labelled as crowd-kit's definition labels it."""
    data = answers("trec")
    with pytest.raises(KeyError):
        quiet(lambda: ck.KOS(n_iter=10).fit(data))
    labels = KOS(n_iter=10).fit(data).labels_
    expected, _ = slow_kos(data, 10)
    decided = expected.notna().to_numpy()
    assert 0 < (~decided).sum() < 0.05 * len(expected)
    assert labels.index.equals(expected.index)
    assert (labels.to_numpy()[decided] == expected.to_numpy()[decided]).all()


@pytest.mark.quick
def test_rounds_whose_sums_are_all_zero_end_the_loop_whatever_n_iter():
    """Workers who each answered a task no one else did: every message is 0 from the first round on, so later
    rounds change nothing -- n_iter = 10¹² ran them all (about 20 µs a round: days).  Each task gets its vote."""
    frame = pd.DataFrame({"task": ["a", "b", "c", "d"], "worker": ["w1", "w2", "w3", "w4"], "label": [0, 1, 0, 1]})
    labels = KOS(n_iter=10**12).fit_predict(frame)
    assert_series_equal(labels, KOS(n_iter=3).fit_predict(frame))
    assert labels.tolist() == [0, 1, 0, 1]
