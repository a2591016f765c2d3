"""Readers and writers: CSV, TSV, JSON, JSON Lines (gzip transparently, ``-`` = stdin/stdout).

Every cell is read as a string and kept as one: task, worker and class
names are never coerced to numbers.  Problems are raised as
:class:`~crowdagg.errors.DataError` naming the file, the line and the value.
Output files are written atomically (temporary file + rename), so a failed
run leaves nothing behind.
"""

from __future__ import annotations

import codecs
import contextlib
import gzip
import io
import json
import os
import secrets
import sys
import zlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import numpy as np

from .data import AnnotationSet, DuplicatePolicy, Locator
from .errors import DataError, UsageError

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

INPUT_FORMATS = ("csv", "tsv", "json", "jsonl")
OUTPUT_FORMATS = ("csv", "tsv", "jsonl", "json")

TASK_ALIASES = ("task", "item", "question", "task_id", "item_id", "question_id", "object", "example", "image")
WORKER_ALIASES = (
    "worker", "annotator", "rater", "performer", "labeler", "labeller", "worker_id",
    "annotator_id", "rater_id", "performer_id", "user", "user_id", "judge",
)
LABEL_ALIASES = ("label", "answer", "response", "class", "annotation", "output", "value", "category")
TRUTH_ALIASES = ("label", "truth", "gold", "true_label", "true", "ground_truth", "answer", "class", "prediction")

_EXTENSIONS = {
    ".csv": "csv", ".tsv": "tsv", ".tab": "tsv", ".txt": "csv",
    ".json": "json", ".jsonl": "jsonl", ".ndjson": "jsonl",
}


# --------------------------------------------------------------------------- raw input
EXAMPLE_PREFIX = "example:"


def example_path(spec: str, role: str = "labels") -> Path:
    """Resolve ``example:NAME`` to an embedded dataset file (``role`` = labels or truth)."""
    from .examples import EXAMPLES, path

    name = spec[len(EXAMPLE_PREFIX):]
    if name not in EXAMPLES:
        raise DataError(f"{spec}: no such embedded example; available: {', '.join(EXAMPLE_PREFIX + e for e in EXAMPLES)}")
    return path(f"{name}_{role}.csv")


def _read_source(source: str | os.PathLike[str] | IO[bytes], role: str = "labels") -> tuple[bytes, str, str]:
    """(bytes, display name, name used for format detection)."""
    if hasattr(source, "read"):
        data = source.read()  # type: ignore[union-attr]
        if isinstance(data, str):
            data = data.encode("utf-8")
        return data, getattr(source, "name", "<stream>"), ""
    name = os.fspath(source)
    if name == "-":
        return sys.stdin.buffer.read(), "<stdin>", ""
    if name.startswith(EXAMPLE_PREFIX):
        p = example_path(name, role)
        return p.read_bytes(), name, str(p)
    path = Path(name)
    if not path.exists():
        raise DataError(f"{name}: no such file")
    if path.is_dir():
        raise DataError(f"{name}: is a directory, not a file")
    try:
        return path.read_bytes(), name, name
    except OSError as exc:
        raise DataError(f"{name}: cannot read ({exc.strerror})") from None


def _decompress(data: bytes, display: str) -> bytes:
    if data[:2] == b"\x1f\x8b":
        try:
            return gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as exc:
            raise DataError(f"{display}: corrupt gzip data ({exc})") from None
    return data


def _check_text(data: bytes, display: str) -> None:
    head = data[: 1 << 16]
    nul = head.find(b"\x00")
    if nul >= 0:
        raise DataError(f"{display}: not a text file (NUL byte at offset {nul}); expected CSV, TSV, JSON or JSON Lines")
    decoder = codecs.getincrementaldecoder("utf-8")()
    try:
        decoder.decode(data[: 1 << 20], final=len(data) <= 1 << 20)
    except UnicodeDecodeError as exc:
        raise DataError(f"{display}: not UTF-8 text (invalid byte at offset {exc.start})") from None


def detect_format(data: bytes, name: str, given: str | None) -> str:
    """The input format: ``given``, else from the extension, else sniffed."""
    if given:
        fmt = given.lower()
        if fmt not in INPUT_FORMATS:
            raise UsageError(f"--input-format must be one of {', '.join(INPUT_FORMATS)}, got {given!r}")
        return fmt
    stem = name[:-3] if name.endswith(".gz") else name
    ext = Path(stem).suffix.lower()
    if ext in _EXTENSIONS:
        return _EXTENSIONS[ext]
    text = data[:4096].lstrip(b"\xef\xbb\xbf \t\r\n")
    if text[:1] == b"[":
        return "json"
    if text[:1] == b"{":
        first_line = text.split(b"\n", 1)[0].strip()
        try:
            json.loads(first_line)
            return "jsonl"
        except ValueError:
            return "json"
    first = text.split(b"\n", 1)[0]
    return "tsv" if b"\t" in first else "csv"


