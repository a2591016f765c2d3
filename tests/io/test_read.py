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
from crowdagg.io.read import detect_format, load_annotations, output_format, read_task_labels, to_utf8

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


# --------------------------------------------------------------------------- one missing-value rule (issue 12)
MISSING = object()  # where a test row has no value: each format spells it its own way
ROWS = [("t1", "w1", "a"), ("t1", "w2", MISSING), ("t2", "w1", "b"), ("t3", "w2", MISSING), ("t3", "w1", "a")]


def _write(fmt: str, rows, tmp_path, spell=None):
    """``rows`` in format ``fmt`` (a path, or the DataFrame / records themselves); ``spell(i)`` is the i-th missing value."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    counter = iter(range(100))

    def cell(v, default):
        return (spell or (lambda _: default))(next(counter)) if v is MISSING else v

    cols = ("task", "worker", "label")
    if fmt in ("csv", "tsv"):
        sep = "," if fmt == "csv" else "\t"
        text = sep.join(cols) + "\n" + "".join(sep.join(cell(v, "") for v in r) + "\n" for r in rows)
        (p := tmp_path / f"a.{fmt}").write_text(text)
        return str(p)
    if fmt == "jsonl":
        lines = []
        for r in rows:
            rec = {c: cell(v, None) for c, v in zip(cols, r)}
            lines.append(json.dumps({k: v for k, v in rec.items() if v is not _ABSENT}))
        (p := tmp_path / "a.jsonl").write_text("\n".join(lines) + "\n")
        return str(p)
    if fmt == "json":
        recs = [{c: cell(v, None) for c, v in zip(cols, r)} for r in rows]
        recs = [{k: v for k, v in rec.items() if v is not _ABSENT} for rec in recs]
        (p := tmp_path / "a.json").write_text(json.dumps(recs))
        return str(p)
    if fmt == "mapping":
        m: dict = {}
        for t, w, y in rows:
            m.setdefault(t, {})[w] = cell(y, None)
        (p := tmp_path / "m.json").write_text(json.dumps(m))
        return str(p)
    values = {c: [cell(v, None) for v in col] for c, col in zip(cols, zip(*rows))}
    if fmt == "parquet":
        pq.write_table(pa.table(values), p := tmp_path / "a.parquet")
        return str(p)
    if fmt == "frame":
        return pd.DataFrame(values)
    assert fmt == "records"
    return [dict(zip(cols, (values[c][i] for c in cols))) for i in range(len(rows))]


_ABSENT = object()  # a JSON key left out


def _read(source, **kw):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        data = load_annotations(source, **kw)
    return data, [str(w.message) for w in caught if issubclass(w.category, CrowdaggWarning)]


def _answers(d):
    return sorted(zip(d.task_names[d.task].tolist(), d.worker_names[d.worker].tolist(),
                      [d.classes[y] for y in d.label]))


@pytest.mark.parametrize(
    "fmt, spell",
    [
        ("csv", lambda i: ["", "   "][i % 2]),
        ("tsv", lambda i: ["", "  "][i % 2]),
        ("json", lambda i: [None, _ABSENT][i % 2]),
        ("jsonl", lambda i: [None, _ABSENT][i % 2]),
        ("mapping", lambda i: [None, ""][i % 2]),
        ("parquet", lambda i: [None, ""][i % 2]),
        ("frame", lambda i: [None, np.nan][i % 2]),
        ("records", lambda i: [pd.NA, None][i % 2]),
    ],
)
def test_a_missing_label_is_a_skipped_answer_in_every_reader(fmt, spell, tmp_path):
    source = _write(fmt, ROWS, tmp_path, spell)
    d, msgs = _read(source)
    # The two blank answers are left out, said once with the count; t3 keeps its row with one answer,
    # w2 (blank answers only) leaves the workers.
    assert list(d.task_names) == ["t1", "t2", "t3"]
    assert _answers(d) == [("t1", "w1", "a"), ("t2", "w1", "b"), ("t3", "w1", "a")]
    assert list(d.worker_names) == ["w1"]
    said = [m for m in msgs if "blank" in m]
    assert len(said) == 1 and said[0].startswith("skipped 2 answer(s) with a blank label (first at ")
    with pytest.raises(DataError, match=r"blank label at .* \(2 blank label cell\(s\) in all\)"):
        load_annotations(_write(fmt, ROWS, tmp_path, spell), blank_labels="error")


def test_a_task_whose_answers_are_all_blank_keeps_its_row_with_no_answers(tmp_path):
    d, msgs = _read(_write("csv", [("t1", "w1", "a"), ("t2", "w1", MISSING), ("t3", "w1", "b")], tmp_path))
    assert list(d.task_names) == ["t1", "t2", "t3"] and d.answers_per_task.tolist() == [1, 0, 1]
    assert msgs[0] == "skipped 1 answer(s) with a blank label (first at " + str(tmp_path / "a.csv") + \
        " line 3); set blank_labels to error to refuse them"
    # exactly as a JSON {task: {}} entry is represented
    (tmp_path / "m.json").write_text(json.dumps({"t1": {"w1": "a"}, "t2": {}, "t3": {"w1": "b"}}))
    m = load_annotations(str(tmp_path / "m.json"))
    assert list(m.task_names) == list(d.task_names) and m.answers_per_task.tolist() == d.answers_per_task.tolist()
    np.testing.assert_array_equal(m.label, d.label)


@pytest.mark.parametrize("fmt", ["csv", "jsonl", "parquet", "frame", "records"])
@pytest.mark.parametrize("role", ["task", "worker"])
def test_a_missing_task_or_worker_stays_an_error_in_every_reader(fmt, role, tmp_path):
    i = ("task", "worker").index(role)
    rows = [("t1", "w1", "a"), tuple(MISSING if j == i else v for j, v in enumerate(("t2", "w2", "b")))]
    where = {"csv": "line 3", "jsonl": "line 2", "parquet": "row 2", "frame": "row 1", "records": "record 2"}[fmt]
    for policy in ("skip", "error"):
        with pytest.raises(DataError, match=rf"^blank {role} at .*{where} \(1 blank {role} cell\(s\) in all\)$"):
            load_annotations(_write(fmt, rows, tmp_path), blank_labels=policy)


def test_typed_parquet_columns_with_nulls_and_nan_follow_the_rule(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    def write(**cols):
        pq.write_table(pa.table(cols), p := tmp_path / "t.parquet")
        return str(p)

    # A NaN in a float label column is missing (was the class 'nan'), as a null is.
    d, msgs = _read(write(task=["t1", "t2", "t3"], worker=["w1", "w1", "w1"], label=[1.0, float("nan"), None]))
    assert d.classes == ("1.0",) and d.answers_per_task.tolist() == [1, 0, 0]
    assert msgs[0].startswith("skipped 2 answer(s) with a blank label (first at ") and " row 2)" in msgs[0]
    # int and bool label columns with nulls
    d, _ = _read(write(task=["t1", "t2"], worker=["w1", "w1"], label=pa.array([True, None], pa.bool_())))
    assert d.classes == ("True",) and d.n_answers == 1
    d, _ = _read(write(task=["t1", "t2"], worker=["w1", "w1"], label=pa.array([None, 3], pa.int64())))
    assert d.classes == ("3",) and d.answers_per_task.tolist() == [0, 1]
    # int, float and dictionary task/worker columns with a null or NaN: an error naming the row
    with pytest.raises(DataError, match=r"blank task at .*t\.parquet row 2"):
        load_annotations(write(task=pa.array([1, None], pa.int64()), worker=["w1", "w1"], label=["a", "b"]))
    with pytest.raises(DataError, match=r"blank worker at .*t\.parquet row 1"):
        load_annotations(write(task=["t1", "t2"], worker=[float("nan"), 2.0], label=["a", "b"]))
    with pytest.raises(DataError, match=r"blank worker at .*t\.parquet row 2"):
        load_annotations(write(task=["t1", "t2"], worker=pa.array(["w", None]).dictionary_encode(), label=["a", "b"]))


def test_typed_dataframe_columns_with_nulls_follow_the_rule():
    frame = pd.DataFrame({
        "task": pd.array([1, 2, 3], dtype="Int64"),
        "worker": ["w1", "w1", "w2"],
        "label": pd.array([True, pd.NA, False], dtype="boolean"),
    })
    d, msgs = _read(frame)
    assert list(d.task_names) == ["1", "2", "3"] and d.answers_per_task.tolist() == [1, 0, 1]
    assert d.classes == ("False", "True") and msgs[0].startswith("skipped 1 answer(s) with a blank label")
    frame["label"] = pd.array([1, pd.NA, 2], dtype="Int64")
    assert _read(frame)[0].classes == ("1", "2")
    frame["label"] = pd.array(["a", pd.NA, "b"], dtype="string")
    assert _read(frame)[0].classes == ("a", "b")
    frame["label"] = pd.Series(["a", None, "b"], dtype="category")
    assert _read(frame)[0].classes == ("a", "b")
    frame["label"] = [pd.NaT, pd.Timestamp("2024-01-01"), None]
    d, msgs = _read(frame)
    assert d.classes == ("2024-01-01 00:00:00",) and d.n_answers == 1
    bad = frame.assign(task=pd.array([1, pd.NA, 3], dtype="Int64"))
    with pytest.raises(DataError, match=r"blank task at <frame> row 1"):
        load_annotations(bad)


def test_json_nan_is_missing_and_infinity_is_text(tmp_path):
    (p := tmp_path / "a.jsonl").write_text(
        '{"task": "t1", "worker": "w1", "label": NaN}\n{"task": "t2", "worker": "w1", "label": Infinity}\n'
    )
    d, msgs = _read(str(p))
    assert d.classes == ("Infinity",) and d.answers_per_task.tolist() == [0, 1]
    assert "skipped 1 answer(s) with a blank label" in msgs[0]


def test_text_that_spells_nan_or_na_is_a_name_not_missing():
    d = load("task,worker,label\nt1,w1,NA\nt2,w1,nan\nt3,w1,null\n")
    assert d.classes == ("NA", "nan", "null") and d.n_answers == 3


def test_blank_labels_policy_is_checked_before_reading():
    with pytest.raises(UsageError, match="blank_labels must be one of skip, error, got 'drop'"):
        load_annotations("/nonexistent.csv", blank_labels="drop")


# --------------------------------------------------------------------------- values that cannot be names (issue 12)
def _parquet_with(tmp_path, **cols):
    import pyarrow as pa
    import pyarrow.parquet as pq

    base = {"task": ["t1", "t2"], "worker": ["w1", "w1"], "label": ["a", "b"]}
    base.update(cols)
    pq.write_table(pa.table(base), p := tmp_path / "bad.parquet")
    return str(p)


def _raw_strings(values: list[bytes], large: bool = False):
    """An Arrow string array holding exactly these bytes (pyarrow would refuse to build it from str)."""
    import pyarrow as pa

    offsets = np.concatenate([[0], np.cumsum([len(v) for v in values])]).astype(np.int64 if large else np.int32)
    return pa.Array.from_buffers(pa.large_string() if large else pa.string(), len(values),
                                 [None, pa.py_buffer(offsets.tobytes()), pa.py_buffer(b"".join(values))])


@pytest.mark.parametrize("make", [
    lambda: _raw_strings([b"w1", b"w\xff"]),
    lambda: _raw_strings([b"w1", b"w\xff"], large=True),
    lambda: __import__("pyarrow").array([b"w1", b"w\xff"], __import__("pyarrow").binary()),
    lambda: _raw_strings([b"w1", b"w\xff"]).dictionary_encode(),
])
def test_invalid_utf8_in_a_parquet_column_names_file_row_and_column(make, tmp_path):
    path = _parquet_with(tmp_path, annotator=make(), worker=["x", "x"])
    with pytest.raises(DataError) as err:
        load_annotations(path, worker_col="annotator")
    assert str(err.value) == (
        f"the worker (column 'annotator') at {path} row 2 is not UTF-8 text (byte 0xFF at byte 2)"
    )
    # as the same byte in a CSV is refused with its line
    with pytest.raises(DataError, match=r"line 3: not UTF-8 text \(byte 0xFF"):
        load(b"task,worker,label\nt1,w1,a\nt2,w\xff,b\n")
    # an unused column may hold anything
    assert load_annotations(path).n_answers == 2


def test_invalid_utf8_in_parquet_truth_and_many_rows_is_named(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"task": _raw_strings([b"t1", b"\xc3("]), "label": ["a", "b"]}), p := tmp_path / "t.parquet")
    with pytest.raises(DataError, match=r"the task \(column 'task'\) at .*t\.parquet row 2 is not UTF-8 text"):
        read_task_labels(str(p))
    # past the prefix-and-integer fast path (100,000 ids and more)
    n = 150_000
    ids = [b"t%d" % i for i in range(n)]
    ids[-1] = b"t\xff"
    pq.write_table(pa.table({"task": _raw_strings(ids), "worker": ["w"] * n, "label": ["a"] * n}), p := tmp_path / "n.parquet")
    with pytest.raises(DataError, match=rf"at .*n\.parquet row {n} is not UTF-8 text"):
        load_annotations(str(p))


@pytest.mark.parametrize("kind, value, found", [
    ("list", [["a"], ["b"]], "list<element: string>"),
    ("struct", [{"x": 1}, {"x": 2}], "struct<x: int64>"),
    ("map", None, "map<string, int64"),
])
def test_a_nested_parquet_column_names_file_column_and_type(kind, value, found, tmp_path):
    import pyarrow as pa

    if kind == "map":
        value = pa.array([[("k", 1)], [("k", 2)]], pa.map_(pa.string(), pa.int64()))
    path = _parquet_with(tmp_path, label=value)
    with pytest.raises(DataError) as err:
        load_annotations(path)
    assert str(err.value).startswith(f"the label column 'label' of {path} holds {found}")
    assert str(err.value).endswith("values, not one name per row")


@pytest.mark.parametrize("text, where, what", [
    ('{"task":"\\ud800","worker":"w1","label":"a"}\n', "line 1", r"the task \(column 'task'\)"),
    ('{"task":"t1","worker":"w1","label":"a"}\n\n{"task":"t2","worker":"w\\udfff","label":"a"}\n', "line 3",
     r"the worker \(column 'worker'\)"),
    ('{"task":"t1","worker":"w1","label":"a\\udc80b"}\n', "line 1", r"the label \(column 'label'\)"),
])
def test_a_lone_surrogate_in_jsonl_names_file_line_and_column(text, where, what, tmp_path):
    (p := tmp_path / "s.jsonl").write_text(text)
    with pytest.raises(DataError, match=rf"^{what} at .*s\.jsonl {where} holds a lone surrogate"):
        load_annotations(str(p))
    # a valid pair of escapes is one character, accepted
    (q := tmp_path / "ok.jsonl").write_text('{"task":"\\ud83d\\ude00","worker":"w1","label":"a"}\n')
    assert list(load_annotations(str(q)).task_names) == ["\U0001f600"]


def test_a_lone_surrogate_in_json_list_mapping_records_and_frames_is_named(tmp_path):
    (p := tmp_path / "l.json").write_text('[{"task":"t1","worker":"w1","label":"a"},{"task":"t2","worker":"w1","label":"\\ud800"}]')
    with pytest.raises(DataError, match=r"the label \(column 'label'\) at .*l\.json record 2 holds a lone surrogate"):
        load_annotations(str(p))
    (p := tmp_path / "m.json").write_text('{"t1": {"w1": "a"}, "t\\ud800": {"w1": "b"}}')
    with pytest.raises(DataError, match=r"the task at .*m\.json answer 2 holds a lone surrogate \('t\\ud800'\)"):
        load_annotations(str(p))
    with pytest.raises(DataError, match=r"the worker \(column 'worker'\) at <records> record 2 holds a lone surrogate"):
        load_annotations([{"task": "t1", "worker": "w", "label": "a"}, {"task": "t1", "worker": "\ud800", "label": "a"}])
    frame = pd.DataFrame({"task": ["t1", "t\udc00"], "worker": ["w", "w"], "label": ["a", "b"]}, dtype=object)
    with pytest.raises(DataError, match=r"the task \(column 'task'\) at <frame> row 1 holds a lone surrogate"):
        load_annotations(frame)


def test_a_lone_surrogate_in_a_label_studio_export_is_named(tmp_path):
    export = [{"id": 1, "annotations": [{"id": 1, "completed_by": 1, "result": [
        {"type": "choices", "from_name": "c", "value": {"choices": ["\ud800"]}}]}]}]
    (p := tmp_path / "ls.json").write_text(json.dumps(export))
    with pytest.raises(DataError, match=r"the label at .*ls\.json task 1 holds a lone surrogate"):
        load_annotations(str(p))


@pytest.mark.parametrize("fmt", ["jsonl", "json", "mapping", "records", "frame", "parquet"])
def test_a_nul_character_in_a_name_is_refused_with_its_place(fmt, tmp_path):
    rows = [("t1", "w1", "a"), ("t2", "w\x00", "b")]
    with pytest.raises(DataError, match=r"the worker( \(column 'worker'\))? at .* holds a NUL character \('w\\x00'\)"):
        load_annotations(_write(fmt, rows, tmp_path))


def test_a_nul_byte_deep_in_a_csv_is_refused_with_its_line(tmp_path):
    body = "".join(f"t{i},w{i % 7},a\n" for i in range(20_000))  # the first 64 KB are NUL-free
    (p := tmp_path / "n.csv").write_bytes(b"task,worker,label\n" + body.encode() + b"t,w\x00,a\n")
    with pytest.raises(DataError, match=r"the worker \(column 'worker'\) at .*n\.csv line 20002 holds a NUL"):
        load_annotations(str(p))


@pytest.mark.parametrize("fmt", ["jsonl", "json", "mapping", "records", "frame"])
def test_a_nested_value_where_a_name_is_expected_is_refused_with_its_place(fmt, tmp_path):
    rows = [("t1", "w1", "a"), ("t2", "w1", ["b", "c"])]
    with pytest.raises(DataError, match=r"the label.* at .* holds a list \(JSON array\), not one name: \['b', 'c'\]"):
        load_annotations(_write(fmt, rows, tmp_path))
    rows = [("t1", "w1", "a"), ({"id": 2}, "w1", "b")]
    if fmt != "mapping":  # a mapping's tasks are its keys
        with pytest.raises(DataError, match=r"the task.* at .* holds a mapping \(JSON object\), not one name"):
            load_annotations(_write(fmt, rows, tmp_path))


def test_nested_values_in_unused_json_keys_are_fine(tmp_path):
    (p := tmp_path / "a.jsonl").write_text('{"task":"t1","worker":"w1","label":"a","meta":{"x":[1]}}\n')
    assert load_annotations(str(p)).classes == ("a",)


def test_a_dataframe_with_a_repeated_used_column_is_a_clear_error():
    frame = pd.DataFrame([["t1", "w1", "a", "b"]], columns=["task", "worker", "label", "label"])
    with pytest.raises(DataError, match=r"^<frame>: column 'label' appears 2 times in the header"):
        load_annotations(frame)
    frame = pd.DataFrame([["t1", "w1", "a", 1, 2]], columns=["task", "worker", "label", "x", "x"])
    assert load_annotations(frame).classes == ("a",)  # an unused repeated column is left alone
    frame = pd.DataFrame([["t1", "t2", "w1", "a"]], columns=["task", "task", "worker", "label"])
    with pytest.raises(DataError, match="column 'task' appears 2 times"):
        load_annotations(frame)


def test_a_list_of_records_is_read_like_a_dataframe_of_its_values(tmp_path):
    records = [{"task": "t1", "worker": 7, "label": 1}, {"task": "t2", "worker": 7, "label": None}]
    d, msgs = _read(records)
    assert list(d.task_names) == ["t1", "t2"] and list(d.worker_names) == ["7"] and d.classes == ("1",)  # not 1.0
    assert d.class_dtype == "int64"
    # one route for records: load_annotations and aggregate read them alike, typed like a DataFrame's columns
    from crowdagg import aggregate

    flags = [{"task": t, "worker": w, "label": t % 2 == 0} for t in (1, 2) for w in ("a", "b")]
    assert load_annotations(flags).classes == ("False", "True")
    assert aggregate(flags, "mv").labels_series().to_dict() == {1: False, 2: True}
    huge = [{"task": 2**70, "worker": "w", "label": 1}, {"task": 1, "worker": "w", "label": 2}]
    assert list(load_annotations(huge).task_names) == [str(2**70), "1"]  # no OverflowError
    with pytest.raises(DataError, match=r"<records> record 2 is a string, expected an object"):
        load_annotations([{"task": "t1", "worker": "w", "label": "a"}, "t2"])


def test_from_names_refuses_values_that_cannot_be_names():
    from crowdagg.data.annotations import AnnotationSet

    cases = [
        ((["t\ud800"], ["w"], ["a"]), r"the task at answer 0 holds a lone surrogate"),
        ((["t1"], [b"w\xff"], ["a"]), r"the worker at answer 0 is not UTF-8 text \(b'w\\xff', byte 0xFF\)"),
        ((["t1"], ["w"], ["a\x00"]), r"the label at answer 0 holds a NUL character"),
        ((["t1", "t2"], ["w", "w"], np.array(["a", {"k": 1}], dtype=object)), r"the label at answer 1 holds a mapping"),
    ]
    for args, message in cases:
        with pytest.raises(DataError, match=message):
            AnnotationSet.from_names(*args)


# --------------------------------------------------------------------------- JSON memory (issue 12)
def test_a_pathological_jsonl_is_refused_up_front_with_its_size(tmp_path, monkeypatch):
    from crowdagg.errors import ResourceError
    from crowdagg.io import read as cio

    p = tmp_path / "empty.jsonl"
    p.write_bytes(b"{}\n" * 2_000_000)  # 6 MB that once needed ~400 MB
    monkeypatch.setattr(cio, "_parse_jsonl", lambda *a: pytest.fail("parsed before the memory check"))
    with pytest.raises(ResourceError) as err:
        load_annotations(str(p), max_memory="100M")
    need, _ = cio._json_need(p.read_bytes(), "jsonl")
    assert need > 100 * 2**20
    assert str(err.value) == (
        f"this needs ~{cio.memory.human(need)} (parsing 5.72 MB of JSON Lines from {p}: 2,000,000 lines, 0 values), "
        "more than the limit of 100 MB (max_memory=100 MB); split the input; or raise max_memory if the machine "
        "really has the memory"
    )
    # the message counts the lines there are (it said 2,000,001 for these 2,000,000); a last line without
    # its newline is a line too
    assert cio._json_need(b"{}\n{}", "jsonl")[1] == "2 lines, 0 values"
    assert cio._json_need(b"{}\n{}\n", "jsonl")[1] == "2 lines, 0 values"
    # a JSON list and a mapping are estimated from their shape too
    (q := tmp_path / "l.json").write_bytes(b"[" + b"{}," * 2_000_000 + b"{}]")
    with pytest.raises(ResourceError, match=r"parsing 5.72 MB of JSON from .*l\.json: 2,000,002 objects and lists"):
        load_annotations(str(q), max_memory="100M")


def test_ordinary_jsonl_is_not_refused_by_the_estimate(tmp_path):
    p = tmp_path / "a.jsonl"
    p.write_text("".join(json.dumps({"task": f"t{i // 3}", "worker": f"w{i % 40}", "label": "ab"[i % 2]}) + "\n"
                         for i in range(30_000)))
    size = p.stat().st_size
    from crowdagg.io import read as cio

    need, _ = cio._json_need(p.read_bytes(), "jsonl")
    assert need < 12 * size  # no more pessimistic than the old flat 12 bytes per byte on ordinary records
    assert load_annotations(str(p), max_memory=f"{int(need) + 1}").n_answers == 30_000


_PEAK_SCRIPT = r"""
import json, sys, warnings
warnings.simplefilter("ignore")
import crowdagg.io.read as cio, crowdagg.kernels  # noqa: F401
small = sys.argv[1] + ".warm.jsonl"
open(small, "w").write('{"task":"t","worker":"w","label":"a"}\n{"task":"u","worker":"w","label":"b"}\n')
cio.load_annotations(small)  # imports and compiled kernels are not the parse's memory
def status(key):
    for line in open("/proc/self/status"):
        if line.startswith(key):
            return int(line.split()[1]) * 1024
