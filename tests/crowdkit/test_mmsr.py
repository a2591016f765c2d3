"""crowdagg.crowdkit.MMSR against crowd-kit's MMSR: crowd-kit's layouts and vote over crowdagg's mmsr skills.

The skills are crowdagg's (``tests/methods/mmsr``): their magnitudes are crowd-kit's rank-one completion (to 1e-9
on rte) and their signs each worker's pair evidence, where crowd-kit's dense sign step reads pairs that share no
task as disagreeing.  Everything after the skills is crowd-kit's ``MajorityVote(skills=...)``, checked here by
running crowd-kit's own vote on our skills.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from pandas.testing import assert_index_equal

from crowdagg.crowdkit import MMSR, NotFittedError
from crowdagg.crowdkit import aggregation as surface

from .oracle import ck, quiet, same_frame, same_labels


@pytest.mark.quick
def test_mmsr_answers_with_crowdkits_attributes_and_checks_its_settings(toy):
    mmsr = MMSR().fit(toy)
    assert surface.MMSR is MMSR and repr(mmsr) == "MMSR(n_iter=10000, tol=1e-10, random_state=0)"
    assert mmsr.skills_.name == "skill" and mmsr.skills_.index.name == "worker"
    assert mmsr.skills_.index.tolist() == ["w1", "w2", "w3", "w4", "w5"]  # first appearance, as crowd-kit's
    assert mmsr.skills_["w1"] < 0 < mmsr.skills_[["w2", "w3", "w4", "w5"]].min()  # w1 answers against the rest
    assert len(mmsr.loss_history_) >= 1 and mmsr.loss_history_[-1] < 1e-10
    labels = mmsr.predict(toy)
    assert labels.name == "agg_label" and labels.index.name == "task"
    # t2: w1's "yes" counts against yes (its skill is negative), w4 and w5 outweigh w2 and w3 (as crowd-kit's)
    assert labels.to_dict() == {"t1": "yes", "t2": "no", "t3": "no", "t4": "yes", "t5": "no"}
    scores = mmsr.predict_score(toy)
    assert scores.index.tolist() == ["t1", "t2", "t3", "t4", "t5"] and scores.columns.tolist() == ["no", "yes"]
    np.testing.assert_allclose(scores.sum(axis=1), 1.0)
    with pytest.raises(NotFittedError):
        MMSR().predict(toy)
    with pytest.raises(ValueError, match="Skill value is missing in 1 assignments"):
        mmsr.predict(pd.DataFrame({"task": ["x"], "worker": ["stranger"], "label": ["yes"]}))
    assert MMSR(n_iter=0).fit(toy).loss_history_ == []  # the start's skills, as crowd-kit's
    with pytest.raises(ValueError, match="n_iter must be a non-negative integer"):
        MMSR(n_iter=1.5).fit(toy)
    empty = MMSR().fit(toy.iloc[:0])
    assert len(empty.skills_) == 0 and empty.loss_history_ == []
    assert MMSR(n_iter=3, tol=-1.0).fit(toy).loss_history_.__len__() == 3  # crowd-kit's: a negative tol never stops


def test_mmsr_on_crowdkits_toy_and_simple_crowds_is_crowdkits():
    """On crowds this small (the toy's five workers each share tasks with four: F = 1) the trimmed means' fixed
    point moves with the start -- crowd-kit's own skills by 0.14 between random_state 0 and 1 --: from crowd-kit's
    draw (the method's start=codes) the skills, scores and labels are crowd-kit's."""
    from .crowds import simple_frame, toy_frame

    for frame in (toy_frame(), simple_frame()):
        mine, theirs = MMSR().fit(frame), quiet(lambda frame=frame: ck.MMSR().fit(frame))
        assert_index_equal(mine.skills_.index, theirs.skills_.index, exact=True)
        np.testing.assert_allclose(mine.skills_, theirs.skills_, rtol=1e-9)
        np.testing.assert_allclose(mine.loss_history_, theirs.loss_history_, rtol=1e-6, atol=1e-12)
        same_labels(mine.predict(frame), quiet(lambda frame=frame, theirs=theirs: theirs.predict(frame)))
        same_frame(mine.predict_score(frame), quiet(lambda frame=frame, theirs=theirs: theirs.predict_score(frame)))
    other_start = quiet(lambda: ck.MMSR(random_state=1).fit(toy_frame())).skills_
    assert np.abs(other_start - MMSR().fit(toy_frame()).skills_).max() > 0.1


def test_mmsr_on_rte_is_crowdkits_completion_and_vote_with_the_signs_of_the_evidence():
    from .oracle import DATASETS

    frame = pd.read_csv(DATASETS / "rte" / "labels.csv", dtype=str).drop_duplicates(["task", "worker"], keep="last")
    truth = pd.read_csv(DATASETS / "rte" / "truth.csv", dtype=str).set_index("task")["label"]
    mine, theirs = MMSR().fit(frame), quiet(lambda: ck.MMSR().fit(frame))
    assert_index_equal(mine.skills_.index, theirs.skills_.index, exact=True)
    np.testing.assert_allclose(np.abs(mine.skills_), np.abs(theirs.skills_), rtol=0, atol=1e-9)
    # crowd-kit's own vote on our skills is our predict
    vote = quiet(lambda: ck.MajorityVote().fit(frame, skills=mine.skills_))
    same_labels(mine.predict(frame), vote.labels_)
    same_frame(mine.predict_score(frame), vote.probas_)
    ours, its = mine.labels_.reindex(truth.index), quiet(lambda: theirs.predict(frame)).reindex(truth.index)
    assert (ours == truth).mean() == pytest.approx(0.9275) and (its == truth).mean() == pytest.approx(0.8575)


def test_mmsr_where_the_completion_diverges_gives_finite_skills_and_a_nan_answer_does_not_vote():
    """Found hostile: three workers whose agreements no skills fit (tests/methods/mmsr) -- crowd-kit's rounds end on
    NaN skills (its sign step fails on a shape mismatch first) -- made the adapter's skills those of NaN factors,
    and a NaN label (an answer crowd-kit's vote skips) or a negative tol "the fit broke down numerically".  Now the
    skills are the limit of the rounds: the worker who agrees with both others weighs, the other two at chance."""
    frame = pd.DataFrame({"task": ["t1"] * 3 + ["t2"] * 3 + ["t3"] * 3 + ["t4"] * 3, "worker": ["a", "b", "c"] * 4,
                          "label": ["x", "x", "y", "y", "y", "y", "x", "y", "x", "x", "x", "x"]})
    nan_label = frame.assign(label=frame["label"].where(frame.index != 0))  # a's answer on t1: NaN
    for mmsr, data in ((MMSR(), frame), (MMSR(tol=-1.0), frame), (MMSR(), nan_label)):
        labels = mmsr.fit_predict(data)
        skills = mmsr.skills_
        assert np.isfinite(skills).all() and np.isfinite(mmsr.loss_history_).all()
        assert skills["a"] == pytest.approx(np.log(3.0)) and np.abs(skills[["b", "c"]]).max() < 1e-40
        assert labels[["t2", "t3", "t4"]].tolist() == ["y", "x", "x"]  # a's answers (on t1 a tie without a)


def test_mmsr_on_crowdkits_toy_less_an_answer_is_crowdkits():
    """Found hostile: without w1's answer on t1 the toy has a worker at chance (w1's factor 0 in crowd-kit); ours
    kept it positive, and the rounds diverged (w3 and w4 at chance) where crowd-kit's converge in 9."""
    import warnings

    from .crowds import toy_frame

    frame = toy_frame()
    frame = frame.drop(frame.index[0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the adapter is silent, the method converges: nothing to say
        mine = MMSR().fit(frame)
    theirs = quiet(lambda: ck.MMSR().fit(frame))
    np.testing.assert_allclose(mine.skills_, theirs.skills_, rtol=1e-9, atol=1e-12)
    assert mine.skills_["w1"] == 0.0 and len(mine.loss_history_) == len(theirs.loss_history_) == 9
    same_labels(mine.predict(frame), quiet(lambda: theirs.predict(frame)))
