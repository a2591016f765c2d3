"""GeoCrowdNet (F) and (W) (Ibrahim, Nguyen & Fu, ICLR 2023): coupled cross-entropy with a volume regulariser.

Model: CCEM, the tutorial's (seed 004, Part II) coupled cross-entropy
minimisation, in crowdagg's orientation ``[true, observed]`` (the papers'
column-stochastic ``A_m[observed, true]`` transposed)::

    p_n = softmax(f_θ(x_n))                       (B, K): the rows of F
    P(answer of m on n = j) = [p_n A_m]_j         A_m (K, K), rows on the simplex
    A_m = softmax(W_m) row by row                 (the papers' column softmax, transposed)

Loss of a minibatch::

    (1/|S_B|) Σ_{(m,n) ∈ S_B} -log [p_n A_m]_{answer}  -  λ R

the mean over the batch's observed answers (the papers' 1/|S|), and one of
two volume terms:

* **GeoCrowdNet (F)** (``geocrowdnet-f``; plain ``geocrowdnet`` is this
  one): ``R = log det(F_Bᵀ F_B / B + ε I)``, F_B (B, K) the classifier's
  outputs on the minibatch's tasks.  Maximising the volume of F -- equal,
  with P = W F fitted, to minimising that of W -- identifies f and every
  A_m (up to one permutation of the classes) when F satisfies the
  sufficiently scattered condition: many diverse items, no class experts
  needed.  Use it when the items are many and the annotators mediocre.
* **GeoCrowdNet (W)** (``geocrowdnet-w``): ``R = log det(Wᵀ W / M + ε I)``,
  W (M K, K) the stacked column-stochastic confusions (in our orientation
  ``Wᵀ W = Σ_m A_m A_mᵀ``).  Identifies when W is sufficiently scattered:
  class experts exist among the annotators, even with fewer items.

Choices, against the reference code (ALGORITHMS.md §10.3, §15.5):

* The Gram matrices are divided by the batch size (F) and the number of
  annotators (W): ``log det(c G) = K log c + log det G``, so the gradient is
  the paper's, but the value no longer grows with B or M and λ means the
  same for any batch size or crowd.
* ε = 1e-4 is added to the diagonal (the failure mode of §10.3: a
  near-singular Gram matrix -- a batch of fewer than K tasks, a classifier
  still uniform at the start -- gives an infinite or NaN log det).  The code
  instead drops the term for a step whenever it is NaN, infinite or above
  100; ε I keeps the term and its gradient finite at every step, so no step
  silently changes objective.  It bounds the penalty by -K log ε.
* ``confusion_init``: ``identity`` (the papers' code: logits I, only
  ``e / (e + K - 1)`` on the diagonal, 0.43 for K = 8), ``diagonal``
  (logits 6 I - 5, ``close_to_identity`` in the code: 0.98 for K = 8), or
  ``counts``: the log of each annotator's row-normalised counts against the
  soft majority vote of the training answers -- the Raykar / Max-MIG count
  matrix, in the orientation and on the log scale the softmax reads (the
  code's ``mle_based`` feeds the transposed probabilities as logits, §15.5;
  we do not).
* The volume term is computed on the minibatch, as in the code (the paper
  writes it over all N items; a full-data F per step would cost an extra
  forward pass over every item).

Defaults: ``lam`` = 0.01 for both (the papers' CIFAR-10 setting and the
COINNet repo's configs; its LabelMe grid is {0.1, 0.2}, chosen there on
true validation labels -- see the measurements in benchmarks/README.md),
``confusion_init`` = ``counts`` for (F) and ``identity`` for (W),
``confusion_lr_scale`` = 10 (deepBP App. D's 10 × lr for the confusions).
Measured (benchmarks/bench_train.py labels, 3 seeds, inferred training
labels): (F) from the counts music .811 ± .003, labelme .845 ± .004; from
the identity at 10 × lr its music fits are unstable (.57-.77: the
confusions, far from any answer pattern at the start, absorb the answers),
at 1 × lr .780 / .823.  (W) from the identity at 10 × lr: music .815,
labelme .820.  In the identifiability setting of the tests (one label per
item from machine annotators) the identity start is the theory's, and
both variants recover the confusions better than CrowdLayer from it.
Optimiser: Adam,
weight decay on the classifier only (the code: Adam, wd 1e-4, lr 1e-3 or
1e-2 on LabelMe, batch 100, 100 epochs).  Model selection: the base's
held-out noisy-answer likelihood (the code selects on true validation
labels; we never read truth).

Shapes: W (n_workers, K, K); a batch's answers (n,) index it by worker.
Cost per batch: O(answers × K² + B K² + K³) for (F), O(answers × K² +
M K³) for (W).
"""

