r"""Mean-field variational Bayes for Dawid--Skene: Dirichlet posteriors on the workers and the class prior.

Model (Dawid--Skene with priors; Liu, Peng & Ihler 2012 for the one-coin
form, Kim, Cho, Kim & Ok 2022 App. B -- deepMF without a classifier -- for
the full confusion; ALGORITHMS.md §2.4, §6.4): the class proportions
:math:`\pi \sim \mathrm{Dir}(\gamma_0)`, the true class
:math:`z_i \sim \mathrm{Cat}(\pi)`, and worker u answers
:math:`y_{iu} \sim \mathrm{Cat}(\theta_u[z_i, :])` with

* ``worker_model="confusion"`` (default): each row
  :math:`\theta_u[k, :] \sim \mathrm{Dir}(\alpha_k)`, the pseudo-counts
  :math:`\alpha_k` = ``prior[0]`` on the diagonal and ``prior[1]`` off it
  (deepBP's code: (2, 1));
* ``worker_model="one-coin"``: :math:`\theta_u[k, y] = p_u` if y = k, else
  :math:`(1 - p_u)/(K - 1)`, with :math:`p_u \sim \mathrm{Beta}(a, b)`,
  (a, b) = ``prior`` (default (2, 1)).

The posterior is approximated by the fully factorised
:math:`q(z)\,q(\theta)\,q(\pi)`, each factor updated in turn to its
optimum given the others (coordinate ascent):

* E-step -- Dawid--Skene's, on expected logs
  (:func:`crowdagg.methods.variational.expected_log`):
  :math:`\log q_i(k) = \mathbb{E}\log\pi_k + \sum_{u \in M_i}
  \mathbb{E}\log\theta_u[k, y_{iu}] - \log Z_i`, with
  :math:`\mathbb{E}\log\theta_u[k, y] = \psi(\beta_u[k, y]) - \psi(\sum_{y'}
  \beta_u[k, y'])` (one-coin: :math:`\psi(a_u) - \psi(a_u + b_u)` on the
  diagonal, :math:`\psi(b_u) - \psi(a_u + b_u) - \log(K - 1)` off it -- the
  :math:`\log(K-1)` that Liu's code omits) and :math:`\mathbb{E}\log\pi_k =
  \psi(\gamma_k) - \psi(\sum\gamma)`;
* M-step -- :math:`\beta_u[k, y] = \alpha[k, y] + \sum_{i \in N_u: y_{iu} = y}
  q_i(k)` (one-coin: :math:`a_u = a + \sum_i q_i(y_{iu})`, :math:`b_u = b +
  |N_u| - \sum_i q_i(y_{iu})`) and :math:`\gamma = \gamma_0 + \sum_i q_i`.

Both steps read Dawid--Skene's statistics: the E-step and the expected
counts are one pass of :func:`crowdagg.kernels.em.em_block` (the fused
E/M kernel of :mod:`crowdagg.methods.em.ds`), given the expected logs in
place of log-probabilities, so MF runs on any engine, Dask included, at
O(L K) per iteration plus O(W K²) digammas.

Objective: the evidence lower bound (ELBO), :math:`\sum_i \log Z_i` of the
E-step minus the KL divergences of every worker's Dirichlet rows (Beta) and
of :math:`q(\pi)` from their priors
(:func:`crowdagg.methods.variational.elbo`).  Each step is a coordinate
maximisation, so the ELBO never decreases; the loop stops when its
relative change falls below ``tol`` (1e-6) or after ``max_iter`` (100, the
deepBP code's iterations; that code has no tolerance).

``class_prior`` (γ0, default 1): a uniform Dirichlet over the class
proportions, one pseudo-task per class -- the proportions are learned (the
deepBP code holds them uniform), but no class can run to exactly zero
weight on a small set (ψ(γ) stays finite).  Start: soft majority vote
(``init``, :mod:`crowdagg.methods.starts`), whose posteriors give the first
M-step.  Gold tasks are clamped to one-hot in every E-step (``--gold``).

Known weakness (Kim et al. §4.1; Weiss 2001): mean field is over-confident
-- its task posteriors pile up at 0 and 1 -- and can settle in a poor local
optimum, e.g. read an extreme spammer (a worker who answers every task at
random) as an adversary.  BP (:mod:`.bp`) integrates the worker parameters
out instead.

Result: posteriors and labels (ties drawn by the seed), the class prior
:math:`\exp \mathbb{E}[\log \pi]` normalised (the weights the E-step
applies, which a task without answers gets; within O(1/Σγ) of
:math:`\gamma / \sum\gamma`), ``worker_params["confusion"]`` -- the posterior
mean :math:`\beta_u[k, y] / \sum_{y'} \beta_u[k, y']`, ``[worker, true,
observed]`` -- and, one-coin, ``worker_params["accuracy"]`` :math:`a_u / (a_u +
b_u)`; a worker without answers is reported at chance (uniform rows, 1/K),
as by every other method, its posterior being only the prior; ``model_params`` the posterior's Dirichlet
parameters (``beta`` ``[worker, true, observed]``, or the Beta's ``a`` and
``b`` per worker, and ``gamma``); the ELBO trace
(``objective_name`` "ELBO").
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ...data.annotations import AnnotationSet
from ...errors import param
from ...kernels.em import EMParams, em_block
from ..base import PRODUCT, FitContext, IterativeAggregator, make_result
from ..blocks import TieBreaker, argmax_random_ties, one_coin_matrices
from ..loop import Run
from ..result import AggregationResult
from ..variational import elbo, expected_log

__all__ = ["MeanField", "MFState"]

CONFUSION, ONE_COIN = "confusion", "one-coin"


def one_coin_posterior(prior: np.ndarray, counts_ot: np.ndarray) -> np.ndarray:
    """The Beta posteriors (n_workers, 2) ``(a_u, b_u)`` of one-coin workers' accuracies: ``prior`` (a, b) plus
    each worker's expected right and wrong answers, read from its expected counts ``counts_ot`` (n_workers, K,
    K) ``[worker, observed, true]`` (right: the trace)."""
    correct = np.trace(counts_ot, axis1=1, axis2=2)
    answers = counts_ot.sum(axis=(1, 2))
    return np.stack([prior[0] + correct, prior[1] + (answers - correct)], axis=1)


def one_coin_log_table(ab: np.ndarray, k: int) -> np.ndarray:
    r"""E[log θ] ``[worker, observed, true]`` (n_workers, K, K) of one-coin workers whose accuracy p_u ~
    Beta(``ab[u]``): :math:`\psi(a_u) - \psi(a_u + b_u)` on the diagonal, :math:`\psi(b_u) - \psi(a_u +
    b_u) - \log(K - 1)` off it (symmetric: it reads the same in either layout)."""
    e = expected_log(ab, axis=1)  # (W, 2): E log p, E log(1 - p)
    off = e[:, 1] - (math.log(k - 1) if k > 1 else 0.0)
    log_conf = np.repeat(off[:, None, None], k, axis=1).repeat(k, axis=2)
    idx = np.arange(k)
    log_conf[:, idx, idx] = e[:, :1]
    return log_conf


class MFState:
    """One mean-field run: its engine, the Dirichlet parameters, the statistics of the last E-step, the ELBO.

    Between passes it holds workers × K² floats (the posterior counts and
    the expected counts), never the answers or the posteriors, so any engine
    runs it.  ``beta_ot`` is ``[worker, observed, true]`` (the kernel's
    layout; one-coin: ``ab`` (n_workers, 2) the Beta parameters (a, b)),
    ``gamma`` (K,) the class prior's Dirichlet.
    """

    def __init__(self, engine: Any, data: AnnotationSet, model: str, prior: tuple[float, float],
                 class_prior: float, clamp: np.ndarray | None, start: np.ndarray | None):
        self.engine = engine
        self.model = model
        self.k = data.n_classes
        self.clamp = None if clamp is None or not (clamp >= 0).any() else clamp
        k = self.k
        if model == ONE_COIN:
            self.alpha = np.array(prior, dtype=np.float64)  # Beta(a, b) on each worker's accuracy
        else:  # [observed, true]: prior[0] on the diagonal, prior[1] off it (the Dirichlet runs over observed)
            self.alpha = np.full((k, k), float(prior[1]))
            np.fill_diagonal(self.alpha, float(prior[0]))
        self.gamma0 = np.full(k, float(class_prior))
        # The first statistics: the start's posteriors (None: the soft vote, counted inside the blocks).
        (counts, tot, _), _ = engine.map_reduce(em_block, EMParams(post=start, clamp=self.clamp))
        self._stats = counts, tot
        self.objective = self.iterate()

    # --------------------------------------------------------------- the two coordinate steps
    def m_step(self) -> None:
        """The Dirichlet parameters from the last E-step's expected counts (q(θ), q(π) at their optimum)."""
        counts_ot, tot = self._stats
        if self.model == ONE_COIN:
            self.ab = one_coin_posterior(self.alpha, counts_ot)
        else:
            self.beta_ot = self.alpha[None] + counts_ot
        self.gamma = self.gamma0 + tot

    def expected_logs(self) -> tuple[np.ndarray, np.ndarray]:
        """E[log π] (K,) and E[log θ] ``[worker, observed, true]`` (n_workers, K, K) under the current q."""
        k = self.k
        log_prior = expected_log(self.gamma)
        if self.model == ONE_COIN:
            log_conf = one_coin_log_table(self.ab, k)
        else:
            log_conf = expected_log(self.beta_ot, axis=1)  # each true class's column, a Dirichlet over observed
        return log_prior, log_conf

    def _e_params(self) -> EMParams:
        log_prior, log_conf = self.expected_logs()
        return EMParams(log_prior, log_conf, clamp=self.clamp)  # the kernel clamps

    def elbo(self, log_evidence: float) -> float:
        """The ELBO of the current q(θ), q(π) and the E-step's q(z) whose Σ log Z_i is ``log_evidence``."""
        workers = (self.ab, self.alpha, 1) if self.model == ONE_COIN else (self.beta_ot, self.alpha[None], 1)
        return elbo(log_evidence, workers, (self.gamma, self.gamma0, 0))

    def iterate(self) -> float:
        """An M-step on the last statistics, then the E-step (its statistics kept): the ELBO after both."""
        self.m_step()
        (counts, tot, log_evidence), _ = self.engine.map_reduce(em_block, self._e_params())
        self._stats = counts, tot
        return self.elbo(log_evidence)

    def posteriors(self) -> np.ndarray:
        """The E-step's posteriors (n_tasks, K) of the current q(θ), q(π): the same arithmetic, rows kept."""
        _, outs = self.engine.map_reduce(em_block, self._e_params(), keep=True)
        return np.asarray(self.engine.gather(outs))

    # --------------------------------------------------------------- what the result reports
    @property
    def confusion(self) -> np.ndarray:
        """The posterior-mean confusion ``[worker, true, observed]`` (n_workers, K, K); chance for a worker without
        answers (:meth:`accuracy`)."""
        if self.model == ONE_COIN:
            return one_coin_matrices(self.accuracy, self.k)
        mean_ot = self.beta_ot / self.beta_ot.sum(axis=1, keepdims=True)
        mean_ot[self.silent] = 1.0 / self.k
        return np.ascontiguousarray(mean_ot.transpose(0, 2, 1))

    @property
    def accuracy(self) -> np.ndarray:
        """One-coin: the posterior-mean accuracy a / (a + b) (n_workers,).

        A worker without answers has nothing but the prior, which its
        answers never met: it is reported at chance (1/K), the neutral worker
        of every other method, not at the prior's mean (2/3 for Beta(2, 1)).
        """
        acc = self.ab[:, 0] / self.ab.sum(axis=1)
        acc[self.silent] = 1.0 / self.k
        return acc

    @property
    def silent(self) -> np.ndarray:
        """Workers without answers (n_workers,) bool: their expected counts are all 0."""
        return self._stats[0].sum(axis=(1, 2)) == 0

    @property
    def prior(self) -> np.ndarray:
        """The class weights the E-step applies, exp E[log π] normalised (K,): what a task without answers gets.

        (The posterior mean γ / Σγ differs from it by O(1/Σγ); ``model_params["gamma"]`` holds γ.)
        """
        e = expected_log(self.gamma)
        w = np.exp(e - e.max())
        return w / w.sum()


