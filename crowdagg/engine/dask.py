"""The Dask engine: the grid's blocks in partitions that live on Dask workers, reduced along the same tree.

Each partition (a :class:`~.part.Part`: a contiguous range of the grid's
blocks) is built once on a Dask worker and stays there (a future the
engine holds; Dask spills it to disk when memory is short and rebuilds it
from its inputs, by lineage, when its worker is lost).  Every
:meth:`DaskEngine.map_reduce`:

1. sends the call's parameters once (a task's result: every partition
   reads the same copy, fetched from worker to worker);
2. runs, per partition on the worker that holds it,
   :func:`~.tree.reduce_range` over the partition's blocks with the block
   function -- the values of the tree nodes the partition covers, O(log n)
   of them;
3. adds those nodes along the tree -- on the workers, pairwise, from
   :data:`WORKER_COMBINE` partitions on (the client then receives one
   accumulator), else on the client -- and :func:`~.tree.combine` s the
   root.

The tree and the block function are the local engine's, so the totals are
bit-identical to :class:`~.local.LocalEngine`'s for any number of
partitions or workers.  Kept outputs (``keep=True``) stay on the workers,
one future per partition, until :meth:`DaskEngine.gather` fetches them in
block order.

**No wait without an end.**  Every wait of the client on the cluster goes
through :func:`settle`: the result comes, or the run ends with a
:class:`~crowdagg.errors.ResourceError` ("lost the Dask scheduler at
ADDRESS while ...") once the client is closed, its connection to the
scheduler is lost (Dask then cancels every future: the partitions are
gone), or the scheduler has not answered a probe for
:data:`SCHEDULER_SILENCE` seconds.  No fixed cap is put on the work
itself: a long pass on a busy cluster waits as long as the scheduler
answers.

Dask (``pip install 'crowdagg[dask]'``) is imported only when an engine is
made.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import gc
import logging
import operator
import time
import warnings
import weakref
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np

from ..errors import ResourceError, UsageError
from . import tree
from .grid import worker_grid
from .local import join
from .part import Part, WorkerPart


def require_distributed() -> Any:
    """The ``distributed`` module, or a :class:`~crowdagg.errors.UsageError` naming the extra to install."""
    try:
        import distributed
    except ImportError:
        raise UsageError("the Dask engine needs dask and distributed: pip install 'crowdagg[dask]'") from None
    return distributed


#: Seconds the scheduler may stay silent -- no answer to the client's probes, or the client reconnecting -- while the
#: client waits on it, before the run is declared lost.  A scheduler whose event loop is held this long is not
#: running the fit either; the work itself has no time limit (a pass over 100M answers may take minutes).
SCHEDULER_SILENCE = 60.0
#: Seconds between two looks at the client's state (and probes of the scheduler) while it waits.
POLL_INTERVAL = 0.5


#: The scheduler address each client was last seen connected to: a closed client has forgotten its own.
_ADDRESSES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def address_of(client: Any) -> str:
    """The scheduler's address, as the errors say it (remembered from the client's last look while connected, so
    that a client closed by another thread mid-wait still names it)."""
    address = getattr(getattr(client, "scheduler", None), "address", None)
    with contextlib.suppress(TypeError):  # a client that takes no weak reference: no memory
        if address:
            _ADDRESSES[client] = address
        else:
            address = _ADDRESSES.get(client)
    return str(address or "an unknown address")


def lost(client: Any, what: str, why: str) -> ResourceError:
    """The one-line error of a run whose scheduler is gone (exit status 1)."""
    return ResourceError(f"lost the Dask scheduler at {address_of(client)} while {what}: {why}")


def check_running(client: Any, what: str) -> None:
    """A :func:`lost` error unless ``client`` is connected (closed, or reconnecting after its scheduler went away)."""
    if client.status != "running":
        raise lost(client, what, f"the client is {client.status}")


def _on_loop(client: Any, make: Callable[[], Awaitable[Any]]) -> concurrent.futures.Future:
    """``make()`` awaited on the client's event loop (its own thread): a future this thread can poll."""
    async def run() -> Any:
        return await make()

    return asyncio.run_coroutine_threadsafe(run(), client.loop.asyncio_loop)


