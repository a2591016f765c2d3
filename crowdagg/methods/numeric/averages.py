"""The per-task averages: ``mean`` and ``median`` of each task's numeric answers.

One pass of a numba kernel over the answers sorted by task
(:func:`crowdagg.kernels.numeric.task_means`,
:func:`~crowdagg.kernels.numeric.task_medians`: exactly ``np.mean`` and
``np.median`` of each task's values).  ``mean`` is the default of
``--numeric`` (the smaller error on the emotion set, see
:data:`crowdagg.methods.numeric.DEFAULT`); ``median`` is for answers that
hold wild values: one (a typo's extra digit) moves a mean of five answers by
a fifth of its size, and a median not at all.
"""

from __future__ import annotations

from typing import Any

from ...data.numeric import NumericAnswers
from .base import NumericAggregator, NumericResult


class Mean(NumericAggregator):
    """The mean of each task's answers (declared in :mod:`crowdagg.methods.numeric`)."""

    name = "mean"

    def _fit(self, data: NumericAnswers, checked: dict[str, Any], callback: Any) -> NumericResult:
        from ...kernels.numeric import task_means

        return NumericResult(self.name, data, task_means(data.task_ptr, data.value))


class Median(NumericAggregator):
    """The median of each task's answers (declared in :mod:`crowdagg.methods.numeric`)."""

    name = "median"

    def _fit(self, data: NumericAnswers, checked: dict[str, Any], callback: Any) -> NumericResult:
        from ...kernels.numeric import task_medians

        return NumericResult(self.name, data, task_medians(data.task_ptr, data.value))
