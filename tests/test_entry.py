"""The console script in real processes: signals, closed descriptors, pipes, devices.

These need a real process (file descriptors, signals), so they run
``python -m crowdagg`` -- the same entry point as the installed script.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BLUEBIRD = ROOT / "crowdagg" / "examples" / "bluebird_labels.csv"
CMD = [sys.executable, "-m", "crowdagg"]


def env() -> dict[str, str]:
    e = dict(os.environ)
    e.pop("PYTHONWARNINGS", None)
    return e


def run(*args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([*CMD, *args], capture_output=True, text=True, timeout=120, env=env(), **kw)


def one_error_line(stderr: str) -> str:
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error: "), stderr
    assert "Traceback" not in stderr
    return lines[0]


def listing(directory: Path) -> set[str]:
    return {p.name for p in directory.iterdir()}


@pytest.mark.parametrize(
    ("args", "redirect", "needle"),
    [
        (["--version"], {"stdout": "closed"}, "standard output is closed"),
        (["aggregate", str(BLUEBIRD), "-m", "mv"], {"stdout": "closed"}, "standard output is closed"),
        (["aggregate", "-", "-m", "mv"], {"stdin": "closed"}, "standard input is closed"),
    ],
    ids=["version", "aggregate-stdout", "aggregate-stdin"],
)
def test_closed_standard_descriptors_give_one_line(args, redirect, needle):
    # Run through a shell so that the descriptor is really closed (>&- / <&-), as a user would.
    shell_redir = " >&-" if redirect.get("stdout") == "closed" else " <&-"
    cmd = " ".join(f"'{c}'" for c in [*CMD, *args]) + shell_redir
    proc = subprocess.run(["bash", "-c", cmd], capture_output=False, stderr=subprocess.PIPE, text=True,
                          timeout=120, env=env())
    assert proc.returncode == 1
    assert needle in one_error_line(proc.stderr)
    for name in ("AttributeError", "NoneType"):
        assert name not in proc.stderr


def test_closed_stdout_commits_no_file(tmp_path):
    cmd = " ".join(f"'{c}'" for c in [*CMD, "aggregate", str(BLUEBIRD), "--workers", str(tmp_path / "w.csv")]) + " >&-"
    proc = subprocess.run(["bash", "-c", cmd], stderr=subprocess.PIPE, text=True, timeout=120, env=env())
    assert proc.returncode == 1
    assert "standard output is closed" in one_error_line(proc.stderr)
    assert listing(tmp_path) == set()


def test_full_stdout_commits_no_file(tmp_path):
    with open("/dev/full", "w") as full:
        proc = subprocess.run(
            [*CMD, "aggregate", str(BLUEBIRD), "-m", "mv", "--workers", str(tmp_path / "w.csv")],
            stdout=full, stderr=subprocess.PIPE, text=True, timeout=120, env=env(),
        )
    assert proc.returncode == 1
    assert "cannot write to standard output" in one_error_line(proc.stderr)
    assert listing(tmp_path) == set()


def test_early_reader_exit_is_not_an_error_and_files_are_committed(tmp_path):
    rows = ["task,worker,label"] + [f"t{t},w{(t * 7 + j) % 50},{'abc'[(t + j) % 3]}" for t in range(30000)
                                    for j in range(3)]
    src = tmp_path / "big.csv"
    src.write_text("\n".join(rows) + "\n")
    proc = subprocess.Popen(
        [*CMD, "aggregate", str(src), "-m", "mv", "--proba", "--workers", str(tmp_path / "w.csv")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env(),
    )
    assert proc.stdout is not None and proc.stderr is not None
    first = proc.stdout.readline()
    proc.stdout.close()
    stderr = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 0
    assert first.startswith(b"task,label,confidence")
    assert "Error" not in stderr and "Traceback" not in stderr
    assert (tmp_path / "w.csv").read_text().startswith("worker,true_label")
    assert listing(tmp_path) == {"big.csv", "w.csv"}


def test_dev_stdout_appends_to_the_redirected_file(tmp_path):
    log = tmp_path / "log"
    log.write_text("kept\n")
    with open(log, "a") as fh:
        proc = subprocess.run([*CMD, "aggregate", str(BLUEBIRD), "-m", "mv", "-o", "/dev/stdout"],
                              stdout=fh, stderr=subprocess.PIPE, text=True, timeout=120, env=env())
    assert proc.returncode == 0, proc.stderr
    text = log.read_text()
    assert text.startswith("kept\ntask,label,confidence\n") and len(text.splitlines()) == 1 + 1 + 108
    assert listing(tmp_path) == {"log"}


def test_dev_fd_output_streams_into_the_inherited_descriptor(tmp_path):
    r, w = os.pipe()
    try:
        proc = subprocess.Popen(
            [*CMD, "aggregate", str(BLUEBIRD), "-m", "mv", "-o", f"/dev/fd/{w}", "--format", "jsonl"],
            pass_fds=(w,), stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env(),
        )
        os.close(w)
        w = -1
        with os.fdopen(r, "rb") as fh:
            r = -1
            data = fh.read()
        out, err = proc.communicate(timeout=120)
    finally:
        for fd in (r, w):
            if fd >= 0:
                os.close(fd)
    assert proc.returncode == 0, err
    assert out == b""
    assert len(data.splitlines()) == 108 and data.startswith(b'{"task":')


def test_stdout_redirected_to_the_workers_file_is_a_usage_error(tmp_path):
    target = tmp_path / "both.csv"
    with open(target, "w") as fh:
        proc = subprocess.run([*CMD, "aggregate", str(BLUEBIRD), "--workers", str(target)],
                              stdout=fh, stderr=subprocess.PIPE, text=True, timeout=120, env=env())
    assert proc.returncode == 2
    assert "same file" in one_error_line(proc.stderr)


def _proc_text(pid: int, name: str) -> str | None:
    try:
        with open(f"/proc/{pid}/{name}") as fh:
            return fh.read()
    except OSError:
        return None


def _handlers_installed(pid: int) -> bool:
    """Whether crowdagg's handlers are in place: the process catches SIGTERM.

    CPython catches SIGINT itself from start-up but leaves SIGTERM alone;
    only ``crowdagg.core.signals.install`` catches it.
    """
    status = _proc_text(pid, "status") or ""
    caught = next((line.split()[1] for line in status.splitlines() if line.startswith("SigCgt:")), "0")
    return bool(int(caught, 16) & (1 << (signal.SIGTERM - 1)))


# read(2)'s number in /proc/PID/syscall (x86-64, then the generic table of arm64 and riscv64).
_READ_SYSCALL = {"x86_64": "0", "aarch64": "63", "arm64": "63", "riscv64": "63"}.get(os.uname().machine)


def _blocked_reading_stdin(pid: int) -> bool:
    """Whether the main thread sleeps in read(0, ...) -- a pipe with nothing more to give."""
    fields = (_proc_text(pid, "syscall") or "").split()
    if len(fields) >= 2 and _READ_SYSCALL is not None:
        return fields[0] == _READ_SYSCALL and fields[1] == "0x0"
    return "pipe" in (_proc_text(pid, "wchan") or "")  # no syscall view: the kernel's wait channel


def _wait_until(proc: subprocess.Popen, ready, what: str, seconds: float = 120.0) -> None:
    """Poll until ``ready(pid)`` holds; a slow machine only makes this wait longer, never flake."""
    deadline = time.monotonic() + seconds
    while not ready(proc.pid):
        if proc.poll() is not None:
            pytest.fail(f"the process ended ({proc.returncode}) before {what}: {proc.communicate()}")
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"not {what} after {seconds:.0f} s")
        time.sleep(0.002)


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs /proc to see a process's state")
@pytest.mark.parametrize(("sig", "code", "word"), [(signal.SIGTERM, 143, "terminated"), (signal.SIGINT, 130, "interrupted")])
def test_signal_while_reading_stdin(tmp_path, sig, code, word):
    proc = subprocess.Popen(
        [*CMD, "aggregate", "-", "-o", str(tmp_path / "out.csv"), "--workers", str(tmp_path / "w.csv")],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env(),
    )
    assert proc.stdin is not None
    proc.stdin.write("task,worker,label\nt1,w1,a\n")
    proc.stdin.flush()
    # Wait for the state, not for a time: imports done and blocked reading stdin, however slow the machine.
    _wait_until(proc, lambda pid: _handlers_installed(pid) and _blocked_reading_stdin(pid), "blocked reading stdin")
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == code, err
    assert word in one_error_line(err)
    assert out == ""
    assert listing(tmp_path) == set()


def _assert_documented_interrupt_outcome(proc: subprocess.Popen, out: str, err: str, directory: Path) -> str:
    """Check one run interrupted by SIGINT at an arbitrary moment; return which outcome it was.

    The README's promise holds once crowdagg's code runs; before that, the
    interpreter decides, and all that is asked is that nothing is written.
    """
    files = listing(directory)
    assert not any(name.endswith(".tmp") or name.startswith(".") for name in files), files
    if proc.returncode == 0:  # the run finished first: then it wrote its file, whole
        assert out == "" and (directory / "out.csv").read_text().count("\n") == 109
        return "finished"
    assert out == ""
    if proc.returncode == -signal.SIGINT:
        # Before Python's own handler (or a KeyboardInterrupt before crowdagg's handlers): killed by the signal.
        assert files == set(), err
        return "before crowdagg"
    if proc.returncode == 1 and (err.startswith("Fatal Python error: init_")
                                 or err.startswith("Could not import runpy module")):
        # CPython was still starting (importing site, opening the standard streams, importing runpy for
        # ``-m``): it aborts with "Fatal Python error: init_import_site" / "init_sys_streams", or
        # "Could not import runpy module" (the KeyboardInterrupt met inside that import), and exit status 1.
        assert files == set(), err
        return "during python start-up"
    assert proc.returncode == 130, err
    assert "interrupted" in one_error_line(err)
    assert "KeyboardInterrupt" not in err
    assert files <= {"out.csv"}  # a signal during the renames lets them finish (the file is then whole)
    if files:
        assert (directory / "out.csv").read_text().count("\n") == 109
    return "interrupted"


@pytest.mark.parametrize("delay", [0.0, 0.01, 0.05, 0.15, 0.3])
def test_sigint_at_a_fixed_delay_after_launch(tmp_path, delay):
    """Any moment, from the interpreter's own start-up on: only the documented outcomes."""
    proc = subprocess.Popen(
        [*CMD, "aggregate", str(BLUEBIRD), "-o", str(tmp_path / "out.csv")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env(),
    )
    time.sleep(delay)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    _assert_documented_interrupt_outcome(proc, out, err, tmp_path)


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs /proc to see a process's handlers")
def test_sigint_during_the_first_imports(tmp_path):
    """Right after the handlers are installed (typer, numpy and numba still to import): one line, exit 130.

    The signal is sent as soon as the process catches SIGTERM, so a loaded
    machine cannot move it before the handlers; it could in principle let the
    whole run finish first, so the race is retried until it is won.
    """
    outcomes = []
    for attempt in range(5):
        directory = tmp_path / str(attempt)
        directory.mkdir()
        proc = subprocess.Popen(
            [*CMD, "aggregate", str(BLUEBIRD), "-o", str(directory / "out.csv")],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env(),
        )
        _wait_until(proc, _handlers_installed, "catching SIGTERM")
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
        outcomes.append(_assert_documented_interrupt_outcome(proc, out, err, directory))
        if outcomes[-1] == "interrupted":
            break
    assert outcomes[-1] == "interrupted", outcomes


def test_late_signals_are_ignored_once_the_run_is_over():
    code = (
        "import signal; from crowdagg._entry import main; rc = main(['methods']); "
        "print(rc, signal.getsignal(signal.SIGTERM) is signal.SIG_IGN, signal.getsignal(signal.SIGINT) is signal.SIG_IGN)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env())
    assert proc.stdout.strip().splitlines()[-1] == "0 True True"


def test_symlink_to_dev_stdout_streams_into_stdout(tmp_path):
    (tmp_path / "so.csv").symlink_to("/dev/stdout")
    log = tmp_path / "log"
    log.write_text("first\n")
    with open(log, "a") as fh:
        proc = subprocess.run([*CMD, "aggregate", str(BLUEBIRD), "-m", "mv", "-o", str(tmp_path / "so.csv")],
                              stdout=fh, stderr=subprocess.PIPE, text=True, timeout=120, env=env())
    assert proc.returncode == 0, proc.stderr
    assert log.read_text().startswith("first\ntask,label,confidence\n")
    piped = subprocess.run([*CMD, "aggregate", str(BLUEBIRD), "-m", "mv", "-o", str(tmp_path / "so.csv")],
                           capture_output=True, text=True, timeout=120, env=env())
    assert piped.returncode == 0 and len(piped.stdout.splitlines()) == 109
    assert (tmp_path / "so.csv").is_symlink()


def test_an_endless_binary_stream_is_refused_at_once():
    with open("/dev/zero", "rb") as zero:
        proc = subprocess.run([*CMD, "aggregate", "-"], stdin=zero, capture_output=True, text=True, timeout=300, env=env())
    assert proc.returncode == 1 and "not a text file" in one_error_line(proc.stderr)
    proc = run("aggregate", "/dev/zero")
    assert proc.returncode == 1 and "/dev/zero: not a text file" in one_error_line(proc.stderr)


@pytest.mark.quick  # the installed entry point in a real process, once
def test_help_with_stdout_closed_is_an_error():
    proc = subprocess.run(["bash", "-c", " ".join(f"'{c}'" for c in CMD) + " --help >&-"], stderr=subprocess.PIPE,
                          text=True, timeout=120, env=env())
    assert proc.returncode == 1 and "standard output is closed" in one_error_line(proc.stderr)


def test_output_colliding_with_redirected_stderr_is_refused(tmp_path):
    target = tmp_path / "E.csv"
    with open(target, "w") as fh:
        proc = subprocess.run([*CMD, "aggregate", str(BLUEBIRD), "-o", str(target), "--workers", "/dev/stderr"],
                              stdout=subprocess.PIPE, stderr=fh, text=True, timeout=120, env=env())
    assert proc.returncode == 2
    assert "same file" in target.read_text()


def test_no_arrow_object_outlives_the_run_into_interpreter_shutdown(tmp_path):
    """An error after Arrow read a file left its arrays in reference cycles (exception, traceback, frames);
    freed only during interpreter shutdown, after Arrow's runtime, they aborted the process ("terminate called
    without an active exception", exit 134) about one run in six: ``aggregate DIR`` with a CSV and a bad JSON.
    ``main`` now collects them while Arrow is alive.  Checked in a real process with the collector off, so
    nothing but ``main`` itself can free them."""
    (tmp_path / "a.csv").write_bytes(BLUEBIRD.read_bytes())
    (tmp_path / "b.json").write_text('{"format": 1}')
    probe = (
        "import gc, sys\n"
        "gc.disable()\n"
        "from crowdagg._entry import main\n"
        "code = main(sys.argv[1:])\n"
        "gc.set_debug(gc.DEBUG_SAVEALL)\n"
        "gc.collect()\n"
        "left = sorted({type(o).__name__ for o in gc.garbage if type(o).__module__.startswith('pyarrow')})\n"
        "gc.garbage.clear()\n"
        "print('left:', ','.join(left), file=sys.stderr)\n"
        "sys.exit(code)\n"
    )
    proc = subprocess.run([sys.executable, "-c", probe, "aggregate", str(tmp_path), "-m", "mv", "-q"],
                          capture_output=True, text=True, timeout=120, env=env(), cwd=ROOT)
    assert proc.returncode == 1 and proc.stdout == "", proc.stderr
    lines = proc.stderr.splitlines()
    assert lines[-2].startswith("Error: ") and "b.json" in lines[-2]
    assert lines[-1] == "left: "
