"""Max-MIG's three information structures as crowds on given items: features and truth in, answers out.

Cao, Xu, Kong & Wang (ICLR 2019), "Max-MIG: an information theoretic
approach for joint learning from crowds", arXiv:1905.13436, §4 and App. B.1
(ALGORITHMS.md §14.1).  Every expert labels every item; the three cases
share their senior experts, so they carry the same information about the
truth, and only its structure changes:

* ``independent`` (case 4.1): the seniors alone, conditionally independent
  given the truth;
* ``naive-majority`` (4.2): the seniors, plus juniors who label every item
  as class 0 without looking;
* ``correlated`` (4.3): the seniors, plus juniors who copy a senior's label
  on every item: in (H) two copy senior A and three copy C, in (L) one
  copies A and one C.

The seniors (App. B.1), by the number of classes of ``truth``:

* K = 10, the CIFAR-10 experts: (H) five seniors A--E who confuse only the
  members of five hard pairs (:func:`~crowdagg.simulate.workers.maxmig_cifar_seniors`);
  (L) ten one-coin seniors right w.p. 0.2, otherwise uniform over the nine
  other classes.  (H): 5 juniors in cases 4.2 and 4.3; (L): 15 and 2.
* K = 2, the Dogs-vs-Cats experts: (H) the five seniors of
  :func:`~crowdagg.simulate.workers.maxmig_seniors`; (L) ten at 0.55/0.55.

Unlike :func:`crowdagg.simulate.simulate`'s ``maxmig-*`` scenarios, which
draw their truth (and have no features), these crowds label *given* items
-- a real data set's features and truth (scikit-learn's digits: K = 10) --
so a trainer can be scored on them.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..core import memory
from ..core.checks import check_int, check_seed
from ..errors import UsageError, param
from ..methods.blocks import one_coin_matrices
from .args import check_size, choice_arg
from .assignment import dense_assignment
from .crowd import SimulatedCrowd, copy_answers, sample_labels
from .workers import constant_matrices, maxmig_cifar_seniors, maxmig_seniors

#: The paper's three cases (§4.1-4.3), in its order.
CASES = ("independent", "naive-majority", "correlated")
#: The two expertise levels: (H) high, (L) low.
EXPERTISE = ("H", "L")
#: Seniors whose labels the correlated juniors copy, by expertise: (H) A, A, C, C, C; (L) A, C.
_COPIED = {"H": (0, 0, 2, 2, 2), "L": (0, 2)}
#: Naive juniors (always class 0), by expertise.
_NAIVE = {"H": 5, "L": 15}
#: The (L) seniors' one-coin accuracy, by the number of classes (CIFAR-10's 0.2, Dogs-vs-Cats' 0.55).
_LOW_ACCURACY = {10: 0.2, 2: 0.55}


def seniors(n_classes: int, expertise: str) -> np.ndarray:
    """The senior experts' confusions (M_s, K, K) ``[w, true, observed]`` for K = 2 or 10 (App. B.1)."""
    if n_classes not in _LOW_ACCURACY:
        raise UsageError(f"Max-MIG's experts are defined for 2 classes (Dogs vs. Cats) and 10 (CIFAR-10), got "
                         f"{param('n_classes')}={n_classes}")
    if choice_arg("expertise", expertise, EXPERTISE) == "H":  # anything else read as "L"
        return maxmig_cifar_seniors() if n_classes == 10 else maxmig_seniors()
    return one_coin_matrices(np.full(10, _LOW_ACCURACY[n_classes]), n_classes)


