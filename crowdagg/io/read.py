"""Readers: CSV, TSV, JSON, JSON Lines, Label Studio exports (gzip transparently, ``-`` = stdin).

Every cell is read as a string and kept as one: task, worker and class
names are never coerced to numbers (surrounding whitespace is stripped, and
said so).  Input is never silently changed or dropped:

* CSV follows RFC 4180 quoting; a row with more fields than the header is
  an error naming its line (never a shifted column).  TSV has no quoting: a
  ``"`` is an ordinary character.
* UTF-8 (with or without BOM) is read; UTF-16 with a byte-order mark
  (Excel's "Unicode text") is converted; any other byte sequence is an
  error naming the line.
* A header line repeated inside the data (files joined with ``cat``) is
  skipped with a warning; blank lines are skipped.
* JSON ``{task: {worker: label}}`` mappings keep repeated keys (they are
  duplicate answers, handled by the ``duplicates`` policy) and tasks with no
  answers (``{}``), which get an output row.
* JSON Lines are split on ``\\n`` only (a value may contain U+2028), and
  parsed one line at a time.
* Missing values follow one rule for every reader (:mod:`crowdagg.data.vocab`):
  null, NaN, ``None``, ``pd.NA`` and empty or whitespace-only cells are
  blank; a blank label is a skipped answer (``blank_labels``).  A value that
  cannot be a name (nested, not UTF-8, a lone surrogate, a NUL character)
  is an error naming the file, the line or row, and the column.

Which columns hold the task, worker and label is decided by
:mod:`crowdagg.io.columns` from the header (generic aliases; MTurk, Toloka and
Label Studio JSON-MIN/CSV exports); Label Studio JSON exports are flattened
by :mod:`crowdagg.io.platforms` first.  A platform export's own rows rules --
rejected and skipped assignments left out, MTurk radio buttons read as one
label, Label Studio rows that are not answers -- are applied next
(:func:`_platform_rows`, rules in :mod:`crowdagg.io.platforms`), every task
keeping its output row.  Problems are raised as
:class:`~crowdagg.errors.DataError` naming the file, the line and the value.

Writing lives in :mod:`crowdagg.io.render` (rows to bytes) and
:mod:`crowdagg.io.output` (where the bytes go).

How input is read
-----------------
No Python object is made per answer.  A run goes through the stages that
``CROWDAGG_TIMINGS`` reports (:mod:`crowdagg.core.timing`; the ingest benchmark
prints them):

* **read** -- the bytes of each input (gzip inflated, stdin, FIFOs and gzip
  measured against the memory limit as they are read); text that is pure
  ASCII skips UTF-8 decoding.
* **parse** -- CSV and TSV by Arrow, every cell a string.  Input that Arrow
  cannot read with the guarantees above -- rows with another number of
  fields than the header (short rows are padded, long ones are an error
  naming the line), an unclosed or stray quote, CR-only line ends -- goes to
  the exact parser of earlier versions (:func:`_parse_delimited_exact`), with
  the same results and messages (slower, about 12 bytes of memory per byte
  against 4 on the Arrow path).  JSON and JSON Lines keep their own reader,
  so that numbers keep their JSON text (``1.10`` stays ``1.10``).  Parquet
  is read by Arrow; a DataFrame is taken as it is.  Several inputs (files, a
  directory's data files sorted by name, a quoted glob's matches, sorted)
  are read in the order given, each with its own header and column mapping,
  and joined into one table whose messages still name each file's line.
* **encode** -- the task, worker and label columns become integer codes
  (dictionary encoding; see :mod:`crowdagg.data.vocab` for the two paths).
* **names** -- the whitespace, blank and header checks, run on the distinct
  names, not per row.
* **sort** -- the answers grouped by task with one counting sort, and the
  duplicates found in one pass over each task's answers
  (:mod:`crowdagg.kernels.ingest`, on two threads unless the thread policy,
  :mod:`crowdagg.core.threads`, says one; see :mod:`crowdagg.data.annotations`).

Then **fit** (the method), **render** (:mod:`crowdagg.io.render`) and
**write** (:mod:`crowdagg.io.output`).
"""

from __future__ import annotations

import codecs
import io
import json
import os
import re
import stat
import sys
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, cast

import numpy as np

from ..core import memory, threads
from ..core import timing as _timing
from ..core.checks import PROBA_ROUNDING, PROBA_SUM_TOLERANCE
from ..data.annotations import AnnotationSet, BlankLabelPolicy, DuplicatePolicy, Locator, check_blank_labels, header_key
from ..errors import CrowdaggError, CrowdaggWarning, DataError, UsageError, os_reason, param, warn
from .columns import LABEL_ALIASES, TASK_ALIASES, TRUTH_ALIASES, WORKER_ALIASES, map_answer_columns, map_label_columns
from .platforms import json_type
from .render import OUTPUT_FORMATS, render_table

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from ..data.numeric import NumericAnswers
    from .columns import ColumnMap
    from .output import Target
    from .platforms import JsonMinControls, RejectedPolicy

INPUT_FORMATS = ("csv", "tsv", "json", "jsonl", "parquet")

#: Input formats by extension; ``.txt`` is sniffed (Excel's "Unicode text" is tab-separated UTF-16).
_EXTENSIONS = {
    ".csv": "csv", ".tsv": "tsv", ".tab": "tsv",
    ".json": "json", ".jsonl": "jsonl", ".ndjson": "jsonl", ".parquet": "parquet", ".pq": "parquet",
}
_OUTPUT_EXTENSIONS = {".csv": "csv", ".tsv": "tsv", ".tab": "tsv", ".txt": "csv", ".json": "json", ".jsonl": "jsonl",
                      ".ndjson": "jsonl", ".parquet": "parquet", ".pq": "parquet"}

#: Parquet files start (and end) with these bytes.
PARQUET_MAGIC = b"PAR1"

#: Bytes decoded at a time when checking UTF-8 (errors still name the right line).
_DECODE_BLOCK = 1 << 24


# --------------------------------------------------------------------------- raw input
EXAMPLE_PREFIX = "example:"


def example_path(spec: str, role: str = "labels") -> Path:
    """Resolve ``example:NAME`` to an embedded dataset file (``role`` = labels or truth)."""
    from ..examples import EXAMPLES, path

    name = spec[len(EXAMPLE_PREFIX):]
    if name not in EXAMPLES:
        raise DataError(f"{spec}: no such embedded example; available: {', '.join(EXAMPLE_PREFIX + e for e in EXAMPLES)}")
    return path(f"{name}_{role}.csv")


#: Peak memory of reading per byte of input: the Arrow path (CSV, TSV, Parquet) holds the
#: text, the parsed string columns and the codes -- measured 3.1-3.5 at 10M-100M answers;
#: the exact parser holds a Python object per cell -- measured 10-20.  Input larger
#: than the memory limit divided by the factor is refused before it is read.
ARROW_BYTES_PER_BYTE = 4
PARSE_BYTES_PER_BYTE = 12
#: ...and per field of the header: Arrow's CSV reader builds every column, ~10 KB each however few
#: rows (measured at 20,000-100,000 columns in issue 12: a 1.2 MB CSV with 200,000 columns peaked
#: at 2 GB).  16 KiB leaves room for the slices and names made from each column.
ARROW_BYTES_PER_COLUMN = 16 * 1024
_CHUNK = 1 << 20

#: JSON costs Python objects, so its peak memory depends on its shape, not only its size (30 MB of
#: ``{}`` lines once took 2 GB): it is bounded by a few byte counts of the text (:func:`_json_need`),
#: each weighted by what it can cost at most -- (per byte, per line, per ``{`` or ``[``, per ``:``
#: (a key and its value), per list element (``,`` beyond the pairs' own)) in bytes.  JSON Lines are
#: parsed a line at a time, so a line's own objects are transient (list elements cost nothing) but
#: each line may become a row of the answer set; a JSON document is parsed whole first.  Measured in issue 12 on the costliest shapes (lines of ``{}``,
#: rows that are all blank, every value distinct, lists of ``{}`` or of numbers, mappings of
#: unanswered tasks) with headroom; see tests/test_io.py::test_json_memory_estimate_bounds_measured_peaks.
JSON_COSTS = {
    "jsonl": (2.0, 70.0, 0.0, 130.0, 0.0),
    "json": (3.0, 0.0, 250.0, 250.0, 170.0),
}


def _json_need(data: bytes, fmt: str) -> tuple[float, str]:
    """(an upper bound of the bytes parsing ``data`` as ``fmt`` needs, what it counted) -- a few C-speed scans."""
    per_byte, per_line, per_open, per_colon, per_element = JSON_COSTS[fmt]
    lines = data.count(b"\n") + 1
    opens = data.count(b"{") + data.count(b"[")
    colons = data.count(b":")
    # A comma separates two pairs or two list elements; an object's pairs are counted by their colons.
    elements = max(0, data.count(b",") - colons) if per_element else 0
    need = per_byte * len(data) + per_line * lines + per_open * opens + per_colon * colons + per_element * elements
    if fmt == "jsonl":  # the estimate counts a last unterminated line either way; the message, the real lines
        real_lines = lines - data.endswith(b"\n")
        return need, f"{real_lines:,} lines, {colons:,} values"
    return need, f"{opens:,} objects and lists, {colons + elements:,} values"


def _check_json_size(data: bytes, display: str, fmt: str, max_memory: memory.MaxMemory) -> None:
    need, counted = _json_need(data, fmt)
    kind = "JSON Lines" if fmt == "jsonl" else "JSON"
    memory.check(need, f"parsing {memory.human(len(data))} of {kind} from {display}: {counted}", max_memory,
                 advice="split the input")


def _check_input_size(
    n_bytes: float, display: str, max_memory: memory.MaxMemory, factor: float = ARROW_BYTES_PER_BYTE
) -> None:
    memory.check(
        factor * n_bytes,
        f"reading {memory.human(n_bytes)} of text from {display}",
        max_memory,
        advice="split the input",
    )


def _input_guard(display: str, max_memory: memory.MaxMemory) -> Any:
    """``guard(n_bytes)`` for input that grows block by block: the limit is looked up once."""
    limit = memory.limit_bytes(max_memory)[0] / ARROW_BYTES_PER_BYTE

    def guard(n_bytes: float) -> None:
        if n_bytes > limit:
            _check_input_size(n_bytes, display, max_memory)  # words the refusal

    return guard


def _looks_binary(head: bytes) -> bool:
    """A first block with NUL bytes that is neither gzip, Parquet nor UTF-16/32 with a BOM."""
    if head[:2] == b"\x1f\x8b" or head[:2] in (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE) or head[:4] == b"PAR1":
        return False
    if head[:4] in (codecs.BOM_UTF32_LE, codecs.BOM_UTF32_BE):
        return False
    zeros = head[:4096].count(0)
    return zeros > 0 and not _utf16_like(head)


def _utf16_like(head: bytes) -> bool:
    """NUL at (nearly) every other byte and nowhere else: UTF-16 text without a BOM."""
    sample = head[:400]
    if len(sample) < 4:
        return False
    even, odd = sample[0::2], sample[1::2]
    ze, zo = even.count(0) / len(even), odd.count(0) / len(odd)
    return (ze >= 0.9 and zo <= 0.1) or (zo >= 0.9 and ze <= 0.1)


def _read_stream(read: Any, display: str, max_memory: memory.MaxMemory) -> bytes:
    """All of a stream (stdin, FIFO, device), refusing binary data and oversized input early."""
    chunks: list[bytes] = []
    total = 0
    guard = _input_guard(display, max_memory)
    while True:
        block = read(_CHUNK)
        if not block:
            break
        if isinstance(block, str):
            block = block.encode("utf-8")
        if not chunks and _looks_binary(block):
            raise DataError(f"{display}: not a text file (NUL bytes); expected CSV, TSV, JSON or JSON Lines")
        total += len(block)
        guard(total)
        chunks.append(block)
    return b"".join(chunks)


def _input_name(source: str | os.PathLike[str]) -> str:
    """The path of an input as a string; an empty one is a usage error."""
    name = os.fspath(source)
    if name == "":
        raise UsageError("an input path is empty (use - for standard input)")
    return name


def _stdin() -> Any:
    """Standard input's byte stream (its text stream where it has none), or a DataError when it is closed."""
    stdin = sys.stdin
    if stdin is None:
        raise DataError("standard input is closed: nothing to read from -")
    return getattr(stdin, "buffer", None) or stdin


def _read_source(
    source: str | os.PathLike[str] | IO[bytes], role: str = "labels", max_memory: memory.MaxMemory = None
) -> tuple[bytes, str, str]:
    """(bytes, display name, name used for format detection); refuses input too large to parse."""
    if hasattr(source, "read"):
        display = str(getattr(source, "name", "<stream>"))
        return _read_stream(source.read, display, max_memory), display, ""  # type: ignore[union-attr]
    name = _input_name(source)
    if name == "-":
        stdin = _stdin()
        try:
            data = _read_stream(stdin.read, "<stdin>", max_memory)
        except CrowdaggError:
            raise
        except (OSError, ValueError) as exc:
            raise DataError(f"cannot read standard input ({os_reason(exc)})") from None
        return data, "<stdin>", ""
    if name.startswith(EXAMPLE_PREFIX):
        p = example_path(name, role)
        return p.read_bytes(), name, str(p)
    path = Path(name)
    try:
        st = path.stat()
        if stat.S_ISDIR(st.st_mode):
            raise DataError(f"{name}: is a directory, not a file")
        if stat.S_ISREG(st.st_mode):
            _check_input_size(st.st_size, name, max_memory)
            return path.read_bytes(), name, name
        with open(path, "rb") as fh:  # a FIFO, <(process substitution), a device
            return _read_stream(fh.read, name, max_memory), name, name
    except FileNotFoundError:
        raise DataError(f"{name}: no such file") from None
    except OSError as exc:
        raise DataError(f"{name}: cannot read ({os_reason(exc)})") from None


def _decompress(data: bytes, display: str, max_memory: memory.MaxMemory = None) -> bytes:
    """gunzip (concatenated members too), refusing output too large to parse as it grows."""
    if data[:2] != b"\x1f\x8b":
        return data
    out: list[bytes] = []
    total = 0
    guard = _input_guard(display, max_memory)
    rest = data
    try:
        while rest:
            if rest[:2] != b"\x1f\x8b":
                if rest.strip(b"\x00"):
                    raise DataError(f"{display}: data after the end of the gzip stream")
                break  # zero padding (tape blocks), as gzip itself allows
            d = zlib.decompressobj(wbits=31)
            pending = rest
            while True:
                block = d.decompress(pending, _CHUNK)
                total += len(block)
                guard(total)
                out.append(block)
                pending = d.unconsumed_tail
                if d.eof or (not block and not pending):
                    break
            if not d.eof:
                raise DataError(f"{display}: corrupt or truncated gzip data")
            rest = d.unused_data
    except zlib.error:
        raise DataError(f"{display}: corrupt or truncated gzip data") from None
    return b"".join(out)


