"""Fitted worker models that can be saved and reused (``--save-workers`` / ``--init-workers``).

A saved model is a versioned JSON document, floats written exactly (the
shortest text that reads back as the same double)::

    {"format": "crowdagg-workers", "version": 1, "method": "ds",
     "classes": ["a", "b"], "prior": [0.6, 0.4],
     "workers": ["w1", "w2"],
     "confusion": [[[0.9, 0.1], [0.2, 0.8]], ...]}      # ds: [worker][true][observed]
     "accuracy": [0.85, 0.7]                            # onecoin instead

``--workers`` stays the human-readable long table; this file is for
machines: a later run starts from it (a warm start, or labelling a new
batch of tasks with known workers).  Workers absent from the file start as
the method's default (the M-step on majority vote); workers in the file
but not in the data are ignored.  A onecoin model can start ds (its
one-coin matrices) and a ds model onecoin (its matrices as they are).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import numpy as np

from .errors import DataError, UsageError, param

if TYPE_CHECKING:  # pragma: no cover
    from .data import AnnotationSet
    from .result import AggregationResult

class WorkerModel(dict):
    """A checked worker model (what :func:`from_json` returns): method, classes, prior, workers, and the
    confusion ``[worker][true][observed]`` or the accuracy per worker, as numpy arrays."""


FORMAT = "crowdagg-workers"
VERSION = 1
#: What each method saves: its worker parameter.
SAVED = {"ds": "confusion", "onecoin": "accuracy"}


def to_json(result: AggregationResult) -> bytes:
    """The worker model of a fitted ``ds``/``onecoin`` result as JSON bytes (exact floats)."""
    kind = SAVED.get(result.method)
    if kind is None:
        raise UsageError(
            f"method {result.method!r} learns no reusable worker model; {param('save_workers')} works with "
            + ", ".join(SAVED)
        )
    data = result.data
    doc: dict[str, Any] = {
        "format": FORMAT, "version": VERSION, "method": result.method,
        "classes": list(data.classes), "prior": result.prior.tolist(), "workers": data.workers.tolist(),
    }
    doc[kind] = np.asarray(result.worker_params[kind]).tolist()
    return (json.dumps(doc, ensure_ascii=False, allow_nan=False) + "\n").encode("utf-8")


def from_json(text: bytes | str, display: str = "<workers>") -> WorkerModel:
    """A saved model, checked: format, version, shapes, probabilities."""
    try:
        doc = json.loads(text)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise DataError(f"{display}: not a crowdagg worker model (not JSON: {exc})") from None
    return from_document(doc, display)


def from_document(doc: Any, display: str = "<workers>") -> WorkerModel:
    """:func:`from_json` of an already parsed document."""
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise DataError(f"{display}: not a crowdagg worker model (written by --save-workers)")
    version = doc.get("version")
    if type(version) is not int or version != VERSION:
        raise DataError(f"{display}: worker model version {version!r}; this crowdagg reads version {VERSION}")
    method = doc.get("method")
    if method not in SAVED:
        raise DataError(f"{display}: unknown method {method!r} in the worker model")
    classes, workers = doc.get("classes"), doc.get("workers")
    if not isinstance(classes, list) or not isinstance(workers, list):
        raise DataError(f"{display}: the worker model lacks its classes or workers")
    names = [str(w) for w in workers]
    for w in names:
        try:
            w.encode("utf-8")
        except UnicodeEncodeError:
            raise DataError(f"{display}: the worker name {w!r} in the worker model is not valid text") from None
    if len(set(names)) != len(names):
        dup = next(w for w in names if names.count(w) > 1)
        raise DataError(f"{display}: the worker {dup!r} appears twice in the worker model")
    k, n = len(classes), len(workers)
    try:
        prior = np.asarray(doc["prior"], dtype=np.float64)
        values = np.asarray(doc[SAVED[method]], dtype=np.float64)
    except (KeyError, TypeError, ValueError, OverflowError):
        raise DataError(f"{display}: the worker model's prior or {SAVED[method]} is missing or not numeric") from None
    want = (n, k, k) if SAVED[method] == "confusion" else (n,)
    if prior.shape != (k,) or values.shape != want:
        raise DataError(f"{display}: the worker model's arrays do not match its {k} classes and {n} workers")
    probabilities = [prior, values]
    if not all(np.isfinite(a).all() and (a >= 0).all() and (a <= 1).all() for a in probabilities):
        raise DataError(f"{display}: the worker model holds values that are not probabilities")
    if abs(prior.sum() - 1.0) > 1e-6 or (SAVED[method] == "confusion" and n and
                                         np.abs(values.sum(axis=2) - 1.0).max() > 1e-6):
        raise DataError(f"{display}: the worker model's prior or confusion rows do not sum to 1")
    return WorkerModel(method=method, classes=[str(c) for c in classes], prior=prior, workers=names,
                       source=display, **{SAVED[method]: values})


def coerce(value: Any) -> WorkerModel:
    """A worker model from what the library was given: a checked model, a document, JSON text or bytes, a
    path to a saved file, or a fitted ds/onecoin result."""
    import os

    from .result import AggregationResult

    if isinstance(value, WorkerModel):
        return value
    if isinstance(value, dict):
        return from_document(value)
    if isinstance(value, AggregationResult):
        return from_json(to_json(value), f"the {value.method} result")
    if isinstance(value, bytes) or (isinstance(value, str) and value.lstrip().startswith("{")):
        return from_json(value)
    if isinstance(value, (str, os.PathLike)):
        from .io import read_bytes

        data, display = read_bytes(value)
        return from_json(data, display)
    raise UsageError(
        f"{param('init_workers')} must be a saved worker model (a path, its JSON, or a fitted ds/onecoin result), "
        f"got {type(value).__name__}"
    )


def initial_parameters(model: dict[str, Any], data: AnnotationSet) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(prior (K,), confusion [w, observed, true] for the data's workers, mask of workers the model knows).

    Classes are matched by name (the data's order); a class of the data the
    model lacks is an error.  Workers are matched by name.
    """
    from .aggregators.base import one_coin_matrices

    source = model.get("source", "the worker model")
    index = {c: i for i, c in enumerate(model["classes"])}
    missing = [c for c in data.classes if c not in index]
    if missing:
        raise DataError(
            f"{source}: the worker model has no class {missing[0]!r} (its classes: {', '.join(model['classes'])})"
        )
    order = np.array([index[c] for c in data.classes], dtype=np.int64)
    prior = model["prior"][order]
    if not prior.sum() > 0:
        raise DataError(f"{source}: the worker model gives the data's classes a prior of 0")
    prior = prior / prior.sum()
    if "confusion" in model:
        conf = model["confusion"][:, order][:, :, order]  # [w, true, observed] in the data's class order
    else:
        conf = one_coin_matrices(model["accuracy"], data.n_classes)
    from .vocab import Vocabulary

    found = Vocabulary.from_strings(model["workers"]).lookup(data.workers.names)
    known = found >= 0
    conf_ot = np.zeros((data.n_workers, data.n_classes, data.n_classes))
    conf_ot[known] = conf[found[known]].transpose(0, 2, 1)
    sums = conf_ot[known].sum(axis=1, keepdims=True)  # renormalise each true class's column
    conf_ot[known] = conf_ot[known] / np.where(sums > 0, sums, 1.0)
    return prior, conf_ot, known


__all__ = ["WorkerModel", "to_json", "from_json", "from_document", "coerce", "initial_parameters", "FORMAT", "VERSION"]
