"""Rows to bytes: the one writer of CSV, TSV, JSON, JSON Lines and Parquet.

Float policy, the same in every text format: the shortest text that reads
back as the same double (Python's ``repr``: ``0.1``, ``1.0``, ``1.2e-10``),
so a saved output reads back exactly.  Non-finite numbers are refused (every
output is finite, or the run fails) -- in Parquet too.

* CSV: RFC 4180 -- a cell containing a comma, a double quote, CR or LF is
  quoted, with quotes doubled; ``\\n`` line ends.
* TSV: no quoting at all, as the reader expects (a ``"`` is an ordinary
  character); a value containing a tab, CR or LF cannot be written and is an
  error naming the row's key (e.g. the task).
* JSON Lines: one object per line; JSON: a list of objects, one per line.
  Strings are escaped as JSON requires (non-ASCII kept as UTF-8), exactly as
  :func:`json.encoder.encode_basestring`.
* Parquet: one file; text columns ``string`` (dictionary columns stay
  dictionary-encoded), floats ``float64``, integers ``int64``, ``bool``.

Columns are numpy arrays (float, int, bool, text objects; any other dtype is
written as ``str`` of each value), pyarrow string arrays and dictionary
arrays with string values (chunked or not), or a DataFrame's columns.

Missing numbers are said, never guessed: a :class:`Missing` column (numbers
and a mask of the valid ones) is written with its missing values as an
empty cell in CSV and TSV, ``null`` in JSON and JSON Lines, and a null in
Parquet -- a value that is not there (a score that was not computed), never
a number standing for it.  Any other column is written as before (a NaN is
refused, an Arrow null has no number).

How: no Python object per cell or row.  A table is rendered a block of rows
at a time, each column as Arrow text: floats by Arrow's shortest-digit cast
laid out as ``repr`` by a numba kernel (:func:`crowdagg.data.text.float_strings`),
integers by Arrow's cast; CSV quoting and JSON escaping touch only the
values that need them, and a dictionary column is quoted/escaped/checked
once per distinct value, then taken by its indices.  The cells are joined
into rows by a kernel straight into the output's bytes.  Tables under
:data:`_KERNEL_MIN_ROWS` rows use Arrow compute only (no numba load).
pyarrow and numba load on first use, not with this module.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping, Sequence
from json.encoder import encode_basestring  # type: ignore[attr-defined]
from typing import TYPE_CHECKING, Any

import numpy as np

from ..data.text import BLOCK_ROWS as _BLOCK_ROWS
from ..data.text import KERNEL_MIN_ROWS as _KERNEL_MIN_ROWS
from ..data.text import as_string as _as_string
from ..data.text import buffers as _buffers
from ..data.text import float_strings as float_strings  # re-exported: it was defined here
from ..data.text import float_text_block as _float_text_block
from ..data.text import large_string as _large_string
from ..data.text import ls as _ls
from ..data.text import one_chunk as _one_chunk
from ..errors import DataError, UsageError

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd
    import pyarrow as pa

OUTPUT_FORMATS = ("csv", "tsv", "jsonl", "json", "parquet")

# The characters each text format acts on (ASCII: as bytes, never inside a multi-byte UTF-8 character).
_SPECIAL = {"csv": ',"\r\n', "tsv": "\t\r\n", "json": '"\\' + "".join(map(chr, range(0x20)))}
_TSV_SPECIAL = re.compile(r"[\t\r\n]")
_CSV_SPECIAL = re.compile(r'[,"\r\n]')
_RE2 = {"csv": '[,"\r\n]', "tsv": "[\t\r\n]", "json": r'["\\\x00-\x1f]'}
_JSON_ESCAPES = {chr(c): encode_basestring(chr(c))[1:-1] for c in range(0x20)}



def float_text(values: np.ndarray, *, column: str = "value") -> list[str]:
    """Shortest round-trip text of each float (``repr``); non-finite values are refused."""
    arr = _finite_floats(values, column)
    return list(map(repr, arr.tolist()))


def _finite_floats(values: Any, column: str) -> np.ndarray:
    arr = np.asarray(values, dtype=np.float64)
    if arr.size and not np.isfinite(arr).all():
        bad = arr[~np.isfinite(arr)][0]
        raise DataError(f"column {column!r} holds a non-finite number ({bad!r}); refusing to write it")
    return arr


# --------------------------------------------------------------------------- columns
class Missing:
    """A column of numbers some of which are missing: written as an empty cell (CSV, TSV), ``null`` (JSON,
    JSON Lines) or a null (Parquet) where ``valid`` is False.

    Parameters
    ----------
    values : ndarray of float, int or bool, shape (n,)
        The numbers; a missing one may hold anything (a NaN), it is never read.
    valid : ndarray of bool, shape (n,)
        False where the value is missing.
    """

    __slots__ = ("values", "valid")

    def __init__(self, values: Any, valid: Any) -> None:
        self.values = np.asarray(values)
        self.valid = np.asarray(valid, dtype=bool)
        if self.values.ndim != 1 or self.values.dtype.kind not in "fiub" or self.valid.shape != self.values.shape:
            raise ValueError(f"Missing wants 1-D numbers and one valid flag each, got {self.values.dtype} "
                             f"{self.values.shape} and {self.valid.shape}")

    def __len__(self) -> int:
        return len(self.values)

    def column(self, name: str) -> _Col:
        zero = np.zeros((), self.values.dtype)
        return _Col("nulls", _from_numpy(np.where(self.valid, self.values, zero), name), True, valid=self.valid)


class _Col:
    """One column, normalised.  ``kind`` and ``data``:

    * ``float`` (float64), ``int``, ``bool``: a 1-D numpy array;
    * ``arrow``: a pyarrow ChunkedArray of large_string (no nulls);
    * ``objects``: a numpy object array (its text made a block at a time);
    * ``unicode``: a numpy ``U`` array;
    * ``dict``: a numpy index array into ``dictionary`` (pyarrow large_string);
    * ``nulls``: numbers with missing values, ``data`` the numbers as a
      ``float``, ``int`` or ``bool`` column (a missing one filled with 0)
      and ``valid`` a numpy bool array (False where missing).

    ``number``: the column is written as numbers (never quoted, escaped or
    checked), as the reference writer decided from the numpy dtype.
    """

    __slots__ = ("kind", "data", "dictionary", "number", "valid")

    def __init__(self, kind: str, data: Any, number: bool = False, dictionary: Any = None,
                 valid: Any = None) -> None:
        self.kind = kind
        self.data = data
        self.number = number
        self.dictionary = dictionary
        self.valid = valid

    def __len__(self) -> int:
        return len(self.data)


def _legacy_cells(arr: np.ndarray) -> list[str]:
    """``str`` of each value (strings as they are): the text of any other array."""
    return [v if isinstance(v, str) else str(v) for v in arr.tolist()]


def _strings(cells: list[str]) -> pa.ChunkedArray:
    import pyarrow as pa

    return pa.chunked_array([pa.array(cells, pa.large_string())], pa.large_string())


def _from_numpy(arr: np.ndarray, name: str) -> _Col:
    kind = arr.dtype.kind
    if arr.ndim != 1:  # as the reference writer: the text of each (nested) value
        if kind == "f":
            return _Col("arrow", _strings(float_text(arr, column=name)), True)
        if kind in "iu":
            return _Col("arrow", _strings(list(map(str, arr.tolist()))), True)
        if kind == "b":
            return _Col("arrow", _strings(["true" if v else "false" for v in arr.tolist()]), True)
        return _Col("arrow", _strings(_legacy_cells(arr)))
    if kind == "f":
        return _Col("float", _finite_floats(arr, name), True)
    if kind in "iu":
        return _Col("int", arr, True)
    if kind == "b":
        return _Col("bool", arr, True)
    if kind == "O":
        return _Col("objects", arr)
    if kind == "U":
        return _Col("unicode", arr)
    return _Col("arrow", _strings(_legacy_cells(arr)))


def _is_text_type(typ: Any) -> bool:
    import pyarrow as pa

    is_view = getattr(pa.types, "is_string_view", None)  # pyarrow >= 16
    return bool(pa.types.is_string(typ) or pa.types.is_large_string(typ) or (is_view is not None and is_view(typ)))


def _from_arrow(values: Any) -> _Col | None:
    """A pyarrow string or dictionary(string) column without nulls; None for anything else."""
    import pyarrow as pa

    if not isinstance(values, (pa.Array, pa.ChunkedArray)) or values.null_count:
        return None
    typ = values.type
    if _is_text_type(typ):
        chunked = values if isinstance(values, pa.ChunkedArray) else pa.chunked_array([values])
        return _Col("arrow", chunked.cast(pa.large_string()))
    if not (pa.types.is_dictionary(typ) and _is_text_type(typ.value_type)):
        return None
    if isinstance(values, pa.ChunkedArray):
        if values.num_chunks == 0:
            return _Col("dict", np.zeros(0, np.int64), dictionary=pa.array([], pa.large_string()))
        values = values.unify_dictionaries()
        dictionary = values.chunk(0).dictionary
        indices = np.concatenate([c.indices.to_numpy(zero_copy_only=False) for c in values.chunks])
    else:
        dictionary = values.dictionary
        indices = values.indices.to_numpy(zero_copy_only=False)
    if dictionary.null_count:
        return None
    return _Col("dict", indices, dictionary=dictionary.cast(pa.large_string()))


def _from_pandas(series: Any) -> Any:
    """A DataFrame column: Arrow-backed text and text categories without gaps as Arrow, else numpy."""
    import pandas as pd

    if not isinstance(series, pd.Series):
        return series.to_numpy()
    dtype = series.dtype
    if isinstance(dtype, pd.StringDtype) and dtype.storage == "pyarrow" and not series.isna().any():
        import pyarrow as pa

        return pa.array(series.array)
    if isinstance(dtype, pd.CategoricalDtype):
        import pyarrow as pa

        codes = series.cat.codes.to_numpy()
        if len(codes) and codes.min() < 0:  # missing values: as numpy gives them
            return series.to_numpy()
        try:
            dictionary = pa.array(series.cat.categories.to_numpy(dtype=object), from_pandas=False)
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            return series.to_numpy()
        if pa.types.is_string(dictionary.type) and not dictionary.null_count:
            return pa.DictionaryArray.from_arrays(pa.array(codes), dictionary)
    return series.to_numpy()


def _normalise(name: str, values: Any) -> _Col:
    if isinstance(values, Missing):
        return values.column(name)
    if type(values).__module__.startswith("pyarrow"):
        col = _from_arrow(values)
        if col is not None:
            return col
    return _from_numpy(np.asarray(values), name)  # as the reference writer reads it


# --------------------------------------------------------------------------- text of a block of rows
def _objects_text(block: np.ndarray) -> pa.Array:
    """An object array as Arrow strings.

    Arrow's type inference says whether the block holds only ``str`` (type
    string, no nulls): then its text is taken as is; any other block (None,
    numbers, bytes ...) is written as ``str`` of each value.
    """
    import pyarrow as pa

    try:
        got = pa.array(block, from_pandas=False)
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        got = None
    if got is None or not pa.types.is_string(got.type) or got.null_count:
        return pa.array(_legacy_cells(block), pa.large_string())
    return got.cast(pa.large_string())


def _unicode_text(block: np.ndarray, kernels: bool) -> pa.Array:
    """A numpy ``U`` array as Arrow strings (not by Arrow, which cuts a value at its first NUL)."""
    import pyarrow as pa

    width = block.dtype.itemsize // 4
    if not kernels or width == 0 or len(block) == 0:
        return pa.array(_legacy_cells(block), pa.large_string())
    from ..kernels.text import ucs4_to_utf8

    codes = np.ascontiguousarray(block).view(np.uint32).reshape(len(block), width)
    out = np.empty(codes.size * 4, np.uint8)
    offsets = np.empty(len(block) + 1, np.int64)
    total = ucs4_to_utf8(codes, out, offsets)
    if total < 0:  # a surrogate: no UTF-8 form (fails as the reference writer does)
        return pa.array(_legacy_cells(block), pa.large_string())
    return _large_string(len(block), offsets, out[:total])


def _plain_block(col: _Col, start: int, stop: int, kernels: bool, null: str = "") -> pa.Array:
    """Text of rows ``start:stop`` of a column as written before quoting/escaping (large_string); a missing
    number (kind ``nulls``) as ``null``."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if col.kind == "nulls":
        return pc.if_else(pa.array(col.valid[start:stop]), _plain_block(col.data, start, stop, kernels), _ls(null))
    if col.kind == "float":
        return _float_text_block(col.data[start:stop], kernels)
    if col.kind == "int":
        return pc.cast(pa.array(col.data[start:stop]), pa.large_string())
    if col.kind == "bool":
        return pc.take(pa.array(["false", "true"], pa.large_string()), pa.array(col.data[start:stop].view(np.uint8)))
    if col.kind == "dict":
        return pc.take(col.dictionary, pa.array(col.data[start:stop]))
    if col.kind == "objects":
        return _objects_text(col.data[start:stop])
    if col.kind == "unicode":
        return _unicode_text(col.data[start:stop], kernels)
    return _one_chunk(col.data.slice(start, stop - start))


