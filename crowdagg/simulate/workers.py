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
* Max-MIG workers (Cao, Xu, Kong & Wang, ICLR 2019, arXiv:1905.13436,
  App. B.1): the (H) Dogs-vs-Cats seniors (:func:`maxmig_seniors`), juniors
  who always answer one class (:func:`constant_matrices`); copiers take their
  source's matrix and repeat its answers (see ``copy_of`` in
  :mod:`crowdagg.simulate.crowd`).

:data:`REGISTRY` maps each name accepted by ``simulate(model=...)`` to its
:class:`WorkerModel`; :func:`crowd_matrices` mixes one model with spammers
and adversaries.  Every draw uses the ``np.random.Generator`` passed in.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..errors import UsageError, param
from ..methods.blocks import one_coin_matrices

#: ``draw(rng, n_workers, n_classes, skill)`` -> confusion matrices, shape (n_workers, K, K).
MatrixDraw = Callable[[np.random.Generator, int, int, tuple[float, float]], np.ndarray]


@dataclass(frozen=True)
class WorkerModel:
    """A worker model of ``simulate(model=...)``.

    ``kind`` is the ``worker_kind`` of its (non-spammer, non-adversary)
    workers; ``uniform_spammers`` makes its spammers answer uniformly at
    random instead of by a Dirichlet(1) draw; ``default_spammers`` is the
    spammer fraction when ``spammers`` is not given.
    """

    name: str
    description: str
    kind: str
    draw: MatrixDraw
    uniform_spammers: bool = False
    default_spammers: float = 0.0


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


def maxmig_seniors() -> np.ndarray:
    """The five binary Max-MIG seniors A--E, shape (5, 2, 2), rows ``[P(.|cat), P(.|dog)]``."""
    return np.array([[[a0, 1 - a0], [1 - a1, a1]] for a0, a1 in MAXMIG_SENIORS])


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
    )
}


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
    n_spam = min(m, round(spammers * m))
    n_adv = min(m - n_spam, round(adversaries * m))
    if n_adv and not (skill[0] >= 1.0 / k and skill[1] > 1.0 / k):
        raise UsageError(
            f"{param('adversaries')} report a wrong class with probability drawn from {param('skill')}={skill}; "
            f"{param('skill')} must lie above 1/{param('n_classes')}={1.0 / k:.3g} for them to be malicious"
        )
    perm = rng.permutation(m)
    spam_idx, adv_idx, rest = perm[:n_spam], perm[n_spam : n_spam + n_adv], perm[n_spam + n_adv :]
    confusion = np.empty((m, k, k))
    kinds = [""] * m
    confusion[rest] = spec.draw(rng, rest.size, k, skill)
    confusion[spam_idx] = spammer_matrices(rng, spam_idx.size, k, uniform=spec.uniform_spammers)
    confusion[adv_idx] = adversary_matrices(rng, adv_idx.size, k, skill)
    for idx, name in ((rest, spec.kind), (spam_idx, "spammer"), (adv_idx, "adversary")):
        for w in idx:
            kinds[w] = name
    return confusion, kinds
