"""The detector and the scores called with hostile arguments and degenerate crowds."""

from __future__ import annotations

import numpy as np
import pytest

from crowdagg.data.annotations import AnnotationSet
from crowdagg.errors import UsageError
from crowdagg.reports.spammers import detect_spammers


@pytest.fixture(scope="module")
def spammers_only():
    """Eight workers who all answer every one of 200 tasks uniformly at random (K = 3): every one a spammer."""
    rng = np.random.default_rng(0)
    task = np.repeat(np.arange(200), 8)
    return AnnotationSet.from_codes(task, np.tile(np.arange(8), 200), rng.integers(0, 3, task.size), n_classes=3)


@pytest.mark.parametrize("seed", [-1, -(2**40)])
def test_a_negative_seed_is_a_usage_error_not_numpys_value_error(spammers_only, seed):
    with pytest.raises(UsageError, match="seed must be an integer >= 0"):
        detect_spammers(spammers_only, seed=seed)


def test_a_crowd_of_spammers_only_is_flagged_whole_or_not_judged(spammers_only):
    scan = detect_spammers(spammers_only, min_partners=5, min_shared=20)
    judged = ~scan.skipped
    assert judged.sum() == 0 or scan.flagged[judged].all()