def _cell_text(col: _Col, i: int) -> str:
    """One cell's text (before quoting), for messages."""
    return str(_plain_block(col, i, i + 1, False)[0].as_py())


# --------------------------------------------------------------------------- quoting, escaping, checks
def _special_mask(arr: Any, what: str, kernels: bool) -> np.ndarray:
    """Per value: does it hold one of the characters ``what`` (csv/tsv/json) acts on?"""
    if len(arr) == 0:
        return np.zeros(0, bool)
    if kernels:
        from ..kernels.text import mark_rows

        offsets, values = _buffers(arr)
        table = np.zeros(256, np.bool_)
        table[[ord(c) for c in _SPECIAL[what]]] = True
        return np.asarray(mark_rows(values, offsets, table))
    import pyarrow.compute as pc

    return np.asarray(pc.match_substring_regex(arr, _RE2[what]).to_numpy(zero_copy_only=False))


def _csv_quote(sub: Any) -> Any:
    import pyarrow.compute as pc

    return pc.binary_join_element_wise(_ls('"'), pc.replace_substring(sub, '"', '""'), _ls('"'), _ls(""))


def _json_escape(sub: Any) -> Any:
    """As ``encode_basestring``, without the quotes around."""
    import pyarrow.compute as pc

    sub = pc.replace_substring(sub, "\\", "\\\\")
    sub = pc.replace_substring(sub, '"', '\\"')
    for ch, esc in _JSON_ESCAPES.items():
        if pc.any(pc.match_substring(sub, ch)).as_py():
            sub = pc.replace_substring(sub, ch, esc)
    return sub


