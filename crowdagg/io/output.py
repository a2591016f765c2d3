"""Where outputs go, and the all-or-nothing commit of a run's outputs.

What ``-o PATH`` (or ``--workers PATH``, ``simulate -o DIR``) does is decided
by what PATH finally resolves to -- the choice GNU coreutils make for
``cp``/``sort -o`` and sqlite-utils for its outputs:

* ``-``, ``/dev/stdout``, ``/dev/stderr``, ``/dev/fd/N`` and
  ``/proc/self/fd/N`` are streamed into the descriptor that is already open
  (never resolved and replaced: ``-o /dev/stdout >>log`` appends to ``log``).
* A regular file, or a symlink to one, is replaced atomically: the text goes
  to a temporary file beside the real target, which then takes its place
  with ``rename``.  A symlink stays a symlink; an existing file keeps its
  permission bits (and owner, where allowed).  A new file gets the umask's
  mode.
* Anything else that exists -- a FIFO, a character or block device, a
  socket -- is written directly, in one stream (``-o /dev/null`` stays
  ``/dev/null``).
* A directory (an output that takes one, ``aggregate -o out/``:
  :func:`is_directory_spec`, :func:`resolve_directory`) is written whole
  into a temporary sibling directory, then renamed into place: a new one,
  an empty one, or one this tool wrote before (:func:`earlier_directory`);
  any other existing directory is refused, never emptied.

Whether a binary output (Parquet, gzip) may go there is decided by what the
target finally is, too (:func:`check_binary`): a terminal reached as ``-``,
``/dev/stdout``, ``/dev/tty``, ``/dev/fd/1`` or a symlink to one is refused.

Inputs and outputs are compared by file identity -- ``(st_dev, st_ino)`` of
what the path finally opens (:func:`identity`) -- never by spelling: an
output that is also an input is refused (:func:`check_not_inputs`), whatever
link, ``..`` or descriptor path reaches it.

:func:`commit` writes every output of a run or none: the temporary files are
written first, then the streams, and the renames come last with SIGINT and
SIGTERM held off.  A stdout reader that goes away early (``| head``) is not
an error: the files are still committed.
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import gzip
import io
import json
import os
import re
import secrets
import shutil
import socket
import stat
import sys
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Union

from ..core import signals as _signals
from ..errors import CrowdaggError, CrowdaggWarning, DataError, UsageError, os_reason, warn

_FD_PATH = re.compile(r"^/(?:dev/fd|proc/self/fd|proc/thread-self/fd|proc/(\d+)(?:/task/\d+)?/fd)/(\d+)$")
_STD_PATHS = {"/dev/stdout": 1, "/dev/stderr": 2, "/dev/stdin": 0}
#: Symlinks followed when looking for a descriptor path (as the kernel's ELOOP limit).
_MAX_LINKS = 40


@dataclass(frozen=True)
class Target:
    """A resolved output destination.

    ``kind`` is ``"fd"`` (stream into an open descriptor), ``"file"``
    (atomic replace of the regular file ``path``) or ``"stream"`` (open
    ``path`` -- a FIFO or device -- and write), ``"socket"`` (connect to the
    Unix socket ``path`` and write), ``"dir"`` (a directory of parts at
    ``path``, replaced whole: :func:`resolve_directory`).
    """

    spec: str
    option: str
    kind: str
    path: str | None = None
    fd: int | None = None
    keys: tuple[tuple, ...] = ()
    mode: int | None = None
    owner: tuple[int, int] | None = None
    gzip: bool = False
    #: The leading fields of what this output holds (``("task", "label", "confidence")``): how an
    #: earlier run's file is recognised (:func:`earlier_output`); empty: never recognised.
    writes: tuple[str, ...] = ()
    #: A regular expression every further field must match in full (``"n_answers|p_.*"``); empty:
    #: no further field.  A file with any other field is answers, never taken for an earlier output.
    then: str = ""

    def is_terminal(self) -> bool:
        """Whether the target is a terminal (it is only opened -- never written -- to ask)."""
        if self.kind == "fd":
            assert self.fd is not None
            if self.fd in (1, 2):  # written through sys.stdout/sys.stderr (_stream_fd): ask the stream
                return _isatty(sys.stdout if self.fd == 1 else sys.stderr)
            try:
                return os.isatty(self.fd)
            except OSError:
                return False
        if self.kind != "stream" or self.path is None:
            return False
        try:
            if not stat.S_ISCHR(os.stat(self.path).st_mode):
                return False  # a FIFO is never a terminal, and opening one could block
            fd = os.open(self.path, os.O_WRONLY | os.O_NOCTTY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        except OSError:
            return False  # writing it will say why
        try:
            return os.isatty(fd)
        finally:
            os.close(fd)

    @property
    def where(self) -> str:
        """How messages name it: ``--workers w.csv``, or just the path outside the CLI."""
        if self.spec == "-":
            return "standard output"
        return f"{self.option} {self.spec}" if self.option else self.spec


def _isatty(stream: object) -> bool:
    try:
        return bool(stream.isatty())  # type: ignore[attr-defined]
    except (AttributeError, OSError, ValueError):
        return False


def _gz(spec: str) -> bool:
    return spec.lower().endswith(".gz")


def _descriptor_of(spec: str) -> int | str | None:
    """The descriptor a path names, following symlinks by hand and never through a /proc fd link.

    ``/dev/stdout``, ``//dev/stdout``, ``/dev/../dev/stdout``, ``/dev/fd/3``,
    ``/proc/self/fd/3``, ``/proc/thread-self/fd/3``, ``/proc/<this pid>/fd/3``
    and any symlink chain ending in one of them name a descriptor.  The
    ``/proc`` fd entries themselves are never resolved: for a pipe they point
    nowhere, for a file they would name the file instead of the open stream.
    """
    path = spec
    for _ in range(_MAX_LINKS):
        directory, base = os.path.split(path)
        path = os.path.join(os.path.realpath(directory or "."), base) if base else os.path.realpath(path)
        path = os.path.normpath(path)
        if path in _STD_PATHS:
            return _STD_PATHS[path]
        m = _FD_PATH.match(path)
        if m:
            if m.group(1) is None or int(m.group(1)) == os.getpid():
                return int(m.group(2))
            return path  # another process's descriptor: open it, never replace what it points to
        try:
            target = os.readlink(path)
        except OSError:
            return None
        path = os.path.join(os.path.dirname(path), target)
    return None


def _fd_keys(fd: int) -> tuple[tuple, ...]:
    """Identities of an open descriptor: itself, and the file behind it unless a character device."""
    keys: list[tuple] = [("fd", fd)]
    try:
        st = os.fstat(fd)
    except OSError:
        return tuple(keys)
    if not stat.S_ISCHR(st.st_mode):  # terminals, /dev/null: writing twice loses nothing
        keys.append(("inode", st.st_dev, st.st_ino))
    return tuple(keys)


def resolve(spec: str, option: str = "", writes: Sequence[str] = (), then: str = "") -> Target:
    """Decide what writing to ``spec`` means (see the module docstring); nothing is written.

    ``option`` is how messages name the output (``--workers``); the library
    leaves it empty and messages name the path alone.  ``writes`` and
    ``then``: the fields of what will be written (see :attr:`Target.writes`
    and :attr:`Target.then`).
    """
    target = _resolve(spec, option)
    return dataclasses.replace(target, writes=tuple(writes), then=then) if writes else target


def _resolve(spec: str, option: str) -> Target:
    where = f"{option} {spec}" if option else spec
    if spec == "":
        raise UsageError(f"{option or 'an output'} needs a path (or - for standard output)")
    if spec == "-":
        return Target(spec, option, "fd", fd=1, keys=_stdio_keys(sys.stdout, 1))
    base = os.path.basename(spec)
    if base in ("", ".", "..") and not os.path.isdir(spec):
        # ``out.json.gz/`` names a directory: resolving it would drop the slash and write a file there
        # -- under a name whose extension, read from the last component, was never checked.
        raise UsageError(f"{where}: the trailing '/{base}' names a directory; an output is a file")
    fd = _descriptor_of(spec)
    if isinstance(fd, str):
        keys: tuple[tuple, ...] = ()
        with contextlib.suppress(OSError):
            other = os.stat(fd)
            if not stat.S_ISCHR(other.st_mode):
                keys = (("inode", other.st_dev, other.st_ino),)
        return Target(spec, option, "stream", path=fd, keys=keys, gzip=_gz(spec))
    if fd is not None:
        if fd == 0:
            raise UsageError(f"{where}: that is standard input, not an output")
        if fd in (1, 2):
            stream = sys.stdout if fd == 1 else sys.stderr
            return Target(spec, option, "fd", fd=fd, keys=_stdio_keys(stream, fd), gzip=_gz(spec))
        try:
            os.fstat(fd)
        except OSError:
            raise DataError(f"{where}: file descriptor {fd} is not open") from None
        return Target(spec, option, "fd", fd=fd, keys=_fd_keys(fd), gzip=_gz(spec))
    real = os.path.realpath(spec)
    st = _stat_or_new(real, where, os.path.dirname(spec))
    if st is None:
        return Target(spec, option, "file", path=real, keys=(("path", real),), gzip=_gz(spec))
    if stat.S_ISDIR(st.st_mode):
        raise DataError(f"{where}: is a directory")
    keys = (("inode", st.st_dev, st.st_ino),)
    if stat.S_ISREG(st.st_mode):
        return Target(
            spec, option, "file", path=real, keys=keys,
            mode=stat.S_IMODE(st.st_mode), owner=(st.st_uid, st.st_gid), gzip=_gz(spec),
        )
    if stat.S_ISSOCK(st.st_mode):
        return Target(spec, option, "socket", path=real, keys=keys, gzip=_gz(spec))
    # FIFO, character or block device: stream into it, never replace the node.
    return Target(
        spec, option, "stream", path=real,
        keys=() if stat.S_ISCHR(st.st_mode) else keys, gzip=_gz(spec),
    )


def _stat_or_new(real: str, where: str, shown: str) -> os.stat_result | None:
    """``os.stat(real)`` of an output's resolved path; None when nothing is there yet, whose directory must exist
    (``shown``: that directory as the user spelled it, for the error)."""
    try:
        return os.stat(real)
    except FileNotFoundError:
        pass
    except OSError as exc:
        raise DataError(f"{where}: {os_reason(exc)}") from None
    directory = os.path.dirname(real) or "."
    if not os.path.isdir(directory):
        raise DataError(f"{where}: directory {shown or directory} does not exist")
    return None


#: The marker written last into a directory of parts (Hadoop's and Spark's name): the directory is whole.
SUCCESS = "_SUCCESS"
#: A part's name: ``part-00000.csv`` (``.gz`` added for gzip), numbered from 0 in task order (more digits past
#: 100,000 parts: :func:`part_name`).
_PART = re.compile(r"^part-\d{5,}\.[a-z]+(?:\.gz)?$")


def is_directory_spec(spec: str) -> bool:
    """Whether an output spelled ``spec`` names a directory: it ends with ``/`` or is an existing directory."""
    return spec not in ("", "-") and (spec.endswith(("/", os.sep)) or os.path.isdir(spec))


def part_name(index: int, fmt: str, gzip: bool = False, count: int = 1) -> str:
    """The file name of part ``index`` of ``count`` in a directory output: ``part-00000.csv`` (``.parquet``,
    ``.jsonl.gz`` ...).  Five digits, or as many as the last index has, so that the names of one directory
    sort in part order (``part-099999`` before ``part-100000``) for every reader that takes them by name."""
    return f"part-{index:0{max(5, len(str(count - 1)))}d}.{fmt}" + (".gz" if gzip else "")


def resolve_directory(spec: str, option: str = "", writes: Sequence[str] = (), then: str = "") -> Target:
    """Decide what writing a directory of parts to ``spec`` means; nothing is written.

    ``spec`` (a trailing ``/`` or an existing directory) is followed to the
    real directory (a symlink to one stays a link: the directory it points
    to is replaced).  It may be new (its parent must exist), empty, or a
    directory this tool wrote before with the fields ``writes``/``then``
    (:func:`earlier_directory`); a file there, or a directory holding
    anything else, is refused.  ``.gz`` at the end of its name
    (``out.csv.gz/``) makes gzip-compressed parts.
    """
    spec = os.fspath(spec)
    where = f"{option} {spec}" if option else spec
    if spec == "":
        raise UsageError(f"{option or 'a directory output'} needs a path")
    name = spec.rstrip("/" + os.sep) or spec
    if name == "-":  # ``-o -/``: standard output cannot hold parts, and a directory named - is surely not meant
        raise UsageError(f"{where}: - is standard output, which cannot hold a directory of parts; give a "
                         "directory (./-/ for one named -), or leave out the slash for standard output")
    if _descriptor_of(name) is not None:  # /dev/stdout/, /dev/fd/1/: a stream, refused now rather than after the fit
        raise UsageError(f"{where}: names a stream (an open descriptor), which cannot hold a directory of parts; "
                         "give a directory, or leave out the slash")
    real = os.path.realpath(name)
    st = _stat_or_new(real, where, os.path.dirname(name))
    if st is None:
        return Target(spec, option, "dir", path=real, keys=(("path", real),), gzip=_gz(name),
                      writes=tuple(writes), then=then)
    if not stat.S_ISDIR(st.st_mode):
        raise UsageError(f"{where}: exists and is not a directory; a directory output needs a directory")
    # The directory is replaced by a rename: that would move the working directory out from under this
    # process and the shell that started it (and then delete it), and a mount point cannot be renamed at all.
    with contextlib.suppress(OSError):
        if is_inside(real, os.getcwd()):
            raise UsageError(f"{where}: is the current directory (or holds it), which a directory output would "
                             "replace whole; give a directory beside or below it (out/)")
    if os.path.ismount(real):
        raise UsageError(f"{where}: is a mount point, which cannot be replaced; give a new directory inside it")
    foreign = _foreign(real, writes, then)
    if foreign:
        raise UsageError(f"{where}: the directory holds files this tool did not write ({_listing(foreign)}); "
                         "refusing to replace it: give a new or empty directory")
    return Target(spec, option, "dir", path=real, keys=(("inode", st.st_dev, st.st_ino), ("path", real)),
                  mode=stat.S_IMODE(st.st_mode), gzip=_gz(name), writes=tuple(writes), then=then)


def _listing(names: Sequence[str], most: int = 3) -> str:
    names = sorted(names)
    return ", ".join(names[:most]) + (f" and {len(names) - most} more" if len(names) > most else "")


def earlier_directory(path: str, fields: Sequence[str], then: str = "") -> bool:
    """Whether the directory ``path`` is empty or a directory of parts this tool wrote with these fields.

    Recognised: the :data:`SUCCESS` marker, and otherwise only regular
    files named ``part-NNNNN.<format>[.gz]``, each an earlier output
    (:func:`earlier_output`).  Anything else -- a subdirectory, a hidden
    file, a symlink, another name -- and the directory is not this tool's to replace.
    """
    return not _foreign(path, fields, then)


def _foreign(path: str, fields: Sequence[str], then: str = "") -> list[str]:
    """The entries of the directory ``path`` that make it not :func:`earlier_directory` (all of them when it
    cannot be listed, or has parts but no :data:`SUCCESS` marker); empty when it is one."""
    try:
        names = os.listdir(path)
    except OSError as exc:
        return [f"cannot be listed: {os_reason(exc)}"]
    if not names:
        return []
    if SUCCESS not in names or not fields:
        return names
    foreign = []
    for n in names:
        full = os.path.join(path, n)
        if n == SUCCESS:
            if os.path.islink(full) or not os.path.isfile(full):
                foreign.append(n)
        elif not _PART.match(n) or os.path.islink(full) or not os.path.isfile(full) or \
                not earlier_output(full, fields, then):
            foreign.append(n)
    return foreign


def is_inside(directory: str, path: str) -> bool:
    """Whether ``path`` (followed to its file) lies in ``directory`` (a real path) or below it."""
    return os.path.commonpath([directory, os.path.realpath(path)]) == directory


def _stdio_keys(stream: object, fd: int) -> tuple[tuple, ...]:
    """Identities of stdout/stderr (the file behind it too when the stream is the real descriptor)."""
    try:
        if stream is None or stream.fileno() != fd:  # type: ignore[attr-defined]
            return (("fd", fd),)
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        return (("fd", fd),)
    return _fd_keys(fd)


def _named(target: Target) -> str:
    """How a collision names an output: its option too when it is standard output (two may be)."""
    return f"{target.option} (standard output)" if target.spec == "-" and target.option else target.where


def check_distinct(targets: Sequence[Target]) -> None:
    """Refuse two outputs of one run landing in the same file (one would be lost)."""
    for d in targets:
        for t in targets:
            if t is not d and t.path is not None and t.kind != "socket":
                check_outside(d, _named(t), t.path)
    seen: dict[tuple, Target] = {}
    for t in targets:
        for key in t.keys:
            prev = seen.get(key)
            if prev is not None and prev is not t:
                if prev.spec == t.spec == "-" and prev.option and t.option:
                    raise UsageError(f"{prev.option} and {t.option} both write to standard output; give all but "
                                     "one of them a file")
                raise UsageError(
                    f"{_named(prev)} and {_named(t)} are the same file; give each output its own file"
                )
            seen[key] = t


def check_outside(directory: Target, name: str, path: str) -> None:
    """Refuse another output (``name``, at ``path``: it need not exist yet) inside the output ``directory``
    (a directory target; any other is ignored): the directory is replaced whole, and the output with it."""
    if directory.kind == "dir" and directory.path is not None and path != "-" and is_inside(directory.path, path):
        raise UsageError(f"{name} is inside the output directory {directory.spec}, which is replaced whole; "
                         "write it elsewhere")


def identity(spec: str) -> tuple[int, int] | None:
    """``(st_dev, st_ino)`` of what reading ``spec`` opens, or None (missing, unreadable, ``example:``).

    ``-`` is standard input's file; ``/dev/stdin``, ``/dev/fd/N``,
    ``/proc/self/fd/N`` and links to them are the open descriptor's file
    (not the ``/proc`` link's); any other path is followed to its file.
    """
    st = _opened_stat(spec)
    return None if st is None else (st.st_dev, st.st_ino)


def drained_identity(spec: str) -> tuple[int, int] | None:
    """:func:`identity` of what ``spec`` opens when reading it drains it (a FIFO, pipe or socket), else None.

    A regular file can be read again; a FIFO given twice would leave the
    second reader waiting for a writer forever.  Standard input (``-``,
    ``/dev/stdin``...) is :func:`stdin_route`'s business and gives None here.
    """
    if not spec or spec == "-" or spec.startswith("example:") or _descriptor_of(spec) == 0:
        return None
    st = _opened_stat(spec)
    if st is None or not (stat.S_ISFIFO(st.st_mode) or stat.S_ISSOCK(st.st_mode)):
        return None  # a file, or a device such as /dev/null or a terminal, which can be opened again
    return st.st_dev, st.st_ino


def _opened_stat(spec: str) -> os.stat_result | None:
    """The status of what reading ``spec`` opens (as :func:`identity` describes), or None."""
    if spec == "-":
        return _stream_stat(sys.stdin)
    try:
        fd = _descriptor_of(spec)
        return os.fstat(fd) if isinstance(fd, int) else os.stat(fd if isinstance(fd, str) else spec)
    except (OSError, ValueError):
        return None


def _stream_stat(stream: object) -> os.stat_result | None:
    """The status of the file behind a Python stream, or None when it has no descriptor (a test runner's input)."""
    try:
        return os.fstat(stream.fileno())  # type: ignore[attr-defined]
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        return None


def stdin_route(spec: str) -> str | None:
    """How reading ``spec`` reads standard input, if it does.

    ``"descriptor"``: ``-``, ``/dev/stdin``, ``/dev/fd/0``, ``/proc/self/fd/0``
    or a symlink to one of them -- the open descriptor itself, which can be
    read once.  ``"file"``: another path to the very file (or FIFO)
    standard input is (same ``st_dev``/``st_ino``).  None otherwise.
    """
    if spec == "-":
        return "descriptor"
    if not spec or spec.startswith("example:"):
        return None
    if _descriptor_of(spec) == 0:
        return "descriptor"
    mine = identity(spec)
    return "file" if mine is not None and mine == identity("-") else None


def stdin_is_regular_file() -> bool:
    """Whether standard input is a regular file (which, unlike a pipe or terminal, can be opened again)."""
    st = _stream_stat(sys.stdin)
    return st is not None and stat.S_ISREG(st.st_mode)


def check_not_inputs(targets: Sequence[Target], inputs: Sequence[tuple[str, str | None]]) -> None:
    """Refuse an output that is one of the run's inputs, by file identity.

    ``inputs``: ``(how messages name it, path)`` pairs, e.g. ``("INPUT
    a.csv", "a.csv")``; ``-`` is standard input's file.  An output reaches
    an input through any spelling, symlink, hard link or descriptor path
    (``-o /dev/stdout >>in.csv`` too); character devices (``/dev/null``, a
    terminal) are never a conflict.
    """
    owners: dict[tuple, str] = {}
    for name, path in inputs:
        ident = identity(path) if path else None
        if ident is not None:
            owners.setdefault(("inode", *ident), name)
    for t in targets:
        for key in t.keys:
            owner = owners.get(key)
            if owner is not None:
                how = "overwrite" if t.kind in ("file", "dir") else "write into"
                raise UsageError(f"{t.where} is also an input ({owner}); refusing to {how} it")
        if t.kind == "dir" and t.path is not None:  # the directory is replaced whole: nothing read may be in it
            for name, path in inputs:
                # (a pattern, as given, is no file: what it matches is checked once it is expanded)
                if path and path != "-" and not path.startswith("example:") and os.path.lexists(path) \
                        and _descriptor_of(path) is None and is_inside(t.path, path):
                    raise UsageError(f"{name} is inside the output directory {t.spec}, which is replaced whole; "
                                     "refusing to replace it: write the output elsewhere")


#: Bytes of a file's start read to recognise an earlier output (a header line, a first JSON object).
_HEAD_BYTES = 1 << 16
_JSON_SCALAR = r'(?:"(?:[^"\\]|\\.)*"|[^,{}\[\]"]*)'


def earlier_output(path: str, fields: Sequence[str], then: str = "") -> bool:
    """Whether the file at ``path`` is empty or holds what crowdagg writes with these fields.

    Recognised: a CSV or TSV header, a JSON Lines / JSON (list of objects)
    first object, or a Parquet schema whose names are ``fields`` in order,
    then only names that match the regular expression ``then`` in full
    (none when it is empty); gzip-compressed text too.  Used to leave a
    run's own earlier output out of a directory or pattern given as input,
    while any other file there -- answers, even ``task,label,confidence,worker``
    -- is never overwritten.
    """
    if not fields:
        return False
    try:
        with open(path, "rb") as fh:
            head = fh.read(_HEAD_BYTES)
    except OSError:
        return False
    packed = head[:2] == b"\x1f\x8b"
    if packed:
        try:
            head = zlib.decompressobj(wbits=31).decompress(head, _HEAD_BYTES)
        except zlib.error:
            return False
    if not head:
        return True  # nothing to lose
    want = list(fields)
    rest = re.compile(then) if then else None

    def fits(names: Sequence[str]) -> bool:
        if list(names[: len(want)]) != want:
            return False
        return all(rest is not None and rest.fullmatch(name) for name in names[len(want):])

    if head.startswith(b"PAR1"):
        if packed:
            return False  # its schema is at the end of the whole file: not recognised, so kept
        try:
            import pyarrow.parquet as pq

            return fits(pq.read_schema(path).names)
        except Exception:  # noqa: BLE001 - any unreadable Parquet is simply not recognised
            return False
    text = head.removeprefix(b"\xef\xbb\xbf").decode("utf-8", "replace")
    first = text.split("\n", 1)[0].rstrip("\r")
    if "\n" in text or len(head) < _HEAD_BYTES:  # a whole first line: its fields as the csv module splits them
        if any(fits(next(csv.reader([first], delimiter=sep), [])) for sep in (",", "\t")):
            return True
    keys, whole = _first_object_keys(text)
    # A first object read only in part (a nested value such as a model's class list comes next) is
    # recognised by its leading keys only where any further field would do (``then=".*"``).
    return fits(keys) if whole else (then == ".*" and len(keys) >= len(want) and fits(keys))


_JSON_KEY = re.compile(r'\s*("(?:[^"\\]|\\.)*")\s*:\s*' + _JSON_SCALAR + r"\s*([,}])")


def _first_object_keys(text: str) -> tuple[list[str], bool]:
    """The leading keys of the first JSON object in ``text`` with scalar values, and whether that is all.

    ``False``: the object goes on with a nested value, or past what was read.
    """
    m = re.match(r"\s*\[?\s*\{", text)
    if m is None:
        return [], False
    keys: list[str] = []
    pos = m.end()
    while True:
        m = _JSON_KEY.match(text, pos)
        if m is None:
            return keys, False
        try:
            keys.append(json.loads(m.group(1)))
        except ValueError:
            return keys, False
        if m.group(2) == "}":
            return keys, True
        pos = m.end()


def check_binary(target: Target, fmt: str) -> None:
    """Refuse writing binary data (Parquet, gzip) to a terminal, however the target is spelled."""
    if (fmt in ("parquet", "model") or target.gzip) and target.is_terminal():
        what = {"parquet": "Parquet", "model": "A trained model"}.get(fmt, "gzip")
        where = "standard output" if target.spec == "-" else target.where
        raise UsageError(f"{what} is binary and {where} is a terminal; send it to a file instead")


def encode(target: Target, data: bytes) -> bytes:
    """The bytes that go to ``target``: gzip-compressed for a ``.gz`` name, reproducibly.

    The gzip header carries no file name and a zero timestamp, so identical
    runs give identical bytes.
    """
    if not target.gzip:
        return data
    buf = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buf, mtime=0) as gz:
        gz.write(data)
    return buf.getvalue()


#: What a writer takes: the bytes, or an iterable of bytes-like pieces rendered one at a time
#: (:func:`crowdagg.io.render.render_chunks`), so that an output is never held whole.
Data = Union[bytes, Iterable[Any]]
#: What :func:`commit` takes for each output: :data:`Data`, or for a directory the function that fills it.
Output = Union[Data, Callable[[str], None]]


def pieces(target: Target, data: Data) -> Iterator[Any]:
    """The bytes-like pieces that go to ``target``, gzip-compressed as they come for a ``.gz`` name --
    the same bytes as :func:`encode` of the whole (one deflate stream, no flush between pieces)."""
    if isinstance(data, (bytes, bytearray, memoryview)):
        yield encode(target, bytes(data))
        return
    if not target.gzip:
        yield from data
        return
    buf = io.BytesIO()
    chunks: Iterable[Any] = data
    with gzip.GzipFile(filename="", mode="wb", fileobj=buf, mtime=0) as gz:
        for piece in chunks:
            gz.write(piece)
            if buf.tell() >= 1 << 20:
                yield buf.getvalue()
                buf.seek(0)
                buf.truncate()
    yield buf.getvalue()


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view[: 1 << 20])
        view = view[n:]


