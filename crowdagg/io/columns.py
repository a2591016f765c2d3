"""Which columns of a table hold the task, the worker and the label.

This layer only looks at a header -- a list of column names as any parser
gives them -- so it does not depend on how the file is read.  It knows
generic names (``task``/``item``/``question``, ``worker``/``annotator``/...,
``label``/``answer``/...) and the table exports of three platforms,
recognised without flags:

* Amazon Mechanical Turk batch results: ``HITId``, ``WorkerId`` and the one
  ``Answer.<name>`` column (``Input.<name>`` columns are task data), or one
  group of radio buttons -- ``Answer.<choice>.on`` columns, or
  ``Answer.<question>.<choice>`` columns, holding ``true``/``false`` (the
  caller says which columns hold only those, see :func:`map_answer_columns`);
  ``AssignmentStatus`` and ``Reject`` say which assignments were rejected;
* Toloka results: ``ASSIGNMENT:task_id``, ``ASSIGNMENT:worker_id`` and the
  one ``OUTPUT:<name>`` column (``INPUT:``, ``GOLDEN:``, ``HINT:`` and the
  other ``ASSIGNMENT:`` columns are not answers); ``ASSIGNMENT:status``
  says which were rejected or skipped;
* Label Studio's JSON-MIN and CSV exports (``id``, ``annotator``,
  ``annotation_id``, ``created_at``, ``updated_at``, ``lead_time``, one
  column per control and one per task data field): task ``id``, worker
  ``annotator``, and the control column -- the caller may say which columns
  are controls (``controls``); otherwise every column that is not Label
  Studio's own is a candidate.

When columns cannot be told apart, one error lists every role that is
missing or ambiguous, with the header, so one run tells all that is needed.

Names are compared after stripping surrounding whitespace, and
case-insensitively for the automatic matches; the names returned are the
original header strings, ready to select.  Problems are raised as one-line
:class:`~crowdagg.errors.DataError` (exit 1) or
:class:`~crowdagg.errors.UsageError` (exit 2) messages.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from ..errors import DataError, UsageError, param

__all__ = [
    "LABEL_ALIASES",
    "TASK_ALIASES",
    "TRUTH_ALIASES",
    "WORKER_ALIASES",
    "LABEL_STUDIO_META",
    "ColumnMap",
    "detect_platform",
    "map_answer_columns",
    "map_label_columns",
    "radio_groups",
]

#: Names (lower case) accepted for the task column; the first one wins over the others.
TASK_ALIASES: tuple[str, ...] = (
    "task",
    "item",
    "question",
    "task_id",
    "item_id",
    "question_id",
    "object",
    "example",
    "image",
)
#: Names (lower case) accepted for the worker column; the first one wins over the others.
WORKER_ALIASES: tuple[str, ...] = (
    "worker",
    "annotator",
    "rater",
    "performer",
    "labeler",
    "labeller",
    "worker_id",
    "annotator_id",
    "rater_id",
    "performer_id",
    "user",
    "user_id",
    "judge",
    "participant_id",
    "prolific_pid",
)
#: Names (lower case) accepted for the label column of an answers file; the first one wins.
LABEL_ALIASES: tuple[str, ...] = ("label", "answer", "response", "class", "annotation", "output", "value", "category")
#: Names (lower case) accepted for the label column of a truth/gold/predictions file; the first one wins.
TRUTH_ALIASES: tuple[str, ...] = (
    "label",
    "truth",
    "gold",
    "true_label",
    "true",
    "ground_truth",
    "answer",
    "class",
    "prediction",
    "value",
)

MTURK = "mturk"
TOLOKA = "toloka"
LABEL_STUDIO = "label_studio"

#: Columns every Label Studio JSON-MIN / CSV export has (lower case); they recognise one.
LABEL_STUDIO_KEYS: tuple[str, ...] = ("id", "annotator", "annotation_id")
#: Label Studio's own columns in those exports: never a control (label) column.
LABEL_STUDIO_META: tuple[str, ...] = (
    "id", "annotator", "annotation_id", "created_at", "updated_at", "lead_time", "agreement", "history",
)
#: Where each platform writes an assignment's status (lower case).
STATUS_COLUMNS: dict[str, str] = {MTURK: "assignmentstatus", TOLOKA: "assignment:status"}

_ANSWER_OPTIONS = {"task": param("task_col"), "worker": param("worker_col"), "label": param("label_col")}
_LABEL_OPTIONS = {"task": param("task_col"), "label": param("label_col")}
_MAX_LISTED = 40  # columns named in a "found columns" list


@dataclass(frozen=True)
class ColumnMap:
    """The columns to read from an answers file.

    Attributes
    ----------
    task, worker, label : str
        The original header strings (not stripped) of the three columns.
        For a group of MTurk radio buttons ``label`` is the group's name
        (``Answer.sentiment``, or ``Answer`` for ``Answer.<choice>.on``
        columns), and ``choices`` lists its columns.
    platform : str or None
        ``"mturk"``, ``"toloka"``, ``"label_studio"``, or None for a generic file.
    status : str or None
        The platform's assignment status column, when the header has one.
    reject : str or None
        MTurk's ``Reject`` column (a requester's pending rejection), when present.
    choices : tuple of (str, str)
        For radio buttons: (column, class) of each button, in header order;
        empty otherwise.
    """

    task: str
    worker: str
    label: str
    platform: str | None
    status: str | None = None
    reject: str | None = None
    choices: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class _Tier:
    """One rank of candidates: exact (stripped, lower-case) names, a name prefix, and/or given columns."""

    names: tuple[str, ...] = ()
    prefix: str | None = None
    columns: frozenset[str] = frozenset()

    def matches(self, name: str) -> bool:
        key = _key(name)
        return (
            key in self.names or (self.prefix is not None and key.startswith(self.prefix)) or name in self.columns
        )


@dataclass(frozen=True)
class _Rule:
    """How to find one role automatically: tiers tried in order, and the words of the message."""

    tiers: tuple[_Tier, ...]
    expected: str


def _generic_rule(aliases: Sequence[str]) -> _Rule:
    aliases = tuple(a.lower() for a in aliases)
    tiers = (_Tier(names=aliases[:1]), _Tier(names=aliases[1:])) if aliases else ()
    more = ", ..." if len(aliases) > 4 else ""
    return _Rule(tiers, f"one of {', '.join(aliases[:4])}{more}")


def _platform_rule(first: _Tier, what: str, generic: _Rule) -> _Rule:
    return _Rule((first, *generic.tiers), f"{what}, or {generic.expected}")


_PLATFORM_RULES: dict[str, dict[str, _Rule]] = {
    MTURK: {
        "task": _platform_rule(_Tier(names=("hitid",)), "HITId (MTurk)", _generic_rule(TASK_ALIASES)),
        "worker": _platform_rule(_Tier(names=("workerid",)), "WorkerId (MTurk)", _generic_rule(WORKER_ALIASES)),
        "label": _platform_rule(
            _Tier(prefix="answer."), "an Answer.<name> column (MTurk)", _generic_rule(LABEL_ALIASES)
        ),
    },
    TOLOKA: {
        "task": _platform_rule(
            _Tier(names=("assignment:task_id",)), "ASSIGNMENT:task_id (Toloka)", _generic_rule(TASK_ALIASES)
        ),
        "worker": _platform_rule(
            _Tier(names=("assignment:worker_id",)), "ASSIGNMENT:worker_id (Toloka)", _generic_rule(WORKER_ALIASES)
        ),
        "label": _platform_rule(
            _Tier(prefix="output:"), "an OUTPUT:<name> column (Toloka)", _generic_rule(LABEL_ALIASES)
        ),
    },
    LABEL_STUDIO: {
        "task": _platform_rule(_Tier(names=("id",)), "id (Label Studio)", _generic_rule(TASK_ALIASES)),
        "worker": _platform_rule(_Tier(names=("annotator",)), "annotator (Label Studio)", _generic_rule(WORKER_ALIASES)),
    },
}


def _key(name: object) -> str:
    return str(name).strip().lower()


def _listing(header: Sequence[str], shown: Mapping[str, str] | None = None) -> str:
    if not header:
        return "(none)"
    words = [(shown or {}).get(h) or repr(str(h)) for h in header[:_MAX_LISTED]]
    text = ", ".join(words)
    if len(header) > _MAX_LISTED:
        text += f", ... ({len(header) - _MAX_LISTED} more)"
    return text


def detect_platform(header: Sequence[str]) -> str | None:
    """The platform whose export has this header, or None.

    Parameters
    ----------
    header : sequence of str
        Column names as read.

    Returns
    -------
    str or None
        ``"mturk"`` when the header has ``HITId``, or ``WorkerId`` with an
        ``Answer.*`` column; ``"toloka"`` when it has an ``ASSIGNMENT:*`` or
        ``OUTPUT:*`` column; ``"label_studio"`` when it has ``id``,
        ``annotator`` and ``annotation_id`` (a JSON-MIN or CSV export); else None.
    """
    keys = [_key(h) for h in header]
    names = set(keys)
    if "hitid" in names or ("workerid" in names and any(k.startswith("answer.") for k in keys)):
        return MTURK
    if any(k.startswith(("assignment:", "output:")) for k in keys):
        return TOLOKA
    if names.issuperset(LABEL_STUDIO_KEYS):
        return LABEL_STUDIO
    return None


def radio_groups(header: Sequence[str], boolean: Iterable[str]) -> dict[str, list[tuple[str, str]]]:
    """MTurk radio-button groups: ``{group name: [(column, class), ...]}``, in header order.

    Parameters
    ----------
    header : sequence of str
        Column names as read.
    boolean : iterable of str
        The columns whose cells are all ``true``/``false`` (or blank).

    Returns
    -------
    dict
        An ``Answer.<choice>.on`` column belongs to the group ``Answer``
        (class ``<choice>``); an ``Answer.<question>.<choice>`` column (with
        or without ``.on``) to the group ``Answer.<question>``.  Only groups
        of two or more boolean columns are radio buttons; a lone boolean
        column (a consent checkbox) stays an ordinary answer column.
    """
    flags = set(boolean)
    groups: dict[str, list[tuple[str, str]]] = {}
    for h in header:
        name = str(h).strip()
        if h not in flags or not name.lower().startswith("answer."):
            continue
        parts = name.split(".")
        if parts[-1].lower() == "on" and len(parts) >= 3:
            parts = parts[:-1]
        elif len(parts) < 3:
            continue  # Answer.x: one question, one column -- not a button
        groups.setdefault(".".join(parts[:-1]), []).append((h, parts[-1]))
    return {g: cols for g, cols in groups.items() if len(cols) >= 2}


class _Unresolved(Exception):
    """One role's column cannot be found: its message alone, and its part of a message naming several."""

    def __init__(self, alone: str, part: str, usage: bool = False) -> None:
        super().__init__(alone)
        self.alone = alone
        self.part = part
        self.usage = usage


