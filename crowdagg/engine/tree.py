"""The fixed-shape reduction: block sums added along a pairwise tree over the block indices.

The blocks 0 .. n-1 of the grid (:mod:`.grid`) are the leaves of a binary
tree: node ``(level, j)`` covers blocks ``[j·2^level, (j+1)·2^level)``,
clipped at ``n``, and its value is ``left + right`` (its left child alone
when the right one lies past ``n``).  The total is the root's value.

A partition of the blocks into contiguous ranges -- the threads of the
local engine, the partitions of a Dask collection -- computes, for its
range, the values of the maximal nodes that lie inside it (:func:`cover`:
O(log n) of them) and sends those; :func:`combine` rebuilds the root from
any such set.  A node's value is computed the same way by whoever
computes it, so the total is bit-identical for every aligned
partitioning: any number of threads, processes or Dask workers.  A range
streams its blocks through a stack of at most log₂ n + 1 partial sums
(:class:`Stream`), so memory follows the tree's depth, not blocks ×
accumulator.

The values are *sums*: a float, a NumPy array, a tuple of sums (added
elementwise), or an object with ``__add__`` (e.g. a sparse accumulator
whose missing keys are zeros).  Arrays are added in place into the left
operand, which the tree owns: a block function returns fresh arrays.
Adding zero leaves a float unchanged, so a sparse sum (absent = zero)
adds to the same bits as its dense form.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

import numpy as np

from ..errors import DataError

Node = tuple[int, int]  # (level, index)


def add(a: Any, b: Any) -> Any:
    """``a + b`` for sums: arrays in place into ``a``, tuples elementwise, anything else by ``+``."""
    if isinstance(a, np.ndarray):
        if type(b) is np.ndarray and b.shape == a.shape and b.dtype == a.dtype:  # the common case, checked cheaply
            np.add(a, b, out=a)
            return a
        if np.shape(b) != a.shape:  # a broadcast would hide a block function that returned the wrong shape
            raise DataError(f"block sums of different shapes cannot be added: {a.shape} and {np.shape(b)}")
        if a.dtype == np.result_type(a, b):
            np.add(a, b, out=a)
            return a
        return a + b
    if isinstance(a, tuple):
        return tuple(add(x, y) for x, y in zip(a, b, strict=True))
    return a + b


def depth(n: int) -> int:
    """Level of the root of the tree over ``n`` blocks: ceil(log₂ n) (0 for one block)."""
    return max(int(n) - 1, 0).bit_length()


def cover(lo: int, hi: int, n: int) -> list[Node]:
    """The maximal tree nodes inside the block range ``[lo, hi)`` of ``n`` blocks, left to right.

    A node counts as inside when its clipped range ``[j·2^l, min((j+1)·2^l, n))``
    lies within ``[lo, hi)``.  O(log n) nodes.
    """
    if not 0 <= lo <= hi <= n:
        raise DataError(f"block range [{lo}, {hi}) is not within the {n} blocks of the grid")
    out: list[Node] = []
    _visit(depth(n), 0, lo, hi, n, out)
    return out


# The recursions are module functions, not closures: a nested function that calls itself holds its own cell, a
# reference cycle that keeps what it closes over (combine's node values: workers × K² tables) alive until the
# cyclic collector runs -- which large numpy arrays never trigger, so a fit kept one more table each iteration.
def _visit(level: int, j: int, lo: int, hi: int, n: int, out: list[Node]) -> None:
    start = j << level
    stop = min((j + 1) << level, n)
    if stop <= lo or start >= hi or start >= n:
        return
    if lo <= start and stop <= hi:
        out.append((level, j))
        return
    _visit(level - 1, 2 * j, lo, hi, n, out)
    _visit(level - 1, 2 * j + 1, lo, hi, n, out)


def node_range(node: Node, n: int) -> range:
    """The blocks a node covers (clipped at ``n``)."""
    level, j = node
    return range(j << level, min((j + 1) << level, n))


class Stream:
    """A node's value from its blocks' sums, given in block order: a stack of at most depth + 1 partial sums.

    Push each block's sum with :meth:`push`; :meth:`value` gives the node's
    value exactly as the tree defines it (complete subtrees merged as they
    close, the clipped rest folded from the right).
    """

    def __init__(self) -> None:
        self._stack: list[tuple[int, Any]] = []  # (level, sum), levels strictly decreasing

    def push(self, value: Any) -> None:
        level = 0
        while self._stack and self._stack[-1][0] == level:
            _, left = self._stack.pop()
            value = add(left, value)
            level += 1
        self._stack.append((level, value))

    def value(self) -> Any:
        if not self._stack:
            raise DataError("a tree node with no blocks")
        total = self._stack[-1][1]
        for _, left in reversed(self._stack[:-1]):
            total = add(left, total)
        self._stack.clear()
        return total


def reduce_range(lo: int, hi: int, n: int, block: Callable[[int], Any]) -> dict[Node, Any]:
    """The values of :func:`cover`'s nodes of ``[lo, hi)``, computing block ``b``'s sum as ``block(b)``, in order."""
    out: dict[Node, Any] = {}
    for node in cover(lo, hi, n):
        stream = Stream()
        for b in node_range(node, n):
            stream.push(block(b))
        out[node] = stream.value()
    return out


def merge(nodes: dict[Node, Any], n: int) -> dict[Node, Any]:
    """``nodes`` (a dict of node values, changed in place and returned) with every pair of sibling nodes present
    replaced by their parent -- ``left + right``, or ``left`` alone where the right child lies past the ``n``
    blocks: :func:`combine`'s own rule, so merging as partial results arrive, in any order, leaves the root's
    bits as they are.  The values are added in place: they must be the caller's to change."""
    top = depth(n)
    merged = True
    while merged:
        merged = False
        for level, j in sorted(nodes):  # children before parents
            if j % 2 or level >= top or (level, j) not in nodes:
                continue
            if (level, j + 1) in nodes:
                nodes[(level + 1, j // 2)] = add(nodes.pop((level, j)), nodes.pop((level, j + 1)))
                merged = True
            elif ((j + 1) << level) >= n:
                nodes[(level + 1, j // 2)] = nodes.pop((level, j))
                merged = True
    return nodes


def combine(nodes: Mapping[Node, Any], n: int) -> Any:
    """The root's value from node values covering all ``n`` blocks (the union of ranges' :func:`cover` values).

    Raises :class:`~crowdagg.errors.DataError` when a block is covered by
    no given node (a partition's sums are missing).
    """
    if n < 1:
        raise DataError("a reduction over no blocks")
    return _value(depth(n), 0, nodes, n)


def _value(level: int, j: int, nodes: Mapping[Node, Any], n: int) -> Any:
    """Node ``(level, j)``'s value for :func:`combine` (a module function: see :func:`_visit`)."""
    if (level, j) in nodes:
        return nodes[(level, j)]
    if level == 0:
        raise DataError(f"the sums of block {j} of {n} are missing (no partition covered it)")
    left = _value(level - 1, 2 * j, nodes, n)
    if ((2 * j + 1) << (level - 1)) >= n:
        return left
    return add(left, _value(level - 1, 2 * j + 1, nodes, n))


def ranges(n: int, parts: int) -> Iterator[tuple[int, int]]:
    """``parts`` contiguous block ranges of about equal size covering ``[0, n)`` (empty ones left out)."""
    cuts = np.linspace(0, n, max(int(parts), 1) + 1).astype(np.int64)
    for lo, hi in zip(cuts[:-1], cuts[1:]):
        if hi > lo:
            yield int(lo), int(hi)
