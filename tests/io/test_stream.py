"""Streaming ingest: large inputs read, parsed and encoded a block at a time give what reading them whole gives.

``crowdagg.io.read.BLOCK_BYTES`` is made tiny here so that small files are
cut into many blocks, at every kind of place: inside a quoted field, next
to a multi-byte UTF-8 character, after a CRLF, in a run of blank lines.
The reference is the same reader with blocks larger than the file (the
whole-file path, which tests/golden pins to the recorded outcomes).
"""

from __future__ import annotations

import gzip
import io
import json
import sys
from pathlib import Path

import numpy as np
import pytest

from crowdagg.errors import DataError, ResourceError
from crowdagg.io import read as cio
from crowdagg.io.read import load_annotations

from ..golden import harness

WHOLE = 1 << 40  # larger than any file here: read whole


def _streamed_count(monkeypatch) -> list[int]:
    """Counts the inputs that were read a block at a time to the end (not handed to the whole-file reader)."""
    seen = [0]
    real = cio._encode_blocks

    def counting(*args, **kwargs):
        out = real(*args, **kwargs)
        seen[0] += 1
        return out

    monkeypatch.setattr(cio, "_encode_blocks", counting)
    return seen


def _load(source, block: int, monkeypatch, **kwargs):
    monkeypatch.setattr(cio, "BLOCK_BYTES", block)
    return load_annotations(source, **kwargs)


def _same_set(a, b) -> None:
    for name in ("task", "worker", "label", "task_ptr"):
        assert np.array_equal(getattr(a, name), getattr(b, name)), name
        assert getattr(a, name).dtype == getattr(b, name).dtype, name
    assert a.tasks.equals(b.tasks) and a.workers.equals(b.workers)
    assert a.classes == b.classes and a.n_duplicates == b.n_duplicates and a.class_dtype == b.class_dtype


# --------------------------------------------------------------------------- the goldens, streamed
@pytest.mark.parametrize("block", [1, 7, 64, 300])
def test_every_golden_case_gives_its_recorded_outcome_when_streamed(block, monkeypatch):
    """tests/golden's 129 reader outcomes (values, warnings in order, error messages) with tiny blocks."""
    monkeypatch.setattr(cio, "BLOCK_BYTES", block)
    streamed = _streamed_count(monkeypatch)
    for case in harness.load_cases():
        assert harness.run_case(case) == case["outcome"], case["name"]
    assert streamed[0] >= (10 if block <= 64 else 0)  # most CSV/TSV cases really went block by block


def test_real_datasets_golden_digests_when_streamed(datasets_dir, tmp_path, monkeypatch):
    """Each real dataset as CSV and TSV, read in 4 KiB blocks, gives the recorded digest."""
    monkeypatch.setattr(cio, "BLOCK_BYTES", 4096)
    streamed = _streamed_count(monkeypatch)
    gold = json.loads(harness.DATASETS_GOLDEN.read_text(encoding="utf-8"))
    keys = [k for k in sorted(gold)
            if k.endswith(("labels:csv", "labels:tsv")) and (datasets_dir / k.split("/")[0]).is_dir()]
    assert keys
    for key in keys:
        assert harness.run_dataset_key(datasets_dir, key, tmp_path) == gold[key], key
    assert streamed[0] >= len(keys) // 2


def test_real_datasets_streamed_equal_whole_and_aggregate_to_the_same_bytes(datasets_dir, tmp_path, monkeypatch):
    """Arrays, vocabularies and the CLI's output bytes (ds, with --workers) from 1 KiB blocks == read whole."""
    from typer.testing import CliRunner

    from crowdagg.cli import app

    runner = CliRunner()
    for name in ("trec", "rte", "dog", "bluebird"):
        path = datasets_dir / name / "labels.csv"
        if not path.is_file():
            continue
        outs = {}
        for block in (WHOLE, 1024):
            monkeypatch.setattr(cio, "BLOCK_BYTES", block)
            outs[block] = load_annotations(str(path))
            out, workers = tmp_path / f"{name}_{block}.csv", tmp_path / f"{name}_{block}_w.csv"
            res = runner.invoke(app, ["aggregate", str(path), "-m", "ds", "-o", str(out), "--workers", str(workers)])
            assert res.exit_code == 0, res.output
        _same_set(outs[WHOLE], outs[1024])
        assert (tmp_path / f"{name}_{WHOLE}.csv").read_bytes() == (tmp_path / f"{name}_1024.csv").read_bytes()
        assert (tmp_path / f"{name}_{WHOLE}_w.csv").read_bytes() == (tmp_path / f"{name}_1024_w.csv").read_bytes()