def _quoted(arr: Any, fmt: str, kernels: bool) -> Any:
    """Text values as written in ``fmt``: CSV-quoted or JSON-escaped where they need it (only those touched)."""
    if fmt not in ("csv", "json", "jsonl"):
        return arr
    import pyarrow as pa
    import pyarrow.compute as pc

    what = "csv" if fmt == "csv" else "json"
    mask = _special_mask(arr, what, kernels)
    if not mask.any():
        return arr
    mask_arr = pa.array(mask)
    sub = pc.filter(arr, mask_arr)
    return pc.replace_with_mask(arr, mask_arr, _csv_quote(sub) if what == "csv" else _json_escape(sub))


def _tsv_first_bad(col: _Col, n_rows: int, kernels: bool) -> int | None:
    """First row whose text holds a tab, CR or LF; None if none does."""
    if col.kind == "dict":
        bad = _special_mask(col.dictionary, "tsv", kernels)
        if not bad.any() or len(col.data) == 0:
            return None
        rows = bad[col.data]
        return int(np.argmax(rows)) if rows.any() else None
    for start in range(0, n_rows, _BLOCK_ROWS):
        stop = min(start + _BLOCK_ROWS, n_rows)
        mask = _special_mask(_plain_block(col, start, stop, kernels), "tsv", kernels)
        if mask.any():
            return start + int(np.argmax(mask))
    return None


