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
    err = pred - true
    pearson = None
    if len(tasks) > 1 and pred.std() > 0 and true.std() > 0:
        pearson = float(np.corrcoef(pred, true)[0, 1])
    return NumericEvaluation(
        mae=float(np.mean(np.abs(err))), rmse=math.sqrt(float(np.mean(err**2))), pearson=pearson,
        bias=float(np.mean(err)), n_compared=len(tasks), n_without_truth=len(predicted) - len(tasks),
        n_truth_unpredicted=sum(1 for t in truth if t not in predicted),
    )


def summary_line(ev: NumericEvaluation) -> str:
    r = "undefined" if ev.pearson is None else f"{ev.pearson:.4f}"
    return (f"MAE {ev.mae:.4g}  RMSE {ev.rmse:.4g}  Pearson r {r}  bias {ev.bias:.4g}  ({ev.n_compared} tasks "
            f"compared, {ev.n_without_truth} without truth"
            + (f", {ev.n_truth_unpredicted} truth task(s) not in the output" if ev.n_truth_unpredicted else "") + ")")


__all__ = ["NumericEvaluation", "evaluate_values", "summary_line"]