# --------------------------------------------------------------------------- crafted block boundaries
def _crafted(n: int = 300) -> bytes:
    """Rows with quoted fields spanning lines, doubled quotes, multi-byte UTF-8 names, CRLF, blank lines."""
    rows = []
    for i in range(n):
        task = f'"t{i % 37}\nsecond ""line"""' if i % 11 == 0 else f"t{i % 37}"
        worker = f"wörker-漢{i % 7}" if i % 3 else f"w{i % 5}"
        label = "é" if i % 4 == 0 else "a" if i % 4 == 1 else "b"
        rows.append(f"{task},{worker},{label}")
        if i % 50 == 0:
            rows.append("")  # blank lines are skipped
    return ("task,worker,label\r\n" + "\r\n".join(rows) + "\r\n").encode("utf-8")


@pytest.mark.parametrize("block", [1, 2, 3, 5, 8, 13, 40, 97, 500])
def test_blocks_cut_anywhere_give_the_whole_file_result(block, tmp_path, monkeypatch):
    p = tmp_path / "crafted.csv"
    p.write_bytes(_crafted())
    whole = _load(str(p), WHOLE, monkeypatch)
    streamed = _streamed_count(monkeypatch)
    _same_set(_load(str(p), block, monkeypatch), whole)
    assert streamed[0] == 1


def test_a_block_boundary_inside_a_quoted_field_a_character_and_a_crlf(tmp_path, monkeypatch):
    """The cut is searched from BLOCK_BYTES on: put that point inside each awkward spot in turn."""
    data = _crafted(40)
    p = tmp_path / "c.csv"
    p.write_bytes(data)
    whole = _load(str(p), WHOLE, monkeypatch)
    header = data.index(b"\n") + 1
    spots = [data.index(b'"', header) + 2, data.index("漢".encode()) + 1, data.index(b"\r\n", header) + 1]
    for spot in spots:  # offsets into the text after the header, where the first cut is looked for
        _same_set(_load(str(p), spot - header, monkeypatch), whole)


def test_tsv_and_a_utf8_bom_streamed(tmp_path, monkeypatch):
    rows = "".join(f"t{i % 13}\tw{i % 5}\t{'xyz'[i % 3]}\n" for i in range(500))
    p = tmp_path / "a.tsv"
    p.write_bytes(b"\xef\xbb\xbftask\tworker\tlabel\n" + rows.encode())
    streamed = _streamed_count(monkeypatch)
    _same_set(_load(str(p), 64, monkeypatch), _load(str(p), WHOLE, monkeypatch))
    assert streamed[0] == 1


def test_ids_changing_form_in_a_late_block(tmp_path, monkeypatch):
    """t1, t2, ... (the direct-address path) and then t007 and x9: the encoder moves to hashing, same codes."""
    rows = [f"t{i % 97},w{i % 11},{i % 2}" for i in range(3000)] + ["t007,w1,0", "x9,w003,1", "t5,w1,1"]
    p = tmp_path / "ids.csv"
    p.write_text("task,worker,label\n" + "\n".join(rows) + "\n")
    a, b = _load(str(p), 256, monkeypatch), _load(str(p), WHOLE, monkeypatch)
    _same_set(a, b)
    assert "t007" in a.tasks.tolist() and "t7" in a.tasks.tolist()


# --------------------------------------------------------------------------- errors in a late block
def _rows(n: int) -> list[str]:
    return [f"t{i % 50},w{i % 9},{'ab'[i % 2]}" for i in range(n)]


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (b"t1,w\xe9,a", "line 902: not UTF-8 text (byte 0xE9 at column 5)"),
        (b"t1,,a", "blank worker at {p} line 902"),
        (b"t1,w1,a,extra", "line 902: 4 fields, but the header has 3"),
        (b'"t1,w1,a', "line 902: a quoted field opened here is never closed"),
    ],
)
def test_an_error_in_a_late_block_names_its_line(bad, message, tmp_path, monkeypatch):
    lines = [r.encode() for r in _rows(1500)]
    lines[900] = bad  # line 902 of the file (after the header)
    p = tmp_path / "late.csv"
    p.write_bytes(b"task,worker,label\n" + b"\n".join(lines) + b"\n")
    errors = []
    for block in (WHOLE, 100):
        with pytest.raises(DataError) as exc:
            _load(str(p), block, monkeypatch)
        errors.append(str(exc.value))
    assert errors[0] == errors[1]
    assert message.format(p=p) in errors[1]


