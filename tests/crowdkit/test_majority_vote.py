"""crowdagg.crowdkit.MajorityVote (and the vote Wawa shares with it): crowd-kit 1.4.2's own test cases restated,
`aggregate`'s numbers, and crowd-kit itself on the real datasets."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from pandas.testing import assert_frame_equal, assert_series_equal

from crowdagg import aggregate, load_annotations
from crowdagg import crowdkit as ours
from crowdagg.crowdkit import MajorityVote, Wawa

from .crowds import (
    PANDAS3,
    SIMPLE_MV,
    SIMPLE_SKILLS,
    SIMPLE_TRUTH,
    SIMPLE_WAWA,
    SIMPLE_WORKERS,
    TOY_MV,
    TOY_MV_LABELS,
    TOY_SKILLS,
    TOY_WAWA,
    P,
    frame,
    labels_equal,
    skills_series,
    truth,
)
from .oracle import CATEGORICAL, SMALL, ck, quiet, same_frame, same_labels, same_series


@pytest.mark.parametrize("cls", [MajorityVote, Wawa])
@pytest.mark.parametrize("dataset", ["toy", "simple"])
@pytest.mark.parametrize("method", ["fit_predict", "fit_predict_proba"])
def test_majority_vote_and_wawa(cls, dataset, method, toy, simple):
    answers = toy if dataset == "toy" else simple
    expected = {(MajorityVote, "toy"): TOY_MV, (Wawa, "toy"): TOY_WAWA, (MajorityVote, "simple"): SIMPLE_MV,
                (Wawa, "simple"): SIMPLE_WAWA}[cls, dataset]
    prefix = "" if dataset == "toy" else P
    columns = ["no", "yes"] if dataset == "toy" else ["chicken", "goose", "parrot"]
    agg = cls()
    out = getattr(agg, method)(answers)
    assert out is (agg.probas_ if method.endswith("proba") else agg.labels_)
    assert_frame_equal(agg.probas_, frame({prefix + t: v for t, v in expected.items()}, columns), check_like=True,
                       rtol=1e-12)
    # on toy both give t1 'no' (MV's tie, and Wawa's weights follow MV); on simple both give the truth, but
    # for MV's three-way tie on efd under pandas 3 (the first label to appear, goose)
    expected_labels = TOY_MV_LABELS if dataset == "toy" else dict(SIMPLE_TRUTH)
    if dataset == "simple" and cls is MajorityVote and PANDAS3:
        expected_labels["efd"] = "goose"
    labels_equal(agg.labels_, truth(expected_labels, prefix))
    skills = skills_series([f"w{i}" for i in range(1, 6)], TOY_SKILLS) if dataset == "toy" else skills_series(
        SIMPLE_WORKERS, SIMPLE_SKILLS)
    assert_series_equal(agg.skills_.sort_index(), skills, rtol=1e-12)
    assert agg.labels_.name == "agg_label" and agg.skills_.name == "skill"


def test_majority_vote_tie_goes_to_the_first_label_in_crowd_kits_order(simple):
    # efd is a three-way tie: chicken, goose, parrot; goose is the frame's first label, chicken the first sorted
    mv = MajorityVote().fit(simple)
    assert mv.labels_[P + "efd"] == ("goose" if PANDAS3 else "chicken")
    assert list(mv.probas_.columns) == (["goose", "parrot", "chicken"] if PANDAS3 else ["chicken", "goose", "parrot"])
    tasks = list(dict.fromkeys(simple["task"]))
    assert mv.probas_.index.tolist() == (tasks if PANDAS3 else sorted(tasks))


def test_majority_vote_with_skills(simple):
    weights = skills_series(SIMPLE_WORKERS, SIMPLE_SKILLS)
    mv = MajorityVote()
    mv.fit_predict(simple, skills=weights)
    # the weighted vote gives the truth (efd: chicken), so its skills are the ones under pandas 2's ties
    assert_series_equal(mv.skills_, skills_series(SIMPLE_WORKERS, [1 / 3, 1.0, 1.0, 1.0, 1.0, 2 / 3]))
    assert_frame_equal(mv.probas_, frame({P + t: v for t, v in SIMPLE_WAWA.items()}, ["chicken", "goose", "parrot"]),
                       check_like=True, rtol=1e-12)


def test_majority_vote_missing_skills(simple):
    fraudster = "0c3eb7d5fcc414db137c4180a654c06e"
    weights = skills_series(SIMPLE_WORKERS, SIMPLE_SKILLS).drop(fraudster)
    valued = MajorityVote(on_missing_skill="value", default_skill=1000000).fit_predict(simple, skills=weights)
    assert (valued[[P + t for t in ("eec", "efb", "f07", "efd", "ee4", "f05")]] == "parrot").all()
    with pytest.raises(ValueError, match="Skill value is missing in 6 assignments"):
        MajorityVote(on_missing_skill="error").fit_predict(simple, skills=weights)
    ignored = MajorityVote(on_missing_skill="ignore")
    ignored.fit_predict(simple, skills=weights)
    assert fraudster not in ignored.skills_.index and len(ignored.skills_) == 5
    # efd: chicken by ee8 (skill 1) and ee4 (skill 1 under pandas 2, 5/6 under 3) against goose by f05 (1)
    np.testing.assert_allclose(ignored.probas_.loc[P + "efd"], [0.5, 0.5, 0.0] if PANDAS3 else [0.6, 0.4, 0.0])
    with pytest.raises(ValueError, match="10 tasks have no workers with known skills"):
        MajorityVote(on_missing_skill="ignore").fit_predict(simple, skills=pd.Series([], dtype=float))
    with pytest.raises(ValueError, match="Default skill value must be specified"):
        MajorityVote(on_missing_skill="value").fit_predict(simple, skills=weights)
    with pytest.raises(ValueError, match='on_missing_skill is not "value"'):
        MajorityVote(default_skill=1.0).fit_predict(simple, skills=weights)
    with pytest.raises(ValueError, match="Unknown option 'drop'"):
        MajorityVote(on_missing_skill="drop").fit_predict(simple, skills=weights)


def test_zero_weight_voters_get_the_mean_share_not_nan():
    # crowd-kit divides by a zero total and gives NaN; we give the mean share of the other tasks
    data = pd.DataFrame({"task": ["a", "a", "b"], "worker": ["good", "bad", "bad"], "label": ["x", "y", "x"]})
    mv = MajorityVote().fit(data, skills=pd.Series({"good": 1.0, "bad": 0.0}))
    assert not mv.probas_.isna().any().any()
    np.testing.assert_allclose(mv.probas_.loc["b"], mv.probas_.loc["a"])


def test_majority_vote_and_wawa_match_aggregate(bluebird):
    data = load_annotations(bluebird)
    for cls, method in ((MajorityVote, "mv"), (Wawa, "wawa")):
        ours = aggregate(data, method).proba_frame().sort_index()
        theirs = cls().fit_predict_proba(bluebird)
        assert sorted(theirs.index) == sorted(ours.index)
        theirs = theirs.reindex(index=ours.index, columns=ours.columns.astype(theirs.columns.dtype))
        np.testing.assert_array_equal(theirs.to_numpy(), ours.to_numpy())


def test_skills_must_be_weights():
    data = pd.DataFrame({"task": ["t1", "t1", "t2"], "worker": ["w1", "w2", "w1"], "label": ["a", "b", "a"]})
    with pytest.raises(ValueError, match="non-negative"):  # crowd-kit divides by the negative total: 'a' wins t1
        MajorityVote().fit(data, skills=pd.Series({"w1": -1.0, "w2": 0.5}))
    with pytest.raises(ValueError, match="'w1' more than once"):  # crowd-kit counts w1's answers twice
        MajorityVote().fit(data, skills=pd.Series([0.8, 0.2, 0.5], index=["w1", "w1", "w2"]))


# ----------------------------------------------------------------------------- majority vote, Wawa
@pytest.mark.parametrize("as_text", [False, True], ids=["read_csv", "str"])
@pytest.mark.parametrize("name", CATEGORICAL)
def test_majority_vote_and_wawa_as_crowd_kit(answers, name, as_text):
    data = answers(name, as_text)
    mine, theirs = ours.MajorityVote().fit(data), quiet(lambda: ck.MajorityVote().fit(data))
    same_labels(mine.labels_, theirs.labels_)
    same_frame(mine.probas_, theirs.probas_)
    same_series(mine.skills_, theirs.skills_)
    mine, theirs = ours.Wawa(), ck.Wawa()
    same_labels(mine.fit_predict(data), quiet(lambda: theirs.fit_predict(data)))
    same_frame(mine.probas_, theirs.probas_)
    same_series(mine.skills_, theirs.skills_)


def test_the_tie_order_follows_the_installed_pandas():
    """The rule this module checks, said once: crowd-kit's majority vote sorts under pandas 2 and keeps the
    order of first appearance under pandas 3 (its ``value_counts`` no longer sorts its groups)."""
    data = SMALL["text"]
    labels = ours.MajorityVote().fit_predict(data)
    if int(pd.__version__.split(".")[0]) >= 3:
        assert labels.index.tolist() == ["t2", "t1", "t3"] and labels.tolist() == ["y", "y", "y"]
    else:
        assert labels.index.tolist() == ["t1", "t2", "t3"] and labels.tolist() == ["x", "x", "x"]
    np.testing.assert_array_equal(labels.to_numpy(), quiet(lambda: ck.MajorityVote().fit_predict(data)).to_numpy())


@pytest.mark.quick
@pytest.mark.parametrize("default", [np.nan, -1.0, np.inf, "1"])
def test_a_default_skill_that_is_no_vote_weight_is_refused(default):
    """A NaN or negative default_skill voted: NaN probabilities, and 'x' for a task whose every answer is 'y'
    (crowd-kit raises on them); now a ValueError, as for the skills themselves."""
    answers = pd.DataFrame({"task": ["t1", "t1", "t2", "t2", "t3"], "worker": ["a", "b", "a", "b", "c"],
                            "label": ["x", "y", "y", "y", "x"]})
    with pytest.raises(ValueError, match="default_skill is a vote weight"):
        MajorityVote(default_skill=default, on_missing_skill="value").fit_predict(answers, skills=pd.Series({"a": 1.0}))
    labels = MajorityVote(default_skill=2, on_missing_skill="value").fit_predict(answers, skills=pd.Series({"a": 1.0}))
    assert labels.to_dict() == {"t1": "y", "t2": "y", "t3": "x"}  # b's weight 2 outvotes a's 1 on t1
