"""COINNet (Nguyen, Ibrahim & Fu, NeurIPS 2024): coupled cross-entropy with per-item outlier vectors.

Model (the tutorial seed 004, "Outlier-robust E2E crowdsourced learning";
ALGORITHMS.md §10.4), in crowdagg's orientation ``[true, observed]`` (the
papers' column-stochastic ``A_m[observed, true]`` transposed, as in
:mod:`.geocrowdnet`)::

    f_n = softmax(f_θ(x_n))                           (B, K): the rows of F
    p_n^(m) = f_n A_m + e_n^(m)                       the distribution of m's answer on n
    A_m = softmax(W_m) row by row                     (K, K), rows on the simplex

Most items are "nominal" (``e_n^(m) = 0``: the annotators' confusions
explain their answers); a few are outliers whose answers follow no
annotator's confusion (instance-dependent noise: an ambiguous or corrupted
item), and their ``e`` vectors absorb those answers, so that they bend
neither the confusions nor the classifier (the "robust NMF" view
``P = W F + E`` with a column-sparse E).

Parameters: the classifier θ, the confusions A_m, and one outlier vector
``e_n^(m)`` (K,) per **existing** (item, annotator) pair -- stored on the
training answers, ``e`` (n_train_answers, K), not as the code's dense
N × M × K tensor (held-out answers have none: they are never trained on,
and their pairs' ``e`` is 0).  Each vector is centred, ``e ← e − mean_k e``,
so that ``f A + e`` still sums to 1; the sum is clamped to
[1e-10, 1 − 1e-10] and renormalised (the code's guard against a negative
probability).

Loss of a minibatch of B tasks (the paper's objective; in the code μ₁ is
``lam2`` and μ₂ is ``lam1``)::

    (1/|S_B|) Σ_{(m,n) ∈ S_B} -log p_n^(m)[answer]                    the batch's answers (CCEM)
    + μ₁ (1/B) Σ_{n ∈ B} (Σ_m ‖e_n^(m)‖² + ζ)^{p/2}                    outlier sparsity, p < 1
    + μ₂ (−log det(F_Bᵀ F_B))                                          the volume of F (voltype f)

The outlier term is an ℓ_{2,p} quasi-norm over items: with p = 0.4 it
prefers few items with large ``e`` to many with small ones (the paper's
constraint "at most C outlier items", relaxed).  The volume term is the
code's, on the minibatch and unnormalised, and its guard: it is dropped
(0, no gradient) for a step whose log det is NaN or infinite, whose
determinant is not positive, or whose value is below −100.  (GeoCrowdNet
here divides the Gram matrix by B and adds εI instead -- :mod:`.geocrowdnet`;
the gradient is the same where both are finite.)

Outlier score (the paper's detector): ``s_n = Σ_m ‖ê_n^(m)‖²`` per item over
its training answers (0 for an item without any), in the result's
``task_params["outlier_score"]`` (``crowdagg train --task-params``); the
paper flags the top C fraction.

Training labels (crowdagg's, the paper evaluates only the classifier):
Bayes' rule with each answer's likelihood under the model, whose answer
distribution ``f A + e = Σ_k f_k (A[k, :] + e)`` (Σ f_k = 1) reads as the
per-class likelihood ``A_m[k, answer] + e_n^(m)[answer]`` (floored at
1e-10)::

    q_n(k) ∝ f_n(k) Π_m (A_m[k, answer] + e_n^(m)[answer])

so an outlier item's answers, already explained by its ``e``, weigh
little against the classifier (a held-out answer enters with ``e = 0``).

Paper vs code (ALGORITHMS.md §10.4, §15.6), followed: the paper where they
differ.

* The code's cross-entropy "reset" above 100 (``torch.Tensor(0.)``, which
  is no scalar zero) is broken and not reproduced; answer probabilities
  are clamped as above instead, so the cross-entropy is finite.
* The code's ``w`` volume option (+log det(WᵀW + 1e-3 I): the opposite
  sign to GeoCrowdNet (W)) is not offered; voltype f is the paper's.
* ``p``: the code hard-codes the exponent p/2 = 0.2 (p = 0.4); the paper
  states p in (0, 1] generally; declared, default 0.4.
* Optimiser: the code runs one Adam (wd 1e-4) over the network, the
  confusions and E with OneCycleLR; here each group is its own
  (:class:`~crowdagg.methods.registry.ModuleGroup`): the confusions at
  ``confusion_lr_scale`` × lr (10, as GeoCrowdNet here), the outlier
  vectors at ``outlier_lr_scale`` × lr, neither with weight decay (a decay
  on E would be a second, ℓ₂ outlier penalty the paper does not have).
  Like the code's dense E, the vectors are one dense parameter: rows
  outside the batch get a zero gradient (Adam's momentum still moves them).
* Start: the confusions from ``confusion_init`` as GeoCrowdNet (F) here
  (default ``counts``, the Raykar / Max-MIG count matrix; the code's
  ``init_type = 1`` is ``identity``), E from 0 (the code's).
* Batch: the trainers' shared ``batch_size`` (64; the code's configs 512)
  and epochs (100; the configs 150); model selection on held-out noisy
  answers (the code selects on true validation labels; we never read
  truth).

Defaults (``our_reg.yaml``): μ₁ = μ₂ = 0.01 (``outlier_lam``, ``lam``),
p = 0.4, ζ = 1e-10, lr 1e-3; ``outlier_lr_scale`` 1 (the code's one lr).
Measured (benchmarks/bench_coinnet.py: LabelMe with 20 % of the items
answered at random, seeds 0-2): training labels .812 ± .007 against
geocrowdnet-f's .775 ± .007 (corrupted items .650 against .492), outlier
AUC .802 ± .022.  The trade-off is the outlier vectors' reach: at
μ₁ = 0.01 they grow on clean items too (a minority answer), so a faster
``outlier_lr_scale`` (3: labels .834, AUC .762) helps the labels and hurts
the detection, a slower one (0.3: .788, .827) the reverse; a stronger
sparsity term keeps them on the outliers: ``-p outlier_lam=1 -p
outlier_lr_scale=3`` gives labels .828 ± .008 and AUC .912 ± .020 there,
but music's uncorrupted training labels .780 against the defaults' .790
(benchmarks/bench_train.py labels: music .790 ± .019, labelme .853 ± .004).

Shapes: W (n_workers, K, K); e (n_train_answers, K); a batch's answers
(n,) index both.  Cost per batch: O(answers × K² + B K² + K³), plus
O(n_train_answers × K) for Adam's step on the dense E.  Memory: E, its
gradient, Adam's two moments and the kept epoch's copy -- 20 bytes per
training answer and class.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn

from ...confusion import answer_proba
from ...trainer import PROB_FLOOR, Batch, TrainContext, answer_nll
from .geocrowdnet import GeoCrowdNetF

#: The volume term is dropped for a step whose value -log det(FᵀF) is below this (the code's guard).
VOLUME_FLOOR = -100.0
#: Bytes per training answer and class: E, its gradient, Adam's two moments, the kept epoch's copy (float32).
OUTLIER_BYTES = 5 * 4


class Outliers(nn.Module):
    """The outlier vectors ``e`` (n_answers, K), one per training answer (an existing (item, annotator) pair),
    from 0; :meth:`forward` gives them centred."""

    def __init__(self, n_answers: int, k: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(n_answers, k))

    def forward(self, answers: torch.Tensor | None = None) -> torch.Tensor:
        """The centred vectors ``e − mean_k e`` of ``answers`` (indices into the training answers; all when None)."""
        e = self.weight if answers is None else self.weight[answers]
        return e - e.mean(dim=1, keepdim=True)


class CoinNet(GeoCrowdNetF):
    """COINNet: CCEM with per-answer outlier vectors and the F-volume term (see the module docstring)."""

    name = "coinnet"
    task_param_names = ("outlier_score",)

    def _build(self, ctx: TrainContext) -> dict[str, nn.Module]:
        return {**super()._build(ctx), "outlier": Outliers(len(ctx.train), ctx.n_classes)}

    def _memory(self, data: Any, x: np.ndarray, checked: dict[str, Any], network: Any) -> tuple[float, str]:
        need, what = super()._memory(data, x, checked, network)
        return (need + float(OUTLIER_BYTES) * data.n_answers * data.n_classes,
                what + f", an outlier vector per answer ({data.n_answers:,} × {data.n_classes:,})")

    def _loss(self, ctx: TrainContext, logits: torch.Tensor, batch: Batch) -> torch.Tensor:
        f = torch.softmax(logits, dim=1)  # (B, K)
        e = ctx.modules["outlier"](batch.answers)  # (n, K), centred
        q = coinnet_proba(answer_proba(f[batch.row], ctx.confusions()(batch.worker)), e)
        loss = answer_nll(q, batch.label)
        params = ctx.params
        if params["outlier_lam"]:
            loss = loss + params["outlier_lam"] * outlier_penalty(e, batch.row, f.shape[0], params["p"],
                                                                  params["zeta"])
        if params["lam"]:
            loss = loss + params["lam"] * volume_penalty(f)
        return loss

    @torch.no_grad()
    def outlier_scores(self, ctx: TrainContext) -> torch.Tensor:
        """``s_n = Σ_m ‖ê_n^(m)‖²`` (n_tasks,) over each task's training answers (0 without any)."""
        e = ctx.modules["outlier"]()
        scores = torch.zeros(ctx.data.n_tasks, device=ctx.device)
        return scores.index_add_(0, ctx.train.task, (e * e).sum(dim=1))

    def _task_params(self, ctx: TrainContext) -> dict[str, np.ndarray]:
        return {"outlier_score": self.outlier_scores(ctx).double().cpu().numpy()}

    @torch.no_grad()
    def _posterior(self, ctx: TrainContext, proba: np.ndarray, confusion: np.ndarray) -> np.ndarray:
        """Bayes' rule with each answer's per-class likelihood ``A_m[k, answer] + e[answer]`` (the module
        docstring): the training answers with their outlier vectors, the held-out ones with none."""
        if self.labels_from == "classifier":
            return proba
        conf = torch.as_tensor(confusion, device=ctx.device)
        log_q = torch.log(torch.as_tensor(proba, device=ctx.device).clamp_min(PROB_FLOOR))
        e = ctx.modules["outlier"]().double()
        for answers, shift in ((ctx.train, e), (ctx.val, None)):
            if not len(answers):
                continue
            lik = conf[answers.worker, :, answers.label]  # (n, K): A_m[k, answer] for every k
            if shift is not None:
                lik = lik + shift.gather(1, answers.label.unsqueeze(1))
            log_q.index_add_(0, answers.task, torch.log(lik.clamp_min(PROB_FLOOR)))
        return torch.softmax(log_q, dim=1).cpu().numpy()