def test_a_duplicate_in_a_late_block_names_its_line(tmp_path, monkeypatch):
    rows = [f"t{i},w1,a" for i in range(2000)] + ["t1500,w1,b"]
    p = tmp_path / "dup.csv"
    p.write_text("task,worker,label\n" + "\n".join(rows) + "\n")
    msgs = []
    for block in (WHOLE, 128):
        with pytest.raises(DataError) as exc:
            _load(str(p), block, monkeypatch, duplicates="error")
        msgs.append(str(exc.value))
    assert msgs[0] == msgs[1]
    assert f"duplicate answer at {p} line 2002: worker 'w1' already labelled task 't1500'" in msgs[1]


# --------------------------------------------------------------------------- many files, stdin
def test_a_glob_of_many_files_some_large(tmp_path, monkeypatch):
    d = tmp_path / "batches"
    d.mkdir()
    for i in range(20):
        n = 400 if i % 5 == 0 else 20
        rows = [f"t{(i * 7 + j) % 90},w{j % 13},{'xy'[(i + j) % 2]}" for j in range(n)]
        (d / f"part-{i:02d}.csv").write_text("task,worker,label\n" + "\n".join(rows) + "\n")
    (d / "part-20.jsonl").write_text('{"task": "t999", "worker": "w1", "label": "x"}\n')
    spec = str(d / "part-*")
    whole = _load([spec], WHOLE, monkeypatch)
    streamed = _streamed_count(monkeypatch)
    got = _load([spec], 256, monkeypatch)
    _same_set(got, whole)
    assert streamed[0] == 4  # the four large files (a file smaller than a block is read whole)
    with pytest.raises(DataError, match=r"part-10.csv line 7: not UTF-8"):
        (d / "part-10.csv").write_bytes(b"task,worker,label\n" + b"t1,w1,x\n" * 5 + b"t1,w\xff,x\n" + b"t2,w2,y\n" * 80)
        _load([spec], 256, monkeypatch)


class _Stdin:
    def __init__(self, data: bytes) -> None:
        self.buffer = io.BytesIO(data)


@pytest.mark.parametrize("tail", [b"", b"t1,w1,a,too,many\n"])
def test_stdin_streamed(tail, monkeypatch):
    """``-`` read a block at a time; an irregular row in a late block sends it to the exact parser, which
    reads it again from the spool (what was read of standard input went to a temporary file)."""
    data = b"task,worker,label\n" + "\n".join(_rows(2000)).encode() + b"\n" + tail
    results = []
    for block in (WHOLE, 512):
        monkeypatch.setattr(sys, "stdin", _Stdin(data))
        try:
            results.append(_load("-", block, monkeypatch))
        except DataError as exc:
            results.append(str(exc))
    if tail:
        assert results[0] == results[1] == "<stdin> line 2002: 5 fields, but the header has 3; a cell containing " \
            "the delimiter must be quoted"
    else:
        _same_set(results[0], results[1])


def test_a_gzip_file_is_read_whole_with_the_same_result(tmp_path, monkeypatch):
    p = tmp_path / "a.csv.gz"
    p.write_bytes(gzip.compress(b"task,worker,label\n" + "\n".join(_rows(800)).encode() + b"\n"))
    _same_set(_load(str(p), 64, monkeypatch), _load(str(p), WHOLE, monkeypatch))


# --------------------------------------------------------------------------- memory
def test_a_streamed_input_too_large_for_the_limit_is_refused_with_its_size(tmp_path, monkeypatch):
    p = tmp_path / "big.csv"
    p.write_text("task,worker,label\n" + "\n".join(_rows(20_000)) + "\n")
    monkeypatch.setattr(cio, "BLOCK_BYTES", 4096)
    with pytest.raises(ResourceError, match=r"big.csv \(about 20,\d\d\d answers\)"):
        load_annotations(str(p), max_memory="40K")


