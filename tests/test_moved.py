"""The module paths of 0.1 keep working after the layout by concern (crowdagg/_moved.py)."""

from __future__ import annotations

import importlib
import subprocess
import sys
import warnings

import pytest

from crowdagg._moved import MOVED, SPLIT


@pytest.mark.parametrize("old", sorted(MOVED))
def test_an_old_path_is_the_moved_module_itself(old):
    new = importlib.import_module(MOVED[old])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sys.modules.pop(old, None)
        module = importlib.import_module(old)
    if old in SPLIT:  # a view finding each name where it went
        for name, where in SPLIT[old].items():
            assert getattr(module, name) is getattr(importlib.import_module(where), name)
        public = [n for n in dir(new) if not n.startswith("_")]
        assert public and all(getattr(module, n) is getattr(new, n) for n in public)
    else:
        assert module is new  # the same object: names, monkeypatching and isinstance are shared
    assert any(issubclass(w.category, DeprecationWarning) and MOVED[old] in str(w.message) for w in caught)


def test_old_names_are_reachable_as_before():
    code = (
        "import warnings; warnings.simplefilter('ignore')\n"
        "from crowdagg.aggregators import REGISTRY, aggregate, get_method, DawidSkene, MajorityVote\n"
        "from crowdagg.aggregators.ds import DawidSkene as D2, gold_clamp\n"
        "from crowdagg.aggregators.ds import OneCoinDawidSkene\n"
        "from crowdagg.aggregators.base import Aggregator, IterativeAggregator, one_coin_m_step, TieBreaker\n"
        "from crowdagg.workers import from_json, to_json\n"
        "from crowdagg.methods import METHODS, Param, Method, get\n"
        "from crowdagg.io import load_annotations, read_task_labels, output_format\n"
        "from crowdagg.data import AnnotationSet, DUPLICATE_POLICIES\n"
        "from crowdagg.vocab import Vocabulary\n"
        "from crowdagg.memory import check\n"
        "from crowdagg.result import AggregationResult\n"
        "from crowdagg.evaluate import evaluate_labels\n"
        "import crowdagg.columns, crowdagg.platforms, crowdagg.output, crowdagg.render, crowdagg.checks\n"
        "assert D2 is DawidSkene and get_method('ds') is DawidSkene\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "ok\n"


def test_a_missing_old_name_is_an_attribute_error_not_a_crash():
    import crowdagg.io

    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        crowdagg.io.nope  # noqa: B018
    with pytest.raises(ImportError):
        importlib.import_module("crowdagg.aggregators.nope")
