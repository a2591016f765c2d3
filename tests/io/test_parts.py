"""``aggregate -o DIR/``: a directory of parts, its bytes the single file's, all or nothing, and what it refuses.

The local engine writes one part; the Dask engine's parts (one per partition, written on the workers) are tested
in tests/engine/test_dask.py with :func:`join_parts` from here.
"""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from crowdagg.cli import app
from crowdagg.errors import DataError, UsageError
from crowdagg.io.output import SUCCESS, commit, earlier_directory, resolve_directory
from crowdagg.io.parts import check_parts, write_directory, write_part

#: Each part format and the extension its single file has.
FORMATS = {"csv": "csv", "tsv": "tsv", "jsonl": "jsonl", "parquet": "parquet"}


def run(*args):
    return CliRunner().invoke(app, ["aggregate", *[str(a) for a in args]])


def join_parts(directory: Path, fmt: str) -> bytes | object:
    """What the parts of ``directory`` make joined as their module docstring says: text formats the single file's
    bytes (CSV/TSV: the first part's header, then each part's rows), Parquet the concatenated table."""
    names = sorted(p.name for p in directory.iterdir() if p.name != SUCCESS)
    assert names == [f"part-{i:05d}.{fmt}" + (".gz" if names[0].endswith(".gz") else "") for i in range(len(names))]
    assert (directory / SUCCESS).read_bytes() == b""
    paths = [directory / n for n in names]
    if fmt == "parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        return pa.concat_tables([pq.read_table(p) for p in paths])
    texts = [gzip.decompress(p.read_bytes()) if p.name.endswith(".gz") else p.read_bytes() for p in paths]
    if fmt == "jsonl":
        return b"".join(texts)
    header = texts[0].split(b"\n", 1)[0] + b"\n"
    assert all(t.startswith(header) for t in texts)  # every part carries the header
    return header + b"".join(t[len(header):] for t in texts)


def single(path: Path, fmt: str) -> bytes | object:
    """The single file's bytes (or Parquet table), to compare with :func:`join_parts`."""
    if fmt == "parquet":
        import pyarrow.parquet as pq

        return pq.read_table(path)
    return gzip.decompress(path.read_bytes()) if path.name.endswith(".gz") else path.read_bytes()


def same(a, b) -> bool:
    return a.equals(b) if hasattr(a, "equals") else a == b


@pytest.fixture
def answers(tmp_path: Path) -> Path:
    rng = np.random.default_rng(3)
    rows = ["task,worker,label"] + [f"t{rng.integers(0, 400)},w{rng.integers(0, 12)},{'abc'[rng.integers(0, 3)]}"
                                    for _ in range(3000)]
    path = tmp_path / "in" / "answers.csv"
    path.parent.mkdir()
    path.write_text("\n".join(rows) + "\n")
    return path


@pytest.mark.parametrize("fmt", list(FORMATS))
@pytest.mark.parametrize("proba", [False, True])
def test_the_local_engines_one_part_is_the_single_files_bytes(answers, tmp_path, fmt, proba):
    extra = ["--proba"] if proba else []
    one = tmp_path / f"one.{FORMATS[fmt]}"
    assert run(answers, "-m", "ds", "-o", one, *extra).exit_code == 0
    got = run(answers, "-m", "ds", "-o", f"{tmp_path / 'out'}/", "-f", fmt, *extra)
    assert got.exit_code == 0 and got.stdout == "", got.stderr
    assert sorted(os.listdir(tmp_path / "out")) == [SUCCESS, f"part-00000.{fmt}"]
    assert same(join_parts(tmp_path / "out", fmt), single(one, fmt))
    if fmt == "parquet":  # the readers of a Spark/Dask directory read this one (the marker left out)
        import pandas as pd

        assert pd.read_parquet(tmp_path / "out").equals(pd.read_parquet(one))


def test_the_format_comes_from_the_directorys_name_and_gz_compresses_the_parts(answers, tmp_path):
    assert run(answers, "-m", "mv", "-o", tmp_path / "one.jsonl").exit_code == 0
    got = run(answers, "-m", "mv", "-o", f"{tmp_path / 'out.jsonl.gz'}/")
    assert got.exit_code == 0, got.stderr
    assert sorted(os.listdir(tmp_path / "out.jsonl.gz")) == [SUCCESS, "part-00000.jsonl.gz"]
    part = (tmp_path / "out.jsonl.gz" / "part-00000.jsonl.gz").read_bytes()
    assert part[:2] == b"\x1f\x8b" and gzip.decompress(part) == (tmp_path / "one.jsonl").read_bytes()


