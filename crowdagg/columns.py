"""Which columns of a table hold the task, the worker and the label.

This layer only looks at a header -- a list of column names as any parser
gives them -- so it does not depend on how the file is read.  It knows
generic names (``task``/``item``/``question``, ``worker``/``annotator``/...,
``label``/``answer``/...) and the result files of two platforms, recognised
without flags:

* Amazon Mechanical Turk batch results: ``HITId``, ``WorkerId`` and the one
  ``Answer.<name>`` column (``Input.<name>`` columns are task data);
* Toloka results: ``ASSIGNMENT:task_id``, ``ASSIGNMENT:worker_id`` and the
  one ``OUTPUT:<name>`` column (``INPUT:``, ``GOLDEN:``, ``HINT:`` and the
  other ``ASSIGNMENT:`` columns are not answers).

Names are compared after stripping surrounding whitespace, and
case-insensitively for the automatic matches; the names returned are the
original header strings, ready to select.  Problems are raised as one-line
:class:`~crowdagg.errors.DataError` (exit 1) or
:class:`~crowdagg.errors.UsageError` (exit 2) messages.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from .errors import DataError, UsageError, param

__all__ = [
    "LABEL_ALIASES",
    "TASK_ALIASES",
    "TRUTH_ALIASES",
    "WORKER_ALIASES",
    "ColumnMap",
    "detect_platform",
    "map_answer_columns",
    "map_label_columns",
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
)

MTURK = "mturk"
TOLOKA = "toloka"

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
    platform : str or None
        ``"mturk"``, ``"toloka"``, or None for a generic file.
    """

    task: str
    worker: str
    label: str
    platform: str | None


@dataclass(frozen=True)
class _Tier:
    """One rank of candidates: exact (stripped, lower-case) names and/or a name prefix."""

    names: tuple[str, ...] = ()
    prefix: str | None = None

    def matches(self, key: str) -> bool:
        return key in self.names or (self.prefix is not None and key.startswith(self.prefix))


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
}


def _key(name: object) -> str:
    return str(name).strip().lower()


def _listing(header: Sequence[str]) -> str:
    if not header:
        return "(none)"
    shown = ", ".join(repr(str(h)) for h in header[:_MAX_LISTED])
    if len(header) > _MAX_LISTED:
        shown += f", ... ({len(header) - _MAX_LISTED} more)"
    return shown


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
        ``OUTPUT:*`` column; else None.
    """
    keys = [_key(h) for h in header]
    names = set(keys)
    if "hitid" in names or ("workerid" in names and any(k.startswith("answer.") for k in keys)):
        return MTURK
    if any(k.startswith(("assignment:", "output:")) for k in keys):
        return TOLOKA
    return None


def _explicit(header: Sequence[str], given: str, option: str, source: str) -> str:
    """The header entry an explicit option names: exactly, else after stripping."""
    exact = [h for h in header if str(h) == given]
    if len(exact) > 1:
        raise DataError(f"{source}: column {given!r} (from {option}) appears {len(exact)} times in the header")
    if exact:
        return exact[0]
    stripped = [h for h in header if str(h).strip() == given.strip()]
    if len(stripped) > 1:
        raise DataError(
            f"{source}: {len(stripped)} columns match {given!r} (from {option}) once spaces are stripped: "
            f"{_listing(stripped)}; give the exact name"
        )
    if stripped:
        return stripped[0]
    hint = ""
    folded = [h for h in header if _key(h) == given.strip().lower()]
    if folded:
        hint = f"; did you mean {str(folded[0])!r}? (names are case-sensitive here)"
    raise DataError(f"{source}: no column {given!r} (from {option}); found columns: {_listing(header)}{hint}")


def _automatic(
    header: Sequence[str], rule: _Rule, role: str, option: str, source: str, claimed: Mapping[str, str]
) -> str:
    """The one column the rule finds, ignoring columns already taken by another role."""
    collided: list[str] = []
    for tier in rule.tiers:
        found = [h for h in header if tier.matches(_key(h))]
        free = [h for h in found if h not in claimed]
        collided.extend(h for h in found if h in claimed)
        if len(free) == 1:
            return free[0]
        if len(free) > 1:
            if len(set(free)) == 1:
                raise DataError(f"{source}: column {str(free[0])!r} appears {len(free)} times in the header")
            raise DataError(
                f"{source}: {len(free)} candidate {role} columns: {_listing(free)}; set {option} to pick one"
            )
    if collided:
        col = collided[0]
        raise UsageError(
            f"{source}: the {claimed[col]} and {role} columns must differ: {str(col)!r} is set as the "
            f"{claimed[col]} column and is the only {role} column found; set {option}"
        )
    raise DataError(
        f"{source}: no {role} column; found columns: {_listing(header)} (expected {rule.expected}; or set {option})"
    )


def _resolve(
    header: Sequence[str],
    given: Mapping[str, str | None],
    rules: Mapping[str, _Rule],
    options: Mapping[str, str],
    source: str,
) -> dict[str, str]:
    header = list(header)
    chosen: dict[str, str] = {}
    for role, value in given.items():
        if value is not None:
            chosen[role] = _explicit(header, value, options[role], source)
    for role in given:
        if role not in chosen:
            claimed = {col: r for r, col in chosen.items()}
            chosen[role] = _automatic(header, rules[role], role, options[role], source, claimed)
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


def map_answer_columns(
    header: Sequence[str],
    *,
    source: str,
    task: str | None = None,
    worker: str | None = None,
    label: str | None = None,
    options: Mapping[str, str] | None = None,
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
        ``label`` settles several candidate label columns.
    options : mapping of str to str, optional
        How the caller spells each override in messages, by role
        (``"task"``, ``"worker"``, ``"label"``); roles left out keep the
        defaults: the keywords ``task_col``, ``worker_col``, ``label_col``
        (as :func:`~crowdagg.errors.param` references, which the CLI shows as flags).

    Returns
    -------
    ColumnMap
        The original header strings to select, and the platform recognised.

    Raises
    ------
    DataError
        A column is missing, an explicit name matches no column, or several
        columns could be the one wanted (they are all listed).
    UsageError
        Two roles fall on the same column.

    Notes
    -----
    Each role not given is found by trying, in order: the platform's column
    (MTurk ``HITId``/``WorkerId``/``Answer.*``, Toloka
    ``ASSIGNMENT:task_id``/``ASSIGNMENT:worker_id``/``OUTPUT:*``), the
    canonical name (``task``, ``worker``, ``label``), then the other aliases.
    The first rank holding a candidate decides; two candidates in it are an
    error.  Columns given explicitly for another role are not candidates.
    """
    opts = _options(options, _ANSWER_OPTIONS)
    platform = detect_platform(header)
    if platform is None:
        rules = {
            "task": _generic_rule(TASK_ALIASES),
            "worker": _generic_rule(WORKER_ALIASES),
            "label": _generic_rule(LABEL_ALIASES),
        }
    else:
        rules = _PLATFORM_RULES[platform]
    cols = _resolve(header, {"task": task, "worker": worker, "label": label}, rules, opts, source)
    return ColumnMap(task=cols["task"], worker=cols["worker"], label=cols["label"], platform=platform)


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
        A column is missing or ambiguous, or an explicit name matches none.
    UsageError
        Task and label fall on the same column.
    """
    opts = _options(options, _LABEL_OPTIONS)
    rules = {"task": _generic_rule(TASK_ALIASES), "label": _generic_rule(aliases)}
    cols = _resolve(header, {"task": task, "label": label}, rules, opts, source)
    return cols["task"], cols["label"]