def _tsv_check(cols: dict[str, _Col], key: str | None, n_rows: int, kernels: bool) -> None:
    for n, col in cols.items():
        if col.number:
            continue
        i = _tsv_first_bad(col, n_rows, kernels)
        if i is None:
            continue
        c = _cell_text(col, i)
        m = _TSV_SPECIAL.search(c)
        assert m is not None
        what = {"\t": "a tab", "\r": "a carriage return", "\n": "a newline"}[m.group()]
        key_col = cols.get(key) if key is not None else None
        where = f"{key} {_cell_text(key_col, i)!r}" if key_col is not None and key else f"row {i + 1}"
        raise DataError(
            f"cannot write TSV: {where} has {what} in column {n!r} ({c!r}); "
            "TSV has no quoting -- use CSV or JSON output"
        )


def _header_check_tsv(names: Sequence[str]) -> None:
    for n in names:
        if _TSV_SPECIAL.search(n):
            raise DataError(f"cannot write TSV: column name {n!r} contains a tab or line break; use CSV or JSON output")


def _csv_quote_name(name: str) -> str:
    return '"' + name.replace('"', '""') + '"' if _CSV_SPECIAL.search(name) else name


# --------------------------------------------------------------------------- rows
def _literals(cols: dict[str, _Col], fmt: str, row_end: str) -> list[str]:
    """The text before each column's cell, then the text ending a row."""
    json = fmt in ("json", "jsonl")
    lits = []
    close = ""
    for i, (n, col) in enumerate(cols.items()):
        quoted = json and not col.number
        if json:
            lit = close + ("{" if i == 0 else ",") + encode_basestring(n) + ":" + ('"' if quoted else "")
        else:
            lit = "" if i == 0 else ("," if fmt == "csv" else "\t")
        lits.append(lit)
        close = '"' if quoted else ""
    lits.append(close + ("}" if json else "") + row_end)
    return lits


