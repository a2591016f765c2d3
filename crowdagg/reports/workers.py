"""The annotator report: who is good, who is a spammer, who agrees with whom (``crowdagg workers``).

:func:`worker_report` -- one row per worker, in ``data.workers``' order:

==================  ============================================================================
column              what it is
==================  ============================================================================
worker              the worker's name
answers             the worker's answers
accuracy            the method's estimate (:attr:`~crowdagg.methods.result.AggregationResult.worker_accuracy`:
                    its own accuracy, or the confusion's diagonal weighted by the class prior)
accuracy_low        a 95% Wilson score interval on the worker's share of right answers, each
accuracy_high       counted with its task's posterior without the worker's answers: by the others
                    (:func:`accuracy_evidence`, :func:`leave_one_out`); missing for methods whose
                    posterior is not a product over the answers (mv, wawa, iwmv, ds-clust, glad,
                    kos, ...: :data:`INTERVAL_COLUMNS`)
chance_accuracy     the share a spammer with the worker's answer frequencies would get right
                    (Σ_k f_k π_k, π the method's class prior): the level the interval is judged against
recall_<class>      one per class: the confusion's diagonal, P(answers c | truth is c)
worst_class         the class of lowest recall (the first, on a tie), and that recall in
worst_recall        ``worst_recall``
capacity            the channel capacity of the estimated confusion, bits (0 for a spammer,
                    log2 K for a perfect worker; :func:`crowdagg.reports.spammers.channel_capacity`)
raykar_yu           Raykar & Yu's spammer score of the confusion, 0 iff its rows are equal
                    (:func:`crowdagg.reports.spammers.raykar_yu_score`)
agreement           the share of the worker's answers equal to the method's label of their task
spam_score          the cross-covariance detector's score ``‖V_m‖`` (missing where it skipped the
                    worker, or was not run)
chance_bound        the near-chance rule's statistic: an upper bound, bits, on the information an
                    answer of the worker carries (:func:`chance_bound`; missing for a method
                    without an accuracy)
spammer             flagged by either criterion: the detector or the near-chance rule (missing
                    where neither flagged it and the detector skipped it, or was not run); a
                    detector's flag is withdrawn when the worker's accuracy is shown to be above
                    chance (:func:`spammer_flags`)
flagged_by          ``covariance``, ``chance``, ``both``, or empty
gold_answers        with gold labels: the worker's answers on gold tasks, and the share of them
gold_accuracy       that are right -- the way crowdsourcing platforms score workers (missing
                    for a worker without a gold answer)
<parameter>         last, for a method whose worker model is no confusion: each of its own
                    one-number worker parameters (glad ``alpha``, kos ``reliability``, bwa
                    ``precision``, mace ``competence`` and ``spamming``; :func:`method_columns`)
==================  ============================================================================

A method whose worker model is no confusion matrix (``glad``: an ability
per worker) has no recall, worst class, capacity or Raykar–Yu score, and
no accuracy unless it estimates one: those cells are missing (the
:data:`CONFUSION_COLUMNS` note says so, and which methods have them) rather
than the method refused, since answers, agreement, the spammer scan and gold
accuracy still say much about a worker.

Two criteria flag spammers (:func:`spammer_flags`), and ``spammer`` is their
union:

* ``covariance`` -- the cross-covariance detector
  (:func:`crowdagg.reports.spammers.detect_spammers`), on the answers alone:
  a worker whose row of the low-rank factor is near zero.  It judges
  workers by how they co-vary with the others, so a weak worker that still
  leans the right way (rte's 700-answer worker, right 58% of the time:
  score .29 against a noise level of .05) is not its spammer.  Its test
  asks whether a worker's covariances are *consistent* with a spammer's
  (score within 3x its permutation noise), which a light worker's always
  are: on rte a 20-answer worker right 85% of the time scores 2.9x its
  noise, and the detector flagged 57 workers, 28 of them right 80% of the
  time or more.  Absence of evidence is not evidence, so a detector's flag
  stands only where the fitted model cannot show the worker to be above
  chance: each flagged worker's one-sided score test of "its share of right
  answers, each weighted by its task's posterior without the worker's
  answers, is no more than ``chance_accuracy``" (:func:`accuracy_evidence`;
  the in-sample posterior agrees with the worker because it counts its
  answer: it withdrew flags of workers answering at random), and the flags whose tests reject at a false
  discovery rate of :data:`ABOVE_CHANCE_FDR` (Benjamini--Hochberg over the
  detector's flags) are withdrawn.  The FDR, not a per-worker level: among
  many true spammers a few p-values fall low by chance, and BH keeps them
  (on a crowd whose flags are all spammers it withdraws none unless the
  p-values pile up near 0); not Bonferroni: with 20 answers a worker right
  17 times has p = .0013, above .05/57.  Measured on the five real sets with
  truth (benchmarks/bench_workers.py): of the detector's flags, 3 of 8 on
  temp and 28 of 57 on rte are right 80%+ of the time by the truth; of the
  report's, after the withdrawals, 0 of 5 and 0 of 16, every extreme
  spammer still flagged.
* ``chance`` -- the fitted model is confident that the worker's answers
  carry almost no information about the truth (:func:`near_chance`).  From
  the method's accuracy p̂ and the worker's n answers, the capacity of the
  K-ary symmetric channel of accuracy p,
  C(p) = log2 K − H(p) − (1 − p) log2(K − 1) (H the binary entropy; 0 at
  p = 1/K), is bounded over p̂ ± z·sqrt(p̂(1 − p̂)/n) (z = 2: C is convex
  with its minimum at 1/K, so its largest value on the interval is at an
  end); the worker is flagged when that bound is under
  :data:`CHANCE_BITS` = 0.06 bits.  A binary worker right 90% of the time
  carries .53 bits an answer, one right 64% of the time .06: under the
  threshold, nine answers tell less than one good one, and the accuracy is
  confidently under .64 (over .36).  The interval makes the rule leave light
  workers alone: a binary worker with fewer than 49 answers is never flagged
  (the interval is wider than the whole band .36--.64), one with 20 answers
  right 60% of the time has a bound of .32 bits.  Why not higher: on the
  ``dense-heavy`` crowd (1,000 one-coin workers of accuracy .6--.9, ~1,000
  answers each) 0.1 bits flags 189 honest workers up to .70 and removing them
  costs ds .5 points (.904 → .899); 0.06 flags 47 (up to .66), costing .1.
  Why not lower: rte's 700-answer worker right 58% of the time (ds: .596)
  has a bound of .052 bits.  The interval takes the model's labels as known,
  so it is, if anything, too narrow for workers on tasks that few others
  answered.  A method without a per-worker
  accuracy (kos; glad's ability is no accuracy) cannot use this rule: the
  detector alone flags.

:func:`pair_agreement` -- the worker × worker table, sparse: one row per
pair of workers who labelled a task in common, from the engine's
co-occurrence kernel (:func:`crowdagg.kernels.cooc.co_occurrence`): how many
tasks they share, how often they agree, how often two workers with their
answer frequencies would agree by chance, and Cohen's kappa.  Copying or
colluding pairs stand out with a kappa near 1 over many shared tasks.

Missing cells are ``NA`` in the returned DataFrames (pandas' nullable
dtypes); :func:`table_columns` turns a report into the columns the writers
take (a missing number is an empty CSV cell or a JSON ``null``,
:class:`crowdagg.io.render.Missing`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from ..core.memory import MaxMemory
from ..data.annotations import AnnotationSet
from ..engine import LocalEngine
from ..errors import UsageError, param

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from ..methods.result import AggregationResult
    from .spammers import SpammerScan

#: The leading columns of every worker report (how an earlier report is recognised in an input directory).
LEADING = ("worker", "answers", "accuracy")
#: The columns of :func:`pair_agreement`.
PAIR_COLUMNS = ("worker_a", "worker_b", "shared_tasks", "agreement", "chance_agreement", "kappa")
#: The near-chance rule's threshold, bits an answer (the module notes say why).
CHANCE_BITS = 0.06
#: The near-chance rule's interval half-width, in standard errors of the accuracy.
CHANCE_Z = 2.0
#: The values of ``flagged_by``.
FLAGGED_BY = ("covariance", "chance", "both", "")
#: The false discovery rate at which a detector's flag is withdrawn for an accuracy shown above chance.
ABOVE_CHANCE_FDR = 0.10
#: The accuracy interval's z: 95% two-sided.
INTERVAL_Z = 1.959963984540054
#: What a method without confusion matrices leaves missing.
CONFUSION_COLUMNS = "recall_<class>, worst_class, worst_recall, capacity, raykar_yu"
#: What a method whose posterior is not a product over the answers (:func:`posterior_form`) leaves missing.
INTERVAL_COLUMNS = "accuracy_low, accuracy_high"


def report_columns(classes: tuple[str, ...] | list[str], gold: bool, params: tuple[str, ...] = ()) -> tuple[str, ...]:
    """The columns of :func:`worker_report` for these classes, with or without gold, ending with ``params``: the
    method's own one-number worker parameters (:func:`method_columns`)."""
    return (*LEADING, "accuracy_low", "accuracy_high", "chance_accuracy", *(f"recall_{c}" for c in classes), "worst_class", "worst_recall", "capacity", "raykar_yu",
            "agreement", "spam_score", "chance_bound", "spammer", "flagged_by",
            *(("gold_answers", "gold_accuracy") if gold else ()), *params)


