r"""Building blocks that methods of every family share: votes, ties, rows, one-coin workers, gold.

Low level: numpy, the vote/EM kernels and the engine only, no method, no registry.
A method module imports what it needs from here; nothing here knows which
method uses it.

* Rows: :func:`normalize_rows`, :func:`softmax_rows`, :func:`fill_empty_rows`
  (tasks without answers get the mean of the others).
* Votes: the vote family's block functions on the engine's protocol
  (:mod:`crowdagg.engine`: :func:`posterior_block`, :func:`agreement_block`,
  :func:`selective_revote_block`, :func:`revote_block`, :func:`agreement_with_block`; each block votes its
  own tasks and draws its own ties by task name, per-worker agreement and
  the prior's sums are reduced) and :func:`finish_votes` (posteriors,
  labels, prior; tasks without answers get the prior);
  :func:`soft_majority_vote` (vote shares), :func:`hard_majority_vote`
  (one-hot majority labels, ties drawn by :class:`TieBreaker`),
  :func:`argmax_random_ties`.
* Worker models: :func:`one_coin_matrices` and :func:`one_coin_accuracy`
  (an accuracy per worker, errors uniform: wmv, wawa, onecoin, simulations),
  and the Dawid--Skene M-step :func:`full_m_step` / :func:`prior_m_step`
  with :func:`posterior_confusion`, the confusion that posteriors imply.
  These stay here rather than in :mod:`crowdagg.methods.em.ds` because
  methods that are not EM use them: majority vote reports worker confusion
  through :func:`posterior_confusion`, and a saved worker model's
  parameters are re-derived from its counts with them.  The one-coin
  M-step belongs to one method and lives in
  :mod:`crowdagg.methods.em.onecoin`.
* The latent E-step: :func:`latent_posterior` (one pass of
  :func:`crowdagg.kernels.latent.latent_block`: each task's posterior over
  latent states from its own log prior and its answers through a
  ``[worker, observed, latent]`` log table, summed to classes through a
  map, with task-keyed draws and the M-step's counts on request) -- the
  Bayes rule of the trainers and the E-step of latent-class models.
* Gold: :func:`gold_clamp` (class index per task, -1 free) and
  :func:`clamp_posteriors` (one-hot rows for the clamped tasks).  The base
  resolves the clamp once per fit for every method whose declaration says
  ``gold=True`` (:attr:`crowdagg.methods.base.FitContext.clamp`); the
  method's E-step applies it with :func:`clamp_posteriors` (or passes it to
  a fused kernel that does the same).

Array conventions: posteriors (n_tasks, K); confusion ``[w, true,
observed]`` (n_workers, K, K), or ``conf_ot`` ``[w, observed, true]`` in the
EM kernels' layout; accuracies (n_workers,).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..core.checks import check_index_array, check_task_mapping
from ..data.annotations import AnnotationSet, check_annotations
from ..errors import CrowdaggWarning, DataError, UsageError, param, warn

#: Floor on confusion entries before taking logs (as crowd-kit clips at 1e-10).
PROB_FLOOR = 1e-10


# --------------------------------------------------------------------------- rows
def normalize_rows(scores: np.ndarray) -> np.ndarray:
    """Rows divided by their sums, shape kept; an all-zero row stays zero."""
    total = scores.sum(axis=1, keepdims=True)
    return scores / np.where(total > 0, total, 1.0)


def softmax_rows(log_scores: np.ndarray) -> np.ndarray:
    """Row-wise softmax of (n, K) scores, max-shifted (``log_scores`` is not changed)."""
    z = log_scores - log_scores.max(axis=1, keepdims=True)
    np.exp(z, out=z)
    return normalize_rows(z)


def fill_empty_rows(post: np.ndarray, empty: np.ndarray) -> np.ndarray:
    """The rows ``empty`` (tasks without answers, or without any vote weight) get the mean of the other rows.

    That mean is the class prior the vote-based methods report; it is
    returned, shape (K,) (uniform when no row is left).  ``post`` is
    changed in place.
    """
    k = post.shape[1]
    some = empty.any()
    # (no empty row and post C-contiguous: the mean of post itself, the same bits as of its copy post[~empty] -- the
    # same values in the same layout -- without the copy)
    rows = post if not some and post.flags.c_contiguous else post[~empty]
    prior = rows.mean(axis=0) if not empty.all() else np.full(k, 1.0 / k)
    if some:
        post[empty] = prior
    return prior


# --------------------------------------------------------------------------- ties
class TieBreaker:
    """Seeded tie-break draws keyed on the task's *name* and the class.

    A task gets the same draw wherever it sits in the input (row order never
    changes a label), the same on every round of an iterative method, and
    on every machine: the key is SipHash-2-4 of the name's UTF-8 bytes under
    a key made from the seed (``pandas.util.hash_array``), mixed with the
    class index by splitmix64 -- the stream of :mod:`crowdagg.kernels.draws`,
    which the latent E-step's draws read too.
    """

    def __init__(self, task_names: Any, seed: int, offset: int = 0) -> None:
        from ..kernels.draws import seed_key

        self.task_names = task_names
        self.key = seed_key(seed)
        self.offset = int(offset)  # row r is task_names[offset + r]: a block's rows in its partition's names

    def keys(self, rows: np.ndarray) -> np.ndarray:
        """The tasks' 64-bit keys under the seed (SipHash-2-4 of their names), shape (len(rows),), uint64."""
        from ..kernels.draws import name_keys

        rows = np.asarray(rows, dtype=np.int64)
        return name_keys(self.task_names[rows + self.offset if self.offset else rows], self.key)

    def draws(self, rows: np.ndarray, n_classes: int) -> np.ndarray:
        """Uniform draws in [0, 1), shape (len(rows), n_classes)."""
        from ..kernels.draws import uniforms

        return uniforms(self.keys(rows), n_classes)


