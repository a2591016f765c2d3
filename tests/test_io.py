"""Readers: formats, columns, and input that is never silently changed or dropped."""

from __future__ import annotations

import codecs
import gzip
import io
import json
import warnings

import numpy as np
import pandas as pd
import pytest

from crowdagg.errors import CrowdaggWarning, DataError, UsageError
from crowdagg.io import detect_format, load_annotations, output_format, read_task_labels, to_utf8

CSV = "task,worker,label\nt1,w1,a\nt1,w2,b\nt2,w1,a\n"


def load(text: str | bytes, **kw):
    data = text.encode() if isinstance(text, str) else text
    return load_annotations(io.BytesIO(data), **kw)


def load_warned(text: str | bytes, **kw):
    """Load, returning the set and the warning messages (as the library words them)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        data = load(text, **kw)
    return data, [str(w.message) for w in caught if issubclass(w.category, CrowdaggWarning)]


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
    s = load(b"item,annotator,response\n1,2,x\n")
    assert s.n_answers == 1 and s.classes == ("x",)
    s = load(b"q,who,what\n1,2,x\n", task_col="q", worker_col="who", label_col="what")
    assert s.n_answers == 1
    with pytest.raises(DataError, match="found columns: 'q', 'who', 'what'") as exc:
        load(b"q,who,what\n1,2,x\n")
    # library wording: the keyword, not the CLI flag
    assert "task_col" in str(exc.value) and "--task-col" not in str(exc.value)


def test_json_numbers_become_strings():
    s = load(b'[{"task": 1, "worker": 2, "label": 0}, {"task": 1, "worker": 3, "label": 1}]')
    assert list(s.task_names) == ["1"] and s.classes == ("0", "1")


def test_blank_cell_reports_line():
    with pytest.raises(DataError, match="line 3"):
        load(b"task,worker,label\nt,w,a\nt,,a\n")


def test_blank_lines_are_skipped_keeping_line_numbers():
    s = load(b"task,worker,label\nt,w,a\n\nt,v,b\n")
    assert s.n_answers == 2
    with pytest.raises(DataError, match="line 5"):
        load(b"task,worker,label\nt,w,a\n\nt,v,b\nt,,b\n")


def test_dataframe_input():
    df = pd.DataFrame({"task": [1, 1, 2], "worker": ["a", "b", "a"], "label": [0, 1, 1]})
    s = load_annotations(df)
    assert s.n_tasks == 2 and s.classes == ("0", "1")
    with pytest.raises(DataError, match="blank worker at <frame> row 1"):
        load_annotations(pd.DataFrame({"task": [1, 2], "worker": ["a", None], "label": [0, 1]}))


def test_truth_reader_rejects_conflicts():
    assert read_task_labels(io.BytesIO(b"task,truth\n1,a\n2,b\n1,a\n")) == {"1": "a", "2": "b"}
    with pytest.raises(DataError, match="two different"):
        read_task_labels(io.BytesIO(b"task,label\n1,a\n1,b\n"))
    # whitespace around cells is stripped as in the answers
    assert read_task_labels(io.BytesIO(b"task , label\n 1 , a \n")) == {"1": "a"}


# --------------------------------------------------------------------------- rows and fields
def test_more_fields_than_header_is_refused_with_its_line():
    # pandas used to shift the columns: tasks became worker ids
    with pytest.raises(DataError, match=r"line 3: 4 fields, but the header has 3"):
        load(b"task,worker,label\nt1,w1,a\nt2,w2,b,extra\n")
    # every row one too long (a trailing comma): refused, not silently shifted
    with pytest.raises(DataError, match="line 2: 4 fields"):
        load(b"task,worker,label\nt1,w1,a,\nt2,w2,b,\n")


def test_field_count_error_names_the_physical_line_after_quoted_newlines():
    text = b'task,worker,label,comment\nt1,w1,a,"two\nlines"\nt2,w2,b,ok\nt3,w3,c,x,y\n'
    with pytest.raises(DataError, match="line 5"):
        load(text)


def test_tsv_has_no_quoting():
    # A cell starting with a quote used to swallow the following rows into one task name.
    text = b'task\tworker\tlabel\n"t1\tw1\ta\nt2\tw2\tb\nt3\tw1\ta\n'
    s = load(text, input_format="tsv")
    assert list(s.task_names) == ['"t1', "t2", "t3"]
    assert s.n_answers == 3


# --------------------------------------------------------------------------- JSON
def test_json_mapping_repeated_keys_are_duplicates():
    text = '{"t1": {"w1": "a", "w1": "b", "w2": "a"}, "t2": {"w1": "b"}, "t1": {"w3": "b"}}'
    s, msgs = load_warned(text)
    assert list(s.task_names) == ["t1", "t2"]
    assert s.n_answers == 5 and s.n_duplicates == 1
    assert any("1 duplicate answer" in m and "duplicates" in m for m in msgs)
    last = load(text, duplicates="last")
    assert last.n_answers == 4
    with pytest.raises(DataError, match="duplicate answer"):
        load(text, duplicates="error")


def test_json_mapping_task_without_answers_keeps_its_row():
    s = load('{"t1": {"w1": "a"}, "t0": {}, "t2": {"w1": "b"}}')
    assert list(s.task_names) == ["t1", "t0", "t2"]
    np.testing.assert_array_equal(s.answers_per_task, [1, 0, 1])


def test_json_record_with_repeated_key_is_refused():
    with pytest.raises(DataError, match="record 1 has the key 'label' twice"):
        load('[{"task": "t", "worker": "w", "label": "a", "label": "b"}]')


def test_jsonl_values_may_contain_unicode_line_separators():
    rows = [
        {"task": "a\u2028b", "worker": "w\u0085v", "label": "x"},
        {"task": "c", "worker": "w", "label": "y\u2029z"},
    ]
    text = "\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n"
    s = load(text, input_format="jsonl")
    assert list(s.task_names) == ["a\u2028b", "c"]
    assert list(s.worker_names) == ["w\u0085v", "w"]
    assert "y\u2029z" in s.classes


def test_deeply_nested_json_is_one_clear_error():
    with pytest.raises(DataError, match="nested too deeply"):
        load("[" * 100_000 + "]" * 100_000, input_format="json")


# --------------------------------------------------------------------------- whitespace, headers, labels
def test_surrounding_whitespace_is_stripped_and_reported():
    text = "task, worker, label\nt1, w1,a\nt1,w1 , b\nt2,w2,a \n"
    s, msgs = load_warned(text)
    assert list(s.worker_names) == ["w1", "w2"]
    assert s.classes == ("a", "b")
    # the two w1 answers on t1 are now visible as a duplicate
    assert s.n_duplicates == 1
    msg = next(m for m in msgs if "whitespace" in m)
    assert "4 cell(s)" in msg and "worker: 2" in msg and "label: 2" in msg
    assert "2 name(s)" in msg  # ' w1' / 'w1 ' -> w1, and 'a ' -> a


def test_near_identical_labels_stay_distinct_with_a_warning():
    s, msgs = load_warned("task,worker,label\nt1,w1,Cat\nt1,w2,cat\nt2,w1,1\nt2,w2,1.0\n")
    assert set(s.classes) == {"Cat", "cat", "1", "1.0"}
    msg = next(m for m in msgs if "letter case or number format" in m)
    assert "'Cat' / 'cat'" in msg and "'1' / '1.0'" in msg


def test_repeated_header_line_is_skipped_with_a_warning():
    part = "task,worker,label\nt1,w1,a\nt1,w2,b\n"
    s, msgs = load_warned(part + part.replace("t1", "t2"))
    assert list(s.task_names) == ["t1", "t2"] and s.classes == ("a", "b")
    assert any("repeating the header" in m and "line 4" in m for m in msgs)


# --------------------------------------------------------------------------- encodings
def test_latin1_byte_far_into_the_file_names_the_right_line():
    rows = "".join(f"task{i},w{i % 7},a\n" for i in range(200_000))  # ~3 MB, past 1 MiB
    data = ("task,worker,label\n" + rows).encode() + "t\xe9,w1,b\n".encode("latin-1")
    with pytest.raises(DataError) as exc:
        load(data)
    msg = str(exc.value)
    assert "line 200002" in msg and "not UTF-8" in msg and "0xE9" in msg and "Latin-1" in msg


def test_utf16_with_bom_is_read():
    text = "task\tworker\tlabel\nt1\tw1\tché\nt1\tw2\tché\n"
    s = load(codecs.BOM_UTF16_LE + text.encode("utf-16-le"))
    assert s.classes == ("ché",) and list(s.task_names) == ["t1"]


def test_utf16_without_bom_is_refused_saying_so():
    with pytest.raises(DataError, match="UTF-16"):
        load("task,worker,label\nt1,w1,a\n".encode("utf-16-le"))


def test_to_utf8_strips_bom_and_keeps_valid_text():
    assert to_utf8(codecs.BOM_UTF8 + b"a,b\n", "x") == b"a,b\n"
    assert to_utf8("é\n".encode(), "x") == "é\n".encode()


# --------------------------------------------------------------------------- output formats
def test_output_format_from_extension_and_unknown_extensions():
    assert output_format(None, "x.csv") == "csv"
    assert output_format(None, "x.jsonl.gz") == "jsonl"
    assert output_format(None, "noext") == "csv"
    assert output_format(None, "-") == "csv"
    assert output_format("tsv", "x.csv") == "tsv"  # text for text: --format decides
    with pytest.raises(UsageError, match="disagree"):  # never text under a Parquet name, nor the reverse
        output_format("tsv", "x.parquet")
    assert output_format(None, "out.parquet") == "parquet"
    assert output_format(None, "out.pq") == "parquet"
    with pytest.raises(UsageError, match="'.xlsx'"):
        output_format(None, "out.xlsx")


def test_header_repeated_with_bom_spaces_or_case_is_skipped():
    for second in ("\ufefftask,worker,label", " Task , Worker , LABEL "):
        s, msgs = load_warned(f"task,worker,label\na,w1,x\n{second}\nb,w1,y\n")
        assert list(s.task_names) == ["a", "b"], second
        assert any("repeating the header" in m and "line 3" in m for m in msgs)


def test_unclosed_quote_names_the_line_where_it_opens():
    with pytest.raises(DataError, match="line 7: a quoted field opened here is never closed"):
        load(b'task,worker,label\n"a\nb\nc",w,x\nd,w,y\ne,w,y\n"f",w,"x\n')


def test_a_json_mapping_with_no_answers_at_all():
    with pytest.raises(DataError, match=r"no answers in the input \(1 task\(s\), none answered\); give classes"):
        load('{"t3": {}}')
    s = load('{"t3": {}, "t4": {}}', classes=["a", "b"])
    assert s.n_tasks == 2 and s.n_answers == 0


def test_single_json_record_and_single_label_studio_task():
    s = load('{"task": "t", "worker": "w", "label": "x"}', input_format="json")
    assert list(s.task_names) == ["t"]
    task = {"id": 7, "data": {}, "annotations": [{"completed_by": 1, "result": [
        {"from_name": "c", "to_name": "t", "type": "choices", "value": {"choices": ["yes"]}}]}]}
    s = load(json.dumps(task), input_format="json")
    assert list(s.task_names) == ["7"] and s.classes == ("yes",)


def test_formats_with_fixed_fields_refuse_column_options():
    with pytest.raises(UsageError, match="task_col does not apply"):
        load('{"t1": {"w": "a"}}', task_col="x")
    export = json.dumps([{"id": 1, "annotations": [{"completed_by": 1, "result": [
        {"from_name": "c", "to_name": "t", "type": "choices", "value": {"choices": ["yes"]}}]}]}])
    with pytest.raises(UsageError, match="worker_col does not apply"):
        load(export, worker_col="who")
    assert load(export, label_col="c").classes == ("yes",)  # label_col picks the choices control


def test_oversized_input_is_refused_before_parsing(tmp_path):
    from crowdagg.errors import ResourceError

    p = tmp_path / "big.csv"
    p.write_text("task,worker,label\n" + "t,w,a\n" * 200_000)  # 1.2 MB
    with pytest.raises(ResourceError, match=r"reading 1.14 MB of text from .*big.csv"):
        load_annotations(p, max_memory="4M")
    with pytest.raises(ResourceError):
        load_annotations(io.BytesIO(p.read_bytes()), max_memory="4M")
    with pytest.raises(ResourceError):  # the decompressed size counts
        load_annotations(io.BytesIO(gzip.compress(p.read_bytes())), max_memory="4M")


def test_gzip_members_and_trailing_garbage():
    two = gzip.compress(b"task,worker,label\nt1,w1,a\n") + gzip.compress(b"t2,w1,b\n")
    assert load(two).n_answers == 2
    with pytest.raises(DataError, match="after the end of the gzip stream"):
        load(gzip.compress(CSV.encode()) + b"junk")


def test_library_warnings_point_at_the_callers_line():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        load("task,worker,label\nt,w,a\nt,w,b\n")
    assert {w.filename for w in caught} == {__file__}


def test_json_numbers_keep_their_text():
    text = (
        '{"task":"t1","worker":"w1","label":1.10}\n{"task":"t1","worker":"w2","label":1.1}\n'
        '{"task":"t2","worker":"w1","label":1E2}\n{"task":"t3","worker":"w1","label":1e400}\n'
    )
    s, msgs = load_warned(text)
    assert set(s.classes) == {"1.10", "1.1", "1E2", "1e400"}  # never 1.1 twice, 100.0 or Infinity
    assert any("'1.10' / '1.1'" in m for m in msgs)
    assert list(load('[{"task": 7, "worker": 8, "label": 0}]').task_names) == ["7"]


def test_json_lines_with_nested_values_are_sniffed_as_json_lines():
    text = '{"task":"t1","worker":"w1","label":"a","meta":{"x":1}}\n{"task":"t2","worker":"w1","label":"b","meta":{}}\n'
    assert load(text).n_answers == 2
    assert detect_format(b'{"t1": {"w": "a"}, "t2": {}}\n', "", None) == "json"


def test_excel_unicode_text_is_read_from_a_txt_file(tmp_path):
    p = tmp_path / "export.txt"
    p.write_bytes(codecs.BOM_UTF16_LE + "task\tworker\tlabel\r\nt1\tw1\ta\r\nt1\tw2\tb\r\n".encode("utf-16-le"))
    s = load_annotations(p)
    assert s.classes == ("a", "b") and list(s.worker_names) == ["w1", "w2"]


def test_blank_rows_are_skipped_and_said_empty_lines_silently():
    s, msgs = load_warned("task,worker,label\nt1,w1,a\n,,\n\n   \nt2,w1,b\n")
    assert s.n_answers == 2
    assert [m for m in msgs if "no task, worker or label" in m] == [
        "skipped 1 row(s) with no task, worker or label (first at <stream> line 3)"
    ]
    s, msgs = load_warned('{"task":"t1","worker":"w1","label":"a"}\n{}\n   \n{"task":null,"worker":null,"label":null}\n')
    assert s.n_answers == 1 and any("skipped 2 row(s)" in m for m in msgs)