# --------------------------------------------------------------------------- the pieces
def test_name_encoder_blocks_equal_one_encoding(rng):
    import pyarrow as pa

    from crowdagg.data.encode import NameEncoder
    from crowdagg.data.vocab import hash_encode

    for trial in range(150):
        n = int(rng.integers(1, 400))
        kind = trial % 4
        if kind == 0:
            vals = [f"t{v}" for v in rng.integers(0, 60, n)]
        elif kind == 1:  # prefix + integer, then another form
            vals = [f"t{v}" for v in rng.integers(0, 60, n)]
            vals[int(rng.integers(n))] = "t007"
        elif kind == 2:
            vals = [str(v) for v in rng.integers(0, 5, n)]
            vals[int(rng.integers(n))] = " x"
        else:
            vals = ["".join(rng.choice(list("ab é漢"), int(rng.integers(0, 4)))) for _ in range(n)]
        arr = pa.array(vals, type=pa.string())
        want_codes, want_names = hash_encode(arr)
        enc = NameEncoder()
        cuts = sorted({0, n, *rng.integers(0, n, int(rng.integers(0, 6))).tolist()})
        codes = np.concatenate([enc.add(arr.slice(lo, hi - lo)) for lo, hi in zip(cuts, cuts[1:])])
        assert np.array_equal(codes, want_codes)
        assert enc.names().to_pylist() == want_names.to_pylist()


def test_columns_encoder_rollback_forgets_names(rng):
    import pyarrow as pa

    from crowdagg.data.encode import ColumnsEncoder

    enc = ColumnsEncoder()
    first = [pa.array([f"t{i}" for i in (3, 1, 3)]), pa.array(["w1", "w2", "w1"]), pa.array(["a", "b", "a"])]
    enc.add(*first)
    mark = enc.mark()
    enc.add(pa.array(["t9", "zz"]), pa.array(["w7", "w1"]), pa.array(["c", "a"]))
    enc.rollback(mark)
    enc.add(pa.array(["t1", "t4"]), pa.array(["w3", "w1"]), pa.array(["b", "d"]))
    assert [e.names().to_pylist() for e in enc.encoders] == [["t3", "t1", "t4"], ["w1", "w2", "w3"], ["a", "b", "d"]]
    assert [c.take().tolist() for c in enc.codes] == [[0, 1, 0, 1, 2], [0, 1, 0, 2, 0], [0, 1, 0, 1, 2]]


def test_the_owned_sort_equals_the_plain_sort(rng):
    from crowdagg.kernels import schedule
    from crowdagg.kernels.ingest import _sort_by_task

    for n in (0, 10, schedule.PARALLEL_ANSWERS + 17):
        t = rng.integers(0, 50, n).astype(np.int32)
        w = rng.integers(0, 9, n).astype(np.int32)
        y = rng.integers(0, 3, n).astype(np.int8)
        want = _sort_by_task(t, w, y, 50)
        owned = [t.copy(), w.copy(), y.copy()]
        got = _sort_by_task(owned, n_tasks=50)
        assert len(owned) == 1 and np.array_equal(owned[0], t)  # worker and label let go, task handed back
        for a, b in zip(got, want):
            assert np.array_equal(a, b) and a.dtype == b.dtype


@pytest.mark.parametrize("fmt", ["csv", "tsv", "json", "jsonl", "parquet"])
def test_render_chunks_join_to_render_table(fmt, rng):
    import pyarrow as pa

    from crowdagg.data.text import BLOCK_ROWS
    from crowdagg.io.render import render_chunks, render_table

    for n in (0, 5, 2 * BLOCK_ROWS + 3):
        cols = {"task": pa.array([f"t,{i}" for i in range(n)]), "p": rng.random(n), "label": np.arange(n) % 3}
        pieces = list(render_chunks(cols, fmt))
        assert b"".join(bytes(p) for p in pieces) == render_table(cols, fmt)
        if fmt == "csv" and n > BLOCK_ROWS:
            assert len(pieces) == 4  # header + 3 blocks of rows, never one whole