def argmax_random_ties(scores: np.ndarray, ties: TieBreaker, atol: float = 0.0) -> np.ndarray:
    """Row-wise argmax, ties (within ``atol`` of the maximum) broken by ``ties``' seeded draws.

    shape (n, K) -> (n,) int64.  Draws are made only for the tied rows.
    """
    n, k = scores.shape
    labels = scores.argmax(axis=1).astype(np.int64)
    if k == 1 or n == 0:
        return labels
    top = scores[np.arange(n), labels]
    near = scores >= (top - atol)[:, None]
    tied = np.flatnonzero(np.count_nonzero(near, axis=1) > 1)
    if tied.size:
        draw = ties.draws(tied, k)
        draw[~near[tied]] = -1.0
        labels[tied] = draw.argmax(axis=1)
    return labels


# --------------------------------------------------------------------------- votes
# The vote family's block functions (:mod:`crowdagg.engine`'s protocol: ``fn(part, b, params, keep) -> (sums,
# out)``, module-level so that a distributed engine ships them by reference).  A block votes its own tasks
# (:func:`crowdagg.kernels.votes._block_votes`), draws its own ties (keyed by the task's name, as the whole-array
# draw was: the same labels), and sends dense per-worker sums and per-class totals up the engine's tree.

#: A vote's rows: the vote shares (``normalize_rows``), their softmax (log-odds scores), or the raw counts.
SHARES, SOFTMAX, COUNTS = "shares", "softmax", "counts"


@dataclass(frozen=True)
class Vote:
    """One vote over the answers, and how a block turns it into labels.

    weight : ndarray (n_workers,) or None
        Each worker's vote weight (None: one vote per answer).
    seed : int
        The tie draws' seed (:class:`TieBreaker`, keyed by the task's name).
    atol : float
        Scores within ``atol`` of a row's maximum tie (:func:`argmax_random_ties`).
    on_shares : bool
        Labels drawn on the vote shares (True) or on the raw weighted votes.
    """

    weight: np.ndarray | None = None
    seed: int = 0
    atol: float = 0.0
    on_shares: bool = True

    def __post_init__(self) -> None:
        if self.weight is not None:  # once, here: the blocks read it as float64 (its length checked by each)
            from ..kernels.validate import as_float_array

            object.__setattr__(self, "weight", as_float_array(self.weight, "weight", 1))


def _block(part: Any, b: int, weight: np.ndarray | None = None) -> tuple[int, int]:
    """Block ``b``'s task range once the partition is checked (:func:`crowdagg.kernels.validate.check_part`, once
    per partition) and ``weight`` fits its workers: the vote kernels then index nothing outside an array."""
    from ..kernels.validate import check_block, check_part

    check_part(part)
    b = check_block(part, b)
    if weight is not None and (not isinstance(weight, np.ndarray) or weight.shape != (part.n_workers,)):
        raise DataError(f"the vote weights have shape {np.shape(weight)}, the data has {part.n_workers:,} workers")
    return part.tasks_of(b)


def block_votes(part: Any, b: int, weight: np.ndarray | None) -> np.ndarray:
    """Block ``b``'s (weighted) votes per task and class, shape (its tasks, K), fresh."""
    from ..kernels.votes import _block_votes

    t0, t1 = _block(part, b, weight)
    w = _NO_WEIGHT if weight is None else weight
    return _block_votes(part.task_ptr, part.worker, part.label, t0, t1, w, weight is not None, part.n_classes)


_NO_WEIGHT = np.zeros(0)


def block_labels(part: Any, b: int, vote: Vote) -> np.ndarray:
    """Block ``b``'s labels (its tasks,) under ``vote``, ties drawn by task name: :func:`argmax_random_ties` of
    its votes (or vote shares), without the votes table where the labels do not need the shares.

    Unweighted shares tie exactly where the counts tie (``c / n`` is
    strictly monotone in the count ``c`` for any ``n`` below 2⁵²), so with
    ``atol = 0`` their labels are the counts' and the fused kernel
    (:func:`crowdagg.kernels.votes._block_vote_labels`) draws them; weighted
    shares go through the table.
    """
    from ..kernels.votes import _block_argmax, _block_vote_labels

    t0, t1 = _block(part, b, vote.weight)
    if vote.on_shares and (vote.weight is not None or vote.atol != 0.0):
        labels, tied, near = _block_argmax(normalize_rows(block_votes(part, b, vote.weight)), vote.atol)
    else:
        w = _NO_WEIGHT if vote.weight is None else vote.weight
        labels, tied, near = _block_vote_labels(part.task_ptr, part.worker, part.label, t0, t1, w,
                                                vote.weight is not None, part.n_classes, vote.atol)
    return draw_ties(labels, tied, near, TieBreaker(part.task_names, vote.seed, t0))


