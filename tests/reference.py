"""Slow, obvious reference implementations used to check the fast kernels.

Written from the equations (ALGORITHMS.md §2), not from the package: the
M-step is the textbook MAP update with a symmetric Dirichlet (full
confusion) or Beta (one-coin) prior and has no floor, so it is compared
with the package at smoothing > 0 only; the floor used at smoothing 0 is
checked by a hand-computed example in ``test_aggregators``.
"""

from __future__ import annotations

import math

import numpy as np


def dirichlet_kl_one(beta: np.ndarray, alpha: np.ndarray) -> float:
    """KL(Dir(beta) || Dir(alpha)) of one Dirichlet, written out term by term (the variational methods' reference)."""
    from scipy.special import digamma, gammaln

    b0, a0 = beta.sum(), alpha.sum()
    out = gammaln(b0) - gammaln(a0)
    for b, a in zip(beta, alpha, strict=True):
        out += gammaln(a) - gammaln(b) + (b - a) * (digamma(b) - digamma(b0))
    return float(out)


def soft_mv(task, label, n_tasks, n_classes):
    votes = np.zeros((n_tasks, n_classes))
    for t, y in zip(task, label):
        votes[t, y] += 1
    total = votes.sum(axis=1, keepdims=True)
    return np.divide(votes, total, out=np.zeros_like(votes), where=total > 0)


def m_step(task, worker, label, post, n_workers, smoothing, one_coin=False):
    """MAP M-step: prior_k ∝ s + Σ_n q_nk; A_w[k, j] ∝ s + Σ q_nk [y = j]; one-coin p_w = (c_w + s/K)/(n_w + s)."""
    n_classes = post.shape[1]
    counts = np.zeros((n_workers, n_classes, n_classes))  # [w, true, observed]
    for t, w, y in zip(task, worker, label):
        for k in range(n_classes):
            counts[w, k, y] += post[t, k]
    prior = post.sum(axis=0) + smoothing
    prior = prior / prior.sum()
    conf = np.zeros_like(counts)
    for w in range(n_workers):
        if one_coin:
            answers = counts[w].sum()
            p = (np.trace(counts[w]) + smoothing / n_classes) / (answers + smoothing)
            for k in range(n_classes):
                for j in range(n_classes):
                    conf[w, k, j] = p if k == j else (1 - p) / (n_classes - 1)
        else:
            for k in range(n_classes):
                row = counts[w, k] + smoothing
                conf[w, k] = row / row.sum()
    return prior, conf


def e_step(task, worker, label, prior, conf, n_tasks):
    n_classes = prior.shape[0]
    logp = np.tile(np.log(prior), (n_tasks, 1))
    for t, w, y in zip(task, worker, label):
        for k in range(n_classes):
            logp[t, k] += math.log(conf[w, k, y])
    ll = 0.0
    post = np.zeros_like(logp)
    for t in range(n_tasks):
        m = logp[t].max()
        z = sum(math.exp(v - m) for v in logp[t])
        ll += m + math.log(z)
        post[t] = [math.exp(v - m) / z for v in logp[t]]
    return post, ll


def dawid_skene(task, worker, label, n_tasks, n_workers, n_classes, n_iter, smoothing, one_coin=False):
    """Plain DS EM: soft-MV start, then ``n_iter`` times (M-step, E-step).

    The parameters start from one M-step on the vote shares and are scored
    by an E-step; each iteration is an M-step followed by an E-step.
    Returns the last E-step's posteriors, the parameters it used, and the
    log-likelihood after each iteration.
    """
    post = soft_mv(task, label, n_tasks, n_classes)
    prior, conf = m_step(task, worker, label, post, n_workers, smoothing, one_coin)
    post, _ = e_step(task, worker, label, prior, conf, n_tasks)
    trace = []
    for _ in range(n_iter):
        prior, conf = m_step(task, worker, label, post, n_workers, smoothing, one_coin)
        post, ll = e_step(task, worker, label, prior, conf, n_tasks)
        trace.append(ll)
    return post, prior, conf, trace


# --------------------------------------------------------------------------- rendering
# The writer of crowdagg.io.render as it was before the Arrow rewrite, kept
# verbatim as the reference the fast writer must match byte for byte
# (``render_table_reference``; csv, tsv, jsonl and json only).
import re as _re  # noqa: E402
from json.encoder import encode_basestring as _encode_basestring  # type: ignore[attr-defined]  # noqa: E402

from crowdagg.errors import DataError as _DataError  # noqa: E402
from crowdagg.errors import UsageError as _UsageError  # noqa: E402

_REF_FORMATS = ("csv", "tsv", "jsonl", "json")
_REF_CSV_SPECIAL = _re.compile(r'[,"\r\n]')
_REF_TSV_SPECIAL = _re.compile(r"[\t\r\n]")
_REF_SEP = "\x00"


def _ref_float_text(values, *, column="value"):
    arr = np.asarray(values, dtype=np.float64)
    if arr.size and not np.isfinite(arr).all():
        bad = arr[~np.isfinite(arr)][0]
        raise _DataError(f"column {column!r} holds a non-finite number ({bad!r}); refusing to write it")
    return list(map(repr, arr.tolist()))