def _join(cells: list[Any], lits: list[str], kernels: bool) -> Any:
    """One block's rows as bytes (a numpy uint8 array or a pyarrow Buffer)."""
    if kernels:
        from ..kernels.text import join_rows

        n = len(cells[0])
        parts = []
        offsets = np.empty((len(cells), n + 1), np.int64)
        base = 0
        for c, arr in enumerate(cells):
            off, values = _buffers(arr)
            lo, hi = int(off[0]), int(off[-1])
            parts.append(values[lo:hi])
            np.add(off, base - lo, out=offsets[c], casting="unsafe")
            base += hi - lo
        lit_bytes = [s.encode("utf-8") for s in lits]
        lit_off = np.cumsum([0, *map(len, lit_bytes)], dtype=np.int64)
        lit_values = np.frombuffer(b"".join(lit_bytes) or b"\0", np.uint8)
        values = np.concatenate(parts) if parts else np.zeros(0, np.uint8)
        del parts
        return join_rows(values, offsets, lit_values, lit_off)
    import pyarrow.compute as pc

    args: list[Any] = []
    for lit, arr in zip(lits, cells):
        if lit:
            args.append(_ls(lit))
        args.append(arr)
    if lits[-1]:
        args.append(_ls(lits[-1]))
    rows = pc.binary_join_element_wise(*args, _ls(""))
    off, _ = _buffers(rows)
    lo, hi = int(off[0]), int(off[-1])
    return rows.buffers()[2].slice(lo, hi - lo)


def _render_rows(cols: dict[str, _Col], n_rows: int, fmt: str, row_end: str, kernels: bool) -> Iterator[Any]:
    """The rows' bytes, one buffer per block of rows, each rendered when asked for."""
    import pyarrow as pa
    import pyarrow.compute as pc

    # A dictionary column is quoted/escaped once, on its values.
    dict_text = {n: _quoted(c.dictionary, fmt, kernels) for n, c in cols.items() if c.kind == "dict"}
    lits = _literals(cols, fmt, row_end)
    for start in range(0, n_rows, _BLOCK_ROWS):
        stop = min(start + _BLOCK_ROWS, n_rows)
        cells = []
        for n, col in cols.items():
            if col.kind == "dict":
                cells.append(pc.take(dict_text[n], pa.array(col.data[start:stop])))
            else:
                text = _plain_block(col, start, stop, kernels, "null" if fmt in ("json", "jsonl") else "")
                cells.append(text if col.number else _quoted(text, fmt, kernels))
        body = _join(cells, lits, kernels)
        del cells
        yield body


# --------------------------------------------------------------------------- parquet
def _parquet(cols: dict[str, _Col]) -> bytes:
    import pyarrow as pa
    import pyarrow.parquet as pq

    arrays = []
    for col in cols.values():
        if col.kind == "float":
            arrays.append(pa.array(col.data, pa.float64()))
        elif col.kind == "int":
            data = col.data
            if data.dtype == np.uint64 and len(data) and data.max() > np.iinfo(np.int64).max:
                arrays.append(pa.array(data))  # does not fit int64: kept unsigned
            else:
                arrays.append(pa.array(data.astype(np.int64, copy=False)))
        elif col.kind == "bool":
            arrays.append(pa.array(col.data, pa.bool_()))
        elif col.kind == "nulls":
            inner = col.data
            data = inner.data.astype(np.int64, copy=False) if inner.kind == "int" else inner.data
            arrays.append(pa.array(data, {"float": pa.float64(), "int": pa.int64(), "bool": pa.bool_()}[inner.kind],
                                   mask=~col.valid))
        elif col.kind == "dict":  # written as plain strings, as a column of names would be
            arrays.append(_as_string(col.dictionary).take(pa.array(col.data)))
        else:
            n = len(col)
            kernels = n >= _KERNEL_MIN_ROWS
            chunks = [_as_string(_plain_block(col, s, min(s + _BLOCK_ROWS, n), kernels)) for s in range(0, n, _BLOCK_ROWS)]
            arrays.append(pa.chunked_array(chunks, chunks[0].type if chunks else pa.string()))
    table = pa.table(arrays, names=list(cols)) if cols else pa.table({})
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    return bytes(sink.getvalue().to_pybytes())


