"""Max-MIG (Cao, Xu, Kong & Wang, ICLR 2019): a classifier and a crowds aggregator trained to agree, not to fit.

Model (Cao, Xu, Kong & Wang, "Max-MIG: an information theoretic approach
for joint learning from crowds", ICLR 2019, arXiv:1905.13436 §3;
ALGORITHMS.md §11).  Two forecasters of the true class look at the two
views of a task, which are independent given the truth:

* the **data classifier** ``h(x_n) = softmax(f_θ(x_n))`` (B, K): the
  network, seeing the features only;
* the **crowds aggregator** ``g(y_n) = softmax(Σ_{m answers n} W^m[:,
  y_n^m] + log p)`` (B, K): a "weighted average" of the answers, one free
  K×K matrix per annotator (``W^m[c, c']``: row the class c the aggregator
  scores, column the answer c'; an absent answer adds nothing), and the
  log of the class prior ``p`` as the bias (the paper's ``b = log p``).

Both are trained jointly to maximise their f-mutual information gain with
the KL choice (the paper's eq. 1 with Table 1's KL row; §11.2)::

    m_ij   = Σ_c h(x_i)_c g(y_j)_c / p_c
    MIG^KL = (1/B) Σ_i (1 + log m_ii) - (1/(B(B-1))) Σ_{i≠j} m_ij

the reward for agreeing on the same task minus the punishment for
agreeing across tasks (which stops both from answering one class
everywhere); the loss of a minibatch is ``-MIG^KL``.  Its maximum is the
f-mutual information of the data and the crowd's answers: where a subset
of *senior* annotators is conditionally independent given the truth and
sufficient for it, the maximiser has ``W^m = log C^m`` for the seniors and
``W^m = 0`` for everyone else -- copiers of a senior and annotators who
always answer one class get weight zero (Thm 3.4).  A likelihood method
(``raykar``, ``crowdlayer``, Dawid--Skene) counts a copier's answers as
independent evidence and follows the copied senior (Thm E.3): the paper's
correlated-mistakes case, where Max-MIG keeps its accuracy.

The **data-crowds forecaster** (§3.1; the paper's Table 3) combines the
two views by Bayes' rule, the views being independent given the truth::

    ζ(x, y) = Normalize(h(x) ⊙ g(y) ⊘ p) = softmax(log h(x) + Σ_m W^m[:, y^m])

(the prior in ``g``'s bias cancels the division); here with ``g``'s answer
logits tempered by the temperature that makes ``g`` best predict ``h``
(``calibrate``, see Defaults below; ``calibrate=false`` is the paper's
product).  ``crowdagg train`` writes
the classifier's labels on the training tasks (``h``) by default, the
forecaster's with ``forecaster=true``; ``predict`` uses ``h`` (a new task
has no answers).

Choices, against the reference code (Newbeeer/Max-MIG; ALGORITHMS.md
§11, §15.1):

* **Floors, not noise**: the code adds ``U(0, 1) · 1e-4`` to each ``m_ii``
  before the log, only to keep ``log m_ii`` finite where h and g disagree
  completely.  That draws from torch's generator in every step (every later
  dropout mask and shuffle would move with it) and makes the loss no
  function of its inputs; ``m_ii`` is instead floored at
  :data:`~crowdagg.learning.trainer.PROB_FLOOR` (1e-10: a task on which the
  two disagree entirely costs 23 nats, not infinity), which changes nothing
  above the floor.
* **The off-diagonal sum without the B×B matrix**: ``Σ_{i≠j} m_ij =
  Σ_c (Σ_i h_ic)(Σ_j g_jc) / p_c - Σ_i m_ii``, O(B K) where the code's
  matrix is O(B² K) -- the same for a minibatch, and what lets the held-out
  objective (:func:`mig_kl` over every held-out task) run in O(N K).
* **Model selection** on Max-MIG's own objective, ``-MIG^KL`` of ``h`` and
  ``g`` on the tasks with held-out answers (``g`` reading only those), in
  O(N K): Max-MIG has no answer model whose likelihood could score them (the
  code reports the best *test* accuracy over epochs; truth is never read
  here).
* **Every task is trained on**: the code skips an incomplete last batch
  (its masks are sized to the batch); here a last batch smaller than 2 (the
  loss needs pairs) joins the one before.
* **Sparse answers**: the code feeds a dense (N, M, K) one-hot array (all
  zeros where an annotator did not answer); here a batch's answers are flat
  (row, worker, label) arrays and the aggregator's logits an ``index_add``
  of ``W^{worker}[:, label]``, no dense tasks × workers array.
* **Initialisation** (the paper's eq. 2, Raykar-style; §11.3):
  ``W^m[c, c'] = log(Σ_n Q_n(c) 1[y_n^m = c'] / Σ_{n answered by m} Q_n(c)
  + 1e-4)``: each annotator's confusion against a soft label Q of the
  training answers, so ``g`` starts as the naive Dawid--Skene posterior of
  those confusions.  The paper's denominator sums over every task; with
  missing answers it is each annotator's answered tasks (Ibrahim's
  ``mle_based``: rows on the simplex).  1e-4 is the CIFAR code's (the
  LabelMe code's 1e-2).  The paper's Q is the plain soft majority vote
  (``aggregator_init=votes``), and it traps two of the paper's own three
  cases.  **Naive majority**: with juniors voting class 0 on every task, Q
  gives class 0 to every task, the row ``W^m[0, :]`` becomes each
  annotator's overall answer distribution, and ``g`` starts by sending
  every class-0 task to the class senior A confuses it with -- where ``h``
  and ``g`` agree on a merged class, neither gets a gradient towards
  splitting it (``∂m_ii / ∂g_i0 ∝ h_i0 ≈ 0``), and they never do (digits,
  benchmarks/bench_maxmig_cases.py, CIFAR-10 (H) experts: .905 against
  .999 independent).  **Correlated mistakes**: on the three hard pairs
  where the copied senior C answers at random, its four votes decide Q, the
  start ties no class of the pair to its answer, and MIG, unchanged by
  relabelling the classes, settles on a swap or a mix of the pair (seeds
  0-2: 1.000, .690, .607).  A Dawid--Skene Q mends the naive case but traps
  the correlated one (.757: its likelihood trusts the copied senior, the
  paper's Thm E.3).  So Q is, by default (``aggregator_init=agreement``),
  the **agreement vote** (:func:`agreement_votes`): the soft vote with
  each annotator weighted by its chance-corrected agreement with the others
  (Cohen's κ against the crowd, :func:`agreement_weights`, iterated to a
  fixed point), a **group of copies counted once** and left out of its own
  members' agreement (:func:`copy_groups`: annotators agreeing on every one
  of at least 20 shared tasks).  An annotator answering one class
  everywhere agrees with anyone exactly as often as chance: κ = 0, whatever
  the others say; copies count once; annotators of one skill get one
  weight, so the start is the paper's wherever the crowd is neither naive
  nor copied.  ``aggregator_init=centred`` (:func:`centred_votes`: each
  annotator's own answer shares subtracted from its votes, copies once)
  also mends both cases, but reads a rare class as news: 1,000 tasks, a
  class of 5 %, three 90 % annotators, its Q gives the rare class to every
  task one annotator says it of (accuracy .64 after training, majority
  vote .97), where the agreement vote is the majority vote.
* **The prior** ``p``: ``prior=fixed`` keeps it uniform (the paper's
  LabelMe and CIFAR-10 setting), ``prior=learned`` learns it as
  ``softmax(φ)`` from φ = 0 (the Dogs code learns an unconstrained
  ``Linear(1, 2)`` weight, which can leave the simplex; §11.4).

Defaults: the agreement start (above), Adam at ``lr`` 1e-3 for the
classifier and ``aggregator_lr_scale`` = 1 × lr for the aggregator (the
paper: 1e-4 for both on LabelMe, 1e-3 and 1e-4 on CIFAR-10 over 50 epochs
of 50,000 images; at 0.1 × lr on 1,200 digits the aggregator moves too
little in the epochs it gets: correlated .934 ± .052 against .999), batch
64, the prior fixed uniform (a class far rarer than the others needs
``prior=learned``: the 5 % class above, .71 fixed, .99 learned, from
either start).  Measured (benchmarks/bench_train.py, 3 seeds): LabelMe's
1,188 test images 87.18 ± 0.88 % (the paper 86.42 ± 0.36; ours
``geocrowdnet-f`` 85.61, ``ds-then-train`` 82.83), the classifier's labels
of the training tasks .872 ± .008, the forecaster's .853 ± .007 (music
.830 ± .004).  The forecaster is **calibrated** (``calibrate``, on by
default): the aggregator as trained is .796 alone and as over-confident as
``ds``'s posterior (median margin 5.6 nats), so the paper's product
follows it (.833 ± .004, music .817); scaling g's answer logits by the
temperature with which g best predicts h on the answered tasks
(:func:`consistency_temperature`: 0.20-0.27 on labelme) lets each view
count as much as it knows.  The paper's start gives the same within a
standard deviation there (87.18, .872, .834 uncalibrated).  Digits (benchmarks/bench_maxmig_cases.py,
seeds 0-2): .999, 1.000, 1.000 on the three cases (the paper's start
.999, .905, .766; ``raykar`` .871, .539, .692).

Failure modes (ALGORITHMS.md §11.6): the aggregator is linear in the
one-hot answers, so a senior who is a non-linear function of juniors is out
of its reach; the objective compares the tasks of a batch, and a batch of
fewer than about 2 K tasks sees few pairs of different classes; MIG is
unchanged by relabelling the classes of h and g together, so only the start
ties a class to its answers (see the agreement vote); a network able to
memorise its training tasks can fit an answer pattern that carries no
information about the truth (a copied senior's coin), which the held-out
objective, computed on training tasks, does not see.

Shapes: ``h``, ``g`` (B, K) probabilities; ``p`` (K,); W (n_workers, K, K)
``[worker, class scored, answer]``; a batch's answers (n,) ``row``,
``worker``, ``label``.  Cost per batch: O(answers × K + B K) beyond the
network.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
from torch import nn

from ....core import memory
from ....data.annotations import AnnotationSet
from ....errors import UsageError, param
from ....methods.blocks import soft_majority_vote
from ...confusion import expected_counts, soft_vote_counts
from ...trainer import PROB_FLOOR, Batch, BatchPolicy, TrainContext, Trainer

#: Added to the count matrix before its log in the aggregator's start (the paper's CIFAR-10 code; eq. 2).
INIT_FLOOR = 1e-4


def agreement(h: torch.Tensor, g: torch.Tensor, prior: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The same-task and cross-task agreements of ``h`` and ``g`` (B, K) under ``prior`` (K,).

    Returns ``(m_ii (B,), Σ_{i≠j} m_ij (scalar))``, ``m_ij = Σ_c h_ic g_jc /
    p_c``: the off-diagonal sum as ``Σ_c (Σ_i h_ic)(Σ_j g_jc) / p_c - Σ_i
    m_ii``, O(B K), without the B × B matrix.
    """
    hp = h / prior
    diag = (hp * g).sum(dim=1)
    off = (hp.sum(dim=0) * g.sum(dim=0)).sum() - diag.sum()
    return diag, off