def maxmig_case(features: Any, truth: Any, case: str, *, expertise: str = "H", n_classes: int | None = None,
                seed: int = 0, max_memory: memory.MaxMemory = None) -> SimulatedCrowd:
    """Answers of Max-MIG's case ``case`` on items of known ``truth``: every expert labels every item.

    Parameters
    ----------
    features : array-like, shape (n_tasks, d)
        The items' features, finite in float32, kept in the result (:attr:`SimulatedCrowd.features`) for a
        trainer.
    truth : array-like of int, shape (n_tasks,)
        Each item's class in ``0 .. n_classes - 1``.
    case : {"independent", "naive-majority", "correlated"}
        The information structure (module docstring).
    expertise : {"H", "L"}
        The seniors' level (App. B.1).
    n_classes : int, optional
        K, 2 or 10 (default ``max(truth) + 1``; 2 for no items).
    seed : int
        Seed of ``np.random.default_rng``: the seniors' answers, drawn first and alone, so the three cases
        share them exactly at one seed (only the juniors differ).

    Returns
    -------
    SimulatedCrowd
        Workers: the seniors first (kind ``"senior"``), then the juniors
        (``"junior_constant"`` or ``"copier"``, ``copy_of`` naming the
        copied senior); ``confusion`` a copier's source's matrix; ``prior``
        the class frequencies of ``truth``.
    """
    case = choice_arg("case", case, CASES)
    expertise = choice_arg("expertise", expertise, EXPERTISE)
    seed = check_seed(seed)
    y = np.asarray(truth)
    if y.ndim == 1 and not y.size:
        y = y.astype(np.int64)  # [] and np.zeros(0) are float: no items is no wrong class
    if y.ndim != 1 or (y.size and y.dtype.kind not in "iu"):
        raise UsageError(f"{param('truth')} must be a 1-d array of class indices, got shape {y.shape}, dtype {y.dtype}")
    if n_classes is None:
        k = int(y.max()) + 1 if y.size else 2
        if k not in _LOW_ACCURACY:
            raise UsageError(f"Max-MIG's experts are defined for 2 classes (Dogs vs. Cats) and 10 (CIFAR-10); "
                             f"{param('truth')} has classes up to {k - 1} (pass {param('n_classes')} for classes "
                             "it does not hold)")
    else:
        k = check_int("n_classes", n_classes, 1)  # 0 read as "not given", "2" and 2.0 passed, -2 gave 0..-3
    if y.size and (y.min() < 0 or y.max() >= k):
        bad = int(y[(y < 0) | (y >= k)][0])
        raise UsageError(f"{param('truth')} must be class indices in 0..{k - 1}, got {bad}")
    try:
        with np.errstate(over="ignore", invalid="ignore"):  # a value beyond float32 is refused below, not warned
            x = np.asarray(features, dtype=np.float32)
    except (TypeError, ValueError) as exc:  # strings, ragged rows: numpy's own ValueError
        raise UsageError(f"{param('features')} must be numbers: {exc}") from None
    if x.ndim != 2 or x.shape[0] != y.shape[0]:
        raise UsageError(f"{param('features')} must be (n_tasks, d) with a row per truth label ({y.shape[0]:,}), "
                         f"got shape {x.shape}")
    if not np.isfinite(x).all():  # NaN, inf, or beyond float32 (1e300 became inf with a RuntimeWarning)
        row = int(np.flatnonzero(~np.isfinite(x).all(axis=1))[0])
        raise UsageError(f"{param('features')} must be finite float32 values: row {row:,} holds NaN, inf or a "
                         "value beyond float32's range")
    senior = seniors(k, expertise)
    n_seniors = senior.shape[0]
    if case == "naive-majority":
        juniors, kind = constant_matrices(_NAIVE[expertise], k, 0), "junior_constant"
        copy_of = np.full(juniors.shape[0], -1, dtype=np.int64)
    elif case == "correlated":
        copy_of = np.asarray(_COPIED[expertise], dtype=np.int64)
        juniors, kind = senior[copy_of], "copier"
    else:
        juniors, kind, copy_of = np.empty((0, k, k)), "", np.empty(0, dtype=np.int64)
    confusion = np.concatenate([senior, juniors])
    m, n = confusion.shape[0], y.shape[0]
    check_size(n, m, k, n * m, max_memory)
    copy_of = np.concatenate([np.full(n_seniors, -1, dtype=np.int64), copy_of])
    rng = np.random.default_rng(seed)
    # The seniors' answers first, on their own: the three cases share them exactly at the same seed.
    truth_of = y.astype(np.int64)
    task, worker = dense_assignment(n, n_seniors)
    grid = np.empty((n, m), dtype=np.int8 if k <= 127 else np.int16)
    grid[:, :n_seniors] = sample_labels(rng, senior, worker, truth_of[task]).reshape(n, n_seniors)
    task, worker = dense_assignment(n, m)
    label = grid.reshape(-1)
    juniors_at = np.flatnonzero(worker >= n_seniors)
    label[juniors_at] = sample_labels(rng, confusion, worker[juniors_at], truth_of[task[juniors_at]])
    copy_answers(task, worker, label, copy_of, n)
    kinds = np.asarray(["senior"] * n_seniors + [kind] * juniors.shape[0], dtype=object)
    return SimulatedCrowd(
        task=task, worker=worker, label=label, truth=y.astype(np.int64), confusion=confusion,
        prior=np.bincount(y, minlength=k) / max(n, 1), worker_kind=kinds, n_classes=k, copy_of=copy_of, features=x,
    )
