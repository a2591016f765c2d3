r"""``auto``: a method for a crowd whose truth nobody has -- the candidates pooled by held-out answers.

Users cannot pick the best method per dataset: they have no truth.  What
they do have is more answers than any method needs to fit, so ``auto``
scores each candidate by how well it predicts answers it did not see, and
pools the candidates by those scores.

The procedure (Yao, Vehtari, Simpson & Gelman 2018, "stacking of predictive
distributions", doi:10.1214/17-BA1091, applied to hidden crowd answers):

1. **Folds of hidden answers.**  Each answer gets a uniform draw keyed on
   its task's and worker's *names* and the seed
   (:mod:`crowdagg.kernels.draws`: row order never changes it); fold
   ``f`` hides the answers whose draw lies in ``[f h, (f + 1) h)`` (``h`` =
   ``held_out``, 0.1; ``folds`` = 5, so half the answers are hidden once
   each).  One answer of each task, drawn alike, is never hidden, so every
   task keeps evidence in every fold.
2. **Fit.**  Every candidate is fitted on each fold's remaining answers
   and on all the answers, at its own defaults and the seed (gold, when
   the user gives it, is passed to the candidates that take it, as to any
   method): ``C (folds + 1)`` fits, run in parallel over the
   ``--threads`` (each fit then on one thread; the results are the same
   bits for any count, each fit being so).  With gold, a gold task's
   answers are never hidden and every candidate's fold posterior is
   clamped on the gold tasks before it is scored: the result clamps those
   tasks whichever candidate wins, so the scores compare the free tasks
   alone (a candidate told the truth would otherwise out-score one that
   takes no gold on the gold tasks' own answers).
3. **Score through one model.**  A posterior ``q_c`` from fold ``f``
   predicts a hidden answer ``(t, w, l)`` as :math:`p_c = \sum_k q_c(t, k)
   \theta_w[k, l]`, where :math:`\theta_w` is one Dawid--Skene M-step on
   ``q_c`` over the fold's answers with each row's Dirichlet posterior mean
   (``prior``: 4 on the diagonal, 1 off).  Scoring every candidate through
   the *same* worker model, not each through its own, compares their
   posteriors and nothing else: a vote has no worker model, and a method's
   own model rewards its own assumptions (measured before this module: the
   choice by each method's own likelihood reached .828, by the common model
   .8365).  The Dirichlet keeps a worker with few answers from predicting
   a hidden answer with probability 0.
4. **Pool (stacking).**  The weights :math:`w` on the simplex maximise
   :math:`\sum_{\text{hidden}} \log \sum_c w_c p_c` (concave in ``w``;
   L-BFGS on a softmax parametrisation).  Unlike choosing the best score
   (``pool=choose``), stacking gives weight to a candidate that predicts
   the answers the others get wrong, even when it is worse on average,
   and it degrades gracefully when two candidates are close (a choice
   flips on noise).  The result's posterior is :math:`\sum_c w_c q_c` of the
   fits on every answer -- a mixture of posteriors, which is also less
   over-confident than its sharpest member.
5. **Temperature** (``temperature=held-out``, off by default): one power
   ``τ`` on the pooled log-posterior, fitted to the same hidden answers.
   On the 14 real sets it moved the mean ECE from .100 to .094, and on
   simulated crowds, where the pool is already calibrated, from .025 to
   .027 (``benchmarks/README.md``), so it is offered, not forced -- one
   degree of freedom fewer.  Why hidden answers cannot do more: the
   over-confidence left is in errors the crowd shares, and answers that
   err together predict *each other* well -- the hidden answers reward the
   very confidence that such errors make wrong (a per-bin map from the
   hidden answers' agreement with the label to its accuracy did worse,
   .107).  Calibrating against the truth needs a model of the shared
   errors (EBCC's subtypes), not a better chooser.

Measured (``benchmarks/bench_auto.py``, ``benchmarks/README.md``): on the
14 real sets, mean accuracy .8405, .8433, .8431 at seeds 0, 1, 2 (ds
.8298, the best single method mf .8314, the per-dataset oracle .8544),
every set within a point of ds, mean ECE .095-.097 (ds .142); with eight
candidates, stacking .8384 where choosing the best score gave .8354.  On
simulated crowds where different models win, .9214 against the best
single method's .9210, ECE .023.

Degrees of freedom: ``folds`` and ``held_out`` (the issue's measured
protocol, 5 × 10%), the scoring prior (Dirichlet(4, 1), the issue's), and
the candidate list; nothing was tuned on a dataset's truth.  The
candidates by default follow a rule, not the benchmark: every categorical
aggregator that runs on a sparse crowd of any number of classes and gives
probabilities (``mv``, ``wawa``, ``wmv``, ``ds``, ``onecoin``, ``mf``,
``glad``, ``bp``, ``ebcc``, ``bwa``, ``minimax``); the moment methods
assume dense crowds, ``kos`` gives decisions only, on two classes.

Result: ``posteriors`` (the pooled, optionally tempered, posterior, gold
tasks clamped), labels (seeded ties), ``prior`` (the weighted candidates'
priors, tempered alike: what a task without answers gets);
``worker_params["confusion"]`` -- one M-step of the scoring model on the
pooled posterior over every answer (a worker without answers at chance);
``model_params``: ``candidates``, ``weights``, ``scores`` (each
candidate's mean held-out log-probability per hidden answer; -inf for a
candidate left out) and ``temperature``.  A candidate that refuses the
answers (a :class:`~crowdagg.errors.DataError`: ``kos`` on three classes)
is left out with a warning; a crowd with one answer a task, where nothing
can be hidden, gets the first candidate, with a warning.  Each
candidate's score and weight, and what ``auto`` did, are said as :class:`~crowdagg.errors.CrowdaggNote` lines (``Note:`` on
the CLI's stderr, silenced by ``--quiet``); the candidates' own warnings
on the fits on every answer are passed on for those that carry weight.
Cost: ``folds + 1`` fits of every candidate plus ``C (folds + 1)`` passes
over the answers for the scores; in memory, the posteriors kept, the
hidden answers' scores, and the largest candidate's fit once per fit run
at once (``--threads``), refused up front over ``max_memory``.  On an
error or Ctrl-C the fits in flight end at their next iteration (their
progress callback).  No saved worker model
(``--save-workers``): the pool has no counts of its own that a warm start
could add to every candidate's.
"""