def coinnet_proba(q: torch.Tensor, e: torch.Tensor) -> torch.Tensor:
    """``f A + e`` (n, K) clamped to [1e-10, 1 − 1e-10] and renormalised (the code's guard: a centred ``e`` can
    take an entry below 0 or above 1)."""
    y = (q + e).clamp(PROB_FLOOR, 1.0 - PROB_FLOOR)
    return y / y.sum(dim=1, keepdim=True)


def outlier_penalty(e: torch.Tensor, row: torch.Tensor, n_tasks: int, p: float, zeta: float) -> torch.Tensor:
    """``(1/B) Σ_{n ∈ B} (Σ_m ‖e_n^(m)‖² + ζ)^{p/2}``: ``e`` (n, K) the batch's answers' centred vectors,
    ``row`` (n,) each answer's task in the batch, ``n_tasks`` = B (a task's pairs without an answer have
    e = 0, so its sum runs over its answers)."""
    per_task = torch.zeros(n_tasks, device=e.device, dtype=e.dtype).index_add_(0, row, (e * e).sum(dim=1))
    return ((per_task + zeta) ** (p / 2)).mean()


def volume_penalty(f: torch.Tensor) -> torch.Tensor:
    """``-log det(F_Bᵀ F_B)`` of the batch's classifier outputs ``f`` (B, K), or 0 (no gradient) where the
    code drops it: a determinant that is not positive, a log det that is not finite, a value below −100.

    Without a sync: the check runs on a detached log det, and the term's own log det is of the identity where
    the check fails (its gradient through a singular matrix would be NaN even when multiplied by 0)."""
    gram = f.T.float() @ f.float()
    with torch.no_grad():
        sign, logdet = torch.linalg.slogdet(gram)
        ok = (sign > 0) & torch.isfinite(logdet) & (-logdet >= VOLUME_FLOOR)
    safe = torch.where(ok, gram, torch.eye(gram.shape[0], device=gram.device, dtype=gram.dtype))
    return -torch.linalg.slogdet(safe)[1] * ok
