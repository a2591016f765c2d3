"""What the EM trainer and the two-stage baselines share: a classifier fit by cross-entropy to soft targets.

Raykar / AggNet (:mod:`.raykar`) and the two-stage baselines
(:mod:`.twostage`) train the classifier on per-task label distributions
``q`` (n_tasks, K) -- re-estimated every epoch by the E-step, or fixed by
an aggregator before training -- instead of on each answer:

.. math::

    \\ell = -\\frac1B \\sum_{n \\in \\text{batch}} \\sum_k q_{nk} \\log f_\\theta(x_n)_k .

The targets live in ``state.extra["targets"]`` (a (n_tasks, K) float32
tensor on the device), so the base's best-epoch snapshot keeps the targets
of the epoch it keeps.  Both are built from the **training** answers only
(:func:`training_set`): an answer held out for model selection never
reaches a target, else the held-out likelihood would score answers the
model was fit to.
"""

from __future__ import annotations

import numpy as np
import torch

from ..data.annotations import AnnotationSet
from .trainer import Batch, Trainer, TrainState


def training_set(data: AnnotationSet, state: TrainState) -> AnnotationSet:
    """``data`` restricted to the answers the trainer trains on (``state.train``): same tasks, workers, classes.

    The held-out answers (``val_fraction``) are absent; the answers stay
    sorted by task, so ``task_ptr`` is ``state.train.ptr``.
    """
    task, worker, label = (a.cpu().numpy() for a in (state.train.task, state.train.worker, state.train.label))
    arrays = (task.astype(np.int32), worker.astype(np.int32), label.astype(data.label.dtype),
              state.train.ptr.cpu().numpy())
    for a in arrays:
        a.setflags(write=False)
    out = AnnotationSet._trusted(
        task=arrays[0], worker=arrays[1], label=arrays[2], tasks=data.tasks, workers=data.workers,
        classes=data.classes, n_duplicates=data.n_duplicates, duplicates=data.duplicates,
        class_dtype=data.class_dtype,
    )
    out.__dict__["task_ptr"] = arrays[3]
    return out


class SoftTargetTrainer(Trainer):
    """A trainer whose loss is the cross-entropy of f_θ(x) to ``state.extra["targets"]`` (see the module)."""

    def _loss(self, state: TrainState, logits: torch.Tensor, batch: Batch) -> torch.Tensor:
        target = state.extra["targets"][batch.tasks]
        return -(target * torch.log_softmax(logits, dim=1)).sum(dim=1).mean()

    @staticmethod
    def _set_targets(state: TrainState, targets: np.ndarray) -> None:
        state.extra["targets"] = torch.as_tensor(targets, dtype=torch.float32, device=state.device)