from __future__ import annotations

import math
import threading
import warnings
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...core import threads
from ...data.annotations import AnnotationSet
from ...errors import CrowdaggNote, CrowdaggWarning, DataError, ResourceError, UsageError, param, warn
from ..base import Aggregator, FitContext, make_result
from ..blocks import TieBreaker, argmax_random_ties, clamp_posteriors
from ..result import AggregationResult

#: Bounds of the fitted temperature (a power on the log-posterior): past them the hidden answers say nothing more.
TEMPERATURE_BOUNDS = (0.05, 5.0)
#: A candidate under this weight is reported as left out of the pool.
WEIGHT_SHOWN = 0.005


# --------------------------------------------------------------------------- folds
def held_out_folds(data: AnnotationSet, folds: int, held_out: float, seed: int) -> np.ndarray:
    """Each answer's fold (0 .. folds - 1), or -1 for an answer never hidden; shape (n_answers,), int64.

    The draw of an answer is keyed on its task's and worker's names under
    the seed (row order, blocks and threads never change it); fold ``f``
    holds the draws in ``[f h, (f + 1) h)``.  In each task, the answer
    with the smallest second draw is never hidden.
    """
    from ...kernels.draws import GOLDEN, name_keys, seed_key, uniforms

    declared = {p.name: p for p in Auto.spec().params}  # the method's own bounds: a caller's 0 or NaN is refused
    folds, held_out, seed = (declared[name].check(value) for name, value in
                             (("folds", folds), ("held_out", held_out), ("seed", seed)))
    if folds * held_out > 1.0 + 1e-12:
        raise UsageError(f"{param('folds')} × {param('held_out')} must be at most 1 (each answer hidden at most "
                         f"once), got {folds} × {held_out:g}")
    key = seed_key(seed)
    tasks = name_keys(np.asarray(data.task_names, dtype=object), key)
    workers = name_keys(np.asarray(data.worker_names, dtype=object), key)
    with np.errstate(over="ignore"):  # uint64 arithmetic wraps, as splitmix64 means it to
        mixed = tasks[data.task] + workers[data.worker] * GOLDEN
    draws = uniforms(mixed, 2)
    u = draws[:, 0]
    fold = np.floor(u / held_out).astype(np.int64)
    fold[fold >= folds] = -1
    # The answer kept in every fold is drawn apart (the second draw): keeping the smallest u would take it from
    # fold 0 alone, and empty that fold on a crowd of few answers per task.
    keep = draws[:, 1]
    ptr = np.asarray(data.task_ptr)
    answered = np.flatnonzero(np.diff(ptr) > 0)
    if answered.size:
        lowest = np.full(data.n_tasks, np.inf)
        lowest[answered] = np.minimum.reduceat(keep, ptr[answered])
        fold[keep == lowest[data.task]] = -1
    return fold