def _explicit(header: Sequence[str], given: str, option: str, extra: Sequence[str] = ()) -> str:
    """The header entry (or radio group, ``extra``) an explicit option names: exactly, else after stripping."""
    exact = [h for h in header if str(h) == given]
    if len(exact) > 1:
        msg = f"column {given!r} (from {option}) appears {len(exact)} times in the header"
        raise _Unresolved(msg, msg)
    if exact:
        return exact[0]
    stripped = [h for h in header if str(h).strip() == given.strip()]
    if len(stripped) > 1:
        msg = (
            f"{len(stripped)} columns match {given!r} (from {option}) once spaces are stripped: "
            f"{_listing(stripped)}; give the exact name"
        )
        raise _Unresolved(msg, msg)
    if stripped:
        return stripped[0]
    group = [g for g in extra if g.strip() == given.strip()]
    if group:
        return group[0]
    hint = ""
    folded = [h for h in [*header, *extra] if _key(h) == given.strip().lower()]
    if folded:
        hint = f"; did you mean {str(folded[0])!r}? (names are case-sensitive here)"
    raise _Unresolved(
        f"no column {given!r} (from {option}); found columns: {_listing(header)}{hint}",
        f"no column {given!r} (from {option}){hint}",
    )


def _automatic(
    header: Sequence[str], rule: _Rule, role: str, option: str, claimed: Mapping[str, str],
    shown: Mapping[str, str] | None = None,
) -> str:
    """The one column the rule finds, ignoring columns already taken by another role."""
    collided: list[str] = []
    for tier in rule.tiers:
        found = [h for h in header if tier.matches(h)]
        free = [h for h in found if h not in claimed]
        collided.extend(h for h in found if h in claimed)
        if len(free) == 1:
            return free[0]
        if len(free) > 1:
            if len(set(free)) == 1:
                msg = f"column {str(free[0])!r} appears {len(free)} times in the header"
                raise _Unresolved(msg, msg)
            listed = f"{len(free)} candidate {role} columns: {_listing(free, shown)}"
            raise _Unresolved(f"{listed}; set {option} to pick one", f"{listed} (set {option} to pick one)")
    if collided:
        col = collided[0]
        msg = (
            f"the {claimed[col]} and {role} columns must differ: {str(col)!r} is set as the "
            f"{claimed[col]} column and is the only {role} column found; set {option}"
        )
        raise _Unresolved(msg, msg, usage=True)
    raise _Unresolved(
        f"no {role} column; found columns: {_listing(header)} (expected {rule.expected}; or set {option})",
        f"no {role} column (expected {rule.expected}; or set {option})",
    )


