"""What the EM trainer and the two-stage baselines share: a classifier fit by cross-entropy to soft targets.

Raykar / AggNet (:mod:`.raykar`) and the two-stage baselines
(:mod:`.twostage`) train the classifier on per-task label distributions
``q`` (n_tasks, K) -- re-estimated every epoch by the E-step, or fixed by
an aggregator before training -- instead of on each answer:

.. math::

    \\ell = -\\frac1B \\sum_{n \\in \\text{batch}} \\sum_k q_{nk} \\log f_\\theta(x_n)_k .

The targets live in the fit's ``ctx.state["targets"]`` (a (n_tasks, K)
float32 tensor on the device), so the base's best-epoch snapshot keeps the
targets of the epoch it keeps.  Both are built from the **training**
answers only (:meth:`~crowdagg.learning.trainer.TrainContext.training_set`):
an answer held out for model selection never reaches a target, else the
held-out likelihood would score answers the model was fit to.
"""

from __future__ import annotations

import numpy as np
import torch

from .trainer import Batch, TrainContext, Trainer


class SoftTargetTrainer(Trainer):
    """A trainer whose loss is the cross-entropy of f_θ(x) to ``ctx.state["targets"]`` (see the module)."""

    def _loss(self, ctx: TrainContext, logits: torch.Tensor, batch: Batch) -> torch.Tensor:
        target = ctx.state["targets"][batch.tasks]
        return -(target * torch.log_softmax(logits, dim=1)).sum(dim=1).mean()

    @staticmethod
    def _set_targets(ctx: TrainContext, targets: np.ndarray) -> None:
        ctx.state["targets"] = torch.as_tensor(targets, dtype=torch.float32, device=ctx.device)