class MeanField(IterativeAggregator):
    __doc__ = __doc__
    name = "mf"
    loop_name = "mean-field"
    #: Its posteriors are exp E[log π_k] Π exp E[log θ_w[k, l]]: the product form, θ at its geometric mean.
    posterior_form = PRODUCT
    objective_name = "ELBO"
    collapse_advice = f"try bp, or mf with a larger {param('class_prior')} (pseudo-tasks that keep rare classes alive)"

    def memory_needed(self, data: AnnotationSet) -> tuple[float, str]:
        from ..em.ds import em_memory

        need, what = em_memory(data)
        return need + 8.0 * 4 * data.n_workers * data.n_classes ** 2, what  # β, E log θ, the prior's and the KL's

    def _start(self, data: AnnotationSet, checked: FitContext, start: int, rng: np.random.Generator
               ) -> tuple[MFState, float]:
        given = checked.start_posterior(data, start, rng)
        state = MFState(checked.engine, data, checked["worker_model"], checked["prior"], checked["class_prior"],
                        checked.clamp, given)
        return state, state.objective

    def _finish(self, data: AnnotationSet, run: Run, checked: FitContext) -> AggregationResult:
        state: MFState = run.state
        post = state.posteriors()
        labels = argmax_random_ties(post, TieBreaker(data.tasks, checked["seed"]), atol=1e-12)
        worker_params: dict[str, Any] = {"confusion": state.confusion}
        dirichlet: dict[str, Any] = {"gamma": state.gamma.copy()}
        if state.model == ONE_COIN:
            worker_params["accuracy"] = state.accuracy
            dirichlet.update(a=state.ab[:, 0].copy(), b=state.ab[:, 1].copy())
        else:
            dirichlet["beta"] = np.ascontiguousarray(state.beta_ot.transpose(0, 2, 1))
        return make_result(
            self.name, data, post, labels, state.prior, worker_params=worker_params,
            model_params=dirichlet, n_iter=run.n_iter, converged=run.converged, objective=np.asarray(run.trace),
            objective_name=self.objective_name,
        )
