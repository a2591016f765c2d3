"""The test tiers: which tests are slow, found from what each one uses (``tests/conftest.py`` marks them).

A test is *slow* when it, one of its fixtures, or a helper of the test suite
it calls (followed through the code, however deep) uses one of

* the real datasets: the ``datasets_dir`` fixture, or the ``DATASETS`` folder itself;
* a Dask cluster: the ``dask`` marker, or ``LocalCluster``;
* a subprocess: the ``subprocess`` module (a fresh interpreter, the installed CLI, a benchmark script);
* torch training: a trainer's ``fit`` (``get_trainer`` or a trainer module, then ``fit``), or ``crowdagg train``
  through the CLI runner;
* the crowd-kit oracle: the ``crowdkit`` package (not :mod:`crowdagg.crowdkit`, our own surface).

Plain ``pytest`` runs the others -- the quick tier -- and ``pytest --full``
everything.  ``@pytest.mark.quick`` keeps a test in the quick tier whatever
it uses (one real-data test per method family, one real-process CLI test);
``@pytest.mark.slow`` puts one in the slow tier by hand (slow by its
arithmetic alone).

The code is read, not run: a name a function's bytecode refers to (a
global, an attribute, an imported module) and the strings it holds, so
marking costs no imports and no fixture setup.
"""

from __future__ import annotations

import types
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent

#: Why a test is slow -> the names (globals, attributes, imports) whose use makes it so.
NAMES: dict[str, frozenset[str]] = {
    "a Dask cluster": frozenset({"LocalCluster"}),
    "a subprocess": frozenset({"subprocess"}),
    "real data": frozenset({"DATASETS"}),
}
#: Fixtures whose use makes a test slow, and why.
FIXTURES: dict[str, str] = {"datasets_dir": "real data"}
#: Markers that make a test slow, and why.
MARKERS: dict[str, str] = {"dask": "a Dask cluster"}

TRAINING, ORACLE = "torch training", "the crowd-kit oracle"


class Uses:
    """What a piece of test code refers to: names (globals, attributes, imported modules), string constants, and the
    modules of the objects its globals name."""

    def __init__(self) -> None:
        self.names: set[str] = set()
        self.strings: set[str] = set()
        self.modules: set[str] = set()

    def update(self, other: Uses) -> None:
        self.names |= other.names
        self.strings |= other.strings
        self.modules |= other.modules

    def reasons(self) -> set[str]:
        """Why this code is slow (``set()``: it is not)."""
        found = {why for why, names in NAMES.items() if names & self.names}
        if any(m == "crowdkit" or m.startswith("crowdkit.") for m in self.modules | self.strings):
            found.add(ORACLE)
        trainer = "get_trainer" in self.names or any(m.startswith("crowdagg.learning.methods.") for m in self.modules)
        if ("fit" in self.names and trainer) or ("train" in self.strings and "CliRunner" in self.names):
            found.add(TRAINING)
        return found


def _is_ours(obj: object) -> bool:
    """Whether ``obj`` is a function of the test suite (whose code is followed), not of pytest or the library."""
    code = getattr(obj, "__code__", None)
    if not isinstance(code, types.CodeType):
        return False
    path = Path(code.co_filename).resolve()
    return path.is_relative_to(TESTS) and path != Path(__file__).resolve()  # not this reader, named in the tests


def _is_ours_class(obj: object) -> bool:
    """Whether ``obj`` is a class of the test suite, or an instance of one."""
    cls = obj if isinstance(obj, type) else type(obj)
    return cls.__module__.split(".")[0] == TESTS.name and cls.__module__ != __name__


_CACHE: dict[types.CodeType, Uses] = {}


def _uses(fn: Callable) -> Uses:
    """What ``fn``'s code (its nested functions, and the suite's helpers it names, followed) refers to; once per
    function (a helper shared by a thousand tests is read once)."""
    fn = getattr(fn, "__wrapped__", fn)
    code, namespace = getattr(fn, "__code__", None), getattr(fn, "__globals__", {})
    if not isinstance(code, types.CodeType):
        return Uses()
    if code in _CACHE:
        return _CACHE[code]
    uses = _CACHE[code] = Uses()  # cached before the walk: helpers that call each other end the recursion
    todo = [code]
    while todo:
        inner = todo.pop()
        for name in inner.co_names:
            uses.names.add(name)
            if "." in name:  # an import inside a function ("import crowdkit.aggregation"): a module
                uses.modules.add(name)
            obj = namespace.get(name)
            if isinstance(obj, types.ModuleType):
                uses.modules.add(obj.__name__)
            elif obj is not None and _is_ours(obj):
                uses.update(_uses(obj))
            elif obj is not None and _is_ours_class(obj):  # a helper object of the suite: what its methods use
                for attr in vars(obj if isinstance(obj, type) else type(obj)).values():
                    if _is_ours(attr):
                        uses.update(_uses(attr))
            elif obj is not None:
                uses.modules.add(getattr(obj, "__module__", None) or "")
        for const in inner.co_consts:
            if isinstance(const, types.CodeType):
                todo.append(const)
            elif isinstance(const, str) and len(const) < 80:
                uses.strings.add(const)
    return uses


def uses_of(functions: Iterable[Callable]) -> Uses:
    """What the functions (a test, its fixtures) use, followed through the suite's helpers."""
    uses = Uses()
    for fn in functions:
        uses.update(_uses(fn))
    return uses


@dataclass(frozen=True)
class Tier:
    """Where one test stands: why it is slow (``reasons``; none: it is quick), whether it is kept quick by hand
    (``@pytest.mark.quick``), and the methods whose family it tests on real data (the marker's arguments)."""

    reasons: frozenset[str]
    quick: bool
    covers: tuple[str, ...] = ()

    @property
    def slow(self) -> bool:
        return bool(self.reasons) and not self.quick


def tier_of(item: pytest.Item) -> Tier:
    """The test's tier, from what it, its fixtures and the suite's helpers they call use, and its markers."""
    funcs = [getattr(item, "obj", None)]
    info = getattr(item, "_fixtureinfo", None)
    if info is not None:  # every fixture the test needs, directly or through another fixture
        funcs += [d.func for defs in info.name2fixturedefs.values() for d in defs]
    reasons = uses_of(f for f in funcs if f is not None).reasons()
    reasons |= {why for name, why in FIXTURES.items() if name in getattr(item, "fixturenames", ())}
    reasons |= {why for name, why in MARKERS.items() if item.get_closest_marker(name)}
    if item.get_closest_marker("slow"):
        reasons.add("marked slow")  # by hand: slow by its arithmetic alone
    quick = item.get_closest_marker("quick")
    return Tier(frozenset(reasons), quick is not None, tuple(quick.args) if quick else ())


def quick_case(values: Iterable, chosen: object, *methods: str) -> list:
    """``values`` for ``@pytest.mark.parametrize`` with the one case ``chosen`` kept in the quick tier
    (``@pytest.mark.quick(*methods)``: ``methods`` name the methods whose family it tests on real data).  A tuple is
    the case of several arguments, as parametrize takes it."""
    values = list(values)
    if chosen not in values:  # a renamed case: said at collection, not a quick tier silently without it
        raise ValueError(f"{chosen!r} is not among the cases {values!r}")
    mark = pytest.mark.quick(*methods)
    return [pytest.param(*(v if isinstance(v, tuple) else (v,)), marks=mark) if v == chosen else v for v in values]