def draw_ties(labels: np.ndarray, tied: np.ndarray, near: np.ndarray, ties: TieBreaker) -> np.ndarray:
    """``labels`` with its ``tied`` rows (their ``near`` masks, (n_tied, K)) drawn by ``ties``: the end of
    :func:`argmax_random_ties`, after a kernel found the maxima.  ``labels`` is changed in place and returned."""
    if tied.size:
        draw = ties.draws(tied, near.shape[1])
        draw[~near] = -1.0
        labels[tied] = draw.argmax(axis=1)
    return labels


def block_agreement(part: Any, b: int, labels: np.ndarray, once: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Per worker (n_workers,): block ``b``'s answers equal to ``labels`` (its tasks,) of their task, and answers."""
    from ..kernels.votes import _block_agreement

    t0, t1 = _block(part, b)
    if labels.shape != (t1 - t0,):
        raise DataError(f"{labels.shape[0]:,} labels for the {t1 - t0:,} tasks of block {b}")
    return _block_agreement(part.task_ptr, part.worker, part.label, t0, t1, labels, part.n_workers, once)


def agreement_block(part: Any, b: int, vote: Vote, keep: bool) -> tuple[Any, Any]:
    """Block function: the labels of ``vote``, and per worker (agreeing answers, answers) (n_workers,) each.

    Kept: the labels.  (Wawa's skills, wmv's first weights.)
    """
    labels = block_labels(part, b, vote)
    return block_agreement(part, b, labels), (labels if keep else None)


@dataclass(frozen=True, eq=False)
class Revote:
    """A weighted vote over some tasks only (:func:`selective_revote_block`): the vote, and per task over all
    tasks (n_tasks,) each -- whether to vote it again (``select``), its current label (``labels``, -1: none yet) and
    margin over its runner-up (``margins``)."""

    vote: Vote
    select: np.ndarray
    labels: np.ndarray
    margins: np.ndarray

    def __post_init__(self) -> None:
        # once, here: the kernel reads the three by row without bounds checks (a short array read past its end)
        from ..kernels.validate import as_code_array, as_float_array

        if not isinstance(self.vote, Vote):
            raise UsageError(f"Revote takes a Vote, got {type(self.vote).__name__}")
        select = np.asarray(self.select)
        if select.ndim != 1 or select.dtype != np.bool_:
            raise DataError(f"select must be a 1-D boolean array, got {select.dtype} of shape {select.shape}")
        labels = as_code_array(self.labels, "labels")
        margins = as_float_array(self.margins, "margins", 1)
        if not select.shape == labels.shape == margins.shape:
            raise DataError(f"select, labels and margins have {select.size:,}, {labels.size:,} and {margins.size:,} "
                            "entries: one each per task")
        if labels.size and int(labels.min()) < -1:
            raise DataError(f"labels holds {int(labels.min())}: a class code, or -1 for none yet")
        object.__setattr__(self, "select", np.ascontiguousarray(select))
        object.__setattr__(self, "labels", np.ascontiguousarray(labels, dtype=np.int64))
        object.__setattr__(self, "margins", margins)


def selective_revote_block(part: Any, b: int, p: Revote, keep: bool) -> tuple[Any, Any]:
    """Block function: ``p.vote`` over the block's ``p.select``-ed tasks only (their weighted votes; ties within
    ``p.vote.atol`` drawn by task name), each one's new label and margin, and how the new labels move each worker's
    agreeing answers (a repeated identical answer once: crowd-kit's ``get_accuracy``).  Sums: ``(change of the
    agreeing answers (n_workers,), labels changed)``; kept: ``(labels, margins)`` of the block's tasks.  One read
    of the selected tasks' answers (:func:`crowdagg.kernels.votes._block_revote`), a second of the tied ones' once
    drawn.  (zbs' iteration.)"""
    from ..kernels.votes import _block_drawn_change, _block_revote

    if not isinstance(p, Revote):
        raise UsageError(f"selective_revote_block takes a Revote, got {type(p).__name__}")
    vote = p.vote
    t0, t1 = _block(part, b, vote.weight)
    if p.select.shape[0] < part.first_task + part.n_tasks:
        raise DataError(f"select, labels and margins have {p.select.shape[0]:,} entries, the data has "
                        f"{part.first_task + part.n_tasks:,} tasks")
    weight = np.ones(part.n_workers) if vote.weight is None else vote.weight
    rows = slice(t0, t1)
    select = np.ascontiguousarray(part.task_rows(p.select)[rows], dtype=np.bool_)
    old = np.ascontiguousarray(part.task_rows(p.labels)[rows], dtype=np.int64)
    margins = np.ascontiguousarray(part.task_rows(p.margins)[rows], dtype=np.float64)
    if old.size and int(old.max()) >= part.n_classes:
        raise DataError(f"labels holds {int(old.max())}, the data has {part.n_classes} classes")
    labels, margins, tied, near, right, changed = _block_revote(
        part.task_ptr, part.worker, part.label, t0, t1, weight, part.n_classes, vote.atol, select, old, margins,
        part.n_workers)
    if tied.size:
        drawn = draw_ties(labels.copy(), tied, near, TieBreaker(part.task_names, vote.seed, t0))[tied]
        right += _block_drawn_change(part.task_ptr, part.worker, part.label, t0, tied, old[tied], drawn,
                                     part.n_workers)
        changed += int(np.count_nonzero(drawn != old[tied]))
        labels[tied] = drawn
    return (right, float(changed)), ((labels, margins) if keep else None)


def revote_block(part: Any, b: int, votes: tuple[Vote, Vote], keep: bool) -> tuple[Any, Any]:
    """Block function of an iterative weighted vote: the labels of ``votes[1]``, how many differ from
    ``votes[0]``'s (recomputed here from the previous weights: no per-task state crosses iterations), and per
    worker the answers agreeing with the new labels (n_workers,).  Sums ``(agreeing, changed)``; kept: the labels."""
    before = block_labels(part, b, votes[0])
    after = block_labels(part, b, votes[1])
    changed = float(np.count_nonzero(after != before))
    return (block_agreement(part, b, after)[0], changed), (after if keep else None)


def agreement_with_block(part: Any, b: int, p: tuple[np.ndarray, bool], keep: bool) -> tuple[Any, Any]:
    """Block function: per worker (n_workers,), the answers equal to ``p[0]`` (a label per task, global) of their
    task, and the answers; ``p[1]``: a repeated identical answer counts once (crowd-kit's ``get_accuracy``).  A task
    whose label is negative is left out of both (twothird: only its accepted tasks)."""
    from ..kernels.validate import as_code_array

    labels, once = p
    t0, t1 = _block(part, b)
    labels = as_code_array(labels, "labels")
    if labels.shape[0] < part.first_task + part.n_tasks:
        raise DataError(f"{labels.shape[0]:,} labels for the data's {part.first_task + part.n_tasks:,} tasks")
    return block_agreement(part, b, part.task_rows(labels)[t0:t1], bool(once)), None


@dataclass(frozen=True)
class Posterior:
    """How a block turns a vote into posteriors and labels (:func:`posterior_block`).

    vote : Vote
        The vote (weights, the ties' seed and tolerance, labels on shares or scores).
    rows : str
        :data:`SHARES` (vote shares), :data:`SOFTMAX` (softmax of the weighted votes) or :data:`COUNTS`.
    empty_by_weight : bool
        A task is *empty* (its row becomes the prior) when it has no vote weight (True) or no answers (False).
    empty_atol : float
        The tie tolerance of an empty task's label, drawn on the prior.
    labels : bool
        Whether to draw labels at all (the vote shares alone need none).
    """

    vote: Vote = Vote()
    rows: str = SHARES
    empty_by_weight: bool = False
    empty_atol: float = 0.0
    labels: bool = True


def posterior_block(part: Any, b: int, p: Posterior, keep: bool) -> tuple[Any, Any]:
    """Block function: a vote's posteriors and labels for the block's tasks.

    Sums: (Σ of the non-empty rows (K,), their count) -- the class prior
    the vote-based methods report is their mean (:func:`finish_votes`),
    summed in row order as ``post[~empty].mean(axis=0)`` sums (one block:
    the same bits).  Kept: ``(post, empty)`` without labels, else
    ``(post, labels, empty, draws)``: posteriors
    (its tasks, K) with empty rows 0 (``SHARES``) or as computed, labels of
    the non-empty tasks, the empty mask, and the tie draws of the empty
    tasks (n_empty, K), made here where the names are, so that the prior's
    label for them is drawn as the whole-array draw drew it.
    """
    votes = block_votes(part, b, p.vote.weight)
    t0, t1 = part.tasks_of(b)
    if p.rows == SHARES:
        post = normalize_rows(votes)
    elif p.rows == SOFTMAX:
        post = softmax_rows(votes)
    else:
        post = votes
    if p.empty_by_weight:
        empty = post.sum(axis=1) == 0
    else:
        empty = part.task_ptr[t0 + 1:t1 + 1] == part.task_ptr[t0:t1]
    full = post[~empty] if empty.any() else post
    sums = (full.sum(axis=0), float(full.shape[0]))
    if not keep:
        return sums, None
    if not p.labels:
        return sums, (post, empty)
    from ..kernels.votes import _block_argmax

    ties = TieBreaker(part.task_names, p.vote.seed, t0)
    labels, tied, near = _block_argmax(post if p.vote.on_shares else votes, p.vote.atol)
    labels = draw_ties(labels, tied, near, ties)
    rows = np.flatnonzero(empty)
    k = part.n_classes
    draws = ties.draws(rows, k) if rows.size and k > 1 else np.zeros((rows.size, k))
    return sums, (post, labels, empty, draws)


def finish_votes(engine: Any, p: Posterior, n_classes: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A vote's posteriors (n_tasks, K), labels (n_tasks,) and class prior (K,) over ``engine``'s blocks.

    One pass of :func:`posterior_block`; then the empty tasks (no answers,
    or no vote weight under ``p.empty_by_weight``) get the prior -- the mean
    of the other rows (uniform when none is left) -- and a label drawn on
    it, as :func:`fill_empty_rows` and :func:`argmax_random_ties` over the
    whole array gave them.
    """
    if not p.labels:
        raise ValueError("finish_votes draws labels: give a Posterior with labels=True")
    (row_sum, n_full), outs = engine.map_reduce(posterior_block, p, keep=True)
    post, labels, empty, draws = engine.gather(outs)
    prior = row_sum / n_full if n_full > 0 else np.full(n_classes, 1.0 / n_classes)
    if empty.any():
        post[empty] = prior
        labels[empty] = _labels_on(prior, draws, p.empty_atol)
    return post, labels, prior


def _labels_on(row: np.ndarray, draws: np.ndarray, atol: float) -> np.ndarray:
    """:func:`argmax_random_ties` of ``row`` repeated once per row of ``draws`` (n, K), those rows' draws given."""
    label = int(row.argmax())
    near = row >= row[label] - atol
    if row.shape[0] == 1 or np.count_nonzero(near) < 2:
        return np.full(draws.shape[0], label, dtype=np.int64)
    masked = np.where(near[None, :], draws, -1.0)
    return masked.argmax(axis=1).astype(np.int64)


def check_engine_data(engine: Any, data: AnnotationSet, whose: str = "the data's") -> None:
    """A :class:`~crowdagg.errors.UsageError` when ``engine`` runs over an annotation set of another shape than
    ``data``: its blocks hold that set's answers, and a block function reads the answers from the engine, the
    per-task rows from ``data`` (a training split's E-step on the whole set's engine read the held-out answers).
    An engine that does not say its data (a Dask engine) is trusted."""
    own = getattr(engine, "data", None)
    if isinstance(own, AnnotationSet) and own is not data:
        def shape(d: AnnotationSet) -> str:
            return f"{d.n_tasks:,} tasks, {d.n_workers:,} workers, {d.n_classes:,} classes, {d.n_answers:,} answers"

        if shape(own) != shape(data):
            raise UsageError(f"{param('engine')} runs over other data ({shape(own)}) than {whose} ({shape(data)})")


def local_engine(data: AnnotationSet, engine: Any = None, whose: str = "the data's") -> Any:
    """``engine`` (an engine object, checked to run over ``data``: :func:`check_engine_data`), or the local engine
    over ``data`` for None or ``"local"`` (helpers called outside a fit; a fit's engine).  Anything else -- a name,
    an object without ``map_reduce`` -- is a :class:`~crowdagg.errors.UsageError`, not an AttributeError at the
    first block."""
    if engine is None or (isinstance(engine, str) and engine == "local"):
        from ..engine import LocalEngine

        return LocalEngine(data)
    if isinstance(engine, str) or not callable(getattr(engine, "map_reduce", None)):
        raise UsageError(f"{param('engine')} must be 'local' or an engine object (with map_reduce), got {engine!r}")
    check_engine_data(engine, data, whose)
    return engine


def soft_majority_vote(data: AnnotationSet, engine: Any = None) -> np.ndarray:
    """Vote shares per task, shape (n_tasks, n_classes); rows of tasks without answers are 0."""
    engine = local_engine(data, engine)
    _, outs = engine.map_reduce(posterior_block, Posterior(labels=False), keep=True)
    return engine.gather(outs)[0]


def hard_majority_vote(data: AnnotationSet, seed: int, engine: Any = None) -> np.ndarray:
    """One-hot majority labels per task, shape (n_tasks, n_classes); rows of tasks without answers are 0.

    Ties are broken as :class:`~crowdagg.methods.votes.mv.MajorityVote`
    breaks them (the seeded draw of :class:`TieBreaker`), so the ones sit
    on ``mv``'s labels.
    """
    engine = local_engine(data, engine)
    _, outs = engine.map_reduce(posterior_block, Posterior(Vote(seed=seed)), keep=True)
    shares, labels, empty, _ = engine.gather(outs)
    answered = np.flatnonzero(~empty)
    out = np.zeros_like(shares)
    out[answered, labels[answered]] = 1.0
    return out


# --------------------------------------------------------------------------- worker models
def one_coin_accuracy(correct: np.ndarray, answers: np.ndarray, smoothing: float, k: int) -> np.ndarray:
    """Each worker's one-coin accuracy from its expected correct answers and its answers, shape (n_workers,).

    ``(correct + s/K) / (answers + s)``, exactly 1/K without answers,
    clipped to [1e-10, 1 - 1e-10] so that the E-step's logs stay finite.
    """
    with np.errstate(invalid="ignore", divide="ignore"):
        p = (correct + smoothing / k) / (answers + smoothing)
    p = np.where(answers > 0, p, 1.0 / k)
    return np.clip(p, PROB_FLOOR, 1.0 - PROB_FLOOR)


def one_coin_matrices(p: np.ndarray, k: int) -> np.ndarray:
    """Confusion matrices of one-coin workers with accuracy ``p`` (shape (n_workers,)).

    Returns shape (n_workers, K, K); diagonal p, off-diagonal (1 - p)/(K - 1).
    The matrices are symmetric, so they read the same in either layout.
    """
    p = np.asarray(p, dtype=np.float64)
    if k == 1:
        return np.ones((p.shape[0], 1, 1))
    off = (1.0 - p) / (k - 1)
    mats = np.repeat(off[:, None, None], k, axis=1).repeat(k, axis=2)
    idx = np.arange(k)
    mats[:, idx, idx] = p[:, None]
    return mats


def prior_m_step(class_tot: np.ndarray, smoothing: float) -> np.ndarray:
    """The class prior from expected class totals (K,): ``max(tot + s, 1e-10)`` normalised."""
    prior = np.maximum(class_tot + smoothing, PROB_FLOOR)
    return prior / prior.sum() if prior.shape[0] else prior


def full_m_step(counts_ot: np.ndarray, class_tot: np.ndarray, smoothing: float) -> tuple[np.ndarray, np.ndarray]:
    """Dawid--Skene M-step with additive (Dirichlet) smoothing.

    Parameters
    ----------
    counts_ot : (n_workers, K_observed, K_true) expected answer counts.
    class_tot : (K,) expected class totals.
    smoothing : pseudo-count added to every cell (Dirichlet alpha - 1).

    Returns
    -------
    prior : (K,)
    conf_ot : (n_workers, K_observed, K_true), columns sum to 1.  A worker
        without answers gets uniform columns (1/K: no evidence either way).
    """
    num = np.maximum(counts_ot + smoothing, PROB_FLOOR)
    conf_ot = num / num.sum(axis=1, keepdims=True)
    return prior_m_step(class_tot, smoothing), conf_ot


def posterior_confusion(
    data: AnnotationSet, post: np.ndarray, smoothing: float, engine: Any = None
) -> tuple[np.ndarray, np.ndarray]:
    """Prior and per-worker confusion (``[w, true, observed]``) implied by posteriors.

    One Dawid--Skene M-step: the worker confusion a method that does not
    model it reports (mv).  ``post`` (n_tasks, K) over all tasks; its
    statistics are one pass of :func:`~crowdagg.kernels.em.em_block` over
    ``engine`` (default a :class:`~crowdagg.engine.LocalEngine` over
    ``data``).
    """
    from ..kernels.em import EMParams, em_block

    if np.shape(post) != (data.n_tasks, data.n_classes):
        raise DataError(f"post has shape {np.shape(post)}, the data's tasks × classes are "
                        f"{(data.n_tasks, data.n_classes)}")
    if engine is None:
        from ..engine import LocalEngine

        engine = LocalEngine(data)
    (counts, tot, _), _ = engine.map_reduce(em_block, EMParams(post=post))
    prior, conf_ot = full_m_step(counts, tot, smoothing)
    return prior, np.ascontiguousarray(conf_ot.transpose(0, 2, 1))


# --------------------------------------------------------------------------- the latent E-step
@dataclass(frozen=True, eq=False)
class LatentPosterior:
    """What :func:`latent_posterior` gives: the posteriors of one latent E-step and what was asked beside them.

    Attributes
    ----------
    latent : ndarray (n_tasks, K_latent)
        Each task's posterior over the latent states; rows sum to 1.
    classes : ndarray (n_tasks, K)
        The class posterior: ``latent`` summed through ``latent_class``
        (``latent`` itself, the same array, under the identity map).
    loglik : float
        Σ_n log Σ_z exp(log_prior[n, z] + Σ_answers log_table[w, l, z]): the
        evidence of the answers under the tasks' priors.
    draws : ndarray of int64 (n_tasks,) or None
        One latent state per task drawn from ``latent`` (with ``draw_seed``).
    counts : ndarray (n_workers, K, K_latent) or None
        Σ over the answers (w, l) of their task's posterior (or drawn state,
        one-hot) at ``[w, l, :]``: the statistics of a confusion M-step in
        the ``[worker, observed, latent]`` layout (with ``counts``).
    latent_tot : ndarray (K_latent,) or None
        The posteriors' (or draws') column sums (with ``counts``).
    entropy : float or None
        Σ_n Σ_z f log f, f = max(q_n(z), floor) (with ``entropy_floor``).
    """

    latent: np.ndarray
    classes: np.ndarray
    loglik: float
    draws: np.ndarray | None = None
    counts: np.ndarray | None = None
    latent_tot: np.ndarray | None = None
    entropy: float | None = None


def latent_memory(n_tasks: int, n_workers: int, n_classes: int, n_latent: int, *, mapped: bool, draws: bool,
                  counts: bool, n_answers: int) -> float:
    """Bytes :func:`latent_posterior` allocates: the blocks' rows and their joined copy, the task keys, the
    converted prior and table (a broadcast ``[worker, observed, latent]`` table of 480 MB was copied under a
    300 MB limit), and, with counts, the reduction's live accumulators (as :func:`~crowdagg.methods.em.ds.em_memory`
    counts them: per thread the tree's stack of depth + 2, each workers × K × K_latent floats)."""
    from ..core import threads
    from ..engine.grid import answers_per_block, block_count
    from ..engine.tree import depth

    per_task = 8.0 * (n_latent + (n_classes if mapped else 0) + (1 if draws else 0))
    need = 2 * per_task * n_tasks + 8.0 * n_tasks * n_latent + (8.0 * n_tasks if draws else 0.0)
    need += 8.0 * n_workers * n_classes * n_latent
    if counts:
        n_blocks = block_count(n_answers, max(n_tasks, 1), answers_per_block(n_workers, n_classes))
        live = min(threads.count(), n_blocks) * (depth(n_blocks) + 2)
        need += 8.0 * (live + 1) * (n_workers * n_classes * n_latent + n_latent)
    return need


def latent_posterior(
    data: AnnotationSet, log_table: np.ndarray, log_prior: np.ndarray, latent_class: np.ndarray | None = None, *,
    engine: Any = None, draw_seed: int | None = None, draw_round: int = 0, counts: str | None = None,
    max_memory: Any = None, clamp: np.ndarray | None = None, entropy_floor: float | None = None,
) -> LatentPosterior:
    r"""One latent-class E-step over ``data``'s answers, on ``engine``'s blocks.

    .. math:: \log q_n(z) = \mathrm{log\_prior}[n, z] + \sum_{(w, l) \in n} \mathrm{log\_table}[w, l, z]
              - \log Z_n

    (:mod:`crowdagg.kernels.latent`: one pass of
    :func:`~crowdagg.kernels.latent.latent_block`, bit-identical for any
    thread count and any block grid's partitioning.)  Bayes' rule over a
    classifier and the answers is ``log_prior`` = the classifier's
    log-probabilities, ``log_table`` = the log confusions transposed to
    ``[worker, observed, true]``; Dawid--Skene's E-step is one log class
    prior repeated over the tasks.

    Parameters
    ----------
    data : AnnotationSet
        The answers (its task order is the rows' order).
    log_table : ndarray (n_workers, K, K_latent)
        ``[worker, observed, latent]``: log P(answer l | latent state z).
    log_prior : ndarray (n_tasks, K_latent) or (K_latent,)
        Each task's log prior over the latent states, or one row for every
        task.
    latent_class : ndarray of int (K_latent,), optional
        The class (0 .. K-1) of each latent state.  None: the identity,
        which needs K_latent = K.
    engine : optional
        The engine to run on (default a :class:`~crowdagg.engine.LocalEngine`
        over ``data``; a fit passes its own).
    draw_seed : int, optional
        Also draw one latent state per task from its posterior, keyed by
        (seed, ``draw_round``, task name): the same draw on any grid and
        thread count (:class:`TieBreaker`'s stream).  The names' keys are
        hashed once per seed and block and kept with the engine's partition:
        a chain passes the same ``engine`` and seed to every sweep, and its
        sweep as ``draw_round``.
    draw_round : int
        The draw of the task's stream: a chain's sweep.
    counts : {None, "posterior", "draws"}
        Also the expected counts ``[worker, observed, latent]`` and latent
        totals, of the posteriors or of the draws.
    max_memory : optional
        The memory limit (:func:`crowdagg.core.memory.check`).
    clamp : ndarray of int (n_tasks,), optional
        Gold (:func:`gold_clamp`'s form: a class per task, -1 free): a
        clamped task keeps only its class's latent states, its evidence
        theirs (under the identity: the one-hot row, DS's gold).
    entropy_floor : float, optional
        Also Σ_n Σ_z f log f, f = max(q_n(z), floor) (``entropy``).

    Returns
    -------
    LatentPosterior

    Raises
    ------
    DataError
        Shapes that do not fit the data, NaN or +inf in a log array, a map
        to a class the data lacks, a task for which every latent state has
        probability 0, a clamp that is not a class or names one no state
        maps to.
    ResourceError
        When the outputs exceed the memory limit.
    """
    from ..core import memory
    from ..kernels.latent import LatentParams, latent_block

    check_annotations(data, "latent_posterior(data, ...)")  # before data.n_tasks: an AttributeError otherwise
    n, w, k = data.n_tasks, data.n_workers, data.n_classes
    n_latent = np.shape(log_table)[2] if np.ndim(log_table) == 3 else -1
    if np.ndim(log_prior) == 2 and np.shape(log_prior)[0] != n:
        raise DataError(f"log_prior has shape {np.shape(log_prior)}, the data's tasks × latent states are "
                        f"({n:,}, K_latent)")
    if clamp is not None and np.shape(clamp) != (n,):
        raise DataError(f"clamp has shape {np.shape(clamp)}, the data has {n:,} tasks")
    if latent_class is None and n_latent not in (-1, k):
        raise DataError(f"log_table has {n_latent:,} latent states for the data's {k} classes: give latent_class, "
                        "the class of each state")
    if n_latent > 0:
        memory.check(latent_memory(n, w, k, n_latent, mapped=latent_class is not None, draws=draw_seed is not None,
                                   counts=counts is not None, n_answers=data.n_answers),
                     f"{n:,} tasks × {n_latent:,} latent states, {w:,} workers", max_memory)
    params = LatentParams(log_table, log_prior, latent_class, draw_seed, draw_round, counts, clamp, entropy_floor)
    engine = local_engine(data, engine)
    sums, outs = engine.map_reduce(latent_block, params, keep=True)
    rows = engine.gather(outs)
    latent = rows["latent"] if outs else np.zeros((0, params.log_table.shape[2]))
    classes = rows["classes"] if outs and latent_class is not None else latent
    draws = (rows["draws"] if outs else np.zeros(0, dtype=np.int64)) if draw_seed is not None else None
    entropy = float(sums[-1]) if entropy_floor is not None else None
    if counts is None:
        return LatentPosterior(latent, classes, float(sums[0]), draws, entropy=entropy)
    return LatentPosterior(latent, classes, float(sums[0]), draws, sums[1], sums[2], entropy)


# --------------------------------------------------------------------------- gold
def gold_clamp(data: AnnotationSet, gold: Mapping[str, str] | np.ndarray | None) -> np.ndarray:
    """Class index to clamp per task (-1 = free), shape (n_tasks,), int64.

    ``gold`` maps task name -> class name, or is already such an index array
    (integers in [-1, K-1]).  Gold for tasks absent from the answers is
    ignored, with a warning saying how many; an unknown class is an error.
    """
    clamp = np.full(data.n_tasks, -1, dtype=np.int64)
    if gold is None:
        return clamp
    if isinstance(gold, np.ndarray):
        return check_index_array("gold", gold, data.n_tasks, -1, data.n_classes - 1)
    gold = check_task_mapping(gold, "gold")  # a dict, or a pandas Series by its index
    lookup = data.task_lookup()
    cls_index = {c: i for i, c in enumerate(data.classes)}
    missing = 0
    for task, label in gold.items():
        t = lookup.get(str(task).strip())
        if t is None:
            missing += 1
            continue
        k = cls_index.get(str(label).strip())
        if k is None:
            raise DataError(
                f"gold label {label!r} of task {task!r} is not one of the classes ({', '.join(data.classes)})"
            )
        clamp[t] = k
    if missing:
        text = (
            f"none of the {len(gold)} gold task(s) is in the answers (check that the task ids match)"
            if missing == len(gold)
            else f"{missing} of {len(gold)} gold task(s) are not in the answers and are ignored"
        )
        warn(CrowdaggWarning(text))
    return clamp


def clamp_posteriors(post: np.ndarray, clamp: np.ndarray | None) -> np.ndarray:
    """The rows of clamped tasks (``clamp >= 0``) set to one-hot on their gold class, in place; ``post`` returned.

    ``post`` (n_tasks, K); ``clamp`` (n_tasks,) from :func:`gold_clamp`, or
    None (no gold).  A method's E-step calls it after computing its
    posteriors, so gold tasks shape the worker parameters as observed
    truths (semi-supervised fitting).
    """
    if clamp is None:
        return post
    fixed = np.flatnonzero(clamp >= 0)
    if fixed.size:
        post[fixed] = 0.0
        post[fixed, clamp[fixed]] = 1.0
    return post


def one_coin_spread(model: Mapping[str, Any], order: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, ...]:
    """A saved one-coin model's workers ``rows`` as matrices would hold them: (correct, wrong per other class, share).

    ``correct`` and ``wrong`` (len(rows),): the correct answers and the
    wrong ones spread evenly over the model's other K - 1 classes; ``share``
    (len(order),): each kept class's share of the model's class counts (by
    which both spread over the true classes; uniform without counts).
    """
    correct, answers = model["correct"][rows], model["answers"][rows]
    k_model = len(model["classes"])
    total = model["class_counts"].sum()
    share = model["class_counts"][order] / total if total > 0 else np.full(len(order), 1.0 / k_model)
    return correct, (answers - correct) / max(k_model - 1, 1), share


__all__ = [
    "PROB_FLOOR",
    "normalize_rows",
    "softmax_rows",
    "fill_empty_rows",
    "TieBreaker",
    "argmax_random_ties",
    "SHARES",
    "SOFTMAX",
    "COUNTS",
    "Vote",
    "Posterior",
    "agreement_block",
    "agreement_with_block",
    "revote_block",
    "posterior_block",
    "finish_votes",
    "check_engine_data",
    "local_engine",
    "soft_majority_vote",
    "hard_majority_vote",
    "one_coin_accuracy",
    "one_coin_matrices",
    "one_coin_spread",
    "prior_m_step",
    "full_m_step",
    "posterior_confusion",
    "LatentPosterior",
    "latent_memory",
    "latent_posterior",
    "gold_clamp",
    "clamp_posteriors",
]

