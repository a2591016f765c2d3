"""The features file of ``crowdagg train`` / ``predict``, and its rows aligned to the tasks (numpy, pandas, pyarrow).

No torch here: the features are read, checked and aligned before a
trainer is imported, so a bad file is refused fast and in plain words.

Formats, by extension (a file that is not what its name says is refused):

* ``.npy`` -- one numeric array, 2-D ``(n, d)`` feature vectors or 4-D
  ``(n, C, H, W)`` images; read with ``allow_pickle=False``: an object
  array is refused, never unpickled;
* ``.npz`` -- one array, or arrays named ``features`` (or ``x``) and
  optionally ``ids`` (or ``tasks``): the task id of each row;
* ``.parquet`` (``.pq``), ``.csv``, ``.tsv`` (optionally ``.gz``) -- a
  table with an id column (``id_col``; default ``task`` when there is
  one) and numeric feature columns.

The task ids of the rows come from the file (``ids`` in an ``.npz``, the
id column of a table) or from ``tasks_path``, a text file of one id per
line, row ``i`` of the features being the task on line ``i + 1``.  A bare
``.npy`` without a tasks file has no ids: :func:`align` refuses it for
training (the rows cannot be matched to the answers), prediction numbers
its rows ``0 .. n-1``.

Every check names the file and the place: NaN or inf (the first bad row
and column), ids that do not match the rows in number, duplicate or blank
ids, non-numeric columns, an empty file, an array of the wrong number of
dimensions.  The memory a file needs is checked before it is read
(:func:`crowdagg.core.memory.check`).
"""

from __future__ import annotations

import os
import sys
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ..core import memory
from ..errors import CrowdaggError, DataError, UsageError

if TYPE_CHECKING:  # pragma: no cover
    from ..data.annotations import AnnotationSet

#: The extensions read, and as what (``.gz`` is stripped first for the text tables).
FORMATS = {".npy": "npy", ".npz": "npz", ".parquet": "parquet", ".pq": "parquet", ".csv": "csv", ".tsv": "tsv",
           ".tab": "tsv"}
#: The arrays of an ``.npz`` read as the features, and as the row ids, in order of preference.
NPZ_FEATURES = ("features", "x")
NPZ_IDS = ("ids", "tasks")
#: Bytes pandas may hold per byte of a CSV/TSV file while parsing it as text (a Python string per cell).
TEXT_BYTES_PER_BYTE = 12.0
#: How many missing tasks an error names before it counts the rest.
NAMED = 5


@dataclass(frozen=True, eq=False)
class Features:
    """Features read from a file.

    Attributes
    ----------
    ids : ndarray of str (object), shape (n,), or None
        The task id of each row; None when the file has none and no tasks
        file was given.
    x : ndarray of float32, shape (n, d) or (n, C, H, W)
        The features, finite.
    source : str
        The file, as messages name it.
    columns : tuple of str, or None
        The name of each feature (column ``j`` of ``x``): a table's
        columns beside the id; None for an array file, which has none.
    """

    ids: np.ndarray | None
    x: np.ndarray
    source: str
    columns: tuple[str, ...] | None = None

    @property
    def n_rows(self) -> int:
        return int(self.x.shape[0])

    def row_names(self) -> np.ndarray:
        """The ids, or ``"0" .. str(n-1)`` when there are none (what ``crowdagg predict`` writes)."""
        if self.ids is not None:
            return self.ids
        return np.array([str(i) for i in range(self.n_rows)], dtype=object)


def feature_format(path: str) -> str:
    """``npy``, ``npz``, ``parquet``, ``csv`` or ``tsv`` from the file's extension (``.gz`` stripped for tables)."""
    name = os.path.basename(path).lower()
    gz = name.endswith(".gz")
    ext = os.path.splitext(name[:-3] if gz else name)[1]
    fmt = FORMATS.get(ext)
    if fmt is None or (gz and fmt not in ("csv", "tsv")):
        raise UsageError(f"features {path}: unknown extension {ext + ('.gz' if gz else '') or '(none)'!r}; "
                         "features are .npy, .npz, .parquet, .csv or .tsv (the tables optionally .gz)")
    return fmt


def has_own_ids(path: str) -> bool:
    """Whether a features file carries its rows' task ids: a table's id column, an ``.npz``'s ``ids``/``tasks``
    array (its member names are read, nothing else; a file that cannot be read says no, and is refused later)."""
    fmt = feature_format(path)
    if fmt == "npz":
        try:
            with zipfile.ZipFile(path) as zf:
                return any(os.path.splitext(n)[0] in NPZ_IDS for n in zf.namelist())
        except (OSError, zipfile.BadZipFile):
            return False
    return fmt in ("parquet", "csv", "tsv")


