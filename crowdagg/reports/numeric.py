"""Numeric predictions against numeric truth: mean absolute error, root-mean-square error, Pearson's r.

What ``crowdagg evaluate --numeric`` prints (and :func:`evaluate_values`
returns): the errors of ``aggregate --numeric``'s values on the tasks that
have a true value, with the counts of what could not be compared.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..data.numeric import value_scale
from ..errors import DataError


@dataclass(frozen=True)
class NumericEvaluation:
    """The scores of numeric predictions.

    ``pearson`` is None below two compared tasks or where either side is
    constant (the correlation is undefined there).
    """

    mae: float
    rmse: float
    pearson: float | None
    bias: float
    n_compared: int
    n_without_truth: int
    n_truth_unpredicted: int
    #: No calibration for numbers: empty, so the evaluation tables print alike.
    reliability: tuple[Any, ...] = ()
    calibrated_from: str = ""

    def rows(self) -> list[tuple[str, float | int | str]]:
        """(metric, value) rows, in the order the tables print them."""
        return [("mae", self.mae), ("rmse", self.rmse),
                ("pearson", self.pearson if self.pearson is not None else "undefined"), ("bias", self.bias),
                ("n_compared", self.n_compared), ("n_without_truth", self.n_without_truth),
                ("n_truth_unpredicted", self.n_truth_unpredicted)]

    def as_dict(self) -> dict[str, Any]:
        return dict(self.rows()) | {"pearson": self.pearson}


def evaluate_values(predicted: Mapping[str, float], truth: Mapping[str, float]) -> NumericEvaluation:
    """Score ``predicted`` {task: value} against ``truth`` {task: value} on the tasks both name.

    ``bias`` is the mean of predicted − true.  No task in common is a
    :class:`~crowdagg.errors.DataError` (the wrong truth file, or task names
    that differ).
    """
    tasks = [t for t in predicted if t in truth]
    if not tasks:
        raise DataError(f"no task of the {len(predicted):,} predictions has a true value ({len(truth):,} in the truth)")
    pred = np.array([predicted[t] for t in tasks], dtype=np.float64)
    true = np.array([truth[t] for t in tasks], dtype=np.float64)
    # values far from 1 are compared divided by a power of two (exact): the difference of 1e308 and -1e308,
    # and the square of 1e200, leave float64's range (the correlation came back -0.0 instead of -1); the
    # correlation takes each side on its own scale, the errors both on theirs
    pearson = None
    if len(tasks) > 1:
        x, y = pred / value_scale(pred), true / value_scale(true)
        if x.std() > 0 and y.std() > 0:
            pearson = float(np.corrcoef(x, y)[0, 1])
    scale = value_scale(np.concatenate([pred, true]))
    exp = math.frexp(scale)[1] - 1
    err = pred / scale - true / scale
    with np.errstate(over="ignore"):
        errors = {name: float(np.ldexp(v, exp)) for name, v in (
            ("mae", np.mean(np.abs(err))), ("rmse", math.sqrt(float(np.mean(err**2)))), ("bias", np.mean(err)))}
    too_far = [name for name, v in errors.items() if not math.isfinite(v)]
    if too_far:
        raise DataError(f"the {', '.join(too_far)} of these values exceed{'s' if len(too_far) == 1 else ''} the "
                        f"largest float ({np.finfo(float).max:.3g}): predictions and truth apart by that much are "
                        "on different scales")
    return NumericEvaluation(
        mae=errors["mae"], rmse=errors["rmse"], pearson=pearson, bias=errors["bias"], n_compared=len(tasks),
        n_without_truth=len(predicted) - len(tasks), n_truth_unpredicted=sum(1 for t in truth if t not in predicted),
    )


def summary_line(ev: NumericEvaluation) -> str:
    r = "undefined" if ev.pearson is None else f"{ev.pearson:.4f}"
    return (f"MAE {ev.mae:.4g}  RMSE {ev.rmse:.4g}  Pearson r {r}  bias {ev.bias:.4g}  ({ev.n_compared} tasks "
            f"compared, {ev.n_without_truth} without truth"
            + (f", {ev.n_truth_unpredicted} truth task(s) not in the output" if ev.n_truth_unpredicted else "") + ")")


__all__ = ["NumericEvaluation", "evaluate_values", "summary_line"]
