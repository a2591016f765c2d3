"""Saved worker models: the versioned envelope every method's saved model shares.

``--save-workers`` / ``--init-workers`` (library: ``init_workers=``).  A
saved model is a versioned JSON document (format version 2), floats written
exactly (the shortest text that reads back as the same double)::

    {"format": "crowdagg-workers", "version": 2, "method": "ds", "smoothing": 0.0,
     "classes": ["a", "b"], "workers": ["w1", "w2"],
     "class_counts": [61.2, 46.8],                 # Σ_tasks P(true class): the prior's statistics
     "prior": [0.567, 0.433],
     "counts": [[[40.1, 3.9], [5.2, 30.8]], ...],  # ds's own per-worker fields ...
     "confusion": [[[0.911, 0.089], [0.144, 0.856]], ...],
     "n_tasks": 108, "task_hashes": "<base64>"}

This module owns the envelope only -- ``format``, ``version``, ``method``,
``smoothing``, ``classes``, ``workers``, ``class_counts``, ``prior``,
``n_tasks`` and ``task_hashes``, the strict JSON reading and the checks of
every field -- and knows no method.  **Each method declares its own saved
form** (a :class:`SavedForm`, the ``saved_form`` of its aggregator class, in
the method's module): which per-worker fields it saves (:class:`Field`: its
statistics -- counts, or a GLAD ability and its curvature: what the model
is -- and the parameters derived from them), the M-step that derives them,
how its statistics enter a warm start, and which other methods' models it
converts.  ``ds`` saves ``counts`` and
``confusion`` (n_workers, K, K) ``[worker, true, observed]``; ``onecoin``
saves ``correct``, ``answers`` and ``accuracy`` (n_workers,).  The methods
that save a model are those the registry declares with ``init_workers``.

**The counts are the model; the parameters are what they say.** The counts
are the sufficient statistics the fitted parameters were estimated from (the
expected counts of the E-step before the last M-step, a warm start's
pseudo-counts included), ``smoothing`` the fit's; ``prior`` and the form's
parameters are that M-step's result (the fitted parameters, as ``--workers``
shows them), and a file in which they do not follow from the counts within
:data:`TOLERANCE` is refused: there is one reading of a model file, never two.

**A warm start adds the saved counts as prior pseudo-counts** in every
M-step of the new fit (:class:`WarmStart`; what exactly is added is the
form's :meth:`SavedForm.pseudo_counts`), which starts from the new batch's
own soft majority vote: a saved model is evidence, not certainty, and batch
1 then batch 2 approaches one fit on both batches.  The rule assumes the
batches share no task: a task counted twice counts its answers twice, so the
model keeps a 64-bit SipHash-2-4 of each task's name (``task_hashes``:
sorted, little-endian, base64; 8 bytes a task) and a warm start on tasks it
has seen warns with their number.  Classes are matched by name; a class of
the data the model lacks is an error, a class of the model the data lacks is
left out with a warning.  Workers are matched by name: a worker absent from
the model starts with no pseudo-counts, and a worker of the model absent
from the data is carried into the model the warm fit saves, so batch 3 knows
batch 1's workers.  A model of another method is converted when the fitted
method's form declares that method in :attr:`SavedForm.converts` (``ds`` and
``onecoin`` convert each other's), else refused.

Version 1 files (probabilities only) are refused with a request to save
the model again: probabilities without the number of answers behind them
cannot say how much evidence they are.  ``--workers`` stays the
human-readable table; this file is for machines.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import chain
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from ..core.checks import json_unique_keys
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
#: The envelope's fields, in the order they are written (a form's own fields come before ``n_tasks``).
_HEAD = ("format", "version", "method", "smoothing", "classes", "workers", "class_counts", "prior")
_TAIL = ("n_tasks", "task_hashes")
#: Bytes each number of a model costs while it is written as JSON (a float object, its text, the list slot).
_WRITE_BYTES_PER_NUMBER = 80


class WorkerModel(dict):
    """A checked worker model (what :func:`from_json` returns), arrays as numpy arrays.

    Keys: ``method``, ``smoothing``, ``classes`` and ``workers`` (lists of
    str), ``class_counts`` and ``prior`` (K,), the method's own fields
    (its :attr:`SavedForm.fields`: for ds ``counts`` and ``confusion``
    (n_workers, K, K) ``[worker, true, observed]``, for onecoin
    ``correct``, ``answers`` and ``accuracy`` (n_workers,)),
    ``task_hashes`` (sorted unique uint64), ``source`` (the file's name,
    for messages).
    """


# ----------------------------------------------------------------------------- a method's form
@dataclass(frozen=True)
class Field:
    """One per-worker field of a saved model: its name, what its numbers are, what each axis runs over.

    ``kind``: ``"counts"`` (numbers >= 0), ``"probabilities"`` (0 to 1;
    with ``sums`` each last-axis row sums to 1 within :data:`TOLERANCE`)
    or ``"numbers"`` (any finite number: an ability, a log-odds ...).
    ``axes``: ``"worker"`` first, then any number of class axes (``"true
    class"``, ``"observed class"``), each K long.  ``derived``: the field
    follows from the others by the method's M-step
    (:meth:`SavedForm.parameters`) and a file's must equal what they give;
    the fields that are not derived are the model itself, its
    *statistics* (ds's counts; a GLAD ability and its curvature).
    """

    name: str
    kind: str
    axes: tuple[str, ...] = ("worker",)
    sums: bool = False
    derived: bool = False

    def shape(self, n_workers: int, k: int) -> tuple[int, ...]:
        return tuple(n_workers if axis == "worker" else k for axis in self.axes)


class SavedForm:
    """What a method saves of its worker model, and how saved counts enter its fit.

    A method that saves a model (declared ``init_workers`` in the registry)
    sets ``saved_form = ItsForm()`` on its aggregator class, in its own
    module; this module reads and writes the envelope around it and never
    names a method.  A subclass sets :attr:`method` and :attr:`fields` and
    implements the methods below that raise ``NotImplementedError``.

    Shapes: ``stats`` is a dict of the form's :attr:`statistics` (the
    fields not ``derived``), each (n, ...) for n workers; ``order`` (K_data,) the model's index of each of
    the data's classes (:func:`class_order`); ``rows`` the model's workers
    to take.
    """

    #: The registry name of the method whose models these are.
    method: ClassVar[str] = ""
    #: Every per-worker field, in the order they are written: the statistics, then the derived parameters.
    fields: ClassVar[tuple[Field, ...]] = ()
    #: Other methods whose saved models this method converts (:meth:`convert`) into its own counts.
    converts: ClassVar[tuple[str, ...]] = ()

    @property
    def statistics(self) -> tuple[str, ...]:
        """The fields that are the model (not ``derived``): what :meth:`convert` gives and a warm start adds."""
        return tuple(f.name for f in self.fields if not f.derived)

    def from_result(self, result: AggregationResult) -> dict[str, np.ndarray]:
        """Every field of :attr:`fields` for the fitted ``result``'s workers (``result.data``' order)."""
        raise NotImplementedError

    def parameters(self, stats: dict[str, np.ndarray], smoothing: float, k: int) -> dict[str, np.ndarray]:
        """The ``derived`` fields, as the method's M-step makes them of ``stats`` (what a file's must equal)."""
        raise NotImplementedError

    def prior(self, class_counts: np.ndarray, smoothing: float) -> np.ndarray:
        """The class prior the method's M-step makes of ``class_counts`` (K,)."""
        raise NotImplementedError

    def check(self, model: WorkerModel, display: str) -> None:
        """Checks between fields beyond each one's own (e.g. no more correct answers than answers)."""

    def convert(self, model: WorkerModel, order: np.ndarray, rows: np.ndarray) -> dict[str, np.ndarray]:
        """The statistics of the model's workers ``rows`` in this form, classes in the data's ``order``.

        ``model`` is of this method or of one in :attr:`converts`
        (:func:`converted_counts` has refused any other).  Classes of the
        model the data lacks drop out.  Only ``rows`` are expanded.
        """
        raise NotImplementedError

    def pseudo_counts(self, stats: dict[str, np.ndarray], known: np.ndarray, k: int) -> np.ndarray:
        """What a warm start adds to each M-step: an array whose first axis is every worker of the data.

        ``stats``: the statistics of the workers ``known`` (bool,
        (n_workers,)) in this form; the rows of the others are zero (no evidence).
        """
        raise NotImplementedError

    def memory(self, n_workers: int, k: int, k_model: int) -> float:
        """Bytes a warm start allocates for ``n_workers`` workers: the pseudo-counts, and the known workers'
        counts taken from the model (three copies in the model's ``k_model`` classes while they are reordered)."""
        return 8.0 * n_workers * (2 * k**2 + 3 * k_model**2)


