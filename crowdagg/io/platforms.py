"""Platform exports: what their rows mean beyond the task, worker and label columns.

Label Studio JSON
    A JSON list of tasks, each carrying the answers of its annotators
    (``annotations``, or ``completions`` before Label Studio 1.0).
    :func:`flatten_label_studio` turns the classification answers of one
    ``<Choices>`` control into the long form crowdagg reads: one (task,
    worker, label) triple per answer.  Cancelled annotations (the annotator
    pressed *Skip*: ``was_cancelled``, or ``skipped`` in older exports) hold
    no answer: they are skipped and counted, like Toloka's ``SKIPPED``.

Label Studio JSON-MIN and CSV
    One row per annotation (``id``, ``annotator``, ``annotation_id``, the
    control's choice, the task's data fields); Label Studio leaves cancelled
    annotations out of these exports and writes a task nobody annotated as
    one row with a blank ``annotator`` and ``annotation_id``: that task keeps
    its output row, with no answers.  An annotation without a choice for the
    control read is skipped and counted (as in the JSON export); several
    choices in one answer (a ``{"choices": [...]}`` cell) are an error.

Assignment statuses (MTurk ``AssignmentStatus``, Toloka ``ASSIGNMENT:status``)
    Decided by :data:`ASSIGNMENT_STATUSES` (matched case-insensitively):

    ======================================  ============================
    status                                  the answer is
    ======================================  ============================
    MTurk ``Submitted``, ``Approved``       kept
    MTurk ``Rejected``                      rejected
    Toloka ``SUBMITTED``, ``ACCEPTED``,     kept
    ``APPROVED``
    Toloka ``REJECTED``                     rejected
    Toloka ``SKIPPED``, ``EXPIRED``,        not an answer: always
    ``ACTIVE``                              excluded, and counted
    ======================================  ============================

    Rejected answers are excluded by default and counted on stderr; the
    ``rejected`` policy (:data:`REJECTED_POLICIES`) ``"keep"`` keeps them.
    An MTurk row still ``Submitted`` whose ``Reject`` cell the requester
    filled in (the review-offline workflow: a reason to reject, before
    uploading the file back) counts as rejected.  A blank status is kept;
    any other status is kept with a warning naming it.  Every task of the
    export keeps its output row even when all its answers were excluded.

MTurk radio buttons
    ``Answer.<choice>.on`` columns (or ``Answer.<question>.<choice>``)
    holding ``true``/``false``: :func:`radio_labels` gives each row the
    choice whose cell is ``true``; the buttons are the class set, a class
    nobody chose included.  No ``true`` cell is a blank label (a
    skipped question: see ``blank_labels``); several are an error naming the
    line (radio buttons allow one, so this is a multi-label checkbox group,
    which crowdagg does not aggregate).

Everything that looks at rows works on the distinct values of a column
(Arrow dictionary encoding) and indexes back by code: no Python step per row.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from ..errors import DataError, param

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa

__all__ = [
    "ASSIGNMENT_STATUSES",
    "REJECTED_POLICIES",
    "FlatAnswers",
    "JsonMinControls",
    "RejectedPolicy",
    "StatusSplit",
    "flatten_label_studio",
    "is_label_studio",
    "json_min_controls",
    "radio_labels",
    "split_by_status",
]

#: What to do with answers the requester rejected: leave them out (default) or aggregate them.
REJECTED_POLICIES: tuple[str, ...] = ("exclude", "keep")
RejectedPolicy = Literal["exclude", "keep"]

ANSWERED, REJECTED, UNANSWERED = "answered", "rejected", "unanswered"
#: Each platform's assignment statuses (as the platform spells them) and what they make of the answer.
ASSIGNMENT_STATUSES: dict[str, dict[str, str]] = {
    "mturk": {"Submitted": ANSWERED, "Approved": ANSWERED, "Rejected": REJECTED},
    "toloka": {
        "SUBMITTED": ANSWERED, "ACCEPTED": ANSWERED, "APPROVED": ANSWERED, "REJECTED": REJECTED,
        "SKIPPED": UNANSWERED, "EXPIRED": UNANSWERED, "ACTIVE": UNANSWERED,
    },
}

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
                # Skipped by the annotator: ``was_cancelled`` (Label Studio 1.x), ``skipped`` (older exports).
                if ann.get("was_cancelled") is True or ann.get("skipped") is True:
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


# --------------------------------------------------------------------------- rows of table exports
def _distinct(column: Any) -> tuple[np.ndarray, list[str]]:
    """(codes per row, distinct cells as str): the per-row work is one dictionary encoding."""
    from ..data.vocab import as_strings, encode

    names, _ = as_strings(column, "status")
    codes, uniques = encode(names)
    return codes, [str(u) for u in uniques.to_pylist()]


@dataclass
class JsonMinControls:
    """What the records of a Label Studio JSON-MIN export say about its controls.

    Attributes
    ----------
    names : list of str
        The control columns, in order of first appearance.
    several : dict of str to (int, str)
        For each control, the first record (0-based) whose answer holds
        several choices (``{"choices": [...]}``), and that answer as JSON.
    """

    names: list[str]
    several: dict[str, tuple[int, str]]


def json_min_controls(records: list) -> JsonMinControls | None:
    """The controls of a Label Studio JSON-MIN export (parsed records), None for other records.

    Label Studio writes each record as the task's data, then ``id``, then
    one key per control answered, then ``annotator`` and the other
    annotation fields: the keys between ``id`` and ``annotator`` are the
    controls, whatever the data fields are called -- except a key that a
    task nobody annotated also holds (its record has only data fields and
    ``id``): that is a data field whatever its place.  This looks at
    records the JSON parser has already made, once each.
    """
    import json

    found: dict[str, None] = {}
    several: dict[str, tuple[int, str]] = {}
    data_fields: set[str] = set()
    seen = False
    for i, rec in enumerate(records):
        if isinstance(rec, dict) and "id" in rec and "annotator" not in rec and "annotation_id" not in rec:
            data_fields.update(rec)  # a task nobody annotated: its keys are data fields, never controls
            continue
        if not isinstance(rec, dict) or "annotation_id" not in rec or "id" not in rec or "annotator" not in rec:
            continue
        seen = True
        order = list(rec)
        for key in order[order.index("id") + 1: order.index("annotator")]:
            found[key] = None
            if isinstance(rec[key], (dict, list)) and key not in several:
                several[key] = (i, json.dumps(rec[key], ensure_ascii=False))
    # Key order is all that names a control, and a file rewritten by another tool may lose it
    # (``id, text, annotator, ..., sentiment``): a key an unannotated task holds is data, not a control.
    names = [k for k in found if k not in data_fields]
    return JsonMinControls(names, {k: v for k, v in several.items() if k not in data_fields}) if seen else None


def check_rejected_policy(rejected: str) -> None:
    """A usage error unless ``rejected`` is one of :data:`REJECTED_POLICIES`."""
    from ..errors import UsageError

    if rejected not in REJECTED_POLICIES:
        raise UsageError(f"{param('rejected')} must be one of {', '.join(REJECTED_POLICIES)}, got {rejected!r}")


@dataclass
class StatusSplit:
    """Which rows of a platform export are answers, by assignment status.

    Attributes
    ----------
    keep : ndarray of bool, shape (n_rows,)
        Rows to aggregate.
    rejected : ndarray of int
        Rows left out as rejected (empty under ``rejected="keep"``).
    unanswered : dict of str to ndarray of int
        Rows left out because their status holds no answer, by status.
    unknown : dict of str to ndarray of int
        Rows kept whose status the platform is not known to write, by status.
    """

    keep: np.ndarray
    rejected: np.ndarray
    unanswered: dict[str, np.ndarray]
    unknown: dict[str, np.ndarray]


def split_by_status(
    status: Any,
    platform: str,
    rejected: RejectedPolicy = "exclude",
    *,
    reject_marks: Any = None,
    header_cell: str | None = None,
) -> StatusSplit:
    """Sort a platform export's rows by their assignment status.

    Parameters
    ----------
    status : Arrow or numpy column, shape (n_rows,)
        The status column (MTurk ``AssignmentStatus``, Toloka ``ASSIGNMENT:status``).
    platform : {"mturk", "toloka"}
        Whose statuses these are (:data:`ASSIGNMENT_STATUSES`).
    rejected : {"exclude", "keep"}
        Whether rejected answers are left out.
    reject_marks : column, optional
        MTurk's ``Reject`` column: a non-blank cell on a ``Submitted`` row is
        a rejection the requester has decided but not yet uploaded.
    header_cell : str, optional
        The status column's name: a row repeating it (files joined with
        their headers) is left for the reader to skip, not reported here.

    Returns
    -------
    StatusSplit
    """
    from ..data.annotations import header_key

    check_rejected_policy(rejected)
    known = {k.lower(): v for k, v in ASSIGNMENT_STATUSES[platform].items()}
    codes, uniques = _distinct(status)
    kinds = []
    for u in uniques:
        key = u.strip().lower()
        if not key or (header_cell is not None and header_key(u) == header_key(header_cell)):
            kinds.append(ANSWERED)
        else:
            kinds.append(known.get(key, "unknown"))
    kind_of = np.array(kinds or ["answered"], dtype=object)
    is_rejected = (kind_of == REJECTED)[codes] if len(codes) else np.zeros(0, dtype=bool)
    if reject_marks is not None and len(codes):
        m_codes, m_uniques = _distinct(reject_marks)
        marked = np.array([bool(u.strip()) and u.strip().lower() != "reject" for u in m_uniques] or [False])
        is_rejected |= marked[m_codes] & (kind_of == ANSWERED)[codes]
    keep = np.ones(len(codes), dtype=bool)
    if rejected == "exclude":
        keep &= ~is_rejected
    unanswered: dict[str, np.ndarray] = {}
    unknown: dict[str, np.ndarray] = {}
    for code, kind in enumerate(kinds):
        if kind in (UNANSWERED, "unknown"):
            rows = np.flatnonzero(codes == code)
            (unanswered if kind == UNANSWERED else unknown)[uniques[code].strip()] = rows
            if kind == UNANSWERED:
                keep[rows] = False
    return StatusSplit(
        keep=keep,
        rejected=np.flatnonzero(is_rejected) if rejected == "exclude" else np.zeros(0, dtype=np.int64),
        unanswered=unanswered,
        unknown=unknown,
    )


def boolean_cells(column: Any, header_cell: str | None = None) -> bool:
    """Whether every cell of a column is ``true``, ``false`` (any letter case) or blank, and one is not blank.

    A cell repeating the column's own name (files joined with their
    headers) does not count against it.  A value that cannot be a name (a
    nested one) is not ``true`` or ``false``: the column is not boolean, and
    the reader names that value if the column is read.
    """
    from ..data.annotations import header_key
    from ..data.vocab import InvalidName

    try:
        _, uniques = _distinct(column)
    except InvalidName:
        return False
    seen = False
    for u in uniques:
        key = u.strip().lower()
        if key in ("true", "false"):
            seen = True
        elif key and not (header_cell is not None and header_key(u) == header_key(header_cell)):
            return False
    return seen


def radio_labels(
    columns: Sequence[Any], classes: Sequence[str], group: str, headers: Sequence[str] | None = None
) -> tuple[pa.Array, np.ndarray, np.ndarray]:
    """The label of each row of an MTurk radio-button group: the class whose cell is ``true``.

    Parameters
    ----------
    columns : sequence of columns, each shape (n_rows,)
        One ``true``/``false`` column per button.
    classes : sequence of str
        The class each button stands for.
    group : str
        The group's name: the label of a row repeating the header, so that
        the reader skips it as such.
    headers : sequence of str, optional
        The buttons' column names (to spot repeated header rows).

    Returns
    -------
    labels : Arrow string array, shape (n_rows,)
        The chosen class; blank where no button is ``true``.
    none : ndarray of int
        Rows with no button ``true`` (a skipped question).
    several : ndarray of int
        Rows with more than one button ``true`` (the caller's error).
    """
    import pyarrow as pa

    from ..data.annotations import header_key
    from ..data.vocab import take

    n = len(columns[0]) if columns else 0
    n_true = np.zeros(n, dtype=np.int32)
    chosen = np.full(n, len(classes), dtype=np.int64)  # the blank label
    repeated = np.zeros(n, dtype=bool)
    for j, col in enumerate(columns):
        codes, uniques = _distinct(col)
        is_true = np.array([u.strip().lower() == "true" for u in uniques] or [False])[codes]
        n_true += is_true
        chosen[is_true] = j
        if headers is not None:
            key = header_key(headers[j])
            spells = np.array([header_key(u) == key for u in uniques] or [False])[codes]
            repeated = spells if j == 0 else repeated & spells
    chosen[repeated] = len(classes) + 1
    names = pa.array([*classes, "", group], type=pa.string())
    labels = take(names, chosen)
    return labels, np.flatnonzero((n_true == 0) & ~repeated), np.flatnonzero(n_true > 1)
