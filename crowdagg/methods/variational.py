r"""Variational Bayes with Dirichlet posteriors: the expected log-parameters and the evidence lower bound.

The pieces a mean-field (variational Bayes) method of the Dawid--Skene
family shares, whatever its worker model: the mean-field VB of
:mod:`crowdagg.methods.graph.mf` (Liu, Peng & Ihler 2012; Kim et al.'s
deepMF without a classifier, ALGORITHMS.md §2.4, §6.4) and EBCC with one
subtype (Li, Rubinstein & Cohn 2019) are the same model.  Under a
Dirichlet posterior :math:`\mathrm{Dir}(\beta)` over the last axis,

.. math:: \mathbb{E}[\log \theta_c] = \psi(\beta_c) - \psi\bigl(\textstyle\sum_{c'} \beta_{c'}\bigr)

(:func:`expected_log`), and the evidence lower bound of a model whose
task posteriors are at their coordinate optimum is

.. math:: \mathcal{L} = \sum_i \log Z_i
          - \sum_{\text{rows}} \mathrm{KL}\bigl(\mathrm{Dir}(\beta) \,\|\, \mathrm{Dir}(\alpha)\bigr)

where :math:`\log Z_i` is the normaliser of task i's E-step on the
expected log-parameters (what the one E-step kernel,
:mod:`crowdagg.kernels.latent`, sums as its log-likelihood) and the sum of KL divergences runs over every Dirichlet
factor of :math:`q` -- each worker's rows, the class prior's
(:func:`elbo`).  Numpy and scipy only: it knows nothing of the method.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.special import digamma, gammaln

__all__ = ["dirichlet_kl", "elbo", "expected_log"]


def expected_log(beta: np.ndarray, axis: int = -1) -> np.ndarray:
    r"""E[log θ] under θ ~ Dir(``beta``) along ``axis``: :math:`\psi(\beta) - \psi(\sum \beta)`, shape of ``beta``.

    ``beta`` > 0 (posterior counts: prior pseudo-counts plus expected
    counts); a Beta(a, b) is the two-entry case.
    """
    beta = np.asarray(beta, dtype=np.float64)
    return digamma(beta) - digamma(beta.sum(axis=axis, keepdims=True))


def dirichlet_kl(beta: np.ndarray, alpha: np.ndarray, axis: int = -1, expected: np.ndarray | None = None) -> float:
    r"""Σ over the rows of KL(Dir(``beta``) ‖ Dir(``alpha``)), each Dirichlet along ``axis`` (``alpha`` broadcasts).

    .. math:: \mathrm{KL} = \log\Gamma(\textstyle\sum\beta) - \sum\log\Gamma(\beta)
              - \log\Gamma(\textstyle\sum\alpha) + \sum\log\Gamma(\alpha)
              + \sum (\beta - \alpha)\,\mathbb{E}_\beta[\log\theta]

    ``expected``: :func:`expected_log` of ``beta`` along ``axis`` when the
    caller has it (an E-step's table), not computed again.  The prior's
    normaliser is computed on ``alpha`` as given and counted once per row
    it broadcasts to (a shared prior row costs K log-gammas, not one per
    row).
    """
    beta = np.asarray(beta, dtype=np.float64)
    alpha = np.asarray(alpha, dtype=np.float64)
    e = expected_log(beta, axis) if expected is None else expected
    axis %= beta.ndim
    a = alpha.reshape((1,) * (beta.ndim - alpha.ndim) + alpha.shape)
    a = np.broadcast_to(a, a.shape[:axis] + beta.shape[axis:axis + 1] + a.shape[axis + 1:])  # whole rows, no more
    rows = beta.shape[:axis] + beta.shape[axis + 1:]
    prior_norm = np.broadcast_to(gammaln(a).sum(axis=axis) - gammaln(a.sum(axis=axis)), rows)
    kl = (gammaln(beta.sum(axis=axis)) - gammaln(beta).sum(axis=axis)
          + ((beta - alpha) * e).sum(axis=axis))
    return float(kl.sum() + prior_norm.sum())


def elbo(log_evidence: float, *factors: tuple[Any, ...]) -> float:
    r"""The evidence lower bound: Σ_i log Z_i minus the KL divergence of each Dirichlet factor from its prior.

    ``log_evidence`` is Σ_i log Z_i of the E-step that made the task
    posteriors (on the expected log-parameters of the same factors);
    ``factors`` are ``(beta, alpha, axis)`` triples for :func:`dirichlet_kl`,
    or ``(beta, alpha, axis, expected)`` with the expected logs of ``beta``.
    With every task's q_i at its optimum, E_q[log p(answers, z | θ)] +
    H(q(z)) = Σ_i log Z_i, so the bound needs no per-task array.
    """
    return float(log_evidence) - sum(dirichlet_kl(*factor) for factor in factors)
