"""The reduction tree: any aligned partitioning of the blocks gives the same bits as the tree's definition."""

from __future__ import annotations

import numpy as np
import pytest

from crowdagg.engine import tree
from crowdagg.errors import DataError


def _blocks(n: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    # magnitudes 1e-8 .. 1e8: a different association order changes the last bits
    return rng.standard_normal((n, 40)) * 10.0 ** rng.integers(-8, 8, (n, 1))


def _by_definition(x: np.ndarray) -> np.ndarray:
    """The tree's value straight from its definition: node = left + right, the right child dropped past n."""
    n = len(x)

    def node(level: int, j: int) -> np.ndarray:
        if level == 0:
            return x[j].copy()
        left = node(level - 1, 2 * j)
        return left if ((2 * j + 1) << (level - 1)) >= n else left + node(level - 1, 2 * j + 1)

    return node(tree.depth(n), 0)


@pytest.mark.parametrize("n", [1, 2, 3, 5, 8, 13, 64, 100, 257])
def test_every_partitioning_gives_the_definitions_bits(n: int) -> None:
    x = _blocks(n)
    want = _by_definition(x)
    assert np.allclose(want, x.sum(axis=0))
    for parts in sorted({1, 2, 3, 7, n}):
        nodes: dict = {}
        for lo, hi in tree.ranges(n, parts):
            nodes.update(tree.reduce_range(lo, hi, n, lambda b: x[b].copy()))
        assert np.array_equal(tree.combine(nodes, n), want), (n, parts)


@pytest.mark.parametrize("n", [1, 2, 3, 5, 8, 13, 64, 100, 257])
def test_merging_ranges_as_they_arrive_in_any_order_gives_the_definitions_bits(n: int) -> None:
    """tree.merge after each range's nodes (the local engine as its threads finish, Dask's workers pairwise)."""
    x = _blocks(n, seed=1)
    want = _by_definition(x)
    rng = np.random.default_rng(n)
    for parts in sorted({1, 2, 3, 7, 12, n}):
        spans = list(tree.ranges(n, parts))
        for order in (range(len(spans)), rng.permutation(len(spans))):
            nodes: dict = {}
            for i in order:
                lo, hi = spans[i]
                nodes.update(tree.reduce_range(lo, hi, n, lambda b: x[b].copy()))
                tree.merge(nodes, n)
            if parts == n:  # every block its own range: all merged up to the root
                assert list(nodes) == [(tree.depth(n), 0)]
            assert np.array_equal(tree.combine(nodes, n), want), (n, parts, list(order))


def test_the_tree_order_differs_from_a_running_sum() -> None:
    """The test above can fail: the blocks' magnitudes make the association order visible in the bits."""
    x = _blocks(100)
    running = x[0].copy()
    for row in x[1:]:
        running += row
    assert not np.array_equal(running, _by_definition(x))


def test_cover_is_logarithmic_and_exact() -> None:
    n = 1000
    for lo, hi in [(0, 1000), (1, 999), (3, 517), (500, 501), (0, 0)]:
        nodes = tree.cover(lo, hi, n)
        covered = [b for node in nodes for b in tree.node_range(node, n)]
        assert covered == list(range(lo, hi))
        assert len(nodes) <= 2 * tree.depth(n)


def test_stream_memory_is_the_depth() -> None:
    stream = tree.Stream()
    most = 0
    for _ in range(1000):
        stream.push(np.ones(3))
        most = max(most, len(stream._stack))
    assert most <= tree.depth(1000) + 1
    assert np.array_equal(stream.value(), np.full(3, 1000.0))


def test_sums_of_several_kinds() -> None:
    nodes = tree.reduce_range(0, 5, 5, lambda b: (np.full(2, float(b)), float(b), b))
    total = tree.combine(nodes, 5)
    assert np.array_equal(total[0], np.full(2, 10.0)) and total[1] == 10.0 and total[2] == 10


def test_missing_blocks_and_bad_ranges_are_clear_errors() -> None:
    nodes = tree.reduce_range(0, 3, 8, lambda b: 1.0)
    with pytest.raises(DataError, match="block 3 of 8"):
        tree.combine(nodes, 8)
    with pytest.raises(DataError, match="not within"):
        tree.cover(2, 9, 8)
    with pytest.raises(DataError, match="no blocks"):
        tree.combine({}, 0)


def test_sums_of_different_shapes_are_refused_not_broadcast() -> None:
    with pytest.raises(DataError, match="different shapes"):
        tree.add(np.zeros(3), np.zeros((2, 3)))
    with pytest.raises(DataError, match="different shapes"):
        tree.combine(tree.reduce_range(0, 2, 2, lambda b: np.zeros(b + 1)), 2)


def test_a_reduction_leaves_no_reference_cycle_holding_its_sums():
    """combine and cover recursed through closures that held themselves: a cycle keeping the node values (a fit's
    workers × K² tables) alive until the cyclic collector ran, which large arrays never trigger -- ds at K = 300
    grew by one table an iteration (18 tables after 12 iterations, 5 now)."""
    import gc
    import weakref

    n = 6
    held = [np.full(3, float(b)) for b in range(n)]
    refs = [weakref.ref(v) for v in held]
    enabled = gc.isenabled()
    gc.disable()
    try:
        nodes = tree.reduce_range(0, n, n, held.__getitem__)
        total = tree.combine(nodes, n)
        assert total.tolist() == [15.0] * 3
        assert tree.cover(1, 5, n) == [(0, 1), (1, 1), (0, 4)]
        del nodes, total, held
        assert all(r() is None for r in refs)  # freed by reference counting alone
    finally:
        if enabled:
            gc.enable()

