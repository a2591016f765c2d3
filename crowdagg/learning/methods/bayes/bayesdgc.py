r"""BayesDGC (Li, Huang & Chen, SCIS 2021): a Bayesian Dawid--Skene whose true labels have the classifier as a prior.

Model (the paper's §3.1, eqs. 1--6; ALGORITHMS.md §12.7)::

    π ~ Dir(α⁰)                                   class proportions, α⁰ = class_prior (1.1);
                                                  held uniform unless learn_class_prior (see below)
    ν_jk ~ Dir(β⁰_k)                              annotator j's confusion row for true class k:
                                                  β⁰_kk = prior[0] (5), β⁰_kk' = prior[1] (2)
    p(y_i | x_i, π) ∝ π_{y_i} · τ(x_i; γ)_{y_i}    the network τ = softmax f_γ, a second prior factor
    L_ij | y_i ~ Cat(ν_j[y_i, :])                  each answer

Inference: mean-field :math:`q(\pi)\,q(V)\,q(Y)`, Dirichlet factors with
natural parameters :math:`\eta_\pi = \alpha - 1` and :math:`\eta_{\nu_{jk}} =
\beta_{jk} - 1` (eqs. 8--9), fitted by natural-gradient stochastic
variational inference in the manner of SVAE (eqs. 13--18).  Each minibatch B
of training tasks (one Adam step of the base's loop,
:class:`~crowdagg.learning.trainer.Trainer`):

1. **Local step** (eq. 14): for every task of B,

   .. math:: \log q(y_i = k) = \mathbb{E}\log\pi_k + \log\tau(x_i)_k
             + \sum_{j: L_{ij} \ne 0} \mathbb{E}\log\nu_{jk, L_{ij}} - \log Z_i,
             \qquad \mathbb{E}\log\nu_{jkl} = \psi(\beta_{jkl}) - \psi(\textstyle\sum_{l'}\beta_{jkl'})

   -- one pass of the latent-class E-step kernel
   (:func:`crowdagg.kernels.latent.latent_block` on a one-block partition
   of the batch's answers; per-task log prior :math:`\mathbb{E}\log\pi +
   \log\tau(x_i)`, table :math:`\mathbb{E}\log\nu` ``[worker, observed,
   true]``), which also reduces the batch's sufficient statistics: the
   expected counts :math:`\sum_{i\in B} q_i(k)\,1[L_{ij} = l]` and
   :math:`\sum_{i\in B} q_i`.
2. **Global step** (eqs. 17--18): with the natural gradient
   :math:`\tilde\nabla = \eta^0 + \frac{N}{|B|}\sum_{i \in B} t_i - \eta`
   (N the training tasks), :math:`\eta \leftarrow \eta + \rho_t\tilde\nabla =
   (1 - \rho_t)\,\eta + \rho_t(\eta^0 + \frac{N}{|B|}\sum_{i\in B} t_i)` for
   every :math:`\nu_{jk}` (and π when it is learned) (:func:`natural_step`), with Robbins--Monro
   steps :math:`\rho_t = (t + \tau)^{-\kappa}`, t = 1, 2, ... the global
   steps so far (:func:`step_size`; ``step_delay`` τ = 1, ``step_decay``
   κ = 0.75).
3. **Network**: one Adam step on the surrogate ELBO's γ-dependent term,
   :math:`-\frac1{|B|}\sum_{i\in B}\sum_k q_i(k)\log\tau(x_i)_k` (the
   cross-entropy of the network's log-softmax against the local q, held
   constant), the weight decay and dropout of ``crowdagg train``.

With a full batch (``batch_size`` >= the training tasks) and ρ = 1
(``step_decay`` = 0) step 2 is the closed-form conjugate update
:math:`\beta = \beta^0 + \sum_i q_i \otimes \bar L_{ij}`, :math:`\alpha =
\alpha^0 + \sum_i q_i`; with a constant network as well (and ``learn_class_prior``) the fit is
the coordinate ascent of :mod:`crowdagg.methods.graph.mf` (``prior`` =
(5, 2), ``class_prior`` = 1.1): the same η after every epoch as mf's after
every iteration.

Where this follows neither the paper's letter nor other code:

* **π is held uniform by default** (``learn_class_prior`` = false); true
  is the paper's model.  The network is fit to q, so τ(x) carries the
  class frequencies of q already, and :math:`\mathbb{E}\log\pi` -- fit to
  the same q -- multiplies them in a second time: each round the larger
  classes' share of q grows, the network follows, and a class can vanish.
  Measured (``benchmarks/bench_train.py labels``, seeds 0-2, ``crowdagg
  train`` defaults): training labels on music .732 ± .012 with π learned
  against .807 ± .006 held uniform, labelme .655 ± .033 against .834 ±
  .007 (``ds-then-train``: .771, .812); on a simulated crowd (600 tasks,
  3 classes) one class got 0% of the labels.  Without a
  network (mf) π has no such partner and is learned.

* **Eq. 14** writes :math:`\mathbb{E}_q[\nu_{j L_{ij}}]` and a spurious
  :math:`\sum_{i=1}^N` inside the task's own natural parameter; the optimal
  mean-field factor reads the expected *log* confusion
  :math:`\psi(\beta) - \psi(\sum\beta)` (eq. 19's expected sufficient
  statistics) of the task's own answers, which is what step 1 computes.
* The paper's network enters as a conjugate potential
  :math:`\langle\gamma(x_i), t(y_i)\rangle` (eq. 12) of the logits; we use
  the log-softmax :math:`\log\tau(x_i)`, the Cat(τ) prior of eq. 3 --
  the same posterior (a per-task constant apart), and the logits' scale is
  then that of a classifier's, so ``predict`` is softmax f_γ, as the paper
  predicts new data.
* The deepBP repository's re-implementation (``learnings/BayesDGC/
  model.py``) steps ``confusion ← confusion − lr (target − confusion)``,
  which moves *away* from the target: the natural-gradient ascent is
  ``η + ρ (target − η)``; it also drops π.  We follow the paper.
* The paper states no step-size schedule nor a start for η (an input of its
  Algorithm 1): ρ_t is SVI's (Hoffman, Blei, Wang & Paisley 2013), and η starts at
  the conjugate update of the training answers' soft majority vote (the
  start of ``mf`` and ``raykar``).
* The local q uses the batch's training-mode logits (dropout on), the
  ones the network's loss is computed from: one forward pass a batch.

Answers held out for model selection (``val_fraction``) never reach the
statistics; the objective is their negative log-likelihood under
:math:`\sum_k \tilde p_k \bar\nu_j[k, l]`, :math:`\tilde p \propto \tau(x)
\exp\mathbb{E}\log\pi` and :math:`\bar\nu` the posterior-mean confusion.
The result, at the kept epoch: the posteriors of the training tasks from
the local step over **all** of their answers (held-out ones too); a task
without answers gets the classifier's prediction (as new data does);
``worker_params["confusion"]`` the posterior-mean :math:`\bar\nu`
``[worker, true, observed]``; ``model_params["alpha"]`` (K,) and
``model_params["beta"]`` (n_workers, K, K) ``[worker, true, observed]``
the Dirichlet posteriors' parameters (η + 1).

Shapes: η_π (K,), η_ν (n_workers, K, K) kept ``[worker, observed, true]``
(the kernel's layout) in ``ctx.state``, snapshotted with the kept epoch.
Cost per minibatch: its answers × K for the local step plus
O(n_workers × K²) for the digammas and the global step (every ν_jk moves:
an annotator absent from the batch has a zero statistic), so
O(L K + n_batches W K²) an epoch besides the network; the local step runs on
the host (one device-to-host copy of the batch's B × K log-probabilities).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn

from ....data.annotations import AnnotationSet
from ....engine.part import Part
from ....errors import DataError, param
from ....kernels.latent import LatentParams, latent_block
from ....methods.blocks import latent_posterior, soft_majority_vote
from ....methods.variational import expected_log
from ...confusion import answer_proba, expected_counts
from ...trainer import PROB_FLOOR, Batch, TrainContext, Trainer


def step_size(t: int, delay: float, decay: float) -> float:
    r"""SVI's Robbins--Monro step :math:`\rho_t = (t + \tau)^{-\kappa}` of global step ``t`` (1, 2, ...)."""
    return float((t + delay) ** -decay)