def mig_kl(h: torch.Tensor, g: torch.Tensor, prior: torch.Tensor) -> torch.Tensor:
    """The f-mutual information gain with the KL choice of ``h`` and ``g`` (B, K), B >= 2, under ``prior`` (K,).

    ``MIG^KL = (1/B) Σ_i (1 + log m_ii) - (1/(B(B-1))) Σ_{i≠j} m_ij``,
    ``m_ij = Σ_c h_ic g_jc / p_c`` (Cao et al. 2019, eq. 1 and Table 1's KL
    row: ``∂f(t) = 1 + log t``, ``f*(∂f(t)) = t``); ``m_ii`` floored at
    :data:`~crowdagg.learning.trainer.PROB_FLOOR` before its log.  A scalar
    to maximise.
    """
    b = h.shape[0]
    if h.dim() != 2 or tuple(g.shape) != tuple(h.shape) or tuple(prior.shape) != (h.shape[1],) or b < 2:
        # one task was 0 / 0 = nan, unequal shapes torch's RuntimeError from inside
        raise UsageError(f"mig_kl needs h and g of one shape (B, K), B >= 2, and a prior (K,); got "
                         f"{tuple(h.shape)}, {tuple(g.shape)}, {tuple(prior.shape)}")
    diag, off = agreement(h, g, prior)
    return (1.0 + torch.log(diag.clamp_min(PROB_FLOOR))).mean() - off / (b * (b - 1))


