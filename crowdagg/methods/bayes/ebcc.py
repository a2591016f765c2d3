r"""Enhanced Bayesian classifier combination (EBCC): worker correlation through latent subtypes of each class.

Model (Li, Rubinstein & Cohn, "Exploiting worker correlation for label
aggregation in crowdsourcing", ICML 2019, PMLR 97:3886--3895; the authors'
code ``ebcc_vb``).  Each task i has a true class :math:`y_i` and, within
it, one of M latent *subtypes* :math:`g_i` (``subtypes``, default 10);
each worker j has a confusion row per (class, subtype):

.. math::
    \tau \sim \mathrm{Dir}(\alpha), \qquad
    \pi_k \sim \mathrm{Dir}(a_\pi / M), \qquad
    (y_i, g_i) = (k, m) \text{ with probability } \tau_k \pi_{km}, \\
    v_j[k, m, :] \sim \mathrm{Dir}(\beta_k), \quad \beta_{kl} = a_v \text{ if } l = k \text{ else } b_v, \qquad
    x_{ij} \mid (y_i, g_i) = (k, m) \sim \mathrm{Cat}(v_j[k, m, :]).

Workers who err together on one kind of item (a subpopulation of a class)
share a subtype whose rows carry their common error; with one subtype
(M = 1) it is Dawid--Skene with Dirichlet priors, i.e. :mod:`crowdagg.methods.graph.mf`
with ``worker_model=confusion``, ``prior=(a_v, b_v)``, ``class_prior=α``
and ``empirical_prior=false`` (the same arithmetic; a test holds them
equal).  Defaults are the authors': :math:`a_\pi = 0.1` (sparse subtype
weights: few subtypes in use), :math:`a_v = 4`, :math:`b_v = 1`,
``max_iter`` 500, ``tol`` 1e-3, and the class prior of their published
runs (``test_ebcc.ipynb``: ``empirical_prior=True``): :math:`\alpha_k`
= the start's class totals :math:`\sum_i q^0_i(k)` -- the vote's class
proportions held with the weight of every task -- plus ``class_prior``
(1; it keeps a class that no answer names a proper Dirichlet).  Without
it (``empirical_prior=false``, :math:`\alpha` = ``class_prior``) a
subtype of one class can take over another class whole: on web (5
classes) the best ELBO then merges class 3 into a subtype of class 5
(accuracy .54).

Inference: mean-field :math:`q(y, g)\, q(\tau)\, q(\pi)\, q(v)`, each
factor in turn at its optimum given the others (coordinate ascent):

* E-step over the K·M latent states :math:`z = (k, m)`, the shared latent
  E-step :func:`crowdagg.methods.blocks.latent_posterior` (kernel
  :mod:`crowdagg.kernels.latent`, on the engine's blocks):
  :math:`\log q_i(k, m) = \mathbb{E}\log\tau_k + \mathbb{E}\log\pi_{km} +
  \sum_j \mathbb{E}\log v_j[k, m, x_{ij}] - \log Z_i`, the class posterior
  :math:`q_i(k) = \sum_m q_i(k, m)` through the map state -> class, and the
  expected counts in the same pass;
* M-step: :math:`\mu_j[k, m, l] = \beta_{kl} + \sum_{i: x_{ij} = l} q_i(k, m)`,
  :math:`\eta_{km} = a_\pi / M + \sum_i q_i(k, m)`,
  :math:`\nu_k = \alpha + \sum_i q_i(k)`; expected logs
  :func:`crowdagg.methods.variational.expected_log`.

Only sums over tasks cross between blocks, so it runs on the local and the
Dask engine.  Start (the authors'): the start's class posteriors
(``init``, default the soft majority vote) split at random into subtypes,
:math:`q_i(k, \cdot) = q_i(k)\, \mathrm{Dir}(1, \dots, 1)`, the Dirichlet
drawn from uniforms keyed on the task's *name* under the start's seed
(:mod:`crowdagg.kernels.draws`, the stream of
:class:`~crowdagg.methods.blocks.TieBreaker`): a task's split, and so
the whole fit, does not depend on the answers' row order.  (The authors'
code starts from a task's distinct answered classes, equally weighted --
``z_ik[i, label] += 1`` counts a repeated index once; we start from the
vote shares, the project's start.)  Each of ``n_init`` starts (default 5)
draws another split of the same start; the run with the highest evidence
lower bound (ELBO) is kept, as the authors' README keeps the best ELBO
over seeds.  A run stops when no class posterior moved by more than
``tol`` in an iteration (the authors' ``np.allclose(z_old, z, atol=1e-3)``,
without its 1e-5 relative part) or after ``max_iter``.

Objective: the ELBO :math:`\sum_i \log Z_i - \mathrm{KL}(q(\tau)) -
\sum_k \mathrm{KL}(q(\pi_k)) - \sum_{j,k,m} \mathrm{KL}(q(v_j[k, m]))`
(:func:`crowdagg.methods.variational.elbo`); it differs from the
authors' by constants only (their expression drops the priors'
normalisers), so the restart it picks is theirs.

Result: posteriors :math:`q_i(k)` of the last E-step (gold tasks clamped:
their other classes' states are ruled out, ``-inf`` in the prior), labels
(ties drawn by the seed), the class prior :math:`\exp\mathbb{E}\log\tau`
normalised (as mf's), ``worker_params["confusion"]`` ``[worker, true,
observed]``: the class-level confusion marginalised over subtypes,
:math:`\sum_m \mathbb{E}[\pi_{km}]\, \mathbb{E}[v_j[k, m, :]]` (a worker
without answers at chance), and ``model_params``: ``beta`` (n_workers, K,
M, K) ``[worker, true, subtype, observed]`` the rows' Dirichlet
parameters, ``eta`` (K, M) the subtype weights', ``nu`` (K,) the class
proportions', ``subtype_weights`` (K, M) :math:`\mathbb{E}[\pi_{km}]`.

Array shapes: latent state ``z = k * M + m``; the E-step's table
``[worker, observed, latent]`` (n_workers, K, K·M), its prior (n_tasks,
K·M) (one row repeated, gold rows ruled out), the counts ``[worker,
observed, latent]``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...core.checks import check_int, check_seed
from ...data.annotations import AnnotationSet
from ...errors import DataError, param
from ...kernels.validate import as_float_array
from ..base import FitContext, IterativeAggregator, make_result
from ..blocks import TieBreaker, argmax_random_ties, clamp_posteriors, latent_memory, latent_posterior
from ..loop import Residual, Run, Step
from ..result import AggregationResult
from ..starts import starting_posteriors
from ..variational import elbo, expected_log

__all__ = ["EBCC", "EBCCState", "subtype_split"]


def subtype_split(post: np.ndarray, task_names: Any, n_sub: int, seed: int) -> np.ndarray:
    """The class posteriors ``post`` (n_tasks, K) split at random into ``n_sub`` subtypes: (n_tasks, K, M).

    Each task's q(k) is shared among its subtypes by a Dirichlet(1, ..., 1)
    draw (normalised exponentials of uniforms) made per task and class from
    the task's *name* under ``seed`` (:func:`crowdagg.kernels.draws.name_keys`),
    so a task gets the same split wherever its row is.  Rows sum as ``post``'s.
    """
    from ...kernels.draws import name_keys, seed_key, uniforms

    post = as_float_array(post, "subtype_split: post (n_tasks, K)", 2)
    n, k = post.shape
    n_sub, seed = check_int("n_sub", n_sub, 1), check_seed(seed)
    if len(task_names) != n:
        raise DataError(f"subtype_split: {len(task_names):,} task names for {n:,} rows of post")
    u = uniforms(name_keys(task_names, seed_key(seed)), k * n_sub).reshape(n, k, n_sub)
    e = -np.log1p(-u)  # Exp(1): 1 - u is in (0, 1], the log finite
    total = e.sum(axis=2, keepdims=True)
    share = np.where(total > 0, e / np.where(total > 0, total, 1.0), 1.0 / n_sub)
    return post[:, :, None] * share


def _counts(step: Any) -> tuple[np.ndarray, np.ndarray]:
    """The expected counts ``[worker, observed, latent]`` and latent totals of a latent E-step run with counts."""
    return np.asarray(step.counts), np.asarray(step.latent_tot)


class EBCCState:
    """One EBCC run: the Dirichlet parameters, the last E-step's class posteriors and counts, the ELBO.

    ``mu`` (n_workers, K, M, K) ``[worker, true, subtype, observed]``,
    ``eta`` (K, M), ``nu`` (K,); ``post`` (n_tasks, K) the last E-step's
    class posteriors; ``counts`` (n_workers, K, K·M) ``[worker, observed,
    latent]`` and ``tot`` (K·M,) its expected counts.
    """

    def __init__(self, checked: FitContext, data: AnnotationSet, start: np.ndarray, split_seed: int):
        self.engine, self.max_memory = checked.engine, checked.max_memory
        self.data = data
        k, m = data.n_classes, int(checked["subtypes"])
        self.k, self.m = k, m
        a_v, b_v = checked["prior"]
        self.beta = np.full((k, k), float(b_v))  # [true, observed]
        np.fill_diagonal(self.beta, float(a_v))
        self.eta0 = float(checked["a_pi"]) / m
        self.nu0 = np.full(k, float(checked["class_prior"]))
        self.latent_class = np.repeat(np.arange(k, dtype=np.int64), m)
        clamp = np.full(data.n_tasks, -1, dtype=np.int64) if checked.clamp is None else checked.clamp
        self.clamp = clamp
        self.clamped = np.flatnonzero(clamp >= 0)  # gold tasks, and their classes
        self.gold = clamp[self.clamped]
        start[self.clamped] = np.eye(k)[self.gold]
        empty = data.answers_per_task == 0
        start[empty] = 1.0 / k  # any finite row: a task without answers adds only to the totals, taken out below
        split = subtype_split(start, data.task_names, m, split_seed).reshape(data.n_tasks, k * m)
        with np.errstate(divide="ignore"):
            log_split = np.log(split)
        # The start's expected counts, from the kernel itself: its posteriors under a zero table are the split
        # (softmax of its logs), counted as every later E-step's are -- on any engine.
        step = latent_posterior(data, np.zeros((data.n_workers, k, k * m)), log_split, self.latent_class,
                                engine=self.engine, counts="posterior", max_memory=self.max_memory)
        self.counts, self.tot = _counts(step)
        self.tot = self.tot - split[empty].sum(axis=0)
        self.post = start
        self.post[empty] = 0.0  # (compared with the first E-step's rows only where there are answers)
        if checked["empirical_prior"]:  # the authors' published runs: α = the start's class totals (+ class_prior,
            self.nu0 = self.nu0 + start.sum(axis=0)  # which keeps a class no answer names a proper Dirichlet)
        self.objective = self.iterate()[0]

    # --------------------------------------------------------------- the coordinate steps
    def m_step(self) -> None:
        """The Dirichlet parameters from the last E-step's expected counts."""
        k, m = self.k, self.m
        counts = self.counts.reshape(-1, k, k, m).transpose(0, 2, 3, 1)  # -> [worker, true, subtype, observed]
        self.mu = self.beta[None, :, None, :] + counts
        self.e_v = expected_log(self.mu, axis=3)  # E[log v], read by the E-step's table and the ELBO's KL
        self.eta = self.eta0 + self.tot.reshape(k, m)
        self.nu = self.nu0 + self.tot.reshape(k, m).sum(axis=1)

    def log_prior(self) -> np.ndarray:
        """E[log τ_k] + E[log π_km] per latent state (K·M,), one row shared by every task (the kernel reads it
        for each; gold tasks are held within their class's states by the kernel's clamp)."""
        return (expected_log(self.nu)[:, None] + expected_log(self.eta, axis=1)).reshape(-1)

    def log_table(self) -> np.ndarray:
        """E[log v_j[k, m, l]] in the E-step's layout ``[worker, observed, latent]`` (n_workers, K, K·M)."""
        e = self.e_v
        return np.ascontiguousarray(e.transpose(0, 3, 1, 2)).reshape(e.shape[0], self.k, self.k * self.m)

    def elbo(self, log_evidence: float) -> float:
        """The ELBO of the current q(τ), q(π), q(v) and the E-step's q(y, g) whose Σ log Z_i is ``log_evidence``."""
        return elbo(log_evidence, (self.mu, self.beta[None, :, None, :], 3, self.e_v), (self.eta, np.asarray(self.eta0), 1),
                    (self.nu, self.nu0, 0))

    def iterate(self) -> tuple[float, float]:
        """An M-step on the last statistics, then the E-step: (the ELBO after both, the largest change of a
        class posterior)."""
        self.m_step()
        step = latent_posterior(self.data, self.log_table(), self.log_prior(), self.latent_class,
                                engine=self.engine, counts="posterior", max_memory=self.max_memory,
                                clamp=self.clamp if self.clamped.size else None)
        self.counts, self.tot = _counts(step)
        answered = self.data.answers_per_task > 0
        change = float(np.abs(step.classes[answered] - self.post[answered]).max(initial=0.0))
        # a gold task's subtypes sum to its class within rounding: its row exactly one-hot, as every method's
        self.post = clamp_posteriors(step.classes, self.clamp)
        return self.elbo(step.loglik), change

    # --------------------------------------------------------------- what the result reports
    @property
    def subtype_weights(self) -> np.ndarray:
        """E[π_km] = η_km / Σ_m η_km (K, M)."""
        return self.eta / self.eta.sum(axis=1, keepdims=True)

    @property
    def confusion(self) -> np.ndarray:
        """The class-level confusion ``[worker, true, observed]`` (n_workers, K, K): Σ_m E[π_km] E[v_j[k, m, :]];
        chance for a worker without answers."""
        mean = self.mu / self.mu.sum(axis=3, keepdims=True)
        conf = np.einsum("km,wkml->wkl", self.subtype_weights, mean)
        conf[self.counts.sum(axis=(1, 2)) == 0] = 1.0 / self.k
        return conf

    @property
    def prior(self) -> np.ndarray:
        """The class weights the E-step applies, what a task without answers gets (K,): exp E[log τ_k] Σ_m
        exp E[log π_km], normalised (one subtype: exp E[log τ] normalised, as mf reports it)."""
        row = expected_log(self.nu)[:, None] + expected_log(self.eta, axis=1)
        w = np.exp(row - row.max()).sum(axis=1)
        return w / w.sum()