class _Watch:
    """Whether the scheduler still answers: one probe (an ``echo``) out at a time, and since when the scheduler has
    left a probe unanswered (or the client has been reconnecting) -- its silence."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.silent_since: float | None = None
        self.probe: concurrent.futures.Future | None = None

    def why_lost(self) -> str | None:
        """None while the scheduler is there, else why it is taken for lost."""
        client = self.client
        status = client.status
        if status in ("closing", "closed"):
            return f"the client is {status}"
        now = time.monotonic()
        if self.probe is not None and self.probe.done():
            if not self.probe.cancelled() and self.probe.exception() is None:
                self.silent_since = None  # answered: the silence, if any, is over
            self.probe = None
        if self.probe is None and status == "running":
            self.probe = _on_loop(client, lambda: asyncio.wait_for(client.scheduler.echo(), SCHEDULER_SILENCE))
        if self.probe is not None or status != "running":  # a question out, or no connection to ask on
            self.silent_since = now if self.silent_since is None else self.silent_since
        if self.silent_since is not None and now - self.silent_since > SCHEDULER_SILENCE:
            return f"it has not answered for {SCHEDULER_SILENCE:g} s"
        return None

    def stop(self) -> None:
        if self.probe is not None:
            self.probe.cancel()


def settle(client: Any, make: Callable[[], Awaitable[Any]], what: str) -> Any:
    """The result of the coroutine ``make()`` run on ``client``'s loop (a gather, a query of the scheduler), waited
    for in slices of :data:`POLL_INTERVAL` while the scheduler is there; a :func:`lost` error once it is not.

    ``what`` says what the client was doing ("reading the files"), for the error.  A future cancelled because the
    connection was lost, or an ``OSError`` of a client no longer running, is the same error.
    """
    address_of(client)  # remembered, should another thread close the client during the wait
    check_running(client, what)
    if client.asynchronous:  # its loop would be this thread: a wait here would block the loop it waits on
        raise UsageError("the Dask engine takes a synchronous distributed.Client (not asynchronous=True)")
    distributed = require_distributed()
    task = _on_loop(client, make)
    watch = _Watch(client)
    try:
        while True:
            done, _ = concurrent.futures.wait([task], timeout=POLL_INTERVAL)
            if done:
                try:
                    return task.result()
                except (distributed.client.FutureCancelledError, concurrent.futures.CancelledError,
                        asyncio.CancelledError, OSError) as exc:
                    status = client.status
                    if status in ("closing", "closed"):
                        raise lost(client, what, f"the client is {status}") from None
                    if status != "running" or "scheduler-connection-lost" in str(exc):
                        raise lost(client, what, "the connection was lost") from None
                    raise
            why = watch.why_lost()
            if why is not None:
                raise lost(client, what, why)
    finally:
        # A wait given up on is left to end with the client (closed: its futures cancelled), not cancelled here:
        # a gather cancelled midway leaves Dask's inner waits to fail unretrieved, each a traceback on stderr.
        watch.stop()


def gather(client: Any, futures: Sequence[Any], what: str, errors: str = "raise") -> list[Any]:
    """``client.gather(futures, errors=errors)`` through :func:`settle`: their values, or the first error met, or
    a :func:`lost` error (``errors="skip"``: a failed future's value is left out, the caller looks at it)."""
    futures = list(futures)
    return settle(client, lambda: client.gather(futures, errors=errors, asynchronous=True), what)


def run_part(fn: Callable[..., tuple[Any, Any]], part: Part | WorkerPart, params: Any,
             keep: bool) -> tuple[dict, list | None]:
    """On a Dask worker: ``fn`` over ``part``'s blocks, reduced to the values of the tree nodes it covers.

    Returns ``(nodes, outs)``: the cover nodes' values (keyed by node) and,
    when ``keep``, the blocks' outputs in block order.
    """
    outs: list[Any] = []

    def block(b: int) -> Any:
        sums, out = fn(part, b - part.first_block, params, keep)
        if keep:
            outs.append(out)
        return sums

    nodes = tree.reduce_range(part.first_block, part.first_block + part.n_blocks, part.n_blocks_total, block)
    return nodes, (outs if keep else None)


def _given(params: Any) -> Any:
    return params


#: From this many partitions on, their node values are added on the workers, pairwise along the tree, and the
#: client receives the root alone (fewer: the client receives every partition's O(log n) nodes and adds them).
WORKER_COMBINE = 4


def merge_nodes(n: int, *partials: Any) -> dict:
    """On a worker: the node values of adjacent partitions (``run_part`` results, or earlier merges) joined, each
    pair of sibling nodes replaced by their parent -- ``left + right``, or ``left`` alone when the right child lies
    past the ``n`` blocks: :func:`~.tree.combine`'s own rule, so the root keeps its bits."""
    nodes: dict[tree.Node, Any] = {}
    for partial in partials:
        nodes.update({k: _owned(v) for k, v in (partial[0] if isinstance(partial, tuple) else partial).items()})
    return tree.merge(nodes, n)


def _owned(value: Any) -> Any:
    """``value`` with every array copied: the tree adds in place into its left operand, and the operand given
    may be another task's stored result (on the worker that made it) or a read-only view of a message's buffer."""
    if isinstance(value, np.ndarray):
        return value.copy()
    if isinstance(value, tuple):
        return tuple(_owned(v) for v in value)
    return value  # a sum object: its __add__ makes a new one


# --------------------------------------------------------------------------- the worker-ordered partitions
def worker_counts(part: Part) -> np.ndarray:
    """On a worker: a task-ordered partition's answers per worker, shape (n_workers,), int64."""
    return np.bincount(part.worker, minlength=part.n_workers).astype(np.int64, copy=False)


def split_by_worker(part: Part, start: np.ndarray, first_row: int,
                    cuts: np.ndarray) -> list[tuple[np.ndarray, ...]]:
    """On a worker: a task-ordered partition's answers, placed in the global worker order and cut into the pieces
    of the worker-ordered partitions (answer positions ``cuts[q] .. cuts[q+1]``).

    ``start`` (n_workers,): the worker-order position of each worker's first answer in this partition (its
    answers in the partitions before come first: each worker's answers stay in task order); ``first_row``: the
    global task-order index of the partition's first answer.  Each piece is ``(position, row, worker, label,
    task)``, rising in position.
    """
    order = np.argsort(part.worker, kind="stable")  # by worker, task order kept within each
    worker = part.worker[order]
    ptr = np.zeros(part.n_workers + 1, dtype=np.int64)
    np.cumsum(np.bincount(worker, minlength=part.n_workers), out=ptr[1:])
    position = start[worker] + (np.arange(len(order), dtype=np.int64) - ptr[worker])
    rows = order.astype(np.int64) + first_row
    task_of = np.repeat(np.arange(part.first_task, part.first_task + part.n_tasks, dtype=np.int32),
                        np.diff(part.task_ptr))
    label, task = part.label[order], task_of[order]
    ends = np.searchsorted(position, cuts, side="left")
    return [(position[a:b], rows[a:b], worker[a:b], label[a:b], task[a:b]) for a, b in zip(ends[:-1], ends[1:])]


def build_worker_part(first_block: int, n_blocks_total: int, bounds: np.ndarray, worker_ptr: np.ndarray,
                      n_classes: int, *pieces: tuple[np.ndarray, ...]) -> WorkerPart:
    """On a worker: a worker-ordered partition (global worker-order positions ``bounds[0] .. bounds[-1]``) from
    its pieces of every task-ordered partition, each answer put at its position."""
    first = int(bounds[0])
    n = int(bounds[-1]) - first
    rows = np.empty(n, dtype=np.int64)
    worker = np.empty(n, dtype=np.int32)
    label = np.empty(n, dtype=pieces[0][3].dtype if pieces else np.int8)
    task = np.empty(n, dtype=np.int32)
    filled = 0
    for position, *values in pieces:
        at = position - first
        outs: tuple[np.ndarray, ...] = (rows, worker, label, task)
        for out, value in zip(outs, values):
            out[at] = value
        filled += len(at)
    if filled != n:  # the positions are a permutation of the range: anything else is a bug upstream
        raise RuntimeError(f"a worker-ordered partition got {filled:,} answers for {n:,} places")
    for arr in (rows, worker, label, task):
        arr.setflags(write=False)
    return WorkerPart(int(first_block), int(n_blocks_total), np.asarray(bounds, dtype=np.int64) - first, rows,
                      worker_ptr, worker, label, task, len(worker_ptr) - 1, int(n_classes), first_answer=first,
                      task_ordered=False)


def _n_classes(part: Part) -> int:
    return part.n_classes


class Kept(list):  # type: ignore[type-arg]
    """The kept outputs of one :meth:`DaskEngine.map_reduce`: one future per partition (a list of its blocks'
    outputs), on the workers until :meth:`DaskEngine.gather` fetches them."""


class DaskEngine:
    """Map block functions over partitions held on Dask workers and reduce their sums along the tree.

    Parameters
    ----------
    client : distributed.Client
    parts : sequence of distributed.Future
        Futures of the :class:`~.part.Part` s, in block order, covering
        blocks ``0 .. n_blocks`` of one grid contiguously (a partition may
        hold no block).
    n_blocks : int
        Blocks in the grid.

    Attributes
    ----------
    n_blocks : int
    parts : list of distributed.Future
    """

    name = "dask"

    def __init__(self, client: Any, parts: Sequence[Any], n_blocks: int) -> None:
        self.client = client
        address_of(client)  # remembered for the errors of a client closed later
        self.parts = list(parts)
        self.n_blocks = int(n_blocks)
        self._worker_parts: list[Any] | None = None
        self.n_worker_blocks = 0

    @property
    def worker_parts(self) -> list[Any]:
        """Futures of the worker-ordered partitions (:class:`~.part.WorkerPart`), as many as the task-ordered
        ones, cut at the boundaries of :func:`~.grid.worker_grid`'s blocks; built on first use, on the workers.

        A shuffle of the answers by worker: each task-ordered partition
        counts its answers per worker (the client adds the counts: each
        worker's place in the global worker order, and the grid), then sends
        each worker-ordered partition its answers with their places.  The
        answers, their order and the blocks are the local engine's
        (:attr:`~.local.LocalEngine.worker_part`).  They stay on the workers
        (held like the task-ordered ones; rebuilt by lineage when lost).
        """
        if self._worker_parts is None:
            client = self.client
            what = "shuffling the answers by worker"
            counts = np.stack(gather(client, client.map(worker_counts, self.parts, pure=False), what))
            k = gather(client, [client.submit(_n_classes, self.parts[0], pure=False)], what)[0]
            n_workers = counts.shape[1]
            per_part = counts.sum(axis=1)
            first_rows = np.concatenate([[0], np.cumsum(per_part)[:-1]])
            worker_ptr = np.zeros(n_workers + 1, dtype=np.int64)
            np.cumsum(counts.sum(axis=0), out=worker_ptr[1:])
            worker_ptr.setflags(write=False)
            bounds = worker_grid(worker_ptr, k)
            n_blocks = len(bounds) - 1
            block_cuts = np.linspace(0, n_blocks, len(self.parts) + 1).astype(np.int64)
            cuts = bounds[block_cuts]
            # each worker's first place in each partition: its answers in the partitions before come first
            before = np.cumsum(counts, axis=0) - counts
            pieces = [client.submit(split_by_worker, p, worker_ptr[:-1] + before[i], int(first_rows[i]), cuts,
                                    pure=False) for i, p in enumerate(self.parts)]
            shared_ptr = client.submit(_given, worker_ptr, pure=False)
            parts = []
            for q, (b0, b1) in enumerate(zip(block_cuts[:-1], block_cuts[1:])):
                mine = [client.submit(operator.getitem, s, q, pure=False) for s in pieces]
                parts.append(client.submit(build_worker_part, int(b0), n_blocks, bounds[b0:b1 + 1], shared_ptr, k,
                                           *mine, pure=False))
            self._worker_parts, self.n_worker_blocks = parts, n_blocks
        return self._worker_parts

    def map_reduce(
        self, fn: Callable[..., tuple[Any, Any]], params: Any = None, *, keep: bool = False, by: str = "task"
    ) -> tuple[Any, Kept | None]:
        """Run ``fn(part, b, params, keep)`` on every block and add the sums along the tree (as the local engine).

        ``fn`` must be a module-level function (it is sent by reference).
        Returns ``(total, outs)``; ``outs`` (when ``keep``) holds the
        partitions' outputs on the workers: pass it to :meth:`gather`.
        ``by="worker"`` runs over the worker-ordered partitions
        (:attr:`worker_parts`, built on the first such call): ``fn`` receives
        :class:`~.part.WorkerPart` s holding the local engine's worker-ordered
        blocks, so the totals and kept outputs are its bits.
        """
        if by not in ("task", "worker"):
            raise UsageError(f"map_reduce runs by 'task' or 'worker', not {by!r}")
        client = self.client
        check_running(client, f"running {_name(fn)} on the partitions")
        parts, n_blocks = (self.parts, self.n_blocks) if by == "task" else (self.worker_parts, self.n_worker_blocks)
        shared = None
        if params is not None:
            # Sent once, as a task's result, not scattered: the workers fetch it from where it is, and if that
            # worker is lost the scheduler recomputes it (a scatter to a worker that just died fails instead).
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)  # "large graph": large parameters are the point
                shared = client.submit(_given, params, pure=False)
        results = [client.submit(run_part, fn, p, shared, keep, pure=False) for p in parts]
        kept = None
        if keep:  # the nodes travel on, the outputs stay where they were made
            kept = Kept(client.map(operator.getitem, results, [1] * len(results), pure=False))
            results = client.map(operator.getitem, results, [0] * len(results), pure=False)
        if len(results) >= WORKER_COMBINE:  # adjacent partitions' nodes added on the workers, up to the root
            while len(results) > 1:
                results = [client.submit(merge_nodes, n_blocks, *results[i:i + 2], pure=False)
                           for i in range(0, len(results), 2)]
        nodes = merge_nodes(n_blocks, *gather(client, results, f"running {_name(fn)} on the partitions"))
        del results, shared
        return tree.combine(nodes, n_blocks), kept

    def gather(self, outs: Kept) -> Any:
        """The kept outputs fetched from the workers and joined in block order (as :meth:`LocalEngine.gather`)."""
        blocks = [out for part in gather(self.client, outs, "gathering the kept outputs") for out in part]
        return join(blocks)

    def close(self) -> None:
        """Release the partitions (the cluster stays up: it is the caller's).

        Released, not cancelled: ``Client.cancel`` walks the dependents too
        and trips an assertion in the scheduler (distributed 2026.8) on the
        finished passes' released tasks, dropping the client's connection.
        """
        if self.client.status == "running":  # else the client let go of every future already
            for part in [*self.parts, *(self._worker_parts or [])]:
                part.release()
        self.parts, self._worker_parts = [], None


