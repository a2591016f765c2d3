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


# --------------------------------------------------------------------------- tiers
# Plain `pytest` runs the quick tier; `pytest --full` runs every test (what .ci/run runs).  What is slow is found
# from what a test uses (tests/tiers.py); `-m EXPR`, or a test named by its node id (`file.py::test`), bypasses the
# tiers: asking for a slow test by name, or for `-m dask`, runs it.
TIERS = pytest.StashKey[dict]()
DESELECTED = pytest.StashKey[int]()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--full", action="store_true", help="run every test: the quick tier and the slow tests (real "
                     "datasets, Dask clusters, subprocesses, torch training, the crowd-kit oracle; tests/tiers.py)")


def pytest_configure(config: pytest.Config) -> None:
    # xdist's workers share the cores: each fit (numba, torch) on cores / workers threads, unless CROWDAGG_THREADS
    # says otherwise.  Two workers of two threads each on two cores made torch's training 4x slower (its threads
    # spin waiting for each other), and made the run's time depend on what else the machine ran.
    workers = os.environ.get("PYTEST_XDIST_WORKER_COUNT")
    if workers and "CROWDAGG_THREADS" not in os.environ:
        from crowdagg.core.threads import all_cores

        os.environ["CROWDAGG_THREADS"] = str(max(1, all_cores() // int(workers)))
    config.addinivalue_line("markers", "slow: uses real data, a Dask cluster, a subprocess, torch training or the "
                            "crowd-kit oracle (set from what the test uses, tests/tiers.py); `pytest --full` runs it")
    config.addinivalue_line("markers", "quick(*methods): stays in the quick tier whatever it uses; methods: those "
                            "whose family it tests on real data")


def _named(config: pytest.Config) -> set[str]:
    """The node ids (``file.py::test``, maybe with its parameters) given on the command line, as pytest writes them."""
    out = set()
    for arg in config.args:
        path, sep, rest = arg.partition("::")
        if sep:
            full = (config.invocation_params.dir / path).resolve()
            rel = full.relative_to(config.rootpath).as_posix() if full.is_relative_to(config.rootpath) else path
            out.add(f"{rel}::{rest}")
    return out


@pytest.hookimpl(tryfirst=True)  # before -m and -k select: `-m slow` sees the marks set here
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    from tests.tiers import tier_of

    tiers = config.stash[TIERS] = {}  # node id -> its Tier: read by tests/test_tiers.py
    for item in items:
        tier = tiers[item.nodeid] = tier_of(item)
        if tier.slow:
            item.add_marker(pytest.mark.slow)
    if config.getoption("full") or config.getoption("markexpr"):
        return
    named = _named(config)
    keep, drop = [], []
    for item in items:
        asked = any(item.nodeid == n or item.nodeid.startswith((n + "[", n + "::")) for n in named)
        (drop if tiers[item.nodeid].slow and not asked else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
        config.stash[DESELECTED] = len(drop)


def pytest_report_header(config: pytest.Config) -> str:
    if config.getoption("full"):
        return "tier: full (every test)"
    if config.getoption("markexpr"):
        return "tier: as -m selects"
    return "tier: quick (slow tests deselected: `pytest --full` runs every test)"


def pytest_terminal_summary(terminalreporter, config: pytest.Config) -> None:
    n = config.stash.get(DESELECTED, 0)
    if n:  # a file of slow tests run on its own would otherwise say only "no tests ran"
        terminalreporter.write_line(f"quick tier: {n} slow tests deselected; `pytest --full` runs every test")