class EBCC(IterativeAggregator):
    __doc__ = __doc__
    name = "ebcc"
    loop_name = "mean-field"
    objective_name = "ELBO"
    stop_rule = Residual("class posteriors")
    collapse_advice = f"try ds, or ebcc with a larger {param('class_prior')} or fewer {param('subtypes')}"
    memory_advice = (f"its posteriors and tables grow with tasks × classes × {param('subtypes')}: lower "
                     f"{param('subtypes')}, or use mf or ds")

    def memory_needed(self, data: AnnotationSet) -> tuple[float, str]:
        n, w, k = data.n_tasks, data.n_workers, data.n_classes
        kl = k * int(self.check_params()["subtypes"])
        need = latent_memory(n, w, k, kl, mapped=True, draws=False, counts=True, n_answers=data.n_answers)
        # the start's split, its logs and the latent rows the kernel gives for it; the class posteriors kept and
        # compared; μ, E log v, the table and the KL's temporaries (the prior is one shared row)
        need += 8.0 * (3 * n * kl + 3 * n * k + 5 * w * k * kl)
        return need, f"{n:,} tasks × {kl:,} latent states (classes × subtypes), {w:,} workers"

    def _start(self, data: AnnotationSet, checked: FitContext, start: int, rng: np.random.Generator
               ) -> tuple[EBCCState, float]:
        begin = checked.start
        first = None if begin is None else begin.posterior
        post = starting_posteriors(data, 0, rng, first, checked.engine)  # every start splits the same start
        state = EBCCState(checked, data, post, int(rng.integers(2**63 - 1)))
        return state, state.objective

    def _step(self, data: AnnotationSet, state: EBCCState, checked: FitContext) -> Step:
        objective, change = state.iterate()
        return Step(objective=objective, residual=change)

    def _finish(self, data: AnnotationSet, run: Run, checked: FitContext) -> AggregationResult:
        state: EBCCState = run.state
        post = state.post
        labels = argmax_random_ties(post, TieBreaker(data.tasks, checked["seed"]), atol=1e-12)
        model = {"beta": state.mu.copy(), "eta": state.eta.copy(), "nu": state.nu.copy(),
                 "subtype_weights": state.subtype_weights}
        return make_result(
            self.name, data, post, labels, state.prior, worker_params={"confusion": state.confusion},
            model_params=model, n_iter=run.n_iter, converged=run.converged, objective=np.asarray(run.trace),
            objective_name=self.objective_name,
        )
