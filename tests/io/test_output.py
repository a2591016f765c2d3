"""Where outputs go: links followed, FIFOs and devices streamed, descriptors reused, all or nothing."""

from __future__ import annotations

import gzip
import json
import os
import signal
import socket
import stat
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from crowdagg.errors import DataError, Interrupted, UsageError
from crowdagg.io.output import (
    check_binary,
    check_distinct,
    check_not_inputs,
    commit,
    earlier_output,
    encode,
    identity,
    resolve,
)
from crowdagg.io.render import render_table


def listing(directory: Path) -> set[str]:
    return {p.name for p in directory.iterdir()}


def test_new_and_existing_regular_files(tmp_path):
    new = tmp_path / "new.csv"
    old = os.umask(0o027)
    try:
        commit([(resolve(str(new)), b"one\n")])
    finally:
        os.umask(old)
    assert new.read_bytes() == b"one\n" and stat.S_IMODE(new.stat().st_mode) == 0o640
    existing = tmp_path / "existing.csv"
    existing.write_text("old")
    existing.chmod(0o604)
    commit([(resolve(str(existing)), b"two\n")])
    assert existing.read_bytes() == b"two\n"
    assert stat.S_IMODE(existing.stat().st_mode) == 0o604  # the mode is kept
    assert listing(tmp_path) == {"new.csv", "existing.csv"}


def test_symlink_is_followed_and_stays_a_link(tmp_path):
    real_dir = tmp_path / "real"
    real_dir.mkdir()
    target = real_dir / "data.csv"
    target.write_text("old")
    target.chmod(0o600)
    link = tmp_path / "link.csv"
    link.symlink_to(target)
    t = resolve(str(link))
    assert t.kind == "file" and t.path == str(target)
    commit([(t, b"new\n")])
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert target.read_bytes() == b"new\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o600


def test_temp_file_lives_beside_the_real_target(tmp_path, monkeypatch):
    real_dir = tmp_path / "elsewhere"
    real_dir.mkdir()
    (real_dir / "t.csv").write_text("x")
    (tmp_path / "l.csv").symlink_to(real_dir / "t.csv")
    seen = []
    original = os.replace

    def spy(src, dst):
        seen.append((os.path.dirname(src), dst))
        return original(src, dst)

    monkeypatch.setattr(os, "replace", spy)
    commit([(resolve(str(tmp_path / "l.csv")), b"y")])
    assert seen == [(str(real_dir), str(real_dir / "t.csv"))]


def test_dangling_symlink_creates_its_target(tmp_path):
    link = tmp_path / "link.csv"
    link.symlink_to(tmp_path / "missing.csv")
    commit([(resolve(str(link)), b"z")])
    assert link.is_symlink() and (tmp_path / "missing.csv").read_bytes() == b"z"


