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
  does), runs on N threads inside a fit, so CPU training is reproducible
  whatever the machine.

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
    n = _scoped.get()
    if n is not None:
        return n
    if _process is not None:
        return _process
    env = os.environ.get(ENV)
    if env is not None:
        return parse(env, ENV)
    return all_cores()


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
    """The policy for one fit: BLAS on one thread, torch (if imported) on :func:`count` threads; restored after.

    Yields the count the kernels use.  The base
    :meth:`crowdagg.methods.base.Aggregator.fit` enters it around the
    method, so every method runs under it without saying so.
    """
    n = count()
    with contextlib.ExitStack() as stack:
        from threadpoolctl import threadpool_limits

        stack.enter_context(threadpool_limits(limits=1, user_api="blas"))
        torch = sys.modules.get("torch")
        if torch is not None and hasattr(torch, "set_num_threads"):
            before = torch.get_num_threads()
            torch.set_num_threads(n)
            stack.callback(torch.set_num_threads, before)
        yield n


__all__ = ["AT_LEAST", "ENV", "PER_CORE", "all_cores", "count", "fit_scope", "most", "parse", "set_threads", "use_threads"]
