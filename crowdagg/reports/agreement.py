r"""Agreement statistics, for people to read: how far the workers agree (``crowdagg stats``).

:func:`stats` -- the figures crowd-kit's ``metrics`` module offers, from one
pass over the answers (:func:`crowdagg.kernels.agreement.group_counts`) and one
fit of an aggregation method (majority vote by default):

==================  ============================================================================
statistic           what it is
==================  ============================================================================
krippendorff_alpha  Krippendorff's alpha, nominal: ``1 − (n − 1)(n − A)/(n² − Σ_c n_c²)`` over
                    the tasks of two answers or more (``n`` their answers, ``n_c`` those in
                    class ``c``, ``A = Σ_u Σ_c n_uc(n_uc − 1)/(m_u − 1)`` the coincidences within
                    a class); undefined -- said, not a number -- when no task has two answers
                    or all of those answers are one class.  Every answer is one value, so a
                    worker who answered a task twice (``duplicates="keep"``) counts twice.
fleiss_kappa        Fleiss' kappa, ``(P̄ − P_e)/(1 − P_e)``, where every task with answers has
                    the same number ``m ≥ 2`` of them; otherwise the statement says how many
                    tasks have how many answers, since the formula assumes one ``m``.
uncertainty         the mean over tasks of the entropy, nats, of a task's answers
                    (crowd-kit's ``uncertainty``; per task in :meth:`Agreement.tasks`)
agreement           the share of all answers equal to the method's label of their task
                    (crowd-kit's ``accuracy_on_aggregates``; per worker in
                    :meth:`Agreement.workers`: the worker's consistency with the aggregate)
consistency         crowd-kit's ``consistency``: the mean over tasks of the posterior of the
                    method's label when each worker is right with its ``agreement`` share
                    and wrong uniformly over the other classes (a one-coin model, uniform
                    prior) -- a per-task quantity, not the per-worker agreement
==================  ============================================================================

crowd-kit's ``consistency`` and its ``accuracy_on_aggregates`` are different
figures: the first is a posterior per task, averaged over tasks; the second
the share of a worker's answers that match the aggregate (both are
reported).  Where crowd-kit's ``consistency`` takes the aggregator's
``skills_`` (majority vote's are exactly the agreement shares here), this
takes the agreement shares for every method, so it exists for methods whose
crowd-kit class has no ``skills_`` (Dawid--Skene).  Differences from
crowd-kit, by design: the class count ``K`` of the one-coin model is the
data's classes (crowd-kit counts the labels present in the answers: the
same, unless ``classes`` names one nobody chose); the posterior is computed
in logs (crowd-kit's product of probabilities underflows to 0/0, and then
0, past a few hundred answers on a task); a repeated identical answer of a
worker on a task counts each time (crowd-kit's ``get_accuracy`` counts it
once; read with ``duplicates="last"`` there are none).

:func:`co_occurrence` -- the co-occurrence statistics of the co-labelled
worker pairs (:mod:`crowdagg.kernels.cooc`), for a report or a notebook
that builds on them (``crowdagg workers --pairs``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ..core.memory import MaxMemory
from ..data.annotations import AnnotationSet
from ..engine import LocalEngine
from ..kernels import cooc
from ..kernels.cooc import CoOccurrence

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from ..methods.result import AggregationResult

#: The columns of :meth:`Agreement.summary`, :meth:`Agreement.tasks` and :meth:`Agreement.workers`.
SUMMARY_COLUMNS = ("statistic", "value", "note")
TASK_COLUMNS = ("task", "answers", "label", "agreement", "uncertainty", "consistency")
WORKER_COLUMNS = ("worker", "answers", "agreement", "uncertainty")
#: Bytes the statistics hold per task (answers, squares, entropy, label, share, posterior), per worker
#: (answers, agreement, entropy, and its answers' order: 8 bytes an answer) -- the up-front memory check.
BYTES_PER_TASK = 48
BYTES_PER_WORKER = 32
BYTES_PER_ANSWER = 16
#: The narrowest terminal table (a narrower terminal wraps it rather than crop the notes).
TERMINAL_WIDTH = 80
#: How many answer counts the Fleiss statement lists before it says how many more there are.
FLEISS_COUNTS_SHOWN = 4


def co_occurrence(data: AnnotationSet, weights: Any = None, *, engine: Any = None,
                  max_memory: MaxMemory = None) -> CoOccurrence:
    """The co-occurrence statistics of ``data``'s co-labelled worker pairs (:func:`crowdagg.kernels.cooc.co_occurrence`).

    Parameters
    ----------
    data : AnnotationSet
    weights : array-like of float, shape (n_tasks,), optional
        Per-task weights (the joint counts are then float64 sums).
    engine : engine, optional
        An engine over ``data`` to run on (default: ``LocalEngine(data)``, this machine's threads).
    max_memory : int, float, str or None

    Returns
    -------
    CoOccurrence
        ``pairs`` (P, 2) int32 worker codes (``data.worker_names[pairs]`` their names), ``joint``
        (P, K, K), ``n_tasks`` (P,).
    """
    if engine is None and not isinstance(data, AnnotationSet):
        from ..errors import UsageError, param

        raise UsageError(f"co_occurrence takes an AnnotationSet (or an {param('engine')} over one), got "
                         f"{type(data).__name__}")
    return cooc.co_occurrence(LocalEngine(data) if engine is None else engine, weights, max_memory=max_memory)




@dataclass(frozen=True)
class Agreement:
    """The agreement statistics of a crowd (:func:`stats`); the module notes define each.

    Attributes
    ----------
    method : str
        The method whose labels ``agreement`` and ``consistency`` are measured against.
    alpha : float
        Krippendorff's alpha, nominal (NaN when undefined: ``alpha_note`` says why).
    alpha_note : str
        What alpha was computed over, or why it is undefined.
    fleiss_kappa : float
        NaN where it does not apply (``fleiss_note`` says why).
    fleiss_note : str
    answer_counts : dict of int to int
        Answers a task has -> tasks with that many (tasks without answers left out), by count.
    task_names : ndarray of object, shape (n_tasks,)
    task_answers : ndarray of int64, shape (n_tasks,)
    task_labels : ndarray of object, shape (n_tasks,)
        The method's label of each task (class names).
    task_agreement, task_uncertainty, task_consistency : ndarray of float64, shape (n_tasks,)
        The share of the task's answers equal to its label, the entropy of its answers (nats) and
        crowd-kit's consistency (the posterior of its label); NaN for a task without answers.
    worker_names : ndarray of object, shape (n_workers,)
    worker_answers : ndarray of int64, shape (n_workers,)
    worker_agreement, worker_uncertainty : ndarray of float64, shape (n_workers,)
        The share of the worker's answers equal to the label of their task, and the entropy of its
        answers (nats; crowd-kit's ``uncertainty(compute_by="worker")``).
    """

    method: str
    alpha: float
    alpha_note: str
    fleiss_kappa: float
    fleiss_note: str
    answer_counts: dict[int, int]
    task_names: np.ndarray
    task_answers: np.ndarray
    task_labels: np.ndarray
    task_agreement: np.ndarray
    task_uncertainty: np.ndarray
    task_consistency: np.ndarray
    worker_names: np.ndarray
    worker_answers: np.ndarray
    worker_agreement: np.ndarray
    worker_uncertainty: np.ndarray

    @property
    def uncertainty(self) -> float:
        """The mean entropy of a task's answers, nats, over the tasks with answers (crowd-kit's ``uncertainty``)."""
        return _mean(self.task_uncertainty)

    @property
    def agreement(self) -> float:
        """The share of all answers equal to their task's label (crowd-kit's ``accuracy_on_aggregates``)."""
        total = int(self.worker_answers.sum())
        return float(np.nansum(self.worker_agreement * self.worker_answers) / total) if total else float("nan")

    @property
    def consistency(self) -> float:
        """The mean over the tasks with answers of the posterior of their label (crowd-kit's ``consistency``)."""
        return _mean(self.task_consistency)

    def summary(self) -> pd.DataFrame:
        """One row per statistic: ``statistic``, ``value`` (missing where undefined), ``note``."""
        import pandas as pd

        method = self.method
        rows = [
            ("krippendorff_alpha", self.alpha, self.alpha_note),
            ("fleiss_kappa", self.fleiss_kappa, self.fleiss_note),
            ("uncertainty", self.uncertainty, "mean entropy of a task's answers, nats"),
            ("agreement", self.agreement, f"share of the answers equal to {method}'s label"),
            ("consistency", self.consistency,
             f"mean posterior of {method}'s label, each worker right with its agreement share"),
        ]
        # alpha and kappa say why they are undefined; the means are undefined only without a single answer
        notes = [note if i < 2 or not np.isnan(value) else "undefined: no answers"
                 for i, (_, value, note) in enumerate(rows)]
        return pd.DataFrame({
            "statistic": [r[0] for r in rows],
            "value": _nullable(np.array([r[1] for r in rows], dtype=np.float64)),
            "note": notes,
        })

    def tasks(self) -> pd.DataFrame:
        """One row per task (:data:`TASK_COLUMNS`), in the data's order; missing numbers for a task without answers."""
        import pandas as pd

        return pd.DataFrame({
            "task": self.task_names, "answers": self.task_answers, "label": self.task_labels,
            "agreement": _nullable(self.task_agreement), "uncertainty": _nullable(self.task_uncertainty),
            "consistency": _nullable(self.task_consistency),
        })

    def workers(self) -> pd.DataFrame:
        """One row per worker (:data:`WORKER_COLUMNS`), in the data's order."""
        import pandas as pd

        return pd.DataFrame({
            "worker": self.worker_names, "answers": self.worker_answers,
            "agreement": _nullable(self.worker_agreement), "uncertainty": _nullable(self.worker_uncertainty),
        })


def stats(data: Any, result: AggregationResult | None = None, *, method: str | None = None,
          max_memory: MaxMemory = None, **params: Any) -> Agreement:
    """The agreement statistics of ``data`` (the module notes define them).

    Parameters
    ----------
    data : AnnotationSet, DataFrame, list of records, or path
        The answers (anything :func:`crowdagg.aggregate` reads).
    result : AggregationResult, optional
        A fit on ``data`` whose labels ``agreement`` and ``consistency`` measure against (default: a fit
        of ``method`` with ``params``).
    method : str, optional
        The method fitted when ``result`` is not given (default ``"mv"``, as crowd-kit's metrics); with a
        ``result``, only its own method (another is refused rather than silently not used).
    max_memory : int, float, str or None
        The up-front memory check's limit (:mod:`crowdagg.core.memory`).
    **params
        The method's parameters.

    Returns
    -------
    Agreement

    Examples
    --------
    >>> import pandas as pd
    >>> from crowdagg.reports.agreement import stats
    >>> df = pd.DataFrame({"task": [1, 1, 2, 2, 3, 3], "worker": list("ababab"), "label": list("xxyyxy")})
    >>> round(stats(df).alpha, 4)
    0.4444
    """
    from ..errors import UsageError, param
    from ..methods.api import _as_annotations
    from ..methods.api import aggregate as fit

    if not isinstance(data, AnnotationSet):
        data = _as_annotations(data, max_memory, (None, None, None), takes="stats takes")
    check_memory(data, max_memory)
    if result is None:
        result = fit(data, "mv" if method is None else method, max_memory=max_memory, **params)
    elif method is not None and method != getattr(result, "method", method):
        raise UsageError(f"{param('method')}={method!r} names a fit, but the result given is a fit of {result.method!r}; "
                         f"give a method or a result, not both")
    elif params:
        raise UsageError(f"parameters ({', '.join(sorted(params))}) apply to the fit; give them or a result, not both")
    else:
        _check_result(data, result)
    return _figures(data, result, max_memory)


def check_memory(data: AnnotationSet, max_memory: MaxMemory = None) -> None:
    """Refuse the statistics of ``data`` up front where they would not fit in ``max_memory`` (before a fit, which
    they then need not wait for): :data:`BYTES_PER_TASK`, :data:`BYTES_PER_WORKER` and :data:`BYTES_PER_ANSWER`."""
    from ..core.memory import check

    check(data.n_tasks * BYTES_PER_TASK + data.n_workers * BYTES_PER_WORKER + data.n_answers * BYTES_PER_ANSWER,
          f"the statistics of {data.n_tasks:,} tasks, {data.n_workers:,} workers, {data.n_answers:,} answers",
          max_memory)


def _check_result(data: AnnotationSet, result: Any) -> None:
    """A ``result`` given to :func:`stats` refused unless it is a fit on ``data``: the kernels index their tables
    with its labels unchecked, so a label beyond the data's classes would read outside them."""
    from ..errors import UsageError, param
    from ..kernels.validate import check_index
    from ..methods.result import AggregationResult

    if not isinstance(result, AggregationResult):
        raise UsageError(f"{param('result')} must be an AggregationResult (what crowdagg.aggregate returns) or None, "
                         f"got {type(result).__name__}")
    labels, posteriors = np.asarray(result.labels), np.asarray(result.posteriors)
    if labels.shape != (data.n_tasks,) or posteriors.shape != (data.n_tasks, data.n_classes):
        raise UsageError(f"{param('result')} was fitted on other answers: {labels.size:,} tasks × "
                         f"{posteriors.shape[-1] if posteriors.ndim else 0} classes; the data has {data.n_tasks:,} × "
                         f"{data.n_classes}")
    # the same answers read twice are two objects: the same tasks and classes, in the same order, are the same data
    fitted = result.data
    if fitted is not data and not (isinstance(fitted, AnnotationSet) and list(fitted.classes) == list(data.classes)
                                   and np.array_equal(fitted.task_names, data.task_names)):
        raise UsageError(f"{param('result')} was fitted on other answers: as many tasks and classes as the data, "
                         f"but other ones or in another order")
    check_index(labels, data.n_classes, "result.labels", "class")


def _figures(data: AnnotationSet, result: AggregationResult, max_memory: MaxMemory) -> Agreement:
    """:func:`stats`' figures of a checked ``data`` and ``result``."""
    from ..kernels.agreement import _group_counts, _label_posterior
    from ..methods.blocks import agreement_with_block

    k = data.n_classes
    size, squares, entropy, totals, pairable = _group_counts(data.task_ptr, np.zeros(0, np.int64), data.label, k,
                                                             False)
    w_size, _, w_entropy, _, _ = _group_counts(data.worker_ptr, data.worker_order, data.label, k, True)
    labels = np.ascontiguousarray(result.labels, dtype=np.int64)
    (right, total), _ = LocalEngine(data).map_reduce(agreement_with_block, (labels, False))
    with np.errstate(invalid="ignore", divide="ignore"):
        skill = np.where(total > 0, right / np.where(total > 0, total, 1), np.nan)
    # a worker without answers has no skill and no answer for it to weigh: any number does
    share, posterior = _label_posterior(data.task_ptr, data.worker, data.label, labels, np.nan_to_num(skill), k)
    alpha, alpha_note = krippendorff_alpha(size, squares, pairable)
    kappa, kappa_note, counts = fleiss_kappa(size, squares, totals)
    return Agreement(
        method=result.method, alpha=alpha, alpha_note=alpha_note, fleiss_kappa=kappa, fleiss_note=kappa_note,
        answer_counts=counts, task_names=data.task_names, task_answers=size,
        task_labels=np.asarray(data.classes, dtype=object)[labels] if k else np.zeros(0, object),
        task_agreement=share, task_uncertainty=entropy, task_consistency=posterior,
        worker_names=data.worker_names, worker_answers=w_size, worker_agreement=skill, worker_uncertainty=w_entropy,
    )


def krippendorff_alpha(size: np.ndarray, squares: np.ndarray, pairable: np.ndarray) -> tuple[float, str]:
    """Krippendorff's alpha, nominal, from per-task class-count statistics (:func:`~crowdagg.kernels.agreement.group_counts`).

    Parameters
    ----------
    size, squares : ndarray of int, shape (n_tasks,)
        Each task's answers ``m_u`` and ``Σ_c n_uc²``.
    pairable : ndarray of int, shape (n_classes,)
        Answers in each class on tasks of two answers or more (``n_c``).

    Returns
    -------
    alpha : float
        ``1 − (n − 1)(n − A)/(n² − Σ_c n_c²)``, ``A = Σ_u (Σ_c n_uc² − m_u)/(m_u − 1)`` over the tasks of
        two answers or more and ``n`` their answers; NaN when undefined.
    note : str
        What it was computed over, or why it is undefined.
    """
    size, squares = _task_counts(size, squares)
    pairable = _counts(pairable, "pairable")
    pairs = size >= 2
    n_units = int(np.count_nonzero(pairs))
    if n_units == 0:
        return float("nan"), "undefined: no task has two answers or more (nothing to agree on)"
    m = size[pairs].astype(np.float64)
    n = float(m.sum())
    within = float(((squares[pairs] - m) / (m - 1.0)).sum())
    spread = n * n - float(np.square(pairable.astype(np.float64)).sum())
    if spread == 0.0:
        return float("nan"), ("undefined: every answer on the tasks of two answers or more is one class "
                              "(no disagreement was possible)")
    alpha = 1.0 - (n - 1.0) * (n - within) / spread
    return alpha, f"nominal, over the {_count(int(n), 'answer')} of the {_count(n_units, 'task')} with two or more"


def fleiss_kappa(size: np.ndarray, squares: np.ndarray, totals: np.ndarray) -> tuple[float, str, dict[int, int]]:
    """Fleiss' kappa where every task with answers has the same number ``m ≥ 2`` of them.

    ``P̄`` the mean over tasks of ``(Σ_c n_uc² − m)/(m(m − 1))``, ``P_e = Σ_c p_c²`` with ``p_c`` the share of
    all answers in class ``c``; kappa ``(P̄ − P_e)/(1 − P_e)``.

    Parameters
    ----------
    size, squares : ndarray of int, shape (n_tasks,)
        Each task's answers and ``Σ_c n_uc²``.
    totals : ndarray of int, shape (n_classes,)
        Answers in each class.

    Returns
    -------
    kappa : float
        NaN where it does not apply.
    note : str
        The tasks and answers it was computed over, or why it does not apply: how many tasks have how
        many answers, the most common counts first.
    counts : dict of int to int
        Answers a task has -> how many tasks (tasks without answers left out), by count.
    """
    size, squares = _task_counts(size, squares)
    totals = _counts(totals, "totals")
    answered = size[size > 0]
    values, freq = np.unique(answered, return_counts=True)
    counts = {int(v): int(f) for v, f in zip(values, freq)}
    if not counts:
        return float("nan"), "does not apply: no task has an answer", counts
    if len(counts) > 1:
        ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
        shown = ", ".join(f"{_count(f, 'task')} with {_count(v, 'answer')}" if i == 0 else f"{f:,} with {v:,}"
                          for i, (v, f) in enumerate(ranked[:FLEISS_COUNTS_SHOWN]))
        more = len(ranked) - FLEISS_COUNTS_SHOWN
        rest = f" and {more:,} other count{'s' if more > 1 else ''}" if more > 0 else ""
        return (float("nan"), f"does not apply: the tasks have different numbers of answers ({shown}{rest}); "
                f"Fleiss' kappa needs the same number on every task", counts)
    m = int(values[0])
    n_tasks = int(freq[0])
    if m < 2:
        return float("nan"), "does not apply: every task has one answer (nothing to agree on)", counts
    if np.count_nonzero(totals) == 1:
        return float("nan"), "undefined: every answer is one class (no disagreement was possible)", counts
    p_bar = float(((squares[size > 0] - m) / (m * (m - 1.0))).mean())
    p = totals / float(totals.sum())
    p_e = float(np.dot(p, p))
    return (p_bar - p_e) / (1.0 - p_e), f"{_count(n_tasks, 'task')} of {m:,} answers each", counts


def _counts(values: Any, name: str) -> np.ndarray:
    """``values`` as a 1-D int64 array of counts (>= 0), or a DataError naming ``name``."""
    from ..errors import DataError
    from ..kernels.validate import as_code_array

    arr = as_code_array(values, name).astype(np.int64, copy=False)
    if arr.size and arr.min() < 0:
        at = int(np.argmin(arr))
        raise DataError(f"{name} holds counts, got {int(arr[at])} at position {at}")
    return arr


def _task_counts(size: Any, squares: Any) -> tuple[np.ndarray, np.ndarray]:
    """Each task's answers ``m`` and ``Σ_c n_c²`` checked as counts of one crowd: as many of each, and
    ``m ≤ Σ_c n_c² ≤ m²`` (class counts that sum to ``m``), which the formulas rely on."""
    from ..errors import DataError

    m, sq = _counts(size, "size"), _counts(squares, "squares")
    if m.shape != sq.shape:
        raise DataError(f"size has {m.shape[0]:,} tasks, squares {sq.shape[0]:,}")
    bad = np.flatnonzero((sq < m) | (sq > m * m))
    if bad.size:
        t = int(bad[0])
        raise DataError(f"task {t} has {int(m[t])} answers but squares {int(sq[t])}: the squared class counts of "
                        f"{int(m[t])} answers sum to between {int(m[t])} and {int(m[t]) ** 2}")
    return m, sq


def _count(n: int, noun: str) -> str:
    """``1 task``, ``2,000 tasks``."""
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def print_table(figures: Agreement, stream: Any) -> None:
    """The statistics as a rich table for a terminal: statistic, value (4 decimals; ``-`` where undefined), note
    (folded onto more lines rather than widening the table past 80 columns)."""
    import pandas as pd
    from rich import box
    from rich.console import Console
    from rich.table import Table

    from . import terminal_text

    table = Table(title=f"agreement ({figures.method}'s labels)", box=box.SIMPLE_HEAD, pad_edge=False,
                  padding=(0, 1, 0, 0), caption="per task: --tasks FILE; per worker: --workers FILE")
    table.add_column("statistic", no_wrap=True)
    table.add_column("value", justify="right", no_wrap=True)
    table.add_column("note", overflow="fold")
    frame = figures.summary()
    for name, value, note in zip(frame["statistic"], frame["value"], frame["note"]):
        shown = "-" if value is pd.NA else f"{float(value):.4f}"
        table.add_row(name, shown, terminal_text(note))
    console = Console(file=stream)
    console.width = max(min(console.width, 100), TERMINAL_WIDTH)
    console.print(table)


def _mean(values: np.ndarray) -> float:
    """The mean of the non-NaN entries, NaN when there is none (without numpy's warning)."""
    kept = values[~np.isnan(values)]
    return float(kept.mean()) if kept.size else float("nan")


def _nullable(values: np.ndarray) -> Any:
    """A float column with NaN as pandas' NA (the writers' missing cell)."""
    import pandas as pd

    return pd.array(values, dtype="Float64")  # NaN becomes NA: pandas' from-numpy rule


__all__ = ["Agreement", "check_memory", "co_occurrence", "fleiss_kappa", "krippendorff_alpha", "stats"]