def _resolve(
    header: Sequence[str],
    given: Mapping[str, str | None],
    rules: Mapping[str, _Rule],
    options: Mapping[str, str],
    source: str,
    candidates: Mapping[str, Sequence[str]] | None = None,
    shown: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """Every role's column; the problems of all roles in one error.

    ``candidates`` replaces the header for a role (MTurk radio groups stand
    for their columns); ``shown`` spells some candidates in messages.
    """
    header = list(header)
    in_header = set(header)  # a header can have 100,000s of fields: membership by hash, not by list scan
    pool = {role: list((candidates or {}).get(role, header)) for role in given}
    extra = {role: [c for c in pool[role] if c not in in_header] for role in given}
    chosen: dict[str, str] = {}
    problems: dict[str, _Unresolved] = {}
    for role, value in given.items():
        if value is not None:
            try:
                chosen[role] = _explicit(header, value, options[role], extra[role])
            except _Unresolved as exc:
                problems[role] = exc
    for role in given:
        if role not in chosen and role not in problems:
            claimed = {col: r for r, col in chosen.items()}
            try:
                chosen[role] = _automatic(pool[role], rules[role], role, options[role], claimed, shown)
            except _Unresolved as exc:
                problems[role] = exc
    usage = [p for p in problems.values() if p.usage]
    if usage:
        raise UsageError(f"{source}: {usage[0].alone}")
    if len(problems) == 1:
        raise DataError(f"{source}: {next(iter(problems.values())).alone}")
    if problems:
        parts = "; ".join(p.part for p in problems.values())
        raise DataError(f"{source}: cannot tell which columns to read: {parts}; found columns: {_listing(header)}")
    if len(set(chosen.values())) < len(chosen):
        roles = list(given)
        got = ", ".join(f"{role} {str(chosen[role])!r}" for role in roles)
        must = f"{', '.join(roles[:-1])} and {roles[-1]} must be {'three ' if len(roles) == 3 else ''}different columns"
        raise UsageError(f"{source}: {must} (got {got})")
    return {role: chosen[role] for role in given}


def _options(options: Mapping[str, str] | None, default: Mapping[str, str]) -> dict[str, str]:
    merged = dict(default)
    if options:
        merged.update(options)
    return merged


def _label_studio_rule(header: Sequence[str], controls: Iterable[str] | None) -> _Rule:
    """Label Studio's label: the given controls first, then any column that is not Label Studio's own."""
    own = {h for h in header if _key(h) in LABEL_STUDIO_META or _key(h).endswith("_transcript")}
    others = frozenset(h for h in header if h not in own)
    tiers = (_Tier(columns=frozenset(controls) & others),) if controls is not None else ()
    return _Rule(
        (*tiers, _Tier(columns=others)),
        "a control column (Label Studio: any column besides id, annotator, annotation_id, created_at, "
        "updated_at, lead_time)",
    )


def map_answer_columns(
    header: Sequence[str],
    *,
    source: str,
    task: str | None = None,
    worker: str | None = None,
    label: str | None = None,
    options: Mapping[str, str] | None = None,
    boolean: Iterable[str] = (),
    controls: Iterable[str] | None = None,
) -> ColumnMap:
    """Find the task, worker and label columns of an answers file.

    Parameters
    ----------
    header : sequence of str
        The column names as the parser read them.
    source : str
        The file's display name, for messages.
    task, worker, label : str, optional
        Explicit column names; each must equal a header name exactly or
        once surrounding whitespace is stripped from both.  An explicit
        ``label`` settles several candidate label columns; for MTurk radio
        buttons it may name a group (``Answer.sentiment``, or ``Answer``).
    options : mapping of str to str, optional
        How the caller spells each override in messages, by role
        (``"task"``, ``"worker"``, ``"label"``); roles left out keep the
        defaults: the keywords ``task_col``, ``worker_col``, ``label_col``
        (as :func:`~crowdagg.errors.param` references, which the CLI shows as flags).
    boolean : iterable of str, optional
        The columns whose cells are all ``true``/``false`` or blank (an MTurk
        export's radio buttons are found among them, see :func:`radio_groups`).
    controls : iterable of str, optional
        For a Label Studio export, the columns known to be controls (from the
        JSON-MIN key order, or from the answers varying within a task); they
        rank before the other non-Label-Studio columns.

    Returns
    -------
    ColumnMap
        The original header strings to select, the platform recognised, its
        status columns and, for radio buttons, the choices.

    Raises
    ------
    DataError
        A column is missing, an explicit name matches no column, or several
        columns could be the one wanted (they are all listed).  When several
        roles have such a problem, one error names them all, with the header.
    UsageError
        Two roles fall on the same column.

    Notes
    -----
    Each role not given is found by trying, in order: the platform's column
    (MTurk ``HITId``/``WorkerId``/``Answer.*`` or a radio group, Toloka
    ``ASSIGNMENT:task_id``/``ASSIGNMENT:worker_id``/``OUTPUT:*``, Label
    Studio ``id``/``annotator``/its control column), the canonical name
    (``task``, ``worker``, ``label``), then the other aliases.  The first
    rank holding a candidate decides; two candidates in it are an error.
    Columns given explicitly for another role are not candidates.
    """
    opts = _options(options, _ANSWER_OPTIONS)
    platform = detect_platform(header)
    header = list(header)
    generic = {
        "task": _generic_rule(TASK_ALIASES),
        "worker": _generic_rule(WORKER_ALIASES),
        "label": _generic_rule(LABEL_ALIASES),
    }
    rules = {**generic, **_PLATFORM_RULES.get(platform or "", {})}
    candidates: dict[str, list[str]] = {}
    shown: dict[str, str] = {}
    groups: dict[str, list[tuple[str, str]]] = {}
    if platform == MTURK:
        groups = radio_groups(header, boolean)
        members = {col for buttons in groups.values() for col, _ in buttons}
        candidates["label"] = [h for h in header if h not in members] + list(groups)
        for g, buttons in groups.items():
            shown[g] = f"{g!r} (radio buttons {_listing([c for c, _ in buttons])})"
        if groups:
            first, *rest = rules["label"].tiers
            rules["label"] = _Rule(
                (_Tier(first.names, first.prefix, frozenset(groups)), *rest), rules["label"].expected
            )
    elif platform == LABEL_STUDIO:
        rules["label"] = _label_studio_rule(header, controls)
    cols = _resolve(
        header, {"task": task, "worker": worker, "label": label}, rules, opts, source, candidates, shown
    )
    status = reject = None
    if platform in STATUS_COLUMNS:
        found = [h for h in header if _key(h) == STATUS_COLUMNS[platform]]
        status = found[0] if len(found) == 1 else None
    if platform == MTURK:
        found = [h for h in header if _key(h) == "reject"]
        reject = found[0] if len(found) == 1 else None
    choices = tuple(groups.get(cols["label"], ()))
    return ColumnMap(
        task=cols["task"], worker=cols["worker"], label=cols["label"], platform=platform,
        status=status, reject=reject, choices=choices,
    )


def map_label_columns(
    header: Sequence[str],
    *,
    source: str,
    task: str | None = None,
    label: str | None = None,
    options: Mapping[str, str] | None = None,
    aliases: Sequence[str] = TRUTH_ALIASES,
) -> tuple[str, str]:
    """Find the task and label columns of a two-column file (truth, gold, predictions).

    Parameters
    ----------
    header : sequence of str
        The column names as the parser read them.
    source : str
        The file's display name, for messages.
    task, label : str, optional
        Explicit column names (exact, or equal once whitespace is stripped).
    options : mapping of str to str, optional
        How the caller spells each override in messages, by role; defaults
        the keywords ``task_col`` and ``label_col``.
    aliases : sequence of str, default TRUTH_ALIASES
        Lower-case names accepted for the label column; the first one wins
        over the others.

    Returns
    -------
    (str, str)
        The original header strings of the task and the label column.

    Raises
    ------
    DataError
        A column is missing or ambiguous, or an explicit name matches none
        (both roles' problems in one error).
    UsageError
        Task and label fall on the same column.
    """
    opts = _options(options, _LABEL_OPTIONS)
    rules = {"task": _generic_rule(TASK_ALIASES), "label": _generic_rule(aliases)}
    cols = _resolve(header, {"task": task, "label": label}, rules, opts, source)
    return cols["task"], cols["label"]