def mig_kl_loss(h: torch.Tensor, g: torch.Tensor, prior: torch.Tensor) -> torch.Tensor:
    """``-MIG^KL`` (:func:`mig_kl`): the loss of a minibatch, to minimise."""
    return -mig_kl(h, g, prior)


def forecaster(log_h: torch.Tensor, answer_logits: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """The data-crowds forecaster ``Normalize(h ⊙ g ⊘ p)`` (n, K) from ``log h`` and the answers' part of
    ``g``'s logits, ``Σ_m W^m[:, y^m]`` (n, K) -- g's bias log p cancels the division by p -- with g's answer
    logits scaled by ``temperature`` (1: the paper's; :func:`consistency_temperature`)."""
    return torch.softmax(log_h + temperature * answer_logits, dim=1)


#: The range of g's temperature the forecaster's calibration searches (log-uniform).
TEMPERATURE_RANGE = (1e-3, 1e3)


def consistency_temperature(h: np.ndarray, answer_logits: np.ndarray, log_prior: np.ndarray) -> float:
    r"""The temperature τ with which the crowds aggregator best predicts the classifier: the minimiser of
    :math:`-\frac1N Σ_n Σ_c h_{nc} \log \mathrm{softmax}(τ a_n + \log p)_c` over ``h`` (N, K) the
    classifier's probabilities and ``answer_logits`` a (N, K) g's answer logits on the same tasks (tasks with
    answers), ``log_prior`` (K,).

    Both views estimate the same true class (Max-MIG's h(x) and g(y) each
    P(y | its view) at the optimum), so the τ that makes g's posterior
    closest to h's is g's calibration against the one view selected on
    held-out answers.  A bounded scalar search on log τ within
    :data:`TEMPERATURE_RANGE` (deterministic); 1.0 without tasks.
    """
    from scipy.optimize import minimize_scalar

    if h.shape[0] == 0:
        return 1.0
    h = np.asarray(h, dtype=np.float64)
    a = np.asarray(answer_logits, dtype=np.float64)
    lp = np.asarray(log_prior, dtype=np.float64)

    def cross_entropy(log_tau: float) -> float:
        z = math.exp(log_tau) * a + lp
        z -= z.max(axis=1, keepdims=True)
        log_g = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
        return float(-(h * log_g).sum(axis=1).mean())

    lo, hi = (math.log(v) for v in TEMPERATURE_RANGE)
    found = minimize_scalar(cross_entropy, bounds=(lo, hi), method="bounded", options={"xatol": 1e-4})
    return float(math.exp(found.x))


#: Two annotators are copies when they agree on every one of at least this many tasks both answered.
COPY_MIN_SHARED = 20


#: Peak bytes of :func:`duplicate_weights` per pair of annotators sharing a task (the shared and agreeing
#: counts as int32, their COO copies, the filtered pairs and the copy graph).  Measured with tracemalloc on
#: 2,000 annotators answering all of 200 tasks: 32 per pair when no two agree, 34 when every one copies every
#: other (58 and 78 with float64 counts over both triangles).
COPY_BYTES_PER_PAIR = 48


def copy_pairs(data: AnnotationSet) -> tuple[int, np.ndarray]:
    """The pairs of annotators :func:`duplicate_weights` compares, at most, and which annotators it compares.

    Only annotators with at least :data:`COPY_MIN_SHARED` answers can be copies; the pairs among them sharing a
    task are at most ``min(Σ_n d_n², M_e²)``, ``d_n`` such annotators' answers on task n, ``M_e`` their number.
    Returns ``(that bound, the mask of answers by such annotators (n_answers,))``.
    """
    eligible = data.answers_per_worker >= COPY_MIN_SHARED
    kept = eligible[data.worker]
    per_task = np.bincount(data.task[kept], minlength=data.n_tasks).astype(np.int64)
    n_eligible = int(eligible.sum())
    return int(min(int((per_task * per_task).sum()), n_eligible * n_eligible)), kept


def duplicate_weights(data: AnnotationSet, max_memory: memory.MaxMemory = None) -> np.ndarray:
    """Each annotator's weight in the centred and agreement votes (n_workers,): 1 / the size of its group of
    copies (:func:`copy_groups`), so a group of annotators who copy one another votes once."""
    group = copy_groups(data, max_memory)
    return 1.0 / np.bincount(group)[group]


def copy_groups(data: AnnotationSet, max_memory: memory.MaxMemory = None) -> np.ndarray:
    """Each annotator's group of copies (n_workers,) int: a label shared by annotators who copy one another.

    Two annotators are copies when they gave the same label on every task
    both answered, at least :data:`COPY_MIN_SHARED` of them (the paper's
    juniors who copy a senior; the held-out answers leave gaps, so identical
    answer sets cannot be asked for); groups are the connected components.
    The shared and agreeing counts are sparse products of the (task,
    annotator) incidence of the annotators with at least
    :data:`COPY_MIN_SHARED` answers: O(Σ_n d_n²) time for d_n answers on
    task n, and :data:`COPY_BYTES_PER_PAIR` bytes per pair of annotators
    sharing a task (:func:`copy_pairs`), checked against ``max_memory``
    first: a dense crowd of M annotators needs ~48 M² bytes.
    """
    from scipy import sparse
    from scipy.sparse.csgraph import connected_components

    n, m, k = data.n_tasks, data.n_workers, data.n_classes
    pairs_bound, kept = copy_pairs(data)
    memory.check(COPY_BYTES_PER_PAIR * pairs_bound, f"{pairs_bound:,} pairs of annotators sharing a task, compared "
                 "to find copies", max_memory, advice="use fewer annotators per task, or aggregator_init=votes")
    if not pairs_bound:
        return np.arange(m)
    task, worker, label = data.task[kept], data.worker[kept], data.label[kept]
    ones = np.ones(task.size, dtype=np.int32)  # int32 counts: half float64's bytes per pair
    answered = sparse.csr_matrix((ones, (task, worker)), shape=(n, m))
    by_label = sparse.csr_matrix((ones, (task.astype(np.int64) * k + label, worker)), shape=(n * k, m))
    shared = (answered.T @ answered).tocoo()
    agree = (by_label.T @ by_label).tocsr()
    pairs = (shared.row < shared.col) & (shared.data >= COPY_MIN_SHARED)  # each pair once: the product is symmetric
    rows, cols, counts = shared.row[pairs], shared.col[pairs], shared.data[pairs]
    del shared
    same = np.asarray(agree[rows, cols]).ravel() == counts
    graph = sparse.csr_matrix((np.ones(int(same.sum()), dtype=np.int8), (rows[same], cols[same])), shape=(m, m))
    _, group = connected_components(graph, directed=False)
    return np.asarray(group, dtype=np.int64)


def centred_votes(data: AnnotationSet, max_memory: memory.MaxMemory = None) -> np.ndarray:
    """The soft vote (n_tasks, K) with each annotator's own answer frequencies taken from its votes, and exact
    copies counted once.

    ``Q_n ∝ max(0, Σ_{m answers n} v_m (e(y_n^m) - π_m))``, ``π_m`` (K,)
    the share of annotator m's answers in each class and ``v_m`` its
    :func:`duplicate_weights`: an answer counts only as far as it departs
    from what its annotator always says, so an annotator who gives one class
    to every task adds nothing (where the plain vote gives that class to
    every task), an annotator spreading its answers over the classes votes
    almost as in the plain soft vote, and annotators whose answers are
    identical (a copier and its source) share one vote.  A task whose
    centred votes are all <= 0 keeps its plain vote shares; tasks without
    answers are 0.  O(answers × K), beside :func:`duplicate_weights` (its
    memory checked against ``max_memory``).
    """
    k, n = data.n_classes, data.n_tasks
    per_worker = np.bincount(data.worker.astype(np.int64) * k + data.label, minlength=data.n_workers * k)
    share = per_worker.reshape(data.n_workers, k).astype(np.float64)
    share /= np.maximum(share.sum(axis=1, keepdims=True), 1.0)
    weight = duplicate_weights(data, max_memory)[data.worker]
    votes = np.bincount(data.task.astype(np.int64) * k + data.label, weights=weight, minlength=n * k).reshape(n, k)
    expected = np.stack([np.bincount(data.task, weights=weight * share[data.worker, c], minlength=n)
                         for c in range(k)], axis=1)
    centred = np.maximum(votes - expected, 0.0)
    total = centred.sum(axis=1, keepdims=True)
    return np.where(total > 0, centred / np.where(total > 0, total, 1.0), soft_majority_vote(data))


#: The aggregator's starts (``aggregator_init``).
INITS = ("votes", "centred", "agreement")
#: Bytes per answer and class of the agreement vote's rounds (the others' vote on each answer's task, gathered,
#: then its seen rows normalised), and per answer (the int64 codes, the (task, group) cells' sort, the seen
#: answers' gathers): tracemalloc's peak on 600,000 answers was 34 per cell + 60 per answer at K = 2 to 30.
AGREEMENT_BYTES_PER_CELL = 40
AGREEMENT_BYTES_PER_ANSWER = 72
#: The chance-corrected agreement weights are iterated to this largest change, or :data:`AGREEMENT_ITERATIONS`.
AGREEMENT_TOL = 1e-6
AGREEMENT_ITERATIONS = 50


def agreement_weights(data: AnnotationSet, group: np.ndarray) -> np.ndarray:
    r"""Each annotator's chance-corrected agreement with the others (n_workers,), in [0, 1]: its vote's weight.

    :math:`κ_m = (p_o - p_e) / (1 - p_e)` (Cohen's κ against the crowd):
    :math:`p_o` the mean, over annotator m's answers, of the share the
    *other* annotators' weighted vote on that task gives m's answer,
    :math:`p_e = Σ_c π_m(c) \bar d_m(c)` the agreement expected by chance
    from m's own answer shares :math:`π_m` and the others' mean vote
    :math:`\bar d_m`, both over the answers of m that others' votes face
    (its p_o's).  The others are the annotators outside m's ``group`` of
    copies (:func:`copy_groups`; a copy agreeing with its
    source is no evidence), their votes weighted by 1 / their group's size
    times their own κ, iterated from
    equal weights to a fixed point (at most :data:`AGREEMENT_ITERATIONS`
    rounds, :data:`AGREEMENT_TOL`).  An annotator who gives one class to
    every task agrees with anyone exactly as often as chance: κ = 0 at every
    round, whatever the others say, so after the first round it has no
    weight, and the annotators it outvoted agree with one another again;
    annotators of equal skill get equal weights, so a rare class keeps the
    plain vote's share (where :func:`centred_votes` reads it as news).
    Negative κ (worse than chance) is 0; with two annotators κ is Cohen's.
    O(answers × K) time per round, :data:`AGREEMENT_BYTES_PER_CELL` bytes per
    answer and class and :data:`AGREEMENT_BYTES_PER_ANSWER` per answer.
    """
    k, m = data.n_classes, data.n_workers
    task, worker, label = (np.asarray(a, dtype=np.int64) for a in (data.task, data.worker, data.label))
    group = np.asarray(group, dtype=np.int64)
    copies = 1.0 / np.bincount(group)[group]
    # each answer's (task, group of copies): the group's own vote on the task is left out of the others'
    _, cell = np.unique(task * (int(group.max(initial=0)) + 1) + group[worker], return_inverse=True)
    cell = cell.reshape(-1)
    weight = np.ones(m)
    for _ in range(AGREEMENT_ITERATIONS):
        per_answer = (copies * weight)[worker]
        votes = np.bincount(task * k + label, weights=per_answer, minlength=data.n_tasks * k).reshape(-1, k)
        mine = np.bincount(cell * k + label, weights=per_answer, minlength=(int(cell.max(initial=-1)) + 1) * k)
        others = votes[task]
        others -= mine.reshape(-1, k)[cell]  # the other groups' vote on each answer's task
        total = others.sum(axis=1)
        seen = total > 0
        others = others[seen] / total[seen, None]
        by = worker[seen]
        count = np.maximum(np.bincount(by, minlength=m), 1).astype(np.float64)
        # m's answer shares over the answers p_o is over (with others beside them): Cohen's p_e of two raters
        share = np.bincount(by * k + label[seen], minlength=m * k).reshape(m, k) / count[:, None]
        p_o = np.bincount(by, weights=others[np.arange(by.size), label[seen]], minlength=m) / count
        mean_vote = np.stack([np.bincount(by, weights=others[:, c], minlength=m) for c in range(k)], axis=1)
        p_e = (share * mean_vote).sum(axis=1) / count
        kappa = np.divide(p_o - p_e, 1.0 - p_e, out=np.zeros(m), where=p_e < 1.0 - 1e-12)
        new = np.clip(kappa, 0.0, 1.0)
        done = float(np.max(np.abs(new - weight), initial=0.0)) < AGREEMENT_TOL
        weight = new
        if done:
            break
    return weight


def agreement_votes(data: AnnotationSet, max_memory: memory.MaxMemory = None) -> np.ndarray:
    """The soft vote (n_tasks, K) with each annotator's answers weighted by its chance-corrected agreement with
    the others (:func:`agreement_weights`) and exact copies counted once (:func:`duplicate_weights`, its search
    bounded by ``max_memory``).  A task whose answers all have weight 0 keeps its plain vote shares; tasks
    without answers are 0."""
    k, n = data.n_classes, data.n_tasks
    group = copy_groups(data, max_memory)
    weight = (agreement_weights(data, group) / np.bincount(group)[group])[data.worker]
    votes = np.bincount(data.task.astype(np.int64) * k + data.label, weights=weight, minlength=n * k).reshape(n, k)
    total = votes.sum(axis=1, keepdims=True)
    return np.where(total > 0, votes / np.where(total > 0, total, 1.0), soft_majority_vote(data))


def initial_weights(data: AnnotationSet, init: str = "agreement", max_memory: memory.MaxMemory = None) -> np.ndarray:
    """The aggregator's start (data.n_workers, K, K) ``[worker, class scored, answer]`` (the paper's eq. 2).

    ``log(counts / row sums + 1e-4)``: each annotator's expected counts
    (:func:`~crowdagg.learning.confusion.expected_counts`) against a soft
    label Q of ``data``'s answers, each row over the annotator's answered
    tasks; a row without any weight (an annotator without answers, a class Q
    never gives) is uniform.  Q is the soft majority vote
    (:func:`~crowdagg.methods.blocks.soft_majority_vote`) for ``init="votes"``
    (the paper's), the centred vote (:func:`centred_votes`) for
    ``"centred"``, the agreement vote (:func:`agreement_votes`, the default)
    for ``"agreement"`` (``max_memory`` bounding their search for copies).
    """
    if init not in INITS:  # "centered" was read as "votes"
        raise UsageError(f"init must be one of {', '.join(INITS)}, got {init!r}")
    if init in ("centred", "agreement"):
        q = (centred_votes if init == "centred" else agreement_votes)(data, max_memory)
        counts = expected_counts(q, data.task, data.worker, data.label, data.n_workers)
    else:
        counts = soft_vote_counts(data)
    k = counts.shape[2]
    total = counts.sum(axis=2, keepdims=True)
    rows = np.divide(counts, total, out=np.full_like(counts, 1.0 / k), where=total > 0)
    return np.log(rows + INIT_FLOOR)


#: Answers whose aggregator columns (n, K) are gathered at a time (a training batch's are one chunk).
ANSWER_CHUNK = 65536


class CrowdsAggregator(nn.Module):
    """The crowds aggregator ``g(y) = softmax(Σ_m W^m[:, y^m] + log p)``, with the prior ``p`` fixed or learned.

    Parameters
    ----------
    weights : ndarray, shape (n_workers, K, K)
        The start of ``W`` ``[worker, class scored, answer]``
        (:func:`initial_weights`).
    learn_prior : bool
        False: ``p`` uniform and fixed (a buffer); True: ``p = softmax(φ)``,
        φ a parameter from 0 (uniform), always on the simplex.
    """

    def __init__(self, weights: np.ndarray, learn_prior: bool) -> None:
        super().__init__()
        k = weights.shape[1]
        self.weights = nn.Parameter(torch.as_tensor(weights, dtype=torch.float32))
        self.learn_prior = learn_prior
        self.phi = nn.Parameter(torch.zeros(k), requires_grad=learn_prior)

    def log_prior(self) -> torch.Tensor:
        """``log p`` (K,)."""
        return torch.log_softmax(self.phi, dim=0)

    def prior(self) -> torch.Tensor:
        """``p`` (K,), on the simplex."""
        return torch.softmax(self.phi, dim=0)

    def answer_logits(self, row: torch.Tensor, worker: torch.Tensor, label: torch.Tensor,
                      n_rows: int) -> torch.Tensor:
        """``Σ_{answers of row r} W^{worker}[:, label]`` (n_rows, K): the answers' part of g's logits.

        ``row``, ``worker``, ``label`` (n,) the answers (each one's row in
        the output); a row without answers gets zeros.  An ``index_add`` of
        the answers' columns: O(n K) time, and at most :data:`ANSWER_CHUNK`
        answers' columns at a time -- every answer of a large data set (the
        forecaster, the held-out objective) is not an (n, K) array beside
        the (n_rows, K) output.
        """
        out = torch.zeros((n_rows, self.weights.shape[1]), dtype=self.weights.dtype, device=self.weights.device)
        for lo in range(0, row.shape[0], ANSWER_CHUNK):
            part = slice(lo, lo + ANSWER_CHUNK)
            out = out.index_add(0, row[part], self.weights[worker[part], :, label[part]])  # W^m[:, c'] of each
        return out

    def forward(self, row: torch.Tensor, worker: torch.Tensor, label: torch.Tensor, n_rows: int) -> torch.Tensor:
        """``g`` (n_rows, K): the softmax of the answers' logits plus ``log p``."""
        return torch.softmax(self.answer_logits(row, worker, label, n_rows) + self.log_prior(), dim=1)


#: Bytes per cell of W (n_workers × K²) beyond the base's 32 for a trainer's confusions: the start's float64
#: counts, rows and log before the float32 parameter, its gradient (dense: the backward of the answers' column
#: gather), Adam's two moments and the best epoch's copy.  Measured (peak RSS less torch's warm-up, 400 tasks,
#: 100-400 annotators, K = 200): 34-42 bytes per cell in all.
AGGREGATOR_BYTES_PER_CELL = 16


class MaxMIG(Trainer):
    """Max-MIG (see the module docstring): hooks on the trainer services, its aggregator the group ``aggregator``."""

    name = "maxmig"
    objective_name = "held-out -MIG^KL"
    memory_advice = f"{Trainer.memory_advice}, or {param('aggregator_init')}=votes (no search for copies)"
    #: The loss compares the tasks of a batch in pairs: a last batch of one joins the one before.
    batch_policy = BatchPolicy(min_batch=2)

    def _memory(self, data: AnnotationSet, x: np.ndarray, checked: dict[str, Any],
                network: Any) -> tuple[float, str]:
        """The base's share, the aggregator's beyond it (:data:`AGGREGATOR_BYTES_PER_CELL`) and, for the
        centred and agreement starts, the copy search's pairs (:func:`copy_pairs`) and the agreement vote's
        rounds (:data:`AGREEMENT_BYTES_PER_CELL`, :data:`AGREEMENT_BYTES_PER_ANSWER`): a dense crowd's M² pairs
        of annotators are checked before training, not found out when the start is built."""
        need, what = super()._memory(data, x, checked, network)
        need += AGGREGATOR_BYTES_PER_CELL * data.n_workers * data.n_classes ** 2
        if checked["aggregator_init"] == "votes":
            return need, what
        if checked["aggregator_init"] == "agreement":
            need += (AGREEMENT_BYTES_PER_CELL * data.n_classes + AGREEMENT_BYTES_PER_ANSWER) * data.n_answers
        pairs, _ = copy_pairs(data)
        return need + COPY_BYTES_PER_PAIR * pairs, f"{what}, {pairs:,} pairs of annotators compared to find copies"

    def _build(self, ctx: TrainContext) -> dict[str, nn.Module]:
        weights = initial_weights(ctx.training_set(), ctx.params["aggregator_init"], ctx.params.max_memory)
        return {"aggregator": CrowdsAggregator(weights, learn_prior=ctx.params["prior"] == "learned")}

    def _loss(self, ctx: TrainContext, logits: torch.Tensor, batch: Batch) -> torch.Tensor:
        agg = _aggregator(ctx)
        g = agg(batch.row, batch.worker, batch.label, logits.shape[0])
        return mig_kl_loss(torch.softmax(logits, dim=1), g, agg.prior())

    @torch.no_grad()
    def _selection(self, ctx: TrainContext) -> float:
        """``-MIG^KL`` of the classifier and the aggregator on the tasks with held-out answers, g reading those
        answers only: Max-MIG's own objective (it has no answer model whose likelihood could score them), O(N K)
        by :func:`agreement`.  nan with fewer than two such tasks (the training loss then stands in)."""
        if not len(ctx.val):
            return math.nan
        tasks, row = torch.unique_consecutive(ctx.val.task, return_inverse=True)  # val is sorted by task
        if tasks.shape[0] < 2:
            return math.nan
        agg = _aggregator(ctx)
        g = agg(row, ctx.val.worker, ctx.val.label, tasks.shape[0])
        return float(mig_kl_loss(ctx.proba(tasks), g, agg.prior()))

    @torch.no_grad()
    def _posterior(self, ctx: TrainContext, proba: np.ndarray, confusion: np.ndarray) -> np.ndarray:
        """The classifier's ``proba`` (n_tasks, K), or with ``forecaster`` the data-crowds forecaster on every
        answer of each task (the held-out ones too), g's answer logits tempered by
        :func:`consistency_temperature` with ``calibrate``; a task without answers keeps the classifier's."""
        if not ctx.params["forecaster"]:
            return proba
        data = ctx.data
        task, worker, label = (torch.as_tensor(np.asarray(a, dtype=np.int64), device=ctx.device)
                               for a in (data.task, data.worker, data.label))
        agg = _aggregator(ctx)
        log_h = torch.log(torch.as_tensor(proba, device=ctx.device).clamp_min(PROB_FLOOR))
        answers = agg.answer_logits(task, worker, label, data.n_tasks).to(log_h.dtype)
        tau = 1.0
        if ctx.params["calibrate"]:
            answered = data.answers_per_task > 0
            tau = consistency_temperature(proba[answered], answers.cpu().numpy()[answered],
                                          agg.log_prior().double().cpu().numpy())
        return forecaster(log_h, answers, tau).cpu().numpy()  # type: ignore[no-any-return]


def _aggregator(ctx: TrainContext) -> CrowdsAggregator:
    agg = ctx.modules["aggregator"]
    assert isinstance(agg, CrowdsAggregator)
    return agg