def saving_methods() -> list[str]:
    """The methods that save a worker model (declared ``init_workers``), in the registry's order."""
    from .registry import METHODS

    return [m.name for m in METHODS.values() if m.init_workers]


def form_of(method: str) -> SavedForm | None:
    """The saved form of ``method`` (imports its module), or None for a method that saves no model."""
    from .registry import METHODS

    spec = METHODS.get(method)
    if spec is None or not spec.init_workers:
        return None
    form = getattr(spec.load(), "saved_form", None)
    if not isinstance(form, SavedForm):  # a declaration the method's class does not keep: a bug
        raise RuntimeError(f"method {method!r} is declared with init_workers but its class has no saved_form")
    return form


# ----------------------------------------------------------------------------- writing
def task_hashes(names: Any) -> np.ndarray:
    """Sorted unique 64-bit SipHash-2-4 of task names (UTF-8 bytes, key :data:`TASK_HASH_KEY`), uint64."""
    from pandas.util import hash_array

    values = np.asarray(names, dtype=object)
    if not len(values):
        return np.empty(0, dtype=np.uint64)
    return np.unique(hash_array(values, encoding="utf8", hash_key=TASK_HASH_KEY, categorize=False))


def to_json(result: AggregationResult) -> bytes:
    """The worker model of a fitted result as JSON bytes (exact floats), in its method's saved form.

    ``result.counts`` holds ``class_counts`` (K,) and ``smoothing`` (the
    envelope's), the form reads the rest (:meth:`SavedForm.from_result`).
    A warm-started result saves the total evidence: its counts include the
    model it started from, and that model's workers absent from the data
    are carried over (converted to this method's counts, their parameters
    recomputed from them).
    """
    from ..core import memory

    form = form_of(result.method)
    if form is None:
        raise UsageError(
            f"method {result.method!r} learns no reusable worker model; {param('save_workers')} works with "
            + ", ".join(saving_methods())
        )
    if not result.counts:  # the method declares a saved form, but its _finish left the statistics out
        raise UsageError(
            f"method {result.method!r} saves a worker model, but this result carries none (its _finish passes no "
            "counts= to make_result)"
        )
    data, k = result.data, result.data.n_classes
    smoothing = float(result.counts["smoothing"])
    workers = data.workers.tolist()
    values = {name: np.asarray(value) for name, value in form.from_result(result).items()}
    hashes = task_hashes(data.task_names)
    model = result.init_model
    if model is not None:
        hashes = np.union1d(hashes, model["task_hashes"])
        rows = np.flatnonzero(_lookup(model["workers"], workers) < 0)  # the model's workers absent from the data
        if rows.size:
            memory.check(8.0 * 3 * rows.size * k * k, f"{rows.size:,} workers of the worker model × {k:,}² classes",
                         result.max_memory)
            carried = converted_counts(model, list(data.classes), result.method, rows)
            carried |= form.parameters(carried, smoothing, k)
            workers += [model["workers"][i] for i in rows]
            values = {name: np.concatenate([values[name], carried[name]]) for name in values}
    per_worker = sum(int(np.prod(f.shape(1, k))) for f in form.fields)
    memory.check(_WRITE_BYTES_PER_NUMBER * (len(workers) * per_worker + 2 * k) + 11.0 * hashes.size,
                 f"writing a worker model of {len(workers):,} workers × {k:,} classes", result.max_memory)
    doc: dict[str, Any] = {
        "format": FORMAT, "version": VERSION, "method": result.method, "smoothing": smoothing,
        "classes": list(data.classes), "workers": workers,
        "class_counts": np.asarray(result.counts["class_counts"]).tolist(), "prior": result.prior.tolist(),
    }
    doc.update({f.name: values[f.name].tolist() for f in form.fields})
    doc["n_tasks"] = int(hashes.size)
    doc["task_hashes"] = base64.b64encode(hashes.astype("<u8").tobytes()).decode("ascii")
    return (json.dumps(doc, ensure_ascii=False, allow_nan=False) + "\n").encode("utf-8")


