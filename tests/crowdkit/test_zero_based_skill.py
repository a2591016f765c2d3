"""crowdagg.crowdkit.ZeroBasedSkill: crowd-kit's ZeroBasedSkill, to the bit, on its toy crowd and real datasets."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from pandas.testing import assert_frame_equal, assert_series_equal

from crowdagg import load_annotations
from crowdagg.crowdkit import NotFittedError, ZeroBasedSkill
from crowdagg.methods.api import aggregate


def test_the_skills_are_the_zbs_methods_where_no_vote_ties(bluebird):
    """On bluebird (every worker answers every task: no tie) the adapter's skills are ``aggregate(-m zbs)``'s."""
    ours = ZeroBasedSkill().fit(bluebird)
    data = load_annotations(bluebird)
    method = pd.Series(aggregate(data, "zbs").worker_params["skill"], index=data.worker_names)
    skills = ours.skills_.rename(index=str)
    np.testing.assert_allclose(skills.to_numpy(), method.reindex(skills.index).to_numpy(), rtol=0, atol=1e-12)
    assert ours.skills_.name == "skill" and ours.skills_.index.name == "worker"
    assert ours.skills_.index.is_monotonic_increasing


def test_settings_and_an_unfitted_predict_are_refused(toy):
    with pytest.raises(NotFittedError):
        ZeroBasedSkill().predict(toy)
    for bad in ({"n_iter": -1}, {"lr_steps_to_reduce": 0}, {"lr_init": float("nan")}, {"eps": "x"}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            ZeroBasedSkill(**bad)
    fitted = ZeroBasedSkill(n_iter=3).fit(toy)
    with pytest.raises(ValueError, match="Skill value is missing"):
        fitted.predict(pd.DataFrame({"task": ["x"], "worker": ["stranger"], "label": ["yes"]}))


def _same_as_crowdkit(frame: pd.DataFrame, **settings) -> None:
    from crowdkit.aggregation import ZeroBasedSkill as Theirs

    theirs, ours = Theirs(**settings).fit(frame), ZeroBasedSkill(**settings).fit(frame)
    assert_series_equal(ours.skills_, theirs.skills_, rtol=0, atol=1e-12)
    assert_series_equal(ours.predict(frame), theirs.predict(frame))
    assert_frame_equal(ours.predict_proba(frame), theirs.predict_proba(frame), rtol=0, atol=1e-12)


@pytest.mark.parametrize("settings", [{}, {"n_iter": 7, "lr_init": 0.6, "lr_steps_to_reduce": 3, "eps": 0.01}])
def test_crowd_kit_itself_on_its_toy_crowd(toy, settings):
    _same_as_crowdkit(toy, **settings)


@pytest.mark.parametrize("name", ["rte", "cf", "music"])
def test_crowd_kit_itself_on_real_datasets(answers, name):
    """rte ties (10 answers a task): crowd-kit's tie rule (the first label in sorted order) is kept here, so the
    skills, labels and probabilities are crowd-kit's exactly, ties and all."""
    _same_as_crowdkit(answers(name))


def test_no_iteration_keeps_crowdkits_start_layout(toy):
    """With n_iter=0 crowd-kit's skills_ is its start: workers in order of first appearance (an iteration
    re-indexes it by a sorted groupby).  Ours were sorted."""
    frame = toy.iloc[::-1].reset_index(drop=True)  # workers no longer first appear in sorted order
    _same_as_crowdkit(frame, n_iter=0)
    _same_as_crowdkit(frame, n_iter=1)
