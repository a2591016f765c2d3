"""Record the golden outcomes of the input readers (tests/golden), replayed by tests/test_ingest_golden.py.

The goldens describe the readers of commit 5bc0f43.  Record them from a
checkout of that commit, never from a tree whose readers are being changed::

    git worktree add /tmp/golden_base 5bc0f43
    cd /tmp/golden_base && PYTHONPATH=/tmp/golden_base /work/main/.venv/bin/python \\
        /work/main/tests/make_golden.py [--datasets DIR]
    git -C /work/main worktree remove --force /tmp/golden_base

It writes ``tests/golden/inputs/*`` (the input bytes), ``tests/golden/cases/*.json``
(one case each: the call and its outcome) and ``tests/golden/datasets.json``
(digests of the real datasets converted to each format).  The ``crowdagg`` it
imports is printed first: check that it is the checkout you mean.

An outcome changed on purpose later is re-recorded alone, from the tree that
changes it, and listed in the CHANGELOG; cases added after 5bc0f43 are
recorded the same way (``ADDED`` below)::

    cd /work/wt/BRANCH && /work/main/.venv/bin/python tests/make_golden.py --only NAME [NAME ...]

Changed on purpose since 5bc0f43 (issue 12): ``csv_blank_label``,
``csv_fewer_fields_label_missing`` and ``json_records_null_label`` (a blank
label is a skipped answer, not an error), ``json_records_nested_values`` (a
nested JSON value is refused, not turned into a class).
"""

from __future__ import annotations