def _name(fn: Any) -> str:
    return str(getattr(fn, "__name__", None) or type(fn).__name__)


def dask_setup(worker: Any) -> None:
    """Preloaded into the worker processes of :func:`connect`'s ``LocalCluster``: they ignore SIGINT.

    Ctrl-C reaches the whole process group; the client's process stops the
    run and closes the cluster, and the workers, interrupted themselves,
    only printed their KeyboardInterrupt tracebacks on the terminal.
    """
    import signal
    import threading

    if threading.current_thread() is threading.main_thread():  # signal.signal works there only
        signal.signal(signal.SIGINT, signal.SIG_IGN)


#: Seconds a ``--scheduler`` address has to answer.
CONNECT_TIMEOUT = 10


def _open_client(distributed: Any, scheduler: str, seconds: float) -> Any:
    """``distributed.Client(scheduler)`` made in a thread of its own and waited for at most twice ``seconds``.

    The client's own timeout does not end every handshake: a scheduler that accepts the connection and then
    answers nothing (frozen: SIGSTOP, a host stuck in swap) held ``Client()`` forever (distributed 2026.8).  A
    client still being made when the time is up is left to its daemon thread.
    """
    import threading

    made: dict[str, Any] = {}

    def make() -> None:
        try:
            made["client"] = distributed.Client(scheduler, timeout=f"{seconds:g}s")
        except BaseException as exc:  # noqa: BLE001 -- handed to the waiting thread, which raises it
            made["error"] = exc

    opener = threading.Thread(target=make, name="crowdagg-dask-connect", daemon=True)
    opener.start()
    opener.join(2 * seconds)
    if opener.is_alive():
        raise TimeoutError(f"it accepted the connection but did not answer in {2 * seconds:g} s")
    if "error" in made:
        raise made["error"]
    return made["client"]