# ----------------------------------------------------------------------------- reading
def from_json(text: bytes | str, display: str = "<workers>", max_memory: MaxMemory = None) -> WorkerModel:
    """A saved model, checked: its JSON strictly (no repeated key, no NaN), then every field.

    What parsing will allocate is estimated from the text first and
    refused above ``max_memory`` (:func:`crowdagg.core.memory.json_parse_bytes`).
    """
    from ..core import memory

    memory.check(memory.json_parse_bytes(text), f"parsing the {memory.human(len(text))} worker model {display}",
                 max_memory, advice="check that this is a worker model saved by --save-workers")

    unique_keys = json_unique_keys(lambda key: f"{display}: the key {key} appears twice in one object "
                                   "(which one counts?)")
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
        raise DataError(f"{display}: worker model version {describe_json(version)}; this crowdagg reads version {VERSION}")
    method = doc.get("method")
    methods = saving_methods()
    if type(method) is not str or method not in methods:
        shown = json.dumps(method, ensure_ascii=False) if isinstance(method, str) else describe_json(method)
        raise DataError(f"{display}: \"method\" is {shown}; a worker model is one of " + ", ".join(methods))
    form = form_of(method)
    assert form is not None
    allowed = (*_HEAD, *_TAIL, *(f.name for f in form.fields))
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
    model["class_counts"] = _counts(doc, "class_counts", (k,), display, ("class",))
    model["prior"] = _probabilities(doc, "prior", (k,), display, ("class",), sums=True)
    for f in form.fields:
        check = {"counts": _counts, "probabilities": _probabilities, "numbers": _numbers}[f.kind]
        extra = {"sums": f.sums} if f.kind == "probabilities" else {}
        model[f.name] = check(doc, f.name, f.shape(n, k), display, f.axes, **extra)
    form.check(model, display)
    _check_follows_from_counts(model, form, display)
    model["task_hashes"] = _task_hashes(doc, display)
    return model


