"""Dawid--Skene EM's block function: :mod:`crowdagg.kernels.latent`'s one E-step kernel, square and unmapped.

:func:`em_block` gives a block's EM statistics: for each task of the block
its posterior ``q`` (one of three ways, by the :class:`EMParams` it is
given) and then, fused into the same pass over the task's answers, the
expected counts of its answers.  It is a thin adapter: its parameters are
checked here and the pass is :func:`crowdagg.kernels.latent.block_pass`,
the compiled loop every E-step shares (DS, onecoin, mf, the moment
methods' refinement, the crowd-kit wrappers, EBCC, the trainers), with
K latent states, the identity map from states to classes and one class
prior for every task.  The engine adds the blocks' statistics along its
fixed reduction tree, so the totals are bit-identical for any thread count
and any partitioning aligned with the grid; a method's M-step reads the
totals.

The three ways of getting a block's posteriors:

* **E-step** (``log_prior``, ``log_conf_ot`` given): ``q = softmax(log_prior
  + Σ_answers log_conf_ot[w, y, :])``, and its log-evidence summed;
* **the soft majority vote** (neither given): the vote shares of the task's
  answers, counted inside the block -- the default start, which needs no
  array over all tasks and so runs on any engine;
* **given posteriors** (``post``, an array over all tasks): their
  statistics.  Only the starts from another method's posteriors and the
  random restarts use it; the array lives with the caller, so it is meant
  for the local engine.

Either way a task clamped by gold (``clamp[t] >= 0``) has the one-hot
posterior at its class.

Confusion layout inside kernels is ``log_conf[w, observed, true]`` so that
one answer reads one contiguous row of K values; the public layout
(``AggregationResult.confusion``) is ``[w, true, observed]``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import DataError, UsageError
from .latent import COUNT_MODES, E_STEP, GIVEN, VOTE, as_clamp, as_floor, block_pass, finite_or_minus_inf
from .validate import as_float_array, check_block, check_part


@dataclass(frozen=True, eq=False)
class EMParams:
    """What :func:`em_block` computes a block's posteriors from (broadcast to every block of an iteration).

    Parameters
    ----------
    log_prior : ndarray (K,), optional
        Log class prior.  With ``log_conf_ot``: an E-step.
    log_conf_ot : ndarray (n_workers, K_observed, K_true), optional
        Log confusion matrices, ``[w, observed, true]``.
    post : ndarray (n_tasks, K), optional
        Given posteriors over *all* tasks (global rows, sliced by each
        block): their statistics, no E-step.  An array over every task held
        by the caller: the starts from another method's posteriors and the
        random restarts use it, on the local engine.
    clamp : ndarray of int (n_tasks,), optional
        Gold: the class each task is clamped to, -1 free, over all tasks
        (global rows); None clamps nothing.
    entropy_floor : float, optional
        Also sum Σ_k f log f over the tasks, f = max(q_k, floor): the
        entropy term of crowd-kit's loss.

    Neither ``log_conf_ot`` nor ``post``: the soft majority vote, counted
    inside each block.  Arrays are converted to contiguous float64 / int64
    once, here; shapes against the data are checked by each block (O(1)),
    a clamp's classes inside the kernel.
    """

    log_prior: np.ndarray | None = None
    log_conf_ot: np.ndarray | None = None
    post: np.ndarray | None = None
    clamp: np.ndarray | None = None
    entropy_floor: float | None = None

    def __post_init__(self) -> None:
        def put(name: str, value: Any) -> None:
            object.__setattr__(self, name, value)

        if self.log_conf_ot is not None:
            if self.post is not None:
                raise UsageError("EMParams: give log_conf_ot (an E-step) or post (given posteriors), not both")
            if self.log_prior is None:
                raise UsageError("EMParams: an E-step needs log_prior beside log_conf_ot")
            put("log_prior", as_float_array(self.log_prior, "log_prior", 1))
            put("log_conf_ot", as_float_array(self.log_conf_ot, "log_conf_ot", 3))
            finite_or_minus_inf(self.log_prior, "log_prior")  # -inf rules a class or an answer out
            finite_or_minus_inf(self.log_conf_ot, "log_conf_ot")
            k = self.log_prior.shape[0]
            if self.log_conf_ot.shape[1:] != (k, k):
                raise DataError(f"log_conf_ot has shape {self.log_conf_ot.shape}, not (n_workers, {k}, {k}) for the "
                                f"{k} classes of log_prior")
        elif self.log_prior is not None:
            raise UsageError("EMParams: log_prior without log_conf_ot (an E-step needs both)")
        if self.post is not None:
            put("post", as_float_array(self.post, "post", 2))
            bad = ~((self.post >= 0.0) & (self.post <= 1.0 + 1e-9))  # NaN fails both
            if bad.any():
                t, c = np.unravel_index(int(np.flatnonzero(bad)[0]), self.post.shape)
                raise DataError(f"post[{int(t)}, {int(c)}] is {float(self.post[t, c])!r}: posteriors lie in [0, 1]")
        if self.clamp is not None:
            put("clamp", as_clamp(self.clamp))
        if self.entropy_floor is not None:
            put("entropy_floor", as_floor(self.entropy_floor))

    @property
    def mode(self) -> str:
        """``"e-step"``, ``"given"`` or ``"vote"``."""
        return "e-step" if self.log_conf_ot is not None else "given" if self.post is not None else "vote"


#: The kernel's mode for each of EMParams'.
_MODES = {"e-step": E_STEP, "given": GIVEN, "vote": VOTE}


def em_block(part: Any, b: int, params: EMParams, keep: bool = False) -> tuple[tuple[Any, ...], np.ndarray | None]:
    """The EM statistics of block ``b`` of the partition ``part`` (a :class:`crowdagg.engine.Part`): a block function.

    Parameters
    ----------
    part : Part
        The partition (its arrays are checked the first time, once).
    b : int
        Local block index.
    params : EMParams
        How the block's posteriors are made (an E-step, given, the soft vote).
    keep : bool
        Return the block's posteriors.

    Returns
    -------
    sums : tuple
        ``(counts, class_tot, loglik)`` -- fresh arrays: the expected answer
        counts ``[worker, observed, true]`` (n_workers, K, K), the
        posteriors' column sums (K,), the E-step's log-likelihood (0.0
        otherwise) -- and Σ f log f after them when ``entropy_floor`` is set.
    post : ndarray (block tasks, K) or None
        The block's posteriors when ``keep``.

    Raises
    ------
    DataError
        Shapes that do not fit the data, a clamp that is not a class, a
        task whose every class has probability 0 in the E-step.
    """
    if not isinstance(params, EMParams):
        raise UsageError(f"em_block takes EMParams, got {type(params).__name__}")
    check_part(part)
    w, k = int(part.n_workers), int(part.n_classes)
    b = check_block(part, b)
    need = part.first_task + part.n_tasks
    if params.log_conf_ot is not None and params.log_conf_ot.shape != (w, k, k):
        raise DataError(f"log_conf_ot has shape {params.log_conf_ot.shape}, the data's (n_workers, K, K) is "
                        f"{(w, k, k)}")
    if params.post is not None and (params.post.shape[1:] != (k,) or params.post.shape[0] < need):
        raise DataError(f"post has shape {params.post.shape}, the data's tasks × classes need ({need:,}, {k})")
    got = block_pass(part, b, k, mode=_MODES[params.mode], log_prior=params.log_prior, log_table=params.log_conf_ot,
                     clamp=params.clamp, given=params.post, entropy_floor=params.entropy_floor,
                     count_mode=COUNT_MODES["posterior"], keep=keep)
    sums = (got.counts, got.tot, got.loglik)
    return (sums if params.entropy_floor is None else (*sums, got.entropy)), (got.latent if keep else None)


__all__ = ["EMParams", "em_block"]