# --------------------------------------------------------------------------- parsing
def _json_cell(v: Any) -> str:
    if isinstance(v, str):
        return v
    if v is None:
        return ""
    return json.dumps(v, ensure_ascii=False)


def _records_frame(records: list[dict[str, Any]]) -> pd.DataFrame:
    """Records -> DataFrame of strings, one column per key seen in any record.

    Built by hand rather than with ``DataFrame.from_records``, whose type
    inference turns a missing key into the class ``"NaN"`` and the integer
    labels of such a column into ``"1.0"``; a missing key or ``null`` is a
    blank cell here, reported like a blank CSV cell.
    """
    import pandas as pd

    keys = dict.fromkeys(k for rec in records for k in rec)
    return pd.DataFrame(
        {k: np.array([_json_cell(rec.get(k)) for rec in records], dtype=object) for k in keys},
        index=pd.RangeIndex(len(records)),
    )


def _parse_delimited(data: bytes, display: str, sep: str) -> tuple[pd.DataFrame, Locator]:
    import pandas as pd

    try:
        frame = pd.read_csv(
            io.BytesIO(data), sep=sep, dtype=str, keep_default_na=False, na_filter=False,
            skip_blank_lines=False, engine="c", encoding="utf-8-sig",
        )
    except pd.errors.EmptyDataError:
        raise DataError(f"{display}: file is empty") from None
    except pd.errors.ParserError as exc:
        msg = str(exc).strip().split("\n")[-1]
        msg = msg.replace("Error tokenizing data. C error: ", "")
        raise DataError(f"{display}: malformed {'TSV' if sep == chr(9) else 'CSV'}: {msg}") from None
    except UnicodeDecodeError as exc:
        raise DataError(f"{display}: not UTF-8 text (invalid byte at offset {exc.start})") from None
    # Only a quoted field spanning lines makes rows and lines disagree.
    n_lines = data.count(b"\n") + (not data.endswith(b"\n"))
    found = _record_start_lines(data, sep) if b'"' in data and n_lines != len(frame) + 1 else None
    if found is None or len(found) != len(frame):
        return frame, Locator(display, first_line=2)
    return frame, Locator(display, lines=found)


def _record_start_lines(data: bytes, sep: str) -> np.ndarray | None:
    """First line of each data record, or None when every record is one line.

    A quoted field may span lines, and then ``row + 2`` no longer names the
    line a person should look at.
    """
    import csv

    try:
        reader = csv.reader(io.StringIO(data.decode("utf-8-sig"), newline=""), delimiter=sep)
        next(reader, None)  # header
        starts: list[int] = []
        end = reader.line_num
        for _ in reader:
            starts.append(end + 1)
            end = reader.line_num
    except (csv.Error, UnicodeDecodeError):
        return None
    if end == len(starts) + 1:
        return None
    return np.asarray(starts, dtype=np.int64)


def _parse_json(data: bytes, display: str) -> tuple[pd.DataFrame, Locator]:
    import pandas as pd

    try:
        obj = json.loads(data.decode("utf-8-sig"))
    except json.JSONDecodeError as exc:
        raise DataError(f"{display}: malformed JSON at line {exc.lineno} column {exc.colno}: {exc.msg}") from None
    if isinstance(obj, list):
        for i, rec in enumerate(obj):
            if not isinstance(rec, dict):
                raise DataError(f"{display}: record {i + 1} is a {type(rec).__name__}, expected an object with task, worker and label")
        if not obj:
            raise DataError(f"{display}: no answers (empty JSON list)")
        return _records_frame(obj), Locator(display, first_line=1, unit="record")
    if isinstance(obj, dict):
        tasks: list[str] = []
        workers: list[str] = []
        labels: list[str] = []
        for task, answers in obj.items():
            if not isinstance(answers, dict):
                raise DataError(
                    f"{display}: value of task {task!r} is a {type(answers).__name__}; expected a list of "
                    "records or a {task: {worker: label}} mapping"
                )
            for worker, label in answers.items():
                tasks.append(task)
                workers.append(worker)
                labels.append(_json_cell(label))
        frame = pd.DataFrame({"task": tasks, "worker": workers, "label": labels}, dtype=object)
        return frame, Locator(display, first_line=1, unit="answer")
    raise DataError(f"{display}: JSON top level is a {type(obj).__name__}; expected a list of records or an object")


