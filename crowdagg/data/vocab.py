"""Vocabularies: the names behind task, worker and class codes, kept as Arrow arrays.

A :class:`Vocabulary` maps codes ``0..n-1`` to names.  The names live in one
Arrow ``string`` array (no Python object per name), in order of first
appearance in the input, so 10 million task ids cost their bytes plus one
offset each.  ``dtype`` remembers the type the ids had before they became
text (``"int64"`` for an integer DataFrame or Parquet column, ``None`` for
text), so that a later view can give them back in that type.

Names are always text, by one rule whatever the source: a CSV cell is its
text; a typed DataFrame or Parquet column becomes text as Python writes the
value -- integers in decimal, floats as their shortest round-trip text
(``repr``), booleans ``True``/``False``.

Missing values follow one rule too, applied here (:func:`as_strings`) for
every reader -- CSV, TSV, JSON, JSON Lines, Parquet, DataFrames and lists of
records: a null (JSON ``null``, an Arrow null), ``None``, a float NaN (a
Parquet or DataFrame float column, JSON's ``NaN``), ``pd.NA`` and ``NaT``
become the blank name ``""``, as an empty or whitespace-only cell does once
stripped.  Text is never read as missing: a CSV cell ``NA`` or ``nan`` is a
name.  What a blank name means is decided by
:meth:`crowdagg.data.annotations.AnnotationSet.from_names` (a blank label is a skipped
question; a blank task or worker is an error).

A name must be one value of valid text: a nested value (a list, a mapping,
a Parquet list or struct column), bytes that are not UTF-8, a lone UTF-16
surrogate (``"\\ud800"`` in JSON) or a NUL character is refused with
:class:`InvalidName`, which readers turn into an error naming the file, the
line or row and the column.

The helpers below work on the distinct names (a dictionary), never on rows:
stripping surrounding whitespace, spotting blank names and names that spell
a header cell.

Encoding (codes ``0..n-1`` in order of first appearance) lives in
:mod:`crowdagg.data.encode`, which the readers feed a block at a time;
:func:`encode` here is its one-column form, kept for the readers' small
helper columns (platform exports' status and control columns).
:func:`hash_encode` is Arrow's dictionary encoding, the reference the
encoder is tested against.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import cached_property
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import DataError
from .encode import arrow_of as arrow_of  # defined beside the encoder, which builds names with it

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa

class InvalidName(DataError):
    """A value that cannot be a name: ``row`` (0-based, ``None`` for the whole column) and ``reason``.

    Raised by :func:`as_strings` and :func:`invalid_names`; callers that know
    the file, the line and the column re-raise it worded with them.
    """

    def __init__(self, row: int | None, reason: str, role: str = "name") -> None:
        where = f"at row {row}" if row is not None else "column"
        super().__init__(f"{role} {where}: {reason}")
        self.row = row
        self.reason = reason


#: Every character Python's ``str.strip()`` removes, as an RE2 character class.
_PY_SPACE = "".join(chr(c) for c in range(0x3001) if chr(c).isspace())
_SPACE_CLASS = "[" + "".join(f"\\x{{{ord(c):x}}}" for c in _PY_SPACE) + "]"
_EDGE_SPACE_RE = f"^{_SPACE_CLASS}|{_SPACE_CLASS}$"


class Vocabulary:
    """Names for codes ``0..n-1``: an Arrow string array plus the ids' original dtype.

    Parameters
    ----------
    names : pyarrow string array, shape (n,)
        Distinct names, no nulls.
    dtype : str or None
        The dtype the ids had before they became text (DataFrame or Parquet
        input), ``None`` for text.

    ``len(v)``, ``v[i]`` (a str), ``v[rows]`` (an object ndarray) and
    ``v.to_numpy()`` (an object ndarray of all names, built once on first
    use) give the names to Python; writers use :attr:`names` directly.
    """

    __slots__ = ("names", "dtype", "__dict__")

    def __init__(self, names: pa.Array, dtype: str | None = None) -> None:
        import pyarrow as pa

        if isinstance(names, pa.ChunkedArray):
            names = names.combine_chunks()
        if names.type != pa.string():
            names = names.cast(pa.string())
        self.names = names
        self.dtype = dtype

    @classmethod
    def from_strings(cls, names: Iterable[str] | np.ndarray, dtype: str | None = None) -> Vocabulary:
        import pyarrow as pa

        values = names if isinstance(names, np.ndarray) else list(names)
        return cls(pa.array(values, type=pa.string()), dtype)

    @classmethod
    def range(cls, n: int) -> Vocabulary:
        """Names ``"0" .. str(n-1)`` (codes given without names)."""
        import pyarrow as pa
        import pyarrow.compute as pc

        return cls(pc.cast(arrow_of(np.arange(n, dtype=np.int64)), pa.string()))

    def __len__(self) -> int:
        return len(self.names)

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, (int, np.integer)):
            return self.names[int(index)].as_py()
        rows = np.asarray(index)
        if rows.dtype == bool:
            rows = np.flatnonzero(rows)
        return objects_of(take(self.names, rows))

    def __iter__(self) -> Any:
        return iter(self.to_numpy().tolist())

    def __repr__(self) -> str:
        shown = ", ".join(repr(n) for n in self.names[:3].to_pylist())
        more = ", ..." if len(self) > 3 else ""
        return f"Vocabulary([{shown}{more}], n={len(self)}" + (f", dtype={self.dtype!r})" if self.dtype else ")")

    @cached_property
    def _numpy(self) -> np.ndarray:
        out = objects_of(self.names)
        out.setflags(write=False)
        return out

    def to_numpy(self) -> np.ndarray:
        """All names as a read-only object ndarray of str, shape (n,) (built once, on first use)."""
        return self._numpy

    def tolist(self) -> list[str]:
        return self.to_numpy().tolist()

    def index(self, name: str) -> int:
        """Code of ``name``; ValueError if absent."""
        import pyarrow.compute as pc

        i = pc.index(self.names, name).as_py()
        if i < 0:
            raise ValueError(name)
        return int(i)

    def equals(self, other: Vocabulary) -> bool:
        return self.dtype == other.dtype and self.names.equals(other.names)

    def lookup(self, values: Any) -> np.ndarray:
        """Codes of ``values`` in this vocabulary, -1 where absent: int64, shape (len(values),).

        ``values``: an Arrow string array or a sequence of str.  One hash
        pass in Arrow (``index_in``), no Python object per value.
        """
        import pyarrow.compute as pc

        found = pc.fill_null(pc.index_in(_plain_strings(values), value_set=self.names), -1)
        return numpy_of(found).astype(np.int64, copy=False)

    def extend(self, values: Any) -> tuple[np.ndarray, Vocabulary]:
        """Encode ``values`` against this vocabulary: ``(codes, extended)``.

        Names already here keep their codes; new ones are appended in order
        of first appearance.  Sets encoded against one vocabulary (the
        partitions of a data set, batches labelled by known workers) thus
        agree on their codes.  ``codes``: int64, shape (len(values),);
        ``extended`` is ``self`` when nothing was new.
        """
        from ..errors import UsageError

        arr = _plain_strings(values)
        if arr.null_count:
            raise UsageError("a name to encode is missing (null)")
        codes = self.lookup(arr)
        new = np.flatnonzero(codes < 0)
        if new.size == 0:
            return codes, self
        new_codes, new_names = encode(take(arr, new))
        codes[new] = new_codes.astype(np.int64) + len(self)
        return codes, Vocabulary(concat([self.names, new_names]), self.dtype)

    def check_distinct(self, what: str) -> None:
        """A :class:`~crowdagg.errors.UsageError` if a name is blank or given twice (a vocabulary given by a user)."""
        import pyarrow.compute as pc

        from ..errors import UsageError

        if self.names.null_count or blank(strip(self.names)[0]).any():
            raise UsageError(f"the {what} vocabulary has a blank name")
        bad = invalid_names(self.names)
        if bad is not None:
            raise UsageError(f"name {bad[0] + 1} of the {what} vocabulary {bad[1]}")
        if pc.count_distinct(self.names).as_py() != len(self):
            counts = pc.value_counts(self.names)
            twice = counts.field("values").filter(pc.greater(counts.field("counts"), 1))[0].as_py()
            raise UsageError(f"the {what} vocabulary lists {twice!r} twice")


def _plain_strings(values: Any) -> pa.Array:
    """Names as one plain Arrow ``string`` array: Arrow arrays of any string type (dictionary, large,
    chunked) are decoded and cast, Python sequences converted."""
    import pyarrow as pa

    if not isinstance(values, (pa.Array, pa.ChunkedArray)):
        return pa.array(list(values), type=pa.string())
    arr = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
    if pa.types.is_dictionary(arr.type):
        arr = arr.dictionary_decode()
    return arr if arr.type == pa.string() else arr.cast(pa.string())


# --------------------------------------------------------------------------- Arrow to numpy
def numpy_of(arr: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """An Arrow integer, float or boolean array without nulls as a numpy array.

    Zero-copy for numbers (one copy for booleans, which Arrow packs in
    bits).  Unlike ``Array.to_numpy`` it never imports pandas (150 ms of a
    small run's start-up).
    """
    import pyarrow as pa

    if isinstance(arr, pa.ChunkedArray):
        parts = [numpy_of(c) for c in arr.chunks]
        if not parts:
            return np.zeros(0, dtype=arr.type.to_pandas_dtype())
        return parts[0] if len(parts) == 1 else np.concatenate(parts)
    if arr.null_count:
        raise ValueError("numpy_of: the array has nulls")
    n, off = len(arr), arr.offset
    buf = arr.buffers()[1]
    if pa.types.is_boolean(arr.type):
        if n == 0:
            return np.zeros(0, dtype=bool)
        bits = np.frombuffer(buf, dtype=np.uint8, count=(off + n + 7) // 8)
        return np.unpackbits(bits, bitorder="little")[off: off + n].astype(bool)
    dtype = np.dtype(arr.type.to_pandas_dtype())
    if n == 0:
        return np.zeros(0, dtype=dtype)
    return np.frombuffer(buf, dtype=dtype, count=n, offset=off * dtype.itemsize)


def take(arr: pa.Array | pa.ChunkedArray, rows: np.ndarray) -> pa.Array:
    """``arr[rows]`` for numpy row indices."""
    return arr.take(arrow_of(np.asarray(rows, dtype=np.int64)))


def objects_of(arr: pa.Array) -> np.ndarray:
    """A string array as an object ndarray of str (a Python object per value: for small or on-demand uses)."""
    return np.array(arr.to_pylist(), dtype=object) if len(arr) else np.zeros(0, dtype=object)


# --------------------------------------------------------------------------- names from columns
def as_strings(values: Any, role: str = "name") -> tuple[pa.Array, str | None]:
    """Any column of ids as (Arrow string array without nulls, original dtype or None).

    Accepts Arrow arrays (string, dictionary, numbers, booleans), numpy
    arrays and sequences.  Missing values become blank (the rule in the
    module docstring); bytes are decoded as UTF-8; numbers become text as
    Python writes them.  A value that cannot be a name raises
    :class:`InvalidName` with its row: a nested value, bytes that are not
    UTF-8 (in a Python sequence; Arrow binary and string columns are checked
    on their distinct values by :func:`invalid_names`), a lone surrogate.
    """
    import pyarrow as pa

    if isinstance(values, (pa.Array, pa.ChunkedArray)):
        return _arrow_strings(values, role)
    arr = np.asarray(values, dtype=object) if not isinstance(values, np.ndarray) else values
    if arr.ndim != 1:
        raise InvalidName(None, f"must be one-dimensional (one name per row), got an array of shape {arr.shape}", role)
    if arr.dtype.kind in "iub":
        return _arrow_strings(pa.array(arr), role)
    if arr.dtype.kind == "f":
        return _arrow_strings(pa.array(arr, from_pandas=True), role)
    if arr.dtype.kind in "US":
        arr = arr.astype(object)
    strings = python_strings(arr, role)
    try:
        return pa.array(strings, type=pa.string()), None
    except UnicodeEncodeError:  # a lone surrogate ("\ud800" in JSON): find its row
        for i, v in enumerate(strings.tolist()):
            try:
                v.encode("utf-8")
            except UnicodeEncodeError:
                raise InvalidName(i, f"holds a lone surrogate ({v!r}), not text", role) from None
        raise  # pragma: no cover - pyarrow refused a string that encodes


def _arrow_strings(arr: Any, role: str) -> tuple[pa.Array, str | None]:
    import pyarrow as pa
    import pyarrow.compute as pc

    t = arr.type
    if isinstance(arr, pa.ChunkedArray):
        if pa.types.is_string(t) and not arr.null_count:
            return arr, None  # hashed chunk by chunk: never copied into one array
        arr = arr.combine_chunks() if arr.num_chunks != 1 else arr.chunk(0)
    if pa.types.is_dictionary(t):
        arr = arr.dictionary_decode()
        t = arr.type
    dtype: str | None = None
    is_view = getattr(pa.types, "is_string_view", lambda _: False)(t)
    if pa.types.is_string(t) or pa.types.is_large_string(t) or is_view:
        out = arr.cast(pa.string()) if not pa.types.is_string(t) else arr
    elif pa.types.is_binary(t) or pa.types.is_large_binary(t):
        # Reinterpreted, not cast (a cast checks UTF-8 but cannot say where): invalid_names checks
        # the distinct values and names the row.
        out = arr.view(pa.large_string() if pa.types.is_large_binary(t) else pa.string()).cast(pa.string())
    elif pa.types.is_integer(t):
        dtype = str(t)
        out = pc.cast(arr, pa.string())
    elif pa.types.is_boolean(t):
        dtype = "bool"
        out = pc.if_else(arr, "True", "False")
    elif pa.types.is_floating(t):
        from .text import float_strings

        dtype = str(t)
        values = arr.cast(pa.float64())
        if role == "label":
            # -0.0 + 0.0 is 0.0: a label's value is its class, and -0.0 == 0.0 (pandas and crowd-kit count them
            # as one class).  Ids keep the two apart, as their names differ (tests/test_result.py).
            values = pc.add(values, 0.0)
        out = float_strings(values, nan_as="")  # NaN is missing, as a null is
    elif pa.types.is_null(t):
        out = pa.array([""] * len(arr), type=pa.string())
    elif pa.types.is_nested(t):
        raise InvalidName(None, f"holds {t} values, not one name per row", role)
    else:  # dates, times, durations, decimals: as Python writes each value (a Python object per value)
        dtype = str(t)
        out = pa.array(["" if v is None else str(v) for v in arr.to_pylist()], type=pa.string())
    if out.null_count:
        out = pc.fill_null(out, "")
    return out, dtype


def _kind_of(v: object) -> str | None:
    """What a nested value is, for messages; None for a scalar."""
    if isinstance(v, (list, tuple)):
        return "a list (JSON array)"
    if isinstance(v, dict):
        return "a mapping (JSON object)"
    if isinstance(v, (set, frozenset)):
        return "a set"
    if isinstance(v, np.ndarray):
        return "an array"
    return None


def python_strings(arr: np.ndarray, role: str) -> np.ndarray:
    """An object array as str values: missing (None, NaN, NA, NaT) blank, bytes decoded.

    A nested value (list, mapping, set, array) or bytes that are not UTF-8
    raise :class:`InvalidName` with the row.
    """
    if arr.size == 0:
        return arr
    import pandas as pd
    from pandas.api.types import infer_dtype

    if infer_dtype(arr, skipna=True) == "string":  # text and missing values only: no Python step per value
        missing = pd.isna(arr)
        if not missing.any():
            return arr
        out = arr.copy()
        out[missing] = ""
        return out

    out = np.empty(arr.size, dtype=object)
    for i, v in enumerate(arr.tolist()):
        if isinstance(v, str):
            out[i] = v
            continue
        kind = _kind_of(v)
        if kind is not None:
            shown = repr(v)
            shown = shown if len(shown) <= 40 else shown[:37] + "..."
            raise InvalidName(i, f"holds {kind}, not one name: {shown}", role)
        if v is None or pd.isna(v):
            out[i] = ""
        elif isinstance(v, (bytes, bytearray, memoryview)):
            try:
                out[i] = bytes(v).decode("utf-8")
            except UnicodeDecodeError as exc:
                raise InvalidName(i, f"is not UTF-8 text ({bytes(v)!r}, byte 0x{bytes(v)[exc.start]:02X})", role) from None
        else:
            out[i] = str(v)
    return out


def invalid_names(names: pa.Array) -> tuple[int, str] | None:
    """The first of ``names`` (distinct names, a string array) that cannot be a name, and why; else None.

    Text from a CSV or JSON file was decoded on reading; Parquet string and
    binary columns, DataFrame columns and Arrow arrays given to the library
    were not, and a name may hold a NUL character that no text file can.
    Run on the distinct names (a dictionary), never on every row: two
    reductions over the text bytes, and a full UTF-8 check only when a byte
    is not ASCII.
    """
    import re

    import pyarrow as pa

    if not len(names):
        return None
    arr = names.combine_chunks() if isinstance(names, pa.ChunkedArray) else names
    if not pa.types.is_string(arr.type):
        arr = arr.cast(pa.string())
    _, off_buf, data_buf = arr.buffers()
    if data_buf is None:
        return None
    offsets = np.frombuffer(off_buf, dtype=np.int32, count=len(arr) + 1, offset=arr.offset * 4)
    text = np.frombuffer(data_buf, dtype=np.uint8)[offsets[0]: offsets[-1]]
    if not text.size:
        return None
    if text.max() >= 0x80:
        try:
            arr.validate(full=True)
        except pa.ArrowInvalid as exc:
            m = re.search(r"string index (\d+)", str(exc))
            row = int(m.group(1)) if m else _first_invalid(arr)
            raw = arr.view(pa.binary())[row].as_py()
            try:
                raw.decode("utf-8")
                detail = ""
            except UnicodeDecodeError as err:
                detail = f" (byte 0x{raw[err.start]:02X} at byte {err.start + 1})"
            return row, f"is not UTF-8 text{detail}"
    if text.min() == 0:
        row = int(np.searchsorted(offsets, int(np.argmax(text == 0)) + offsets[0], side="right")) - 1
        return row, f"holds a NUL character ({arr[row].as_py()!r})"
    return None


def _first_invalid(arr: pa.Array) -> int:
    """Row of the first value that is not UTF-8 (error path only: one Python step per value)."""
    import pyarrow as pa

    for i, raw in enumerate(arr.view(pa.binary()).to_pylist()):
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError:
            return i
    return 0


# --------------------------------------------------------------------------- dictionary encoding
def encode(values: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, pa.Array]:
    """(codes int32 in order of first appearance, distinct names) of a string column
    (:func:`crowdagg.data.encode.encode_column`)."""
    from .encode import encode_column

    return encode_column(values)


def hash_encode(values: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, pa.Array]:
    """:func:`encode` by Arrow's hash dictionary encoding; one memo table across chunks, so the
    codes of all chunks share one dictionary."""
    import pyarrow as pa

    enc = values.dictionary_encode()
    if isinstance(enc, pa.ChunkedArray):
        if enc.num_chunks == 0:
            return np.zeros(0, dtype=np.int32), pa.array([], type=pa.string())
        dictionary = enc.chunk(enc.num_chunks - 1).dictionary
        parts = [numpy_of(c.indices) for c in enc.chunks]
        codes = np.concatenate(parts) if len(parts) != 1 else parts[0]
    else:
        dictionary = enc.dictionary
        codes = numpy_of(enc.indices)
    return codes.astype(np.int32, copy=False), dictionary


def release_memory() -> None:
    """Hand the memory Arrow's allocator keeps after freeing (parsed text) back to the system."""
    import sys

    pa = sys.modules.get("pyarrow")
    if pa is not None:
        pa.default_memory_pool().release_unused()


def edge_space(names: pa.Array) -> np.ndarray:
    """Which names start or end with whitespace (Python's ``str.isspace`` set), bool shape (n,)."""
    import pyarrow.compute as pc

    if len(names) == 0:
        return np.zeros(0, dtype=bool)
    return numpy_of(pc.match_substring_regex(names, _EDGE_SPACE_RE))


def strip(names: pa.Array) -> tuple[pa.Array, np.ndarray]:
    """(names with surrounding whitespace stripped, which ones changed); a Python step per changed name only."""
    import pyarrow as pa

    changed = edge_space(names)
    if not changed.any():
        return names, changed
    rows = np.flatnonzero(changed)
    fixed = [s.strip() for s in take(names, rows).to_pylist()]
    keep = np.ones(len(names), dtype=bool)
    keep[rows] = False
    # Rebuild: replace the changed entries (indices into a concatenation).
    both = pa.concat_arrays([names, pa.array(fixed, type=pa.string())])
    index = np.arange(len(names), dtype=np.int64)
    index[rows] = len(names) + np.arange(len(rows))
    return take(both, index), changed


def spells(names: pa.Array, key: str, header_key: Any) -> np.ndarray:
    """Which names spell the header cell whose key is ``key`` (BOM, spaces, letter case aside).

    A case-insensitive substring search over the names finds the few
    candidates; each candidate is then compared in Python.
    """
    import pyarrow.compute as pc

    found = np.zeros(len(names), dtype=bool)
    if not key or not len(names):
        return found
    if key.isascii():
        cand = numpy_of(pc.match_substring(names, key, ignore_case=True))
    else:  # a non-ASCII header cell (rare): compare every name
        cand = np.ones(len(names), dtype=bool)
    rows = np.flatnonzero(cand)
    found[rows] = [header_key(n) == key for n in take(names, rows).to_pylist()]
    return found


def blank(names: pa.Array) -> np.ndarray:
    """Which names are empty, bool shape (n,)."""
    import pyarrow.compute as pc

    if len(names) == 0:
        return np.zeros(0, dtype=bool)
    return numpy_of(pc.binary_length(names)) == 0


def concat(parts: Sequence[pa.Array | pa.ChunkedArray]) -> pa.Array | pa.ChunkedArray:
    """One column from several (chunks are kept, never copied)."""
    import pyarrow as pa

    if len(parts) == 1:
        return parts[0]
    chunks = [c for p in parts for c in (p.chunks if isinstance(p, pa.ChunkedArray) else [p])]
    return pa.chunked_array(chunks, type=pa.string())


__all__ = ["Vocabulary", "InvalidName", "as_strings", "invalid_names", "encode", "strip", "spells", "blank", "edge_space"]
