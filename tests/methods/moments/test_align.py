"""The class order of a moment estimate (crowdagg.methods.moments.align): from the average confusion, never truth."""

from __future__ import annotations

import itertools

import numpy as np

from crowdagg.methods.moments.align import common_order, reorder


def _crowd_matrices(rng, n_workers: int, k: int, diag: float) -> np.ndarray:
    """Column-stochastic matrices [w, observed, true] with ``diag`` on the diagonal on average."""
    conf = rng.dirichlet(np.ones(k), size=(n_workers, k)).transpose(0, 2, 1) * (1 - diag)
    conf[:, np.arange(k), np.arange(k)] += diag
    return conf


def test_a_common_permutation_is_undone():
    rng = np.random.default_rng(0)
    conf = _crowd_matrices(rng, 30, 4, 0.6)
    prior = rng.dirichlet(np.ones(4))
    for perm in itertools.permutations(range(4)):
        shuffled = conf[:, :, perm]
        order = common_order(shuffled)
        back, p = reorder(shuffled, prior[list(perm)], order)
        np.testing.assert_array_equal(back, conf)
        np.testing.assert_array_equal(p, prior)


def test_a_minority_of_adversaries_keeps_its_off_diagonal_matrices():
    rng = np.random.default_rng(1)
    conf = _crowd_matrices(rng, 20, 3, 0.7)
    conf[:6] = conf[:6][:, [1, 2, 0], :]  # six workers answer a shifted class: the order is the majority's
    order = common_order(conf[:, :, [2, 0, 1]])
    assert order.tolist() == [1, 2, 0]
    aligned, _ = reorder(conf[:, :, [2, 0, 1]], np.ones(3) / 3, order)
    np.testing.assert_array_equal(aligned, conf)
    assert (np.diagonal(aligned[:6], axis1=1, axis2=2) < 0.5).all()


def test_weights_leave_workers_out():
    rng = np.random.default_rng(2)
    conf = _crowd_matrices(rng, 10, 3, 0.8)
    flipped = conf.copy()
    flipped[5:] = conf[5:][:, :, [1, 0, 2]]
    w = np.r_[np.ones(5), np.zeros(5)]
    assert common_order(flipped, w).tolist() == [0, 1, 2]
    assert common_order(flipped, 1 - w).tolist() == [1, 0, 2]