def read_features(path: str, *, tasks_path: str | None = None, id_col: str | None = None,
                  max_memory: memory.MaxMemory = None) -> Features:
    """Read a features file (see the module docstring) and the ids of its rows.

    Parameters
    ----------
    path : str
        The features file.
    tasks_path : str, optional
        One task id per line, line ``i + 1`` naming row ``i``.  With a file
        that has its own ids, they must be the same, in the same order.
    id_col : str, optional
        The id column of a Parquet/CSV/TSV file (default ``task``).
    max_memory : str or float, optional
        Refuse up front a file whose arrays would need more (default: 80%
        of the available memory).

    Returns
    -------
    Features

    Raises
    ------
    DataError
        A file that cannot be read as features, naming the file and the place.
    UsageError
        An unknown extension; ``id_col`` with an array file; no id column.
    ResourceError
        The file would need more memory than allowed.
    """
    fmt = feature_format(path)
    if id_col is not None and fmt in ("npy", "npz"):
        raise UsageError(f"--id-col applies to a Parquet/CSV/TSV features file, not {path} (an array: give its ids "
                         "with --tasks, one per line)")
    if not os.path.exists(path):
        raise DataError(f"features {path}: no such file")
    if os.path.isdir(path):
        raise DataError(f"features {path}: is a directory, not a file")
    columns: Sequence[str] | None = None
    if fmt == "npy":
        ids, x = None, _read_npy(path, max_memory)
    elif fmt == "npz":
        ids, x = _read_npz(path, max_memory)
    else:
        ids, x, columns = _read_table(path, fmt, id_col, max_memory)
    if x.shape[0] == 0:
        raise DataError(f"features {path}: holds no rows")
    if ids is not None:
        text = fmt in ("csv", "tsv")
        _check_ids(ids, path, "line" if text else "row", first=2 if text else 0)
    if tasks_path is not None:
        listed = read_task_ids(tasks_path, max_memory)
        if len(listed) != x.shape[0]:
            raise DataError(f"tasks {tasks_path}: {len(listed):,} ids for the {x.shape[0]:,} rows of features {path} "
                            "(one id per line, line i naming row i)")
        if ids is not None:
            differ = np.flatnonzero(listed != ids)
            if differ.size:
                i = int(differ[0])
                raise DataError(f"tasks {tasks_path}: line {i + 1} names {listed[i]!r} but row {i} of features {path} "
                                f"is {ids[i]!r}: the file has its own ids; leave out --tasks or make them agree")
        ids = listed
    _check_finite(x, path, ids, fmt, columns)
    return Features(ids=ids, x=x, source=path, columns=None if columns is None else tuple(columns))


def read_task_ids(path: str, max_memory: memory.MaxMemory = None) -> np.ndarray:
    """A tasks file: one id per line (surrounding whitespace stripped; a final newline optional), object array of str.

    A blank line, a repeated id, bytes that are not UTF-8 or an empty file are refused, naming the line.
    """
    if not os.path.exists(path):
        raise DataError(f"tasks {path}: no such file")
    if os.path.isdir(path):
        raise DataError(f"tasks {path}: is a directory, not a file")
    size = os.path.getsize(path)
    memory.check(TEXT_BYTES_PER_BYTE * size, f"tasks {path} of {memory.human(size)}", max_memory)
    with open(path, "rb") as fh:
        raw = fh.read()
    if b"\0" in raw[:8192]:
        raise DataError(f"tasks {path}: is not a text file (one task id per line)")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[:exc.start].count(b"\n") + 1
        raise DataError(f"tasks {path}: line {line} is not valid UTF-8 text") from None
    lines = text.splitlines()
    if not lines:
        raise DataError(f"tasks {path}: is empty (one task id per line)")
    ids = np.array([s.strip() for s in lines], dtype=object)
    _check_ids(ids, path, "line", first=1, what="tasks")
    return ids


# --------------------------------------------------------------------------- the formats
def _npy_header(fh: Any, path: str) -> tuple[tuple[int, ...], np.dtype, bool]:
    """The shape, dtype and Fortran order in a ``.npy`` header (nothing else read); a file that is not one is
    refused."""
    from numpy.lib import format as npformat

    try:
        version = npformat.read_magic(fh)
        if version == (1, 0):
            shape, fortran, dtype = npformat.read_array_header_1_0(fh)
        elif version == (2, 0):
            shape, fortran, dtype = npformat.read_array_header_2_0(fh)
        else:  # (3, 0) is written only for structured arrays with non-Latin-1 field names: not features
            raise ValueError(f"format version {version[0]}.{version[1]} holds a structured array, not numbers")
    except Exception as exc:  # noqa: BLE001 - numpy's header parser raises ValueError, SyntaxError, TokenError ...
        raise DataError(f"features {path}: is not a .npy file ({_reason(exc)})") from None
    shape = tuple(int(s) for s in shape)
    if any(s < 0 for s in shape):
        raise DataError(f"features {path}: is not a .npy file (its header gives the shape {shape})")
    return shape, np.dtype(dtype), bool(fortran)


def _check_data_size(found: int, shape: tuple[int, ...], dtype: np.dtype, path: str, name: str = "") -> None:
    """The bytes after a ``.npy`` header are exactly the array its header describes (a lying header, a truncated
    file or bytes after the array are refused: numpy would read a prefix and ignore the rest)."""
    expected = int(np.prod(shape, dtype=np.float64)) * dtype.itemsize
    if found != expected:
        what = f"features {path}" + (f" (array {name!r})" if name else "")
        why = "truncated?" if found < expected else "its header does not describe its data"
        raise DataError(f"{what}: cannot be read as a .npy array: it holds {found:,} bytes of data where "
                        f"its header's {' × '.join(map(str, shape))} {dtype} array needs {expected:,} ({why})")