class _ReaderGone(Exception):
    """The reader of a pipe went away (EPIPE): not an error for a stream."""


def _stream_fd(target: Target, data: Data) -> None:
    for piece in pieces(target, data):
        if target.fd == 1:
            _write_stdio(sys.stdout, "standard output", piece)
        elif target.fd == 2:
            _write_stdio(sys.stderr, "standard error", piece)
        else:
            assert target.fd is not None
            try:
                _write_all(target.fd, piece)
            except BrokenPipeError:
                raise _ReaderGone from None
            except OSError as exc:
                raise DataError(f"{target.where}: cannot write ({os_reason(exc)})") from None


def _write_stdio(stream: object, name: str, data: Any) -> None:
    if stream is None:
        raise DataError(f"{name} is closed; nothing can be written there (use -o FILE)")
    try:
        buffer = getattr(stream, "buffer", None)
        if buffer is not None:
            stream.flush()  # type: ignore[attr-defined]
            buffer.write(data)
            buffer.flush()
        else:
            stream.write(bytes(data).decode("utf-8"))  # type: ignore[attr-defined]
            stream.flush()  # type: ignore[attr-defined]
    except BrokenPipeError:
        _silence_stdout()
        raise _ReaderGone from None
    except (OSError, ValueError) as exc:
        _silence_stdout()
        raise DataError(f"cannot write to {name} ({os_reason(exc)})") from None


