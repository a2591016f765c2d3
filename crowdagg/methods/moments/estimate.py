r"""What every moment method shares once it has estimated its parameters: the floor, the fallback, the decoding and
``refine=ds``.

A moment method (:class:`MomentAggregator`) implements one step,
``_estimate``: from the statistics of the answers (through the fit's
engine, :mod:`crowdagg.kernels.cooc`) to an :class:`Estimate` -- the class
prior :math:`d` (K,) and the confusion matrices
:math:`A_m[k', k] = P(\text{answer } k' \mid y = k)` of the workers it could
identify, in the common class order (:mod:`.align`).  The base then

1. **floors** every entry at :data:`FLOOR` (1e-6, the reference codes'
   clamp) and renormalises each column and the prior: a zero would veto a
   class in the decoding;
2. gives the workers the statistics could not identify (too few
   co-labelled tasks, a rank-deficient estimate) the **fallback**: their
   answers counted against the soft majority vote, one pseudo-count per
   cell, column-normalised (``algorithm_init.m`` of the MultiSPA code),
   and says how many on stderr -- never NaN;
3. **decodes** by MAP, :math:`\hat y_n = \arg\max_k \log d_k + \sum_{m \in
   M_n} \log A_m[\tilde y_n^{(m)}, k]` (ALGORITHMS.md §0), as one E-step
   on the engine (the EM kernel: the posteriors, their log-likelihood, the
   gold clamp);
4. with ``refine=ds``, runs Dawid--Skene EM **started from** that result
   (the services' start from another method's output,
   :mod:`crowdagg.methods.starts`: its prior and matrices, then an E-step)
   for at most ``refine_iter`` iterations, at ds's tolerance.

The result is named after the method in both cases.  Its objective is the
method's own trace under its own name where it iterates (cpd: the moment
residual), else the log-likelihood of the raw estimate
(``model_params["log_likelihood"]`` holds it in both); refined, the
refinement's trace.  A refinement that stops at ``refine_iter`` says so
in this method's terms.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from ...data.annotations import AnnotationSet
from ...errors import ConvergenceWarning, CrowdaggWarning, param, warn
from ...kernels.em import EMParams, em_block
from ..base import PRODUCT, Aggregator, FitContext, make_result
from ..blocks import TieBreaker, argmax_random_ties, full_m_step
from ..em.ds import em_memory
from ..result import AggregationResult

#: Entries of the estimated matrices and prior are floored here, then renormalised (the reference codes' 1e-6).
FLOOR = 1e-6

#: Pseudo-count per cell of the fallback matrices (answers against the soft majority vote).
FALLBACK_SMOOTHING = 1.0


@dataclass
class Estimate:
    """A moment method's raw estimate, before the base floors, fills and decodes it.

    Attributes
    ----------
    prior : ndarray of float, shape (K,)
        The class prior d (non-negative; normalised by the base).
    conf_ot : ndarray of float, shape (n_workers, K_observed, K_true)
        ``conf_ot[m, k', k]`` = A_m[k', k], in the common class order; rows of workers not
        ``estimated`` are ignored (the base fills them).  Non-negative, finite where estimated.
    estimated : ndarray of bool, shape (n_workers,)
        The workers the statistics identified.
    why : str
        Why the others were not, for the warning ("fewer than 7K = 21 co-occurrence columns").
    n_iter, converged : int, bool
        The method's own iterations (0 and True for a one-shot estimate).
    objective : ndarray of float
        The method's own objective trace (its cost), or empty.
    fallback : callable or None
        Gives the soft-vote matrices (n_workers, K_observed, K_true) the method made or can make without another
        pass (:func:`fallback_once`; :func:`soft_vote`); None: the base makes them, if a worker needs them.
    """

    prior: np.ndarray
    conf_ot: np.ndarray
    estimated: np.ndarray
    why: str = ""
    n_iter: int = 0
    converged: bool = True
    objective: np.ndarray = field(default_factory=lambda: np.empty(0))
    fallback: Callable[[], np.ndarray] | None = None


def soft_vote(engine: Any) -> tuple[np.ndarray, np.ndarray]:
    """``(prior (K,), conf_ot (n_workers, K_observed, K_true))``: one M-step on the soft majority vote -- every
    worker's answers counted against the vote shares, with :data:`FALLBACK_SMOOTHING` pseudo-counts,
    column-normalised (one pass of the EM kernel)."""
    (counts, tot, _), _ = engine.map_reduce(em_block, EMParams())
    return full_m_step(counts, tot, FALLBACK_SMOOTHING)


def soft_vote_matrices(engine: Any) -> np.ndarray:
    """The matrices of :func:`soft_vote`: the fallback of a worker the moments do not identify."""
    return soft_vote(engine)[1]


def fallback_once(engine: Any) -> Callable[[], np.ndarray]:
    """:func:`soft_vote_matrices` of ``engine``, made on the first call and kept: the steps of one fit that may
    each need the fallback share one pass."""
    return functools.cache(lambda: soft_vote_matrices(engine))


def settle(estimate: Estimate, engine: Any, n_workers: int, n_classes: int, method: str) -> tuple[np.ndarray, np.ndarray]:
    """``(prior, conf_ot)``: ``estimate`` floored at :data:`FLOOR` and renormalised, its unidentified workers given
    the fallback (said once on stderr with their count)."""
    k = n_classes
    prior = np.asarray(estimate.prior, dtype=np.float64).reshape(-1)
    conf = np.array(estimate.conf_ot, dtype=np.float64)
    known = np.asarray(estimate.estimated, dtype=bool).reshape(-1)
    if prior.shape != (k,) or conf.shape != (n_workers, k, k) or known.shape != (n_workers,):
        raise ValueError(f"{method}: an estimate of prior {prior.shape}, matrices {conf.shape}, mask {known.shape} "
                         f"for {n_workers} workers and {k} classes")
    bad = known & ~np.isfinite(conf).all(axis=(1, 2))
    known = known & ~bad
    if not np.isfinite(prior).all() or prior.sum() <= 0:
        prior = np.full(k, 1.0 / k)
    prior = np.maximum(prior, FLOOR)
    prior /= prior.sum()
    conf[known] = np.maximum(conf[known], FLOOR)
    conf[known] /= conf[known].sum(axis=1, keepdims=True)
    missing = int(n_workers - known.sum())
    if missing:
        fallback = estimate.fallback() if estimate.fallback is not None else soft_vote_matrices(engine)
        conf[~known] = fallback[~known]
        why = f" ({estimate.why})" if estimate.why else ""
        warn(CrowdaggWarning(f"{method}: {missing:,} of {n_workers:,} workers could not be estimated from the "
                             f"moments{why}; their confusion is their answers against the soft majority vote"))
    return prior, conf


class MomentAggregator(Aggregator):
    """Base of the moment methods: ``_estimate`` is the method; the base settles, decodes and refines (see the
    module notes)."""

    #: Its worker parameters are full confusion matrices: ds starts from them (refine=ds, ``ds -p init=NAME``).
    worker_form: ClassVar[str] = "confusion"
    #: What the method's own objective trace is (an iterative estimate sets its own: cpd's moment residual).
    objective_name: ClassVar[str] = "log-likelihood"
    collapse_advice = "try -p refine=ds, or ds"
    #: Its posteriors are one E-step's π_k Π θ_w[k, l] (or ds' after the refinement).
    posterior_form = PRODUCT
    memory_advice = "its tables grow with worker pairs × classes²: use ds or mv, or fewer classes"

    def memory_needed(self, data: AnnotationSet) -> tuple[float, str]:
        """The decoding's and the refinement's (EM's); the statistics' passes check their own before they run."""
        return em_memory(data)

    def _estimate(self, data: AnnotationSet, checked: FitContext) -> Estimate:
        raise NotImplementedError

    def _fit(self, data: AnnotationSet, checked: FitContext, callback: Any) -> AggregationResult:
        estimate = self._estimate(data, checked)
        prior, conf_ot = settle(estimate, checked.engine, data.n_workers, data.n_classes, self.name)
        prior = self.veto_silent_classes(data, checked, prior)
        with np.errstate(divide="ignore"):  # log 0 = -inf: a vetoed class's prior, meant
            raw = self.decode(data, checked, prior, conf_ot, estimate)
            if checked.get("refine", "none") == "ds":
                return self.refine_ds(data, checked, raw, callback)
        return raw

    def veto_silent_classes(self, data: AnnotationSet, checked: FitContext, prior: np.ndarray) -> np.ndarray:
        """``prior`` with the classes that no answer and no gold label carries set to 0 (said on stderr).

        The moments say nothing of such a class (``--classes`` naming more than
        the answers hold): its column is the floor or the fallback's uniform
        pseudo-counts, and a floored prior let the decoding -- and refine=ds's
        EM after it -- label tasks with a class nobody ever gave.  A zero prior
        vetoes it, as ds from majority vote does.  (The data's class counts:
        no pass over the answers.)
        """
        present = np.asarray(data.answers_per_class) > 0
        if checked.clamp is not None:
            named = np.asarray(checked.clamp)
            present[named[named >= 0]] = True
        if present.all() or not present.any():
            return prior
        out = np.where(present, prior, 0.0)
        out /= out.sum()
        warn(CrowdaggWarning(f"{self.name}: {int((~present).sum()):,} of {len(present):,} classes have no answer "
                             "(the moments cannot identify them): no task is labelled with them"))
        return out

    def decode(self, data: AnnotationSet, checked: FitContext, prior: np.ndarray, conf_ot: np.ndarray,
               estimate: Estimate) -> AggregationResult:
        """The MAP labels of ``(prior, conf_ot)``: one E-step on the engine (gold clamped), ties drawn by the seed."""
        # One E-step pass, its blocks' posteriors kept: the posteriors and their log-likelihood together.
        clamp = checked.clamp if checked.clamp is not None and (checked.clamp >= 0).any() else None
        (_, _, loglik), outs = checked.engine.map_reduce(
            em_block, EMParams(np.log(prior), np.log(conf_ot), clamp=clamp), keep=True)
        post = np.asarray(checked.engine.gather(outs))
        labels = argmax_random_ties(post, TieBreaker(data.tasks, checked["seed"]), atol=1e-12)
        # The method's own trace under its own name (cpd: the moment residual); a one-shot estimate's objective
        # is the log-likelihood of its parameters.
        own = np.asarray(estimate.objective, dtype=np.float64)
        objective, name = (own, self.objective_name) if own.size else (np.array([float(loglik)]), "log-likelihood")
        return make_result(self.name, data, post, labels, prior,
                           worker_params={"confusion": np.ascontiguousarray(conf_ot.transpose(0, 2, 1))},
                           n_iter=estimate.n_iter, converged=estimate.converged, objective=objective,
                           objective_name=name, model_params={"log_likelihood": float(loglik)})

    def refine_ds(self, data: AnnotationSet, checked: FitContext, raw: AggregationResult,
                  callback: Any) -> AggregationResult:
        """Dawid--Skene EM from ``raw`` (its prior and matrices; :mod:`crowdagg.methods.starts`), named after this
        method.  ``n_iter`` counts the refinement's iterations; ``converged`` is the refinement's."""
        from ..em.ds import DawidSkene

        gold = getattr(self, "gold", None)
        ds = DawidSkene(seed=checked["seed"], max_iter=checked["refine_iter"], init=raw,
                        **({} if gold is None else {"gold": gold}))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = ds.fit(data, callback=callback, max_memory=checked.max_memory, engine=checked.engine)
        for w in caught:
            # What the data and the gold give rise to this fit has said already, and its own checks run on the
            # result it returns; only the refinement's own verdict is new, said in this method's terms.
            if issubclass(w.category, ConvergenceWarning):
                warn(ConvergenceWarning(f"{self.name}: the refinement ({param('refine')}=ds) did not converge in "
                                        f"{param('refine_iter')}={checked['refine_iter']} EM iterations; raise "
                                        f"{param('refine_iter')}"))
            elif not issubclass(w.category, CrowdaggWarning):
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        result.method = self.name
        return result


__all__ = ["FALLBACK_SMOOTHING", "FLOOR", "Estimate", "MomentAggregator", "settle", "soft_vote", "soft_vote_matrices"]