def _parse_jsonl(data: bytes, display: str) -> tuple[pd.DataFrame, Locator]:
    records: list[dict] = []
    lines: list[int] = []
    text = data.decode("utf-8-sig")
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DataError(f"{display}: malformed JSON at line {lineno} column {exc.colno}: {exc.msg}") from None
        if not isinstance(rec, dict):
            raise DataError(f"{display}: line {lineno} is a JSON {type(rec).__name__}, expected an object")
        records.append(rec)
        lines.append(lineno)
    frame = _records_frame(records)
    return frame, Locator(display, lines=np.asarray(lines, dtype=np.int64))


def read_table(
    source: str | os.PathLike[str] | IO[bytes], *, input_format: str | None = None, role: str = "labels"
) -> tuple[pd.DataFrame, Locator, str]:
    """Parse any supported input into a DataFrame of strings; also return a Locator and the display name.

    ``source`` may be a path, ``-`` (stdin), a binary stream or
    ``example:NAME`` (an embedded dataset; ``role`` picks its labels or truth).
    """
    raw, display, name = _read_source(source, role)
    raw = _decompress(raw, display)
    if not raw.strip():
        raise DataError(f"{display}: file is empty")
    _check_text(raw, display)
    fmt = detect_format(raw, name, input_format)
    if fmt == "csv":
        frame, loc = _parse_delimited(raw, display, ",")
    elif fmt == "tsv":
        frame, loc = _parse_delimited(raw, display, "\t")
    elif fmt == "json":
        frame, loc = _parse_json(raw, display)
    else:
        frame, loc = _parse_jsonl(raw, display)
    frame.columns = [str(c) for c in frame.columns]
    return frame, loc, display


def _resolve_column(frame: pd.DataFrame, given: str | None, aliases: Sequence[str], role: str, option: str, display: str) -> str:
    cols = list(frame.columns)
    if given is not None:
        if given in cols:
            return given
        raise DataError(f"{display}: no column {given!r} (from {option}); found columns: {', '.join(map(repr, cols))}")
    lower = {c.strip().lower(): c for c in cols}
    for alias in aliases:
        if alias in lower:
            return lower[alias]
    raise DataError(
        f"{display}: no {role} column; found columns: {', '.join(map(repr, cols))} "
        f"(expected one of {', '.join(aliases[:4])}, ...; or set {option})"
    )


def _column_values(frame: pd.DataFrame, col: str, role: str, loc: Locator, display: str) -> np.ndarray:
    values = frame[col].to_numpy(dtype=object)
    blank = values == ""
    if blank.any():
        row = int(np.flatnonzero(blank)[0])
        raise DataError(f"blank {role} at {loc(row)} (column {col!r}; {int(blank.sum())} blank {role} cell(s) in all)")
    return values


def load_annotations(
    source: str | os.PathLike[str] | IO[bytes] | pd.DataFrame,
    *,
    input_format: str | None = None,
    task_col: str | None = None,
    worker_col: str | None = None,
    label_col: str | None = None,
    classes: Sequence[str] | None = None,
    duplicates: DuplicatePolicy = "keep",
) -> AnnotationSet:
    """Read answers (long format: one row per task, worker, label) into an :class:`AnnotationSet`.

    Parameters
    ----------
    source : path, ``"-"`` for stdin, a binary file object, or a DataFrame.
    input_format : ``csv``, ``tsv``, ``json`` or ``jsonl``; default from the
        extension (``.gz`` stripped), else sniffed from the content.
    task_col, worker_col, label_col : column names; default ``task``,
        ``worker``, ``label`` or a common alias (item, question, annotator,
        rater, performer, answer, response, ...).
    classes : the class set, in order; default inferred from the labels.
    duplicates : what to do with repeated (task, worker) answers: ``keep``
        all, keep the ``first`` or ``last``, or raise (``error``).
    """
    import pandas as pd

    if isinstance(source, pd.DataFrame):
        # Missing cells (NaN/None) become blank, so they are reported, not read as "nan".
        frame = source.astype(object).where(source.notna(), "").map(lambda v: v if isinstance(v, str) else str(v))
        loc = Locator("<frame>", first_line=0, unit="row")
        display = "<frame>"
    else:
        frame, loc, display = read_table(source, input_format=input_format)
    t_col = _resolve_column(frame, task_col, TASK_ALIASES, "task", "--task-col", display)
    w_col = _resolve_column(frame, worker_col, WORKER_ALIASES, "worker", "--worker-col", display)
    y_col = _resolve_column(frame, label_col, LABEL_ALIASES, "label", "--label-col", display)
    if len({t_col, w_col, y_col}) < 3:
        raise UsageError(f"task, worker and label columns must differ (got {t_col!r}, {w_col!r}, {y_col!r})")
    # Blank lines inside a CSV read as all-blank rows; drop them, keep line numbers.
    sub = frame[[t_col, w_col, y_col]]
    if len(sub):
        all_blank = (sub[t_col] == "") & (sub[w_col] == "") & (sub[y_col] == "")
        if bool(all_blank.any()):
            keep_rows = np.flatnonzero(~all_blank.to_numpy())
            sub = sub.iloc[keep_rows]
            loc = loc.subset(keep_rows)
    if len(sub) == 0:
        raise DataError(f"{display}: no answers (header only?)")
    tasks = _column_values(sub, t_col, "task", loc, display)
    workers = _column_values(sub, w_col, "worker", loc, display)
    labels = _column_values(sub, y_col, "label", loc, display)
    return AnnotationSet.from_names(
        tasks, workers, labels, classes=classes, duplicates=duplicates, locate=loc, label_col=y_col
    )


