"""crowdagg.crowdkit against the installed crowd-kit itself, on the real datasets: crowd-kit is the oracle.

Both libraries get the same DataFrame; the fitted attributes must be the
same objects a crowd-kit user reads: labels equal exactly (values, index,
order, dtype), probabilities, priors, errors and skills close, with the same
index, columns and dtypes.  crowd-kit's behaviour depends on the installed
pandas (its tie order and row order: sorted under pandas 2, first appearance
under pandas 3; ``errors_`` columns ``str`` under pandas 3), so the test
compares with whatever it does here rather than with our reading of it.

Skipped when crowd-kit is not installed (``pip install -e '.[test]'``
installs it).  Runtime: Dawid-Skene runs ``n_iter=100`` on every dataset
(crowd-kit needs up to 49 iterations, 7 s in all); crowd-kit's one-coin
applies a Python function per (worker, label) row each iteration, so it
runs ``n_iter=100`` (to convergence, at most 7 iterations) on the datasets
where that is cheap and ``n_iter=5`` on the seven where it takes 11 to 25
iterations (trec alone 5 s); the small frames run ``n_iter=20``.  crowd-kit's
GLAD (seconds per iteration) runs once per dataset per session on bluebird,
dog, rte and temp, ``n_iter=2`` (~15 s in all; why two: see the GLAD section).
"""

from __future__ import annotations

import warnings

import pandas as pd
import pytest
from pandas.testing import assert_frame_equal, assert_index_equal, assert_series_equal

from ..conftest import DATASETS


class _CrowdKit:
    """``crowdkit.aggregation``, imported when a test first asks it for a class (its import, a second or more, is
    then the oracle tests' own, not every collection's); a test skips, saying why, where crowd-kit is missing."""

    def __getattr__(self, name: str):
        with warnings.catch_warnings():  # crowd-kit's imports (transformers, nltk) warn about optional extras
            warnings.simplefilter("ignore")
            return getattr(pytest.importorskip("crowdkit.aggregation"), name)


ck = _CrowdKit()

CATEGORICAL = sorted(p.name for p in DATASETS.iterdir() if (p / "labels.csv").is_file() and p.name != "emotion") \
    if DATASETS.is_dir() else []
# n_iter for crowd-kit's one-coin where it takes 11 to 25 iterations to converge (seconds each)
SLOW_ONE_COIN = dict.fromkeys(["bluebird", "dog", "face", "music", "rte", "temp", "trec"], 5)

# Probabilities after up to 100 EM iterations, summed in another order: close, not equal.
TOL = {"rtol": 1e-7, "atol": 1e-9}


def quiet(fit):
    with warnings.catch_warnings():  # crowd-kit's pandas FutureWarnings
        warnings.simplefilter("ignore")
        return fit()


def same_labels(mine: pd.Series, theirs: pd.Series) -> None:
    assert_series_equal(mine, theirs, check_exact=True)


def same_frame(mine: pd.DataFrame, theirs: pd.DataFrame) -> None:
    assert_index_equal(mine.index, theirs.index, exact=True)
    assert_index_equal(mine.columns, theirs.columns, exact=True)
    assert_frame_equal(mine, theirs, check_exact=False, **TOL)


def same_series(mine: pd.Series, theirs: pd.Series) -> None:
    assert_index_equal(mine.index, theirs.index, exact=True)
    assert_series_equal(mine, theirs, check_exact=False, **TOL)


SMALL = {
    # first appearance differs from sorted order for tasks, workers and labels; t2 and t1 are ties
    "text": pd.DataFrame({"task": ["t2", "t2", "t1", "t1", "t3", "t3", "t3"], "worker": ["b", "a", "a", "b", "a", "b", "c"],
                          "label": ["y", "x", "x", "y", "z", "y", "x"]}),
    "int": pd.DataFrame({"task": [5, 5, 3, 3, 4, 4, 4], "worker": [9, 8, 8, 9, 8, 9, 7], "label": [2, 1, 1, 2, 0, 2, 2]}),
    "object text": pd.DataFrame({"task": ["t2", "t2", "t1", "t1"], "worker": ["b", "a", "a", "b"],
                                 "label": ["y", "x", "x", "y"]}, dtype=object),
    "bool": pd.DataFrame({"task": ["t2", "t2", "t1", "t1", "t3"], "worker": ["b", "a", "a", "b", "a"],
                          "label": [True, False, False, True, True]}),
    # ids of mixed types: crowd-kit answers (no TypeError), so do we
    "mixed ids": pd.DataFrame({"task": [1, "a", 2, 1, "a", 2], "worker": ["w1", "w1", "w1", 2, 2, 2],
                               "label": ["x", "y", "x", "y", "y", "x"]}),
    "empty": pd.DataFrame([], columns=["task", "worker", "label"]),
    "mixed labels": pd.DataFrame({"task": ["t1", "t2", "t1", "t2", "t3"], "worker": ["a", "a", "b", "b", "b"],
                                  "label": ["a", 1, 1, 1, "a"]}),
    # pandas' nullable integers: crowd-kit's E-step aligns its Int64-indexed log-prior with object columns, a
    # sorted union; numbers in an object column: idxmax leaves its labels object (it infers text only)
    "nullable int": pd.DataFrame({"task": [5, 5, 3, 3, 4, 4, 4], "worker": [9, 8, 8, 9, 8, 9, 7],
                                  "label": pd.array([2, 1, 1, 2, 0, 2, 2], dtype="Int64")}),
    "nullable tie": pd.DataFrame({"task": [1, 1, 2, 2], "worker": ["a", "b", "a", "b"],
                                  "label": pd.array([2, 0, 0, 2], dtype="Int64")}),
    "object int": pd.DataFrame({"task": [5, 5, 3, 3, 4, 4, 4], "worker": [9, 8, 8, 9, 8, 9, 7],
                                "label": pd.Series([2, 1, 1, 2, 0, 2, 2], dtype=object)}),
}
