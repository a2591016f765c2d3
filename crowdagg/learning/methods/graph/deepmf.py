r"""deepMF (Kim, Cho, Kim & Ok, AISTATS 2022, §3.1 and App. B): mean field with the classifier as the labels' prior.

Model (ALGORITHMS.md §12.1)::

    z_i ~ Cat(f̂_i),  f̂_i = Clip(f_φ(x_i), c)           the clipped classifier is each task's prior
    one-coin (default, the paper's eq. 3):
      θ_u[k, k] = p_u ~ Beta(A, B),  θ_u[k, l] = (1 - p_u)/(K - 1)      ``prior = (A, B)``, default 2, 1
    confusion (``worker_model=confusion``, the paper's code):
      θ_u[k, :] ~ Dir(α_k),  α_kk = A, α_kl = B
    y_iu ~ Cat(θ_u[z_i, :])                               rows of θ_u: true class; columns: the answer

**One epoch** (full batch, :class:`~crowdagg.learning.trainer.BatchPolicy` ``full_batch=True``, as the paper):

1. ``f̂ = Clip(f_φ(x), c)`` (:func:`clip`) on every task, the network in eval mode (no dropout: the E-step's
   prior is the prediction, not one dropout draw of it; the paper's code takes the training-mode output);
2. **E-step**, one mean-field update of the tasks, on the engine's latent-class kernel
   (:func:`crowdagg.methods.blocks.latent_posterior`, :mod:`crowdagg.kernels.latent`) with ``log f̂`` as each
   task's log prior and the expected log-confusions as the table:

   .. math:: q_i(k) \propto \hat f_i(k) \exp \sum_{u \in M_i} \mathbb{E}\log\theta_u[k, y_{iu}]

   -- one-coin: :math:`\psi(a_u) - \psi(a_u + b_u)` where :math:`y_{iu} = k`, :math:`\psi(b_u) - \psi(a_u +
   b_u) - \log(K - 1)` else (:func:`crowdagg.methods.graph.mf.one_coin_log_table`); confusion:
   :math:`\psi(\beta_u[k, y_{iu}]) - \psi(\sum_l \beta_u[k, l])`
   (:func:`crowdagg.methods.variational.expected_log`) -- with the posteriors of the previous epoch (the prior at
   the first);
3. **M-step** of the workers, closed form from the kernel's expected counts of the same pass: one-coin
   :math:`a_u = A + \sum_{i \in N_u} q_i(y_{iu})`, :math:`b_u = B + \sum_{i \in N_u} (1 - q_i(y_{iu}))`
   (:func:`crowdagg.methods.graph.mf.one_coin_posterior`); confusion :math:`\beta_u[k, l] = \alpha[k, l] +
   \sum_{i \in N_u: y_{iu} = l} q_i(k)`;
4. the classifier, one Adam step on :math:`\mathrm{KL}(q \| \hat f)` averaged over the tasks -- the loss on the
   **clipped** ``f̂``, so a class probability beyond ``c`` gets no gradient (the paper's implicit early stop of
   the confidence).

**One mean-field sweep an epoch**, as the paper (its Alg. 1: one E/M alternation per iteration of the
classifier): the classifier moves the prior a little each epoch, and a sweep from the previous ``β`` follows
it; a sweep costs O(answers × K + workers × K²), far below the network's epoch.

**Clipping** (paper §3.3, ALGORITHMS.md §12.4): every class probability above ``c`` is capped at ``c`` and the
clipped mass spread evenly over the other classes (water-filling: ``f̂ = min(c, f + λ)``, λ ≥ 0 with Σ f̂ = 1),
so ``c = 1/K`` gives the uniform prior (the features ignored: deepMF is then mean-field Dawid--Skene with a
uniform class prior, :mod:`crowdagg.methods.graph.mf`) and ``c >= 1`` is no clipping.  For K = 2 it is the
paper's code's ``clamp(f, 1 - c, c)``.  ``c`` below 1/K is refused (no distribution has every entry below 1/K).

**Where paper, code and this module differ** (ALGORITHMS.md §15 item 2):

* the worker prior: the paper's tied one-coin prior (eq. 3; for K > 2 the errors spread evenly over the other
  classes, ALGORITHMS.md §6.3) by default; its code's Dirichlet on each row of a full confusion (``α`` = A on
  the diagonal, B off it: two-coin for K = 2) with ``worker_model=confusion``, which fits crowds whose errors
  depend on the class better (benchmarks/bench_train.py labels, seeds 0-2: labelme .837 against one-coin's
  .817, music .806 against .796); the prior's default keeps the paper's prior mean accuracy 2/3 in both
  (:func:`worker_prior`: one-coin Beta(2, 1), confusion rows (2(K - 1), 1); :mod:`.deepbp` says why);
* clipping: the paper's (mass spread evenly), not the code's clamp without renormalisation (the same for
  K = 2); default c = 0.9 (the paper's experiments), not the code's 1.0;
* **defaults**: full batch and 200 epochs, as the paper, but Adam at lr 1e-2 where the paper's Table 2 has
  1e-4 (its code 1e-3): one step an epoch at 1e-4 leaves the classifier under-fit after 200 epochs (measured,
  seed 0: music's classifier .506 on its training tasks, labels .790; labelme's best epoch the last, labels
  .837), at 1e-3 music's best epoch was still the last (labels .794), at 1e-2 the held-out selection keeps
  an epoch well inside the 200 (labelme .853 at epoch 6, music .800 at epoch 87; these with the confusion
  model and prior (2, 1));
* the base's model selection: ``val_fraction`` of the answers are held out of the inference and the epoch
  with the best held-out answer likelihood under ``f̂ E[θ]`` is kept (the paper runs a fixed number of
  epochs: ``-p val_fraction=0`` does that);
* the training tasks' labels: one E-step over **every** answer (held-out ones too) with the kept epoch's
  ``f̂`` and ``β``.

Shapes: ``f̂``, ``q`` (n_tasks, K); one-coin ``ab`` (n_workers, 2) the Beta posteriors, confusion ``β``
(n_workers, K, K) ``[worker, true, observed]`` (in ``ctx.state``, snapshotted with the kept epoch).  Cost per
epoch: the network on every task plus O(answers × K + workers ×
K²).  Failure modes (paper §4.1): mean field is over-confident, and a wrong prior or an extreme spammer can
send it to a poor fixed point (reading a spammer as an adversary); deepBP (:mod:`.deepbp`) integrates the
confusions out instead.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import torch
from torch import nn

from ....errors import UsageError, param
from ....methods.blocks import latent_posterior, one_coin_matrices
from ....methods.graph.mf import ONE_COIN, one_coin_log_table, one_coin_posterior
from ....methods.variational import expected_log
from ...confusion import answer_proba
from ...trainer import PROB_FLOOR, Batch, BatchPolicy, TrainContext, Trainer

#: Slack of the clipping's comparisons (a class at c up to rounding counts as capped).
CLIP_SLACK = 1e-12


def clip(p: torch.Tensor, c: float) -> torch.Tensor:
    """The paper's clipping of class probabilities ``p`` (n, K): each capped at ``c``, the capped mass spread evenly
    over the classes below the cap (water-filling ``min(c, p + λ)``); ``c >= 1``: ``p`` itself; ``c <= 1/K``: uniform.

    Differentiable: λ is the capped classes' excess over ``c`` shared by the others, so for K = 2 the clipped
    output is constant (zero gradient) once a class passes ``c``, as the paper's ``clamp``.
    """
    k = p.shape[1]
    if c >= 1.0:
        return p
    if c * k <= 1.0 + CLIP_SLACK:
        return p * 0.0 + 1.0 / k  # (in the graph, with no gradient: the loss is constant, backward still runs)
    top = torch.sort(p, dim=1, descending=True).values
    m = torch.arange(k, device=p.device, dtype=p.dtype)
    above = torch.cumsum(top, dim=1) - top  # Σ of the m largest, m = 0 .. K-1
    lam = (above - m * c) / (k - m)  # the m largest capped: their excess shared by the K - m others
    fits = top + lam <= c + CLIP_SLACK  # the (m + 1)-th largest stays under the cap: m classes capped
    first = torch.argmax(fits.to(torch.int8), dim=1, keepdim=True)  # the fewest capped (always one: m = K - 1)
    return torch.clamp(p + lam.gather(1, first), max=c)


def dirichlet_prior(prior: tuple[float, ...], k: int) -> np.ndarray:
    """The prior pseudo-counts α (K, K) ``[true, observed]``: ``prior[0]`` on the diagonal, ``prior[1]`` off it."""
    alpha = np.full((k, k), float(prior[1]))
    np.fill_diagonal(alpha, float(prior[0]))
    return alpha


def worker_prior(prior: tuple[float, ...] | None, k: int, model: str) -> tuple[float, ...]:
    """The worker prior's two numbers (A, B): ``prior``, or when it is not given (None) the paper's prior mean
    accuracy 2/3 -- one-coin Beta(2, 1), the paper's eq. 3; confusion rows Dir(2 (K - 1), 1), the paper's
    Dir(2, 1) at K = 2 (which it is there), where (2, 1) would say 2 / (K + 1) and lets a class be emptied into
    a neighbour the workers confuse it with (:mod:`.deepbp`, "The prior")."""
    if prior is not None:
        return tuple(prior)
    if model == ONE_COIN:
        return (2.0, 1.0)
    return (2.0 * max(k - 1, 1), 1.0)


def check_clip(c: float, k: int) -> None:
    """Refuse a clipping below 1/K (no distribution over K classes has every entry below it); with one class
    any c clips the only distribution to itself (:func:`clip`), so none is refused."""
    if k > 1 and c * k < 1.0 - CLIP_SLACK:
        raise UsageError(f"{param('clip')} must be at least 1/K = 1/{k} = {1.0 / k!r} for {k} classes (1/K: the "
                         f"features ignored), got {c!r}")  # (every digit: 0.33333 is below 1/3, not above 0.3333)


class DeepMF(Trainer):
    """deepMF (see the module docstring); :class:`~.deepbp.DeepBP` replaces its inference (:meth:`_infer`)."""

    name = "deepmf"
    batch_policy: ClassVar[BatchPolicy] = BatchPolicy(full_batch=True)
    memory_advice = f"use fewer tasks or a smaller {param('hidden')} (deepMF trains on every task at once)"
    #: A task without answers gets its prior f̂, the clipped prediction (`crowdagg predict` gives it unclipped).
    empty_posterior = f"the classifier's prediction clipped at {param('clip')} (the model's prior of the label)"

    # ------------------------------------------------------------------ the hooks
    def _build(self, ctx: TrainContext) -> dict[str, nn.Module]:
        k = ctx.n_classes
        check_clip(ctx.params["clip"], k)
        prior = self._worker_prior(ctx)
        alpha = dirichlet_prior(prior, k)  # (checks the prior's two numbers either way)
        if ctx.params["worker_model"] == ONE_COIN:
            ctx.state["ab"] = np.tile(np.asarray(prior, dtype=np.float64), (ctx.n_workers, 1))
        else:
            ctx.state["beta"] = np.array(np.broadcast_to(alpha, (ctx.n_workers, k, k)))
        self._set_confusion(ctx)
        ctx.state["targets"] = torch.zeros((ctx.data.n_tasks, k), device=ctx.device)
        return {}

    def _epoch_begin(self, ctx: TrainContext) -> None:
        train = ctx.training_set()
        q = self._infer(ctx, self._prior(ctx, ctx.proba()), train, ctx.train_engine(), epoch=True)
        q[train.answers_per_task == 0] = 0.0  # not trained on
        ctx.state["targets"] = torch.as_tensor(q, dtype=torch.float32, device=ctx.device)

    def _loss(self, ctx: TrainContext, logits: torch.Tensor, batch: Batch) -> torch.Tensor:
        q = ctx.state["targets"][batch.tasks]
        f_hat = clip(torch.softmax(logits, dim=1), ctx.params["clip"])
        log_f = torch.log(f_hat.clamp_min(PROB_FLOOR))
        return (torch.special.xlogy(q, q) - q * log_f).sum(dim=1).mean()  # KL(q ‖ f̂)

    def _answer_proba(self, ctx: TrainContext, p: torch.Tensor, workers: torch.Tensor) -> torch.Tensor:
        return answer_proba(clip(p, ctx.params["clip"]), ctx.state["confusion"][workers])

    @torch.no_grad()
    def _confusions(self, ctx: TrainContext) -> torch.Tensor:
        """The posterior mean confusions (the answer model's rows are their clipped one-hots: not a confusion)."""
        return ctx.state["confusion"]

    def _posterior(self, ctx: TrainContext, proba: np.ndarray, confusion: np.ndarray) -> np.ndarray:
        """The inference over every answer (the held-out ones too) with the kept epoch's ``f̂`` and workers."""
        log_prior = self._prior(ctx, torch.as_tensor(proba))
        return self._infer(ctx, log_prior, ctx.data, ctx.params.engine, epoch=False)

    # ------------------------------------------------------------------ the inference
    @staticmethod
    def _worker_prior(ctx: TrainContext) -> tuple[float, ...]:
        """The worker prior's two numbers (A, B) (:func:`worker_prior`)."""
        return worker_prior(ctx.params["prior"], ctx.n_classes, ctx.params["worker_model"])

    @staticmethod
    def _prior(ctx: TrainContext, proba: torch.Tensor) -> np.ndarray:
        """``log f̂`` (n_tasks, K) float64: the clipped classifier's log-probabilities, floored."""
        f_hat = clip(proba.double(), ctx.params["clip"]).cpu().numpy()
        return np.log(np.maximum(f_hat, PROB_FLOOR))

    def _infer(self, ctx: TrainContext, log_prior: np.ndarray, data: Any, engine: Any, epoch: bool) -> np.ndarray:
        """q (n_tasks, K): one mean-field E-step over ``data`` from the workers' posteriors and, in an epoch, their
        update from its expected counts (one-coin: the Beta ``ab``; confusion: the Dirichlet rows ``beta``)."""
        one_coin = ctx.params["worker_model"] == ONE_COIN
        if one_coin:
            log_table = one_coin_log_table(ctx.state["ab"], ctx.n_classes)  # symmetric: either layout
        else:
            log_table = expected_log(ctx.state["beta"], axis=2).transpose(0, 2, 1)  # [worker, observed, true]
        post = latent_posterior(data, log_table, log_prior, engine=engine, counts="posterior" if epoch else None,
                                max_memory=ctx.params.max_memory)
        if epoch:
            assert post.counts is not None
            prior = self._worker_prior(ctx)
            if one_coin:
                ctx.state["ab"] = one_coin_posterior(np.asarray(prior, dtype=np.float64), post.counts)
            else:
                alpha = dirichlet_prior(prior, ctx.n_classes)
                ctx.state["beta"] = alpha + post.counts.transpose(0, 2, 1)  # [worker, true, observed]
            self._set_confusion(ctx)
        return np.asarray(post.classes, dtype=np.float64)

    @staticmethod
    def _set_confusion(ctx: TrainContext) -> None:
        """The posterior mean confusions (n_workers, K, K) ``[worker, true, observed]`` on the device, the answer
        model's: one-coin ``a / (a + b)`` on the diagonal, the rest spread evenly; confusion ``β / Σβ``."""
        if "ab" in ctx.state:
            ab = ctx.state["ab"]
            mean = one_coin_matrices(ab[:, 0] / ab.sum(axis=1), ctx.n_classes)
        else:
            beta = ctx.state["beta"]
            mean = beta / beta.sum(axis=2, keepdims=True)
        ctx.state["confusion"] = torch.as_tensor(mean, dtype=torch.float32, device=ctx.device)
