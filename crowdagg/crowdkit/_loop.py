"""crowd-kit's iterative classes as settings of crowdagg's loop (:func:`crowdagg.methods.loop.iterate`)."""

from __future__ import annotations

from typing import ClassVar

from ..methods.loop import MAXIMISE, AbsoluteGain, Run, StopRule, iterate


class Flavour:
    """What crowd-kit's iterative classes share as settings of crowdagg's loop: its stop rule (the objective rising
    by less than ``tol``, a fall stopping too, ``n_iter`` a budget) and one start; the flavour supplies
    ``start(index, rng)`` and ``step(state)``."""

    stop_rule: ClassVar[StopRule] = AbsoluteGain()
    objective_direction: ClassVar[str] = MAXIMISE

    def fit(self, n_iter: int, tol: float) -> Run:
        """Run crowdagg's loop with these settings: one start, at most ``n_iter`` steps."""
        return iterate(self.start, self.step, rule=self.stop_rule, direction=self.objective_direction,  # type: ignore[attr-defined]
                       max_iter=n_iter, tol=tol, seed=0)
