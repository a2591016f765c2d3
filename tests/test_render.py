"""Rows to bytes: one float policy, formats the readers read back exactly."""

from __future__ import annotations

import io
import json

import numpy as np
import pandas as pd
import pytest

from crowdagg.errors import DataError, UsageError
from crowdagg.io import load_annotations, read_task_labels
from crowdagg.render import float_text, render_table

FLOATS = np.array([0.1, 1.2e-10, 1.0, 1 / 3, 5e-324, 0.9999999999999999, 123456789.123, 0.0])


def table(**extra):
    n = len(FLOATS)
    cols = {
        "task": np.array([f"t{i}" for i in range(n)], dtype=object),
        "label": np.array(["a", "b"] * (n // 2), dtype=object),
        "confidence": FLOATS,
        "n_answers": np.arange(n),
    }
    cols.update(extra)
    return cols


def test_float_text_is_the_shortest_round_trip():
    assert float_text(FLOATS) == [repr(float(v)) for v in FLOATS]
    assert float_text(np.array([1.2e-10]))[0] == "1.2e-10"  # not rounded to 0.0
    with pytest.raises(DataError, match="non-finite"):
        float_text(np.array([1.0, np.nan]))


@pytest.mark.parametrize("fmt", ["csv", "tsv", "jsonl", "json"])
def test_every_format_reads_back_exactly(fmt):
    text = render_table(table(), fmt).decode()
    if fmt == "csv":
        back = pd.read_csv(io.StringIO(text), dtype={"task": str, "label": str})
    elif fmt == "tsv":
        back = pd.read_csv(io.StringIO(text), sep="\t", dtype={"task": str})
    elif fmt == "jsonl":
        back = pd.DataFrame([json.loads(x) for x in text.splitlines()])
    else:
        back = pd.DataFrame(json.loads(text))
    np.testing.assert_array_equal(back["confidence"].to_numpy(), FLOATS)  # bit-exact
    assert back["task"].tolist() == [f"t{i}" for i in range(len(FLOATS))]
    assert back["n_answers"].tolist() == list(range(len(FLOATS)))


def test_csv_quotes_only_what_needs_it():
    cols = {"task": np.array(['a,b', 'say "hi"', "two\nlines", "plain"], dtype=object), "x": np.arange(4)}
    text = render_table(cols, "csv").decode()
    assert text.splitlines()[1] == '"a,b",0'
    assert '"say ""hi"""' in text and "plain,3" in text
    back = pd.read_csv(io.StringIO(text), dtype=str)
    assert back["task"].tolist() == ["a,b", 'say "hi"', "two\nlines", "plain"]


@pytest.mark.parametrize(("bad", "what"), [("a\tb", "a tab"), ("a\nb", "a newline"), ("a\rb", "a carriage return")])
def test_tsv_refuses_values_it_cannot_write_naming_the_task(bad, what):
    cols = {"task": np.array(["t1", "t2"], dtype=object), "label": np.array(["x", bad], dtype=object)}
    with pytest.raises(DataError, match=f"task 't2' has {what} in column 'label'"):
        render_table(cols, "tsv", key="task")


def test_tsv_output_is_read_back_by_the_tsv_reader():
    cols = {
        "task": np.array(['"quoted', "t,2"], dtype=object),
        "worker": np.array(["w1", "w2"], dtype=object),
        "label": np.array(["a", "b"], dtype=object),
    }
    data = load_annotations(io.BytesIO(render_table(cols, "tsv")), input_format="tsv")
    assert list(data.task_names) == ['"quoted', "t,2"]


def test_json_escapes_and_keeps_unicode():
    cols = {"task": np.array(['q"\\', "é\u2028x"], dtype=object), "p": np.array([1e-300, 0.5])}
    text = render_table(cols, "jsonl").decode()
    rows = [json.loads(line) for line in text.split("\n") if line]
    assert [r["task"] for r in rows] == ['q"\\', "é\u2028x"]
    assert rows[0]["p"] == 1e-300
    assert "é" in text  # UTF-8, not \\u escapes


def test_json_output_round_trips_through_the_jsonl_reader():
    cols = {
        "task": np.array(["a\u2028b", "c"], dtype=object),
        "worker": np.array(["w", "w"], dtype=object),
        "label": np.array(["x", "y"], dtype=object),
    }
    data = load_annotations(io.BytesIO(render_table(cols, "jsonl")), input_format="jsonl")
    assert list(data.task_names) == ["a\u2028b", "c"]
    truth = read_task_labels(io.BytesIO(render_table(cols, "json")), input_format="json")
    assert truth == {"a\u2028b": "x", "c": "y"}


def test_empty_tables_and_unknown_format():
    empty = {"task": np.array([], dtype=object), "p": np.array([], dtype=float)}
    assert render_table(empty, "csv") == b"task,p\n"
    assert render_table(empty, "json") == b"[]\n"
    assert render_table(empty, "jsonl") == b""
    with pytest.raises(UsageError):
        render_table(empty, "xml")


def test_dataframe_input_is_accepted():
    frame = pd.DataFrame({"task": ["x"], "p": [0.25]})
    assert render_table(frame, "csv") == b"task,p\nx,0.25\n"
