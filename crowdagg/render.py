"""Rows to bytes: the one writer of CSV, TSV, JSON and JSON Lines.

Float policy, the same in every format: the shortest text that reads back
as the same double (Python's ``repr``: ``0.1``, ``1.0``, ``1.2e-10``), so a
saved output reads back exactly.  Non-finite numbers are refused (every
output is finite, or the run fails).

* CSV: RFC 4180 -- a cell containing a comma, a double quote, CR or LF is
  quoted, with quotes doubled; ``\\n`` line ends.
* TSV: no quoting at all, as the reader expects (a ``"`` is an ordinary
  character); a value containing a tab, CR or LF cannot be written and is an
  error naming the row's key (e.g. the task).
* JSON Lines: one object per line; JSON: a list of objects, one per line.
  Strings are escaped as JSON requires (non-ASCII kept as UTF-8).

Text is built a column at a time (no per-cell Python objects beyond the
strings themselves), and the caller gets bytes to hand to
:mod:`crowdagg.output`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from json.encoder import encode_basestring  # type: ignore[attr-defined]
from typing import TYPE_CHECKING, Any

import numpy as np

from .errors import DataError, UsageError

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

OUTPUT_FORMATS = ("csv", "tsv", "jsonl", "json")

_CSV_SPECIAL = re.compile(r'[,"\r\n]')
_TSV_SPECIAL = re.compile(r"[\t\r\n]")
_SEP = "\x00"  # joins a column's cells for one regex scan (NUL cannot occur in parsed text)


def float_text(values: np.ndarray, *, column: str = "value") -> list[str]:
    """Shortest round-trip text of each float (``repr``); non-finite values are refused."""
    arr = np.asarray(values, dtype=np.float64)
    if arr.size and not np.isfinite(arr).all():
        bad = arr[~np.isfinite(arr)][0]
        raise DataError(f"column {column!r} holds a non-finite number ({bad!r}); refusing to write it")
    return list(map(repr, arr.tolist()))


def _cells(values: Any, column: str) -> list[str]:
    """One column as text cells (not yet quoted or escaped)."""
    arr = np.asarray(values)
    if arr.dtype.kind == "f":
        return float_text(arr, column=column)
    if arr.dtype.kind in "iu":
        return list(map(str, arr.tolist()))
    if arr.dtype.kind == "b":
        return ["true" if v else "false" for v in arr.tolist()]
    return [v if isinstance(v, str) else str(v) for v in arr.tolist()]


def _is_number(values: Any) -> bool:
    return np.asarray(values).dtype.kind in "fiub"


def _any_match(pattern: re.Pattern[str], cells: list[str]) -> bool:
    return pattern.search(_SEP.join(cells)) is not None


def _csv_quote(cells: list[str]) -> list[str]:
    if not _any_match(_CSV_SPECIAL, cells):
        return cells
    return ['"' + c.replace('"', '""') + '"' if _CSV_SPECIAL.search(c) else c for c in cells]


def _tsv_check(cells: list[str], column: str, keys: list[str] | None, key_name: str | None) -> None:
    if not _any_match(_TSV_SPECIAL, cells):
        return
    for i, c in enumerate(cells):
        m = _TSV_SPECIAL.search(c)
        if m:
            what = {"\t": "a tab", "\r": "a carriage return", "\n": "a newline"}[m.group()]
            where = f"{key_name} {keys[i]!r}" if keys is not None and key_name else f"row {i + 1}"
            raise DataError(
                f"cannot write TSV: {where} has {what} in column {column!r} ({c!r}); "
                "TSV has no quoting -- use CSV or JSON output"
            )


def _header_check_tsv(names: Sequence[str]) -> None:
    for n in names:
        if _TSV_SPECIAL.search(n):
            raise DataError(f"cannot write TSV: column name {n!r} contains a tab or line break; use CSV or JSON output")


def _join_rows(columns: list[list[str]], sep: str) -> str:
    if not columns or not columns[0]:
        return ""
    if len(columns) == 1:
        return "\n".join(columns[0]) + "\n"
    return "\n".join(map(sep.join, zip(*columns))) + "\n"


def render_table(
    table: Mapping[str, Any] | pd.DataFrame, fmt: str, *, key: str | None = None
) -> bytes:
    """Serialise columns (name -> 1-D array, all the same length) as UTF-8 bytes.

    Parameters
    ----------
    table : mapping of column name to array, or a DataFrame.
    fmt : ``csv``, ``tsv``, ``jsonl`` or ``json``.
    key : column whose value names a row in errors (e.g. ``"task"``);
        default the first column.
    """
    if fmt not in OUTPUT_FORMATS:
        raise UsageError(f"output format must be one of {', '.join(OUTPUT_FORMATS)}, got {fmt!r}")
    if hasattr(table, "to_dict") and hasattr(table, "columns"):
        cols = {str(c): table[c].to_numpy() for c in table.columns}  # type: ignore[index]
    else:
        cols = {str(k): v for k, v in table.items()}  # type: ignore[union-attr]
    names = list(cols)
    key = key if key is not None else (names[0] if names else None)
    raw = {n: _cells(v, n) for n, v in cols.items()}
    lengths = {len(c) for c in raw.values()}
    if len(lengths) > 1:
        raise ValueError(f"columns of unequal length: { {n: len(c) for n, c in raw.items()} }")
    if fmt == "csv":
        header = ",".join(_csv_quote(names))
        body = _join_rows([c if _is_number(cols[n]) else _csv_quote(c) for n, c in raw.items()], ",")
        return (header + "\n" + body).encode("utf-8")
    if fmt == "tsv":
        _header_check_tsv(names)
        keys = raw.get(key) if key is not None else None
        for n, c in raw.items():
            if not _is_number(cols[n]):
                _tsv_check(c, n, keys, key)
        return ("\t".join(names) + "\n" + _join_rows(list(raw.values()), "\t")).encode("utf-8")
    # JSON: strings escaped and quoted, numbers as they are.
    parts: list[list[str]] = []
    for i, (n, c) in enumerate(raw.items()):
        prefix = ("{" if i == 0 else ",") + encode_basestring(n) + ":"
        cells = c if _is_number(cols[n]) else list(map(encode_basestring, c))
        parts.append([prefix + v for v in cells])
    if parts and parts[0]:
        rows = list(map("".join, zip(*parts)))
        rows = [r + "}" for r in rows]
    else:
        rows = []
    if fmt == "jsonl":
        return ("\n".join(rows) + "\n" if rows else "").encode("utf-8")
    return ("[\n" + ",\n".join(rows) + "\n]\n" if rows else "[]\n").encode("utf-8")


def estimate_text_bytes(n_rows: int, n_float_cols: int, n_text_cols: int, text_width: float = 16.0) -> int:
    """Rough size of a rendered table (bytes), counting the Python strings built on the way."""
    # a float cell: ~20 characters of text plus the str object (~70 bytes) while rendering
    per_row = n_float_cols * 90 + n_text_cols * (text_width + 60) + 16
    return int(math.ceil(n_rows * per_row))


__all__ = ["OUTPUT_FORMATS", "render_table", "float_text", "estimate_text_bytes"]