class _Literal:
    """``NaN``, ``Infinity`` or ``-Infinity`` in the text (Python's json reads them; JSON does not allow them).

    Kept as this marker, not a float, so the field check names where it is.
    """

    def __init__(self, text: str) -> None:
        self.text = text


def describe_json(value: Any) -> str:
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
        raise DataError(f"{display}: \"{key}\" is {describe_json(names)}, not a list of names")
    if not all(type(v) is str for v in names):
        i = next(i for i, v in enumerate(names) if type(v) is not str)
        raise DataError(f"{display}: {key}[{i}] is {describe_json(names[i])}, not a name (a string)")
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


def _numbers(doc: dict[str, Any], key: str, shape: tuple[int, ...], display: str,
             per: Sequence[str] = ()) -> np.ndarray:
    """A field that must be numbers nested to ``shape``: float64 array, or an error naming the first bad entry.

    ``shape`` () is one number.  Accepted: JSON numbers (integers or
    decimals); a string, a boolean, null, a list or an object where a
    number belongs is an error, as is a number too large for a double.
    Nesting is checked level by level on whole lists (no Python frame per
    number).  ``per``: what each axis runs over (for "has 3 entries, not 2
    (one per class)").
    """
    items = [doc[key]]
    for depth, size in enumerate(shape):
        if not all(type(x) is list for x in items):
            i = next(i for i, x in enumerate(items) if type(x) is not list)
            raise DataError(f"{display}: {_path(key, i, shape[:depth])} is {describe_json(items[i])}, not a list")
        if any(len(x) != size for x in items):
            i = next(i for i, x in enumerate(items) if len(x) != size)
            raise DataError(f"{display}: {_path(key, i, shape[:depth])} has {len(items[i])} entries, not {size} "
                            f"(one per {per[depth]})")
        items = list(chain.from_iterable(items))
    if not {type(v) for v in items} <= {float, int}:
        i = next(i for i, v in enumerate(items) if type(v) not in (float, int))
        raise DataError(f"{display}: {_path(key, i, shape)} is {describe_json(items[i])}, not a number")
    try:
        values = np.array(items, dtype=np.float64)
    except OverflowError:  # an integer beyond any double
        values = np.array([float(v) if abs(v) < 2**1023 else np.inf for v in items], dtype=np.float64)
    bad = np.flatnonzero(~np.isfinite(values))
    if bad.size:
        i = int(bad[0])
        raise DataError(f"{display}: {_path(key, i, shape)} is too large to be a number")
    return values.reshape(shape)