def method_columns(names: Any) -> tuple[str, ...]:
    """The columns a report ends with for a method whose worker parameters are not a confusion: its one-number
    parameters ``names`` (its ``worker_param_names``, or the one-dimensional ``worker_params`` of a result) --
    glad's ``alpha``, kos' ``reliability``, bwa's ``precision``, mace's ``competence`` and ``spamming`` -- less
    any the report has a column of its own for (``accuracy``).  None (a confusion) gives none."""
    fixed = set(report_columns((), True))
    return tuple(n for n in (names or ()) if n not in fixed)


def symmetric_capacity(accuracy: np.ndarray, n_classes: int) -> np.ndarray:
    """Capacity, bits, of the K-ary symmetric channel right with probability ``accuracy`` (wrong answers spread
    evenly): ``log2 K − H(p) − (1 − p) log2(K − 1)``, H the binary entropy; 0 at p = 1/K, log2 K at p = 1.

    ``accuracy``: any shape, in [0, 1]; the result has its shape (NaN where it is NaN).
    """
    p = np.asarray(accuracy, dtype=np.float64)
    k = int(n_classes)
    q = 1.0 - p
    with np.errstate(divide="ignore", invalid="ignore"):
        plogp = np.where(p > 0, p * np.log2(np.where(p > 0, p, 1.0)), 0.0)
        # the wrong mass q spread over K − 1 classes: −q log2(q / (K − 1)) = H's q-term + q log2(K − 1)
        qlogq = np.where(q > 0, q * np.log2(np.where(q > 0, q, 1.0) / max(k - 1, 1)), 0.0)
    out = np.log2(k) + plogp + qlogq
    return np.where(np.isnan(p), np.nan, np.maximum(out, 0.0))  # not −1e-17 at p = 1/K


