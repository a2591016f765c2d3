"""Annotator confusion matrices as trainable parameters: their parameterisations and initialisations.

Orientation: everywhere in crowdagg a confusion is ``[worker, true, observed]``
(row ``k`` of worker ``m``'s matrix is P(answer | true class k) and sums to
1) -- the transpose of the papers' ``A_m[observed, true]`` whose *columns*
are on the simplex.  A worker's answer distribution for classifier output
``p`` (B, K) is ``p @ A_m`` (the papers' ``A_m p``).

Parameterisations (:class:`Confusions`, ``form``):

* ``"softmax"`` -- each row the softmax of free logits: always on the
  simplex (CCEM / GeoCrowdNet, Ibrahim et al. 2023: their column softmax).
* ``"softplus"`` -- each row ``softplus(W)`` normalised to sum 1 (TraceReg,
  Tanno et al. 2019, App. F listing).

Initialisations (:func:`initial_logits`):

* ``"identity"`` -- logits I: the diagonal is ``e / (e + K - 1)`` (0.23 for
  K = 10 -- far from the identity; Ibrahim's default);
* ``"diagonal"`` -- logits ``δ I - 5`` (Tanno's listing: δ = 6 gives 0.956
  on the diagonal for K = 10 under softplus; ``close_to_identity`` in
  Ibrahim's code);
* ``"counts"`` -- the log of each worker's row-normalised expected counts
  against a soft label (the soft majority vote): the Raykar / Max-MIG
  count matrix, in the orientation and on the log scale its parameterisation
  reads (Ibrahim's ``mle_based`` feeds the transposed probabilities as
  logits: ALGORITHMS.md §15.5; we do not).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn
from torch.nn import functional

FORMS = ("softmax", "softplus")
INITS = ("identity", "diagonal", "counts")


def initial_logits(n_workers: int, k: int, init: str, *, form: str = "softmax", diagonal: float = 6.0,
                   counts: np.ndarray | None = None) -> torch.Tensor:
    """Logits (n_workers, K, K) ``[worker, true, observed]`` that the parameterisation ``form`` reads.

    ``counts``: for ``init="counts"``, the expected counts (n_workers, K, K)
    ``[worker, true, observed]`` (Σ_n q_n(true) 1[answer = observed]); a
    pseudo-count of 1/K per cell keeps a worker without answers uniform.
    """
    if init == "identity":
        one = torch.eye(k)
    elif init == "diagonal":
        one = diagonal * torch.eye(k) - 5.0
    elif init == "counts":
        if counts is None or counts.shape != (n_workers, k, k):
            raise ValueError(f"init='counts' needs counts of shape {(n_workers, k, k)}")
        rows = counts + 1.0 / k
        probs = torch.as_tensor(rows / rows.sum(axis=2, keepdims=True), dtype=torch.float32)
        if form == "softmax":
            return torch.log(probs)
        return probs + torch.log(-torch.expm1(-probs))  # softplus⁻¹(p): softplus gives p back, rows then sum 1
    else:
        raise ValueError(f"unknown confusion init {init!r}; inits: {', '.join(INITS)}")
    return one.expand(n_workers, k, k).clone()


class Confusions(nn.Module):
    """One K×K confusion per worker, rows on the simplex by construction; ``forward(workers)`` -> (n, K, K).

    ``logits`` (n_workers, K, K) is the parameter; :meth:`matrices` gives
    every worker's row-stochastic matrix ``[worker, true, observed]``.
    """

    def __init__(self, logits: torch.Tensor, form: str = "softmax") -> None:
        super().__init__()
        if form not in FORMS:
            raise ValueError(f"unknown confusion form {form!r}; forms: {', '.join(FORMS)}")
        self.form = form
        self.logits = nn.Parameter(logits.clone())

    def rows(self, logits: torch.Tensor) -> torch.Tensor:
        if self.form == "softmax":
            return torch.softmax(logits, dim=-1)
        positive = functional.softplus(logits)
        return positive / positive.sum(dim=-1, keepdim=True)

    def forward(self, workers: torch.Tensor) -> torch.Tensor:
        return self.rows(self.logits[workers])

    def matrices(self) -> torch.Tensor:
        return self.rows(self.logits)


def answer_proba(p: torch.Tensor, confusion: torch.Tensor) -> torch.Tensor:
    """Each answer's distribution: ``p`` (n, K) class probabilities through ``confusion`` (n, K, K) -> (n, K)."""
    return torch.bmm(p.unsqueeze(1), confusion).squeeze(1)


def expected_counts(post: np.ndarray, task: np.ndarray, worker: np.ndarray, label: np.ndarray,
                    n_workers: int) -> np.ndarray:
    """Σ_n post[n, true] 1[answer = observed], per worker: (n_workers, K, K) ``[worker, true, observed]``.

    ``post`` (n_tasks, K); ``task``, ``worker``, ``label`` (n_answers,) the
    answers.  O(answers × K) on the flat (worker,
    observed) cell, one ``np.bincount`` per true class: no dense tasks × workers array.
    """
    k = post.shape[1]
    cell = worker.astype(np.int64) * k + label.astype(np.int64)
    rows = post[task]
    out = np.empty((n_workers, k, k))
    for true in range(k):
        out[:, true, :] = np.bincount(cell, weights=rows[:, true], minlength=n_workers * k).reshape(n_workers, k)
    return out


def soft_vote_counts(data: Any, engine: Any = None) -> np.ndarray:
    """Each worker's expected counts against the soft majority vote of ``data``'s answers: (n_workers, K, K)
    ``[worker, true, observed]`` -- the Raykar / Max-MIG count matrix that the ``counts`` start
    (:func:`initial_logits`) and Max-MIG's aggregator start from (ALGORITHMS.md §11.3)."""
    from ..methods.blocks import soft_majority_vote

    return expected_counts(soft_majority_vote(data, engine), data.task, data.worker, data.label, data.n_workers)
