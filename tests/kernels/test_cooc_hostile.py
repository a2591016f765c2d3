"""The public cooc entry points called with hostile arguments: a clear crowdagg error, never a numba typing
error, an AttributeError, or a look-up whose ids are not the keys' positions."""

from __future__ import annotations

import numpy as np
import pytest

from crowdagg.data.annotations import AnnotationSet
from crowdagg.engine import LocalEngine
from crowdagg.errors import DataError, UsageError
from crowdagg.kernels import cooc


@pytest.fixture(scope="module")
def data():
    return AnnotationSet.from_codes([0, 0, 0, 1, 1, 1, 2, 2], [0, 1, 2, 0, 1, 2, 0, 1], [0, 1, 0, 1, 1, 0, 1, 1])


# a space past LOOKUP_MIN_BYTES' bitmap: the hash-table form, which read its keys unchecked
HASHED = 10**12


@pytest.mark.parametrize("space", [8, HASHED])
@pytest.mark.parametrize(("keys", "error", "match"), [
    (np.array([5, 3, 1]), DataError, "sorted and unique"),
    (np.array([3, 3, 3]), DataError, "sorted and unique"),
    (np.array([-5, 3]), DataError, "outside"),
    (np.array([1.5, 3.0]), UsageError, "integer keys"),
    (np.array([[1, 3]]), UsageError, "1-D"),
])
def test_key_lookup_refuses_keys_it_cannot_index(keys, error, match, space):
    with pytest.raises(error, match=match):
        cooc.key_lookup(keys, space)


def test_key_lookup_refuses_keys_past_a_hashed_space():
    with pytest.raises(DataError, match="outside"):
        cooc.key_lookup(np.array([3, 10**15]), HASHED)


@pytest.mark.parametrize("space", [-5, 8.5, "x", True])
def test_key_lookup_refuses_a_space_that_is_not_a_count(space):
    with pytest.raises(UsageError, match="space"):
        cooc.key_lookup(np.array([1, 3]), space)


def test_key_lookup_takes_a_list_of_sorted_keys_as_an_array():
    a = cooc.key_lookup([1, 3], 8)
    b = cooc.key_lookup(np.array([1, 3], dtype=np.int64), 8)
    assert all((x is None and y is None) or np.array_equal(x, y) for x, y in zip(a, b))


@pytest.mark.parametrize("n_units", ["3", 3.7, True])
def test_triple_statistics_refuses_n_units_that_is_not_an_integer(data, n_units):
    with pytest.raises(UsageError, match="n_units"):
        cooc.triple_statistics(LocalEngine(data), units=np.array([0, 1, 2]), n_units=n_units)


@pytest.mark.parametrize("fn", [cooc.label_counts, cooc.triple_statistics, cooc.co_occurrence, cooc.pair_index])
def test_an_annotation_set_in_place_of_an_engine_is_a_usage_error(data, fn):
    for wrong in (data, None):
        with pytest.raises(UsageError, match="LocalEngine"):
            fn(wrong)


@pytest.mark.parametrize("fn", ["label_block", "triple_bound_block", "triple_index_block", "triple_stats_block",
                                "bound_block", "index_block", "stats_block"])
@pytest.mark.parametrize("part", [None, "part", object()])
def test_a_block_function_given_no_partition_is_a_usage_error(fn, part):
    with pytest.raises(UsageError, match="a block function takes a partition"):
        getattr(cooc, fn)(part, 0, None, False)
