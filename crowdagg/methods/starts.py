"""Where an iterative method starts: its ``init`` parameter, resolved once per fit.

``init`` (declared by methods that take it, :data:`crowdagg.methods.registry.INIT`) is

``"soft-vote"`` (default)
    the vote shares (:func:`~crowdagg.methods.blocks.soft_majority_vote`);
``"hard-vote"``
    one-hot majority labels, ties drawn as ``mv`` draws them
    (:func:`~crowdagg.methods.blocks.hard_majority_vote`);
an array (library only)
    a posterior, shape (n_tasks, n_classes), finite, non-negative, rows
    summing to 1;
a fitted result (library only)
    another method's :class:`~crowdagg.methods.result.AggregationResult` on
    the same data, taken as its name would be (its posteriors, and its
    parameters when the forms are shared): how a moment method refines its
    estimate with Dawid--Skene (``-p refine=ds``);
another method's name (``-p init=mv``)
    that method's output, one level deep: it runs unrefined, with its own
    defaults (a method that refines its own estimate, ``refine``, is run with
    ``refine=none``), the same seed and the same gold (gold is data, not a
    setting).  The method itself, and a method that is not a categorical
    aggregator, are refused.  When the two share a worker-model form
    (``worker_form`` of the other method in this method's
    ``starts_from``: ds starts from onecoin's matrices), :attr:`Start.model`
    holds its result and the method starts from its parameters and prior
    with an E-step; otherwise from its posteriors.

A saved worker model (``init_workers``) is not a start: its counts enter
every M-step as a prior (:class:`crowdagg.methods.model_file.WarmStart`).

Later restarts (``n_init`` > 1) blend the first start's posteriors half and
half with a Dirichlet(1) draw per task (:func:`starting_posteriors`).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ..data.annotations import AnnotationSet
from ..errors import ConvergenceWarning, CrowdaggWarning, UsageError, param, warn
from .blocks import hard_majority_vote, soft_majority_vote

if TYPE_CHECKING:  # pragma: no cover
    from .result import AggregationResult

SOFT_VOTE, HARD_VOTE = "soft-vote", "hard-vote"


@dataclass(frozen=True)
class Start:
    """A resolved ``init``.

    posterior : (n_tasks, K) float64, or None
        The first start's posteriors (a fresh array the method may change);
        None for the soft majority vote, which the method makes itself
        where it needs it (:func:`starting_posteriors`; EM counts it inside
        the engine's blocks, with no array over all tasks).
    model : AggregationResult or None
        The other method's result when its worker model is one this method
        starts from (``result.prior``, ``result.confusion``, its
        ``worker_params``); None otherwise.
    name : str
        What ``init`` was ("soft-vote", "hard-vote", "posterior", a method name).
    """

    posterior: np.ndarray | None
    model: AggregationResult | None = None
    name: str = SOFT_VOTE


def resolve_start(method: Any, data: AnnotationSet, init: Any, seed: int, gold: Any = None,
                  max_memory: Any = None, engine: Any = None) -> Start:
    """``init`` (already checked against its declaration) resolved for ``data``.

    ``method`` is the aggregator being fitted: its ``name`` and its
    ``starts_from`` (the worker-model forms whose parameters it can start
    from) are read.  ``gold`` is handed to another method that takes it
    (the base passes the clamp it resolved, so the gold is read and warned
    about once).  The votes, and the other method's fit, run on ``engine``
    (default: the local engine over ``data``).  Raises :class:`~crowdagg.errors.UsageError` for a
    posterior of the wrong shape or values, the method itself, or a method
    that is not a categorical aggregator.

    The other method's fit is a step of this one: its warnings about the
    data (tasks without answers) are this fit's too and are said by it, and
    its verdict on its own result (a collapse) is not about the result the
    user gets, so neither is repeated; a start that stopped before
    converging is said as the start's.
    """
    if isinstance(init, np.ndarray):
        return Start(check_posterior(init, data), name="posterior")
    from .result import AggregationResult

    if isinstance(init, AggregationResult):
        return _result_start(method, data, init)
    if init == SOFT_VOTE:
        return Start(None)
    if init == HARD_VOTE:
        return Start(hard_majority_vote(data, seed, engine), name=HARD_VOTE)
    spec = check_init_name(method.name, init)
    other = spec.load()
    kwargs: dict[str, Any] = {"seed": seed} if "seed" in spec.param_names else {}
    if "refine" in spec.param_names:  # its raw estimate: the start is one level deep
        kwargs["refine"] = "none"
    if spec.gold and gold is not None:
        kwargs["gold"] = gold
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = other(**kwargs).fit(data, max_memory=max_memory, engine=engine)
    for w in caught:
        if not issubclass(w.category, CrowdaggWarning):
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    if any(issubclass(w.category, ConvergenceWarning) for w in caught):  # once, however many the start gave
        warn(ConvergenceWarning(f"{param('init')}={init}: {init} (the start, run with its own defaults) stopped "
                                f"before converging; {method.name} goes on from where it stopped"))
    return Start(result.posteriors.copy(), result if _shares_form(method, other) else None, init)


def _result_start(method: Any, data: AnnotationSet, result: AggregationResult) -> Start:
    """A start from another method's fitted result: refused unless fitted on ``data`` by another categorical method."""
    from .registry import get

    if result.data is not data and (result.posteriors.shape != (data.n_tasks, data.n_classes)
                                    or result.data.n_workers != data.n_workers):
        raise UsageError(f"{param('init')}: a result fitted on other data ({result.data.n_tasks:,} tasks, "
                         f"{result.data.n_workers:,} workers, {result.data.n_classes} classes) cannot start a fit "
                         f"on {data.n_tasks:,} tasks, {data.n_workers:,} workers, {data.n_classes} classes")
    check_init_name(method.name, result.method)
    other = get(result.method).load()
    return Start(check_posterior(result.posteriors, data), result if _shares_form(method, other) else None,
                 result.method)


def _shares_form(method: Any, other: Any) -> bool:
    """Whether ``method`` starts from ``other``'s parameters (its worker form among the ones it starts from)."""
    return getattr(other, "worker_form", None) in getattr(method, "starts_from", ())


def check_init_name(method: str, init: Any) -> Any:
    """The declaration of the method ``init`` names, when ``method`` may start from its output.

    Needs no data, so settings are refused before any input is read: the
    method itself, and a method that is not a categorical aggregator, raise
    :class:`~crowdagg.errors.UsageError`.  Returns None for a built-in
    start or a posterior.
    """
    if not isinstance(init, str) or init in (SOFT_VOTE, HARD_VOTE):
        return None
    from .registry import get

    spec = get(init)
    if init == method:
        raise UsageError(f"{param('init')}={init!r}: {method} cannot start from its own output; "
                         f"use {SOFT_VOTE}, {HARD_VOTE} or another method")
    if getattr(spec, "kind", "categorical") != "categorical":
        raise UsageError(f"{param('init')}={init!r}: {init} is not a categorical aggregator (answers -> labels), "
                         "so it gives no posteriors to start from")
    return spec


def check_posterior(post: np.ndarray, data: AnnotationSet) -> np.ndarray:
    """A posterior given as ``init``: shape (n_tasks, n_classes), real numbers, finite, non-negative, each
    row summing to 1 -- or all 0 for a task without answers, as the built-in starts leave it
    (:func:`~crowdagg.methods.blocks.soft_majority_vote`)."""
    shape = (data.n_tasks, data.n_classes)
    if post.shape != shape:
        raise UsageError(f"{param('init')}: a posterior must have shape (n_tasks, n_classes) = {shape}, got {post.shape}")
    if post.dtype.kind not in "biuf":  # not complex (numpy drops the imaginary part), text or objects it would parse
        raise UsageError(f"{param('init')}: a posterior must hold real numbers, got dtype {post.dtype}")
    out = np.array(post, dtype=np.float64)
    if not np.isfinite(out).all() or (out < 0).any():
        raise UsageError(f"{param('init')}: a posterior must hold finite probabilities (>= 0)")
    sums = out.sum(axis=1)
    bad = np.flatnonzero((np.abs(sums - 1.0) > 1e-6) & ((sums != 0.0) | (data.answers_per_task > 0)))
    if bad.size:
        raise UsageError(f"{param('init')}: each row of a posterior must sum to 1; row {int(bad[0])} "
                         f"(task {data.tasks[bad[0]]!r}) sums to {out[bad[0]].sum():g}")
    return out


def starting_posteriors(data: AnnotationSet, start: int, rng: np.random.Generator,
                        first: np.ndarray | None = None, engine: Any = None) -> np.ndarray:
    """Start 0: ``first`` (default soft majority vote, on ``engine``).  Later starts: ``first`` blended half and
    half with a Dirichlet(1) draw per task with answers (rows of tasks without answers are 0)."""
    post = soft_majority_vote(data, engine) if first is None else first
    if start == 0:  # a copy of a given start: the method clamps and overwrites its start in place
        return post if first is None else post.copy()
    noise = rng.dirichlet(np.ones(data.n_classes), size=data.n_tasks)
    answered = (data.answers_per_task > 0)[:, None]
    return np.where(answered, 0.5 * post + 0.5 * noise, 0.0)


__all__ = ["SOFT_VOTE", "HARD_VOTE", "Start", "resolve_start", "check_init_name", "check_posterior",
           "starting_posteriors"]
