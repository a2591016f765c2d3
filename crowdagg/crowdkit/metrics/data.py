"""crowd-kit's ``crowdkit.metrics.data``: ``alpha_krippendorff``, ``consistency``, ``uncertainty``.

Each encodes the answers once (:class:`~crowdagg.crowdkit._answers.Answers`)
and runs crowdagg's agreement kernels on them
(:mod:`crowdagg.kernels.agreement`, the figures of ``crowdagg stats``,
:mod:`crowdagg.reports.agreement`); the one-coin model of ``consistency``
and ``uncertainty`` takes ``K`` as the number of distinct labels in the
answers, as crowd-kit does.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING, Any

import numpy as np

from .._answers import Answers, sort_order
from .workers import MAJORITY_VOTE, aggregator_or_default

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd


def _skills(ans: Answers, skills: Any) -> np.ndarray:
    """``skills`` (a Series by worker, or a one-column DataFrame, as crowd-kit takes it) as each worker's skill by
    worker code; a missing one is a ValueError naming the worker, and so is one outside [0, 1] (a one-coin
    worker's chance of a right answer), a worker named twice, or text (pandas' and numpy's messages named neither)."""
    import pandas as pd

    if isinstance(skills, pd.DataFrame):
        if skills.shape[1] != 1:
            raise ValueError(f"workers_skills is a DataFrame of {skills.shape[1]} columns: give a Series by worker")
        skills = skills.iloc[:, 0]
    skills = pd.Series(skills)
    twice = skills.index[skills.index.duplicated()]
    if len(twice):
        raise ValueError(f"workers_skills names {len(twice):,} workers twice (first {twice[0]!r}): give one skill "
                         "per worker")
    try:
        values = np.array(skills.reindex(ans.workers), dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"workers_skills must hold numbers (each worker's probability of a right answer), got "
                         f"dtype {skills.dtype}") from None
    bad = np.flatnonzero(np.isnan(values) | (values < 0) | (values > 1))
    if bad.size:
        missing = np.isnan(values[bad[0]])
        raise ValueError(f"{bad.size:,} workers have {'no skill' if missing else 'a skill outside [0, 1]'} (first "
                         f"{ans.workers[bad[0]]!r}: {'missing' if missing else values[bad[0]]}); skills are each "
                         "worker's probability of a right answer: give one for every worker of the answers")
    return values


def _by(values: np.ndarray, names: pd.Index, name: str) -> pd.Series:
    """A Series of per-group ``values`` indexed by ``names``, sorted (crowd-kit's ``groupby``)."""
    import pandas as pd

    order = sort_order(names)
    return pd.Series(values[order], index=names[order].rename(name))


def _mean(values: np.ndarray) -> float:
    kept = values[~np.isnan(values)]
    return float(kept.mean()) if kept.size else float("nan")


def alpha_krippendorff(answers: pd.DataFrame,
                       distance: Callable[[Hashable, Hashable], float] | None = None) -> float:
    """Krippendorff's alpha over the tasks of two answers or more (crowd-kit's ``alpha_krippendorff``, NLTK's).

    Parameters
    ----------
    answers : DataFrame
        ``task``, ``worker``, ``label`` columns; every answer is one value (a repeated one counts twice).
    distance : callable, optional
        ``distance(a, b)`` of two labels, in [0, 1]; default nominal (NLTK's ``binary_distance``, crowd-kit's
        default: 0 for equal labels, 1 otherwise), computed from per-task class counts
        (:func:`crowdagg.reports.agreement.krippendorff_alpha`); another is called once per pair of labels.

    Returns
    -------
    float
        ``1 − D_o/D_e``; 1.0 when the answers hold one label (as NLTK).  Undefined alpha -- no task with two
        answers, or no disagreement possible on those -- is a ValueError saying which (NLTK divides by zero).
    """
    from ...kernels.agreement import group_counts
    from ...reports.agreement import krippendorff_alpha

    ans = Answers(answers)
    if ans.n_classes <= 1:
        if ans.n_answers == 0:
            raise ValueError("Krippendorff's alpha of no answers is undefined")
        return 1.0  # NLTK's answer for one label
    data = ans.data
    size, squares, _, _, pairable = group_counts(data.task_ptr, data.label, ans.n_classes)
    if distance is None:
        alpha, note = krippendorff_alpha(size, squares, pairable)
    else:
        alpha, note = _alpha(ans, size, pairable, distance)
    if np.isnan(alpha):
        raise ValueError(f"Krippendorff's alpha is {note}")
    return alpha


def _alpha(ans: Answers, size: np.ndarray, pairable: np.ndarray,
           distance: Callable[[Hashable, Hashable], float]) -> tuple[float, str]:
    """Alpha with any ``distance``: ``D_o = Σ_u n_uᵀ D n_u/(m_u − 1)/n``, ``D_e = NᵀDN/(n(n − 1))`` over the tasks
    of two answers or more (``n_u`` a task's class counts, ``N`` their sum, ``D`` the labels' distances)."""
    import scipy.sparse as sp

    from ...core import memory

    k = ans.n_classes
    labels = ans.classes.tolist()
    # the labels' distances, a K² table: refused up front, before K² calls of ``distance``
    memory.check(8.0 * k * k, f"{k:,}² distances between labels",
                 advice="a distance other than the nominal one needs every pair of labels' distance")
    dist = np.full((k, k), np.nan)  # None stays NaN, refused below
    for i, a in enumerate(labels):
        for j, b in enumerate(labels):
            d = distance(a, b)
            if d is None:
                continue
            try:
                if isinstance(d, (str, bytes)):  # numpy would read "1" as 1.0; crowd-kit's sums refuse text
                    raise TypeError
                dist[i, j] = d
            except (TypeError, ValueError):  # text, a sequence: numpy's message would not name the distance
                raise TypeError(f"distance({a!r}, {b!r}) gave {d!r}: a distance is a number, 0 or more") from None
    bad = np.argwhere(~np.isfinite(dist) | (dist < 0))
    if bad.size:
        a, b = labels[bad[0][0]], labels[bad[0][1]]
        raise ValueError(f"distance({a!r}, {b!r}) gave {distance(a, b)!r}: a distance is a number, 0 or more")
    units = size >= 2
    n = float(size[units].sum())
    if n == 0:
        return float("nan"), "undefined: no task has two answers or more (nothing to agree on)"
    data = ans.data
    rows = np.repeat(np.arange(len(size)), size)  # answers are sorted by task
    keep = units[rows]
    memory.check(8.0 * int(units.sum()) * k, f"{int(units.sum()):,} tasks × {k:,} labels",
                 advice="a distance other than the nominal one needs each task's distances to every label")
    counts = sp.csr_matrix((np.ones(int(keep.sum())), (rows[keep], data.label[keep])), shape=(len(size), k))
    spread = np.asarray(counts.multiply(counts @ dist).sum(axis=1)).ravel()  # n_uᵀ D n_u per task
    observed = float((spread[units] / (size[units] - 1.0)).sum()) / n
    total = pairable.astype(np.float64)
    expected = float(total @ dist @ total) / (n * (n - 1.0))
    if expected == 0.0:
        return float("nan"), "undefined: no disagreement was possible on the tasks of two answers or more"
    return 1.0 - observed / expected, "computed"


def uncertainty(answers: pd.DataFrame, workers_skills: pd.Series | None = None, aggregator: Any = None,
                compute_by: str = "task", aggregate: bool = True) -> float | pd.Series:
    """The entropy (nats) of each task's (or worker's) label distribution (crowd-kit's ``uncertainty``).

    Parameters
    ----------
    answers : DataFrame
        ``task``, ``worker``, ``label`` columns.
    workers_skills : Series, optional
        Each worker's skill (indexed by worker, in [0, 1]): an answer then counts ``s`` for its label and
        ``(1 − s)/(K − 1)`` for each other.  Default: ``aggregator``'s ``skills_`` after ``fit``, or else every
        answer counts 1 for its label (the distribution of the answers).
    aggregator : crowd-kit classifier, optional
    compute_by : {"task", "worker"}
    aggregate : bool
        The mean over the tasks (workers), a float; or else a Series by task (worker), sorted.
    """
    from ...kernels.agreement import group_counts, one_coin_entropy

    ans = Answers(answers)
    if compute_by not in ("task", "worker"):
        raise ValueError(f"compute_by must be 'task' or 'worker', got {compute_by!r}")
    if workers_skills is None and aggregator is not None:
        aggregator.fit(answers)
        workers_skills = _fitted_skills(aggregator)
    by_task = compute_by == "task"
    if ans.n_answers == 0:  # no class to encode: crowd-kit's NaN mean, or its empty Series
        return float("nan") if aggregate else _by(np.zeros(0), ans.tasks if by_task else ans.workers, compute_by)
    data = ans.data
    ptr, order = (data.task_ptr, None) if by_task else (data.worker_ptr, data.worker_order)
    if workers_skills is None:
        entropy = group_counts(ptr, data.label, ans.n_classes, order)[2]
    else:
        entropy = one_coin_entropy(ptr, data.worker, data.label, _skills(ans, workers_skills), ans.n_classes, order)
    if aggregate:
        return _mean(entropy)
    return _by(entropy, ans.tasks if by_task else ans.workers, compute_by)


def consistency(answers: pd.DataFrame, workers_skills: pd.Series | None = None, aggregator: Any = MAJORITY_VOTE,
                by_task: bool = False) -> float | pd.Series:
    """The posterior of each task's aggregated label under one-coin workers (crowd-kit's ``consistency``).

    A worker of skill ``s`` answers the true label with probability ``s``
    and each other with ``(1 − s)/(K − 1)``; with a uniform prior, the
    posterior of the label ``aggregator`` gives the task
    (:func:`crowdagg.kernels.agreement.label_posterior`, in logs; 0 where
    every label is impossible, as crowd-kit).

    Parameters
    ----------
    answers : DataFrame
        ``task``, ``worker``, ``label`` columns.
    workers_skills : Series, optional
        Each worker's skill (indexed by worker, in [0, 1]); default the aggregator's ``skills_``.
    aggregator : crowd-kit classifier
        Its ``fit_predict(answers)`` gives the labels; default a majority vote.
    by_task : bool
        A Series by task (sorted), or else the mean over tasks, a float.
    """
    from ...kernels.agreement import label_posterior

    ans = Answers(answers)
    aggregator = aggregator_or_default(aggregator)
    aggregated = aggregator.fit_predict(answers)
    if workers_skills is None:
        workers_skills = _fitted_skills(aggregator)
    skill = _skills(ans, workers_skills)
    if ans.n_answers == 0:  # no class to encode (crowd-kit answers a Series of NaNs, or an empty DataFrame)
        return _by(np.zeros(0), ans.tasks, "task") if by_task else float("nan")
    given = ans.classes.get_indexer(_by_task(ans, aggregated).to_numpy())
    if (given < 0).any():
        first = ans.tasks[np.flatnonzero(given < 0)[0]]
        raise ValueError(f"the aggregator gave task {first!r} no label of the answers")
    data = ans.data
    posterior = label_posterior(data.task_ptr, data.worker, data.label, given, skill, ans.n_classes)[1]
    return _by(posterior, ans.tasks, "task") if by_task else _mean(posterior)


def _by_task(ans: Answers, aggregated: Any) -> pd.Series:
    """The aggregator's labels in the order of ``ans.tasks``, taken as crowd-kit's column assignment takes them: a
    Series (or a one-column DataFrame) by task, a list or an array by position over the tasks sorted."""
    import pandas as pd

    if isinstance(aggregated, pd.DataFrame):
        if aggregated.shape[1] != 1:
            raise ValueError(f"the aggregator gave a DataFrame of {aggregated.shape[1]} columns: a label per task "
                             "is needed")
        aggregated = aggregated.iloc[:, 0]
    if not isinstance(aggregated, pd.Series):
        values = np.asarray(aggregated, dtype=object)
        if values.ndim != 1 or len(values) != len(ans.tasks):
            raise ValueError(f"the aggregator gave {values.shape} labels for {len(ans.tasks):,} tasks: a label per "
                             "task is needed")
        aggregated = pd.Series(values, index=ans.tasks[sort_order(ans.tasks)])
    twice = aggregated.index[aggregated.index.duplicated()]
    if len(twice):
        raise ValueError(f"the aggregator labelled {len(twice):,} tasks twice (first {twice[0]!r})")
    return aggregated.reindex(ans.tasks)


def _fitted_skills(aggregator: Any) -> pd.Series:
    skills = getattr(aggregator, "skills_", None)
    if skills is None:
        raise ValueError(f"{type(aggregator).__name__} has no skills_: give workers_skills")
    return skills


__all__ = ["alpha_krippendorff", "consistency", "uncertainty"]
