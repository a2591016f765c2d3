"""Fixtures of the crowd-kit surface's tests: crowd-kit's crowds, bluebird, the real datasets as frames, and a spy
on crowdagg's loop."""

from __future__ import annotations

import pandas as pd
import pytest

from .crowds import simple_frame, toy_frame


@pytest.fixture(scope="module")
def toy() -> pd.DataFrame:
    return toy_frame()


@pytest.fixture(scope="module")
def simple() -> pd.DataFrame:
    return simple_frame()


@pytest.fixture(scope="module")
def bluebird() -> pd.DataFrame:
    from importlib.resources import files

    return pd.read_csv(files("crowdagg.examples") / "bluebird_labels.csv")


# --------------------------------------------------------------------------- adapters: settings of crowdagg's loop
@pytest.fixture
def loop_runs(monkeypatch):
    """Every run of crowdagg's iterative loop (crowdagg.methods.loop.iterate) the crowd-kit classes make during
    the test: (its stop rule, objective direction, the Run it returned)."""
    from crowdagg.crowdkit import _loop
    from crowdagg.methods import loop

    assert _loop.iterate is loop.iterate  # the loop every registered iterative method runs in
    runs = []

    def spy(start, step, *, rule, direction, **settings):
        run = loop.iterate(start, step, rule=rule, direction=direction, **settings)
        runs.append((rule, direction, run))
        return run

    monkeypatch.setattr(_loop, "iterate", spy)
    return runs


@pytest.fixture(scope="module")
def answers(datasets_dir):
    cache: dict = {}

    def read(name: str, as_text: bool = False) -> pd.DataFrame:
        if (name, as_text) not in cache:
            path = datasets_dir / name / "labels.csv"
            cache[name, as_text] = pd.read_csv(path, dtype=str, keep_default_na=False) if as_text else pd.read_csv(path)
        return cache[name, as_text].copy()

    return read
