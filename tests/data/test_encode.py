"""The block-by-block name encoder (crowdagg.data.encode) against a slow dict-based twin.

The codes must be those of one dictionary encoding of the whole column --
order of first appearance over all blocks -- whatever the block split, the
path (direct-address table or hash table), the table's growth, or how the
hash kernel reads a name's bytes (a word at a time, the last word from
either side of the buffer).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given
from hypothesis import strategies as st

from crowdagg.data.encode import ColumnsEncoder, NameEncoder, _string_chunks


def reference(values: list[str]) -> tuple[list[int], list[str]]:
    """(codes, names) in order of first appearance: one Python dict, one step a name."""
    seen: dict[str, int] = {}
    codes = [seen.setdefault(v, len(seen)) for v in values]
    return codes, list(seen)


def encode_in_blocks(values: list[str] | pa.Array, cuts: list[int], enc: NameEncoder | None = None):
    arr = values if isinstance(values, pa.Array) else pa.array(values, type=pa.string())
    enc = enc or NameEncoder()
    bounds = sorted({0, len(arr), *(c for c in cuts if 0 <= c <= len(arr))})
    parts = [enc.add(arr.slice(lo, hi - lo)) for lo, hi in zip(bounds, bounds[1:])]
    codes = np.concatenate(parts) if parts else np.zeros(0, np.int32)
    return codes, enc


def assert_like_reference(values: list[str], cuts: list[int]) -> NameEncoder:
    codes, enc = encode_in_blocks(values, cuts)
    want_codes, want_names = reference(values)
    assert codes.dtype == np.int32
    assert codes.tolist() == want_codes
    assert enc.names().to_pylist() == want_names
    assert enc.n == len(want_names)
    return enc


# Names that stress the word-at-a-time hash and compare: empty, 1 to 7 bytes (a tail only), exactly 8 and
# 16 (no tail), > 8 and not a multiple of 8, > 64, multi-byte UTF-8, and pairs differing only in the last
# byte (of the first word, of a tail, of a long name).
SPECIAL = [
    "", "a", "b", "ab", "ac", "abcdefg", "abcdefh", "abcdefgh", "abcdefgi", "abcdefgh1", "abcdefgh2",
    "abcdefghijklmnop", "abcdefghijklmnoq", "t000017", "t0000017", "t00000017",
    "x" * 64, "x" * 65, "x" * 64 + "a", "x" * 64 + "b", "y" * 200 + "1", "y" * 200 + "2",
    "é", "e\u0301", "wörker_7", "wörker_8", "漢字", "漢字漢字漢字", "\U0001f600" * 3, "a\x00b", "a\x00c",
    "550e8400-e29b-41d4-a716-446655440000", "550e8400-e29b-41d4-a716-446655440001", "ann@example.org",
]

names_st = st.one_of(st.sampled_from(SPECIAL), st.text(max_size=90), st.text(alphabet="ab", max_size=20))


@given(pool=st.lists(names_st, min_size=1, max_size=40, unique=True), data=st.data())
def test_any_block_split_gives_the_codes_and_names_of_a_dict(pool, data):
    picks = data.draw(st.lists(st.integers(0, len(pool) - 1), max_size=300))
    values = [pool[i] for i in picks]
    cuts = data.draw(st.lists(st.integers(0, len(values)), max_size=6))
    assert_like_reference(values, cuts)


@given(prefix=st.sampled_from(["t", "", "wörker_"]), data=st.data())
def test_a_switch_from_prefixed_ids_to_the_hash_table_keeps_the_codes(prefix, data):
    ints = data.draw(st.lists(st.integers(0, 500), min_size=1, max_size=200))
    values = [f"{prefix}{v}" for v in ints]
    odd = data.draw(st.sampled_from([f"{prefix}007", "zz", "", f"{prefix}x", "x" * 30]))
    at = data.draw(st.integers(1, len(values)))
    values.insert(at, odd)
    values += [f"{prefix}{v}" for v in ints[::3]] + [odd]
    cuts = [at, *data.draw(st.lists(st.integers(0, len(values)), max_size=4))]
    assert assert_like_reference(values, cuts).mode == "hash"


def test_prefixed_ids_then_another_form_in_a_later_block():
    enc = NameEncoder()
    first = enc.add(pa.array(["t5", "t2", "t5", "t10"]))
    assert enc.mode == "prefixed"
    second = enc.add(pa.array(["t2", "t0005", "t10", "u1", "t7"]))
    assert enc.mode == "hash"
    assert first.tolist() == [0, 1, 0, 2]
    assert second.tolist() == [1, 3, 2, 4, 5]
    assert enc.names().to_pylist() == ["t5", "t2", "t10", "t0005", "u1", "t7"]


@pytest.mark.parametrize(
    ("make", "fast"),
    [
        (lambda r: f"t{r}", True),
        (lambda r: str(r), True),
        (lambda r: f"wörker_{r}", True),
        (lambda r: f"t{r:03d}", False),  # leading zeros: t007 is not t7
        (lambda r: f"t{r}" if r % 1000 else "x1", False),  # another prefix
        (lambda r: f"t{r}" if r % 1000 else "t", False),  # no digits
        (lambda r: f"t{r * 10**9}", False),  # too sparse for a table
        (lambda r: f"t{r}" if r % 999 else f"t{10**19}", False),  # too many digits
    ],
)
def test_prefix_and_integer_ids_take_the_table_and_encode_like_hashing(make, fast):
    from crowdagg.data.vocab import hash_encode

    rng = np.random.default_rng(3)
    values = [make(int(r)) for r in rng.integers(0, 30_000, 120_000)]
    arr = pa.chunked_array([pa.array(values[:50_000]), pa.array(values[50_000:])])
    codes, enc = encode_in_blocks(arr.combine_chunks(), [50_000, 90_000])
    assert enc.mode == ("prefixed" if fast else "hash")
    ref_codes, ref_names = hash_encode(arr)  # Arrow's own dictionary encoding of the whole column
    np.testing.assert_array_equal(codes, ref_codes)
    assert enc.names().equals(ref_names)


# --------------------------------------------------------------------------- the hash table's edges
def test_growth_at_the_load_limits_in_and_across_blocks():
    # A small table (in cache) holds 1/4 of its slots: 16 slots hold 4 names, the 5th doubles it.
    names = [f"id-{i:04d}" for i in range(45)]
    for cut in (0, 3, 4, 5, 8, 9, 16, 17, 44):
        values = names[:30] + names[::-1] + names[5:35]
        enc = assert_like_reference(values, [cut, cut + 1, 75])
        assert enc.slots.shape[0] == 256  # 45 names: 1/4 of 128 is 32
    enc = NameEncoder()
    sizes = []
    for i, name in enumerate(names[:21]):
        assert enc.add(pa.array([name, names[0]])).tolist() == [i, 0]
        sizes.append(enc.slots.shape[0])
    assert sizes == [16] * 4 + [32] * 4 + [64] * 8 + [128] * 5


def test_growth_past_the_small_tables_at_five_eighths_load():
    from crowdagg.data.encode import _SMALL_SLOTS

    # The last small table (2**16 slots) holds 2**14 names; the next (2**17) 5/8 of its slots: 81,920.
    assert _SMALL_SLOTS == 1 << 16
    n = 81_921
    arr = pc.binary_join_element_wise("u-", pc.cast(pa.array(np.arange(n)[::-1]), pa.string()), "-x", "")  # hashed
    values = arr.to_pylist()
    sizes = []
    enc = NameEncoder()
    for lo, hi in ((0, 16_384), (16_384, 16_385), (16_385, 81_920), (81_920, n)):
        assert enc.add(arr.slice(lo, hi - lo)).tolist() == list(range(lo, hi))
        sizes.append(enc.slots.shape[0])
    assert sizes == [1 << 16, 1 << 17, 1 << 17, 1 << 18]
    # Again in one block, the table doubling mid-block, then every name met again.
    codes, enc = encode_in_blocks(values + values[::-1], [])
    assert codes.tolist() == list(range(n)) + list(range(n))[::-1]
    assert enc.names().to_pylist() == values and enc.slots.shape[0] == 1 << 18


def _equal_tag_pairs(n: int, prefix: str, suffix: str) -> tuple[pa.Array, np.ndarray, np.ndarray]:
    """``n`` names ``prefix`` + 7 digits + ``suffix`` (one length), and pairs (i, j) of them whose hashes
    share the tag (bits 32..62) and the 4 low bits (the home slot in a 16-slot table): the byte compare
    alone tells them apart."""
    digits = pc.cast(pa.array(np.arange(10**6, 10**6 + n)), pa.string())
    names = pc.binary_join_element_wise(prefix, digits, suffix, "")
    enc = NameEncoder()
    enc.mode = "hash"
    enc.add(names)
    assert enc.n == n
    h = enc.hashes[:n]
    key = (((h >> 32) & 0x7FFFFFFF) << 4) | (h & 15)
    order = np.argsort(key, kind="stable")
    same = np.flatnonzero(key[order][1:] == key[order][:-1])
    return names, order[same], order[same + 1]


# The names differ in their first word only (a 17-byte name: the tail is the same), or in the tail only.
@pytest.mark.parametrize(("prefix", "suffix"), [("", "-abcdefghi"), ("abcdefgh", "")])
def test_names_with_equal_tags_and_home_slots_get_their_own_codes(prefix, suffix):
    names, first, second = _equal_tag_pairs(1_500_000, prefix, suffix)
    assert len(first) >= 3, "the search found too few colliding pairs to test with"
    for i, j in zip(first[:8].tolist(), second[:8].tolist()):
        a, b = names[i].as_py(), names[j].as_py()
        assert a != b and len(a) == len(b)
        # A fresh encoder: a 16-slot table where b's probe meets a first (same home slot, same tag).
        values = [a, b, a, "other", b, b, a]
        for cut in (1, 2, 4):
            enc = assert_like_reference(values, [cut])
            assert enc.slots.shape[0] == 16


def test_a_tail_read_from_either_side_of_the_buffer_hashes_the_same():
    from crowdagg.kernels.ingest import _hash_bytes, _same_bytes

    for name in (b"", b"x", b"xyz", b"abcdefg", b"abcdefgh", b"abcdefghijk", b"\xc3\xa9" * 11):
        n = len(name)
        alone = np.frombuffer(name, np.uint8)  # fewer than 8 bytes: byte by byte
        ahead = np.frombuffer(name + b"q" * 20, np.uint8)  # eight bytes from the tail's start: masked
        behind = np.frombuffer(b"q" * 20 + name, np.uint8)  # at the end of the buffer: shifted down
        h = _hash_bytes(ahead, 0, n)
        assert _hash_bytes(alone, 0, n) == h == _hash_bytes(behind, 20, 20 + n)
        assert _same_bytes(alone, 0, behind, 20, n) and _same_bytes(behind, 20, ahead, 0, n)
        if n:
            other = np.frombuffer(b"q" * 20 + name[:-1] + bytes([name[-1] ^ 1]), np.uint8)
            assert not _same_bytes(other, 20, ahead, 0, n)
            assert _hash_bytes(other, 20, 20 + n) != h
    # One name met through each of the three reads: one code.
    enc = NameEncoder()
    codes = [enc.add(pa.array(v)).tolist() for v in (["xyz"], ["xyz", "q" * 20], ["q" * 20, "xyz"], ["a", "xyz"])]
    assert codes == [[0], [0, 1], [1, 0], [2, 0]]
    # A slice: the backward read may see bytes before the slice's first name, never past its buffer.
    arr = pa.array(["qqqqqqqqqq", "ab", "cd", "ab"])
    assert encode_in_blocks(arr.slice(1), [1])[0].tolist() == [0, 1, 0]


def test_many_padded_ids_in_random_blocks_like_a_dict():
    # Enough names for the batched lookups, several growths and a table out of the first-level cache.
    rng = np.random.default_rng(7)
    ints = rng.integers(0, 60_000, 300_000)
    arr = pc.utf8_lpad(pc.cast(pa.array(ints), pa.string()), 9, "0")
    arr = pc.binary_join_element_wise("t", arr, "")
    values = arr.to_pylist()
    cuts = sorted(rng.integers(0, len(values), 7).tolist())
    codes, enc = encode_in_blocks(arr, cuts)
    want_codes, want_names = reference(values)
    assert np.array_equal(codes, np.array(want_codes, np.int32))
    assert enc.names().to_pylist() == want_names


# --------------------------------------------------------------------------- forgetting names
@given(data=st.data())
def test_truncate_forgets_the_names_after_the_mark(data):
    pool = [*SPECIAL, *(f"t{i:05d}" for i in range(40))]
    pick = st.lists(st.sampled_from(pool), max_size=120)
    before, lost, after = data.draw(pick), data.draw(pick), data.draw(pick)
    enc = NameEncoder()
    enc.mode = "hash"
    _, enc = encode_in_blocks(before, [len(before) // 2], enc)
    mark = enc.n
    encode_in_blocks(lost, [len(lost) // 3], enc)
    enc.truncate(mark)
    got, enc = encode_in_blocks(after, [len(after) // 2], enc)
    want_codes, want_names = reference(before + after)
    assert got.tolist() == want_codes[len(before):]
    assert enc.names().to_pylist() == want_names


def test_columns_encoder_rollback_on_the_hash_path_and_on_two_threads(monkeypatch):
    from crowdagg.core import threads

    rng = np.random.default_rng(11)
    rows = 70_000  # past the two-thread threshold (65,536)

    def block(lo: int) -> list[pa.Array]:
        t = pc.binary_join_element_wise("task-", pc.cast(pa.array(rng.integers(lo, lo + 30_000, rows)), pa.string()), "")
        w = pc.binary_join_element_wise("w", pc.cast(pa.array(rng.integers(0, 300, rows)), pa.string()), "")
        y = pa.array(rng.choice(["x", "y", "é"], rows))
        return [t, w, y]

    blocks = [block(0), block(20_000), block(10_000)]
    results = []
    for count in (1, 2):
        monkeypatch.setattr(threads, "count", lambda count=count: count)
        enc = ColumnsEncoder()
        enc.add(*blocks[0])
        mark = enc.mark()
        enc.add(*blocks[1])
        enc.rollback(mark)
        enc.add(*blocks[2])
        results.append(([e.names().to_pylist() for e in enc.encoders], [c.take().tolist() for c in enc.codes]))
        for k in range(3):
            values = blocks[0][k].to_pylist() + blocks[2][k].to_pylist()
            want_codes, want_names = reference(values)
            assert results[-1][0][k] == want_names
            assert results[-1][1][k] == want_codes
    assert results[0] == results[1]


def test_string_chunks_views_skip_empty_chunks():
    arr = pa.chunked_array([pa.array([], pa.string()), pa.array(["ab", "c"]), pa.array([], pa.string())])
    chunks = _string_chunks(arr)
    assert len(chunks) == 1
    assert chunks[0][0].tolist() == [0, 2, 3] and bytes(chunks[0][1]) == b"abc"
