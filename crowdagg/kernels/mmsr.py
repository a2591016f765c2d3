r"""M-MSR's kernels: the sparse pair graph of the workers and its trimmed-mean (MSR) half steps.

M-MSR (Ma & Olshevsky 2020, ALGORITHMS.md §7.3) completes the rank-one
matrix :math:`|\tilde C| \approx u v^T` from its entries on the co-labelled
worker pairs only (:mod:`.cooc`'s pair index): no workers × workers array.
The pairs ``(w1, w2)``, ``w1 < w2``, become a CSR adjacency over the workers
(:func:`pair_adjacency`: each pair twice, once from each end, ``2P``
entries), and one half step sets each worker's entry of one factor from the
other factor's entries of its partners (:func:`msr_half_step`):

.. math:: v_j \leftarrow \operatorname{MSR}_{F, v_j}\{\, |\tilde C_{ij}| / u_i : i \text{ co-labels with } j \,\}

the mean of the values left once the ``F`` largest above the current
:math:`v_j` and the ``F`` smallest below it are dropped (fewer where fewer
lie on that side: all of those).  A worker's update reads only the other
factor, so the workers are independent and the result does not depend on
their order; each worker's values are sorted before they are added, so the
sum does not depend on the order of its partners either.  O(P log P) a
half step, 2P floats of scratch.

The compiled kernels (``_``-prefixed) index without bounds checks; the
public functions of the same names check what they are handed first
(:mod:`.validate`: a DataError naming the array, never a write outside one),
and the method calls the kernels directly on arrays it built.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit

from ..errors import DataError, UsageError, param
from .validate import as_code_array, as_float_array, check_count, check_index, check_offsets, check_out_array


@njit(cache=True, nogil=True)
def _pair_adjacency(pairs, values, n_workers):  # pragma: no cover - compiled
    """``(offsets, partner, value)``: the pairs as a CSR adjacency over the workers, each pair from both ends.

    ``pairs`` (P, 2) worker codes ``w1 < w2`` sorted by (w1, w2), ``values``
    (P,) the pair's entry; worker ``w``'s partners are
    ``partner[offsets[w]:offsets[w + 1]]``, ascending (the pairs sorted:
    those with a smaller partner come first, in order), with their values.
    """
    n_pairs = pairs.shape[0]
    offsets = np.zeros(n_workers + 1, dtype=np.int64)
    for p in range(n_pairs):
        offsets[pairs[p, 0] + 1] += 1
        offsets[pairs[p, 1] + 1] += 1
    for w in range(n_workers):
        offsets[w + 1] += offsets[w]
    fill = offsets[:-1].copy()
    partner = np.empty(2 * n_pairs, dtype=np.int32)
    value = np.empty(2 * n_pairs, dtype=np.float64)
    for p in range(n_pairs):
        a, b = pairs[p, 0], pairs[p, 1]
        partner[fill[a]] = b
        value[fill[a]] = values[p]
        fill[a] += 1
        partner[fill[b]] = a
        value[fill[b]] = values[p]
        fill[b] += 1
    return offsets, partner, value


@njit(cache=True, nogil=True)
def _msr_half_step(offsets, partner, value, other, current, trim, floor, out, scratch):  # pragma: no cover
    """``out[j]``: the MSR trimmed mean of ``value / other[partner]`` over worker j's partners, around ``current[j]``.

    Of the sorted values, ``min(trim, #below current[j])`` smallest and
    ``min(trim, #above current[j])`` largest are dropped and the rest
    averaged (crowd-kit's ``_remove_largest_and_smallest_F_value``).  A
    worker without partners, or with every value dropped, keeps
    ``current[j]``; a mean of a single 0 becomes ``floor`` (crowd-kit's
    1/√N), a mean of several zeros stays 0: a worker whose agreement is at
    chance has factor 0, as crowd-kit's.  A partner whose factor is 0 gives
    no number (crowd-kit's 0/0 = NaN, or x/0 = inf for x > 0): as crowd-kit
    sorts them, after every number, they are the first of the largest values
    dropped (an inf counts as above ``current[j]``, a NaN as neither, and
    both go where every value on their side goes); those that crowd-kit
    keeps -- more of them than ``trim`` -- would make its mean NaN, and are
    left out here.  ``scratch`` holds at least the largest degree.
    """
    n = current.shape[0]
    for j in range(n):
        lo, hi = offsets[j], offsets[j + 1]
        a = current[j]
        below = 0
        above = 0
        n_nan = 0
        n_inf = 0
        d = 0
        for e in range(hi - lo):
            o = other[partner[lo + e]]
            if o == 0.0:  # no number: counted for the trim below, never averaged
                if value[lo + e] > 0.0:
                    n_inf += 1
                else:
                    n_nan += 1
                continue
            x = value[lo + e] / o
            scratch[d] = x
            d += 1
            if x < a:
                below += 1
            elif x > a:
                above += 1
        if d == 0:
            out[j] = a
            continue
        drop_lo = min(trim, below)
        if below < trim:  # crowd-kit keeps the values >= current: a NaN goes with those below
            n_nan = 0
        if above + n_inf < trim:  # every value above goes, and every inf (and NaN: crowd-kit keeps <= current)
            drop_hi = above
        else:  # the last `trim` of the sorted values go: NaN and inf first
            drop_hi = max(trim - n_nan - n_inf, 0)
        keep = d - drop_lo - drop_hi
        if keep <= 0:
            out[j] = a
            continue
        y = scratch[:d]
        y.sort()  # in place: the sum in sorted order, whatever the order of the partners
        total = 0.0
        for e in range(drop_lo, d - drop_hi):
            total += y[e]
        mean = total / keep
        out[j] = floor if mean == 0.0 and keep == 1 else mean


@njit(cache=True, nogil=True)
def _rank_one_change(u, v, u_prev, v_prev):  # pragma: no cover - compiled
    r""":math:`\|u v^T - u' v'^T\|_F` in O(n), never the n × n matrix.

    With :math:`\delta_u = u - u'`, :math:`\delta_v = v - v'`:
    :math:`u v^T - u' v'^T = \delta_u v^T + u' \delta_v^T`, whose squared
    norm is :math:`|\delta_u|^2 |v|^2 + 2 (\delta_u \cdot u')(v \cdot
    \delta_v) + |u'|^2 |\delta_v|^2` -- products of small differences, not
    a difference of two large norms, so it keeps its precision down to the
    1e-10 M-MSR stops at.
    """
    du2 = 0.0
    v2 = 0.0
    cross_u = 0.0
    cross_v = 0.0
    up2 = 0.0
    dv2 = 0.0
    for i in range(u.shape[0]):
        du = u[i] - u_prev[i]
        dv = v[i] - v_prev[i]
        du2 += du * du
        dv2 += dv * dv
        v2 += v[i] * v[i]
        up2 += u_prev[i] * u_prev[i]
        cross_u += du * u_prev[i]
        cross_v += v[i] * dv
    sq = du2 * v2 + 2.0 * cross_u * cross_v + up2 * dv2
    # a rounding below 0 is 0; NaN stays NaN (a change of 0 would read as converged)
    return 0.0 if sq < 0.0 else np.sqrt(sq)


def _vectors(n: int | None, **arrays: Any) -> list[np.ndarray]:
    """Each of ``arrays`` as a 1-D float64 array, all of ``n`` entries (None: the first one's), or a DataError."""
    out = [as_float_array(values, name, 1) for name, values in arrays.items()]
    n = out[0].size if n is None else n
    for name, arr in zip(arrays, out):
        if arr.size != n:
            raise DataError(f"{name} has {arr.size:,} entries, not {n:,}")
    return out


def pair_adjacency(pairs: Any, values: Any, n_workers: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(offsets, partner, value)``: the pairs (P, 2) of worker codes in ``0 .. n_workers - 1`` and their entries
    ``values`` (P,) as a CSR adjacency over the workers, each pair from both ends (:func:`_pair_adjacency`).

    Raises DataError for pairs that are not (P, 2) integer codes below ``n_workers``, or values of another length;
    UsageError for a ``n_workers`` that is not a count.
    """
    n = check_count(n_workers, "n_workers")
    arr = np.asarray(pairs)
    if arr.ndim != 2 or arr.shape[1] != 2:
        raise DataError(f"pairs must be a (P, 2) array of worker codes, got shape {arr.shape}")
    codes = check_index(as_code_array(arr.reshape(-1), "pairs"), n, "pairs", "worker")
    (value,) = _vectors(arr.shape[0], values=values)
    return _pair_adjacency(codes.reshape(-1, 2), value, n)


def msr_half_step(offsets: Any, partner: Any, value: Any, other: Any, current: Any, trim: int, floor: float,
                  out: np.ndarray, scratch: np.ndarray) -> None:
    """``out[j]``: the MSR trimmed mean of ``value / other[partner]`` over worker j's partners, around
    ``current[j]`` (:func:`_msr_half_step`, which says how).

    ``offsets`` (W + 1,) the CSR offsets over the ``partner`` (E,) codes, each an index of ``other``, and their
    ``value`` (E,); ``current`` and ``out`` (W,); ``scratch`` a float64 buffer of at least the largest degree.
    Raises DataError for arrays that do not fit one another, UsageError for a negative ``trim`` or a ``floor``
    that is not a finite number.
    """
    off = check_offsets(offsets, np.asarray(partner).size, "offsets", "partner entries")
    w = off.size - 1
    (oth,) = _vectors(None, other=other)
    codes = check_index(partner, oth.size, "partner", "entry of other")
    (val,) = _vectors(codes.size, value=value)
    (cur,) = _vectors(w, current=current)
    dest = check_out_array(out, "out", 1)
    buf = check_out_array(scratch, "scratch", 1)
    if dest.size != w:
        raise DataError(f"out has {dest.size:,} entries, not the {w:,} workers of offsets")
    degree = int(np.diff(off).max()) if w else 0
    if buf.size < degree:
        raise DataError(f"scratch has {buf.size:,} entries, fewer than the largest degree {degree:,}")
    t = check_count(trim, "trim")
    if isinstance(floor, bool) or not isinstance(floor, (int, float, np.integer, np.floating)) \
            or not np.isfinite(floor):
        raise UsageError(f"{param('floor')} must be a finite number, got {floor!r}")
    _msr_half_step(off, codes, val, oth, cur, t, float(floor), dest, buf)


def rank_one_change(u: Any, v: Any, u_prev: Any, v_prev: Any) -> float:
    """:math:`\\|u v^T - u' v'^T\\|_F` of four vectors of one length (:func:`_rank_one_change`); DataError
    for arrays that are not 1-D numbers of one length."""
    return float(_rank_one_change(*_vectors(None, u=u, v=v, u_prev=u_prev, v_prev=v_prev)))


__all__ = ["pair_adjacency", "msr_half_step", "rank_one_change"]
