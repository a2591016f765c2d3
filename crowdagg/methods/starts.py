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
another method's name (``-p init=mv``)
    that method's output, one level deep: it runs unrefined, with its own
    defaults, the same seed and the same gold (gold is data, not a
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

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ..data.annotations import AnnotationSet
from ..errors import UsageError, param
from .blocks import hard_majority_vote, soft_majority_vote

if TYPE_CHECKING:  # pragma: no cover
    from .result import AggregationResult

SOFT_VOTE, HARD_VOTE = "soft-vote", "hard-vote"


@dataclass(frozen=True)
class Start:
    """A resolved ``init``.

    posterior : (n_tasks, K) float64
        The first start's posteriors (a fresh array the method may change).
    model : AggregationResult or None
        The other method's result when its worker model is one this method
        starts from (``result.prior``, ``result.confusion``, its
        ``worker_params``); None otherwise.
    name : str
        What ``init`` was ("soft-vote", "hard-vote", "posterior", a method name).
    """

    posterior: np.ndarray
    model: AggregationResult | None = None
    name: str = SOFT_VOTE


def resolve_start(method: Any, data: AnnotationSet, init: Any, seed: int, gold: Any = None,
                  max_memory: Any = None) -> Start:
    """``init`` (already checked against its declaration) resolved for ``data``.

    ``method`` is the aggregator being fitted: its ``name`` and its
    ``starts_from`` (the worker-model forms whose parameters it can start
    from) are read.  Raises :class:`~crowdagg.errors.UsageError` for a
    posterior of the wrong shape or values, the method itself, or a method
    that is not a categorical aggregator.
    """
    if isinstance(init, np.ndarray):
        return Start(check_posterior(init, data), name="posterior")
    if init == SOFT_VOTE:
        return Start(soft_majority_vote(data))
    if init == HARD_VOTE:
        return Start(hard_majority_vote(data, seed), name=HARD_VOTE)
    from .registry import get

    spec = get(init)
    if init == method.name:
        raise UsageError(f"{param('init')}={init!r}: {method.name} cannot start from its own output; "
                         f"use {SOFT_VOTE}, {HARD_VOTE} or another method")
    if getattr(spec, "kind", "categorical") != "categorical":
        raise UsageError(f"{param('init')}={init!r}: {init} is not a categorical aggregator (answers -> labels), "
                         "so it gives no posteriors to start from")
    other = spec.load()
    kwargs: dict[str, Any] = {"seed": seed} if "seed" in spec.param_names else {}
    if spec.gold and gold is not None:
        kwargs["gold"] = gold
    result = other(**kwargs).fit(data, max_memory=max_memory)
    shared = getattr(other, "worker_form", None) in getattr(method, "starts_from", ())
    return Start(result.posteriors.copy(), result if shared else None, init)


def check_posterior(post: np.ndarray, data: AnnotationSet) -> np.ndarray:
    """A posterior given as ``init``: shape (n_tasks, n_classes), finite, non-negative, rows summing to 1."""
    shape = (data.n_tasks, data.n_classes)
    if post.shape != shape:
        raise UsageError(f"{param('init')}: a posterior must have shape (n_tasks, n_classes) = {shape}, got {post.shape}")
    try:
        out = np.array(post, dtype=np.float64)
    except (TypeError, ValueError):
        raise UsageError(f"{param('init')}: a posterior must hold numbers, got dtype {post.dtype}") from None
    if not np.isfinite(out).all() or (out < 0).any():
        raise UsageError(f"{param('init')}: a posterior must hold finite probabilities (>= 0)")
    bad = np.flatnonzero(np.abs(out.sum(axis=1) - 1.0) > 1e-6)
    if bad.size:
        raise UsageError(f"{param('init')}: each row of a posterior must sum to 1; row {int(bad[0])} "
                         f"(task {data.tasks[bad[0]]!r}) sums to {out[bad[0]].sum():g}")
    return out


def starting_posteriors(data: AnnotationSet, start: int, rng: np.random.Generator,
                        first: np.ndarray | None = None) -> np.ndarray:
    """Start 0: ``first`` (default soft majority vote).  Later starts: ``first`` blended half and half with a
    Dirichlet(1) draw per task with answers (rows of tasks without answers are 0)."""
    post = soft_majority_vote(data) if first is None else first
    if start == 0:  # a copy of a given start: the method clamps and overwrites its start in place
        return post if first is None else post.copy()
    noise = rng.dirichlet(np.ones(data.n_classes), size=data.n_tasks)
    answered = (data.answers_per_task > 0)[:, None]
    return np.where(answered, 0.5 * post + 0.5 * noise, 0.0)


__all__ = ["SOFT_VOTE", "HARD_VOTE", "Start", "resolve_start", "check_posterior", "starting_posteriors"]
