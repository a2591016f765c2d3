"""crowdagg.crowdkit.GoldMajorityVote: accuracy on gold tasks as skills, then the weighted vote; hand-computed cases,
and crowd-kit itself on its toy crowd and the real datasets (gold: every other task of truth.csv)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from pandas.testing import assert_frame_equal, assert_series_equal

from crowdagg.crowdkit import GoldMajorityVote, MajorityVote, NotFittedError
from crowdagg.crowdkit import aggregation as ours_aggregation

from .crowds import TOY_TRUTH, frame, skills_series
from .oracle import CATEGORICAL, SMALL, ck, quiet, same_frame, same_labels, same_series

#: crowd-kit's multiple-ground-truth case: t1 has two gold labels, an answer equal to either is right.
MULTIPLE = pd.DataFrame([["t1", "w1", "l1"], ["t2", "w1", "l1"], ["t3", "w1", "l1"], ["t1", "w2", "l2"],
                         ["t2", "w2", "l1"], ["t3", "w2", "l2"], ["t1", "w3", "l3"], ["t3", "w3", "l3"]],
                        columns=["task", "worker", "label"])
MULTIPLE_GOLD = pd.Series(["l1", "l2", "l2"], index=["t1", "t1", "t3"])


@pytest.mark.quick
def test_skills_are_accuracy_on_gold_and_the_vote_is_weighted_by_them():
    gmv = GoldMajorityVote()
    labels = gmv.fit_predict(MULTIPLE, MULTIPLE_GOLD)
    # w1: t1 right (l1 is gold), t3 wrong; w2: both right; w3: both wrong; t2 has no gold and grades no one
    assert_series_equal(gmv.skills_, skills_series(["w1", "w2", "w3"], [0.5, 1.0, 0.0]))
    # t1: l1 by w1 (0.5), l2 by w2 (1), l3 by w3 (0); t2: l1 by both w1 and w2
    expected = frame({"t1": [0.5 / 1.5, 1 / 1.5, 0.0], "t2": [1.0, 0.0, 0.0], "t3": [0.5 / 1.5, 1 / 1.5, 0.0]},
                     ["l1", "l2", "l3"])
    assert_frame_equal(gmv.probas_, expected, check_index_type=False, check_column_type=False, rtol=1e-12)
    assert labels.tolist() == ["l2", "l1", "l2"] and labels.name == "agg_label" and labels.index.name == "task"
    assert gmv.labels_ is labels and isinstance(gmv, ours_aggregation.GoldMajorityVote)
    # the weighted vote is MajorityVote's with these skills
    assert_frame_equal(gmv.probas_, MajorityVote().fit(MULTIPLE, gmv.skills_).probas_)


def test_a_repeated_answer_counts_once_and_nan_gold_is_no_gold():
    data = pd.DataFrame({"task": ["t1", "t1", "t1", "t2", "t2"], "worker": ["a", "a", "b", "a", "b"],
                         "label": ["x", "x", "y", "y", "y"]})
    gmv = GoldMajorityVote().fit(data, pd.Series({"t1": "x", "t2": np.nan, "t9": "y"}))
    # a: t1 'x' twice -> once, right; t2 has no gold (NaN); t9 nobody answered
    assert_series_equal(gmv.skills_, skills_series(["a", "b"], [1.0, 0.0]))


def test_predict_needs_fit_and_a_skill_for_every_worker():
    with pytest.raises(NotFittedError, match="not fitted"):
        GoldMajorityVote().predict(MULTIPLE)
    gmv = GoldMajorityVote().fit(MULTIPLE, pd.Series({"t2": "l1"}))  # w3 answered no gold task
    assert gmv.skills_.index.tolist() == ["w1", "w2"]
    with pytest.raises(ValueError, match=r"1 workers of the data \(first 'w3'\) answered no gold task"):
        gmv.predict_proba(MULTIPLE)
    with pytest.raises(KeyError):  # a missing column, as crowd-kit
        GoldMajorityVote().fit(MULTIPLE.drop(columns="worker"), MULTIPLE_GOLD)
    with pytest.raises(ValueError, match="of another type"):
        GoldMajorityVote().fit(pd.DataFrame({"task": [1], "worker": [1], "label": [1]}), pd.Series({1: True}))


def test_empty_answers_give_empty_results():
    gmv = GoldMajorityVote()
    assert gmv.fit_predict_proba(pd.DataFrame({"task": [], "worker": [], "label": []}), pd.Series(dtype=float)).empty
    assert gmv.skills_.empty and gmv.labels_.empty


def test_toy_crowd_as_crowd_kit(toy):
    gold = pd.Series(TOY_TRUTH).iloc[:3]
    mine, theirs = GoldMajorityVote(), ck.GoldMajorityVote()
    same_labels(mine.fit_predict(toy, gold), quiet(lambda: theirs.fit_predict(toy, gold)))
    same_series(mine.skills_, theirs.skills_)
    same_frame(mine.probas_, theirs.probas_)


@pytest.mark.parametrize("name", [n for n in SMALL if n != "empty"])
def test_small_frames_as_crowd_kit(name):
    data = SMALL[name]
    first = data.drop_duplicates("task")
    gold = pd.Series(first["label"].to_numpy(), index=first["task"].to_numpy())
    mine, theirs = GoldMajorityVote(), ck.GoldMajorityVote()
    same_labels(mine.fit_predict(data, gold), quiet(lambda: theirs.fit_predict(data, gold)))
    same_series(mine.skills_, theirs.skills_)
    same_frame(mine.probas_, theirs.probas_)


@pytest.mark.parametrize("name", CATEGORICAL)
def test_real_sets_as_crowd_kit(answers, datasets_dir, name):
    """Gold: every other task of truth.csv; predict on the answers of the workers it grades (crowd-kit refuses the
    others, as we do), without the tasks whose voters all have skill 0 (trec: crowd-kit's vote is NaN there)."""
    data = answers(name)
    truth = pd.read_csv(datasets_dir / name / "truth.csv").set_index("task")["label"].iloc[::2]
    mine, theirs = GoldMajorityVote().fit(data, truth), quiet(lambda: ck.GoldMajorityVote().fit(data, truth))
    same_series(mine.skills_, theirs.skills_)
    graded = data[data["worker"].isin(mine.skills_.index)]
    if len(graded) < len(data):
        with pytest.raises(ValueError):
            quiet(lambda: theirs.predict(data))
        with pytest.raises(ValueError, match="answered no gold task"):
            mine.predict(data)
    # a task whose voters all have skill 0: crowd-kit's shares are 0/0 (and its idxmax raises), ours the mean share
    weight = graded["worker"].map(mine.skills_).groupby(graded["task"]).sum()
    voiceless = weight.index[weight == 0]
    assert not mine.predict_proba(graded).loc[voiceless].isna().any().any()
    graded = graded[~graded["task"].isin(voiceless)]
    same_labels(mine.predict(graded), quiet(lambda: theirs.predict(graded)))
    same_frame(mine.probas_, theirs.probas_)