# --------------------------------------------------------------------------- entry point
def render_table(
    table: Mapping[str, Any] | pd.DataFrame, fmt: str, *, key: str | None = None
) -> bytes:
    """Serialise columns (name -> 1-D array, all the same length) as bytes.

    Parameters
    ----------
    table : mapping of column name to array (numpy, or pyarrow string /
        dictionary array), or a DataFrame.
    fmt : ``csv``, ``tsv``, ``jsonl``, ``json`` (UTF-8 text) or ``parquet``.
    key : column whose value names a row in errors (e.g. ``"task"``);
        default the first column.
    """
    return b"".join(render_chunks(table, fmt, key=key))


def render_chunks(
    table: Mapping[str, Any] | pd.DataFrame, fmt: str, *, key: str | None = None
) -> Iterator[bytes | memoryview | Any]:
    """:func:`render_table`'s bytes in pieces (bytes-like), a block of rows at a time, each rendered only
    when the one before was taken -- so the output is never held whole (Parquet is one piece).

    Every check (the format, the columns' lengths, TSV cells) runs before the first piece.
    """
    if fmt not in OUTPUT_FORMATS:
        raise UsageError(f"output format must be one of {', '.join(OUTPUT_FORMATS)}, got {fmt!r}")
    if hasattr(table, "to_dict") and hasattr(table, "columns"):
        raw = {str(c): _from_pandas(table[c]) for c in table.columns}  # type: ignore[index]
    else:
        raw = {str(k): v for k, v in table.items()}  # type: ignore[union-attr]
    names = list(raw)
    key = key if key is not None else (names[0] if names else None)
    cols = {n: _normalise(n, v) for n, v in raw.items()}
    del raw
    lengths = {len(c) for c in cols.values()}
    if len(lengths) > 1:
        raise ValueError(f"columns of unequal length: { {n: len(c) for n, c in cols.items()} }")
    n_rows = lengths.pop() if lengths else 0
    if fmt == "parquet":
        return iter([_parquet(cols)])
    kernels = n_rows >= _KERNEL_MIN_ROWS
    if fmt == "tsv":
        _header_check_tsv(names)
        _tsv_check(cols, key, n_rows, kernels)
    return _text_chunks(cols, names, n_rows, fmt, kernels)


def _text_chunks(cols: dict[str, _Col], names: list[str], n_rows: int, fmt: str, kernels: bool) -> Iterator[Any]:
    if fmt in ("csv", "tsv"):
        header = (",".join(map(_csv_quote_name, names)) if fmt == "csv" else "\t".join(names)) + "\n"
        yield header.encode("utf-8")
        yield from _render_rows(cols, n_rows, fmt, "\n", kernels)
        return
    if n_rows == 0:
        yield b"" if fmt == "jsonl" else b"[]\n"
        return
    if fmt == "jsonl":
        yield from _render_rows(cols, n_rows, fmt, "\n", kernels)
        return
    yield b"[\n"
    held = None
    for body in _render_rows(cols, n_rows, fmt, ",\n", kernels):
        if held is not None:
            yield held
        held = body
    assert held is not None  # n_rows > 0: at least one block
    yield memoryview(held)[:-2]  # the last row closes the list instead
    yield b"\n]\n"


def estimate_text_bytes(n_rows: int, n_float_cols: int, n_text_cols: int, text_width: float = 16.0) -> int:
    """Rough peak memory of rendering a table as text (bytes), over what the table itself holds.

    The output is held twice at the end (the blocks' bytes, then the bytes
    handed back), and one block of rows is in flight (its cells, quoted
    values and joined rows: about one more output's worth of that block).
    A row is sized for the widest format, JSON, whose key repeats on every
    row: a float cell ~20 characters plus ~22 of key and punctuation, a text
    cell its width plus the same.  (Measured at 1M rows of width-16 text:
    the peak is 2.3-3x the output; the estimate is ~20% above JSON's peak
    and up to 2x above CSV's, whose rows are shorter.)
    """
    row = n_float_cols * 42 + n_text_cols * (text_width + 22) + 4
    return int(math.ceil((2 * n_rows + min(n_rows, _BLOCK_ROWS)) * row))


__all__ = ["OUTPUT_FORMATS", "Missing", "render_table", "render_chunks", "float_text", "float_strings", "estimate_text_bytes"]
