r"""crowd-kit's ``KOS``: Karger--Oh--Shah message passing, crowdagg's ``kos`` messages run for crowd-kit's rounds.

crowd-kit's KOS (binary answers as :math:`\pm 1`) draws a worker message
:math:`y \sim N(1, 1)` per answer -- numpy's legacy generator seeded with
``random_state``, one draw per row of the frame in row order -- then runs
``n_iter`` rounds of the leave-one-out updates

.. math:: x_{i \to j} = \sum_{j' \in \partial i \setminus j} L_{ij'}\, y_{j' \to i}, \qquad
          y_{j \to i} = \sum_{i' \in \partial j \setminus i} L_{i'j}\, x_{i' \to j}

and labels each task by the sign of :math:`\sum_j L_{ij}\, y_{j \to i}`.
Its messages are never normalised: they grow geometrically, and it stops
early, keeping the last messages it could sum, once a task's sum or a
worker's passes 1e300 (bluebird's do after a few dozen rounds).

Here the rounds are those of crowdagg's ``kos``
(:class:`crowdagg.methods.graph.kos.KOSState` on the local engine: the
same leave-one-out sums, normalised every round, so nothing overflows)
from crowd-kit's draw, in crowdagg's loop with crowd-kit's budget and its
overflow stop as settings (:class:`_KOSPassing`): the unnormalised sums are
the normalised ones divided by the product of the rounds' scales, so the
stop is taken where crowd-kit takes it, read in logarithms.  The decisions
are signs, which a common scale does not change: the labels are crowd-kit's
but for a task whose sum rounds to the other side of 0 (the sums run in
another order).

Kept different on purpose: a task whose sum is exactly 0 (its workers
answered no other task, or their messages cancel) gets its majority vote,
a tie going to the first label in crowd-kit's majority-vote order --
crowd-kit raises ``KeyError: 0`` there; a NaN label is no answer (crowd-kit
counts NaN as a third label and refuses the frame as not binary); numpy's
global random state is left alone (crowd-kit reseeds it with
``random_state``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from ..methods.loop import NO_OBJECTIVE, Step, StopRule
from ._answers import Answers, check_count, sort_order
from ._loop import Flavour

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from ..methods.graph.kos import KOSState

#: log10 of crowd-kit's bound on a sum (``np.float_power(10, 300)``): past it, its KOS stops.
LOG_MAX = 300.0


@dataclass(frozen=True)
class _Overflow(StopRule):
    """crowd-kit's KOS stop: a round whose largest task or worker sum passed 1e300 (``Step.objective``: its log10).

    Also a round whose sums are all 0 (log10: -inf; every worker answered only tasks no one else did): every later
    round is 0 too, so crowd-kit's remaining rounds change nothing -- its ``n_iter`` of 10¹² would run for days.
    """

    def reached(self, step: Step, prev: float | None, tol: float, direction: str) -> bool:
        return step.objective is not None and (step.objective > LOG_MAX or step.objective == -math.inf)

    def warns(self, tol: float) -> bool:
        return False  # n_iter is crowd-kit's budget: running it out is no failure

    def still(self, tol: float, objective: str) -> str:
        return "messages still below 1e300"


class _KOSPassing(Flavour):
    """crowd-kit's KOS as settings of crowdagg's loop, on crowdagg's ``kos`` messages.

    The start (:meth:`start`) is crowdagg's first round from crowd-kit's
    draw ``y0`` (per answer, in the data's task order).  Step k reads round
    k's largest sum in crowd-kit's units (:meth:`magnitude`): past 1e300
    crowd-kit stops there, keeping round k's sums, and so does the loop
    (:class:`_Overflow`); otherwise it runs round k + 1.  After ``n_iter``
    steps the last round's sums are those of crowd-kit's final labels.
    """

    stop_rule: ClassVar[StopRule] = _Overflow()
    objective_direction: ClassVar[str] = NO_OBJECTIVE

    def __init__(self, ans: Answers, y0: np.ndarray) -> None:
        self.ans = ans
        self.y0 = y0
        self.log_scale = 0.0  # Σ log10 of the rounds' scales: normalised = unnormalised × 10**log_scale

    def start(self, index: int, rng: np.random.Generator) -> tuple[KOSState, None]:
        from ..methods.graph.kos import KOSState

        state = KOSState(self.ans.engine, self.ans.data, self.y0, None, 1.0)  # no gold: its message is unused
        self._scaled(state)
        return state, None

    def step(self, state: KOSState) -> Step:
        size = self.magnitude(state)
        if size <= LOG_MAX:
            state.iterate()
            self._scaled(state)
        return Step(objective=size)

    def _scaled(self, state: KOSState) -> None:
        self.log_scale += math.log10(state.scale) if state.scale > 0 else 0.0

    def magnitude(self, state: KOSState) -> float:
        """log10 of the last round's largest task sum or worker sum as crowd-kit computes them (unnormalised)."""
        top = max((float(np.abs(b).max()) for b in state.belief if b.size), default=0.0)
        if state.totals.size:
            top = max(top, float(np.abs(state.totals).max()))
        return math.log10(top) - self.log_scale if top > 0 else -math.inf


class KOS:
    r"""Karger--Oh--Shah message passing with crowd-kit's ``KOS`` semantics (binary answers only).

    ``n_iter`` rounds (at most: crowd-kit stops once a sum passes 1e300)
    from worker messages drawn from N(1, 1) with numpy's legacy generator
    seeded by ``random_state``, one per row of the frame; each task's label
    is the sign of its sum of messages.  A frame whose answers have other
    than two distinct labels is a ValueError, as in crowd-kit.

    Fitted: ``labels_`` (``agg_label``, tasks sorted as crowd-kit's
    ``groupby``); empty input gives an empty ``labels_`` of object dtype.
    A repeated (task, worker) answer counts again, as in crowd-kit.
    """

    labels_: pd.Series

    def __init__(self, n_iter: int = 100, random_state: int = 0) -> None:
        self.n_iter = n_iter
        self.random_state = random_state

    def __repr__(self) -> str:
        return f"KOS(n_iter={self.n_iter!r}, random_state={self.random_state!r})"

    def fit(self, data: pd.DataFrame) -> KOS:
        import pandas as pd

        from ..core import memory
        from ..methods.graph.kos import kos_memory

        check_count(self.n_iter, "n_iter")
        ans = Answers(data)
        if ans.n_answers == 0:
            self.labels_ = pd.Series([], dtype=object, name="agg_label")
            return self
        if ans.n_classes != 2:
            raise ValueError(f"KOS aggregation method is for binary classification only: these answers have "
                             f"{ans.n_classes} distinct labels")
        # crowd-kit's draw: one per row of the frame (NaN labels included), in row order; kept for the answers
        rows = np.random.RandomState(self.random_state).normal(loc=1, scale=1, size=len(data))
        rows = rows[data["label"].notna().to_numpy()]
        y0 = np.ascontiguousarray(rows[np.argsort(ans.task, kind="stable")])  # the data's task order (a stable sort)
        # Refused up front with its size, as crowdagg's kos.
        memory.check(*kos_memory(ans.data), advice="its messages are a few floats per answer: use fewer answers")
        run = _KOSPassing(ans, y0).fit(self.n_iter, 0.0)
        state: KOSState = run.state
        belief = np.asarray(state.engine.gather(state.belief))
        codes = (belief > 0).astype(np.int64)  # class code 1 is +1 in crowdagg's messages
        silent = ~(belief != 0)  # a sum of exactly 0 (or NaN): crowd-kit raises KeyError, we take the vote
        if silent.any():
            from ..methods.blocks import soft_majority_vote

            codes[silent] = np.argmax(soft_majority_vote(ans.data, ans.engine)[silent], axis=1)
        order = sort_order(ans.tasks)  # crowd-kit's groupby sorts the tasks
        labels = pd.Series(ans.classes.take(codes[order]), index=ans.tasks[order].rename("task"), name="agg_label")
        # as crowd-kit's ``apply`` infers them: text in an object column comes back as pandas 3's ``str``
        self.labels_ = labels.infer_objects() if pd.api.types.infer_dtype(labels, skipna=False) == "string" \
            else labels
        return self

    def fit_predict(self, data: pd.DataFrame) -> pd.Series:
        return self.fit(data).labels_
