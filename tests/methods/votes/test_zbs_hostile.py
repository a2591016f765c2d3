"""zbs against a brute-force full revote on small tie-heavy crowds: the selective revote must give its bits."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from crowdagg.data.annotations import AnnotationSet
from crowdagg.methods.api import aggregate
from crowdagg.methods.blocks import TieBreaker, argmax_random_ties
from crowdagg.methods.votes.zbs import TIE_ATOL, learning_rate


def tie_heavy_crowd(rng: np.random.Generator) -> AnnotationSet:
    """Few workers (equal skills, so exact ties), even answer counts, repeated answers, classes never answered, a
    worker without answers now and then, tasks of one answer."""
    k = int(rng.choice([2, 2, 3, 4, 30]))
    n_tasks, n_workers = int(rng.integers(1, 60)), int(rng.integers(1, 8))
    per = rng.choice([1, 2, 2, 4, 6], n_tasks)
    task = np.repeat(np.arange(n_tasks), per)
    worker = rng.integers(0, n_workers, task.size)
    label = rng.integers(0, int(rng.integers(1, k + 1)), task.size)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # repeated answers are kept as separate votes, as crowd-kit does
        return AnnotationSet.from_codes(task, worker, label, n_tasks=n_tasks,
                                        n_workers=n_workers + int(rng.integers(0, 2)), n_classes=k)


def full_revote(data: AnnotationSet, max_iter: int, lr_init: float, lr_steps_to_reduce: int, lr_reduce_factor: float,
                eps: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Every task voted every iteration, in plain numpy: the skills and the final labels.  Ties drawn as the method
    draws them (by task name and seed); the agreement counts a repeated identical answer once."""
    k = data.n_classes
    once = np.unique(np.stack([data.task, data.worker, data.label], axis=1), axis=0)
    total = np.bincount(once[:, 1], minlength=data.n_workers).astype(float)
    skills = np.full(data.n_workers, 1.0 / k + eps)
    ties = TieBreaker(data.tasks, seed)

    def labels_of(s: np.ndarray) -> np.ndarray:
        votes = np.zeros((data.n_tasks, k))
        np.add.at(votes, (data.task, data.label), s[data.worker])
        return argmax_random_ties(votes, ties, atol=TIE_ATOL)

    for it in range(1, max_iter + 1):
        labels = labels_of(skills)
        right = np.bincount(once[:, 1], weights=(once[:, 2] == labels[once[:, 0]]).astype(float),
                            minlength=data.n_workers)
        target = np.where(total > 0, right / np.maximum(total, 1.0), skills)
        skills = skills + learning_rate(it, lr_init, lr_steps_to_reduce, lr_reduce_factor) * (target - skills)
    return skills, labels_of(skills)


@pytest.mark.quick
@pytest.mark.parametrize("block", range(4))
def test_the_selective_revote_is_a_full_revote_on_tie_heavy_crowds(block):
    """40 random crowds a block, random settings (learning rates 0 .. 1, reductions to 0, eps 0 .. 1, 1 .. 59
    iterations): the same labels and skills as voting every task every iteration (held on 300 seeds by hand)."""
    for seed in range(40 * block, 40 * (block + 1)):
        rng = np.random.default_rng(seed)
        data = tie_heavy_crowd(rng)
        params = dict(max_iter=int(rng.integers(1, 60)), lr_init=float(rng.choice([1.0, 0.5, 0.7, 0.0, 0.25])),
                      lr_steps_to_reduce=int(rng.choice([1, 2, 3, 20])),
                      lr_reduce_factor=float(rng.choice([0.5, 0.0, 1.0, 0.3])),
                      eps=float(rng.choice([0.0, 1e-5, 0.5, 1.0])), seed=int(rng.integers(0, 5)))
        fit = aggregate(data, "zbs", **params)
        skills, labels = full_revote(data, **params)
        np.testing.assert_allclose(fit.worker_params["skill"], skills, rtol=0, atol=1e-12, err_msg=f"seed {seed}")
        np.testing.assert_array_equal(fit.labels, labels, err_msg=f"seed {seed}")