import argparse
import codecs
import gzip
import importlib.util
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def _harness() -> Any:
    # Loaded by path: putting the checkout on sys.path would also put its crowdagg there.
    spec = importlib.util.spec_from_file_location("golden_harness", HERE / "golden" / "harness.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# --------------------------------------------------------------------------- the corpus
CASES: list[dict[str, Any]] = []
FILES: dict[str, bytes] = {}


def case(
    name: str,
    content: str | bytes | None = None,
    ext: str = ".csv",
    *,
    func: str = "load_annotations",
    source: str = "path",
    input: str | None = None,
    **kwargs: Any,
) -> None:
    """One call: ``content`` is written to inputs/NAME+EXT (or ``input`` names an existing file)."""
    if input is None:
        assert content is not None
        input = name + ext
        data = content.encode("utf-8") if isinstance(content, str) else content
        assert input not in FILES, input
        FILES[input] = data
    assert input in FILES, input
    assert all(c["name"] != name for c in CASES), name
    CASES.append({"name": name, "func": func, "input": input, "source": source, "kwargs": kwargs})


def gz(text: str | bytes) -> bytes:
    data = text.encode("utf-8") if isinstance(text, str) else text
    return gzip.compress(data, compresslevel=6, mtime=0)


BASIC = "task,worker,label\nt1,w1,a\nt1,w2,b\nt2,w1,a\nt2,w2,a\n"
TRUTH = "task,label\nt1,a\nt2,b\n"

# ---- CSV: quoting, line ends, encodings
case("csv_basic", BASIC)
case("csv_quoted_separator", 'task,worker,label\n"t,1",w1,"a,b"\nt2,"w,2",c\n')
case("csv_doubled_quotes", 'task,worker,label\n"say ""hi""",w1,"a ""b"""\nt2,w1,"""c"""\n')
case("csv_quoted_newline_ok", 'task,worker,label\n"t\n1",w1,a\nt2,"w\n2",b\nt3,w1,"multi\nline\nlabel"\n')
case("csv_quoted_newline_then_more_fields", 'task,worker,label\n"t\n1",w1,a\n"t2","w\n\n2",b\nt3,w1,a,EXTRA\nt4,w1,a\n')
case("csv_quoted_newline_then_blank_worker", 'task,worker,label\n"t\n1",w1,a\nt2,"w\n2",b\nt3,,a\n')
case(
    "csv_quoted_newline_then_duplicate",
    'task,worker,label\n"t\n1",w1,a\n"t\n1",w2,b\n"t\n1",w1,a\n',
    duplicates="error",
)
case("csv_unclosed_quote_after_multiline", 'task,worker,label\n"t\n1",w1,a\nt2,w2,b\nt3,"w3,a\n')
case("csv_quote_inside_unquoted_cell", 'task,worker,label\nt1,w"1,a\nt2,w2,b"c\n')
case("csv_space_before_quote", 'task,worker,label\nt1, "w1",a\nt2,w2 ,"b" \n')
case("csv_bom_utf8", codecs.BOM_UTF8 + BASIC.encode())
case("csv_utf16le_bom", codecs.BOM_UTF16_LE + BASIC.encode("utf-16-le"))
case("csv_utf16be_bom", codecs.BOM_UTF16_BE + "task,worker,label\nt1,w1,é\nt2,w2,ü\n".encode("utf-16-be"))
case("csv_utf32le_bom", codecs.BOM_UTF32_LE + BASIC.encode("utf-32-le"))
case("csv_utf16le_no_bom", BASIC.encode("utf-16-le"))
case("csv_crlf", BASIC.replace("\n", "\r\n"))
case("csv_crlf_quoted_newline_then_error", 'task,worker,label\r\n"t\r\n1",w1,a\r\nt2,w2\r\nt3,w3,a,x\r\n')
case("csv_cr_only_line_ends", BASIC.replace("\n", "\r"))
case("csv_unicode_ids", "task,worker,label\ntâche,工人,chat\n🐱,工人,chien\ncafé,w2,chat\ncafe\u0301,w2,chat\n")
case("csv_latin1", "task,worker,label\nt1,w1,a\nt2,Jos\xe9,b\n".encode("latin-1"))
case("csv_latin1_after_multiline", 'task,worker,label\n"t\n1",w1,a\nt2,w2,caf\xe9\n'.encode("latin-1"))
case("csv_nul_bytes", b"task,worker,label\nt1,w1,a\nt2,w\x002,b\n")
case("csv_nul_bytes_stream", b"task,worker,label\nt1,w1,a\nt2,w\x002,b\n", ext=".bin", source="stream")
case("csv_empty_file", b"")
case("csv_header_only", "task,worker,label\n")
case("csv_blank_line_before_header", "\ntask,worker,label\nt1,w1,a\n")

# ---- ids that look like numbers or missing values (kept as text)
case(
    "csv_numeric_like_ids",
    "task,worker,label\n007,NA,a\n7,null,a\n1.0,nan,b\n1,True,a\n-0,None,b\n0,N/A,a\n1e3,#N/A,b\n1000,NaN,a\n",
)
case("csv_numeric_labels_order", "task,worker,label\nt1,w1,10\nt1,w2,2\nt2,w1,-1\nt2,w2,0.5\nt3,w1,1\nt3,w2,1e0\n")
case("csv_label_number_format", "task,worker,label\nt1,w1,1\nt1,w2,1.0\nt2,w1,01\nt2,w2,2\nt3,w1,+2\n")
case("csv_label_case", "task,worker,label\nt1,w1,Cat\nt1,w2,cat\nt2,w1,CAT\nt2,w2,dog\nt3,w1,Dog\n")

# ---- whitespace
case("csv_whitespace_cells", "task,worker,label\n t1,w1 ,a\nt1 ,w2, b\nt2,\tw1,a \nt2,w2,a\n")
case("csv_whitespace_header", " task , worker,label \nt1,w1,a\nt2,w2,b\n")
case("csv_whitespace_only_cell", "task,worker,label\nt1,w1,a\nt2,   ,b\n")
case("csv_nbsp_cell", "task,worker,label\nt1,w1,a\nt1,w1\u00a0,b\nt2,\u3000w2,a\n")

# ---- repeated headers, blank rows and lines
case("csv_repeated_header", "task,worker,label\nt1,w1,a\ntask,worker,label\nt2,w1,b\ntask,worker,label\nt2,w2,a\n")
case(
    "csv_repeated_header_bom_case_spaces",
    "task,worker,label\nt1,w1,a\n\ufeffTASK , Worker,LABEL\nt2,w1,b\n Task,WORKER , label\nt2,w2,a\n",
)
case("csv_repeated_header_partial", "task,worker,label\nt1,w1,a\ntask,worker,x\nt2,w1,b\n")
case(
    "csv_repeated_header_after_bom_file",
    codecs.BOM_UTF8 + b"task,worker,label\nt1,w1,a\n" + codecs.BOM_UTF8 + b"task,worker,label\nt2,w1,b\n",
)
case("csv_blank_rows_commas", "task,worker,label\nt1,w1,a\n,,\nt2,w1,b\n, ,\n,,\n")
case("csv_whitespace_only_lines", "task,worker,label\nt1,w1,a\n   \n\t\nt2,w1,b\n \n")
case("csv_empty_lines_middle_and_end", "task,worker,label\nt1,w1,a\n\n\nt2,w1,b\n\n\n")
case("csv_fewer_fields_label_missing", "task,worker,label\nt1,w1,a\nt2,w1\nt3,w2,b\n")
case("csv_fewer_fields_extra_column", "task,worker,label,comment\nt1,w1,a,ok\nt2,w2,b\nt3,w1,a,\n")
case("csv_more_fields", "task,worker,label\nt1,w1,a\nt2,w1,b,c\n")
case("csv_trailing_comma_rows", "task,worker,label\nt1,w1,a,\nt2,w1,b,\n")
case("csv_trailing_comma_everywhere", "task,worker,label,\nt1,w1,a,\nt2,w1,b,\n")
case("csv_blank_task", "task,worker,label\nt1,w1,a\n,w2,b\n,w3,a\n")
case("csv_blank_worker", "task,worker,label\nt1,w1,a\nt2,,b\n")
case("csv_blank_label", "task,worker,label\nt1,w1,a\nt2,w1,\nt3,w1,\n")
case("csv_all_rows_blank", "task,worker,label\n,,\n,,\n")

# ---- added in issue 12 (recorded with --only from the tree that added them)
ADDED = [
    "csv_blank_label_refused", "csv_blank_label_only_answers", "csv_blank_label_and_worker", "csv_all_labels_blank",
    "jsonl_nan_and_null_labels", "jsonl_lone_surrogate", "jsonl_nul_character", "jsonl_nested_task",
    "json_mapping_null_and_nested_labels",
]
case("csv_blank_label_refused", input="csv_blank_label.csv", blank_labels="error")
case("csv_blank_label_only_answers", "task,worker,label\nt1,w1,a\nt2,w2, \nt3,w1,b\nt2,w3,\n")
case("csv_blank_label_and_worker", "task,worker,label\nt1,w1,a\nt2,,\n")
case("csv_all_labels_blank", "task,worker,label\nt1,w1,\nt2,w1,\n")
case(
    "jsonl_nan_and_null_labels",
    '{"task": "t1", "worker": "w1", "label": "a"}\n{"task": "t2", "worker": "w1", "label": NaN}\n'
    '{"task": "t2", "worker": "w2", "label": null}\n{"task": "t3", "worker": "w2"}\n{"task": "t3", "worker": "w1", "label": "b"}\n',
    ext=".jsonl",
)
case("jsonl_lone_surrogate", '{"task": "t1", "worker": "w1", "label": "a"}\n{"task": "\\ud800", "worker": "w1", "label": "a"}\n',
     ext=".jsonl")
case("jsonl_nul_character", '{"task": "t1", "worker": "w\\u0000", "label": "a"}\n', ext=".jsonl")
case("jsonl_nested_task", '{"task": "t1", "worker": "w1", "label": "a"}\n{"task": ["t2"], "worker": "w1", "label": "a"}\n',
     ext=".jsonl")
case("json_mapping_null_and_nested_labels", '{"t1": {"w1": "a", "w2": null}, "t2": {"w1": {"x": 1}}}', ext=".json")

# ---- duplicates
DUPS = "task,worker,label\nt1,w1,a\nt1,w2,b\nt1,w1,b\nt2,w1,a\nt1,w1,c\nt2,w1,a\n"
case("dups_keep", DUPS)
case("dups_first", input="dups_keep.csv", duplicates="first")
case("dups_last", input="dups_keep.csv", duplicates="last")
case("dups_error", input="dups_keep.csv", duplicates="error")
case("dups_after_strip_last", "task,worker,label\nt1,w1,a\nt1, w1,b\n", duplicates="last")

# ---- classes
case("classes_unknown_label", BASIC + "t3,w1,c\nt3,w2,d\n", classes=["a", "b"])
case("classes_unused_class", input="csv_basic.csv", classes=["b", "a", "z"])
NUMS = "task,worker,label\n" + "".join(f"t{i},w{i % 3},{v}\n" for i, v in enumerate([*range(0, 50, 2), 3]))
case("numeric_labels_too_many", NUMS)
case(
    "numeric_labels_too_many_with_classes",
    input="numeric_labels_too_many.csv",
    classes=[str(v) for v in [*range(0, 50, 2), 3]],
)
case("numeric_labels_code_1_to_25", "task,worker,label\n" + "".join(f"t{i},w1,{i}\n" for i in range(25, 0, -1)))
case("single_class", "task,worker,label\nt1,w1,yes\nt2,w1,yes\nt2,w2,yes\n")

# ---- columns: aliases, platforms, explicit names
case("alias_item_annotator_answer", "item,annotator,answer\ni1,a1,x\ni1,a2,y\ni2,a1,x\n")
case("alias_two_label_candidates", "task,worker,answer,response\nt1,w1,a,b\n")
case("alias_canonical_wins", "task,item,worker,label,answer\nt1,i1,w1,a,b\nt2,i2,w1,b,a\n")
case("header_missing_worker", "task,label\nt1,a\n")
case("header_column_twice", "task,worker,label,label\nt1,w1,a,b\n")
case(
    "mturk_batch",
    "HITId,HITTypeId,WorkerId,AssignmentStatus,Input.text,Answer.sentiment\n"
    'H1,T,W1,Approved,"good, really",positive\nH1,T,W2,Approved,"good, really",negative\nH2,T,W1,Approved,meh,neutral\n',
)
case(
    "toloka_tsv",
    "INPUT:image\tOUTPUT:result\tGOLDEN:result\tHINT:text\tASSIGNMENT:task_id\tASSIGNMENT:worker_id\tASSIGNMENT:status\n"
    "http://x/1.jpg\tcat\t\t\tT1\tW1\tAPPROVED\nhttp://x/1.jpg\tdog\t\t\tT1\tW2\tAPPROVED\nhttp://x/2.jpg\tcat\tcat\t\tT2\tW1\tAPPROVED\n",
    ext=".tsv",
)
case("explicit_columns", "Q,Who,A,B\nq1,p1,x,1\nq1,p2,y,2\nq2,p1,x,1\n", task_col="Q", worker_col="Who", label_col="A")
case("explicit_column_stripped", " Q , Who,A\nq1,p1,x\n", task_col="Q", worker_col=" Who ", label_col="A")
case("explicit_column_missing", input="explicit_columns.csv", task_col="q", worker_col="Who", label_col="A")

# ---- TSV and .txt
case("tsv_basic", BASIC.replace(",", "\t"), ext=".tsv")
case("tsv_quote_in_cell", 'task\tworker\tlabel\nt"1\tw1\ta\n"t2"\tw1\t"b\n', ext=".tsv")
case("tsv_more_fields", "task\tworker\tlabel\nt1\tw1\ta\nt2\tw1\tb\tc\n", ext=".tsv")
case("txt_tabs", BASIC.replace(",", "\t"), ext=".txt")
case(
    "txt_utf16_tabs_excel",
    codecs.BOM_UTF16_LE + BASIC.replace(",", "\t").replace("\n", "\r\n").encode("utf-16-le"),
    ext=".txt",
)
case("txt_json_list", '[{"task": "t1", "worker": "w1", "label": "a"}]', ext=".txt")
case(
    "txt_jsonl",
    '{"task": "t1", "worker": "w1", "label": "a"}\n{"task": "t2", "worker": "w1", "label": "b"}\n',
    ext=".txt",
)
case("txt_json_mapping_one_line", '{"t1": {"w1": "a", "w2": "b"}}\n', ext=".txt")
case("format_override_tsv", BASIC.replace(",", "\t"), ext=".csv", input_format="TSV")

# ---- JSON
case(
    "json_records_numbers",
    '[{"task": 1, "worker": 7, "label": 1.10},\n {"task": 2, "worker": 7, "label": 1E2},\n'
    ' {"task": "2", "worker": 8, "label": 1.1},\n {"task": 3, "worker": -0, "label": true}]\n',
    ext=".json",
)
case(
    "json_records_null_label",
    '[{"task": "t1", "worker": "w1", "label": "a"}, {"task": "t2", "worker": "w1", "label": null}]',
    ext=".json",
)
case(
    "json_records_nested_values",
    '[{"task": "t1", "worker": "w1", "label": {"x": [1, "é"]}}, {"task": "t1", "worker": "w2", "label": [1,2]}]',
    ext=".json",
)
case(
    "json_records_key_order_extra",
    '[{"label": "a", "worker": "w1", "task": "t1", "extra": 1}, {"task": "t2", "worker": "w1", "label": "b", "more": null}]',
    ext=".json",
)
case("json_records_repeated_key", '[{"task": "t1", "worker": "w1", "label": "a", "label": "b"}]', ext=".json")
case(
    "json_malformed",
    '[{"task": "t1", "worker": "w1", "label": "a"},\n {"task": "t2", "worker": "w1" "label": "b"}]',
    ext=".json",
)
case("json_single_record", '{"task": "t1", "worker": "w1", "label": "a"}', ext=".json")
case("json_mapping", '{"t1": {"w1": "a", "w2": "b"}, "t2": {"w1": "a"}}', ext=".json")
case("json_mapping_repeated_worker", '{"t1": {"w1": "a", "w2": "b", "w1": "b"}, "t2": {"w1": "a"}}', ext=".json")
case("json_mapping_repeated_worker_error", input="json_mapping_repeated_worker.json", duplicates="error")
case("json_mapping_repeated_task", '{"t1": {"w1": "a"}, "t2": {"w1": "b"}, "t1": {"w2": "b"}}', ext=".json")
case("json_mapping_empty_task", '{"t1": {"w1": "a"}, "t0": {}, "t2": {"w1": "b", "w2": "b"}}', ext=".json")
case("json_mapping_all_empty", '{"t1": {}, "t2": {}}', ext=".json")
case("json_mapping_all_empty_with_classes", input="json_mapping_all_empty.json", classes=["a", "b"])
case("json_mapping_numbers", '{"1": {"7": 1, "8": 1.0}, "2": {"7": 2}}', ext=".json")


# ---- Label Studio
def _ls_ann(aid: int, who: Any, choice: list[str] | None, *, cancelled: bool = False, name: str = "sentiment") -> dict:
    result = (
        []
        if choice is None
        else [{"id": f"r{aid}", "type": "choices", "from_name": name, "to_name": "text", "value": {"choices": choice}}]
    )
    return {"id": aid, "completed_by": who, "result": result, "was_cancelled": cancelled, "ground_truth": False}


LABEL_STUDIO = [
    {
        "id": 101,
        "data": {"text": "good"},
        "annotations": [_ls_ann(1, 1, ["Positive"]), _ls_ann(2, {"id": 2, "email": "a@x.org"}, ["Negative"])],
    },
    {
        "id": 102,
        "data": {"text": "meh"},
        "annotations": [_ls_ann(3, 1, ["Neutral"]), _ls_ann(4, 3, None, cancelled=True), _ls_ann(5, 2, None)],
    },
    {"id": 103, "data": {"text": "bad"}, "annotations": [], "predictions": []},
    {"id": 104, "data": {"text": "ok"}, "annotations": [_ls_ann(6, 3, ["Positive"])]},
]
case("label_studio_export", json.dumps(LABEL_STUDIO, indent=1), ext=".json")
case("label_studio_task_col", input="label_studio_export.json", task_col="id")
LS_TWO = [
    {
        "id": 1,
        "annotations": [
            {
                "id": 1,
                "completed_by": 5,
                "result": [
                    {"type": "choices", "from_name": "topic", "value": {"choices": ["sport"]}},
                    {"type": "choices", "from_name": "tone", "value": {"choices": ["calm"]}},
                ],
            }
        ],
    },
    {"id": 2, "completions": [], "data": {}},
]
case("label_studio_two_controls", json.dumps(LS_TWO), ext=".json")
case("label_studio_pick_control", input="label_studio_two_controls.json", label_col="tone")

# ---- JSON Lines
case(
    "jsonl_basic",
    '{"task": "t1", "worker": "w1", "label": "a"}\n{"task": "t2", "worker": "w1", "label": "b"}\n',
    ext=".jsonl",
)
case(
    "jsonl_blank_lines_crlf",
    '\r\n{"task": "t1", "worker": "w1", "label": "a"}\r\n   \r\n{"task": "t2", "worker": "w1", "label": "b"}\r\n\r\n',
    ext=".jsonl",
)
case(
    "jsonl_u2028_in_value",
    '{"task": "t\u20281", "worker": "w\u00851", "label": "a"}\n{"task": "t2", "worker": "w1", "label": "b"}\n',
    ext=".ndjson",
)
case(
    "jsonl_malformed_line",
    '{"task": "t1", "worker": "w1", "label": "a"}\n\n{"task": "t2", "worker": "w1", "label": }\n',
    ext=".jsonl",
)
case(
    "jsonl_numbers",
    '{"task": 1, "worker": 2, "label": 0}\n{"task": 1.0, "worker": 2, "label": 1}\n{"task": 1.5e1, "worker": -0, "label": 1}\n',
    ext=".jsonl",
)

# ---- gzip
case("gzip_csv", gz(BASIC), ext=".csv.gz")
case("gzip_tsv_sniffed", gz(BASIC.replace(",", "\t")), ext=".gz")
case("gzip_utf16", gz(codecs.BOM_UTF16_LE + BASIC.encode("utf-16-le")), ext=".csv.gz")
case("gzip_two_members", gz("task,worker,label\nt1,w1,a\n") + gz("t2,w1,b\n"), ext=".csv.gz")
case("gzip_truncated", gz(BASIC * 5)[:-12], ext=".csv.gz")

# ---- streams (no file name: the format is sniffed)
case("stream_csv", BASIC, ext=".bin", source="stream")
case("stream_json_mapping", '{"t1": {"w1": "a"},\n "t2": {"w1": "b"}}', ext=".bin", source="stream")

# ---- read_task_labels (truth files)
case("truth_basic", TRUTH, func="read_task_labels")
case("truth_dup_same_label", "task,label\nt1,a\nt2,b\nt1,a\n", func="read_task_labels")
case("truth_dup_different_label", "task,label\nt1,a\nt2,b\nt1,b\n", func="read_task_labels")
case("truth_blank_rows", "task,label\nt1,a\n,\n\nt2,b\n , \n", func="read_task_labels")
case("truth_repeated_header", "task,label\nt1,a\nTask, LABEL\nt2,b\n\ufefftask,label\n", func="read_task_labels")
case("truth_blank_label", "task,label\nt1,a\nt2,\n", func="read_task_labels")
case("truth_fewer_fields", "task,label\nt1,a\nt2\n", func="read_task_labels")
case(
    "truth_jsonl_numbers",
    '{"task": 1, "label": 1.0}\n{"task": "2", "label": 0}\n',
    ext=".jsonl",
    func="read_task_labels",
)
case(
    "truth_tsv_explicit",
    "id\ttruth\tlabel\nt1\ta\tz\nt2\tb\tz\n",
    ext=".tsv",
    func="read_task_labels",
    task_col="id",
    label_col="truth",
)


# --------------------------------------------------------------------------- recording
def _case_text(record: dict[str, Any]) -> str:
    """JSON with one line per key of the case and of its outcome (short diffs, easy to read)."""

    def dump(value: Any) -> str:
        return json.dumps(value, ensure_ascii=False)

    lines = [f" {dump(k)}: {dump(v)}," for k, v in record.items() if k != "outcome"]
    inner = [f"  {dump(k)}: {dump(v)}" for k, v in record["outcome"].items()]
    text = "{\n" + "\n".join(lines) + '\n "outcome": {\n' + ",\n".join(inner) + "\n }\n}\n"
    assert json.loads(text) == record
    return text


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    default = Path(os.environ.get("CROWDAGG_DATASETS", HERE.parents[1] / "shared" / "datasets"))
    parser.add_argument("--datasets", type=Path, default=default, help="the real datasets (default %(default)s)")
    parser.add_argument("--out", type=Path, default=HERE / "golden", help="golden folder (default %(default)s)")
    parser.add_argument("--only", nargs="+", metavar="NAME", help="re-record these cases only (their inputs too)")
    args = parser.parse_args()

    import crowdagg

    print(f"recording with crowdagg from {crowdagg.__file__}", file=sys.stderr)
    harness = _harness()
    out: Path = args.out
    inputs, cases_dir = out / "inputs", out / "cases"
    if args.only:
        by_name = {c["name"]: c for c in CASES}
        unknown = [n for n in args.only if n not in by_name]
        if unknown:
            parser.error(f"unknown case(s): {', '.join(unknown)}")
        for name in args.only:
            c = by_name[name]
            (inputs / c["input"]).write_bytes(FILES[c["input"]])
            outcome = harness.run_case(c, inputs)
            (cases_dir / f"{name}.json").write_text(_case_text({**c, "outcome": outcome}), encoding="utf-8")
        print(f"re-recorded {len(args.only)} case(s)", file=sys.stderr)
        return 0
    for d in (inputs, cases_dir):
        if d.exists():
            shutil.rmtree(d)
        d.mkdir(parents=True)
    for name, data in FILES.items():
        (inputs / name).write_bytes(data)
    for c in CASES:
        outcome = harness.run_case(c, inputs)
        (cases_dir / f"{c['name']}.json").write_text(_case_text({**c, "outcome": outcome}), encoding="utf-8")
    print(f"{len(CASES)} cases, {len(FILES)} inputs", file=sys.stderr)

    if args.datasets.is_dir():
        goldens = {}
        with tempfile.TemporaryDirectory(prefix="crowdagg-golden-") as tmp:
            for key in harness.dataset_keys(args.datasets):
                goldens[key] = harness.run_dataset_key(args.datasets, key, Path(tmp))
                for p in Path(tmp).iterdir():
                    p.unlink()
        text = json.dumps(goldens, ensure_ascii=False, indent=1, sort_keys=True)
        (out / "datasets.json").write_text(text + "\n", encoding="utf-8")
        print(f"{len(goldens)} dataset digests from {args.datasets}", file=sys.stderr)
    else:
        print(f"no datasets at {args.datasets}: datasets.json not written", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