def read_task_labels(
    source: str | os.PathLike[str] | IO[bytes],
    *,
    input_format: str | None = None,
    task_col: str | None = None,
    label_col: str | None = None,
    what: str = "truth",
) -> dict[str, str]:
    """Read a ``task,label`` file (truth, gold or predictions) into {task: label}.

    A task listed twice with different labels is an error.
    """
    frame, loc, display = read_table(source, input_format=input_format, role="truth")
    t_col = _resolve_column(frame, task_col, TASK_ALIASES, "task", "--task-col", display)
    y_col = _resolve_column(frame, label_col, TRUTH_ALIASES, "label", "--label-col", display)
    if t_col == y_col:
        raise UsageError(f"{display}: task and label columns must differ")
    if len(frame) == 0:
        raise DataError(f"{display}: no rows (header only?)")
    tasks = _column_values(frame, t_col, "task", loc, display)
    labels = _column_values(frame, y_col, "label", loc, display)
    out: dict[str, str] = {}
    for i, (t, y) in enumerate(zip(tasks.tolist(), labels.tolist())):
        prev = out.setdefault(t, y)
        if prev != y:
            raise DataError(f"{display}: task {t!r} has two different {what} labels ({prev!r} and {y!r}; second at {loc(i)})")
    return out


# --------------------------------------------------------------------------- writing
def output_format(fmt: str | None, path: str | None) -> str:
    """Output format from ``--format`` or the ``-o`` file extension (default csv)."""
    if fmt:
        f = fmt.lower()
        if f not in OUTPUT_FORMATS:
            raise UsageError(f"--format must be one of {', '.join(OUTPUT_FORMATS)}, got {fmt!r}")
        return f
    if path and path != "-":
        stem = path[:-3] if path.endswith(".gz") else path
        guess = _EXTENSIONS.get(Path(stem).suffix.lower())
        if guess in OUTPUT_FORMATS:
            return guess  # type: ignore[return-value]
    return "csv"


def render_table(frame: pd.DataFrame, fmt: str) -> str:
    """Serialise rows as csv, tsv, jsonl or json text."""
    if fmt in ("csv", "tsv"):
        return frame.to_csv(index=False, sep="," if fmt == "csv" else "\t", float_format="%.6g", lineterminator="\n")
    records = frame.to_json(orient="records", lines=(fmt == "jsonl"), force_ascii=False, double_precision=6)
    if fmt == "jsonl" and records and not records.endswith("\n"):
        records += "\n"
    if fmt == "json":
        records += "\n"
    return records


@contextlib.contextmanager
def atomic_outputs(paths: Sequence[str]) -> Iterator[list[str]]:
    """Yield temporary paths next to ``paths``; rename all into place on success.

    Either every file appears or none does: on any exception the temporary
    files are removed and nothing is left behind.
    """
    temps: list[str] = []
    try:
        for p in paths:
            directory = os.path.dirname(os.path.abspath(p))
            if not os.path.isdir(directory):
                raise DataError(f"{p}: directory {directory} does not exist")
            # Exclusive create with open(): a unique name, and unlike mkstemp
            # (always 0600) the file gets the user's umask like any other output.
            tmp = os.path.join(directory, f".{os.path.basename(p)}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
            with open(tmp, "xb"):
                pass
            temps.append(tmp)
        yield temps
        for tmp, p in zip(temps, paths):
            os.replace(tmp, p)
        temps = []
    finally:
        for tmp in temps:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def write_text(text: str, path: str, *, gz: bool = False) -> None:
    """Write ``text`` to ``path`` as UTF-8, gzip-compressed when ``gz``."""
    if gz:
        with gzip.open(path, "wt", encoding="utf-8", newline="") as fh:
            fh.write(text)
    else:
        with open(path, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)
