"""Worker models: generators of row-stochastic confusion matrices ``C[worker, true, observed]``.

* ``ds`` -- full confusion (Dawid & Skene 1979, "Maximum likelihood
  estimation of observer error-rates using the EM algorithm",
  doi:10.2307/2346806): diagonal ~ Uniform(skill), the rest of each row split
  by a Dirichlet(1, ..., 1) draw (:func:`ds_matrices`).
* ``onecoin`` -- its homogeneous special case: one accuracy per worker.
* ``hammer-spammer`` -- one-coin hammers of accuracy ``skill[1]`` and
  uniform spammers (MBEM; Tanno et al. 2019 §3).
* spammers and adversaries (ICASSP'25 tutorial "Learning from crowdsourced
  noisy labels" §7.1): rows that ignore the truth
  (:func:`spammer_matrices`), or that prefer a deranged class
  (:func:`adversary_matrices`).
* MultiSPA workers (Ibrahim, Fu, Kargas & Huang, NeurIPS 2019,
  ``generate_confusion_mat.m``): class specialists, one worse-than-random
  worker, the rest random (:func:`multispa_matrices`).
* ``glad`` -- not a confusion matrix: an ability per worker, whose accuracy
  also depends on each task's difficulty (Whitehill et al., NIPS 2009; see
  :mod:`crowdagg.simulate.glad` and :func:`glad_workers`).
* Tanno et al. (CVPR 2019, "Learning from noisy labels by regularized
  estimation of annotator confusion", §3): pairwise flippers, right w.p.
  ``p`` and otherwise answering one fixed other class per true class
  (:func:`pairwise_flipper_matrices`).
* Max-MIG workers (Cao, Xu, Kong & Wang, ICLR 2019, arXiv:1905.13436,
  App. B.1): the (H) Dogs-vs-Cats seniors (:func:`maxmig_seniors`), the (H)
  CIFAR-10 seniors (:func:`maxmig_cifar_seniors`), juniors
  who always answer one class (:func:`constant_matrices`); copiers take their
  source's matrix and repeat its answers (see ``copy_of`` in
  :mod:`crowdagg.simulate.crowd`).

:data:`REGISTRY` maps each name accepted by ``simulate(model=...)`` to its
:class:`WorkerModel`; :func:`crowd_matrices` mixes one model with spammers
and adversaries, :func:`glad_workers` does the same for GLAD abilities.
Every draw uses the ``np.random.Generator`` passed in.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..errors import UsageError, param
from ..methods.blocks import one_coin_matrices
from . import glad

#: ``draw(rng, n_workers, n_classes, skill)`` -> confusion matrices, shape (n_workers, K, K).
MatrixDraw = Callable[[np.random.Generator, int, int, tuple[float, float]], np.ndarray]


@dataclass(frozen=True)
class WorkerModel:
    """A worker model of ``simulate(model=...)``.

    ``kind`` is the ``worker_kind`` of its (non-spammer, non-adversary)
    workers; ``uniform_spammers`` makes its spammers answer uniformly at
    random instead of by a Dirichlet(1) draw; ``default_spammers`` is the
    spammer fraction when ``spammers`` is not given.  ``task_parameters``
    marks a model whose answers also depend on a per-task parameter (GLAD):
    ``simulate`` then draws abilities (:func:`glad_workers`) and task
    parameters instead of matrices, and ``draw`` gives the workers' expected
    confusion at the default difficulty spread.
    """

    name: str
    description: str
    kind: str
    draw: MatrixDraw
    uniform_spammers: bool = False
    default_spammers: float = 0.0
    task_parameters: bool = False


def ds_matrices(rng: np.random.Generator, m: int, k: int, skill: tuple[float, float]) -> np.ndarray:
    """Diagonal ~ Uniform(skill) per (worker, class); the rest of each row ~ (1 - diag) * Dirichlet(1)."""
    diag = rng.uniform(skill[0], skill[1], size=(m, k))
    # Normalised standard exponentials are Dirichlet(1, ..., 1) draws.
    off = rng.standard_exponential((m, k, k))
    idx = np.arange(k)
    off[:, idx, idx] = 0.0
    off *= ((1.0 - diag) / off.sum(axis=2))[:, :, None]
    off[:, idx, idx] = diag
    return off


def _onecoin_matrices(rng: np.random.Generator, m: int, k: int, skill: tuple[float, float]) -> np.ndarray:
    """One accuracy ``p_w ~ Uniform(skill)`` per worker, errors uniform."""
    return one_coin_matrices(rng.uniform(skill[0], skill[1], size=m), k)


def _hammer_matrices(rng: np.random.Generator, m: int, k: int, skill: tuple[float, float]) -> np.ndarray:
    """One-coin hammers of accuracy ``skill[1]`` (no draw)."""
    return one_coin_matrices(np.full(m, skill[1]), k)


def _glad_matrices(rng: np.random.Generator, m: int, k: int, skill: tuple[float, float]) -> np.ndarray:
    """One-coin matrices of GLAD workers (ability ``logit(p)``, ``p ~ Uniform(skill)``), averaged over tasks.

    The accuracy is :func:`crowdagg.simulate.glad.expected_accuracy` at the
    default difficulty spread.
    """
    alpha = glad.abilities(rng.uniform(skill[0], skill[1], size=m))
    return one_coin_matrices(glad.expected_accuracy(alpha, glad.DEFAULT_DIFFICULTY_SPREAD, k), k)


def spammer_matrices(rng: np.random.Generator, m: int, k: int, uniform: bool) -> np.ndarray:
    """Rows all equal to one distribution per worker (answers ignore the truth)."""
    if uniform:
        return np.full((m, k, k), 1.0 / k)
    s = rng.standard_exponential((m, k))
    s /= s.sum(axis=1, keepdims=True)
    return np.repeat(s[:, None, :], k, axis=1)


def _derangement(rng: np.random.Generator, k: int) -> np.ndarray:
    while True:  # expected e ~ 2.7 tries
        perm = rng.permutation(k)
        if not np.any(perm == np.arange(k)):
            return perm


def adversary_matrices(rng: np.random.Generator, m: int, k: int, skill: tuple[float, float]) -> np.ndarray:
    """Report ``pi(k)`` w.p. ``a ~ Uniform(skill)`` for a random derangement ``pi``; else uniform over the rest."""
    a = rng.uniform(skill[0], skill[1], size=m)
    mats = np.repeat(((1.0 - a) / (k - 1))[:, None, None], k, axis=1).repeat(k, axis=2)
    rows = np.arange(k)
    for w in range(m):
        mats[w, rows, _derangement(rng, k)] = a[w]
    return mats


def multispa_matrices(rng: np.random.Generator, m: int, k: int) -> tuple[np.ndarray, list[str]]:
    """``generate_confusion_mat(M, K, -4)`` of the MultiSPA code, row-stochastic.

    K random workers are class specialists (worker ``U[i]``'s row ``i`` has its
    largest entry swapped onto the diagonal), one more has every row's
    smallest entry on the diagonal (worse than random), and every other row
    of every worker is ``rand(K)`` normalised.
    """
    mats = rng.random((m, k, k))
    kinds = ["random"] * m
    chosen = rng.permutation(m)[: k + 1]
    rows = np.arange(k)
    for i, w in enumerate(chosen):
        if i < k:
            pos = int(np.argmax(mats[w, i]))
            mats[w, i, [i, pos]] = mats[w, i, [pos, i]]
            kinds[w] = "specialist"
        else:
            pos = np.argmin(mats[w], axis=1)
            diag = mats[w, rows, rows].copy()
            mats[w, rows, rows] = mats[w, rows, pos]
            mats[w, rows, pos] = diag
            kinds[w] = "worse_than_random"
    mats /= mats.sum(axis=2, keepdims=True)
    return mats, kinds


#: Max-MIG (H) Dogs-vs-Cats seniors, paper App. B.1, as (P(correct | cat),
#: P(correct | dog)); class 0 is "cat".  The paper lists dog/cat accuracies
#: A 0.6/0.8, B 0.6/0.6, C 0.9/0.6, D 0.7/0.7, E 0.6/0.7 (the released code
#: uses different matrices; see ALGORITHMS.md §14.1).
MAXMIG_SENIORS: tuple[tuple[float, float], ...] = (
    (0.8, 0.6),  # A
    (0.6, 0.6),  # B
    (0.6, 0.9),  # C
    (0.7, 0.7),  # D
    (0.7, 0.6),  # E
)


def pairwise_flipper_matrices(rng: np.random.Generator, m: int, k: int, skill: tuple[float, float]) -> np.ndarray:
    """Tanno et al. 2019's pairwise flippers, shape (m, K, K): worker ``w`` is right w.p. ``p_w ~ Uniform(skill)``,
    otherwise answers one fixed other class per true class, that target drawn uniformly for each (worker, class)."""
    p = rng.uniform(skill[0], skill[1], size=m)
    target = (np.arange(k)[None, :] + rng.integers(1, k, size=(m, k))) % k  # never the class itself
    mats = np.zeros((m, k, k))
    rows = np.arange(k)
    for w in range(m):
        mats[w, rows, target[w]] = 1.0 - p[w]
        mats[w, rows, rows] = p[w]
    return mats


def maxmig_seniors() -> np.ndarray:
    """The five binary Max-MIG seniors A--E, shape (5, 2, 2), rows ``[P(.|cat), P(.|dog)]``."""
    return np.array([[[a0, 1 - a0], [1 - a1, a1]] for a0, a1 in MAXMIG_SENIORS])


#: Max-MIG's CIFAR-10 hard pairs (App. B.1), as (the member expert A always answers, the other): airplane/bird,
#: automobile/truck, cat/dog, deer/horse, frog/ship.  Classes of different pairs are never confused.
MAXMIG_HARD_PAIRS: tuple[tuple[int, int], ...] = ((0, 2), (1, 9), (3, 5), (4, 7), (6, 8))


def maxmig_cifar_seniors() -> np.ndarray:
    """The five Max-MIG (H) CIFAR-10 seniors A--E, shape (5, 10, 10) ``[w, true, observed]`` (App. B.1).

    On each hard pair (:data:`MAXMIG_HARD_PAIRS`) A always answers the
    pair's first member, B answers either member w.p. 0.5, C is perfect on
    cat/dog and deer/horse and B-like on the rest, D is perfect on
    airplane/bird, automobile/truck and frog/ship and A-like on the rest, E
    is right w.p. 0.6 and swaps w.p. 0.4.  No one confuses classes of
    different pairs.
    """
    same = np.array([[1.0, 0.0], [1.0, 0.0]])  # rows: true first, true second; columns: answer first, second
    coin = np.full((2, 2), 0.5)
    perfect = np.eye(2)
    mammals = {(3, 5), (4, 7)}
    behaviour = {
        "A": lambda pair: same,
        "B": lambda pair: coin,
        "C": lambda pair: perfect if pair in mammals else coin,
        "D": lambda pair: same if pair in mammals else perfect,
        "E": lambda pair: np.array([[0.6, 0.4], [0.4, 0.6]]),
    }
    mats = np.zeros((5, 10, 10))
    for w, rule in enumerate(behaviour.values()):
        for pair in MAXMIG_HARD_PAIRS:
            idx = np.array(pair)
            mats[w][np.ix_(idx, idx)] = rule(pair)
    return mats


def constant_matrices(m: int, k: int, answer: int) -> np.ndarray:
    """Workers who answer class ``answer`` whatever the truth (Max-MIG's naive juniors), shape (m, K, K)."""
    mats = np.zeros((m, k, k))
    mats[:, :, answer] = 1.0
    return mats


#: Worker models of ``simulate(model=...)``, by name, in the order the errors list them.
REGISTRY: dict[str, WorkerModel] = {
    spec.name: spec
    for spec in (
        WorkerModel(
            "ds",
            "full confusion: diagonal ~ Uniform(skill), off-diagonal mass split by Dirichlet(1,...,1)",
            "ds",
            ds_matrices,
        ),
        WorkerModel(
            "onecoin",
            "one accuracy per worker ~ Uniform(skill), errors uniform over the other classes",
            "onecoin",
            _onecoin_matrices,
        ),
        WorkerModel(
            "hammer-spammer",
            "hammers (one-coin, accuracy skill[1]) and spammers answering uniformly at random",
            "hammer",
            _hammer_matrices,
            uniform_spammers=True,
            default_spammers=0.5,
        ),
        WorkerModel(
            "glad",
            "GLAD: ability logit(p), p ~ Uniform(skill); task beta = exp(N(0, difficulty_spread^2)); "
            "P(correct) = sigmoid(ability * beta), errors uniform",
            "glad",
            _glad_matrices,
            uniform_spammers=True,
            task_parameters=True,
        ),
    )
}


def _roles(
    rng: np.random.Generator, m: int, spammers: float, adversaries: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Indices of the ``round(spammers * m)`` spammers, ``round(adversaries * m)`` adversaries and the rest.

    The positions are one random permutation of the workers.
    """
    n_spam = min(m, round(spammers * m))
    n_adv = min(m - n_spam, round(adversaries * m))
    perm = rng.permutation(m)
    return perm[:n_spam], perm[n_spam : n_spam + n_adv], perm[n_spam + n_adv :]


def _kinds(m: int, groups: tuple[tuple[np.ndarray, str], ...]) -> list[str]:
    """The ``worker_kind`` list: each group's workers get its name."""
    kinds = [""] * m
    for idx, name in groups:
        for w in idx:
            kinds[w] = name
    return kinds


def crowd_matrices(
    rng: np.random.Generator,
    m: int,
    k: int,
    model: str,
    skill: tuple[float, float],
    spammers: float,
    adversaries: float,
) -> tuple[np.ndarray, list[str]]:
    """Confusion matrices and kinds of ``m`` workers: ``model`` workers mixed with spammers and adversaries.

    ``round(spammers * m)`` spammers and ``round(adversaries * m)`` adversaries
    sit at random positions; the others follow ``REGISTRY[model]``.
    """
    spec = REGISTRY[model]
    spam_idx, adv_idx, rest = _roles(rng, m, spammers, adversaries)
    if adv_idx.size and not (skill[0] >= 1.0 / k and skill[1] > 1.0 / k):
        raise UsageError(
            f"{param('adversaries')} report a wrong class with probability drawn from {param('skill')}={skill}; "
            f"{param('skill')} must lie above 1/{param('n_classes')}={1.0 / k:.3g} for them to be malicious"
        )
    confusion = np.empty((m, k, k))
    confusion[rest] = spec.draw(rng, rest.size, k, skill)
    confusion[spam_idx] = spammer_matrices(rng, spam_idx.size, k, uniform=spec.uniform_spammers)
    confusion[adv_idx] = adversary_matrices(rng, adv_idx.size, k, skill)
    return confusion, _kinds(m, ((rest, spec.kind), (spam_idx, "spammer"), (adv_idx, "adversary")))


def glad_workers(
    rng: np.random.Generator,
    m: int,
    k: int,
    skill: tuple[float, float],
    spammers: float,
    adversaries: float,
) -> tuple[np.ndarray, list[str]]:
    """GLAD abilities and kinds of ``m`` workers, mixed with spammers and adversaries as :func:`crowd_matrices`.

    * GLAD workers (kind ``"glad"``): ``alpha = logit(p)``, ``p ~
      Uniform(skill)`` -- ``p`` is their accuracy on a task with ``beta = 1``;
    * adversaries: ``alpha = -logit(p)``, the mirror image (accuracy ``1 -
      p`` at ``beta = 1``, falling to 0 as tasks get easier); ``skill`` must
      lie above 1/2 for their ability to be negative;
    * spammers answer uniformly at random: ``alpha = 0`` for K = 2, NaN for
      K > 2, where no ability gives accuracy ``1/K`` on every task (see
      :mod:`crowdagg.simulate.glad`).

    ``skill`` must lie strictly inside (0, 1) (checked by the caller).

    Returns
    -------
    alpha : ndarray of float64, shape (m,)
    kinds : list of str, length m
    """
    spam_idx, adv_idx, rest = _roles(rng, m, spammers, adversaries)
    if adv_idx.size and not (skill[0] >= 0.5 and skill[1] > 0.5):
        raise UsageError(
            f"{param('adversaries')} of {param('model')}='glad' have ability -logit(p), p drawn from "
            f"{param('skill')}={skill}; {param('skill')} must lie above 0.5 for their ability to be negative"
        )
    alpha = np.empty(m)
    alpha[rest] = glad.abilities(rng.uniform(skill[0], skill[1], size=rest.size))
    alpha[spam_idx] = 0.0 if k == 2 else np.nan
    alpha[adv_idx] = -glad.abilities(rng.uniform(skill[0], skill[1], size=adv_idx.size))
    return alpha, _kinds(m, ((rest, "glad"), (spam_idx, "spammer"), (adv_idx, "adversary")))
