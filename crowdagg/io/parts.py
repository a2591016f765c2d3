"""A result written as a directory of parts: ``aggregate -o out/``.

The layout is the one Spark and Dask's ``to_csv``/``to_parquet`` write,
so that the tools that read theirs read this one (``pandas.read_parquet('out/')``,
DuckDB's ``read_csv('out/*.csv')``, ``pyarrow.dataset``):

* ``part-00000.<fmt>``, ``part-00001.<fmt>``, ... -- one file per
  partition, numbered in the global task order (the order of first
  appearance in the input: part 0 holds the first tasks), each part's rows
  in that order; ``.gz`` added when the directory's name ends in ``.gz``
  (``-o out.csv.gz/``).  A partition without tasks still has its part (a
  header alone, an empty JSON Lines file, a Parquet file without rows), so
  the numbering says where every partition went.
* **CSV and TSV parts each carry the header**, as Spark's and Dask's do:
  each part is a whole table that any reader takes on its own, and a
  pattern over the parts reads them all.  The local engine's single file
  is the first part's header followed by every part's rows::

      { head -n 1 out/part-00000.csv; tail -q -n +2 out/part-*.csv; }  # == aggregate -o out.csv

  JSON Lines parts concatenate as they are (``cat out/part-*.jsonl``);
  Parquet parts read in name order and concatenated give the local
  engine's table.  JSON (one list) cannot be split into parts and is
  refused: use JSON Lines.
* ``_SUCCESS`` (empty, the Hadoop/Spark marker) is written last.  It is
  never seen half-made anyway: the directory is written under a
  temporary hidden name beside the target and renamed into place at the
  end (:func:`crowdagg.io.output.commit`), so a failed or interrupted run
  leaves no directory, and an earlier run's directory stays whole until
  the new one replaces it.

With the Dask engine the parts are rendered and written **on the Dask
workers**, each by the worker holding the partition (its task names stay
there): :func:`crowdagg.io.dask_write.fill_on_workers`.  The workers must
see the client's filesystem at the same path (one machine, or a shared
filesystem such as NFS); the client checks that every part arrived where
it looks for it.  The local engine writes one part, here.

Every part is rendered by the one writer (:func:`crowdagg.io.render.render_chunks`:
the formats, TSV's checks, gzip) and written by :func:`crowdagg.io.output.commit`.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..errors import UsageError
from .part_files import LABEL_FIELDS, LABEL_THEN, PART_FORMATS, check_part_format, check_parts, write_part

if TYPE_CHECKING:  # pragma: no cover
    from .output import Target

#: What is written: a :class:`crowdagg.methods.result.AggregationResult` (not imported: io sits below the methods,
#: which read through it; the result brings its own layout, ``rows_table``).
AggregationResult = Any

def filler(result: AggregationResult, fmt: str, gzip: bool, *, proba: bool = False,
           engine: Any = None) -> Callable[[str], None]:
    """What writes ``result``'s table (``--proba`` columns too) into a temporary directory:
    :func:`crowdagg.io.output.commit`'s ``fill`` for a directory target.

    ``engine``: a :class:`~crowdagg.engine.dask.DaskEngine` holding the
    data's partitions -- one part per partition, written on the workers --
    or None (the local engine): one part, written here.
    """
    check_part_format(fmt, "a directory output", gzip)
    if engine is not None and getattr(engine, "name", "local") == "dask":
        from .dask_write import fill_on_workers

        return lambda directory: fill_on_workers(engine, result, directory, fmt, gzip, proba=proba)

    def fill(directory: str) -> None:
        check_parts(directory, [write_part(directory, 0, fmt, gzip, result.table(proba=proba, arrow=True))])

    return fill


def write_directory(result: AggregationResult, path: str | os.PathLike[str], *, fmt: str | None = None,
                    proba: bool = False, engine: Any = None) -> Target:
    """Write ``result``'s table as the directory of parts ``path`` (module docstring), all or nothing.

    ``fmt``: a format of :data:`PART_FORMATS`, default from the
    directory's name (``out.parquet/``), else CSV.  ``engine``: the Dask
    engine the result was fitted on (one part per partition, written by
    its workers), or None (one part).  ``path`` may be new, empty, or an
    earlier run's directory of parts; anything else is refused.
    """
    from .output import commit, resolve_directory
    from .read import output_format

    path = os.fspath(path)
    if isinstance(engine, str):  # aggregate()'s engine names: a name holds no partitions to write from
        if engine != "local":
            raise UsageError(f"engine: the Dask engine object the result was fitted on, or None, not {engine!r}; "
                             "a result of aggregate(engine='dask') is written here, in one part, with engine=None")
        engine = None
    target = resolve_directory(path, writes=LABEL_FIELDS, then=LABEL_THEN)
    fmt = check_part_format(output_format(fmt, path.rstrip("/" + os.sep) or path, "a directory output"), path,
                            target.gzip)
    commit([(target, filler(result, fmt, target.gzip, proba=proba, engine=engine))])
    return target


__all__ = ["PART_FORMATS", "LABEL_FIELDS", "LABEL_THEN", "check_part_format", "write_part", "check_parts", "filler", "write_directory"]
