"""numba kernels of text: floats as Python's ``repr``, and rows as bytes (:mod:`crowdagg.io.render`, :mod:`crowdagg.data.text`).

:func:`repr_layout` -- Arrow's float64 -> string cast already finds the
shortest digits that read back as the same double (the digits Python's
``repr`` prints), but lays them out differently (``1`` for ``1.0``,
``0.00001`` for ``1e-05``, ``6.8e-7`` for ``6.8e-07``).  The kernel reads
Arrow's text (sign, digits, optional point, optional exponent) and writes
``repr``'s layout:

* decimal exponent ``e`` of the leading significant digit in ``-4 <= e < 16``:
  fixed notation, always with a point and at least one digit after it
  (``1.0``, ``100.0``, ``0.0001``, ``123456789.123``);
* otherwise scientific: ``d[.ddd]e±XX`` with at least two exponent digits
  (``1e-05``, ``1.5e+16``, ``5e-324``);
* zero keeps its sign: ``0.0``, ``-0.0``.

Only the layout is computed here; the digits are Arrow's (checked against
``repr`` on millions of values in the tests).

:func:`ucs4_to_utf8` encodes a numpy ``U`` array, :func:`mark_rows` flags
the values holding given ASCII bytes (CSV quoting, JSON escaping, TSV
checks), :func:`join_rows` writes cells and the literal text between them
as the output's bytes.  All work on Arrow's layout: a values byte buffer
and ``n + 1`` offsets.  The module is imported lazily (numba is heavy), and
only for tables large enough to pay.
"""

from __future__ import annotations

import numpy as np
from numba import njit

# Longest repr of a finite double: "-1.2345678901234567e-308" (24 bytes).
MAX_REPR_BYTES = 24


