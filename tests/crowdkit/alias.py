"""Run crowd-kit's own tests against :mod:`crowdagg.crowdkit`: a pytest plugin that aliases crowd-kit's modules.

From the root of a crowdagg checkout, with crowd-kit's repository checked
out somewhere (its test files are crowd-kit's, never copied here)::

    CROWDKIT_TESTS=/path/to/crowd-kit/tests python -m pytest -p tests.crowdkit.alias \\
        /path/to/crowd-kit/tests/aggregation/test_ds_aggregation.py ...

With ``CROWDKIT_TESTS`` set (the checkout's ``tests/`` folder), loading the
plugin makes

* ``crowdkit`` and ``crowdkit.aggregation`` crowdagg's
  :mod:`crowdagg.crowdkit.aggregation` (the same class objects), and
  ``crowdkit.aggregation.utils`` :mod:`crowdagg.crowdkit.aggregation.utils`,
  ``crowdkit.metrics`` (``.data``, ``.workers``) :mod:`crowdagg.crowdkit.metrics`;
  a crowd-kit class crowdagg does not offer (yet) is a stand-in whose
  construction fails naming it (:class:`Missing`), so the test that uses
  it fails and the others of its file still run;
* crowd-kit's test package importable beside ours (both are named
  ``tests``: its folder goes first on our package's path, so its
  ``tests.conftest`` and ``tests.aggregation`` are its own), and its
  ``conftest.py`` loaded (the conftest search is cut at the checkout, not
  at this repository);
* ``numpy.float_`` the alias of ``numpy.float64`` that NumPy 2 removed:
  crowd-kit's GLAD and MACE test files name it in annotations evaluated
  at import.

Without ``CROWDKIT_TESTS`` the plugin does nothing.
``tests/crowdkit/test_alias.py`` runs crowd-kit's classification tests
this way when ``CROWDKIT_TESTS`` is set (skipped otherwise) and holds the
list of those that fail, each with its reason (:data:`EXPECTED_FAILURES`).
"""

from __future__ import annotations

import os
import sys
import types
from pathlib import Path
from typing import Any

import pytest

#: Where the checkout's tests are (its ``tests/`` folder); unset: the plugin does nothing.
ENV = "CROWDKIT_TESTS"

#: crowd-kit 1.4.2's public names under ``crowdkit.aggregation`` (its ``__all__``).
CROWDKIT_NAMES = (
    "base", "BradleyTerry", "ClosestToAverage", "DawidSkene", "OneCoinDawidSkene", "GLAD", "GoldMajorityVote",
    "HRRASA", "KOS", "MACE", "MMSR", "MajorityVote", "NoisyBradleyTerry", "RASA", "ROVER", "SegmentationEM",
    "SegmentationMajorityVote", "SegmentationRASA", "TextHRRASA", "TextRASA", "Wawa", "ZeroBasedSkill",
    "BinaryRelevance",
)


class Missing:
    """A crowd-kit class that :mod:`crowdagg.crowdkit` does not offer: naming it imports, constructing it fails."""

    crowdkit_name = "?"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise NotImplementedError(f"crowdagg.crowdkit has no {self.crowdkit_name} (crowd-kit's "
                                  f"crowdkit.aggregation.{self.crowdkit_name})")


def stand_in(name: str) -> type:
    """A :class:`Missing` subclass named ``name``."""
    return type(name, (Missing,), {"crowdkit_name": name, "__module__": "crowdkit.aggregation"})


def aliases() -> dict[str, types.ModuleType]:
    """The modules to install under crowd-kit's names: ``crowdkit``, ``crowdkit.aggregation`` (crowdagg's classes,
    and a :func:`stand_in` for each crowd-kit class crowdagg lacks), ``crowdkit.aggregation.utils``,
    ``crowdkit.metrics`` and its ``data`` and ``workers``."""
    from crowdagg.crowdkit import aggregation
    from crowdagg.crowdkit.aggregation import utils

    module = types.ModuleType("crowdkit.aggregation", aggregation.__doc__)
    module.__dict__.update({name: getattr(aggregation, name) for name in aggregation.__all__})
    missing = [n for n in CROWDKIT_NAMES if n[0].isupper() and n not in aggregation.__all__]
    module.__dict__.update({name: stand_in(name) for name in missing})
    module.__all__ = [*aggregation.__all__, *missing]  # type: ignore[attr-defined]
    module.__path__ = []  # type: ignore[attr-defined]  # a package: crowdkit.aggregation.utils is below it
    module.utils = utils  # type: ignore[attr-defined]
    from crowdagg.crowdkit import metrics
    from crowdagg.crowdkit.metrics import data, workers

    package = types.ModuleType("crowdkit", "crowd-kit's names, aliased to crowdagg.crowdkit (tests/crowdkit/alias.py)")
    package.__path__ = []  # type: ignore[attr-defined]
    package.aggregation = module  # type: ignore[attr-defined]
    package.metrics = metrics  # type: ignore[attr-defined]
    return {"crowdkit": package, "crowdkit.aggregation": module, "crowdkit.aggregation.utils": utils,
            "crowdkit.metrics": metrics, "crowdkit.metrics.data": data, "crowdkit.metrics.workers": workers}


def install(checkout_tests: Path) -> None:
    """Alias crowd-kit's modules, put its test package beside ours, and restore ``numpy.float_``."""
    import numpy as np

    import tests

    sys.modules.update(aliases())
    if str(checkout_tests) not in tests.__path__:
        tests.__path__.insert(0, str(checkout_tests))
    if not hasattr(np, "float_"):
        np.float_ = np.float64  # type: ignore[attr-defined]


def _checkout() -> Path | None:
    where = os.environ.get(ENV)
    if not where:
        return None
    path = Path(where).resolve()
    if not (path / "conftest.py").is_file():
        raise pytest.UsageError(f"{ENV}={where} is no crowd-kit tests/ folder (it has no conftest.py)")
    return path


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config) -> None:
    checkout = _checkout()
    if checkout is None:
        return
    install(checkout)
    # The conftest search stops at --confcutdir, by default this repository: crowd-kit's conftest.py lies outside
    early_config.known_args_namespace.confcutdir = str(checkout.parent)