def _check_array_kind(shape: tuple[int, ...], dtype: np.dtype, path: str, name: str = "") -> None:
    """A numeric array of 2 or 4 dimensions; objects and the rest refused before anything is loaded."""
    what = f"features {path}" + (f" (array {name!r})" if name else "")
    if dtype.hasobject:
        raise DataError(f"{what}: holds Python objects (a pickled array), which are never unpickled; save a numeric "
                        "array (np.save of a float array)")
    if dtype.kind not in "biuf" or dtype.fields is not None:
        raise DataError(f"{what}: holds {dtype} values, not numbers")
    if len(shape) == 1:
        raise DataError(f"{what}: is 1-D (shape {shape}); features need one row per task: (n_tasks, d) vectors or "
                        "(n_tasks, C, H, W) images")
    if len(shape) not in (2, 4):
        raise DataError(f"{what}: has {len(shape)} dimensions (shape {shape}); features are (n_tasks, d) vectors or "
                        "(n_tasks, C, H, W) images")
    if len(shape) == 2 and shape[0] > 0 and shape[1] == 0:
        raise DataError(f"{what}: has rows of no features (shape {shape})")


def _check_array_memory(shape: tuple[int, ...], dtype: np.dtype, path: str, max_memory: memory.MaxMemory) -> None:
    n = float(np.prod(shape, dtype=np.float64))
    need = n * dtype.itemsize + (n * 4 if dtype != np.float32 else 0)
    memory.check(need, f"features {path}: {' × '.join(f'{s:,}' for s in shape)} {dtype} values", max_memory,
                 advice="use fewer rows or features")


def _as_float32(x: np.ndarray, path: str) -> np.ndarray:
    """float32; a finite value beyond its range (1e39) is refused by name, not read as inf."""
    if x.dtype == np.float32:
        return x
    with np.errstate(over="ignore", invalid="ignore"):
        x32 = x.astype(np.float32)
    if x.dtype.kind == "f" and x.size:
        _check_range(x.reshape(x.shape[0], -1), x32.reshape(x.shape[0], -1), path, "row", 0, None)
    return x32


def _check_range(source: np.ndarray, x32: np.ndarray, path: str, unit: str, first: int,
                 columns: Sequence[str] | None) -> None:
    """``source`` (n, d) finite where ``x32`` is not: a value float32 cannot hold, named (its row and column)."""
    over = np.isfinite(source) & ~np.isfinite(x32)
    if over.any():
        i, j = (int(v[0]) for v in np.nonzero(over))
        column = f"column {columns[j]!r}" if columns is not None else f"feature {j}"
        raise DataError(f"features {path}: {unit} {i + first}, {column} is {float(source[i, j]):g}, beyond the range "
                        "of float32 (±3.4e38) in which features are trained; rescale the features")


def _read_npy(path: str, max_memory: memory.MaxMemory) -> np.ndarray:
    """The array, read through one handle (a FIFO works) after its header is checked; its data must be exactly
    what the header describes."""
    try:
        with open(path, "rb") as fh:
            shape, dtype, fortran = _npy_header(fh, path)
            _check_array_kind(shape, dtype, path)
            _check_array_memory(shape, dtype, path, max_memory)
            expected = int(np.prod(shape, dtype=np.float64)) * dtype.itemsize
            buf = bytearray(expected)
            view, got = memoryview(buf), 0
            while got < expected:
                n = fh.readinto(view[got:])
                if not n:
                    break
                got += n
            if got == expected:
                got += len(fh.read(1 << 16))
            _check_data_size(got, shape, dtype, path)
    except OSError as exc:
        raise DataError(f"features {path}: cannot be read ({_reason(exc)})") from None
    x = np.frombuffer(buf, dtype=dtype).reshape(shape, order="F" if fortran else "C")
    return _as_float32(x, path)