def _counts(doc: dict[str, Any], key: str, shape: tuple[int, ...], display: str,
            per: Sequence[str] = ()) -> np.ndarray:
    values = _numbers(doc, key, shape, display, per)
    bad = np.flatnonzero(values.reshape(-1) < 0)
    if bad.size:
        i = int(bad[0])
        raise DataError(f"{display}: {_path(key, i, shape)} is {float(values.reshape(-1)[i])!r}, not a count (>= 0)")
    # Counts are added up (a prior's total, a worker's trace when another method converts them): each one
    # finite is not enough -- a sum beyond a double is inf, and the fit's parameters nan.
    with np.errstate(over="ignore"):
        total = values.sum()
    if not np.isfinite(total):
        raise DataError(f"{display}: \"{key}\" add up to more than the largest number a double holds "
                        f"({np.finfo(np.float64).max:.3g}); these are not counts of answers")
    return values


def _probabilities(doc: dict[str, Any], key: str, shape: tuple[int, ...], display: str,
                   per: Sequence[str] = (), sums: bool = False) -> np.ndarray:
    values = _numbers(doc, key, shape, display, per)
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


def _check_follows_from_counts(model: WorkerModel, form: SavedForm, display: str) -> None:
    """The parameters are the M-step of the counts (one reading of the file), within :data:`TOLERANCE`."""
    k, s = len(model["classes"]), model["smoothing"]
    pairs = [("prior", "class_counts", model["prior"], form.prior(model["class_counts"], s))]
    counts = '" and "'.join(form.statistics)
    stats = {name: model[name] for name in form.statistics}
    pairs += [(key, counts, model[key], value) for key, value in form.parameters(stats, s, k).items()]
    for key, given_by, given, want in pairs:
        off = np.flatnonzero(np.abs(given - want).reshape(-1) > TOLERANCE)
        if off.size:
            i = int(off[0])
            raise DataError(
                f"{display}: {_path(key, i, given.shape)} is {float(given.reshape(-1)[i])!r} but \"{given_by}\" give "
                f"{float(want.reshape(-1)[i])!r} (smoothing {s:g}): the counts are the model, the parameters follow "
                "from them; save the model again rather than editing it"
            )


