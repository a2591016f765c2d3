"""The Arrow ingest path: same tables as the exact parser, Parquet, several inputs, the ingest kernels."""

from __future__ import annotations

import gzip
import io
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from crowdagg.data.annotations import AnnotationSet
from crowdagg.data.vocab import Vocabulary, as_strings
from crowdagg.errors import DataError, UsageError
from crowdagg.io import read as cio
from crowdagg.io.read import expand_inputs, load_annotations
from crowdagg.kernels import quote_parity, repeated_answers, scan_records, sort_by_task

GOLDEN_INPUTS = Path(__file__).parent.parent / "golden" / "inputs"

#: Golden inputs the Arrow parser hands to the exact parser, and why.
EXPECTED_FALLBACKS = {
    "cr_only_line_ends": "lone CR line ends",
    "blank_line_before_header": "the exact parser says the file is empty",
    "fewer_fields_extra_column": "short rows are padded",
    "fewer_fields_label_missing": "short rows are padded",
    "more_fields": "an error naming the line",
    "trailing_comma_rows": "an error naming the line",
    "tsv_more_fields": "an error naming the line",
    "unclosed_quote_after_multiline": "an error naming the line",
    "quote_inside_unquoted_cell": "stray quotes",
    "truth_fewer_fields": "short rows are padded",
    "quoted_newline_then_more_fields": "an error naming the line",
    "crlf_quoted_newline_then_error": "an error naming the line",
    "blank_rows_commas": "short rows are padded",
    "truth_blank_rows": "short rows are padded",
}


def _table_view(t: cio.RawTable) -> tuple:
    return t.header, [cio._pylist(c) for c in t.columns], [t.locate.line(i) for i in range(t.n_rows)]


def _delimited_inputs() -> list[tuple[str, bytes, str]]:
    out = []
    for p in sorted(GOLDEN_INPUTS.iterdir()):
        data = p.read_bytes()
        if p.suffix == ".gz":
            try:
                data = gzip.decompress(data)
            except (EOFError, OSError):
                continue
        try:
            data = cio.to_utf8(data, p.name)
        except DataError:
            continue
        if not data.strip():
            continue
        fmt = cio.detect_format(data, p.name.removesuffix(".gz"), None)
        if fmt in ("csv", "tsv"):
            out.append((p.name, data, "," if fmt == "csv" else "\t"))
    return out


def test_arrow_parser_gives_the_exact_parsers_table_on_every_golden_input():
    handled, fell_back = [], []
    for name, data, sep in _delimited_inputs():
        try:
            exact = _table_view(cio._parse_delimited_exact(data, name, sep))
        except DataError as exc:
            exact = str(exc)
        arrow = cio._parse_delimited_arrow(data, name, sep)
        if arrow is None:
            fell_back.append(name)
            continue
        assert _table_view(arrow) == exact, name
        handled.append(name)
    assert len(handled) >= 50  # the fast path is the common path
    stems = {n.split(".")[0] for n in fell_back}
    unexpected = {s for s in stems if not any(k in s for k in EXPECTED_FALLBACKS)}
    assert not unexpected, f"fell back to the exact parser unexpectedly: {sorted(unexpected)}"


def test_every_dataset_takes_the_arrow_path(datasets_dir):
    for d in sorted(p for p in datasets_dir.iterdir() if (p / "labels.csv").is_file()):
        data = (d / "labels.csv").read_bytes()
        arrow = cio._parse_delimited_arrow(data, d.name, ",")
        assert arrow is not None, d.name
        assert _table_view(arrow) == _table_view(cio._parse_delimited_exact(data, d.name, ",")), d.name


# --------------------------------------------------------------------------- awkward text, generated
_CELL = st.one_of(
    st.text(alphabet=list("ab7 0.,\"\t\n\r") + ["é", "\u3000"], max_size=6),
    st.sampled_from(["NA", "007", "1.0", "", " "]),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=st.lists(st.lists(_CELL, min_size=3, max_size=3), max_size=8), crlf=st.booleans(), bom=st.booleans())
