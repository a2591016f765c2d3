"""One thread policy for the numba kernels, BLAS and torch.

How many threads crowdagg uses is decided here, and nowhere else:

* the **count** N: :func:`use_threads` (a scope, e.g. one CLI run with
  ``--threads N``), else :func:`set_threads` (process-wide), else the
  ``CROWDAGG_THREADS`` environment variable, else all cores the process may
  run on (``NUMBA_NUM_THREADS`` if set, as before this policy existed);
  a count is at most :func:`most` (4 per core, at least 64), every source
  alike;
* the **numba kernels** run their task blocks on N threads (the local
  engine, :class:`crowdagg.engine.LocalEngine`, reads :func:`count`).  The
  block grid depends on the data only and the sums follow a fixed tree,
  so results are bit-identical for any N;
* **BLAS** (numpy's and scipy's OpenBLAS/MKL, through ``threadpoolctl``)
  runs on one thread inside a fit (:func:`fit_scope`): the kernels already
  use the cores, and a BLAS-heavy inner step (an L-BFGS M-step) beside them
  is several times slower with a thread per core than with one (4.2 s
  against 0.8 s on a 2-core machine).  threadpoolctl sees the libraries
  loaded when the fit starts: a method importing scipy at module level
  (the registry imports it before the fit) is covered;
* **reading** (pyarrow's CSV and Parquet readers, the encoding of names
  on two threads) uses threads only when N > 1;
* **torch**, when something has already imported it (this module never
  does), runs inside a fit on the count the caller gave (``use_threads``,
  ``set_threads``, ``CROWDAGG_THREADS``, ``--threads``), else on
  :func:`torch_threads`' default: one thread unless a training batch is
  big enough to split (see there, with the measurements): two threads on
  two cores beside other work ran a small network's epoch up to 80× slower
  than one.  CPU training is reproducible for a given count.

The settings are restored when a fit or scope ends; the library never
changes a process-wide setting that the caller did not ask for.
"""

from __future__ import annotations

import contextlib
import contextvars
import numbers
import os
import sys
from collections.abc import Iterator

from ..errors import UsageError, param

#: The environment variable that sets the count (a whole number >= 1).
ENV = "CROWDAGG_THREADS"
#: The most threads a count may ask for: this many per core of the machine (:func:`most`) ...
PER_CORE = 4
#: ... and never fewer than this, so that a count that works on one machine works on a smaller one too.
AT_LEAST = 64

#: torch's default count gives each thread at least this many multiply-adds of a training batch
#: (:func:`default_torch_threads`; the measurements are there).
TORCH_WORK_PER_THREAD = 100_000_000

_process: int | None = None  # set_threads()
_scoped: contextvars.ContextVar[int | None] = contextvars.ContextVar("crowdagg_threads", default=None)


def parse(value: object, source: str | None = None) -> int:
    """A thread count from ``value`` (an int or NumPy integer, or text such as ``"4"``); a :class:`UsageError` otherwise.

    ``source`` names where the value came from in the message (``"CROWDAGG_THREADS"``);
    by default the message names the ``threads`` parameter.
    """
    where = source or param("threads")
    n: int | None = None
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):  # int, a NumPy integer
        n = int(value)
    elif isinstance(value, str) and value.strip().isdigit() and value.strip().isascii():
        n = int(value.strip())
    if n is None or n < 1:
        raise UsageError(f"{where} must be a whole number >= 1, got {value!r}")
    if n > most():
        # Refused here, the one check of every count (--threads on each command, set_threads, use_threads,
        # CROWDAGG_THREADS): 2**63 overflowed torch.set_num_threads, and 100,000 threads exhausted the memory
        # (thread stacks, numba's JIT) before anything was said.  More threads than cores only add overhead.
        raise UsageError(f"{where} must be at most {most():,} ({PER_CORE} per core of this machine's "
                         f"{os.cpu_count() or 1:,} cores, and never under {AT_LEAST}), got {value!r}")
    return n


def most() -> int:
    """The largest thread count :func:`parse` accepts: :data:`PER_CORE` per core of the machine
    (``os.cpu_count()``), and at least :data:`AT_LEAST`."""
    return max(AT_LEAST, PER_CORE * (os.cpu_count() or 1))


def all_cores() -> int:
    """The default count: the cores this process may run on (numba's own default, honouring ``NUMBA_NUM_THREADS``)."""
    given = os.environ.get("NUMBA_NUM_THREADS", "").strip()
    if given.isdigit() and int(given) >= 1:
        return min(int(given), most())
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def count() -> int:
    """The thread count in force now (see the module docstring for the order); a bad ``CROWDAGG_THREADS`` is a UsageError."""
    n = given()
    return all_cores() if n is None else n


def given() -> int | None:
    """The count the caller gave -- :func:`use_threads`, else :func:`set_threads`, else ``CROWDAGG_THREADS`` --
    or None when none did (:func:`count` then uses all cores, torch its own default, :func:`torch_threads`)."""
    n = _scoped.get()
    if n is not None:
        return n
    if _process is not None:
        return _process
    env = os.environ.get(ENV)
    if env is not None:
        return parse(env, ENV)
    return None


def set_threads(n: int | None) -> None:
    """Use ``n`` threads from now on in this process; ``None`` goes back to ``CROWDAGG_THREADS`` or all cores."""
    global _process
    _process = None if n is None else parse(n)


@contextlib.contextmanager
def use_threads(n: int | None) -> Iterator[int]:
    """Use ``n`` threads for what the calling thread runs inside the ``with`` block; ``None`` changes nothing.

    The count lives in a context variable: another thread running a fit
    at the same time keeps its own.  Yields the count in force inside the block.
    """
    if n is None:
        yield count()
        return
    token = _scoped.set(parse(n))
    try:
        yield count()
    finally:
        _scoped.reset(token)


