"""Shared fixtures: the real datasets live in ../shared/datasets beside the checkout."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, settings

# Property tests are judged on what they find, never on speed: no per-example deadline and no
# "too slow" health check, which a loaded machine (CI beside other jobs) would trip at random.
# Every @settings(...) in the suite inherits these unless it says otherwise.  The examples are drawn from a
# fixed seed (derandomize): a run that passed passes again on the same code, so CI is never flaky (a
# developer searching wider sets derandomize=False or a larger max_examples locally).
settings.register_profile("crowdagg", deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
settings.load_profile("crowdagg")

ROOT = Path(__file__).resolve().parents[1]
DATASETS = Path(os.environ.get("CROWDAGG_DATASETS", ROOT.parent / "shared" / "datasets"))


@pytest.fixture(scope="session")
def datasets_dir() -> Path:
    if not DATASETS.is_dir():
        pytest.skip(f"real datasets not found at {DATASETS} (set CROWDAGG_DATASETS)")
    return DATASETS


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(12345)