def test_arrow_and_exact_parsers_agree_on_generated_csv(rows, crlf, bom):
    """Same table, or a fallback -- except for a lone CR inside quotes, which pandas splits (see below)."""
    import csv

    assume(not any("\r" in cell for row in rows for cell in row))
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\r\n" if crlf else "\n").writerows([["task", "worker", "label"], *rows])
    data = cio.to_utf8((b"\xef\xbb\xbf" if bom else b"") + buf.getvalue().encode(), "gen")
    try:
        exact = _table_view(cio._parse_delimited_exact(data, "gen", ","))
    except DataError as exc:
        exact = str(exc)
    arrow = cio._parse_delimited_arrow(data, "gen", ",")
    if arrow is not None:
        assert _table_view(arrow) == exact


def test_a_quoted_lone_cr_stays_in_its_cell():
    # The pre-Arrow (pandas) parser ended the record at a CR inside quotes; RFC 4180 keeps it in the cell.
    arrow = cio._parse_delimited_arrow(b'task,worker,label\n"\r0",w,x\n', "f", ",")
    assert arrow is not None and _table_view(arrow)[1] == [["\r0"], ["w"], ["x"]]


@settings(max_examples=100, deadline=None)
@given(rows=st.lists(st.lists(st.text(alphabet=" ab\"x7", max_size=4), min_size=3, max_size=3), max_size=8),
       blank=st.sampled_from(["", "  ", "\t\t", " \t \t ", "\t"]))