@njit(cache=True, nogil=True)
def repr_layout(src: np.ndarray, src_off: np.ndarray, out: np.ndarray, out_off: np.ndarray) -> int:  # pragma: no cover - compiled
    """Rewrite ``len(src_off) - 1`` Arrow float texts into ``out``; returns the bytes written.

    ``src``/``src_off``: the values bytes and offsets (``n + 1`` of them, any
    start) of Arrow's text; ``out`` must hold ``MAX_REPR_BYTES * n`` bytes and
    ``out_off`` ``n + 1`` int64 offsets (the first is 0).
    """
    n = src_off.shape[0] - 1
    digits = np.zeros(64, np.uint8)
    pos = 0
    out_off[0] = 0
    for i in range(n):
        j = src_off[i]
        end = src_off[i + 1]
        neg = False
        if j < end and src[j] == 45:  # '-'
            neg = True
            j += 1
        # significant digits, point position, exponent
        nd = 0  # digits kept (leading zeros dropped)
        before_point = 0  # digits (kept) before the point
        seen_point = False
        lead_zeros_after_point = 0
        while j < end:
            c = src[j]
            if c == 46:  # '.'
                seen_point = True
            elif 48 <= c <= 57:
                if nd == 0 and c == 48:
                    if seen_point:
                        lead_zeros_after_point += 1
                else:
                    if nd < 64:
                        digits[nd] = c
                    nd += 1
                    if not seen_point:
                        before_point += 1
            else:
                break
            j += 1
        exp10 = 0
        if j < end and (src[j] == 101 or src[j] == 69):  # 'e' / 'E'
            j += 1
            eneg = False
            if j < end and (src[j] == 43 or src[j] == 45):
                eneg = src[j] == 45
                j += 1
            while j < end:
                exp10 = exp10 * 10 + (src[j] - 48)
                j += 1
            if eneg:
                exp10 = -exp10
        if neg:
            out[pos] = 45
            pos += 1
        if nd == 0:  # zero: "0.0"
            out[pos] = 48
            out[pos + 1] = 46
            out[pos + 2] = 48
            pos += 3
            out_off[i + 1] = pos
            continue
        if nd > 64:  # Arrow writes at most 17 significant digits; the rest are zeros
            nd = 64
        while nd > 1 and digits[nd - 1] == 48:  # trailing zeros carry no digits
            nd -= 1
        # decimal exponent of the leading digit
        if before_point > 0:
            e = before_point - 1 + exp10
        else:
            e = -lead_zeros_after_point - 1 + exp10
        if -4 <= e < 16:
            if e < 0:
                out[pos] = 48
                out[pos + 1] = 46
                pos += 2
                for _ in range(-e - 1):
                    out[pos] = 48
                    pos += 1
                for k in range(nd):
                    out[pos] = digits[k]
                    pos += 1
            else:
                for k in range(e + 1):
                    out[pos] = digits[k] if k < nd else 48
                    pos += 1
                out[pos] = 46
                pos += 1
                if nd > e + 1:
                    for k in range(e + 1, nd):
                        out[pos] = digits[k]
                        pos += 1
                else:
                    out[pos] = 48
                    pos += 1
        else:
            out[pos] = digits[0]
            pos += 1
            if nd > 1:
                out[pos] = 46
                pos += 1
                for k in range(1, nd):
                    out[pos] = digits[k]
                    pos += 1
            out[pos] = 101  # 'e'
            out[pos + 1] = 45 if e < 0 else 43
            pos += 2
            a = -e if e < 0 else e
            if a >= 100:
                out[pos] = 48 + a // 100
                pos += 1
            out[pos] = 48 + (a // 10) % 10
            out[pos + 1] = 48 + a % 10
            pos += 2
        out_off[i + 1] = pos
    return pos


@njit(cache=True, nogil=True)
def ucs4_to_utf8(codes: np.ndarray, out: np.ndarray, out_off: np.ndarray) -> int:  # pragma: no cover - compiled
    """UTF-8 of the rows of a numpy ``U`` array viewed as ``(n, width)`` uint32 code points.

    Trailing NULs are padding (as numpy reads them); NULs inside a value are
    kept.  ``out`` must hold ``4 * n * width`` bytes.  Returns the bytes
    written, or -1 if a code point has no UTF-8 form (a surrogate).
    """
    n, width = codes.shape
    pos = 0
    out_off[0] = 0
    for i in range(n):
        m = width
        while m > 0 and codes[i, m - 1] == 0:
            m -= 1
        for k in range(m):
            c = codes[i, k]
            if c < 0x80:
                out[pos] = c
                pos += 1
            elif c < 0x800:
                out[pos] = 0xC0 | (c >> 6)
                out[pos + 1] = 0x80 | (c & 0x3F)
                pos += 2
            elif c < 0x10000:
                if 0xD800 <= c < 0xE000:
                    return -1
                out[pos] = 0xE0 | (c >> 12)
                out[pos + 1] = 0x80 | ((c >> 6) & 0x3F)
                out[pos + 2] = 0x80 | (c & 0x3F)
                pos += 3
            elif c < 0x110000:
                out[pos] = 0xF0 | (c >> 18)
                out[pos + 1] = 0x80 | ((c >> 12) & 0x3F)
                out[pos + 2] = 0x80 | ((c >> 6) & 0x3F)
                out[pos + 3] = 0x80 | (c & 0x3F)
                pos += 4
            else:
                return -1
        out_off[i + 1] = pos
    return pos


@njit(cache=True, nogil=True)
def mark_rows(values: np.ndarray, offsets: np.ndarray, special: np.ndarray) -> np.ndarray:  # pragma: no cover - compiled
    """Per value (``offsets``: ``n + 1`` of them into ``values``): does it hold a byte flagged in ``special``?

    ``special`` is a 256-entry table; the bytes looked for are ASCII, which
    never occur inside a multi-byte UTF-8 character.
    """
    n = offsets.shape[0] - 1
    out = np.zeros(n, np.bool_)
    for i in range(n):
        for j in range(offsets[i], offsets[i + 1]):
            if special[values[j]]:
                out[i] = True
                break
    return out


@njit(cache=True, nogil=True)
def join_rows(values: np.ndarray, offsets: np.ndarray, lits: np.ndarray, lit_off: np.ndarray) -> np.ndarray:  # pragma: no cover - compiled
    """Rows of ``k`` columns with literal text around the cells, as one byte array.

    ``offsets`` is ``(k, n + 1)``: column ``c``'s cell ``i`` is
    ``values[offsets[c, i]:offsets[c, i + 1]]``.  ``lit_off`` has ``k + 2``
    entries: literal ``c`` (``lits[lit_off[c]:lit_off[c + 1]]``) comes before
    column ``c``'s cell, literal ``k`` ends each row.
    """
    k = offsets.shape[0]
    n = offsets.shape[1] - 1
    total = n * (lit_off[k + 1] - lit_off[0])
    for c in range(k):
        total += offsets[c, n] - offsets[c, 0]
    out = np.empty(total, np.uint8)
    pos = 0
    for i in range(n):
        for c in range(k + 1):
            for j in range(lit_off[c], lit_off[c + 1]):
                out[pos] = lits[j]
                pos += 1
            if c < k:
                for j in range(offsets[c, i], offsets[c, i + 1]):
                    out[pos] = values[j]
                    pos += 1
    return out
