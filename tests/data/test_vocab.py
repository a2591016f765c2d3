"""Vocabularies: lookup and encoding against known names (codes shared across batches and partitions)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from crowdagg.data.vocab import Vocabulary
from crowdagg.errors import UsageError


def test_lookup_gives_codes_and_minus_one_for_unknown_names():
    v = Vocabulary.from_strings(["w3", "w1", "w2"])
    np.testing.assert_array_equal(v.lookup(["w2", "zz", "w3", "w2"]), [2, -1, 0, 2])
    np.testing.assert_array_equal(v.lookup(pa.chunked_array([["w1"], ["x", "w1"]])), [1, -1, 1])
    assert v.lookup([]).shape == (0,)


def test_extend_keeps_known_codes_and_appends_new_names_in_first_appearance_order():
    v = Vocabulary.from_strings(["a", "b"], dtype="int64")
    codes, ext = v.extend(["c", "b", "d", "c", "a"])
    np.testing.assert_array_equal(codes, [2, 1, 3, 2, 0])
    assert ext.tolist() == ["a", "b", "c", "d"] and ext.dtype == "int64"
    same_codes, same = v.extend(["b", "a"])
    assert same is v and same_codes.tolist() == [1, 0]


def test_extend_agrees_with_a_slow_dictionary(rng):
    known = [f"w{i}" for i in rng.permutation(50)[:30]]
    values = [f"w{i}" for i in rng.integers(0, 60, 500)]
    codes, ext = Vocabulary.from_strings(known).extend(values)
    table = {n: i for i, n in enumerate(known)}
    for name in values:
        table.setdefault(name, len(table))
    assert ext.tolist() == list(table)
    np.testing.assert_array_equal(codes, [table[n] for n in values])


@pytest.mark.parametrize(("names", "message"), [(["a", "", "b"], "blank name"), (["a", "b", "a"], "'a' twice")])
def test_a_given_vocabulary_is_checked(names, message):
    with pytest.raises(UsageError, match=message):
        Vocabulary.from_strings(names).check_distinct("worker")


def test_extend_and_lookup_take_any_arrow_string_array():
    v = Vocabulary.from_strings(["a"])
    codes, ext = v.extend(pa.array(["z", "a"]).dictionary_encode())
    assert ext.tolist() == ["a", "z"] and codes.tolist() == [1, 0]  # the values, not the whole dictionary
    codes, ext = v.extend(pa.array(["z", "q"]).dictionary_encode().slice(0, 1))
    assert ext.tolist() == ["a", "z"]
    codes, ext = v.extend(pa.array(["b", "a"], type=pa.large_string()))
    assert ext.tolist() == ["a", "b"] and v.lookup(pa.array(["a", None])).tolist() == [0, -1]
    with pytest.raises(UsageError, match="missing"):
        v.extend(pa.array(["a", None]))
    with pytest.raises(UsageError, match="blank name"):
        Vocabulary.from_strings(["a", "  "]).check_distinct("worker")
