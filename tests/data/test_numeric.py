"""Numeric answers: read by the categorical readers with their guarantees, and built from codes."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pandas as pd
import pytest

from crowdagg import load_numeric
from crowdagg.data.numeric import NumericAnswers
from crowdagg.errors import CrowdaggWarning, DataError

ROWS = [("t1", "a", "1.5"), ("t1", "b", "2"), ("t2", "a", "-3e1"), ("t3", "c", "0.1"), ("t2", "b", "4")]


def write(tmp_path, kind):
    frame = pd.DataFrame(ROWS, columns=["task", "worker", "value"])
    p = tmp_path / f"answers.{kind}"
    if kind == "csv":
        frame.to_csv(p, index=False)
    elif kind == "tsv":
        frame.to_csv(p, index=False, sep="\t")
    elif kind == "json":
        p.write_text(json.dumps([{"task": t, "worker": w, "value": float(v)} for t, w, v in ROWS]))
    elif kind == "jsonl":
        p.write_text("".join(json.dumps({"item": t, "annotator": w, "answer": float(v)}) + "\n" for t, w, v in ROWS))
    elif kind == "parquet":
        frame.assign(value=frame["value"].astype(float)).to_parquet(p)
    elif kind == "csv.gz":
        p.write_bytes(gzip.compress(frame.to_csv(index=False).encode()))
    return p


@pytest.mark.quick
@pytest.mark.parametrize("kind", ["csv", "tsv", "json", "jsonl", "parquet", "csv.gz"])
def test_every_reader_gives_the_same_answers(tmp_path, kind):
    data = load_numeric(write(tmp_path, kind))
    assert data.task_names.tolist() == ["t1", "t2", "t3"] and data.worker_names.tolist() == ["a", "b", "c"]
    assert data.task.tolist() == [0, 0, 1, 1, 2]  # sorted by task, each task's answers in input order
    assert data.value.tolist() == [1.5, 2.0, -30.0, 4.0, 0.1]
    assert data.value.dtype == np.float64 and not data.value.flags.writeable


def test_a_dataframe_a_glob_and_several_files(tmp_path):
    frame = pd.DataFrame({"task": [1, 1, 2], "worker": ["x", "y", "x"], "value": [0.1, 1 / 3, 2.0]})
    assert load_numeric(frame).value.tolist() == [0.1, 1 / 3, 2.0]  # floats survive their text exactly
    (tmp_path / "b1.csv").write_text("task,worker,value\nt1,a,1\n")
    (tmp_path / "b2.csv").write_text("question,rater,response\nt1,b,3\nt2,a,5\n")
    data = load_numeric([str(tmp_path / "b*.csv")])
    assert data.value.tolist() == [1.0, 3.0, 5.0] and data.n_tasks == 2


@pytest.mark.parametrize(("policy", "kept"), [("keep", [1.0, 2.0, 5.0]), ("first", [1.0, 2.0]),
                                              ("last", [2.0, 5.0])])
def test_the_duplicates_policy(tmp_path, policy, kept):
    p = tmp_path / "d.csv"
    p.write_text("task,worker,value\nt,a,1\nt,b,2\nt,a,5\n")
    with pytest.warns(CrowdaggWarning, match="1 duplicate answer"):
        assert load_numeric(p, duplicates=policy).value.tolist() == kept


def test_a_duplicate_refused_names_its_line(tmp_path):
    p = tmp_path / "d.csv"
    p.write_text("task,worker,value\nt,a,1\nt,b,2\nt,a,5\n")
    with pytest.raises(DataError, match=r"duplicate answer at .*d.csv line 4: worker 'a' already labelled task 't'"):
        load_numeric(p, duplicates="error")


@pytest.mark.parametrize(("cell", "what"), [("abc", "not a number"), ("inf", "not finite"), ("-Infinity", "not finite"),
                                            ("nan", "not finite"), ("1_000", "not a number"), ("1,5", None)])
def test_a_value_that_is_not_a_finite_number_names_file_line_and_value(tmp_path, cell, what):
    p = tmp_path / "bad.csv"
    p.write_text(f'task,worker,value\nt1,a,2\nt2,a,"{cell}"\nt3,b,{cell if "," not in cell else 3}\n')
    if what is None:  # a decimal comma is text, not a number
        what = "not a number"
    with pytest.raises(DataError) as exc:
        load_numeric(p)
    assert str(exc.value).startswith(f"value {cell!r} at {p} line 3 is {what}: numeric answers are finite numbers")


def test_a_blank_value_is_a_skipped_answer_and_its_task_keeps_its_row(tmp_path):
    p = tmp_path / "b.csv"
    p.write_text("task,worker,value\nt1,a,2\nt2,a,\n")
    with pytest.warns(CrowdaggWarning, match=r"skipped 1 answer\(s\) with a blank label \(first at .*line 3\)"):
        data = load_numeric(p)
    assert data.n_tasks == 2 and data.answers_per_task.tolist() == [1, 0]
    with pytest.raises(DataError, match="blank label"):
        load_numeric(p, blank_labels="error")


def test_from_codes_checks_what_it_is_given():
    data = NumericAnswers.from_codes([1, 0, 1], [0, 1, 1], [3.0, 1.0, 2.0], task_names=["x", "y"])
    assert data.task.tolist() == [0, 1, 1] and data.value.tolist() == [1.0, 3.0, 2.0]
    assert data.task_names.tolist() == ["x", "y"]
    with pytest.raises(DataError, match="value at position 1 is nan"):
        NumericAnswers.from_codes([0, 0], [0, 1], [1.0, np.nan])
    with pytest.raises(DataError, match="task code"):
        NumericAnswers.from_codes([0, -1], [0, 1], [1.0, 2.0])
    with pytest.raises(DataError, match="equal lengths"):
        NumericAnswers.from_codes([0, 1], [0, 1], [1.0])
    given = np.array([1.0, 2.0])
    NumericAnswers.from_codes([0, 0], [0, 1], given)
    assert given.flags.writeable  # the caller's array is copied, never frozen


@pytest.mark.quick
def test_booleans_and_integers_beyond_float_are_data_errors_in_the_library_too():
    """Hostile input: from_codes and with_values took booleans as 1 and 0 (the readers refuse 'true' as not a
    number), and a Python integer beyond float64 (10**400) raised a bare OverflowError."""
    with pytest.raises(DataError, match="value holds booleans"):
        NumericAnswers.from_codes([0, 1], [0, 0], [True, False])
    data = NumericAnswers.from_codes([0], [0], [1.0])
    with pytest.raises(DataError, match="value holds booleans"):
        data.with_values(np.array([True]))
    with pytest.raises(DataError, match="value must be numbers"):
        NumericAnswers.from_codes([0], [0], [10**400])
    # integers that fit, numbers as text and numpy's own types are numbers
    assert NumericAnswers.from_codes([0, 0, 0], [0, 1, 2], [10**300, "2.5", np.int8(-3)]).value.tolist() == [
        1e300, 2.5, -3.0]


@pytest.mark.quick
def test_the_constructor_checks_and_sorts_what_it_is_given():
    """Hostile input: NumericAnswers(...) took anything -- a task code past the vocabulary was a bare numpy
    ValueError at fit time, a worker code past it reached the kernels, lists an AttributeError, and answers not
    sorted by task were averaged into the wrong tasks (task 0 got task 1's value)."""
    from crowdagg import aggregate
    from crowdagg.data.vocab import Vocabulary
    from crowdagg.errors import UsageError

    def make(task, worker, value, **kw):
        return NumericAnswers(task=task, worker=worker, value=value, tasks=Vocabulary.range(2),
                              workers=Vocabulary.range(2), **kw)

    given = np.array([1, 0, 1])
    data = make(given, [0, 1, 1], [10.0, 2.0, 20.0])
    assert data.task.tolist() == [0, 1, 1] and data.worker.tolist() == [1, 0, 1]
    assert data.value.tolist() == [2.0, 10.0, 20.0] and not data.value.flags.writeable
    assert given.tolist() == [1, 0, 1]  # the caller's array is left as it was
    assert aggregate(data, "mean", numeric=True).values.tolist() == [2.0, 15.0]
    for task, worker, value, message in (([0, 7], [0, 0], [1.0, 2.0], "task code 7 at position 1 is out of range"),
                                         ([0, -1], [0, 0], [1.0, 2.0], "task code -1"),
                                         ([0, 0], [0, 5], [1.0, 2.0], "worker code 5"),
                                         ([0, 0], [0, 1], [1.0], "value has 1 answers, task 2"),
                                         ([0, 0], [0, 1], [1.0, np.nan], "value at position 1 is nan")):
        with pytest.raises(DataError, match=message):
            make(task, worker, value)
    with pytest.raises(UsageError, match="duplicates must be one of"):
        make([0], [0], [1.0], duplicates="sometimes")
    with pytest.raises(UsageError, match="n_duplicates must be a count"):
        make([0], [0], [1.0], n_duplicates=-1)
    # what the package builds itself is not checked again, and keeps its own arrays
    built = NumericAnswers.from_codes([1, 0], [0, 0], [3.0, 4.0])
    assert built.with_values(built.value * 2).value.tolist() == [8.0, 6.0]


@pytest.mark.quick
def test_a_decimal_comma_or_thousands_separator_is_told_how_to_write_the_number(tmp_path):
    """A spreadsheet's '1,5' (or '1,000') was 'not a number' and no more: the one likely cause is named."""
    for cell in ("1,5", "-2,25e3", "1,000,000"):
        p = tmp_path / "answers.csv"
        p.write_text(f'task,worker,value\nt1,a,2\nt1,b,"{cell}"\n')
        with pytest.raises(DataError, match=rf"value '{cell}' at .*answers.csv line 3 is not a number: numeric "
                                            "answers are finite numbers written with a point for decimals and "
                                            r"no separator for thousands \(1 answer"):
            load_numeric(p)
    p.write_text('task,worker,value\nt1,a,"1,x"\n')
    with pytest.raises(DataError, match=r"'1,x' .* is not a number: numeric answers are finite numbers \(1 answer"):
        load_numeric(p)


@pytest.mark.quick
def test_the_answer_containers_share_one_base_and_annotations_never_imports_numeric():
    """annotations.py is the lower module: it knows numeric answers only by the marker of the base both
    containers share (FlatAnswers.numeric), and numeric.py finishes a numeric read itself."""
    import ast
    import inspect

    from crowdagg.data import annotations
    from crowdagg.data.annotations import AnnotationSet, FlatAnswers, check_annotations, decode_answers, encode_columns
    from crowdagg.errors import UsageError

    tree = ast.parse(inspect.getsource(annotations))
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert not {m for m in imported if m and m.endswith("numeric")}, imported

    values = NumericAnswers.from_codes([1, 0, 1, 2], [0, 1, 1, 0], [4.0, 2.0, 6.0, 1.0], n_workers=3)
    labels = AnnotationSet.from_codes([1, 0, 1, 2], [0, 1, 1, 0], [1, 0, 1, 0], n_workers=3)
    assert isinstance(values, FlatAnswers) and isinstance(labels, FlatAnswers)
    assert values.numeric and not labels.numeric
    for name in ("n_tasks", "n_workers", "n_answers", "task_ptr", "answers_per_task", "answers_per_worker"):
        np.testing.assert_array_equal(getattr(values, name), getattr(labels, name))
    assert values.task_ptr.tolist() == [0, 1, 3, 4] and values.answers_per_worker.tolist() == [2, 2, 0]
    assert values.task_names.tolist() == ["0", "1", "2"] and len(values) == 4
    with pytest.raises(TypeError, match="unknown NumericAnswers fields: label"):
        NumericAnswers._trusted(label=None)
    with pytest.raises(UsageError, match=r"split\(data\): numeric answers take a numeric method \(mean, median"):
        check_annotations(values, "split(data)")

    # the shared steps of a read, then numeric.py's finish: the reader's answers
    encoder, dtypes, _ = encode_columns([list(col) for col in zip(*ROWS)])
    read = NumericAnswers._from_decoded(decode_answers(encoder, dtypes=dtypes), duplicates="keep")
    frame = pd.DataFrame(ROWS, columns=["task", "worker", "value"])
    want = load_numeric(frame)
    for name in ("task", "worker", "value", "task_ptr"):
        np.testing.assert_array_equal(getattr(read, name), getattr(want, name))
    assert read.task_names.tolist() == want.task_names.tolist() == ["t1", "t2", "t3"]
