"""The test tiers (tests/tiers.py, tests/conftest.py): what a test uses decides its tier, and the quick tier covers
every module, every method family on real data and the command line in a real process."""

from __future__ import annotations

import subprocess
import sys

import pytest

from crowdagg.methods.registry import METHODS, TRAINERS

from .conftest import DATASETS, TIERS
from .tiers import ORACLE, TESTS, TRAINING, uses_of

#: Test modules without a quick test, and why none can be (every test in them needs what makes it slow).
NO_QUICK: dict[str, str] = {}


# --------------------------------------------------------------------------- reading what a test uses
def _runs_a_process():
    return subprocess.run([sys.executable, "-c", "pass"], check=True)


def _through_a_helper():
    return _runs_a_process().returncode


def _reads_the_datasets():
    return sorted(DATASETS.iterdir())


def _our_crowdkit_surface():
    from crowdagg.crowdkit import DawidSkene

    return DawidSkene


def _the_oracle():
    return pytest.importorskip("crowdkit.aggregation").DawidSkene


def _trains(data, x):
    from crowdagg.methods.registry import get_trainer

    return get_trainer("crowdlayer").load()(epochs=1).fit(data, x)


def _loads_a_trainer():
    from crowdagg.methods.registry import get_trainer

    return get_trainer("crowdlayer").load()


def _aggregates(data):
    from crowdagg import aggregate

    return aggregate(data, "ds").fit


@pytest.mark.parametrize(("function", "reasons"), [
    (_runs_a_process, {"a subprocess"}),
    (_through_a_helper, {"a subprocess"}),  # found in the helper it calls
    (_reads_the_datasets, {"real data"}),
    (_the_oracle, {ORACLE}),
    (_our_crowdkit_surface, set()),  # crowdagg.crowdkit is ours, not the oracle
    (_trains, {TRAINING}),
    (_loads_a_trainer, set()),  # loading a trainer's class trains nothing
    (_aggregates, set()),  # an aggregator's fit is not torch training
    (lambda: [_runs_a_process() for _ in range(2)], {"a subprocess"}),  # nested code is read too
])
def test_what_a_function_uses_is_read_from_its_code(function, reasons):
    assert uses_of([function]).reasons() == reasons


# --------------------------------------------------------------------------- the tiers of this session's tests
@pytest.fixture(scope="module")
def tiers(request):
    """Node id -> Tier of every test collected in this session (before the quick tier deselected the slow ones);
    the checks of the whole suite need the whole suite collected."""
    tiers = request.config.stash[TIERS]
    modules = {nodeid.split("::")[0] for nodeid in tiers}
    every = {p.relative_to(TESTS.parent).as_posix() for p in TESTS.rglob("test_*.py")}
    if not every <= modules:
        pytest.skip(f"only part of the suite was collected ({len(modules)} of {len(every)} test modules)")
    return tiers


def test_every_test_that_uses_something_slow_is_slow_unless_marked_quick(request):
    for item in request.session.items:
        tier = request.config.stash[TIERS][item.nodeid]
        assert (item.get_closest_marker("slow") is not None) == tier.slow, item.nodeid
        if "datasets_dir" in item.fixturenames and not tier.quick:
            assert tier.slow, item.nodeid


def test_the_quick_tier_runs_no_slow_test(request):
    config = request.config
    if config.getoption("full") or config.getoption("markexpr") or any("::" in a for a in config.args):
        pytest.skip("not the quick tier: --full, -m or a test named by its node id")
    slow = [item.nodeid for item in request.session.items if item.get_closest_marker("slow")]
    assert slow == []


def test_every_test_module_has_a_quick_test(tiers):
    modules: dict[str, bool] = {}
    for nodeid, tier in tiers.items():
        module = nodeid.split("::")[0]
        modules[module] = modules.get(module, False) or not tier.slow
    without = sorted(m for m, quick in modules.items() if not quick)
    assert without == sorted(NO_QUICK), "a module without a quick test: mark its cheapest @pytest.mark.quick"


def _family(target: str) -> str:
    """A method's family: its package under crowdagg/methods/ (votes, em, ...), or the trainers."""
    module = target.partition(":")[0]
    return "trainers" if module.startswith("crowdagg.learning.") else module.split(".")[2]


def test_every_method_family_has_a_quick_real_data_test(tiers):
    declared = {**METHODS, **TRAINERS}
    families = {_family(m.target) for m in declared.values()}
    covered: dict[str, list[str]] = {}
    for nodeid, tier in tiers.items():
        for name in tier.covers:
            assert name in declared, f"{nodeid}: @pytest.mark.quick names {name!r}, not a registered method"
            assert tier.reasons >= {"real data"}, f"{nodeid} names {name!r} but reads no real data"
            covered.setdefault(_family(declared[name].target), []).append(nodeid)
    assert sorted(covered) == sorted(families)


def test_the_command_line_runs_in_a_real_process_in_the_quick_tier(tiers):
    real = [n for n, t in tiers.items() if t.quick and "a subprocess" in t.reasons and n.startswith("tests/cli/")]
    assert real
