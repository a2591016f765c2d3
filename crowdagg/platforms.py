"""Exports of annotation platforms that are not tables: Label Studio JSON.

A Label Studio export is a JSON list of tasks, each carrying the answers of
its annotators (``annotations``, or ``completions`` before Label Studio
1.0).  :func:`flatten_label_studio` turns the classification answers of one
``<Choices>`` control into the long form crowdagg reads: one (task, worker,
label) triple per answer.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from .errors import DataError, param

__all__ = ["FlatAnswers", "flatten_label_studio", "is_label_studio"]

_ANSWER_KEYS = ("annotations", "completions")


@dataclass
class FlatAnswers:
    """Answers flattened out of a platform export, one entry per answer.

    Attributes
    ----------
    task, worker, label : list of str
        Task id, worker id and chosen class of each answer.
    record : list of int
        1-based position, in the export, of the task each answer came from
        (to locate errors).
    tasks : list of str
        Every task id in export order, including tasks without any answer.
    n_cancelled : int
        Annotations skipped because they were cancelled (skipped by the annotator).
    n_without_choice : int
        Annotations skipped because they hold no choice for the control read.
    label_name : str
        The ``from_name`` of the choices control read.
    """

    task: list[str] = field(default_factory=list)
    worker: list[str] = field(default_factory=list)
    label: list[str] = field(default_factory=list)
    record: list[int] = field(default_factory=list)
    tasks: list[str] = field(default_factory=list)
    n_cancelled: int = 0
    n_without_choice: int = 0
    label_name: str = ""


def _answers_of(task: Mapping[str, object]) -> object:
    for key in _ANSWER_KEYS:
        if key in task:
            return task[key]
    return None


def is_label_studio(obj: object) -> bool:
    """Whether parsed JSON looks like a Label Studio export.

    Parameters
    ----------
    obj : object
        The parsed JSON document.

    Returns
    -------
    bool
        True for a non-empty list of objects of which at least one carries an
        ``annotations`` (or older ``completions``) list.  Structural problems
        in the other tasks are left to :func:`flatten_label_studio` to report.
    """
    if not isinstance(obj, list) or not obj:
        return False
    if not all(isinstance(item, dict) for item in obj):
        return False
    return any(isinstance(_answers_of(item), list) for item in obj)


def _text_id(value: object) -> str | None:
    """An id as text: str as is, int as decimal; None for anything else (bool, float, dict, empty)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str) and value.strip():
        return value
    return None


def _worker_id(completed_by: object) -> str | None:
    if isinstance(completed_by, dict):
        wid = _text_id(completed_by.get("id"))
        return wid if wid is not None else _text_id(completed_by.get("email"))
    return _text_id(completed_by)


def _quoted(names: list[str]) -> str:
    return ", ".join(repr(n) for n in names)