def _why_none_hidden(data: AnnotationSet, held_out: float) -> str:
    """Why the folds hid no answer, for the warning: each task's kept answer (a worker's answers to a task share
    their draws, so a task answered by one worker keeps them all) or draws that fell outside every fold."""
    pairs = np.unique(data.task * np.int64(max(data.n_workers, 1)) + data.worker)
    if not pairs.size or np.bincount(pairs // max(data.n_workers, 1)).max() <= 1:
        return "every task has answers from one worker only, kept in every fold"
    return f"the draws fell outside every fold: raise {param('held_out')} from {held_out:g}"


# --------------------------------------------------------------------------- the scoring model
def scoring_confusion(data: AnnotationSet, post: np.ndarray, prior: Sequence[float],
                      engine: Any = None) -> np.ndarray:
    """One Dawid--Skene M-step on ``post``: each confusion row's Dirichlet posterior mean, ``[w, true, observed]``.

    ``post`` (n_tasks, K); ``prior`` = (on the diagonal, off it).  A
    worker without answers gets uniform rows (chance), as every method
    reports one.  Shape (n_workers, K, K), rows sum to 1.
    """
    from ...kernels.em import EMParams, em_block

    if engine is None:
        from ...engine import LocalEngine

        engine = LocalEngine(data)
    k = data.n_classes
    (counts_ot, _, _), _ = engine.map_reduce(em_block, EMParams(post=np.ascontiguousarray(post)))
    alpha = np.full((k, k), float(prior[1]))
    np.fill_diagonal(alpha, float(prior[0]))
    num = counts_ot.transpose(0, 2, 1) + alpha
    conf = num / num.sum(axis=2, keepdims=True)
    conf[np.asarray(data.answers_per_worker) == 0] = 1.0 / k
    return np.ascontiguousarray(conf)


def answer_probability(post: np.ndarray, conf: np.ndarray, task: np.ndarray, worker: np.ndarray,
                       label: np.ndarray) -> np.ndarray:
    r"""The probability of each answer ``(task, worker, label)`` under ``post`` and ``conf``: :math:`\sum_k q(t, k)
    \theta_w[k, l]`, shape (n,)."""
    return np.einsum("ik,ik->i", post[task], conf[worker, :, label])


# --------------------------------------------------------------------------- pooling
@dataclass(frozen=True)
class Stacking:
    """The stacking weights and how the optimiser ended (``success``, ``message``, for the fit's record)."""

    weights: np.ndarray
    success: bool
    message: str


def stacking_weights(prob: np.ndarray) -> Stacking:
    r"""Weights on the simplex maximising :math:`\sum_i \log \sum_c w_c\,p_{ic}` (``prob`` (n, C), positive).

    L-BFGS-B on the softmax parameters :math:`w = \mathrm{softmax}(v)`, from
    equal weights; the objective is concave in ``w``, so the optimum is the
    one optimum (up to candidates that predict identically).  One column:
    weight 1.
    """
    from scipy.optimize import minimize

    n, c = prob.shape
    if c == 1 or n == 0:
        return Stacking(np.full(c, 1.0 / c), True, "")
    scale = prob.max(axis=1, keepdims=True)  # each row's scale cancels in the argmax: keeps log() finite
    p = prob / scale

    def loss(v: np.ndarray) -> tuple[float, np.ndarray]:
        w = np.exp(v - v.max())
        w /= w.sum()
        mix = p @ w
        g_w = -(p / mix[:, None]).mean(axis=0)
        return float(-np.log(mix).mean()), w * (g_w - w @ g_w)

    res = minimize(loss, np.zeros(c), jac=True, method="L-BFGS-B", options={"maxiter": 1000, "gtol": 1e-10})
    w = np.exp(res.x - res.x.max())
    return Stacking(w / w.sum(), bool(res.success), str(res.message))


def tempered(post: np.ndarray, tau: float) -> np.ndarray:
    """Rows of ``post`` raised to the power ``tau`` and renormalised (shape kept; zeros stay zeros)."""
    with np.errstate(divide="ignore"):
        log = np.log(post)
    top = log.max(axis=1, keepdims=True)
    out = np.exp(tau * (log - top))
    return out / out.sum(axis=1, keepdims=True)


def held_out_temperature(folds: Sequence[tuple[np.ndarray, np.ndarray, tuple[np.ndarray, ...]]]) -> tuple[float, Any]:
    """The power τ on the pooled log-posterior that maximises the hidden answers' log-probability.

    ``folds``: per fold, the pooled posterior fitted without the fold, the
    scoring model's confusion on it, and the hidden answers' (task, worker,
    label) codes.  Bounded search on log τ in :data:`TEMPERATURE_BOUNDS`.
    """
    from scipy.optimize import minimize_scalar

    def loss(log_tau: float) -> float:
        tau = math.exp(log_tau)
        total = 0.0
        for post, conf, (t, w, lab) in folds:
            total -= float(np.log(answer_probability(tempered(post, tau), conf, t, w, lab)).sum())
        return total

    lo, hi = (math.log(b) for b in TEMPERATURE_BOUNDS)
    res = minimize_scalar(loss, bounds=(lo, hi), method="bounded", options={"xatol": 1e-4})
    return math.exp(float(res.x)), res


# --------------------------------------------------------------------------- running the candidates
class _Notes:
    """The warnings raised while the candidates run, by the job that raised them (each job names itself on its
    thread): ``warnings.catch_warnings`` is process-wide, so its record alone cannot say whose a warning was."""

    def __init__(self) -> None:
        self.local = threading.local()
        self.by_job: dict[Any, list[Warning]] = {}
        self.lock = threading.Lock()

    def show(self, message: Any, category: Any, filename: str, lineno: int, file: Any = None,
             line: Any = None) -> None:
        job = getattr(self.local, "job", None)
        with self.lock:
            self.by_job.setdefault(job, []).append(message if isinstance(message, Warning) else category(message))


class _Stopped(BaseException):
    """Raised by :func:`stopper`'s callback inside a fit still running once the run has failed or been interrupted
    (a ``BaseException``, as ``KeyboardInterrupt``: no candidate's ``except Exception`` takes it for its own)."""


def stopper(stop: threading.Event) -> Callable[[int, float], None]:
    """A progress callback for the candidates' fits that ends a fit at its next iteration once ``stop`` is set."""

    def halt(iteration: int, objective: float) -> None:
        if stop.is_set():
            raise _Stopped
    return halt


def run_jobs(jobs: Sequence[Callable[[], Any]], names: Sequence[Any], n_threads: int,
             stop: threading.Event | None = None) -> tuple[list[Any], _Notes]:
    """Run ``jobs`` on up to ``n_threads`` threads (each job's own fit then on one), their warnings recorded by
    ``names``; results in the jobs' order.

    On a job's error or an interrupt (Ctrl-C reaches the main thread only), ``stop`` is set before the pool is
    waited for: jobs whose fits take :func:`stopper`'s callback end at their next iteration, so the error is
    said, or the interrupt obeyed, without waiting for every fit in flight to converge.
    """
    notes = _Notes()
    results: list[Any] = [None] * len(jobs)
    used = max(1, min(n_threads, len(jobs)))

    def run(i: int) -> None:
        notes.local.job = names[i]
        if used > 1:
            with threads.use_threads(1):  # the candidates are the parallel work: one thread each
                results[i] = jobs[i]()
        else:
            results[i] = jobs[i]()

    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.showwarning = notes.show
        if used == 1:
            for i in range(len(jobs)):
                run(i)
        else:
            with ThreadPoolExecutor(max_workers=used, thread_name_prefix="crowdagg-auto") as pool:
                futures = [pool.submit(run, i) for i in range(len(jobs))]
                try:
                    # the first job to fail ends the wait (a wait in the jobs' order would sit out the fits before
                    # it); its error, as the candidate words it, is the fit's
                    wait(futures, return_when=FIRST_EXCEPTION)
                    failed = [f for f in futures if f.done() and not f.cancelled() and f.exception() is not None]
                    for f in failed + futures:
                        f.result()
                except BaseException:
                    if stop is not None:
                        stop.set()  # the fits in flight end at their next iteration
                    pool.shutdown(wait=True, cancel_futures=True)  # an error or Ctrl-C: no fit starts after it
                    raise
    return results, notes


# --------------------------------------------------------------------------- the method
class Auto(Aggregator):
    """The candidates pooled by how well each predicts held-out answers (see the module docstring)."""

    name = "auto"
    memory_advice = "name fewer candidates (the largest first), fewer folds, or fewer threads"

    def check_params(self) -> dict[str, Any]:
        checked = super().check_params()
        from ..registry import get, get_method

        for name in checked["candidates"]:
            spec = get(name)
            if name == self.name or spec.kind != "categorical":
                what = "itself" if name == self.name else f"a {spec.kind} method"
                raise UsageError(f"{param('candidates')} lists {name!r}, {what}: the candidates are categorical "
                                 "aggregators")
            flags: tuple[str, ...] = getattr(get_method(name), "flag_names", ())
            if flags:  # its verdict is on its own labels, not on a pool's (and its posteriors are mv's shares)
                raise UsageError(f"{param('candidates')} lists {name!r}, whose output flags each task "
                                 f"({', '.join(flags)}) by its own rule on its own labels, which a pooled result "
                                 f"cannot carry; run -m {name} on its own (its posteriors are the vote shares: "
                                 "mv is the candidate that gives them)")
        if checked["folds"] * checked["held_out"] > 1.0 + 1e-12:
            raise UsageError(f"{param('folds')} × {param('held_out')} must be at most 1 (each answer hidden at most "
                             f"once), got {checked['folds']} × {checked['held_out']:g}")
        return checked

    def memory_needed(self, data: AnnotationSet) -> tuple[float, str]:
        from ..registry import get

        checked = self.check_params()
        candidates = checked["candidates"]
        c = len(candidates)
        kept = c * (1 + (checked["folds"] if checked["temperature"] == "held-out" else 0))  # posteriors held at once
        post = 8.0 * data.n_tasks * data.n_classes
        conf = 8.0 * data.n_workers * data.n_classes**2
        need = kept * post + 4 * post + 2 * conf + 8.0 * c * data.n_answers
        # The candidates' own fits, as many at once as run_jobs runs: each is bounded by max_memory alone, so
        # without them here a candidate that needs more than auto's share would be refused minutes into the run.
        fits = {name: get(name).load()().memory_needed(data) for name in candidates}
        biggest = max(candidates, key=lambda name: fits[name][0])
        at_once = max(1, min(threads.count(), c * (checked["folds"] + 1)))
        need += at_once * fits[biggest][0]
        return need, (f"{kept} candidate posteriors of {data.n_tasks:,} tasks × {data.n_classes:,} classes, "
                      f"{data.n_answers:,} answers × {c} candidates' held-out scores, and {at_once} fit(s) at once "
                      f"of {biggest}, the largest candidate: {fits[biggest][1]}")

    def _fit(self, data: AnnotationSet, checked: FitContext, callback: Any) -> AggregationResult:
        candidates: tuple[str, ...] = checked["candidates"]
        folds, seed, prior = checked["folds"], checked["seed"], checked["prior"]
        fold_of = held_out_folds(data, folds, checked["held_out"], seed)
        if checked.clamp is not None:
            # A gold task's answers are never scored: the result clamps the task whoever predicts it, and a
            # candidate told its truth would otherwise out-score one that cannot take gold on those answers alone.
            fold_of[checked.clamp[data.task] >= 0] = -1
        subsets = [data.without_answers(fold_of == f) for f in range(folds)]
        hidden = [np.flatnonzero(fold_of == f) for f in range(folds)]
        n_hidden = int(sum(h.size for h in hidden))
        runs, notes = self._run_candidates(data, checked, subsets, hidden)
        alive = [c for c in candidates if runs[c] is not None]

        scores = np.full(len(candidates), -np.inf)
        weights = np.zeros(len(candidates))
        live = [candidates.index(c) for c in alive]
        if n_hidden:
            probs = np.column_stack([np.concatenate([p for p, _ in runs[c][0]]) for c in alive])
            with np.errstate(divide="ignore"):
                scores[live] = np.log(probs).mean(axis=0)
        if n_hidden == 0:
            warn(CrowdaggWarning(f"auto: no answer could be hidden ({_why_none_hidden(data, checked['held_out'])}): "
                                 f"the first candidate that ran, {alive[0]}, is the result"))
            weights[live[0]] = 1.0
        elif checked["pool"] == "choose":
            weights[live[int(np.argmax(scores[live]))]] = 1.0  # the first of equal scores: the listed order
        else:
            stack = stacking_weights(probs)
            checked.optimizer("the stacking weights").record(stack, 0)
            weights[live] = stack.weights
        post = np.zeros((data.n_tasks, data.n_classes))
        pooled_prior = np.zeros(data.n_classes)
        for c in alive:
            w = weights[candidates.index(c)]
            post += w * runs[c][1].posteriors
            pooled_prior += w * runs[c][1].prior

        tau = 1.0
        if checked["temperature"] == "held-out" and n_hidden:
            per_fold = []
            for f in range(folds):
                q = sum(weights[candidates.index(c)] * runs[c][0][f][1] for c in alive)
                h = hidden[f]
                per_fold.append((q, scoring_confusion(subsets[f], q, prior),
                                 (data.task[h], data.worker[h], data.label[h])))
            tau, res = held_out_temperature(per_fold)
            checked.optimizer("the temperature").record(res, 0)
            post = tempered(post, tau)
            pooled_prior = tempered(pooled_prior[None, :], tau)[0]
        post[np.asarray(data.answers_per_task) == 0] = pooled_prior
        clamp_posteriors(post, checked.clamp)
        labels = argmax_random_ties(post, TieBreaker(data.tasks, seed), atol=1e-12)
        conf = scoring_confusion(data, post, prior, checked.engine)

        self._say(candidates, scores, weights, tau, checked, n_hidden)
        for c, w in zip(candidates, weights):  # the warnings of the fits the result is made of
            if w >= WEIGHT_SHOWN:
                for message in notes.by_job.get((c, None), []):
                    if "have no answers" not in str(message):  # said once, by this fit's own check
                        warn(message)
        return make_result(
            self.name, data, post, labels, pooled_prior,
            worker_params={"confusion": conf},
            model_params={"candidates": candidates, "weights": weights, "scores": scores, "temperature": tau},
        )

    def _run_candidates(self, data: AnnotationSet, checked: FitContext, subsets: Sequence[AnnotationSet],
                        hidden: Sequence[np.ndarray]) -> tuple[dict[str, Any], _Notes]:
        """Every candidate fitted on each fold's answers (scored on its hidden ones) and on all of them.

        Returns, by candidate, ``([(p, q) per fold], full result)`` -- ``p`` the
        hidden answers' probabilities, ``q`` the fold's posterior when the
        temperature needs it -- or None for a candidate that refused these
        answers (a :class:`~crowdagg.errors.DataError` on any of its fits:
        said, and left out); when every one did, the first refusal is the
        fit's error.
        """
        from ..registry import get

        candidates: tuple[str, ...] = checked["candidates"]
        folds, seed, prior = checked["folds"], checked["seed"], checked["prior"]
        gold = None if self.gold is None else checked.clamp  # resolved once: the candidates do not warn again
        keep = checked["temperature"] == "held-out"

        stop = threading.Event()
        halt = stopper(stop)

        def fit(name: str, on: AnnotationSet) -> AggregationResult:
            spec = get(name)
            params: dict[str, Any] = {"seed": seed} if "seed" in spec.param_names else {}
            if gold is not None and spec.gold:
                params["gold"] = gold
            return spec.load()(**params).fit(on, max_memory=checked.max_memory,  # type: ignore[no-any-return]
                                             callback=halt)

        def refused(job: Callable[[], Any]) -> Callable[[], Any]:
            def run() -> Any:
                try:
                    return job()
                except ResourceError:
                    raise  # too big is the fit's error, not a candidate's refusal
                except DataError as exc:
                    return exc
            return run

        def fold_job(name: str, f: int) -> Callable[[], Any]:
            def job() -> tuple[np.ndarray, np.ndarray | None]:
                sub, h = subsets[f], hidden[f]
                # every candidate's gold tasks clamped alike (one that takes no gold included): the scoring model's
                # workers then learn from the same truths, and the scores differ by the free tasks only
                q = clamp_posteriors(fit(name, sub).posteriors.copy(), checked.clamp)
                p = answer_probability(q, scoring_confusion(sub, q, prior), data.task[h], data.worker[h],
                                       data.label[h])
                return p, (q if keep else None)
            return job

        def full_job(name: str) -> Callable[[], Any]:
            return lambda: fit(name, data)

        jobs = [refused(fold_job(c, f)) for c in candidates for f in range(folds)]
        jobs += [refused(full_job(c)) for c in candidates]
        names: list[Any] = [(c, f) for c in candidates for f in range(folds)] + [(c, None) for c in candidates]
        out, notes = run_jobs(jobs, names, threads.count(), stop)
        runs: dict[str, Any] = {}
        errors = []
        for i, c in enumerate(candidates):
            mine = out[i * folds:(i + 1) * folds] + [out[len(candidates) * folds + i]]
            error = next((o for o in mine if isinstance(o, DataError)), None)
            if error is None:
                runs[c] = (mine[:-1], mine[-1])
                continue
            runs[c] = None
            errors.append((c, error))
        if not any(r is not None for r in runs.values()):
            raise errors[0][1]  # alone: said once, as the error (a warning before it would say it twice)
        for c, error in errors:
            warn(CrowdaggWarning(f"auto: {c} is left out: {error}"))
        return runs, notes

    def _say(self, candidates: Sequence[str], scores: np.ndarray, weights: np.ndarray, tau: float,
             checked: FitContext, n_hidden: int) -> None:
        """One note per candidate (its score and weight), and one for what auto did."""
        for c, s, w in zip(candidates, scores, weights):
            if np.isfinite(s):  # (a candidate left out was said; with no hidden answer, no candidate has a score)
                warn(CrowdaggNote(f"auto: {c}: held-out log-likelihood {s:.4f} per answer, weight {w:.3f}"))
        kept = [(c, w) for c, w in zip(candidates, weights) if w >= WEIGHT_SHOWN]
        if len(kept) == 1:
            did = f"chose {kept[0][0]}"
        else:
            did = "pooled " + ", ".join(f"{c} {w:.2f}" for c, w in sorted(kept, key=lambda cw: -cw[1]))
        how = f"{checked['folds']} fold(s) of {checked['held_out']:g} of the answers, {n_hidden:,} hidden answers"
        if checked["temperature"] == "held-out":
            how += f", temperature {tau:.3f}"
        warn(CrowdaggNote(f"auto: {did} ({how})"))


__all__ = ["Auto", "Stacking", "answer_probability", "held_out_folds", "held_out_temperature", "run_jobs",
           "scoring_confusion", "stacking_weights", "tempered"]
