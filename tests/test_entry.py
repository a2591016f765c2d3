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


def _wait_for(proc: subprocess.Popen, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.01)


@pytest.mark.parametrize(("sig", "code", "word"), [(signal.SIGTERM, 143, "terminated"), (signal.SIGINT, 130, "interrupted")])
def test_signal_while_reading_stdin(tmp_path, sig, code, word):
    proc = subprocess.Popen(
        [*CMD, "aggregate", "-", "-o", str(tmp_path / "out.csv"), "--workers", str(tmp_path / "w.csv")],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env(),
    )
    assert proc.stdin is not None
    proc.stdin.write("task,worker,label\nt1,w1,a\n")
    proc.stdin.flush()
    time.sleep(1.5)  # imports done, blocked reading stdin
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == code
    assert word in one_error_line(err)
    assert listing(tmp_path) == set()


@pytest.mark.parametrize("delay", [0.05, 0.15, 0.3])
def test_sigint_during_the_first_imports(tmp_path, delay):
    proc = subprocess.Popen(
        [*CMD, "aggregate", str(BLUEBIRD), "-o", str(tmp_path / "out.csv")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env(),
    )
    time.sleep(delay)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    if proc.returncode == 0:  # the run finished first: then it wrote its file, whole
        assert (tmp_path / "out.csv").read_text().count("\n") == 109
        return
    if proc.returncode == -signal.SIGINT:  # a loaded machine: the signal came while Python itself started
        assert listing(tmp_path) == set()
        return
    assert proc.returncode == 130, err
    assert "interrupted" in one_error_line(err)
    assert "KeyboardInterrupt" not in err
    assert listing(tmp_path) <= {"out.csv"} and not any(p.endswith(".tmp") for p in listing(tmp_path))


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
        proc = subprocess.run([*CMD, "aggregate", "-"], stdin=zero, capture_output=True, text=True, timeout=60, env=env())
    assert proc.returncode == 1 and "not a text file" in one_error_line(proc.stderr)
    proc = run("aggregate", "/dev/zero")
    assert proc.returncode == 1 and "/dev/zero: not a text file" in one_error_line(proc.stderr)


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
