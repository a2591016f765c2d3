"""The loop of an iterative method: what a step reports, when to stop, which restart wins.

:func:`iterate` runs a method's steps: restarts (seeded), the iteration
cap, the progress callback, the stop rule and the choice of the best start.
:class:`~crowdagg.methods.base.IterativeAggregator` calls it for every
registered iterative method (and adds the non-convergence warning); an
adapter that keeps another library's semantics (:mod:`crowdagg.crowdkit`)
calls it with its own start, step and rule.

Vocabulary
----------
:class:`Step`
    What one iteration reports: its ``objective`` (the quantity the method
    optimises), a ``residual`` (the largest change of a named quantity:
    messages, posteriors) and/or ``changed`` (how many labels changed).  A
    step fills what its rule reads; the objective, when given, is recorded
    in the trace and passed to the callback.  A step that cannot be taken
    (its state would leave the floating-point range) reports ``halted``:
    the run ends there, not converged, and the method says why.
Stop rules (values a method declares as ``stop_rule``)
    :class:`RelativeChange` (``|f - f_prev| <= tol |f_prev|``: EM),
    :class:`NoLabelChanged` (iterative weighted votes),
    :class:`Residual` (``residual <= tol``: belief propagation),
    :class:`AbsoluteGain` (the objective improves by less than ``tol``, a
    worsening stops too: crowd-kit's EM) and :class:`NoImprovement` (no
    better objective for ``tol`` iterations: a trainer's early stop).  Each words its own
    non-convergence warning.
Objective direction
    :data:`MAXIMISE` (a log-likelihood), :data:`MINIMISE` (a loss) or
    :data:`NO_OBJECTIVE`: which final objective wins among restarts
    (``n_init``); without one, the first start is kept.
:func:`check_optimizer`
    A :class:`~crowdagg.errors.ConvergenceWarning` when an inner optimiser
    (scipy's L-BFGS in an M-step) stopped without converging.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import ConvergenceWarning, UsageError, param, warn

#: Objective directions: which final objective wins among restarts.
MAXIMISE, MINIMISE, NO_OBJECTIVE = "maximise", "minimise", "none"
DIRECTIONS = (MAXIMISE, MINIMISE, NO_OBJECTIVE)


@dataclass(frozen=True)
class Step:
    """What one iteration of a method reports (``_step``'s return value).

    objective : float or None
        The objective after the step (log-likelihood, loss, ...); recorded
        in the run's trace and passed to the progress callback.
    residual : float or None
        The largest absolute change, over this step, of the quantity a
        :class:`Residual` rule names (messages, posteriors).
    changed : int or None
        How many labels this step changed (:class:`NoLabelChanged`).
    since_best : int or None
        Iterations since the objective was last at its best (0: this step
        is the best so far), for :class:`NoImprovement` (a trainer's early
        stop on its held-out objective).
    halted : bool
        The step was not taken: the method's state would have left what a
        float holds (M-MSR's factors, where no rank-one matrix fits the
        pairs).  The state is the previous step's, the run ends, not
        converged (:attr:`Run.halted`), and the method words the warning
        (the loop's own would advise more iterations).
    """

    objective: float | None = None
    residual: float | None = None
    changed: int | None = None
    since_best: int | None = None
    halted: bool = False


@dataclass
class Run:
    """One start of an iterative method: its state, objective trace, iterations, whether it converged, and whether
    a step halted it (:attr:`Step.halted`)."""

    state: Any
    trace: list[float] = field(default_factory=list)
    n_iter: int = 0
    converged: bool = False
    halted: bool = False


class StopRule:
    """When a run has converged.  Subclasses are small frozen values; a method declares one as ``stop_rule``.

    :meth:`reached` reads the step just made, the previous objective (the
    start's, then each step's; None when there is none yet), ``tol`` and
    the objective's direction.  :meth:`warns` says whether a run that
    used up ``max_iter`` deserves a warning (with ``tol = 0`` the rules
    on a tolerance run ``max_iter`` on purpose); :meth:`not_converged` words it.
    """

    def reached(self, step: Step, prev: float | None, tol: float, direction: str) -> bool:
        raise NotImplementedError

    def warns(self, tol: float) -> bool:
        return tol > 0

    def still(self, tol: float, objective: str) -> str:
        """Why the run is not done, for the warning (after "still")."""
        raise NotImplementedError

    def not_converged(self, method: str, max_iter: int, tol: float, objective: str = "objective",
                      loop: str = "") -> str:
        """The warning when the rule was not met within ``max_iter``.

        ``method`` names the method, ``loop`` the kind of loop ("EM"),
        ``objective`` the objective ("log-likelihood").
        """
        who = f"{method}: {loop} " if loop else f"{method}: "
        return (f"{who}did not converge in {param('max_iter')}={max_iter} iterations ({self.still(tol, objective)}); "
                f"raise {param('max_iter')} or loosen {param('tol')}")


def _objective(step: Step) -> float:
    if step.objective is None:
        raise TypeError("this stop rule reads the step's objective: return Step(objective=...) from _step")
    return step.objective


@dataclass(frozen=True)
class RelativeChange(StopRule):
    """Stop when the objective's relative change is at most ``tol``: ``|f - f_prev| <= tol |f_prev|``.

    ``tol = 0`` runs ``max_iter`` (and does not warn).  The first step
    compares with the start's objective when the start has one.
    """

    def reached(self, step: Step, prev: float | None, tol: float, direction: str) -> bool:
        value = _objective(step)
        return tol > 0 and prev is not None and abs(value - prev) <= tol * abs(prev)

    def still(self, tol: float, objective: str) -> str:
        return f"relative {objective} change still above {param('tol')}={tol:g}"


@dataclass(frozen=True)
class NoLabelChanged(StopRule):
    """Stop when a step changed no label (``Step.changed == 0``); ``tol`` plays no part."""

    def reached(self, step: Step, prev: float | None, tol: float, direction: str) -> bool:
        if step.changed is None:
            raise TypeError("NoLabelChanged reads how many labels changed: return Step(changed=...) from _step")
        return step.changed == 0

    def warns(self, tol: float) -> bool:
        return True

    def not_converged(self, method: str, max_iter: int, tol: float, objective: str = "objective",
                      loop: str = "") -> str:
        return (f"{method}: labels still changing after {param('max_iter')}={max_iter} rounds; "
                f"raise {param('max_iter')}")


@dataclass(frozen=True)
class Residual(StopRule):
    """Stop when the largest change of ``quantity`` over a step is at most ``tol`` (``Step.residual``).

    ``quantity`` names it in the warning ("messages", "posteriors").
    ``tol = 0`` runs ``max_iter`` (and does not warn).
    """

    quantity: str = "posteriors"

    def reached(self, step: Step, prev: float | None, tol: float, direction: str) -> bool:
        if step.residual is None:
            raise TypeError(f"Residual reads the change of the {self.quantity}: return Step(residual=...) from _step")
        return tol > 0 and step.residual <= tol

    def still(self, tol: float, objective: str) -> str:
        return f"largest change of the {self.quantity} still above {param('tol')}={tol:g}"


@dataclass(frozen=True)
class AbsoluteGain(StopRule):
    """Stop when the objective improves by less than ``tol`` (absolute); a step that worsens it stops too.

    crowd-kit's EM rule (``if new_loss - loss < tol: break``, its "loss"
    being a log-likelihood that rises): improvement is ``f - f_prev`` when
    maximising, ``f_prev - f`` when minimising.  The first step compares
    with the start's objective only when the start has one (crowd-kit's
    starts at minus infinity: give the start no objective).
    """

    def reached(self, step: Step, prev: float | None, tol: float, direction: str) -> bool:
        value = _objective(step)
        if prev is None:
            return False
        gain = prev - value if direction == MINIMISE else value - prev
        return bool(gain < tol)

    def warns(self, tol: float) -> bool:
        return True

    def still(self, tol: float, objective: str) -> str:
        return f"{objective} still improving by {param('tol')}={tol:g} or more per iteration"


@dataclass(frozen=True)
class NoImprovement(StopRule):
    """Stop when the objective has not improved on its best for ``tol`` iterations (``Step.since_best``).

    Early stopping: a trainer's objective is its held-out loss, and the
    iteration it keeps is the best one, not the last.  ``tol`` is a count
    here (the patience); ``tol = 0`` runs ``max_iter``.  Running out of
    iterations is not a failure (the best iteration is kept), so it never
    warns.
    """

    def reached(self, step: Step, prev: float | None, tol: float, direction: str) -> bool:
        return tol > 0 and step.since_best is not None and step.since_best >= tol

    def warns(self, tol: float) -> bool:
        return False

    def still(self, tol: float, objective: str) -> str:
        return f"{objective} still improving within {tol:g} iterations"


def better(run: Run, best: Run, direction: str) -> bool:
    """Whether ``run`` ends on a strictly better objective than ``best`` (ties keep the earlier start).

    A NaN objective (a start that diverged) is worse than any number: it compares false with everything, so
    without this a first start ending on NaN would be kept over every finite one.
    """
    if direction == NO_OBJECTIVE or not run.trace or not best.trace:
        return False
    if math.isnan(best.trace[-1]) or math.isnan(run.trace[-1]):
        return math.isnan(best.trace[-1]) and not math.isnan(run.trace[-1])
    if direction == MAXIMISE:
        return run.trace[-1] > best.trace[-1]
    if direction == MINIMISE:
        return run.trace[-1] < best.trace[-1]
    raise ValueError(f"objective direction must be one of {', '.join(DIRECTIONS)}, got {direction!r}")


def check_callback(callback: Any) -> None:
    """A progress callback that is None or callable; anything else a :class:`~crowdagg.errors.UsageError` before the
    fit starts (Python's TypeError came after the first iteration's work, from inside the loop)."""
    if callback is not None and not callable(callback):
        raise UsageError(f"{param('callback')} must be callable as callback(iteration, objective), got "
                         f"{type(callback).__name__}")


def iterate(
    start: Callable[[int, np.random.Generator], tuple[Any, float | None]],
    step: Callable[[Any], Step],
    *,
    rule: StopRule,
    max_iter: int,
    seed: int,
    tol: float = 0.0,
    n_init: int = 1,
    direction: str = MAXIMISE,
    callback: Callable[[int, float], Any] | None = None,
) -> Run:
    """Run ``n_init`` starts of at most ``max_iter`` steps each; the best start's :class:`Run`.

    Parameters
    ----------
    start : callable ``(start_index, rng) -> (state, objective or None)``
        Start 0 is the method's own start; later ones may draw from
        ``rng``, seeded by ``(seed, start_index)``.
    step : callable ``state -> Step``
        One iteration, updating ``state`` in place.
    rule : StopRule
        When a run has converged.
    direction : {"maximise", "minimise", "none"}
        Which final objective wins among starts (none: the first start).
    callback : callable ``(iteration, objective)``, optional
        After each step; the objective is NaN when the step reports none.

    The caller warns when the returned run did not converge
    (``rule.warns(tol)`` and ``rule.not_converged(...)``).
    """
    if direction not in DIRECTIONS:
        raise ValueError(f"objective direction must be one of {', '.join(DIRECTIONS)}, got {direction!r}")
    if n_init < 1:
        raise ValueError(f"n_init must be at least 1, got {n_init}")
    # A Python int: a numpy integer at its type's maximum wraps in max_iter + 1 (no iteration at all).
    max_iter, n_init = operator.index(max_iter), operator.index(n_init)
    best: Run | None = None
    for s in range(n_init):
        state, prev = start(s, np.random.default_rng([seed, s]))
        run = Run(state)
        for it in range(1, max_iter + 1):
            report = step(state)
            if not isinstance(report, Step):
                raise TypeError(f"_step must return a Step, got {type(report).__name__}")
            if report.halted:  # not taken: the state and the trace stay the previous step's
                run.halted = True
                break
            run.n_iter = it
            if report.objective is not None:
                run.trace.append(report.objective)
            if callback is not None:
                callback(it, math.nan if report.objective is None else report.objective)
            if rule.reached(report, prev, tol, direction):
                run.converged = True
                break
            if report.objective is not None:
                prev = report.objective
        if best is None or better(run, best, direction):
            best = run
    assert best is not None  # n_init >= 1
    return best


class InnerOptimizer:
    """The runs of one inner optimiser over a whole fit (an M-step's L-BFGS-B in every EM iteration), said once.

    A method records each run (:meth:`record`: what :func:`scipy.optimize.minimize`
    returned -- its ``success``, ``message`` and ``nit`` are read -- and the
    outer iteration); at the end of the fit :meth:`report` warns once
    (:class:`~crowdagg.errors.ConvergenceWarning`) when any run stopped
    short: how many of how many, and why the first did -- not one warning
    per EM iteration.  ``what`` names the problem solved ("the M-step of the
    abilities"); ``advice`` (e.g. "raise -p m_step_max_iter") ends the
    warning.  An iterative method gets one from its fit's context
    (:meth:`crowdagg.methods.base.FitContext.optimizer`), which the base
    reports after the loop.
    """

    def __init__(self, method: str, what: str, advice: str = "") -> None:
        self.method, self.what, self.advice = method, what, advice
        self.runs = 0
        self.failed = 0
        self.first: tuple[int | None, Any] | None = None

    def record(self, result: Any, iteration: int | None = None) -> None:
        self.runs += 1
        if not bool(getattr(result, "success", True)):
            self.failed += 1
            if self.first is None:
                self.first = (iteration, result)

    def report(self) -> None:
        if self.first is None:
            return
        iteration, result = self.first
        message = getattr(result, "message", "")
        if isinstance(message, bytes):
            message = message.decode(errors="replace")
        reason = str(message).strip() or "no reason given"
        nit = getattr(result, "nit", None)
        after = f" after {nit} iterations" if nit is not None else ""
        where = f" at iteration {iteration}" if iteration is not None else ""
        if self.runs == 1:
            text = f"did not converge{where}{after} ({reason}); the fit goes on from its last point"
        else:
            text = (f"did not converge in {self.failed} of its {self.runs} runs (the first{where}{after}: {reason}); "
                    "the fit went on from their last points")
        warn(ConvergenceWarning(f"{self.method}: the optimiser of {self.what} {text}"
                                + (f"; {self.advice}" if self.advice else "")))


def check_optimizer(result: Any, method: str, what: str, iteration: int | None = None) -> None:
    """Warn (:class:`~crowdagg.errors.ConvergenceWarning`) when one run of an inner optimiser did not converge.

    ``result`` is what :func:`scipy.optimize.minimize` returned (its
    ``success``, ``message`` and ``nit`` are read); ``what`` names the
    problem it solved ("the M-step of the abilities").  The warning names
    the method and, when given, the outer iteration.  Silent on success.
    For an optimiser run in every iteration, record the runs in an
    :class:`InnerOptimizer` instead: one warning per fit.
    """
    tally = InnerOptimizer(method, what)
    tally.record(result, iteration)
    tally.report()


__all__ = [
    "Step",
    "Run",
    "StopRule",
    "RelativeChange",
    "NoLabelChanged",
    "Residual",
    "AbsoluteGain",
    "NoImprovement",
    "MAXIMISE",
    "MINIMISE",
    "NO_OBJECTIVE",
    "iterate",
    "better",
    "check_optimizer",
    "InnerOptimizer",
]
