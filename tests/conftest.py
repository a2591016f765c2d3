"""Shared fixtures: the real datasets live in ../shared/datasets beside the checkout."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

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