def _silence_stdout() -> None:
    """After a failed write, point fd 1 at /dev/null so Python's exit flush cannot fail again."""
    try:
        if sys.stdout is None or sys.stdout.fileno() != 1:
            return
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        return
    with contextlib.suppress(OSError):
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        os.close(null)


def _stream_path(target: Target, data: Data) -> None:
    assert target.path is not None
    try:
        if target.kind == "socket":
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                sock.connect(target.path)
                for piece in pieces(target, data):
                    sock.sendall(piece)
            return
        fd = os.open(target.path, os.O_WRONLY | getattr(os, "O_CLOEXEC", 0))
        try:
            for piece in pieces(target, data):
                _write_all(fd, piece)
        finally:
            os.close(fd)
    except BrokenPipeError:
        raise _ReaderGone from None
    except OSError as exc:
        raise DataError(f"{target.where}: cannot write ({os_reason(exc)})") from None


def _temp_beside(target: Target) -> tuple[str, int]:
    """A new temporary file next to the real target: (path, open descriptor).

    Created exclusively (``O_EXCL|O_NOFOLLOW``: a unique name, never through
    a planted link) with the target's permission bits when it exists -- so
    the new contents of a 0600 file are never readable by others, even for
    a moment -- else with the umask's mode (unlike mkstemp's 0600).
    """
    assert target.path is not None
    directory = os.path.dirname(target.path) or "."
    base = os.path.basename(target.path)
    mode = 0o666 if target.mode is None else (target.mode & 0o777)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOFOLLOW", 0)
    for _ in range(100):
        tmp = os.path.join(directory, f".{base}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
        try:
            fd = os.open(tmp, flags, mode)
        except FileExistsError:
            continue
        except OSError as exc:
            raise DataError(f"{target.where}: cannot create a file in {directory} ({os_reason(exc)})") from None
        return tmp, fd
    raise DataError(f"{target.where}: cannot create a temporary file in {directory}")


def _temp_dir_beside(target: Target) -> str:
    """A new, empty temporary directory next to the real target (its mode: the existing directory's, else the
    umask's), named as a hidden sibling so no reader of the parent mistakes it for the output."""
    assert target.path is not None
    parent = os.path.dirname(target.path) or "."
    base = os.path.basename(target.path)
    for _ in range(100):
        tmp = os.path.join(parent, f".{base}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
        try:
            os.mkdir(tmp, 0o777)
        except FileExistsError:
            continue
        except OSError as exc:
            raise DataError(f"{target.where}: cannot create a directory in {parent} ({os_reason(exc)})") from None
        if target.mode is not None:  # no one else reads it sooner than the earlier directory allowed
            with contextlib.suppress(OSError):
                os.chmod(tmp, _filling_mode(target.mode))
        return tmp
    raise DataError(f"{target.where}: cannot create a temporary directory in {parent}")


def _filling_mode(mode: int) -> int:
    """The mode of a temporary directory while its parts are written: an earlier directory's ``mode``, and
    writable by its owner (a read-only earlier directory is replaced as a read-only file is: its mode is
    given back when the parts are in, :func:`_fill_dir`)."""
    return stat.S_IMODE(mode) | stat.S_IRWXU


def _fill_dir(target: Target, tmp: str, fill: Callable[[str], None]) -> None:
    """Phase 1 of a directory output: ``fill(tmp)`` writes the parts, then the :data:`SUCCESS` marker, all on disk
    (then the earlier directory's mode).  An error names the output, not the temporary directory."""
    assert target.path is not None
    try:
        fill(tmp)
    except CrowdaggError as exc:
        if tmp not in exc.template:
            raise
        raise type(exc)(exc.template.replace(tmp, target.path)) from None
    try:
        with open(os.path.join(tmp, SUCCESS), "wb") as fh:
            os.fsync(fh.fileno())
        if target.mode is not None and target.mode != _filling_mode(target.mode):
            os.chmod(tmp, target.mode)
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)  # the parts' names are on disk before the rename makes them the directory
        finally:
            os.close(fd)
    except OSError as exc:
        raise DataError(f"{target.where}: cannot write ({os_reason(exc)})") from None


def _swap_dir(target: Target, tmp: str, trash: list[tuple[Target, str]]) -> None:
    """Phase 3 of a directory output: ``tmp`` takes the target's place; an earlier directory goes to ``trash``
    (removed after the last rename).  Checked again here: a directory that meanwhile holds other files is kept."""
    assert target.path is not None
    path = target.path
    if os.path.lexists(path):
        if not os.path.isdir(path) or os.path.islink(path) or not earlier_directory(path, target.writes, target.then):
            raise DataError(f"{target.where}: changed during the run and now holds other files; refusing to replace it")
        old = f"{tmp}.old"
        try:
            os.rename(path, old)
        except OSError as exc:
            raise DataError(f"{target.where}: cannot replace it ({os_reason(exc)})") from None
        trash.append((target, old))
        try:
            os.rename(tmp, path)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.rename(old, path)  # the earlier directory back where it was
                trash.remove((target, old))
            raise DataError(f"{target.where}: cannot write ({os_reason(exc)})") from None
        return
    try:
        os.rename(tmp, path)
    except OSError as exc:
        raise DataError(f"{target.where}: cannot write ({os_reason(exc)})") from None


def commit(outputs: Sequence[tuple[Target, Output]]) -> None:
    """Write every (target, bytes) pair, or none of the files.

    The bytes may come as an iterable of pieces (:data:`Data`), each
    written as it comes, so that a large output is never held whole.

    Order: (1) each file's bytes into a temporary file beside its target
    (a full disk fails here, before anything is visible); (2) the streams --
    stdout, descriptors, FIFOs, devices -- in the order given; (3) the
    renames, with SIGINT/SIGTERM deferred.  On any error, or an interrupt
    before (3), the temporary files are removed and no file is touched.  A
    stream whose reader went away (EPIPE) is skipped without error.  A
    signal that arrives during the renames takes effect after the last one:
    every file is then committed, and the run still ends as interrupted.

    A directory target (``kind == "dir"``) takes, instead of bytes, a
    callable ``fill(directory)`` that writes its parts into the empty
    temporary directory it is given (on this machine, or on any machine
    that shares the filesystem), first of all; the :data:`SUCCESS` marker
    is added after it, and the directory is renamed into place in (3), an
    earlier one it replaces removed after the last rename.
    """
    check_distinct([t for t, _ in outputs])
    files: list[tuple[Target, Data]] = []
    streams: list[tuple[Target, Data]] = []
    dirs: list[tuple[Target, Callable[[str], None]]] = []
    for t, d in outputs:
        if (t.kind == "dir") != callable(d):
            raise TypeError(f"{t.where}: a directory takes the function that fills it, any other output its bytes")
        if callable(d):
            dirs.append((t, d))
        else:
            (files if t.kind == "file" else streams).append((t, d))
    temps: list[str] = []
    temp_dirs: list[str] = []
    trash: list[tuple[Target, str]] = []
    try:
        for target, fill in dirs:  # first: the largest output, and the one a cluster writes
            temp_dirs.append(_temp_dir_beside(target))
            _fill_dir(target, temp_dirs[-1], fill)
        for target, data in files:
            tmp, fd = _temp_beside(target)
            temps.append(tmp)
            try:
                with os.fdopen(fd, "wb") as fh:
                    if target.owner is not None:
                        with contextlib.suppress(OSError):
                            if os.fstat(fh.fileno())[4:6] != target.owner:
                                os.fchown(fh.fileno(), *target.owner)
                    if target.mode is not None:
                        os.fchmod(fh.fileno(), target.mode)  # setuid/sticky bits, and past the umask
                    for piece in pieces(target, data):
                        fh.write(piece)
                    fh.flush()
                    os.fsync(fh.fileno())  # the data are on disk before the rename makes them the file
            except OSError as exc:
                raise DataError(f"{target.where}: cannot write ({os_reason(exc)})") from None
        for target, data in streams:
            try:
                if target.kind == "fd":
                    _stream_fd(target, data)
                else:
                    _stream_path(target, data)
            except _ReaderGone:
                continue
        for target, _ in files:  # a target that became a directory meanwhile fails here, before any rename
            assert target.path is not None
            if os.path.isdir(target.path):
                raise DataError(f"{target.where}: is a directory")
        with _signals.deferred():
            for i, (target, _) in enumerate(dirs):
                _swap_dir(target, temp_dirs[i], trash)
                temp_dirs[i] = ""
            for tmp, (target, _) in zip(temps, files):
                assert target.path is not None
                try:
                    os.replace(tmp, target.path)
                except OSError as exc:
                    raise DataError(f"{target.where}: cannot write ({os_reason(exc)})") from None
            temps = []
    finally:
        for tmp in temps:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        for d in temp_dirs:
            if d:
                with contextlib.suppress(OSError):
                    os.chmod(d, stat.S_IRWXU)  # given a read-only earlier directory's mode when it was filled
                shutil.rmtree(d, ignore_errors=True)
        for target, old in trash:
            _remove_earlier(target, old)


def _remove_earlier(target: Target, old: str) -> None:
    """Remove an earlier directory of parts that a new one replaced (renamed to ``old``): its parts and
    :data:`SUCCESS` only, read-only or not.  Anything else found there (a file written into it since it was
    checked) is kept, and the directory with it, said in a warning -- never removed."""
    with contextlib.suppress(OSError):
        os.chmod(old, stat.S_IRWXU)  # a read-only earlier directory: its entries can be removed
    kept = []
    for name in _listdir(old):
        path = os.path.join(old, name)
        if (name == SUCCESS or _PART.match(name)) and (os.path.islink(path) or not os.path.isdir(path)):
            with contextlib.suppress(OSError):
                os.unlink(path)
                continue
        kept.append(name)
    try:
        os.rmdir(old)
    except OSError as exc:
        if os.path.isdir(old):
            warn(CrowdaggWarning(f"{target.where}: the earlier directory it replaced is kept as {old}, because it "
                                 f"held {_listing(kept) if kept else os_reason(exc)}"))


def _listdir(path: str) -> list[str]:
    try:
        return os.listdir(path)
    except OSError:
        return []


__all__ = [
    "Target", "resolve", "resolve_directory", "is_directory_spec", "earlier_directory", "part_name", "SUCCESS",
    "check_distinct", "check_outside", "check_not_inputs", "check_binary", "is_inside", "commit", "earlier_output",
    "encode", "identity", "stdin_is_regular_file", "stdin_route",
]
