"""M-MSR's public kernels (``crowdagg.kernels.mmsr``) called with hostile arguments: a clear crowdagg error, never a
read or write outside an array.

Found hostile: the three were the compiled kernels themselves, without bounds checks, so a pair code past
``n_workers`` (``pair_adjacency``) or an offset past the partners (``msr_half_step``) crashed the interpreter
(segmentation fault), and a list was a numba typing error.
"""

from __future__ import annotations

import numpy as np
import pytest

from crowdagg.errors import DataError, UsageError
from crowdagg.kernels.mmsr import msr_half_step, pair_adjacency, rank_one_change

PAIRS, VALUES = np.array([[0, 1], [0, 2], [1, 2]]), np.array([0.5, 0.25, 1.0])


@pytest.mark.quick
@pytest.mark.parametrize(("pairs", "values", "n_workers", "error", "match"), [
    (np.array([[0, 5]]), [1.0], 3, DataError, "pairs code 5 at position 1 is out of range for 3 workers"),
    (np.array([[-1, 1]]), [1.0], 3, DataError, "pairs code -1"),
    (np.array([0, 1]), [1.0], 3, DataError, r"\(P, 2\) array"),
    (np.array([[0.0, 1.0]]), [1.0], 3, DataError, "integers"),
    (PAIRS, [1.0], 3, DataError, "values has 1 entries, not 3"),
    (PAIRS, ["a", "b", "c"], 3, DataError, "numbers"),
    (PAIRS, VALUES, -3, UsageError, "n_workers"),
])
def test_pair_adjacency_refuses_what_it_cannot_index(pairs, values, n_workers, error, match):
    with pytest.raises(error, match=match):
        pair_adjacency(pairs, values, n_workers)


def test_pair_adjacency_takes_lists_and_gives_each_pair_from_both_ends():
    offsets, partner, value = pair_adjacency(PAIRS.tolist(), VALUES.tolist(), 4)
    assert offsets.tolist() == [0, 2, 4, 6, 6]  # worker 3 has no partner
    assert partner.tolist() == [1, 2, 0, 2, 0, 1] and value.tolist() == [0.5, 0.25, 0.5, 1.0, 0.25, 1.0]


def half_step_args(**changes):
    offsets, partner, value = pair_adjacency(PAIRS, VALUES, 3)
    args = dict(offsets=offsets, partner=partner, value=value, other=np.ones(3), current=np.full(3, 0.5), trim=0,
                floor=0.1, out=np.empty(3), scratch=np.empty(2))
    args.update(changes)
    return args


@pytest.mark.parametrize(("changes", "error", "match"), [
    (dict(partner=np.array([1, 2, 9, 2, 0, 1])), DataError, "partner code 9 at position 2 is out of range for 3"),
    (dict(offsets=np.array([0, 10**6, 4, 6])), DataError, "non-decreasing"),
    (dict(offsets=np.array([0, 2, 4, 9])), DataError, "from 0 to 6"),
    (dict(value=np.ones(2)), DataError, "value has 2 entries, not 6"),
    (dict(other=np.ones(2)), DataError, "partner code 2 at position 1 is out of range for 2"),
    (dict(current=np.ones(5)), DataError, "current has 5 entries, not 3"),
    (dict(out=np.empty(2)), DataError, "out has 2 entries"),
    (dict(out=[0.0, 0.0, 0.0]), DataError, "writable float64 ndarray"),
    (dict(scratch=np.empty(1)), DataError, "fewer than the largest degree 2"),
    (dict(trim=-1), UsageError, "trim"),
    (dict(floor=float("nan")), UsageError, "floor"),
])
def test_msr_half_step_refuses_arrays_that_do_not_fit_one_another(changes, error, match):
    with pytest.raises(error, match=match):
        msr_half_step(**half_step_args(**changes))


def test_msr_half_step_checked_is_the_trimmed_mean():
    args = half_step_args()
    msr_half_step(**args)
    np.testing.assert_allclose(args["out"], [0.375, 0.75, 0.625])  # each worker's mean of its two entries


def test_rank_one_change_refuses_vectors_of_other_lengths_or_shapes():
    with pytest.raises(DataError, match="v has 2 entries, not 3"):
        rank_one_change(np.ones(3), np.ones(2), np.ones(3), np.ones(3))
    with pytest.raises(DataError, match="1-D"):
        rank_one_change(np.ones((2, 2)), np.ones(2), np.ones(2), np.ones(2))
    assert rank_one_change([1.0], [1.0], [1.0], [2.0]) == 1.0
