"""Library-level readers and writers."""

from __future__ import annotations

import gzip
import io
import json
import os
import stat

import pandas as pd
import pytest

from crowdagg.errors import DataError
from crowdagg.io import atomic_outputs, detect_format, load_annotations, read_task_labels, render_table

CSV = "task,worker,label\nt1,w1,a\nt1,w2,b\nt2,w1,a\n"


def test_csv_tsv_json_jsonl_and_gzip_agree(tmp_path):
    (tmp_path / "a.csv").write_text(CSV)
    (tmp_path / "a.tsv").write_text(CSV.replace(",", "\t"))
    rows = [dict(zip(["task", "worker", "label"], r.split(","))) for r in CSV.strip().split("\n")[1:]]
    (tmp_path / "a.json").write_text(json.dumps(rows))
    (tmp_path / "a.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    (tmp_path / "m.json").write_text(json.dumps({"t1": {"w1": "a", "w2": "b"}, "t2": {"w1": "a"}}))
    (tmp_path / "a.csv.gz").write_bytes(gzip.compress(CSV.encode()))
    sets = [load_annotations(tmp_path / n) for n in ["a.csv", "a.tsv", "a.json", "a.jsonl", "m.json", "a.csv.gz"]]
    for s in sets:
        assert list(s.task_names) == ["t1", "t2"]
        assert s.classes == ("a", "b")
        assert s.label.tolist() == sets[0].label.tolist()
        assert s.worker.tolist() == sets[0].worker.tolist()


def test_sniffing_without_extension():
    assert detect_format(b"[{}]", "", None) == "json"
    assert detect_format(b'{"task": 1}\n{"task": 2}', "", None) == "jsonl"
    assert detect_format(b'{"t1": {"w": 1},\n "t2": {}}', "", None) == "json"
    assert detect_format(b"a\tb\tc\n", "", None) == "tsv"
    assert detect_format(b"a,b,c\n", "", None) == "csv"


def test_aliases_and_explicit_columns():
    s = load_annotations(io.BytesIO(b"item,annotator,response\n1,2,x\n"))
    assert s.n_answers == 1 and s.classes == ("x",)
    s = load_annotations(io.BytesIO(b"q,who,what\n1,2,x\n"), task_col="q", worker_col="who", label_col="what")
    assert s.n_answers == 1
    with pytest.raises(DataError, match="found columns: 'q', 'who', 'what'"):
        load_annotations(io.BytesIO(b"q,who,what\n1,2,x\n"))


def test_json_numbers_become_strings():
    s = load_annotations(io.BytesIO(b'[{"task": 1, "worker": 2, "label": 0}, {"task": 1, "worker": 3, "label": 1}]'))
    assert list(s.task_names) == ["1"] and s.classes == ("0", "1")


def test_blank_cell_reports_line():
    with pytest.raises(DataError, match="line 3"):
        load_annotations(io.BytesIO(b"task,worker,label\nt,w,a\nt,,a\n"))


def test_blank_lines_are_skipped_keeping_line_numbers():
    s = load_annotations(io.BytesIO(b"task,worker,label\nt,w,a\n\nt,v,b\n"))
    assert s.n_answers == 2
    with pytest.raises(DataError, match="line 5"):
        load_annotations(io.BytesIO(b"task,worker,label\nt,w,a\n\nt,v,b\nt,,b\n"))


def test_dataframe_input():
    df = pd.DataFrame({"task": [1, 1, 2], "worker": ["a", "b", "a"], "label": [0, 1, 1]})
    s = load_annotations(df)
    assert s.n_tasks == 2 and s.classes == ("0", "1")


def test_truth_reader_rejects_conflicts():
    assert read_task_labels(io.BytesIO(b"task,truth\n1,a\n2,b\n1,a\n")) == {"1": "a", "2": "b"}
    with pytest.raises(DataError, match="two different"):
        read_task_labels(io.BytesIO(b"task,label\n1,a\n1,b\n"))


def test_render_formats_parse_back():
    df = pd.DataFrame({"task": ["x", "y"], "label": ["1", "0"], "confidence": [0.5, 1 / 3]})
    assert pd.read_csv(io.StringIO(render_table(df, "csv")), dtype=str)["task"].tolist() == ["x", "y"]
    assert pd.read_csv(io.StringIO(render_table(df, "tsv")), sep="\t", dtype=str)["label"].tolist() == ["1", "0"]
    assert [json.loads(line)["task"] for line in render_table(df, "jsonl").splitlines()] == ["x", "y"]
    assert json.loads(render_table(df, "json"))[1]["label"] == "0"


def test_atomic_outputs_leave_nothing_on_error(tmp_path):
    target = tmp_path / "out.csv"
    with pytest.raises(RuntimeError):
        with atomic_outputs([str(target)]) as temps:
            open(temps[0], "w").write("partial")
            raise RuntimeError("boom")
    assert list(tmp_path.iterdir()) == []
    with atomic_outputs([str(target)]) as temps:
        open(temps[0], "w").write("done")
    assert target.read_text() == "done" and len(list(tmp_path.iterdir())) == 1


def test_atomic_outputs_follow_the_umask(tmp_path):
    old = os.umask(0o022)
    try:
        target = tmp_path / "out.csv"
        with atomic_outputs([str(target)]) as temps:
            open(temps[0], "w").write("x")
    finally:
        os.umask(old)
    assert stat.S_IMODE(target.stat().st_mode) == 0o644
