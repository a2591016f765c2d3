"""numba kernels over the flat answer arrays, by family.

Every kernel is pure: arrays and numbers in, arrays out (or filled in place
when the caller owns the buffer), no Python objects, no randomness but the
draws of :mod:`.draws` (a function of the seed, the task's name and the
draw's index, handed in as keys: the same wherever a task is drawn).  The
answers are sorted by task and described by ``task_ptr`` (CSR offsets), so a
kernel streams each task's answers contiguously.

* :mod:`.schedule` -- the ingest kernels' threads (the block grid and
  the fitting kernels' threads are the engine's, :mod:`crowdagg.engine`);
* :mod:`.em` -- Dawid--Skene EM as a block function of the engine's protocol
  (:func:`em_block`: the latent E-step below, square, with its starts);
* :mod:`.votes` -- vote counting and grouping, the vote family's blocks;
* :mod:`.glad` -- GLAD's E-step, objective and curvature per block;
* :mod:`.draws` -- the task-keyed draw stream (tie draws, latent draws);
* :mod:`.latent` -- the one latent-class E-step every EM-style method runs
  (a per-task or shared log prior, a ``[worker, observed, latent]`` log
  table, a map from latent states to classes, gold, task-keyed draws) as
  the block function :func:`latent_block`;
* :mod:`.cooc` -- co-occurrence statistics of worker pairs (a sparse
  pair index, per-pair K×K joint counts), the third accumulator shape;
* :mod:`.relabel` -- each task's expected information gain of one more
  answer under a pool of workers' confusions (``aggregate --relabel``);
* :mod:`.ingest` -- the counting sort, repeated answers, record scanning;
* :mod:`.text` -- floats as ``repr`` text and rows as bytes (the writers);
* :mod:`.validate` -- the one-pass check of code arrays handed in from
  outside.  Kernels index without bounds checks, so every public wrapper
  here checks the codes and offsets it is given (a
  :class:`~crowdagg.errors.DataError`, never a write outside an array);
  the package's builders call the ``_``-prefixed, unchecked twins on codes
  that are valid by construction.

Families to come (graph messages) get a module each: numba kernels over
one block and module-level block functions of the engine's protocol.

Kernels are compiled with ``cache=True`` (the first run after installing
compiles them once, then they load from the on-disk cache;
:func:`announce_compilation` says so on a terminal) and ``nogil=True``, so
the engine's threads run them in parallel (the thread policy's count,
:mod:`crowdagg.core.threads`).  EM is one fused pass per block -- the E-step for a
task, then its expected counts (:mod:`.latent`'s kernel) -- as the block
functions :func:`em_block` and :func:`latent_block`
that an engine (:mod:`crowdagg.engine`) maps over its grid and reduces
along its fixed tree: bit-identical for any thread count and for any
partitioning aligned with the grid, which is what a distributed (Dask)
engine maps over.
"""

from __future__ import annotations

from typing import Any

from .em import EMParams, em_block
from .ingest import quote_parity, repeated_answers, scan_records, sort_by_task
from .latent import LatentParams, latent_block
from .schedule import n_threads
from .votes import group_order, vote_counts, worker_agreement


def compiled(*kernels: Any) -> bool:
    """Whether numba's on-disk cache holds every given kernel (so a run will not compile them)."""
    import os

    for k in kernels:
        try:
            index = k._cache._cache_file._index_path
        except AttributeError:  # pragma: no cover - another numba layout: assume compiled
            continue
        if not os.path.exists(index):
            return False
    return True


def announce_compilation(stream: Any) -> None:
    """Say once, on a terminal, that the first run compiles the kernels (a few seconds, cached after)."""
    if stream is None or not getattr(stream, "isatty", lambda: False)():
        return
    if not compiled(ingest._scatter, ingest._repeats, latent._latent_block):
        stream.write("compiling kernels, once (a few seconds; later runs reuse them)\n")
        stream.flush()


from . import ingest, latent  # noqa: E402  (the kernels announce_compilation checks)

__all__ = [
    "EMParams",
    "LatentParams",
    "announce_compilation",
    "compiled",
    "em_block",
    "group_order",
    "latent_block",
    "n_threads",
    "quote_parity",
    "repeated_answers",
    "scan_records",
    "sort_by_task",
    "vote_counts",
    "worker_agreement",
]