def json_type(value: object) -> str:
    """The JSON word for a value's type, for messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    return "an object"


@dataclass
class _Answer:
    n: int  # 1-based task position
    tid: str
    k: int  # 1-based annotation position in the task; 0 for the task itself
    ann: dict | None
    cancelled: bool = False
    worker: str = ""


class _Walker:
    """Checks the structure and hands out every task and annotation with its place."""

    def __init__(self, obj: list, source: str) -> None:
        self.obj = obj
        self.source = source

    def fail(self, n: int, tid: str | None, what: str) -> DataError:
        where = f"task {n}" if tid is None else f"task {n} (id {tid})"
        return DataError(f"{self.source}: {where}: {what}")

    def walk(self) -> Iterator[_Answer]:
        """Yield each task (``ann`` None) followed by its annotations."""
        first_seen: dict[str, int] = {}
        for n, task in enumerate(self.obj, start=1):
            if not isinstance(task, dict):
                raise self.fail(n, None, f"is not an object (got {json_type(task)})")
            raw_id = task.get("id")
            tid = _text_id(raw_id)
            if tid is None:
                raise self.fail(n, None, "has no id" if raw_id is None else f"has an unusable id {raw_id!r}")
            if tid in first_seen:
                raise self.fail(n, tid, f"repeats the id of task {first_seen[tid]}")
            first_seen[tid] = n
            key = next((k for k in _ANSWER_KEYS if k in task), None)
            answers = task[key] if key is not None else []
            if not isinstance(answers, list):
                raise self.fail(n, tid, f"{key!r} is not a list (got {json_type(answers)})")
            yield _Answer(n, tid, 0, None)
            for k, ann in enumerate(answers, start=1):
                if not isinstance(ann, dict):
                    raise self.fail(n, tid, f"annotation {k} is not an object (got {json_type(ann)})")
                if ann.get("was_cancelled") is True:
                    yield _Answer(n, tid, k, ann, cancelled=True)
                    continue
                got = ann.get("completed_by")
                worker = _worker_id(got)
                if worker is None:
                    what = "has no completed_by" if got is None else f"has an unusable completed_by {got!r}"
                    raise self.fail(n, tid, f"annotation {k} {what}")
                result = ann.get("result")
                if result is not None and not isinstance(result, list):
                    raise self.fail(n, tid, f"annotation {k}: 'result' is not a list (got {json_type(result)})")
                for r in result or []:
                    if not isinstance(r, dict):
                        raise self.fail(n, tid, f"annotation {k}: a result is not an object (got {json_type(r)})")
                yield _Answer(n, tid, k, ann, worker=worker)


def _is_choices(r: Mapping[str, object]) -> bool:
    kind = r.get("type")
    if kind is None:  # very old exports: no type, a choices value
        value = r.get("value")
        return isinstance(value, dict) and "choices" in value
    return kind == "choices"


def flatten_label_studio(
    obj: list,
    *,
    source: str,
    label: str | None = None,
    options: Mapping[str, str] | None = None,
) -> FlatAnswers:
    """Flatten a Label Studio JSON export into one (task, worker, label) per answer.

    Parameters
    ----------
    obj : list
        The parsed export (see :func:`is_label_studio`).
    source : str
        The file's display name, for messages.
    label : str, optional
        The ``from_name`` of the choices control to read; needed when the
        project has several.
    options : mapping of str to str, optional
        How the caller spells the ``label`` override in messages (key
        ``"label"``, default the keyword ``label_col``).

    Returns
    -------
    FlatAnswers
        The answers, every task id, and what was skipped.

    Raises
    ------
    DataError
        Malformed structure (naming the task, 1-based), no classification
        (``choices``) answers, several choices controls and no ``label``, a
        ``label`` naming none of them, or several choices in one answer.

    Notes
    -----
    Task ids are ``str(task["id"])``; worker ids are
    ``annotation["completed_by"]`` as text (its ``id`` when it is an object).
    Cancelled annotations and annotations without a choice for the control
    are skipped and counted; ``predictions`` (pre-annotations) and
    ``drafts`` are ignored.  Annotations marked ``ground_truth`` are kept as
    ordinary answers of their author.
    """
    option = dict(options or {}).get("label", param("label_col"))
    walker = _Walker(obj, source)

    # First pass: check the structure; find the choices controls and the other result types.
    controls: list[str] = []
    other_types: list[str] = []
    for a in walker.walk():
        if a.ann is None or a.cancelled:
            continue
        for r in a.ann.get("result") or []:
            if _is_choices(r):
                name = r.get("from_name")
                if not isinstance(name, str) or not name:
                    raise walker.fail(a.n, a.tid, f"annotation {a.k}: a choices result has no from_name")
                if name not in controls:
                    controls.append(name)
            else:
                kind = r.get("type")
                if isinstance(kind, str) and kind not in other_types:
                    other_types.append(kind)
    if not controls:
        found = f" (found result types: {_quoted(other_types)})" if other_types else ""
        raise DataError(
            f"{source}: no classification answers in this Label Studio export{found}; "
            "crowdagg supports only classification (choices) exports"
        )
    if label is not None:
        if label in controls:
            name = label
        elif label.strip() in controls:
            name = label.strip()
        else:
            raise DataError(f"{source}: no choices control named {label!r} (from {option}); found: {_quoted(controls)}")
    elif len(controls) > 1:
        raise DataError(
            f"{source}: {len(controls)} choices controls in this Label Studio export: {_quoted(controls)}; "
            f"set {option} to pick one"
        )
    else:
        name = controls[0]

    # Second pass: one answer per kept annotation.
    out = FlatAnswers(label_name=name)
    for a in walker.walk():
        if a.ann is None:
            out.tasks.append(a.tid)
            continue
        if a.cancelled:
            out.n_cancelled += 1
            continue
        picked: list[str] = []
        for r in a.ann.get("result") or []:
            if r.get("from_name") != name or not _is_choices(r):
                continue
            value = r.get("value")
            choices = value.get("choices") if isinstance(value, dict) else None
            if not isinstance(choices, list) or not all(isinstance(c, str) for c in choices):
                raise walker.fail(a.n, a.tid, f"annotation {a.k}: the {name!r} result has no list of choices")
            picked.extend(choices)
        if not picked:
            out.n_without_choice += 1
            continue
        if len(picked) > 1:
            raise walker.fail(
                a.n,
                a.tid,
                f"annotation {a.k} (worker {a.worker}) chose several classes for {name!r} ({_quoted(picked)}); "
                "crowdagg aggregates one class per answer (multi-label answers are not supported)",
            )
        if not picked[0].strip():
            raise walker.fail(a.n, a.tid, f"annotation {a.k} (worker {a.worker}) chose a blank class for {name!r}")
        out.task.append(a.tid)
        out.worker.append(a.worker)
        out.label.append(picked[0])
        out.record.append(a.n)
    return out