def natural_step(eta: np.ndarray, eta0: np.ndarray, stats: np.ndarray, scale: float, rho: float) -> np.ndarray:
    r"""One natural-gradient step of a Dirichlet's natural parameters (eqs. 16--18):
    :math:`\eta + \rho(\eta^0 + \text{scale}\cdot\text{stats} - \eta)`.

    ``stats`` the minibatch's expected sufficient statistics, ``scale``
    N / |B|; with ``scale`` 1 (a full batch) and ``rho`` 1 it is the
    closed-form conjugate update ``eta0 + stats``, exactly.
    """
    target = eta0 + scale * stats
    if rho == 1.0:
        return target
    return (1.0 - rho) * eta + rho * target


def local_step(ptr: np.ndarray, worker: np.ndarray, label: np.ndarray, log_prior: np.ndarray,
               e_log_nu: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The local step (eq. 14) of a minibatch on the latent-class E-step kernel, and its sufficient statistics.

    Parameters
    ----------
    ptr : ndarray of int64 (B + 1,)
        The batch's tasks' answer offsets (its answers sorted by task).
    worker, label : ndarray of int (n,)
        The batch's answers.
    log_prior : ndarray (B, K)
        Each task's E[log π] + log τ(x_i).
    e_log_nu : ndarray (n_workers, K, K)
        E[log ν] ``[worker, observed, true]``.

    Returns
    -------
    q : ndarray (B, K)
        The tasks' posteriors.
    counts : ndarray (n_workers, K, K)
        ``[worker, observed, true]``: Σ_i q_i(k) 1[L_ij = l] (the ν_jk statistics).
    totals : ndarray (K,)
        Σ_i q_i (the π statistics).
    """
    w, k = e_log_nu.shape[0], e_log_nu.shape[1]
    part = Part(0, 1, 0, np.array([0, ptr.shape[0] - 1], dtype=np.int64), ptr, worker, label, w, k)
    (_, counts, totals), out = latent_block(part, 0, LatentParams(e_log_nu, log_prior, counts="posterior"),
                                            keep=True)
    return out["latent"], counts, totals


def soft_vote_statistics(train: AnnotationSet, engine: Any) -> tuple[np.ndarray, np.ndarray]:
    """The sufficient statistics of the training answers' soft majority vote: counts ``[worker, observed, true]``
    and class totals (K,) -- the start's conjugate update."""
    q = soft_majority_vote(train, engine)
    counts = expected_counts(q, train.task, train.worker, train.label, train.n_workers)  # [worker, true, observed]
    return np.ascontiguousarray(counts.transpose(0, 2, 1)), q.sum(axis=0)


class BayesDGC(Trainer):
    """BayesDGC's natural-gradient SVI (see the module docstring)."""

    name = "bayesdgc"

    # ------------------------------------------------------------------ the priors and the start
    def _build(self, ctx: TrainContext) -> dict[str, nn.Module]:
        k = ctx.n_classes
        diag, off = ctx.params["prior"]
        beta0 = np.full((k, k), float(off))
        np.fill_diagonal(beta0, float(diag))
        eta0_nu = beta0 - 1.0  # (K, K), every annotator's; symmetric: [observed, true] = [true, observed]
        counts, totals = soft_vote_statistics(ctx.training_set(), ctx.train_engine())
        ctx.state.update(eta0_nu=eta0_nu, eta_nu=natural_step(eta0_nu, eta0_nu, counts, 1.0, 1.0), steps=0)
        if ctx.params["learn_class_prior"]:
            eta0_pi = np.full(k, ctx.params["class_prior"] - 1.0)
            ctx.state.update(eta0_pi=eta0_pi, eta_pi=natural_step(eta0_pi, eta0_pi, totals, 1.0, 1.0))
        return {}

    @staticmethod
    def _expected_logs(ctx: TrainContext) -> tuple[np.ndarray, np.ndarray]:
        """E[log π] (K,) -- 0 when π is held uniform (a constant: the same posteriors) -- and E[log ν]
        ``[worker, observed, true]`` under the current η."""
        state = ctx.state
        e_log_nu = expected_log(state["eta_nu"] + 1.0, axis=1)
        if "eta_pi" not in state:
            return np.zeros(ctx.n_classes), e_log_nu
        return expected_log(state["eta_pi"] + 1.0), e_log_nu

    def _memory(self, data: AnnotationSet, x: np.ndarray, checked: dict[str, Any], network: Any) -> tuple[float, str]:
        need, what = super()._memory(data, x, checked, network)
        # η_ν, its snapshot, E log ν and a batch's counts beyond the base's confusion share
        return need + 8.0 * 4 * data.n_workers * data.n_classes ** 2, what

    # ------------------------------------------------------------------ one minibatch: local, global, network
    def _loss(self, ctx: TrainContext, logits: torch.Tensor, batch: Batch) -> torch.Tensor:
        log_tau = torch.log_softmax(logits, dim=1)
        q = self._svi_step(ctx, log_tau.detach(), batch)
        return -(q * log_tau).sum(dim=1).mean()

    @torch.no_grad()
    def _svi_step(self, ctx: TrainContext, log_tau: torch.Tensor, batch: Batch) -> torch.Tensor:
        """The local step of ``batch`` and the global step on its statistics; the batch's q (B, K) on the device."""
        state = ctx.state
        e_log_pi, e_log_nu = self._expected_logs(ctx)
        n_rows = batch.tasks.shape[0]
        ptr = np.zeros(n_rows + 1, dtype=np.int64)
        np.cumsum(torch.bincount(batch.row, minlength=n_rows).cpu().numpy(), out=ptr[1:])
        log_prior = log_tau.double().cpu().numpy() + e_log_pi
        if np.isnan(log_prior).any():  # a diverged network: the kernel's own check would name its argument
            raise DataError(f"{self.name}: training diverged at epoch {ctx.epoch + 1} (the network's output is "
                            f"nan); try a smaller {param('lr')}")
        q, counts, totals = local_step(ptr, batch.worker.cpu().numpy().astype(np.int32),
                                       batch.label.cpu().numpy().astype(ctx.data.label.dtype), log_prior, e_log_nu)
        state["steps"] += 1
        params = ctx.params
        rho = step_size(state["steps"], params["step_delay"], params["step_decay"])
        scale = ctx.train_tasks.shape[0] / n_rows
        if "eta_pi" in state:
            state["eta_pi"] = natural_step(state["eta_pi"], state["eta0_pi"], totals, scale, rho)
        state["eta_nu"] = natural_step(state["eta_nu"], state["eta0_nu"], counts, scale, rho)
        return torch.as_tensor(q, dtype=torch.float32, device=ctx.device)

    # ------------------------------------------------------------------ the answer model and the result
    def _answer_proba(self, ctx: TrainContext, p: torch.Tensor, workers: torch.Tensor) -> torch.Tensor:
        if "eta_pi" in ctx.state:  # the classifier times exp E log π, normalised: p(y | x) before the answers
            weight = np.exp(self._expected_logs(ctx)[0])
            p = p * torch.as_tensor(weight, dtype=p.dtype, device=p.device)
            p = p / p.sum(dim=1, keepdim=True)
        return answer_proba(p, self._mean_confusion(ctx, p.dtype)[workers])

    @torch.no_grad()
    def _confusions(self, ctx: TrainContext) -> torch.Tensor:
        """ν̄ itself: the base reads it through :meth:`_answer_proba` of one-hot rows, whose weighting by
        exp E log π is 0 / 0 for a class whose E log π underflows (a tiny learned ``class_prior``, a class
        nobody answered): NaN rows."""
        return self._mean_confusion(ctx)

    @staticmethod
    def _mean_confusion(ctx: TrainContext, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """The posterior-mean confusions ν̄ (n_workers, K, K) ``[worker, true, observed]`` on the device."""
        beta = ctx.state["eta_nu"].transpose(0, 2, 1) + 1.0
        return torch.as_tensor(beta / beta.sum(axis=2, keepdims=True), dtype=dtype, device=ctx.device)

    def _posterior(self, ctx: TrainContext, proba: np.ndarray, confusion: np.ndarray) -> np.ndarray:
        """The local step over every answer (the held-out ones too) at the kept epoch's η; a task without answers
        gets the classifier's ``proba``."""
        e_log_pi, e_log_nu = self._expected_logs(ctx)
        log_prior = np.log(np.maximum(proba, PROB_FLOOR)) + e_log_pi
        post = latent_posterior(ctx.data, e_log_nu, log_prior, engine=ctx.params.engine,
                                max_memory=ctx.params.max_memory).classes
        silent = ctx.data.answers_per_task == 0
        post[silent] = proba[silent]
        return post

    def _finish(self, ctx: TrainContext, run: Any, canon: Any) -> Any:
        result = super()._finish(ctx, run, canon)  # restores the kept epoch's state first
        if "eta_pi" in ctx.state:
            result.model_params["alpha"] = ctx.state["eta_pi"] + 1.0
        beta = np.ascontiguousarray(ctx.state["eta_nu"].transpose(0, 2, 1)) + 1.0
        result.model_params["beta"] = canon.to_caller(beta, of="workers")
        return result