@contextlib.contextmanager
def fit_scope() -> Iterator[int]:
    """The policy for one fit: BLAS on one thread, torch (if imported) on :func:`torch_threads` threads (the
    given count, else one: the size of the network is not known here); restored after.

    Yields the count the kernels use.  The base
    :meth:`crowdagg.methods.base.Aggregator.fit` enters it around the
    method, so every method runs under it without saying so; a trainer,
    once it knows its network and batch, sets torch's count for its work
    (``torch.set_num_threads(threads.torch_threads(work))``), which this
    scope restores too.
    """
    n = count()
    with contextlib.ExitStack() as stack:
        from threadpoolctl import threadpool_limits

        stack.enter_context(threadpool_limits(limits=1, user_api="blas"))
        torch = sys.modules.get("torch")
        if torch is not None and hasattr(torch, "set_num_threads"):
            before = torch.get_num_threads()
            torch.set_num_threads(torch_threads())
            stack.callback(torch.set_num_threads, before)
        yield n


def torch_threads(work: int | None = None) -> int:
    """torch's thread count for a fit whose training batch does ``work`` multiply-adds: the count the caller
    gave (:func:`given`: ``--threads``, ``CROWDAGG_THREADS`` ... always win), else
    :func:`default_torch_threads` of ``work`` on :func:`all_cores`; ``None`` (the work not known) reads as small."""
    n = given()
    return default_torch_threads(work, all_cores()) if n is None else n


def default_torch_threads(work: int | None, cores: int) -> int:
    """torch's default thread count for a training batch of ``work`` multiply-adds on a machine of ``cores``
    cores: one thread per :data:`TORCH_WORK_PER_THREAD` of work, at least one, at most ``cores // 2``.

    ``work`` is the forward pass of one batch as the network's weights ×
    the batch's rows (exact for ``linear`` and ``mlp``; a ``cnn`` reuses
    each weight at every pixel, so it is counted low, on the one-thread
    side); ``None`` reads as no work.  A pure function of the sizes: the
    same command on the same machine runs on the same count, so a seed
    gives the same bytes (torch splits its float32 sums by thread), which
    a count read from the load of the moment would not.

    Why (``benchmarks/bench_torch_threads.py``; torch 2.13, OpenMP, a
    2-core machine shared with other sessions; ``crowdlayer`` and
    ``raykar``, s/epoch on 1 thread against 2, medians of 1-3 fits; "others":
    the cores other processes kept busy meanwhile, from ``/proc/stat``):

    * **beside other work two threads crawl**: torch's threads wait for
      each other at every operation, and one of them waits for a core.
      music (700 tasks × 124, the default mlp, 1.1 M multiply-adds a
      batch): 0.016 against 0.047 (3×; 0.13 at worst) beside one busy
      loop, and 0.016 against 1.33 (83×) in a first run beside other
      sessions' work; labelme (1,000 × 512, 4.3 M): 0.033 against 0.146
      (crowdlayer, 4×) and 0.052 against 0.50 (raykar, 10×) beside one
      busy loop; a wide mlp (512-d, hidden
      1,024, batches of 64, 34 M) on 20,000 tasks 4.4 against 46.8 (11×,
      others 1.5 cores), batches of 1,024 (547 M) 2.2 against 6.8 (3×);
      hidden 2,048 on 5,000 tasks beside a busy loop (others 1.6-1.8
      cores): 2.7 against 21.0 (68 M, 8×), 2.0 against 4.4 (1.1 G, 2.2×);
      hidden 1,024 on 100,000 tasks, batches of 64 (34 M), others 1.1-1.3
      cores: 12.3 against 37.1 (3×);
    * **alone, two threads gain little**: music and labelme 1.0-1.2×
      (0.026 against 0.022 on labelme); on 5,000 synthetic tasks (512-d)
      with others under 0.05 cores, 1.1-1.2× up to 69 M multiply-adds a
      batch (hidden 128 on batches of 1,024: 0.049 against 0.043), 1.3-1.45×
      from 68 M on a wide layer (hidden 2,048, batches of 64: 0.730 against
      0.502; of 1,024, 1.1 G: 0.414 against 0.302; hidden 512, batches of
      1,024, 274 M: 0.119 against 0.090); 100,000 tasks, hidden 1,024,
      batches of 1,024 (547 M), others under 0.15 cores: 4.71 against 3.82
      (1.23×).  The work counts the layers'
      multiply-adds, not the per-answer work beside them: the same 68 M
      gained 1.45× on hidden 2,048 and 1.15× on hidden 128.

    So a thread is added only for a batch worth splitting (at least
    :data:`TORCH_WORK_PER_THREAD` a thread: a gain of 1.3× or more where
    measured), and half the cores stay free for other work, which costs far
    more when it lands on a core torch waits for than a second thread ever
    gains: on 2 cores, one thread always.  Give a count (``--threads``,
    ``CROWDAGG_THREADS``) for a machine known to be idle.
    """
    from .checks import check_int

    cores = check_int("cores", cores, 0)  # text reached Python's TypeError from the comparisons below
    if work is not None:
        work = check_int("work", work, 0)
    if work is None or cores < 2:
        return 1
    return max(1, min(cores // 2, work // TORCH_WORK_PER_THREAD))


__all__ = ["AT_LEAST", "ENV", "PER_CORE", "TORCH_WORK_PER_THREAD", "all_cores", "count", "default_torch_threads",
           "fit_scope", "given", "most", "parse", "set_threads", "torch_threads", "use_threads"]