before = status("VmRSS:")
open("/proc/self/clear_refs", "w").write("5")  # VmHWM restarts from here
try:
    cio.load_annotations(sys.argv[1], max_memory="none")
except Exception as exc:
    print(type(exc).__name__, exc, file=sys.stderr)
print(status("VmHWM:") - before)
"""


def _shapes(tmp_path):
    full = '{"task":"t","worker":"w","label":"a"}'
    n = 300_000
    yield "blank_rows.jsonl", (full + "\n" + "{}\n" * n).encode()
    yield "distinct.jsonl", "".join(f'{{"task":"t{i}","worker":"w{i}","label":"{i % 3}"}}\n' for i in range(n // 3)).encode()
    yield "blank_list.json", ("[" + full + ",{}" * n + "]").encode()
    yield "numbers.json", ("[" + ",".join("1" for _ in range(n)) + "]").encode()
    yield "unanswered.json", ('{"t":{"w":"a"},' + ",".join(f'"{i}":{{}}' for i in range(n)) + "}").encode()


@pytest.mark.skipif(not __import__("os").path.exists("/proc/self/clear_refs"), reason="needs Linux /proc")
def test_json_memory_estimate_bounds_measured_peaks(tmp_path):
    """The estimate is an upper bound of the real peak (RSS high-water mark) on the costliest shapes."""
    import subprocess
    import sys

    from crowdagg.io import read as cio

    for name, data in _shapes(tmp_path):
        p = tmp_path / name
        p.write_bytes(data)
        proc = subprocess.run([sys.executable, "-c", _PEAK_SCRIPT, str(p)], capture_output=True, text=True,
                              timeout=300, cwd=str(__import__("pathlib").Path(cio.__file__).parents[2]))
        assert proc.returncode == 0, proc.stderr
        peak = int(proc.stdout.split()[-1])
        need, _ = cio._json_need(data, "jsonl" if name.endswith(".jsonl") else "json")
        assert peak <= need, (name, peak, need)


def test_a_csv_with_very_many_columns_is_refused_up_front_with_its_size(tmp_path, monkeypatch):
    """Arrow builds every column (~10 KB each): 1.2 MB of CSV in 200,000 columns peaked at 2 GB under 500M."""
    from crowdagg.errors import ResourceError
    from crowdagg.io import read as cio

    n = 100_000
    p = tmp_path / "wide.csv"
    p.write_text(",".join(["task", "worker", "label", *(f"c{i}" for i in range(n))]) + "\n"
                 + ",".join(["t1", "w1", "a", *("x" * n)]) + "\n")
    monkeypatch.setattr(cio, "_parse_delimited_arrow", lambda *a: pytest.fail("parsed before the memory check"))
    with pytest.raises(ResourceError) as err:
        load_annotations(str(p), max_memory="500M")
    need = cio.ARROW_BYTES_PER_BYTE * p.stat().st_size + cio.ARROW_BYTES_PER_COLUMN * (n + 3)
    assert need > 500 * 2**20
    assert str(err.value).startswith(
        f"this needs ~{cio.memory.human(need)} (reading {cio.memory.human(p.stat().st_size)} of text in "
        f"{n + 3:,} columns from {p}), more than the limit of 500 MB"
    )
    monkeypatch.undo()
    data = load_annotations(str(p), max_memory="4G")  # read when the memory is there
    assert data.n_answers == 1 and list(data.task_names) == ["t1"]


def test_a_very_wide_parquet_counts_its_columns_up_front(tmp_path):
    """One row in 20,003 columns: Arrow's per-column cost (~300 MB) is refused under 200M, not found out."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from crowdagg.errors import ResourceError
    from crowdagg.io import read as cio

    n = 20_000
    names = ["task", "worker", "label", *(f"c{i}" for i in range(n))]
    p = tmp_path / "wide.parquet"
    pq.write_table(pa.Table.from_arrays([pa.array(["t1"]), pa.array(["w1"]), pa.array(["a"])]
                                        + [pa.array(["x"])] * n, names=names), p)
    with pytest.raises(ResourceError, match=r"decoding 1 rows × 20003 columns of Parquet .* more than the limit of 200 MB"):
        load_annotations(str(p), max_memory="200M")
    assert cio.ARROW_BYTES_PER_COLUMN * (n + 3) > 200 * 2**20 / 2
    # a repeated column is named, also at the far end of a wide schema
    q = tmp_path / "dup.parquet"
    pq.write_table(pa.Table.from_arrays([pa.array(["x"])] * 4, names=["task", "worker", "label", "task"]), q)
    with pytest.raises(DataError, match=r"dup\.parquet: the column 'task' appears twice"):
        load_annotations(str(q))
