"""The numeric methods' base class and result.

:class:`NumericAggregator` is :class:`~crowdagg.methods.base.Declared` (the
declaration, the settings checked from it) plus what a fit on
:class:`~crowdagg.data.numeric.NumericAnswers` needs: the data checked
(categorical answers refused, naming the categorical methods), the memory
check before fitting, the loop of an iterative method
(:func:`crowdagg.methods.loop.iterate`: ``max_iter``, ``tol``, the progress
callback, the non-convergence warning) and the checks on the result.

:class:`NumericResult` is what every numeric method returns: one value per
task (NaN for a task without answers, warned about), the method's
per-worker parameters, the iterations; ``table()`` and ``workers_table()``
are what ``crowdagg aggregate --numeric`` writes (``task, value``; ``worker,
<parameters>, deviation, n_answers``).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from ...core import memory
from ...data.numeric import BYTES_PER_ANSWER, NumericAnswers, check_numeric, value_scale
from ...errors import CrowdaggWarning, DataError, warn
from ..base import Declared
from ..loop import MINIMISE, Residual, Step, check_callback, iterate

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd


@dataclass(eq=False)
class NumericResult:
    """The fit of a numeric method.

    Attributes
    ----------
    method : str
        The method's registered name.
    data : NumericAnswers
        What was fitted.
    values : ndarray of float64, shape (n_tasks,)
        The estimate of each task (NaN for a task without answers).
    worker_params : dict of str -> ndarray of float64, shape (n_workers,)
        The method's per-worker parameters (catd: ``weight``, ``variance``;
        crh: ``weight``, ``loss``; none for mean and median), in the order
        ``--workers`` writes them.
    n_iter : int
        Iterations run (0 for mean and median).
    converged : bool
        Whether the stop rule was met (True for a method without iterations).
    objective : list of float
        The method's objective after each iteration (its weighted loss).
    """

    method: str
    data: NumericAnswers
    values: np.ndarray
    worker_params: dict[str, np.ndarray] = field(default_factory=dict)
    n_iter: int = 0
    converged: bool = True
    objective: list[float] = field(default_factory=list)

    def __repr__(self) -> str:
        return (f"NumericResult(method={self.method!r}, n_tasks={self.data.n_tasks}, n_workers={self.data.n_workers}, "
                f"n_iter={self.n_iter}, converged={self.converged})")

    @property
    def deviation(self) -> np.ndarray:
        """Each worker's root-mean-square distance from the estimates, shape (n_workers,) (NaN without answers)."""
        from ...kernels.numeric import worker_losses

        d = self.data
        scale = value_scale(d.value)  # squares of values far from 1 leave float64's range: summed rescaled
        value, values = (d.value, self.values) if scale == 1 else (d.value / scale, self.values / scale)
        sq = worker_losses(d.task_ptr, d.worker, value, np.nan_to_num(values), np.ones(d.n_tasks), d.n_workers)
        n = d.answers_per_worker
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):  # over: past the largest float, inf
            return np.where(n > 0, np.sqrt(sq / np.maximum(n, 1)) * scale, np.nan)

    def table(self, *, arrow: bool = False) -> dict[str, Any]:
        """One row per task, in input order: ``task, value``.  With ``arrow`` (for the writers) the names are
        Arrow strings and a task without answers has a missing value (an empty CSV cell, JSON ``null``)."""
        if not arrow:
            return {"task": self.data.task_names, "value": self.values}
        return {"task": self.data.tasks.names, "value": _written(self.values)}

    def worker_columns(self) -> tuple[str, ...]:
        """The columns of :meth:`workers_table`."""
        return ("worker", *self.worker_params, "deviation", "n_answers")

    def workers_table(self, *, arrow: bool = False) -> dict[str, Any]:
        """One row per worker: ``worker``, the method's parameters, ``deviation``, ``n_answers`` (with ``arrow``:
        names as Arrow strings, a number that is not finite -- a worker without answers -- missing)."""
        numbers = {**self.worker_params, "deviation": self.deviation}
        if not arrow:
            return {"worker": self.data.worker_names, **numbers, "n_answers": self.data.answers_per_worker}
        return {"worker": self.data.workers.names, **{k: _written(v) for k, v in numbers.items()},
                "n_answers": self.data.answers_per_worker}

    def to_frame(self) -> pd.DataFrame:
        """:meth:`table` as a pandas DataFrame (``task`` back in its original dtype)."""
        import pandas as pd

        from ..result import _id_index

        return pd.DataFrame({"task": _id_index(self.data.tasks, "task").to_numpy(), "value": self.values})

    def values_series(self) -> pd.Series:
        """The estimates as a Series indexed by task (original dtype)."""
        import pandas as pd

        from ..result import _id_index

        return pd.Series(self.values, index=_id_index(self.data.tasks, "task"), name="value")

    def workers_frame(self) -> pd.DataFrame:
        """:meth:`workers_table` as a pandas DataFrame."""
        import pandas as pd

        from ..result import _id_index

        cols = self.workers_table()
        cols["worker"] = _id_index(self.data.workers, "worker").to_numpy()
        return pd.DataFrame(cols)