def chance_bound(accuracy: np.ndarray, answers: np.ndarray, n_classes: int, *, z: float = CHANCE_Z) -> np.ndarray:
    """Upper bound, bits an answer, on what each worker's answers tell of the truth (the near-chance statistic).

    The largest :func:`symmetric_capacity` over ``p̂ ± z·sqrt(p̂(1 − p̂)/n)`` (clipped to [0, 1]): the capacity is
    convex in p with its minimum at 1/K, so the largest value is at an end of the interval.

    Parameters
    ----------
    accuracy : ndarray of float, shape (n_workers,)
        The method's estimate p̂ (NaN: unknown).
    answers : ndarray of int, shape (n_workers,)
        Each worker's answers n.
    n_classes : int
    z : float
        Half-width in standard errors (2: about 95% two-sided).

    Returns
    -------
    ndarray of float, shape (n_workers,)
        NaN where ``accuracy`` is NaN or the worker has no answer, and everywhere with one class: no answer can
        tell classes apart there, so every worker would be 0 bits from chance and flagged, careful or not.
    """
    p = np.clip(np.asarray(accuracy, dtype=np.float64), 0.0, 1.0)
    n = np.asarray(answers, dtype=np.float64)
    if n_classes < 2:
        return np.full(p.shape, np.nan)
    with np.errstate(divide="ignore", invalid="ignore"):
        half = z * np.sqrt(p * (1.0 - p) / n)
    ends = np.stack([np.clip(p - half, 0.0, 1.0), np.clip(p + half, 0.0, 1.0)])
    bound = symmetric_capacity(ends, n_classes).max(axis=0)
    return np.where(np.isfinite(half), bound, np.nan)


def near_chance(accuracy: np.ndarray, answers: np.ndarray, n_classes: int, *, bits: float = CHANCE_BITS,
                z: float = CHANCE_Z) -> np.ndarray:
    """The near-chance rule: ``chance_bound(...) < bits`` (bool, shape (n_workers,); False where unknown)."""
    return _below(chance_bound(accuracy, answers, n_classes, z=z), bits)


def _below(bound: np.ndarray, bits: float) -> np.ndarray:
    """``bound < bits``, False where the bound is unknown (NaN)."""
    return np.where(np.isnan(bound), False, bound < bits)


def method_accuracy(result: AggregationResult) -> np.ndarray | None:
    """The method's per-worker accuracy (:attr:`~crowdagg.methods.result.AggregationResult.worker_accuracy` for a
    confusion, else its own ``accuracy`` parameter), or None for a method that estimates none (kos, glad)."""
    if result.has_confusion:
        return np.asarray(result.worker_accuracy, dtype=np.float64)
    acc = result.worker_params.get("accuracy")
    return None if acc is None else np.asarray(acc, dtype=np.float64)


@dataclass(frozen=True)
class AccuracyEvidence:
    """What the fitted model says of each worker's accuracy (:func:`accuracy_evidence`); arrays of shape
    (n_workers,), NaN for a worker without answers.

    Attributes
    ----------
    right : ndarray of float
        The expected number of right answers: each answer counts its task's posterior of the class answered.
    answers : ndarray of int
        The worker's answers n.
    low, high : ndarray of float
        The 95% Wilson score interval on ``right / n``.
    chance : ndarray of float
        ``Σ_k f_k π_k``: the share right of a spammer answering class k with the worker's frequency f_k, π the
        method's class prior.
    pvalue : ndarray of float
        One-sided score test of ``right / n ≤ chance``: ``1 − Φ((p̂ − p₀) / sqrt(p₀(1 − p₀)/n))``.
    """

    right: np.ndarray
    answers: np.ndarray
    low: np.ndarray
    high: np.ndarray
    chance: np.ndarray
    pvalue: np.ndarray


