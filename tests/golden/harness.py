"""Golden-file harness for the input readers: run a recorded case, digest a real dataset.

The goldens under ``tests/golden`` were recorded from the readers of commit
5bc0f43 (pandas-based ``crowdagg/io.py`` + ``crowdagg/data.py``) by
``tests/make_golden.py``; ``tests/test_ingest_golden.py`` replays them.

Every function here takes the reader entry points as arguments (default:
``crowdagg.io.read.load_annotations`` / ``crowdagg.io.read.read_task_labels``), so any
other reader with the same signature can be checked against the same
goldens::

    from tests.golden.harness import load_cases, run_case
    for case in load_cases():
        assert run_case(case, load_annotations=my_reader) == case["outcome"], case["name"]

Outcomes are plain JSON values:

* an error: ``{"error": type name, "message": str(exc), "warnings": [...]}``
  (the warnings issued before the error, in order);
* ``load_annotations``: the codes, names, classes, ``n_duplicates``,
  ``duplicates``, the dtypes of the code arrays and the warnings;
* ``read_task_labels``: ``{"items": [[task, label], ...], "warnings": [...]}``.

Paths inside messages are replaced by placeholders (``<inputs>``, ``<tmp>``,
``<datasets>``) so the goldens do not depend on where the checkout is.
"""

from __future__ import annotations

import csv
import functools
import gzip
import hashlib
import io
import json
import re
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

GOLDEN = Path(__file__).resolve().parent
INPUTS = GOLDEN / "inputs"
CASES = GOLDEN / "cases"
DATASETS_GOLDEN = GOLDEN / "datasets.json"

#: Formats each real dataset's answers are converted to (see :func:`write_answers`).
DATASET_FORMATS = ("csv", "tsv", "json", "jsonl", "jsonl_numbers", "json_mapping", "csv.gz")
#: Formats each real dataset's truth file is converted to (see :func:`write_truth`).
TRUTH_FORMATS = ("csv", "jsonl")

Reader = Callable[..., Any]


# --------------------------------------------------------------------------- running
def _readers(load_annotations: Reader | None, read_task_labels: Reader | None) -> tuple[Reader, Reader]:
    if load_annotations is None or read_task_labels is None:
        from crowdagg.io import read as cio

        load_annotations = load_annotations or cio.load_annotations
        read_task_labels = read_task_labels or cio.read_task_labels
    return load_annotations, read_task_labels


def _normalise(text: str, paths: dict[str, str]) -> str:
    # Longest path first, so a folder inside another is replaced whole.
    for path in sorted(paths, key=len, reverse=True):
        text = text.replace(path, paths[path])
    return text


def _name_list(values: Any) -> list[Any]:
    """Names as JSON values; a non-str name is recorded so that it never equals a str."""
    return [v if isinstance(v, str) else {"non_str": type(v).__name__, "repr": repr(v)} for v in list(values)]


def _warning_text(w: warnings.WarningMessage) -> str:
    from crowdagg.errors import CrowdaggWarning

    text = str(w.message)
    return text if issubclass(w.category, CrowdaggWarning) else f"{w.category.__name__}: {text}"


def call(fn: Callable[[], Any], paths: dict[str, str]) -> tuple[Any, dict[str, Any] | None, list[str]]:
    """``fn()`` -> (result or None, error outcome or None, warning messages), paths normalised."""
    error = None
    result = None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result = fn()
        except Exception as exc:  # any exception is an outcome; its type is recorded
            error = {"error": type(exc).__name__, "message": _normalise(str(exc), paths)}
    messages = [_normalise(_warning_text(w), paths) for w in caught]
    return result, error, messages


def annotation_outcome(data: Any) -> dict[str, Any]:
    """An AnnotationSet as JSON values (no warnings)."""
    return {
        "task": np.asarray(data.task).tolist(),
        "worker": np.asarray(data.worker).tolist(),
        "label": np.asarray(data.label).tolist(),
        "task_names": _name_list(data.task_names),
        "worker_names": _name_list(data.worker_names),
        "classes": _name_list(data.classes),
        "n_duplicates": int(data.n_duplicates),
        "duplicates": data.duplicates,
        "dtypes": {k: str(np.asarray(getattr(data, k)).dtype) for k in ("task", "worker", "label")},
    }