def test_tsv_blank_lines_are_skipped_like_the_exact_parser(rows, blank):
    lines = ["task\tworker\tlabel", *("\t".join(r) for r in rows)]
    lines.insert(1 + len(rows) // 2, blank)
    data = ("\n".join(lines) + "\n").encode()
    exact = _table_view(cio._parse_delimited_exact(data, "gen", "\t"))
    arrow = cio._parse_delimited_arrow(data, "gen", "\t")
    if arrow is not None:
        assert _table_view(arrow) == exact


# --------------------------------------------------------------------------- kernels against slow twins
def _slow_lines(data: bytes, sep: str, n_cols: int) -> list[int]:
    import csv

    reader = csv.reader(io.StringIO(data.decode(), newline=""), delimiter=sep)
    out, start = [], 1
    for i, rec in enumerate(reader):
        if i and len(rec) == n_cols:
            out.append(start)
        start = reader.line_num + 1
    return out


@settings(max_examples=100, deadline=None)
@given(rows=st.lists(st.lists(st.text(alphabet="ab,\"\n ", max_size=4), min_size=3, max_size=3), max_size=8))
def test_scan_records_finds_each_rows_first_line(rows):
    import csv

    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows([["task", "worker", "label"], *rows])
    data = buf.getvalue().encode()
    lines, ws, _, bad = scan_records(data, ",", True, 3)
    assert bad == 0
    assert lines.tolist() == _slow_lines(data, ",", 3)


def test_quote_parity():
    assert quote_parity(b'a,"b\nc",d\n') == (True, False)
    assert quote_parity(b'a,"b",c\n') == (False, False)
    assert quote_parity(b'a,"b\n') == (True, True)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("policy", ["first", "last"])
def test_repeated_answers_match_hashing_all_pairs(rng, policy, threads, monkeypatch):
    import crowdagg.kernels.schedule

    if threads == 2:  # the two-thread path of large inputs, on a small one
        monkeypatch.setattr(crowdagg.kernels.schedule, "PARALLEL_ANSWERS", 100)
    n, n_tasks, n_workers = 5000, 300, 40
    task = rng.integers(0, n_tasks, n).astype(np.int32)
    worker = rng.integers(0, n_workers, n).astype(np.int32)
    label = rng.integers(0, 3, n).astype(np.int8)
    ptr, t_s, w_s, y_s = sort_by_task(task, worker, label, n_tasks)
    order = np.argsort(task, kind="stable")
    np.testing.assert_array_equal(t_s, task[order])
    np.testing.assert_array_equal(w_s, worker[order])
    np.testing.assert_array_equal(y_s, label[order])
    np.testing.assert_array_equal(ptr, np.concatenate([[0], np.cumsum(np.bincount(task, minlength=n_tasks))]))
    count, mask = repeated_answers(ptr, w_s, n_workers, keep=policy)
    reference = pd.Series(task.astype(np.int64) * n_workers + worker).duplicated(keep=policy).to_numpy()
    assert count == int(reference.sum()) > 0
    np.testing.assert_array_equal(mask, reference[order])
    assert repeated_answers(ptr, w_s, n_workers, mark=False)[1].size == 0


# --------------------------------------------------------------------------- vocabulary
def test_vocabulary_views():
    v = Vocabulary.from_strings(["t1", "007", "é"])
    assert len(v) == 3 and v[1] == "007" and v.index("é") == 2
    assert v[np.array([2, 0])].tolist() == ["é", "t1"]
    assert v.to_numpy().dtype == object and list(v) == ["t1", "007", "é"]
    assert Vocabulary.range(3).tolist() == ["0", "1", "2"]
    with pytest.raises(ValueError):
        v.index("nope")


def test_typed_ids_become_names_by_the_text_rule():
    names, dtype = as_strings(pa.array([7, -1, None], type=pa.int64()))
    assert names.to_pylist() == ["7", "-1", ""] and dtype == "int64"
    names, dtype = as_strings(pa.array([True, False]))
    assert names.to_pylist() == ["True", "False"] and dtype == "bool"
    names, dtype = as_strings(pa.array(["a", "b", "a"]).dictionary_encode())
    assert names.to_pylist() == ["a", "b", "a"] and dtype is None
    names, _ = as_strings(np.array([1.0, 0.1, 1e-05, np.nan]))
    assert names.to_pylist() == ["1.0", "0.1", "1e-05", ""]


# --------------------------------------------------------------------------- Parquet and several inputs
ROWS = [("t1", "w1", "a"), ("t2", "w1", "b"), ("t1", "w2", "a"), ("t3", "w2", "b")]


def _csv(rows, header=("task", "worker", "label")) -> str:
    return "\n".join(",".join(r) for r in [header, *rows]) + "\n"


def _same(a: AnnotationSet, b: AnnotationSet) -> None:
    assert a.task_names.tolist() == b.task_names.tolist()
    assert a.worker_names.tolist() == b.worker_names.tolist()
    assert a.classes == b.classes
    for x, y in ((a.task, b.task), (a.worker, b.worker), (a.label, b.label)):
        np.testing.assert_array_equal(x, y)
    assert a.n_duplicates == b.n_duplicates


def test_parquet_input_reads_like_csv(tmp_path):
    (tmp_path / "a.csv").write_text(_csv(ROWS))
    pq.write_table(pa.table({"item": [r[0] for r in ROWS], "annotator": [r[1] for r in ROWS],
                             "answer": [r[2] for r in ROWS]}), tmp_path / "a.parquet")
    _same(load_annotations(tmp_path / "a.parquet"), load_annotations(tmp_path / "a.csv"))
    # the magic bytes decide, whatever the name; gzip is read transparently
    (tmp_path / "a.data").write_bytes((tmp_path / "a.parquet").read_bytes())
    (tmp_path / "b.parquet.gz").write_bytes(gzip.compress((tmp_path / "a.parquet").read_bytes()))
    _same(load_annotations(tmp_path / "a.data"), load_annotations(tmp_path / "a.csv"))
    _same(load_annotations(tmp_path / "b.parquet.gz"), load_annotations(tmp_path / "a.csv"))


def test_typed_parquet_ids_keep_their_dtype_and_text(tmp_path):
    pq.write_table(pa.table({"task": [7, 8, 7], "worker": [1, 1, 2], "label": [0.5, 1.0, 0.5]}), tmp_path / "t.parquet")
    d = load_annotations(tmp_path / "t.parquet")
    assert d.task_names.tolist() == ["7", "8"] and d.tasks.dtype == "int64"
    assert d.classes == ("0.5", "1.0")


def test_parquet_errors_name_the_file_and_row(tmp_path):
    pq.write_table(pa.table({"task": ["t1", None], "worker": ["w", "w"], "label": ["a", "b"]}), tmp_path / "n.parquet")
    with pytest.raises(DataError, match=r"blank task at .*n.parquet row 2"):
        load_annotations(tmp_path / "n.parquet")
    (tmp_path / "bad.parquet").write_bytes(b"PAR1 not really")
    with pytest.raises(DataError, match="bad.parquet"):
        load_annotations(tmp_path / "bad.parquet")
    (tmp_path / "x.csv").write_text(_csv(ROWS))
    with pytest.raises(DataError, match="not a Parquet file"):
        load_annotations(tmp_path / "x.csv", input_format="parquet")


def test_several_inputs_are_one_data_set(tmp_path):
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "2.csv").write_text(_csv(ROWS[2:]))
    pq.write_table(pa.table({"task": [r[0] for r in ROWS[:2]], "worker": [r[1] for r in ROWS[:2]],
                             "label": [r[2] for r in ROWS[:2]]}), tmp_path / "b" / "1.parquet")
    (tmp_path / "b" / ".hidden.csv").write_text("junk\n")
    (tmp_path / "b" / "notes.md").write_text("junk\n")
    (tmp_path / "all.csv").write_text(_csv(ROWS))
    whole = load_annotations(tmp_path / "all.csv")
    _same(load_annotations([str(tmp_path / "b")]), whole)  # a directory: its data files, sorted
    _same(load_annotations([str(tmp_path / "b" / "*.*q*")] + [str(tmp_path / "b" / "*.csv")]), whole)  # globs
    _same(load_annotations([str(tmp_path / "b" / "1.parquet"), str(tmp_path / "b" / "2.csv")]), whole)
    # files in the order given; different column orders and aliases per file
    (tmp_path / "c.tsv").write_text("annotator\titem\tanswer\n" + "".join(f"{w}\t{t}\t{y}\n" for t, w, y in ROWS[2:]))
    _same(load_annotations([str(tmp_path / "b" / "1.parquet"), str(tmp_path / "c.tsv")]), whole)


