"""CrowdLayer (Rodrigues & Pereira, AAAI 2018): a per-annotator matrix on the classifier's softmax output.

Model (the "MW" connection of the original Keras layer)::

    p_n = softmax(f_θ(x_n))                      (B, K)
    a_n^(m) = p_n W_m                            W_m ∈ R^{K×K}, free, from the identity
    P(answer of m on n) = softmax(a_n^(m))       the layer's output read as logits

trained with the mean cross-entropy over the minibatch's answers (missing
answers simply absent: the answers are sparse).  At test time the crowd
layer is dropped and ``f_θ`` is the classifier.

W_m is not a probability matrix (ALGORITHMS.md §10.1, §15.10: the original
applies W to the probabilities and softmaxes again; crowd-kit's torch layer
applies it to logits -- a different function; we follow the paper and its
code).  The confusion reported for worker m is the answer model's
distribution for a task of each class, row k = softmax(e_k W_m): a proper
``[true, observed]`` confusion of what the layer learned.

Shapes: W (n_workers, K, K); a batch's answers (n,) index it by worker.
Cost per batch: O(answers × K²).
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional

from ...trainer import Batch, TrainContext, Trainer


class CrowdLayer(Trainer):
    """CrowdLayer, MW connection (see the module docstring)."""

    name = "crowdlayer"

    def _build(self, ctx: TrainContext) -> dict[str, nn.Module]:
        return {"crowd": _Kernels(ctx.n_workers, ctx.n_classes)}

    def _answer_logits(self, ctx: TrainContext, p: torch.Tensor, workers: torch.Tensor) -> torch.Tensor:
        crowd = ctx.modules["crowd"]
        assert isinstance(crowd, _Kernels)
        w = crowd.weight[workers]  # (n, K, K)
        return torch.bmm(p.unsqueeze(1), w).squeeze(1)

    def _loss(self, ctx: TrainContext, logits: torch.Tensor, batch: Batch) -> torch.Tensor:
        p = torch.softmax(logits, dim=1)[batch.row]
        return functional.cross_entropy(self._answer_logits(ctx, p, batch.worker), batch.label)

    def _answer_proba(self, ctx: TrainContext, p: torch.Tensor, workers: torch.Tensor) -> torch.Tensor:
        return torch.softmax(self._answer_logits(ctx, p, workers), dim=1)


class _Kernels(nn.Module):
    """The crowd layer's free matrices W (n_workers, K, K), from the identity."""

    def __init__(self, n_workers: int, k: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.eye(k).repeat(n_workers, 1, 1))