def _ldexp(x: Any, exp: int) -> Any:
    """``x × 2**exp``, exactly; inf or 0 past float64's range, without a warning."""
    with np.errstate(over="ignore", under="ignore"):
        return np.ldexp(x, exp)


def _in_unit(callback: Callable[[int, float], Any], exp: int) -> Callable[[int, float], Any]:
    """``callback`` told each objective times ``2**exp``: the progress of a fit on rescaled answers in their unit."""
    def told(iteration: int, objective: float) -> Any:
        return callback(iteration, float(_ldexp(objective, exp)))

    return told


def _written(values: np.ndarray) -> Any:
    """A float column as the writers take it: missing where not finite (a task or worker without answers)."""
    from ...io.render import Missing

    finite = np.isfinite(values)
    return values if finite.all() else Missing(values, finite)


class NumericAggregator(Declared):
    """Base class of the numeric methods: settings stored by ``__init__``, checked by :meth:`fit`.

    A one-pass method implements :meth:`_fit`; an iterative one sets
    ``iterative`` and implements :meth:`_weights` (the workers' weights and
    parameters from the current estimates) -- the base alternates them with
    the weighted mean (:func:`~crowdagg.kernels.numeric.weighted_means`) from
    the median, as CATD and CRH both do.
    """

    #: The per-worker parameters its results hold (the columns of ``--workers`` between worker and deviation).
    worker_param_names: ClassVar[tuple[str, ...]] = ()
    #: The power of the answers' unit each of them carries (a variance: 2, its reciprocal: -2), and the objective:
    #: how they are multiplied back after a fit on rescaled answers (:func:`value_scale`).
    worker_param_units: ClassVar[tuple[int, ...]] = ()
    objective_unit: ClassVar[int] = 0
    iterative: ClassVar[bool] = False
    #: What ``tol`` reads (named in ``--tol``'s help): the largest move of a task's estimate.
    objective_name: ClassVar[str] = "estimates"

    def memory_needed(self, data: NumericAnswers) -> tuple[float, str]:
        """Bytes the fit allocates beyond the data: a few task- and worker-long arrays, a copy of the answers
        for the median's sort, and one of their values where they are fitted rescaled (:func:`value_scale`)."""
        copies = BYTES_PER_ANSWER + (8 if value_scale(data.value) != 1 else 0)
        need = 6.0 * 8 * (data.n_tasks + data.n_workers) + copies * data.n_answers
        return need, f"{self.name} on {data.n_answers:,} answers, {data.n_tasks:,} tasks"

    def fit(self, data: NumericAnswers, *, callback: Callable[[int, float], Any] | None = None,
            max_memory: memory.MaxMemory = None, engine: Any = None) -> NumericResult:
        """Aggregate numeric ``data`` (``engine``: the local engine only, None or ``"local"``)."""
        check_numeric(data, f"{self.name}.fit(data)")
        if engine not in (None, "local"):
            from ...errors import UsageError

            raise UsageError(f"method {self.name!r} runs on the local engine only")
        if data.n_tasks == 0:
            raise DataError("no tasks to aggregate")
        check_callback(callback)
        checked = self.check_params()
        need, what = self.memory_needed(data)
        memory.check(need, what, max_memory)
        scale = value_scale(data.value)
        if scale == 1:
            result = self._fit(data, checked, callback)
        else:
            exp = math.frexp(scale)[1] - 1  # scale = 2**exp: ldexp multiplies back exactly (to inf or 0 past the range)
            told = None if callback is None else _in_unit(callback, exp * self.objective_unit)
            result = self._rescaled(self._fit(data.with_values(data.value / scale), checked, told), data, exp)
        if result.values.shape != (data.n_tasks,) or any(np.shape(v) != (data.n_workers,)
                                                         for v in result.worker_params.values()):
            raise RuntimeError(f"{self.name}: a result of the wrong shape")  # the method's bug, not the data's
        n_empty = int(np.count_nonzero(data.answers_per_task == 0))
        if n_empty:
            warn(CrowdaggWarning(f"{n_empty} task(s) have no answers: their value is NaN (empty in CSV output)"))
        return result

    def _rescaled(self, result: NumericResult, data: NumericAnswers, exp: int) -> NumericResult:
        """A fit on ``data`` divided by ``2**exp`` brought back to ``data``'s unit (a number beyond float64's
        range there -- the variance of answers near 1e300 -- becomes inf: missing in the output)."""
        return dataclasses.replace(
            result, data=data, values=_ldexp(result.values, exp),
            worker_params={k: _ldexp(v, exp * u) for (k, v), u in zip(result.worker_params.items(),
                                                                      self.worker_param_units, strict=True)},
            objective=[float(_ldexp(f, exp * self.objective_unit)) for f in result.objective],
        )

    def _fit(self, data: NumericAnswers, checked: dict[str, Any], callback: Any) -> NumericResult:
        if not self.iterative:
            raise NotImplementedError
        from ...kernels.numeric import task_medians, weighted_means

        values = task_medians(data.task_ptr, data.value)
        spread = float(np.std(data.value)) if data.n_answers else 0.0
        scale = spread if spread > 0 else 1.0  # every answer equal: any move is measured in the values' own units
        state: dict[str, Any] = {"values": values, "params": {}}

        def start(_: int, __: np.random.Generator) -> tuple[dict[str, Any], None]:
            return state, None

        def step(s: dict[str, Any]) -> Step:
            params, objective = self._weights(data, np.nan_to_num(s["values"]), checked)
            new = weighted_means(data.task_ptr, data.worker, data.value, params["weight"])
            moved = np.abs(np.nan_to_num(new) - np.nan_to_num(s["values"]))
            s["values"], s["params"] = new, params
            return Step(objective=objective, residual=float(moved.max(initial=0.0)) / scale)

        rule = Residual("estimates")
        run = iterate(start, step, rule=rule, max_iter=checked["max_iter"], seed=0, tol=checked["tol"],
                      direction=MINIMISE, callback=callback)
        if not run.converged and rule.warns(checked["tol"]):
            from ...errors import ConvergenceWarning

            warn(ConvergenceWarning(rule.not_converged(self.name, checked["max_iter"], checked["tol"])))
        return NumericResult(self.name, data, state["values"], state["params"], run.n_iter, run.converged,
                             list(run.trace))

    def _weights(self, data: NumericAnswers, values: np.ndarray,
                 checked: dict[str, Any]) -> tuple[dict[str, np.ndarray], float]:
        """The workers' parameters (``weight`` first: finite, >= 0) from the estimates ``values``, and the
        objective they give (the weighted loss)."""
        raise NotImplementedError


__all__ = ["NumericAggregator", "NumericResult"]
