"""The input readers against golden outcomes recorded from commit 5bc0f43 (see tests/make_golden.py).

* ``test_case``: 120 small awkward inputs (tests/golden/inputs) read with the
  recorded keyword arguments; the outcome -- codes, names, classes,
  duplicates, dtypes and every warning in order, or the error type and
  message -- must equal tests/golden/cases/NAME.json exactly.
* ``test_dataset``: each real dataset (../shared/datasets) converted to CSV,
  TSV, JSON, JSON Lines, a ``{task: {worker: label}}`` mapping and gzip CSV,
  read back, and compared by digest with tests/golden/datasets.json.

Another reader can be checked against the same goldens by naming its entry
points (same signatures as :func:`crowdagg.io.read.load_annotations` and
:func:`crowdagg.io.read.read_task_labels`)::

    CROWDAGG_GOLDEN_LOAD=pkg.module:load CROWDAGG_GOLDEN_TRUTH=pkg.module:read_truth \\
        python -m pytest -q tests/test_ingest_golden.py

or from Python with :func:`tests.golden.harness.run_case`.  Never re-record
the goldens to make a new reader pass: a difference is a change of behaviour
to decide on.
"""

from __future__ import annotations

import importlib
import json
import os
from typing import Any

import pytest

from ..golden import harness

CASES = harness.load_cases()


def _entry_point(variable: str) -> Any:
    spec = os.environ.get(variable)
    if not spec:
        return None
    module, _, name = spec.partition(":")
    return getattr(importlib.import_module(module), name)


LOAD = _entry_point("CROWDAGG_GOLDEN_LOAD")
TRUTH = _entry_point("CROWDAGG_GOLDEN_TRUTH")


def test_goldens_are_present():
    assert len(CASES) >= 60
    assert len({c["name"] for c in CASES}) == len(CASES)
    for c in CASES:
        assert (harness.INPUTS / c["input"]).is_file(), c["input"]
    assert harness.DATASETS_GOLDEN.is_file()


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_case(case):
    got = harness.run_case(case, load_annotations=LOAD, read_task_labels=TRUTH)
    assert got == case["outcome"]


DATASET_GOLDENS: dict[str, Any] = (
    json.loads(harness.DATASETS_GOLDEN.read_text(encoding="utf-8")) if harness.DATASETS_GOLDEN.is_file() else {}
)


@pytest.mark.parametrize("key", sorted(DATASET_GOLDENS))
def test_dataset(key, datasets_dir, tmp_path):
    if not (datasets_dir / key.split("/")[0]).is_dir():
        pytest.skip(f"dataset {key.split('/')[0]} not in {datasets_dir}")
    got = harness.run_dataset_key(datasets_dir, key, tmp_path, load_annotations=LOAD, read_task_labels=TRUTH)
    assert got == DATASET_GOLDENS[key]
