"""crowdagg.crowdkit.Wawa: predicting on new answers with its fitted skills (its vote: test_majority_vote.py)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from crowdagg.crowdkit import NotFittedError, Wawa

from .crowds import TOY_WAWA


def test_wawa_predicts_on_new_answers_with_its_skills(toy):
    wawa = Wawa().fit(toy)
    again = wawa.predict_proba(toy)
    np.testing.assert_allclose(again.loc["t3"], TOY_WAWA["t3"])
    with pytest.raises(NotFittedError):
        Wawa().predict(toy)
    with pytest.raises(ValueError, match="Skill value is missing"):
        wawa.predict(pd.DataFrame({"task": ["x"], "worker": ["stranger"], "label": ["yes"]}))