def test_fifo_is_written_in_one_stream_and_stays_a_fifo(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    got: list[bytes] = []
    # daemon: a failed commit must not leave pytest waiting on a reader blocked in open()
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()
    t = resolve(str(fifo))
    assert t.kind == "stream"
    commit([(t, b"through the pipe\n" * 10_000)])
    reader.join(timeout=120)  # generous: a loaded machine may not schedule the reader for a while
    assert not reader.is_alive()
    assert got == [b"through the pipe\n" * 10_000]
    assert stat.S_ISFIFO(fifo.stat().st_mode)
    assert listing(tmp_path) == {"fifo"}


def test_character_device_is_never_replaced():
    t = resolve("/dev/null")
    assert t.kind == "stream"
    commit([(t, b"discarded")])
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
    # two outputs on /dev/null lose nothing: not a conflict
    check_distinct([resolve("/dev/null", "-o"), resolve("/dev/null", "--workers")])


def test_unix_socket_is_connected_and_written(tmp_path):
    path = str(tmp_path / "s.sock")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(1)
    got: list[bytes] = []

    def serve():
        conn, _ = server.accept()
        chunks = []
        while chunk := conn.recv(65536):
            chunks.append(chunk)
        got.append(b"".join(chunks))
        conn.close()

    th = threading.Thread(target=serve, daemon=True)
    th.start()
    commit([(resolve(path), b"hello socket\n")])
    th.join(timeout=120)
    assert not th.is_alive()
    server.close()
    assert got == [b"hello socket\n"]
    assert stat.S_ISSOCK(os.stat(path).st_mode)


@pytest.mark.parametrize("template", ["/dev/fd/{}", "/proc/self/fd/{}"])
def test_descriptor_paths_stream_into_the_open_descriptor(template):
    r, w = os.pipe()
    try:
        t = resolve(template.format(w))
        assert t.kind == "fd" and t.fd == w
        commit([(t, b"via fd\n")])
        os.close(w)
        w = -1
        assert os.read(r, 100) == b"via fd\n"
    finally:
        os.close(r)
        if w >= 0:
            os.close(w)


def test_closed_descriptor_is_an_error():
    r, w = os.pipe()
    os.close(r)
    os.close(w)
    with pytest.raises(DataError, match=f"file descriptor {w} is not open"):
        resolve(f"/dev/fd/{w}")


def test_dev_stdout_appends_to_a_redirected_log(tmp_path):
    """``-o /dev/stdout >>log`` must append to log, not replace it."""
    log = tmp_path / "log"
    log.write_text("earlier\n")
    code = "from crowdagg.io.output import commit, resolve; commit([(resolve('/dev/stdout'), b'appended\\n')])"
    with open(log, "ab") as fh:
        subprocess.run([sys.executable, "-c", code], stdout=fh, check=True, timeout=300)
    assert log.read_text() == "earlier\nappended\n"
    assert listing(tmp_path) == {"log"}


def test_same_file_twice_is_a_usage_error(tmp_path):
    (tmp_path / "x.csv").write_text("")
    (tmp_path / "alias.csv").symlink_to(tmp_path / "x.csv")
    os.link(tmp_path / "x.csv", tmp_path / "hard.csv")
    for other in ("x.csv", "./x.csv", "alias.csv", "hard.csv", "sub/../x.csv"):
        (tmp_path / "sub").mkdir(exist_ok=True)
        with pytest.raises(UsageError, match="same file"):
            check_distinct(
                [resolve(str(tmp_path / "x.csv"), "--output"), resolve(str(tmp_path / other), "--workers")]
            )
    # not yet existing: compared by path
    with pytest.raises(UsageError, match="--output .* and --workers .* are the same file"):
        check_distinct([resolve(str(tmp_path / "n.csv"), "--output"), resolve(str(tmp_path / "./n.csv"), "--workers")])
    # two outputs on stdout
    with pytest.raises(UsageError, match="same file"):
        check_distinct([resolve("-"), resolve("/dev/stdout", "--workers")])


def test_a_failing_stream_commits_no_file(tmp_path):
    target = tmp_path / "w.csv"
    with pytest.raises(DataError, match="/dev/full: cannot write"):
        commit([(resolve(str(target), "--workers"), b"table"), (resolve("/dev/full", "--output"), b"x" * 100_000)])
    assert listing(tmp_path) == set()


def test_an_interrupt_before_the_renames_leaves_no_temp_file(tmp_path, monkeypatch):
    import crowdagg.io.output as out

    calls = []

    def interrupted_stream(target, data):
        calls.append(target)
        raise Interrupted(signal.SIGTERM, "SIGTERM")

    monkeypatch.setattr(out, "_stream_path", interrupted_stream)
    with pytest.raises(Interrupted):
        commit([(resolve(str(tmp_path / "a.csv")), b"a"), (resolve("/dev/null"), b"b")])
    assert calls and listing(tmp_path) == set()


_HELD_OFF = r"""
import os, signal, sys, time
from crowdagg.core import signals
from crowdagg.errors import Interrupted
from crowdagg.io.output import commit, resolve

signals.install()
original, sent = os.replace, []

def replace_then_signal(src, dst):
    original(src, dst)
    if not sent:  # after the first rename only: exactly one signal, arriving between the two renames
        sent.append(True)
        os.kill(os.getpid(), signal.SIGTERM)
        deadline = time.monotonic() + 60  # held: queued by crowdagg's handler, or pending while blocked
        while not signals._pending and signal.SIGTERM not in signal.sigpending():
            assert time.monotonic() < deadline, "SIGTERM never arrived"
            time.sleep(0.001)

os.replace = replace_then_signal
out = sys.argv[1]
try:
    commit([(resolve(os.path.join(out, "a.csv")), b"a"), (resolve(os.path.join(out, "b.csv")), b"b")])
except Interrupted as exc:
    print("interrupted", exc.exit_code, sorted(os.listdir(out)))
else:
    print("not interrupted")
"""


def test_signals_are_held_off_during_the_renames(tmp_path):
    """A SIGTERM between two renames is held until both outputs are in place, then raised by the commit.

    In a process of its own: the test's runner has threads of its own (xdist's) and handlers to keep, and
    a signal sent to this process must not reach them or outlive the test.
    """
    code = subprocess.run([sys.executable, "-c", _HELD_OFF, str(tmp_path)], capture_output=True, text=True,
                          timeout=120)
    assert code.returncode == 0, code.stderr
    assert code.stdout == "interrupted 143 ['a.csv', 'b.csv']\n"  # both committed; no temporary left


def test_gzip_output_is_reproducible_and_names_no_file(tmp_path):
    t = resolve(str(tmp_path / "out.csv.gz"))
    a, b = encode(t, b"task,label\n" * 100), encode(t, b"task,label\n" * 100)
    assert a == b
    assert a[4:8] == b"\0\0\0\0"  # mtime 0
    assert not (a[3] & 0x08)  # FNAME flag unset: no (temporary) file name in the header
    assert gzip.decompress(a) == b"task,label\n" * 100
    commit([(t, b"x\n")])
    first = (tmp_path / "out.csv.gz").read_bytes()
    commit([(t, b"x\n")])
    assert (tmp_path / "out.csv.gz").read_bytes() == first


def test_directories_and_missing_parents_are_refused(tmp_path):
    with pytest.raises(DataError, match="is a directory"):
        resolve(str(tmp_path))
    with pytest.raises(DataError, match="does not exist"):
        resolve(str(tmp_path / "nodir" / "x.csv"))
    with pytest.raises(UsageError):
        resolve("")


@pytest.mark.parametrize("tail", ["/", "/.", "//"])
def test_a_name_ending_as_a_directory_is_refused_not_written_as_a_file(tmp_path, tail):
    """``-o out.json.gz/`` once wrote plain CSV into a file named out.json.gz (the slash dropped, the name unchecked)."""
    spec = str(tmp_path / "out.json.gz") + tail
    with pytest.raises(UsageError, match=r"--output .*out\.json\.gz/.*: the trailing '/\.?' names a directory"):
        resolve(spec, "--output")
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(DataError, match="is a directory"):  # an existing directory, however spelled
        resolve(str(tmp_path) + tail)


def test_descriptor_spellings_and_links_are_recognised(tmp_path):
    (tmp_path / "so").symlink_to("/dev/stdout")
    (tmp_path / "chain").symlink_to(tmp_path / "so")
    for spec in ("/dev/stdout", "//dev/stdout", "/dev/../dev/stdout", "/proc/thread-self/fd/1",
                 f"/proc/{os.getpid()}/fd/1", str(tmp_path / "so"), str(tmp_path / "chain")):
        t = resolve(spec)
        assert t.kind == "fd" and t.fd == 1, spec
    assert resolve("/dev/stderr").fd == 2
    # another process's descriptor is opened and written, never replaced
    other = resolve(f"/proc/{os.getppid()}/fd/1")
    assert other.kind == "stream"


def test_temp_file_never_more_readable_than_the_target(tmp_path, monkeypatch):
    import crowdagg.io.output as out

    secret = tmp_path / "secret.csv"
    secret.write_text("x")
    secret.chmod(0o600)
    seen = []
    original = out._temp_beside

    def spy(target):
        tmp, fd = original(target)
        seen.append(stat.S_IMODE(os.fstat(fd).st_mode))  # before a single byte is written
        return tmp, fd

    monkeypatch.setattr(out, "_temp_beside", spy)
    old = os.umask(0o022)
    try:
        commit([(resolve(str(secret)), b"new secret")])
    finally:
        os.umask(old)
    assert seen == [0o600]
    assert stat.S_IMODE(secret.stat().st_mode) == 0o600


def test_gz_suffix_in_any_case():
    assert resolve("/tmp/x.CSV.GZ").gzip and resolve("/tmp/x.csv.Gz").gzip


def test_a_target_that_became_a_directory_stops_the_commit_before_any_rename(tmp_path):
    (tmp_path / "a.csv").write_text("old a")
    t_a = resolve(str(tmp_path / "a.csv"))
    t_b = resolve(str(tmp_path / "b.csv"))
    (tmp_path / "b.csv").mkdir()  # after resolve, before commit
    with pytest.raises(DataError, match="b.csv: is a directory"):
        commit([(t_a, b"new a"), (t_b, b"new b")])
    assert (tmp_path / "a.csv").read_text() == "old a"
    assert listing(tmp_path) == {"a.csv", "b.csv"}


# --------------------------------------------------------------------------- identity, earlier outputs, terminals
def test_identity_follows_links_and_descriptor_paths(tmp_path):
    f = tmp_path / "in.csv"
    f.write_text("task,worker,label\n")
    (tmp_path / "soft.csv").symlink_to(f)
    os.link(f, tmp_path / "hard.csv")
    want = (f.stat().st_dev, f.stat().st_ino)
    for spec in ("in.csv", "soft.csv", "hard.csv", "sub/../in.csv"):
        (tmp_path / "sub").mkdir(exist_ok=True)
        assert identity(str(tmp_path / spec)) == want, spec
    fd = os.open(f, os.O_RDONLY)
    try:  # a descriptor path is the open file, not the /proc link
        assert identity(f"/dev/fd/{fd}") == want and identity(f"/proc/self/fd/{fd}") == want
    finally:
        os.close(fd)
    assert identity(str(tmp_path / "missing.csv")) is None
    assert identity("example:bluebird") is None


def test_check_not_inputs_compares_identities_not_spellings(tmp_path):
    f = tmp_path / "in.csv"
    f.write_text("task,worker,label\nt,w,a\n")
    (tmp_path / "soft.csv").symlink_to(f)
    os.link(f, tmp_path / "hard.csv")
    for out in ("soft.csv", "hard.csv", "./in.csv"):
        with pytest.raises(UsageError, match=r"--output .* is also an input \(INPUT in.csv\); refusing to overwrite it"):
            check_not_inputs([resolve(str(tmp_path / out), "--output")], [("INPUT in.csv", str(f))])
    # a new file, /dev/null and another existing file are no conflict
    (tmp_path / "other.csv").write_text("x")
    check_not_inputs(
        [resolve(str(tmp_path / "new.csv"), "-o"), resolve("/dev/null", "--workers"),
         resolve(str(tmp_path / "other.csv"), "--save-workers")],
        [("INPUT in.csv", str(f)), ("--truth /dev/null", "/dev/null")],
    )


def test_stdout_redirected_onto_an_input_is_refused(tmp_path):
    """``aggregate in.csv >>in.csv``: standard output's file is an input (checked in the child, by fd)."""
    f = tmp_path / "in.csv"
    f.write_text("task,worker,label\n")
    code = (
        "import sys; from crowdagg.io.output import check_not_inputs, resolve\n"
        f"check_not_inputs([resolve('-')], [('INPUT in.csv', {str(f)!r})])\n"
    )
    with open(f, "a") as fh:
        proc = subprocess.run([sys.executable, "-c", code], stdout=fh, stderr=subprocess.PIPE, text=True, timeout=120)
    assert proc.returncode == 1 and "standard output is also an input (INPUT in.csv); refusing to write into it" in proc.stderr
    assert f.read_text() == "task,worker,label\n"


def test_stdin_route_by_spelling_link_and_identity(tmp_path):
    src = tmp_path / "in.csv"
    src.write_text("task,worker,label\n")
    (tmp_path / "link").symlink_to("/dev/stdin")
    (tmp_path / "other.csv").write_text("x")
    code = (
        "import json, sys; from crowdagg.io.output import stdin_route\n"
        "print(json.dumps([stdin_route(p) for p in sys.argv[1:]]))\n"
    )
    specs = ["-", "/dev/stdin", "/dev/fd/0", "/proc/self/fd/0", str(tmp_path / "link"), str(src),
             str(tmp_path / "other.csv"), "example:bluebird"]
    with open(src, "rb") as stdin:
        proc = subprocess.run([sys.executable, "-c", code, *specs], stdin=stdin, capture_output=True, text=True,
                              timeout=120, check=True)
    assert json.loads(proc.stdout) == ["descriptor"] * 5 + ["file", None, None]


TLC = ("task", "label", "confidence")
OUT_THEN = "n_answers|p_.*"


@pytest.mark.parametrize(
    ("content", "fields", "then", "want"),
    [
        (b"", ("task", "label"), "", True),  # empty: nothing to lose
        (b"task,label,confidence\nt1,a,1.0\n", TLC, "", True),
        (b"\xef\xbb\xbftask\tlabel\tconfidence\n", TLC, "", True),
        (b'{"task": "t,\\"1", "label": "a", "confidence": 0.5}\n', TLC, "", True),
        (b'[\n{"task": "t1", "label": "a", "confidence": 0.5},\n', TLC, "", True),
        (b'{"format": "crowdagg-workers", "version": 1, "method": "ds", "classes": ["a"]}\n',
         ("format", "version"), ".*", True),
        (gzip.compress(b"worker,true_label,observed_label\n", mtime=0), ("worker", "true_label", "observed_label"),
         "", True),
        # --proba's columns, a class name with a comma quoted as the csv module writes it
        (b'task,label,confidence,n_answers,p_a,"p_b,c"\nt1,a,1.0,2,1.0,0.0\n', TLC, OUT_THEN, True),
        (b'{"task": "t1", "label": "a", "confidence": 0.5, "n_answers": 2, "p_a": 0.5}\n', TLC, OUT_THEN, True),
        # answers are never taken for an earlier output
        (b"task,worker,label\nt1,w1,a\n", TLC, OUT_THEN, False),
        (b'[{"task": "t1", "worker": "w1", "label": "a"}]', TLC, OUT_THEN, False),
        (b'{"t1": {"w1": "a"}}', TLC, OUT_THEN, False),
        (b"task,label\n", TLC, OUT_THEN, False),
        (b"task,label,confidence\n", (), "", False),  # an output with no declared fields is never recognised
        (b"\x1f\x8bnot gzip", ("task",), "", False),
        # answers whose header merely starts like an output: a further field crowdagg never writes there
        (b"task,label,confidence,worker\nt1,a,0.9,w1\n", TLC, OUT_THEN, False),
        (b'{"task": "t1", "label": "a", "confidence": 0.9, "worker": "w1"}\n', TLC, OUT_THEN, False),
        (b'{"task": "t1", "label": "a", "confidence": 0.9, "extra": {"w": 1}}\n', TLC, OUT_THEN, False),
        (b'{"format": "crowdagg-workers", "version": 1, "method": "ds"}\n', ("format", "version"), "", False),
    ],
    ids=["empty", "csv", "tsv-bom", "jsonl", "json", "model", "gzip-csv", "proba-csv", "proba-jsonl",
         "answers-csv", "answers-json", "answers-mapping", "fewer-fields", "no-fields", "bad-gzip",
         "answers-csv-more-fields", "answers-jsonl-more-fields", "answers-jsonl-nested", "no-further-field"],
)
def test_earlier_output_recognises_only_what_crowdagg_writes(tmp_path, content, fields, then, want):
    p = tmp_path / "f"
    p.write_bytes(content)
    assert earlier_output(str(p), fields, then) is want


def test_earlier_output_reads_a_parquet_schema(tmp_path):
    p = tmp_path / "out.parquet"
    p.write_bytes(render_table({"task": np.array(["t"], dtype=object), "label": np.array(["a"], dtype=object),
                                "confidence": np.array([1.0])}, "parquet"))
    assert earlier_output(str(p), ("task", "label", "confidence"))
    assert not earlier_output(str(p), ("task", "worker", "label"))
    assert not earlier_output(str(p), ("task", "label"))  # confidence is not a further field of that output
    gz = tmp_path / "out.parquet.gz"
    gz.write_bytes(gzip.compress(p.read_bytes()))
    assert not earlier_output(str(gz), ("task", "label", "confidence"))  # schema out of reach: kept, not replaced


def test_is_terminal_by_what_the_target_is(tmp_path):
    master, slave = os.openpty()
    try:
        name = os.ttyname(slave)
        (tmp_path / "tty.parquet").symlink_to(name)
        assert resolve(name).is_terminal()
        assert resolve(str(tmp_path / "tty.parquet")).is_terminal()
        assert resolve(f"/dev/fd/{slave}").is_terminal()
    finally:
        os.close(slave)
        os.close(master)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    assert not resolve(str(fifo)).is_terminal()  # asked without opening it: no reader, no hang
    assert not resolve("/dev/null").is_terminal()
    assert not resolve(str(tmp_path / "out.parquet")).is_terminal()


def test_check_binary_refuses_parquet_and_gzip_on_a_terminal(tmp_path):
    master, slave = os.openpty()
    try:
        name = os.ttyname(slave)
        (tmp_path / "t.csv.gz").symlink_to(name)
        with pytest.raises(UsageError, match=f"Parquet is binary and -o {name} is a terminal"):
            check_binary(resolve(name, "-o"), "parquet")
        with pytest.raises(UsageError, match="gzip is binary"):
            check_binary(resolve(str(tmp_path / "t.csv.gz"), "-o"), "csv")
        check_binary(resolve(name, "-o"), "csv")  # text to a terminal is fine
    finally:
        os.close(slave)
        os.close(master)
    check_binary(resolve(str(tmp_path / "o.parquet")), "parquet")


def test_two_outputs_on_stdout_name_both_options():
    """``--task-params -`` beside the labels on stdout said "standard output and standard output are the same
    file": which two options collide must be named."""
    with pytest.raises(UsageError) as err:
        check_distinct([resolve("-", "--output"), resolve("-", "--task-params")])
    assert str(err.value) == ("--output and --task-params both write to standard output; give all but one "
                              "of them a file")
    with pytest.raises(UsageError) as err:
        check_distinct([resolve("-", "--output"), resolve("/dev/stdout", "--workers")])
    assert str(err.value).startswith("--output (standard output) and --workers /dev/stdout are the same file")