#: The most bytes a Dask scheduler's handshake may announce (it is a few hundred: a dict of the compression, the
#: Python version and the pickle protocol); another server's first bytes read as a length claim far more.
HANDSHAKE_MAX = 1 << 16


class NotAScheduler(Exception):
    """The peer at a ``--scheduler`` address did not open with Dask's handshake (why, in words)."""


def probe_scheduler(scheduler: str, seconds: float) -> None:
    """Check that the peer at a ``tcp://`` address (or ``host:port``) speaks first, as a Dask scheduler does, with
    Dask's handshake: before ``distributed.Client`` reads its answer.

    A scheduler writes its handshake as soon as it accepts (``distributed.comm.core.Listener.on_connection``): an
    8-byte length, then a message of that length naming ``pickle-protocol``.  The client reads that length and
    allocates it before looking at the message, so another server's first bytes (``HTTP/1.1``) became a request
    for exbibytes (``MemoryError``); here at most :data:`HANDSHAKE_MAX` bytes are read, within ``2 × seconds``.
    A refused connection is retried until ``seconds`` have passed (a scheduler still starting); other schemes
    (``tls://``, ``ws://``) are left to the client.  Raises :class:`NotAScheduler`, or ``OSError``/``TimeoutError``
    when nothing can be reached, ``ValueError`` for a port out of range or an ``inproc://`` address of no scheduler in
    this process.
    """
    import socket
    import struct

    from distributed.comm.addressing import parse_address, parse_host_port

    scheme, location = parse_address(scheduler)
    if scheme == "inproc":  # (the client failed on one with 'not enough values to unpack (expected 3, got 1)')
        from distributed.comm.inproc import global_manager

        try:
            listener = global_manager.get_listener_for(location)  # (one of this process's own is let through)
        except ValueError:  # not ip/pid/n
            listener = None
        if listener is None:
            raise ValueError("an inproc:// address names a scheduler inside another process, which this one "
                             "cannot reach; give its tcp:// address")
        return
    if scheme != "tcp":
        return
    host, port = parse_host_port(location)
    if not 0 < port < 65536:  # (port 0 or 99999 was retried as a refused connection for the whole timeout)
        raise ValueError(f"port {port} is not a TCP port (1 to 65535)")
    began = time.monotonic()
    while True:
        try:
            sock = socket.create_connection((host, port), timeout=seconds)
            break
        except ConnectionRefusedError as exc:
            if time.monotonic() - began >= seconds:
                raise OSError(f"Timed out trying to connect to {scheduler} after {seconds:g} s: {exc}") from None
            time.sleep(0.1)
    deadline = time.monotonic() + 2 * seconds

    def read(n: int) -> bytes:
        got = bytearray()
        while len(got) < n:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"it accepted the connection but did not answer in {2 * seconds:g} s")
            sock.settimeout(left)
            try:
                chunk = sock.recv(n - len(got))
            except TimeoutError:
                continue
            if not chunk:
                raise NotAScheduler("it closed the connection without Dask's handshake" if got or n > 8
                                    else "it closed the connection without a word")
            got += chunk
        return bytes(got)

    with sock:
        (size,) = struct.unpack("<Q", read(8))
        if not 0 < size <= HANDSHAKE_MAX:
            raise NotAScheduler(f"its first 8 bytes announce a {size:,}-byte message, not Dask's handshake")
        if b"pickle-protocol" not in read(size):
            raise NotAScheduler("its first message is not Dask's handshake")