def _line_col(data: bytes, offset: int) -> tuple[int, int]:
    """1-based line and column (in bytes) of ``offset``."""
    line = data.count(b"\n", 0, offset) + 1
    start = data.rfind(b"\n", 0, offset) + 1
    return line, offset - start + 1


def to_utf8(data: bytes, display: str) -> bytes:
    """UTF-8 bytes without a BOM, or a one-line error naming the line of the first bad byte.

    UTF-16 with a byte-order mark (Excel "Unicode text") is converted.
    """
    for bom, codec in ((codecs.BOM_UTF32_LE, "utf-32"), (codecs.BOM_UTF32_BE, "utf-32"),
                       (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16")):
        if data.startswith(bom):
            try:
                return data.decode(codec).encode("utf-8")
            except UnicodeDecodeError as exc:
                name = codec.upper()
                raise DataError(f"{display}: starts like {name} but is not valid {name} (at byte {exc.start})") from None
    if data[:3] == codecs.BOM_UTF8:
        data = data[3:]
    head = data[: 1 << 16]
    nul = head.find(b"\x00")
    if nul >= 0:
        if _utf16_like(head):
            raise DataError(
                f"{display}: looks like UTF-16 text without a byte-order mark; save it as UTF-8 (or UTF-16 with BOM)"
            )
        line, _ = _line_col(data, nul)
        raise DataError(f"{display} line {line}: not a text file (NUL byte); expected CSV, TSV, JSON or JSON Lines")
    if data.isascii():  # ASCII is UTF-8: one fast scan instead of decoding
        return data
    n = len(data)
    start = 0
    while start < n:
        end = min(n, start + _DECODE_BLOCK)
        # Cut on a character boundary (never before a continuation byte).
        while end < n and (data[end] & 0xC0) == 0x80 and end > start:
            end -= 1
        try:
            data[start:end].decode("utf-8")
        except UnicodeDecodeError as exc:
            offset = start + exc.start
            line, col = _line_col(data, offset)
            hint = "; it looks like Latin-1/Windows-1252 -- save the file as UTF-8" if data[offset] >= 0x80 else ""
            raise DataError(
                f"{display} line {line}: not UTF-8 text (byte 0x{data[offset]:02X} at column {col}){hint}"
            ) from None
        start = end
    return data


def detect_format(data: bytes, name: str, given: str | None) -> str:
    """The input format: ``given``, else from the extension, else sniffed."""
    if given:
        fmt = given.lower()
        if fmt not in INPUT_FORMATS:
            raise UsageError(f"{param('input_format')} must be one of {', '.join(INPUT_FORMATS)}, got {given!r}")
        return fmt
    if data[:4] == PARQUET_MAGIC:
        return "parquet"
    stem = name[:-3] if name.lower().endswith(".gz") else name
    ext = Path(stem).suffix.lower()
    if ext in _EXTENSIONS and _EXTENSIONS[ext] != "parquet":
        return _EXTENSIONS[ext]
    text = data[:4096].lstrip(b"\xef\xbb\xbf \t\r\n")
    if text[:1] == b"[":
        return "json"
    if text[:1] == b"{":
        lines = [ln.strip() for ln in text.split(b"\n")[:2]]
        try:
            obj = json.loads(lines[0])
        except ValueError:
            return "json"  # an object spread over lines
        if len(lines) > 1 and lines[1][:1] == b"{":
            return "jsonl"  # a second object on the next line
        # One object on one line: a {task: {worker: label}} mapping, or a single record.
        is_mapping = isinstance(obj, dict) and bool(obj) and all(isinstance(v, dict) for v in obj.values())
        return "json" if is_mapping else "jsonl"
    first = text.split(b"\n", 1)[0]
    return "tsv" if b"\t" in first else "csv"


# --------------------------------------------------------------------------- tables
@dataclass
class RawTable:
    """A parsed input before columns are chosen: a header and string columns.

    ``columns[j]`` holds the cells of ``header[j]``, one per data row: an
    Arrow array (CSV, TSV, Parquet: typed there), an object array (a
    DataFrame's object columns, a JSON mapping, the exact CSV parser) or a
    record key's sparse column (JSON records, built whole by
    :meth:`column` only when used).  Cells become names, missing values
    blank, in :func:`crowdagg.data.vocab.as_strings`.  ``locate`` turns a row number into "file line N".
    ``task_order`` lists every task in output order where the format can
    name tasks without answers (JSON mappings, Label Studio).  ``fixed``
    names the task/worker/label columns when the format defines them.
    """

    header: list[str]
    columns: list[Any]
    locate: Locator
    display: str
    task_order: list[str] | None = None
    fixed: tuple[str, str, str] | None = None
    notes: list[str] = field(default_factory=list)
    kind: str = ""
    controls: JsonMinControls | None = None
    classes: list[str] | None = None

    @property
    def n_rows(self) -> int:
        return len(self.columns[0]) if self.columns else 0

    def column(self, name: str) -> np.ndarray:
        col = self.columns[self.header.index(name)]
        return col.dense() if isinstance(col, _SparseColumn) else col

    def subset(self, rows: np.ndarray) -> RawTable:
        return RawTable(
            self.header, [_take(c, rows) for c in self.columns], self.locate.subset(rows), self.display,
            self.task_order, self.fixed, self.notes, self.kind, self.controls, self.classes,
        )


def _pylist(column: Any) -> list:
    """A column's cells as a list of str (missing values blank, typed Parquet columns as their names)."""
    from ..data.vocab import as_strings

    names = as_strings(column.dense() if isinstance(column, _SparseColumn) else column)[0]
    return names.to_pylist()


def _names(table: RawTable, col: str, role: str) -> tuple[Any, np.ndarray, Any]:
    """Column ``col`` of ``table`` as names (:func:`crowdagg.data.vocab.as_strings`) and their dictionary
    encoding, each distinct name checked (:func:`crowdagg.data.vocab.invalid_names`); a value that cannot be
    a name is an error naming the file, the line or row, and the column.  Returns (names, codes, uniques)."""
    from ..data.annotations import name_error
    from ..data.vocab import InvalidName, encode, invalid_names

    names, _ = _as_names(table, col, role)
    codes, uniques = encode(names)
    bad = invalid_names(uniques)
    if bad is not None:
        raise name_error(InvalidName(int(np.argmax(codes == bad[0])), bad[1], role), role, table.locate, col)
    return names, codes, uniques


def _take(column: Any, rows: np.ndarray) -> Any:
    if isinstance(column, _SparseColumn):
        column = column.dense()
    if isinstance(column, np.ndarray):
        return column[rows]
    from ..data.vocab import take

    return take(column, rows)


def _json_cell(v: Any) -> Any:
    """A JSON value as a cell: strings and numbers as their text (numbers are parsed as text), booleans
    ``true``/``false``; ``null`` and ``NaN`` (parsed as None) stay None, and a list or object stays as it
    is -- :func:`crowdagg.data.vocab.as_strings` makes the first blank and refuses the second, naming the row."""
    if isinstance(v, str) or v is None:
        return v
    if isinstance(v, bool):
        return "true" if v else "false"
    return v


class _SparseColumn:
    """One key of a set of records: the rows that have it and their cells, blank (None) elsewhere.

    Records name their keys row by row; a key seen in a few rows costs
    those rows only, and a column is built whole (:meth:`dense`) only when
    it is used -- thousands of distinct keys never make a keys × rows table.
    """

    __slots__ = ("rows", "values", "cache", "n", "nested")

    def __init__(self) -> None:
        from array import array

        self.rows = array("q")
        self.values: list[Any] = []
        self.cache: dict[str, str] = {}  # one str object per distinct cell (labels, workers repeat)
        self.n = 0
        self.nested: Any = None

    def __len__(self) -> int:
        return self.n

    def add(self, row: int, v: Any) -> None:
        if isinstance(v, str):
            v = self.cache.setdefault(v, v)
        elif isinstance(v, (dict, list)):
            # Only the first nested value is ever shown (the column is refused there, if used):
            # the others are not kept, so that a column of big nested values costs nothing.
            if self.nested is None:
                self.nested = v
            v = self.nested
        elif v is not None:
            v = _json_cell(v)
        self.rows.append(row)
        self.values.append(v)

    def dense(self) -> np.ndarray:
        out = np.full(self.n, None, dtype=object)
        if self.values:
            out[np.frombuffer(self.rows, dtype=np.int64)] = _objects(self.values)
        return out


def _objects(values: Sequence[Any]) -> np.ndarray:
    """An object array of ``values``, one element each (``np.array`` would spread a list cell into a dimension)."""
    return np.fromiter(values, dtype=object, count=len(values))


#: Records naming more keys than this are no table of answers (a key costs a column): refused, naming the line.
MAX_RECORD_KEYS = 10_000


class _Records:
    """Builds a table from records (JSON objects, Python mappings), one at a time, holding no record.

    ``add(rec, number)`` takes one record (``number``: its line or record
    number, for errors as ``DISPLAY UNIT NUMBER``); ``table(locate)`` gives
    the :class:`RawTable`, one column per key seen in any record (a missing
    key is a blank cell).
    """

    def __init__(self, display: str, unit: str) -> None:
        self.columns: dict[str, _SparseColumn] = {}
        self.n = 0
        self.display = display
        self.unit = unit

    def add(self, rec: Any, number: int) -> None:
        if type(rec) is not dict:
            self._check(rec, number)
        row = self.n
        columns = self.columns
        for k, v in rec.items():
            col = columns.get(k)
            if col is None:
                if not isinstance(k, str):
                    k = str(k)
                    col = columns.get(k)
                if col is None and len(columns) >= MAX_RECORD_KEYS:
                    raise DataError(
                        f"{self.display} {self.unit} {number}: more than {MAX_RECORD_KEYS:,} different keys; "
                        "records of answers name a few fields (task, worker, label, ...)"
                    )
                col = columns[k] = col if col is not None else _SparseColumn()
            col.add(row, v)
        self.n = row + 1

    def _check(self, rec: Any, number: int) -> None:
        where = f"{self.display} {self.unit} {number}"
        if not isinstance(rec, Mapping):
            kind = "a number" if isinstance(rec, _JSONNumber) else json_type(rec)
            raise DataError(f"{where} is {kind}, expected an object with task, worker and label")
        if isinstance(rec, _DupDict):
            keys = [k for k, _ in rec.pairs]
            dup = next(k for k in keys if keys.count(k) > 1)
            raise DataError(f"{where} has the key {dup!r} twice")

    def table(self, locate: Locator) -> RawTable:
        for col in self.columns.values():
            col.n = self.n
            col.cache = {}
        return RawTable(list(self.columns), list(self.columns.values()), locate, self.display)


class _JSONNumber(str):
    """A JSON number kept as its text (``1.10`` stays ``1.10``, ``1E2`` stays ``1E2``)."""

    __slots__ = ()  # no instance dict: a list of a million numbers costs its text, not 160 bytes each


def _number_text(text: str) -> str:
    return _JSONNumber(text)


class _DupDict(dict):
    """A JSON object with a repeated key: ``pairs`` keeps every (key, value) in order."""

    pairs: list[tuple[str, Any]]


def _object_pairs(pairs: list[tuple[str, Any]]) -> dict:
    d = dict(pairs)
    if len(d) == len(pairs):
        return d
    out = _DupDict(d)
    out.pairs = pairs
    return out


def _json_loads(text: str) -> Any:
    """``json.loads`` keeping repeated keys (see :class:`_DupDict`) and numbers as their text.

    A label ``1.10`` must not become ``1.1`` (merging it with another class)
    nor ``1e400`` become ``Infinity``: numbers are never converted.
    """
    return json.loads(
        text, object_pairs_hook=_object_pairs, parse_float=_number_text, parse_int=_number_text,
        parse_constant=_constant,
    )


def _constant(text: str) -> Any:
    """JSON's non-standard constants (Python writes them): ``NaN`` is a missing value, as in a float
    column; ``Infinity`` and ``-Infinity`` stay text."""
    return None if text == "NaN" else _JSONNumber(text)


def _records_table(records: Any, display: str, unit: str, consume: bool = False) -> RawTable:
    """Records (JSON objects, mappings) -> columns, one per key seen in any record.

    A missing key or ``null`` is a blank cell, reported like a blank CSV
    cell; numbers keep their JSON text (``1.0`` stays ``1.0``).  With
    ``consume`` (a list parsed here, never a caller's) each record is
    dropped from ``records`` once read, so that the parsed JSON and the
    columns are not both held whole.
    """
    builder = _Records(display, unit)
    for i in range(len(records)):
        rec = records[i]
        if consume:
            records[i] = None
        builder.add(rec, i + 1)
    return builder.table(Locator(display, first_line=1, unit=unit))


def _parse_json(data: bytes, display: str, label_col: str | None) -> RawTable:
    try:
        obj = _json_loads(data.decode("utf-8"))
    except json.JSONDecodeError as exc:
        raise DataError(f"{display} line {exc.lineno}: malformed JSON at column {exc.colno}: {exc.msg}") from None
    except RecursionError:
        raise DataError(f"{display}: JSON nested too deeply to be a table of answers") from None
    if isinstance(obj, list):
        from .platforms import is_label_studio, json_min_controls

        # Records: maybe a Label Studio JSON-MIN export, whose key order names its controls (read
        # before the records are consumed into columns).
        controls = json_min_controls(obj) if obj and not is_label_studio(obj) else None
        table = _parse_json_list(obj, display, label_col)
        if table.fixed is None:
            table.controls = controls
        return table
    if isinstance(obj, dict):
        if "annotations" in obj or "completions" in obj:
            # one Label Studio task exported on its own
            return _parse_json_list([obj], display, label_col)
        if obj and not any(isinstance(v, (dict, list)) for _, v in _pairs_of(obj)):
            # one record, not a list of them
            return _records_table([obj], display, "record")
        pairs = _pairs_of(obj)
        del obj  # each task's answers are freed once read
        return _parse_mapping(pairs, display)
    raise DataError(
        f"{display}: the JSON top level is {json_type(obj)}; expected a list of records or a {{task: {{worker: label}}}} object"
    )


def _parse_json_list(obj: list, display: str, label_col: str | None) -> RawTable:
    """A JSON list: a Label Studio export, or records."""
    if not obj:
        raise DataError(f"{display}: no answers (empty JSON list)")
    from .platforms import flatten_label_studio, is_label_studio

    if not is_label_studio(obj):
        return _records_table(obj, display, "record", consume=True)
    flat = flatten_label_studio(obj, source=display, label=label_col, options={"label": param("label_col")})
    notes = []
    if flat.n_cancelled:
        notes.append(f"{flat.n_cancelled} cancelled Label Studio annotation(s) skipped")
    if flat.n_without_choice:
        notes.append(f"{flat.n_without_choice} Label Studio annotation(s) without a {flat.label_name!r} choice skipped")
    columns = [_objects(v) for v in (flat.task, flat.worker, flat.label)]
    return RawTable(
        ["task", "worker", "label"], columns,
        Locator(display, unit="task", lines=np.asarray(flat.record, dtype=np.int64)), display,
        task_order=list(flat.tasks), fixed=("task", "worker", "label"), notes=notes, kind="Label Studio export",
    )


def _pairs_of(obj: dict) -> list[tuple[str, Any]]:
    return obj.pairs if isinstance(obj, _DupDict) else list(obj.items())


def _parse_mapping(pairs: list[tuple[str, Any]], display: str) -> RawTable:
    """``{task: {worker: label}}`` given as its (task, answers) pairs, which are dropped once read:
    repeated keys kept (duplicates), ``{}`` tasks kept (no answers)."""
    tasks: list[str] = []
    workers: list[str] = []
    labels: list[str] = []
    order: list[str] = []
    for i in range(len(pairs)):
        task, answers = pairs[i]
        pairs[i] = None  # type: ignore[call-overload]
        if not isinstance(answers, dict):
            raise DataError(
                f"{display}: value of task {task!r} is {json_type(answers)}; expected a list of "
                "records or a {task: {worker: label}} mapping"
            )
        order.append(task)
        for worker, label in _pairs_of(answers):
            tasks.append(task)
            workers.append(worker)
            labels.append(_json_cell(label))
    columns = [_objects(v) for v in (tasks, workers, labels)]
    return RawTable(
        ["task", "worker", "label"], columns, Locator(display, first_line=1, unit="answer"), display,
        task_order=order, fixed=("task", "worker", "label"), kind="{task: {worker: label}} mapping",
    )


def _parse_jsonl(data: bytes, display: str) -> RawTable:
    """JSON Lines, one line at a time: no decoded copy of the text, no list of lines, no record kept."""
    from array import array

    builder = _Records(display, "line")
    lines = array("q")
    lineno = 0
    # Split on \n only (a binary stream's lines): U+2028, U+0085 and friends may sit inside a JSON string.
    for lineno, raw in enumerate(io.BytesIO(data), start=1):
        if not raw.strip():
            continue
        line = raw.decode("utf-8")  # checked by to_utf8: cannot fail
        try:
            rec = _json_loads(line)
        except json.JSONDecodeError as exc:
            raise DataError(f"{display} line {lineno}: malformed JSON at column {exc.colno}: {exc.msg}") from None
        except RecursionError:
            raise DataError(f"{display} line {lineno}: JSON nested too deeply") from None
        builder.add(rec, lineno)
        lines.append(lineno)
    if not builder.n:
        raise DataError(f"{display}: no answers (only blank lines)")
    return builder.table(Locator(display, lines=np.frombuffer(lines, dtype=np.int64)))


_FIELDS_ERROR = re.compile(r"Expected (\d+) fields in line (\d+), saw (\d+)")
_EOF_IN_STRING = re.compile(r"EOF inside string starting at row (\d+)")


def _header_fields(data: bytes, sep: str) -> int | None:
    """Number of fields of the header record (the first), as the parsers count them; None if unsure."""
    import csv

    end = data.find(b"\n")
    head = data if end < 0 else data[: end + 1]
    if b"\r" in head.rstrip(b"\r\n"):
        return None  # CR line ends: the exact parser decides
    if sep == "," and b'"' in head:
        # a quoted header cell may span lines: let the csv module find the first record
        try:
            first = next(csv.reader(io.StringIO(data[: 1 << 20].decode("utf-8", "replace"), newline="")), [])
        except csv.Error:  # an unclosed quote, a huge cell
            return None
        return max(len(first), 1)
    return head.rstrip(b"\r\n").count(sep.encode()) + 1


def _parse_delimited_arrow(
    data: bytes, display: str, sep: str, block_size: int = 1 << 24, newlines: list[int] | None = None
) -> RawTable | None:
    """Parse CSV/TSV with Arrow: every cell a string, no Python object per cell.

    Returns None where Arrow cannot keep a guarantee of the exact parser
    (:func:`_parse_delimited`): a row with another number of fields than the
    header (short rows are padded there, long ones are an error naming the
    line), a parse error (named by line there), or text Arrow reads
    differently.  Lines holding only whitespace are skipped, as there.
    """
    import pyarrow as pa
    import pyarrow.csv as pcsv

    from ..kernels import quote_parity, scan_records

    n_cols = _header_fields(data, sep)
    if n_cols is None:
        return None
    quoting = sep == "," and b'"' in data
    spans = False
    if quoting:
        spans, odd = quote_parity(data)
        if odd:
            return None  # an unclosed quote, or stray quotes: the exact parser decides
    irregular: list[bool] = []
    n_blank = [0]

    def invalid_row(row: Any) -> str:
        rest = row.text.partition(sep)[2]
        if row.text.strip(" \t\x0b\x0c\r\n") or rest.replace(sep, "") or row.actual_columns > n_cols:
            irregular.append(True)
        else:
            n_blank[0] += 1  # a line of spaces: not a row (the exact parser's rule)
        return "skip"

    names = [f"f{i}" for i in range(n_cols)]
    try:
        table = pcsv.read_csv(
            pa.py_buffer(data),
            read_options=pcsv.ReadOptions(
                column_names=names, block_size=block_size, use_threads=threads.count() > 1  # the thread policy
            ),
            parse_options=pcsv.ParseOptions(
                delimiter=sep, quote_char='"' if sep == "," else False, double_quote=True,
                escape_char=False, newlines_in_values=spans, ignore_empty_lines=True,
                invalid_row_handler=invalid_row,
            ),
            convert_options=pcsv.ConvertOptions(
                column_types={n: pa.string() for n in names}, strings_can_be_null=False,
                quoted_strings_can_be_null=False, check_utf8=False,
            ),
        )
    except (pa.ArrowInvalid, pa.ArrowException):
        return None
    if irregular:
        return None
    n_rows = table.num_rows - 1
    if n_rows < 0:
        return None
    columns = [table.column(i) for i in range(n_cols)]
    header = [c[0].as_py() for c in columns]
    columns = [c.slice(1) for c in columns]
    del table
    n_newlines = data.count(b"\n")
    if newlines is not None:  # the caller's count of LF, from this one scan
        newlines.append(n_newlines)
    lone_cr = b"\r" in data and data.count(b"\r") != data.count(b"\r\n")
    single_line = n_newlines + (not data.endswith(b"\n")) == n_rows + 1 and not lone_cr
    if single_line and not n_blank[0] and sep == "," and not quoting:
        return RawTable(header, columns, Locator(display, first_line=2), display)
    # Blank lines were skipped, quotes (a cell may span lines, or never close), CR line ends, or
    # (TSV) a blank line has every field: find each row's line, and drop rows that are blank lines.
    lines, blank, blank_other, bad_other = scan_records(data, sep, quoting, n_cols)
    if len(lines) != n_rows or blank_other != n_blank[0] or bad_other:
        return None  # the scan and the parser disagree: leave it to the exact parser
    table_out = RawTable(header, columns, Locator(display, lines=lines), display)
    return table_out.subset(np.flatnonzero(~blank)) if blank.any() else table_out


def _parse_delimited(data: bytes, display: str, sep: str, max_memory: memory.MaxMemory = None) -> RawTable:
    n_cols = _header_fields(data, sep) or 1
    memory.check(
        ARROW_BYTES_PER_BYTE * len(data) + ARROW_BYTES_PER_COLUMN * n_cols,
        f"reading {memory.human(len(data))} of text in {n_cols:,} columns from {display}",
        max_memory,
        advice="split the input, or keep only the columns needed",
    )
    parsed = _parse_delimited_arrow(data, display, sep) if data.strip() else None
    if parsed is not None:
        return parsed
    _check_input_size(len(data), display, max_memory, PARSE_BYTES_PER_BYTE)
    return _parse_delimited_exact(data, display, sep)


def _parse_delimited_exact(data: bytes, display: str, sep: str) -> RawTable:
    """The exact (pandas) parser: every irregular input; slower, with Python objects per cell."""
    import csv

    import pandas as pd

    kind = "TSV" if sep == "\t" else "CSV"
    has_quotes = sep == "," and b'"' in data
    try:
        frame = pd.read_csv(
            io.BytesIO(data), sep=sep, header=None, dtype=str, keep_default_na=False, na_filter=False,
            skip_blank_lines=False, engine="c", encoding="utf-8",
            quoting=csv.QUOTE_MINIMAL if sep == "," else csv.QUOTE_NONE,
        )
    except pd.errors.EmptyDataError:
        raise DataError(f"{display}: file is empty") from None
    except pd.errors.ParserError as exc:
        msg = str(exc).strip().split("\n")[-1]
        m = _FIELDS_ERROR.search(msg)
        if m:
            expected, record, saw = (int(g) for g in m.groups())
            line = _record_line(data, sep, record) if has_quotes else record
            raise DataError(
                f"{display} line {line}: {saw} fields, but the header has {expected}; "
                "a cell containing the delimiter must be quoted"
                + (" (TSV has no quoting)" if sep == "\t" else "")
            ) from None
        m = _EOF_IN_STRING.search(msg)
        if m:
            line = _record_line(data, sep, int(m.group(1)) + 1)
            raise DataError(f"{display} line {line}: a quoted field opened here is never closed") from None
        msg = msg.replace("Error tokenizing data. C error: ", "")
        raise DataError(f"{display}: malformed {kind}: {msg}") from None
    values = [frame[c].to_numpy(dtype=object) for c in frame.columns]
    header = [str(v[0]) for v in values]
    columns = [v[1:] for v in values]
    n_rows = len(columns[0]) if columns else 0
    # Only a quoted field spanning lines makes rows and lines disagree.
    n_lines = data.count(b"\n") + (not data.endswith(b"\n"))
    starts = _record_start_lines(data, sep) if has_quotes and n_lines != n_rows + 1 else None
    if starts is not None and len(starts) == n_rows:
        locate = Locator(display, lines=starts)
    else:
        locate = Locator(display, first_line=2)
    table = RawTable(header, columns, locate, display)
    empty = _empty_line_rows(data, table)
    return table.subset(np.flatnonzero(~empty)) if empty.any() else table


def _empty_line_rows(data: bytes, table: RawTable) -> np.ndarray:
    """Rows that come from lines holding nothing but whitespace: not rows at all, skipped silently.

    A line of bare delimiters (``,,``) is a row whose cells are blank, and is
    left to the caller (skipped with a warning).
    """
    mask = np.zeros(table.n_rows, dtype=bool)
    if table.n_rows == 0:
        return mask
    rest_blank = np.ones(table.n_rows, dtype=bool)
    for c in table.columns[1:]:
        rest_blank &= c == ""
    candidates = np.flatnonzero(rest_blank)
    if candidates.size == 0:
        return mask
    buf = np.frombuffer(data, dtype=np.uint8)
    cr = np.flatnonzero(buf == 13)
    lone_cr = cr[(cr + 1 >= buf.size) | (buf[np.minimum(cr + 1, buf.size - 1)] != 10)]
    newlines = np.sort(np.concatenate([np.flatnonzero(buf == 10), lone_cr]))  # LF, CRLF, lone CR
    first = table.columns[0]
    for r in candidates.tolist():
        if first[r].strip():
            continue
        line = table.locate.line(r)
        if not 1 <= line <= newlines.size + 1:
            continue
        start = int(newlines[line - 2]) + 1 if line >= 2 else 0
        end = int(newlines[line - 1]) if line - 1 < newlines.size else len(data)
        mask[r] = not data[start:end].strip()
    return mask


def _record_starts(data: bytes, sep: str) -> list[int]:
    import csv

    reader = csv.reader(io.StringIO(data.decode("utf-8"), newline=""), delimiter=sep)
    starts: list[int] = []
    end = 0
    for _ in reader:
        starts.append(end + 1)
        end = reader.line_num
    return starts


def _record_line(data: bytes, sep: str, record: int) -> int:
    """Physical line where the ``record``-th record (1-based, header = 1) starts."""
    import csv

    try:
        starts = _record_starts(data, sep)
    except csv.Error:
        return record
    return starts[record - 1] if 0 < record <= len(starts) else record


def _record_start_lines(data: bytes, sep: str) -> np.ndarray | None:
    """First line of each data record (after the header), or None if unknown."""
    import csv

    try:
        starts = _record_starts(data, sep)
    except csv.Error:
        return None
    return np.asarray(starts[1:], dtype=np.int64)


# --------------------------------------------------------------------------- large inputs, a block at a time
#: Text parsed and encoded at a time: a CSV or TSV input longer than this is read, checked, parsed and
#: encoded a block of records at a time (:class:`_Blocks`), so that neither the whole text nor a whole
#: parsed table is ever held -- only the codes and names of what was read.  Shorter inputs, and inputs
#: that cannot be cut into blocks (JSON, gzip, Parquet, UTF-16, platform exports), are read whole.
BLOCK_BYTES = 1 << 24


class _Fallback(Exception):
    """A streamed input that must be read whole after all (an irregular row, a header the column
    mapping refuses, a platform export): the whole-file readers decide, with their messages.

    ``exact``: a block Arrow cannot parse with the guarantees, so the exact parser (about
    :data:`PARSE_BYTES_PER_BYTE` bytes of memory a byte) will read the input: refused up front, by the
    input's size, where it would not fit.
    """

    def __init__(self, exact: bool = False) -> None:
        super().__init__()
        self.exact = exact


class _Input:
    """An input opened for reading in pieces: a regular file, standard input, a FIFO or a binary stream.

    What is read from a source that cannot be read twice (standard input, a
    FIFO, a stream) is also written to a temporary file (on disk, not in
    memory), so that :meth:`whole` can read it from the start if the
    whole-file readers are needed after all.
    """

    def __init__(self, fh: Any, display: str, name: str, size: int | None, close: bool) -> None:
        import tempfile

        self.fh, self.display, self.name, self.size, self.close_fh = fh, display, name, size, close
        self.spool = None if size is not None else tempfile.TemporaryFile()
        self.eof = False
        self.n_read = 0

    def read(self, n: int) -> bytes:
        """Up to ``n`` more bytes (fewer only at the end)."""
        parts: list[bytes] = []
        got = 0
        while got < n and not self.eof:
            try:
                block = self.fh.read(min(n - got, 16 * _CHUNK))  # a read allocates what it asks for
            except (OSError, ValueError) as exc:
                raise DataError(f"{self.display}: cannot read ({os_reason(exc)})") from None
            if isinstance(block, str):
                block = block.encode("utf-8")
            if not block:
                self.eof = True
                break
            parts.append(block)
            got += len(block)
        data = parts[0] if len(parts) == 1 else b"".join(parts)
        if self.spool is not None:
            self.spool.write(data)
        self.n_read += len(data)
        return data

    def whole(self, max_memory: memory.MaxMemory) -> bytes:
        """Every byte of the input from its start, refusing input too large to parse whole."""
        if self.size is not None:  # a regular file: read again from its start
            _check_input_size(max(self.size, self.n_read), self.display, max_memory)
            self.fh.seek(0)
            try:
                data = self.fh.read()
            except (OSError, ValueError) as exc:
                raise DataError(f"{self.display}: cannot read ({os_reason(exc)})") from None
            self.eof, self.n_read = True, len(data)
            return data
        guard = _input_guard(self.display, max_memory)
        guard(self.n_read)
        while not self.eof:
            self.read(_CHUNK)
            guard(self.n_read)
        assert self.spool is not None
        self.spool.seek(0)
        return self.spool.read()

    def close(self) -> None:
        if self.close_fh:
            self.fh.close()
        if self.spool is not None:
            self.spool.close()
            self.spool = None


def _open_input(source: str | os.PathLike[str] | IO[bytes]) -> _Input | None:
    """``source`` opened for reading in pieces; None for what is always read whole (``example:`` data)."""
    if hasattr(source, "read"):
        return _Input(source, str(getattr(source, "name", "<stream>")), "", None, close=False)
    name = _input_name(source)
    if name == "-":
        return _Input(_stdin(), "<stdin>", "", None, close=False)
    if name.startswith(EXAMPLE_PREFIX):
        return None
    path = Path(name)
    try:
        st = path.stat()
        if stat.S_ISDIR(st.st_mode):
            raise DataError(f"{name}: is a directory, not a file")
        fh = open(path, "rb")  # noqa: SIM115 - closed by the caller through _Input.close
    except FileNotFoundError:
        raise DataError(f"{name}: no such file") from None
    except OSError as exc:
        raise DataError(f"{name}: cannot read ({os_reason(exc)})") from None
    return _Input(fh, name, name, st.st_size if stat.S_ISREG(st.st_mode) else None, close=True)


def _stream_kind(head: bytes, name: str, input_format: str | None) -> tuple[str, bytes] | None:
    """(separator, header line) when a large input's first block says it can be read a block at a time
    (CSV or TSV in UTF-8 with a one-line header), else None: it is read whole."""
    if head[:2] == b"\x1f\x8b" or head[:4] == PARQUET_MAGIC or (input_format or "").lower() == "parquet":
        return None
    for bom in (codecs.BOM_UTF32_LE, codecs.BOM_UTF32_BE, codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE):
        if head.startswith(bom):
            return None
    text = head[3:] if head[:3] == codecs.BOM_UTF8 else head
    if b"\x00" in text[: 1 << 16] or not text[:BLOCK_BYTES].strip():
        return None  # the whole-file reader words it
    try:
        fmt = detect_format(text, name, input_format)
    except CrowdaggError:
        return None
    if fmt not in ("csv", "tsv") or head[:4] == PARQUET_MAGIC:
        return None
    sep = "," if fmt == "csv" else "\t"
    end = text.find(b"\n")
    if end < 0:
        return None
    header = text[: end + 1]
    if b"\r" in header.rstrip(b"\r\n") or header.count(b'"') % 2 or _header_fields(text, sep) is None:
        return None
    return sep, header


def _check_utf8(chunk: bytes, display: str, lines_before: int) -> None:
    """:func:`to_utf8`'s check of one block of text, lines counted from ``lines_before``."""
    if chunk.isascii():
        return
    try:
        chunk.decode("utf-8")
    except UnicodeDecodeError as exc:
        offset = exc.start
        line, col = _line_col(chunk, offset)
        hint = "; it looks like Latin-1/Windows-1252 -- save the file as UTF-8" if chunk[offset] >= 0x80 else ""
        raise DataError(
            f"{display} line {line + lines_before}: not UTF-8 text (byte 0x{chunk[offset]:02X} at column {col}){hint}"
        ) from None


def _line_breaks(chunk: bytes, newlines: int | None = None) -> int:
    """Line breaks as the record scan counts them: LF, CRLF and a lone CR each one (``newlines``: the
    count of LF, when known)."""
    lf = chunk.count(b"\n") if newlines is None else newlines
    if b"\r" not in chunk:  # a memchr scan, where a count is a slower one
        return lf
    cr = chunk.count(b"\r")
    return lf + cr - chunk.count(b"\r\n")


def _record_cut(data: bytes, at: int, quoting: bool) -> int:
    """The end of the first record ending at or after byte ``at`` (just after its LF): a LF after an even
    number of ``"`` (counted from the start of ``data``, a record's start).  -1 if none."""
    nl = data.find(b"\n", at)
    if not quoting or nl < 0:
        return nl + 1 if nl >= 0 else -1
    odd = data.count(b'"', 0, nl) % 2 if data.find(b'"', 0, nl) >= 0 else 0  # find: memchr, count is slower
    while odd:
        nxt = data.find(b"\n", nl + 1)
        if nxt < 0:
            return -1
        odd ^= data.count(b'"', nl, nxt) % 2
        nl = nxt
    return nl + 1


class _Blocks:
    """A large CSV or TSV input as tables of consecutive records (:func:`_parse_delimited_arrow` on each
    block after the header line), their locators naming the lines of the whole input."""

    def __init__(self, inp: _Input, head: bytes, sep: str, header: bytes, max_memory: memory.MaxMemory) -> None:
        self.inp, self.sep, self.header, self.max_memory = inp, sep, header, max_memory
        self.first, self.first_bytes = True, 0
        self.display = inp.display
        bom = 3 if head[:3] == codecs.BOM_UTF8 else 0
        _check_utf8(header, self.display, 0)
        self.pending = head[bom + len(header):]
        self.newlines = 1  # LF before the pending text, for UTF-8 errors (as to_utf8 counts)
        self.lines = _line_breaks(header)  # line breaks before it, as the record scan counts
        self.n_cols = _header_fields(head[bom:], sep) or 1

    def __iter__(self) -> Any:
        quoting = self.sep == ","
        while self.pending or not self.inp.eof:
            with _timing.stage("read"):
                if len(self.pending) < BLOCK_BYTES and not self.inp.eof:  # a block's worth, then a little more
                    self.pending += self.inp.read(BLOCK_BYTES - len(self.pending) + _CHUNK)
                cut = _record_cut(self.pending, BLOCK_BYTES, quoting)
                while cut < 0 and not self.inp.eof:
                    self.pending += self.inp.read(_CHUNK)
                    cut = _record_cut(self.pending, BLOCK_BYTES, quoting)
                if cut < 0:
                    cut = len(self.pending)
                # The header and the block's records in one buffer: one copy of the text, not two.
                data = b"".join((self.header, memoryview(self.pending)[:cut]))
                self.pending = self.pending[cut:]
            yield self._table(data)
            del data

    def close(self) -> None:
        self.inp.close()

    def _table(self, data: bytes) -> RawTable:
        """The table of one block: ``data`` is the header line and the block's records."""
        with _timing.stage("read"):
            _check_utf8(data, self.display, self.newlines - 1)  # the header (checked) is its line 1
        newlines: list[int] = []
        with _timing.stage("parse"):
            # Arrow parses its blocks on the threads: a block of ours is cut in a few of Arrow's.
            table = _parse_delimited_arrow(data, self.display, self.sep, block_size=max(1 << 20, len(data) // 4),
                                           newlines=newlines)
        if table is None:
            raise _Fallback(exact=True)
        n_bytes = len(data) - len(self.header)
        if self.first:
            self.first, self.first_bytes = False, n_bytes
            _check_stream_memory(self.inp, self.n_cols, table.n_rows, n_bytes, self.max_memory)
        header_breaks = _line_breaks(self.header)
        shift = self.lines - header_breaks
        loc = table.locate
        table.locate = (Locator(self.display, loc.first_line + shift) if loc.lines is None
                        else Locator(self.display, lines=loc.lines + shift))
        self.newlines += newlines[0] - 1
        self.lines += _line_breaks(data, newlines[0]) - header_breaks
        return table


class _ParquetBatches:
    """A large Parquet file read a batch of rows at a time (its task, worker and label columns only)."""

    #: Rows decoded at a time.
    BATCH_ROWS = 1 << 20

    def __init__(self, inp: _Input, pf: Any) -> None:
        self.inp, self.pf, self.display = inp, pf, inp.display
        self.header = [str(n) for n in pf.schema_arrow.names]

    @classmethod
    def open(cls, inp: _Input) -> _ParquetBatches | None:
        """The batches of ``inp``, or None where the whole-file reader must decide (a truncated or unreadable
        file, a repeated column name, no rows)."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        try:
            inp.fh.seek(-4, 2)
            if inp.fh.read(4) != PARQUET_MAGIC:
                return None
            inp.fh.seek(0)
            pf = pq.ParquetFile(inp.fh)
        except (pa.ArrowException, OSError, ValueError):
            return None
        names = [str(n) for n in pf.schema_arrow.names]
        if len(set(names)) != len(names) or pf.metadata.num_rows == 0:
            return None
        return cls(inp, pf)

    def close(self) -> None:
        self.inp.close()

    def encode(
        self, encoder: Any, task_col: str | None, worker_col: str | None, label_col: str | None,
        max_memory: memory.MaxMemory,
    ) -> tuple[Locator, int, tuple[str, str, str], tuple[str | None, ...]]:
        """The parse and encode stages, batch by batch: (locator, rows, columns, the three columns' dtypes --
        the label's as a category where the column is dictionary-encoded)."""
        import pyarrow as pa

        from ..data.annotations import name_error
        from ..data.vocab import InvalidName, as_strings

        cols = _block_columns(RawTable(self.header, [], Locator(self.display), self.display),
                              task_col, worker_col, label_col)
        meta = self.pf.metadata
        decoded = sum(meta.row_group(i).total_byte_size for i in range(meta.num_row_groups))
        per_row = 2 * max(decoded / max(meta.num_rows, 1), 24 * 3)  # as the whole-file reader counts a cell
        memory.check(
            per_row * min(self.BATCH_ROWS, meta.num_rows) + BYTES_PER_ANSWER * meta.num_rows,
            f"reading {meta.num_rows:,} rows of Parquet from {self.display} a batch at a time", max_memory,
            advice="split the input",
        )
        locate = Locator(self.display, first_line=1, unit="row")
        encoder.reserve(meta.num_rows)
        rows = 0
        dtypes: tuple[str | None, ...] = (None, None, None)
        batches = self.pf.iter_batches(batch_size=self.BATCH_ROWS, columns=list(dict.fromkeys(cols)),
                                       use_threads=threads.count() > 1)
        while True:
            try:
                with _timing.stage("parse"):
                    batch = next(batches, None)
            except (pa.ArrowException, OSError) as exc:
                raise _Fallback() from exc
            if batch is None:
                break
            named = []
            for i, (c, role) in enumerate(zip(cols, _ROLES)):
                try:
                    named.append(as_strings(batch.column(c), role))
                except InvalidName as exc:
                    if exc.row is not None:
                        exc.row += rows
                    raise name_error(exc, role, locate, cols[i]) from None
            dtypes = tuple(d for _, d in named)
            with _timing.stage("encode"):
                encoder.add(*(n for n, _ in named))
            rows += batch.num_rows
            del batch, named
        if pa.types.is_dictionary(self.pf.schema_arrow.field(cols[2]).type):
            dtypes = (*dtypes[:2], f"category[{dtypes[2]}]" if dtypes[2] else "category")
        return locate, rows, cols, dtypes


#: Bytes an answer costs once encoded: its codes (4 + 4 + 1) and, while sorted by task, the copies the
#: counting sort writes of the worker and label codes (4 + 1).
BYTES_PER_ANSWER = 14


def _check_stream_memory(
    inp: _Input, n_cols: int, rows: int, n_bytes: int, max_memory: memory.MaxMemory
) -> None:
    """Refuse a large input whose blocks and codes would not fit: the parsing of two blocks, and the codes
    of the answers -- counted at the first block's ``rows`` per ``n_bytes`` where the size is known."""
    need = float(ARROW_BYTES_PER_BYTE * 2 * BLOCK_BYTES + ARROW_BYTES_PER_COLUMN * n_cols)
    what = f"reading {inp.display} a block at a time"
    if inp.size:
        answers = inp.size * rows / max(n_bytes, 1)
        need += BYTES_PER_ANSWER * 1.1 * answers
        what = f"reading {memory.human(inp.size)} of text from {inp.display} (about {answers:,.0f} answers)"
    memory.check(need, what, max_memory, advice="split the input")


def read_bytes(source: str | os.PathLike[str] | IO[bytes], max_memory: memory.MaxMemory = None) -> tuple[bytes, str]:
    """(The bytes of a path, ``-`` or stream, gunzipped; its display name) -- for JSON inputs that are not tables."""
    raw, display, _ = _read_source(source, "labels", max_memory)
    data = _decompress(raw, display, max_memory)
    _check_input_size(len(data), display, max_memory, PARSE_BYTES_PER_BYTE)  # parsed into Python objects
    return data, display


def read_raw(
    source: str | os.PathLike[str] | IO[bytes], *, input_format: str | None = None, role: str = "labels",
    label_col: str | None = None, max_memory: memory.MaxMemory = None,
) -> RawTable:
    """Parse any supported input into a :class:`RawTable` of strings.

    ``source`` may be a path, ``-`` (stdin), a binary stream or
    ``example:NAME`` (an embedded dataset; ``role`` picks its labels or truth).
    """
    with _timing.stage("read"):
        raw, display, name = _read_source(source, role, max_memory)
    return _table_of_bytes(raw, display, name, input_format=input_format, label_col=label_col,
                           max_memory=max_memory)


def _table_of_bytes(
    raw: bytes, display: str, name: str, *, input_format: str | None, label_col: str | None,
    max_memory: memory.MaxMemory,
) -> RawTable:
    """The whole-file readers: an input's bytes (as read) to a :class:`RawTable`."""
    with _timing.stage("read"):
        raw = _decompress(raw, display, max_memory)
        given = (input_format or "").lower()
        if (raw[:4] == PARQUET_MAGIC and not given) or given == "parquet":
            detect_format(raw, name, input_format)  # checks the option's spelling
            return _parse_parquet(raw, display, max_memory)
        raw = to_utf8(raw, display)
    if not raw.strip():
        raise DataError(f"{display}: file is empty")
    fmt = detect_format(raw, name, input_format)
    if fmt == "parquet":
        raise DataError(f"{display}: not a Parquet file (it does not start with {PARQUET_MAGIC!r})")
    with _timing.stage("parse"):
        if fmt == "csv":
            return _parse_delimited(raw, display, ",", max_memory)
        if fmt == "tsv":
            return _parse_delimited(raw, display, "\t", max_memory)
        _check_json_size(raw, display, fmt, max_memory)  # Python objects: estimated from the text's shape
        if fmt == "json":
            return _parse_json(raw, display, label_col)
        return _parse_jsonl(raw, display)


def _read_table(
    source: str | os.PathLike[str] | IO[bytes], *, input_format: str | None, label_col: str | None,
    max_memory: memory.MaxMemory,
) -> RawTable | _Blocks | _ParquetBatches:
    """The read and parse stages of one input: a whole :class:`RawTable`, or -- a CSV or TSV longer than
    :data:`BLOCK_BYTES` -- its :class:`_Blocks`, or a large Parquet file's :class:`_ParquetBatches` (to be
    encoded once, then closed)."""
    inp = _open_input(source)
    if inp is None:
        return read_raw(source, input_format=input_format, label_col=label_col, max_memory=max_memory)
    try:
        with _timing.stage("read"):
            # At least the first MiB: what the whole-file checks look at (binary data, NUL bytes, the format).
            head = inp.read(max(BLOCK_BYTES + 1, _CHUNK))
            if inp.size is None and _looks_binary(head[:_CHUNK]):
                raise DataError(f"{inp.display}: not a text file (NUL bytes); expected CSV, TSV, JSON or JSON Lines")
        given = (input_format or "").lower()
        if (len(head) > BLOCK_BYTES and inp.size is not None and given in ("", "parquet")
                and head[:4] == PARQUET_MAGIC):
            parquet = _ParquetBatches.open(inp)
            if parquet is not None:
                inp = None  # type: ignore[assignment]  # the batches own it now
                return parquet
        kind = _stream_kind(head, inp.name, input_format) if len(head) > BLOCK_BYTES else None
        if kind is not None:
            blocks = _Blocks(inp, head, kind[0], kind[1], max_memory)
            inp = None  # type: ignore[assignment]  # the blocks own it now
            return blocks
        with _timing.stage("read"):
            if inp.eof:  # all of it is read: checked as the whole-file reader checks it
                if inp.size is not None:
                    _check_input_size(inp.size, inp.display, max_memory)
                else:
                    _input_guard(inp.display, max_memory)(len(head))
                raw = head
            else:
                del head
                raw = inp.whole(max_memory)
        return _table_of_bytes(raw, inp.display, inp.name, input_format=input_format, label_col=label_col,
                               max_memory=max_memory)
    finally:
        if inp is not None:
            inp.close()


def _parse_parquet(data: bytes, display: str, max_memory: memory.MaxMemory = None) -> RawTable:
    """A Parquet file: its columns as they are (typed columns become names in :mod:`crowdagg.data.vocab`)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if data[:4] != PARQUET_MAGIC or data[-4:] != PARQUET_MAGIC:
        raise DataError(f"{display}: not a Parquet file, or a truncated one (no {PARQUET_MAGIC!r} at both ends)")
    try:
        pf = pq.ParquetFile(pa.py_buffer(data))
        names = [str(n) for n in pf.schema_arrow.names]
        if len(set(names)) != len(names):
            seen: set[str] = set()
            for dup in names:  # linear: a schema can be very wide
                if dup in seen:
                    break
                seen.add(dup)
            raise DataError(f"{display}: the column {dup!r} appears twice")
        meta = pf.metadata
        decoded = sum(meta.row_group(i).total_byte_size for i in range(meta.num_row_groups))
        # The decoded columns: their uncompressed size, or ~24 bytes a cell (offsets, text, codes),
        # and Arrow's own cost of each column however few its rows (as for CSV).
        memory.check(
            2 * max(decoded, 24 * meta.num_rows * max(meta.num_columns, 1))
            + ARROW_BYTES_PER_COLUMN * meta.num_columns,
            f"decoding {meta.num_rows:,} rows × {meta.num_columns} columns of Parquet from {display}",
            max_memory, advice="split the input",
        )
        table = pf.read(use_threads=threads.count() > 1)  # the thread policy
    except (pa.ArrowException, OSError) as exc:
        raise DataError(f"{display}: cannot read Parquet ({str(exc).splitlines()[0]})") from None
    header = [str(n) for n in table.column_names]
    return RawTable(header, list(table.columns), Locator(display, first_line=1, unit="row"), display, kind="Parquet")


def _frame_table(frame: pd.DataFrame, display: str = "<frame>", unit: str = "row", first: int = 0) -> RawTable:
    """A DataFrame as a RawTable; missing cells (NaN, None, ``pd.NA``, NaT) are blank, so they are reported.

    ``display``, ``unit`` and ``first`` word the places in errors (``<frame> row 0``,
    ``<records> record 1``).

    Typed columns (integers, floats, booleans, pandas strings, categories,
    nullable dtypes) go to Arrow as they are and become names by the rule
    of :mod:`crowdagg.data.vocab`, which remembers their dtype; object columns
    are handed over as they are and converted there, value by value (a
    nested value or undecodable bytes are refused, naming the row).
    Columns are taken by position: a repeated column name is refused by the
    column mapping only when that column is used, as in a CSV header.
    """
    import pandas as pd
    import pyarrow as pa

    header = [str(c) for c in frame.columns]
    columns: list[Any] = []
    for j in range(frame.shape[1]):
        col = frame.iloc[:, j]
        if col.dtype.kind in "iufb" or isinstance(col.dtype, (pd.StringDtype, pd.CategoricalDtype)):
            try:
                columns.append(pa.array(col, from_pandas=True))
                continue
            except (pa.ArrowException, TypeError, ValueError):
                pass
        columns.append(col.to_numpy(dtype=object))
    return RawTable(header, columns, Locator(display, first_line=first, unit=unit), display)


def _records_frame(records: Sequence[Any]) -> pd.DataFrame:
    """Python records (mappings) as a DataFrame: one route for records, typed like a DataFrame's columns.

    ``aggregate(df.to_dict("records"))`` gives what the frame gives (int
    labels stay integers, booleans ``True``/``False``), unlike a JSON list,
    whose numbers keep their text.  Each key is one column, blank where a
    record lacks it; a column whose values are all ints (or all bools, or all
    numbers) takes pandas' nullable dtype, so a missing cell does not turn
    ``1`` into ``1.0``; any other column stays Python objects (checked value
    by value by the reader).
    """
    import pandas as pd

    bad = next((i for i, r in enumerate(records) if not isinstance(r, Mapping)), None)
    if bad is not None:
        raise DataError(f"<records> record {bad + 1} is {json_type(records[bad])}, expected an object (a mapping)")
    keys = list(dict.fromkeys(k for r in records for k in r))
    columns = {}
    for k in keys:
        values = [r.get(k) for r in records]
        kinds = {type(v) for v in values if v is not None}
        if kinds and kinds <= {int, float}:  # beyond int64 (2**70), a number stays a Python object
            ints = [v for v in values if type(v) is int]
            if ints and not -(2**63) <= min(ints) <= max(ints) < 2**63:
                kinds = {object}
        dtype = ("boolean" if kinds == {bool} else "Int64" if kinds == {int}
                 else "Float64" if kinds and kinds <= {int, float} else None)
        # dtype=object keeps text as Python objects (pandas 3 would infer ``str`` and fail on a lone surrogate
        # before the reader could name it)
        columns[k] = pd.Series(pd.array(values, dtype=dtype) if dtype else _objects(values), dtype=dtype or object)
    return pd.DataFrame(columns, copy=False)


def _is_records(source: Any) -> bool:
    """A list or tuple of mappings (records), not of paths."""
    return isinstance(source, (list, tuple)) and bool(source) and isinstance(source[0], Mapping)


#: Extensions of the files a directory given as input contributes.
_DATA_SUFFIXES = (".csv", ".tsv", ".tab", ".json", ".jsonl", ".ndjson", ".parquet", ".pq")


class Inputs(list):  # type: ignore[type-arg]
    """The files an input list expands to (:func:`expand_inputs`), in reading order.

    ``given[i]`` is what was given for file ``i`` (the file itself, its
    directory or its pattern).  :func:`load_annotations` reads an ``Inputs``
    as it is: the expansion happens once, so what was checked is what is read.
    """

    def __init__(self, files: Sequence[str] = (), given: Sequence[str] = ()) -> None:
        super().__init__(files)
        self.given = list(given) if given else list(files)


def expand_inputs(specs: Sequence[str | os.PathLike[str]], outputs: Sequence[Target] = ()) -> Inputs:
    """Input paths from what was given: files as given, a directory's data files, a quoted glob's matches.

    Files keep the order given; a directory contributes its files with a
    data extension (``.gz`` too), sorted by name, hidden ones left out; a
    pattern with ``*``, ``?`` or ``[`` that is not itself a file is expanded
    and sorted.  A pattern or directory matching nothing is an error, as is
    standard input given twice (``-``, ``/dev/stdin``, ...).

    ``outputs``: the run's outputs (:func:`crowdagg.io.output.resolve`).  A
    directory or pattern never includes one of them when it holds an
    earlier output of the run (or is empty: :func:`crowdagg.io.output.earlier_output`):
    it is left out, with a warning, so ``aggregate 'd/*.csv' -o d/out.csv``
    can run again.  Any other file that is also an output stays in the list
    -- the caller's :func:`crowdagg.io.output.check_not_inputs` refuses it: an
    input is never overwritten.
    """
    import glob

    from .output import earlier_output, identity, is_inside

    own = {key[1:]: t for t in outputs for key in t.keys if key[0] == "inode"}
    # A directory output was accepted new, empty or this tool's earlier one (resolve_directory): what a pattern
    # finds inside it is an earlier run's parts, replaced by this run.
    own_dirs = [t.path for t in outputs if t.kind == "dir" and t.path is not None]
    files: list[str] = []
    given: list[str] = []

    def add(found: list[str], name: str) -> None:
        left_out = own_files(found)
        mine = [f for f in found if f in left_out]
        if len(mine) == len(found):
            raise DataError(f"{name}: nothing to read: what it holds is this run's own output ({', '.join(mine)})")
        for f in mine:
            warn(CrowdaggWarning(f"left out {f}: it is this run's output"))
        kept = [f for f in found if f not in mine]
        files.extend(kept)
        given.extend([name] * len(kept))

    def own_files(found: list[str]) -> set[str]:
        """The files among ``found`` that are an output of this run holding an earlier output of it."""
        if not own and not own_dirs:
            return set()
        out = set()
        for f in found:
            target = own.get(identity(f))  # type: ignore[arg-type]
            if target is not None and earlier_output(f, target.writes, target.then) or \
                    any(is_inside(d, f) for d in own_dirs):
                out.add(f)
        return out

    for spec in specs:
        name = os.fspath(spec)
        if name == "-" or name.startswith(EXAMPLE_PREFIX) or os.path.isfile(name) or not name:
            files.append(name)
            given.append(name)
        elif os.path.isdir(name):
            found = sorted(
                os.path.join(name, f) for f in os.listdir(name)
                if not f.startswith(".") and f.lower().removesuffix(".gz").endswith(_DATA_SUFFIXES)
                and os.path.isfile(os.path.join(name, f))
            )
            if not found:
                raise DataError(f"{name}: a directory with no data files ({', '.join(_DATA_SUFFIXES)}, optionally .gz)")
            add(found, name)
        elif any(ch in name for ch in "*?["):
            found = sorted(f for f in glob.glob(name) if not os.path.isdir(f))
            if not found:
                raise DataError(f"{name}: no file matches this pattern")
            add(found, name)
        else:
            files.append(name)  # a FIFO, a device, or missing: reading it says which
            given.append(name)
    check_stdin_once([("input " + f if f == g else f"input {g} ({f})", f) for f, g in zip(files, given)])
    return Inputs(files, given)


def check_stdin_once(inputs: Sequence[tuple[str, str | None]]) -> None:
    """Refuse standard input read by two inputs: ``(how messages name it, path)`` pairs.

    Compared by what is read, not by spelling (:func:`crowdagg.io.output.stdin_route`):
    ``-``, ``/dev/stdin``, ``/dev/fd/0``, ``/proc/self/fd/0`` and links to
    them read the descriptor; another path to the file standard input is
    redirected from reads it too.  Two readers are refused when one goes
    through the descriptor, or when standard input is a pipe, FIFO or
    terminal (a second reader would find it drained); ``a.csv a.csv <a.csv``
    reads a regular file twice by name and is left to the duplicates rule.
    Any other FIFO or pipe (``mkfifo f``, ``/dev/fd/63`` from ``<(...)``)
    reached twice, by any spelling or link, is refused the same way
    (:func:`crowdagg.io.output.drained_identity`): the second reader would
    wait for a writer forever.
    """
    from .output import drained_identity, stdin_is_regular_file, stdin_route

    routes = [(name, stdin_route(path)) for name, path in inputs if path]
    users = [(name, route) for name, route in routes if route is not None]
    if len(users) > 1 and (any(route == "descriptor" for _, route in users) or not stdin_is_regular_file()):
        raise UsageError(
            f"standard input is given twice ({' and '.join(name for name, _ in users)}); it can be read only once"
        )
    # The same rule for any other file that reading drains: a FIFO named twice (or through a link).
    readers: dict[tuple[int, int], list[str]] = {}
    for name, path in inputs:
        key = drained_identity(path) if path and name not in dict(users) else None
        if key is not None:
            readers.setdefault(key, []).append(name)
    for names in readers.values():
        if len(names) > 1:
            raise UsageError(
                f"one FIFO or pipe is given twice ({' and '.join(names)}); reading it once drains it"
            )


_ANSWER_OPTIONS = {"task": param("task_col"), "worker": param("worker_col"), "label": param("label_col")}


def _column_option(value: object, name: str) -> str | None:
    """A ``*_col`` option as the header text it names.

    A DataFrame's column labels are read as their text (``str(label)``), so
    an integer label (``pd.read_csv(header=None)`` gives 0, 1, 2) or a
    tuple (MultiIndex columns) names the column it is; booleans and
    containers are a :class:`~crowdagg.errors.UsageError`.
    """
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer, float, tuple)):
        raise UsageError(f"{param(name)} must be a column name, got {type(value).__name__} {value!r}")
    return str(value)


def load_annotations(
    source: str | os.PathLike[str] | IO[bytes] | pd.DataFrame | Sequence[str | os.PathLike[str]],
    *,
    input_format: str | None = None,
    task_col: str | None = None,
    worker_col: str | None = None,
    label_col: str | None = None,
    classes: Sequence[str] | None = None,
    duplicates: DuplicatePolicy = "keep",
    max_memory: memory.MaxMemory = None,
    workers: Any = None,
    rejected: RejectedPolicy = "exclude",
    blank_labels: BlankLabelPolicy = "skip",
) -> AnnotationSet:
    """Read answers (long format: one row per task, worker, label) into an :class:`AnnotationSet`.

    Parameters
    ----------
    source : path, ``"-"`` for stdin, a binary file object, a DataFrame, a
        list of records (mappings, e.g. ``[{"task": ..., "worker": ...,
        "label": ...}]``), or a list of paths, directories and glob patterns
        read as one data set (:func:`expand_inputs`; files in the order
        given, each with its own header and column mapping, errors naming
        the file and line).
    input_format : ``csv``, ``tsv``, ``json``, ``jsonl`` or ``parquet``;
        default from the content (Parquet's magic bytes) and the extension
        (``.gz`` stripped), else sniffed.
    task_col, worker_col, label_col : column names; default ``task``,
        ``worker``, ``label``, a common alias (item, question, annotator,
        rater, performer, answer, response, ...) or a platform export's
        columns (MTurk, Toloka, Label Studio).  For a Label Studio export
        ``label_col`` picks the choices control (``from_name``).
    classes : the class set, in order; default inferred from the labels.
    duplicates : what to do with repeated (task, worker) answers: ``keep``
        all, keep the ``first`` or ``last``, or raise (``error``).
    max_memory : refuse (before reading it all) an input whose parsing would
        need more memory than this (bytes or ``"4G"``; default 80% of the
        available memory).
    workers : a :class:`~crowdagg.data.vocab.Vocabulary` (another set's
        ``workers``) or a list of worker names to encode against: its
        workers keep their codes, new ones follow (see
        :meth:`AnnotationSet.from_names`).  With ``classes``, batches and
        partitions read this way agree on every worker and class code.
    rejected : what to do with a platform export's rejected answers (MTurk
        ``AssignmentStatus`` ``Rejected``, Toloka ``REJECTED``): ``exclude``
        them (default; counted in a warning) or ``keep`` them.  Skipped and
        expired Toloka assignments hold no answer and are always left out;
        every task keeps its output row (see :mod:`crowdagg.io.platforms`).
    blank_labels : an answer whose label is blank or missing (a skipped
        question): ``skip`` it, with a warning giving the count (its task
        keeps an output row), or refuse it (``error``).  A blank task or
        worker is always an error.

    Missing values are one rule for every reader (null, ``None``, NaN,
    ``pd.NA``, an empty or whitespace-only cell: see :mod:`crowdagg.data.vocab`).
    A value that cannot be a name -- a nested value, text that is not
    UTF-8, a lone surrogate, a NUL character, a list or struct Parquet
    column -- is a :class:`~crowdagg.errors.DataError` naming the file, the
    line (``row N`` for Parquet and DataFrames) and the column.

    Warnings (:class:`~crowdagg.errors.CrowdaggWarning`) say what was done
    to the input: duplicates, stripped whitespace, skipped header lines,
    near-identical labels, a single class.
    """
    return cast(AnnotationSet, _load_answers(
        source, input_format=input_format, task_col=task_col, worker_col=worker_col, label_col=label_col,
        classes=classes, duplicates=duplicates, max_memory=max_memory, workers=workers, rejected=rejected,
        blank_labels=blank_labels,
    ))


def load_numeric(
    source: str | os.PathLike[str] | IO[bytes] | pd.DataFrame | Sequence[str | os.PathLike[str]],
    *,
    input_format: str | None = None,
    task_col: str | None = None,
    worker_col: str | None = None,
    label_col: str | None = None,
    duplicates: DuplicatePolicy = "keep",
    max_memory: memory.MaxMemory = None,
    workers: Any = None,
    rejected: RejectedPolicy = "exclude",
    blank_labels: BlankLabelPolicy = "skip",
) -> NumericAnswers:
    """Read numeric answers (one row per task, worker, value) into :class:`~crowdagg.data.numeric.NumericAnswers`.

    The readers, column detection (``label_col``: the value's column, found
    as a label column is: ``label``, ``value``, ``answer``, ``response``,
    ...), multiple inputs, ``duplicates``, ``blank_labels`` (a blank value
    is a skipped answer), ``rejected`` and ``max_memory`` are
    :func:`load_annotations`' own.  Each value must be a finite number: text
    that is not one, ``inf`` or ``nan`` is a
    :class:`~crowdagg.errors.DataError` naming the file, the line and the
    value.
    """
    return cast("NumericAnswers", _load_answers(
        source, input_format=input_format, task_col=task_col, worker_col=worker_col, label_col=label_col,
        classes=None, duplicates=duplicates, max_memory=max_memory, workers=workers, rejected=rejected,
        blank_labels=blank_labels, numeric=True,
    ))


def _load_answers(
    source: Any, *, input_format: str | None, task_col: str | None, worker_col: str | None, label_col: str | None,
    classes: Sequence[str] | None, duplicates: DuplicatePolicy, max_memory: memory.MaxMemory, workers: Any,
    rejected: RejectedPolicy, blank_labels: BlankLabelPolicy, numeric: bool = False,
) -> AnnotationSet | NumericAnswers:
    """:func:`load_annotations` (``numeric``: :func:`load_numeric`)."""
    check_blank_labels(blank_labels)
    task_col, worker_col, label_col = (
        _column_option(v, n) for v, n in ((task_col, "task_col"), (worker_col, "worker_col"), (label_col, "label_col"))
    )
    pd = sys.modules.get("pandas")  # a DataFrame means pandas is loaded: never import it just to check
    if pd is not None and isinstance(source, pd.DataFrame):
        tables = [_frame_table(source)]
    elif _is_records(source):
        tables = [_frame_table(_records_frame(source), "<records>", "record", 1)]  # type: ignore[arg-type]
    else:
        sources: list[Any] = (
            [source] if not isinstance(source, (list, tuple))
            else source if isinstance(source, Inputs)  # expanded (and checked) already: read as it is
            else expand_inputs(source)  # type: ignore[arg-type]
        )
        if not sources:
            raise UsageError("no input given")
        opened = None
        if len(sources) == 1:
            opened = _read_table(sources[0], input_format=input_format, label_col=label_col, max_memory=max_memory)
        if isinstance(opened, (_Blocks, _ParquetBatches)) or len(sources) > 1:
            return _load_incremental(
                sources, opened, input_format=input_format, task_col=task_col, worker_col=worker_col,
                label_col=label_col, classes=classes, duplicates=duplicates, max_memory=max_memory,
                workers=workers, rejected=rejected, blank_labels=blank_labels, numeric=numeric,
            )
        assert isinstance(opened, RawTable)  # one input read whole
        tables = [opened]
    from .platforms import check_rejected_policy

    check_rejected_policy(rejected)
    mapped = [_answer_columns(t, task_col, worker_col, label_col, rejected) for t in tables]
    tables = [t for t, _ in mapped]
    parts = [cols for _, cols in mapped]
    del mapped
    if classes is None and not numeric and all(t.classes is not None for t in tables):  # radio buttons name every class
        from ..data.annotations import infer_classes

        classes = infer_classes([k for t in tables for k in t.classes or ()], label_col=parts[0][2].strip())
    from ..data.annotations import encode_columns

    first = tables[0]
    t_col, w_col, y_col = parts[0]
    columns = [first.column(t_col), first.column(w_col), first.column(y_col)]
    locate, task_order = first.locate, first.task_order
    header = None if first.fixed is not None else (t_col, w_col, y_col)
    class_dtype = None
    if pd is not None and isinstance(source, pd.DataFrame):  # a pandas dtype Arrow does not keep (Int64, ...)
        from ..data.annotations import pandas_class_dtype

        class_dtype = pandas_class_dtype(source, y_col)
    del tables, first  # the parsed text is freed as soon as it is encoded
    encoder, dtypes, class_dtype = encode_columns(columns, classes=classes, locate=locate, task_order=task_order,
                                                  header=header, blank_labels=blank_labels, class_dtype=class_dtype)
    return _finish_read(
        encoder, numeric=numeric, classes=classes, duplicates=duplicates, locate=locate,
        label_col=parts[0][2].strip(), header=header, dtypes=dtypes, workers=workers, blank_labels=blank_labels,
        class_dtype=class_dtype,
    )


def _finish_read(
    encoder: Any, *, numeric: bool, classes: Sequence[str] | None, duplicates: DuplicatePolicy,
    locate: Locator | None, label_col: str, header: Any, dtypes: tuple[str | None, str | None], workers: Any,
    blank_labels: BlankLabelPolicy, class_dtype: str | None,
) -> AnnotationSet | NumericAnswers:
    """The last stage of a read, encoded columns to answers: the steps every container shares
    (:func:`crowdagg.data.annotations.decode_answers`), then the labels become classes
    (:meth:`AnnotationSet._assemble`) or, ``numeric``, numbers
    (:meth:`crowdagg.data.numeric.NumericAnswers._from_decoded`)."""
    if not numeric:
        return AnnotationSet._assemble(
            encoder, classes=classes, duplicates=duplicates, locate=locate, label_col=label_col, header=header,
            dtypes=dtypes, workers=workers, blank_labels=blank_labels, class_dtype=class_dtype,
        )
    from ..data.annotations import decode_answers
    from ..data.numeric import NumericAnswers

    decoded = decode_answers(encoder, locate=locate, header=header, dtypes=dtypes, workers=workers,
                             blank_labels=blank_labels)
    return NumericAnswers._from_decoded(decoded, duplicates=duplicates, label_col=label_col)


_ROLES = ("task", "worker", "label")


def _block_columns(table: RawTable, task_col: str | None, worker_col: str | None, label_col: str | None) -> tuple[str, str, str]:
    """The task, worker and label columns of a streamed input, from its header alone; a platform export
    (whose rows rules need every row) or a header the mapping refuses is read whole (:class:`_Fallback`)."""
    from .columns import detect_platform

    if detect_platform(table.header) is not None:
        raise _Fallback()
    try:
        cmap = map_answer_columns(table.header, source=table.display, task=task_col, worker=worker_col,
                                  label=label_col, options=_ANSWER_OPTIONS)
    except CrowdaggError:
        raise _Fallback() from None
    if cmap.status is not None or cmap.choices:
        raise _Fallback()
    return cmap.task, cmap.worker, cmap.label


def _encode_blocks(
    blocks: _Blocks, encoder: Any, task_col: str | None, worker_col: str | None, label_col: str | None
) -> tuple[Locator, int, tuple[str, str, str]]:
    """The parse and encode stages of a large CSV or TSV, block by block: (locator, rows, columns).

    Only each block's codes are kept (and its locator: the lines of its rows
    where they are not consecutive); a file with no rows is read whole, so
    that the whole-file reader words it.
    """
    from ..data.annotations import JoinedLocator

    cols: tuple[str, str, str] | None = None
    locators: list[Locator] = []
    sizes: list[int] = []
    for table in blocks:
        if cols is None:
            cols = _block_columns(table, task_col, worker_col, label_col)
        names = [_as_names(table, c, role)[0] for c, role in zip(cols, _ROLES)]
        if not locators and blocks.inp.size:  # room for the answers the file's size promises (not written yet)
            encoder.reserve(int(1.05 * table.n_rows * blocks.inp.size / max(blocks.first_bytes, 1)))
        locators.append(table.locate)
        sizes.append(table.n_rows)
        del table
        with _timing.stage("encode"):
            encoder.add(*names)
        del names
    if cols is None or not sum(sizes):
        raise _Fallback()
    locate = JoinedLocator(locators, sizes)
    locate.source = blocks.display
    return locate, int(sum(sizes)), cols


#: Fewest bytes of text an answer takes ("t,w,a" and a line end): bounds the answers of a file by its size.
MIN_ROW_BYTES = 6


def _check_inputs_memory(sources: Sequence[Any], max_memory: memory.MaxMemory) -> None:
    """Refuse, before reading any, inputs whose codes together (bounded by their sizes) and the parsing
    of the largest would not fit: they are read one after another, never held together."""
    sizes = [os.stat(f).st_size for f in sources if isinstance(f, (str, os.PathLike)) and os.path.isfile(f)]
    if not sizes:
        return
    total = sum(sizes)
    need = ARROW_BYTES_PER_BYTE * min(max(sizes), 2 * BLOCK_BYTES) + BYTES_PER_ANSWER * total / MIN_ROW_BYTES
    memory.check(need, f"reading {len(sources)} inputs ({memory.human(total)} of text, up to "
                 f"{total // MIN_ROW_BYTES:,} answers) one after another", max_memory, advice="split the input")


def _load_incremental(
    sources: Sequence[Any], opened: RawTable | _Blocks | _ParquetBatches | None, *, input_format: str | None,
    task_col: str | None, worker_col: str | None, label_col: str | None, classes: Sequence[str] | None,
    duplicates: DuplicatePolicy, max_memory: memory.MaxMemory, workers: Any, rejected: RejectedPolicy,
    blank_labels: BlankLabelPolicy, numeric: bool = False,
) -> AnnotationSet | NumericAnswers:
    """Inputs read one after another, each parsed and encoded as it is read -- a block at a time where it
    is a large CSV or TSV (:class:`_Blocks`), whole otherwise -- into one set of vocabularies, then
    assembled: the pipeline read, parse, encode, assemble, which the data flows down once.

    Whole tables go through the same steps as :func:`load_annotations` gives a
    single one (column mapping, platform rules, the names of each column).
    """
    from ..data.annotations import JoinedLocator
    from ..data.encode import ColumnsEncoder
    from ..data.vocab import as_strings
    from .platforms import check_rejected_policy

    if len(sources) > 1:
        _check_inputs_memory(sources, max_memory)
    encoder = ColumnsEncoder()
    locators: list[Locator] = []
    sizes: list[int] = []
    headers: list[tuple[str, str, str]] = []
    kinds: list[set[str | None]] = [set(), set(), set()]
    label_name: str | None = None
    dtypes: tuple[str | None, ...]
    for i, src in enumerate(sources):
        item = opened if i == 0 and opened is not None else _read_table(
            src, input_format=input_format, label_col=label_col, max_memory=max_memory)
        if i == 0:
            check_rejected_policy(rejected)
        fixed = None
        if isinstance(item, _ParquetBatches):
            batches, mark = item, encoder.mark()
            try:
                locate, n_rows, cols, dtypes = batches.encode(encoder, task_col, worker_col, label_col, max_memory)
            except _Fallback:
                encoder.rollback(mark)
                with _timing.stage("read"):
                    raw = batches.inp.whole(max_memory)
                item = _table_of_bytes(raw, batches.display, batches.inp.name, input_format=input_format,
                                       label_col=label_col, max_memory=max_memory)
                del raw
            finally:
                batches.close()
        if isinstance(item, _Blocks):
            blocks, mark = item, encoder.mark()
            try:
                locate, n_rows, cols = _encode_blocks(blocks, encoder, task_col, worker_col, label_col)
                dtypes = (None, None, None)
            except _Fallback as fallback:
                encoder.rollback(mark)
                if fallback.exact:  # the exact parser's memory, before the text is read whole
                    _check_input_size(blocks.inp.size or blocks.inp.n_read, blocks.display, max_memory,
                                      PARSE_BYTES_PER_BYTE)
                with _timing.stage("read"):
                    raw = blocks.inp.whole(max_memory)
                blocks.close()
                item = _table_of_bytes(raw, blocks.inp.display, blocks.inp.name, input_format=input_format,
                                       label_col=label_col, max_memory=max_memory)
                del raw
            finally:
                blocks.close()
        if isinstance(item, RawTable):
            table, cols = _answer_columns(item, task_col, worker_col, label_col, rejected)
            del item
            named = [_as_names(table, c, role) for c, role in zip(cols, _ROLES)]
            if table.task_order:
                encoder.add_tasks(as_strings(table.task_order, "task")[0])
            with _timing.stage("encode"):
                encoder.add(*(n for n, _ in named))
            dtypes = tuple(d for _, d in named)
            locate, n_rows, fixed = table.locate, table.n_rows, table.fixed
            del table, named
        if fixed is None:
            headers.append(cols)
        if label_name is None:
            label_name = cols[2].strip()
        for k, d in zip(kinds, dtypes):
            k.add(d)
        locators.append(locate)
        sizes.append(n_rows)
    one = len(locators) == 1
    return _finish_read(
        encoder, numeric=numeric, classes=classes, duplicates=duplicates,
        locate=locators[0] if one else JoinedLocator(locators, sizes), label_col=label_name or "label",
        header=(headers[0] if one else headers) if headers else None,
        dtypes=tuple(k.pop() if len(k) == 1 else None for k in kinds[:2]),  # type: ignore[arg-type]
        workers=workers, blank_labels=blank_labels,
        class_dtype=next(iter(kinds[2])) if len(kinds[2]) == 1 else None,
    )


def _as_names(table: RawTable, col: str, role: str) -> Any:
    """:func:`crowdagg.data.vocab.as_strings` of a column, a value that cannot be a name named by file, line
    and column (its distinct names are checked when encoded)."""
    from ..data.annotations import name_error
    from ..data.vocab import InvalidName, as_strings

    try:
        return as_strings(table.column(col), role)
    except InvalidName as exc:
        raise name_error(exc, role, table.locate, col) from None


def _answer_columns(
    table: RawTable, task_col: str | None, worker_col: str | None, label_col: str | None,
    rejected: RejectedPolicy = "exclude",
) -> tuple[RawTable, tuple[str, str, str]]:
    """One input's answers and its task, worker and label columns (said by the format, given, or
    found by alias or platform), after a platform export's own rules (:func:`_platform_rows`)."""
    for note in table.notes:
        warn(CrowdaggWarning(f"{table.display}: {note}"))
    if table.fixed is not None:
        given = {"task_col": task_col, "worker_col": worker_col}
        if table.kind != "Label Studio export":  # there, label_col names the choices control
            given["label_col"] = label_col
        for name, value in given.items():
            if value is not None:
                raise UsageError(
                    f"{param(name)} does not apply to {table.display}: a {table.kind} names its task, "
                    "worker and label fields itself"
                )
        cols = table.fixed
    else:
        from .columns import LABEL_STUDIO, MTURK, detect_platform

        platform = detect_platform(table.header)
        cmap = map_answer_columns(
            table.header, source=table.display, task=task_col, worker=worker_col, label=label_col,
            options=_ANSWER_OPTIONS,
            boolean=_boolean_columns(table) if platform == MTURK else (),
            controls=_label_studio_controls(table, task_col) if platform == LABEL_STUDIO and label_col is None else None,
        )
        cols = (cmap.task, cmap.worker, cmap.label)
        if table.n_rows:
            table = _platform_rows(table, cmap, rejected)
    if table.n_rows == 0 and not table.task_order:
        raise DataError(f"{table.display}: no answers (header only?)")
    return table, cols


def _boolean_columns(table: RawTable) -> list[str]:
    """An MTurk export's ``Answer.*.*`` columns holding only true/false: radio-button candidates."""
    from .platforms import boolean_cells

    return [
        h for h in table.header
        if h.strip().lower().startswith("answer.") and h.count(".") >= 2 and boolean_cells(table.column(h), h)
    ]


def _label_studio_controls(table: RawTable, task_col: str | None) -> list[str] | None:
    """The columns of a Label Studio JSON-MIN/CSV export that are controls, as far as the rows tell.

    JSON-MIN says it by its key order (:func:`_json_min_controls`).  In a
    CSV the columns are sorted by name, so the rows decide: a task's data
    fields repeat on each of its annotations, while a control's answer
    varies from one annotator to another; a column that varies within some
    task is a control.  None when nothing can be told (one annotation per
    task, or every annotator agreeing).
    """
    if table.controls is not None and table.controls.names:
        return table.controls.names
    # JSON-MIN whose key order names no control (rewritten by another tool): the rows decide, as in a CSV.
    from ..data.vocab import InvalidName, as_strings, encode
    from .columns import LABEL_STUDIO_META

    ids = [h for h in table.header if (h == task_col if task_col is not None else h.strip().lower() == "id")]
    if len(ids) != 1:
        return None
    t_codes, _ = encode(_as_names(table, ids[0], "task")[0])
    n_tasks = len(np.unique(t_codes))
    found = []
    for h in table.header:
        key = h.strip().lower()
        if h == ids[0] or key in LABEL_STUDIO_META or key.endswith("_transcript"):
            continue
        try:
            codes, uniques = encode(as_strings(table.column(h))[0])
        except InvalidName:  # not names (a nested data field): no control; if mapped, the reader says where
            continue
        pairs = t_codes.astype(np.int64) * max(len(uniques), 1) + codes
        if len(np.unique(pairs)) > n_tasks:
            found.append(h)
    return found or None


_PLATFORM_NAMES = {"mturk": "MTurk", "toloka": "Toloka", "label_studio": "Label Studio"}


def _blank_cells(table: RawTable, col: str, role: str) -> np.ndarray:
    """Which cells of a column are blank once stripped, bool shape (n_rows,) -- decided on the distinct cells."""
    from ..data.vocab import blank, encode, strip

    codes, names = encode(_as_names(table, col, role)[0])
    return blank(strip(names)[0])[codes] if len(names) else np.zeros(len(codes), dtype=bool)


def _platform_rows(table: RawTable, cmap: ColumnMap, rejected: RejectedPolicy) -> RawTable:
    """The rows of a platform export that are answers, each warning saying what was left out.

    Rejected and unanswered assignments (MTurk, Toloka) and Label Studio
    rows that are not answers are dropped; every task keeps its place in the
    output order (``task_order``), answered or not.  MTurk radio buttons
    become one label column, named after the group.  See
    :mod:`crowdagg.io.platforms` for the rules.
    """
    from .columns import LABEL_STUDIO

    keep = np.ones(table.n_rows, dtype=bool)
    if cmap.status is not None:
        keep &= _status_rows(table, cmap, rejected)
    if cmap.platform == LABEL_STUDIO:
        keep &= _label_studio_rows(table, cmap, keep)
    if not keep.all():
        order, n_left = _task_order(table, cmap.task, keep)
        # Only the columns still read are subset (an MTurk export has 30 others).
        needed = [cmap.task, cmap.worker, *([c for c, _ in cmap.choices] or [cmap.label])]
        table = RawTable(
            needed, [table.column(c) for c in needed], table.locate, table.display, order, table.fixed,
            table.notes, table.kind, table.controls,
        ).subset(np.flatnonzero(keep))
        if n_left and cmap.platform != LABEL_STUDIO:  # Label Studio: tasks nobody annotated, as exported
            warn(CrowdaggWarning(
                f"{table.display}: {n_left} task(s) have no answers left once those are left out; "
                "each keeps its output row"
            ))
    if cmap.choices:
        table = _radio_column(table, cmap)
    return table


def _task_order(table: RawTable, task_col: str, keep: np.ndarray) -> tuple[Any, int]:
    """(Every task of a table in order of first appearance, how many have no row in ``keep``).

    The names are stripped, and blank ones and the header's own cell left
    out, as the task names of the answers are (:meth:`crowdagg.data.annotations.AnnotationSet._assemble`).
    """
    from ..data.annotations import header_key
    from ..data.vocab import blank, encode, spells, strip, take

    codes, uniques = encode(_as_names(table, task_col, "task")[0])
    uniques, _ = strip(uniques)
    drop = blank(uniques) | spells(uniques, header_key(task_col), header_key)
    answered = np.zeros(len(uniques), dtype=bool)
    answered[codes[keep]] = True
    return take(uniques, np.flatnonzero(~drop)), int(np.count_nonzero(~answered & ~drop))


def _status_rows(table: RawTable, cmap: ColumnMap, rejected: RejectedPolicy) -> np.ndarray:
    """Which rows an assignment status keeps (MTurk, Toloka), with a warning for each kind left out."""
    from .platforms import split_by_status

    assert cmap.status is not None and cmap.platform is not None  # for the type checker: set together
    split = split_by_status(
        _as_names(table, cmap.status, "status")[0], cmap.platform, rejected,
        reject_marks=_as_names(table, cmap.reject, "reject")[0] if cmap.reject is not None else None,
        header_cell=cmap.status,
    )
    display, locate, status = table.display, table.locate, cmap.status.strip()
    if split.unanswered:
        n, counts, first = _by_status(split.unanswered, str)
        warn(CrowdaggWarning(
            f"{display}: left out {n} assignment(s) that hold no answer ({status} {counts}; "
            f"first at {locate(first)})"
        ))
    if len(split.rejected):
        why = f"{status} rejected" + (", or a reason in the Reject column" if cmap.reject is not None else "")
        warn(CrowdaggWarning(
            f"{display}: excluded {len(split.rejected)} rejected answer(s) ({why}; first at "
            f"{locate(int(split.rejected[0]))}); set {param('rejected')} to 'keep' to count them"
        ))
    if split.unknown:
        n, counts, first = _by_status(split.unknown, repr)
        warn(CrowdaggWarning(
            f"{display}: kept {n} answer(s) whose {status} is not one {_PLATFORM_NAMES[cmap.platform]} "
            f"is known to write ({counts}; first at {locate(first)})"
        ))
    return split.keep


def _by_status(groups: dict[str, np.ndarray], spell: Callable[[str], str]) -> tuple[int, str, int]:
    """(How many rows, ``"<status> <count>, ..."``, the first row) of rows grouped by status, for a warning.

    Each group's rows are ascending (:func:`~crowdagg.io.platforms.split_by_status`).
    """
    return (
        sum(len(rows) for rows in groups.values()),
        ", ".join(f"{spell(k)} {len(rows)}" for k, rows in groups.items()),
        min(int(rows[0]) for rows in groups.values()),
    )


def _label_studio_rows(table: RawTable, cmap: ColumnMap, keep: np.ndarray) -> np.ndarray:
    """Which rows of a Label Studio JSON-MIN/CSV export are answers (among ``keep``).

    A task nobody annotated is one row with neither an annotator nor an
    annotation id: not an answer (the task keeps its output row).  A row
    without a choice for the control is an annotation skipped and counted,
    as in the JSON export; a ``{"choices": [...]}`` cell (several choices)
    is an error naming its line.
    """
    from ..data.vocab import encode

    ids = [h for h in table.header if h.strip().lower() == "annotation_id"]
    unannotated = _blank_cells(table, cmap.worker, "worker") & _blank_cells(table, ids[0], "annotation id")
    def several_choices(row: int, cell: str) -> DataError:
        return DataError(
            f"{table.locate(row)}: several choices for {cmap.label.strip()!r} in one annotation ({cell}); "
            "crowdagg aggregates one class per answer (multi-label answers are not supported)"
        )

    if table.controls is not None and cmap.label in table.controls.several:  # JSON-MIN: seen while parsing
        raise several_choices(*table.controls.several[cmap.label])
    codes, names = encode(_as_names(table, cmap.label, "label")[0])
    cells = [str(v).strip() for v in names.to_pylist()]  # the distinct cells only
    answers = keep & ~unannotated
    several = np.array([c[:1] in ("{", "[") for c in cells] or [False])[codes] & answers
    if several.any():  # CSV: Label Studio wrote the answer as JSON text
        row = int(np.flatnonzero(several)[0])
        raise several_choices(row, _pylist(_take(table.column(cmap.label), np.array([row])))[0])
    no_choice = np.array([not c for c in cells] or [False])[codes] & answers
    if no_choice.any():
        warn(CrowdaggWarning(
            f"{table.display}: {int(no_choice.sum())} Label Studio annotation(s) without a "
            f"{cmap.label.strip()!r} choice skipped (first at {table.locate(int(np.flatnonzero(no_choice)[0]))})"
        ))
    return ~unannotated & ~no_choice


def _radio_column(table: RawTable, cmap: ColumnMap) -> RawTable:
    """The table with one label column, named after the radio group, read from its buttons."""
    from .platforms import radio_labels

    headers = [c for c, _ in cmap.choices]
    labels, none, several = radio_labels(
        [table.column(c) for c in headers], [k for _, k in cmap.choices], cmap.label, headers
    )
    if len(several):
        row = int(several[0])
        cells = [_pylist(_take(table.column(c), np.array([row])))[0] for c in headers]
        picked = [repr(c) for c, v in zip(headers, cells) if v.strip().lower() == "true"]
        raise DataError(
            f"{table.locate(row)}: {len(picked)} radio buttons of {cmap.label!r} are true ({', '.join(picked)}); "
            f"crowdagg aggregates one class per answer ({len(several)} such row(s) in all)"
        )
    if len(none):
        warn(CrowdaggWarning(
            f"{table.display}: {len(none)} answer(s) with no radio button of {cmap.label!r} true: "
            f"their label is blank (first at {table.locate(int(none[0]))})"
        ))
    return RawTable(
        [*table.header, cmap.label], [*table.columns, labels], table.locate, table.display,
        table.task_order, table.fixed, table.notes, table.kind, table.controls, [k for _, k in cmap.choices],
    )


def read_task_labels(
    source: str | os.PathLike[str] | IO[bytes],
    *,
    input_format: str | None = None,
    task_col: str | None = None,
    label_col: str | None = None,
    what: str = "truth",
    options: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """Read a ``task,label`` file (truth, gold or predictions) into {task: label}.

    Cells are stripped of surrounding whitespace.  A task listed twice with
    different labels is an error.  ``options`` spells the column overrides
    in messages (default the keywords ``task_col``/``label_col``).
    """
    table, t_col, y_col = _label_table(source, input_format, task_col, label_col, options)
    return _task_labels(table, t_col, y_col, what)[0]


def read_task_values(
    source: str | os.PathLike[str] | IO[bytes],
    *,
    input_format: str | None = None,
    task_col: str | None = None,
    label_col: str | None = None,
    what: str = "truth",
    options: Mapping[str, str] | None = None,
) -> dict[str, float]:
    """Read a ``task,value`` file (numeric truth, or ``aggregate --numeric``'s output) into {task: value}.

    The columns are found as :func:`read_task_labels` finds them (``value``
    among the label column's names).  A blank value is a task without one
    (``aggregate --numeric`` writes an empty cell for a task without
    answers): left out, counted in a warning.  A value that is not a finite
    number is a :class:`~crowdagg.errors.DataError` naming the line; a task
    listed twice with different values, as with labels.
    """
    from ..data.numeric import _number

    table, t_col, y_col = _label_table(source, input_format, task_col, label_col, options)
    blank = _blank_cells(table, y_col, "label") if table.n_rows else np.zeros(0, dtype=bool)
    if blank.any():
        warn(CrowdaggWarning(f"{table.display}: {int(blank.sum())} task(s) without a value (first at "
                             f"{table.locate(int(np.argmax(blank)))}) left out"))
        table = table.subset(np.flatnonzero(~blank))
    texts, first = _task_labels(table, t_col, y_col, what, numeric=True)
    out: dict[str, float] = {}
    for (task, text), row in zip(texts.items(), first.values()):
        value = _number(text)
        if not np.isfinite(value):
            how = "not finite" if value == value else "not a number"
            raise DataError(f"{what} value {text!r} of task {task!r} at {table.locate(row)} is {how}")
        out[task] = value
    return out


#: The posterior columns ``aggregate --proba`` writes: ``p_<class>``, one per class, the class's name as it is.
PROBA_PREFIX = "p_"
#: The column holding the probability of each row's label (``aggregate``'s output).
CONFIDENCE_COLUMN = "confidence"


@dataclass
class Predictions:
    """A predictions file as ``crowdagg evaluate`` scores it (:func:`read_predictions`).

    ``labels``: {task: label}; ``posteriors``: shape (len(labels), K), a
    row per task in the order of ``labels``, a column per class of
    ``classes`` (the ``p_<class>`` columns, each row checked: numbers in
    [0, 1] summing to 1 within
    :data:`~crowdagg.core.checks.PROBA_SUM_TOLERANCE`), or None without
    such columns; ``confidence``: shape (len(labels),), the probability of
    each task's label (the ``confidence`` column, in [0, 1]), or None.  A
    task's row is its first line.  ``display``: the file as messages name it.
    """

    labels: dict[str, str]
    classes: list[str]
    posteriors: np.ndarray | None
    confidence: np.ndarray | None
    display: str


def read_predictions(
    source: str | os.PathLike[str] | IO[bytes],
    *,
    input_format: str | None = None,
    task_col: str | None = None,
    label_col: str | None = None,
    what: str = "predicted",
    options: Mapping[str, str] | None = None,
) -> Predictions:
    """Read predicted labels with, where the file has them, their posteriors (``p_<class>`` columns, as
    ``aggregate --proba`` writes them) and the ``confidence`` column: one read, so ``-`` (stdin) works.

    Each probability is checked where it is read: a blank, text, NaN,
    negative or above 1 is an error naming the file, line, column and value;
    so is a row whose posteriors do not sum to 1, and a label with no
    ``p_<label>`` column.
    """
    table, t_col, y_col = _label_table(source, input_format, task_col, label_col, options)
    labels, first = _task_labels(table, t_col, y_col, what)
    rows = np.fromiter(first.values(), dtype=np.int64, count=len(first))
    p_cols = [h for h in table.header if h.startswith(PROBA_PREFIX) and h not in (t_col, y_col)]
    twice = next((h for h in [*p_cols, CONFIDENCE_COLUMN] if table.header.count(h) > 1), None)
    if twice is not None:  # (one column's values would be read twice: "sum to 1.5", or a class counted twice)
        raise DataError(f"{table.display}: column {twice!r} appears {table.header.count(twice)} times in the header")
    classes = [h[len(PROBA_PREFIX):] for h in p_cols]
    posteriors = None
    if p_cols:
        proba = np.column_stack([_probability_column(table, c, rows) for c in p_cols])
        sums = proba.sum(axis=1)
        off = np.abs(sums - 1.0) > PROBA_SUM_TOLERANCE
        if off.any():
            i = int(np.argmax(off))
            shown = ", ".join(p_cols[:5]) + (", ..." if len(p_cols) > 5 else "")
            raise DataError(f"{table.locate(int(rows[i]))}: the posterior columns ({shown}) sum to "
                            f"{float(sums[i]):.6g}, not 1")
        known = set(classes)
        for label, row in zip(labels.values(), rows.tolist()):
            if label not in known:
                raise DataError(f"{table.locate(row)}: label {label!r} has no {PROBA_PREFIX}{label} column (the "
                                f"posterior columns: {', '.join(p_cols[:5])}{', ...' if len(p_cols) > 5 else ''})")
        posteriors = proba
    confidence = None
    if CONFIDENCE_COLUMN in table.header and CONFIDENCE_COLUMN not in (t_col, y_col):
        confidence = _probability_column(table, CONFIDENCE_COLUMN, rows)
    return Predictions(labels, classes, posteriors, confidence, table.display)


def _label_table(source: Any, input_format: str | None, task_col: str | None, label_col: str | None,
                 options: Mapping[str, str] | None) -> tuple[RawTable, str, str]:
    """A task,label file read whole, and its task and label columns (the overrides as ``options`` spells them)."""
    task_col, label_col = _column_option(task_col, "task_col"), _column_option(label_col, "label_col")
    table = read_raw(source, input_format=input_format, role="truth")
    opts = options or {"task": param("task_col"), "label": param("label_col")}
    t_col, y_col = map_label_columns(table.header, source=table.display, task=task_col, label=label_col, options=opts)
    return table, t_col, y_col


def _task_labels(table: RawTable, t_col: str, y_col: str, what: str, *, numeric: bool = False,
                 ) -> tuple[dict[str, str], dict[str, int]]:
    """{task: label} of a task,label table, and {task: the row of its first line}; ``numeric``: the labels are
    values, and a task listed twice is refused only where they differ as numbers (``1`` and ``1.0`` agree)."""
    if table.n_rows == 0:
        raise DataError(f"{table.display}: no rows (header only?)")
    out: dict[str, str] = {}
    first: dict[str, int] = {}
    tasks = _names(table, t_col, "task")[0].to_pylist()
    labels = _names(table, y_col, "label")[0].to_pylist()
    skipped = []
    header_keys = (header_key(t_col), header_key(y_col))
    repeats = []
    for i, (t, y) in enumerate(zip(tasks, labels)):
        t, y = t.strip(), y.strip()
        if not t and not y:
            skipped.append(i)
            continue
        if (header_key(t), header_key(y)) == header_keys:
            repeats.append(i)
            continue
        if not t or not y:
            role = "task" if not t else "label"
            raise DataError(f"blank {what} {role} at {table.locate(i)}")
        prev = out.setdefault(t, y)
        first.setdefault(t, i)
        if prev != y and not (numeric and _same_number(prev, y)):
            raise DataError(
                f"{table.display}: task {t!r} has two different {what} {'values' if numeric else 'labels'} "
                f"({prev!r} and {y!r}; second at {table.locate(i)})"
            )
    if skipped:
        warn(CrowdaggWarning(f"skipped {len(skipped)} row(s) with no task or label (first at {table.locate(skipped[0])})"))
    if repeats:
        warn(
            CrowdaggWarning(
                f"skipped {len(repeats)} line(s) repeating the header (first at {table.locate(repeats[0])}); "
                "were files joined with their headers?"
            )
        )
    if not out:
        raise DataError(f"{table.display}: no rows with a task and a label")
    return out, first


def _same_number(a: str, b: str) -> bool:
    """Whether two value texts are the same finite number (``1``, ``1.0``, ``1e0``)."""
    from ..data.numeric import _number

    x = _number(a)
    return bool(np.isfinite(x)) and x == _number(b)


def _probability_column(table: RawTable, col: str, rows: np.ndarray) -> np.ndarray:
    """Column ``col`` at ``rows`` as probabilities: a blank, text, NaN, inf, negative or above 1 is an error
    naming the line, the column and the cell.  Read by Arrow where every cell is a number (typed Parquet columns,
    CSV text), cell by cell only to find the bad one."""
    column = table.column(col)
    values = _floats(column)
    if values is not None:
        picked = values[rows]
        if ((picked >= -PROBA_ROUNDING) & (picked <= 1.0 + PROBA_ROUNDING)).all():  # (NaN fails both)
            return np.clip(picked, 0.0, 1.0)
    cells = column.to_pylist() if hasattr(column, "to_pylist") else list(column)
    out = np.empty(len(rows), dtype=np.float64)
    for i, r in enumerate(rows.tolist()):
        cell = cells[r]
        try:
            value = float(cell.strip() if isinstance(cell, str) else cell)
        except (TypeError, ValueError):
            value = float("nan")
        if not -PROBA_ROUNDING <= value <= 1.0 + PROBA_ROUNDING:  # (NaN fails both)
            shown = "a blank" if cell is None or (isinstance(cell, str) and not cell.strip()) else repr(cell)
            raise DataError(f"{table.locate(r)}: column {col!r} holds {shown}, not a probability in [0, 1]")
        out[i] = min(max(value, 0.0), 1.0)
    return out


def _floats(column: Any) -> np.ndarray | None:
    """A column as float64 by Arrow's cast (blanks NaN), or None where a cell is not a number (or the column's
    type does not cast): the caller then finds the cell."""
    import pyarrow as pa
    import pyarrow.compute as pc

    try:
        arr = column if isinstance(column, (pa.Array, pa.ChunkedArray)) else pa.array(column, from_pandas=True)
        if pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type):
            arr = pc.utf8_trim_whitespace(arr)
        return np.asarray(arr.cast(pa.float64()).to_numpy(zero_copy_only=False), dtype=np.float64)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, TypeError, ValueError):
        return None


# --------------------------------------------------------------------------- output formats
#: What a saved worker model and ``simulate``'s output are written as (see :func:`output_format`).
MODEL_FORMATS = ("json",)
DIRECTORY = ("directory",)
#: What ``crowdagg train --save`` writes: a trained model (safetensors, uncompressed).
TRAINED_MODEL_FORMATS = ("model",)
#: The names a trained model's file may have (``.pt``: the name the README has always used).
TRAINED_MODEL_EXTENSIONS = (".safetensors", ".pt")


def output_format(
    fmt: str | None, path: str | None, option: str = "--output", formats: Sequence[str] = OUTPUT_FORMATS
) -> str:
    """The format an output is written in: ``--format``, else the file extension (``.gz`` stripped), else the first of ``formats``.

    The one check of every output's name.  ``formats`` says what this output
    can be: the table formats (:data:`OUTPUT_FORMATS`: ``-o``, ``--workers``),
    :data:`MODEL_FORMATS` (a saved worker model: JSON, optionally ``.gz``)
    or :data:`DIRECTORY` (``simulate -o DIR``: a directory of CSV files).
    Refused, as usage errors, rather than written under a misleading name:

    * an extension crowdagg does not write for this output (``out.xlsx``,
      ``--save-workers model.parquet``, ``--save model.csv``: a trained
      model is :data:`TRAINED_MODEL_EXTENSIONS`, uncompressed);
    * a ``--format`` that makes a binary file under a text file's name or
      the reverse (``-f parquet -o out.csv``; ``-f jsonl -o out.csv`` stays
      allowed: text is text);
    * for a directory: ``-``, an existing file or device (``/dev/stdout``),
      or a new name with a data file's extension (``-o out.csv``).
    """
    if tuple(formats) == DIRECTORY:
        return _output_directory(path, option)
    if tuple(formats) == TRAINED_MODEL_FORMATS and fmt:
        raise UsageError(f"{option} {path}: a trained model is written in its own format; {param('format')} "
                         "is the labels'")
    ext = _extension(path) if path and path != "-" else ""
    if tuple(formats) == TRAINED_MODEL_FORMATS:
        allowed = " or ".join(TRAINED_MODEL_EXTENSIONS)
        if path and path.lower().endswith(".gz"):
            raise UsageError(f"{option} {path}: a trained model is not compressed (any safetensors reader opens it); "
                             f"name it {allowed}")
        if ext and ext not in TRAINED_MODEL_EXTENSIONS:
            raise UsageError(f"{option} {path}: a trained model is a safetensors file, not {ext}; name it {allowed}")
        return "model"
    guess = _OUTPUT_EXTENSIONS.get(ext) if ext else None
    if fmt:
        f = fmt.lower()
        if f not in formats:
            raise UsageError(f"{param('format')} must be one of {', '.join(formats)}, got {fmt!r}")
        if guess is not None and (guess == "parquet") != (f == "parquet"):
            raise UsageError(
                f"{param('format')} {f} and {option} {path} disagree: the file would hold "
                f"{'Parquet' if f == 'parquet' else 'text'} under a {ext} name; drop one, or rename the file"
            )
        return f
    if ext and (guess is None or guess not in formats):
        names = [e for e, g in _OUTPUT_EXTENSIONS.items() if g in formats and e not in (".tab", ".txt", ".ndjson", ".pq")]
        if tuple(formats) == MODEL_FORMATS:
            raise UsageError(f"{option} {path}: a saved worker model is JSON; name it .json (optionally .json.gz)")
        raise UsageError(
            f"{option} {path}: unknown output extension {ext!r}; use {', '.join(names)} "
            f"(optionally .gz), or set {param('format')}"
        )
    return guess or formats[0]


def _extension(path: str) -> str:
    """A path's extension, lower case, ``.gz`` stripped (``x.CSV.gz`` -> ``.csv``); '' for none or a dot-file."""
    stem = path[:-3] if path.lower().endswith(".gz") else path
    base = os.path.basename(stem)
    return Path(base).suffix.lower() if not base.startswith(".") or base.count(".") > 1 else ""


def _output_directory(path: str | None, option: str) -> str:
    """``simulate -o DIR``: a directory (existing, or a new name that does not look like a file's)."""
    if not path:
        raise UsageError(f"{option} needs a directory")
    if path == "-" or (os.path.exists(path) and not os.path.isdir(path)):
        what = "standard output" if path == "-" else "not a directory"
        raise UsageError(
            f"{option} {path}: {what}; the crowd is written as CSV files into a directory (e.g. sim/)"
        )
    ext = _extension(path)
    if not os.path.isdir(path) and (ext in _OUTPUT_EXTENSIONS or path.lower().endswith(".gz")):
        raise UsageError(
            f"{option} {path}: looks like a file name, but the crowd is written as CSV files into a "
            "directory (e.g. sim/)"
        )
    return "directory"


__all__ = [
    "INPUT_FORMATS",
    "OUTPUT_FORMATS",
    "TASK_ALIASES",
    "WORKER_ALIASES",
    "LABEL_ALIASES",
    "TRUTH_ALIASES",
    "RawTable",
    "read_raw",
    "load_annotations",
    "read_task_labels",
    "output_format",
    "render_table",
    "detect_format",
    "to_utf8",
]
