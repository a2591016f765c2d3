"""Values as Arrow text, without a Python object per value: floats as Python's ``repr``, buffers, chunks.

Shared by the names of the data model (:mod:`crowdagg.data.vocab`: a
float label's name is its ``repr``) and the writers
(:mod:`crowdagg.io.render`).  The layout of a float's text is a numba
kernel (:func:`crowdagg.kernels.text.repr_layout`), loaded only for blocks
of at least :data:`KERNEL_MIN_ROWS` values; pyarrow loads on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa

# Rows rendered per block: bounds the text built besides the output itself.
BLOCK_ROWS = 1 << 18
# Blocks with fewer rows are made with Arrow compute alone (no numba load or compile).
KERNEL_MIN_ROWS = 4096


def float_strings(values: Any, *, nan_as: str = "nan") -> pa.Array:
    """Python's ``repr`` of each float, as a pyarrow ``string`` array, without a Python object per value.

    ``values``: a pyarrow float array (chunked or not; nulls stay null) or a
    numpy float array.  NaN is written ``nan_as``, infinities ``inf`` and
    ``-inf`` (as ``repr``).
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(values, pa.ChunkedArray):
        values = one_chunk(values) if values.num_chunks else pa.array([], pa.float64())
    if isinstance(values, pa.Array):
        arr = values.cast(pa.float64())
        nulls = pc.is_null(arr) if arr.null_count else None
        data = arr.to_numpy(zero_copy_only=False)
    else:
        data = np.asarray(values, dtype=np.float64)
        nulls = None
    n = len(data)
    finite = np.isfinite(data)
    clean = data if finite.all() else np.where(finite, data, 0.0)
    kernels = n >= KERNEL_MIN_ROWS
    blocks = [float_text_block(clean[s : s + BLOCK_ROWS], kernels) for s in range(0, n, BLOCK_ROWS)]
    text: Any = pa.concat_arrays(blocks) if blocks else pa.array([], pa.large_string())
    if not finite.all():
        for mask, word in ((np.isnan(data), nan_as), (data == np.inf, "inf"), (data == -np.inf, "-inf")):
            if mask.any():
                text = pc.if_else(pa.array(mask), ls(word), text)
    if nulls is not None:
        text = pc.if_else(nulls, pa.scalar(None, pa.large_string()), text)
    return as_string(text)


def float_text_block(values: np.ndarray, kernels: bool) -> pa.Array:
    import pyarrow as pa

    if not kernels:
        return pa.array(list(map(repr, values.tolist())), pa.large_string())
    import pyarrow.compute as pc

    from ..kernels.text import MAX_REPR_BYTES, repr_layout

    n = len(values)
    src_off, src = buffers(pc.cast(pa.array(values), pa.string()))
    out = np.empty(MAX_REPR_BYTES * n, np.uint8)
    offsets = np.empty(n + 1, np.int64)
    total = repr_layout(src, src_off, out, offsets)
    return large_string(n, offsets, out[:total])


def ls(text: str) -> Any:
    import pyarrow as pa

    return pa.scalar(text, pa.large_string())


def large_string(n: int, offsets: np.ndarray, values: np.ndarray) -> pa.Array:
    import pyarrow as pa

    return pa.Array.from_buffers(pa.large_string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(values)])


def buffers(arr: Any) -> tuple[np.ndarray, np.ndarray]:
    """(offsets, values) of a string or large_string array as numpy views (the array's offset applied)."""
    import pyarrow as pa

    bufs = arr.buffers()
    dtype = np.int64 if pa.types.is_large_string(arr.type) else np.int32
    offsets = np.frombuffer(bufs[1], dtype=dtype)[arr.offset : arr.offset + len(arr) + 1]
    values = np.frombuffer(bufs[2], dtype=np.uint8) if bufs[2] is not None and bufs[2].size else np.zeros(1, np.uint8)
    return offsets, values


def one_chunk(chunked: pa.ChunkedArray) -> pa.Array:
    import pyarrow as pa

    if chunked.num_chunks == 1:
        return chunked.chunk(0)
    if chunked.num_chunks == 0:
        return pa.array([], pa.large_string())
    return pa.concat_arrays(chunked.chunks)


def as_string(arr: Any) -> Any:
    import pyarrow as pa

    try:
        return arr.cast(pa.string())
    except pa.ArrowInvalid:  # over 2 GiB of text in one array: kept with 64-bit offsets
        return arr


__all__ = ["float_strings", "float_text_block", "ls", "large_string", "buffers", "one_chunk", "as_string",
           "BLOCK_ROWS", "KERNEL_MIN_ROWS"]
