"""crowd-kit's ``crowdkit.metrics``: ``from crowdkit.metrics.data import uncertainty`` becomes
``from crowdagg.crowdkit.metrics.data import uncertainty``.

* :mod:`~crowdagg.crowdkit.metrics.data` -- ``alpha_krippendorff``,
  ``consistency``, ``uncertainty``;
* :mod:`~crowdagg.crowdkit.metrics.workers` -- ``accuracy_on_aggregates``.

crowd-kit's signatures, arguments and return types (a float, or a Series
sorted by task or worker), computed by crowdagg's agreement kernels
(:mod:`crowdagg.kernels.agreement`, which ``crowdagg stats`` runs: one pass
over the answers, no Python function per answer) on the answers encoded
once (:class:`~crowdagg.crowdkit._answers.Answers`).  The default
aggregator is :class:`crowdagg.crowdkit.MajorityVote`; any object with
crowd-kit's ``fit``/``fit_predict``/``skills_`` does (crowd-kit's own
classes too).

Kept different from crowd-kit, as the classes here: a NaN label is no
answer; a missing column is a KeyError and a missing or out-of-range skill
a ValueError naming the worker (crowd-kit asserts, or computes NaN); the
consistency's posterior is computed in logs (crowd-kit's product of
probabilities underflows to 0/0 past a few hundred answers on a task, and
then gives 0).
"""

from __future__ import annotations

from .data import alpha_krippendorff, consistency, uncertainty
from .workers import accuracy_on_aggregates

__all__ = ["accuracy_on_aggregates", "alpha_krippendorff", "consistency", "uncertainty"]
