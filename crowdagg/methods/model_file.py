"""Fitted worker models that can be saved and reused (``--save-workers`` / ``--init-workers``).

A saved model is a versioned JSON document (format version 2), floats
written exactly (the shortest text that reads back as the same double)::

    {"format": "crowdagg-workers", "version": 2, "method": "ds", "smoothing": 0.0,
     "classes": ["a", "b"], "workers": ["w1", "w2"],
     "class_counts": [61.2, 46.8],                 # Σ_tasks P(true class): the prior's statistics
     "prior": [0.567, 0.433],
     "counts": [[[40.1, 3.9], [5.2, 30.8]], ...],  # ds: expected answers [worker][true][observed]
     "confusion": [[[0.911, 0.089], [0.144, 0.856]], ...],
     "n_tasks": 108, "task_hashes": "<base64>"}

and for ``onecoin``, instead of ``counts`` and ``confusion``, one number per
worker in each of ``correct`` (expected correct answers), ``answers``
(answers) and ``accuracy``.

**The counts are the model; the probabilities are what they say.** The
counts are the sufficient statistics the fitted parameters were estimated
from (the expected counts of the E-step before the last M-step, a warm
start's pseudo-counts included), ``smoothing`` the fit's; ``prior``,
``confusion`` and ``accuracy`` are that M-step's result (the fitted
parameters, as ``--workers`` shows them), and a file in which they do not
follow from the counts within :data:`TOLERANCE` is refused: there is one
reading of a model file, never two.

**A warm start adds the saved counts as prior pseudo-counts** in every
M-step of the new fit, which starts from the new batch's own soft majority
vote: a saved model is evidence, not certainty, and batch 1 then batch 2
approaches one fit on both batches (the posteriors of batch 1's tasks stay
as batch 1's fit left them).  The rule assumes the batches share no task: a
task counted twice counts its answers twice, so the model keeps a 64-bit
SipHash-2-4 of each task's name (``task_hashes``: sorted, little-endian,
base64; 8 bytes a task) and a warm start on tasks it has seen warns with
their number.  Classes are matched by name; a class of the data the model
lacks is an error, a class of the model the data lacks is left out with a
warning.  Workers are matched by name: a worker absent from the model
starts with no pseudo-counts, and a worker of the model absent from the data
is carried into the model the warm fit saves, so batch 3 knows batch 1's
workers.  A ``onecoin`` model can start ``ds`` (each worker's correct and
wrong answers spread over the true classes by the model's class counts,
the wrong ones evenly over the other classes) and a ``ds`` model
``onecoin`` (the trace and the total of each worker's counts).

Version 1 files (probabilities only) are refused with a request to save
the model again: probabilities without the number of answers behind them
cannot say how much evidence they are.  ``--workers`` stays the
human-readable long table; this file is for machines.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Sequence
from itertools import chain
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import CrowdaggWarning, DataError, UsageError, param, warn

if TYPE_CHECKING:  # pragma: no cover
    from ..core.memory import MaxMemory
    from ..data.annotations import AnnotationSet
    from .result import AggregationResult

FORMAT = "crowdagg-workers"
VERSION = 2
#: Largest difference accepted between a probability and what the counts give, and of a sum from 1.
TOLERANCE = 1e-6
#: The SipHash-2-4 key of ``task_hashes`` (16 bytes).
TASK_HASH_KEY = "crowdagg-tasks-1"
#: What each method saves per worker: (counts, probabilities), and the other's fields.
SAVED = {"ds": ("counts", "confusion"), "onecoin": ("correct", "answers", "accuracy")}
_COMMON = ("format", "version", "method", "smoothing", "classes", "workers", "class_counts", "prior",
           "n_tasks", "task_hashes")
#: Bytes each number of a model costs while it is written as JSON (a float object, its text, the list slot).
_WRITE_BYTES_PER_NUMBER = 80


class WorkerModel(dict):
    """A checked worker model (what :func:`from_json` returns), arrays as numpy arrays.

    Keys: ``method``, ``smoothing``, ``classes`` and ``workers`` (lists of
    str), ``class_counts`` and ``prior`` (K,), for ds ``counts`` and
    ``confusion`` (n_workers, K, K) ``[worker, true, observed]``, for
    onecoin ``correct``, ``answers`` and ``accuracy`` (n_workers,),
    ``task_hashes`` (sorted unique uint64), ``source`` (the file's name,
    for messages).
    """


# ----------------------------------------------------------------------------- writing
def task_hashes(names: Any) -> np.ndarray:
    """Sorted unique 64-bit SipHash-2-4 of task names (UTF-8 bytes, key :data:`TASK_HASH_KEY`), uint64."""
    from pandas.util import hash_array

    values = np.asarray(names, dtype=object)
    if not len(values):
        return np.empty(0, dtype=np.uint64)
    return np.unique(hash_array(values, encoding="utf8", hash_key=TASK_HASH_KEY, categorize=False))


def to_json(result: AggregationResult) -> bytes:
    """The worker model of a fitted ``ds``/``onecoin`` result as JSON bytes (exact floats).

    A warm-started result saves the total evidence: its counts include the
    model it started from, and that model's workers absent from the data
    are carried over (their probabilities recomputed from their counts).
    """
    from ..core import memory

    if result.method not in SAVED or not result.counts:
        raise UsageError(
            f"method {result.method!r} learns no reusable worker model; {param('save_workers')} works with "
            + ", ".join(SAVED)
        )
    data, method, k = result.data, result.method, result.data.n_classes
    smoothing = float(result.counts["smoothing"])
    workers = data.workers.tolist()
    stats = {name: np.asarray(result.counts[name]) for name in _count_fields(method)}
    params = {SAVED[method][-1]: np.asarray(result.worker_params["accuracy" if method == "onecoin" else "confusion"])}
    hashes = task_hashes(data.task_names)
    model = result.init_model
    if model is not None:
        hashes = np.union1d(hashes, model["task_hashes"])
        rows = np.flatnonzero(_lookup(model["workers"], workers) < 0)  # the model's workers absent from the data
        if rows.size:
            memory.check(8.0 * 3 * rows.size * k * k, f"{rows.size:,} workers of the worker model × {k:,}² classes",
                         result.max_memory)
            carried = converted_counts(model, list(data.classes), method, rows)
            workers += [model["workers"][i] for i in rows]
            stats = {name: np.concatenate([stats[name], carried[name]]) for name in stats}
            more = m_step_parameters(method, stats, smoothing, k, start=len(workers) - rows.size)
            params = {name: np.concatenate([params[name], more[name]]) for name in params}
    n_numbers = 2 * (len(workers) * (k * k if method == "ds" else 3) + k)
    memory.check(_WRITE_BYTES_PER_NUMBER * n_numbers + 11.0 * hashes.size,
                 f"writing a worker model of {len(workers):,} workers × {k:,} classes", result.max_memory)
    doc: dict[str, Any] = {
        "format": FORMAT, "version": VERSION, "method": method, "smoothing": smoothing,
        "classes": list(data.classes), "workers": workers,
        "class_counts": np.asarray(result.counts["class_counts"]).tolist(), "prior": result.prior.tolist(),
    }
    for name in _count_fields(method):
        doc[name] = stats[name].tolist()
    doc.update({name: value.tolist() for name, value in params.items()})
    doc["n_tasks"] = int(hashes.size)
    doc["task_hashes"] = base64.b64encode(hashes.astype("<u8").tobytes()).decode("ascii")
    return (json.dumps(doc, ensure_ascii=False, allow_nan=False) + "\n").encode("utf-8")


def _count_fields(method: str) -> tuple[str, ...]:
    return SAVED[method][:-1]


def m_step_parameters(method: str, stats: dict[str, np.ndarray], smoothing: float, k: int,
                      start: int = 0) -> dict[str, np.ndarray]:
    """The worker probabilities the fit's M-step gives for ``stats`` (rows ``start:``), in the file's layout."""
    from .base import full_m_step, one_coin_accuracy

    if method == "ds":
        counts = stats["counts"][start:]
        _, conf_ot = full_m_step(counts.transpose(0, 2, 1), np.zeros(k), smoothing)
        return {"confusion": np.ascontiguousarray(conf_ot.transpose(0, 2, 1))}
    return {"accuracy": one_coin_accuracy(stats["correct"][start:], stats["answers"][start:], smoothing, k)}


# ----------------------------------------------------------------------------- reading
def from_json(text: bytes | str, display: str = "<workers>", max_memory: MaxMemory = None) -> WorkerModel:
    """A saved model, checked: its JSON strictly (no repeated key, no NaN), then every field.

    What parsing will allocate is estimated from the text first and
    refused above ``max_memory`` (:func:`crowdagg.core.memory.json_parse_bytes`).
    """
    from ..core import memory

    memory.check(memory.json_parse_bytes(text), f"parsing the {memory.human(len(text))} worker model {display}",
                 max_memory, advice="check that this is a worker model saved by --save-workers")

    def unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        obj = dict(pairs)
        if len(obj) != len(pairs):
            seen: set[str] = set()
            dup = next(key for key, _ in pairs if key in seen or seen.add(key))  # type: ignore[func-returns-value]
            raise DataError(f"{display}: the key {json.dumps(dup)} appears twice in one object (which one counts?)")
        return obj

    try:
        doc = json.loads(text, parse_constant=_Literal, object_pairs_hook=unique_keys)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        if isinstance(exc, DataError):
            raise
        raise DataError(f"{display}: not a crowdagg worker model (not JSON: {exc})") from None
    return from_document(doc, display)


def from_document(doc: Any, display: str = "<workers>") -> WorkerModel:
    """:func:`from_json` of an already parsed document: every field checked, errors naming the field."""
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise DataError(f"{display}: not a crowdagg worker model (written by --save-workers)")
    version = doc.get("version")
    if type(version) is int and version == 1:
        raise DataError(
            f"{display}: a version 1 worker model holds probabilities only, not the counts a warm start adds "
            f"(version {VERSION}); fit the first batch again with this crowdagg and save it "
            f"({param('save_workers')})"
        )
    if type(version) is not int or version != VERSION:
        raise DataError(f"{display}: worker model version {_describe(version)}; this crowdagg reads version {VERSION}")
    method = doc.get("method")
    if type(method) is not str or method not in SAVED:
        shown = json.dumps(method, ensure_ascii=False) if isinstance(method, str) else _describe(method)
        raise DataError(f"{display}: \"method\" is {shown}; a worker model is one of "
                        + ", ".join(SAVED))
    allowed = (*_COMMON, *SAVED[method])
    missing = [key for key in allowed if key not in doc]
    if missing:
        raise DataError(f"{display}: the {method} worker model lacks {', '.join(json.dumps(m) for m in missing)}")
    unknown = [key for key in doc if key not in allowed]
    if unknown:
        raise DataError(f"{display}: unknown field {json.dumps(unknown[0])} in a {method} worker model (it has: "
                        + ", ".join(allowed) + ")")
    classes = _names(doc, "classes", display)
    workers = _names(doc, "workers", display)
    if not classes:
        raise DataError(f"{display}: \"classes\" is empty")
    smoothing = _numbers(doc, "smoothing", (), display)
    if smoothing < 0:
        raise DataError(f"{display}: \"smoothing\" is {float(smoothing)!r}, not a pseudo-count >= 0")
    k, n = len(classes), len(workers)
    model = WorkerModel(method=method, smoothing=float(smoothing), classes=classes, workers=workers,
                        source=display)
    model["class_counts"] = _counts(doc, "class_counts", (k,), display)
    model["prior"] = _probabilities(doc, "prior", (k,), display, sums=True)
    if method == "ds":
        model["counts"] = _counts(doc, "counts", (n, k, k), display)
        model["confusion"] = _probabilities(doc, "confusion", (n, k, k), display, sums=True)
    else:
        model["correct"] = _counts(doc, "correct", (n,), display)
        model["answers"] = _counts(doc, "answers", (n,), display)
        over = np.flatnonzero(model["correct"] > model["answers"] * (1 + TOLERANCE) + TOLERANCE)
        if over.size:
            i = int(over[0])
            raise DataError(f"{display}: correct[{i}] is {float(model['correct'][i])!r}, more than answers[{i}] "
                            f"= {float(model['answers'][i])!r}")
        model["accuracy"] = _probabilities(doc, "accuracy", (n,), display)
    _check_follows_from_counts(model, display)
    model["task_hashes"] = _task_hashes(doc, display)
    return model


class _Literal:
    """``NaN``, ``Infinity`` or ``-Infinity`` in the text (Python's json reads them; JSON does not allow them).

    Kept as this marker, not a float, so the field check names where it is.
    """

    def __init__(self, text: str) -> None:
        self.text = text


def _describe(value: Any) -> str:
    """A JSON value as an error message shows it: its text, and its kind when that is the problem."""
    if isinstance(value, _Literal):
        return f"{value.text} (which JSON does not allow)"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"{json.dumps(value)} (a boolean)"
    if isinstance(value, str):
        text = json.dumps(value, ensure_ascii=False)
        return f"{text if len(text) <= 40 else text[:36] + '...' + chr(34)} (a string)"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, (int, float)):
        return repr(value)
    return f"a {type(value).__name__}"  # a document built in Python: a numpy array, a tuple ...


def _path(key: str, flat_index: int, shape: Sequence[int]) -> str:
    return key + "".join(f"[{i}]" for i in np.unravel_index(flat_index, tuple(shape))) if len(shape) else key


def _names(doc: dict[str, Any], key: str, display: str) -> list[str]:
    """A list of distinct, non-blank, valid-text names."""
    names = doc[key]
    if not isinstance(names, list):
        raise DataError(f"{display}: \"{key}\" is {_describe(names)}, not a list of names")
    if not all(type(v) is str for v in names):
        i = next(i for i, v in enumerate(names) if type(v) is not str)
        raise DataError(f"{display}: {key}[{i}] is {_describe(names[i])}, not a name (a string)")
    for i, name in enumerate(names):
        if not name.strip():
            raise DataError(f"{display}: {key}[{i}] is blank")
        if name != name.strip():  # the data's names are stripped: this one could never match
            raise DataError(f"{display}: {key}[{i}] {json.dumps(name, ensure_ascii=False)} has surrounding "
                            "whitespace")
        try:
            name.encode("utf-8")
        except UnicodeEncodeError:
            raise DataError(f"{display}: {key}[{i}] {name!r} is not valid text") from None
    if len(set(names)) != len(names):
        seen: set[str] = set()
        dup = next(v for v in names if v in seen or seen.add(v))  # type: ignore[func-returns-value]
        raise DataError(f"{display}: \"{key}\" lists {json.dumps(dup, ensure_ascii=False)} twice")
    return names


#: What each axis of a numeric field runs over (for "has 3 entries, not 2 (one per class)").
_PER = {"class_counts": ("class",), "prior": ("class",), "counts": ("worker", "true class", "observed class"),
        "confusion": ("worker", "true class", "observed class")}


def _numbers(doc: dict[str, Any], key: str, shape: tuple[int, ...], display: str) -> np.ndarray:
    """A field that must be numbers nested to ``shape``: float64 array, or an error naming the first bad entry.

    ``shape`` () is one number.  Accepted: JSON numbers (integers or
    decimals); a string, a boolean, null, a list or an object where a
    number belongs is an error, as is a number too large for a double.
    Nesting is checked level by level on whole lists (no Python frame per
    number).
    """
    per = _PER.get(key, ("worker",))
    items = [doc[key]]
    for depth, size in enumerate(shape):
        if not all(type(x) is list for x in items):
            i = next(i for i, x in enumerate(items) if type(x) is not list)
            raise DataError(f"{display}: {_path(key, i, shape[:depth])} is {_describe(items[i])}, not a list")
        if any(len(x) != size for x in items):
            i = next(i for i, x in enumerate(items) if len(x) != size)
            raise DataError(f"{display}: {_path(key, i, shape[:depth])} has {len(items[i])} entries, not {size} "
                            f"(one per {per[depth]})")
        items = list(chain.from_iterable(items))
    if not {type(v) for v in items} <= {float, int}:
        i = next(i for i, v in enumerate(items) if type(v) not in (float, int))
        raise DataError(f"{display}: {_path(key, i, shape)} is {_describe(items[i])}, not a number")
    try:
        values = np.array(items, dtype=np.float64)
    except OverflowError:  # an integer beyond any double
        values = np.array([float(v) if abs(v) < 2**1023 else np.inf for v in items], dtype=np.float64)
    bad = np.flatnonzero(~np.isfinite(values))
    if bad.size:
        i = int(bad[0])
        raise DataError(f"{display}: {_path(key, i, shape)} is too large to be a number")
    return values.reshape(shape)


def _counts(doc: dict[str, Any], key: str, shape: tuple[int, ...], display: str) -> np.ndarray:
    values = _numbers(doc, key, shape, display)
    bad = np.flatnonzero(values.reshape(-1) < 0)
    if bad.size:
        i = int(bad[0])
        raise DataError(f"{display}: {_path(key, i, shape)} is {float(values.reshape(-1)[i])!r}, not a count (>= 0)")
    return values


def _probabilities(doc: dict[str, Any], key: str, shape: tuple[int, ...], display: str,
                   sums: bool = False) -> np.ndarray:
    values = _numbers(doc, key, shape, display)
    flat = values.reshape(-1)
    bad = np.flatnonzero((flat < 0) | (flat > 1))
    if bad.size:
        i = int(bad[0])
        raise DataError(f"{display}: {_path(key, i, shape)} is {float(flat[i])!r}, not a probability (0 to 1)")
    if sums and values.size:
        total = values.sum(axis=-1)
        off = np.flatnonzero(np.abs(total.reshape(-1) - 1.0) > TOLERANCE)
        if off.size:
            i = int(off[0])
            raise DataError(f"{display}: {_path(key, i, shape[:-1])} sums to {float(total.reshape(-1)[i])!r}, not 1 "
                            f"(within {TOLERANCE:g})")
    return values


def _check_follows_from_counts(model: WorkerModel, display: str) -> None:
    """The probabilities are the M-step of the counts (one reading of the file), within :data:`TOLERANCE`."""
    from .base import prior_m_step

    k, method, s = len(model["classes"]), model["method"], model["smoothing"]
    pairs = [("prior", "class_counts", model["prior"], prior_m_step(model["class_counts"], s))]
    count_key = "counts" if method == "ds" else "correct\" and \"answers"
    for key, value in m_step_parameters(method, model, s, k).items():
        pairs.append((key, count_key, model[key], value))
    for key, counts, given, want in pairs:
        off = np.flatnonzero(np.abs(given - want).reshape(-1) > TOLERANCE)
        if off.size:
            i = int(off[0])
            raise DataError(
                f"{display}: {_path(key, i, given.shape)} is {float(given.reshape(-1)[i])!r} but \"{counts}\" give "
                f"{float(want.reshape(-1)[i])!r} (smoothing {s:g}): the counts are the model, the probabilities follow "
                "from them; save the model again rather than editing it"
            )


def _task_hashes(doc: dict[str, Any], display: str) -> np.ndarray:
    n, text = doc["n_tasks"], doc["task_hashes"]
    if type(n) is not int or n < 0:
        raise DataError(f"{display}: \"n_tasks\" is {_describe(n)}, not a count of tasks")
    if type(text) is not str:
        raise DataError(f"{display}: \"task_hashes\" is {_describe(text)}, not base64 text")
    try:
        raw = base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError, ValueError):
        raise DataError(f"{display}: \"task_hashes\" is not base64 text") from None
    if len(raw) != 8 * n:
        raise DataError(f"{display}: \"task_hashes\" holds {len(raw) / 8:g} hashes, not n_tasks = {n}")
    hashes = np.frombuffer(raw, dtype="<u8").astype(np.uint64)
    if hashes.size > 1 and not (hashes[1:] > hashes[:-1]).all():
        raise DataError(f"{display}: \"task_hashes\" are not sorted and distinct")
    return hashes


# ----------------------------------------------------------------------------- using
def coerce(value: Any, max_memory: MaxMemory = None) -> WorkerModel:
    """A worker model from what the library was given: a checked model, a document, JSON text or bytes, a
    path to a saved file, or a fitted ds/onecoin result."""
    import os

    from .result import AggregationResult

    if isinstance(value, WorkerModel):
        return value
    if isinstance(value, dict):
        return from_document(value)
    if isinstance(value, AggregationResult):
        return from_json(to_json(value), f"the {value.method} result", max_memory)
    if isinstance(value, bytes) or (isinstance(value, str) and value.lstrip().startswith("{")):
        return from_json(value, max_memory=max_memory)
    if isinstance(value, (str, os.PathLike)):
        from ..io.read import read_bytes

        data, display = read_bytes(value, max_memory)
        return from_json(data, display, max_memory)
    raise UsageError(
        f"{param('init_workers')} must be a saved worker model (a path, its JSON, or a fitted ds/onecoin result), "
        f"got {type(value).__name__}"
    )


def _lookup(names: Sequence[str], vocabulary: Sequence[str]) -> np.ndarray:
    """Index of each of ``names`` in ``vocabulary``, -1 where absent (int64)."""
    from ..data.vocab import Vocabulary

    return Vocabulary.from_strings(vocabulary).lookup(list(names) if not isinstance(names, np.ndarray) else names)


def class_order(model: WorkerModel, classes: Sequence[str]) -> np.ndarray:
    """The model's index of each of the data's ``classes`` (an error naming the first one it lacks)."""
    index = {c: i for i, c in enumerate(model["classes"])}
    missing = [c for c in classes if c not in index]
    if missing:
        raise DataError(
            f"{model['source']}: the worker model has no class {missing[0]!r} (its classes: "
            f"{', '.join(model['classes'])})"
        )
    return np.array([index[c] for c in classes], dtype=np.int64)


def converted_counts(
    model: WorkerModel, classes: Sequence[str], method: str, rows: np.ndarray
) -> dict[str, np.ndarray]:
    """The counts of the model's workers ``rows`` in ``method``'s form and the data's ``classes`` order.

    ds: ``counts`` (len(rows), K, K) ``[worker, true, observed]``; onecoin:
    ``correct`` and ``answers`` (len(rows),).  Classes the data lacks drop
    out.  A onecoin model's workers become matrices by spreading their
    correct answers over the true classes by the model's class counts and
    their wrong ones also evenly over the other classes.  Only ``rows`` are
    expanded: memory len(rows) × K² at most.
    """
    order = class_order(model, classes)
    k_model = len(model["classes"])
    if model["method"] == "ds":
        sub = model["counts"][rows][:, order][:, :, order]
        if method == "ds":
            return {"counts": sub}
        return {"correct": np.trace(sub, axis1=1, axis2=2).copy(), "answers": sub.sum(axis=(1, 2))}
    correct, answers = model["correct"][rows], model["answers"][rows]
    if method == "onecoin" and len(order) == k_model:
        return {"correct": correct.copy(), "answers": answers.copy()}
    total = model["class_counts"].sum()
    share = model["class_counts"][order] / total if total > 0 else np.full(len(order), 1.0 / k_model)
    wrong = (answers - correct) / max(k_model - 1, 1)
    k = len(order)
    if method == "onecoin":
        return {"correct": correct * share.sum(), "answers": (correct + wrong * (k - 1)) * share.sum()}
    counts = (wrong[:, None, None] * share[None, :, None]).repeat(k, axis=2)
    idx = np.arange(k)
    counts[:, idx, idx] = correct[:, None] * share[None, :]
    return {"counts": counts}


class WarmStart:
    """What a saved model adds to a fit of ``data`` with ``method``: pseudo-counts for its workers.

    Attributes: ``class_counts`` (K,) added to the class totals;
    ``counts_ot`` (n_workers, K_observed, K_true) added to each M-step's
    expected counts (zero for workers the model does not know; a onecoin
    fit reads only their trace and total); ``known`` (n_workers,) bool;
    ``model`` the checked model.  Building it warns when the data's tasks
    were already in the model's fit and when the model has classes the data
    lacks.
    """

    def __init__(self, model: WorkerModel, data: AnnotationSet, method: str) -> None:
        classes = list(data.classes)
        order = class_order(model, classes)
        extra = [c for c in model["classes"] if c not in set(classes)]
        if extra:
            warn(CrowdaggWarning(
                f"{model['source']}: the worker model's class(es) {', '.join(map(repr, extra))} are not among the "
                f"data's classes: their counts are left out (list every class with {param('classes')} to keep them)"
            ))
        seen = np.isin(task_hashes(data.task_names), model["task_hashes"]).sum()
        if seen:
            warn(CrowdaggWarning(
                f"{seen:,} of the {data.n_tasks:,} tasks were already in the fit that saved {model['source']}: a warm "
                "start adds the saved counts as evidence from other tasks, so their answers count twice; "
                "fit the batches together instead"
            ))
        self.model = model
        self.class_counts = model["class_counts"][order].copy()
        found = _lookup(data.workers.names, model["workers"])
        self.known = found >= 0
        k = data.n_classes
        self.counts_ot = np.zeros((data.n_workers, k, k))
        rows = found[self.known]
        stats = converted_counts(model, classes, "ds" if method == "ds" else "onecoin", rows)
        if method == "ds":
            self.counts_ot[self.known] = stats["counts"].transpose(0, 2, 1)
        else:  # what a one-coin M-step reads: the trace (correct) and the total (answers)
            idx = np.arange(k)
            wrong = (stats["answers"] - stats["correct"]) / max(k * (k - 1), 1)
            known = np.flatnonzero(self.known)
            self.counts_ot[known] = wrong[:, None, None]
            self.counts_ot[known[:, None], idx, idx] = stats["correct"][:, None] / k
            if k == 1:
                self.counts_ot[known, 0, 0] = stats["answers"]

    @staticmethod
    def memory(data: AnnotationSet, model: WorkerModel) -> float:
        """Bytes it allocates beyond the fit: the pseudo-counts, and the known workers' counts taken from the
        model (three copies in the model's classes while they are reordered to the data's)."""
        return 8.0 * data.n_workers * (2 * data.n_classes**2 + 3 * len(model["classes"]) ** 2)


__all__ = ["WorkerModel", "WarmStart", "to_json", "from_json", "from_document", "coerce", "converted_counts",
           "task_hashes", "class_order", "FORMAT", "VERSION", "TOLERANCE"]