from __future__ import annotations

from typing import ClassVar

import torch
from torch import nn

from ...confusion import Confusions, answer_proba, initial_logits, soft_vote_counts
from ...trainer import Batch, TrainContext, Trainer, answer_nll

#: Added to the diagonal of the (normalised) Gram matrix before its log det: keeps the volume term finite.
VOLUME_EPS = 1e-4


class GeoCrowdNetF(Trainer):
    """GeoCrowdNet (F): CCEM with the classifier outputs' volume maximised (see the module docstring)."""

    name = "geocrowdnet-f"
    #: Which factor's volume is maximised: ``"F"`` (the classifier's outputs) or ``"W"`` (the confusions).
    volume: ClassVar[str] = "F"

    def _build(self, ctx: TrainContext) -> dict[str, nn.Module]:
        init = ctx.params["confusion_init"]
        counts = soft_vote_counts(ctx.training_set(), ctx.train_engine()) if init == "counts" else None
        logits = initial_logits(ctx.n_workers, ctx.n_classes, init, form="softmax", counts=counts)
        return {"confusion": Confusions(logits, form="softmax")}

    def _loss(self, ctx: TrainContext, logits: torch.Tensor, batch: Batch) -> torch.Tensor:
        conf = ctx.confusions()
        f = torch.softmax(logits, dim=1)  # (B, K)
        q = answer_proba(f[batch.row], conf(batch.worker))
        ce = answer_nll(q, batch.label)
        lam = ctx.params["lam"]
        if lam == 0.0:
            return ce
        return ce - lam * self._log_volume(ctx, f)

    def _log_volume(self, ctx: TrainContext, f: torch.Tensor) -> torch.Tensor:
        """``log det(F_Bᵀ F_B / B + ε I)`` of the batch's classifier outputs ``f`` (B, K)."""
        gram = f.T @ f / f.shape[0]
        return _logdet(gram)

    def _answer_proba(self, ctx: TrainContext, p: torch.Tensor, workers: torch.Tensor) -> torch.Tensor:
        return answer_proba(p, ctx.confusions()(workers))


class GeoCrowdNet(GeoCrowdNetF):
    """``geocrowdnet``: GeoCrowdNet (F) under its short name (the design card's method)."""

    name = "geocrowdnet"


class GeoCrowdNetW(GeoCrowdNetF):
    """GeoCrowdNet (W): CCEM with the stacked confusions' volume maximised (see the module docstring)."""

    name = "geocrowdnet-w"
    volume = "W"

    def _log_volume(self, ctx: TrainContext, f: torch.Tensor) -> torch.Tensor:
        """``log det(Wᵀ W / M + ε I)``, W (M K, K) the papers' stacked column-stochastic A_m: ours are their
        transposes ``C_m`` (rows on the simplex), so ``Wᵀ W = Σ_m C_m C_mᵀ``."""
        c = ctx.confusions().matrices()  # (M, K, K) [worker, true, observed]
        gram = torch.einsum("mij,mkj->ik", c, c) / c.shape[0]
        return _logdet(gram)


def _logdet(gram: torch.Tensor) -> torch.Tensor:
    """``log det(gram + ε I)`` of a symmetric positive semi-definite K×K matrix (float32)."""
    k = gram.shape[0]
    eye = torch.eye(k, device=gram.device, dtype=torch.float32)
    return torch.linalg.slogdet(gram.float() + VOLUME_EPS * eye)[1]