def run_case(
    case: dict[str, Any],
    inputs_dir: Path = INPUTS,
    *,
    load_annotations: Reader | None = None,
    read_task_labels: Reader | None = None,
) -> dict[str, Any]:
    """Run one recorded case and return its outcome (compare with ``case["outcome"]``).

    ``case`` holds ``func`` (``load_annotations`` or ``read_task_labels``),
    ``input`` (a file name in ``inputs_dir``), ``source`` (``path``: the
    path as a str; ``stream``: an unnamed binary stream of the file's bytes)
    and ``kwargs``.
    """
    load, truth = _readers(load_annotations, read_task_labels)
    path = Path(inputs_dir) / case["input"]
    if case["source"] == "stream":
        source: Any = io.BytesIO(path.read_bytes())
    elif case["source"] == "path":
        source = str(path)
    else:  # pragma: no cover - a malformed case file
        raise ValueError(f"unknown source kind {case['source']!r}")
    fn = load if case["func"] == "load_annotations" else truth
    kwargs = dict(case["kwargs"])
    result, error, messages = call(lambda: fn(source, **kwargs), {str(Path(inputs_dir)): "<inputs>"})
    if error is not None:
        return {**error, "warnings": messages}
    if case["func"] == "load_annotations":
        return {**annotation_outcome(result), "warnings": messages}
    return {"items": [[k, v] for k, v in result.items()], "warnings": messages}


def load_cases(cases_dir: Path = CASES) -> list[dict[str, Any]]:
    """Every recorded case, by name."""
    return [json.loads(p.read_text(encoding="utf-8")) for p in sorted(Path(cases_dir).glob("*.json"))]


# --------------------------------------------------------------------------- real datasets
def read_rows(path: Path) -> list[list[str]]:
    """Data rows of a uniform ``labels.csv``/``truth.csv`` (header dropped), as str, in order."""
    return [list(r) for r in _read_rows(str(path))]


@functools.lru_cache(maxsize=4)
def _read_rows(path: str) -> tuple[tuple[str, ...], ...]:
    with open(path, encoding="utf-8", newline="") as fh:
        rows = [tuple(r) for r in csv.reader(fh)]
    return tuple(rows[1:])


def _csv_bytes(header: list[str], rows: list[list[str]], delimiter: str = ",") -> bytes:
    buf = io.StringIO()
    writer = csv.writer(buf, delimiter=delimiter, lineterminator="\n", quoting=csv.QUOTE_MINIMAL)
    writer.writerow(header)
    writer.writerows(rows)
    return buf.getvalue().encode("utf-8")


def _tsv_bytes(header: list[str], rows: list[list[str]]) -> bytes:
    for row in rows:
        for cell in row:
            if re.search(r"[\t\r\n]", cell):
                raise ValueError(f"cannot write {cell!r} as TSV")
    return ("\n".join("\t".join(r) for r in [header, *rows]) + "\n").encode("utf-8")


_INT = re.compile(r"-?(?:0|[1-9][0-9]*)")


def _records(header: list[str], rows: list[list[str]], numbers: bool = False) -> Iterator[str]:
    for row in rows:
        parts = []
        for k, v in zip(header, row):
            value = v if numbers and _INT.fullmatch(v) else json.dumps(v, ensure_ascii=False)
            parts.append(f"{json.dumps(k)}: {value}")
        yield "{" + ", ".join(parts) + "}"


def _mapping_bytes(rows: list[list[str]]) -> bytes:
    """``{task: {worker: label}}`` with tasks in order of first appearance; repeated workers kept."""
    by_task: dict[str, list[tuple[str, str]]] = {}
    for task, worker, label in rows:
        by_task.setdefault(task, []).append((worker, label))
    lines = []
    for task, answers in by_task.items():
        inner = ", ".join(
            f"{json.dumps(w, ensure_ascii=False)}: {json.dumps(y, ensure_ascii=False)}" for w, y in answers
        )
        lines.append(f"{json.dumps(task, ensure_ascii=False)}: {{{inner}}}")
    return ("{\n" + ",\n".join(lines) + "\n}\n").encode("utf-8")


def convert(header: list[str], rows: list[list[str]], fmt: str) -> tuple[str, bytes]:
    """(file extension, bytes) of ``rows`` written in ``fmt``, rows kept in order.

    ``jsonl_numbers`` writes cells that are plain integers as JSON numbers
    (``7``, not ``"7"``); ``json_mapping`` needs three columns (task, worker, label).
    """
    if fmt == "csv":
        return ".csv", _csv_bytes(header, rows)
    if fmt == "csv.gz":
        return ".csv.gz", gzip.compress(_csv_bytes(header, rows), compresslevel=6, mtime=0)
    if fmt == "tsv":
        return ".tsv", _tsv_bytes(header, rows)
    if fmt == "json":
        return ".json", ("[\n" + ",\n".join(_records(header, rows)) + "\n]\n").encode("utf-8")
    if fmt == "jsonl":
        return ".jsonl", ("\n".join(_records(header, rows)) + "\n").encode("utf-8")
    if fmt == "jsonl_numbers":
        return ".jsonl", ("\n".join(_records(header, rows, numbers=True)) + "\n").encode("utf-8")
    if fmt == "json_mapping":
        return ".json", _mapping_bytes(rows)
    raise ValueError(f"unknown format {fmt!r}")