def test_an_existing_directory_is_one_without_the_slash_and_an_empty_one_is_filled(answers, tmp_path):
    (tmp_path / "out").mkdir()
    got = run(answers, "-m", "mv", "-o", tmp_path / "out")
    assert got.exit_code == 0, got.stderr
    assert sorted(os.listdir(tmp_path / "out")) == [SUCCESS, "part-00000.csv"]


def test_a_rerun_replaces_its_earlier_directory_whole(answers, tmp_path):
    out = tmp_path / "out"
    assert run(answers, "-m", "mv", "-o", f"{out}/", "--proba").exit_code == 0
    (out / "part-00001.csv").write_bytes((out / "part-00000.csv").read_bytes())  # an earlier run of 2 parts
    assert earlier_directory(str(out), ("task", "label", "confidence"), "n_answers|p_.*")
    got = run(answers, "-m", "mv", "-o", f"{out}/")
    assert got.exit_code == 0, got.stderr
    assert sorted(os.listdir(out)) == [SUCCESS, "part-00000.csv"]  # the stale part is gone with the directory
    assert (out / "part-00000.csv").read_text().startswith("task,label,confidence\n")
    assert sorted(os.listdir(tmp_path)) == ["in", "out"]  # no temporary or old directory left beside it


@pytest.mark.parametrize("content", ["notes.txt", "part-00000.csv", "sub/", ".hidden"])
def test_a_directory_holding_anything_else_is_refused_and_kept(answers, tmp_path, content):
    out = tmp_path / "out"
    out.mkdir()
    if content.endswith("/"):
        (out / content).mkdir()
    else:
        (out / content).write_text("task,worker,label\nt1,w1,a\n")  # answers, even under a part's name
    if content == "part-00000.csv":
        (out / SUCCESS).write_text("")
    before = sorted(os.listdir(out))
    got = run(answers, "-m", "mv", "-o", f"{out}/")
    assert got.exit_code == 2 and "holds files this tool did not write" in got.stderr and "Traceback" not in got.stderr
    assert sorted(os.listdir(out)) == before


def test_a_file_named_as_a_directory_and_a_missing_parent_are_refused(answers, tmp_path):
    (tmp_path / "f").write_text("x")
    got = run(answers, "-m", "mv", "-o", f"{tmp_path / 'f'}/")
    assert got.exit_code == 2 and "is not a directory" in got.stderr
    got = run(answers, "-m", "mv", "-o", f"{tmp_path / 'no' / 'out'}/")
    assert got.exit_code == 1 and "does not exist" in got.stderr and not (tmp_path / "no").exists()


def test_json_cannot_be_split_into_parts(answers, tmp_path):
    for args in (["-o", f"{tmp_path / 'out.json'}/"], ["-o", f"{tmp_path / 'out'}/", "-f", "json"]):
        got = run(answers, "-m", "mv", *args)
        assert got.exit_code == 2 and "cannot be split into parts" in got.stderr and "jsonl" in got.stderr
    assert sorted(os.listdir(tmp_path)) == ["in"]


def test_inputs_and_other_outputs_inside_the_directory_are_refused(answers, tmp_path):
    out = tmp_path / "out"
    assert run(answers, "-m", "mv", "-o", f"{out}/").exit_code == 0
    part = out / "part-00000.csv"
    link = tmp_path / "link.csv"
    link.symlink_to(part)
    for given in (part, link):  # named as files (a pattern follows the rerun rule: the test after this one)
        got = run(given, "-m", "mv", "-o", f"{out}/")
        assert got.exit_code == 2 and "is inside the output directory" in got.stderr, (given, got.stderr)
    got = run(answers, "-m", "mv", "-o", f"{out}/", "--workers", out / "w.csv")
    assert got.exit_code == 2 and "--workers" in got.stderr and "is inside the output directory" in got.stderr
    got = run(out, "-m", "mv", "-o", out)
    assert got.exit_code == 2 and "is also an input" in got.stderr
    assert sorted(os.listdir(out)) == [SUCCESS, "part-00000.csv"] and not (out / "w.csv").exists()