def test_gzip_pieces_are_the_bytes_of_the_whole(tmp_path):
    from crowdagg.io.output import encode, pieces, resolve

    target = resolve(str(tmp_path / "x.csv.gz"))
    chunks = [bytes(rng_bytes) for rng_bytes in (b"a,b\n" * 1000, b"c,d\n" * 300_000, b"e\n")]
    assert b"".join(pieces(target, iter(chunks))) == encode(target, b"".join(chunks))
    assert Path(tmp_path / "x.csv.gz").exists() is False


# --------------------------------------------------------------------------- Parquet, a batch at a time
def _parquet(path: Path, n: int, rng, *, dictionary: bool = True, row_group: int = 700) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    task = pa.array(rng.integers(0, 300, n))
    worker = pa.array([None if i % 97 == 5 else f"w{i % 17}" for i in range(n)])  # a blank worker: an error
    label = pa.array([["cat", "dog", "émeu"][i % 3] for i in range(n)])
    if dictionary:
        label = label.dictionary_encode()
    extra = pa.array(rng.random(n))
    pq.write_table(pa.table({"item": task, "annotator": worker, "answer": label, "score": extra}), path,
                   row_group_size=row_group)


def test_a_parquet_file_read_in_batches_gives_the_whole_file_result(tmp_path, monkeypatch, rng):
    import pyarrow as pa
    import pyarrow.parquet as pq

    p = tmp_path / "a.parquet"
    n = 5000
    pq.write_table(pa.table({
        "item": pa.array(rng.integers(0, 300, n)), "annotator": [f"w{i % 17}" for i in range(n)],
        "answer": pa.array([["cat", "dog", "émeu"][i % 3] for i in range(n)]).dictionary_encode(),
        "score": rng.random(n),
    }), p, row_group_size=700)
    monkeypatch.setattr(cio._ParquetBatches, "BATCH_ROWS", 333)
    whole = _load(str(p), WHOLE, monkeypatch)
    batches = []
    real = cio._ParquetBatches.encode
    monkeypatch.setattr(cio._ParquetBatches, "encode", lambda self, *a: batches.append(1) or real(self, *a))
    streamed = _load(str(p), 1000, monkeypatch)
    assert batches == [1]  # read a batch at a time, not whole
    _same_set(streamed, whole)
    assert streamed.tasks.dtype == "int64" and streamed.class_dtype == "category"


def test_a_parquet_error_in_a_late_batch_names_its_row(tmp_path, monkeypatch, rng):
    p = tmp_path / "b.parquet"
    _parquet(p, 3000, rng)
    monkeypatch.setattr(cio._ParquetBatches, "BATCH_ROWS", 256)
    msgs = []
    for block in (WHOLE, 1000):
        with pytest.raises(DataError) as exc:
            _load(str(p), block, monkeypatch)
        msgs.append(str(exc.value))
    assert msgs[0] == msgs[1]
    assert f"blank worker at {p} row 6 " in msgs[1]


def test_an_irregular_row_in_a_late_block_refuses_the_exact_parser_up_front(tmp_path, monkeypatch):
    """The exact parser needs ~12 bytes a byte: the input's size says so before it is read whole."""
    rows = _rows(30_000)
    rows[-1] = "t1,w1,a,too,many"
    p = tmp_path / "irregular.csv"
    p.write_text("task,worker,label\n" + "\n".join(rows) + "\n")
    size = p.stat().st_size
    monkeypatch.setattr(cio, "BLOCK_BYTES", 8192)
    from crowdagg.core.memory import human

    with pytest.raises(ResourceError, match=rf"needs ~{human(12 * size)} \(reading {human(size)} of text from {p}\)"):
        load_annotations(str(p), max_memory=f"{int(6 * size)}")  # the blocks fit; the exact parser does not
    with pytest.raises(DataError, match="line 30001: 5 fields"):
        load_annotations(str(p), max_memory=f"{int(13 * size)}")


def test_a_first_block_with_large_integers_keeps_the_direct_address_table(monkeypatch):
    """A streamed file's first block already holds ids up to the largest: the table's density is judged
    against the answers expected in all, not the block's (else every large file went to hashing)."""
    import pyarrow as pa

    from crowdagg.data.encode import ColumnsEncoder

    enc = ColumnsEncoder()
    enc.reserve(1_000_000)
    block = pa.array([f"t{v}" for v in range(0, 900_000, 9)])  # 100,000 ids up to 899,991
    enc.add(block, block, block)
    assert enc.encoders[0].mode == "prefixed"
