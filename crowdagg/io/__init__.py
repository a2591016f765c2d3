"""Input and output: readers, column finding, platform exports, rendering, atomic writes.

* :mod:`.read` -- files, globs, stdin, DataFrames and records to an
  :class:`~crowdagg.data.AnnotationSet` (``load_annotations``), task->label
  files (``read_task_labels``);
* :mod:`.columns`, :mod:`.platforms` -- which column is what, and the
  exports of MTurk, Toloka and Label Studio;
* :mod:`.render` -- tables to CSV/TSV/JSON/JSONL/Parquet bytes;
* :mod:`.output` -- where outputs go, and writing all of them or none;
* :mod:`.parts` -- a result as a directory of parts (``aggregate -o out/``),
  written by the Dask workers (:mod:`.dask_write`) or here;
* :mod:`.dask_read` -- answer files read on the Dask workers.

``crowdagg.io.load_annotations`` and every other name of the former
``crowdagg.io`` module are handed on from :mod:`.read`.
"""

from ..core.lazy import exports

__getattr__ = exports(__name__, {}, fallback=f"{__name__}.read")