def test_several_inputs_errors_name_the_file_and_line(tmp_path):
    (tmp_path / "1.csv").write_text(_csv(ROWS))
    (tmp_path / "2.csv").write_text(_csv([("t9", "w1", "a"), ("t9", "", "a")]))
    with pytest.raises(DataError, match=r"blank worker at .*2\.csv line 3"):
        load_annotations([str(tmp_path / "1.csv"), str(tmp_path / "2.csv")])
    (tmp_path / "3.csv").write_text(_csv([("t1", "w1", "b")]))
    with pytest.raises(DataError, match=r"duplicate answer at .*3\.csv line 2"):
        load_annotations([str(tmp_path / "1.csv"), str(tmp_path / "3.csv")], duplicates="error")
    with pytest.raises(DataError, match="no file matches"):
        expand_inputs([str(tmp_path / "*.parquet")])
    with pytest.raises(UsageError, match="twice"):
        expand_inputs(["-", "-"])
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match="no data files"):
        expand_inputs([str(tmp_path / "empty")])


def test_a_json_mapping_with_unanswered_tasks_among_several_files(tmp_path):
    (tmp_path / "1.json").write_text(json.dumps({"t0": {}, "t1": {"w1": "a"}}))
    (tmp_path / "2.csv").write_text(_csv([("t2", "w1", "b")]))
    d = load_annotations([str(tmp_path / "1.json"), str(tmp_path / "2.csv")])
    assert d.task_names.tolist() == ["t0", "t1", "t2"] and d.answers_per_task.tolist() == [0, 1, 1]


def test_dataframe_ids_keep_their_dtype():
    frame = pd.DataFrame({"task": [10, 11, 10], "worker": ["a", "b", "b"], "label": ["x", "y", "x"]})
    d = load_annotations(frame)
    assert d.tasks.dtype == "int64" and d.task_names.tolist() == ["10", "11"]
    assert d.workers.dtype is None