def _task_hashes(doc: dict[str, Any], display: str) -> np.ndarray:
    n, text = doc["n_tasks"], doc["task_hashes"]
    if type(n) is not int or n < 0:
        raise DataError(f"{display}: \"n_tasks\" is {describe_json(n)}, not a count of tasks")
    if type(text) is not str:
        raise DataError(f"{display}: \"task_hashes\" is {describe_json(text)}, not base64 text")
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
    path to a saved file, or a fitted result of a method that saves one."""
    import os

    from .result import AggregationResult

    if isinstance(value, WorkerModel):
        return value
    if isinstance(value, dict):
        return from_document(value)
    if isinstance(value, AggregationResult):
        if form_of(value.method) is None or not value.counts:  # (to_json's refusal would name save_workers)
            raise UsageError(f"{param('init_workers')} must be a saved worker model; a fitted {value.method} "
                             f"result has none (a fitted {_either(saving_methods())} result has one)")
        return from_json(to_json(value), f"the {value.method} result", max_memory)
    if isinstance(value, bytes) or (isinstance(value, str) and value.lstrip().startswith("{")):
        return from_json(value, max_memory=max_memory)
    if isinstance(value, (str, os.PathLike)):
        from ..io.read import read_bytes

        data, display = read_bytes(value, max_memory)
        return from_json(data, display, max_memory)
    raise UsageError(
        f"{param('init_workers')} must be a saved worker model (a path, its JSON, or a fitted "
        f"{'/'.join(saving_methods())} result), got {type(value).__name__}"
    )


def _either(names: Sequence[str]) -> str:
    """``a``, ``a or b``, ``a, b or c``: the alternatives as a sentence says them."""
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"


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
    """The counts of the model's workers ``rows`` in ``method``'s saved form, classes in the data's order.

    The model is of ``method`` or of a method its form converts
    (:attr:`SavedForm.converts`); any other is refused (a
    :class:`~crowdagg.errors.DataError` naming the file).  Classes the data
    lacks drop out; only ``rows`` are expanded.
    """
    return _starting_form(model, method).convert(model, class_order(model, classes), rows)


def _starting_form(model: WorkerModel, method: str) -> SavedForm:
    """The form of ``method``, which ``model`` can start: the rule the form declares, else an error."""
    form = form_of(method)
    if form is None:
        raise UsageError(f"method {method!r} saves no worker model; {param('init_workers')} works with "
                         + ", ".join(saving_methods()))
    if model["method"] != method and model["method"] not in form.converts:
        takes = ", ".join((method, *form.converts))
        raise DataError(f"{model['source']}: a {model['method']} worker model cannot start {method} (it starts from "
                        f"a worker model of {takes})")
    return form


class WarmStart:
    """What a saved model adds to a fit of ``data`` with ``method``: pseudo-counts for its workers.

    Attributes: ``class_counts`` (K,) added to the class totals; ``pseudo``
    what the method's form adds to each M-step's expected counts
    (:meth:`SavedForm.pseudo_counts`; first axis the data's workers, zero
    for workers the model does not know) -- for ds and onecoin
    (n_workers, K_observed, K_true), also named ``counts_ot``; ``known``
    (n_workers,) bool; ``model`` the checked model.  Building it refuses a
    model of a method the fitted one does not convert, and warns when the
    data's tasks were already in the model's fit and when the model has
    classes the data lacks.
    """

    def __init__(self, model: WorkerModel, data: AnnotationSet, method: str) -> None:
        classes = list(data.classes)
        order = class_order(model, classes)
        form = _starting_form(model, method)
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
        self.pseudo = form.pseudo_counts(form.convert(model, order, found[self.known]), self.known, data.n_classes)

    @property
    def counts_ot(self) -> np.ndarray:
        """:attr:`pseudo` under the name the Dawid--Skene fits use: (n_workers, K_observed, K_true)."""
        return self.pseudo

    @staticmethod
    def memory(data: AnnotationSet, model: WorkerModel, method: str | None = None) -> float:
        """Bytes it allocates beyond the fit of ``data`` with ``method`` (default: the model's own method), as
        the fitted method's form counts them (:meth:`SavedForm.memory`)."""
        form = form_of(method or model["method"])
        return 0.0 if form is None else form.memory(data.n_workers, data.n_classes, len(model["classes"]))


__all__ = ["WorkerModel", "Field", "SavedForm", "WarmStart", "to_json", "from_json", "from_document", "coerce",
           "converted_counts", "form_of", "saving_methods", "task_hashes", "class_order", "FORMAT", "VERSION",
           "TOLERANCE"]
