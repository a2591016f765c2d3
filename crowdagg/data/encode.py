"""The encode stage: columns of names, block by block, into growing vocabularies.

Input arrives in blocks (:mod:`crowdagg.io.read` parses a large file a
block at a time).  Each block's task, worker and label columns are turned
into integer codes against vocabularies that grow as new names appear, so
that the codes of all blocks are exactly those one dictionary encoding of
the whole column would give: codes ``0..n-1`` in order of first appearance
over the whole input.  Nothing of a block is kept but its codes -- the
text is freed once encoded, so memory follows the data model (4 + 4 + 1
bytes an answer, and the distinct names), not the text.

A :class:`NameEncoder` takes one of two paths, with the same codes:

* ids of the form prefix + integer without leading zeros (``t17``, ``w3``,
  ``42``) go through a direct-address table indexed by the integer (no
  hashing; the names are rebuilt from the integers at the end);
* any other ids go through an open-addressing hash table over the names'
  bytes (:func:`crowdagg.kernels.ingest._hash_codes`: eight bytes a
  hashing step and a compare, and rows looked up 32 at a time so that the
  cache misses of a table larger than the cache overlap).  An encoder that
  meets an id of another form in a later block moves its vocabulary into
  the hash table and goes on there.

:class:`ColumnsEncoder` runs the three columns of a block on two threads
(the task column, the most distinct, on one; worker and label on the
other) unless the thread policy (:mod:`crowdagg.core.threads`) says one,
and appends the codes to arrays that grow with the input.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa

#: A direct-address table holds at most this many entries per id encoded so far (else: the hash table).
_TABLE_PER_ROW = 4


#: Hash tables up to this many slots (512 KiB: in the second-level cache) are kept at most 1/4 full, larger
#: ones 5/8: in cache a lookup's cost is its mispredicted probe steps, fewer in a sparser table; out of cache
#: it is the cache misses, and a denser table is smaller.
_SMALL_SLOTS = 1 << 16


def _load_limit(slots: int) -> int:
    """How many names a hash table of ``slots`` slots holds before it is doubled."""
    return slots // 4 if slots <= _SMALL_SLOTS else slots * 5 // 8


def _grown(arr: np.ndarray, need: int, fill: Any = None) -> np.ndarray:
    """``arr`` with room for ``need`` entries (contents kept): 1.5 times larger at least, so growing is
    amortised O(1).  Fresh room is left unwritten (not resident) unless ``fill`` is given."""
    if need <= arr.shape[0]:
        return arr
    size = max(need, arr.shape[0] * 3 // 2, 16)
    out = np.empty(size, dtype=arr.dtype) if fill is None else np.full(size, fill, dtype=arr.dtype)
    out[: arr.shape[0]] = arr
    return out


def arrow_of(values: np.ndarray) -> Any:
    """A numpy integer/float array as an Arrow array sharing its memory (no pandas import, unlike ``pa.array``)."""
    import pyarrow as pa

    values = np.ascontiguousarray(values)
    return pa.Array.from_buffers(pa.from_numpy_dtype(values.dtype), len(values), [None, pa.py_buffer(values)])


def _string_chunks(values: Any) -> list[tuple[np.ndarray, np.ndarray]]:
    """(int32 offsets, uint8 data) numpy views of each non-empty chunk of an Arrow string column (no copy)."""
    import pyarrow as pa

    out = []
    for c in values.chunks if isinstance(values, pa.ChunkedArray) else [values]:
        if len(c) == 0:
            continue
        _, off_buf, data_buf = c.buffers()
        offsets = np.frombuffer(off_buf, dtype=np.int32, count=len(c) + 1, offset=c.offset * 4)
        data = np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None else np.zeros(0, np.uint8)
        out.append((offsets, data))
    return out


class NameEncoder:
    """Codes of one column of names fed block by block, in order of first appearance over all blocks.

    :meth:`add` takes an Arrow ``string`` column (no nulls: blank cells are
    ``""``) and returns its codes (int32, shape (len,)); :meth:`names` gives
    the distinct names so far (an Arrow string array, code ``c`` at ``c``).
    Feeding a column in any number of blocks gives the codes and names of
    feeding it whole.
    """

    def __init__(self) -> None:
        self.n = 0  # distinct names so far
        self.rows = 0  # names encoded so far
        self.expected = 0  # names expected in all (a streamed file's estimate), for the table's density bound
        self.mode: str | None = None  # "prefixed" or "hash", decided by the first name
        self.prefix = b""
        self.table = np.zeros(0, dtype=np.int32)  # prefixed: integer -> code, -1 unseen
        self.values = np.zeros(0, dtype=np.int64)  # prefixed: code -> integer
        self.slots = np.zeros(0, dtype=np.int64)  # hash: open addressing, -1 empty
        self.hashes = np.zeros(0, dtype=np.int64)  # hash: code -> hash
        self.names_off = np.zeros(1, dtype=np.int64)  # hash: code -> start of its bytes
        self.names_data = np.zeros(0, dtype=np.uint8)

    # ------------------------------------------------------------------ encoding
    def add(self, column: pa.Array | pa.ChunkedArray, out: np.ndarray | None = None) -> np.ndarray:
        """Codes of ``column`` (int32: fresh, or written into ``out``), extending the vocabulary with the
        names new to it."""
        n = len(column)
        codes = np.empty(n, dtype=np.int32) if out is None else out
        if n == 0:
            return codes
        chunks = _string_chunks(column)
        if self.mode is None:
            self._choose(column)
        if self.mode == "prefixed" and not self._add_prefixed(chunks, codes):
            self._to_hash()
        if self.mode == "hash":
            self._add_hashed(chunks, codes)
        self.rows += n
        return codes

    def _choose(self, column: Any) -> None:
        try:
            first = column[0].as_py()
        except UnicodeDecodeError:  # not text: the name checks say where
            first = ""
        prefix = first.rstrip("0123456789").encode("utf-8")
        if first and len(prefix) < len(first.encode("utf-8")):
            self.mode, self.prefix = "prefixed", prefix
        else:
            self.mode = "hash"

    def _add_prefixed(self, chunks: list[tuple[np.ndarray, np.ndarray]], codes: np.ndarray) -> bool:
        """Codes through the direct-address table; False (nothing changed) when an id is of another form
        or the integers are too sparse for a table."""
        from ..kernels.ingest import _prefixed_block, _prefixed_max

        pre = np.frombuffer(self.prefix, dtype=np.uint8)
        top = self.table.shape[0] - 1
        for offsets, data in chunks:
            m = _prefixed_max(offsets, data, pre)
            if m < 0:
                return False
            top = max(top, m)
        # The density bound counts the names expected in all: a first block of a large file holds a few
        # of them but already integers up to the largest.
        rows = max(self.rows + len(codes), self.expected)
        if top + 1 > max(_TABLE_PER_ROW * rows, 1 << 16) or top >= 2**31 - 1:
            return False
        if top + 1 > self.table.shape[0]:
            self.table = _grown(self.table, top + 1, fill=-1)
        self.values = _grown(self.values, self.n + len(codes))
        base = 0
        for offsets, data in chunks:
            self.n = _prefixed_block(offsets, data, len(self.prefix), self.table, codes, base, self.values, self.n)
            base += offsets.shape[0] - 1
        return True

    def _to_hash(self) -> None:
        """Move the names found so far (prefixed) into the hash table, codes kept."""
        names = self.names() if self.mode == "prefixed" else None
        self.mode = "hash"
        self.table = np.zeros(0, dtype=np.int32)
        self.values = np.zeros(0, dtype=np.int64)
        n, self.n = self.n, 0
        if names is not None and n:
            self._add_hashed(_string_chunks(names), np.empty(n, dtype=np.int32))

    def _add_hashed(self, chunks: list[tuple[np.ndarray, np.ndarray]], codes: np.ndarray) -> None:
        from ..kernels.ingest import _hash_codes, _rehash

        base = 0
        for offsets, data in chunks:
            m = offsets.shape[0] - 1
            self.names_data = _grown(self.names_data, int(self.names_off[self.n]) + int(offsets[-1] - offsets[0]))
            done, full = 0, self.slots.shape[0] < 16
            while done < m:
                if full:  # a first table, or a half-full one: twice as large
                    self.slots = np.full(max(16, 2 * self.slots.shape[0]), -1, dtype=np.int64)
                    _rehash(self.hashes, self.n, self.slots)
                limit = _load_limit(self.slots.shape[0])
                self.names_off = _grown(self.names_off, limit + 1)
                self.hashes = _grown(self.hashes, limit)
                self.n, done, _ = _hash_codes(offsets, data, done, codes, base, self.slots, limit, self.hashes,
                                              self.names_off, self.names_data, self.n)
                full = True
            base += m

    # ------------------------------------------------------------------ results
    def names(self) -> pa.Array:
        """The distinct names, code ``c`` at position ``c``: an Arrow string array."""
        import pyarrow as pa
        import pyarrow.compute as pc

        if self.mode == "prefixed":
            digits = pc.cast(arrow_of(self.values[: self.n]), pa.string())
            if not self.prefix:
                return digits
            return pc.binary_join_element_wise(pa.scalar(self.prefix.decode("utf-8")), digits, "")
        if self.n == 0:
            return pa.array([], type=pa.string())
        end = int(self.names_off[self.n])
        small = end < 2**31
        offsets: np.ndarray = self.names_off[: self.n + 1].astype(np.int32 if small else np.int64)
        kind = pa.string() if small else pa.large_string()
        data = self.names_data[:end].copy()
        out = pa.Array.from_buffers(kind, self.n, [None, pa.py_buffer(offsets), pa.py_buffer(data)])
        return out if kind == pa.string() else out.cast(pa.string())

    def truncate(self, n: int) -> None:
        """Forget the names from code ``n`` on (an input read again whole after part of it was encoded)."""
        if n >= self.n:
            return
        if self.mode == "prefixed":
            self.table[self.values[n: self.n]] = -1
        else:
            self.slots.fill(-1)
            from ..kernels.ingest import _rehash

            _rehash(self.hashes, n, self.slots)
        self.n = n

    def release(self) -> None:
        """Drop the lookup tables (the codes and :meth:`names` taken already)."""
        self.__init__()  # type: ignore[misc]


def encode_column(values: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, pa.Array]:
    """(codes int32 in order of first appearance, distinct names) of a whole string column."""
    enc = NameEncoder()
    codes = enc.add(values)
    return codes, enc.names()


class Codes:
    """An int array that grows by appending blocks, with room reserved ahead (unwritten, so not resident).

    With ``widen``, the array starts as int8 and is widened (int16, then
    int32) when a block holds a larger code: the label codes of a few
    classes take a byte an answer.
    """

    def __init__(self, dtype: Any, reserve: int = 0, widen: bool = False) -> None:
        self.array = np.empty(max(int(reserve), 0), dtype=np.int8 if widen else dtype)
        self.widen = widen
        self.n = 0

    def reserve(self, n: int) -> None:
        if n > self.array.shape[0]:
            out = np.empty(n, dtype=self.array.dtype)
            out[: self.n] = self.array[: self.n]
            self.array = out

    def claim(self, n: int) -> np.ndarray:
        """The next ``n`` places, to be written by the caller (counted as appended)."""
        end = self.n + n
        if end > self.array.shape[0]:
            self.array = _grown(self.array, end)
        out = self.array[self.n:end]
        self.n = end
        return out

    def append(self, block: np.ndarray, top: int = 0) -> None:
        """Append ``block`` (codes below ``top``, when widening)."""
        if self.widen and top > np.iinfo(self.array.dtype).max:
            dtype = np.int16 if top <= np.iinfo(np.int16).max else np.int32
            out = np.empty(self.array.shape[0], dtype=dtype)
            out[: self.n] = self.array[: self.n]
            self.array = out
        end = self.n + block.shape[0]
        if end > self.array.shape[0]:
            self.array = _grown(self.array, end)
        self.array[self.n:end] = block
        self.n = end

    def take(self) -> np.ndarray:
        """The codes appended (a view of the first ``n``; the array is handed over)."""
        out = self.array[: self.n]
        self.array = np.zeros(0, dtype=out.dtype)
        self.n = 0
        return out


class ColumnsEncoder:
    """The (task, worker, label) columns of each block into three growing vocabularies and code arrays.

    ``reserve``: the answers expected (room is reserved, not written).
    :meth:`add_tasks` feeds task names that are not answers (a JSON
    mapping's task list): they take their place in the task vocabulary, and
    their codes are kept apart (:attr:`extra`).
    """

    def __init__(self, reserve: int = 0) -> None:
        # The kernels (and what their package imports) are imported here, on the caller's thread: two
        # encoding threads importing them at once can deadlock in the import system.
        from ..kernels import ingest  # noqa: F401

        self.encoders = (NameEncoder(), NameEncoder(), NameEncoder())
        self.codes = (Codes(np.int32, reserve), Codes(np.int32, reserve), Codes(np.int32, reserve, widen=True))
        self.extra = Codes(np.int32)
        self.rows = 0

    def add_tasks(self, names: pa.Array) -> None:
        self.extra.append(self.encoders[0].add(names))

    def add(self, task: Any, worker: Any, label: Any) -> None:
        """Encode one block's columns (Arrow string arrays of one length, no nulls)."""
        from ..core import threads

        n = len(task)
        # Task and worker codes are written in place; label codes are narrowed (a byte an answer).
        t_out, w_out = self.codes[0].claim(n), self.codes[1].claim(n)
        if n >= 1 << 16 and threads.count() > 1:
            from ..kernels.schedule import two_threads

            _, (_, y) = two_threads([
                lambda: self.encoders[0].add(task, t_out),
                lambda: (self.encoders[1].add(worker, w_out), self.encoders[2].add(label)),
            ])
        else:
            self.encoders[0].add(task, t_out)
            self.encoders[1].add(worker, w_out)
            y = self.encoders[2].add(label)
        self.codes[2].append(y, self.encoders[2].n - 1)
        self.rows += n

    def reserve(self, n: int) -> None:
        """Room for ``n`` answers in all (reserved, not written), and each encoder told to expect them."""
        for codes, enc in zip(self.codes, self.encoders):
            codes.reserve(n)
            enc.expected = max(enc.expected, int(n))

    def mark(self) -> tuple[int, ...]:
        """Where the encoding stands: :meth:`rollback` returns to it."""
        return (*(e.n for e in self.encoders), *(c.n for c in self.codes), self.extra.n, self.rows)

    def rollback(self, mark: tuple[int, ...]) -> None:
        """Forget what was encoded since ``mark`` (names, codes, rows)."""
        for e, n in zip(self.encoders, mark[:3]):
            e.truncate(n)
        for c, n in zip(self.codes, mark[3:6]):
            c.n = n
        self.extra.n, self.rows = mark[6], mark[7]

    def release(self) -> None:
        """Drop the lookup tables and any codes not taken."""
        for enc in self.encoders:
            enc.release()
        self.codes = (Codes(np.int32), Codes(np.int32), Codes(np.int32, widen=True))
        self.extra = Codes(np.int32)


__all__ = ["NameEncoder", "ColumnsEncoder", "Codes", "encode_column"]