def _read_npz(path: str, max_memory: memory.MaxMemory) -> tuple[np.ndarray | None, np.ndarray]:
    if not zipfile.is_zipfile(path):
        raise DataError(f"features {path}: is not a .npz file (not a zip archive of arrays)")
    try:
        with zipfile.ZipFile(path) as zf:
            members = {os.path.splitext(i.filename)[0]: i for i in zf.infolist() if i.filename.endswith(".npy")}
            if not members:
                raise DataError(f"features {path}: holds no arrays")
            names = list(members)
            main = next((n for n in NPZ_FEATURES if n in members), None)
            id_name = next((n for n in NPZ_IDS if n in members), None)
            if main is None:
                rest = [n for n in names if n != id_name]
                if len(rest) != 1:
                    raise DataError(f"features {path}: holds the arrays {', '.join(map(repr, names))}; name the "
                                    "features 'features' (and the row ids 'ids'), or save one array")
                main = rest[0]
            with zf.open(members[main]) as fh:
                shape, dtype, _ = _npy_header(fh, path)
                data_bytes = members[main].file_size - fh.tell()
            _check_array_kind(shape, dtype, path, main)
            _check_data_size(data_bytes, shape, dtype, path, main)
            _check_array_memory(shape, dtype, path, max_memory)
            if id_name is not None:
                with zf.open(members[id_name]) as fh:
                    id_shape, id_dtype, _ = _npy_header(fh, path)
                    id_bytes = members[id_name].file_size - fh.tell()
                if id_dtype.hasobject:
                    raise DataError(f"features {path} (array {id_name!r}): holds Python objects (a pickled array), "
                                    "which are never unpickled; save the ids as a string or integer array")
                if id_dtype.kind not in "iuUS" or len(id_shape) != 1:
                    raise DataError(f"features {path} (array {id_name!r}): ids must be a 1-D array of strings or "
                                    f"integers, got shape {id_shape} of {id_dtype}")
                _check_data_size(id_bytes, id_shape, id_dtype, path, id_name)
                if id_shape[0] != shape[0]:
                    raise DataError(f"features {path}: {id_shape[0]:,} ids ({id_name!r}) for {shape[0]:,} rows "
                                    f"({main!r})")
                memory.check(id_shape[0] * (id_dtype.itemsize + 64.0), f"features {path}: {id_shape[0]:,} ids",
                             max_memory)
        with np.load(path, allow_pickle=False) as npz:
            x = _as_float32(npz[main], path)
            ids = None if id_name is None else _id_strings(npz[id_name], f"features {path} (array {id_name!r})")
    except CrowdaggError:
        raise  # already worded (a ResourceError stays one)
    except (ValueError, OSError, EOFError, zipfile.BadZipFile) as exc:
        raise DataError(f"features {path}: cannot be read as a .npz archive ({_reason(exc)})") from None
    return ids, x


def _id_strings(values: np.ndarray, what: str) -> np.ndarray:
    if values.dtype.kind == "S":
        try:
            return np.array([v.decode("utf-8").strip() for v in values.tolist()], dtype=object)
        except UnicodeDecodeError:
            raise DataError(f"{what}: ids that are not valid UTF-8 text") from None
    return np.array([str(v).strip() for v in values.tolist()], dtype=object)


def _read_table(path: str, fmt: str, id_col: str | None, max_memory: memory.MaxMemory
                ) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """A Parquet/CSV/TSV table: (ids, features (n, d) float32, their column names), every non-id column numeric."""
    size = os.path.getsize(path)
    if fmt == "parquet":
        import pyarrow.parquet as pq

        try:
            meta = pq.ParquetFile(path).metadata
        except Exception as exc:  # noqa: BLE001 - pyarrow raises several types for a file that is not Parquet
            raise DataError(f"features {path}: is not a Parquet file ({_reason(exc)})") from None
        raw = sum(meta.row_group(i).total_byte_size for i in range(meta.num_row_groups))
        memory.check(2.0 * raw + 4.0 * meta.num_rows * meta.num_columns, f"features {path}: {meta.num_rows:,} rows × "
                     f"{meta.num_columns:,} columns", max_memory, advice="use fewer rows or features")
        try:
            table = pq.read_table(path)
        except Exception as exc:  # noqa: BLE001
            raise DataError(f"features {path}: cannot be read as Parquet ({_reason(exc)})") from None
        columns = [str(c).strip() for c in table.column_names]  # as a CSV/TSV header's: a model's names match either
        table = table.rename_columns(columns)
        first = 0  # rows, 0-based
    else:
        memory.check(TEXT_BYTES_PER_BYTE * size, f"features {path} of {memory.human(size)} of text", max_memory,
                     advice="use fewer rows or features, or Parquet or .npy")
        table, columns = _read_text_table(path, fmt)
        first = 2  # line numbers: the header is line 1
    where = "line" if first else "row"
    if not columns:
        raise DataError(f"features {path}: is empty (no header)")
    key = id_col if id_col is not None else ("task" if "task" in columns else None)
    if key is None:
        raise UsageError(f"features {path}: no 'task' column to align its rows by (columns: {_listed(columns)}); "
                         "name the id column with --id-col")
    if key not in columns:
        raise UsageError(f"--id-col {key}: features {path} has no such column (columns: {_listed(columns)})")
    if columns.count(key) > 1:
        raise DataError(f"features {path}: the id column {key!r} appears more than once")
    first_at: dict[str, int] = {}
    for j, col in enumerate(columns):
        if col in first_at:
            raise DataError(f"features {path}: the column {col!r} appears twice (columns {first_at[col] + 1} and "
                            f"{j + 1}); give each feature column its own name")
        first_at[col] = j
    feats = [c for c in columns if c != key]
    if not feats:
        raise DataError(f"features {path}: has no feature columns beside the id column {key!r}")
    if fmt == "parquet":
        ids, x = _parquet_columns(table, key, feats, path)
    else:
        ids, x = _text_columns(table, key, feats, path)
    if x.shape[0] == 0:
        raise DataError(f"features {path}: holds no rows")
    blank = np.flatnonzero(ids == "")
    if blank.size:
        raise DataError(f"features {path}: {where} {int(blank[0]) + first}: the id column {key!r} is blank")
    return ids, x, feats