@contextmanager
def _quiet_client_logs() -> Iterator[None]:
    """``distributed``'s loggers in this process silenced below CRITICAL while the block runs, then restored.

    A client that loses its scheduler logs its failed reconnection and the tracebacks of its own close
    (``distributed.client - ERROR - Failed to reconnect ...``, ``CancelledError``) on stderr; the run already says
    the loss once (``Error: lost the Dask scheduler at ...``), as ``LocalCluster(silence_logs=...)`` keeps the
    workers' logs off it.  The loggers with a level of their own (``distributed.client`` has one in Dask's
    configuration) are set one by one; the others inherit ``distributed``'s.
    """
    names = ["distributed"] + [name for name, lg in logging.root.manager.loggerDict.items()
                               if name.startswith("distributed.") and isinstance(lg, logging.Logger)
                               and lg.level != logging.NOTSET]
    saved = {name: logging.getLogger(name).level for name in names}
    for name in names:
        logging.getLogger(name).setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        for name, level in saved.items():
            logging.getLogger(name).setLevel(level)


@contextmanager
def connect(scheduler: str | None = None, n_workers: int | None = None) -> Iterator[Any]:
    """A Dask client for one run: to the scheduler at ``scheduler``, or to a ``LocalCluster`` of ``n_workers``
    worker processes (one thread each; default: the thread policy's count) started here and closed on exit.

    ``distributed``'s own logs in this process are off meanwhile (:func:`_quiet_client_logs`): a lost scheduler is
    said once, by the run's error."""
    distributed = require_distributed()
    with _quiet_client_logs():
        yield from _connect(distributed, scheduler, n_workers)