def test_a_failing_part_leaves_no_directory_and_the_earlier_one_whole(tmp_path):
    """A task name with a tab cannot be written as TSV: the run fails in the writer, nothing is left (no
    temporary directory either), an earlier run's directory stays as it was."""
    src = tmp_path / "in.csv"
    src.write_text('task,worker,label\nt1,w1,a\n"t\t2",w1,b\nt3,w2,a\n')
    got = run(src, "-m", "mv", "-o", f"{tmp_path / 'out'}/", "-f", "tsv")
    assert got.exit_code == 1 and "cannot write TSV" in got.stderr and "Traceback" not in got.stderr
    assert sorted(os.listdir(tmp_path)) == ["in.csv"]
    assert run(src, "-m", "mv", "-o", f"{tmp_path / 'out'}/").exit_code == 0
    before = (tmp_path / "out" / "part-00000.csv").read_bytes()
    got = run(src, "-m", "mv", "-o", f"{tmp_path / 'out'}/", "-f", "tsv")
    assert got.exit_code == 1
    assert sorted(os.listdir(tmp_path)) == ["in.csv", "out"]
    assert (tmp_path / "out" / "part-00000.csv").read_bytes() == before


def test_an_interrupt_while_filling_leaves_nothing(tmp_path):
    target = resolve_directory(f"{tmp_path / 'out'}/", writes=("task",))

    def fill(directory: str) -> None:
        Path(directory, "part-00000.csv").write_text("task\n")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        commit([(target, fill)])
    assert os.listdir(tmp_path) == []


def test_the_library_writes_a_directory_and_says_what_is_missing(tmp_path):
    from crowdagg.methods.api import aggregate

    result = aggregate("example:bluebird", "mv")
    write_directory(result, str(tmp_path / "lib.parquet"), proba=True)
    import pyarrow.parquet as pq

    assert pq.read_table(tmp_path / "lib.parquet").num_rows == result.data.n_tasks
    with pytest.raises(UsageError, match="holds files this tool did not write"):
        (tmp_path / "other").mkdir()
        (tmp_path / "other" / "x").write_text("")
        write_directory(result, str(tmp_path / "other"))
    with pytest.raises(DataError, match="is not there on a worker: the Dask workers .* shared filesystem"):
        write_part(str(tmp_path / "gone"), 0, "csv", False, {"task": np.array(["t"], object)}, " on a worker")
    with pytest.raises(DataError, match=r"part-00003\.csv of the output directory .* is missing here"):
        check_parts(str(tmp_path), [("part-00003.csv", 10)])
    name, size = write_part(str(tmp_path), 3, "csv", False, {"task": np.array(["t"], object)})
    with pytest.raises(DataError, match="has 7 bytes here, not the 8 its writer wrote"):
        check_parts(str(tmp_path), [(name, size + 1)])


def test_a_pattern_matching_the_earlier_parts_leaves_them_out_so_the_run_repeats(tmp_path):
    """The rerun rule (a pattern or directory given as INPUT leaves out this run's own earlier outputs) holds for
    the parts of ``-o DIR/`` as for ``-o FILE``: left out with a warning; a pattern of nothing else reads nothing."""
    src = tmp_path / "data" / "batch" / "answers.csv"
    src.parent.mkdir(parents=True)
    src.write_text("task,worker,label\nt1,w1,a\nt1,w2,b\nt2,w1,b\n")
    out = tmp_path / "data" / "labels"
    first = run(src, "-m", "mv", "-o", f"{out}/")
    assert first.exit_code == 0, first.stderr
    before = (out / "part-00000.csv").read_bytes()
    for _ in range(2):
        got = run(tmp_path / "data" / "*" / "*.csv", "-m", "mv", "-o", f"{out}/")
        assert got.exit_code == 0, got.stderr
        assert f"left out {out / 'part-00000.csv'}: it is this run's output" in got.stderr
        assert (out / "part-00000.csv").read_bytes() == before  # the answers alone were read
    got = run(f"{out}/*.csv", "-m", "mv", "-o", f"{out}/")
    assert got.exit_code == 1 and "nothing to read: what it holds is this run's own output" in got.stderr
    assert sorted(os.listdir(out)) == [SUCCESS, "part-00000.csv"]
    got = run(tmp_path / "data" / "*" / "*.csv", "-m", "mv", "-o", tmp_path / "other.csv")  # not this run's output
    assert got.exit_code == 1 and "no worker column" in got.stderr


