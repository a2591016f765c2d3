"""Raykar et al. (2010), multiclass, as a deep EM (AggNet-style): the classifier is the prior of the true label.

Model (Raykar, Yu, Zhao, Valadez, Florin, Bogoni & Moy, "Learning from
crowds", JMLR 11, 2010, §3 multiclass; its deep form AggNet, Albarqouni
et al., IEEE TMI 2016, doi:10.1109/TMI.2016.2528120)::

    y_n ~ Cat(f_θ(x_n))                       the classifier is P(y | x)
    answer of worker m on n ~ Cat(A_m[y_n, :])  A_m (K, K) [true, observed], rows on the simplex

and EM on the likelihood ``Σ_n log Σ_k f_θ(x_n)_k Π_m A_m[k, answer]``
(ALGORITHMS.md §8, §9.1, §9.3).  One epoch of the base's loop
(:class:`~crowdagg.learning.trainer.Trainer`) is one EM round:

1. **E-step** (:meth:`Raykar._epoch_begin`): ``q_n ∝ f_θ(x_n) ⊙ Π_m
   A_m[:, answer]`` over the task's *training* answers -- the base's Bayes
   rule (:meth:`Trainer._posterior`) on the training split.  There is no
   separate class prior: ``f_θ(x_n)`` already is P(y_n | x_n), so a class
   prior ``d`` would count the class frequencies twice (Raykar's E-step has
   none either; AggNet's has none and adds 0.001 to ``h`` -- we floor at
   1e-10 instead).  The first epoch skips it: ``q`` starts at the soft
   majority vote of the training answers (Raykar's initialisation), since an
   untrained network is no prior at all.
2. **M-step for A** (closed form): ``A_m[k, j] ∝ Σ_n q_nk 1[answer_m(n) =
   j] + s``, the Dawid--Skene M-step
   (:func:`crowdagg.methods.blocks.full_m_step`) with a Dirichlet(1 + s)
   prior: ``smoothing`` s = 1 is the MAP of spark-crowd's Beta(2, 2) on
   sensitivity and specificity (ALGORITHMS.md §9.2), one pseudo-answer per
   cell; a worker without answers gets uniform rows.
3. **M-step for θ**: one epoch of minibatch Adam on the cross-entropy to
   ``q`` (:class:`~.soft_targets.SoftTargetTrainer`).  Raykar maximises the
   same expected log-likelihood by Newton steps to convergence; AggNet and
   Tanno's generalised EM take one or a few epochs per round (ALGORITHMS.md
   §9.3), which is what a network allows.

``A`` is a buffer, not a parameter: it is never moved by the gradient, only
by step 2.  The answer model of the held-out objective and of
:meth:`_answer_proba` is ``f_θ(x) A_m``; the inferred training labels are
the posterior ``f_θ(x_n) Π_m A_m[:, answer]`` over every answer (held-out
ones too), at the epoch with the best held-out likelihood.  ``q`` (in
``ctx.state["targets"]``) and ``A`` are snapshotted with that epoch.

Failure modes (ALGORITHMS.md §9.3):

* **One answer per item**: the soft-MV start is then the answer itself,
  every worker agrees with it, and the first M-step gives each worker an
  almost-identity ``A``; the E-step with a near-identity ``A`` returns the
  answer again unless the classifier disagrees with it.  A network that
  fits the noisy answers never does, so ``A`` stays near its start and the
  method degenerates to training on the noisy labels (Tanno et al. 2019,
  Fig. 4); only a classifier that cannot fit the noise (a linear model on
  well-separated features) moves ``A`` -- measured on 400 tasks, 3
  classes, one answer each from workers of accuracy 0.5-0.7: the mean
  diagonal is 0.92 after one epoch, 0.69 after five (truth 0.60).  Use
  ``tracereg`` or ``geocrowdnet-f`` there.
* MLE has no defence against correlated workers (Max-MIG Thm E.3): many
  identical coin-flippers outvote an expert.
* A flexible network fit to ``q`` returns ``f(x_n) ≈ q_n`` on the training
  items, so the next E-step multiplies the answers' evidence in again: the
  targets harden over the epochs.  Weight decay, dropout and the
  best-epoch selection on held-out answers are the brakes.

Shapes: ``targets`` (n_tasks, K) float32; A (n_workers, K, K) ``[worker,
true, observed]``.  Cost per epoch: one epoch of the network plus
O(answers × K + n_workers × K²) for the E and M steps (numpy, on the
host).
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from ....data.annotations import AnnotationSet
from ....methods.blocks import full_m_step, soft_majority_vote
from ...confusion import answer_proba, expected_counts
from ...soft_targets import SoftTargetTrainer
from ...trainer import TrainContext, bayes_posterior


def m_step(post: np.ndarray, train: AnnotationSet, smoothing: float) -> np.ndarray:
    """The confusions (n_workers, K, K) ``[worker, true, observed]`` the posteriors ``post`` (n_tasks, K) imply.

    Expected counts of the training answers ``train`` against ``post``
    (:func:`~crowdagg.learning.confusion.expected_counts`), ``smoothing``
    added to each cell, rows normalised (the DS M-step,
    :func:`~crowdagg.methods.blocks.full_m_step`, in its [observed, true]
    layout).
    """
    counts = expected_counts(post, train.task, train.worker, train.label, train.n_workers)
    _, conf_ot = full_m_step(counts.transpose(0, 2, 1), post.sum(axis=0), smoothing)
    return np.ascontiguousarray(conf_ot.transpose(0, 2, 1))


class Raykar(SoftTargetTrainer):
    """Raykar et al. 2010 / AggNet deep EM (see the module docstring)."""

    name = "raykar"

    def _build(self, ctx: TrainContext) -> dict[str, nn.Module]:
        train = ctx.training_set()
        q = soft_majority_vote(train, ctx.train_engine())
        self._set_targets(ctx, q)
        return {"confusion": _Matrices(m_step(q, train, ctx.params["smoothing"]))}

    def _epoch_begin(self, ctx: TrainContext) -> None:
        if ctx.epoch == 0:  # the first epoch trains on the soft-MV start (and _build's A from it)
            return
        # E-step: the classifier as the prior, the training answers through A
        train = ctx.training_set()
        proba = ctx.proba().double().cpu().numpy()
        q = bayes_posterior(train, proba, self._matrices(ctx).double().cpu().numpy(), ctx.train_engine(),
                            ctx.params.max_memory)
        q[train.answers_per_task == 0] = 0.0  # not trained on
        self._set_targets(ctx, q)
        ctx.modules["confusion"].set(m_step(q, train, ctx.params["smoothing"]))  # type: ignore[operator]

    def _answer_proba(self, ctx: TrainContext, p: torch.Tensor, workers: torch.Tensor) -> torch.Tensor:
        return answer_proba(p, self._matrices(ctx)[workers])

    @staticmethod
    def _matrices(ctx: TrainContext) -> torch.Tensor:
        return ctx.modules["confusion"].matrices  # type: ignore[return-value]


class _Matrices(nn.Module):
    """Row-stochastic confusions (n_workers, K, K) as a buffer: set by the M-step, never by the gradient."""

    matrices: torch.Tensor

    def __init__(self, matrices: np.ndarray) -> None:
        super().__init__()
        self.register_buffer("matrices", torch.as_tensor(matrices, dtype=torch.float32))

    def set(self, matrices: np.ndarray) -> None:
        self.matrices.copy_(torch.as_tensor(matrices, dtype=torch.float32))