def _digest(parts: list[bytes]) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(len(part).to_bytes(8, "little"))
        h.update(part)
    return h.hexdigest()


def _joined(names: Any) -> bytes:
    return "\x00".join(str(n) for n in list(names)).encode("utf-8")


def annotation_digest(data: Any) -> dict[str, Any]:
    """sha256 over the codes (as little-endian int64), the names and classes (joined by NUL), n_duplicates."""
    parts = [
        np.ascontiguousarray(np.asarray(getattr(data, k)), dtype="<i8").tobytes() for k in ("task", "worker", "label")
    ]
    parts += [_joined(data.task_names), _joined(data.worker_names), _joined(data.classes)]
    parts.append(str(int(data.n_duplicates)).encode())
    return {
        "digest": _digest(parts),
        "n_answers": int(len(data.task)),
        "n_tasks": int(len(data.task_names)),
        "n_workers": int(len(data.worker_names)),
        "classes": _name_list(data.classes),
        "n_duplicates": int(data.n_duplicates),
        "dtypes": {k: str(np.asarray(getattr(data, k)).dtype) for k in ("task", "worker", "label")},
    }


def run_dataset(
    dataset_dir: Path, fmt: str, tmp_dir: Path, *, load_annotations: Reader | None = None
) -> dict[str, Any]:
    """Convert ``dataset_dir/labels.csv`` to ``fmt`` in ``tmp_dir``, read it back, digest the result."""
    load, _ = _readers(load_annotations, None)
    dataset_dir, tmp_dir = Path(dataset_dir), Path(tmp_dir)
    ext, data = convert(["task", "worker", "label"], read_rows(dataset_dir / "labels.csv"), fmt)
    path = tmp_dir / f"{dataset_dir.name}-{fmt.replace('.', '_')}{ext}"
    path.write_bytes(data)
    result, error, messages = call(lambda: load(str(path)), {str(tmp_dir): "<tmp>"})
    if error is not None:
        return {**error, "warnings": messages}
    return {**annotation_digest(result), "warnings": messages}


def run_truth(dataset_dir: Path, fmt: str, tmp_dir: Path, *, read_task_labels: Reader | None = None) -> dict[str, Any]:
    """Convert ``dataset_dir/truth.csv`` to ``fmt`` in ``tmp_dir``, read it back, digest the items."""
    _, truth = _readers(None, read_task_labels)
    dataset_dir, tmp_dir = Path(dataset_dir), Path(tmp_dir)
    ext, data = convert(["task", "label"], read_rows(dataset_dir / "truth.csv"), fmt)
    path = tmp_dir / f"{dataset_dir.name}-truth-{fmt.replace('.', '_')}{ext}"
    path.write_bytes(data)
    result, error, messages = call(lambda: truth(str(path)), {str(tmp_dir): "<tmp>"})
    if error is not None:
        return {**error, "warnings": messages}
    items = list(result.items())
    return {
        "digest": _digest([_joined(k for k, _ in items), _joined(v for _, v in items)]),
        "n_items": len(items),
        "warnings": messages,
    }


def dataset_keys(datasets_dir: Path) -> list[str]:
    """``name/labels:FMT`` and ``name/truth:FMT`` for every dataset folder with a labels.csv."""
    keys = []
    for d in sorted(p for p in Path(datasets_dir).iterdir() if (p / "labels.csv").is_file()):
        keys += [f"{d.name}/labels:{fmt}" for fmt in DATASET_FORMATS]
        if (d / "truth.csv").is_file():
            keys += [f"{d.name}/truth:{fmt}" for fmt in TRUTH_FORMATS]
    return keys


def run_dataset_key(
    datasets_dir: Path,
    key: str,
    tmp_dir: Path,
    *,
    load_annotations: Reader | None = None,
    read_task_labels: Reader | None = None,
) -> dict[str, Any]:
    """Run one :func:`dataset_keys` entry."""
    name, rest = key.split("/", 1)
    role, fmt = rest.split(":", 1)
    d = Path(datasets_dir) / name
    if role == "labels":
        return run_dataset(d, fmt, tmp_dir, load_annotations=load_annotations)
    return run_truth(d, fmt, tmp_dir, read_task_labels=read_task_labels)
