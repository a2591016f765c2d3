"""TraceReg (Tanno, Saeedi, Sankaranarayanan, Alexander & Silberman, CVPR 2019): confusions pushed towards the truth by their trace.

Model (Tanno et al. eq. 2; crowdagg's orientation ``[true, observed]``,
the paper's ``Â^(r)`` transposed)::

    p_n = softmax(f_θ(x_n))                               (B, K)
    P(answer of m on n = j) = [p_n A_m]_j                 A_m (K, K), rows on the simplex
    A_m = rownorm(softplus(W_m)),  W_m = δ I - 5          (the paper's App. F listing; δ = 6: 0.956 on the
                                                           diagonal for K = 10, "initialise to identity")

Loss of a minibatch (eq. 4, normalised -- see below)::

    (1/|S_B|) Σ_{(m,n) ∈ S_B} -log [p_n A_m]_{answer}  +  λ (1/M) Σ_m tr(A_m)

the first sum over the batch's observed answers, the second over every
annotator.  The trace term pushes each annotator's estimated confusion to
be as *unreliable* as the answers allow; Tanno et al.'s Theorem 1: when
the model fits the answers exactly and the **mean** true confusion (and
the mean estimate, kept so by the near-identity start) is diagonally
dominant, the minimum of the mean trace is reached exactly at the true
confusions, so ``f_θ`` then learns the true labels.  It breaks once the
mean confusion is not diagonally dominant (their Fig. 3: pairwise flippers
below a mean skill of about 0.3).

Normalisation (the paper and its listing differ, ALGORITHMS.md §10.2 and
§15.4): eq. 4 sums the cross-entropy over every item and answer and sums
the traces over annotators; the listing averages the cross-entropy over
the batch (summed over annotators) and **averages** the traces.  We take
the mean cross-entropy over the batch's observed answers (the tutorial's
1/|S| form, as CrowdLayer and CCEM here) and the mean trace over
annotators.  Then the pull of the trace on one annotator's matrix against
the pull of its own answers is λ whatever the batch size, the answers per
task and the number of annotators (for annotators of equal load: each
holds 1/M of the answers and 1/M of the trace term), so λ = 0.01 (the
paper's; robust over {0.1, 0.01, 0.001} as long as the trace term stays
below the cross-entropy, their §3.2) means the same on LabelMe's 59
annotators as on MNIST's 5.  With eq. 4's sums λ would have to shrink with
the number of items; with the listing's, grow with the number of
annotators.  The answer probabilities are floored at 1e-10 before the log
(the listing clips to [1e-10, 0.9999999]; the upper clip is not needed).

Optimiser: Adam on the classifier and the confusions alike (the paper:
lr 1e-3, β = (0.9, 0.999), batch 50, 200 epochs; weight decay on the
classifier only).  Model selection: the base's held-out noisy-answer
likelihood (the paper selects on true labels of 10 % of the images; we
never read truth).

Parameters (``-p``): ``lam`` λ (default 0.01, the paper), ``diagonal`` δ
(default 6, the listing), ``confusion_lr_scale`` (default 10: the
confusions learn at 10 × lr, as deepBP's re-implementation, App. D, does;
the paper uses one lr over 200 epochs of 50-image batches, hundreds of
thousands of steps, where a dataset of LabelMe's size gives a few
thousand: from 6I - 5 the off-diagonal logits must rise by about 5 units,
which Adam at 1e-3 does not do in that many steps, and the posterior then
merely repeats the answers).  Shapes: W (n_workers, K, K); a batch's answers
(n,) index it by worker.  Cost per batch: O(answers × K²) for the
cross-entropy, O(n_workers × K²) for the trace (the softplus of every
matrix).
"""

from __future__ import annotations

import torch
from torch import nn

from ...confusion import Confusions, answer_proba, initial_logits
from ...trainer import Batch, TrainContext, Trainer, answer_nll


class TraceReg(Trainer):
    """TraceReg: per-annotator row-stochastic confusions with a trace penalty (see the module docstring)."""

    name = "tracereg"

    def _build(self, ctx: TrainContext) -> dict[str, nn.Module]:
        logits = initial_logits(ctx.n_workers, ctx.n_classes, "diagonal", form="softplus",
                                diagonal=ctx.params["diagonal"])
        return {"confusion": Confusions(logits, form="softplus")}

    def _loss(self, ctx: TrainContext, logits: torch.Tensor, batch: Batch) -> torch.Tensor:
        conf = ctx.confusions()
        all_matrices = conf.matrices()  # (M, K, K): the trace needs every annotator's
        p = torch.softmax(logits, dim=1)[batch.row]
        q = answer_proba(p, all_matrices[batch.worker])
        ce = answer_nll(q, batch.label)
        trace = torch.diagonal(all_matrices, dim1=1, dim2=2).sum(dim=1).mean()
        return ce + ctx.params["lam"] * trace

    def _answer_proba(self, ctx: TrainContext, p: torch.Tensor, workers: torch.Tensor) -> torch.Tensor:
        return answer_proba(p, ctx.confusions()(workers))