# --------------------------------------------------------------------------- writers -> readers
_NAME = st.text(alphabet=list('ab7.,;"é\n\t\u3000x ') + ["\u2028"], min_size=1, max_size=6).filter(
    lambda s: s == s.strip() and s.casefold() not in ("task", "worker", "label")
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    rows=st.lists(st.tuples(_NAME, _NAME, st.sampled_from(["a", "b", "c,d", 'q"'])), min_size=1, max_size=12),
    fmt=st.sampled_from(["csv", "tsv", "json", "jsonl", "parquet"]),
)
def test_tables_round_trip_through_every_writer_and_reader(rows, fmt):
    from crowdagg.io.render import render_table

    if fmt == "tsv":
        assume(not any(ch in cell for r in rows for cell in r for ch in "\t\n\r"))
    cols = {name: np.array([r[i] for r in rows], dtype=object) for i, name in enumerate(("task", "worker", "label"))}
    data = render_table(cols, fmt)
    back = load_annotations(io.BytesIO(data), input_format=fmt)
    expected = AnnotationSet.from_names(cols["task"], cols["worker"], cols["label"])
    _same(back, expected)


def test_every_dataset_reads_the_same_from_parquet(datasets_dir, tmp_path):
    import pyarrow.csv as pcsv

    for d in sorted(p for p in datasets_dir.iterdir() if (p / "labels.csv").is_file()):
        try:
            want = load_annotations(d / "labels.csv")
        except DataError:
            continue  # emotion: numeric answers, not classes
        text = pcsv.read_csv(d / "labels.csv", convert_options=pcsv.ConvertOptions(
            column_types={"task": pa.string(), "worker": pa.string(), "label": pa.string()}))
        pq.write_table(text, tmp_path / "s.parquet")
        _same(load_annotations(tmp_path / "s.parquet"), want)
        typed = pcsv.read_csv(d / "labels.csv")  # integer ids where the text is integers
        pq.write_table(typed, tmp_path / "t.parquet")
        if all(pa.types.is_integer(t) for t in typed.schema.types):
            got = load_annotations(tmp_path / "t.parquet")
            assert got.tasks.dtype == "int64"
            if all(not n.startswith("0") or n == "0" for n in want.task_names.tolist()):
                _same(got, want)


# --------------------------------------------------------------------------- found in review
def _error(data: bytes, tmp_path, name="r.csv", **kw) -> str:
    p = tmp_path / name
    p.write_bytes(data)
    with pytest.raises(DataError) as exc:
        load_annotations(p, **kw)
    return str(exc.value)


def test_an_unclosed_quote_is_found_whatever_the_other_quotes(tmp_path):
    msg = _error(b'task,worker,label\nt1,w1,5" screen\nt2,w2,"x\n', tmp_path)
    assert msg.endswith("line 3: a quoted field opened here is never closed")
    head = b'"task,worker,label\n' + b"t1,w1,a\n" * 20000  # an unclosed quote in a long header
    assert _error(head, tmp_path).endswith("line 1: a quoted field opened here is never closed")


@pytest.mark.parametrize(
    ("data", "line"),
    [
        (b'task,worker,label\rt1,w1,"a"\rt2,w2,b\rt3,,a\r', 4),  # CR line ends, quotes
        (b"task,worker,label\n\nt1,,a\rt2,w2,b\n", 3),  # a blank line and a lone CR
        (b"task,worker,label\nt1,w1,a\rt1,w2,b\nt2,,a\n", 4),  # mixed line ends
        (b"task,worker,label\rt1,w1,a\r\rt1,w2,b\rt1,,a\r", 5),  # CR only, a blank line (crashed before)
    ],
)
def test_a_lone_cr_ends_a_line_in_line_numbers(tmp_path, data, line):
    assert _error(data, tmp_path).startswith(f"blank worker at {tmp_path / 'r.csv'} line {line} ")


def test_a_tsv_line_of_tabs_with_too_many_fields_is_an_error(tmp_path):
    msg = _error(b"task\tworker\tlabel\nt1\tw1\ta\n\t\t\t\nt2\tw1\tb\n", tmp_path, "r.tsv")
    assert "line 3: 4 fields, but the header has 3" in msg


def test_an_input_format_beats_the_parquet_magic(tmp_path):
    p = tmp_path / "p.csv"
    p.write_bytes(b"PAR1,worker,label\nt1,w1,a\n")
    assert load_annotations(p, input_format="csv", task_col="PAR1").task_names.tolist() == ["t1"]