def _ref_cells(values, column):
    arr = np.asarray(values)
    if arr.dtype.kind == "f":
        return _ref_float_text(arr, column=column)
    if arr.dtype.kind in "iu":
        return list(map(str, arr.tolist()))
    if arr.dtype.kind == "b":
        return ["true" if v else "false" for v in arr.tolist()]
    return [v if isinstance(v, str) else str(v) for v in arr.tolist()]


def _ref_is_number(values):
    return np.asarray(values).dtype.kind in "fiub"


def _ref_any_match(pattern, cells):
    return pattern.search(_REF_SEP.join(cells)) is not None


def _ref_csv_quote(cells):
    if not _ref_any_match(_REF_CSV_SPECIAL, cells):
        return cells
    return ['"' + c.replace('"', '""') + '"' if _REF_CSV_SPECIAL.search(c) else c for c in cells]


def _ref_tsv_check(cells, column, keys, key_name):
    if not _ref_any_match(_REF_TSV_SPECIAL, cells):
        return
    for i, c in enumerate(cells):
        m = _REF_TSV_SPECIAL.search(c)
        if m:
            what = {"\t": "a tab", "\r": "a carriage return", "\n": "a newline"}[m.group()]
            where = f"{key_name} {keys[i]!r}" if keys is not None and key_name else f"row {i + 1}"
            raise _DataError(
                f"cannot write TSV: {where} has {what} in column {column!r} ({c!r}); "
                "TSV has no quoting -- use CSV or JSON output"
            )


def _ref_header_check_tsv(names):
    for n in names:
        if _REF_TSV_SPECIAL.search(n):
            raise _DataError(f"cannot write TSV: column name {n!r} contains a tab or line break; use CSV or JSON output")


def _ref_join_rows(columns, sep):
    if not columns or not columns[0]:
        return ""
    if len(columns) == 1:
        return "\n".join(columns[0]) + "\n"
    return "\n".join(map(sep.join, zip(*columns))) + "\n"


def render_table_reference(table, fmt, *, key=None):
    """The pre-Arrow ``crowdagg.io.render.render_table`` (one Python string per cell)."""
    if fmt not in _REF_FORMATS:
        raise _UsageError(f"output format must be one of {', '.join(_REF_FORMATS)}, got {fmt!r}")
    if hasattr(table, "to_dict") and hasattr(table, "columns"):
        cols = {str(c): table[c].to_numpy() for c in table.columns}
    else:
        cols = {str(k): v for k, v in table.items()}
    names = list(cols)
    key = key if key is not None else (names[0] if names else None)
    raw = {n: _ref_cells(v, n) for n, v in cols.items()}
    lengths = {len(c) for c in raw.values()}
    if len(lengths) > 1:
        raise ValueError(f"columns of unequal length: { {n: len(c) for n, c in raw.items()} }")
    if fmt == "csv":
        header = ",".join(_ref_csv_quote(names))
        body = _ref_join_rows([c if _ref_is_number(cols[n]) else _ref_csv_quote(c) for n, c in raw.items()], ",")
        return (header + "\n" + body).encode("utf-8")
    if fmt == "tsv":
        _ref_header_check_tsv(names)
        keys = raw.get(key) if key is not None else None
        for n, c in raw.items():
            if not _ref_is_number(cols[n]):
                _ref_tsv_check(c, n, keys, key)
        return ("\t".join(names) + "\n" + _ref_join_rows(list(raw.values()), "\t")).encode("utf-8")
    parts = []
    for i, (n, c) in enumerate(raw.items()):
        prefix = ("{" if i == 0 else ",") + _encode_basestring(n) + ":"
        cells = c if _ref_is_number(cols[n]) else list(map(_encode_basestring, c))
        parts.append([prefix + v for v in cells])
    if parts and parts[0]:
        rows = list(map("".join, zip(*parts)))
        rows = [r + "}" for r in rows]
    else:
        rows = []
    if fmt == "jsonl":
        return ("\n".join(rows) + "\n" if rows else "").encode("utf-8")
    return ("[\n" + ",\n".join(rows) + "\n]\n" if rows else "[]\n").encode("utf-8")


def wawa(task, worker, label, n_tasks, n_workers, n_classes):
    """Worker agreement with aggregate, from its definition (no ties expected): (labels, posteriors, skills)."""
    votes = np.zeros((n_tasks, n_classes))
    for t, y in zip(task, label):
        votes[t, y] += 1
    mv = votes.argmax(axis=1)
    agree = np.zeros(n_workers)
    count = np.zeros(n_workers)
    for t, w, y in zip(task, worker, label):
        count[w] += 1
        agree[w] += y == mv[t]
    skills = np.where(count > 0, agree / np.maximum(count, 1), 1.0 / n_classes)
    weighted = np.zeros((n_tasks, n_classes))
    for t, w, y in zip(task, worker, label):
        weighted[t, y] += skills[w]
    post = weighted / weighted.sum(axis=1, keepdims=True)
    return post.argmax(axis=1), post, skills
