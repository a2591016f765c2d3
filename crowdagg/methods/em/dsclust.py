r"""Dawid--Skene with clustered workers: the workers fall into C clusters, each with one confusion matrix.

Model (Imamura, Sato & Sugiyama, ICML 2018, "Analysis of minimax error
rate for crowdsourcing and its application to worker clustering model",
arXiv:1802.04551; peerannot's ``Dawid_Skene_clust``, strategy ``DSWC``): the true class
:math:`y_n \sim \mathrm{Cat}(\rho)`; worker :math:`j` belongs to cluster
:math:`c_j \sim \mathrm{Cat}(\tau)`; given :math:`y_n = k` it answers
:math:`\sim \mathrm{Cat}(\Lambda_{c_j}[:, k])`.  Dawid--Skene is the
special case of one cluster per worker; one cluster is a single shared
confusion matrix.

Inference is the paper's mean-field variational EM over the task
posteriors :math:`\theta_n` and the workers' cluster memberships
:math:`\phi_j`, in coordinate-ascent order, so that the evidence lower bound
never decreases at ``smoothing`` 0 (with a pseudo-count the M-step maximises
the posterior, and the reported bound leaves the Dirichlet prior out, as
ds's log-likelihood does; peerannot updates :math:`\theta` and :math:`\phi`
together, each from the other's previous value):

1. M-step, from the expected answer counts :math:`N_j[l, k] = \sum_{n \in
   N_j} \theta_n(k) 1[\tilde y_n^{(j)} = l]` of the last E-step:
   :math:`\Lambda_c[l, k] \propto s + \sum_j \phi_{jc} N_j[l, k]`,
   :math:`\rho_k \propto s + \sum_n \theta_n(k)`, :math:`\tau_c =
   \frac{1}{M}\sum_j \phi_{jc}` (``smoothing`` = s; with s = 0 the entries
   are floored at 1e-10, as ds does);
2. memberships: :math:`\log \phi_{jc} = \log \tau_c + \sum_{l, k} N_j[l, k]
   \log \Lambda_c[l, k] - \log Z_j`;
3. E-step: :math:`\log \theta_n(k) = \log \rho_k + \sum_{j \in M_n}
   \sum_c \phi_{jc} \log \Lambda_c[\tilde y_n^{(j)}, k] - \log Z_n`.

The E-step is the shared kernel's (:func:`~crowdagg.kernels.em.em_block`)
on a per-worker log table gathered from the clusters',
:math:`\sum_c \phi_{jc} \log \Lambda_c` (workers × C × K² a pass, beside
the pass's L × K): the mean-field table is a mixture of the clusters'
rows, so a worker → cluster map inside the kernel would not save it, and
the kernel's per-worker counts (workers × K², what ds reduces too) are what
steps 1 and 2 read.  The objective is the evidence lower bound,
:math:`\sum_n \log Z_n + \sum_{j, c} \phi_{jc} (\log \tau_c - \log
\phi_{jc})`; the fit stops when its relative change falls below ``tol``
(1e-6) or after ``max_iter`` (200) iterations.

Start (the paper's and peerannot's): soft majority vote, one ds M-step
for each worker's own confusion :math:`\pi_j`, the workers ranked by the
nuclear norm of :math:`\pi_j` (a worker far from a spammer's rank-one
matrix scores high) and cut into C consecutive groups of equal size;
:math:`\Lambda_c` is the mean of its group's :math:`\pi_j`, :math:`\tau`
the group sizes, then a membership step and the E-step.  Norms equal to
nine digits (exact ties, rounding between two orders of the rows) are
ranked by worker name, so the fit does not depend on the row order.  With
C equal to the number of workers every group is one worker, and while the
memberships stay one-hot the fit is ds's, iteration by iteration.
``clusters`` above the number of workers is that many.

Gold clamps tasks as in ds; ``n_init`` restarts and ``init`` start from
other posteriors as ds's do.  The result has no per-worker confusion
(its worker model is the clusters'): ``worker_params`` holds each worker's
``cluster`` (the most probable one; -1 for a worker without answers, whose
membership is the prior τ), its cluster's ``accuracy`` (the cluster
confusion's diagonal weighted by the class prior; 1/K without answers) and
the soft ``membership`` (workers × C); ``model_params`` holds the clusters'
``cluster_confusion`` ``[cluster, true, observed]``, their weight ``tau``
and ``cluster_size`` (workers whose most probable cluster it is).
Clusters are numbered by accuracy, highest first.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
from scipy.special import xlogy

from ...core.checks import check_index_array, check_int
from ...data.annotations import AnnotationSet
from ...errors import DataError, param
from ...kernels.em import EMParams, em_block
from ...kernels.validate import as_float_array
from ..base import FitContext, IterativeAggregator, make_result
from ..blocks import PROB_FLOOR, TieBreaker, argmax_random_ties, full_m_step
from ..loop import Run
from ..result import AggregationResult
from .ds import em_memory

__all__ = ["ClusterState", "ClusteredDawidSkene", "initial_clusters"]


def initial_clusters(conf_ot: np.ndarray, name_rank: np.ndarray, n_clusters: int) -> np.ndarray:
    """The start's cluster of each worker (n_workers,): ranked by the nuclear norm of its confusion, cut in C groups.

    ``conf_ot`` (n_workers, K, K) each worker's own confusion; ``name_rank``
    (n_workers,) the rank of each worker's name, which orders equal norms.
    Norms are rounded to nine digits first: two orders of the same rows sum
    the counts in another order, and a last-bit difference must not reorder
    two workers.  Group c holds the ranks ``[M c / C, M (c + 1) / C)``:
    sizes differ by at most one, group 0 the highest norms.  Arrays of other
    shapes, or non-finite confusions, are a DataError; ``n_clusters`` below 1
    a UsageError (with none, no worker would get a group).
    """
    n_clusters = check_int("n_clusters", n_clusters, 1)
    conf_ot = as_float_array(conf_ot, "conf_ot", 3)
    m = conf_ot.shape[0]
    if conf_ot.shape[1] != conf_ot.shape[2] or not np.isfinite(conf_ot).all():
        raise DataError(f"conf_ot must hold finite (n_workers, K, K) confusions, got shape {conf_ot.shape}")
    name_rank = check_index_array("name_rank", name_rank, m, 0, max(m - 1, 0))
    norms = np.linalg.svd(conf_ot, compute_uv=False).sum(axis=1) if m else np.zeros(0)
    order = np.lexsort((name_rank, -np.round(norms, 9)))
    cluster = np.empty(m, dtype=np.int64)
    for c in range(n_clusters):
        cluster[order[m * c // n_clusters:m * (c + 1) // n_clusters]] = c
    return cluster


class ClusterState:
    """One start of the clustered fit: the parameters (ρ, log Λ, τ), the memberships φ and the last pass's counts.

    Between passes it holds workers × (K² + C) and C × K² floats, never the
    answers or the posteriors; each pass is one ``engine.map_reduce`` of
    :func:`~crowdagg.kernels.em.em_block`, so any engine runs it.
    """

    def __init__(self, engine: Any, start: np.ndarray | None, clamp: np.ndarray | None, smoothing: float,
                 n_clusters: int, name_rank: np.ndarray):
        self.engine = engine
        self.clamp = None if clamp is None or not (clamp >= 0).any() else clamp
        self.smoothing = smoothing
        (counts, tot, _), _ = engine.map_reduce(em_block, EMParams(post=start, clamp=self.clamp))
        self.counts_ot, self.class_tot = counts, tot
        # Each worker's own confusion (ds's first M-step), ranked and grouped; a cluster starts at its mean.
        self.prior, own = full_m_step(counts, tot, smoothing)
        start_cluster = initial_clusters(own, name_rank, n_clusters)
        m, k = own.shape[0], own.shape[1]
        size = np.bincount(start_cluster, minlength=n_clusters).astype(np.float64)
        conf = np.zeros((n_clusters, k, k))
        np.add.at(conf, start_cluster, own)
        self.log_conf = np.log(conf / np.maximum(size, 1.0)[:, None, None])  # (no workers: one empty cluster)
        self.tau = size / max(m, 1)
        self.objective = self._memberships_and_e_step()

    def _memberships_and_e_step(self) -> float:
        r"""Steps 2 and 3: φ from the last counts and the current Λ, τ, then the E-step; the ELBO."""
        m, k = self.counts_ot.shape[0], self.counts_ot.shape[1]
        n_clusters = self.log_conf.shape[0]
        log_tau = np.log(np.maximum(self.tau, PROB_FLOOR))
        scores = self.counts_ot.reshape(m, k * k) @ self.log_conf.reshape(n_clusters, k * k).T + log_tau
        scores -= scores.max(axis=1, keepdims=True)
        phi = np.exp(scores)
        phi /= phi.sum(axis=1, keepdims=True)
        self.phi = phi
        (self.counts_ot, self.class_tot, loglik), _ = self.engine.map_reduce(em_block, self._e_params())
        return float(loglik) + float(np.sum(phi * log_tau) - np.sum(xlogy(phi, phi)))

    def _e_params(self) -> EMParams:
        """The E-step's parameters: the class prior and each worker's table Σ_c φ_jc log Λ_c, [w, observed, true]."""
        m, (n_clusters, k, _) = self.phi.shape[0], self.log_conf.shape
        table = (self.phi @ self.log_conf.reshape(n_clusters, k * k)).reshape(m, k, k)
        return EMParams(np.log(self.prior), table, clamp=self.clamp)

    def iterate(self) -> float:
        """Step 1 (the M-step of Λ, ρ, τ), then steps 2 and 3: the ELBO of the new parameters."""
        m, k = self.counts_ot.shape[0], self.counts_ot.shape[1]
        n_clusters = self.log_conf.shape[0]
        pooled = (self.phi.T @ self.counts_ot.reshape(m, k * k)).reshape(n_clusters, k, k)
        self.prior, conf_ot = full_m_step(pooled, self.class_tot, self.smoothing)
        self.log_conf = np.log(conf_ot)
        if m:  # (no workers: τ stays the start's)
            self.tau = self.phi.mean(axis=0)
        return self._memberships_and_e_step()

    def posteriors(self) -> np.ndarray:
        """The current parameters' posteriors (n_tasks, K): the last E-step again, its blocks' rows kept."""
        _, outs = self.engine.map_reduce(em_block, self._e_params(), keep=True)
        return np.asarray(self.engine.gather(outs))


def dsclust_memory(data: AnnotationSet, n_clusters: int) -> tuple[float, str]:
    """Bytes a fit allocates: ds's (:func:`~crowdagg.methods.em.ds.em_memory`) and the clusters' arrays.

    Per worker the memberships and their scores (C each) and the gathered
    log table (K²); per cluster its confusion, log and pooled counts.
    """
    need, what = em_memory(data)
    w, k = data.n_workers, data.n_classes
    need += 8.0 * (3 * w * n_clusters + 2 * w * k * k + 4 * n_clusters * k * k)
    return need, f"{what}, {n_clusters:,} clusters"


class ClusteredDawidSkene(IterativeAggregator):
    __doc__ = __doc__
    name = "ds-clust"
    loop_name = "variational EM"
    objective_name = "ELBO"
    #: Its worker model is the clusters': no confusion per worker; the one-number parameters ``--workers`` shows.
    worker_form = "clusters"
    worker_param_names: ClassVar[tuple[str, ...]] = ("cluster", "accuracy")
    collapse_advice = f"try ds, or more {param('clusters')}, or {param('smoothing')} 1"
    memory_advice = "its tables grow with workers × (clusters + classes²): use fewer clusters, or mv"

    def _clusters(self, data: AnnotationSet, checked: FitContext) -> int:
        return max(1, min(int(checked["clusters"]), data.n_workers))

    def memory_needed(self, data: AnnotationSet) -> tuple[float, str]:
        n_clusters = max(1, min(int(getattr(self, "clusters", 2)), data.n_workers))
        need, what = dsclust_memory(data, n_clusters)
        if getattr(self, "n_init", 1) > 1:  # the best start's state kept beside the next
            need += 8.0 * (2 * data.n_workers * (data.n_classes ** 2 + n_clusters))
        return need, what

    def _start(
        self, data: AnnotationSet, checked: FitContext, start: int, rng: np.random.Generator
    ) -> tuple[ClusterState, float]:
        given = checked.start_posterior(data, start, rng)
        names = np.asarray(data.worker_names, dtype=object).astype(str)
        name_rank = np.empty(names.size, dtype=np.int64)
        name_rank[np.argsort(names, kind="stable")] = np.arange(names.size)
        state = ClusterState(checked.engine, given, checked.clamp, checked["smoothing"],
                             self._clusters(data, checked), name_rank)
        return state, state.objective

    def _finish(self, data: AnnotationSet, run: Run, checked: FitContext) -> AggregationResult:
        state: ClusterState = run.state
        post = state.posteriors()
        labels = argmax_random_ties(post, TieBreaker(data.tasks, checked["seed"]), atol=1e-12)
        k = data.n_classes
        conf = np.exp(state.log_conf).transpose(0, 2, 1)  # [cluster, true, observed]
        accuracy = np.diagonal(conf, axis1=1, axis2=2) @ state.prior
        order = np.argsort(-accuracy, kind="stable")  # clusters numbered by accuracy, highest first
        conf, accuracy, phi, tau = conf[order], accuracy[order], state.phi[:, order], state.tau[order]
        answered = data.answers_per_worker > 0
        cluster = np.where(answered, phi.argmax(axis=1), -1).astype(np.int64)
        worker_accuracy = np.where(answered, accuracy[np.maximum(cluster, 0)], 1.0 / k)
        return make_result(
            self.name, data, post, labels, state.prior,
            worker_params={"cluster": cluster, "accuracy": worker_accuracy, "membership": phi},
            model_params={"cluster_confusion": np.ascontiguousarray(conf), "tau": tau,
                          "cluster_size": np.bincount(cluster[answered], minlength=conf.shape[0])},
            n_iter=run.n_iter, converged=run.converged, objective=np.asarray(run.trace),
            objective_name=self.objective_name,
        )
