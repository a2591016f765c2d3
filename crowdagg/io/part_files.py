"""One part of a directory output (:mod:`crowdagg.io.parts`): its formats, its name, writing it, and checking
that the parts a run's writers reported are where the client looks.

Used where the parts are written: here for the local engine, on the Dask
workers for the Dask engine (:mod:`crowdagg.io.dask_write`).
"""

from __future__ import annotations

import os
from typing import Any

from ..errors import DataError, UsageError

#: The formats a directory of parts is written in (JSON is one list: it has no parts).
PART_FORMATS = ("csv", "tsv", "jsonl", "parquet")
#: The leading fields of the labels table (:meth:`~crowdagg.methods.result.AggregationResult.table`) and the
#: pattern of the ones after them (a result's flags -- twothird's ``accepted`` -- and the ``--proba`` columns): how
#: an earlier run's labels (file or part) are recognised.
LABEL_FIELDS = ("task", "label", "confidence")
LABEL_THEN = "accepted|n_answers|p_.*"


def check_part_format(fmt: str, where: str, gzip: bool = False) -> str:
    """``fmt`` if a directory of parts can hold it (``gzip``: compressed), else a
    :class:`~crowdagg.errors.UsageError` naming ``where``."""
    if fmt not in PART_FORMATS:
        raise UsageError(f"{where}: a directory holds parts, and {fmt.upper()} is one list that cannot be split into "
                         f"parts; write {', '.join(PART_FORMATS)} (JSON Lines for JSON records)")
    if gzip and fmt == "parquet":  # no Parquet reader opens a .parquet.gz, nor could a rerun recognise its own
        raise UsageError(f"{where}: Parquet parts are not gzip-compressed (Parquet compresses its columns itself, "
                         "and no Parquet reader reads a part-00000.parquet.gz); drop the .gz")
    return fmt


def write_part(directory: str, index: int, fmt: str, gzip: bool, table: Any, where: str = "",
               count: int = 1) -> tuple[str, int]:
    """Render ``table`` (columns, :func:`crowdagg.io.render.render_chunks`) as part ``index`` of the ``count``
    of ``directory``.

    Returns ``(file name, size in bytes)``: what the caller checks it sees.
    ``where`` names the machine in the error said when ``directory`` is
    not there (a Dask worker that does not share the client's filesystem).
    """
    from .output import commit, part_name, resolve
    from .render import render_chunks

    if not os.path.isdir(directory):
        raise DataError(f"the output directory {directory} is not there{where}: the Dask workers write the parts "
                        "and must see the client's filesystem at the same path (a shared filesystem), or write "
                        "to standard output or a file")
    name = part_name(index, fmt, gzip, count)
    path = os.path.join(directory, name)
    commit([(resolve(path), render_chunks(table, fmt, key="task"))])
    return name, os.stat(path).st_size


def check_parts(directory: str, written: list[tuple[str, int]]) -> None:
    """Refuse a directory whose parts (``(name, size)`` as their writers reported them) are not all here."""
    for name, size in written:
        path = os.path.join(directory, name)
        try:
            seen = os.stat(path).st_size
        except OSError:
            seen = None
        if seen != size:
            got = "is missing here" if seen is None else f"has {seen:,} bytes here, not the {size:,} its writer wrote"
            raise DataError(f"{name} of the output directory {directory} {got}: the Dask workers write the "
                            "parts and must see the client's filesystem at the same path (a shared filesystem), "
                            "or write to standard output or a file")