def _read_text_table(path: str, fmt: str) -> tuple[Any, list[str]]:
    """A CSV/TSV file as a frame of text cells (pyarrow's reader: a row of the wrong length is refused)."""
    import csv
    import gzip
    import io

    import pyarrow as pa
    import pyarrow.csv as pacsv

    with open(path, "rb") as fh:
        raw = fh.read()
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError) as exc:
            raise DataError(f"features {path}: cannot be decompressed ({_reason(exc)})") from None
    elif path.lower().endswith(".gz"):
        raise DataError(f"features {path}: is not gzip-compressed, as its name says")
    if b"\0" in raw[:8192]:
        raise DataError(f"features {path}: is not a text {fmt.upper()} file (binary content)")
    raw = raw[3:] if raw.startswith(b"\xef\xbb\xbf") else raw
    first = raw.split(b"\n", 1)[0].rstrip(b"\r")
    if not first.strip():
        return None, []
    sep = "\t" if fmt == "tsv" else ","
    try:
        header = next(csv.reader([first.decode("utf-8")], delimiter=sep))
    except (UnicodeDecodeError, csv.Error) as exc:
        raise DataError(f"features {path}: line 1 cannot be read as a {fmt.upper()} header ({_reason(exc)})") from None
    columns = [c.strip() for c in header]
    try:
        table = pacsv.read_csv(
            io.BytesIO(raw), read_options=pacsv.ReadOptions(column_names=[f"c{j}" for j in range(len(header))],
                                                            skip_rows=1),
            parse_options=pacsv.ParseOptions(delimiter=sep),
            convert_options=pacsv.ConvertOptions(column_types={f"c{j}": pa.string() for j in range(len(header))},
                                                 strings_can_be_null=False, quoted_strings_can_be_null=False))
    except (pa.ArrowInvalid, UnicodeDecodeError, ValueError) as exc:
        raise DataError(f"features {path}: cannot be read as {fmt.upper()} ({_reason(exc)})") from None
    import pandas as pd

    frame = pd.DataFrame({j: table.column(j).to_numpy(zero_copy_only=False) for j in range(len(header))})
    frame.columns = columns
    return frame, columns


def _text_columns(frame: Any, key: str, feats: Sequence[str], path: str) -> tuple[np.ndarray, np.ndarray]:
    import pandas as pd

    ids = np.array([s.strip() for s in frame[key].tolist()], dtype=object)
    x = np.empty((len(frame), len(feats)), dtype=np.float32)
    for j, col in enumerate(feats):
        text = frame[col].astype(str).str.strip()
        values = pd.to_numeric(text, errors="coerce").to_numpy(dtype=np.float64)
        bad = np.isnan(values) & ~text.str.lower().isin(("nan", "+nan", "-nan")).to_numpy()
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise DataError(f"features {path}: column {col!r} is not numeric: line {i + 2} holds "
                            f"{frame[col].iloc[i]!r}")
        with np.errstate(over="ignore", invalid="ignore"):
            x[:, j] = values
        _check_range(values[:, None], x[:, j:j + 1], path, "line", 2, [col])
    return ids, x


def _parquet_columns(table: Any, key: str, feats: Sequence[str], path: str) -> tuple[np.ndarray, np.ndarray]:
    import pyarrow as pa
    import pyarrow.compute as pc

    x = np.empty((table.num_rows, len(feats)), dtype=np.float32)
    for j, col in enumerate(feats):
        column = table.column(col)
        t = column.type
        if not (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t)
                or pa.types.is_decimal(t)):
            held = "text" if pa.types.is_string(t) or pa.types.is_large_string(t) else str(t)
            raise DataError(f"features {path}: column {col!r} is not numeric (it holds {held})")
        nulls = column.is_null()
        if pc.any(nulls).as_py():
            i = int(np.flatnonzero(nulls.to_numpy(zero_copy_only=False))[0])
            raise DataError(f"features {path}: row {i}, column {col!r} is empty (null)")
        values = column.cast(pa.float64()).to_numpy()
        with np.errstate(over="ignore", invalid="ignore"):
            x[:, j] = values
        _check_range(values[:, None], x[:, j:j + 1], path, "row", 0, [col])
    id_column = table.column(key)
    if pa.types.is_nested(id_column.type) or pa.types.is_binary(id_column.type):
        raise DataError(f"features {path}: the id column {key!r} holds {id_column.type}, not ids")
    values = id_column.to_pylist()
    ids = np.array(["" if v is None else str(v).strip() for v in values], dtype=object)
    return ids, x


# --------------------------------------------------------------------------- checks
def _check_ids(ids: np.ndarray, path: str, unit: str, *, first: int, what: str = "features") -> None:
    """No blank id, no id twice; ``unit`` ``line`` or ``row`` and the number of the first (for messages)."""
    blank = np.flatnonzero(ids == "")
    if blank.size:
        raise DataError(f"{what} {path}: {unit} {int(blank[0]) + first} has a blank task id")
    import pandas as pd

    dup = pd.Index(ids).duplicated()
    if dup.any():
        i = int(np.flatnonzero(dup)[0])
        j = int(np.flatnonzero(ids[:i] == ids[i])[0])
        raise DataError(f"{what} {path}: task {ids[i]!r} appears twice ({unit}s {j + first} and {i + first}); "
                        "each row is one task")