def wilson_interval(right: np.ndarray, n: np.ndarray, z: float = INTERVAL_Z) -> tuple[np.ndarray, np.ndarray]:
    """The Wilson score interval on a share ``right / n`` (``right`` may be fractional), ``(low, high)``.

    ``(p̂ + z²/2n ± z sqrt(p̂(1 − p̂)/n + z²/4n²)) / (1 + z²/n)``: the shares p that a two-sided score test at
    ``z`` does not reject.  Unlike p̂ ± z·se it stays in [0, 1] and is not empty at p̂ = 0 or 1 (at 20 of 20
    right: [.839, 1]).  NaN where n is 0.
    """
    n = np.asarray(n, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        p = np.clip(np.asarray(right, dtype=np.float64) / n, 0.0, 1.0)
        z2n = z * z / n
        centre = (p + z2n / 2.0) / (1.0 + z2n)
        half = z / (1.0 + z2n) * np.sqrt(p * (1.0 - p) / n + z2n / (4.0 * n))
    return np.clip(centre - half, 0.0, 1.0), np.clip(centre + half, 0.0, 1.0)


def accuracy_evidence(data: AnnotationSet, result: AggregationResult, *, z: float = INTERVAL_Z) -> AccuracyEvidence:
    """Each worker's accuracy as the fitted model sees it: the posterior-weighted share of right answers, its
    Wilson interval, the share a spammer would get, and the test of the one against the other.

    An answer (t, w, l) counts as right with the probability that task t's true class is l *by the other
    workers' answers*: its leave-one-out posterior ``p_t^{-w}(l)`` (:func:`leave_one_out`), so the worker is
    judged by what the others say, never by a posterior it helped make.  The in-sample posterior ``p_t(l)``
    includes the worker's own answer, and a worker always agrees with it in part, most where a task has few
    answers and the fit leans on few workers: 8 workers answering 300 binary tasks uniformly at random (the
    test's crowd), ds locks onto one of them (its in-sample share .78, interval .73--.82), the test "shows" 3
    of the 8 above chance, mv's vote shares all 8; left out, every interval holds .50 and none does.

    That needs to know how the posteriors are made of the answers: a product of confusion entries (ds,
    onecoin, wmv, mf, bp, the moment methods) or a vote's shares (mv, wawa).  A method whose posteriors are
    made otherwise (glad's, of an ability and a difficulty; kos' messages: :func:`posterior_form` is ``""``)
    keeps the in-sample share ``p_t(l)``, with that bias (on the random crowd above glad "shows" 3 of 8 above
    chance, kos 4): the reason the test is used only to withdraw the detector's flags, never to raise one.
    O(n_answers × K) in numpy.
    """
    from scipy.special import ndtr

    k = data.n_classes
    n = np.asarray(data.answers_per_worker, dtype=np.int64)
    post = leave_one_out(data, result)
    if post is None:
        post = np.asarray(result.posteriors, dtype=np.float64)[data.task, data.label]
    right = np.bincount(data.worker, weights=post, minlength=data.n_workers)
    freq = np.bincount(data.worker * k + data.label, minlength=data.n_workers * k).reshape(-1, k).astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        share = right / n
        chance = (freq @ np.asarray(result.prior, dtype=np.float64)) / n
        z_stat = (share - chance) / np.sqrt(chance * (1.0 - chance) / n)
    # p₀ = 1 (the one class a spammer could get right): nothing to show; p₀ = 0: any right answer shows it
    z_stat = np.where(chance >= 1.0, -np.inf, np.where(chance <= 0.0, np.where(share > 0, np.inf, -np.inf), z_stat))
    pvalue = np.where(n > 0, 1.0 - ndtr(z_stat), np.nan)
    low, high = wilson_interval(right, n, z)
    return AccuracyEvidence(np.where(n > 0, right, np.nan), n, low, high, np.where(n > 0, chance, np.nan), pvalue)


#: The floor of a confusion entry divided out of a posterior (ds floors its entries at the same 1e-10): an entry
#: of 0 would make the division 0/0 where the answer ruled a class out.
LEAVE_OUT_FLOOR = 1e-10


def posterior_form(result: AggregationResult) -> str:
    """How ``result``'s posteriors are made of the answers: its method's
    :attr:`~crowdagg.methods.base.Aggregator.posterior_form` -- ``"product"`` (ds, onecoin, wmv, mf, bp, the
    moment methods; only where the result has a confusion), ``"shares"`` (mv, wawa) -- or ``""``."""
    from ..methods.base import PRODUCT
    from ..methods.registry import METHODS, get_method

    form = str(getattr(get_method(result.method), "posterior_form", "")) if result.method in METHODS else ""
    return "" if form == PRODUCT and not result.has_confusion else form


def leave_one_out(data: AnnotationSet, result: AggregationResult) -> np.ndarray | None:
    """Per answer (t, w, l), the posterior of the class it gave, l, without worker w's answers on task t:
    shape (n_answers,), in ``data``'s answer order; None where the posteriors are made some other way
    (:func:`posterior_form`: glad, kos).

    The fit's parameters are held (no refit), O(n_answers × K), and a worker's several answers on one task
    (duplicates kept) leave together:

    * a product, ``p_t(k) ∝ π_k Π_{(v, m) answers on t} θ_v[k, m]`` (θ the result's confusion, rows the true
      class, columns the answer): ``p_t^{-w}(k) ∝ p_t(k) / Π_{w's answers m on t} θ_w[k, m]``, renormalised
      over k -- the E-step over the other workers alone.  In log space, the confusion floored at
      :data:`LEAVE_OUT_FLOOR` and the posterior at the smallest normal float; a task a gold label clamps
      keeps its class.  For mf and bp, whose posteriors are the product form's approximation, so is this;
    * a vote's shares, ``p_t(k) = V_t(k) / S_t`` (V_t(k) the weight of t's answers k, S_t of all of them,
      each answer weighing its worker's :attr:`~crowdagg.methods.base.Aggregator.vote_weight`):
      ``(V_t(k) − s_w c_{t,w}(k)) / (S_t − s_w n_{t,w})``, c and n w's answers k and all its answers on t; the
      class prior where no other vote is left (w alone on the task), as a task without answers gets.

    Raises
    ------
    ResourceError
        The answers × K arrays exceed the memory limit (:func:`crowdagg.core.memory.check`, the result's
        ``max_memory``).
    """
    from ..methods.base import PRODUCT, SHARES

    form = posterior_form(result)
    if form not in (PRODUCT, SHARES):
        return None
    from ..core import memory

    a, k = data.n_answers, data.n_classes
    memory.check(4.0 * 8 * a * k, f"the leave-one-out posteriors of {a:,} answers × {k} classes", result.max_memory)
    task, worker, label = (np.asarray(x, dtype=np.int64) for x in (data.task, data.worker, data.label))
    post = np.asarray(result.posteriors, dtype=np.float64)
    # One group per (task, worker) pair: a worker's duplicate answers on a task leave together.
    _, pair = np.unique(task * data.n_workers + worker, return_inverse=True)
    pair = pair.reshape(-1)
    n_pairs = int(pair.max()) + 1 if a else 0
    if form == SHARES:
        return _shares_left_out(data, result, task, worker, label, pair, n_pairs, post)
    log_conf = np.log(np.maximum(np.asarray(result.confusion, dtype=np.float64), LEAVE_OUT_FLOOR))
    own = log_conf[worker, :, label]  # (answers, K): log θ_w[k, l] of each answer
    if n_pairs < a:
        own = np.stack([np.bincount(pair, weights=own[:, c], minlength=n_pairs) for c in range(k)], axis=1)[pair]
    log_out = np.log(np.maximum(post[task], np.finfo(np.float64).tiny)) - own
    log_out -= log_out.max(axis=1, keepdims=True)
    weight = np.exp(log_out)
    return weight[np.arange(a), label] / weight.sum(axis=1)


def _shares_left_out(data: AnnotationSet, result: AggregationResult, task: np.ndarray, worker: np.ndarray,
                     label: np.ndarray, pair: np.ndarray, n_pairs: int, post: np.ndarray) -> np.ndarray:
    """:func:`leave_one_out` of a vote's shares (its notes); ``pair`` numbers the (task, worker) pairs."""
    from ..methods.registry import get_method

    key = getattr(get_method(result.method), "vote_weight", None)
    s = np.ones(data.n_workers) if key is None else np.asarray(result.worker_params[key], dtype=np.float64)
    vote = s[worker]
    total = np.bincount(task, weights=vote, minlength=data.n_tasks)  # S_t
    # w's weight on t in all (s_w n_{t,w}) and on the class it gave (s_w c_{t,w}(l)), per answer
    own_all = np.bincount(pair, weights=vote, minlength=n_pairs)[pair]
    _, same = np.unique(pair * data.n_classes + label, return_inverse=True)
    same = same.reshape(-1)
    own_class = np.bincount(same, weights=vote)[same]
    rest = total[task] - own_all
    with np.errstate(divide="ignore", invalid="ignore"):
        share = np.clip((post[task, label] * total[task] - own_class) / rest, 0.0, 1.0)
    # no other vote left (rounding aside): the prior, what the vote gives a task without answers
    alone = rest <= 1e-12 * np.maximum(total[task], 1.0)
    return np.where(alone, np.asarray(result.prior, dtype=np.float64)[label], share)


def benjamini_hochberg(pvalues: np.ndarray, rate: float) -> np.ndarray:
    """Benjamini--Hochberg at false discovery rate ``rate``: the mask of the rejected hypotheses (the k smallest
    p-values, k the largest with ``p_(k) ≤ k·rate/m``; NaN never rejected, and not counted in m)."""
    p = np.asarray(pvalues, dtype=np.float64)
    out = np.zeros(p.shape, dtype=bool)
    known = np.flatnonzero(~np.isnan(p))
    m = len(known)
    if m == 0:
        return out
    order = known[np.argsort(p[known], kind="stable")]
    below = np.flatnonzero(p[order] <= rate * np.arange(1, m + 1) / m)
    if len(below):
        out[order[:below[-1] + 1]] = True
    return out


@dataclass(frozen=True)
class SpammerFlags:
    """Both criteria's verdicts on each worker (:func:`spammer_flags`); arrays of shape (n_workers,).

    Attributes
    ----------
    covariance : ndarray of bool
        The cross-covariance detector's flag (False where it skipped the worker or was not run), less the
        ``withdrawn`` ones.
    chance : ndarray of bool or None
        The near-chance rule's flag; None where the method estimates no accuracy.
    bound : ndarray of float
        The near-chance statistic, :func:`chance_bound` (all NaN without an accuracy).
    withdrawn : ndarray of bool
        The detector's flags withdrawn: the worker's accuracy shown above chance (:func:`spammer_flags`).
    evidence : AccuracyEvidence or None
        The fit's view of each worker's accuracy (None without a fit).
    scanned : ndarray of bool or None
        Judged by the detector (not skipped; None: no scan).
    """

    covariance: np.ndarray
    chance: np.ndarray | None
    bound: np.ndarray
    withdrawn: np.ndarray | None = None
    evidence: AccuracyEvidence | None = None
    scanned: np.ndarray | None = None

    @property
    def judged(self) -> np.ndarray:
        """The workers with a verdict: judged by the detector, or flagged by either criterion."""
        scanned = np.zeros_like(self.covariance) if self.scanned is None else self.scanned
        return scanned | self.flagged

    @property
    def flagged(self) -> np.ndarray:
        """The union: flagged by either criterion."""
        return self.covariance if self.chance is None else self.covariance | self.chance

    @property
    def flagged_by(self) -> np.ndarray:
        """Object array of :data:`FLAGGED_BY`: which criteria flagged each worker."""
        chance = np.zeros_like(self.covariance) if self.chance is None else self.chance
        out = np.full(self.covariance.shape, "", dtype=object)
        out[self.covariance] = "covariance"
        out[chance] = "chance"
        out[self.covariance & chance] = "both"
        return out


def spammer_flags(data: AnnotationSet, result: AggregationResult | None, scan: SpammerScan | None, *,
                  chance: bool = True, bits: float = CHANCE_BITS, z: float = CHANCE_Z,
                  fdr: float = ABOVE_CHANCE_FDR) -> SpammerFlags:
    """Who is a spammer, by the detector (``scan``) and by the near-chance rule on ``result``'s accuracy.

    The detector's flags are checked against the fit: the flagged workers' one-sided tests of "right no more
    often than chance" (:func:`accuracy_evidence`) are corrected by Benjamini--Hochberg at ``fdr`` over the
    flagged workers, and a flag whose test rejects is withdrawn (``withdrawn``; the module notes say why).

    Parameters
    ----------
    data : AnnotationSet
    result : AggregationResult or None
        A fit on ``data``; None: the detector alone, its flags unchecked.
    scan : SpammerScan or None
        :func:`crowdagg.reports.spammers.detect_spammers` on ``data``; None: the near-chance rule alone.
    chance : bool
        Apply the near-chance rule (where the method estimates an accuracy; not glad or kos).
    bits, z : float
        The rule's threshold and interval (:func:`near_chance`; defaults :data:`CHANCE_BITS`, :data:`CHANCE_Z`).
    fdr : float
        The false discovery rate of the withdrawals (default :data:`ABOVE_CHANCE_FDR`); 0 withdraws none.

    Returns
    -------
    SpammerFlags
    """
    n_workers = data.n_workers
    detector = np.zeros(n_workers, bool) if scan is None else np.asarray(scan.flagged, bool)
    scanned = None if scan is None else ~np.asarray(scan.skipped, bool)
    withdrawn = np.zeros(n_workers, bool)
    evidence = None
    if result is not None:
        evidence = accuracy_evidence(data, result)
        withdrawn = benjamini_hochberg(np.where(detector, evidence.pvalue, np.nan), fdr)
    covariance = detector & ~withdrawn
    accuracy = method_accuracy(result) if result is not None and chance else None
    if accuracy is None:
        return SpammerFlags(covariance, None, np.full(n_workers, np.nan), withdrawn, evidence, scanned)
    answers = np.asarray(data.answers_per_worker, dtype=np.int64)
    bound = chance_bound(accuracy, answers, data.n_classes, z=z)
    return SpammerFlags(covariance, _below(bound, bits), bound, withdrawn, evidence, scanned)


def worker_report(data: AnnotationSet, result: AggregationResult, *, scan: SpammerScan | None = None,
                  chance: bool = True, gold: Mapping[str, str] | np.ndarray | None = None,
                  engine: Any = None) -> pd.DataFrame:
    """One row per worker: what the method estimated, how the worker agrees, whether it looks like a spammer.

    Parameters
    ----------
    data : AnnotationSet
        The answers ``result`` was fitted on.
    result : AggregationResult
        A fit of any method on ``data`` (``crowdagg.aggregate(data, "ds")``).
    scan : SpammerScan, optional
        The cross-covariance detector's verdict,
        :func:`crowdagg.reports.spammers.detect_spammers` on ``data``;
        without it ``spam_score`` is missing and only the near-chance rule flags.
    chance : bool
        Apply the near-chance rule (:func:`spammer_flags`) where the method estimates an accuracy (default);
        False: ``chance_bound`` is missing and the detector alone flags.
    gold : mapping of task name -> class name, or ndarray of int, shape (n_tasks,), optional
        Known labels (an index array: the class per task, -1 where unknown,
        :func:`crowdagg.methods.blocks.gold_clamp`); adds ``gold_answers``
        and ``gold_accuracy``.  Gold only scores the workers here: the fit
        is ``result``'s.
    engine : engine of the block protocol, optional
        Over ``data`` (default ``LocalEngine(data)``): where the agreement
        with the consensus is counted.

    Returns
    -------
    pandas.DataFrame
        The columns of :func:`report_columns` (the module notes), one row
        per worker in ``data.workers``' order; missing cells ``NA``.

    Raises
    ------
    UsageError
        ``result`` was fitted on other answers, or ``scan`` is of another
        number of workers.
    """
    import pandas as pd

    from ..methods.blocks import agreement_with_block, gold_clamp

    n_workers, k = data.n_workers, data.n_classes
    if result.labels.shape != (data.n_tasks,) or result.posteriors.shape[1] != k:
        raise UsageError(f"{param('result')} was fitted on other answers: {len(result.labels):,} tasks × "
                         f"{result.posteriors.shape[1]} classes, the data has {data.n_tasks:,} × {k}")
    if scan is not None and scan.score.shape != (n_workers,):
        raise UsageError(f"{param('scan')} judges {scan.score.shape[0]:,} workers, the data has {n_workers:,}")
    answers = np.asarray(data.answers_per_worker, dtype=np.int64)
    cols: dict[str, Any] = {"worker": data.worker_names, "answers": answers}
    missing = np.full(n_workers, np.nan)
    if result.has_confusion:
        from .spammers import channel_capacity, raykar_yu_score

        confusion = np.asarray(result.confusion, dtype=np.float64)
        recall = np.diagonal(confusion, axis1=1, axis2=2)
        worst = np.argmin(recall, axis=1)
        cols["accuracy"] = result.worker_accuracy
        cols.update({f"recall_{c}": recall[:, i] for i, c in enumerate(data.classes)})
        cols["worst_class"] = np.asarray(data.classes, dtype=object)[worst]
        cols["worst_recall"] = recall[np.arange(n_workers), worst]
        cols["capacity"] = channel_capacity(confusion)
        cols["raykar_yu"] = raykar_yu_score(confusion)
    else:
        accuracy = method_accuracy(result)
        cols["accuracy"] = missing if accuracy is None else accuracy
        cols.update({f"recall_{c}": missing for c in data.classes})
        cols["worst_class"] = np.full(n_workers, None, dtype=object)
        cols.update(worst_recall=missing, capacity=missing, raykar_yu=missing)
    eng = LocalEngine(data) if engine is None else engine
    (right, total), _ = eng.map_reduce(agreement_with_block, (np.asarray(result.labels, np.int64), False))
    cols["agreement"] = _share(right, total)
    flags = spammer_flags(data, result, scan, chance=chance)
    flagged = flags.flagged
    evidence = cast(AccuracyEvidence, flags.evidence)  # a fit is given, so the evidence is there
    cols["chance_accuracy"] = evidence.chance
    # The interval is an accuracy's only where the leave-one-out posterior is the model's own (posterior_form
    # "product"): mv's and wawa's vote shares by the others, and glad's and kos' in-sample posteriors, are pulled
    # towards chance or towards the worker, and covered the truth-measured accuracy of only 24-56% of the workers
    # of bluebird, rte and temp (ds: 90-95%), so those methods leave it out.
    calibrated = posterior_form(result) == "product"
    cols["accuracy_low"] = evidence.low if calibrated else missing
    cols["accuracy_high"] = evidence.high if calibrated else missing
    cols["spam_score"] = missing if scan is None else np.where(scan.skipped, np.nan, scan.score)
    cols["chance_bound"] = flags.bound
    cols["spammer"] = pd.array(flagged, dtype="boolean")
    unjudged = np.ones(n_workers, bool) if scan is None else np.asarray(scan.skipped, bool)
    cols["spammer"][unjudged & ~flagged] = pd.NA
    cols["flagged_by"] = flags.flagged_by
    if gold is not None:
        clamp = gold_clamp(data, gold)
        right_gold, n_gold = gold_counts(data, clamp)
        cols["gold_answers"] = n_gold
        cols["gold_accuracy"] = _share(right_gold, n_gold)
    own = () if result.has_confusion else method_columns(
        [n for n, v in result.worker_params.items() if np.ndim(v) == 1])
    cols.update({name: np.asarray(result.worker_params[name], dtype=np.float64) for name in own})
    return pd.DataFrame({name: _nullable(cols[name]) for name in report_columns(data.classes, gold is not None, own)})


def gold_counts(data: AnnotationSet, clamp: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per worker (n_workers,) int64: its answers equal to their task's gold class, and its answers on gold tasks.

    ``clamp``: the gold class per task, -1 where unknown (:func:`crowdagg.methods.blocks.gold_clamp`).
    O(n_answers) in numpy.
    """
    gold_of = np.asarray(clamp, dtype=np.int64)[data.task]
    on_gold = gold_of >= 0
    workers = data.worker[on_gold]
    n = np.bincount(workers, minlength=data.n_workers)
    right = np.bincount(workers[data.label[on_gold] == gold_of[on_gold]], minlength=data.n_workers)
    return right.astype(np.int64), n.astype(np.int64)


def pair_agreement(data: AnnotationSet, engine: Any = None, *, max_memory: MaxMemory = None) -> pd.DataFrame:
    """The sparse worker × worker agreement table: one row per pair of workers sharing a task.

    Parameters
    ----------
    data : AnnotationSet
    engine : engine of the block protocol, optional
        Over ``data`` (default ``LocalEngine(data)``).
    max_memory : int, float, str or None
        Limit for the co-occurrence kernel's up-front checks.

    Returns
    -------
    pandas.DataFrame
        Columns :data:`PAIR_COLUMNS`, one row per co-labelled pair, ``worker_a`` before ``worker_b`` in
        ``data.workers``' order, sorted by (worker_a, worker_b) in that order:

        * ``shared_tasks`` -- tasks both answered;
        * ``agreement`` -- p_o, the share of their answer pairs on those tasks that agree
          (``trace(J) / n`` for the pair's joint counts ``J[a, b]``, ``n = ΣJ``: the shared tasks, unless
          a worker answered a task more than once, when each pair of their answers counts);
        * ``chance_agreement`` -- p_e = Σ_c (row_c / n)(col_c / n), the agreement of two workers answering
          independently with these answer frequencies over the shared tasks;
        * ``kappa`` -- Cohen's kappa (p_o − p_e) / (1 − p_e), computed from the integer counts as
          (n·trace − Σ row·col) / (n² − Σ row·col); missing where p_e = 1 (both gave one and the same class
          on every shared task: no disagreement was possible).
    """
    import pandas as pd

    from ..kernels.cooc import co_occurrence

    stats = co_occurrence(LocalEngine(data) if engine is None else engine, max_memory=max_memory)
    joint = stats.joint
    n = joint.sum(axis=(1, 2))
    agree = np.trace(joint, axis1=1, axis2=2)
    chance = np.einsum("pa,pa->p", joint.sum(axis=2), joint.sum(axis=1))  # Σ row·col, exact integers
    n2 = n * n
    kappa = np.full(len(n), np.nan)
    open_ = n2 != chance
    kappa[open_] = (n[open_] * agree[open_] - chance[open_]) / (n2[open_] - chance[open_])
    names = data.worker_names
    return pd.DataFrame({
        "worker_a": names[stats.pairs[:, 0]] if len(n) else np.zeros(0, object),
        "worker_b": names[stats.pairs[:, 1]] if len(n) else np.zeros(0, object),
        "shared_tasks": np.asarray(stats.n_tasks, dtype=np.int64),
        "agreement": agree / n,
        "chance_agreement": chance / n2,
        "kappa": _nullable(kappa),
    })


def table_columns(frame: pd.DataFrame) -> dict[str, Any]:
    """A report's columns as the writers take them (:func:`crowdagg.io.render.render_chunks`): a column with
    missing numbers as :class:`~crowdagg.io.render.Missing`, a missing text as an empty one."""
    from ..io.render import Missing

    out: dict[str, Any] = {}
    for name in frame.columns:
        s = frame[name]
        na = s.isna().to_numpy()
        numpy_dtype = getattr(s.dtype, "numpy_dtype", None)
        if numpy_dtype is not None and numpy_dtype.kind in "fiub":
            values = s.to_numpy(dtype=numpy_dtype, na_value=0)
            out[str(name)] = Missing(values, ~na) if na.any() else values
        elif na.any():
            out[str(name)] = np.where(na, "", s.to_numpy(dtype=object)).astype(object)
        else:
            out[str(name)] = s.to_numpy()
    return out


#: Columns of the report that are not numbers (--sort's note on order).
_TEXT_COLUMNS = ("worker", "worst_class", "flagged_by")


def check_sort(column: str, classes: tuple[str, ...] | list[str] | None, gold: bool = True) -> tuple[str, bool]:
    """``--sort COLUMN``: ``(column, descending)`` for ``COLUMN`` or ``-COLUMN``, else a UsageError naming the
    valid columns.  ``classes`` None: the per-class ``recall_<class>`` columns are not known yet and any such name
    passes (checked again once they are)."""
    if not isinstance(column, str):  # sort_report(frame, None) raised AttributeError
        raise UsageError(f"--sort takes a column's name (COLUMN or -COLUMN), got {column!r}")
    name, descending = (column[1:], True) if column.startswith("-") else (column, False)
    valid = report_columns(list(classes or ()), gold)
    if name in valid or (classes is None and name.startswith("recall_") and len(name) > len("recall_")):
        return name, descending
    shown = [c for c in valid if not c.startswith("recall_")] + ["recall_<class>"]
    if classes is not None:
        shown[-1] = ", ".join(f"recall_{c}" for c in classes) if len(classes) <= 5 else "recall_<class>"
    raise UsageError(f"--sort {column}: no such column; the columns are {', '.join(shown)} (-COLUMN: descending)")


def sort_report(frame: pd.DataFrame, column: str) -> pd.DataFrame:
    """``frame`` ordered by ``column`` (``-column``: descending), missing cells last, ties in the input order
    (stable), its index renumbered.  A text column whose every cell is a number (workers ``39``, ``1005``; a
    worst_class of numeric classes) is ordered by value, as classes are, not as text (``1005`` before ``39``)."""
    import pandas as pd

    name, descending = check_sort(column, [c[len("recall_"):] for c in frame.columns if str(c).startswith("recall_")],
                                  "gold_answers" in frame.columns)
    if name not in frame.columns:
        raise UsageError(f"--sort {column}: the report has no column {name}")
    key = None
    values = frame[name]
    if not pd.api.types.is_numeric_dtype(values) and not pd.api.types.is_bool_dtype(values):
        numbers = pd.to_numeric(values, errors="coerce")
        if numbers.notna().sum() == values.notna().sum() > 0:  # every cell there is a number
            key = lambda _: numbers  # noqa: E731 - the values' numbers, in their place
    return frame.sort_values(name, ascending=not descending, kind="stable", na_position="last",
                             key=key).reset_index(drop=True)


#: The terminal table's width: it is never drawn narrower (rich would crop the numbers and drop the names).
TERMINAL_WIDTH = 80

#: The terminal table's columns: (header, report column(s)); the interval is one cell, the verdict another.
TERMINAL = (("worker", "worker"), ("answers", "answers"), ("accuracy", "accuracy"),
            ("95%\ninterval", "accuracy_low"), ("chance", "chance_accuracy"),
            ("agree", "agreement"), ("spam\nscore", "spam_score"), ("spammer", "flagged_by"))


def print_table(frame: pd.DataFrame, stream: Any, *, title: str = "workers", caption: str | None = None) -> None:
    """A report as a rich table that fits a terminal of 80 columns.

    The terminal view is the summary a person reads: worker, answers, the
    method's accuracy, the 95% interval on the share right
    (``accuracy_low``-``accuracy_high``, one cell), the share a spammer
    would get (``chance``), capacity, agreement with the consensus, the
    detector's score, and the verdict -- ``covariance``, ``chance`` or
    ``both`` when flagged, ``no`` when judged and kept, ``-`` when nobody
    judged the worker.  The recalls, worst class, capacity, Raykar--Yu
    score, chance bound and gold columns are left out (``caption`` says where they are);
    numbers have 3 decimals (2 in the interval).  A long worker name folds
    onto a second line rather than widening the table.  Names are drawn as
    plain text (:func:`~crowdagg.reports.terminal_text`), and a terminal under
    80 columns gets the 80-column table, wrapped by the terminal, rather than
    columns cropped to ``0.`` or dropped.
    """
    import pandas as pd
    from rich import box
    from rich.console import Console
    from rich.table import Table

    from . import terminal_text

    table = Table(title=title, caption=caption, box=box.SIMPLE_HEAD, pad_edge=False, padding=(0, 1, 0, 0))
    for header, name in TERMINAL:
        if name not in frame.columns:
            continue
        table.add_column(header, justify="left" if name in ("worker", "flagged_by") else "right",
                         overflow="fold", min_width=12 if name == "worker" else None, no_wrap=name != "worker")
    spammer = frame["spammer"]
    for i in range(len(frame)):
        cells = []
        for _, name in TERMINAL:
            if name not in frame.columns:
                continue
            value = frame[name].iloc[i]
            if name == "accuracy_low":
                high = frame["accuracy_high"].iloc[i]
                cells.append("-" if value is pd.NA or high is pd.NA else f"{float(value):.2f}-{float(high):.2f}")
            elif name == "flagged_by":
                cells.append(str(value) if value else ("-" if spammer.iloc[i] is pd.NA else "no"))
            else:
                cells.append(_cell(value))
        table.add_row(*map(terminal_text, cells))
    console = Console(file=stream)
    console.width = max(console.width, TERMINAL_WIDTH)
    console.print(table)


def _cell(value: Any) -> str:
    import pandas as pd

    if value is None or value is pd.NA or (isinstance(value, float) and value != value):
        return "-"
    if isinstance(value, (bool, np.bool_)):
        return "yes" if value else "no"
    if isinstance(value, (float, np.floating)):
        v = float(value)
        if abs(v) < 5e-4:
            return "0.000"  # not -0.000 for a capacity a rounding error below 0
        return f"{v:.3f}" if abs(v) < 1e4 else f"{v:.3g}"
    return str(value)


def _share(part: np.ndarray, whole: np.ndarray) -> np.ndarray:
    """``part / whole``, NaN (missing) where ``whole`` is 0."""
    whole = np.asarray(whole, dtype=np.float64)
    out = np.full(whole.shape, np.nan)
    np.divide(part, whole, out=out, where=whole > 0)
    return out


def _nullable(values: Any) -> Any:
    """A float column with NaN as pandas' nullable ``Float64`` (NaN -> NA); anything else as it is."""
    import pandas as pd

    if isinstance(values, np.ndarray) and values.dtype.kind == "f":
        return pd.array(values, dtype="Float64")  # NaN becomes NA: pandas' from-numpy rule
    return values


__all__ = ["method_columns", "ABOVE_CHANCE_FDR", "CHANCE_BITS", "CHANCE_Z", "CONFUSION_COLUMNS", "FLAGGED_BY", "INTERVAL_Z", "LEADING",
           "PAIR_COLUMNS", "AccuracyEvidence", "SpammerFlags", "accuracy_evidence", "benjamini_hochberg",
           "leave_one_out", "posterior_form", "LEAVE_OUT_FLOOR",
           "chance_bound", "gold_counts", "method_accuracy", "near_chance", "pair_agreement", "print_table",
           "report_columns", "check_sort", "sort_report", "spammer_flags", "symmetric_capacity", "table_columns", "wilson_interval", "worker_report"]
