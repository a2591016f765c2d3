"""The two-stage baselines: aggregate the answers first (``mv``, ``ds``), then train the classifier on the result.

``mv-then-train`` and ``ds-then-train`` are what the end-to-end methods are
measured against (Rodrigues & Pereira 2018 and Max-MIG's "MV-then-train",
Albarqouni et al.'s "DS-then-train"):

1. the **registered aggregator** (``mv``: majority vote; ``ds``:
   Dawid--Skene EM) runs through the registry with the trainer's seed --
   the same code, defaults and tie-breaks as ``crowdagg aggregate
   --method mv|ds`` -- on the **training answers only** (the answers held
   out for model selection, ``val_fraction``, never reach the targets:
   the held-out likelihood would otherwise score answers the targets were
   built from);
2. the classifier is trained by cross-entropy to those labels
   (:class:`~.soft_targets.SoftTargetTrainer`): ``targets="hard"``
   (default) the aggregator's labels one-hot -- the classic baseline, a
   network trained on "cleaned" labels; ``targets="soft"`` its posteriors
   (the vote shares for mv).

There is no answer model of its own: the held-out objective reads the
answers through the confusions the training answers imply given f_θ
(:meth:`Trainer._implied_confusion`), and the reported confusions are
those.  The inferred training labels are the **classifier's** predictions
(``labels_from = "classifier"``): what the two-stage pipeline learned; the
aggregator's own labels are ``crowdagg aggregate``'s output.

Shapes: targets (n_tasks, K) float32 (rows of tasks without training
answers 0: they are not trained on).
"""

from __future__ import annotations

import warnings
from typing import ClassVar

import numpy as np
from torch import nn

from ....data.annotations import AnnotationSet
from ....errors import CrowdaggWarning
from ....methods.registry import get_method
from ....methods.result import AggregationResult
from ...soft_targets import SoftTargetTrainer
from ...trainer import TrainContext


def aggregate(data: AnnotationSet, method: str, seed: int) -> AggregationResult:
    """The registered aggregator ``method`` fit to ``data`` with ``seed`` and its declared defaults.

    Its warning about tasks without answers is silenced: on the training
    split those are the tasks whose answers were all held out, and they are
    not trained on (the trainer says so itself where it matters).
    """
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r".* task\(s\) have no answers", category=CrowdaggWarning)
        return get_method(method)(seed=seed).fit(data)  # type: ignore[no-any-return]


def targets_of(result: AggregationResult, answered: np.ndarray, form: str) -> np.ndarray:
    """The training targets (n_tasks, K) from an aggregation: its posteriors (``"soft"``) or labels one-hot
    (``"hard"``); rows of tasks without answers (``answered`` False) are 0."""
    post = np.asarray(result.posteriors, dtype=np.float64)
    if form == "soft":
        out = post.copy()
    else:
        out = np.zeros_like(post)
        out[np.arange(post.shape[0]), np.asarray(result.labels)] = 1.0
    out[~answered] = 0.0
    return out


class TwoStage(SoftTargetTrainer):
    """Aggregate the training answers with ``aggregator``, then train on its labels (see the module)."""

    aggregator: ClassVar[str]
    labels_from: ClassVar[str] = "classifier"

    def _build(self, ctx: TrainContext) -> dict[str, nn.Module]:
        train = ctx.training_set()
        result = aggregate(train, self.aggregator, ctx.params["seed"])
        self._set_targets(ctx, targets_of(result, train.answers_per_task > 0, ctx.params["targets"]))
        return {}


class MVThenTrain(TwoStage):
    """Majority vote, then the classifier."""

    name = "mv-then-train"
    aggregator = "mv"


class DSThenTrain(TwoStage):
    """Dawid--Skene EM, then the classifier."""

    name = "ds-then-train"
    aggregator = "ds"