def _check_finite(x: np.ndarray, path: str, ids: np.ndarray | None, fmt: str,
                  columns: Sequence[str] | None = None) -> None:
    """The first NaN or inf, by row then column, named: a table's line (CSV/TSV) or row and column name, an
    array's row and the feature's position (an image's element)."""
    flat = x.reshape(x.shape[0], -1)
    finite = np.isfinite(flat)
    if finite.all():
        return
    bad_rows = ~finite.all(axis=1)
    i = int(np.flatnonzero(bad_rows)[0])
    j = int(np.flatnonzero(~finite[i])[0])
    col = np.unravel_index(j, x.shape[1:])
    if columns is not None:
        column = f"column {columns[j]!r}"
    else:
        column = f"feature {j}" if x.ndim == 2 else f"element {tuple(int(c) for c in col)}"
    where = f"line {i + 2}" if fmt in ("csv", "tsv") else f"row {i}"
    task = f" (task {ids[i]!r})" if ids is not None else ""
    raise DataError(f"features {path}: {where}{task}, {column} is {flat[i, j]}; features must be finite "
                    f"({int(bad_rows.sum()):,} rows hold NaN or inf)")


def _listed(columns: Sequence[str], limit: int = 12) -> str:
    shown = ", ".join(map(repr, columns[:limit]))
    return shown + (f" ... ({len(columns):,} in all)" if len(columns) > limit else "")