def test_memory_limits_hold_for_several_inputs_and_for_parquet(tmp_path):
    from crowdagg.errors import ResourceError

    for i in range(4):
        (tmp_path / f"{i}.csv").write_text("task,worker,label\n" + "t,w,a\n" * 100_000)  # 0.6 MB each
    # Read one after another: the largest one's parsing (4 bytes a byte) and every answer's codes (14 bytes
    # an answer, at most one per 6 bytes): 2.4 + 5.6 MB.
    with pytest.raises(ResourceError, match=r"reading 4 inputs \(2.29 MB of text, up to 400,012 answers\)"):
        load_annotations([str(tmp_path / f"{i}.csv") for i in range(4)], max_memory="7M")
    assert load_annotations([str(tmp_path / f"{i}.csv") for i in range(4)], max_memory="9M").n_answers == 400_000
    n = 1_000_000
    pq.write_table(pa.table({"task": pa.array(["t"] * n).dictionary_encode(), "worker": ["w"] * n,
                             "label": ["a"] * n}), tmp_path / "big.parquet")
    assert (tmp_path / "big.parquet").stat().st_size < 100_000
    with pytest.raises(ResourceError, match="1,000,000 rows × 3 columns of Parquet"):
        load_annotations(tmp_path / "big.parquet", max_memory="50M")


def test_temporal_ids_are_written_as_python_writes_them():
    frame = pd.DataFrame({
        "task": pd.to_datetime(["2020-01-01", "2020-01-02"]),
        "worker": pd.period_range("2020-01", periods=2, freq="M"),
        "label": pd.to_timedelta(["1s", "2s"]),
    })
    d = load_annotations(frame)
    assert d.task_names.tolist() == ["2020-01-01 00:00:00", "2020-01-02 00:00:00"]
    assert d.worker_names.tolist() == ["2020-01", "2020-02"]
    assert d.classes == ("0 days 00:00:01", "0 days 00:00:02")
    intervals = pd.DataFrame({"task": pd.interval_range(0, 2), "worker": ["w", "v"], "label": ["a", "b"]})
    assert load_annotations(intervals).task_names.tolist() == ["(0, 1]", "(1, 2]"]
    names, dtype = as_strings(pa.array([pd.Timestamp("2020-01-01 00:00:01")], type=pa.timestamp("s")))
    assert names.to_pylist() == ["2020-01-01 00:00:01"] and dtype == "timestamp[s]"


def test_joined_inputs_with_a_mapping_skip_blank_and_header_rows(tmp_path):
    (tmp_path / "b.csv").write_text("task,worker,label\nt1,w1,a\n,,\ntask,worker,label\nt2,w1,b\n")
    (tmp_path / "d.json").write_text(json.dumps({"t4": {"w1": "a"}, "t9": {}}))
    d = load_annotations([str(tmp_path / "b.csv"), str(tmp_path / "d.json")])
    assert d.task_names.tolist() == ["t1", "t2", "t4", "t9"]
    assert d.answers_per_task.tolist() == [1, 1, 1, 0]


def test_parquet_details(tmp_path):
    import pyarrow.parquet as pq_

    table = pa.table([pa.array(["t"]), pa.array(["w"]), pa.array(["a"])], names=["task", "task", "label"])
    pq_.write_table(table, tmp_path / "dup.parquet")
    assert "the column 'task' appears twice" in _error((tmp_path / "dup.parquet").read_bytes(), tmp_path, "x.parquet")
    pq_.write_table(pa.table({"task": [1, 2], "worker": [5, 5], "label": ["a", "b"]}), tmp_path / "i.parquet")
    two = load_annotations([str(tmp_path / "i.parquet"), str(tmp_path / "i.parquet")], duplicates="first")
    assert two.tasks.dtype == "int64" and two.workers.dtype == "int64"
    (tmp_path / "sub.parquet").mkdir()  # a directory matched by a glob is passed over
    found = expand_inputs([str(tmp_path / "*.parquet")])
    assert str(tmp_path / "sub.parquet") not in found and str(tmp_path / "i.parquet") in found