def _connect(distributed: Any, scheduler: str | None, n_workers: int | None) -> Iterator[Any]:
    """:func:`connect`'s client, its logs already quiet."""
    if scheduler is not None:
        failure = None
        try:
            # A refused connection is retried until the timeout: a wrong address is said in seconds, and a
            # scheduler that takes longer than this to answer a connection is not fit to run a fit.
            probe_scheduler(scheduler, CONNECT_TIMEOUT)
            client = _open_client(distributed, scheduler, CONNECT_TIMEOUT)
        except NotAScheduler as exc:  # another kind of server there: refused before anything reads its answer
            failure = (f"no Dask scheduler answered at {scheduler!r} ({exc}): give the address a Dask scheduler "
                       "prints (tcp://host:8786)")
        except (OSError, TimeoutError, ValueError) as exc:
            why = str(exc) or f"{type(exc).__name__} after {CONNECT_TIMEOUT:g} s"  # (Client's timeout says nothing)
            failure = f"cannot reach the Dask scheduler at {scheduler!r}: {why}"
        except Exception as exc:  # whatever the handshake met: the address is wrong, not the run
            # A tls:// address without a TLS context (TypeError), another server behind a scheme the probe leaves
            # to the client: not a run's failure, a wrong address.
            failure = (f"no Dask scheduler answered at {scheduler!r} ({type(exc).__name__}: {exc}): give the "
                       "address a Dask scheduler prints (tcp://host:8786)")
        if failure is not None:
            # Raised outside the handler, so the error holds no traceback of the failed client; its comm is closed
            # here while distributed's logs are quiet, where at exit it logged 'Closing dangling stream' on stderr
            # after the Error line (a server that passed the probe, then failed the client's own handshake).
            gc.collect()
            raise UsageError(failure)
        with client:
            yield client
        return
    from ..core import threads

    n = n_workers or threads.count()
    if n > threads.all_cores():  # each a Python process of its own: more than the cores only costs memory
        raise UsageError(f"a local Dask cluster runs one worker process per core, at most {threads.all_cores()} here "
                         f"(asked for {n}); use fewer threads, or --scheduler for a cluster of other machines")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # distributed's notes on ports and memory limits are not the run's business
        cluster = distributed.LocalCluster(
            n_workers=n, threads_per_worker=1, processes=True, dashboard_address=None,
            preload=[__name__],  # dask_setup: the worker processes leave Ctrl-C to this one
            silence_logs=logging.CRITICAL,  # a task's failure is the run's error, said once by the client
        )
    try:
        with distributed.Client(cluster) as client:
            yield client
    finally:
        cluster.close()