def _reason(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return text[:200]


# --------------------------------------------------------------------------- alignment
def align(data: AnnotationSet, features: Features, *, max_memory: memory.MaxMemory = None
          ) -> tuple[AnnotationSet, np.ndarray]:
    """The features' rows in the task order of ``data``, extended by the tasks that have features but no answers.

    Parameters
    ----------
    data : AnnotationSet
        The answers (training tasks).
    features : Features
        With ids (a bare ``.npy`` without a tasks file is refused: its rows
        cannot be matched to the answers' tasks).
    max_memory : str or float, optional
        Refuse up front a reordered copy of the features that would not fit.

    Returns
    -------
    (AnnotationSet, ndarray)
        ``data`` with the feature-only tasks appended, without answers, in
        the features' order (:meth:`~crowdagg.data.annotations.AnnotationSet.with_tasks`;
        ``data`` itself when there are none), and the features (n_tasks,
        ...) float32, row ``t`` for task ``t`` (the file's array itself when
        its order is already that).

    Raises
    ------
    UsageError
        Features without ids.
    DataError
        Answers for tasks that have no features (the first few named, and
        how many).
    """
    import pandas as pd

    if features.ids is None:
        raise UsageError(f"features {features.source} have no task ids, so their rows cannot be matched to the "
                         "answers' tasks: give --tasks (one id per line, line i naming row i), or use an .npz with "
                         "'ids' or a table with an id column")
    index = pd.Index(features.ids)
    names = data.task_names
    rows = index.get_indexer(names)
    missing = np.flatnonzero(rows < 0)
    if missing.size:
        shown = ", ".join(repr(names[i]) for i in missing[:NAMED])
        more = f" and {missing.size - NAMED:,} more" if missing.size > NAMED else ""
        raise DataError(f"{missing.size:,} of the {data.n_tasks:,} answered tasks have no row in features "
                        f"{features.source}: {shown}{more}")
    extra = np.ones(features.n_rows, dtype=bool)
    extra[rows] = False
    extra_rows = np.flatnonzero(extra)
    if extra_rows.size:
        data = data.with_tasks(features.ids[extra_rows])
        rows = np.concatenate([rows, extra_rows])
    if rows.size == features.n_rows and np.array_equal(rows, np.arange(rows.size)):
        return data, features.x
    memory.check(float(features.x.nbytes), f"the {features.n_rows:,} rows of features {features.source} in the "
                 "tasks' order", max_memory, advice="use fewer rows or features")
    return data, features.x[rows]


__all__ = ["Features", "FORMATS", "align", "as_array", "as_features", "by_name", "check_names", "column_names",
           "feature_format", "frame_rows", "has_own_ids", "read_features", "read_task_ids", "task_ids", "task_index"]


def as_array(features: Any) -> np.ndarray:
    """``features`` as a numpy array of any dtype and shape (what :func:`as_features` then checks): a torch tensor,
    or a list or tuple of them (rows), read detached, on the CPU, bfloat16 as float32; what numpy cannot hold (a
    sparse or quantized tensor, a tensor on the "meta" device, a ragged list) is a DataError."""
    torch = sys.modules.get("torch")  # a tensor's owner has imported torch: never imported here
    if torch is not None:
        if isinstance(features, torch.Tensor):
            return _tensor_numpy(torch, features)
        if isinstance(features, (list, tuple)) and any(isinstance(row, torch.Tensor) for row in features):
            # numpy would call each tensor's __array__: torch's RuntimeError for one that requires grad, its
            # TypeError for bfloat16 or the meta device
            features = [_tensor_numpy(torch, row) if isinstance(row, torch.Tensor) else row for row in features]
    if isinstance(features, np.ma.MaskedArray) and features.ndim and np.ma.getmaskarray(features).any():
        # np.asarray drops the mask: the values under it would be read as features
        where = np.argwhere(np.ma.getmaskarray(features))[0]
        i = int(where[0])
        j = int(np.ravel_multi_index(tuple(where[1:]), features.shape[1:])) if features.ndim > 1 else 0
        raise DataError(f"features: row {i}, feature {j} is masked ({int(np.ma.count_masked(features)):,} values "
                        "are): fill them (np.ma.filled) or drop their rows")
    try:
        x = np.asarray(features)
    except (TypeError, ValueError, RuntimeError) as exc:  # ragged lists; a tensor deeper in nested lists
        raise DataError(f"features must be a numeric array of shape (n_tasks, d) or (n_tasks, C, H, W): {exc}"
                        ) from None
    pd = sys.modules.get("pandas")  # a DataFrame's owner has imported pandas
    if x.dtype == object and pd is not None and isinstance(features, pd.DataFrame):
        # columns of several dtypes (float, int, bool, nullable): numbers, to numpy an object array
        from pandas.api.types import is_bool_dtype, is_numeric_dtype

        for name, dtype in features.dtypes.items():
            if not (is_numeric_dtype(dtype) or is_bool_dtype(dtype)):
                raise DataError(f"features: column {name!r} is not numeric ({dtype})")
        x = features.to_numpy(dtype=np.float64, na_value=np.nan)  # a missing value: NaN, refused by row
    return x


def as_features(features: Any) -> np.ndarray:
    """``features`` (an array, a list, a DataFrame, a torch tensor) as a writable float32 numpy array of shape
    (n, d) or (n, C, H, W), of no negative stride (torch.as_tensor takes it as it is); anything else, rows of no
    features, and values beyond float32's range are refused."""
    x = as_array(features)
    if x.dtype.kind not in "biuf" or x.ndim not in (2, 4):
        raise DataError(f"features must be a numeric array of shape (n_tasks, d) or (n_tasks, C, H, W), got "
                        f"shape {x.shape} of {x.dtype}")
    if x.shape[0] and int(np.prod(x.shape[1:])) == 0:
        raise DataError(f"features have rows of no features (shape {x.shape})")
    with np.errstate(over="ignore", invalid="ignore"):
        x32 = x.astype(np.float32, copy=False)
    if (x32 is not x or not x32.flags.writeable) and x.size:
        flat, flat32 = x.reshape(x.shape[0], -1), x32.reshape(x.shape[0], -1)
        over = np.isfinite(flat) & ~np.isfinite(flat32) if x.dtype.kind == "f" else np.zeros(flat.shape, bool)
        if over.any():
            i, j = (int(v[0]) for v in np.nonzero(over))
            raise DataError(f"features: row {i}, feature {j} is {float(flat[i, j]):g}, beyond float32's range (±3.4e38)")
        if not x32.flags.writeable:  # a read-only view (a DataFrame's, a memory map): torch wants to own it
            x32 = x32.copy()
    if any(s < 0 for s in x32.strides):  # a reversed view (x[::-1], np.flip): torch takes no negative strides
        x32 = x32.copy()
    return x32


def _tensor_numpy(torch: Any, tensor: Any) -> np.ndarray:
    """A torch tensor's values as numpy (detached, on the CPU; bfloat16 as float32); one numpy cannot hold, or a
    tensor of no values (the "meta" device), is a DataError."""
    if tensor.device.type == "meta":  # shapes only: .cpu() raises NotImplementedError
        raise DataError(f"features: a torch tensor on the 'meta' device holds no values (shape {tuple(tensor.shape)})")
    try:
        tensor = tensor.detach().cpu()
        if tensor.dtype == torch.bfloat16:  # no numpy dtype: float32 holds every bfloat16 exactly
            tensor = tensor.float()
        return tensor.numpy()
    except (TypeError, RuntimeError) as exc:  # sparse, quantized, ...: numpy cannot hold it
        raise DataError(f"features: a torch tensor ({tensor.dtype}, {tensor.layout}) numpy cannot hold: "
                        f"{exc}") from None


def column_names(features: Any) -> tuple[str, ...] | None:
    """The feature names a pandas DataFrame carries (its columns, as text), None for anything else.

    A trainer keeps them in the model (:attr:`crowdagg.learning.model.TrainedModel.feature_names`) so that
    prediction matches columns by name (:func:`by_name`), not by position.  Columns named twice are refused:
    they could not be told apart.
    """
    pd = sys.modules.get("pandas")  # a DataFrame's owner has imported pandas
    if pd is None or not isinstance(features, pd.DataFrame):
        return None
    names = tuple(str(c) for c in features.columns)
    return check_names(names, "features")


def task_index(features: Any) -> Any:
    """A DataFrame's index when it names tasks (a named index, or one that is not of integers); None for
    anything else and for an unnamed integer index (row numbers: 0, 1, ..., or what filtering left of them)."""
    pd = sys.modules.get("pandas")  # a DataFrame's owner has imported pandas
    if pd is None or not isinstance(features, pd.DataFrame):
        return None
    index = features.index
    if index.nlevels > 1:  # its entries are tuples: no task matched one, and every task was said missing
        raise DataError(f"features: the DataFrame's index has {index.nlevels} levels; "
                        "index the rows by task, one level (set_index), or reset_index() to give them in the tasks' order")
    if index.name is None and pd.api.types.is_integer_dtype(index.dtype):
        return None
    return index


def task_ids(values: Any, what: str, where: str) -> np.ndarray:
    """The task id of each feature row given in the library (``crowdagg.train``'s ``tasks``, a DataFrame's index)
    as text, stripped as the answers' task names are: an object array (n,) of str.

    A text, a set or a mapping (no row order), a scalar or an array of more than one dimension is a
    :class:`~crowdagg.errors.UsageError`; a missing id (None, NaN), a blank one or one naming two rows a
    :class:`~crowdagg.errors.DataError` naming its row (``what`` and ``where`` name the source, as a file's
    checks name the file).
    """
    from collections.abc import Iterable, Mapping, Set

    if isinstance(values, (str, bytes, Set, Mapping)) or not isinstance(values, Iterable):
        raise UsageError(f"{what} must be a sequence of task ids, one per feature row in the rows' order, got "
                         f"{type(values).__name__}")
    listed = list(values)
    try:
        raw = np.asarray(listed, dtype=object)
    except ValueError:  # numpy's "setting an array element with a sequence": rows of ids
        raw = np.empty(0, dtype=object).reshape(0, 0)
    if raw.ndim != 1:
        raise UsageError(f"{what} must be a sequence of task ids, one per feature row: got rows of "
                         f"{repr(listed[0])[:80]}")
    import pandas as pd

    missing = np.flatnonzero(pd.isna(raw))
    if missing.size:
        raise DataError(f"{what} {where}: row {int(missing[0])} has no task id ({raw[missing[0]]!r})")
    ids = np.array([str(v).strip() for v in listed], dtype=object)
    _check_ids(ids, where, "row", first=0, what=what)
    return ids


def frame_rows(features: Any, task_names: np.ndarray) -> np.ndarray | None:
    """The rows of a DataFrame of features in the order of ``task_names``, matched by its index; None (rows taken
    in order) for anything else, for a DataFrame already in that order, and for one whose index is an unnamed
    integer index (the default 0, 1, ..., or what filtering or sorting rows leaves of it: row numbers, not tasks).

    A DataFrame indexed by task (``pd.read_csv(...).set_index("task")``:
    a named index, or one of text) was fed by position, so a table sorted
    otherwise than the answers trained each task on another task's
    features without a word.  Its index is compared as text (task names
    are text).

    Raises
    ------
    DataError
        A task the index does not name (the first few, and how many), or an index naming a task twice.
    """
    index = task_index(features)
    if index is None:
        return None
    import pandas as pd

    ids = pd.Index([str(v) for v in index.tolist()])
    if not ids.is_unique:
        raise DataError(f"features: the DataFrame's index names task {ids[ids.duplicated()][0]!r} twice; index the "
                        "rows by task, one row each")
    rows = ids.get_indexer(pd.Index(task_names))
    missing = np.flatnonzero(rows < 0)
    if missing.size:
        shown = ", ".join(repr(task_names[i]) for i in missing[:NAMED])
        more = f" and {missing.size - NAMED:,} more" if missing.size > NAMED else ""
        raise DataError(f"features: the DataFrame's index (its rows' tasks) has no row for {missing.size:,} of the "
                        f"{len(task_names):,} tasks: {shown}{more}; index it by task, or reset_index() to give the "
                        "rows in the tasks' order")
    return None if np.array_equal(rows, np.arange(rows.size)) else rows


def check_names(names: Sequence[Any], source: str) -> tuple[str, ...]:
    """``names`` as a tuple of text, each once (a DataError names the first repeated one)."""
    names = tuple(str(n) for n in names)
    seen: set[str] = set()
    for j, name in enumerate(names):
        if name in seen:
            raise DataError(f"{source}: the column {name!r} appears twice (columns {names.index(name) + 1} and "
                            f"{j + 1}); give each feature its own name")
        seen.add(name)
    return names


def by_name(x: np.ndarray, columns: Sequence[str] | None, expected: Sequence[str] | None,
            source: str = "features") -> np.ndarray:
    """The columns of ``x`` (n, d) in the order of ``expected`` (the names a model was trained on), matched by name.

    By position (``x`` itself) when either side has no names: a model
    trained on an array, or features from an array file (the caller says
    so).  Otherwise the names must be the same set: a name the model
    needs that the features lack, or one it does not know, is refused,
    naming them.

    Raises
    ------
    DataError
        The names do not match.
    """
    if expected is None or columns is None:
        return x
    columns, expected = tuple(columns), tuple(expected)
    if columns == expected:
        return x
    have = set(columns)
    missing = [n for n in expected if n not in have]
    known = set(expected)
    unknown = [n for n in columns if n not in known]
    if missing or unknown:
        parts = []
        if missing:
            parts.append(f"{len(missing):,} the model was trained on are missing: {_listed(missing, NAMED)}")
        if unknown:
            parts.append(f"{len(unknown):,} the model does not know: {_listed(unknown, NAMED)}")
        raise DataError(f"{source}: the columns do not match the features the model was trained on by name ("
                        + "; ".join(parts) + "); the model's are " + _listed(list(expected), NAMED))
    index = {name: j for j, name in enumerate(columns)}
    return np.ascontiguousarray(x[:, [index[name] for name in expected]])