@pytest.mark.parametrize("how", [".", "./", "abs", "parent", "link"])
def test_the_working_directory_is_never_the_output(answers, tmp_path, monkeypatch, how):
    """``-o .`` in an empty directory (or an earlier run's) would rename the working directory away and delete it."""
    work = tmp_path / "work"
    work.mkdir()
    (tmp_path / "link").symlink_to(work)
    monkeypatch.chdir(work)
    spec = {".": ".", "./": "./", "abs": f"{work}/", "parent": "../work", "link": f"{tmp_path / 'link'}/"}[how]
    inode = work.stat().st_ino
    got = run(answers, "-m", "mv", "-o", spec)
    assert got.exit_code == 2 and "is the current directory" in got.stderr and "Traceback" not in got.stderr
    assert work.stat().st_ino == inode and os.listdir(work) == [] and os.getcwd() == str(work)
    got = run(answers, "-m", "mv", "-o", "..")  # an ancestor: refused as such, not for its files
    assert got.exit_code == 2 and "is the current directory (or holds it)" in got.stderr
    assert sorted(os.listdir(tmp_path)) == ["in", "link", "work"]


def test_standard_output_with_a_slash_is_refused_not_a_directory_named_dash(answers, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    got = run(answers, "-m", "mv", "-o", "-/")
    assert got.exit_code == 2 and "- is standard output" in got.stderr and got.stdout == ""
    assert sorted(os.listdir(tmp_path)) == ["in"]
    assert run(answers, "-m", "mv", "-o", "./-/").exit_code == 0  # asked for by a path: a directory named -
    assert sorted(os.listdir(tmp_path / "-")) == [SUCCESS, "part-00000.csv"]
    (tmp_path / "so").symlink_to("/dev/stdout")
    for spec in ("/dev/stdout/", "/dev/fd/1/", "/proc/self/fd/1/", "so/"):  # refused now, not after the fit
        got = run(answers, "-m", "mv", "-o", spec)
        assert got.exit_code == 2 and "names a stream" in got.stderr and got.stdout == "", (spec, got.stderr)


def _unprivileged() -> list[str] | None:
    """A command prefix that runs without the permission-bit overrides root has (``setpriv`` dropping
    CAP_DAC_OVERRIDE), [] when not root, None when neither can be had: read-only directories mean something."""
    import shutil

    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    return None if setpriv is None else [setpriv, "--bounding-set=-dac_override,-dac_read_search,-fowner",
                                         "--inh-caps=-all"]


def test_a_read_only_earlier_directory_is_replaced_keeping_its_mode_and_nothing_left_beside_it(answers, tmp_path):
    """As a read-only file is replaced (its mode kept): the parts are written into a temporary directory writable by
    its owner, which gets the earlier mode when they are in; the earlier directory (read-only files in a read-only
    directory) is removed whole -- no hidden ``.old`` sibling left."""
    import subprocess
    import sys

    prefix = _unprivileged()
    if prefix is None:
        pytest.skip("root without setpriv: permission bits do not bind")
    out = tmp_path / "out"
    assert run(answers, "-m", "mv", "-o", f"{out}/").exit_code == 0
    for f in out.iterdir():
        f.chmod(0o444)
    out.chmod(0o550)
    try:
        got = subprocess.run([*prefix, sys.executable, "-m", "crowdagg._entry", "aggregate", str(answers), "-m", "ds",
                              "-o", f"{out}/"], capture_output=True, text=True, cwd=Path(__file__).parents[2])
        assert got.returncode == 0, got.stderr
        assert (out.stat().st_mode & 0o7777) == 0o550
        assert sorted(os.listdir(tmp_path)) == ["in", "out"]
        assert sorted(os.listdir(out)) == [SUCCESS, "part-00000.csv"]
        assert (out / "part-00000.csv").read_text().startswith("task,label,confidence\n")
    finally:
        out.chmod(0o755)


def test_a_failing_part_names_the_output_not_the_temporary_directory(tmp_path):
    target = resolve_directory(f"{tmp_path / 'out'}/", writes=("task",))

    def fill(directory: str) -> None:
        raise DataError(f"{directory}/part-00000.csv: cannot create a file in {directory} (permission denied)")

    with pytest.raises(DataError) as caught:
        commit([(target, fill)])
    out = tmp_path / "out"
    assert str(caught.value) == f"{out}/part-00000.csv: cannot create a file in {out} (permission denied)"
    assert os.listdir(tmp_path) == []


def test_the_earlier_directory_is_removed_part_by_part_never_a_file_put_there_since(tmp_path):
    """The earlier directory is checked, renamed aside, and then only its parts and marker are removed: a file
    written into it meanwhile is kept (with the directory, said in a warning), never deleted."""
    from crowdagg.errors import CrowdaggWarning

    out = tmp_path / "out"
    first = resolve_directory(f"{out}/", writes=("task",))
    commit([(first, lambda d: Path(d, "part-00000.csv").write_text("task\nt1\n"))])
    target = resolve_directory(f"{out}/", writes=("task",))

    def fill(directory: str) -> None:
        Path(directory, "part-00000.csv").write_text("task\nt2\n")
        (out / "notes.txt").write_text("mine")  # between the checks and the rename: must survive

    with pytest.raises(DataError, match="changed during the run"):  # seen at the rename: nothing replaced
        commit([(target, fill)])
    assert (out / "notes.txt").read_text() == "mine" and (out / "part-00000.csv").read_text() == "task\nt1\n"
    assert sorted(os.listdir(tmp_path)) == ["out"]
    # After the rename (a file put there between the last check and it): the parts go, the file stays.
    from crowdagg.io.output import _remove_earlier

    old = tmp_path / ".out.old"
    out.rename(old)
    with pytest.warns(CrowdaggWarning, match=r"the earlier directory it replaced is kept as .*\.out\.old.*notes\.txt"):
        _remove_earlier(target, str(old))
    assert sorted(os.listdir(old)) == ["notes.txt"]
    (old / "notes.txt").unlink()
    (old / "part-00000.csv").write_text("task\n")
    (old / SUCCESS).write_text("")
    old.chmod(0o500)  # read-only: removed all the same
    _remove_earlier(target, str(old))
    assert not old.exists()


def test_a_mount_point_and_an_empty_path_are_refused_before_any_work(tmp_path, monkeypatch):
    import os.path as osp

    real = osp.ismount
    monkeypatch.setattr(osp, "ismount", lambda p: p == str(tmp_path / "mnt") or real(p))
    (tmp_path / "mnt").mkdir()
    with pytest.raises(UsageError, match="is a mount point"):
        resolve_directory(str(tmp_path / "mnt"), writes=("task",))
    with pytest.raises(UsageError, match="needs a path"):
        resolve_directory("", writes=("task",))


def test_the_library_takes_a_path_object_and_refuses_an_engine_name(tmp_path):
    from crowdagg.methods.api import aggregate

    result = aggregate("example:bluebird", "mv")
    write_directory(result, tmp_path / "lib")  # os.PathLike, as every other writer
    assert sorted(os.listdir(tmp_path / "lib")) == [SUCCESS, "part-00000.csv"]
    with pytest.raises(UsageError, match="the Dask engine object the result was fitted on"):
        write_directory(result, tmp_path / "lib2", engine="dask")
    assert not (tmp_path / "lib2").exists()
    write_directory(result, tmp_path / "lib3", engine="local")
    assert (tmp_path / "lib3" / "part-00000.csv").read_bytes() == (tmp_path / "lib" / "part-00000.csv").read_bytes()


def test_the_refusal_names_the_entries_that_are_not_this_tools(answers, tmp_path):
    out = tmp_path / "out"
    assert run(answers, "-m", "mv", "-o", f"{out}/").exit_code == 0
    (out / "part-00001.csv").symlink_to(answers)
    got = run(answers, "-m", "mv", "-o", f"{out}/")
    assert got.exit_code == 2 and "did not write (part-00001.csv)" in got.stderr


def test_part_names_sort_in_part_order_past_100000_parts(tmp_path):
    """Readers take the parts by name (``part-*.csv``, ``pyarrow.dataset``): with 100,001 parts or more every name
    has six digits, else ``part-100000`` would sort before ``part-20000``."""
    from crowdagg.io.output import part_name

    assert part_name(7, "csv") == part_name(7, "csv", count=100_000) == "part-00007.csv"
    assert part_name(7, "jsonl", True, count=100_001) == "part-000007.jsonl.gz"
    for count in (3, 100_000, 100_001, 1_000_001):
        names = [part_name(i, "csv", count=count) for i in (0, 1, 9, 10, 19_999, 20_000, 99_999, 100_000, 999_999)
                 if i < count]
        assert sorted(names) == names and len({len(n) for n in names}) == 1
    name, _ = write_part(str(tmp_path), 100_000, "csv", False, {"task": np.array(["t"], object)}, count=100_001)
    assert name == "part-100000.csv"
    (tmp_path / SUCCESS).write_text("")
    assert earlier_directory(str(tmp_path), ("task",))


@pytest.mark.parametrize("option, name", [("--save-workers", "m.json"), ("--workers", "sub/w.csv"), ("--workers", "")])
def test_another_output_inside_a_new_output_directory_is_refused_as_such(answers, tmp_path, option, name):
    """Not "directory out does not exist" (exit 1): the directory is this run's to make, and replaced whole."""
    out = tmp_path / "out"
    got = run(answers, "-m", "ds", "-o", f"{out}/", option, out / name if name else out)
    assert got.exit_code == 2 and f"{option} " in got.stderr and "is inside the output directory" in got.stderr
    assert sorted(os.listdir(tmp_path)) == ["in"]


def test_gzip_parquet_parts_are_refused_a_rerun_could_not_recognise_them(answers, tmp_path):
    """``-o out.parquet.gz/`` wrote ``part-00000.parquet.gz``, which no Parquet reader opens and which the next run
    refused as "files this tool did not write"; refused up front now (text parts are still compressed)."""
    for args in (["-o", f"{tmp_path / 'p.parquet.gz'}/"], ["-o", f"{tmp_path / 'p.gz'}/", "-f", "parquet"]):
        got = run(answers, "-m", "mv", *args)
        assert got.exit_code == 2 and "Parquet parts are not gzip-compressed" in got.stderr
    assert sorted(os.listdir(tmp_path)) == ["in"]
    from crowdagg.methods.api import aggregate

    with pytest.raises(UsageError, match="Parquet parts are not gzip-compressed"):
        write_directory(aggregate(answers, "mv"), tmp_path / "lib.gz", fmt="parquet")
    for _ in range(2):  # a rerun recognises its own gzip text parts
        assert run(answers, "-m", "mv", "-o", f"{tmp_path / 'p.tsv.gz'}/").exit_code == 0
    assert sorted(os.listdir(tmp_path / "p.tsv.gz")) == [SUCCESS, "part-00000.tsv.gz"]


def test_an_interrupt_after_a_read_only_directory_is_filled_leaves_nothing(tmp_path, monkeypatch):
    """The filled temporary directory has the earlier one's read-only mode; an interrupt while a later output (the
    --workers file) is written must still remove it: it is made writable first (root would not need it, anyone
    else would be left a hidden ``.out.*.tmp``)."""
    import shutil

    from crowdagg.io.output import resolve

    out = tmp_path / "out"
    commit([(resolve_directory(f"{out}/", writes=("task",)), lambda d: Path(d, "part-00000.csv").write_text("task\n"))])
    out.chmod(0o550)
    removed = []
    real = shutil.rmtree

    def rmtree(path, *args, **kwargs):
        removed.append((os.path.basename(path), os.stat(path).st_mode & 0o700))
        return real(path, *args, **kwargs)

    monkeypatch.setattr(shutil, "rmtree", rmtree)

    def workers():
        yield b"worker\n"
        raise KeyboardInterrupt

    try:
        with pytest.raises(KeyboardInterrupt):
            commit([(resolve_directory(f"{out}/", writes=("task",)), lambda d: Path(d, "part-00000.csv").write_text("task\n")),
                    (resolve(str(tmp_path / "w.csv")), workers())])
        assert [mode for name, mode in removed if name.startswith(".out.")] == [0o700]
        assert sorted(os.listdir(tmp_path)) == ["out"] and (out.stat().st_mode & 0o777) == 0o550
    finally:
        out.chmod(0o755)
